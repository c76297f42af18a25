"""Knights & Knaves trace parsing: the ``<think>`` slots, restated statements and the ASSIGNMENT.

The trace contract and the formula syntax are documented in :mod:`faithgrpo.tasks.knights_knaves`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from faithgrpo.tasks.knights_knaves.formulas import formula_shape, parse_formula_tokens, parse_kk_formula
from faithgrpo.tasks.knights_knaves.logic import Assignment, statement_table
from faithgrpo.tasks.knights_knaves.puzzle import KKPuzzle, as_puzzle, memoised, remember
from faithgrpo.text import completion_text, extract_answer, extract_think
from faithgrpo.verifier.answers import offers_alternatives

SLOT_NAMES = ("STATEMENTS", "STRATEGY", "DERIVATION", "ASSIGNMENT")

MAX_TRACE_CHARS = 20_000  # whole completion; longer traces fail closed
MAX_TRACE_LINES = 1_000
MAX_SLOT_CHARS = 8_000


# ---------------------------------------------------------------------------------------------------
# Trace parsing
# ---------------------------------------------------------------------------------------------------

_SLOT_RE = re.compile(
    r"^[ \t]*(?:[-*#>]+[ \t]*)?(?:\*\*)?[ \t]*(STATEMENTS|STRATEGY|DERIVATION|ASSIGNMENT)[ \t]*(?:\*\*)?[ \t]*:"
    r"(?:\*\*)?(.*)$",
    re.IGNORECASE,
)
# The first letters _SLOT_RE's names match (IGNORECASE also folds "ſ" to "s"). A header's name
# follows its blanks and bullets, so a line whose first other character is none of these is no header.
_HEADER_INITIALS = frozenset("SsſDdAa")
_HEADER_LEAD = " \t-*#>"
# Each pattern character matches one character, so a header's name spans exactly its length.
_NAME_LENGTHS = frozenset(map(len, SLOT_NAMES))
_STATEMENT_LINE_RE = re.compile(
    r"^(?:[-*•]|\d{1,3}[.)])?[ \t]*([^\W_]\w*)(?:[ \t]+(?:says|said|claims|states))?[ \t]*:[ \t]*(.*)$"
)
_ASSIGNMENT_ITEM_RE = re.compile(
    r"^(?:[-*•]|\d{1,3}[.)])?[ \t]*([^\W_]\w*)[ \t]*(?:=|:|[ \t]is[ \t]+(?:an?[ \t]+)?)[ \t]*([^\W_]\w*)[ \t]*\.?$"
)
_ASSIGNMENT_SPLIT_RE = re.compile(r"[,;\n]|\band\b", re.IGNORECASE)


@dataclass
class KKTrace:
    """The slots of a Knights & Knaves trace, as raw text.

    Attributes:
        slots: Slot name (``STATEMENTS``, ``STRATEGY``, ``DERIVATION``, ``ASSIGNMENT``) to its text
            (the header line's remainder plus the lines up to the next slot header).
        answer: Content of the last ``<answer>`` block, or ``None``.
        duplicates: Slot names that appear more than once (such slots are not trusted).
        error: Why the trace could not be read at all (``None`` when it could).
    """

    slots: dict[str, str] = field(default_factory=dict)
    answer: str | None = None
    duplicates: set[str] = field(default_factory=set)
    error: str | None = None


def _may_be_header(line: str) -> bool:
    """False for a line `_SLOT_RE` cannot match, by cheap tests (most lines: prose, "Step 1: ...").

    A header is "NAME:" after blanks/bullets/"**", with only blanks and "**" between NAME and the
    colon: its stripped head starts with a name's initial, and its first colon follows a name's
    length of characters.
    """
    if ":" not in line:
        return False
    head = line.lstrip(_HEADER_LEAD)
    return head[:1] in _HEADER_INITIALS and len(head[: head.find(":")].rstrip(" \t*")) in _NAME_LENGTHS


def parse_kk_trace(text: Any, *, max_chars: int = MAX_TRACE_CHARS) -> KKTrace:
    """Split a completion into its ``<think>`` slots and ``<answer>``; never raises.

    Complexity: O(len(text)) (text longer than ``max_chars`` is refused before any regex runs).

    Args:
        text: The completion (string or TRL conversational completion).
        max_chars: Longest text accepted.

    Returns:
        A :class:`KKTrace`; ``error`` says why nothing could be read (empty, too long, no ``<think>``).
    """
    text = completion_text(text)
    if not text or text.isspace():  # all whitespace: what strip() would empty, without the copy
        return KKTrace(error="empty completion")
    if len(text) > max_chars:
        return KKTrace(error=f"completion longer than {max_chars} characters")
    answer = extract_answer(text)
    think = extract_think(text)
    if think is None:
        return KKTrace(answer=answer, error="no <think>...</think> block")
    lines = think.splitlines()
    if len(lines) > MAX_TRACE_LINES:
        return KKTrace(answer=answer, error=f"<think> has more than {MAX_TRACE_LINES} lines")
    trace = KKTrace(answer=answer)
    current: list[str] | None = None
    collected: dict[str, list[str]] = {}
    for line in lines:
        match = _SLOT_RE.match(line) if _may_be_header(line) else None
        if match:
            name = match.group(1).upper()
            if name in collected:
                trace.duplicates.add(name)
            current = collected.setdefault(name, [])
            rest = match.group(2).strip()
            if rest:
                current.append(rest)
        elif current is not None:
            current.append(line)
    trace.slots = {name: "\n".join(body).strip() for name, body in collected.items()}
    return trace


def trace_slot(trace: KKTrace, name: str) -> tuple[str | None, str | None]:
    """The body of slot ``name`` in ``trace``, or ``(None, reason)`` when it is missing or repeated."""
    if trace.error is not None:
        return None, trace.error
    if name in trace.duplicates:
        return None, f"{name} appears more than once"
    body = trace.slots.get(name)
    if body is None:
        return None, f"no {name}: slot"
    if not body:
        return None, f"{name}: slot is empty"
    if len(body) > MAX_SLOT_CHARS:
        return None, f"{name}: slot longer than {MAX_SLOT_CHARS} characters"
    return body, None


def parse_statements(body: str, puzzle: KKPuzzle) -> tuple[dict[int, int], list[str]]:
    """The truth tables of the restated claims (person index -> table) and the errors, in order."""
    tables: dict[int, int] = {}
    errors: list[str] = []
    # one strip per item ("Name: formula" lines, also ";"-separated); empty items are dropped
    if ";" in body:
        lines = [item for line in body.splitlines() for item in map(str.strip, line.split(";")) if item]
    else:
        lines = [item for item in map(str.strip, body.splitlines()) if item]
    if len(lines) > 4 * puzzle.n_people + 8:
        return {}, [f"{len(lines)} lines for {puzzle.n_people} people"]
    for line in lines:
        match = _STATEMENT_LINE_RE.match(line)
        if not match:
            errors.append(f"line {line[:60]!r} is not 'Name: formula'")
            continue
        name, formula = match.groups()
        index = puzzle.person(name)
        if index is None:
            errors.append(f"{name[:30]!r} is not a person in this puzzle")
            continue
        if index in tables:
            errors.append(f"{puzzle.names[index]}'s claim is restated twice")
            continue
        # the restatements of a prompt's G traces repeat: parse and tabulate each formula once
        table, reason = memoised(puzzle, ("formula", formula), formula, _formula_table, formula, puzzle)
        if table is None:
            errors.append(f"{puzzle.names[index]}: {reason}")
            continue
        tables[index] = table
    missing = [puzzle.names[i] for i in range(puzzle.n_people) if i not in tables]
    if missing and not errors:
        errors.append(f"no restatement for {', '.join(missing)}")
    return tables, errors


def _formula_table(formula: str, puzzle: KKPuzzle) -> tuple[int | None, str | None]:
    # A restated formula's truth table (or why it does not parse): all the checker needs of it.
    # The G traces of a prompt spell one claim many ways ("->", "implies", "hero", "knight"): a
    # parsed shape is tabulated once (see formula_shape) and every spelling of it reuses the table.
    shape, tokens = formula_shape(formula, puzzle)
    if shape is not None:
        table = puzzle._memo.get(("formula shape", shape))
        if table is not None:
            return table, None
    statement, reason = (
        parse_kk_formula(formula, puzzle) if tokens is None else parse_formula_tokens(tokens, puzzle)
    )
    if statement is None:
        return None, reason
    table = statement_table(statement, puzzle.n_people, puzzle.full_mask)
    if shape is not None:
        remember(puzzle._memo, ("formula shape", shape), None, table)
    return table, None


def parse_kk_assignment(text: str, metadata: Any) -> tuple[Assignment | None, str | None]:
    """Parse an ``ASSIGNMENT`` slot such as ``"Amelia=knight, Elizabeth=villain"``; never raises.

    Items are ``Name=role``, ``Name: role`` or ``Name is a role``, separated by commas, semicolons,
    ``and`` or newlines; roles are ``knight``/``knave`` or the puzzle's terms. Every person must
    appear exactly once, and the slot must offer one assignment (no ``or``, ``/``, ...).

    Args:
        text: The slot text.
        metadata: Puzzle metadata.

    Returns:
        ``(assignment, None)`` (True = knight, in the puzzle's person order) or ``(None, reason)``.
    """
    puzzle = as_puzzle(metadata)
    if not isinstance(text, str) or len(text) > MAX_SLOT_CHARS:
        return None, "assignment is not text of bounded length"
    if offers_alternatives(text):
        return None, "the assignment offers alternatives ('or', '/', ...); commit to one"
    items = [item.strip() for item in _ASSIGNMENT_SPLIT_RE.split(text) if item.strip()]
    if len(items) > 4 * puzzle.n_people + 8:
        return None, f"{len(items)} items for {puzzle.n_people} people"
    roles: dict[int, bool] = {}
    for item in items:
        match = _ASSIGNMENT_ITEM_RE.match(item)
        if not match:
            return None, f"item {item[:60]!r} is not 'Name=role'"
        index, role = puzzle.person(match.group(1)), puzzle.role(match.group(2))
        if index is None:
            return None, f"{match.group(1)[:30]!r} is not a person in this puzzle"
        if role is None:
            return None, (
                f"{match.group(2)[:30]!r} is not a role; use knight/knave or {puzzle.knight}/{puzzle.knave}"
            )
        if index in roles:
            return None, f"{puzzle.names[index]} is assigned twice"
        roles[index] = role
    missing = [puzzle.names[i] for i in range(puzzle.n_people) if i not in roles]
    if missing:
        return None, f"no role for {', '.join(missing)}"
    return tuple(roles[i] for i in range(puzzle.n_people)), None
