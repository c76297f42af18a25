"""Tests for faithgrpo.verifier.queries: answer parsing, grading, enumeration, query restatement."""

from __future__ import annotations

import itertools
import json

import pytest
from cpu_clock import cpu_clock
from hypothesis import given, settings
from hypothesis import strategies as st

from faithgrpo.verifier import graphs as C
from faithgrpo.verifier.answers import MAX_SET_SIZE, parse_cycle, parse_node, parse_node_set, parse_yes_no
from faithgrpo.verifier.graphs.edges import parse_graph
from faithgrpo.verifier.graphs.model import CausalGraph
from faithgrpo.verifier.queries import (
    format_query,
    grade_answer,
    load_problem,
    normalize_answer,
    parse_query,
    query_matches,
)
from faithgrpo.verifier.query_kinds import QUERY_KINDS

NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True).filter(lambda s: s.lower() != "and")


@st.composite
def graphs(draw, kinds=("DAG", "ADMG"), max_nodes=6):
    kind = draw(st.sampled_from(kinds))
    n = draw(st.integers(2, max_nodes))
    names = draw(st.permutations([f"N{i}" for i in range(n)]))
    directed, bidirected = set(), set()
    for i, j in itertools.permutations(range(n), 2):
        if (kind == "DG" or i < j) and draw(st.booleans()):
            directed.add((names[i], names[j]))
        if kind == "ADMG" and i < j and draw(st.integers(0, 3)) == 0:
            bidirected.add((names[i], names[j]))
    return CausalGraph(kind, tuple(names), frozenset(directed), frozenset(bidirected)).validate()


def problem(g, **query):
    return {"graph": g.to_dict(), "query": query, "text": "irrelevant"}


def all_subsets(items):
    items = sorted(items)
    return [frozenset(c) for k in range(len(items) + 1) for c in itertools.combinations(items, k)]


# ---------------------------------------------------------------------------------------------
# parsers
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{U, V}", {"U", "V"}),
        ("{'U', 'V'}", {"U", "V"}),
        ('["U", "V"]', {"U", "V"}),
        ("U, V", {"U", "V"}),
        ("U and V", {"U", "V"}),
        ("  {U}. ", {"U"}),
        ("set()", set()),
        ("{}", set()),
        ("∅", set()),
        ("None", set()),
        ("the empty set", set()),
        ("Z = {A, B}", {"A", "B"}),
        ("The adjustment set is {A_1, B2}.", {"A_1", "B2"}),
        ("{U, U}", {"U"}),
        ("{A} or {B}", None),
        ("{A, {B}}", None),
        ("{A", None),
        ("{A-B}", None),
        ("", None),
        ("maybe", {"maybe"}),  # a bare word is a one-node set; membership is checked by is_valid
        ("not sure what", {"not", "sure", "what"}),
        ("{'A': 1}", None),
    ],
)
def test_parse_node_set(text, expected):
    got = parse_node_set(text)
    assert got == (None if expected is None else frozenset(expected))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("yes", True),
        ("Yes.", True),
        ("NO", False),
        ("True", True),
        ("false", False),
        ("No, X and Y are d-connected; yes they are", False),  # the leading word decides
        ("They are independent, so yes", True),
        ("yes or no", True),
        ("I think so, yes and no", None),
        ("maybe", None),
        ("", None),
        ("yesterday", None),
        ("nothing", None),
    ],
)
def test_parse_yes_no(text, expected):
    assert parse_yes_no(text) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("M", "M"), ("'M'", "M"), ("{M}", "M"), ("M.", "M"), ("{M, N}", None), ("", None), ("a b", None)],
)
def test_parse_node(text, expected):
    assert parse_node(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("A -> B -> C -> A", ("A", "B", "C")),
        ("A->B->C", ("A", "B", "C")),
        ("A → B → A", ("A", "B")),
        ("[A, B, C]", ("A", "B", "C")),
        ("(A, B, C, A)", ("A", "B", "C")),
        ("A, B", ("A", "B")),
        ("A <- B <- C", None),
        ("A <-> B", None),
        ("[A]", None),
        ("A -> A", None),
        ("{A, B}", None),
        ("", None),
    ],
)
def test_parse_cycle(text, expected):
    assert parse_cycle(text) == expected


