"""Graphical criteria over :class:`~faithgrpo.tasks.graph.CausalGraph`: separation, adjustment, paths, cycles, ATE.

Every function is pure. Node arguments accept a single name or an iterable of names; an unknown
node or an argument that makes no sense for the graph kind raises ``ValueError`` (these are
*caller* errors; code grading model output checks membership first, see
:mod:`faithgrpo.tasks.queries`). Set-validity predicates (``is_backdoor_set`` and friends) return
``False`` when the candidate set contains the treatment or outcome.

Engine: m-separation in an ADMG is d-separation in its *canonical DAG* (:func:`canonical_dag`),
where each bidirected edge ``a <-> b`` becomes a latent parent ``L -> a, L -> b`` (Richardson 2003).
The separation routines run the same linear-time algorithms networkx uses for
``is_d_separator`` / ``is_minimal_d_separator`` / ``find_minimal_d_separator`` (Bayes-ball,
Shachter 1998; van der Zander & Liśkiewicz 2020), but directly on the mixed graph's cached
adjacency: networkx's versions cost 10-100 ms per call on 40-100-node graphs, over the CALVER
latency budget. The tests check them against networkx on the canonical DAG and against brute-force
path enumeration. Backdoor and front-door criteria reduce to separation in graphs with some
outgoing edges removed (Pearl 2009, §3.3).

Paths are :class:`~faithgrpo.tasks.graph.Path` values; a path is *blocked* by ``Z`` when some
inner node is a non-collider in ``Z``, or some inner collider has neither itself nor a descendant in
``Z``; a collider is a node with arrowheads from both sides (``-> v <-``, ``-> v <->``,
``<-> v <-``, ``<-> v <->``).

Binary Bayesian networks (CPT JSON)
-----------------------------------
``cpts`` maps every variable to ``{"parents": [...], "p1": {...}}`` where ``p1`` gives
P(V = 1 | parents) keyed by the parents' values joined with commas in the listed parent order::

    {"Z": {"parents": [], "p1": {"": 0.4}},            # or "p1": 0.4
     "X": {"parents": ["Z"], "p1": {"0": 0.2, "1": 0.7}},
     "Y": {"parents": ["X", "Z"], "p1": {"0,0": 0.1, "0,1": 0.5, "1,0": 0.3, "1,1": 0.8}}}

All ``2^|parents|`` keys are required and every value lies in [0, 1].

References
----------
.. [1] J. Pearl, *Causality*, 2nd ed., Cambridge University Press, 2009 (d-separation §1.2.3,
   back-door criterion Def. 3.3.1, front-door criterion Def. 3.3.3, adjustment formula Eq. 3.19).
.. [2] T. Richardson, "Markov properties for acyclic directed mixed graphs", Scand. J. Stat. 30, 2003.
.. [3] J. Tian, A. Paz, J. Pearl, "Finding minimal d-separators", Tech. Rep. R-254, UCLA, 1998.
.. [4] R. Shachter, "Bayes-Ball: the rational pastime", UAI 1998.
.. [5] B. van der Zander, M. Liśkiewicz, "Finding minimal d-separators in linear time and
   applications", UAI 2020.
.. [6] J.-P. Pellet, A. Elisseeff, "Finding latent causes in causal networks", JMLR W&CP 6, 2008
   (Markov blanket as the collider-connected set).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import networkx as nx
import numpy as np

from faithgrpo.tasks.graph import CausalGraph, Path, node_sort_key

__all__ = [
    "MAX_ATE_VARIABLES",
    "adjusted_ate",
    "ate_certificate",
    "backdoor_candidates",
    "backdoor_paths",
    "canonical_dag",
    "d_separated",
    "directed_paths",
    "find_directed_cycle",
    "frontdoor_candidates",
    "has_directed_path",
    "interventional_ate",
    "is_backdoor_path",
    "is_backdoor_set",
    "is_collider",
    "is_d_separator",
    "is_directed_cycle",
    "is_directed_path",
    "is_frontdoor_set",
    "is_m_separator",
    "is_maximal_backdoor_set",
    "is_maximal_frontdoor_set",
    "is_mediator",
    "is_minimal_backdoor_set",
    "is_minimal_d_separator",
    "is_minimal_frontdoor_set",
    "is_minimal_m_separator",
    "is_path",
    "m_separated",
    "markov_blanket",
    "maximal_backdoor_set",
    "maximal_backdoor_sets",
    "maximal_frontdoor_set",
    "mediators",
    "minimal_backdoor_set",
    "minimal_d_separator",
    "minimal_frontdoor_set",
    "minimal_m_separator",
    "open_backdoor_path",
    "path_is_blocked",
    "simple_cycles",
    "simple_paths",
    "validate_cpts",
]

MAX_ATE_VARIABLES = 40  # einsum labels are limited to 52; 40 leaves room and bounds the work


# ---------------------------------------------------------------------------------------------
# helpers
def _nodes(g: CausalGraph, vs: str | Iterable[str], role: str) -> frozenset[str]:
    out = frozenset((vs,)) if isinstance(vs, str) else frozenset(vs)
    missing = out - g.node_set
    if missing:
        raise ValueError(
            f"{role}: unknown node(s) {sorted(missing, key=node_sort_key)}; graph nodes are {list(g.nodes)}"
        )
    return out


def _node(g: CausalGraph, v: str, role: str) -> str:
    if not isinstance(v, str) or v not in g.node_set:
        raise ValueError(f"{role}: unknown node {v!r}; graph nodes are {list(g.nodes)}")
    return v


def _require_acyclic(g: CausalGraph, what: str) -> None:
    if g.kind == "DG":
        raise ValueError(
            f"{what} is defined here for DAGs and ADMGs, not for a DG (directed graph with cycles)"
        )


def canonical_dag(g: CausalGraph) -> nx.DiGraph:
    """The canonical DAG of ``g``: each ``a <-> b`` becomes a latent ``("<->", a, b) -> a, b``.

    m-separation in ``g`` is d-separation in this DAG (Richardson 2003). Latent nodes are tuples,
    so they never collide with (string) node names. Handy for cross-checking with networkx.
    """
    _require_acyclic(g, "the canonical DAG")
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


def _reach(
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


def _separated(
    g: CausalGraph, xs: frozenset, ys: frozenset, zs: frozenset, cut: frozenset = frozenset()
) -> bool:
    if not xs or not ys:
        return True
    return not (_reach(g, xs, zs, cut) & ys)


def _minimal_parts(
    g: CausalGraph, xs: frozenset, ys: frozenset, zs: frozenset, cut: frozenset
) -> tuple[set[str], set[str], set[str]]:
    """(An(X ∪ Y), X-closure, Y-closure) inside An(X ∪ Y) given ``zs`` (moral-graph rule)."""
    anc = _ancestors_cut(g, xs | ys, cut)
    x_closure = _reach(g, xs, zs, cut, within=anc)
    y_closure = _reach(g, ys, zs, cut, within=anc)
    return anc, x_closure, y_closure


def _is_minimal(
    g: CausalGraph, xs: frozenset, ys: frozenset, zs: frozenset, cut: frozenset = frozenset()
) -> bool:
    # van der Zander & Liśkiewicz 2020: Z ⊆ An(X ∪ Y), Z separates, every z reachable from X and from Y
    anc, x_closure, y_closure = _minimal_parts(g, xs, ys, zs, cut)
    return zs <= anc and not (x_closure & ys) and zs <= (x_closure & y_closure)


def _find_minimal(
    g: CausalGraph, xs: frozenset, ys: frozenset, allowed: frozenset, cut: frozenset = frozenset()
) -> frozenset[str] | None:
    anc = _ancestors_cut(g, xs | ys, cut)
    z0 = frozenset(allowed & anc) - xs - ys
    x_closure = _reach(g, xs, z0, cut, within=anc)
    if x_closure & ys:
        return None
    z1 = z0 & x_closure
    y_closure = _reach(g, ys, z1, cut, within=anc)
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
        >>> from faithgrpo.tasks.graph import parse_graph
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
        >>> from faithgrpo.tasks.graph import parse_graph
        >>> g = parse_graph("X -> M; M <-> Y")
        >>> m_separated(g, "X", "Y", ["M"]), m_separated(g, "X", "Y")
        (False, True)
    """
    _require_acyclic(g, "m-separation")
    x, y, z = _nodes(g, xs, "X"), _nodes(g, ys, "Y"), _nodes(g, zs, "Z")
    if not x or not y:
        raise ValueError("X and Y must be non-empty")
    _check_disjoint(x, y, z)
    return _separated(g, x, y, z)


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
    _require_acyclic(g, "m-separation")
    x, y, z = _nodes(g, xs, "X"), _nodes(g, ys, "Y"), _nodes(g, zs, "Z")
    if not x or not y:
        raise ValueError("X and Y must be non-empty")
    _check_disjoint(x, y, z)
    return _is_minimal(g, x, y, z)


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
    _require_acyclic(g, "m-separation")
    x, y = _nodes(g, xs, "X"), _nodes(g, ys, "Y")
    if not x or not y:
        raise ValueError("X and Y must be non-empty")
    _check_disjoint(x, y, frozenset())
    allowed = g.node_set - x - y if restricted is None else _nodes(g, restricted, "restricted") - x - y
    return _find_minimal(g, x, y, allowed)


