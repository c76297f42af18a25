"""Format rewards: the ``<think>``/``<answer>`` envelope and the six CALVER trace slots.

Both are linear-time on any input: the completion length cap (``MAX_COMPLETION_CHARS``) is
checked before anything else, the envelope is read with ``str.count`` / ``str.find`` only, and the
GRAPH slot is capped (``MAX_GRAPH_CHARS``) before the graph parser runs.
"""

from __future__ import annotations

from typing import Any

from faithgrpo.rewards.diagnostics import log_reasons
from faithgrpo.rewards.trace import SLOT_NAMES, parse_query_call, parse_trace
from faithgrpo.text import ANSWER_CLOSE, ANSWER_OPEN, THINK_CLOSE, THINK_OPEN, completion_text

MAX_COMPLETION_CHARS = 20_000
MAX_STRATEGY_CHARS = 300
# Longest GRAPH slot handed to the graph parser (CALVER's own slot cap is 16,000 characters).
MAX_GRAPH_CHARS = 16_000

_ENVELOPE_TAGS = (THINK_OPEN, THINK_CLOSE, ANSWER_OPEN, ANSWER_CLOSE)
FORMAT_REASONS = ("too_long", "bad_envelope", "repeated_tag", "empty_think", "empty_answer")


def format_reward(completions: list[Any], **kwargs: Any) -> list[float]:
    """1.0 when a completion is ``<think>…</think>`` then ``<answer>…</answer>``, each once and non-empty,
    with nothing but whitespace around them; else 0.0.

    Args:
        completions: plain strings or conversational completions.
        **kwargs: TRL's reward kwargs; ``log_metric`` receives the share of each failure reason
            (``format/bad_envelope``, ``format/empty_answer``, …).

    Returns:
        One float per completion.

    Example:
        >>> format_reward(["<think>A causes B.</think>\\n<answer>yes</answer>", "<answer>yes</answer>"])
        [1.0, 0.0]
    """
    rewards, reasons = [], []
    for completion in completions:
        reason = _envelope_problem(completion_text(completion))
        rewards.append(0.0 if reason else 1.0)
        reasons.append(reason)
    log_reasons("format", reasons, FORMAT_REASONS, kwargs)
    return rewards


def _envelope_problem(text: str) -> str | None:
    """Why ``text`` is not a clean envelope, or ``None``. Cap first, then counts and finds: linear."""
    if len(text) > MAX_COMPLETION_CHARS:
        return "too_long"
    counts = {tag: text.count(tag) for tag in _ENVELOPE_TAGS}
    if any(count != 1 for count in counts.values()):
        repeated = counts[THINK_OPEN] > 1 or counts[ANSWER_OPEN] > 1
        return "repeated_tag" if repeated else "bad_envelope"
    # Each tag occurs once, and no tag can overlap another (each has a single "<"), so the order
    # of the four start positions decides the shape.
    think_open, think_close = text.find(THINK_OPEN), text.find(THINK_CLOSE)
    answer_open, answer_close = text.find(ANSWER_OPEN), text.find(ANSWER_CLOSE)
    if not think_open < think_close < answer_open < answer_close:
        return "bad_envelope"
    outside = (
        text[:think_open],
        text[think_close + len(THINK_CLOSE) : answer_open],
        text[answer_close + len(ANSWER_CLOSE) :],
    )
    if any(part.strip() for part in outside):
        return "bad_envelope"
    if not text[think_open + len(THINK_OPEN) : think_close].strip():
        return "empty_think"
    if not text[answer_open + len(ANSWER_OPEN) : answer_close].strip():
        return "empty_answer"
    return None


format_reward.__name__ = "format"


def trace_format_reward(completions: list[Any], **kwargs: Any) -> list[float]:
    """Share of the six CALVER slots that are present and parse, structure only: k/6.

    A slot passes when: GRAPH parses as an edge list; QUERY reads ``kind(role=value, ...)``;
    STRATEGY is a short non-empty phrase; DERIVATION has at least one line; RESULT is non-empty;
    ``<answer>`` is non-empty. Whether any of it is *right* is CALVER's job (``calver_reward``).

    Args:
        completions: plain strings or conversational completions.
        **kwargs: TRL's reward kwargs; ``log_metric`` receives the share of completions failing each
            slot (``trace_format/bad_graph``, …).

    Returns:
        One float in {0, 1/6, …, 1} per completion.

    Example:
        >>> text = ("<think>GRAPH: U -> X; U -> Y; X -> Y\\nQUERY: backdoor_set(treatment=X, outcome=Y)\\n"
        ...         "STRATEGY: backdoor criterion\\nDERIVATION:\\n- U opens X <- U -> Y\\nRESULT: {U}</think>"
        ...         "<answer>{U}</answer>")
        >>> trace_format_reward([text, "no trace"])
        [1.0, 0.0]
    """
    rewards, failures = [], []
    for completion in completions:
        passed = trace_slots_parse(completion_text(completion))
        rewards.append(sum(passed.values()) / len(SLOT_NAMES))
        failures.append([name for name, ok in passed.items() if not ok])
    log_metric = kwargs.get("log_metric")
    if callable(log_metric) and failures:
        for name in SLOT_NAMES:
            share = sum(name in f for f in failures) / len(failures)
            log_metric(f"trace_format/bad_{name}", share)
    return rewards


trace_format_reward.__name__ = "trace_format"


def trace_slots_parse(text: str) -> dict[str, bool]:
    """For each of the six slot names, whether it is present and parses (structure only).

    Texts over ``MAX_COMPLETION_CHARS`` and GRAPH slots over ``MAX_GRAPH_CHARS`` fail before any
    parser runs; nothing here raises on model output.
    """
    from faithgrpo.verifier.graphs.edges import parse_graph
    from faithgrpo.verifier.graphs.model import GraphParseError

    if not isinstance(text, str) or len(text) > MAX_COMPLETION_CHARS:
        return dict.fromkeys(SLOT_NAMES, False)  # the cap comes before any pattern runs
    trace = parse_trace(text, max_chars=MAX_COMPLETION_CHARS)
    graph_ok = False
    if trace.graph and len(trace.graph) <= MAX_GRAPH_CHARS:
        try:
            parse_graph(trace.graph)
            graph_ok = True
        except (GraphParseError, ValueError, RecursionError):
            graph_ok = False
    return {
        "graph": graph_ok,
        "query": bool(trace.query) and parse_query_call(trace.query) is not None,
        "strategy": bool(trace.strategy) and len(trace.strategy) <= MAX_STRATEGY_CHARS,
        "derivation": bool(trace.derivation),
        "result": bool(trace.result),
        "answer": bool(trace.answer),
    }