def test_parsers_reject_oversized_input_quickly():
    huge = "{" + ", ".join(f"N{i}" for i in range(200_000)) + "}"
    nested = "{" * 100_000 + "}" * 100_000
    many = "{" + ", ".join(f"N{i}" for i in range(MAX_SET_SIZE + 1)) + "}"
    with cpu_clock() as clock:
        for text in (huge, nested, "yes " * 300_000, "A -> " * 100_000 + "A"):
            for parse in (parse_node_set, parse_yes_no, parse_node, parse_cycle):
                assert parse(text) is None
        assert parse_node_set(many) is None
        assert parse_node_set(nested[:2000]) is None
    assert clock.elapsed < 1.0


@settings(max_examples=200, deadline=None)
@given(st.frozensets(NAMES, max_size=8))
def test_set_format_round_trips(nodes):
    kind = QUERY_KINDS["backdoor_set"]
    assert kind.parse_answer(kind.format_answer(nodes)) == nodes
    python_literal = repr(set(nodes)) if nodes else "set()"
    assert parse_node_set(python_literal) == nodes


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_parsers_and_graders_never_raise(text):
    g = parse_graph("U -> X; U -> Y; X -> Y")
    for kind in QUERY_KINDS.values():
        kind.parse_answer(text)
        kind.matches_strategy(text)
    p = problem(g, kind="backdoor_set", treatment="X", outcome="Y")
    assert grade_answer(p, text) in (True, False)
    normalize_answer(p, text)
    parse_query(text)
    query_matches(p["query"], text)


# ---------------------------------------------------------------------------------------------
# grading against the criteria, exhaustively on random graphs
@settings(max_examples=60, deadline=None)
@given(graphs(), st.data(), st.sampled_from(["any", "minimal", "maximal"]))
def test_backdoor_grading_and_enumeration(g, data, variant):
    x, y = data.draw(st.permutations(g.nodes))[:2]
    p = problem(g, kind="backdoor_set", treatment=x, outcome=y, variant=variant)
    predicate = {
        "any": C.is_backdoor_set,
        "minimal": C.is_minimal_backdoor_set,
        "maximal": C.is_maximal_backdoor_set,
    }[variant]
    expected = [z for z in all_subsets(set(g.nodes) - {x, y}) if predicate(g, x, y, z)]
    for z in all_subsets(g.nodes):
        text = "{" + ", ".join(f"'{v}'" for v in sorted(z)) + "}" if z else "set()"
        assert grade_answer(p, text) == (z in expected)
        assert grade_answer(json.dumps(p), f"<think>..</think><answer>{text}</answer>") == (z in expected)
    got = QUERY_KINDS["backdoor_set"].valid_answers(g, p["query"], limit=1000)
    assert sorted(got, key=sorted) == sorted(expected, key=sorted)
    assert [len(z) for z in got] == sorted(len(z) for z in got)  # smallest first
    assert QUERY_KINDS["backdoor_set"].valid_answers(g, p["query"], limit=2) == got[:2]


@settings(max_examples=60, deadline=None)
@given(graphs(), st.data())
def test_separation_kinds_and_ci_test(g, data):
    order = data.draw(st.permutations(g.nodes))
    x, y, rest = order[0], order[1], order[2:]
    kind_name = "dsep_set" if g.kind == "DAG" else "msep_set"
    q = {"kind": kind_name, "x": x, "y": [y]}
    expected = [z for z in all_subsets(rest) if C.m_separated(g, x, y, z)]
    assert QUERY_KINDS[kind_name].valid_answers(g, q, limit=1000) == sorted(
        expected, key=lambda z: (len(z), [int(v[1:]) for v in sorted(z, key=lambda v: int(v[1:]))])
    )
    for z in all_subsets(g.nodes):
        assert grade_answer(problem(g, **q), QUERY_KINDS[kind_name].format_answer(z)) == (z in expected)
        if not (z & {x, y}):
            truth = z in expected
            ci = problem(g, kind="ci_test", x=[x], y=y, given=sorted(z))
            assert grade_answer(ci, "Yes." if truth else "No.")
            assert not grade_answer(ci, "No." if truth else "Yes.")
            assert QUERY_KINDS["ci_test"].valid_answers(g, ci["query"]) == [truth]
    minimal = {**q, "variant": "minimal"}
    for z in QUERY_KINDS[kind_name].valid_answers(g, minimal, limit=1000):
        assert not any(w < z for w in expected)