# ---------------------------------------------------------------------------------------------
# paths
def is_path(g: CausalGraph, path: Path) -> bool:
    """Whether ``path`` is a simple path of ``g``: >= 2 distinct nodes, every mark an edge of ``g``.

    Complexity: ``O(len(path))``.
    """
    if len(path.nodes) < 2 or len(set(path.nodes)) != len(path.nodes):
        return False
    if not set(path.nodes) <= g.node_set:
        return False
    for a, m, b in zip(path.nodes, path.marks, path.nodes[1:]):
        if m == "->" and (a, b) not in g.directed:
            return False
        if m == "<-" and (b, a) not in g.directed:
            return False
        if m == "<->" and (a, b) not in g.bidirected and (b, a) not in g.bidirected:
            return False
    return True


def is_collider(path: Path, i: int) -> bool:
    """Whether inner node ``path.nodes[i]`` has arrowheads from both sides on ``path``."""
    if not 0 < i < len(path.nodes) - 1:
        return False
    return path.marks[i - 1] in ("->", "<->") and path.marks[i] in ("<-", "<->")


def path_is_blocked(g: CausalGraph, path: Path, zs: Iterable[str] = ()) -> bool:
    """Whether ``zs`` blocks ``path`` (Pearl 2009 Def. 1.2.3; Richardson 2003 for bidirected edges).

    Definition: some inner node is a non-collider in Z, or some inner collider has neither itself
    nor a descendant in Z. Endpoints never block.

    Complexity: ``O(len(path) * (|V| + |E|))`` worst case (one descendant search per collider).

    Raises:
        ValueError: ``path`` is not a path of ``g``, or ``zs`` holds unknown nodes.
    """
    if not is_path(g, path):
        raise ValueError(f"{path} is not a path of the graph")
    z = _nodes(g, zs, "Z")
    for i in range(1, len(path.nodes) - 1):
        v = path.nodes[i]
        if is_collider(path, i):
            if v not in z and not (g.descendants(v) & z):
                return True
        elif v in z:
            return True
    return False


