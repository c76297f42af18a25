"""Knights & Knaves: a truth-table checker for reasoning-gym's ``knights_knaves`` puzzles and their traces.

CALVER's logic transfer (DESIGN §3.4): a trace restates every person's claim in a small formal syntax,
names a strategy, derives, and commits to an assignment; the checker recomputes everything by truth
table, so a chain of thought counts as correct only when it is *semantically* right, not when it
happens to end in the right answer.

**Statement grammar** (reasoning-gym's metadata ``statements``, one per person; tuples, or lists after
a JSON / ``datasets`` round trip)::

    ("telling-truth", i)         person i is a knight
    ("lying", i)                 person i is a knave
    ("not", s)
    ("and", s1, s2, ...)         ("or", s1, s2, ...)
    ("->", s1, s2)               ("<=>", s1, s2)

**Trace contract** — four slots inside ``<think>``, then the answer::

    <think>
    STATEMENTS:
    - Amelia: not knave(Elizabeth)
    - Elizabeth: knight(Amelia) -> knight(Elizabeth)
    STRATEGY: truth table over all 4 assignments
    DERIVATION:
    - assignment {Amelia: knight, Elizabeth: knight} is consistent
    - assignment {Amelia: knave, Elizabeth: knave} is inconsistent: Elizabeth's statement
    - Amelia=knave, Elizabeth=knight: Amelia's claim is true, but a knave lies
    - assignment {Amelia: knave, Elizabeth: knight} is inconsistent: Amelia's statement
    - so Amelia is a knight, by elimination
    - Elizabeth is a knight: Amelia's statement, given Amelia is a knight
    ASSIGNMENT: Amelia=knight, Elizabeth=knight
    </think>
    <answer>Amelia is a hero, and Elizabeth is a hero.</answer>

**Formula syntax** of a ``STATEMENTS`` line ``Name: formula``: atoms ``knight(Name)`` / ``knave(Name)``
(or the puzzle's own words, e.g. ``hero(Name)`` / ``villain(Name)``); operators, loosest first,
``<->`` (also ``<=>``, ``iff``, ``↔``), ``->`` (also ``=>``, ``implies``, ``→``; right-associative),
``or`` (``|``, ``||``, ``∨``), ``and`` (``&``, ``&&``, ``∧``), ``not`` (``~``, ``!``, ``¬``); parentheses.
Names and role words are case-insensitive. ``ASSIGNMENT`` items read ``Name=role`` (also ``Name: role``,
``Name is a role``), separated by commas, semicolons, ``and`` or newlines. The ``<answer>`` uses the
puzzle's own terms in reasoning-gym's format and is graded with reasoning-gym's ``score_answer``.

**One answer.** ASSIGNMENT and ``<answer>`` each commit to one assignment: text that offers
alternatives (:func:`faithgrpo.tasks.answers.offers_alternatives`: the words ``or``, ``either``,
``otherwise``, ``alternatively``, ``unless``, ``vice versa``, or ``/``) is no assignment, and such
an ``<answer>`` is wrong (also for the outcome reward), whatever its first option says.

**Derivation claims** (DESIGN §3.4: the derivation is a checked certificate, not prose). A
DERIVATION line is either a *claim* in this grammar or prose, which is ignored. One claim per line;
it may start with a bullet or number, a ``Row 3:``/``Case 3:``/``Step 3:`` label and one of ``so``,
``thus``, ``hence``, ``therefore``, ``then``, and may end with a period; names and role words
(``knight``/``knave`` or the puzzle's) are case-insensitive; ``=`` may replace ``:`` inside braces.
Every claim but ``is consistent`` *cites* what it follows from, and the checker verifies the
citation by truth table against the puzzle's statements. Claims are read in order; an assignment
is *open* until a claim rules it out. The forms::

    assignment {Ava: knight, Noah: knave} is inconsistent: Noah's statement
    assignment {Noah: knight} is inconsistent: Ava's statement, given Ava is a knight
    assignment {Ava: knight, Noah: knight} is consistent
    Noah is a knave: Ava's statement, given Ava is a knight
    so Ava is a knight, by elimination

* **Citation**: the statements the claim follows from — ``Noah's statement``, ``Noah's claim`` or
  ``the statement of Noah``, several joined by ``and``, ``&`` or commas — after ``:``, ``,``, ``(``,
  ``-`` and optionally ``by``, ``from``, ``because of``, ``per``, ``via``, ``contradicts``,
  ``violates``; then optionally the *premises*, the earlier conclusions it uses: ``given`` (also
  ``since``, ``as``, ``because``) and ``Name is a role`` or ``Name=role`` items joined by ``and`` or
  commas. A premise must already be concluded: every open assignment gives that person that role.
* ``assignment {...} is inconsistent <citation>`` — the roles may be partial. Its *cases* are the
  assignments that extend the roles and satisfy the premises. True when *every* cited statement
  contradicts its speaker's role in every case; rules the cases out. A line of this form that cites
  no statement fails the derivation (a bare verdict: the checker, not the trace, would find why).
* ``assignment {...} is consistent`` — every person listed, no citation; true when every statement
  matches its speaker's role. Rules nothing out (it shows the answer works).
* ``Name is a role <citation>`` — its cases are the assignments that give Name the other role and
  satisfy the premises; true when every cited statement contradicts its speaker in every case;
  rules them out. ``Name is a role by elimination`` (also ``by the claims above``, ``from the cases
  above``) is true when no open assignment gives Name the other role and rules nothing out. A role
  sentence with no citation (``so Ava is a knight``) is prose.

Why a cited statement must do the work *alone*, in *every* case: a puzzle has a unique solution, so
"no extension of these roles is consistent" holds for every partial assignment that disagrees with
the answer; checked only that way, a claim merely restates the answer, and a list of such verdicts
certifies nothing the checker did not work out itself. A claim whose named statement is contradicted
in every case, given only its roles and named premises, is an inference step the checker replays
from what the trace says; citing extra statements fails, so "cite everyone" does not help. A case
that needs several statements is split into smaller cases (an inconsistent full assignment always
contradicts some statement). A true claim never rules out a consistent assignment.

**Checks** (:class:`KKCheck`, six, like CALVER): ``statements`` (each restatement is equivalent to the
metadata statement by truth table), ``strategy`` (names a method that decides the puzzle),
``derivation`` (a certificate: at least one claim, every claim true, no claim repeated, no one outside
the puzzle named, and exactly one assignment left open, which is the ASSIGNMENT — or, without a usable
ASSIGNMENT, the ``<answer>``), ``consistent`` (the assignment makes each person a knight iff their
*restated* claim is true), ``solution`` (the assignment is the puzzle's solution), ``answer``
(``<answer>`` states the assignment, as one answer). As for causal traces, when the ``<answer>`` is
not the ASSIGNMENT the ``derivation`` and ``solution`` checks fail too: a certificate of an
assignment that is not the answer certifies nothing, so such a trace scores at most 3/6.

**Truth tables as bitmasks.** With n people, assignment index ``a`` in ``[0, 2^n)`` makes person i a
knight iff bit i of ``a`` is set. A statement's truth table is the Python int whose bit ``a`` is its
value under assignment ``a``; connectives are bitwise operations, so a table costs O(|s| · 2^n / 64)
word operations and equivalence is integer equality.

Every parser of model output is bounded (length, line, token, claim and nesting caps, applied before
any pattern runs) and never raises;
malformed metadata (user input) raises ``ValueError`` naming the fix.
"""

