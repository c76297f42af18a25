"""Pass@K / CoT-Pass@K estimators against brute-force enumeration, hand cases and properties."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from faithgrpo.eval.metrics.judge import aggregate_judgements
from faithgrpo.eval.metrics.passk import (
    Estimate,
    PromptCounts,
    bootstrap_mean,
    cot_pass_at_k,
    count_prompt,
    dataset_pass_at_k,
    pass_at_k,
    pass_at_k_table,
    per_prompt_pass_at_k,
)


def brute_force(n: int, good: int, k: int) -> Fraction:
    """Share of all K-subsets of n samples (the first ``good`` of them good) holding a good one."""
    subsets = list(itertools.combinations(range(n), k))
    hits = sum(1 for s in subsets if any(i < good for i in s))
    return Fraction(hits, len(subsets))


@pytest.mark.parametrize("n", range(1, 9))
def test_pass_at_k_matches_enumeration_of_all_subsets(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == float(brute_force(n, c, k))


def test_cot_pass_at_k_matches_enumeration():
    n = 7
    for c in range(n + 1):
        for d in range(c + 1):
            for k in range(1, n + 1):
                # D of the C correct samples also have a correct CoT; only those count.
                assert cot_pass_at_k(n, c, d, k) == float(brute_force(n, d, k))


def test_hand_cases():
    # C = 0: no subset can hit a correct sample.
    assert pass_at_k(16, 0, 8) == 0.0
    # K = G: the only subset is everything, so any correct sample makes it 1.
    assert pass_at_k(5, 1, 5) == 1.0
    assert pass_at_k(5, 0, 5) == 0.0
    # K = 1 is the plain accuracy c / n.
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    # D = C: CoT-Pass@K equals Pass@K.
    assert cot_pass_at_k(10, 4, 4, 3) == pass_at_k(10, 4, 3)
    # D = 0 gives 0 even with correct answers.
    assert cot_pass_at_k(10, 4, 0, 3) == 0.0
    # 1 - C(2,2)/C(4,2) = 1 - 1/6.
    assert pass_at_k(4, 2, 2) == pytest.approx(5 / 6)


def test_large_g_is_exact_and_finite():
    # C(1024, 512) has ~300 digits; the float ratio would overflow, the exact one does not.
    value = pass_at_k(1024, 1, 512)
    assert value == 0.5  # one good sample is in a random half with probability exactly 1/2
    tiny = pass_at_k(1024, 1, 1)
    assert tiny == 1 / 1024
    # 1 - C(1023-…) close to 1: exact Fraction keeps the last bits right.
    expected = 1 - Fraction(math.comb(1024 - 3, 700), math.comb(1024, 700))
    assert pass_at_k(1024, 3, 700) == float(expected)
    assert 0.0 <= cot_pass_at_k(1024, 1000, 7, 1024) <= 1.0


def test_k_larger_than_g_is_a_clear_error():
    with pytest.raises(ValueError, match=r"K=9 is larger than .* G=8.*--samples >= 9"):
        pass_at_k(8, 2, 9)
    with pytest.raises(ValueError, match="K=32"):
        pass_at_k_table([(16, 3, 1), (16, 0, 0)], ks=[1, 32])


@pytest.mark.parametrize(
    ("args", "match"),
    [((4, 5, 1), r"C \(correct samples\)"), ((0, 0, 1), "at least 1"), ((4, 1, 0), "K must be at least 1")],
)
def test_bad_counts(args, match):
    with pytest.raises(ValueError, match=match):
        pass_at_k(*args)


def test_d_above_c_is_rejected():
    with pytest.raises(ValueError, match=r"D .* must be in \[0, C=2\]"):
        cot_pass_at_k(5, 2, 3, 1)
    with pytest.raises(ValueError):
        PromptCounts(5, 2, 3)
    with pytest.raises(TypeError):
        pass_at_k(4.0, 1, 1)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_properties_monotone_in_k_and_cot_below_pass(data):
    n = data.draw(st.integers(1, 200))
    c = data.draw(st.integers(0, n))
    d = data.draw(st.integers(0, c))
    values = [pass_at_k(n, c, k) for k in range(1, n + 1)]
    cot_values = [cot_pass_at_k(n, c, d, k) for k in range(1, n + 1)]
    assert all(a <= b for a, b in itertools.pairwise(values))
    assert all(a <= b for a, b in itertools.pairwise(cot_values))
    assert all(cv <= v for cv, v in zip(cot_values, values))
    assert all(0.0 <= v <= 1.0 for v in values)
    assert values[0] == pytest.approx(c / n)


def test_dataset_mean_and_bootstrap_interval():
    counts = [PromptCounts(4, 4, 2), PromptCounts(4, 0, 0), (4, 2, 1)]
    est = dataset_pass_at_k(counts, 1, n_bootstrap=500, seed=3)
    assert est.value == pytest.approx((1.0 + 0.0 + 0.5) / 3)
    assert est.n == 3
    assert 0.0 <= est.ci_low <= est.value <= est.ci_high <= 1.0
    # Seeded: same seed, same interval; another seed, (almost surely) another interval.
    again = dataset_pass_at_k(counts, 1, n_bootstrap=500, seed=3)
    assert again == est
    cot = dataset_pass_at_k(counts, 1, cot=True, n_bootstrap=0)
    assert cot.value == pytest.approx((0.5 + 0.0 + 0.25) / 3)
    assert per_prompt_pass_at_k(counts, 2) == [1.0, 0.0, pytest.approx(5 / 6)]


def test_bootstrap_interval_brackets_the_true_mean_for_a_constant():
    est = bootstrap_mean([0.25] * 10, n_bootstrap=200, seed=0)
    assert est.value == est.ci_low == est.ci_high == 0.25


def test_bootstrap_interval_shrinks_with_more_prompts():
    small = bootstrap_mean([0.0, 1.0] * 5, n_bootstrap=2000, seed=1)
    large = bootstrap_mean([0.0, 1.0] * 500, n_bootstrap=2000, seed=1)
    assert (large.ci_high - large.ci_low) < (small.ci_high - small.ci_low)
    # Normal approximation of the mean of 1000 fair coins: half-width ~ 1.96 * 0.5 / sqrt(1000).
    assert large.ci_high - large.ci_low == pytest.approx(2 * 1.96 * 0.5 / math.sqrt(1000), rel=0.15)


def test_undefined_values_carry_a_reason():
    assert dataset_pass_at_k([], 1) == Estimate.undefined("no prompts")
    no_cot = dataset_pass_at_k([(4, 2), (4, 1)], 1, cot=True)
    assert no_cot.value is None and "CoT verifier" in no_cot.reason
    single = bootstrap_mean([0.5])
    assert single.value == 0.5 and single.ci_low is None and "one prompt" in single.reason
    with pytest.raises(ValueError, match="non-finite"):
        bootstrap_mean([float("nan"), 1.0])


def test_table_has_both_metrics_per_k():
    table = pass_at_k_table([(8, 2, 1), (8, 8, 8)], ks=[1, 4, 8], n_bootstrap=0)
    assert set(table) == {1, 4, 8}
    assert table[8]["pass@k"].value == 1.0
    assert table[1]["cot_pass@k"].value == pytest.approx((1 / 8 + 1.0) / 2)
    for k in table:
        assert table[k]["cot_pass@k"].value <= table[k]["pass@k"].value


def test_count_prompt_only_checks_cot_of_correct_answers_and_survives_verifier_errors():
    seen = []

    def cot(text):
        seen.append(text)
        if text == "boom":
            raise RuntimeError("verifier bug")
        return text.startswith("good")

    counts = count_prompt(["good-a", "bad", "good-b", "boom", "meh-a"], lambda t: t != "bad", cot)
    assert counts == PromptCounts(5, 4, 2)
    assert "bad" not in seen
    assert count_prompt(["x"], lambda t: True).d is None


@pytest.mark.parametrize(
    ("votes", "mode", "expected"),
    [
        ([True, False, False], "any", True),
        ([True, True, None], "all", False),
        ([True, True, True], "all", True),
        ([True, False], "majority", False),
        ([True, True, False], "majority", True),
        ([None, None, True], "majority", False),
        ([], "any", False),
    ],
)
def test_judge_aggregation(votes, mode, expected):
    assert aggregate_judgements(votes, mode) is expected


def test_judge_aggregation_unknown_mode():
    with pytest.raises(ValueError, match="majority"):
        aggregate_judgements([True], "mean")


def test_bootstrap_rate_resamples_prompts_not_completions():
    from faithgrpo.eval.metrics.hint_scores import wilson_interval
    from faithgrpo.eval.metrics.passk import bootstrap_rate

    # 16 prompts x 16 samples; 2 prompts pass every sample, 14 pass none: completions are not independent.
    outcomes = [p < 2 for p in range(16) for _ in range(16)]
    clusters = [p for p in range(16) for _ in range(16)]
    clustered = bootstrap_rate(outcomes, clusters, n_bootstrap=2000, seed=0)
    assert clustered.value == pytest.approx(2 / 16) and clustered.n == 256
    low, high = wilson_interval(32, 256)
    assert high - low < 0.1  # what treating completions as independent would claim
    assert clustered.ci_low == 0.0 and clustered.ci_high > 0.25  # a resample can miss both good prompts
    # With every completion its own cluster the bootstrap is close to the binomial interval.
    alone = bootstrap_rate(outcomes, list(range(256)), n_bootstrap=4000, seed=0)
    assert alone.ci_low == pytest.approx(low, abs=0.03) and alone.ci_high == pytest.approx(high, abs=0.03)
    # Unequal cluster sizes: the value is the ratio of sums, not the mean of per-prompt shares.
    assert (
        bootstrap_rate([True, False, False, False, True], ["a", "a", "a", "a", "b"], n_bootstrap=0).value
        == 0.4
    )
    assert bootstrap_rate([], [], n_bootstrap=10).value is None
    with pytest.raises(ValueError, match="cluster labels"):
        bootstrap_rate([True], [], n_bootstrap=10)


def test_bootstrap_cluster_mean_resamples_prompts_and_is_invariant_to_duplicates():
    from faithgrpo.eval.metrics.passk import bootstrap_cluster_mean

    # S/6 scores of 3 completions on each of 6 prompts.
    scores = [(p * 3 + j) % 7 / 6 for p in range(6) for j in range(3)]
    clusters = [p for p in range(6) for _ in range(3)]
    est = bootstrap_cluster_mean(scores, clusters, n_bootstrap=500, seed=1)
    assert est.value == pytest.approx(sum(scores) / len(scores)) and est.n == 18
    assert est.ci_low < est.value < est.ci_high
    # Every completion duplicated within its prompt: the same numbers, bit for bit.
    doubled = bootstrap_cluster_mean(
        [s for s in scores for _ in range(2)],
        [c for c in clusters for _ in range(2)],
        n_bootstrap=500,
        seed=1,
    )
    assert (doubled.value, doubled.ci_low, doubled.ci_high) == (est.value, est.ci_low, est.ci_high)
    # A resample mean is a mean of prompts' values: the interval lies within the prompts' own means.
    means = [sum(scores[p * 3 : p * 3 + 3]) / 3 for p in range(6)]
    assert min(means) <= est.ci_low and est.ci_high <= max(means)
    assert bootstrap_cluster_mean([0.5], ["a"]).reason == "one prompt only: no confidence interval"
    with pytest.raises(ValueError, match="non-finite"):
        bootstrap_cluster_mean([float("nan"), 1.0], ["a", "b"])


def test_paired_comparisons_hand_case():
    from faithgrpo.eval.report.comparisons import paired_comparisons
    from faithgrpo.eval.report.config import EvalConfig

    def checkpoint(label, counts):
        return {"label": label, "passk": {"t": {"counts": [dict(n=n, c=c, d=d) for n, c, d in counts]}}}

    base = checkpoint("base", [(4, 0, 0), (4, 4, 4), (4, 2, 0)])
    grpo = checkpoint("grpo", [(4, 4, 4), (4, 4, 4), (4, 2, 2)])
    config = EvalConfig(ks=(1, 4), samples=4, n_bootstrap=500)
    out = paired_comparisons([base, grpo], config)  # no --baseline: the first checkpoint is the reference
    assert out["reference"] == "base" and list(out["checkpoints"]) == ["grpo"]
    k1 = out["checkpoints"]["grpo"]["t"]["1"]
    # per-prompt Pass@1: base 0, 1, 1/2; grpo 1, 1, 1/2 -> differences 1, 0, 0
    assert k1["pass@k"]["value"] == pytest.approx(1 / 3)
    # per-prompt CoT-Pass@1: base 0, 1, 0; grpo 1, 1, 1/2 -> differences 1, 0, 1/2
    assert k1["cot_pass@k"]["value"] == pytest.approx(1 / 2)
    assert k1["pass@k"]["ci_low"] <= 1 / 3 <= k1["pass@k"]["ci_high"]
    # K = 4 = G: Pass@4 is 1 wherever any sample is right: differences 1, 0, 0
    assert out["checkpoints"]["grpo"]["t"]["4"]["pass@k"]["value"] == pytest.approx(1 / 3)
    # With --baseline the baseline (second checkpoint) is the reference.
    out = paired_comparisons([grpo, base], EvalConfig(ks=(1,), samples=4, baseline="b", n_bootstrap=0))
    assert out["reference"] == "base"
    assert out["checkpoints"]["grpo"]["t"]["1"]["pass@k"]["value"] == pytest.approx(1 / 3)
    no_cot = checkpoint("x", [(4, 1, None)] * 3)
    out = paired_comparisons([base, no_cot], EvalConfig(ks=(1,), samples=4, n_bootstrap=0))
    assert out["checkpoints"]["x"]["t"]["1"]["cot_pass@k"]["value"] is None


def test_paired_faithfulness_differences_skip_undefined_prompts():
    from faithgrpo.eval.report.comparisons import paired_comparisons
    from faithgrpo.eval.report.config import EvalConfig

    def checkpoint(label, aoc, cir, delta):
        per_pair = {"aoc": aoc, "cir": cir, "cros_delta": delta}
        return {
            "label": label,
            "passk": {"t": {"counts": [dict(n=2, c=1, d=0)] * 3}},
            "faithfulness": {"pairs": 3, "per_pair": per_pair},
        }

    base = checkpoint("base", [0.5, None, 0.2], [0.1, 0.1, 0.1], [None, None, None])
    grpo = checkpoint("grpo", [0.7, 0.3, 0.2], [0.4, 0.1, 0.1], [0.01, 0.02, None])
    out = paired_comparisons([base, grpo], EvalConfig(ks=(1,), samples=2, n_bootstrap=200))
    paired = out["faithfulness"]["grpo"]
    assert paired["aoc"]["value"] == pytest.approx(0.1)  # prompts 0 and 2: +0.2 and 0.0
    assert paired["aoc"]["n"] == 2 and "1 of 3 prompts undefined" in paired["aoc"]["reason"]
    assert paired["cir"]["value"] == pytest.approx(0.1)  # +0.3, 0, 0
    assert paired["cros_delta"]["value"] is None  # the base has no defined Δ
    lonely = {
        "label": "x",
        "passk": {"t": {"counts": [dict(n=2, c=1, d=0)] * 3}},
        "faithfulness": {"pairs": 0},
    }
    out = paired_comparisons([base, lonely], EvalConfig(ks=(1,), samples=2, n_bootstrap=0))
    assert out["faithfulness"]["x"]["aoc"]["value"] is None
