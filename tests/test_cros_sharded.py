"""CRoS under FSDP2 sharding on CPU: the initial policy through the policy's own sharded forward.

docs/recipes.md, "CRoS reference binding": with LoRA, CRoS scores through the policy's own (sharded) forward with the initial
adapter state, never a second model. Two ranks (torchrun, gloo) shard a tiny float64 Llama + LoRA
with torch's ``fully_shard``, train a few steps, and score Δ; this process computes the expected Δ
with an unsharded copy of the initial policy. TRL's GRPOTrainer itself is not run sharded here:
accelerate enables FSDP only on GPU setups, so what this covers is the binding, the
swap and the scoring path TRL calls.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from cros_helpers import DIST_G
from sharded_cros_worker import initial_policy, rank_share

from faithgrpo.rewards.cros.reward import CRoSReward
from faithgrpo.watchdog import run_with_deadline

WORKER = Path(__file__).with_name("sharded_cros_worker.py")


def run_ranks(tmp_path: Path, init: str) -> list[dict]:
    env = {**os.environ, "CROS_OUT": str(tmp_path), "CROS_INIT": init, "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        str(WORKER),
    ]
    proc = run_with_deadline(cmd, env=env, timeout=300)
    assert proc.returncode == 0, proc.log()
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]


def expected_deltas(init: str, rank: int) -> list[float | None]:
    """Δ of the rank's share under the initial policy, unsharded, in this process."""
    policy, tok = initial_policy(init)
    policy.eval().requires_grad_(False)
    cros = CRoSReward(policy, tok, num_scrambles=3, seed=11, batch_size=3, distributed=False)
    prompts, completions = rank_share(rank)
    return [s.delta for s in cros.compute_deltas(zip(prompts, completions))]


def close(a: list, b: list, tol: float) -> bool:
    return [x is None for x in a] == [y is None for y in b] and all(
        abs(x - y) <= tol for x, y in zip(a, b) if x is not None
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "init, mode", [("warm", "peft_initial_adapter"), ("fresh", "peft_disabled_adapters")]
)
def test_fsdp2_cros_scores_the_initial_policy_without_a_copy(tmp_path, init, mode):
    ranks = run_ranks(tmp_path, init)
    for r in ranks:
        assert r["mode"] == mode
        assert r["reference_is_policy"]  # no second model: the sharded policy itself
        assert r["sharded_params"] > 0
        expected = expected_deltas(init, r["rank"])
        assert len(r["deltas"]) == len(expected) == (2 * DIST_G if r["rank"] == 0 else DIST_G)
        assert close(r["deltas"], expected, 1e-6), (r["deltas"], expected)
        # The test can fail: three optimizer steps moved the live policy's Δ well away.
        assert not close(r["live_deltas"], expected, 1e-4)
        # Parameters held per rank: half the model (2 ranks), no unsharded copy anywhere.
        assert r["local_param_bytes"] <= 0.55 * r["full_bytes"]
        # The initial-adapter snapshot is this rank's shard of the adapter, not the adapter.
        assert r["snapshot_bytes"] <= 0.55 * r["adapter_bytes"] * (mode == "peft_initial_adapter")
    # Rank 0 scored twice the rows of rank 1; rank 1 matched rank 0's forwards with one-token fillers.
    counts = [r["forward_counts"] for r in ranks]
    assert counts[0]["chunk"] == counts[1]["chunk"] + counts[1]["sharded_filler"] > counts[1]["chunk"]
