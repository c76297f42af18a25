"""``causal_bn``: causal questions on the published Bayesian networks pgmpy bundles (issue 29).

* the networks are read offline from pgmpy's wheel, and their structure matches an independent
  reading of the BIF text (a regular expression over its ``probability ( child | parents )`` lines);
* the dataset is registered with reasoning-gym, deterministic, draws every kind each network admits
  in both renderings (edge list; story over the network's own variable names);
* the query predicates on these structures agree with an independent networkx oracle
  (``nx.is_d_separator``, ``nx.is_minimal_d_separator``, reachability; brute force over subsets for
  minimality of front-door sets), on the listed answers, every enumerated valid answer and on
  invalid candidates;
* gold traces score 6/6 on every network and kind, with certificates bounded by the path cap.
"""

from __future__ import annotations

import gzip
import itertools
import json
import random
import re

import networkx as nx
import pytest
import reasoning_gym

from faithgrpo.rewards.calver.reward import score_trace
from faithgrpo.rewards.trace import parse_trace
from faithgrpo.tasks.bayesnets.datasets import BN_KINDS, CausalBNConfig, admitted_kinds, make_bn_problem
from faithgrpo.tasks.bayesnets.networks import DEFAULT_NETWORKS, NETWORKS, RENAMED, bif_path, load_network
from faithgrpo.tasks.certificates.gold import gold_trace
from faithgrpo.tasks.mix import to_trl_row
from faithgrpo.verifier.certificates.derivation import DEFAULT_MAX_PATHS
from faithgrpo.verifier.graphs.model import CausalGraph, node_sort_key
from faithgrpo.verifier.queries import grade_answer
from faithgrpo.verifier.query_kinds import QUERY_KINDS

CAP = DEFAULT_MAX_PATHS
_PROB_RE = re.compile(r"probability\s*\(\s*([A-Za-z0-9_]+)\s*(?:\|\s*([^)]*))?\)")


# ---------------------------------------------------------------------------------------------
# the networks
def _check_network(name: str) -> int:
    with gzip.open(bif_path(name), "rt", encoding="utf-8") as f:
        text = f.read()
    assert not text.startswith("version https://git-lfs"), name  # a real file, not an LFS pointer
    # independent structure: the BIF text's own probability blocks
    rename = RENAMED.get(name, {})
    edges, nodes = set(), set()
    for child, parents in _PROB_RE.findall(text):
        child = rename.get(child, child)
        nodes.add(child)
        edges |= {(rename.get(p.strip(), p.strip()), child) for p in parents.split(",") if p.strip()}
    assert len(nodes) == len(re.findall(r"^variable\s", text, re.MULTILINE)), name  # no two merged
    net = load_network(name)
    assert net.graph.node_set == nodes and net.graph.directed == edges, name
    assert net.graph.kind == "DAG"
    for v, (parents, table) in net.cpds.items():
        assert table.shape == (len(net.states[v]), *(len(net.states[u]) for u in parents))
        assert abs(table.sum(axis=0) - 1).max() < 1e-6, (name, v)
    return len(nodes)


def test_at_least_ten_networks_read_offline_from_pgmpy_s_wheel():
    assert len(DEFAULT_NETWORKS) >= 10 and set(DEFAULT_NETWORKS) <= set(NETWORKS)
    sizes = {name: _check_network(name) for name in DEFAULT_NETWORKS}
    assert min(sizes.values()) == 5 and sizes["andes"] == 223, sizes
    assert "TbOrCa" in load_network("asia").graph.node_set  # asia's "either", renamed
    assert sizes["hepar2"] == 70 and {"liver_edge", "edema"} <= load_network("hepar2").graph.node_set


