"""GRPO step time with the full reward stack ÷ step time with outcome + format only (issue 5, speed).

Same model (the embedded SmolLM2-135M-Instruct with the recipe's LoRA), same batch, same seed, on
CPU, through ``recipes/grpo_cros.py`` with the CPU demo config restricted to causal rows (every
reward applies to them). Configurations:

- ``base``: rewards outcome + format;
- ``full_m2`` / ``full_m4``: outcome, format, trace_format, CRoS (M = 2 / 4), CALVER.

Each configuration runs ``--steps`` GRPO steps from the same seed, so step k sees the same prompt in
every configuration; a step's time is TRL's ``step_time`` (generation, rewards, forward and
backward). Configurations are run in ``--rounds`` interleaved rounds and each step keeps its fastest
time over the rounds: on a machine shared with other jobs the minimum is the least disturbed.
Two ratios per M:

- ``ratio``: full step time / base step time, on what the policy generates. A 135M base model
  rarely closes an ``<answer>``, so CRoS scores few completions (``cros_scored_frac``) and costs
  little there;
- ``ratio_all_scored``: the steady state of a policy that writes traces. The extra rewards
  (trace_format, CRoS, CALVER) score G gold six-slot traces for each of ``--gold_prompts`` causal
  prompts (every completion has a defined Δ), with CRoS bound as in training (the policy with its
  adapters disabled); ratio = (base step + extra reward time per step) / base step.

Prints one JSON object. Target: ratio <= 2.0 at M = 4 on CPU (<= 1.15 on a GPU).

On a GPU (``--device cuda``: the recipe's ``use_cpu`` off, bf16 mixed precision where supported)
the issue-16 check runs G = 8, M = 4 (``--num_generations 8 --scrambles 4``); ``--recipe_args``
passes further recipe flags to every configuration (e.g. ``"--warm_start_config none"``).

Usage:
    python benchmarks/bench_step.py                 # embedded model
    python benchmarks/bench_step.py --steps 3 --rounds 3 --model PATH
    python benchmarks/bench_step.py --tiny --steps 1 --rounds 1   # tiny random Llama: a smoke run
    python benchmarks/bench_step.py --device cuda --num_generations 8 --scrambles 4 \
        --recipe_args "--warm_start_config none"    # the GPU check (benchmarks/gpu_check.sh)
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.util
import json
import os
import platform
import shlex
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


def run(
    recipe,
    model: str,
    out: Path,
    rewards: list[str],
    steps: int,
    extra: list[str],
    m: int = 4,
    cros_batch_size: int | None = None,
):
    argv = [
        "--config", str(ROOT / "recipes" / "configs" / "cpu_demo.yaml"),
        "--model_name_or_path", model, "--output_dir", str(out), "--max_steps", str(steps),
        "--save_strategy", "no", "--logging_steps", "1", "--disable_tqdm", "true", "--report_to", "none",
        "--reward_funcs", *rewards, "--reward_weights", *[str(WEIGHTS[r]) for r in rewards],
        *(["--cros_num_scrambles", str(m)] if "cros" in rewards else []),
        *(["--cros_batch_size", str(cros_batch_size)] if "cros" in rewards and cros_batch_size else []),
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
            trace = gold_trace(row["problem"], 1000 * i + k)
            batch["prompts"].append(row["prompt"])
            batch["completions"].append([{"role": "assistant", "content": trace}])
            batch["problem"].append(row["problem"])
            batch["entry"].append(row["entry"])
            batch["answer"].append(row["answer"])
    return batch, len(rows)


def extra_reward_funcs(trainer, m: int, cros_batch_size: int | None = None) -> list:
    """trace_format, CRoS (M = m) and CALVER, CRoS bound to ``trainer``'s policy as in training."""
    from faithgrpo.rewards.registry import get_reward_funcs
    from faithgrpo.trainers.reference import bind_cros_references

    options = {"cros_batch_size": cros_batch_size} if cros_batch_size else {}
    funcs = get_reward_funcs(["trace_format", "cros", "calver"], cros_num_scrambles=m, cros_seed=0, **options)
    policy = trainer.accelerator.unwrap_model(trainer.model)
    bind_cros_references(funcs, policy, trainer.processing_class, num_generations=trainer.num_generations)
    return funcs


