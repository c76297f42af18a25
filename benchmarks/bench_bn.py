"""Per-trace CALVER latency on the published Bayesian networks of ``causal_bn`` (issue 29).

For every network: problems of every query kind it admits (``--per-kind`` each, edge-list and story
renderings alternating), a gold trace per problem (verified 6/6 before timing, else the benchmark
exits with status 2) and a corrupted one (a wrong RESULT and answer, verified at most 3/6). Each
problem is prepared once (:func:`~faithgrpo.rewards.calver.problem.prepare_problem`, what the reward does
for the G completions of a prompt) and every trace is scored ``--rounds`` times; per network the
JSON reports p50 and worst (max) per-trace wall time over the warm calls, the worst *first* call of
a fresh prepared problem (``cold_worst_ms``: the first completion of a group pays for the path
enumeration the rest reuse; ``cold_p50_ms`` its median), the traces' sizes and the largest
certificate (claims).

Targets (issue 29): p50 ≤ 5 ms and worst ≤ 50 ms per trace on the largest networks included.

Before timing a network, the heap built so far is collected and frozen (``gc.freeze``, as the
eval's scoring loop does): otherwise one full collection over every network loaded before lands in
a timed call (68 ms once on andes, against 9 ms when andes runs alone).

The machine may be shared: thread CPU time is reported next to wall time, and ``--rounds`` passes
smooth it. One thread (numpy's pools pinned).

Usage:
    python benchmarks/bench_bn.py [--networks default|all|alarm,andes] [--per-kind 3] [--rounds 5]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import re  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

from faithgrpo.rewards.calver.problem import prepare_problem  # noqa: E402
from faithgrpo.rewards.calver.reward import score_trace  # noqa: E402
from faithgrpo.rewards.trace import parse_trace  # noqa: E402
from faithgrpo.tasks.bayesnets.datasets import CausalBNConfig, admitted_kinds, make_bn_problem  # noqa: E402
from faithgrpo.tasks.bayesnets.networks import DEFAULT_NETWORKS, NETWORKS, load_network  # noqa: E402
from faithgrpo.tasks.certificates.gold import gold_trace  # noqa: E402
from faithgrpo.verifier.query_kinds import QUERY_KINDS  # noqa: E402

TARGETS_MS = {"p50": 5.0, "worst": 50.0}
_RESULT_RE = re.compile(r"^RESULT: .*$", re.MULTILINE)
_ANSWER_RE = re.compile(r"<answer>.*</answer>", re.DOTALL)


def corrupt(problem: dict, good: str) -> str:
    """The gold trace with a wrong RESULT and answer (the treatment / x is in no valid set, ...)."""
    q = problem["query"]
    kind = QUERY_KINDS[q["kind"]]
    t = parse_trace(good)
    x = q.get("treatment") or q.get("x")
    if kind.answer_type == "set":
        wrong = "{" + x + "}"
    elif kind.answer_type == "node":
        wrong = x
    else:  # yes/no and ate: the other decision
        word = (t.answer or "").split(",")[0].strip().lower()
        wrong = "no" if word.startswith("yes") else "yes"
    bad = _RESULT_RE.sub(lambda _: f"RESULT: {wrong}", good, count=1)
    return _ANSWER_RE.sub(lambda _: f"<answer>{wrong}</answer>", bad, count=1)


def cases(name: str, per_kind: int, seed: int) -> list[tuple[str, dict, str, str]]:
    out = []
    for kind in admitted_kinds(name):
        for i in range(per_kind):
            mode = ("supplied", "constructed")[i % 2]
            cfg = CausalBNConfig(networks=(name,), query_kinds=(kind,), modes=(mode,))
            problem, _, _ = make_bn_problem(cfg, random.Random(f"bench:{seed}:{name}:{kind}:{i}"))
            good = gold_trace(problem, i)
            out.append((kind, problem, good, corrupt(problem, good)))
    return out


def bench_network(name: str, per_kind: int, rounds: int, seed: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    work = cases(name, per_kind, seed)
    build_s = time.perf_counter() - t0
    # as the eval's scoring loop (eval.report.sections, frozen_heap): objects built so far are left out of
    # garbage collection, so a full collection over every network loaded before (tens of ms) does
    # not land in one timed call
    gc.collect()
    gc.freeze()
    wall: list[float] = []
    cpu: list[float] = []
    cold: list[float] = []
    by_kind: dict[str, list[float]] = {}
    failures = []
    claims, chars = [], []
    for kind, problem, good, bad in work:
        p = prepare_problem(problem)
        for label, text in (("gold", good), ("corrupted", bad)):
            c0 = time.perf_counter()
            s = score_trace(text, p)
            if label == "gold":
                cold.append((time.perf_counter() - c0) * 1e3)
                claims.append(s.claims)
                chars.append(len(text))
            if (label == "gold" and s.total != 6) or (label == "corrupted" and s.total > 3):
                failures.append({"kind": kind, "trace": label, "total": s.total, "reasons": s.reasons})
        for _ in range(rounds):
            for text in (good, bad):
                w0, c0 = time.perf_counter(), time.thread_time()
                score_trace(text, p)
                wall.append((time.perf_counter() - w0) * 1e3)
                cpu.append((time.thread_time() - c0) * 1e3)
                by_kind.setdefault(kind, []).append(wall[-1])
    g = load_network(name).graph
    out = {
        "nodes": len(g.nodes),
        "edges": len(g.directed),
        "kinds": sorted(by_kind),
        "problems": len(work),
        "traces_timed": len(wall),
        "p50_ms": round(statistics.median(wall), 3),
        "worst_ms": round(max(wall), 3),
        "cpu_p50_ms": round(statistics.median(cpu), 3),
        "cpu_worst_ms": round(max(cpu), 3),
        "cold_p50_ms": round(statistics.median(cold), 3),
        "cold_worst_ms": round(max(cold), 3),
        "p50_ms_by_kind": {k: round(statistics.median(v), 3) for k, v in sorted(by_kind.items())},
        "worst_ms_by_kind": {k: round(max(v), 3) for k, v in sorted(by_kind.items())},
        "gold_trace_chars_max": max(chars),
        "claims_max": max(claims),
        "build_s": round(build_s, 2),
        "failures": failures,
    }
    out["meets_target"] = out["p50_ms"] <= TARGETS_MS["p50"] and out["worst_ms"] <= TARGETS_MS["worst"]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--networks", default="default", help="default, all, or comma-separated names")
    ap.add_argument("--per-kind", type=int, default=3, help="problems per admitted query kind")
    ap.add_argument("--rounds", type=int, default=5, help="timed passes over each problem's traces")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.networks == "default":
        names = list(DEFAULT_NETWORKS)
    elif args.networks == "all":
        names = list(NETWORKS)
    else:
        names = [n.strip() for n in args.networks.split(",") if n.strip()]
        unknown = [n for n in names if n not in NETWORKS]
        if unknown:
            ap.error(f"unknown networks {unknown}; choose from {sorted(NETWORKS)}")
    out: dict[str, Any] = {"targets_ms": TARGETS_MS, "networks": {}}
    for name in names:
        out["networks"][name] = bench_network(name, args.per_kind, args.rounds, args.seed)
        print(f"{name}: done", file=sys.stderr, flush=True)
    out["all_meet_target"] = all(v["meets_target"] for v in out["networks"].values())
    print(json.dumps(out, indent=1))
    failed = {n: len(v["failures"]) for n, v in out["networks"].items() if v["failures"]}
    if failed:
        print(f"ERROR: traces that do not score as labelled: {failed}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
