"""Red team above the path cap (issue 29 item 1): true claims that certify an *invalid* RESULT.

With more than the cap's worth of paths (8 by default), naming the cap's worth of true, distinct
ones is accepted in place of the rest. Held-out audits found the hole this leaves: list 8 paths
that RESULT does block, leave out one it leaves open, and the derivation point came through for
an invalid set (4/6). The contract (docs/rewards.md, "CALVER") now says a certificate never earns the derivation point for an
invalid RESULT, on any graph size.

Attacks here are built on graphs far above the cap: published Bayesian networks (56-223 nodes, from
pgmpy's bundled BIF files) and random DAGs of 50-200 nodes. Each attack trace has an exact GRAPH,
the right QUERY and STRATEGY, and a DERIVATION whose claims are all true and name the cap's worth of
distinct paths that the invalid RESULT blocks. Expectations come from independent oracles
(``grade_answer`` and the graph functions of ``faithgrpo.verifier.graphs.criteria``), and each attack is
first shown to reach the hole: with the predicate gate switched off (the old rule), its derivation
passes.
"""

from __future__ import annotations

import itertools
import random

import networkx as nx
import pytest

from faithgrpo.rewards.calver.reward import score_trace
from faithgrpo.tasks.bayesnets.networks import load_network
from faithgrpo.tasks.certificates.gold import gold_trace
from faithgrpo.verifier import graphs as C
from faithgrpo.verifier.certificates import derivation as D
from faithgrpo.verifier.certificates.derivation import DEFAULT_MAX_PATHS, check_derivation
from faithgrpo.verifier.graphs.edges import Path
from faithgrpo.verifier.graphs.model import CausalGraph, node_sort_key
from faithgrpo.verifier.queries import grade_answer

CAP = DEFAULT_MAX_PATHS
_SCAN = 60  # paths scanned for the cap's worth that the invalid set blocks


def fmt(nodes) -> str:
    return "{" + ", ".join(sorted(nodes, key=node_sort_key)) + "}"


def random_dag(n: int, seed: int) -> CausalGraph:
    rng = random.Random(seed)
    names = [f"V{i}" for i in range(n)]
    order = names[:]
    rng.shuffle(order)
    p = 3.0 / (n - 1)
    edges = frozenset((order[i], order[j]) for i in range(n) for j in range(i + 1, n) if rng.random() < p)
    return CausalGraph("DAG", tuple(names), edges).validate()


def trace(g: CausalGraph, query_text: str, strategy: str, claims: list[str], result: str) -> str:
    body = "\n".join(f"- {c}" for c in claims)
    return (
        f"<think>\nGRAPH: {g.edge_text()}\nQUERY: {query_text}\nSTRATEGY: {strategy}\nDERIVATION:\n{body}\n"
        f"RESULT: {result}\n</think>\n<answer>{result}</answer>"
    )


def _as_path(g: CausalGraph, nodes: list[str]) -> Path:
    return Path(
        tuple(nodes), tuple("->" if (a, b) in g.directed else "<-" for a, b in itertools.pairwise(nodes))
    )


def shortest_paths(
    g: CausalGraph, x: str, y: str, *, backdoor: bool = False, directed: bool = False
) -> list[Path]:
    """Up to ``_SCAN`` simple paths x ... y, shortest first, by networkx (Yen's algorithm) on the skeleton.

    Short paths keep an attack trace within CALVER's length caps on 200-node graphs; networkx is an
    independent source of true paths.
    """
    if directed:
        dg = nx.DiGraph(list(g.directed))
        dg.add_nodes_from(g.nodes)
        return [_as_path(g, p) for p in itertools.islice(nx.shortest_simple_paths(dg, x, y), _SCAN)]
    skeleton = nx.Graph(list(g.directed))
    skeleton.add_nodes_from(g.nodes)
    if not backdoor:
        return [_as_path(g, p) for p in itertools.islice(nx.shortest_simple_paths(skeleton, x, y), _SCAN)]
    skeleton.remove_node(x)
    out = []
    for parent in sorted(g.parents(x), key=node_sort_key):
        if parent == y or not nx.has_path(skeleton, parent, y):
            continue
        out += [
            _as_path(g, [x, *p])
            for p in itertools.islice(nx.shortest_simple_paths(skeleton, parent, y), _SCAN)
        ]
    return sorted(out, key=lambda p: len(p.nodes))[:_SCAN]


