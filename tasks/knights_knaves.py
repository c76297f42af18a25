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
    - assignment {Amelia: knight, Elizabeth: knave} is inconsistent: Amelia's statement
    - Amelia=knave, Elizabeth=knight: Amelia's claim is true, but a knave lies
    - assignment {Amelia: knave, Elizabeth: knight} is inconsistent: Amelia's statement
    - assignment {Amelia: knave, Elizabeth: knave} is inconsistent: Elizabeth's statement
    - so Amelia is a knight
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

**Derivation claims** (DESIGN §3.4: the derivation is a checked certificate, not prose). A
DERIVATION line is either a *claim* in this grammar or prose, which is ignored. One claim per line;
it may start with a bullet or number, a ``Row 3:``/``Case 3:``/``Step 3:`` label and one of ``so``,
``thus``, ``hence``, ``therefore``, ``then``, and may end with a period; names and role words
(``knight``/``knave`` or the puzzle's) are case-insensitive. Claims are checked in order, by truth
table against the puzzle's statements, over the assignments still *open* (not ruled out by an
earlier claim). Three kinds, one example each::

    assignment {Ava: knight, Noah: knave} is inconsistent: Noah's statement
    assignment {Ava: knight, Noah: knight} is consistent
    so Ava is a knight

* ``assignment {...} is inconsistent`` — the roles may be partial (``assignment {Ava: knave} is
  inconsistent`` speaks of every assignment that extends them). True when *one* statement
  contradicts its speaker's role in every open assignment extending the roles; rules those out. An
  optional citation names that statement: ``: Noah's statement``, ``(by Noah's statement)``,
  ``, contradicts the statement of Noah``; several (``: Ava's statement and Noah's statement``)
  name candidates, one of which must do. ``=`` may replace ``:`` inside the braces.
* ``assignment {...} is consistent`` — every person listed; true when every statement matches its
  speaker's role. Rules nothing out (it shows the answer works).
* ``Name is a knight`` / ``Name is a knave`` — true when every open assignment gives Name that
  role, or one statement (the cited one, as above, when cited) contradicts its speaker in every open
  assignment giving Name the other role; rules those out.

Why *one* statement: a puzzle has a unique solution, so "no extension of these roles is consistent"
holds for every partial assignment that disagrees with the answer; checked only that way, a claim
could merely restate the answer. Requiring one statement to refute a whole case makes each claim an
inference step the checker can replay; a case that needs several statements is split into smaller
cases (an inconsistent full assignment is always refuted by one statement). A true claim never
rules out a consistent assignment.

**Checks** (:class:`KKCheck`, six, like CALVER): ``statements`` (each restatement is equivalent to the
metadata statement by truth table), ``strategy`` (names a method that decides the puzzle),
``derivation`` (a certificate: at least one claim, every claim true, no claim repeated, no one outside
the puzzle named, and exactly one assignment left open, which is the ASSIGNMENT — or, without a usable
ASSIGNMENT, the ``<answer>``), ``consistent`` (the assignment makes each person a knight iff their
*restated* claim is true), ``solution`` (the assignment is the puzzle's solution), ``answer``
(``<answer>`` states the assignment).

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
import json
import operator
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from faithgrpo.rewards.text import completion_text, extract_answer, extract_think

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

Statement = tuple  # nested tuples of the grammar above; see normalize_statement
Assignment = tuple[bool, ...]

CHECK_NAMES = ("statements", "strategy", "derivation", "consistent", "solution", "answer")
SLOT_NAMES = ("STATEMENTS", "STRATEGY", "DERIVATION", "ASSIGNMENT")

MAX_PEOPLE = 12  # 2^12-bit truth tables: still microseconds per connective
MAX_STATEMENT_DEPTH = 64  # metadata statements (user input)
MAX_STATEMENT_NODES = 10_000
MAX_TRACE_CHARS = 20_000  # whole completion; longer traces fail closed
MAX_TRACE_LINES = 1_000
MAX_FORMULA_CHARS = 1_000
MAX_FORMULA_TOKENS = 300
MAX_FORMULA_DEPTH = 40  # parentheses + negations
MAX_SLOT_CHARS = 8_000
MAX_ANSWER_CHARS = 2_000

_ROLE_WORDS = [
    "knight",
    "knave",
    "pioneer",
    "laggard",
    "saint",
    "sinner",
    "hero",
    "villain",
    "angel",
    "devil",
    "altruist",
    "egoist",
    "sage",
    "fool",
]
# Words reasoning-gym's answer grader treats specially; names must avoid them.
_RESERVED_NAMES = ["is", "a", "an", "and", "not"]
_ATOMS = ("telling-truth", "lying")
_NARY = ("and", "or")
_BINARY = ("->", "<=>")


# ---------------------------------------------------------------------------------------------------
# Statement grammar: normalisation and evaluation
# ---------------------------------------------------------------------------------------------------


def _as_index(value: Any, n_people: int) -> int:
    # JSON/Arrow may turn indices into strings or numpy ints; bool is an int subclass we refuse.
    if isinstance(value, bool):
        raise ValueError(f"person index must be an integer, got {value!r}")
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    try:
        index = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"person index must be an integer, got {value!r}") from None
    if index != value or not 0 <= index < n_people:
        raise ValueError(f"person index {value!r} is out of range for {n_people} people")
    return index


def normalize_statement(statement: Any, n_people: int) -> Statement:
    """Return a reasoning-gym statement as canonical nested tuples of ``str`` and ``int``.

    Accepts tuples or lists (a JSON / ``datasets`` round trip turns tuples into lists), numpy strings
    and integers, and digit-string person indices.

    Args:
        statement: One person's statement in reasoning-gym's grammar.
        n_people: Number of people in the puzzle (person indices must lie in ``[0, n_people)``).

    Returns:
        The statement as nested tuples, e.g. ``("not", ("lying", 1))``.

    Raises:
        ValueError: The statement does not follow the grammar, is nested deeper than
            ``MAX_STATEMENT_DEPTH`` or has more than ``MAX_STATEMENT_NODES`` nodes.

    Example:
        >>> normalize_statement(["->", ["telling-truth", 0], ["lying", "1"]], 2)
        ('->', ('telling-truth', 0), ('lying', 1))
    """
    budget = [MAX_STATEMENT_NODES]

    def walk(node: Any, depth: int) -> Statement:
        budget[0] -= 1
        if budget[0] < 0:
            raise ValueError(f"statement has more than {MAX_STATEMENT_NODES} nodes")
        if depth > MAX_STATEMENT_DEPTH:
            raise ValueError(f"statement is nested deeper than {MAX_STATEMENT_DEPTH}")
        if isinstance(node, (str, bytes)) or not isinstance(node, Sequence) or len(node) == 0:
            raise ValueError(f"statement node must be a non-empty tuple or list, got {node!r:.80}")
        op = str(node[0])
        if op in _ATOMS:
            if len(node) != 2:
                raise ValueError(f"({op!r}, person) takes exactly one person index, got {node!r:.80}")
            return (op, _as_index(node[1], n_people))
        if op == "not":
            if len(node) != 2:
                raise ValueError(f"('not', s) takes exactly one operand, got {node!r:.80}")
            return ("not", walk(node[1], depth + 1))
        if op in _NARY:
            if len(node) < 2:
                raise ValueError(f"({op!r}, ...) needs at least one operand")
            return (op, *(walk(child, depth + 1) for child in node[1:]))
        if op in _BINARY:
            if len(node) != 3:
                raise ValueError(f"({op!r}, a, b) takes exactly two operands, got {node!r:.80}")
            return (op, walk(node[1], depth + 1), walk(node[2], depth + 1))
        raise ValueError(
            f"unknown statement operator {op!r}; expected one of telling-truth, lying, not, and, or, ->, <=>"
        )

    return walk(statement, 0)


def _evaluate(statement: Statement, assignment: Sequence[bool]) -> bool:
    op = statement[0]
    if op == "telling-truth":
        return bool(assignment[statement[1]])
    if op == "lying":
        return not assignment[statement[1]]
    if op == "not":
        return not _evaluate(statement[1], assignment)
    if op == "and":
        return all(_evaluate(s, assignment) for s in statement[1:])
    if op == "or":
        return any(_evaluate(s, assignment) for s in statement[1:])
    if op == "->":
        return (not _evaluate(statement[1], assignment)) or _evaluate(statement[2], assignment)
    return _evaluate(statement[1], assignment) == _evaluate(statement[2], assignment)  # "<=>"


def evaluate_statement(statement: Any, assignment: Sequence[bool]) -> bool:
    """Evaluate one statement under an assignment (``assignment[i]`` is True when person i is a knight).

    Complexity: O(|statement|).

    Args:
        statement: A statement in reasoning-gym's grammar (tuples or lists).
        assignment: One bool per person.

    Returns:
        The truth value of the statement.

    Example:
        >>> evaluate_statement(("->", ("telling-truth", 0), ("lying", 1)), (True, False))
        True
    """
    return _evaluate(normalize_statement(statement, len(assignment)), [bool(x) for x in assignment])


@functools.lru_cache(maxsize=MAX_PEOPLE + 1)
def _knight_masks(n_people: int) -> tuple[int, ...]:
    # Bit a of mask i is set iff assignment a makes person i a knight (bit i of a).
    return tuple(sum(1 << a for a in range(1 << n_people) if (a >> i) & 1) for i in range(n_people))


