"""Stratum probabilities of a binary Bayesian network: the adjustment formula's terms, by enumeration.

The gold ATE traces (:mod:`faithgrpo.tasks.certificates.gold_derivations`) spell out, for each stratum ``z`` of an
adjustment set, ``P(z)``, ``P(y=1 | x=1, z)`` and ``P(y=1 | x=0, z)``, then
``ψ = Σ_z [P(y=1|x=1,z) − P(y=1|x=0,z)] P(z)`` (Pearl 2009, Eq. 3.19). The probabilities come from
enumerating every assignment of the ancestral closure of ``{x, y} ∪ z`` (2^k rows): independent of
the einsum route :mod:`faithgrpo.verifier.graphs.ate` takes, which the verifier uses.

CPTs are ``{variable: {"parents": [...], "p1": P(v=1 | parents)}}`` with ``p1`` a number (no parents)
or a mapping from comma-joined parent bits (``"0,1"``, in ``itertools.product`` order) to a number.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from faithgrpo.verifier.graphs.model import node_sort_key

if TYPE_CHECKING:
    import numpy as np

__all__ = ["stratum_table"]


def _joint(cpts: Mapping, variables: Sequence[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """All assignments of the ancestral closure of ``variables`` and their probabilities.

    Returns ``(names, assignments (2^k x k, 0/1), probabilities (2^k))``.
    """
    import numpy as np  # loaded with the first ATE stratum table

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
    import numpy as np  # loaded with the first ATE stratum table

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
