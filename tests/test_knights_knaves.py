"""Knights & Knaves truth-table checker: evaluator vs reasoning-gym, trace contract, gold traces, bad input."""

from __future__ import annotations

import functools
import itertools
import json
import random
import re
from collections import Counter
from typing import NamedTuple

import numpy as np
import pytest
import reasoning_gym
from cpu_clock import cpu_clock
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reasoning_gym.logic.knights_knaves import VALID_ROLES, KnightsKnavesDataset

from faithgrpo.tasks import knights_knaves as kk
from faithgrpo.tasks.knights_knaves import gold as kk_gold
from faithgrpo.tasks.knights_knaves.checker import CHECK_NAMES, check_kk_trace, kk_cot_correct
from faithgrpo.tasks.knights_knaves.claims import certify_claims
from faithgrpo.tasks.knights_knaves.formulas import OPERATOR_STYLES, format_kk_formula, parse_kk_formula
from faithgrpo.tasks.knights_knaves.gold import gold_kk_trace, kk_prompt_instructions
from faithgrpo.tasks.knights_knaves.logic import (
    consistent_assignments,
    evaluate_statement,
    normalize_statement,
    truth_table,
)
from faithgrpo.tasks.knights_knaves.puzzle import (
    ROLE_SET,
    ROLE_WORDS,
    KKPuzzle,
    kk_oracle_answer,
    kk_score_answer,
)
from faithgrpo.tasks.knights_knaves.trace import MAX_SLOT_CHARS, parse_kk_assignment

SIZES = [(2, 2, 2), (3, 2, 2), (4, 2, 2), (3, 3, 2), (4, 3, 3)]  # (n_people, depth, width)


@functools.cache
def _entries(n_people: int, depth: int, width: int, size: int, seed: int) -> tuple[dict, ...]:
    dataset = reasoning_gym.create_dataset(
        "knights_knaves",
        size=size,
        seed=seed,
        n_people=n_people,
        depth_constraint=depth,
        width_constraint=width,
    )
    return tuple(dataset)


def _all_entries(per_size: int = 60) -> list[dict]:
    return [e for n, d, w in SIZES for e in _entries(n, d, w, per_size, 1000 + n + 10 * d + 100 * w)]


def _rg_value(statement, assignment) -> bool:
    return bool(KnightsKnavesDataset.test_satisfiability(statement, assignment))


def _equivalent(a, b, n: int) -> bool:
    """Brute-force equivalence with reasoning-gym's own evaluator (independent of the bitmask tables)."""
    return all(_rg_value(a, x) == _rg_value(b, x) for x in itertools.product([True, False], repeat=n))


# --- an independent test-side renderer of the trace contract -------------------------------------


def _render(statement, names, knight="knight", knave="knave") -> str:
    op = statement[0]
    if op == "telling-truth":
        return f"{knight}({names[statement[1]]})"
    if op == "lying":
        return f"{knave}({names[statement[1]]})"
    if op == "not":
        return f"not ({_render(statement[1], names, knight, knave)})"
    joiner = {"and": " and ", "or": " or ", "->": " -> ", "<=>": " <-> "}[op]
    return joiner.join(f"({_render(s, names, knight, knave)})" for s in statement[1:])


# --- an independent test-side model of the derivation-claim grammar and its semantics ------------------


def _rows(n: int) -> list[tuple[bool, ...]]:
    return list(itertools.product([True, False], repeat=n))


def _violated(meta, assignment, i: int) -> bool:
    """Person i's statement contradicts i's role under the assignment (reasoning-gym's evaluator)."""
    return _rg_value(meta["statements"][i], assignment) != assignment[i]


def _is_consistent(meta, assignment) -> bool:
    return not any(_violated(meta, assignment, i) for i in range(len(assignment)))


class _C(NamedTuple):
    """A claim of the test-side model: kind, roles, cited statements, premises, ``by elimination``."""

    kind: str
    roles: dict
    cites: tuple = ()
    given: tuple = ()  # ((person, knight?), ...) earlier conclusions taken as premises
    elim: bool = False


def _claim_line(meta, claim, knight="knight", knave="knave") -> str:
    names = [str(x) for x in meta["names"]]
    kind, roles, cites, given, elim = claim
    cite = (": " + " and ".join(f"{names[i]}'s statement" for i in cites)) if cites else ""
    if given:
        cite += ", given " + " and ".join(f"{names[i]} is a {knight if r else knave}" for i, r in given)
    if elim:
        cite = ", by elimination"
    if kind == "role":
        ((person, role),) = roles.items()
        return f"- {names[person]} is a {knight if role else knave}{cite}"
    items = ", ".join(f"{names[i]}: {knight if r else knave}" for i, r in roles.items())
    return f"- assignment {{{items}}} is {kind}{cite}"


def _table_claims(meta) -> list[_C]:
    """One claim per full assignment, verdicts and citations by brute force with reasoning-gym's evaluator:
    an inconsistent row cites its first contradicted statement."""
    n = len(meta["names"])
    claims = []
    for a in _rows(n):
        bad = [i for i in range(n) if _violated(meta, a, i)]
        claims.append(
            _C("inconsistent", dict(enumerate(a)), (bad[0],)) if bad else _C("consistent", dict(enumerate(a)))
        )
    return claims


def _table_certificate(meta) -> list[str]:
    return [_claim_line(meta, c) for c in _table_claims(meta)]


def _model(meta, claims) -> tuple[bool, set]:
    """The documented semantics, by brute force over sets of assignments: ``(all claims true, open set)``.

    A claim's cases are the assignments extending its roles (``inconsistent``) or giving its person the
    other role (``role``), that also satisfy its premises; each premise must hold in every open
    assignment, and every cited statement must be violated in every case; the cases are then ruled
    out. An inconsistency citing no statement is false; a role claim with no citation is prose;
    ``by elimination`` needs every open assignment to give the role. Repeats (same kind and roles)
    fail. The first element is also False when no claim counts.
    """
    n = len(meta["names"])
    open_ = set(_rows(n))
    seen, counted = set(), 0
    for claim in claims:
        kind, roles, cites, given, elim = claim
        if kind == "role" and not cites and not elim:
            continue  # prose
        counted += 1
        key = (kind, frozenset(roles.items()))
        if key in seen:
            return False, open_
        seen.add(key)
        if kind == "consistent":
            if len(roles) != n or not _is_consistent(meta, tuple(roles[i] for i in range(n))):
                return False, open_
            continue
        if kind == "role" and elim:
            ((person, role),) = roles.items()
            if any(a[person] != role for a in open_):
                return False, open_
            continue
        if not cites or any(p in roles for p, _ in given):
            return False, open_
        if any(any(a[p] != r for a in open_) for p, r in given):
            return False, open_
        if kind == "inconsistent":
            cases = {a for a in _rows(n) if all(a[i] == r for i, r in roles.items())}
        else:
            ((person, role),) = roles.items()
            cases = {a for a in _rows(n) if a[person] != role}
        cases = {a for a in cases if all(a[p] == r for p, r in given)}
        if not all(_violated(meta, a, i) for i in cites for a in cases):
            return False, open_
        open_ -= cases
    return counted > 0, open_


def _certifies(meta, claims, answer) -> bool:
    ok, open_ = _model(meta, claims)
    return ok and open_ == {tuple(answer)}


_T_LEAD_RE = re.compile(r"\s*(?:[-*]\s*)?(?:(?:Row|Case|Step) \d+: )?(?:(?:so|thus|hence|therefore) )?")
_T_ASSIGN_RE = re.compile(r"assignment \{([^}]*)\} is (in)?consistent(.*)")
_T_ROLE_RE = re.compile(r"(\w+) is an? (\w+)(.*)")
_T_CITE_RE = re.compile(r"(\w+)'s (?:statement|claim)|statement of (\w+)")
_T_GIVEN_RE = re.compile(r"\b(?:given|since|as) (.*)")
_T_PREMISE_RE = re.compile(r"(\w+)(?: is an? |=)(\w+)")
_T_ELIM_RE = re.compile(r"by elimination|(?:by|from) the (?:claims|cases|steps|rows) above")


def _read_claims(derivation: str, meta) -> list[_C]:
    """The claims of a gold derivation, read with the test's own (narrower) patterns (bare role
    sentences are prose and left out)."""
    names = [str(x).casefold() for x in meta["names"]]
    terms = meta.get("knight_knave_terms") or {"knight": "knight", "knave": "knave"}
    roles = {"knight": True, "knave": False, terms["knight"]: True, terms["knave"]: False}
    claims = []
    for line in derivation.splitlines():
        body = line[_T_LEAD_RE.match(line).end() :].rstrip(".")
        assign, role = _T_ASSIGN_RE.fullmatch(body), _T_ROLE_RE.fullmatch(body)
        tail = (assign or role).group(3) if (assign or role) else ""
        premises = _T_GIVEN_RE.search(tail)
        statements = tail[: premises.start()] if premises else tail
        cites = tuple(names.index((a or b).casefold()) for a, b in _T_CITE_RE.findall(statements))
        given = tuple(
            (names.index(p.casefold()), roles[r])
            for p, r in _T_PREMISE_RE.findall(premises.group(1) if premises else "")
        )
        elim = bool(_T_ELIM_RE.search(tail))
        if assign:
            pairs = [re.split(r"\s*[:=]\s*", item.strip()) for item in assign.group(1).split(",")]
            kind = "inconsistent" if assign.group(2) else "consistent"
            claims.append(_C(kind, {names.index(a.casefold()): roles[b] for a, b in pairs}, cites, given))
        elif role and role.group(1).casefold() in names and (cites or elim):
            claims.append(
                _C("role", {names.index(role.group(1).casefold()): roles[role.group(2)]}, cites, given, elim)
            )
    return claims


