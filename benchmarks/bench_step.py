"""GRPO step time with the full reward stack ÷ step time with outcome + format only (issue 5, speed).

Same model (the embedded SmolLM2-135M-Instruct with the recipe's LoRA), same batch, same seed, on
CPU, through ``recipes/grpo_cros.py`` with the CPU demo config. Configurations:

- ``base``: rewards outcome + format;
- ``full_m2`` / ``full_m4``: outcome, format, trace_format, CRoS (M = 2 / 4), CALVER.

Each runs ``--steps`` GRPO steps from the same seed (so step 1 sees the same prompts and the same
sampled completions in every configuration); a step's time is TRL's ``step_time`` (generation,
rewards, forward and backward). Two ratios per M:

- ``ratio``: median full step time / median base step time, on what the policy generates. A 135M
  base model rarely closes an ``<answer>``, so CRoS scores few completions (``cros_scored_frac``)
  and costs little there;
- ``ratio_all_scored``: the steady state of a policy that writes traces. The extra rewards
  (trace_format, CRoS, CALVER) score G gold six-slot traces per prompt (every one has a defined Δ)
  with CRoS bound as in training (the policy with adapters disabled); ratio = (base step + extra
  reward time) / base step.

Prints one JSON object. Target: ratio <= 2.0 at M = 4 on CPU (<= 1.15 on a GPU).

Usage:
    python benchmarks/bench_step.py                 # embedded model, 2 steps per configuration
    python benchmarks/bench_step.py --steps 3 --model PATH
    python benchmarks/bench_step.py --tiny --steps 1   # tiny random Llama: a quick smoke run
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
FULL = ["outcome", "format", "trace_format", "cros", "calver"]
WEIGHTS = {"outcome": 1.0, "format": 0.25, "trace_format": 0.25, "cros": 0.5, "calver": 1.0}


def load_recipe():
    spec = importlib.util.spec_from_file_location("grpo_cros", ROOT / "recipes" / "grpo_cros.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def run(recipe, model: str, out: Path, rewards: list[str], steps: int, extra: list[str], m: int = 4):
    argv = [
        "--model_name_or_path", model, "--output_dir", str(out), "--max_steps", str(steps),
        "--save_strategy", "no", "--logging_steps", "1", "--disable_tqdm", "true", "--report_to", "none",
        "--reward_funcs", *rewards, "--reward_weights", *[str(WEIGHTS[r]) for r in rewards],
        *(["--cros_num_scrambles", str(m)] if "cros" in rewards else []),
        *extra,
    ]  # fmt: skip
    with contextlib.redirect_stdout(sys.stderr):  # stdout carries the JSON only
        trainer = recipe.main(*recipe.parse_args(argv))
    logs = [entry for entry in trainer.state.log_history if "step_time" in entry]
    return trainer, logs


def gold_batch(dataset, group: int, prompts: int):
    """``group`` gold traces for each of the first ``prompts`` causal rows, as TRL would pass them."""
    from faithgrpo.tasks.gold import gold_trace

    rows = [r for r in dataset if r["problem"]][:prompts]
    batch = {"prompts": [], "completions": [], "problem": [], "entry": [], "answer": []}
    for i, row in enumerate(rows):
        for k in range(group):
            batch["prompts"].append(row["prompt"])
            batch["completions"].append(
                [{"role": "assistant", "content": gold_trace(row["problem"], 1000 * i + k)}]
            )
            batch["problem"].append(row["problem"])
            batch["entry"].append(row["entry"])
            batch["answer"].append(row["answer"])
    return batch


def extra_reward_seconds(trainer, batch, m: int, repeats: int) -> tuple[float, dict]:
    """Median time of trace_format + CRoS (M = m) + CALVER on ``batch``, CRoS bound as in training."""
    from faithgrpo.rewards.registry import get_reward_funcs
    from faithgrpo.trainers.reference import bind_cros_references

    funcs = get_reward_funcs(["trace_format", "cros", "calver"], cros_num_scrambles=m, cros_seed=0)
    policy = trainer.accelerator.unwrap_model(trainer.model)
    bind_cros_references(funcs, policy, trainer.processing_class, num_generations=trainer.num_generations)
    columns = {k: batch[k] for k in ("problem", "entry", "answer")}
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for func in funcs:
            func(prompts=batch["prompts"], completions=batch["completions"], **columns)
        times.append(time.perf_counter() - start)
    cros = funcs[1]
    scored = sum(s.delta is not None for s in cros.last_scores) / len(cros.last_scores)
    return statistics.median(times), {"cros_scored_frac": scored, "times_s": [round(t, 3) for t in times]}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--model", default="embedded", help="policy: 'embedded', a checkpoint dir or a hub id"
    )
    parser.add_argument("--tiny", action="store_true", help="a tiny random Llama instead (smoke run)")
    parser.add_argument("--steps", type=int, default=2, help="GRPO steps per configuration")
    parser.add_argument(
        "--repeats", type=int, default=3, help="timed calls of the extra rewards on gold traces"
    )
    parser.add_argument("--scrambles", type=int, nargs="+", default=[2, 4], help="CRoS M values")
    args = parser.parse_args()

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    recipe = load_recipe()
    work = Path(tempfile.mkdtemp(prefix="bench_step_"))
    model = args.model
    extra: list[str] = []
    if args.tiny:
        from faithgrpo.testing import save_tiny_causal_lm

        model = str(save_tiny_causal_lm(work / "tiny", "llama", seed=0))
        extra = [
            "--max_completion_length",
            "16",
            "--system_prompt",
            "Think, then answer in <answer></answer>.",
        ]

    # One untimed step first: the process's first forward/generate pays one-off allocation costs.
    run(recipe, model, work / "warmup", ["outcome", "format"], 1, extra)
    base_trainer, base_logs = run(recipe, model, work / "base", ["outcome", "format"], args.steps, extra)
    base = [e["step_time"] for e in base_logs]
    t_base = statistics.median(base)
    dataset = base_trainer.train_dataset
    group = base_trainer.num_generations
    prompts_per_step = base_trainer.args.per_device_train_batch_size // group
    batch = gold_batch(dataset, group, max(prompts_per_step, 1))
    tok = base_trainer.processing_class
    gold_tokens = [
        len(tok(c[0]["content"], add_special_tokens=False)["input_ids"]) for c in batch["completions"]
    ]

    results = {}
    for m in args.scrambles:
        _, logs = run(recipe, model, work / f"full_m{m}", FULL, args.steps, extra, m=m)
        full = [e["step_time"] for e in logs]
        undefined = [e.get("cros/undefined_frac") for e in logs if e.get("cros/undefined_frac") is not None]
        extra_s, detail = extra_reward_seconds(base_trainer, batch, m, args.repeats)
        results[f"M={m}"] = {
            "full_step_s": [round(t, 3) for t in full],
            "ratio": round(statistics.median(full) / t_base, 3),
            "cros_scored_frac": round(1 - statistics.mean(undefined), 3) if undefined else None,
            "all_scored": {
                "extra_reward_s": round(extra_s, 3),
                "ratio_all_scored": round((t_base + extra_s) / t_base, 3),
                **detail,
            },
        }

    args_used = base_trainer.args
    print(
        json.dumps(
            {
                "benchmark": "grpo_step_full_vs_outcome_format",
                "model": "tiny-llama" if args.tiny else args.model,
                "device": "cpu",
                "torch_threads": torch.get_num_threads(),
                "cpu_count": os.cpu_count(),
                "load_average_1m": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
                "platform": platform.platform(),
                "steps_per_config": args.steps,
                "num_generations": group,
                "prompts_per_step": prompts_per_step,
                "max_completion_length": args_used.max_completion_length,
                "base_step_s": [round(t, 3) for t in base],
                "gold_trace_tokens_mean": round(statistics.mean(gold_tokens), 1),
                "results": results,
                "target": {"ratio_at_M4_cpu": 2.0, "ratio_at_M4_gpu": 1.15},
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
