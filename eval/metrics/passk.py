"""Pass@K and CoT-Pass@K: unbiased estimators, dataset means and bootstrap confidence intervals.

Wen et al. 2025 (docs/evaluation.md, "Definitions"). For one prompt with ``G`` samples, ``C`` of them with a correct answer
and ``D`` with a correct answer *and* a correct chain of thought:

    Pass@K     = 1 − C(G−C, K) / C(G, K)
    CoT-Pass@K = 1 − C(G−D, K) / C(G, K)

i.e. the probability that a random K-subset of the G samples holds at least one correct sample.
Both are computed with exact integer arithmetic (``math.comb`` and ``fractions.Fraction``) and
rounded once to a float, so they are exact to the last bit for any ``G`` (1024 included), where the
naive float ratio of two 300-digit binomials would overflow.

Undefined values (no prompts) are reported as an `Estimate` with ``value=None`` and a reason, never
as a silent ``0/0``.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any

__all__ = [
    "Estimate",
    "PromptCounts",
    "bootstrap_cluster_mean",
    "bootstrap_mean",
    "bootstrap_rate",
    "check_k",
    "cot_pass_at_k",
    "count_prompt",
    "dataset_pass_at_k",
    "pass_at_k",
    "pass_at_k_table",
    "per_prompt_pass_at_k",
    "safe_check",
    "seeded_rng",
]


@dataclass(frozen=True)
class Estimate:
    """A metric value with an optional confidence interval, or an undefined value with its reason.

    Attributes:
        value: the point estimate, or ``None`` when the metric is undefined.
        ci_low: lower end of the confidence interval (``None`` when not available).
        ci_high: upper end of the confidence interval (``None`` when not available).
        n: number of units the estimate averages over (prompts, pairs, completions).
        reason: why ``value`` (or the interval) is missing; ``None`` when everything is defined.
    """

    value: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int = 0
    reason: str | None = None

    @classmethod
    def undefined(cls, reason: str, n: int = 0) -> Estimate:
        """An undefined estimate that says why."""
        return cls(value=None, n=n, reason=reason)

    @property
    def defined(self) -> bool:
        return self.value is not None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class PromptCounts:
    """Per-prompt sample counts: ``n`` samples (G), ``c`` correct answers, ``d`` correct answer + CoT.

    ``d`` is ``None`` when the task has no CoT verifier (CoT-Pass@K is then undefined for it).
    """

    n: int
    c: int
    d: int | None = None

    def __post_init__(self) -> None:
        _check_counts(self.n, self.c, self.d)


def _check_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    return value


def _check_counts(n: int, c: int, d: int | None = None) -> None:
    _check_int("G (samples per prompt)", n)
    _check_int("C (correct samples)", c)
    if n < 1:
        raise ValueError(f"G (samples per prompt) must be at least 1, got {n}")
    if not 0 <= c <= n:
        raise ValueError(f"C (correct samples) must be in [0, G={n}], got {c}")
    if d is not None:
        _check_int("D (correct answer and CoT)", d)
        if not 0 <= d <= c:
            raise ValueError(
                f"D (correct answer and correct CoT) must be in [0, C={c}], got {d}: a sample with a "
                "correct CoT but a wrong answer does not count towards D"
            )


def check_k(k: int, n: int) -> None:
    """Raise a `ValueError` naming the fix unless K is an int in ``[1, n]`` (n: samples per prompt G)."""
    _check_int("K", k)
    if k < 1:
        raise ValueError(f"K must be at least 1, got {k}")
    if k > n:
        raise ValueError(
            f"K={k} is larger than the number of samples per prompt G={n}: Pass@K needs at least K "
            f"samples. Generate more samples (--samples >= {k}) or drop K={k} from --k."
        )


# A pure function of three small ints, asked for every prompt x K x metric with the same few
# arguments (G is fixed per run): remembered, bounded. The float is immutable.
@functools.lru_cache(maxsize=16_384)
def _at_least_one(n: int, good: int, k: int) -> float:
    """P(a uniform K-subset of n items contains at least one of ``good`` marked items), exactly."""
    total = math.comb(n, k)
    # comb(n - good, k) is 0 when fewer than k bad items exist: then every subset hits a good one.
    return float(Fraction(total - math.comb(n - good, k), total))


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased Pass@K for one prompt: ``1 − C(n−c, k) / C(n, k)``.

    Args:
        n (`int`): samples generated for the prompt (G), at least 1.
        c (`int`): samples with a correct answer, in ``[0, n]``.
        k (`int`): subset size, in ``[1, n]``.

    Returns:
        `float`: the estimate in [0, 1], exact up to the final rounding.

    Raises:
        ValueError: ``k > n`` (names the fix: more samples or a smaller K) or counts out of range.

    Example:
        >>> pass_at_k(4, 1, 2)
        0.5
    """
    _check_counts(n, c)
    check_k(k, n)
    return _at_least_one(n, c, k)