def simple_paths(
    g: CausalGraph,
    x: str,
    y: str,
    *,
    first_marks: Iterable[str] = ("->", "<-", "<->"),
    marks: Iterable[str] = ("->", "<-", "<->"),
    limit: int = 10_000,
) -> Iterator[Path]:
    """Yield simple paths from ``x`` to ``y`` (at most ``limit``), in a deterministic order.

    Args:
        first_marks: allowed marks on the edge at ``x``.
        marks: allowed marks on every edge (``("->",)`` gives directed paths).
        limit: stop after this many paths.

    Complexity: polynomial delay. The DFS only enters a node from which ``y`` is still reachable
    without revisiting the path (one ``O(|V| + |E|)`` search per step), so every branch it enters
    ends in a path: ``O(limit · |V| · (|V| + |E|))`` for ``limit`` paths, instead of exponential
    dead-end search on large sparse graphs.
    """
    x, y = _node(g, x, "x"), _node(g, y, "y")
    if x == y or limit <= 0:
        return
    first, allowed = frozenset(first_marks), frozenset(marks)
    nbrs = g.adjacency
    count = 0
    nodes, path_marks, on_path = [x], [], {x}
    iters = [iter([(m, b) for m, b in nbrs[x] if m in first and m in allowed])]
    while iters:
        step = next(iters[-1], None)
        if step is None:
            iters.pop()
            on_path.discard(nodes.pop())
            if path_marks:
                path_marks.pop()
            continue
        m, b = step
        if b in on_path:
            continue
        if b != y and not _reaches(nbrs, b, y, on_path, allowed):
            continue  # a dead end: no simple continuation reaches y
        if b == y:
            yield Path((*nodes, y), (*path_marks, m))
            count += 1
            if count >= limit:
                return
            continue
        nodes.append(b)
        path_marks.append(m)
        on_path.add(b)
        iters.append(iter([(m2, c) for m2, c in nbrs[b] if m2 in allowed]))


def _reaches(nbrs: Mapping, start: str, goal: str, avoid: set[str], allowed: frozenset[str]) -> bool:
    """Whether ``goal`` is reachable from ``start`` along ``allowed`` marks without entering ``avoid``."""
    seen, stack = {start}, [start]
    while stack:
        for m, w in nbrs[stack.pop()]:
            if m not in allowed or w in seen or w in avoid:
                continue
            if w == goal:
                return True
            seen.add(w)
            stack.append(w)
    return False


def path_exists(g: CausalGraph, x: str, y: str, *, first_marks: Iterable[str] = ("->", "<-", "<->"),
                marks: Iterable[str] = ("->", "<-", "<->")) -> bool:  # fmt: skip
    """Whether some simple path from ``x`` to ``y`` starts with one of ``first_marks`` (all marks in ``marks``).

    Any walk avoiding ``x`` after its first step contains a simple path, so this is one reachability
    search: ``O(|V| + |E|)``.
    """
    x, y = _node(g, x, "x"), _node(g, y, "y")
    allowed = frozenset(marks)
    nbrs = g.adjacency
    for m, b in nbrs[x]:
        if m in first_marks and m in allowed and (b == y or _reaches(nbrs, b, y, {x}, allowed)):
            return True
    return False


def backdoor_paths(g: CausalGraph, x: str, y: str, *, limit: int = 10_000) -> list[Path]:
    """All backdoor paths from ``x`` to ``y`` (at most ``limit``; pass ``limit + 1`` to detect truncation).

    Definition: a simple path between x and y whose edge at x has an arrowhead into x
    (``x <- ...`` or ``x <-> ...``) (Pearl 2009, Def. 3.3.1).

    Complexity: output-sensitive DFS, bounded by ``limit``.

    Example:
        >>> from faithgrpo.tasks.graph import parse_graph
        >>> [str(p) for p in backdoor_paths(parse_graph("U -> X; U -> Y; X -> Y"), "X", "Y")]
        ['X <- U -> Y']
    """
    return list(simple_paths(g, x, y, first_marks=("<-", "<->"), limit=limit))


def directed_paths(g: CausalGraph, x: str, y: str, *, limit: int = 10_000) -> list[Path]:
    """All directed paths ``x -> ... -> y`` (at most ``limit``)."""
    return list(simple_paths(g, x, y, marks=("->",), limit=limit))


def is_backdoor_path(g: CausalGraph, x: str, y: str, path: Path) -> bool:
    """Whether ``path`` (read from x to y) is a backdoor path of ``g`` from ``x`` to ``y``."""
    return is_path(g, path) and path.nodes[0] == x and path.nodes[-1] == y and path.marks[0] in ("<-", "<->")


def is_directed_path(g: CausalGraph, path: Path) -> bool:
    """Whether ``path`` is a simple path of ``g`` with every edge pointing forward (``->``)."""
    return is_path(g, path) and all(m == "->" for m in path.marks)


def has_directed_path(g: CausalGraph, x: str, y: str) -> bool:
    """Whether a directed path of length >= 1 leads from ``x`` to ``y`` (does do(x) affect y structurally).

    For ``x == y`` this says whether x lies on a directed cycle. Complexity ``O(|V| + |E|)``.
    """
    return _node(g, y, "y") in g.descendants(_node(g, x, "x"))


# ---------------------------------------------------------------------------------------------
# adjustment
def backdoor_candidates(g: CausalGraph, x: str, y: str) -> frozenset[str]:
    """Nodes allowed in a backdoor set for (x, y): all nodes except x, y and descendants of x."""
    x, y = _node(g, x, "treatment"), _node(g, y, "outcome")
    return g.node_set - g.descendants(x) - {x, y}


