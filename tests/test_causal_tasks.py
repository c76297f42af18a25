"""Tests for faithgrpo.tasks.causal (generators, reasoning-gym datasets, TRL rows) and tasks.stories.

Expectations are computed independently of the generator's own enumeration: valid answers by brute
force over all subsets with the textbook predicates, reachability by our own DFS, cycles by trying
every node sequence, the ATE by summing the truncated factorisation over every assignment.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import re
import sys
from collections import Counter, defaultdict

import numpy as np
import pytest
import reasoning_gym
from reasoning_gym.composite import DatasetSpec

from faithgrpo.rewards.outcome import outcome_reward
from faithgrpo.tasks.causal import datasets as causal_module
from faithgrpo.tasks.causal.datasets import (
    KIND_FAMILIES,
    YES_NO_KINDS,
    CausalGraphConfig,
    CausalGraphDataset,
    CausalStoryConfig,
    CausalStoryDataset,
)
from faithgrpo.tasks.causal.prompts import trace_instructions
from faithgrpo.tasks.causal.stories import THEMES
from faithgrpo.tasks.mix import TaskMixConfig, build_dataset, to_trl_row
from faithgrpo.verifier import graphs as C
from faithgrpo.verifier.graphs.edges import parse_graph
from faithgrpo.verifier.graphs.families import make_graph
from faithgrpo.verifier.graphs.model import CausalGraph
from faithgrpo.verifier.queries import grade_answer, normalize_answer
from faithgrpo.verifier.query_kinds import QUERY_KINDS
from faithgrpo.watchdog import run_with_deadline

FIND_ONE = ("backdoor_set", "frontdoor_set", "dsep_set", "msep_set", "mediator", "cycle")


def rows(cls, n, **kw):
    config_cls = CausalStoryConfig if cls is CausalStoryDataset else CausalGraphConfig
    ds = cls(config_cls(size=n, **kw))
    return [ds[i] for i in range(n)]


def problem_of(entry):
    return json.loads(entry["metadata"]["problem"])


def graph_of(problem):
    return CausalGraph.from_dict(problem["graph"])


# ---------------------------------------------------------------------------------------------
# independent oracles
def subsets(items):
    items = sorted(items)
    return [frozenset(c) for k in range(len(items) + 1) for c in itertools.combinations(items, k)]


def reach(g, start):
    seen, stack = set(), [start]
    while stack:
        for c in g.children(stack.pop()):
            if c not in seen:
                seen.add(c)
                stack.append(c)
    return seen


def brute_cycles(g):
    """Simple directed cycles by trying every node sequence (rotation-canonical)."""
    found = set()
    nodes = sorted(g.nodes)
    for k in range(2, len(nodes) + 1):
        for combo in itertools.combinations(nodes, k):
            first = combo[0]
            for rest in itertools.permutations(combo[1:]):
                seq = (first, *rest)
                if all((a, b) in g.directed for a, b in zip(seq, seq[1:] + seq[:1])):
                    found.add(seq)
    return found


def minimal_family(valid):
    return [z for z in valid if not any(w < z for w in valid)]


def brute_valid_answers(g, q):
    """All valid answers of a find-one query, by brute force (independent of valid_answers)."""
    kind = q["kind"]
    if kind == "mediator":
        x, y = q["treatment"], q["outcome"]
        return [m for m in g.nodes if m not in (x, y) and m in reach(g, x) and y in reach(g, m)]
    if kind == "cycle":
        return sorted(brute_cycles(g))
    if kind in ("backdoor_set", "frontdoor_set"):
        x, y = q["treatment"], q["outcome"]
        pool = g.node_set - {x, y}
        if kind == "frontdoor_set":
            return [z for z in subsets(pool) if C.is_frontdoor_set(g, x, y, z)]
        valid = [z for z in subsets(pool) if C.is_backdoor_set(g, x, y, z)]
    else:
        x, y = q["x"], q["y"]
        valid = [z for z in subsets(g.node_set - {x, y}) if C.m_separated(g, x, y, z)]
    return minimal_family(valid) if q.get("variant") == "minimal" else valid


def brute_ate(cpts, x, y):
    """P(y=1 | do(x=1)) - P(y=1 | do(x=0)) by summing the truncated factorisation over all assignments."""
    names = sorted(cpts)
    out = {}
    for xv in (0, 1):
        total = 0.0
        for values in itertools.product((0, 1), repeat=len(names)):
            a = dict(zip(names, values))
            if a[x] != xv:
                continue
            p = 1.0
            for v in names:
                if v == x:
                    continue
                spec = cpts[v]
                key = ",".join(str(a[u]) for u in spec["parents"])
                p1 = spec["p1"][key]
                p *= p1 if a[v] else 1 - p1
            total += p * a[y]
        out[xv] = total
    return out[1] - out[0]


# ---------------------------------------------------------------------------------------------
# determinism and shape
@pytest.mark.parametrize("cls", [CausalGraphDataset, CausalStoryDataset])
def test_same_seed_same_rows_and_different_seed_differs(cls):
    a, b = rows(cls, 12, seed=7), rows(cls, 12, seed=7)
    assert a == b
    c = rows(cls, 12, seed=8)
    assert [e["question"] for e in a] != [e["question"] for e in c]


_DIGEST_SCRIPT = """
import hashlib, json
from faithgrpo.tasks.causal import *
from faithgrpo.tasks.certificates.gold import gold_trace
h = hashlib.sha256()
for cls, cfg in ((CausalGraphDataset, CausalGraphConfig), (CausalStoryDataset, CausalStoryConfig)):
    d = cls(cfg(size=60, seed=4))
    for i in range(60):
        e = d[i]
        h.update(json.dumps(e, sort_keys=True).encode())
        h.update(gold_trace(e["metadata"]["problem"], i).encode())
