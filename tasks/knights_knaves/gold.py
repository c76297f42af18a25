"""Knights & Knaves gold traces (:func:`gold_kk_trace`) and the prompt instructions that teach the format.

The trace contract and the claim grammar are documented in :mod:`faithgrpo.tasks.knights_knaves`.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from typing import Any

from faithgrpo.tasks.knights_knaves.claims import find_refuter, violated_cases
from faithgrpo.tasks.knights_knaves.formulas import OPERATOR_STYLES, format_kk_formula
from faithgrpo.tasks.knights_knaves.logic import ATOMS, Assignment, Statement, evaluate, knight_masks
from faithgrpo.tasks.knights_knaves.puzzle import KKPuzzle, article, as_puzzle, kk_oracle_answer
from faithgrpo.tasks.knights_knaves.trace import MAX_SLOT_CHARS, MAX_TRACE_CHARS

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
# Claim spellings the gold traces vary over (all inside the grammar of the module docstring): how
# the cited statements are named and introduced, how premises are introduced, "by elimination".
_STATEMENT_NOUNS = ("{name}'s statement", "{name}'s claim", "the statement of {name}")
_CITE_FORMS = (": {s}", ", by {s}", " ({s})", " (contradicts {s})", ": violates {s}", " because of {s}")
_ROLE_CITE_FORMS = (": {s}", ", by {s}", " ({s})", " because of {s}", ", from {s}")
_GIVEN_WORDS = ("given", "since", "as")
_ELIMINATION_FORMS = (" by elimination", ", by elimination", " (by elimination)", ", from the claims above")
_LEADS = ("so ", "hence ", "thus ", "therefore ", "")


def _rewrite(node: Statement, rng: random.Random) -> Statement:
    """An equivalent variant of a statement (double negations of atoms folded, knaves as not-knights)."""
    op = node[0]
    if op == "not" and node[1][0] in ATOMS:
        if rng.random() < 0.5:
            return ("lying" if node[1][0] == "telling-truth" else "telling-truth", node[1][1])
        return node  # rewriting the atom too would give an ugly double negation
    if op == "lying" and rng.random() < 0.2:
        return ("not", ("telling-truth", node[1]))
    if op in ATOMS:
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
        self.role_cites = rng.sample(_ROLE_CITE_FORMS, 2)
        self.noun = rng.choice(_STATEMENT_NOUNS)
        self.given_word = rng.choice(_GIVEN_WORDS)
        self.premise_style = rng.choice(("is", "="))

    def lead(self) -> str:
        return self.rng.choice(_LEADS)

    def _roles(self, pairs: Sequence[tuple[int, bool]]) -> str:
        return ", ".join(
            f"{self.puzzle.names[i]}{self.sep}{self.words['knight' if r else 'knave']}" for i, r in pairs
        )

    def assignment(
        self,
        pairs: Sequence[tuple[int, bool]],
        refuters: Sequence[int] = (),
        given: Sequence[tuple[int, bool]] = (),
    ) -> str:
        """``assignment {...} is consistent`` (no refuters) or ``... is inconsistent`` citing them."""
        if not refuters:
            return f"assignment {{{self._roles(pairs)}}} is consistent"
        return f"assignment {{{self._roles(pairs)}}} is inconsistent" + self.cite(refuters, given)

    def cite(
        self, refuters: Sequence[int], given: Sequence[tuple[int, bool]] = (), forms: Sequence[str] = ()
    ) -> str:
        """The citation: the statements (each contradicted in every case) and the premises used."""
        names = self.puzzle.names
        text = " and ".join(self.noun.format(name=names[i]) for i in refuters)
        if given:
            if self.premise_style == "is":
                premises = [f"{names[i]} is {self.words['a_knight' if r else 'a_knave']}" for i, r in given]
            else:
                premises = [f"{names[i]}={self.words['knight' if r else 'knave']}" for i, r in given]
            text += f", {self.given_word} " + " and ".join(premises)
        return self.rng.choice(forms or self.cites).format(s=text)

    def role(
        self, person: int, knight: bool, refuters: Sequence[int] = (), given: Sequence[tuple[int, bool]] = ()
    ) -> str:
        """``Name is a role`` citing its statements and premises, or ``by elimination`` without refuters."""
        word = self.words["a_knight" if knight else "a_knave"]
        basis = (
            self.cite(refuters, given, self.role_cites) if refuters else self.rng.choice(_ELIMINATION_FORMS)
        )
        return f"{self.puzzle.names[person]} is {word}{basis}"


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
        values = [evaluate(s, assignment) for s in puzzle.statements]
        bad = [i for i in range(n) if values[i] != assignment[i]]
        claim = write.assignment(list(enumerate(assignment)), bad if rng.random() < 0.2 else bad[:1])
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
    knights = knight_masks(n)
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
                claim = write.assignment(pairs, () if bad is None else (bad,))
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


def _premises(
    fixed: dict[int, bool], opposite: int, refuter: int, violations: Sequence[int], n: int
) -> list[tuple[int, bool]]:
    """A minimal list of earlier conclusions under which ``refuter``'s statement contradicts its speaker
    in every assignment of ``opposite`` (greedy: drop each conclusion the contradiction does not need)."""
    full = (1 << (1 << n)) - 1
    knights = knight_masks(n)
    kept = list(fixed.items())
    for premise in list(kept):
        trial = [p for p in kept if p != premise]
        cases = opposite
        for person, role in trial:
            cases &= knights[person] if role else full & ~knights[person]
        if cases & ~violations[refuter] == 0:
            kept = trial
    return kept


def _propagation_derivation(
    puzzle: KKPuzzle, rng: random.Random, words: dict[str, str], write: _ClaimWriter
) -> list[str] | None:
    """Fix one person's role per step: a role whose opposite is contradicted, in every assignment still
    open, by one statement (cited, with the earlier conclusions it needs as premises), or that every
    open assignment already gives (``by elimination``). ``None`` when the puzzle needs a case split
    (no single statement rules out either role of anyone left). Complexity: O(n^3 · 2^n / wordsize).
    """
    n = puzzle.n_people
    full = (1 << (1 << n)) - 1
    knights = knight_masks(n)
    violations = violated_cases(puzzle)
    open_, fixed, lines = full, {}, []
    while len(fixed) < n:
        step = None
        for person in (p for p in range(n) if p not in fixed):
            for role in (True, False):
                other = open_ & (full & ~knights[person] if role else knights[person])
                refuter = find_refuter(other, range(n), violations) if other else None
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
        else:
            opposite = full & ~knights[person] if role else knights[person]
            given = _premises(fixed, opposite, refuter, violations, n)
            if rng.random() < 0.5:
                a_opposite = words["a_knave" if role else "a_knight"]
                lines.append(
                    f"- If {puzzle.names[person]} were {a_opposite}, {puzzle.names[refuter]}'s claim would "
                    f"contradict {puzzle.names[refuter]}'s role"
                    + (" whatever the others are." if not given else " given what we have so far.")
                )
                lines.append(f"- {write.assignment([(person, not role)], (refuter,), given)}")
                lines.append(f"- {write.lead()}{write.role(person, role)}")
            else:
                lines.append(f"- {write.role(person, role, (refuter,), given)}")
        open_ &= knights[person] if role else full & ~knights[person]
        fixed[person] = role
    if rng.random() < 0.5:  # check that the one assignment left works
        lines.append(f"- {write.assignment(sorted(fixed.items()))}")
    return lines


def gold_kk_trace(metadata: Any, rng: random.Random | int | None = None) -> str:
    """Render a correct trace for a puzzle, with varied wording, that passes :func:`check_kk_trace`.

    The restatements are equivalent rewrites of the metadata statements (operator spelling, role
    words and atom forms vary). The derivation is a certificate in the claim grammar of the module
    docstring, computed symbolically, every claim citing what it follows from, in one of three
    styles: for up to 3 people the full truth table (one claim per assignment, citing a contradicted
    statement, sometimes every one); a backtracking case analysis (assign people in order, check
    each statement as soon as everyone it mentions has a role, claim a branch inconsistent at the
    first contradiction, citing it); or, when one statement at a time settles each person's role,
    a chain of role claims, each citing its statement and a minimal set of earlier conclusions as
    premises (``given ...``). For more than 3 people never the table, so traces stay short. Prose
    lines (truth values, "Suppose ..." branch headers, a concluding sentence) and ``by elimination``
    role claims come between the claims.

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
    puzzle = as_puzzle(metadata)
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
    words["a_knight"] = article(words["knight"]) if generic_assign else puzzle.a_knight
    words["a_knave"] = article(words["knave"]) if generic_assign else puzzle.a_knave
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
    "statements": [("not", ("lying", 1)), ("<=>", ("telling-truth", 0), ("telling-truth", 1))],
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

    They teach the derivation's claim grammar with its citations (module docstring) and the one-answer
    rule. The example is rendered by :func:`gold_kk_trace` from a fixed puzzle and seed, so it always
    passes the checker; it shows every claim form (a cited inconsistency, ``by elimination``, a role
    claim citing a statement and a premise, ``is consistent``).

    Returns:
        Text to append to the puzzle prompt.
    """
    example = gold_kk_trace(_EXAMPLE_METADATA, random.Random(97))
    return (
        "Reason inside <think> ... </think> using exactly these four slots, then give the final answer "
        "inside <answer> ... </answer>.\n"
        "STATEMENTS: one line per person, 'Name: formula', restating that person's claim. Formulas use "
        "knight(Name) and knave(Name) (or the puzzle's own words, e.g. hero(Name) and villain(Name)), "
        "not, and, or, -> (if ... then), <-> (if and only if) and parentheses.\n"
        "STRATEGY: the method, e.g. 'truth table over all assignments' or 'case analysis'.\n"
        "DERIVATION: one step per line. Lines in these forms are claims, and each is checked; other "
        "lines are free comments. Every claim except 'is consistent' cites the statements it follows "
        "from, and each cited statement must do the work on its own:\n"
        "  assignment {Ava: knight, Noah: knave} is inconsistent: Noah's statement\n"
        "    - Noah's statement contradicts Noah's role in every case with these roles (you may list "
        "only some people, e.g. 'assignment {Ava: knave} is inconsistent: Noah's statement')\n"
        "  Noah is a knight: Ava's statement, given Ava is a knight\n"
        "    - in every case where Noah is a knave and Ava a knight, Ava's statement contradicts Ava's "
        "role; 'given ...' names the earlier conclusions it needs (they must already be shown)\n"
        "  so Ava is a knight, by elimination\n"
        "    - the claims above already rule out every case where Ava is a knave\n"
        "  assignment {Ava: knight, Noah: knight} is consistent\n"
        "    - every person listed, and every statement matches its speaker's role\n"
        "An inconsistency without a cited statement fails the derivation; 'so Ava is a knight' without "
        "a citation is only a comment. Together the claims must rule out every assignment except your "
        "answer. Write each claim once, and only about the people in the puzzle.\n"
        "ASSIGNMENT: every person's role, e.g. 'Ava=knight, Noah=knave'.\n"
        "Answer in the format the puzzle asks for, with the puzzle's own words for the roles. Give one "
        "answer: an ASSIGNMENT or answer that offers alternatives ('or', 'either', 'vice versa', '/') "
        "is wrong.\n\n"
        'Example (a puzzle where Ava says "Noah is a knight" and Noah says "Ava is a knight if and '
        'only if Noah is a knight"):\n' + example
    )
