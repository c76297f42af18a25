"""The evaluator's memos (issue 15) change speed only: no cached value leaks between completions,
problems or callers, and every memo stays bounded.

Each test fails if a cache is keyed or shared wrongly (by object identity of a mutable input, by a
line number, or by handing out a stored mutable object).
"""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from faithgrpo.rewards.calver import checks as calver_checks
from faithgrpo.rewards.calver import problem as calver_problem
from faithgrpo.rewards.calver.checks import _names_plain_copy, _parsed_plain_copy
from faithgrpo.rewards.calver.problem import CalverConfig, prepare_problem
from faithgrpo.rewards.calver.reward import score_trace
from faithgrpo.rewards.trace import parse_trace
from faithgrpo.tasks import knights_knaves as kk
from faithgrpo.tasks.knights_knaves import checker as kk_checker
from faithgrpo.tasks.knights_knaves import puzzle as kk_puzzle_module
from faithgrpo.verifier.certificates.claim_checks import derivation_context
from faithgrpo.verifier.certificates.claims import parse_claim
from faithgrpo.verifier.certificates.derivation import check_derivation
from faithgrpo.verifier.graphs.edges import parse_graph
from faithgrpo.verifier.graphs.model import CausalGraph, GraphParseError
from faithgrpo.verifier.queries import grade_answer, normalize_answer

PROBLEM = {
    "graph": {
        "type": "DAG",
        "nodes": ["W", "U", "X", "M", "Y"],
        "directed": [["W", "U"], ["U", "X"], ["U", "Y"], ["X", "M"], ["M", "Y"]],
    },
    "query": {"kind": "backdoor_set", "treatment": "X", "outcome": "Y"},
}


def trace(result: str = "{U}", graph: str = "W -> U; U -> X; U -> Y; X -> M; M -> Y") -> str:
    return (
        f"<think>\nGRAPH: {graph}\nQUERY: backdoor_set(treatment=X, outcome=Y)\n"
        "STRATEGY: backdoor criterion\nDERIVATION:\n- U is not a descendant of X\n"
        f"- backdoor path X <- U -> Y is blocked given {{U}}\nRESULT: {result}\n</think>\n"
        f"<answer>{result}</answer>"
    )


def test_memoised_scores_equal_fresh_scores_in_any_order():
    texts = [trace(), trace("{M}"), trace(graph="W -> U; U -> X; X -> Y"), trace("{U, W}"), trace()]
    fresh = [score_trace(t, copy.deepcopy(PROBLEM)).as_dict() for t in texts]
    prepared = prepare_problem(copy.deepcopy(PROBLEM))
    assert [score_trace(t, prepared).as_dict() for t in texts] == fresh
    assert [score_trace(t, prepared).as_dict() for t in reversed(texts)] == fresh[::-1]
    assert fresh[0]["total"] == 6 and fresh[1]["total"] < 6 and fresh[2]["graph"] is False


def test_a_caller_mutating_a_score_does_not_change_the_next_one():
    prepared = prepare_problem(json.dumps(PROBLEM))
    first = score_trace(trace("{M}"), prepared)
    expected = dict(first.reasons)
    first.reasons.clear()
    first.reasons["graph"] = "tampered"
    again = score_trace(trace("{M}"), json.dumps(PROBLEM))
    assert again.reasons == expected and "tampered" not in again.reasons.values()


def test_result_and_answer_memos_follow_the_verification_graph_and_the_caps():
    # One prepared constructed-mode problem scored under every setting, in an interleaved order, must
    # equal a fresh problem per score: RESULT's verdict names where it was checked (the hidden source
    # graph or the trace's GRAPH) and reads the slot cap, so neither may come from another setting.
    problem = {**copy.deepcopy(PROBLEM), "mode": "constructed", "text": "a story"}
    invented = "W -> U; U -> X; X -> M; M -> Y"  # no U -> Y: {} is valid on it, not on the source
    texts = [trace(), trace("{}", graph=invented), trace("{}"), trace("{U}", graph=invented), trace("{M}")]
    settings_ = [
        {},
        {"verify_on": "trace"},
        {"max_slot_chars": 2},
        {"verify_on": "trace", "max_slot_chars": 2},
    ]
    prepared = prepare_problem(json.dumps(problem))
    for _ in range(2):
        for kwargs in settings_:
            for text in texts:
                fresh = score_trace(text, copy.deepcopy(problem), **kwargs).as_dict()
                assert score_trace(text, prepared, **kwargs).as_dict() == fresh, (kwargs, text)
    on_trace = score_trace(trace("{}", graph=invented), prepared, verify_on="trace")
    on_source = score_trace(trace("{}", graph=invented), prepared)
    assert on_trace.result and not on_source.result  # the settings really differ on this trace
    assert "hidden source graph" in on_source.reasons["result"]


