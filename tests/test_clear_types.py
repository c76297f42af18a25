"""Tests for the CLEAR judge on the eleven structure task types (kinship, triples, edges, nodes, paths,
topological orders, root sets, Markov equivalence, identification, C-forests, C-trees).

Records come from ``tests/clear_records_more.py``: every template on seeded random graphs, labelled
by a networkx-only brute-force oracle (d-separation statements for Markov equivalence, a hedge
search for identification), with other right answers the judge must accept and wrong answers it
must reject. Identification is also checked against a brute-force hedge search over random ADMGs
and against textbook graphs worked by hand.
"""

from __future__ import annotations

import itertools
import json
import random
import re
from collections import defaultdict

import clear_records_more as more
import networkx as nx
import pytest
from clear_checks import judge_failures
from clear_records import random_admg
from cpu_clock import cpu_clock
from hypothesis import given, settings
from hypothesis import strategies as st

from faithgrpo.cli import main as cli_main
from faithgrpo.tasks.clear import judge, judge_report, listed_answers, read_question
from faithgrpo.tasks.clear.descriptions import STRUCTURE_TASKS
from faithgrpo.tasks.clear.forms import parse_undirected
from faithgrpo.tasks.clear.identification import identifiable, non_identifiable_pair
from faithgrpo.tasks.clear.records import evaluate_file, format_report
from faithgrpo.verifier.graphs.model import CausalGraph, GraphParseError

RECORDS = more.generate()
GROUPS: dict[tuple[str, str], list[dict]] = defaultdict(list)
for _r in RECORDS:
    GROUPS[_r["task_type"], _r["question_type"]].append(_r)
ADMG = "Given an ADMG (acyclic directed mixed graph) with nodes {nodes}, directed edges {d} and bi-directed edges {b}."
DAG = "Given a DAG (directed acyclic graph) with nodes {nodes} and directed edges {d}."


def rec(
    task: str, qtype: str, description: str, question: str, graph_type: str = "ADMG", answer=None
) -> dict:
    return {"task_type": task, "question_type": qtype, "graph_type": graph_type, "description": description,
            "question": question, "answer": answer}  # fmt: skip


# ---------------------------------------------------------------------------------------------
# the generated records
def test_records_cover_every_template():
    seen = set(GROUPS)
    expected = (
        {("2_node_relation", q) for q in ("FA", "HM", "YN", "MC", "EX")}
        | {("3_node_relation", q) for q in ("FA", "HM", "YN", "MC", "EX")}
        | {(t, q) for t in ("edge", "node", "maximal_root_set") for q in ("FA", "HM", "YN", "MC")}
        | {("path", q) for q in ("FO", "FA", "HM", "YN", "MC")}
        | {("topological", q) for q in ("FO", "YN", "MC")}
        | {("markov_equivalent", q) for q in ("FO", "YN")}
        | {("identification", "YN"), ("c-forest", "YN"), ("c-tree", "YN")}
    )
    assert expected <= seen and {t for t, _ in seen} == set(STRUCTURE_TASKS)
    questions = [read_question(r) for r in RECORDS]
    assert all(questions), [r["question"] for r, q in zip(RECORDS, questions) if q is None][:3]
    pairs = {(q.task_type, q.question_type, q.relation) for q in questions}
    assert {
        ("2_node_relation", qt, rel) for qt in ("FA", "HM", "YN", "MC", "EX") for rel in more.RELATIONS
    } <= pairs
    assert {("3_node_relation", qt, k) for qt in ("FA", "HM", "YN", "MC", "EX") for k in more.KINDS} <= pairs
    negated = {(q.task_type, q.negated) for q in questions if q.question_type == "MC"}
    assert {("edge", True), ("edge", False), ("node", True), ("node", False)} <= negated
    assert {q.variant for q in questions if q.task_type == "path" and q.question_type == "FO"} == {
        "any", "shortest", "longest"}  # fmt: skip
    types = {(r["task_type"], r["graph_type"]) for r in RECORDS}
    assert {(t, k) for t in ("edge", "node") for k in ("UG", "DG", "DAG", "ADMG")} <= types
    assert {(t, k) for t in ("maximal_root_set", "c-forest", "c-tree")
            for k in ("ADMG", "C-component", "C-forest", "C-tree")} <= types  # fmt: skip
    labels = {(r["task_type"], r["answer"]) for r in RECORDS if r["question_type"] == "YN"}
    assert {
        (t, a) for t in ("identification", "c-forest", "c-tree", "markov_equivalent") for a in ("Yes.", "No.")
    } <= labels
    words = {("Markov" in r["question"], r["answer"]) for r in GROUPS["markov_equivalent", "YN"]}
    assert words == {(True, "Yes."), (True, "No."), (False, "Yes."), (False, "No.")}  # no cue in the wording


