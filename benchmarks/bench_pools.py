#!/usr/bin/env python
"""Pool sampling throughput: questions per decode call and decode slots, interleaved in one process.

Every arm samples real pools (G completions per question) of the same family with the same
settings, in rounds (arm A on the next questions, then B, ...), so machine load and question
difficulty spread over the arms; it prints JSON with each arm's tokens, seconds and tokens/s.
Pools land in ``--pools``: pointed at a selection run's store, the measured pools are kept (the
grouping is provenance, not part of a pool's key).

    python benchmarks/bench_pools.py --adapter recipes/results/selection/sft_adapter \\
        --sft-config recipes/configs/sft_selection_cpu.yaml --arms 1x32,4x32,4x64 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import platform


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--family", default="causal_graph")
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--adapter", default=None)
    parser.add_argument("--sft-config", default=None)
    parser.add_argument("--pools", default="runs/bench_pools")
    parser.add_argument("--policy", default="sft")
    parser.add_argument("--arms", default="1x32,4x32,4x64", help="QUESTIONSxSLOTS per arm, comma-separated")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--samples", type=int, default=32)
    parser.add_argument("--max-new-tokens", type=int, default=320)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    from faithgrpo.eval.generation.cache import weights_fingerprint
    from faithgrpo.eval.generation.checkpoints import load_checkpoint
    from faithgrpo.eval.selection.command import SelectConfig, open_store, sft_inputs
    from faithgrpo.eval.selection.families import build_questions, user_text
    from faithgrpo.eval.selection.pools import fill_pools, pool_key, weights_content

    arms = [tuple(int(x) for x in a.split("x")) for a in args.arms.split(",")]
    config = SelectConfig(
        family=args.family, pools=args.pools, policy=args.policy, model=args.model, adapter=args.adapter,
        sft_config=args.sft_config, samples=args.samples, max_new_tokens=args.max_new_tokens, seed=args.seed,
        threads=args.threads, questions=64 if args.family != "clear" else 204,
    )  # fmt: skip
    holdout, system_prompt = sft_inputs(args.sft_config)
    questions, _ = build_questions(args.family, 64, 39, holdout=holdout, system_prompt=system_prompt)
    weights = weights_content(weights_fingerprint(args.model, args.adapter))
    store, _ = open_store(config, weights)
    items = [(q.id, q.prompt, user_text(q.prompt)) for q in questions]
    settings = config.pool_settings()
    todo = [it for it in items if store.get(pool_key(weights, it[1], settings)) is None]
    loaded = load_checkpoint(args.model, args.adapter)
    results = {
        f"{g}x{s}": {"tokens": 0, "seconds": 0.0, "scoring_seconds": 0.0, "questions": 0} for g, s in arms
    }
    for _ in range(args.rounds):
        for group, slots in arms:
            chunk, todo = todo[:group], todo[group:]
            if not chunk:
                break
            pools = fill_pools(
                store, chunk, weights, settings, lambda: loaded, threads=args.threads, group=group, slots=slots,
                log=lambda line: None,
            )  # fmt: skip
            arm = results[f"{group}x{slots}"]
            arm["seconds"] += sum(p.provenance["generation_seconds"] for p in pools)
            arm["scoring_seconds"] += sum(p.provenance["scoring_seconds"] for p in pools)
            arm["tokens"] += sum(sum(p.num_tokens) for p in pools)
            arm["questions"] += len(chunk)
    for arm in results.values():
        arm["tokens_per_second"] = arm["tokens"] / arm["seconds"] if arm["seconds"] else None
    print(json.dumps({"machine": platform.platform(), "family": args.family, "arms": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
