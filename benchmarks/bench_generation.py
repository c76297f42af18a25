"""Evaluation generation tokens/s: ``model.generate`` (old path) vs the decode loop (issue 16, item 3).

Runs `faithgrpo.eval.generation.backends.generate_completions` with ``engine="generate"`` and
``engine="decode"`` side by side in one process, interleaved (the order alternates every round), at
equal settings: the README's small setting by default (the embedded SmolLM2-135M-Instruct, fp32,
8 causal-graph evaluation prompts with their chat template, G = 4 samples, at most 160 new tokens,
temperature 1.0, top-p 1.0, batch 16), then the same on the tiny in-process model
(`faithgrpo.testing.tiny_causal_lm`). Tokens/s counts the generated tokens (eos included) over the
wall time of the whole call (prefill, decoding, detokenising). The machine may be shared: absolute
figures move with the load, the ratio of interleaved rounds much less; the load average before and
after is reported.

Prints one JSON object.

Usage:
    python benchmarks/bench_generation.py [--prompts 8] [--samples 4] [--max-new-tokens 160] [--rounds 2]
    python benchmarks/bench_generation.py --skip-embedded     # the tiny model only (seconds)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

ENGINES = ("generate", "decode")
# A reference, not an engine: model.generate on one thread (SamplingSettings.threads = 1), next to
# both engines at --threads (default: torch's own count).
ONE_THREAD = "generate_1_thread"


def _round_trip(model, tokenizer, prompts, settings, variant) -> dict:
    from dataclasses import replace

    from faithgrpo.eval.generation.backends import generate_completions

    engine = "generate" if variant == ONE_THREAD else variant
    if variant == ONE_THREAD:
        settings = replace(settings, threads=1)
    records, stats = generate_completions(model, tokenizer, prompts, settings, progress=False, engine=engine)
    assert all(r.settings["engine"] == engine for r in records)
    return {"new_tokens": stats.new_tokens, "seconds": round(stats.seconds, 3)}


def compare(
    model, tokenizer, prompts, settings, rounds: int, one_thread: bool, reverse: bool = False
) -> dict:
    """``rounds`` interleaved runs of both engines; tokens/s per engine and the ratio decode / generate."""
    variants = (*ENGINES, ONE_THREAD) if one_thread else ENGINES
    runs: dict[str, list[dict]] = {v: [] for v in variants}
    ratios = []
    for index in range(rounds):
        order = variants if (index + reverse) % 2 == 0 else variants[::-1]
        this = {}
        for variant in order:
            this[variant] = _round_trip(model, tokenizer, prompts, settings, variant)
            this[variant]["load_after"] = round(os.getloadavg()[0], 2)
            runs[variant].append(this[variant])
        speed = {v: this[v]["new_tokens"] / this[v]["seconds"] for v in variants}
        ratios.append(speed["decode"] / speed["generate"])
    result = {}
    for engine in variants:
        tokens = sum(r["new_tokens"] for r in runs[engine])
        seconds = sum(r["seconds"] for r in runs[engine])
        result[engine] = {"tokens_per_second": round(tokens / seconds, 2), "runs": runs[engine]}
    result["ratio_per_round"] = [round(r, 3) for r in ratios]
    result["ratio_median"] = round(statistics.median(ratios), 3)
    result["ratio_of_totals"] = round(
        result["decode"]["tokens_per_second"] / result["generate"]["tokens_per_second"], 3
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=160)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds on the embedded model")
    parser.add_argument("--tiny-rounds", type=int, default=4)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    parser.add_argument("--task", default="causal_graph")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-embedded", action="store_true")
    parser.add_argument(
        "--start-reversed", action="store_true", help="begin with the reversed order (decode first)"
    )
    parser.add_argument(
        "--no-one-thread-reference",
        dest="one_thread",
        action="store_false",
        help="skip the reference run of generate on one thread",
    )
    args = parser.parse_args()

    import torch

    from faithgrpo.eval.generation.checkpoints import load_checkpoint
    from faithgrpo.eval.generation.settings import SamplingSettings
    from faithgrpo.eval.report.adapters import task_rows
    from faithgrpo.testing import tiny_causal_lm

    if args.threads:
        torch.set_num_threads(args.threads)
    settings = SamplingSettings(
        num_samples=args.samples,
        temperature=args.temperature,
        top_p=args.top_p,
        max_new_tokens=args.max_new_tokens,
        seed=args.seed,
        batch_size=args.batch_size,
        threads=torch.get_num_threads(),
    )
    prompts = [row["prompt"] for row in task_rows(args.task, args.prompts, args.seed)]
    started = time.perf_counter()
    out: dict = {
        "settings": {**vars(args), "torch_threads": torch.get_num_threads()},
        "cpu_count": os.cpu_count(),
        "load_before": [round(x, 2) for x in os.getloadavg()],
    }
    if not args.skip_embedded:
        model, tokenizer = load_checkpoint("embedded", device="cpu")
        out["embedded"] = {
            "model": "embedded (SmolLM2-135M-Instruct)",
            "dtype": str(model.dtype),
            **compare(model, tokenizer, prompts, settings, args.rounds, args.one_thread, args.start_reversed),
        }
        del model
    model, tokenizer = tiny_causal_lm("llama")
    out["tiny"] = {
        "model": "tiny_causal_lm('llama')",
        **compare(
            model, tokenizer, prompts, settings, args.tiny_rounds, args.one_thread, args.start_reversed
        ),
    }
    out["load_after"] = [round(x, 2) for x in os.getloadavg()]
    out["wall_seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