def _table(statement: Statement, n_people: int, full: int) -> int:
    op = statement[0]
    if op == "telling-truth":
        return _knight_masks(n_people)[statement[1]]
    if op == "lying":
        return full & ~_knight_masks(n_people)[statement[1]]
    if op == "not":
        return full & ~_table(statement[1], n_people, full)
    if op == "and":
        value = full
        for child in statement[1:]:
            value &= _table(child, n_people, full)
        return value
    if op == "or":
        value = 0
        for child in statement[1:]:
            value |= _table(child, n_people, full)
        return value
    left = _table(statement[1], n_people, full)
    right = _table(statement[2], n_people, full)
    if op == "->":
        return full & (~left | right)
    return full & ~(left ^ right)  # "<=>"


def truth_table(statement: Any, n_people: int) -> int:
    """Return the truth table of a statement as a bitmask over all ``2**n_people`` assignments.

    Bit ``a`` is set iff the statement is true when exactly the people whose bit is set in ``a`` are
    knights. Complexity: O(|statement| · 2^n / wordsize).

    Args:
        statement: A statement in reasoning-gym's grammar.
        n_people: Number of people, at most ``MAX_PEOPLE``.

    Returns:
        The bitmask (an ``int`` below ``2 ** 2 ** n_people``).

    Example:
        >>> bin(truth_table(("telling-truth", 0), 2))  # assignments 1 and 3 make person 0 a knight
        '0b1010'
    """
    if not 1 <= n_people <= MAX_PEOPLE:
        raise ValueError(f"n_people must be in [1, {MAX_PEOPLE}], got {n_people}")
    return _table(normalize_statement(statement, n_people), n_people, (1 << (1 << n_people)) - 1)


def _index_of(assignment: Sequence[bool]) -> int:
    return sum(1 << i for i, knight in enumerate(assignment) if knight)


def _assignment_of(index: int, n_people: int) -> Assignment:
    return tuple(bool((index >> i) & 1) for i in range(n_people))


def _consistency_mask(tables: Sequence[int], n_people: int) -> int:
    # Person i is a knight iff their statement is true: AND_i (knight_i <=> statement_i).
    full = (1 << (1 << n_people)) - 1
    value = full
    for mask, table in zip(_knight_masks(n_people), tables):
        value &= full & ~(mask ^ table)
    return value


def consistent_assignments(statements: Sequence[Any]) -> list[Assignment]:
    """Return every assignment under which each person is a knight iff their statement is true.

    Enumerates all ``2**n`` assignments by truth table, in reasoning-gym's order
    (``itertools.product([True, False], repeat=n)``). Complexity: O(Σ|s_i| · 2^n / wordsize + n · 2^n).

    Args:
        statements: One statement per person, in reasoning-gym's grammar.

    Returns:
        The consistent assignments (a well-posed puzzle has exactly one).

    Example:
        >>> consistent_assignments([("and", ("lying", 0), ("lying", 1)), ("lying", 0)])  # "we are both knaves"
        [(False, True)]
    """
    n = len(statements)
    if not 1 <= n <= MAX_PEOPLE:
        raise ValueError(f"a puzzle needs 1 to {MAX_PEOPLE} people, got {n}")
    tables = [truth_table(s, n) for s in statements]
    mask = _consistency_mask(tables, n)
    return [a for a in itertools.product([True, False], repeat=n) if (mask >> _index_of(a)) & 1]


# ---------------------------------------------------------------------------------------------------
# Puzzle metadata
# ---------------------------------------------------------------------------------------------------


def _article(word: str) -> str:
    return f"an {word}" if word[:1].lower() in "aeiou" else f"a {word}"


@dataclass(frozen=True)
class KKPuzzle:
    """A validated Knights & Knaves puzzle built from reasoning-gym metadata.

    Attributes:
        names: One name per person.
        statements: Canonical statements (nested tuples), one per person.
        solution: The listed solution (True = knight); verified consistent by truth table.
        knight: The puzzle's word for a knight (e.g. ``"hero"``).
        knave: The puzzle's word for a knave (e.g. ``"villain"``).
        a_knight: With article, as in the answer (``"a hero"``).
        a_knave: With article (``"a villain"``).
        tables: Truth-table bitmask of each statement.
        n_solutions: Number of consistent assignments (1 for reasoning-gym's puzzles).
    """

    names: tuple[str, ...]
    statements: tuple[Statement, ...]
    solution: Assignment
    knight: str
    knave: str
    a_knight: str
    a_knave: str
    tables: tuple[int, ...] = field(repr=False)
    n_solutions: int = 1

    @property
    def n_people(self) -> int:
        return len(self.names)

    @classmethod
    def from_metadata(cls, metadata: Any) -> KKPuzzle:
        """Build a puzzle from reasoning-gym ``knights_knaves`` metadata.

        Args:
            metadata: The entry's ``metadata`` dict, the whole entry (a dict with a ``metadata`` key),
                a JSON string of either, or a ``KKPuzzle`` (returned as is).

        Returns:
            The validated puzzle.

        Raises:
            ValueError: Required fields are missing or malformed, or the listed solution is not
                consistent with the statements.
        """
        if isinstance(metadata, KKPuzzle):
            return metadata
        if isinstance(metadata, (str, bytes)):
            try:
                metadata = json.loads(metadata)
            except ValueError as err:
                raise ValueError(
                    f"metadata string is not valid JSON ({err}); pass the metadata dict"
                ) from None
        if not isinstance(metadata, Mapping):
            raise ValueError(
                f"metadata must be a dict (reasoning-gym knights_knaves entry['metadata']), got {type(metadata).__name__}"
            )
        if "statements" not in metadata and isinstance(metadata.get("metadata"), (Mapping, str)):
            return cls.from_metadata(metadata["metadata"])
        for key in ("statements", "names"):
            if key not in metadata:
                raise ValueError(
                    f"metadata lacks {key!r}; pass reasoning-gym knights_knaves entry['metadata']"
                )
        raw_statements, raw_names = metadata["statements"], metadata["names"]
        if isinstance(raw_statements, (str, bytes)) or not isinstance(raw_statements, Sequence):
            raise ValueError("metadata 'statements' must be a list with one statement per person")
        if isinstance(raw_names, (str, bytes)) or not isinstance(raw_names, Sequence):
            raise ValueError("metadata 'names' must be a list of names")
        n = len(raw_names)
        if not 1 <= n <= MAX_PEOPLE:
            raise ValueError(f"a puzzle needs 1 to {MAX_PEOPLE} people, got {n} names")
        if len(raw_statements) != n:
            raise ValueError(f"metadata has {n} names but {len(raw_statements)} statements; they must match")
        names = tuple(str(x).strip() for x in raw_names)
        if any(not _NAME_RE.fullmatch(name) for name in names):
            raise ValueError(f"every name must be one word of letters/digits/underscores, got {list(names)}")
        if len({name.casefold() for name in names}) != n:
            raise ValueError(f"names must be distinct ignoring case, got {list(names)}")
        statements = tuple(normalize_statement(s, n) for s in raw_statements)

        terms = metadata.get("knight_knave_terms") or {}
        if not isinstance(terms, Mapping):
            raise ValueError(
                "metadata 'knight_knave_terms' must be a dict like {'knight': 'hero', 'knave': 'villain'}"
            )
        knight = str(terms.get("knight", "knight")).strip().lower()
        knave = str(terms.get("knave", "knave")).strip().lower()
        if not (_NAME_RE.fullmatch(knight) and _NAME_RE.fullmatch(knave)) or knight == knave:
            raise ValueError(
                f"knight/knave terms must be two distinct single words, got {knight!r}/{knave!r}"
            )
        if knight == "knave" or knave == "knight":
            raise ValueError(
                f"knight/knave terms {knight!r}/{knave!r} swap the generic words; that is ambiguous"
            )
        if knight not in _ROLE_WORDS or knave not in _ROLE_WORDS:
            # reasoning-gym's score_answer only recognises its own role words; others would grade as empty.
            raise ValueError(
                f"knight/knave terms must be reasoning-gym role words {_ROLE_WORDS}, got {knight!r}/{knave!r}"
            )
        if clash := set(_ROLE_WORDS + _RESERVED_NAMES) & {name.casefold() for name in names}:
            raise ValueError(f"names {sorted(clash)} collide with role or answer words; rename those people")
        a_knight = str(terms.get("a_knight", _article(knight))).strip()
        a_knave = str(terms.get("a_knave", _article(knave))).strip()

        full = (1 << (1 << n)) - 1
        tables = tuple(_table(s, n, full) for s in statements)
        consistent = _consistency_mask(tables, n)
        n_solutions = consistent.bit_count()
        raw_solution = metadata.get("solution")
        if raw_solution is None:
            if n_solutions != 1:
                raise ValueError(
                    f"metadata has no 'solution' and the puzzle has {n_solutions} consistent assignments; "
                    "pass a puzzle with a unique solution"
                )
            solution = _assignment_of(consistent.bit_length() - 1, n)
        else:
            if isinstance(raw_solution, (str, bytes)) or not isinstance(raw_solution, Sequence):
                raise ValueError("metadata 'solution' must be a list of bools (True = knight)")
            if len(raw_solution) != n or not all(isinstance(x, bool) or x in (0, 1) for x in raw_solution):
                raise ValueError(
                    f"metadata 'solution' must hold {n} bools (True = knight), got {raw_solution!r}"
                )
            solution = tuple(bool(x) for x in raw_solution)
            if not (consistent >> _index_of(solution)) & 1:
                raise ValueError(
                    "metadata 'solution' is not consistent with its statements by truth table; "
                    "the metadata is corrupted"
                )
        return cls(names, statements, solution, knight, knave, a_knight, a_knave, tables, n_solutions)

    def role_word(self, knight: bool, generic: bool = False) -> str:
        """The role word for a knight (True) or knave (False): the puzzle's own, or knight/knave."""
        if generic:
            return "knight" if knight else "knave"
        return self.knight if knight else self.knave

    def person(self, name: str) -> int | None:
        """Index of a person by name, ignoring case; ``None`` when the name is not in the puzzle."""
        return self._lookup.get(name.casefold())

    def role(self, word: str) -> bool | None:
        """True for a knight word, False for a knave word (generic or the puzzle's); else ``None``."""
        return self._roles.get(word.casefold())

    @functools.cached_property
    def _lookup(self) -> dict[str, int]:
        return {name.casefold(): i for i, name in enumerate(self.names)}

    @functools.cached_property
    def _roles(self) -> dict[str, bool]:
        return {"knight": True, "knave": False, self.knight: True, self.knave: False}

    @functools.cached_property
    def _memo(self) -> dict:
        """Results of pure text checks against this puzzle (see :func:`_memoised`)."""
        return {}