def _make_trace(
    meta,
    *,
    lines=None,
    strategy="truth table over all assignments",
    derivation=None,
    assignment=None,
    answer=None,
) -> str:
    names = [str(x) for x in meta["names"]]
    solution = tuple(meta["solution"])
    assignment = solution if assignment is None else assignment
    if lines is None:
        lines = [f"- {name}: {_render(s, names)}" for name, s in zip(names, meta["statements"])]
    if derivation is None:
        derivation = _table_certificate(meta)
    terms = meta["knight_knave_terms"]
    if answer is None:
        parts = [f"{n} is {terms['a_knight'] if r else terms['a_knave']}" for n, r in zip(names, assignment)]
        answer = ", ".join(parts[:-1]) + ", and " + parts[-1] + "."
    label = ", ".join(f"{n}={'knight' if r else 'knave'}" for n, r in zip(names, assignment))
    return "\n".join(
        [
            "<think>",
            "STATEMENTS:",
            *lines,
            f"STRATEGY: {strategy}",
            "DERIVATION:",
            *derivation,
            f"ASSIGNMENT: {label}",
            "</think>",
            f"<answer>{answer}</answer>",
        ]
    )


def _failed(check) -> set[str]:
    return {name for name in CHECK_NAMES if not getattr(check, name)}


# --- statement grammar and truth tables ------------------------------------------------------------


def test_role_words_match_reasoning_gym():
    assert set(ROLE_WORDS) == VALID_ROLES


def test_truth_table_solver_matches_reasoning_gym_over_hundreds_of_puzzles():
    entries = _all_entries()
    assert len(entries) >= 300
    for entry in entries:
        meta = entry["metadata"]
        n = len(meta["names"])
        assert consistent_assignments(meta["statements"]) == [tuple(meta["solution"])]
        assert consistent_assignments(meta["statements"]) == KnightsKnavesDataset.find_solution(
            meta["statements"]
        )
        for statement in meta["statements"]:
            table = truth_table(statement, n)
            for bits in itertools.product([True, False], repeat=n):
                expected = _rg_value(statement, bits)
                assert evaluate_statement(statement, bits) == expected
                index = sum(1 << i for i, b in enumerate(bits) if b)
                assert bool((table >> index) & 1) == expected


def _statement_strategy(n: int):
    atoms = st.tuples(st.sampled_from(["telling-truth", "lying"]), st.integers(0, n - 1))

    def extend(children):
        return st.one_of(
            st.tuples(st.just("not"), children),
            st.builds(
                lambda op, xs: (op, *xs),
                st.sampled_from(["and", "or"]),
                st.lists(children, min_size=2, max_size=3),
            ),
            st.builds(lambda op, a, b: (op, a, b), st.sampled_from(["->", "<=>"]), children, children),
        )

    return st.recursive(atoms, extend, max_leaves=10)


@st.composite
def _puzzles(draw):
    n = draw(st.integers(1, 4))
    statements = [draw(_statement_strategy(n)) for _ in range(n)]
    return n, statements


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_puzzles())
def test_bitmask_tables_match_direct_evaluation_on_random_statements(puzzle):
    n, statements = puzzle
    for statement in statements:
        table = truth_table(statement, n)
        for bits in itertools.product([True, False], repeat=n):
            index = sum(1 << i for i, b in enumerate(bits) if b)
            assert (
                bool((table >> index) & 1)
                == evaluate_statement(statement, bits)
                == _rg_value(statement, bits)
            )
    assert consistent_assignments(statements) == KnightsKnavesDataset.find_solution(statements)


def test_normalize_statement_accepts_json_numpy_and_digit_strings():
    raw = ["->", [np.str_("telling-truth"), np.int64(0)], ["lying", "1"]]
    assert normalize_statement(raw, 2) == ("->", ("telling-truth", 0), ("lying", 1))
    nested = json.loads(json.dumps(("and", ("not", ("lying", 1)), ("telling-truth", 0), ("lying", 1))))
    assert normalize_statement(nested, 2) == (
        "and",
        ("not", ("lying", 1)),
        ("telling-truth", 0),
        ("lying", 1),
    )


@pytest.mark.parametrize(
    ("statement", "match"),
    [
        (("lying", 2), "out of range"),
        (("lying", True), "integer"),
        (("lying", "x"), "integer"),
        (("xor", ("lying", 0), ("lying", 1)), "unknown statement operator"),
        (("->", ("lying", 0)), "exactly two operands"),
        (("not",), "exactly one operand"),
        ("lying", "non-empty tuple"),
        ((), "non-empty tuple"),
    ],
)
def test_normalize_statement_rejects_bad_grammar(statement, match):
    with pytest.raises(ValueError, match=match):
        normalize_statement(statement, 2)


def test_normalize_statement_caps_depth_without_recursion_error():
    deep = ("telling-truth", 0)
    for _ in range(5000):
        deep = ("not", deep)
    with pytest.raises(ValueError, match="nested deeper"):
        normalize_statement(deep, 1)


# --- formula syntax --------------------------------------------------------------------------------

META2 = {
    "names": ["Ava", "Noah"],
    "statements": [("not", ("lying", 1)), ("->", ("telling-truth", 0), ("telling-truth", 1))],
    "solution": [True, True],
    "knight_knave_terms": {
        "knight": "hero",
        "knave": "villain",
        "a_knight": "a hero",
        "a_knave": "a villain",
    },
}
A, B = ("telling-truth", 0), ("telling-truth", 1)
NA, NB = ("lying", 0), ("lying", 1)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("knight(Ava)", A),
        ("KNAVE(noah)", NB),
        ("hero(Ava) and villain(Noah)", ("and", A, NB)),
        ("knight(Ava) or knight(Noah) and knave(Ava)", ("or", A, ("and", B, NA))),
        ("not knight(Ava) and knight(Noah)", ("and", ("not", A), B)),
        ("not (knight(Ava) and knight(Noah))", ("not", ("and", A, B))),
        ("knight(Ava) -> knight(Noah) -> knave(Ava)", ("->", A, ("->", B, NA))),
        ("knight(Ava) <-> knight(Noah) <-> knave(Ava)", ("<=>", ("<=>", A, B), NA)),
        ("knight(Ava) or knight(Noah) -> knave(Ava)", ("->", ("or", A, B), NA)),
        ("knight(Ava) -> knight(Noah) <-> knave(Ava)", ("<=>", ("->", A, B), NA)),
        ("~hero(Ava) | ¬villain(Noah) ∨ !knight(Ava)", ("or", ("not", A), ("not", NB), ("not", A))),
        ("knight(Ava) ∧ knight(Noah) && knight(Ava) & knave(Noah)", ("and", A, B, A, NB)),
        ("knight(Ava) implies knight(Noah)", ("->", A, B)),
        ("knight(Ava) => knight(Noah)", ("->", A, B)),
        ("knight(Ava) → knight(Noah)", ("->", A, B)),
        ("knight(Ava) iff knight(Noah)", ("<=>", A, B)),
        ("knight(Ava) <=> knight(Noah)", ("<=>", A, B)),
        ("knight(Ava) ↔ knight(Noah)", ("<=>", A, B)),
        ("((knight( Ava )))", A),
    ],
)
def test_parse_formula_hand_cases(text, expected):
    statement, reason = parse_kk_formula(text, META2)
    assert reason is None
    assert statement == expected


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty"),
        ("knight(Zed)", "not a person"),
        ("saint(Ava)", "not a role"),
        ("knight(Ava) and", "expected"),
        ("(knight(Ava)", "expected 'rp'"),
        ("knight(Ava))", "unexpected"),
        ("knight(Ava) knight(Noah)", "unexpected"),
        ("knight(Ava) + knight(Noah)", "unexpected character"),
        ("Ava is a knight", "not a role"),
        ("knight()", "expected a name"),
    ],
)
def test_parse_formula_errors_return_reasons(text, reason):
    statement, why = parse_kk_formula(text, META2)
    assert statement is None
    assert reason in why


@settings(max_examples=80, deadline=None)
@given(
    _statement_strategy(3),
    st.sampled_from(sorted(OPERATOR_STYLES)),
    st.booleans(),
)
def test_format_then_parse_round_trips(statement, style, generic):
    meta = {
        "names": ["Ava", "Noah", "Mia"],
        "statements": [("lying", 1), ("lying", 2), ("telling-truth", 0)],
        "solution": [True, False, True],  # one of the two consistent assignments
        "knight_knave_terms": {"knight": "sage", "knave": "fool"},
    }
    text = format_kk_formula(statement, meta, style=style, generic_roles=generic)
    parsed, reason = parse_kk_formula(text, meta)
    assert reason is None, text
    assert parsed == statement


# --- metadata --------------------------------------------------------------------------------------


def test_metadata_accepts_json_round_trip_entry_and_datasets_column():
    import datasets

    entry = _entries(3, 2, 2, 5, 7)[0]
    meta = entry["metadata"]
    text = json.dumps(meta)
    column = datasets.Dataset.from_list([{"metadata": text}])[0]["metadata"]
    expected = KKPuzzle.from_metadata(meta)
    for form in (json.loads(text), text, column, entry, {"metadata": text}):
        puzzle = KKPuzzle.from_metadata(form)
        assert puzzle.statements == expected.statements
        assert puzzle.solution == tuple(meta["solution"])
        assert puzzle.names == tuple(str(n) for n in meta["names"])
    trace = gold_kk_trace(meta, 3)
    assert check_kk_trace(trace, text).passed and check_kk_trace(trace, entry).passed