def _blocked(g, x, y, z, *, backdoor: bool) -> list:
    paths = shortest_paths(g, x, y, backdoor=backdoor)
    return [p for p in paths if C.path_is_blocked(g, p, z)][:CAP]


def backdoor_attack(g: CausalGraph, x: str, y: str):
    """(problem, trace, invalid Z) or None: Z = a valid minimal set minus one member, with CAP blocked paths."""
    if len(list(C.simple_paths(g, x, y, first_marks=("<-",), limit=CAP + 1))) <= CAP:
        return None
    valid = C.minimal_backdoor_set(g, x, y)
    if not valid:
        return None
    for v in sorted(valid, key=node_sort_key):
        z = valid - {v}
        if C.is_backdoor_set(g, x, y, z):
            continue
        paths = _blocked(g, x, y, z, backdoor=True)
        if len(paths) < CAP:
            continue
        claims = [f"{u} is not a descendant of {x}" for u in sorted(z, key=node_sort_key)]
        claims += [f"backdoor path {p} is blocked given {fmt(z)}" for p in paths]
        q = {"kind": "backdoor_set", "treatment": x, "outcome": y}
        problem = {"graph": g.to_dict(), "query": q}
        text = trace(g, f"backdoor_set(treatment={x}, outcome={y})", "backdoor criterion", claims, fmt(z))
        return problem, text, z
    return None


def dsep_attack(g: CausalGraph, x: str, y: str):
    """(problem, trace, invalid Z) or None: a minimal separator minus one member, with CAP blocked paths."""
    if (x, y) in g.directed or (y, x) in g.directed:
        return None
    if len(list(C.simple_paths(g, x, y, limit=CAP + 1))) <= CAP:
        return None
    valid = C.minimal_m_separator(g, x, y)
    if not valid:
        return None
    for v in sorted(valid, key=node_sort_key):
        z = valid - {v}
        if C.m_separated(g, x, y, z):
            continue
        paths = _blocked(g, x, y, z, backdoor=False)
        if len(paths) < CAP:
            continue
        claims = [f"path {p} is blocked given {fmt(z)}" for p in paths]
        q = {"kind": "dsep_set", "x": x, "y": y}
        problem = {"graph": g.to_dict(), "query": q}
        return problem, trace(g, f"dsep_set(x={x}, y={y})", "d-separation", claims, fmt(z)), z
    return None


def ci_attack(g: CausalGraph, x: str, y: str):
    """(problem, 'yes' trace, given) or None: x and y are NOT separated given S, CAP paths shown blocked."""
    if (x, y) in g.directed or (y, x) in g.directed:
        return None
    if len(list(C.simple_paths(g, x, y, limit=CAP + 1))) <= CAP:
        return None
    valid = C.minimal_m_separator(g, x, y)
    if not valid or len(valid) < 2:
        return None
    given = valid - {min(valid, key=node_sort_key)}
    if C.m_separated(g, x, y, given):
        return None
    paths = _blocked(g, x, y, given, backdoor=False)
    if len(paths) < CAP:
        return None
    claims = [f"path {p} is blocked given {fmt(given)}" for p in paths]
    q = {"kind": "ci_test", "x": x, "y": y, "given": sorted(given, key=node_sort_key)}
    problem = {"graph": g.to_dict(), "query": q}
    qtext = f"ci_test(x={x}, y={y}, given={fmt(given)})"
    return problem, trace(g, qtext, "d-separation", claims, "yes"), given


