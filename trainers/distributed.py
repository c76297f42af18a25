"""Leaving ``torch.distributed`` without the gloo exit deadlock (docs/development.md, "Multi-process on CPU").

The deadlock, as seen with gdb on a loaded CI machine: gloo's run-loop thread drops a finished
collective's work object, whose tensors Python has seen, so it needs the GIL; meanwhile the main
thread runs ``~ProcessGroupGloo``, which joins that thread *while holding the GIL*. Python's own
``ProcessGroup`` objects release the GIL before their C++ destructor runs (pybind
``release_gil_before_calling_cpp_dtor``), so destroying a group through them is safe. The DDP
``Reducer`` is not: it holds a C++ reference to the group and frees it with the GIL held. And
``Trainer.end()`` (accelerate's ``end_training``) destroys the group while the DDP model is still
alive, so the reducer ends up holding the *last* reference and the destructor runs when the trainer
is freed: a race that hangs a rank at 0 % CPU now and then.

The rule `distributed_teardown` enforces: **the last reference to a process group is a Python
one**. It keeps Python references to every group for the duration of the block (the run ends, the
trainer is freed), frees DDP reducers that are still alive while those references hold the groups,
destroys the default group if nothing did, and only then lets go of the groups, whose destructors
run with the GIL released. It also synchronises the ranks first (one ``barrier``), so no rank
tears down while another still sends to it. No ``os._exit``: the interpreter exits normally, atexit
handlers (trackers, flushed files) included.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["distributed_teardown", "live_process_groups", "shutdown_process_group"]


def live_process_groups() -> list:
    """Python references to every process group torch.distributed knows about (default group first)."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return []
    from torch.distributed.distributed_c10d import _world

    world = dist.group.WORLD
    return [world] + [pg for pg in list(_world.pg_map) if pg is not world]


def _free_ddp_reducers() -> int:
    """Free the C++ reducer (and its logger) of every DDP module still alive; returns how many.

    Called while Python references hold the process groups, so a reducer's reference is never the
    last one. The module stays usable as a plain module around ``.module``.
    """
    from torch.nn.parallel import DistributedDataParallel

    freed = 0
    for obj in gc.get_objects():
        if isinstance(obj, DistributedDataParallel) and getattr(obj, "reducer", None) is not None:
            obj.reducer = None
            if getattr(obj, "logger", None) is not None:
                obj.logger = None
            freed += 1
    if freed:
        gc.collect()
    return freed


@contextlib.contextmanager
def distributed_teardown(*, barrier: bool = True) -> Iterator[None]:
    """End a (possibly) multi-process run without the gloo exit deadlock (module docstring).

    Inside the block, end the run and release what holds the model (``trainer.end()``,
    ``del trainer``); the block may destroy the process group itself (``Trainer.end()`` does).

    Args:
        barrier: synchronise the ranks before the block (skip it when a rank may have failed: the
            others would wait for it).

    Example:
        >>> with distributed_teardown():  # single process: nothing to do
        ...     pass
    """
    import torch.distributed as dist

    groups = live_process_groups()
    if groups and barrier:
        dist.barrier()
    try:
        yield
    finally:
        if groups:
            gc.collect()
            _free_ddp_reducers()
            if dist.is_initialized():
                dist.destroy_process_group()
            groups.clear()  # the last references: the destructors run with the GIL released
            gc.collect()


def shutdown_process_group(*, barrier: bool = True) -> bool:
    """Synchronise the ranks and destroy the default group safely; returns whether there was one.

    For scripts without a trainer (e.g. a bare ``PartialState``); with a trainer, use
    `distributed_teardown` around ``trainer.end()``.
    """
    import torch.distributed as dist

    had = dist.is_available() and dist.is_initialized()
    with distributed_teardown(barrier=barrier):
        pass
    return had
