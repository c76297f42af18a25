"""Seeded CLEAR-format records for the eleven structure task types (used by tests/test_clear_types.py).

Every template of the eleven types (docs/clear.md, "The eleven structure types") is instantiated on
random undirected graphs, directed graphs, DAGs, ADMGs and C-component / C-forest / C-tree ADMGs.
Labels come from the brute-force oracle below, written on networkx only and independent of
:mod:`faithgrpo.tasks.clear`:

* kinship: ``DiGraph.predecessors`` / ``successors``, ``networkx.ancestors`` / ``descendants``;
* triples: every ordered triple of nodes, matched against the three directed-edge patterns;
* paths: ``networkx.all_simple_edge_paths`` on the skeleton multigraph (``clear_records.Oracle``);
* topological orders: ``networkx.all_topological_sorts`` (the full list);
* Markov equivalence: the definition — the same d-separation statements
  (``networkx.is_d_separator`` over every pair and conditioning set), searched over every acyclic
  orientation of the skeleton;
* identification: a brute-force hedge search (Shpitser & Pearl 2006, Def. 5 and Thm. 4) over
  pairs of node sets, :func:`hedge_exists`;
* C-forest / C-tree: ``networkx.is_connected`` on the bi-directed edges, out-degrees, sinks.

Each record is a CLEAR record plus ``accept`` (other right answers: other orders, other class
members, tied paths, reordered lists), ``reject`` (brute-force wrong answers) and ``expect``.
:func:`generate` builds them in memory (no data file).
"""

from __future__ import annotations

import itertools
import json
import random

import networkx as nx
from clear_records import (
    LETTERS,
    Builder,
    Graph,
    Oracle,
    fmt_path,
    fmt_set,
    random_admg,
    random_dag,
    random_dg,
    sample,
)

SEED = 4343
RELATIONS = ("parents", "children", "ancestors", "descendants")
KINDS = ("chain", "fork", "v-structure")
FLIP = {"->": "<-", "<-": "->", "<->": "<->"}


# ---------------------------------------------------------------------------------------------
# graphs
def random_ug(rng: random.Random, n: int, p: float) -> Graph:
    g = Graph("UG", rng.sample(LETTERS, n), set(), set(), "UG")
    g.undirected = {tuple(sorted(e)) for e in itertools.combinations(g.nodes, 2) if rng.random() < p}
    g.undirected.add(tuple(sorted(g.nodes[:2])))
    return g


def describe(g: Graph, rng: random.Random) -> str:
    if g.kind == "UG":
        edges = sorted(g.undirected)
        rng.shuffle(edges)
        text = ", ".join(f"{a}-{b}" if rng.random() < 0.5 else f"{b}-{a}" for a, b in edges)
        return f"Given a undirected graph with nodes {', '.join(g.nodes)} and undirected edges {text}."
    return g.describe(rng)


def forest_admg(rng: random.Random, n: int, roots: int, graph_type: str, connected: bool = True) -> Graph:
    """Every node has at most one child; ``roots`` sinks; bi-directed edges span all nodes (or not)."""
    nodes = rng.sample(LETTERS, n)
    directed = {(nodes[i], nodes[rng.randrange(i)]) for i in range(roots, n)}  # to an earlier node
    order = list(nodes)
    rng.shuffle(order)
    bi = {tuple(sorted((order[i], order[rng.randrange(i)]))) for i in range(1, n)}
    if not connected:
        cut = rng.randrange(1, n)
        bi = {e for e in bi if (e[0] in order[:cut]) == (e[1] in order[:cut])}
    bi |= {tuple(sorted(rng.sample(nodes, 2))) for _ in range(rng.randint(0, 2))} if connected else set()
    listed = list(nodes)
    rng.shuffle(listed)
    return Graph("ADMG", listed, directed, bi, graph_type)


def component_admg(rng: random.Random, n: int, graph_type: str) -> Graph:
    g = random_dag(rng, n, rng.uniform(0.3, 0.5))
    order = sorted(g.nodes)
    rng.shuffle(order)
    bi = {tuple(sorted((order[i], order[rng.randrange(i)]))) for i in range(1, n)}
    return Graph("ADMG", g.nodes, g.directed, bi, graph_type)


# ---------------------------------------------------------------------------------------------
# the oracle (networkx only)
def digraph(g: Graph) -> nx.DiGraph:
    d = nx.DiGraph()
    d.add_nodes_from(g.nodes)
    d.add_edges_from(g.directed)
    return d


