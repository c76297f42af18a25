"""CLEAR-format adapter: judge a candidate answer to a CLEAR record under the graph predicate.

CLEAR records (Chen et al., 2024) are ``{description, graph_type, question, answer,
question_type, task_type}``. The description reads like "Given a DAG (directed acyclic graph) with
nodes A, B, C and directed edges A->B, B->C." (ADMGs add "and bi-directed edges A<->C").
:func:`judge` parses the graph and the question, then decides a candidate answer with the
predicates of :mod:`faithgrpo.tasks.criteria`, so *any* graph-valid answer counts, not only the
listed one.

Question types
--------------
``FO`` find one: the candidate must be valid. ``FA`` find all: a list of every valid answer (a
set for ``markov_blanket``). ``HM`` how many: the number of valid answers. ``EX`` existence and
``YN`` yes/no: "Yes."/"No."; a YN question that states a claim (a set, path or cycle literal) is
the claim's validity, otherwise existence. ``MC`` multiple choice: options are question lines
``A. {'X'}``; the chosen letter's option must be valid (invalid when the stem says "not").

Task types (what a valid answer is)
-----------------------------------
==========================  ========================  =========================================
task type                   roles read from question  valid answer
==========================  ========================  =========================================
backdoor_adjustment_set     pair (X, Y)               set satisfying the backdoor criterion
frontdoor_adjustment_set    pair (X, Y)               set satisfying Pearl's front-door criterion
d-separation                pair (X, Y)               set Z (X, Y ∉ Z) m-separating X and Y
blocked_path                a path literal            set Z (endpoints ∉ Z) blocking the path
backdoor_path               pair or path endpoints    backdoor path from X to Y (either direction)
directed_path               pair or path endpoints    directed path X -> ... -> Y
cycle                       none                      simple directed cycle (list or A->B->A)
markov_blanket              one node                  the Markov blanket (collider-connected set)
c-component                 optional node             a district (maximal bidirected-connected
                                                      set); with a node, the district holding it
==========================  ========================  =========================================

Roles are read leniently: an ordered pair ``(X, Y)``, "from X to Y", "between X and Y", "of X on
Y", "X and Y"; one node from "of X"/"for X"/"containing X". Sets are Python literals
(``{'A', 'B'}``, ``set()``), paths ``A->B<-C``. Every parser is bounded and nothing is evaluated.
:func:`judge` returns ``None`` when it cannot support a record (unknown type, unparsable graph or
question, enumeration over the caps); an unparsable *candidate* is simply wrong (``False``).
"""

from __future__ import annotations

import itertools
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path as FsPath
from typing import Any

from faithgrpo.tasks import criteria as C
from faithgrpo.tasks.graph import (
    NODE_RE,
    CausalGraph,
    GraphParseError,
    Path,
    node_sort_key,
    parse_graph,
    parse_path,
)
from faithgrpo.tasks.queries import parse_cycle, parse_node_set, parse_yes_no

__all__ = [
    "QUESTION_TYPES",
    "TASK_TYPES",
    "evaluate_file",
    "format_summary",
    "judge",
    "normalize_task_type",
    "parse_description",
]

QUESTION_TYPES = ("FO", "FA", "HM", "YN", "EX", "MC")
MAX_TEXT_CHARS = 50_000
MAX_GRAPH_NODES = 64
MAX_SUBSET_POOL = 14  # FA/HM over sets enumerate 2^pool subsets
MAX_ITEMS = 4_096  # paths or sets in one FA answer
MAX_PATHS = 10_000

