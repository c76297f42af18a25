"""Knights & Knaves puzzle metadata: :class:`KKPuzzle`, the shared per-puzzle memo, oracle and graded answers.

The statement grammar and the answer format are documented in :mod:`faithgrpo.tasks.knights_knaves`.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from faithgrpo.tasks.knights_knaves.logic import (
    MAX_PEOPLE,
    Assignment,
    Statement,
    assignment_of,
    consistency_mask,
    index_of,
    normalize_statement,
    statement_table,
)
from faithgrpo.verifier.answers import offers_alternatives

MAX_ANSWER_CHARS = 2_000

ROLE_WORDS = [
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
ROLE_SET = frozenset(ROLE_WORDS)
NAME_RE = re.compile(r"[^\W_][\w]*")


# ---------------------------------------------------------------------------------------------------
# Puzzle metadata
# ---------------------------------------------------------------------------------------------------


def article(word: str) -> str:
    """``word`` with its indefinite article (``a knight``, ``an idealist``)."""
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

    @functools.cached_property
    def n_people(self) -> int:
        return len(self.names)

    @functools.cached_property
    def full_mask(self) -> int:
        """The bitmask of all ``2^n`` assignments (every truth table lies below it)."""
        return (1 << (1 << len(self.names))) - 1

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
        if any(not NAME_RE.fullmatch(name) for name in names):
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
        if not (NAME_RE.fullmatch(knight) and NAME_RE.fullmatch(knave)) or knight == knave:
            raise ValueError(
                f"knight/knave terms must be two distinct single words, got {knight!r}/{knave!r}"
            )
        if knight == "knave" or knave == "knight":
            raise ValueError(
                f"knight/knave terms {knight!r}/{knave!r} swap the generic words; that is ambiguous"
            )
        if knight not in ROLE_WORDS or knave not in ROLE_WORDS:
            # reasoning-gym's score_answer only recognises its own role words; others would grade as empty.
            raise ValueError(
                f"knight/knave terms must be reasoning-gym role words {ROLE_WORDS}, got {knight!r}/{knave!r}"
            )
        if clash := set(ROLE_WORDS + _RESERVED_NAMES) & {name.casefold() for name in names}:
            raise ValueError(f"names {sorted(clash)} collide with role or answer words; rename those people")
        a_knight = str(terms.get("a_knight", article(knight))).strip()
        a_knave = str(terms.get("a_knave", article(knave))).strip()

        full = (1 << (1 << n)) - 1
        tables = tuple(statement_table(s, n, full) for s in statements)
        consistent = consistency_mask(tables, n)
        n_solutions = consistent.bit_count()
        raw_solution = metadata.get("solution")
        if raw_solution is None:
            if n_solutions != 1:
                raise ValueError(
                    f"metadata has no 'solution' and the puzzle has {n_solutions} consistent assignments; "
                    "pass a puzzle with a unique solution"
                )
            solution = assignment_of(consistent.bit_length() - 1, n)
        else:
            if isinstance(raw_solution, (str, bytes)) or not isinstance(raw_solution, Sequence):
                raise ValueError("metadata 'solution' must be a list of bools (True = knight)")
            if len(raw_solution) != n or not all(isinstance(x, bool) or x in (0, 1) for x in raw_solution):
                raise ValueError(
                    f"metadata 'solution' must hold {n} bools (True = knight), got {raw_solution!r}"
                )
            solution = tuple(bool(x) for x in raw_solution)
            if not (consistent >> index_of(solution)) & 1:
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
        """Results of pure text checks against this puzzle (see :func:`memoised`)."""
        return {}


_MEMO_ENTRIES = 512  # per puzzle (G completions' distinct lines); then the memo starts over
MEMO_KEY_CHARS = 300  # longer texts are checked without memoising: <= ~0.3 MB per puzzle
_MISSING = object()  # a memoised value may be None


def memoised(puzzle: KKPuzzle, key: tuple, text: str | None, compute: Any, *args: Any) -> Any:
    """``compute(*args)``, remembered on the puzzle under ``key``.

    Only for pure functions of the (frozen) puzzle and ``key`` (the text they read, plus any
    settings) whose results are immutable (tuples, ints, strings, floats), so the G completions of
    a prompt parse each repeated line once and no caller can alter a stored value. A call that
    raises is not remembered.
    """
    memo = puzzle._memo
    value = memo.get(key, _MISSING)  # one lookup on a hit
    if value is not _MISSING:
        return value
    value = compute(*args)
    remember(memo, key, text, value)
    return value


def remember(memo: dict, key: tuple, text: str | None, value: Any) -> None:
    """Store a computed value as :func:`memoised` does (hot loops look ``key`` up themselves)."""
    if text is None or len(text) <= MEMO_KEY_CHARS:
        if len(memo) >= _MEMO_ENTRIES:
            memo.clear()
        memo[key] = value


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
    return as_puzzle(metadata)


def as_puzzle(metadata: Any) -> KKPuzzle:
    # A JSON column repeats the same string for every completion of a prompt: parse it once.
    """A :class:`KKPuzzle` from metadata (a dict, its JSON text, or a puzzle already)."""
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
    puzzle = as_puzzle(metadata)
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
        reasoning-gym's score in [0, 1] (1.0 = every role right; it gives partial credit below that);
        0.0 for an answer that offers alternatives (:func:`faithgrpo.verifier.answers.offers_alternatives`:
        "or", "either", "vice versa", "/", ...), which reasoning-gym would read as its first option.
    """
    if not isinstance(answer, str) or not answer or len(answer) > MAX_ANSWER_CHARS:
        return 0.0
    puzzle = as_puzzle(metadata)
    roles = None if assignment is None else tuple(bool(x) for x in assignment)
    return score_roles(answer, puzzle, roles)


def score_roles(answer: str | None, puzzle: KKPuzzle, roles: Assignment | None) -> float:
    """:func:`kk_score_answer` for a checked puzzle and roles that are already a tuple of bools."""
    if not isinstance(answer, str) or not answer or len(answer) > MAX_ANSWER_CHARS:
        return 0.0
    # the G completions of a prompt mostly give the same answer: one lookup grades it
    return memoised(puzzle, ("score", answer, roles), answer, _score_answer, answer, puzzle, roles)


def _score_answer(answer: str, puzzle: KKPuzzle, roles: Assignment | None) -> float:
    if offers_alternatives(answer):  # "..., or vice versa": one answer per slot
        return 0.0
    entry = {"answer": kk_oracle_answer(puzzle, roles)}
    try:
        return float(_rg_score_answer()(answer, entry))
    except Exception:  # reasoning-gym's scorer is model-facing; never let it raise here
        return 0.0
