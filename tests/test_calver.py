"""CALVER scorer and reward: hand-built traces for every query kind, targeted corruptions, modes,
answer-field stripping, the TRL reward, and adversarial input.

Every expectation below is worked out by hand from the textbook definitions (comments say how), not
recomputed with the code under test.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping

import pytest
from cpu_clock import cpu_clock
from hypothesis import given, settings
from hypothesis import strategies as st

from faithgrpo.rewards.calver.problem import CalverConfig, prepare_problem, strip_answer_fields
from faithgrpo.rewards.calver.reward import (
    CHECK_NAMES,
    CalverScore,
    calver_reward,
    make_calver_reward,
    score_trace,
)


def trace(graph, query, strategy, derivation, result, answer, *, think=True):
    body = (
        f"GRAPH: {graph}\nQUERY: {query}\nSTRATEGY: {strategy}\nDERIVATION:\n"
        + "\n".join(f"- {line}" for line in derivation)
        + f"\nRESULT: {result}"
    )
    return (f"<think>\n{body}\n</think>\n" if think else body + "\n") + f"<answer>{answer}</answer>"


def problem(graph_type, nodes, directed=(), bidirected=(), **query):
    return {
        "graph": {
            "type": graph_type,
            "nodes": list(nodes),
            "directed": [list(e) for e in directed],
            "bidirected": [list(e) for e in bidirected],
        },
        "query": query,
        "text": "a prompt",
    }


# W -> U -> {X, Y}; X -> M -> Y. Backdoor paths from X: X <- U -> Y only (W reaches X only via U).
# Non-descendants of X other than X, Y: {U, W}. Valid backdoor sets: {U}, {U, W} ({W} leaves the
# path open). Minimal: {U}. Maximal: {U, W}.
BACKDOOR_EDGES = [("W", "U"), ("U", "X"), ("U", "Y"), ("X", "M"), ("M", "Y")]
BACKDOOR_GRAPH = "W -> U; U -> X; U -> Y; X -> M; M -> Y"


def backdoor_problem(variant=None, **extra):
    q = {"kind": "backdoor_set", "treatment": "X", "outcome": "Y"}
    if variant:
        q["variant"] = variant
    p = problem("DAG", "WUXMY", BACKDOOR_EDGES, **q)
    p.update(extra)
    return p


# The certificate for {U}: U is no descendant of X (De(X) = {M, Y}) and the one backdoor path
# X <- U -> Y has the non-collider U, so {U} blocks it. {U, W} adds W (no descendant either).
BACKDOOR_CERTIFICATE = ["U is not a descendant of X", "backdoor path X <- U -> Y is blocked given {U}"]
CERTIFICATES = {
    "{U}": BACKDOOR_CERTIFICATE,
    "{U, W}": ["descendants of X = {M, Y}", "backdoor path X <- U -> Y is blocked given {U, W}"],
}
CERTIFICATES["{W, U}"] = CERTIFICATES["{U, W}"]
# minimal: without U the path is open; maximal: everything but X, Y and De(X)
MINIMAL_CERTIFICATE = [*BACKDOOR_CERTIFICATE, "backdoor path X <- U -> Y is open given {}"]
MAXIMAL_CERTIFICATE = CERTIFICATES["{U, W}"]


def backdoor_trace(result="{U}", answer=None, *, graph=BACKDOOR_GRAPH, query=None, strategy=None,
                   derivation=None, variant=None):  # fmt: skip
    if query is None:
        query = "backdoor_set(treatment=X, outcome=Y" + (f", variant={variant})" if variant else ")")
    if derivation is None:
        derivation = {"minimal": MINIMAL_CERTIFICATE, "maximal": MAXIMAL_CERTIFICATE}.get(
            variant, CERTIFICATES.get(result, BACKDOOR_CERTIFICATE)
        )
    return trace(
        graph,
        query,
        strategy or "backdoor criterion",
        derivation,
        result,
        result if answer is None else answer,
    )


# ATE: U ~ Bern(0.5); P(X=1|U) = 0.2, 0.8; P(Y=1|X,U) = 0.1 (0,0), 0.5 (0,1), 0.4 (1,0), 0.9 (1,1).
# ψ = Σ_u [P(y|x=1,u) − P(y|x=0,u)] P(u) = 0.5·(0.4 − 0.1) + 0.5·(0.9 − 0.5) = 0.35 > 0.2 + 0.05.
ATE_CPTS = {
    "U": {"parents": [], "p1": 0.5},
    "X": {"parents": ["U"], "p1": {"0": 0.2, "1": 0.8}},
    "Y": {"parents": ["X", "U"], "p1": {"0,0": 0.1, "0,1": 0.5, "1,0": 0.4, "1,1": 0.9}},
}


def ate_problem(threshold=0.2, margin=0.05):
    p = problem(
        "DAG",
        "UXY",
        [("U", "X"), ("U", "Y"), ("X", "Y")],
        kind="ate",
        treatment="X",
        outcome="Y",
        threshold=threshold,
        margin=margin,
    )
    p["cpts"] = ATE_CPTS
    return p


# Strata of U: P(U=u) = 0.5; P(Y=1 | X=1, U=0) = 0.4, P(Y=1 | X=0, U=0) = 0.1, P(Y=1 | X=1, U=1) = 0.9,
# P(Y=1 | X=0, U=1) = 0.5 (the CPT of Y, read directly: X and U are Y's parents).
ATE_DERIVATION = [
    "U -> X and U -> Y: the backdoor path needs U",
    "U is not a descendant of X",
    "backdoor path X <- U -> Y is blocked given {U}",
    "P(U=0) = 0.5",
    "P(U=1) = 0.5",
    "P(Y=1 | X=1, U=0) = 0.4",
    "P(Y=1 | X=0, U=0) = 0.1",
    "P(Y=1 | X=1, U=1) = 0.9",
    "P(Y=1 | X=0, U=1) = 0.5",
    "ψ = 0.5·0.3 + 0.5·0.4 = 0.35",
]

# One hand-checked (problem, full-marks trace) per query kind and variant.
GOLD = {
    "backdoor_any": (backdoor_problem(), backdoor_trace("{U}")),
    "backdoor_minimal": (backdoor_problem("minimal"), backdoor_trace("{U}", variant="minimal")),
    "backdoor_maximal": (backdoor_problem("maximal"), backdoor_trace("{U, W}", variant="maximal")),
    # ADMG X -> M -> Y, X <-> Y: (i) {M} intercepts the one directed path X -> M -> Y; (ii) the only
    # backdoor path from X to M, X <-> Y <- M, has the collider Y, so it is blocked; (iii) the only
    # backdoor path from M to Y, M <- X <-> Y, has the non-collider X, so {X} blocks it.
    "frontdoor": (
        problem(
            "ADMG",
            "XMY",
            [("X", "M"), ("M", "Y")],
            [("X", "Y")],
            kind="frontdoor_set",
            treatment="X",
            outcome="Y",
        ),
        trace(
            "X -> M; M -> Y; X <-> Y",
            "frontdoor_set(treatment=X, outcome=Y)",
            "front-door criterion",
            [
                "directed path X -> M -> Y",
                "backdoor path X <-> Y <- M is blocked given {}",
                "backdoor path M <- X <-> Y is blocked given {X}",
            ],
            "{M}",
            "{M}",
        ),
    ),
    # A -> B -> C, A -> D -> C: both paths between A and C have a non-collider inner node, {B, D}.
    "dsep_set": (
        problem(
            "DAG", "ABCD", [("A", "B"), ("B", "C"), ("A", "D"), ("D", "C")], kind="dsep_set", x="A", y="C"
        ),
        trace(
            "A -> B; B -> C; A -> D; D -> C",
            "dsep_set(x=A, y=C)",
            "d-separation",
            ["path A -> B -> C is blocked given {B, D}", "path A -> D -> C is blocked given {B, D}"],
            "{B, D}",
            "{'B', 'D'}",
        ),
    ),
    "ci_test": (
        problem(
            "DAG",
            "ABCD",
            [("A", "B"), ("B", "C"), ("A", "D"), ("D", "C")],
            kind="ci_test",
            x="A",
            y="C",
            given=["B", "D"],
        ),
        trace(
            "A -> B -> C; A -> D -> C",
            "ci_test(x=A, y=C, given={B, D})",
            "d-separation (Bayes ball)",
            ["path A -> B -> C is blocked given {B, D}", "path C <- D <- A is blocked given {B, D}"],
            "yes",
            "Yes.",
        ),
    ),
    "directed_path_yes": (
        problem(
            "DAG",
            "ABCD",
            [("A", "B"), ("B", "C"), ("D", "C")],
            kind="directed_path",
            treatment="A",
            outcome="C",
        ),
        trace(
            "A -> B; B -> C; D -> C",
            "directed_path(treatment=A, outcome=C)",
            "BFS over directed edges",
            ["directed path A -> B -> C"],
            "yes",
            "yes",
        ),
    ),
    "directed_path_no": (
        problem(
            "DAG",
            "ABCD",
            [("A", "B"), ("B", "C"), ("D", "C")],
            kind="directed_path",
            treatment="D",
            outcome="A",
        ),
        trace(
            "A -> B; B -> C; D -> C",
            "directed_path(treatment=D, outcome=A)",
            "depth-first search",
            ["D has the single child C, and C has no children", "descendants of D = {C}"],
            "no",
            "No",
        ),
    ),
    "mediator": (
        problem(
            "DAG", "XMY", [("X", "M"), ("M", "Y"), ("X", "Y")], kind="mediator", treatment="X", outcome="Y"
        ),
        trace(
            "X -> M; M -> Y; X -> Y",
            "mediator(treatment=X, outcome=Y)",
            "mediation analysis",
            ["directed path X -> M -> Y"],
            "M",
            "M",
        ),
    ),
    "cycle": (
        problem("DG", "ABCD", [("A", "B"), ("B", "C"), ("C", "A"), ("C", "D")], kind="cycle"),
        trace(
            "A -> B; B -> C; C -> A; C -> D",
            "cycle()",
            "DFS, looking for a back edge",
            ["DFS from A visits B then C", "cycle A -> B -> C -> A"],
            "A -> B -> C -> A",
            "B -> C -> A -> B",
        ),
    ),
    # ADMG A -> B -> C, A <-> D -> C: paths A-B-C and A<->D->C, inner nodes B and D non-colliders.
    "msep_set": (
        problem(
            "ADMG", "ABCD", [("A", "B"), ("B", "C"), ("D", "C")], [("A", "D")], kind="msep_set", x="A", y="C"
        ),
        trace(
            "A -> B -> C; D -> C; A <-> D",
            "msep_set(x=A, y=C)",
            "m-separation",
            ["path A -> B -> C is blocked given {B, D}", "path A <-> D -> C is blocked given {B, D}"],
            "{B, D}",
            "{B, D}",
        ),
    ),
    "ate": (
        ate_problem(),
        trace(
            "U -> X; U -> Y; X -> Y",
            "ate(treatment=X, outcome=Y, threshold=0.2, margin=0.05)",
            "backdoor adjustment formula",
            ATE_DERIVATION,
            "yes, ψ = 0.35, Z = {U}",
            "yes (ψ = 0.35)",
        ),
    ),
}


def failed(score: CalverScore) -> set[str]:
    return set(score.failed())


# ---------------------------------------------------------------------------------------------
# full marks
@pytest.mark.parametrize("name", sorted(GOLD))
def test_gold_trace_scores_six(name):
    prob, text = GOLD[name]
    score = score_trace(text, prob)
    assert score.total == 6, score.reasons
    assert score.reward == 1.0 and score.passed and score.reasons == {}


@pytest.mark.parametrize("name", sorted(GOLD))
def test_gold_trace_from_json_and_conversational(name):
    prob, text = GOLD[name]
    conversational = [{"role": "assistant", "content": text}]
    assert score_trace(conversational, json.dumps(prob)).total == 6


def test_trace_without_think_tags_fails_every_check():
    prob, _ = GOLD["mediator"]
    text = trace("X -> M; M -> Y; X -> Y", "mediator(treatment=X, outcome=Y)", "mediator",
                 ["directed path X -> M -> Y"], "M", "M", think=False)  # fmt: skip
    s = score_trace(text, prob)
    assert s.total == 0 and "<think>" in s.reasons["graph"]


def test_valid_but_unlisted_answer_gets_full_marks():
    # The row lists {U}; {U, W} is another valid backdoor set (see BACKDOOR_EDGES).
    prob = backdoor_problem(answer="{U}")
    assert score_trace(backdoor_trace("{U, W}"), prob).total == 6
    assert score_trace(backdoor_trace("{W, U}", "{'U', 'W'}"), prob).total == 6


def test_minimal_and_maximal_variants_reject_the_other_one():
    # {U, W} is valid but not minimal; {U} is valid but not maximal.
    # ({U, W} with a minimality claim for U only: W is not shown needed; {U} has no maximality claim)
    s = score_trace(backdoor_trace("{U, W}", variant="minimal"), backdoor_problem("minimal"))
    assert failed(s) == {"derivation", "result", "answer"}
    s = score_trace(backdoor_trace("{U}", variant="maximal"), backdoor_problem("maximal"))
    assert failed(s) == {"derivation", "result", "answer"}


# ---------------------------------------------------------------------------------------------
# targeted corruptions fail exactly their check
@pytest.mark.parametrize(
    ("corruption", "expected"),
    [
        ({"graph": "W -> U; U -> X; U -> Y; X -> M"}, {"graph"}),  # missing M -> Y
        ({"graph": BACKDOOR_GRAPH + "; X -> Y"}, {"graph"}),  # extra edge
        ({"graph": "W -> U; U -> X; U -> Y; X -> M; Y -> M"}, {"graph"}),  # reversed edge
        ({"query": "backdoor_set(treatment=M, outcome=Y)"}, {"query"}),  # wrong role
        ({"query": "backdoor_set(treatment=Y, outcome=X)"}, {"query"}),  # roles swapped
        ({"query": "frontdoor_set(treatment=X, outcome=Y)"}, {"query"}),  # wrong kind
        ({"query": "backdoor_set(X, Y)"}, {"query"}),  # no roles
        ({"query": "backdoor_set(treatment=X, outcome=Y, variant=minimal)"}, {"query"}),  # wrong variant
        ({"strategy": "cycle detection"}, {"strategy"}),  # a method for another kind
        ({"strategy": "intuition"}, {"strategy"}),
        ({"strategy": "backdoor criterion " + "x" * 400}, {"strategy"}),  # over the length cap
        ({"derivation": ["conditioning on Q blocks the backdoor path"]}, {"derivation"}),  # unknown Q
        ({"derivation": ["the backdoor path X <- V -> Y is open"]}, {"derivation"}),  # unknown V, arrow
        ({"derivation": ["adjusting for {U, V9} blocks it"]}, {"derivation"}),  # unknown set item
        ({"derivation": ["conditioning on X12 blocks it"]}, {"derivation"}),  # identifier-shaped
        ({"derivation": ["conditioning on the confounder blocks the path"]}, {"derivation"}),  # no node
        # invalid (M is a descendant); the answer repeats it; the certificate is for {U}
        ({"result": "{M}"}, {"derivation", "result", "answer"}),
        # RESULT and answer differ: a certificate for RESULT certifies nothing about the answer
        ({"result": "{U}", "answer": "{U, W}"}, {"derivation", "result", "answer"}),
        ({"result": "{U}", "answer": "{M}"}, {"derivation", "result", "answer"}),
        ({"result": "{W}", "answer": "{U}"}, {"derivation", "result", "answer"}),
        ({"result": "U or W, I think", "answer": "{U}"}, {"derivation", "result", "answer"}),  # unparsable
        ({"answer": "not sure"}, {"derivation", "result", "answer"}),  # unparsable answer
        # false claims, or claims that do not certify {U}
        ({"derivation": ["U is a descendant of X", *BACKDOOR_CERTIFICATE[1:]]}, {"derivation"}),
        ({"derivation": ["backdoor path X <- U -> Y is open given {U}"]}, {"derivation"}),
        ({"derivation": BACKDOOR_CERTIFICATE[1:]}, {"derivation"}),  # U not shown a non-descendant
        ({"derivation": BACKDOOR_CERTIFICATE[:1]}, {"derivation"}),  # the path not shown blocked
        ({"derivation": [*BACKDOOR_CERTIFICATE, "edge Y -> X"]}, {"derivation"}),  # one false extra
    ],
)
def test_corruption_fails_exactly_its_check(corruption, expected):
    result = corruption.pop("result", "{U}")
    s = score_trace(backdoor_trace(result, **corruption), backdoor_problem())
    assert failed(s) == expected, s.reasons
    assert set(s.reasons) == expected and all(s.reasons[c] for c in expected)
    assert s.total == 6 - len(expected)


def test_derivation_prose_is_ignored_and_prose_alone_certifies_nothing():
    lines = [
        "A backdoor path starts with an arrow into X: X <- U -> Y.",
        "I condition on U; Z = {U} then blocks it, and P(Y | do(X)) = Σ_u P(Y | X, U=u) P(U=u).",
        "The DAG has no other path, so the ATE is identified (Pearl, Def. 3.3.1), Q9 and V7 aside.",
    ]
    assert score_trace(backdoor_trace(derivation=lines + BACKDOOR_CERTIFICATE), backdoor_problem()).total == 6
    s = score_trace(backdoor_trace(derivation=lines), backdoor_problem())
    assert failed(s) == {"derivation"} and "no claim" in s.reasons["derivation"]


def test_query_restated_with_sets_and_numbers():
    prob, _ = GOLD["ate"]
    wrong_threshold = trace("U -> X; U -> Y; X -> Y", "ate(treatment=X, outcome=Y, threshold=0.3)",
                            "g-formula", ATE_DERIVATION, "yes, ψ = 0.35, Z = {U}", "yes")  # fmt: skip
    assert failed(score_trace(wrong_threshold, prob)) == {"query"}
    prob, text = GOLD["ci_test"]
    wrong_given = text.replace("given={B, D}", "given={B}")
    assert failed(score_trace(wrong_given, prob)) == {"query"}


# ---------------------------------------------------------------------------------------------
# per-kind wrong answers (hand-checked)
@pytest.mark.parametrize(
    ("name", "result", "answer", "expected"),
    [
        # a wrong answer fails result, answer and the derivation (the certificate is for the gold RESULT)
        ("frontdoor", "{}", "{}", {"derivation", "result", "answer"}),  # X -> M -> Y not intercepted
        ("dsep_set", "{B}", "{B}", {"derivation", "result", "answer"}),  # A -> D -> C stays open
        ("ci_test", "no", "no", {"derivation", "result", "answer"}),  # no open path is shown
        ("directed_path_yes", "no", "no", {"derivation", "result", "answer"}),
        ("mediator", "Y", "Y", {"derivation", "result", "answer"}),  # the outcome is no mediator
        ("mediator", "M", "X", {"derivation", "result", "answer"}),  # RESULT and answer differ
        ("cycle", "A -> C -> B -> A", "A -> C -> B -> A", {"derivation", "result", "answer"}),  # reversed
        ("cycle", "A -> B -> C -> A", "C -> D -> C", {"derivation", "result", "answer"}),
        ("msep_set", "{B}", "{B}", {"derivation", "result", "answer"}),  # A <-> D -> C open
        ("msep_set", "{B, D, Q}", "{B, D, Q}", {"derivation", "result", "answer"}),  # unknown node
        ("ate", "no, ψ = 0.35, Z = {U}", "no", {"derivation", "result", "answer"}),  # 0.35 > 0.2
        ("ate", "yes, ψ = 0.5, Z = {U}", "yes", {"derivation", "result"}),  # ψ off by 0.15 > 0.01
        ("ate", "yes, ψ = 0.35, Z = {}", "yes", {"derivation", "result"}),  # {} leaves X <- U -> Y open
        ("ate", "yes, ψ = 0.35", "yes", {"derivation", "result"}),  # no adjustment set named
        # the answer's ψ is wrong, so it is not RESULT
        ("ate", "yes, ψ = 0.35, Z = {U}", "yes, ψ = 0.9", {"derivation", "result", "answer"}),
    ],
)
def test_wrong_answers_per_kind(name, result, answer, expected):
    prob, text = GOLD[name]
    gold_result = text.split("RESULT: ")[1].split("\n")[0]
    gold_answer = text.split("<answer>")[1].split("</answer>")[0]
    text = text.replace(f"RESULT: {gold_result}", f"RESULT: {result}").replace(
        f"<answer>{gold_answer}</answer>", f"<answer>{answer}</answer>"
    )
    s = score_trace(text, prob)
    assert failed(s) == expected, s.reasons


def test_ate_margin_is_part_of_the_certificate():
    # ψ = 0.35 is within margin 0.2 of threshold 0.3: the decision is not certified.
    prob = ate_problem(threshold=0.3, margin=0.2)
    text = trace("U -> X; U -> Y; X -> Y", "ate(treatment=X, outcome=Y, threshold=0.3, margin=0.2)",
                 "backdoor adjustment", ATE_DERIVATION, "yes, ψ = 0.35, Z = {U}", "yes")  # fmt: skip
    s = score_trace(text, prob)
    assert failed(s) == {"result"} and "margin" in s.reasons["result"]


# ---------------------------------------------------------------------------------------------
# graph check: node set, kind, query_local
def test_graph_must_list_every_problem_node_and_no_other():
    prob = problem("DAG", "XYZ", [("X", "Y")], kind="directed_path", treatment="X", outcome="Y")
    base = dict(query="directed_path(treatment=X, outcome=Y)", strategy="DFS",
                derivation=["directed path X -> Y"], result="yes", answer="yes")  # fmt: skip
    assert score_trace(trace("X -> Y; Z", **base), prob).total == 6  # isolated Z as a lone name
    s = score_trace(trace("X -> Y", **base), prob)
    assert failed(s) == {"graph"} and "omits" in s.reasons["graph"]
    s = score_trace(trace("X -> Y; Z; Q", **base), prob)
    assert failed(s) == {"graph"} and "Q" in s.reasons["graph"]


def test_cyclic_dag_and_bidirected_edge_in_dag_fail_graph():
    prob, text = GOLD["mediator"]
    s = score_trace(text.replace("X -> Y\n", "Y -> X\n", 1), prob)
    assert "graph" in failed(s) and "cycle" in s.reasons["graph"]
    s = score_trace(text.replace("X -> Y\n", "X <-> Y\n", 1), prob)
    assert "graph" in failed(s)


def test_query_local_binds_only_the_ancestral_set():
    # Query nodes X, Y; An({X, Y}) = {W, U, X, M, Y}. Add R, S outside it: Y -> R -> S.
    prob = problem(
        "DAG",
        "WUXMYRS",
        [*BACKDOOR_EDGES, ("Y", "R"), ("R", "S")],
        kind="backdoor_set",
        treatment="X",
        outcome="Y",
    )
    local_trace = backdoor_trace("{U}")  # omits R and S entirely
    assert failed(score_trace(local_trace, prob)) == {"graph"}  # exact mode needs everything
    assert score_trace(local_trace, prob, graph_check="query_local").total == 6
    full = backdoor_trace("{U}", graph=BACKDOOR_GRAPH + "; Y -> R; R -> S")
    assert score_trace(full, prob).total == 6
    assert score_trace(full, prob, graph_check="query_local").total == 6
    # differences outside the ancestral set are ignored, inside (or into it) they are not
    outside = backdoor_trace("{U}", graph=BACKDOOR_GRAPH + "; Y -> S")
    assert score_trace(outside, prob, graph_check="query_local").total == 6
    inside = backdoor_trace("{U}", graph="W -> U; U -> X; U -> Y; X -> M")
    assert failed(score_trace(inside, prob, graph_check="query_local")) == {"graph"}
    into = backdoor_trace("{U}", graph=BACKDOOR_GRAPH + "; S -> X")
    assert failed(score_trace(into, prob, graph_check="query_local")) == {"graph"}
    unknown = backdoor_trace("{U}", graph=BACKDOOR_GRAPH + "; Q -> S")
    assert failed(score_trace(unknown, prob, graph_check="query_local")) == {"graph"}


# ---------------------------------------------------------------------------------------------
# constructed mode
def story_problem():
    # hidden source graph: smoking -> tar -> cancer, genes -> smoking, genes -> cancer, stress isolated
    p = problem(
        "DAG",
        ["smoking", "tar", "cancer", "genes", "stress"],
        [("smoking", "tar"), ("tar", "cancer"), ("genes", "smoking"), ("genes", "cancer")],
        kind="backdoor_set",
        treatment="smoking",
        outcome="cancer",
    )
    p["mode"] = "constructed"
    return p


STORY_CERTIFICATE = [
    "genes is not a descendant of smoking",
    "backdoor path smoking <- genes -> cancer is blocked given {genes}",
]


def story_trace(graph, result, answer=None, derivation=None):
    return trace(
        graph,
        "backdoor_set(treatment=smoking, outcome=cancer)",
        "backdoor criterion",
        STORY_CERTIFICATE if derivation is None else derivation,
        result,
        result if answer is None else answer,
    )


STORY_GRAPH = "genes -> smoking -> tar -> cancer; genes -> cancer; stress"


def test_constructed_mode_correct_trace():
    assert score_trace(story_trace(STORY_GRAPH, "{genes}"), story_problem()).total == 6
    assert score_trace(story_trace(STORY_GRAPH, "{genes}"), story_problem(), verify_on="trace").total == 6


def test_constructed_mode_reward_verifies_on_the_hidden_graph():
    # A made-up graph with an extra confounder stress -> smoking, stress -> cancer: GRAPH fails (it
    # is not the story's graph); RESULT {genes} and its certificate hold on the hidden graph.
    invented = STORY_GRAPH.replace("; stress", "; stress -> smoking; stress -> cancer")
    s = score_trace(story_trace(invented, "{genes}"), story_problem())
    assert failed(s) == {"graph"}, s.reasons
    # The paper's reference-free setting verifies on the trace's own graph instead: there {genes}
    # leaves smoking <- stress -> cancer open, and the certificate does not name that path.
    s = score_trace(story_trace(invented, "{genes}"), story_problem(), verify_on="trace")
    assert failed(s) == {"derivation", "result"}, s.reasons


def test_an_invented_graph_that_makes_a_wrong_answer_look_valid_earns_at_most_three():
    # The trace drops genes -> cancer: on its own graph {} is valid and "no backdoor path" is true.
    thin = "genes -> smoking -> tar -> cancer; stress"
    text = story_trace(thin, "{}", derivation=["no backdoor path from smoking to cancer"])
    s = score_trace(text, story_problem())
    assert failed(s) == {"graph", "derivation", "result", "answer"}, s.reasons
    assert "false" in s.reasons["derivation"]
    # ... while the candidate-local (paper) setting pays 5/6 for the same fake: why the reward does not use it
    assert failed(score_trace(text, story_problem(), verify_on="trace")) == {"answer"}


def test_constructed_mode_needs_a_well_formed_graph_only_when_verifying_on_it():
    cyclic = STORY_GRAPH + "; cancer -> genes"
    assert failed(score_trace(story_trace(cyclic, "{genes}"), story_problem())) == {"graph"}
    s = score_trace(story_trace(cyclic, "{genes}"), story_problem(), verify_on="trace")
    assert failed(s) == {"graph", "derivation", "result"}
    assert "verification graph" in s.reasons["result"]


def test_supplied_mode_is_the_default_and_explicit_mode_matches():
    prob = backdoor_problem()
    explicit = dict(prob, mode="supplied")
    text = backdoor_trace("{U}", graph="W -> U; U -> X; U -> Y; X -> M")  # wrong graph
    assert score_trace(text, prob) == score_trace(text, explicit)
    assert failed(score_trace(text, prob)) == {"graph"}  # result checked on the supplied graph


# ---------------------------------------------------------------------------------------------
# unknown kinds, answer stripping, bad problems and settings
def test_unknown_query_kind_fails_closed():
    prob = problem("DAG", "XY", [("X", "Y")], kind="counterfactual", treatment="X", outcome="Y")
    text = trace("X -> Y", "counterfactual(treatment=X, outcome=Y)", "twin network", ["X -> Y"], "yes", "yes")
    s = score_trace(text, prob)
    assert s.total == 0 and s.reward == 0.0
    assert set(s.reasons) == set(CHECK_NAMES)
    assert all("unknown query kind" in r for r in s.reasons.values())


class PoisonedProblem(Mapping):
    """A problem whose answer-like fields raise when read."""

    def __init__(self, data):
        self._data = data

    def __getitem__(self, key):
        if key in ("answer", "valid_answers", "solution"):
            raise AssertionError(f"the scorer read {key!r}")
        return self._data[key]

    def __iter__(self):
        return iter(self._data)

    def __len__(self):
        return len(self._data)


@pytest.mark.parametrize("name", sorted(GOLD))
def test_scorer_cannot_read_answer_fields(name):
    prob, text = GOLD[name]
    corrupt = text.replace("RESULT:", "RESULT: garbage\nIGNORED:")
    baseline = [score_trace(t, prob) for t in (text, corrupt)]
    poisoned = dict(prob, answer="{POISON}", valid_answers=["{X}"], solution="no")
    poisoned["query"] = dict(prob["query"], answer="{POISON}", gold_answer="{POISON}")
    assert [score_trace(t, poisoned) for t in (text, corrupt)] == baseline
    assert [score_trace(t, json.dumps(poisoned)) for t in (text, corrupt)] == baseline
    trap = PoisonedProblem(dict(prob, answer=None, valid_answers=None, solution=None))
    assert [score_trace(t, trap) for t in (text, corrupt)] == baseline


def test_strip_answer_fields():
    prob = dict(backdoor_problem(), answer="{U}", answers=["{U}"], valid_answers=[], solution=1,
                gold="x", Ground_Truth="y", label=3, expected="z", reference_answer="w")  # fmt: skip
    prob["query"] = dict(prob["query"], answer="{U}", variant=None)
    clean = strip_answer_fields(prob)
    assert set(clean) == {"graph", "query", "text"}
    assert clean["query"] == {"kind": "backdoor_set", "treatment": "X", "outcome": "Y"}
    assert clean["graph"] is prob["graph"]
    assert "answer" in prob and "answer" in prob["query"]  # the input is not modified
    # CPT keys are node names and stay, even when a node is called 'target'
    cpts = {"target": {"parents": [], "p1": 0.5}}
    assert strip_answer_fields({"cpts": cpts})["cpts"] is cpts


def test_datasets_style_none_fields_are_ignored():
    prob = backdoor_problem()
    prob["query"] = dict(prob["query"], variant=None, x=None, given=None)
    prob["cpts"] = None
    prob["mode"] = None
    assert score_trace(backdoor_trace("{U}"), prob).total == 6


@pytest.mark.parametrize(
    ("bad", "fix"),
    [
        ("{not json", "JSON"),
        ([1, 2], "dict"),
        ({"query": {"kind": "cycle"}}, "graph"),
        ({"graph": {"type": "DAG", "nodes": ["X"]}, "query": "cycle"}, "query"),
        (dict(backdoor_problem(), mode="story"), "mode"),
        (problem("DAG", "XY", [("X", "Y")], kind="backdoor_set", treatment="X", outcome="Q"), "outcome"),
        (problem("DAG", "XY", [("X", "Y"), ("Y", "X")], kind="cycle"), "cycle"),
        (problem("DAG", "XY", [("X", "Y")], kind="ate", treatment="X", outcome="Y", threshold=0.1), "cpts"),
    ],
)
def test_malformed_problem_raises_value_error_naming_the_fix(bad, fix):
    with pytest.raises(ValueError, match=fix):
        score_trace("<answer>x</answer>", bad)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"graph_check": "loose"},
        {"max_chars": 0},
        {"max_nodes": -1},
        {"max_slot_chars": 1.5},
        {"max_edges": True},
        {"max_strategy_chars": "300"},
    ],
)
def test_bad_settings_raise(kwargs):
    name = next(iter(kwargs))
    with pytest.raises(ValueError, match=name):
        score_trace(backdoor_trace(), backdoor_problem(), **kwargs)
    with pytest.raises(ValueError, match=name):
        make_calver_reward(**kwargs)
    with pytest.raises(ValueError, match=name):
        CalverConfig(**kwargs)


def test_prepared_problem_scores_like_the_raw_one():
    for prob, text in GOLD.values():
        prepared = prepare_problem(prob)
        assert prepare_problem(prepared) is prepared
        assert score_trace(text, prepared) == score_trace(text, prob)


def test_score_as_dict_round_trips_through_json():
    s = score_trace(backdoor_trace("{M}"), backdoor_problem())
    d = json.loads(json.dumps(s.as_dict()))
    assert d["total"] == 3 and d["reward"] == pytest.approx(3 / 6)
    assert set(d["reasons"]) == {"derivation", "result", "answer"} and d["result"] is False
    assert d["claims"] == 2 and d["false_claims"] == 0


# ---------------------------------------------------------------------------------------------
# the TRL reward
def test_reward_values_none_rows_and_name():
    assert calver_reward.__name__ == "calver"
    prob, text = GOLD["backdoor_any"]
    rows = [json.dumps(prob), prob, None, "", json.dumps(prob)]
    completions = [text, backdoor_trace("{M}"), "anything", "anything", "garbage"]
    out = calver_reward(completions, problem=rows)
    assert out == [1.0, pytest.approx(3 / 6), None, None, 0.0]


def test_reward_logs_pass_rates_and_mean_total():
    prob, text = GOLD["backdoor_any"]
    logged, extra = {}, {}
    completions = [text, backdoor_trace("{M}"), backdoor_trace(strategy="vibes"), "garbage"]
    calver_reward(
        completions,
        problem=[prob] * 4 + [None],
        log_metric=lambda k, v: logged.__setitem__(k, v),
        log_extra=lambda k, v: extra.__setitem__(k, v),
    )
    # totals 6, 3, 5, 0; graph/query pass 3 of 4, strategy/derivation/result/answer 2 of 4
    assert logged["calver/total"] == pytest.approx(14 / 4)
    assert logged["calver/certified"] == 0.25  # only the gold trace passes all six
    assert logged["calver/graph"] == logged["calver/query"] == 0.75
    assert logged["calver/strategy"] == logged["calver/derivation"] == 0.5
    assert logged["calver/result"] == logged["calver/answer"] == 0.5
    assert logged["calver/bad_row"] == 0.0
    assert extra["calver_failed"][0] == "" and extra["calver_failed"][1] == "derivation,result,answer"
    # derivation diagnostics: claims per completion 2, 2, 2, 0; the {M} trace's claims are true but
    # certify {U}, not {M}: incomplete; the garbage completion makes none
    assert logged["calver/derivation/claims"] == pytest.approx(6 / 4)
    assert logged["calver/derivation/no_claims"] == 0.25
    assert logged["calver/derivation/false"] == 0.0
    assert logged["calver/derivation/incomplete"] == 0.25


def test_reward_gives_none_for_malformed_rows_and_logs_them():
    logged = {}
    out = calver_reward(["x", "y"], problem=["{bad json", {"graph": 1}], log_metric=logged.__setitem__)
    assert out == [None, None] and logged["calver/bad_row"] == 1.0


def test_reward_without_problem_column():
    assert calver_reward(["a", "b"]) == [None, None]
    assert calver_reward([], problem=[]) == []


def test_configured_reward_uses_its_settings():
    prob = problem("DAG", "WUXMYRS", [*BACKDOOR_EDGES, ("Y", "R"), ("R", "S")], kind="backdoor_set",
                   treatment="X", outcome="Y")  # fmt: skip
    local = make_calver_reward(graph_check="query_local")
    assert local.__name__ == "calver"
    assert local([backdoor_trace("{U}")], problem=[prob]) == [1.0]
    assert calver_reward([backdoor_trace("{U}")], problem=[prob]) == [pytest.approx(5 / 6)]


# ---------------------------------------------------------------------------------------------
# adversarial input: never raises, fails the affected checks with a reason, in bounded time
def assert_clean_failure(score: CalverScore, must_fail: set[str]):
    assert must_fail <= failed(score), score.reasons
    assert set(score.reasons) == failed(score)
    assert all(isinstance(r, str) and r for r in score.reasons.values())
    assert not any("internal error" in r for r in score.reasons.values()), score.reasons


def timed(fn, *args, **kwargs):
    """``fn``'s result and this thread's CPU seconds for it (a loaded machine does not inflate them)."""
    with cpu_clock() as clock:
        out = fn(*args, **kwargs)
    return out, clock.elapsed


ADVERSARIAL = {
    "empty": ("", set(CHECK_NAMES)),
    "whitespace": ("   \n\t ", set(CHECK_NAMES)),
    "garbage": ("%$#@! )(}{ <think> <answer", set(CHECK_NAMES)),
    "one_megabyte": ("GRAPH: " + "X -> Y; " * 131_072, set(CHECK_NAMES)),
    "nested_brackets": (backdoor_trace("{" * 5000 + "U" + "}" * 5000), {"result", "answer"}),
    "nested_derivation": (backdoor_trace(derivation=["{" * 3000 + "(" * 3000 + "U"]), set()),
    "unicode": (
        backdoor_trace("{Ü, 𝔘}", graph="W → U; U → X; U → Y; X → M; M → Y; ∅ → 𝔛"),
        {"graph", "result"},
    ),
    "rtl_and_zero_width": (backdoor_trace("{U\u200b}", derivation=["\u202eX <- U -> Y\u202c"]), {"result"}),
    "huge_set": (backdoor_trace("{" + ", ".join(f"N{i}" for i in range(100_000)) + "}"), set(CHECK_NAMES)),
    "cyclic_dag": (backdoor_trace(graph=BACKDOOR_GRAPH + "; Y -> W"), {"graph"}),
    "null_bytes": (backdoor_trace("{U}\x00") + "\x00" * 100, set()),
    "labels_only": ("GRAPH:\nQUERY:\nSTRATEGY:\nDERIVATION:\nRESULT:\n<answer></answer>", set(CHECK_NAMES)),
    "repeated_labels": (
        "\n".join(["GRAPH: X -> Y"] * 500) + "<answer>{U}</answer>",
        set(CHECK_NAMES) - {"graph"},
    ),
}


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_adversarial_traces_never_raise(name):
    text, must_fail = ADVERSARIAL[name]
    score, seconds = timed(score_trace, text, backdoor_problem())
    assert_clean_failure(score, must_fail)
    assert seconds < 1.0


def test_thousands_of_nodes_hit_the_node_cap_quickly():
    graph = "; ".join(f"N{i} -> N{i + 1}" for i in range(5000))
    text = backdoor_trace(graph=graph)
    score, seconds = timed(score_trace, text, backdoor_problem(), max_chars=200_000, max_slot_chars=200_000)
    assert_clean_failure(score, {"graph"})
    assert "more than 512 nodes" in score.reasons["graph"]
    assert seconds < 1.0
    # the cap is configurable: with a small cap the same graph fails earlier, for the same reason
    score = score_trace(text, backdoor_problem(), max_chars=200_000, max_slot_chars=200_000, max_nodes=10)
    assert "more than 10 nodes" in score.reasons["graph"]


def test_slot_and_completion_caps_are_configurable():
    prob, text = GOLD["backdoor_any"]
    assert_clean_failure(score_trace(text, prob, max_chars=50), set(CHECK_NAMES))
    s = score_trace(text, prob, max_slot_chars=20)
    assert_clean_failure(s, {"graph", "derivation"})
    assert "cap" in s.reasons["graph"]
    s = score_trace(text, prob, max_edges=2)
    assert failed(s) == {"graph"} and "edges" in s.reasons["graph"]


def test_unicode_node_lookalikes_fail_the_graph():
    # Cyrillic 'Х' looks like X but is no graph node (and no ASCII identifier)
    s = score_trace(backdoor_trace(graph=BACKDOOR_GRAPH.replace("U -> X", "U -> Х")), backdoor_problem())
    assert_clean_failure(s, {"graph"})


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=400))
def test_random_text_never_raises(text):
    for prob in (backdoor_problem(), GOLD["ate"][0], GOLD["cycle"][0], story_problem()):
        s = score_trace(text, prob)
        assert set(s.reasons) == failed(s)
        assert not any("internal error" in r for r in s.reasons.values())


SLOT_ALPHABET = st.sampled_from(
    ["GRAPH: ", "QUERY: ", "STRATEGY: ", "DERIVATION:\n", "RESULT: ", "<think>", "</think>", "<answer>",
     "</answer>", "X", "Y", "U", "W", "M", " -> ", " <- ", " <-> ", "{", "}", ", ", "\n", "- ", "yes",
     "backdoor_set(treatment=X, outcome=Y)", "backdoor criterion", "(", ")", "=", "ψ = 0.35"]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(SLOT_ALPHABET, max_size=60).map("".join))
def test_random_trace_shaped_text_never_raises(text):
    for prob in (backdoor_problem(), GOLD["ate"][0], GOLD["msep_set"][0]):
        s = score_trace(text, prob)
        assert set(s.reasons) == failed(s)
        assert not any("internal error" in r for r in s.reasons.values()), s.reasons


def test_huge_set_within_raised_caps_fails_result_and_answer_quickly():
    big = "{" + ", ".join(f"N{i}" for i in range(100_000)) + "}"
    text = backdoor_trace(big)
    score, seconds = timed(
        score_trace, text, backdoor_problem(), max_chars=2_000_000, max_slot_chars=2_000_000
    )
    assert_clean_failure(score, {"result", "answer"})
    assert failed(score) == {"derivation", "result", "answer"}
    assert seconds < 1.0


@settings(max_examples=200, deadline=None)
@given(st.booleans(), st.one_of(st.none(), st.floats(-1, 1)), st.floats(-0.5, 0.8), st.floats(0, 0.05))
def test_cached_ate_predicate_agrees_with_the_query_registry(decision, psi, threshold, tolerance):
    from faithgrpo.verifier.query_kinds import QUERY_KINDS

    prob = ate_problem(threshold=threshold, margin=0.0)
    prob["query"]["tolerance"] = tolerance
    prepared = prepare_problem(prob)
    value = (decision, psi)
    expected = QUERY_KINDS["ate"].is_valid(prepared.graph, prepared.query, value, ATE_CPTS)
    assert prepared.is_valid(prepared.graph, value) == expected
    assert prepared.true_ate == pytest.approx(0.35)  # hand-computed above


def test_ate_problem_whose_effect_cannot_be_computed_raises():
    # a 45-node chain X -> V1 -> ... -> Y: the effect needs more variables than criteria allows
    names = ["X", *[f"V{i}" for i in range(1, 44)], "Y"]
    cpts = {names[0]: {"parents": [], "p1": 0.5}}
    for a, b in itertools.pairwise(names):
        cpts[b] = {"parents": [a], "p1": {"0": 0.3, "1": 0.7}}
    prob = problem("DAG", names, list(itertools.pairwise(names)), kind="ate", treatment="X", outcome="Y",
                   threshold=0.0)  # fmt: skip
    prob["cpts"] = cpts
    with pytest.raises(ValueError, match="variables"):
        prepare_problem(prob)


@pytest.mark.parametrize("mode", ["supplied", "constructed"])
def test_generated_problems_with_gold_traces_score_six(mode):
    """Integration with the task generator and the gold traces (tasks/causal/datasets.py, tasks/certificates/gold.py)."""
    import random

    from faithgrpo.tasks.causal.datasets import CausalGraphConfig, make_problem
    from faithgrpo.tasks.certificates.gold import gold_trace

    config = CausalGraphConfig(size=1, seed=0, mode=mode)
    rng = random.Random(7)
    kinds = set()
    for i in range(45):
        prob, _listed, info = make_problem(config, rng)
        kinds.add(info["kind"])
        text = gold_trace(prob, i)
        s = score_trace(text, json.dumps(prob))
        assert s.total == 6, (info, s.reasons, text)
        # the same trace with its RESULT line dropped: nothing left to certify or compare
        broken = "\n".join(line for line in text.splitlines() if not line.startswith("RESULT:"))
        assert failed(score_trace(broken, prob)) == {"derivation", "result", "answer"}
    assert len(kinds) >= 6


# ---------------------------------------------------------------------------------------------
# the graph check's shortcut for a plain-form copy of the problem graph (_is_plain_copy) must
# conclude what parsing the GRAPH and comparing would
@pytest.mark.parametrize(
    "graph_text",
    [
        "A -> B; B -> C; A <-> C",
        "A <-> C; B -> C; A -> B",
        "C <-> A; A -> B; B -> C",  # the bidirected pair the other way round
        "A -> B; B -> C; A <-> C; C <-> A",  # the same pair twice
        "A -> B; B -> C; A <-> C, D",  # an unknown node
        "A -> B; B -> C",  # a missing edge
        "A -> B; B -> C; A <-> C; A <-> B",  # an extra one
        "A -> B; B -> C; C <-> B",  # another bidirected pair
        "A -> B; B -> C; A <-> C; B -> A",  # a cycle
        "A -> B, B -> C, A <-> C",
        "A -> B -> C; A <-> C",  # not the plain form: parsed as before
        "A -> B; B -> C; A <-> A",
    ],
)
@pytest.mark.parametrize("graph_check", ["exact", "query_local"])
def test_graph_shortcut_agrees_with_the_parse(monkeypatch, graph_text, graph_check):
    from faithgrpo.rewards.calver import checks as calver_checks

    p = problem("ADMG", "ABC", [("A", "B"), ("B", "C")], [("A", "C")], kind="msep_set", x="A", y="C")
    text = trace(
        graph_text, "msep_set(x=A, y=C)", "m-separation", ["A and C are m-separated given {B}"], "{B}", "{B}"
    )
    fast = score_trace(text, p, graph_check=graph_check)
    monkeypatch.setattr(calver_checks, "_is_plain_copy", lambda *args: False)
    slow = score_trace(text, prepare_problem(json.dumps(p)), graph_check=graph_check)
    assert (fast.graph, fast.reasons.get("graph")) == (slow.graph, slow.reasons.get("graph"))
