"""Knights & Knaves formula syntax: tokenizer, bounded recursive-descent parser and renderer.

The formula syntax and the statement grammar are documented in :mod:`faithgrpo.tasks.knights_knaves`.
"""

from __future__ import annotations

import re
from typing import Any

from faithgrpo.tasks.knights_knaves.logic import ATOMS, NARY_OPERATORS, Statement, normalize_statement
from faithgrpo.tasks.knights_knaves.puzzle import NAME_RE, KKPuzzle, as_puzzle

MAX_FORMULA_CHARS = 1_000
MAX_FORMULA_TOKENS = 300
MAX_FORMULA_DEPTH = 40  # parentheses + negations


# ---------------------------------------------------------------------------------------------------
# Formula syntax: tokenizer, bounded recursive-descent parser, renderer
# ---------------------------------------------------------------------------------------------------

_TOKEN_RE = re.compile(
    r"(?P<iff><->|<=>|↔|⇔)|(?P<imp>->|=>|→|⇒)|(?P<and>&&|&|∧)|(?P<or>\|\||\||∨)"
    r"|(?P<not>~|!|¬)|(?P<lp>\()|(?P<rp>\))|(?P<word>[^\W_]\w*)|(?P<space>\s+)"
    r"|(?P<bad>.)",  # any other character: the tokenizer reports it (one finditer pass, no gaps)
    re.DOTALL,
)
_WORD_OPS = {"not": "not", "and": "and", "or": "or", "implies": "imp", "iff": "iff"}
# _TOKEN_RE's alternatives, in its order, without the blanks and groups: findall gives the token
# texts in one C call (blanks only separate tokens, and no alternative starts with one), and a dict
# gives the kinds of the symbols. A text with a character no token starts with, or with too many
# tokens, goes through _TOKEN_RE, which reports it.
_TOKEN_TEXT_RE = re.compile(r"<->|<=>|↔|⇔|->|=>|→|⇒|&&|&|∧|\|\||\||∨|~|!|¬|\(|\)|[^\W_]\w*|\S")
_SYMBOL_KINDS = {
    symbol: kind
    for kind, symbols in (
        ("iff", ("<->", "<=>", "↔", "⇔")),
        ("imp", ("->", "=>", "→", "⇒")),
        ("and", ("&&", "&", "∧")),
        ("or", ("||", "|", "∨")),
        ("not", ("~", "!", "¬")),
        ("lp", ("(",)),
        ("rp", (")",)),
    )
    for symbol in symbols
}


class _FormulaError(Exception):
    """Internal: a restatement does not parse (caught; never escapes the public API)."""


def _tokenize(text: str) -> list[tuple[str, str]]:
    values = _TOKEN_TEXT_RE.findall(text)
    if len(values) <= MAX_FORMULA_TOKENS:
        tokens = []
        for value in values:
            kind = _SYMBOL_KINDS.get(value)
            if kind is None:
                if not value[0].isalnum():  # a character no token starts with: report it
                    return _tokenize_reporting(text)
                kind = _WORD_OPS.get(value.lower(), "word")  # words start with [^\W_]: isalnum()
            tokens.append((kind, value))
        return tokens
    return _tokenize_reporting(text)


def _tokenize_reporting(text: str) -> list[tuple[str, str]]:
    # _tokenize one match at a time, so an error names the first bad character or the token limit
    tokens: list[tuple[str, str]] = []
    # The pattern matches every character (unknown ones as "bad"), so finditer walks the text
    # contiguously, token by token, exactly as a match-at-position loop would, but in C.
    for match in _TOKEN_RE.finditer(text):
        kind = match.lastgroup
        if kind == "space":
            continue
        value = match.group()
        if kind == "bad":
            raise _FormulaError(f"unexpected character {value!r} at position {match.start()}")
        if kind == "word":
            kind = _WORD_OPS.get(value.lower(), "word")
        tokens.append((kind, value))
        if len(tokens) > MAX_FORMULA_TOKENS:
            raise _FormulaError(f"more than {MAX_FORMULA_TOKENS} tokens")
    return tokens


