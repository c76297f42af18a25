"""Completion caches: one JSONL record per prompt, keyed by content so stale completions are refused.

`write_completions` / `read_completions` store and validate ``{"id", "prompt", "completions",
"num_tokens", "settings"}`` records; `cached_generate` reuses a cache only when the prompts (ids and
texts), the sampling settings, the backend and the checkpoint fingerprint
(`checkpoint_fingerprint`: the weight, adapter and tokenizer files) all match, and otherwise refuses
with an error naming ``--overwrite``. Re-exported by `faithgrpo.eval.generation`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # generation imports this module; the type is only for annotations
    from faithgrpo.eval.generation import SamplingSettings

__all__ = [
    "CacheError",
    "CompletionRecord",
    "cached_generate",
    "checkpoint_fingerprint",
    "read_completions",
    "write_completions",
]


class CacheError(ValueError):
    """A completions cache file is empty, truncated or inconsistent."""


@dataclass
class CompletionRecord:
    """The G completions of one prompt, as cached.

    Attributes:
        id: the prompt's identifier (unique within a cache file).
        prompt: the prompt as given (a string or chat messages).
        completions: the G completion texts.
        num_tokens: generated tokens per completion (end-of-sequence included when reached).
        settings: sampling settings plus ``model``, ``adapter`` and ``backend``.
    """

    id: str
    prompt: Any
    completions: list[str]
    num_tokens: list[int] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)


_FINGERPRINT_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf", ".json", ".model", ".jinja", ".txt")
_EDGE_BYTES = 1 << 20


def _directory_fingerprint(directory: Path) -> list:
    """(name, size, mtime, hash of the first and last MiB) of every weight/config/tokenizer file."""
    entries = []
    for path in sorted(directory.iterdir()):
        if not path.is_file() or path.suffix not in _FINGERPRINT_SUFFIXES:
            continue
        stat = path.stat()
        digest = hashlib.sha256()
        with open(path, "rb") as fh:
            digest.update(fh.read(_EDGE_BYTES))
            if stat.st_size > 2 * _EDGE_BYTES:
                fh.seek(-_EDGE_BYTES, os.SEEK_END)
                digest.update(fh.read(_EDGE_BYTES))
        entries.append([path.name, stat.st_size, stat.st_mtime_ns, digest.hexdigest()])
    return entries


def checkpoint_fingerprint(model: str | os.PathLike, adapter: str | os.PathLike | None = None) -> str:
    """A short hash that changes when the weights (or adapter, or tokenizer files) behind a checkpoint change.

    Local directories (and hub ids found in the local Hugging Face cache, by snapshot) are
    fingerprinted by every weight, config and tokenizer file's name, size, modification time and
    the hash of its first and last MiB, so weights overwritten at the same path give a new
    fingerprint without reading gigabytes. A hub id that is not cached is keyed by its name only.
    Completion caches store it, so metrics are never computed on completions of other weights.

    Example:
        >>> checkpoint_fingerprint("org/not-cached") == checkpoint_fingerprint("org/not-cached")
        True
    """
    from faithgrpo.models import resolve

    parts: list = []
    for role, reference in (("model", model), ("adapter", adapter)):
        if reference is None:
            continue
        resolved = resolve(reference) if role == "model" else os.path.expanduser(os.fspath(reference))
        directory = Path(resolved) if os.path.isdir(resolved) else None
        if directory is None:
            with contextlib.suppress(Exception):
                from huggingface_hub import snapshot_download

                directory = Path(snapshot_download(resolved, local_files_only=True))
        parts.append([role, str(resolved), _directory_fingerprint(directory) if directory else None])
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


def write_completions(path: str | os.PathLike, records: Sequence[CompletionRecord]) -> Path:
    """Write records to a JSONL cache, atomically (a temporary file renamed into place).

    Args:
        path: the ``.jsonl`` file to write (parent folders are created).
        records: the records, one line each.

    Returns:
        `Path` of the written file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            for record in records:
                handle.write(json.dumps(asdict(record), ensure_ascii=False) + "\n")
        # mkstemp creates 0600 files; a cache is an ordinary, shareable output file.
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return path


