"""CLEAR-format adapter: read CLEAR records, judge answers under the graph predicate, convert to problems.

CLEAR (Chen et al. 2024, "CLEAR: Can Language Models Really Understand Causal Graphs?") ships one
JSON-Lines file per task type (``data/json_single/<task_type>.json``); a record is
``{description, graph_type, uid, sid, question, answer, question_type, task_type}``. The wording of
every description and question template is in ``CLEAR_FORMAT.md`` (the contract); this module reads
exactly those templates for nine task types and every question type they use:

==========================  ======================  ===============================================
task type                   question types          a valid answer is
==========================  ======================  ===============================================
backdoor_adjustment_set     FO (any/minimal/        a set satisfying the backdoor criterion
                            maximal), YN, MC, EX    (m-separation form in ADMGs)
frontdoor_adjustment_set    FO (any/minimal/        a set satisfying Pearl's front-door criterion
                            maximal), YN, MC, EX
d-separation                FO (any/minimal), YN,   a set Z, x, y not in Z, m-separating x and y
                            MC                      (d-separation in a DAG)
blocked_path                FO (any/minimal), YN,   a set Z, path endpoints not in Z, blocking the
                            MC                      path
backdoor_path               FO (shortest/longest),  a path from x to y starting with an arrowhead
                            FA, HM, YN, MC          into x (``x<-``, ``x<->``); FA/HM: all of them
directed_path               FA, HM, YN, EX, MC      a simple path ``x->...->y``
cycle                       FO, YN, MC, EX          a closed directed path (rule below)
markov_blanket              FO, YN, MC              the Markov blanket (DAGs)
c-component                 YN, FA, HM              the partition into districts (maximal sets
                                                    joined by bi-directed edges alone)
==========================  ======================  ===============================================

Semantics fixed by the published labels (``CLEAR_FORMAT.md``): *minimal* / *maximal* sets are valid
sets with no valid proper subset / superset, decided by brute force over subsets; *shortest* /
*longest* count edges among all backdoor paths; a cycle candidate is a cycle only when every arrow
is ``->`` (or every arrow ``<-``), each step is an edge in that direction and the last node equals
the first (``N<-W->K->N`` is not one); ``Is it a C-component?`` is yes exactly when the whole graph
is one district (directed edges do not count), whatever the ``graph_type``; FA answers compare as
sets of paths / sets of sets; backdoor paths in ADMGs may use ``<->`` edges.

Where the wording leaves a case open the judge answers ``None`` instead of guessing:
front-door questions when the treatment has no directed path to the outcome (the empty set then
satisfies the criterion literally), Markov blankets outside DAGs, separation claims whose
conditioning set holds an endpoint, claimed paths written from the outcome back to the treatment,
claimed closed walks that revisit a node, and enumerations over the caps.

Public API: :func:`read_question` (a typed :class:`ClearQuestion`), :func:`judge`,
:func:`listed_answers`, :func:`to_problem` (adjustment-set and separation records as DESIGN §4
problems that CALVER scores), :func:`load_records`, :func:`evaluate_file`, :func:`format_summary`,
:func:`parse_description`. Every parser is bounded (length caps before any regex), nothing is
evaluated, and :func:`judge` never raises.
"""

from __future__ import annotations

import errno
import functools
import itertools
import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path as FsPath
from typing import Any

from faithgrpo.tasks import criteria as C
from faithgrpo.tasks.graph import (
    NODE_RE,
    CausalGraph,
    GraphParseError,
    Path,
    edges_are_acyclic,
    node_sort_key,
    parse_graph,
    parse_path,
)
from faithgrpo.tasks.queries import QUERY_KINDS, parse_node_set, parse_yes_no

__all__ = [
    "QUESTION_TYPES",
    "TASK_TYPES",
    "VARIANTS",
    "ClearQuestion",
    "evaluate_file",
    "format_summary",
    "judge",
    "listed_answers",
    "load_records",
    "normalize_task_type",
    "parse_description",
    "read_question",
    "to_problem",
]

QUESTION_TYPES = ("FO", "FA", "HM", "YN", "EX", "MC")
TASK_TYPES = (
    "backdoor_adjustment_set",
    "frontdoor_adjustment_set",
    "d-separation",
    "blocked_path",
    "backdoor_path",
    "directed_path",
    "cycle",
    "markov_blanket",
    "c-component",
)
VARIANTS = ("any", "minimal", "maximal", "shortest", "longest")

MAX_TEXT_CHARS = 16_384  # description, question and candidate caps (CLEAR's are < 2,000)
MAX_GRAPH_NODES = 64
MAX_SUBSET_POOL = 12  # brute force over at most 2^12 subsets
MAX_PATHS = 10_000
MAX_ITEMS = 4_096  # members of one FA answer

_ADJUSTMENT = ("backdoor_adjustment_set", "frontdoor_adjustment_set")
_SET_TASKS = (*_ADJUSTMENT, "d-separation", "blocked_path", "markov_blanket")
_PATH_TASKS = ("backdoor_path", "directed_path", "cycle")
_ACYCLIC = ("DAG", "ADMG")
_ADMG_TYPES = ("admg", "c_component", "c_forest", "c_tree")


def normalize_task_type(name: Any) -> str:
    """``"d-separation"`` -> ``"d_separation"``, ``"Backdoor Adjustment Set"`` -> ``"backdoor_adjustment_set"``."""
    return re.sub(r"[^a-z0-9]+", "_", str(name).lower()[:200]).strip("_")


_CANONICAL = {normalize_task_type(t): t for t in TASK_TYPES}


# ---------------------------------------------------------------------------------------------
# descriptions
_KW_RE = re.compile(
    r"(?P<nodes>\bnodes?\b)|(?P<bi>\bbi-?directed\s+edges?\b)|(?P<dir>(?<![-\w])directed\s+edges?\b)"
    r"|(?P<none>\bno\s+edges\b)",
    re.IGNORECASE,
)
_EDGE_RE = re.compile(r"\s*([A-Za-z0-9_]{1,64})\s*(<->|->|<-)\s*([A-Za-z0-9_]{1,64})\s*")