def test_metadata_without_solution_uses_the_unique_consistent_assignment():
    meta = {k: v for k, v in META2.items() if k != "solution"}
    assert KKPuzzle.from_metadata(meta).solution == (True, True)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"solution": [True, False]}, "not consistent"),
        ({"solution": [True]}, "must hold 2 bools"),
        ({"names": ["Ava"]}, "must match"),
        ({"names": ["Ava", "ava"]}, "distinct"),
        ({"names": ["Ava", "Mary Ann"]}, "one word"),
        ({"names": ["Ava", "Hero"]}, "collide"),
        ({"statements": "knight"}, "list"),
        ({"knight_knave_terms": {"knight": "truthteller", "knave": "liar"}}, "reasoning-gym role words"),
        ({"knight_knave_terms": {"knight": "hero", "knave": "hero"}}, "distinct"),
        ({"knight_knave_terms": {"knight": "knave", "knave": "knight"}}, "ambiguous"),
    ],
)
def test_bad_metadata_raises_value_error_naming_the_fix(change, match):
    with pytest.raises(ValueError, match=match):
        KKPuzzle.from_metadata({**META2, **change})


def test_metadata_without_unique_solution_and_no_listed_solution_raises():
    meta = {"names": ["Ava", "Noah"], "statements": [A, B]}  # "I am a knight" twice: 4 solutions
    with pytest.raises(ValueError, match="4 consistent assignments"):
        KKPuzzle.from_metadata(meta)
    with pytest.raises(ValueError, match="not valid JSON"):
        KKPuzzle.from_metadata("{not json")
    with pytest.raises(ValueError, match="lacks 'statements'"):
        KKPuzzle.from_metadata({"names": ["Ava"]})


# --- answers: reasoning-gym's own format and grader -------------------------------------------------


def test_oracle_answer_reproduces_reasoning_gym_and_scores_like_it():
    rng = random.Random(0)
    dataset = reasoning_gym.create_dataset("knights_knaves", size=1, seed=0)
    for entry in _all_entries(20):
        meta = entry["metadata"]
        assert kk_oracle_answer(meta) == entry["answer"]
        assert kk_score_answer(entry["answer"], meta) == 1.0
        flipped = [not r if rng.random() < 0.5 else r for r in meta["solution"]]
        candidate = kk_oracle_answer(meta, flipped)
        assert kk_score_answer(candidate, meta) == dataset.score_answer(candidate, entry)
    assert kk_score_answer(None, META2) == 0.0
    assert kk_score_answer("x" * 10_000, META2) == 0.0


def test_parse_assignment_forms():
    assert parse_kk_assignment("Ava=knight, Noah=villain", META2) == ((True, False), None)
    assert parse_kk_assignment("noah: hero; AVA is a knave.", META2) == ((False, True), None)
    assert parse_kk_assignment("Ava is a hero and Noah is a hero", META2) == ((True, True), None)
    assert parse_kk_assignment("- Ava = knave\n- Noah = knave", META2) == ((False, False), None)
    for text, reason in [
        ("Ava=knight", "no role for Noah"),
        ("Ava=knight, Noah=knave, Ava=knave", "assigned twice"),
        ("Ava=knight, Zed=knave", "not a person"),
        ("Ava=knight, Noah=liar", "not a role"),
        ("Ava=knight, Noah", "not 'Name=role'"),
    ]:
        assignment, why = parse_kk_assignment(text, META2)
        assert assignment is None and reason in why


# --- gold traces -----------------------------------------------------------------------------------


def test_gold_traces_pass_every_check_for_hundreds_of_puzzles_and_seeds():
    entries = _all_entries(40)
    n_traces = 0
    for k, entry in enumerate(entries):
        meta = entry["metadata"]
        for seed in (k, k + 10_000):
            trace = gold_kk_trace(meta, seed)
            check = check_kk_trace(trace, meta)
            assert check.passed, (check.reasons, trace)
            assert check.answer_correct and check.score == 1.0
            assert kk_cot_correct(trace, meta)
            assert check.assignment == tuple(meta["solution"])
            derivation = kk.parse_kk_trace(trace).slots["DERIVATION"]
            assert len([line for line in derivation.splitlines() if line.strip()]) >= 2
            n_traces += 1
    assert n_traces >= 300


_CLAIM_RE = re.compile(r"(\w+)'s claim (true|false)\b")


def _verify_gold_derivation(trace: str, meta) -> tuple[int, set[str]]:
    """Replay a gold derivation with the test's own reader and brute-force semantics.

    Every claim must hold and the claims must leave exactly the solution open. Prose truth values
    ("Noah's claim false") written just before a claim must hold under every completion of that
    claim's assignment. Returns the number of claims and the claim kinds seen.
    """
    derivation = kk.parse_kk_trace(trace).slots["DERIVATION"]
    claims = _read_claims(derivation, meta)
    assert claims and _certifies(meta, claims, meta["solution"]), derivation
    n = len(meta["names"])
    names = [str(x).casefold() for x in meta["names"]]
    lines = derivation.splitlines()
    for prose, nxt in itertools.pairwise(lines):
        (claim,) = _read_claims(nxt, meta) or [None]
        if claim is None or claim.kind == "role" or _read_claims(prose, meta):
            continue
        fixed = {**claim.roles, **dict(claim.given)}
        completions = [a for a in _rows(n) if all(a[i] == r for i, r in fixed.items())]
        for name, value in _CLAIM_RE.findall(prose):
            i = names.index(name.casefold())
            assert all(_rg_value(meta["statements"][i], c) == (value == "true") for c in completions), prose
    seen = (
        {c.kind for c in claims} | {"given" for c in claims if c.given} | {"elim" for c in claims if c.elim}
    )
    return len(claims), seen


def test_gold_derivations_are_certificates_under_an_independent_replay():
    n_claims, kinds = 0, set()
    for k, entry in enumerate(_all_entries(15) + list(_entries(5, 2, 2, 8, 5))):
        for seed in range(3):
            count, seen = _verify_gold_derivation(
                gold_kk_trace(entry["metadata"], 100 * k + seed), entry["metadata"]
            )
            n_claims += count
            kinds |= seen
    assert n_claims > 1000
    assert kinds == {"inconsistent", "consistent", "role", "given", "elim"}


def test_gold_traces_pass_on_thousands_of_puzzles_of_sizes_two_to_five():
    # 2,000 puzzles (500 per size, two depth/width settings each), two wordings each: every trace
    # scores 6/6 and is replayed under the test's own claim semantics
    kinds, n_traces = Counter(), 0
    for n in (2, 3, 4, 5):
        for depth, width in ((2, 2), (3, 2)):
            for k, entry in enumerate(_entries(n, depth, width, 250, 5_000 + 10 * n + depth)):
                meta = entry["metadata"]
                puzzle = kk.kk_puzzle(meta)
                for seed in (k, k + 50_000):
                    trace = gold_kk_trace(puzzle, seed)
                    check = check_kk_trace(trace, puzzle)
                    assert check.passed, (check.reasons, trace)
                    kinds.update(_verify_gold_derivation(trace, meta)[1])
                    n_traces += 1
    assert n_traces == 4_000
    assert set(kinds) == {"inconsistent", "consistent", "role", "given", "elim"}


def test_gold_traces_for_larger_puzzles_pass_or_refuse_clearly():
    for entry in _entries(5, 2, 2, 6, 9) + _entries(6, 2, 2, 4, 9):
        assert check_kk_trace(gold_kk_trace(entry["metadata"], 0), entry["metadata"]).passed
    names = [f"P{i}" for i in range(12)]
    # Everyone says "P11 is a knight"; P11 says "P11 is a knight or a knave" (so P11 must be a knight).
    # Case analysis in name order settles nothing before P11: 2^12 leaves, over the caps. A chain of
    # role claims settles P11 by P11's statement, then everyone else by their own: short.
    meta = {
        "names": names,
        "statements": [("telling-truth", 11)] * 11 + [("or", ("telling-truth", 11), ("lying", 11))],
        "solution": [True] * 12,
    }
    outcomes = set()
    for seed in range(12):
        try:
            trace = gold_kk_trace(meta, seed)
        except ValueError as err:
            assert "exceeds the checker's caps" in str(err)
            outcomes.add("refused")
        else:
            assert check_kk_trace(trace, meta).passed
            outcomes.add("passed")
    assert outcomes == {"refused", "passed"}
    two = {"names": ["Ava", "Noah"], "statements": [A, B]}  # "I am a knight" twice: 4 consistent assignments
    with pytest.raises(ValueError, match="4 consistent assignments"):
        gold_kk_trace({**two, "solution": [True, True]}, 0)


def test_gold_traces_are_deterministic_and_varied():
    meta = next(
        e["metadata"]
        for e in _entries(3, 3, 2, 20, 11)
        if any(s[0] in ("->", "<=>") for s in e["metadata"]["statements"])
    )
    assert gold_kk_trace(meta, 5) == gold_kk_trace(meta, random.Random(5))
    traces = {gold_kk_trace(meta, seed) for seed in range(40)}
    assert len(traces) >= 30
    strategies = {kk.parse_kk_trace(t).slots["STRATEGY"] for t in traces}
    assert len(strategies) >= 4
    restatements = [kk.parse_kk_trace(t).slots["STATEMENTS"] for t in traces]
    spellings = {op for op in ("->", "<->", "→", "↔", "implies", "iff") for r in restatements if op in r}
    assert len(spellings) >= 3


def test_checker_accepts_conversational_completions():
    trace = gold_kk_trace(META2, 1)
    assert check_kk_trace([{"role": "assistant", "content": trace}], META2).passed


def test_prompt_instructions_describe_the_slots_and_their_example_passes():
    text = kk_prompt_instructions()
    for slot in ("STATEMENTS:", "STRATEGY:", "DERIVATION:", "ASSIGNMENT:", "<think>", "<answer>"):
        assert slot in text
    example = text[text.rindex("<think>") :]
    assert check_kk_trace(example, kk_gold._EXAMPLE_METADATA).passed
    # The prompt teaches every claim form (with citations), and its example uses them.
    for kind in ("is inconsistent:", "is consistent", "Ava is a knight", ", given ", "by elimination"):
        assert kind in text[: text.rindex("<think>")] and kind in example
    kinds = {
        c.kind
        for c in _read_claims(kk.parse_kk_trace(example).slots["DERIVATION"], kk_gold._EXAMPLE_METADATA)
    }
    assert kinds == {"inconsistent", "consistent", "role"}
    assert "one answer" in text.lower()


