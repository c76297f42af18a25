"""Tests for faithgrpo.tasks.certificates.gold: gold six-slot traces are correct, derived from the graph, and varied."""

from __future__ import annotations

import itertools
import json
import random
import re
from collections import Counter

import pytest

from faithgrpo.rewards.calver.reward import score_trace
from faithgrpo.rewards.steps import split_steps
from faithgrpo.rewards.trace import parse_trace
from faithgrpo.tasks.causal.datasets import (
    CausalGraphConfig,
    CausalGraphDataset,
    CausalStoryConfig,
    CausalStoryDataset,
)
from faithgrpo.tasks.certificates.gold import gold_trace
from faithgrpo.text import extract_think
from faithgrpo.verifier import graphs as C
from faithgrpo.verifier.graphs.edges import parse_graph, parse_path
from faithgrpo.verifier.graphs.model import CausalGraph, GraphParseError
from faithgrpo.verifier.graphs.strata import stratum_table
from faithgrpo.verifier.queries import grade_answer, normalize_answer, query_matches
from faithgrpo.verifier.query_kinds import QUERY_KINDS

_ARROW_CHAIN = re.compile(r"[A-Za-z0-9_]+(?:\s*(?:<->|->|<-)\s*[A-Za-z0-9_]+)+")


def problems(cls, n, seed, **kw):
    config_cls = CausalStoryConfig if cls is CausalStoryDataset else CausalGraphConfig
    ds = cls(config_cls(size=n, seed=seed, **kw))
    return [json.loads(ds[i]["metadata"]["problem"]) for i in range(n)]


def structural_checks(trace: str, problem: dict) -> None:
    """The checks that do not need CALVER: slots, graph round trip, query, strategy, answer, steps."""
    t = parse_trace(trace)
    assert not t.missing(), (t.missing(), trace)
    assert not t.problems
    g = CausalGraph.from_dict(problem["graph"])
    assert parse_graph(t.graph, g.kind, nodes=g.nodes) == g
    assert query_matches(problem["query"], t.query)
    kind = QUERY_KINDS[problem["query"]["kind"]]
    assert kind.matches_strategy(t.strategy)
    assert grade_answer(problem, t.result) and grade_answer(problem, t.answer)
    assert normalize_answer(problem, t.result) == normalize_answer(problem, t.answer)
    assert len(t.derivation) >= 2
    assert trace.startswith("<think>\n") and trace.endswith("</answer>")
    assert trace.count("<think>") == trace.count("</think>") == trace.count("<answer>") == 1


def derivation_paths_exist(trace: str, problem: dict) -> None:
    """Every arrow chain the derivation writes is a real path of the graph (nothing invented)."""
    g = CausalGraph.from_dict(problem["graph"])
    for line in parse_trace(trace).derivation:
        for chain in _ARROW_CHAIN.findall(line):
            path = parse_path(chain)
            closed = path.nodes[0] == path.nodes[-1] and set(path.marks) == {"->"}
            assert C.is_directed_cycle(g, path.nodes) if closed else C.is_path(g, path), (chain, line)


@pytest.mark.parametrize(
    ("cls", "lo", "hi", "n"),
    [(CausalGraphDataset, 4, 8, 150), (CausalStoryDataset, 4, 8, 100), (CausalGraphDataset, 9, 12, 40)],
)
def test_gold_traces_are_correct_and_score_six(cls, lo, hi, n):
    kinds = Counter()
    for i, p in enumerate(problems(cls, n, seed=31, min_nodes=lo, max_nodes=hi)):
        trace = gold_trace(p, random.Random(i))
        structural_checks(trace, p)
        derivation_paths_exist(trace, p)
        score = score_trace(trace, p)
        assert score.total == 6, (score.reasons, trace)
        # CRoS needs >= 2 steps, both in the whole reasoning and in the derivation alone
        assert len(split_steps(extract_think(trace))) >= 2
        assert len(split_steps("\n".join(parse_trace(trace).derivation))) >= 2
        kinds[p["query"]["kind"]] += 1
    assert set(kinds) == set(QUERY_KINDS)