class _FormulaParser:
    """Recursive descent over ``iff > imp > or > and > not > atom`` with an explicit depth cap."""

    def __init__(self, tokens: list[tuple[str, str]], puzzle: KKPuzzle):
        self.tokens = tokens
        self.kinds = [kind for kind, _ in tokens] + [None]  # None: end of formula (no bounds check)
        self.pos = 0
        self.depth = 0
        self.puzzle = puzzle

    def peek(self) -> str | None:
        return self.kinds[self.pos]

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
        while self.kinds[self.pos] == "iff":
            self.pos += 1
            node = ("<=>", node, self.imp())
        return node

    def imp(self) -> Statement:
        node = self.disj()
        if self.kinds[self.pos] == "imp":
            self.pos += 1
            self.enter()
            node = ("->", node, self.imp())
            self.depth -= 1
        return node

    def disj(self) -> Statement:
        node = self.conj()
        if self.kinds[self.pos] != "or":
            return node
        children = [node]
        while self.kinds[self.pos] == "or":
            self.pos += 1
            children.append(self.conj())
        return ("or", *children)

    def conj(self) -> Statement:
        node = self.unary()
        if self.kinds[self.pos] != "and":
            return node
        children = [node]
        while self.kinds[self.pos] == "and":
            self.pos += 1
            children.append(self.unary())
        return ("and", *children)

    def unary(self) -> Statement:
        kind = self.kinds[self.pos]
        self.enter()
        # an error abandons the whole parse, so the depth is restored on the normal returns only
        if kind == "not":
            self.pos += 1
            node = ("not", self.unary())
        elif kind == "lp":
            self.pos += 1
            node = self.iff()
            self.take("rp")
        else:
            node = self.atom()
        self.depth -= 1
        return node

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
        if not NAME_RE.fullmatch(found):
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
    puzzle = as_puzzle(metadata)
    if not isinstance(text, str):
        return None, "formula is not text"
    if len(text) > MAX_FORMULA_CHARS:
        return None, f"formula longer than {MAX_FORMULA_CHARS} characters"
    try:
        return parse_formula_tokens(_tokenize(text), puzzle)
    except _FormulaError as err:
        return None, str(err)


def parse_formula_tokens(
    tokens: list[tuple[str, str]], puzzle: KKPuzzle
) -> tuple[Statement | None, str | None]:
    """The statement the formula ``tokens`` spell, or ``(None, reason)``."""
    try:
        return _FormulaParser(tokens, puzzle).parse(), None
    except _FormulaError as err:
        return None, str(err)
    except RecursionError:  # unreachable under the depth cap; kept so the contract holds regardless
        return None, "formula nested too deeply"


def formula_shape(text: str, puzzle: KKPuzzle) -> tuple[tuple | None, list[tuple[str, str]] | None]:
    """What parsing ``text`` depends on, when it can succeed: ``(shape, tokens)``, else ``(None, tokens)``.

    Restatements of one claim differ in spelling: operators (``->``, ``→``, ``implies``), role
    words (``knight``, ``hero``), case. The parser reads a token's kind, whether a word is a role
    word (and which) and, inside ``role(...)``, which person a word names; the shape keeps exactly
    that (role words and names are disjoint: :meth:`KKPuzzle.from_metadata` refuses names that are
    role words). So two formulas of one shape parse to the same statement whenever one parses, and
    a caller may reuse a successful result by shape. Operator words that name a person, and words
    that are neither roles nor names, give no shape (``None``); so do texts that do not tokenize
    (``tokens`` is then ``None`` too).
    """
    if len(text) > MAX_FORMULA_CHARS:
        return None, None
    try:
        tokens = _tokenize(text)
    except _FormulaError:
        return None, None
    shape = []
    for kind, value in tokens:
        if kind == "word":
            role = puzzle.role(value)
            if role is None:
                index = puzzle.person(value)
                if index is None:
                    return None, tokens
                shape.append(index)  # a person: an int (kinds and role words are strings)
            else:
                shape.append("knight" if role else "knave")
        elif value[0].isalnum() and puzzle.person(value) is not None:  # "Or" may be a name
            return None, tokens
        else:
            shape.append(kind)
    return tuple(shape), tokens


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
    puzzle = as_puzzle(metadata)
    ops = OPERATOR_STYLES[style]

    def render(node: Statement, top: bool) -> str:
        op = node[0]
        if op in ATOMS:
            return f"{puzzle.role_word(op == 'telling-truth', generic_roles)}({puzzle.names[node[1]]})"
        if op == "not":
            text = ops["not"] + render(node[1], False)
        elif op in NARY_OPERATORS:
            text = ops[op].join(render(child, False) for child in node[1:])
            if len(node) == 2:  # a one-operand and/or is its operand
                return text
        else:
            text = render(node[1], False) + ops[op] + render(node[2], False)
        return text if top or op == "not" else f"({text})"

    return render(normalize_statement(statement, puzzle.n_people), True)
