"""Knights & Knaves statement logic: normalisation, evaluation, bitmask truth tables, consistent assignments.

The statement grammar and the bitmask encoding are documented in :mod:`faithgrpo.tasks.knights_knaves`.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from typing import Any

Statement = tuple  # nested tuples of the grammar in knights_knaves; see normalize_statement
Assignment = tuple[bool, ...]

MAX_PEOPLE = 12  # 2^12-bit truth tables: still microseconds per connective
MAX_STATEMENT_DEPTH = 64  # metadata statements (user input)
MAX_STATEMENT_NODES = 10_000

ATOMS = ("telling-truth", "lying")
NARY_OPERATORS = ("and", "or")
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
        if op in ATOMS:
            if len(node) != 2:
                raise ValueError(f"({op!r}, person) takes exactly one person index, got {node!r:.80}")
            return (op, _as_index(node[1], n_people))
        if op == "not":
            if len(node) != 2:
                raise ValueError(f"('not', s) takes exactly one operand, got {node!r:.80}")
            return ("not", walk(node[1], depth + 1))
        if op in NARY_OPERATORS:
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


def evaluate(statement: Statement, assignment: Sequence[bool]) -> bool:
    """The truth value of ``statement`` under ``assignment`` (True: knight)."""
    op = statement[0]
    if op == "telling-truth":
        return bool(assignment[statement[1]])
    if op == "lying":
        return not assignment[statement[1]]
    if op == "not":
        return not evaluate(statement[1], assignment)
    if op == "and":
        return all(evaluate(s, assignment) for s in statement[1:])
    if op == "or":
        return any(evaluate(s, assignment) for s in statement[1:])
    if op == "->":
        return (not evaluate(statement[1], assignment)) or evaluate(statement[2], assignment)
    return evaluate(statement[1], assignment) == evaluate(statement[2], assignment)  # "<=>"


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
    return evaluate(normalize_statement(statement, len(assignment)), [bool(x) for x in assignment])


@functools.lru_cache(maxsize=MAX_PEOPLE + 1)
def knight_masks(n_people: int) -> tuple[int, ...]:
    # Bit a of mask i is set iff assignment a makes person i a knight (bit i of a).
    """Per person, the truth-table mask of the assignments that make them a knight."""
    return tuple(sum(1 << a for a in range(1 << n_people) if (a >> i) & 1) for i in range(n_people))


def statement_table(statement: Statement, n_people: int, full: int) -> int:
    """The truth table of ``statement`` over all assignments, as a bitmask (``full``: all ones)."""
    op = statement[0]
    if op == "telling-truth":
        return knight_masks(n_people)[statement[1]]
    if op == "lying":
        return full & ~knight_masks(n_people)[statement[1]]
    if op == "not":
        return full & ~statement_table(statement[1], n_people, full)
    if op == "and":
        value = full
        for child in statement[1:]:
            value &= statement_table(child, n_people, full)
        return value
    if op == "or":
        value = 0
        for child in statement[1:]:
            value |= statement_table(child, n_people, full)
        return value
    left = statement_table(statement[1], n_people, full)
    right = statement_table(statement[2], n_people, full)
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
    return statement_table(normalize_statement(statement, n_people), n_people, (1 << (1 << n_people)) - 1)


def index_of(assignment: Sequence[bool]) -> int:
    """The truth-table index of ``assignment`` (bit i set: person i is a knight)."""
    return sum(1 << i for i, knight in enumerate(assignment) if knight)


def assignment_of(index: int, n_people: int) -> Assignment:
    """The assignment at truth-table ``index`` (inverse of :func:`index_of`)."""
    return tuple(bool((index >> i) & 1) for i in range(n_people))


def consistency_mask(tables: Sequence[int], n_people: int) -> int:
    # Person i is a knight iff their statement is true: AND_i (knight_i <=> statement_i).
    """The assignments consistent with the statement ``tables`` (each person is a knight iff their statement is true)."""
    full = (1 << (1 << n_people)) - 1
    value = full
    for mask, table in zip(knight_masks(n_people), tables):
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
    mask = consistency_mask(tables, n)
    return [a for a in itertools.product([True, False], repeat=n) if (mask >> index_of(a)) & 1]
