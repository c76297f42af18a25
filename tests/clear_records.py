"""Seeded generator of CLEAR-format test records: ``tests/data/clear_templates.jsonl``.

Every CLEAR question template (docs/clear.md, "Record format") is instantiated on random DAGs,
ADMGs and directed graphs (4-9 nodes). Labels come from the brute-force oracle below, written on networkx only and
independent of :mod:`faithgrpo.tasks.clear` and :mod:`faithgrpo.verifier.graphs.criteria`:

* paths: ``networkx.all_simple_edge_paths`` on the skeleton multigraph (a directed and a
  bi-directed edge between the same pair are two edges), marks read from the edge kind;
* a path is blocked by Z when an inner non-collider is in Z or an inner collider has neither itself
  nor a descendant (``networkx.descendants``) in Z;
* backdoor criterion (Pearl Def. 3.3.1): no node of Z is X, Y or a descendant of X, and Z blocks
  every path from X to Y whose first edge points into X (``<-`` or ``<->``);
* front-door criterion (Pearl Def. 3.3.3): Z meets every directed path X -> Y
  (``networkx.all_simple_paths``), every backdoor path from X to a node of Z is blocked by the
  empty set, every backdoor path from a node of Z to Y is blocked by {X};
* d-/m-separation: ``networkx.is_d_separator`` on the canonical DAG (a latent parent per
  bi-directed edge);
* minimal / maximal / shortest / longest: brute force over all subsets / all paths;
* cycles: ``networkx.simple_cycles``; Markov blanket: parents, children, children's parents;
  districts: connected components of the bi-directed edges.

Each record is a CLEAR record (``answer`` as CLEAR lists it: a set, a Python list of every valid
set for some FO records, a JSON array for backdoor_path FA, ``", "``-joined paths for directed_path
FA) plus test-only fields: ``accept`` (candidates the judge must accept), ``reject`` (candidates it
must reject: invalid, non-minimal or non-maximal sets, wrong paths, letters, counts and yes/no) and
``expect`` (``"judged"``, or ``"unsupported"`` where the judge must answer ``None``).

Usage::

    python tests/clear_records.py            # rewrite tests/data/clear_templates.jsonl
    python tests/clear_records.py --check    # exit 1 when the file differs from a fresh generation
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import random
import sys
from pathlib import Path

import networkx as nx

SEED = 1313
OUT = Path(__file__).parent / "data" / "clear_templates.jsonl"
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
MAX_LIST = 5  # accept / reject candidates of one kind per record


# ---------------------------------------------------------------------------------------------
# graphs
class Graph:
    def __init__(
        self, kind: str, nodes: list[str], directed: set, bidirected: set, graph_type: str | None = None
    ):
        self.kind, self.nodes = kind, list(nodes)
        self.directed, self.bidirected = set(directed), {tuple(sorted(e)) for e in bidirected}
        self.graph_type = graph_type or kind

    def describe(self, rng: random.Random) -> str:
        d = sorted(self.directed)
        rng.shuffle(d)
        dtext = ", ".join(f"{a}->{b}" for a, b in d)
        nodes = ", ".join(self.nodes)
        if self.kind == "ADMG":
            b = sorted(self.bidirected)
            rng.shuffle(b)
            btext = ", ".join(f"{x}<->{y}" if rng.random() < 0.5 else f"{y}<->{x}" for x, y in b)
            return (
                f"Given an ADMG (acyclic directed mixed graph) with nodes {nodes}, directed edges {dtext} "
                f"and bi-directed edges {btext}."
            )
        if self.kind == "DAG":
            return f"Given a DAG (directed acyclic graph) with nodes {nodes} and directed edges {dtext}."
        return f"Given a directed graph with nodes {nodes} and directed edges {dtext}."


def random_dag(rng: random.Random, n: int, p: float) -> Graph:
    nodes = rng.sample(LETTERS, n)
    directed = {(nodes[i], nodes[j]) for i, j in itertools.combinations(range(n), 2) if rng.random() < p}
    if not directed:
        directed = {(nodes[0], nodes[1])}
    order = list(nodes)
    rng.shuffle(order)  # the node list is not a topological order
    return Graph("DAG", order, directed, set())


def random_admg(rng: random.Random, n: int, p: float, q: float) -> Graph:
    g = random_dag(rng, n, p)
    bi = {tuple(sorted(pair)) for pair in itertools.combinations(sorted(g.nodes), 2) if rng.random() < q}
    if not bi:
        bi = {tuple(sorted(rng.sample(sorted(g.nodes), 2)))}
    return Graph("ADMG", g.nodes, g.directed, bi)


def random_dg(rng: random.Random, n: int, p: float, acyclic: bool = False) -> Graph:
    if acyclic:
        g = random_dag(rng, n, p)
        return Graph("DG", g.nodes, g.directed, set(), "DG")
    nodes = rng.sample(LETTERS, n)
    directed = {(a, b) for a in nodes for b in nodes if a != b and rng.random() < p / 2}
    a, b, c = rng.sample(nodes, 3)
    directed |= {(a, b), (b, c), (c, a)} if rng.random() < 0.5 else {(a, b), (b, a)}
    return Graph("DG", nodes, directed, set(), "DG")


# ---------------------------------------------------------------------------------------------
# the oracle (networkx only)
class Oracle:
    def __init__(self, g: Graph):
        self.g = g
        self.dg = nx.DiGraph()
        self.dg.add_nodes_from(sorted(g.nodes))
        self.dg.add_edges_from(sorted(g.directed))
        self.mg = nx.MultiGraph()
        self.mg.add_nodes_from(sorted(g.nodes))
        for a, b in sorted(g.directed):
            self.mg.add_edge(a, b, kind=("->", a))
        for a, b in sorted(g.bidirected):
            self.mg.add_edge(a, b, kind=("<->", None))
        self.cdag = nx.DiGraph(self.dg)
        for i, (a, b) in enumerate(sorted(g.bidirected)):
            self.cdag.add_edges_from([(f"_L{i}", a), (f"_L{i}", b)])
        self.desc = {v: set(nx.descendants(self.dg, v)) for v in g.nodes}

    @functools.cache  # noqa: B019 - one oracle per graph, kept for the run
    def paths(self, x: str, y: str) -> tuple:
        out = set()
        for edges in nx.all_simple_edge_paths(self.mg, x, y):
            nodes, marks = [x], []
            for u, v, k in edges:
                kind, tail = self.mg.edges[u, v, k]["kind"]
                marks.append("<->" if kind == "<->" else ("->" if tail == u else "<-"))
                nodes.append(v)
            out.add((tuple(nodes), tuple(marks)))
        return tuple(sorted(out, key=lambda p: (len(p[0]), p)))

    def blocked(self, path: tuple, z: frozenset) -> bool:
        nodes, marks = path
        for i in range(1, len(nodes) - 1):
            v = nodes[i]
            if marks[i - 1] in ("->", "<->") and marks[i] in ("<-", "<->"):
                if v not in z and not (self.desc[v] & z):
                    return True
            elif v in z:
                return True
        return False

    def backdoor_paths(self, x: str, y: str) -> tuple:
        return tuple(p for p in self.paths(x, y) if p[1][0] in ("<-", "<->"))

    def directed_paths(self, x: str, y: str) -> tuple:
        return tuple(sorted(tuple(p) for p in nx.all_simple_paths(self.dg, x, y)))

    def is_backdoor(self, x: str, y: str, z: frozenset) -> bool:
        if {x, y} & z or z & self.desc[x]:
            return False
        return all(self.blocked(p, z) for p in self.backdoor_paths(x, y))

    def is_frontdoor(self, x: str, y: str, z: frozenset) -> bool:
        if {x, y} & z:
            return False
        if any(not (set(p[1:-1]) & z) for p in self.directed_paths(x, y)):
            return False
        if any(not self.blocked(p, frozenset()) for v in z for p in self.backdoor_paths(x, v)):
            return False
        return all(self.blocked(p, frozenset({x})) for v in z for p in self.backdoor_paths(v, y))

    def separated(self, x: str, y: str, z: frozenset) -> bool:
        return not ({x, y} & z) and nx.is_d_separator(self.cdag, {x}, {y}, set(z))

    def family(self, pred, pool) -> list[frozenset]:
        items = sorted(pool)
        return [
            frozenset(c)
            for k in range(len(items) + 1)
            for c in itertools.combinations(items, k)
            if pred(frozenset(c))
        ]

    def cycles(self) -> list[tuple]:
        out = []
        for c in nx.simple_cycles(self.dg):
            i = c.index(min(c))
            out.append(tuple(c[i:] + c[:i]))
        return sorted(out)

    def markov_blanket(self, v: str) -> frozenset:
        kids = set(self.dg.successors(v))
        mb = set(self.dg.predecessors(v)) | kids
        for c in kids:
            mb |= set(self.dg.predecessors(c))
        return frozenset(mb - {v})

    def districts(self) -> list[frozenset]:
        ug = nx.Graph()
        ug.add_nodes_from(self.g.nodes)
        ug.add_edges_from(self.g.bidirected)
        return sorted((frozenset(c) for c in nx.connected_components(ug)), key=sorted)

    def cycle_claim(self, nodes: tuple, marks: tuple) -> bool:
        """The cycle rule (docs/clear.md, "Record format"), for simple closed claims."""
        if len(nodes) < 3 or nodes[0] != nodes[-1] or len(set(marks)) != 1 or marks[0] == "<->":
            return False
        steps = itertools.pairwise(nodes)
        return all(((a, b) if marks[0] == "->" else (b, a)) in self.g.directed for a, b in steps)


def minimal_of(fam: list[frozenset]) -> list[frozenset]:
    return [z for z in fam if not any(w < z for w in fam)]


def maximal_of(fam: list[frozenset]) -> list[frozenset]:
    return [z for z in fam if not any(w > z for w in fam)]


# ---------------------------------------------------------------------------------------------
# formatting
def fmt_set(s, rng: random.Random) -> str:
    items = sorted(s)
    rng.shuffle(items)
    return "{" + ", ".join(f"'{v}'" for v in items) + "}" if items else "set()"


def fmt_path(path: tuple) -> str:
    nodes, marks = path
    return nodes[0] + "".join(m + v for m, v in zip(marks, nodes[1:]))


def fmt_walk(nodes: tuple) -> str:
    return "->".join(nodes)


def sample(rng: random.Random, items: list, k: int = MAX_LIST) -> list:
    items = list(items)
    return items if len(items) <= k else rng.sample(items, k)


class Builder:
    def __init__(self, seed: int = SEED):
        self.rng = random.Random(seed)
        self.records: list[dict] = []

    def uid(self) -> str:
        return f"{self.rng.randrange(10**8):08d}"

    def add(self, g: Graph, desc: str, uid: str, task: str, qtype: str, question: str, answer, accept=(),
            reject=(), expect: str = "judged") -> None:  # fmt: skip
        sid = sum(1 for r in self.records if r["uid"] == uid)
        if self.rng.random() < 0.5:
            question += " "  # CLEAR's questions often end with a space
        self.records.append(
            {
                "description": desc,
                "graph_type": g.graph_type,
                "uid": uid,
                "sid": sid,
                "question": question,
                "answer": answer,
                "question_type": qtype,
                "task_type": task,
                "accept": list(accept),
                "reject": list(reject),
                "expect": expect,
            }
        )

    def mc(self, valid: list[str], invalid: list[str]) -> tuple[str, str, list[str]] | None:
        """Options text, answer letter, wrong letters (one valid option, up to three invalid)."""
        if not valid or not invalid:
            return None
        opts = [self.rng.choice(valid), *sample(self.rng, invalid, 3)]
        self.rng.shuffle(opts)
        letters = "ABCD"[: len(opts)]
        right = next(letters[i] for i, o in enumerate(opts) if o in valid)
        text = "".join(f"\n{letters[i]}. {o}" for i, o in enumerate(opts))
        return text, right, [a for a in letters if a != right] + ["E"]

    def fresh_node(self, g: Graph) -> str:
        return next(v for v in LETTERS if v not in g.nodes)

    # -- adjustment sets ----------------------------------------------------------------------
    def adjustment(self, g: Graph, o: Oracle, desc: str, uid: str, word: str) -> None:
        rng, task = self.rng, f"{word}_adjustment_set"
        pred = o.is_backdoor if word == "backdoor" else o.is_frontdoor
        pairs = [(x, y) for x in sorted(g.nodes) for y in sorted(g.nodes) if x != y]
        if word == "frontdoor":
            pairs = [(x, y) for x, y in pairs if y in o.desc[x]]
        rng.shuffle(pairs)
        # prefer pairs with a backdoor path to block (or a confounded front-door pair)
        pairs.sort(key=lambda xy: not o.backdoor_paths(*xy))
        fams = {}
        for x, y in pairs:
            fams[x, y] = o.family(lambda z, x=x, y=y: pred(x, y, z), set(g.nodes) - {x, y})
            if fams[x, y]:
                fam = fams[x, y]
                break
        else:
            return
        role = f"treatment {x} and outcome {y}"
        everything = [
            frozenset(c) for k in range(len(g.nodes) + 1) for c in itertools.combinations(sorted(g.nodes), k)
        ]
        invalid = [z for z in everything if z not in fam]
        bad = [fmt_set(z, rng) for z in sample(rng, invalid, 4)] + [fmt_set({self.fresh_node(g)}, rng)]
        listed = rng.random() < 0.5
        answer = (
            "[" + ", ".join(fmt_set(z, rng) for z in fam) + "]" if listed else fmt_set(rng.choice(fam), rng)
        )
        self.add(g, desc, uid, task, "FO", f"Find one valid {word} adjustment set for {role}.", answer,
                 [fmt_set(z, rng) for z in sample(rng, fam)], bad)  # fmt: skip
        for variant, pick in (("minimal", minimal_of), ("maximal", maximal_of)):
            best = pick(fam)
            others = [fmt_set(z, rng) for z in sample(rng, [z for z in fam if z not in best], 3)]
            self.add(g, desc, uid, task, "FO", f"Find one {variant} valid {word} adjustment set for {role}.",
                     fmt_set(rng.choice(best), rng), [fmt_set(z, rng) for z in sample(rng, best)],
                     others + bad[:2])  # fmt: skip
        claim = rng.choice(fam) if rng.random() < 0.5 else rng.choice(invalid)
        yes = claim in fam
        self.add(g, desc, uid, task, "YN", f"Is {fmt_set(claim, rng)} a valid {word} adjustment set for {role}?",
                 "Yes." if yes else "No.", ["Yes." if yes else "No."], ["No." if yes else "Yes.", "maybe"])  # fmt: skip
        mc = self.mc([fmt_set(z, rng) for z in fam], [fmt_set(z, rng) for z in sample(rng, invalid, 6)])
        if mc:
            text, right, wrong = mc
            self.add(g, desc, uid, task, "MC",
                     f"Which of the following sets is a valid {word} adjustment set for {role}?{text}",
                     right, [right, f"{right}."], wrong)  # fmt: skip
        # existence on another pair (often without a valid set)
        ex, ey = rng.choice(pairs)
        exists = bool(fams.get((ex, ey)) or o.family(lambda z: pred(ex, ey, z), set(g.nodes) - {ex, ey}))
        self.add(g, desc, uid, task, "EX",
                 f"Does there exist a valid {word} adjustment set for treatment {ex} and outcome {ey}?",
                 "Yes." if exists else "No.", ["Yes." if exists else "No."], ["No." if exists else "Yes."])  # fmt: skip

    def frontdoor_open_case(self, g: Graph, o: Oracle, desc: str, uid: str) -> None:
        """Treatment without a directed path to the outcome: the judge must leave it open."""
        pairs = [(x, y) for x in sorted(g.nodes) for y in sorted(g.nodes) if x != y and y not in o.desc[x]]
        if not pairs or self.rng.random() > 0.35:
            return
        x, y = self.rng.choice(pairs)
        role = f"treatment {x} and outcome {y}"
        self.add(g, desc, uid, "frontdoor_adjustment_set", "FO",
                 f"Find one valid frontdoor adjustment set for {role}.", "set()", expect="unsupported")  # fmt: skip
        self.add(g, desc, uid, "frontdoor_adjustment_set", "EX",
                 f"Does there exist a valid frontdoor adjustment set for {role}?", "Yes.", expect="unsupported")  # fmt: skip

    # -- separation ---------------------------------------------------------------------------
    def dseparation(self, g: Graph, o: Oracle, desc: str, uid: str) -> None:
        rng, task = self.rng, "d-separation"
        pairs = [(x, y) for x, y in itertools.permutations(sorted(g.nodes), 2)]
        rng.shuffle(pairs)
        # prefer pairs joined by some path but not adjacent: something to separate
        pairs.sort(key=lambda xy: (not o.paths(*xy), any(len(p[0]) == 2 for p in o.paths(*xy))))
        for x, y in pairs:
            pool = set(g.nodes) - {x, y}
            fam = o.family(lambda z, x=x, y=y: o.separated(x, y, z), pool)
            if fam:
                break
        else:
            return
        subsets = [
            frozenset(c) for k in range(len(pool) + 1) for c in itertools.combinations(sorted(pool), k)
        ]
        invalid = [z for z in subsets if z not in fam]
        bad = [fmt_set(z, rng) for z in sample(rng, invalid, 4)] + [fmt_set({x} | rng.choice(fam), rng)]
        listed = rng.random() < 0.5
        answer = (
            "[" + ", ".join(fmt_set(z, rng) for z in fam) + "]" if listed else fmt_set(rng.choice(fam), rng)
        )
        self.add(g, desc, uid, task, "FO", f"Find one valid nodeset that can d-separate node {x} and node {y} .",
                 answer, [fmt_set(z, rng) for z in sample(rng, fam)], bad)  # fmt: skip
        best = minimal_of(fam)
        others = [fmt_set(z, rng) for z in sample(rng, [z for z in fam if z not in best], 3)]
        self.add(g, desc, uid, task, "FO", f"Find the minimal nodeset that can d-separate node {x} and node {y} .",
                 fmt_set(rng.choice(best), rng), [fmt_set(z, rng) for z in sample(rng, best)],
                 others + bad[:2])  # fmt: skip
        claim = rng.choice(fam) if rng.random() < 0.5 else rng.choice(invalid) if invalid else rng.choice(fam)
        yes = claim in fam
        a, b = (x, y) if rng.random() < 0.5 else (y, x)
        self.add(g, desc, uid, task, "YN", f"Are node {a} and node {b} d-separated by nodeset {fmt_set(claim, rng)}?",
                 "Yes." if yes else "No.", ["Yes." if yes else "No."], ["No." if yes else "Yes."])  # fmt: skip
        mc = self.mc([fmt_set(z, rng) for z in fam], [fmt_set(z, rng) for z in sample(rng, invalid, 6)])
        if mc:
            text, right, wrong = mc
            self.add(g, desc, uid, task, "MC", f"Which of the following nodesets can d-separate node {x} and node {y}?{text}",
                     right, [right, f"({right})"], wrong)  # fmt: skip
        if rng.random() < 0.35:  # a conditioning set holding an endpoint: open
            self.add(g, desc, uid, task, "YN",
                     f"Are node {x} and node {y} d-separated by nodeset {fmt_set({x}, rng)}?", "No.",
                     expect="unsupported")  # fmt: skip

    def blocked_path(self, g: Graph, o: Oracle, desc: str, uid: str) -> None:
        rng, task = self.rng, "blocked_path"
        paths = [
            p for x, y in itertools.combinations(sorted(g.nodes), 2) for p in o.paths(x, y) if len(p[0]) >= 3
        ]
        if not paths:
            return
        path = rng.choice(paths)
        if rng.random() < 0.5:
            path = (
                path[0][::-1],
                tuple({"->": "<-", "<-": "->", "<->": "<->"}[m] for m in reversed(path[1])),
            )
        text = fmt_path(path)
        pool = set(g.nodes) - {path[0][0], path[0][-1]}
        fam = o.family(lambda z: o.blocked(path, z), pool)
        subsets = [
            frozenset(c) for k in range(len(pool) + 1) for c in itertools.combinations(sorted(pool), k)
        ]
        invalid = [z for z in subsets if z not in fam]
        bad = [fmt_set(z, rng) for z in sample(rng, invalid, 4)] + [fmt_set({path[0][0]}, rng)]
        if fam:
            listed = rng.random() < 0.5
            answer = (
                "[" + ", ".join(fmt_set(z, rng) for z in fam) + "]"
                if listed
                else fmt_set(rng.choice(fam), rng)
            )
            self.add(g, desc, uid, task, "FO", f"Find one valid nodeset that can block path {text}.", answer,
                     [fmt_set(z, rng) for z in sample(rng, fam)], bad)  # fmt: skip
            best = minimal_of(fam)
            others = [fmt_set(z, rng) for z in sample(rng, [z for z in fam if z not in best], 3)]
            self.add(g, desc, uid, task, "FO", f"Find the minimal nodeset that can block path {text}.",
                     fmt_set(rng.choice(best), rng), [fmt_set(z, rng) for z in sample(rng, best)],
                     others + bad[:2])  # fmt: skip
        claim = rng.choice(subsets)
        yes = claim in fam
        self.add(g, desc, uid, task, "YN", f"Can path {text} be blocked by nodeset {fmt_set(claim, rng)}?",
                 "Yes." if yes else "No.", ["Yes." if yes else "No."], ["No." if yes else "Yes."])  # fmt: skip
        mc = self.mc([fmt_set(z, rng) for z in fam], [fmt_set(z, rng) for z in sample(rng, invalid, 6)])
        if mc:
            opts, right, wrong = mc
            self.add(g, desc, uid, task, "MC", f"Which of the following nodesets can block path {text}?{opts}",
                     right, [right, f"Answer: {right}"], wrong)  # fmt: skip
        if rng.random() < 0.35:  # a conditioning set holding an endpoint: open
            self.add(g, desc, uid, task, "YN",
                     f"Can path {text} be blocked by nodeset {fmt_set({path[0][-1]}, rng)}?", "No.",
                     expect="unsupported")  # fmt: skip

    # -- paths --------------------------------------------------------------------------------
    def distractors(self, g: Graph, o: Oracle, x: str, y: str, good: set) -> list[str]:
        """Paths from x to y that are not in ``good``: other paths of the graph and random walks."""
        rng = self.rng
        out = [fmt_path(p) for p in o.paths(x, y) if p not in good]
        for _ in range(12):
            inner = rng.sample(sorted(set(g.nodes) - {x, y}), rng.randint(0, min(3, len(g.nodes) - 2)))
            nodes = (x, *inner, y)
            marks = tuple(rng.choice(["->", "<-", "<->"]) for _ in range(len(nodes) - 1))
            if (nodes, marks) not in good:
                out.append(fmt_path((nodes, marks)))
        return sorted(set(out))

    def backdoor_path(self, g: Graph, o: Oracle, desc: str, uid: str) -> None:
        rng, task = self.rng, "backdoor_path"
        pairs = [(x, y) for x, y in itertools.permutations(sorted(g.nodes), 2) if o.backdoor_paths(x, y)]
        if not pairs:
            return
        x, y = rng.choice(pairs)
        bps = list(o.backdoor_paths(x, y))
        good = set(bps)
        texts = [fmt_path(p) for p in bps]
        wrong = self.distractors(g, o, x, y, good)
        shuffled = sample(rng, texts, len(texts))
        self.add(g, desc, uid, task, "FA", f"Find all backdoor paths from node {x} to node {y}.", texts,
                 [shuffled, json.dumps(shuffled), str(shuffled), ", ".join(shuffled),
                  [fmt_path((p[0][::-1], tuple({"->": "<-", "<-": "->", "<->": "<->"}[m] for m in reversed(p[1]))))
                   for p in bps]],
                 [texts[:-1], [*texts, texts[0]], [*texts, wrong[0]], "[]"])  # fmt: skip
        self.add(g, desc, uid, task, "HM", f"How many backdoor paths are from node {x} to node {y}.", str(len(bps)),
                 [str(len(bps)), f"There are {len(bps)}."], [str(len(bps) + 1), str(len(bps) - 1), "many"])  # fmt: skip
        lengths = [len(p[1]) for p in bps]
        for variant, target in (("shortest", min(lengths)), ("longest", max(lengths))):
            best = [fmt_path(p) for p in bps if len(p[1]) == target]
            other = [fmt_path(p) for p in bps if len(p[1]) != target]
            self.add(g, desc, uid, task, "FO", f"Find the {variant} backdoor path from node {x} to node {y}.",
                     rng.choice(best), sample(rng, best), sample(rng, other, 3) + wrong[:2])  # fmt: skip
        claim = rng.choice(texts) if rng.random() < 0.5 else rng.choice(wrong)
        yes = claim in texts
        self.add(g, desc, uid, task, "YN", f"Is {claim} a backdoor path from {x} to {y}?", "Yes." if yes else "No.",
                 ["Yes." if yes else "No."], ["No." if yes else "Yes."])  # fmt: skip
        mc = self.mc(texts, wrong)
        if mc:
            opts, right, bad = mc
            self.add(g, desc, uid, task, "MC", f"Which of the following is a backdoor path from {x} to {y}?{opts}",
                     right, [right, f"{right}. {dict(zip('ABCD', opts.split(chr(10))[1:]))[right][3:]}"], bad)  # fmt: skip
        if rng.random() > 0.35:
            return
        # a claim written from the outcome back to the treatment: open
        p = rng.choice(bps)
        back = (p[0][::-1], tuple({"->": "<-", "<-": "->", "<->": "<->"}[m] for m in reversed(p[1])))
        self.add(g, desc, uid, task, "YN", f"Is {fmt_path(back)} a backdoor path from {x} to {y}?", "Yes.",
                 expect="unsupported")  # fmt: skip

    def directed_path(self, g: Graph, o: Oracle, desc: str, uid: str) -> None:
        rng, task = self.rng, "directed_path"
        pairs = [(x, y) for x, y in itertools.permutations(sorted(g.nodes), 2) if o.directed_paths(x, y)]
        if not pairs:
            return
        x, y = rng.choice(pairs)
        dps = o.directed_paths(x, y)
        good = {(p, ("->",) * (len(p) - 1)) for p in dps}
        texts = [fmt_walk(p) for p in dps]
        wrong = self.distractors(g, o, x, y, good)
        shuffled = sample(rng, texts, len(texts))
        self.add(g, desc, uid, task, "FA", f"Find all directed paths from node {x} to node {y}.", ", ".join(texts),
                 [", ".join(shuffled), shuffled, "[" + ", ".join(shuffled) + "]"],
                 [", ".join(texts[:-1]) or "[]", ", ".join([*texts, wrong[0]])])  # fmt: skip
        hx, hy = rng.choice(list(itertools.permutations(sorted(g.nodes), 2)))
        n = len(o.directed_paths(hx, hy))
        self.add(g, desc, uid, task, "HM", f"How many directed paths are there from {hx} to {hy}?", str(n),
                 [str(n)], [str(n + 1), "many"] + ([str(n - 1)] if n else []))  # fmt: skip
        claim = rng.choice(texts) if rng.random() < 0.5 else rng.choice(wrong)
        yes = claim in texts
        self.add(g, desc, uid, task, "YN", f"Is {claim} a directed path from {x} to {y}?", "Yes." if yes else "No.",
                 ["Yes." if yes else "No."], ["No." if yes else "Yes."])  # fmt: skip
        ex, ey = rng.choice(list(itertools.permutations(sorted(g.nodes), 2)))
        yes = bool(o.directed_paths(ex, ey))
        self.add(g, desc, uid, task, "EX", f"Is there a directed path from {ex} to {ey}?", "Yes." if yes else "No.",
                 ["Yes." if yes else "No."], ["No." if yes else "Yes."])  # fmt: skip
        mc = self.mc(texts, wrong)
        if mc:
            opts, right, bad = mc
            self.add(g, desc, uid, task, "MC", f"Which of the following is a directed path from {x} to {y}?{opts}",
                     right, [right], bad)  # fmt: skip

    def cycle(self, g: Graph, o: Oracle, desc: str, uid: str) -> None:
        rng, task = self.rng, "cycle"
        cycles = o.cycles()
        self.add(g, desc, uid, task, "EX", "Are there any cycles in this graph?", "Yes." if cycles else "No.",
                 ["Yes." if cycles else "No."], ["No." if cycles else "Yes."])  # fmt: skip
        if not cycles:
            return
        forward = [fmt_walk((*c, c[0])) for c in cycles]
        backward = ["<-".join(reversed((*c, c[0]))) for c in cycles]  # every arrow <-
        # closed walks that are not cycles: mixed arrows through a cycle's nodes (N<-W->K->N), open walks
        wrong = set()
        for c in cycles:
            closed = (*c, c[0])
            for i in range(len(closed) - 1):
                marks = ["->"] * (len(closed) - 1)
                marks[i] = "<-"
                wrong.add(fmt_path((closed, tuple(marks))))
            wrong.add(fmt_walk(c) if len(c) > 2 else fmt_walk((*c, c[0]))[:-3])
        for _ in range(20):
            k = rng.randint(2, min(4, len(g.nodes)))
            nodes = tuple(rng.sample(sorted(g.nodes), k))
            marks = tuple(rng.choice(["->", "<-"]) for _ in range(k))
            closed = (*nodes, nodes[0])
            if not o.cycle_claim(closed, marks):
                wrong.add(fmt_path((closed, marks)))
        wrong = sorted(w for w in wrong if w not in forward and w not in backward)
        self.add(g, desc, uid, task, "FO", "Find one cycle in this graph.", rng.choice(forward),
                 sample(rng, forward) + sample(rng, backward, 2), sample(rng, wrong))  # fmt: skip
        trap = [w for w in wrong if "<-" in w and "->" in w]
        claim = rng.choice([*forward, *backward]) if rng.random() < 0.5 else rng.choice(trap or wrong)
        yes = claim in forward or claim in backward
        self.add(g, desc, uid, task, "YN", f"Is {claim} a cycle in this graph?", "Yes." if yes else "No.",
                 ["Yes." if yes else "No."], ["No." if yes else "Yes."])  # fmt: skip
        mc = self.mc(forward, wrong)
        if mc:
            opts, right, bad = mc
            self.add(g, desc, uid, task, "MC", f"Which of the following is a cycle in this graph?{opts}", right,
                     [right], bad)  # fmt: skip
        long = [c for c in cycles if len(c) >= 3]
        if long and rng.random() < 0.5:  # a closed walk that goes round twice: open
            c = long[0]
            self.add(g, desc, uid, task, "YN", f"Is {fmt_walk((*c, *c, c[0]))} a cycle in this graph?", "Yes.",
                     expect="unsupported")  # fmt: skip

    # -- Markov blanket, districts ------------------------------------------------------------
    def markov_blanket(self, g: Graph, o: Oracle, desc: str, uid: str) -> None:
        rng, task = self.rng, "markov_blanket"
        v = rng.choice(sorted(g.nodes))
        if g.kind != "DAG":
            if rng.random() > 0.35:
                return
            self.add(
                g,
                desc,
                uid,
                task,
                "FO",
                f"What is the markov blanket of node {v}?",
                "set()",
                expect="unsupported",
            )
            return
        mb = o.markov_blanket(v)
        others = set(g.nodes) - {v}
        near = [mb - {u} for u in sorted(mb)] + [mb | {u} for u in sorted(others - mb)] + [mb | {v}]
        wrong = [fmt_set(z, rng) for z in near if z != mb]
        self.add(g, desc, uid, task, "FO", f"What is the markov blanket of node {v}?", fmt_set(mb, rng),
                 [fmt_set(mb, rng), fmt_set(mb, rng)], sample(rng, wrong))  # fmt: skip
        w = rng.choice(sorted(g.nodes))
        mw = o.markov_blanket(w)
        claim = mw if rng.random() < 0.5 else rng.choice([mw ^ {u} for u in sorted(set(g.nodes) - {w})])
        yes = claim == mw
        self.add(g, desc, uid, task, "YN", f"Is {fmt_set(claim, rng)} the markov blanket of node {w}?",
                 "Yes." if yes else "No.", ["Yes." if yes else "No."], ["No." if yes else "Yes."])  # fmt: skip
        mc = self.mc([fmt_set(mb, rng)], wrong)
        if mc:
            opts, right, bad = mc
            self.add(g, desc, uid, task, "MC", f"Which of the following is the markov blanket of node {v}?{opts}",
                     right, [right], bad)  # fmt: skip

    def ccomponent(self, g: Graph, o: Oracle, desc: str, uid: str) -> None:
        rng, task = self.rng, "c-component"
        parts = o.districts()
        text = "[" + ", ".join(fmt_set(p, rng) for p in sample(rng, parts, len(parts))) + "]"
        prefix = "It can be uniquely partitioned into a set C(G) of subgraphs, each a maximal C-component."
        merged = [parts[0] | parts[1], *parts[2:]] if len(parts) > 1 else None
        split = None
        big = next((p for p in parts if len(p) > 1), None)
        if big:
            u = sorted(big)[0]
            split = [q for q in parts if q != big] + [frozenset({u}), big - {u}]
        wrong = ["[" + ", ".join(fmt_set(p, rng) for p in alt) + "]" for alt in (merged, split) if alt]
        wrong.append("[" + ", ".join(fmt_set(p, rng) for p in [*parts, parts[0]]) + "]")
        self.add(g, desc, uid, task, "FA", f"{prefix} Write down such partition of the given graph.", text,
                 [text, [fmt_set(p, rng) for p in parts]], wrong)  # fmt: skip
        n = len(parts)
        self.add(g, desc, uid, task, "HM", f"{prefix} How many subgraphs are there in C(G)?", str(n), [str(n)],
                 [str(n + 1), str(n - 1)])  # fmt: skip
        yes = n == 1
        self.add(g, desc, uid, task, "YN", "Is it a C-component?", "Yes." if yes else "No.",
                 ["Yes." if yes else "No."], ["No." if yes else "Yes."])  # fmt: skip


def connected_district_admg(rng: random.Random, n: int, graph_type: str) -> Graph:
    """An ADMG whose bi-directed edges join every node (one district)."""
    g = random_dag(rng, n, 0.35)
    order = sorted(g.nodes)
    rng.shuffle(order)
    bi = {tuple(sorted((order[i], order[rng.randrange(i)]))) for i in range(1, n)}
    return Graph("ADMG", g.nodes, g.directed, bi, graph_type)


def directed_only_connected_admg(rng: random.Random, n: int) -> Graph:
    """The trap: directed edges connect every node, bi-directed edges do not."""
    nodes = rng.sample(LETTERS, n)
    directed = {(nodes[i], nodes[i + 1]) for i in range(n - 1)}
    return Graph("ADMG", nodes, directed, {tuple(sorted((nodes[0], nodes[1])))})


def frontdoor_shaped(rng: random.Random, n: int, admg: bool) -> Graph:
    """X -> M -> Y with X and Y confounded (a latent U or X <-> Y), plus random extra nodes."""
    g = random_dag(rng, n, 0.25)
    x, m, y, u = rng.sample(sorted(g.nodes), 4)
    directed = {(a, b) for a, b in sorted(g.directed) if not {a, b} & {x, m, y, u} or rng.random() < 0.3}
    directed |= {(x, m), (m, y)}
    bidirected = set()
    if admg:
        bidirected.add(tuple(sorted((x, y))))
    else:
        directed |= {(u, x), (u, y)}
    if not _acyclic(g.nodes, directed):
        directed = {(x, m), (m, y)} | ({(u, x), (u, y)} if not admg else set())
    return Graph("ADMG" if admg else "DAG", g.nodes, directed, bidirected)


def _acyclic(nodes, directed) -> bool:
    d = nx.DiGraph()
    d.add_nodes_from(nodes)
    d.add_edges_from(directed)
    return nx.is_directed_acyclic_graph(d)


def generate(seed: int = SEED) -> list[dict]:
    b = Builder(seed)
    rng = b.rng
    graphs = []
    for i in range(12):
        n = 4 + i % 6
        if i < 8:
            graphs.append(random_dag(rng, n, rng.uniform(0.3, 0.55)))
            graphs.append(random_admg(rng, n, rng.uniform(0.3, 0.5), rng.uniform(0.1, 0.3)))
        graphs.append(random_dg(rng, n, rng.uniform(0.25, 0.45), acyclic=i % 4 == 3))
    graphs += [
        connected_district_admg(rng, 4 + i, t) for i, t in enumerate(["C-component", "ADMG", "C-component"])
    ]
    graphs += [directed_only_connected_admg(rng, 5), directed_only_connected_admg(rng, 7)]
    graphs += [frontdoor_shaped(rng, n, admg) for n, admg in ((5, False), (7, True), (8, False), (9, True))]
    for g in graphs:
        o, desc, uid = Oracle(g), g.describe(rng), b.uid()
        if g.kind in ("DAG", "ADMG"):
            b.adjustment(g, o, desc, uid, "backdoor")
            b.adjustment(g, o, desc, uid, "frontdoor")
            b.frontdoor_open_case(g, o, desc, uid)
            b.dseparation(g, o, desc, uid)
            b.blocked_path(g, o, desc, uid)
            b.backdoor_path(g, o, desc, uid)
            b.markov_blanket(g, o, desc, uid)
            if g.kind == "DAG":
                b.markov_blanket(g, o, desc, uid)
        if g.kind == "ADMG":
            b.ccomponent(g, o, desc, uid)
        b.directed_path(g, o, desc, uid)
        if g.kind == "DG":
            b.cycle(g, o, desc, uid)
    return b.records


def dumps(records: list[dict]) -> str:
    return "".join(json.dumps(r, sort_keys=False) + "\n" for r in records)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--check", action="store_true", help="compare with the file instead of writing it")
    args = parser.parse_args(argv)
    text = dumps(generate())
    if args.check:
        same = args.out.exists() and args.out.read_text() == text
        print("up to date" if same else f"{args.out} differs from a fresh generation")
        return 0 if same else 1
    args.out.write_text(text)
    print(f"wrote {text.count(chr(10))} records to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
