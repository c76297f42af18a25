"""CRoS under 2 CPU processes (gloo, via torchrun + accelerate's PartialState; docs/development.md, "Multi-process on CPU").

A group of completions split across processes must be ranked as a whole: the reward gathers Δ
before ranking, so the two ranks' slices together equal the single-process result on the batch.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from cros_helpers import DIST_G, dist_batch, random_llama_with_tokenizer

from faithgrpo.rewards.cros.reward import CRoSReward
from faithgrpo.watchdog import run_with_deadline

HELPER = Path(__file__).with_name("cros_helpers.py")


@pytest.mark.slow
def test_two_processes_equal_single_process(tmp_path):
    env = {**os.environ, "CROS_OUT": str(tmp_path), "OMP_NUM_THREADS": "1"}
    # --standalone: a private rendezvous on a free local port (other test runs may be active).
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        str(HELPER),
    ]
    proc = run_with_deadline(cmd, env=env, timeout=300)
    assert proc.returncode == 0, proc.log()
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert [r["rank"] for r in ranks] == [0, 1]
    assert all(r["world"] == 2 and r["backend"] == "gloo" for r in ranks)

    prompts, completions = dist_batch()
    model, tok = random_llama_with_tokenizer(seed=3)
    single = CRoSReward(model, tok, num_scrambles=3, seed=11, batch_size=5)
    expected_rewards = single(prompts, completions)
    expected_deltas = [s.delta for s in single.last_scores]

    gathered_rewards = ranks[0]["rewards"] + ranks[1]["rewards"]
    gathered_deltas = ranks[0]["deltas"] + ranks[1]["deltas"]
    assert gathered_rewards == pytest.approx(expected_rewards, abs=1e-12)
    assert [d is None for d in gathered_deltas] == [d is None for d in expected_deltas]
    assert [d for d in gathered_deltas if d is not None] == pytest.approx(
        [d for d in expected_deltas if d is not None], abs=1e-5
    )

    # The second group straddles the ranks (rows 4, 5 | 6, 7) and its undefined row 7 ranks lowest
    # across the boundary. Ranking each process's rows alone would give other rewards.
    straddling = slice(DIST_G, 2 * DIST_G)
    assert gathered_rewards[straddling][-1] == 0.0
    assert sorted(gathered_rewards[straddling]) == pytest.approx([0.0, 1 / 3, 2 / 3, 1.0])
    half = len(prompts) // 2
    local = CRoSReward(model, tok, num_scrambles=3, seed=11, distributed=False)
    naive = local(prompts[:half], completions[:half]) + local(prompts[half:], completions[half:])
    assert naive[straddling] != pytest.approx(gathered_rewards[straddling])

    for r in ranks:
        assert r["metrics"]["cros/undefined/no_answer"] == pytest.approx(1 / half if r["rank"] == 1 else 0.0)
