"""The DERIVATION claim grammar and its parser: derivation lines to :class:`Claim` objects.

One job: read claims (no truth, no certification). The grammar is documented in
:mod:`faithgrpo.verifier.certificates.derivation`; the package face is :mod:`faithgrpo.verifier.certificates`.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from faithgrpo.verifier.answers import parse_node_set
from faithgrpo.verifier.graphs.edges import Path, parse_path
from faithgrpo.verifier.graphs.model import GraphParseError

MAX_CLAIM_LINES = 512
MAX_LINE_CHARS = 2_000

_NODE = r"[A-Za-z0-9_]{1,64}"
_SET = r"\{[^{}]{0,1500}\}"
_NODES = rf"(?:{_SET}|{_NODE})"
_NUM = r"[-+]?(?:\d{1,6}(?:\.\d{0,12})?|\.\d{1,12})(?:[eE][-+]?\d{1,3})?"
_PATH_TEXT = r"[^;{}]{1,1500}?"
_LEAD = r"^(?:(?i:so|hence|thus|therefore|then|and)\b[ ,]*)?"

_PATH_STATUS_RE = re.compile(
    _LEAD + rf"(?P<kind>backdoor\s+|back-door\s+|directed\s+)?path\s+(?P<path>{_PATH_TEXT})\s+is\s+"
    rf"(?P<status>open|blocked|unblocked|active|inactive)\s+given\s+(?P<given>{_SET}|∅)\s*\.?$",
    re.IGNORECASE,
)
_DIRECTED_RE = re.compile(_LEAD + rf"directed\s+path\s+(?P<path>{_PATH_TEXT})\s*\.?$", re.IGNORECASE)
_NO_PATH_RE = re.compile(
    _LEAD + rf"(?:there\s+is\s+)?no\s+(?P<kind>backdoor\s+|back-door\s+|directed\s+)?path\s+"
    rf"(?:from|between)\s+(?P<a>{_NODE})\s+(?:to|and)\s+(?P<b>{_NODE})\s*\.?$",
    re.IGNORECASE,
)
_DESCENDANT_RE = re.compile(
    _LEAD + rf"(?P<a>{_NODE})\s+is\s+(?P<neg>not\s+)?an?\s+descendant\s+of\s+(?P<b>{_NODE})\s*\.?$",
    re.IGNORECASE,
)
_FAMILY_RE = re.compile(
    _LEAD + rf"(?P<rel>descendants|parents)\s+of\s+(?P<a>{_NODE})\s*(?:=|:|are)\s*(?P<set>{_SET}|∅)\s*\.?$",
    re.IGNORECASE,
)
_SEPARATION_RE = re.compile(
    _LEAD + rf"(?P<a>{_NODES})\s+and\s+(?P<b>{_NODES})\s+are\s+(?P<neg>not\s+)?(?P<sep>[dm])-separated\s+"
    rf"given\s+(?P<given>{_SET}|∅)\s*\.?$",
    re.IGNORECASE,
)
_CYCLE_RE = re.compile(_LEAD + rf"(?:directed\s+)?cycle\s+(?P<path>{_PATH_TEXT})\s*\.?$", re.IGNORECASE)
_EDGE_RE = re.compile(_LEAD + rf"edge\s+(?P<path>{_PATH_TEXT})\s*\.?$", re.IGNORECASE)
_PROB_RE = re.compile(
    _LEAD
    + rf"P\((?P<target>[^|()]{{1,800}}?)(?:\|(?P<cond>[^|()]{{0,800}}))?\)\s*=\s*(?P<value>{_NUM})\s*\.?$"
)
_PSI_RE = re.compile(
    _LEAD + rf"(?:ψ|psi|ATE)\s*=\s*(?:[^=]{{0,600}}=\s*)?(?P<value>{_NUM})\s*\.?$", re.IGNORECASE
)
_ASSIGN_RE = re.compile(rf"\s*({_NODE})\s*=\s*([01])\s*")
_SPLIT_SET_RE = re.compile(r"[,\s]+")


@dataclass(frozen=True)
class Claim:
    """One parsed derivation claim.

    Attributes:
        kind: ``path``, ``directed``, ``no_path``, ``descendant``, ``family``, ``separation``,
            ``cycle``, ``edge``, ``prob`` or ``psi``.
        line: the claim's line number in DERIVATION (from 1).
        text: the line.
        args: kind-specific values (see :func:`parse_claim`).
    """

    kind: str
    line: int
    text: str
    args: tuple = ()


# ---------------------------------------------------------------------------------------------
# parsing
# A path's parse depends only on its text, and the same path shows up in many claim lines (other
# given sets, statuses, leads). Safe to share: a Path is frozen (tuples of str) and the key is the
# text itself; the claim patterns cap a path at 1,500 characters and the cache at 8,192 entries.
@functools.lru_cache(maxsize=8_192)
def _path(text: str) -> Path | None:
    try:
        return parse_path(text.strip(), max_nodes=128, max_chars=1500)
    except (GraphParseError, ValueError):
        return None


def _assignments(text: str) -> tuple[tuple[str, int], ...] | None:
    out = []
    for part in text.split(","):
        m = _ASSIGN_RE.fullmatch(part)
        if m is None:
            return None
        out.append((m.group(1), int(m.group(2))))
    names = [n for n, _ in out]
    return tuple(out) if out and len(set(names)) == len(names) else None


def parse_claim(line: str, number: int = 0) -> Claim | None:
    """Parse one derivation line into a :class:`Claim`, or ``None`` for prose.

    Example:
        >>> parse_claim("backdoor path X <- U -> Y is blocked given {U}").args
        (Path(nodes=('X', 'U', 'Y'), marks=('<-', '->')), 'blocked', frozenset({'U'}), 'backdoor')
        >>> parse_claim("the path is blocked, I think") is None
        True
    """
    if len(line) > MAX_LINE_CHARS:
        return None
    if type(number) is int:  # Claims are frozen (immutable args too), so one object can be shared
        return _claim_at(line, number)
    parsed = _parse_line(line)
    return None if parsed is None else Claim(parsed[0], number, parsed[1], parsed[2])


@functools.lru_cache(maxsize=16_384)
def _claim_at(line: str, number: int) -> Claim | None:
    parsed = _parse_line(line)
    return None if parsed is None else Claim(parsed[0], number, parsed[1], parsed[2])


@functools.lru_cache(maxsize=8_192)
def _parse_line(line: str) -> tuple[str, str, tuple] | None:
    """``(kind, normalised text, args)`` of a claim line (at most MAX_LINE_CHARS), or ``None`` for prose."""
    text = " ".join(line.split(";", 1)[0].split())  # one space between words: no backtracking on runs
    if not text:
        return None
    parsed = _parse_claim_text(text)
    return None if parsed is None else (parsed[0], text, parsed[1])


# Parsing depends only on the normalised line; the G completions of a prompt repeat lines a lot.
# Safe to share: the result is a (kind, args) tuple of str/frozenset/Path/float (all immutable),
# and the key is the text itself. Lines are at most MAX_LINE_CHARS, so the cache is bounded.
@functools.lru_cache(maxsize=16_384)
def _parse_claim_text(text: str) -> tuple[str, tuple] | None:
    low = text.lower()
    if "path" in low:
        m = _PATH_STATUS_RE.match(text)
        if m:
            path, given = _path(m.group("path")), parse_node_set(m.group("given"))
            status = {"unblocked": "open", "active": "open", "inactive": "blocked"}.get(
                m.group("status").lower(), m.group("status").lower()
            )
            prefix = (m.group("kind") or "").strip().lower().replace("back-door", "backdoor")
            if path is None or given is None:
                return ("malformed", (f"unreadable path or set in {text[:60]!r}",))
            return ("path", (path, status, given, prefix))
        m = _NO_PATH_RE.match(text)
        if m:
            prefix = (m.group("kind") or "").strip().lower().replace("back-door", "backdoor")
            return ("no_path", (m.group("a"), m.group("b"), prefix))
        m = _DIRECTED_RE.match(text)
        if m:
            path = _path(m.group("path"))
            if path is None:
                return ("malformed", (f"unreadable path in {text[:60]!r}",))
            return ("directed", (path,))
    if "descendant" in low:
        m = _DESCENDANT_RE.match(text)
        if m:
            return ("descendant", (m.group("a"), m.group("b"), not m.group("neg")))
    if "descendants" in low or "parents" in low:
        m = _FAMILY_RE.match(text)
        if m:
            members = parse_node_set(m.group("set"))
            if members is None:
                return ("malformed", (f"unreadable set in {text[:60]!r}",))
            return ("family", (m.group("rel").lower(), m.group("a"), members))
    if "separated" in low:
        m = _SEPARATION_RE.match(text)
        if m:
            a, b, given = (
                parse_node_set(m.group("a")),
                parse_node_set(m.group("b")),
                parse_node_set(m.group("given")),
            )
            if a is None or b is None or given is None:
                return ("malformed", (f"unreadable set in {text[:60]!r}",))
            return ("separation", (a, b, given, not m.group("neg")))
    if "cycle" in low:
        m = _CYCLE_RE.match(text)
        if m:
            path = _path(m.group("path"))
            if path is None:
                return ("malformed", (f"unreadable cycle in {text[:60]!r}",))
            return ("cycle", (path,))
    if low.startswith("edge") or low.split(" ", 1)[-1].startswith("edge"):
        m = _EDGE_RE.match(text)
        if m:
            path = _path(m.group("path"))
            if path is None or len(path.nodes) != 2:
                return ("malformed", (f"an edge joins two nodes: {text[:60]!r}",))
            return ("edge", (path,))
    if "P(" in text:
        m = _PROB_RE.match(text)
        if m:
            target = _assignments(m.group("target"))
            cond = _assignments(m.group("cond")) if m.group("cond") is not None else ()
            value = float(m.group("value"))
            if target is None or cond is None or not math.isfinite(value):
                return ("malformed", (f"unreadable probability in {text[:60]!r}",))
            return ("prob", (target, cond, value))
    if "ψ" in text or "psi" in low or "ate" in low:
        m = _PSI_RE.match(text)
        if m:
            value = float(m.group("value"))
            if not math.isfinite(value):
                return ("malformed", ("ψ is not a finite number",))
            return ("psi", (value,))
    return None


def parse_claims(lines: Sequence[str]) -> list[Claim]:
    """The claims among ``lines`` (at most :data:`MAX_CLAIM_LINES` lines are read)."""
    out = []
    for number, line in enumerate(lines[:MAX_CLAIM_LINES], start=1):
        if isinstance(line, str):
            claim = parse_claim(line, number)
            if claim is not None:
                out.append(claim)
    return out