@pytest.mark.slow
def test_gold_traces_score_six_over_thousands_of_seeds():
    total = 0
    for cls, lo, hi, n in ((CausalGraphDataset, 4, 12, 1500), (CausalStoryDataset, 4, 10, 1000)):
        for i, p in enumerate(problems(cls, n, seed=1000 + lo, min_nodes=lo, max_nodes=hi)):
            trace = gold_trace(p, i)
            score = score_trace(trace, p)
            assert score.total == 6, (score.reasons, trace)
            assert len(parse_trace(trace).derivation) >= 2
            total += 1
    assert total == 2500


def test_same_seed_same_trace_and_wording_varies():
    p = problems(CausalGraphDataset, 1, seed=3, query_kinds=("backdoor_set",))[0]
    assert gold_trace(p, 5) == gold_trace(p, random.Random(5)) == gold_trace(json.dumps(p), 5)
    traces = {gold_trace(p, s) for s in range(30)}
    assert len(traces) >= 10


@pytest.mark.parametrize(
    "kind", ["backdoor_set", "frontdoor_set", "dsep_set", "msep_set", "mediator", "cycle"]
)
def test_gold_traces_pick_different_valid_answers(kind):
    for p in problems(CausalGraphDataset, 6, seed=41, query_kinds=(kind,)):
        answers = {normalize_answer(p, parse_trace(gold_trace(p, s)).answer) for s in range(40)}
        valid = QUERY_KINDS[kind].valid_answers(
            CausalGraph.from_dict(p["graph"]), p["query"], limit=16, max_checks=1024
        )
        assert len(answers) >= min(2, len(valid)), (answers, p["query"])
        if len(valid) >= 3:
            assert len(answers) >= 3


def test_plain_trace_matches_a_hand_written_one():
    p = {
        "graph": {
            "type": "DAG",
            "nodes": ["U", "X", "M", "Y"],
            "directed": [["U", "X"], ["U", "Y"], ["X", "M"], ["M", "Y"]],
        },
        "query": {"kind": "backdoor_set", "treatment": "X", "outcome": "Y"},
    }
    assert gold_trace(p, plain=True) == (
        "<think>\n"
        "GRAPH: M -> Y; U -> X; U -> Y; X -> M\n"
        "QUERY: backdoor_set(treatment=X, outcome=Y)\n"
        "STRATEGY: backdoor criterion\n"
        "DERIVATION:\n"
        "- U is not a descendant of X\n"
        "- backdoor path X <- U -> Y is blocked given {U}\n"
        "- so {U} satisfies the backdoor criterion for X and Y\n"
        "RESULT: {U}\n"
        "</think>\n"
        "<answer>{U}</answer>"
    )


def test_ci_test_no_names_an_open_path():
    p = {
        "graph": {
            "type": "DAG",
            "nodes": ["A", "B", "C", "D"],
            "directed": [["A", "B"], ["C", "B"], ["B", "D"]],
        },
        "query": {"kind": "ci_test", "x": "A", "y": "C", "given": ["D"]},
    }
    trace = gold_trace(p, plain=True)
    assert "- path A -> B <- C is open given {D}\n" in trace
    assert parse_trace(trace).answer == "no" and score_trace(trace, p).total == 6


