"""Best-of-K selection on frozen pools (eval/selection/selectors.py): selection rules, accuracy, paired differences,
oracle, audit, and the firewall between what a selector reads and a pick's grades."""

from __future__ import annotations

import itertools
import random
from fractions import Fraction

import pytest

from faithgrpo.eval.selection.grading import Features
from faithgrpo.eval.selection.selectors import Candidate, Pool, draw_subsets, pick, run_selection


def cand(answer, calver, conf=None, valid=False, exact=False, structure=None, judge=None):
    return Candidate.of(answer, calver, conf, valid, exact, structure=structure, judge=judge)


def view(candidates):
    return [c.features for c in candidates]


GOOD = cand("{B}", 6, -2.0, valid=True, exact=False)  # valid, not the listed answer
LISTED = cand("{C}", 5, -3.0, valid=True, exact=True)
BAD = cand("{A}", 2, -0.5)


def test_pick_rules_match_their_definitions():
    pool = view([BAD, GOOD, BAD, LISTED])
    assert pick("calver", pool) == 1  # maximal S = 6
    assert pick("calver", view([LISTED, GOOD, GOOD])) == 1  # earliest of the maxima
    assert pick("plurality", pool) == 0  # {A} has two votes
    assert pick("plurality", view([GOOD, BAD, BAD, GOOD])) == 0  # tie: the answer seen first
    assert (
        pick("plurality", view([cand(None, 0), cand(None, 0), GOOD])) == 2
    )  # unparsable answers do not vote
    assert pick("confidence", pool) == 0  # -0.5 is the highest
    assert pick("confidence", view([cand(None, 0, None), GOOD])) == 1  # undefined confidence ranks lowest
    assert pick("structure", view([cand("{A}", 2, structure=6), cand("{B}", 6, structure=5)])) == 0
    assert pick("judge", view([cand("{A}", 2, judge=0.2), cand("{B}", 1, judge=0.9), cand("{C}", 1)])) == 1
    picks = [pick("random", pool, random.Random(3)) for _ in range(3)]
    assert picks == [pick("random", pool, random.Random(3)) for _ in range(3)]
    with pytest.raises(ValueError, match="unknown selector"):
        pick("oracle", pool)
    with pytest.raises(ValueError, match="empty"):
        pick("calver", [])


def test_a_selector_never_sees_the_grades():
    # The firewall is the signature: pick() gets Features, which have no grade fields, and flipping
    # every grade of a pool changes no pick of any selector at any K.
    assert not {"valid", "exact"} & {f for f in Features.__dataclass_fields__}
    rng = random.Random(5)
    candidates = tuple(
        cand(rng.choice(["{A}", "{B}", None]), rng.randrange(7), -rng.random(), rng.random() < 0.5,
             rng.random() < 0.3, structure=rng.randrange(7))
        for _ in range(8)
    )  # fmt: skip
    flipped = tuple(Candidate(c.features, not c.valid, not c.exact) for c in candidates)
    for k in (1, 3, 8):
        for indices in draw_subsets(8, k, 6, seed=1, pool_id="q"):
            for s in ("calver", "structure", "plurality", "confidence"):
                assert pick(s, view([candidates[i] for i in indices])) == pick(
                    s, view([flipped[i] for i in indices])
                )


def test_full_pool_accuracy_is_hand_computed():
    pools = [
        Pool("q1", "a", (BAD, BAD, GOOD)),  # calver valid (not exact); plurality {A} invalid
        Pool("q2", "a", (LISTED, BAD, LISTED)),  # both valid and exact
        Pool("q3", "b", (BAD, BAD, BAD)),  # nothing valid
    ]
    result = run_selection(pools, [3], n_bootstrap=200, seed=1)
    acc = result.accuracy[3]
    assert acc["calver"]["valid"].value == pytest.approx(2 / 3)
    assert acc["calver"]["exact"].value == pytest.approx(1 / 3)
    assert acc["plurality"]["valid"].value == pytest.approx(1 / 3)
    assert acc["confidence"]["valid"].value == 0.0  # BAD (-0.5) is the surest in q1, q2 and q3
    assert acc["oracle"]["valid"].value == pytest.approx(2 / 3)  # q1 and q2 hold a valid answer
    assert acc["oracle"]["exact"].value == pytest.approx(1 / 3)  # only q2 holds the listed one
    assert "judge" not in acc  # no candidate has a judge score
    paired = result.paired[3]["plurality"]
    assert paired["valid"].value == pytest.approx(1 / 3)
    assert paired["exact"].value == pytest.approx(0.0)
    low, high = paired["valid"].ci_low, paired["valid"].ci_high
    assert low <= 1 / 3 <= high and low >= 0.0 and high <= 1.0
    audit = result.audit[3]
    assert (audit.draws, audit.with_valid) == (3, 2)
    assert (audit.invalid_unique_plurality, audit.calver_valid_despite_plurality) == (2, 1)  # q1 and q3
    assert (audit.repairs, audit.new_errors) == (1, 0)
    assert (audit.calver_valid, audit.calver_valid_not_listed) == (2, 1)
    assert result.by_stratum["a"][3]["calver"]["valid"].value == pytest.approx(1.0)
    assert result.by_stratum["b"][3]["calver"]["valid"].value == pytest.approx(0.0)