@pytest.mark.parametrize("group", sorted(GROUPS), ids=lambda g: f"{g[0]}-{g[1]}")
def test_judge_agrees_with_the_brute_force_labels(group):
    for r in GROUPS[group]:
        if r["question_type"] in ("YN", "EX", "HM", "MC"):
            assert r["reject"], r["question"]  # every closed question has wrong answers to reject
    failures = judge_failures(GROUPS[group])
    assert not failures, failures[:5]


def test_other_right_answers_are_accepted():
    # any topological order, not just the listed one
    fo = GROUPS["topological", "FO"]
    assert sum(len(set(r["accept"])) >= 4 for r in fo) >= 10
    # every member of the Markov equivalence class other than the given graph
    assert max(len(r["accept"]) for r in GROUPS["markov_equivalent", "FO"]) >= 10
    # tied shortest / longest paths
    tied = [r for r in GROUPS["path", "FO"] if "est paths" in r["question"] and len(r["accept"]) >= 2]
    assert {("shortest" in r["question"]) for r in tied} == {True, False}
    # the whole list for one graph: every order networkx enumerates, every class member
    d = "Given a DAG (directed acyclic graph) with nodes A, B, C, D, E and directed edges A->C, B->C, C->D."
    r = rec("topological", "FO", d, "Find one valid topological ordering of the graph.", "DAG")
    dg = nx.DiGraph([("A", "C"), ("B", "C"), ("C", "D")])
    dg.add_node("E")
    orders = list(nx.all_topological_sorts(dg))
    assert len(orders) == 10 and all(judge(r, ", ".join(o)) for o in orders)
    assert sum(judge(r, ", ".join(p)) for p in itertools.permutations("ABCDE")) == 10
    # chain A->B->C->D: 4 DAGs in the class (one per source), so 3 right answers besides the given
    r = rec("markov_equivalent", "FO", DAG.format(nodes="A, B, C, D", d="A->B, B->C, C->D"),
            "Find another graph that belongs to the same Markov Equivalent Class of the given graph.", "DAG")  # fmt: skip
    right = ["B->A, B->C, C->D", "B->A, C->B, C->D", "B->A, C->B, D->C"]
    assert all(judge(r, f"DAG with nodes A, B, C, D and directed edges {e}.") for e in right)
    assert all(judge(r, e) for e in right)  # a bare edge list on the given nodes
    for wrong in (
        "A->B, B->C, C->D",
        "A->B, C->B, C->D",
        "B->A, B->C, D->C",
        "A->B, B->C",
        "B->A, C->B, D->C, A->D",
    ):
        assert judge(r, wrong) is False, wrong  # the given graph, new v-structures, other skeletons


def test_label_cues_are_not_used():
    # capitalisation of "Markov Equivalent Class" decides CLEAR's labels; it must not decide ours
    flip = {
        "Markov Equivalent Class": "markov equivalent class",
        "markov equivalent class": "Markov Equivalent Class",
    }
    for r in GROUPS["markov_equivalent", "YN"]:
        words = next(w for w in flip if w in r["question"])
        other = {**r, "question": r["question"].replace(words, flip[words])}
        for a in ("Yes.", "No."):
            assert judge(r, a) == judge(other, a) and judge(r, a) is not None
    # the graph_type field decides CLEAR's C-forest / C-tree labels; it must not decide ours
    for task in ("c-forest", "c-tree", "maximal_root_set"):
        for r in [x for x in RECORDS if x["task_type"] == task]:
            for a in [*listed_answers(r), *r["reject"][:1]]:
                verdicts = {
                    judge({**r, "graph_type": t}, a) for t in ("ADMG", "C-component", "C-forest", "C-tree")
                }
                assert len(verdicts) == 1 and None not in verdicts, (r["description"], a)
    # a C-tree whose graph_type says C-component (as in one published record per file) is a C-tree
    d = ADMG.format(nodes="P, Q, R, S", d="P->R, Q->R, R->S", b="P<->Q, Q<->R, R<->S")
    for task, question in (("c-forest", "Is it a C-forest?"), ("c-tree", "Is it a C-tree?")):
        for gt in ("C-component", "ADMG", "C-tree"):
            r = rec(task, "YN", d, question, gt, "No.")
            assert judge(r, "Yes.") is True and judge(r, "No.") is False


