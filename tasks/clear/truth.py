"""Truth and verdicts for CLEAR questions: which sets, paths and cycles are valid answers.

The record format and the semantics fixed by the published labels are in :mod:`faithgrpo.tasks.clear`.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterator
from typing import Any

from faithgrpo.tasks.clear.bits import PathKey, bits_of, graph_bits
from faithgrpo.tasks.clear.descriptions import (
    ACYCLIC_TYPES,
    ADJUSTMENT_TASKS,
    MAX_PATHS,
    MAX_SUBSET_POOL,
    PATH_TASKS,
)
from faithgrpo.tasks.clear.questions import ClearQuestion
from faithgrpo.verifier import graphs as C
from faithgrpo.verifier.graphs.edges import Path
from faithgrpo.verifier.graphs.model import CausalGraph, node_sort_key


# ---------------------------------------------------------------------------------------------
# predicates
def is_supported(q: ClearQuestion) -> bool:
    """Whether the judge decides ``q`` at all (graph kind and the open front-door case)."""
    kind = q.graph.kind
    if (
        q.task_type in (*ADJUSTMENT_TASKS, "d-separation", "blocked_path", "backdoor_path")
        and kind not in ACYCLIC_TYPES
    ):
        return False
    if q.task_type == "frontdoor_adjustment_set":
        b = graph_bits(q.graph)
        return bool(b.des[b.index[q.x]] & (1 << b.index[q.y]))
    if q.task_type == "markov_blanket":
        return kind == "DAG"
    return True


def _pool_and_predicate(q: ClearQuestion) -> tuple[list[str], Callable[[int], bool]]:
    """The nodes a valid set may use and the validity predicate on node masks (variant "any")."""
    g, b = q.graph, graph_bits(q.graph)
    if q.task_type == "blocked_path":
        idx = tuple(b.index[v] for v in q.path.nodes)
        marks = q.path.marks
        pool = g.node_set - {q.path.nodes[0], q.path.nodes[-1]}
        return sorted(pool, key=node_sort_key), lambda m: b.blocked(idx, marks, m)
    x, y = b.index[q.x], b.index[q.y]
    if q.task_type == "backdoor_adjustment_set":
        pool_mask = ((1 << len(b.names)) - 1) & ~((1 << y) | b.des[x])
        pred = functools.partial(b.backdoor, x, y)
    elif q.task_type == "frontdoor_adjustment_set":
        # an ancestor of x in Z leaves the backdoor path x <- ... <- z open: never valid
        pool_mask = ((1 << len(b.names)) - 1) & ~((1 << y) | b.anc[x])
        pred = functools.partial(b.frontdoor, x, y)
    else:  # d-separation
        pool_mask = ((1 << len(b.names)) - 1) & ~((1 << x) | (1 << y))
        pred = functools.partial(b.separated, x, y)
    return [b.names[i] for i in bits_of(pool_mask)], pred


def _subsets_of(items: list[int], *, proper: bool) -> Iterator[int]:
    for k in range(len(items) - (1 if proper else 0), -1, -1):
        for combo in itertools.combinations(items, k):
            yield sum(combo)


def _set_verdict(q: ClearQuestion, z: frozenset[str], *, claim: bool) -> bool | None:
    """Whether ``z`` answers ``q`` (variant included); ``None`` when that is open or over the caps."""
    g = q.graph
    if q.task_type == "markov_blanket":
        return z == C.markov_blanket(g, q.node)
    conditioning = q.task_type in ("d-separation", "blocked_path")
    if not z <= g.node_set:
        return None if claim and conditioning else False
    ends = {q.path.nodes[0], q.path.nodes[-1]} if q.task_type == "blocked_path" else {q.x, q.y}
    if z & ends:
        return None if claim and conditioning else False
    b = graph_bits(g)
    pool, pred = _pool_and_predicate(q)
    zm = b.mask(z)
    if not pred(zm):
        return False
    if q.variant == "minimal":
        members = [1 << b.index[v] for v in z]
        if len(members) > MAX_SUBSET_POOL:
            return None
        return not any(pred(m) for m in _subsets_of(members, proper=True))
    if q.variant == "maximal":
        extra = [1 << b.index[v] for v in pool if v not in z]
        if len(extra) > MAX_SUBSET_POOL:
            return None
        return not any(pred(zm | m) for m in _subsets_of(extra, proper=False) if m)
    return True


@functools.lru_cache(maxsize=1024)
def set_family(q: ClearQuestion) -> tuple[frozenset[str], ...] | None:
    """Every valid set of an adjustment/separation/blocking question (its variant applied)."""
    b = graph_bits(q.graph)
    pool, pred = _pool_and_predicate(q)
    if len(pool) > MAX_SUBSET_POOL:
        return None
    items = [1 << b.index[v] for v in pool]
    valid = [m for m in _subsets_of(items, proper=False) if pred(m)]
    if q.variant == "minimal":
        valid = [m for m in valid if not any(w != m and w & ~m == 0 for w in valid)]
    elif q.variant == "maximal":
        valid = [m for m in valid if not any(w != m and m & ~w == 0 for w in valid)]
    return tuple(frozenset(b.names[i] for i in bits_of(m)) for m in valid)


def _set_exists(q: ClearQuestion) -> bool | None:
    if q.variant != "any":  # a valid set exists iff a minimal (maximal) one does
        q = ClearQuestion(q.task_type, q.question_type, q.graph, q.x, q.y, q.node, q.path)
    b = graph_bits(q.graph)
    pool, pred = _pool_and_predicate(q)
    if len(pool) > MAX_SUBSET_POOL:
        return None
    items = [1 << b.index[v] for v in pool]
    return any(pred(m) for m in _subsets_of(items, proper=False))


@functools.lru_cache(maxsize=1024)
def path_universe(q: ClearQuestion) -> tuple[PathKey, ...] | None:
    """Every backdoor (directed) path from ``q.x`` to ``q.y`` as ``(nodes, marks)``; ``None`` over the cap."""
    if q.task_type not in ("backdoor_path", "directed_path"):
        return None
    b = graph_bits(q.graph)
    paths = b.paths(b.index[q.x], b.index[q.y], backdoor=q.task_type == "backdoor_path", limit=MAX_PATHS)
    return None if paths is None else tuple(paths)


@functools.lru_cache(maxsize=1024)
def graph_cycles(g: CausalGraph) -> tuple[tuple[str, ...], ...] | None:
    """Every directed cycle of ``g``, each rotated to start at its smallest node (None: over the cap)."""
    found = C.simple_cycles(g, limit=MAX_PATHS + 1)
    return None if len(found) > MAX_PATHS else tuple(rotate_cycle(c) for c in found)


def rotate_cycle(cycle: tuple[str, ...]) -> tuple[str, ...]:
    """``cycle`` rotated to start at its smallest node (in :func:`node_sort_key` order)."""
    i = min(range(len(cycle)), key=lambda k: node_sort_key(cycle[k]))
    return tuple(cycle[i:] + cycle[:i])


def cycle_nodes(g: CausalGraph, p: Path, *, claim: bool) -> tuple[str, ...] | bool | None:
    """The forward node cycle of a closed path, ``False`` when it is not a cycle of ``g``.

    Rule (docs/clear.md, "Record format"): every arrow ``->`` (or every arrow ``<-``), each step an
    edge of ``g`` in that direction, last node == first. A closed walk that revisits a node is ``None`` for a claim
    (the labels do not say) and ``False`` for an answer.
    """
    if len(p.nodes) < 3 or p.nodes[0] != p.nodes[-1] or len(set(p.marks)) != 1 or p.marks[0] == "<->":
        return False
    forward = p if p.marks[0] == "->" else p.reversed()
    if not all((a, b) in g.directed for a, b in zip(forward.nodes, forward.nodes[1:])):
        return False
    inner = forward.nodes[:-1]
    if len(set(inner)) != len(inner):
        return None if claim else False
    return inner


def _orient(q: ClearQuestion, p: Path, *, claim: bool) -> Path | None:
    """``p`` read from ``q.x``; a path written from ``q.y`` back to ``q.x`` is ``None`` for a claim."""
    if len(p.nodes) >= 2 and p.nodes[0] == q.y and p.nodes[-1] == q.x:
        return None if claim else p.reversed()
    return p


def _path_verdict(q: ClearQuestion, p: Path, *, claim: bool) -> bool | None:
    g = q.graph
    if q.task_type == "cycle":
        nodes = cycle_nodes(g, p, claim=claim)
        return nodes if nodes is None else nodes is not False
    if not set(p.nodes) <= g.node_set:
        return False
    p = _orient(q, p, claim=claim)
    if p is None:
        return None
    if q.task_type == "backdoor_path":
        ok = C.is_backdoor_path(g, q.x, q.y, p)
    else:
        ok = C.is_directed_path(g, p) and p.nodes[0] == q.x and p.nodes[-1] == q.y
    if not ok or q.variant not in ("shortest", "longest"):
        return ok
    universe = path_universe(q)
    if universe is None:
        return None
    lengths = [len(marks) for _, marks in universe]
    return len(p.marks) == (min(lengths) if q.variant == "shortest" else max(lengths))


def verdict(q: ClearQuestion, value: Any, *, claim: bool) -> bool | None:
    """Whether ``value`` answers ``q`` (``claim``: as a claimed answer); None when undecided."""
    if value is None:
        return None if claim else False
    if q.task_type in PATH_TASKS:
        return _path_verdict(q, value, claim=claim) if isinstance(value, Path) else False
    return _set_verdict(q, value, claim=claim) if isinstance(value, frozenset) else False


def question_truth(q: ClearQuestion) -> bool | None:
    """The right yes/no for a YN or EX question."""
    g = q.graph
    if q.claim is not None:
        return verdict(q, q.claim, claim=True)
    if q.task_type == "c-component":
        return len(g.districts()) == 1
    if q.task_type in (*ADJUSTMENT_TASKS, "d-separation", "blocked_path"):
        return _set_exists(q)
    if q.task_type == "backdoor_path":
        return C.path_exists(g, q.x, q.y, first_marks=("<-", "<->"))
    if q.task_type == "directed_path":
        return C.has_directed_path(g, q.x, q.y)
    if q.task_type == "cycle":
        return g.find_cycle() is not None
    return None


def answer_universe(q: ClearQuestion) -> tuple | None:
    """Every valid answer of an FA/HM question (sets, paths or node cycles)."""
    if q.task_type in (*ADJUSTMENT_TASKS, "d-separation", "blocked_path"):
        return set_family(q)
    if q.task_type in ("backdoor_path", "directed_path"):
        return path_universe(q)
    if q.task_type == "cycle":
        return graph_cycles(q.graph)
    if q.task_type == "c-component":
        return tuple(q.graph.districts())
    if q.task_type == "markov_blanket":
        return tuple(C.markov_blanket(q.graph, q.node))  # HM counts its nodes
    return None
