"""``causal_bn`` ATE problems against pgmpy's own inference (issue 29 item 2).

An ATE problem reduces a network exactly to binary CPTs on the outcome's ancestral set
(:mod:`faithgrpo.tasks.bayesnets.ate`). The oracle here is pgmpy, on the network as its BIFReader reads
it (multi-state variables and all, no reduction): ``VariableElimination`` on the network mutilated
by ``do`` gives P(Y=s | do(X=a)); on the network itself it gives the stratum probabilities P(z) and
P(Y=s | X=a, z) of a backdoor set. The library's ψ (einsum over the reduced CPTs, what CALVER
verifies), the gold trace's strata (enumeration, :mod:`faithgrpo.verifier.graphs.strata`) and pgmpy must agree.
"""

from __future__ import annotations

import functools
import gzip
import random
import warnings

import pytest

from faithgrpo.rewards.calver.reward import score_trace
from faithgrpo.tasks.bayesnets.ate import ate_candidates, reduce_for_ate
from faithgrpo.tasks.bayesnets.datasets import CausalBNConfig, admitted_kinds, make_bn_problem
from faithgrpo.tasks.bayesnets.networks import DEFAULT_NETWORKS, RENAMED, bif_path, load_network
from faithgrpo.tasks.certificates.gold import gold_trace
from faithgrpo.verifier import graphs as C
from faithgrpo.verifier.graphs.model import CausalGraph
from faithgrpo.verifier.graphs.strata import stratum_table
from faithgrpo.verifier.queries import grade_answer
from faithgrpo.verifier.query_kinds import QUERY_KINDS

TOL = 1e-9


@functools.cache
def pgmpy_model(name: str):
    """The network as pgmpy reads it, each CPD normalised as the library does (BIF files round:
    columns sum to 1 ± 1e-7); :func:`test_unnormalised_tables_differ_by_rounding_only` covers the raw ones."""
    model = raw_model(name).copy()
    for cpd in model.get_cpds():
        cpd.normalize(inplace=True)
    return model


@functools.cache
def raw_model(name: str):
    from pgmpy.readwrite import BIFReader

    with gzip.open(bif_path(name), "rt", encoding="utf-8") as f, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return BIFReader(string=f.read()).get_model()


def bif_name(name: str, v: str) -> str:
    back = {new: old for old, new in RENAMED.get(name, {}).items()}
    return back.get(v, v)


def query_prob(name: str, target: dict[str, str], evidence: dict[str, str], do: str | None = None,
               *, raw: bool = False) -> float:  # fmt: skip
    """P(target | evidence) by pgmpy's VariableElimination (on the network mutilated by do(X) if given)."""
    from pgmpy.inference import VariableElimination

    model = raw_model(name) if raw else pgmpy_model(name)
    if do is not None:
        model = model.do([bif_name(name, do)])
    ve = VariableElimination(model)
    ev = {bif_name(name, k): v for k, v in evidence.items()}
    factor = ve.query(
        variables=[bif_name(name, k) for k in target], evidence=ev or None, joint=True, show_progress=False
    )
    return float(factor.get_value(**{bif_name(name, k): v for k, v in target.items()}))


def state(coding: dict, v: str, bit: int) -> str:
    one, zero = coding[v]
    return one if bit == 1 else zero


def pgmpy_psi(name: str, x: str, y: str, coding: dict, raw: bool = False) -> float:
    (a, b), s = coding[x], coding[y][0]
    return query_prob(name, {y: s}, {x: a}, do=x, raw=raw) - query_prob(name, {y: s}, {x: b}, do=x, raw=raw)


ATE_NETWORKS = [n for n in DEFAULT_NETWORKS if "ate" in admitted_kinds(n)]


def test_ate_is_drawn_on_at_least_ten_networks():
    assert len(ATE_NETWORKS) >= 10, ATE_NETWORKS