def cot_pass_at_k(n: int, c: int, d: int, k: int) -> float:
    """Unbiased CoT-Pass@K for one prompt: ``1 − C(n−d, k) / C(n, k)`` (Wen et al. 2025).

    Args:
        n (`int`): samples generated for the prompt (G).
        c (`int`): samples with a correct answer (only used to check ``d ≤ c``).
        d (`int`): samples with a correct answer *and* a correct chain of thought.
        k (`int`): subset size, in ``[1, n]``.

    Returns:
        `float`: the estimate in [0, 1]; never above ``pass_at_k(n, c, k)``.

    Example:
        >>> cot_pass_at_k(4, 2, 1, 2)
        0.5
    """
    _check_counts(n, c, d)
    check_k(k, n)
    return _at_least_one(n, d, k)


def seeded_rng(seed: int, *salt: Any):
    """A numpy ``Generator`` seeded from ``seed`` and any salt, stable across processes and runs."""
    import numpy as np

    digest = hashlib.sha256(repr((int(seed), *map(str, salt))).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def bootstrap_mean(
    values: Sequence[float],
    *,
    n_bootstrap: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    salt: Any = "",
) -> Estimate:
    """Mean of ``values`` with a percentile bootstrap confidence interval (resampling the values).

    Args:
        values (`Sequence[float]`): one value per unit (prompt); must be finite.
        n_bootstrap (`int`, *optional*, defaults to 1000): bootstrap resamples; 0 skips the interval.
        confidence (`float`, *optional*, defaults to 0.95): coverage of the interval, in (0, 1).
        seed (`int`, *optional*, defaults to 0): seed of the resampling.
        salt (*optional*): mixed into the seed so different metrics draw different resamples.

    Returns:
        `Estimate`: ``value=None`` with a reason when ``values`` is empty; the interval is ``None``
        (with a reason) for a single value, whose spread cannot be estimated.

    Example:
        >>> bootstrap_mean([0.0, 1.0], seed=0).value
        0.5
    """
    import numpy as np

    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if n_bootstrap < 0:
        raise ValueError(f"n_bootstrap must be >= 0, got {n_bootstrap}")
    array = np.asarray(list(values), dtype=float)
    if array.size == 0:
        return Estimate.undefined("no prompts to average over")
    if not np.all(np.isfinite(array)):
        raise ValueError("bootstrap_mean got a non-finite value; report undefined values separately")
    mean = float(array.mean())
    if array.size == 1:
        return Estimate(mean, n=1, reason="one prompt only: no confidence interval")
    if n_bootstrap == 0:
        return Estimate(mean, n=int(array.size), reason="confidence interval not requested")
    rng = seeded_rng(seed, "bootstrap", salt)
    # Resample in chunks so memory stays ~ 4M indices however many prompts there are.
    chunk = max(1, 4_000_000 // array.size)
    means = []
    for start in range(0, n_bootstrap, chunk):
        size = min(chunk, n_bootstrap - start)
        idx = rng.integers(0, array.size, size=(size, array.size))
        means.append(array[idx].mean(axis=1))
    boot = np.concatenate(means)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(boot, [tail, 1.0 - tail])
    return Estimate(mean, float(low), float(high), n=int(array.size))


def bootstrap_rate(
    outcomes: Sequence[bool],
    clusters: Sequence[Any],
    *,
    n_bootstrap: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    salt: Any = "",
) -> Estimate:
    """Share of true ``outcomes`` with a bootstrap interval that resamples whole *clusters* (prompts).

    Completions of one prompt are correlated, so an interval that treats them as independent (Wilson
    over completions) is too narrow; here a resample draws prompts with replacement and keeps all of
    each prompt's outcomes (the ratio of sums: Σ successes / Σ outcomes). `bootstrap_cluster_mean`
    with booleans.

    Args:
        outcomes: one boolean per unit (completion, judged item).
        clusters: the cluster (prompt id) of each outcome, same length.
        n_bootstrap, confidence, seed, salt: as in `bootstrap_mean`.

    Returns:
        `Estimate` with ``n`` = number of outcomes; undefined when there is none; no interval for a
        single cluster.

    Example:
        >>> est = bootstrap_rate([True, True, False, False], ["a", "a", "b", "b"], seed=0)
        >>> est.value, est.ci_low, est.ci_high
        (0.5, 0.0, 1.0)
    """
    return _cluster_ratio(
        [bool(o) for o in outcomes], clusters, n_bootstrap, confidence, seed, ("bootstrap-rate", salt)
    )


def bootstrap_cluster_mean(
    values: Sequence[float],
    clusters: Sequence[Any],
    *,
    n_bootstrap: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    salt: Any = "",
) -> Estimate:
    """Mean of per-unit ``values`` (e.g. a score per completion) with a bootstrap over clusters (prompts).

    As `bootstrap_rate`, for numbers: a resample draws clusters with replacement and keeps all of a
    drawn cluster's values; its mean is Σ values / Σ units of the drawn clusters.

    Example:
        >>> est = bootstrap_cluster_mean([1.0, 0.5, 0.0, 0.0], ["a", "a", "b", "b"], seed=0)
        >>> est.value, est.ci_low, est.ci_high
        (0.375, 0.0, 0.75)
    """
    return _cluster_ratio(
        [float(v) for v in values], clusters, n_bootstrap, confidence, seed, ("bootstrap-cluster-mean", salt)
    )


def _cluster_ratio(values, clusters, n_bootstrap, confidence, seed, salt) -> Estimate:
    """Σ values / Σ units with a percentile bootstrap over clusters (see `bootstrap_rate`)."""
    import numpy as np

    if len(values) != len(clusters):
        raise ValueError(f"got {len(values)} outcomes for {len(clusters)} cluster labels")
    if not values:
        return Estimate.undefined("nothing to count")
    if not all(math.isfinite(v) for v in values):
        raise ValueError("a clustered mean got a non-finite value; report undefined values separately")
    order: dict[Any, int] = {}
    for c in clusters:
        order.setdefault(c, len(order))
    sums = np.zeros(len(order))
    sizes = np.zeros(len(order))
    for value, c in zip(values, clusters):
        sums[order[c]] += value
        sizes[order[c]] += 1
    value = float(sums.sum() / sizes.sum())
    n = int(sizes.sum())
    if len(order) == 1:
        return Estimate(value, n=n, reason="one prompt only: no confidence interval")
    if n_bootstrap == 0:
        return Estimate(value, n=n, reason="confidence interval not requested")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    rng = seeded_rng(seed, *salt)  # ("bootstrap-rate", salt): the draws bootstrap_rate always made
    idx = rng.integers(0, len(order), size=(n_bootstrap, len(order)))
    ratios = sums[idx].sum(axis=1) / sizes[idx].sum(axis=1)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(ratios, [tail, 1.0 - tail])
    return Estimate(value, float(low), float(high), n=n)


def _as_counts(counts: Iterable[PromptCounts | tuple]) -> list[PromptCounts]:
    out = []
    for item in counts:
        out.append(item if isinstance(item, PromptCounts) else PromptCounts(*item))
    return out


def per_prompt_pass_at_k(counts: Iterable[PromptCounts | tuple], k: int, *, cot: bool = False) -> list[float]:
    """Pass@K (or CoT-Pass@K with ``cot=True``) of every prompt.

    Args:
        counts: one `PromptCounts` (or ``(n, c[, d])`` tuple) per prompt.
        k (`int`): subset size; larger than any prompt's G is an error.
        cot (`bool`, *optional*, defaults to `False`): compute CoT-Pass@K (needs ``d`` on every prompt).

    Returns:
        `list[float]`: one value per prompt, in order.
    """
    values = []
    for i, pc in enumerate(_as_counts(counts)):
        if cot:
            if pc.d is None:
                raise ValueError(
                    f"prompt {i} has no CoT count (d=None): CoT-Pass@K needs a CoT verifier for the task"
                )
            values.append(cot_pass_at_k(pc.n, pc.c, pc.d, k))
        else:
            values.append(pass_at_k(pc.n, pc.c, k))
    return values


def dataset_pass_at_k(
    counts: Iterable[PromptCounts | tuple],
    k: int,
    *,
    cot: bool = False,
    n_bootstrap: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Estimate:
    """Dataset mean of Pass@K (or CoT-Pass@K) with a bootstrap interval over prompts.

    Args:
        counts: one `PromptCounts` (or tuple) per prompt.
        k (`int`): subset size.
        cot (`bool`, *optional*, defaults to `False`): CoT-Pass@K instead of Pass@K. Prompts without a
            CoT count are left out; when none has one the estimate is undefined, with the reason.
        n_bootstrap, confidence, seed: see `bootstrap_mean`.

    Returns:
        `Estimate`: mean over prompts, ``n`` = prompts used.

    Example:
        >>> dataset_pass_at_k([(4, 4), (4, 0)], k=1, n_bootstrap=0).value
        0.5
    """
    counts = _as_counts(counts)
    if not counts:
        return Estimate.undefined("no prompts")
    if cot:
        usable = [pc for pc in counts if pc.d is not None]
        if not usable:
            return Estimate.undefined("no prompt has a CoT verifier (d is None for every prompt)")
        counts = usable
    values = per_prompt_pass_at_k(counts, k, cot=cot)
    return bootstrap_mean(
        values,
        n_bootstrap=n_bootstrap,
        confidence=confidence,
        seed=seed,
        salt=("cot" if cot else "pass", k),
    )


def pass_at_k_table(
    counts: Iterable[PromptCounts | tuple],
    ks: Sequence[int],
    *,
    n_bootstrap: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[int, dict[str, Estimate]]:
    """Pass@K and CoT-Pass@K for several K at once.

    Args:
        counts: one `PromptCounts` (or tuple) per prompt.
        ks (`Sequence[int]`): the K values; every K must be ≤ the smallest G.
        n_bootstrap, confidence, seed: see `bootstrap_mean`.

    Returns:
        `dict[int, dict[str, Estimate]]`: ``{k: {"pass@k": Estimate, "cot_pass@k": Estimate}}``.

    Raises:
        ValueError: a K larger than some prompt's G, before any work is done.
    """
    counts = _as_counts(counts)
    if counts:
        smallest = min(pc.n for pc in counts)
        for k in ks:
            check_k(k, smallest)
    return {
        int(k): {
            "pass@k": dataset_pass_at_k(counts, k, n_bootstrap=n_bootstrap, confidence=confidence, seed=seed),
            "cot_pass@k": dataset_pass_at_k(
                counts, k, cot=True, n_bootstrap=n_bootstrap, confidence=confidence, seed=seed
            ),
        }
        for k in ks
    }


def count_prompt(
    completions: Sequence[str],
    answer_correct: Callable[[str], bool],
    cot_correct: Callable[[str], bool] | None = None,
) -> PromptCounts:
    """Count correct answers (C) and correct answer + CoT (D) among one prompt's G completions.

    The CoT verifier is only consulted on completions whose answer is correct (D ⊆ C), which also
    saves the cost of verifying wrong answers. A verifier that raises counts as "not correct": the
    verifiers run on model output and must not take the evaluation down.

    Args:
        completions (`Sequence[str]`): the G completion texts.
        answer_correct (`Callable[[str], bool]`): is the completion's final answer correct?
        cot_correct (`Callable[[str], bool]`, *optional*): is its chain of thought correct? ``None``
            leaves ``d=None`` (no CoT verifier for this task).

    Returns:
        `PromptCounts`.

    Example:
        >>> count_prompt(["a", "b", "a"], lambda t: t == "a", lambda t: False)
        PromptCounts(n=3, c=2, d=0)
    """
    c = d = 0
    for text in completions:
        if not safe_check(answer_correct, text):
            continue
        c += 1
        if cot_correct is not None and safe_check(cot_correct, text):
            d += 1
    return PromptCounts(len(completions), c, d if cot_correct is not None else None)


def safe_check(check: Callable[[str], bool], text: str) -> bool:
    """``check(text)`` as a bool; a check that raises counts as failed."""
    try:
        return bool(check(text))
    except Exception:  # a verifier bug on odd model output counts as a failed check, not a crash
        return False
