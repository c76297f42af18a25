#!/usr/bin/env python
"""GRPO + LoRA with faithfulness rewards (outcome, format, trace_format, CRoS, CALVER) on causal tasks.

open-r1 style: one YAML config per run, every CLI flag overrides it.

    python recipes/grpo_cros.py                         # the CPU demo: recipes/configs/cpu_demo.yaml
    accelerate launch recipes/grpo_cros.py              # the same, through accelerate
    python recipes/grpo_cros.py --max_steps 2 --cros_num_scrambles 2        # demo config, overridden
    accelerate launch --config_file recipes/accelerate_configs/multi_gpu.yaml \\
        recipes/grpo_cros.py --config recipes/configs/qwen2.5-1.5b-instruct.yaml
    python recipes/grpo_cros.py --output_dir runs/cpu_demo --resume_from_checkpoint true   # latest checkpoint

Without ``--config`` the CPU demo config is the base. Arguments: :class:`FaithScriptArguments` (rewards,
reward options, task mixture, warm start), ``trl.GRPOConfig`` (training, ``reward_weights``) and
``trl.ModelConfig`` (model, dtype, LoRA). Bad input (unknown reward, mismatched ``reward_weights``,
missing dataset columns, unreadable config, missing model or adapter path, CRoS under a sharded
backend without its own reference) stops with ``error: ...`` before any model is trained.

Outputs in ``output_dir``: the LoRA adapter (and tokenizer), checkpoints, ``metrics.jsonl`` (one line
per logging step), ``reward_means.png`` (each reward's mean per step) and ``train_results.json``.
"""

from __future__ import annotations

import copy
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from trl import GRPOConfig, ModelConfig, ScriptArguments, TrlParser, get_peft_config

RECIPES = Path(__file__).resolve().parent
DEFAULT_CONFIG = RECIPES / "configs" / "cpu_demo.yaml"

# Columns each reward reads (tuples: any one of them is enough). Every reward also needs "prompt".
REQUIRED_COLUMNS: dict[str, tuple[str, ...]] = {
    "outcome": ("problem", "entry"),
    "calver": ("problem",),
}
# Flat CLI/YAML reward options, routed by prefix like get_reward_funcs' options.
FLAT_REWARD_OPTIONS = (
    "outcome_strict",
    "cros_reference",
    "cros_num_scrambles",
    "cros_seed",
    "cros_gate",
    "cros_batch_size",
    "cros_max_length",
    "cros_undefined",
    "calver_graph_check",
)


class RecipeError(ValueError):
    """Bad user input, found before training starts; the message names the fix."""


