"""Tests for faithgrpo.tasks.clear: the CLEAR judge, typed reading, listed answers, problems, files, CLI.

The main fixture is ``tests/data/clear_templates.jsonl``: records instantiating every CLEAR
template (docs/clear.md, "Record format") on seeded random DAGs, ADMGs and directed graphs, labelled
by the networkx brute-force oracle of ``tests/clear_records.py`` (independent of the judge's own predicates), with
candidates the judge must accept and wrong answers built by brute force that it must reject.
"""

from __future__ import annotations

import itertools
import json
import re
from collections import defaultdict
from pathlib import Path

import clear_records
import pytest
from clear_checks import judge_failures
from cpu_clock import cpu_clock
from hostile_inputs import hostile_inputs
from hypothesis import given, settings
from hypothesis import strategies as st

from faithgrpo.cli import main as cli_main
from faithgrpo.tasks.causal.prompts import chat_prompt
from faithgrpo.tasks.clear.candidates import judge, listed_answers
from faithgrpo.tasks.clear.descriptions import (
    STRUCTURE_TASKS,
    TASK_TYPES,
    normalize_task_type,
    parse_description,
)
from faithgrpo.tasks.clear.questions import ClearQuestion, read_question
from faithgrpo.tasks.clear.records import evaluate_file, format_summary, load_records, to_problem
from faithgrpo.verifier.graphs.edges import parse_path
from faithgrpo.verifier.graphs.model import GraphParseError
from faithgrpo.verifier.queries import grade_answer

DATA = Path(__file__).parent / "data" / "clear_templates.jsonl"
RECORDS = [json.loads(line) for line in DATA.read_text().splitlines()]
JUDGED = [r for r in RECORDS if r["expect"] == "judged"]
OPEN = [r for r in RECORDS if r["expect"] == "unsupported"]
GROUPS: dict[tuple[str, str], list[dict]] = defaultdict(list)
for _r in JUDGED:
    GROUPS[_r["task_type"], _r["question_type"]].append(_r)


def _fmt(s) -> str:
    return "{" + ", ".join(f"'{v}'" for v in sorted(s)) + "}" if s else "set()"


def rec(task: str, qtype: str, description: str, question: str, answer=None, graph_type: str = "DAG") -> dict:
    return {
        "task_type": task,
        "question_type": qtype,
        "graph_type": graph_type,
        "description": description,
        "question": question,
        "answer": answer,
    }


# ---------------------------------------------------------------------------------------------
# the generated template records
def test_records_file_is_a_fresh_generation():
    assert clear_records.dumps(clear_records.generate()) == DATA.read_text()


def test_records_cover_every_template():
    seen = {(r["task_type"], r["question_type"]) for r in JUDGED}
    expected = (
        {("backdoor_adjustment_set", q) for q in ("FO", "YN", "MC", "EX")}
        | {("frontdoor_adjustment_set", q) for q in ("FO", "YN", "MC", "EX")}
        | {("d-separation", q) for q in ("FO", "YN", "MC")}
        | {("blocked_path", q) for q in ("FO", "YN", "MC")}
        | {("backdoor_path", q) for q in ("FO", "FA", "HM", "YN", "MC")}
        | {("directed_path", q) for q in ("FA", "HM", "YN", "EX", "MC")}
        | {("cycle", q) for q in ("FO", "YN", "MC", "EX")}
        | {("markov_blanket", q) for q in ("FO", "YN", "MC")}
        | {("c-component", q) for q in ("YN", "FA", "HM")}
    )
    assert expected <= seen
    variants = {(r["task_type"], read_question(r).variant) for r in JUDGED if r["question_type"] == "FO"}
    for task in ("backdoor_adjustment_set", "frontdoor_adjustment_set"):
        assert {(task, v) for v in ("any", "minimal", "maximal")} <= variants
    assert {("d-separation", "minimal"), ("blocked_path", "minimal")} <= variants
    assert {("backdoor_path", "shortest"), ("backdoor_path", "longest")} <= variants
    kinds = {(r["task_type"], read_question(r).graph.kind) for r in JUDGED}
    assert {("backdoor_path", "ADMG"), ("d-separation", "ADMG"), ("cycle", "DG")} <= kinds
    assert any(isinstance(r["answer"], list) for r in JUDGED)  # JSON-array FA answers
    assert any(
        r["question_type"] == "FO" and str(r["answer"]).startswith("[") for r in JUDGED
    )  # lists of sets
    assert any("set()" in json.dumps(r) for r in JUDGED)


