"""STRATEGY method names: which known methods a text names, and whether they decide a query kind.

One job: find the method names of :data:`METHOD_GROUPS` in a STRATEGY text (:func:`named_methods`)
and judge it for one kind (:func:`strategy_check`, memoised as :func:`cached_strategy_problem`). The
contract is ``QueryKind.strategy_problem``, documented in :mod:`faithgrpo.verifier.queries`.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import Any

from faithgrpo.verifier.answers import MAX_ANSWER_CHARS

_STRATEGY_NORM_RE = re.compile(r"[^a-z0-9]+")


def _norm(text: str) -> str:
    return _STRATEGY_NORM_RE.sub("", text.lower())


def strategy_check(kind: str, strategies: tuple[str, ...], text: Any) -> str | None:
    """Why STRATEGY ``text`` names no method of ``strategies`` for ``kind`` (None: it names one)."""
    if isinstance(text, str) and any(
        ord(ch) > 127 and unicodedata.category(ch).startswith("L") for ch in text[:MAX_ANSWER_CHARS]
    ):
        return "uses non-ASCII letters (method names are written in ASCII; look-alike letters hide names)"
    found = named_methods(text)
    if not found:
        return "names no known method"
    accepted = {_norm(s) for s in strategies}
    foreign = [name for name in found if _norm(name) not in accepted]
    if foreign:
        if len(found) > len(foreign):
            return f"names more than one method: {found[:4]}"
        return f"names {foreign[0]!r}, which does not decide {kind}"
    if not any(all(_norm(name) in group for name in found) for group in _GROUP_SETS):
        return f"names more than one method: {found[:4]}"
    return None


# STRATEGY texts repeat across prompts ("backdoor criterion"). The verdict reads only the kind's name
# and strategies, the text and the module's method tables: keyed by those (all immutable), a str or
# None; bounded (texts up to _MEMO_TEXT_CHARS).
cached_strategy_problem = functools.lru_cache(maxsize=4_096)(strategy_check)


#: Method names a STRATEGY may use, grouped by method: names in one group are one method.
METHOD_GROUPS: dict[str, tuple[str, ...]] = {
    "backdoor criterion": ("backdoor criterion", "back-door criterion", "backdoor adjustment",
                           "back-door adjustment", "adjustment criterion", "adjustment set"),
    "adjustment formula": ("adjustment formula", "g-formula",
                           "truncated factorization", "truncated factorisation"),
    "frontdoor criterion": ("frontdoor criterion", "front-door criterion", "frontdoor adjustment",
                            "front-door adjustment"),
    "separation": ("d-separation", "m-separation", "Bayes ball", "moral graph", "moralization",
                   "moralisation", "global Markov property", "latent projection", "canonical DAG"),
    "graph search": ("directed path", "reachability", "DFS", "BFS", "depth-first search",
                     "breadth-first search", "mediation", "mediator"),
    "cycle detection": ("cycle detection", "topological sort", "Kahn", "back edge", "DFS",
                        "depth-first search"),
    "other methods": ("do-calculus", "instrumental variable", "propensity score", "regression",
                      "inverse probability weighting", "matching", "randomization", "simulation"),
}  # fmt: skip
_GROUP_SETS = [frozenset(_norm(n) for n in names) for names in METHOD_GROUPS.values()]
_METHOD_NAMES: dict[str, str] = {}
for _names in METHOD_GROUPS.values():
    for _name in _names:
        _METHOD_NAMES.setdefault(_norm(_name), _name)
_METHOD_RE = re.compile("|".join(sorted(map(re.escape, _METHOD_NAMES), key=len, reverse=True)))


def named_methods(text: Any) -> list[str]:
    """The distinct method names of :data:`METHOD_GROUPS` in ``text``, in order of appearance.

    Example:
        >>> named_methods("Cycle detection (DFS), then DFS again")
        ['cycle detection', 'DFS']
    """
    if not isinstance(text, str):
        return []
    found = [_METHOD_NAMES[m.group(0)] for m in _METHOD_RE.finditer(_norm(text[:MAX_ANSWER_CHARS]))]
    return list(dict.fromkeys(found))
