"""The GRPO recipe's warm start (``faithgrpo.trainers.warm_start``): gold-trace SFT run first, cached by a key of
what it depends on, then continued by GRPO as the policy's trainable adapter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from test_recipes import _load_script, _tiny_args

from faithgrpo.trainers.checks import RecipeError
from faithgrpo.trainers.recipe import validate
from faithgrpo.trainers.warm_start import warm_start_config_path, warm_start_key

ROOT = Path(__file__).resolve().parents[1]
SEARCH_DIRS = (ROOT / "recipes", ROOT / "recipes" / "configs")


@pytest.fixture(scope="module")
def recipe():
    return _load_script("grpo_cros")


def _sft_yaml(path: Path, tiny_path: Path, **changes) -> Path:
    """A one-step SFT config on the tiny model (LoRA rank 4, so a run that starts from it is visible)."""
    config = {
        "model_name_or_path": str(tiny_path),
        "use_peft": True,
        "lora_r": 4,
        "lora_alpha": 8,
        "lora_target_modules": ["q_proj", "v_proj"],
        "task_size": 4,
        "task_seed": 1,
        "causal": {
            "min_nodes": 4,
            "max_nodes": 4,
            "families": ["random_dag"],
            "query_kinds": ["backdoor_set"],
        },
        "output_dir": "unused",
        "use_cpu": True,
        "max_steps": 1,
        "per_device_train_batch_size": 4,
        "learning_rate": 1e-3,
        "max_length": 4096,  # gold traces with derivation certificates: ~1200 tiny-tokenizer tokens
        "save_strategy": "no",
        "report_to": "none",
        **changes,
    }
    path.write_text(yaml.safe_dump(config))
    return path


def test_config_path_none_missing_and_lookup_in_recipes():
    for off in (None, "none", "None", ""):
        assert warm_start_config_path(off, SEARCH_DIRS) is None
    by_name = warm_start_config_path("sft_cpu_demo.yaml", SEARCH_DIRS)
    assert by_name == (ROOT / "recipes" / "configs" / "sft_cpu_demo.yaml").resolve()
    with pytest.raises(RecipeError, match=r"is not a file.*sft_cpu_demo\.yaml.*'none'"):
        warm_start_config_path("no_such_sft.yaml", SEARCH_DIRS)
    with pytest.raises(RecipeError, match=r"is not a file"):
        warm_start_config_path("sft_cpu_demo.yaml")  # no search directories: the working directory only


def test_key_follows_config_content_and_model_but_not_output_or_logging(tmp_path, tiny_llama_path):
    base = warm_start_key(_sft_yaml(tmp_path / "a.yaml", tiny_llama_path), str(tiny_llama_path))
    assert len(base) == 16 and int(base, 16) >= 0
    same = _sft_yaml(tmp_path / "b.yaml", tiny_llama_path, output_dir="elsewhere", logging_steps=5)
    assert warm_start_key(same, str(tiny_llama_path)) == base
    other_lr = _sft_yaml(tmp_path / "c.yaml", tiny_llama_path, learning_rate=2e-3)
    assert warm_start_key(other_lr, str(tiny_llama_path)) != base
    other_model = tmp_path / "other_model"
    other_model.mkdir()
    assert warm_start_key(tmp_path / "a.yaml", str(other_model)) != base
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(RecipeError, match="YAML mapping"):
        warm_start_key(tmp_path / "list.yaml", str(tiny_llama_path))


def test_validate_rejects_a_missing_warm_start_config(recipe, tmp_path, tiny_llama_path):
    args = recipe.parse_args(
        [*_tiny_args(tiny_llama_path, tmp_path / "out"), "--warm_start_config", "missing_sft.yaml"]
    )
    with pytest.raises(RecipeError, match=r"--warm_start_config 'missing_sft\.yaml' is not a file"):
        validate(*args, search_dirs=SEARCH_DIRS)


@pytest.mark.slow
def test_warm_start_trains_once_then_reuses_and_grpo_continues_its_adapter(recipe, tmp_path, tiny_llama_path):
    sft = _sft_yaml(tmp_path / "sft.yaml", tiny_llama_path)
    cache = tmp_path / "cache"
    flags = ["--warm_start_config", str(sft), "--warm_start_cache", str(cache), "--max_steps", "1"]

    first = tmp_path / "first"
    trainer = recipe.main(*recipe.parse_args([*_tiny_args(tiny_llama_path, first), *flags]))
    # The SFT adapter is the policy's trainable adapter; CRoS scores with a frozen copy of its tensors.
    assert trainer.cros_reference_mode == "peft_initial_adapter"
    key = warm_start_key(sft, str(tiny_llama_path))
    adapter = cache / f"sft-{key}"
    assert sorted(p.name for p in cache.iterdir()) == [adapter.name]  # no temporary folder left behind
    assert (adapter / "adapter_config.json").is_file()
    note = json.loads((first / "warm_start.json").read_text())
    assert note["adapter"] == str(adapter) and note["reused"] is False and note["sft_seconds"] > 0
    # GRPO trained the SFT adapter (rank 4), not a fresh one of the GRPO config's rank (16).
    assert json.loads((first / "adapter_config.json").read_text())["r"] == 4
    assert json.loads((cache / adapter.name / "adapter_config.json").read_text())["r"] == 4

    trained_at = (adapter / "adapter_model.safetensors").stat().st_mtime_ns
    second = tmp_path / "second"
    recipe.main(*recipe.parse_args([*_tiny_args(tiny_llama_path, second), *flags]))
    assert json.loads((second / "warm_start.json").read_text())["reused"] is True
    assert (adapter / "adapter_model.safetensors").stat().st_mtime_ns == trained_at

    # An explicit adapter wins over the config: the note names it, and it is what trains.
    third = tmp_path / "third"
    recipe.main(
        *recipe.parse_args(
            [*_tiny_args(tiny_llama_path, third), *flags, "--warm_start_adapter", str(adapter)]
        )
    )
    assert json.loads((third / "warm_start.json").read_text()) == {"adapter": str(adapter), "explicit": True}
    assert json.loads((third / "adapter_config.json").read_text())["r"] == 4


@pytest.mark.slow
def test_a_failing_warm_start_names_the_command_and_leaves_no_cache_entry(recipe, tmp_path, tiny_llama_path):
    broken = _sft_yaml(tmp_path / "sft.yaml", tiny_llama_path, task_size=0)  # no rows to train on
    cache = tmp_path / "cache"
    args = recipe.parse_args(
        [
            *_tiny_args(tiny_llama_path, tmp_path / "out"),
            "--warm_start_config", str(broken),
            "--warm_start_cache", str(cache),
        ]
    )  # fmt: skip
    with pytest.raises(RecipeError, match=r"warm-start SFT failed.*recipes/sft_traces\.py --config"):
        recipe.main(*args)
    assert list(cache.iterdir()) == []


@pytest.mark.slow
def test_two_processes_train_the_warm_start_once_and_both_start_from_it(tmp_path, tiny_llama_path):
    from test_recipe_distributed import run_two_ranks

    cache = tmp_path / "cache"
    out = tmp_path / "run"
    args = _tiny_args(tiny_llama_path, out, "--max_steps", "1", "--save_strategy", "no")
    args += ["--per_device_train_batch_size", "2", "--use_cpu", "true",
             "--warm_start_config", str(_sft_yaml(tmp_path / "sft.yaml", tiny_llama_path)),
             "--warm_start_cache", str(cache)]  # fmt: skip
    proc, log = run_two_ranks(args, tmp_path)
    assert proc.returncode == 0, log
    # Rank 0 trained the warm start once (one child SFT run); rank 1 waited and read the same cache.
    assert proc.stdout.count("gold-trace rows") == 1, log  # the SFT child's first line
    (adapter,) = cache.iterdir()
    assert json.loads((out / "warm_start.json").read_text())["adapter"] == str(adapter)
    assert json.loads((out / "adapter_config.json").read_text())["r"] == 4