def test_the_disk_cache_holds_what_bifreader_read(tmp_path, monkeypatch):
    from faithgrpo.tasks.bayesnets import networks as B

    monkeypatch.setenv("FAITHGRPO_CACHE", str(tmp_path))
    path = B.bif_path("survey")
    with open(path, "rb") as f:
        raw = f.read()
    states, cpds = B._read_bif("survey", path, gzip.decompress(raw).decode())
    cached = B._cache_path("survey", raw)
    assert cached.startswith(str(tmp_path)) and B._read_cache(cached) is None
    B._write_cache(cached, states, cpds)
    again = B._read_cache(cached)
    assert again is not None and again[0] == states
    assert again[1].keys() == cpds.keys()
    for v, (parents, table) in cpds.items():
        assert again[1][v][0] == parents and (again[1][v][1] == table).all()
    with open(cached, "wb") as f:  # a damaged file is read past, not trusted
        f.write(b"garbage")
    assert B._read_cache(cached) is None
    with pytest.raises(ValueError, match="is not BIF text"):
        B._read_bif("survey", path, "version https://git-lfs.github.com/spec/v1\noid sha256:ab\n")


@pytest.mark.slow
def test_the_networks_outside_the_default_set_load_too():
    for name in sorted(set(NETWORKS) - set(DEFAULT_NETWORKS)):
        assert _check_network(name) > 100


def test_bad_network_names_and_configs_get_clear_errors():
    with pytest.raises(ValueError, match="unknown network 'nope'"):
        load_network("nope")
    with pytest.raises(ValueError, match="unknown networks"):
        reasoning_gym.create_dataset("causal_bn", size=2, seed=0, networks=["alarm", "nope"])
    with pytest.raises(ValueError, match="acyclic"):
        reasoning_gym.create_dataset("causal_bn", size=2, seed=0, query_kinds=["cycle"])
    with pytest.raises(ValueError, match="modes"):
        reasoning_gym.create_dataset("causal_bn", size=2, seed=0, modes=["story"])
    with pytest.raises(ValueError, match="ate_max_variables"):
        reasoning_gym.create_dataset("causal_bn", size=2, seed=0, ate_max_variables=40)
    with pytest.raises(ValueError, match="set_variants"):
        reasoning_gym.create_dataset("causal_bn", size=2, seed=0, set_variants=["maximal"])
    cfg = CausalBNConfig(networks=("cancer",), query_kinds=("mediator",))  # cancer has no two mediators
    with pytest.raises(ValueError, match="admits any of the query kinds"):
        make_bn_problem(cfg, random.Random(0))


# ---------------------------------------------------------------------------------------------
# the dataset
def test_dataset_is_registered_deterministic_and_renders_both_ways():
    a = reasoning_gym.create_dataset("causal_bn", size=24, seed=5)
    b = reasoning_gym.create_dataset("causal_bn", size=24, seed=5)
    rows = [a[i] for i in range(len(a))]
    assert rows == [b[i] for i in range(len(b))]
    modes = {r["metadata"]["mode"] for r in rows}
    assert modes == {"supplied", "constructed"}
    for r in rows:
        meta = r["metadata"]
        problem = json.loads(meta["problem"])
        assert set(problem) <= {"graph", "query", "cpts", "text", "mode"}
        assert meta["network"] in DEFAULT_NETWORKS and meta["query_kind"] == problem["query"]["kind"]
        assert grade_answer(problem, r["answer"]) and a.score_answer(r["answer"], r) == 1.0
        g = CausalGraph.from_dict(problem["graph"])
        if meta["mode"] == "constructed":
            assert "->" not in r["question"] and "Story:" in r["question"]
            assert all(v in r["question"] for v in g.nodes)  # the network's own names, every one
        else:
            assert g.edge_text() in r["question"]
        row = to_trl_row(r)  # the trace contract and the problem column, as for causal_graph
        assert row["problem"] == meta["problem"] and "GRAPH" in row["prompt"][0]["content"]


def test_every_default_network_admits_most_kinds():
    admitted = {name: admitted_kinds(name) for name in DEFAULT_NETWORKS}
    for name, kinds in admitted.items():
        assert {"backdoor_set", "dsep_set", "ci_test", "directed_path"} <= set(kinds), (name, kinds)
    # every kind is drawn on some network, and ate on at least ten of them
    assert set().union(*admitted.values()) == set(BN_KINDS)
    assert sum("ate" in k for k in admitted.values()) >= 10, admitted


# ---------------------------------------------------------------------------------------------
# predicates against an independent networkx oracle
def _nx(g: CausalGraph) -> nx.DiGraph:
    d = nx.DiGraph(list(g.directed))
    d.add_nodes_from(g.nodes)
    return d