@settings(max_examples=60, deadline=None)
@given(graphs(kinds=("DAG", "ADMG", "DG")), st.data())
def test_paths_mediators_frontdoor(g, data):
    x, y = data.draw(st.permutations(g.nodes))[:2]
    reach = C.has_directed_path(g, x, y)
    dp = problem(g, kind="directed_path", treatment=x, outcome=y)
    assert grade_answer(dp, "yes") == reach and grade_answer(dp, "no") == (not reach)
    if g.kind == "DG":
        return
    med = problem(g, kind="mediator", treatment=x, outcome=y)
    mediators = C.mediators(g, x, y)
    for v in g.nodes:
        assert grade_answer(med, v) == (v in mediators)
    assert set(QUERY_KINDS["mediator"].valid_answers(g, med["query"])) == mediators
    fd = problem(g, kind="frontdoor_set", treatment=x, outcome=y)
    expected = [z for z in all_subsets(set(g.nodes) - {x, y}) if C.is_frontdoor_set(g, x, y, z)]
    assert set(QUERY_KINDS["frontdoor_set"].valid_answers(g, fd["query"], limit=1000)) == set(expected)
    for z in expected:
        assert grade_answer(fd, QUERY_KINDS["frontdoor_set"].format_answer(z))
    # variants: minimal / maximal by comparing the valid sets, smallest first
    kind = QUERY_KINDS["frontdoor_set"]
    for variant, extreme in (("minimal", lambda z: not any(w < z for w in expected)),
                             ("maximal", lambda z: not any(w > z for w in expected))):  # fmt: skip
        q = {**fd["query"], "variant": variant}
        want = [z for z in expected if extreme(z)]
        got = kind.valid_answers(g, q, limit=1000)
        assert set(got) == set(want) and [len(z) for z in got] == sorted(len(z) for z in got)
        for z in all_subsets(g.nodes):
            assert grade_answer({**fd, "query": q}, kind.format_answer(z)) == (z in want)


def test_cycle_kind():
    g = parse_graph("A -> B -> C -> A; C -> D -> B; E")
    p = problem(g, kind="cycle")
    assert grade_answer(p, "A -> B -> C -> A")
    assert grade_answer(p, "C -> A -> B")
    assert grade_answer(p, "[B, C, D]")
    assert not grade_answer(p, "A -> C -> B -> A")
    assert not grade_answer(p, "A -> B -> C -> D -> B")
    assert not grade_answer(p, "A -> B")
    kind = QUERY_KINDS["cycle"]
    assert [kind.format_answer(c) for c in kind.valid_answers(g, p["query"])] == [
        "A -> B -> C -> A",
        "B -> C -> D -> B",
    ]
    assert normalize_answer(p, "C -> A -> B -> C") == "A -> B -> C -> A"
    assert not grade_answer(
        problem(parse_graph("A -> B"), kind="cycle"), "A -> B -> A"
    )  # DAG: wrong graph type


