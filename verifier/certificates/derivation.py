"""CALVER's DERIVATION as a certificate: a small claim grammar, its checker, and what certifies RESULT.

A derivation line is either a **claim** in the grammar below or free prose, which is ignored. A
derivation passes (CALVER check 4) when (a) it makes at least one claim, (b) every claim is
true on the verification graph, and (c) the claims together certify RESULT for the query kind.
Whatever a reward does not verify, a policy learns to fake; so nothing here trusts prose.

Grammar (one claim per line; keywords in any case; an optional leading ``so``/``hence``/``thus``/
``therefore``/``then``/``and``; a trailing ``.``; text after ``;`` is ignored). Nodes are the graph's
names, sets are ``{A, B}`` or ``{}``, paths are node names joined by ``->``, ``<-`` or ``<->``:

=================  ===============================================  ===========================================
claim              form                                             example
=================  ===============================================  ===========================================
path status        ``[backdoor] path P is open|blocked given S``    ``backdoor path X <- U -> Y is blocked given {U}``
directed path      ``directed path P``                              ``directed path X -> M -> Y``
no path            ``no [backdoor|directed] path from A to B``      ``no backdoor path from X to Y``
descendant         ``A is [not] a descendant of B``                 ``U is not a descendant of X``
descendant set     ``descendants of A = S``                         ``descendants of X = {M, Y}``
parent set         ``parents of A = S``                             ``parents of X = {U}``
separation         ``A and B are [not] d-separated given S``        ``{X} and Y are m-separated given {M}``
cycle              ``cycle P`` (P returns to its first node)        ``cycle A -> B -> C -> A``
edge               ``edge A -> B`` (or ``<->``)                     ``edge U -> X``
probability        ``P(A=a, …) = p``                                ``P(U=1) = 0.300``
conditional        ``P(A=a | B=b, …) = p``                          ``P(Y=1 | X=1, U=0) = 0.412``
effect             ``ψ = [expression =] p`` (or ``psi``)            ``ψ = 0.120 × 0.300 + 0.200 × 0.700 = 0.176``
=================  ===============================================  ===========================================

Truth (on the verification graph ``g``): a path claim needs every step to be an edge of ``g`` in the
written direction, no repeated node, and the stated status recomputed by the d-/m-connection rules
(a non-collider in S blocks; a collider blocks unless it or a descendant is in S); ``backdoor``
adds an arrowhead into the first node. ``d-`` and ``m-separated`` are both read as m-separation
(they agree on DAGs). Probabilities come from the problem's CPTs within :data:`PROB_TOLERANCE`;
ψ is compared with the adjustment formula on the certified set within the query's ``tolerance``. A
line that parses as a claim but names a node the graph lacks is a *false* claim, not prose.

What certifies RESULT (paths from RESULT's treatment/x to outcome/y; ``cap`` = ``max_paths``, 8 by
default: when more such paths exist, ``cap`` distinct true ones suffice, *and only if RESULT satisfies
the query's predicate on the verification graph*: a certificate that relied on the cap never earns
the point for an invalid RESULT, on any graph size; within the cap the claims alone decide):

* ``backdoor_set`` Z: every backdoor path X…Y claimed blocked given Z (or ``no backdoor path``);
  each z ∈ Z claimed a non-descendant of X (or left out of a ``descendants of X`` claim);
  *minimal*: for each z, a backdoor path claimed open given Z∖{z}; *maximal*: a ``descendants of X``
  claim, and for each other node v (not in Z, not X, Y or a descendant of X) a backdoor path claimed
  open given Z ∪ {v} (in a DAG the maximal set is every such node, so nothing is left to show).
  One-node additions decide maximality, in ADMGs too (proof in
  :func:`~faithgrpo.verifier.graphs.criteria.is_maximal_backdoor_set`).
* ``frontdoor_set`` Z: every directed path X…Y claimed (``directed path``) and each passes through Z
  (or ``no directed path from X to Y``); for each z, every backdoor path X…z blocked given {} and
  every backdoor path z…Y blocked given {X} (or the ``no backdoor path`` claims). *minimal*: for
  each z, a claimed directed path X…Y whose only node in Z is z (Z∖{z} keeps (ii) and (iii), so it
  fails only by such a path; within the cap the listed directed paths already include one);
  *maximal*: for each node v outside Z ∪ {X, Y}, a backdoor path X…v claimed open given {} (v
  breaks (ii)) or a backdoor path v…Y claimed open given {X} (v breaks (iii)); these are the only
  reasons a node cannot join, since (ii) and (iii) hold member by member and (i) only gets easier.
* ``dsep_set`` / ``msep_set`` Z: every path between X and Y blocked given Z (no path at all: a
  separation claim given Z); *minimal*: for each z, a path open given Z∖{z}.
* ``ci_test``: *yes* as a separation set above, given the query's set; *no*: one path claimed open
  given it.
* ``directed_path``: *yes*: a directed path X…Y; *no*: ``no directed path from X to Y`` or a
  ``descendants of X`` claim without Y.
* ``mediator`` M: a directed path X…Y through M (or X…M and M…Y).
* ``cycle``: a ``cycle`` claim with RESULT's nodes, in order up to rotation.
* ``ate``: the backdoor certificate of RESULT's set Z; for every stratum z with P(z) > 0 the claims
  P(z) (when Z ≠ ∅), P(Y=1 | X=1, z) and P(Y=1 | X=0, z); and a ψ claim.

Parsing is linear-time: lines and line lengths are capped before any pattern runs, and the
patterns have no nested quantifiers. Nothing here raises on model output.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from faithgrpo.verifier import graphs as C
from faithgrpo.verifier.answers import format_set
from faithgrpo.verifier.certificates.claim_checks import (
    ClaimContext,
    claim_probability,
    claim_verdict,
    unknown_nodes,
)
from faithgrpo.verifier.certificates.claim_index import ClaimIndex
from faithgrpo.verifier.certificates.claims import Claim, parse_claims
from faithgrpo.verifier.graphs.edges import Path
from faithgrpo.verifier.graphs.model import CausalGraph, node_sort_key
from faithgrpo.verifier.query_kinds import QUERY_KINDS

__all__ = [
    "DEFAULT_MAX_PATHS",
    "DerivationReport",
    "check_derivation",
]

DEFAULT_MAX_PATHS = 8
MAX_STRATA = 64  # an ATE certificate over more strata than this is not accepted (|Z| <= 6)
_MAX_CERTIFICATES = 256  # certificates remembered per context (then that memo starts over)
_MAX_CERTIFICATE_KEY = 1_000  # claim text per certificate key: <= ~0.3 MB per context


@dataclass
class DerivationReport:
    """The derivation check's findings for one trace.

    Attributes:
        claims: the parsed claims.
        false: ``(line, reason)`` per false claim.
        missing: why the true claims do not certify RESULT, or ``None`` when they do.
    """

    claims: list[Claim] = field(default_factory=list)
    false: list[tuple[int, str]] = field(default_factory=list)
    missing: str | None = None

    @property
    def passed(self) -> bool:
        return bool(self.claims) and not self.false and self.missing is None

    def reason(self) -> str | None:
        """The failure reason (first false claim, else the missing piece), or ``None``."""
        if not self.claims:
            return "DERIVATION makes no claim in the certificate grammar (prose alone certifies nothing)"
        if self.false:
            line, why = self.false[0]
            more = f" (+{len(self.false) - 1} more false)" if len(self.false) > 1 else ""
            return f"DERIVATION line {line} is false: {why}{more}"
        if self.missing:
            return f"DERIVATION does not certify RESULT: {self.missing}"
        return None


# ---------------------------------------------------------------------------------------------
# certification
@dataclass
class _Cap:
    """The path cap of one certification and whether the certificate relied on it.

    ``applied`` turns true when some required path list had more than ``limit`` paths, so that
    ``limit`` distinct claimed ones stood in for all of them; the certificate then holds only for
    a RESULT that also satisfies the query predicate (:func:`_valid_beyond_cap`).
    """

    limit: int
    applied: bool = False


def _required_paths(g: CausalGraph, pairs: Iterable[tuple[str, str]], first: tuple[str, ...], cap: _Cap,
                    marks: tuple[str, ...] = ("->", "<-", "<->")) -> tuple[tuple[Path, ...], bool]:  # fmt: skip
    """Paths between the pairs (up to cap + 1) and whether that is all of them."""
    return _required_paths_cached(g, g.nodes, tuple(pairs), tuple(first), cap.limit, tuple(marks))


# Depends only on the graph's content (CausalGraph is immutable and hashes by content; its node
# order, which fixes the search order, is part of the key) and on hashable arguments. The result
# is a tuple of immutable Paths, so sharing it is safe. Bounded.
@functools.lru_cache(maxsize=4_096)
def _required_paths_cached(g: CausalGraph, nodes: tuple[str, ...], pairs: tuple[tuple[str, str], ...],
                           first: tuple[str, ...], cap: int, marks: tuple[str, ...]) -> tuple[tuple[Path, ...], bool]:  # fmt: skip
    found: list[Path] = []
    for x, y in pairs:
        for p in C.simple_paths(g, x, y, first_marks=first, marks=marks, limit=cap + 1 - len(found)):
            found.append(p)
        if len(found) > cap:
            return tuple(found), False
    return tuple(found), True


def _require_paths(
    claimed: set[Path], required: Sequence[Path], complete: bool, cap: _Cap, what: str, given: frozenset[str]
) -> str | None:
    """All required paths claimed; with more than ``cap`` of them, ``cap`` distinct claimed ones."""
    if complete:
        missing = [p for p in required if p not in claimed]
        if missing:
            return f"{what} {missing[0]} is not shown blocked given {format_set(given)}" + (
                f" (+{len(missing) - 1} more)" if len(missing) > 1 else ""
            )
        return None
    cap.applied = True
    if len(claimed) < cap.limit:
        n = cap.limit
        return f"more than {n} {what}s exist; show at least {n} of them blocked given {format_set(given)}"
    return None


def _certify_blocking(
    have: ClaimIndex, g: CausalGraph, xs: frozenset[str], ys: frozenset[str], z: frozenset[str], cap: _Cap,
    *, backdoor: bool = False,
) -> str | None:  # fmt: skip
    """Every (backdoor) path between xs and ys shown blocked by z (or none exists, shown)."""
    pairs = [(a, b) for a in sorted(xs, key=node_sort_key) for b in sorted(ys, key=node_sort_key)]
    first = ("<-", "<->") if backdoor else ("->", "<-", "<->")
    required, complete = _required_paths(g, pairs, first, cap)
    what = "backdoor path" if backdoor else "path"
    if not required:
        if backdoor:
            (x,), (y,) = xs, ys
            if have.no_path(x, y, "backdoor"):
                return None
            return f"no backdoor path from {x} to {y} exists; say so ('no backdoor path from {x} to {y}')"
        if have.separated(xs, ys, z) or (len(xs) == len(ys) == 1 and have.no_path(min(xs), min(ys), "")):
            return None
        return f"no path joins {format_set(xs)} and {format_set(ys)}; claim they are separated given {format_set(z)}"
    claimed: set[Path] = set()
    for a, b in pairs:
        claimed |= have.paths("blocked", z, a, b, backdoor=backdoor)
    return _require_paths(claimed, required, complete, cap, what, z)


def _certify_minimal(have: ClaimIndex, xs, ys, z, backdoor: bool) -> str | None:
    for v in sorted(z, key=node_sort_key):
        rest = z - {v}
        if not any(have.paths("open", rest, a, b, backdoor=backdoor) for a in xs for b in ys):
            kind = "backdoor path" if backdoor else "path"
            return f"minimality: no {kind} is shown open given {format_set(rest)} (without {v})"
    return None


def _certify_backdoor(have: ClaimIndex, g: CausalGraph, x: str, y: str, z: frozenset[str], variant: str,
                      cap: _Cap) -> str | None:  # fmt: skip
    for v in sorted(z, key=node_sort_key):
        if not have.non_descendant(v, x):
            return f"{v} is not shown to be a non-descendant of {x}"
    why = _certify_blocking(have, g, frozenset((x,)), frozenset((y,)), z, cap, backdoor=True)
    if why:
        return why
    if variant == "minimal":
        return _certify_minimal(have, {x}, {y}, z, backdoor=True)
    if variant == "maximal":
        desc = have.descendant_set(x)
        if desc is None:
            return f"maximality: claim the descendants of {x} ('descendants of {x} = {{...}}')"
        # one-node additions decide maximality (criteria.is_maximal_backdoor_set); in a DAG the
        # maximal set is every candidate, so there is nothing left to add
        for v in sorted(g.node_set - desc - z - {x, y}, key=node_sort_key):
            if not have.paths("open", z | {v}, x, y, backdoor=True):
                return (
                    f"maximality: {v} is neither in {format_set(z)} nor a descendant of {x}, and no backdoor "
                    f"path is shown open given {format_set(z | {v})}"
                )
    return None


def _certify_frontdoor(
    have: ClaimIndex, g: CausalGraph, x: str, y: str, z: frozenset[str], variant: str, cap: _Cap
) -> str | None:
    required, complete = _required_paths(g, [(x, y)], ("->",), cap, marks=("->",))
    if not required:
        if not (
            have.no_path(x, y, "directed")
            or (have.descendant_set(x) is not None and y not in have.descendant_set(x))
        ):
            return f"no directed path from {x} to {y} exists; say so ('no directed path from {x} to {y}')"
    else:
        claimed = {p for p in have.directed(x, y) if set(p.nodes[1:-1]) & z}
        if complete:
            missing = [p for p in required if p not in claimed]
            if missing:
                return f"directed path {missing[0]} is not shown (or does not pass through {format_set(z)})"
        else:
            cap.applied = True
            if len(claimed) < cap.limit:
                n = cap.limit
                return f"more than {n} directed paths exist; show {n} of them passing through {format_set(z)}"
    for v in sorted(z, key=node_sort_key):
        why = _certify_blocking(have, g, frozenset((x,)), frozenset((v,)), frozenset(), cap, backdoor=True)
        if why:
            return f"condition (ii) for {v}: {why}"
        why = _certify_blocking(
            have, g, frozenset((v,)), frozenset((y,)), frozenset((x,)), cap, backdoor=True
        )
        if why:
            return f"condition (iii) for {v}: {why}"
    if variant == "minimal":
        # Z minus one member still meets (ii) and (iii); it fails only by a directed path avoiding it
        for v in sorted(z, key=node_sort_key):
            if not any(set(p.nodes[1:-1]) & z == {v} for p in have.directed(x, y)):
                return f"minimality: no directed path from {x} to {y} is shown that meets {format_set(z)} only at {v}"
    if variant == "maximal":
        # a node outside Z can be added iff it meets (ii) and (iii) on its own. The (iii) claim is
        # checked in the whole graph, not with v's outgoing edges removed; the two agree unless v
        # is an ancestor of X, and then v breaks (ii) anyway, so the claim still proves v is out.
        for v in sorted(g.node_set - z - {x, y}, key=node_sort_key):
            if not (
                have.paths("open", frozenset(), x, v, backdoor=True)
                or have.paths("open", frozenset((x,)), v, y, backdoor=True)
            ):
                return (
                    f"maximality: {v} is not shown to break (ii) (a backdoor path {x} … {v} open "
                    f"given {{}}) or (iii) (a backdoor path {v} … {y} open given {{{x}}})"
                )
    return None


def _certify_ate(
    have: ClaimIndex, ctx: ClaimContext, x: str, y: str, z: frozenset[str], cap: _Cap, result: Any
) -> str | None:
    why = _certify_backdoor(have, ctx.graph, x, y, z, "any", cap)
    if why:
        return why
    zs = sorted(z, key=node_sort_key)
    if 2 ** len(zs) > MAX_STRATA:
        return f"adjusting for {len(zs)} variables needs {2 ** len(zs)} strata, over the cap of {MAX_STRATA}"
    stated = {(c.args[0], c.args[1]) for c in have.all if c.kind == "prob"}
    norm = lambda t: tuple(sorted(t, key=lambda nv: node_sort_key(nv[0])))  # noqa: E731
    stated = {(norm(t), norm(c)) for t, c in stated}
    psi = 0.0
    for values in itertools.product((0, 1), repeat=len(zs)):
        stratum = tuple(zip(zs, values))
        pz = claim_probability(ctx, stratum, ()) if zs else 1.0
        if pz is None or pz <= 1e-12:
            continue
        if zs and (norm(stratum), ()) not in stated:
            return f"P({', '.join(f'{n}={v}' for n, v in stratum)}) is not stated"
        p = []
        for a in (1, 0):
            cond = norm(((x, a), *stratum))
            if (((y, 1),), cond) not in stated:
                shown = ", ".join(f"{n}={v}" for n, v in ((x, a), *stratum))
                return f"P({y}=1 | {shown}) is not stated"
            value = claim_probability(ctx, ((y, 1),), ((x, a), *stratum))
            if value is None:
                return "positivity fails"
            p.append(value)
        psi += (p[0] - p[1]) * pz
    claims = [c.args[0] for c in have.all if c.kind == "psi"]
    if not claims:
        return "ψ is not stated"
    tolerance = float(ctx.query.get("tolerance", 0.01))
    wrong = [v for v in claims if abs(v - psi) > tolerance]
    if wrong:
        return f"ψ = {wrong[0]:g} but the adjustment formula on {format_set(z)} gives {psi:.4f}"
    decision, stated = result
    threshold = float(ctx.query["threshold"])
    if decision != (psi > threshold):
        return f"ψ = {psi:.4f} is {'above' if psi > threshold else 'not above'} {threshold:g}: RESULT decides the other way"
    if stated is not None and abs(stated - psi) > tolerance:
        return f"RESULT's ψ = {stated:g} is not the certified {psi:.4f}"
    return None


def check_derivation(
    lines: Sequence[str] | None,
    kind: str,
    query: Mapping[str, Any],
    value: Any,
    graph: CausalGraph,
    cpts: Mapping[str, Any] | None = None,
    *,
    ate_set: frozenset[str] | None = None,
    max_paths: int = DEFAULT_MAX_PATHS,
    context: ClaimContext | None = None,
) -> DerivationReport:
    """Parse DERIVATION's claims, check each on ``graph``, and check that they certify ``value``.

    Args:
        lines: the DERIVATION lines (bullets stripped).
        kind: the query kind (``backdoor_set`` …).
        query: the query dict (roles, variant, tolerance).
        value: RESULT's parsed value (a set, ``bool``, node, cycle tuple, or ``(decision, ψ)``).
        graph: the verification graph.
        cpts: the problem's CPTs (``ate``).
        ate_set: the adjustment set RESULT names (``ate``).
        max_paths: the path cap (module docstring).
        context: a :func:`derivation_context` for these ``graph``, ``cpts`` and ``query`` (the same
            objects), shared across calls to check repeated claims once; otherwise ignored.

    Returns:
        A :class:`DerivationReport`; ``passed`` is the check's verdict. Never raises on model output.
    """
    report = DerivationReport(claims=parse_claims(list(lines or ())))
    if not report.claims:
        return report
    if context is not None and context.graph is graph and context.cpts is cpts and context.query is query:
        ctx = context
    else:  # no context, or one made for other inputs: a fresh one
        ctx = ClaimContext(graph, cpts, query)
    for claim in report.claims:
        why = claim_verdict(ctx, claim)
        if why:
            report.false.append((claim.line, why))
    if report.false:
        return report
    if ctx is not context:
        report.missing = _certify_safely(report.claims, ctx, kind, query, value, ate_set, max_paths)
        return report
    # A shared context remembers certificates: _certify reads only the claims' kinds and args (fixed
    # by their normalised texts, in order), the context and the arguments below. ``repr`` tells
    # apart values that are equal but print differently (ψ = 0.0 and -0.0). The value is a string.
    texts = tuple(c.text for c in report.claims)
    key = (texts, kind, value, repr(value) if kind == "ate" else None, ate_set, max_paths)
    try:
        if key in ctx._certificates:
            report.missing = ctx._certificates[key]
            return report
    except TypeError:  # an unhashable value from a caller: check without the memo
        key = None
    report.missing = _certify_safely(report.claims, ctx, kind, query, value, ate_set, max_paths)
    if key is not None and sum(map(len, texts)) <= _MAX_CERTIFICATE_KEY:
        if len(ctx._certificates) >= _MAX_CERTIFICATES:
            ctx._certificates.clear()
        ctx._certificates[key] = report.missing
    return report


def _certify_safely(claims: list[Claim], ctx: ClaimContext, kind: str, query: Mapping[str, Any], value: Any,
                    ate_set: frozenset[str] | None, max_paths: int) -> str | None:  # fmt: skip
    cap = _Cap(max_paths)
    try:
        missing = _certify(ClaimIndex(claims), ctx, kind, query, value, ate_set, cap)
        if missing is None and cap.applied:
            missing = _valid_beyond_cap(ctx, kind, query, value, ate_set, cap.limit)
        return missing
    except (ValueError, KeyError, IndexError) as exc:
        return f"cannot be certified: {str(exc)[:100]}"


def _valid_beyond_cap(ctx: ClaimContext, kind: str, q: Mapping[str, Any], value: Any,
                      ate_set: frozenset[str] | None, limit: int) -> str | None:  # fmt: skip
    """Why a certificate that relied on the path cap does not hold: RESULT fails the query predicate.

    ``cap`` distinct true paths stand in for all of them only for a RESULT that is valid: the
    unnamed paths may include one that RESULT leaves open. For ``ate`` the predicate is the one on
    RESULT's adjustment set (the backdoor criterion); ψ and the decision are certified by the claims.
    """
    g = ctx.graph
    if kind == "ate":
        x, y = q["treatment"], q["outcome"]
        valid = ate_set is not None and C.is_backdoor_set(g, x, y, ate_set)
    else:
        valid = QUERY_KINDS[kind].is_valid(g, q, value, ctx.cpts)
    if valid:
        return None
    return (
        f"more than {limit} paths exist and the claimed ones stand in for the rest only for a RESULT "
        f"that satisfies {kind}; this one does not"
    )


def _as_set(v: Any) -> frozenset[str]:
    return frozenset([v] if isinstance(v, str) else v or [])


def _certify(have: ClaimIndex, ctx: ClaimContext, kind: str, q: Mapping[str, Any], value: Any,
             ate_set: frozenset[str] | None, cap: _Cap) -> str | None:  # fmt: skip
    g = ctx.graph
    if value is None:
        return "RESULT does not parse"
    if kind in ("backdoor_set", "frontdoor_set", "dsep_set", "msep_set") or (kind == "ate" and ate_set):
        z = frozenset(ate_set if kind == "ate" else value)
        why = unknown_nodes(ctx, z)
        if why:
            return f"RESULT names {why}"
        ends = {q[r] for r in ("treatment", "outcome") if isinstance(q.get(r), str)}
        ends |= _as_set(q.get("x")) | _as_set(q.get("y"))
        if z & ends:
            return f"RESULT contains the query's own node(s) {format_set(z & ends)}"
    if kind == "backdoor_set":
        return _certify_backdoor(
            have, g, q["treatment"], q["outcome"], frozenset(value), q.get("variant", "any"), cap
        )
    if kind == "frontdoor_set":
        return _certify_frontdoor(
            have, g, q["treatment"], q["outcome"], frozenset(value), q.get("variant", "any"), cap
        )
    if kind in ("dsep_set", "msep_set", "ci_test"):
        xs, ys = _as_set(q["x"]), _as_set(q["y"])
        if kind == "ci_test":
            given = _as_set(q.get("given"))
            if value:
                return _certify_blocking(have, g, xs, ys, given, cap)
            if any(have.paths("open", given, a, b) for a in xs for b in ys):
                return None
            return f"no path is shown open given {format_set(given)}"
        z = frozenset(value)
        why = _certify_blocking(have, g, xs, ys, z, cap)
        if why is None and q.get("variant", "any") == "minimal":
            why = _certify_minimal(have, xs, ys, z, backdoor=False)
        return why
    if kind == "directed_path":
        x, y = q["treatment"], q["outcome"]
        if value:
            return None if have.directed(x, y) else f"no directed path from {x} to {y} is shown"
        desc = have.descendant_set(x)
        if have.no_path(x, y, "directed") or (desc is not None and y not in desc):
            return None
        return f"show there is none: 'no directed path from {x} to {y}' or the descendants of {x}"
    if kind == "mediator":
        x, y, m = q["treatment"], q["outcome"], value
        if m in (x, y):
            return f"{m} is an end of the query, not a mediator"
        if any(m in p.nodes[1:-1] for p in have.directed(x, y)):
            return None
        if have.directed(x, m) and have.directed(m, y):
            return None
        return f"no directed path from {x} through {m} to {y} is shown"
    if kind == "cycle":
        seq = tuple(value)
        for c in have.all:
            if c.kind == "cycle":
                nodes = c.args[0].nodes[:-1]
                if len(nodes) == len(seq) and any(nodes[i:] + nodes[:i] == seq for i in range(len(nodes))):
                    return None
        return f"the cycle {' -> '.join((*seq, seq[0]))} is not shown edge by edge"
    if kind == "ate":
        if ate_set is None:
            return "RESULT names no adjustment set"
        return _certify_ate(have, ctx, q["treatment"], q["outcome"], ate_set, cap, value)
    return f"no certificate is defined for query kind {kind!r}"
