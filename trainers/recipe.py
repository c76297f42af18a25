"""Library side of the GRPO recipe (``recipes/grpo_cros.py``): arguments, config rule, validation.

The recipe script stays thin (open-r1 style); what it does before training lives here, with tests:

- :class:`FaithScriptArguments`: the recipe's script arguments on top of TRL's ``ScriptArguments``
  (rewards and their options, the task mixture, the warm start).
- :func:`parse_recipe_args`: ``TrlParser((FaithScriptArguments, GRPOConfig, ModelConfig))`` with one
  rule for the config file (:func:`resolve_config`): ``--config FILE`` when given; the demo config
  when neither ``--config`` nor ``--model_name_or_path`` is given; otherwise no file at all, so TRL's
  ``GRPOConfig``/``ModelConfig`` defaults apply to the model given.
  Before TRL's parser runs, the config file's keys are checked against the dataclasses' fields (an
  unknown key is named, with the closest known one, before ``GRPOConfig`` checks the device), and a
  DeepSpeed run without DeepSpeed installed is named (``GRPOConfig`` would fail on the import).
- :func:`validate`: every check that needs no training (reward names, ``reward_weights`` length,
  options, the task mixture, full fine-tuning on sharded backends without a CRoS reference, DeepSpeed,
  reporters, vLLM, model, CRoS reference, adapter and checkpoint paths), raising :class:`RecipeError`
  naming the fix.
- :func:`single_process_launch_warning`: a launch that asked for several processes and got one
  (``accelerate launch --cpu --num_processes N`` without MPI).

Dataset assembly is :mod:`faithgrpo.trainers.data`, the warm start :mod:`faithgrpo.trainers.warm_start`.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from trl import GRPOConfig, ModelConfig, ScriptArguments, TrlParser

from faithgrpo.trainers.checks import (
    RecipeError,
    check_cros_reference,
    missing_reporters,
    resolve_model,
    resolve_resume,
    sharded_backend,
)
from faithgrpo.trainers.rollout import check_rollout_choice

__all__ = [
    "FLAT_REWARD_OPTIONS",
    "FaithScriptArguments",
    "build_reward_funcs",
    "collect_reward_options",
    "deepspeed_requested",
    "parse_recipe_args",
    "resolve_config",
    "validate",
]

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


@dataclass
class FaithScriptArguments(ScriptArguments):
    """Script arguments of ``recipes/grpo_cros.py`` (on top of TRL's ``ScriptArguments``).

    ``dataset_name`` (from TRL) replaces the generated task mixture with a dataset: a directory
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
            "help": "CRoS reference model (path, hub id, 'embedded'; it must use the policy's tokenizer). "
            "Default: the initial policy, bound by FaithGRPOTrainer. Only for full fine-tuning under "
            "ZeRO-3/FSDP (with LoRA, CRoS scores through the policy's own forward with its initial adapter, "
            "no second model). With a warm start the warm-start adapter is applied to it."
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
            "help": "A LoRA adapter directory to continue training (e.g. a gold-trace SFT run). It is loaded as "
            "the policy's trainable adapter; CRoS scores with a frozen copy of its initial tensors."
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
    rollout: str = field(
        default="auto",
        metadata={
            "help": "Who samples the completions: 'decode' (faithgrpo's decode engine, through TRL's rollout_func), "
            "'trl' (TRL's generate, or vLLM with use_vllm), 'auto' (decode on CPU without vLLM, else trl)."
        },
    )
    metrics_file: str = field(default="metrics.jsonl", metadata={"help": "Metrics file, in output_dir."})
    plot_file: str = field(default="reward_means.png", metadata={"help": "Reward plot, in output_dir."})
    completions_file: str | None = field(
        default=None,
        metadata={
            "help": "Also write every logged completion (prompt, completion, each reward, advantage) as JSON "
            "lines to this file in output_dir, e.g. completions.jsonl (logging_steps: 1 records every step)."
        },
    )
    #: Which config file is in force and why, and its path (set by :func:`parse_recipe_args`; not flags).
    config_source: str = field(default="", init=False)
    config_file: str | None = field(default=None, init=False)

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
# parsing
def _gives(argv: Sequence[str], flag: str) -> bool:
    dashed = flag.replace("_", "-")
    return any(a in (flag, dashed) or a.startswith((f"{flag}=", f"{dashed}=")) for a in argv)


def resolve_config(argv: Sequence[str], demo_config: str | os.PathLike | None) -> tuple[list[str], str]:
    """``(argv, description)``: which config file is in force, and ``argv`` with it.

    - ``--config FILE`` given: that file (flags override its values).
    - Neither ``--config`` nor ``--model_name_or_path`` given: ``demo_config`` (the CPU demo), so the
      bare script runs the demo.
    - A model without ``--config``: no file; TRL's ``GRPOConfig``/``ModelConfig`` defaults apply to it.
    """
    argv = list(argv)
    if "--config" in argv:
        index = argv.index("--config")
        if index + 1 >= len(argv):
            raise RecipeError("--config needs a path, e.g. --config recipes/configs/cpu_demo.yaml")
        return argv, f"config {argv[index + 1]}"
    if demo_config is not None and not _gives(argv, "--model_name_or_path"):
        return (
            ["--config", str(demo_config), *argv],
            f"config {demo_config} (the CPU demo: no --config and no --model_name_or_path given)",
        )
    return argv, "no config file: TRL's GRPOConfig and ModelConfig defaults plus the flags given"


def parse_recipe_args(
    argv: Sequence[str] | None = None,
    *,
    demo_config: str | os.PathLike | None = None,
    dataclass_types: tuple = (FaithScriptArguments, GRPOConfig, ModelConfig),
):
    """Parse ``argv`` (default ``sys.argv[1:]``) with TRL's parser under the :func:`resolve_config` rule.

    Returns the dataclasses (script arguments first, with ``config_source`` set). TRL's own errors
    (unreadable config, a config that is not a mapping, unknown keys in it, ``GRPOConfig`` checks)
    come back as :class:`RecipeError`.
    """
    import yaml

    argv, source = resolve_config(list(sys.argv[1:] if argv is None else argv), demo_config)
    parser = TrlParser(dataclass_types)
    try:
        # Ahead of TRL's parser, which builds GRPOConfig (device, precision and DeepSpeed checks) before
        # it looks at unknown keys: the user's own mistake is named first.
        config = _read_config(argv[argv.index("--config") + 1]) if "--config" in argv else None
        if isinstance(config, dict):
            _check_config_keys(config, argv[argv.index("--config") + 1], dataclass_types)
        elif config is not None:
            raise RecipeError(
                f"config file {argv[argv.index('--config') + 1]!r} must contain a YAML mapping of flags "
                f"(key: value lines), not a {type(config).__name__}"
            )
        if (
            _deepspeed_in_args(argv, config if isinstance(config, dict) else {})
            and not _deepspeed_installed()
        ):
            raise RecipeError(DEEPSPEED_MISSING)
        parsed = parser.parse_args_and_config(argv)
    except RecipeError:
        raise
    except OSError as error:
        config = argv[argv.index("--config") + 1]
        where = Path(demo_config).parent if demo_config is not None else None
        names = ", ".join(sorted(p.name for p in where.glob("*.yaml"))) if where else ""
        raise RecipeError(
            f"cannot read config file {config!r} ({error.strerror or error}); pass an existing YAML file"
            + (f", e.g. one of {where}: {names}" if names else "")
        ) from None
    except yaml.YAMLError as error:
        raise RecipeError(
            f"config file {argv[argv.index('--config') + 1]!r} is not valid YAML: {error}"
        ) from None
    except ValueError as error:  # TRL's config checks, GRPOConfig/ModelConfig __post_init__
        raise RecipeError(str(error)) from None
    except ImportError as error:  # DeepSpeed asked for in a way the pre-check did not see
        if "deepspeed" in str(error).lower():
            raise RecipeError(DEEPSPEED_MISSING) from None
        raise
    parsed[0].config_source = source
    if "--config" in argv:
        parsed[0].config_file = str(Path(argv[argv.index("--config") + 1]).resolve())
    return parsed


def _read_config(path: str):
    """The config file's YAML (OSError and YAMLError are reported by :func:`parse_recipe_args`)."""
    import yaml

    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def _check_config_keys(config: dict, path: str, dataclass_types: Sequence[type]) -> None:
    """Name the config keys no dataclass has, each with the closest known name."""
    import dataclasses
    import difflib

    known = {f.name for cls in dataclass_types for f in dataclasses.fields(cls) if f.init} | {"env"}
    unknown = [str(key) for key in config if key not in known]
    if not unknown:
        return

    def named(key: str) -> str:
        close = difflib.get_close_matches(key, known, n=1)
        return f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else "")

    raise RecipeError(
        f"config file {path!r} has unknown key{'s' if len(unknown) > 1 else ''} "
        f"{', '.join(named(k) for k in unknown)}; fix or remove {'them' if len(unknown) > 1 else 'it'} "
        "(every key is a flag of recipes/grpo_cros.py --help)"
    )