def test_ate_kind():
    g = parse_graph("Z -> X; Z -> Y; X -> Y")
    cpts = {
        "Z": {"parents": [], "p1": {"": 0.4}},
        "X": {"parents": ["Z"], "p1": {"0": 0.2, "1": 0.7}},
        "Y": {"parents": ["X", "Z"], "p1": {"0,0": 0.1, "0,1": 0.5, "1,0": 0.3, "1,1": 0.8}},
    }
    p = {**problem(g, kind="ate", treatment="X", outcome="Y", threshold=0.3, margin=0.02), "cpts": cpts}
    # true ψ = 0.24 < 0.3 (the confounded contrast 0.47 would say yes)
    assert grade_answer(p, "No.")
    assert not grade_answer(p, "Yes")
    assert grade_answer(p, "no, ψ = 0.245")
    assert not grade_answer(p, "no, psi = 0.20")  # outside the 0.01 tolerance
    assert grade_answer({**p, "query": {**p["query"], "tolerance": 0.05}}, "no, psi = 0.20")
    assert not grade_answer(p, "ψ = 0.24")  # the decision word is required
    assert QUERY_KINDS["ate"].valid_answers(g, p["query"], cpts=cpts)[0][0] is False
    assert normalize_answer(p, "No (ATE = 0.24)") == "no"
    assert not grade_answer({k: v for k, v in p.items() if k != "cpts"}, "No.")  # missing CPTs fail closed


def test_textbook_problems():
    mbias = parse_graph("A -> X; A -> M; B -> M; B -> Y; X -> Y")
    p = problem(mbias, kind="backdoor_set", treatment="X", outcome="Y")
    assert grade_answer(p, "set()") and not grade_answer(p, "{M}") and grade_answer(p, "{M, A}")
    assert [
        QUERY_KINDS["backdoor_set"].format_answer(z)
        for z in QUERY_KINDS["backdoor_set"].valid_answers(mbias, p["query"])
    ][:3] == [
        "{}",
        "{A}",
        "{B}",
    ]
    smoking = parse_graph("Smoking -> Tar -> Cancer; Smoking <-> Cancer")
    fd = problem(smoking, kind="frontdoor_set", treatment="Smoking", outcome="Cancer")
    assert grade_answer(fd, "{Tar}") and not grade_answer(fd, "{}")
    assert not grade_answer(
        problem(smoking, kind="backdoor_set", treatment="Smoking", outcome="Cancer"), "{}"
    )
    ms = problem(smoking, kind="msep_set", x="Smoking", y="Cancer")
    assert not any(grade_answer(ms, a) for a in ("{}", "{Tar}"))


def test_grade_ignores_answer_fields():
    g = parse_graph("U -> X; U -> Y; X -> Y")
    p = {**problem(g, kind="backdoor_set", treatment="X", outcome="Y"), "answer": "{X}"}
    assert grade_answer(p, "{U}") and not grade_answer(p, "{X}")


# ---------------------------------------------------------------------------------------------
# malformed problems and queries
@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda p: p["query"].pop("treatment"), "treatment"),
        (lambda p: p["query"].update(treatment="Q"), "unknown|one graph node"),
        (lambda p: p["query"].update(outcome="X"), "differ"),
        (lambda p: p["query"].update(variant="smallest"), "variant"),
        (lambda p: p["query"].update(kind="telepathy"), "unknown query kind"),
        (lambda p: p.pop("query"), "'graph' and 'query'"),
        (lambda p: p["query"].update(kind="frontdoor_set", variant="largest"), "variant"),
        (lambda p: p["graph"]["directed"].append(["Y", "U"]), "cycle"),
    ],
)
def test_malformed_problems_raise_in_load_and_fail_closed_in_grade(mutate, match):
    g = parse_graph("U -> X; U -> Y; X -> Y")
    p = json.loads(json.dumps(problem(g, kind="backdoor_set", treatment="X", outcome="Y")))
    mutate(p)
    with pytest.raises(ValueError, match=match):
        load_problem(p)
    assert grade_answer(p, "{U}") is False


