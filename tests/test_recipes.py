"""recipes/grpo_cros.py, its configs, callbacks and recipes/add_reward_term.py.

Config tests parse every YAML into the dataclasses and validate it without training (the library
side, ``faithgrpo.trainers.recipe`` / ``.data``, has its own tests in test_recipe_library.py).
End-to-end tests (marked slow) train a tiny Llama for a few steps in-process.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest
import yaml
from transformers import TrainerCallback

from faithgrpo.trainers.callbacks import (
    CompletionsJSONLCallback,
    MetricsJSONLCallback,
    plot_reward_means,
    read_metrics,
    reward_names_in,
    summary_line,
)
from faithgrpo.trainers.checks import sharded_backend
from faithgrpo.trainers.data import load_user_dataset
from faithgrpo.watchdog import run_with_deadline

# The demo's reward stack (recipes/configs/cpu_demo.yaml); the CALVER variants are tested apart.
REWARD_NAMES = ("outcome", "format", "trace_format", "cros", "calver")
ROOT = Path(__file__).resolve().parents[1]
# GRPO configs (the ones with rewards); other recipes' configs (e.g. SFT) are tested with those recipes.
CONFIGS = sorted(
    p
    for p in (ROOT / "recipes" / "configs").glob("*.yaml")
    if "reward_funcs" in yaml.safe_load(p.read_text())
)
ACCELERATE_CONFIGS = sorted((ROOT / "recipes" / "accelerate_configs").glob("*.yaml"))
GPU_MODELS = {"Qwen/Qwen2.5-1.5B-Instruct", "Qwen/Qwen2.5-3B-Instruct", "HuggingFaceTB/SmolLM2-1.7B-Instruct"}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
DEMO_CONFIG = ROOT / "recipes" / "configs" / "cpu_demo.yaml"


def _load_script(name: str):
    spec = importlib.util.spec_from_file_location(f"recipe_{name}", ROOT / "recipes" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their string annotations through it
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def recipe():
    return _load_script("grpo_cros")


def length_reward(completions, **kwargs):
    """A reward that differs within groups even for a random tiny model, so the adapters do train."""
    from faithgrpo.text import completion_text

    return [len(completion_text(c)) / 40 for c in completions]


def _tiny_args(tiny_path, output_dir, *extra):
    """Flags that shrink the demo config (given explicitly: with a model and no --config, TRL's defaults
    would apply) to a tiny model, short prompts and a few quick steps.

    A tiny random model never writes <answer> tags, so every faithgrpo reward is flat for it; the
    extra length reward (a custom reward by dotted path) gives GRPO something to learn from.
    """
    return [
        "--config", str(DEMO_CONFIG),
        "--model_name_or_path", str(tiny_path),
        "--reward_funcs", *REWARD_NAMES, "test_recipes.length_reward",
        "--reward_weights", "1.0", "0.25", "0.25", "0.5", "1.0", "1.0",
        "--output_dir", str(output_dir),
        "--task_size", "16",
        "--causal", json.dumps({"min_nodes": 4, "max_nodes": 4, "families": ["random_dag"],
                                "query_kinds": ["backdoor_set", "directed_path"]}),
        "--mixture", json.dumps({"basic_arithmetic": 0.5}),
        "--system_prompt", "Think in <think></think>, then answer in <answer></answer>.",
        "--per_device_train_batch_size", "4",
        "--num_generations", "4",
        "--max_completion_length", "8",
        "--learning_rate", "0.05",
        "--disable_tqdm", "true",
        "--warm_start_config", "none",  # the demo's gold-trace SFT is tested in test_warm_start.py
        "--logging_steps", "1",  # one metrics line per step (the demo logs every 4)
        *extra,
    ]  # fmt: skip


# ---------------------------------------------------------------------------------------------
# configs
def test_every_config_is_tested():
    names = {p.name for p in CONFIGS}
    assert {
        "cpu_demo.yaml",
        "qwen2.5-1.5b-instruct.yaml",
        "qwen2.5-3b-instruct.yaml",
        "qwen2.5-3b-instruct-zero3.yaml",
        "smollm2-1.7b-instruct.yaml",
    } <= names
    assert {p.name for p in ACCELERATE_CONFIGS} == {
        "single_device.yaml",
        "multi_gpu.yaml",
        "deepspeed_zero2.yaml",
        "deepspeed_zero3.yaml",
        "fsdp2.yaml",
    }


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.stem)
def test_config_parses_validates_and_builds_its_data(recipe, config, monkeypatch):
    raw = yaml.safe_load(config.read_text())
    gpu = raw["model_name_or_path"] != "embedded"
    # This machine has no GPU: transformers refuses bf16 without one unless use_cpu is set. The flag
    # only moves the parse onto the CPU; every other value is the file's.
    extra = ["--use_cpu", "true"] if gpu else []
    script, training, model = recipe.parse_args(["--config", str(config), *extra])

    # Every key of the file reached a dataclass unchanged (no silent typo, no dropped value).
    parsed = {**vars(script), **training.to_dict(), **vars(model)}
    for key, value in raw.items():
        got = parsed[key]
        if hasattr(got, "value"):  # enums such as lr_scheduler_type / save_strategy
            got = got.value
        if key == "report_to":
            assert got in ([], ["none"], "none"), got
        else:
            assert got == value, key
    assert script.reward_funcs == list(REWARD_NAMES)
    assert len(training.reward_weights) == len(script.reward_funcs)
    assert model.use_peft

    funcs = recipe.validate(script, training, model, check_paths=False)
    assert [f.__name__ for f in funcs] == script.reward_funcs
    cros = funcs[script.reward_funcs.index("cros")]
    assert cros.num_scrambles == raw["cros_num_scrambles"] and cros.gate == raw["cros_gate"]
    assert cros.seed == training.seed

    if gpu:
        assert model.model_name_or_path in GPU_MODELS and model.dtype == "bfloat16" and training.bf16
        assert raw["max_completion_length"] >= 512 and raw["cros_num_scrambles"] == 4
    else:
        assert model.model_name_or_path == "embedded" and training.use_cpu and not training.bf16
        assert model.dtype == "float32"

    # The config's task mixture builds, and has the columns its rewards read.
    script.task_size = 12
    dataset = recipe.make_dataset(script, training)
    recipe.check_columns(dataset, script.reward_funcs, recipe.collect_reward_options(script, training))
    assert len(dataset) == 12
    problems = [json.loads(p) for p in dataset["problem"] if p]
    kinds = set(script.causal.get("query_kinds") or []) or None
    assert problems and all(p["graph"]["type"] in ("DAG", "ADMG", "DG") for p in problems)
    if kinds:
        assert {p["query"]["kind"] for p in problems} <= kinds
    assert all(script.causal.get("min_nodes", 4) <= len(p["graph"]["nodes"]) <= script.causal["max_nodes"]
               for p in problems)  # fmt: skip


def _accelerate_env(config: Path) -> dict[str, str]:
    """The environment `accelerate launch --config_file <config>` gives the training processes."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import (
        prepare_deepspeed_cmd_env,
        prepare_multi_gpu_env,
        prepare_simple_launcher_cmd_env,
    )

    args = launch_command_parser().parse_args(["--config_file", str(config), "recipes/grpo_cros.py"])
    args, defaults, _ = _validate_launch_command(args)
    if args.use_deepspeed:
        # As accelerate's launch_command does before calling the DeepSpeed launcher.
        args.deepspeed_fields_from_accelerate_config = ",".join(defaults.deepspeed_config)
        return prepare_deepspeed_cmd_env(args)[1]
    if args.multi_gpu or args.use_fsdp:
        return prepare_multi_gpu_env(args)
    return prepare_simple_launcher_cmd_env(args)[1]