# ---------------------------------------------------------------------------------------------
# identification
def _admg(nodes: str, directed: str = "", bidirected: str = "") -> CausalGraph:
    pairs = lambda s, sep: [tuple(e.split(sep)) for e in s.split(", ") if e]  # noqa: E731
    return CausalGraph("ADMG", tuple(nodes.split(", ")), frozenset(pairs(directed, "->")),
                       frozenset(pairs(bidirected, "<->")))  # fmt: skip


TEXTBOOK = [  # (name, nodes, directed, bidirected, x, y, identifiable), worked by hand
    ("bow arc", "X, Y", "X->Y", "X<->Y", "X", "Y", False),
    ("front door", "X, M, Y", "X->M, M->Y", "X<->Y", "X", "Y", True),
    ("back door, latent-free", "Z, X, Y", "Z->X, Z->Y, X->Y", "", "X", "Y", True),
    ("confounded mediator", "X, Z, Y", "X->Z, Z->Y", "X<->Z", "X", "Y", False),
    ("confounded mediator-outcome", "X, Z, Y", "X->Z, Z->Y", "Z<->Y", "X", "Y", True),
    ("instrument", "Z, X, Y", "Z->X, X->Y", "X<->Y", "X", "Y", False),
    ("napkin", "W, Z, X, Y", "W->Z, Z->X, X->Y", "W<->X, W<->Y", "X", "Y", True),
    ("adjust for a confounded covariate", "X, Z, Y", "X->Y, Z->Y", "X<->Z", "X", "Y", True),
    ("collider in the bi-directed path", "X, Z, Y", "X->Y", "X<->Z, Z<->Y", "X", "Y", True),
    ("bi-directed path to a parent of Y", "X, Z, Y", "X->Y, Z->Y", "X<->Z, Z<->Y", "X", "Y", False),
    ("front door with a confounded mediator", "X, M, Y", "X->M, M->Y", "X<->Y, X<->M", "X", "Y", False),
    ("not an ancestor", "X, Y", "Y->X", "X<->Y", "X", "Y", True),
]


@pytest.mark.parametrize("case", TEXTBOOK, ids=lambda c: c[0])
def test_identification_textbook_graphs(case):
    name, nodes, d, b, x, y, expected = case
    g = _admg(nodes, d, b)
    assert identifiable(g, x, y) is expected, name
    oracle = more.Graph("ADMG", nodes.split(", "), set(g.directed), set(g.bidirected))
    assert (not more.hedge_exists(oracle, x, y)) is expected, name
    desc = ADMG.format(nodes=nodes, d=d, b=b) if b else DAG.format(nodes=nodes, d=d)
    r = rec(
        "identification",
        "YN",
        desc,
        f"Can the causal effect of treatment {x} on outcome {y} be identified or not?",
    )
    assert (
        judge(r, "Yes." if expected else "No.") is True and judge(r, "No." if expected else "Yes.") is False
    )


def test_non_identifiable_pair_names_the_hedge():
    assert non_identifiable_pair(_admg("X, Y", "X->Y", "X<->Y"), "X", "Y") == (
        frozenset("XY"),
        frozenset("Y"),
    )
    t, s = non_identifiable_pair(_admg("X, Z, Y", "X->Y, Z->Y", "X<->Z, Z<->Y"), "X", "Y")
    assert t == frozenset("XZY") and s == frozenset("ZY")
    assert non_identifiable_pair(_admg("X, M, Y", "X->M, M->Y", "X<->Y"), "X", "Y") is None
    for bad in (("X", "X"), ("X", "Q"), ((), "Y")):
        with pytest.raises(ValueError):
            non_identifiable_pair(_admg("X, Y", "X->Y"), *bad)
    with pytest.raises(ValueError):
        identifiable(CausalGraph("DG", ("X", "Y"), frozenset({("X", "Y"), ("Y", "X")})), "X", "Y")


