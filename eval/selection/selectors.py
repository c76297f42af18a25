"""Best-of-K selection on frozen candidate pools: which selector picks a valid answer, and how often?

The experiment of the CALVER paper: every question has a pool of ``G`` sampled completions; for
each K, seeded K-subsets of the pool are drawn (the whole pool when K = G) and each *selector*
picks one completion of the subset, reading only its
`~faithgrpo.eval.selection.grading.Features` (never its grades):

==============  ==============================================================================
selector        picks
==============  ==============================================================================
``calver``      the earliest completion with the maximal verifier score S (0..6)
``structure``   the earliest with the maximal structure-only score (the paper's control)
``plurality``   the first completion whose normalised answer is the most frequent (earliest on
                ties; unparsable answers do not vote; nothing votes: the first completion)
``confidence``  the highest mean answer-token log-probability (earliest on ties; undefined lowest)
``judge``       the highest LLM-judge score (earliest on ties); only when every candidate has one
``random``      a uniformly random completion (seeded per question, K and subset)
==============  ==============================================================================

The ``oracle`` row is the ceiling: a draw counts when its subset holds a valid (exact) answer.

Each pick is graded twice: ``valid`` (the graph predicate accepts the answer: any valid set counts,
listed or not) and ``exact`` (the answer equals a listed answer, any member where several are
listed). A question's accuracy at K is the mean over its subsets; the dataset accuracy is the mean
over questions with a bootstrap interval over questions (a question's subsets and samples are
resampled together: prompt-clustered). The CALVER − plurality difference is paired: the per-question
differences are bootstrapped.

Audit figures (per K, counted over all drawn subsets, "draws"): draws whose pool holds a valid answer;
draws where an invalid answer is the *unique* plurality (strictly more votes than any other answer)
and how often CALVER still picks a valid one; *repairs* (plurality invalid, CALVER valid) and *new
errors* (plurality valid, CALVER invalid) among draws holding a valid answer; CALVER picks that are
valid yet differ from every listed answer.

Complexity: O(Σ_K subsets · K) per question. Pure Python over already-graded candidates; no model.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from faithgrpo.eval.metrics.passk import Estimate, bootstrap_mean, seeded_rng
from faithgrpo.eval.selection.grading import Features
from faithgrpo.rewards.selection import best_of_k_index, plurality_index

__all__ = [
    "DEFAULT_SUBSETS",
    "GRADINGS",
    "ORACLE",
    "PAIRED_AGAINST",
    "SELECTORS",
    "Audit",
    "BestOfKResult",
    "Candidate",
    "Pool",
    "draw_subsets",
    "pick",
    "run_selection",
]

SELECTORS = ("calver", "structure", "plurality", "confidence", "judge", "random")
GRADINGS = ("valid", "exact")
ORACLE = "oracle"
# CALVER's paired differences are taken against these selectors.
PAIRED_AGAINST = ("plurality", "structure")


@dataclass(frozen=True)
class Candidate:
    """One graded completion of a pool: what selectors read, and its two grades.

    Attributes:
        features: the selectors' view (`Features`).
        valid: the task's predicate accepts the answer (any valid set; the CLEAR judge for CLEAR).
        exact: the answer equals a listed answer.
    """

    features: Features
    valid: bool
    exact: bool

    @classmethod
    def of(cls, answer, calver, confidence, valid, exact, structure=None, judge=None) -> Candidate:
        """A candidate from plain values (``structure`` defaults to ``calver``)."""
        return cls(
            Features(answer, calver, calver if structure is None else structure, confidence, judge),
            valid,
            exact,
        )


@dataclass(frozen=True)
class Pool:
    """The ``G`` graded completions of one question, in generation order."""

    id: str
    stratum: str
    candidates: tuple[Candidate, ...]


@dataclass(frozen=True)
class Audit:
    """The paper's audit figures at one K (counts over drawn subsets)."""

    k: int
    draws: int = 0
    with_valid: int = 0
    invalid_unique_plurality: int = 0
    calver_valid_despite_plurality: int = 0
    repairs: int = 0
    new_errors: int = 0
    calver_valid: int = 0
    calver_valid_not_listed: int = 0


