"""The suite's memory guard (tests/rss_guard.py): a test over the RSS budget fails, named with its peak.

Each scenario runs a small pytest session in a fresh subprocess (``pytester``), so its memory is
not this process's (torch already takes more than the budgets used here).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
import rss_guard
from rss_guard import RssGuard, _DescendantMarks, _Sampler

pytest_plugins = ["pytester"]

TESTS_DIR = Path(__file__).resolve().parent
LINUX = Path("/proc/self/status").exists()

# Allocations are held by a fixture until teardown, so the reading at the end of the call sees them
# whether the peak comes from the kernel's high-water mark or from sampling.
TESTS = """
import subprocess, sys, time
import pytest

HELD = []

@pytest.fixture
def hold():
    yield HELD
    HELD.clear()

def test_big(hold):
    hold.append(b"x" * (300 << 20))  # touched, so resident

def test_small(hold):
    hold.append(b"x" * (8 << 20))

def test_child():
    subprocess.run([sys.executable, "-c", "b = b'x' * (200 << 20)"], check=True, timeout=120)

def test_small_child_of_a_big_parent(hold, request):
    # the child's ru_maxrss would say 0.33 GiB (pytest's mark at the spawn): only sampling sees 0.1
    hold.append(b"x" * (300 << 20))
    sampler = request.config.pluginmanager.get_plugin("rss-guard")._sampler
    script = "import sys; b = b'x' * (100 << 20); print('ready', flush=True); sys.stdin.read()"
    child = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout.readline().strip() == "ready"
        seen, deadline = sampler.samples, time.monotonic() + 60
        while sampler.samples < seen + 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        child.communicate(timeout=60)

@pytest.fixture
def broken():
    raise RuntimeError("setup fails")

def test_broken_setup(broken):
    pass
