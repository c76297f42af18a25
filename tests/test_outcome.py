"""outcome_reward: causal rows graded by the graph predicate, reasoning-gym rows by score_answer."""

from __future__ import annotations

import json

import pytest
import reasoning_gym
from hostile_inputs import hostile_inputs

from faithgrpo.rewards.outcome import make_outcome_reward, outcome_reward

# U confounds X and Y; Z1 -> U gives a second valid adjustment set, and M mediates X -> Y.
PROBLEM = json.dumps(
    {
        "graph": {
            "type": "DAG",
            "nodes": ["Z1", "U", "X", "M", "Y"],
            "directed": [["Z1", "U"], ["U", "X"], ["U", "Y"], ["X", "M"], ["M", "Y"]],
            "bidirected": [],
        },
        "query": {"kind": "backdoor_set", "treatment": "X", "outcome": "Y"},
    }
)


def _answer(text: str) -> str:
    return f"<think>reasoning</think><answer>{text}</answer>"


def test_causal_rows_accept_any_valid_member_not_only_the_listed_one():
    completions = [_answer("{U}"), _answer("{Z1, U}"), _answer("{'U'}"), _answer("{M}"), _answer("{}")]
    # {M}: M is a descendant of X. {}: leaves X <- U -> Y open.
    logged = {}
    rewards = outcome_reward(
        completions,
        problem=[PROBLEM] * 5,
        answer=["{U}"] * 5,
        log_metric=lambda k, v: logged.__setitem__(k, v),
    )
    assert rewards == [1.0, 1.0, 1.0, 0.0, 0.0]
    assert logged["outcome/exact_match"] == pytest.approx(2 / 5)  # "{U}" and "{'U'}" equal the listed {U}
    assert logged["outcome/wrong"] == pytest.approx(2 / 5)


def test_conversational_completions_and_last_answer_wins():
    conv = [[{"role": "assistant", "content": "<answer>{M}</answer> no wait <answer>{U}</answer>"}]]
    assert outcome_reward(conv, problem=[PROBLEM]) == [1.0]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<answer>{U}</answer> then <answer>{M}", 1.0),  # an unclosed retraction is not an answer
        ("<answer>{M}</answer><answer><answer>{U}</answer>", 1.0),  # nearest <answer> before the last close
        ("{U}</answer>", 0.0),
        ("<answer>{U}", 0.0),
    ],
)
def test_the_last_complete_answer_block_is_graded(text, expected):
    assert outcome_reward([text], problem=[PROBLEM]) == [expected]


@pytest.mark.parametrize("name", sorted(hostile_inputs()))
def test_hostile_megabyte_returns_a_score(name):
    text = hostile_inputs()[name]
    entry = _kk_entry()[1]
    rewards = outcome_reward([text, text], problem=[PROBLEM, None], entry=[None, entry])
    assert all(r in (0.0, 1.0) for r in rewards)


def test_hostile_answer_right_at_the_end_still_counts():
    text = "<answer>" * 125_000 + "{U}</answer>"
    assert outcome_reward([text], problem=[PROBLEM]) == [1.0]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("no tags at all", "no_answer_tag"),
        ("", "no_answer_tag"),
        ("<answer>" + "U, " * 5000 + "</answer>", "answer_too_long"),
        ("<answer>∅∅ {{{[[[ </answer>", "wrong"),
    ],
)
def test_bad_text_scores_zero_with_a_counted_reason(text, reason):
    logged = {}
    assert outcome_reward([text], problem=[PROBLEM], log_metric=lambda k, v: logged.__setitem__(k, v)) == [
        0.0
    ]
    assert logged[f"outcome/{reason}"] == 1.0


def test_rows_without_target_get_none_and_bad_rows_do_not_crash():
    logged = {}
    rewards = outcome_reward(
        [_answer("{U}")] * 3,
        problem=[None, "{not json", PROBLEM],
        log_metric=lambda k, v: logged.__setitem__(k, v),
    )
    assert rewards == [None, None, 1.0]
    assert logged["outcome/no_target"] == pytest.approx(1 / 3)
    assert logged["outcome/bad_row"] == pytest.approx(1 / 3)
    assert outcome_reward([_answer("{U}")]) == [None]  # no columns at all


def _kk_entry():
    entry = reasoning_gym.create_dataset("knights_knaves", size=1, seed=3, n_people=3)[0]
    return entry, json.dumps(entry, default=str)


def test_reasoning_gym_rows_use_the_tasks_score_answer_strictly():
    entry, column = _kk_entry()
    oracle = entry["answer"]
    # Flip the first person's role: reasoning-gym gives partial credit, strict mode gives 0.
    terms = entry["metadata"]["knight_knave_terms"]
    good, bad = str(terms["a_knight"]), str(terms["a_knave"])
    first_clause = oracle.split(",")[0]
    flipped_first = first_clause.replace(good, "@@").replace(bad, good).replace("@@", bad)
    partial = oracle.replace(first_clause, flipped_first, 1)
    score_fn = reasoning_gym.get_score_answer_fn("knights_knaves")
    partial_credit = score_fn(partial, entry)
    assert 0.0 < partial_credit < 1.0

    rows = dict(entry=[column] * 2)
    assert outcome_reward([_answer(oracle), _answer(partial)], **rows) == [1.0, 0.0]
    lenient = make_outcome_reward(strict=False)
    assert lenient.__name__ == "outcome"
    assert lenient([_answer(oracle), _answer(partial)], **rows) == [1.0, pytest.approx(partial_credit)]


def test_mixed_batch_of_causal_and_reasoning_gym_rows():
    entry, column = _kk_entry()
    rewards = outcome_reward(
        [_answer("{U}"), _answer(entry["answer"])],
        problem=[PROBLEM, None],
        entry=[None, column],
    )
    assert rewards == [1.0, 1.0]


def test_names_are_stable():
    from faithgrpo.rewards.format import format_reward, trace_format_reward

    assert (outcome_reward.__name__, format_reward.__name__, trace_format_reward.__name__) == (
        "outcome",
        "format",
        "trace_format",
    )