def frontdoor_attack(g: CausalGraph, x: str, y: str):
    """(problem, trace, Z) or None: Z = {v} meets CAP directed paths and (ii)/(iii), but misses one."""
    if len(C.directed_paths(g, x, y, limit=CAP + 1)) <= CAP:
        return None
    directed = shortest_paths(g, x, y, directed=True)
    if len(directed) <= CAP:
        return None
    for v in sorted(C.frontdoor_candidates(g, x, y), key=node_sort_key):
        z = frozenset((v,))
        through = [p for p in directed if v in p.nodes[1:-1]]
        if len(through) < CAP or C.is_frontdoor_set(g, x, y, z):
            continue
        claims = [f"directed path {p}" for p in through[:CAP]]
        for a, b, given in ((x, v, frozenset()), (v, y, frozenset((x,)))):
            bd = shortest_paths(g, a, b, backdoor=True)
            if not bd:
                claims.append(f"no backdoor path from {a} to {b}")
            elif all(C.path_is_blocked(g, p, given) for p in bd):
                claims += [f"backdoor path {p} is blocked given {fmt(given)}" for p in bd[:CAP]]
            else:
                break
        else:
            q = {"kind": "frontdoor_set", "treatment": x, "outcome": y}
            problem = {"graph": g.to_dict(), "query": q}
            qtext = f"frontdoor_set(treatment={x}, outcome={y})"
            return problem, trace(g, qtext, "frontdoor criterion", claims, fmt(z)), z
    return None


ATTACKS = {"backdoor_set": backdoor_attack, "dsep_set": dsep_attack, "ci_test": ci_attack,
           "frontdoor_set": frontdoor_attack}  # fmt: skip


def find_attacks(g: CausalGraph, kind: str, count: int, seed: int) -> list:
    rng = random.Random(seed)
    pairs = [(a, b) for a in g.nodes for b in g.nodes if a != b]
    rng.shuffle(pairs)
    found = []
    for x, y in pairs[:3_000]:
        if kind in ("dsep_set", "ci_test") and node_sort_key(x) > node_sort_key(y):
            continue
        if kind in ("backdoor_set", "frontdoor_set") and not C.has_directed_path(g, x, y):
            continue
        attack = ATTACKS[kind](g, x, y)
        if attack is not None:
            found.append(attack)
            if len(found) == count:
                break
    return found


def graphs():
    """Graphs far above the cap: BN structures and random DAGs (50-200 nodes)."""
    out = {name: load_network(name).graph for name in ("hailfinder", "win95pts", "andes")}
    out.update({f"random{n}": random_dag(n, seed=n) for n in (50, 120, 200)})
    return out


@pytest.fixture(scope="module")
def attack_pool():
    pool = []
    for label, g in graphs().items():
        for kind in ATTACKS:
            for problem, text, z in find_attacks(g, kind, 2, seed=len(label)):
                pool.append((label, kind, problem, text, z))
    return pool


def _legacy_certifies(problem, text, monkeypatch) -> bool:
    """The old rule (cap's worth of true paths suffices, whatever RESULT): the derivation passes."""
    with monkeypatch.context() as m:
        m.setattr(D, "_valid_beyond_cap", lambda *args, **kwargs: None)
        return score_trace(text, problem).derivation


def test_attack_pool_covers_every_kind_on_graphs_far_above_the_cap(attack_pool):
    kinds = {kind for _, kind, *_ in attack_pool}
    assert kinds == set(ATTACKS), kinds
    sizes = {len(p["graph"]["nodes"]) for _, _, p, _, _ in attack_pool}
    assert min(sizes) >= 50 and max(sizes) >= 200, sizes


def test_invalid_result_above_the_cap_gets_no_derivation_point(attack_pool, monkeypatch):
    for label, kind, problem, text, _ in attack_pool:
        # the attack is wrong by an independent oracle, and reaches the hole under the old rule
        assert not grade_answer(problem, text), (label, kind)
        assert _legacy_certifies(problem, text, monkeypatch), (label, kind)
        s = score_trace(text, problem)
        assert s.false_claims == 0 and s.claims >= CAP, (label, kind, s.reasons)
        assert not s.derivation and s.total <= 3, (label, kind, s.reasons)
        assert s.graph and s.query and s.strategy, (label, kind, s.reasons)
        assert "stand in for the rest only" in s.reasons["derivation"]