@dataclass
class FaithScriptArguments(ScriptArguments):
    """Script arguments of ``grpo_cros.py`` (on top of TRL's ``ScriptArguments``).

    ``dataset_name`` (from TRL) replaces the generated task mixture with a local dataset: a directory
    written by ``Dataset.save_to_disk``, a ``.json``/``.jsonl``/``.parquet``/``.csv`` file, or a
    ``datasets.load_dataset`` name. It must hold the columns the chosen rewards read.
    """

    reward_funcs: list[str] = field(
        default_factory=lambda: ["outcome", "format", "trace_format", "cros", "calver"],
        metadata={
            "help": "Rewards: outcome, format, trace_format, cros, calver, or a dotted path to your own TRL reward "
            "function (my_pkg.rewards.fn). One --reward_weights entry each, in the same order."
        },
    )
    reward_options: dict | str | None = field(
        default=None,
        metadata={
            "help": "Reward options as a dict/JSON, <reward>_<option>: value (e.g. "
            '\'{"cros_batch_size": 16, "calver_max_chars": 8000}\'); the flat flags below override it.'
        },
    )
    outcome_strict: bool | None = field(
        default=None,
        metadata={"help": "Reasoning-gym partial credit below 1.0 counts as 0.0 (default true)."},
    )
    cros_reference: str | None = field(
        default=None,
        metadata={
            "help": "CRoS reference model (path, hub id, 'embedded'). Default: the initial policy (LoRA adapters "
            "disabled). Required under DeepSpeed ZeRO-3 / FSDP, where the policy is sharded."
        },
    )
    cros_num_scrambles: int | None = field(
        default=None, metadata={"help": "CRoS M, scrambles per completion."}
    )
    cros_seed: int | None = field(default=None, metadata={"help": "CRoS scramble seed (default: --seed)."})
    cros_gate: str | None = field(
        default=None,
        metadata={"help": "'none' or 'correct' (CRoS only on answers the outcome grader accepts)."},
    )
    cros_batch_size: int | None = field(default=None, metadata={"help": "CRoS sequences per forward pass."})
    cros_max_length: int | None = field(default=None, metadata={"help": "CRoS token budget per sequence."})
    cros_undefined: str | None = field(
        default=None, metadata={"help": "'lowest' (undefined Δ ranks last) or 'none' (reward None)."}
    )
    calver_graph_check: str | None = field(
        default=None, metadata={"help": "CALVER graph check: 'exact' or 'query_local'."}
    )
    task_size: int = field(default=256, metadata={"help": "Rows in the generated task mixture."})
    task_seed: int | None = field(default=None, metadata={"help": "Task mixture seed (default: --seed)."})
    causal_weight: float = field(default=1.0, metadata={"help": "Sampling weight of causal rows."})
    story_fraction: float = field(
        default=0.0, metadata={"help": "Share of causal rows told as stories (constructed-graph mode)."}
    )
    causal: dict | str | None = field(
        default=None,
        metadata={
            "help": "CausalGraphConfig fields as a dict/JSON (min_nodes, max_nodes, query_kinds, ...)."
        },
    )
    mixture: dict | str | None = field(
        default=None, metadata={"help": "reasoning-gym dataset -> weight, as a dict/JSON."}
    )
    mixture_configs: dict | str | None = field(
        default=None, metadata={"help": "reasoning-gym dataset -> its config fields, as a dict/JSON."}
    )
    system_prompt: str | None = field(
        default=None, metadata={"help": "One system prompt for every row (default: per task)."}
    )
    warm_start_adapter: str | None = field(
        default=None,
        metadata={
            "help": "A LoRA adapter directory to continue training (e.g. a gold-trace SFT run). CRoS then "
            "scores with the initial policy, base + this adapter merged, as a frozen copy."
        },
    )
    warm_start_config: str | None = field(
        default=None,
        metadata={
            "help": "An SFT config (recipes/sft_traces.py YAML) to run before GRPO, with this run's model; its "
            "adapter becomes the warm start. Cached by a hash of the config, the model and the faithgrpo "
            "version under --warm_start_cache, so a second run reuses it. 'none' turns it off; an explicit "
            "--warm_start_adapter wins over it. Relative paths: the working directory, then recipes/."
        },
    )
    warm_start_cache: str | None = field(
        default=None,
        metadata={"help": "Directory of cached warm-start adapters (default: $FAITHGRPO_CACHE/warm_start)."},
    )
    metrics_file: str = field(default="metrics.jsonl", metadata={"help": "Metrics file, in output_dir."})
    plot_file: str = field(default="reward_means.png", metadata={"help": "Reward plot, in output_dir."})
    cros_probe_file: str | None = field(
        default=None,
        metadata={
            "help": "Debug: a JSON file {'prompts': [...], 'completions': [...]}. After training each process "
            "scores its contiguous slice with the run's bound CRoS reward and writes "
            "output_dir/cros_probe_rank<k>.json (the distributed test compares them with one process)."
        },
    )

    def __post_init__(self):
        # Dict-valued options come as dicts from YAML and as JSON strings from the CLI.
        for name in ("reward_options", "causal", "mixture", "mixture_configs"):
            value = getattr(self, name)
            if isinstance(value, str):
                try:
                    value = json.loads(value)
                except json.JSONDecodeError as error:
                    raise RecipeError(
                        f"--{name} must be a JSON object, e.g. '{{\"key\": 1}}': {error}"
                    ) from None
            if value is not None and not isinstance(value, dict):
                raise RecipeError(f"{name} must be a mapping, got {type(value).__name__}")
            setattr(self, name, dict(value or {}))
        # Accept "--reward_funcs outcome,format" as well as "--reward_funcs outcome format".
        if isinstance(self.reward_funcs, str):
            self.reward_funcs = [self.reward_funcs]
        self.reward_funcs = [
            n.strip() for item in self.reward_funcs for n in str(item).split(",") if n.strip()
        ]


# ---------------------------------------------------------------------------------------------
# parsing and validation (no model is loaded here)
def make_parser() -> TrlParser:
    return TrlParser((FaithScriptArguments, GRPOConfig, ModelConfig))