def test_identification_matches_a_brute_force_hedge_search():
    rng = random.Random(77)
    counts = defaultdict(int)
    for i in range(36):
        g = random_admg(rng, 4 + i % 3, rng.uniform(0.3, 0.6), rng.uniform(0.2, 0.7))
        cg = CausalGraph("ADMG", tuple(g.nodes), frozenset(g.directed), frozenset(g.bidirected))
        connected = more.connected_sets(g)
        for x, y in itertools.permutations(sorted(g.nodes), 2):
            truth = not more.hedge_exists(g, x, y, connected)
            assert identifiable(cg, x, y) is truth, (g.directed, g.bidirected, x, y)
            counts[truth] += 1
    assert counts[True] > 100 and counts[False] > 50


# ---------------------------------------------------------------------------------------------
# reading and open cases
def test_reading_the_structure_templates():
    ug = "Given a undirected graph with nodes S, L, N, T and undirected edges S-T, L-N, T-L."
    g, edges = parse_undirected(ug)
    assert (
        g.kind == "UG"
        and g.nodes == ("S", "L", "N", "T")
        and edges == (("S", "-", "T"), ("L", "-", "N"), ("L", "-", "T"))
    )
    for bad in ("Given a undirected graph with nodes S, L and undirected edges S-Q.",
                "Given a undirected graph with nodes S, L and undirected edges S->L.",
                "Given a undirected graph with nodes S, L and undirected edges S-S.", "Given a DAG."):  # fmt: skip
        with pytest.raises(GraphParseError):
            parse_undirected(bad)
    q = read_question(
        rec(
            "edge",
            "MC",
            ug,
            "Which of the following is NOT an edge of this graph?\nA. S-T\nB. T-S\nC. N-T",
            "UG",
        )
    )
    assert q.negated and [v for _, v in q.options] == [("S", "-", "T"), ("S", "-", "T"), ("N", "-", "T")]
    r = rec(
        "edge", "MC", ug, "Which of the following is NOT an edge of this graph?\nA. S-T\nB. T-S\nC. N-T", "UG"
    )
    assert [judge(r, a) for a in "ABC"] == [False, False, True]
    assert (
        read_question(rec("path", "FA", ug, "Find all paths from S to T.", "UG")) is None
    )  # UG: edge and node only
    d = DAG.format(nodes="A, B, C", d="A->B, B->C")
    q = read_question(rec("2_node_relation", "YN", d, "Is node A one of ancestors of node C?", "DAG"))
    assert (q.relation, q.claim, q.node) == ("ancestors", "A", "C")
    q = read_question(
        rec("3_node_relation", "YN", d, "Does nodes {C, A, B} form a chain in this graph?", "DAG")
    )
    assert q.relation == "chain" and set(q.claim) == {"A", "B", "C"}
    for text, verdict in (("Yes.", True), ("No.", False)):
        assert (
            judge(
                rec("3_node_relation", "YN", d, "Does nodes {C, A, B} form a chain in this graph?", "DAG"),
                text,
            )
            is verdict
        )
    # open cases: Markov equivalence outside DAGs, identification in a cyclic graph
    dg = "Given a directed graph with nodes A, B, C and directed edges A->B, B->A, B->C."
    assert (
        judge(
            rec(
                "identification",
                "YN",
                dg,
                "Can the causal effect of treatment A on outcome C be identified or not?",
                "DG",
            ),
            "Yes.",
        )
        is None
    )
    admg = ADMG.format(nodes="A, B, C", d="A->B", b="B<->C")
    assert (
        judge(
            rec(
                "markov_equivalent",
                "FO",
                admg,
                "Find another graph that belongs to the same Markov Equivalent Class of the given graph.",
            ),
            "B->A",
        )
        is None
    )
    # a claim written from the end back to the start is left open; an answer is turned around
    r = rec("path", "YN", d, "Is C<-B<-A a path from A to C?", "DAG")
    assert judge(r, "Yes.") is None
    assert judge(rec("path", "FO", d, "Find one path from A to C.", "DAG"), "C<-B<-A") is True


