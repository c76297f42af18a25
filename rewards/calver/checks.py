"""The six CALVER checks of one parsed trace: graph, query, strategy, derivation, result, answer.

One job: each ``check_*`` takes the parsed :class:`~faithgrpo.rewards.trace.Trace`, the prepared
problem and the settings and returns ``(reason or None, extra)``. What each check passes on is
documented in :mod:`faithgrpo.rewards.calver.reward`, whose ``_score`` runs them.
"""

from __future__ import annotations

import re
from typing import Any

from faithgrpo.rewards.calver.problem import (
    DEFAULT_MAX_SLOT_CHARS,
    CalverConfig,
    CalverProblem,
    edges_into,
    memoised,
)
from faithgrpo.rewards.trace import Trace
from faithgrpo.verifier.answers import parse_node_set
from faithgrpo.verifier.certificates.derivation import check_derivation
from faithgrpo.verifier.graphs.criteria import ate_certificate_checked
from faithgrpo.verifier.graphs.edges import parse_graph, plain_edges
from faithgrpo.verifier.graphs.model import CausalGraph, GraphParseError, node_sort_key
from faithgrpo.verifier.queries import format_query, query_matches


# ---------------------------------------------------------------------------------------------
# the six checks: each returns (reason or None, extra)
def _slot(trace: Trace, name: str, cap: int) -> tuple[str | None, str | None]:
    value = getattr(trace, name)
    if isinstance(value, tuple):
        value = "\n".join(value)
    label = "<answer>" if name == "answer" else name.upper()
    if not value:
        return None, f"no {label} slot"
    if len(value) > cap:
        return None, f"{label} has {len(value)} characters, over the cap of {cap}"
    return value, None


def _short(items: Any, limit: int = 3) -> str:
    items = sorted(items, key=lambda v: node_sort_key(v) if isinstance(v, str) else (str(v), ""))
    text = ", ".join(map(str, items[:limit]))
    return text + (f" (+{len(items) - limit} more)" if len(items) > limit else "")


def _edge_diff(mine: tuple[frozenset, frozenset], theirs: tuple[frozenset, frozenset]) -> str | None:
    parts = []
    for arrow, a, b in (("->", mine[0], theirs[0]), ("<->", mine[1], theirs[1])):
        if a - b:
            parts.append("extra " + _short(f"{u} {arrow} {v}" for u, v in a - b))
        if b - a:
            parts.append("missing " + _short(f"{u} {arrow} {v}" for u, v in b - a))
    return "; ".join(parts) or None


def check_graph(trace: Trace, p: CalverProblem, cfg: CalverConfig) -> tuple[str | None, CausalGraph | None]:
    # reads only the GRAPH slot, the problem and cfg; returns a reason and an immutable graph
    """The GRAPH check: a failure reason (None: passed) and the trace's graph (memoised per problem)."""
    return memoised(p, ("graph", trace.graph, cfg), trace.graph, lambda: _graph_check(trace, p, cfg))


def _graph_check(trace: Trace, p: CalverProblem, cfg: CalverConfig) -> tuple[str | None, CausalGraph | None]:
    text, why = _slot(trace, "graph", cfg.max_slot_chars)
    if why:
        return why, None
    assert p.graph is not None
    if len(p.graph.nodes) > cfg.max_nodes:
        return f"the problem has {len(p.graph.nodes)} nodes, over max_nodes={cfg.max_nodes}; raise it", None
    binds = not (p.mode == "constructed" and cfg.verify_on == "trace")
    local = binds and cfg.graph_check == "query_local" and bool(p.query_nodes)
    if binds and not local and _is_plain_copy(text, p, cfg):
        return None, None  # what the checks below conclude for this graph, without building it
    try:
        parsed = parse_graph(
            text,
            p.graph.kind,
            max_nodes=cfg.max_nodes,
            max_edges=cfg.max_edges,
            max_chars=cfg.max_slot_chars,
            validate=False,
        )
    except GraphParseError as exc:
        return f"GRAPH does not parse: {str(exc)[:160]}", None
    unknown = parsed.node_set - p.graph.node_set
    if unknown:
        return f"GRAPH names node(s) not in the problem: {_short(unknown)}", None
    if not local:
        missing = p.graph.node_set - parsed.node_set
        if missing:
            return f"GRAPH omits node(s) {_short(missing)} (write isolated nodes as lone names)", None
    if parsed.node_set == p.graph.node_set:
        full = parsed
    else:  # query_local: nodes the trace left out are isolated in its graph
        full = CausalGraph(p.graph.kind, p.graph.nodes, parsed.directed, parsed.bidirected)
    try:
        if not (p._graph_valid and full == p.graph):  # a graph equal to a valid one is valid
            full.validate()
    except GraphParseError as exc:
        return f"GRAPH is not a well-formed {p.graph.kind}: {str(exc)[:160]}", None
    if binds:
        source = "hidden source graph" if p.mode == "constructed" else "supplied graph"
        if local:
            diff = _edge_diff(edges_into(full, p.local_set), p.local_edges)
            where = f"from the {source} among the ancestors of the query nodes"
        else:
            diff = _edge_diff((full.directed, full.bidirected), (p.graph.directed, p.graph.bidirected))
            where = f"from the {source}"
        # the trace's graph verifies nothing here (_verification_graph): the memo keeps no copy of it
        return (f"GRAPH differs {where}: {diff}" if diff else None), None
    return None, full


