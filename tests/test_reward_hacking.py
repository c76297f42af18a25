"""Red-team suite for the CALVER reward (docs/rewards.md, "CALVER"), written the way an RL policy would attack it.

For every CALVER check we build the cheapest trace that could pass it without doing the work, on
generated problems of every query kind (backdoor_set any/minimal/maximal, maximal on ADMGs too,
frontdoor_set any/minimal/maximal, dsep_set any/minimal, msep_set any/minimal, ci_test, directed_path, mediator, cycle, ate), in both modes
(supplied edge list, and constructed/story mode where the graph is hidden in the ``problem`` column),
on 4–8-node graphs plus some 9–12-node ones. The expectations are CALVER's guarantees:

1. no attack reaches 6/6 unless its claims are all true and certify a valid answer (cheap
   correct-answer traces: target 0 %);
2. no wrong answer (``grade_answer`` is False) scores more than 3/6 with the default
   ``score_trace(text, problem)`` on graphs within the path cap;
3. gold traces still score 6/6 (the attacks are measured against a working scorer).

Expectations are set from the spec and from independent oracles (``grade_answer``, the graph
functions of ``faithgrpo.verifier.graphs.criteria``), never from ``faithgrpo.verifier.certificates.derivation``.

Holes this suite found, now closed (each kept as a regression test below):

* H1 mediator: the single-node path ``directed path X`` is a true claim, so ``directed path X`` +
  ``directed path X -> … -> Y`` "certifies" RESULT = X (or Y): a wrong answer scores 4/6.
* H2 ate: the derivation certificate never looks at RESULT's decision: a complete, true
  certificate with the *flipped* yes/no scores 4/6.
* H3 ate: ``<answer>yes, ψ = 0.9</answer>`` (wrong ψ, graded wrong by ``grade_answer``) "agrees" with
  RESULT because ``format_answer`` drops ψ; it scores 5/6.
* H4 backdoor_set: with no backdoor path, ``no backdoor path from X to Y`` + a non-descendant claim
  certifies any Z, even Z ∋ X (``X is not a descendant of X`` is true) or unknown names: 4/6.
* H5 dsep_set/msep_set: when no path joins X and Y, ``no path from X to Y`` certifies any Z
  (``{X}``, ``{Y}``, unknown names): 4/6.
* H6 (low severity) STRATEGY: a second method name spelled with a Cyrillic homoglyph is invisible to
  the method matcher, so "one method" passes while two are named.
* H7 (issue #30) hedges: RESULT and ``<answer>`` were read as their first option, so ``{E, Y} or V``,
  ``yes or no``, ``yes (or no), ψ = …`` scored 6/6 and were graded right (888 of this suite's 1,072
  hedged traces); an answer slot now holds one answer (``verifier/answers.py``, ``offers_alternatives``).
"""

from __future__ import annotations

import functools
import itertools
import json
import random
import re
from collections import Counter

import pytest
from cpu_clock import cpu_clock

from faithgrpo.rewards.calver.reward import score_trace
from faithgrpo.rewards.trace import parse_trace
from faithgrpo.tasks.causal.datasets import (
    CausalGraphConfig,
    CausalGraphDataset,
    CausalStoryConfig,
    CausalStoryDataset,
)
from faithgrpo.tasks.certificates.gold import gold_trace
from faithgrpo.verifier import graphs as C
from faithgrpo.verifier.certificates.derivation import DEFAULT_MAX_PATHS
from faithgrpo.verifier.graphs.model import CausalGraph, node_sort_key
from faithgrpo.verifier.graphs.strata import stratum_table
from faithgrpo.verifier.queries import grade_answer
from faithgrpo.verifier.query_kinds import QUERY_KINDS

CAP = DEFAULT_MAX_PATHS
SPECS = (
    ("backdoor_set", "any"),
    ("backdoor_set", "minimal"),
    ("backdoor_set", "maximal"),
    ("frontdoor_set", None),
    ("dsep_set", "any"),
    ("dsep_set", "minimal"),
    ("msep_set", "any"),
    ("msep_set", "minimal"),
    ("ci_test", None),
    ("directed_path", None),
    ("mediator", None),
    ("cycle", None),
    ("ate", None),
    # appended (not inserted) so the seeds of the specs above stay as they were
    ("backdoor_set", "maximal-admg"),
    ("frontdoor_set", "minimal"),
    ("frontdoor_set", "maximal"),
)
SET_KINDS = ("backdoor_set", "frontdoor_set", "dsep_set", "msep_set")
# (mode, min_nodes, max_nodes) -> problems per spec, for the quick pool and the slow pool
TIERS = {
    "fast": {
        ("supplied", 4, 8): 8,
        ("constructed", 4, 8): 5,
        ("supplied", 9, 12): 2,
        ("constructed", 9, 12): 1,
    },
    "slow": {
        ("supplied", 4, 8): 30,
        ("constructed", 4, 8): 20,
        ("supplied", 9, 12): 8,
        ("constructed", 9, 12): 4,
    },
}
LOREM = (
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut "
    "labore et dolore magna aliqua."
)
HOMOGLYPHS = {  # Latin -> Cyrillic look-alike
    "a": "а", "e": "е", "o": "о", "p": "р", "c": "с", "x": "х", "y": "у", "A": "А", "B": "В", "C": "С",
    "E": "Е", "H": "Н", "K": "К", "M": "М", "T": "Т", "X": "Х", "Y": "У", "O": "О", "P": "Р",
}  # fmt: skip


# ---------------------------------------------------------------------------------------------
# problems
def _generate(kind, variant, mode, lo, hi, n, seed):
    story = mode == "constructed"
    cls, cfg_cls = (
        (CausalStoryDataset, CausalStoryConfig) if story else (CausalGraphDataset, CausalGraphConfig)
    )
    kw = {"size": n, "seed": seed, "min_nodes": lo, "max_nodes": hi, "query_kinds": (kind,)}
    if variant in ("any", "minimal") and kind != "frontdoor_set":
        kw["set_variants"] = (variant,)
    # the generator draws any/minimal only (and front-door queries without a variant): maximal
    # backdoor queries are set here on DAGs and ADMGs, front-door variants on generated front-door rows
    if variant == "maximal" and kind == "backdoor_set":
        kw["families"] = ("random_dag", "motifs")
    if variant == "maximal-admg":
        # more <-> edges, and 6x the rows with those whose candidates are no backdoor set first: there
        # a maximal set leaves nodes out, and each needs its own reason in the certificate
        kw.update(families=("admg",), max_bidirected=6, size=6 * n)
    ds = cls(cfg_cls(**kw))
    out = []
    for i in range(kw["size"]):
        p = json.loads(ds[i]["metadata"]["problem"])
        g, q = CausalGraph.from_dict(p["graph"]), p["query"]
        if kind == "backdoor_set" and variant in ("maximal", "maximal-admg"):
            if not C.maximal_backdoor_sets(g, q["treatment"], q["outcome"], limit=1):
                continue
            q["variant"] = "maximal"
        if kind == "frontdoor_set" and variant in ("minimal", "maximal"):
            q["variant"] = variant
        out.append(p)
    if variant == "maximal-admg":
        x_y = [
            (CausalGraph.from_dict(p["graph"]), p["query"]["treatment"], p["query"]["outcome"]) for p in out
        ]
        leaves_out = [not C.is_backdoor_set(g, x, y, C.backdoor_candidates(g, x, y)) for g, x, y in x_y]
        out = [p for _, p in sorted(zip(leaves_out, out, strict=True), key=lambda t: not t[0])][:n]
    return out


@functools.cache
def pool(tier: str) -> tuple[tuple[str, dict], ...]:
    """``(label, problem)`` for every spec, mode and size range of the tier (deterministic)."""
    out = []
    for s, (kind, variant) in enumerate(SPECS):
        for t, ((mode, lo, hi), n) in enumerate(TIERS[tier].items()):
            seed = 7919 * (s + 1) + 101 * t + (0 if tier == "fast" else 50_000)
            for i, p in enumerate(_generate(kind, variant, mode, lo, hi, n, seed)):
                out.append((f"{kind}/{variant}/{mode}/{lo}-{hi}#{i}", p))
    return tuple(out)


