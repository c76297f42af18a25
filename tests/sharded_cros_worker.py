"""Two-rank FSDP2 worker for tests/test_cros_sharded.py (run under ``torchrun --nproc_per_node 2``).

Builds the tiny float64 Llama with a LoRA adapter, binds CRoS to the initial policy through the
trainer glue (before sharding, as FaithGRPOTrainer does), shards it with torch's own FSDP2
(``fully_shard``, gloo on CPU), trains a few optimizer steps, then scores CRoS Δ on each rank's
share of a batch (the shares differ in size, so the ranks' forward counts differ) and writes
``$CROS_OUT/rank<k>.json``: Δ under the bound reference, Δ under the live policy, the reference
mode, parameter bytes held (local shards vs the full model) and the snapshot's bytes.

``CROS_INIT``: ``warm`` (a non-zero initial adapter, as after a warm start: the initial adapter is
swapped in) or ``fresh`` (a zero-initialised LoRA: adapters disabled).
"""

from __future__ import annotations

import json
import os
import sys

import torch
import torch.distributed as dist
from cros_helpers import DIST_G, dist_batch, random_llama_with_tokenizer
from peft import LoraConfig, get_peft_model
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

from faithgrpo.rewards.cros.reward import CRoSReward
from faithgrpo.rewards.cros.scoring import is_dtensor
from faithgrpo.trainers.distributed import shutdown_process_group
from faithgrpo.trainers.reference import InitialWeights, bind_cros_references

SEED = 3
STEPS = 3


def initial_policy(init: str):
    """The float64 tiny Llama with its initial LoRA adapter, identical in every process for one ``init``."""
    model, tok = random_llama_with_tokenizer(seed=SEED)
    model = model.double()
    torch.manual_seed(SEED + 1)
    config = LoraConfig(
        r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "down_proj"], init_lora_weights=init == "fresh"
    )
    return get_peft_model(model, config), tok


def rank_share(rank: int) -> tuple[list[str], list[str]]:
    """Rank 0 scores two groups, rank 1 one group: the ranks run different numbers of forwards."""
    prompts, completions = dist_batch()
    rows = slice(0, 2 * DIST_G) if rank == 0 else slice(2 * DIST_G, 3 * DIST_G)
    return prompts[rows], completions[rows]


def nbytes(tensors) -> int:
    total = 0
    for t in tensors:
        local = t.to_local() if is_dtensor(t) else t
        total += local.numel() * local.element_size()
    return total


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    init = os.environ.get("CROS_INIT", "warm")
    policy, tok = initial_policy(init)
    cros = CRoSReward(num_scrambles=3, seed=11, batch_size=3, distributed=False)
    mode = bind_cros_references([cros], policy, tok, num_generations=DIST_G)
    full_bytes = nbytes(policy.parameters())
    adapter_bytes = nbytes(p for p in policy.parameters() if p.requires_grad)

    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    for layer in policy.base_model.model.model.layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(policy, mesh=mesh)
    policy.train()
    trainable = [p for p in policy.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=5e-2)
    generator = torch.Generator().manual_seed(100 + rank)
    for _ in range(STEPS):
        ids = torch.randint(3, len(tok), (2, 24), generator=generator)
        policy(input_ids=ids, labels=ids).loss.backward()
        optimizer.step()
        optimizer.zero_grad()

    prompts, completions = rank_share(rank)
    cros(prompts, completions)  # the TRL entry point, through the sharded path
    deltas = [s.delta for s in cros.last_scores]
    # The same sharded policy without the reference's context: the live policy, for contrast.
    live = CRoSReward(policy, tok, num_scrambles=3, seed=11, batch_size=3, distributed=False)
    live_deltas = [s.delta for s in live.compute_deltas(zip(prompts, completions))]

    policy.reshard()  # the FSDP2 root keeps its parameters gathered after a forward until resharded
    snapshot = (
        cros.scorer.context_factory if isinstance(cros.scorer.context_factory, InitialWeights) else None
    )
    out = {
        "rank": rank,
        "mode": mode,
        "reference_is_policy": cros.model is policy,
        "deltas": deltas,
        "live_deltas": live_deltas,
        "full_bytes": full_bytes,
        "adapter_bytes": adapter_bytes,
        "local_param_bytes": nbytes(policy.parameters()),
        "sharded_params": sum(is_dtensor(p) for p in policy.parameters()),
        "snapshot_bytes": snapshot.nbytes if snapshot is not None else 0,
        "forward_counts": dict(cros.scorer.forward_counts),
    }
    with open(os.path.join(os.environ["CROS_OUT"], f"rank{rank}.json"), "w") as f:
        json.dump(out, f)
    shutdown_process_group()


if __name__ == "__main__":
    sys.exit(main())