def test_module_docstring_example_trace_passes():
    doc = kk.__doc__
    block = doc[doc.index("    <think>") : doc.index("</answer>") + len("</answer>")]
    example = "\n".join(line[4:] for line in block.splitlines())
    meta = {
        "names": ["Amelia", "Elizabeth"],
        "statements": [("not", ("lying", 1)), ("->", ("telling-truth", 0), ("telling-truth", 1))],
        "solution": [True, True],
        "knight_knave_terms": {"knight": "hero", "knave": "villain"},
    }
    check = check_kk_trace(example, meta)
    assert check.passed, check.reasons
    claims = _read_claims(kk.parse_kk_trace(example).slots["DERIVATION"], meta)
    assert {c.kind for c in claims} == {"inconsistent", "consistent", "role"}
    assert any(c.given for c in claims) and any(c.elim for c in claims)


# --- the checker on hand-made and corrupted traces --------------------------------------------------


def _sample_entries(count: int = 60) -> list[dict]:
    entries = _all_entries(40)
    return random.Random(1).sample(entries, count)


def test_hand_written_faithful_trace_passes_with_different_but_equivalent_wording():
    for entry in _sample_entries():
        meta = entry["metadata"]
        check = check_kk_trace(_make_trace(meta), meta)
        assert check.passed, check.reasons


def test_double_negated_restatement_is_still_faithful():
    names = ["Ava", "Noah"]
    lines = [
        f"- Ava: not not ({_render(META2['statements'][0], names)})",
        "- Noah: knave(Ava) or knight(Noah)",  # A -> B written as ~A | B
    ]
    assert check_kk_trace(_make_trace(META2, lines=lines), META2).passed


def test_wrong_restatement_fails_statements_and_consistency_only():
    for entry in _sample_entries():
        meta = entry["metadata"]
        names = [str(x) for x in meta["names"]]
        lines = [f"- {n}: {_render(s, names)}" for n, s in zip(names, meta["statements"])]
        lines[0] = f"- {names[0]}: not ({_render(meta['statements'][0], names)})"
        check = check_kk_trace(_make_trace(meta, lines=lines), meta)
        # Negating a claim flips its truth under the solution, so the solution no longer fits it.
        assert _failed(check) == {"statements", "consistent"}, check.reasons
        assert check.answer_correct
        assert any(r.startswith("statements:") and names[0] in r for r in check.reasons)


def test_swapped_speakers_fail_exactly_when_the_claims_differ():
    seen = {True: 0, False: 0}
    for entry in _sample_entries():
        meta = entry["metadata"]
        names = [str(x) for x in meta["names"]]
        statements = meta["statements"]
        n = len(names)
        lines = [f"- {n_}: {_render(s, names)}" for n_, s in zip(names, statements)]
        lines[0], lines[1] = (
            f"- {names[0]}: {_render(statements[1], names)}",
            f"- {names[1]}: {_render(statements[0], names)}",
        )
        check = check_kk_trace(_make_trace(meta, lines=lines), meta)
        same = _equivalent(statements[0], statements[1], n)
        assert check.statements == same
        seen[same] += 1
    assert seen[False] > 0


def test_swapped_names_inside_claims_fail_exactly_when_meaning_changes():
    def swap(statement):
        if statement[0] in ("telling-truth", "lying"):
            return (statement[0], {0: 1, 1: 0}.get(statement[1], statement[1]))
        return (statement[0], *(swap(s) for s in statement[1:]))

    changed = 0
    for entry in _sample_entries():
        meta = entry["metadata"]
        names = [str(x) for x in meta["names"]]
        n = len(names)
        swapped = [swap(s) for s in meta["statements"]]
        lines = [f"- {n_}: {_render(s, names)}" for n_, s in zip(names, swapped)]
        check = check_kk_trace(_make_trace(meta, lines=lines), meta)
        faithful = all(_equivalent(a, b, n) for a, b in zip(swapped, meta["statements"]))
        assert check.statements == faithful
        changed += not faithful
    assert changed > 0


def test_wrong_assignment_fails_solution_and_consistency_but_answer_matches_it():
    rng = random.Random(2)
    for entry in _sample_entries():
        meta = entry["metadata"]
        wrong = list(meta["solution"])
        j = rng.randrange(len(wrong))
        wrong[j] = not wrong[j]
        check = check_kk_trace(_make_trace(meta, assignment=tuple(wrong)), meta)
        # The faithful restatements have a unique consistent assignment (the solution), which is
        # also the one the derivation certifies.
        assert _failed(check) == {"solution", "consistent", "derivation"}, check.reasons
        assert not check.answer_correct
        assert check.assignment == tuple(wrong)


def test_answer_mismatch_fails_answer_derivation_and_solution():
    # as for causal traces (RESULT != <answer>): a certificate of an ASSIGNMENT that is not the
    # answer certifies nothing, so the trace keeps only statements, strategy and consistent (3/6)
    rng = random.Random(3)
    for entry in _sample_entries():
        meta = entry["metadata"]
        other = list(meta["solution"])
        j = rng.randrange(len(other))
        other[j] = not other[j]
        terms = meta["knight_knave_terms"]
        parts = [
            f"{n} is {terms['a_knight'] if r else terms['a_knave']}" for n, r in zip(meta["names"], other)
        ]
        check = check_kk_trace(_make_trace(meta, answer=", and ".join(parts)), meta)
        assert _failed(check) == {"answer", "derivation", "solution"}, check.reasons
        assert check.total == 3
        assert not check.answer_correct
        assert not kk_cot_correct(_make_trace(meta, answer=", and ".join(parts)), meta)


def test_answer_in_generic_words_for_a_puzzle_with_its_own_terms_fails_answer():
    entry = next(e for e in _all_entries(20) if e["metadata"]["knight_knave_terms"]["knight"] != "knight")
    meta = entry["metadata"]
    parts = [f"{n} is {'a knight' if r else 'a knave'}" for n, r in zip(meta["names"], meta["solution"])]
    check = check_kk_trace(_make_trace(meta, answer=", ".join(parts)), meta)
    assert _failed(check) == {"answer", "derivation", "solution"}
    assert not check.answer_correct


def test_assignment_consistent_with_unfaithful_restatements_is_caught_by_the_other_checks():
    # "I am a knight" for everyone: every assignment is consistent with these restatements.
    for entry in _sample_entries(20):
        meta = entry["metadata"]
        names = [str(x) for x in meta["names"]]
        lines = [f"- {name}: knight({name})" for name in names]
        wrong = tuple(not r for r in meta["solution"])
        check = check_kk_trace(_make_trace(meta, lines=lines, assignment=wrong), meta)
        assert check.consistent
        assert not check.statements and not check.solution
        assert not check.passed


@pytest.mark.parametrize(
    ("kwargs", "failing"),
    [
        ({"strategy": "I just know it"}, {"strategy"}),
        ({"strategy": ""}, {"strategy"}),
        ({"derivation": ["- Zed=knight, so the rest follows"]}, {"derivation"}),
        ({"derivation": ["- nobody is mentioned here"]}, {"derivation"}),
        ({"derivation": ["- Ava=saint, Noah=knight"]}, {"derivation"}),
        ({"derivation": ["- villain(Bob) would follow"]}, {"derivation"}),
        ({"derivation": []}, {"derivation"}),
        ({"lines": ["- Ava: not villain(Noah)"]}, {"statements", "consistent"}),
        (
            {"lines": ["- Ava: not villain(Noah)", "- Ava: knight(Ava)", "- Noah: knight(Noah)"]},
            {"statements", "consistent"},
        ),
        ({"lines": ["- Ava: not villain(Noah)", "- Noah: Ava is a knight"]}, {"statements", "consistent"}),
        (
            {
                "lines": [
                    "- Ava: not villain(Noah)",
                    "- Noah: knight(Ava) -> knight(Noah)",
                    "- Zed: knight(Ava)",
                ]
            },
            {"statements", "consistent"},
        ),
    ],
)
def test_each_slot_failure_hits_its_own_check(kwargs, failing):
    check = check_kk_trace(_make_trace(META2, **kwargs), META2)
    assert _failed(check) == failing, check.reasons
    assert {r.split(":")[0] for r in check.reasons} == failing


def test_missing_and_duplicated_slots_fail_closed():
    good = _make_trace(META2)
    no_assignment = "\n".join(line for line in good.splitlines() if not line.startswith("ASSIGNMENT"))
    check = check_kk_trace(no_assignment, META2)
    assert _failed(check) == {"consistent", "solution", "answer"}
    assert check.answer_correct  # the final answer alone is still right
    doubled = good.replace("STRATEGY:", "STRATEGY: case analysis\nSTRATEGY:")
    assert _failed(check_kk_trace(doubled, META2)) == {"strategy"}
    outside = good.replace("<think>", "").replace("</think>", "")
    check = check_kk_trace(outside, META2)
    assert check.total == 0 and check.answer_correct
    assert all("no <think>" in r for r in check.reasons)
    no_answer = good.split("<answer>")[0]
    check = check_kk_trace(no_answer, META2)
    assert _failed(check) == {"answer", "derivation", "solution"} and not check.answer_correct


def test_markdown_headers_and_single_line_statements_are_read():
    trace = (
        "<think>\n**STATEMENTS:** Ava: not villain(Noah); Noah: hero(Ava) -> hero(Noah)\n"
        "## Strategy: case analysis\n**DERIVATION:**\n1. Suppose Ava=knave: then Noah=villain, contradiction\n"
        "2. assignment {Ava: villain, Noah: villain} is inconsistent: Noah's statement\n"
        "3. assignment {Ava: villain, Noah: hero} is inconsistent: Ava's statement\n"
        "4. So Ava is a hero (by elimination).\n5. Noah is a hero, by Ava's statement, given Ava=hero\n"
        "Assignment: Ava is a hero, Noah is a hero\n</think>\n<answer>Ava is a hero, and Noah is a hero</answer>"
    )
    check = check_kk_trace(trace, META2)
    assert check.passed, check.reasons