@dataclass(frozen=True)
class BestOfKResult:
    """Accuracy per K, selector and grading, CALVER's paired differences, the audit.

    ``accuracy[k][selector][grading]`` (selectors that ran, plus ``"oracle"``) and
    ``paired[k][other][grading]`` (CALVER − ``other``, for ``other`` in `PAIRED_AGAINST`) are
    `Estimate`s over questions;
    ``by_stratum[stratum][k][selector][grading]`` the same within one stratum (task type × variant).
    """

    questions: int
    samples: int
    ks: tuple[int, ...]
    subsets: int
    accuracy: dict[int, dict[str, dict[str, Estimate]]]
    paired: dict[int, dict[str, Estimate]]
    audit: dict[int, Audit]
    by_stratum: dict[str, dict[int, dict[str, dict[str, Estimate]]]] = field(default_factory=dict)
    selectors: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        def est(tree: Any) -> Any:
            if isinstance(tree, Estimate):
                return tree.to_dict()
            return {str(key): est(value) for key, value in tree.items()}

        return {
            "questions": self.questions,
            "samples": self.samples,
            "ks": list(self.ks),
            "subsets": self.subsets,
            "selectors": list(self.selectors),
            "accuracy": est(self.accuracy),
            "paired_calver_minus": est(self.paired),
            "audit": {str(k): asdict(a) for k, a in self.audit.items()},
            "by_stratum": est(self.by_stratum),
        }


def draw_subsets(g: int, k: int, subsets: int, seed: int, pool_id: str) -> list[list[int]]:
    """Seeded K-subsets of ``range(g)`` in generation order; the whole pool once when ``k == g``.

    Example:
        >>> draw_subsets(4, 4, 8, 0, "q"), len(draw_subsets(4, 2, 3, 0, "q"))
        ([[0, 1, 2, 3]], 3)
    """
    if not 1 <= k <= g:
        raise ValueError(f"K={k} must be between 1 and the pool size G={g}")
    if k == g:
        return [list(range(g))]
    rng = random.Random(int(seeded_rng(seed, "best-of-k-subsets", pool_id, k).integers(2**62)))
    return [sorted(rng.sample(range(g), k)) for _ in range(subsets)]


def _lowest_if_none(values: Sequence[float | None]) -> list[float]:
    return [float("-inf") if v is None else v for v in values]


def pick(selector: str, features: Sequence[Features], rng: random.Random | None = None) -> int:
    """Index (into ``features``) that ``selector`` picks; see the module table.

    A selector receives features only, never a candidate's grades.

    Example:
        >>> f = [Features("{A}", 3, 5, -1.0), Features("{B}", 6, 5, -2.0), Features("{A}", 2, 6, -0.5)]
        >>> [pick(s, f) for s in ("calver", "structure", "plurality", "confidence")]
        [1, 2, 0, 2]
    """
    if not features:
        raise ValueError("cannot pick from an empty pool")
    if selector == "calver":
        return best_of_k_index([f.calver for f in features])
    if selector == "structure":
        return best_of_k_index([f.structure for f in features])
    if selector == "plurality":
        return plurality_index([f.answer for f in features])
    if selector == "confidence":
        return best_of_k_index(_lowest_if_none([f.confidence for f in features]))
    if selector == "judge":
        return best_of_k_index(_lowest_if_none([f.judge for f in features]))
    if selector == "random":
        return (rng or random.Random(0)).randrange(len(features))
    raise ValueError(f"unknown selector {selector!r}; use one of {SELECTORS}")


def _unique_plurality(candidates: Sequence[Candidate]) -> str | None:
    """The answer with strictly more votes than any other, else ``None``."""
    counts: dict[str, int] = {}
    for c in candidates:
        if c.features.answer is not None:
            counts[c.features.answer] = counts.get(c.features.answer, 0) + 1
    if not counts:
        return None
    ranked = sorted(counts.values(), reverse=True)
    if len(ranked) > 1 and ranked[0] == ranked[1]:
        return None
    return max(counts, key=counts.__getitem__)


def _audit_draw(
    tally: dict[str, int], subset: Sequence[Candidate], calver: Candidate, plural: Candidate
) -> None:
    tally["draws"] += 1
    if calver.valid:
        tally["calver_valid"] += 1
        tally["calver_valid_not_listed"] += not calver.exact
    if any(c.valid for c in subset):
        tally["with_valid"] += 1
        tally["repairs"] += (not plural.valid) and calver.valid
        tally["new_errors"] += plural.valid and not calver.valid
    unique = _unique_plurality(subset)
    if unique is not None and not plural.valid:
        tally["invalid_unique_plurality"] += 1
        tally["calver_valid_despite_plurality"] += calver.valid


# Seeded K-subsets drawn per question and K (issue 32: two commands once drew different numbers).
DEFAULT_SUBSETS = 16


