"""``faithgrpo eval`` with more than two checkpoints: ``--checkpoint``, ``--label`` and label validation."""

from __future__ import annotations

import argparse
import json

import pytest

from faithgrpo.eval.cli import add_eval_subcommand, config_from_args
from faithgrpo.eval.report.config import EvalConfig, check_label


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="faithgrpo")
    add_eval_subcommand(parser.add_subparsers())
    return parser


def _save_adapter(base_dir, out_dir, seed):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(base_dir)
    torch.manual_seed(seed)
    # init_lora_weights=False: random A and B, so each adapter really changes the model.
    config = LoraConfig(
        r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False, task_type="CAUSAL_LM"
    )
    get_peft_model(base, config).save_pretrained(out_dir)
    return out_dir


def test_checkpoint_option_parses_two_or_three_values():
    argv = ["eval", "--out", "o", "--label", "base", "--checkpoint", "sft", "m", "a/sft"]
    args = _parser().parse_args([*argv, "--checkpoint", "grpo", "m"])
    config = config_from_args(args)
    assert config.extra_checkpoints == (("sft", "m", "a/sft"), ("grpo", "m", None))
    assert [(c.label, c.model, c.adapter) for c in config.checkpoints()] == [
        ("base", "embedded", None),
        ("sft", "m", "a/sft"),
        ("grpo", "m", None),
    ]
    sub = argparse.ArgumentParser(prog="faithgrpo")
    eval_parser = add_eval_subcommand(sub.add_subparsers())
    assert "--checkpoint LABEL MODEL [ADAPTER]" in eval_parser.format_help()


@pytest.mark.parametrize("values", [["sft"], ["sft", "m", "a", "extra"]])
def test_checkpoint_option_wrong_number_of_values(values, capsys):
    with pytest.raises(SystemExit) as exit_info:
        _parser().parse_args(["eval", "--out", "o", "--checkpoint", *values])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "--checkpoint: expected LABEL MODEL [ADAPTER] (2 or 3 values)" in err
    assert f"got {len(values)}" in err


@pytest.mark.parametrize(
    ("config", "match"),
    [
        (EvalConfig(extra_checkpoints=(("model", "m", None),)), r"'model' of --checkpoint #1 .* taken by --model.*--label"),
        (
            EvalConfig(baseline="b", extra_checkpoints=(("baseline", "m", None),)),
            r"taken by --baseline.*--baseline-label",
        ),
        (
            EvalConfig(extra_checkpoints=(("sft", "m", None), ("SFT", "m", "a"))),
            r"'SFT' of --checkpoint #2 is already taken by --checkpoint #1 \('sft'\).*letter case",
        ),
        (EvalConfig(label="base", baseline="b", baseline_label="base"), r"'base' of --baseline"),
        (EvalConfig(extra_checkpoints=(("../up", "m", None),)), r"'\.\./up' of --checkpoint #1 is not filesystem-safe"),
        (EvalConfig(label="a/b"), r"'a/b' of --model is not filesystem-safe"),
        (EvalConfig(label=""), "not filesystem-safe"),
        (EvalConfig(extra_checkpoints=(("report.json", "m", None),)), "name of a report file"),
        (EvalConfig(extra_checkpoints=(("sft",),)), r"LABEL MODEL \[ADAPTER\] \(2 or 3 values\)"),
        (EvalConfig(baseline_label="b2"), "--baseline-label needs --baseline"),
    ],
)  # fmt: skip
def test_label_validation_names_the_fix(config, match):
    with pytest.raises(ValueError, match=match):
        config.validate()


def test_labels_that_are_fine():
    for label in ("base", "sft", "grpo_step-500", "qwen2.5", "A1"):
        check_label(label)
    # "model" is only reserved while the main checkpoint uses it.
    EvalConfig(label="base", extra_checkpoints=(("model", "m", None),)).validate()
    EvalConfig(extra_checkpoints=(("baseline", "m"),)).validate()
    config = EvalConfig(extra_checkpoints=(("sft", "m"),))
    assert config.checkpoints()[1].adapter is None


def test_every_config_field_is_one_cli_option_with_its_default():
    """The options are generated from EvalConfig's fields: each has help, and no flag means its default."""
    import dataclasses

    from faithgrpo.eval.report.config import EvalConfig as Config

    for f in dataclasses.fields(Config):
        assert f.metadata.get("help"), f"EvalConfig.{f.name} has no help metadata"
    assert config_from_args(_parser().parse_args(["eval", "--out", "o"])) == Config()
    args = _parser().parse_args(["eval", "--out", "o", "--no-progress", "--judge", "j"])
    config = config_from_args(args)
    assert (config.progress, config.judge_model) == (False, "j")


