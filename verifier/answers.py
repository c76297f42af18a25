"""Answer text of the causal query kinds: bounded parsers and canonical formatting.

One job: turn answer text into a value (node set, yes/no, node, cycle, ate decision and ψ) and a
value back into its canonical string. The accepted formats, the canonical forms and the query kinds
that use them are documented in :mod:`faithgrpo.verifier.queries`.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from typing import Any

from faithgrpo.verifier.graphs.edges import parse_path
from faithgrpo.verifier.graphs.model import NODE_RE, GraphParseError, node_sort_key

MAX_ANSWER_CHARS = 4_096
MAX_SET_SIZE = 256
# answers (and STRATEGY texts) longer than this are not memoised; see the memos in
# faithgrpo.verifier.queries
MEMO_TEXT_CHARS = 512

# ---------------------------------------------------------------------------------------------
# answer parsers (bounded, never raise)
_EMPTY_SET = frozenset(
    {"set()", "{}", "[]", "()", "∅", "none", "empty", "empty set", "the empty set", "nothing"}
)
_BLOCK_RE = re.compile(r"[{\[(][^{}\[\]()]*[}\])]")
_SET_ITEM_SPLIT_RE = re.compile(r"[,;\s]+")
_YES_NO_RE = re.compile(r"\b(yes|no|true|false)\b", re.IGNORECASE)
_PSI_RE = re.compile(
    r"(?:ψ|\bpsi\b|\bate\b|\beffect\b)\s*(?:=|:|≈|is)\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)",
    re.IGNORECASE,
)
QUOTES = "'\"`"


def _clean(text: Any) -> str | None:
    if not isinstance(text, str) or len(text) > MAX_ANSWER_CHARS:
        return None
    return text.strip()


def _items(content: str) -> list[str] | None:
    out = []
    for tok in _SET_ITEM_SPLIT_RE.split(content):
        tok = tok.strip(QUOTES)
        if not tok or tok.lower() == "and":
            continue
        if not NODE_RE.fullmatch(tok):
            return None
        out.append(tok)
        if len(out) > MAX_SET_SIZE:
            return None
    return out


def parse_node_set(text: Any) -> frozenset[str] | None:
    """Parse a node set (formats in the module docstring); ``None`` when it is not one.

    Example:
        >>> sorted(parse_node_set("{'U', 'V'}")), parse_node_set("set()"), parse_node_set("{A} or {B}")
        (['U', 'V'], frozenset(), None)
    """
    if type(text) is str and len(text) <= MEMO_TEXT_CHARS:
        return _node_set_of_text(text)
    return _parse_node_set(text)


# Claims, RESULTs and answers repeat the same few sets ("{H}") across a prompt's completions. The
# parse is a pure function of the text, the result a frozenset of str (immutable) or None; keyed by
# the text (at most _MEMO_TEXT_CHARS), bounded entries.
@functools.lru_cache(maxsize=8_192)
def _node_set_of_text(text: str) -> frozenset[str] | None:
    return _parse_node_set(text)


def _parse_node_set(text: Any) -> frozenset[str] | None:
    s = _clean(text)
    if s is None:
        return None
    s = s.rstrip(".").strip()
    if s.lower() in _EMPTY_SET:
        return frozenset()
    blocks = _BLOCK_RE.findall(s)
    if len(blocks) > 1:
        return None
    if len(blocks) == 1:
        outside = s.replace(blocks[0], " ", 1)
        if any(ch in outside for ch in "{}[]()"):
            return None  # nested or unbalanced brackets
        inner = blocks[0][1:-1].strip()
        if not inner:
            return frozenset()
        items = _items(inner)
    elif any(ch in s for ch in "{}[]()"):
        return None  # unbalanced or nested brackets
    else:
        items = _items(s)
    if not items:
        return None
    return frozenset(items)


def parse_yes_no(text: Any) -> bool | None:
    """``True`` for yes/true, ``False`` for no/false, ``None`` when absent or contradictory.

    A leading yes/no word decides; otherwise the text must contain yes-words or no-words, not both.

    Example:
        >>> parse_yes_no("Yes."), parse_yes_no("no, they are not"), parse_yes_no("maybe")
        (True, False, None)
    """
    s = _clean(text)
    if not s:
        return None
    words = [m.lower() for m in _YES_NO_RE.findall(s[:MAX_ANSWER_CHARS])]
    if not words:
        return None
    lead = re.match(r"\W*(yes|no|true|false)\b", s, re.IGNORECASE)
    if lead:
        return lead.group(1).lower() in ("yes", "true")
    found = {w in ("yes", "true") for w in words}
    return found.pop() if len(found) == 1 else None


def parse_node(text: Any) -> str | None:
    """One node name, optionally quoted or in braces (``M``, ``'M'``, ``{M}``); else ``None``."""
    s = _clean(text)
    if not s:
        return None
    s = s.rstrip(".").strip()
    if len(s) >= 2 and s[0] in "{[(" and s[-1] in "}])":
        s = s[1:-1].strip()
    s = s.strip(QUOTES)
    return s if NODE_RE.fullmatch(s) else None


def parse_cycle(text: Any) -> tuple[str, ...] | None:
    """A node sequence from ``A -> B -> C -> A`` or ``[A, B, C]``; the closing repeat is dropped.

    Example:
        >>> parse_cycle("A -> B -> C -> A"), parse_cycle("[A, B, C]"), parse_cycle("A <- B")
        (('A', 'B', 'C'), ('A', 'B', 'C'), None)
    """
    s = _clean(text)
    if not s:
        return None
    s = s.rstrip(".").strip()
    if any(a in s for a in ("->", "→", "<-", "←", "↔")):
        try:
            path = parse_path(s, max_nodes=MAX_SET_SIZE)
        except GraphParseError:
            return None
        if any(m != "->" for m in path.marks):
            return None
        nodes = list(path.nodes)
    else:
        if len(s) >= 2 and s[0] in "[(" and s[-1] in "])":
            s = s[1:-1]
        if any(ch in s for ch in "{}[]()"):
            return None
        nodes = _items(s)
        if nodes is None:
            return None
    if len(nodes) >= 2 and nodes[0] == nodes[-1]:
        nodes = nodes[:-1]
    return tuple(nodes) if len(nodes) >= 2 else None


def _parse_ate(text: Any) -> tuple[bool, float | None] | None:
    s = _clean(text)
    if not s:
        return None
    decision = parse_yes_no(s)
    if decision is None:
        return None
    m = _PSI_RE.search(s)
    psi = float(m.group(1)) if m else None
    if psi is not None and not math.isfinite(psi):
        return None
    return decision, psi


# ---------------------------------------------------------------------------------------------
# canonical formatting
def format_set(value: Any) -> str:
    """A node set's canonical text, ``{A, B}`` (nodes in :func:`node_sort_key` order)."""
    return "{" + ", ".join(sorted(value, key=node_sort_key)) + "}"


