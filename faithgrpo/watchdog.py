"""Run a command with a deadline that leaves a diagnostic instead of a silent hang.

Tests and benchmarks start subprocesses (torchrun ranks, recipe runs, the pipeline script). When one
of them hangs, the useful thing to keep is *where*: on timeout, `run_with_deadline` asks every
Python process of the command's tree for its stacks (``SIGABRT`` with ``PYTHONFAULTHANDLER=1``
prints every thread's Python stack), adds native stacks from ``gdb`` when it is installed (a
deadlock inside C++, such as a thread waiting for the GIL, shows only there), kills the tree and
returns the output with the stacks appended. The caller asserts on the return code and puts the
returned log in the assertion message.

Example:
    >>> import sys
    >>> done = run_with_deadline([sys.executable, "-c", "print('hi')"], timeout=60)
    >>> (done.returncode, done.stdout.strip(), done.timed_out)
    (0, 'hi', False)
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass

__all__ = ["Finished", "run_with_deadline"]


@dataclass
class Finished:
    """What a command left: return code (``-9`` after a timeout), output, and whether it timed out."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool
    seconds: float

    def log(self, tail: int = 6000) -> str:
        """The last ``tail`` characters of stdout and of stderr (stacks included), for assertion messages."""
        head = f"command: {' '.join(map(str, self.args))}\nreturn code {self.returncode}"
        head += f" after {self.seconds:.0f} s" + (" (TIMED OUT)" if self.timed_out else "")
        return f"{head}\n--- stdout ---\n{self.stdout[-tail:]}\n--- stderr ---\n{self.stderr[-tail:]}"


def _tree(pid: int) -> list[int]:
    """``pid`` and all its descendants (children first listed last), via psutil."""
    import psutil

    try:
        root = psutil.Process(pid)
        return [root.pid] + [p.pid for p in root.children(recursive=True)]
    except psutil.Error:
        return []


def _native_stacks(pid: int, timeout: float = 30.0) -> str:
    gdb = shutil.which("gdb")
    if gdb is None:
        return ""
    try:
        out = subprocess.run(
            [gdb, "-p", str(pid), "-batch", "-nx", "-ex", "thread apply all bt 25"],
            capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
    except (subprocess.TimeoutExpired, OSError) as error:
        return f"(gdb on {pid} failed: {error})\n"
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith(("Thread ", "#"))]
    return "\n".join(lines[:400]) + "\n"


def _is_python(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"python" in f.read().split(b"\0")[0]
    except OSError:
        return False


def run_with_deadline(
    args: list[str],
    *,
    timeout: float,
    env: dict[str, str] | None = None,
    cwd: str | os.PathLike | None = None,
    native_stacks: bool = True,
) -> Finished:
    """Run ``args`` to completion or ``timeout`` seconds; on timeout dump stacks, kill, and return.

    Args:
        args: the command.
        timeout: seconds before the command is declared hung.
        env: environment (``PYTHONFAULTHANDLER=1`` is added so Python processes print stacks on
            ``SIGABRT``).
        cwd: working directory.
        native_stacks: also attach ``gdb`` to each hung process (when installed) for C++ stacks.

    Returns:
        A `Finished`; ``timed_out`` is true and ``stderr`` ends with the stacks when it hung.
    """
    env = {**(os.environ if env is None else env), "PYTHONFAULTHANDLER": "1"}
    start = time.monotonic()
    proc = subprocess.Popen(
        args, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
        return Finished(
            list(map(str, args)), proc.returncode, stdout, stderr, False, time.monotonic() - start
        )
    except subprocess.TimeoutExpired:
        pass
    pids = _tree(proc.pid)
    notes = [f"\n=== watchdog: no exit after {timeout:.0f} s; stacks of {len(pids)} processes ===\n"]
    if native_stacks:
        for pid in pids:
            if _is_python(pid):
                notes.append(f"--- native stacks of {pid} ---\n{_native_stacks(pid)}")
    for pid in reversed(pids):  # the workers first: their Python stacks go to the shared stderr
        if _is_python(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGABRT)
    time.sleep(2.0)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    stdout, stderr = proc.communicate()
    return Finished(list(map(str, args)), -9, stdout, stderr + "".join(notes), True, time.monotonic() - start)
