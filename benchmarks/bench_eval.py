"""Evaluator throughput (issue 6, Speed): metrics from cached completions, and generation tokens/s.

1. **CoT-Pass@K from a cache.** Draws causal problems of CLEAR size (4-9 nodes, every query kind)
   and Knights & Knaves puzzles, writes G completions per prompt to a JSONL cache (a mix of gold
   traces, answer-only correct completions and wrong answers, plus an all-gold variant where every
   completion needs the full symbolic CoT check), then times what ``faithgrpo eval`` does on a
   cache hit: read and validate the cache, grade every answer, verify the CoT of the correct ones
   (all six CALVER checks / the K&K truth table) and build the Pass@K / CoT-Pass@K table with
   bootstrap intervals. Target: ≥ 5,000 completions/s on one CPU thread. Each round scores problems
   of its own, once, as one ``faithgrpo eval`` run does (the scorers' per-problem memos help only
   within a prompt's G completions); ``*_repeat`` is a second pass over the same problems.
2. **Generation.** Tokens per second of `faithgrpo.eval.generation.backends.generate_completions` on the tiny
   in-process model (and the embedded SmolLM2-135M-Instruct with ``--embedded``), on ``--device``
   (default cpu; ``--skip-metrics`` runs this part alone).

Prints one JSON object. The machine may be shared: ``--rounds`` passes (default 5), median and range reported.

Usage:
    python benchmarks/bench_eval.py [--prompts 64] [--samples 16] [--rounds 5] [--embedded]
    python benchmarks/bench_eval.py --skip-metrics --embedded --device cuda   # generation on a GPU
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one CPU thread

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from faithgrpo.eval.generation.backends import generate_completions  # noqa: E402
from faithgrpo.eval.generation.cache import CompletionRecord, read_completions, write_completions  # noqa: E402
from faithgrpo.eval.generation.settings import SamplingSettings  # noqa: E402
from faithgrpo.eval.metrics.passk import pass_at_k_table  # noqa: E402
from faithgrpo.eval.report.sections import count_task  # noqa: E402
from faithgrpo.text import extract_answer  # noqa: E402


def causal_rows(n: int, seed: int) -> list[dict]:
    from faithgrpo.tasks.causal.datasets import CausalGraphConfig, CausalGraphDataset
    from faithgrpo.tasks.mix import to_trl_row

    dataset = CausalGraphDataset(CausalGraphConfig(size=n, seed=seed, min_nodes=4, max_nodes=9))
    return [{**to_trl_row(dataset[i]), "id": f"causal_graph-{i}"} for i in range(n)]


def kk_rows(n: int, seed: int) -> list[dict]:
    from faithgrpo.eval.report.adapters import task_rows

    return task_rows("knights_knaves", n, seed)


def completions_for(row: dict, g: int, all_gold: bool) -> list[str]:
    from faithgrpo.tasks.certificates.gold import gold_trace
    from faithgrpo.tasks.knights_knaves.gold import gold_kk_trace

    out = []
    for j in range(g):
        if row["task"] == "knights_knaves":
            gold = gold_kk_trace(json.loads(row["entry"])["metadata"], rng=j)
        else:
            gold = gold_trace(row["problem"], rng=j)
        if all_gold or j % 4 in (0, 1):
            out.append(gold)
        elif j % 4 == 2:
            out.append(f"<think>It is obvious.</think>\n<answer>{extract_answer(gold)}</answer>")
        else:
            out.append("<think>Guessing.</think>\n<answer>{Q9}</answer>")
    return out


def time_pass(rows: list[dict], path: Path, ks: list[int]) -> tuple[float, float, list]:
    """Wall and CPU seconds of one pass (read cache -> grade -> verify CoT -> Pass@K table)."""
    by_id = {r["id"]: r for r in rows}
    wall, cpu = time.perf_counter(), time.thread_time()
    records = read_completions(path)
    counts = count_task([by_id[rec.id] for rec in records], records)  # faithgrpo eval's loop
    table = pass_at_k_table(counts, ks, n_bootstrap=1000, seed=0)
    return time.perf_counter() - wall, time.thread_time() - cpu, [counts, table]


def time_metrics(rounds: list[tuple[list[dict], Path]], ks: list[int]) -> dict:
    """Median over rounds of one pass each, every round on problems of its own (a cold pass).

    The scorers memoise per problem, keyed by content, so the G completions of a prompt share its
    work; scoring the same problems again would reuse it. One ``faithgrpo eval`` run scores each
    completion once, so every round draws new problems; ``*_repeat`` times a second pass over the
    last round's, to show what the memos save.
    """
    walls, cpus = [], []
    for rows, path in rounds:
        wall, cpu, (counts, table) = time_pass(rows, path, ks)
        walls.append(wall)
        cpus.append(cpu)
    repeat_wall, repeat_cpu, _ = time_pass(*rounds[-1], ks)
    completions = sum(c.n for c in counts)
    wall, cpu = statistics.median(walls), statistics.median(cpus)
    return {
        "completions": completions,
        "seconds_wall": round(wall, 4),
        "seconds_cpu": round(cpu, 4),
        "completions_per_s_wall": round(completions / wall, 1),
        "completions_per_s_cpu": round(completions / cpu, 1),
        # the spread over rounds: on a shared VM one-thread speed moves by tens of percent between runs
        "completions_per_s_cpu_range": [round(completions / max(cpus), 1), round(completions / min(cpus), 1)],
        "completions_per_s_cpu_repeat": round(completions / repeat_cpu, 1),
        "completions_per_s_wall_repeat": round(completions / repeat_wall, 1),
        "answer_accuracy": round(sum(c.c for c in counts) / completions, 4),
        "cot_accuracy": round(sum(c.d for c in counts) / completions, 4),
        f"cot_pass@{ks[-1]}": table[ks[-1]]["cot_pass@k"].value,
    }


def bench_metrics(args) -> dict:
    ks = [k for k in (1, 2, 4, 8, 16, 32, 64) if k <= args.samples]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, all_gold in (("mixed", False), ("all_gold", True)):
            for task, make_rows in (("causal_graph", causal_rows), ("knights_knaves", kk_rows)):
                rounds = []
                for r in range(args.rounds):
                    subset = make_rows(args.prompts, args.seed + 1000 * r + (500 if all_gold else 0))
                    records = [
                        CompletionRecord(
                            row["id"],
                            row["prompt"],
                            completions_for(row, args.samples, all_gold),
                            [],
                            {"num_samples": args.samples},
                        )
                        for row in subset
                    ]
                    path = Path(tmp) / f"{task}_{label}_{r}.jsonl"
                    rounds.append((subset, write_completions(path, records)))
                results[f"{task}/{label}"] = time_metrics(rounds, ks)
    return results


def bench_generation(args) -> dict:
    from faithgrpo.testing import tiny_causal_lm

    prompts = [
        [{"role": "user", "content": f"Question {i}: which set blocks the backdoor path?"}] for i in range(4)
    ]
    settings = SamplingSettings(num_samples=4, max_new_tokens=args.max_new_tokens, batch_size=16, seed=0)
    models = {"tiny_llama": lambda: tiny_causal_lm("llama", seed=0)}
    if args.embedded:
        from faithgrpo.eval.generation.checkpoints import load_checkpoint

        models["embedded_smollm2_135m"] = lambda: load_checkpoint("embedded", device=args.device)
    results = {}
    for name, build in models.items():
        model, tokenizer = build()
        model.to(args.device)
        generate_completions(model, tokenizer, prompts[:1], settings, progress=False)  # warm-up
        rates = []
        for _ in range(args.rounds):
            _, stats = generate_completions(model, tokenizer, prompts, settings, progress=False)
            rates.append(stats.tokens_per_second)
        results[name] = {
            "tokens_per_s": round(statistics.median(rates), 1),
            "sequences_per_batch": settings.batch_size,
            "max_new_tokens": settings.max_new_tokens,
        }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=64, help="prompts per task")
    parser.add_argument("--samples", type=int, default=16, help="completions per prompt (G)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument(
        "--embedded", action="store_true", help="also time the embedded SmolLM2-135M-Instruct"
    )
    parser.add_argument("--skip-generation", action="store_true")
    parser.add_argument("--skip-metrics", action="store_true", help="time the generation only")
    parser.add_argument("--device", default="cpu", help="generation device: cpu (default), cuda, ...")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    out = {
        "benchmark": "bench_eval",
        "target_completions_per_s": 5000,
        "threads": 1,
        "prompts_per_task": args.prompts,
        "samples_per_prompt": args.samples,
    }
    if not args.skip_metrics:
        out["metrics_from_cache"] = bench_metrics(args)
    if not args.skip_generation:
        out["device"] = args.device
        if args.device.startswith("cuda"):
            out["device_name"] = torch.cuda.get_device_name(args.device)
        out["generation"] = bench_generation(args)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
