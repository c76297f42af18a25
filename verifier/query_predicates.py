"""Per-kind query logic: field checks, validity predicates and bounded answer enumeration.

One job: for each causal query kind, ``check(graph, query, cpts)`` (raises ``ValueError``),
``valid(graph, query, value, cpts)`` and ``enumerate(graph, query, limit, max_checks, cpts)``. The
kinds, their fields and when an answer is valid are documented in :mod:`faithgrpo.verifier.queries`,
whose ``QUERY_KINDS`` table wires these functions together.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping

from faithgrpo.verifier import graphs as C
from faithgrpo.verifier.graphs.model import CausalGraph, node_sort_key


# ---------------------------------------------------------------------------------------------
# query fields
def _one(graph: CausalGraph, query: Mapping, role: str) -> str:
    v = query.get(role)
    if not isinstance(v, str) or v not in graph.node_set:
        raise ValueError(
            f"query field {role!r} must name one graph node, got {v!r}; nodes are {list(graph.nodes)}"
        )
    return v


def _many(graph: CausalGraph, query: Mapping, role: str, *, allow_empty: bool = False) -> frozenset[str]:
    v = query.get(role, [] if allow_empty else None)
    vs = [v] if isinstance(v, str) else v
    if not isinstance(vs, (list, tuple)) or not all(isinstance(u, str) for u in vs):
        raise ValueError(f"query field {role!r} must be a node name or a list of node names, got {v!r}")
    if not vs and not allow_empty:
        raise ValueError(f"query field {role!r} must not be empty")
    missing = set(vs) - graph.node_set
    if missing:
        raise ValueError(
            f"query field {role!r} has unknown node(s) {sorted(missing)}; nodes are {list(graph.nodes)}"
        )
    return frozenset(vs)


def _pair(graph: CausalGraph, query: Mapping) -> tuple[str, str]:
    x, y = _one(graph, query, "treatment"), _one(graph, query, "outcome")
    if x == y:
        raise ValueError("query 'treatment' and 'outcome' must differ")
    return x, y


def check_pair(graph: CausalGraph, query: Mapping, cpts: Mapping | None) -> None:
    """Raise ``ValueError`` unless the query's ``treatment`` and ``outcome`` are two distinct nodes of ``graph``."""
    _pair(graph, query)


def _xy(graph: CausalGraph, query: Mapping) -> tuple[frozenset[str], frozenset[str]]:
    xs, ys = _many(graph, query, "x"), _many(graph, query, "y")
    if xs & ys:
        raise ValueError(f"query fields 'x' and 'y' overlap on {sorted(xs & ys)}")
    return xs, ys


def query_variant(query: Mapping) -> str:
    """The query's ``variant`` (``any`` when absent)."""
    return str(query.get("variant", "any"))


def _subsets(pool: frozenset[str], limit: int, max_checks: int, ok: Callable[[frozenset[str]], bool]) -> list:
    """Valid subsets of ``pool`` by increasing size (then natural order), bounded by both caps."""
    out, checks = [], 0
    items = sorted(pool, key=node_sort_key)
    for k in range(len(items) + 1):
        for combo in itertools.combinations(items, k):
            checks += 1
            if checks > max_checks:
                return out
            z = frozenset(combo)
            if ok(z):
                out.append(z)
                if len(out) >= limit:
                    return out
    return out


# ---------------------------------------------------------------------------------------------
# per-kind logic: check(graph, query, cpts) raises ValueError; valid(...) / enumerate(...) assume checked
def valid_backdoor(g, q, z, cpts):
    """Whether ``z`` is a valid backdoor set for the query (its variant: any, minimal, maximal)."""
    x, y = _pair(g, q)
    variant = query_variant(q)
    if variant == "minimal":
        return C.is_minimal_backdoor_set(g, x, y, z)
    if variant == "maximal":
        return C.is_maximal_backdoor_set(g, x, y, z)
    return C.is_backdoor_set(g, x, y, z)


def enum_backdoor(g, q, limit, max_checks, cpts):
    """Valid backdoor sets for the query, at most ``limit`` (``max_checks`` subsets examined)."""
    x, y = _pair(g, q)
    if query_variant(q) == "maximal":
        return C.maximal_backdoor_sets(g, x, y, limit=limit, max_checks=max_checks)
    return _subsets(
        C.backdoor_candidates(g, x, y), limit, max_checks, lambda z: valid_backdoor(g, q, z, cpts)
    )


def valid_frontdoor(g, q, z, cpts):
    """Whether ``z`` is a valid front-door set for the query (its variant: any, minimal, maximal)."""
    x, y = _pair(g, q)
    variant = query_variant(q)
    if variant == "minimal":
        return C.is_minimal_frontdoor_set(g, x, y, z)
    if variant == "maximal":
        return C.is_maximal_frontdoor_set(g, x, y, z)
    return C.is_frontdoor_set(g, x, y, z)