@pytest.mark.parametrize("group", sorted(GROUPS), ids=lambda g: f"{g[0]}-{g[1]}")
def test_judge_agrees_with_the_brute_force_labels(group):
    failures = judge_failures(GROUPS[group])
    assert not failures, failures[:5]


def test_open_cases_are_unsupported_not_guessed():
    # front-door without a directed path, endpoints in a conditioning set, reversed path claims,
    # closed walks that go round twice, Markov blankets outside DAGs
    assert {r["task_type"] for r in OPEN} == {
        "frontdoor_adjustment_set",
        "d-separation",
        "blocked_path",
        "backdoor_path",
        "cycle",
        "markov_blanket",
    }
    bad = [
        (r["question"], a)
        for r in OPEN
        for a in (r["answer"], "Yes.", "No.", "set()")
        if judge(r, a) is not None
    ]
    assert not bad, bad[:5]


def test_evaluate_file_accepts_every_listed_answer():
    summary = evaluate_file(DATA)
    assert summary["overall"] == {
        "total": len(RECORDS),
        "judged": len(JUDGED),
        "accepted": len(JUDGED),
        "rejected": 0,
        "unsupported": len(OPEN),
    }
    assert summary["bad_lines"] == 0 and summary["files"] == 1
    table = format_summary(summary)
    assert "backdoor_adjustment_set" in table and "judged" in table.splitlines()[0]


# ---------------------------------------------------------------------------------------------
# hand-computed cases
DAG_MHVF = "Given a DAG (directed acyclic graph) with nodes M, H, V, F and directed edges M->F, V->F, H->V, M->V, H->F."


def test_backdoor_templates_by_hand():
    # V <- H -> F and V <- M -> F are the backdoor paths from V to F; F is V's only descendant.
    # Valid sets: exactly {M, H} (both paths need a block; no other node is left).
    role = "for treatment V and outcome F"
    fo = rec(
        "backdoor_adjustment_set",
        "FO",
        DAG_MHVF,
        f"Find one valid backdoor adjustment set {role}.",
        "[{'M', 'H'}]",
    )
    assert judge(fo, "{'M', 'H'}") and judge(fo, "{H, M}") and judge(fo, "[{'M', 'H'}]")
    assert (
        judge(fo, "{'M'}") is False and judge(fo, "set()") is False and judge(fo, "{'M', 'H', 'F'}") is False
    )
    assert judge(fo, "[{'M', 'H'}, {'M'}]") is False  # FO asks for one set
    q = read_question(fo)
    assert isinstance(q, ClearQuestion) and (q.x, q.y, q.variant, q.graph.kind) == ("V", "F", "any", "DAG")
    mx = {**fo, "question": f"Find one maximal valid backdoor adjustment set {role}."}
    assert read_question(mx).variant == "maximal" and judge(mx, "{'H', 'M'}")
    yn = rec("backdoor_adjustment_set", "YN", DAG_MHVF, f"Is set() a valid backdoor adjustment set {role}?")
    assert read_question(yn).claim == frozenset() and judge(yn, "No.") and judge(yn, "Yes.") is False
    mc = rec(
        "backdoor_adjustment_set",
        "MC",
        DAG_MHVF,
        f"Which of the following sets is a valid backdoor adjustment set {role}?\nA. {{'M'}}\nB. set()\nC. {{'H'}}\nD. {{'M', 'H'}}",
    )
    assert [letter for letter, _ in read_question(mc).options] == ["A", "B", "C", "D"]
    inline = {**mc, "question": mc["question"].replace("\n", " ")}  # options on the question's line
    markdown = {**mc, "question": mc["question"].replace("\n", "\\\n") + " "}  # CLEAR's markdown breaks
    assert read_question(inline).options == read_question(markdown).options == read_question(mc).options
    for text in ("D", "D.", "(D)", "Option D", "Answer: D", "The answer is D", "D. {'H', 'M'}", "d"):
        assert judge(mc, text) is True, text
    for text in ("A", "B", "C", "E", "", "Both", "D. {'M'}", "42"):
        assert judge(mc, text) is False, text
    ex = rec(
        "backdoor_adjustment_set",
        "EX",
        DAG_MHVF,
        "Does there exist a valid backdoor adjustment set for treatment H and outcome V?",
    )
    assert judge(ex, "Yes.")  # H -> V directly, no backdoor path: set() works
    # the older wording "for the ordered pair (X, Y)" reads the same roles
    old = {**fo, "question": "Find one backdoor adjustment set for the ordered pair (V, F)."}
    assert judge(old, "{'M', 'H'}") and judge(old, "{'M'}") is False