_NODE_POOL = ["A", "B", "C", "X_1", "and", "Ä", "d9"]
_SEPARATORS = [", ", "; ", ",", ";", " ,", ",  ", "\n"]


@st.composite
def _graph_and_items(draw):
    nodes = draw(st.lists(st.sampled_from(_NODE_POOL), min_size=1, max_size=5, unique=True))
    kind = draw(st.sampled_from(["DAG", "ADMG"]))
    pairs = [(a, b) for i, a in enumerate(nodes) for b in nodes[i + 1 :]]  # node order: acyclic
    directed = draw(st.lists(st.sampled_from(pairs), unique=True)) if pairs else []
    bidirected = draw(st.lists(st.sampled_from(pairs), unique=True)) if pairs and kind == "ADMG" else []
    problem = {
        "graph": {"type": kind, "nodes": nodes, "directed": directed, "bidirected": bidirected},
        "query": {"kind": "not_a_kind"},  # unknown kinds prepare (and fail closed): only the graph matters
    }
    # the graph's own pieces, in any spelling and order, with pieces of other graphs mixed in
    own = [f"{a} -> {b}" for a, b in directed] + [
        draw(st.sampled_from([f"{a} <-> {b}", f"{b} <-> {a}"])) for a, b in bidirected
    ]
    own += [v for v in nodes if draw(st.booleans()) or not any(v in e for e in directed + bidirected)]
    other = [f"{a} {arrow} {b}" for a in _NODE_POOL for b in _NODE_POOL for arrow in ("->", "<->")]
    items = draw(st.permutations(own)) + draw(
        st.lists(st.sampled_from(other + _NODE_POOL + ["", "A->B"]), max_size=2)
    )
    items = draw(st.lists(st.sampled_from(items), max_size=len(items) + 2)) if draw(st.booleans()) else items
    seps = [draw(st.sampled_from(_SEPARATORS)) if draw(st.integers(0, 3)) == 0 else "; " for _ in items]
    return problem, "".join(item + sep for item, sep in zip(items, seps))[
        : -len(seps[-1]) or None
    ] if items else ""


@settings(max_examples=600, deadline=None)
@given(_graph_and_items(), st.sampled_from([CalverConfig(), CalverConfig(max_nodes=3, max_edges=3)]))
def test_plain_copy_by_names_is_sufficient_for_the_parsed_test(case, cfg):
    problem, text = case
    try:
        prepared = prepare_problem(problem)
    except ValueError:
        assume(False)
    if _names_plain_copy(text, prepared, cfg):
        assert _parsed_plain_copy(text, prepared, cfg), text


def test_plain_copy_by_names_sees_the_gold_spelling_and_its_reorderings():
    problem = {
        "graph": {"type": "ADMG", "nodes": ["W", "U", "X", "Y", "Q"], "directed": [["W", "U"], ["U", "X"]],
                  "bidirected": [["X", "Y"]]},
        "query": {"kind": "not_a_kind"},
    }  # fmt: skip
    prepared, cfg = prepare_problem(problem), CalverConfig()
    for text in ("W -> U; U -> X; X <-> Y; Q", "Q, Y <-> X, U -> X; W -> U", "W -> U; U -> X; Y <-> X; Q; W"):
        assert _names_plain_copy(text, prepared, cfg) and _parsed_plain_copy(text, prepared, cfg), text
    for text in ("W -> U; U -> X; X <-> Y", "W -> U; U -> X; Q", "W -> U; U -> X; X <-> Y; Q; Y -> X",
                 "W -> U; U -> X; X <-> Y; Q; Z", "W -> U; U -> X; X <-> Y;Q"):  # fmt: skip
        assert not _names_plain_copy(text, prepared, cfg), text
    assert not _names_plain_copy("W -> U; U -> X; X <-> Y; Q", prepared, CalverConfig(max_edges=3))