def test_kinship_and_triple_conventions_by_hand():
    # ancestors exclude the node itself; bi-directed edges are never parents/children nor shield a triple
    d = ADMG.format(nodes="A, B, C, D", d="A->B, B->C, D->C", b="A<->C, B<->D")
    fa = lambda rel, v: rec("2_node_relation", "FA", d, f"List all {rel} of node {v}.")  # noqa: E731
    assert judge(fa("ancestors", "C"), "{'A', 'B', 'D'}") and judge(fa("parents", "B"), "{'A'}")
    assert (
        judge(fa("ancestors", "C"), "{'A', 'B', 'C', 'D'}") is False
        and judge(fa("parents", "B"), "{'A', 'D'}") is False
    )
    chains = rec("3_node_relation", "FA", d, "List all chains of this graph.")
    colliders = rec("3_node_relation", "FA", d, "List all v-structures of this graph.")
    assert judge(chains, "[('A', 'B', 'C')]") and judge(
        chains, "[('C', 'B', 'A')]"
    )  # shielded only by A<->C: still a chain
    assert judge(colliders, "[('B', 'D', 'C')]") and judge(colliders, "[]") is False
    roots = rec("maximal_root_set", "FA", d, "Find the maximal root set of this graph.")
    assert judge(roots, "{'C'}") and judge(roots, "{'A', 'D'}") is False  # sinks, not sources
    count = rec("edge", "HM", d, "How many edges does this graph have?")
    assert judge(count, "5") and judge(count, "4") is False
    # a directed graph with a 2-cycle: a node is not its own ancestor; each of the two edges is a step
    dg = "Given a directed graph with nodes A, B, C and directed edges A->B, B->A, B->C."
    assert judge(rec("2_node_relation", "FA", dg, "List all ancestors of node A.", "DG"), "{'B'}")
    paths = rec("path", "FA", dg, "Find all paths from A to C.", "DG")
    assert judge(paths, "['A->B->C', 'A<-B->C']") and judge(paths, "['A->B->C']") is False
    assert (
        judge(
            rec("topological", "FO", dg, "Find one valid topological ordering of the graph.", "DG"), "A, B, C"
        )
        is False
    )


def test_docstring_examples_of_the_structure_modules():
    import doctest
    import importlib

    names = ("identification", "forms", "structure", "verdicts", "values")
    mods = [importlib.import_module(f"faithgrpo.tasks.clear.{m}") for m in names]
    results = [doctest.testmod(mod) for mod in mods]
    assert sum(r.attempted for r in results) >= 3 and sum(r.failed for r in results) == 0


# ---------------------------------------------------------------------------------------------
# robustness
ONE_PER_GROUP = [rs[0] for _, rs in sorted(GROUPS.items())]
HOSTILE = [
    "(" * 20_000, "('A', 'B', 'C'), " * 3_000, "A, " * 6_000, "A-B, " * 4_000, "A->" * 20_000 + "B",
    "DAG with nodes " + "A, " * 5_000 + "and directed edges A->B.", "{" + "'A', " * 5_000 + "}",
    ["A"] * 5_000, [["A"]], None, 3.5, "\x00\u202e", "__import__('os').system('ls')",
]  # fmt: skip


def test_hostile_candidates_are_rejected_quickly_and_never_raise():
    with cpu_clock() as clock:
        for r in ONE_PER_GROUP:
            for cand in HOSTILE:
                assert judge(r, cand) in (False, None), (r["task_type"], r["question_type"], str(cand)[:40])
    assert clock.elapsed < 20.0


def test_hostile_records_never_raise():
    values = (None, 3, ["x"], "(" * 10_000, "Given a undirected graph with nodes " + "A-B, " * 3_000,
              "Given another DAG with nodes " + "A, " * 5_000, "\ud800", "?" * 16_000)  # fmt: skip
    with cpu_clock() as clock:
        for base in ONE_PER_GROUP:
            for field in ("description", "question", "task_type", "question_type", "graph_type"):
                for value in values:
                    assert judge({**base, field: value}, base["answer"]) in (True, False, None)
    assert clock.elapsed < 20.0


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(ONE_PER_GROUP),
    st.one_of(st.text(max_size=200), st.lists(st.text(max_size=12), max_size=4)),
)
def test_judge_never_raises(record, text):
    assert judge(record, text) in (True, False, None)
    assert judge({**record, "question": record["question"][:30] + str(text)}, "Yes.") in (True, False, None)


