"""d-separation and m-separation over :class:`~faithgrpo.verifier.graphs.model.CausalGraph`, with minimal separators.

Definitions: ``Z`` d-separates X and Y in a DAG when every path between them is blocked by Z (Pearl
2009, Def. 1.2.3); m-separation is the same for ADMGs, colliders read from arrowheads (Richardson
2003), i.e. d-separation in the canonical DAG (:func:`canonical_dag`). A minimal separator is one
with no proper subset that separates. Also home to the node-argument helpers and the linear-time
reachability engine (Bayes-ball) that the rest of :mod:`faithgrpo.verifier.graphs.criteria` builds on.

The graph criteria as a whole, their conventions and complexity are described in
:mod:`faithgrpo.verifier.graphs.criteria`; the package face :mod:`faithgrpo.verifier.graphs` exposes
the public names of all four modules.

References
----------
.. [1] J. Pearl, *Causality*, 2nd ed., Cambridge University Press, 2009 (d-separation §1.2.3).
.. [2] T. Richardson, "Markov properties for acyclic directed mixed graphs", Scand. J. Stat. 30, 2003.
.. [3] J. Tian, A. Paz, J. Pearl, "Finding minimal d-separators", Tech. Rep. R-254, UCLA, 1998.
.. [4] R. Shachter, "Bayes-Ball: the rational pastime", UAI 1998.
.. [5] B. van der Zander, M. Liśkiewicz, "Finding minimal d-separators in linear time and
   applications", UAI 2020.
"""

from __future__ import annotations

from collections.abc import Iterable

import networkx as nx

from faithgrpo.verifier.graphs.model import CausalGraph, node_sort_key


# ---------------------------------------------------------------------------------------------
# helpers
def checked_nodes(g: CausalGraph, vs: str | Iterable[str], role: str) -> frozenset[str]:
    """``vs`` (one node or several) as a set, raising ``ValueError`` naming ``role`` for unknown nodes."""
    out = frozenset((vs,)) if isinstance(vs, str) else frozenset(vs)
    missing = out - g.node_set
    if missing:
        raise ValueError(
            f"{role}: unknown node(s) {sorted(missing, key=node_sort_key)}; graph nodes are {list(g.nodes)}"
        )
    return out


def checked_node(g: CausalGraph, v: str, role: str) -> str:
    """``v``, raising ``ValueError`` naming ``role`` when it is not a node of ``g``."""
    if not isinstance(v, str) or v not in g.node_set:
        raise ValueError(f"{role}: unknown node {v!r}; graph nodes are {list(g.nodes)}")
    return v


def require_acyclic(g: CausalGraph, what: str) -> None:
    """Raise ``ValueError`` when ``g`` is a DG: ``what`` is defined for DAGs and ADMGs only."""
    if g.kind == "DG":
        raise ValueError(
            f"{what} is defined here for DAGs and ADMGs, not for a DG (directed graph with cycles)"
        )


def canonical_dag(g: CausalGraph) -> nx.DiGraph:
    """The canonical DAG of ``g``: each ``a <-> b`` becomes a latent ``("<->", a, b) -> a, b``.

    m-separation in ``g`` is d-separation in this DAG (Richardson 2003). Latent nodes are tuples,
    so they never collide with (string) node names. Handy for cross-checking with networkx.
    """
    require_acyclic(g, "the canonical DAG")
    dag = g.to_networkx()
    for a, b in sorted(g.bidirected):
        latent = ("<->", a, b)
        dag.add_edge(latent, a)
        dag.add_edge(latent, b)
    return dag


def _edge_ok(v: str, mark: str, w: str, cut: frozenset[str]) -> bool:
    """Whether edge (v, mark, w) survives removing the directed edges out of ``cut``."""
    return not ((mark == "->" and v in cut) or (mark == "<-" and w in cut))


def _ancestors_cut(g: CausalGraph, vs: Iterable[str], cut: frozenset[str]) -> set[str]:
    """Ancestors of ``vs`` (with ``vs``) in ``g`` minus the directed edges out of ``cut``."""
    seen = set(vs)
    stack = list(seen)
    parents = g._parents  # direct access: callers have checked the nodes
    while stack:
        v = stack.pop()
        for p in parents[v]:
            if p not in cut and p not in seen:
                seen.add(p)
                stack.append(p)
    return seen