_SET_LIT_RE = re.compile(r"\{[^{}]{0,2000}\}|\bset\(\)")
_PATH_LIT_RE = re.compile(r"[A-Za-z0-9_]+(?:\s*(?:<->|->|<-|→|←|↔)\s*[A-Za-z0-9_]+)+")
_OPTION_RE = re.compile(r"^\s*\(?([A-Z])[.):]\s+(.+?)\s*$", re.MULTILINE)
_LETTER_RE = re.compile(r"^\W*(?:option\s+|answer\s*:?\s*)?\(?([A-Z])\b(?![A-Za-z0-9_])", re.IGNORECASE)
_INT_RE = re.compile(r"(?<![\w.])(\d{1,6})(?![\w.]\d)")
_NUMBER_WORDS = {
    w: i
    for i, w in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
        ]
    )
}
_NODE = r"['\"]?([A-Za-z0-9_]+)['\"]?"
_PAIR_PATTERNS = [
    re.compile(r"\(\s*" + _NODE + r"\s*,\s*" + _NODE + r"\s*\)"),
    re.compile(r"\bfrom\s+(?:node\s+)?" + _NODE + r"\s+to\s+(?:node\s+)?" + _NODE, re.IGNORECASE),
    re.compile(r"\bbetween\s+(?:nodes?\s+)?" + _NODE + r"\s+and\s+(?:node\s+)?" + _NODE, re.IGNORECASE),
    re.compile(r"\bof\s+" + _NODE + r"\s+on\s+" + _NODE, re.IGNORECASE),
    re.compile(r"(?<![A-Za-z0-9_'\"])" + _NODE + r"\s+and\s+" + _NODE + r"(?![A-Za-z0-9_])"),
]
_ONE_PATTERNS = [
    re.compile(
        r"\b(?:of|for|containing|contains|contain|including|includes)\s+(?:the\s+)?(?:node\s+)?" + _NODE
    ),
]


def normalize_task_type(name: Any) -> str:
    """``"d-separation"`` -> ``"d_separation"``, ``"Backdoor Adjustment Set"`` -> ``"backdoor_adjustment_set"``."""
    return re.sub(r"[^a-z0-9]+", "_", str(name).lower()).strip("_")


# ---------------------------------------------------------------------------------------------
# description
_KW_RE = re.compile(
    r"(?P<nodes>\bnodes?\b)|(?P<bi>\bbi-?directed\s+edges?\b)|(?P<dir>(?<![-\w])directed\s+edges?\b)"
    r"|(?P<none>\bno\s+edges\b)",
    re.IGNORECASE,
)


def parse_description(description: str, graph_type: str | None = None) -> CausalGraph:
    """Parse a CLEAR description ("Given a DAG ... with nodes A, B and directed edges A->B.") into a graph.

    The kind is DAG, ADMG when bidirected edges appear, and DG when the directed edges form a cycle
    (cycle tasks); ``graph_type`` is only used as a hint for ADMGs without bidirected edges.

    Raises:
        GraphParseError: when the description has no node list or malformed edges.

    Example:
        >>> parse_description("Given a DAG with nodes A, B and C and directed edges A->B, B->C.").edge_text()
        'A -> B; B -> C'
    """
    if not isinstance(description, str) or len(description) > MAX_TEXT_CHARS:
        raise GraphParseError("description must be a string of at most 50,000 characters")
    marks = list(_KW_RE.finditer(description))
    sections: dict[str, str] = {}
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(description)
        chunk = description[m.end() : end]
        chunk = re.split(r"\.(?:\s|$)", chunk, maxsplit=1)[0]  # a sentence ends the list
        chunk = re.sub(r"(?:,|\band\b|\s)+$", "", chunk.strip(" :"))
        sections.setdefault(m.lastgroup or "", chunk)
    if "nodes" not in sections:
        raise GraphParseError("description has no 'nodes' list")
    nodes = [t for t in re.split(r"[,\s]+|\band\b", sections["nodes"]) if t]
    if not nodes or not all(NODE_RE.fullmatch(v) for v in nodes):
        raise GraphParseError(f"cannot read the node list {sections['nodes'][:80]!r}")
    edges = "; ".join(sections.get(k, "") for k in ("dir", "bi") if sections.get(k))
    g = parse_graph(edges or "", nodes=nodes, max_nodes=MAX_GRAPH_NODES) if edges else None
    if g is None:
        kind = "ADMG" if normalize_task_type(graph_type or "") == "admg" else "DAG"
        g = CausalGraph(kind, tuple(dict.fromkeys(nodes))).validate()
    extra = set(g.nodes) - set(nodes)
    if extra:
        raise GraphParseError(f"edges use node(s) {sorted(extra)} missing from the node list")
    return g


