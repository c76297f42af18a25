"""The Knights & Knaves trace checker: :func:`check_kk_trace` (slots, claims, DERIVATION certificate,
answer) and :func:`kk_cot_correct`; the trace grammar is documented in :mod:`faithgrpo.tasks.knights_knaves`."""

from __future__ import annotations

import functools
import itertools
import operator
import re
from dataclasses import dataclass, field
from typing import Any

from faithgrpo.tasks.knights_knaves.claims import certify_claims, describe_assignment
from faithgrpo.tasks.knights_knaves.logic import Assignment, assignment_of, index_of
from faithgrpo.tasks.knights_knaves.puzzle import (
    MEMO_KEY_CHARS,
    ROLE_SET,
    ROLE_WORDS,
    KKPuzzle,
    as_puzzle,
    kk_score_answer,
    memoised,
    score_roles,
)
from faithgrpo.tasks.knights_knaves.trace import (
    MAX_TRACE_CHARS,
    parse_kk_assignment,
    parse_kk_trace,
    parse_statements,
    trace_slot,
)

__all__ = [
    "CHECK_NAMES",
    "KKCheck",
    "check_kk_trace",
    "kk_cot_correct",
]

CHECK_NAMES = ("statements", "strategy", "derivation", "consistent", "solution", "answer")
_check_values = operator.attrgetter(*CHECK_NAMES)  # a KKCheck's six booleans, as a tuple

# ---------------------------------------------------------------------------------------------------
# The checker
# ---------------------------------------------------------------------------------------------------

_STRATEGY_RE = re.compile(
    r"truth[\s-]*table|case[\s-]*(?:analysis|split|by[\s-]*case)|\bcases\b|enumerat|exhaustive|"
    r"brute[\s-]*force|\ball\s+(?:\d+\s+|possible\s+)?(?:assignments|combinations|possibilities|cases|rows)|"
    r"contradiction|\bsuppos|\bassum",
    re.IGNORECASE,
)
# Derivation tokens: words plus the punctuation of role references ("Name=role", "role(Name)").
_DERIVATION_TOKEN_RE = re.compile(r"\w+|[=()]")
_ASCII_TOKEN_RE = re.compile(r"\w+|[=()]", re.ASCII)  # the same tokens on ASCII text, faster


@dataclass
class KKCheck:
    """Result of checking a Knights & Knaves trace.

    Attributes:
        statements: Every person's claim is restated, and each restatement is equivalent to the
            metadata statement over all ``2^n`` assignments.
        strategy: STRATEGY names a method that decides the puzzle (truth table, case analysis, ...).
        derivation: DERIVATION is a certificate of the answer (module docstring, "Derivation
            claims"): it has at least one claim, every claim is true by truth table on the puzzle's
            statements, no claim repeats, every name and role reference (also ``Name=role`` and
            ``role(Name)`` in prose) belongs to the puzzle, and the claims leave exactly one
            assignment open, the ASSIGNMENT (or, without a usable ASSIGNMENT, the ``<answer>``'s);
            with an ASSIGNMENT, also ``answer``.
        consistent: ASSIGNMENT makes each person a knight iff their *restated* claim is true.
        solution: ASSIGNMENT equals the puzzle's solution, and ``answer`` passes.
        answer: ``<answer>`` states exactly ASSIGNMENT in reasoning-gym's format (graded by its
            ``score_answer``, so it must use the puzzle's own terms) and offers no alternative.
        answer_correct: The final answer alone is right (reasoning-gym's ``score_answer`` == 1.0,
            one answer); an outcome signal, not counted in ``total``.
        total: Number of the six checks that pass.
        reasons: One line per failed check, prefixed with the check name.
        assignment: The parsed ASSIGNMENT (True = knight), or ``None``.
    """

    statements: bool = False
    strategy: bool = False
    derivation: bool = False
    consistent: bool = False
    solution: bool = False
    answer: bool = False
    answer_correct: bool = False
    total: int = 0
    reasons: list[str] = field(default_factory=list)
    assignment: Assignment | None = None

    @property
    def passed(self) -> bool:
        """All six checks pass: the chain of thought is correct."""
        return self.total == len(CHECK_NAMES)

    @property
    def score(self) -> float:
        """``total / 6`` in [0, 1], the CALVER-style reward."""
        return self.total / len(CHECK_NAMES)

    def as_dict(self) -> dict[str, Any]:
        """Plain-dict view (JSON-serialisable) for logs and reports."""
        return {
            **{name: getattr(self, name) for name in CHECK_NAMES},
            "answer_correct": self.answer_correct,
            "total": self.total,
            "reasons": list(self.reasons),
            "assignment": None if self.assignment is None else list(self.assignment),
        }


