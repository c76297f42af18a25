"""The GRPO recipe's library side: ``faithgrpo.trainers.recipe`` (config rule, parsing, validation),
``faithgrpo.trainers.data`` and ``faithgrpo.trainers.warm_start`` (the warm-started policy and its CRoS
binding). Fast: no training step runs here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from trl import GRPOConfig

from faithgrpo.trainers.data import check_columns, load_user_dataset
from faithgrpo.trainers.recipe import (
    FaithScriptArguments,
    RecipeError,
    build_reward_funcs,
    parse_recipe_args,
    resolve_config,
    resolve_resume,
)
from faithgrpo.trainers.warm_start import WARM_START_RECORD, load_warm_started_policy, run_warm_start

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "recipes" / "configs" / "cpu_demo.yaml"


# ---------------------------------------------------------------------------------------------
# which config is in force
@pytest.mark.parametrize(
    ("argv", "config", "says"),
    [
        ([], DEMO, "the CPU demo"),
        (["--max_steps", "2"], DEMO, "the CPU demo"),
        (["--model_name_or_path", "Qwen/Qwen2.5-1.5B-Instruct"], None, "TRL's GRPOConfig"),
        (["--model_name_or_path=embedded"], None, "TRL's GRPOConfig"),
        (["--model-name-or-path", "embedded"], None, "TRL's GRPOConfig"),
        (["--config", "x.yaml", "--model_name_or_path", "m"], "x.yaml", "config x.yaml"),
    ],
)
def test_config_rule(argv, config, says):
    out, source = resolve_config(argv, DEMO)
    assert says in source
    if config is None:
        assert out == argv and "--config" not in out
    else:
        assert out[out.index("--config") + 1] == str(config)
    assert resolve_config(["--max_steps", "2"], None)[0] == ["--max_steps", "2"]  # no demo: no file
    with pytest.raises(RecipeError, match="--config needs a path"):
        resolve_config(["--config"], DEMO)


def test_a_model_without_config_gets_trl_defaults_not_the_demo(tmp_path):
    """`--model_name_or_path X` alone must not run the CPU demo's settings (issue #14, point 4)."""
    script, training, model = parse_recipe_args(
        ["--model_name_or_path", "Qwen/Qwen2.5-1.5B-Instruct", "--use_cpu", "true"], demo_config=DEMO
    )
    demo = yaml.safe_load(DEMO.read_text())
    defaults = GRPOConfig(output_dir=str(tmp_path), use_cpu=True)
    assert "no config file" in script.config_source
    assert training.max_steps == defaults.max_steps != demo["max_steps"]
    assert training.num_generations == defaults.num_generations
    assert training.output_dir != demo["output_dir"] and training.reward_weights is None
    assert not model.use_peft and script.warm_start_config is None and script.task_size == 256
    # With the demo config, the same flags keep the demo's values.
    script, training, model = parse_recipe_args(["--config", str(DEMO)], demo_config=DEMO)
    assert training.max_steps == demo["max_steps"] and model.use_peft and training.use_cpu


def test_trl_parser_errors_come_back_as_recipe_errors(tmp_path):
    typo = tmp_path / "typo.yaml"
    typo.write_text("max_steps: 2\nuse_cpu: true\nnum_scramble: 3\n")
    with pytest.raises(RecipeError, match=r"Unknown arguments from config file: \['--num_scramble'"):
        parse_recipe_args(["--config", str(typo)], demo_config=DEMO)
    with pytest.raises(RecipeError, match=r"cannot read config file .*cpu_demo\.yaml"):
        parse_recipe_args(["--config", str(tmp_path / "missing.yaml")], demo_config=DEMO)
    with pytest.raises(RecipeError, match="must be a JSON object"):
        FaithScriptArguments(causal="{oops")