def relatives(d: nx.DiGraph, rel: str, v: str) -> set:
    return {
        "parents": lambda: set(d.predecessors(v)),
        "children": lambda: set(d.successors(v)),
        "ancestors": lambda: set(nx.ancestors(d, v)),
        "descendants": lambda: set(nx.descendants(d, v)),
    }[rel]()


def triples(d: nx.DiGraph, kind: str) -> dict[frozenset, tuple]:
    """Unordered triple -> CLEAR's tuple (chain in arrow order, fork centre first, collider last)."""
    out = {}
    for a, b, c in itertools.permutations(d.nodes, 3):
        among = {(u, v) for u, v in itertools.permutations((a, b, c), 2) if d.has_edge(u, v)}
        pattern = {"chain": {(a, b), (b, c)}, "fork": {(b, a), (b, c)}, "v-structure": {(a, b), (c, b)}}[kind]
        if among == pattern:
            out[frozenset((a, b, c))] = {"chain": (a, b, c), "fork": (b, a, c), "v-structure": (a, c, b)}[
                kind
            ]
    return out


def dsep_statements(nodes: list[str]) -> list[tuple]:
    out = []
    for x, y in itertools.combinations(sorted(nodes), 2):
        rest = [v for v in sorted(nodes) if v not in (x, y)]
        out += [(x, y, set(z)) for k in range(len(rest) + 1) for z in itertools.combinations(rest, k)]
    return out


def markov_class(g: Graph) -> list[frozenset]:
    """Every DAG (edge set) with the same d-separations as ``g`` (``g`` included), searched over the
    acyclic orientations of its skeleton (a pair joined by an edge is never d-separated)."""
    d = digraph(g)
    statements = dsep_statements(g.nodes)
    target = [nx.is_d_separator(d, {x}, {y}, z) for x, y, z in statements]
    pairs = sorted(g.directed)
    out = []
    for flips in itertools.product((False, True), repeat=len(pairs)):
        edges = frozenset((b, a) if f else (a, b) for (a, b), f in zip(pairs, flips))
        h = nx.DiGraph(list(edges))
        h.add_nodes_from(g.nodes)
        if not nx.is_directed_acyclic_graph(h):
            continue
        if all(nx.is_d_separator(h, {x}, {y}, z) == t for (x, y, z), t in zip(statements, target)):
            out.append(edges)
    return out


def connected_sets(g: Graph) -> list[frozenset]:
    """Every non-empty node set joined by bi-directed edges alone."""
    bi = nx.Graph(list(g.bidirected))
    bi.add_nodes_from(g.nodes)
    nodes = sorted(g.nodes)
    subsets = (frozenset(c) for k in range(1, len(nodes) + 1) for c in itertools.combinations(nodes, k))
    return [s for s in subsets if nx.is_connected(bi.subgraph(s))]


def hedge_exists(g: Graph, x: str, y: str, connected: list[frozenset] | None = None) -> bool:
    """A hedge for P(y | do(x)): node sets F' ⊊ F, x in F \\ F', both bi-directed connected, with
    root set R = F' ∩ An(y) in G without the edges into x (R not empty); every node of F' outside
    R has a child in F', every node of F outside F' a child in F (the C-forests choose one child
    per non-root node and drop the roots' out-edges)."""
    d = digraph(g)
    cut = d.copy()
    cut.remove_edges_from(list(d.in_edges(x)))
    anc = nx.ancestors(cut, y) | {y}
    kids = {v: set(d.successors(v)) for v in g.nodes}
    connected = connected_sets(g) if connected is None else connected
    for fp in connected:
        roots = fp & anc
        if x in fp or not roots or any(not (kids[v] & fp) for v in fp - roots):
            continue
        for f in connected:
            if x in f and fp < f and all(kids[v] & f for v in f - fp):
                return True
    return False


def c_forest(g: Graph) -> bool:
    d, bi = digraph(g), nx.Graph(list(g.bidirected))
    bi.add_nodes_from(g.nodes)
    return nx.is_connected(bi) and all(d.out_degree(v) <= 1 for v in g.nodes)


def sinks(g: Graph) -> set:
    d = digraph(g)
    return {v for v in g.nodes if d.out_degree(v) == 0}


# ---------------------------------------------------------------------------------------------
# records
def yes(b: bool) -> str:
    return "Yes." if b else "No."


