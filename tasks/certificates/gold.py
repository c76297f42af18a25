"""Gold six-slot traces for causal problems: correct, derived symbolically, varied in wording.

A gold trace is what a supervised warm start (issue 7) teaches a small policy to write::

    <think>
    GRAPH: U -> X; U -> Y; X -> M; M -> Y
    QUERY: backdoor_set(treatment=X, outcome=Y)
    STRATEGY: backdoor criterion
    DERIVATION:
    - descendants of X = {M, Y}
    - backdoor path X <- U -> Y is blocked given {U}; U is a conditioned non-collider
    - so {U} satisfies the backdoor criterion for X and Y
    RESULT: {U}
    </think>
    <answer>{U}</answer>

GRAPH restates the problem's graph (in constructed-graph mode, the graph the story tells); QUERY is
:func:`~faithgrpo.verifier.queries.format_query`; STRATEGY names one method of the kind; DERIVATION is a
certificate in the claim grammar of :mod:`faithgrpo.verifier.certificates.derivation` (the paths found, each with its
status given the answer set, the non-descendants, the directed path or cycle, the stratum
probabilities and ψ), with prose after ``;`` or on lines of its own, and always has at least two
steps; RESULT and ``<answer>`` carry one valid answer. The random generator picks *which* valid
answer and the wording, so supervised traces do not collapse onto one answer string. Tests score
thousands of gold traces 6/6 under :func:`faithgrpo.rewards.calver.reward.score_trace`.

This module renders the slots and picks the wording; the DERIVATION certificates are built per
query kind in :mod:`faithgrpo.tasks.certificates.gold_derivations`, the ATE strata in :mod:`faithgrpo.verifier.graphs.strata`.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from typing import Any

from faithgrpo.tasks.certificates.gold_derivations import DERIVATION_BUILDERS
from faithgrpo.tasks.certificates.gold_style import GoldStyle
from faithgrpo.verifier.answers import format_set
from faithgrpo.verifier.graphs.model import CausalGraph, node_sort_key
from faithgrpo.verifier.queries import format_query, load_problem
from faithgrpo.verifier.query_kinds import QUERY_KINDS

__all__ = [
    "GOLD_FORMAT",
    "gold_trace",
]

#: Version of what gold traces look like; caches of data and adapters trained on them key on it.
#: 2: derivations are certificates in the claim grammar of :mod:`faithgrpo.verifier.certificates.derivation`.
#: 3: beyond the path cap, the cap's worth of *shortest* paths is listed (issue 29; lines of
#: thousands of characters on 200-node networks otherwise); traces within the cap are unchanged.
#: 4: Knights & Knaves derivations cite the statements and earlier conclusions each claim follows
#: from, and the causal trace prompt asks for one answer per answer slot (issue 30).
GOLD_FORMAT = 4
_BULLETS = ("- ", "* ", "{k}. ", "Step {k}: ")


# ---------------------------------------------------------------------------------------------
# rendering
def _graph_text(g: CausalGraph, style: GoldStyle) -> str:
    edges = [f"{a} -> {b}" for a, b in sorted(g.directed)] + [f"{a} <-> {b}" for a, b in sorted(g.bidirected)]
    if style.plain:
        return g.edge_text()
    touched = {v for e in g.directed | g.bidirected for v in e}
    isolated = [v for v in g.nodes if v not in touched]
    parts = style.shuffled(edges) if style.coin(0.5) else edges
    return style.choice(("; ", ", ")).join(parts + isolated)


def _result_and_answer(kind: str, value: Any, style: GoldStyle) -> tuple[str, str]:
    """The RESULT slot and the ``<answer>`` text for a derived value (the same answer, both)."""
    answer_type = QUERY_KINDS[kind].answer_type
    if answer_type == "set":
        text = "{" + ", ".join(style.shuffled(sorted(value, key=node_sort_key))) + "}"
    elif answer_type == "yes_no":
        text = style.choice(("yes", "Yes")) if value else style.choice(("no", "No"))
    elif answer_type == "node":
        text = value
    elif answer_type == "cycle":
        text = " -> ".join((*value, value[0])) if style.coin(0.5) else "[" + ", ".join(value) + "]"
    else:
        # ate: RESULT carries the certificate's adjustment set (exactly one brace set); the answer
        # is the decision, sometimes with ψ.
        decision, psi, z = value
        word = "yes" if decision else "no"
        zset = format_set(z)
        result = style.choice(
            (
                f"{word}, ψ = {psi:.3f}, Z = {zset}",
                f"{word} (ψ = {psi:.3f}, adjusting for {zset})",
                f"{word}, adjusting for {zset}",
            )
        )
        return result, (f"{word}, ψ = {psi:.3f}" if style.coin(0.5) else word)
    return text, text


def gold_trace(
    problem: Mapping | str, rng: random.Random | int | None = None, *, plain: bool = False, answer: Any = None
) -> str:
    """A correct six-slot trace for ``problem``: ``<think>`` with the five slots, then ``<answer>``.

    Args:
        problem: a causal problem (dict or JSON string), any query kind.
        rng: a ``random.Random`` (or an int seed) choosing the valid answer and the wording; the same
            seed gives the same trace.
        plain: fixed wording and the first (smallest) valid answer, for worked examples.
        answer: for set-valued kinds, the answer set to write the certificate for (a frozenset);
            default: one valid answer picked by ``rng``. An invalid set gives true claims that do
            not certify it (CALVER fails the derivation), e.g. for selection experiments.

    Returns:
        The completion text. The RESULT and ``<answer>`` carry the same valid answer (for ``ate`` the
        RESULT also names the adjustment set, as CALVER's strict certificate requires).

    Raises:
        ValueError: a malformed problem, or one without any valid answer.

    Example:
        >>> p = {"graph": {"type": "DAG", "nodes": ["U", "X", "Y"], "directed": [["U", "X"], ["U", "Y"], ["X", "Y"]]},
        ...      "query": {"kind": "backdoor_set", "treatment": "X", "outcome": "Y"}}
        >>> print(gold_trace(p, plain=True))
        <think>
        GRAPH: U -> X; U -> Y; X -> Y
        QUERY: backdoor_set(treatment=X, outcome=Y)
        STRATEGY: backdoor criterion
        DERIVATION:
        - U is not a descendant of X
        - backdoor path X <- U -> Y is blocked given {U}
        - so {U} satisfies the backdoor criterion for X and Y
        RESULT: {U}
        </think>
        <answer>{U}</answer>
    """
    if isinstance(problem, str):
        problem = json.loads(problem)
    graph, query, cpts = load_problem(problem)
    if not isinstance(rng, random.Random):
        rng = random.Random(rng if rng is not None else 0)
    if answer is not None and QUERY_KINDS[query["kind"]].answer_type != "set":
        raise ValueError("answer= is supported for set-valued query kinds only")
    style = GoldStyle(rng, plain, None if answer is None else frozenset(answer))
    strategy, steps, value = DERIVATION_BUILDERS[query["kind"]](graph, query, cpts, style)
    bullet = style.choice(_BULLETS)
    result, answer = _result_and_answer(query["kind"], value, style)
    lines = [
        "<think>",
        f"GRAPH: {_graph_text(graph, style)}",
        f"QUERY: {format_query(query)}",
        f"STRATEGY: {strategy}",
        "DERIVATION:",
        *(bullet.format(k=k) + step for k, step in enumerate(steps, start=1)),
        f"RESULT: {result}",
        "</think>",
        f"<answer>{answer}</answer>",
    ]
    return "\n".join(lines)