def cached_generate(
    path: str | os.PathLike,
    load,
    prompts: Sequence[Any],
    ids: Sequence[str],
    settings: SamplingSettings,
    metadata: dict[str, Any],
    *,
    overwrite: bool = False,
    progress: bool = True,
    check_prompts: bool = True,
    backend: str = "transformers",
    engine: str = "auto",
) -> tuple[list[CompletionRecord], dict[str, Any]]:
    """Reuse the cache at ``path`` when it holds exactly these prompts with these settings; generate otherwise.

    Args:
        path: the JSONL cache file.
        load: a zero-argument callable returning ``(model, tokenizer)``; only called when generating,
            so a fully cached run never loads the model.
        prompts, ids: the prompts and their unique ids, in order.
        settings: sampling settings; with ``metadata`` they must match the cache's.
        metadata: extra settings recorded in (and checked against) the cache, e.g. model and adapter.
        overwrite: regenerate even when a matching cache exists.
        progress: show a progress bar while generating.
        check_prompts: also require the cached prompt texts to equal ``prompts`` (default; an edited
            prompt keeps its id, so ids alone would reuse stale completions).
        backend: the generation backend (``"transformers"`` or ``"vllm"``); part of the cache key.
        engine: the transformers backend's engine (``"auto"``, ``"decode"`` or ``"generate"``, see
            `generate_completions`); recorded in the settings but not part of the cache key (both
            sample the same distribution).

    Returns:
        ``(records, stats)``: the records in ``ids`` order, and ``{"cached": bool, "completions",
        "new_tokens", ...}`` (throughput fields when generated).

    Raises:
        CacheError: the cache holds other prompts or was made with other settings; the message names the fix.
    """
    path = Path(path)
    if path.exists() and not overwrite:
        expected = {**asdict(settings), **metadata, "backend": backend}
        records = read_completions(path, expected_settings=expected)
        stale = [r.id for r in records] != [str(i) for i in ids]
        if not stale and check_prompts:
            stale = [r.prompt for r in records] != json.loads(json.dumps(list(prompts)))
        if stale:
            raise CacheError(
                f"completions cache {str(path)!r} holds other prompts than this run asks for: pass --overwrite "
                "or a fresh --out directory"
            )
        tokens = sum(sum(r.num_tokens) for r in records)
        return records, {
            "cached": True,
            "completions": sum(len(r.completions) for r in records),
            "new_tokens": tokens,
        }
    from faithgrpo.eval import generation  # late: generation re-exports this module's names

    model, tokenizer = load()
    # Only a chosen engine is passed on: stand-ins for generate_completions need not know the keyword.
    chosen = {} if engine == "auto" else {"engine": engine}
    records, stats = generation.generate_completions(
        model,
        tokenizer,
        prompts,
        settings,
        ids=ids,
        metadata=metadata,
        progress=progress,
        backend=backend,
        **chosen,
    )
    write_completions(path, records)
    return records, {"cached": False, **stats.to_dict()}


_REQUIRED = {"id": str, "completions": list, "settings": dict}


def read_completions(
    path: str | os.PathLike, *, expected_settings: dict[str, Any] | None = None
) -> list[CompletionRecord]:
    """Read and validate a JSONL completions cache.

    Checks every line parses, has ``id`` / ``prompt`` / ``completions`` / ``settings``, that
    completions are strings and there are ``settings["num_samples"]`` of them, ids are unique, all
    records share one sampling setting, and (when given) that the settings match
    ``expected_settings``.

    Args:
        path: the cache file.
        expected_settings: fields the cache must have been generated with (e.g. ``num_samples``,
            ``model``); a mismatch is an error rather than a silently reused stale cache.

    Returns:
        `list[CompletionRecord]` in file order.

    Raises:
        CacheError: missing, empty, truncated or inconsistent file; the message names the line and the fix.
    """
    path = Path(path)
    regenerate = f"delete {str(path)!r} and generate the completions again"
    if not path.is_file():
        raise CacheError(f"completions cache {str(path)!r} does not exist; generate it first")
    raw = path.read_text(encoding="utf-8", errors="replace")
    if not raw.strip():
        raise CacheError(f"completions cache {str(path)!r} is empty: {regenerate}")
    lines = raw.split("\n")
    if lines[-1] != "":
        # Every record ends with a newline; a missing one means the writer was cut off mid-record.
        raise CacheError(
            f"completions cache {str(path)!r} is truncated (line {len(lines)} has no end): {regenerate}"
        )
    records: list[CompletionRecord] = []
    seen: set[str] = set()
    reference: dict[str, Any] | None = None
    for number, line in enumerate(lines[:-1], start=1):
        if not line.strip():
            continue
        where = f"{str(path)!r} line {number}"
        try:
            data = json.loads(line)
        except json.JSONDecodeError as err:
            raise CacheError(
                f"{where} is not valid JSON ({err.msg}): the file is corrupt; {regenerate}"
            ) from None
        if not isinstance(data, dict):
            raise CacheError(f"{where} is not a JSON object: {regenerate}")
        for key, kind in _REQUIRED.items():
            if not isinstance(data.get(key), kind):
                raise CacheError(
                    f"{where} lacks a valid {key!r} field: not a faithgrpo completions cache; {regenerate}"
                )
        if "prompt" not in data:
            raise CacheError(f"{where} lacks the 'prompt' field: {regenerate}")
        completions = data["completions"]
        if not all(isinstance(c, str) for c in completions):
            raise CacheError(f"{where}: completions must be strings; {regenerate}")
        settings = data["settings"]
        expected_g = settings.get("num_samples")
        if isinstance(expected_g, int) and len(completions) != expected_g:
            raise CacheError(
                f"{where} has {len(completions)} completions but num_samples={expected_g}: {regenerate}"
            )
        if data["id"] in seen:
            raise CacheError(f"{where} repeats prompt id {data['id']!r}: {regenerate}")
        seen.add(data["id"])
        if reference is None:
            reference = settings
        elif settings != reference:
            raise CacheError(f"{where} was generated with other settings than line 1: {regenerate}")
        num_tokens = data.get("num_tokens") or []
        if not isinstance(num_tokens, list) or (num_tokens and len(num_tokens) != len(completions)):
            raise CacheError(f"{where}: num_tokens must list one count per completion; {regenerate}")
        records.append(CompletionRecord(data["id"], data["prompt"], completions, num_tokens, settings))
    if expected_settings and reference is not None:
        diffs = {k: (reference.get(k), v) for k, v in expected_settings.items() if reference.get(k) != v}
        if diffs:
            described = ", ".join(f"{k}={have!r} (wanted {want!r})" for k, (have, want) in diffs.items())
            raise CacheError(
                f"completions cache {str(path)!r} was generated with {described}: pass --overwrite to "
                "regenerate it, or use a fresh output directory or matching settings"
            )
    return records
