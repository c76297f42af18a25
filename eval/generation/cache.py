"""Completion caches: one JSONL record per prompt, keyed by content so stale completions are refused.

`write_completions` / `read_completions` store and validate ``{"id", "prompt", "completions",
"num_tokens", "settings"}`` records; `faithgrpo.eval.generation.backends.cached_generate` reuses a
cache only when the prompts (ids and texts), the sampling settings (thread count included), the
backend and the weights (`weights_fingerprint`: the SHA-256 of every weight, adapter and tokenizer
file, read in full) all match, and otherwise refuses with an error that names what changed and
``--overwrite``.
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
from typing import Any

__all__ = [
    "CacheError",
    "CompletionRecord",
    "checkpoint_fingerprint",
    "describe_weights_change",
    "file_sha256",
    "read_completions",
    "weights_fingerprint",
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
_BLOCK_BYTES = 1 << 20


def file_sha256(path: str | os.PathLike) -> str:
    """SHA-256 of the whole file, streamed in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(_BLOCK_BYTES), b""):
            digest.update(block)
    return digest.hexdigest()


def _directory_files(directory: Path, memo: dict[str, str] | None) -> dict[str, str]:
    """File name -> SHA-256 of every weight, config and tokenizer file of a checkpoint directory.

    ``memo`` is a run's table of digests by absolute path: a file is read once per run however many
    checkpoints (policy, baseline, judge) share it. It is never kept across runs, so a file changed
    in place with its size and modification time restored is read again by the next run.
    """
    memo = {} if memo is None else memo
    files = {}
    for path in sorted(directory.iterdir()):
        if path.is_file() and path.suffix in _FINGERPRINT_SUFFIXES:
            key = os.path.abspath(path)
            if key not in memo:
                memo[key] = file_sha256(path)
            files[path.name] = memo[key]
    return files


def weights_fingerprint(
    model: str | os.PathLike,
    adapter: str | os.PathLike | None = None,
    *,
    memo: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The content of the weights behind a checkpoint: per role, its source and every file's SHA-256.

    Local directories (and hub ids found in the local Hugging Face cache, by snapshot) are read in
    full: every weight, config and tokenizer file is hashed (`file_sha256`), so a change anywhere in
    a file gives another fingerprint even when its size and modification time were kept (``cp -p``,
    ``rsync -t``, a restore). A hub id that is not cached is keyed by its name only (``files`` is
    ``None``). Completion and judge caches store this under ``"weights"``, and a cache whose weights
    differ is refused with the files that changed (`describe_weights_change`).

    Args:
        model: ``"embedded"``, a local checkpoint directory or a hub id.
        adapter: an optional LoRA adapter directory.
        memo: the run's digests by absolute path, filled as files are read: pass one table to every
            fingerprint of a run and each file is read once (never reuse a table across runs).

    Returns:
        ``{"model": {"source": path or id, "files": {name: sha256} or None}, "adapter": {...}}``
        (no ``"adapter"`` without one).
    """
    from faithgrpo.models import resolve

    out: dict[str, Any] = {}
    for role, reference in (("model", model), ("adapter", adapter)):
        if reference is None:
            continue
        resolved = resolve(reference) if role == "model" else os.path.expanduser(os.fspath(reference))
        directory = Path(resolved) if os.path.isdir(resolved) else None
        if directory is None:
            with contextlib.suppress(Exception):
                from huggingface_hub import snapshot_download

                directory = Path(snapshot_download(resolved, local_files_only=True))
        out[role] = {
            "source": str(resolved),
            "files": _directory_files(directory, memo) if directory is not None else None,
        }
    return out


def checkpoint_fingerprint(
    model: str | os.PathLike,
    adapter: str | os.PathLike | None = None,
    *,
    memo: dict[str, str] | None = None,
) -> str:
    """A short hash of `weights_fingerprint`: it changes when any byte of a weight, adapter or tokenizer file does.

    Example:
        >>> checkpoint_fingerprint("org/not-cached") == checkpoint_fingerprint("org/not-cached")
        True
    """
    text = json.dumps(weights_fingerprint(model, adapter, memo=memo), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def describe_weights_change(have: Any, want: Any) -> str:
    """What differs between two `weights_fingerprint` values, in words (files named), for error messages.

    Example:
        >>> old = {"model": {"source": "/m", "files": {"model.safetensors": "aa" * 32, "config.json": "bb" * 32}}}
        >>> new = {"model": {"source": "/m", "files": {"model.safetensors": "cc" * 32, "config.json": "bb" * 32}}}
        >>> describe_weights_change(old, new)
        'model /m: model.safetensors has other content (sha256 aaaaaaaaaaaa... then, cccccccccccc... now)'
    """
    if not isinstance(have, dict) or not all(isinstance(v, dict) for v in have.values()):
        return (
            f"a weights fingerprint of an older faithgrpo ({have!r}; it hashed only the first and last MiB of "
            "each file), so the weights cannot be compared"
        )
    changes = []
    for role in sorted(set(have) | set(want), key=("model", "adapter").index):
        then, now = have.get(role), want.get(role)
        if then is None:
            changes.append(f"{role} {now['source']} added")
            continue
        if now is None:
            changes.append(f"{role} {then['source']} removed")
            continue
        where = f"{role} {now['source']}"
        if then.get("source") != now.get("source"):
            changes.append(f"{role} was {then.get('source')}, now {now.get('source')}")
        old_files, new_files = then.get("files"), now.get("files")
        if old_files == new_files:
            continue
        if old_files is None or new_files is None:
            changes.append(f"{where}: {'now' if old_files is None else 'no longer'} found locally")
            continue
        for name in sorted(set(old_files) | set(new_files)):
            a, b = old_files.get(name), new_files.get(name)
            if a == b:
                continue
            if a is None:
                changes.append(f"{where}: {name} is new")
            elif b is None:
                changes.append(f"{where}: {name} is gone")
            else:
                changes.append(
                    f"{where}: {name} has other content (sha256 {a[:12]}... then, {b[:12]}... now)"
                )
    return "; ".join(changes) or "the fingerprints differ"


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
            described = ", ".join(
                _describe_setting(k, have, want, k in reference) for k, (have, want) in diffs.items()
            )
            raise CacheError(
                f"completions cache {str(path)!r} was generated with {described}: pass --overwrite to "
                "regenerate it, or use a fresh output directory or matching settings"
            )
    return records


def _describe_setting(key: str, have: Any, want: Any, recorded: bool) -> str:
    """One differing cache-key field, in words: ``seed=0 (wanted 1)``, or the weight files that changed."""
    if key == "weights" and isinstance(want, dict):
        return f"other weights ({describe_weights_change(have, want)})"
    if not recorded:
        return f"no {key} recorded (an older faithgrpo; wanted {want!r})"
    return f"{key}={have!r} (wanted {want!r})"
