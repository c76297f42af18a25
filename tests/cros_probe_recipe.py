"""Test helper: ``recipes/grpo_cros.py`` with a CRoS probe after training (not a test module).

    torchrun --nproc_per_node 2 tests/cros_probe_recipe.py PROBE_JSON <grpo_cros.py flags>

Runs the recipe's ``cli`` unchanged (the same teardown) with its ``main`` wrapped: after training,
each process scores its contiguous slice of the probe batch ``{"prompts": [...], "completions":
[...]}`` with the run's bound CRoS reward and writes ``output_dir/cros_probe_rank<k>.json``.
test_recipe_distributed.py compares the slices with one process scoring the whole batch.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_cros_probe(trainer, probe_file: str, output_dir: str) -> dict:
    """Score a fixed batch with the trainer's bound CRoS reward, this process's contiguous slice only."""
    import torch.distributed as dist

    from faithgrpo.rewards.cros.reward import CRoSReward

    cros = next(f for f in trainer.reward_funcs if isinstance(f, CRoSReward))
    probe = json.loads(Path(probe_file).read_text(encoding="utf-8"))
    prompts, completions = probe["prompts"], probe["completions"]
    rank, world = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
    assert len(prompts) % world == 0, f"the probe batch must split evenly over {world} processes"
    size = len(prompts) // world
    part = slice(rank * size, (rank + 1) * size)
    rewards = cros(prompts[part], completions[part])
    result = {
        "rank": rank,
        "world": world,
        "backend": dist.get_backend() if dist.is_initialized() else None,
        "reference_mode": trainer.cros_reference_mode,
        "rewards": rewards,
        "deltas": [s.delta for s in cros.last_scores],
        "reasons": [s.reason for s in cros.last_scores],
    }
    Path(output_dir, f"cros_probe_rank{rank}.json").write_text(json.dumps(result), encoding="utf-8")
    return result


def load_recipe():
    spec = importlib.util.spec_from_file_location("grpo_cros", ROOT / "recipes" / "grpo_cros.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    probe_file, argv = sys.argv[1], sys.argv[2:]
    recipe = load_recipe()
    train = recipe.main

    def main_then_probe(*args, **kwargs):
        trainer = train(*args, **kwargs)
        run_cros_probe(trainer, probe_file, trainer.args.output_dir)
        return trainer

    recipe.main = main_then_probe  # cli() looks main up in the module when it runs
    sys.exit(recipe.cli(argv))