def is_backdoor_set(g: CausalGraph, x: str, y: str, zs: Iterable[str]) -> bool:
    """Whether ``zs`` satisfies the backdoor criterion relative to (x, y).

    Definition (Pearl 2009, Def. 3.3.1; m-separation form for ADMGs): x, y not in Z, no node of Z
    is a descendant of x, and Z blocks every backdoor path from x to y. Computed as
    ``x ⊥ y | Z`` in the graph with the edges out of x removed, which has exactly the backdoor
    paths of ``g`` and, given Z ∩ De(x) = ∅, the same open colliders.

    Complexity: ``O(|V| + |E|)``.

    Raises:
        ValueError: unknown nodes, x == y, or a DG.

    Example:
        >>> from faithgrpo.tasks.graph import parse_graph
        >>> g = parse_graph("U -> X; U -> Y; X -> M -> Y")
        >>> is_backdoor_set(g, "X", "Y", {"U"}), is_backdoor_set(g, "X", "Y", {"U", "M"})
        (True, False)
    """
    _require_acyclic(g, "the backdoor criterion")
    x, y = _node(g, x, "treatment"), _node(g, y, "outcome")
    if x == y:
        raise ValueError("treatment and outcome must differ")
    z = _nodes(g, zs, "Z")
    if x in z or y in z or z & g.descendants(x):
        return False
    return _separated(g, frozenset((x,)), frozenset((y,)), z, cut=frozenset((x,)))


def open_backdoor_path(
    g: CausalGraph, x: str, y: str, zs: Iterable[str], *, limit: int = 10_000
) -> Path | None:
    """A backdoor path from x to y that ``zs`` leaves open (a witness for a failed criterion), or ``None``.

    Scans at most ``limit`` backdoor paths.
    """
    z = _nodes(g, zs, "Z") - {x, y}
    for p in simple_paths(g, x, y, first_marks=("<-", "<->"), limit=limit):
        if not path_is_blocked(g, p, z):
            return p
    return None


def is_minimal_backdoor_set(g: CausalGraph, x: str, y: str, zs: Iterable[str]) -> bool:
    """Whether ``zs`` is a backdoor set for (x, y) and no proper subset of it is.

    Subsets of a backdoor set contain no descendant of x either, so this is minimal separation of x
    and y in the graph with x's outgoing edges removed (Tian, Paz & Pearl 1998).

    Complexity: ``O(|V| + |E|)``.
    """
    if not is_backdoor_set(g, x, y, zs):
        return False
    z = _nodes(g, zs, "Z")
    return _is_minimal(g, frozenset((x,)), frozenset((y,)), z, cut=frozenset((x,)))


def minimal_backdoor_set(g: CausalGraph, x: str, y: str) -> frozenset[str] | None:
    """One minimal backdoor set for (x, y), or ``None`` when no backdoor set exists.

    Complexity: ``O(|V| + |E|)``.
    """
    allowed = backdoor_candidates(g, x, y)
    _require_acyclic(g, "the backdoor criterion")
    return _find_minimal(g, frozenset((x,)), frozenset((y,)), allowed, cut=frozenset((x,)))


def maximal_backdoor_set(g: CausalGraph, x: str, y: str) -> frozenset[str] | None:
    """The maximal backdoor set for (x, y) in a DAG, or ``None`` when none exists.

    Definition: a backdoor set with no proper superset that is one. In a DAG it is unique: every
    backdoor path starts ``x <- p`` with p a non-collider; if y is not a parent of x, every such p is
    a non-descendant of x, so the set of *all* candidates (nodes other than x, y and De(x)) blocks
    every backdoor path; if y is a parent of x the path ``x <- y`` cannot be blocked at all. In ADMGs
    maximal sets need not be unique (a backdoor path may start ``x <-> p`` with p a collider), so
    this raises ``ValueError`` there; use :func:`maximal_backdoor_sets`.

    Complexity: ``O(|V| + |E|)``.
    """
    if g.kind != "DAG":
        raise ValueError(
            f"the maximal backdoor set is unique only in DAGs, got {g.kind}; use maximal_backdoor_sets"
        )
    allowed = backdoor_candidates(g, x, y)
    return allowed if is_backdoor_set(g, x, y, allowed) else None


def is_maximal_backdoor_set(g: CausalGraph, x: str, y: str, zs: Iterable[str]) -> bool:
    """Whether ``zs`` is a backdoor set for (x, y) with no proper superset that is one (DAG or ADMG).

    One-node additions suffice: Z is maximal iff it is valid and Z ∪ {v} is not, for every
    candidate v ∉ Z (:func:`backdoor_candidates`). Proof (on the canonical DAG with x's outgoing
    edges removed, where S ⊆ R is valid iff S separates x and y in M(S), the moral graph of the
    ancestral set A(S) = An({x, y} ∪ S), by Lauritzen's criterion): let Z ⊂ W ⊆ R both be valid. If some v ∈ W ∖ Z lies in A(Z), then
    A(Z ∪ {v}) = A(Z) and Z ∪ {v} contains the cut Z of M(Z). Otherwise take v ∈ W ∖ Z with no other
    node of W ∖ Z among its ancestors; a connecting path of M(Z ∪ {v}) avoiding Z ∪ {v} meets no node
    of W (those in A(Z ∪ {v}) are Z and v) and is a path of M(W) ⊇ M(Z ∪ {v}), contradicting W. So
    Z ∪ {v} is valid either way. The tests check this against brute force over all supersets on
    thousands of random DAGs and ADMGs. In a DAG this is Z = :func:`maximal_backdoor_set`.

    Complexity: ``O(|R| (|V| + |E|))``.
    """
    if not is_backdoor_set(g, x, y, zs):
        return False
    z = _nodes(g, zs, "Z")
    return not any(is_backdoor_set(g, x, y, z | {v}) for v in backdoor_candidates(g, x, y) - z)


