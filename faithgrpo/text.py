"""Reading model completions: the text of a completion, its ``<think>`` and ``<answer>`` spans.

Every function here is linear in the length of its input: tags are located with ``str.find`` /
``str.rfind`` / ``str.count`` (C loops that never revisit a character), or, in :func:`tag_spans`,
with a regex made of fixed literal alternatives, which reads at most a dozen characters per
attempt and cannot backtrack. Nothing here raises on model output (non-strings read as no text).
Length caps are the caller's policy (a reward's ``max_chars``) and are applied before any pattern
runs there.
"""

from __future__ import annotations

import functools
import itertools
import re
from typing import Any, NamedTuple

__all__ = [
    "Tag",
    "completion_text",
    "count_tags",
    "extract_answer",
    "extract_think",
    "prompt_text",
    "tag_spans",
]

ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
# Names the tag helpers accept: short identifiers, so a name never carries regex syntax.
_TAG_NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,31}")


def completion_text(completion: Any) -> str:
    """Return the text of a TRL completion.

    Accepts a plain string or a conversational completion (a list of ``{"role", "content"}``
    messages, of which the assistant turns are joined). Anything else gives ``""``.

    Example:
        >>> completion_text([{"role": "assistant", "content": "<answer>1</answer>"}])
        '<answer>1</answer>'
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        content = completion.get("content")
        return content if isinstance(content, str) else ""
    if isinstance(completion, (list, tuple)):
        parts = []
        for message in completion:
            if isinstance(message, dict) and message.get("role", "assistant") == "assistant":
                content = message.get("content")
                if isinstance(content, str):
                    parts.append(content)
        return "".join(parts)
    return ""


def prompt_text(prompt: Any) -> str:
    """Return the text of a TRL prompt: a string, or all message contents joined by newlines."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, (list, tuple)):
        return "\n".join(
            m["content"] for m in prompt if isinstance(m, dict) and isinstance(m.get("content"), str)
        )
    return ""


def extract_answer(text: str) -> str | None:
    """Return the stripped content of the last complete ``<answer>…</answer>`` block, or ``None``.

    The block is the last ``</answer>`` and the nearest ``<answer>`` before it; text between an
    earlier ``<answer>`` and that one (a retracted or unclosed answer) is not part of it. Two
    ``rfind`` calls: linear time whatever the tags.

    Example:
        >>> extract_answer("<answer>a</answer> <answer> {X} </answer>")
        '{X}'
        >>> extract_answer("<answer><answer>b</answer> trailing <answer>unclosed")
        'b'
        >>> extract_answer("<answer>never closed") is None
        True
    """
    if not isinstance(text, str):
        return None
    close = text.rfind(ANSWER_CLOSE)
    if close < 0:
        return None
    start = text.rfind(ANSWER_OPEN, 0, close)
    if start < 0:
        return None
    return text[start + len(ANSWER_OPEN) : close].strip()


def extract_think(text: str) -> str | None:
    """Return the content of the first ``<think>…</think>`` block (not stripped), or ``None``.

    The block is the first ``<think>`` and the first ``</think>`` after it. Two ``find`` calls.

    Example:
        >>> extract_think("<think> a </think><think>b</think>")
        ' a '
        >>> extract_think("</think><think>x") is None
        True
    """
    if not isinstance(text, str):
        return None
    start = text.find(THINK_OPEN)
    if start < 0:
        return None
    start += len(THINK_OPEN)
    close = text.find(THINK_CLOSE, start)
    return text[start:close] if close >= 0 else None


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or _TAG_NAME_RE.fullmatch(name) is None:
        raise ValueError(f"tag name must be a short identifier such as 'answer', got {name!r}")
    return name


def count_tags(text: str, name: str) -> tuple[int, int]:
    """Count ``<name>`` and ``</name>`` occurrences: ``(opens, closes)``, in linear time.

    Exact, case-sensitive tags without attributes (``<answer >`` or ``<Answer>`` do not count).
    Non-overlapping by construction: a closing tag never contains an opening one.

    Args:
        text: the completion text; a non-string counts as no text.
        name: the tag name, e.g. ``"answer"`` (``ValueError`` for anything but a short identifier:
            a programming error, not model output).

    Example:
        >>> count_tags("<think>a</think><answer>b</answer><answer>", "answer")
        (2, 1)
        >>> count_tags("<think><think>", "think")
        (2, 0)
        >>> count_tags(None, "think")
        (0, 0)
    """
    name = _check_name(name)
    if not isinstance(text, str):
        return 0, 0
    return text.count(f"<{name}>"), text.count(f"</{name}>")


class Tag(NamedTuple):
    """One tag found by :func:`tag_spans`: ``text[start:end]`` is ``<name>`` or ``</name>``."""

    start: int
    end: int
    name: str
    closing: bool


@functools.lru_cache(maxsize=32)
def _tag_re(names: tuple[str, ...]) -> re.Pattern[str]:
    # "<", an optional "/", one of a few literal names, ">": every attempt reads at most
    # 3 + len(longest name) characters and the alternatives cannot backtrack into each other.
    alternatives = "|".join(re.escape(n) for n in sorted(set(names), key=len, reverse=True))
    return re.compile(rf"<(/?)({alternatives})>")


def tag_spans(
    text: str, names: tuple[str, ...] | str = ("think", "answer"), limit: int | None = None
) -> list[Tag]:
    """Every ``<name>`` / ``</name>`` tag of the given names, in text order, in linear time.

    This is what slot discipline is checked against: a strict envelope is exactly
    ``[<think>, </think>, <answer>, </answer>]`` in that order, with ``limit=5`` enough to tell
    (five or more tags is already a failure, and the scan stops there).

    Args:
        text: the completion text; a non-string has no tags.
        names: one tag name or a tuple of them (short identifiers; ``ValueError`` otherwise).
        limit: stop after this many tags (``None``: all of them). Bounds the output on hostile
            input such as a megabyte of ``<answer>``.

    Returns:
        A list of :class:`Tag` ``(start, end, name, closing)``, ordered by position; tags never
        overlap.

    Example:
        >>> [(t.start, t.name, t.closing) for t in tag_spans("<think>r</think> <answer>a</answer>")]
        [(0, 'think', False), (8, 'think', True), (17, 'answer', False), (26, 'answer', True)]
        >>> [t.name for t in tag_spans("<answer>" * 1000, "answer", limit=2)]
        ['answer', 'answer']
        >>> tag_spans("<think >x</Think>")
        []
    """
    if isinstance(names, str):
        names = (names,)
    names = tuple(_check_name(n) for n in names)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValueError(f"limit must be a non-negative int or None, got {limit!r}")
    if not isinstance(text, str) or not names:
        return []
    matches = _tag_re(names).finditer(text)
    if limit is not None:
        matches = itertools.islice(matches, limit)
    return [Tag(m.start(), m.end(), m.group(2), bool(m.group(1))) for m in matches]
