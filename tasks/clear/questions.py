"""The reading of a CLEAR record: :func:`read_question`, and the templates of the nine path and set types.

:func:`read_question` reads every task type: the eleven structure types through
:func:`faithgrpo.tasks.clear.forms.read_form_question`, the nine others against the templates
here. The typed result is :class:`~faithgrpo.tasks.clear.values.ClearQuestion`; the record format
and the templates' wording are described in :mod:`faithgrpo.tasks.clear`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

from faithgrpo.tasks.clear.descriptions import (
    CANONICAL_TASK_TYPES,
    MAX_TEXT_CHARS,
    PATH_TASKS,
    QUESTION_TYPES,
    STRUCTURE_TASKS,
    normalize_task_type,
    parse_description,
)
from faithgrpo.tasks.clear.forms import read_form_question
from faithgrpo.tasks.clear.values import END as _END
from faithgrpo.tasks.clear.values import SET_GROUP as _SET
from faithgrpo.tasks.clear.values import (
    ClearQuestion,
    match_template,
    parse_one_path,
    parse_set,
)
from faithgrpo.tasks.clear.values import node_group as _node
from faithgrpo.tasks.clear.values import path_group as _path
from faithgrpo.verifier import graphs as C
from faithgrpo.verifier.answers import parse_node_set
from faithgrpo.verifier.graphs.edges import Path, parse_path
from faithgrpo.verifier.graphs.model import GraphParseError

_X, _Y, _V = _node("x"), _node("y"), _node("node")
_FROM = rf"from\s{_X}\sto\s{_Y}"
_VARIANT = r"(?:(?P<v1>minimal|maximal)\s)?(?:valid\s)?(?:(?P<v2>minimal|maximal)\s)?"
_ROLES = (
    rf"for\streatment\s{_X}\sand\soutcome\s{_Y}",
    rf"for\s(?:the\sordered\spair\s)?\(\s?{_X}\s?,\s?{_Y}\s?\)",
)
_NODESET = r"(?:node\s?set|set\sof\snodes)"

# form -> question types it answers
_FORM_QTYPES = {
    "find": ("FO",),
    "find_blanket": ("FO", "FA"),
    "claim": ("YN",),
    "choice": ("MC",),
    "exists": ("EX", "YN"),
    "whole": ("YN", "EX"),
    "all": ("FA",),
    "count": ("HM",),
}


def _adjustment_templates(word: str) -> list[tuple[str, str]]:
    out = []
    for role in _ROLES:
        out += [
            ("find", rf"find\s(?:one|a|an)\s{_VARIANT}{word}\sadjustment\sset\s{role}{_END}"),
            ("claim", rf"is\s{_SET}\san?\s{_VARIANT}{word}\sadjustment\sset\s{role}{_END}"),
            ("choice", rf"which\sof\sthe\sfollowing\s(?:sets\s)?is\san?\s{_VARIANT}{word}\sadjustment\sset\s{role}{_END}"),
            ("exists", rf"(?:does\sthere\sexist|is\sthere)\san?\s{_VARIANT}{word}\sadjustment\sset\s{role}{_END}"),
            ("all", rf"find\sall\s{_VARIANT}{word}\sadjustment\ssets\s{role}{_END}"),
            ("count", rf"how\smany\s{_VARIANT}{word}\sadjustment\ssets\s(?:are\sthere|exist)\s{role}{_END}"),
        ]  # fmt: skip
    return out


def _path_templates(word: str) -> list[tuple[str, str]]:
    return [
        ("find", rf"find\sthe\s(?P<v1>shortest|longest)\s{word}\spath\s{_FROM}{_END}"),
        ("find", rf"find\s(?:one|a)\s{word}\spath\s{_FROM}{_END}"),
        ("all", rf"find\sall\s(?:the\s)?{word}\spaths\s{_FROM}{_END}"),
        ("count", rf"how\smany\s{word}\spaths\s(?:are\sthere\s|are\s|exist\s)?{_FROM}{_END}"),
        ("claim", rf"is\s{_path('cpath')}\sa\s{word}\spath\s{_FROM}{_END}"),
        ("choice", rf"which\sof\sthe\sfollowing\sis\sa\s{word}\spath\s{_FROM}{_END}"),
        ("exists", rf"(?:is\sthere\sa|does\sthere\sexist\sa|are\sthere\sany)\s{word}\spaths?\s{_FROM}{_END}"),
    ]  # fmt: skip


_PARTITION = (
    r"(?:it\scan\sbe\suniquely\spartitioned\sinto\sa\sset\sc\(g\)\sof\ssubgraphs,\s"
    r"each\sa\smaximal\sc-component\.\s)?"
)
_GRAPH = r"in\s(?:this|the)\sgraph"
_TEMPLATE_TEXT: dict[str, list[tuple[str, str]]] = {
    "backdoor_adjustment_set": _adjustment_templates(r"back-?door"),
    "frontdoor_adjustment_set": _adjustment_templates(r"front-?door"),
    "d-separation": [
        ("find", rf"find\s(?:one|a)\s(?:valid\s)?{_NODESET}\sthat\scan\s[dm]-?separate\s{_X}\sand\s{_Y}{_END}"),
        ("find", rf"find\s(?:the|a|one)\s(?P<v1>minimal)\s(?:valid\s)?{_NODESET}\sthat\scan\s[dm]-?separate\s{_X}\sand\s{_Y}{_END}"),
        ("claim", rf"are\s{_X}\sand\s{_Y}\s[dm]-?separated\s(?:by|given)\s(?:the\s)?(?:{_NODESET}\s)?{_SET}{_END}"),
        ("choice", rf"which\sof\sthe\sfollowing\s(?:{_NODESET}s|sets)\scan\s[dm]-?separate\s{_X}\sand\s{_Y}{_END}"),
    ],
    "blocked_path": [
        ("find", rf"find\s(?:one|a)\s(?:valid\s)?{_NODESET}\sthat\scan\sblock\s(?:the\s)?path\s{_path('path')}{_END}"),
        ("find", rf"find\s(?:the|a|one)\s(?P<v1>minimal)\s(?:valid\s)?{_NODESET}\sthat\scan\sblock\s(?:the\s)?path\s{_path('path')}{_END}"),
        ("claim", rf"can\s(?:the\s)?path\s{_path('path')}\sbe\sblocked\sby\s(?:the\s)?(?:{_NODESET}\s)?{_SET}{_END}"),
        ("choice", rf"which\sof\sthe\sfollowing\s{_NODESET}s\scan\sblock\s(?:the\s)?path\s{_path('path')}{_END}"),
    ],
    "backdoor_path": _path_templates(r"back-?door"),
    "directed_path": _path_templates(r"directed"),
    "cycle": [
        ("find", rf"find\s(?:one|a)\scycle\s{_GRAPH}{_END}"),
        ("claim", rf"is\s{_path('cpath')}\sa\scycle\s{_GRAPH}{_END}"),
        ("choice", rf"which\sof\sthe\sfollowing\sis\sa\scycle\s{_GRAPH}{_END}"),
        ("exists", rf"(?:are\sthere\sany\scycles|is\sthere\sa\scycle|does\s(?:this|the)\sgraph\s(?:have|contain)\sa\scycle)(?:\s{_GRAPH})?{_END}"),
        ("all", rf"find\sall\s(?:the\s)?cycles\s{_GRAPH}{_END}"),
        ("count", rf"how\smany\scycles\s(?:are\sthere\s)?{_GRAPH}{_END}"),
    ],
    "markov_blanket": [
        ("find_blanket", rf"(?:what\sis|find)\sthe\smarkov\sblanket\sof\s{_V}{_END}"),
        ("claim", rf"is\s{_SET}\sthe\smarkov\sblanket\sof\s{_V}{_END}"),
        ("choice", rf"which\sof\sthe\sfollowing\sis\sthe\smarkov\sblanket\sof\s{_V}{_END}"),
        ("count", rf"how\smany\snodes\sare\s(?:there\s)?in\sthe\smarkov\sblanket\sof\s{_V}{_END}"),
    ],
    "c-component": [
        ("whole", rf"is\s(?:it|this\sgraph|the\s(?:given\s)?graph)\sa\sc-?component{_END}"),
        ("all", rf"{_PARTITION}write\sdown\s(?:such|the)\spartition\sof\sthe\sgiven\sgraph{_END}"),
        ("count", rf"{_PARTITION}how\smany\ssubgraphs\sare\sthere\sin\sc\(g\){_END}"),
    ],
}  # fmt: skip
_TEMPLATES = {
    task: [(form, re.compile(text, re.IGNORECASE)) for form, text in items]
    for task, items in _TEMPLATE_TEXT.items()
}


def option_value(task: str, text: str) -> frozenset[str] | Path | None:
    """A multiple-choice option's value: a path for path tasks, else a node set."""
    return parse_one_path(text) if task in PATH_TASKS else parse_set(text)