DEEPSPEED_MISSING = (
    "this run uses DeepSpeed (--deepspeed or an accelerate DeepSpeed config) but DeepSpeed is not installed; "
    "pip install 'faithgrpo[deepspeed]', or launch without DeepSpeed"
)
_FALSE = ("", "0", "false", "no", "none", "null")


def _deepspeed_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("deepspeed") is not None


def _deepspeed_env(env) -> bool:
    return str(env.get("ACCELERATE_USE_DEEPSPEED", "")).strip().lower() in ("1", "true", "yes")


def _deepspeed_in_args(argv: Sequence[str], config: dict) -> bool:
    """Whether the command line, the config file (its ``deepspeed`` key or ``env``) or the environment
    asks for DeepSpeed, as ``TrainingArguments`` will read them."""
    value = config.get("deepspeed")
    for i, arg in enumerate(argv):
        if arg in ("--deepspeed",) and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith("--deepspeed="):
            value = arg.split("=", 1)[1]
    if value is not None and str(value).strip().lower() not in _FALSE:
        return True
    env = config.get("env")
    return _deepspeed_env(os.environ) or (isinstance(env, dict) and _deepspeed_env(env))


def deepspeed_requested(training_args) -> bool:
    """Whether the run uses DeepSpeed: ``--deepspeed`` set, or ``ACCELERATE_USE_DEEPSPEED=true``."""
    value = getattr(training_args, "deepspeed", None)
    return (bool(value) and str(value).strip().lower() not in _FALSE) or _deepspeed_env(os.environ)


