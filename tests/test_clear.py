"""Tests for faithgrpo.tasks.clear against hand-written CLEAR records (tests/data/clear_records.jsonl).

Each record's ``answer`` and ``wrong`` candidates were worked out by hand from the textbook
definitions (backdoor/front-door criteria, d-separation, Markov blanket, districts); the comments
in the data generator are reproduced in the records' questions. ``wrong`` is an extra test-only field.
"""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from faithgrpo.tasks import criteria as C
from faithgrpo.tasks.clear import (
    TASK_TYPES,
    evaluate_file,
    format_summary,
    judge,
    normalize_task_type,
    parse_description,
)
from faithgrpo.tasks.graph import CausalGraph, GraphParseError

DATA = Path(__file__).parent / "data" / "clear_records.jsonl"
RECORDS = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
SUPPORTED = [r for r in RECORDS if normalize_task_type(r["task_type"]) in TASK_TYPES]


def _id(r):
    return f"{r['task_type']}-{r['question_type']}-{r['question'][:40]}"


@pytest.mark.parametrize("record", SUPPORTED, ids=_id)
def test_listed_answer_accepted_and_wrong_answers_rejected(record):
    assert judge(record, record["answer"]) is True
    for wrong in record["wrong"]:
        assert judge(record, wrong) is False, wrong


def test_data_covers_every_task_and_question_type():
    pairs = {(normalize_task_type(r["task_type"]), r["question_type"]) for r in SUPPORTED}
    assert {t for t, _ in pairs} == set(TASK_TYPES)
    assert {q for _, q in pairs} == {"FO", "FA", "HM", "YN", "EX", "MC"}


def test_unsupported_records_return_none():
    base = SUPPORTED[0]
    assert judge({**base, "task_type": "identification"}, "Yes.") is None
    assert judge({**base, "question_type": "ZZ"}, "{'U'}") is None
    assert judge({**base, "question": "Find one backdoor adjustment set."}, "{'U'}") is None  # no pair
    assert judge({**base, "description": "Given a DAG."}, "{'U'}") is None
    assert (
        judge({**base, "description": "Given a DAG with nodes A, B and directed edges A->B, B->A."}, "x")
        is None
    )
    mc = next(r for r in SUPPORTED if r["question_type"] == "MC")
    assert judge({**mc, "question": mc["question"].split("\n")[0]}, "A") is None  # options missing
    for bad in (None, [], "record", {}, {"task_type": 3}):
        assert judge(bad, "Yes.") is None  # type: ignore[arg-type]


def test_task_and_question_type_spellings():
    fo = next(
        r for r in SUPPORTED if r["task_type"] == "backdoor_adjustment_set" and r["question_type"] == "FO"
    )
    assert judge({**fo, "task_type": "Backdoor Adjustment Set", "question_type": "fo"}, "{'U'}") is True
    assert normalize_task_type("d-separation") == "d_separation"
    assert normalize_task_type("C-Component") == "c_component"


def test_candidate_spellings():
    fo = next(
        r for r in SUPPORTED if r["task_type"] == "backdoor_adjustment_set" and r["question_type"] == "FO"
    )
    for text in ("{'U'}", '{"U"}', "{U}", "U", " {'U'}. "):
        assert judge(fo, text) is True, text
    mc = next(r for r in SUPPORTED if r["question_type"] == "MC" and r["answer"] == "B")
    for text in ("B", "B.", "(B)", "Option B", "Answer: B", "B. {'U'}", "b"):
        assert judge(mc, text) is True, text
    for text in ("", "Both", "Z", "42"):
        assert judge(mc, text) is False, text
    bp = next(r for r in SUPPORTED if r["task_type"] == "backdoor_path" and r["question_type"] == "FO")
    for text in ("X<-U->Y", "X <- U -> Y", "Y<-U->X", "'X<-U->Y'", "X ← U → Y"):
        assert judge(bp, text) is True, text
    yn = next(r for r in SUPPORTED if r["question_type"] == "YN" and r["answer"] == "No.")
    for text in ("No.", "no", "NO, because ...", "False"):
        assert judge(yn, text) is True, text
    hm = next(r for r in SUPPORTED if r["question_type"] == "HM" and r["answer"] == "2")
    for text in ("2", "There are 2.", "two"):
        assert judge(hm, text) is True, text


def test_adversarial_candidates_are_rejected_quickly():
    one_per_type = {(r["task_type"], r["question_type"]): r for r in SUPPORTED}.values()
    candidates = (
        "{" + ", ".join(f"'N{i}'" for i in range(100_000)) + "}",
        "[" * 50_000,
        "A->" * 30_000 + "B",
        "\x00\u202e🙂",
        "__import__('os').system('ls')",
    )
    t0 = time.perf_counter()
    for r in one_per_type:
        for cand in candidates:
            assert judge(r, cand) in (False, None)
        assert judge(r, None) in (False, None)  # type: ignore[arg-type]
    assert time.perf_counter() - t0 < 10.0


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(SUPPORTED), st.text(max_size=200))
def test_judge_never_raises(record, text):
    assert judge(record, text) in (True, False, None)


