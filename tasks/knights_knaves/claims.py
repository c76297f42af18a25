"""Knights & Knaves derivation claims: their parser and the truth-table certificate (:func:`certify_claims`).

The claim grammar is documented in :mod:`faithgrpo.tasks.knights_knaves` ("Derivation claims").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from faithgrpo.tasks.knights_knaves.logic import Assignment, assignment_of, index_of, knight_masks
from faithgrpo.tasks.knights_knaves.puzzle import ROLE_SET, KKPuzzle, article, as_puzzle, memoised, remember

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
_ASSIGN_INITIALS = frozenset("aA")  # what the patterns' first letter matches (see the test)
_ASSIGN_CLAIM_RE = re.compile(
    r"assignment[ \t]*\{([^{}]*)\}[ \t]*is[ \t]+(in)?consistent\b(.*)", re.IGNORECASE
)
_ROLE_CLAIM_RE = re.compile(r"([^\W_]\w*)[ \t]+is[ \t]+(?:an?[ \t]+)?([^\W_]\w*)\b(.*)", re.IGNORECASE)
_CLAIM_ITEM_RE = re.compile(r"[ \t]*([^\W_]\w*)[ \t]*[:=][ \t]*([^\W_]\w*)[ \t]*")
# A claim's citation (the tail after "is inconsistent" / "is a knight"): the statements it follows
# from, optionally the earlier conclusions it uses ("given Ava is a knight"), or, for a role claim,
# "by elimination" (the claims above already leave no other role).
_NAME = r"[^\W_]\w*"
_CITE = rf"(?:{_NAME}['’]s?[ \t]+(?:statement|claim)|(?:statement|claim)[ \t]+of[ \t]+{_NAME})"
_PREMISE = rf"{_NAME}[ \t]*(?:=|:|[ \t]is[ \t]+(?:an?[ \t]+)?)[ \t]*{_NAME}"
_CITE_TAIL_RE = re.compile(
    r"[ \t]*(?:[,;:(\[–—-][ \t]*)?(?:"
    r"(?P<statements>(?:(?:by|because[ \t]+of|from|via|per|violates|violating|contradicts|contradicting|breaks)[ \t]+)?"
    rf"(?:the[ \t]+)?{_CITE}(?:[ \t]*(?:,|and|&)[ \t]*(?:the[ \t]+)?{_CITE})*)"
    r"(?:[ \t]*[,;]?[ \t]*(?:given|since|as|because)(?:[ \t]+that)?[ \t]+"
    rf"(?P<given>{_PREMISE}(?:[ \t]*(?:,|and)[ \t]*{_PREMISE})*))?"
    r"|(?P<elimination>by[ \t]+elimination|(?:by|from)[ \t]+the[ \t]+(?:claims|cases|steps|rows)[ \t]+above)"
    r")[ \t]*[)\]]?[ \t]*",
    re.IGNORECASE,
)
_CITE_NAME_RE = re.compile(
    r"([^\W_]\w*)['’]s?[ \t]+(?:statement|claim)|(?:statement|claim)[ \t]+of[ \t]+([^\W_]\w*)", re.IGNORECASE
)
_PREMISE_RE = re.compile(rf"({_NAME})[ \t]*(?:=|:|[ \t]is[ \t]+(?:an?[ \t]+)?)[ \t]*({_NAME})", re.IGNORECASE)
_EMPTY_TAIL_RE = re.compile(r"[ \t]*")
_ROLE_LIST_SPLIT_RE = re.compile(r"[,;]")
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
        cites: Indices of the people whose statements the claim names as its reason.
        given: ``(person index, is_knight)`` earlier conclusions the claim names as premises.
        elimination: A role claim cited ``by elimination`` (no statement, no premise).
    """

    kind: str
    roles: tuple[tuple[int, bool], ...]
    cites: tuple[int, ...] = ()
    given: tuple[tuple[int, bool], ...] = ()
    elimination: bool = False

    @property
    def key(self) -> tuple:
        """What makes two claims the same claim (the citation does not)."""
        return (self.kind, tuple(sorted(self.roles)))


# a parsed citation: (cited statements, premises, by elimination)
_Citation = tuple[tuple[int, ...], tuple[tuple[int, bool], ...], bool]
_NO_CITATION: _Citation = ((), (), False)