EXPECTED_BACKEND = {
    "single_device": ("NO", None),
    "multi_gpu": ("MULTI_GPU", None),
    "deepspeed_zero2": ("DEEPSPEED", None),
    "deepspeed_zero3": ("DEEPSPEED", "DeepSpeed ZeRO-3"),
    "fsdp2": ("FSDP", "FSDP"),
}


@pytest.mark.parametrize("config", ACCELERATE_CONFIGS, ids=lambda p: p.stem)
def test_accelerate_config_loads_and_cros_needs_own_reference_when_sharded(recipe, config, monkeypatch):
    """Under ZeRO-3/FSDP only full fine-tuning needs --cros_reference; LoRA scores through the policy's
    own sharded forward with its initial adapter."""
    from accelerate.commands.config.config_args import ClusterConfig

    import faithgrpo.trainers.recipe as recipe_lib

    cluster = ClusterConfig.from_yaml_file(config)  # unknown keys or bad enums raise here
    distributed_type, sharded = EXPECTED_BACKEND[config.stem]
    assert cluster.distributed_type.value == distributed_type
    assert cluster.mixed_precision == "bf16" and not cluster.use_cpu
    if config.stem == "deepspeed_zero3":
        assert cluster.deepspeed_config["zero_stage"] == 3
    if config.stem == "fsdp2":
        assert cluster.fsdp_config["fsdp_version"] == 2

    # Parse first (GRPOConfig would set up DeepSpeed, not installed here), then give validation the
    # environment the launcher gives each training process.
    gpu_recipe = str(ROOT / "recipes" / "configs" / "qwen2.5-3b-instruct.yaml")
    script, training, model = recipe.parse_args(["--config", gpu_recipe, "--use_cpu", "true"])
    full = recipe.parse_args(["--config", gpu_recipe, "--use_cpu", "true", "--use_peft", "false"])
    zero3 = str(ROOT / "recipes" / "configs" / "qwen2.5-3b-instruct-zero3.yaml")
    zero3_lora = recipe.parse_args(["--config", zero3, "--use_cpu", "true"])
    own_ref = recipe.parse_args(
        [
            "--config",
            zero3,
            "--use_cpu",
            "true",
            "--use_peft",
            "false",
            "--cros_reference",
            "Qwen/Qwen2.5-3B-Instruct",
        ]
    )
    env = _accelerate_env(config)
    for key in [k for k in os.environ if k.startswith("ACCELERATE_")]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        if key.startswith("ACCELERATE_"):
            monkeypatch.setenv(key, value)
    # DeepSpeed itself is not installed here; validation would name the extra (tested in
    # test_recipe_library.py). This test is about the reference rule.
    monkeypatch.setattr(recipe_lib, "_deepspeed_installed", lambda: True)
    assert sharded_backend(training) == sharded
    assert model.use_peft
    recipe.validate(script, training, model, check_paths=False)  # LoRA: no second model, anywhere
    zero3_funcs = recipe.validate(*zero3_lora, check_paths=False)  # the ZeRO-3 recipe: LoRA, no reference
    assert not zero3_funcs[zero3_lora[0].reward_funcs.index("cros")].is_bound
    if sharded:
        with pytest.raises(
            recipe.RecipeError, match=rf"full fine-tuning under {sharded} shards.*--cros_reference"
        ):
            recipe.validate(*full, check_paths=False)
        # With its own reference, full fine-tuning validates under a sharded backend.
        script, training, model = own_ref
        funcs = recipe.validate(script, training, model, check_paths=False)
        cros = funcs[script.reward_funcs.index("cros")]
        assert cros._reference_path == "Qwen/Qwen2.5-3B-Instruct"
        assert cros.model_kwargs == {"dtype": "bfloat16"}  # loaded in the policy's precision
    else:
        recipe.validate(*full, check_paths=False)


