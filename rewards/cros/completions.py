"""What CRoS reads from a completion and what it returns per pair: :func:`parse_completion` cuts a
completion around its reasoning and answer, :class:`CRoSScore` is one pair's result, and
:data:`UNDEFINED_REASONS` lists why Δ can be undefined."""

from __future__ import annotations

from dataclasses import dataclass, field

from faithgrpo.text import ANSWER_CLOSE, ANSWER_OPEN, THINK_CLOSE, THINK_OPEN

__all__ = ["UNDEFINED_REASONS", "CRoSScore", "parse_completion"]

# Why Δ can be undefined; every reason is logged on every call so metric keys stay stable.
UNDEFINED_REASONS = (
    "no_answer",  # no <answer>…</answer> block
    "empty_answer",  # the answer block is blank
    "empty_reasoning",  # nothing (but whitespace) before the answer
    "too_few_steps",  # the reasoning splits into fewer than two steps
    "too_long",  # reasoning + answer exceed max_length (or the reasoning exceeds the char bound)
    "gated",  # gate="correct" and the answer is not graded correct
    "non_finite",  # the reference produced a NaN/inf log-probability
)


@dataclass(frozen=True)
class CRoSScore:
    """CRoS result for one (prompt, completion) pair.

    Attributes:
        delta: Δ = ℓ(r) − mean_m ℓ(π_m(r)), or ``None`` when undefined.
        reason: why Δ is undefined (one of `UNDEFINED_REASONS`), ``None`` when defined.
        logprob: ℓ(r), mean answer-token log-probability given the ordered reasoning.
        scrambled_logprobs: ℓ(π_m(r)) for each scramble, in draw order.
        num_steps: number of reasoning steps found.
        prompt_truncated: the prompt was cut from the left to fit ``max_length``.
    """

    delta: float | None
    reason: str | None = None
    logprob: float | None = None
    scrambled_logprobs: tuple[float, ...] = field(default=())
    num_steps: int = 0
    prompt_truncated: bool = False


def parse_completion(text: str) -> tuple[tuple[str, str, str, str] | None, str | None]:
    """Cut a completion into ``(head, reasoning, middle, answer)`` around its reasoning and answer.

    ``head + reasoning + middle`` is the completion up to and including the last ``<answer>`` tag;
    ``answer`` is that block's content. Only ``reasoning`` is scrambled. Linear time (``str.find``
    only), never raises.

    Args:
        text (`str`):
            The completion text.

    Returns:
        `tuple`: ``((head, reasoning, middle, answer), None)``, or ``(None, reason)`` with reason
        ``"no_answer"`` or ``"empty_answer"``.

    Example:
        >>> parse_completion("<think>a\\nb</think>\\n<answer>5</answer>")
        (('<think>', 'a\\nb', '</think>\\n<answer>', '5'), None)
    """
    if not isinstance(text, str):
        return None, "no_answer"
    close = text.rfind(ANSWER_CLOSE)
    open_ = text.rfind(ANSWER_OPEN, 0, close) if close >= 0 else -1
    if open_ < 0:
        return None, "no_answer"
    answer_start = open_ + len(ANSWER_OPEN)
    answer = text[answer_start:close]
    if not answer.strip():
        return None, "empty_answer"
    think_close = text.find(THINK_CLOSE, 0, open_)
    reasoning_end = think_close if think_close >= 0 else open_
    think_open = text.find(THINK_OPEN, 0, reasoning_end)
    reasoning_start = think_open + len(THINK_OPEN) if think_open >= 0 else 0
    return (
        text[:reasoning_start],
        text[reasoning_start:reasoning_end],
        text[reasoning_end:answer_start],
        answer,
    ), None