def parse_description(description: str, graph_type: str | None = None) -> CausalGraph:
    """Parse a CLEAR description into a graph.

    Reads ``Given a DAG (directed acyclic graph) with nodes M, H, V and directed edges M->V, H->V.``,
    ``Given an ADMG (...) with nodes I, Y, H, directed edges I->H and bi-directed edges H<->Y.`` and
    ``Given a directed graph with nodes W, K and directed edges K->W, W->K.``. The kind is ADMG when
    bi-directed edges appear (or ``graph_type`` names an ADMG family), DAG when the directed edges
    are acyclic, DG otherwise.

    Raises:
        GraphParseError: no node list, a malformed edge, an edge with a node missing from the list,
            a self loop, or an ADMG with a directed cycle.

    Example:
        >>> parse_description("Given a DAG with nodes A, B and C and directed edges A->B, B->C.").edge_text()
        'A -> B; B -> C'
    """
    if not isinstance(description, str) or len(description) > MAX_TEXT_CHARS:
        raise GraphParseError(f"description must be a string of at most {MAX_TEXT_CHARS:,} characters")
    marks = list(itertools.islice(_KW_RE.finditer(description), 16))
    sections: dict[str, str] = {}
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(description)
        chunk = description[m.end() : end]
        chunk = re.split(r"\.(?:\s|$)", chunk, maxsplit=1)[0]  # a sentence ends the list
        chunk = re.sub(r"(?:,|\band\b|\s)+$", "", chunk.strip(" :"))
        sections.setdefault(m.lastgroup or "", chunk)
    if "nodes" not in sections:
        raise GraphParseError("description has no 'nodes' list")
    nodes = tuple(dict.fromkeys(t for t in re.split(r"[,\s]+|\band\b", sections["nodes"]) if t))
    if not nodes or len(nodes) > MAX_GRAPH_NODES or not all(NODE_RE.fullmatch(v) for v in nodes):
        raise GraphParseError(f"cannot read the node list {sections['nodes'][:80]!r}")
    directed: set[tuple[str, str]] = set()
    bidirected: set[tuple[str, str]] = set()
    texts = [sections[k] for k in ("dir", "bi") if sections.get(k)]
    items = [t for text in texts for t in re.split(r",|;|\band\b", text) if t.strip()]
    matches = [_EDGE_RE.fullmatch(t) for t in items]
    if all(matches):
        for m in matches:
            a, arrow, b = m.groups()
            if arrow == "<->":
                bidirected.add((a, b))
            else:
                directed.add((a, b) if arrow == "->" else (b, a))
    else:  # chains (A->B->C) and unicode arrows: the general edge parser
        g = parse_graph("; ".join(texts), nodes=nodes, max_nodes=MAX_GRAPH_NODES, validate=False)
        directed, bidirected = set(g.directed), set(g.bidirected)
    used = {v for e in directed | bidirected for v in e}
    if not used <= set(nodes):
        raise GraphParseError(f"edges use node(s) {sorted(used - set(nodes))} missing from the node list")
    if any(a == b for a, b in directed | bidirected):
        raise GraphParseError("self loop in the description")
    acyclic = edges_are_acyclic(nodes, directed)
    if bidirected or normalize_task_type(graph_type or "") in _ADMG_TYPES:
        if not acyclic:
            raise GraphParseError("an ADMG description with a directed cycle")
        kind = "ADMG"
    else:
        kind = "DAG" if acyclic else "DG"
    return CausalGraph(kind, nodes, frozenset(directed), frozenset(bidirected))


# ---------------------------------------------------------------------------------------------
# bitmask engine (graphs of CLEAR size: brute force over subsets needs fast predicates)
_Key = tuple[tuple[str, ...], tuple[str, ...]]  # a path as (nodes, marks)


def _bits_of(mask: int) -> Iterator[int]:
    while mask:
        low = mask & -mask
        mask ^= low
        yield low.bit_length() - 1


def _closure(start: int, step: list[int]) -> int:
    seen = frontier = start
    while frontier:
        nxt = 0
        for i in _bits_of(frontier):
            nxt |= step[i]
        frontier = nxt & ~seen
        seen |= frontier
    return seen


class _Bits:
    """Parents, children, siblings, ancestors and descendants of each node as bitmasks."""

    __slots__ = ("anc", "ch", "des", "index", "names", "pa", "sib")

    def __init__(self, g: CausalGraph) -> None:
        self.names = tuple(g.nodes)
        self.index = {v: i for i, v in enumerate(self.names)}
        n = len(self.names)
        self.pa, self.ch, self.sib = [0] * n, [0] * n, [0] * n
        for a, b in g.directed:
            ia, ib = self.index[a], self.index[b]
            self.pa[ib] |= 1 << ia
            self.ch[ia] |= 1 << ib
        for a, b in g.bidirected:
            ia, ib = self.index[a], self.index[b]
            self.sib[ia] |= 1 << ib
            self.sib[ib] |= 1 << ia
        self.anc = [_closure(1 << i, self.pa) for i in range(n)]  # with the node itself
        self.des = [_closure(1 << i, self.ch) for i in range(n)]

    def mask(self, vs) -> int:
        m = 0
        for v in vs:
            m |= 1 << self.index[v]
        return m

    def connected(self, src: int, targets: int, cond: int, *, cut: bool = False) -> bool:
        """Whether an m-connecting path given ``cond`` joins ``src`` to a node of ``targets``.

        Reachability over (node, arrowhead-at-node) states (Bayes ball; Koller & Friedman Alg.
        3.1, with bi-directed edges as arrowheads at both ends). ``cut`` removes the edges out of
        ``src`` first (the backdoor graph).
        """
        pa, ch, sib = self.pa, self.ch, self.sib
        if cut:
            s = 1 << src
            ch = list(ch)
            ch[src] = 0
            pa = [p & ~s for p in pa]
            an = _closure(cond, pa)
        else:
            an = 0
            for i in _bits_of(cond):
                an |= self.anc[i]
        vis_head = ch[src] | sib[src]  # reached with an arrowhead at the node
        vis_tail = pa[src]  # reached with a tail at the node
        if (vis_head | vis_tail) & targets:
            return True
        f_head, f_tail = vis_head, vis_tail
        while f_head | f_tail:
            n_head = n_tail = 0
            for v in _bits_of(f_head):
                b = 1 << v
                if not b & cond:  # non-collider: leave by a tail
                    n_head |= ch[v]
                if b & an:  # collider with itself or a descendant conditioned on
                    n_tail |= pa[v]
                    n_head |= sib[v]
            for v in _bits_of(f_tail):
                if not (1 << v) & cond:
                    n_head |= ch[v] | sib[v]
                    n_tail |= pa[v]
            n_head &= ~vis_head
            n_tail &= ~vis_tail
            if (n_head | n_tail) & targets:
                return True
            vis_head |= n_head
            vis_tail |= n_tail
            f_head, f_tail = n_head, n_tail
        return False

    def backdoor(self, x: int, y: int, z: int) -> bool:
        if z & ((1 << y) | self.des[x]):  # des[x] holds x
            return False
        return not self.connected(x, 1 << y, z, cut=True)

    def frontdoor(self, x: int, y: int, z: int) -> bool:
        xb, yb = 1 << x, 1 << y
        if z & (xb | yb):
            return False
        seen, frontier = 0, self.ch[x]  # (i) every directed path x -> ... -> y meets z
        while frontier:
            if frontier & yb:
                return False
            frontier &= ~z & ~seen
            seen |= frontier
            nxt = 0
            for v in _bits_of(frontier):
                nxt |= self.ch[v]
            frontier = nxt
        if not z:
            return True
        if self.connected(x, z, 0, cut=True):  # (ii) no open backdoor path from x into z
            return False
        # (iii) every backdoor path from each z to y is blocked by x
        return not any(self.connected(v, yb, xb, cut=True) for v in _bits_of(z))

    def separated(self, x: int, y: int, z: int) -> bool:
        return not z & ((1 << x) | (1 << y)) and not self.connected(x, 1 << y, z)

    def paths(self, x: int, y: int, *, backdoor: bool, limit: int) -> list[_Key] | None:
        """Simple paths from x to y as ``(nodes, marks)``: backdoor paths (first edge into x) or
        directed paths (every edge ``->``); ``None`` when there are more than ``limit``.

        Depth-first, entering a node only when y is still reachable from it off the path, so every
        branch ends in a path.
        """
        n = len(self.names)
        if backdoor:
            reach = [self.ch[i] | self.pa[i] | self.sib[i] for i in range(n)]
            steps = [
                [("->", j) for j in _bits_of(self.ch[i])]
                + [("<-", j) for j in _bits_of(self.pa[i])]
                + [("<->", j) for j in _bits_of(self.sib[i])]
                for i in range(n)
            ]
            first = [(m, j) for m, j in steps[x] if m != "->"]
        else:
            reach = self.ch
            steps = [[("->", j) for j in _bits_of(self.ch[i])] for i in range(n)]
            first = steps[x]
        yb = 1 << y

        def reaches(v: int, avoid: int) -> bool:
            seen = frontier = 1 << v
            seen |= avoid
            while frontier:
                nxt = 0
                for i in _bits_of(frontier):
                    nxt |= reach[i]
                if nxt & yb:
                    return True
                frontier = nxt & ~seen
                seen |= frontier
            return False

        out: list[tuple[tuple[int, ...], tuple[str, ...]]] = []
        stack = [(1 << x, (x,), (), iter(first))]
        while stack:
            on, nodes, marks, it = stack[-1]
            step = next(it, None)
            if step is None:
                stack.pop()
                continue
            m, w = step
            if (1 << w) & on:
                continue
            if w == y:
                out.append(((*nodes, w), (*marks, m)))
                if len(out) > limit:
                    return None
            elif reaches(w, on):
                stack.append((on | (1 << w), (*nodes, w), (*marks, m), iter(steps[w])))
        names = self.names
        return [(tuple(names[i] for i in ns), ms) for ns, ms in out]

    def blocked(self, nodes: tuple[int, ...], marks: tuple[str, ...], z: int) -> bool:
        if z & ((1 << nodes[0]) | (1 << nodes[-1])):
            return False
        for i in range(1, len(nodes) - 1):
            v = nodes[i]
            if marks[i - 1] in ("->", "<->") and marks[i] in ("<-", "<->"):
                if not self.des[v] & z:
                    return True
            elif (1 << v) & z:
                return True
        return False


