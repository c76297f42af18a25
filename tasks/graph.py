"""Typed causal graphs (DAG, ADMG, DG) and a bounded parser for edge text.

A :class:`CausalGraph` is an immutable value: a kind, an ordered tuple of node names, a set of
directed edges and a set of bidirected edges. It is the one graph type the task generators, the
CALVER trace scorer, the query predicates (:mod:`faithgrpo.tasks.criteria`) and the CLEAR adapter
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

Edge-text grammar (what :func:`parse_graph` reads)
--------------------------------------------------
Statements are separated by ``,``, ``;``, newlines or the word ``and``. A statement is a node name
or a chain ``N op N op N ...`` where ``op`` is one of::

    ->  -->  →  ⟶            directed, left to right
    <-  <--  ←  ⟵            directed, right to left
    <-> <--> ↔  ⟷            bidirected

so ``A -> B -> C``, ``A->B``, ``A → B``, ``B <- A``, ``A <-> B`` and ``A ↔ B`` all work. A lone node
name declares an isolated node. :meth:`CausalGraph.edge_text` writes the canonical form (sorted
``A -> B`` edges, then sorted ``A <-> B`` edges, then isolated nodes, joined by ``"; "``) which
parses back to an equal graph.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

import networkx as nx

__all__ = [
    "GRAPH_KINDS",
    "MAX_CHARS",
    "MAX_EDGES",
    "MAX_NODES",
    "NODE_RE",
    "CausalGraph",
    "GraphParseError",
    "Path",
    "edges_are_acyclic",
    "node_sort_key",
    "parse_graph",
    "parse_path",
]

GRAPH_KINDS = ("DAG", "ADMG", "DG")

# Default caps for parse_graph: generous for 100-node benchmark graphs, small enough that
# adversarial text (1 MB, 10k nodes) is rejected in well under a millisecond per kilobyte.
MAX_CHARS = 200_000
MAX_NODES = 512
MAX_EDGES = 8_192

NODE_RE = re.compile(r"[A-Za-z0-9_]+")

_DIRECTED_RIGHT = frozenset({"->", "-->", "→", "⟶"})
_DIRECTED_LEFT = frozenset({"<-", "<--", "←", "⟵"})
_BIDIRECTED = frozenset({"<->", "<-->", "↔", "⟷"})

# One token per match; the catch-all ``\S`` turns anything unexpected into an error token.
_TOKEN_RE = re.compile(r"<-{1,2}>|-{1,2}>|<-{1,2}|[→⟶←⟵↔⟷]|[A-Za-z0-9_]+|\S")
_LEX_RE = re.compile(
    r"(?P<sep>[,;\n])|(?P<bi><-{1,2}>|[↔⟷])|(?P<right>-{1,2}>|[→⟶])|(?P<left><-{1,2}|[←⟵])"
    r"|(?P<node>[A-Za-z0-9_]+)|(?P<bad>\S)"
)
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
        """Build a graph from DESIGN §4's ``problem["graph"]`` dict.

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
        """The DESIGN §4 dict: nodes in their order, edges sorted (JSON-serialisable)."""
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


