"""Candidate parsing and the CLEAR judge: :func:`judge`, :func:`listed_answers`.

The record format and the candidate forms are described in :mod:`faithgrpo.tasks.clear`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from faithgrpo.tasks.clear.descriptions import MAX_ITEMS, MAX_TEXT_CHARS, PATH_TASKS, STRUCTURE_TASKS
from faithgrpo.tasks.clear.questions import option_value, read_question
from faithgrpo.tasks.clear.truth import (
    answer_universe,
    cycle_nodes,
    is_supported,
    question_truth,
    rotate_cycle,
    verdict,
)
from faithgrpo.tasks.clear.values import (
    PATH_LIT_RE,
    SEPARATORS_RE,
    SET_LIT_RE,
    ClearQuestion,
    parse_one_path,
    parse_set,
)
from faithgrpo.tasks.clear.values import as_items as _items
from faithgrpo.tasks.clear.values import parse_count as _parse_count
from faithgrpo.tasks.clear.values import parse_letter as _parse_letter
from faithgrpo.tasks.clear.values import parse_path_list as _parse_path_list
from faithgrpo.tasks.clear.values import single as _single
from faithgrpo.tasks.clear.verdicts import judge_structure
from faithgrpo.verifier.answers import parse_node_set, parse_yes_no
from faithgrpo.verifier.graphs.edges import Path


# ---------------------------------------------------------------------------------------------
# candidates
def _parse_set_list(candidate: Any, limit: int = MAX_ITEMS) -> list[frozenset[str]] | None:
    """A list of sets; ``None`` when unreadable or longer than ``limit`` (a wrong FA answer anyway)."""
    items = _items(candidate)
    if isinstance(items, list):
        if len(items) > limit:
            return None
        values = [parse_set(c) for c in items]
        return None if any(v is None for v in values) else values
    if items is None:
        return None
    lits = SET_LIT_RE.findall(items)
    if len(lits) > limit or not SEPARATORS_RE.fullmatch(SET_LIT_RE.sub(" ", items)):
        return None
    values = [parse_node_set(lit) for lit in lits]
    return None if any(v is None for v in values) else values


_FLIP = {"->": "<-", "<-": "->", "<->": "<->"}


def _parse_value(q: ClearQuestion, candidate: Any) -> frozenset[str] | Path | None:
    candidate = _single(candidate)
    if not isinstance(candidate, str):
        return None
    return parse_one_path(candidate) if q.task_type in PATH_TASKS else parse_set(candidate)


def _judge_all(q: ClearQuestion, candidate: Any) -> bool | None:
    universe = answer_universe(q)
    if universe is None:
        return None
    # more members than valid answers is wrong: stop reading there (hostile lists stay cheap)
    limit = len(universe) + 1
    max_chars = 72 * len(q.graph.nodes)  # a simple path: <= |V| names of <= 64 chars, arrows
    if isinstance(candidate, str) and len(candidate) > limit * (max_chars + 16) + 64:
        return False
    if q.task_type in ("backdoor_path", "directed_path"):
        paths = _parse_path_list(candidate, limit, max_chars)
        if paths is None:
            return False
        keys = []
        for nodes, marks in paths:
            if nodes[0] == q.y and nodes[-1] == q.x:  # written from the other end
                nodes, marks = nodes[::-1], tuple(_FLIP[m] for m in reversed(marks))
            keys.append((nodes, marks))
        return len(set(keys)) == len(keys) and set(keys) == set(universe)
    if q.task_type == "cycle":
        paths = _parse_path_list(candidate, limit, max_chars)
        if paths is None:
            return False
        keys = []
        for key in paths:
            nodes = cycle_nodes(q.graph, Path(*key), claim=False)
            if not nodes:
                return False
            keys.append(rotate_cycle(nodes))
        return len(set(keys)) == len(keys) and set(keys) == set(universe)
    sets = _parse_set_list(candidate, limit)
    if sets is None:
        return False
    return len(set(sets)) == len(sets) and set(sets) == set(universe)


def _judge(q: ClearQuestion, candidate: Any) -> bool | None:
    if q.task_type in STRUCTURE_TASKS:
        return judge_structure(q, candidate)
    if not is_supported(q):
        return None
    qt = q.question_type
    if qt == "MC":
        text = _single(candidate)
        if not isinstance(text, str) or len(text) > 1024:  # a letter, perhaps with its option
            return False
        parsed = _parse_letter(text)
        options = dict(q.options)
        if parsed is None or parsed[0] not in options:
            return False
        letter, rest = parsed
        value = options[letter]
        if value is None:
            return None
        if rest:
            restated = option_value(q.task_type, rest)
            if restated is not None and restated != value:
                return False
        return verdict(q, value, claim=True)
    if qt in ("YN", "EX"):
        truth = question_truth(q)
        if truth is None:
            return None
        said = parse_yes_no(_single(candidate))
        return said is not None and said == truth
    if qt == "HM":
        universe = answer_universe(q)
        if universe is None:
            return None
        n = _parse_count(_single(candidate))
        return n is not None and n == len(universe)
    if qt == "FA" and q.task_type != "markov_blanket":
        return _judge_all(q, candidate)
    value = _parse_value(q, candidate)
    if value is None:
        return False
    return verdict(q, value, claim=False)


def judge(record: Mapping[str, Any], candidate: Any) -> bool | None:
    """Whether ``candidate`` correctly answers a CLEAR record, under the graph predicate.

    Any valid answer counts, not only the listed one (``record["answer"]`` is not read).

    Args:
        record: a CLEAR record (``description``, ``graph_type``, ``question``, ``question_type``,
            ``task_type``).
        candidate: the answer: a set (``"{'M', 'H'}"``, ``"set()"``), a path (``"L<-W->A"``), a
            list of sets or paths for FA (a string such as ``"[{'I', 'Y'}, {'U'}]"`` or
            ``"V->J, V->E->J"``, or an actual list of strings), an option letter, a count, or
            ``Yes.``/``No.``.

    Returns:
        ``True``/``False``; ``None`` when the record is not supported (see :func:`read_question`
        and the open cases in the module docstring). An unreadable candidate is ``False``. Never
        raises.

    Example:
        >>> rec = {"task_type": "backdoor_adjustment_set", "question_type": "FO", "graph_type": "DAG",
        ...        "description": "Given a DAG (directed acyclic graph) with nodes U, X, Y and directed edges U->X, U->Y, X->Y.",
        ...        "question": "Find one valid backdoor adjustment set for treatment X and outcome Y."}
        >>> judge(rec, "{'U'}"), judge(rec, "set()"), judge({**rec, "task_type": "identification"}, "{'U'}")
        (True, False, None)
    """
    try:
        q = read_question(record)
        return None if q is None else _judge(q, candidate)
    except Exception:  # a judge on model output must never raise
        return None


def listed_answers(record: Mapping[str, Any]) -> list[str] | None:
    """The record's listed answer split into candidates :func:`judge` accepts one by one.

    FO answers that list every valid set (``"[{'M', 'H'}, {'M'}]"``) give one string per member
    (``["{'M', 'H'}", "{'M'}"]``); any other answer gives one element (a JSON-array answer, such as
    backdoor_path FA, as its JSON text). ``None`` when there is no readable answer.

    Example:
        >>> listed_answers({"question_type": "FO", "answer": "[{'M', 'H'}, set()]"})
        ["{'M', 'H'}", 'set()']
    """
    if not isinstance(record, Mapping):
        return None
    answer = record.get("answer")
    qtype = str(record.get("question_type", ""))[:8].strip().upper()
    if isinstance(answer, (list, tuple)):
        if len(answer) > MAX_ITEMS or not all(isinstance(a, str) for a in answer):
            return None
        return list(answer) if qtype == "FO" else [json.dumps(list(answer))]
    if isinstance(answer, bool) or answer is None:
        return None
    if isinstance(answer, int):
        return [str(answer)]
    if not isinstance(answer, str) or len(answer) > MAX_TEXT_CHARS:
        return None
    text = answer.strip()
    if qtype == "FO" and text.startswith("[") and text.endswith("]"):
        inner = text[1:-1]
        sets = SET_LIT_RE.findall(inner)
        if sets and SEPARATORS_RE.fullmatch(SET_LIT_RE.sub(" ", inner)):
            return sets
        paths = PATH_LIT_RE.findall(inner)
        if paths and SEPARATORS_RE.fullmatch(PATH_LIT_RE.sub(" ", inner)):
            return paths
    return [answer]