@functools.lru_cache(maxsize=1024)
def _bits(g: CausalGraph) -> _Bits:
    return _Bits(g)


# ---------------------------------------------------------------------------------------------
# the typed reading of a record
@dataclass(frozen=True)
class ClearQuestion:
    """A CLEAR record read against its template.

    Attributes:
        task_type: the CLEAR name (one of :data:`TASK_TYPES`, e.g. ``"d-separation"``).
        question_type: ``FO``, ``FA``, ``HM``, ``YN``, ``EX`` or ``MC``.
        graph: the described graph.
        x, y: treatment and outcome (adjustment sets), the two nodes to separate (d-separation),
            start and end (backdoor/directed paths); ``None`` otherwise.
        node: the node of a Markov-blanket question.
        path: the path a ``blocked_path`` question is about.
        variant: ``"any"``, ``"minimal"``/``"maximal"`` (sets), ``"shortest"``/``"longest"`` (paths).
        claim: the set (a ``frozenset``) or path (a :class:`~faithgrpo.tasks.graph.Path`) a YN
            question asks about; ``None`` for questions without one (existence, ``Is it a
            C-component?``).
        options: MC options ``(letter, value)`` in order; a value is ``None`` when unreadable.
    """

    task_type: str
    question_type: str
    graph: CausalGraph
    x: str | None = None
    y: str | None = None
    node: str | None = None
    path: Path | None = None
    variant: str = "any"
    claim: frozenset[str] | Path | None = None
    options: tuple[tuple[str, frozenset[str] | Path | None], ...] = ()


_NAME = r"[A-Za-z0-9_]{1,64}"
_ARROWS = r"(?:<->|->|<-|→|←|↔)"
_SET = r"(?P<set>set\(\)|\{[^{}]{0,4000}\})"
_END = r"\s?[.?]?"


def _node(group: str, prefix: bool = True) -> str:
    return (r"(?:node\s)?" if prefix else "") + rf"(?P<{group}>{_NAME})"


def _path(group: str) -> str:
    return rf"(?P<{group}>{_NAME}(?:\s?{_ARROWS}\s?{_NAME}){{1,64}})"


_X, _Y, _V = _node("x"), _node("y"), _node("node")
_FROM = rf"from\s{_X}\sto\s{_Y}"
_VARIANT = r"(?:(?P<v1>minimal|maximal)\s)?(?:valid\s)?(?:(?P<v2>minimal|maximal)\s)?"
_ROLES = (
    rf"for\streatment\s{_X}\sand\soutcome\s{_Y}",
    rf"for\s(?:the\sordered\spair\s)?\(\s?{_X}\s?,\s?{_Y}\s?\)",
)
_NODESET = r"(?:node\s?set|set\sof\snodes)"

# form -> question types it answers
_FORM_QTYPES = {
    "find": ("FO",),
    "find_blanket": ("FO", "FA"),
    "claim": ("YN",),
    "choice": ("MC",),
    "exists": ("EX", "YN"),
    "whole": ("YN", "EX"),
    "all": ("FA",),
    "count": ("HM",),
}


def _adjustment_templates(word: str) -> list[tuple[str, str]]:
    out = []
    for role in _ROLES:
        out += [
            ("find", rf"find\s(?:one|a|an)\s{_VARIANT}{word}\sadjustment\sset\s{role}{_END}"),
            ("claim", rf"is\s{_SET}\san?\s{_VARIANT}{word}\sadjustment\sset\s{role}{_END}"),
            ("choice", rf"which\sof\sthe\sfollowing\s(?:sets\s)?is\san?\s{_VARIANT}{word}\sadjustment\sset\s{role}{_END}"),
            ("exists", rf"(?:does\sthere\sexist|is\sthere)\san?\s{_VARIANT}{word}\sadjustment\sset\s{role}{_END}"),
            ("all", rf"find\sall\s{_VARIANT}{word}\sadjustment\ssets\s{role}{_END}"),
            ("count", rf"how\smany\s{_VARIANT}{word}\sadjustment\ssets\s(?:are\sthere|exist)\s{role}{_END}"),
        ]  # fmt: skip
    return out


def _path_templates(word: str) -> list[tuple[str, str]]:
    return [
        ("find", rf"find\sthe\s(?P<v1>shortest|longest)\s{word}\spath\s{_FROM}{_END}"),
        ("find", rf"find\s(?:one|a)\s{word}\spath\s{_FROM}{_END}"),
        ("all", rf"find\sall\s(?:the\s)?{word}\spaths\s{_FROM}{_END}"),
        ("count", rf"how\smany\s{word}\spaths\s(?:are\sthere\s|are\s|exist\s)?{_FROM}{_END}"),
        ("claim", rf"is\s{_path('cpath')}\sa\s{word}\spath\s{_FROM}{_END}"),
        ("choice", rf"which\sof\sthe\sfollowing\sis\sa\s{word}\spath\s{_FROM}{_END}"),
        ("exists", rf"(?:is\sthere\sa|does\sthere\sexist\sa|are\sthere\sany)\s{word}\spaths?\s{_FROM}{_END}"),
    ]  # fmt: skip