def run_selection(
    pools: Sequence[Pool],
    ks: Sequence[int],
    *,
    subsets: int = DEFAULT_SUBSETS,
    seed: int = 0,
    n_bootstrap: int = 1000,
    confidence: float = 0.95,
) -> BestOfKResult:
    """Run every selector at every K on the pools and grade the picks (see the module docstring).

    Args:
        pools: one `Pool` per question; all pools must have the same size G ≥ max(ks).
        ks: subset sizes, each in 1..G.
        subsets: K-subsets drawn per question when K < G.
        seed: seed of the subsets, the random selector and the bootstrap.
        n_bootstrap, confidence: bootstrap settings (over questions).

    Returns:
        `BestOfKResult`.

    Raises:
        ValueError: no pools, pools of different sizes, or a K outside 1..G.

    Example:
        >>> good, bad = Candidate.of("{B}", 6, -2.0, True, False), Candidate.of("{A}", 2, -1.0, False, False)
        >>> result = run_selection([Pool("q1", "s", (bad, bad, good))], [3], n_bootstrap=0)
        >>> [result.accuracy[3][s]["valid"].value for s in ("calver", "plurality", "oracle")]
        [1.0, 0.0, 1.0]
    """
    if not pools:
        raise ValueError("no questions to select on")
    sizes = {len(p.candidates) for p in pools}
    if len(sizes) != 1:
        raise ValueError(f"every pool must hold the same number of samples, got sizes {sorted(sizes)}")
    g = sizes.pop()
    ks = tuple(int(k) for k in ks)
    for k in ks:
        if not 1 <= k <= g:
            raise ValueError(f"K={k} must be between 1 and the number of samples G={g}")
    judged = all(c.features.judge is not None for p in pools for c in p.candidates)
    selectors = tuple(s for s in SELECTORS if s != "judge" or judged)
    rows_of = (*selectors, ORACLE)

    # per_question[k][row][grading] -> list of per-question accuracies (pool order)
    per_question = {k: {s: {gr: [] for gr in GRADINGS} for s in rows_of} for k in ks}
    audit = {k: dict.fromkeys((f for f in Audit.__dataclass_fields__ if f != "k"), 0) for k in ks}
    for pool in pools:
        for k in ks:
            draws = draw_subsets(g, k, subsets, seed, pool.id)
            rng = random.Random(int(seeded_rng(seed, "best-of-k-random", pool.id, k).integers(2**62)))
            hits = {s: {gr: 0 for gr in GRADINGS} for s in rows_of}
            for indices in draws:
                subset = [pool.candidates[i] for i in indices]
                seen = [c.features for c in subset]  # the selectors' whole view of the subset
                chosen = {s: subset[pick(s, seen, rng)] for s in selectors}
                for s, cand in chosen.items():
                    hits[s]["valid"] += cand.valid
                    hits[s]["exact"] += cand.exact
                hits[ORACLE]["valid"] += any(c.valid for c in subset)
                hits[ORACLE]["exact"] += any(c.exact for c in subset)
                _audit_draw(audit[k], subset, chosen["calver"], chosen["plurality"])
            for s in rows_of:
                for gr in GRADINGS:
                    per_question[k][s][gr].append(hits[s][gr] / len(draws))

    def estimate(values: Sequence[float], *salt: Any) -> Estimate:
        return bootstrap_mean(values, n_bootstrap=n_bootstrap, confidence=confidence, seed=seed, salt=salt)

    accuracy = {
        k: {s: {gr: estimate(per_question[k][s][gr], "acc", k, s, gr) for gr in GRADINGS} for s in rows_of}
        for k in ks
    }
    paired = {
        k: {
            other: {
                gr: estimate(
                    [a - b for a, b in zip(per_question[k]["calver"][gr], per_question[k][other][gr])],
                    "paired",
                    k,
                    other,
                    gr,
                )
                for gr in GRADINGS
            }
            for other in PAIRED_AGAINST
        }
        for k in ks
    }
    by_stratum: dict[str, dict[int, dict[str, dict[str, Estimate]]]] = {}
    for stratum in sorted({p.stratum for p in pools}):
        rows = [i for i, p in enumerate(pools) if p.stratum == stratum]
        by_stratum[stratum] = {
            k: {
                s: {
                    gr: estimate([per_question[k][s][gr][i] for i in rows], "stratum", stratum, k, s, gr)
                    for gr in GRADINGS
                }
                for s in rows_of
            }
            for k in ks
        }
    return BestOfKResult(
        questions=len(pools),
        samples=g,
        ks=ks,
        subsets=subsets,
        accuracy=accuracy,
        paired=paired,
        audit={k: Audit(k=k, **audit[k]) for k in ks},
        by_stratum=by_stratum,
        selectors=selectors,
    )
