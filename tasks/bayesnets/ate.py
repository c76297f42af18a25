"""ATE problems on a published Bayesian network: the exact reduction to the binary CPT format.

CALVER's ``ate`` kind reads binary CPTs (``{v: {"parents": [...], "p1": {...}}}``,
format in :mod:`faithgrpo.verifier.graphs.criteria`) for every node of the problem's graph. A network's
variables may have more than two states, so an ATE problem on treatment X and outcome Y is built
from the network's own tables by this reduction, which changes no causal quantity the query asks
about:

1. **The graph is the ancestral set** A = An(Y) ∪ {Y} (X is an ancestor of Y): the induced sub-DAG.
   The marginal of an ancestral set is the product of its own CPTs, so every probability over A,
   observational or under do(X), is the network's. A backdoor path that leaves A passes a
   collider outside A, whose descendants are outside A too, so it is blocked by any Z ⊆ A: the
   backdoor sets within A are the network's.
2. **Binary variables** keep their tables; value 1 is the state the BIF file lists first, 0 the
   second (``asia``'s ``smoke=1`` is ``smoke = yes``).
3. **The outcome** with more than two states becomes the indicator of one state s:
   ``P(Y=1 | pa) = P(Y=s | pa)``, the other states marginalised (summed). Y has no children in A.
4. **The treatment** with more than two states is compared between two of its states a (coded 1)
   and b (coded 0): its children in A read the columns of a and b, and its own table is
   ``P(X=1 | pa) = P(X=a | pa) / (P(X=a | pa) + P(X=b | pa))`` (both masses positive in every
   parent row, else the pair is not used). The interventional distributions do not read X's own
   table, so ψ = P(Y=s | do(X=a)) − P(Y=s | do(X=b)) exactly; for a backdoor set Z (non-descendants
   of X), P(z) and P(Y=s | X=a, z) = P(Y=s | do(X=a), z) are the network's too.
5. Every other variable of A must be binary: (X, Y) pairs whose ancestral set holds another
   multi-state variable are not used (no exact binary reduction keeps its children's tables).

:func:`reduce_for_ate` performs the reduction; tests check ψ and the stratum probabilities against
pgmpy's ``VariableElimination`` on the network (mutilated by ``do`` for ψ).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping
from dataclasses import dataclass

from faithgrpo.tasks.bayesnets.networks import BayesNet
from faithgrpo.verifier.graphs.model import CausalGraph, node_sort_key

__all__ = ["AteReduction", "ate_candidates", "coding_text", "cpt_lines", "reduce_for_ate"]


@dataclass(frozen=True)
class AteReduction:
    """An ATE problem's graph, binary CPTs and coding, reduced from a network.

    Attributes:
        graph: the induced sub-DAG on the ancestral set of the outcome.
        cpts: binary CPTs in the problem JSON format, one per node of ``graph``.
        coding: per variable ``(state coded 1, meaning of 0)``: ``("yes", "no")`` for a binary
            variable, ``("a", "b")`` for the treatment, ``("s", "any other state")`` for a
            multi-state outcome.
        treatment_states: all states of the treatment (more than two when it is compared between
            two of them).
    """

    graph: CausalGraph
    cpts: dict
    coding: dict[str, tuple[str, str]]
    treatment_states: tuple[str, ...] = ()


@functools.lru_cache(maxsize=64)
def ate_candidates(net: BayesNet, max_variables: int) -> tuple[tuple[str, str], ...]:
    """Ordered pairs (X, Y) the reduction applies to, with at most ``max_variables`` in the ancestral set.

    X is an ancestor of Y, and every variable of An(Y) other than X is binary (the outcome may have
    any number of states). Natural order of (Y, X).
    """
    g = net.graph
    out = []
    for y in g.nodes:
        anc = g.ancestors(y)
        if not anc or len(anc) + 1 > max_variables:
            continue
        multi = [v for v in anc if not net.is_binary(v)]
        xs = anc if not multi else (multi if len(multi) == 1 else [])
        out += [(x, y) for x in sorted(xs, key=node_sort_key)]
    return tuple(out)


def _fmt(p: float) -> float:
    # clip float noise (sums of states can exceed 1 by 1e-16) into [0, 1]
    return float(min(1.0, max(0.0, p)))


def reduce_for_ate(
    net: BayesNet, x: str, y: str, x_states: tuple[str, str] | None = None, y_state: str | None = None
) -> AteReduction:
    """The binary ATE problem for treatment ``x`` and outcome ``y`` on ``net`` (module docstring).

    Args:
        net: the network.
        x, y: treatment and outcome; ``x`` must be an ancestor of ``y``.
        x_states: ``(a, b)``, the treatment states coded 1 and 0; default: the first two listed.
        y_state: the outcome state coded 1; default: the first listed.

    Raises:
        ValueError: unknown variables or states, ``x`` not an ancestor of ``y``, another multi-state
            variable in the ancestral set, or a parent row of ``x`` with no mass on ``a`` or ``b``.
    """
    g = net.graph
    for v in (x, y):
        if v not in g.node_set:
            raise ValueError(f"{net.name} has no variable {v!r}")
    anc = g.ancestors(y)
    if x not in anc:
        raise ValueError(f"{x} is not an ancestor of {y} in {net.name}: do({x}) cannot change {y}")
    nodes = anc | {y}
    multi = sorted((v for v in anc - {x} if not net.is_binary(v)), key=node_sort_key)
    if multi:
        raise ValueError(
            f"the ancestral set of {y} holds multi-state variables {multi[:4]} besides {x}; "
            "the exact binary reduction needs them binary"
        )
    a, b = x_states if x_states is not None else net.states[x][:2]
    s = y_state if y_state is not None else net.states[y][0]
    if a == b or a not in net.states[x] or b not in net.states[x]:
        raise ValueError(f"x_states must be two distinct states of {x} among {net.states[x]}, got {(a, b)}")
    if s not in net.states[y]:
        raise ValueError(f"y_state must be a state of {y} among {net.states[y]}, got {s!r}")
    ia, ib, i_s = net.states[x].index(a), net.states[x].index(b), net.states[y].index(s)
    # index of the state coded 1 and 0 for each variable (the outcome's 0 is not one state)
    codes = {v: (0, 1) for v in nodes}
    codes[x] = (ia, ib)
    cpts: dict[str, dict] = {}
    for v in sorted(nodes, key=node_sort_key):
        parents, table = net.cpds[v]
        order = sorted(parents, key=node_sort_key)  # the problem lists parents in natural order
        p1: dict[str, float] = {}
        for bits in itertools.product((1, 0), repeat=len(order)):
            index = [0] * len(parents)
            for u, bit in zip(order, bits):
                index[parents.index(u)] = codes[u][0] if bit == 1 else codes[u][1]
            column = table[(slice(None), *index)]
            if v == y:
                p = column[i_s]
            elif v == x:
                mass = column[ia] + column[ib]
                if mass <= 0:
                    raise ValueError(
                        f"{x} has no mass on {a!r} or {b!r} when {dict(zip(order, bits))}: choose other states"
                    )
                p = column[ia] / mass
            else:
                p = column[0]
            p1[",".join(map(str, bits))] = _fmt(float(p))
        cpts[v] = {"parents": order, "p1": p1}
    coding = {v: net.states[v][:2] for v in nodes}
    coding[x] = (a, b)
    if not net.is_binary(y):
        coding[y] = (s, "any other state")
    graph = CausalGraph(
        "DAG",
        tuple(sorted(nodes, key=node_sort_key)),
        frozenset((p, v) for p, v in g.directed if v in nodes and p in nodes),
    ).validate()
    return AteReduction(graph, cpts, coding, tuple(net.states[x]))


def coding_text(reduction: AteReduction, treatment: str) -> str:
    """One sentence per variable saying what 1 and 0 stand for (and how a multi-state treatment is read)."""
    lines = []
    for v in sorted(reduction.coding, key=node_sort_key):
        one, zero = reduction.coding[v]
        zero_text = f"{v} is in any other state" if zero == "any other state" else f"{v} is {zero!r}"
        lines.append(f"{v}=1 means {v} is {one!r}; {v}=0 means {zero_text}.")
    others = [s for s in reduction.treatment_states if s not in reduction.coding[treatment]]
    if others:
        one, zero = reduction.coding[treatment]
        lines.append(
            f"{treatment} also has the state{'s' if len(others) > 1 else ''} {', '.join(map(repr, others))}: "
            f"P({treatment}=1 | ...) is the "
            f"chance of {one!r} among {one!r} and {zero!r}, and the effect compares do({treatment}={one!r}) "
            f"with do({treatment}={zero!r})."
        )
    return "\n".join(lines)


def cpt_lines(cpts: Mapping[str, dict]) -> str:
    """The reduced CPTs as ``P(V=1 | ...) = p`` lines, printed to 6 decimals (the JSON keeps them exact)."""

    def num(p: float) -> str:
        text = f"{p:.6f}".rstrip("0").rstrip(".")
        return text if text not in ("", "-0") else "0"

    lines = []
    for v in sorted(cpts, key=node_sort_key):
        parents, p1 = cpts[v]["parents"], cpts[v]["p1"]
        if not parents:
            lines.append(f"P({v}=1) = {num(p1[''] if isinstance(p1, Mapping) else p1)}")
            continue
        parts = []
        for key in sorted(p1):
            cond = ", ".join(f"{u}={bit}" for u, bit in zip(parents, key.split(",")))
            parts.append(f"P({v}=1 | {cond}) = {num(p1[key])}")
        lines.append("; ".join(parts))
    return "\n".join(lines)
