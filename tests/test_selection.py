"""Best-of-K and plurality selection, and the fragmentation demo (plurality vs CALVER best-of-K)."""

from __future__ import annotations

import importlib.util
import itertools
import json
import math
import pathlib
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from faithgrpo.rewards.calver.problem import prepare_problem
from faithgrpo.rewards.selection import (
    best_of_k_index,
    normalized_answer,
    plurality,
    plurality_index,
    select_best_of_k,
)

ROOT = pathlib.Path(__file__).resolve().parents[1]


def load_fragmentation():
    spec = importlib.util.spec_from_file_location("fragmentation", ROOT / "benchmarks" / "fragmentation.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# U confounds X -> Y; W -> U. Valid backdoor sets: {U}, {U, W}. Invalid: {}, {W}.
PROBLEM = {
    "graph": {
        "type": "DAG",
        "nodes": ["W", "U", "X", "Y"],
        "directed": [["W", "U"], ["U", "X"], ["U", "Y"], ["X", "Y"]],
    },
    "query": {"kind": "backdoor_set", "treatment": "X", "outcome": "Y"},
    "answer": "{U}",
}


def trace(result, answer=None, strategy="backdoor criterion", graph="W -> U; U -> X; U -> Y; X -> Y"):
    return (
        f"<think>\nGRAPH: {graph}\nQUERY: backdoor_set(treatment=X, outcome=Y)\nSTRATEGY: {strategy}\n"
        f"DERIVATION:\n- X <- U -> Y is the backdoor path\nRESULT: {result}\n</think>\n"
        f"<answer>{result if answer is None else answer}</answer>"
    )


FULL = trace("{U}")  # 6
FULL_OTHER = trace("{U, W}")  # 6, another valid answer
WRONG = trace("{}")  # 4: result and answer fail
BAD_STRATEGY = trace("{U}", strategy="gut feeling")  # 5


# ---------------------------------------------------------------------------------------------
# pure rules against brute force
@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 6), max_size=20))
def test_best_of_k_index_is_the_earliest_maximum(scores):
    if not scores:
        assert best_of_k_index(scores) == -1
        return
    i = best_of_k_index(scores)
    assert scores[i] == max(scores)
    assert all(s < scores[i] for s in scores[:i])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.none(), st.sampled_from("abcd")), max_size=20))
def test_plurality_index_matches_brute_force(answers):
    i = plurality_index(answers)
    if not answers:
        assert i == -1
        return
    votes = Counter(a for a in answers if a is not None)
    if not votes:
        assert i == 0
        return
    top = max(votes.values())
    tied = [a for a in votes if votes[a] == top]
    winner = min(tied, key=answers.index)  # the tied answer whose first occurrence is earliest
    assert i == answers.index(winner)


# ---------------------------------------------------------------------------------------------
# select_best_of_k
def test_best_of_k_picks_the_earliest_full_trace():
    assert select_best_of_k([WRONG, BAD_STRATEGY, FULL, FULL_OTHER], PROBLEM) == 2
    assert select_best_of_k([FULL_OTHER, FULL], PROBLEM) == 0
    assert select_best_of_k([WRONG, BAD_STRATEGY], PROBLEM) == 1
    assert select_best_of_k([WRONG, WRONG], PROBLEM) == 0


def test_best_of_k_beats_a_majority_of_wrong_answers():
    pool = [WRONG] * 5 + [FULL_OTHER]
    assert plurality(pool, PROBLEM) == 0  # the repeated wrong answer wins the vote
    assert select_best_of_k(pool, PROBLEM) == 5


def test_best_of_k_accepts_json_prepared_and_conversational():
    pool = [WRONG, [{"role": "assistant", "content": FULL}]]
    assert select_best_of_k(pool, json.dumps(PROBLEM)) == 1
    assert select_best_of_k(pool, prepare_problem(PROBLEM)) == 1


def test_best_of_k_passes_scorer_settings():
    # a trace that omits nothing but whose graph is only right locally would differ; here the cap does
    assert select_best_of_k([WRONG, FULL], PROBLEM, max_chars=20) == 0  # everything scores 0


def test_selection_never_raises_on_candidates():
    junk = [None, 42, "", "x" * 1_000_000, "{" * 10_000, [{"role": "assistant"}], {"content": 3}, "<answer>"]
    assert select_best_of_k(junk, PROBLEM) == 0
    assert plurality(junk, PROBLEM) == 0
    assert select_best_of_k([*junk, FULL], PROBLEM) == len(junk)
    assert plurality([*junk, WRONG], PROBLEM) == len(junk)


def test_empty_pool():
    assert select_best_of_k([], PROBLEM) == -1
    assert plurality([], PROBLEM) == -1


def test_unknown_kind_fails_closed_and_bad_problem_raises():
    unknown = dict(PROBLEM, query={"kind": "counterfactual", "treatment": "X", "outcome": "Y"})
    assert select_best_of_k([WRONG, FULL], unknown) == 0  # all score 0: the earliest
    with pytest.raises(ValueError, match="graph"):
        select_best_of_k([FULL], {"query": PROBLEM["query"]})
    with pytest.raises(ValueError, match="JSON"):
        plurality([FULL], "{oops")


# ---------------------------------------------------------------------------------------------
# plurality
def test_plurality_normalises_answers_by_query_kind():
    # {U, W}, {'W', 'U'} and [U, W] are one answer (2 votes with the bare 'U, W' = 3); {U} has 2
    pool = ["<answer>{U}</answer>", "<answer>{U, W}</answer>", "<answer>{'W', 'U'}</answer>",
            "<answer>{U}</answer>", "<answer>[U, W]</answer>"]  # fmt: skip
    assert plurality(pool, PROBLEM) == 1
    assert normalized_answer(pool[2], PROBLEM) == "{U, W}"