def test_problem_memo_is_bounded_and_skips_long_slots():
    prepared = prepare_problem(copy.deepcopy(PROBLEM))
    for i in range(calver_problem._MEMO_ENTRIES + 50):
        score_trace(trace(graph=f"W -> U; U -> X; U -> Y; X -> M; M -> Y; Q{i}"), prepared)
    assert 0 < len(prepared._memo) <= calver_problem._MEMO_ENTRIES
    long_graph = "; ".join(["W -> U"] * 300)  # over _MEMO_KEY_CHARS
    assert len(long_graph) > calver_problem._MEMO_KEY_CHARS
    score_trace(trace(graph=long_graph), prepared)
    assert not any(long_graph in key for key in prepared._memo if isinstance(key, tuple))


def test_parsed_claims_keep_their_own_line_numbers():
    line = "backdoor path X <- U -> Y is blocked given {U}"
    assert parse_claim(line, 1).line == 1
    assert parse_claim(line, 7).line == 7
    assert parse_claim("  " + line + " ; a comment", 3).text == line


def test_a_derivation_context_for_another_graph_is_ignored():
    g1 = parse_graph("W -> U; U -> X; U -> Y; X -> M; M -> Y", "DAG")
    g2 = parse_graph("W -> U; U -> X; X -> M; M -> Y", "DAG")  # no U -> Y: the path does not exist
    query = dict(PROBLEM["query"])
    lines = ["U is not a descendant of X", "backdoor path X <- U -> Y is blocked given {U}"]
    context = derivation_context(g1, None, query)
    assert check_derivation(lines, "backdoor_set", query, frozenset({"U"}), g1, context=context).passed
    on_g2 = check_derivation(lines, "backdoor_set", query, frozenset({"U"}), g2, context=context)
    assert not on_g2.passed and on_g2.false  # the verdicts remembered for g1 were not reused
    assert on_g2.false == check_derivation(lines, "backdoor_set", query, frozenset({"U"}), g2).false


def test_grading_follows_the_problem_content_not_its_identity():
    problem = copy.deepcopy(PROBLEM)
    assert grade_answer(problem, "{U}") is True
    problem["graph"]["directed"].remove(["U", "Y"])  # the same dict, new content: {} now suffices
    assert grade_answer(problem, "{}") is True
    text = json.dumps(PROBLEM)
    assert grade_answer(text, "{U}") is True and grade_answer(text, "{}") is False
    assert grade_answer(json.dumps(problem), "{}") is True
    assert normalize_answer(text, "{ U }") == "{U}"


META = {
    "names": ["Ava", "Noah"],
    "statements": [["and", ["lying", 0], ["lying", 1]], ["lying", 0]],
    "solution": [False, True],
}


def test_kk_puzzles_are_shared_by_content_and_checks_do_not_leak():
    puzzle = kk.kk_puzzle(copy.deepcopy(META))
    assert kk.kk_puzzle(json.loads(json.dumps(META))) is puzzle
    other = dict(META, solution=[False, True], names=["Ava", "Liam"])
    assert kk.kk_puzzle(other) is not puzzle
    gold = kk.gold_kk_trace(META, 0)
    bad = gold.replace("<answer>", "<answer>Ava is a knight. ").split("ASSIGNMENT")[0]
    fresh = [kk.check_kk_trace(t, copy.deepcopy(META)).as_dict() for t in (gold, bad, gold)]
    first = kk.check_kk_trace(bad, puzzle)
    first.reasons.append("tampered")
    assert [kk.check_kk_trace(t, puzzle).as_dict() for t in (gold, bad, gold)] == fresh
    assert fresh[0]["total"] == 6 and fresh[1]["total"] < 6
    assert len(puzzle._memo) <= kk_puzzle_module._MEMO_ENTRIES