def test_as_dict_is_json_serialisable():
    check = check_kk_trace(_make_trace(META2), META2)
    data = json.loads(json.dumps(check.as_dict()))
    assert data["total"] == 6 and data["assignment"] == [True, True] and data["reasons"] == []


# --- the derivation is a certificate: claims checked by truth table -----------------------------------


def _with_derivation(meta, derivation, puzzle=None, **kwargs):
    # ``puzzle``: the checked puzzle of ``meta``, to share its memo across many traces
    return check_kk_trace(_make_trace(meta, derivation=derivation, **kwargs), puzzle or meta)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("assignment {Noah=villain} is inconsistent: Ava's statement", ("inconsistent", ((1, False),), (0,))),
        (
            "2) so assignment {noah: HERO, ava: knave} is inconsistent (by Noah's statement).",
            ("inconsistent", ((1, True), (0, False)), (1,)),
        ),
        (
            "Row 3: assignment {Ava: knave} is inconsistent, contradicts the statement of Noah",
            ("inconsistent", ((0, False),), (1,)),
        ),
        (
            "assignment {Ava: knave} is inconsistent: Ava's statement and Noah's claim",
            ("inconsistent", ((0, False),), (0, 1)),
        ),
        (
            "assignment {Noah: villain} is inconsistent: Ava's statement, given Ava is a hero",
            ("inconsistent", ((1, False),), (0,), ((0, True),)),
        ),
        (
            "- assignment {Noah: knave} is inconsistent (violates Ava's claim, since Ava=knight)",
            ("inconsistent", ((1, False),), (0,), ((0, True),)),
        ),
        (
            "* thus assignment {Ava: hero, Noah: hero} is consistent.",
            ("consistent", ((0, True), (1, True)), ()),
        ),
        ("Therefore, Noah is a villain (Ava's statement)", ("role", ((1, False),), (0,))),
        (
            "Noah is a hero: Ava's statement, as Ava is a knight",
            ("role", ((1, True),), (0,), ((0, True),)),
        ),
        ("so Ava is a hero, by elimination", ("role", ((0, True),), (), (), True)),
        ("hence noah is a Knave (from the claims above)", ("role", ((1, False),), (), (), True)),
        # a bare verdict about a person is prose: it certifies nothing
        ("Ava is a knight", None),
        ("hence noah is a Knave", None),
        ("Suppose Ava is a knight.", None),
        ("If Ava is a knight, then Noah is a knight", None),
        ("Ava is a knight if Noah is one", None),
        ("Ava is a knight or a knave", None),
        ("so he is a knave", None),
        ("Ava is not a knight", None),
        ("Ava=knight, Noah=knave: Ava's claim false", None),
        ("the assignment works", None),
        # a bare inconsistency is a claim without its reason
        ("- assignment {Ava: knight, Noah: knave} is inconsistent", "cites no statement"),
        ("assignment {Ava: knave} is inconsistent, given Noah is a hero", "write the statement"),
        ("assignment {Ava: knave} is inconsistent by elimination", "write the statement"),
        (
            "assignment {Ava: knave} is inconsistent: Ava's statement or Noah's statement",
            "write the statement",
        ),
        ("Zed is a knight", "not in this puzzle"),
        ("assignment {Ava: knight, Zed: knave} is inconsistent", "not in this puzzle"),
        ("assignment {Ava: knight} is inconsistent: Zed's statement", "not in this puzzle"),
        ("Ava is a knight (by Zed's statement)", "not in this puzzle"),
        ("Ava is a knight: Noah's statement, given Zed is a knight", "not in this puzzle"),
        ("Ava is a knight: Noah's statement, given Noah is a saint", "not a role"),
        ("Ava is a knight: Noah's statement, given Noah=hero and Noah=villain", "both roles"),
        ("Ava is a knight: Noah's statement, given Ava is a hero", "own role as given"),
        (
            "assignment {Ava: knave} is inconsistent: Noah's statement, given Ava is a hero",
            "assigns them too",
        ),
        ("Ava is a saint", "not a role of this puzzle"),
        ("assignment {Ava: saint} is inconsistent", "not a role"),
        ("assignment {Ava: knight, Ava: knave} is inconsistent", "two roles"),
        ("assignment {} is inconsistent", "assigns no one"),
        ("assignment {Ava knight} is inconsistent", "is not 'Name: role'"),
        ("assignment {Ava: knight} works", "is not a claim"),
        ("assignment {Ava: knight, Noah: knight} is consistent: Ava's statement", "write nothing"),
        ("assignment {Ava: knight} is inconsistent because I say so", "write the statement"),
    ],
)
def test_claim_grammar(line, expected):
    claim, why = kk.parse_kk_claim(line, META2)
    if expected is None:
        assert (claim, why) == (None, None)
    elif isinstance(expected, str):
        assert claim is None and expected in why, why
    else:
        full = expected + ((), False)[len(expected) - 3 :]  # (kind, roles, cites, given, elimination)
        assert why is None and (claim.kind, claim.roles, claim.cites, claim.given, claim.elimination) == full


# META2: Ava says "Noah is a hero"; Noah says "if Ava is a hero, Noah is a hero"; solution: both heroes.
# Under each assignment (Ava, Noah) the contradicted statements are: (hero, hero) none;
# (hero, villain) Ava's; (villain, hero) Ava's; (villain, villain) Noah's.
@pytest.mark.parametrize(
    ("derivation", "certifies"),
    [
        (
            [
                "- assignment {Ava: villain, Noah: villain} is inconsistent: Noah's statement",
                "- assignment {Ava: villain, Noah: hero} is inconsistent: Ava's statement",
                "- so Ava is a hero, by elimination",
                "- Noah is a hero: Ava's statement, given Ava is a hero",
            ],
            True,
        ),
        (
            [
                "- assignment {Ava: villain, Noah: villain} is inconsistent: Noah's statement",
                "- so Ava is a hero (by Ava's statement)",  # (villain, villain) does not contradict Ava's
                "- Noah is a hero: Ava's statement, given Ava is a hero",
            ],
            False,
        ),
        (
            [
                "- assignment {Ava: villain, Noah: villain} is inconsistent",  # no reason given
                "- assignment {Ava: villain, Noah: hero} is inconsistent: Ava's statement",
                "- so Ava is a hero, by elimination",
                "- Noah is a hero: Ava's statement, given Ava is a hero",
            ],
            False,
        ),
        (["- Ava is a hero", "- Noah is a hero"], False),  # prose: no claim
        (["- Ava is a hero by elimination", "- Noah is a hero by elimination"], False),  # nothing ruled out
        (
            [
                "- assignment {Ava: villain} is inconsistent: Ava's statement and Noah's statement",
                "- Noah is a hero: Ava's statement, given Ava is a hero",
            ],
            False,  # (villain, villain) contradicts Noah's only, (villain, hero) Ava's only: each must do it all
        ),
        (
            [
                "- assignment {Noah: villain} is inconsistent: Ava's statement",  # (villain, villain) is Noah's
                "- assignment {Ava: villain, Noah: hero} is inconsistent: Ava's statement",
            ],
            False,
        ),
        (
            [
                "- Noah is a hero: Ava's statement, given Ava is a hero",  # the premise is not shown yet
                "- assignment {Ava: villain} is inconsistent: Ava's statement",
            ],
            False,
        ),
        (
            [
                "- assignment {Ava: hero, Noah: villain} is inconsistent: Ava's statement",
                "- assignment {Ava: villain, Noah: villain} is inconsistent: Noah's statement",
                "- Noah is a hero, by elimination",
                "- assignment {Ava: villain} is inconsistent: Ava's statement, given Noah is a hero",
            ],
            True,
        ),
        (
            [
                "- assignment {Ava: hero, Noah: villain} is inconsistent: Ava's statement",
                "- assignment {Ava: villain, Noah: villain} is inconsistent: Noah's statement",
                "- Noah is a hero, by elimination",
                "- assignment {Ava: villain} is inconsistent: Ava's statement",  # (villain, villain): not Ava's
            ],
            False,
        ),
        (["- assignment {Ava: hero, Noah: hero} is consistent"], False),  # true, but certifies nothing
        (["- assignment {Ava: villain, Noah: hero} is consistent"], False),  # false
    ],
)
def test_hand_certificates_on_a_two_person_puzzle(derivation, certifies):
    check = _with_derivation(META2, derivation)
    assert check.derivation is certifies, check.reasons
    assert _failed(check) == (set() if certifies else {"derivation"})
    claims = _read_claims("\n".join(derivation), META2)
    assert _certifies(META2, claims, META2["solution"]) is certifies  # the independent model agrees


def test_lines_that_only_name_the_people_fail():
    for entry in _sample_entries(20):
        meta = entry["metadata"]
        names = [str(x) for x in meta["names"]]
        label = ", ".join(f"{n}={'knight' if r else 'knave'}" for n, r in zip(names, meta["solution"]))
        for derivation in (
            [f"- consider {name}'s statement" for name in names],
            [f"- {label}: every claim matches, consistent", "- all other rows fail"],
            [" ".join(f"knight({n}) knave({n})" for n in names)],
        ):
            check = _with_derivation(meta, derivation)
            assert _failed(check) == {"derivation"}, check.reasons
            assert any("no claims" in r for r in check.reasons)


