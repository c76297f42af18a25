"""Outcome reward: is the content of the last ``<answer>`` correct for the row's problem?

Two kinds of rows are graded (docs/rewards.md, "Outcome"):

- **causal rows** carry a ``problem`` column (docs/tasks.md, "The problem JSON"). The answer is graded by the graph
  predicate (:func:`faithgrpo.verifier.queries.grade_answer`): any member of the valid class counts, not
  only the listed example.
- **reasoning-gym rows** carry an ``entry`` column: the reasoning-gym entry (dict or JSON string with
  ``answer`` and ``metadata.source_dataset``). The task's own ``score_answer`` grades it; with
  ``strict=True`` (default) partial credit below 1.0 maps to 0.0. A Knights & Knaves answer that
  offers alternatives (:func:`faithgrpo.verifier.answers.offers_alternatives`) scores 0.0.

An answer commits to one answer: hedges ("A or B", "yes or no", "either ...") are wrong.

Rows with neither column get ``None`` (TRL ignores ``None`` for that completion).

Reading the answer is linear-time whatever the completion holds (:func:`extract_answer`: two
``rfind`` calls, no regex), and answers over ``MAX_ANSWER_CHARS`` are rejected before any grader
parses them.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from faithgrpo.rewards.diagnostics import log_reasons, log_value
from faithgrpo.text import completion_text, extract_answer

MAX_ANSWER_CHARS = 4_000
# reasoning-gym tasks whose answers must commit to one answer: an answer that offers
# alternatives ("..., or vice versa") scores 0.0, like a hedged causal answer
_ONE_ANSWER_SOURCES = frozenset({"knights_knaves"})
OUTCOME_REASONS = ("no_answer_tag", "answer_too_long", "wrong", "no_target", "bad_row")


def outcome_reward(completions: list[Any], **kwargs: Any) -> list[float | None]:
    """1.0 when the last ``<answer>`` is correct for the row's problem, else 0.0; ``None`` without a target.

    Args:
        completions: plain strings or conversational completions.
        **kwargs: dataset columns: ``problem`` (causal problem JSON), or ``entry`` (reasoning-gym
            entry), and optionally ``answer`` (the listed answer, for the exact-match metric).
            ``log_metric`` receives ``outcome/exact_match`` and the share of each failure reason.

    Returns:
        One float (or ``None``) per completion. Reasoning-gym partial credit below 1.0 counts as 0.0;
        :func:`make_outcome_reward` with ``strict=False`` keeps it.

    Example:
        >>> import json
        >>> problem = json.dumps({"graph": {"type": "DAG", "nodes": ["U", "X", "Y"],
        ...     "directed": [["U", "X"], ["U", "Y"], ["X", "Y"]], "bidirected": []},
        ...     "query": {"kind": "backdoor_set", "treatment": "X", "outcome": "Y"}})
        >>> outcome_reward(["<answer>{U}</answer>", "<answer>{}</answer>"], problem=[problem, problem])
        [1.0, 0.0]
    """
    return _outcome(completions, strict=True, **kwargs)


outcome_reward.__name__ = "outcome"


def make_outcome_reward(strict: bool = True):
    """Return the outcome reward with reasoning-gym partial credit kept (``strict=False``) or not."""
    return outcome_reward if strict else OutcomeReward(strict=False)


class OutcomeReward:
    """The outcome reward as a callable object (picklable), for a non-default ``strict``."""

    __name__ = "outcome"

    def __init__(self, strict: bool = True):
        self.strict = bool(strict)

    def __repr__(self) -> str:
        return f"OutcomeReward(strict={self.strict})"

    def __call__(self, completions: list[Any], **kwargs: Any) -> list[float | None]:
        return _outcome(completions, strict=self.strict, **kwargs)


OutcomeReward.__call__.__doc__ = outcome_reward.__doc__


def _outcome(completions: list[Any], *, strict: bool, **kwargs: Any) -> list[float | None]:
    rewards, reasons, exact = [], [], []
    for i, completion in enumerate(completions):
        row = {key: _column(kwargs, key, i) for key in ("problem", "entry", "answer")}
        score, reason, is_exact = grade_row(completion_text(completion), row, strict=strict)
        rewards.append(score)
        reasons.append(reason)
        if is_exact is not None:
            exact.append(is_exact)
    log_reasons("outcome", reasons, OUTCOME_REASONS, kwargs)
    if exact:
        # Exact match to the listed answer, next to validity: the two numbers CALVER's critics asked for.
        log_value("outcome/exact_match", sum(exact) / len(exact), kwargs)
    return rewards


def grade_row(
    text: str, row: dict[str, Any], *, strict: bool = True
) -> tuple[float | None, str | None, bool | None]:
    """Grade one completion against one dataset row.

    Returns:
        ``(reward, reason, exact_match)``: reward 1.0/0.0 (or partial credit when not strict; ``None``
        without a gradable target), the failure reason or ``None``, and whether the answer equals the
        listed answer after normalisation (``None`` when there is no listed answer).
    """
    problem, entry = row.get("problem"), row.get("entry")
    if problem is None and entry is None:
        return None, "no_target", None
    answer = extract_answer(text)
    if answer is None:
        return 0.0, "no_answer_tag", False if row.get("answer") is not None else None
    if len(answer) > MAX_ANSWER_CHARS:
        return 0.0, "answer_too_long", False if row.get("answer") is not None else None
    try:
        if problem is not None:
            score, exact = _grade_causal(answer, problem, row.get("answer"))
        else:
            score, exact = _grade_reasoning_gym(answer, entry, strict=strict)
    except (ValueError, KeyError, TypeError):
        # A malformed *row* (not model output): score nothing rather than crash the trainer.
        return None, "bad_row", None
    return score, (None if score == 1.0 else "wrong"), exact


def _grade_causal(answer: str, problem: Any, listed: Any) -> tuple[float, bool | None]:
    from faithgrpo.verifier.queries import grade_answer, normalize_answer

    if isinstance(problem, str):
        _check_json_object(problem)  # keeps the text: the graders memoise on it
    elif not isinstance(problem, dict):
        raise ValueError("problem column must hold a JSON object")
    score = 1.0 if grade_answer(problem, answer) else 0.0
    exact = None
    if listed is not None:
        mine, theirs = normalize_answer(problem, answer), normalize_answer(problem, str(listed))
        exact = mine is not None and mine == theirs
    return score, exact


@functools.lru_cache(maxsize=512)
def _check_json_object(text: str) -> None:
    """Raise ``ValueError`` unless ``text`` is a JSON object (memoised: a row's problem is graded G times)."""
    if not isinstance(json.loads(text), dict):
        raise ValueError("problem column must hold a JSON object")


def _grade_reasoning_gym(answer: str, entry: Any, *, strict: bool) -> tuple[float, bool]:
    entry = json.loads(entry) if isinstance(entry, str) else entry
    if not isinstance(entry, dict):
        raise ValueError("entry column must hold a reasoning-gym entry (dict or JSON string)")
    source = (entry.get("metadata") or {}).get("source_dataset")
    if not isinstance(source, str):
        raise ValueError("entry['metadata']['source_dataset'] names the reasoning-gym task")
    score = float(_score_fn(source)(answer, entry))
    if source in _ONE_ANSWER_SOURCES and score > 0.0:
        from faithgrpo.verifier.answers import offers_alternatives

        if offers_alternatives(answer):  # reasoning-gym reads a hedge as its first option
            score = 0.0
    exact = answer.strip() == str(entry.get("answer", "")).strip()
    if strict and score < 1.0:
        score = 0.0
    return score, exact


@functools.lru_cache(maxsize=64)
def _score_fn(source_dataset: str):
    import reasoning_gym

    if source_dataset.startswith("causal_"):
        import faithgrpo.tasks  # noqa: F401  (registers causal_graph / causal_story with reasoning-gym)
    return reasoning_gym.get_score_answer_fn(source_dataset)


def _column(kwargs: dict[str, Any], key: str, index: int) -> Any:
    values = kwargs.get(key)
    # TRL passes lists; datasets' Column and other sequences work too. A lone string is not a column.
    if values is None or isinstance(values, (str, bytes)) or not hasattr(values, "__getitem__"):
        return None
    try:
        return values[index]
    except (IndexError, KeyError, TypeError):
        return None