def read_question(record: Mapping[str, Any]) -> ClearQuestion | None:
    """Read a CLEAR record against its task's question templates (docs/clear.md, "Record format").

    Returns:
        The typed reading, or ``None`` when the task type is not one of :data:`TASK_TYPES`, the
        question type does not fit the template, or the description or question cannot be read
        (roles naming nodes outside the graph, a ``blocked_path`` path that is not a path of the
        graph, a claimed set that is not a set). Never raises.

    Example:
        >>> q = read_question({"task_type": "d-separation", "question_type": "YN",
        ...     "description": "Given a DAG (directed acyclic graph) with nodes A, B, C and directed edges A->B, B->C.",
        ...     "question": "Are node A and node C d-separated by nodeset {'B'}?"})
        >>> q.x, q.y, sorted(q.claim)
        ('A', 'C', ['B'])
    """
    try:
        if not isinstance(record, Mapping):
            return None
        task = CANONICAL_TASK_TYPES.get(normalize_task_type(record.get("task_type", "")))
        qtype = str(record.get("question_type", ""))[:8].strip().upper()
        question, description = record.get("question"), record.get("description")
        graph_type = record.get("graph_type")
        if task is None or qtype not in QUESTION_TYPES:
            return None
        if not isinstance(question, str) or not isinstance(description, str):
            return None
        if len(question) > MAX_TEXT_CHARS or len(description) > MAX_TEXT_CHARS:
            return None
        read = read_form_question if task in STRUCTURE_TASKS else read_typed_question
        return read(task, qtype, description, graph_type if isinstance(graph_type, str) else None, question)
    except (GraphParseError, ValueError, TypeError, KeyError, IndexError, RecursionError):
        return None


