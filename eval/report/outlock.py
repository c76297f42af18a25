"""A run owns its output folder: ``OUT/.faithgrpo.lock``, held for the whole run.

Two evaluations writing one ``--out`` would overwrite each other's caches and reports, and the
last writer would win silently. `own_out_dir` holds an OS-level lock (`filelock.FileLock`:
``flock`` on Linux and macOS) on ``OUT/.faithgrpo.lock`` while a run computes and writes, so a
second run on the same folder stops at once with `OutDirBusy`, naming the run that holds it.

The operating system releases the lock when its process dies, however it dies (``SIGKILL``
included), so a killed run never leaves a lock that blocks the next one. What a killed run does
leave is its owner record, ``OUT/.faithgrpo.owner.json`` (pid, host, start time, command), which a
finished run removes: the next run finds it, says the earlier run was interrupted (its caches
may be incomplete: each file is written atomically, so a half-written one is never read), and
takes over.

The lock is re-entrant within a process (one `filelock.FileLock` per folder, shared), so
`faithgrpo.eval.report.pipeline.run_eval` and `write_report` take it themselves and also run inside the
CLI's hold. A folder the run created and left holding nothing but the lock is removed again,
so a run that fails early leaves no empty ``--out`` behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["LOCK_NAME", "OWNER_NAME", "OutDirBusy", "own_out_dir"]

LOCK_NAME = ".faithgrpo.lock"
OWNER_NAME = ".faithgrpo.owner.json"


class OutDirBusy(ValueError):
    """Another run holds the output folder."""


def _lock(path: Path):
    from filelock import FileLock

    # One instance per lock file in this process (re-entrant: a nested hold only counts up). Not
    # thread-local: a run may hand work to threads, and a hold belongs to the process.
    return FileLock(str(path), timeout=0, is_singleton=True, thread_local=False)


def _read_owner(path: Path) -> dict[str, Any] | None:
    try:
        owner = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return owner if isinstance(owner, dict) else None


def _describe(owner: dict[str, Any] | None) -> str:
    if not owner:
        return ""
    started = owner.get("started")
    when = (
        time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started))
        if isinstance(started, (int, float))
        else "?"
    )
    return f" (pid {owner.get('pid')} on {owner.get('host')}, started {when})"


def _write_owner(path: Path) -> None:
    record = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time(), "argv": sys.argv}
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(record, handle)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


@contextlib.contextmanager
def own_out_dir(out_dir: str | os.PathLike, option: str = "--out") -> Iterator[dict[str, Any] | None]:
    """Hold ``out_dir``'s lock while the block runs (creating the folder if needed).

    Args:
        out_dir: the run's output folder.
        option: the flag that named it, for messages.

    Yields:
        The owner record of an earlier run on this folder that did not finish (killed: its lock
        died with it), or ``None``. Only the outermost hold in a process reports it.

    Raises:
        OutDirBusy: another process holds the folder; the message names it and the fix.
    """
    from filelock import Timeout

    out = Path(out_dir)
    created = [p for p in (out, *out.parents) if not p.exists()]
    out.mkdir(parents=True, exist_ok=True)
    lock = _lock(out / LOCK_NAME)
    owner_path = out / OWNER_NAME
    try:
        lock.acquire()
    except Timeout:
        raise OutDirBusy(
            f"{option} {str(out)!r} is in use by another faithgrpo run{_describe(_read_owner(owner_path))}: "
            f"wait for it to finish or pass another {option}"
        ) from None
    outermost = lock.lock_counter == 1
    stale = _read_owner(owner_path) if outermost else None
    failed = False
    try:
        if outermost:
            _write_owner(owner_path)
        yield stale
    except BaseException:
        failed = True
        raise
    finally:
        try:
            if outermost:
                with contextlib.suppress(FileNotFoundError):
                    owner_path.unlink()
                if failed and created and {p.name for p in out.iterdir()} <= {LOCK_NAME}:
                    # This run made the folder and leaves nothing in it: no empty --out behind.
                    # (A waiting process re-checks the lock file's inode after it gets the lock.)
                    with contextlib.suppress(FileNotFoundError):
                        (out / LOCK_NAME).unlink()
        finally:
            lock.release()
        if outermost and failed and created:
            for folder in created:  # deepest first; only the empty ones this run made
                with contextlib.suppress(OSError):
                    folder.rmdir()