def _natural(z: frozenset[str]) -> tuple:
    return (len(z), [node_sort_key(v) for v in sorted(z, key=node_sort_key)])


def maximal_backdoor_sets(
    g: CausalGraph, x: str, y: str, *, limit: int = 64, max_checks: int = 4_096
) -> list[frozenset[str]]:
    """Maximal backdoor sets for (x, y) (DAG or ADMG), smallest first, then natural order.

    Exhaustive (every maximal set) when the candidates have at most ``max_checks`` subsets;
    otherwise the maximal sets grown from :func:`minimal_backdoor_set`, ∅ and each single candidate
    (those that are backdoor sets) by adding the first candidate (natural order) that keeps the set
    valid, until none does (maximal by :func:`is_maximal_backdoor_set`). At most ``limit`` sets. In
    a DAG the answer is ``[maximal_backdoor_set(g, x, y)]`` (or ``[]``).

    Complexity: exhaustive ``O(2^|R| (|V| + |E| + |R|))``, else ``O(|R|^3 (|V| + |E|))``.
    """
    allowed = backdoor_candidates(g, x, y)
    items = sorted(allowed, key=node_sort_key)
    found: set[frozenset[str]] = set()
    if len(items) < 63 and 2 ** len(items) <= max_checks:
        valid = {
            frozenset(combo)
            for k in range(len(items) + 1)
            for combo in itertools.combinations(items, k)
            if is_backdoor_set(g, x, y, combo)
        }
        # maximal: no valid one-node superset (enough, see is_maximal_backdoor_set)
        found = {z for z in valid if not any(z | {v} in valid for v in allowed - z)}
    else:
        smallest = minimal_backdoor_set(g, x, y)
        seeds = [] if smallest is None else [smallest, frozenset(), *(frozenset((v,)) for v in items)]
        for z in seeds:
            if not is_backdoor_set(g, x, y, z):
                continue
            grown = True
            while grown:
                grown = False
                for v in sorted(allowed - z, key=node_sort_key):
                    if is_backdoor_set(g, x, y, z | {v}):
                        z, grown = z | {v}, True
                        break
            found.add(z)
    return sorted(found, key=_natural)[:limit]


def is_frontdoor_set(g: CausalGraph, x: str, y: str, zs: Iterable[str]) -> bool:
    """Whether ``zs`` satisfies Pearl's front-door criterion relative to (x, y).

    Definition (Pearl 2009, Def. 3.3.3): x, y not in Z and
    (i) Z intercepts every directed path from x to y;
    (ii) there is no unblocked backdoor path from x to any node of Z (x ⊥ Z given ∅ with x's
    outgoing edges removed);
    (iii) every backdoor path from a node z of Z to y is blocked by {x} (z ⊥ y | x with z's outgoing
    edges removed; (ii) rules out z being an ancestor of x, so removing z's edges does not change
    which colliders {x} opens).
    Taken literally, ``Z = ∅`` qualifies exactly when x has no directed path to y. In ADMGs
    separation is m-separation. Conditions (ii) and (iii) hold member by member, so the valid sets
    are the subsets of :func:`frontdoor_candidates` that satisfy (i).

    Complexity: ``O(|Z| (|V| + |E|))``.

    Example:
        >>> from faithgrpo.tasks.graph import parse_graph
        >>> g = parse_graph("X -> T -> Y; X <-> Y")  # smoking -> tar -> cancer, hidden genotype
        >>> is_frontdoor_set(g, "X", "Y", {"T"})
        True
    """
    _require_acyclic(g, "the front-door criterion")
    x, y = _node(g, x, "treatment"), _node(g, y, "outcome")
    if x == y:
        raise ValueError("treatment and outcome must differ")
    z = _nodes(g, zs, "Z")
    if x in z or y in z:
        return False
    if not _intercepts(g, x, y, z):
        return False
    if not z:
        return True
    # (ii)
    if not _separated(g, frozenset((x,)), z, frozenset(), cut=frozenset((x,))):
        return False
    # (iii)
    return all(
        _separated(g, frozenset((v,)), frozenset((y,)), frozenset((x,)), cut=frozenset((v,))) for v in z
    )


def _intercepts(g: CausalGraph, x: str, y: str, z: frozenset[str]) -> bool:
    """Condition (i): every directed path x -> ... -> y has an inner node in ``z`` (BFS avoiding z)."""
    seen, stack = {x}, [x]
    while stack:
        for c in g.children(stack.pop()):
            if c == y:
                return False
            if c not in z and c not in seen:
                seen.add(c)
                stack.append(c)
    return True


def frontdoor_candidates(g: CausalGraph, x: str, y: str) -> frozenset[str]:
    """Nodes v ∉ {x, y} that satisfy front-door conditions (ii) and (iii) on their own.

    (ii) and (iii) are statements about each member separately (no open backdoor path x … v given
    ∅; every backdoor path v … y blocked by {x}), so a set is a front-door set iff it is a subset of
    these candidates that intercepts every directed path from x to y (condition (i)).

    Complexity: ``O(|V| (|V| + |E|))``.
    """
    _require_acyclic(g, "the front-door criterion")
    x, y = _node(g, x, "treatment"), _node(g, y, "outcome")
    if x == y:
        raise ValueError("treatment and outcome must differ")
    fails_ii = _reach(g, frozenset((x,)), frozenset(), frozenset((x,)))
    return frozenset(
        v
        for v in g.node_set - {x, y} - fails_ii
        if _separated(g, frozenset((v,)), frozenset((y,)), frozenset((x,)), cut=frozenset((v,)))
    )


