"""Gold six-slot traces for causal problems: correct, derived symbolically, varied in wording.

A gold trace is what a supervised warm start (issue 7) teaches a small policy to write::

    <think>
    GRAPH: U -> X; U -> Y; X -> M; M -> Y
    QUERY: backdoor_set(treatment=X, outcome=Y)
    STRATEGY: backdoor criterion
    DERIVATION:
    - descendants of X: {M, Y}; none of them may be adjusted for
    - backdoor path X <- U -> Y is blocked by U, a non-collider that is conditioned on
    - so {U} satisfies the backdoor criterion for X and Y
    RESULT: {U}
    </think>
    <answer>{U}</answer>

GRAPH restates the problem's graph (in constructed-graph mode, the graph the story tells); QUERY is
:func:`~faithgrpo.tasks.queries.format_query`; STRATEGY names a method of the kind; DERIVATION is
computed from the graph (the backdoor paths found and the node that blocks each, the directed path
found, the cycle found, the ψ computation) and always has at least two steps; RESULT and
``<answer>`` carry one valid answer. The random generator picks *which* valid answer and the wording,
so supervised traces do not collapse onto one answer string.

Derivation lines start in lower case and name only graph variables (probabilities are written
``P(...)``, a function position that CALVER's node-mention rule skips), so the derivation check finds
nothing foreign. Tests score thousands of gold traces 6/6 under :func:`faithgrpo.rewards.calver.score_trace`.
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from faithgrpo.tasks import criteria as C
from faithgrpo.tasks.graph import CausalGraph, Path, node_sort_key
from faithgrpo.tasks.queries import QUERY_KINDS, format_query, load_problem

__all__ = ["MAX_LISTED_PATHS", "gold_trace", "stratum_table"]

#: Paths spelled out per criterion; longer lists are summarised in one line (traces stay short).
MAX_LISTED_PATHS = 5
_PATH_SCAN = 200  # paths scanned when counting what is summarised
_CHOICES = 16  # valid answers the trace picks from
_MAX_CHECKS = 1024  # candidate subsets examined when listing valid answers

_STRATEGIES = {
    "backdoor_set": ("backdoor criterion", "backdoor adjustment", "adjustment criterion"),
    "frontdoor_set": ("frontdoor criterion", "frontdoor adjustment"),
    "dsep_set": ("d-separation", "global Markov property"),
    "msep_set": ("m-separation", "m-separation on the canonical DAG"),
    "ci_test": ("d-separation",),  # ADMGs get m-separation, see _ci_test
    "directed_path": ("directed path search (BFS)", "reachability", "depth-first search", "DFS"),
    "mediator": ("directed path search", "mediation analysis via directed paths", "DFS"),
    "cycle": ("cycle detection (DFS)", "depth-first search", "back edge search (DFS)"),
    "ate": ("backdoor adjustment formula", "adjustment formula", "g-formula"),
}
_BULLETS = ("- ", "* ", "{k}. ", "Step {k}: ")


class _Style:
    """Random choices of wording; ``plain`` always takes the first option (worked examples)."""

    def __init__(self, rng: random.Random, plain: bool):
        self.rng, self.plain = rng, plain

    def choice(self, options: Sequence[Any]) -> Any:
        return options[0] if self.plain else self.rng.choice(list(options))

    def coin(self, p: float) -> bool:
        return (not self.plain) and self.rng.random() < p

    def shuffled(self, items: Sequence[Any]) -> list:
        out = list(items)
        if not self.plain:
            self.rng.shuffle(out)
        return out


def _fmt_set(nodes: Any) -> str:
    return "{" + ", ".join(sorted(nodes, key=node_sort_key)) + "}"


def _fmt_nodes(nodes: Any) -> str:
    nodes = sorted(nodes, key=node_sort_key)
    return nodes[0] if len(nodes) == 1 else _fmt_set(nodes)


def _as_set(v: Any) -> frozenset[str]:
    return frozenset([v] if isinstance(v, str) else v or [])


# ---------------------------------------------------------------------------------------------
# paths and blocking
def _block_reason(g: CausalGraph, path: Path, z: frozenset[str], style: _Style) -> str | None:
    """Why ``z`` blocks ``path`` (first blocking inner node), or ``None`` when the path is open."""
    for i in range(1, len(path.nodes) - 1):
        v = path.nodes[i]
        if C.is_collider(path, i):
            if v not in z and not (g.descendants(v) & z):
                return style.choice(
                    (
                        f"blocked at the collider {v} (neither {v} nor a descendant of it is conditioned on)",
                        f"blocked: {v} is a collider and nothing at or below {v} is conditioned on",
                    )
                )
        elif v in z:
            return style.choice(
                (f"blocked by {v}, a non-collider that is conditioned on", f"blocked by conditioning on {v}")
            )
    return None


def _open_reason(g: CausalGraph, path: Path, z: frozenset[str]) -> str:
    """Why every inner node of an open path lets it through."""
    parts = []
    for i in range(1, len(path.nodes) - 1):
        v = path.nodes[i]
        if C.is_collider(path, i):
            opener = v if v in z else sorted(g.descendants(v) & z, key=node_sort_key)[0]
            parts.append(
                f"collider {v} is opened by conditioning on {opener}"
                if opener == v
                else f"collider {v} is opened by its descendant {opener}"
            )
        else:
            parts.append(f"{v} is a non-collider that is not conditioned on")
    return "; ".join(parts) if parts else "the two variables are adjacent"


def _path_steps(
    g: CausalGraph,
    paths: list[Path],
    z: frozenset[str],
    label: str,
    style: _Style,
    truncated: bool,
) -> list[str]:
    """One step per listed path with the reason ``z`` blocks it, plus a summary of the rest."""
    steps = []
    for p in paths[:MAX_LISTED_PATHS]:
        reason = _block_reason(g, p, z, style)
        steps.append(f"{label} {p} is {reason}")
    rest = len(paths) - MAX_LISTED_PATHS
    if rest > 0:
        count = f"{rest}+" if truncated else str(rest)
        steps.append(f"the other {count} {label}s are blocked in the same way (checked one by one)")
    return steps


def _minimality_steps(
    g: CausalGraph, z: frozenset[str], find_open: Any, style: _Style, what: str
) -> list[str]:
    steps = []
    for v in style.shuffled(sorted(z, key=node_sort_key)):
        witness = find_open(z - {v})
        if witness is not None:
            steps.append(f"without {v} the {what} {witness} would be open, so {v} is needed")
        else:  # cannot happen for a minimal set; kept honest rather than asserted
            steps.append(f"{v} is needed: dropping it breaks the criterion")
    return steps


def _pick(values: list, style: _Style) -> Any:
    if not values:
        raise ValueError("the problem has no valid answer, so there is no gold trace")
    return style.choice(values)


def _valid_sets(g: CausalGraph, q: Mapping) -> list[frozenset[str]]:
    """Valid answer sets (bounded search, smallest first), or one constructed minimal answer when the
    bounded search finds none (large graphs whose answers are all big)."""
    kind = q["kind"]
    found = QUERY_KINDS[kind].valid_answers(g, q, limit=_CHOICES, max_checks=_MAX_CHECKS)
    if found:
        return found
    if kind == "backdoor_set" and q.get("variant", "any") != "maximal":
        z = C.minimal_backdoor_set(g, q["treatment"], q["outcome"])
    elif kind in ("dsep_set", "msep_set"):
        z = C.minimal_m_separator(g, _as_set(q["x"]), _as_set(q["y"]))
    else:
        z = None
    return [] if z is None else [z]


# ---------------------------------------------------------------------------------------------
# per-kind derivations: (strategy, steps, value)
def _backdoor(g, q, cpts, style):
    x, y = q["treatment"], q["outcome"]
    variant = q.get("variant", "any")
    z = _pick(_valid_sets(g, q), style)
    steps = []
    desc = sorted(g.descendants(x), key=node_sort_key)
    if desc:
        steps.append(
            style.choice(
                (
                    f"descendants of {x}: {_fmt_set(desc)}; none of them may be adjusted for",
                    f"{x} reaches {_fmt_set(desc)} by directed paths, so those are excluded",
                )
            )
        )
    else:
        steps.append(f"{x} has no descendants, so every other variable may be adjusted for")
    paths = C.backdoor_paths(g, x, y, limit=_PATH_SCAN)
    if paths:
        steps += _path_steps(g, paths, z, "backdoor path", style, len(paths) >= _PATH_SCAN)
    else:
        steps.append(f"there is no backdoor path from {x} to {y}, so nothing needs blocking")
    if variant == "minimal":
        steps += _minimality_steps(g, z, lambda s: C.open_backdoor_path(g, x, y, s), style, "backdoor path")
    elif variant == "maximal":
        steps.append(f"every variable that is not {x}, {y} or a descendant of {x} is included")
    steps.append(
        style.choice(
            (
                f"so {_fmt_set(z)} satisfies the backdoor criterion for {x} and {y}",
                f"hence adjusting for {_fmt_set(z)} identifies the effect of {x} on {y}",
            )
        )
    )
    return style.choice(_STRATEGIES["backdoor_set"]), steps, z


def _frontdoor(g, q, cpts, style):
    x, y = q["treatment"], q["outcome"]
    z = _pick(_valid_sets(g, q), style)
    steps = []
    dpaths = C.directed_paths(g, x, y, limit=_PATH_SCAN)
    for p in dpaths[:MAX_LISTED_PATHS]:
        hit = next(v for v in p.nodes[1:-1] if v in z)
        steps.append(f"directed path {p} passes through {hit}")
    if len(dpaths) > MAX_LISTED_PATHS:
        steps.append(f"the other directed paths from {x} to {y} pass through {_fmt_set(z)} too")
    if not dpaths:
        steps.append(f"there is no directed path from {x} to {y}, so nothing needs intercepting")
    for v in sorted(z, key=node_sort_key):
        bps = C.backdoor_paths(g, x, v, limit=MAX_LISTED_PATHS + 1)
        if not bps:
            steps.append(f"{x} has no backdoor path to {v}")
        for p in bps[:MAX_LISTED_PATHS]:
            steps.append(f"backdoor path {p} is {_block_reason(g, p, frozenset(), style)}")
        bps = C.backdoor_paths(g, v, y, limit=MAX_LISTED_PATHS + 1)
        if not bps:
            steps.append(f"{v} has no backdoor path to {y}")
        for p in bps[:MAX_LISTED_PATHS]:
            steps.append(f"backdoor path {p} is {_block_reason(g, p, frozenset({x}), style)}")
    steps.append(f"so {_fmt_set(z)} satisfies the front-door criterion for {x} and {y}")
    return style.choice(_STRATEGIES["frontdoor_set"]), steps, z


def _pairs(q) -> list[tuple[str, str]]:
    xs, ys = _as_set(q["x"]), _as_set(q["y"])
    return [(a, b) for a in sorted(xs, key=node_sort_key) for b in sorted(ys, key=node_sort_key)]


def _all_paths(g, q, limit) -> list[Path]:
    out: list[Path] = []
    for a, b in _pairs(q):
        out += C.simple_paths(g, a, b, limit=limit - len(out))
        if len(out) >= limit:
            break
    return out


def _separation(g, q, cpts, style):
    kind = q["kind"]
    z = _pick(_valid_sets(g, q), style)
    x, y = _fmt_nodes(_as_set(q["x"])), _fmt_nodes(_as_set(q["y"]))
    paths = _all_paths(g, q, _PATH_SCAN)
    steps = []
    if paths:
        steps += _path_steps(g, paths, z, "path", style, len(paths) >= _PATH_SCAN)
    else:
        steps.append(f"no path joins {x} and {y} at all")
    if q.get("variant") == "minimal":

        def find_open(s):
            for p in _all_paths(g, q, 10_000):
                if _block_reason(g, p, s, style) is None:
                    return p
            return None

        steps += _minimality_steps(g, z, find_open, style, "path")
    sep = "d-separates" if kind == "dsep_set" else "m-separates"
    steps.append(f"so {_fmt_set(z)} {sep} {x} and {y}")
    return style.choice(_STRATEGIES[kind]), steps, z


def _ci_test(g, q, cpts, style):
    given = _as_set(q.get("given"))
    x, y = _fmt_nodes(_as_set(q["x"])), _fmt_nodes(_as_set(q["y"]))
    separated = C.m_separated(g, _as_set(q["x"]), _as_set(q["y"]), given)
    word = "d-separated" if g.kind == "DAG" else "m-separated"
    steps = [f"conditioning set: {_fmt_set(given)}"]
    if separated:
        paths = _all_paths(g, q, _PATH_SCAN)
        if paths:
            steps += _path_steps(g, paths, given, "path", style, len(paths) >= _PATH_SCAN)
        else:
            steps.append(f"no path joins {x} and {y}")
        steps.append(f"every path is blocked, so {x} and {y} are {word} given {_fmt_set(given)}: yes")
    else:
        witness = next(
            (p for p in _all_paths(g, q, 10_000) if _block_reason(g, p, given, style) is None), None
        )
        if witness is not None:
            steps.append(f"path {witness} is open: {_open_reason(g, witness, given)}")
        else:
            steps.append(f"some path between {x} and {y} stays open given {_fmt_set(given)}")
        steps.append(f"so {x} and {y} are not {word} given {_fmt_set(given)}: no")
    strategy = "d-separation" if g.kind == "DAG" else style.choice(("m-separation", "d-separation"))
    return strategy, steps, separated


def _directed_path(g, q, cpts, style):
    x, y = q["treatment"], q["outcome"]
    paths = C.directed_paths(g, x, y, limit=_CHOICES)
    if paths:
        p = _pick(paths, style)
        steps = [f"edge {a} -> {b}" for a, b in itertools.pairwise(p.nodes)]
        if len(steps) == 1:
            steps.insert(0, f"children of {x}: {_fmt_set(g.children(x))}")
        steps.append(f"so the directed path {p} exists and intervening on {x} can change {y}: yes")
        return style.choice(_STRATEGIES["directed_path"]), steps, True
    # breadth-first layers of descendants, then the verdict
    steps, seen, layer = [], {x}, [x]
    while layer:
        nxt = sorted({c for v in layer for c in g.children(v)} - seen, key=node_sort_key)
        if not nxt:
            break
        steps.append(f"from {_fmt_set(layer)} we reach {_fmt_set(nxt)}")
        seen.update(nxt)
        layer = nxt
    desc = sorted(seen - {x}, key=node_sort_key)
    if not desc:
        steps.append(f"{x} has no children, so it has no descendants")
        steps.append(f"{y} is not a descendant of {x}, so intervening on {x} cannot change {y}: no")
    else:
        steps.append(
            f"{y} is not among the descendants {_fmt_set(desc)} of {x}, so intervening on {x} cannot change {y}: no"
        )
    return style.choice(_STRATEGIES["directed_path"]), steps, False


def _mediator(g, q, cpts, style):
    x, y = q["treatment"], q["outcome"]
    m = _pick(sorted(C.mediators(g, x, y), key=node_sort_key), style)
    # acyclic graph: a directed path to m joined to one from m is simple
    left = _pick(C.directed_paths(g, x, m, limit=_CHOICES), style)
    right = _pick(C.directed_paths(g, m, y, limit=_CHOICES), style)
    path = Path(left.nodes + right.nodes[1:], left.marks + right.marks)
    steps = [
        f"directed path {left} leads from {x} to {m}",
        f"directed path {right} leads from {m} to {y}",
        f"so {m} lies on the directed path {path} and mediates the effect of {x} on {y}",
    ]
    return style.choice(_STRATEGIES["mediator"]), steps, m


def _cycle(g, q, cpts, style):
    cyc = list(_pick(C.simple_cycles(g, limit=_CHOICES), style))
    k = 0 if style.plain else style.rng.randrange(len(cyc))
    cyc = cyc[k:] + cyc[:k]
    closed = [*cyc, cyc[0]]
    steps = [f"edge {a} -> {b}" for a, b in itertools.pairwise(closed)]
    steps.append(f"the last edge returns to {cyc[0]}, so {' -> '.join(closed)} is a directed cycle")
    return style.choice(_STRATEGIES["cycle"]), steps, tuple(cyc)


# ---------------------------------------------------------------------------------------------
# ATE
def _joint(cpts: Mapping, variables: Sequence[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """All assignments of the ancestral closure of ``variables`` and their probabilities.

    Returns ``(names, assignments (2^k x k, 0/1), probabilities (2^k))``.
    """
    closure, stack = set(), list(variables)
    while stack:
        v = stack.pop()
        if v not in closure:
            closure.add(v)
            stack.extend(cpts[v].get("parents") or [])
    names = sorted(closure, key=node_sort_key)
    col = {v: i for i, v in enumerate(names)}
    grid = np.array(list(itertools.product((0, 1), repeat=len(names))), dtype=np.int64).reshape(
        -1, len(names)
    )
    prob = np.ones(len(grid))
    for v in names:
        parents = list(cpts[v].get("parents") or [])
        p1 = cpts[v]["p1"]
        if not parents:
            pv = np.full(len(grid), float(p1 if isinstance(p1, (int, float)) else p1[""]))
        else:
            # CPT keys follow itertools.product order, so a row's key index is its parent bits read
            # as a binary number with the first parent most significant.
            table = np.array(
                [
                    float(p1[",".join(map(str, bits))])
                    for bits in itertools.product((0, 1), repeat=len(parents))
                ]
            )
            weights = 1 << np.arange(len(parents) - 1, -1, -1)
            pv = table[grid[:, [col[u] for u in parents]] @ weights]
        prob *= np.where(grid[:, col[v]] == 1, pv, 1.0 - pv)
    return names, grid, prob


def stratum_table(
    cpts: Mapping, x: str, y: str, zs: Sequence[str]
) -> list[tuple[tuple[int, ...], float, float, float]]:
    """Per stratum ``z`` of ``zs`` (natural order): ``(z, P(z), P(y=1 | x=1, z), P(y=1 | x=0, z))``.

    The adjustment formula is ``ψ = Σ_z [P(y=1|x=1,z) − P(y=1|x=0,z)] P(z)``. Strata with P(z) = 0 are
    skipped; a zero P(x, z) with P(z) > 0 (positivity) raises ``ValueError``.
    """
    zs = sorted(zs, key=node_sort_key)
    names, grid, prob = _joint(cpts, [x, y, *zs])
    col = {v: i for i, v in enumerate(names)}
    rows = []
    for zv in itertools.product((0, 1), repeat=len(zs)):
        in_z = np.ones(len(grid), dtype=bool)
        for v, b in zip(zs, zv):
            in_z &= grid[:, col[v]] == b
        pz = float(prob[in_z].sum())
        if pz <= 1e-12:
            continue
        cond = []
        for a in (1, 0):
            in_xz = in_z & (grid[:, col[x]] == a)
            den = float(prob[in_xz].sum())
            if den <= 1e-12:
                raise ValueError(f"positivity fails for {x}={a} in stratum {dict(zip(zs, zv))}")
            cond.append(float(prob[in_xz & (grid[:, col[y]] == 1)].sum()) / den)
        rows.append((zv, pz, cond[0], cond[1]))
    return rows


def _ate(g, q, cpts, style):
    x, y = q["treatment"], q["outcome"]
    threshold = float(q["threshold"])
    sets = _valid_sets(g, {"kind": "backdoor_set", "treatment": x, "outcome": y})
    # mostly a smallest set (fewest strata), sometimes another small one
    fewest = min(map(len, sets), default=0)
    small = [s for s in sets if len(s) == fewest] if not style.coin(0.3) else [s for s in sets if len(s) <= 2]
    z = _pick(small or sets, style)
    zs = sorted(z, key=node_sort_key)
    steps = []
    paths = C.backdoor_paths(g, x, y, limit=_PATH_SCAN)
    if paths:
        steps += _path_steps(g, paths, z, "backdoor path", style, len(paths) >= _PATH_SCAN)
        steps.append(
            f"{_fmt_set(z)} has no descendant of {x} and blocks every backdoor path, so adjust for it"
        )
    elif z:
        steps.append(
            f"there is no backdoor path from {x} to {y}; {_fmt_set(z)} has no descendant of {x}, so adjusting for it is valid"
        )
    else:
        steps.append(f"there is no backdoor path from {x} to {y}, so no adjustment is needed")
    table = stratum_table(cpts, x, y, zs)
    terms = []
    for zv, pz, p1, p0 in table:
        cond = ", ".join(f"{v}={b}" for v, b in zip(zs, zv))
        if zs:
            steps.append(
                f"stratum {cond}: P({cond}) = {pz:.3f}, P({y}=1 | {x}=1, {cond}) = {p1:.3f}, "
                f"P({y}=1 | {x}=0, {cond}) = {p0:.3f}, difference {p1 - p0:.3f}"
            )
            terms.append(f"{p1 - p0:.3f} × {pz:.3f}")
        else:
            steps.append(f"P({y}=1 | {x}=1) = {p1:.3f} and P({y}=1 | {x}=0) = {p0:.3f}")
            terms.append(f"{p1:.3f} − {p0:.3f}")
    psi = sum((p1 - p0) * pz for _, pz, p1, p0 in table)
    steps.append(f"ψ = {' + '.join(terms)} = {psi:.3f}")
    decision = psi > threshold
    side = ">" if decision else "<"
    steps.append(f"{psi:.3f} {side} threshold {threshold:g}, so the answer is {'yes' if decision else 'no'}")
    return style.choice(_STRATEGIES["ate"]), steps, (decision, psi, z)


_DERIVE = {
    "backdoor_set": _backdoor,
    "frontdoor_set": _frontdoor,
    "dsep_set": _separation,
    "msep_set": _separation,
    "ci_test": _ci_test,
    "directed_path": _directed_path,
    "mediator": _mediator,
    "cycle": _cycle,
    "ate": _ate,
}


# ---------------------------------------------------------------------------------------------
# rendering
def _graph_text(g: CausalGraph, style: _Style) -> str:
    edges = [f"{a} -> {b}" for a, b in sorted(g.directed)] + [f"{a} <-> {b}" for a, b in sorted(g.bidirected)]
    if style.plain:
        return g.edge_text()
    touched = {v for e in g.directed | g.bidirected for v in e}
    isolated = [v for v in g.nodes if v not in touched]
    parts = style.shuffled(edges) if style.coin(0.5) else edges
    return style.choice(("; ", ", ")).join(parts + isolated)


def _result_and_answer(kind: str, value: Any, style: _Style) -> tuple[str, str]:
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
        zset = _fmt_set(z)
        result = style.choice(
            (
                f"{word}, ψ = {psi:.3f}, Z = {zset}",
                f"{word} (ψ = {psi:.3f}, adjusting for {zset})",
                f"{word}, adjusting for {zset}",
            )
        )
        return result, (f"{word}, ψ = {psi:.3f}" if style.coin(0.5) else word)
    return text, text


def gold_trace(problem: Mapping | str, rng: random.Random | int | None = None, *, plain: bool = False) -> str:
    """A correct six-slot trace for ``problem``: ``<think>`` with the five slots, then ``<answer>``.

    Args:
        problem: a DESIGN §4 problem (dict or JSON string), any query kind.
        rng: a ``random.Random`` (or an int seed) choosing the valid answer and the wording; the same
            seed gives the same trace.
        plain: fixed wording and the first (smallest) valid answer, for worked examples.

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
        - descendants of X: {Y}; none of them may be adjusted for
        - backdoor path X <- U -> Y is blocked by U, a non-collider that is conditioned on
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
    style = _Style(rng, plain)
    strategy, steps, value = _DERIVE[query["kind"]](graph, query, cpts, style)
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
