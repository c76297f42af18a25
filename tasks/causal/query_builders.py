"""Query builders of the causal problem generator: one per query kind.

A builder takes ``(graph, rng, config, target)`` and returns ``(query, cpts, preferred)`` or ``None``
when the graph has no suitable query (the generator then draws another graph). ``target`` is the
drawn yes/no answer for ``ci_test``, ``directed_path`` and ``ate``; ``preferred=False`` marks an
acceptable query that `make_problem` keeps only if a few more graphs give no preferred one (an
effect without confounding, for the adjustment kinds). Find-one kinds are built only when at least
two answers are valid.
"""

from __future__ import annotations

import itertools
import random

from faithgrpo.verifier import graphs as C
from faithgrpo.verifier.graphs.model import CausalGraph, node_sort_key
from faithgrpo.verifier.query_kinds import QUERY_KINDS

__all__ = ["BUILDERS", "MAX_CHECKS"]

_PAIRS_TRIED = 40  # (x, y) pairs tried per graph before drawing a new graph
MAX_CHECKS = 512  # candidate subsets examined per query


def _pairs(g: CausalGraph, rng: random.Random) -> list[tuple[str, str]]:
    pairs = list(itertools.permutations(g.nodes, 2))
    rng.shuffle(pairs)
    return pairs[:_PAIRS_TRIED]


def _several(g: CausalGraph, q: dict) -> bool:
    # Subsets come smallest first, so the check budget covers small answers; a query whose second
    # answer lies beyond it is skipped (rows stay fast on 12-node graphs).
    return len(QUERY_KINDS[q["kind"]].valid_answers(g, q, limit=2, max_checks=MAX_CHECKS)) >= 2


def _confounded(g: CausalGraph, x: str, y: str) -> bool:
    """Some backdoor path from x to y is open without conditioning (the effect needs adjusting)."""
    return not C.is_backdoor_set(g, x, y, ())


def _prefer_confounded(g, rng, make) -> tuple[dict, None, bool] | None:
    """The first qualifying query on a confounded pair (preferred), else on any pair (x must cause y)."""
    fallback = None
    for x, y in _pairs(g, rng):
        if not C.has_directed_path(g, x, y):
            continue  # ask about effects that exist (and keep the empty front-door set invalid)
        confounded = _confounded(g, x, y)
        if not confounded and fallback is not None:
            continue
        q = make(x, y)
        if _several(g, q):
            if confounded:
                return q, None, True
            fallback = (q, None, False)
    return fallback


def _q_backdoor(g, rng, cfg, target):
    variant = rng.choice(cfg.set_variants)
    return _prefer_confounded(
        g, rng, lambda x, y: {"kind": "backdoor_set", "treatment": x, "outcome": y, "variant": variant}
    )


def _q_frontdoor(g, rng, cfg, target):
    return _prefer_confounded(g, rng, lambda x, y: {"kind": "frontdoor_set", "treatment": x, "outcome": y})


def _adjacent(g: CausalGraph, a: str, b: str) -> bool:
    return (a, b) in g.directed or (b, a) in g.directed or a in g.siblings(b)


def _q_separation(kind):
    def build(g, rng, cfg, target):
        variant = rng.choice(cfg.set_variants)
        for x, y in _pairs(g, rng):
            if _adjacent(g, x, y) or node_sort_key(x) > node_sort_key(y):
                continue
            q = {"kind": kind, "x": x, "y": y, "variant": variant}
            if _several(g, q):
                return q, None, True
        return None

    return build


def _q_ci(g, rng, cfg, target):
    for x, y in _pairs(g, rng):
        if node_sort_key(x) > node_sort_key(y):
            continue
        others = sorted(g.node_set - {x, y}, key=node_sort_key)
        if target:
            base = C.minimal_m_separator(g, x, y)
            if base is None:
                continue
            extra = rng.sample(
                sorted(set(others) - base, key=node_sort_key), rng.randint(0, min(2, len(others) - len(base)))
            )
            given = set(base) | set(extra)
            if not C.m_separated(g, x, y, given):
                given = set(base)
        else:
            given = set(rng.sample(others, rng.randint(0, min(3, len(others)))))
        if C.m_separated(g, x, y, given) == target:
            return {"kind": "ci_test", "x": x, "y": y, "given": sorted(given, key=node_sort_key)}, None, True
    return None


def _q_directed(g, rng, cfg, target):
    for x, y in _pairs(g, rng):
        if C.has_directed_path(g, x, y) == target:
            return {"kind": "directed_path", "treatment": x, "outcome": y}, None, True
    return None


def _q_mediator(g, rng, cfg, target):
    for x, y in _pairs(g, rng):
        if len(C.mediators(g, x, y)) >= 2:
            return {"kind": "mediator", "treatment": x, "outcome": y}, None, True
    return None


def _q_cycle(g, rng, cfg, target):
    return ({"kind": "cycle"}, None, True) if len(C.simple_cycles(g, limit=2)) >= 2 else None


def _random_cpts(g: CausalGraph, rng: random.Random) -> dict:
    cpts = {}
    for v in g.nodes:
        parents = sorted(g.parents(v), key=node_sort_key)
        table = {
            ",".join(map(str, values)): round(rng.uniform(0.05, 0.95), 2)
            for values in itertools.product((0, 1), repeat=len(parents))
        }
        cpts[v] = {"parents": parents, "p1": table}
    return cpts


def _q_ate(g, rng, cfg, target):
    for x, y in _pairs(g, rng):
        if not C.has_directed_path(g, x, y):
            continue
        bd = {"kind": "backdoor_set", "treatment": x, "outcome": y}
        sets = QUERY_KINDS["backdoor_set"].valid_answers(g, bd, limit=1, max_checks=MAX_CHECKS)
        if not sets or len(sets[0]) > 2:
            continue  # keep the ψ computation to at most four strata
        cpts = _random_cpts(g, rng)
        psi = C.interventional_ate(cpts, x, y)
        gap = rng.uniform(cfg.ate_margin + 0.02, cfg.ate_margin + 0.25)
        threshold = round(psi - gap if target else psi + gap, 2)
        if abs(psi - threshold) > cfg.ate_margin and (psi > threshold) == target:
            q = {
                "kind": "ate",
                "treatment": x,
                "outcome": y,
                "threshold": threshold,
                "margin": float(cfg.ate_margin),
            }
            return q, cpts, True
    return None


BUILDERS = {
    "backdoor_set": _q_backdoor,
    "frontdoor_set": _q_frontdoor,
    "dsep_set": _q_separation("dsep_set"),
    "msep_set": _q_separation("msep_set"),
    "ci_test": _q_ci,
    "directed_path": _q_directed,
    "mediator": _q_mediator,
    "cycle": _q_cycle,
    "ate": _q_ate,
}
