"""Knights & Knaves: a truth-table checker for reasoning-gym's ``knights_knaves`` puzzles and their traces.

CALVER's logic transfer: a trace restates every person's claim in a small formal syntax,
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
alternatives (:func:`faithgrpo.verifier.answers.offers_alternatives`: the words ``or``, ``either``,
``otherwise``, ``alternatively``, ``unless``, ``vice versa``, or ``/``) is no assignment, and such
an ``<answer>`` is wrong (also for the outcome reward), whatever its first option says.

**Derivation claims** (the derivation is a checked certificate, not prose). A
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

from faithgrpo.tasks.knights_knaves.checker import CHECK_NAMES, KKCheck, check_kk_trace, kk_cot_correct
from faithgrpo.tasks.knights_knaves.claims import MAX_CLAIMS, KKClaim, parse_kk_claim
from faithgrpo.tasks.knights_knaves.formulas import format_kk_formula, parse_kk_formula
from faithgrpo.tasks.knights_knaves.gold import gold_kk_trace, kk_prompt_instructions
from faithgrpo.tasks.knights_knaves.logic import (
    MAX_PEOPLE,
    consistent_assignments,
    evaluate_statement,
    normalize_statement,
    truth_table,
)
from faithgrpo.tasks.knights_knaves.puzzle import KKPuzzle, kk_oracle_answer, kk_puzzle, kk_score_answer
from faithgrpo.tasks.knights_knaves.trace import MAX_TRACE_CHARS, KKTrace, parse_kk_assignment, parse_kk_trace

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
