"""Parsing the six-slot CALVER trace (structure only, no causal semantics).

A trace fills five labelled slots inside ``<think>`` and puts the final answer in ``<answer>``::

    <think>
    GRAPH: U -> X; U -> Y; X -> M; M -> Y
    QUERY: backdoor_set(treatment=X, outcome=Y)
    STRATEGY: backdoor criterion
    DERIVATION:
    - backdoor path X <- U -> Y is open; conditioning on U blocks it
    - M is a descendant of X, so it is excluded
    RESULT: {U}
    </think>
    <answer>{U}</answer>

Labels are matched at the start of a line, case-insensitively, tolerating Markdown decoration
(``**GRAPH:**``, ``- QUERY:``). A slot's content runs until the next label.

**Slot discipline** (docs/rewards.md, "CALVER"): exactly one ``<think>`` and one ``</think>``; each label exactly
once, inside ``<think>``, in the order above; exactly one ``<answer>…</answer>``, after
``</think>``. Every breach is listed in :attr:`Trace.problems` (CALVER then fails every check).
Scanning is linear-time (``str.find`` and one anchored line pattern, after the length cap);
nothing here raises on model output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

SLOT_LABELS = ("GRAPH", "QUERY", "STRATEGY", "DERIVATION", "RESULT")
#: The six slots CALVER checks: the five labelled ones and the ``<answer>``.
SLOT_NAMES = ("graph", "query", "strategy", "derivation", "result", "answer")

DEFAULT_MAX_CHARS = 20_000
MAX_QUERY_ARGS = 16

_LABEL_RE = re.compile(
    r"^[ \t>*#_\-]*(GRAPH|QUERY|STRATEGY|DERIVATION|RESULT)[ \t*_]*:[ \t*_]*(.*)$",
    re.IGNORECASE | re.MULTILINE,
)
# _LABEL_RE led by the newline before the line instead of "^": a literal first character, which the
# regex engine scans for at C speed. On "\n" + body it matches exactly where _LABEL_RE matches on body
# (line starts are position 0 and after each "\n"), shifted by one; the rest of the pattern is the same.
_NL_LABEL_RE = re.compile(
    r"\n[ \t>*#_\-]*(GRAPH|QUERY|STRATEGY|DERIVATION|RESULT)[ \t*_]*:[ \t*_]*(.*)$",
    re.IGNORECASE | re.MULTILINE,
)
_QUERY_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]{0,40})\s*\((.{0,2000})\)\s*\.?\s*$", re.DOTALL)
_ARG_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]{0,40})\s*=\s*(.+?)\s*$", re.DOTALL)
_BULLET_RE = re.compile(r"^\s*(?:[-*•]|\d{1,3}[.)]|Step\s+\d{1,3}\s*:)\s*", re.IGNORECASE)
# In text whose only line break is "\n", str.splitlines() splits exactly at each "\n", and _BULLET_RE on
# a line is this pattern after the "\n" before it (\s, which cannot meet a line break inside a line,
# becomes "whitespace but \n" so that no match leaves its line): one sub strips every line's bullet.
_NL_BULLET_RE = re.compile(
    r"\n[^\S\n]*(?:[-*•]|\d{1,3}[.)]|Step[^\S\n]+\d{1,3}[^\S\n]*:)[^\S\n]*", re.IGNORECASE
)
_OTHER_BREAK_RE = re.compile("[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")  # str.splitlines' other breaks


@dataclass(frozen=True)
class Trace:
    """The raw text of each slot; ``None`` where the slot is missing."""

    graph: str | None = None
    query: str | None = None
    strategy: str | None = None
    derivation: tuple[str, ...] | None = None
    result: str | None = None
    answer: str | None = None
    problems: tuple[str, ...] = field(default=())

    def missing(self) -> list[str]:
        """Names of the slots that are absent or empty."""
        return [name for name in SLOT_NAMES if not getattr(self, name)]


def _tag_problems(text: str) -> tuple[list[str], tuple[int, int] | None, tuple[int, int] | None]:
    """Breaches of the tag discipline, the ``<think>`` body span and the ``<answer>`` content span."""
    problems: list[str] = []
    think = _tag_span(text, "think", "<think>", "</think>", problems)
    answer = _tag_span(text, "answer", "<answer>", "</answer>", problems)
    if think and answer and answer[0] < think[1]:
        problems.append("<answer> must come after </think>")
    return problems, think, answer


def _usual_tags(text: str) -> tuple[list[str], tuple[int, int], tuple[int, int]] | None:
    """``_tag_problems(text)`` when each tag is there once, in the order <think></think><answer></answer>;
    else None (the general check then runs)."""
    think, end = text.find("<think>"), text.find("</think>")
    answer, answer_end = text.find("<answer>"), text.find("</answer>")
    # a tag cannot overlap itself: one not found again after its first place is there exactly once
    if (
        0 <= think < end < answer < answer_end
        and text.find("<think>", think + 7) < 0
        and text.find("</think>", end + 8) < 0
        and text.find("<answer>", answer + 8) < 0
        and text.find("</answer>", answer_end + 9) < 0
    ):
        return [], (think + 7, end), (answer + 8, answer_end)
    return None


def _tag_span(
    text: str, name: str, open_tag: str, close_tag: str, problems: list[str]
) -> tuple[int, int] | None:
    """The content span of the one ``open_tag…close_tag`` pair, or None after noting the breach."""
    start, end = text.find(open_tag), text.find(close_tag)
    # exactly once each: found, and not again after (a tag cannot overlap itself, so this is a
    # count of 1 without scanning the whole text twice)
    once = (
        start >= 0
        and end >= 0
        and text.find(open_tag, start + len(open_tag)) < 0
        and text.find(close_tag, end + len(close_tag)) < 0
    )
    if not once:
        # non-overlapping occurrences; more than two are reported as "3+"
        n_open, n_close = min(text.count(open_tag), 3), min(text.count(close_tag), 3)
        problems.append(f"<{name}> and </{name}> must appear exactly once each "
                        f"(found {n_open}{'+' if n_open > 2 else ''} and "
                        f"{n_close}{'+' if n_close > 2 else ''})")  # fmt: skip
        return None
    if end < start:
        problems.append(f"</{name}> comes before <{name}>")
        return None
    return start + len(open_tag), end


def parse_trace(text: str, *, max_chars: int = DEFAULT_MAX_CHARS) -> Trace:
    """Split a completion into the six CALVER slots and note every breach of the slot discipline.

    Args:
        text: the completion text.
        max_chars: completions longer than this are not parsed (every slot missing).

    Returns:
        A :class:`Trace`; ``problems`` lists the breaches (a repeated or misplaced label, several
        ``<answer>`` tags, ...). Slots are still filled where they can be read, for diagnostics.

    Example:
        >>> t = parse_trace("<think>GRAPH: A -> B\\nRESULT: {A}</think><answer>{A}</answer>")
        >>> t.graph, t.result, t.answer, t.missing(), t.problems
        ('A -> B', '{A}', '{A}', ['query', 'strategy', 'derivation'], ())
        >>> parse_trace("<think>RESULT: {A}\\nRESULT: {B}</think><answer>{A}</answer>").problems
        ('RESULT appears 2 times; each label must appear exactly once',)
    """
    if not isinstance(text, str) or not text.strip():
        return Trace(problems=("empty completion",))
    if len(text) > max_chars:
        return Trace(problems=(f"completion longer than {max_chars} characters",))
    problems, think, answer_span = _usual_tags(text) or _tag_problems(text)
    answer = text[answer_span[0] : answer_span[1]].strip() if answer_span else None
    body = text[think[0] : think[1]] if think else text

    # labels inside <think> (matched in the body, so one right after "<think>" starts a line) and outside.
    # Split on the label lines: [text before, label, first-line text, text up to the next label line, ...]
    parts = _NL_LABEL_RE.split("\n" + body)
    # a label before "<think>" or from "</think>" on (search with pos/endpos reads like the slices
    # text[:start] and text[end:]: "</think>" itself cannot start a label)
    if think and (_LABEL_RE.search(text, 0, think[0] - 7) or _LABEL_RE.search(text, think[1])):
        problems.append("a slot label appears outside <think>")
    labels = [label.upper() for label in parts[1::3]]
    if labels != _ALL_IN_ORDER:  # the usual trace (each label once, in order) breaches nothing here
        _label_problems(labels, problems)

    # a slot is its label line's text and the lines up to the next label line (the first of a repeated
    # label counts); without <think> the last one also ends at "<answer>"
    rests = parts[3::3]
    if think is None and rests:
        cut = rests[-1].find("<answer>")
        if cut >= 0:
            rests[-1] = rests[-1][:cut]
    slots: dict[str, str] = {}
    for label, first, rest in zip(labels, parts[2::3], rests):
        if label not in slots:
            slots[label] = (first + rest).strip()

    derivation = None
    if slots.get("DERIVATION"):
        # _BULLET_RE is anchored at the start (no MULTILINE): one match at most, so slicing it off
        # equals re.sub
        slot = slots["DERIVATION"]
        if _other_breaks(slot):
            bullet = _BULLET_RE.match
            lines = [(line[m.end() :] if (m := bullet(line)) else line).strip() for line in slot.splitlines()]
        else:  # "\n" is the only line break: strip every line's bullet in one pass (see _NL_BULLET_RE)
            lines = [line.strip() for line in _NL_BULLET_RE.sub("\n", "\n" + slot).split("\n")]
        derivation = tuple(line for line in lines if line) or None
    return Trace(
        graph=slots.get("GRAPH") or None,
        query=slots.get("QUERY") or None,
        strategy=slots.get("STRATEGY") or None,
        derivation=derivation,
        result=slots.get("RESULT") or None,
        answer=answer or None,
        problems=tuple(problems),
    )


_ALL_IN_ORDER = list(SLOT_LABELS)


def _label_problems(labels: list[str], problems: list[str]) -> None:
    """Note repeated labels and labels out of the SLOT_LABELS order."""
    for label in SLOT_LABELS:
        count = labels.count(label)
        if count > 1:
            problems.append(f"{label} appears {count} times; each label must appear exactly once")
    present = list(dict.fromkeys(labels))
    if present != [label for label in SLOT_LABELS if label in present]:
        problems.append(f"slot labels out of order: {', '.join(present)} (expected {', '.join(SLOT_LABELS)})")


def _other_breaks(text: str) -> bool:
    """Whether ``text`` has a line break other than "\\n" (``_OTHER_BREAK_RE``)."""
    if text.isascii():  # only the ASCII ones can occur: a few C-speed scans instead of the regex
        return any(ch in text for ch in _ASCII_OTHER_BREAKS)
    return _OTHER_BREAK_RE.search(text) is not None


_ASCII_OTHER_BREAKS = "\r\x0b\x0c\x1c\x1d\x1e"


def parse_query_call(text: str) -> tuple[str, dict[str, str]] | None:
    """Parse ``kind(role=value, ...)`` into ``(kind, {role: value})``; ``None`` if it does not parse.

    Values are kept as stripped text (a node name, ``{A, B}``, a number); commas inside braces,
    brackets or parentheses do not split arguments.

    Example:
        >>> parse_query_call("ci_test(x=A, y=B, given={C, D})")
        ('ci_test', {'x': 'A', 'y': 'B', 'given': '{C, D}'})
    """
    if not isinstance(text, str):
        return None
    match = _QUERY_RE.match(text.strip())
    if match is None:
        return None
    kind, inner = match.group(1), match.group(2)
    args: dict[str, str] = {}
    for part in _split_top_level(inner):
        if not part.strip():
            continue
        arg = _ARG_RE.match(part)
        key = arg.group(1).lower() if arg else None
        if arg is None or key in args or len(args) >= MAX_QUERY_ARGS:
            return None  # unparsable, ambiguous (a role given twice) or oversized
        args[key] = arg.group(2)
    return kind.lower(), args


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside (), [] or {}; unbalanced input gives one part."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(depth - 1, 0)
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts
