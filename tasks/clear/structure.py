"""Graph predicates of the eleven structure task types (pure functions on a :class:`CausalGraph`).

Kinship along directed edges, unshielded triples, sinks, topological orders, simple paths of the
skeleton with their marks, Markov equivalence of DAGs (skeleton and v-structures), C-forests and
C-trees; identification is :mod:`faithgrpo.tasks.clear.identification`. The semantics are listed
per type in docs/clear.md ("The eleven structure types").
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable

from faithgrpo.tasks.clear.bits import PathKey, graph_bits
from faithgrpo.verifier.graphs.model import CausalGraph, node_sort_key

__all__ = [
    "RELATIONS",
    "TRIPLE_KINDS",
    "graph_paths",
    "is_c_forest",
    "is_c_tree",
    "is_dag",
    "is_graph_path",
    "is_topological_order",
    "markov_equivalent",
    "relatives",
    "sinks",
    "skeleton",
    "triple_kind",
    "triples",
    "v_structures",
]

RELATIONS = ("parents", "children", "ancestors", "descendants")
TRIPLE_KINDS = ("chain", "fork", "v-structure")


# ---------------------------------------------------------------------------------------------
# kinship and triples (directed edges only; bi-directed edges never count)
def relatives(g: CausalGraph, relation: str, v: str) -> frozenset[str]:
    """``v``'s parents, children, ancestors or descendants; transitive ones exclude ``v`` itself."""
    if relation == "parents":
        return g.parents(v)
    if relation == "children":
        return g.children(v)
    if relation == "ancestors":
        return g.ancestors(v) - {v}
    if relation == "descendants":
        return g.descendants(v) - {v}
    raise ValueError(f"unknown relation {relation!r}")


def triple_kind(g: CausalGraph, names: Iterable[str]) -> str | None:
    """``"chain"``, ``"fork"`` or ``"v-structure"`` when the three nodes' directed edges are
    exactly two edges on two different pairs and the two ends are not joined by a directed edge
    (``X->Y->Z``, ``X<-Y->Z``, ``X->Y<-Z``); ``None`` for anything else.

    Example:
        >>> g = CausalGraph("ADMG", ("A", "B", "C"), frozenset({("A", "B"), ("C", "B")}),
        ...                 frozenset({("A", "C")}))
        >>> triple_kind(g, "CAB"), triple_kind(g, "AB")
        ('v-structure', None)
    """
    vs = frozenset(names)
    if len(vs) != 3 or not vs <= g.node_set:
        return None
    edges = [(a, b) for a, b in itertools.permutations(sorted(vs), 2) if (a, b) in g.directed]
    if len(edges) != 2 or {edges[0][0], edges[0][1]} == {edges[1][0], edges[1][1]}:
        return None
    (a, b), (c, d) = edges
    middle = ({a, b} & {c, d}).pop()
    into = sum(1 for _, head in edges if head == middle)
    return ("fork", "chain", "v-structure")[into]


@functools.lru_cache(maxsize=1024)
def triples(g: CausalGraph, kind: str) -> frozenset[frozenset[str]]:
    """Every unshielded triple of ``kind`` in ``g``, as unordered node sets."""
    nodes = sorted(g.nodes, key=node_sort_key)
    return frozenset(frozenset(t) for t in itertools.combinations(nodes, 3) if triple_kind(g, t) == kind)


def sinks(g: CausalGraph) -> frozenset[str]:
    """The nodes without a child along directed edges (the maximal root set)."""
    return frozenset(v for v in g.nodes if not g.children(v))


# ---------------------------------------------------------------------------------------------
# orders and paths
def is_topological_order(g: CausalGraph, order: Iterable[str]) -> bool:
    """Whether ``order`` lists every node once and every directed edge points forward."""
    order = tuple(order)
    if len(order) != len(g.nodes) or set(order) != g.node_set:
        return False
    rank = {v: i for i, v in enumerate(order)}
    return all(rank[a] < rank[b] for a, b in g.directed)


def _steps(g: CausalGraph, v: str) -> list[tuple[str, str]]:
    out = [("->", w) for w in g.children(v)] + [("<-", w) for w in g.parents(v)]
    out += [("<->", w) for w in g.siblings(v)]
    return sorted(out, key=lambda s: (node_sort_key(s[1]), s[0]))


def is_graph_path(g: CausalGraph, nodes: tuple[str, ...], marks: tuple[str, ...]) -> bool:
    """Whether ``nodes``/``marks`` is a simple path of the skeleton, each step an edge with that mark."""
    if len(nodes) < 2 or len(marks) != len(nodes) - 1 or len(set(nodes)) != len(nodes):
        return False
    if not set(nodes) <= g.node_set:
        return False
    return all((m, b) in _steps(g, a) for a, m, b in zip(nodes, marks, nodes[1:]))


@functools.lru_cache(maxsize=1024)
def graph_paths(g: CausalGraph, x: str, y: str, limit: int) -> tuple[PathKey, ...] | None:
    """Every simple path of the skeleton from ``x`` to ``y`` with its marks (``->``, ``<-``,
    ``<->``; a pair joined by two edges gives two paths); ``None`` when more than ``limit``.

    Depth first on bitmasks (:meth:`faithgrpo.tasks.clear.bits.graph_bits`); a node is entered only
    while ``y`` is still reachable from it off the path.
    """
    b = graph_bits(g)
    found = b.paths(b.index[x], b.index[y], backdoor=False, skeleton=True, limit=limit)
    return None if found is None else tuple(found)


# ---------------------------------------------------------------------------------------------
# Markov equivalence of DAGs
def is_dag(g: CausalGraph) -> bool:
    """No bi-directed edge and no directed cycle."""
    return not g.bidirected and g.is_acyclic()


def skeleton(g: CausalGraph) -> frozenset[frozenset[str]]:
    """The adjacent pairs of the directed edges."""
    return frozenset(frozenset(e) for e in g.directed)


def v_structures(g: CausalGraph) -> frozenset[tuple[frozenset[str], str]]:
    """Unshielded colliders ``a -> c <- b`` (``a``, ``b`` not adjacent) as ``({a, b}, c)``."""
    adj = skeleton(g)
    out = set()
    for c in g.nodes:
        for a, b in itertools.combinations(sorted(g.parents(c), key=node_sort_key), 2):
            if frozenset((a, b)) not in adj:
                out.add((frozenset((a, b)), c))
    return frozenset(out)


def markov_equivalent(g: CausalGraph, h: CausalGraph) -> bool:
    """Whether two DAGs on the same nodes have the same skeleton and the same v-structures
    (Verma & Pearl 1990)."""
    return g.node_set == h.node_set and skeleton(g) == skeleton(h) and v_structures(g) == v_structures(h)


# ---------------------------------------------------------------------------------------------
# C-forests and C-trees (Shpitser & Pearl 2006)
def is_c_forest(g: CausalGraph) -> bool:
    """All nodes form one district (joined by bi-directed edges alone) and each has at most one child."""
    return len(g.districts()) == 1 and all(len(g.children(v)) <= 1 for v in g.nodes)


def is_c_tree(g: CausalGraph) -> bool:
    """A C-forest with exactly one root (a node without children)."""
    return is_c_forest(g) and len(sinks(g)) == 1