def time_rewards(funcs, batch) -> float:
    columns = {k: batch[k] for k in ("problem", "entry", "answer")}
    start = time.perf_counter()
    for func in funcs:
        func(prompts=batch["prompts"], completions=batch["completions"], **columns)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--model", default="embedded", help="policy: 'embedded', a checkpoint dir or a hub id"
    )
    parser.add_argument("--tiny", action="store_true", help="a tiny random Llama instead (smoke run)")
    parser.add_argument("--steps", type=int, default=2, help="GRPO steps per configuration and round")
    parser.add_argument(
        "--rounds", type=int, default=2, help="interleaved rounds; each step keeps its fastest"
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="timed calls of the extra rewards (fastest kept)"
    )
    parser.add_argument("--gold_prompts", type=int, default=2, help="causal prompts with G gold traces each")
    parser.add_argument("--scrambles", type=int, nargs="+", default=[2, 4], help="CRoS M values")
    parser.add_argument(
        "--device",
        choices=["cpu", "cuda"],
        default="cpu",
        help="cpu (the demo config's use_cpu) or cuda (use_cpu false, bf16 where supported)",
    )
    parser.add_argument(
        "--num_generations",
        type=int,
        default=None,
        help="G, completions per prompt (one prompt per step); default: the config's (4)",
    )
    parser.add_argument(
        "--cros_batch_size", type=int, default=None, help="CRoS sequences per forward (default: config's)"
    )
    parser.add_argument(
        "--recipe_args", default="", help="further recipe flags for every configuration, one string"
    )
    args = parser.parse_args()

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    recipe = load_recipe()
    work = Path(tempfile.mkdtemp(prefix="bench_step_"))
    model = args.model
    extra = ["--mixture", "{}"]  # causal rows only: every reward applies
    if args.tiny:
        from faithgrpo.testing import save_tiny_causal_lm

        model = str(save_tiny_causal_lm(work / "tiny", "llama", seed=0))
        extra += [
            "--max_completion_length",
            "16",
            "--system_prompt",
            "Think, then answer in <answer></answer>.",
        ]
    bf16 = False
    if args.device == "cuda":
        if not torch.cuda.is_available():
            parser.error("--device cuda: no CUDA device is available")
        bf16 = torch.cuda.is_bf16_supported()
        extra += ["--use_cpu", "false", "--bf16", str(bf16).lower()]
    if args.num_generations:
        g = str(args.num_generations)
        extra += ["--num_generations", g, "--per_device_train_batch_size", g]
    extra += shlex.split(args.recipe_args)

    configs = {"base": (["outcome", "format"], 4)} | {f"full_m{m}": (FULL, m) for m in args.scrambles}
    # One untimed step first: the process's first forward/generate pays one-off allocation costs.
    run(recipe, model, work / "warmup", ["outcome", "format"], 1, extra)
    fastest: dict[str, list[float]] = {}
    scored: dict[str, list[float]] = {name: [] for name in configs}
    trainer = None
    for r in range(args.rounds):
        for name, (rewards, m) in configs.items():
            trainer = None
            gc.collect()
            trainer, logs = run(
                recipe, model, work / f"{name}_{r}", rewards, args.steps, extra, m, args.cros_batch_size
            )
            times = [e["step_time"] for e in logs]
            fastest[name] = [min(a, b) for a, b in zip(fastest[name], times)] if name in fastest else times
            scored[name] += [
                1 - e["cros/undefined_frac"] for e in logs if e.get("cros/undefined_frac") is not None
            ]

    group = trainer.num_generations
    prompts_per_step = max(trainer.args.per_device_train_batch_size // group, 1)
    batch, n_prompts = gold_batch(trainer.train_dataset, group, args.gold_prompts)
    tok = trainer.processing_class
    gold_tokens = [
        len(tok(c[0]["content"], add_special_tokens=False)["input_ids"]) for c in batch["completions"]
    ]
    funcs = {m: extra_reward_funcs(trainer, m, args.cros_batch_size) for m in args.scrambles}
    reward_times: dict[int, list[float]] = {m: [] for m in args.scrambles}
    for _ in range(args.repeats):  # interleaved, fastest kept
        for m in args.scrambles:
            reward_times[m].append(time_rewards(funcs[m], batch))

    base = statistics.mean(fastest["base"])
    results = {}
    for m in args.scrambles:
        full = fastest[f"full_m{m}"]
        per_step = min(reward_times[m]) / n_prompts * prompts_per_step
        cros = funcs[m][1]
        results[f"M={m}"] = {
            "full_step_s": [round(t, 3) for t in full],
            "ratio": round(statistics.mean(full) / base, 3),
            "cros_scored_frac": round(statistics.mean(scored[f"full_m{m}"]), 3)
            if scored[f"full_m{m}"]
            else None,
            "all_scored": {
                "extra_reward_s_per_step": round(per_step, 3),
                "ratio_all_scored": round((base + per_step) / base, 3),
                "cros_scored_frac": sum(s.delta is not None for s in cros.last_scores)
                / len(cros.last_scores),
                "reward_call_s": [round(t, 3) for t in reward_times[m]],
            },
        }

    print(
        json.dumps(
            {
                "benchmark": "grpo_step_full_vs_outcome_format",
                "model": "tiny-llama" if args.tiny else args.model,
                "device": args.device,
                "device_name": torch.cuda.get_device_name() if args.device == "cuda" else None,
                "bf16": bf16,
                "torch": torch.__version__,
                "recipe_args": extra,
                "torch_threads": torch.get_num_threads(),
                "cpu_count": os.cpu_count(),
                "load_average_1m": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
                "platform": platform.platform(),
                "steps_per_config": args.steps,
                "rounds": args.rounds,
                "num_generations": group,
                "prompts_per_step": prompts_per_step,
                "max_completion_length": trainer.args.max_completion_length,
                "base_step_s": [round(t, 3) for t in fastest["base"]],
                "gold_prompts": n_prompts,
                "gold_trace_tokens_mean": round(statistics.mean(gold_tokens), 1),
                "results": results,
                "target": {"ratio_at_M4_cpu": 2.0, "ratio_at_M4_gpu": 1.15},
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