# -- fast paths (issue 15, cold pass): each must give exactly what the general path gives ------------
def _graph_outcome(text: str, **kwargs) -> tuple:
    try:
        g = parse_graph(text, **kwargs)
    except GraphParseError as exc:
        return ("error", str(exc).split(" near ")[0])  # the context quotes the text itself
    return (g.kind, g.nodes, list(g.directed), list(g.bidirected))


def test_plain_graph_text_parses_as_the_lexer_reads_it():
    # newline separators send the same edges through the lexer loop: node order, edge sets (in
    # iteration order) and errors must be the same as the plain fast path's
    texts = [
        "C -> B, C -> Q, E -> Q, H -> B, B <-> W, Z",
        "B <-> W; W -> C; C -> B; H -> B; U",
        "A -> B, A -> B, B -> A",  # duplicate edge; a cycle (kind DG when inferred)
        "A -> A, B -> C",  # self loop
        "A -> and, B -> C",  # "and" separates in the lexer
        "X1 -> X10; X2 <-> X1",
        "A -> B, C -> D, E -> F",  # over max_edges / max_nodes below
    ]
    for text in texts:
        lexed = text.replace(", ", "\n").replace("; ", "\n")
        for kwargs in ({}, {"kind": "ADMG"}, {"validate": False}, {"max_edges": 2}, {"max_nodes": 4},
                       {"nodes": ["Q", "A"]}):  # fmt: skip
            assert _graph_outcome(text, **kwargs) == _graph_outcome(lexed, **kwargs), (text, kwargs)


def test_graph_edges_keep_their_iteration_order_whatever_the_container():
    # 2-tuples take the constructor's fast path, lists and a generator the unpacking one: the same
    # edges in the same order must give the same frozenset, iteration order included
    edges = [(f"N{i}", f"N{(i * 7) % 23}") for i in range(40)]
    nodes = [f"N{i}" for i in range(40)]
    reference = list(CausalGraph("DG", nodes, [list(e) for e in edges]).directed)
    for container in (list(edges), tuple(edges), (e for e in edges)):
        assert list(CausalGraph("DG", nodes, container).directed) == reference
    with pytest.raises(ValueError):
        CausalGraph("DG", nodes, [("A", "B", "C")])


def test_kk_role_reference_fast_path_agrees_with_the_token_scan():
    puzzle = kk.kk_puzzle(copy.deepcopy(META))
    bodies = [
        "Ava=knight, Noah=knave",
        "Zed=knight",  # not in the puzzle
        "Ava = villain",  # not this puzzle's role
        "knight(Zed) and knave(Noah)",
        "Ava =\nknight",  # a reference across a line break
        "knave(()",
        "x = y = knight",
        "knight ( Ava ) is fine; Noah's statement",
        "no references here",
    ]
    for body in bodies:
        slow = kk_checker._role_ref_problem(body, puzzle)
        fast_ok = kk_checker._role_refs_ok(body.lower(), puzzle)
        assert not (fast_ok and slow), body  # the fast path never passes what the scan rejects
        if slow is None:
            assert fast_ok, body  # and only falls back when the scan may have something to say
    assert "zed" in kk_checker._role_ref_problem("Zed=knight", puzzle)


def test_derivation_bullets_strip_the_same_with_any_line_break():
    body = "- a\n  * b\n12. c\nStep 3: d\n1) e\n\n  Step\t4 : f\n1234. g\n• h\nStep\n3: i\n-\n- j"
    want = ("a", "b", "c", "d", "e", "f", "1234. g", "h", "Step", "3: i", "j")
    for br in ("\n", "\r\n", "\u2028", "\x0b"):
        text = (
            "<think>GRAPH: A -> B\nDERIVATION:\n"
            + body.replace("\n", br)
            + "\nRESULT: {A}</think><answer>{A}</answer>"
        )
        assert parse_trace(text).derivation == want, repr(br)


