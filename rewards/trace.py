"""Parsing the six-slot CALVER trace (structure only, no causal semantics).

A trace fills five labelled slots inside ``<think>`` and puts the final answer in ``<answer>``::

    <think>
    GRAPH: U -> X; U -> Y; X -> M; M -> Y
    QUERY: backdoor_set(treatment=X, outcome=Y)
    STRATEGY: backdoor criterion
    DERIVATION:
    - backdoor path X <- U -> Y is open; conditioning on U blocks it
    - M is a descendant of X, so it is excluded
    RESULT: {U}
    </think>
    <answer>{U}</answer>

Labels are matched at the start of a line, case-insensitively, tolerating Markdown decoration
(``**GRAPH:**``, ``- QUERY:``). A slot's content runs until the next label. The first occurrence of
a label wins. Everything is bounded by ``max_chars``; nothing here raises on model output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from faithgrpo.rewards.text import extract_answer, extract_think

SLOT_LABELS = ("GRAPH", "QUERY", "STRATEGY", "DERIVATION", "RESULT")
#: The six slots CALVER checks: the five labelled ones and the ``<answer>``.
SLOT_NAMES = ("graph", "query", "strategy", "derivation", "result", "answer")

DEFAULT_MAX_CHARS = 20_000
MAX_QUERY_ARGS = 16

_LABEL_RE = re.compile(
    r"^[ \t>*#_\-]*(GRAPH|QUERY|STRATEGY|DERIVATION|RESULT)[ \t*_]*:[ \t*_]*(.*)$",
    re.IGNORECASE | re.MULTILINE,
)
_QUERY_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]{0,40})\s*\((.{0,2000})\)\s*\.?\s*$", re.DOTALL)
_ARG_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]{0,40})\s*=\s*(.+?)\s*$", re.DOTALL)
_BULLET_RE = re.compile(r"^\s*(?:[-*•]|\d{1,3}[.)]|Step\s+\d{1,3}\s*:)\s*", re.IGNORECASE)


@dataclass(frozen=True)
class Trace:
    """The raw text of each slot; ``None`` where the slot is missing."""

    graph: str | None = None
    query: str | None = None
    strategy: str | None = None
    derivation: tuple[str, ...] | None = None
    result: str | None = None
    answer: str | None = None
    problems: tuple[str, ...] = field(default=())

    def missing(self) -> list[str]:
        """Names of the slots that are absent or empty."""
        return [name for name in SLOT_NAMES if not getattr(self, name)]


def parse_trace(text: str, *, max_chars: int = DEFAULT_MAX_CHARS) -> Trace:
    """Split a completion into the six CALVER slots.

    Args:
        text: the completion text (``<think>`` optional: without it the whole text before
            ``<answer>`` is searched for slots).
        max_chars: completions longer than this are not parsed (every slot missing).

    Returns:
        A :class:`Trace`; ``problems`` lists structural issues such as a repeated label.

    Example:
        >>> t = parse_trace("<think>GRAPH: A -> B\\nRESULT: {A}</think><answer>{A}</answer>")
        >>> t.graph, t.result, t.answer, t.missing()
        ('A -> B', '{A}', '{A}', ['query', 'strategy', 'derivation'])
    """
    if not isinstance(text, str) or not text.strip():
        return Trace(problems=("empty completion",))
    if len(text) > max_chars:
        return Trace(problems=(f"completion longer than {max_chars} characters",))
    answer = extract_answer(text)
    body = extract_think(text)
    if body is None:
        cut = text.find("<answer>")
        body = text if cut < 0 else text[:cut]

    slots: dict[str, str] = {}
    problems: list[str] = []
    matches = list(_LABEL_RE.finditer(body))
    for i, match in enumerate(matches):
        label = match.group(1).upper()
        end = matches[i + 1].start() if i + 1 < len(matches) else len(body)
        content = (match.group(2) + body[match.end() : end]).strip()
        if label in slots:
            problems.append(f"{label} appears more than once; the first one is used")
            continue
        slots[label] = content

    derivation = None
    if slots.get("DERIVATION"):
        lines = [_BULLET_RE.sub("", line).strip() for line in slots["DERIVATION"].splitlines()]
        derivation = tuple(line for line in lines if line) or None
    return Trace(
        graph=slots.get("GRAPH") or None,
        query=slots.get("QUERY") or None,
        strategy=slots.get("STRATEGY") or None,
        derivation=derivation,
        result=slots.get("RESULT") or None,
        answer=answer or None,
        problems=tuple(problems),
    )


def parse_query_call(text: str) -> tuple[str, dict[str, str]] | None:
    """Parse ``kind(role=value, ...)`` into ``(kind, {role: value})``; ``None`` if it does not parse.

    Values are kept as stripped text (a node name, ``{A, B}``, a number); commas inside braces,
    brackets or parentheses do not split arguments.

    Example:
        >>> parse_query_call("ci_test(x=A, y=B, given={C, D})")
        ('ci_test', {'x': 'A', 'y': 'B', 'given': '{C, D}'})
    """
    if not isinstance(text, str):
        return None
    match = _QUERY_RE.match(text.strip())
    if match is None:
        return None
    kind, inner = match.group(1), match.group(2)
    args: dict[str, str] = {}
    for part in _split_top_level(inner):
        if not part.strip():
            continue
        arg = _ARG_RE.match(part)
        key = arg.group(1).lower() if arg else None
        if arg is None or key in args or len(args) >= MAX_QUERY_ARGS:
            return None  # unparsable, ambiguous (a role given twice) or oversized
        args[key] = arg.group(2)
    return kind.lower(), args


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside (), [] or {}; unbalanced input gives one part."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(depth - 1, 0)
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts
