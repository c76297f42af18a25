"""Paths, directed paths, mediators, directed cycles and Markov blankets in a :class:`~faithgrpo.verifier.graphs.model.CausalGraph`.

Definitions: a path is a :class:`~faithgrpo.verifier.graphs.edges.Path` of distinct nodes joined by edges of
the graph; it is *blocked* by ``Z`` when some inner node is a non-collider in ``Z``, or some inner
collider has neither itself nor a descendant in ``Z`` (Pearl 2009, Def. 1.2.3; Richardson 2003 for
bidirected edges). A backdoor path starts with an arrowhead into the treatment (Pearl 2009, Def.
3.3.1); a mediator lies on a directed path from treatment to outcome; the Markov blanket of v is
the set of nodes joined to v by a path whose inner nodes are all colliders (Pellet & Elisseeff 2008).

The graph criteria as a whole, their conventions and complexity are described in
:mod:`faithgrpo.verifier.graphs.criteria`; the package face :mod:`faithgrpo.verifier.graphs` exposes
the public names of all four modules.

References
----------
.. [1] J. Pearl, *Causality*, 2nd ed., Cambridge University Press, 2009 (d-separation §1.2.3,
   back-door criterion Def. 3.3.1).
.. [2] T. Richardson, "Markov properties for acyclic directed mixed graphs", Scand. J. Stat. 30, 2003.
.. [6] J.-P. Pellet, A. Elisseeff, "Finding latent causes in causal networks", JMLR W&CP 6, 2008
   (Markov blanket as the collider-connected set).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping

import networkx as nx

from faithgrpo.verifier.graphs.edges import Path
from faithgrpo.verifier.graphs.model import CausalGraph, node_sort_key
from faithgrpo.verifier.graphs.separation import checked_node, checked_nodes, require_acyclic


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
    z = checked_nodes(g, zs, "Z")
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
    x, y = checked_node(g, x, "x"), checked_node(g, y, "y")
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
    x, y = checked_node(g, x, "x"), checked_node(g, y, "y")
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
        >>> from faithgrpo.verifier.graphs.edges import parse_graph
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
    return checked_node(g, y, "y") in g.descendants(checked_node(g, x, "x"))


# ---------------------------------------------------------------------------------------------
# mediators, cycles, Markov blanket
def mediators(g: CausalGraph, x: str, y: str) -> frozenset[str]:
    """Nodes m ∉ {x, y} on some directed path x -> ... -> m -> ... -> y (acyclic graphs).

    In an acyclic graph a directed path x -> m joined to a directed path m -> y is always simple, so
    this is De(x) ∩ An(y). Complexity ``O(|V| + |E|)``.
    """
    require_acyclic(g, "a mediator")
    x, y = checked_node(g, x, "treatment"), checked_node(g, y, "outcome")
    return (g.descendants(x) & g.ancestors(y)) - {x, y}


def is_mediator(g: CausalGraph, x: str, y: str, m: str) -> bool:
    """Whether ``m`` lies on a directed path from ``x`` to ``y`` (m ∉ {x, y}); see :func:`mediators`."""
    return checked_node(g, m, "mediator") in mediators(g, x, y)


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
        >>> from faithgrpo.verifier.graphs.edges import parse_graph
        >>> sorted(markov_blanket(parse_graph("A -> V -> C; B -> C; C -> D"), "V"))
        ['A', 'B', 'C']
    """
    v = checked_node(g, v, "node")
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