def enum_frontdoor(g, q, limit, max_checks, cpts):
    """Valid front-door sets for the query, at most ``limit`` (``max_checks`` subsets examined)."""
    x, y = _pair(g, q)
    if query_variant(q) == "maximal":
        best = C.maximal_frontdoor_set(g, x, y)
        return [] if best is None else [best]
    # minimal sets lie inside the candidates ((ii) and (iii) hold member by member); "any" keeps
    # the full pool so the generator's bounded search (and so its rows) stays as it was
    pool = C.frontdoor_candidates(g, x, y) if query_variant(q) == "minimal" else g.node_set - {x, y}
    return _subsets(pool, limit, max_checks, lambda z: valid_frontdoor(g, q, z, cpts))


def check_sep(g, q, cpts):
    """Raise ``ValueError`` unless the query's ``x`` and ``y`` are disjoint node sets of ``g``."""
    _xy(g, q)


def valid_sep(g, q, z, cpts):
    """Whether ``z`` separates the query's ``x`` and ``y`` (minimally for the ``minimal`` variant)."""
    xs, ys = _xy(g, q)
    if z & (xs | ys):
        return False
    if query_variant(q) == "minimal":
        return C.is_minimal_m_separator(g, xs, ys, z)
    return C.m_separated(g, xs, ys, z)


def enum_sep(g, q, limit, max_checks, cpts):
    """Valid separating sets for the query, at most ``limit`` (``max_checks`` subsets examined)."""
    xs, ys = _xy(g, q)
    return _subsets(g.node_set - xs - ys, limit, max_checks, lambda z: valid_sep(g, q, z, cpts))


def check_ci(g, q, cpts):
    """Raise ``ValueError`` unless ``x``, ``y`` and ``given`` are disjoint node sets of ``g``."""
    xs, ys = _xy(g, q)
    given = _many(g, q, "given", allow_empty=True)
    if given & (xs | ys):
        raise ValueError(f"query field 'given' overlaps 'x'/'y' on {sorted(given & (xs | ys))}")


def _truth_ci(g, q, cpts):
    xs, ys = _xy(g, q)
    return C.m_separated(g, xs, ys, _many(g, q, "given", allow_empty=True))


def _truth_directed(g, q, cpts):
    x, y = _pair(g, q)
    return C.has_directed_path(g, x, y)


def valid_mediator(g, q, m, cpts):
    """Whether ``m`` is a mediator from the query's treatment to its outcome."""
    x, y = _pair(g, q)
    return m in g.node_set and C.is_mediator(g, x, y, m)


def enum_mediator(g, q, limit, max_checks, cpts):
    """The mediators from the query's treatment to its outcome, at most ``limit``, in node order."""
    x, y = _pair(g, q)
    return sorted(C.mediators(g, x, y), key=node_sort_key)[:limit]


def check_cycle(g, q, cpts):
    """A cycle query has no fields to check."""
    pass


def valid_cycle(g, q, seq, cpts):
    """Whether ``seq`` is a directed cycle of ``g``."""
    return C.is_directed_cycle(g, seq)


def enum_cycle(g, q, limit, max_checks, cpts):
    """Directed cycles of ``g``, at most ``limit``."""
    return C.simple_cycles(g, limit=limit)


def check_ate(g, q, cpts):
    """Raise ``ValueError`` unless the ATE query's nodes, ``threshold``, ``margin`` and ``tolerance`` are valid."""
    _pair(g, q)
    for name, default in (("threshold", None), ("margin", 0.0), ("tolerance", 0.01)):
        v = q.get(name, default)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(f"ate query field {name!r} must be a finite number, got {v!r}")
        if name != "threshold" and v < 0:
            raise ValueError(f"ate query field {name!r} must be >= 0, got {v!r}")
    if cpts is None:
        raise ValueError("ate queries need the problem's 'cpts'")
    C.validate_cpts(cpts, g)


def _true_ate(g, q, cpts) -> float:
    x, y = _pair(g, q)
    return C.interventional_ate(cpts, x, y)


def valid_ate(g, q, value, cpts):
    """Whether ``(decision, ψ)`` matches the true ATE (ψ within the query's tolerance, when given)."""
    decision, psi = value
    true_psi = _true_ate(g, q, cpts)
    if decision != (true_psi > float(q["threshold"])):
        return False
    return psi is None or abs(psi - true_psi) <= float(q.get("tolerance", 0.01))


def enum_ate(g, q, limit, max_checks, cpts):
    """The one valid ATE answer: the decision ``ψ > threshold`` and the true ψ."""
    true_psi = _true_ate(g, q, cpts)
    return [(true_psi > float(q["threshold"]), true_psi)]


def _yes_no_kind(truth: Callable) -> tuple[Callable, Callable]:
    def valid(g, q, value, cpts):
        return value == truth(g, q, cpts)

    def enum(g, q, limit, max_checks, cpts):
        return [truth(g, q, cpts)]

    return valid, enum


ci_valid, ci_enum = _yes_no_kind(_truth_ci)
dp_valid, dp_enum = _yes_no_kind(_truth_directed)