def test_a_correct_answer_with_any_false_claim_fails():
    rng = random.Random(4)
    made = 0
    for entry in _sample_entries(40):
        meta = entry["metadata"]
        n = len(meta["names"])
        solution = tuple(meta["solution"])
        wrong_row = rng.choice([a for a in _rows(n) if a != solution])
        person = rng.randrange(n)
        cite = (rng.randrange(n),)
        # False wherever they appear: no statement is contradicted by the solution.
        anywhere = [
            _C("inconsistent", dict(enumerate(solution)), cite),  # the solution is consistent
            _C("consistent", dict(enumerate(wrong_row))),  # a unique solution: nothing else is
            _C("role", {person: not solution[person]}, cite),  # the wrong role for someone
            _C("role", {person: not solution[person]}, (), (), True),  # the solution is never eliminated
        ]
        # False: it cites a statement that the row does not contradict.
        fits = [i for i in range(n) if not _violated(meta, wrong_row, i)]
        first = [_C("inconsistent", dict(enumerate(wrong_row)), (rng.choice(fits),))] if fits else []
        for false_claim, positions in [(c, (0, 2**n)) for c in anywhere] + [(c, (0,)) for c in first]:
            for position in positions:
                lines = _table_certificate(meta)
                claims = _read_claims("\n".join(lines), meta)
                lines.insert(position, _claim_line(meta, false_claim))
                claims.insert(position, false_claim)
                assert not _model(meta, claims)[0]  # independent expectation
                check = _with_derivation(meta, lines)
                assert _failed(check) == {"derivation"}, (false_claim, check.reasons)
                assert any("false claim" in r or "unsupported claim" in r for r in check.reasons), (
                    check.reasons
                )
                made += 1
    assert made >= 200


def test_true_claims_that_leave_alternatives_open_fail():
    rng = random.Random(5)
    for entry in _sample_entries(40):
        meta = entry["metadata"]
        lines = _table_certificate(meta)
        solution = tuple(meta["solution"])
        rows = _rows(len(meta["names"]))
        dropped = rng.choice([k for k, a in enumerate(rows) if a != solution])
        incomplete = lines[:dropped] + lines[dropped + 1 :]
        claims = [c for k, c in enumerate(_table_claims(meta)) if rows[k] != solution and k != dropped]
        ok, open_ = _model(meta, claims)
        assert ok and open_ == {solution, rows[dropped]}  # true claims, two assignments open
        for derivation in (incomplete, [lines[rows.index(solution)]]):
            check = _with_derivation(meta, derivation)
            assert _failed(check) == {"derivation"}, check.reasons
            assert any("incomplete certificate" in r for r in check.reasons), check.reasons


def test_claims_about_people_or_roles_outside_the_puzzle_fail():
    for entry in _sample_entries(20):
        meta = entry["metadata"]
        own = {meta["knight_knave_terms"]["knight"], meta["knight_knave_terms"]["knave"], "knight", "knave"}
        foreign = sorted(ROLE_SET - own)[0]
        first = str(meta["names"][0])
        for extra in (
            "- Zed is a knight",
            "- assignment {Zed: knave} is inconsistent",
            f"- assignment {{{first}: knight, Zed: knave}} is inconsistent",
            f"- assignment {{{first}: knave}} is inconsistent: Zed's statement",
            f"- {first} is a {foreign}",
            f"- {first} is a knight: {first}'s statement, given Zed is a knave",
            "- so Zed=knight",
        ):
            check = _with_derivation(meta, [*_table_certificate(meta), extra])
            assert _failed(check) == {"derivation"}, (extra, check.reasons)
            assert any(
                "not in this puzzle" in r or "not a role" in r or "is not knight/knave" in r
                for r in check.reasons
            )


def test_a_wrong_answer_fails_the_derivation_whatever_the_claims():
    rng = random.Random(6)
    for entry in _sample_entries(30):
        meta = entry["metadata"]
        n = len(meta["names"])
        solution = tuple(meta["solution"])
        wrong = rng.choice([a for a in _rows(n) if a != solution])
        attempts = {
            "certificate of the solution": _table_certificate(meta),
            "claims for the wrong answer": [
                _claim_line(
                    meta,
                    _C("inconsistent", dict(enumerate(a)), (0,))
                    if a != wrong
                    else _C("consistent", dict(enumerate(a))),
                )
                for a in _rows(n)
            ],
            "roles of the wrong answer": [
                _claim_line(meta, _C("role", {i: r}, (i,), tuple(enumerate(wrong[:i]))))
                for i, r in enumerate(wrong)
            ],
            "wrong answer by elimination": [
                _claim_line(meta, _C("role", {i: r}, (), (), True)) for i, r in enumerate(wrong)
            ],
        }
        for name, derivation in attempts.items():
            claims = _read_claims("\n".join(derivation), meta)
            assert not _certifies(meta, claims, wrong)  # independent expectation
            check = _with_derivation(meta, derivation, assignment=wrong)
            assert not check.derivation and not check.solution and not check.passed, name


def test_repeated_claims_fail():
    for entry in _sample_entries(20):
        meta = entry["metadata"]
        lines = _table_certificate(meta)
        names = [str(x) for x in meta["names"]]
        solution = tuple(meta["solution"])
        first = next(a for a in _rows(len(names)) if a != solution)
        bad = next(i for i in range(len(names)) if _violated(meta, first, i))
        reordered = ", ".join(
            f"{names[i]}={'knight' if first[i] else 'knave'}" for i in reversed(range(len(names)))
        )
        for derivation in (
            [*lines, lines[0]],  # the same line again
            [
                *lines,
                f"- so assignment {{{reordered}}} is inconsistent: {names[bad]}'s statement",
            ],  # same claim
            [lines[_rows(len(names)).index(first)]] * 50,
            lines + [_claim_line(meta, _C("role", {0: solution[0]}, (), (), True))] * 2,
        ):
            check = _with_derivation(meta, derivation)
            assert _failed(check) == {"derivation"}
            assert any("repeated" in r for r in check.reasons), check.reasons


def test_role_claims_certify_only_when_each_cited_statement_does_the_work_given_its_premises():
    # one role claim per person, in solution order, citing the person's own statement and every
    # earlier conclusion: a certificate exactly when the model says so (sometimes, not always)
    outcomes = {True: 0, False: 0}
    for entry in _sample_entries(60):
        meta = entry["metadata"]
        solution = tuple(meta["solution"])
        claims = [_C("role", {i: r}, (i,), tuple(enumerate(solution[:i]))) for i, r in enumerate(solution)]
        expected = _certifies(meta, claims, solution)
        check = _with_derivation(meta, [_claim_line(meta, c) for c in claims])
        assert check.derivation == expected, check.reasons
        outcomes[expected] += 1
    assert outcomes[False] > 0 and outcomes[True] > 0


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**6))
def test_random_claim_sequences_match_the_brute_force_model(seed):
    rng = random.Random(seed)
    entry = rng.choice(_all_entries(10))
    meta = entry["metadata"]
    n = len(meta["names"])
    claims = []
    if rng.random() < 0.5:  # start from a complete certificate, shuffled
        claims = _table_claims(meta)
        rng.shuffle(claims)
    for _ in range(rng.randrange(0, 6)):
        kind = rng.choice(["inconsistent", "inconsistent", "role", "role", "consistent"])
        if kind == "role":
            roles = {rng.randrange(n): rng.random() < 0.5}
        elif kind == "consistent":
            roles = dict(enumerate(rng.choice([tuple(meta["solution"]), rng.choice(_rows(n))])))
        else:
            people = rng.sample(range(n), rng.randint(1, n))
            roles = {i: rng.random() < 0.5 for i in people}
        cites, given, elim = (), (), False
        if kind != "consistent":
            draw = rng.random()
            if draw < 0.7:
                cites = tuple(sorted(rng.sample(range(n), rng.randint(1, min(n, 2)))))
                others = [i for i in range(n) if i not in roles]
                if others and rng.random() < 0.4:
                    given = tuple(
                        (i, rng.random() < 0.5) for i in rng.sample(others, rng.randint(1, len(others)))
                    )
            elif draw < 0.85 and kind == "role":
                elim = True
        claims.insert(rng.randrange(len(claims) + 1), _C(kind, roles, cites, given, elim))
    assignment = tuple(meta["solution"]) if rng.random() < 0.8 else rng.choice(_rows(n))
    lines = [_claim_line(meta, c) for c in claims] or ["- no claims here"]
    check = _with_derivation(meta, lines, assignment=assignment)
    assert check.derivation == _certifies(meta, claims, assignment), (claims, check.reasons)


def test_huge_derivations_fail_quickly_without_raising():
    names = [f"P{i}" for i in range(12)]
    meta = {
        "names": names,
        "statements": [("lying", (i + 1) % 12) for i in range(12)],  # "the next person is a knave"
        "solution": [i % 2 == 0 for i in range(12)],
        "knight_knave_terms": {
            "knight": "knight",
            "knave": "knave",
            "a_knight": "a knight",
            "a_knave": "a knave",
        },
    }
    puzzle = KKPuzzle.from_metadata(meta)
    # True claims: P_i and P_(i+1) with the same role contradict P_i's statement, whoever else joins.
    role = {True: "knight", False: "knave"}
    distinct = {}
    for i in range(12):
        for j in set(range(12)) - {i, (i + 1) % 12}:
            for r in (True, False):
                for s in (True, False):
                    roles = ((i, r), ((i + 1) % 12, r), (j, s))
                    items = ", ".join(f"{names[k]}: {role[v]}" for k, v in roles)
                    cite = f": {names[i]}'s statement" if (i + j) % 2 else f" (the statement of {names[i]})"
                    distinct.setdefault(frozenset(roles), f"- assignment {{{items}}} is inconsistent{cite}")
    claims = sorted(distinct.values())
    assert len(claims) > kk.MAX_CLAIMS
    many = "\n".join(claims)
    one_mb_line = "- assignment {" + "P0: knight, " * 90_000 + "} is inconsistent"
    cases = {
        "one_megabyte_of_claims": (many * 20)[:1_000_000],
        "one_megabyte_line": one_mb_line,
        "one_megabyte_role_line": "- P0 is a knight" + " " * 1_000_000,
        "within_caps": many[: many.rindex("\n", 0, MAX_SLOT_CHARS - 10)],  # whole (true) claims
    }
    for name, derivation in cases.items():
        text = f"<think>\nDERIVATION:\n{derivation}\nASSIGNMENT: P0=knight\n</think><answer>x</answer>"
        for max_chars in (kk.MAX_TRACE_CHARS, 3_000_000):
            with cpu_clock() as clock:
                check = check_kk_trace(text, puzzle, max_chars=max_chars)
            assert clock.elapsed < 1.0, name
            assert not check.derivation and check.reasons
        with cpu_clock() as clock:
            remaining, why = certify_claims(derivation, puzzle)  # the claim checker alone, no slot cap
        assert clock.elapsed < 2.0, name
        if name == "within_caps":  # every claim true and cited, but most assignments are left open
            assert why is None and remaining.bit_count() > 1
        else:
            assert remaining is None and why
    assert "more than" in certify_claims(many, puzzle)[1]  # over MAX_CLAIMS distinct claims
    assert "longer than" in certify_claims(one_mb_line, puzzle)[1]