from __future__ import annotations

import functools
import itertools
import operator
import re
from dataclasses import dataclass, field
from typing import Any

from faithgrpo.tasks.kk_claims import MAX_CLAIM_LINE_CHARS as MAX_CLAIM_LINE_CHARS
from faithgrpo.tasks.kk_claims import MAX_CLAIMS, KKClaim, _certify, _describe, parse_kk_claim
from faithgrpo.tasks.kk_formulas import MAX_FORMULA_CHARS as MAX_FORMULA_CHARS
from faithgrpo.tasks.kk_formulas import MAX_FORMULA_DEPTH as MAX_FORMULA_DEPTH
from faithgrpo.tasks.kk_formulas import MAX_FORMULA_TOKENS as MAX_FORMULA_TOKENS
from faithgrpo.tasks.kk_formulas import OPERATOR_STYLES as OPERATOR_STYLES
from faithgrpo.tasks.kk_formulas import format_kk_formula, parse_kk_formula
from faithgrpo.tasks.kk_gold import _EXAMPLE_METADATA as _EXAMPLE_METADATA
from faithgrpo.tasks.kk_gold import gold_kk_trace, kk_prompt_instructions
from faithgrpo.tasks.kk_logic import (
    MAX_PEOPLE,
    Assignment,
    _assignment_of,
    _index_of,
    consistent_assignments,
    evaluate_statement,
    normalize_statement,
    truth_table,
)
from faithgrpo.tasks.kk_logic import MAX_STATEMENT_DEPTH as MAX_STATEMENT_DEPTH
from faithgrpo.tasks.kk_logic import MAX_STATEMENT_NODES as MAX_STATEMENT_NODES
from faithgrpo.tasks.kk_puzzle import _MEMO_ENTRIES as _MEMO_ENTRIES
from faithgrpo.tasks.kk_puzzle import (
    _MEMO_KEY_CHARS,
    _ROLE_SET,
    _ROLE_WORDS,
    KKPuzzle,
    _memoised,
    _puzzle,
    _score,
    kk_oracle_answer,
    kk_puzzle,
    kk_score_answer,
)
from faithgrpo.tasks.kk_puzzle import MAX_ANSWER_CHARS as MAX_ANSWER_CHARS
from faithgrpo.tasks.kk_trace import MAX_SLOT_CHARS as MAX_SLOT_CHARS
from faithgrpo.tasks.kk_trace import (
    MAX_TRACE_CHARS,
    KKTrace,
    _parse_statements,
    _slot,
    parse_kk_assignment,
    parse_kk_trace,
)
from faithgrpo.tasks.kk_trace import MAX_TRACE_LINES as MAX_TRACE_LINES
from faithgrpo.tasks.kk_trace import SLOT_NAMES as SLOT_NAMES

