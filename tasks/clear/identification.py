"""Identifiability of a causal effect P(y | do(x)) in an ADMG: the complete ID criterion.

Pure functions on a :class:`~faithgrpo.verifier.graphs.model.CausalGraph` (directed edges acyclic,
bi-directed edges for latent confounding). The criterion is Tian & Pearl's c-component
factorisation with Tian's ``Identify`` (Tian 2002, Alg. 1; Shpitser & Pearl 2006 prove it
complete, Huang & Valtorta 2006 likewise):

* ``D`` = the ancestors of ``Y`` in ``G[V \\ X]`` (``Y`` included);
* ``P(y | do(x))`` is identifiable iff every district ``S`` of ``G[D]`` is identifiable from
  ``Q[T]``, ``T`` the district of ``G`` that holds ``S``;
* ``Identify(S, T)``: with ``A`` = the ancestors of ``S`` in ``G[T]`` (``S`` included), ``A = S``
  is identifiable, ``A = T`` is not (``T`` and ``S`` then form a hedge), otherwise recurse on
  ``Identify(S, T')`` with ``T'`` the district of ``G[A]`` that holds ``S``.

The failing pair ``(T, S)`` of the last case is the hedge of Shpitser & Pearl (2006, Def. 5): two
C-forests over the same root set, ``T`` meeting ``X`` and ``S`` not. The unit tests check this
function against a brute-force hedge search over node sets and against hand-worked textbook
graphs (the bow arc, front door, napkin).
"""

from __future__ import annotations

from collections.abc import Iterable

from faithgrpo.verifier.graphs.model import CausalGraph

__all__ = ["identifiable", "non_identifiable_pair"]


def _as_set(vs: str | Iterable[str]) -> frozenset[str]:
    return frozenset((vs,)) if isinstance(vs, str) else frozenset(vs)


def _closure(start, step, within: frozenset[str]) -> frozenset[str]:
    """``start`` and every node of ``within`` reached from it by repeated ``step(node)`` inside ``within``."""
    seen = set(start)
    stack = list(start)
    while stack:
        for w in step(stack.pop()):
            if w in within and w not in seen:
                seen.add(w)
                stack.append(w)
    return frozenset(seen)


def _ancestors_within(g: CausalGraph, vs: frozenset[str], within: frozenset[str]) -> frozenset[str]:
    """``vs`` and every node of ``within`` with a directed path into ``vs`` inside ``G[within]``."""
    return _closure(vs, g.parents, within)


def _districts_within(g: CausalGraph, within: frozenset[str]) -> list[frozenset[str]]:
    """The districts of ``G[within]`` (bi-directed connected components, singletons included)."""
    out, seen = [], set()
    for v in g.nodes:
        if v in within and v not in seen:
            part = _closure((v,), g.siblings, within)
            seen |= part
            out.append(part)
    return out


def _district_holding(g: CausalGraph, within: frozenset[str], c: frozenset[str]) -> frozenset[str]:
    anchor = next(iter(c))
    return next(d for d in _districts_within(g, within) if anchor in d)


def _identify(g: CausalGraph, c: frozenset[str], t: frozenset[str]) -> frozenset[str] | None:
    """Tian's ``Identify(C, T, Q[T])``: ``None`` when ``Q[C]`` is identifiable, else the set ``T``
    (a district holding ``C``) at which it fails."""
    while True:
        a = _ancestors_within(g, c, t)
        if a == c:
            return None
        if a == t:
            return t
        t = _district_holding(g, a, c)


def non_identifiable_pair(
    g: CausalGraph, x: str | Iterable[str], y: str | Iterable[str]
) -> tuple[frozenset[str], frozenset[str]] | None:
    """``None`` when ``P(y | do(x))`` is identifiable in ``g``; else a pair ``(T, S)``: ``S`` a
    district of ``G[D]`` whose factor ``Q[S]`` is not identifiable, and ``T`` the district (of the
    subgraph reached by ``Identify``) where it fails. ``T ⊋ S`` and the two form a hedge.

    Raises:
        ValueError: ``x`` or ``y`` empty, overlapping or naming nodes outside ``g``, or ``g`` with a
            directed cycle.
    """
    xs, ys = _as_set(x), _as_set(y)
    nodes = g.node_set
    if not xs or not ys or xs & ys or not (xs | ys) <= nodes:
        raise ValueError("x and y must be disjoint, non-empty sets of the graph's nodes")
    if not g.is_acyclic():
        raise ValueError("identification needs an acyclic graph")
    d = _ancestors_within(g, ys, nodes - xs)
    for s in _districts_within(g, d):
        failed = _identify(g, s, _district_holding(g, nodes, s))
        if failed is not None:
            return failed, s
    return None


def identifiable(g: CausalGraph, x: str | Iterable[str], y: str | Iterable[str]) -> bool:
    """Whether ``P(y | do(x))`` is identifiable from the observational distribution of ``g``.

    Example:
        >>> bow = CausalGraph("ADMG", ("X", "Y"), frozenset({("X", "Y")}), frozenset({("X", "Y")}))
        >>> front = CausalGraph("ADMG", ("X", "M", "Y"), frozenset({("X", "M"), ("M", "Y")}),
        ...                     frozenset({("X", "Y")}))
        >>> identifiable(bow, "X", "Y"), identifiable(front, "X", "Y")
        (False, True)
    """
    return non_identifiable_pair(g, x, y) is None
