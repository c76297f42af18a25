"""Graph families of the causal problem generator: random DAGs, motif DAGs, ADMGs and cyclic graphs.

``random_dag`` adds edges by probability over a random order (then connects the components),
``motifs`` glues chains, forks and colliders onto a growing graph, ``admg`` adds bidirected edges
(hidden common causes) to either, and ``cyclic`` adds back edges that close directed cycles. Every
draw takes its randomness from the caller's ``random.Random``, so rows are reproducible.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from typing import Protocol

from faithgrpo.verifier.graphs.model import CausalGraph, node_sort_key

__all__ = ["FAMILIES", "GraphShape", "make_graph"]


class GraphShape(Protocol):
    """The generator settings a family reads (:class:`~faithgrpo.tasks.causal.datasets.CausalGraphConfig`
    has them all)."""

    edge_prob: float
    max_parents: int
    max_bidirected: int
    max_back_edges: int


FAMILIES = ("random_dag", "motifs", "admg", "cyclic")


def _connect(order: list[str], edges: set, rng: random.Random, max_parents: int) -> None:
    """Add forward edges (in ``order``) until the graph is weakly connected."""
    parent = {v: v for v in order}

    def find(v):
        while parent[v] != v:
            parent[v] = parent[parent[v]]
            v = parent[v]
        return v

    for a, b in edges:
        parent[find(a)] = find(b)
    pos = {v: i for i, v in enumerate(order)}
    indeg = {v: sum(1 for _, b in edges if b == v) for v in order}
    while len({find(v) for v in order}) > 1:
        # Name each component by its first node in `order`: union-find roots depend on the order
        # edges were merged in, which for a set of string pairs varies with PYTHONHASHSEED.
        comps: dict[str, list[str]] = {}
        for v in order:
            comps.setdefault(find(v), []).append(v)
        inside = rng.choice(sorted(comps.values(), key=lambda c: pos[c[0]]))
        comp = find(inside[0])
        outside = [v for v in order if find(v) != comp]
        pairs = [(u, w) for u in inside for w in outside]
        rng.shuffle(pairs)
        pairs.sort(key=lambda p: indeg[max(p, key=pos.__getitem__)] >= max_parents)  # prefer heads with room
        u, w = pairs[0]
        a, b = (u, w) if pos[u] < pos[w] else (w, u)
        edges.add((a, b))
        indeg[b] += 1
        parent[find(a)] = find(b)


def _random_dag(names: list[str], rng: random.Random, cfg: GraphShape) -> set:
    order = list(names)
    rng.shuffle(order)
    edges = set()
    for j, b in enumerate(order):
        parents = [a for a in order[:j] if rng.random() < cfg.edge_prob]
        if len(parents) > cfg.max_parents:
            parents = rng.sample(parents, cfg.max_parents)
        edges |= {(a, b) for a in parents}
    _connect(order, edges, rng, cfg.max_parents)
    return edges


# motif edges over roles 0-1-2 (a path of three roles)
_MOTIFS = {
    "chain": ((0, 1), (1, 2)),
    "fork": ((1, 0), (1, 2)),
    "collider": ((0, 1), (2, 1)),
}


def _motif_dag(names: list[str], rng: random.Random, cfg: GraphShape) -> set:
    """Glue chains, forks and colliders onto a growing graph; edges follow random ranks, so no cycle."""
    pending = list(names)
    rng.shuffle(pending)
    first = pending.pop()
    rank = {first: 0.0}
    edges: set = set()
    indeg = {v: 0 for v in names}
    while pending:
        anchor = rng.choice(sorted(rank, key=node_sort_key))
        if len(pending) == 1:
            new = pending.pop()
            if rng.random() < 0.5 or indeg[anchor] >= cfg.max_parents:
                edges.add((anchor, new))
                rank[new] = rank[anchor] + rng.uniform(0.1, 1.0)
                indeg[new] += 1
            else:
                edges.add((new, anchor))
                rank[new] = rank[anchor] - rng.uniform(0.1, 1.0)
                indeg[anchor] += 1
            continue
        options = []
        for motif, motif_edges in _MOTIFS.items():
            for role in range(3):
                gained = sum(1 for _, b in motif_edges if b == role)
                if indeg[anchor] + gained <= cfg.max_parents:
                    options.append((motif, role))
        motif, role = rng.choice(options)
        news = [pending.pop(), pending.pop()]
        who = {role: anchor}
        for r, v in zip([r for r in range(3) if r != role], news):
            who[r] = v
        # rank the new nodes outward from the anchor along the path of roles 0-1-2
        for r in sorted((r for r in range(3) if r != role), key=lambda r: abs(r - role)):
            nb = r + 1 if abs(r + 1 - role) < abs(r - role) else r - 1
            u, v = who[nb], who[r]
            step = rng.uniform(0.1, 1.0)
            rank[v] = rank[u] + step if (nb, r) in _MOTIFS[motif] else rank[u] - step
        for a, b in _MOTIFS[motif]:
            edges.add((who[a], who[b]))
            indeg[who[b]] += 1
    # a few extra forward edges make the mixes less tree-like
    order = sorted(names, key=rank.__getitem__)
    for i, j in itertools.combinations(range(len(order)), 2):
        a, b = order[i], order[j]
        if (a, b) not in edges and indeg[b] < cfg.max_parents and rng.random() < cfg.edge_prob / 4:
            edges.add((a, b))
            indeg[b] += 1
    return edges


def _base_dag(names, rng, cfg) -> set:
    return (_random_dag if rng.random() < 0.5 else _motif_dag)(names, rng, cfg)


def make_graph(family: str, names: Sequence[str], rng: random.Random, config: GraphShape) -> CausalGraph:
    """Draw one graph of ``family`` over ``names`` (nodes listed in natural order).

    Raises:
        ValueError: an unknown family.

    Example:
        >>> import random
        >>> from faithgrpo.tasks.causal import CausalGraphConfig
        >>> g = make_graph("cyclic", ["A", "B", "C", "D"], random.Random(0), CausalGraphConfig())
        >>> g.to_dict()["type"], sorted(g.directed)
        ('DG', [('B', 'A'), ('B', 'C'), ('C', 'B'), ('D', 'A')])
    """
    names = list(names)
    nodes = tuple(sorted(names, key=node_sort_key))
    if family == "random_dag":
        return CausalGraph("DAG", nodes, frozenset(_random_dag(names, rng, config))).validate()
    if family == "motifs":
        return CausalGraph("DAG", nodes, frozenset(_motif_dag(names, rng, config))).validate()
    if family == "admg":
        directed = _base_dag(names, rng, config)
        adjacent = {frozenset(e) for e in directed}
        pairs = [
            p
            for p in itertools.combinations(sorted(names, key=node_sort_key), 2)
            if frozenset(p) not in adjacent
        ]
        pairs = pairs or list(itertools.combinations(sorted(names, key=node_sort_key), 2))
        k = min(rng.randint(1, config.max_bidirected), len(pairs))
        return CausalGraph("ADMG", nodes, frozenset(directed), frozenset(rng.sample(pairs, k))).validate()
    if family == "cyclic":
        directed = _base_dag(names, rng, config)
        dag = CausalGraph("DAG", nodes, frozenset(directed))
        # a back edge v -> u with u an ancestor of v closes at least one cycle
        back = [(v, u) for v in nodes for u in dag.ancestors(v)]
        back.sort(key=lambda e: (node_sort_key(e[0]), node_sort_key(e[1])))
        back = [
            e for e in back if len(dag.parents(e[1])) < config.max_parents
        ] or back  # prefer heads with room
        k = min(rng.randint(1, config.max_back_edges), len(back))
        return CausalGraph("DG", nodes, frozenset(directed) | frozenset(rng.sample(back, k))).validate()
    raise ValueError(f"unknown graph family {family!r}; choose from {list(FAMILIES)}")