def test_directed_path_yes_and_no():
    g = {
        "type": "DG",
        "nodes": ["A", "B", "C", "D"],
        "directed": [["A", "B"], ["B", "C"], ["C", "A"], ["D", "C"]],
    }
    yes = gold_trace(
        {"graph": g, "query": {"kind": "directed_path", "treatment": "A", "outcome": "C"}}, plain=True
    )
    assert "- directed path A -> B -> C\n" in yes and parse_trace(yes).answer == "yes"
    no = gold_trace(
        {"graph": g, "query": {"kind": "directed_path", "treatment": "A", "outcome": "D"}}, plain=True
    )
    assert "- no directed path from A to D\n" in no
    assert parse_trace(no).answer == "no"
    for seed in range(8):  # the other wording names the descendants
        for query in ({"kind": "directed_path", "treatment": "A", "outcome": "C"},
                      {"kind": "directed_path", "treatment": "A", "outcome": "D"}):  # fmt: skip
            assert score_trace(
                gold_trace({"graph": g, "query": query}, seed), {"graph": g, "query": query}
            ).passed


def _brute_strata(cpts, x, y, zs):
    names = sorted(cpts)
    joint = {}
    for values in itertools.product((0, 1), repeat=len(names)):
        a = dict(zip(names, values))
        p = 1.0
        for v in names:
            key = ",".join(str(a[u]) for u in cpts[v]["parents"])
            p1 = cpts[v]["p1"][key]
            p *= p1 if a[v] else 1 - p1
        joint[values] = (a, p)
    out = []
    for zv in itertools.product((0, 1), repeat=len(zs)):

        def mass(cond):
            return sum(p for a, p in joint.values() if all(a[k] == v for k, v in cond.items()))

        zc = dict(zip(zs, zv))
        pz = mass(zc)
        p1 = mass({**zc, x: 1, y: 1}) / mass({**zc, x: 1})
        p0 = mass({**zc, x: 0, y: 1}) / mass({**zc, x: 0})
        out.append((zv, pz, p1, p0))
    return out


def test_stratum_table_matches_brute_force_and_the_adjustment_formula():
    for p in problems(CausalGraphDataset, 25, seed=43, query_kinds=("ate",), max_nodes=7):
        g, q, cpts = CausalGraph.from_dict(p["graph"]), p["query"], p["cpts"]
        x, y = q["treatment"], q["outcome"]
        z = sorted(C.minimal_backdoor_set(g, x, y))
        table = stratum_table(cpts, x, y, z)
        brute = _brute_strata(cpts, x, y, z)
        assert [row[0] for row in table] == [row[0] for row in brute]
        assert [row[1:] for row in table] == [pytest.approx(row[1:]) for row in brute]
        psi = sum((p1 - p0) * pz for _, pz, p1, p0 in table)
        assert (
            psi
            == pytest.approx(C.adjusted_ate(cpts, x, y, z))
            == pytest.approx(C.interventional_ate(cpts, x, y))
        )
        trace = gold_trace(p, 0)
        stated = float(re.search(r"ψ = [^\n]*= (-?\d+\.\d+)\n", trace).group(1))
        assert stated == pytest.approx(psi, abs=5e-4)


def test_ate_result_names_one_adjustment_set_and_a_wrong_one_fails():
    p = problems(CausalGraphDataset, 1, seed=44, query_kinds=("ate",))[0]
    trace = gold_trace(p, 1)
    result = parse_trace(trace).result
    assert len(re.findall(r"\{[^{}]*\}", result)) == 1
    g = CausalGraph.from_dict(p["graph"])
    x = p["query"]["treatment"]
    child = sorted(g.children(x))[0]
    broken = trace.replace(result, re.sub(r"\{[^{}]*\}", "{" + child + "}", result))
    assert score_trace(broken, p).result is False


def test_corrupted_gold_traces_lose_points():
    # the checks above have teeth: a wrong RESULT/answer, a missing edge and a wrong query all fail
    p = problems(CausalGraphDataset, 1, seed=45, query_kinds=("mediator",))[0]
    trace = gold_trace(p, 2)
    t = parse_trace(trace)
    wrong = p["query"]["treatment"]
    assert not grade_answer(p, wrong)
    swapped = trace.replace(f"RESULT: {t.result}", f"RESULT: {wrong}").replace(
        f"<answer>{t.answer}</answer>", f"<answer>{wrong}</answer>"
    )
    assert score_trace(swapped, p).total == 3  # graph, query, strategy: the certificate names the old M
    first_edge = re.split(r"[;,] ", t.graph)[0]
    assert score_trace(trace.replace(t.graph, t.graph.replace(first_edge, "")), p).graph is False
    assert score_trace(trace.replace(t.query, "mediator(treatment=X9, outcome=Y9)"), p).query is False


