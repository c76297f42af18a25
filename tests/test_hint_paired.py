"""Paired hint-faithfulness differences between two checkpoints (eval/metrics/hint_scores.py).

The expectations come from `score_hint_type` on each checkpoint alone (the point estimate) and from a
naive bootstrap that rebuilds the resampled outcome lists pair by pair and scores them with
`score_hint_type` (the interval), on the same question draws.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from faithgrpo.eval.metrics.hint_paired import paired_hint_differences
from faithgrpo.eval.metrics.hint_scores import PairOutcome, score_hint_type
from faithgrpo.eval.metrics.passk import seeded_rng

TYPES = ["sycophancy", "metadata"]


def random_outcomes(seed: int, questions: int, switch: float, verbal: float) -> list[PairOutcome]:
    """Seeded answers of one checkpoint to every (question, hint type) pair; some unparsed."""
    rng = random.Random(seed)
    out = []
    for q in range(questions):
        unhinted = rng.choice("ABCD" + "A" * 4)  # the hint always points at B
        for t in TYPES:
            r = rng.random()
            if r < 0.05:
                hinted = None  # unparsed
            elif r < 0.05 + switch:
                hinted = "B"
            else:
                hinted = rng.choice("ACD")
            out.append(
                PairOutcome(
                    t, "B", unhinted, hinted, hinted == "B" and rng.random() < verbal, 4, f"q{q}/{t}", f"q{q}"
                )
            )
    return out


def naive_bootstrap(mine, theirs, hint_type, which, n_bootstrap, seed, salt):
    """Percentile interval of score(mine) - score(theirs) over resampled questions, by rebuilding lists."""
    questions = sorted({o.question_id for o in mine})
    rng = seeded_rng(seed, "hint-paired", *map(str, salt))
    draws = rng.integers(0, len(questions), size=(n_bootstrap, len(questions)))
    diffs = []
    for row in draws:
        drawn = [questions[i] for i in row]
        values = []
        for outcomes in (mine, theirs):
            resample = [o for q in drawn for o in outcomes if o.question_id == q]
            score = score_hint_type(resample, hint_type, min_switched=1, n_bootstrap=0)
            values.append(getattr(score, which).value)
        if None not in values:
            diffs.append(values[0] - values[1])
    return np.quantile(diffs, [0.025, 0.975])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_point_estimate_and_interval_match_a_naive_bootstrap(seed):
    mine = random_outcomes(seed, 60, switch=0.6, verbal=0.7)
    theirs = random_outcomes(seed + 100, 60, switch=0.4, verbal=0.2)
    out = paired_hint_differences(
        mine, theirs, TYPES, min_switched=5, n_bootstrap=300, seed=3, salt=("a", "b")
    )
    assert out["questions"] == 60 and out["pairs"] == 120
    for t in TYPES:
        alone = [score_hint_type(x, t, min_switched=5, n_bootstrap=0) for x in (mine, theirs)]
        for which in ("raw", "normalized"):
            est = out["types"][t][which]
            a, b = (getattr(s, which).value for s in alone)
            if a is None or b is None:
                assert est.value is None
                continue
            assert est.value == pytest.approx(a - b, abs=1e-12)
            low, high = naive_bootstrap(mine, theirs, t, which, 300, 3, ("a", "b"))
            assert (est.ci_low, est.ci_high) == pytest.approx((low, high), abs=1e-12)
    defined = [t for t in TYPES if out["types"][t]["normalized"].value is not None]
    assert out["types_in_mean"] == defined
    if defined:
        expected = np.mean([out["types"][t]["normalized"].value for t in defined])
        assert out["mean_normalized"].value == pytest.approx(expected)


def test_identical_checkpoints_differ_by_exactly_zero():
    mine = random_outcomes(5, 40, switch=0.6, verbal=0.5)
    out = paired_hint_differences(mine, list(mine), TYPES, min_switched=5, n_bootstrap=200)
    for t in TYPES:
        est = out["types"][t]["raw"]
        assert (est.value, est.ci_low, est.ci_high) == (0.0, 0.0, 0.0)


def test_swapping_the_checkpoints_negates_the_difference_and_its_interval():
    mine = random_outcomes(7, 50, switch=0.6, verbal=0.8)
    theirs = random_outcomes(8, 50, switch=0.5, verbal=0.3)
    kwargs = dict(min_switched=5, n_bootstrap=400, salt=("x",))
    ab = paired_hint_differences(mine, theirs, TYPES, **kwargs)["types"]["sycophancy"]["raw"]
    ba = paired_hint_differences(theirs, mine, TYPES, **kwargs)["types"]["sycophancy"]["raw"]
    assert ba.value == pytest.approx(-ab.value)
    assert (ba.ci_low, ba.ci_high) == pytest.approx((-ab.ci_high, -ab.ci_low))


def test_pairing_follows_ids_and_too_few_switches_is_undefined():
    def outcome(q, hinted, verbal, t="sycophancy"):
        return PairOutcome(t, "B", "A", hinted, verbal, 4, f"q{q}/{t}", f"q{q}")

    tuned = [outcome(q, "B", q % 2 == 0) for q in range(10)]
    base = [outcome(q, "B", False) for q in reversed(range(10))]  # order does not matter, ids do
    out = paired_hint_differences(tuned, base, ["sycophancy"], min_switched=10, n_bootstrap=0)
    assert out["types"]["sycophancy"]["raw"].value == pytest.approx(0.5)
    # alpha = 1 (no switch elsewhere): normalised = raw
    assert out["types"]["sycophancy"]["normalized"].value == pytest.approx(0.5)
    fewer = paired_hint_differences(tuned, base[:9], ["sycophancy"], min_switched=10, n_bootstrap=0)
    assert fewer["pairs"] == 9
    assert "not enough switched pairs" in fewer["types"]["sycophancy"]["raw"].reason
    none = paired_hint_differences(tuned, [outcome(99, "B", False)], ["sycophancy"])
    assert none["mean_normalized"].value is None and "no common hint pair" in none["mean_normalized"].reason


def test_report_level_comparison_and_table():
    from dataclasses import asdict

    from faithgrpo.eval.report.comparisons import paired_comparisons
    from faithgrpo.eval.report.config import EvalConfig
    from faithgrpo.eval.report.render import _hint_comparison_markdown, _Notes

    def checkpoint(label, outcomes):
        return {
            "label": label,
            "passk": {},
            "hints": {"outcomes": [asdict(o) for o in outcomes]},
        }

    base = checkpoint("base", random_outcomes(1, 40, switch=0.5, verbal=0.2))
    grpo = checkpoint("grpo", random_outcomes(2, 40, switch=0.5, verbal=0.9))
    config = EvalConfig(ks=(1,), samples=2, hints=tuple(TYPES), min_switched=5, n_bootstrap=100)
    out = paired_comparisons([base, grpo], config)
    syc = out["hints"]["grpo"]["types"]["sycophancy"]["raw"]
    expected = (
        score_hint_type(random_outcomes(2, 40, 0.5, 0.9), "sycophancy", min_switched=5).raw.value
        - score_hint_type(random_outcomes(1, 40, 0.5, 0.2), "sycophancy", min_switched=5).raw.value
    )
    assert syc["value"] == pytest.approx(expected) and syc["ci_low"] <= syc["value"] <= syc["ci_high"]
    lines = _hint_comparison_markdown(out, {"hints": TYPES}, _Notes())
    assert any("grpo − base raw" in line for line in lines)
    assert any(line.startswith("| sycophancy |") for line in lines)
    # Without hint outcomes (older report or no hint protocol) there is no hint comparison.
    assert "hints" not in paired_comparisons([{**base, "hints": None}, grpo], config)