def test_minimal_and_maximal_are_brute_force_over_all_subsets():
    # Backdoor paths from X to Y: X <- A -> Y and X <-> B -> Y (B is a non-collider there); X's only
    # descendant is Y. C -> B and D -> C hang off B, so valid sets are {A, B} plus any of C, D:
    # minimal {A, B}; maximal {A, B, C, D} only ({A, B} and {A, B, C} have valid proper supersets).
    desc = (
        "Given an ADMG (acyclic directed mixed graph) with nodes X, Y, A, B, C, D, directed edges "
        "A->X, A->Y, X->Y, B->Y, C->B, D->C and bi-directed edges X<->B."
    )
    role = "for treatment X and outcome Y"
    mn = rec(
        "backdoor_adjustment_set",
        "FO",
        desc,
        f"Find one minimal valid backdoor adjustment set {role}.",
        graph_type="ADMG",
    )
    mx = {**mn, "question": f"Find one maximal valid backdoor adjustment set {role}."}
    assert judge(mn, "{'A', 'B'}") and judge(mn, "{'A', 'B', 'C'}") is False
    assert judge(mx, "{'A', 'B', 'C', 'D'}") and judge(mx, "{'A', 'B', 'C'}") is False
    assert judge(mx, "{'A', 'B'}") is False and judge(mn, "{'A'}") is False
    # d-separation minimal: X <- A -> Y; conditioning on B opens nothing; {A} is the minimal one
    dmin = rec("d-separation", "FO", "Given a DAG (directed acyclic graph) with nodes X, A, Y, B and directed edges A->X, A->Y, Y->B.",
               "Find the minimal nodeset that can d-separate node X and node Y .")  # fmt: skip
    assert judge(dmin, "{'A'}") and judge(dmin, "{'A', 'B'}") is False and judge(dmin, "set()") is False


def test_cycle_rule_and_the_mixed_arrow_trap():
    # the cycles are A->B->C->A and A->B->D->A
    desc = "Given a directed graph with nodes A, B, C, D and directed edges A->B, B->C, C->A, B->D, D->A."
    yn = rec("cycle", "YN", desc, "Is C<-B<-A<-C a cycle in this graph?", graph_type="DG")
    assert judge(yn, "Yes.")  # every arrow <-: C<-B (B->C), B<-A (A->B), A<-C (C->A)
    for claim in ("A<-D->B->A", "C->A<-B->C", "A->B->C", "A->C->B->A"):
        # mixed arrows (A, D, B lie on the cycle A->B->D->A), mixed, not closed, against the edges
        assert judge({**yn, "question": f"Is {claim} a cycle in this graph?"}, "No."), claim
    fo = rec("cycle", "FO", desc, "Find one cycle in this graph.", "A->B->C->A", graph_type="DG")
    for good in ("A->B->C->A", "B->C->A->B", "B->D->A->B", "A<-C<-B<-A", "A → B → C → A", "'A->B->C->A'"):
        assert judge(fo, good) is True, good
    for bad in ("A->B->C", "A<-D->B->A", "A->B->A", "[A, B, C]", "A->B->C->A->B->C->A", ""):
        assert judge(fo, bad) is False, bad
    ex = rec("cycle", "EX", "Given a directed graph with nodes A, B, C and directed edges A->B, B->C.",
             "Are there any cycles in this graph?", graph_type="DG")  # fmt: skip
    assert judge(ex, "No.") and judge(ex, "Yes.") is False


def test_c_component_counts_bidirected_edges_only():
    # directed edges join A-B-C-D into one chain, but only A <-> B is bi-directed: 3 districts
    desc = (
        "Given an ADMG (acyclic directed mixed graph) with nodes A, B, C, D, directed edges A->B, B->C, "
        "C->D and bi-directed edges A<->B."
    )
    part = "It can be uniquely partitioned into a set C(G) of subgraphs, each a maximal C-component."
    yn = rec("c-component", "YN", desc, "Is it a C-component?", graph_type="ADMG")
    fa = rec(
        "c-component", "FA", desc, f"{part} Write down such partition of the given graph.", graph_type="ADMG"
    )
    hm = rec("c-component", "HM", desc, f"{part} How many subgraphs are there in C(G)?", graph_type="ADMG")
    assert judge(yn, "No.") and judge(yn, "Yes.") is False
    assert judge(fa, "[{'A', 'B'}, {'C'}, {'D'}]") and judge(fa, ["{'D'}", "{'B', 'A'}", "{'C'}"])
    assert judge(fa, "[{'A', 'B', 'C', 'D'}]") is False and judge(fa, "[{'A', 'B'}, {'C', 'D'}]") is False
    assert judge(hm, "3") and judge(hm, "three") and judge(hm, "1") is False
    one = desc.replace("A<->B", "A<->B, B<->C, D<->C")
    for gt in ("ADMG", "C-component"):  # the graph_type does not matter
        assert judge({**yn, "description": one, "graph_type": gt}, "Yes.")


