"""Latency of the causal graph core: parsing, predicates and grading, on small and 100-node graphs.

Prints one JSON object: for each (operation, graph size) the p50/p99 latency in microseconds and
calls per second, single thread. Targets (issue 3): a whole CALVER trace (parse + a few predicate
calls) in <= 1 ms on 4-9 node graphs and <= 10 ms on 100-node graphs.

Usage:
    python benchmarks/bench_graph.py [--repeats 200] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time

from faithgrpo.verifier import graphs as C
from faithgrpo.verifier.graphs.edges import parse_graph
from faithgrpo.verifier.graphs.model import CausalGraph
from faithgrpo.verifier.queries import grade_answer
from faithgrpo.verifier.query_kinds import QUERY_KINDS


def random_dag(n: int, degree: float, rng: random.Random, bidirected: float = 0.0) -> CausalGraph:
    names = [f"V{i}" for i in range(n)]
    p = min(1.0, degree / max(n - 1, 1))
    directed = {(names[i], names[j]) for i in range(n) for j in range(i + 1, n) if rng.random() < p}
    bi = {(names[i], names[j]) for i in range(n) for j in range(i + 1, n) if rng.random() < bidirected / n}
    return CausalGraph("ADMG" if bi else "DAG", tuple(names), frozenset(directed), frozenset(bi)).validate()


def timeit(fn, repeats: int) -> dict:
    fn()  # warm caches the way a long-running scorer would
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e6)
    samples.sort()
    return {
        "p50_us": round(statistics.median(samples), 1),
        "p99_us": round(samples[min(len(samples) - 1, int(0.99 * len(samples)))], 1),
        "per_s": round(1e6 / statistics.mean(samples), 1),
    }


def bench_graph(g: CausalGraph, repeats: int) -> dict:
    text = g.edge_text()
    x, y = g.nodes[0], g.nodes[-1]
    # a valid answer to grade: the maximal set in DAGs, a minimal one in ADMGs (empty if none exists)
    z = (
        C.maximal_backdoor_set(g, x, y) if g.kind == "DAG" else C.minimal_backdoor_set(g, x, y)
    ) or frozenset()
    problem = {"graph": g.to_dict(), "query": {"kind": "backdoor_set", "treatment": x, "outcome": y}}
    answer = QUERY_KINDS["backdoor_set"].format_answer(z)

    def fresh() -> CausalGraph:
        # a new graph object has no cached adjacency, like a freshly parsed trace graph
        return CausalGraph(g.kind, g.nodes, g.directed, g.bidirected)

    return {
        "n": len(g.nodes),
        "edges": len(g.directed) + len(g.bidirected),
        "kind": g.kind,
        "parse_graph": timeit(lambda: parse_graph(text), repeats),
        "m_separated": timeit(lambda: C.m_separated(fresh(), x, y, z), repeats),
        "is_backdoor_set": timeit(lambda: C.is_backdoor_set(fresh(), x, y, z), repeats),
        "is_minimal_backdoor_set": timeit(lambda: C.is_minimal_backdoor_set(fresh(), x, y, z), repeats),
        "is_frontdoor_set": timeit(lambda: C.is_frontdoor_set(fresh(), x, y, z), repeats),
        "grade_answer": timeit(lambda: grade_answer(problem, answer), repeats),
        "parse_plus_backdoor": timeit(lambda: C.is_backdoor_set(parse_graph(text), x, y, z), repeats),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    out = {}
    for label, n, degree, bi in (("n9", 9, 3.0, 0.0), ("n9_admg", 9, 3.0, 1.5), ("n100", 100, 3.0, 0.0)):
        out[label] = bench_graph(random_dag(n, degree, rng, bi), args.repeats)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
