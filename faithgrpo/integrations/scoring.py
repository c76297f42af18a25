"""One completion scored by faithgrpo's symbolic rewards and combined as TRL combines them.

TRL sums ``weight · reward`` over the reward functions, leaving out those that return ``None`` for a
completion (a reward that does not apply to its row): `score_completion` does the same for one
completion, with the same reward objects (`faithgrpo.rewards.registry.get_reward_funcs`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

__all__ = ["DEFAULT_WEIGHTS", "SYMBOLIC_REWARDS", "row_of", "score_completion"]

SYMBOLIC_REWARDS = ("outcome", "format", "trace_format", "calver")
# The CPU demo recipe's weights for these four rewards (recipes/configs/cpu_demo.yaml).
DEFAULT_WEIGHTS = {"outcome": 1.0, "format": 0.25, "trace_format": 0.25, "calver": 1.0}


@lru_cache(maxsize=1)
def _rewards() -> tuple:
    from faithgrpo.rewards.registry import get_reward_funcs

    return tuple(get_reward_funcs(list(SYMBOLIC_REWARDS)))


def row_of(ground_truth: Any = None, extra_info: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The row columns (``problem``, ``entry``, ``answer``) from a framework's label fields.

    ``extra_info`` may hold ``problem`` / ``entry`` (and ``answer``); ``ground_truth`` is either the
    listed answer or a JSON object (or dict) with those keys. Anything else gives a row without a
    target, which the rewards score as not applying.

    Example:
        >>> row_of("{U}", {"problem": '{"graph": {}}'})["answer"]
        '{U}'
    """
    row: dict[str, Any] = {"problem": None, "entry": None, "answer": None}
    label = ground_truth
    if isinstance(label, str) and label.lstrip().startswith("{"):
        try:
            decoded = json.loads(label)
        except json.JSONDecodeError:
            decoded = None
        if isinstance(decoded, dict) and {"problem", "entry"} & set(decoded):
            label = decoded
    if isinstance(label, Mapping):
        row.update({k: label.get(k) for k in row if label.get(k) not in (None, "")})
    elif label is not None:
        row["answer"] = str(label)
    if isinstance(extra_info, Mapping):
        # an empty string is a column the row does not use (parquet has no per-row null types)
        row.update({k: extra_info[k] for k in row if extra_info.get(k) not in (None, "")})
    for key in ("problem", "entry"):
        if isinstance(row[key], Mapping):
            row[key] = json.dumps(row[key])
    return row


def score_completion(
    text: str, row: Mapping[str, Any], weights: Mapping[str, float] | None = None
) -> dict[str, float]:
    """``{"score": Σ weight · reward, <reward>: value, ...}`` for one completion; never raises on ``text``.

    A reward that does not apply to the row (``None``) is left out of the sum and reported as 0.0,
    with ``<reward>_applies`` 0.0, so every completion carries the same keys (frameworks log them
    as columns).

    Raises:
        ValueError: ``weights`` names a reward outside `SYMBOLIC_REWARDS`.
    """
    weights = dict(DEFAULT_WEIGHTS if weights is None else weights)
    unknown = sorted(set(weights) - set(SYMBOLIC_REWARDS))
    if unknown:
        raise ValueError(f"weights for unknown rewards {unknown}; use some of {', '.join(SYMBOLIC_REWARDS)}")
    columns = {key: [row.get(key)] for key in ("problem", "entry", "answer")}
    out: dict[str, float] = {"score": 0.0}
    for reward in _rewards():
        name = reward.__name__
        value = reward(prompts=[None], completions=[text if isinstance(text, str) else ""], **columns)[0]
        out[name] = 0.0 if value is None else float(value)
        out[f"{name}_applies"] = 0.0 if value is None else 1.0
        if value is not None:
            out["score"] += weights.get(name, 0.0) * float(value)
    return out
