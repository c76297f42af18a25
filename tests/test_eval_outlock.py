"""A run owns its --out (issue 32 item 4): a second concurrent run stops with one line; a killed run's
lock dies with it and the next run says so."""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import subprocess
import sys

import pytest

from faithgrpo.eval.report.outlock import LOCK_NAME, OWNER_NAME, OutDirBusy, own_out_dir

# A child that holds the folder until its stdin closes (or it is killed).
HOLDER = """
import sys
from faithgrpo.eval.report.outlock import own_out_dir
with own_out_dir(sys.argv[1]):
    print("held", flush=True)
    sys.stdin.read()
print("released", flush=True)
"""


def _holder(out):
    """Start a process holding ``out``; return it once it says it holds the lock."""
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(out)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # A guard against a child that never answers, not a timing assertion: it normally answers in ~1 s.
    ready, _, _ = select.select([child.stdout], [], [], 300)
    line = child.stdout.readline() if ready else ""
    if line.strip() != "held":
        child.kill()
        _, err = child.communicate(timeout=60)
        pytest.fail(f"the lock holder did not start: {line!r}\n{err[-3000:]}")
    return child


def _eval_args(out, model):
    from faithgrpo.eval.cli import add_eval_subcommand

    parser = argparse.ArgumentParser()
    add_eval_subcommand(parser.add_subparsers())
    return parser.parse_args(["eval", "--model", str(model), "--tasks", "causal_graph", "--out", str(out)])


def test_a_second_run_on_the_same_out_stops_with_one_line(tmp_path, tiny_llama_path, monkeypatch, capsys):
    from faithgrpo.eval.generation import checkpoints

    out = tmp_path / "out"
    out.mkdir()
    (out / "report.md").write_text("the first run's report\n")
    child = _holder(out)
    try:
        before = sorted(os.listdir(out))

        def no_load(*args, **kwargs):
            raise AssertionError("a model was loaded although --out is held by another run")

        monkeypatch.setattr(checkpoints, "load_checkpoint", no_load)
        args = _eval_args(out, tiny_llama_path)
        assert args.func(args) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and err.startswith(
            f"error: --out {str(out)!r} is in use by another faithgrpo run"
        )
        assert f"pid {child.pid}" in err and "pass another --out" in err
        assert (
            sorted(os.listdir(out)) == before
            and (out / "report.md").read_text() == "the first run's report\n"
        )
        with pytest.raises(OutDirBusy):  # the library entry points refuse too
            from faithgrpo.eval.report.pipeline import write_report

            write_report({}, out)
    finally:
        child.stdin.close()
        assert child.wait(timeout=300) == 0 and child.stdout.read().strip() == "released"
    # A run that finished cleanly leaves no owner record: the next run has nothing to report.
    assert not (out / OWNER_NAME).exists()
    with own_out_dir(out) as interrupted:
        assert interrupted is None


def test_a_killed_runs_lock_is_released_and_reported(tmp_path):
    out = tmp_path / "out"
    child = _holder(out)
    with pytest.raises(OutDirBusy, match=f"pid {child.pid}"), own_out_dir(out):
        pass
    os.kill(child.pid, signal.SIGKILL)  # no cleanup: the kernel releases the lock, the owner record stays
    child.wait(timeout=300)
    child.stdout.close()
    child.stderr.close()
    stale = json.loads((out / OWNER_NAME).read_text())
    assert stale["pid"] == child.pid
    with own_out_dir(out) as interrupted:
        assert interrupted is not None and interrupted["pid"] == child.pid
        mine = json.loads((out / OWNER_NAME).read_text())
        assert mine["pid"] == os.getpid()  # this run owns the folder now
    assert not (out / OWNER_NAME).exists() and (out / LOCK_NAME).exists()


def test_the_lock_is_reentrant_in_a_process_and_a_failed_fresh_out_is_removed(tmp_path):
    out = tmp_path / "a" / "b"
    with own_out_dir(out) as first:
        assert first is None
        with own_out_dir(out) as nested:  # run_eval and write_report inside the CLI's hold
            assert nested is None
        assert (out / OWNER_NAME).exists()  # the outer hold still owns the folder
    # A run that made its folder and fails before writing anything leaves no empty --out.
    fresh = tmp_path / "new" / "deeper"
    with pytest.raises(RuntimeError), own_out_dir(fresh):
        raise RuntimeError("failed before writing")
    assert not (tmp_path / "new").exists()
    # A folder that existed, or that holds output, stays.
    with pytest.raises(RuntimeError), own_out_dir(out):
        raise RuntimeError("failed")
    assert out.is_dir()