def test_backdoor_path_json_array_answers():
    # L <- W -> A and L <- W <- V -> A are the backdoor paths from L to A (W is L's only parent)
    desc = "Given a DAG (directed acyclic graph) with nodes V, W, L, A and directed edges W->A, V->W, W->L, V->A, L->A."
    fa = rec(
        "backdoor_path",
        "FA",
        desc,
        "Find all backdoor paths from node L to node A.",
        ["L<-W->A", "L<-W<-V->A"],
    )
    assert listed_answers(fa) == ['["L<-W->A", "L<-W<-V->A"]']
    assert (
        judge(fa, fa["answer"])
        and judge(fa, "['L<-W<-V->A', 'L<-W->A']")
        and judge(fa, "L<-W->A, L<-W<-V->A")
    )
    assert judge(fa, ["A<-W->L", "A<-V->W->L"])  # each path written from the other end
    assert judge(fa, ["L<-W->A"]) is False and judge(fa, ["L<-W->A", "L<-W->A", "L<-W<-V->A"]) is False
    assert judge(fa, ["L<-W->A", "L<-W<-V->A", "L->A"]) is False
    hm = rec("backdoor_path", "HM", desc, "How many backdoor paths are from node L to node A.", "2")
    assert judge(hm, "2") and judge(hm, 2) and judge(hm, "3") is False
    short = rec("backdoor_path", "FO", desc, "Find the shortest backdoor path from node L to node A.")
    long = {**short, "question": "Find the longest backdoor path from node L to node A."}
    assert judge(short, "L<-W->A") and judge(short, "L <- W -> A") and judge(short, "L<-W<-V->A") is False
    assert judge(long, "L<-W<-V->A") and judge(long, "L<-W->A") is False and judge(long, "L->A") is False
    yn = rec("backdoor_path", "YN", desc, "Is L<-W->A a backdoor path from L to A?")
    assert judge(yn, "Yes.") and judge({**yn, "question": "Is L->A a backdoor path from L to A?"}, "No.")
    assert (
        judge({**yn, "question": "Is A<-W->L a backdoor path from L to A?"}, "Yes.") is None
    )  # written backwards


def test_admg_backdoor_paths_use_bidirected_edges():
    # U <- G -> L and U <- G -> K <-> L; U -> L is not a backdoor path
    desc = (
        "Given an ADMG (acyclic directed mixed graph) with nodes G, K, U, L, directed edges G->L, G->U, "
        "G->K, U->L and bi-directed edges K<->L."
    )
    fa = rec(
        "backdoor_path",
        "FA",
        desc,
        "Find all backdoor paths from node U to node L.",
        ["U<-G->L", "U<-G->K<->L"],
        "ADMG",
    )
    assert judge(fa, fa["answer"]) and judge(fa, ["U<-G->L"]) is False
    dsep = rec(
        "d-separation", "YN", desc, "Are node U and node L d-separated by nodeset {'G'}?", graph_type="ADMG"
    )
    assert judge(dsep, "No.")  # U -> L directly


def test_directed_path_templates():
    desc = "Given a DAG (directed acyclic graph) with nodes W, V, E, J and directed edges W->V, W->J, V->J, W->E, V->E, E->J."
    fa = rec("directed_path", "FA", desc, "Find all directed paths from node V to node J.", "V->J, V->E->J")
    assert judge(fa, "V->J, V->E->J") and judge(fa, "V->E->J, V->J") and judge(fa, "V->J") is False
    hm = rec("directed_path", "HM", desc, "How many directed paths are there from W to J?")
    assert judge(hm, "4")  # W->J, W->V->J, W->E->J, W->V->E->J
    ex = rec("directed_path", "EX", desc, "Is there a directed path from V to W?")
    assert judge(ex, "No.") and judge(ex, "no, W is a parent") and judge(ex, "Yes.") is False
    yn = rec("directed_path", "YN", desc, "Is V<-W->J<-E a directed path from V to E?")
    assert judge(yn, "No.")