# ---------------------------------------------------------------------------------------------
# question reading
def _options(question: str) -> tuple[str, list[tuple[str, str]]]:
    """Split a question into its stem and ``[(letter, text), ...]`` option lines (>= 2 to count)."""
    opts = [(m.group(1).upper(), m.group(2)) for m in _OPTION_RE.finditer(question)]
    letters = [o[0] for o in opts]
    if len(opts) < 2 or len(set(letters)) != len(letters):
        return question, []
    return _OPTION_RE.sub("", question).strip(), opts


def _pair(g: CausalGraph, stem: str) -> tuple[str, str] | None:
    for pat in _PAIR_PATTERNS:
        for m in pat.finditer(stem):
            x, y = m.group(1), m.group(2)
            if x in g.node_set and y in g.node_set and x != y:
                return x, y
    return None


def _one(g: CausalGraph, stem: str) -> str | None:
    for pat in _ONE_PATTERNS:
        for m in pat.finditer(stem):
            if m.group(1) in g.node_set:
                return m.group(1)
    return None


def _set_literals(text: str) -> list[frozenset[str]] | None:
    out = []
    for lit in _SET_LIT_RE.findall(text):
        value = parse_node_set(lit)
        if value is None:
            return None
        out.append(value)
    return out


def _path_literals(text: str) -> list[Path]:
    out = []
    for lit in _PATH_LIT_RE.findall(text)[:MAX_ITEMS]:
        try:
            out.append(parse_path(lit))
        except GraphParseError:
            continue
    return out


def _orient(path: Path, x: str) -> Path:
    return path.reversed() if path.nodes and path.nodes[0] != x and path.nodes[-1] == x else path


def _rotate(cycle: tuple[str, ...]) -> tuple[str, ...]:
    i = min(range(len(cycle)), key=lambda k: node_sort_key(cycle[k]))
    return cycle[i:] + cycle[:i]


# ---------------------------------------------------------------------------------------------
# task definitions
@dataclass(frozen=True)
class _Ctx:
    graph: CausalGraph
    stem: str
    x: str | None = None
    y: str | None = None
    node: str | None = None
    path: Path | None = None  # the path a blocked_path question is about


@dataclass(frozen=True)
class _Task:
    value: str  # "set" | "path" | "cycle"
    roles: Callable[[CausalGraph, str], _Ctx | None]
    valid: Callable[[_Ctx, Any], bool]
    universe: Callable[[_Ctx], list | None]  # every valid answer, or None over the caps
    count: Callable[[_Ctx], int | None] | None = None


def _subsets_valid(ctx: _Ctx, pool: Iterable[str], ok: Callable[[frozenset[str]], bool]) -> list | None:
    items = sorted(pool, key=node_sort_key)
    if len(items) > MAX_SUBSET_POOL:
        return None
    return [
        frozenset(c)
        for k in range(len(items) + 1)
        for c in itertools.combinations(items, k)
        if ok(frozenset(c))
    ]


def _pair_roles(g: CausalGraph, stem: str) -> _Ctx | None:
    pair = _pair(g, stem)
    return None if pair is None else _Ctx(g, stem, x=pair[0], y=pair[1])


def _path_pair_roles(g: CausalGraph, stem: str) -> _Ctx | None:
    pair = _pair(g, stem)
    if pair is None:
        paths = _path_literals(stem)
        if len(paths) != 1 or len(paths[0].nodes) < 2:
            return None
        pair = (paths[0].nodes[0], paths[0].nodes[-1])
        if not set(pair) <= g.node_set:
            return None
    return _Ctx(g, stem, x=pair[0], y=pair[1])


def _blocked_roles(g: CausalGraph, stem: str) -> _Ctx | None:
    paths = [p for p in _path_literals(stem) if C.is_path(g, p)]
    return _Ctx(g, stem, path=paths[0]) if len(paths) == 1 else None


def _acyclic(ctx: _Ctx) -> bool:
    return ctx.graph.kind != "DG"


