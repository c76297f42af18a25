"""GRPO step time with TRL's generation vs the decode engine as rollout; eval throughput at G = 8 and 32.

Issue 38, items 2 and 4, measured side by side in one run (the machine may be shared: the figures
that survive load are the ratios of interleaved runs).

1. **Training** (``--steps`` GRPO steps of ``recipes/configs/cpu_demo.yaml``, warm start cached, every
   reward): the recipe runs once per rollout (``--rollout trl``: ``model.generate``; ``--rollout
   decode``: `faithgrpo.trainers.rollout.DecodeRollout`), in ``--rounds`` interleaved rounds (the order
   alternates), each in a child process of its own, with the same seed (the same prompts). From each
   run's ``metrics.jsonl`` (``time/<phase>``, one line per step): the median of every phase over the
   steps after the first (the first step pays one-off costs), completion tokens/s of generation, the
   mean completion length, and the child's peak RSS (``wait4``). Reported: per-phase medians per
   rollout and the ratio engine ÷ default of step and generation time.
2. **Evaluation generation** (`generate_completions`, the embedded model, fp32, 2 threads): the issue's
   standard workload (16 causal-graph prompts × G = 8, ≤ 224 new tokens) with both engines, and the
   best-of-K workload (1 prompt × G = 32, ≤ 384 new tokens, 32 rows decoded together) with the decode
   engine (``--generate-at-32`` adds ``generate`` there, ~5 minutes).
3. **The compute bound** of the best-of-K workload, derived from the model's shapes and this
   machine's measured matmul rate (see `compute_bound`), and the engine's fraction of it.

Prints one JSON object.

Usage:
    python benchmarks/bench_rollout.py                       # everything (~25 minutes on 2 cores)
    python benchmarks/bench_rollout.py --skip-training       # generation and the bound only
    python benchmarks/bench_rollout.py --steps 3 --rounds 1 --skip-eval
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROLLOUTS = ("trl", "decode")


def _median(values):
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 4) if values else None


def train_once(rollout: str, steps: int, out: Path, extra: list[str], timeout: float) -> dict:
    """One recipe run in a child process; its per-phase medians, tokens/s and peak RSS."""
    metrics = out / "metrics.jsonl"
    command = [
        sys.executable,
        str(ROOT / "recipes" / "grpo_cros.py"),
        "--config",
        str(ROOT / "recipes" / "configs" / "cpu_demo.yaml"),
        "--max_steps",
        str(steps),
        "--logging_steps",
        "1",
        "--save_strategy",
        "no",
        "--output_dir",
        str(out),
        "--rollout",
        rollout,
        *extra,
    ]
    start = time.perf_counter()
    log = open(out.with_suffix(".log"), "w")  # noqa: SIM115 - closed below, after the child ends
    child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    deadline = start + timeout
    while True:
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            child.kill()
            os.wait4(child.pid, 0)
            log.close()
            raise RuntimeError(f"{rollout} run passed {timeout:.0f} s; its log: {out.with_suffix('.log')}")
        time.sleep(0.5)
    log.close()
    if os.waitstatus_to_exitcode(status) != 0:
        tail = out.with_suffix(".log").read_text()[-2000:]
        raise RuntimeError(f"{shlex.join(command)} failed:\n{tail}")
    rows = [json.loads(line) for line in metrics.read_text().splitlines() if '"time/step"' in line]
    timed = rows[1:] or rows
    phases = sorted({k for row in timed for k in row if k.startswith("time/")})
    return {
        "wall_seconds": round(time.perf_counter() - start, 1),
        "steps_timed": len(timed),
        "median": {k[len("time/") :]: _median([row.get(k) for row in timed]) for k in phases},
        "completion_mean_length": _median([row.get("completions/mean_length") for row in timed]),
        "peak_rss_gb": round(usage.ru_maxrss * 1024 / 1e9, 2),
        "steps": [
            {k: row.get(k) for k in ("time/step", "time/generation", "completions/mean_length")}
            for row in rows
        ],
    }


def training(args) -> dict:
    extra = shlex.split(args.recipe_args)
    runs: dict[str, list[dict]] = {r: [] for r in ROLLOUTS}
    with tempfile.TemporaryDirectory(prefix="bench_rollout_") as tmp:
        for index in range(args.rounds):
            order = ROLLOUTS if index % 2 == 0 else ROLLOUTS[::-1]
            for rollout in order:
                out = Path(tmp) / f"{rollout}_{index}"
                out.mkdir()
                runs[rollout].append(train_once(rollout, args.steps, out, extra, args.timeout))
                runs[rollout][-1]["load_after"] = round(os.getloadavg()[0], 2)
    summary = {}
    for rollout, done in runs.items():
        keys = sorted({k for run in done for k in run["median"]})
        summary[rollout] = {
            "median": {k: _median([run["median"].get(k) for run in done]) for k in keys},
            "peak_rss_gb": max(run["peak_rss_gb"] for run in done),
            "completion_mean_length": _median([run["completion_mean_length"] for run in done]),
        }
    ratios = {}
    for phase in ("step", "generation"):
        base, engine = summary["trl"]["median"].get(phase), summary["decode"]["median"].get(phase)
        ratios[f"{phase}_engine_over_default"] = round(engine / base, 3) if base and engine else None
    base = summary["trl"]["median"].get("generation_tokens_per_second")
    engine = summary["decode"]["median"].get("generation_tokens_per_second")
    ratios["generation_tokens_per_second_engine_over_default"] = round(engine / base, 3) if base else None
    return {"summary": summary, "ratios": ratios, "runs": runs, "recipe_args": args.recipe_args}


def matmul_rate(threads: int, size: int = 2048, reps: int = 5) -> float:
    """This machine's fp32 GEMM rate at ``threads`` (GFLOP/s, best of ``reps`` square products)."""
    import torch

    torch.set_num_threads(threads)
    a, b = torch.randn(size, size), torch.randn(size, size)
    best = float("inf")
    for _ in range(reps + 1):
        start = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best / 1e9