def _cut(d: nx.DiGraph, v: str) -> nx.DiGraph:
    """``d`` without the edges out of ``v`` (backdoor paths from v are its paths)."""
    c = d.copy()
    c.remove_edges_from(list(d.out_edges(v)))
    return c


def oracle_backdoor(d, x, y, z) -> bool:
    return not (z & (nx.descendants(d, x) | {x, y})) and nx.is_d_separator(_cut(d, x), {x}, {y}, set(z))


def oracle_frontdoor(d, x, y, z) -> bool:
    if not z or z & {x, y}:
        return False
    rest = d.subgraph(set(d) - z)
    if nx.has_path(rest, x, y):  # (i) some directed path avoids Z
        return False
    for v in z:
        if not nx.is_d_separator(_cut(d, x), {x}, {v}, set()):  # (ii) an open backdoor path X ... v
            return False
        if not nx.is_d_separator(_cut(d, v), {v}, {y}, {x}):  # (iii) one v ... Y open given X
            return False
    return True


def oracle_valid(g: CausalGraph, q: dict, value) -> bool:
    d = _nx(g)
    kind, variant = q["kind"], q.get("variant", "any")
    if kind == "backdoor_set":
        x, y, z = q["treatment"], q["outcome"], frozenset(value)
        ok = oracle_backdoor(d, x, y, z)
        if ok and variant == "minimal":
            ok = nx.is_minimal_d_separator(_cut(d, x), {x}, {y}, set(z))
        return ok
    if kind == "frontdoor_set":
        x, y, z = q["treatment"], q["outcome"], frozenset(value)
        ok = oracle_frontdoor(d, x, y, z)
        if ok and variant == "minimal":
            ok = not any(
                oracle_frontdoor(d, x, y, frozenset(s))
                for k in range(1, len(z))
                for s in itertools.combinations(sorted(z), k)
            )
        return ok
    if kind in ("dsep_set", "msep_set"):
        x, y, z = q["x"], q["y"], set(value)
        if z & {x, y}:
            return False
        if variant == "minimal":
            return nx.is_minimal_d_separator(d, {x}, {y}, z)
        return nx.is_d_separator(d, {x}, {y}, z)
    if kind == "ci_test":
        return value == nx.is_d_separator(d, {q["x"]}, {q["y"]}, set(q["given"]))
    if kind == "directed_path":
        return value == nx.has_path(d, q["treatment"], q["outcome"])
    if kind == "mediator":
        x, y, m = q["treatment"], q["outcome"], value
        return m not in (x, y) and nx.has_path(d, x, m) and nx.has_path(d, m, y)
    raise AssertionError(kind)


def _candidates(g: CausalGraph, q: dict, rng: random.Random) -> list:
    """Answers to compare on: near the query's nodes (parents, children, ...) and a few random ones."""
    kind = q["kind"]
    if kind in ("ci_test", "directed_path"):
        return [True, False]
    ends = [q[r] for r in ("treatment", "outcome", "x", "y") if r in q]
    near = sorted({u for v in ends for u in g.parents(v) | g.children(v)} - set(ends), key=node_sort_key)
    others = sorted(g.node_set - set(ends), key=node_sort_key)
    if kind == "mediator":
        return near + rng.sample(others, min(6, len(others)))
    out = [frozenset(), frozenset(near)]
    for _ in range(10):
        pool = near if near and rng.random() < 0.7 else others
        out.append(frozenset(rng.sample(pool, min(len(pool), rng.randint(1, 3)))))
    return out


def _problems(name: str, kinds, per_kind: int, seed: int):
    for kind in kinds:
        cfg = CausalBNConfig(networks=(name,), query_kinds=(kind,))
        for i in range(per_kind):
            yield make_bn_problem(cfg, random.Random(f"{seed}:{name}:{kind}:{i}"))