def parse_args(argv: list[str] | None = None):
    """Parse ``argv`` (default ``sys.argv[1:]``) into the three dataclasses.

    Without ``--config`` the CPU demo config is the base, so ``python recipes/grpo_cros.py`` alone
    runs the demo and any flag overrides one of its values.
    """
    import yaml

    argv = list(sys.argv[1:] if argv is None else argv)
    if "--config" in argv:
        index = argv.index("--config")
        if index + 1 >= len(argv):
            raise RecipeError("--config needs a path, e.g. --config recipes/configs/cpu_demo.yaml")
        config = Path(argv[index + 1])
    else:
        config = DEFAULT_CONFIG
        argv = ["--config", str(config), *argv]
    configs = sorted(p.name for p in (RECIPES / "configs").glob("*.yaml"))
    try:
        loaded = yaml.safe_load(config.read_text(encoding="utf-8"))
    except OSError as error:
        raise RecipeError(
            f"cannot read config file {str(config)!r} ({error.strerror or error}); pass an existing YAML file, "
            f"e.g. one of recipes/configs/: {', '.join(configs)}"
        ) from None
    except yaml.YAMLError as error:
        raise RecipeError(f"config file {str(config)!r} is not valid YAML: {error}") from None
    if not isinstance(loaded, dict):
        raise RecipeError(f"config file {str(config)!r} must be a YAML mapping of argument: value")
    parser = make_parser()
    known = {action.dest for action in parser._actions} | {"env"}
    unknown = sorted(set(loaded) - known)
    if unknown:
        raise RecipeError(
            f"config file {str(config)!r} has unknown keys {unknown}; see `python recipes/grpo_cros.py --help`"
        )
    try:
        return parser.parse_args_and_config(argv)
    except RecipeError:
        raise
    except ValueError as error:  # GRPOConfig/ModelConfig __post_init__ checks (batch sizes, bf16 on CPU, ...)
        raise RecipeError(str(error)) from None


def _is_main_process() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def _say(message: str) -> None:
    if _is_main_process():
        print(f"[grpo_cros] {message}", flush=True)


def collect_reward_options(
    script_args: FaithScriptArguments, training_args: GRPOConfig, model_args=None
) -> dict:
    """Prefix-routed reward options: ``reward_options`` plus the flat flags (one place per option).

    Flat flags for a reward that is not requested are dropped (they are config defaults); unknown keys
    in ``reward_options`` are errors (the registry says so), and so is an option set both ways.
    """
    names = set(script_args.reward_funcs)
    options = dict(script_args.reward_options)
    for key in FLAT_REWARD_OPTIONS:
        value = getattr(script_args, key)
        if value is None or key.split("_", 1)[0] not in names:
            continue
        if key in options and options[key] != value:
            raise RecipeError(
                f"{key} is set twice ({key}: {value!r} and reward_options: {options[key]!r}); set it in one "
                f"place, e.g. --{key} {options[key]}"
            )
        options[key] = value
    if "cros" in names:
        options.setdefault("cros_seed", training_args.seed)
        dtype = getattr(model_args, "dtype", None)
        if options.get("cros_reference") and dtype not in (None, "auto"):
            # A separately loaded reference matches the policy's precision unless told otherwise.
            options.setdefault("cros_model_kwargs", {"dtype": dtype})
    return options


def _import_reward(path: str):
    """A custom reward given as a dotted import path (``my_pkg.rewards.length_penalty``), as in TRL's script."""
    import importlib

    module_name, _, attr = path.rpartition(".")
    try:
        func = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as error:
        raise RecipeError(
            f"cannot import reward function {path!r} ({error}); give a faithgrpo reward name or a dotted path "
            "to a callable importable from the working directory"
        ) from None
    if not callable(func):
        raise RecipeError(f"reward {path!r} is not callable")
    return func


def build_reward_funcs(script_args, training_args, model_args=None) -> list:
    """Reward callables in the order of ``reward_funcs``: faithgrpo names, or dotted paths to your own."""
    from faithgrpo.rewards.registry import get_reward_funcs

    names = script_args.reward_funcs
    builtin = [n for n in names if "." not in n]
    try:
        built = iter(
            get_reward_funcs(builtin, **collect_reward_options(script_args, training_args, model_args))
            if builtin
            else []
        )
    except (ValueError, TypeError) as error:
        raise RecipeError(f"rewards: {error}") from None
    if "." in "".join(names) and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # custom rewards next to the user's config, as TRL's script does
    return [next(built) if "." not in n else _import_reward(n) for n in names]