def compute_bound(config, rows: int, prompt_tokens: int, new_tokens: int, gflops: float) -> dict:
    """Tokens/s a decode step of ``rows`` sequences cannot beat on this machine's matmul rate.

    A generated token costs ``2 × P`` FLOPs in the weight matmuls (``P``: the decoder's linear
    weights plus the LM head; the embedding lookup is free) and ``4 × layers × heads × head_dim × c``
    in attention (scores and weighted values over a context of ``c`` tokens; ``c`` averages
    ``prompt + new / 2`` over a completion). At ``gflops`` (a large square fp32 GEMM: no matmul of
    the step runs faster) the bound is ``gflops / FLOPs per token``. It is an upper bound: the
    step's matmuls have only ``rows`` rows (slower than a square GEMM), and its norms, rotary
    embedding, softmax and sampling cost time too.
    """
    h, layers = config.hidden_size, config.num_hidden_layers
    heads, kv = config.num_attention_heads, config.num_key_value_heads
    d = h // heads
    per_layer = h * (heads + 2 * kv) * d + heads * d * h + 3 * h * config.intermediate_size
    weights = layers * per_layer + h * config.vocab_size
    context = prompt_tokens + new_tokens / 2
    flops = 2 * weights + 4 * layers * heads * d * context
    return {
        "linear_weights": weights,
        "flops_per_token": flops,
        "mean_context": context,
        "matmul_gflops": round(gflops, 1),
        "tokens_per_second_bound": round(gflops * 1e9 / flops, 1),
        "rows": rows,
    }


def evaluation(args) -> dict:
    import torch

    from faithgrpo.eval.generation.backends import generate_completions
    from faithgrpo.eval.generation.checkpoints import load_checkpoint
    from faithgrpo.eval.generation.settings import SamplingSettings, prompt_ids
    from faithgrpo.eval.report.adapters import task_rows

    model, tokenizer = load_checkpoint("embedded", dtype=torch.float32, device="cpu")
    result = {}
    workloads = {
        "g8": (16, 8, 224, 16, ("generate", "decode")),
        "g32": (1, 32, 384, 32, ("generate", "decode") if args.generate_at_32 else ("decode",)),
    }
    for name, (prompts, g, budget, batch, engines) in workloads.items():
        rows = task_rows("causal_graph", prompts, args.seed)
        texts = [row["prompt"] for row in rows]
        settings = SamplingSettings(
            num_samples=g, temperature=1.0, top_p=1.0, max_new_tokens=budget, seed=args.seed, batch_size=batch,
            threads=args.threads,
        )  # fmt: skip
        runs = {}
        for engine in engines:
            _, stats = generate_completions(model, tokenizer, texts, settings, progress=False, engine=engine)
            runs[engine] = {**stats.to_dict(), "load_after": round(os.getloadavg()[0], 2)}
        entry = {"prompts": prompts, "samples": g, "max_new_tokens": budget, "batch": batch, "runs": runs}
        if name == "g32":
            stats = runs["decode"]
            prompt_tokens = len(prompt_ids(tokenizer, texts[0]))
            mean_new = stats["new_tokens"] / stats["completions"]
            bound = compute_bound(model.config, batch, prompt_tokens, mean_new, matmul_rate(args.threads))
            bound["engine_fraction"] = round(stats["tokens_per_second"] / bound["tokens_per_second_bound"], 3)
            entry["compute_bound"] = bound
        result[name] = entry
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--steps", type=int, default=4, help="GRPO steps per training run (the first is untimed)"
    )
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds of both rollouts")
    parser.add_argument("--recipe_args", default="", help="further recipe flags for every training run")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per training run")
    parser.add_argument("--threads", type=int, default=2, help="torch threads of the evaluation runs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-training", action="store_true")
    parser.add_argument("--skip-eval", action="store_true")
    parser.add_argument("--generate-at-32", action="store_true", help="also model.generate at G = 32")
    args = parser.parse_args()

    started = time.perf_counter()
    out: dict = {"settings": vars(args), "cpu_count": os.cpu_count(), "load_before": os.getloadavg()[0]}
    if not args.skip_training:
        out["training"] = training(args)
    if not args.skip_eval:
        out["evaluation"] = evaluation(args)
    out["load_after"] = os.getloadavg()[0]
    out["wall_seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