def test_backend_option_is_validated_and_reaches_the_generator(monkeypatch, tmp_path):
    from faithgrpo.eval.generation import backends
    from faithgrpo.eval.report.sections import generate_cached, sampling_settings

    config = config_from_args(
        _parser().parse_args(["eval", "--out", "o", "--backend", "vllm", "--adapter", "a"])
    )
    assert config.backend == "vllm"
    with pytest.raises(SystemExit):
        _parser().parse_args(["eval", "--out", "o", "--backend", "tpu"])
    with pytest.raises(ValueError, match=r"^--backend must be transformers or vllm, got 'tpu'$"):
        EvalConfig(backend="tpu").validate()
    seen = {}

    def fake_cached_generate(path, load, prompts, ids, settings, metadata, **kwargs):
        seen.update(metadata=metadata, **kwargs)
        return [], {}

    monkeypatch.setattr(backends, "cached_generate", fake_cached_generate)
    metadata = {"model": config.model, "adapter": config.adapter}
    generate_cached(tmp_path / "c.jsonl", None, None, [], [], sampling_settings(config, 1), metadata, config)
    assert seen["backend"] == "vllm" and seen["metadata"]["adapter"] == "a"


def test_engine_option_is_validated_and_reaches_the_generator(monkeypatch, tmp_path):
    from faithgrpo.eval.generation import backends, settings
    from faithgrpo.eval.report.sections import generate_cached, sampling_settings

    assert config_from_args(_parser().parse_args(["eval", "--out", "o"])).engine == "auto"
    config = config_from_args(_parser().parse_args(["eval", "--out", "o", "--engine", "generate"]))
    with pytest.raises(SystemExit):
        _parser().parse_args(["eval", "--out", "o", "--engine", "beam"])
    with pytest.raises(ValueError, match=r"^--engine must be one of auto, decode, generate, got 'beam'$"):
        EvalConfig(engine="beam").validate()
    assert set(settings.ENGINES) == {"auto", "decode", "generate"}
    seen = {}

    def fake_cached_generate(path, load, prompts, ids, settings, metadata, **kwargs):
        seen.update(kwargs)
        return [], {}

    monkeypatch.setattr(backends, "cached_generate", fake_cached_generate)
    generate_cached(tmp_path / "c.jsonl", None, None, [], [], sampling_settings(config, 1), {}, config)
    assert seen["engine"] == "generate"


@pytest.mark.slow
def test_three_checkpoints_side_by_side(tmp_path, tiny_llama_path):
    """A tiny base and two tiny LoRA adapters on it, evaluated in one run, reported in order."""
    from faithgrpo.eval.report.pipeline import run_eval, write_report

    sft = _save_adapter(tiny_llama_path, tmp_path / "sft", seed=1)
    grpo = _save_adapter(tiny_llama_path, tmp_path / "grpo", seed=2)
    out = tmp_path / "out"
    argv = [
        "eval", "--model", str(tiny_llama_path), "--label", "base",
        "--checkpoint", "sft", str(tiny_llama_path), str(sft),
        "--checkpoint", "grpo", str(tiny_llama_path), str(grpo),
        "--tasks", "knights_knaves", "--k", "1,2", "--samples", "2", "--prompts", "2",
        "--hints", "sycophancy", "--hint-questions", "1", "--min-switched", "1", "--faithfulness-pairs", "0",
        "--max-new-tokens", "4", "--bootstrap", "10", "--no-progress", "--out", str(out),
    ]  # fmt: skip
    config = config_from_args(_parser().parse_args(argv))
    report = run_eval(config, out)
    paths = write_report(report, out)

    saved = json.loads(paths["json"].read_text())
    sections = saved["checkpoints"]
    assert [(c["label"], c["adapter"]) for c in sections] == [
        ("base", None),
        ("sft", str(sft)),
        ("grpo", str(grpo)),
    ]
    assert saved["config"]["extra_checkpoints"] == [
        ["sft", str(tiny_llama_path), str(sft)],
        ["grpo", str(tiny_llama_path), str(grpo)],
    ]
    for c in sections:
        assert c["passk"]["knights_knaves"]["prompts"] == 2
        assert (out / c["label"] / "completions_knights_knaves.jsonl").is_file()
    # The adapters change the model, so the three checkpoints sample different completions.
    texts = [
        (out / label / "completions_knights_knaves.jsonl").read_text().split('"completions"')[1]
        for label in ("base", "sft", "grpo")
    ]
    assert len(set(texts)) == 3

    markdown = paths["markdown"].read_text()
    header = next(line for line in markdown.splitlines() if line.startswith("| K |"))
    assert header.index("base Pass@K") < header.index("sft Pass@K") < header.index("grpo Pass@K")
    hint_header = next(line for line in markdown.splitlines() if line.startswith("| hint type |"))
    assert all(f"{label} raw" in hint_header for label in ("base", "sft", "grpo"))
    metric_header = next(line for line in markdown.splitlines() if line.startswith("| metric |"))
    assert metric_header == "| metric | base | sft | grpo |"
    for png in ("passk.png", "hints.png"):
        assert paths[png.replace(".", "_")].stat().st_size > 0
