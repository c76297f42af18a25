"""format_reward, trace_format_reward and the slot parser, against hand-built cases."""

from __future__ import annotations

import pytest

from faithgrpo.rewards.format import format_reward, trace_format_reward
from faithgrpo.rewards.trace import parse_query_call, parse_trace

GOOD_TRACE = """<think>
GRAPH: U -> X; U -> Y; X -> M; M -> Y
QUERY: backdoor_set(treatment=X, outcome=Y)
STRATEGY: backdoor criterion
DERIVATION:
- backdoor path X <- U -> Y is open; conditioning on U blocks it
- M is a descendant of X, so it is excluded
RESULT: {U}
</think>
<answer>{U}</answer>"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<think>r</think><answer>a</answer>", 1.0),
        ("  \n<think>\nr\n</think>\n\n<answer> a </answer>\n", 1.0),
        ("<answer>a</answer>", 0.0),  # no think
        ("<think>r</think>", 0.0),  # no answer
        ("<think>r</think><answer>a</answer> trailing words", 0.0),  # text after the answer
        ("preamble <think>r</think><answer>a</answer>", 0.0),  # text before the think
        ("<answer>a</answer><think>r</think>", 0.0),  # wrong order
        ("<think>r</think><answer>a</answer><answer>b</answer>", 0.0),  # answer twice
        ("<think>r</think><think>s</think><answer>a</answer>", 0.0),  # think twice
        ("<think>  </think><answer>a</answer>", 0.0),  # empty reasoning
        ("<think>r</think><answer> </answer>", 0.0),  # empty answer
        ("", 0.0),
        ("<think>" + "x" * 100_000 + "</think><answer>a</answer>", 0.0),  # over the length cap
    ],
)
def test_format_reward_cases(text, expected):
    assert format_reward([text]) == [expected]


def test_format_reward_conversational_and_reasons_logged():
    logged = {}
    completions = [
        [{"role": "assistant", "content": "<think>r</think><answer>a</answer>"}],
        [{"role": "assistant", "content": "<answer>a</answer>"}],
        "<think>r</think><answer></answer>",
        None,  # not even text: scored, not raised
    ]
    rewards = format_reward(completions, log_metric=lambda k, v: logged.__setitem__(k, v))
    assert rewards == [1.0, 0.0, 0.0, 0.0]
    assert logged["format/bad_envelope"] == pytest.approx(2 / 4)
    assert logged["format/empty_answer"] == pytest.approx(1 / 4)
    assert logged["format/too_long"] == 0.0


def test_parse_trace_slots():
    trace = parse_trace(GOOD_TRACE)
    assert trace.graph == "U -> X; U -> Y; X -> M; M -> Y"
    assert trace.query == "backdoor_set(treatment=X, outcome=Y)"
    assert trace.strategy == "backdoor criterion"
    assert trace.derivation == (
        "backdoor path X <- U -> Y is open; conditioning on U blocks it",
        "M is a descendant of X, so it is excluded",
    )
    assert trace.result == "{U}"
    assert trace.answer == "{U}"
    assert trace.missing() == []


def test_parse_trace_markdown_labels_and_repeats():
    text = "<think>**GRAPH:** A -> B\n- query: dsep_set(x=A, y=B)\nGRAPH: B -> A\nRESULT:\n{}\n</think><answer>{}</answer>"
    trace = parse_trace(text)
    assert trace.graph == "A -> B"  # first occurrence wins
    assert trace.query == "dsep_set(x=A, y=B)"
    assert trace.result == "{}"
    assert any("GRAPH appears more than once" in p for p in trace.problems)
    assert trace.missing() == ["strategy", "derivation"]


@pytest.mark.parametrize(
    "text", ["", "   ", None, 12, "x" * 1_000_000, "<think>" * 50_000, "GRAPH:" * 10_000]
)
def test_parse_trace_never_raises(text):
    trace = parse_trace(text)
    assert isinstance(trace.missing(), list)


def test_parse_query_call():
    assert parse_query_call("backdoor_set(treatment=X, outcome=Y, variant=minimal)") == (
        "backdoor_set",
        {"treatment": "X", "outcome": "Y", "variant": "minimal"},
    )
    assert parse_query_call("ci_test(x=A, y=B, given={C, D})") == (
        "ci_test",
        {"x": "A", "y": "B", "given": "{C, D}"},
    )
    assert parse_query_call("cycle()") == ("cycle", {})
    for bad in ("backdoor set X Y", "f(x)", "f(=1)", "", "f(" + "a=1," * 100 + ")"):
        assert parse_query_call(bad) is None


def test_trace_format_reward_counts_parsing_slots():
    assert trace_format_reward([GOOD_TRACE]) == [1.0]
    broken_graph = GOOD_TRACE.replace("U -> X; U -> Y; X -> M; M -> Y", "the graph is complicated")
    assert trace_format_reward([broken_graph]) == [pytest.approx(5 / 6)]
    no_query_call = GOOD_TRACE.replace("backdoor_set(treatment=X, outcome=Y)", "which set?")
    assert trace_format_reward([no_query_call]) == [pytest.approx(5 / 6)]
    no_answer = GOOD_TRACE.replace("<answer>{U}</answer>", "")
    assert trace_format_reward([no_answer]) == [pytest.approx(5 / 6)]
    only_result = "<think>RESULT: {U}</think><answer>{U}</answer>"
    assert trace_format_reward([only_result]) == [pytest.approx(2 / 6)]
    logged = {}
    trace_format_reward([GOOD_TRACE, only_result], log_metric=lambda k, v: logged.__setitem__(k, v))
    assert logged["trace_format/bad_graph"] == 0.5
    assert logged["trace_format/bad_answer"] == 0.0


def test_trace_format_is_structure_only():
    """A cyclic 'DAG' and a wrong result still parse: semantics are CALVER's job, not this reward's."""
    wrong = GOOD_TRACE.replace("M -> Y", "M -> Y; Y -> U").replace("{U}", "{M}")
    assert trace_format_reward([wrong]) == [1.0]