def reachable(
    g: CausalGraph,
    sources: frozenset[str],
    zs: frozenset[str],
    cut: frozenset[str],
    *,
    within: set[str] | None = None,
) -> set[str]:
    """Nodes reachable from ``sources`` by an m-connecting walk given ``zs`` (Bayes-ball).

    States are (node, arrived-by-an-arrowhead). Default rule (Shachter 1998): a collider passes
    iff it is in An(Z), a non-collider iff it is not in Z. With ``within`` (an ancestral set that
    contains X, Y and Z) the walk stays inside it and uses the moral-graph rule of van der Zander &
    Liśkiewicz (2020): a node outside Z passes any way, a node in Z only as a collider.
    Complexity ``O(|V| + |E|)``.
    """
    adj = g.adjacency
    an_z = _ancestors_cut(g, zs, cut) if within is None else None
    seen: set[tuple[str, bool]] = set()
    reached: set[str] = set()
    stack: list[tuple[str, bool]] = []
    for x in sources:
        for mark, w in adj[x]:
            if _edge_ok(x, mark, w, cut) and (within is None or w in within):
                stack.append((w, mark != "<-"))
    while stack:
        state = stack.pop()
        if state in seen:
            continue
        seen.add(state)
        v, head = state
        reached.add(v)
        if v in sources:
            continue  # its own departures were queued at the start
        in_z = v in zs
        for mark, w in adj[v]:
            if not _edge_ok(v, mark, w, cut) or (within is not None and w not in within):
                continue
            if head and mark != "->":  # arrowheads on both sides: v is a collider
                passes = in_z if an_z is None else v in an_z
            else:
                passes = not in_z
            if passes:
                stack.append((w, mark != "<-"))
    return reached


def separated(
    g: CausalGraph, xs: frozenset, ys: frozenset, zs: frozenset, cut: frozenset = frozenset()
) -> bool:
    """Whether ``zs`` m-separates ``xs`` from ``ys`` (edges in ``cut`` removed)."""
    if not xs or not ys:
        return True
    return not (reachable(g, xs, zs, cut) & ys)


def _minimal_parts(
    g: CausalGraph, xs: frozenset, ys: frozenset, zs: frozenset, cut: frozenset
) -> tuple[set[str], set[str], set[str]]:
    """(An(X ∪ Y), X-closure, Y-closure) inside An(X ∪ Y) given ``zs`` (moral-graph rule)."""
    anc = _ancestors_cut(g, xs | ys, cut)
    x_closure = reachable(g, xs, zs, cut, within=anc)
    y_closure = reachable(g, ys, zs, cut, within=anc)
    return anc, x_closure, y_closure


def is_minimal_separator(
    g: CausalGraph, xs: frozenset, ys: frozenset, zs: frozenset, cut: frozenset = frozenset()
) -> bool:
    # van der Zander & Liśkiewicz 2020: Z ⊆ An(X ∪ Y), Z separates, every z reachable from X and from Y
    """Whether ``zs`` is a minimal m-separator of ``xs`` and ``ys`` (edges in ``cut`` removed)."""
    anc, x_closure, y_closure = _minimal_parts(g, xs, ys, zs, cut)
    return zs <= anc and not (x_closure & ys) and zs <= (x_closure & y_closure)


def find_minimal_separator(
    g: CausalGraph, xs: frozenset, ys: frozenset, allowed: frozenset, cut: frozenset = frozenset()
) -> frozenset[str] | None:
    """A minimal m-separator of ``xs`` and ``ys`` inside ``allowed``, or None when none exists."""
    anc = _ancestors_cut(g, xs | ys, cut)
    z0 = frozenset(allowed & anc) - xs - ys
    x_closure = reachable(g, xs, z0, cut, within=anc)
    if x_closure & ys:
        return None
    z1 = z0 & x_closure
    y_closure = reachable(g, ys, z1, cut, within=anc)
    return frozenset(z1 & y_closure)


def _check_disjoint(xs: frozenset, ys: frozenset, zs: frozenset) -> None:
    for a, b, name in ((xs, ys, "X and Y"), (xs, zs, "X and Z"), (ys, zs, "Y and Z")):
        if a & b:
            raise ValueError(f"{name} must be disjoint; they share {sorted(a & b, key=node_sort_key)}")