def _is_plain_copy(text: str, p: CalverProblem, cfg: CalverConfig) -> bool:
    """Whether ``text`` is in the plain form and names exactly the (valid) problem graph's nodes and edges.

    parse_graph reads plain text with ``plain_edges`` and then only wraps its nodes and edge sets in
    a graph, so these sets equal to the problem graph's mean: it parses, names no unknown node and
    omits none, equals the problem graph (valid, so not validated again) and differs in no edge.
    """
    return _names_plain_copy(text, p, cfg) or _parsed_plain_copy(text, p, cfg)


def _parsed_plain_copy(text: str, p: CalverProblem, cfg: CalverConfig) -> bool:
    """:func:`_is_plain_copy` by reading ``text`` with ``plain_edges`` (the definition)."""
    g = p.graph
    order: dict[str, None] = {}
    directed: set[tuple[str, str]] = set()
    bidirected: set[tuple[str, str]] = set()
    if not plain_edges(text, order, directed, bidirected, cfg.max_nodes, cfg.max_edges):
        return False
    if order.keys() != g.node_set or directed != g.directed:
        return False
    # the graph stores each bidirected pair in one orientation (a pair in neither is not the graph's)
    stored = {pair if pair in g.bidirected else pair[::-1] for pair in bidirected}
    return stored == g.bidirected and p._graph_valid


def _names_plain_copy(text: str, p: CalverProblem, cfg: CalverConfig) -> bool:
    """A sufficient test for :func:`_is_plain_copy` by set operations (False: not sure).

    When every item of ``text`` cut at ", " (after ";" -> ",") is a plain-form piece of the problem
    graph (``CalverProblem._plain_words``), ``text`` is in the plain form and ``plain_edges`` cuts
    the same items (no self loop, no ``and``); they name only the graph's nodes and edges (each
    bidirected pair as the graph stores it), so the copy test reduces to: every edge and every node
    named (a node with an edge is named with it), within the caps.
    """
    words = p._plain_words
    if words is None or len(text) > 4_000:  # plain_edges reads no longer text
        return False
    pieces, required, pairs = words
    items = text.replace(";", ",").split(", ")
    if len(items) > cfg.max_edges or len(p.graph.node_set) > cfg.max_nodes:
        return False
    named = set(items)
    return (
        named <= pieces
        and required <= named
        and all(a in named or b in named for a, b in pairs)
        and p._graph_valid
    )


def check_query_slot(trace: Trace, p: CalverProblem, cfg: CalverConfig) -> tuple[str | None, None]:
    """The QUERY check: a failure reason (None: passed), memoised per problem."""
    key = ("query", trace.query, cfg.max_slot_chars)
    return memoised(p, key, trace.query, lambda: _query_check(trace, p, cfg))


def _query_check(trace: Trace, p: CalverProblem, cfg: CalverConfig) -> tuple[str | None, None]:
    text, why = _slot(trace, "query", cfg.max_slot_chars)
    if why:
        return why, None
    if query_matches(p.query, text):
        return None, None
    return f"QUERY {text[:80]!r} does not restate {format_query(p.query)}", None


def check_strategy(trace: Trace, p: CalverProblem, cfg: CalverConfig) -> tuple[str | None, None]:
    """The STRATEGY check: a failure reason (None: passed), memoised per problem."""
    key = ("strategy", trace.strategy, cfg.max_strategy_chars)
    return memoised(p, key, trace.strategy, lambda: _strategy_check(trace, p, cfg))


def _strategy_check(trace: Trace, p: CalverProblem, cfg: CalverConfig) -> tuple[str | None, None]:
    text, why = _slot(trace, "strategy", cfg.max_strategy_chars)
    if why:
        return why, None
    assert p.kind is not None
    problem = p.kind.strategy_problem(text)
    return (None if problem is None else f"STRATEGY {text[:60]!r} {problem}"), None