def _sharded_backend(training_args: GRPOConfig) -> str | None:
    """'DeepSpeed ZeRO-3' or 'FSDP' when the policy's parameters will be sharded, else None."""
    env = os.environ
    if env.get("ACCELERATE_USE_FSDP", "").lower() in ("1", "true") or training_args.fsdp:
        return "FSDP"
    stage = env.get("ACCELERATE_DEEPSPEED_ZERO_STAGE", "")
    if env.get("ACCELERATE_USE_DEEPSPEED", "").lower() in ("1", "true") and stage == "3":
        return "DeepSpeed ZeRO-3"
    ds = training_args.deepspeed
    if isinstance(ds, (str, Path)) and Path(ds).is_file():
        try:
            ds = json.loads(Path(ds).read_text())
        except (OSError, json.JSONDecodeError):
            ds = None
    if isinstance(ds, dict) and (ds.get("zero_optimization") or {}).get("stage") == 3:
        return "DeepSpeed ZeRO-3"
    return None


def _missing_reporters(report_to) -> list[str]:
    """Logging integrations named in ``report_to`` (tensorboard, wandb, ...) that are not installed."""
    from transformers.integrations import get_available_reporting_integrations

    names = [report_to] if isinstance(report_to, str) else list(report_to or [])
    available = set(get_available_reporting_integrations())
    return [n for n in names if n not in ("none", "all") and n not in available]


def resolve_resume(training_args: GRPOConfig) -> str | None:
    """``--resume_from_checkpoint``: a checkpoint dir, or true/latest for the newest one in output_dir."""
    value = training_args.resume_from_checkpoint
    if value in (None, "", False) or str(value).lower() in ("false", "no", "none"):
        return None
    if value is True or str(value).lower() in ("true", "yes", "latest", "last"):
        from transformers.trainer_utils import get_last_checkpoint

        out = Path(training_args.output_dir)
        last = get_last_checkpoint(str(out)) if out.is_dir() else None
        if last is None:
            raise RecipeError(
                f"--resume_from_checkpoint {value}: no checkpoint-* directory in {str(out)!r}; start without it, "
                "or pass the output_dir of the interrupted run"
            )
        return last
    if not Path(value).is_dir():
        raise RecipeError(
            f"--resume_from_checkpoint {value!r} is not a directory; pass a checkpoint-<step> directory or 'true'"
        )
    return str(value)


def resolve_model(name: str, check: bool = True) -> str:
    """Resolve 'embedded' / a path / a hub id and, with ``check``, make sure it can be loaded."""
    from faithgrpo.models import resolve

    if not name:
        raise RecipeError("--model_name_or_path is required ('embedded', a checkpoint directory or a hub id)")
    try:
        path = resolve(name)
    except ValueError as error:
        raise RecipeError(str(error)) from None
    except RuntimeError as error:  # the embedded model's package is missing
        raise RecipeError(str(error)) from None
    if check:
        from transformers import AutoConfig

        if Path(path).is_dir() and not (Path(path) / "config.json").is_file():
            raise RecipeError(
                f"model directory {path!r} has no config.json; pass a Hugging Face checkpoint directory "
                "(save_pretrained output), 'embedded', or a hub id"
            )
        try:
            AutoConfig.from_pretrained(path)
        except (OSError, ValueError) as error:
            raise RecipeError(
                f"cannot load model {name!r}: {str(error).splitlines()[0]}; pass 'embedded', an existing "
                "checkpoint directory, or a hub id this machine can download"
            ) from None
    return path