def test_frontdoor_without_a_directed_path_is_open():
    desc = "Given a DAG (directed acyclic graph) with nodes X, M, Y, U and directed edges X->M, U->X, U->Y."
    fo = rec(
        "frontdoor_adjustment_set",
        "FO",
        desc,
        "Find one valid frontdoor adjustment set for treatment X and outcome Y.",
    )
    assert judge(fo, "set()") is None and judge(fo, "{'M'}") is None and to_problem(fo) is None
    with_path = fo | {"description": desc.replace("U->Y.", "U->Y, M->Y.")}
    assert judge(with_path, "{'M'}") and judge(with_path, "set()") is False


# ---------------------------------------------------------------------------------------------
# reading
def test_read_question_returns_none_for_what_it_cannot_read():
    fo = rec(
        "backdoor_adjustment_set",
        "FO",
        DAG_MHVF,
        "Find one valid backdoor adjustment set for treatment V and outcome F.",
    )
    assert read_question(fo) is not None
    for bad in (
        {**fo, "task_type": "identification"},
        {**fo, "question_type": "ZZ"},
        {**fo, "question_type": "YN"},  # the template is FO's
        {
            **fo,
            "question": "Find one valid backdoor adjustment set for treatment V and outcome Q.",
        },  # Q unknown
        {**fo, "question": "Find one valid backdoor adjustment set for treatment V and outcome V."},
        {**fo, "question": "Find a good set."},
        {**fo, "description": "Given a DAG."},
        {**fo, "description": "Given a DAG with nodes A, B and directed edges A->Q."},
        {**fo, "question": "x" * 20_000},
        {**fo, "description": None},
    ):
        assert read_question(bad) is None and judge(bad, "{'M', 'H'}") is None
    for junk in (None, [], "record", {}, {"task_type": 3}):
        assert read_question(junk) is None and judge(junk, "Yes.") is None  # type: ignore[arg-type]
    mc = rec(
        "d-separation", "MC", DAG_MHVF, "Which of the following nodesets can d-separate node H and node F?"
    )
    assert read_question(mc) is None  # no options
    blocked = rec("blocked_path", "YN", DAG_MHVF, "Can path M->H->F be blocked by nodeset {'H'}?")
    assert read_question(blocked) is None  # M -> H is not an edge


def test_task_type_spellings():
    fo = rec("d_separation", "fo", DAG_MHVF, "Find one valid nodeset that can d-separate node H and node M .")
    assert read_question(fo).task_type == "d-separation" and judge(fo, "set()")
    assert normalize_task_type("C-Component") == "c_component"
    # the template file covers the nine path / set types; tests/test_clear_types.py the other eleven
    assert set(TASK_TYPES) - set(STRUCTURE_TASKS) == {r["task_type"] for r in RECORDS}
    assert len(TASK_TYPES) == 20


def test_parse_description_variants():
    g = parse_description(
        "Given an ADMG (acyclic directed mixed graph) with nodes I, Y, H, U, directed edges I->H, I->Y "
        "and bi-directed edges H<->U, I<->Y."
    )
    assert (
        g.kind == "ADMG"
        and g.directed == {("I", "H"), ("I", "Y")}
        and g.bidirected == {("H", "U"), ("I", "Y")}
    )
    assert g.nodes == ("I", "Y", "H", "U")
    g = parse_description(
        "Given a DAG (directed acyclic graph) with nodes X1, X2 and X3 and directed edges X1->X3."
    )
    assert g.nodes == ("X1", "X2", "X3") and g.directed == {("X1", "X3")}
    assert parse_description("Given a DAG with nodes A, B and no edges.").kind == "DAG"
    assert parse_description("Given an ADMG with nodes A and B and no edges.", "ADMG").kind == "ADMG"
    assert (
        parse_description("Given a directed graph with nodes W, K and directed edges K->W, W->K.").kind
        == "DG"
    )
    assert parse_description("Given a DAG with nodes A, B, C and directed edges A->B->C.").directed == {
        ("A", "B"),
        ("B", "C"),
    }
    for bad in ("", "Given a DAG.", "Given a DAG with nodes A, B and directed edges A->Q.", "nodes A; B", None,
                "Given an ADMG with nodes A, B, directed edges A->B, B->A and bi-directed edges A<->B.",
                "Given a DAG with nodes A, B and directed edges A->A."):  # fmt: skip
        with pytest.raises(GraphParseError):
            parse_description(bad)  # type: ignore[arg-type]


