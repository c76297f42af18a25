"""The truth of single DERIVATION claims on a problem: the checking context and each claim's verdict.

One job: decide whether one parsed claim is true on the verification graph and CPTs (no
certification). The grammar and the truth rules are documented in :mod:`faithgrpo.verifier.certificates.derivation`,
the package face is :mod:`faithgrpo.verifier.certificates`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

from faithgrpo.verifier import graphs as C
from faithgrpo.verifier.answers import format_set
from faithgrpo.verifier.certificates.claims import Claim
from faithgrpo.verifier.graphs.ate import checked_cpts, joint_marginal
from faithgrpo.verifier.graphs.edges import Path
from faithgrpo.verifier.graphs.model import CausalGraph, node_sort_key

PROB_TOLERANCE = 0.002  # three printed decimals plus float error


class ClaimContext:
    """What claims are checked against: the verification graph, the CPTs and the query."""

    def __init__(self, graph: CausalGraph, cpts: Mapping[str, Any] | None, query: Mapping[str, Any]):
        self.graph, self.cpts, self.query = graph, cpts, query
        self._desc: dict[str, frozenset[str]] = {}
        self._joints: dict[tuple[str, ...], Any] = {}
        # claim text -> why it is false (None: true). A claim's truth depends only on its text (which
        # determines its kind and args) and on this context, so a context reused for the G
        # completions of one problem (:func:`derivation_context`) checks each distinct line once.
        self._truth: dict[str, str | None] = {}
        # (claim texts, kind, value, ...) -> what the claims fail to certify (see check_derivation)
        self._certificates: dict[tuple, str | None] = {}

    @functools.cached_property
    def table(self) -> dict | None:
        # against this graph: CPTs of another graph (a trace's own GRAPH) make every number unverifiable
        # validate_cpts without its copy: the memoised table is only read here
        return None if self.cpts is None else checked_cpts(self.cpts, self.graph)[0]

    def joint(self, names: tuple[str, ...]) -> Any:
        """P(names) as an array (cached: strata claims and certification ask for the same marginals)."""
        if names not in self._joints:
            assert self.table is not None
            self._joints[names] = joint_marginal(self.table, list(names))
        return self._joints[names]

    def desc(self, v: str) -> frozenset[str]:
        if v not in self._desc:
            self._desc[v] = self.graph.descendants(v)
        return self._desc[v]


_MAX_TRUTHS = 512  # distinct claim lines remembered per context (then the memo starts over)
_MAX_TRUTH_KEY = 300  # longer lines are checked without memoising: <= ~0.3 MB per context


def derivation_context(
    graph: CausalGraph, cpts: Mapping[str, Any] | None, query: Mapping[str, Any]
) -> ClaimContext:
    """A reusable checking context for many derivations on one problem (pass it to :func:`check_derivation`).

    It remembers descendant sets, CPT marginals and the verdict on each distinct claim line. The
    graph is immutable; ``cpts`` and ``query`` must not be mutated while the context is in use (the
    prepared CALVER problem that owns it never does).
    """
    return ClaimContext(graph, cpts, query)


def claim_verdict(ctx: ClaimContext, claim: Claim) -> str | None:
    """:func:`_claim_problem` with the error handling of :func:`check_derivation`, memoised per context."""
    key = claim.text
    if key in ctx._truth:
        return ctx._truth[key]
    try:
        why = _claim_problem(ctx, claim)
    except (ValueError, KeyError, IndexError) as exc:  # a claim the graph functions reject
        why = f"cannot be checked: {str(exc)[:100]}"
    if len(key) <= _MAX_TRUTH_KEY:
        if len(ctx._truth) >= _MAX_TRUTHS:
            ctx._truth.clear()
        ctx._truth[key] = why
    return why


def unknown_nodes(ctx: ClaimContext, nodes: Iterable[str]) -> str | None:
    """A reason naming the first nodes that are not in the context's graph (None: all are)."""
    missing = sorted(set(nodes) - ctx.graph.node_set, key=node_sort_key)
    return f"{', '.join(missing[:3])} not node(s) of the graph" if missing else None


def _path_problem(ctx: ClaimContext, path: Path) -> str | None:
    if len(path.nodes) < 2:
        return f"a path joins at least two nodes, got {path}"
    why = unknown_nodes(ctx, path.nodes)
    if why:
        return why
    if len(set(path.nodes)) != len(path.nodes):
        return f"{path} repeats a node"
    for a, m, b in zip(path.nodes, path.marks, path.nodes[1:]):
        g = ctx.graph
        ok = (
            (a, b) in g.directed
            if m == "->"
            else (b, a) in g.directed
            if m == "<-"
            else (a, b) in g.bidirected or (b, a) in g.bidirected
        )
        if not ok:
            return f"{a} {m} {b} is not an edge of the graph"
    return None


