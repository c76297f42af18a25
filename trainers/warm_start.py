"""Warm start of the GRPO recipe: a gold-trace SFT adapter, trained once and cached, continued by GRPO.

:func:`run_warm_start` finds the adapter a run starts from: ``--warm_start_adapter`` when given, else
the SFT config ``--warm_start_config`` run once per cache key (:func:`warm_start_key`) in a child
process by the main process, then read from the cache by every process.
:func:`load_warm_started_policy` loads it as the policy's *trainable* PEFT adapter. The policy is then
passed to :class:`~faithgrpo.trainers.FaithGRPOTrainer` without a ``peft_config``; the trainer binds
CRoS to a frozen copy of the adapter's initial tensors (mode ``"peft_initial_adapter"``, adapter-sized),
so no merged second copy of the model is made.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from faithgrpo.trainers.checks import RecipeError, resolve_model, say

__all__ = [
    "WARM_START_RECORD",
    "config_search_dirs",
    "load_warm_started_policy",
    "run_warm_start",
    "train_warm_start",
    "warm_start_cache",
    "warm_start_config_path",
    "warm_start_key",
]

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


def config_search_dirs(script_args, search_dirs: Sequence[str | os.PathLike] = ()) -> list[Path]:
    """Where a relative ``--warm_start_config`` is looked up after the working directory: the directory
    of the config file in force (``script_args.config_file``), then ``search_dirs``."""
    config_file = getattr(script_args, "config_file", None)
    return [*([Path(config_file).parent] if config_file else []), *(Path(d) for d in search_dirs)]


def warm_start_config_path(value: str | None, search_dirs: Sequence[str | os.PathLike] = ()) -> Path | None:
    """The SFT config file named by ``--warm_start_config`` (``None`` when it is unset or 'none').

    A relative path is looked up in the working directory, then in each of ``search_dirs``.
    """
    if value is None or str(value).strip().lower() in ("", "none", "null", "false"):
        return None
    given = Path(value).expanduser()
    for candidate in (given, *(Path(d) / given for d in search_dirs)):
        if candidate.is_file():
            return candidate.resolve()
    examples = sorted({p.name for d in search_dirs for p in Path(d).glob("sft*.yaml")}) or [
        "sft_cpu_demo.yaml"
    ]
    raise RecipeError(
        f"--warm_start_config {value!r} is not a file; pass an SFT config (recipes/configs: "
        f"{', '.join(examples)}), or 'none' to train from the base model"
    )


def warm_start_key(config: Path, model_name: str) -> str:
    """A 16-hex-digit key of everything the warm-start adapter depends on.

    The SFT config's content (without output and logging keys), the model name and the path it
    resolves to (the embedded model's path carries its version), the faithgrpo version and the
    gold-trace format (:data:`faithgrpo.tasks.certificates.gold.GOLD_FORMAT`). Same key, same adapter: the cached one
    is reused.
    """
    import yaml

    import faithgrpo
    from faithgrpo.tasks.certificates.gold import GOLD_FORMAT

    try:
        loaded = yaml.safe_load(Path(config).read_text(encoding="utf-8"))
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


def warm_start_cache(script_args) -> Path:
    """``--warm_start_cache``, else ``$FAITHGRPO_CACHE/warm_start``."""
    if script_args.warm_start_cache:
        return Path(script_args.warm_start_cache).expanduser().resolve()
    from faithgrpo.models import cache_dir

    return (cache_dir() / "warm_start").resolve()


def train_warm_start(config: Path, model_name: str, target: Path, sft_script: str | os.PathLike) -> float:
    """Run ``sft_script`` (``recipes/sft_traces.py``) in a child process, then move its output to ``target``.

    A child process keeps the SFT model's memory out of the GRPO run and starts no collective
    operation in this run's process group. Returns the SFT wall time in seconds.
    """
    tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    command = [sys.executable, str(sft_script), "--config", str(config), "--model_name_or_path", model_name,
               "--output_dir", str(tmp)]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in _LAUNCHER_ENV}
    start = time.perf_counter()
    status = subprocess.run(command, env=env, check=False).returncode
    seconds = time.perf_counter() - start
    if status != 0 or not (tmp / "adapter_config.json").is_file():
        shutil.rmtree(tmp, ignore_errors=True)
        raise RecipeError(
            f"the warm-start SFT failed (exit status {status}); run it alone to see why: python "
            f"{sft_script} --config {config} --model_name_or_path {model_name}, or pass --warm_start_config none"
        )
    record = {"config": str(config), "model": model_name, "sft_seconds": round(seconds, 1)}
    (tmp / WARM_START_RECORD).write_text(json.dumps(record, indent=2) + "\n")
    try:
        tmp.rename(target)
    except OSError:  # another run finished the same key first: keep theirs
        shutil.rmtree(tmp, ignore_errors=True)
    return seconds


def _write_note(training_args, note: dict) -> None:
    """``output_dir/warm_start.json``: which adapter the run started from (the pipeline evaluates it)."""
    if training_args.process_index == 0:
        out = Path(training_args.output_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / WARM_START_RECORD).write_text(json.dumps(note, indent=2) + "\n")


def run_warm_start(
    script_args,
    training_args,
    model_args,
    *,
    sft_script: str | os.PathLike,
    search_dirs: Sequence[str | os.PathLike] = (),
    log: Callable[[str], None] = say,
) -> Path | None:
    """The warm-start adapter directory for this run: explicit, trained now, reused from the cache, or ``None``.

    ``--warm_start_adapter`` given explicitly wins; otherwise ``--warm_start_config`` is run once
    per key (:func:`warm_start_key`) by the main process while the others wait, and every process
    then reads the same cached adapter. A note of the adapter the run starts from goes to
    ``output_dir/warm_start.json``.
    """
    if script_args.warm_start_adapter:
        adapter = Path(script_args.warm_start_adapter).expanduser().resolve()
        _write_note(training_args, {"adapter": str(adapter), "explicit": True})
        return adapter
    config = warm_start_config_path(
        script_args.warm_start_config, config_search_dirs(script_args, search_dirs)
    )
    if config is None:
        return None
    model_name = model_args.model_name_or_path
    target = warm_start_cache(script_args) / f"sft-{warm_start_key(config, model_name)}"
    reused = (target / WARM_START_RECORD).is_file()
    failure = None
    with training_args.main_process_first(local=False, desc="warm-start SFT"):
        # The main process trains (or finds) the adapter first; the others then find it. A failure
        # is raised after the barrier, or the waiting processes would hang.
        if not (target / WARM_START_RECORD).is_file() and training_args.process_index == 0:
            target.parent.mkdir(parents=True, exist_ok=True)
            log(f"warm start: gold-trace SFT with {config.name} -> {target}")
            try:
                train_warm_start(config, model_name, target, sft_script)
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
        log(f"warm start: reusing {target} (SFT took {record.get('sft_seconds')} s when it was trained)")
    _write_note(training_args, {"adapter": str(target), "reused": reused, **record})
    return target


def load_warm_started_policy(
    model_path: str, adapter: str | os.PathLike, init_kwargs: dict, training_args, quantization_config=None
):
    """The policy ``model_path`` (loaded as TRL loads a model id) with ``adapter`` as its trainable adapter.

    Same dtype, device-map and quantization rules as ``GRPOTrainer`` loading a model id. Pass the
    returned ``PeftModel`` to :class:`~faithgrpo.trainers.FaithGRPOTrainer` without a ``peft_config``:
    the adapter trains, and CRoS scores with a frozen copy of its initial tensors (one adapter's size).
    """
    from peft import PeftModel
    from transformers import set_seed
    from trl.trainer.utils import create_model_from_path

    kwargs = dict(init_kwargs)
    if quantization_config is not None:
        kwargs["quantization_config"] = quantization_config
    if training_args.distributed_state.distributed_type in ("MULTI_GPU", "DEEPSPEED"):
        kwargs["device_map"] = None  # as TRL does: "auto" fails under DDP/DeepSpeed
    kwargs.setdefault("trust_remote_code", training_args.trust_remote_code)
    set_seed(training_args.seed)
    base = create_model_from_path(model_path, **kwargs)
    return PeftModel.from_pretrained(base, str(adapter), is_trainable=True)