class MoreBuilder(Builder):
    def yn(self, g, desc, uid, task, qtype, question, truth) -> None:
        self.add(g, desc, uid, task, qtype, question, yes(truth), [yes(truth)], [yes(not truth), "maybe"])

    def choice(self, g, desc, uid, task, stem, valid, invalid) -> None:
        mc = self.mc(valid, invalid)
        if mc:
            opts, right, wrong = mc
            self.add(g, desc, uid, task, "MC", f"{stem}{opts}", right, [right, f"{right}."], wrong)

    def count(self, g, desc, uid, task, question, n) -> None:
        wrong = [str(n + 1), "many"] + ([str(n - 1)] if n else [])
        self.add(g, desc, uid, task, "HM", question, str(n), [str(n), f"There are {n}."], wrong)

    def kinship(self, g: Graph, desc: str, uid: str) -> None:
        rng, task, d = self.rng, "2_node_relation", digraph(g)
        for rel in RELATIONS:
            full = [v for v in sorted(g.nodes) if relatives(d, rel, v)]
            v = rng.choice(full or sorted(g.nodes))
            s = relatives(d, rel, v)
            others = [w for w in sorted(g.nodes) if w not in s]
            wrong = [s | {w} for w in others] + [s - {w} for w in sorted(s)]
            self.add(g, desc, uid, task, "FA", f"List all {rel} of node {v}.", fmt_set(s, rng),
                     [fmt_set(s, rng), ", ".join(sorted(s)) or "set()", sorted(s)],
                     [fmt_set(z, rng) for z in sample(rng, wrong, 4)])  # fmt: skip
            self.count(g, desc, uid, task, f"How many {rel} does node {v} have?", len(s))
            c = rng.choice(sorted(g.nodes))
            self.yn(g, desc, uid, task, "YN", f"Is node {c} one of {rel} of node {v}?", c in s)
            outside = others + [w for w in LETTERS if w not in g.nodes][:3]
            self.choice(g, desc, uid, task, f"Which of the following is one of {rel} of node {v}?",
                        sorted(s), outside)  # fmt: skip
            w = rng.choice(sorted(g.nodes))
            self.yn(g, desc, uid, task, "EX", f"Does node {w} have any {rel}?", bool(relatives(d, rel, w)))

    def triples(self, g: Graph, desc: str, uid: str) -> None:
        rng, task, d = self.rng, "3_node_relation", digraph(g)
        every = [frozenset(c) for c in itertools.combinations(sorted(g.nodes), 3)]
        for kind in KINDS:
            found = triples(d, kind)
            tup = [found[k] for k in sorted(found, key=sorted)]
            non = [k for k in every if k not in found]
            shuffled = sample(rng, tup, len(tup))
            reordered = [tuple(rng.sample(list(t), 3)) for t in tup]
            bad = [str([*tup, tuple(sorted(rng.choice(non)))])] if non else []
            bad += [str(tup[:-1]), str([*tup, tup[0]])] if tup else ["[('A', 'B')]"]
            self.add(g, desc, uid, task, "FA", f"List all {kind}s of this graph.", str(tup),
                     [str(shuffled), str(reordered), "[]" if not tup else str(tup)], bad)  # fmt: skip
            self.count(g, desc, uid, task, f"How many {kind}s does this graph have?", len(tup))
            claim = (
                rng.choice(sorted(found, key=sorted)) if found and rng.random() < 0.5 else rng.choice(every)
            )
            names = rng.sample(sorted(claim), 3)
            self.yn(g, desc, uid, task, "YN", f"Does nodes {{{', '.join(names)}}} form a {kind} in this graph?",
                    claim in found)  # fmt: skip
            self.choice(g, desc, uid, task, f"Which of the following is a {kind} of this graph?",
                        [str(t) for t in tup], [str(tuple(rng.sample(sorted(k), 3))) for k in non])  # fmt: skip
            self.yn(g, desc, uid, task, "EX", f"Are there any {kind} of this graph?", bool(found))

    def edges_and_nodes(self, g: Graph, desc: str, uid: str) -> None:
        rng = self.rng
        if g.kind == "UG":
            tokens = [f"{a}-{b}" for a, b in sorted(g.undirected)]
            alt = [f"{b}-{a}" for a, b in sorted(g.undirected)]
            pairs = {frozenset(e) for e in g.undirected}
            non = [f"{a}-{b}" for a, b in itertools.combinations(sorted(g.nodes), 2) if {a, b} not in pairs]
            non += [f"{a}->{b}" for a, b in sorted(g.undirected)]  # the wrong mark
        else:
            tokens = [f"{a}->{b}" for a, b in sorted(g.directed)] + [
                f"{a}<->{b}" for a, b in sorted(g.bidirected)
            ]
            alt = [f"{b}<-{a}" for a, b in sorted(g.directed)] + [
                f"{b}<->{a}" for a, b in sorted(g.bidirected)
            ]
            non = [f"{b}->{a}" for a, b in sorted(g.directed) if (b, a) not in g.directed]  # reversed
            non += [f"{a}->{b}" for a, b in itertools.permutations(sorted(g.nodes), 2)
                    if (a, b) not in g.directed and (b, a) not in g.directed]  # fmt: skip
            non += [f"{a}-{b}" for a, b in sorted(g.directed)[:2]]
        task = "edge"
        self.add(g, desc, uid, task, "FA", "List all edges of this graph.", ", ".join(tokens),
                 [", ".join(sample(rng, tokens, len(tokens))), ", ".join(alt), list(tokens)],
                 [", ".join(tokens[:-1]), ", ".join([*tokens, tokens[0]]), ", ".join([*tokens, rng.choice(non)])])  # fmt: skip
        self.count(g, desc, uid, task, "How many edges does this graph have?", len(tokens))
        claim = rng.choice(tokens + alt) if rng.random() < 0.5 else rng.choice(non)
        self.yn(g, desc, uid, task, "YN", f"Is {claim} an edge of this graph?", claim in tokens + alt)
        self.choice(g, desc, uid, task, "Which of the following is an edge of this graph?", tokens, non)
        self.choice(g, desc, uid, task, "Which of the following is NOT an edge of this graph?", non, tokens)
        task, nodes = "node", list(g.nodes)
        outside = [v for v in LETTERS if v not in nodes][:6]
        self.add(g, desc, uid, task, "FA", "List all nodes of this graph.", ", ".join(nodes),
                 [", ".join(sample(rng, nodes, len(nodes))), fmt_set(nodes, rng), nodes],
                 [", ".join(nodes[:-1]), ", ".join([*nodes, outside[0]]), ", ".join([*nodes, nodes[0]])])  # fmt: skip
        self.count(g, desc, uid, task, "How many nodes does this graph have?", len(nodes))
        c = rng.choice(nodes + outside[:2])
        self.yn(g, desc, uid, task, "YN", f"Is {c} a node of this graph?", c in nodes)
        self.choice(g, desc, uid, task, "Which of the following is a node of this graph?", nodes, outside)
        self.choice(g, desc, uid, task, "Which of the following is NOT a node of this graph?", outside, nodes)

    def paths(self, g: Graph, desc: str, uid: str) -> None:
        rng, task, o = self.rng, "path", Oracle(g)
        pairs = [(x, y) for x, y in itertools.permutations(sorted(g.nodes), 2) if len(o.paths(x, y)) >= 2]
        if not pairs:
            return
        x, y = rng.choice(pairs)
        found = list(o.paths(x, y))
        texts = [fmt_path(p) for p in found]
        wrong = []
        for _ in range(12):
            inner = rng.sample(sorted(set(g.nodes) - {x, y}), rng.randint(0, min(3, len(g.nodes) - 2)))
            nodes = (x, *inner, y)
            marks = tuple(rng.choice(["->", "<-", "<->"]) for _ in range(len(nodes) - 1))
            if (nodes, marks) not in found:
                wrong.append(fmt_path((nodes, marks)))
        wrong = sorted(set(wrong) - set(texts))
        walks = [w for w in wrong if w.startswith(x) and w.endswith(y)]
        back = [fmt_path((p[0][::-1], tuple(FLIP[m] for m in reversed(p[1])))) for p in found]
        self.add(g, desc, uid, task, "FO", f"Find one path from {x} to {y}.", texts,
                 sample(rng, texts) + back[:2], [*sample(rng, walks, 4), f"{x}->{x}"])  # fmt: skip
        lengths = [len(p[1]) for p in found]
        for variant, target in (("shortest", min(lengths)), ("longest", max(lengths))):
            best = [fmt_path(p) for p in found if len(p[1]) == target]
            other = [fmt_path(p) for p in found if len(p[1]) != target]
            self.add(g, desc, uid, task, "FO", f"Find the {variant} paths from {x} to {y}.", rng.choice(best),
                     best, sample(rng, other, 3) + walks[:2])  # fmt: skip
        shuffled = sample(rng, texts, len(texts))
        self.add(g, desc, uid, task, "FA", f"Find all paths from {x} to {y}.", str(texts),
                 [str(shuffled), shuffled, json.dumps(shuffled), ", ".join(shuffled)],
                 [str(texts[:-1]), str([*texts, texts[0]]), str([*texts, *walks[:1]]) if walks else "[]"])  # fmt: skip
        self.count(g, desc, uid, task, f"How many paths are there from {x} to {y}.", len(texts))
        claim = rng.choice(texts) if rng.random() < 0.5 or not walks else rng.choice(walks)
        self.yn(g, desc, uid, task, "YN", f"Is {claim} a path from {x} to {y}?", claim in texts)
        self.choice(g, desc, uid, task, f"Which of the following is a path from {x} to {y}?", texts, walks)

    def orders(self, g: Graph, desc: str, uid: str) -> None:
        rng, task, d = self.rng, "topological", digraph(g)
        perms = [tuple(rng.sample(g.nodes, len(g.nodes))) for _ in range(40)]
        if not nx.is_directed_acyclic_graph(d):
            self.yn(g, desc, uid, task, "YN", f"Is {', '.join(perms[0])} a valid topological ordering of this graph?",
                    False)  # fmt: skip
            return
        valid = {tuple(o) for o in nx.all_topological_sorts(d)}
        bad = sorted({p for p in perms if p not in valid})
        good = [", ".join(o) for o in sample(rng, sorted(valid), 6)]
        broken = [", ".join(g.nodes[:-1]), ", ".join([*g.nodes, g.nodes[0]])]
        self.add(g, desc, uid, task, "FO", "Find one valid topological ordering of the graph.", good[0], good,
                 [", ".join(p) for p in bad[:4]] + broken)  # fmt: skip
        claim = rng.choice(sorted(valid)) if rng.random() < 0.5 or not bad else rng.choice(bad)
        self.yn(g, desc, uid, task, "YN", f"Is {', '.join(claim)} a valid topological ordering of this graph?",
                claim in valid)  # fmt: skip
        self.choice(g, desc, uid, task, "Which of the following is a valid topological ordering of this graph?",
                    [", ".join(o) for o in sorted(valid)], [", ".join(p) for p in bad])  # fmt: skip

    def roots(self, g: Graph, desc: str, uid: str) -> None:
        rng, task, s = self.rng, "maximal_root_set", sinks(g)
        d = digraph(g)
        sources = {v for v in g.nodes if d.in_degree(v) == 0}
        wrong = [s | {v} for v in sorted(set(g.nodes) - s)] + [s - {v} for v in sorted(s)] + [sources]
        wrong = [z for z in wrong if z != s]
        self.add(g, desc, uid, task, "FA", "Find the maximal root set of this graph.", fmt_set(s, rng),
                 [fmt_set(s, rng), ", ".join(sorted(s))], [fmt_set(z, rng) for z in sample(rng, wrong, 4)])  # fmt: skip
        self.count(
            g, desc, uid, task, "How many nodes are there in the maximal root set of this graph?", len(s)
        )
        claim = s if rng.random() < 0.5 else rng.choice(wrong)
        self.yn(
            g,
            desc,
            uid,
            task,
            "YN",
            f"Is {fmt_set(claim, rng)} the maximal root set of this graph?",
            claim == s,
        )
        self.choice(g, desc, uid, task, "Which of the following options is the maximal root set of this graph?",
                    [fmt_set(s, rng)], [fmt_set(z, rng) for z in wrong])  # fmt: skip

    def markov(self, g: Graph, desc: str, uid: str) -> None:
        rng, task = self.rng, "markov_equivalent"
        members = markov_class(g)
        given = frozenset(g.directed)
        others = [m for m in members if m != given]

        def dag(edges, bare: bool = False) -> str:
            listed = sorted(edges)
            rng.shuffle(listed)
            text = ", ".join(f"{a}->{b}" for a, b in listed)
            return text if bare else f"DAG with nodes {', '.join(g.nodes)} and directed edges {text}."

        pairs = sorted(g.directed)
        same_skeleton = [frozenset((b, a) if f else (a, b) for (a, b), f in zip(pairs, flips))
                         for flips in itertools.product((False, True), repeat=len(pairs))]  # fmt: skip
        acyclic = [e for e in same_skeleton if nx.is_directed_acyclic_graph(nx.DiGraph(list(e)))]
        outside = [e for e in acyclic if e not in members]
        cyclic = [e for e in same_skeleton if e not in acyclic]
        if others:
            wrong = [dag(given), dag(given - {pairs[0]})] + [dag(e) for e in sample(rng, outside, 3)]
            wrong += [dag(cyclic[0])] if cyclic else []
            self.add(g, desc, uid, task, "FO",
                     "Find another graph that belongs to the same Markov Equivalent Class of the given graph.",
                     dag(others[0]), [dag(m) for m in others] + [dag(m, bare=True) for m in others[:2]], wrong)  # fmt: skip
        for claim in sample(rng, others, 1) + sample(rng, outside, 1):
            for words in ("Markov Equivalent Class", "markov equivalent class"):
                edges = dag(claim)[len("DAG ") : -1]
                self.yn(g, desc, uid, task, "YN",
                        f"Given another DAG {edges}, do these two graphs belong to the same {words}?", claim in members)  # fmt: skip

    def districts(self, g: Graph, desc: str, uid: str) -> None:
        forest = c_forest(g)
        self.yn(g, desc, uid, "c-forest", "YN", "Is it a C-forest?", forest)
        self.yn(g, desc, uid, "c-tree", "YN", "Is it a C-tree?", forest and len(sinks(g)) == 1)

    def identification(self, g: Graph, desc: str, uid: str) -> None:
        rng, d = self.rng, digraph(g)
        pairs = [(x, y) for x, y in itertools.permutations(sorted(g.nodes), 2) if y in nx.descendants(d, x)]
        for x, y in sample(rng, pairs, 3):
            self.yn(g, desc, uid, "identification", "YN",
                    f"Can the causal effect of treatment {x} on outcome {y} be identified or not?",
                    not hedge_exists(g, x, y))  # fmt: skip


