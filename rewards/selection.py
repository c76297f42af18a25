"""Choosing one completion out of K: CALVER best-of-K and the plurality (majority-vote) baseline.

Best-of-K keeps the candidate whose trace passes the most CALVER checks, the earliest
one on ties. Plurality keeps the most frequent normalised answer (earliest first occurrence on
ties), the usual self-consistency baseline. When a problem has many valid answers, valid mass
*fragments* over several strings while a wrong answer can be one repeated string; plurality then
converges to the wrong answer as K grows, and best-of-K does not (``benchmarks/fragmentation.py``).

Both functions take the candidates (plain strings or TRL conversational completions) and the
problem, score each distinct text once, and never raise on candidate text. The pure selection rules
:func:`best_of_k_index` and :func:`plurality_index` are exposed for callers that already hold the
scores or the normalised answers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from faithgrpo.rewards.calver.problem import CalverProblem, prepare_problem
from faithgrpo.rewards.calver.reward import score_trace
from faithgrpo.text import completion_text, extract_answer

__all__ = ["best_of_k_index", "normalized_answer", "plurality", "plurality_index", "select_best_of_k"]

MAX_ANSWER_CHARS = 4_096
_SPACE_RE = re.compile(r"\s+")


def best_of_k_index(scores: Sequence[float]) -> int:
    """Index of the first maximal score; ``-1`` for an empty sequence.

    Example:
        >>> best_of_k_index([4, 6, 5, 6]), best_of_k_index([])
        (1, -1)
    """
    best, index = None, -1
    for i, s in enumerate(scores):
        if best is None or s > best:
            best, index = s, i
    return index


def plurality_index(answers: Sequence[Any]) -> int:
    """Index of the first occurrence of the most frequent answer; ties go to the answer seen first.

    ``None`` entries (unparsable answers) do not vote. Returns ``0`` when nothing votes and ``-1``
    for an empty sequence.

    Example:
        >>> plurality_index(["a", "b", "b", "a", None, None, None]), plurality_index([None, None])
        (0, 0)
    """
    if not answers:
        return -1
    counts: dict[Any, int] = {}
    first: dict[Any, int] = {}
    for i, a in enumerate(answers):
        if a is None:
            continue
        counts[a] = counts.get(a, 0) + 1
        first.setdefault(a, i)
    if not counts:
        return 0
    # dicts keep insertion order, i.e. order of first occurrence, and max keeps the first maximum
    winner = max(counts, key=counts.__getitem__)
    return first[winner]


def select_best_of_k(
    candidates: Sequence[Any], problem: Mapping[str, Any] | str | CalverProblem, **score_kwargs: Any
) -> int:
    """CALVER best-of-K: the earliest index of maximal score S.

    Args:
        candidates: K completions (plain strings or conversational); anything else scores 0.
        problem: the causal problem (dict, JSON string, or :func:`~faithgrpo.rewards.calver.problem.prepare_problem`'s
            result); its answer fields are stripped before scoring.
        **score_kwargs: settings for :func:`~faithgrpo.rewards.calver.reward.score_trace` (``graph_check``,
            caps).

    Returns:
        The selected index, ``-1`` when there are no candidates.

    Raises:
        ValueError: a malformed problem or setting (never for candidate text).

    Example:
        >>> problem = {"graph": {"type": "DAG", "nodes": ["X", "M", "Y"], "directed": [["X", "M"], ["M", "Y"]]},
        ...            "query": {"kind": "mediator", "treatment": "X", "outcome": "Y"}}
        >>> good = ("<think>GRAPH: X -> M; M -> Y\\nQUERY: mediator(treatment=X, outcome=Y)\\n"
        ...         "STRATEGY: mediation\\nDERIVATION:\\n- X -> M -> Y\\nRESULT: M</think><answer>M</answer>")
        >>> select_best_of_k(["<answer>Y</answer>", good, good], problem)
        1
    """
    if not candidates:
        return -1
    prepared = prepare_problem(problem)
    cache: dict[str, int] = {}
    scores = []
    for candidate in candidates:
        text = completion_text(candidate)
        if text not in cache:
            cache[text] = score_trace(text, prepared, **score_kwargs).total
        scores.append(cache[text])
    return best_of_k_index(scores)


def normalized_answer(candidate: Any, problem: Mapping[str, Any] | str | CalverProblem | None) -> str | None:
    """The canonical answer of one candidate for plurality voting, or ``None`` when it has none.

    The last ``<answer>…</answer>`` is read (the whole text when there is no tag). With a causal
    problem the answer is parsed and formatted by its query kind (``{U, W}`` == ``{'W', 'U'}``);
    without one (``None``), or for an unknown query kind, whitespace is collapsed and case folded.

    Raises:
        ValueError: a malformed problem (never for candidate text).

    Example:
        >>> p = {"graph": {"type": "DAG", "nodes": ["U", "W"]}, "query": {"kind": "dsep_set", "x": "U", "y": "W"}}
        >>> normalized_answer("<answer>{'W', 'U'}</answer>", p), normalized_answer("<answer> Yes </answer>", None)
        ('{U, W}', 'yes')
    """
    text = completion_text(candidate)
    span = extract_answer(text) if "<answer>" in text else text
    if span is None or len(span) > MAX_ANSWER_CHARS:
        return None
    if problem is not None:
        problem = prepare_problem(problem)
    kind = None if problem is None else problem.kind
    if kind is None:
        folded = _SPACE_RE.sub(" ", span).strip().casefold()
        return folded or None
    value = kind.parse_answer(span)
    return None if value is None else kind.format_answer(value)


def plurality(candidates: Sequence[Any], problem: Mapping[str, Any] | str | CalverProblem | None) -> int:
    """Plurality (majority vote) baseline: the first candidate with the most frequent normalised answer.

    Args:
        candidates: K completions (plain strings or conversational).
        problem: the causal problem, or ``None`` to vote on whitespace/case-normalised answer text.

    Returns:
        The selected index: the first occurrence of the most frequent answer (the answer seen first
        wins ties); ``0`` when no candidate has a parsable answer; ``-1`` when there are no candidates.

    Raises:
        ValueError: a malformed problem (never for candidate text).

    Example:
        >>> p = {"graph": {"type": "DAG", "nodes": ["U", "W", "X", "Y"], "directed": [["U", "X"], ["U", "Y"],
        ...      ["X", "Y"]]}, "query": {"kind": "backdoor_set", "treatment": "X", "outcome": "Y"}}
        >>> plurality(["<answer>{U}</answer>", "<answer>{}</answer>", "<answer>set()</answer>"], p)
        1
    """
    if not candidates:
        return -1
    prepared = None if problem is None else prepare_problem(problem)
    cache: dict[str, str | None] = {}
    answers = []
    for candidate in candidates:
        text = completion_text(candidate)
        if text not in cache:
            cache[text] = normalized_answer(text, prepared)
        answers.append(cache[text])
    return plurality_index(answers)
