"""The subprocess watchdog: a hung command comes back with its stacks, never as a silent hang."""

from __future__ import annotations

import sys
import textwrap

from faithgrpo.watchdog import run_with_deadline


def test_a_finished_command_returns_its_output_and_code():
    done = run_with_deadline([sys.executable, "-c", "import sys; print('out'); sys.exit(3)"], timeout=60)
    assert (done.returncode, done.stdout.strip(), done.timed_out) == (3, "out", False)


def test_a_hung_command_is_killed_and_leaves_the_python_stack_of_the_hanging_function(tmp_path):
    script = tmp_path / "hang.py"
    script.write_text(
        textwrap.dedent(
            """
            import subprocess, sys, time
            def wait_here_forever():
                time.sleep(1000)
            # a child process hangs too: the whole tree is reported and killed
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1000)"])
            print("started", flush=True)
            wait_here_forever()
            """
        )
    )
    done = run_with_deadline([sys.executable, str(script)], timeout=5, native_stacks=False)
    assert done.timed_out and done.returncode == -9
    assert "started" in done.stdout
    assert "watchdog: no exit after 5 s; stacks of 2 processes" in done.stderr
    assert "wait_here_forever" in done.stderr  # faulthandler's dump on SIGABRT
    assert "TIMED OUT" in done.log()
