"""The gloo exit deadlock (docs/development.md, "Multi-process on CPU") and its fix, `faithgrpo.trainers.distributed.distributed_teardown`.

The script below reproduces what ``Trainer.end()`` does at the end of a run: the process group is
destroyed while a DDP model is alive, then the model is freed. Without the fix the DDP reducer drops
the group's last reference with the GIL held while gloo's run-loop thread waits for the GIL to free
an all-gather's tensors (seen to hang within 200 rounds on a loaded 2-core machine). With the fix
every round exits.
"""

from __future__ import annotations

import sys
import textwrap

import pytest

from faithgrpo.watchdog import run_with_deadline

ROUNDS = 25

_SCRIPT = textwrap.dedent(
    """
    import os, sys, torch, torch.distributed as dist
    from faithgrpo.trainers.distributed import distributed_teardown, live_process_groups

    rank = int(os.environ["RANK"])
    for i in range(int(sys.argv[1])):
        dist.init_process_group("gloo", init_method=f"file://{sys.argv[2]}_{i}", rank=rank, world_size=2)
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 4))
        model(torch.ones(2, 4)).sum().backward()
        gathered = [None, None]
        dist.all_gather_object(gathered, [rank] * 10)  # a work object holding Python-owned tensors
        assert gathered == [[0] * 10, [1] * 10]
        with distributed_teardown():
            dist.destroy_process_group()  # what accelerate's end_training does, DDP still alive
            del model
        assert not dist.is_initialized() and live_process_groups() == []
    print("rounds done", rank, flush=True)
    """
)


@pytest.mark.slow
def test_destroying_the_group_under_a_live_ddp_model_never_hangs(tmp_path):
    script = tmp_path / "teardown.py"
    script.write_text(_SCRIPT)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           str(script), str(ROUNDS), str(tmp_path / "pg")]  # fmt: skip
    done = run_with_deadline(cmd, timeout=420, env=None)
    assert done.returncode == 0, done.log()
    assert done.stdout.count("rounds done") == 2, done.log()


def test_teardown_without_a_process_group_is_a_no_op():
    from faithgrpo.trainers.distributed import (
        distributed_teardown,
        live_process_groups,
        shutdown_process_group,
    )

    assert live_process_groups() == []
    with distributed_teardown():
        pass
    assert shutdown_process_group() is False
