"""CRoS Δ summary over a set of completions: mean with a bootstrap interval, spread, quantiles."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from faithgrpo.eval.metrics.passk import Estimate, bootstrap_mean

__all__ = ["DeltaSummary", "summarize_deltas"]


@dataclass(frozen=True)
class DeltaSummary:
    """Distribution of CRoS Δ over a set of completions.

    Attributes:
        n: values given.
        n_defined: finite Δ values.
        undefined: undefined values counted by reason (``"undefined"`` for a bare ``None``/NaN).
        mean: mean Δ with a bootstrap interval (undefined with a reason when no Δ is defined).
        std: population standard deviation (``None`` with fewer than two values).
        quantiles: ``{q: value}`` for the requested quantiles (empty when undefined).
        minimum, maximum: extremes (``None`` when undefined).
    """

    n: int
    n_defined: int
    undefined: dict[str, int]
    mean: Estimate
    std: float | None
    quantiles: dict[float, float]
    minimum: float | None
    maximum: float | None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["quantiles"] = {str(q): v for q, v in self.quantiles.items()}
        return data


def summarize_deltas(
    deltas: Iterable[Any],
    *,
    quantiles: Sequence[float] = (0.05, 0.25, 0.5, 0.75, 0.95),
    n_bootstrap: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> DeltaSummary:
    """Summarise CRoS Δ values: mean (bootstrap interval), std, quantiles, undefined counts.

    Args:
        deltas: floats, ``None`` (undefined) or `faithgrpo.rewards.cros.completions.CRoSScore` objects (their
            ``delta`` and ``reason`` are read), e.g. ``CRoSReward.compute_deltas(pairs)``.
        quantiles: quantile levels in [0, 1].
        n_bootstrap, confidence, seed: see `bootstrap_mean`.

    Returns:
        `DeltaSummary`.

    Example:
        >>> s = summarize_deltas([0.5, None, 1.5], n_bootstrap=0)
        >>> s.mean.value, s.undefined
        (1.0, {'undefined': 1})
    """
    import numpy as np

    values: list[float] = []
    undefined: Counter[str] = Counter()
    total = 0
    for item in deltas:
        total += 1
        reason = None
        if hasattr(item, "delta"):
            reason, item = getattr(item, "reason", None), item.delta
        if isinstance(item, (int, float)) and not isinstance(item, bool) and math.isfinite(item):
            values.append(float(item))
        else:
            undefined[reason or ("non_finite" if isinstance(item, float) else "undefined")] += 1
    for q in quantiles:
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"quantile levels must be in [0, 1], got {q}")
    if not values:
        reason = "no completions" if total == 0 else f"no defined CRoS delta among {total} completions"
        return DeltaSummary(total, 0, dict(undefined), Estimate.undefined(reason), None, {}, None, None)
    array = np.asarray(values)
    mean = bootstrap_mean(
        values, n_bootstrap=n_bootstrap, confidence=confidence, seed=seed, salt="cros-delta"
    )
    if undefined:
        note = f"{sum(undefined.values())} of {total} deltas undefined"
        mean = Estimate(
            mean.value, mean.ci_low, mean.ci_high, mean.n, f"{note}; {mean.reason}" if mean.reason else note
        )
    return DeltaSummary(
        n=total,
        n_defined=len(values),
        undefined=dict(sorted(undefined.items())),
        mean=mean,
        std=float(array.std()) if len(values) > 1 else None,
        quantiles={float(q): float(np.quantile(array, q)) for q in quantiles},
        minimum=float(array.min()),
        maximum=float(array.max()),
    )
