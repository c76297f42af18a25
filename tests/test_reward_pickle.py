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
    ("calver_gated", {}),
    ("calver_certified", {"calver_certified_graph_check": "query_local"}),
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


def _cros_score(payload: bytes) -> list:
    reward = pickle.loads(payload)
    return reward(prompts=CROS_BATCH["prompts"], completions=CROS_BATCH["completions"])


CROS_BATCH = {
    "prompts": ["What is 2 + 3?"] * 2,
    "completions": [
        "<think>Step 1: 2 + 3 = 5\nStep 2: so the answer is 5\nStep 3: done</think><answer>5</answer>",
        "<think>Step 1: guess\nStep 2: five</think><answer>5</answer>",
    ],
}


def test_cros_pickles_by_configuration_and_reloads_its_reference_in_a_child(tmp_path):
    from faithgrpo.rewards.cros import CRoSReward
    from faithgrpo.testing import save_tiny_causal_lm, tiny_causal_lm

    path = save_tiny_causal_lm(tmp_path / "ref")
    cros = CRoSReward(str(path), num_scrambles=2)
    unloaded = pickle.dumps(cros)
    expected = cros(**CROS_BATCH)  # loads the reference from the path
    assert cros.model is not None
    loaded = pickle.dumps(cros)  # the live model stays here; the copy holds the path
    assert len(loaded) < 100_000
    for payload in (unloaded, loaded):
        copy = pickle.loads(payload)
        assert copy.__name__ == "cros" and copy.model is None
        assert copy(**CROS_BATCH) == expected
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        assert pool.map_async(_cros_score, [loaded]).get(timeout=300) == [expected]
    model, tokenizer = tiny_causal_lm("llama")
    bound = CRoSReward(model.requires_grad_(False), tokenizer)
    with pytest.raises(TypeError, match="bound to a live reference model"):
        pickle.dumps(bound)


def _async_worker_scores(payload: bytes) -> list:
    """In a spawned child, as TRL's async GRPO worker: its own ``_score_group`` over our rewards."""
    import asyncio
    import os
    import warnings

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    warnings.simplefilter("ignore")
    from accelerate import PartialState
    from trl.experimental.async_grpo.async_rollout_worker import (
        RolloutGroup,
        TrainingSequence,
        _AsyncRolloutLoop,
    )
    from trl.trainer.utils import get_callable_name

    PartialState()  # as the worker's child does first (its logging needs the state)
    rewards = pickle.loads(payload)
    # The loop's constructor starts a vLLM client; the scoring call reads only these attributes.
    loop = object.__new__(_AsyncRolloutLoop)
    loop.reward_funcs = rewards
    loop.reward_func_names = [get_callable_name(f) for f in rewards]
    loop._env_reward_types = []
    loop._provides_rollout_reward = False
    n = len(BATCH["completions"])
    group = RolloutGroup(
        prompts=BATCH["prompts"], reward_kwargs={"problem": BATCH["problem"], "answer": BATCH["answer"]},
        completions=BATCH["completions"], completions_ids=[[1]] * n,
        completions_sequences=[[TrainingSequence([1, 2], [0, 1], [0.0, -1.0], 0)] for _ in range(n)],
        tool_call_counts=[0] * n, tool_failure_counts=[0] * n, model_version=0, group_id=0,
        env_rewards=[None] * n, rollout_rewards=[None] * n,
    )  # fmt: skip
    samples = asyncio.run(loop._score_group(group))
    return [(s.metrics, s.advantage) for s in samples]


def test_trls_async_grpo_worker_scores_our_rewards_in_its_spawned_child():
    """TRL's async trainer pickles ``reward_funcs`` into a spawned child whose ``_score_group`` calls
    them with ``completions, prompts, completion_ids`` and the dataset columns: the same numbers as
    here, logged under our names, and the gold trace gets the largest advantage."""
    try:
        import trl.experimental.async_grpo.async_rollout_worker  # noqa: F401
    except ImportError as error:  # the module needs aiohttp; older TRL has no async trainer
        pytest.skip(f"TRL's async GRPO worker does not import here: {error}")
    names = ["outcome", "format", "calver"]
    rewards = get_reward_funcs(names)
    direct = [r(**BATCH) for r in rewards]
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        got = pool.map_async(_async_worker_scores, [pickle.dumps(rewards)]).get(timeout=300)[0]
    for i, (metrics, _) in enumerate(got):
        assert {k: v for k, v in metrics.items() if k.startswith("rewards/")} == {
            f"rewards/{name}": float(scores[i]) for name, scores in zip(names, direct)
        }
        assert metrics["reward"] == pytest.approx(sum(float(scores[i]) for scores in direct))
    advantages = [a for _, a in got]
    assert advantages[0] == max(advantages) > advantages[-1]
