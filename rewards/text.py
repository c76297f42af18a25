"""Reading model completions: the text of a completion, its ``<think>`` and ``<answer>`` spans.

Every parser here is bounded (regexes without nested quantifiers, inputs capped by the caller) and
never raises on model output.
"""

from __future__ import annotations

import re
from typing import Any

_ANSWER_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_THINK_RE = re.compile(r"<think>(.*?)</think>", re.DOTALL)


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
    """Return the stripped content of the last ``<answer>…</answer>`` block, or ``None``.

    Example:
        >>> extract_answer("<answer>a</answer> <answer> {X} </answer>")
        '{X}'
    """
    matches = _ANSWER_RE.findall(text)
    return matches[-1].strip() if matches else None


def extract_think(text: str) -> str | None:
    """Return the content of the first ``<think>…</think>`` block, or ``None``."""
    match = _THINK_RE.search(text)
    return match.group(1) if match else None