_PARTITION = (
    r"(?:it\scan\sbe\suniquely\spartitioned\sinto\sa\sset\sc\(g\)\sof\ssubgraphs,\s"
    r"each\sa\smaximal\sc-component\.\s)?"
)
_GRAPH = r"in\s(?:this|the)\sgraph"
_TEMPLATE_TEXT: dict[str, list[tuple[str, str]]] = {
    "backdoor_adjustment_set": _adjustment_templates(r"back-?door"),
    "frontdoor_adjustment_set": _adjustment_templates(r"front-?door"),
    "d-separation": [
        ("find", rf"find\s(?:one|a)\s(?:valid\s)?{_NODESET}\sthat\scan\s[dm]-?separate\s{_X}\sand\s{_Y}{_END}"),
        ("find", rf"find\s(?:the|a|one)\s(?P<v1>minimal)\s(?:valid\s)?{_NODESET}\sthat\scan\s[dm]-?separate\s{_X}\sand\s{_Y}{_END}"),
        ("claim", rf"are\s{_X}\sand\s{_Y}\s[dm]-?separated\s(?:by|given)\s(?:the\s)?(?:{_NODESET}\s)?{_SET}{_END}"),
        ("choice", rf"which\sof\sthe\sfollowing\s(?:{_NODESET}s|sets)\scan\s[dm]-?separate\s{_X}\sand\s{_Y}{_END}"),
    ],
    "blocked_path": [
        ("find", rf"find\s(?:one|a)\s(?:valid\s)?{_NODESET}\sthat\scan\sblock\s(?:the\s)?path\s{_path('path')}{_END}"),
        ("find", rf"find\s(?:the|a|one)\s(?P<v1>minimal)\s(?:valid\s)?{_NODESET}\sthat\scan\sblock\s(?:the\s)?path\s{_path('path')}{_END}"),
        ("claim", rf"can\s(?:the\s)?path\s{_path('path')}\sbe\sblocked\sby\s(?:the\s)?(?:{_NODESET}\s)?{_SET}{_END}"),
        ("choice", rf"which\sof\sthe\sfollowing\s{_NODESET}s\scan\sblock\s(?:the\s)?path\s{_path('path')}{_END}"),
    ],
    "backdoor_path": _path_templates(r"back-?door"),
    "directed_path": _path_templates(r"directed"),
    "cycle": [
        ("find", rf"find\s(?:one|a)\scycle\s{_GRAPH}{_END}"),
        ("claim", rf"is\s{_path('cpath')}\sa\scycle\s{_GRAPH}{_END}"),
        ("choice", rf"which\sof\sthe\sfollowing\sis\sa\scycle\s{_GRAPH}{_END}"),
        ("exists", rf"(?:are\sthere\sany\scycles|is\sthere\sa\scycle|does\s(?:this|the)\sgraph\s(?:have|contain)\sa\scycle)(?:\s{_GRAPH})?{_END}"),
        ("all", rf"find\sall\s(?:the\s)?cycles\s{_GRAPH}{_END}"),
        ("count", rf"how\smany\scycles\s(?:are\sthere\s)?{_GRAPH}{_END}"),
    ],
    "markov_blanket": [
        ("find_blanket", rf"(?:what\sis|find)\sthe\smarkov\sblanket\sof\s{_V}{_END}"),
        ("claim", rf"is\s{_SET}\sthe\smarkov\sblanket\sof\s{_V}{_END}"),
        ("choice", rf"which\sof\sthe\sfollowing\sis\sthe\smarkov\sblanket\sof\s{_V}{_END}"),
        ("count", rf"how\smany\snodes\sare\s(?:there\s)?in\sthe\smarkov\sblanket\sof\s{_V}{_END}"),
    ],
    "c-component": [
        ("whole", rf"is\s(?:it|this\sgraph|the\s(?:given\s)?graph)\sa\sc-?component{_END}"),
        ("all", rf"{_PARTITION}write\sdown\s(?:such|the)\spartition\sof\sthe\sgiven\sgraph{_END}"),
        ("count", rf"{_PARTITION}how\smany\ssubgraphs\sare\sthere\sin\sc\(g\){_END}"),
    ],
}  # fmt: skip
_TEMPLATES = {
    task: [(form, re.compile(text, re.IGNORECASE)) for form, text in items]
    for task, items in _TEMPLATE_TEXT.items()
}

_OPTION_SPLIT_RE = re.compile(r"(?:^|\s+)([A-Z])[.)]\s+")
_PATH_LIT_RE = re.compile(rf"(?<![A-Za-z0-9_]){_NAME}(?:\s*{_ARROWS}\s*{_NAME})+")  # starts at a name's start
_SET_LIT_RE = re.compile(r"\{[^{}]{0,4000}\}|\bset\(\)")
_SEPARATORS_RE = re.compile(r"[\s,;\[\]()'\"]*")


def _split_options(question: str) -> tuple[str, list[tuple[str, str]]] | None:
    """``(stem, [(letter, text), ...])`` for an MC question (stem up to its first ``?``)."""
    cut = question.find("?")
    if cut < 0:
        return None
    stem, rest = question[: cut + 1], question[cut + 1 :]
    rest = re.sub(r"\\(?=\s*(?:\n|$))", "", rest).strip()  # markdown line breaks (``\`` + newline)
    parts = _OPTION_SPLIT_RE.split(rest)
    if len(parts) < 5 or parts[0].strip():
        return None
    letters, texts = parts[1::2], parts[2::2]
    if letters != [chr(ord("A") + i) for i in range(len(letters))]:
        return None
    return stem, [(a, t.strip()) for a, t in zip(letters, texts)]


def _parse_set(text: Any) -> frozenset[str] | None:
    if not isinstance(text, str) or len(text) > MAX_TEXT_CHARS:
        return None
    s = text.strip().rstrip(".").strip()
    m = re.fullmatch(r"\[\s*(\{[^{}\[\]]*\}|set\(\))\s*\]", s)  # a one-set list
    return parse_node_set(m.group(1) if m else s)


def _parse_one_path(text: Any) -> Path | None:
    if not isinstance(text, str) or len(text) > MAX_TEXT_CHARS:
        return None
    s = text.strip().rstrip(".").strip()
    m = re.fullmatch(r"\[\s*(['\"]?)([^\[\]'\"]*)\1\s*\]", s)  # a one-path list
    if m:
        s = m.group(2)
    try:
        return parse_path(s.strip().strip("'\"`"))
    except GraphParseError:
        return None


def _option_value(task: str, text: str) -> frozenset[str] | Path | None:
    return _parse_one_path(text) if task in _PATH_TASKS else _parse_set(text)


def read_question(record: Mapping[str, Any]) -> ClearQuestion | None:
    """Read a CLEAR record against the templates of ``CLEAR_FORMAT.md``.

    Returns:
        The typed reading, or ``None`` when the task type is not one of :data:`TASK_TYPES`, the
        question type does not fit the template, or the description or question cannot be read
        (roles naming nodes outside the graph, a ``blocked_path`` path that is not a path of the
        graph, a claimed set that is not a set). Never raises.

    Example:
        >>> q = read_question({"task_type": "d-separation", "question_type": "YN",
        ...     "description": "Given a DAG (directed acyclic graph) with nodes A, B, C and directed edges A->B, B->C.",
        ...     "question": "Are node A and node C d-separated by nodeset {'B'}?"})
        >>> q.x, q.y, sorted(q.claim)
        ('A', 'C', ['B'])
    """
    try:
        if not isinstance(record, Mapping):
            return None
        task = _CANONICAL.get(normalize_task_type(record.get("task_type", "")))
        qtype = str(record.get("question_type", ""))[:8].strip().upper()
        question, description = record.get("question"), record.get("description")
        graph_type = record.get("graph_type")
        if task is None or qtype not in QUESTION_TYPES:
            return None
        if not isinstance(question, str) or not isinstance(description, str):
            return None
        if len(question) > MAX_TEXT_CHARS or len(description) > MAX_TEXT_CHARS:
            return None
        return _read(task, qtype, description, graph_type if isinstance(graph_type, str) else None, question)
    except (GraphParseError, ValueError, TypeError, KeyError, IndexError, RecursionError):
        return None


