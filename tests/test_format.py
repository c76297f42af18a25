"""format_reward, trace_format_reward and the slot parser, against hand-built cases."""

from __future__ import annotations

import re

import pytest
from hostile_inputs import hostile_inputs
from hypothesis import given, settings
from hypothesis import strategies as st

from faithgrpo.rewards.format import FORMAT_REASONS, format_reward, trace_format_reward
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


def _reason(text):
    logged = {}
    reward = format_reward([text], log_metric=lambda k, v: logged.__setitem__(k, v))[0]
    reasons = [name for name in FORMAT_REASONS if logged[f"format/{name}"] == 1.0]
    return reward, (reasons[0] if reasons else None)


_OLD_ENVELOPE = re.compile(r"\A\s*<think>(.*?)</think>\s*<answer>(.*?)</answer>\s*\Z", re.DOTALL)


def ref_envelope(text):
    """The original regex definition (each tag counted, then one anchored match), as a reference."""
    if len(text) > 20_000:
        return 0.0, "too_long"
    tags = ("<think>", "</think>", "<answer>", "</answer>")
    if any(text.count(t) != 1 for t in tags):
        return 0.0, ("repeated_tag" if any(text.count(t) > 1 for t in tags[::2]) else "bad_envelope")
    match = _OLD_ENVELOPE.match(text)
    if match is None:
        return 0.0, "bad_envelope"
    if not match.group(1).strip():
        return 0.0, "empty_think"
    if not match.group(2).strip():
        return 0.0, "empty_answer"
    return 1.0, None


_FRAGMENTS = ["<think>", "</think>", "<answer>", "</answer>", "<think", "answer>", "r", "a", " ", "\n",
              "\t", "\u2028", "\u00a0", "x y", "<", "😀"]  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(_FRAGMENTS), max_size=12).map("".join))
def test_format_reward_matches_the_regex_definition(text):
    assert _reason(text) == ref_envelope(text)


@settings(max_examples=200, deadline=None)
@given(
    pre=st.sampled_from(["", " ", "\n\t", "\u2028"]),
    think=st.sampled_from(["r", " r ", "", "  ", "a\nb"]),
    mid=st.sampled_from(["", "\n", " x ", "\u00a0"]),
    answer=st.sampled_from(["a", "", " {U} ", "\n"]),
    post=st.sampled_from(["", "\n", " tail", "\u3000"]),
)
def test_format_reward_envelope_grid(pre, think, mid, answer, post):
    """Well-ordered envelopes: only whitespace may sit outside the tags, and both blocks are non-blank."""
    text = f"{pre}<think>{think}</think>{mid}<answer>{answer}</answer>{post}"
    expected = 1.0 if not (pre + mid + post).strip() and think.strip() and answer.strip() else 0.0
    assert format_reward([text]) == [expected]
    assert _reason(text) == ref_envelope(text)


@pytest.mark.parametrize("name", sorted(hostile_inputs()))
def test_format_rewards_return_on_hostile_megabyte(name):
    text = hostile_inputs()[name]
    assert format_reward([text]) == [0.0]  # over the length cap
    assert trace_format_reward([text]) == [0.0]
    # and just under the cap, where the parsers do run
    under = text[:19_000]
    assert format_reward([under])[0] in (0.0, 1.0)
    assert 0.0 <= trace_format_reward([under])[0] <= 1.0


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
    assert any("GRAPH appears" in p for p in trace.problems)  # a repeated label is a reported problem
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
