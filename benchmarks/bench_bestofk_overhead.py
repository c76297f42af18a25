"""CALVER best-of-K overhead: scoring and selection time ÷ generation time, at K = 8 (issue 16).

The CALVER paper reports that scoring K sampled traces and keeping the best one adds about 7 % to
the time it takes to sample them. This benchmark measures the same ratio here:

1. Draws ``--prompts`` causal problems of CLEAR size (4-9 node graphs, every query kind;
   `faithgrpo.tasks.causal.datasets.make_problem`) and builds their six-slot chat prompts
   (`faithgrpo.tasks.causal.prompts.chat_prompt`).
2. **Generation.** Samples K completions per prompt with
   `faithgrpo.eval.generation.backends.generate_completions` (transformers backend) on ``--device``, after
   one untimed warm-up call: generation seconds, new tokens, tokens/s.
3. **Scoring the samples.** Times CALVER on all N·K completions plus the selection, as best-of-K
   does it: `prepare_problem` once per problem, `score_trace` on every completion (no
   de-duplication: the worst case), `best_of_k_index`. ``overhead = scoring_s / generation_s``.
4. **Scoring gold traces.** An untrained model writes short garbage that CALVER rejects at the first
   slot, which flatters step 3. So the same is timed on N·K gold six-slot traces
   (`faithgrpo.tasks.certificates.gold.gold_trace`, K wordings/answers per problem, each passing all six checks:
   graph parsing, derivation certificate, result and answer predicates): the realistic worst case
   of a policy that writes full traces. ``gold_overhead = gold_scoring_s / generation_s`` (the same
   generation time as step 3).

Prints one JSON object. Target: overhead (gold) <= 0.07, the paper's figure. The generation here is
plain ``model.generate`` (no vLLM), so it is slower than the paper's sampler and the ratio is lower
for it; ``scoring_ms_per_completion`` is the figure that does not depend on the sampler.

Usage:
    python benchmarks/bench_bestofk_overhead.py                       # embedded SmolLM2-135M, cuda if available
    python benchmarks/bench_bestofk_overhead.py --prompts 16 --k 8 --max-new-tokens 512 --batch-size 64
    python benchmarks/bench_bestofk_overhead.py --tiny --prompts 4 --max-new-tokens 32   # CPU smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import time

import torch

from faithgrpo.eval.generation.backends import generate_completions
from faithgrpo.eval.generation.checkpoints import load_checkpoint
from faithgrpo.eval.generation.settings import SamplingSettings
from faithgrpo.rewards.calver.problem import prepare_problem
from faithgrpo.rewards.calver.reward import score_trace
from faithgrpo.rewards.selection import best_of_k_index
from faithgrpo.tasks.causal.datasets import CausalGraphConfig, make_problem
from faithgrpo.tasks.causal.prompts import chat_prompt
from faithgrpo.tasks.certificates.gold import gold_trace

PAPER_OVERHEAD = 0.07


def draw_problems(n: int, seed: int) -> list[dict]:
    """``n`` supplied-graph causal problems of CLEAR size: 4-9 nodes, every family and query kind."""
    config = CausalGraphConfig(size=n, seed=seed, min_nodes=4, max_nodes=9)
    config.validate()
    rng = random.Random(seed)
    return [make_problem(config, rng)[0] for _ in range(n)]


def score_best_of_k(problems: list[dict], candidates: list[list[str]]) -> tuple[float, list[int], list[int]]:
    """Seconds to score every candidate and select one per problem; the selected indices; all scores."""
    start = time.perf_counter()
    chosen, totals = [], []
    for problem, texts in zip(problems, candidates):
        prepared = prepare_problem(problem)
        scores = [score_trace(text, prepared).total for text in texts]
        chosen.append(best_of_k_index(scores))
        totals += scores
    return time.perf_counter() - start, chosen, totals


def load_model(args, device: torch.device, dtype: torch.dtype):
    if args.tiny:
        from faithgrpo.testing import tiny_causal_lm

        model, tokenizer = tiny_causal_lm("llama", seed=0, hidden_size=128, num_layers=4)
        return model.to(device=device, dtype=dtype).eval(), tokenizer, "tiny-random-llama"
    model, tokenizer = load_checkpoint(args.model, dtype=dtype, device=str(device))
    return model, tokenizer, args.model


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="embedded", help="'embedded', a checkpoint dir or a hub id")
    parser.add_argument("--tiny", action="store_true", help="a tiny random Llama instead (smoke run)")
    parser.add_argument("--device", default="auto", help="'auto' (cuda if available), 'cuda', 'cpu', ...")
    parser.add_argument(
        "--dtype", default=None, help="model dtype (default: bfloat16 on cuda, float32 elsewhere)"
    )
    parser.add_argument("--prompts", type=int, default=16, help="N, causal problems")
    parser.add_argument("--k", type=int, default=8, help="K, completions per problem")
    parser.add_argument("--max-new-tokens", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=64, help="sequences per generate call")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    device = torch.device(
        ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    )
    dtype = getattr(torch, args.dtype or ("bfloat16" if device.type == "cuda" else "float32"))
    problems = draw_problems(args.prompts, args.seed)
    prompts = [chat_prompt(p) for p in problems]

    model, tokenizer, name = load_model(args, device, dtype)
    settings = SamplingSettings(
        num_samples=args.k,
        temperature=args.temperature,
        max_new_tokens=args.max_new_tokens,
        seed=args.seed,
        batch_size=args.batch_size,
    )
    # Untimed warm-up: CUDA context, kernels and allocator pay their one-off costs here.
    warm = SamplingSettings(num_samples=2, max_new_tokens=8, seed=args.seed, batch_size=2)
    generate_completions(model, tokenizer, prompts[:1], warm, progress=False)
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    records, stats = generate_completions(model, tokenizer, prompts, settings, progress=False)
    if device.type == "cuda":
        torch.cuda.synchronize()
    generation_s = time.perf_counter() - start
    samples = [r.completions for r in records]
    lengths = [n for r in records for n in r.num_tokens]

    golds = [[gold_trace(p, rng=1000 * i + j) for j in range(args.k)] for i, p in enumerate(problems)]
    # Interleaved, fastest of three: the machine may be shared.
    sample_runs, gold_runs = [], []
    for _ in range(3):
        sample_s, sample_choice, sample_scores = score_best_of_k(problems, samples)
        gold_s, _, gold_scores = score_best_of_k(problems, golds)
        sample_runs.append(sample_s)
        gold_runs.append(gold_s)
    sample_s, gold_s = min(sample_runs), min(gold_runs)
    n = args.prompts * args.k
    if device.type == "cuda":
        device_name = torch.cuda.get_device_name(device)
    else:
        device_name = platform.processor() or platform.machine()
    gold_chars = [len(t) for group in golds for t in group]

    print(
        json.dumps(
            {
                "benchmark": "calver_best_of_k_overhead",
                "model": name,
                "device": str(device),
                "device_name": device_name,
                "dtype": str(dtype).removeprefix("torch."),
                "torch": torch.__version__,
                "transformers": __import__("transformers").__version__,
                "cuda": torch.version.cuda,
                "threads": torch.get_num_threads(),
                "prompts": args.prompts,
                "k": args.k,
                "completions": n,
                "generation": {
                    "backend": "transformers",
                    "seconds": round(generation_s, 3),
                    "new_tokens": stats.new_tokens,
                    "tokens_per_s": round(stats.new_tokens / generation_s, 1),
                    "mean_completion_tokens": round(statistics.mean(lengths), 1) if lengths else 0,
                    "max_new_tokens": args.max_new_tokens,
                    "batch_size": args.batch_size,
                },
                "samples": {
                    "scoring_seconds": round(sample_s, 4),
                    "scoring_ms_per_completion": round(1000 * sample_s / n, 3),
                    "overhead": round(sample_s / generation_s, 5),
                    "mean_score": round(statistics.mean(sample_scores), 3),
                    "chosen_score_mean": round(
                        statistics.mean(sample_scores[i * args.k + c] for i, c in enumerate(sample_choice)), 3
                    ),
                    "runs_s": [round(t, 4) for t in sample_runs],
                },
                "gold": {
                    "scoring_seconds": round(gold_s, 4),
                    "scoring_ms_per_completion": round(1000 * gold_s / n, 3),
                    "overhead": round(gold_s / generation_s, 5),
                    "mean_score": round(statistics.mean(gold_scores), 3),
                    "mean_chars": round(statistics.mean(gold_chars), 1),
                    "runs_s": [round(t, 4) for t in gold_runs],
                },
                "overhead": round(sample_s / generation_s, 5),
                "gold_overhead": round(gold_s / generation_s, 5),
                "paper_overhead": PAPER_OVERHEAD,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
