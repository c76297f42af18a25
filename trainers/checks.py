"""Recipe checks that read the environment, the model files and the tokenizers, and the recipe's voice
(:func:`say`, main process only): the error type every
recipe check raises (:class:`RecipeError`), the sharded backend, the single-process launch warning,
reporters, the checkpoint to resume, the model, the CRoS reference and the model's init arguments.

:func:`faithgrpo.trainers.recipe.validate` runs them before training starts.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = [
    "RecipeError",
    "check_cros_reference",
    "missing_reporters",
    "model_init_kwargs",
    "resolve_model",
    "resolve_resume",
    "say",
    "sharded_backend",
    "single_process_launch_warning",
]


def say(message: str, prefix: str = "grpo_cros") -> None:
    """Print ``[prefix] message`` on the main process only (``RANK`` 0 or unset)."""
    if int(os.environ.get("RANK", "0")) == 0:
        print(f"[{prefix}] {message}", flush=True)


class RecipeError(ValueError):
    """Bad user input, found before training starts; the message names the fix."""


# ---------------------------------------------------------------------------------------------
# environment and paths
def sharded_backend(training_args) -> str | None:
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


# Set by every launcher that does start several processes (torchrun, accelerate's multi-process
# launchers, MPI); accelerate's simple launcher sets none of them.
_WORLD_SIZE_ENV = ("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")


def _parent_num_processes() -> int | None:
    """``--num_processes N`` of the parent process's command line (the ``accelerate launch`` that
    started this one), where the platform shows it."""
    import re

    try:
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as handle:
            words = handle.read().decode(errors="replace").split("\0")
    except OSError:
        return None
    found = re.search(r"--num[_-]processes[= ](\d+)", " ".join(words))
    return int(found.group(1)) if found else None


def single_process_launch_warning(env=None, requested: int | None = None) -> str | None:
    """A warning when the launch asked for several processes and this one runs alone, else None.

    ``accelerate launch --num_processes N`` without GPUs (``--cpu``, or no GPU on the machine) runs
    accelerate's simple launcher: one plain process, with ``MASTER_ADDR``/``MASTER_PORT`` set for the N
    it was asked for but no ``WORLD_SIZE``/``RANK`` (nor an MPI world size), so training runs in one
    process. ``requested`` is N when known (default: read from the parent's command line).
    """
    env = os.environ if env is None else env
    launched = "ACCELERATE_USE_CPU" in env and "MASTER_ADDR" in env and "MASTER_PORT" in env
    if not launched or any(env.get(name) for name in _WORLD_SIZE_ENV):
        return None
    if requested is None:
        requested = _parent_num_processes()
    if requested is not None and requested < 2:
        return None
    n = str(requested) if requested else "N"
    return (
        f"warning: the launch asked for {n if requested else 'several'} processes but only 1 process "
        "started (accelerate launch --num_processes without GPUs runs one plain process unless MPI is set "
        f"up); to train with {n} processes on CPU: torchrun --nproc_per_node {n} recipes/grpo_cros.py ... "
        "(docs/development.md, 'Multi-process on CPU')"
    )


def missing_reporters(report_to) -> list[str]:
    """Logging integrations named in ``report_to`` (tensorboard, wandb, ...) that are not installed."""
    from transformers.integrations import get_available_reporting_integrations

    names = [report_to] if isinstance(report_to, str) else list(report_to or [])
    available = set(get_available_reporting_integrations())
    return [n for n in names if n not in ("none", "all") and n not in available]


def resolve_resume(training_args) -> str | None:
    """``--resume_from_checkpoint``: a checkpoint dir, or true/latest for the newest one in output_dir."""
    from transformers.trainer_utils import get_last_checkpoint

    value = training_args.resume_from_checkpoint
    if value in (None, "", False) or str(value).lower() in ("false", "no", "none"):
        return None
    if value is True or str(value).lower() in ("true", "yes", "latest", "last"):
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


def resolve_model(name: str | None, check: bool = True) -> str:
    """Resolve 'embedded' / a path / a hub id and, with ``check``, make sure its config loads."""
    from faithgrpo.models import resolve

    if not name:
        raise RecipeError("--model_name_or_path is required ('embedded', a checkpoint directory or a hub id)")
    try:
        path = resolve(name)
    except (ValueError, RuntimeError) as error:  # RuntimeError: the embedded model's package is missing
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


def _load_tokenizer(path: str, local_only: bool):
    """The tokenizer at ``path`` (a hub id only from the local cache with ``local_only``), or the error."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(path, local_files_only=local_only), None
    except Exception as error:  # any failure to load is reported, or the comparison is skipped
        return None, str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def _tokenizer_difference(policy, reference) -> str | None:
    """How two tokenizers differ (vocabulary, special tokens), or None when they encode alike."""
    if len(policy) != len(reference):
        return f"{len(reference)} tokens against the policy's {len(policy)}"
    if policy.get_vocab() != reference.get_vocab():
        return "a vocabulary of the same size with different token ids"
    for name in ("bos_token_id", "eos_token_id", "pad_token_id", "unk_token_id"):
        mine, theirs = getattr(policy, name, None), getattr(reference, name, None)
        if mine is not None and theirs is not None and mine != theirs:
            return f"{name} {theirs} against the policy's {mine}"
    return None


def check_cros_reference(reference: str, model_name: str | None) -> str:
    """Check ``--cros_reference`` before any model loads: it resolves ('embedded', a local checkpoint
    directory or a hub id), its config loads, and its tokenizer is the policy's (``model_name``).

    The tokenizers are compared when both load from this machine (local directories, or hub ids in the
    Hugging Face cache); a hub id that is not cached is left to the download at training time, once its
    config has loaded. Returns the resolved reference.

    Raises:
        RecipeError: naming ``--cros_reference`` and the fix.
    """
    from faithgrpo.models import check_loadable, resolve

    fix = (
        f"pass the policy's own checkpoint (--cros_reference {model_name or '<the policy>'}), or drop the "
        "flag so CRoS scores with the initial policy"
    )
    try:
        path = check_loadable(reference)  # a hub id: in the cache, or the hub answers within seconds
    except (ValueError, RuntimeError) as error:
        raise RecipeError(f"--cros_reference: {error}") from None
    local = Path(path).is_dir()
    if local and not (Path(path) / "config.json").is_file():
        raise RecipeError(
            f"--cros_reference {reference!r} is a directory without config.json, not a model checkpoint; {fix}"
        )
    from transformers import AutoConfig

    try:
        AutoConfig.from_pretrained(path)
    except (OSError, ValueError) as error:
        raise RecipeError(
            f"cannot load --cros_reference {reference!r}: {str(error).strip().splitlines()[0]}; pass an "
            "existing checkpoint directory, 'embedded', or a hub id this machine can download (the policy's "
            "own), or drop the flag so CRoS scores with the initial policy"
        ) from None
    if not model_name:
        return path
    try:
        policy_path = resolve(model_name)
    except (ValueError, RuntimeError):
        return path  # the model's own check reports it
    if os.path.realpath(policy_path) == os.path.realpath(path) or policy_path == path:
        return path  # the same checkpoint: the same tokenizer
    theirs, error = _load_tokenizer(path, local_only=not local)
    if theirs is None:
        if local:
            raise RecipeError(
                f"--cros_reference {reference!r} has no loadable tokenizer ({error}); CRoS loads the "
                f"reference's tokenizer from it: save the tokenizer next to the model, or {fix}"
            )
        return path  # a hub id not in the cache: nothing to compare without a download
    mine, _ = _load_tokenizer(policy_path, local_only=not Path(policy_path).is_dir())
    if mine is None:
        return path
    difference = _tokenizer_difference(mine, theirs)
    if difference:
        raise RecipeError(
            f"--cros_reference {reference!r} has another tokenizer than the policy {model_name!r} "
            f"({difference}); CRoS scores the policy's completions with it, so it needs the policy's "
            f"tokenizer: {fix}"
        )
    return path


def model_init_kwargs(model_args, training_args) -> dict:
    """``from_pretrained`` keyword arguments as TRL's GRPO script builds them (``model_init_kwargs`` win)."""
    kwargs = dict(
        revision=model_args.model_revision,
        trust_remote_code=training_args.trust_remote_code,
        attn_implementation=model_args.attn_implementation,
        dtype=model_args.dtype,
    )
    kwargs.update(training_args.model_init_kwargs or {})
    return {k: v for k, v in kwargs.items() if v is not None}