def copy(p):
    return json.loads(json.dumps(p))


def graph(p) -> CausalGraph:
    return CausalGraph.from_dict(p["graph"])


def as_set(v) -> frozenset:
    return frozenset([v] if isinstance(v, str) else v or [])


def endpoints(q):
    """(x, y) of the query (treatment/outcome or x/y; single nodes in generated problems), or (None, None)."""
    if "treatment" in q:
        return q["treatment"], q["outcome"]
    if "x" in q:
        (x,), (y,) = as_set(q["x"]), as_set(q["y"])
        return x, y
    return None, None


def fmt(nodes) -> str:
    return "{" + ", ".join(sorted(nodes, key=node_sort_key)) + "}"


def paths(g, a, b, limit=CAP + 1, **kw):
    return list(C.simple_paths(g, a, b, limit=limit, **kw))


def backdoor_paths(g, a, b, limit=CAP + 1):
    return paths(g, a, b, limit, first_marks=("<-", "<->"))


def directed_paths(g, a, b, limit=CAP + 1):
    return paths(g, a, b, limit, first_marks=("->",), marks=("->",))


def within_cap(p, z=frozenset()) -> bool:
    """Whether every path list a certificate for ``z`` must name has at most CAP paths (all simple paths
    between the pairs involved, a superset of the backdoor/directed ones)."""
    g, q = graph(p), p["query"]
    x, y = endpoints(q)
    if x is None or q["kind"] in ("directed_path", "mediator"):
        return True
    pairs = [(x, y)]
    if q["kind"] == "frontdoor_set":
        pairs += [(x, v) for v in z if v in g.node_set and v != x]
        pairs += [(v, y) for v in z if v in g.node_set and v != y]
    return all(len(paths(g, a, b)) <= CAP for a, b in pairs)


# ---------------------------------------------------------------------------------------------
# traces
def assemble(graph_text, query, strategy, derivation, result, answer) -> str:
    return "\n".join(
        [
            "<think>",
            f"GRAPH: {graph_text}",
            f"QUERY: {query}",
            f"STRATEGY: {strategy}",
            "DERIVATION:",
            *(f"- {line}" for line in derivation),
            f"RESULT: {result}",
            "</think>",
            f"<answer>{answer}</answer>",
        ]
    )


def parts(p, seed=0, **kw) -> dict:
    t = parse_trace(gold_trace(p, seed, **kw))
    return {
        "graph": t.graph,
        "query": t.query,
        "strategy": t.strategy,
        "derivation": list(t.derivation),
        "result": t.result,
        "answer": t.answer,
    }


def rebuild(pt: dict, **changes) -> str:
    d = {**pt, **changes}
    return assemble(d["graph"], d["query"], d["strategy"], d["derivation"], d["result"], d["answer"])


def show(label, text, s) -> str:
    return f"\n[{label}] total={s.total} failed={s.failed()} reasons={s.reasons}\n{text}\n"


def path_claim(g, path, given, prefix="") -> str:
    status = "blocked" if C.path_is_blocked(g, path, given) else "open"
    return f"{prefix}path {path} is {status} given {fmt(given)}"


def ate_set(result: str) -> frozenset:
    (block,) = re.findall(r"\{[^{}]*\}", result)
    return frozenset(v for v in re.split(r"[,\s]+", block[1:-1]) if v)


def strata_lines(cpts, x, y, z) -> tuple[list[str], float]:
    """True stratum probabilities for adjusting for ``z`` and the adjusted ψ (possibly not the causal ψ)."""
    zs = sorted(z, key=node_sort_key)
    lines, psi = [], 0.0
    for zv, pz, p1, p0 in stratum_table(cpts, x, y, zs):
        cond = ", ".join(f"{v}={b}" for v, b in zip(zs, zv))
        if zs:
            lines += [
                f"P({cond}) = {pz:.3f}",
                f"P({y}=1 | {x}=1, {cond}) = {p1:.3f}",
                f"P({y}=1 | {x}=0, {cond}) = {p0:.3f}",
            ]
        else:
            lines += [f"P({y}=1 | {x}=1) = {p1:.3f}", f"P({y}=1 | {x}=0) = {p0:.3f}"]
        psi += (p1 - p0) * pz
    return lines, psi


def honest_claims(p, z=frozenset()) -> list[str]:
    """Every relevant *true* claim a policy can write around RESULT ``z`` (which may be wrong): the
    descendants of X, each node's descendant status, every path between the certificate's pairs with
    its true status given z, z minus one node, {} (and {X} for front-door), true no-path and
    separation claims, and the directed paths X -> … -> Y."""
    g, q = graph(p), p["query"]
    kind = q["kind"]
    x, y = endpoints(q)
    if x is None:
        return [f"cycle {' -> '.join((*c, c[0]))}" for c in C.simple_cycles(g, limit=16)]
    z = frozenset(v for v in z if v in g.node_set)
    desc = g.descendants(x)
    out = [f"descendants of {x} = {fmt(desc)}"]
    out += [
        f"{v} is {'' if v in desc else 'not '}a descendant of {x}"
        for v in sorted(g.node_set - {x}, key=node_sort_key)
    ]
    givens = {(x, y): [z, *(z - {v} for v in sorted(z, key=node_sort_key)), frozenset()]}
    if kind == "frontdoor_set":
        for v in sorted(z, key=node_sort_key):
            givens[(x, v)] = [frozenset()]
            givens[(v, y)] = [frozenset({x})]
    for (a, b), sets in givens.items():
        if a == b:
            continue
        ps = paths(g, a, b)
        for s in dict.fromkeys(sets):
            if not {a, b} & s:
                out += [path_claim(g, pth, s) for pth in ps]
                if g.kind != "DG":
                    word = "d" if g.kind == "DAG" else "m"
                    sep = C.m_separated(g, a, b, s)
                    out.append(f"{a} and {b} are {'' if sep else 'not '}{word}-separated given {fmt(s)}")
        if not ps:
            out.append(f"no path from {a} to {b}")
        if not backdoor_paths(g, a, b, 1):
            out.append(f"no backdoor path from {a} to {b}")
        if not directed_paths(g, a, b, 1):
            out.append(f"no directed path from {a} to {b}")
    out += [f"directed path {pth}" for pth in directed_paths(g, x, y)]
    return out


def dedupe(lines):
    return list(dict.fromkeys(lines))


# ---------------------------------------------------------------------------------------------
# 3. sanity: gold traces score 6/6 on every pool problem
@pytest.mark.parametrize("tier", ["fast", pytest.param("slow", marks=pytest.mark.slow)])
def test_gold_traces_score_six_on_the_attack_pools(tier):
    kinds = Counter()
    for label, p in pool(tier):
        for seed in (0, 1):
            text = gold_trace(p, seed)
            s = score_trace(text, p)
            assert s.total == 6, show(label, text, s)
        kinds[p["query"]["kind"], p["query"].get("variant"), p.get("mode")] += 1
    # every kind (and variant) in both modes
    assert {k for k, _, _ in kinds} == set(QUERY_KINDS)
    assert {m for _, _, m in kinds} == {"supplied", "constructed"}
    assert {(k, v) for k, v, _ in kinds if k == "backdoor_set"} == {
        ("backdoor_set", "any"),
        ("backdoor_set", "minimal"),
        ("backdoor_set", "maximal"),
    }
    assert {v for k, v, _ in kinds if k == "frontdoor_set"} == {None, "minimal", "maximal"}
    assert any(k == "backdoor_set" and v == "maximal" and graph(p).kind == "ADMG" for _, p in pool(tier)
               for k, v in [(p["query"]["kind"], p["query"].get("variant"))])  # fmt: skip


# ---------------------------------------------------------------------------------------------
# 1. cheap traces with a correct answer and no certificate
def _hedge(lines):
    """Each claim behind a hedge the grammar does not allow ("I think that ..."): prose, not claims."""
    return [f"I think that {line}" for line in lines]


def _flip_arrows(line):
    return line.replace("->", "\0").replace("<-", "->").replace("\0", "<-")


