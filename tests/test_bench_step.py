"""benchmarks/bench_step.py --phases: per-phase step profile (issue 16)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_step", ROOT / "benchmarks" / "bench_step.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_summary_derives_decode_other_and_shares_within_each_step(bench):
    steps = [
        {"step": 10.0, "training_step": 9.5, "generation": 4.0, "generate": 3.5, "prefill": 0.5,
         "rewards": 2.0, "reward/cros": 1.5, "reward/format": 0.1, "loss_forward": 1.0, "backward": 2.0},
        {"step": 20.0, "training_step": 19.0, "generation": 10.0, "generate": 9.0, "prefill": 1.0,
         "rewards": 2.0, "reward/cros": 1.0, "reward/format": 0.2, "loss_forward": 2.0, "backward": 4.0},
        {"step": 12.0, "training_step": 11.0, "generation": 6.0, "generate": 5.0, "prefill": 1.0,
         "rewards": 3.0, "reward/cros": 2.0, "reward/format": 0.4, "loss_forward": 1.0, "backward": 1.0},
    ]  # fmt: skip
    counts = [{"completion_tokens": 100, "completions": 4}] * 3
    summary = bench.summarize_phases(steps, counts)
    per_step = summary["per_step_s"]
    assert [r["decode"] for r in per_step] == [3.0, 8.0, 4.0]
    assert [r["other"] for r in per_step] == [1.0, 2.0, 1.0]  # step - generation - rewards - loss - backward
    assert [r["rewards_other"] for r in per_step] == pytest.approx([0.4, 0.8, 0.6], abs=1e-3)
    assert summary["median_s"]["step"] == 12.0
    assert summary["median_s"]["generation"] == 6.0
    # shares are per step, then the median: generation 0.4, 0.5, 0.5 -> 0.5 (not 6.0 / 12.0 by chance)
    assert summary["median_share_of_step"]["generation"] == 0.5
    assert summary["median_share_of_step"]["reward/cros"] == 0.15  # of 0.15, 0.05, 0.1667
    assert "step" not in summary["median_share_of_step"]
    # 96 decoded tokens (the first of each of 4 completions comes from the prefill) over decode seconds
    assert summary["tokens_per_s"]["decode"] == pytest.approx(sorted([96 / 3, 96 / 8, 96 / 4])[1], abs=0.1)
    assert summary["tokens_per_s"]["generation"] == pytest.approx(100 / 6, abs=0.1)
    assert summary["tokens"]["completion_tokens"] == [100, 100, 100]


def test_profiler_phases_nest_accumulate_and_see_rss(bench):
    profiler = bench.PhaseProfiler(interval=0.001)
    profiler.start_sampling()
    try:
        profiler.step_begin()
        with profiler.phase("rewards"):
            with profiler.phase("reward/cros"):
                block = bytearray(64 * 1024 * 1024)  # 64 MiB, touched: resident while the phase runs
                block[::4096] = b"x" * len(block[::4096])
                time.sleep(0.05)
                # the sampler thread must see the block; on a loaded machine it may not run within
                # the sleep, so wait for it (a sampler that never does fails the assertion below)
                deadline = time.monotonic() + 60
                while profiler.peaks["reward/cros"] < profiler.start_rss + 48 * 2**20:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.005)
                del block
            with profiler.phase("reward/cros"):
                time.sleep(0.02)
        profiler.count("completion_tokens", 7)
        profiler.step_end()
    finally:
        profiler.stop_sampling()
    (step,) = profiler.steps
    assert step["reward/cros"] >= 0.07  # two entries accumulate
    assert step["rewards"] >= step["reward/cros"]
    assert step["step"] >= step["rewards"]
    assert profiler.counts == [{"completion_tokens": 7}]
    assert profiler.peaks["reward/cros"] >= profiler.start_rss + 48 * 1024 * 1024
    assert profiler.peaks["step"] >= profiler.peaks["reward/cros"]


@pytest.mark.slow
def test_phases_mode_profiles_a_tiny_run(tmp_path):
    """--phases on a tiny random Llama: every phase of the step is timed, the JSON adds up."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TMPDIR": str(tmp_path)}
    command = [
        sys.executable, str(ROOT / "benchmarks" / "bench_step.py"), "--phases", "--tiny",
        "--warmup_steps", "1", "--phase_steps", "2", "--recipe_args", "--warm_start_config none",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["benchmark"] == "grpo_step_phases"
    assert result["timed_steps"] == 2 and len(result["per_step_s"]) == 2
    assert result["rewards"] == ["outcome", "format", "trace_format", "cros", "calver"]
    for row in result["per_step_s"]:
        for phase in ("generation", "generate", "prefill", "decode", "rewards", "loss_forward", "backward"):
            assert row[phase] > 0, phase
        for name in result["rewards"]:
            assert f"reward/{name}" in row
        parts = row["generation"] + row["rewards"] + row["loss_forward"] + row["backward"] + row["other"]
        assert parts == pytest.approx(row["step"], abs=5e-3)
        assert row["prefill"] + row["decode"] == pytest.approx(row["generate"], abs=5e-3)
        assert row["generate"] <= row["generation"] + 1e-3
    assert result["tokens"]["completions"] == [4, 4]
    assert all(0 < t <= 4 * 16 for t in result["tokens"]["completion_tokens"])
    memory = result["memory_gib"]
    assert memory["process_peak_rss"] >= memory["peak_rss_in_phase"]["step"] > 0
    assert len(memory["rss_at_step_end"]) == 3