def test_listed_answers():
    assert listed_answers({"question_type": "FO", "answer": "[{'M', 'H'}, set(), {'M'}]"}) == [
        "{'M', 'H'}",
        "set()",
        "{'M'}",
    ]
    assert listed_answers({"question_type": "FO", "answer": "{'M'}"}) == ["{'M'}"]
    assert listed_answers({"question_type": "FO", "answer": "['L<-W->A', 'L<-V->A']"}) == [
        "L<-W->A",
        "L<-V->A",
    ]
    assert listed_answers({"question_type": "FO", "answer": ["L<-W->A"]}) == ["L<-W->A"]
    assert listed_answers({"question_type": "FA", "answer": "[{'A'}, {'B'}]"}) == ["[{'A'}, {'B'}]"]
    assert listed_answers({"question_type": "FA", "answer": ["A->B"]}) == ['["A->B"]']
    assert listed_answers({"question_type": "HM", "answer": 3}) == ["3"]
    for bad in ({"answer": None}, {"answer": {"x": 1}}, {"answer": [1, 2]}, "x", {"answer": True}):
        assert listed_answers(bad) is None  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# CLEAR -> problems
CONVERTED = [(r, to_problem(r)) for r in JUDGED if to_problem(r) is not None]


def test_to_problem_converts_adjustment_separation_reachability_and_cycle_records():
    kinds = {p["query"]["kind"] for _, p in CONVERTED}
    assert {
        "backdoor_set",
        "frontdoor_set",
        "dsep_set",
        "msep_set",
        "ci_test",
        "directed_path",
        "cycle",
    } <= kinds
    assert any(p["query"].get("variant") == "minimal" for _, p in CONVERTED)
    for r, p in CONVERTED:
        assert p["mode"] == "supplied" and "Query:" in p["text"]
        assert p["clear"] == {
            "uid": r["uid"],
            "sid": r["sid"],
            "task_type": r["task_type"],
            "question_type": r["question_type"],
        }
        messages = chat_prompt(p)
        assert messages[1]["content"] == p["text"]
    for r in JUDGED:
        if (
            r["task_type"] in ("backdoor_adjustment_set", "frontdoor_adjustment_set")
            and r["question_type"] == "YN"
        ):
            assert to_problem(r) is None  # no query kind asks whether a given set is valid
        converted = {
            "backdoor_adjustment_set": {"FO"}, "frontdoor_adjustment_set": {"FO"}, "d-separation": {"FO", "YN"},
            "directed_path": {"EX"}, "cycle": {"FO"},
        }  # fmt: skip
        if r["question_type"] not in converted.get(r["task_type"], ()):
            assert to_problem(r) is None, (r["task_type"], r["question_type"])


@pytest.mark.parametrize(
    "pair", CONVERTED, ids=lambda rp: f"{rp[1]['query']['kind']}-{rp[0]['uid']}-{rp[0]['sid']}"
)
def test_problem_predicate_agrees_with_the_judge(pair):
    record, problem = pair
    q = read_question(record)
    if problem["query"]["kind"] in ("ci_test", "directed_path"):
        for said in ("Yes.", "No."):
            assert grade_answer(problem, said.rstrip(".").lower()) == judge(record, said)
        return
    if problem["query"]["kind"] == "cycle":  # every closed node sequence, in CLEAR's notation
        nodes = problem["graph"]["nodes"]
        for n in range(2, min(len(nodes), 5) + 1):
            for seq in itertools.permutations(nodes, n):
                claimed = "->".join((*seq, seq[0]))
                assert grade_answer(problem, claimed) == judge(record, claimed), claimed
        return
    pool = sorted(set(q.graph.nodes) - {q.x, q.y})
    for k in range(len(pool) + 1):
        for s in itertools.combinations(pool, k):
            assert grade_answer(problem, _fmt(s)) == judge(record, _fmt(s)), s


def test_converted_problems_take_certified_gold_traces():
    """On every converted record the gold trace is 6/6 and, for find-one records, the judge accepts its answer."""
    from faithgrpo.rewards.calver.problem import prepare_problem
    from faithgrpo.rewards.calver.reward import score_trace
    from faithgrpo.tasks.certificates.gold import gold_trace
    from faithgrpo.text import extract_answer

    for record, problem in CONVERTED:
        trace = gold_trace(problem, rng=0)
        assert score_trace(trace, prepare_problem(problem)).total == 6, (record["uid"], record["sid"])
        answer = extract_answer(trace)
        if record["question_type"] == "FO":
            assert judge(record, answer) is True
        else:  # yes/no and existence: the gold answer is the judge's
            assert judge(record, "Yes." if answer.strip().lower() == "yes" else "No.") is True, answer