def validate(script_args, training_args, model_args, *, check_paths: bool = True) -> list:
    """Check every user input that can be checked without training; return the reward functions.

    Args:
        check_paths: also check that the model, warm-start adapter and checkpoint paths load
            (config parsing tests of GPU recipes turn this off: their hub ids are not reachable here).

    Raises:
        RecipeError: naming the argument and the fix.
    """
    from faithgrpo.rewards.registry import REWARD_NAMES

    if not script_args.reward_funcs:
        raise RecipeError(f"--reward_funcs is empty; choose from {', '.join(REWARD_NAMES)}")
    funcs = build_reward_funcs(script_args, training_args, model_args)
    weights = training_args.reward_weights
    if weights is not None and len(weights) != len(funcs):
        raise RecipeError(
            f"reward_weights has {len(weights)} value(s) {list(weights)} but reward_funcs names {len(funcs)} "
            f"reward(s) {script_args.reward_funcs}; give one weight per reward, in the same order "
            "(e.g. --reward_weights " + " ".join(["1.0"] * len(funcs)) + ")"
        )
    if script_args.dataset_name is None:
        try:
            task_mix(script_args, training_args).validate()
        except (ValueError, TypeError) as error:
            raise RecipeError(f"task mixture: {error}") from None
    if "cros" in script_args.reward_funcs and not collect_reward_options(script_args, training_args).get(
        "cros_reference"
    ):
        backend = _sharded_backend(training_args)
        if backend:
            raise RecipeError(
                f"CRoS scores with the initial policy, whose parameters {backend} shards across processes; "
                "give CRoS its own frozen reference: --cros_reference <the policy's model id or path> "
                "(or use DDP / DeepSpeed ZeRO-2, where the policy is not sharded)"
            )
    missing = _missing_reporters(training_args.report_to)
    if missing:
        raise RecipeError(
            f"report_to names {missing}, not installed here; pip install {' '.join(missing)}, or --report_to none"
        )
    if training_args.use_vllm:
        import importlib.util

        if importlib.util.find_spec("vllm") is None:
            raise RecipeError(
                "use_vllm is true but vLLM is not installed; pip install 'faithgrpo[vllm]' or --use_vllm false"
            )
    if not script_args.warm_start_adapter:
        config = warm_start_config_path(script_args.warm_start_config)
        if config is not None and check_paths:
            warm_start_key(config, model_args.model_name_or_path)  # readable YAML mapping
    if check_paths:
        resolve_model(model_args.model_name_or_path)
        if script_args.warm_start_adapter:
            adapter = Path(script_args.warm_start_adapter)
            if not (adapter / "adapter_config.json").is_file():
                raise RecipeError(
                    f"--warm_start_adapter {str(adapter)!r} is not a LoRA adapter directory (no "
                    "adapter_config.json); pass the output_dir of a PEFT run, or drop the flag"
                )
        resolve_resume(training_args)
        if script_args.cros_probe_file and not Path(script_args.cros_probe_file).is_file():
            raise RecipeError(f"--cros_probe_file {script_args.cros_probe_file!r} does not exist")
    return funcs


# ---------------------------------------------------------------------------------------------
# data
def task_mix(script_args, training_args):
    from faithgrpo.tasks.causal import TaskMixConfig

    return TaskMixConfig(
        size=script_args.task_size,
        seed=script_args.task_seed if script_args.task_seed is not None else training_args.seed,
        causal_weight=script_args.causal_weight,
        story_fraction=script_args.story_fraction,
        causal=dict(script_args.causal),
        mixture=dict(script_args.mixture),
        mixture_configs=dict(script_args.mixture_configs),
        system_prompt=script_args.system_prompt,
    )


def load_user_dataset(script_args):
    """Load ``dataset_name``: a saved dataset directory, a data file, or a ``load_dataset`` name."""
    import datasets

    name, split = script_args.dataset_name, script_args.dataset_train_split
    path = Path(name).expanduser()
    builders = {".json": "json", ".jsonl": "json", ".parquet": "parquet", ".csv": "csv"}
    try:
        if path.is_dir() and (
            (path / "dataset_info.json").is_file() or (path / "dataset_dict.json").is_file()
        ):
            data = datasets.load_from_disk(str(path))
        elif path.is_file() and path.suffix in builders:
            data = datasets.load_dataset(builders[path.suffix], data_files=str(path))
        else:
            data = datasets.load_dataset(name, name=script_args.dataset_config)
    except Exception as error:  # datasets raises many types; all mean "could not load"
        raise RecipeError(
            f"cannot load dataset {name!r}: {error}; pass a save_to_disk directory, a .json/.jsonl/.parquet/.csv "
            "file, or drop --dataset_name to use the generated task mixture"
        ) from None
    if isinstance(data, datasets.DatasetDict):
        if split not in data:
            raise RecipeError(
                f"dataset {name!r} has no split {split!r}; its splits: {list(data)} (--dataset_train_split)"
            )
        data = data[split]
    return data


def check_columns(dataset, reward_names: list[str], options: dict) -> None:
    """Every column a requested reward reads is present (else a RecipeError naming the fix)."""
    columns = set(dataset.column_names)
    if "prompt" not in columns:
        raise RecipeError(f"the dataset has no 'prompt' column (columns: {sorted(columns)}); GRPO needs one")
    needs = dict(REQUIRED_COLUMNS)
    if options.get("cros_gate") == "correct" and "cros_is_correct" not in options:
        needs["cros"] = REQUIRED_COLUMNS["outcome"]  # the gate grades with the outcome reward's columns
    for name in reward_names:
        wanted = needs.get(name)
        if wanted and not columns & set(wanted):
            raise RecipeError(
                f"reward {name!r} reads the column {' or '.join(repr(c) for c in wanted)}, which the dataset "
                f"lacks (columns: {sorted(columns)}); add it, or remove {name!r} from --reward_funcs "
                "(and its --reward_weights entry)"
            )


def make_dataset(script_args, training_args):
    if script_args.dataset_name is not None:
        return load_user_dataset(script_args)
    from faithgrpo.tasks.causal import build_dataset

    return build_dataset(task_mix(script_args, training_args))


