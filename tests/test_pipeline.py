"""recipes/pipeline_cpu.sh end to end on a tiny model: SFT -> GRPO -> one report comparing three checkpoints."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from test_warm_start import _sft_yaml

from faithgrpo.watchdog import run_with_deadline

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_pipeline_reports_base_sft_and_grpo_side_by_side(tmp_path, tiny_llama_path):
    out = tmp_path / "pipeline"
    cache = tmp_path / "cache"
    env = {
        **os.environ,
        "PYTHON": sys.executable,
        "OUT": str(out),
        "MODEL": str(tiny_llama_path),
        "EVAL_FLAGS": "--tasks causal_graph --prompts 2 --samples 2 --k 1,2 --max-new-tokens 8 --hints none "
        "--faithfulness-pairs 2 --bootstrap 20",
    }
    grpo_flags = [
        "--warm_start_config", str(_sft_yaml(tmp_path / "sft.yaml", tiny_llama_path)),
        "--warm_start_cache", str(cache),
        "--max_steps", "1", "--logging_steps", "1", "--max_completion_length", "8", "--save_strategy", "no",
    ]  # fmt: skip
    done = run_with_deadline(
        ["bash", str(ROOT / "recipes" / "pipeline_cpu.sh"), *grpo_flags], env=env, timeout=1200
    )
    assert done.returncode == 0, done.log()
    (sft_dir,) = cache.iterdir()
    report = json.loads((out / "eval" / "report.json").read_text())
    assert [(c["label"], c["adapter"]) for c in report["checkpoints"]] == [
        ("base", None),
        ("sft", str(sft_dir)),
        ("grpo", str(out / "grpo")),
    ]
    assert all(c["model"] == str(tiny_llama_path) for c in report["checkpoints"])
    markdown = (out / "eval" / "report.md").read_text()
    assert all(f"{label} (" in markdown for label in ("base", "sft", "grpo"))
    assert f"report: {out}/eval/report.md" in done.stdout