def is_minimal_frontdoor_set(g: CausalGraph, x: str, y: str, zs: Iterable[str]) -> bool:
    """Whether ``zs`` is a front-door set for (x, y) and no proper subset of it is.

    Removing z from a valid Z keeps conditions (ii) and (iii) (they hold member by member), so
    Z ∖ {z} fails only by condition (i): a directed path x -> ... -> y that avoids Z ∖ {z}. Since
    (i) is upward closed, a valid proper subset exists iff some Z ∖ {z} is valid. Hence Z is minimal
    iff it is valid and, for each z ∈ Z, some directed path x -> ... -> y meets Z only at z (the
    certificate CALVER asks for). ``Z = ∅`` is minimal whenever it is valid (no directed path).
    The tests check this against brute force over all subsets.

    Complexity: ``O(|Z| (|V| + |E|))``.
    """
    if not is_frontdoor_set(g, x, y, zs):
        return False
    z = _nodes(g, zs, "Z")
    return not any(_intercepts(g, x, y, z - {v}) for v in z)


def maximal_frontdoor_set(g: CausalGraph, x: str, y: str) -> frozenset[str] | None:
    """The maximal front-door set for (x, y), or ``None`` when no front-door set exists.

    Definition: a front-door set with no proper superset that is one. It is unique: the valid
    sets are the subsets of :func:`frontdoor_candidates` that intercept every directed path x … y,
    and intercepting is upward closed, so if any valid set exists the candidates themselves are one
    and contain all others. A node v outside it cannot be added because v alone violates (ii) (an
    open backdoor path x … v given ∅) or (iii) (an open backdoor path v … y given {x}).

    Complexity: ``O(|V| (|V| + |E|))``.
    """
    allowed = frontdoor_candidates(g, x, y)
    return allowed if _intercepts(g, x, y, allowed) else None


def is_maximal_frontdoor_set(g: CausalGraph, x: str, y: str, zs: Iterable[str]) -> bool:
    """Whether ``zs`` is the maximal front-door set for (x, y) (see :func:`maximal_frontdoor_set`)."""
    best = maximal_frontdoor_set(g, x, y)
    return best is not None and _nodes(g, zs, "Z") == best


def minimal_frontdoor_set(g: CausalGraph, x: str, y: str) -> frozenset[str] | None:
    """One minimal front-door set for (x, y), or ``None`` when none exists.

    Starts from :func:`maximal_frontdoor_set` and drops each member (natural order) whose removal
    still intercepts every directed path; a member kept was needed then and stays needed in the
    smaller final set, so the result is minimal (:func:`is_minimal_frontdoor_set`).

    Complexity: ``O(|V| (|V| + |E|))``.
    """
    z = maximal_frontdoor_set(g, x, y)
    if z is None:
        return None
    for v in sorted(z, key=node_sort_key):
        if _intercepts(g, x, y, z - {v}):
            z = z - {v}
    return z


# ---------------------------------------------------------------------------------------------
# mediators, cycles, Markov blanket
def mediators(g: CausalGraph, x: str, y: str) -> frozenset[str]:
    """Nodes m ∉ {x, y} on some directed path x -> ... -> m -> ... -> y (acyclic graphs).

    In an acyclic graph a directed path x -> m joined to a directed path m -> y is always simple, so
    this is De(x) ∩ An(y). Complexity ``O(|V| + |E|)``.
    """
    _require_acyclic(g, "a mediator")
    x, y = _node(g, x, "treatment"), _node(g, y, "outcome")
    return (g.descendants(x) & g.ancestors(y)) - {x, y}


def is_mediator(g: CausalGraph, x: str, y: str, m: str) -> bool:
    """Whether ``m`` lies on a directed path from ``x`` to ``y`` (m ∉ {x, y}); see :func:`mediators`."""
    return _node(g, m, "mediator") in mediators(g, x, y)


def find_directed_cycle(g: CausalGraph) -> tuple[str, ...] | None:
    """One directed cycle ``(v0, ..., vk)`` (closed by ``vk -> v0``), or ``None``. ``O(|V| + |E|)`` DFS."""
    return g.find_cycle()


def is_directed_cycle(g: CausalGraph, seq: Iterable[str]) -> bool:
    """Whether ``seq`` lists a simple directed cycle of ``g``.

    ``seq`` is ``[v0, ..., vk]`` with edges ``v0 -> v1 -> ... -> vk -> v0``; a closing repeat of
    ``v0`` at the end is accepted. Nodes must be distinct and number at least 2 (no self loops).
    Unknown nodes give ``False``. Complexity ``O(len(seq))``.
    """
    nodes = list(seq)
    if len(nodes) >= 2 and nodes[0] == nodes[-1]:
        nodes = nodes[:-1]
    if len(nodes) < 2 or len(set(nodes)) != len(nodes):
        return False
    return all((a, b) in g.directed for a, b in zip(nodes, nodes[1:] + nodes[:1]))


def simple_cycles(g: CausalGraph, *, limit: int = 10_000) -> list[tuple[str, ...]]:
    """Up to ``limit`` simple directed cycles, each rotated to start at its smallest node, sorted.

    Complexity: Johnson's algorithm via networkx, ``O((|V| + |E|)(c + 1))`` for c cycles.
    """
    out = []
    for cyc in itertools.islice(nx.simple_cycles(g.to_networkx()), limit):
        i = min(range(len(cyc)), key=lambda k: node_sort_key(cyc[k]))
        out.append(tuple(cyc[i:] + cyc[:i]))
    return sorted(out, key=lambda c: [node_sort_key(v) for v in c])


