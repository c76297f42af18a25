"""Leaving a ``torch.distributed`` process group without the gloo exit deadlock (DESIGN §7).

Why this exists: a gloo collective's work object lives on in gloo's run-loop thread for a moment
after ``wait()`` has returned (the thread does its bookkeeping, then drops the object). If that
object holds tensors that Python has seen, dropping it needs the GIL. ``destroy_process_group()``
runs the gloo destructor, which joins the run-loop threads *while holding the GIL*; if a run-loop
thread is still about to drop such a work object, the two wait on each other forever (seen as a rank
at 0 % CPU at exit, more often on a loaded machine).

`shutdown_process_group` removes the cause instead of skipping the teardown with ``os._exit``:

1. drop Python references that keep collectives' tensors and the DDP reducer alive (``gc.collect``);
2. synchronise the ranks (``barrier``), so no rank destroys while another still sends to it;
3. *settle*: release the GIL until every gloo run-loop thread of this process is idle (blocked, and
   not woken for a while), so none of them still owns a work object that needs the GIL;
4. destroy the group.

Step 3 reads ``/proc/self/task`` (Linux). Elsewhere it falls back to a fixed GIL-free pause.
"""

from __future__ import annotations

import gc
import time
from pathlib import Path

__all__ = ["gloo_runloop_threads", "settle_gloo_threads", "shutdown_process_group"]

_RUNLOOP_NAME = "pt_gloo_runloop"


def gloo_runloop_threads() -> list[int] | None:
    """Thread ids of this process's gloo run-loop threads, or ``None`` where ``/proc`` is missing."""
    tasks = Path("/proc/self/task")
    if not tasks.is_dir():
        return None
    found = []
    for task in tasks.iterdir():
        try:
            if (task / "comm").read_text().strip().startswith(_RUNLOOP_NAME):
                found.append(int(task.name))
        except OSError:  # the thread ended between listing and reading
            continue
    return found


def _thread_activity(tid: int) -> tuple[str, int] | None:
    """(scheduler state, total context switches) of one thread; ``None`` once it has ended."""
    task = Path("/proc/self/task") / str(tid)
    try:
        stat = (task / "stat").read_text()
        status = (task / "status").read_text()
    except OSError:
        return None
    state = stat[stat.rindex(")") + 2]  # the comm field may contain spaces; the state follows ")"
    # voluntary_ctxt_switches + nonvoluntary_ctxt_switches
    switches = sum(int(line.split(":")[1]) for line in status.splitlines() if "ctxt_switches:" in line)
    return state, switches


def settle_gloo_threads(quiet_s: float = 0.05, limit_s: float = 30.0, poll_s: float = 0.01) -> bool:
    """Release the GIL until every gloo run-loop thread has stayed idle for ``quiet_s`` seconds.

    A thread counts as idle when it is blocked (state ``S``) and its context-switch count does not
    move: an idle run-loop thread sleeps on its work queue's condition variable, while one waiting
    for the GIL wakes every few milliseconds (CPython's GIL wait is a timed wait) and one still
    running is in state ``R``. ``time.sleep`` releases the GIL, so a thread that needs it gets it.

    Returns ``True`` when the threads settled (or there are none), ``False`` when ``limit_s``
    passed first (the caller goes on; the threads were busy, not necessarily stuck).
    """
    tids = gloo_runloop_threads()
    if tids is None:  # no /proc: a fixed GIL-free pause is the best available
        time.sleep(max(quiet_s * 4, 0.2))
        return True
    deadline = time.monotonic() + limit_s
    last: dict[int, tuple[str, int] | None] = {}
    quiet_since = time.monotonic()
    while True:
        now_seen = {tid: _thread_activity(tid) for tid in tids}
        busy = any(a is not None and a[0] != "S" for a in now_seen.values())
        if busy or now_seen != last:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= quiet_s:
            return True
        last = now_seen
        if time.monotonic() > deadline:
            return False
        time.sleep(poll_s)


def shutdown_process_group(*, barrier: bool = True) -> bool:
    """Synchronise the ranks, let gloo's threads settle, and destroy the default process group.

    Call it once at the end of a multi-process run, after the trainer (and with it the DDP model)
    has been released. Safe to call when no group exists. Returns whether a group was destroyed.
    """
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return False
    gc.collect()  # dead work handles and gathered tensors from reward functions and metrics
    if barrier:
        dist.barrier()
    settle_gloo_threads()  # also under NCCL: accelerate and TRL may hold gloo subgroups
    dist.destroy_process_group()
    return True
