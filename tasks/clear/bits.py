"""Bitmask graph algorithms for CLEAR-size graphs (separation, adjustment criteria, path enumeration).

The record format these serve is described in :mod:`faithgrpo.tasks.clear`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

from faithgrpo.verifier.graphs.model import CausalGraph

# ---------------------------------------------------------------------------------------------
# bitmask engine (graphs of CLEAR size: brute force over subsets needs fast predicates)
PathKey = tuple[tuple[str, ...], tuple[str, ...]]  # a path as (nodes, marks)


def bits_of(mask: int) -> Iterator[int]:
    """The indices of the set bits of ``mask``, lowest first."""
    while mask:
        low = mask & -mask
        mask ^= low
        yield low.bit_length() - 1


def _closure(start: int, step: list[int]) -> int:
    seen = frontier = start
    while frontier:
        nxt = 0
        for i in bits_of(frontier):
            nxt |= step[i]
        frontier = nxt & ~seen
        seen |= frontier
    return seen


class _Bits:
    """Parents, children, siblings, ancestors and descendants of each node as bitmasks."""

    __slots__ = ("anc", "ch", "des", "index", "names", "pa", "sib")

    def __init__(self, g: CausalGraph) -> None:
        self.names = tuple(g.nodes)
        self.index = {v: i for i, v in enumerate(self.names)}
        n = len(self.names)
        self.pa, self.ch, self.sib = [0] * n, [0] * n, [0] * n
        for a, b in g.directed:
            ia, ib = self.index[a], self.index[b]
            self.pa[ib] |= 1 << ia
            self.ch[ia] |= 1 << ib
        for a, b in g.bidirected:
            ia, ib = self.index[a], self.index[b]
            self.sib[ia] |= 1 << ib
            self.sib[ib] |= 1 << ia
        self.anc = [_closure(1 << i, self.pa) for i in range(n)]  # with the node itself
        self.des = [_closure(1 << i, self.ch) for i in range(n)]

    def mask(self, vs) -> int:
        m = 0
        for v in vs:
            m |= 1 << self.index[v]
        return m

    def connected(self, src: int, targets: int, cond: int, *, cut: bool = False) -> bool:
        """Whether an m-connecting path given ``cond`` joins ``src`` to a node of ``targets``.

        Reachability over (node, arrowhead-at-node) states (Bayes ball; Koller & Friedman Alg.
        3.1, with bi-directed edges as arrowheads at both ends). ``cut`` removes the edges out of
        ``src`` first (the backdoor graph).
        """
        pa, ch, sib = self.pa, self.ch, self.sib
        if cut:
            s = 1 << src
            ch = list(ch)
            ch[src] = 0
            pa = [p & ~s for p in pa]
            an = _closure(cond, pa)
        else:
            an = 0
            for i in bits_of(cond):
                an |= self.anc[i]
        vis_head = ch[src] | sib[src]  # reached with an arrowhead at the node
        vis_tail = pa[src]  # reached with a tail at the node
        if (vis_head | vis_tail) & targets:
            return True
        f_head, f_tail = vis_head, vis_tail
        while f_head | f_tail:
            n_head = n_tail = 0
            for v in bits_of(f_head):
                b = 1 << v
                if not b & cond:  # non-collider: leave by a tail
                    n_head |= ch[v]
                if b & an:  # collider with itself or a descendant conditioned on
                    n_tail |= pa[v]
                    n_head |= sib[v]
            for v in bits_of(f_tail):
                if not (1 << v) & cond:
                    n_head |= ch[v] | sib[v]
                    n_tail |= pa[v]
            n_head &= ~vis_head
            n_tail &= ~vis_tail
            if (n_head | n_tail) & targets:
                return True
            vis_head |= n_head
            vis_tail |= n_tail
            f_head, f_tail = n_head, n_tail
        return False

    def backdoor(self, x: int, y: int, z: int) -> bool:
        if z & ((1 << y) | self.des[x]):  # des[x] holds x
            return False
        return not self.connected(x, 1 << y, z, cut=True)

    def frontdoor(self, x: int, y: int, z: int) -> bool:
        xb, yb = 1 << x, 1 << y
        if z & (xb | yb):
            return False
        seen, frontier = 0, self.ch[x]  # (i) every directed path x -> ... -> y meets z
        while frontier:
            if frontier & yb:
                return False
            frontier &= ~z & ~seen
            seen |= frontier
            nxt = 0
            for v in bits_of(frontier):
                nxt |= self.ch[v]
            frontier = nxt
        if not z:
            return True
        if self.connected(x, z, 0, cut=True):  # (ii) no open backdoor path from x into z
            return False
        # (iii) every backdoor path from each z to y is blocked by x
        return not any(self.connected(v, yb, xb, cut=True) for v in bits_of(z))

    def separated(self, x: int, y: int, z: int) -> bool:
        return not z & ((1 << x) | (1 << y)) and not self.connected(x, 1 << y, z)

    def paths(
        self, x: int, y: int, *, backdoor: bool, limit: int, skeleton: bool = False
    ) -> list[PathKey] | None:
        """Simple paths from x to y as ``(nodes, marks)``: backdoor paths (first edge into x),
        directed paths (every edge ``->``) or, with ``skeleton``, every path of the skeleton;
        ``None`` when there are more than ``limit``.

        Depth-first, entering a node only when y is still reachable from it off the path, so every
        branch ends in a path.
        """
        n = len(self.names)
        if backdoor or skeleton:
            reach = [self.ch[i] | self.pa[i] | self.sib[i] for i in range(n)]
            steps = [
                [("->", j) for j in bits_of(self.ch[i])]
                + [("<-", j) for j in bits_of(self.pa[i])]
                + [("<->", j) for j in bits_of(self.sib[i])]
                for i in range(n)
            ]
            first = steps[x] if skeleton else [(m, j) for m, j in steps[x] if m != "->"]
        else:
            reach = self.ch
            steps = [[("->", j) for j in bits_of(self.ch[i])] for i in range(n)]
            first = steps[x]
        yb = 1 << y

        def reaches(v: int, avoid: int) -> bool:
            seen = frontier = 1 << v
            seen |= avoid
            while frontier:
                nxt = 0
                for i in bits_of(frontier):
                    nxt |= reach[i]
                if nxt & yb:
                    return True
                frontier = nxt & ~seen
                seen |= frontier
            return False

        out: list[tuple[tuple[int, ...], tuple[str, ...]]] = []
        stack = [(1 << x, (x,), (), iter(first))]
        while stack:
            on, nodes, marks, it = stack[-1]
            step = next(it, None)
            if step is None:
                stack.pop()
                continue
            m, w = step
            if (1 << w) & on:
                continue
            if w == y:
                out.append(((*nodes, w), (*marks, m)))
                if len(out) > limit:
                    return None
            elif reaches(w, on):
                stack.append((on | (1 << w), (*nodes, w), (*marks, m), iter(steps[w])))
        names = self.names
        return [(tuple(names[i] for i in ns), ms) for ns, ms in out]

    def blocked(self, nodes: tuple[int, ...], marks: tuple[str, ...], z: int) -> bool:
        if z & ((1 << nodes[0]) | (1 << nodes[-1])):
            return False
        for i in range(1, len(nodes) - 1):
            v = nodes[i]
            if marks[i - 1] in ("->", "<->") and marks[i] in ("<-", "<->"):
                if not self.des[v] & z:
                    return True
            elif (1 << v) & z:
                return True
        return False


@functools.lru_cache(maxsize=1024)
def graph_bits(g: CausalGraph) -> _Bits:
    """The bitmask form of ``g`` (node indices, parent/child/district masks) the CLEAR judge runs on."""
    return _Bits(g)