print(h.hexdigest())
"""


@pytest.mark.slow
def test_rows_and_gold_traces_do_not_depend_on_the_hash_seed():
    # string hashing is randomised per process: nothing may iterate a set of names into the rng
    digests = set()
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = run_with_deadline([sys.executable, "-c", _DIGEST_SCRIPT], env=env, timeout=600)
        assert out.returncode == 0, out.log()
        digests.add(out.stdout.strip())
    assert len(digests) == 1


def test_graph_and_story_datasets_differ_for_the_same_seed():
    a = rows(CausalGraphDataset, 6, seed=3)
    b = rows(CausalStoryDataset, 6, seed=3)
    assert [problem_of(e)["graph"] for e in a] != [problem_of(e)["graph"] for e in b]


@pytest.mark.parametrize(
    ("cls", "lo", "hi"),
    [(CausalGraphDataset, 4, 8), (CausalStoryDataset, 4, 8), (CausalGraphDataset, 10, 12)],
)
def test_every_listed_answer_is_valid_and_rows_are_well_formed(cls, lo, hi):
    entries = rows(cls, 90 if hi <= 8 else 45, seed=11, min_nodes=lo, max_nodes=hi)
    mode = "constructed" if cls is CausalStoryDataset else "supplied"
    kinds = Counter()
    for e in entries:
        p = problem_of(e)
        g = graph_of(p)
        kinds[p["query"]["kind"]] += 1
        assert lo <= len(g.nodes) <= hi
        assert p["mode"] == mode == e["metadata"]["mode"]
        assert e["question"] == p["text"]
        assert e["metadata"]["source_dataset"] == cls.DATASET_NAME
        assert e["metadata"]["query_kind"] == p["query"]["kind"]
        assert g.kind in [
            {"random_dag": "DAG", "motifs": "DAG", "admg": "ADMG", "cyclic": "DG"}[f]
            for f in KIND_FAMILIES[p["query"]["kind"]]
        ]
        assert grade_answer(p, e["answer"]), (e["answer"], p)
        assert normalize_answer(p, e["answer"]) == e["answer"]  # canonical form
        assert ("cpts" in p) == (p["query"]["kind"] == "ate")
        assert "answer" not in p  # the scorer never gets a reference answer
        assert f"Query: {QUERY_KINDS[p['query']['kind']].name}(" in e["question"]
    assert set(kinds) == set(QUERY_KINDS)  # default: every applicable kind shows up


def test_graph_families_have_their_shapes():
    for family in ("random_dag", "motifs", "admg", "cyclic"):
        for seed in range(60):
            rng = random.Random(seed)
            n = rng.randint(4, 12)
            cfg = CausalGraphConfig(max_parents=2, max_bidirected=3, max_back_edges=2, edge_prob=0.6)
            g = make_graph(family, random.Random(seed).sample("ABCDEFGHJKLM", n), rng, cfg)
            assert len(g.nodes) == n
            und = {v: set() for v in g.nodes}
            for a, b in g.directed:
                und[a].add(b)
                und[b].add(a)
            seen, stack = {g.nodes[0]}, [g.nodes[0]]
            while stack:
                for w in und[stack.pop()] - seen:
                    seen.add(w)
                    stack.append(w)
            assert seen == set(g.nodes), "the directed part is weakly connected"
            if family == "cyclic":
                assert g.kind == "DG" and not g.is_acyclic()
            else:
                assert g.kind == ("ADMG" if family == "admg" else "DAG") and g.is_acyclic()
                assert max(len(g.parents(v)) for v in g.nodes) <= 2
            if family == "admg":
                assert 1 <= len(g.bidirected) <= 3


def test_cyclic_graphs_only_serve_cycle_and_directed_path():
    entries = rows(CausalGraphDataset, 80, seed=2, families=("cyclic", "random_dag"))
    for e in entries:
        p = problem_of(e)
        if p["graph"]["type"] == "DG":
            assert p["query"]["kind"] in ("cycle", "directed_path")
    kinds = {problem_of(e)["query"]["kind"] for e in entries}
    assert "cycle" in kinds and "backdoor_set" in kinds


def test_query_kinds_and_families_restrict_rows():
    entries = rows(CausalGraphDataset, 30, seed=4, query_kinds=("mediator", "ci_test"), families=("motifs",))
    assert {problem_of(e)["query"]["kind"] for e in entries} == {"mediator", "ci_test"}
    assert {e["metadata"]["family"] for e in entries} == {"motifs"}


# ---------------------------------------------------------------------------------------------
# find-one queries: at least two valid answers (brute force), varied listed answers
def test_find_one_queries_have_at_least_two_valid_answers_by_brute_force():
    entries = rows(CausalGraphDataset, 120, seed=5, query_kinds=FIND_ONE, max_nodes=7)
    entries += rows(CausalStoryDataset, 60, seed=5, query_kinds=FIND_ONE, max_nodes=7)
    per_kind = Counter()
    for e in entries:
        p = problem_of(e)
        g, q = graph_of(p), p["query"]
        valid = brute_valid_answers(g, q)
        assert len(valid) >= 2, (q, g.edge_text(), valid)
        kind = QUERY_KINDS[q["kind"]]
        listed = kind.parse_answer(e["answer"])
        if q["kind"] == "cycle":
            assert any(set(listed) == set(c) and len(c) == len(listed) for c in valid)
        else:
            assert listed in valid
        per_kind[q["kind"]] += 1
    assert set(per_kind) == set(FIND_ONE)


def test_minimal_variants_appear_and_maximal_is_refused():
    entries = rows(CausalGraphDataset, 60, seed=9, query_kinds=("backdoor_set", "dsep_set", "msep_set"))
    variants = Counter(problem_of(e)["query"]["variant"] for e in entries)
    assert variants["any"] > 0 and variants["minimal"] > 0
    with pytest.raises(ValueError, match="maximal"):
        CausalGraphConfig(set_variants=("maximal",)).validate()


def test_listed_answer_is_not_always_the_smallest():
    entries = rows(
        CausalGraphDataset, 120, seed=13, query_kinds=("backdoor_set", "dsep_set", "frontdoor_set")
    )
    not_smallest = 0
    for e in entries:
        p = problem_of(e)
        valid = brute_valid_answers(graph_of(p), p["query"])
        smallest = min(valid, key=lambda z: (len(z), sorted(z)))
        not_smallest += QUERY_KINDS[p["query"]["kind"]].parse_answer(e["answer"]) != smallest
    assert not_smallest >= len(entries) // 4


def test_adjustment_queries_mostly_need_adjusting():
    # the generator prefers confounded pairs: the empty set is not a valid backdoor set there
    entries = rows(CausalGraphDataset, 60, seed=19, query_kinds=("backdoor_set",), max_nodes=7)
    confounded = 0
    for e in entries:
        p = problem_of(e)
        g, q = graph_of(p), p["query"]
        assert q["treatment"] in g.ancestors(q["outcome"])
        confounded += frozenset() not in brute_valid_answers(g, {**q, "variant": "any"})
    assert confounded >= 0.8 * len(entries)


# ---------------------------------------------------------------------------------------------
# yes/no balance and ATE certificates
def test_yes_no_queries_are_balanced():
    entries = rows(CausalGraphDataset, 360, seed=21, query_kinds=YES_NO_KINDS)
    entries += rows(CausalStoryDataset, 120, seed=21, query_kinds=YES_NO_KINDS)
    by_kind = defaultdict(list)
    for e in entries:
        p = problem_of(e)
        g, q = graph_of(p), p["query"]
        if q["kind"] == "ci_test":
            truth = C.m_separated(g, q["x"], q["y"], q["given"])
        elif q["kind"] == "directed_path":
            truth = q["outcome"] in reach(g, q["treatment"])
        else:
            truth = brute_ate(p["cpts"], q["treatment"], q["outcome"]) > q["threshold"]
        parsed = QUERY_KINDS[q["kind"]].parse_answer(e["answer"])
        assert (parsed[0] if q["kind"] == "ate" else parsed) == truth
        by_kind[q["kind"]].append(truth)
    for kind, truths in by_kind.items():
        share = sum(truths) / len(truths)
        assert len(truths) >= 100 and 0.38 <= share <= 0.62, (kind, share, len(truths))


def test_ate_problems_carry_a_strict_certificate():
    entries = rows(CausalGraphDataset, 40, seed=17, query_kinds=("ate",), max_nodes=7)
    for e in entries:
        p = problem_of(e)
        g, q, cpts = graph_of(p), p["query"], p["cpts"]
        C.validate_cpts(cpts, g)
        psi = brute_ate(cpts, q["treatment"], q["outcome"])
        assert abs(psi - q["threshold"]) > q["margin"] == 0.05
        assert all(0.05 <= v <= 0.95 for spec in cpts.values() for v in spec["p1"].values())
        z = C.minimal_backdoor_set(g, q["treatment"], q["outcome"])
        ok, reason = C.ate_certificate(g, cpts, q["treatment"], q["outcome"], z, q["threshold"], q["margin"])
        assert ok, reason
        assert q["treatment"] in g.ancestors(q["outcome"])
        assert grade_answer(p, f"{'yes' if psi > q['threshold'] else 'no'}, ψ = {psi:.4f}")


# ---------------------------------------------------------------------------------------------
# story mode
def test_story_hides_the_edge_list_but_mentions_every_edge():
    for e in rows(CausalStoryDataset, 60, seed=23, max_nodes=10):
        p = problem_of(e)
        g = graph_of(p)
        text = e["question"]
        for arrow in ("->", "<-", "→", "←", "↔"):
            assert arrow not in text
        full_prompt = to_trl_row(e)["prompt"]
        joined = "\n".join(m["content"] for m in full_prompt)
        for a, b in g.directed:
            assert f"{a} -> {b}" not in joined and f"{a}->{b}" not in joined
        story = text.split("\n")[0]
        sentences = [s for s in re.split(r"(?<=\.)\s+", story) if s]
        words = [set(re.findall(r"[A-Za-z]+", s)) for s in sentences]
        for a, b in g.directed | g.bidirected:
            assert any(a in w and b in w for w in words), (a, b, story)
        for a, b in g.bidirected:
            assert any(
                a in w and b in w and re.search(r"unmeasured|unobserved|hidden", s)
                for s, w in zip(sentences, words)
            )
        assert any(set(g.nodes) <= w for w in words), "the opening lists every variable"
        theme = next(t for t in THEMES if t.name == e["metadata"]["theme"])
        assert set(g.nodes) <= set(theme.variables)


def test_supplied_mode_shows_the_exact_graph():
    for e in rows(CausalGraphDataset, 30, seed=29):
        p = problem_of(e)
        g = graph_of(p)
        edges_line = next(line for line in e["question"].splitlines() if line.startswith("Edges: "))
        assert parse_graph(edges_line[len("Edges: ") :], g.kind, nodes=g.nodes) == g


# ---------------------------------------------------------------------------------------------
# reasoning-gym integration
def test_create_dataset_and_score_answer():
    ds = reasoning_gym.create_dataset("causal_graph", size=8, seed=1)
    story = reasoning_gym.create_dataset("causal_story", size=4, seed=1, min_nodes=5, max_nodes=6)
    assert isinstance(ds, CausalGraphDataset) and isinstance(story, CausalStoryDataset)
    assert len(list(ds)) == 8
    for entry in [*ds, *story]:
        assert set(entry) >= {"question", "answer", "metadata"}
        assert ds.score_answer(entry["answer"], entry) == 1.0
        assert ds.score_answer(None, entry) == 0.0
        assert ds.score_answer("maybe {{ ??", entry) == 0.0
        p = problem_of(entry)
        g, q = graph_of(p), p["query"]
        kind = QUERY_KINDS[q["kind"]]
        if kind.answer_type == "yes_no":
            wrong = "no" if kind.parse_answer(entry["answer"]) else "yes"
        elif kind.answer_type == "ate":
            wrong = "no" if kind.parse_answer(entry["answer"])[0] else "yes"
        elif kind.answer_type == "set":
            valid = set(brute_valid_answers(g, q))
            wrong = kind.format_answer(next(z for z in subsets(g.nodes) if z not in valid))
        elif kind.answer_type == "node":
            wrong = next(v for v in g.nodes if v not in brute_valid_answers(g, q))
        else:
            wrong = " -> ".join(sorted(g.nodes)[:2] * 2)  # A -> B -> A -> B: never a simple cycle listing
        assert ds.score_answer(wrong, entry) == 0.0, (wrong, q)
    assert reasoning_gym.get_score_answer_fn("causal_story")(ds[0]["answer"], ds[0]) == 1.0


def test_composite_mixture_with_knights_and_knaves():
    specs = [
        DatasetSpec(name="causal_graph", weight=1.0, config={"max_nodes": 6}),
        DatasetSpec(name="causal_story", weight=1.0, config={"max_nodes": 6}),
        DatasetSpec(name="knights_knaves", weight=1.0, config={}),
    ]
    comp = reasoning_gym.create_dataset("composite", size=24, seed=3, datasets=specs)
    sources = Counter()
    for i in range(len(comp)):
        entry = comp[i]
        sources[entry["metadata"]["source_dataset"]] += 1
        assert comp.score_answer(entry["answer"], entry) == 1.0
    assert set(sources) == {"causal_graph", "causal_story", "knights_knaves"}


def test_registration_is_idempotent():
    causal_module._register()  # a second import path or a reload registers again: no error
    assert reasoning_gym.create_dataset("causal_graph", size=1, seed=0)[0]["answer"]


# ---------------------------------------------------------------------------------------------
# TRL rows
def test_to_trl_row_for_causal_entries():
    entry = CausalGraphDataset(CausalGraphConfig(size=3, seed=6))[2]
    row = to_trl_row(entry)
    p = problem_of(entry)
    assert row["prompt"] == [
        {"role": "system", "content": trace_instructions(p["query"]["kind"])},
        {"role": "user", "content": entry["question"]},
    ]
    assert row["answer"] == entry["answer"] and row["entry"] is None and row["task"] == "causal_graph"
    assert json.loads(row["problem"]) == p
    assert to_trl_row(entry, system_prompt="S")["prompt"][0] == {"role": "system", "content": "S"}


def test_to_trl_row_for_reasoning_gym_entries_converts_numpy_and_tuples():
    kk = reasoning_gym.create_dataset("knights_knaves", size=2, seed=1)[0]
    row = to_trl_row(kk)
    assert row["problem"] is None and row["task"] == "knights_knaves"
    back = json.loads(row["entry"])
    assert back["metadata"]["source_dataset"] == "knights_knaves"
    assert back["metadata"]["statements"] == json.loads(json.dumps(kk["metadata"]["statements"]))
    assert "STATEMENTS" in row["prompt"][0]["content"]  # the Knights & Knaves trace format

    fake = {
        "question": "q",
        "answer": np.int64(7),
        "metadata": {
            "source_dataset": "basic_arithmetic",
            np.int64(3): np.float32(0.5),
            "arr": np.array([[1, 2], [3, 4]]),
            "s": np.str_("x"),
            "flag": np.bool_(True),
            "pair": (1, (2, 3)),
            "bag": {2, 1},
        },
    }
    row = to_trl_row(fake)
    assert row["answer"] == "7"
    meta = json.loads(row["entry"])["metadata"]
    assert meta == {
        "source_dataset": "basic_arithmetic",
        "3": 0.5,
        "arr": [[1, 2], [3, 4]],
        "s": "x",
        "flag": True,
        "pair": [1, [2, 3]],
        "bag": [1, 2],
    }
    assert "<answer>" in row["prompt"][0]["content"]


def test_build_dataset_mixture_has_uniform_columns_and_gradable_rows():
    config = TaskMixConfig(size=30, seed=5, causal={"max_nodes": 6}, mixture={"knights_knaves": 0.5})
    ds = build_dataset(config)
    assert ds.column_names == ["prompt", "answer", "problem", "entry", "task"]
    assert len(ds) == 30
    tasks = Counter(ds["task"])
    assert set(tasks) == {"causal_graph", "causal_story", "knights_knaves"}
    for row in ds:
        causal = row["task"].startswith("causal_")
        assert (row["problem"] is not None) == causal and (row["entry"] is not None) == (not causal)
        assert [m["role"] for m in row["prompt"]] == ["system", "user"]
    # the outcome reward grades the listed answers of every kind of row as correct
    # (TRL hands reward functions plain lists of column values)
    rewards = outcome_reward(
        [f"<answer>{a}</answer>" for a in ds["answer"]], problem=list(ds["problem"]), entry=list(ds["entry"])
    )
    assert rewards == [1.0] * len(ds)
    again = build_dataset(
        TaskMixConfig(size=30, seed=5, causal={"max_nodes": 6}, mixture={"knights_knaves": 0.5})
    )
    assert again.to_list() == ds.to_list()
    assert build_dataset({"size": 30, "seed": 6, "causal": {"max_nodes": 6}}).to_list() != ds.to_list()


def test_build_dataset_from_a_generator_config_and_story_fraction():
    ds = build_dataset(CausalStoryConfig(size=5, seed=1, max_nodes=5))
    assert set(ds["task"]) == {"causal_story"} and all(
        json.loads(p)["mode"] == "constructed" for p in ds["problem"]
    )
    only_graph = build_dataset(TaskMixConfig(size=10, seed=1, story_fraction=0.0, causal={"max_nodes": 5}))
    assert set(only_graph["task"]) == {"causal_graph"}


# ---------------------------------------------------------------------------------------------
# configuration errors
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"size": 0}, "size must be a positive integer"),
        ({"min_nodes": 3}, r"min_nodes must be an integer in 4\.\.12"),
        ({"max_nodes": 13}, r"max_nodes must be an integer in 4\.\.12"),
        ({"min_nodes": 9, "max_nodes": 5}, "must be <= max_nodes"),
        ({"families": ("trees",)}, "unknown graph families"),
        ({"families": ()}, "families must name at least one"),
        ({"query_kinds": ("causal_magic",)}, "unknown query kinds"),
        ({"query_kinds": ()}, "query_kinds must not be empty"),
        ({"query_kinds": ("cycle",), "families": ("random_dag",)}, "add one to families"),
        ({"query_kinds": ("msep_set",), "families": ("motifs",)}, "needs one of the families"),
        ({"edge_prob": 1.5}, "edge_prob"),
        ({"edge_prob": True}, "edge_prob"),
        ({"max_parents": 1}, "max_parents"),
        ({"max_bidirected": 0}, "max_bidirected"),
        ({"set_variants": ("any", "largest")}, "set_variants"),
        ({"ate_margin": -0.1}, "ate_margin"),
        ({"mode": "hidden"}, "mode must be one of"),
        ({"max_attempts": 2}, "max_attempts"),
        ({"seed": "seven"}, "seed must be an integer"),
    ],
)
def test_config_validation_names_the_fix(kwargs, message):
    with pytest.raises(ValueError, match=message):
        CausalGraphConfig(**kwargs).validate()
    with pytest.raises(ValueError, match=message):
        reasoning_gym.create_dataset("causal_graph", **kwargs)


def test_config_accepts_lists_from_yaml_and_defaults_to_applicable_kinds():
    cfg = CausalGraphConfig(families=["cyclic"], query_kinds=None)
    cfg.validate()
    assert cfg.families == ("cyclic",) and set(cfg.kinds()) == {"cycle", "directed_path"}
    assert set(CausalGraphConfig(families=["admg"]).kinds()) == {
        k for k, fams in KIND_FAMILIES.items() if "admg" in fams
    }


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"size": -1}, "size must be a positive integer"),
        ({"story_fraction": 1.5}, "story_fraction"),
        ({"causal": {"colour": 1}}, "causal has unknown fields"),
        ({"causal": {"max_nodes": 20}}, "max_nodes"),
        ({"mixture": {"no_such_task": 1.0}}, "unknown reasoning-gym dataset"),
        ({"mixture": {"causal_graph": 1.0}}, "set causal_weight"),
        ({"mixture": {"knights_knaves": -1}}, "mixture weight"),
        ({"mixture_configs": {"knights_knaves": {}}}, "not in mixture"),
        ({"causal_weight": 0}, "nothing to sample"),
    ],
)
def test_task_mix_validation(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TaskMixConfig(**kwargs).validate()


def test_generation_failure_names_the_fix(monkeypatch):
    monkeypatch.setitem(causal_module._BUILDERS, "mediator", lambda *a: None)
    ds = CausalGraphDataset(CausalGraphConfig(size=1, seed=0, query_kinds=("mediator",), max_attempts=10))
    with pytest.raises(RuntimeError, match="drop 'mediator' from query_kinds"):
        ds[0]
