"""Reasoning steps for CRoS: split a chain of thought into steps and draw seeded step scrambles.

CRoS steps 1–2 (docs/rewards.md, "CRoS"). A step is a span of the reasoning text; scrambling moves step *contents*
between the step slots and keeps everything else (a preamble, ``Step k:`` labels, separators) in
place, so the identity permutation rebuilds the reasoning exactly and a scramble differs from the
original only in the order of what the steps say. Keeping the labels fixed matters: a chain whose
labels read ``Step 2, Step 1, …`` would tell the reference model it was shuffled, lowering the
answer's likelihood even for a chain whose order carries nothing.

Every function here is linear in the text length, bounded by ``max_chars`` (characters, checked
before any pattern runs) and ``max_steps`` (step markers), and never raises on model output.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import random
import re

__all__ = [
    "MAX_REASONING_CHARS",
    "MAX_STEPS",
    "apply_permutation",
    "scramble_permutations",
    "scramble_seed",
    "split_steps",
    "step_spans",
]

# Longer reasoning is not split at all (CRoS then reports it as too long): bounds every parser.
# 500,000 characters is well over 100k tokens, past any context CRoS scores (M+1)·G sequences in,
# and keeps the worst case of a split (a label scan over one line start every two characters)
# within tens of milliseconds.
MAX_REASONING_CHARS = 500_000
# A reasoning whose deciding strategy finds more step markers than this is not split either: it
# bounds the Python work per call (and the scrambles drawn from the steps) whatever the text.
MAX_STEPS = 8_192
# Upper bound on the number of scrambles one call may ask for; CRoS uses a handful.
_MAX_SCRAMBLES = 100_000
# Exhaustive enumeration is only used while n! stays this small.
_ENUMERATE_LIMIT = 50_000

# A step label at the start of a line: "Step 3:", "step 3 -", "**Step 3.**", "3.", "3)", "## 3:".
# Bare numbers need ".", ")" or ":" and no digit right after it, so "3 apples" and "1.5 is" stay text.
# "step" is spelled out case-insensitively ("ſ" is what re.IGNORECASE also folds to "s"): the flag
# would slow every attempt down. Possessive runs ("*+") never give characters back: none of them can
# end in a character the next piece needs, so they change nothing but the cost of a failing attempt.
_LABEL = r"[ \t#*>]*+(?:[sSſ][tT][eE][pP][ \t]*+\d{1,4}[ \t]*+[:.)\-]?|\d{1,4}[ \t]*+[.):](?!\d))[ \t*]*+"
# The first line is tried with .match; every later line start is found through its "\n", a literal
# first character the regex engine scans for quickly (a MULTILINE "^" is attempted at every offset),
# and the lookahead turns most non-label lines away after one character.
_FIRST_LABEL_RE = re.compile(_LABEL)
_NEXT_LABEL_RE = re.compile(r"\n(?=[ \t#*>sSſ\d])" + _LABEL)
# The stripped core of a non-blank line: first to last non-whitespace character. The inner run goes
# to the end of the line and gives back only the trailing whitespace, once per line: linear.
_LINE_RE = re.compile(r"\S(?:[^\r\n]*\S)?")
# End of a sentence: terminal punctuation (optionally closing quotes/brackets) before whitespace.
# One mark at a time (not "[.!?]+"): a long run of marks must not backtrack quadratically.
_SENTENCE_END_RE = re.compile(r"[.!?][\"')\]]*+(?=\s)")

_TOO_MANY = None  # what a strategy returns when it finds more than max_steps markers


def _stripped(text: str, start: int, end: int) -> tuple[int, int] | None:
    """Shrink ``text[start:end]`` to its non-whitespace core; ``None`` when it is blank.

    Slices and ``str.strip`` (C loops); the spans a caller strips are disjoint, so the copies add
    up to at most the text length.
    """
    segment = text[start:end]
    core = segment.lstrip()
    if not core:
        return None
    start += len(segment) - len(core)
    return start, start + len(core.rstrip())


def _labelled_spans(reasoning: str, max_steps: int) -> list[tuple[int, int]] | None:
    labels: list[tuple[int, int]] = []  # (line start, label end)
    first = _FIRST_LABEL_RE.match(reasoning)
    if first is not None:
        labels.append((0, first.end()))
    for label in _NEXT_LABEL_RE.finditer(reasoning):
        if len(labels) >= max_steps:
            return _TOO_MANY
        labels.append((label.start() + 1, label.end()))
    spans = []
    for i, (_, label_end) in enumerate(labels):
        end = labels[i + 1][0] if i + 1 < len(labels) else len(reasoning)
        span = _stripped(reasoning, label_end, end)
        if span is not None:
            spans.append(span)
    return spans


def _line_spans(reasoning: str, max_steps: int) -> list[tuple[int, int]] | None:
    spans = [m.span() for m in itertools.islice(_LINE_RE.finditer(reasoning), max_steps + 1)]
    return _TOO_MANY if len(spans) > max_steps else spans


def _sentence_spans(reasoning: str, max_steps: int, lo: int, hi: int) -> list[tuple[int, int]] | None:
    """Sentences of ``reasoning[lo:hi]``; everything outside it is whitespace (the single line)."""
    spans = []
    start = lo
    # One character past the line, so the lookahead sees the whitespace that follows it.
    for end_mark in _SENTENCE_END_RE.finditer(reasoning, lo, min(hi + 1, len(reasoning))):
        span = _stripped(reasoning, start, end_mark.end())
        if span is not None:
            if len(spans) >= max_steps:
                return _TOO_MANY
            spans.append(span)
        start = end_mark.end()
    tail = _stripped(reasoning, start, hi) if start < hi else None
    if tail is not None:
        if len(spans) >= max_steps:
            return _TOO_MANY
        spans.append(tail)
    return spans


def step_spans(
    reasoning: str, max_chars: int = MAX_REASONING_CHARS, max_steps: int = MAX_STEPS
) -> list[tuple[int, int]]:
    """Locate the steps of a reasoning text as ``(start, end)`` character spans.

    Strategies, first one giving at least two steps wins: explicit labels (``Step k:`` or numbered
    lines such as ``1.`` / ``2)``; a step runs from after its label to the next label and may span
    several lines), else non-empty lines, else sentences. Spans exclude labels and surrounding
    whitespace, are ordered and do not overlap.

    Linear time: the length cap is checked before any pattern runs, every pattern reads each
    character a bounded number of times, and the Python work per call is bounded by ``max_steps``.

    Args:
        reasoning (`str`):
            The chain of thought (the ``<think>`` content).
        max_chars (`int`, *optional*, defaults to `MAX_REASONING_CHARS`):
            Texts longer than this are not split (an empty list is returned): the bound that keeps
            every call linear and small.
        max_steps (`int`, *optional*, defaults to `MAX_STEPS`):
            When the deciding strategy finds more step markers than this (labels, non-blank lines
            or sentences), the text is not split either (an empty list is returned).

    Returns:
        `list[tuple[int, int]]`: the step spans; fewer than two when the text has fewer steps
        (one step, blank text, too long, too many steps, or not a string).

    Example:
        >>> text = "Step 1: a\\nStep 2: b"
        >>> [text[s:e] for s, e in step_spans(text)]
        ['a', 'b']
        >>> step_spans("x\\n" * 10, max_steps=9)
        []
    """
    if not isinstance(reasoning, str) or len(reasoning) > max_chars or not reasoning.strip():
        return []
    # Every label has a digit (r"\d": any Unicode decimal digit); ASCII text without one skips the scan.
    if not reasoning.isascii() or any(digit in reasoning for digit in "0123456789"):
        spans = _labelled_spans(reasoning, max_steps)
        if spans is _TOO_MANY:
            return []
        if len(spans) >= 2:
            return spans
    spans = _line_spans(reasoning, max_steps)
    if spans is _TOO_MANY:
        return []
    if len(spans) >= 2:
        return spans
    if not spans:
        return []
    # A single non-blank line (all else is whitespace): its sentences are the steps.
    (lo, hi) = spans[0]
    return _sentence_spans(reasoning, max_steps, lo, hi) or []


def split_steps(
    reasoning: str, max_chars: int = MAX_REASONING_CHARS, max_steps: int = MAX_STEPS
) -> list[str]:
    """Split a chain of thought into steps (CRoS step 1).

    Explicit ``Step k:`` / numbered lines first (labels removed), else non-empty lines, else
    sentences. See `step_spans` for the exact rules.

    Args:
        reasoning (`str`):
            The chain of thought.
        max_chars (`int`, *optional*, defaults to `MAX_REASONING_CHARS`):
            Longer texts give ``[]``.
        max_steps (`int`, *optional*, defaults to `MAX_STEPS`):
            Texts with more steps give ``[]``.

    Returns:
        `list[str]`: the step texts, in order. Fewer than two steps means CRoS Δ is undefined.

    Example:
        >>> split_steps("1. x = 2\\n2. y = x + 1\\n")
        ['x = 2', 'y = x + 1']
        >>> split_steps("First add. Then halve.")
        ['First add.', 'Then halve.']
    """
    text = reasoning if isinstance(reasoning, str) else ""
    return [text[s:e] for s, e in step_spans(text, max_chars=max_chars, max_steps=max_steps)]


def apply_permutation(
    reasoning: str, spans: list[tuple[int, int]], permutation: tuple[int, ...] | list[int]
) -> str:
    """Rebuild ``reasoning`` with step contents moved between the step slots.

    Slot ``i`` receives the content of step ``permutation[i]``; text outside the spans (preamble,
    labels, separators) stays where it was, so the identity permutation returns ``reasoning``.

    Args:
        reasoning (`str`):
            The original text.
        spans (`list[tuple[int, int]]`):
            Its step spans, as returned by `step_spans`.
        permutation (`tuple[int, ...]`):
            A permutation of ``range(len(spans))``.

    Returns:
        `str`: the scrambled text.

    Example:
        >>> text = "Step 1: a\\nStep 2: b"
        >>> apply_permutation(text, step_spans(text), (1, 0))
        'Step 1: b\\nStep 2: a'
    """
    if sorted(permutation) != list(range(len(spans))):
        raise ValueError(f"permutation {tuple(permutation)} is not a permutation of {len(spans)} steps")
    pieces = []
    cursor = 0
    for (start, end), source in zip(spans, permutation):
        pieces.append(reasoning[cursor:start])
        src_start, src_end = spans[source]
        pieces.append(reasoning[src_start:src_end])
        cursor = end
    pieces.append(reasoning[cursor:])
    return "".join(pieces)


def scramble_seed(seed: int, prompt: str, completion: str) -> bytes:
    """Stable seed material for the scrambles of one completion.

    A SHA-256 digest of (global seed, prompt, completion), so the same input draws the same
    scrambles in every process and every run (Python's ``hash`` is salted per process).

    Example:
        >>> scramble_seed(0, "p", "c") == scramble_seed(0, "p", "c")
        True
    """
    digest = hashlib.sha256()
    for part in (str(int(seed)), prompt, completion):
        encoded = part.encode("utf-8", errors="surrogatepass")
        # Length-prefix each part so ("ab", "c") and ("a", "bc") differ.
        digest.update(len(encoded).to_bytes(8, "little"))
        digest.update(encoded)
    return digest.digest()


def _rng(seed_material: bytes | str | int) -> random.Random:
    if isinstance(seed_material, int):
        seed_material = str(seed_material)
    if isinstance(seed_material, str):
        seed_material = seed_material.encode("utf-8", errors="surrogatepass")
    digest = hashlib.sha256(bytes(seed_material)).digest()
    return random.Random(int.from_bytes(digest[:16], "little"))


def scramble_permutations(n: int, m: int, seed_material: bytes | str | int) -> list[tuple[int, ...]]:
    """Draw ``m`` distinct non-identity permutations of ``n`` steps (CRoS step 2).

    When fewer than ``m`` non-identity permutations exist (``n = 2`` has 1, ``n = 3`` has 5), all
    of them are returned, in lexicographic order. Otherwise the draw is seeded from
    ``seed_material`` (hashed with SHA-256): few permutations are enumerated and sampled, many are
    drawn by Fisher–Yates shuffles with rejection of the identity and repeats, so ``n`` may be large
    (``n!`` is never enumerated).

    Args:
        n (`int`):
            Number of steps. Below 2 there is no scramble and ``[]`` is returned.
        m (`int`):
            Number of scrambles wanted, at least 1.
        seed_material (`bytes`, `str` or `int`):
            Seed, typically `scramble_seed` of (global seed, prompt, completion).

    Returns:
        `list[tuple[int, ...]]`: ``min(m, n! - 1)`` permutations; entry ``i`` of a permutation is the
        index of the step placed in slot ``i``.

    Example:
        >>> scramble_permutations(2, 4, b"x")
        [(1, 0)]
        >>> len(scramble_permutations(3, 4, b"x"))
        4
    """
    if isinstance(m, bool) or not isinstance(m, int) or not 1 <= m <= _MAX_SCRAMBLES:
        raise ValueError(f"m (number of scrambles) must be an int in [1, {_MAX_SCRAMBLES}], got {m!r}")
    if isinstance(n, bool) or not isinstance(n, int):
        raise ValueError(f"n (number of steps) must be an int, got {n!r}")
    if n < 2:
        return []
    identity = tuple(range(n))
    # n! is only computed while it is small; 13! already exceeds any m we accept.
    count = math.factorial(n) - 1 if n <= 12 else None
    if count is not None and count <= m:
        return [p for p in itertools.permutations(identity) if p != identity]
    rng = _rng(seed_material)
    if count is not None and count <= _ENUMERATE_LIMIT and count <= 4 * m:
        # Dense regime: rejection would mostly redraw repeats, sampling the full list is cheaper.
        others = [p for p in itertools.permutations(identity) if p != identity]
        return rng.sample(others, m)
    chosen: list[tuple[int, ...]] = []
    seen = {identity}
    order = list(identity)
    # Here n! - 1 > 4m, so each draw is new with probability > 3/4; the cap only guards the loop.
    for _ in range(64 * m + 64):
        rng.shuffle(order)
        candidate = tuple(order)
        if candidate not in seen:
            seen.add(candidate)
            chosen.append(candidate)
            if len(chosen) == m:
                break
    return chosen