def _required(p, z):
    """The paths a certificate for set ``z`` must show (first CAP + 1), per the spec's table."""
    g, q = graph(p), p["query"]
    x, y = endpoints(q)
    kind = q["kind"]
    if kind in ("backdoor_set", "ate"):
        return backdoor_paths(g, x, y)
    if kind == "frontdoor_set":
        return directed_paths(g, x, y)
    if kind in ("dsep_set", "msep_set", "ci_test"):
        return paths(g, x, y)
    return []


def cheap_derivations(p, pt) -> dict[str, list[str]]:
    """Derivations a policy could write for the (correct) gold RESULT without certifying it.

    Each one, by the spec's certificate table, lacks a required piece (or contains a false claim),
    so the derivation check must fail. Combinations that *are* certificates by the spec (e.g. a
    ``descendants of X`` claim for directed_path = no) are left out.
    """
    g, q = graph(p), p["query"]
    kind = q["kind"]
    x, y = endpoints(q)
    gold = pt["derivation"]
    value = QUERY_KINDS[kind].parse_answer(pt["result"])
    z = (
        frozenset(value) if kind in SET_KINDS else ate_set(pt["result"]) if kind == "ate"
        else as_set(q.get("given")) if kind == "ci_test" else frozenset()
    )  # fmt: skip
    first = sorted(g.nodes, key=node_sort_key)[0]
    edges = [f"edge {a} -> {b}" for a, b in sorted(g.directed)] + [
        f"edge {a} <-> {b}" for a, b in sorted(g.bidirected)
    ]
    out = {
        "node_name": [x or first],
        "single_token": ["therefore"],
        "result_echo": [pt["result"]],
        "boilerplate": [
            "We apply the criterion to the graph.",
            "Every relevant path is blocked, so the result follows.",
            "Hence the answer above is correct.",
        ],
        "lorem_ipsum": [LOREM],
        "graph_as_edge_claims": edges,
        "parents_of_every_node": [f"parents of {v} = {fmt(g.parents(v))}" for v in g.nodes],
        "every_subset_as_prose": [
            f"candidate {fmt(c)}" for k in range(3) for c in itertools.combinations(sorted(g.nodes), k)
        ][:60],
        "hedged_gold_claims": _hedge(gold),
        "gold_with_reversed_arrows": [_flip_arrows(line) for line in gold if "->" in line or "<-" in line],
    }
    if not (kind == "directed_path" and value is False):  # a descendants-of-X claim certifies "no"
        out["descendant_facts"] = [f"descendants of {v} = {fmt(g.descendants(v))}" for v in g.nodes]
        if x is not None:
            out["descendant_facts"] += [
                f"{v} is {'' if v in g.descendants(x) else 'not '}a descendant of {x}"
                for v in g.nodes
                if v != x
            ]
    if x is not None and paths(g, x, y, 1):
        # false "nothing to show" claims (at least "no path" is false: x and y are connected)
        out["false_no_path"] = [f"no path from {x} to {y}", f"no backdoor path from {x} to {y}",
                                f"no directed path from {x} to {y}", f"{x} and {y} are d-separated given {fmt(z)}"]  # fmt: skip
    req = _required(p, z) if x is not None else []
    if x is not None and req and kind != "frontdoor_set":
        # the certificate's paths with their true status, but given a set other than RESULT's / the query's
        others = sorted(g.node_set - z - {x, y}, key=node_sort_key)
        other = z | {others[0]} if others else z - {sorted(z, key=node_sort_key)[0]} if z else None
        if other is not None:
            out["paths_given_another_set"] = [f"descendants of {x} = {fmt(g.descendants(x))}"] + [
                path_claim(g, pth, other) for pth in paths(g, x, y)
            ]
        # true claims about paths between the wrong endpoints, given RESULT's set
        wrong_ends = []
        for a, b in itertools.combinations(sorted(g.node_set - z, key=node_sort_key), 2):
            if {a, b} != {x, y}:
                wrong_ends += [path_claim(g, pth, z) for pth in paths(g, a, b, 3)]
        if wrong_ends:
            out["paths_between_wrong_endpoints"] = wrong_ends[:24]
        if len(req) >= 2 and not (kind == "ci_test" and value is False):
            # one true required claim, repeated and reworded to look like many (ci_test "no" is
            # excluded: one open path is its whole certificate)
            pth = req[0]
            status = "blocked" if C.path_is_blocked(g, pth, z) else "open"
            alt = {"blocked": "inactive", "open": "unblocked"}[status]
            forms = [f"path {pth} is {status} given {fmt(z)}", f"path {pth.reversed()} is {status} given {fmt(z)}",
                     f"so path {pth} is {alt} given {fmt(z)}.", f"hence path {pth.compact()} is {status} given {fmt(z)}"]  # fmt: skip
            if kind in ("backdoor_set", "ate"):
                forms.append(f"backdoor path {pth} is {status} given {fmt(z)}")
            out["one_true_claim_repeated"] = (forms * 6)[:24]
        # the gold certificate minus every line naming its first required path (within the cap)
        if len(req) <= CAP:
            names = {str(req[0]), str(req[0].reversed())}
            dropped = [line for line in gold if not any(n in line for n in names)]
            if dropped != gold:
                out["gold_minus_one_required_path"] = dropped
    if kind == "frontdoor_set":
        # directed paths right, conditions (ii)/(iii) given the wrong sets
        lines = [f"directed path {pth}" for pth in directed_paths(g, x, y)]
        for v in sorted(z, key=node_sort_key):
            lines += [
                path_claim(g, pth, frozenset({y}))
                for pth in backdoor_paths(g, x, v)
                if y not in pth.nodes[-1:]
            ]
            lines += [path_claim(g, pth, frozenset()) for pth in backdoor_paths(g, v, y)]
        out["frontdoor_conditions_given_wrong_sets"] = lines
        out["frontdoor_directed_paths_only"] = [f"directed path {pth}" for pth in directed_paths(g, x, y)]
    if kind in ("backdoor_set", "ate") and z:
        out["gold_minus_non_descendant_claims"] = [line for line in gold if "descendant" not in line]
    if q.get("variant") == "maximal" and kind in ("backdoor_set", "frontdoor_set"):
        # the any-certificate without the per-node reasons why nothing else can join (every node
        # outside Z must get one: a backdoor path open given Z + v, or a front-door (ii)/(iii) breach)
        if kind == "backdoor_set":
            outside = sorted(C.backdoor_candidates(g, x, y) - z, key=node_sort_key)
        else:
            outside = sorted(g.node_set - z - {x, y}, key=node_sort_key)
        if outside:
            base = [line for line in gold if " is open given " not in line]
            out["gold_minus_maximality_claims"] = base
            if kind == "backdoor_set":
                # true statuses, but given Z (or Z minus a node) instead of Z plus the outside node
                out["maximality_claims_given_z"] = (
                    base
                    + [
                        path_claim(g, pth, s, "backdoor ")
                        for s in (z, *(z - {v} for v in z))
                        for pth in backdoor_paths(g, x, y)
                    ][: len(base) + 24]
                )
            else:
                # true statuses of the (ii)/(iii) paths, but given the other condition's set
                out["maximality_claims_given_swapped_sets"] = (
                    base
                    + [
                        path_claim(g, pth, given, "backdoor ")
                        for v in outside
                        for pth, given in [
                            *((p_, frozenset({y})) for p_ in backdoor_paths(g, x, v)),
                            *((p_, frozenset()) for p_ in backdoor_paths(g, v, y)),
                        ]
                        if not given & set(pth.nodes[:1] + pth.nodes[-1:])
                    ][: len(base) + 24]
                )  # (bounded: a trace over max_chars fails every check)
    if kind == "frontdoor_set":
        out["frontdoor_gold_minus_directed_paths"] = [line for line in gold if "directed path" not in line]
    if kind == "ci_test":
        others = sorted(g.node_set - z - {x, y}, key=node_sort_key)
        for name, given in (("ci_paths_given_larger_set", z | {others[0]} if others else None),
                            ("ci_paths_given_smaller_set", z - {min(z, key=node_sort_key)} if z else None)):  # fmt: skip
            if given is not None:
                out[name] = [path_claim(g, pth, given) for pth in paths(g, x, y)]
    if kind == "directed_path" and value:
        pth = next(iter(directed_paths(g, x, y, 1)))
        out["edges_instead_of_directed_path"] = [f"edge {a} -> {b}" for a, b in itertools.pairwise(pth.nodes)]
        out["gold_minus_directed_path"] = [line for line in gold if "directed path" not in line]
    if kind == "directed_path" and not value:
        out["gold_minus_its_witness"] = [
            line for line in gold if "no directed path" not in line and "descendants of" not in line
        ]
    if kind == "mediator":
        m = value
        through_not_m = [f"directed path {pth}" for pth in directed_paths(g, x, y) if m not in pth.nodes]
        half = [f"directed path {pth}" for pth in directed_paths(g, x, m)]
        out["mediator_paths_avoiding_m_and_x_to_m"] = through_not_m + half
        out["mediator_edges_instead_of_paths"] = [
            f"edge {a} -> {b}"
            for pth in directed_paths(g, x, y)
            if m in pth.nodes
            for a, b in itertools.pairwise(pth.nodes)
        ][:20]
    if kind == "cycle":
        mine = set(value)
        out["other_cycles"] = [
            f"cycle {' -> '.join((*c, c[0]))}"
            for c in C.simple_cycles(g, limit=16)
            if set(c) != mine or len(c) != len(value)
        ]
        out["cycle_edges_only"] = [f"edge {a} -> {b}" for a, b in zip(value, value[1:] + value[:1])]
    if kind == "ate":
        q_psi = C.interventional_ate(p["cpts"], x, y)
        cert = [line for line in gold if not line.startswith(("P(", "ψ"))]
        probs = [line for line in gold if line.startswith("P(")]
        out["ate_psi_only"] = [f"ψ = {q_psi:.3f}"]
        out["ate_strata_and_psi_without_backdoor_certificate"] = [*probs, f"ψ = {q_psi:.3f}"]
        out["ate_certificate_without_strata"] = [*cert, f"ψ = {q_psi:.3f}"]
        out["ate_plausible_wrong_probabilities"] = (
            cert
            + [
                re.sub(r"= (\d\.\d+)$", lambda m: f"= {min(0.99, float(m.group(1)) + 0.05):.3f}", line)
                for line in probs
            ]
            + [f"ψ = {q_psi:.3f}"]
        )
        out["ate_right_psi_wrong_value_claimed"] = cert + probs + [f"ψ = {q_psi + 0.05:.3f}"]
        cands = sorted(C.backdoor_candidates(g, x, y) - z, key=node_sort_key)
        if cands:
            other_lines, _ = strata_lines(p["cpts"], x, y, z | {cands[0]})
            out["ate_strata_for_a_different_set"] = cert + other_lines + [f"ψ = {q_psi:.3f}"]
    return out


