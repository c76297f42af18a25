"""A pytest plugin that fails any test whose process grows past a resident-memory budget.

Why: one test once took the pytest process to 19 GB (issue 26), an out-of-memory kill on a shared
24 GB machine, and nothing in the suite said so. With this plugin each test's peak resident set
size (RSS) of the pytest process is measured; a test whose setup and call go above the budget fails
with a message that names it and its peak, and the terminal summary lists the largest peaks
(teardown included).

- Budget: 4 GiB by default; ``FAITHGRPO_TEST_RSS_BUDGET_GB`` sets another (in GiB; ``0`` only
  reports). The peak is the whole process's, imports and session fixtures included, as an
  out-of-memory killer sees it.
- How: on Linux the kernel's high-water mark ``VmHWM`` is reset before each test (``5`` written to
  ``/proc/self/clear_refs``) and read after it, so even a spike of a millisecond counts. Where the
  reset does not work, a thread samples ``VmRSS`` every 50 ms instead (plus a reading at start
  and end), which can miss a shorter spike. Where ``/proc/self/status`` cannot be read (not
  Linux), nothing is measured and nothing fails.
- Subprocesses: a child's memory is not the pytest process's, and no budget applies to it; the
  summary reports the largest child peak of each test that started one. A thread reads every
  descendant's own high-water mark (``VmHWM`` of ``/proc/<pid>/status``, found through
  ``/proc/*/task/*/children``) every 50 ms while the test runs. ``getrusage(RUSAGE_CHILDREN)``
  backs it up for children shorter than a sample, only where its ``ru_maxrss`` exceeds the pytest
  process's own mark: a child's ``ru_maxrss`` starts from that mark when it is spawned (``vfork``
  + ``exec``), so below it the number says nothing about the child. A child forked without
  ``exec`` (multiprocessing's ``fork``) shows the pages it shares with pytest as its own.

`tests/conftest.py` registers the plugin; `tests/test_rss_guard.py` tests it.
"""

from __future__ import annotations

import glob
import os
import threading

import pytest

try:
    import resource
except ImportError:  # not on Windows
    resource = None

BUDGET_ENV = "FAITHGRPO_TEST_RSS_BUDGET_GB"
DEFAULT_BUDGET_GB = 4.0
SAMPLE_INTERVAL_S = 0.05
RU_MAXRSS_MARGIN = 32 << 20  # bytes: a child's ru_maxrss must exceed pytest's own mark by this much
GIB = 2**30


def _status_kib(path: str, field: str) -> int | None:
    """``field`` (``VmRSS``, ``VmHWM``) of a ``/proc/<pid>/status`` file in KiB, None if unreadable."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _children_peak() -> int | None:
    """``ru_maxrss`` of the children waited for so far, in bytes (Linux reports KiB)."""
    if resource is None:
        return None
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024


def _descendants() -> list[tuple[int, int | str]]:
    """(pid, parent pid) of this process's children, theirs, and so on (empty where /proc lacks them);
    this process is the parent ``"self"``."""
    found, todo = [], ["self"]
    while todo:
        pid = todo.pop()
        for path in glob.glob(f"/proc/{pid}/task/*/children"):
            try:
                with open(path) as f:
                    kids = [int(k) for k in f.read().split()]
            except (OSError, ValueError):  # the thread or process ended meanwhile
                continue
            found += [(kid, pid) for kid in kids]
            todo += kids
    return found


class _DescendantMarks:
    """Each descendant's latest own high-water mark (``VmHWM``), kept after it ends; `update` reads.

    The latest reading of a process counts, not its largest: a child spawned by ``vfork`` shares its
    parent's memory until its ``exec``, and a reading in that window shows the parent's mark as the
    child's (seen on a loaded machine: 0.33 GiB reported for a 0.1 GiB child of a 0.33 GiB pytest).
    Such a reading equals the parent's own mark read right after it, so it is skipped; and after the
    ``exec`` the mark is the child's own and only grows, so a later reading replaces an earlier one.
    """

    def __init__(self) -> None:
        self.last: dict[int, int] = {}
        self._lock = threading.Lock()  # the sampler thread and the hooks both read

    def update(self) -> int:
        for pid, parent in _descendants():
            kib = _status_kib(f"/proc/{pid}/status", "VmHWM")
            if kib is None or kib == _status_kib(f"/proc/{parent}/status", "VmHWM"):
                continue  # ended meanwhile, or still sharing its parent's memory (before exec)
            with self._lock:
                self.last[pid] = kib * 1024
        return self.peak()

    def peak(self) -> int:
        """The largest latest mark among the descendants seen, in bytes."""
        with self._lock:
            return max(self.last.values(), default=0)


def _gib(n: int) -> str:
    return f"{n / GIB:.2f} GiB"


class _Sampler:
    """A daemon thread that keeps the largest value of each of ``read()``'s numbers until `stop`."""

    def __init__(self, read, interval: float = SAMPLE_INTERVAL_S):
        self.read, self.interval = read, interval
        self.peaks = list(read())
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-guard-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.update()
            self.samples += 1

    def update(self) -> list[int]:
        """Take one reading now (as well as the thread's) and return the peaks so far."""
        self.peaks = [max(p, v) for p, v in zip(self.peaks, self.read())]
        return self.peaks

    def stop(self) -> list[int]:
        self._stop.set()
        self._thread.join()
        return self.update()


