"""Graphical criteria over :class:`~faithgrpo.verifier.graphs.model.CausalGraph`: separation, adjustment, paths, cycles, ATE.

Every function is pure. Node arguments accept a single name or an iterable of names; an unknown
node or an argument that makes no sense for the graph kind raises ``ValueError`` (these are
*caller* errors; code grading model output checks membership first, see
:mod:`faithgrpo.verifier.queries`). Set-validity predicates (``is_backdoor_set`` and friends) return
``False`` when the candidate set contains the treatment or outcome.

Engine: m-separation in an ADMG is d-separation in its *canonical DAG* (:func:`canonical_dag`),
where each bidirected edge ``a <-> b`` becomes a latent parent ``L -> a, L -> b`` (Richardson 2003).
The separation routines run the same linear-time algorithms networkx uses for
``is_d_separator`` / ``is_minimal_d_separator`` / ``find_minimal_d_separator`` (Bayes-ball,
Shachter 1998; van der Zander & Liśkiewicz 2020), but directly on the mixed graph's cached
adjacency, because networkx's versions are too slow per call for CALVER's latency budget on
large graphs (docs/performance.md). The tests check them against networkx on the canonical DAG and against brute-force
path enumeration. Backdoor and front-door criteria reduce to separation in graphs with some
outgoing edges removed (Pearl 2009, §3.3).

Paths are :class:`~faithgrpo.verifier.graphs.edges.Path` values; a path is *blocked* by ``Z`` when some
inner node is a non-collider in ``Z``, or some inner collider has neither itself nor a descendant in
``Z``; a collider is a node with arrowheads from both sides (``-> v <-``, ``-> v <->``,
``<-> v <-``, ``<-> v <->``).

Binary Bayesian networks (CPT JSON)
-----------------------------------
``cpts`` maps every variable to ``{"parents": [...], "p1": {...}}`` where ``p1`` gives
P(V = 1 | parents) keyed by the parents' values joined with commas in the listed parent order::

    {"Z": {"parents": [], "p1": {"": 0.4}},            # or "p1": 0.4
     "X": {"parents": ["Z"], "p1": {"0": 0.2, "1": 0.7}},
     "Y": {"parents": ["X", "Z"], "p1": {"0,0": 0.1, "0,1": 0.5, "1,0": 0.3, "1,1": 0.8}}}

All ``2^|parents|`` keys are required and every value lies in [0, 1].

References
----------
.. [1] J. Pearl, *Causality*, 2nd ed., Cambridge University Press, 2009 (d-separation §1.2.3,
   back-door criterion Def. 3.3.1, front-door criterion Def. 3.3.3, adjustment formula Eq. 3.19).
.. [2] T. Richardson, "Markov properties for acyclic directed mixed graphs", Scand. J. Stat. 30, 2003.
.. [3] J. Tian, A. Paz, J. Pearl, "Finding minimal d-separators", Tech. Rep. R-254, UCLA, 1998.
.. [4] R. Shachter, "Bayes-Ball: the rational pastime", UAI 1998.
.. [5] B. van der Zander, M. Liśkiewicz, "Finding minimal d-separators in linear time and
   applications", UAI 2020.
.. [6] J.-P. Pellet, A. Elisseeff, "Finding latent causes in causal networks", JMLR W&CP 6, 2008
   (Markov blanket as the collider-connected set).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from typing import Any

from faithgrpo.verifier.graphs.ate import adjusted_ate_on_table, checked_cpts
from faithgrpo.verifier.graphs.edges import Path
from faithgrpo.verifier.graphs.model import CausalGraph, node_sort_key
from faithgrpo.verifier.graphs.paths import path_is_blocked, simple_paths
from faithgrpo.verifier.graphs.separation import (
    checked_node,
    checked_nodes,
    find_minimal_separator,
    is_minimal_separator,
    reachable,
    require_acyclic,
    separated,
)

__all__ = [
    "ate_certificate",
    "backdoor_candidates",
    "frontdoor_candidates",
    "is_backdoor_set",
    "is_frontdoor_set",
    "is_maximal_backdoor_set",
    "is_maximal_frontdoor_set",
    "is_minimal_backdoor_set",
    "is_minimal_frontdoor_set",
    "maximal_backdoor_set",
    "maximal_backdoor_sets",
    "maximal_frontdoor_set",
    "minimal_backdoor_set",
    "minimal_frontdoor_set",
    "open_backdoor_path",
]


# ---------------------------------------------------------------------------------------------
# adjustment
def backdoor_candidates(g: CausalGraph, x: str, y: str) -> frozenset[str]:
    """Nodes allowed in a backdoor set for (x, y): all nodes except x, y and descendants of x."""
    x, y = checked_node(g, x, "treatment"), checked_node(g, y, "outcome")
    return g.node_set - g.descendants(x) - {x, y}


def is_backdoor_set(g: CausalGraph, x: str, y: str, zs: Iterable[str]) -> bool:
    """Whether ``zs`` satisfies the backdoor criterion relative to (x, y).

    Definition (Pearl 2009, Def. 3.3.1; m-separation form for ADMGs): x, y not in Z, no node of Z
    is a descendant of x, and Z blocks every backdoor path from x to y. Computed as
    ``x ⊥ y | Z`` in the graph with the edges out of x removed, which has exactly the backdoor
    paths of ``g`` and, given Z ∩ De(x) = ∅, the same open colliders.

    Complexity: ``O(|V| + |E|)``.

    Raises:
        ValueError: unknown nodes, x == y, or a DG.

    Example:
        >>> from faithgrpo.verifier.graphs.edges import parse_graph
        >>> g = parse_graph("U -> X; U -> Y; X -> M -> Y")
        >>> is_backdoor_set(g, "X", "Y", {"U"}), is_backdoor_set(g, "X", "Y", {"U", "M"})
        (True, False)
    """
    require_acyclic(g, "the backdoor criterion")
    x, y = checked_node(g, x, "treatment"), checked_node(g, y, "outcome")
    if x == y:
        raise ValueError("treatment and outcome must differ")
    z = checked_nodes(g, zs, "Z")
    if x in z or y in z or z & g.descendants(x):
        return False
    return separated(g, frozenset((x,)), frozenset((y,)), z, cut=frozenset((x,)))


def open_backdoor_path(
    g: CausalGraph, x: str, y: str, zs: Iterable[str], *, limit: int = 10_000
) -> Path | None:
    """A backdoor path from x to y that ``zs`` leaves open (a witness for a failed criterion), or ``None``.

    Scans at most ``limit`` backdoor paths.
    """
    z = checked_nodes(g, zs, "Z") - {x, y}
    for p in simple_paths(g, x, y, first_marks=("<-", "<->"), limit=limit):
        if not path_is_blocked(g, p, z):
            return p
    return None


def is_minimal_backdoor_set(g: CausalGraph, x: str, y: str, zs: Iterable[str]) -> bool:
    """Whether ``zs`` is a backdoor set for (x, y) and no proper subset of it is.

    Subsets of a backdoor set contain no descendant of x either, so this is minimal separation of x
    and y in the graph with x's outgoing edges removed (Tian, Paz & Pearl 1998).

    Complexity: ``O(|V| + |E|)``.
    """
    if not is_backdoor_set(g, x, y, zs):
        return False
    z = checked_nodes(g, zs, "Z")
    return is_minimal_separator(g, frozenset((x,)), frozenset((y,)), z, cut=frozenset((x,)))


def minimal_backdoor_set(g: CausalGraph, x: str, y: str) -> frozenset[str] | None:
    """One minimal backdoor set for (x, y), or ``None`` when no backdoor set exists.

    Complexity: ``O(|V| + |E|)``.
    """
    allowed = backdoor_candidates(g, x, y)
    require_acyclic(g, "the backdoor criterion")
    return find_minimal_separator(g, frozenset((x,)), frozenset((y,)), allowed, cut=frozenset((x,)))


def maximal_backdoor_set(g: CausalGraph, x: str, y: str) -> frozenset[str] | None:
    """The maximal backdoor set for (x, y) in a DAG, or ``None`` when none exists.

    Definition: a backdoor set with no proper superset that is one. In a DAG it is unique: every
    backdoor path starts ``x <- p`` with p a non-collider; if y is not a parent of x, every such p is
    a non-descendant of x, so the set of *all* candidates (nodes other than x, y and De(x)) blocks
    every backdoor path; if y is a parent of x the path ``x <- y`` cannot be blocked at all. In ADMGs
    maximal sets need not be unique (a backdoor path may start ``x <-> p`` with p a collider), so
    this raises ``ValueError`` there; use :func:`maximal_backdoor_sets`.

    Complexity: ``O(|V| + |E|)``.
    """
    if g.kind != "DAG":
        raise ValueError(
            f"the maximal backdoor set is unique only in DAGs, got {g.kind}; use maximal_backdoor_sets"
        )
    allowed = backdoor_candidates(g, x, y)
    return allowed if is_backdoor_set(g, x, y, allowed) else None


def is_maximal_backdoor_set(g: CausalGraph, x: str, y: str, zs: Iterable[str]) -> bool:
    """Whether ``zs`` is a backdoor set for (x, y) with no proper superset that is one (DAG or ADMG).

    One-node additions suffice: Z is maximal iff it is valid and Z ∪ {v} is not, for every
    candidate v ∉ Z (:func:`backdoor_candidates`). Proof (on the canonical DAG with x's outgoing
    edges removed, where S ⊆ R is valid iff S separates x and y in M(S), the moral graph of the
    ancestral set A(S) = An({x, y} ∪ S), by Lauritzen's criterion): let Z ⊂ W ⊆ R both be valid. If some v ∈ W ∖ Z lies in A(Z), then
    A(Z ∪ {v}) = A(Z) and Z ∪ {v} contains the cut Z of M(Z). Otherwise take v ∈ W ∖ Z with no other
    node of W ∖ Z among its ancestors; a connecting path of M(Z ∪ {v}) avoiding Z ∪ {v} meets no node
    of W (those in A(Z ∪ {v}) are Z and v) and is a path of M(W) ⊇ M(Z ∪ {v}), contradicting W. So
    Z ∪ {v} is valid either way. The tests check this against brute force over all supersets on
    thousands of random DAGs and ADMGs. In a DAG this is Z = :func:`maximal_backdoor_set`.

    Complexity: ``O(|R| (|V| + |E|))``.
    """
    if not is_backdoor_set(g, x, y, zs):
        return False
    z = checked_nodes(g, zs, "Z")
    return not any(is_backdoor_set(g, x, y, z | {v}) for v in backdoor_candidates(g, x, y) - z)


def _natural(z: frozenset[str]) -> tuple:
    return (len(z), [node_sort_key(v) for v in sorted(z, key=node_sort_key)])


def maximal_backdoor_sets(
    g: CausalGraph, x: str, y: str, *, limit: int = 64, max_checks: int = 4_096
) -> list[frozenset[str]]:
    """Maximal backdoor sets for (x, y) (DAG or ADMG), smallest first, then natural order.

    Exhaustive (every maximal set) when the candidates have at most ``max_checks`` subsets;
    otherwise the maximal sets grown from :func:`minimal_backdoor_set`, ∅ and each single candidate
    (those that are backdoor sets) by adding the first candidate (natural order) that keeps the set
    valid, until none does (maximal by :func:`is_maximal_backdoor_set`). At most ``limit`` sets. In
    a DAG the answer is ``[maximal_backdoor_set(g, x, y)]`` (or ``[]``).

    Complexity: exhaustive ``O(2^|R| (|V| + |E| + |R|))``, else ``O(|R|^3 (|V| + |E|))``.
    """
    allowed = backdoor_candidates(g, x, y)
    items = sorted(allowed, key=node_sort_key)
    found: set[frozenset[str]] = set()
    if len(items) < 63 and 2 ** len(items) <= max_checks:
        valid = {
            frozenset(combo)
            for k in range(len(items) + 1)
            for combo in itertools.combinations(items, k)
            if is_backdoor_set(g, x, y, combo)
        }
        # maximal: no valid one-node superset (enough, see is_maximal_backdoor_set)
        found = {z for z in valid if not any(z | {v} in valid for v in allowed - z)}
    else:
        smallest = minimal_backdoor_set(g, x, y)
        seeds = [] if smallest is None else [smallest, frozenset(), *(frozenset((v,)) for v in items)]
        for z in seeds:
            if not is_backdoor_set(g, x, y, z):
                continue
            grown = True
            while grown:
                grown = False
                for v in sorted(allowed - z, key=node_sort_key):
                    if is_backdoor_set(g, x, y, z | {v}):
                        z, grown = z | {v}, True
                        break
            found.add(z)
    return sorted(found, key=_natural)[:limit]


def is_frontdoor_set(g: CausalGraph, x: str, y: str, zs: Iterable[str]) -> bool:
    """Whether ``zs`` satisfies Pearl's front-door criterion relative to (x, y).

    Definition (Pearl 2009, Def. 3.3.3): x, y not in Z and
    (i) Z intercepts every directed path from x to y;
    (ii) there is no unblocked backdoor path from x to any node of Z (x ⊥ Z given ∅ with x's
    outgoing edges removed);
    (iii) every backdoor path from a node z of Z to y is blocked by {x} (z ⊥ y | x with z's outgoing
    edges removed; (ii) rules out z being an ancestor of x, so removing z's edges does not change
    which colliders {x} opens).
    Taken literally, ``Z = ∅`` qualifies exactly when x has no directed path to y. In ADMGs
    separation is m-separation. Conditions (ii) and (iii) hold member by member, so the valid sets
    are the subsets of :func:`frontdoor_candidates` that satisfy (i).

    Complexity: ``O(|Z| (|V| + |E|))``.

    Example:
        >>> from faithgrpo.verifier.graphs.edges import parse_graph
        >>> g = parse_graph("X -> T -> Y; X <-> Y")  # smoking -> tar -> cancer, hidden genotype
        >>> is_frontdoor_set(g, "X", "Y", {"T"})
        True
    """
    require_acyclic(g, "the front-door criterion")
    x, y = checked_node(g, x, "treatment"), checked_node(g, y, "outcome")
    if x == y:
        raise ValueError("treatment and outcome must differ")
    z = checked_nodes(g, zs, "Z")
    if x in z or y in z:
        return False
    if not _intercepts(g, x, y, z):
        return False
    if not z:
        return True
    # (ii)
    if not separated(g, frozenset((x,)), z, frozenset(), cut=frozenset((x,))):
        return False
    # (iii)
    return all(
        separated(g, frozenset((v,)), frozenset((y,)), frozenset((x,)), cut=frozenset((v,))) for v in z
    )


def _intercepts(g: CausalGraph, x: str, y: str, z: frozenset[str]) -> bool:
    """Condition (i): every directed path x -> ... -> y has an inner node in ``z`` (BFS avoiding z)."""
    seen, stack = {x}, [x]
    while stack:
        for c in g.children(stack.pop()):
            if c == y:
                return False
            if c not in z and c not in seen:
                seen.add(c)
                stack.append(c)
    return True


def frontdoor_candidates(g: CausalGraph, x: str, y: str) -> frozenset[str]:
    """Nodes v ∉ {x, y} that satisfy front-door conditions (ii) and (iii) on their own.

    (ii) and (iii) are statements about each member separately (no open backdoor path x … v given
    ∅; every backdoor path v … y blocked by {x}), so a set is a front-door set iff it is a subset of
    these candidates that intercepts every directed path from x to y (condition (i)).

    Complexity: ``O(|V| (|V| + |E|))``.
    """
    require_acyclic(g, "the front-door criterion")
    x, y = checked_node(g, x, "treatment"), checked_node(g, y, "outcome")
    if x == y:
        raise ValueError("treatment and outcome must differ")
    fails_ii = reachable(g, frozenset((x,)), frozenset(), frozenset((x,)))
    return frozenset(
        v
        for v in g.node_set - {x, y} - fails_ii
        if separated(g, frozenset((v,)), frozenset((y,)), frozenset((x,)), cut=frozenset((v,)))
    )


def is_minimal_frontdoor_set(g: CausalGraph, x: str, y: str, zs: Iterable[str]) -> bool:
    """Whether ``zs`` is a front-door set for (x, y) and no proper subset of it is.

    Removing z from a valid Z keeps conditions (ii) and (iii) (they hold member by member), so
    Z ∖ {z} fails only by condition (i): a directed path x -> ... -> y that avoids Z ∖ {z}. Since
    (i) is upward closed, a valid proper subset exists iff some Z ∖ {z} is valid. Hence Z is minimal
    iff it is valid and, for each z ∈ Z, some directed path x -> ... -> y meets Z only at z (the
    certificate CALVER asks for). ``Z = ∅`` is minimal whenever it is valid (no directed path).
    The tests check this against brute force over all subsets.

    Complexity: ``O(|Z| (|V| + |E|))``.
    """
    if not is_frontdoor_set(g, x, y, zs):
        return False
    z = checked_nodes(g, zs, "Z")
    return not any(_intercepts(g, x, y, z - {v}) for v in z)


def maximal_frontdoor_set(g: CausalGraph, x: str, y: str) -> frozenset[str] | None:
    """The maximal front-door set for (x, y), or ``None`` when no front-door set exists.

    Definition: a front-door set with no proper superset that is one. It is unique: the valid
    sets are the subsets of :func:`frontdoor_candidates` that intercept every directed path x … y,
    and intercepting is upward closed, so if any valid set exists the candidates themselves are one
    and contain all others. A node v outside it cannot be added because v alone violates (ii) (an
    open backdoor path x … v given ∅) or (iii) (an open backdoor path v … y given {x}).

    Complexity: ``O(|V| (|V| + |E|))``.
    """
    allowed = frontdoor_candidates(g, x, y)
    return allowed if _intercepts(g, x, y, allowed) else None


def is_maximal_frontdoor_set(g: CausalGraph, x: str, y: str, zs: Iterable[str]) -> bool:
    """Whether ``zs`` is the maximal front-door set for (x, y) (see :func:`maximal_frontdoor_set`)."""
    best = maximal_frontdoor_set(g, x, y)
    return best is not None and checked_nodes(g, zs, "Z") == best


def minimal_frontdoor_set(g: CausalGraph, x: str, y: str) -> frozenset[str] | None:
    """One minimal front-door set for (x, y), or ``None`` when none exists.

    Starts from :func:`maximal_frontdoor_set` and drops each member (natural order) whose removal
    still intercepts every directed path; a member kept was needed then and stays needed in the
    smaller final set, so the result is minimal (:func:`is_minimal_frontdoor_set`).

    Complexity: ``O(|V| (|V| + |E|))``.
    """
    z = maximal_frontdoor_set(g, x, y)
    if z is None:
        return None
    for v in sorted(z, key=node_sort_key):
        if _intercepts(g, x, y, z - {v}):
            z = z - {v}
    return z


# ---------------------------------------------------------------------------------------------
# ATE certificate
def ate_certificate(
    g: CausalGraph,
    cpts: Mapping[str, Any],
    x: str,
    y: str,
    zs: Iterable[str],
    threshold: float,
    margin: float = 0.0,
) -> tuple[bool, str]:
    """The strict certificate for deciding ``ψ > threshold`` by backdoor adjustment on ``zs``.

    Passes when: the graph is a DAG whose CPTs match it; x ∉ Z and y ∉ Z; Z has no descendant of
    x; Z blocks every backdoor path; positivity holds; and ``|ψ − threshold| > margin``. ``zs``
    may come from model output: unknown nodes fail with a reason instead of raising.

    Returns:
        ``(ok, reason)``; the reason names the failed condition, or gives ψ and the decision.

    Raises:
        ValueError: malformed CPTs (or CPTs that disagree with the graph), unknown x/y, or a
            negative margin. These are problem-construction errors, not answer errors.

    Example:
        >>> from faithgrpo.verifier.graphs.edges import parse_graph
        >>> g = parse_graph("X -> Y")
        >>> cpts = {"X": {"parents": [], "p1": 0.5}, "Y": {"parents": ["X"], "p1": {"0": 0.2, "1": 0.7}}}
        >>> ate_certificate(g, cpts, "X", "Y", [], threshold=0.3, margin=0.05)
        (True, 'ψ = 0.5000 > threshold 0.3 (margin 0.05)')
    """
    return ate_certificate_checked(g, cpts, x, y, zs, threshold, margin)


def ate_certificate_checked(
    g: CausalGraph,
    cpts: Mapping[str, Any],
    x: str,
    y: str,
    zs: Iterable[str],
    threshold: float,
    margin: float,
    checked: tuple[dict, tuple | None] | None = None,
) -> tuple[bool, str]:
    """:func:`ate_certificate`; ``checked`` is ``ate._checked(cpts, g)`` when the caller already holds it."""
    if margin < 0:
        raise ValueError(f"margin must be >= 0, got {margin}")
    x, y = checked_node(g, x, "treatment"), checked_node(g, y, "outcome")
    if g.kind != "DAG":
        return False, f"ATE certificates need a DAG, got {g.kind}"
    table, key = checked or checked_cpts(cpts, g)  # validate_cpts(cpts, g) without its copy
    z = frozenset(zs)
    unknown = z - g.node_set
    if unknown:
        return False, f"Z has unknown node(s) {sorted(unknown, key=node_sort_key)}"
    if x in z:
        return False, f"treatment {x} is in Z"
    if y in z:
        return False, f"outcome {y} is in Z"
    desc = z & g.descendants(x)
    if desc:
        return False, f"Z contains descendant(s) of {x}: {sorted(desc, key=node_sort_key)}"
    if not is_backdoor_set(g, x, y, z):
        witness = open_backdoor_path(g, x, y, z)
        return (
            False,
            f"backdoor path {witness} is open given Z" if witness else "Z leaves a backdoor path open",
        )
    try:
        psi = adjusted_ate_on_table(table, key, x, y, z)
    except ValueError as exc:
        return False, str(exc)
    if abs(psi - threshold) <= margin:
        return False, f"ψ = {psi:.4f} is within margin {margin} of threshold {threshold}"
    side = ">" if psi > threshold else "<"
    return True, f"ψ = {psi:.4f} {side} threshold {threshold} (margin {margin})"