# ---------------------------------------------------------------------------------------------
# CLI flags and bad input
def test_no_arguments_means_the_cpu_demo_and_flags_override_it(recipe):
    script, training, model = recipe.parse_args([])
    demo = yaml.safe_load(recipe.DEFAULT_CONFIG.read_text())
    assert model.model_name_or_path == "embedded" and training.max_steps == demo["max_steps"]
    assert training.output_dir == demo["output_dir"]
    assert "the CPU demo" in script.config_source and str(recipe.DEFAULT_CONFIG) in script.config_source

    script, training, model = recipe.parse_args(
        ["--max_steps", "3", "--cros_num_scrambles", "5", "--reward_options", '{"calver_max_chars": 9000}']
    )
    assert training.max_steps == 3 and script.cros_num_scrambles == 5
    assert training.num_generations == demo["num_generations"]  # untouched values stay the file's
    options = recipe.collect_reward_options(script, training, model)
    assert options["cros_num_scrambles"] == 5 and options["calver_max_chars"] == 9000
    assert options["cros_seed"] == training.seed and options["cros_batch_size"] == demo["cros_batch_size"]
    # One option set both as a flag (here: by the config file) and in reward_options is ambiguous.
    script, training, model = recipe.parse_args(["--reward_options", '{"cros_batch_size": 3}'])
    with pytest.raises(recipe.RecipeError, match=r"cros_batch_size is set twice.*--cros_batch_size 3"):
        recipe.collect_reward_options(script, training, model)

    # Dropping a reward drops its flat options from the config instead of failing on them.
    script, training, model = recipe.parse_args(
        ["--reward_funcs", "outcome,format", "--reward_weights", "1.0", "0.5"]
    )
    assert script.reward_funcs == ["outcome", "format"]
    assert [
        f.__name__ for f in recipe.validate(script, training, model, check_paths=False)
    ] == script.reward_funcs


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--reward_funcs", "outcome", "accuracy", "--reward_weights", "1", "1"],
            r"choose from outcome, format",
        ),
        (["--reward_funcs", "outcome", "format"], r"reward_weights has 5 value.*give one weight per reward"),
        (["--reward_weights", "1.0", "0.5"], r"reward_weights has 2 value"),
        (["--reward_options", '{"cross_num_scrambles": 2}'], r"does not belong to a requested reward"),
        (["--reward_options", "{not json"], r"must be a JSON object"),
        (["--cros_gate", "sometimes"], r"gate must be 'none' or 'correct'"),
        (["--calver_graph_check", "fuzzy"], r"graph_check"),
        (["--causal", '{"max_nodes": 40}'], r"task mixture: max_nodes must be an integer in 4..12"),
        (["--mixture", '{"no_such_task": 1.0}'], r"unknown reasoning-gym dataset 'no_such_task'"),
        (["--model_name_or_path", "./no/such/checkpoint"], r"does not exist.*'embedded'"),
        (["--warm_start_adapter", "/no/such/adapter"], r"not a LoRA adapter directory"),
        (
            ["--output_dir", "/nonexistent/run", "--resume_from_checkpoint", "true"],
            r"no checkpoint-\* directory",
        ),
        (["--resume_from_checkpoint", "/no/such/checkpoint-4"], r"not a directory"),
        (["--config", "/no/such/config.yaml"], r"cannot read config file.*cpu_demo.yaml"),
        (["--report_to", "wandb"], r"report_to names \['wandb'\], not installed here"),
    ],
)
def test_bad_input_fails_before_training_naming_the_fix(recipe, tiny_llama_path, argv, message):
    if "--report_to" in argv and importlib.util.find_spec("wandb") is not None:
        pytest.skip("wandb is installed here")
    if "--model_name_or_path" not in argv:
        argv = [*argv, "--model_name_or_path", str(tiny_llama_path)]
    if "--config" not in argv:
        argv = ["--config", str(DEMO_CONFIG), *argv]
    with pytest.raises(recipe.RecipeError, match=message):
        recipe.validate(*recipe.parse_args(argv))


def test_bad_config_files_are_reported(recipe, tmp_path):
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("max_steps: [1,\n")
    with pytest.raises(recipe.RecipeError, match="not valid YAML"):
        recipe.parse_args(["--config", str(bad_yaml)])
    not_mapping = tmp_path / "list.yaml"
    not_mapping.write_text("- 1\n- 2\n")
    with pytest.raises(recipe.RecipeError, match="must contain a YAML mapping"):
        recipe.parse_args(["--config", str(not_mapping)])
    typo = tmp_path / "typo.yaml"
    typo.write_text((recipe.DEFAULT_CONFIG.read_text()) + "cros_num_scramble: 3\n")
    # Keys of the file that no dataclass has are named, with the closest known one.
    with pytest.raises(
        recipe.RecipeError, match=r"unknown key 'cros_num_scramble' \(did you mean 'cros_num_scrambles'\?\)"
    ):
        recipe.parse_args(["--config", str(typo)])
    batch = ["--per_device_train_batch_size", "3", "--num_generations", "4"]
    with pytest.raises(recipe.RecipeError, match=r"must be divisible by num_generations"):
        recipe.parse_args(batch)