def check_derivation_slot(
    trace: Trace, p: CalverProblem, cfg: CalverConfig, graph: CausalGraph | None, result_value: Any
) -> tuple[str | None, tuple[int, int] | None]:
    """(reason, (claims, false claims)) of the derivation check."""
    text, why = _slot(trace, "derivation", cfg.max_slot_chars)
    if why:
        return why, None
    if graph is None:
        return "no verification graph: the trace's GRAPH is not a well-formed graph", None
    if result_value is None:
        return "there is no parsable RESULT for the derivation to certify", None
    if graph is p.graph:
        # a pure function of the lines (``text`` joins them; no line holds a "\n"), RESULT's text
        # (which fixes its value and adjustment set) and the path cap: the G completions of a prompt
        # often repeat a whole derivation under other GRAPH/STRATEGY wording. Immutable value.
        key = ("derivation", text, trace.result, cfg.max_paths)
        return memoised(p, key, text, lambda: _derivation_check(trace, p, cfg, graph, result_value))
    return _derivation_check(trace, p, cfg, graph, result_value)


def _derivation_check(
    trace: Trace, p: CalverProblem, cfg: CalverConfig, graph: CausalGraph, result_value: Any
) -> tuple[str | None, tuple[int, int]]:
    assert p.kind is not None and trace.derivation is not None
    value, ate_set = result_value, None
    if p.kind.name == "ate":
        ate_set, _ = _ate_adjustment_set(trace.result or "")
    # the problem's context remembers claim verdicts across its completions (same graph only)
    context = p._derivation_context if graph is p.graph else None
    report = check_derivation(
        trace.derivation, p.kind.name, p.query, value, graph, p.cpts, ate_set=ate_set, max_paths=cfg.max_paths,
        context=context,
    )  # fmt: skip
    return report.reason(), (len(report.claims), len(report.false))


_ATE_SET_RE = re.compile(r"\{[^{}]*\}|\bset\(\)|∅")


def _ate_adjustment_set(text: str) -> tuple[frozenset[str] | None, str | None]:
    blocks = _ATE_SET_RE.findall(text[:DEFAULT_MAX_SLOT_CHARS])
    if len(blocks) != 1:
        what = "no" if not blocks else "more than one"
        return None, (
            f"ate RESULT names {what} adjustment set; write the decision, ψ and the one set Z it "
            "adjusts for, e.g. 'yes, ψ = 0.35, Z = {U}'"
        )
    z = parse_node_set(blocks[0])
    if z is None:
        return None, f"ate RESULT adjustment set {blocks[0][:60]!r} does not parse"
    return z, None


def _verify(
    p: CalverProblem, graph: CausalGraph, value: Any, text: str, where: str, certify: bool, memo: dict
) -> str | None:
    """None when ``value`` satisfies the predicate on ``graph``; else the reason.

    ``memo`` caches the predicate per (graph, value) within one completion: RESULT and ``<answer>``
    usually carry the same value on the same graph.
    """
    assert p.kind is not None
    key = (id(graph), value)
    try:
        if key not in memo:
            if graph is p.graph:  # a pure function of the problem and the (immutable) value
                memo[key] = memoised(p, ("valid", value), None, lambda: p.is_valid(graph, value))
            else:
                memo[key] = p.is_valid(graph, value)
        ok = memo[key]
    except ValueError as exc:  # the query or CPTs do not fit this graph (constructed mode)
        return f"the query cannot be checked on {where}: {str(exc)[:120]}"
    if not ok:
        shown = p.kind.format_answer(value)
        unknown = set(value) - graph.node_set if p.kind.answer_type in ("set", "cycle") else set()
        if unknown:
            return f"{shown[:80]} names node(s) not in the graph: {_short(unknown)}"
        return f"{shown[:80]} does not satisfy {p.kind.name} on {where}"
    if certify and p.kind.name == "ate":
        z, why = _ate_adjustment_set(text)
        if why:
            return why
        if graph is p.graph:  # the certificate depends only on the problem and z
            certified, detail = memoised(
                p, ("ate_certificate", z), None, lambda: _ate_certificate(p, graph, z)
            )
        else:
            certified, detail = _ate_certificate(p, graph, z)
        if not certified:  # False, or None when the query or CPTs do not fit the graph
            return f"no ATE certificate on {where}: {detail[:120]}"
    return None