def _sep_ok(ctx: _Ctx, z: frozenset[str]) -> bool:
    return _acyclic(ctx) and not ({ctx.x, ctx.y} & z) and C.m_separated(ctx.graph, ctx.x, ctx.y, z)


def _blocked_ok(ctx: _Ctx, z: frozenset[str]) -> bool:
    ends = {ctx.path.nodes[0], ctx.path.nodes[-1]}
    return not (ends & z) and C.path_is_blocked(ctx.graph, ctx.path, z)


def _backdoor_path_ok(ctx: _Ctx, p: Path) -> bool:
    return C.is_backdoor_path(ctx.graph, ctx.x, ctx.y, _orient(p, ctx.x))


def _directed_path_ok(ctx: _Ctx, p: Path) -> bool:
    return C.is_directed_path(ctx.graph, p) and p.nodes[0] == ctx.x and p.nodes[-1] == ctx.y


def _capped_paths(items: list) -> list | None:
    return None if len(items) > MAX_PATHS else items


def _district_ctx(g: CausalGraph, stem: str) -> _Ctx:
    return _Ctx(g, stem, node=_one(g, stem))


def _district_ok(ctx: _Ctx, z: frozenset[str]) -> bool:
    if ctx.node is not None:
        return z == ctx.graph.district(ctx.node)
    return bool(z) and z <= ctx.graph.node_set and z == ctx.graph.district(next(iter(z)))


def _district_universe(ctx: _Ctx) -> list:
    return [ctx.graph.district(ctx.node)] if ctx.node else ctx.graph.districts()


def _district_count(ctx: _Ctx) -> int:
    return len(ctx.graph.district(ctx.node)) if ctx.node else len(ctx.graph.districts())


def _mb_roles(g: CausalGraph, stem: str) -> _Ctx | None:
    node = _one(g, stem)
    return None if node is None else _Ctx(g, stem, node=node)


TASK_TYPES: dict[str, _Task] = {
    "backdoor_adjustment_set": _Task(
        "set",
        _pair_roles,
        lambda c, z: _acyclic(c) and C.is_backdoor_set(c.graph, c.x, c.y, z),
        lambda c: (
            _subsets_valid(
                c, C.backdoor_candidates(c.graph, c.x, c.y), lambda z: C.is_backdoor_set(c.graph, c.x, c.y, z)
            )
            if _acyclic(c)
            else None
        ),
    ),
    "frontdoor_adjustment_set": _Task(
        "set",
        _pair_roles,
        lambda c, z: _acyclic(c) and C.is_frontdoor_set(c.graph, c.x, c.y, z),
        lambda c: (
            _subsets_valid(
                c, c.graph.node_set - {c.x, c.y}, lambda z: C.is_frontdoor_set(c.graph, c.x, c.y, z)
            )
            if _acyclic(c)
            else None
        ),
    ),
    "d_separation": _Task(
        "set",
        _pair_roles,
        _sep_ok,
        lambda c: (
            _subsets_valid(c, c.graph.node_set - {c.x, c.y}, lambda z: _sep_ok(c, z)) if _acyclic(c) else None
        ),
    ),
    "blocked_path": _Task(
        "set",
        _blocked_roles,
        _blocked_ok,
        lambda c: _subsets_valid(
            c, c.graph.node_set - {c.path.nodes[0], c.path.nodes[-1]}, lambda z: _blocked_ok(c, z)
        ),
    ),
    "backdoor_path": _Task(
        "path",
        _path_pair_roles,
        _backdoor_path_ok,
        lambda c: _capped_paths(C.backdoor_paths(c.graph, c.x, c.y, limit=MAX_PATHS + 1)),
    ),
    "directed_path": _Task(
        "path",
        _path_pair_roles,
        _directed_path_ok,
        lambda c: _capped_paths(C.directed_paths(c.graph, c.x, c.y, limit=MAX_PATHS + 1)),
    ),
    "cycle": _Task(
        "cycle",
        lambda g, stem: _Ctx(g, stem),
        lambda c, seq: C.is_directed_cycle(c.graph, seq),
        lambda c: _capped_paths(C.simple_cycles(c.graph, limit=MAX_PATHS + 1)),
    ),
    "markov_blanket": _Task(
        "set",
        _mb_roles,
        lambda c, z: z == C.markov_blanket(c.graph, c.node),
        lambda c: [C.markov_blanket(c.graph, c.node)],
        count=lambda c: len(C.markov_blanket(c.graph, c.node)),
    ),
    "c_component": _Task("set", _district_ctx, _district_ok, _district_universe, count=_district_count),
}