def test_gold_trace_rejects_problems_without_a_valid_answer():
    p = {
        "graph": {"type": "DAG", "nodes": ["X", "Y"], "directed": [["Y", "X"]]},
        "query": {"kind": "backdoor_set", "treatment": "X", "outcome": "Y"},
    }
    with pytest.raises(ValueError, match="no valid answer"):
        gold_trace(p, 0)
    with pytest.raises(GraphParseError):
        gold_trace(
            {"graph": {"type": "DAG", "nodes": ["A"], "directed": [["A", "B"]]}, "query": {"kind": "cycle"}}
        )


# ---------------------------------------------------------------------------------------------
# minimal / maximal front-door sets and maximal backdoor sets in ADMGs
def _with_variant(p: dict, variant: str) -> dict:
    return {**p, "query": {**p["query"], "variant": variant}}


def _variant_problems(n: int, seed: int, lo: int, hi: int, cls=CausalGraphDataset) -> list[dict]:
    """Generated front-door problems as minimal and maximal queries, and ADMG backdoor problems as
    maximal queries (the generator itself draws only any/minimal)."""
    out = []
    for p in problems(cls, n, seed, min_nodes=lo, max_nodes=hi, query_kinds=("frontdoor_set",)):
        out += [_with_variant(p, "minimal"), _with_variant(p, "maximal")]
    for p in problems(cls, n, seed + 1, min_nodes=lo, max_nodes=hi, query_kinds=("backdoor_set",),
                      families=("admg",), max_bidirected=6):  # fmt: skip
        out.append(_with_variant(p, "maximal"))
    return out


@pytest.mark.parametrize(
    ("cls", "lo", "hi", "n"),
    [(CausalGraphDataset, 4, 8, 60), (CausalStoryDataset, 4, 8, 30), (CausalGraphDataset, 9, 12, 20)],
)
def test_gold_traces_score_six_for_frontdoor_variants_and_admg_maximal_backdoor(cls, lo, hi, n):
    seen = Counter()
    for i, p in enumerate(_variant_problems(n, 77 + lo, lo, hi, cls)):
        trace = gold_trace(p, random.Random(i))
        structural_checks(trace, p)
        derivation_paths_exist(trace, p)
        score = score_trace(trace, p)
        assert score.total == 6, (score.reasons, trace)
        q = p["query"]
        seen[q["kind"], q["variant"]] += 1
        if "cannot be added" in trace or "breaks condition" in trace or "only at" in trace:
            seen["per-node claims", q["kind"], q["variant"]] += 1
    assert {k for k in seen if len(k) == 2} == {
        ("frontdoor_set", "minimal"),
        ("frontdoor_set", "maximal"),
        ("backdoor_set", "maximal"),
    }
    # the new certificate lines are exercised, not only the cases with nothing left to show
    assert (
        seen["per-node claims", "frontdoor_set", "maximal"]
        and seen["per-node claims", "frontdoor_set", "minimal"]
    )
    if lo == 4:  # (a maximal ADMG backdoor set that leaves candidates out)
        assert seen["per-node claims", "backdoor_set", "maximal"], seen


def _random_admg(rng: random.Random, n: int) -> CausalGraph:
    names = [f"V{i}" for i in range(n)]
    rng.shuffle(names)
    p, q = rng.choice((0.25, 0.4)), rng.choice((0.1, 0.25))
    directed = {(names[i], names[j]) for i, j in itertools.combinations(range(n), 2) if rng.random() < p}
    bidirected = {(names[i], names[j]) for i, j in itertools.combinations(range(n), 2) if rng.random() < q}
    kind = "ADMG" if bidirected else "DAG"
    return CausalGraph(kind, tuple(names), frozenset(directed), frozenset(bidirected)).validate()