_MEMO_ENTRIES = 512  # per puzzle (G completions' distinct lines); then the memo starts over
_MEMO_KEY_CHARS = 300  # longer texts are checked without memoising: <= ~0.3 MB per puzzle


def _memoised(puzzle: KKPuzzle, key: tuple, text: str | None, compute: Any, *args: Any) -> Any:
    """``compute(*args)``, remembered on the puzzle under ``key``.

    Only for pure functions of the (frozen) puzzle and ``key`` (the text they read, plus any
    settings) whose results are immutable (tuples, ints, strings, floats), so the G completions of
    a prompt parse each repeated line once and no caller can alter a stored value. A call that
    raises is not remembered.
    """
    memo = puzzle._memo
    if key in memo:
        return memo[key]
    value = compute(*args)
    if text is None or len(text) <= _MEMO_KEY_CHARS:
        if len(memo) >= _MEMO_ENTRIES:
            memo.clear()
        memo[key] = value
    return value


@functools.lru_cache(maxsize=1024)
def _puzzle_from_json(text: str) -> KKPuzzle:
    return KKPuzzle.from_metadata(text)


def kk_puzzle(metadata: Any) -> KKPuzzle:
    """The validated puzzle of ``metadata`` (see :meth:`KKPuzzle.from_metadata`), shared by equal metadata.

    Dict metadata is keyed by its canonical JSON (sorted keys), so every checker built for one
    puzzle gets the same :class:`KKPuzzle` and the memo it carries. The puzzle is frozen; the cache
    is bounded (1,024 puzzles).

    Raises:
        ValueError: malformed metadata.
    """
    if isinstance(metadata, Mapping):
        try:
            text = json.dumps(metadata, sort_keys=True)
        except (TypeError, ValueError):  # not JSON-shaped: build it directly
            return KKPuzzle.from_metadata(metadata)
        return _puzzle_from_json(text)
    return _puzzle(metadata)


def _puzzle(metadata: Any) -> KKPuzzle:
    # A JSON column repeats the same string for every completion of a prompt: parse it once.
    if isinstance(metadata, str):
        return _puzzle_from_json(metadata)
    return metadata if isinstance(metadata, KKPuzzle) else KKPuzzle.from_metadata(metadata)


def kk_oracle_answer(metadata: Any, assignment: Sequence[bool] | None = None) -> str:
    """Render an assignment (default: the solution) as reasoning-gym's answer text.

    Args:
        metadata: Puzzle metadata (see :meth:`KKPuzzle.from_metadata`).
        assignment: One bool per person (True = knight); defaults to the puzzle's solution.

    Returns:
        E.g. ``"Amelia is a hero, and Elizabeth is a villain."``, exactly as reasoning-gym writes it.
    """
    puzzle = _puzzle(metadata)
    roles = puzzle.solution if assignment is None else tuple(bool(x) for x in assignment)
    if len(roles) != puzzle.n_people:
        raise ValueError(f"assignment has {len(roles)} roles for {puzzle.n_people} people")
    parts = [f"{name} is {puzzle.a_knight if r else puzzle.a_knave}" for name, r in zip(puzzle.names, roles)]
    return ", ".join(parts[:-1]) + ", and " + parts[-1] + "."


@functools.lru_cache(maxsize=1)
def _rg_score_answer():
    import reasoning_gym

    return reasoning_gym.get_score_answer_fn("knights_knaves")


def kk_score_answer(answer: str | None, metadata: Any, assignment: Sequence[bool] | None = None) -> float:
    """Score an answer with reasoning-gym's own ``knights_knaves`` ``score_answer``.

    Args:
        answer: The ``<answer>`` content (None or over ``MAX_ANSWER_CHARS`` scores 0.0).
        metadata: Puzzle metadata.
        assignment: The reference assignment; defaults to the puzzle's solution.

    Returns:
        reasoning-gym's score in [0, 1] (1.0 = every role right; it gives partial credit below that).
    """
    if not isinstance(answer, str) or not answer or len(answer) > MAX_ANSWER_CHARS:
        return 0.0
    puzzle = _puzzle(metadata)
    roles = None if assignment is None else tuple(bool(x) for x in assignment)
    return _memoised(puzzle, ("score", answer, roles), answer, _score_answer, answer, puzzle, roles)


def _score_answer(answer: str, puzzle: KKPuzzle, roles: Assignment | None) -> float:
    entry = {"answer": kk_oracle_answer(puzzle, roles)}
    try:
        return float(_rg_score_answer()(answer, entry))
    except Exception:  # reasoning-gym's scorer is model-facing; never let it raise here
        return 0.0


# ---------------------------------------------------------------------------------------------------
# Formula syntax: tokenizer, bounded recursive-descent parser, renderer
# ---------------------------------------------------------------------------------------------------

_NAME_RE = re.compile(r"[^\W_][\w]*")
_TOKEN_RE = re.compile(
    r"(?P<iff><->|<=>|↔|⇔)|(?P<imp>->|=>|→|⇒)|(?P<and>&&|&|∧)|(?P<or>\|\||\||∨)"
    r"|(?P<not>~|!|¬)|(?P<lp>\()|(?P<rp>\))|(?P<word>[^\W_]\w*)|(?P<space>\s+)"
)
_WORD_OPS = {"not": "not", "and": "and", "or": "or", "implies": "imp", "iff": "iff"}


class _FormulaError(Exception):
    """Internal: a restatement does not parse (caught; never escapes the public API)."""