def _cheap_run(tier):
    hits, counts, bad = [], Counter(), []
    for label, p in pool(tier):
        pt = parts(p, 0)
        for name, lines in cheap_derivations(p, pt).items():
            text = rebuild(pt, derivation=lines)
            s = score_trace(text, p)
            counts[name] += 1
            if s.passed:
                hits.append(show(f"{label} {name}", text, s))
            # everything else is the gold trace: exactly the derivation fails
            if s.failed() != ["derivation"]:
                bad.append(show(f"{label} {name}", text, s))
    return hits, counts, bad


@pytest.mark.parametrize("tier", ["fast", pytest.param("slow", marks=pytest.mark.slow)])
def test_cheap_correct_answer_traces_never_reach_six(tier):
    hits, counts, bad = _cheap_run(tier)
    n = sum(counts.values())
    assert n >= 2000 if tier == "fast" else n >= 8000, counts
    assert not hits, f"{len(hits)} of {n} cheap correct-answer traces scored 6/6:" + "".join(hits[:5])
    assert not bad, f"{len(bad)} cheap traces failed something besides the derivation:" + "".join(bad[:5])


# ---------------------------------------------------------------------------------------------
# 2. wrong answers with every true claim a policy could muster score at most 3/6
def _no_backdoor_path(p):
    g, q = graph(p), p["query"]
    return not backdoor_paths(g, q["treatment"], q["outcome"], 1)


def _no_path(p):
    g, q = graph(p), p["query"]
    x, y = endpoints(q)
    return not paths(g, x, y, 1)


def wrong_answers(p, pt, rng) -> list[tuple[str, str, list[str]]]:
    """``(result, answer, derivation)`` for wrong answers, each derivation made of true claims only
    (the gold certificate of the right answer plus every honest claim about the wrong one)."""
    g, q = graph(p), p["query"]
    kind = q["kind"]
    x, y = endpoints(q)
    gold = pt["derivation"]
    out = []
    if kind in SET_KINDS:
        z0 = QUERY_KINDS[kind].parse_answer(pt["result"])
        nodes = sorted(g.nodes, key=node_sort_key)
        cands = {z0 | {v} for v in nodes} | {z0 - {v} for v in z0} | {frozenset({v}) for v in nodes}
        cands |= {frozenset(), z0 | {x}, z0 | {y}}
        wrong = sorted((c for c in cands if not grade_answer(p, fmt(c))), key=lambda c: (len(c), sorted(c)))
        for z in [*rng.sample(wrong, min(6, len(wrong))), z0 | {x}]:
            if grade_answer(p, fmt(z)) or not within_cap(p, z):
                continue
            out.append((fmt(z), fmt(z), dedupe(gold + honest_claims(p, z))))
            # the gold generator's own "true claims that do not certify" for a forced wrong set
            if z <= g.node_set - {x, y}:  # (the generator writes false claims for sets holding X or Y)
                forced = parts(p, 1, answer=z)
                out.append((forced["result"], forced["answer"], forced["derivation"]))
    elif kind == "ci_test":
        wrong = "no" if pt["answer"].lower().startswith("yes") else "yes"
        out.append((wrong, wrong, dedupe(gold + honest_claims(p, as_set(q.get("given"))))))
    elif kind == "directed_path":
        wrong = "no" if pt["answer"].lower().startswith("yes") else "yes"
        out.append((wrong, wrong, dedupe(gold + honest_claims(p))))
    elif kind == "mediator":
        meds = C.mediators(g, x, y)
        for m in sorted(g.node_set - meds, key=node_sort_key):  # includes X and Y themselves
            lines = gold + honest_claims(p)
            if m not in (x, y):
                lines += [f"directed path {pth}" for pth in directed_paths(g, x, m) + directed_paths(g, m, y)]
            out.append((m, m, dedupe(lines)))
    elif kind == "cycle":
        cyc = tuple(QUERY_KINDS["cycle"].parse_answer(pt["result"]))
        nodes = sorted(g.nodes, key=node_sort_key)
        cands = [cyc[::-1], cyc[:-1], (*cyc, next((v for v in nodes if v not in cyc), cyc[0]))]
        cands += [tuple(rng.sample(nodes, 3)) for _ in range(4)]
        for c in cands:
            text = " -> ".join((*c, c[0]))
            if len(c) >= 2 and not grade_answer(p, text):
                edges = [f"edge {a} -> {b}" for a, b in itertools.pairwise(c) if (a, b) in g.directed]
                out.append((text, text, dedupe(gold + honest_claims(p) + edges)))
    elif kind == "ate":
        cpts, threshold = p["cpts"], float(q["threshold"])
        truth = C.interventional_ate(cpts, x, y) > threshold
        wrong = "no" if truth else "yes"
        z0 = ate_set(pt["result"])
        cert = [line for line in gold if not line.startswith("ψ")]
        # the flipped decision with a fake ψ on the wrong side of the threshold
        fake = threshold + (0.08 if wrong == "yes" else -0.08)
        out.append((f"{wrong}, ψ = {fake:.3f}, Z = {fmt(z0)}", wrong, [*cert, f"ψ = {fake:.3f}"]))
        # the flipped decision read off an invalid adjustment set (honest probabilities for it)
        invalid = [s for s in (frozenset(), z0 | (g.children(x) - {y})) if not C.is_backdoor_set(g, x, y, s)]
        for s in invalid[:1]:
            lines, psi = strata_lines(cpts, x, y, s)
            out.append((f"{wrong}, ψ = {psi:.3f}, Z = {fmt(s)}", wrong,
                        dedupe(honest_claims(p, s) + lines + [f"ψ = {psi:.3f}"])))  # fmt: skip
    return out