@pytest.mark.parametrize(
    ("graph_text", "query", "match"),
    [
        ("A -> B", {"kind": "dsep_set", "x": "A", "y": "A"}, "overlap"),
        ("A -> B", {"kind": "dsep_set", "x": [], "y": "B"}, "empty"),
        ("A -> B; A <-> B", {"kind": "dsep_set", "x": "A", "y": "B"}, "DAG"),
        ("A -> B; B -> C", {"kind": "ci_test", "x": "A", "y": "C", "given": ["A"]}, "overlaps"),
        ("A -> B", {"kind": "ci_test", "x": "A", "y": "B", "given": "B2"}, "unknown"),
        ("A -> B", {"kind": "cycle"}, "DG"),
        ("A -> B", {"kind": "ate", "treatment": "A", "outcome": "B"}, "threshold"),
        ("A -> B", {"kind": "ate", "treatment": "A", "outcome": "B", "threshold": 0.1}, "cpts"),
        (
            "A -> B",
            {"kind": "ate", "treatment": "A", "outcome": "B", "threshold": 0.1, "margin": -1},
            "margin",
        ),
        ("A -> B -> A", {"kind": "mediator", "treatment": "A", "outcome": "B"}, "DAG"),
        (
            "A -> B",
            {"kind": "frontdoor_set", "treatment": "A", "outcome": "B", "variant": "least"},
            "variant",
        ),
        ("A -> B", {"kind": "mediator", "treatment": "A", "outcome": "B", "variant": "minimal"}, "variant"),
    ],
)
def test_query_checks(graph_text, query, match):
    with pytest.raises(ValueError, match=match):
        load_problem({"graph": parse_graph(graph_text).to_dict(), "query": query})


def test_frontdoor_variants_and_admg_maximal_backdoor_are_accepted():
    g = parse_graph("X -> M -> Y; X <-> Y; X <-> C; C <-> Y")
    for variant in ("any", "minimal", "maximal"):
        q = {"kind": "frontdoor_set", "treatment": "X", "outcome": "Y", "variant": variant}
        QUERY_KINDS["frontdoor_set"].check_query(g, q)
        assert grade_answer(problem(g, **q), "{M}")
    q = {"kind": "backdoor_set", "treatment": "X", "outcome": "Y", "variant": "maximal"}
    QUERY_KINDS["backdoor_set"].check_query(g, q)  # ADMGs too (one-node additions decide maximality)
    g2 = parse_graph("X -> Y; X <-> B; B <-> A; A <-> Y")
    assert QUERY_KINDS["backdoor_set"].valid_answers(g2, q) == [frozenset({"A"}), frozenset({"B"})]
    assert grade_answer(problem(g2, **q), "{A}") and not grade_answer(problem(g2, **q), "{}")


def test_load_problem_accepts_json_and_rejects_garbage():
    g = parse_graph("U -> X; U -> Y; X -> Y")
    graph, query, cpts = load_problem(json.dumps(problem(g, kind="mediator", treatment="U", outcome="Y")))
    assert graph == g and query["kind"] == "mediator" and cpts is None
    for bad in ("{", "[]", "null", 3):
        with pytest.raises(ValueError):
            load_problem(bad)  # type: ignore[arg-type]
        assert grade_answer(bad, "{U}") is False  # type: ignore[arg-type]
        assert normalize_answer(bad, "{U}") is None  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# registry, strategies, restatement
def test_registry_contents():
    assert set(QUERY_KINDS) == {
        "backdoor_set",
        "frontdoor_set",
        "dsep_set",
        "ci_test",
        "directed_path",
        "mediator",
        "cycle",
        "msep_set",
        "ate",
    }
    for name, kind in QUERY_KINDS.items():
        assert kind.name == name and kind.strategies and kind.graph_kinds and kind.description


@pytest.mark.parametrize(
    ("kind", "text", "expected"),
    [
        ("backdoor_set", "Back-door criterion", True),
        ("backdoor_set", "apply the BACKDOOR_ADJUSTMENT formula", True),
        ("backdoor_set", "front-door criterion", False),
        ("frontdoor_set", "Front door criterion", True),
        ("dsep_set", "d separation", True),
        ("ci_test", "Bayes-ball", True),
        ("msep_set", "m-separation via latent projection", True),
        ("cycle", "depth first search", True),
        ("cycle", "DFS", True),
        ("directed_path", "BFS from X", True),
        ("ate", "adjustment formula", True),
        ("ate", "", False),
        ("mediator", "vibes", False),
    ],
)
def test_matches_strategy(kind, text, expected):
    assert QUERY_KINDS[kind].matches_strategy(text) is expected