def test_check_derivation_refuses_the_invalid_set_directly(attack_pool):
    from faithgrpo.rewards.trace import parse_trace
    from faithgrpo.verifier.graphs.model import CausalGraph as G
    from faithgrpo.verifier.query_kinds import QUERY_KINDS

    for label, kind, problem, text, _ in attack_pool:
        t = parse_trace(text)
        g = G.from_dict(problem["graph"])
        value = QUERY_KINDS[kind].parse_answer(t.result)
        r = check_derivation(t.derivation, kind, problem["query"], value, g)
        assert not r.false and not r.passed, (label, kind)


def test_gold_traces_above_the_cap_still_score_six(attack_pool):
    seen = set()
    for label, kind, problem, _, _ in attack_pool:
        key = (label, kind)
        if key in seen:
            continue
        seen.add(key)
        # the same queries with a valid answer and the cap's worth of listed paths
        s = score_trace(gold_trace(problem, 0), problem)
        assert s.total == 6, (label, kind, s.reasons)


def test_ate_adjustment_set_above_the_cap_must_be_a_backdoor_set():
    """X <- Ai <- B <- U -> Y (i < 8) and X <- C <- U: {B} blocks 8 backdoor paths and misses one."""
    from faithgrpo.verifier.graphs.strata import stratum_table

    rng = random.Random(5)
    a = [f"A{i}" for i in range(CAP)]
    edges = (
        [("U", "B"), ("U", "C"), ("C", "X"), ("U", "Y"), ("X", "Y")]
        + [("B", v) for v in a]
        + [(v, "X") for v in a]
    )
    g = CausalGraph("DAG", ("U", "B", "C", *a, "X", "Y"), frozenset(edges)).validate()
    cpts = {}
    for v in g.nodes:
        parents = sorted(g.parents(v), key=node_sort_key)
        keys = [",".join(bits) for bits in itertools.product("01", repeat=len(parents))]
        cpts[v] = {"parents": parents, "p1": {k: round(rng.uniform(0.1, 0.9), 2) for k in keys}}
    psi_true = C.interventional_ate(cpts, "X", "Y")
    z = frozenset({"B"})
    assert not C.is_backdoor_set(g, "X", "Y", z)
    rows = stratum_table(cpts, "X", "Y", ["B"])
    psi_z = sum((p1 - p0) * pz for _, pz, p1, p0 in rows)
    threshold = round(min(psi_true, psi_z) - 0.2, 2)  # both on the "yes" side: the decision is right
    q = {"kind": "ate", "treatment": "X", "outcome": "Y", "threshold": threshold, "margin": 0.05}
    problem = {"graph": g.to_dict(), "query": q, "cpts": cpts}
    paths = _blocked(g, "X", "Y", z, backdoor=True)
    assert len(paths) == CAP
    claims = ["B is not a descendant of X"] + [f"backdoor path {p} is blocked given {{B}}" for p in paths]
    for (b,), pz, p1, p0 in rows:
        claims += [
            f"P(B={b}) = {pz:.4f}",
            f"P(Y=1 | X=1, B={b}) = {p1:.4f}",
            f"P(Y=1 | X=0, B={b}) = {p0:.4f}",
        ]
    claims.append(f"ψ = {psi_z:.4f}")
    text = trace(g, f"ate(treatment=X, outcome=Y, threshold={threshold:g}, margin=0.05)",
                 "backdoor adjustment formula", claims, "yes, Z = {B}")  # fmt: skip
    s = score_trace(text, problem)
    assert s.false_claims == 0 and not s.derivation and not s.result, s.reasons
    with pytest.MonkeyPatch.context() as m:
        m.setattr(D, "_valid_beyond_cap", lambda *args, **kwargs: None)
        assert score_trace(text, problem).derivation  # the old rule let it through
