"""Group rank normalisation of CRoS Δ (CRoS step 5; docs/rewards.md, "CRoS"), within a process or across processes.

Within each group of ``G`` completions of one prompt, Δ becomes ``r_i = (rank_i − 1)/(G − 1)`` in
[0, 1] with ascending average ranks (ties share the mean of the ranks they span); a group of one
scores 0.5. Undefined Δ (``None``, or NaN) rank below every defined one and tie among themselves,
or, with ``undefined="none"``, score ``None`` while the rest of the group is ranked among itself.
Under multi-process training a group can straddle processes, so `gathered_group_rank_normalize`
ranks the gathered global batch; everything else here is pure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

__all__ = [
    "average_ranks",
    "gathered_group_rank_normalize",
    "group_ids",
    "group_rank_normalize",
    "rank_normalize",
]


def average_ranks(values: Sequence[float]) -> list[float]:
    """Ascending ranks starting at 1, ties sharing the average of the ranks they span.

    Example:
        >>> average_ranks([0.3, -1.0, 0.3, 2.0])
        [2.5, 1.0, 2.5, 4.0]
    """
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        average = (start + end) / 2 + 1
        for k in range(start, end + 1):
            ranks[order[k]] = average
        start = end + 1
    return ranks


def rank_normalize(deltas: Sequence[float | None], undefined: str = "lowest") -> list[float | None]:
    """Rank-normalise the Δ of one group into [0, 1] (CRoS step 5).

    ``r_i = (rank_i − 1)/(G − 1)`` with ascending average ranks; a group of one scores 0.5.

    Args:
        deltas (`Sequence[float | None]`):
            Δ per completion of the group, ``None`` when undefined.
        undefined (`str`, *optional*, defaults to `"lowest"`):
            ``"lowest"``: undefined Δ rank below every defined one (tied among themselves).
            ``"none"``: undefined Δ score ``None`` and the defined ones are ranked among themselves.

    Returns:
        `list[float | None]`: the normalised rewards.

    Example:
        >>> rank_normalize([0.1, None, 0.5, 0.5])
        [0.3333333333333333, 0.0, 0.8333333333333334, 0.8333333333333334]
        >>> rank_normalize([0.1, None, 0.5], undefined="none")
        [0.0, None, 1.0]
    """
    if undefined not in ("lowest", "none"):
        raise ValueError(f"undefined must be 'lowest' or 'none', got {undefined!r}")
    # NaN cannot be ranked: it counts as undefined (CRoS itself never produces one).
    deltas = [None if d is None or math.isnan(d) else float(d) for d in deltas]
    if undefined == "none":
        defined = [i for i, d in enumerate(deltas) if d is not None]
        out: list[float | None] = [None] * len(deltas)
        for i, r in zip(defined, rank_normalize([deltas[i] for i in defined])):
            out[i] = r
        return out
    if len(deltas) == 1:
        return [0.5]
    keyed = [-math.inf if d is None else d for d in deltas]
    g = len(keyed)
    return [(rank - 1) / (g - 1) for rank in average_ranks(keyed)]


def group_ids(keys: Sequence[Any], num_generations: int | None = None) -> list[int]:
    """Group rows by prompt key and position.

    TRL repeats each prompt ``G`` times consecutively, so a group is a run of consecutive rows
    with the same key; with ``num_generations`` a longer run (the same prompt text drawn twice in
    one batch) is cut into groups of that size.

    Example:
        >>> group_ids(["a", "a", "b", "b", "a"])
        [0, 0, 1, 1, 2]
        >>> group_ids(["a"] * 4, num_generations=2)
        [0, 0, 1, 1]
    """
    ids: list[int] = []
    current, run = -1, 0
    for i, key in enumerate(keys):
        new_run = i == 0 or key != keys[i - 1]
        if new_run or (num_generations is not None and run == num_generations):
            current, run = current + 1, 0
        ids.append(current)
        run += 1
    return ids


def group_rank_normalize(
    deltas: Sequence[float | None],
    keys: Sequence[Any],
    undefined: str = "lowest",
    num_generations: int | None = None,
) -> list[float | None]:
    """Rank-normalise Δ within each group of rows (see `group_ids` and `rank_normalize`).

    Example:
        >>> group_rank_normalize([1.0, 2.0, 5.0], ["p", "p", "q"])
        [0.0, 1.0, 0.5]
    """
    if len(deltas) != len(keys):
        raise ValueError(f"got {len(deltas)} deltas for {len(keys)} group keys")
    members: dict[int, list[int]] = {}
    for row, gid in enumerate(group_ids(keys, num_generations)):
        members.setdefault(gid, []).append(row)
    out: list[float | None] = [None] * len(deltas)
    for rows in members.values():
        for row, value in zip(rows, rank_normalize([deltas[r] for r in rows], undefined)):
            out[row] = value
    return out


def _world() -> tuple[int, int]:
    """(rank, world size) of the default process group, (0, 1) when not distributed."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


def gathered_group_rank_normalize(
    deltas: list[float | None],
    keys: list[Any],
    undefined: str = "lowest",
    num_generations: int | None = None,
    distributed: bool | None = None,
) -> list[float | None]:
    """`group_rank_normalize` of this process's rows, ranked within the global batch when gathering.

    ``distributed=None`` gathers when a process group of more than one process is initialised;
    every process must then call this together. Returns this process's rows only.
    """
    rank, world = _world()
    gather = distributed if distributed is not None else world > 1
    if not gather or world == 1:
        return group_rank_normalize(deltas, keys, undefined, num_generations)
    # Groups may straddle processes: rank over the global batch (rank order = TRL's row order).
    gathered: list[Any] = [None] * world
    torch.distributed.all_gather_object(gathered, (keys, deltas))
    all_keys = [k for part_keys, _ in gathered for k in part_keys]
    all_deltas = [d for _, part_deltas in gathered for d in part_deltas]
    offset = sum(len(part_keys) for part_keys, _ in gathered[:rank])
    ranked = group_rank_normalize(all_deltas, all_keys, undefined, num_generations)
    return ranked[offset : offset + len(deltas)]