def _cites(tail: str, puzzle: KKPuzzle) -> tuple[_Citation | None, str | None]:
    # (None, None): the tail is not a citation (the line is prose); (citation, None); (None, error).
    if _EMPTY_TAIL_RE.fullmatch(tail):
        return _NO_CITATION, None
    match = _CITE_TAIL_RE.fullmatch(tail)
    if not match:
        return None, None
    if match.group("elimination"):
        return ((), (), True), None
    cites: list[int] = []
    for cite in _CITE_NAME_RE.finditer(match.group("statements")):
        name = cite.group(1) or cite.group(2)
        index = puzzle.person(name)
        if index is None:
            return None, f"cites the statement of {name[:30]!r}, who is not in this puzzle"
        if index not in cites:
            cites.append(index)
    given: dict[int, bool] = {}
    for premise in _PREMISE_RE.finditer(match.group("given") or ""):
        index, role = puzzle.person(premise.group(1)), puzzle.role(premise.group(2))
        if index is None:
            return None, f"takes {premise.group(1)[:30]!r} as given, who is not in this puzzle"
        if role is None:
            return None, (
                f"{premise.group(2)[:30]!r} in a premise is not a role; use knight/knave or "
                f"{puzzle.knight}/{puzzle.knave}"
            )
        if given.setdefault(index, role) != role:
            return None, f"takes {puzzle.names[index]} as given in both roles"
    return (tuple(cites), tuple(given.items()), False), None


def _parse_claim(line: str, puzzle: KKPuzzle) -> tuple[KKClaim | None, str | None]:
    """``(claim, None)``, ``(None, None)`` for prose, or ``(None, reason)`` for a malformed claim."""
    why, claim = _line_step(line, puzzle)[:2]
    return claim, why


# What _certify needs of one DERIVATION line, computed once per distinct line (or claim body):
# ``(why, claim, key, region)``. ``why``/``claim`` are :func:`_parse_claim`'s result; ``key`` is
# ``claim.key``; ``region`` is the bitmask of assignments extending the claim's roles (inconsistent
# and role claims), or a consistent claim's assignment index (-1 when it leaves someone out).
_Step = tuple[str | None, KKClaim | None, tuple | None, int]
_PROSE_STEP: _Step = (None, None, None, 0)


def _line_step(line: str, puzzle: KKPuzzle) -> _Step:
    """The :data:`_Step` of one DERIVATION line (lead words, bullets and labels stripped)."""
    lead = _CLAIM_LEAD_RE.match(line, 0, 64)
    start = lead.end() if lead else 0
    if len(line) > MAX_CLAIM_LINE_CHARS:  # checked before any pattern reads the whole line
        if _ASSIGN_START_RE.match(line, start, start + 40):
            return (f"claim line longer than {MAX_CLAIM_LINE_CHARS} characters", None, None, 0)
        return _PROSE_STEP
    body = line[start:].rstrip(" \t.!;")
    # the rest reads only body (lead and bullets stripped): memoised per puzzle, so the G traces of a
    # prompt, which repeat claims under different bullets and labels, parse each claim once
    memo = puzzle._memo
    step = memo.get(("claim", body))
    if step is None:
        step = _body_step(body, puzzle)
        remember(memo, ("claim", body), body, step)
    return step


def _body_step(body: str, puzzle: KKPuzzle) -> _Step:
    claim, why = _parse_claim_body(body, puzzle)
    if claim is None:
        return (why, None, None, 0)
    n = puzzle.n_people
    if claim.kind == "consistent":
        roles = dict(claim.roles)
        region = index_of(tuple(roles[i] for i in range(n))) if len(roles) == n else -1
    else:
        region = _region(claim.roles, n)
    return (None, claim, claim.key, region)


def _assigned_roles(text: str, puzzle: KKPuzzle) -> tuple[tuple[int, bool], ...] | None:
    """The ``(person, role)`` pairs of an assignment's role list, as :func:`_parse_claim_body` reads
    them; ``None`` when it would report an error (it then words the reason itself)."""
    items = [item for item in _ROLE_LIST_SPLIT_RE.split(text) if item.strip()]
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
    # Both assignment patterns start with "assignment", and IGNORECASE matches "a" to "a"/"A" only:
    # other bodies skip them. A full claim needs no separate check of its start.
    match = _ASSIGN_CLAIM_RE.fullmatch(body) if body[:1] in _ASSIGN_INITIALS else None
    if match is not None or (body[:1] in _ASSIGN_INITIALS and _ASSIGN_START_RE.match(body)):
        if not match:
            return None, (
                f"{body[:60]!r} is not a claim; write 'assignment {{Name: role, ...}} is consistent' "
                "or '... is inconsistent'"
            )
        # the same role list comes with many tails (citations) and leads: its parse is memoised on
        # its own text when it has no error (an error names the whole body: that path runs in full)
        roles_text = match.group(1)
        known = memoised(puzzle, ("roles", roles_text), roles_text, _assigned_roles, roles_text, puzzle)
        if known is not None:
            kind = "inconsistent" if match.group(2) else "consistent"
            tail = match.group(3)
            citation, why = memoised(puzzle, ("cites", tail), tail, _cites, tail, puzzle)
            return _assignment_claim(body, kind, known, citation, why, puzzle)
        items = [item for item in _ROLE_LIST_SPLIT_RE.split(match.group(1)) if item.strip()]
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
        citation, why = _cites(match.group(3), puzzle)
        return _assignment_claim(body, kind, tuple(roles.items()), citation, why, puzzle)
    match = _ROLE_CLAIM_RE.fullmatch(body)
    if not match or match.group(2).casefold() not in ROLE_SET:
        return None, None  # prose
    name, word = match.group(1), match.group(2)
    tail = match.group(3)
    citation, why = memoised(puzzle, ("cites", tail), tail, _cites, tail, puzzle)
    if citation is None and why is None:
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
    if citation == _NO_CITATION:
        return None, None  # a bare verdict ("so Ava is a knight") is prose: it certifies nothing
    cites, given, elimination = citation
    if index in dict(given):
        return None, f"{body[:60]!r} takes {puzzle.names[index]}'s own role as given"
    return KKClaim("role", ((index, role),), cites, given, elimination), None