# --- red team: a policy that knows the answer and attacks the certificate (issue #30) ---------------
#
# Each attack below is the cheapest trace a policy could write around a known answer. Expectations
# come from the test-side model of the claim semantics (_model) and reasoning-gym's own evaluator,
# never from the checker. Before citations were checked, the enumeration template passed on every
# puzzle, one "so Name is a role" line per person on about half of them in some order, and a wrong
# <answer> with the right ASSIGNMENT scored 5/6 everywhere.


@functools.cache
def _red_team_puzzles(per_size: int = 100) -> tuple[dict, ...]:
    """``per_size`` reasoning-gym puzzles of each size 2-5 (400 by default)."""
    return tuple(e["metadata"] for n in (2, 3, 4, 5) for e in _entries(n, 2, 2, per_size, 4_000 + n))


def _answer_text(meta, assignment) -> str:
    terms, names = meta["knight_knave_terms"], [str(x) for x in meta["names"]]
    parts = [f"{n} is {terms['a_knight'] if r else terms['a_knave']}" for n, r in zip(names, assignment)]
    return ", ".join(parts[:-1]) + ", and " + parts[-1] + "."


def _enumeration(meta, cite=lambda row: (), consistent_line=True) -> list[_C]:
    """Every full assignment but the answer claimed inconsistent (citing ``cite(row)``), and the
    answer claimed consistent: the template whose every line the checker alone could justify."""
    solution = tuple(meta["solution"])
    claims = [_C("inconsistent", dict(enumerate(a)), cite(a)) for a in _rows(len(solution)) if a != solution]
    return claims + ([_C("consistent", dict(enumerate(solution)))] if consistent_line else [])


def _irrelevant(meta, row) -> tuple[int, ...]:
    """A statement the row does not contradict (the first), or none when the row contradicts all."""
    return tuple(i for i in range(len(row)) if not _violated(meta, row, i))[:1]


def test_red_team_enumeration_without_citations_never_certifies():
    puzzles = _red_team_puzzles()
    full = 0
    for meta in puzzles:
        for consistent_line in (True, False):
            claims = _enumeration(meta, consistent_line=consistent_line)
            assert not _certifies(meta, claims, meta["solution"])  # independent expectation
            check = _with_derivation(meta, [_claim_line(meta, c) for c in claims])
            full += check.passed
            assert _failed(check) == {"derivation"}, check.reasons
            assert any("cites no statement" in r for r in check.reasons), check.reasons
    assert full == 0 and len(puzzles) == 400 and {len(m["names"]) for m in puzzles} == {2, 3, 4, 5}


def _first_violated(meta, row) -> tuple[int, ...]:
    """The first statement the row contradicts (the honest citation of an inconsistent row)."""
    return tuple(i for i in range(len(row)) if _violated(meta, row, i))[:1]


def test_red_team_enumeration_citing_irrelevant_or_all_statements_never_certifies():
    honest = irrelevant = everyone = 0
    for meta in _red_team_puzzles():
        n = len(meta["names"])
        puzzle = kk.kk_puzzle(meta)
        citations = {
            "honest": functools.partial(_first_violated, meta),
            "irrelevant": lambda row, meta=meta: _irrelevant(meta, row) or _first_violated(meta, row),
            "everyone": lambda row, n=n: tuple(range(n)),
        }
        for name, cite in citations.items():
            claims = _enumeration(meta, cite)
            expected = _certifies(meta, claims, meta["solution"])
            check = _with_derivation(meta, [_claim_line(meta, c) for c in claims], puzzle)
            assert check.passed == expected, (name, check.reasons)
            if name == "honest":  # exhaustive enumeration stays legal when every line cites its reason
                assert expected
                honest += 1
            elif name == "irrelevant":
                # a puzzle where some row leaves a statement uncontradicted gets a wrong citation
                wrong_cite = any(_irrelevant(meta, a) for a in _rows(n) if a != tuple(meta["solution"]))
                assert expected is not wrong_cite
                irrelevant += check.passed
            else:
                everyone += check.passed
    assert honest == 400 and irrelevant == 0 and everyone == 0


def test_red_team_one_role_line_per_person_in_every_order_never_certifies():
    # bare verdicts, "by elimination" before anything is eliminated, a statement that the person's
    # other role does not contradict, every statement at once: in every order of the people
    hits, tried, legal = Counter(), Counter(), 0
    for meta in _red_team_puzzles():
        n = len(meta["names"])
        solution = tuple(meta["solution"])
        puzzle = kk.kk_puzzle(meta)
        for order in itertools.permutations(range(n)):
            variants = {
                "bare": [_C("role", {i: solution[i]}) for i in order],
                "by elimination": [_C("role", {i: solution[i]}, (), (), True) for i in order],
                "every statement": [_C("role", {i: solution[i]}, tuple(range(n))) for i in order],
            }
            # the statements that do not rule out the person's other role (given nothing): irrelevant
            irrelevant = []
            for i in order:
                other = [a for a in _rows(n) if a[i] != solution[i]]
                spare = [j for j in range(n) if not all(_violated(meta, a, j) for a in other)]
                irrelevant.append(_C("role", {i: solution[i]}, tuple(spare[:1])) if spare else None)
            if all(irrelevant):
                variants["irrelevant statement"] = irrelevant
            for name, claims in variants.items():
                expected = _certifies(meta, claims, solution)
                assert not expected, (name, claims)  # independent expectation: never a certificate
                check = _with_derivation(meta, [_claim_line(meta, c) for c in claims], puzzle)
                assert not check.derivation and not check.passed, (name, check.reasons)
                tried[name] += 1
                hits[name] += check.passed
        # the honest version of the same template: each line cites the statement that does the work
        # and every earlier conclusion as its premises; it certifies exactly when the model says so
        claims = [_C("role", {i: r}, (i,), tuple(enumerate(solution[:i]))) for i, r in enumerate(solution)]
        passed = _with_derivation(meta, [_claim_line(meta, c) for c in claims], puzzle).passed
        assert passed == _certifies(meta, claims, solution)
        legal += passed
    assert sum(hits.values()) == 0 and min(tried.values()) >= 400, (hits, tried)
    assert legal > 0


def test_red_team_wrong_answer_with_the_right_assignment_scores_at_most_three():
    rng = random.Random(30)
    for k, meta in enumerate(_red_team_puzzles()):
        solution = tuple(meta["solution"])
        wrong = rng.choice([a for a in _rows(len(solution)) if a != solution])
        gold = gold_kk_trace(meta, k)
        trace = gold[: gold.rindex("<answer>")] + f"<answer>{_answer_text(meta, wrong)}</answer>"
        check = check_kk_trace(trace, meta)
        assert check.total <= 3 and not (check.derivation or check.solution or check.answer), check.reasons
        assert {"statements", "strategy", "consistent"} >= set(CHECK_NAMES) - _failed(check)
        assert not check.answer_correct


# hedges a policy could put around a known answer A: each offers a second answer B (or none)
_KK_HEDGES = (
    "{a} Or: {b}",
    "{a_} or vice versa.",
    "{a_}, or the other way round.",
    "Either {a_}, or {b}",
    "{a_} / {b}",
    "{a_} (or {b_})",
    "{a_}; otherwise {b}",
    "{a_}; alternatively {b}",
    "{a_}, unless {b_}",
    "{a_} (vice-versa possible).",
)


def test_red_team_hedged_answers_are_wrong_in_the_checker_the_scorer_and_the_outcome_reward():
    from faithgrpo.rewards.outcome import outcome_reward

    rg_score = reasoning_gym.get_score_answer_fn("knights_knaves")
    rng = random.Random(31)
    made = first_option = 0
    for k, entry in enumerate(_entries(2, 2, 2, 25, 77) + _entries(4, 2, 2, 25, 78)):
        meta = entry["metadata"]
        solution = tuple(meta["solution"])
        other = rng.choice([a for a in _rows(len(solution)) if a != solution])
        a, b = _answer_text(meta, solution), _answer_text(meta, other)
        gold = gold_kk_trace(meta, k)
        texts = [h.format(a=a, b=b, a_=a.rstrip("."), b_=b.rstrip(".")) for h in _KK_HEDGES]
        for hedge in texts:
            first_option += rg_score(hedge, entry) == 1.0  # reasoning-gym alone reads some as right
            trace = gold[: gold.rindex("<answer>")] + f"<answer>{hedge}</answer>"
            check = check_kk_trace(trace, meta)
            assert not check.passed and not check.answer and not check.answer_correct, (hedge, check.reasons)
            assert check.total <= 3, (hedge, check.reasons)
            assert kk_score_answer(hedge, meta) == 0.0
            row = json.dumps(entry)
            assert outcome_reward([trace], entry=[row]) == [0.0]
            made += 1
        # the hedge in the ASSIGNMENT slot: no usable assignment
        label = ", ".join(f"{n}={'knight' if r else 'knave'}" for n, r in zip(meta["names"], solution))
        for assignment in (
            f"{label} or vice versa",
            f"{label}; either that or all knaves",
            f"{label} / {label}",
        ):
            trace = (
                gold[: gold.index("ASSIGNMENT:")]
                + f"ASSIGNMENT: {assignment}\n</think>"
                + gold.split("</think>")[1]
            )
            check = check_kk_trace(trace, meta)
            assert check.assignment is None and not check.passed, (assignment, check.reasons)
    assert made == 50 * len(_KK_HEDGES)
    assert first_option >= 50  # the hole: e.g. "..., or vice versa." scores 1.0 with reasoning-gym's scorer


