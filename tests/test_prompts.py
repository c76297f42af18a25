"""Tests for faithgrpo.tasks.causal.prompts: the trace contract text and the problem statement."""

from __future__ import annotations

import json
import re

import pytest

from faithgrpo.rewards.calver.reward import score_trace
from faithgrpo.rewards.trace import parse_trace
from faithgrpo.tasks.causal.prompts import (
    EXAMPLE_PROBLEMS,
    answer_format,
    answer_instructions,
    chat_prompt,
    cpt_text,
    graph_description,
    problem_text,
    question_text,
    trace_instructions,
    user_message,
)
from faithgrpo.verifier.graphs.edges import parse_graph
from faithgrpo.verifier.graphs.model import CausalGraph
from faithgrpo.verifier.queries import format_query, parse_query, query_matches
from faithgrpo.verifier.query_kinds import QUERY_KINDS


@pytest.mark.parametrize("kind", [None, *QUERY_KINDS])
def test_instructions_name_every_slot_and_embed_a_passing_example(kind):
    text = trace_instructions(kind)
    for label in ("GRAPH:", "QUERY:", "STRATEGY:", "DERIVATION:", "RESULT:", "<think>", "<answer>"):
        assert label in text
    assert len(text) < 2_000  # read by a 135M model: keep it short
    example = text[text.index("Example:\n") + len("Example:\n") :]
    problem = EXAMPLE_PROBLEMS[kind or "backdoor_set"]
    score = score_trace(example, problem)
    assert score.total == 6, score.reasons
    t = parse_trace(example)
    assert query_matches(problem["query"], t.query) and len(t.derivation) >= 2
    # the QUERY line shown as syntax is the example's own query
    assert f"e.g. {format_query(problem['query'])}" in text
    assert ("adjust for" in text) == (kind in (None, "ate"))


def test_instructions_reject_unknown_kinds():
    with pytest.raises(ValueError, match="unknown query kind 'teleport'"):
        trace_instructions("teleport")


def test_example_problems_cover_every_kind_and_are_valid():
    assert set(EXAMPLE_PROBLEMS) == set(QUERY_KINDS)
    for kind, p in EXAMPLE_PROBLEMS.items():
        g = CausalGraph.from_dict(p["graph"])
        QUERY_KINDS[kind].check_query(g, p["query"], p.get("cpts"))


def test_graph_description_round_trips():
    g = parse_graph("A -> B; B -> C; A <-> C; D")
    text = graph_description(g)
    assert text.splitlines()[0] == (
        "Causal graph: an ADMG (acyclic directed mixed graph; A <-> B means A and B share an unmeasured "
        "common cause) with nodes A, B, C, D."
    )
    edges = text.splitlines()[1]
    assert edges == "Edges: A -> B; B -> C; A <-> C; D"
    assert parse_graph(edges[len("Edges: ") :], "ADMG") == g


def test_cpt_text_hand_written():
    cpts = {
        "U": {"parents": [], "p1": {"": 0.4}},
        "X": {"parents": ["U"], "p1": {"0": 0.3, "1": 0.8}},
        "Y": {"parents": ["X", "U"], "p1": {"0,0": 0.2, "0,1": 0.5, "1,0": 0.6, "1,1": 0.7}},
    }
    assert cpt_text(cpts) == (
        "P(U=1) = 0.40\n"
        "P(X=1 | U=0) = 0.30; P(X=1 | U=1) = 0.80\n"
        "P(Y=1 | X=0, U=0) = 0.20; P(Y=1 | X=0, U=1) = 0.50; P(Y=1 | X=1, U=0) = 0.60; "
        "P(Y=1 | X=1, U=1) = 0.70"
    )
    assert cpt_text({"R": {"parents": [], "p1": 0.25}}) == "P(R=1) = 0.25"


@pytest.mark.parametrize("kind", list(QUERY_KINDS))
def test_questions_are_arrow_free_and_the_query_line_parses(kind):
    p = EXAMPLE_PROBLEMS[kind]
    q = question_text(p["query"])
    assert not re.search(r"->|<-|→|←|↔", q)
    assert not re.search(r"->|<-|→|←|↔", answer_format(kind))
    text = problem_text(CausalGraph.from_dict(p["graph"]), p["query"], cpts=p.get("cpts"), story="A story.")
    assert not re.search(r"->|<-|→|←|↔", text)  # story mode shows no arrow anywhere
    query_line = next(line for line in text.splitlines() if line.startswith("Query: "))
    assert parse_query(query_line[len("Query: ") :])["kind"] == kind
    assert query_matches(p["query"], query_line[len("Query: ") :])
    assert ("Conditional probabilities:" in text) == (kind == "ate")


def test_question_wording_follows_the_query():
    assert question_text(
        {"kind": "backdoor_set", "treatment": "X", "outcome": "Y", "variant": "minimal"}
    ) == (
        "Find a minimal set of variables that satisfies the backdoor criterion for the effect of X on Y "
        "(no proper subset may work)."
    )
    assert "given {C, D}" in question_text({"kind": "ci_test", "x": "A", "y": "B", "given": ["D", "C"]})
    assert "marginally" in question_text({"kind": "ci_test", "x": "A", "y": "B", "given": []})
    assert "greater than 0.15?" in question_text(
        {"kind": "ate", "treatment": "X", "outcome": "Y", "threshold": 0.15}
    )
    with pytest.raises(ValueError, match="unknown query kind"):
        question_text({"kind": "nope"})


def test_answer_format_examples_parse_for_their_kind():
    samples = {"set": "{A, B}", "yes_no": "yes", "node": "M", "cycle": "[A, B, C]", "ate": "yes, ψ = 0.2"}
    for kind, qk in QUERY_KINDS.items():
        fmt = answer_format(kind)
        assert qk.parse_answer(samples[qk.answer_type]) is not None
        if qk.answer_type in ("set", "cycle"):
            assert samples[qk.answer_type] in fmt


def test_user_message_uses_stored_text_or_renders_the_graph():
    p = dict(EXAMPLE_PROBLEMS["mediator"])
    rendered = user_message(p)
    assert rendered.startswith("Causal graph: a DAG")
    assert "Query: mediator(treatment=X, outcome=Y)" in rendered
    assert user_message(json.dumps(p)) == rendered
    assert user_message({**p, "text": "Story: told differently."}) == "Story: told differently."
    with pytest.raises(ValueError):
        user_message({"graph": p["graph"], "query": {"kind": "mediator", "treatment": "X", "outcome": "Q"}})


def test_chat_prompt_messages():
    p = EXAMPLE_PROBLEMS["cycle"]
    msgs = chat_prompt(p)
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert msgs[0]["content"] == trace_instructions("cycle")
    assert msgs[1]["content"] == user_message(p)
    assert chat_prompt(json.dumps(p), system_prompt="be brief")[0]["content"] == "be brief"
    assert "<answer>" in answer_instructions() and "<think>" in answer_instructions()