@functools.lru_cache(maxsize=4096)
def _read(
    task: str, qtype: str, description: str, graph_type: str | None, question: str
) -> ClearQuestion | None:
    try:
        g = parse_description(description, graph_type)
    except GraphParseError:
        return None
    options: list[tuple[str, str]] = []
    stem = question
    if qtype == "MC":
        split = _split_options(question)
        if split is None:
            return None
        stem, options = split
    stem = " ".join(stem.split())
    for form, pattern in _TEMPLATES[task]:
        m = pattern.fullmatch(stem)
        if m:
            if qtype not in _FORM_QTYPES[form]:
                return None
            break
    else:
        return None
    groups = m.groupdict()
    x, y, node = groups.get("x"), groups.get("y"), groups.get("node")
    if any(v is not None and v not in g.node_set for v in (x, y, node)) or (x is not None and x == y):
        return None
    v1, v2 = (groups.get("v1") or "").lower(), (groups.get("v2") or "").lower()
    if v1 and v2 and v1 != v2:
        return None
    variant = v1 or v2 or "any"
    path = None
    if groups.get("path"):
        try:
            path = parse_path(groups["path"])
        except GraphParseError:
            return None
        if not C.is_path(g, path):
            return None
    claim: frozenset[str] | Path | None = None
    if groups.get("set"):
        claim = parse_node_set(groups["set"])
        if claim is None:
            return None
    if groups.get("cpath"):
        try:
            claim = parse_path(groups["cpath"])
        except GraphParseError:
            return None
    return ClearQuestion(
        task_type=task,
        question_type=qtype,
        graph=g,
        x=x,
        y=y,
        node=node,
        path=path,
        variant=variant,
        claim=claim,
        options=tuple((letter, _option_value(task, text)) for letter, text in options),
    )


# ---------------------------------------------------------------------------------------------
# predicates
def _supported(q: ClearQuestion) -> bool:
    """Whether the judge decides ``q`` at all (graph kind and the open front-door case)."""
    kind = q.graph.kind
    if (
        q.task_type in (*_ADJUSTMENT, "d-separation", "blocked_path", "backdoor_path")
        and kind not in _ACYCLIC
    ):
        return False
    if q.task_type == "frontdoor_adjustment_set":
        b = _bits(q.graph)
        return bool(b.des[b.index[q.x]] & (1 << b.index[q.y]))
    if q.task_type == "markov_blanket":
        return kind == "DAG"
    return True


def _pool_and_predicate(q: ClearQuestion) -> tuple[list[str], Callable[[int], bool]]:
    """The nodes a valid set may use and the validity predicate on node masks (variant "any")."""
    g, b = q.graph, _bits(q.graph)
    if q.task_type == "blocked_path":
        idx = tuple(b.index[v] for v in q.path.nodes)
        marks = q.path.marks
        pool = g.node_set - {q.path.nodes[0], q.path.nodes[-1]}
        return sorted(pool, key=node_sort_key), lambda m: b.blocked(idx, marks, m)
    x, y = b.index[q.x], b.index[q.y]
    if q.task_type == "backdoor_adjustment_set":
        pool_mask = ((1 << len(b.names)) - 1) & ~((1 << y) | b.des[x])
        pred = functools.partial(b.backdoor, x, y)
    elif q.task_type == "frontdoor_adjustment_set":
        # an ancestor of x in Z leaves the backdoor path x <- ... <- z open: never valid
        pool_mask = ((1 << len(b.names)) - 1) & ~((1 << y) | b.anc[x])
        pred = functools.partial(b.frontdoor, x, y)
    else:  # d-separation
        pool_mask = ((1 << len(b.names)) - 1) & ~((1 << x) | (1 << y))
        pred = functools.partial(b.separated, x, y)
    return [b.names[i] for i in _bits_of(pool_mask)], pred


def _subsets_of(items: list[int], *, proper: bool) -> Iterator[int]:
    for k in range(len(items) - (1 if proper else 0), -1, -1):
        for combo in itertools.combinations(items, k):
            yield sum(combo)


def _set_verdict(q: ClearQuestion, z: frozenset[str], *, claim: bool) -> bool | None:
    """Whether ``z`` answers ``q`` (variant included); ``None`` when that is open or over the caps."""
    g = q.graph
    if q.task_type == "markov_blanket":
        return z == C.markov_blanket(g, q.node)
    conditioning = q.task_type in ("d-separation", "blocked_path")
    if not z <= g.node_set:
        return None if claim and conditioning else False
    ends = {q.path.nodes[0], q.path.nodes[-1]} if q.task_type == "blocked_path" else {q.x, q.y}
    if z & ends:
        return None if claim and conditioning else False
    b = _bits(g)
    pool, pred = _pool_and_predicate(q)
    zm = b.mask(z)
    if not pred(zm):
        return False
    if q.variant == "minimal":
        members = [1 << b.index[v] for v in z]
        if len(members) > MAX_SUBSET_POOL:
            return None
        return not any(pred(m) for m in _subsets_of(members, proper=True))
    if q.variant == "maximal":
        extra = [1 << b.index[v] for v in pool if v not in z]
        if len(extra) > MAX_SUBSET_POOL:
            return None
        return not any(pred(zm | m) for m in _subsets_of(extra, proper=False) if m)
    return True


@functools.lru_cache(maxsize=1024)
def _set_family(q: ClearQuestion) -> tuple[frozenset[str], ...] | None:
    """Every valid set of an adjustment/separation/blocking question (its variant applied)."""
    b = _bits(q.graph)
    pool, pred = _pool_and_predicate(q)
    if len(pool) > MAX_SUBSET_POOL:
        return None
    items = [1 << b.index[v] for v in pool]
    valid = [m for m in _subsets_of(items, proper=False) if pred(m)]
    if q.variant == "minimal":
        valid = [m for m in valid if not any(w != m and w & ~m == 0 for w in valid)]
    elif q.variant == "maximal":
        valid = [m for m in valid if not any(w != m and m & ~w == 0 for w in valid)]
    return tuple(frozenset(b.names[i] for i in _bits_of(m)) for m in valid)


def _set_exists(q: ClearQuestion) -> bool | None:
    if q.variant != "any":  # a valid set exists iff a minimal (maximal) one does
        q = ClearQuestion(q.task_type, q.question_type, q.graph, q.x, q.y, q.node, q.path)
    b = _bits(q.graph)
    pool, pred = _pool_and_predicate(q)
    if len(pool) > MAX_SUBSET_POOL:
        return None
    items = [1 << b.index[v] for v in pool]
    return any(pred(m) for m in _subsets_of(items, proper=False))


@functools.lru_cache(maxsize=1024)
def _path_universe(q: ClearQuestion) -> tuple[_Key, ...] | None:
    """Every backdoor (directed) path from ``q.x`` to ``q.y`` as ``(nodes, marks)``; ``None`` over the cap."""
    if q.task_type not in ("backdoor_path", "directed_path"):
        return None
    b = _bits(q.graph)
    paths = b.paths(b.index[q.x], b.index[q.y], backdoor=q.task_type == "backdoor_path", limit=MAX_PATHS)
    return None if paths is None else tuple(paths)


@functools.lru_cache(maxsize=1024)
def _cycles(g: CausalGraph) -> tuple[tuple[str, ...], ...] | None:
    found = C.simple_cycles(g, limit=MAX_PATHS + 1)
    return None if len(found) > MAX_PATHS else tuple(_rotate(c) for c in found)


def _rotate(cycle: tuple[str, ...]) -> tuple[str, ...]:
    i = min(range(len(cycle)), key=lambda k: node_sort_key(cycle[k]))
    return tuple(cycle[i:] + cycle[:i])