@functools.lru_cache(maxsize=4096)
def read_typed_question(
    task: str, qtype: str, description: str, graph_type: str | None, question: str
) -> ClearQuestion | None:
    """The typed question of one record's fields (None when the text is outside the templates)."""
    try:
        g = parse_description(description, graph_type)
    except GraphParseError:
        return None
    matched = match_template(question, qtype, _TEMPLATES[task], _FORM_QTYPES, g.node_set)
    if matched is None:
        return None
    _, groups, options = matched
    x, y, node = groups.get("x"), groups.get("y"), groups.get("node")
    v1, v2 = (groups.get("v1") or "").lower(), (groups.get("v2") or "").lower()
    if v1 and v2 and v1 != v2:
        return None
    variant = v1 or v2 or "any"
    path = None
    if groups.get("path"):
        try:
            path = parse_path(groups["path"])
        except GraphParseError:
            return None
        if not C.is_path(g, path):
            return None
    claim: frozenset[str] | Path | None = None
    if groups.get("set"):
        claim = parse_node_set(groups["set"])
        if claim is None:
            return None
    if groups.get("cpath"):
        try:
            claim = parse_path(groups["cpath"])
        except GraphParseError:
            return None
    return ClearQuestion(
        task_type=task,
        question_type=qtype,
        graph=g,
        x=x,
        y=y,
        node=node,
        path=path,
        variant=variant,
        claim=claim,
        options=tuple((letter, option_value(task, text)) for letter, text in options),
    )
