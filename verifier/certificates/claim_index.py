"""The true claims of a derivation indexed for certification: which paths, sets and facts they state.

One job: look claims up by kind and arguments (no parsing, no truth, no certification). The grammar
is documented in :mod:`faithgrpo.verifier.certificates.derivation`.
"""

from __future__ import annotations

from faithgrpo.verifier.certificates.claims import Claim
from faithgrpo.verifier.graphs.edges import Path


def _oriented(path: Path, x: str) -> Path:
    return path if path.nodes[0] == x else path.reversed()


class ClaimIndex:
    """True claims indexed for certification."""

    def __init__(self, claims: list[Claim]):
        self.all = claims

    def paths(self, status: str, given: frozenset[str], x: str, y: str, backdoor: bool = False) -> set[Path]:
        out = set()
        for c in self.all:
            if c.kind == "path" and c.args[1] == status and c.args[2] == given:
                p = c.args[0]
                if {p.nodes[0], p.nodes[-1]} == {x, y}:
                    p = _oriented(p, x)
                    if not backdoor or p.marks[0] in ("<-", "<->"):
                        out.add(p)
        return out

    def directed(self, x: str, y: str) -> set[Path]:
        out = set()
        for c in self.all:
            p = c.args[0] if c.kind in ("directed", "path") else None
            if p is not None and p.nodes[0] == x and p.nodes[-1] == y and all(m == "->" for m in p.marks):
                out.add(p)
        return out

    def no_path(self, x: str, y: str, prefix: str) -> bool:
        """A ``no [prefix] path from x to y`` claim (either direction when undirected)."""
        ends = {(x, y), (y, x)} if prefix == "" else {(x, y)}
        return any(c.kind == "no_path" and c.args[2] == prefix and c.args[:2] in ends for c in self.all)

    def descendant_set(self, x: str) -> frozenset[str] | None:
        return next(
            (c.args[2] for c in self.all if c.kind == "family" and c.args[:2] == ("descendants", x)), None
        )

    def non_descendant(self, v: str, x: str) -> bool:
        desc = self.descendant_set(x)
        if desc is not None and v not in desc:
            return True
        return any(c.kind == "descendant" and c.args == (v, x, False) for c in self.all)

    def separated(self, xs: frozenset[str], ys: frozenset[str], given: frozenset[str]) -> bool:
        return any(
            c.kind == "separation" and c.args[3] and c.args[2] == given and {c.args[0], c.args[1]} == {xs, ys}
            for c in self.all
        )
