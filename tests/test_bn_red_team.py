"""Red team on ``causal_bn`` problems: the attacks of tests/test_reward_hacking.py on real networks.

For random graphs the red-team suite builds the cheapest traces that could pass CALVER without the
work (prose, echoes, hedged or reversed claims, true claims given the wrong set, a required path
left out, ...) and wrong answers backed by every true claim a policy could muster. Here the same
attacks run on problems drawn from the published networks, in both renderings:

* networks up to 40 nodes get the suite's full cheap-derivation catalogue and its wrong-answer sweep
  (within the path cap, as there);
* the large ones (56-223 nodes, far above the cap) get the text-level attacks that stay within
  CALVER's length caps, and wrong answers whose derivations are the gold generator's true claims for
  the wrong answer (above the cap too, where issue 29 closed the hole).

Expectations: no cheap trace with the right answer reaches 6/6 and each fails exactly the
derivation; no wrong answer (``grade_answer`` is False, an oracle independent of the scorer)
scores more than 3/6.
"""

from __future__ import annotations

import functools
import random

import pytest
from test_reward_hacking import LOREM, _flip_arrows, cheap_derivations, parts, rebuild, show, wrong_answers

from faithgrpo.rewards.calver.reward import score_trace
from faithgrpo.tasks.bayesnets.datasets import CausalBNConfig, admitted_kinds, make_bn_problem
from faithgrpo.tasks.bayesnets.networks import DEFAULT_NETWORKS, load_network
from faithgrpo.tasks.certificates.gold import gold_trace
from faithgrpo.verifier import graphs as C
from faithgrpo.verifier.graphs.model import CausalGraph, node_sort_key
from faithgrpo.verifier.queries import grade_answer
from faithgrpo.verifier.query_kinds import QUERY_KINDS

SMALL = tuple(n for n in DEFAULT_NETWORKS if len(load_network(n).graph.nodes) <= 40)
LARGE = tuple(n for n in DEFAULT_NETWORKS if n not in SMALL)
SET_KINDS = ("backdoor_set", "frontdoor_set", "dsep_set", "msep_set")


@functools.cache
def bn_pool(names: tuple[str, ...]) -> tuple[tuple[str, dict], ...]:
    """One problem per network and admitted kind (modes alternate), deterministic."""
    out = []
    for name in names:
        for j, kind in enumerate(admitted_kinds(name)):
            mode = ("supplied", "constructed")[j % 2]
            cfg = CausalBNConfig(networks=(name,), query_kinds=(kind,), modes=(mode,))
            problem, _, _ = make_bn_problem(cfg, random.Random(f"red:{name}:{kind}"))
            out.append((f"{name}/{kind}/{mode}", problem))
    return tuple(out)


def test_pools_cover_both_sizes_and_modes():
    assert len(SMALL) >= 8 and set(LARGE) >= {"hailfinder", "hepar2", "win95pts", "andes"}
    modes = {p["mode"] for _, p in bn_pool(SMALL) + bn_pool(LARGE)}
    assert modes == {"supplied", "constructed"}


# ---------------------------------------------------------------------------------------------
# cheap traces with the right answer
def _check_cheap(label, p, pt, attacks) -> tuple[int, list, list]:
    hits, bad = [], []
    for name, lines in attacks.items():
        text = rebuild(pt, derivation=lines)
        s = score_trace(text, p)
        if s.passed:
            hits.append(show(f"{label} {name}", text, s))
        if s.failed() != ["derivation"]:
            bad.append(show(f"{label} {name}", text, s))
    return len(attacks), hits, bad


def test_cheap_correct_answer_traces_never_reach_six_on_small_networks():
    n, hits, bad = 0, [], []
    for label, p in bn_pool(SMALL):
        pt = parts(p, 0)
        k, h, b = _check_cheap(label, p, pt, cheap_derivations(p, pt))
        n, hits, bad = n + k, hits + h, bad + b
    assert n >= 600, n
    assert not hits, f"{len(hits)} of {n} cheap traces scored 6/6:" + "".join(hits[:3])
    assert not bad, f"{len(bad)} cheap traces failed something besides the derivation:" + "".join(bad[:3])


