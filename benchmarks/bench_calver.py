"""Per-trace CALVER scoring latency on one CPU thread (issue 3, Speed).

Builds random problems of every query kind on CLEAR-size graphs (4-9 nodes, single-letter names)
and on 100-node graphs (``V0..V99``), writes a full-marks six-slot trace for each with
:func:`faithgrpo.tasks.certificates.gold.gold_trace` (its DERIVATION is a certificate in the claim grammar of
:mod:`faithgrpo.verifier.certificates.derivation`, so every timed call also parses and checks the claims and
certifies RESULT) plus a corrupted variant (a wrong RESULT and answer, which takes the failing
paths), and times :func:`faithgrpo.rewards.calver.reward.score_trace` per trace. Every full-marks trace is
scored first and only a 6/6 one is timed as full marks (a trace that fails the derivation check
would skip the certification work it is meant to time): a gold trace scoring less, or a corrupted
trace scoring 6, is left out, listed under ``left_out`` and makes the benchmark exit with status 2
(``--strict`` raises at the first one); a case whose gold trace or scoring runs over
``--case-timeout`` seconds is left out and listed too (``timed_out``). Prints one JSON object with, per
graph size and problem form, p50/p99 latency in milliseconds (wall clock and thread CPU time) and
traces per second, per node count (4..9), per query kind, and the derivation check alone
(:func:`faithgrpo.verifier.certificates.derivation.check_derivation` on the parsed DERIVATION).

Problem forms: ``prepared`` passes a :func:`~faithgrpo.rewards.calver.problem.prepare_problem` result (what
:func:`~faithgrpo.rewards.calver.reward.calver_reward` does for the G completions of one prompt; JSON
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
        [--only clear_4_9|n100] [--case-timeout 5] [--strict]
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
import signal  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

from faithgrpo.rewards.calver.problem import prepare_problem  # noqa: E402
from faithgrpo.rewards.calver.reward import score_trace  # noqa: E402
from faithgrpo.rewards.trace import parse_trace  # noqa: E402
from faithgrpo.tasks.certificates.gold import gold_trace  # noqa: E402
from faithgrpo.verifier import graphs as C  # noqa: E402
from faithgrpo.verifier.certificates.derivation import check_derivation  # noqa: E402
from faithgrpo.verifier.graphs.model import CausalGraph  # noqa: E402
from faithgrpo.verifier.query_kinds import QUERY_KINDS  # noqa: E402

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


def make_case(
    kind_name: str, n: int, rng: random.Random, last: dict | None = None
) -> tuple[dict, str, str] | None:
    """(problem, full-marks trace, corrupted trace) for one random problem of ``kind_name``, or None.

    The full-marks trace is :func:`~faithgrpo.tasks.certificates.gold.gold_trace`'s (a DERIVATION certificate in
    the claim grammar); the corrupted one swaps RESULT and ``<answer>`` for a wrong answer. ``last``
    receives the problem before its gold trace is written (to name a case that hangs).
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
    if last is not None:
        last["problem"] = problem
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
            "cycle": next(  # two nodes that are not a 2-cycle
                (
                    f"{a} -> {b} -> {a}"
                    for a in g.nodes
                    for b in g.nodes
                    if a != b and not {(a, b), (b, a)} <= g.directed
                ),
                "Q9 -> Q9",
            ),
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
            from faithgrpo.rewards.calver.checks import _ate_adjustment_set

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


class CaseTimeout(Exception):
    """A case took longer than ``--case-timeout`` to generate or score (see ``pathological``)."""


def _alarm(_signum: int, _frame: Any) -> None:
    raise CaseTimeout


