"""The GRPO recipe's library side: ``faithgrpo.trainers.recipe`` (config rule, parsing, validation),
``faithgrpo.trainers.data`` and ``faithgrpo.trainers.warm_start`` (the warm-started policy and its CRoS
binding). Fast: no training step runs here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from trl import GRPOConfig

from faithgrpo.trainers.checks import RecipeError, resolve_resume
from faithgrpo.trainers.data import check_columns, load_user_dataset
from faithgrpo.trainers.recipe import (
    FaithScriptArguments,
    build_reward_funcs,
    parse_recipe_args,
    resolve_config,
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
    with pytest.raises(
        RecipeError, match=r"unknown key 'num_scramble' \(did you mean 'cros_num_scrambles'\?\)"
    ):
        parse_recipe_args(["--config", str(typo)], demo_config=DEMO)
    with pytest.raises(RecipeError, match=r"cannot read config file .*cpu_demo\.yaml"):
        parse_recipe_args(["--config", str(tmp_path / "missing.yaml")], demo_config=DEMO)
    with pytest.raises(RecipeError, match="must be a JSON object"):
        FaithScriptArguments(causal="{oops")


def test_unknown_config_keys_are_named_before_any_device_check(tmp_path):
    """Issue #28: a typo next to ``bf16: true`` on a machine without a GPU reported the bf16 error
    (GRPOConfig's __post_init__) instead of the typo."""
    import torch

    config = tmp_path / "gpu.yaml"
    config.write_text("model_name_or_path: embedded\nbf16: true\nlearnin_rate: 1.0e-5\nmax_steps: 2\n")
    with pytest.raises(RecipeError) as caught:
        parse_recipe_args(["--config", str(config)], demo_config=DEMO)
    message = str(caught.value)
    assert "unknown key 'learnin_rate' (did you mean 'learning_rate'?)" in message and str(config) in message
    assert "\n" not in message and "bf16" not in message
    several = tmp_path / "several.yaml"
    several.write_text("bf16: true\ncros_gates: correct\nzzz_qqq: 1\nenv: {FOO_RECIPE_TEST: '1'}\n")
    with pytest.raises(
        RecipeError, match=r"unknown keys 'cros_gates' \(did you mean 'cros_gate'\?\), 'zzz_qqq';"
    ):
        parse_recipe_args(["--config", str(several)], demo_config=DEMO)
    if not torch.cuda.is_available():  # the keys right, the device check still speaks
        config.write_text("model_name_or_path: embedded\nbf16: true\n")
        with pytest.raises(RecipeError) as caught:
            parse_recipe_args(["--config", str(config)], demo_config=DEMO)
        assert "unknown key" not in str(caught.value)


# ---------------------------------------------------------------------------------------------
# DeepSpeed, launches, sharded backends
@pytest.mark.parametrize(
    ("argv", "config", "env"),
    [
        (["--deepspeed", "ds.json"], None, {}),
        (["--deepspeed=ds.json"], None, {}),
        ([], "deepspeed: ds.json\n", {}),
        ([], "env: {ACCELERATE_USE_DEEPSPEED: 'true'}\n", {}),
        ([], None, {"ACCELERATE_USE_DEEPSPEED": "true"}),
    ],
)
def test_deepspeed_without_deepspeed_installed_names_the_extra(tmp_path, monkeypatch, argv, config, env):
    """TrainingArguments imports DeepSpeed while the arguments are parsed; the user sees our one line."""
    import faithgrpo.trainers.recipe as recipe_lib

    monkeypatch.delenv("ACCELERATE_USE_DEEPSPEED", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(recipe_lib, "_deepspeed_installed", lambda: False)
    (tmp_path / "ds.json").write_text(json.dumps({"zero_optimization": {"stage": 2}}))
    monkeypatch.chdir(tmp_path)
    text = "model_name_or_path: embedded\nuse_cpu: true\n" + (config or "")
    (tmp_path / "run.yaml").write_text(text)
    with pytest.raises(
        RecipeError, match=r"DeepSpeed is not installed; pip install 'faithgrpo\[deepspeed\]'"
    ):
        parse_recipe_args(["--config", "run.yaml", *argv], demo_config=DEMO)


def test_validate_names_the_deepspeed_extra_and_pyproject_has_it(tmp_path, monkeypatch):
    import tomllib

    import faithgrpo.trainers.recipe as recipe_lib
    from faithgrpo.trainers.recipe import deepspeed_requested, validate

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras["deepspeed"] == ["deepspeed>=0.15"]

    monkeypatch.delenv("ACCELERATE_USE_DEEPSPEED", raising=False)
    script, training, model = parse_recipe_args(["--config", str(DEMO)], demo_config=DEMO)
    assert not deepspeed_requested(training)
    monkeypatch.setattr(recipe_lib, "_deepspeed_installed", lambda: False)
    validate(script, training, model, check_paths=False)
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")  # the launcher's environment, after parsing
    assert deepspeed_requested(training)
    with pytest.raises(RecipeError, match=r"pip install 'faithgrpo\[deepspeed\]'"):
        validate(script, training, model, check_paths=False)
    monkeypatch.setattr(recipe_lib, "_deepspeed_installed", lambda: True)
    validate(script, training, model, check_paths=False)


@pytest.mark.parametrize(
    ("env", "requested", "warns"),
    [
        # accelerate launch --cpu --num_processes 2: the simple launcher, one plain process
        ({"ACCELERATE_USE_CPU": "True", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}, 2, True),
        # no GPU and no --cpu: the same launcher
        ({"ACCELERATE_USE_CPU": "False", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}, 4, True),
        # torchrun / accelerate's multi-process launchers / MPI set a world size
        (
            {
                "ACCELERATE_USE_CPU": "True",
                "MASTER_ADDR": "a",
                "MASTER_PORT": "1",
                "WORLD_SIZE": "2",
                "RANK": "0",
            },
            2,
            False,
        ),
        ({"ACCELERATE_USE_CPU": "True", "MASTER_ADDR": "a", "MASTER_PORT": "1", "PMI_SIZE": "2"}, 2, False),
        # plain accelerate launch (one process asked for: no MASTER_ADDR) and plain python
        ({"ACCELERATE_USE_CPU": "True"}, None, False),
        ({}, None, False),
        ({"ACCELERATE_USE_CPU": "True", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}, 1, False),
    ],
)
def test_a_launch_that_got_fewer_processes_than_asked_says_so(env, requested, warns):
    from faithgrpo.trainers.checks import single_process_launch_warning

    warning = single_process_launch_warning(env, requested=requested)
    assert (warning is not None) == warns
    if warns:
        assert "\n" not in warning and "only 1 process started" in warning
        assert f"asked for {requested} processes" in warning
        assert f"torchrun --nproc_per_node {requested} recipes/grpo_cros.py" in warning


def test_launch_warning_reads_n_from_the_launcher_or_says_n(monkeypatch):
    import faithgrpo.trainers.checks as recipe_lib

    env = {"ACCELERATE_USE_CPU": "True", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    monkeypatch.setattr(recipe_lib, "_parent_num_processes", lambda: 3)
    assert "torchrun --nproc_per_node 3 " in recipe_lib.single_process_launch_warning(env)
    monkeypatch.setattr(recipe_lib, "_parent_num_processes", lambda: None)
    warning = recipe_lib.single_process_launch_warning(env)
    assert "asked for several processes" in warning and "torchrun --nproc_per_node N " in warning
    assert recipe_lib._parent_num_processes() is None or isinstance(recipe_lib._parent_num_processes(), int)


def test_sharded_backends_need_a_cros_reference_only_for_full_fine_tuning(tmp_path, monkeypatch):
    """With LoRA (asked for, or a warm start) CRoS scores through the policy's own sharded
    forward with the initial adapter state; only full fine-tuning needs --cros_reference."""
    from faithgrpo.trainers.checks import sharded_backend
    from faithgrpo.trainers.recipe import validate

    for key in ("ACCELERATE_USE_DEEPSPEED", "ACCELERATE_DEEPSPEED_ZERO_STAGE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    base = ["--config", str(DEMO), "--warm_start_config", "none", "--output_dir", str(tmp_path)]
    script, training, model = parse_recipe_args(base, demo_config=DEMO)
    assert sharded_backend(training) == "FSDP" and model.use_peft
    validate(script, training, model, check_paths=False)  # LoRA: no reference needed

    script, training, model = parse_recipe_args([*base, "--use_peft", "false"], demo_config=DEMO)
    with pytest.raises(RecipeError) as caught:
        validate(script, training, model, check_paths=False)
    message = str(caught.value)
    assert "full fine-tuning under FSDP shards the policy" in message and "--cros_reference" in message
    assert "\n" not in message
    script.cros_reference = "embedded"
    validate(script, training, model, check_paths=False)

    # A warm start always trains a LoRA adapter: no reference needed either.
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    for warm in (["--warm_start_adapter", str(adapter)], ["--warm_start_config", "sft_cpu_demo.yaml"]):
        args = [*base, "--use_peft", "false", *warm]
        script, training, model = parse_recipe_args(args, demo_config=DEMO)
        validate(script, training, model, check_paths=False, search_dirs=[DEMO.parent])


def test_cros_reference_help_says_when_it_is_needed():
    import dataclasses

    (field,) = [f for f in dataclasses.fields(FaithScriptArguments) if f.name == "cros_reference"]
    text = field.metadata["help"]
    assert "Only for full fine-tuning under ZeRO-3/FSDP" in text
    assert "With a warm start the warm-start adapter is applied to it." in text
    assert "Required under" not in text


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

    from faithgrpo.rewards.cros.reward import CRoSReward
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