def _tokenize(text: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN_RE.match(text, pos)
        if match is None:
            raise _FormulaError(f"unexpected character {text[pos]!r} at position {pos}")
        pos = match.end()
        kind = match.lastgroup
        if kind == "space":
            continue
        value = match.group()
        if kind == "word" and value.lower() in _WORD_OPS:
            kind = _WORD_OPS[value.lower()]
        tokens.append((kind, value))
        if len(tokens) > MAX_FORMULA_TOKENS:
            raise _FormulaError(f"more than {MAX_FORMULA_TOKENS} tokens")
    return tokens


class _FormulaParser:
    """Recursive descent over ``iff > imp > or > and > not > atom`` with an explicit depth cap."""

    def __init__(self, tokens: list[tuple[str, str]], puzzle: KKPuzzle):
        self.tokens = tokens
        self.pos = 0
        self.depth = 0
        self.puzzle = puzzle

    def peek(self) -> str | None:
        return self.tokens[self.pos][0] if self.pos < len(self.tokens) else None

    def take(self, kind: str) -> str:
        if self.peek() != kind:
            found = self.tokens[self.pos][1] if self.pos < len(self.tokens) else "end of formula"
            raise _FormulaError(f"expected {kind!r}, found {found!r}")
        self.pos += 1
        return self.tokens[self.pos - 1][1]

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_FORMULA_DEPTH:
            raise _FormulaError(f"nested deeper than {MAX_FORMULA_DEPTH}")

    def parse(self) -> Statement:
        if not self.tokens:
            raise _FormulaError("empty formula")
        node = self.iff()
        if self.pos != len(self.tokens):
            raise _FormulaError(f"unexpected {self.tokens[self.pos][1]!r} after a complete formula")
        return node

    def iff(self) -> Statement:
        node = self.imp()
        while self.peek() == "iff":
            self.pos += 1
            node = ("<=>", node, self.imp())
        return node

    def imp(self) -> Statement:
        node = self.disj()
        if self.peek() == "imp":
            self.pos += 1
            self.enter()
            node = ("->", node, self.imp())
            self.depth -= 1
        return node

    def disj(self) -> Statement:
        children = [self.conj()]
        while self.peek() == "or":
            self.pos += 1
            children.append(self.conj())
        return children[0] if len(children) == 1 else ("or", *children)

    def conj(self) -> Statement:
        children = [self.unary()]
        while self.peek() == "and":
            self.pos += 1
            children.append(self.unary())
        return children[0] if len(children) == 1 else ("and", *children)

    def unary(self) -> Statement:
        kind = self.peek()
        self.enter()
        try:
            if kind == "not":
                self.pos += 1
                return ("not", self.unary())
            if kind == "lp":
                self.pos += 1
                node = self.iff()
                self.take("rp")
                return node
            return self.atom()
        finally:
            self.depth -= 1

    def atom(self) -> Statement:
        word = self.take("word")
        role = self.puzzle.role(word)
        if role is None:
            raise _FormulaError(
                f"{word!r} is not a role; write knight(Name)/knave(Name) or "
                f"{self.puzzle.knight}(Name)/{self.puzzle.knave}(Name)"
            )
        self.take("lp")
        # A name may spell like an operator word ("Or"); inside role(...) any word is a name.
        found = self.tokens[self.pos][1] if self.pos < len(self.tokens) else ""
        if not _NAME_RE.fullmatch(found):
            raise _FormulaError(f"expected a name inside {word}(...), found {found or 'end of formula'!r}")
        self.pos += 1
        name = found
        self.take("rp")
        index = self.puzzle.person(name)
        if index is None:
            raise _FormulaError(f"{name!r} is not a person in this puzzle")
        return ("telling-truth" if role else "lying", index)


def parse_kk_formula(text: str, metadata: Any) -> tuple[Statement | None, str | None]:
    """Parse a restated claim in the trace's formula syntax into reasoning-gym's statement grammar.

    Never raises on the text: bad input returns ``(None, reason)``. Capped at ``MAX_FORMULA_CHARS``
    characters, ``MAX_FORMULA_TOKENS`` tokens and ``MAX_FORMULA_DEPTH`` nesting. Complexity: O(len).

    Args:
        text: E.g. ``"knight(Amelia) -> not villain(Elizabeth)"``.
        metadata: Puzzle metadata (names and role words come from it).

    Returns:
        ``(statement, None)`` on success, ``(None, reason)`` otherwise.

    Example:
        >>> meta = {"names": ["Ava", "Noah"], "statements": [["lying", 1], ["lying", 0]], "solution": [True, False]}
        >>> parse_kk_formula("not knight(Noah) and knave(Ava)", meta)
        (('and', ('not', ('telling-truth', 1)), ('lying', 0)), None)
        >>> parse_kk_formula("knight(Zed)", meta)
        (None, "'Zed' is not a person in this puzzle")
    """
    puzzle = _puzzle(metadata)
    if not isinstance(text, str):
        return None, "formula is not text"
    if len(text) > MAX_FORMULA_CHARS:
        return None, f"formula longer than {MAX_FORMULA_CHARS} characters"
    try:
        return _FormulaParser(_tokenize(text), puzzle).parse(), None
    except _FormulaError as err:
        return None, str(err)
    except RecursionError:  # unreachable under the depth cap; kept so the contract holds regardless
        return None, "formula nested too deeply"


OPERATOR_STYLES: dict[str, dict[str, str]] = {
    "words": {"not": "not ", "and": " and ", "or": " or ", "->": " -> ", "<=>": " <-> "},
    "symbols": {"not": "~", "and": " & ", "or": " | ", "->": " -> ", "<=>": " <-> "},
    "unicode": {"not": "¬", "and": " ∧ ", "or": " ∨ ", "->": " → ", "<=>": " ↔ "},
    "english": {"not": "not ", "and": " and ", "or": " or ", "->": " implies ", "<=>": " iff "},
}


def format_kk_formula(
    statement: Any, metadata: Any, *, style: str = "words", generic_roles: bool = True
) -> str:
    """Render a statement in the trace's formula syntax (inverse of :func:`parse_kk_formula`).

    Compound operands are always parenthesised, so ``parse_kk_formula(format_kk_formula(s))``
    returns ``s`` for statements whose and/or nodes have at least two operands.

    Args:
        statement: A statement in reasoning-gym's grammar.
        metadata: Puzzle metadata.
        style: Operator spelling, one of ``OPERATOR_STYLES`` (``words``, ``symbols``, ``unicode``,
            ``english``).
        generic_roles: Write ``knight``/``knave`` (True) or the puzzle's own terms (False).

    Returns:
        E.g. ``"knight(Amelia) -> not knave(Elizabeth)"`` or ``"(knight(A) and knave(B)) <-> knight(B)"``.
    """
    if style not in OPERATOR_STYLES:
        raise ValueError(f"unknown style {style!r}; choose one of {sorted(OPERATOR_STYLES)}")
    puzzle = _puzzle(metadata)
    ops = OPERATOR_STYLES[style]

    def render(node: Statement, top: bool) -> str:
        op = node[0]
        if op in _ATOMS:
            return f"{puzzle.role_word(op == 'telling-truth', generic_roles)}({puzzle.names[node[1]]})"
        if op == "not":
            text = ops["not"] + render(node[1], False)
        elif op in _NARY:
            text = ops[op].join(render(child, False) for child in node[1:])
            if len(node) == 2:  # a one-operand and/or is its operand
                return text
        else:
            text = render(node[1], False) + ops[op] + render(node[2], False)
        return text if top or op == "not" else f"({text})"

    return render(normalize_statement(statement, puzzle.n_people), True)


# ---------------------------------------------------------------------------------------------------
# Trace parsing
# ---------------------------------------------------------------------------------------------------

_SLOT_RE = re.compile(
    r"^[ \t]*(?:[-*#>]+[ \t]*)?(?:\*\*)?[ \t]*(STATEMENTS|STRATEGY|DERIVATION|ASSIGNMENT)[ \t]*(?:\*\*)?[ \t]*:"
    r"(?:\*\*)?(.*)$",
    re.IGNORECASE,
)
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
    if not text.strip():
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
        match = _SLOT_RE.match(line) if ":" in line else None  # a header has a colon
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


def _slot(trace: KKTrace, name: str) -> tuple[str | None, str | None]:
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


def _parse_statements(body: str, puzzle: KKPuzzle) -> tuple[dict[int, Statement], list[str]]:
    restated: dict[int, Statement] = {}
    errors: list[str] = []
    lines = [part.strip() for line in body.splitlines() for part in line.split(";") if part.strip()]
    if len(lines) > 4 * puzzle.n_people + 8:
        return {}, [f"{len(lines)} lines for {puzzle.n_people} people"]
    for line in lines:
        match = _STATEMENT_LINE_RE.match(line)
        if not match:
            errors.append(f"line {line[:60]!r} is not 'Name: formula'")
            continue
        index = puzzle.person(match.group(1))
        if index is None:
            errors.append(f"{match.group(1)[:30]!r} is not a person in this puzzle")
            continue
        if index in restated:
            errors.append(f"{puzzle.names[index]}'s claim is restated twice")
            continue
        formula = match.group(2)
        statement, reason = _memoised(
            puzzle, ("formula", formula), formula, parse_kk_formula, formula, puzzle
        )
        if statement is None:
            errors.append(f"{puzzle.names[index]}: {reason}")
            continue
        restated[index] = statement
    missing = [puzzle.names[i] for i in range(puzzle.n_people) if i not in restated]
    if missing and not errors:
        errors.append(f"no restatement for {', '.join(missing)}")
    return restated, errors


def parse_kk_assignment(text: str, metadata: Any) -> tuple[Assignment | None, str | None]:
    """Parse an ``ASSIGNMENT`` slot such as ``"Amelia=knight, Elizabeth=villain"``; never raises.

    Items are ``Name=role``, ``Name: role`` or ``Name is a role``, separated by commas, semicolons,
    ``and`` or newlines; roles are ``knight``/``knave`` or the puzzle's terms. Every person must
    appear exactly once.

    Args:
        text: The slot text.
        metadata: Puzzle metadata.

    Returns:
        ``(assignment, None)`` (True = knight, in the puzzle's person order) or ``(None, reason)``.
    """
    puzzle = _puzzle(metadata)
    if not isinstance(text, str) or len(text) > MAX_SLOT_CHARS:
        return None, "assignment is not text of bounded length"
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


# ---------------------------------------------------------------------------------------------------
# Derivation claims: the certificate, checked by truth table
# ---------------------------------------------------------------------------------------------------

MAX_CLAIMS = 300  # claims per derivation; more fail closed
MAX_CLAIM_LINE_CHARS = 600  # longer lines are prose (or a malformed claim when they start like one)

# Line prefixes a claim may carry: a bullet or number, a "Row 3:" label, a "so"/"hence" lead word.
_CLAIM_LEAD_RE = re.compile(
    r"[ \t]*(?:(?:[-*•>]+|\d{1,4}[.)])[ \t]*)?(?:(?:row|case|step)[ \t]*\d{1,4}[ \t]*[:.)][ \t]*)?"
    r"(?:(?:so|thus|hence|therefore|then|and)\b[ \t]*,?[ \t]*)?",
    re.IGNORECASE,
)
_ASSIGN_START_RE = re.compile(r"assignment[ \t]*\{", re.IGNORECASE)
_ASSIGN_CLAIM_RE = re.compile(
    r"assignment[ \t]*\{([^{}]*)\}[ \t]*is[ \t]+(in)?consistent\b(.*)", re.IGNORECASE
)
_ROLE_CLAIM_RE = re.compile(r"([^\W_]\w*)[ \t]+is[ \t]+(?:an?[ \t]+)?([^\W_]\w*)\b(.*)", re.IGNORECASE)
_CLAIM_ITEM_RE = re.compile(r"[ \t]*([^\W_]\w*)[ \t]*[:=][ \t]*([^\W_]\w*)[ \t]*")
_CITE = r"(?:[^\W_]\w*['’]s?[ \t]+(?:statement|claim)|(?:statement|claim)[ \t]+of[ \t]+[^\W_]\w*)"
_CITE_TAIL_RE = re.compile(
    r"[ \t]*(?:[,;:(\[–—-][ \t]*)?"
    r"(?:(?:by|because[ \t]+of|from|via|per|violates|violating|contradicts|contradicting|breaks)[ \t]+)?"
    rf"(?:the[ \t]+)?{_CITE}(?:[ \t]*(?:,|and|or|&)[ \t]*(?:the[ \t]+)?{_CITE})*[ \t]*[)\]]?[ \t]*",
    re.IGNORECASE,
)
_CITE_NAME_RE = re.compile(
    r"([^\W_]\w*)['’]s?[ \t]+(?:statement|claim)|(?:statement|claim)[ \t]+of[ \t]+([^\W_]\w*)", re.IGNORECASE
)
_EMPTY_TAIL_RE = re.compile(r"[ \t]*")
# Sentence subjects that are not names: "so he is a knave" is prose, not a claim about a person "he".
_PROSE_SUBJECTS = frozenset(
    {
        *("he", "she", "it", "they", "this", "that", "who", "which", "one", "each", "either", "neither"),
        *("everyone", "everybody", "someone", "somebody", "nobody", "none", "there", "here", "what"),
        *("whoever", "speaker", "person", "answer"),
    }
)


@dataclass(frozen=True)
class KKClaim:
    """One derivation claim (see the module docstring for the grammar).

    Attributes:
        kind: ``"inconsistent"``, ``"consistent"`` or ``"role"``.
        roles: ``(person index, is_knight)`` pairs as written: the (partial) assignment, or for a
            role claim the one person and the claimed role.
        cites: Indices of the people whose statements the claim names as its reason (may be empty).
    """

    kind: str
    roles: tuple[tuple[int, bool], ...]
    cites: tuple[int, ...] = ()

    @property
    def key(self) -> tuple:
        """What makes two claims the same claim (the citation does not)."""
        return (self.kind, tuple(sorted(self.roles)))


def _cites(tail: str, puzzle: KKPuzzle) -> tuple[tuple[int, ...] | None, str | None]:
    # (None, None): the tail is not a citation (the line is prose); (cites, None); (None, error).
    if _EMPTY_TAIL_RE.fullmatch(tail):
        return (), None
    if not _CITE_TAIL_RE.fullmatch(tail):
        return None, None
    cites: list[int] = []
    for match in _CITE_NAME_RE.finditer(tail):
        name = match.group(1) or match.group(2)
        index = puzzle.person(name)
        if index is None:
            return None, f"cites the statement of {name[:30]!r}, who is not in this puzzle"
        if index not in cites:
            cites.append(index)
    return tuple(cites), None


def _parse_claim(line: str, puzzle: KKPuzzle) -> tuple[KKClaim | None, str | None]:
    """``(claim, None)``, ``(None, None)`` for prose, or ``(None, reason)`` for a malformed claim."""
    lead = _CLAIM_LEAD_RE.match(line, 0, 64)
    start = lead.end() if lead else 0
    if len(line) > MAX_CLAIM_LINE_CHARS:  # checked before any pattern reads the whole line
        if _ASSIGN_START_RE.match(line, start, start + 40):
            return None, f"claim line longer than {MAX_CLAIM_LINE_CHARS} characters"
        return None, None
    body = line[start:].rstrip(" \t.!;")
    # the rest reads only body (lead and bullets stripped): memoised per puzzle, so the G traces of a
    # prompt, which repeat claims under different bullets and labels, parse each claim once
    return _memoised(puzzle, ("claim", body), body, _parse_claim_body, body, puzzle)


def _assigned_roles(text: str, puzzle: KKPuzzle) -> tuple[tuple[int, bool], ...] | None:
    """The ``(person, role)`` pairs of an assignment's role list, as :func:`_parse_claim_body` reads
    them; ``None`` when it would report an error (it then words the reason itself)."""
    items = [item for item in re.split(r"[,;]", text) if item.strip()]
    if not items or len(items) > puzzle.n_people:
        return None
    roles: dict[int, bool] = {}
    for item in items:
        pair = _CLAIM_ITEM_RE.fullmatch(item)
        if not pair:
            return None
        index, role = puzzle.person(pair.group(1)), puzzle.role(pair.group(2))
        if index is None or role is None or index in roles:
            return None
        roles[index] = role
    return tuple(roles.items())


def _parse_claim_body(body: str, puzzle: KKPuzzle) -> tuple[KKClaim | None, str | None]:
    if _ASSIGN_START_RE.match(body):
        match = _ASSIGN_CLAIM_RE.fullmatch(body)
        if not match:
            return None, (
                f"{body[:60]!r} is not a claim; write 'assignment {{Name: role, ...}} is consistent' "
                "or '... is inconsistent'"
            )
        # the same role list comes with many tails (citations) and leads: its parse is memoised on
        # its own text when it has no error (an error names the whole body: that path runs in full)
        roles_text = match.group(1)
        known = _memoised(puzzle, ("roles", roles_text), roles_text, _assigned_roles, roles_text, puzzle)
        if known is not None:
            kind = "inconsistent" if match.group(2) else "consistent"
            tail = match.group(3)
            cites, why = _memoised(puzzle, ("cites", tail), tail, _cites, tail, puzzle)
            if why:
                return None, why
            if cites is None or (kind == "consistent" and cites):
                allowed = "nothing or '<Name>'s statement'" if kind == "inconsistent" else "nothing"
                return None, f"{body[:60]!r}: after 'is {kind}' write {allowed}"
            return KKClaim(kind, known, cites), None
        items = [item for item in re.split(r"[,;]", match.group(1)) if item.strip()]
        if not items:
            return None, f"{body[:60]!r} assigns no one"
        if len(items) > puzzle.n_people:
            return None, f"{body[:60]!r} lists {len(items)} roles for {puzzle.n_people} people"
        roles: dict[int, bool] = {}
        for item in items:
            pair = _CLAIM_ITEM_RE.fullmatch(item)
            if not pair:
                return None, f"{item.strip()[:40]!r} in {body[:60]!r} is not 'Name: role'"
            index, role = puzzle.person(pair.group(1)), puzzle.role(pair.group(2))
            if index is None:
                return None, f"{body[:60]!r} refers to {pair.group(1)[:30]!r}, who is not in this puzzle"
            if role is None:
                return None, (
                    f"{pair.group(2)[:30]!r} in {body[:60]!r} is not a role; use knight/knave or "
                    f"{puzzle.knight}/{puzzle.knave}"
                )
            if index in roles:
                return None, f"{body[:60]!r} gives {puzzle.names[index]} two roles"
            roles[index] = role
        kind = "inconsistent" if match.group(2) else "consistent"
        cites, why = _cites(match.group(3), puzzle)
        if why:
            return None, why
        if cites is None or (kind == "consistent" and cites):
            allowed = "nothing or '<Name>'s statement'" if kind == "inconsistent" else "nothing"
            return None, f"{body[:60]!r}: after 'is {kind}' write {allowed}"
        return KKClaim(kind, tuple(roles.items()), cites), None
    match = _ROLE_CLAIM_RE.fullmatch(body)
    if not match or match.group(2).casefold() not in _ROLE_SET:
        return None, None  # prose
    name, word = match.group(1), match.group(2)
    tail = match.group(3)
    cites, why = _memoised(puzzle, ("cites", tail), tail, _cites, tail, puzzle)
    if cites is None and why is None:
        return None, None  # "Ava is a knight if ..." is prose
    if name.casefold() in _PROSE_SUBJECTS:
        return None, None
    index = puzzle.person(name)
    if index is None:
        return None, f"{body[:60]!r} is about {name[:30]!r}, who is not in this puzzle"
    role = puzzle.role(word)
    if role is None:
        return (
            None,
            f"{word[:30]!r} in {body[:60]!r} is not a role of this puzzle ({puzzle.knight}/{puzzle.knave})",
        )
    if why:
        return None, why
    return KKClaim("role", ((index, role),), cites), None


def parse_kk_claim(line: str, metadata: Any) -> tuple[KKClaim | None, str | None]:
    """Read one DERIVATION line as a claim; never raises.

    Args:
        line: One line of the DERIVATION slot.
        metadata: Puzzle metadata (names and role words come from it).

    Returns:
        ``(claim, None)`` for a claim, ``(None, None)`` for prose (ignored by the checker), or
        ``(None, reason)`` for a line that starts like a claim but is malformed or names someone
        outside the puzzle (the checker fails such a derivation).

    Example:
        >>> meta = {"names": ["Ava", "Noah"], "statements": [["lying", 1], ["lying", 0]], "solution": [True, False]}
        >>> parse_kk_claim("- assignment {Ava: knave, Noah: knave} is inconsistent: Ava's statement", meta)
        (KKClaim(kind='inconsistent', roles=((0, False), (1, False)), cites=(0,)), None)
        >>> parse_kk_claim("so Noah is a knave", meta)
        (KKClaim(kind='role', roles=((1, False),), cites=()), None)
        >>> parse_kk_claim("Suppose Ava is a knight.", meta)
        (None, None)
        >>> parse_kk_claim("Zed is a knight", meta)
        (None, "'Zed is a knight' is about 'Zed', who is not in this puzzle")
    """
    if not isinstance(line, str):
        return None, None
    puzzle = _puzzle(metadata)
    return _parse_claim(line, puzzle)


def _partial_text(roles: Sequence[tuple[int, bool]], puzzle: KKPuzzle) -> str:
    return "{" + ", ".join(f"{puzzle.names[i]}: {puzzle.role_word(r, True)}" for i, r in roles) + "}"


def _region(roles: Sequence[tuple[int, bool]], n: int) -> int:
    # The assignments that extend a partial assignment, as a bitmask.
    full = (1 << (1 << n)) - 1
    knights = _knight_masks(n)
    region = full
    for i, role in roles:
        region &= knights[i] if role else full & ~knights[i]
    return region


def _violations(puzzle: KKPuzzle) -> tuple[int, ...]:
    # Bit a of entry i: under assignment a, person i's statement contradicts i's role.
    full = (1 << (1 << puzzle.n_people)) - 1
    return tuple(full & (k ^ t) for k, t in zip(_knight_masks(puzzle.n_people), puzzle.tables))


def _refuter(cases: int, candidates: Sequence[int], violations: Sequence[int]) -> int | None:
    # A person whose statement contradicts their role in every assignment of ``cases`` (None: none).
    for i in candidates:
        if cases & ~violations[i] == 0:
            return i
    return None


def _certify(body: str, puzzle: KKPuzzle) -> tuple[int | None, str | None]:
    """Check every claim of a DERIVATION and return ``(remaining, None)`` or ``(None, reason)``.

    ``remaining`` is the bitmask of full assignments no claim rules out. Claims are read in order
    against the assignments still open ("open" = not ruled out by an earlier claim):

    * ``inconsistent``: one statement (a cited one, when the claim cites) contradicts its speaker's
      role in every open completion of the partial assignment; rules those completions out.
    * ``consistent``: a full assignment under which every statement matches its speaker's role.
    * ``role``: no open assignment gives the person the other role, or one statement (a cited one,
      when cited) contradicts its speaker in every open assignment that does; rules those out.

    A true claim never rules out a consistent assignment, so when every claim holds, ``remaining``
    still contains every solution of the puzzle.
    """
    n = puzzle.n_people
    full = (1 << (1 << n)) - 1
    violations = _violations(puzzle)
    open_ = full
    seen: set[tuple] = set()
    n_claims = 0
    for line in body.splitlines():
        # the G traces of a prompt repeat whole lines too: skip even the lead-word pattern for them
        claim, why = _memoised(puzzle, ("line", line), line, _parse_claim, line, puzzle)
        if why:
            return None, why
        if claim is None:
            continue
        n_claims += 1
        if n_claims > MAX_CLAIMS:
            return None, f"more than {MAX_CLAIMS} claims"
        text = line.strip()[:80]
        if claim.key in seen:
            return None, f"claim repeated: {text!r}"
        seen.add(claim.key)
        candidates = claim.cites or range(n)
        if claim.kind == "consistent":
            if len(claim.roles) != n:
                missing = sorted(set(range(n)) - {i for i, _ in claim.roles})
                return None, (
                    f"{text!r}: a consistent assignment must give every role (missing "
                    f"{', '.join(puzzle.names[i] for i in missing)})"
                )
            index = _index_of(tuple(dict(claim.roles)[i] for i in range(n)))
            bad = [puzzle.names[i] for i in range(n) if (violations[i] >> index) & 1]
            if bad:
                return (
                    None,
                    f"false claim {text!r}: {', '.join(bad)}'s statement contradicts the speaker's role",
                )
            continue
        if claim.kind == "inconsistent":
            region = _region(claim.roles, n)
            cases = open_ & region
            if _refuter(cases, candidates, violations) is None:
                consistent = cases & ~functools.reduce(operator.or_, violations, 0)
                if consistent:
                    first = _assignment_of((consistent & -consistent).bit_length() - 1, n)
                    why = f"{_describe(first, puzzle)} extends it and is consistent"
                elif claim.cites:
                    cited = " or ".join(puzzle.names[i] for i in claim.cites)
                    why = f"{cited}'s statement is not contradicted in every open completion"
                else:
                    why = (
                        "no single statement is contradicted in every open completion; split the case further"
                    )
                return None, f"false claim {text!r}: {why}"
            open_ &= ~region
            continue
        ((person, role),) = claim.roles
        region = _region(((person, role),), n)
        other = open_ & ~region
        if other and _refuter(other, candidates, violations) is None:
            reason = f"an open assignment makes {puzzle.names[person]} {_article(puzzle.role_word(not role, True))}"
            if claim.cites:
                cited = " or ".join(puzzle.names[i] for i in claim.cites)
                reason += f" without contradicting {cited}'s statement"
            else:
                reason += " and no single statement rules all such assignments out"
            return None, f"unsupported claim {text!r}: {reason}"
        open_ &= region
    if n_claims == 0:
        return None, (
            "no claims (prose alone certifies nothing); write lines like "
            "'assignment {Name: knight, ...} is inconsistent' or 'Name is a knight'"
        )
    return open_, None


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
_ROLE_SET = frozenset(_ROLE_WORDS)


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
            assignment open, the ASSIGNMENT (or, without a usable ASSIGNMENT, the ``<answer>``'s).
        consistent: ASSIGNMENT makes each person a knight iff their *restated* claim is true.
        solution: ASSIGNMENT equals the puzzle's solution.
        answer: ``<answer>`` states exactly ASSIGNMENT in reasoning-gym's format (graded by its
            ``score_answer``, so it must use the puzzle's own terms).
        answer_correct: The final answer alone is right (reasoning-gym's ``score_answer`` == 1.0);
            an outcome signal, not counted in ``total``.
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


def _describe(assignment: Assignment, puzzle: KKPuzzle) -> str:
    return ", ".join(f"{n}={puzzle.role_word(r, generic=True)}" for n, r in zip(puzzle.names, assignment))


def _tokenize_line(line: str) -> tuple[str, ...]:
    """Casefolded derivation tokens of one line (words and ``=``, ``(``, ``)``)."""
    if line.isascii():  # ASCII casefolding is lower(), which keeps every token's boundaries: one pass
        return tuple(_ASCII_TOKEN_RE.findall(line.lower()))
    return tuple(t.casefold() for t in _DERIVATION_TOKEN_RE.findall(line))


# keyed by the line text, immutable tuples; bounded (lines over _MEMO_KEY_CHARS are not cached)
_line_tokens = functools.lru_cache(maxsize=16_384)(_tokenize_line)


# Role references on ASCII text, found from their "=" / "(" (literal-led patterns, which the regex
# engine scans for at C speed) instead of tokenizing the whole body. A reference is the token scan's
# (see _role_ref_problem): tokens are the maximal runs of \w and the single characters = ( ), and
# everything else (spaces, punctuation, line breaks) only separates them. "Name = role": "=" followed
# by a role-word token, whose previous token is a word; "role(Name)": "(" with the next token and a
# ")" after it, whose previous token is a role word. Overlapping matches are found (lookaheads).
_NON_TOKEN = r"[^\w=()]*"
_EQ_ROLE_RE = re.compile(r"=(?=" + _NON_TOKEN + "(" + "|".join(_ROLE_WORDS) + r")(?!\w))", re.ASCII)
_PAREN_ARG_RE = re.compile(r"\((?=" + _NON_TOKEN + r"(\w+|[=()])" + _NON_TOKEN + r"\))", re.ASCII)
_REV_WORD_RE = re.compile(_NON_TOKEN + r"(\w+)", re.ASCII)  # the token before a position, read reversed


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
    for m in _EQ_ROLE_RE.finditer(low):
        prev = _REV_WORD_RE.match(rev, n - m.start())  # the word token before "=", if any
        if prev is not None and (
            puzzle.person(prev.group(1)[::-1]) is None or m.group(1) not in puzzle._roles
        ):
            return False
    for m in _PAREN_ARG_RE.finditer(low):
        prev = _REV_WORD_RE.match(rev, n - m.start())  # a role word right before "("?
        role = prev.group(1)[::-1] if prev is not None else None
        if role in _ROLE_SET and (puzzle.person(m.group(1)) is None or role not in puzzle._roles):
            return False
    return True


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
        >>> trace = gold_kk_trace(meta, random.Random(0))
        >>> check_kk_trace(trace, meta).total
        6
    """
    puzzle = _puzzle(metadata)
    result = KKCheck()
    trace = parse_kk_trace(text, max_chars=max_chars)

    # 1. statements: faithful restatement, by truth-table equivalence.
    restated: dict[int, Statement] = {}
    body, why = _slot(trace, "STATEMENTS")
    if body is not None:
        restated, errors = _parse_statements(body, puzzle)
        why = "; ".join(errors[:3]) if errors else None
    restated_tables: list[int] | None = None
    if why is None:
        full = (1 << (1 << puzzle.n_people)) - 1
        restated_tables = [
            _memoised(puzzle, ("table", restated[i]), None, _table, restated[i], puzzle.n_people, full)
            for i in range(puzzle.n_people)
        ]
        for i, (mine, gold) in enumerate(zip(restated_tables, puzzle.tables)):
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
                for i, table in enumerate(restated_tables)
                if bool((table >> index) & 1) != assignment[i]
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
        elif kk_score_answer(trace.answer, puzzle, assignment) == 1.0:
            result.answer = True
        else:
            result.reasons.append(
                f"answer: {trace.answer[:80]!r} does not state the assignment in the puzzle's terms "
                f"({puzzle.knight}/{puzzle.knave})"
            )
    result.answer_correct = kk_score_answer(trace.answer, puzzle) == 1.0
    result.total = sum(getattr(result, name) for name in CHECK_NAMES)
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


# ---------------------------------------------------------------------------------------------------
# Gold traces and prompt instructions
# ---------------------------------------------------------------------------------------------------

_TABLE_STRATEGIES = (
    "truth table over all {rows} assignments",
    "truth table: check each of the {rows} role assignments against every statement",
    "case analysis: try every assignment of roles and keep the consistent one",
    "exhaustive enumeration of all {rows} possible assignments",
    "proof by contradiction over each possible assignment",
)
_SEARCH_STRATEGIES = (
    "case analysis: assign roles one person at a time and drop a branch as soon as a claim contradicts its speaker",
    "proof by contradiction: suppose a role for each person in turn and backtrack on contradictions",
    "case analysis with backtracking over the possible assignments",
)
_PROPAGATION_STRATEGIES = (
    "proof by contradiction: fix one person's role at a time, ruling out the other role with one statement",
    "case analysis: for each person, show the opposite role contradicts some statement",
)
_ROW_PREFIXES = ("- ", "- Row {k}: ", "- Case {k}: ", "- Step {k}: ")
_FAIL_KNIGHT = (
    "{name} would be {a_knight} but {name}'s claim is false, contradiction",
    "{name}'s statement is false, yet {a_knight} always tells the truth: contradiction",
    "fails, {name} is {a_knight} whose claim evaluates to false",
)
_FAIL_KNAVE = (
    "{name} would be {a_knave} but {name}'s claim is true, contradiction",
    "{name}'s statement is true, yet {a_knave} always lies: contradiction",
    "fails, {name} is {a_knave} whose claim evaluates to true",
)
_PASS = (
    "every claim matches its speaker's role",
    "all true claims come from {knight}s and all false ones from {knave}s",
    "nothing clashes, this assignment works",
)
_CONCLUDE = (
    "- Exactly one assignment is consistent: {assign}.",
    "- Only {assign} survives, so that is the solution.",
    "- Every other case fails, hence {assign}.",
)
# Claim spellings the gold traces vary over (all inside the grammar of the module docstring).
_CITE_FORMS = (
    ": {name}'s statement",
    ", by {name}'s statement",
    " ({name}'s statement)",
    " (contradicts {name}'s statement)",
    ": violates {name}'s claim",
    ", by the statement of {name}",
    "",
)
_LEADS = ("so ", "hence ", "thus ", "therefore ", "")


def _rewrite(node: Statement, rng: random.Random) -> Statement:
    """An equivalent variant of a statement (double negations of atoms folded, knaves as not-knights)."""
    op = node[0]
    if op == "not" and node[1][0] in _ATOMS:
        if rng.random() < 0.5:
            return ("lying" if node[1][0] == "telling-truth" else "telling-truth", node[1][1])
        return node  # rewriting the atom too would give an ugly double negation
    if op == "lying" and rng.random() < 0.2:
        return ("not", ("telling-truth", node[1]))
    if op in _ATOMS:
        return node
    return (op, *(_rewrite(child, rng) for child in node[1:]))


def _verdict(puzzle: KKPuzzle, rng: random.Random, words: dict[str, str], bad: int, knight: bool) -> str:
    template = rng.choice(_FAIL_KNIGHT if knight else _FAIL_KNAVE)
    return template.format(name=puzzle.names[bad], **words)


class _ClaimWriter:
    """Renders derivation claims with one trace's choice of spellings (separator, citations, lead words)."""

    def __init__(self, puzzle: KKPuzzle, rng: random.Random, words: dict[str, str]):
        self.puzzle, self.rng, self.words = puzzle, rng, words
        self.sep = rng.choice((": ", "="))
        self.cites = rng.sample(_CITE_FORMS, 3)

    def lead(self) -> str:
        return self.rng.choice(_LEADS)

    def assignment(self, pairs: Sequence[tuple[int, bool]], refuter: int | None) -> str:
        """``assignment {...} is consistent`` (refuter None) or ``... is inconsistent`` naming the refuter."""
        roles = ", ".join(
            f"{self.puzzle.names[i]}{self.sep}{self.words['knight' if r else 'knave']}" for i, r in pairs
        )
        if refuter is None:
            return f"assignment {{{roles}}} is consistent"
        return f"assignment {{{roles}}} is inconsistent" + self.cite(refuter)

    def cite(self, refuter: int | None) -> str:
        if refuter is None:
            return ""
        return self.rng.choice(self.cites).format(name=self.puzzle.names[refuter])

    def role(self, person: int, knight: bool, refuter: int | None = None) -> str:
        word = self.words["a_knight" if knight else "a_knave"]
        return f"{self.puzzle.names[person]} is {word}" + self.cite(refuter)


def _table_derivation(
    puzzle: KKPuzzle, rng: random.Random, words: dict[str, str], label, write: _ClaimWriter
) -> list[str]:
    """One claim per assignment (inconsistent, naming a contradicted statement, or consistent),
    optionally each after a prose line with every claim's truth value, optionally grouped by the
    first person's role: at most 2^(n+1) + 2 lines."""
    n = puzzle.n_people
    prefix = rng.choice(_ROW_PREFIXES)
    case_split = rng.random() < 0.4 and n >= 2
    prose = rng.random() < 0.6
    rows = list(itertools.product([True, False], repeat=n))
    lines = []
    for k, assignment in enumerate(rows, start=1):
        if case_split and k in (1, len(rows) // 2 + 1):
            lines.append(f"- Suppose {puzzle.names[0]}={words['knight' if assignment[0] else 'knave']}:")
        values = [_evaluate(s, assignment) for s in puzzle.statements]
        bad = [i for i in range(n) if values[i] != assignment[i]]
        claim = write.assignment(list(enumerate(assignment)), bad[0] if bad else None)
        indent = "  " if case_split else ""
        if not prose:
            lines.append(f"{indent}{prefix.format(k=k)}{claim}")
            continue
        if bad:
            verdict = _verdict(puzzle, rng, words, bad[0], assignment[bad[0]])
        else:
            verdict = rng.choice(_PASS).format(**words)
        claims = ", ".join(f"{puzzle.names[i]}'s claim {'true' if values[i] else 'false'}" for i in range(n))
        lines.append(f"{indent}{prefix.format(k=k)}{label(assignment)}: {claims}; {verdict}")
        lines.append(f"{indent}  {write.lead()}{claim}")
    return lines


def _search_derivation(
    puzzle: KKPuzzle, rng: random.Random, words: dict[str, str], write: _ClaimWriter
) -> list[str]:
    """Backtracking case analysis: assign people in order; check a claim as soon as its speaker has a
    role and its truth value no longer depends on anyone unassigned; at the first contradiction,
    claim the partial assignment inconsistent (naming that statement) and drop the branch; claim
    each surviving leaf consistent.

    "Determined" is read off the truth-table bitmasks: restricted to the assignments that extend the
    partial one, the claim's table is all ones or all zeros. Complexity: O(nodes · n · 2^n / wordsize)
    with at most 2^(n+1) nodes, usually far fewer.
    """
    n = puzzle.n_people
    full = (1 << (1 << n)) - 1
    knights = _knight_masks(n)
    partial = [False] * n
    prose = n <= 4 and rng.random() < 0.5
    lines: list[str] = []

    def visit(k: int, region: int, pending: list[int]) -> None:
        for role in (True, False):
            partial[k] = role
            sub = region & (knights[k] if role else full & ~knights[k])
            # Indentation carries the branch; prose names only the person it adds, claims everyone fixed.
            given = f"{puzzle.names[k]}={words['knight' if role else 'knave']}"
            indent = "  " * k
            checked, left, bad = [], [], None
            for i in pending:
                part = puzzle.tables[i] & sub
                if i > k or part not in (0, sub):  # speaker unassigned or claim still open
                    left.append(i)
                    continue
                value = part == sub
                checked.append(f"{puzzle.names[i]}'s claim {'true' if value else 'false'}")
                if value != partial[i]:
                    bad = i
                    break
            pairs = [(j, partial[j]) for j in range(k + 1)]
            if bad is not None or k == n - 1:
                claim = write.assignment(pairs, bad)
                if not prose:
                    lines.append(f"{indent}- {claim}")
                    continue
                if bad is not None:
                    verdict = _verdict(puzzle, rng, words, bad, partial[bad])
                    lines.append(f"{indent}- {given}: {'; '.join(checked)}; {verdict}")
                else:
                    found = "; ".join(checked) or "nothing new to check"
                    lines.append(f"{indent}- {given}: {found}; " + rng.choice(_PASS).format(**words))
                lines.append(f"{indent}  {write.lead()}{claim}")
            else:
                found = "; ".join(checked) + ", as required" if checked else "no claim is settled yet"
                lines.append(f"{indent}- Suppose {given}: {found}")
                visit(k + 1, sub, left)

    visit(0, full, list(range(n)))
    return lines


def _propagation_derivation(
    puzzle: KKPuzzle, rng: random.Random, words: dict[str, str], write: _ClaimWriter
) -> list[str] | None:
    """Fix one person's role per step: a role whose opposite is contradicted, in every assignment still
    open, by one statement (named), or that every open assignment already gives. ``None`` when the
    puzzle needs a case split (no single statement rules out either role of anyone left).
    Complexity: O(n^3 · 2^n / wordsize).
    """
    n = puzzle.n_people
    full = (1 << (1 << n)) - 1
    knights = _knight_masks(n)
    violations = _violations(puzzle)
    open_, fixed, lines = full, set(), []
    while len(fixed) < n:
        step = None
        for person in (p for p in range(n) if p not in fixed):
            for role in (True, False):
                other = open_ & (full & ~knights[person] if role else knights[person])
                refuter = _refuter(other, range(n), violations) if other else None
                if not other or refuter is not None:
                    step = (person, role, refuter)
                    break
            if step:
                break
        if step is None:
            return None
        person, role, refuter = step
        if refuter is None:
            lines.append(f"- so {write.role(person, role)}")
        elif rng.random() < 0.5:
            opposite = words["a_knave" if role else "a_knight"]
            lines.append(
                f"- If {puzzle.names[person]} were {opposite}, {puzzle.names[refuter]}'s claim would "
                f"contradict {puzzle.names[refuter]}'s role in every case still open."
            )
            lines.append(f"- {write.assignment([(person, not role)], refuter)}")
            lines.append(f"- {write.lead()}{write.role(person, role)}")
        else:
            lines.append(f"- {write.role(person, role, refuter)}")
        open_ &= knights[person] if role else full & ~knights[person]
        fixed.add(person)
    return lines


def gold_kk_trace(metadata: Any, rng: random.Random | int | None = None) -> str:
    """Render a correct trace for a puzzle, with varied wording, that passes :func:`check_kk_trace`.

    The restatements are equivalent rewrites of the metadata statements (operator spelling, role
    words and atom forms vary). The derivation is a certificate in the claim grammar of the module
    docstring, computed symbolically, in one of three styles: for up to 3 people the full truth
    table (one claim per assignment); a backtracking case analysis (assign people in order, check
    each statement as soon as everyone it mentions has a role, claim a branch inconsistent at the
    first contradiction, naming it); or, when one statement at a time settles each person's role,
    a chain of role claims. For more than 3 people never the table, so traces stay short. Prose lines
    (truth values, "Suppose ..." branch headers, a concluding sentence) come between the claims.

    Args:
        metadata: Puzzle metadata; the puzzle must have exactly one consistent assignment.
        rng: A ``random.Random`` (or an int seed) choosing the wording; the same seed gives the same trace.

    Returns:
        The completion text: ``<think>`` with the four slots, then ``<answer>`` in reasoning-gym's format.

    Raises:
        ValueError: The puzzle has several consistent assignments (no certificate can single one
            out), or the trace would exceed the checker's caps.

    Example:
        >>> meta = {"names": ["Ava", "Noah"], "statements": [["and", ["lying", 0], ["lying", 1]],
        ...         ["lying", 0]], "solution": [False, True]}
        >>> print(gold_kk_trace(meta, 0).splitlines()[-1])
        <answer>Ava is a knave, and Noah is a knight.</answer>
    """
    puzzle = _puzzle(metadata)
    if puzzle.n_solutions != 1:
        raise ValueError(
            f"the puzzle has {puzzle.n_solutions} consistent assignments; a derivation can only certify a "
            "unique solution, so there is no gold trace"
        )
    if not isinstance(rng, random.Random):
        rng = random.Random(rng if rng is not None else 0)
    n = puzzle.n_people
    style = rng.choice(sorted(OPERATOR_STYLES))
    generic_statements = rng.random() < 0.5
    generic_assign = rng.random() < 0.5
    words = {
        "knight": puzzle.role_word(True, generic_assign),
        "knave": puzzle.role_word(False, generic_assign),
    }
    words["a_knight"] = _article(words["knight"]) if generic_assign else puzzle.a_knight
    words["a_knave"] = _article(words["knave"]) if generic_assign else puzzle.a_knave
    write = _ClaimWriter(puzzle, rng, words)

    def label(assignment: Assignment) -> str:
        return ", ".join(
            f"{name}={words['knight' if r else 'knave']}" for name, r in zip(puzzle.names, assignment)
        )

    order = list(range(n))
    if rng.random() < 0.3:
        rng.shuffle(order)
    bullet = rng.choice(("- ", "", "* "))
    lines = ["<think>", "STATEMENTS:"]
    for i in order:
        formula = format_kk_formula(
            _rewrite(puzzle.statements[i], rng), puzzle, style=style, generic_roles=generic_statements
        )
        lines.append(f"{bullet}{puzzle.names[i]}: {formula}")
    strategy_at = len(lines)
    lines.extend(["STRATEGY:", "DERIVATION:"])

    # Full truth table for small puzzles; role chains or pruned case analysis otherwise.
    table = n <= 3 and rng.random() < 0.6
    chain = None if table else _propagation_derivation(puzzle, rng, words, write)
    if table:
        lines[strategy_at] = "STRATEGY: " + rng.choice(_TABLE_STRATEGIES).format(rows=1 << n)
        lines.extend(_table_derivation(puzzle, rng, words, label, write))
    elif chain is not None and rng.random() < 0.6:
        lines[strategy_at] = "STRATEGY: " + rng.choice(_PROPAGATION_STRATEGIES)
        lines.extend(chain)
    else:
        chain = None
        lines[strategy_at] = "STRATEGY: " + rng.choice(_SEARCH_STRATEGIES)
        lines.extend(_search_derivation(puzzle, rng, words, write))
    lines.append(rng.choice(_CONCLUDE).format(assign=label(puzzle.solution)))
    if chain is None and rng.random() < 0.5:  # all else is ruled out, so each role follows
        lines.extend(f"- {write.lead()}{write.role(i, r)}" for i, r in enumerate(puzzle.solution))
    separator = rng.choice((", ", "; "))
    lines.append("ASSIGNMENT: " + label(puzzle.solution).replace(", ", separator))
    lines.append("</think>")
    lines.append(f"<answer>{kk_oracle_answer(puzzle)}</answer>")
    text = "\n".join(lines)
    if len(text) > MAX_TRACE_CHARS or len(text) - text.index("DERIVATION:") > MAX_SLOT_CHARS:
        raise ValueError(
            f"the gold trace for this {n}-person puzzle exceeds the checker's caps "
            f"(MAX_TRACE_CHARS={MAX_TRACE_CHARS}, MAX_SLOT_CHARS={MAX_SLOT_CHARS}); use smaller puzzles"
        )
    return text


_EXAMPLE_METADATA = {
    "names": ["Ava", "Noah"],
    "statements": [("not", ("lying", 1)), ("->", ("telling-truth", 0), ("telling-truth", 1))],
    "solution": [True, True],
    "knight_knave_terms": {
        "knight": "knight",
        "knave": "knave",
        "a_knight": "a knight",
        "a_knave": "a knave",
    },
}


def kk_prompt_instructions() -> str:
    """The instructions that teach a model the Knights & Knaves trace format, with a worked example.

    They teach the derivation's claim grammar (module docstring). The example is rendered by
    :func:`gold_kk_trace` from a fixed puzzle and seed, so it always passes the checker.

    Returns:
        Text to append to the puzzle prompt.
    """
    example = gold_kk_trace(_EXAMPLE_METADATA, random.Random(5))
    return (
        "Reason inside <think> ... </think> using exactly these four slots, then give the final answer "
        "inside <answer> ... </answer>.\n"
        "STATEMENTS: one line per person, 'Name: formula', restating that person's claim. Formulas use "
        "knight(Name) and knave(Name) (or the puzzle's own words, e.g. hero(Name) and villain(Name)), "
        "not, and, or, -> (if ... then), <-> (if and only if) and parentheses.\n"
        "STRATEGY: the method, e.g. 'truth table over all assignments' or 'case analysis'.\n"
        "DERIVATION: one step per line. Lines in these three forms are claims, and each is checked; "
        "other lines are free comments:\n"
        "  assignment {Ava: knight, Noah: knave} is inconsistent: Noah's statement\n"
        "    - one person's statement contradicts that person's role in every case with these roles "
        "(you may list only some people, e.g. 'assignment {Ava: knave} is inconsistent'; naming the "
        "statement is optional)\n"
        "  assignment {Ava: knight, Noah: knight} is consistent\n"
        "    - every person listed, and every statement matches its speaker's role\n"
        "  so Ava is a knight\n"
        "    - follows from the earlier claims, or one statement rules out the other role "
        "(name it: 'Ava is a knight (by Noah's statement)')\n"
        "Together the claims must rule out every assignment except your answer. Write each claim "
        "once, and only about the people in the puzzle.\n"
        "ASSIGNMENT: every person's role, e.g. 'Ava=knight, Noah=knave'.\n"
        "Answer in the format the puzzle asks for, with the puzzle's own words for the roles.\n\n"
        'Example (a puzzle where Ava says "Noah is a knight" and Noah says "if Ava is a knight then '
        'Noah is a knight"):\n' + example
    )