def _shielded(g: CausalGraph, x: str, y: str, rng: random.Random) -> CausalGraph:
    """Often drop the arrowheads into x (and into the mediators) that do not come from x -> ... -> y,
    keeping x <-> y: the textbook set-up in which front-door sets exist."""
    if rng.random() < 0.15:
        return g
    meds = C.mediators(g, x, y)
    shielded = {x} | (meds if rng.random() < 0.8 else set())
    directed = frozenset(e for e in g.directed if e[1] not in shielded or e[0] in {x} | meds)
    bidirected = frozenset(e for e in g.bidirected if not set(e) & shielded) | {tuple(sorted((x, y)))}
    return CausalGraph("ADMG", g.nodes, directed, bidirected).validate()


def _within_cap(g: CausalGraph, pairs, cap: int = 8) -> bool:
    return all(len(list(C.simple_paths(g, a, b, limit=cap + 1))) <= cap for a, b in pairs if a != b)


@pytest.mark.parametrize("seed", range(3))
def test_every_minimal_and_maximal_set_is_certified_and_no_other_valid_set_is(seed):
    # Brute force on random DAGs/ADMGs (4-8 nodes): every valid set is judged minimal/maximal by
    # comparing it with every other valid set; the gold trace written for it (answer=) must score
    # 6/6 exactly when it is the extreme the query asks for (completeness of the certificates), and
    # for any other valid set its derivation must fail when the graph is within the path cap
    # (soundness: true claims cannot certify it).
    rng = random.Random(900 + seed)
    counts = Counter()
    for _ in range(120):
        g = g_bd = _random_admg(rng, rng.randint(4, 8))
        pairs = [(a, b) for a in g.nodes for b in g.nodes if a != b and C.has_directed_path(g, a, b)]
        if not pairs:
            continue
        x, y = rng.choice(pairs)
        rest = sorted(set(g.nodes) - {x, y})
        subsets = [frozenset(c) for k in range(len(rest) + 1) for c in itertools.combinations(rest, k)]
        g_fd = _shielded(g, x, y, rng)
        for kind, variant, predicate in (
            ("frontdoor_set", "minimal", C.is_frontdoor_set),
            ("frontdoor_set", "maximal", C.is_frontdoor_set),
            ("backdoor_set", "maximal", C.is_backdoor_set),
        ):
            g = g_fd if kind == "frontdoor_set" else g_bd
            valid = [z for z in subsets if predicate(g, x, y, z)]
            if variant == "minimal":
                extreme = {z for z in valid if not any(w < z for w in valid)}
            else:
                extreme = {z for z in valid if not any(w > z for w in valid)}
            p = {
                "graph": g.to_dict(),
                "query": {"kind": kind, "treatment": x, "outcome": y, "variant": variant},
            }
            for z in valid:
                score = score_trace(gold_trace(p, rng.randrange(10**6), answer=z), p)
                if z in extreme:
                    assert score.total == 6, (score.reasons, g.edge_text(), x, y, kind, variant, sorted(z))
                    counts[kind, variant, "extreme"] += 1
                else:
                    assert not score.result
                    cap_pairs = [(x, y)] + [(x, v) for v in z] + [(v, y) for v in z]
                    if _within_cap(g, cap_pairs if kind == "frontdoor_set" else [(x, y)]):
                        assert not score.derivation, (g.edge_text(), x, y, kind, variant, sorted(z))
                        counts[kind, variant, "refused"] += 1
    for key in (("frontdoor_set", "minimal"), ("frontdoor_set", "maximal"), ("backdoor_set", "maximal")):
        assert counts[(*key, "extreme")] >= 5, counts
        assert counts[(*key, "refused")] >= 5, counts