def _format_yes_no(value: Any) -> str:
    return "yes" if value else "no"


def _rotate(cycle: tuple[str, ...]) -> tuple[str, ...]:
    i = min(range(len(cycle)), key=lambda k: node_sort_key(cycle[k]))
    return tuple(cycle[i:] + cycle[:i])


def _format_cycle(value: Any) -> str:
    nodes = _rotate(tuple(value))
    return " -> ".join((*nodes, nodes[0]))


# ---------------------------------------------------------------------------------------------
# one answer per answer slot: RESULT and <answer> commit to one answer
_ALTERNATIVE_RE = re.compile(
    r"\b(?:or|either|otherwise|alternatively|unless)\b|\bvice[\s-]+versa\b|/", re.IGNORECASE
)
# verdict words: yes; no / true / false unless a word follows ("no open path", "true that ...")
_VERDICT_RE = re.compile(r"\b(?:(yes)|(no|true|false)(?!\s*[^\W\d_]))\b", re.IGNORECASE)
_LEAD_VERDICT_RE = re.compile(r"\W*(yes|no|true|false)\b", re.IGNORECASE)
_SET_TAIL_RE = re.compile(r"[\s.!]*")
_BRACES_RE = re.compile(r"\{[^{}]*\}")  # an ATE answer's adjustment set