QUERIES = [
    {"kind": "backdoor_set", "treatment": "X", "outcome": "Y", "variant": "minimal"},
    {"kind": "backdoor_set", "treatment": "X", "outcome": "Y"},
    {"kind": "backdoor_set", "treatment": "X", "outcome": "Y", "variant": "maximal"},
    {"kind": "frontdoor_set", "treatment": "X", "outcome": "Y"},
    {"kind": "frontdoor_set", "treatment": "X", "outcome": "Y", "variant": "minimal"},
    {"kind": "frontdoor_set", "treatment": "X", "outcome": "Y", "variant": "maximal"},
    {"kind": "dsep_set", "x": ["A", "B"], "y": "Y"},
    {"kind": "ci_test", "x": "A", "y": ["B"], "given": ["D", "C"]},
    {"kind": "ci_test", "x": "A", "y": "B", "given": []},
    {"kind": "directed_path", "treatment": "X", "outcome": "Y"},
    {"kind": "mediator", "treatment": "X", "outcome": "Y"},
    {"kind": "cycle"},
    {"kind": "msep_set", "x": "A", "y": "B"},
    {"kind": "ate", "treatment": "X", "outcome": "Y", "threshold": 0.1, "margin": 0.02},
]


@pytest.mark.parametrize("query", QUERIES)
def test_format_query_round_trips(query):
    text = format_query(query)
    assert query_matches(query, text)
    assert query_matches(query, "  " + text.replace(", ", ",") + " ")
    parsed = parse_query(text)
    assert parsed is not None and parsed["kind"] == query["kind"]


def test_query_matches_rejects_changes():
    q = {"kind": "backdoor_set", "treatment": "X", "outcome": "Y", "variant": "minimal"}
    assert query_matches(q, "backdoor_set(outcome=Y, treatment=X, variant=minimal)")
    assert not query_matches(q, "backdoor_set(treatment=Y, outcome=X, variant=minimal)")
    assert not query_matches(q, "backdoor_set(treatment=X, outcome=Y)")  # variant dropped
    assert not query_matches(q, "frontdoor_set(treatment=X, outcome=Y, variant=minimal)")
    assert not query_matches(q, "backdoor_set(treatment=X)")
    assert not query_matches(q, "backdoor_set treatment=X outcome=Y")
    fd = {"kind": "frontdoor_set", "treatment": "X", "outcome": "Y", "variant": "maximal"}
    assert format_query(fd) == "frontdoor_set(treatment=X, outcome=Y, variant=maximal)"
    assert parse_query(format_query(fd)) == fd
    assert query_matches(fd, "frontdoor_set(treatment=X, outcome=Y, variant=maximal)")
    assert not query_matches(fd, "frontdoor_set(treatment=X, outcome=Y, variant=minimal)")
    assert not query_matches(fd, "frontdoor_set(treatment=X, outcome=Y)")  # variant dropped
    assert query_matches({**fd, "variant": "any"}, "frontdoor_set(treatment=X, outcome=Y)")
    ate = QUERIES[-1]
    assert not query_matches(ate, "ate(treatment=X, outcome=Y, threshold=0.2)")
    ci = next(q for q in QUERIES if q["kind"] == "ci_test")
    assert query_matches(ci, "ci_test(x=A, y=B, given={C, D})")
    assert not query_matches(ci, "ci_test(x=A, y=B, given={C})")
    assert not query_matches({"kind": "nope"}, "nope()")


def test_valid_answers_bounded_on_large_graph():
    text = "; ".join(f"N{i} -> N{j}" for i in range(40) for j in range(i + 1, min(40, i + 4)))
    g = parse_graph(text)
    q = {"kind": "dsep_set", "x": "N0", "y": "N39"}
    with cpu_clock() as clock:
        got = QUERY_KINDS["dsep_set"].valid_answers(g, q, limit=5, max_checks=500)
    assert clock.elapsed < 2.0
    assert all(C.d_separated(g, "N0", "N39", z) for z in got)
