"""Typed causal graphs (DAG, ADMG, DG): the :class:`CausalGraph` value and its well-formedness rules.

A :class:`CausalGraph` is an immutable value: a kind, an ordered tuple of node names, a set of
directed edges and a set of bidirected edges. It is the one graph type the task generators, the
CALVER trace scorer, the query predicates (:mod:`faithgrpo.verifier.graphs.criteria`) and the CLEAR adapter
share.

Kinds
-----
``"DAG"``
    directed acyclic graph; no bidirected edges.
``"ADMG"``
    acyclic directed mixed graph: an acyclic directed part plus bidirected edges ``A <-> B`` that
    stand for a latent common cause of ``A`` and ``B``. A pair may carry both ``A -> B`` and
    ``A <-> B`` (a "bow").
``"DG"``
    directed graph that may contain directed cycles; no bidirected edges.

Self loops are never allowed. Node names are ASCII letters, digits and underscores
(``[A-Za-z0-9_]+``).

Edge text is read by :func:`faithgrpo.verifier.graphs.edges.parse_graph`; the package face
:mod:`faithgrpo.verifier.graphs` exposes both modules' public names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

import networkx as nx

__all__ = ["GRAPH_KINDS", "NODE_RE", "CausalGraph", "GraphParseError", "edges_are_acyclic", "node_sort_key"]

GRAPH_KINDS = ("DAG", "ADMG", "DG")

NODE_RE = re.compile(r"[A-Za-z0-9_]+")
_DIGITS_RE = re.compile(r"(\d+)")


class GraphParseError(ValueError):
    """Raised when edge text or a graph dict does not describe a well-formed graph of its kind.

    The message names the offending node, edge or cap so that it can be reported as a reason.
    """


@lru_cache(maxsize=1 << 16)
def node_sort_key(name: str) -> tuple:
    """Natural sort key for node names: ``X2`` sorts before ``X10``; ties fall back to the raw name.

    Example:
        >>> sorted(["X10", "X2", "A"], key=node_sort_key)
        ['A', 'X2', 'X10']
    """
    # re.split with a capturing group alternates str, digits, str, ... so positions compare like types.
    parts = _DIGITS_RE.split(name)
    return (tuple(int(p) if i % 2 else p for i, p in enumerate(parts)), name)


def _as_node_set(vs: str | Iterable[str]) -> frozenset[str]:
    if isinstance(vs, str):
        return frozenset((vs,))
    return frozenset(vs)


@dataclass(frozen=True, eq=False)
class CausalGraph:
    """An immutable causal graph of kind ``"DAG"``, ``"ADMG"`` or ``"DG"``.

    Attributes:
        kind: ``"DAG"``, ``"ADMG"`` or ``"DG"``.
        nodes: node names in their given order (kept for rendering; equality ignores the order).
        directed: directed edges ``(tail, head)``.
        bidirected: bidirected edges as *sorted* 2-tuples ``(a, b)`` with ``node_sort_key(a) <
            node_sort_key(b)``; the constructor sorts them, so ``("B", "A")`` is stored as
            ``("A", "B")``.

    The constructor normalises containers (lists become tuples/frozensets) but does not check
    well-formedness; call :meth:`validate` (``from_dict`` and :func:`parse_graph` do so by default).
    Two graphs are equal when kind, node *set* and both edge sets are equal.

    Example:
        >>> g = CausalGraph("DAG", ("U", "X", "Y"), frozenset({("U", "X"), ("U", "Y"), ("X", "Y")}))
        >>> sorted(g.parents("Y"))
        ['U', 'X']
        >>> g.edge_text()
        'U -> X; U -> Y; X -> Y'
    """

    kind: str
    nodes: tuple[str, ...]
    directed: frozenset[tuple[str, str]] = field(default_factory=frozenset)
    bidirected: frozenset[tuple[str, str]] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", tuple(self.nodes))
        pairs = list(self.directed)
        if set(map(type, pairs)) <= {tuple} and set(map(len, pairs)) <= {2}:
            # already plain 2-tuples (checked at C speed): the same frozenset, built in the same order,
            # as the unpacking below, which only re-creates equal tuples
            directed = frozenset(pairs)
        else:
            directed = frozenset((a, b) for a, b in pairs)
        object.__setattr__(self, "directed", directed)
        bidirected = set()
        for pair in self.bidirected:
            a, b = tuple(pair)
            bidirected.add((a, b) if node_sort_key(a) <= node_sort_key(b) else (b, a))
        object.__setattr__(self, "bidirected", frozenset(bidirected))

    # -- identity -----------------------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CausalGraph):
            return NotImplemented
        return (
            self.kind == other.kind
            and self.node_set == other.node_set
            and self.directed == other.directed
            and self.bidirected == other.bidirected
        )

    def __hash__(self) -> int:
        return hash((self.kind, self.node_set, self.directed, self.bidirected))

    @cached_property
    def node_set(self) -> frozenset[str]:
        """The nodes as a frozenset."""
        return frozenset(self.nodes)

    # -- adjacency (cached; the dataclass is frozen so caches never go stale) --------------------
    @cached_property
    def _parents(self) -> dict[str, frozenset[str]]:
        acc: dict[str, set[str]] = {v: set() for v in self.nodes}
        for a, b in self.directed:
            acc.setdefault(b, set()).add(a)
        return {v: frozenset(s) for v, s in acc.items()}

    @cached_property
    def _children(self) -> dict[str, frozenset[str]]:
        acc: dict[str, set[str]] = {v: set() for v in self.nodes}
        for a, b in self.directed:
            acc.setdefault(a, set()).add(b)
        return {v: frozenset(s) for v, s in acc.items()}

    @cached_property
    def _siblings(self) -> dict[str, frozenset[str]]:
        acc: dict[str, set[str]] = {v: set() for v in self.nodes}
        for a, b in self.bidirected:
            acc.setdefault(a, set()).add(b)
            acc.setdefault(b, set()).add(a)
        return {v: frozenset(s) for v, s in acc.items()}

    @cached_property
    def adjacency(self) -> dict[str, tuple[tuple[str, str], ...]]:
        """Mixed-graph adjacency: ``v -> ((mark, w), ...)`` with ``mark`` read from v's side.

        ``"->"`` for ``v -> w``, ``"<-"`` for ``w -> v``, ``"<->"`` for ``v <-> w``; each list is
        sorted by (natural node order, mark), so every traversal built on it is deterministic.
        """
        acc: dict[str, list[tuple[str, str]]] = {v: [] for v in self.nodes}
        for a, b in self.directed:
            acc[a].append(("->", b))
            acc[b].append(("<-", a))
        for a, b in self.bidirected:
            acc[a].append(("<->", b))
            acc[b].append(("<->", a))
        rank = self._rank
        return {v: tuple(sorted(e, key=lambda mw: (rank[mw[1]], mw[0]))) for v, e in acc.items()}

    @cached_property
    def _rank(self) -> dict[str, int]:
        # natural-order rank of each node: one sort key per node instead of one per comparison
        return {v: i for i, v in enumerate(sorted(self.nodes, key=node_sort_key))}

    def _check_nodes(self, vs: frozenset[str]) -> None:
        missing = vs - self.node_set
        if missing:
            raise ValueError(
                f"unknown node(s) {sorted(missing, key=node_sort_key)}; graph nodes are {list(self.nodes)}"
            )

    def parents(self, v: str) -> frozenset[str]:
        """Nodes ``u`` with an edge ``u -> v``. Raises ``ValueError`` for an unknown node."""
        self._check_nodes(frozenset((v,)))
        return self._parents[v]

    def children(self, v: str) -> frozenset[str]:
        """Nodes ``w`` with an edge ``v -> w``. Raises ``ValueError`` for an unknown node."""
        self._check_nodes(frozenset((v,)))
        return self._children[v]

    def siblings(self, v: str) -> frozenset[str]:
        """Nodes ``w`` with a bidirected edge ``v <-> w`` (empty for DAGs and DGs)."""
        self._check_nodes(frozenset((v,)))
        return self._siblings[v]

    def _reach(self, start: frozenset[str], step: Mapping[str, frozenset[str]]) -> frozenset[str]:
        seen: set[str] = set()
        stack = [w for v in start for w in step[v]]
        while stack:
            v = stack.pop()
            if v not in seen:
                seen.add(v)
                stack.extend(step[v])
        return frozenset(seen)

    def ancestors(self, vs: str | Iterable[str], *, include_self: bool = False) -> frozenset[str]:
        """Nodes with a directed path of length >= 1 to some node of ``vs``.

        A node of ``vs`` is included only if it is itself an ancestor of a node of ``vs`` (e.g. on a
        cycle), or when ``include_self=True``. Complexity ``O(|V| + |E|)``.
        """
        start = _as_node_set(vs)
        self._check_nodes(start)
        found = self._reach(start, self._parents)
        return found | start if include_self else found

    def descendants(self, vs: str | Iterable[str], *, include_self: bool = False) -> frozenset[str]:
        """Nodes reachable by a directed path of length >= 1 from some node of ``vs``.

        Same conventions as :meth:`ancestors`. Complexity ``O(|V| + |E|)``.
        """
        start = _as_node_set(vs)
        self._check_nodes(start)
        found = self._reach(start, self._children)
        return found | start if include_self else found

    def district(self, v: str) -> frozenset[str]:
        """The c-component (district) of ``v``: nodes joined to ``v`` by bidirected paths, with ``v``."""
        self._check_nodes(frozenset((v,)))
        return self._reach(frozenset((v,)), self._siblings) | {v}

    def districts(self) -> list[frozenset[str]]:
        """All c-components (maximal bidirected-connected sets, singletons included), in node order."""
        out, seen = [], set()
        for v in self.nodes:
            if v not in seen:
                d = self.district(v)
                seen |= d
                out.append(d)
        return out

    # -- structure ----------------------------------------------------------------------------
    def find_cycle(self) -> tuple[str, ...] | None:
        """Return one directed cycle as a node tuple ``(v0, ..., vk)`` (edge ``vk -> v0`` closes it), or ``None``.

        Iterative three-colour DFS, ``O(|V| + |E|)``; nodes and children are visited in node order
        so the witness is deterministic.
        """
        order = {v: i for i, v in enumerate(self.nodes)}
        kids = {v: sorted(self._children[v], key=order.__getitem__) for v in self.nodes}
        colour = dict.fromkeys(self.nodes, 0)  # 0 new, 1 on stack, 2 done
        for root in self.nodes:
            if colour[root]:
                continue
            colour[root] = 1
            path = [root]
            iters = [iter(kids[root])]
            while iters:
                nxt = next(iters[-1], None)
                if nxt is None:
                    colour[path.pop()] = 2
                    iters.pop()
                elif colour[nxt] == 1:
                    return tuple(path[path.index(nxt) :])
                elif colour[nxt] == 0:
                    colour[nxt] = 1
                    path.append(nxt)
                    iters.append(iter(kids[nxt]))
        return None

    def is_acyclic(self) -> bool:
        """Whether the directed part has no directed cycle. ``O(|V| + |E|)`` (Kahn's algorithm)."""
        return edges_are_acyclic(self.nodes, self.directed)

    def validate(self) -> CausalGraph:
        """Check well-formedness for the graph's kind and return ``self``.

        Checks: known kind; non-empty, unique node names matching ``[A-Za-z0-9_]+``; every edge
        endpoint is a node; no self loops; bidirected edges only in ADMGs; an acyclic directed part
        for DAGs and ADMGs.

        Raises:
            GraphParseError: naming the offending kind, node, edge or cycle.
        """
        return self._validate(check_names=True)

    def _validate(self, *, check_names: bool, acyclic: bool | None = None) -> CausalGraph:
        # parse_graph skips the name and endpoint checks: its lexer only produces valid names
        if self.kind not in GRAPH_KINDS:
            raise GraphParseError(f"unknown graph kind {self.kind!r}; use one of {list(GRAPH_KINDS)}")
        if not self.nodes:
            raise GraphParseError("graph has no nodes")
        if check_names:
            if len(self.node_set) != len(self.nodes):
                dup = next(v for i, v in enumerate(self.nodes) if v in self.nodes[:i])
                raise GraphParseError(f"duplicate node {dup!r}")
            for v in self.nodes:
                if not isinstance(v, str) or not NODE_RE.fullmatch(v):
                    raise GraphParseError(f"bad node name {v!r}: use letters, digits and underscores")
            for arrow, edges in (("->", self.directed), ("<->", self.bidirected)):
                for a, b in sorted(edges):
                    for end in (a, b):
                        if end not in self.node_set:
                            raise GraphParseError(f"edge {a} {arrow} {b} uses unknown node {end!r}")
                    if a == b:
                        raise GraphParseError(f"self loop {a} {arrow} {b}")
        if self.bidirected and self.kind != "ADMG":
            a, b = min(self.bidirected)
            raise GraphParseError(f"bidirected edge {a} <-> {b} in a {self.kind}; only ADMGs have them")
        if self.kind in ("DAG", "ADMG") and not (self.is_acyclic() if acyclic is None else acyclic):
            cycle = self.find_cycle() or ()
            loop = " -> ".join((*cycle, *cycle[:1]))
            raise GraphParseError(f"{self.kind} has a directed cycle {loop}")
        return self

    # -- conversions ----------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, d: Mapping[str, Any], *, validate: bool = True) -> CausalGraph:
        """Build a graph from a problem's ``problem["graph"]`` dict.

        Args:
            d: ``{"type": "DAG"|"ADMG"|"DG", "nodes": [...], "directed": [[a, b], ...],
                "bidirected": [[a, b], ...]}``; ``directed``/``bidirected`` may be omitted.
            validate: run :meth:`validate` (default).

        Returns:
            The graph.

        Raises:
            GraphParseError: on a malformed dict or graph.

        Example:
            >>> CausalGraph.from_dict({"type": "DAG", "nodes": ["A", "B"], "directed": [["A", "B"]]}).edge_text()
            'A -> B'
        """
        if not isinstance(d, Mapping):
            raise GraphParseError(f"graph must be a dict, got {type(d).__name__}")
        kind = d.get("type", d.get("kind"))
        nodes = d.get("nodes")
        if not isinstance(nodes, (list, tuple)):
            raise GraphParseError("graph dict needs a 'nodes' list")
        try:
            directed = frozenset((str(a), str(b)) for a, b in d.get("directed") or ())
            bidirected = frozenset((str(a), str(b)) for a, b in d.get("bidirected") or ())
        except (TypeError, ValueError) as exc:
            raise GraphParseError(f"edges must be [a, b] pairs: {exc}") from None
        g = cls(str(kind), tuple(str(v) for v in nodes), directed, bidirected)
        return g.validate() if validate else g

    def to_dict(self) -> dict[str, Any]:
        """The problem JSON's graph dict: nodes in their order, edges sorted (JSON-serialisable)."""
        return {
            "type": self.kind,
            "nodes": list(self.nodes),
            "directed": [list(e) for e in self._sorted_edges(self.directed)],
            "bidirected": [list(e) for e in self._sorted_edges(self.bidirected)],
        }

    @staticmethod
    def _sorted_edges(edges: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        return sorted(edges, key=lambda e: (node_sort_key(e[0]), node_sort_key(e[1])))

    def to_networkx(self) -> nx.DiGraph:
        """A fresh ``nx.DiGraph`` with every node and the directed edges (bidirected ones dropped)."""
        dg = nx.DiGraph()
        dg.add_nodes_from(self.nodes)
        dg.add_edges_from(self._sorted_edges(self.directed))
        return dg

    def edge_text(self) -> str:
        """Canonical edge text: sorted ``A -> B``, then sorted ``A <-> B``, then isolated nodes.

        ``parse_graph(g.edge_text(), g.kind) == g`` for every valid graph.
        """
        parts = [f"{a} -> {b}" for a, b in self._sorted_edges(self.directed)]
        parts += [f"{a} <-> {b}" for a, b in self._sorted_edges(self.bidirected)]
        touched = {v for e in self.directed for v in e} | {v for e in self.bidirected for v in e}
        parts += sorted((v for v in self.nodes if v not in touched), key=node_sort_key)
        return "; ".join(parts)

    def __str__(self) -> str:
        return f"{self.kind}({self.edge_text()})"


def edges_are_acyclic(nodes: Iterable[str], directed: Iterable[tuple[str, str]]) -> bool:
    """Kahn's algorithm, ``O(|V| + |E|)``; cheaper than the DFS that also finds a witness."""
    indeg = dict.fromkeys(nodes, 0)
    kids: dict[str, list[str]] = {}
    for a, b in directed:
        indeg[b] += 1
        kids.setdefault(a, []).append(b)
    stack = [v for v, d in indeg.items() if d == 0]
    seen = 0
    while stack:
        v = stack.pop()
        seen += 1
        for w in kids.get(v, ()):
            indeg[w] -= 1
            if indeg[w] == 0:
                stack.append(w)
    return seen == len(indeg)
