"""recipes/grpo_cros.py under two CPU processes (torchrun, gloo; docs/development.md, "Multi-process on CPU").

``accelerate launch --cpu --num_processes 2`` starts a single process without MPI, so the run goes
through ``torchrun --nproc_per_node 2`` with ``--use_cpu true``: two gloo ranks, DDP around the LoRA
policy. After two GRPO steps, each rank scores its half of a fixed probe batch with the run's bound
CRoS reward (the test helper ``tests/cros_probe_recipe.py`` wraps the recipe's ``main``); together the
halves must equal one process scoring the whole batch with a fresh copy of the initial model.
"""

from __future__ import annotations

import json
import os
import sys

import pytest
from test_recipes import ROOT, _tiny_args
from transformers import AutoModelForCausalLM, AutoTokenizer

from faithgrpo.rewards.cros.reward import CRoSReward
from faithgrpo.trainers.callbacks import read_metrics
from faithgrpo.watchdog import run_with_deadline

G = 4
SCRAMBLES = 3
STEPS = [
    "Step 1: U causes X and Y.\nStep 2: the path X <- U -> Y is open.\nStep 3: adjust for U.",
    "Step 1: X -> M -> Y.\nStep 2: M is a mediator, keep it out.",
    "first, list parents of X\nthen, block every backdoor path\nfinally, check descendants",
    "Step 1: no confounder.\nStep 2: nothing to block.\nStep 3: the empty set works.\nStep 4: done.",
]


def probe_batch():
    """Three groups of four completions; group 1 straddles the two ranks and its last row has no answer."""
    prompts, completions = [], []
    for g in range(3):
        prompt = [
            {"role": "user", "content": f"Question {g}: which set blocks the backdoor paths from X to Y?"}
        ]
        for i in range(G):
            answer = ["{U}", "{}", "{U, M}", "{M}"][(g + i) % 4]
            text = f"<think>{STEPS[(g + i) % 4]}</think><answer>{answer}</answer>"
            if g == 1 and i == G - 1:
                text = "<think>Step 1: unsure.\nStep 2: give up.</think>"  # undefined: ranks lowest
            prompts.append(prompt)
            completions.append(text)
    return prompts, completions


def run_two_ranks(args: list[str], cwd, timeout: int = 900, script=None):
    """``script args`` (default ``recipes/grpo_cros.py``) under ``torchrun --nproc_per_node 2``:
    (finished process, log).

    A hang comes back after ``timeout`` seconds with every rank's Python and native stacks in the log.
    """
    script = script or ROOT / "recipes" / "grpo_cros.py"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           str(script), *args]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT / "tests")}
    proc = run_with_deadline(cmd, env=env, timeout=timeout, cwd=cwd)
    return proc, proc.log()


@pytest.mark.slow
def test_two_process_run_finishes_and_cros_ranks_equal_one_process(tiny_llama_path, tmp_path):
    prompts, completions = probe_batch()
    probe = tmp_path / "probe.json"
    probe.write_text(json.dumps({"prompts": prompts, "completions": completions}))
    out = tmp_path / "run"
    args = _tiny_args(tiny_llama_path, out, "--max_steps", "2", "--save_strategy", "no")
    # Two processes x 2 rows = one group of 4 per step, split across the ranks.
    args += ["--per_device_train_batch_size", "2", "--num_generations", str(G), "--use_cpu", "true",
             "--cros_num_scrambles", str(SCRAMBLES)]  # fmt: skip
    helper = ROOT / "tests" / "cros_probe_recipe.py"
    proc, log = run_two_ranks([str(probe), *args], tmp_path, timeout=600, script=helper)
    assert proc.returncode == 0, log
    assert "destroy_process_group() was not called" not in proc.stderr, log

    ranks = [json.loads((out / f"cros_probe_rank{r}.json").read_text()) for r in range(2)]
    assert [r["rank"] for r in ranks] == [0, 1]
    assert all(r["world"] == 2 and r["backend"] == "gloo" for r in ranks)
    assert all(r["reference_mode"] == "peft_disabled_adapters" for r in ranks)
    # Both ranks trained; only rank 0 wrote metrics, one line per step.
    assert [row["step"] for row in read_metrics(out / "metrics.jsonl")] == [1, 2]
    assert (out / "adapter_model.safetensors").is_file()

    # One process, the whole batch, a fresh copy of the initial model.
    model = AutoModelForCausalLM.from_pretrained(tiny_llama_path).eval()
    tok = AutoTokenizer.from_pretrained(tiny_llama_path)
    single = CRoSReward(model, tok, num_scrambles=SCRAMBLES, seed=0, num_generations=G)
    expected_rewards = single(prompts, completions)
    expected_deltas = [s.delta for s in single.last_scores]

    gathered_rewards = ranks[0]["rewards"] + ranks[1]["rewards"]
    gathered_deltas = ranks[0]["deltas"] + ranks[1]["deltas"]
    assert gathered_rewards == pytest.approx(expected_rewards, abs=1e-9)
    assert [d is None for d in gathered_deltas] == [d is None for d in expected_deltas]
    assert [d for d in gathered_deltas if d is not None] == pytest.approx(
        [d for d in expected_deltas if d is not None], abs=1e-5
    )
    # The straddling group was ranked whole: 4 distinct ranks, its undefined row (on rank 1) lowest.
    straddling = gathered_rewards[G : 2 * G]
    assert straddling[-1] == 0.0 and sorted(straddling) == pytest.approx([0.0, 1 / 3, 2 / 3, 1.0])
    half = len(prompts) // 2
    local = CRoSReward(model, tok, num_scrambles=SCRAMBLES, seed=0, num_generations=G, distributed=False)
    naive = local(prompts[:half], completions[:half]) + local(prompts[half:], completions[half:])
    assert naive[G : 2 * G] != pytest.approx(straddling)

    # The scores came from the initial weights, not the trained policy: the adapters did move.
    from peft import PeftModel

    trained = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_llama_path), out).eval()
    moved = CRoSReward(trained, tok, num_scrambles=SCRAMBLES, seed=0).compute_deltas(
        zip(prompts, completions)
    )
    assert [s.delta for s in moved if s.delta is not None] != pytest.approx(
        [d for d in expected_deltas if d is not None], abs=1e-5
    )