def test_plurality_ties_go_to_the_answer_seen_first():
    pool = ["<answer>{}</answer>", "<answer>{U}</answer>", "<answer>{U}</answer>", "<answer>set()</answer>"]
    assert plurality(pool, PROBLEM) == 0  # {} and set() are the same answer: 2 votes each, {} first
    assert plurality(pool[1:], PROBLEM) == 0


def test_plurality_ignores_unparsable_answers():
    pool = ["<answer>maybe U?</answer>", "<answer>{U} or {W}</answer>", "<answer>{W}</answer>"]
    assert plurality(pool, PROBLEM) == 2
    assert plurality(["<answer>??</answer>", "<answer>!!</answer>"], PROBLEM) == 0


def test_plurality_without_a_problem_votes_on_folded_text():
    pool = ["<answer>Paris</answer>", "<answer> london </answer>", "<answer>LONDON</answer>"]
    assert plurality(pool, None) == 1
    assert normalized_answer("<answer>  New \n York </answer>", None) == "new york"
    assert normalized_answer("<answer> </answer>", None) is None


# ---------------------------------------------------------------------------------------------
# the fragmentation demo
@pytest.fixture(scope="module")
def frag():
    return load_fragmentation()


@pytest.mark.parametrize(("rho", "m", "k"), [(0.6, 4, 1), (0.6, 4, 3), (0.6, 4, 5), (0.3, 2, 4), (0.9, 3, 4)])
def test_exact_plurality_matches_enumeration(frag, rho, m, k):
    # Enumerate every sequence of K draws (categories 0..m-1 valid, m invalid) and apply the rule.
    probs = [rho / m] * m + [1 - rho]
    expected = 0.0
    for seq in itertools.product(range(m + 1), repeat=k):
        p = math.prod(probs[c] for c in seq)
        expected += p * (seq[plurality_index(list(seq))] != m)
    assert frag.exact_plurality(rho, m, k) == pytest.approx(expected, abs=1e-12)


def test_fragmentation_pool_strings_score_as_claimed(frag):
    problem = frag.hand_built_problem(4)
    valid, invalid = frag.build_pool_strings(problem, 4)
    assert len(set(valid)) == 4
    assert select_best_of_k([invalid, *valid], problem) == 1
    assert plurality([invalid, valid[0], invalid], problem) == 0


def test_fragmentation_rejects_problems_without_enough_answers(frag):
    with pytest.raises(ValueError, match="fewer than M=3"):
        frag.build_pool_strings(PROBLEM, 3)  # only {U} and {U, W} are valid
    with pytest.raises(ValueError, match="set-valued"):
        frag.build_pool_strings(dict(PROBLEM, query={"kind": "ci_test", "x": "X", "y": "Y"}), 2)


@pytest.mark.parametrize("source", ["generator", "hand_built"])
def test_fragmentation_small_run_matches_the_claim(frag, source):
    trials = 600
    out = frag.run(rho=0.6, m=4, k_max=32, trials=trials, seed=1, source=source)
    assert out["problem_source"] == source
    json.dumps(out)  # JSON-ready
    ks = out["K"]
    assert ks == list(range(1, 33))
    # CALVER best-of-K follows 1 - (1 - rho)^K: within 4 binomial standard errors (+ a small slack)
    for acc, exact in zip(out["calver"], out["calver_analytic"]):
        assert abs(acc - exact) <= 4 * math.sqrt(exact * (1 - exact) / trials) + 0.01
    assert out["calver_analytic"][-1] == pytest.approx(1 - 0.4**32)
    # plurality follows its exact curve and converges to the invalid answer
    for acc, exact in zip(out["plurality"], out["plurality_exact"]):
        assert abs(acc - exact) <= 4 * math.sqrt(exact * (1 - exact) / trials) + 0.01
    assert out["plurality_exact"][0] == pytest.approx(0.6)
    assert out["plurality_exact"][-1] < 0.1 and out["plurality"][-1] < 0.15
    assert all(a > b for a, b in zip(out["plurality_exact"][2:], out["plurality_exact"][3:]))
    assert out["calver"][-1] > 0.99 and out["plurality_picks_invalid_at_k_max"] > 0.85
    assert out["calver_scores"]["valid"] == [6, 6, 6, 6] and out["calver_scores"]["invalid"] < 6
    assert len(set(out["valid_answers"])) == 4 and out["invalid_answer"] not in out["valid_answers"]
    assert out["pools_cross_checked_with_public_api"] > 0


def test_fragmentation_cli_prints_json(frag, capsys):
    assert (
        frag.main(["--trials", "30", "--k-max", "4", "--m", "2", "--rho", "0.5", "--source", "hand_built"])
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["K"] == [1, 2, 3, 4] and out["M"] == 2
    assert out["calver_analytic"] == pytest.approx([1 - 0.5**k for k in range(1, 5)])


def test_fragmentation_generator_pool_uses_gold_traces(frag):
    problem, valid, invalid = frag.generator_pool(3, seed=2)
    assert len(valid) == 3
    assert all(select_best_of_k([invalid, v], problem) == 1 for v in valid)
    assert len({normalized_answer(v, problem) for v in valid}) == 3
    assert normalized_answer(invalid, problem) not in {normalized_answer(v, problem) for v in valid}


def test_fragmentation_bad_parameters(frag):
    with pytest.raises(ValueError, match="source"):
        frag.run(trials=1, source="web")
    with pytest.raises(ValueError, match="rho"):
        frag.run(rho=1.5, trials=1)
    with pytest.raises(ValueError, match="positive"):
        frag.run(m=0, trials=1)
