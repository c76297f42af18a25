"""Edge text for causal graphs: a bounded parser (:func:`parse_graph`), and paths (:class:`Path`).

The graph type itself, :class:`~faithgrpo.verifier.graphs.model.CausalGraph` (kinds DAG, ADMG, DG, and
their well-formedness rules), lives in :mod:`faithgrpo.verifier.graphs.model` (import it from there, or from
:mod:`faithgrpo.verifier.graphs`).

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
from collections.abc import Iterable
from dataclasses import dataclass

from faithgrpo.verifier.graphs.model import (
    GRAPH_KINDS,
    NODE_RE,
    CausalGraph,
    GraphParseError,
    edges_are_acyclic,
)

__all__ = [
    "MAX_CHARS",
    "MAX_EDGES",
    "MAX_NODES",
    "Path",
    "parse_graph",
    "parse_path",
]


# Default caps for parse_graph: generous for 100-node benchmark graphs, small enough that
# adversarial text (1 MB, 10k nodes) is rejected in well under a millisecond per kilobyte.
MAX_CHARS = 200_000
MAX_NODES = 512
MAX_EDGES = 8_192

_DIRECTED_RIGHT = frozenset({"->", "-->", "→", "⟶"})
_DIRECTED_LEFT = frozenset({"<-", "<--", "←", "⟵"})
_BIDIRECTED = frozenset({"<->", "<-->", "↔", "⟷"})

# One token per match; the catch-all ``\S`` turns anything unexpected into an error token.
_TOKEN_RE = re.compile(r"<-{1,2}>|-{1,2}>|<-{1,2}|[→⟶←⟵↔⟷]|[A-Za-z0-9_]+|\S")
_LEX_RE = re.compile(
    r"(?P<sep>[,;\n])|(?P<bi><-{1,2}>|[↔⟷])|(?P<right>-{1,2}>|[→⟶])|(?P<left><-{1,2}|[←⟵])"
    r"|(?P<node>[A-Za-z0-9_]+)|(?P<bad>\S)"
)


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


_FLIP = {"->": "<-", "<-": "->", "<->": "<->"}


@dataclass(frozen=True)
class Path:
    """A walk written left to right: ``nodes[i]`` and ``nodes[i + 1]`` are joined by ``marks[i]``.

    Each mark is ``"->"`` (edge ``nodes[i] -> nodes[i+1]``), ``"<-"`` (edge ``nodes[i+1] -> nodes[i]``)
    or ``"<->"``. Listing marks (not just nodes) keeps paths in ADMGs with bows unambiguous.
    Whether the path exists in a graph is :func:`faithgrpo.verifier.graphs.paths.is_path`'s job.

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