# ---------------------------------------------------------------------------------------------
# model
def model_init_kwargs(model_args, training_args) -> dict:
    kwargs = dict(
        revision=model_args.model_revision,
        trust_remote_code=getattr(training_args, "trust_remote_code", None),
        attn_implementation=model_args.attn_implementation,
        dtype=model_args.dtype,
    )
    kwargs.update(training_args.model_init_kwargs or {})
    return {k: v for k, v in kwargs.items() if v is not None}


def load_policy(path: str, init_kwargs: dict, training_args):
    """The policy, loaded as TRL loads a model id (same dtype and device rules), with the run's seed."""
    from transformers import set_seed
    from trl.trainer.utils import create_model_from_path

    kwargs = dict(init_kwargs)
    if training_args.distributed_state.distributed_type in ("MULTI_GPU", "DEEPSPEED"):
        kwargs["device_map"] = None  # as TRL does: "auto" fails under DDP/DeepSpeed
    set_seed(training_args.seed)  # LoRA adapters are initialised randomly: same seed, same run
    return create_model_from_path(path, **kwargs)


def warm_start(policy, adapter: str):
    """``(policy, frozen_reference)``: ``adapter`` trainable on ``policy``, and base + adapter merged.

    The merged copy is the initial policy CRoS must score with (DESIGN §3.3); disabling the adapter
    would give the base model instead. It costs one extra copy of the weights.
    """
    from peft import PeftModel

    policy = PeftModel.from_pretrained(policy, adapter, is_trainable=True)
    reference = copy.deepcopy(policy).merge_and_unload()
    reference.eval().requires_grad_(False)
    return policy, reference


# ---------------------------------------------------------------------------------------------
# warm start: gold-trace SFT (recipes/sft_traces.py) before GRPO, cached by a hash of what it depends on
WARM_START_RECORD = "warm_start.json"
# Set by torchrun/accelerate for this run's process group; the SFT child must start a group of its own.
_LAUNCHER_ENV = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "ROLE_RANK",
    "ROLE_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RUN_ID",
)
# SFT config keys that do not change the trained adapter, so they stay out of the cache key.
_UNKEYED = ("output_dir", "report_to", "logging_steps", "run_name")


def warm_start_config_path(value: str | None) -> Path | None:
    """The SFT config file named by ``--warm_start_config`` (``None`` when it is unset or 'none')."""
    if value is None or str(value).strip().lower() in ("", "none", "null", "false"):
        return None
    given = Path(value).expanduser()
    for candidate in (given, RECIPES / given, RECIPES / "configs" / given):
        if candidate.is_file():
            return candidate.resolve()
    configs = sorted(p.name for p in (RECIPES / "configs").glob("sft*.yaml"))
    raise RecipeError(
        f"--warm_start_config {value!r} is not a file; pass an SFT config such as recipes/configs/"
        f"{configs[0] if configs else 'sft_cpu_demo.yaml'}, or 'none' to train from the base model"
    )