# ---------------------------------------------------------------------------------------------
# rewards
def collect_reward_options(script_args, training_args, model_args=None) -> dict:
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
        options = collect_reward_options(script_args, training_args, model_args)
        built = iter(get_reward_funcs(builtin, **options) if builtin else [])
    except RecipeError:
        raise
    except (ValueError, TypeError) as error:
        raise RecipeError(f"rewards: {error}") from None
    if "." in "".join(names) and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # custom rewards next to the user's config, as TRL's script does
    return [next(built) if "." not in n else _import_reward(n) for n in names]


# ---------------------------------------------------------------------------------------------
# validation
def validate(
    script_args,
    training_args,
    model_args,
    *,
    check_paths: bool = True,
    search_dirs: Sequence[str | os.PathLike] = (),
) -> list:
    """Check every user input that can be checked without training; return the reward functions.

    Args:
        check_paths: also check that the model, warm-start adapter and checkpoint paths load
            (config parsing tests of GPU recipes turn this off: their hub ids are not reachable here).
        search_dirs: where a relative ``--warm_start_config`` is looked up after the working directory
            and the directory of the config file in force.

    Raises:
        RecipeError: naming the argument and the fix.
    """
    from faithgrpo.rewards.registry import REWARD_NAMES
    from faithgrpo.trainers.data import task_mix
    from faithgrpo.trainers.warm_start import config_search_dirs, warm_start_config_path, warm_start_key

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
    warm_start = script_args.warm_start_adapter or warm_start_config_path(
        script_args.warm_start_config, config_search_dirs(script_args, search_dirs)
    )
    # LoRA (asked for, or a warm start, which always trains a LoRA adapter): CRoS scores through the
    # policy's own sharded forward with the initial adapter state, so only full fine-tuning under a
    # sharded backend needs a separately loaded reference.
    lora = bool(getattr(model_args, "use_peft", False) or warm_start)
    cros_reference = (
        collect_reward_options(script_args, training_args).get("cros_reference")
        if "cros" in script_args.reward_funcs
        else None
    )
    if "cros" in script_args.reward_funcs and not cros_reference and not lora:
        backend = sharded_backend(training_args)
        if backend:
            raise RecipeError(
                f"CRoS scores with the initial policy, and full fine-tuning under {backend} shards the policy "
                "across processes; give --cros_reference <the policy's model id or path> (one frozen copy per "
                "process), or train LoRA (--use_peft true), or use DDP / DeepSpeed ZeRO-2"
            )
    if deepspeed_requested(training_args) and not _deepspeed_installed():
        raise RecipeError(DEEPSPEED_MISSING)
    missing = missing_reporters(training_args.report_to)
    if missing:
        raise RecipeError(
            f"report_to names {missing}, not installed here; pip install {' '.join(missing)}, or --report_to none"
        )
    rollout_problem = check_rollout_choice(script_args.rollout, bool(training_args.use_vllm))
    if rollout_problem:
        raise RecipeError(rollout_problem)
    if training_args.use_vllm:
        import importlib.util

        if importlib.util.find_spec("vllm") is None:
            raise RecipeError(
                "use_vllm is true but vLLM is not installed; pip install 'faithgrpo[vllm]' or --use_vllm false"
            )
    if not script_args.warm_start_adapter and warm_start is not None and check_paths:
        warm_start_key(warm_start, model_args.model_name_or_path)  # readable YAML mapping
    if check_paths:
        resolve_model(model_args.model_name_or_path)
        if cros_reference and isinstance(cros_reference, (str, os.PathLike)):
            check_cros_reference(os.fspath(cros_reference), model_args.model_name_or_path)
        if script_args.warm_start_adapter:
            adapter = Path(script_args.warm_start_adapter)
            if not (adapter / "adapter_config.json").is_file():
                raise RecipeError(
                    f"--warm_start_adapter {str(adapter)!r} is not a LoRA adapter directory (no "
                    "adapter_config.json); pass the output_dir of a PEFT run, or drop the flag"
                )
        resolve_resume(training_args)
    return funcs
