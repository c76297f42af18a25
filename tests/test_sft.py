"""Gold-trace SFT: the rows carry correct traces, and the recipe trains a LoRA adapter on them."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from faithgrpo.rewards.calver.reward import score_trace
from faithgrpo.tasks.knights_knaves.checker import kk_cot_correct
from faithgrpo.tasks.sft import build_sft_dataset

RECIPE = Path(__file__).resolve().parents[1] / "recipes" / "sft_traces.py"
MIX = {
    "size": 40,
    "seed": 3,
    "causal": {"min_nodes": 4, "max_nodes": 5},
    "story_fraction": 0.5,
    "mixture": {"knights_knaves": 0.3, "basic_arithmetic": 0.3},
}


def test_sft_rows_are_verified_gold_traces_of_the_tasks_that_have_one():
    dataset, counts = build_sft_dataset(MIX)
    assert set(counts) == {"causal_graph", "causal_story", "knights_knaves"}  # arithmetic has no trace
    assert len(dataset) == sum(counts.values()) < MIX["size"]

    from faithgrpo.tasks.mix import build_dataset

    source = {json.dumps(r["prompt"]): r for r in build_dataset(MIX)}
    for row in dataset:
        assert [m["role"] for m in row["completion"]] == ["assistant"]
        trace = row["completion"][0]["content"]
        original = source[json.dumps(row["prompt"])]
        if original["problem"]:
            assert score_trace(trace, original["problem"]).total == 6
        else:
            assert kk_cot_correct(trace, json.loads(original["entry"])["metadata"])


def test_sft_rows_are_seed_deterministic_and_need_a_traceable_task():
    a, _ = build_sft_dataset({**MIX, "size": 12})
    b, _ = build_sft_dataset({**MIX, "size": 12})
    assert a.to_list() == b.to_list()
    with pytest.raises(ValueError, match="gold trace"):
        build_sft_dataset({"size": 8, "seed": 0, "causal_weight": 0, "mixture": {"basic_arithmetic": 1.0}})


def test_plain_gold_style_is_one_wording_with_the_smallest_valid_answer():
    from faithgrpo.tasks.certificates.gold import gold_trace
    from faithgrpo.tasks.mix import build_dataset

    mix = {"size": 24, "seed": 5, "story_fraction": 0.0, "causal": {"min_nodes": 4, "max_nodes": 5}}
    plain, _ = build_sft_dataset(mix, gold_style="plain")
    varied, _ = build_sft_dataset(mix)
    source = build_dataset(mix)
    assert len(plain) == len(varied) == len(source)
    for row, original in zip(plain, source):
        trace = row["completion"][0]["content"]
        assert trace == gold_trace(original["problem"], plain=True)  # independent of the row's rng
        assert score_trace(trace, original["problem"]).total == 6
    assert [r["prompt"] for r in plain] == [r["prompt"] for r in varied]
    assert [r["completion"] for r in plain] != [r["completion"] for r in varied]
    with pytest.raises(ValueError, match="gold_style must be one of"):
        build_sft_dataset(mix, gold_style="fancy")


def _load_recipe():
    spec = importlib.util.spec_from_file_location("sft_traces", RECIPE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_sft_recipe_trains_an_adapter_that_lowers_the_trace_loss(tiny_llama_path, tmp_path):
    out = tmp_path / "sft"
    code = _load_recipe().main(
        [
            "--model_name_or_path", str(tiny_llama_path),
            "--output_dir", str(out),
            "--task_size", "8",
            "--max_steps", "12",
            "--per_device_train_batch_size", "4",
            "--learning_rate", "5e-2",
            "--lora_r", "8",
            "--lora_target_modules", "all-linear",
        ]
    )  # fmt: skip
    assert code == 0
    assert (out / "adapter_model.safetensors").is_file() and (out / "adapter_config.json").is_file()
    assert json.loads((out / "sft_data.json").read_text())["rows"] == 8
    losses = json.loads((out / "sft_losses.json").read_text())  # one per logging step
    # A random tiny model starts near the uniform loss ln(|V|); a dozen LoRA steps must bring it down.
    assert sum(losses[-3:]) / 3 < losses[0] - 0.1, losses


def test_sft_recipe_rejects_a_missing_model_path(tmp_path, capsys):
    code = _load_recipe().main(
        ["--model_name_or_path", str(tmp_path / "missing"), "--output_dir", str(tmp_path / "o")]
    )
    assert code == 2
    assert "does not exist" in capsys.readouterr().err