def test_dataset_missing_a_column_a_reward_reads_fails_before_the_model_loads(
    recipe, tmp_path, tiny_llama_path
):
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"q{i}", "answer": "1"}) + "\n" for i in range(8)))
    args = recipe.parse_args(
        [
            "--config",
            str(DEMO_CONFIG),
            "--dataset_name",
            str(data),
            "--model_name_or_path",
            str(tiny_llama_path),
            "--output_dir",
            str(tmp_path),
        ]
    )
    with pytest.raises(recipe.RecipeError, match=r"reward 'outcome' reads the column 'problem' or 'entry'"):
        recipe.main(*args)
    # Without the rewards that need them the same data passes the check; CALVER alone needs 'problem'.
    dataset = load_user_dataset(args[0])
    recipe.check_columns(dataset, ["format", "trace_format", "cros"], {})
    with pytest.raises(recipe.RecipeError, match=r"reward 'calver' reads the column 'problem'"):
        recipe.check_columns(dataset, ["format", "calver"], {})
    with pytest.raises(recipe.RecipeError, match=r"reward 'cros' reads the column 'problem' or 'entry'"):
        recipe.check_columns(dataset, ["cros"], {"cros_gate": "correct"})
    no_prompt = dataset.remove_columns("prompt")
    with pytest.raises(recipe.RecipeError, match="no 'prompt' column"):
        recipe.check_columns(no_prompt, ["format"], {})


def test_cli_prints_the_error_and_exits_2(tmp_path):
    proc = run_with_deadline(
        [sys.executable, str(ROOT / "recipes" / "grpo_cros.py"), "--reward_funcs", "outcome", "nope"],
        timeout=300,
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.log()
    assert "error: rewards: Unknown reward name(s) ['nope']" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cli_bad_cros_reference_exits_2_before_the_warm_start(tmp_path):
    """Issue #28: a bad --cros_reference failed with a long traceback after the warm start and the
    policy load; now one line, before any of it (the demo config's warm start is on)."""
    proc = run_with_deadline(
        [
            sys.executable,
            str(ROOT / "recipes" / "grpo_cros.py"),
            "--cros_reference",
            "/nonexistent",
            "--output_dir",
            str(tmp_path / "run"),
        ],
        timeout=300,
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.log()
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --cros_reference"), proc.log()
    assert "'/nonexistent' does not exist" in lines[0] and "'embedded'" in lines[0]
    assert "warm start" not in proc.stdout and not (tmp_path / "run").exists()


def _bad_references(root: Path, policy: Path) -> dict[str, tuple[str, str]]:
    """name -> (--cros_reference value, expected message) for references that cannot score the policy."""
    from faithgrpo.testing import tiny_causal_lm, tiny_tokenizer

    (root / "empty").mkdir()
    model, _ = tiny_causal_lm("llama", seed=1)
    model.save_pretrained(root / "other_tokenizer")
    tiny_tokenizer(vocab_size=400).save_pretrained(root / "other_tokenizer")
    model.save_pretrained(root / "no_tokenizer")
    return {
        "missing": (
            "/nonexistent/reference",
            r"--cros_reference: Model path '/nonexistent/reference' does not exist",
        ),
        "no_config": (str(root / "empty"), r"--cros_reference .* is a directory without config\.json"),
        "other_tokenizer": (
            str(root / "other_tokenizer"),
            rf"--cros_reference .* has another tokenizer than the policy .*--cros_reference {policy}\)",
        ),
        "no_tokenizer": (str(root / "no_tokenizer"), r"--cros_reference .* has no loadable tokenizer"),
        "hub_offline": (
            "no-such-org/no-such-model",
            r"--cros_reference: model 'no-such-org/no-such-model' is not",
        ),
    }


@pytest.mark.parametrize("case", ["missing", "no_config", "other_tokenizer", "no_tokenizer", "hub_offline"])
def test_bad_cros_reference_stops_before_the_warm_start_and_any_model_load(
    recipe, tiny_llama_path, tmp_path, monkeypatch, case
):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    reference, message = _bad_references(tmp_path, tiny_llama_path)[case]

    def no_training(*args, **kwargs):
        raise AssertionError("the warm start (or a model load) ran before --cros_reference was checked")

    monkeypatch.setattr(recipe, "run_warm_start", no_training)
    monkeypatch.setattr(recipe, "load_warm_started_policy", no_training)
    monkeypatch.setattr(recipe, "make_dataset", no_training)
    args = recipe.parse_args(_tiny_args(tiny_llama_path, tmp_path / "run", "--cros_reference", reference))
    with pytest.raises(recipe.RecipeError, match=message) as caught:
        recipe.main(*args)
    assert "\n" not in str(caught.value)


def test_a_cros_reference_with_the_policys_tokenizer_validates(recipe, tiny_llama_path, tmp_path):
    from faithgrpo.testing import save_tiny_causal_lm

    same = save_tiny_causal_lm(tmp_path / "same_tokenizer", "qwen2", seed=3)  # other weights, same tokenizer
    for reference in (str(same), str(tiny_llama_path)):
        args = recipe.parse_args(_tiny_args(tiny_llama_path, tmp_path / "run", "--cros_reference", reference))
        funcs = recipe.validate(*args)
        assert funcs[args[0].reward_funcs.index("cros")]._reference_path == reference


def test_recipe_warns_when_the_launch_started_fewer_processes(recipe, monkeypatch, capsys):
    """`accelerate launch --cpu --num_processes 2` runs one plain process: the recipe says so
    in one line and goes on (here it stops at a bad reward name, after the warning)."""
    import faithgrpo.trainers.checks as recipe_lib

    for key in ("WORLD_SIZE", "RANK", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("ACCELERATE_USE_CPU", "True")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "29500")
    monkeypatch.setattr(recipe_lib, "_parent_num_processes", lambda: 2)
    args = recipe.parse_args(["--reward_funcs", "outcome", "nope", "--reward_weights", "1", "1"])
    with pytest.raises(recipe.RecipeError, match="nope"):
        recipe.main(*args)
    out = capsys.readouterr().out
    (line,) = [line for line in out.splitlines() if "warning" in line]
    assert "only 1 process started" in line and "torchrun --nproc_per_node 2 recipes/grpo_cros.py" in line
    monkeypatch.setenv("WORLD_SIZE", "2")  # torchrun: two ranks, no warning
    with pytest.raises(recipe.RecipeError, match="nope"):
        recipe.main(*args)
    assert "warning" not in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------
# callbacks
class _State:
    def __init__(self, step, zero=True):
        self.global_step, self.epoch, self.max_steps = step, step / 10, 10
        self.is_world_process_zero = self.is_local_process_zero = zero


class _Args:
    def __init__(self, output_dir):
        self.output_dir = str(output_dir)


def test_completions_callback_writes_each_logged_completion_with_its_rewards(tmp_path):
    from collections import defaultdict, deque

    class Trainer:  # what GRPOTrainer keeps for its completion table
        def __init__(self):
            self._logs = {"prompt": deque(maxlen=2), "completion": deque(maxlen=2),
                          "rewards": defaultdict(lambda: deque(maxlen=2)), "advantages": deque(maxlen=2)}  # fmt: skip

    trainer, path = Trainer(), tmp_path / "completions.jsonl"
    cb = CompletionsJSONLCallback(trainer, path)
    cb.on_train_begin(_Args(tmp_path), _State(0), None)
    for step in (1, 2):
        trainer._logs["prompt"].extend([f"p{step}", f"p{step}"])
        trainer._logs["completion"].extend([f"c{step}a", f"c{step}b"])
        trainer._logs["rewards"]["outcome"].extend([1.0, 0.0])
        trainer._logs["rewards"]["cros"].extend([float("nan"), 0.5])
        trainer._logs["advantages"].extend([0.5, -0.5])
        cb.on_log(_Args(tmp_path), _State(step), None, logs={"loss": 0.1})
    cb.on_log(_Args(tmp_path), _State(2), None, logs={"train_runtime": 1.0})  # the run summary: nothing
    cb.on_log(_Args(tmp_path), _State(2, zero=False), None, logs={"loss": 0.1})  # other processes: nothing
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["step"], r["prompt"], r["completion"]) for r in rows] == [
        (1, "p1", "c1a"),
        (1, "p1", "c1b"),
        (2, "p2", "c2a"),
        (2, "p2", "c2b"),
    ]
    assert rows[0]["rewards"] == {"outcome": 1.0, "cros": None} and rows[1]["advantage"] == -0.5
    # a resumed run keeps the steps its checkpoint covers
    CompletionsJSONLCallback(trainer, path).on_train_begin(_Args(tmp_path), _State(1), None)
    assert [json.loads(line)["step"] for line in path.read_text().splitlines()] == [1, 1]