def parse_graph(
    text: str,
    kind: str | None = None,
    *,
    nodes: Iterable[str] | None = None,
    max_nodes: int = MAX_NODES,
    max_edges: int = MAX_EDGES,
    max_chars: int = MAX_CHARS,
    validate: bool = True,
) -> CausalGraph:
    """Parse edge text such as ``"U -> X; U -> Y, X → M -> Y"`` into a :class:`CausalGraph`.

    Args:
        text: edge text in the grammar of the module docstring.
        kind: ``"DAG"``, ``"ADMG"`` or ``"DG"``; ``None`` infers ADMG when a bidirected edge appears,
            else DAG when acyclic, else DG.
        nodes: extra nodes to include (e.g. the problem's isolated nodes); they come first, in order.
        max_nodes: cap on distinct nodes.
        max_edges: cap on edges (directed plus bidirected, counted before de-duplication).
        max_chars: cap on ``len(text)``.
        validate: run :meth:`CausalGraph.validate` (cycle check for DAG/ADMG).

    Returns:
        The graph; nodes in order of first appearance.

    Raises:
        GraphParseError: unparsable text, an exceeded cap, or an ill-formed graph; the message says
            which. Never anything else, whatever the text.

    Complexity ``O(len(text))`` plus ``O(|V| + |E|)`` validation.

    Example:
        >>> parse_graph("A -> B -> C; A <-> C").edge_text()
        'A -> B; B -> C; A <-> C'
        >>> parse_graph("A -> B -> A").kind
        'DG'
    """
    if not isinstance(text, str):
        raise GraphParseError(f"graph text must be a string, got {type(text).__name__}")
    if len(text) > max_chars:
        raise GraphParseError(f"graph text has {len(text)} characters, over the cap of {max_chars}")
    if kind is not None and kind not in GRAPH_KINDS:
        raise GraphParseError(f"unknown graph kind {kind!r}; use one of {list(GRAPH_KINDS)}")
    order: dict[str, None] = {}
    for v in nodes or ():
        if not isinstance(v, str) or not NODE_RE.fullmatch(v):
            raise GraphParseError(f"bad node name {v!r}: use letters, digits and underscores")
        order[v] = None
    directed: set[tuple[str, str]] = set()
    bidirected: set[tuple[str, str]] = set()
    n_edges = 0
    prev: str | None = None  # last node of the current chain
    pending: str | None = None  # arrow group waiting for its right-hand node
    plain = plain_edges(text, order, directed, bidirected, max_nodes, max_edges)
    # one pass over the lexemes; `and` and , ; newline end a chain (text plain_edges read is done)
    for m in () if plain else _LEX_RE.finditer(text):
        group, tok = m.lastgroup, m.group()
        if group == "node" and tok == "and":
            group = "sep"
        if group == "node":
            if prev is not None and pending is None:
                raise GraphParseError(f"expected an edge arrow, got {tok!r} near {_context(text, m)!r}")
            if tok not in order:
                if len(order) >= max_nodes:
                    raise GraphParseError(f"more than {max_nodes} nodes")
                order[tok] = None
            if pending is not None:
                if prev == tok:
                    raise GraphParseError(f"self loop on {tok!r}")
                n_edges += 1
                if n_edges > max_edges:
                    raise GraphParseError(f"more than {max_edges} edges")
                if pending == "right":
                    directed.add((prev, tok))
                elif pending == "left":
                    directed.add((tok, prev))
                else:
                    bidirected.add((prev, tok))
                pending = None
            prev = tok
        elif group == "sep":
            if pending is not None:
                raise GraphParseError(f"incomplete edge near {_context(text, m)!r}")
            prev = None
        elif group == "bad" and prev is not None and pending is None:
            raise GraphParseError(f"expected an edge arrow, got {tok!r} near {_context(text, m)!r}")
        elif group == "bad" or prev is None or pending is not None:
            raise GraphParseError(f"expected a node name, got {tok!r} near {_context(text, m)!r}")
        else:
            pending = group
    if pending is not None:
        raise GraphParseError(f"incomplete edge at the end of {text[-40:]!r}")
    if not order:
        raise GraphParseError("no nodes or edges found")
    nodes_t = tuple(order)
    acyclic = None
    if kind is None:
        acyclic = edges_are_acyclic(nodes_t, directed)
        kind = "ADMG" if bidirected else ("DAG" if acyclic else "DG")
    g = CausalGraph(kind, nodes_t, frozenset(directed), frozenset(bidirected))
    return g._validate(check_names=False, acyclic=acyclic) if validate else g


# The common plain form "A -> B; C <-> D, E" (single spaces, one item per separator, no chains),
# checked with one linear regex and cut with str.split instead of the lexer loop; anything else (and
# any text the loop would reject) goes to the lexer.
_PLAIN_ITEM = r"[A-Za-z0-9_]+(?: <?-> [A-Za-z0-9_]+)?"
_PLAIN_GRAPH_RE = re.compile(rf"{_PLAIN_ITEM}(?:[,;] {_PLAIN_ITEM})*")


def plain_edges(
    text: str,
    order: dict[str, None],
    directed: set[tuple[str, str]],
    bidirected: set[tuple[str, str]],
    max_nodes: int,
    max_edges: int,
) -> bool:
    """Fill ``order``/``directed``/``bidirected`` as the lexer loop of :func:`parse_graph` would.

    Only for text in the plain form, and only when the loop would raise nothing: returns False
    (and leaves the three containers untouched) otherwise, so the loop reads the text instead. Same
    insertions in the same order as the loop (first-appearance node order, identical sets).
    """
    if len(text) > 4_000 or not _PLAIN_GRAPH_RE.fullmatch(text):
        return False
    # in the plain form every "," and ";" is a separator followed by one space, and every space
    # inside an item is around its arrow: an item splits into [node] or [node, arrow, node]
    items = [item.split(" ") for item in text.replace(";", ",").split(", ")]
    if len(items) > max_edges:
        return False
    new_order = dict(order)
    for item in items:
        a, b = item[0], item[-1]
        if a == "and" or b == "and" or (len(item) == 3 and a == b):
            return False  # "and" separates; a self loop raises: the loop decides
        new_order[a] = None
        new_order[b] = None
    if len(new_order) > max_nodes:
        return False
    order.update(new_order)  # new_order extends order: the same keys in the same order as the loop's
    for item in items:  # set.add in text order, as the loop does (same sets, same layout)
        if len(item) == 3:
            (directed if item[1] == "->" else bidirected).add((item[0], item[2]))
    return True