def _cycle_nodes(g: CausalGraph, p: Path, *, claim: bool) -> tuple[str, ...] | bool | None:
    """The forward node cycle of a closed path, ``False`` when it is not a cycle of ``g``.

    Rule (CLEAR_FORMAT.md): every arrow ``->`` (or every arrow ``<-``), each step an edge of ``g`` in
    that direction, last node == first. A closed walk that revisits a node is ``None`` for a claim
    (the labels do not say) and ``False`` for an answer.
    """
    if len(p.nodes) < 3 or p.nodes[0] != p.nodes[-1] or len(set(p.marks)) != 1 or p.marks[0] == "<->":
        return False
    forward = p if p.marks[0] == "->" else p.reversed()
    if not all((a, b) in g.directed for a, b in zip(forward.nodes, forward.nodes[1:])):
        return False
    inner = forward.nodes[:-1]
    if len(set(inner)) != len(inner):
        return None if claim else False
    return inner


def _orient(q: ClearQuestion, p: Path, *, claim: bool) -> Path | None:
    """``p`` read from ``q.x``; a path written from ``q.y`` back to ``q.x`` is ``None`` for a claim."""
    if len(p.nodes) >= 2 and p.nodes[0] == q.y and p.nodes[-1] == q.x:
        return None if claim else p.reversed()
    return p


def _path_verdict(q: ClearQuestion, p: Path, *, claim: bool) -> bool | None:
    g = q.graph
    if q.task_type == "cycle":
        nodes = _cycle_nodes(g, p, claim=claim)
        return nodes if nodes is None else nodes is not False
    if not set(p.nodes) <= g.node_set:
        return False
    p = _orient(q, p, claim=claim)
    if p is None:
        return None
    if q.task_type == "backdoor_path":
        ok = C.is_backdoor_path(g, q.x, q.y, p)
    else:
        ok = C.is_directed_path(g, p) and p.nodes[0] == q.x and p.nodes[-1] == q.y
    if not ok or q.variant not in ("shortest", "longest"):
        return ok
    universe = _path_universe(q)
    if universe is None:
        return None
    lengths = [len(marks) for _, marks in universe]
    return len(p.marks) == (min(lengths) if q.variant == "shortest" else max(lengths))


def _verdict(q: ClearQuestion, value: Any, *, claim: bool) -> bool | None:
    if value is None:
        return None if claim else False
    if q.task_type in _PATH_TASKS:
        return _path_verdict(q, value, claim=claim) if isinstance(value, Path) else False
    return _set_verdict(q, value, claim=claim) if isinstance(value, frozenset) else False


def _truth(q: ClearQuestion) -> bool | None:
    """The right yes/no for a YN or EX question."""
    g = q.graph
    if q.claim is not None:
        return _verdict(q, q.claim, claim=True)
    if q.task_type == "c-component":
        return len(g.districts()) == 1
    if q.task_type in (*_ADJUSTMENT, "d-separation", "blocked_path"):
        return _set_exists(q)
    if q.task_type == "backdoor_path":
        return C.path_exists(g, q.x, q.y, first_marks=("<-", "<->"))
    if q.task_type == "directed_path":
        return C.has_directed_path(g, q.x, q.y)
    if q.task_type == "cycle":
        return g.find_cycle() is not None
    return None


def _universe(q: ClearQuestion) -> tuple | None:
    """Every valid answer of an FA/HM question (sets, paths or node cycles)."""
    if q.task_type in (*_ADJUSTMENT, "d-separation", "blocked_path"):
        return _set_family(q)
    if q.task_type in ("backdoor_path", "directed_path"):
        return _path_universe(q)
    if q.task_type == "cycle":
        return _cycles(q.graph)
    if q.task_type == "c-component":
        return tuple(q.graph.districts())
    if q.task_type == "markov_blanket":
        return tuple(C.markov_blanket(q.graph, q.node))  # HM counts its nodes
    return None


# ---------------------------------------------------------------------------------------------
# candidates
_NUMBER_WORDS = {
    w: i
    for i, w in enumerate(
        ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
         "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
         "nineteen", "twenty")
    )
}  # fmt: skip
_LETTER_RE = re.compile(
    r"\s*(?:(?:the\s+)?(?:correct\s+)?(?:answer|option|choice)\s*(?:is\s*)?[:\-]?\s*)?"
    r"[(\[]?([A-Za-z])[)\]]?(?:\s*[.:)]\s*(?P<rest>.*?))?\s*\.?\s*",
    re.IGNORECASE | re.DOTALL,
)


def _parse_letter(text: str) -> tuple[str, str] | None:
    m = _LETTER_RE.fullmatch(text)
    if not m:
        return None
    return m.group(1).upper(), (m.group("rest") or "").strip()


def _parse_count(candidate: Any) -> int | None:
    if isinstance(candidate, bool):
        return None
    if isinstance(candidate, int):
        return candidate
    if not isinstance(candidate, str) or len(candidate) > 4096:
        return None
    numbers = {int(n) for n in re.findall(r"(?<![\w.])\d{1,6}(?![\w]|\.\d)", candidate)[:16]}
    if not numbers:
        numbers = {_NUMBER_WORDS[w] for w in re.findall(r"[a-z]+", candidate.lower()) if w in _NUMBER_WORDS}
    return numbers.pop() if len(numbers) == 1 else None


def _items(candidate: Any) -> list[str] | str | None:
    """A list candidate as its string members, a string as itself, anything else ``None``."""
    if isinstance(candidate, (list, tuple)):
        if len(candidate) > MAX_ITEMS or not all(isinstance(c, str) for c in candidate):
            return None
        return list(candidate)
    if isinstance(candidate, str) and len(candidate) <= MAX_TEXT_CHARS:
        return candidate
    return None


def _parse_set_list(candidate: Any, limit: int = MAX_ITEMS) -> list[frozenset[str]] | None:
    """A list of sets; ``None`` when unreadable or longer than ``limit`` (a wrong FA answer anyway)."""
    items = _items(candidate)
    if isinstance(items, list):
        if len(items) > limit:
            return None
        values = [_parse_set(c) for c in items]
        return None if any(v is None for v in values) else values
    if items is None:
        return None
    lits = _SET_LIT_RE.findall(items)
    if len(lits) > limit or not _SEPARATORS_RE.fullmatch(_SET_LIT_RE.sub(" ", items)):
        return None
    values = [parse_node_set(lit) for lit in lits]
    return None if any(v is None for v in values) else values


_ARROW_SPLIT_RE = re.compile(r"\s*(<->|->|<-|→|←|↔)\s*")
_FLIP = {"->": "<-", "<-": "->", "<->": "<->"}
_ASCII_MARK = {"->": "->", "→": "->", "<-": "<-", "←": "<-", "<->": "<->", "↔": "<->"}


def _path_key(text: str) -> _Key | None:
    """``"A->B<->C"`` as ``(("A", "B", "C"), ("->", "<->"))`` (quotes and a closing period ignored)."""
    text = text.strip().rstrip(".").strip().strip("'\"`")
    if not _PATH_LIT_RE.fullmatch(text):
        return None
    parts = _ARROW_SPLIT_RE.split(text)
    return tuple(parts[0::2]), tuple(_ASCII_MARK[m] for m in parts[1::2])