@pytest.mark.parametrize("name", DEFAULT_NETWORKS)
def test_predicates_agree_with_a_networkx_oracle(name):
    rng = random.Random(name)
    kinds = [k for k in admitted_kinds(name) if k != "ate"]  # ate: tests/test_bn_ate.py (pgmpy)
    checked = 0
    for problem, answer, _ in _problems(name, kinds, 2, seed=1):
        g, q = CausalGraph.from_dict(problem["graph"]), problem["query"]
        qk = QUERY_KINDS[q["kind"]]
        assert oracle_valid(g, q, qk.parse_answer(answer)), (name, q, answer)
        for value in qk.valid_answers(g, q, limit=16, max_checks=512):
            assert oracle_valid(g, q, value), (name, q, value)
            checked += 1
        for value in _candidates(g, q, rng):
            assert qk.is_valid(g, q, value) == oracle_valid(g, q, value), (name, q, value)
            checked += 1
    assert checked >= 20


# ---------------------------------------------------------------------------------------------
# gold traces
def _path_groups(derivation: list[str]) -> dict:
    """Blocked-path claims per (ends, given set): each list a certificate names."""
    groups: dict = {}
    for line in derivation:
        m = re.search(r"path ([A-Za-z0-9_]+) .* ([A-Za-z0-9_]+) is blocked given (\{[^}]*\})", line)
        if m:
            groups.setdefault((frozenset(m.group(1, 2)), m.group(3)), []).append(line)
    return groups


@pytest.mark.parametrize("name", DEFAULT_NETWORKS)
def test_gold_traces_score_six_on_every_kind_with_bounded_certificates(name):
    kinds = admitted_kinds(name)
    seen = set()
    for problem, _, info in _problems(name, kinds, 2, seed=2):
        for seed in (0, 1):
            text = gold_trace(problem, seed)
            s = score_trace(text, problem)
            assert s.total == 6, (name, info["kind"], info["mode"], s.reasons)
            t = parse_trace(text)
            assert all(len(group) <= CAP for group in _path_groups(t.derivation).values())
            assert len(t.derivation) <= 8 * CAP, (name, info["kind"], len(t.derivation))
        seen.add(info["kind"])
    assert seen == set(kinds)


@pytest.mark.slow
@pytest.mark.parametrize("name", DEFAULT_NETWORKS)
def test_gold_traces_score_six_on_many_rows(name):
    ds = reasoning_gym.create_dataset("causal_bn", size=40, seed=17, networks=[name])
    for i in range(len(ds)):
        problem = json.loads(ds[i]["metadata"]["problem"])
        s = score_trace(gold_trace(problem, i), problem)
        assert s.total == 6, (name, problem["query"], s.reasons)


# ---------------------------------------------------------------------------------------------
# evaluation: faithgrpo eval --tasks causal_bn reads these rows like causal_graph's
def test_eval_reads_causal_bn_rows_with_calver_and_best_of_k_graders():
    from faithgrpo.eval.report.adapters import (
        CAUSAL_TASKS,
        answer_checker,
        check_task,
        cot_checker,
        task_rows,
    )
    from faithgrpo.rewards.selection import select_best_of_k

    check_task("causal_bn")
    assert "causal_bn" in CAUSAL_TASKS  # the CALVER check rates run on it
    rows = task_rows("causal_bn", 4, seed=3, config={"networks": ["asia", "alarm", "andes"]})
    for row in rows:
        gold = gold_trace(row["problem"], 0)
        problem = json.loads(row["problem"])
        wrong = None
        if problem["query"]["kind"] in ("ci_test", "directed_path"):
            flip = "no" if parse_trace(gold).answer.strip().lower().startswith("yes") else "yes"
            wrong = re.sub(r"^RESULT: .*$", f"RESULT: {flip}", gold, flags=re.MULTILINE)
            wrong = re.sub(r"<answer>.*</answer>", f"<answer>{flip}</answer>", wrong, flags=re.DOTALL)
        assert answer_checker(row)(gold) and cot_checker(row)(gold)
        assert not cot_checker(row)("<think>GRAPH: nothing</think><answer>{}</answer>")
        # best-of-K selection by CALVER picks the certified trace over prose
        prose = gold.split("DERIVATION:")[0] + "DERIVATION:\n- trust me\nRESULT:" + gold.split("RESULT:")[1]
        assert select_best_of_k([prose, gold], problem) == 1
        if wrong is not None:
            assert select_best_of_k([wrong, gold], problem) == 1