def _assignment_claim(
    body: str,
    kind: str,
    roles: tuple[tuple[int, bool], ...],
    citation: _Citation | None,
    why: str | None,
    puzzle: KKPuzzle,
) -> tuple[KKClaim | None, str | None]:
    """The claim of an ``assignment {...} is (in)consistent`` line from its parsed roles and citation."""
    if why:
        return None, why
    if kind == "consistent":
        if citation != _NO_CITATION:
            return None, f"{body[:60]!r}: after 'is consistent' write nothing"
        return KKClaim(kind, roles), None
    if citation is None or citation[2]:
        return None, f"{body[:60]!r}: after 'is inconsistent' write the statement it contradicts"
    cites, given, _ = citation
    if not cites:
        return None, (
            f"{body[:60]!r} cites no statement; name the one it contradicts: '... is inconsistent: "
            "<Name>'s statement'"
        )
    assigned = dict(roles)
    for person, _ in given:
        if person in assigned:
            return None, f"{body[:60]!r} takes {puzzle.names[person]} as given and assigns them too"
    return KKClaim(kind, roles, cites, given), None


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
        >>> parse_kk_claim("- assignment {Ava: knave, Noah: knave} is inconsistent: Ava's statement", meta)[0].cites
        (0,)
        >>> claim, _ = parse_kk_claim("so Noah is a knave: Ava's statement, given Ava is a knight", meta)
        >>> claim.roles, claim.cites, claim.given
        (((1, False),), (0,), ((0, True),))
        >>> parse_kk_claim("so Noah is a knave", meta)  # a bare verdict is prose
        (None, None)
        >>> parse_kk_claim("assignment {Ava: knight} is inconsistent", meta)[1]
        "'assignment {Ava: knight} is inconsistent' cites no statement; name the one it contradicts: '... is inconsistent: <Name>'s statement'"
        >>> parse_kk_claim("Suppose Ava is a knight.", meta)
        (None, None)
        >>> parse_kk_claim("Zed is a knight", meta)
        (None, "'Zed is a knight' is about 'Zed', who is not in this puzzle")
    """
    if not isinstance(line, str):
        return None, None
    puzzle = as_puzzle(metadata)
    return _parse_claim(line, puzzle)


def _partial_text(roles: Sequence[tuple[int, bool]], puzzle: KKPuzzle) -> str:
    return "{" + ", ".join(f"{puzzle.names[i]}: {puzzle.role_word(r, True)}" for i, r in roles) + "}"


def _region(roles: Sequence[tuple[int, bool]], n: int) -> int:
    # The assignments that extend a partial assignment, as a bitmask.
    full = (1 << (1 << n)) - 1
    knights = knight_masks(n)
    region = full
    for i, role in roles:
        region &= knights[i] if role else full & ~knights[i]
    return region


def violated_cases(puzzle: KKPuzzle) -> tuple[int, ...]:
    # Bit a of entry i: under assignment a, person i's statement contradicts i's role.
    """Per person, the assignments under which their statement contradicts their role."""
    full = (1 << (1 << puzzle.n_people)) - 1
    return tuple(full & (k ^ t) for k, t in zip(knight_masks(puzzle.n_people), puzzle.tables))


def find_refuter(cases: int, candidates: Sequence[int], violations: Sequence[int]) -> int | None:
    # A person whose statement contradicts their role in every assignment of ``cases`` (None: none).
    """A person among ``candidates`` whose statement contradicts their role in every case of ``cases``."""
    for i in candidates:
        if cases & ~violations[i] == 0:
            return i
    return None


def describe_assignment(assignment: Assignment, puzzle: KKPuzzle) -> str:
    """``Name=knight, Name=knave, ...`` for ``assignment`` (generic role words)."""
    return ", ".join(f"{n}={puzzle.role_word(r, generic=True)}" for n, r in zip(puzzle.names, assignment))


def _quoted(line: str) -> str:
    # how a failing claim is quoted in a reason (built only on failure: most claims hold)
    return repr(line.strip()[:80])


def certify_claims(body: str, puzzle: KKPuzzle) -> tuple[int | None, str | None]:
    """Check every claim of a DERIVATION and return ``(remaining, None)`` or ``(None, reason)``.

    ``remaining`` is the bitmask of full assignments no claim rules out ("open"). Claims are read in
    order. A claim's *cases* are the assignments it speaks of: for ``inconsistent`` every completion
    of its roles, for a role claim every assignment giving the person the other role, in both
    narrowed to its premises (``given ...``), each of which every open assignment must already
    satisfy. Every cited statement must contradict its speaker's role in every case; the cases are
    then ruled out. ``consistent`` needs every statement to match its speaker's role and rules
    nothing out; a role claim ``by elimination`` needs no open assignment to give the other role.

    A true claim never rules out a consistent assignment, so when every claim holds, ``remaining``
    still contains every solution of the puzzle.
    """
    n = puzzle.n_people
    full = (1 << (1 << n)) - 1
    memo = puzzle._memo
    # per-puzzle tables, computed once for all the traces of a prompt
    violations = memoised(puzzle, ("violations",), None, violated_cases, puzzle)
    open_ = full
    seen: set[tuple] = set()
    n_claims = 0
    for line in body.splitlines():
        # the G traces of a prompt repeat whole lines too: skip even the lead-word pattern for them
        # (the memo lookup is inlined: this loop runs once per line of every trace)
        step = memo.get(("line", line))
        if step is None:
            step = _line_step(line, puzzle)
            remember(memo, ("line", line), line, step)
        why, claim, key, region = step
        if why:
            return None, why
        if claim is None:
            continue
        n_claims += 1
        if n_claims > MAX_CLAIMS:
            return None, f"more than {MAX_CLAIMS} claims"
        if key in seen:
            return None, f"claim repeated: {_quoted(line)}"
        seen.add(key)
        kind = claim.kind
        if kind == "consistent":
            if region < 0:
                missing = sorted(set(range(n)) - {i for i, _ in claim.roles})
                return None, (
                    f"{_quoted(line)}: a consistent assignment must give every role (missing "
                    f"{', '.join(puzzle.names[i] for i in missing)})"
                )
            bad = [puzzle.names[i] for i in range(n) if (violations[i] >> region) & 1]
            if bad:
                return (
                    None,
                    f"false claim {_quoted(line)}: {', '.join(bad)}'s statement contradicts the speaker's role",
                )
            continue
        if claim.elimination:  # a role claim that the claims above already settle
            other = open_ & ~region
            if other:
                ((person, role),) = claim.roles
                example = assignment_of((other & -other).bit_length() - 1, n)
                return None, (
                    f"unsupported claim {_quoted(line)}: {describe_assignment(example, puzzle)} is still open and makes "
                    f"{puzzle.names[person]} {article(puzzle.role_word(not role, True))}"
                )
            continue
        cases = region if kind == "inconsistent" else full & ~region
        for person, role in claim.given:
            # a premise must be an earlier conclusion: every open assignment already has it
            premise = _region(((person, role),), n)
            if open_ & ~premise:
                return None, (
                    f"unsupported claim {_quoted(line)}: it takes {puzzle.names[person]} "
                    f"as {article(puzzle.role_word(role, True))}, which the claims above do not establish"
                )
            cases &= premise
        for i in claim.cites:
            spared = cases & ~violations[i]
            if spared:
                witness = assignment_of((spared & -spared).bit_length() - 1, n)
                verdict = (
                    "is consistent"
                    if not any((v >> index_of(witness)) & 1 for v in violations)
                    else (f"does not contradict {puzzle.names[i]}'s statement")
                )
                return None, (
                    f"false claim {_quoted(line)}: {describe_assignment(witness, puzzle)} {verdict}; the cited "
                    "statement must contradict its speaker in every case the claim rules out"
                )
        open_ &= ~cases
    if n_claims == 0:
        return None, (
            "no claims (prose alone certifies nothing); write lines like "
            "'assignment {Name: knight, ...} is inconsistent: Name's statement' or "
            "'Name is a knight: Name's statement'"
        )
    return open_, None