def cheap_large(p: dict, pt: dict) -> dict[str, list[str]]:
    """The text-level cheap derivations of the catalogue, bounded for 56-223-node graphs."""
    g, q = CausalGraph.from_dict(p["graph"]), p["query"]
    gold = pt["derivation"]
    x = q.get("treatment") or q.get("x")
    out = {
        "node_name": [x],
        "result_echo": [pt["result"]],
        "boilerplate": ["We apply the criterion to the graph.", "Every relevant path is blocked, so the result follows."],
        "lorem_ipsum": [LOREM],
        "hedged_gold_claims": [f"I think that {line}" for line in gold],
        "gold_with_reversed_arrows": [_flip_arrows(line) for line in gold if "->" in line or "<-" in line],
        "descendants_of_x_only": [f"descendants of {x} = {{{', '.join(sorted(g.descendants(x), key=node_sort_key))}}}"],
        "graph_as_edge_claims": [f"edge {a} -> {b}" for a, b in sorted(g.directed)][:400],
    }  # fmt: skip
    if q["kind"] == "directed_path" and QUERY_KINDS["directed_path"].parse_answer(pt["result"]) is False:
        del out["descendants_of_x_only"]  # a descendants-of-X claim certifies "no"
    # drop every line naming the first listed path: within the cap one required path is missing,
    # beyond it the cap's worth is one short
    listed = [line for line in gold if " path " in f" {line}" and " is " in line]
    if listed and q["kind"] not in ("ci_test", "directed_path", "mediator"):
        first = listed[0]
        out["gold_minus_one_listed_path"] = [line for line in gold if line != first]
        if len(listed) >= 2:  # one path repeated stands in for the others
            out["one_listed_path_repeated"] = [line for line in gold if line not in listed] + [first] * 12
    return out


def test_cheap_correct_answer_traces_never_reach_six_on_large_networks():
    n, hits, bad = 0, [], []
    for label, p in bn_pool(LARGE):
        pt = parts(p, 0)
        k, h, b = _check_cheap(label, p, pt, cheap_large(p, pt))
        n, hits, bad = n + k, hits + h, bad + b
    assert n >= 200, n
    assert not hits, f"{len(hits)} of {n} cheap traces scored 6/6:" + "".join(hits[:3])
    assert not bad, f"{len(bad)} cheap traces failed something besides the derivation:" + "".join(bad[:3])


# ---------------------------------------------------------------------------------------------
# wrong answers
def test_wrong_answers_with_true_claims_score_at_most_three_on_small_networks():
    rng = random.Random(29)
    worst, n, over = 0, 0, []
    for label, p in bn_pool(SMALL):
        pt = parts(p, 0)
        for result, answer, derivation in wrong_answers(p, pt, rng):
            assert not grade_answer(p, answer), (label, answer)
            text = rebuild(pt, derivation=derivation, result=result, answer=answer)
            s = score_trace(text, p)
            n += 1
            worst = max(worst, s.total)
            if s.total > 3:
                over.append(show(label, text, s))
    assert n >= 100, n
    assert not over, f"{len(over)} of {n} wrong answers scored > 3/6:" + "".join(over[:3])


def _wrong_large(p: dict, rng: random.Random) -> list[str]:
    """Wrong-answer traces for a large-network problem: gold claims for the wrong answer, above the cap too."""
    g, q = CausalGraph.from_dict(p["graph"]), p["query"]
    kind = q["kind"]
    out = []
    if kind in SET_KINDS:
        x = q.get("treatment") or q.get("x")
        y = q.get("outcome") or q.get("y")
        t = parts(p, 0)
        z0 = QUERY_KINDS[kind].parse_answer(t["result"])
        cands = [z0 - {v} for v in sorted(z0, key=node_sort_key)]
        cands += [z0 | {v} for v in sorted(g.parents(x) | g.parents(y) | g.children(x), key=node_sort_key)]
        cands += [frozenset()]
        for z in cands:
            if z & {x, y} or grade_answer(p, "{" + ", ".join(sorted(z)) + "}"):
                continue
            out.append(gold_trace(p, rng.randrange(1000), answer=z))  # true claims, no certificate
            if len(out) >= 4:
                break
    elif kind in ("ci_test", "directed_path"):
        t = parts(p, 0)
        wrong = "no" if t["answer"].lower().startswith("yes") else "yes"
        out.append(rebuild(t, result=wrong, answer=wrong))
    elif kind == "mediator":
        t = parts(p, 0)
        meds = C.mediators(g, q["treatment"], q["outcome"])
        for m in [q["treatment"], *sorted(g.node_set - meds, key=node_sort_key)[:3]]:
            out.append(rebuild(t, result=m, answer=m))
    elif kind == "ate":
        t = parts(p, 0)
        word = t["answer"].split(",")[0].strip().lower()
        wrong = {"yes": "no", "no": "yes"}[word]
        out.append(rebuild(t, result=wrong + t["result"][len(word) :], answer=wrong))
    return out


@pytest.mark.parametrize("name", LARGE)
def test_wrong_answers_score_at_most_three_on_large_networks(name):
    rng = random.Random(name)
    n = 0
    for label, p in bn_pool(LARGE):
        if not label.startswith(name + "/"):
            continue
        for text in _wrong_large(p, rng):
            assert not grade_answer(p, text), label
            s = score_trace(text, p)
            assert s.total <= 3 and not s.derivation, show(label, text, s)
            n += 1
    assert n >= 8, n