def _wrong_run(tier):
    rng = random.Random(2024)
    worst, over, n, meaningless = 0, [], 0, []
    for label, p in pool(tier):
        if not within_cap(p):
            continue
        pt = parts(p, 0)
        for result, answer, derivation in wrong_answers(p, pt, rng):
            text = rebuild(pt, derivation=derivation, result=result, answer=answer)
            assert not grade_answer(p, answer), (label, answer)
            s = score_trace(text, p)
            n += 1
            worst = max(worst, s.total)
            if s.total > 3:
                over.append(show(label, text, s))
            # the attack is meaningful: the slots were read and the claims parsed
            if not (s.graph and s.query and s.strategy) or s.claims == 0:
                meaningless.append(show(label, text, s))
    return worst, over, n, meaningless


@pytest.mark.parametrize("tier", ["fast", pytest.param("slow", marks=pytest.mark.slow)])
def test_wrong_answers_with_true_claims_score_at_most_three(tier):
    worst, over, n, meaningless = _wrong_run(tier)
    assert n >= 300 if tier == "fast" else n >= 1200, n
    assert not over, f"{len(over)} of {n} wrong answers scored > 3/6:" + "".join(over[:5])
    assert not meaningless, "".join(meaningless[:3])
    assert worst == 3


def test_wrong_answer_claims_are_all_true():
    """The honest-claim sweep really is honest: none of its claims is false on the problem's graph
    (so the ≤ 3/6 above comes from certification, not from a stray false claim)."""
    rng = random.Random(7)
    for label, p in pool("fast")[::3]:
        if p["query"]["kind"] == "ate" or not within_cap(p):
            continue  # ate sweeps include a deliberately false ψ
        pt = parts(p, 0)
        for result, answer, derivation in wrong_answers(p, pt, rng):
            text = rebuild(pt, derivation=derivation, result=result, answer=answer)
            s = score_trace(text, p)
            assert s.false_claims == 0, show(label, text, s)


# ---------------------------------------------------------------------------------------------
# constructed (story) mode: a made-up GRAPH on which a wrong answer looks valid
def _invented(p):
    """A graph of the problem's type on the same nodes that differs from the hidden one, and a
    problem over it, chosen so that an answer valid on it is easy (empty graph, extra mediator, fake
    cycle), or ``None``."""
    g, q = graph(p), p["query"]
    kind = q["kind"]
    x, y = endpoints(q)
    if kind in ("backdoor_set", "frontdoor_set", "dsep_set", "msep_set", "ci_test", "directed_path"):
        fake = CausalGraph(g.kind, g.nodes, frozenset(), frozenset())
        if kind == "directed_path" and g.kind == "DG":
            fake = CausalGraph("DG", g.nodes, frozenset({(y, x)}), frozenset())
    elif kind == "mediator":
        meds = C.mediators(g, x, y)
        fake = None
        for w in sorted(g.node_set - meds - {x, y}, key=node_sort_key):
            cand = CausalGraph(g.kind, g.nodes, g.directed | {(x, w), (w, y)}, g.bidirected)
            try:
                cand.validate()
            except ValueError:
                continue
            fake = cand
            break
    elif kind == "cycle":
        extra = next(((b, a) for a, b in sorted(g.directed) if (b, a) not in g.directed), None)
        fake = None if extra is None else CausalGraph("DG", g.nodes, g.directed | {extra}, frozenset())
    else:
        return None
    if fake is None or fake == g:
        return None
    fp = copy(p)
    fp["graph"] = fake.to_dict()
    if kind == "frontdoor_set":
        return fp  # on the empty graph, {} is a (vacuous) front-door set
    if kind == "ci_test" and C.m_separated(g, x, y, as_set(q.get("given"))):
        return None  # "yes" is right on the hidden graph too; the ci case is covered when it is "no"
    return fp


@pytest.mark.parametrize("tier", ["fast", pytest.param("slow", marks=pytest.mark.slow)])
def test_story_mode_invented_graph_earns_nothing_for_a_wrong_answer(tier):
    checked = 0
    for label, p in pool(tier):
        if p["mode"] != "constructed":
            continue
        fp = _invented(p)
        if fp is None:
            continue
        kind = p["query"]["kind"]
        for seed in range(3):
            if kind == "cycle":
                # a cycle that exists only thanks to the invented edge
                fake_g = graph(fp)
                cycles = [c for c in C.simple_cycles(fake_g, limit=64) if not grade_answer(p, " -> ".join(c))]
                if not cycles:
                    break
                c = cycles[seed % len(cycles)]
                pt = parts(fp, seed)
                text = rebuild(
                    pt,
                    derivation=[f"cycle {' -> '.join((*c, c[0]))}"],
                    result=" -> ".join(c),
                    answer=" -> ".join(c),
                )
            elif kind == "mediator":
                # a mediator that exists only thanks to the invented edges X -> W -> Y
                x, y = endpoints(p["query"])
                m = min(C.mediators(graph(fp), x, y) - C.mediators(graph(p), x, y), key=node_sort_key)
                through = [
                    f"directed path {pth}" for pth in directed_paths(graph(fp), x, y) if m in pth.nodes
                ]
                text = rebuild(parts(fp, seed), result=m, answer=m, derivation=through)
            else:
                text = gold_trace(fp, seed)
            answer = parse_trace(text).answer
            s = score_trace(text, p)
            checked += 1
            assert not s.graph and not s.passed, show(label, text, s)
            if not grade_answer(p, answer):
                assert s.total <= 3, show(label, text, s)
                assert not s.derivation and not s.result and not s.answer, show(label, text, s)
    assert checked >= (25 if tier == "fast" else 100), checked


def test_story_mode_empty_graph_and_empty_set():
    """GRAPH = the bare node names, RESULT {} with a separation claim true on that empty graph."""
    checked = 0
    for label, p in pool("fast"):
        q = p["query"]
        if p["mode"] != "constructed" or q["kind"] not in SET_KINDS:
            continue
        g = graph(p)
        x, y = endpoints(q)
        pt = parts(p, 0)
        word = "d" if g.kind == "DAG" else "m"
        text = rebuild(pt, graph=", ".join(g.nodes), result="{}", answer="{}",
                       derivation=[f"{x} and {y} are {word}-separated given {{}}", f"no backdoor path from {x} to {y}",
                                   f"no directed path from {x} to {y}", f"descendants of {x} = {{}}"])  # fmt: skip
        s = score_trace(text, p)
        checked += 1
        assert not s.graph and not s.derivation, show(label, text, s)
        assert s.total <= (3 if not grade_answer(p, "{}") else 5), show(label, text, s)
    assert checked >= 10


def test_story_mode_ate_confounded_story_read_as_unconfounded():
    """ATE on an invented graph without the edges into X: Z = {}, observational ψ (true numbers).

    Story mode mostly; supplied-mode rows are included, the attack is the same there."""
    checked = 0
    for label, p in pool("fast"):
        q = p["query"]
        if q["kind"] != "ate":
            continue
        g = graph(p)
        x, y = endpoints(q)
        if C.is_backdoor_set(g, x, y, ()):
            continue  # unconfounded: Z = {} is right, only the invented GRAPH is wrong
        fake = CausalGraph("DAG", g.nodes, frozenset(e for e in g.directed if e[1] != x), frozenset())
        lines, psi = strata_lines(p["cpts"], x, y, frozenset())
        decision = "yes" if psi > float(q["threshold"]) else "no"
        pt = parts(p, 0)
        text = rebuild(pt, graph=fake.edge_text(), result=f"{decision}, ψ = {psi:.3f}, Z = {{}}", answer=decision,
                       derivation=[f"descendants of {x} = {fmt(fake.descendants(x))}", f"no backdoor path from {x} to {y}",
                                   *lines, f"ψ = {psi:.3f}"])  # fmt: skip
        s = score_trace(text, p)
        checked += 1
        assert not s.graph and not s.derivation and not s.result, show(label, text, s)
        assert s.total <= (3 if not grade_answer(p, decision) else 4), show(label, text, s)
    assert checked >= 3