def _tokenize_line(line: str) -> tuple[str, ...]:
    """Casefolded derivation tokens of one line (words and ``=``, ``(``, ``)``)."""
    if line.isascii():  # ASCII casefolding is lower(), which keeps every token's boundaries: one pass
        return tuple(_ASCII_TOKEN_RE.findall(line.lower()))
    return tuple(t.casefold() for t in _DERIVATION_TOKEN_RE.findall(line))


# keyed by the line text, immutable tuples; bounded (lines over _MEMO_KEY_CHARS are not cached)
_line_tokens = functools.lru_cache(maxsize=16_384)(_tokenize_line)


# Role references on ASCII text, found with a few C-speed pattern scans instead of tokenizing the
# whole body. A reference is the token scan's (see _role_ref_problem): tokens are the maximal runs
# of \w and the single characters = ( ), and everything else (spaces, punctuation, line breaks)
# only separates them. "Name = role": "=" followed by a role-word token, whose previous token is a
# word; "role(Name)": "(" with the next token and a ")" after it, whose previous token is a role
# word. Overlapping matches are found (lookaheads).
_NON_TOKEN = r"[^\w=()]*"
_PAREN_ARG_RE = re.compile(r"\((?=" + _NON_TOKEN + r"(\w+|[=()])" + _NON_TOKEN + r"\))", re.ASCII)
_REV_WORD_RE = re.compile(_NON_TOKEN + r"(\w+)", re.ASCII)  # the token before a position, read reversed
# "Name = role", as two lists with one entry per "=" (lookaheads only: every "=" matches once):
# the role word after it ("" when the next token is not one) and, read in the reversed text, the
# word before it, reversed ("" when that token is not a word). Pairing them up needs no match object
# per reference.
_ROLE_AFTER_EQ_RE = re.compile(r"=(?=" + _NON_TOKEN + "((?:" + "|".join(ROLE_WORDS) + r")(?!\w))?)", re.ASCII)
_WORD_AFTER_EQ_RE = re.compile(r"=(?=" + _NON_TOKEN + r"(\w*))", re.ASCII)


def _role_refs_ok(low: str, puzzle: KKPuzzle) -> bool:
    """True when every role reference of the lowered ASCII text names a person and a puzzle role.

    Finds every reference the token scan of :func:`_role_ref_problem` finds (possibly more, never
    fewer), so True means that scan finds no problem; False sends the caller to that scan, which
    words the reason exactly as before.
    """
    if "=" not in low and "(" not in low:
        return True
    rev = low[::-1]
    n = len(low)
    if "=" in low:
        roles = _ROLE_AFTER_EQ_RE.findall(low)
        names = reversed(_WORD_AFTER_EQ_RE.findall(rev))  # the same "="s, in text order
        allowed = memoised(puzzle, ("eq refs",), None, _eq_refs_allowed, puzzle)
        # the (role, name) pairs of the "="s followed by a role word, checked at C speed
        if not allowed.issuperset(itertools.compress(zip(roles, names), roles)):
            return False
    for m in _PAREN_ARG_RE.finditer(low):
        prev = _REV_WORD_RE.match(rev, n - m.start())  # a role word right before "("?
        role = prev.group(1)[::-1] if prev is not None else None
        if role in ROLE_SET and (puzzle.person(m.group(1)) is None or role not in puzzle._roles):
            return False
    return True


def _eq_refs_allowed(puzzle: KKPuzzle) -> frozenset[tuple[str, str]]:
    """The ``(role, reversed name)`` pairs of a "Name = role" reference that are fine in lowered ASCII
    text: a person of the puzzle with a role of the puzzle, or any role word after a non-word."""
    names = [name for name in puzzle._lookup if name.isascii()]  # lowered ASCII text has no others
    pairs = {(role, name[::-1]) for role in puzzle._roles for name in names}
    return frozenset(pairs | {(role, "") for role in ROLE_WORDS})


