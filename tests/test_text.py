"""Completion text helpers: tag extraction, counting and spans, against hand cases and brute force."""

from __future__ import annotations

import doctest
import importlib
import re

import pytest
from hostile_inputs import hostile_inputs
from hypothesis import given, settings
from hypothesis import strategies as st

from faithgrpo.text import Tag, count_tags, extract_answer, extract_think, tag_spans

# ----------------------------------------------------------------------------- references
# Brute force over every offset with str.startswith: independent of find/rfind and of any regex.


def _offsets(text: str, tag: str) -> list[int]:
    return [i for i in range(len(text)) if text.startswith(tag, i)]


def ref_extract_answer(text: str) -> str | None:
    closes = _offsets(text, "</answer>")
    if not closes:
        return None
    close = closes[-1]
    opens = [i for i in _offsets(text, "<answer>") if i + len("<answer>") <= close]
    return text[opens[-1] + len("<answer>") : close].strip() if opens else None


def ref_extract_think(text: str) -> str | None:
    # The original definition (first lazy match), fine on small strings.
    match = re.search(r"<think>(.*?)</think>", text, re.DOTALL)
    return match.group(1) if match else None


def ref_tag_spans(text: str, names: tuple[str, ...]) -> list[Tag]:
    found = []
    for name in names:
        for closing, tag in ((False, f"<{name}>"), (True, f"</{name}>")):
            found += [Tag(i, i + len(tag), name, closing) for i in _offsets(text, tag)]
    return sorted(found)


FRAGMENTS = ["<answer>", "</answer>", "<think>", "</think>", "<answer", "answer>", "</", "<", ">", "/",
             "a", "{X}", " ", "\n", "\u2028", "😀"]  # fmt: skip
fragment_text = st.lists(st.sampled_from(FRAGMENTS), max_size=14).map("".join)

# ----------------------------------------------------------------------------- extract_answer


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<answer> {U} </answer>", "{U}"),
        ("<answer>a</answer> then <answer>b</answer>", "b"),
        ("<answer>a</answer><answer>unclosed", "a"),  # the last *complete* block
        ("<answer><answer>b</answer>", "b"),  # nearest opening tag before the last close
        ("<answer>a</answer>b</answer>", "a</answer>b"),  # last close, nearest open before it
        ("</answer><answer>x", None),
        ("<answer>never closed", None),
        ("only a close </answer>", None),
        ("<answer></answer>", ""),
        ("<Answer>x</Answer>", None),  # case-sensitive
        ("", None),
        (None, None),
        (42, None),
    ],
)
def test_extract_answer_hand_cases(text, expected):
    assert extract_answer(text) == expected


@settings(max_examples=400, deadline=None)
@given(fragment_text)
def test_extract_answer_matches_brute_force(text):
    assert extract_answer(text) == ref_extract_answer(text)


# ----------------------------------------------------------------------------- extract_think


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<think> r </think><answer>a</answer>", " r "),  # not stripped
        ("<think>a</think><think>b</think>", "a"),  # the first block
        ("<think><think>x</think>", "<think>x"),
        ("</think><think>x</think>", "x"),
        ("<think>unclosed", None),
        ("no tags", None),
        (None, None),
    ],
)
def test_extract_think_hand_cases(text, expected):
    assert extract_think(text) == expected


@settings(max_examples=400, deadline=None)
@given(fragment_text)
def test_extract_think_matches_reference(text):
    assert extract_think(text) == ref_extract_think(text)


# ----------------------------------------------------------------------------- count_tags / tag_spans


def test_count_tags_hand_cases():
    text = "<think>a</think><answer>b</answer><answer><think >"
    assert count_tags(text, "answer") == (2, 1)
    assert count_tags(text, "think") == (1, 1)
    assert count_tags("", "answer") == (0, 0)
    assert count_tags(None, "answer") == (0, 0)
    for bad in ("", "a>b", "<answer>", "x" * 40, None):
        with pytest.raises(ValueError, match="tag name"):
            count_tags("text", bad)


def test_tag_spans_hand_cases():
    text = "<think>r</think>\n<answer>a</answer>"
    assert tag_spans(text) == [
        Tag(0, 7, "think", False),
        Tag(8, 16, "think", True),
        Tag(17, 25, "answer", False),
        Tag(26, 35, "answer", True),
    ]
    assert [t.name for t in tag_spans(text, "answer")] == ["answer", "answer"]
    assert tag_spans(text, limit=1) == [Tag(0, 7, "think", False)]
    assert tag_spans(text, limit=0) == []
    assert tag_spans("<think >x</Think><answer/>") == []
    assert tag_spans(None) == []
    with pytest.raises(ValueError, match="limit"):
        tag_spans(text, limit=-1)
    with pytest.raises(ValueError, match="tag name"):
        tag_spans(text, ("think", "a|b"))


@settings(max_examples=400, deadline=None)
@given(fragment_text)
def test_count_and_spans_match_brute_force(text):
    for name in ("answer", "think"):
        assert count_tags(text, name) == (len(_offsets(text, f"<{name}>")), len(_offsets(text, f"</{name}>")))
    spans = tag_spans(text)
    assert spans == ref_tag_spans(text, ("think", "answer"))
    assert all(text[t.start : t.end] == f"<{'/' * t.closing}{t.name}>" for t in spans)
    assert tag_spans(text, limit=3) == spans[:3]


# ----------------------------------------------------------------------------- hostile input


@pytest.mark.parametrize("name", sorted(hostile_inputs()))
def test_helpers_return_on_hostile_megabyte(name):
    text = hostile_inputs()[name]
    assert extract_answer(text) is None or isinstance(extract_answer(text), str)
    assert extract_think(text) is None or isinstance(extract_think(text), str)
    opens, closes = count_tags(text, "answer")
    assert opens >= 0 and closes >= 0
    assert len(tag_spans(text, limit=5)) <= 5


def test_nested_answer_megabyte_reads_from_the_innermost_opening_tag():
    text = hostile_inputs()["answer_nested"]
    _, closes = count_tags(text, "answer")
    # The last </answer> and the nearest <answer> before it: the earlier closes are content.
    assert extract_answer(text) == "{U}" + "</answer>" * (closes - 1)


@pytest.mark.parametrize(
    "module", ["text", "rewards.steps", "rewards.format", "rewards.outcome", "rewards.cros.ranking"]
)
def test_docstring_examples(module):
    mod = importlib.import_module(f"faithgrpo.{module}")
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