def test_red_team_answer_only_policy_gets_kk_cot_pass_at_k_below_pass_at_k_in_the_evaluator():
    # a pool of completions that answer right without a derivation (the uncited enumeration template,
    # one bare verdict per person, an empty think), plus one gold trace on every other prompt and a
    # wrong answer on the rest, counted by `faithgrpo eval`'s own loop (count_task) and table
    from math import comb

    from faithgrpo.eval.generation.cache import CompletionRecord
    from faithgrpo.eval.metrics.passk import pass_at_k_table
    from faithgrpo.eval.report.adapters import task_rows
    from faithgrpo.eval.report.sections import count_task

    rows = task_rows("knights_knaves", 12, seed=30)
    records, expected = [], []
    for k, row in enumerate(rows):
        meta = json.loads(row["entry"])["metadata"]
        solution = tuple(meta["solution"])
        right = _answer_text(meta, solution)
        template = [_claim_line(meta, c) for c in _enumeration(meta)]
        verdicts = [_claim_line(meta, _C("role", {i: r})) for i, r in enumerate(solution)]
        completions = [
            _make_trace(meta, derivation=template, answer=right),
            _make_trace(meta, derivation=verdicts, answer=right),
            f"<think>\nI know this one.\n</think>\n<answer>{right}</answer>",
        ]
        if k % 2 == 0:
            completions.append(gold_kk_trace(meta, k))
            expected.append((4, 4, 1))
        else:
            wrong = next(a for a in _rows(len(solution)) if a != solution)
            completions.append(_make_trace(meta, assignment=wrong))
            expected.append((4, 3, 0))
        records.append(CompletionRecord(id=row["id"], prompt=row["prompt"], completions=completions))
    counts = count_task(rows, records)
    assert [(c.n, c.c, c.d) for c in counts] == expected
    table = pass_at_k_table(counts, (1, 2, 4), n_bootstrap=0)
    for k, row in table.items():
        pass_k = sum(1 - comb(n - c, k) / comb(n, k) for n, c, _ in expected) / len(expected)
        cot_k = sum(1 - comb(n - d, k) / comb(n, k) for n, _, d in expected) / len(expected)
        assert row["pass@k"].value == pytest.approx(pass_k) and row["cot_pass@k"].value == pytest.approx(
            cot_k
        )
        assert row["cot_pass@k"].value < row["pass@k"].value
    assert table[4]["pass@k"].value == 1.0 and table[4]["cot_pass@k"].value == 0.5


# --- adversarial input -----------------------------------------------------------------------------


def _nested(depth: int) -> str:
    return "(" * depth + "knight(Ava)" + ")" * depth


ADVERSARIAL = {
    "empty": "",
    "none": None,
    "number": 12345,
    "whitespace": " \n\t ",
    "one_megabyte": "<think>STATEMENTS:\n" + "Ava: knight(Ava)\n" * 60_000 + "</think>",
    "one_megabyte_no_tags": "a" * 1_000_000,
    "deep_parens_over_depth_cap": _make_trace(
        META2, lines=[f"- Ava: {_nested(45)}", "- Noah: knight(Ava) -> knight(Noah)"]
    ),
    "deep_parens_over_length_cap": _make_trace(
        META2, lines=[f"- Ava: {_nested(2_000)}", "- Noah: knight(Ava) -> knight(Noah)"]
    ),
    "many_negations": _make_trace(META2, lines=["- Ava: " + "not " * 200 + "knight(Noah)"]),
    "many_tokens": _make_trace(META2, lines=["- Ava: " + " and ".join(["knight(Noah)"] * 400)]),
    "unclosed_tags": "<think>STATEMENTS:\nAva: knight(Noah)\n<answer>Ava is a hero",
    "unicode": "<think>STATEMENTS:\nÄvá: ¬¬¬ ✓(Nöah) ⇒ 🙂\nSTRATEGY: 真理表\nDERIVATION:\n- 💥\nASSIGNMENT: Ava=ナイト\n</think><answer>🙂</answer>",
    "null_bytes": "<think>\x00STATEMENTS:\x00 Ava: knight(Noah)\x00</think>\x00<answer>\x00</answer>",
    "many_lines": "<think>\n" + "\n" * 5_000 + "</think><answer>x</answer>",
    "many_slots": "<think>\n" + "STATEMENTS:\n" * 3_000 + "</think>",
    "huge_assignment": _make_trace(META2).replace("ASSIGNMENT: ", "ASSIGNMENT: " + "Ava=knight, " * 600),
    "huge_answer": _make_trace(META2, answer="Ava is a hero " * 1_000),
}


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_adversarial_input_fails_quickly_without_raising(name):
    with cpu_clock() as clock:
        check = check_kk_trace(ADVERSARIAL[name], META2)
    elapsed = clock.elapsed
    assert elapsed < 1.0, f"{name} took {elapsed:.2f}s"
    assert not check.passed
    assert check.reasons
    assert not kk_cot_correct(ADVERSARIAL[name], META2)


def test_depth_cap_reason_is_reported():
    check = check_kk_trace(ADVERSARIAL["deep_parens_over_depth_cap"], META2)
    assert any("nested deeper" in r for r in check.reasons)
    # Under the cap, deep but valid nesting parses fine.
    ok = _make_trace(
        META2,
        lines=[
            f"- Ava: {_nested(30)} and knight(Ava) <-> not villain(Noah)",
            "- Noah: knight(Ava) -> knight(Noah)",
        ],
    )
    assert parse_kk_formula(_nested(30), META2) == (A, None)
    assert check_kk_trace(ok, META2).statements is False  # different claim, but parsed: a semantic failure
    assert any("differs" in r for r in check_kk_trace(ok, META2).reasons)


_HEADERS = [
    "STATEMENTS:",
    "STRATEGY:",
    "DERIVATION:",
    "ASSIGNMENT:",
    "<think>",
    "</think>",
    "<answer>",
    "</answer>",
]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(
                [*_HEADERS, "Ava:", "Noah:", "knight(Ava)", "villain(Noah)", "->", "not", "(", ")", "\n", "="]
            ),
            st.text(max_size=20),
        ),
        max_size=60,
    )
)
def test_random_text_never_raises_and_full_marks_imply_a_correct_answer(parts):
    text = " ".join(parts)
    check = check_kk_trace(text, META2)
    assert 0 <= check.total <= 6
    assert check.total == sum(getattr(check, name) for name in CHECK_NAMES)
    if check.passed:
        assert check.answer_correct and check.assignment == (True, True)


def test_docstring_examples_run():
    import doctest

    from faithgrpo.tasks.knights_knaves import claims as kk_claims
    from faithgrpo.tasks.knights_knaves import formulas as kk_formulas
    from faithgrpo.tasks.knights_knaves import gold as kk_gold
    from faithgrpo.tasks.knights_knaves import logic as kk_logic
    from faithgrpo.tasks.knights_knaves import puzzle as kk_puzzle
    from faithgrpo.tasks.knights_knaves import trace as kk_trace

    modules = (kk, kk_logic, kk_puzzle, kk_formulas, kk_trace, kk_claims, kk_gold)
    results = [doctest.testmod(m, optionflags=doctest.NORMALIZE_WHITESPACE) for m in modules]
    assert sum(r.attempted for r in results) >= 10 and sum(r.failed for r in results) == 0


def test_kk_fast_paths_match_the_patterns_they_stand_in_for():
    # the slot-header prefilter: every character a slot name's first letter matches (IGNORECASE)
    from faithgrpo.tasks.knights_knaves import trace as kk_trace

    initial = re.compile("s|d|a", re.IGNORECASE)
    assert {c for c in map(chr, range(0x110000)) if initial.fullmatch(c)} == kk_trace._HEADER_INITIALS
    meta = {
        "names": ["Ava", "Noah"],
        "statements": [["and", ["lying", 0], ["lying", 1]], ["lying", 0]],
        "solution": [False, True],
    }
    gold = gold_kk_trace(meta, rng=0)
    folded = gold.replace("STRATEGY:", "- ** ſtrategy **:")  # "ſ" matches "s" under IGNORECASE
    assert kk.parse_kk_trace(folded).slots == kk.parse_kk_trace(gold).slots
    # the one-pass tokenizer: operator spellings, and errors that name the spelling and position
    puzzle = kk.kk_puzzle(meta)
    expected = (("->", ("telling-truth", 0), ("lying", 1)), None)
    for text in ("knight(Ava) -> knave(Noah)", "knight(Ava) → knave(Noah)", "knight(Ava)=>knave(Noah)"):
        assert parse_kk_formula(text, puzzle) == expected
    assert parse_kk_formula("knight(Ava) → → knave(Noah)", puzzle) == (None, "expected 'word', found '→'")
    assert parse_kk_formula("knight(Ava) -> -> knave(Noah)", puzzle) == (None, "expected 'word', found '->'")
    assert parse_kk_formula("knight(Ava) $", puzzle) == (None, "unexpected character '$' at position 12")
    # an operator word is a name inside role(...)
    assert parse_kk_formula("knight(Or)", puzzle)[1] == "'Or' is not a person in this puzzle"
    assert parse_kk_formula("knight(||)", puzzle)[1] == "expected a name inside knight(...), found '||'"
