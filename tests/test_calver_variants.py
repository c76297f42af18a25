"""CALVER variants (``calver_gated``, ``calver_certified``): the six checks as rewards that pay for the
certificate, not for the answer again. Expectations are hand-worked on one backdoor problem, then checked
over generated problems against the outcome grader (an independent judge of the answer), and the
cheapest texts that look like work are shown to earn nothing extra.
"""

from __future__ import annotations

import json
import random

import pytest

from faithgrpo.rewards.calver.reward import (
    VARIANTS,
    CalverScore,
    calver_certified_reward,
    calver_gated_reward,
    calver_reward,
    make_calver_reward,
    variant_reward,
)
from faithgrpo.rewards.outcome import outcome_reward
from faithgrpo.rewards.registry import get_reward_funcs
from faithgrpo.tasks.certificates.gold import gold_trace

# U confounds X -> M -> Y: the only backdoor path is X <- U -> Y; {U} is the valid (and minimal) set,
# {M} is a descendant of X (invalid).
PROBLEM = {
    "graph": {
        "type": "DAG",
        "nodes": ["U", "X", "M", "Y"],
        "directed": [["U", "X"], ["U", "Y"], ["X", "M"], ["M", "Y"]],
    },
    "query": {"kind": "backdoor_set", "treatment": "X", "outcome": "Y"},
}
SLOTS = (
    "GRAPH: M -> Y; U -> X; U -> Y; X -> M\nQUERY: backdoor_set(treatment=X, outcome=Y)\n"
    "STRATEGY: backdoor criterion\n"
)
GOLD = (
    f"<think>\n{SLOTS}DERIVATION:\n- U is not a descendant of X\n"
    "- backdoor path X <- U -> Y is blocked given {U}\nRESULT: {U}\n</think>\n<answer>{U}</answer>"
)
# the cheapest texts that look like work
TIDY_WRONG = f"<think>\n{SLOTS}DERIVATION:\n- M is chosen\nRESULT: {{M}}\n</think>\n<answer>{{M}}</answer>"
RIGHT_UNPROVED = f"<think>\n{SLOTS}DERIVATION:\n- it follows\nRESULT: {{U}}\n</think>\n<answer>{{U}}</answer>"
# a true claim that does not certify RESULT (the backdoor path is never shown blocked)
RIGHT_TRUE_BUT_INSUFFICIENT = f"<think>\n{SLOTS}DERIVATION:\n- U is not a descendant of X\nRESULT: {{U}}\n</think>\n<answer>{{U}}</answer>"
BARE_ANSWER = "<answer>{U}</answer>"


def _rewards(texts, reward):
    return reward(texts, problem=[json.dumps(PROBLEM)] * len(texts))


def test_hand_worked_scores_of_every_variant():
    texts = [GOLD, TIDY_WRONG, RIGHT_UNPROVED, RIGHT_TRUE_BUT_INSUFFICIENT, BARE_ANSWER]
    # by hand: gold passes all six; the tidy wrong trace passes graph, query and strategy (3/6); the
    # right unproved traces fail only the derivation (5/6); a bare answer breaks slot discipline (0/6)
    assert _rewards(texts, calver_reward) == pytest.approx([1.0, 3 / 6, 5 / 6, 5 / 6, 0.0])
    assert _rewards(texts, calver_gated_reward) == pytest.approx([1.0, 0.0, 5 / 6, 5 / 6, 0.0])
    assert _rewards(texts, calver_certified_reward) == [1.0, 0.0, 0.0, 0.0, 0.0]


def test_cheap_text_earns_nothing_the_outcome_reward_does_not_already_pay():
    # tidy slots around a wrong answer: 3/6 under calver, nothing under either variant
    for reward in (calver_gated_reward, calver_certified_reward):
        assert _rewards([TIDY_WRONG], reward) == [0.0]
    # a right answer without a certificate: certified pays nothing, and the gold trace beats it under gated
    assert _rewards([RIGHT_UNPROVED, RIGHT_TRUE_BUT_INSUFFICIENT], calver_certified_reward) == [0.0, 0.0]
    gated = _rewards([GOLD, RIGHT_UNPROVED], calver_gated_reward)
    assert gated[0] > gated[1]


