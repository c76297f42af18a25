"""parse_trace's fast paths (the usual tag layout, labels found by one split) against the general ones."""

from __future__ import annotations

import random

from faithgrpo.rewards import trace as T

_PIECES = ["<think>", "</think>", "<answer>", "</answer>", "x", "\n", "<", ">", "/", "think", "answer", " "]


def test_usual_tags_agree_with_the_general_check():
    rng = random.Random(0)
    usual = 0
    for _ in range(20_000):
        text = "".join(rng.choice(_PIECES) for _ in range(rng.randrange(12)))
        if rng.random() < 0.3:
            text = f"{rng.choice(_PIECES)}<think>{text}</think>{rng.choice(_PIECES)}<answer>x</answer>"
        fast = T._usual_tags(text)
        if fast is not None:
            usual += 1
            assert fast == T._tag_problems(text), text
    assert usual > 500  # the usual layout was drawn often enough to mean something


def test_slots_without_think_end_at_the_answer():
    t = T.parse_trace("GRAPH: A -> B\nRESULT: {A}\n<answer>{A}</answer> trailing")
    assert (t.graph, t.result, t.answer) == ("A -> B", "{A}", "{A}")
    assert t.problems == ("<think> and </think> must appear exactly once each (found 0 and 0)",)


def test_repeated_label_keeps_its_first_slot():
    t = T.parse_trace("<think>RESULT: {A}\nmore\nRESULT: {B}</think><answer>{A}</answer>")
    assert t.result == "{A}\nmore"
    assert t.problems == ("RESULT appears 2 times; each label must appear exactly once",)