# ---------------------------------------------------------------------------------------------
# the report
def test_clear_judge_report_and_cli(tmp_path, capsys):
    d = tmp_path / "json_single"
    d.mkdir()
    by_task = defaultdict(list)
    for r in RECORDS:
        by_task[r["task_type"]].append(r)
    wrong = {**by_task["c-tree"][0], "uid": "99999999"}
    wrong["answer"] = "No." if wrong["answer"] == "Yes." else "Yes."
    by_task["c-tree"].append(wrong)
    for task, rs in by_task.items():
        (d / f"{task}.json").write_text("".join(json.dumps(r) + "\n" for r in rs))
    report = judge_report(d)
    assert report["overall"] == {"total": len(RECORDS) + 1, "judged": len(RECORDS) + 1,
                                 "accepted": len(RECORDS), "rejected": 1, "unsupported": 0}  # fmt: skip
    (case,) = report["disagreements"]
    assert case["uid"] == "99999999" and case["file"] == "c-tree.json" and case["label"] == wrong["answer"]
    assert (
        case["judge"].startswith("Yes." if wrong["answer"] == "No." else "No.")
        and "district" in case["judge"]
    )
    assert report["undecided"] == [] and report["seconds"] > 0
    text = format_report(report)
    assert "disagreements with the label: 1" in text and "uid 99999999" in text
    assert cli_main(["clear-judge", str(d)]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("all "))
    assert row.split()[1:] == [str(len(RECORDS) + 1), str(len(RECORDS) + 1), str(len(RECORDS)), "1", "0"]
    assert "c-tree                       YN" in out and "undecided: 0" in out
    assert cli_main(["clear-judge", str(tmp_path / "none")]) == 2
    assert "No such file" in capsys.readouterr().err
    assert evaluate_file(d)["overall"]["rejected"] == 1


# ---------------------------------------------------------------------------------------------
# CALVER problems from the structure types
def test_ancestor_and_descendant_questions_become_reachability_problems_that_agree_with_the_judge():
    """``Is node W one of ancestors of node V?`` is a directed path W -> V (descendants: V -> W);
    the problem's predicate and the judge give the same yes/no, the gold trace is 6/6 and says the
    judge's answer. Every other structure question converts to nothing (no query kind asks it)."""
    from faithgrpo.rewards.calver.problem import prepare_problem
    from faithgrpo.rewards.calver.reward import score_trace
    from faithgrpo.tasks.certificates.gold import gold_trace
    from faithgrpo.tasks.clear.records import to_problem
    from faithgrpo.text import extract_answer
    from faithgrpo.verifier.queries import grade_answer

    converted = 0
    for record in RECORDS:
        problem = to_problem(record)
        kin = record["task_type"] == "2_node_relation" and record["question_type"] == "YN"
        relation = next((r for r in ("ancestors", "descendants") if r in record["question"]), None)
        if not (kin and relation) or record["graph_type"] not in ("DAG", "DG", "ADMG"):
            assert problem is None, (record["task_type"], record["question_type"], record["question"])
            continue
        w, v = re.findall(r"node (\w+)", record["question"])
        if w == v:  # not an ancestor of itself: the judge's "No." is a definition, not a derivation
            assert problem is None
            continue
        assert problem is not None and problem["query"]["kind"] == "directed_path", record["question"]
        expected = (w, v) if relation == "ancestors" else (v, w)
        assert (problem["query"]["treatment"], problem["query"]["outcome"]) == expected
        # the oracle, not the judge: the description's directed edges (X->Y; X<->Y does not match)
        d = nx.DiGraph(re.findall(r"(\w+)->(\w+)", record["description"]))
        d.add_nodes_from(expected)
        reach = nx.has_path(d, *expected)
        assert grade_answer(problem, "yes") is reach and grade_answer(problem, "no") is (not reach)
        assert judge(record, "Yes." if reach else "No.") is True
        trace = gold_trace(problem, rng=0)
        assert score_trace(trace, prepare_problem(problem)).total == 6
        assert extract_answer(trace).strip().lower() == ("yes" if reach else "no")
        converted += 1
    assert converted >= 20