# ---------------------------------------------------------------------------------------------
# separation
def d_separated(
    g: CausalGraph, xs: str | Iterable[str], ys: str | Iterable[str], zs: Iterable[str] = ()
) -> bool:
    """Whether ``zs`` d-separates ``xs`` from ``ys`` in a DAG.

    Definition: every path between a node of X and a node of Y is blocked by Z (Pearl 2009, Def.
    1.2.3). X, Y, Z must be pairwise disjoint and X, Y non-empty.

    Complexity: ``O(|V| + |E|)`` (networkx's linear-time reachability).

    Raises:
        ValueError: unknown nodes, overlapping or empty sets, or a graph that is not a DAG (use
            :func:`m_separated` for ADMGs).

    Example:
        >>> from faithgrpo.verifier.graphs.edges import parse_graph
        >>> g = parse_graph("X -> M -> Y")
        >>> d_separated(g, "X", "Y", ["M"]), d_separated(g, "X", "Y")
        (True, False)
    """
    if g.kind != "DAG":
        raise ValueError(f"d-separation needs a DAG, got {g.kind}; use m_separated for ADMGs")
    return m_separated(g, xs, ys, zs)


def m_separated(
    g: CausalGraph, xs: str | Iterable[str], ys: str | Iterable[str], zs: Iterable[str] = ()
) -> bool:
    """Whether ``zs`` m-separates ``xs`` from ``ys`` in a DAG or ADMG.

    Definition: every path (directed and bidirected edges) between X and Y is blocked by Z, with
    colliders read from arrowheads (Richardson 2003). Computed as d-separation in the canonical DAG
    where each bidirected edge becomes a latent common parent. On a DAG it equals d-separation.

    Complexity: ``O(|V| + |E|)``.

    Raises:
        ValueError: unknown nodes, overlapping or empty sets, or a DG.

    Example:
        >>> from faithgrpo.verifier.graphs.edges import parse_graph
        >>> g = parse_graph("X -> M; M <-> Y")
        >>> m_separated(g, "X", "Y", ["M"]), m_separated(g, "X", "Y")
        (False, True)
    """
    require_acyclic(g, "m-separation")
    x, y, z = checked_nodes(g, xs, "X"), checked_nodes(g, ys, "Y"), checked_nodes(g, zs, "Z")
    if not x or not y:
        raise ValueError("X and Y must be non-empty")
    _check_disjoint(x, y, z)
    return separated(g, x, y, z)


is_d_separator = d_separated
is_m_separator = m_separated


def is_minimal_d_separator(g: CausalGraph, xs, ys, zs) -> bool:
    """Whether ``zs`` d-separates X and Y and no proper subset of it does (DAG only).

    Complexity: ``O(|V| + |E|)`` (networkx, after Tian, Paz & Pearl 1998).
    """
    if g.kind != "DAG":
        raise ValueError(f"d-separation needs a DAG, got {g.kind}; use is_minimal_m_separator")
    return is_minimal_m_separator(g, xs, ys, zs)


def is_minimal_m_separator(g: CausalGraph, xs, ys, zs) -> bool:
    """Whether ``zs`` m-separates X and Y and no proper subset of it does (DAG or ADMG).

    Complexity: ``O(|V| + |E|)``.
    """
    require_acyclic(g, "m-separation")
    x, y, z = checked_nodes(g, xs, "X"), checked_nodes(g, ys, "Y"), checked_nodes(g, zs, "Z")
    if not x or not y:
        raise ValueError("X and Y must be non-empty")
    _check_disjoint(x, y, z)
    return is_minimal_separator(g, x, y, z)


def minimal_d_separator(
    g: CausalGraph, xs, ys, *, restricted: Iterable[str] | None = None
) -> frozenset[str] | None:
    """A minimal d-separator of X and Y (DAG only) using only ``restricted`` nodes, or ``None``."""
    if g.kind != "DAG":
        raise ValueError(f"d-separation needs a DAG, got {g.kind}; use minimal_m_separator")
    return minimal_m_separator(g, xs, ys, restricted=restricted)


def minimal_m_separator(
    g: CausalGraph, xs, ys, *, restricted: Iterable[str] | None = None
) -> frozenset[str] | None:
    """A minimal m-separator of X and Y drawn from ``restricted`` (default: all other nodes), or ``None``.

    Complexity: ``O(|V| + |E|)`` (networkx ``find_minimal_d_separator`` on the canonical DAG).
    """
    require_acyclic(g, "m-separation")
    x, y = checked_nodes(g, xs, "X"), checked_nodes(g, ys, "Y")
    if not x or not y:
        raise ValueError("X and Y must be non-empty")
    _check_disjoint(x, y, frozenset())
    allowed = g.node_set - x - y if restricted is None else checked_nodes(g, restricted, "restricted") - x - y
    return find_minimal_separator(g, x, y, allowed)