def _context(text: str, m: re.Match) -> str:
    return text[max(0, m.start() - 30) : m.end() + 30]


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


_FLIP = {"->": "<-", "<-": "->", "<->": "<->"}


@dataclass(frozen=True)
class Path:
    """A walk written left to right: ``nodes[i]`` and ``nodes[i + 1]`` are joined by ``marks[i]``.

    Each mark is ``"->"`` (edge ``nodes[i] -> nodes[i+1]``), ``"<-"`` (edge ``nodes[i+1] -> nodes[i]``)
    or ``"<->"``. Listing marks (not just nodes) keeps paths in ADMGs with bows unambiguous.
    Whether the path exists in a graph is :func:`faithgrpo.tasks.criteria.is_path`'s job.

    Example:
        >>> p = parse_path("X<-U->Y")
        >>> p.nodes, p.marks, str(p.reversed())
        (('X', 'U', 'Y'), ('<-', '->'), 'Y <- U -> X')
    """

    nodes: tuple[str, ...]
    marks: tuple[str, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", tuple(self.nodes))
        object.__setattr__(self, "marks", tuple(self.marks))
        if len(self.marks) != max(len(self.nodes) - 1, 0):
            raise ValueError(f"a path with {len(self.nodes)} nodes needs {len(self.nodes) - 1} marks")
        bad = [m for m in self.marks if m not in _FLIP]
        if bad:
            raise ValueError(f"unknown edge mark {bad[0]!r}; use '->', '<-' or '<->'")

    def reversed(self) -> Path:
        """The same path read from the other end."""
        return Path(self.nodes[::-1], tuple(_FLIP[m] for m in reversed(self.marks)))

    def compact(self) -> str:
        """``"X<-U->Y"`` (CLEAR style)."""
        out = [self.nodes[0]] if self.nodes else []
        for m, v in zip(self.marks, self.nodes[1:]):
            out += [m, v]
        return "".join(out)

    def __str__(self) -> str:
        out = [self.nodes[0]] if self.nodes else []
        for m, v in zip(self.marks, self.nodes[1:]):
            out += [m, v]
        return " ".join(out)


def parse_path(text: str, *, max_nodes: int = 256, max_chars: int = 8_192) -> Path:
    """Parse ``"A->B<-C"``, ``"A -> B <-> C"`` or ``"A → B ← C"`` into a :class:`Path`.

    The text must be one chain (no separators); surrounding quotes and whitespace are ignored.

    Raises:
        GraphParseError: on anything else, or when a cap is exceeded.

    Example:
        >>> str(parse_path("'A->B<-C'"))
        'A -> B <- C'
    """
    if not isinstance(text, str):
        raise GraphParseError(f"path must be a string, got {type(text).__name__}")
    if len(text) > max_chars:
        raise GraphParseError(f"path text over the cap of {max_chars} characters")
    tokens = _TOKEN_RE.findall(text.strip().strip("'\"`"))
    if not tokens or len(tokens) % 2 == 0:
        raise GraphParseError(f"not a path: {text[:80]!r}")
    if len(tokens) > 2 * max_nodes:
        raise GraphParseError(f"path longer than {max_nodes} nodes")
    nodes, marks = [], []
    for i, tok in enumerate(tokens):
        if i % 2 == 0:
            if not NODE_RE.fullmatch(tok):
                raise GraphParseError(f"expected a node name, got {tok!r}")
            nodes.append(tok)
        elif tok in _DIRECTED_RIGHT:
            marks.append("->")
        elif tok in _DIRECTED_LEFT:
            marks.append("<-")
        elif tok in _BIDIRECTED:
            marks.append("<->")
        else:
            raise GraphParseError(f"expected an edge arrow, got {tok!r}")
    return Path(tuple(nodes), tuple(marks))
