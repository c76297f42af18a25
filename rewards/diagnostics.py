"""Counting why rewards were not earned, and logging it through TRL's ``log_metric``.

TRL (≥ 1.x) passes ``log_metric(name, value)`` to reward functions and averages each metric over a
logging step. Every reward declares its reasons up front and logs the share of each one in every
call, zeros included, so the averages over steps are not biased towards the steps where a reason
happened to occur.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any


def log_reasons(
    reward_name: str, reasons: Sequence[str | None], known: Iterable[str], kwargs: dict[str, Any]
) -> None:
    """Log ``<reward_name>/<reason>`` = share of completions with that reason, for every known reason.

    Args:
        reward_name: the reward's ``__name__``.
        reasons: one entry per completion; ``None`` where nothing went wrong.
        known: every reason the reward can give (logged as 0.0 when absent).
        kwargs: the reward call's keyword arguments; nothing is logged without ``log_metric``.
    """
    log_metric = kwargs.get("log_metric")
    if not callable(log_metric) or not reasons:
        return
    counts = Counter(r for r in reasons if r is not None)
    for reason in dict.fromkeys([*known, *counts]):
        log_metric(f"{reward_name}/{reason}", counts.get(reason, 0) / len(reasons))


def log_value(name: str, value: float, kwargs: dict[str, Any]) -> None:
    """Log one scalar through ``log_metric`` when the trainer passed it."""
    log_metric = kwargs.get("log_metric")
    if callable(log_metric):
        log_metric(name, float(value))