def graphs(rng: random.Random) -> list[Graph]:
    out = []
    for i in range(8):
        n = 4 + i % 4
        out += [random_dag(rng, n, rng.uniform(0.3, 0.55)), random_admg(rng, n, 0.4, rng.uniform(0.15, 0.4))]
    out += [random_dg(rng, 5, 0.4), random_dg(rng, 6, 0.35), random_ug(rng, 5, 0.4), random_ug(rng, 6, 0.3)]
    for n, gt in ((5, "C-component"), (6, "C-component"), (5, "ADMG")):
        out.append(component_admg(rng, n, gt))
    for n, roots, gt in ((5, 1, "C-tree"), (6, 1, "C-tree"), (5, 2, "C-forest"), (7, 3, "C-forest"),
                         (6, 1, "C-component"), (5, 2, "ADMG")):  # fmt: skip
        out.append(forest_admg(rng, n, roots, gt))
    out.append(forest_admg(rng, 6, 1, "C-tree", connected=False))  # fails only the one-district condition
    out += [forest_admg(rng, 4 + i % 3, 1 + i % 2, ("C-tree", "C-forest", "ADMG")[i % 3]) for i in range(6)]
    return out


def extra_graphs(rng: random.Random) -> list[tuple[str, Graph]]:
    """Confounded ADMGs for identification, small DAGs for Markov equivalence."""
    out = [("identification", random_admg(rng, 4 + i % 3, 0.45, rng.uniform(0.35, 0.6))) for i in range(10)]
    return out + [("markov", random_dag(rng, 4 + i % 2, rng.uniform(0.35, 0.6))) for i in range(6)]


def generate(seed: int = SEED) -> list[dict]:
    b = MoreBuilder(seed)
    rng = b.rng
    for g in graphs(rng):
        desc, uid = describe(g, rng), b.uid()
        b.edges_and_nodes(g, desc, uid)
        if g.kind in ("UG", "DG"):
            if g.kind == "DG":
                b.orders(g, desc, uid)
            continue
        b.roots(g, desc, uid)
        b.districts(g, desc, uid)
        if g.graph_type in ("DAG", "ADMG"):
            b.kinship(g, desc, uid)
            b.triples(g, desc, uid)
            b.paths(g, desc, uid)
            b.orders(g, desc, uid)
            b.identification(g, desc, uid)
        if g.kind == "DAG" and len(g.nodes) <= 6:
            b.markov(g, desc, uid)
    for task, g in extra_graphs(rng):
        desc, uid = describe(g, rng), b.uid()
        (b.identification if task == "identification" else b.markov)(g, desc, uid)
    return b.records