def test_cheap_traces_on_converted_reachability_and_cycle_problems_stay_below_full_credit():
    """The cheapest texts that answer right without the work: the bare answer, the gold trace with
    its DERIVATION emptied, and the gold trace whose GRAPH slot drops an edge."""
    from faithgrpo.rewards.calver.problem import prepare_problem
    from faithgrpo.rewards.calver.reward import score_trace
    from faithgrpo.tasks.certificates.gold import gold_trace
    from faithgrpo.text import extract_answer

    tried = 0
    for _, problem in CONVERTED:
        if problem["query"]["kind"] not in ("directed_path", "cycle"):
            continue
        prepared = prepare_problem(problem)
        trace = gold_trace(problem, rng=0)
        answer = extract_answer(trace)
        derivation = re.search(r"DERIVATION:.*?(?=\n[A-Z]+:|</think>)", trace, re.S)
        assert derivation is not None, trace
        cheap = [
            f"<answer>{answer}</answer>",
            f"<think>RESULT: {answer}</think><answer>{answer}</answer>",
            trace.replace(derivation.group(0), "DERIVATION: trivially, by inspection."),
        ]
        edges = problem["graph"]["directed"]
        a, b = edges[0]
        cheap.append(re.sub(rf"\b{a}\s*->\s*{b}\b,?\s*", "", trace, count=1))
        for text in cheap:
            assert score_trace(text, prepared).total < 6, text
            tried += 1
    assert tried >= 40


def test_to_problem_skips_what_queries_do_not_accept():
    admg = (
        "Given an ADMG (acyclic directed mixed graph) with nodes X, Y, A, directed edges A->X, X->Y "
        "and bi-directed edges A<->Y."
    )
    fo = rec(
        "d-separation", "YN", admg, "Are node X and node Y d-separated by nodeset {'X'}?", graph_type="ADMG"
    )
    assert to_problem(fo) is None  # ci_test rejects given overlapping x
    bd = rec(
        "backdoor_adjustment_set",
        "FO",
        admg,
        "Find one valid backdoor adjustment set for treatment X and outcome Y.",
        graph_type="ADMG",
    )
    p = to_problem(bd)
    assert (
        p["query"] == {"kind": "backdoor_set", "treatment": "X", "outcome": "Y"}
        and p["graph"]["type"] == "ADMG"
    )
    two_cycle = to_problem(rec("cycle", "FO", "Given a directed graph with nodes A, B and directed edges A->B, B->A.",
                               "Find one cycle in this graph.", graph_type="DG"))  # fmt: skip
    assert two_cycle["query"] == {"kind": "cycle"} and two_cycle["graph"]["type"] == "DG"
    dag = "Given a DAG (directed acyclic graph) with nodes A, B and directed edges A->B."
    assert (
        to_problem(rec("cycle", "FO", dag, "Find one cycle in this graph.")) is None
    )  # cycle queries need a DG
    path = to_problem(rec("directed_path", "EX", dag, "Is there a directed path from B to A?"))
    assert path["query"] == {"kind": "directed_path", "treatment": "B", "outcome": "A"}
    assert grade_answer(path, "no") is True and grade_answer(path, "yes") is False


# ---------------------------------------------------------------------------------------------
# robustness
ONE_PER_TYPE = list({(r["task_type"], r["question_type"]): r for r in JUDGED}.values())
HOSTILE = [
    "{" + ", ".join(f"'N{i}'" for i in range(20_000)) + "}",
    "{" + ", ".join(f"'N{i}'" for i in range(2_000)) + "}",
    "[" * 50_000,
    "[" * 8_000 + "]" * 8_000,
    "{" * 8_000,
    "A->" * 30_000 + "B",
    "A->" * 5_000 + "A",
    "A<-B" * 3_000,
    "A" * 16_000,
    "1" * 16_000,
    "Yes No " * 2_000,
    "\x00\u202e🙂\u2028",
    "__import__('os').system('ls')",
    "[{'A'}, " * 2_000 + "]",
    ["A->B"] * 5_000,
    [["A"]],
    None,
    12,
    3.5,
    {"a": 1},
]


def test_hostile_candidates_are_rejected_quickly_and_never_raise():
    candidates = [*HOSTILE, *hostile_inputs().values()]
    with cpu_clock() as clock:
        for r in ONE_PER_TYPE:
            for cand in candidates:
                assert judge(r, cand) in (False, None), (r["task_type"], r["question_type"], str(cand)[:40])
    assert clock.elapsed < 20.0