def test_calver_shares_the_graders_validity_only_for_the_same_inputs():
    text = json.dumps(PROBLEM)
    assert calver_problem._prepare_json(text)._shared_text == text
    hinted = json.dumps(dict(PROBLEM, query=dict(PROBLEM["query"], answer="{M}")))
    assert calver_problem._prepare_json(hinted)._shared_text is None  # its query loses a field when prepared
    assert prepare_problem(copy.deepcopy(PROBLEM))._shared_text is None  # a dict has no source text
    for t in (trace(), trace("{M}"), trace("{U, W}")):
        assert score_trace(t, text).as_dict() == score_trace(t, copy.deepcopy(PROBLEM)).as_dict()
        assert score_trace(t, hinted).as_dict() == score_trace(t, copy.deepcopy(PROBLEM)).as_dict()


# -- memos added for the all-gold cold pass: equal to the unmemoised path, bounded, keyed by content ---
def _ate_problem_far_from_zero() -> dict:
    from faithgrpo.tasks.causal.datasets import CausalGraphConfig, CausalGraphDataset

    for seed in range(50):
        ds = CausalGraphDataset(CausalGraphConfig(size=1, seed=seed, query_kinds=("ate",)))
        problem = json.loads(ds[0]["metadata"]["problem"])
        if abs(prepare_problem(copy.deepcopy(problem)).true_ate) > 0.05:
            return problem
    raise AssertionError("no ate problem with |ψ| > 0.05")


def test_certificate_memo_tells_equal_values_apart_and_stays_bounded():
    from faithgrpo.tasks.certificates.gold import gold_trace
    from faithgrpo.verifier.certificates import derivation

    problem = _ate_problem_far_from_zero()
    p = prepare_problem(copy.deepcopy(problem))
    gold = parse_trace(gold_trace(problem, rng=0))
    z, _ = calver_checks._ate_adjustment_set(gold.result)
    decision = p.true_ate > float(p.query["threshold"])
    args = (gold.derivation, "ate", p.query)
    ctx = p._derivation_context
    reports = {}
    # ψ = 0.0 and -0.0 are equal (one dict key) but print differently: each gets its own message
    for value in [
        (decision, 0.0),
        (decision, -0.0),
        (decision, None),
        (not decision, None),
        (decision, -0.0),
    ]:
        shared = check_derivation(*args, value, p.graph, p.cpts, ate_set=z, context=ctx)
        fresh = check_derivation(*args, value, p.graph, p.cpts, ate_set=z)
        assert (shared.missing, shared.false, shared.claims) == (fresh.missing, fresh.false, fresh.claims)
        reports[repr(value)] = shared.missing
    assert "ψ = 0 " in reports[repr((decision, 0.0))] and "ψ = -0 " in reports[repr((decision, -0.0))]
    assert reports[repr((decision, None))] is None
    for i in range(derivation._MAX_CERTIFICATES + 20):
        check_derivation(*args, (decision, i / 1000), p.graph, p.cpts, ate_set=z, context=ctx)
    assert 0 < len(ctx._certificates) <= derivation._MAX_CERTIFICATES


def test_derivation_memo_follows_the_result_text_and_keeps_no_graph():
    texts = [trace("{U}"), trace("{ U }"), trace("{U, W}"), trace("{W}"), trace("{U}.")]
    fresh = [score_trace(t, copy.deepcopy(PROBLEM)).as_dict() for t in texts]
    prepared = prepare_problem(copy.deepcopy(PROBLEM))
    for order in (texts, texts[::-1], texts + texts):
        assert [score_trace(t, prepared).as_dict() for t in order] == [fresh[texts.index(t)] for t in order]
    assert fresh[0]["total"] == 6 and fresh[2]["derivation"] is False and fresh[3]["derivation"] is False
    # supplied graph, verify_on="problem": the trace's own graph verifies nothing, so none is kept
    assert not any(isinstance(v, tuple) and isinstance(v[-1], CausalGraph) for v in prepared._memo.values())


def test_strategy_verdicts_are_shared_by_text_and_kind():
    from faithgrpo.verifier.query_kinds import QUERY_KINDS
    from faithgrpo.verifier.strategy_methods import strategy_check

    texts = [
        "backdoor criterion",
        "DFS",
        "d-separation and DFS",
        "cycle detection (DFS)",
        "nothing",
        "x" * 600,
    ]
    for _ in range(2):  # the second round reads the cache
        for kind in QUERY_KINDS.values():
            for text in texts:
                assert kind.strategy_problem(text) == strategy_check(kind.name, kind.strategies, text)