def _ate_certificate(p: CalverProblem, graph: CausalGraph, z: frozenset[str]) -> tuple[bool | None, str]:
    """``criteria.ate_certificate`` on ``graph``; ``(None, message)`` when the query or CPTs do not fit it."""
    q = p.query
    try:
        # on the problem's graph check_query accepted the CPTs: their checked table is the problem's
        checked = p._cpts_checked if graph is p.graph and p._query_fits else None
        return ate_certificate_checked(
            graph, p.cpts, q["treatment"], q["outcome"], z, float(q["threshold"]), float(q.get("margin", 0.0)),
            checked,
        )  # fmt: skip
    except ValueError as exc:
        return None, str(exc)[:120]


def _parsed_slot(trace: Trace, slot: str, p: CalverProblem, cfg: CalverConfig) -> tuple[str, Any, str | None]:
    """``(text, value, reason)`` of an answer-typed slot (RESULT or <answer>); reason when it fails."""
    text, why = _slot(trace, slot, cfg.max_slot_chars)
    if why:
        return text, None, why
    assert p.kind is not None and p.graph is not None
    value = p.kind.parse_answer(text)
    if value is None:
        label = "<answer>" if slot == "answer" else slot.upper()
        return text, None, f"{label} {text[:60]!r} does not parse as a {p.kind.answer_type} answer"
    return text, value, None


def check_result(
    trace: Trace, p: CalverProblem, cfg: CalverConfig, graph: CausalGraph | None, where: str, memo: dict
) -> tuple[str | None, Any]:
    """The RESULT check: a failure reason (None: passed) and the parsed result, on ``graph`` at ``where``."""
    if graph is p.graph:
        # a pure function of RESULT's text, the slot cap and ``where`` on the problem's own graph; the
        # value is immutable (a parsed answer) and RESULT repeats across the G traces of a prompt
        key = ("result", trace.result, cfg.max_slot_chars, where)
        return memoised(p, key, trace.result, lambda: _result_check(trace, p, cfg, graph, where, memo))
    return _result_check(trace, p, cfg, graph, where, memo)


def _result_check(
    trace: Trace, p: CalverProblem, cfg: CalverConfig, graph: CausalGraph | None, where: str, memo: dict
) -> tuple[str | None, Any]:
    text, value, why = _parsed_slot(trace, "result", p, cfg)
    if why:
        return why, None
    if graph is None:
        return "no verification graph: the trace's GRAPH is not a well-formed graph", value
    return _verify(p, graph, value, text, where, True, memo), value


def check_answer(
    trace: Trace, p: CalverProblem, cfg: CalverConfig, result_value: Any, memo: dict
) -> tuple[str | None, bool]:
    """(reason, whether ``<answer>`` parses and equals RESULT)."""
    # reads <answer>, RESULT's value (None, or the parse of RESULT's text under the slot cap) and the
    # problem's own graph; the value is immutable
    key = ("answer", trace.answer, trace.result, cfg.max_slot_chars, result_value is None)
    longer = max(trace.answer or "", trace.result or "", key=len)  # the memo keeps short keys only
    return memoised(p, key, longer, lambda: _answer_check(trace, p, cfg, result_value, memo))


def _answer_check(
    trace: Trace, p: CalverProblem, cfg: CalverConfig, result_value: Any, memo: dict
) -> tuple[str | None, bool]:
    text, value, why = _parsed_slot(trace, "answer", p, cfg)
    if why:
        return why, False
    if result_value is None:
        return "no parsable RESULT to compare the answer with", False
    # equal values (the usual case) pass both comparisons: the formatters are deterministic (sets sort
    # by a total order) and equal ψ differ by 0; only unequal ones need formatting
    if not (type(value) is type(result_value) and value == result_value):
        why = _answer_differs(p, value, result_value)
        if why:
            return why, False
    where = "the hidden source graph" if p.mode == "constructed" else "the supplied graph"
    return _verify(p, p.graph, value, text, where, False, memo), True


def _answer_differs(p: CalverProblem, value: Any, result_value: Any) -> str | None:
    """Why ``<answer>``'s value is not RESULT's (ψ further apart than 1e-9, or another canonical form)."""
    mine, theirs = p.kind.format_answer(value), p.kind.format_answer(result_value)
    if (
        p.kind.name == "ate"
        and None not in (value[1], result_value[1])
        and abs(value[1] - result_value[1]) > 1e-9
    ):
        return f"<answer> ψ = {value[1]:g} differs from RESULT's ψ = {result_value[1]:g}"
    if mine != theirs:
        return f"<answer> {mine[:60]} differs from RESULT {theirs[:60]}"
    return None