def markov_blanket(g: CausalGraph, v: str) -> frozenset[str]:
    """The Markov blanket of ``v``: nodes joined to v by a path whose inner nodes are all colliders.

    In a DAG this is parents ∪ children ∪ the children's other parents; in an ADMG it adds the
    district and the parents of colliders reached through bidirected edges (Pellet & Elisseeff
    2008, ref. [6]). Complexity ``O(|V| + |E|)``.

    Example:
        >>> from faithgrpo.tasks.graph import parse_graph
        >>> sorted(markov_blanket(parse_graph("A -> V -> C; B -> C; C -> D"), "V"))
        ['A', 'B', 'C']
    """
    v = _node(g, v, "node")
    found: set[str] = set()
    # state: (node, arrowhead at node on the edge we arrived by); only arrowhead states continue
    seen: set[str] = {v}
    stack = []
    for m, w in g.adjacency[v]:
        found.add(w)
        if m in ("->", "<->"):
            stack.append(w)
    while stack:
        w = stack.pop()
        if w in seen:
            continue
        seen.add(w)
        for u in g.parents(w):
            found.add(u)
        for u in g.siblings(w):
            found.add(u)
            stack.append(u)
    found.discard(v)
    return frozenset(found)


# ---------------------------------------------------------------------------------------------
# binary ATE
def validate_cpts(
    cpts: Mapping[str, Any], g: CausalGraph | None = None
) -> dict[str, tuple[tuple[str, ...], dict]]:
    """Check a CPT dict (module docstring format) and return ``{v: (parents, {parent_values: p1})}``.

    With ``g`` given, every node of ``g`` needs a CPT whose parents equal ``g.parents(v)``.

    Raises:
        ValueError: naming the variable and the fix.
    """
    if not isinstance(cpts, Mapping) or not cpts:
        raise ValueError("cpts must be a non-empty dict {variable: {'parents': [...], 'p1': {...}}}")
    out: dict[str, tuple[tuple[str, ...], dict]] = {}
    for v, spec in cpts.items():
        if not isinstance(spec, Mapping) or "p1" not in spec:
            raise ValueError(f"cpts[{v!r}] must be a dict with 'parents' and 'p1'")
        parents = tuple(spec.get("parents") or ())
        raw = spec["p1"]
        if not parents and isinstance(raw, (int, float)):
            raw = {"": raw}
        if not isinstance(raw, Mapping):
            raise ValueError(f"cpts[{v!r}]['p1'] must map comma-joined parent values to P({v}=1 | parents)")
        table = {}
        for values in itertools.product((0, 1), repeat=len(parents)):
            key = ",".join(map(str, values))
            if key not in raw:
                raise ValueError(
                    f"cpts[{v!r}]['p1'] lacks key {key!r} (values of {list(parents)} joined by commas)"
                )
            p = raw[key]
            if (
                not isinstance(p, (int, float))
                or isinstance(p, bool)
                or not (0.0 <= p <= 1.0)
                or math.isnan(p)
            ):
                raise ValueError(f"cpts[{v!r}]['p1'][{key!r}] = {p!r} is not a probability in [0, 1]")
            table[values] = float(p)
        out[str(v)] = (parents, table)
    for v, (parents, _) in out.items():
        for p in parents:
            if p not in out:
                raise ValueError(f"cpts[{v!r}] lists parent {p!r} that has no CPT")
    if g is not None:
        for v in g.nodes:
            if v not in out:
                raise ValueError(f"node {v!r} has no CPT")
            if set(out[v][0]) != set(g.parents(v)):
                raise ValueError(
                    f"cpts[{v!r}] parents {sorted(out[v][0])} differ from the graph's {sorted(g.parents(v))}"
                )
    probe = CausalGraph("DAG", tuple(out), frozenset((p, v) for v, (ps, _) in out.items() for p in ps))
    cycle = probe.find_cycle()
    if cycle is not None:
        raise ValueError(f"cpts parents form a cycle {' -> '.join((*cycle, cycle[0]))}")
    return out


def _joint(table: dict, targets: list[str], drop: str | None = None) -> np.ndarray:
    """P(targets) (or the truncated-factorisation sum with ``drop``'s factor removed) via einsum."""
    # ancestral closure: the marginal of an ancestral set only needs that set's factors
    closure, stack = set(), list(targets)
    while stack:
        v = stack.pop()
        if v not in closure:
            closure.add(v)
            stack.extend(table[v][0])
    if len(closure) > MAX_ATE_VARIABLES:
        raise ValueError(f"ATE needs {len(closure)} variables, over the cap of {MAX_ATE_VARIABLES}")
    order = sorted(closure, key=node_sort_key)
    label = {v: i for i, v in enumerate(order)}
    operands: list[Any] = []
    # A fixed factor order: einsum's float sums depend on it, and set order varies with PYTHONHASHSEED.
    for v in order:
        if v == drop:
            continue
        parents, probs = table[v]
        factor = np.empty((2,) * (len(parents) + 1))
        for values, p in probs.items():
            factor[(*values, 1)] = p
            factor[(*values, 0)] = 1.0 - p
        operands += [factor, [label[p] for p in parents] + [label[v]]]
    if drop is not None and drop in closure:
        operands += [np.ones(2), [label[drop]]]  # keeps the dropped variable as a free axis
    return np.einsum(*operands, [label[t] for t in targets], optimize="greedy")