# ---------------------------------------------------------------------------------------------
# descriptions
def test_parse_description_variants():
    g = parse_description(
        "Given an ADMG (acyclic directed mixed graph) with nodes A, B, C, directed edges A->B, B->C and "
        "bi-directed edges A<->C."
    )
    assert g.kind == "ADMG" and g.directed == {("A", "B"), ("B", "C")} and g.bidirected == {("A", "C")}
    g = parse_description(
        "Given a DAG (directed acyclic graph) with nodes X1, X2 and X3 and directed edges X1->X3."
    )
    assert g.nodes == ("X1", "X2", "X3") and g.directed == {("X1", "X3")}
    g = parse_description("Given a DAG with nodes A, B and no edges.")
    assert g.kind == "DAG" and g.directed == frozenset()
    assert parse_description("Given an ADMG with nodes A and B and no edges.", "ADMG").kind == "ADMG"
    g = parse_description("Given a directed graph with nodes A, B and directed edges A->B, B->A.")
    assert g.kind == "DG"
    for bad in (
        "",
        "Given a DAG.",
        "Given a DAG with nodes A, B and directed edges A->Q.",
        "nodes A; B",
        None,
    ):
        with pytest.raises(GraphParseError):
            parse_description(bad)  # type: ignore[arg-type]


def describe(g: CausalGraph) -> str:
    """A CLEAR-style description written independently of the library's renderers."""
    nodes = ", ".join(g.nodes)
    directed = ", ".join(f"{a}->{b}" for a, b in sorted(g.directed))
    if g.kind == "ADMG":
        bi = ", ".join(f"{a}<->{b}" for a, b in sorted(g.bidirected))
        return (
            f"Given an ADMG (acyclic directed mixed graph) with nodes {nodes}, directed edges {directed} "
            f"and bi-directed edges {bi}."
        )
    return f"Given a DAG (directed acyclic graph) with nodes {nodes} and directed edges {directed}."


@st.composite
def graphs(draw):
    kind = draw(st.sampled_from(["DAG", "ADMG"]))
    n = draw(st.integers(3, 6))
    names = [f"V{i}" for i in range(n)]
    directed = {(names[i], names[j]) for i, j in itertools.combinations(range(n), 2) if draw(st.booleans())}
    bidirected = set()
    if kind == "ADMG":
        bidirected = {
            (names[i], names[j]) for i, j in itertools.combinations(range(n), 2) if draw(st.booleans())
        }
        if not bidirected:
            bidirected = {(names[0], names[-1])}
    if not directed:
        directed = {(names[0], names[1])}
    return CausalGraph(kind, tuple(names), frozenset(directed), frozenset(bidirected)).validate()


@settings(max_examples=60, deadline=None)
@given(graphs(), st.data())
def test_description_round_trip_and_backdoor_judging(g, data):
    assert parse_description(describe(g)) == g
    x, y = data.draw(st.permutations(g.nodes))[:2]
    record = {
        "description": describe(g),
        "graph_type": g.kind,
        "task_type": "backdoor_adjustment_set",
        "question_type": "FO",
        "question": f"Find one backdoor adjustment set for the ordered pair ({x}, {y}).",
        "answer": "",
    }
    for z in map(
        frozenset, itertools.chain.from_iterable(itertools.combinations(g.nodes, k) for k in range(3))
    ):
        literal = "{" + ", ".join(f"'{v}'" for v in sorted(z)) + "}" if z else "set()"
        assert judge(record, literal) == C.is_backdoor_set(g, x, y, z)
    hm = {
        **record,
        "question_type": "HM",
        "question": f"How many backdoor adjustment sets exist for ({x}, {y})?",
    }
    pool = C.backdoor_candidates(g, x, y)
    count = sum(
        C.is_backdoor_set(g, x, y, z)
        for k in range(len(pool) + 1)
        for z in map(frozenset, itertools.combinations(sorted(pool), k))
    )
    assert judge(hm, str(count)) is True and judge(hm, str(count + 1)) is False


# ---------------------------------------------------------------------------------------------
# file evaluation
def test_evaluate_file_counts(tmp_path):
    summary = evaluate_file(DATA)
    assert summary["overall"] == {
        "total": len(RECORDS),
        "accepted": len(SUPPORTED),
        "rejected": 0,
        "unsupported": len(RECORDS) - len(SUPPORTED),
    }
    assert summary["by_type"]["identification"]["YN"]["unsupported"] == 1
    assert summary["by_type"]["backdoor_adjustment_set"]["MC"] == {
        "total": 2,
        "accepted": 2,
        "rejected": 0,
        "unsupported": 0,
    }
    wrong = {**SUPPORTED[0], "answer": "set()"}
    path = tmp_path / "mixed.jsonl"
    path.write_text(json.dumps(SUPPORTED[0]) + "\n\nnot json\n[1]\n" + json.dumps(wrong) + "\n")
    mixed = evaluate_file(path)
    assert mixed["overall"] == {"total": 2, "accepted": 1, "rejected": 1, "unsupported": 0}
    assert mixed["bad_lines"] == 2
    table = format_summary(mixed)
    assert "backdoor_adjustment_set" in table and "2 line(s)" in table
    assert table.splitlines()[-2].split()[:5] == ["all", "2", "1", "1", "0"]
    with pytest.raises(OSError):
        evaluate_file(tmp_path / "missing.jsonl")