# ---------------------------------------------------------------------------------------------
# candidate values
def _parse_value(kind: str, text: str) -> Any:
    """One FO value from answer text: a set, a path or a cycle; ``None`` when unparsable."""
    if kind == "set":
        return parse_node_set(text)
    if kind == "cycle":
        return parse_cycle(text.strip().strip("'\"`"))
    paths = _path_literals(text)
    return paths[0] if len(paths) == 1 else None


def _parse_many(kind: str, text: str) -> list | None:
    """A list of values (FA answers): ``[{'A'}, set()]``, ``['A->B', 'A->C->B']``, ``[[A, B], [C, D]]``."""
    if len(text) > MAX_TEXT_CHARS:
        return None
    if kind == "set":
        lits = _SET_LIT_RE.findall(text)
        rest = _SET_LIT_RE.sub(" ", text)
        if len(lits) > MAX_ITEMS or re.search(r"[^\s,;\[\]()'\"]", rest):
            return None
        values = [parse_node_set(lit) for lit in lits]
        return None if any(v is None for v in values) else values
    if kind == "cycle":
        inner = text.strip()
        if inner.startswith("[") and inner.endswith("]") and "[" in inner[1:]:
            inner = inner[1:-1]
        chunks = re.findall(r"\[[^\[\]]*\]", inner) or _PATH_LIT_RE.findall(inner)
        values = [parse_cycle(ch) for ch in chunks[: MAX_ITEMS + 1]]
        return None if not values or len(values) > MAX_ITEMS or any(v is None for v in values) else values
    paths = _path_literals(text)
    rest = _PATH_LIT_RE.sub(" ", text)
    if len(paths) > MAX_ITEMS or re.search(r"[^\s,;\[\]()'\"]", rest):
        return None
    return paths


def _key(kind: str, ctx: _Ctx, value: Any) -> Any:
    """Canonical key for comparing FA answers with the enumerated universe."""
    if kind == "path":
        p = _orient(value, ctx.x) if ctx.x else value
        return (p.nodes, p.marks)
    if kind == "cycle":
        return _rotate(tuple(value))
    return frozenset(value)


def _parse_count(text: str) -> int | None:
    m = _INT_RE.search(text)
    if m:
        return int(m.group(1))
    words = [w for w in re.findall(r"[a-z]+", text.lower()) if w in _NUMBER_WORDS]
    return _NUMBER_WORDS[words[0]] if words else None


def _parse_letter(text: str, letters: Iterable[str]) -> str | None:
    m = _LETTER_RE.match(text.strip())
    if not m:
        return None
    letter = m.group(1).upper()
    return letter if letter in letters else None


def _nodes_of(kind: str, value: Any) -> set[str]:
    return set(value.nodes) if kind == "path" else set(value)


def _is_valid(task: _Task, ctx: _Ctx, value: Any) -> bool:
    """``task.valid`` for a parsed candidate; nodes outside the graph make it invalid, never unsupported."""
    if not _nodes_of(task.value, value) <= ctx.graph.node_set:
        return False
    try:
        return bool(task.valid(ctx, value))
    except ValueError:
        return False


# ---------------------------------------------------------------------------------------------
def _claim(task: _Task, ctx: _Ctx, task_type: str) -> Any:
    """The set/path/cycle a YN question asserts, or ``None`` when it asserts none."""
    stem = ctx.stem
    if task.value == "set":
        sets = _set_literals(stem)
        if sets is None or len(sets) > 1:
            raise _Unsupported
        return sets[0] if sets else None
    paths = _path_literals(stem)
    if task_type == "cycle":
        lists = re.findall(r"\[[^\[\]]*\]", stem)
        found = [parse_cycle(p.compact()) for p in paths] + [parse_cycle(lit) for lit in lists]
        paths = [c for c in found if c is not None]
    if len(paths) > 1:
        raise _Unsupported
    return paths[0] if paths else None


