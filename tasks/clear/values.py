"""The typed reading of a CLEAR record (:class:`ClearQuestion`) and the bounded readers of values.

Shared by the question readers (:mod:`~faithgrpo.tasks.clear.questions`,
:mod:`~faithgrpo.tasks.clear.forms`) and the judges: template pieces (names, sets, paths), the
split of a multiple-choice question into its options, and the readers of candidate sets, paths,
option letters and counts. The record format is described in :mod:`faithgrpo.tasks.clear`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from faithgrpo.tasks.clear.bits import PathKey
from faithgrpo.tasks.clear.descriptions import MAX_ITEMS, MAX_TEXT_CHARS
from faithgrpo.verifier.answers import parse_node_set
from faithgrpo.verifier.graphs.edges import Path, parse_path
from faithgrpo.verifier.graphs.model import CausalGraph, GraphParseError


# ---------------------------------------------------------------------------------------------
# the typed reading of a record
@dataclass(frozen=True)
class ClearQuestion:
    """A CLEAR record read against its template.

    Attributes:
        task_type: the CLEAR name (one of :data:`TASK_TYPES`, e.g. ``"d-separation"``).
        question_type: ``FO``, ``FA``, ``HM``, ``YN``, ``EX`` or ``MC``.
        graph: the described graph. An undirected graph (``edge`` and ``node`` tasks) is a graph
            of kind ``"UG"`` holding the nodes only; its edges are in ``edges``.
        x, y: treatment and outcome (adjustment sets, identification), the two nodes to separate
            (d-separation), start and end (paths); ``None`` otherwise.
        node: the node of a Markov-blanket or kinship question.
        path: the path a ``blocked_path`` question is about.
        variant: ``"any"``, ``"minimal"``/``"maximal"`` (sets), ``"shortest"``/``"longest"`` (paths).
        claim: what a YN question asks about: a set (``frozenset``), a path
            (:class:`~faithgrpo.verifier.graphs.edges.Path`), a node name (kinship, ``node``), a triple
            of names (``3_node_relation``), an edge key (``edge``), an order (a tuple of names,
            ``topological``) or a graph (``markov_equivalent``); ``None`` for questions without one
            (existence, ``Is it a C-component?``).
        options: MC options ``(letter, value)`` in order; a value is ``None`` when unreadable.
        relation: the kinship relation (``parents``, ``children``, ``ancestors``, ``descendants``)
            or the triple kind (``chain``, ``fork``, ``v-structure``); ``""`` otherwise.
        negated: an MC question asking which option is NOT an edge / a node.
        edges: the description's edges as keys ``(a, mark, b)`` (``edge`` and ``node`` tasks).
    """

    task_type: str
    question_type: str
    graph: CausalGraph
    x: str | None = None
    y: str | None = None
    node: str | None = None
    path: Path | None = None
    variant: str = "any"
    claim: Any = None
    options: tuple[tuple[str, Any], ...] = ()
    relation: str = ""
    negated: bool = False
    edges: tuple[tuple[str, str, str], ...] = ()


# ---------------------------------------------------------------------------------------------
# template pieces
NAME = r"[A-Za-z0-9_]{1,64}"
ARROWS = r"(?:<->|->|<-|→|←|↔)"
SET_GROUP = r"(?P<set>set\(\)|\{[^{}]{0,4000}\})"
END = r"\s?[.?]?"


def node_group(group: str, prefix: bool = True) -> str:
    """A node name captured as ``group`` (``node `` may stand before it when ``prefix``)."""
    return (r"(?:node\s)?" if prefix else "") + rf"(?P<{group}>{NAME})"


def path_group(group: str) -> str:
    """A path literal (``A->B<->C``) captured as ``group``."""
    return rf"(?P<{group}>{NAME}(?:\s?{ARROWS}\s?{NAME}){{1,64}})"


_OPTION_SPLIT_RE = re.compile(r"(?:^|\s+)([A-Z])[.)]\s+")
PATH_LIT_RE = re.compile(rf"(?<![A-Za-z0-9_]){NAME}(?:\s*{ARROWS}\s*{NAME})+")  # starts at a name's start
SET_LIT_RE = re.compile(r"\{[^{}]{0,4000}\}|\bset\(\)")
SEPARATORS_RE = re.compile(r"[\s,;\[\]()'\"]*")


def split_options(question: str) -> tuple[str, list[tuple[str, str]]] | None:
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


def match_template(
    question: str, qtype: str, templates: Any, form_qtypes: Mapping[str, Any], nodes: Any
) -> tuple[str, dict[str, Any], list[tuple[str, str]]] | None:
    """``(form, named groups, MC options)`` of the first of ``templates`` (``(form, pattern)``
    pairs) that ``question`` matches as a whole, whitespace runs read as one space; None when none
    matches, when the form does not allow ``qtype``, or when a role (``x``, ``y``, ``node``) is not
    in ``nodes`` or ``x`` equals ``y``."""
    options: list[tuple[str, str]] = []
    stem = question
    if qtype == "MC":
        split = split_options(question)
        if split is None:
            return None
        stem, options = split
    stem = " ".join(stem.split())
    found = next(((form, m) for form, pattern in templates if (m := pattern.fullmatch(stem))), None)
    if found is None or qtype not in form_qtypes[found[0]]:
        return None
    form, groups = found[0], found[1].groupdict()
    x, y, node = groups.get("x"), groups.get("y"), groups.get("node")
    if any(v is not None and v not in nodes for v in (x, y, node)) or (x is not None and x == y):
        return None
    return form, groups, options


# ---------------------------------------------------------------------------------------------
# candidate values
def parse_set(text: Any) -> frozenset[str] | None:
    """A candidate node set (``{A, B}``, ``set()`` or a one-set list), None when it is not one."""
    if not isinstance(text, str) or len(text) > MAX_TEXT_CHARS:
        return None
    s = text.strip().rstrip(".").strip()
    m = re.fullmatch(r"\[\s*(\{[^{}\[\]]*\}|set\(\))\s*\]", s)  # a one-set list
    return parse_node_set(m.group(1) if m else s)


def parse_one_path(text: Any) -> Path | None:
    """A candidate path (``A->B<-C`` or a one-path list), None when it is not one."""
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


def parse_letter(text: str) -> tuple[str, str] | None:
    """An option letter and any restated option text (``"B. {'M'}"`` -> ``("B", "{'M'}")``)."""
    m = _LETTER_RE.fullmatch(text)
    if not m:
        return None
    return m.group(1).upper(), (m.group("rest") or "").strip()


def parse_count(candidate: Any) -> int | None:
    """The one number a candidate holds (digits, or a number word up to twenty); else ``None``."""
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


def as_items(candidate: Any) -> list[str] | str | None:
    """A list candidate as its string members, a string as itself, anything else ``None``."""
    if isinstance(candidate, (list, tuple)):
        if len(candidate) > MAX_ITEMS or not all(isinstance(c, str) for c in candidate):
            return None
        return list(candidate)
    if isinstance(candidate, str) and len(candidate) <= MAX_TEXT_CHARS:
        return candidate
    return None


def single(candidate: Any) -> Any:
    """A one-element list candidate as its element; anything else unchanged."""
    if isinstance(candidate, (list, tuple)) and len(candidate) == 1:
        return candidate[0]
    return candidate


_ARROW_SPLIT_RE = re.compile(r"\s*(<->|->|<-|→|←|↔)\s*")
_ASCII_MARK = {"->": "->", "→": "->", "<-": "<-", "←": "<-", "<->": "<->", "↔": "<->"}


def path_key(text: str) -> PathKey | None:
    """``"A->B<->C"`` as ``(("A", "B", "C"), ("->", "<->"))`` (quotes and a closing period ignored)."""
    text = text.strip().rstrip(".").strip().strip("'\"`")
    if not PATH_LIT_RE.fullmatch(text):
        return None
    parts = _ARROW_SPLIT_RE.split(text)
    return tuple(parts[0::2]), tuple(_ASCII_MARK[m] for m in parts[1::2])


def parse_path_list(candidate: Any, limit: int = MAX_ITEMS, max_chars: int = 4096) -> list[PathKey] | None:
    """A list of paths as keys; ``None`` when unreadable, longer than ``limit`` paths, or holding a
    path literal over ``max_chars`` characters (longer than any simple path of the graph)."""
    items = as_items(candidate)
    if isinstance(items, list):
        if len(items) > limit:
            return None
        keys = []
        for c in items:
            key = path_key(c) if len(c) <= max_chars else None
            if key is None and len(c) <= max_chars:
                p = parse_one_path(c)
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
    for m in PATH_LIT_RE.finditer(items):
        if len(keys) >= limit or m.end() - m.start() > max_chars:
            return None
        if not SEPARATORS_RE.fullmatch(items, end, m.start()):
            return None
        parts = _ARROW_SPLIT_RE.split(m.group())
        keys.append((tuple(parts[0::2]), tuple(_ASCII_MARK[a] for a in parts[1::2])))
        end = m.end()
    if not keys or not SEPARATORS_RE.fullmatch(items, end):
        return None
    return keys