def _role_ref_problem(body: str, puzzle: KKPuzzle) -> str | None:
    """The first role reference (``Name=role``, ``role(Name)``) naming no person or no puzzle role."""
    # One tokenizing pass; role references are found by looking around each role word. No token
    # spans a line break, so the body's tokens are its lines' tokens, in order (lines repeat a lot).
    if body.isascii():
        # ASCII line breaks (\n \r \v \f \x1c-\x1e) are not token characters, so one pass over the
        # whole lowered body gives exactly the lines' tokens, concatenated (one C call, no per-line work)
        tokens: list[str] = _ASCII_TOKEN_RE.findall(body.lower())
    else:
        tokens = []
        for line in body.splitlines():
            tokens.extend(_line_tokens(line) if len(line) <= MEMO_KEY_CHARS else _tokenize_line(line))
    if "=" not in tokens and "(" not in tokens:
        tokens = []  # a role reference needs "=" before or "(" after its role word: nothing to look at
    # visit only the role words (picked out at C speed: most tokens are not role words)
    for k in itertools.compress(range(len(tokens)), map(ROLE_SET.__contains__, tokens)):
        token = tokens[k]
        names = []
        if k >= 2 and tokens[k - 1] == "=" and tokens[k - 2] not in "=()":
            names.append(tokens[k - 2])
        if k + 3 < len(tokens) and tokens[k + 1] == "(" and tokens[k + 3] == ")":
            names.append(tokens[k + 2])
        for name in names:
            if puzzle.person(name) is None:
                return f"refers to {name[:30]!r}, who is not in this puzzle"
            if token not in puzzle._roles:
                return f"uses role {token!r}, which is not knight/knave or {puzzle.knight}/{puzzle.knave}"
    return None


def _check_derivation(
    body: str, puzzle: KKPuzzle, assignment: Assignment | None, answer: str | None
) -> str | None:
    """Why the DERIVATION is not a certificate of the trace's answer (``None`` when it is).

    Passes when (a) there is at least one claim, (b) every claim is true (see :func:`~faithgrpo.tasks.knights_knaves.claims.certify_claims`),
    (c) the claims leave exactly one assignment open, and it is the ASSIGNMENT (or, without a usable
    ASSIGNMENT, the ``<answer>``). Role references in prose (``Name=role``, ``role(Name)``) must
    name the puzzle's people and roles too.
    """
    if not (body.isascii() and _role_refs_ok(body.lower(), puzzle)):
        why = _role_ref_problem(body, puzzle)
        if why:
            return why
    remaining, why = certify_claims(body, puzzle)
    if why:
        return why
    n = puzzle.n_people
    if remaining.bit_count() != 1:
        others = remaining & ~(1 << index_of(assignment)) if assignment is not None else remaining
        example = assignment_of((others & -others).bit_length() - 1, n) if others else None
        return (
            f"incomplete certificate: the claims leave {remaining.bit_count()} assignments open"
            + (f", e.g. {describe_assignment(example, puzzle)}" if example else "")
            + "; rule out every assignment but the answer"
        )
    concluded = assignment_of(remaining.bit_length() - 1, n)
    if assignment is not None:
        if assignment != concluded:
            return f"the claims single out {describe_assignment(concluded, puzzle)}, not the ASSIGNMENT"
    elif kk_score_answer(answer, puzzle, concluded) != 1.0:
        return f"the claims single out {describe_assignment(concluded, puzzle)}, which no ASSIGNMENT or <answer> states"
    return None


