"""CPU-time bounds for tests that hostile input must not blow up.

`cpu_clock` measures this thread's CPU seconds (other jobs on a loaded machine do not count) with
the cyclic garbage collector paused: a collection of the whole suite's heap, which can start inside
any allocation, once charged 0.76 s to a 1 ms parse. The collector runs again after the block.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager


class CpuClock:
    """The block's CPU seconds, in ``elapsed`` once it has ended."""

    elapsed: float = float("nan")


@contextmanager
def cpu_clock() -> Iterator[CpuClock]:
    clock = CpuClock()
    enabled = gc.isenabled()
    gc.disable()
    start = time.thread_time()
    try:
        yield clock
    finally:
        clock.elapsed = time.thread_time() - start
        if enabled:
            gc.enable()