def offers_alternatives(text: Any, *, verdicts: bool = True) -> bool:
    """Whether answer text offers more than one answer, so it commits to none.

    It does when it contains an alternation marker (the words ``or``, ``either``, ``otherwise``,
    ``alternatively``, ``unless``, ``vice versa``, or ``/``), or, with ``verdicts`` (answers that are
    a decision), verdicts of both kinds: a yes-word (``yes``, ``true``) and a no-word (``no``,
    ``false``), where the leading word always counts and a later ``no``/``true``/``false`` counts
    unless a word follows it (``no open path`` is prose). Text that is not a string, or longer than
    ``MAX_ANSWER_CHARS``, offers no answer at all: ``False``.

    Example:
        >>> offers_alternatives("yes (or no), ψ = 0.3"), offers_alternatives("{E, Y} / V")
        (True, True)
        >>> offers_alternatives("No. Yes."), offers_alternatives("Yes, there is no open path.")
        (True, False)
    """
    if not isinstance(text, str) or len(text) > MAX_ANSWER_CHARS:
        return False
    if _ALTERNATIVE_RE.search(text):
        return True
    if not verdicts:
        return False
    kinds = {m.group(1) is not None or m.group(2).lower() == "true" for m in _VERDICT_RE.finditer(text)}
    lead = _LEAD_VERDICT_RE.match(text)
    if lead:
        kinds.add(lead.group(1).lower() in ("yes", "true"))
    return len(kinds) > 1


def _parse_yes_no_answer(text: Any) -> bool | None:
    """A yes/no decision offering one answer."""
    return None if offers_alternatives(text) else parse_yes_no(text)


def _parse_set_answer(text: Any) -> frozenset[str] | None:
    """A node set offering one answer: no alternation marker outside its one ``{...}`` block (inside
    it every word is a node name) and nothing but ``.``/``!`` after the block; a bare list (no
    block) has no marker at all."""
    value = parse_node_set(text)
    if value is None or not isinstance(text, str):
        return None
    block = _BLOCK_RE.search(text)
    if block is None:
        return None if offers_alternatives(text, verdicts=False) else value
    if offers_alternatives(text[: block.start()], verdicts=False) or not _SET_TAIL_RE.fullmatch(
        text, block.end()
    ):
        return None
    return value


def _parse_ate_answer(text: Any) -> tuple[bool, float | None] | None:
    """An ATE decision offering one answer: one decision and at most one ψ value (the adjustment
    set's braces hold node names, not markers or verdicts)."""
    s = _clean(text)
    if (
        s is None
        or len({float(v) for v in _PSI_RE.findall(s)}) > 1
        or offers_alternatives(_BRACES_RE.sub(" ", s))
    ):
        return None
    return _parse_ate(s)


# ---------------------------------------------------------------------------------------------
# parser and formatter of each answer type (answer slots: one answer each)
PARSERS: dict[str, Callable[[Any], Any]] = {
    "set": _parse_set_answer,
    "yes_no": _parse_yes_no_answer,
    "node": parse_node,  # one name: one answer by its grammar
    "cycle": parse_cycle,  # names and arrows only: one answer by its grammar
    "ate": _parse_ate_answer,
}
FORMATTERS: dict[str, Callable[[Any], str]] = {
    "set": format_set,
    "yes_no": _format_yes_no,
    "node": str,
    "cycle": _format_cycle,
    "ate": lambda v: _format_yes_no(v[0]),
}