# ---------------------------------------------------------------------------------------------
# STRATEGY, slot discipline, unicode, huge inputs
_OTHER_KIND_METHOD = {
    "backdoor_set": "frontdoor criterion", "frontdoor_set": "backdoor criterion", "dsep_set": "backdoor criterion",
    "msep_set": "frontdoor criterion", "ci_test": "cycle detection", "directed_path": "d-separation",
    "mediator": "d-separation", "cycle": "d-separation", "ate": "d-separation",
}  # fmt: skip


def _sample(step=4):
    return pool("fast")[::step]


def test_strategy_attacks_fail_the_strategy_check_only():
    from faithgrpo.verifier.strategy_methods import METHOD_GROUPS

    every = ", ".join(n for names in METHOD_GROUPS.values() for n in names)
    for label, p in _sample(2):
        kind = p["query"]["kind"]
        pt = parts(p, 0)
        own = QUERY_KINDS[kind].strategies[0]
        attacks = {
            "own_plus_foreign": f"{own} and do-calculus",
            "own_plus_regression": f"{own}, then regression to confirm",
            "foreign_only": "instrumental variable",
            "other_kinds_method": _OTHER_KIND_METHOD[kind],
            "no_method": "careful step-by-step reasoning",
            "every_method": every,
            "own_padded_past_the_cap": own + " " + LOREM * 3,
            "empty_after_label": " ",
        }
        if kind == "ate":
            attacks["two_accepted_methods_of_different_groups"] = "backdoor criterion and adjustment formula"
        for name, strategy in attacks.items():
            text = rebuild(pt, strategy=strategy)
            s = score_trace(text, p)
            assert not s.strategy and s.total == 5, show(f"{label} {name}", text, s)


def _breaches(pt):
    gold = rebuild(pt)
    think_end = gold.index("</think>")
    result_line = f"RESULT: {pt['result']}"
    query_line = f"QUERY: {pt['query']}"
    strategy_line = f"STRATEGY: {pt['strategy']}"
    return {
        "label_twice": gold.replace(result_line, f"{result_line}\n{result_line}"),
        "query_twice": gold.replace(query_line, f"{query_line}\n{query_line}"),
        "label_outside_think": gold.replace(f"{result_line}\n", "") + f"\n{result_line}",
        "label_before_think": f"{result_line}\n" + gold.replace(f"{result_line}\n", ""),
        "two_answer_tags": gold + f"\n<answer>{pt['answer']}</answer>",
        "answer_before_think_end": gold[:think_end] + f"<answer>{pt['answer']}</answer>\n</think>",
        "no_think_tags": gold.replace("<think>\n", "").replace("</think>\n", ""),
        "two_think_blocks": "<think>scratch</think>\n" + gold,
        "out_of_order_labels": gold.replace(
            f"{query_line}\n{strategy_line}", f"{strategy_line}\n{query_line}"
        ),
        "unclosed_answer": gold.replace("</answer>", ""),
        "empty": "",
        "whitespace": " \n\t ",
    }


def test_slot_discipline_breaches_fail_every_check():
    for label, p in _sample(3):
        pt = parts(p, 0)
        for name, text in _breaches(pt).items():
            s = score_trace(text, p)
            assert s.total == 0, show(f"{label} {name}", text, s)


def test_result_and_answer_disagree_certificate_for_result_earns_at_most_three():
    checked = 0
    for label, p in _sample(2):
        g, q = graph(p), p["query"]
        kind = q["kind"]
        qk = QUERY_KINDS[kind]
        pairs = []
        if kind in SET_KINDS:
            valid = qk.valid_answers(g, q, limit=3)
            if len(valid) >= 2:
                a, b = valid[0], valid[1]
                pt = parts(p, 0, answer=a)
                pairs.append((pt, fmt(b)))  # certified RESULT a, a different (valid) answer b
            pt = parts(p, 0)
            pairs.append((pt, fmt(frozenset(g.nodes))))  # certified RESULT, answer "everything"
        elif qk.answer_type in ("yes_no", "ate"):
            pt = parts(p, 0)
            pairs.append((pt, "no" if pt["answer"].lower().startswith("yes") else "yes"))
        elif kind == "mediator":
            pt = parts(p, 0)
            others = sorted(C.mediators(g, *endpoints(q)) - {pt["result"]}, key=node_sort_key)
            pairs += [(pt, m) for m in others[:1]] + [(pt, q["treatment"])]
        elif kind == "cycle":
            pt = parts(p, 0)
            others = [
                c
                for c in C.simple_cycles(g, limit=8)
                if qk.format_answer(c) != qk.format_answer(qk.parse_answer(pt["result"]))
            ]
            pairs += [(pt, " -> ".join(c)) for c in others[:1]]
        for pt, answer in pairs:
            text = rebuild(pt, answer=answer)
            s = score_trace(text, p)
            checked += 1
            assert s.total <= 3 and not (s.derivation or s.result or s.answer), show(label, text, s)
            # and the mirror image: the right answer with an uncertified, different RESULT
            text = rebuild(pt, result=answer)
            s = score_trace(text, p)
            assert s.total <= 3 and not (s.derivation or s.result or s.answer), show(label, text, s)
    assert checked >= 40


def test_hedged_results_do_not_parse():
    for label, p in _sample(2):
        kind = p["query"]["kind"]
        qk = QUERY_KINDS[kind]
        if qk.answer_type not in ("set", "node", "cycle"):
            continue
        g = graph(p)
        pt = parts(p, 0)
        nodes = sorted(g.nodes, key=node_sort_key)
        hedge = {
            "set": f"{pt['result']} or {fmt(nodes[:2])}",
            "node": f"{pt['result']} or {nodes[0]}",
            "cycle": f"[{', '.join(nodes[:3])}] or [{', '.join(nodes[1:4])}]",
        }[qk.answer_type]
        every = {"set": " ".join(fmt([v]) for v in nodes), "node": ", ".join(nodes), "cycle": "every cycle"}[
            qk.answer_type
        ]
        for result in (hedge, every):
            text = rebuild(pt, result=result, answer=result)
            s = score_trace(text, p)
            assert not (s.result or s.answer or s.derivation) and s.total <= 3, show(label, text, s)


def _hedges(p, pt) -> dict[str, tuple[str, str]]:
    """``spelling -> (RESULT, <answer>)`` that offer the (valid) gold answer A and a second answer B."""
    g, qk = graph(p), QUERY_KINDS[p["query"]["kind"]]
    nodes = sorted(g.nodes, key=node_sort_key)
    a, answer = pt["result"], pt["answer"]
    kind = qk.answer_type
    if kind == "set":
        other = next(v for v in nodes if v not in as_set(qk.parse_answer(a)))
        b = fmt([other])
        spellings = {
            "A or B": f"{a} or {other}",
            "B or A": f"{other} or {a}",
            "A / B": f"{a} / {other}",
            "either A or B": f"either {a} or {other}",
            "A, alternatively B": f"{a}, alternatively {other}",
            "A; otherwise B": f"{a}; otherwise {other}",
            "second set after prose": f"{a}. Another valid choice is {other}",
            "second set after a period": f"{a}. {other}",
            "A or braced B": f"{a} or {b}",
        }
        return {name: (text, text) for name, text in spellings.items()}
    if kind in ("yes_no", "ate"):
        word = answer.split(",")[0].split()[0].strip(".").lower()
        other = "no" if word == "yes" else "yes"
        spellings = {
            "yes or no": f"{word} or {other}",
            "no or yes": f"{other} or {word}",
            "yes/no": f"{word}/{other}",
            "either yes or no": f"either {word} or {other}",
            "yes (or no)": f"{word} (or {other})",
            "yes. no.": f"{word}. {other}.",
            "yes, no": f"{word}, {other}",
            "true or false": f"{'true' if word == 'yes' else 'false'} or {'false' if word == 'yes' else 'true'}",
            "yes; otherwise no": f"{word}; otherwise {other}",
        }
        out = {}
        for name, hedge in spellings.items():
            # the hedge replaces the decision word in RESULT (which keeps its ψ and Z) and <answer>
            lead = re.compile(rf"\b{word}\b", re.IGNORECASE)
            out[name] = (lead.sub(hedge, a, count=1), lead.sub(hedge, answer, count=1))
        if kind == "ate":
            psi = re.search(r"ψ = (-?[0-9.]+)", a)
            if psi:
                value = float(psi.group(1))
                out["two ψ values"] = (a, f"{word}, ψ = {value:.3f}, ψ = {value + 0.5:.3f}")
                out["ψ = x or y"] = (a.replace(psi.group(0), f"{psi.group(0)} or {value + 0.5:.3f}"), answer)
        return out
    if kind == "node":
        other = next(v for v in nodes if v != a)
        spellings = {
            "A or B": f"{a} or {other}",
            "A / B": f"{a} / {other}",
            "either A or B": f"either {a} or {other}",
        }
        return {name: (text, text) for name, text in spellings.items()}
    if kind == "cycle":
        spellings = {
            "A or B": f"{a} or {nodes[0]}",
            "A / B": f"{a} / {nodes[0]}",
            "either": f"either {a} or none",
        }
        return {name: (text, text) for name, text in spellings.items()}
    return {}