def claim_probability(ctx: ClaimContext, target: tuple, cond: tuple) -> float | None:
    """P(target | cond) from the CPTs, ``None`` when undefined (P(cond) = 0)."""
    names = tuple(n for n, _ in target) + tuple(n for n, _ in cond)
    num = float(ctx.joint(names)[tuple(v for _, v in target) + tuple(v for _, v in cond)])
    if not cond:
        return num
    den = float(ctx.joint(tuple(n for n, _ in cond))[tuple(v for _, v in cond)])
    return None if den <= 1e-12 else num / den


def _claim_problem(ctx: ClaimContext, claim: Claim) -> str | None:
    """``None`` when ``claim`` is true on the context's graph/CPTs, else why it is false."""
    g, a = ctx.graph, claim.args
    if claim.kind == "malformed":
        return a[0]
    if claim.kind in ("path", "directed", "edge", "cycle"):
        path = a[0]
        if claim.kind == "cycle":
            if len(path.nodes) < 3 or path.nodes[0] != path.nodes[-1]:
                return f"cycle {path} does not return to its first node"
            why = _path_problem(ctx, Path(path.nodes[:-1], path.marks[:-1]))
            if why is None and not all(m == "->" for m in path.marks):
                why = f"cycle {path} is not directed"
            if why is None:
                last = Path(path.nodes[-2:], path.marks[-1:])
                why = _path_problem(ctx, last)
            return why
        why = _path_problem(ctx, path)
        if why:
            return why
        if claim.kind == "directed" and not all(m == "->" for m in path.marks):
            return f"{path} is not a directed path"
        if claim.kind == "path":
            _, status, given, prefix = a
            why = unknown_nodes(ctx, given)
            if why:
                return why
            if prefix == "backdoor" and path.marks[0] not in ("<-", "<->"):
                return f"{path} is not a backdoor path (no arrowhead into {path.nodes[0]})"
            if prefix == "directed" and not all(m == "->" for m in path.marks):
                return f"{path} is not a directed path"
            if set(path.nodes[:1] + path.nodes[-1:]) & given:
                return f"the given set {format_set(given)} contains an endpoint of {path}"
            actual = "blocked" if C.path_is_blocked(g, path, given) else "open"
            if actual != status:
                return f"{path} is {actual} given {format_set(given)}, not {status}"
        return None
    if claim.kind == "no_path":
        x, y, prefix = a
        why = unknown_nodes(ctx, (x, y))
        if why or x == y:
            return why or "the two ends are the same node"
        if prefix == "directed":
            found = y in ctx.desc(x)
        else:
            firsts = ("<-", "<->") if prefix == "backdoor" else ("->", "<-", "<->")
            found = C.path_exists(g, x, y, first_marks=firsts)
        return f"a {prefix + ' ' if prefix else ''}path from {x} to {y} exists" if found else None
    if claim.kind == "descendant":
        v, of, positive = a
        why = unknown_nodes(ctx, (v, of))
        if why:
            return why
        return (
            None
            if (v in ctx.desc(of)) == positive
            else f"{v} is {'not ' if positive else ''}a descendant of {of}"
        )
    if claim.kind == "family":
        rel, v, members = a
        why = unknown_nodes(ctx, (v, *members))
        if why:
            return why
        actual = ctx.desc(v) if rel == "descendants" else g.parents(v)
        return None if actual == members else f"the {rel} of {v} are {format_set(actual)}"
    if claim.kind == "separation":
        xs, ys, given, positive = a
        why = unknown_nodes(ctx, (*xs, *ys, *given))
        if why:
            return why
        if (xs & ys) or ((xs | ys) & given) or not xs or not ys:
            return "the two sides and the given set must be disjoint and non-empty"
        if g.kind == "DG":
            return "separation is not defined on a cyclic graph here"
        actual = C.m_separated(g, xs, ys, given)
        return (
            None
            if actual == positive
            else f"{format_set(xs)} and {format_set(ys)} are {'' if actual else 'not '}separated given {format_set(given)}"
        )
    if claim.kind == "prob":
        target, cond, value = a
        if ctx.table is None:
            return "the problem has no CPTs to read probabilities from"
        names = [n for n, _ in target] + [n for n, _ in cond]
        why = unknown_nodes(ctx, names)
        if why or len(set(names)) != len(names):
            return why or "a variable appears twice"
        try:
            actual = claim_probability(ctx, target, cond)
        except ValueError as exc:
            return str(exc)[:100]
        if actual is None:
            return "the conditioning event has probability 0"
        return (
            None
            if abs(actual - value) <= PROB_TOLERANCE
            else f"the probability is {actual:.4f}, not {value:g}"
        )
    if claim.kind == "psi":
        if ctx.table is None:
            return "the problem has no CPTs to compute ψ from"
        return None  # its value is checked against the certified adjustment set in _certify_ate
    return f"unknown claim kind {claim.kind!r}"