def test_metrics_callback_writes_lines_keeps_resumed_steps_and_plots(tmp_path):
    args, cb = _Args(tmp_path), MetricsJSONLCallback()
    cb.on_train_begin(args, _State(0), None)
    for step in (1, 2, 3):
        logs = {"loss": 0.1 * step, "reward": step / 4, "rewards/outcome/mean": step / 8,
                "rewards/cros/mean": float("nan"), "rewards/calver/mean": None}  # fmt: skip
        cb.on_log(args, _State(step), None, logs=logs)
    cb.on_log(args, _State(3), None, logs={"train_runtime": 1.0})  # end-of-training summary: not a step
    cb.on_log(args, _State(3, zero=False), None, logs={"loss": 9.0})  # other processes write nothing
    rows = read_metrics(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert rows[1]["rewards/outcome/mean"] == 0.25 and rows[1]["loss"] == pytest.approx(0.2)
    assert rows[0]["rewards/cros/mean"] is None  # NaN is not JSON
    assert rows[0]["wall_s_per_step"] is not None and rows[0]["wall_s_per_step"] >= 0
    assert reward_names_in(rows) == ["outcome", "cros", "calver"]

    # Resuming from checkpoint-2: step 3 was lost with the crashed process and is redone.
    with (tmp_path / "metrics.jsonl").open("a") as f:
        f.write('{"step": 4, "lo')  # a line torn by the crash
    resumed = MetricsJSONLCallback()
    resumed.on_train_begin(args, _State(2), None)
    assert [r["step"] for r in read_metrics(tmp_path / "metrics.jsonl")] == [1, 2]
    resumed.on_log(args, _State(3), None, logs={"reward": 0.9, "rewards/outcome/mean": 1.0})
    resumed.on_train_end(args, _State(3), None)
    rows = read_metrics(tmp_path / "metrics.jsonl")
    assert [(r["step"], r["reward"]) for r in rows] == [(1, 0.25), (2, 0.5), (3, 0.9)]
    assert resumed.plotted == tmp_path / "reward_means.png"
    assert resumed.plotted.read_bytes().startswith(PNG_MAGIC)


def test_plot_needs_reward_means(tmp_path):
    assert plot_reward_means([{"step": 1, "loss": 0.3}], tmp_path / "x.png") is None
    assert not (tmp_path / "x.png").exists()


def test_plot_draws_cros_by_its_raw_delta_and_the_certificate_rate(tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    drawn = {}
    real_savefig = Figure.savefig

    def capture(fig, *args, **kwargs):
        drawn["axes"] = [
            (
                ax.get_title(),
                [line.get_label() for line in ax.get_lines()],
                [list(line.get_ydata()) for line in ax.get_lines()],
            )
            for ax in fig.axes
        ]
        drawn["bands"] = [len(ax.collections) for ax in fig.axes]
        return real_savefig(fig, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", capture)
    rows = [
        {"step": s, "reward": 1.0, "rewards/cros/mean": 0.5, "rewards/calver/mean": c, "calver/certified": k,
         "cros/delta_mean": d, "cros/delta_std": 0.1}
        for s, c, k, d in ((1, 0.5, 0.0, 0.2), (2, 0.75, 0.5, 0.4))
    ]  # fmt: skip
    assert plot_reward_means(rows, tmp_path / "p.png").read_bytes().startswith(PNG_MAGIC)
    (_, each, each_y), (delta_title, _, delta_y), _ = drawn["axes"]
    assert "cros" not in each and each == ["calver", "certificate rate"]  # the flat 0.5 rank is not drawn
    assert each_y == [[0.5, 0.75], [0.0, 0.5]]
    assert "CRoS" in delta_title and delta_y[0] == [0.2, 0.4] and drawn["bands"][1] == 1  # ± std band
    # without CRoS diagnostics: two panels, CRoS's mean drawn as a reward
    plot_reward_means(
        [{k: v for k, v in r.items() if not k.startswith("cros/")} for r in rows], tmp_path / "q.png"
    )
    assert len(drawn["axes"]) == 2 and "cros" in drawn["axes"][0][1]


def test_summary_line_shows_every_reward_in_order():
    line = summary_line(
        {"reward": 0.25, "rewards/outcome/mean": 0.0, "rewards/format/mean": 0.5, "rewards/calver/mean": None,
         "loss": 0.0123, "rewards/outcome/std": 0.1},
        4, 8, 31.25,
    )  # fmt: skip
    assert (
        line == "step 4/8 | reward 0.250 | outcome 0.000 format 0.500 calver n/a | loss 0.0123 | 31.2 s/step"
    )


# ---------------------------------------------------------------------------------------------
# end to end (tiny model)
class _CrashBeforeStep(TrainerCallback):
    """Kill the run as a crash would: after `step` was logged, before the next checkpoint."""

    def __init__(self, step: int):
        self.step = step

    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            raise KeyboardInterrupt(f"simulated crash after step {self.step}")


def _comparable(rows):
    keys = ("step", "reward", "rewards/outcome/mean", "rewards/format/mean", "rewards/cros/mean",
            "rewards/length_reward/mean", "completions/mean_length", "loss", "entropy", "grad_norm")  # fmt: skip
    return [r.get(k) for r in rows for k in keys]


@pytest.mark.slow
def test_recipe_trains_saves_and_resumes_without_losing_steps(recipe, tiny_llama_path, tmp_path):
    steps = ["--max_steps", "4", "--save_strategy", "steps", "--save_steps", "2"]
    crashed = tmp_path / "crashed"
    args = recipe.parse_args(_tiny_args(tiny_llama_path, crashed, *steps))
    with pytest.raises(KeyboardInterrupt):
        recipe.main(*args, callbacks=[_CrashBeforeStep(3)])
    assert (crashed / "checkpoint-2").is_dir() and not (crashed / "checkpoint-4").exists()
    assert [r["step"] for r in read_metrics(crashed / "metrics.jsonl")] == [1, 2, 3]

    args = recipe.parse_args(_tiny_args(tiny_llama_path, crashed, *steps, "--resume_from_checkpoint", "true"))
    trainer = recipe.main(*args)
    assert trainer.state.global_step == 4
    resumed_rows = read_metrics(crashed / "metrics.jsonl")
    assert [r["step"] for r in resumed_rows] == [1, 2, 3, 4]

    # The same run without the crash: the resumed run continued it exactly (data order, sampling, weights).
    straight = tmp_path / "straight"
    recipe.main(*recipe.parse_args(_tiny_args(tiny_llama_path, straight, *steps)))
    straight_rows = read_metrics(straight / "metrics.jsonl")
    assert _comparable(resumed_rows) == pytest.approx(_comparable(straight_rows), rel=1e-4, abs=1e-6)

    from safetensors.torch import load_file

    a = load_file(crashed / "adapter_model.safetensors")
    b = load_file(straight / "adapter_model.safetensors")
    assert a.keys() == b.keys() and a
    for key in a:
        assert a[key].allclose(b[key], atol=1e-6), key

    # Outputs: adapter, metrics, plot, results; every reward logged at every step.
    assert (straight / "adapter_config.json").is_file() and (straight / "train_results.json").is_file()
    assert (straight / "reward_means.png").read_bytes().startswith(PNG_MAGIC)
    for row in straight_rows:
        for name in REWARD_NAMES:
            assert f"rewards/{name}/mean" in row, (row["step"], name)
    assert trainer.cros_reference_mode == "peft_disabled_adapters"


PAIRS = [([{"role": "user", "content": "q"}],
          "<think>Step 1: U opens X <- U -> Y.\nStep 2: adjust for U.</think><answer>{U}</answer>")]  # fmt: skip


@pytest.mark.slow
def test_warm_start_adapter_trains_and_cros_scores_with_its_frozen_initial_tensors(
    recipe, tiny_llama_path, tmp_path, capsys
):
    from peft import LoraConfig, PeftModel, get_peft_model

    from faithgrpo.rewards.cros.reward import CRoSReward
    from faithgrpo.testing import tiny_causal_lm

    # A warm-start adapter that changes the model (random non-zero LoRA weights, as after SFT).
    base, tok = tiny_causal_lm("llama", seed=0)
    adapter = tmp_path / "sft_adapter"
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    get_peft_model(base, config).save_pretrained(adapter)

    args = recipe.parse_args(
        _tiny_args(tiny_llama_path, tmp_path / "run", "--max_steps", "1", "--save_strategy", "no",
                   "--warm_start_adapter", str(adapter))
    )  # fmt: skip
    trainer = recipe.main(*args)
    # The trainer bound CRoS to a frozen copy of the warm-start adapter: no merged copy of the model.
    assert trainer.cros_reference_mode == "peft_initial_adapter"
    assert "CRoS reference: peft_initial_adapter" in capsys.readouterr().out
    cros = next(f for f in trainer.reward_funcs if isinstance(f, CRoSReward))
    assert cros.model is trainer.accelerator.unwrap_model(trainer.model)

    # The run trained the warm-start adapter itself (same modules, weights moved) ...
    trained = {n: p for n, p in trainer.model.named_parameters() if p.requires_grad}
    assert trained and all("lora_" in n for n in trained)
    assert {n.split(".lora_")[0] for n in trained} == {
        n.split(".lora_")[0] for n, _ in PeftModel.from_pretrained(tiny_causal_lm("llama", seed=0)[0], adapter)
        .named_parameters() if "lora_" in n
    }  # fmt: skip
    # ... and CRoS scores with base + warm-start adapter: the policy this run started from.
    start = PeftModel.from_pretrained(tiny_causal_lm("llama", seed=0)[0], adapter).merge_and_unload().eval()
    got = cros.compute_deltas(PAIRS)[0]
    want = CRoSReward(start, tok, num_scrambles=cros.num_scrambles, seed=cros.seed).compute_deltas(PAIRS)[0]
    bare = CRoSReward(
        tiny_causal_lm("llama", seed=0)[0], tok, num_scrambles=cros.num_scrambles, seed=cros.seed
    )
    assert got.logprob == pytest.approx(want.logprob, abs=1e-5)
    assert got.delta == pytest.approx(want.delta, abs=1e-5)
    assert got.logprob != pytest.approx(bare.compute_deltas(PAIRS)[0].logprob, abs=1e-4)  # not the bare base
    trainer.model.eval()
    now = CRoSReward(trainer.model, tok, num_scrambles=cros.num_scrambles, seed=cros.seed).compute_deltas(
        PAIRS
    )[0]
    assert now.logprob != pytest.approx(want.logprob, abs=1e-6)  # the trained policy has moved on


@pytest.mark.slow
def test_with_beta_the_kl_anchor_is_the_warm_start_not_the_base_model(recipe, tiny_llama_path, tmp_path):
    """beta > 0 from a warm start: TRL copies the warm-start adapter into a frozen "ref" adapter (it gets
    the PeftModel, no peft_config), so the KL term of the first step, taken before any update, is 0; a
    bare-base anchor would not be (the adapter changes the model's log-probabilities)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from safetensors.torch import load_file

    from faithgrpo.testing import tiny_causal_lm

    base, _ = tiny_causal_lm("llama", seed=0)
    adapter = tmp_path / "sft_adapter"
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    get_peft_model(base, config).save_pretrained(adapter)
    args = recipe.parse_args(
        _tiny_args(tiny_llama_path, tmp_path / "run", "--max_steps", "2", "--save_strategy", "no",
                   "--beta", "0.5", "--warm_start_adapter", str(adapter))
    )  # fmt: skip
    trainer = recipe.main(*args)
    model = trainer.accelerator.unwrap_model(trainer.model)
    assert set(model.peft_config) == {"default", "ref"}
    # CRoS shares the anchor: it scores with the "ref" adapter, and that is the warm start, exactly
    assert trainer.cros_reference_mode == "trainer_ref_adapter"
    from peft import PeftModel

    from faithgrpo.rewards.cros.reward import CRoSReward

    cros = next(f for f in trainer.reward_funcs if isinstance(f, CRoSReward))
    _, tok = tiny_causal_lm("llama", seed=0)
    start = PeftModel.from_pretrained(tiny_causal_lm("llama", seed=0)[0], adapter).merge_and_unload().eval()
    want = CRoSReward(start, tok, num_scrambles=cros.num_scrambles, seed=cros.seed).compute_deltas(PAIRS)[0]
    got = cros.compute_deltas(PAIRS)[0]
    assert got.logprob == pytest.approx(want.logprob, abs=1e-5) and got.delta == pytest.approx(
        want.delta, abs=1e-5
    )
    assert model.active_adapter == "default" and all(
        p.requires_grad == (".default." in n) for n, p in model.named_parameters() if "lora_" in n
    )  # scoring switched adapters and back: the trainable set is unchanged
    saved = load_file(adapter / "adapter_model.safetensors")
    params = dict(model.named_parameters())
    ref = {n: p for n, p in params.items() if ".ref." in n}
    assert ref and all(not p.requires_grad for p in ref.values())
    moved = 0
    for name, tensor in ref.items():
        key = name.replace(".ref.", ".")  # the saved adapter's key of the same matrix
        assert torch.equal(tensor.detach().cpu(), saved[key]), name  # the anchor is the warm start, frozen
        moved += not torch.equal(params[name.replace(".ref.", ".default.")].detach().cpu(), saved[key])
    assert moved, "the trainable adapter moved away from its anchor"
    kls = [row["kl"] for row in trainer.state.log_history if "kl" in row]
    assert kls and kls[0] == pytest.approx(0.0, abs=1e-6), kls  # step 1: policy == anchor
    assert kls[-1] > 0.0  # after an update it is not


@pytest.mark.slow
def test_cros_reference_with_a_warm_start_is_the_initial_policy(recipe, tiny_llama_path, tmp_path, capsys):
    """Issue #28: --cros_reference <base> with a warm start scored against the bare base, silently
    (Δ off by 0.14 on gold pairs). The recipe applies the warm-start adapter to the reference and the
    binding verifies it equals the initial policy on a probe."""
    from peft import LoraConfig, PeftModel, get_peft_model

    from faithgrpo.rewards.cros.reward import CRoSReward
    from faithgrpo.testing import tiny_causal_lm

    base, tok = tiny_causal_lm("llama", seed=0)
    adapter = tmp_path / "sft_adapter"
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    get_peft_model(base, config).save_pretrained(adapter)
    args = recipe.parse_args(
        _tiny_args(tiny_llama_path, tmp_path / "run", "--max_steps", "1", "--save_strategy", "no",
                   "--warm_start_adapter", str(adapter), "--cros_reference", str(tiny_llama_path))
    )  # fmt: skip
    trainer = recipe.main(*args)
    out = capsys.readouterr().out
    cros = next(f for f in trainer.reward_funcs if isinstance(f, CRoSReward))
    assert cros.reference_mode == "path" and cros.reference_probe_difference == 0.0
    assert f"+ adapter {adapter}" in out and "equal to the initial policy on a probe" in out
    assert "--cros_reference is not needed" in out  # LoRA: the copy is avoidable, and the log says so
    start = PeftModel.from_pretrained(tiny_causal_lm("llama", seed=0)[0], adapter).merge_and_unload().eval()
    want = CRoSReward(start, tok, num_scrambles=cros.num_scrambles, seed=cros.seed).compute_deltas(PAIRS)[0]
    got = cros.compute_deltas(PAIRS)[0]
    assert got.delta == pytest.approx(want.delta, abs=1e-5)


def _add_reward_term_args(tiny_llama_path, out, *extra):
    return ["--model_name_or_path", str(tiny_llama_path), "--output_dir", str(out), "--num_problems", "8",
            "--reward_funcs", "think_format_reward", "--max_steps", "1", "--per_device_train_batch_size", "4",
            "--num_generations", "4", "--max_completion_length", "8", "--use_cpu", "true", "--bf16", "false",
            "--report_to", "none", "--disable_tqdm", "true", "--save_strategy", "no", *extra]  # fmt: skip


def test_add_reward_term_is_trl_script_plus_three_lines():
    """The script is TRL's GRPO script: same parser (every TRL flag), same main, three faithgrpo lines."""
    import trl.scripts.grpo as trl_grpo

    script = _load_script("add_reward_term")
    source = (ROOT / "recipes" / "add_reward_term.py").read_text()
    marked = [line.strip() for line in source.splitlines() if "# faithgrpo " in line]
    assert len(marked) == 3 and [m.split("# faithgrpo ")[1][:3] for m in marked] == ["1/3", "2/3", "3/3"]
    assert "num_generations=training_args.num_generations" in marked[1]
    assert marked[2].startswith("trainer = FaithGRPOTrainer(")
    ours, theirs = script.make_parser(), trl_grpo.make_parser()
    assert {a.dest for a in theirs._actions} <= {a.dest for a in ours._actions}
    for flag in ("dtype", "attn_implementation", "load_in_4bit", "dataset_name", "datasets",
                 "resume_from_checkpoint", "use_peft"):  # fmt: skip
        assert flag in {a.dest for a in ours._actions}
    for line in ("quantization_config=get_quantization_config(model_args),", "trainer.end()",
                 "trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)",
                 "script_args.dataset_name, name=script_args.dataset_config"):  # fmt: skip
        assert line in source


@pytest.mark.slow
def test_add_reward_term_runs_one_step_with_a_frozen_reference_loaded_at_startup(tiny_llama_path, tmp_path):
    script = _load_script("add_reward_term")
    parsed = script.make_parser().parse_args_and_config(_add_reward_term_args(tiny_llama_path, tmp_path))
    trainer = script.main(*parsed)
    logged = {k for entry in trainer.state.log_history for k in entry}
    assert {"rewards/think_format_reward/mean", "rewards/cros/mean", "rewards/calver/mean"} <= logged
    cros = trainer.reward_funcs[1]
    assert cros.num_generations == 4 and len(cros.last_scores) == 4  # the step's group went through CRoS
    # Full fine-tuning: one frozen copy of the initial checkpoint, made when the trainer was built.
    assert trainer.cros_reference_mode == "frozen_copy"
    assert cros.model is not trainer.model and not any(p.requires_grad for p in cros.model.parameters())
    from faithgrpo.rewards.cros.reward import CRoSReward
    from faithgrpo.testing import tiny_causal_lm

    got = cros.compute_deltas(PAIRS)[0]
    initial, tok = tiny_causal_lm("llama", seed=0)
    want = CRoSReward(initial, tok, num_scrambles=4, seed=cros.seed).compute_deltas(PAIRS)[0]
    assert got.delta is not None and got.delta == pytest.approx(want.delta, abs=1e-6)
    assert (tmp_path / "model.safetensors").is_file()


@pytest.mark.slow
def test_add_reward_term_with_lora_scores_with_adapters_disabled(tiny_llama_path, tmp_path):
    script = _load_script("add_reward_term")
    flags = ["--use_peft", "true", "--lora_r", "4", "--lora_target_modules", "q_proj", "v_proj"]
    parsed = script.make_parser().parse_args_and_config(
        _add_reward_term_args(tiny_llama_path, tmp_path, *flags)
    )
    trainer = script.main(*parsed)
    cros = trainer.reward_funcs[1]
    assert trainer.cros_reference_mode == "peft_disabled_adapters"
    assert cros.model is trainer.accelerator.unwrap_model(trainer.model)  # no second model
    assert len(cros.last_scores) == 4 and (tmp_path / "adapter_model.safetensors").is_file()


@pytest.mark.slow
def test_accelerate_launch_runs_the_recipe(tiny_llama_path, tmp_path):
    accelerate = Path(sys.executable).with_name("accelerate")
    out = tmp_path / "run"
    proc = run_with_deadline(
        [str(accelerate), "launch", "--cpu", "--num_processes", "1", "--num_machines", "1",
         "--mixed_precision", "no", "--dynamo_backend", "no",
         str(ROOT / "recipes" / "grpo_cros.py"), *_tiny_args(tiny_llama_path, out, "--max_steps", "1",
                                                              "--save_strategy", "no")],
        timeout=600, cwd=tmp_path,
        env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT / "tests")},  # for length_reward
    )  # fmt: skip
    assert proc.returncode == 0, proc.log()
    assert "step 1/1 | reward" in proc.stdout  # the one-line summary
    assert [r["step"] for r in read_metrics(out / "metrics.jsonl")] == [1]
    assert (out / "adapter_model.safetensors").is_file()
    assert (out / "reward_means.png").read_bytes().startswith(PNG_MAGIC)
