"""Load a checkpoint for evaluation: a base model plus an optional LoRA adapter, checked to fit.

A checkpoint is a base model (``"embedded"``, a local directory or a hub id, resolved through
`faithgrpo.models.resolve`) plus an optional LoRA adapter directory, the thing the GRPO recipe
saves. `check_checkpoint` fails fast, before any weights load; `load_checkpoint` refuses an adapter
trained on another base model (architecture, shapes or module layout) with the base to pass instead.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["AdapterMismatchError", "check_checkpoint", "load_checkpoint"]


class AdapterMismatchError(ValueError):
    """A LoRA adapter does not fit the base model it is being loaded onto."""


def load_checkpoint(
    model: str | os.PathLike,
    adapter: str | os.PathLike | None = None,
    *,
    dtype: Any = "auto",
    device: str | None = None,
    merge: bool = True,
):
    """Load a base model (and optionally a LoRA adapter) with its tokenizer, ready for generation.

    Args:
        model: ``"embedded"``, a local checkpoint directory or a hub id.
        adapter: a LoRA adapter directory (``adapter_config.json`` + weights), or ``None``.
        dtype: torch dtype for the weights (``"auto"`` keeps the checkpoint's).
        device: where to put the model (``None``: CUDA when available, else CPU).
        merge: merge the adapter into the base weights (faster generation).

    Returns:
        ``(model, tokenizer)``; the model in eval mode. The tokenizer comes from the adapter
        directory when it holds one (the recipe saves the tokenizer next to the adapter).

    Raises:
        AdapterMismatchError: the adapter was trained on a different base model (architecture,
            shapes or layers differ); the message names the base model to pass instead.
        ValueError: the adapter directory is missing or is not a LoRA adapter.

    Example:
        >>> model, tokenizer = load_checkpoint("embedded", adapter="runs/grpo_cros/final")  # doctest: +SKIP
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from faithgrpo.models import resolve

    path = resolve(model)
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    base = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    tokenizer_source = path
    if adapter is not None:
        adapter_dir = _check_adapter_dir(adapter)
        base = _attach_adapter(base, adapter_dir, path, merge=merge)
        if (adapter_dir / "tokenizer_config.json").is_file():
            tokenizer_source = str(adapter_dir)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_source)
    return base.to(device).eval(), tokenizer


def check_checkpoint(model: str | os.PathLike, adapter: str | os.PathLike | None = None) -> None:
    """Fail fast, before loading, when ``model`` cannot be loaded here or ``adapter`` is not a LoRA directory.

    Raises:
        ValueError: the model reference (see `faithgrpo.models.check_loadable`) or the adapter.
        EmbeddedModelMissing: ``"embedded"`` without its package.
    """
    from faithgrpo.models import check_loadable

    check_loadable(model)
    if adapter is not None:
        _check_adapter_dir(adapter)


def _check_adapter_dir(adapter: str | os.PathLike) -> Path:
    adapter_dir = Path(adapter).expanduser()
    if not adapter_dir.is_dir():
        raise ValueError(
            f"adapter directory {str(adapter_dir)!r} does not exist; pass the folder the recipe saved"
        )
    if not (adapter_dir / "adapter_config.json").is_file():
        raise ValueError(
            f"{str(adapter_dir)!r} has no adapter_config.json, so it is not a PEFT adapter: pass the LoRA "
            "output folder, or pass a full checkpoint with --model instead of --adapter"
        )
    return adapter_dir


def _adapter_weight_shapes(adapter_dir: Path) -> dict[str, tuple[int, ...]]:
    safetensors_file = adapter_dir / "adapter_model.safetensors"
    if safetensors_file.is_file():
        from safetensors import safe_open

        with safe_open(str(safetensors_file), framework="pt") as handle:
            return {key: tuple(handle.get_slice(key).get_shape()) for key in handle.keys()}  # noqa: SIM118
    bin_file = adapter_dir / "adapter_model.bin"
    if bin_file.is_file():
        import torch

        state = torch.load(bin_file, map_location="cpu", weights_only=True)
        return {key: tuple(value.shape) for key, value in state.items()}
    raise ValueError(f"{str(adapter_dir)!r} holds no adapter_model.safetensors or adapter_model.bin")


def _base_config_of_adapter(config) -> Any | None:
    """The config of the model the adapter was trained on, when it can be read offline."""
    reference = getattr(config, "base_model_name_or_path", None)
    if not reference:
        return None
    try:
        from transformers import AutoConfig

        return AutoConfig.from_pretrained(reference, local_files_only=True)
    except Exception:  # a hub id not in the local cache: nothing to compare against
        return None


def _attach_adapter(base, adapter_dir: Path, base_path: str, *, merge: bool):
    from peft import PeftConfig, PeftModel

    config = PeftConfig.from_pretrained(str(adapter_dir))
    trained_on = getattr(config, "base_model_name_or_path", None) or "an unrecorded base model"
    fix = f"pass the base model the adapter was trained on (--model {trained_on})"
    expected = _base_config_of_adapter(config)
    if expected is not None:
        for key in ("model_type", "hidden_size", "num_hidden_layers", "vocab_size"):
            mine, theirs = getattr(base.config, key, None), getattr(expected, key, None)
            if mine != theirs:
                raise AdapterMismatchError(
                    f"adapter {str(adapter_dir)!r} was trained on {trained_on} ({key}={theirs}), but the base "
                    f"model {base_path!r} has {key}={mine}: {fix}"
                )
    shapes = _adapter_weight_shapes(adapter_dir)
    try:
        peft_model = PeftModel.from_pretrained(base, str(adapter_dir))
    except (RuntimeError, ValueError, KeyError) as err:
        first = str(err).strip().splitlines()
        detail = next(
            (line.strip() for line in first if "mismatch" in line or "not found" in line),
            first[0] if first else "",
        )
        raise AdapterMismatchError(
            f"adapter {str(adapter_dir)!r} does not fit base model {base_path!r} ({detail}): {fix}"
        ) from err
    # peft only warns about missing or unused adapter weights; a different depth or module layout
    # would then run silently with half an adapter. Compare the weight sets exactly.
    adapter_name = "default"
    loaded = {
        name.replace(f".{adapter_name}.", "."): tuple(param.shape)
        for name, param in peft_model.named_parameters()
        if "lora_" in name
    }
    missing = sorted(set(loaded) - set(shapes))
    unused = sorted(set(shapes) - set(loaded))
    wrong = sorted(k for k in set(loaded) & set(shapes) if loaded[k] != shapes[k])
    if missing or unused or wrong:
        parts = []
        if missing:
            parts.append(
                f"{len(missing)} LoRA weight(s) the base model needs are not in the adapter (e.g. {missing[0]})"
            )
        if unused:
            parts.append(
                f"{len(unused)} adapter weight(s) match no module of the base model (e.g. {unused[0]})"
            )
        if wrong:
            parts.append(f"{len(wrong)} weight(s) have other shapes (e.g. {wrong[0]})")
        raise AdapterMismatchError(
            f"adapter {str(adapter_dir)!r} does not match base model {base_path!r}: {'; '.join(parts)}. {fix[0].upper()}{fix[1:]}"
        )
    return peft_model.merge_and_unload() if merge else peft_model
