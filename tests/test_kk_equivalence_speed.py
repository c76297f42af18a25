"""Knights & Knaves fast paths: each cheap pre-test or precomputed value must agree with the general path."""

from __future__ import annotations

import random

import reasoning_gym
from hypothesis import given, settings
from hypothesis import strategies as st

from faithgrpo.tasks import knights_knaves as kk
from faithgrpo.tasks.knights_knaves import claims as kk_claims
from faithgrpo.tasks.knights_knaves import formulas as kk_formulas
from faithgrpo.tasks.knights_knaves import trace as kk_trace
from faithgrpo.tasks.knights_knaves.logic import index_of

# a reasoning-gym puzzle with three people and its own role words
META = reasoning_gym.create_dataset("knights_knaves", size=1, seed=7, n_people=3)[0]["metadata"]


NAMES = META["names"]
KNIGHT, KNAVE = kk.kk_puzzle(META).knight, kk.kk_puzzle(META).knave


def _header_by_pattern(line: str) -> bool:
    return kk_trace._SLOT_RE.match(line) is not None


def _header_by_prefilter(line: str) -> bool:
    return kk_trace._may_be_header(line)


# lines built from header pieces: leads, names (also folded spellings), blanks, stars and colons
_HEADERISH = st.lists(
    st.sampled_from(
        [*" \t-*#>:ſSsTtAaRrEeGgYyDdNn", "**", "STRATEGY", "DERIVATION", "ſtatements", "Assignment", "x"]
    ),
    max_size=12,
).map("".join)


@settings(max_examples=3000, deadline=None)
@given(_HEADERISH, st.text(max_size=10))
def test_header_prefilter_never_rejects_a_header(prefix: str, rest: str):
    line = prefix + rest
    if _header_by_pattern(line):
        assert _header_by_prefilter(line), line


def test_header_prefilter_on_spelled_headers():
    for name in kk_trace.SLOT_NAMES:
        for spelled in (name, name.lower(), name.title(), name.replace("S", "ſ").lower()):
            for lead, tail in (("", ":"), ("- ", " :"), ("**", ":**"), ("## ", "**:"), ("\t> ", "\t: x")):
                line = f"{lead}{spelled}{tail}"
                assert _header_by_pattern(line) and _header_by_prefilter(line), line
    for line in ("- Step 1: so Ava is a sage", "Suppose Ava=sage:", "STRATEGYX: a", "Assignments: x"):
        assert not _header_by_pattern(line)


def test_claim_steps_match_the_parsed_claims():
    # the precomputed (why, claim, key, region) of a line is what parsing the line gives
    puzzle = kk.kk_puzzle(META)
    rng = random.Random(0)
    lines = []
    for seed in range(30):
        lines += kk.parse_kk_trace(kk.gold_kk_trace(META, rng=seed)).slots["DERIVATION"].splitlines()
    a, b, c = NAMES[:3]
    lines += [
        f"assignment {{{NAMES[0]}: {KNIGHT}}} is consistent",
        "assignment {Zed: knight} is inconsistent",
        "so he is a knave",
        f"{NAMES[1]} is a knight: Zed's statement",
        f"assignment {{{a}: knave, {b}: knight, {c}: knight}} is consistent: {a}'s statement",
        f"assignment {{{c}: knave}} is inconsistent: {b}'s claim",
        "- assignment {" + "x" * 700 + "}",
    ]
    rng.shuffle(lines)
    for line in lines:
        why, claim, key, region = kk_claims._line_step(line, puzzle)
        assert kk.parse_kk_claim(line, META) == (claim, why)  # a fresh puzzle: nothing memoised
        if claim is not None:
            assert key == claim.key
            n = puzzle.n_people
            if claim.kind == "consistent":
                roles = dict(claim.roles)
                want = index_of(tuple(roles[i] for i in range(n))) if len(roles) == n else -1
            else:
                want = kk_claims._region(claim.roles, n)
            assert region == want


def test_checks_equal_on_a_shared_and_a_fresh_puzzle():
    # the per-puzzle memo (lines, claims, formulas, tables, scores) never changes a result
    puzzle = kk.kk_puzzle(META)
    gold = [kk.gold_kk_trace(META, rng=seed) for seed in range(12)]
    texts = gold + [g.replace(KNIGHT, KNAVE, 1) for g in gold] + [g.replace("->", "<->") for g in gold]
    for text in texts + texts[::-1]:
        assert kk.check_kk_trace(text, puzzle) == kk.check_kk_trace(text, dict(META))


def test_assignment_patterns_start_with_their_initials_only():
    # _parse_claim_body tries the assignment patterns only on bodies starting with these letters
    first = kk_claims._ASSIGN_START_RE.pattern[0]
    initials = {
        c for c in map(chr, range(0x110000)) if kk_claims.re.fullmatch(first, c, kk_claims.re.IGNORECASE)
    }
    assert initials == kk_claims._ASSIGN_INITIALS
    assert kk_claims._ASSIGN_CLAIM_RE.pattern.startswith(kk_claims._ASSIGN_START_RE.pattern[:10])