class _Unsupported(Exception):
    """A question the adapter cannot read (e.g. two competing claims)."""


def _yes_no_truth(task: _Task, ctx: _Ctx, task_type: str) -> bool | None:
    claim = _claim(task, ctx, task_type)
    if task_type == "blocked_path":
        return _blocked_ok(ctx, claim or frozenset())  # no set: blocked with no conditioning
    if claim is not None:
        return _is_valid(task, ctx, claim)
    lowered = ctx.stem.lower()
    if task_type == "markov_blanket":
        m = re.search(
            r"\bis\s+" + _NODE + r"\s+(?:in|part of|a member of)\s+the\s+markov\s+blanket", ctx.stem, re.I
        )
        if m and m.group(1) in ctx.graph.node_set:
            return m.group(1) in C.markov_blanket(ctx.graph, ctx.node)
        return None
    if task_type == "d_separation":
        if re.search(
            r"\b(marginally|unconditionally|empty set|without conditioning|no conditioning)\b", lowered
        ):
            return _sep_ok(ctx, frozenset())
        if "exist" not in lowered:
            return None
    universe = task.universe(ctx)
    return None if universe is None else bool(universe)


def judge(record: Mapping[str, Any], candidate: Any) -> bool | None:
    """Whether ``candidate`` correctly answers a CLEAR record, under the graph predicate.

    Args:
        record: ``{description, graph_type, question, answer, question_type, task_type}``
            (``answer`` is not read).
        candidate: the answer text to judge, e.g. ``"{'B', 'C'}"``, ``"Yes."``, ``"A->B<-C"``,
            ``"B"`` for multiple choice, ``"3"`` for how-many.

    Returns:
        ``True``/``False``; ``None`` when the record is unsupported (task or question type not
        handled, graph or question unparsable, enumeration over the caps). Never raises.

    Example:
        >>> rec = {"description": "Given a DAG with nodes U, X, Y and directed edges U->X, U->Y, X->Y.",
        ...        "graph_type": "DAG", "task_type": "backdoor_adjustment_set", "question_type": "FO",
        ...        "question": "Find one backdoor adjustment set for the ordered pair (X, Y).", "answer": "{'U'}"}
        >>> judge(rec, "{'U'}"), judge(rec, "set()"), judge({**rec, "task_type": "identification"}, "x")
        (True, False, None)
    """
    try:
        return _judge(record, candidate)
    except _Unsupported:
        return None
    except (GraphParseError, ValueError, KeyError, TypeError, IndexError, RecursionError):
        return None


def _judge(record: Mapping[str, Any], candidate: Any) -> bool | None:
    if not isinstance(record, Mapping):
        return None
    task_type = normalize_task_type(record.get("task_type", ""))
    qtype = str(record.get("question_type", "")).strip().upper()
    task = TASK_TYPES.get(task_type)
    question = record.get("question")
    if task is None or qtype not in QUESTION_TYPES or not isinstance(question, str):
        return None
    if len(question) > MAX_TEXT_CHARS:
        return None
    graph = parse_description(record.get("description", ""), record.get("graph_type"))
    stem, options = _options(question) if qtype == "MC" else (question, [])
    if qtype == "MC" and not options:
        return None
    ctx = task.roles(graph, stem)
    if ctx is None:
        return None
    if not isinstance(candidate, str) or len(candidate) > MAX_TEXT_CHARS:
        return False
    text = candidate.strip()

    if qtype == "FO":
        value = _parse_value(task.value, text)
        return value is not None and _is_valid(task, ctx, value)
    if qtype in ("YN", "EX"):
        if qtype == "YN":
            truth = _yes_no_truth(task, ctx, task_type)
        else:
            universe = task.universe(ctx)
            truth = None if universe is None else bool(universe)
        if truth is None:
            return None
        said = parse_yes_no(text)
        return said is not None and said == truth
    if qtype == "MC":
        letter = _parse_letter(text, [o[0] for o in options])
        if letter is None:
            return False
        option_text = dict(options)[letter]
        value = _parse_value(task.value, option_text)
        if value is None:
            return None  # options we cannot read are unsupported, not wrong
        want_valid = not re.search(r"\bnot\b|n't\b", stem, re.IGNORECASE)
        return _is_valid(task, ctx, value) == want_valid
    universe = task.universe(ctx)
    if universe is None:
        return None
    if qtype == "HM":
        n = _parse_count(text)
        expected = task.count(ctx) if task.count else len(universe)
        return n is not None and n == expected
    # FA
    if task_type == "markov_blanket" or (task_type == "c_component" and ctx.node):
        value = parse_node_set(text)
        return value is not None and value == universe[0]
    values = _parse_many(task.value, text)
    if values is None:
        return False
    got = Counter(_key(task.value, ctx, v) for v in values)
    return set(got) == {_key(task.value, ctx, v) for v in universe} and max(got.values(), default=1) == 1