@pytest.mark.parametrize("name", ATE_NETWORKS)
def test_psi_and_strata_agree_with_pgmpy_variable_elimination(name):
    cfg = CausalBNConfig(networks=(name,), query_kinds=("ate",))
    for i in range(2):
        problem, answer, info = make_bn_problem(cfg, random.Random(f"ate:{name}:{i}"))
        q, cpts, coding = problem["query"], problem["cpts"], info["coding"]
        x, y = q["treatment"], q["outcome"]
        # ψ: the reduced CPTs (what CALVER verifies) against do-calculus on the unreduced network
        psi = C.interventional_ate(cpts, x, y)
        assert abs(psi - pgmpy_psi(name, x, y, coding)) < TOL, (name, q)
        assert grade_answer(problem, answer) and (psi > q["threshold"]) == answer.startswith("yes")
        # strata of every small valid backdoor set against the network's observational distribution
        g = CausalGraph.from_dict(problem["graph"])
        bd = {"kind": "backdoor_set", "treatment": x, "outcome": y}
        sets = [z for z in QUERY_KINDS["backdoor_set"].valid_answers(g, bd, limit=4) if len(z) <= 3]
        assert sets
        for z in sets:
            zs = sorted(z)
            rows = stratum_table(cpts, x, y, zs)
            assert abs(sum((p1 - p0) * pz for _, pz, p1, p0 in rows) - psi) < 1e-9  # adjustment = do
            for bits, pz, p1, p0 in rows:
                zstate = {v: state(coding, v, b) for v, b in zip(zs, bits)}
                if zs:
                    assert abs(pz - query_prob(name, zstate, {})) < TOL
                s = coding[y][0]
                for a, p in ((1, p1), (0, p0)):
                    ev = {x: state(coding, x, a), **zstate}
                    assert abs(p - query_prob(name, {y: s}, ev)) < TOL, (name, q, zstate)


def test_unnormalised_tables_differ_by_rounding_only():
    """On the BIF tables exactly as written (columns off 1 by up to 1e-7), ψ moves by rounding only."""
    for name in ("sachs", "alarm", "child"):
        cfg = CausalBNConfig(networks=(name,), query_kinds=("ate",))
        problem, _, info = make_bn_problem(cfg, random.Random(f"raw:{name}"))
        x, y = problem["query"]["treatment"], problem["query"]["outcome"]
        psi = C.interventional_ate(problem["cpts"], x, y)
        assert abs(psi - pgmpy_psi(name, x, y, info["coding"], raw=True)) < 1e-6


def test_multi_state_treatment_and_outcome_reduce_exactly():
    net = load_network("survey")  # A: young/adult/old; T: car/train/other
    assert len(net.states["A"]) == 3 and len(net.states["T"]) == 3
    for a, b in (("old", "young"), ("adult", "old")):
        for s in net.states["T"]:
            red = reduce_for_ate(net, "A", "T", (a, b), s)
            coding = red.coding
            assert coding["A"] == (a, b) and coding["T"] == (s, "any other state")
            psi = C.interventional_ate(red.cpts, "A", "T")
            assert abs(psi - pgmpy_psi("survey", "A", "T", coding)) < TOL
            # the reduced treatment's table: P(A = a) among a and b
            pa = {st: query_prob("survey", {"A": st}, {}) for st in net.states["A"]}
            assert abs(red.cpts["A"]["p1"][""] - pa[a] / (pa[a] + pa[b])) < TOL


def test_gold_ate_traces_score_six_and_flipped_decisions_three():
    for name in ATE_NETWORKS:
        cfg = CausalBNConfig(networks=(name,), query_kinds=("ate",))
        problem, _, _ = make_bn_problem(cfg, random.Random(f"gold:{name}"))
        text = gold_trace(problem, 3)
        assert score_trace(text, problem).total == 6, name
        flip = {"yes": "no", "no": "yes"}
        result = text.split("RESULT: ", 1)[1].split("\n", 1)[0]
        word = result.split(",")[0].split(" ")[0]
        wrong = text.replace(f"RESULT: {result}", f"RESULT: {flip[word]}{result[len(word) :]}")
        wrong = wrong.rsplit("<answer>", 1)[0] + f"<answer>{flip[word]}</answer>"
        s = score_trace(wrong, problem)
        assert not grade_answer(problem, wrong) and s.total <= 3, (name, s.reasons)


def test_reduction_refuses_what_it_cannot_do_exactly():
    net = load_network("survey")
    with pytest.raises(ValueError, match="not an ancestor"):
        reduce_for_ate(net, "T", "A")
    with pytest.raises(ValueError, match="no variable"):
        reduce_for_ate(net, "Nope", "T")
    with pytest.raises(ValueError, match="x_states"):
        reduce_for_ate(net, "A", "T", ("old", "old"))
    with pytest.raises(ValueError, match="y_state"):
        reduce_for_ate(net, "A", "T", ("old", "young"), "plane")
    sachs = load_network("sachs")  # every variable has three states
    with pytest.raises(ValueError, match="multi-state variables"):
        x, y = next((x, y) for y in sachs.graph.nodes for x in sachs.graph.ancestors(y)
                    if len(sachs.graph.ancestors(y)) > 1)  # fmt: skip
        reduce_for_ate(sachs, x, y)
    # the candidates are exactly the pairs the reduction accepts
    for name in ("survey", "sachs", "child"):
        net = load_network(name)
        for x, y in ate_candidates(net, 12):
            reduce_for_ate(net, x, y)  # no error