def test_blank_completion_test_is_what_strip_empties():
    # parse_kk_trace asks isspace() instead of stripping a copy of the whole completion
    assert all((not chr(i).strip()) == chr(i).isspace() for i in range(0x110000))
    for text in ("", " ", "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f\x85\xa0\u2028\u3000", "\u200b"):
        assert kk.parse_kk_trace(text).error == (
            "empty completion" if not text.strip() else "no <think>...</think> block"
        )


# formula pieces: every operator spelling, role words (generic, the puzzle's, other puzzles'), names
# in any case, a name that spells like an operator word, words that are neither, odd characters
_FORMULA_PIECES = st.sampled_from(
    [
        *("<->", "<=>", "↔", "⇔", "->", "=>", "→", "⇒", "&&", "&", "∧", "||", "|", "∨", "~", "!", "¬"),
        *("not", "and", "or", "implies", "iff", "AND", "Not", "(", ")", "((", ")", " ", "\t", "\u3000"),
        *("knight", "knave", KNIGHT, KNAVE, KNIGHT.upper(), "hero", "sage", "Zed", "_", "$", "<", "=", "-"),
        *NAMES,
        *(name.lower() for name in NAMES),
        *("Or", "OR", "knight(Or)", "knave(or)", "knight(|)"),
        *(f"{role}({name})" for role in ("knight", "knave", KNIGHT, KNAVE) for name in NAMES),
    ]
)


def _reported_tokens(text: str):
    try:
        return kk_formulas._tokenize_reporting(text)
    except kk_formulas._FormulaError as err:
        return str(err)


def _tokens(text: str):
    try:
        return kk_formulas._tokenize(text)
    except kk_formulas._FormulaError as err:
        return str(err)


@settings(max_examples=3000, deadline=None)
@given(st.lists(_FORMULA_PIECES, max_size=14).map("".join), st.text(max_size=6))
def test_findall_tokenizer_matches_the_reporting_one(text: str, junk: str):
    # the one-findall tokenizer gives _TOKEN_RE's tokens, and its errors word by word
    for candidate in (text, text + junk, junk + text, "(" * 160 + text + ")" * 160):
        assert _tokens(candidate) == _reported_tokens(candidate), candidate


def test_findall_tokenizer_on_every_character():
    # one character at a time, between blanks and words: the same tokens or the same error
    for i in range(0x110000):
        text = f"knight(A) {chr(i)}x"
        assert _tokens(text) == _reported_tokens(text), hex(i)


# a puzzle with a person named like an operator word ("Or"), which formula_shape must not collapse
OR_META = {
    "names": ["Ava", "Or"],
    "statements": [["telling-truth", 1], ["telling-truth", 0]],
    "solution": [True, True],
}


@settings(max_examples=3000, deadline=None)
@given(
    st.lists(_FORMULA_PIECES, max_size=12).map("".join),
    st.lists(_FORMULA_PIECES, max_size=12).map("".join),
    st.sampled_from([META, OR_META]),
)
def test_formulas_of_one_shape_parse_alike(first: str, second: str, meta):
    # formula_shape keeps all the parser reads: two formulas of one shape both parse, to the same
    # statement, or the shape says nothing (None) -- so a table can be shared by shape
    puzzle = kk.kk_puzzle(meta)
    results = {}
    for text in (first, second, first.replace("->", " implies "), first.replace("knight", KNIGHT)):
        shape, _ = kk_formulas.formula_shape(text, puzzle)
        statement, _ = kk_formulas.parse_kk_formula(text, puzzle)
        if shape is not None and statement is not None:
            assert results.setdefault(shape, statement) == statement, text
    for text in (first, second):
        shape, _ = kk_formulas.formula_shape(text, puzzle)
        if shape in results:  # a shape that parsed once parses for every spelling
            assert kk_formulas.parse_kk_formula(text, puzzle)[0] == results[shape], text


def test_shape_memo_gives_each_spelling_its_own_table():
    # the checker's restated tables with the shape memo shared across spellings, against a fresh
    # puzzle per formula (nothing memoised). Each adversarial text follows a parsed formula it must
    # not borrow from: a name where a role word goes (person 1 is not True, person 0 not False), a
    # role word or an operator symbol where a name goes, a name spelled like an operator word.
    for meta in (META, OR_META):
        shared = kk.kk_puzzle(meta)
        a, b = meta["names"][:2]
        spellings = [
            f"{role}({x}) {op} {neg}{role2}({y})"
            for role in ("knight", KNIGHT, "knave")
            for role2 in ("knave", "KNIGHT")
            for op in ("->", "implies", "→", "<->", "and", "Or", "|")
            for neg in ("", "not ", "~")
            for x in (a, b)
            for y in (a, b)
        ]
        adversarial = [
            *(f"knight({a})", f"{b}({a})", f"knave({a})", f"{a}({a})", f"knight({b}) & {b}({a})"),
            *(f"knight({b})", f"knight({KNIGHT})", "knight(|)", "knight(∨)", "knight(||)", "knight(Or)"),
            *("knight(or)", "knight(OR) or knave(Or)", "knight(Or) | knave(Or)", "knight(Or) ∨ knave(or)"),
        ]
        for text in spellings + adversarial + spellings[::-1] + adversarial[::-1]:
            fresh = kk.KKPuzzle.from_metadata(meta)  # not kk_puzzle: that shares the cached puzzle
            assert kk_trace._formula_table(text, shared) == kk_trace._formula_table(text, fresh), text
