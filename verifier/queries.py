"""Causal query kinds: the query JSON, answer parsing, grading and enumeration of valid answers.

A causal problem (docs/tasks.md, "The problem JSON") is ``{"graph": {...}, "query": {...}, "cpts": {...}?, "text": ...}``.
``problem["query"]`` is a dict with a ``"kind"`` and the kind's fields below. Node fields marked
*node* take one node name; fields marked *nodes* take a name or a list of names.

===============  ==================================  ==============  ==============  =====================
kind             query fields                        graph types     answer          answer is valid when
===============  ==================================  ==============  ==============  =====================
backdoor_set     treatment, outcome (node);          DAG, ADMG       node set        backdoor criterion
                 variant: any | minimal | maximal                                    (minimal: no proper
                                                                                     subset valid; maximal:
                                                                                     no proper superset;
                                                                                     unique in DAGs)
frontdoor_set    treatment, outcome (node);          DAG, ADMG       node set        Pearl's 3 conditions
                 variant: any | minimal | maximal                                    (minimal / maximal as
                                                                                     above; maximal is
                                                                                     unique)
dsep_set         x, y (nodes); variant: any|minimal  DAG             node set        Z d-separates x, y
msep_set         x, y (nodes); variant: any|minimal  ADMG, DAG       node set        Z m-separates x, y
ci_test          x, y (nodes); given (nodes, [])     DAG, ADMG       yes / no        yes iff x ⊥ y | given
directed_path    treatment, outcome (node)           DAG, ADMG, DG   yes / no        yes iff do(X) can
                                                                                     affect Y (directed path)
mediator         treatment, outcome (node)           DAG, ADMG       one node        on a directed path
                                                                                     X -> ... -> M -> ... -> Y
cycle            (none)                              DG              node sequence   simple directed cycle
ate              treatment, outcome (node);          DAG + ``cpts``  yes / no        yes iff the causal ATE
                 threshold (number); margin (>= 0,                   (+ optional ψ)  ψ > threshold; a ψ given
                 default 0); tolerance (default                                      must be within tolerance
                 0.01)                                                               of the true ψ
===============  ==================================  ==============  ==============  =====================

Examples::

    {"kind": "backdoor_set", "treatment": "X", "outcome": "Y", "variant": "minimal"}
    {"kind": "ci_test", "x": "A", "y": ["B"], "given": ["C", "D"]}
    {"kind": "ate", "treatment": "X", "outcome": "Y", "threshold": 0.1, "margin": 0.02}
    {"kind": "cycle"}

Answer text accepted by ``parse_answer`` (everything is bounded; anything else parses to ``None``):

* node set: ``{U, V}``, ``{'U', 'V'}``, ``["U", "V"]``, ``U, V``, ``U and V``, ``set()``, ``{}``,
  ``∅``, ``none``, ``empty set``; prose may come before exactly one ``{...}``/``[...]`` block
  (``Z = {U}``, ``The adjustment set is {U}.``), nothing but ``.``/``!`` after it.
* yes / no: ``yes``, ``No.``, ``true``, ``false``; a lone yes or no word anywhere in the text.
* one node: ``M``, ``'M'``, ``{M}``.
* cycle: ``A -> B -> C -> A``, ``A → B → C``, ``[A, B, C]``, ``A, B, C`` (closing repeat optional).
* ate: a yes/no word plus, optionally, ``ψ = 0.23`` (also ``psi``, ``ATE``, ``effect``; ``=``, ``:``,
  ``≈``), one ψ value at most.

**One answer**. An answer slot (RESULT, ``<answer>``) commits to one answer: text that
offers alternatives parses to ``None``, so it fails CALVER's result and answer checks and
``grade_answer``. It offers alternatives when it contains the words ``or``, ``either``,
``otherwise``, ``alternatively``, ``unless``, ``vice versa`` or a ``/`` outside braces (``{E, Y} or
V``, ``A / B``, ``either yes or no``; inside a set's braces every word is a node name), or, in a
yes/no or ate answer, verdicts of both kinds (``yes``/``true`` and ``no``/``false``; a ``no``,
``true`` or ``false`` followed by a word, as in ``no open path``, is prose), or, for a set, anything
after its block (a second set after prose); see :func:`~faithgrpo.verifier.answers.offers_alternatives`.
A node or a cycle is one answer by its grammar (names and arrows only).
The low-level readers (``parse_node_set``, ``parse_yes_no``, ...) stay lenient for claims and CLEAR.

Canonical forms (``format_answer``, used for plurality voting and exact match): sets ``{A, B}``
in natural node order (``{}`` when empty), ``yes``/``no``, a node name, cycles ``A -> B -> C -> A``
rotated to start at their smallest node.

Each kind is a :class:`~faithgrpo.verifier.query_kinds.QueryKind` in ``QUERY_KINDS``
(:mod:`faithgrpo.verifier.query_kinds`); this module restates, parses and grades.

Queries are restated in traces as ``kind(field=value, ...)`` (see :func:`format_query` and
:func:`parse_query`), e.g. ``backdoor_set(treatment=X, outcome=Y, variant=minimal)``.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from typing import Any

from faithgrpo.text import extract_answer
from faithgrpo.verifier.answers import MEMO_TEXT_CHARS, QUOTES, format_set, parse_node_set
from faithgrpo.verifier.graphs.model import CausalGraph, node_sort_key
from faithgrpo.verifier.query_kinds import QUERY_KINDS, QueryKind
from faithgrpo.verifier.query_predicates import query_variant

__all__ = [
    "MODES",
    "format_query",
    "grade_answer",
    "load_problem",
    "normalize_answer",
    "parse_query",
    "query_matches",
]

MAX_QUERY_CHARS = 2_048
#: A problem's ``mode``: the graph is in the prompt (``supplied``) or must be built from its text
#: (``constructed``, graded against the hidden source graph).
MODES = ("supplied", "constructed")


# ---------------------------------------------------------------------------------------------
# query restatement
def format_query(query: Mapping) -> str:
    """Render a query as ``kind(field=value, ...)`` (roles first, then parameters present in the query).

    Example:
        >>> format_query({"kind": "ci_test", "x": "A", "y": ["B"], "given": ["D", "C"]})
        'ci_test(x=A, y=B, given={C, D})'
    """
    kind = QUERY_KINDS.get(str(query.get("kind")))
    fields = (*kind.roles, *kind.params) if kind else tuple(k for k in query if k != "kind")
    parts = []
    for f in fields:
        if f not in query:
            continue
        v = query[f]
        if isinstance(v, (list, tuple, set, frozenset)):
            v = next(iter(v)) if len(v) == 1 and f in ("x", "y") else format_set(v)
        parts.append(f"{f}={v}")
    return f"{query.get('kind')}({', '.join(parts)})"


_QUERY_RE = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*\((.*)\)\s*\.?\s*", re.DOTALL)
_ARG_RE = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*[=:]\s*(\{[^{}]*\}|\[[^\[\]]*\]|[^,]*)\s*(?:,|$)")


def parse_query(text: Any) -> dict | None:
    """Parse ``kind(field=value, ...)`` into a query dict, or ``None``. Never raises.

    Set/list values become sorted lists, numbers become floats, other values stay strings.

    Example:
        >>> parse_query("backdoor_set(treatment=X, outcome=Y, variant=minimal)")
        {'kind': 'backdoor_set', 'treatment': 'X', 'outcome': 'Y', 'variant': 'minimal'}
    """
    if not isinstance(text, str) or len(text) > MAX_QUERY_CHARS:
        return None
    m = _QUERY_RE.fullmatch(text)
    if not m:
        return None
    out: dict[str, Any] = {"kind": m.group(1)}
    args = m.group(2).strip()
    pos = 0
    while pos < len(args):
        a = _ARG_RE.match(args, pos)
        if not a or a.end() == pos:
            return None
        key, raw = a.group(1), a.group(2).strip().strip(QUOTES)
        if raw[:1] in "{[":
            items = parse_node_set(raw)
            if items is None:
                return None
            value: Any = sorted(items, key=node_sort_key)
        else:
            try:
                value = float(raw)
            except ValueError:
                value = raw
        out[key] = value
        pos = a.end()
    return out


def query_matches(query: Mapping, text: Any) -> bool:
    """Whether ``text`` restates ``query``: same kind, same role nodes (as sets), same variant.

    Numeric parameters, when restated, must match within 1e-9. Never raises.

    Example:
        >>> q = {"kind": "backdoor_set", "treatment": "X", "outcome": "Y"}
        >>> query_matches(q, "backdoor_set(treatment=X, outcome=Y)"), query_matches(q, "backdoor_set(X, Y)")
        (True, False)
    """
    try:
        parsed = parse_query(text)
        kind = QUERY_KINDS.get(str(query.get("kind")))
        if parsed is None or kind is None or parsed["kind"] != kind.name:
            return False

        def as_set(v: Any) -> frozenset:
            return frozenset([v] if isinstance(v, str) else v or [])

        for role in kind.roles:
            if role == "given" and role not in query and role not in parsed:
                continue
            if as_set(parsed.get(role)) != as_set(query.get(role)):
                return False
        if "variant" in kind.params and str(parsed.get("variant", "any")) != query_variant(query):
            return False
        for p in kind.params:
            restated = parsed.get(p) if p != "variant" and p in query else None
            if restated is not None and (
                not isinstance(restated, float) or abs(restated - float(query[p])) > 1e-9
            ):
                return False
        return True
    except Exception:  # query_matches must never raise on model text
        return False


# ---------------------------------------------------------------------------------------------
# problem-level entry points
def load_problem(problem: Mapping | str) -> tuple[CausalGraph, dict, dict | None]:
    """Split a causal problem (dict or JSON string) into ``(graph, query, cpts)``, checking the query.

    Raises:
        ValueError: malformed JSON, graph, query or CPTs (the message says which).
    """
    if isinstance(problem, str):
        try:
            problem = json.loads(problem)
        except json.JSONDecodeError as exc:
            raise ValueError(f"problem is not valid JSON: {exc}") from None
    if not isinstance(problem, Mapping):
        raise ValueError("problem must be a dict (or its JSON) with 'graph' and 'query'")
    if "graph" not in problem or "query" not in problem:
        raise ValueError("problem needs 'graph' and 'query' fields")
    graph = CausalGraph.from_dict(problem["graph"])
    query = problem["query"]
    if not isinstance(query, Mapping) or query.get("kind") not in QUERY_KINDS:
        raise ValueError(
            f"unknown query kind {query.get('kind') if isinstance(query, Mapping) else query!r}; "
            f"known kinds: {sorted(QUERY_KINDS)}"
        )
    cpts = problem.get("cpts")
    QUERY_KINDS[query["kind"]].check_query(graph, query, cpts)
    return graph, dict(query), cpts


def _answer_span(answer_text: Any) -> Any:
    if isinstance(answer_text, str) and "<answer>" in answer_text:
        return extract_answer(answer_text) or ""
    return answer_text


def grade_answer(problem: Mapping | str, answer_text: Any) -> bool:
    """Whether ``answer_text`` is a valid answer to ``problem`` under the graph predicate.

    Any member of the valid class counts, not only the listed ``answer``. A full completion is
    accepted too (the last ``<answer>…</answer>`` is graded). Never raises: unparsable answers,
    unknown query kinds and malformed problems give ``False``.

    Args:
        problem: the causal problem dict (or JSON string).
        answer_text: the answer span (or a completion containing ``<answer>`` tags).

    Returns:
        ``True`` iff valid.

    Example:
        >>> p = {"graph": {"type": "DAG", "nodes": ["U", "X", "Y"], "directed": [["U", "X"], ["U", "Y"], ["X", "Y"]]},
        ...      "query": {"kind": "backdoor_set", "treatment": "X", "outcome": "Y"}}
        >>> grade_answer(p, "{U}"), grade_answer(p, "set()"), grade_answer(p, "garbage {")
        (True, False, False)
    """
    try:
        span = _answer_span(answer_text)
    except Exception:  # never raise on model output
        return False
    if isinstance(problem, str) and isinstance(span, str) and len(span) <= MEMO_TEXT_CHARS:
        return _grade_text(problem, span)
    return _grade(problem, span)


def _grade(problem: Mapping | str, span: Any) -> bool:
    try:
        graph, query, cpts = load_problem_text(problem) if isinstance(problem, str) else load_problem(problem)
        kind = QUERY_KINDS[query["kind"]]
        value = kind.parse_answer(span)
        if value is None:
            return False
        if isinstance(problem, str):  # answers written differently often parse to the same value
            return valid_value(problem, value)
        return kind.is_valid(graph, query, value, cpts)
    except Exception:  # grading must never raise on model output or a bad row
        return False


# Memos keyed by content (problem JSON text, answer text): grading is a pure function of the two,
# and the G samples of a prompt share the problem and repeat answers. Results are immutable (bool,
# frozenset, tuple, str); the loaded problem below is only read by the graders in this module.
# All bounded: answers longer than _MEMO_TEXT_CHARS are not memoised.


@functools.lru_cache(maxsize=8_192)
def _grade_text(problem: str, span: str) -> bool:
    return _grade(problem, span)


@functools.lru_cache(maxsize=8_192)
def valid_value(problem: str, value: Any) -> bool:
    # parsed values are immutable and hashable (frozenset, bool, str, tuple); bounded by the answer cap
    """Whether a parsed answer ``value`` is valid for the problem (JSON text, loaded once)."""
    graph, query, cpts = load_problem_text(problem)  # load_problem ran check_query on exactly these
    return QUERY_KINDS[query["kind"]]._valid_checked(graph, query, value, cpts)


@functools.lru_cache(maxsize=512)
def load_problem_text(problem: str) -> tuple[CausalGraph, dict, dict | None]:
    """Memoised :func:`load_problem` of a problem's JSON text: its graph, query and CPTs."""
    return load_problem(problem)


@functools.lru_cache(maxsize=512)
def _kind_of_text(problem: str) -> QueryKind | None:
    return QUERY_KINDS.get(json.loads(problem)["query"]["kind"])


def normalize_answer(problem: Mapping | str, answer_text: Any) -> str | None:
    """The canonical form of ``answer_text`` for ``problem``'s query kind, or ``None`` if unparsable.

    Used for plurality voting and exact match; it does not judge validity. Never raises.

    Example:
        >>> p = {"graph": {"type": "DAG", "nodes": ["A", "B"], "directed": [["A", "B"]]},
        ...      "query": {"kind": "dsep_set", "x": "A", "y": "B"}}
        >>> normalize_answer(p, "{'B2', 'A1'}"), normalize_answer(p, "set()"), normalize_answer(p, "??")
        ('{A1, B2}', '{}', None)
    """
    try:
        kind = (
            _kind_of_text(problem) if isinstance(problem, str) else QUERY_KINDS.get(problem["query"]["kind"])
        )
        if kind is None:
            return None
        value = kind.parse_answer(_answer_span(answer_text))
        return None if value is None else kind.format_answer(value)
    except Exception:  # never raise on model output
        return None
