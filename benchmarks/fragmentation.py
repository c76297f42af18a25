"""Fragmentation demo: plurality vote vs CALVER best-of-K when valid answers are many strings.

A find-one-valid causal query (here: a backdoor set) has several valid answers. Candidate pools are
sampled i.i.d.: with probability ρ a correct six-slot trace whose answer is one of M distinct valid
sets (uniformly), otherwise one *repeated* invalid trace (a well-formed trace that concludes the
empty set, leaving the backdoor path open). Each valid string then carries mass ρ/M, the invalid
one 1 − ρ. With ρ = 0.6 and M = 4 the invalid string (0.4) outweighs every valid one (0.15), so

* plurality (most frequent normalised answer) converges to the invalid answer as K grows, and
* CALVER best-of-K is right whenever one valid trace is in the pool: accuracy 1 − (1 − ρ)^K.

The output JSON has, for K = 1..K_max, the empirical accuracy of both selectors (the selected
candidate's answer graded by the graph predicate, :func:`faithgrpo.verifier.queries.grade_answer`),
the analytic CALVER curve, and the *exact* plurality curve (binomial over the invalid count times the
distribution of the largest of M equal multinomial counts, with ties split as the earliest-first-
occurrence rule does: t tied valid answers against the invalid one win with probability t/(t+1)).

The candidate traces come from a real problem: by default a generated backdoor problem
(:mod:`faithgrpo.tasks.causal`) with gold traces (:mod:`faithgrpo.tasks.certificates.gold`) for M distinct valid
answers; ``--source hand_built`` uses a hand-built confounded graph, and ``--problem FILE`` any
supplied-graph problem with a set-valued query and ≥ M valid answers. Each distinct string is scored
once; pools apply the same selection rules as :func:`~faithgrpo.rewards.selection.select_best_of_k`
and :func:`~faithgrpo.rewards.selection.plurality`, and the first pools are cross-checked against
those public functions.

Usage:
    python benchmarks/fragmentation.py [--rho 0.6] [--m 4] [--k-max 32] [--trials 2000] [--seed 0]
        [--source generator|hand_built] [--problem problem.json]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import sys
from typing import Any

from faithgrpo.rewards.calver.problem import prepare_problem
from faithgrpo.rewards.calver.reward import score_trace
from faithgrpo.rewards.selection import (
    best_of_k_index,
    normalized_answer,
    plurality,
    plurality_index,
    select_best_of_k,
)
from faithgrpo.verifier.graphs.model import CausalGraph
from faithgrpo.verifier.queries import format_query, grade_answer
from faithgrpo.verifier.query_kinds import QUERY_KINDS

CROSS_CHECK_POOLS = 40


def hand_built_problem(m: int) -> dict[str, Any]:
    """X -> Y confounded by U (U -> X, U -> Y), with parents W1..Wn of U, n = ceil(log2 m).

    Every backdoor set for (X, Y) is {U} plus any subset of the W's (2^n ≥ m of them); the empty set
    leaves X <- U -> Y open.
    """
    n = max(1, math.ceil(math.log2(max(m, 1))))
    ws = [f"W{i}" for i in range(1, n + 1)]
    nodes = [*ws, "U", "X", "Y"]
    edges = [[w, "U"] for w in ws] + [["U", "X"], ["U", "Y"], ["X", "Y"]]
    return {
        "graph": {"type": "DAG", "nodes": nodes, "directed": edges, "bidirected": []},
        "query": {"kind": "backdoor_set", "treatment": "X", "outcome": "Y"},
        "mode": "supplied",
    }


def invalid_candidate(graph: CausalGraph, query: dict[str, Any]) -> frozenset[str] | None:
    """A plausible wrong set: the empty set if invalid, else the first invalid singleton of a non-role node."""
    kind = QUERY_KINDS[query["kind"]]
    roles = {query.get(r) for r in kind.roles if isinstance(query.get(r), str)}
    candidates = [frozenset(), *(frozenset((v,)) for v in graph.nodes if v not in roles)]
    return next((z for z in candidates if not kind.is_valid(graph, query, z)), None)


def build_pool_strings(problem: dict[str, Any], m: int) -> tuple[list[str], str]:
    """M correct traces with distinct valid answers and one invalid trace.

    The problem's query must be set-valued (``backdoor_set``, ``frontdoor_set``, ``dsep_set``,
    ``msep_set``). The invalid answer is :func:`invalid_candidate`'s.

    Raises:
        ValueError: the problem has fewer than ``m`` valid answers, or no invalid one.
    """
    graph = CausalGraph.from_dict(problem["graph"])
    q = problem["query"]
    kind = QUERY_KINDS.get(q.get("kind"))
    if kind is None or kind.answer_type != "set":
        raise ValueError(f"the demo needs a set-valued query kind, got {q.get('kind')!r}")
    valid = kind.valid_answers(graph, q, limit=m)
    if len(valid) < m:
        raise ValueError(f"the problem has {len(valid)} valid answers, fewer than M={m}")
    wrong = invalid_candidate(graph, q)
    if wrong is None:
        raise ValueError("every small set is valid for this problem; pick one with an invalid answer")
    from faithgrpo.tasks.certificates.gold import gold_trace

    # gold certificates (the claim grammar of faithgrpo.verifier.certificates.derivation) for each answer; the invalid
    # answer's claims are true but do not certify it
    traces = [gold_trace(problem, i, plain=True, answer=z) for i, z in enumerate(valid)]
    invalid = gold_trace(problem, 0, plain=True, answer=wrong)
    return traces, invalid


_RESULT_LINE_RE = re.compile(r"^RESULT:.*$", re.MULTILINE)
_ANSWER_TAG_RE = re.compile(r"<answer>.*?</answer>", re.DOTALL)


def generator_pool(m: int, seed: int, max_problems: int = 200) -> tuple[dict[str, Any], list[str], str]:
    """A generated backdoor problem with gold traces for ``m`` distinct valid answers, and an invalid trace.

    Problems come from :func:`faithgrpo.tasks.causal.datasets.make_problem` (supplied graph, ``backdoor_set``,
    variant ``any``) until one has ``m`` valid answers and an invalid empty-or-singleton set; the valid
    traces are :func:`faithgrpo.tasks.certificates.gold.gold_trace` outputs with different seeds (each picks one
    valid answer); the invalid trace is a gold trace whose RESULT and ``<answer>`` are replaced by the
    invalid set (its derivation no longer supports it).

    Raises:
        RuntimeError: no suitable problem among ``max_problems`` draws.
    """
    from faithgrpo.tasks.causal.datasets import CausalGraphConfig, make_problem
    from faithgrpo.tasks.certificates.gold import gold_trace

    config = CausalGraphConfig(
        size=1, seed=seed, min_nodes=5, max_nodes=9, query_kinds=("backdoor_set",), set_variants=("any",)
    )
    config.validate()
    rng = random.Random(seed)
    kind = QUERY_KINDS["backdoor_set"]
    for _ in range(max_problems):
        problem, _, _ = make_problem(config, rng)
        problem = {k: problem[k] for k in ("graph", "query", "mode")}
        graph = CausalGraph.from_dict(problem["graph"])
        q = problem["query"]
        wrong = invalid_candidate(graph, q)
        if wrong is None or len(kind.valid_answers(graph, q, limit=m)) < m:
            continue
        by_answer: dict[str, str] = {}
        for s in range(64 * m):
            text = gold_trace(problem, s)
            by_answer.setdefault(normalized_answer(text, problem), text)
            if len(by_answer) == m:
                break
        if len(by_answer) < m:
            continue
        wrong_answer = kind.format_answer(wrong)
        base = next(iter(by_answer.values()))
        invalid = _ANSWER_TAG_RE.sub(f"<answer>{wrong_answer}</answer>", base)
        invalid = _RESULT_LINE_RE.sub(f"RESULT: {wrong_answer}", invalid)
        return problem, list(by_answer.values()), invalid
    raise RuntimeError(f"no generated backdoor problem with {m} valid answers in {max_problems} draws")


def analytic_calver(rho: float, k: int) -> float:
    """P(at least one valid trace among K) = 1 − (1 − ρ)^K."""
    return 1.0 - (1.0 - rho) ** k


def exact_plurality(rho: float, m: int, k: int) -> float:
    """Exact probability that plurality selects a valid answer (module docstring)."""
    total = 0.0
    for c0 in range(k + 1):  # c0 = count of the invalid string
        p_c0 = math.comb(k, c0) * (1 - rho) ** c0 * rho ** (k - c0)
        n = k - c0
        if p_c0 == 0.0 or n == 0:
            continue
        win = 0.0
        for (mx, ties), p in _max_distribution(n, m).items():
            if mx > c0:
                win += p
            elif mx == c0:
                win += p * ties / (ties + 1)
        total += p_c0 * win
    return total


def _max_distribution(n: int, m: int) -> dict[tuple[int, int], float]:
    """Distribution of (largest count, how many categories reach it) for n balls in m equal bins."""
    # states: (balls used, max, ties) -> Σ ∏ 1/c_i!; multiply by n!/m^n at the end
    states: dict[tuple[int, int, int], float] = {(0, -1, 0): 1.0}
    for _ in range(m):
        nxt: dict[tuple[int, int, int], float] = {}
        for (used, mx, ties), w in states.items():
            for c in range(n - used + 1):
                if c > mx:
                    key = (used + c, c, 1)
                elif c == mx:
                    key = (used + c, mx, ties + 1)
                else:
                    key = (used + c, mx, ties)
                nxt[key] = nxt.get(key, 0.0) + w / math.factorial(c)
        states = nxt
    scale = math.factorial(n) / m**n
    out: dict[tuple[int, int], float] = {}
    for (used, mx, ties), w in states.items():
        if used == n:
            out[(mx, ties)] = out.get((mx, ties), 0.0) + w * scale
    return out


def run(
    rho: float = 0.6,
    m: int = 4,
    k_max: int = 32,
    trials: int = 2000,
    seed: int = 0,
    problem: dict[str, Any] | None = None,
    source: str = "generator",
) -> dict[str, Any]:
    """Simulate both selectors; returns the JSON-ready result (module docstring).

    Args:
        rho: valid probability mass.
        m: number of distinct valid answer strings.
        k_max: largest pool size.
        trials: pools per K (each pool of size K is the first K draws of one pool of ``k_max``).
        seed: sampling seed.
        problem: a supplied-graph problem with a set-valued query; traces are then built by
            :func:`build_pool_strings`.
        source: without ``problem``: ``"generator"`` (:func:`generator_pool`: a generated problem
            and gold traces) or ``"hand_built"`` (:func:`hand_built_problem`).

    Raises:
        ValueError: parameters out of range, or a problem without ``m`` valid answers.
    """
    if not 0.0 <= rho <= 1.0:
        raise ValueError(f"rho must lie in [0, 1], got {rho}")
    if m < 1 or k_max < 1 or trials < 1:
        raise ValueError("m, k_max and trials must be positive integers")
    if problem is not None:
        source = "given"
        valid_traces, invalid_trace = build_pool_strings(problem, m)
    elif source == "generator":
        problem, valid_traces, invalid_trace = generator_pool(m, seed)
    elif source == "hand_built":
        problem = hand_built_problem(m)
        valid_traces, invalid_trace = build_pool_strings(problem, m)
    else:
        raise ValueError(f"source must be 'generator' or 'hand_built', got {source!r}")
    strings = [*valid_traces, invalid_trace]  # index m is the invalid string
    prepared = prepare_problem(problem)
    totals = [score_trace(s, prepared).total for s in strings]
    keys = [normalized_answer(s, prepared) for s in strings]
    correct = [grade_answer(problem, s) for s in strings]
    if not all(correct[:m]) or correct[m] or len(set(keys)) != m + 1:
        raise AssertionError("pool strings are not M distinct valid answers plus one invalid one")

    rng = random.Random(seed)
    hits_calver = [0] * (k_max + 1)
    hits_plurality = [0] * (k_max + 1)
    cross_checked = 0
    for trial in range(trials):
        pool = [rng.randrange(m) if rng.random() < rho else m for _ in range(k_max)]
        for k in range(1, k_max + 1):
            prefix = pool[:k]
            b = prefix[best_of_k_index([totals[i] for i in prefix])]
            p = prefix[plurality_index([keys[i] for i in prefix])]
            hits_calver[k] += correct[b]
            hits_plurality[k] += correct[p]
            if trial < CROSS_CHECK_POOLS and k in (1, 2, 5, k_max):
                texts = [strings[i] for i in prefix]
                if (select_best_of_k(texts, prepared) != prefix.index(b)
                        or plurality(texts, prepared) != prefix.index(p)):  # fmt: skip
                    raise AssertionError("fast path disagrees with the public selection functions")
                cross_checked += 1

    ks = list(range(1, k_max + 1))
    calver = [hits_calver[k] / trials for k in ks]
    plural = [hits_plurality[k] / trials for k in ks]
    calver_analytic = [analytic_calver(rho, k) for k in ks]
    plural_exact = [exact_plurality(rho, m, k) for k in ks]
    return {
        "rho": rho,
        "M": m,
        "k_max": k_max,
        "trials": trials,
        "seed": seed,
        "problem_source": source,
        "query": format_query(problem["query"]),
        "graph": CausalGraph.from_dict(problem["graph"]).edge_text(),
        "valid_answers": keys[:m],
        "invalid_answer": keys[m],
        "calver_scores": {"valid": totals[:m], "invalid": totals[m]},
        "K": ks,
        "plurality": plural,
        "plurality_exact": plural_exact,
        "calver": calver,
        "calver_analytic": calver_analytic,
        "max_abs_dev_calver": max(abs(a - b) for a, b in zip(calver, calver_analytic)),
        "max_abs_dev_plurality": max(abs(a - b) for a, b in zip(plural, plural_exact)),
        "plurality_picks_invalid_at_k_max": 1.0 - plural[-1],
        "pools_cross_checked_with_public_api": cross_checked,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rho", type=float, default=0.6, help="valid probability mass")
    parser.add_argument("--m", type=int, default=4, help="number of distinct valid answer strings")
    parser.add_argument("--k-max", type=int, default=32)
    parser.add_argument("--trials", type=int, default=2000, help="pools per K")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--source", choices=("generator", "hand_built"), default="generator",
                        help="where the problem and traces come from (without --problem)")  # fmt: skip
    parser.add_argument("--problem", help="JSON file holding one causal problem with a set-valued query")
    args = parser.parse_args(argv)
    problem = None
    if args.problem:
        with open(args.problem, encoding="utf-8") as f:
            problem = json.load(f)
    result = run(args.rho, args.m, args.k_max, args.trials, args.seed, problem, args.source)
    json.dump(result, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