def check_kk_trace(text: Any, metadata: Any, *, max_chars: int = MAX_TRACE_CHARS) -> KKCheck:
    """Check a Knights & Knaves trace against the puzzle by truth table.

    Never raises on the completion: unreadable text fails every check with a reason. Complexity:
    O(len(text) + Σ|s_i| · 2^n / wordsize).

    Args:
        text: The completion (string or TRL conversational completion).
        metadata: reasoning-gym ``knights_knaves`` metadata (dict, entry, JSON string, or a
            :class:`KKPuzzle`; pass a ``KKPuzzle`` to check many completions of one puzzle fastest).
        max_chars: Longest completion accepted; longer ones fail closed.

    Returns:
        A :class:`KKCheck` with the six checks, ``answer_correct``, ``total`` and ``reasons``.

    Raises:
        ValueError: The *metadata* is malformed (never for bad completion text).

    Example:
        >>> meta = {"names": ["Ava", "Noah"], "statements": [["and", ["lying", 0], ["lying", 1]],
        ...         ["lying", 0]], "solution": [False, True]}
        >>> trace = gold_kk_trace(meta, rng=0)
        >>> check_kk_trace(trace, meta).total
        6
    """
    puzzle = as_puzzle(metadata)
    result = KKCheck()
    trace = parse_kk_trace(text, max_chars=max_chars)

    # 1. statements: faithful restatement, by truth-table equivalence.
    restated_tables: dict[int, int] | None = None
    body, why = trace_slot(trace, "STATEMENTS")
    if body is not None:
        tables, errors = parse_statements(body, puzzle)
        why = "; ".join(errors[:3]) if errors else None
    if why is None:
        restated_tables = tables  # one table per person (no errors: nobody is missing)
        for i, gold in enumerate(puzzle.tables):
            mine = tables[i]
            if mine != gold:
                witness = assignment_of(((mine ^ gold) & -(mine ^ gold)).bit_length() - 1, puzzle.n_people)
                why = f"{puzzle.names[i]}'s restatement differs from the puzzle under {describe_assignment(witness, puzzle)}"
                break
    result.statements = why is None
    if why:
        result.reasons.append(f"statements: {why}")

    # 2. strategy
    body, why = trace_slot(trace, "STRATEGY")
    if body is not None and not _STRATEGY_RE.search(body):
        why = f"{body[:60]!r} names no method that decides the puzzle (truth table, case analysis, ...)"
    result.strategy = why is None
    if why:
        result.reasons.append(f"strategy: {why}")

    # 3. derivation: a certificate that singles out the trace's answer (needs the ASSIGNMENT).
    body, why = trace_slot(trace, "ASSIGNMENT")
    assignment = None
    if body is not None:
        # G traces repeat it: parse it once
        assignment, why = memoised(puzzle, ("assignment", body), body, parse_kk_assignment, body, puzzle)
    result.assignment = assignment
    derivation, derivation_why = trace_slot(trace, "DERIVATION")
    if derivation is not None:
        derivation_why = _check_derivation(derivation, puzzle, assignment, trace.answer)
    result.derivation = derivation_why is None
    if derivation_why:
        result.reasons.append(f"derivation: {derivation_why}")

    # 4-6 hinge on the assignment.
    if assignment is None:
        for name in ("consistent", "solution", "answer"):
            result.reasons.append(f"{name}: no usable ASSIGNMENT ({why})")
    else:
        index = index_of(assignment)
        if restated_tables is None:
            result.reasons.append(
                "consistent: the restated statements do not parse, nothing to check against"
            )
        else:
            bad = [
                puzzle.names[i]
                for i, knight in enumerate(assignment)
                if bool((restated_tables[i] >> index) & 1) != knight
            ]
            result.consistent = not bad
            if bad:
                result.reasons.append(
                    f"consistent: under the assignment, the restated claim of {', '.join(bad)} "
                    "does not match the speaker's role"
                )
        result.solution = assignment == puzzle.solution
        if not result.solution:
            result.reasons.append("solution: the assignment is not the puzzle's solution")
        if trace.answer is None:
            result.reasons.append("answer: no <answer>...</answer> block")
        elif score_roles(trace.answer, puzzle, assignment) == 1.0:
            result.answer = True
        else:
            result.reasons.append(
                f"answer: {trace.answer[:80]!r} does not state the assignment in the puzzle's terms "
                f"({puzzle.knight}/{puzzle.knave}), as one answer"
            )
        if not result.answer:
            # as for causal traces: a certificate of an ASSIGNMENT that is not the answer certifies nothing
            for name in ("derivation", "solution"):
                if getattr(result, name):
                    setattr(result, name, False)
                    result.reasons.append(f"{name}: the ASSIGNMENT is not the <answer>")
    result.answer_correct = score_roles(trace.answer, puzzle, None) == 1.0
    result.total = sum(_check_values(result))
    return result


def kk_cot_correct(text: Any, metadata: Any) -> bool:
    """True when the trace passes all six checks (the CoT verifier for CoT-Pass@K).

    Example:
        >>> meta = {"names": ["Ava", "Noah"], "statements": [["and", ["lying", 0], ["lying", 1]],
        ...         ["lying", 0]], "solution": [False, True]}
        >>> kk_cot_correct("<answer>Ava is a knave, and Noah is a knight.</answer>", meta)  # no CoT
        False
    """
    return check_kk_trace(text, metadata).passed