def warm_start_key(config: Path, model_name: str) -> str:
    """A 16-hex-digit key of everything the warm-start adapter depends on.

    The SFT config's content (without output and logging keys), the model name and the path it
    resolves to (the embedded model's path carries its version), the faithgrpo version and the
    gold-trace format (:data:`faithgrpo.tasks.gold.GOLD_FORMAT`). Same key, same adapter: the cached one is reused.
    """
    import hashlib

    import yaml

    import faithgrpo
    from faithgrpo.tasks.gold import GOLD_FORMAT

    try:
        loaded = yaml.safe_load(config.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as error:
        raise RecipeError(f"cannot read warm-start config {str(config)!r}: {error}") from None
    if not isinstance(loaded, dict):
        raise RecipeError(f"warm-start config {str(config)!r} must be a YAML mapping of argument: value")
    identity = {
        "config": {k: v for k, v in loaded.items() if k not in _UNKEYED},
        "model": model_name,
        "model_path": resolve_model(model_name, check=False),
        "faithgrpo": faithgrpo.__version__,
        "gold_format": GOLD_FORMAT,
    }
    blob = json.dumps(identity, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def _warm_start_cache(script_args) -> Path:
    if script_args.warm_start_cache:
        return Path(script_args.warm_start_cache).expanduser().resolve()
    from faithgrpo.models import cache_dir

    return (cache_dir() / "warm_start").resolve()


def _train_warm_start(config: Path, model_name: str, target: Path) -> float:
    """Run recipes/sft_traces.py in a child process into a temporary folder, then move it to ``target``.

    A child process keeps the SFT model's memory out of the GRPO run and starts no collective
    operation in this run's process group. Returns the SFT wall time in seconds.
    """
    import shutil
    import subprocess
    import time

    tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    command = [
        sys.executable,
        str(RECIPES / "sft_traces.py"),
        "--config",
        str(config),
        "--model_name_or_path",
        model_name,
        "--output_dir",
        str(tmp),
    ]
    env = {k: v for k, v in os.environ.items() if k not in _LAUNCHER_ENV}
    start = time.perf_counter()
    status = subprocess.run(command, env=env, check=False).returncode
    seconds = time.perf_counter() - start
    if status != 0 or not (tmp / "adapter_config.json").is_file():
        shutil.rmtree(tmp, ignore_errors=True)
        raise RecipeError(
            f"the warm-start SFT failed (exit status {status}); run it alone to see why: python "
            f"recipes/sft_traces.py --config {config} --model_name_or_path {model_name}, or pass "
            "--warm_start_config none"
        )
    (tmp / WARM_START_RECORD).write_text(
        json.dumps({"config": str(config), "model": model_name, "sft_seconds": round(seconds, 1)}, indent=2)
        + "\n"
    )
    try:
        tmp.rename(target)
    except OSError:  # another run finished the same key first: keep theirs
        shutil.rmtree(tmp, ignore_errors=True)
    return seconds


def run_warm_start(script_args, training_args, model_args) -> Path | None:
    """The warm-start adapter for this run: trained now, reused from the cache, or ``None``.

    ``--warm_start_adapter`` given explicitly wins; otherwise ``--warm_start_config`` is run once
    per key (`warm_start_key`) by the main process while the others wait, and every process then
    reads the same cached adapter. A note of the adapter the run starts from (explicit or from the
    cache) goes to ``output_dir/warm_start.json``.
    """
    if script_args.warm_start_adapter:
        adapter = str(Path(script_args.warm_start_adapter).expanduser().resolve())
        _write_warm_start_note(training_args, {"adapter": adapter, "explicit": True})
        return None
    config = warm_start_config_path(script_args.warm_start_config)
    if config is None:
        return None
    model_name = model_args.model_name_or_path
    target = _warm_start_cache(script_args) / f"sft-{warm_start_key(config, model_name)}"
    reused = (target / WARM_START_RECORD).is_file()
    failure = None
    with training_args.main_process_first(local=False, desc="warm-start SFT"):
        # The main process trains (or finds) the adapter first; the others then find it. A failure
        # is raised after the barrier, or the waiting processes would hang.
        if not (target / WARM_START_RECORD).is_file() and training_args.process_index == 0:
            target.parent.mkdir(parents=True, exist_ok=True)
            _say(f"warm start: gold-trace SFT with {config.name} -> {target}")
            try:
                _train_warm_start(config, model_name, target)
            except RecipeError as error:
                failure = error
    if failure is not None:
        raise failure
    if not (target / WARM_START_RECORD).is_file():
        raise RecipeError(
            f"the warm-start adapter {str(target)!r} is missing; the main process failed to train it"
        )
    record = json.loads((target / WARM_START_RECORD).read_text())
    if reused:
        _say(f"warm start: reusing {target} (SFT took {record.get('sft_seconds')} s when it was trained)")
    _write_warm_start_note(training_args, {"adapter": str(target), "reused": reused, **record})
    return target


def _write_warm_start_note(training_args, note: dict) -> None:
    """``output_dir/warm_start.json``: which adapter the run started from (the pipeline evaluates it)."""
    if training_args.process_index == 0:
        out = Path(training_args.output_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / WARM_START_RECORD).write_text(json.dumps(note, indent=2) + "\n")


# ---------------------------------------------------------------------------------------------
# debug probe
def run_cros_probe(trainer, probe_file: str, output_dir: str) -> dict | None:
    """Score a fixed batch with the trainer's bound CRoS reward, this process's contiguous slice only."""
    import torch.distributed as dist

    from faithgrpo.rewards.cros import CRoSReward

    cros = next((f for f in trainer.reward_funcs if isinstance(f, CRoSReward)), None)
    if cros is None:
        raise RecipeError("--cros_probe_file needs 'cros' in --reward_funcs")
    probe = json.loads(Path(probe_file).read_text(encoding="utf-8"))
    prompts, completions = probe["prompts"], probe["completions"]
    rank, world = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
    if len(prompts) % world:
        raise RecipeError(f"the probe batch ({len(prompts)} rows) must split evenly over {world} processes")
    size = len(prompts) // world
    part = slice(rank * size, (rank + 1) * size)
    rewards = cros(prompts[part], completions[part])
    result = {
        "rank": rank,
        "world": world,
        "backend": dist.get_backend() if dist.is_initialized() else None,
        "reference_mode": getattr(trainer, "cros_reference_mode", None),
        "rewards": rewards,
        "deltas": [s.delta for s in cros.last_scores],
        "reasons": [s.reason for s in cros.last_scores],
    }
    Path(output_dir, f"cros_probe_rank{rank}.json").write_text(json.dumps(result), encoding="utf-8")
    return result


# ---------------------------------------------------------------------------------------------
# main
def main(script_args, training_args, model_args, callbacks: list | None = None):
    """Validate, build the data, rewards and trainer, train, save. Returns the trainer."""
    from transformers import AutoTokenizer

    from faithgrpo.trainers import FaithGRPOTrainer
    from faithgrpo.trainers.callbacks import install_callbacks

    reward_funcs = validate(script_args, training_args, model_args)
    resume = resolve_resume(training_args)
    options = collect_reward_options(script_args, training_args, model_args)
    dataset = make_dataset(script_args, training_args)
    check_columns(dataset, script_args.reward_funcs, options)

    adapter = run_warm_start(script_args, training_args, model_args)
    if adapter is not None:
        script_args.warm_start_adapter = str(adapter)
    path = resolve_model(model_args.model_name_or_path, check=False)
    tokenizer = AutoTokenizer.from_pretrained(path, revision=model_args.model_revision)
    model = load_policy(path, model_init_kwargs(model_args, training_args), training_args)
    training_args.model_init_kwargs = None  # used above; TRL warns about them next to a loaded model
    peft_config = get_peft_config(model_args)
    if script_args.warm_start_adapter:
        from faithgrpo.rewards.cros import CRoSReward

        model, reference = warm_start(model, script_args.warm_start_adapter)
        peft_config = None  # the warm-start adapter is what trains
        for func in reward_funcs:
            if isinstance(func, CRoSReward) and func.model is None and func._reference_path is None:
                func.bind_reference(reference, tokenizer)
    names = ", ".join(
        f"{n}×{w:g}" for n, w in zip(script_args.reward_funcs, training_args.reward_weights or [])
    )
    _say(
        f"model {model_args.model_name_or_path} ({path}), {'LoRA' if peft_config or script_args.warm_start_adapter else 'full'}"
        f"; {len(dataset)} rows; rewards {names or ', '.join(script_args.reward_funcs)}"
    )

    trainer = FaithGRPOTrainer(
        model=model,
        reward_funcs=reward_funcs,
        args=training_args,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=callbacks,
    )
    metrics_cb = install_callbacks(
        trainer,
        metrics_path=Path(training_args.output_dir) / script_args.metrics_file,
        plot_path=Path(training_args.output_dir) / script_args.plot_file,
    )
    if trainer.cros_reference_mode:
        _say(f"CRoS reference: {trainer.cros_reference_mode}")
    elif script_args.warm_start_adapter and "cros" in script_args.reward_funcs:
        _say("CRoS reference: frozen base + warm-start adapter (merged)")

    result = trainer.train(resume_from_checkpoint=resume)
    trainer.save_model(training_args.output_dir)
    trainer.log_metrics("train", result.metrics)
    trainer.save_metrics("train", result.metrics)
    trainer.save_state()
    if script_args.cros_probe_file:
        run_cros_probe(trainer, script_args.cros_probe_file, training_args.output_dir)
    _say(f"adapter and tokenizer saved to {training_args.output_dir}")
    _say(f"metrics: {metrics_cb.path}" + (f"; plot: {metrics_cb.plotted}" if metrics_cb.plotted else ""))
    return trainer


def cli(argv: list[str] | None = None) -> int:
    from faithgrpo.trainers.distributed import distributed_teardown

    trainer = None
    try:
        script_args, training_args, model_args = parse_args(argv)
        trainer = main(script_args, training_args, model_args)
    except RecipeError as error:
        print(f"error: {error}", file=sys.stderr, flush=True)
        return 2
    finally:
        # Every rank leaves the process group (or torchrun/accelerate report an abort), with the
        # group's last reference a Python one: the gloo exit deadlock of DESIGN §7. The barrier only
        # after a finished run: a rank that failed would leave the others waiting.
        with distributed_teardown(barrier=trainer is not None):
            if trainer is not None:
                trainer.end()  # trackers; accelerate destroys the process group here
                del trainer
    return 0


if __name__ == "__main__":
    sys.exit(cli())
