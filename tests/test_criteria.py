"""Tests for faithgrpo.verifier.graphs.criteria against brute force over paths and subsets, and textbook cases.

The brute-force oracles below are written from the textbook definitions (Pearl 2009; Richardson
2003) and share no code with the library: they enumerate every simple path of the mixed graph and
every subset of candidate nodes.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from faithgrpo.verifier import graphs as C
from faithgrpo.verifier.graphs.edges import Path, parse_graph, parse_path
from faithgrpo.verifier.graphs.model import CausalGraph


# ---------------------------------------------------------------------------------------------
# random graphs
@st.composite
def graphs(draw, kinds=("DAG", "ADMG"), min_nodes=2, max_nodes=6, bidirected_rate=3):
    kind = draw(st.sampled_from(kinds))
    n = draw(st.integers(min_nodes, max_nodes))
    names = draw(st.permutations([chr(ord("A") + i) for i in range(n)]))
    directed, bidirected = set(), set()
    for i, j in itertools.permutations(range(n), 2):
        if (kind == "DG" or i < j) and draw(st.booleans()):
            directed.add((names[i], names[j]))
        if kind == "ADMG" and i < j and draw(st.integers(0, bidirected_rate)) == 0:
            bidirected.add((names[i], names[j]))
    return CausalGraph(kind, tuple(names), frozenset(directed), frozenset(bidirected)).validate()


@st.composite
def graph_and_pair(draw, **kw):
    g = draw(graphs(**kw))
    x, y = draw(st.permutations(g.nodes))[:2]
    return g, x, y


def subsets(items):
    items = sorted(items)
    return [frozenset(c) for k in range(len(items) + 1) for c in itertools.combinations(items, k)]


# ---------------------------------------------------------------------------------------------
# brute-force oracles (independent of the library)
def adjacency(g):
    adj = {v: [] for v in g.nodes}
    for a, b in g.directed:
        adj[a].append(("->", b))
        adj[b].append(("<-", a))
    for a, b in g.bidirected:
        adj[a].append(("<->", b))
        adj[b].append(("<->", a))
    return adj


def all_simple_paths(g, a, b):
    """Every simple path a ... b as (nodes, marks), by plain recursion."""
    adj, out = adjacency(g), []

    def rec(nodes, marks):
        for m, w in adj[nodes[-1]]:
            if w == b:
                out.append(((*nodes, w), (*marks, m)))
            elif w not in nodes:
                rec((*nodes, w), (*marks, m))

    if a != b:
        rec((a,), ())
    return out


def desc_or_self(g, v):
    return nx.descendants(g.to_networkx(), v) | {v}


def brute_blocked(g, nodes, marks, z):
    for i in range(1, len(nodes) - 1):
        into_left = marks[i - 1] in ("->", "<->")
        into_right = marks[i] in ("<-", "<->")
        if into_left and into_right:
            if not (desc_or_self(g, nodes[i]) & z):
                return True
        elif nodes[i] in z:
            return True
    return False


def brute_separated(g, xs, ys, z):
    return all(
        brute_blocked(g, nodes, marks, z)
        for x in xs
        for y in ys
        for nodes, marks in all_simple_paths(g, x, y)
    )


def brute_backdoor(g, x, y, z):
    if x in z or y in z or (desc_or_self(g, x) - {x}) & z:
        return False
    return all(brute_blocked(g, n, m, z) for n, m in all_simple_paths(g, x, y) if m[0] in ("<-", "<->"))


def brute_directed_paths(g, x, y):
    return [n for n, m in all_simple_paths(g, x, y) if all(k == "->" for k in m)]


def brute_frontdoor(g, x, y, z):
    if x in z or y in z:
        return False
    if any(not (set(p[1:-1]) & z) for p in brute_directed_paths(g, x, y)):
        return False
    for v in z:
        if not all(
            brute_blocked(g, n, m, set()) for n, m in all_simple_paths(g, x, v) if m[0] in ("<-", "<->")
        ):
            return False
        if not all(
            brute_blocked(g, n, m, {x}) for n, m in all_simple_paths(g, v, y) if m[0] in ("<-", "<->")
        ):
            return False
    return True


# ---------------------------------------------------------------------------------------------
# separation
@settings(max_examples=120, deadline=None)
@given(graphs(), st.data())
def test_m_separation_matches_path_definition(g, data):
    dag = C.canonical_dag(g)
    order = data.draw(st.permutations(g.nodes))
    k = data.draw(st.integers(1, max(1, len(order) - 1)))
    xs, rest = frozenset(order[:k]), order[k:]
    if not rest:
        return
    j = data.draw(st.integers(1, len(rest)))
    ys, others = frozenset(rest[:j]), rest[j:]
    for z in subsets(others):
        expected = brute_separated(g, xs, ys, z)
        assert nx.is_d_separator(dag, set(xs), set(ys), set(z)) == expected  # the oracles agree
        assert C.m_separated(g, xs, ys, z) == expected
        if g.kind == "DAG":
            assert C.d_separated(g, xs, ys, z) == expected


@settings(max_examples=80, deadline=None)
@given(graph_and_pair())
def test_minimal_separators_match_brute_force(gxy):
    g, x, y = gxy
    valid = [z for z in subsets(set(g.nodes) - {x, y}) if brute_separated(g, {x}, {y}, z)]
    minimal = {z for z in valid if not any(w < z for w in valid)}
    for z in subsets(set(g.nodes) - {x, y}):
        assert C.is_minimal_m_separator(g, x, y, z) == (z in minimal)
    found = C.minimal_m_separator(g, x, y)
    assert (found is None) == (not valid)
    if found is not None:
        assert found in minimal
    restricted = set(g.nodes[: len(g.nodes) // 2 + 1]) - {x, y}
    found = C.minimal_m_separator(g, x, y, restricted=restricted)
    assert (found is None) == (not any(z <= restricted for z in valid))
    if found is not None:
        assert found <= restricted and found in valid
        assert not any(w < found for w in valid)
    dag = C.canonical_dag(g)
    for z in minimal:
        assert nx.is_minimal_d_separator(dag, {x}, {y}, set(z))


def test_separation_argument_errors():
    g = parse_graph("A -> B -> C; A <-> C")
    with pytest.raises(ValueError, match="DAG"):
        C.d_separated(g, "A", "C", ["B"])
    with pytest.raises(ValueError, match="disjoint"):
        C.m_separated(g, "A", "C", ["A"])
    with pytest.raises(ValueError, match="unknown node"):
        C.m_separated(g, "A", "Q", [])
    with pytest.raises(ValueError, match="non-empty"):
        C.m_separated(g, [], "C", [])
    with pytest.raises(ValueError, match="DG"):
        C.m_separated(parse_graph("A -> B -> A"), "A", "B", [])


# ---------------------------------------------------------------------------------------------
# paths
@settings(max_examples=100, deadline=None)
@given(graph_and_pair(kinds=("DAG", "ADMG", "DG")))
def test_path_enumeration_matches_brute_force(gxy):
    g, x, y = gxy
    brute = all_simple_paths(g, x, y)
    assert {(p.nodes, p.marks) for p in C.simple_paths(g, x, y)} == set(brute)
    assert {(p.nodes, p.marks) for p in C.backdoor_paths(g, x, y)} == {
        (n, m) for n, m in brute if m[0] != "->"
    }
    assert {p.nodes for p in C.directed_paths(g, x, y)} == set(brute_directed_paths(g, x, y))
    assert C.has_directed_path(g, x, y) == nx.has_path(g.to_networkx(), x, y)
    for n, m in brute:
        p = Path(n, m)
        assert C.is_path(g, p) and C.is_path(g, p.reversed())
        assert C.is_backdoor_path(g, x, y, p) == (m[0] != "->")
        assert C.is_directed_path(g, p) == all(k == "->" for k in m)
    assert len(list(C.simple_paths(g, x, y, limit=1))) == min(1, len(brute))


@settings(max_examples=80, deadline=None)
@given(graph_and_pair(), st.data())
def test_path_blocking_matches_brute_force(gxy, data):
    g, x, y = gxy
    paths = all_simple_paths(g, x, y)
    if not paths:
        return
    nodes, marks = data.draw(st.sampled_from(paths))
    for z in subsets(set(g.nodes) - {x, y}):
        assert C.path_is_blocked(g, Path(nodes, marks), z) == brute_blocked(g, nodes, marks, z)


def test_is_path_rejects_non_paths():
    g = parse_graph("A -> B; B <- C; C <-> D", "ADMG")
    assert C.is_path(g, parse_path("A->B<-C<->D"))
    assert not C.is_path(g, parse_path("A<-B"))  # wrong direction
    assert not C.is_path(g, parse_path("B->C"))
    assert not C.is_path(g, parse_path("C->D"))  # bidirected edge written as directed
    assert not C.is_path(g, parse_path("A->B->A"))  # not simple
    assert not C.is_path(g, parse_path("A"))
    assert not C.is_path(g, parse_path("A->Q"))
    with pytest.raises(ValueError, match="not a path"):
        C.path_is_blocked(g, parse_path("A<-B"), [])


# ---------------------------------------------------------------------------------------------
# backdoor / front-door
@settings(max_examples=100, deadline=None)
@given(graph_and_pair())
def test_backdoor_variants_match_brute_force(gxy):
    g, x, y = gxy
    universe = set(g.nodes) - {x, y}
    valid = {z for z in subsets(set(g.nodes)) if brute_backdoor(g, x, y, z)}
    minimal = {z for z in valid if not any(w < z for w in valid)}
    maximal = {z for z in valid if not any(w > z for w in valid)}
    for z in subsets(universe):
        assert C.is_backdoor_set(g, x, y, z) == (z in valid)
        assert C.is_minimal_backdoor_set(g, x, y, z) == (z in minimal)
        assert C.is_maximal_backdoor_set(g, x, y, z) == (z in maximal)
    assert set(C.maximal_backdoor_sets(g, x, y, limit=10_000)) == maximal
    assert not C.is_backdoor_set(g, x, y, {x}) and not C.is_backdoor_set(g, x, y, {y})
    found = C.minimal_backdoor_set(g, x, y)
    assert (found is None) == (not valid)
    assert found is None or found in minimal
    if g.kind == "DAG":
        assert len(maximal) <= 1  # the uniqueness claim in maximal_backdoor_set's docstring
        best = C.maximal_backdoor_set(g, x, y)
        assert (best is None and not maximal) or {best} == maximal
    witness = C.open_backdoor_path(g, x, y, set())
    assert (witness is None) == (frozenset() in valid)
    if witness is not None:
        assert not brute_blocked(g, witness.nodes, witness.marks, set())


@settings(max_examples=100, deadline=None)
@given(graph_and_pair(max_nodes=5))
def test_frontdoor_matches_brute_force(gxy):
    g, x, y = gxy
    for z in subsets(set(g.nodes) - {x, y}):
        assert C.is_frontdoor_set(g, x, y, z) == brute_frontdoor(g, x, y, z), (g, x, y, z)


# ---- minimal / maximal front-door sets and maximal backdoor sets in ADMGs, against brute force
def _random_graph(rng, kind, n):
    """A random DAG or ADMG on n nodes (names shuffled so natural order is not topological)."""
    names = [f"V{i}" for i in range(n)]
    rng.shuffle(names)
    p, q = rng.choice((0.2, 0.35, 0.5)), rng.choice((0.1, 0.2, 0.35))
    directed = {(names[i], names[j]) for i, j in itertools.combinations(range(n), 2) if rng.random() < p}
    bidirected = set()
    if kind == "ADMG":
        bidirected = {
            (names[i], names[j]) for i, j in itertools.combinations(range(n), 2) if rng.random() < q
        }
        if not bidirected:
            bidirected.add((names[0], names[1]) if names[0] < names[1] else (names[1], names[0]))
    return CausalGraph(kind, tuple(names), frozenset(directed), frozenset(bidirected)).validate()


def _extremes(valid):
    """(minimal, maximal) members of a family of sets, by comparing every pair (brute force)."""
    minimal = {z for z in valid if not any(w < z for w in valid)}
    maximal = {z for z in valid if not any(w > z for w in valid)}
    return minimal, maximal


def _graph_cases(seed, count, lo=4, hi=9, *, frontdoor=False):
    """Random (graph, x, y): mostly x an ancestor of y (the interesting case); for front-door cases
    x often keeps only a hidden confounder with y (x <-> y) as its arrowhead-bearing edge, the
    textbook set-up where front-door sets exist."""
    rng = random.Random(seed)
    for _ in range(count):
        g = _random_graph(rng, rng.choice(("DAG", "ADMG")), rng.randint(lo, hi))
        pairs = [(a, b) for a in g.nodes for b in g.nodes if a != b and C.has_directed_path(g, a, b)]
        if pairs and rng.random() < 0.85:
            x, y = rng.choice(pairs)
        else:
            x, y = rng.sample(g.nodes, 2)
        if frontdoor and rng.random() < 0.6:
            # shield x, and (often) the mediators, from arrowheads other than those of x -> ... -> y
            shielded = {x}
            if rng.random() < 0.7:
                shielded |= C.mediators(g, x, y)
            keep = {x} | C.mediators(g, x, y)
            directed = frozenset(e for e in g.directed if e[1] not in shielded or e[0] in keep)
            bidirected = frozenset(e for e in g.bidirected if not set(e) & shielded)
            if g.kind == "ADMG":
                bidirected |= {tuple(sorted((x, y)))}
            g = CausalGraph(g.kind, g.nodes, directed, bidirected).validate()
        yield g, x, y


@pytest.mark.parametrize("seed", range(4))
def test_frontdoor_minimal_and_maximal_match_brute_force_over_all_subsets(seed):
    # 4 x 700 random DAGs/ADMGs on 4-9 nodes; every subset of V - {x, y} is judged. Validity comes
    # from the path-enumeration oracle on graphs up to 6 nodes and from is_frontdoor_set (itself
    # checked against that oracle above) on larger ones; minimality and maximality come from
    # comparing every pair of valid sets, never from the characterisations under test.
    kinds = Counter()
    for g, x, y in _graph_cases(100 + seed, 700, frontdoor=True):
        rest = set(g.nodes) - {x, y}
        oracle = brute_frontdoor if len(g.nodes) <= 6 else C.is_frontdoor_set
        valid = {z for z in subsets(rest) if oracle(g, x, y, z)}
        minimal, maximal = _extremes(valid)
        for z in subsets(rest):
            assert C.is_minimal_frontdoor_set(g, x, y, z) == (z in minimal), (g, x, y, z)
            assert C.is_maximal_frontdoor_set(g, x, y, z) == (z in maximal), (g, x, y, z)
        # (ii) and (iii) are per member: the valid sets are the intercepting subsets of the candidates
        cands = C.frontdoor_candidates(g, x, y)
        assert all(z <= cands for z in valid)
        if valid:
            assert cands == frozenset().union(*valid)
        # the maximal set is unique, and it is the candidates when any valid set exists
        assert len(maximal) <= 1
        best = C.maximal_frontdoor_set(g, x, y)
        assert (best is None and not valid) or ({best} == maximal and best == cands)
        found = C.minimal_frontdoor_set(g, x, y)
        assert (found is None) == (not valid) and (found is None or found in minimal)
        if valid and C.has_directed_path(g, x, y):
            kinds[g.kind] += 1
            kinds["several minimal"] += len(minimal) > 1
    # the interesting cases occur: front-door sets that must cut directed paths, several minimal ones
    assert kinds["DAG"] >= 20 and kinds["ADMG"] >= 20 and kinds["several minimal"] >= 1, kinds


@pytest.mark.parametrize("seed", range(4))
def test_maximal_backdoor_sets_match_brute_force_over_all_supersets(seed):
    # 4 x 700 random DAGs/ADMGs on 4-9 nodes; maximality by comparing every pair of valid sets
    # (validity from the path oracle up to 6 nodes, from is_backdoor_set above that). This checks
    # the one-node-addition theorem of is_maximal_backdoor_set: no counterexample may exist.
    several = Counter()
    for g, x, y in _graph_cases(200 + seed, 700):
        rest = set(g.nodes) - {x, y}
        oracle = brute_backdoor if len(g.nodes) <= 6 else C.is_backdoor_set
        valid = {z for z in subsets(rest) if oracle(g, x, y, z)}
        _, maximal = _extremes(valid)
        for z in subsets(rest):
            assert C.is_maximal_backdoor_set(g, x, y, z) == (z in maximal), (g, x, y, z)
        exhaustive = C.maximal_backdoor_sets(g, x, y, limit=10_000)
        assert set(exhaustive) == maximal
        assert exhaustive == sorted(exhaustive, key=lambda z: (len(z), sorted(z)))  # V<i> sort naturally < 10
        grown = C.maximal_backdoor_sets(g, x, y, limit=10_000, max_checks=0)  # the non-exhaustive search
        assert set(grown) <= maximal and bool(grown) == bool(maximal)
        if g.kind == "DAG":
            assert len(maximal) <= 1
        several[g.kind] += len(maximal) > 1
    assert several["ADMG"] > 0 and several["DAG"] == 0  # ADMG maximal sets need not be unique


def test_maximal_sets_textbook():
    # ADMG: X <-> C <-> Y makes C a collider; {U} is maximal although C is a non-descendant of X
    g = parse_graph("U -> X; U -> Y; X -> Y; X <-> C; C <-> Y")
    assert C.is_maximal_backdoor_set(g, "X", "Y", {"U"})
    assert not C.is_backdoor_set(g, "X", "Y", {"U", "C"})
    with pytest.raises(ValueError, match="DAGs"):
        C.maximal_backdoor_set(g, "X", "Y")
    # two maximal sets: on X <-> B <-> A <-> Y either collider alone leaves the other one closed
    g = parse_graph("X -> Y; X <-> B; B <-> A; A <-> Y")
    assert C.maximal_backdoor_sets(g, "X", "Y") == [frozenset({"A"}), frozenset({"B"})]
    assert C.maximal_backdoor_sets(g, "X", "Y", max_checks=0) == [frozenset({"A"}), frozenset({"B"})]
    # front-door: two routes X -> A -> Y and X -> B -> Y; W -> X breaks (ii), S <-> Y breaks (iii)
    g = parse_graph("X -> A -> Y; X -> B -> Y; X <-> Y; W -> X; S <-> Y")
    assert C.frontdoor_candidates(g, "X", "Y") == {"A", "B"}
    assert C.is_minimal_frontdoor_set(g, "X", "Y", {"A", "B"})
    assert C.maximal_frontdoor_set(g, "X", "Y") == {"A", "B"}
    g = parse_graph("X -> A -> B -> Y; X <-> Y")
    assert C.is_frontdoor_set(g, "X", "Y", {"A", "B"}) and not C.is_minimal_frontdoor_set(
        g, "X", "Y", {"A", "B"}
    )
    assert C.minimal_frontdoor_set(g, "X", "Y") == {"B"}  # A is dropped first (natural order)
    assert C.is_maximal_frontdoor_set(g, "X", "Y", {"A", "B"})
    assert C.is_minimal_frontdoor_set(parse_graph("Y -> X"), "X", "Y", set())  # no directed path


def test_mbias_textbook():
    # M-bias (Greenland 2003): M is a pre-treatment collider; adjusting for it alone opens X <- A -> M <- B -> Y.
    g = parse_graph("A -> X; A -> M; B -> M; B -> Y; X -> Y")
    assert C.is_backdoor_set(g, "X", "Y", set())
    assert not C.is_backdoor_set(g, "X", "Y", {"M"})
    assert C.is_backdoor_set(g, "X", "Y", {"M", "A"}) and C.is_backdoor_set(g, "X", "Y", {"M", "B"})
    assert str(C.open_backdoor_path(g, "X", "Y", {"M"})) == "X <- A -> M <- B -> Y"
    assert C.minimal_backdoor_set(g, "X", "Y") == frozenset()
    assert C.maximal_backdoor_set(g, "X", "Y") == {"A", "B", "M"}
    assert not C.is_minimal_backdoor_set(g, "X", "Y", {"A"})


def test_butterfly_textbook():
    # Butterfly bias (Ding & Miratrix 2015): M is both confounder and collider.
    g = parse_graph("A -> M; B -> M; A -> X; B -> Y; M -> X; M -> Y; X -> Y")
    valid = {z for z in subsets({"A", "B", "M"}) if C.is_backdoor_set(g, "X", "Y", z)}
    assert valid == {frozenset({"A", "M"}), frozenset({"B", "M"}), frozenset({"A", "B", "M"})}
    assert C.is_minimal_backdoor_set(g, "X", "Y", {"A", "M"})
    assert not C.is_minimal_backdoor_set(g, "X", "Y", {"A", "B", "M"})


def test_frontdoor_smoking_tar_cancer_textbook():
    # Pearl 2009 §3.3.2: smoking -> tar -> cancer with an unobserved genotype confounding smoking and cancer.
    admg = parse_graph("Smoking -> Tar -> Cancer; Smoking <-> Cancer")
    assert C.is_frontdoor_set(admg, "Smoking", "Cancer", {"Tar"})
    assert not C.is_backdoor_set(admg, "Smoking", "Cancer", set())
    assert C.minimal_backdoor_set(admg, "Smoking", "Cancer") is None
    dag = parse_graph("U -> Smoking; U -> Cancer; Smoking -> Tar -> Cancer")  # the latent made explicit
    assert C.is_frontdoor_set(dag, "Smoking", "Cancer", {"Tar"})
    assert not C.is_frontdoor_set(dag, "Smoking", "Cancer", set())
    assert not C.is_frontdoor_set(
        parse_graph("Smoking -> Tar -> Cancer; Tar <-> Cancer"), "Smoking", "Cancer", {"Tar"}
    )
    assert not C.is_frontdoor_set(
        parse_graph("Smoking -> Tar -> Cancer; Smoking <-> Tar"), "Smoking", "Cancer", {"Tar"}
    )
    assert not C.is_frontdoor_set(
        parse_graph("Smoking -> Tar -> Cancer; Smoking -> Cancer"), "Smoking", "Cancer", {"Tar"}
    )


# ---------------------------------------------------------------------------------------------
# mediators, cycles, Markov blanket
@settings(max_examples=100, deadline=None)
@given(graph_and_pair())
def test_mediators_match_directed_path_enumeration(gxy):
    g, x, y = gxy
    expected = {v for p in brute_directed_paths(g, x, y) for v in p[1:-1]}
    assert C.mediators(g, x, y) == expected
    for v in g.nodes:
        assert C.is_mediator(g, x, y, v) == (v in expected)


def brute_cycles(g):
    out = set()
    for k in range(2, len(g.nodes) + 1):
        for seq in itertools.permutations(g.nodes, k):
            if seq[0] == min(seq) and all((a, b) in g.directed for a, b in zip(seq, seq[1:] + seq[:1])):
                out.add(seq)
    return out


@settings(max_examples=100, deadline=None)
@given(graphs(kinds=("DG",), max_nodes=5))
def test_cycles_match_brute_force(g):
    expected = brute_cycles(g)
    assert set(C.simple_cycles(g)) == expected
    found = C.find_directed_cycle(g)
    assert (found is None) == (not expected)
    if found is not None:
        assert C.is_directed_cycle(g, found)
        assert C.is_directed_cycle(g, (*found, found[0]))  # closing repeat accepted
    for k in range(1, len(g.nodes) + 1):
        for seq in itertools.permutations(g.nodes, k):
            i = seq.index(min(seq))
            assert C.is_directed_cycle(g, seq) == (seq[i:] + seq[:i] in expected)
    assert not C.is_directed_cycle(g, ["Q", "R"])


@settings(max_examples=100, deadline=None)
@given(graphs())
def test_markov_blanket_matches_collider_paths(g):
    for v in g.nodes:
        expected = set()
        for w in g.nodes:
            for nodes, marks in all_simple_paths(g, v, w):
                inner = range(1, len(nodes) - 1)
                if all(marks[i - 1] in ("->", "<->") and marks[i] in ("<-", "<->") for i in inner):
                    expected.add(w)
        assert C.markov_blanket(g, v) == expected
        if g.kind == "DAG":
            kids = g.children(v)
            assert expected == set(g.parents(v)) | kids | {p for c in kids for p in g.parents(c)} - {v}


# ---------------------------------------------------------------------------------------------
# ATE
HAND_CPTS = {
    "Z": {"parents": [], "p1": {"": 0.4}},
    "X": {"parents": ["Z"], "p1": {"0": 0.2, "1": 0.7}},
    "Y": {"parents": ["X", "Z"], "p1": {"0,0": 0.1, "0,1": 0.5, "1,0": 0.3, "1,1": 0.8}},
}


def test_adjusted_ate_hand_computed():
    # ψ = (0.3 − 0.1)·0.6 + (0.8 − 0.5)·0.4 = 0.24; the unadjusted contrast is 0.65 − 0.18 = 0.47.
    assert C.adjusted_ate(HAND_CPTS, "X", "Y", ["Z"]) == pytest.approx(0.24)
    assert C.adjusted_ate(HAND_CPTS, "X", "Y", []) == pytest.approx(0.47)
    assert C.interventional_ate(HAND_CPTS, "X", "Y") == pytest.approx(0.24)
    assert C.interventional_ate(HAND_CPTS, "Y", "X") == pytest.approx(0.0)
    scalar = {**HAND_CPTS, "Z": {"parents": [], "p1": 0.4}}
    assert C.adjusted_ate(scalar, "X", "Y", ["Z"]) == pytest.approx(0.24)


def random_cpts(g, rng, *, extreme=False):
    cpts = {}
    for v in g.nodes:
        parents = sorted(g.parents(v))
        table = {}
        for values in itertools.product((0, 1), repeat=len(parents)):
            table[",".join(map(str, values))] = (
                rng.choice([0.0, 1.0, 0.5]) if extreme else round(rng.uniform(0.05, 0.95), 3)
            )
        cpts[v] = {"parents": parents, "p1": table}
    return cpts


def brute_joint(cpts):
    names = list(cpts)
    joint = {}
    for values in itertools.product((0, 1), repeat=len(names)):
        a = dict(zip(names, values))
        p = 1.0
        for v in names:
            key = ",".join(str(a[u]) for u in cpts[v]["parents"])
            p1 = cpts[v]["p1"][key]
            p *= p1 if a[v] else 1 - p1
        joint[values] = (a, p)
    return joint


def brute_adjusted(cpts, x, y, z):
    joint = brute_joint(cpts).values()

    def prob(cond):
        return sum(p for a, p in joint if all(a[k] == v for k, v in cond.items()))

    psi = 0.0
    for zv in itertools.product((0, 1), repeat=len(z)):
        zc = dict(zip(z, zv))
        pz = prob(zc)
        if pz == 0:
            continue
        p1 = prob({**zc, x: 1, y: 1}) / prob({**zc, x: 1})
        p0 = prob({**zc, x: 0, y: 1}) / prob({**zc, x: 0})
        psi += (p1 - p0) * pz
    return psi


def brute_do(cpts, x, y):
    mutilated = {**cpts}
    out = []
    for xv in (0, 1):
        mutilated[x] = {"parents": [], "p1": {"": float(xv)}}
        out.append(sum(p for a, p in brute_joint(mutilated).values() if a[y] == 1))
    return out[1] - out[0]


@settings(max_examples=60, deadline=None)
@given(graph_and_pair(kinds=("DAG",), max_nodes=5), st.integers(0, 2**32 - 1))
def test_ate_matches_brute_force_enumeration(gxy, seed):
    g, x, y = gxy
    cpts = random_cpts(g, random.Random(seed))
    truth = brute_do(cpts, x, y)
    assert C.interventional_ate(cpts, x, y) == pytest.approx(truth, abs=1e-9)
    for z in subsets(set(g.nodes) - {x, y}):
        zl = sorted(z)
        assert C.adjusted_ate(cpts, x, y, zl) == pytest.approx(brute_adjusted(cpts, x, y, zl), abs=1e-9)
        if C.is_backdoor_set(g, x, y, z):  # the adjustment formula identifies the causal effect
            assert C.adjusted_ate(cpts, x, y, zl) == pytest.approx(truth, abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(
    graph_and_pair(kinds=("DAG",), max_nodes=5),
    st.integers(0, 2**32 - 1),
    st.floats(-0.5, 0.5),
    st.floats(0, 0.2),
)
def test_ate_certificate_conditions(gxy, seed, threshold, margin):
    g, x, y = gxy
    cpts = random_cpts(g, random.Random(seed), extreme=seed % 3 == 0)
    for z in subsets(set(g.nodes)):
        ok, reason = C.ate_certificate(g, cpts, x, y, z, threshold, margin)
        expected = brute_backdoor(g, x, y, z)
        if expected:
            try:
                psi = brute_adjusted(cpts, x, y, sorted(z))
                if abs(abs(psi - threshold) - margin) < 1e-9:
                    continue  # on the boundary, rounding decides
                expected = abs(psi - threshold) > margin
            except ZeroDivisionError:  # positivity violated
                expected = False
        assert ok == expected, reason
        if not ok:
            assert reason


def test_ate_certificate_reasons():
    g = parse_graph("Z -> X; Z -> Y; X -> Y; X -> D")
    cpts = {**HAND_CPTS, "D": {"parents": ["X"], "p1": {"0": 0.5, "1": 0.5}}}
    assert C.ate_certificate(g, cpts, "X", "Y", ["Z"], 0.1, 0.05) == (
        True,
        "ψ = 0.2400 > threshold 0.1 (margin 0.05)",
    )
    assert C.ate_certificate(g, cpts, "X", "Y", ["Z"], 0.3, 0.05)[0]  # decision "no" is certified too
    assert "within margin" in C.ate_certificate(g, cpts, "X", "Y", ["Z"], 0.22, 0.05)[1]
    assert "treatment X is in Z" in C.ate_certificate(g, cpts, "X", "Y", ["Z", "X"], 0.1)[1]
    assert "outcome Y" in C.ate_certificate(g, cpts, "X", "Y", ["Y"], 0.1)[1]
    assert "descendant" in C.ate_certificate(g, cpts, "X", "Y", ["Z", "D"], 0.1)[1]
    assert "X <- Z -> Y" in C.ate_certificate(g, cpts, "X", "Y", [], 0.1)[1]
    assert "unknown" in C.ate_certificate(g, cpts, "X", "Y", ["Q"], 0.1)[1]
    degenerate = {**cpts, "X": {"parents": ["Z"], "p1": {"0": 0.0, "1": 0.7}}}
    ok, reason = C.ate_certificate(g, degenerate, "X", "Y", ["Z"], 0.1)
    assert not ok and "positivity" in reason
    assert not C.ate_certificate(parse_graph("X -> Y; X <-> Y"), cpts, "X", "Y", [], 0.1)[0]


@pytest.mark.parametrize(
    ("cpts", "match"),
    [
        ({}, "non-empty"),
        ({"X": {"parents": []}}, "'parents' and 'p1'"),
        ({"X": {"parents": ["Q"], "p1": {"0": 0.1, "1": 0.2}}}, "no CPT"),
        ({"X": {"parents": [], "p1": {"": 1.5}}}, "not a probability"),
        ({"X": {"parents": [], "p1": {"": float("nan")}}}, "not a probability"),
        ({"X": {"parents": [], "p1": 0.5}, "Y": {"parents": ["X"], "p1": {"0": 0.1}}}, "lacks key '1'"),
        (
            {
                "X": {"parents": ["Y"], "p1": {"0": 0.1, "1": 0.2}},
                "Y": {"parents": ["X"], "p1": {"0": 0.1, "1": 0.2}},
            },
            "cycle",
        ),
    ],
)
def test_validate_cpts_errors(cpts, match):
    with pytest.raises(ValueError, match=match):
        C.validate_cpts(cpts)


def test_validate_cpts_against_graph_and_positivity_error():
    with pytest.raises(ValueError, match="'Y2' has no CPT"):
        C.validate_cpts(HAND_CPTS, parse_graph("Z -> X; X -> Y; Z -> Y; Z -> Y2"))
    with pytest.raises(ValueError, match="differ from the graph"):
        C.validate_cpts(HAND_CPTS, parse_graph("Z -> X; X -> Y"))
    degenerate = {**HAND_CPTS, "X": {"parents": ["Z"], "p1": {"0": 0.0, "1": 0.7}}}
    with pytest.raises(ValueError, match="positivity"):
        C.adjusted_ate(degenerate, "X", "Y", ["Z"])
    with pytest.raises(ValueError, match="distinct"):
        C.adjusted_ate(HAND_CPTS, "X", "Y", ["X"])


def _all_paths_brute(g, x, y, first, allowed):
    """Every simple path x..y by plain recursion (no pruning), as (nodes, marks) tuples."""
    out = []

    def walk(nodes, marks):
        for m, b in g.adjacency[nodes[-1]]:
            if m not in allowed or (len(nodes) == 1 and m not in first) or b in nodes:
                continue
            if b == y:
                out.append(((*nodes, b), (*marks, m)))
            else:
                walk((*nodes, b), (*marks, m))

    walk((x,), ())
    return out


@pytest.mark.parametrize("seed", range(40))
def test_pruned_simple_paths_and_path_exists_match_brute_force(seed):
    import random

    rng = random.Random(seed)
    names = [f"V{i}" for i in range(rng.randint(3, 8))]
    directed = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :] if rng.random() < 0.35]
    bidirected = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :] if rng.random() < 0.1]
    g = CausalGraph("ADMG", names, directed, bidirected)
    for x in names:
        for y in names:
            if x == y:
                continue
            for first, allowed in ((("->", "<-", "<->"),) * 2, (("<-", "<->"), ("->", "<-", "<->")),
                                   (("->",), ("->",))):  # fmt: skip
                brute = _all_paths_brute(g, x, y, first, allowed)
                got = [(p.nodes, p.marks) for p in C.simple_paths(g, x, y, first_marks=first, marks=allowed)]
                assert got == brute
                assert C.path_exists(g, x, y, first_marks=first, marks=allowed) == bool(brute)


_ATE_DIGEST_SCRIPT = """
import hashlib, json
from faithgrpo.verifier import graphs as C
from faithgrpo.tasks.causal import CausalGraphConfig, CausalGraphDataset
d = CausalGraphDataset(CausalGraphConfig(size=120, seed=1, min_nodes=5, max_nodes=9, query_kinds=["ate"]))
h = hashlib.sha256()
for i in range(len(d)):
    p = json.loads(d[i]["metadata"]["problem"])
    q, cpts = p["query"], p["cpts"]
    x, y = q["treatment"], q["outcome"]
    zs = [v for v in sorted(cpts) if v not in (x, y)][:3]
    h.update(repr((C.interventional_ate(cpts, x, y), C.adjusted_ate(cpts, x, y, zs))).encode())
