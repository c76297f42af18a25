"""Every symbolic reward pickles and scores the same batch in a spawned process (TRL's async trainer
hands reward functions to a child process; so do multiprocessing scorers)."""

from __future__ import annotations

import json
import multiprocessing
import pickle

import pytest

from faithgrpo.rewards.registry import get_reward_funcs
from faithgrpo.tasks.certificates.gold import gold_trace

PROBLEM = {
    "graph": {
        "type": "DAG",
        "nodes": ["U", "X", "M", "Y"],
        "directed": [["U", "X"], ["U", "Y"], ["X", "M"], ["M", "Y"]],
    },
    "query": {"kind": "backdoor_set", "treatment": "X", "outcome": "Y"},
}
GOLD = gold_trace(PROBLEM, 0, plain=True)
BATCH = {
    "prompts": ["q"] * 4,
    "completions": [GOLD, GOLD.replace("{U}", "{M}"), "<answer>{U}</answer>", "no tags at all"],
    "problem": [json.dumps(PROBLEM)] * 4,
    "answer": ["{U}"] * 4,
}
CONFIGS = [
    ("outcome", {}),
    ("outcome", {"outcome_strict": False}),
    ("format", {}),
    ("trace_format", {}),
    ("calver", {}),
    ("calver", {"calver_graph_check": "query_local"}),
]


def _score(payload: bytes) -> list:
    reward = pickle.loads(payload)
    return [reward.__name__, reward(**BATCH)]


@pytest.mark.parametrize(("name", "options"), CONFIGS)
def test_reward_round_trips_through_pickle_with_its_name_and_scores(name, options):
    (reward,) = get_reward_funcs([name], **options)
    copy = pickle.loads(pickle.dumps(reward))
    assert copy.__name__ == reward.__name__ == name
    assert copy(**BATCH) == reward(**BATCH)


def test_rewards_score_the_same_batch_in_a_spawned_process():
    rewards = [get_reward_funcs([n], **o)[0] for n, o in CONFIGS]
    expected = [[r.__name__, r(**BATCH)] for r in rewards]
    assert expected[4][1][0] == 1.0 and expected[4][1][1] < 1.0  # calver: the gold trace certifies, {M} not
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        result = pool.map_async(_score, [pickle.dumps(r) for r in rewards])
        got = result.get(timeout=300)  # a hung child fails here with a TimeoutError, not a hung suite
    assert got == expected
