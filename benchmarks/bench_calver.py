"""Per-trace CALVER scoring latency on one CPU thread (issue 3, Speed).

Builds random problems of every query kind on CLEAR-size graphs (4-9 nodes, single-letter names)
and on 100-node graphs (``V0..V99``), writes a full-marks six-slot trace for each with
:func:`faithgrpo.tasks.gold.gold_trace` (its DERIVATION is a certificate in the claim grammar of
:mod:`faithgrpo.tasks.derivation`, so every timed call also parses and checks the claims and
certifies RESULT) plus a corrupted variant (a wrong RESULT and answer, which takes the failing
paths), and times :func:`faithgrpo.rewards.calver.score_trace` per trace. Every full-marks trace is
scored first and must get 6/6 (the benchmark raises otherwise: a trace that fails the derivation
check would skip the certification work it is meant to time). Prints one JSON object with, per
graph size and problem form, p50/p99 latency in milliseconds (wall clock and thread CPU time) and
traces per second, per node count (4..9), per query kind, and the derivation check alone
(:func:`faithgrpo.tasks.derivation.check_derivation` on the parsed DERIVATION).

Problem forms: ``prepared`` passes a :func:`~faithgrpo.rewards.calver.prepare_problem` result (what
:func:`~faithgrpo.rewards.calver.calver_reward` does for the G completions of one prompt; JSON
problem strings are also cached across calls); ``raw`` passes the problem dict, so every call also
strips answer fields and validates graph, query and CPTs.

Targets: median ≤ 0.5 ms on 4-9 node graphs, ≤ 5 ms on 100-node graphs (one thread, claim
checks included).

The machine may be shared: run ``--rounds`` passes and read the median; thread CPU time is less
sensitive to other processes than wall time.

``--profile N`` runs the timed loop of the prepared form under cProfile and prints the top ``N``
functions (by internal and by cumulative time) to stderr.

Usage:
    python benchmarks/bench_calver.py [--problems 60] [--rounds 5] [--seed 0] [--profile 25]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one CPU thread (numpy is used for the ATE)

import argparse  # noqa: E402
import cProfile  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import pstats  # noqa: E402
import random  # noqa: E402
import re  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

from faithgrpo.rewards.calver import prepare_problem, score_trace  # noqa: E402
from faithgrpo.rewards.trace import parse_trace  # noqa: E402
from faithgrpo.tasks import criteria as C  # noqa: E402
from faithgrpo.tasks.derivation import check_derivation  # noqa: E402
from faithgrpo.tasks.gold import gold_trace  # noqa: E402
from faithgrpo.tasks.graph import CausalGraph  # noqa: E402
from faithgrpo.tasks.queries import QUERY_KINDS  # noqa: E402

LETTERS = "BCDEFGHJKLMNOPQRSTUVWXYZ"  # no A or I: those read as English words in prose
TARGETS_MS = {"clear_4_9": 0.5, "n100": 5.0}


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


_RESULT_RE = re.compile(r"^RESULT: .*$", re.MULTILINE)
_ANSWER_RE = re.compile(r"<answer>.*</answer>", re.DOTALL)


def make_case(kind_name: str, n: int, rng: random.Random) -> tuple[dict, str, str] | None:
    """(problem, full-marks trace, corrupted trace) for one random problem of ``kind_name``, or None.

    The full-marks trace is :func:`~faithgrpo.tasks.gold.gold_trace`'s (a DERIVATION certificate in
    the claim grammar); the corrupted one swaps RESULT and ``<answer>`` for a wrong answer.
    """
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
        value: Any = C.minimal_backdoor_set(g, x, y)
    elif kind_name == "frontdoor_set":
        value = next(iter(kind.valid_answers(g, query, limit=1, max_checks=512)), None)
    elif kind_name in ("dsep_set", "msep_set"):
        value = C.minimal_m_separator(g, x, y)
    elif kind_name == "ci_test":
        query["given"] = rng.sample([v for v in g.nodes if v not in (x, y)], min(2, n - 2))
        value = True
    elif kind_name == "directed_path":
        value = True
    elif kind_name == "mediator":
        value = next(iter(C.mediators(g, x, y)), None)
    elif kind_name == "cycle":
        value = C.find_directed_cycle(g)
    elif kind_name == "ate":
        if n > 20:
            return None  # CPTs over 100 binary variables are out of scope
        cpts = random_cpts(g, rng)
        if C.maximal_backdoor_set(g, x, y) is None:
            return None
        psi = C.interventional_ate(cpts, x, y)
        query.update(threshold=round(psi - 0.1, 3), margin=0.05)
        value = True
    if value is None:
        return None  # no valid answer: no full-marks trace exists
    problem: dict[str, Any] = {"graph": g.to_dict(), "query": query}
    if cpts is not None:
        problem["cpts"] = cpts
    good = gold_trace(problem, rng.randrange(2**31))
    t = parse_trace(good)
    if kind_name == "ate":
        flip = {"yes": "no", "no": "yes", "Yes": "No", "No": "Yes"}
        wrong_result = re.sub(r"\b(yes|no|Yes|No)\b", lambda m: flip[m.group(1)], t.result or "", count=1)
        wrong_answer = re.sub(r"\b(yes|no|Yes|No)\b", lambda m: flip[m.group(1)], t.answer or "", count=1)
    else:
        wrong_result = wrong_answer = {
            "set": "{" + x + "}",  # the treatment / x is never in a valid set
            "yes_no": "no" if kind.parse_answer(t.answer or "") else "yes",
            "node": x,  # the treatment is not its own mediator
            "cycle": f"{g.nodes[0]} -> {g.nodes[1]} -> {g.nodes[0]}",
        }[kind.answer_type]
    bad = _RESULT_RE.sub(lambda _: f"RESULT: {wrong_result}", good, count=1)
    bad = _ANSWER_RE.sub(lambda _: f"<answer>{wrong_answer}</answer>", bad, count=1)
    return problem, good, bad


def percentile(sorted_samples: list[float], q: float) -> float:
    return sorted_samples[min(len(sorted_samples) - 1, int(q * len(sorted_samples)))]


def _summary(samples: list[float]) -> dict[str, float]:
    s = sorted(samples)
    return {"n": len(s), "p50_ms": round(statistics.median(s), 4), "p99_ms": round(percentile(s, 0.99), 4),
            "max_ms": round(s[-1], 4)}  # fmt: skip


def bench(cases: list[tuple], rounds: int, prepared: bool, profile: int = 0) -> dict[str, Any]:
    work = []
    for kind, n, problem, good, bad in cases:
        p = prepare_problem(problem) if prepared else problem
        work += [(kind, n, p, good, True), (kind, n, p, bad, False)]
    for _, _, p, text, _ in work:  # warm-up (regex compilation, caches of prepared problems)
        score_trace(text, p)
    wall: list[float] = []
    cpu: list[float] = []
    per_kind: dict[str, list[float]] = {}
    per_nodes: dict[int, list[float]] = {}
    good_cpu: list[float] = []
    rates = []
    profiler = cProfile.Profile() if profile else None
    for _ in range(rounds):
        start_round = time.perf_counter()
        if profiler:
            profiler.enable()
        for kind, n, p, text, full in work:
            t0, c0 = time.perf_counter(), time.thread_time()
            score_trace(text, p)
            wall.append((time.perf_counter() - t0) * 1e3)
            cpu.append((time.thread_time() - c0) * 1e3)
            per_kind.setdefault(kind, []).append(cpu[-1])
            per_nodes.setdefault(n, []).append(cpu[-1])
            if full:
                good_cpu.append(cpu[-1])
        if profiler:
            profiler.disable()
        rates.append(len(work) / (time.perf_counter() - start_round))
    if profiler:
        for order in ("tottime", "cumulative"):
            buf = io.StringIO()
            pstats.Stats(profiler, stream=buf).sort_stats(order).print_stats(profile)
            print(f"--- cProfile ({'prepared' if prepared else 'raw'}, by {order}) ---\n{buf.getvalue()}",
                  file=sys.stderr)  # fmt: skip
    wall.sort()
    cpu.sort()
    return {
        "traces": len(work),
        "rounds": rounds,
        "p50_ms": round(statistics.median(wall), 4),
        "p99_ms": round(percentile(wall, 0.99), 4),
        "cpu_p50_ms": round(statistics.median(cpu), 4),
        "cpu_p99_ms": round(percentile(cpu, 0.99), 4),
        "full_marks_cpu": _summary(good_cpu),
        "traces_per_s": round(statistics.median(rates), 1),
        "cpu_by_nodes": {str(k): _summary(v) for k, v in sorted(per_nodes.items())},
        "cpu_p50_ms_by_kind": {k: round(statistics.median(v), 4) for k, v in sorted(per_kind.items())},
        "cpu_p99_ms_by_kind": {k: round(percentile(sorted(v), 0.99), 4) for k, v in sorted(per_kind.items())},
    }


def bench_derivation(cases: list[tuple], rounds: int) -> dict[str, Any]:
    """The derivation check alone (claims parsed, checked and certified) on the full-marks traces."""
    work = []
    for kind, _, problem, good, _ in cases:
        p = prepare_problem(problem)
        t = parse_trace(good)
        value = p.kind.parse_answer(t.result)
        ate_set = None
        if kind == "ate":
            from faithgrpo.rewards.calver import _ate_adjustment_set

            ate_set, _ = _ate_adjustment_set(t.result or "")
        args = (t.derivation, kind, p.query, value, p.graph, p.cpts)
        report = check_derivation(*args, ate_set=ate_set)
        if not report.passed:
            raise AssertionError(f"derivation of a full-marks {kind} trace fails: {report.reason()}")
        work.append((args, ate_set, len(report.claims)))
    cpu: list[float] = []
    for _ in range(rounds):
        for args, ate_set, _ in work:
            c0 = time.thread_time()
            check_derivation(*args, ate_set=ate_set)
            cpu.append((time.thread_time() - c0) * 1e3)
    claims = sorted(c for _, _, c in work)
    return {**_summary(cpu), "claims_p50": statistics.median(claims), "claims_max": claims[-1]}


KINDS = ("backdoor_set", "frontdoor_set", "dsep_set", "ci_test", "directed_path", "mediator", "cycle",
         "msep_set", "ate")  # fmt: skip


def build_cases(sizes: tuple[int, int], count: int, rng: random.Random) -> tuple[list, dict]:
    """``count`` (kind, nodes, problem, full-marks trace, corrupted trace) cases; raises when a
    full-marks trace does not score 6/6 or a corrupted one does."""
    cases, by_kind = [], dict.fromkeys(KINDS, 0)
    attempts = 0
    while len(cases) < count and attempts < 50 * count:
        attempts += 1
        kind = KINDS[len(cases) % len(KINDS)]
        if kind == "ate" and sizes[0] > 20:
            kind = "backdoor_set"  # CPTs over 100 binary variables are out of scope
        n = rng.randint(*sizes)
        case = make_case(kind, n, rng)
        if case is None:
            continue
        problem, good, bad = case
        s_good, s_bad = score_trace(good, problem), score_trace(bad, problem)
        if s_good.total != 6:
            raise AssertionError(
                f"full-marks {kind} trace scores {s_good.total}/6: {s_good.reasons}\n{good}"
            )
        if s_bad.total == 6:
            raise AssertionError(f"corrupted {kind} trace scores 6/6:\n{bad}")
        cases.append((kind, n, *case))
        by_kind[kind] += 1
    return cases, by_kind


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=int, default=60, help="problems per graph size")
    ap.add_argument("--rounds", type=int, default=5, help="timed passes over all traces")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--profile", type=int, default=0, help="print the top N cProfile rows to stderr")
    ap.add_argument("--only", choices=tuple(TARGETS_MS), default=None, help="one graph size only")
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    out: dict[str, Any] = {"targets_ms": TARGETS_MS}
    for label, sizes in (("clear_4_9", (4, 9)), ("n100", (100, 100))):
        cases, by_kind = build_cases(sizes, args.problems, rng)
        if args.only and label != args.only:
            continue
        out[label] = {
            "nodes": list(sizes),
            "problems_by_kind": by_kind,
            "prepared": bench(cases, args.rounds, prepared=True, profile=args.profile),
            "raw": bench(cases, args.rounds, prepared=False),
            "derivation_only": bench_derivation(cases, args.rounds),
        }
        out[label]["meets_target"] = out[label]["prepared"]["p50_ms"] <= TARGETS_MS[label]
        out[label]["meets_target_cpu"] = out[label]["prepared"]["cpu_p50_ms"] <= TARGETS_MS[label]
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