def build_cases(sizes: tuple[int, int], count: int, rng: random.Random, case_timeout: float = 5.0,
                strict: bool = False) -> tuple[list, dict, dict[str, list]]:  # fmt: skip
    """``count`` (kind, nodes, problem, full-marks trace, corrupted trace) cases, the count per kind,
    and the cases left out, by why.

    Only traces that really score 6/6 are timed as full marks. A gold trace that does not, and a
    corrupted trace that does, is left out and listed (``gold_not_six``, ``corrupted_six``), and
    ``main`` then exits with status 2 and a warning; with ``strict`` the first one raises. A case
    whose gold trace or scoring takes over ``case_timeout`` seconds (path enumeration on some
    100-node graphs is exponential) is left out and listed (``timed_out``) instead of hanging the
    benchmark.
    """
    cases, by_kind = [], dict.fromkeys(KINDS, 0)
    left_out: dict[str, list] = {"timed_out": [], "gold_not_six": [], "corrupted_six": []}
    attempts = 0
    use_alarm = case_timeout > 0 and hasattr(signal, "SIGALRM")
    if use_alarm:
        signal.signal(signal.SIGALRM, _alarm)
    while len(cases) < count and attempts < 50 * count:
        attempts += 1
        kind = KINDS[(attempts - 1) % len(KINDS)]
        if kind == "ate" and sizes[0] > 20:
            kind = "backdoor_set"  # CPTs over 100 binary variables are out of scope
        n = rng.randint(*sizes)
        stage, last = "gold_trace", {}
        try:
            if use_alarm:
                signal.setitimer(signal.ITIMER_REAL, case_timeout)
            case = make_case(kind, n, rng, last)
            if case is None:
                continue
            problem, good, bad = case
            stage = "score_trace(full marks)"
            s_good = score_trace(good, problem)
            stage = "score_trace(corrupted)"
            s_bad = score_trace(bad, problem)
        except CaseTimeout:
            problem = last.get("problem")
            left_out["timed_out"].append({"kind": kind, "nodes": n, "stage": stage, "seconds": case_timeout,
                                          "query": None if problem is None else problem["query"]})  # fmt: skip
            continue
        finally:
            if use_alarm:
                signal.setitimer(signal.ITIMER_REAL, 0)
        if s_good.total != 6:
            if strict:
                raise AssertionError(
                    f"full-marks {kind} trace scores {s_good.total}/6: {s_good.reasons}\n{good}"
                )
            left_out["gold_not_six"].append({"kind": kind, "nodes": n, "query": problem["query"],
                                             "total": s_good.total, "reasons": s_good.reasons})  # fmt: skip
            continue
        if s_bad.total == 6:
            if strict:
                raise AssertionError(f"corrupted {kind} trace scores 6/6:\n{bad}")
            left_out["corrupted_six"].append(
                {"kind": kind, "nodes": n, "query": problem["query"], "trace": bad}
            )
            continue
        cases.append((kind, n, *case))
        by_kind[kind] += 1
    return cases, by_kind, left_out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=int, default=60, help="problems per graph size")
    ap.add_argument("--rounds", type=int, default=5, help="timed passes over all traces")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--profile", type=int, default=0, help="print the top N cProfile rows to stderr")
    ap.add_argument(
        "--strict", action="store_true", help="raise at the first trace that does not score as labelled"
    )
    ap.add_argument("--only", choices=tuple(TARGETS_MS), default=None, help="one graph size only")
    ap.add_argument(
        "--case-timeout",
        type=float,
        default=5.0,
        help="seconds before a case (gold trace + scoring) counts as pathological and is skipped",
    )
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    out: dict[str, Any] = {"targets_ms": TARGETS_MS}
    for label, sizes in (("clear_4_9", (4, 9)), ("n100", (100, 100))):
        if args.only and label != args.only:
            continue
        cases, by_kind, left_out = build_cases(sizes, args.problems, rng, args.case_timeout, args.strict)
        out[label] = {
            "nodes": list(sizes),
            "problems_by_kind": by_kind,
            "left_out": left_out,
            "prepared": bench(cases, args.rounds, prepared=True, profile=args.profile),
            "raw": bench(cases, args.rounds, prepared=False),
            "derivation_only": bench_derivation(cases, args.rounds),
        }
        out[label]["meets_target"] = out[label]["prepared"]["p50_ms"] <= TARGETS_MS[label]
        out[label]["meets_target_cpu"] = out[label]["prepared"]["cpu_p50_ms"] <= TARGETS_MS[label]
    print(json.dumps(out, indent=1, ensure_ascii=False))
    bad = {f"{label}.{why}": len(v) for label in TARGETS_MS if label in out
           for why, v in out[label]["left_out"].items() if v and why != "timed_out"}  # fmt: skip
    slow = {label: len(out[label]["left_out"]["timed_out"]) for label in TARGETS_MS if label in out}
    if any(slow.values()):
        print(
            f"WARNING: cases over --case-timeout left out (exponential path search): {slow}", file=sys.stderr
        )
    if bad:
        print(f"ERROR: traces that do not score as labelled were left out: {bad}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