def _causal_rows(n: int, seed: int):
    import reasoning_gym

    import faithgrpo.tasks  # noqa: F401  (registers causal_graph with reasoning-gym)

    data = reasoning_gym.create_dataset("causal_graph", size=n, seed=seed, min_nodes=4, max_nodes=6)
    return [json.loads(entry["metadata"]["problem"]) for entry in data]


def _swap_answer(trace: str, answer: str) -> str:
    head, _, _ = trace.rpartition("RESULT:")
    return f"{head}RESULT: {answer}\n</think>\n<answer>{answer}</answer>"


def test_over_generated_problems_gated_is_zero_exactly_when_the_outcome_grader_rejects():
    problems = _causal_rows(40, seed=5)
    rng = random.Random(0)
    texts, rows, answers = [], [], []
    for problem in problems:
        gold = gold_trace(problem, rng, plain=True)
        texts.append(gold)
        rows.append(problem)
        # another problem's answer of the same kind: sometimes right by chance, mostly wrong;
        # the outcome grader, not this test, decides which
        other = rng.choice([p for p in problems if p["query"]["kind"] == problem["query"]["kind"]])
        wrong = gold_trace(other, rng, plain=True).rpartition("<answer>")[2].split("</answer>")[0]
        texts.append(_swap_answer(gold, wrong))
        rows.append(problem)
    answers = [json.dumps(r) for r in rows]  # the problem column, as the dataset carries it
    outcome = outcome_reward(texts, problem=answers)
    full = calver_reward(texts, problem=answers)
    gated = calver_gated_reward(texts, problem=answers)
    certified = calver_certified_reward(texts, problem=answers)
    assert 0.0 in outcome and 1.0 in outcome  # both cases occur
    for o, s, g, c in zip(outcome, full, gated, certified):
        if o == 0.0:
            assert g == 0.0 and c == 0.0 and s <= 3 / 6 + 1e-9
        else:
            assert g == pytest.approx(s)
        assert c <= g <= s + 1e-9
    assert all(c == 1.0 for c in certified[::2])  # every gold trace certifies


def test_variant_rule_on_every_combination_of_checks():
    import itertools

    for bits in itertools.product([False, True], repeat=6):
        score = CalverScore(*bits)
        total = sum(bits)
        assert variant_reward(score, "sum") == pytest.approx(total / 6)
        assert variant_reward(score, "gated") == pytest.approx(total / 6 if bits[5] else 0.0)
        assert variant_reward(score, "certified") == (1.0 if total == 6 else 0.0)
    with pytest.raises(ValueError, match="unknown CALVER variant 'max'"):
        variant_reward(CalverScore(), "max")


def test_registry_names_options_and_logging_per_variant():
    funcs = get_reward_funcs(
        "calver,calver_gated,calver_certified", calver_gated_graph_check="query_local", calver_max_paths=8
    )
    assert [f.__name__ for f in funcs] == ["calver", "calver_gated", "calver_certified"]
    assert [f.variant for f in funcs] == list(VARIANTS)
    assert funcs[0].config.max_paths == 8 and funcs[1].config.graph_check == "query_local"
    assert funcs[2] is calver_certified_reward  # no options: the shared default instance
    logged: dict[str, float] = {}
    funcs[1]([GOLD, TIDY_WRONG], problem=[PROBLEM] * 2, log_metric=lambda k, v: logged.__setitem__(k, v))
    assert logged["calver_gated/certified"] == 0.5 and "calver/certified" not in logged
    with pytest.raises(ValueError, match="unknown CALVER variant"):
        make_calver_reward(variant="strict")
    with pytest.raises(ValueError, match="the CALVER variant is the reward's name"):
        get_reward_funcs("calver", calver_variant="gated")