def test_hostile_records_never_raise():
    base = ONE_PER_TYPE[0]
    for field in ("description", "question", "task_type", "question_type", "graph_type"):
        for value in (
            None,
            3,
            ["x"],
            "(" * 10_000,
            "Given a DAG with nodes " + "A, " * 5_000,
            "\ud800",
            "?" * 16_000,
        ):
            assert judge({**base, field: value}, base["answer"]) in (True, False, None)
            assert to_problem({**base, field: value}) is None or isinstance(
                to_problem({**base, field: value}), dict
            )


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(ONE_PER_TYPE),
    st.one_of(st.text(max_size=300), st.lists(st.text(max_size=20), max_size=5)),
)
def test_judge_never_raises(record, text):
    assert judge(record, text) in (True, False, None)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(ONE_PER_TYPE), st.text(max_size=200))
def test_judge_never_raises_on_mangled_questions(record, text):
    assert judge({**record, "question": record["question"][:40] + text}, "Yes.") in (True, False, None)


def test_path_candidates_spellings():
    desc = "Given a DAG (directed acyclic graph) with nodes U, X, Y and directed edges U->X, U->Y, X->Y."
    fo = rec("backdoor_path", "FO", desc, "Find the shortest backdoor path from node X to node Y.")
    for text in ("X<-U->Y", "X <- U -> Y", "Y<-U->X", "'X<-U->Y'", "X ← U → Y", "['X<-U->Y']", ["X<-U->Y"]):
        assert judge(fo, text) is True, text
    for text in ("X->Y", "X<-U->Y, X->Y", "X<-U", "U", "", "X<-Q->Y"):
        assert judge(fo, text) is False, text
    assert str(parse_path("X<-U->Y")) == "X <- U -> Y"


# ---------------------------------------------------------------------------------------------
# files and the CLI
def test_load_records_reads_files_and_directories(tmp_path):
    d = tmp_path / "json_single"
    d.mkdir()
    by_task = defaultdict(list)
    for r in RECORDS[:60]:
        by_task[r["task_type"]].append(r)
    for task, rs in by_task.items():
        (d / f"{task}.json").write_text("".join(json.dumps(r) + "\n" for r in rs))
    (d / "README.md").write_text("not records")
    loaded = load_records(d)
    assert len(loaded) == 60 and {r["task_type"] for r in loaded} == set(by_task)
    assert load_records(d / f"{RECORDS[0]['task_type']}.json") == by_task[RECORDS[0]["task_type"]]
    array = tmp_path / "array.json"
    array.write_text(json.dumps(RECORDS[:3]))
    assert load_records(array) == RECORDS[:3]
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps(RECORDS[0]) + "\n\nnot json\n")
    with pytest.raises(ValueError, match=r"broken\.jsonl:3"):
        load_records(broken)
    with pytest.raises(FileNotFoundError):
        load_records(tmp_path / "missing")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match=r"no \.json"):
        load_records(empty)
    summary = evaluate_file(d)
    assert summary["files"] == len(by_task) and summary["overall"]["total"] == 60


def test_evaluate_file_counts_bad_lines_and_rejections(tmp_path):
    good = JUDGED[0]
    wrong = {**good, "answer": good["reject"][0]}
    path = tmp_path / "mixed.jsonl"
    path.write_text(json.dumps(good) + "\n\nnot json\n[1]\n" + json.dumps(wrong) + "\n")
    mixed = evaluate_file(path)
    assert mixed["overall"] == {"total": 2, "judged": 2, "accepted": 1, "rejected": 1, "unsupported": 0}
    assert mixed["bad_lines"] == 2
    table = format_summary(mixed)
    assert good["task_type"] in table and "2 line(s)" in table
    assert table.splitlines()[-2].split()[:6] == ["all", "2", "2", "1", "1", "0"]


def test_cli_clear_eval(tmp_path, capsys):
    assert cli_main(["clear-eval", str(DATA)]) == 0
    out = capsys.readouterr().out
    assert "backdoor_adjustment_set" in out and "unsupported" in out.splitlines()[0]
    assert out.splitlines()[-1].split()[1:] == [
        str(len(RECORDS)),
        str(len(JUDGED)),
        str(len(JUDGED)),
        "0",
        str(len(OPEN)),
    ]
    d = tmp_path / "json_single"
    d.mkdir()
    (d / "cycle.json").write_text("".join(json.dumps(r) + "\n" for r in RECORDS if r["task_type"] == "cycle"))
    assert cli_main(["clear-eval", str(d)]) == 0
    assert "cycle" in capsys.readouterr().out
    assert cli_main(["clear-eval", str(tmp_path / "none.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "No such file" in err and err.count("\n") == 1