class RssGuard:
    """The plugin: register one instance with ``config.pluginmanager.register``.

    Args:
        budget_gb: the per-test budget in GiB (``None``: ``FAITHGRPO_TEST_RSS_BUDGET_GB`` or 4);
            ``<= 0`` measures and reports without failing.
        status_path: the ``status`` file to read (tests point it elsewhere).
        clear_refs_path: where the high-water mark is reset; ``None`` forces sampling.
        top: how many tests the terminal summary lists.
    """

    def __init__(
        self,
        budget_gb: float | None = None,
        *,
        status_path: str = "/proc/self/status",
        clear_refs_path: str | None = "/proc/self/clear_refs",
        top: int = 5,
    ):
        if budget_gb is None:
            raw = os.environ.get(BUDGET_ENV, "").strip()
            try:
                budget_gb = float(raw) if raw else DEFAULT_BUDGET_GB
            except ValueError:
                raise pytest.UsageError(
                    f"{BUDGET_ENV}={raw!r} is not a number of GiB, e.g. 4 or 0.5"
                ) from None
        self.budget = int(budget_gb * GIB) if budget_gb > 0 else None
        self.status_path, self.clear_refs_path, self.top = status_path, clear_refs_path, top
        self.available = self._rss() is not None
        self.method = "none"
        if self.available:
            self.method = "VmHWM reset per test" if self._hwm_resets() else "VmRSS sampled every 50 ms"
        self.peaks: dict[str, int] = {}  # test id -> peak RSS of the pytest process over the test
        self.child_peaks: dict[str, int] = {}  # test id -> its largest subprocess's peak RSS
        self._sampler: _Sampler | None = None  # from a test's setup to the end of its teardown
        self._marks = _DescendantMarks()
        self._children_before: int | None = None

    # -- measurement ---------------------------------------------------------------------------------

    def _rss(self) -> int | None:
        kib = _status_kib(self.status_path, "VmRSS")
        return None if kib is None else kib * 1024

    def _hwm(self) -> int | None:
        kib = _status_kib(self.status_path, "VmHWM")
        return None if kib is None else kib * 1024

    def _reset_hwm(self) -> bool:
        if self.clear_refs_path is None:
            return False
        try:
            with open(self.clear_refs_path, "w") as f:
                f.write("5")
        except OSError:
            return False
        return True

    def _hwm_resets(self) -> bool:
        """True when writing ``5`` to ``clear_refs`` really lowers ``VmHWM`` (kernel >= 4.0, no sandbox)."""
        block = b"x" * (64 * 2**20)  # touched, freed at once (mmap): the mark sits 64 MiB above RSS
        del block
        if not self._reset_hwm():
            return False
        hwm, rss = self._hwm(), self._rss()
        return hwm is not None and rss is not None and hwm < rss + 32 * 2**20

    def _reading(self) -> tuple[int, int]:
        """(this process's RSS when sampling, else 0; the descendants' largest peak) now."""
        own = 0 if self.method.startswith("VmHWM") else (self._rss() or 0)
        return own, self._marks.update()

    def _own_peak(self) -> int:
        """This process's peak since the test began."""
        if self.method.startswith("VmHWM"):
            return self._hwm() or 0
        return self._sampler.update()[0] if self._sampler is not None else 0

    # -- hooks ---------------------------------------------------------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item):
        if self.available:
            self._children_before = _children_peak()
            if self.method.startswith("VmHWM"):
                self._reset_hwm()
            self._marks = _DescendantMarks()
            self._sampler = _Sampler(self._reading)  # runs until the end of teardown
        return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item):
        result = yield  # a test that fails on its own reports that failure, not its memory
        if self._sampler is None:
            return result
        peak = self._own_peak()
        self.peaks[item.nodeid] = peak
        if self.budget is not None and peak > self.budget:
            pytest.fail(
                f"{item.nodeid}: peak RSS of the pytest process {_gib(peak)} is over the "
                f"{_gib(self.budget)} budget ({BUDGET_ENV} sets it): make the test use less memory",
                pytrace=False,
            )
        return result

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item, nextitem):
        try:
            return (yield)
        finally:
            if self._sampler is not None:
                own = self._own_peak()
                self._sampler.stop()
                children = self._marks.peak()  # latest marks: the sampler's maximum may hold a vfork window
                self._sampler = None
                self.peaks[item.nodeid] = max(own, self.peaks.get(item.nodeid, 0))
                # a child that ended between samples: its ru_maxrss, where it is clearly more than the
                # pytest process's own mark (which every child's ru_maxrss starts from; the kernel's
                # per-CPU RSS counters make the two marks differ by a few pages)
                after, before = _children_peak(), self._children_before
                floor = max(before or 0, self._hwm() or 0) + RU_MAXRSS_MARGIN
                if after is not None and before is not None and after > floor:
                    children = max(children, after)
                if children:
                    self.child_peaks[item.nodeid] = children

    def pytest_terminal_summary(self, terminalreporter):
        tr = terminalreporter
        if not self.available:
            tr.write_sep("-", "peak RSS: not measured (no /proc/self/status here)")
            return
        if not self.peaks:
            return
        budget = _gib(self.budget) if self.budget is not None else "none"
        tr.write_sep("-", f"peak RSS of the pytest process per test (budget {budget}; {self.method})")
        for nodeid, peak in sorted(self.peaks.items(), key=lambda kv: -kv[1])[: self.top]:
            tr.write_line(f"{_gib(peak):>10}  {nodeid}")
        if self.child_peaks:
            tr.write_sep("-", "peak RSS of the largest subprocess per test (no budget)")
            for nodeid, peak in sorted(self.child_peaks.items(), key=lambda kv: -kv[1])[: self.top]:
                tr.write_line(f"{_gib(peak):>10}  {nodeid}")