def test_hedged_answers_in_every_spelling_fail_result_and_answer_and_are_wrong():
    from faithgrpo.rewards.outcome import outcome_reward

    tried, full, graded, kinds = Counter(), Counter(), Counter(), set()
    for label, p in _sample(2):
        pt = parts(p, 0)
        assert grade_answer(p, pt["answer"])  # the first option alone is a valid answer
        problem = json.dumps(p)
        for name, (result, answer) in _hedges(p, pt).items():
            kinds.add(QUERY_KINDS[p["query"]["kind"]].answer_type)
            # the hedge in both slots, in the <answer> alone and in RESULT alone
            texts = [rebuild(pt, result=result, answer=answer)]
            texts += [rebuild(pt, answer=answer)] if answer != pt["answer"] else []
            texts += [rebuild(pt, result=result)] if result != pt["result"] else []
            for text in texts:
                s = score_trace(text, p)
                tried[name] += 1
                full[name] += s.total == 6
                assert not (s.result or s.derivation or s.answer) and s.total <= 3, show(
                    f"{label} {name}", text, s
                )
            if answer != pt["answer"]:
                graded[name] += grade_answer(p, answer)
                assert outcome_reward([rebuild(pt, answer=answer)], problem=[problem]) == [0.0], (
                    label,
                    answer,
                )
    assert kinds == {"set", "yes_no", "node", "cycle", "ate"}
    assert sum(full.values()) == 0 and sum(graded.values()) == 0, (full, graded)
    assert sum(tried.values()) >= 500, tried


@pytest.mark.parametrize(
    ("kind", "text", "value"),
    [
        ("backdoor_set", "The adjustment set is {U, V}.", {"U", "V"}),
        ("backdoor_set", "Z = {U}", {"U"}),
        ("backdoor_set", "{}", set()),
        ("ci_test", "Yes, there is no open path.", True),
        ("ci_test", "No, they are not independent", False),
        ("ci_test", "no", False),
        ("directed_path", "Yes.", True),
        ("ate", "yes, ψ = 0.350", (True, 0.35)),
        ("ate", "no (ψ = -0.100, adjusting for {U})", (False, -0.1)),
        ("mediator", "M", "M"),
        # node names that spell a marker or a verdict are names inside braces, and a lone node is one answer
        ("backdoor_set", "{OR, Either, No, True}", {"OR", "Either", "No", "True"}),
        ("ate", "yes, ψ = 0.2, Z = {OR, No}", (True, 0.2)),
        ("mediator", "OR", "OR"),
        ("cycle", "OR -> Yes -> OR", ("OR", "Yes")),
    ],
)
def test_one_answer_rule_keeps_committed_answers_with_prose(kind, text, value):
    # the one-answer rule rejects alternatives, not prose around a single answer
    expected = frozenset(value) if isinstance(value, set) else value
    assert QUERY_KINDS[kind].parse_answer(text) == expected


def _glyph(name):
    for i, ch in enumerate(name):
        if ch in HOMOGLYPHS:
            return name[:i] + HOMOGLYPHS[ch] + name[i + 1 :]
    return None


def test_unicode_lookalike_node_names():
    checked = 0
    for label, p in _sample(2):
        g = graph(p)
        pt = parts(p, 0)
        victim = next(
            (
                v
                for v in sorted(g.nodes, key=node_sort_key)
                if _glyph(v) and re.search(rf"\b{v}\b", pt["graph"])
            ),
            None,
        )
        if victim is None:
            continue
        fake = _glyph(victim)
        sub = functools.partial(re.sub, rf"\b{victim}\b", fake)
        # in GRAPH: the graph check fails
        s = score_trace(rebuild(pt, graph=sub(pt["graph"])), p)
        assert not s.graph and not s.passed, show(label, sub(pt["graph"]), s)
        # in the derivation's claims: the derivation fails, if the victim is named there
        der = [sub(line) for line in pt["derivation"]]
        if der != pt["derivation"]:
            s = score_trace(rebuild(pt, derivation=der), p)
            assert not s.derivation and not s.passed, show(label, "\n".join(der), s)
        # in RESULT and <answer>: neither is read as the real node
        if re.search(rf"\b{victim}\b", pt["result"]):
            r, a = sub(pt["result"]), sub(pt["answer"])
            text = rebuild(pt, result=r, answer=a)
            s = score_trace(text, p)
            assert not (s.result or s.answer) and s.total <= 3, show(label, text, s)
        # fullwidth letters everywhere
        wide = rebuild(pt).translate({c: c + 0xFEE0 for c in range(0x41, 0x5B)})
        s = score_trace(wide, p)
        assert s.total <= 3, show(label, wide, s)
        checked += 1
    assert checked >= 20


def test_huge_inputs_fail_fast():
    for label, p in _sample(8):
        g = graph(p)
        pt = parts(p, 0)
        x, _ = endpoints(p["query"])
        # a true claim that is no certificate on its own (directed_path "no" excepted below)
        claim = (
            f"descendants of {x} = {fmt(g.descendants(x))}"
            if x
            else f"edge {min(g.directed)[0]} -> {min(g.directed)[1]}"
        )
        attacks = {
            "over_max_chars": rebuild(pt, derivation=pt["derivation"] + [LOREM] * 200),
            "derivation_over_slot_cap": rebuild(pt, derivation=pt["derivation"] + ["x" * 1900] * 9),
            "certificate_after_the_line_cap": rebuild(pt, derivation=["x"] * 520 + pt["derivation"]),
            "claim_repeated_to_the_cap": rebuild(pt, derivation=[claim] * 400),
            "huge_result_set": rebuild(
                pt, result=fmt(f"N{i}" for i in range(300)), answer=fmt(f"N{i}" for i in range(300))
            ),
            "huge_graph": rebuild(pt, graph="; ".join(f"N{i} -> N{i + 1}" for i in range(1200))),
            "deep_braces": rebuild(pt, result="{" * 3000 + "}" * 3000, answer="{" * 3000 + "}" * 3000),
            "long_path_claim": rebuild(
                pt, derivation=["path " + " -> ".join(g.nodes * 60) + " is open given {}"]
            ),
        }
        for name, text in attacks.items():
            with cpu_clock() as clock:
                s = score_trace(text, p)
            assert clock.elapsed < 2.0, (label, name)
            if name == "claim_repeated_to_the_cap" and p["query"]["kind"] == "directed_path":
                continue  # "descendants of X" without Y is directed_path's certificate for "no"
            assert not s.passed, show(f"{label} {name}", text[:3000], s)
            if name in ("over_max_chars",):
                assert s.total == 0
            if name in (
                "derivation_over_slot_cap",
                "certificate_after_the_line_cap",
                "claim_repeated_to_the_cap",
                "long_path_claim",
            ):
                assert not s.derivation, show(f"{label} {name}", text[:3000], s)
            if name in ("huge_result_set", "deep_braces"):
                assert not (s.result or s.answer) and s.total <= 3
            if name == "huge_graph":
                assert not s.graph