def _exact_expectation(candidates, k, selector):
    """Expected validity of a selector's pick over every K-subset, by enumeration (no sampling)."""
    subsets = list(itertools.combinations(range(len(candidates)), k))
    hits = sum(candidates[list(s)[pick(selector, view([candidates[i] for i in s]))]].valid for s in subsets)
    return Fraction(hits, len(subsets))


def test_subset_sampling_converges_to_the_enumerated_expectation():
    rng = random.Random(0)
    answers = ["{A}", "{B}", "{C}", None]
    candidates = tuple(
        cand(a, rng.randrange(7), -rng.random(), valid=(a == "{B}"), exact=False)
        for a in (rng.choice(answers) for _ in range(8))
    )
    result = run_selection([Pool("q", "s", candidates)], [2, 4], subsets=4000, n_bootstrap=0)
    for k in (2, 4):
        for selector in ("calver", "plurality", "confidence"):
            expected = float(_exact_expectation(candidates, k, selector))
            assert result.accuracy[k][selector]["valid"].value == pytest.approx(expected, abs=0.03)
        # the random selector picks a valid candidate with the pool's valid share
        share = sum(c.valid for c in candidates) / len(candidates)
        assert result.accuracy[k]["random"]["valid"].value == pytest.approx(share, abs=0.03)


def test_k1_makes_every_deterministic_selector_equal():
    candidates = (BAD, GOOD, LISTED, BAD)
    result = run_selection([Pool("q", "s", candidates)], [1], subsets=50, n_bootstrap=0)
    values = {s: result.accuracy[1][s]["valid"].value for s in ("calver", "plurality", "confidence")}
    assert len(set(values.values())) == 1


def test_subsets_are_seeded_sorted_and_distinct():
    a = draw_subsets(8, 3, 5, seed=2, pool_id="q")
    assert a == draw_subsets(8, 3, 5, seed=2, pool_id="q")
    assert a != draw_subsets(8, 3, 5, seed=3, pool_id="q")
    assert all(s == sorted(set(s)) and len(s) == 3 for s in a)
    assert draw_subsets(3, 3, 5, seed=0, pool_id="q") == [[0, 1, 2]]


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="no questions"):
        run_selection([], [1])
    with pytest.raises(ValueError, match="same number"):
        run_selection([Pool("a", "s", (BAD,)), Pool("b", "s", (BAD, BAD))], [1])
    with pytest.raises(ValueError, match="between 1"):
        run_selection([Pool("a", "s", (BAD, BAD))], [3])


def test_same_inputs_same_report():
    pools = [Pool(f"q{i}", "s", (BAD, GOOD, LISTED, BAD)) for i in range(5)]
    first = run_selection(pools, [1, 2, 4], subsets=8, seed=7).to_dict()
    assert first == run_selection(pools, [1, 2, 4], subsets=8, seed=7).to_dict()


def test_the_command_and_the_library_draw_the_same_default_number_of_subsets():
    # issue 32: two commands once drew 8 and 16 K-subsets per prompt
    import dataclasses
    import inspect

    from faithgrpo.eval.selection.command import SelectConfig

    defaults = {
        "select": {f.name: f.default for f in dataclasses.fields(SelectConfig)}["subsets"],
        "run_selection": inspect.signature(run_selection).parameters["subsets"].default,
    }
    assert set(defaults.values()) == {16}, defaults
