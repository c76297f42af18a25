"""Wording of gold traces: the random (or plain) choices of a trace's wording (:class:`GoldStyle`), the
STRATEGY names per query kind (:data:`GOLD_STRATEGIES`)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

__all__ = ["GOLD_STRATEGIES", "GoldStyle"]

#: STRATEGY wordings per query kind; the first is the plain (worked-example) one.
GOLD_STRATEGIES = {
    "backdoor_set": ("backdoor criterion", "backdoor adjustment", "adjustment criterion"),
    "frontdoor_set": ("frontdoor criterion", "frontdoor adjustment"),
    "dsep_set": ("d-separation", "global Markov property"),
    "msep_set": ("m-separation", "m-separation on the canonical DAG"),
    "ci_test": ("d-separation",),  # ADMGs get m-separation, see _ci_test
    "directed_path": ("directed path search (BFS)", "reachability", "depth-first search", "DFS"),
    "mediator": ("directed path search", "mediation analysis via directed paths", "DFS"),
    "cycle": ("cycle detection (DFS)", "depth-first search", "back edge search (DFS)"),
    "ate": ("backdoor adjustment formula", "adjustment formula", "g-formula"),
}


class GoldStyle:
    """Random choices of wording; ``plain`` always takes the first option (worked examples)."""

    def __init__(self, rng: random.Random, plain: bool, forced: Any = None):
        self.rng, self.plain, self.forced = rng, plain, forced

    def choice(self, options: Sequence[Any]) -> Any:
        """One of ``options`` (the first when plain)."""
        return options[0] if self.plain else self.rng.choice(list(options))

    def coin(self, p: float) -> bool:
        """True with probability ``p`` (never when plain)."""
        return (not self.plain) and self.rng.random() < p

    def shuffled(self, items: Sequence[Any]) -> list:
        """``items`` in random order (as given when plain)."""
        out = list(items)
        if not self.plain:
            self.rng.shuffle(out)
        return out
