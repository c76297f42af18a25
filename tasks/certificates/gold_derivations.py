"""The DERIVATION of a gold trace (:mod:`faithgrpo.tasks.certificates.gold`), one builder per query kind.

A builder ``(graph, query, cpts, style) -> (strategy, steps, value)`` picks a valid answer (``style``
holds the random choices) and writes the certificate for it in the claim grammar of
:mod:`faithgrpo.verifier.certificates.derivation`: the paths found with their status given the answer set, the
non-descendants, the directed path or cycle, the stratum probabilities and ψ, with prose around the
claims. :data:`DERIVATION_BUILDERS` maps each query kind to its builder.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from faithgrpo.tasks.certificates.gold_style import GOLD_STRATEGIES, GoldStyle
from faithgrpo.verifier import graphs as C
from faithgrpo.verifier.answers import format_set
from faithgrpo.verifier.certificates.derivation import DEFAULT_MAX_PATHS
from faithgrpo.verifier.graphs.edges import Path
from faithgrpo.verifier.graphs.model import CausalGraph, node_sort_key
from faithgrpo.verifier.graphs.strata import stratum_table
from faithgrpo.verifier.query_kinds import QUERY_KINDS

#: Paths spelled out per criterion: the certificate's cap (more paths than this: the shortest ones).
MAX_LISTED_PATHS = DEFAULT_MAX_PATHS
_CHOICES = 16  # valid answers the trace picks from
_MAX_CHECKS = 1024  # candidate subsets examined when listing valid answers
_WITNESS_SCAN = 20_000  # paths scanned for an open witness
_ALL_MARKS = ("->", "<-", "<->")


def _fmt_nodes(nodes: Any) -> str:
    nodes = sorted(nodes, key=node_sort_key)
    return nodes[0] if len(nodes) == 1 else format_set(nodes)


def _as_set(v: Any) -> frozenset[str]:
    return frozenset([v] if isinstance(v, str) else v or [])


# ---------------------------------------------------------------------------------------------
# claims (the grammar of faithgrpo.verifier.certificates.derivation) and the prose around them
def _why_blocked(g: CausalGraph, path: Path, z: frozenset[str]) -> str:
    """Prose after ';' (ignored by the checker): the first node that blocks ``path`` given ``z``."""
    for i in range(1, len(path.nodes) - 1):
        v = path.nodes[i]
        if C.is_collider(path, i):
            if v not in z and not (g.descendants(v) & z):
                return f"{v} is a collider with nothing at or below it conditioned on"
        elif v in z:
            return f"{v} is a conditioned non-collider"
    return ""


def _is_open(g: CausalGraph, path: Path, z: frozenset[str]) -> bool:
    return not C.path_is_blocked(g, path, z)


def _path_claim(g: CausalGraph, path: Path, z: frozenset[str], style: GoldStyle, prefix: str = "") -> str:
    status = "open" if _is_open(g, path, z) else "blocked"
    claim = f"{prefix}path {path} is {status} given {format_set(z)}"
    if status == "blocked" and style.coin(0.5):
        claim += f"; {_why_blocked(g, path, z)}"
    return claim


def _listed_paths(
    g: CausalGraph, pairs: list[tuple[str, str]], first: tuple[str, ...], marks: tuple[str, ...] = _ALL_MARKS
) -> list[Path]:
    """The paths a certificate lists: all of them (in search order) when there are at most the cap,
    else the cap's worth of *shortest* ones.

    Beyond the cap any distinct ones certify a valid RESULT (:mod:`faithgrpo.verifier.certificates.derivation`); the
    search order of :func:`~faithgrpo.verifier.graphs.paths.simple_paths` finds long detours first on large
    graphs (lines of thousands of characters on a 200-node network), so shortest ones are listed.
    """
    paths: list[Path] = []
    for x, y in pairs:
        paths += C.simple_paths(
            g, x, y, first_marks=first, marks=marks, limit=MAX_LISTED_PATHS + 1 - len(paths)
        )
        if len(paths) > MAX_LISTED_PATHS:
            break
    if len(paths) <= MAX_LISTED_PATHS:
        return paths
    shortest = _shortest_paths(g, pairs, first, marks, MAX_LISTED_PATHS)
    return shortest if len(shortest) == MAX_LISTED_PATHS else paths[:MAX_LISTED_PATHS]


def _shortest_paths(
    g: CausalGraph, pairs: list[tuple[str, str]], first: tuple[str, ...], marks: tuple[str, ...], k: int
) -> list[Path]:
    """Up to ``k`` distinct simple paths between the pairs, shortest first (natural order within a length).

    Iterative deepening over the path length with a distance bound (a node farther from the target
    than the remaining length is not entered), as :func:`_open_witness`; at most
    :data:`_WITNESS_SCAN` search steps per pair and length, so fewer than ``k`` may come back.
    """
    nbrs = g.adjacency
    allowed = frozenset(marks)
    found: list[tuple[int, int, Path]] = []
    for index, (x, y) in enumerate(pairs):
        dist = _distances_to(nbrs, y, allowed)
        if x not in dist:
            continue
        mine = 0
        for length in range(max(dist[x], 1), len(g.nodes)):
            if mine >= k:
                break
            steps = 0
            stack = [((x,), ())]
            while stack and steps < _WITNESS_SCAN and mine < k:
                nodes, ms = stack.pop()
                steps += 1
                for m, b in reversed(nbrs[nodes[-1]]):
                    if m not in allowed or b in nodes or b not in dist or len(nodes) + dist[b] > length:
                        continue
                    if len(nodes) == 1 and m not in first:
                        continue
                    if b == y:
                        if len(nodes) == length:
                            found.append((length, index, Path((*nodes, b), (*ms, m))))
                            mine += 1
                    elif len(nodes) < length:
                        stack.append(((*nodes, b), (*ms, m)))
    found.sort(key=lambda t: (t[0], t[1]))
    return [p for _, _, p in found[:k]]


def _distances_to(nbrs, y: str, allowed: frozenset[str]) -> dict[str, int]:
    """Fewest steps from each node to ``y`` along ``allowed`` marks (read from the node's side)."""
    # step v -m-> w is allowed when m is; walk backwards from y: w's neighbour v reaches w by the
    # mark v sees, which is the reverse of the mark w sees
    reverse = {"->": "<-", "<-": "->", "<->": "<->"}
    dist = {y: 0}
    frontier = [y]
    while frontier:
        nxt = []
        for w in frontier:
            for m, v in nbrs[w]:
                if v not in dist and reverse[m] in allowed:
                    dist[v] = dist[w] + 1
                    nxt.append(v)
        frontier = nxt
    return dist


def _blocked_steps(
    g: CausalGraph, pairs: list[tuple[str, str]], z: frozenset[str], style: GoldStyle, *, backdoor: bool
) -> list[str]:
    """Claims that ``z`` blocks every (backdoor) path between the pairs (:func:`_listed_paths`)."""
    first = ("<-", "<->") if backdoor else _ALL_MARKS
    prefix = "backdoor " if backdoor else ""
    return [_path_claim(g, p, z, style, prefix) for p in _listed_paths(g, pairs, first)]


def _open_witness(
    g: CausalGraph, pairs: list[tuple[str, str]], z: frozenset[str], *, backdoor: bool
) -> Path | None:
    """A shortest open (backdoor) path between the pairs given ``z``, or ``None``.

    Iterative deepening over path length with a distance bound (a node farther from the target than
    the remaining length is not entered), so short witnesses are found before the depth-first order
    of :func:`~faithgrpo.verifier.graphs.paths.simple_paths` would reach them on large graphs. Only paths
    that can still be open are extended: every node of an open path lies in An({x, y} ∪ z), and an
    inner node that already blocks the prefix (a non-collider in ``z``, a collider outside An(z))
    ends the branch. Pruning removes no open path, so the witness is the first open path of the
    unpruned search order. Bounded by :data:`_WITNESS_SCAN` steps per pair.
    """
    nbrs = g.adjacency
    z_anc = g.ancestors(z, include_self=True) if z else frozenset()
    for x, y in pairs:
        allowed = g.ancestors({x, y}, include_self=True) | z_anc
        dist = {y: 0}
        frontier = [y]
        while frontier:
            nxt = []
            for v in frontier:
                for _, w in nbrs[v]:
                    if w not in dist and w in allowed:
                        dist[w] = dist[v] + 1
                        nxt.append(w)
            frontier = nxt
        if x not in dist:
            continue
        steps = 0
        for length in range(dist[x], len(g.nodes)):
            stack = [((x,), ())]
            while stack and steps < _WITNESS_SCAN:
                nodes, marks = stack.pop()
                steps += 1
                for m, b in reversed(nbrs[nodes[-1]]):
                    if b in nodes or b not in dist or len(nodes) + dist[b] > length + 1:
                        continue
                    if len(nodes) == 1 and backdoor and m not in ("<-", "<->"):
                        continue
                    if len(nodes) > 1 and _blocks(nodes[-1], marks[-1], m, z, z_anc):
                        continue  # the last node, now inner, blocks every extension
                    if b == y:
                        path = Path((*nodes, b), (*marks, m))
                        if _is_open(g, path, z):
                            return path
                    elif len(nodes) < length:
                        stack.append(((*nodes, b), (*marks, m)))
    return None


def _blocks(v: str, into: str, out: str, z: frozenset[str], z_anc: frozenset[str]) -> bool:
    """Whether inner node ``v`` (reached by mark ``into``, left by ``out``) blocks a path given ``z``."""
    collider = into in ("->", "<->") and out in ("<-", "<->")
    return v not in z_anc if collider else v in z


def _minimality_steps(
    g: CausalGraph, pairs, z: frozenset[str], style: GoldStyle, *, backdoor: bool
) -> list[str]:
    """For each member of a minimal set, a path that opens without it."""
    steps = []
    prefix = "backdoor " if backdoor else ""
    for v in style.shuffled(sorted(z, key=node_sort_key)):
        witness = _open_witness(g, pairs, z - {v}, backdoor=backdoor)
        if witness is not None:
            steps.append(f"{prefix}path {witness} is open given {format_set(z - {v})}; so {v} is needed")
    return steps


def _non_descendant_steps(g: CausalGraph, x: str, z: frozenset[str], style: GoldStyle) -> list[str]:
    if style.coin(0.5) or not z:
        return [f"descendants of {x} = {format_set(g.descendants(x))}"]
    return [f"{v} is not a descendant of {x}" for v in sorted(z, key=node_sort_key)]


def _pick(values: list, style: GoldStyle) -> Any:
    if style.forced is not None:
        return style.forced
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
    elif kind == "frontdoor_set" and q.get("variant", "any") != "maximal":
        z = C.minimal_frontdoor_set(g, q["treatment"], q["outcome"])
    elif kind in ("dsep_set", "msep_set"):
        z = C.minimal_m_separator(g, _as_set(q["x"]), _as_set(q["y"]))
    else:
        z = None
    return [] if z is None else [z]


# ---------------------------------------------------------------------------------------------
# per-kind derivations: (strategy, steps, value)
def _backdoor_certificate(g, x, y, z, style, variant="any") -> list[str]:
    steps = (
        [f"descendants of {x} = {format_set(g.descendants(x))}"]
        if variant == "maximal"
        else _non_descendant_steps(g, x, z, style)
    )
    blocked = _blocked_steps(g, [(x, y)], z, style, backdoor=True)
    steps += blocked or [f"no backdoor path from {x} to {y}"]
    if variant == "minimal":
        steps += _minimality_steps(g, [(x, y)], z, style, backdoor=True)
    if variant == "maximal":
        steps += _backdoor_maximality_steps(g, x, y, z, style)
    return steps


def _backdoor_maximality_steps(g, x, y, z, style) -> list[str]:
    """For each candidate outside a maximal set, a backdoor path that opens when it is added."""
    rest = C.backdoor_candidates(g, x, y) - z
    if not rest:
        return [f"every variable that is not {x}, {y} or a descendant of {x} is included"]
    steps = []
    for v in style.shuffled(sorted(rest, key=node_sort_key)):
        witness = _open_witness(g, [(x, y)], z | {v}, backdoor=True)
        if witness is not None:
            steps.append(
                f"backdoor path {witness} is open given {format_set(z | {v})}; so {v} cannot be added"
            )
    return steps


def _backdoor(g, q, cpts, style):
    x, y = q["treatment"], q["outcome"]
    variant = q.get("variant", "any")
    z = _pick(_valid_sets(g, q), style)
    steps = _backdoor_certificate(g, x, y, z, style, variant)
    steps.append(
        style.choice(
            (
                f"so {format_set(z)} satisfies the backdoor criterion for {x} and {y}",
                f"hence adjusting for {format_set(z)} identifies the effect of {x} on {y}",
            )
        )
    )
    return style.choice(GOLD_STRATEGIES["backdoor_set"]), steps, z


def _frontdoor(g, q, cpts, style):
    x, y = q["treatment"], q["outcome"]
    z = _pick(_valid_sets(g, q), style)
    dpaths = _listed_paths(g, [(x, y)], ("->",), ("->",))
    steps = [f"directed path {p}" for p in dpaths] or [f"no directed path from {x} to {y}"]
    for v in sorted(z, key=node_sort_key):
        steps += _blocked_steps(g, [(x, v)], frozenset(), style, backdoor=True) or [
            f"no backdoor path from {x} to {v}"
        ]
        steps += _blocked_steps(g, [(v, y)], frozenset({x}), style, backdoor=True) or [
            f"no backdoor path from {v} to {y}"
        ]
    variant = q.get("variant", "any")
    if variant == "minimal":
        for v in style.shuffled(sorted(z, key=node_sort_key)):
            path = _directed_via(g, x, v, y, z - {v})
            if path is not None:
                steps.append(f"directed path {path}; it meets {format_set(z)} only at {v}, so {v} is needed")
    if variant == "maximal":
        for v in style.shuffled(sorted(g.node_set - z - {x, y}, key=node_sort_key)):
            witness = _open_witness(g, [(x, v)], frozenset(), backdoor=True)
            if witness is not None:
                steps.append(f"backdoor path {witness} is open given {{}}; so {v} breaks condition (ii)")
                continue
            witness = _open_witness(g, [(v, y)], frozenset({x}), backdoor=True)
            if witness is not None:
                steps.append(f"backdoor path {witness} is open given {{{x}}}; so {v} breaks condition (iii)")
    steps.append(f"so {format_set(z)} satisfies the front-door criterion for {x} and {y}")
    return style.choice(GOLD_STRATEGIES["frontdoor_set"]), steps, z


def _directed_via(g: CausalGraph, x: str, v: str, y: str, avoid: frozenset[str]) -> Path | None:
    """A shortest directed path x -> ... -> v -> ... -> y with no node in ``avoid``, or ``None``.

    In an acyclic graph the two halves share only v, so the joined path is simple.
    """

    def shortest(a: str, b: str) -> list[str] | None:
        prev: dict[str, str | None] = {a: None}
        frontier = [a]
        while frontier:
            nxt = []
            for u in frontier:
                for c in sorted(g.children(u), key=node_sort_key):
                    if c in prev or c in avoid:
                        continue
                    prev[c] = u
                    if c == b:
                        out = [b]
                        while prev[out[-1]] is not None:
                            out.append(prev[out[-1]])
                        return out[::-1]
                    nxt.append(c)
            frontier = nxt
        return None

    left, right = shortest(x, v), shortest(v, y)
    if left is None or right is None:
        return None
    nodes = (*left, *right[1:])
    return Path(nodes, ("->",) * (len(nodes) - 1))


def _pairs(q) -> list[tuple[str, str]]:
    xs, ys = _as_set(q["x"]), _as_set(q["y"])
    return [(a, b) for a in sorted(xs, key=node_sort_key) for b in sorted(ys, key=node_sort_key)]


def _separation_steps(g, q, z, style, word) -> list[str]:
    x, y = _fmt_nodes(_as_set(q["x"])), _fmt_nodes(_as_set(q["y"]))
    steps = _blocked_steps(g, _pairs(q), z, style, backdoor=False)
    return steps or [f"{x} and {y} are {word} given {format_set(z)}"]


def _separation(g, q, cpts, style):
    kind = q["kind"]
    z = _pick(_valid_sets(g, q), style)
    x, y = _fmt_nodes(_as_set(q["x"])), _fmt_nodes(_as_set(q["y"]))
    word = "d-separated" if kind == "dsep_set" else "m-separated"
    steps = _separation_steps(g, q, z, style, word)
    if q.get("variant") == "minimal":
        steps += _minimality_steps(g, _pairs(q), z, style, backdoor=False)
    sep = "d-separates" if kind == "dsep_set" else "m-separates"
    steps.append(f"so {format_set(z)} {sep} {x} and {y}")
    return style.choice(GOLD_STRATEGIES[kind]), steps, z


def _ci_test(g, q, cpts, style):
    given = _as_set(q.get("given"))
    x, y = _fmt_nodes(_as_set(q["x"])), _fmt_nodes(_as_set(q["y"]))
    separated = C.m_separated(g, _as_set(q["x"]), _as_set(q["y"]), given)
    word = "d-separated" if g.kind == "DAG" else "m-separated"
    if separated:
        steps = _separation_steps(g, q, given, style, word)
        steps.append(f"every path is blocked, so {x} and {y} are {word} given {format_set(given)}: yes")
    else:
        witness = _open_witness(g, _pairs(q), given, backdoor=False)
        steps = [] if witness is None else [f"path {witness} is open given {format_set(given)}"]
        steps.append(f"so {x} and {y} are not {word} given {format_set(given)}: no")
    strategy = "d-separation" if g.kind == "DAG" else style.choice(("m-separation", "d-separation"))
    return strategy, steps, separated


def _directed_path(g, q, cpts, style):
    x, y = q["treatment"], q["outcome"]
    paths = C.directed_paths(g, x, y, limit=_CHOICES)
    if paths:
        p = _pick(paths, style)
        steps = [f"edge {a} -> {b}" for a, b in itertools.pairwise(p.nodes)] if style.coin(0.5) else []
        steps.append(f"directed path {p}")
        steps.append(f"so intervening on {x} can change {y}: yes")
        return style.choice(GOLD_STRATEGIES["directed_path"]), steps, True
    desc = g.descendants(x)
    if style.coin(0.5):
        steps = [f"descendants of {x} = {format_set(desc)}", f"{y} is not among them"]
    else:
        steps = [f"no directed path from {x} to {y}"]
    steps.append(f"so intervening on {x} cannot change {y}: no")
    return style.choice(GOLD_STRATEGIES["directed_path"]), steps, False


def _mediator(g, q, cpts, style):
    x, y = q["treatment"], q["outcome"]
    m = _pick(sorted(C.mediators(g, x, y), key=node_sort_key), style)
    # acyclic graph: a directed path to m joined to one from m is simple
    left = _pick(C.directed_paths(g, x, m, limit=_CHOICES), style)
    right = _pick(C.directed_paths(g, m, y, limit=_CHOICES), style)
    path = Path(left.nodes + right.nodes[1:], left.marks + right.marks)
    if style.coin(0.5):
        steps = [f"directed path {left}", f"directed path {right}"]
    else:
        steps = [f"directed path {path}"]
    steps.append(f"so {m} lies on a directed path from {x} to {y} and mediates the effect of {x} on {y}")
    return style.choice(GOLD_STRATEGIES["mediator"]), steps, m


def _cycle(g, q, cpts, style):
    cyc = list(_pick(C.simple_cycles(g, limit=_CHOICES), style))
    k = 0 if style.plain else style.rng.randrange(len(cyc))
    cyc = cyc[k:] + cyc[:k]
    closed = [*cyc, cyc[0]]
    steps = [f"edge {a} -> {b}" for a, b in itertools.pairwise(closed)] if style.coin(0.5) else []
    steps.append(f"cycle {' -> '.join(closed)}")
    steps.append(f"the last edge returns to {cyc[0]}, so this is a directed cycle")
    return style.choice(GOLD_STRATEGIES["cycle"]), steps, tuple(cyc)


# ---------------------------------------------------------------------------------------------
# ATE
def _ate(g, q, cpts, style):
    x, y = q["treatment"], q["outcome"]
    threshold = float(q["threshold"])
    sets = _valid_sets(g, {"kind": "backdoor_set", "treatment": x, "outcome": y})
    # mostly a smallest set (fewest strata), sometimes another small one
    fewest = min(map(len, sets), default=0)
    small = [s for s in sets if len(s) == fewest] if not style.coin(0.3) else [s for s in sets if len(s) <= 2]
    z = _pick(small or sets, style)
    zs = sorted(z, key=node_sort_key)
    steps = _backdoor_certificate(g, x, y, z, style)
    steps.append(f"so adjust for {format_set(z)}")
    table = stratum_table(cpts, x, y, zs)
    terms = []
    for zv, pz, p1, p0 in table:
        cond = ", ".join(f"{v}={b}" for v, b in zip(zs, zv))
        if zs:
            steps += [
                f"P({cond}) = {pz:.3f}",
                f"P({y}=1 | {x}=1, {cond}) = {p1:.3f}",
                f"P({y}=1 | {x}=0, {cond}) = {p0:.3f}",
            ]
            terms.append(f"({p1:.3f} − {p0:.3f}) × {pz:.3f}")
        else:
            steps += [f"P({y}=1 | {x}=1) = {p1:.3f}", f"P({y}=1 | {x}=0) = {p0:.3f}"]
            terms.append(f"{p1:.3f} − {p0:.3f}")
    psi = sum((p1 - p0) * pz for _, pz, p1, p0 in table)
    steps.append(f"ψ = {' + '.join(terms)} = {psi:.3f}")
    decision = psi > threshold
    side = ">" if decision else "<"
    steps.append(f"{psi:.3f} {side} threshold {threshold:g}, so the answer is {'yes' if decision else 'no'}")
    return style.choice(GOLD_STRATEGIES["ate"]), steps, (decision, psi, z)


DERIVATION_BUILDERS = {
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