# ---------------------------------------------------------------------------------------------
# beyond the cap: the documented allowance, and repetition cannot fake it
def _confounders(k):
    """X <- U_i -> Y for i < k, plus X -> Y: k backdoor paths, each blocked only by its U_i."""
    us = [f"U{i}" for i in range(k)]
    directed = [[u, "X"] for u in us] + [[u, "Y"] for u in us] + [["X", "Y"]]
    return {
        "graph": {"type": "DAG", "nodes": ["X", "Y", *us], "directed": directed, "bidirected": []},
        "query": {"kind": "backdoor_set", "treatment": "X", "outcome": "Y"},
    }, us


def _bd_trace(us, z, claims):
    graph_text = "; ".join(f"{u} -> X; {u} -> Y" for u in us) + "; X -> Y"
    return assemble(graph_text, "backdoor_set(treatment=X, outcome=Y)", "backdoor criterion",
                    ["descendants of X = {Y}", *claims], fmt(z), fmt(z))  # fmt: skip


def test_beyond_the_cap_repetition_and_rewording_do_not_count_as_distinct_paths():
    p, us = _confounders(CAP + 3)
    z = frozenset(us)
    one = f"backdoor path X <- {us[0]} -> Y is blocked given {fmt(z)}"
    variants = [
        one,
        f"path Y <- {us[0]} -> X is blocked given {fmt(z)}",
        f"so path X<-{us[0]}->Y is inactive given {fmt(z)}.",
    ]
    s = score_trace(_bd_trace(us, z, variants * 20), p)
    assert not s.derivation and s.total == 5, s.reasons
    # the same path given several sets: still one path shown blocked given RESULT
    s = score_trace(
        _bd_trace(us, z, [f"path X <- {us[0]} -> Y is blocked given {fmt(z - {u})}" for u in us[1:]] + [one]),
        p,
    )
    assert not s.derivation, s.reasons
    # the honest cap's worth of distinct paths is the documented rule: 6/6
    s = score_trace(
        _bd_trace(us, z, [f"backdoor path X <- {u} -> Y is blocked given {fmt(z)}" for u in us[:CAP]]), p
    )
    assert s.total == 6, s.reasons


def test_beyond_the_cap_a_wrong_answer_gets_no_derivation_point():
    """Beyond the cap, the cap's worth of true paths certifies only a valid RESULT (issue 29)."""
    p, us = _confounders(CAP + 1)
    z = frozenset(us[:CAP])  # leaves X <- U8 -> Y open: not a backdoor set
    assert not grade_answer(p, fmt(z))
    s = score_trace(
        _bd_trace(us, z, [f"backdoor path X <- {u} -> Y is blocked given {fmt(z)}" for u in us[:CAP]]), p
    )
    assert s.total == 3 and not s.derivation and not s.result and not s.answer, s.reasons
    assert s.false_claims == 0 and "stand in for the rest only" in s.reasons["derivation"]
    # within the cap (one path fewer), the same move fails the derivation too
    p, us = _confounders(CAP)
    z = frozenset(us[: CAP - 1])
    s = score_trace(
        _bd_trace(us, z, [f"backdoor path X <- {u} -> Y is blocked given {fmt(z)}" for u in us[: CAP - 1]]), p
    )
    assert s.total == 3, s.reasons


# ---------------------------------------------------------------------------------------------
# holes found by this suite and closed in verifier/certificates/derivation.py, rewards/calver/, verifier/queries.py
def _tiny(kind_graph, nodes, directed, **query):
    return {"graph": {"type": kind_graph, "nodes": nodes, "directed": [list(e) for e in directed], "bidirected": []},
            "query": query}  # fmt: skip


def test_hole_mediator_endpoint_via_single_node_path():
    p = _tiny("DAG", ["X", "M", "Y"], [("X", "M"), ("M", "Y")], kind="mediator", treatment="X", outcome="Y")
    text = assemble("X -> M; M -> Y", "mediator(treatment=X, outcome=Y)", "directed path",
                    ["directed path X", "directed path X -> M -> Y"], "X", "X")  # fmt: skip
    assert not grade_answer(p, "X")
    scores = [score_trace(text, p).total]
    for _label, q in pool("fast"):  # and on every generated mediator problem
        if q["query"]["kind"] == "mediator":
            x, y = endpoints(q["query"])
            pt = parts(q, 0)
            full = directed_paths(graph(q), x, y, 1)[0]
            scores.append(
                score_trace(
                    rebuild(
                        pt, derivation=[f"directed path {x}", f"directed path {full}"], result=x, answer=x
                    ),
                    q,
                ).total
            )
    assert max(scores) <= 3, Counter(scores)


def test_hole_ate_flipped_decision_keeps_the_derivation():
    scores = []
    for _label, p in pool("fast"):
        if p["query"]["kind"] != "ate":
            continue
        pt = parts(p, 0)
        flip = lambda s: re.sub(r"\b(yes|no)\b", lambda m: "no" if m.group(1) == "yes" else "yes", s)  # noqa: E731
        text = rebuild(pt, result=flip(pt["result"]), answer=flip(pt["answer"]))
        assert not grade_answer(p, parse_trace(text).answer)
        scores.append(score_trace(text, p).total)
    assert scores and max(scores) <= 3, Counter(scores)


def test_hole_ate_answer_with_wrong_psi():
    scores = []
    for _label, p in pool("fast"):
        if p["query"]["kind"] != "ate":
            continue
        pt = parts(p, 0)
        psi = C.interventional_ate(p["cpts"], *endpoints(p["query"]))
        answer = f"{pt['answer'].split(',')[0]}, ψ = {psi + 0.5:.3f}"
        assert not grade_answer(p, answer)
        scores.append(score_trace(rebuild(pt, answer=answer), p).total)
    assert scores and max(scores) <= 3, Counter(scores)


def test_hole_backdoor_vacuous_certificate_when_no_backdoor_path():
    p = _tiny(
        "DAG", ["W", "X", "Y"], [("X", "Y"), ("W", "Y")], kind="backdoor_set", treatment="X", outcome="Y"
    )
    scores = []
    for z, extra in (("{X}", []), ("{W, X}", []), ("{Q}", []), ("{X}", ["X is not a descendant of X"])):
        text = assemble("X -> Y; W -> Y", "backdoor_set(treatment=X, outcome=Y)", "backdoor criterion",
                        ["descendants of X = {Y}", "no backdoor path from X to Y", *extra], z, z)  # fmt: skip
        assert not grade_answer(p, z)
        scores.append(score_trace(text, p).total)
    for _label, q in pool("slow"):  # generated problems without a backdoor path (a few percent)
        if (
            q["query"]["kind"] == "backdoor_set"
            and q["query"].get("variant") == "any"
            and _no_backdoor_path(q)
        ):
            pt = parts(q, 0)
            x = q["query"]["treatment"]
            z = fmt(QUERY_KINDS["backdoor_set"].parse_answer(pt["result"]) | {x})
            der = pt["derivation"] + [f"{x} is not a descendant of {x}"]
            scores.append(score_trace(rebuild(pt, derivation=der, result=z, answer=z), q).total)
    assert max(scores) <= 3, scores


def test_hole_separation_vacuous_certificate_when_no_path():
    scores = []
    for kind, word in (("dsep_set", "d-separation"), ("msep_set", "m-separation")):
        p = _tiny("DAG", ["W", "X", "Y"], [("W", "Y")], kind=kind, x="X", y="Y")
        for z in ("{X}", "{Y}", "{Q}", "{W, Y}"):
            text = assemble("W -> Y; X", f"{kind}(x=X, y=Y)", word, ["no path from X to Y"], z, z)
            assert not grade_answer(p, z)
            scores.append(score_trace(text, p).total)
    assert max(scores) <= 3, scores


def test_hole_strategy_second_method_hidden_by_homoglyph():
    failures = []
    for _label, p in _sample(6):
        kind = p["query"]["kind"]
        pt = parts(p, 0)
        own = QUERY_KINDS[kind].strategies[0]
        text = rebuild(pt, strategy=f"{own} and r{HOMOGLYPHS['e']}gression")
        failures.append(score_trace(text, p).strategy)
    assert not any(failures), Counter(failures)