def _parse_path_list(candidate: Any, limit: int = MAX_ITEMS, max_chars: int = 4096) -> list[_Key] | None:
    """A list of paths as keys; ``None`` when unreadable, longer than ``limit`` paths, or holding a
    path literal over ``max_chars`` characters (longer than any simple path of the graph)."""
    items = _items(candidate)
    if isinstance(items, list):
        if len(items) > limit:
            return None
        keys = []
        for c in items:
            key = _path_key(c) if len(c) <= max_chars else None
            if key is None and len(c) <= max_chars:
                p = _parse_one_path(c)
                key = None if p is None else (p.nodes, p.marks)
            if key is None:
                return None
            keys.append(key)
        return keys
    if items is None:
        return None
    if re.fullmatch(r"\s*(?:none|no\s+\w+\s+paths?|\[\s*\])\s*\.?\s*", items, re.IGNORECASE):
        return []
    keys, end = [], 0
    for m in _PATH_LIT_RE.finditer(items):
        if len(keys) >= limit or m.end() - m.start() > max_chars:
            return None
        if not _SEPARATORS_RE.fullmatch(items, end, m.start()):
            return None
        parts = _ARROW_SPLIT_RE.split(m.group())
        keys.append((tuple(parts[0::2]), tuple(_ASCII_MARK[a] for a in parts[1::2])))
        end = m.end()
    if not keys or not _SEPARATORS_RE.fullmatch(items, end):
        return None
    return keys


def _single(candidate: Any) -> Any:
    """A one-element list candidate as its element; anything else unchanged."""
    if isinstance(candidate, (list, tuple)) and len(candidate) == 1:
        return candidate[0]
    return candidate


def _parse_value(q: ClearQuestion, candidate: Any) -> frozenset[str] | Path | None:
    candidate = _single(candidate)
    if not isinstance(candidate, str):
        return None
    return _parse_one_path(candidate) if q.task_type in _PATH_TASKS else _parse_set(candidate)


def _judge_all(q: ClearQuestion, candidate: Any) -> bool | None:
    universe = _universe(q)
    if universe is None:
        return None
    # more members than valid answers is wrong: stop reading there (hostile lists stay cheap)
    limit = len(universe) + 1
    max_chars = 72 * len(q.graph.nodes)  # a simple path: <= |V| names of <= 64 chars, arrows
    if isinstance(candidate, str) and len(candidate) > limit * (max_chars + 16) + 64:
        return False
    if q.task_type in ("backdoor_path", "directed_path"):
        paths = _parse_path_list(candidate, limit, max_chars)
        if paths is None:
            return False
        keys = []
        for nodes, marks in paths:
            if nodes[0] == q.y and nodes[-1] == q.x:  # written from the other end
                nodes, marks = nodes[::-1], tuple(_FLIP[m] for m in reversed(marks))
            keys.append((nodes, marks))
        return len(set(keys)) == len(keys) and set(keys) == set(universe)
    if q.task_type == "cycle":
        paths = _parse_path_list(candidate, limit, max_chars)
        if paths is None:
            return False
        keys = []
        for key in paths:
            nodes = _cycle_nodes(q.graph, Path(*key), claim=False)
            if not nodes:
                return False
            keys.append(_rotate(nodes))
        return len(set(keys)) == len(keys) and set(keys) == set(universe)
    sets = _parse_set_list(candidate, limit)
    if sets is None:
        return False
    return len(set(sets)) == len(sets) and set(sets) == set(universe)


def _judge(q: ClearQuestion, candidate: Any) -> bool | None:
    if not _supported(q):
        return None
    qt = q.question_type
    if qt == "MC":
        text = _single(candidate)
        if not isinstance(text, str) or len(text) > 1024:  # a letter, perhaps with its option
            return False
        parsed = _parse_letter(text)
        options = dict(q.options)
        if parsed is None or parsed[0] not in options:
            return False
        letter, rest = parsed
        value = options[letter]
        if value is None:
            return None
        if rest:
            restated = _option_value(q.task_type, rest)
            if restated is not None and restated != value:
                return False
        return _verdict(q, value, claim=True)
    if qt in ("YN", "EX"):
        truth = _truth(q)
        if truth is None:
            return None
        said = parse_yes_no(_single(candidate))
        return said is not None and said == truth
    if qt == "HM":
        universe = _universe(q)
        if universe is None:
            return None
        n = _parse_count(_single(candidate))
        return n is not None and n == len(universe)
    if qt == "FA" and q.task_type != "markov_blanket":
        return _judge_all(q, candidate)
    value = _parse_value(q, candidate)
    if value is None:
        return False
    return _verdict(q, value, claim=False)


def judge(record: Mapping[str, Any], candidate: Any) -> bool | None:
    """Whether ``candidate`` correctly answers a CLEAR record, under the graph predicate.

    Any valid answer counts, not only the listed one (``record["answer"]`` is not read).

    Args:
        record: a CLEAR record (``description``, ``graph_type``, ``question``, ``question_type``,
            ``task_type``).
        candidate: the answer: a set (``"{'M', 'H'}"``, ``"set()"``), a path (``"L<-W->A"``), a
            list of sets or paths for FA (a string such as ``"[{'I', 'Y'}, {'U'}]"`` or
            ``"V->J, V->E->J"``, or an actual list of strings), an option letter, a count, or
            ``Yes.``/``No.``.

    Returns:
        ``True``/``False``; ``None`` when the record is not supported (see :func:`read_question`
        and the open cases in the module docstring). An unreadable candidate is ``False``. Never
        raises.

    Example:
        >>> rec = {"task_type": "backdoor_adjustment_set", "question_type": "FO", "graph_type": "DAG",
        ...        "description": "Given a DAG (directed acyclic graph) with nodes U, X, Y and directed edges U->X, U->Y, X->Y.",
        ...        "question": "Find one valid backdoor adjustment set for treatment X and outcome Y."}
        >>> judge(rec, "{'U'}"), judge(rec, "set()"), judge({**rec, "task_type": "identification"}, "{'U'}")
        (True, False, None)
    """
    try:
        q = read_question(record)
        return None if q is None else _judge(q, candidate)
    except Exception:  # a judge on model output must never raise
        return None


def listed_answers(record: Mapping[str, Any]) -> list[str] | None:
    """The record's listed answer split into candidates :func:`judge` accepts one by one.

    FO answers that list every valid set (``"[{'M', 'H'}, {'M'}]"``) give one string per member
    (``["{'M', 'H'}", "{'M'}"]``); any other answer gives one element (a JSON-array answer, such as
    backdoor_path FA, as its JSON text). ``None`` when there is no readable answer.

    Example:
        >>> listed_answers({"question_type": "FO", "answer": "[{'M', 'H'}, set()]"})
        ["{'M', 'H'}", 'set()']
    """
    if not isinstance(record, Mapping):
        return None
    answer = record.get("answer")
    qtype = str(record.get("question_type", ""))[:8].strip().upper()
    if isinstance(answer, (list, tuple)):
        if len(answer) > MAX_ITEMS or not all(isinstance(a, str) for a in answer):
            return None
        return list(answer) if qtype == "FO" else [json.dumps(list(answer))]
    if isinstance(answer, bool) or answer is None:
        return None
    if isinstance(answer, int):
        return [str(answer)]
    if not isinstance(answer, str) or len(answer) > MAX_TEXT_CHARS:
        return None
    text = answer.strip()
    if qtype == "FO" and text.startswith("[") and text.endswith("]"):
        inner = text[1:-1]
        sets = _SET_LIT_RE.findall(inner)
        if sets and _SEPARATORS_RE.fullmatch(_SET_LIT_RE.sub(" ", inner)):
            return sets
        paths = _PATH_LIT_RE.findall(inner)
        if paths and _SEPARATORS_RE.fullmatch(_PATH_LIT_RE.sub(" ", inner)):
            return paths
    return [answer]