"""


def _conftest(**kwargs) -> str:
    return (
        f"import sys\nsys.path.insert(0, {str(TESTS_DIR)!r})\nfrom rss_guard import RssGuard\n\n"
        f"def pytest_configure(config):\n"
        f"    config.pluginmanager.register(RssGuard(**{kwargs!r}), 'rss-guard')\n"
    )


def _run(pytester, conftest: str, *args):
    pytester.makeconftest(conftest)
    pytester.makepyfile(test_mod=TESTS)
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rA", *args, timeout=300)


def _gib_of(line: str) -> float:
    return float(re.search(r"([0-9.]+) GiB", line).group(1))


@pytest.mark.skipif(not LINUX, reason="needs /proc")
@pytest.mark.parametrize("method", ["hwm", "sampled"])
def test_a_test_over_the_budget_fails_naming_itself_and_one_under_it_passes(pytester, monkeypatch, method):
    if method == "hwm" and not RssGuard(0).method.startswith("VmHWM"):
        pytest.skip("the kernel's high-water mark cannot be reset here")
    monkeypatch.setenv("FAITHGRPO_TEST_RSS_BUDGET_GB", "0.15")  # a bare pytest process: ~40 MiB
    kwargs = {} if method == "hwm" else {"clear_refs_path": None}
    result = _run(pytester, _conftest(**kwargs), "-k", "not big_parent")
    result.assert_outcomes(passed=2, failed=1, errors=1)  # test_broken_setup: its own error, no crash
    out = result.stdout.str()
    failure = next(line for line in result.stdout.lines if "is over the" in line)
    assert "test_mod.py::test_big: peak RSS of the pytest process" in failure
    assert "over the 0.15 GiB budget (FAITHGRPO_TEST_RSS_BUDGET_GB sets it)" in failure
    assert _gib_of(failure) >= 0.29
    # test_small ran after test_big in the same process and passed: peaks are per test
    assert "FAILED test_mod.py::test_big" in out and "PASSED test_mod.py::test_small" in out
    method_text = "VmHWM reset per test" if method == "hwm" else "VmRSS sampled every 50 ms"
    assert f"peak RSS of the pytest process per test (budget 0.15 GiB; {method_text})" in out
    lines = result.stdout.lines
    top = lines[next(i for i, line in enumerate(lines) if "per test (budget" in line) + 1]
    assert top.endswith("test_mod.py::test_big") and _gib_of(top) >= 0.29
    assert "INTERNALERROR" not in out


@pytest.mark.skipif(not LINUX, reason="needs /proc")
def test_children_peaks_are_reported_and_the_default_budget_passes(pytester, monkeypatch):
    monkeypatch.delenv("FAITHGRPO_TEST_RSS_BUDGET_GB", raising=False)
    result = _run(pytester, _conftest(), "-k", "not broken")
    result.assert_outcomes(passed=4)
    out = result.stdout.str()
    assert "(budget 4.00 GiB;" in out
    section = out.split("largest subprocess per test")[1].split("short test summary")[0].splitlines()[1:]
    listed = {line.split()[-1]: _gib_of(line) for line in section if "test_mod.py::" in line}
    assert set(listed) == {"test_mod.py::test_child", "test_mod.py::test_small_child_of_a_big_parent"}
    assert listed["test_mod.py::test_child"] >= 0.19  # lived less than a sample maybe: ru_maxrss
    assert 0.09 <= listed["test_mod.py::test_small_child_of_a_big_parent"] < 0.25  # its own, not pytest's


def test_without_proc_nothing_is_measured_and_nothing_fails(pytester, tmp_path):
    guard = _conftest(budget_gb=0.001, status_path=str(tmp_path / "missing"))
    result = _run(pytester, guard, "-k", "not broken and not big_parent")
    result.assert_outcomes(passed=3)
    assert "peak RSS: not measured (no /proc/self/status here)" in result.stdout.str()


def test_a_bad_budget_is_a_usage_error(monkeypatch):
    monkeypatch.setenv("FAITHGRPO_TEST_RSS_BUDGET_GB", "four")
    with pytest.raises(pytest.UsageError, match="FAITHGRPO_TEST_RSS_BUDGET_GB='four'"):
        RssGuard()


def test_the_sampler_keeps_a_spike_between_quiet_readings():
    readings = iter([(100, 0), (100, 5), (900, 7)])  # start, one quiet sample, the spike; then quiet
    sampler = _Sampler(lambda: next(readings, (100, 0)), interval=0.001)
    deadline = time.monotonic() + 60  # waits for samples, not for a fixed time: load only slows it
    while sampler.samples < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sampler.samples >= 4
    assert sampler.stop() == [900, 7]


def test_a_child_still_sharing_its_parent_s_memory_is_not_read_as_its_own(monkeypatch):
    # A child spawned by vfork shows its parent's VmHWM until its exec; on a loaded CI machine a
    # sample in that window reported pytest's 0.33 GiB for a 0.1 GiB child. Fake /proc: three rounds.
    tree = [[(11, "self"), (12, 11)], [(11, "self"), (12, 11)], [(11, "self")]]
    status = [
        {"self": 330, 11: 330, 12: 50},  # 11 in its vfork window (= pytest's mark), 12 its own 50
        {"self": 330, 11: 100, 12: 70},  # 11 after exec: 100; 12 grew to 70
        {"self": 330, 11: 100},  # 12 ended: its last mark stays
    ]
    rounds = iter(range(3))
    current = {}
    monkeypatch.setattr(rss_guard, "_descendants", lambda: tree[current.setdefault("r", next(rounds))])
    monkeypatch.setattr(
        rss_guard,
        "_status_kib",
        lambda path, field: status[current["r"]].get(
            "self" if path == "/proc/self/status" else int(path.split("/")[2])
        ),
    )
    marks = _DescendantMarks()
    expected = [50, 100, 100]  # KiB; never 330
    for want in expected:
        current.clear()
        assert marks.update() == want * 1024
    assert marks.last == {11: 100 * 1024, 12: 70 * 1024}


def test_a_later_reading_replaces_an_earlier_one(monkeypatch):
    # VmHWM only grows within one memory image, so a lower later reading means the earlier one was
    # not the child's own (a pre-exec window whose parent mark moved between the two reads)
    readings = iter([400, 120])
    monkeypatch.setattr(rss_guard, "_descendants", lambda: [(21, "self")])
    monkeypatch.setattr(
        rss_guard, "_status_kib", lambda path, field: 10 if path == "/proc/self/status" else next(readings)
    )
    marks = _DescendantMarks()
    assert marks.update() == 400 * 1024
    assert marks.update() == 120 * 1024


def test_this_suite_runs_under_the_guard(request):
    # conftest.py registers it: a suite without it would let a 19 GB test through again
    guard = request.config.pluginmanager.get_plugin("faithgrpo-rss-guard")
    assert isinstance(guard, RssGuard)
    if LINUX:
        assert guard.available