def adjusted_ate(
    cpts: Mapping[str, Any], x: str, y: str, zs: Iterable[str] = (), *, eps: float = 1e-12
) -> float:
    """The adjustment-formula ATE of binary x on binary y given z, from a binary Bayesian network.

    Definition (Pearl 2009, Eq. 3.19):
    ``ψ = Σ_z [P(y=1 | x=1, z) − P(y=1 | x=0, z)] P(z)``, with the observational distribution given
    by the CPTs (module docstring). It equals the causal effect when z is a backdoor set.

    Complexity: variable elimination (``numpy.einsum``) over the ancestral closure of {x, y} ∪ z;
    at most :data:`MAX_ATE_VARIABLES` variables.

    Raises:
        ValueError: malformed CPTs, unknown variables, x == y, x or y in z, or a positivity violation
            (some z with P(z) > eps has P(x=a, z) <= eps).

    Example:
        >>> cpts = {"X": {"parents": [], "p1": 0.5}, "Y": {"parents": ["X"], "p1": {"0": 0.2, "1": 0.7}}}
        >>> round(adjusted_ate(cpts, "X", "Y"), 6)
        0.5
    """
    table = validate_cpts(cpts)
    z = sorted(set(zs), key=node_sort_key)
    for v in (x, y, *z):
        if v not in table:
            raise ValueError(f"variable {v!r} has no CPT")
    if x == y or x in z or y in z:
        raise ValueError("x, y and z must be distinct (x and y not in z)")
    joint = _joint(table, [x, y, *z])  # axes: x, y, z...
    p_xz = joint.sum(axis=1)  # x, z...
    p_z = p_xz.sum(axis=0)
    psi = 0.0
    for zv in itertools.product((0, 1), repeat=len(z)):
        pz = float(p_z[zv]) if z else 1.0
        if pz <= eps:
            continue
        den1, den0 = float(p_xz[(1, *zv)]), float(p_xz[(0, *zv)])
        if den1 <= eps or den0 <= eps:
            where = ", ".join(f"{n}={val}" for n, val in zip(z, zv)) or "the empty set"
            raise ValueError(f"positivity fails: P({x}=a, {where}) = 0 for some a")
        psi += (float(joint[(1, 1, *zv)]) / den1 - float(joint[(0, 1, *zv)]) / den0) * pz
    return psi


def interventional_ate(cpts: Mapping[str, Any], x: str, y: str) -> float:
    """``P(y=1 | do(x=1)) − P(y=1 | do(x=0))`` by the truncated factorisation (no adjustment set needed).

    Definition (Pearl 2009, Eq. 3.10): drop x's CPT, fix x, marginalise. Needs no positivity.
    Complexity as :func:`adjusted_ate`.
    """
    table = validate_cpts(cpts)
    for v in (x, y):
        if v not in table:
            raise ValueError(f"variable {v!r} has no CPT")
    if x == y:
        raise ValueError("x and y must differ")
    f = _joint(table, [x, y], drop=x)  # f[x, y] = P(y | do(x)); rows agree when x is no ancestor of y
    return float(f[1, 1] - f[0, 1])


def ate_certificate(
    g: CausalGraph,
    cpts: Mapping[str, Any],
    x: str,
    y: str,
    zs: Iterable[str],
    threshold: float,
    margin: float = 0.0,
) -> tuple[bool, str]:
    """The strict certificate for deciding ``ψ > threshold`` by backdoor adjustment on ``zs``.

    Passes when: the graph is a DAG whose CPTs match it; x ∉ Z and y ∉ Z; Z has no descendant of
    x; Z blocks every backdoor path; positivity holds; and ``|ψ − threshold| > margin``. ``zs``
    may come from model output: unknown nodes fail with a reason instead of raising.

    Returns:
        ``(ok, reason)``; the reason names the failed condition, or gives ψ and the decision.

    Raises:
        ValueError: malformed CPTs (or CPTs that disagree with the graph), unknown x/y, or a
            negative margin. These are problem-construction errors, not answer errors.

    Example:
        >>> from faithgrpo.tasks.graph import parse_graph
        >>> g = parse_graph("X -> Y")
        >>> cpts = {"X": {"parents": [], "p1": 0.5}, "Y": {"parents": ["X"], "p1": {"0": 0.2, "1": 0.7}}}
        >>> ate_certificate(g, cpts, "X", "Y", [], threshold=0.3, margin=0.05)
        (True, 'ψ = 0.5000 > threshold 0.3 (margin 0.05)')
    """
    if margin < 0:
        raise ValueError(f"margin must be >= 0, got {margin}")
    x, y = _node(g, x, "treatment"), _node(g, y, "outcome")
    if g.kind != "DAG":
        return False, f"ATE certificates need a DAG, got {g.kind}"
    validate_cpts(cpts, g)
    z = frozenset(zs)
    unknown = z - g.node_set
    if unknown:
        return False, f"Z has unknown node(s) {sorted(unknown, key=node_sort_key)}"
    if x in z:
        return False, f"treatment {x} is in Z"
    if y in z:
        return False, f"outcome {y} is in Z"
    desc = z & g.descendants(x)
    if desc:
        return False, f"Z contains descendant(s) of {x}: {sorted(desc, key=node_sort_key)}"
    if not is_backdoor_set(g, x, y, z):
        witness = open_backdoor_path(g, x, y, z)
        return (
            False,
            f"backdoor path {witness} is open given Z" if witness else "Z leaves a backdoor path open",
        )
    try:
        psi = adjusted_ate(cpts, x, y, z)
    except ValueError as exc:
        return False, str(exc)
    if abs(psi - threshold) <= margin:
        return False, f"ψ = {psi:.4f} is within margin {margin} of threshold {threshold}"
    side = ">" if psi > threshold else "<"
    return True, f"ψ = {psi:.4f} {side} threshold {threshold} (margin {margin})"