# ---------------------------------------------------------------------------------------------
# CLEAR -> CALVER problems
def to_problem(record: Mapping[str, Any]) -> dict[str, Any] | None:
    """A CLEAR adjustment-set or separation record as a DESIGN §4 problem that CALVER scores.

    Converted: FO records of ``backdoor_adjustment_set`` (any/minimal/maximal),
    ``frontdoor_adjustment_set`` (any/minimal/maximal) and ``d-separation`` (any/minimal) become
    ``backdoor_set`` / ``frontdoor_set`` / ``dsep_set`` (DAG) or ``msep_set`` (ADMG) queries, and
    d-separation YN records (``Are node A and node B d-separated by nodeset {...}?``) become
    ``ci_test`` queries. A variant is written only when it is not ``"any"``; a combination that
    :mod:`faithgrpo.tasks.queries` does not accept yet (``check_query`` raises) gives ``None``.

    Not converted (``None``): backdoor/frontdoor YN records, since no query kind asks whether a
    *given* set is valid; front-door records whose treatment has no directed path to the outcome
    (the judge leaves them open too); every other task or question type.

    Returns:
        ``{"graph", "query", "text", "mode": "supplied", "clear": {"uid", "sid", "task_type",
        "question_type"}}`` with ``text`` from :func:`faithgrpo.tasks.prompts.problem_text`, or
        ``None``.
    """
    q = read_question(record)
    if q is None or q.question_type not in ("FO", "YN") or not _supported(q):
        return None
    g = q.graph
    query: dict[str, Any]
    if q.task_type in _ADJUSTMENT and q.question_type == "FO":
        kind = "backdoor_set" if q.task_type == "backdoor_adjustment_set" else "frontdoor_set"
        query = {"kind": kind, "treatment": q.x, "outcome": q.y}
    elif q.task_type == "d-separation" and q.question_type == "FO":
        kind = "dsep_set" if g.kind == "DAG" else "msep_set"
        query = {"kind": kind, "x": q.x, "y": q.y}
    elif q.task_type == "d-separation" and isinstance(q.claim, frozenset):
        kind = "ci_test"
        query = {"kind": kind, "x": q.x, "y": q.y, "given": sorted(q.claim, key=node_sort_key)}
    else:
        return None
    if q.variant != "any":
        query["variant"] = q.variant
    try:
        QUERY_KINDS[kind].check_query(g, query)
    except ValueError:
        return None
    from faithgrpo.tasks.prompts import problem_text

    return {
        "graph": g.to_dict(),
        "query": query,
        "text": problem_text(g, query),
        "mode": "supplied",
        "clear": {
            "uid": record.get("uid"),
            "sid": record.get("sid"),
            "task_type": q.task_type,
            "question_type": q.question_type,
        },
    }


# ---------------------------------------------------------------------------------------------
# files
def _files(path: str | FsPath) -> list[FsPath]:
    p = FsPath(path)
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.is_file() and f.suffix in (".json", ".jsonl"))
        if not files:
            raise ValueError(f"{p}: no .json or .jsonl files in the directory")
        return files
    if p.is_file():
        return [p]
    raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(p))


def _iter_records(path: str | FsPath) -> Iterator[tuple[FsPath, int, Any]]:
    """``(file, line, value)`` per non-blank line (``value`` is ``None`` for a line that is not JSON)."""
    for f in _files(path):
        with open(f, encoding="utf-8") as fh:
            text = fh.read()
        if text.lstrip().startswith("["):  # a whole-file JSON array
            try:
                values = json.loads(text)
            except json.JSONDecodeError:
                values = None
            if isinstance(values, list):
                for i, value in enumerate(values, 1):
                    yield f, i, value
                continue
        for i, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                yield f, i, json.loads(line)
            except json.JSONDecodeError:
                yield f, i, None


def load_records(path: str | FsPath) -> list[dict[str, Any]]:
    """Read CLEAR records from a JSON-Lines file or a directory of them (CLEAR's ``data/json_single/``).

    A directory contributes its ``*.json`` and ``*.jsonl`` files in name order; CLEAR's
    ``<task_type>.json`` files are JSON Lines despite the suffix (a whole-file JSON array is read
    too).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: a line that is not a JSON object, named as ``file:line``; a directory without
            record files.
    """
    out = []
    for f, line, value in _iter_records(path):
        if not isinstance(value, dict):
            raise ValueError(f"{f}:{line}: not a JSON object (one CLEAR record per line expected)")
        out.append(value)
    return out


def _record_verdict(record: Mapping[str, Any]) -> bool | None:
    listed = listed_answers(record)
    if not listed:
        return judge(record, record.get("answer"))
    verdicts = [judge(record, a) for a in listed]
    if any(v is None for v in verdicts):
        return None
    return all(verdicts)


_COUNTS = ("total", "judged", "accepted", "rejected", "unsupported")


def evaluate_file(path: str | FsPath) -> dict[str, Any]:
    """Judge every CLEAR record's own listed answer (a file or a directory of files).

    An FO answer listing every valid set is accepted when each member is (see
    :func:`listed_answers`).

    Returns:
        ``{"by_type": {task_type: {question_type: counts}}, "overall": counts, "bad_lines": n,
        "files": n}`` with ``counts = {"total", "judged", "accepted", "rejected", "unsupported"}``
        (``judged = accepted + rejected``). Lines that are not JSON objects count in
        ``bad_lines`` only.

    Raises:
        FileNotFoundError: ``path`` does not exist. ValueError: a directory without record files.
    """
    by_type: dict[str, dict[str, dict[str, int]]] = {}
    overall = dict.fromkeys(_COUNTS, 0)
    bad = 0
    files = set()
    for f, _line, record in _iter_records(path):
        files.add(f)
        if not isinstance(record, dict):
            bad += 1
            continue
        verdict = _record_verdict(record)
        outcome = "unsupported" if verdict is None else ("accepted" if verdict else "rejected")
        task = str(record.get("task_type", "?"))[:64]
        qtype = str(record.get("question_type", "?"))[:8]
        counts = by_type.setdefault(task, {}).setdefault(qtype, dict.fromkeys(_COUNTS, 0))
        for c in (counts, overall):
            c["total"] += 1
            c[outcome] += 1
            if verdict is not None:
                c["judged"] += 1
    return {"by_type": by_type, "overall": overall, "bad_lines": bad, "files": len(files)}


def format_summary(summary: Mapping[str, Any]) -> str:
    """Render :func:`evaluate_file`'s summary as a table, one row per task type and question type."""
    header = f"{'task_type':<28} {'qtype':<5} " + " ".join(f"{c:>11}" for c in _COUNTS)
    lines = [header, "-" * len(header)]

    def row(task: str, qtype: str, c: Mapping[str, int]) -> str:
        return f"{task:<28} {qtype:<5} " + " ".join(f"{c.get(k, 0):>11}" for k in _COUNTS)

    for task in sorted(summary.get("by_type", {})):
        for qtype in sorted(summary["by_type"][task]):
            lines.append(row(task, qtype, summary["by_type"][task][qtype]))
    lines.append("-" * len(header))
    lines.append(row("all", "", summary.get("overall", dict.fromkeys(_COUNTS, 0))))
    if summary.get("bad_lines"):
        lines.append(f"{summary['bad_lines']} line(s) were not JSON records and were skipped")
    return "\n".join(lines)


def _clear_caches() -> None:
    """Empty the parse and enumeration caches (benchmarks measure cold judgements with it)."""
    for fn in (_read, _bits, _set_family, _path_universe, _cycles):
        fn.cache_clear()