def test_custom_reward_paths_and_resume(tmp_path):
    script = FaithScriptArguments(reward_funcs=["format", "no_such_module.fn"])
    training = GRPOConfig(output_dir=str(tmp_path), use_cpu=True)
    with pytest.raises(RecipeError, match=r"cannot import reward function 'no_such_module\.fn'"):
        build_reward_funcs(script, training)
    script = FaithScriptArguments(reward_funcs=["format", "json.dumps"])
    assert [f.__name__ for f in build_reward_funcs(script, training)] == ["format", "dumps"]

    assert resolve_resume(training) is None
    training.resume_from_checkpoint = "true"
    with pytest.raises(RecipeError, match=r"no checkpoint-\* directory"):
        resolve_resume(training)
    (tmp_path / "checkpoint-2").mkdir()
    (tmp_path / "checkpoint-10").mkdir()
    assert resolve_resume(training) == str(tmp_path / "checkpoint-10")  # transformers' get_last_checkpoint


def test_user_dataset_from_file_and_saved_dir(tmp_path):
    rows = [{"prompt": f"q{i}", "problem": "{}"} for i in range(4)]
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    script = FaithScriptArguments(dataset_name=str(data))
    loaded = load_user_dataset(script)
    assert len(loaded) == 4
    check_columns(loaded, ["outcome", "calver"], {})
    loaded.save_to_disk(str(tmp_path / "saved"))
    assert load_user_dataset(FaithScriptArguments(dataset_name=str(tmp_path / "saved")))["prompt"] == [
        r["prompt"] for r in rows
    ]
    with pytest.raises(RecipeError, match="cannot load dataset"):
        load_user_dataset(FaithScriptArguments(dataset_name=str(tmp_path / "nothing_here")))


# ---------------------------------------------------------------------------------------------
# warm start: the SFT adapter is the policy's trainable adapter, CRoS scores with its frozen copy
def test_warm_started_policy_trains_its_adapter_and_cros_keeps_an_adapter_sized_copy(
    tiny_llama_path, tmp_path
):
    from peft import LoraConfig, PeftModel, get_peft_model

    from faithgrpo.rewards.cros import CRoSReward
    from faithgrpo.testing import tiny_causal_lm
    from faithgrpo.trainers import FaithGRPOTrainer
    from faithgrpo.trainers.reference import InitialWeights

    base, tok = tiny_causal_lm("llama", seed=0)
    adapter = tmp_path / "sft"
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    get_peft_model(base, config).save_pretrained(adapter)

    args = GRPOConfig(output_dir=str(tmp_path / "run"), use_cpu=True, bf16=False, per_device_train_batch_size=4,
                      num_generations=4, max_completion_length=8, report_to="none")  # fmt: skip
    script = FaithScriptArguments(warm_start_adapter=str(adapter))
    found = run_warm_start(script, args, None, sft_script="unused")
    assert found == adapter.resolve()
    assert json.loads((tmp_path / "run" / WARM_START_RECORD).read_text())["explicit"] is True

    policy = load_warm_started_policy(str(tiny_llama_path), found, {"dtype": "float32"}, args)
    assert isinstance(policy, PeftModel)
    trainable = {n for n, p in policy.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)

    from datasets import Dataset

    cros = CRoSReward(num_scrambles=2)
    trainer = FaithGRPOTrainer(
        model=policy, reward_funcs=[cros], args=args, train_dataset=Dataset.from_dict({"prompt": ["q"] * 4}),
        processing_class=tok,
    )  # fmt: skip
    assert trainer.cros_reference_mode == cros.reference_mode == "peft_initial_adapter"
    assert cros.model is trainer.accelerator.unwrap_model(trainer.model)  # the policy itself: no second model
    snapshot = cros._context_factory
    assert isinstance(snapshot, InitialWeights)
    adapter_numel = sum(p.numel() for n, p in policy.named_parameters() if "lora_" in n)
    assert snapshot.numel == adapter_numel < sum(p.numel() for p in policy.parameters()) // 10
    assert cros.num_generations == 4