# ---------------------------------------------------------------------------------------------
def evaluate_file(path: str | FsPath) -> dict[str, Any]:
    """Judge every record of a CLEAR JSONL file with its own listed ``answer``.

    Args:
        path: a ``.jsonl`` file, one CLEAR record per line (blank lines skipped).

    Returns:
        ``{"by_type": {task_type: {question_type: counts}}, "overall": counts, "bad_lines": n}``
        where ``counts = {"total", "accepted", "rejected", "unsupported"}``; ``accepted`` counts
        records whose listed answer the judge accepts. Lines that are not JSON objects count in
        ``bad_lines`` only.

    Raises:
        FileNotFoundError / OSError: the file cannot be read.

    Example:
        >>> summary = evaluate_file("tests/data/clear_records.jsonl")  # doctest: +SKIP
        >>> summary["overall"]["accepted"] == summary["overall"]["total"]  # doctest: +SKIP
        True
    """
    by_type: dict[str, dict[str, dict[str, int]]] = {}
    overall = dict.fromkeys(("total", "accepted", "rejected", "unsupported"), 0)
    bad = 0
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                bad += 1
                continue
            if not isinstance(record, dict):
                bad += 1
                continue
            verdict = judge(record, record.get("answer"))
            outcome = "unsupported" if verdict is None else ("accepted" if verdict else "rejected")
            task = str(record.get("task_type", "?"))
            qtype = str(record.get("question_type", "?"))
            counts = by_type.setdefault(task, {}).setdefault(
                qtype, dict.fromkeys(("total", "accepted", "rejected", "unsupported"), 0)
            )
            for c in (counts, overall):
                c["total"] += 1
                c[outcome] += 1
    return {"by_type": by_type, "overall": overall, "bad_lines": bad}


def format_summary(summary: Mapping[str, Any]) -> str:
    """Render :func:`evaluate_file`'s summary as a fixed-width table, one row per task/question type."""
    header = (
        f"{'task_type':<28} {'qtype':<5} {'total':>6} {'accepted':>9} {'rejected':>9} {'unsupported':>12}"
    )
    lines = [header, "-" * len(header)]

    def row(task: str, qtype: str, c: Mapping[str, int]) -> str:
        return f"{task:<28} {qtype:<5} {c['total']:>6} {c['accepted']:>9} {c['rejected']:>9} {c['unsupported']:>12}"

    for task in sorted(summary.get("by_type", {})):
        for qtype in sorted(summary["by_type"][task]):
            lines.append(row(task, qtype, summary["by_type"][task][qtype]))
    lines.append("-" * len(header))
    lines.append(
        row(
            "all",
            "",
            summary.get("overall", dict.fromkeys(("total", "accepted", "rejected", "unsupported"), 0)),
        )
    )
    if summary.get("bad_lines"):
        lines.append(f"{summary['bad_lines']} line(s) were not JSON records and were skipped")
    return "\n".join(lines)