print(h.hexdigest())
"""


def test_ate_values_do_not_depend_on_the_hash_seed():
    # einsum's float sums depend on the factor order: a set's order (randomised per process) once
    # flipped ATE certificates that sat on the tolerance
    import os
    import sys

    from faithgrpo.watchdog import run_with_deadline

    digests = set()
    for hash_seed in ("0", "1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = run_with_deadline([sys.executable, "-c", _ATE_DIGEST_SCRIPT], env=env, timeout=300)
        assert out.returncode == 0, out.log()
        digests.add(out.stdout.strip())
    assert len(digests) == 1


# ---------------------------------------------------------------------------------------------
# the content-keyed memo of validated CPTs and effects (verifier/graphs/ate.py): it must answer exactly as a
# fresh computation would, whatever callers do to the CPTs or the returned tables
def test_ate_memo_follows_in_place_changes_and_exact_types():
    cpts = {"X": {"parents": [], "p1": 0.5}, "Y": {"parents": ["X"], "p1": {"0": 0.2, "1": 0.7}}}
    assert C.interventional_ate(cpts, "X", "Y") == pytest.approx(0.5)
    cpts["Y"]["p1"]["1"] = 0.9  # same dict, new content: a new answer
    assert C.interventional_ate(cpts, "X", "Y") == pytest.approx(0.7)
    cpts["Y"]["p1"]["1"] = 1
    assert C.interventional_ate(cpts, "X", "Y") == pytest.approx(0.8)
    cpts["Y"]["p1"]["1"] = True  # equal to 1 (and hashes alike) but not a probability: still rejected
    with pytest.raises(ValueError, match="not a probability"):
        C.interventional_ate(cpts, "X", "Y")
    with pytest.raises(ValueError, match="not a probability"):
        C.validate_cpts(cpts)


def test_ate_memo_keeps_the_sign_of_zero_and_returns_fresh_tables():
    pos = {"X": {"parents": [], "p1": 0.0}}
    neg = {"X": {"parents": [], "p1": -0.0}}
    assert str(C.validate_cpts(pos)["X"][1][()]) == "0.0"
    assert str(C.validate_cpts(neg)["X"][1][()]) == "-0.0"
    table = C.validate_cpts(HAND_CPTS)
    table["Z"][1][()] = 0.99  # a caller changing its copy changes nothing for the next one
    del table["X"]
    assert C.validate_cpts(HAND_CPTS)["Z"][1][()] == 0.4
    assert C.adjusted_ate(HAND_CPTS, "X", "Y", ["Z"]) == pytest.approx(0.24)


def test_ate_memo_keeps_the_error_order():
    # parents forming a cycle and a graph that disagrees: the graph's error comes first, every time
    cyclic = {
        "A": {"parents": ["B"], "p1": {"0": 0.1, "1": 0.2}},
        "B": {"parents": ["A"], "p1": {"0": 0.3, "1": 0.4}},
    }
    g = parse_graph("A -> B")
    for _ in range(2):
        with pytest.raises(ValueError, match="differ from the graph"):
            C.validate_cpts(cyclic, g)
        with pytest.raises(ValueError, match="form a cycle"):
            C.validate_cpts(cyclic)
        with pytest.raises(ValueError, match="form a cycle"):
            C.interventional_ate(cyclic, "A", "B")
