"""Per-trace CALVER scoring latency on one CPU thread (issue 3, Speed).

Builds random problems of every query kind on CLEAR-size graphs (4-9 nodes, single-letter names)
and on 100-node graphs (``V0..V99``), writes a full-marks six-slot trace for each (answers from the
graph predicates in :mod:`faithgrpo.tasks.criteria`) plus a corrupted variant (a wrong RESULT and
answer, which takes the failing paths), and times :func:`faithgrpo.rewards.calver.score_trace` per
trace. Prints one JSON object with, per graph size and problem form, p50/p99 latency in
milliseconds (wall clock and thread CPU time) and traces per second.

Problem forms: ``prepared`` passes a :func:`~faithgrpo.rewards.calver.prepare_problem` result (what
:func:`~faithgrpo.rewards.calver.calver_reward` does for the G completions of one prompt; JSON
problem strings are also cached across calls); ``raw`` passes the problem dict, so every call also
strips answer fields and validates graph, query and CPTs.

Targets: median ≤ 1 ms on 4-9 node graphs, ≤ 10 ms on 100-node graphs.

The machine may be shared: run ``--rounds`` passes and read the median; thread CPU time is less
sensitive to other processes than wall time.

Usage:
    python benchmarks/bench_calver.py [--problems 60] [--rounds 5] [--seed 0]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one CPU thread (numpy is used for the ATE)

import argparse  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

from faithgrpo.rewards.calver import prepare_problem, score_trace  # noqa: E402
from faithgrpo.tasks import criteria as C  # noqa: E402
from faithgrpo.tasks.graph import CausalGraph  # noqa: E402
from faithgrpo.tasks.queries import QUERY_KINDS, format_query  # noqa: E402

LETTERS = "BCDEFGHJKLMNOPQRSTUVWXYZ"  # no A or I: those read as English words in prose


def random_graph(n: int, degree: float, rng: random.Random, kind: str, names: list[str]) -> CausalGraph:
    """A random graph over ``names`` in a random topological order; DG adds back edges, ADMG bidirected ones."""
    order = names[:]
    rng.shuffle(order)
    p = min(1.0, degree / max(n - 1, 1))
    directed = {(order[i], order[j]) for i in range(n) for j in range(i + 1, n) if rng.random() < p}
    bidirected: set[tuple[str, str]] = set()
    if kind == "DG":
        for _ in range(max(1, n // 4)):
            i, j = sorted(rng.sample(range(n), 2))
            directed.add((order[j], order[i]))
    if kind == "ADMG":
        for _ in range(max(1, n // 4)):
            a, b = rng.sample(order, 2)
            bidirected.add((a, b))
    return CausalGraph(kind, tuple(names), frozenset(directed), frozenset(bidirected)).validate()


def random_cpts(g: CausalGraph, rng: random.Random) -> dict[str, Any]:
    cpts = {}
    for v in g.nodes:
        parents = sorted(g.parents(v))
        keys = (
            [",".join(format(i, f"0{len(parents)}b")) for i in range(2 ** len(parents))] if parents else [""]
        )
        cpts[v] = {"parents": parents, "p1": {k: round(rng.uniform(0.1, 0.9), 3) for k in keys}}
    return cpts


def derivation_for(g: CausalGraph, query: dict, answer: str) -> list[str]:
    """Two derivation lines naming only graph nodes: a few edges near the query, and the conclusion."""
    roles = [query[r] for r in ("treatment", "outcome", "x", "y") if isinstance(query.get(r), str)]
    near = [f"{a} -> {b}" for a, b in sorted(g.directed) if a in roles or b in roles][:4]
    return [
        ("edges at the query nodes: " + "; ".join(near)) if near else "the query nodes have no edges",
        f"so the answer is {answer}",
    ]


def pick_pair(g: CausalGraph, kind_name: str, rng: random.Random) -> tuple[str, str]:
    """A random ordered pair of distinct nodes; for mediator queries one with a directed path of length >= 2,
    for separation queries a non-adjacent one, when such pairs exist."""
    pairs = [(a, b) for a in g.nodes for b in g.nodes if a != b]
    rng.shuffle(pairs)
    adjacent = {frozenset(e) for e in g.directed | g.bidirected}
    for a, b in pairs:
        if kind_name == "mediator" and not C.mediators(g, a, b):
            continue
        if kind_name in ("dsep_set", "msep_set") and frozenset((a, b)) in adjacent:
            continue
        return a, b
    return pairs[0]


def make_case(kind_name: str, n: int, rng: random.Random) -> tuple[dict, str, str] | None:
    """(problem, full-marks trace, corrupted trace) for one random problem of ``kind_name``, or None."""
    names = list(LETTERS[:n]) if n <= len(LETTERS) else [f"V{i}" for i in range(n)]
    graph_kind = {"cycle": "DG", "msep_set": "ADMG"}.get(kind_name, "DAG")
    if kind_name == "frontdoor_set":
        graph_kind = rng.choice(["DAG", "ADMG"])
    g = random_graph(n, 2.0 if n < 20 else 3.0, rng, graph_kind, names)
    kind = QUERY_KINDS[kind_name]
    x, y = pick_pair(g, kind_name, rng)
    query: dict[str, Any] = {"kind": kind_name}
    cpts = None
    if kind_name in ("backdoor_set", "frontdoor_set", "directed_path", "mediator", "ate"):
        query.update(treatment=x, outcome=y)
    elif kind_name in ("dsep_set", "msep_set", "ci_test"):
        query.update(x=x, y=y)
    if kind_name == "backdoor_set":
        query["variant"] = rng.choice(["any", "minimal"])
        value = C.minimal_backdoor_set(g, x, y)
    elif kind_name == "frontdoor_set":
        value = next(iter(kind.valid_answers(g, query, limit=1, max_checks=512)), None)
    elif kind_name in ("dsep_set", "msep_set"):
        value = C.minimal_m_separator(g, x, y)
    elif kind_name == "ci_test":
        given = rng.sample([v for v in g.nodes if v not in (x, y)], min(2, n - 2))
        query["given"] = given
        value = C.m_separated(g, x, y, given)
    elif kind_name == "directed_path":
        value = C.has_directed_path(g, x, y)
    elif kind_name == "mediator":
        found = sorted(C.mediators(g, x, y))
        value = found[0] if found else None
    elif kind_name == "cycle":
        value = C.find_directed_cycle(g)
    elif kind_name == "ate":
        if n > 20:
            return None  # CPTs over 100 binary variables are out of scope
        cpts = random_cpts(g, rng)
        z = C.maximal_backdoor_set(g, x, y)
        if z is None:
            return None
        psi = C.interventional_ate(cpts, x, y)
        query.update(threshold=round(psi - 0.1, 3), margin=0.05)
        value = (True, psi, z)
    if value is None:
        return None
    if kind_name == "ate":
        _, psi, z = value
        zs = QUERY_KINDS["backdoor_set"].format_answer(z)
        result, wrong = f"yes, ψ = {psi:.4f}, Z = {zs}", f"no, ψ = {psi:.4f}, Z = {zs}"
    else:
        result = kind.format_answer(value)
        wrong = {
            "set": "{" + x + "}",  # the treatment / x is never in a valid set
            "yes_no": "no" if value else "yes",
            "node": x,  # the treatment is not its own mediator
            "cycle": "B -> C -> B",
        }[kind.answer_type]
    problem: dict[str, Any] = {"graph": g.to_dict(), "query": query, "answer": result}
    if cpts is not None:
        problem["cpts"] = cpts

    def trace(res: str) -> str:
        lines = "\n".join(f"- {d}" for d in derivation_for(g, query, res))
        return (
            f"<think>\nGRAPH: {g.edge_text()}\nQUERY: {format_query(query)}\n"
            f"STRATEGY: {kind.strategies[0]}\nDERIVATION:\n{lines}\nRESULT: {res}\n</think>\n"
            f"<answer>{res}</answer>"
        )

    return problem, trace(result), trace(wrong)


def percentile(sorted_samples: list[float], q: float) -> float:
    return sorted_samples[min(len(sorted_samples) - 1, int(q * len(sorted_samples)))]


def bench(cases: list[tuple[str, dict, str, str]], rounds: int, prepared: bool) -> dict[str, Any]:
    work = []
    for kind, problem, good, bad in cases:
        p = prepare_problem(problem) if prepared else problem
        work += [(kind, p, good), (kind, p, bad)]
    for _, p, text in work:  # warm-up (regex compilation, caches of prepared problems)
        score_trace(text, p)
    wall: list[float] = []
    cpu: list[float] = []
    per_kind: dict[str, list[float]] = {}
    rates = []
    for _ in range(rounds):
        start_round = time.perf_counter()
        for kind, p, text in work:
            t0, c0 = time.perf_counter(), time.thread_time()
            score_trace(text, p)
            wall.append((time.perf_counter() - t0) * 1e3)
            cpu.append((time.thread_time() - c0) * 1e3)
            per_kind.setdefault(kind, []).append(cpu[-1])
        rates.append(len(work) / (time.perf_counter() - start_round))
    wall.sort()
    cpu.sort()
    return {
        "traces": len(work),
        "rounds": rounds,
        "p50_ms": round(statistics.median(wall), 4),
        "p99_ms": round(percentile(wall, 0.99), 4),
        "cpu_p50_ms": round(statistics.median(cpu), 4),
        "cpu_p99_ms": round(percentile(cpu, 0.99), 4),
        "traces_per_s": round(statistics.median(rates), 1),
        "cpu_p50_ms_by_kind": {k: round(statistics.median(v), 4) for k, v in sorted(per_kind.items())},
    }


KINDS = ("backdoor_set", "frontdoor_set", "dsep_set", "ci_test", "directed_path", "mediator", "cycle",
         "msep_set", "ate")  # fmt: skip


def build_cases(sizes: tuple[int, int], count: int, rng: random.Random) -> tuple[list, dict]:
    cases, by_kind = [], dict.fromkeys(KINDS, 0)
    attempts = 0
    while len(cases) < count and attempts < 50 * count:
        attempts += 1
        kind = KINDS[len(cases) % len(KINDS)]
        if kind == "ate" and sizes[0] > 20:
            kind = "backdoor_set"  # CPTs over 100 binary variables are out of scope
        case = make_case(kind, rng.randint(*sizes), rng)
        if case is None:
            continue
        problem, good, bad = case
        s_good, s_bad = score_trace(good, problem), score_trace(bad, problem)
        if s_good.total != 6 or s_bad.total == 6:
            raise AssertionError(f"benchmark trace for {kind} scores {s_good.total}: {s_good.reasons}")
        cases.append((kind, *case))
        by_kind[kind] += 1
    return cases, by_kind


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=int, default=60, help="problems per graph size")
    ap.add_argument("--rounds", type=int, default=5, help="timed passes over all traces")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    out: dict[str, Any] = {"targets_ms": {"clear_4_9": 1.0, "n100": 10.0}}
    for label, sizes in (("clear_4_9", (4, 9)), ("n100", (100, 100))):
        cases, by_kind = build_cases(sizes, args.problems, rng)
        out[label] = {
            "nodes": list(sizes),
            "problems_by_kind": by_kind,
            "prepared": bench(cases, args.rounds, prepared=True),
            "raw": bench(cases, args.rounds, prepared=False),
        }
        out[label]["meets_target"] = out[label]["prepared"]["p50_ms"] <= out["targets_ms"][label]
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