__all__ = [
    "CHECK_NAMES",
    "MAX_CLAIMS",
    "MAX_PEOPLE",
    "MAX_TRACE_CHARS",
    "KKCheck",
    "KKClaim",
    "KKPuzzle",
    "KKTrace",
    "check_kk_trace",
    "consistent_assignments",
    "evaluate_statement",
    "format_kk_formula",
    "gold_kk_trace",
    "kk_cot_correct",
    "kk_oracle_answer",
    "kk_prompt_instructions",
    "kk_puzzle",
    "kk_score_answer",
    "normalize_statement",
    "parse_kk_assignment",
    "parse_kk_claim",
    "parse_kk_formula",
    "parse_kk_trace",
    "truth_table",
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
_ROLE_AFTER_EQ_RE = re.compile(
    r"=(?=" + _NON_TOKEN + "((?:" + "|".join(_ROLE_WORDS) + r")(?!\w))?)", re.ASCII
)
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
        allowed = _memoised(puzzle, ("eq refs",), None, _eq_refs_allowed, puzzle)
        # the (role, name) pairs of the "="s followed by a role word, checked at C speed
        if not allowed.issuperset(itertools.compress(zip(roles, names), roles)):
            return False
    for m in _PAREN_ARG_RE.finditer(low):
        prev = _REV_WORD_RE.match(rev, n - m.start())  # a role word right before "("?
        role = prev.group(1)[::-1] if prev is not None else None
        if role in _ROLE_SET and (puzzle.person(m.group(1)) is None or role not in puzzle._roles):
            return False
    return True


def _eq_refs_allowed(puzzle: KKPuzzle) -> frozenset[tuple[str, str]]:
    """The ``(role, reversed name)`` pairs of a "Name = role" reference that are fine in lowered ASCII
    text: a person of the puzzle with a role of the puzzle, or any role word after a non-word."""
    names = [name for name in puzzle._lookup if name.isascii()]  # lowered ASCII text has no others
    pairs = {(role, name[::-1]) for role in puzzle._roles for name in names}
    return frozenset(pairs | {(role, "") for role in _ROLE_WORDS})


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
            tokens.extend(_line_tokens(line) if len(line) <= _MEMO_KEY_CHARS else _tokenize_line(line))
    if "=" not in tokens and "(" not in tokens:
        tokens = []  # a role reference needs "=" before or "(" after its role word: nothing to look at
    # visit only the role words (picked out at C speed: most tokens are not role words)
    for k in itertools.compress(range(len(tokens)), map(_ROLE_SET.__contains__, tokens)):
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

    Passes when (a) there is at least one claim, (b) every claim is true (see :func:`_certify`),
    (c) the claims leave exactly one assignment open, and it is the ASSIGNMENT (or, without a usable
    ASSIGNMENT, the ``<answer>``). Role references in prose (``Name=role``, ``role(Name)``) must
    name the puzzle's people and roles too.
    """
    if not (body.isascii() and _role_refs_ok(body.lower(), puzzle)):
        why = _role_ref_problem(body, puzzle)
        if why:
            return why
    remaining, why = _certify(body, puzzle)
    if why:
        return why
    n = puzzle.n_people
    if remaining.bit_count() != 1:
        others = remaining & ~(1 << _index_of(assignment)) if assignment is not None else remaining
        example = _assignment_of((others & -others).bit_length() - 1, n) if others else None
        return (
            f"incomplete certificate: the claims leave {remaining.bit_count()} assignments open"
            + (f", e.g. {_describe(example, puzzle)}" if example else "")
            + "; rule out every assignment but the answer"
        )
    concluded = _assignment_of(remaining.bit_length() - 1, n)
    if assignment is not None:
        if assignment != concluded:
            return f"the claims single out {_describe(concluded, puzzle)}, not the ASSIGNMENT"
    elif kk_score_answer(answer, puzzle, concluded) != 1.0:
        return f"the claims single out {_describe(concluded, puzzle)}, which no ASSIGNMENT or <answer> states"
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
    puzzle = _puzzle(metadata)
    result = KKCheck()
    trace = parse_kk_trace(text, max_chars=max_chars)

    # 1. statements: faithful restatement, by truth-table equivalence.
    restated_tables: dict[int, int] | None = None
    body, why = _slot(trace, "STATEMENTS")
    if body is not None:
        tables, errors = _parse_statements(body, puzzle)
        why = "; ".join(errors[:3]) if errors else None
    if why is None:
        restated_tables = tables  # one table per person (no errors: nobody is missing)
        for i, gold in enumerate(puzzle.tables):
            mine = tables[i]
            if mine != gold:
                witness = _assignment_of(((mine ^ gold) & -(mine ^ gold)).bit_length() - 1, puzzle.n_people)
                why = f"{puzzle.names[i]}'s restatement differs from the puzzle under {_describe(witness, puzzle)}"
                break
    result.statements = why is None
    if why:
        result.reasons.append(f"statements: {why}")

    # 2. strategy
    body, why = _slot(trace, "STRATEGY")
    if body is not None and not _STRATEGY_RE.search(body):
        why = f"{body[:60]!r} names no method that decides the puzzle (truth table, case analysis, ...)"
    result.strategy = why is None
    if why:
        result.reasons.append(f"strategy: {why}")

    # 3. derivation: a certificate that singles out the trace's answer (needs the ASSIGNMENT).
    body, why = _slot(trace, "ASSIGNMENT")
    assignment = None
    if body is not None:
        # G traces repeat it: parse it once
        assignment, why = _memoised(puzzle, ("assignment", body), body, parse_kk_assignment, body, puzzle)
    result.assignment = assignment
    derivation, derivation_why = _slot(trace, "DERIVATION")
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
        index = _index_of(assignment)
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
        elif _score(trace.answer, puzzle, assignment) == 1.0:
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
    result.answer_correct = _score(trace.answer, puzzle, None) == 1.0
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
