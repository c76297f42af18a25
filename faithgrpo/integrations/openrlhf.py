"""OpenRLHF's reward function: ``--remote_rm_url <this file>`` with ``--label_key`` naming the row column.

OpenRLHF calls ``reward_func(queries, prompts, labels)`` with whole texts (prompt + response) and
the prompts, and reads ``rewards`` (for advantages), ``scores`` and ``extra_logs`` from the returned
dict. Each label is the row as a JSON object with ``problem`` (causal problem) or ``entry``
(reasoning-gym entry) and ``answer``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from faithgrpo.integrations.scoring import SYMBOLIC_REWARDS, row_of, score_completion

__all__ = ["reward_func"]


def reward_func(queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any], **kwargs: Any) -> dict:
    """Score a batch for OpenRLHF: the response is the query with its prompt removed.

    Returns:
        ``{"rewards": tensor, "scores": tensor, "extra_logs": {reward: tensor}}`` (float32, one value
        per query).

    Example:
        >>> import json
        >>> problem = {"graph": {"type": "DAG", "nodes": ["U", "X", "Y"], "directed": [["U", "X"], ["U", "Y"],
        ...            ["X", "Y"]]}, "query": {"kind": "backdoor_set", "treatment": "X", "outcome": "Y"}}
        >>> label = json.dumps({"problem": problem, "answer": "{U}"})
        >>> reward_func(["Q <answer>{U}</answer>"], ["Q "], [label])["extra_logs"]["outcome"].tolist()
        [1.0]
    """
    import torch

    rows = []
    for query, prompt, label in zip(queries, prompts, labels):
        response = (
            query[len(prompt) :] if isinstance(query, str) and query.startswith(prompt or "") else query
        )
        rows.append(score_completion(response if isinstance(response, str) else "", row_of(label)))
    scores = torch.tensor([r["score"] for r in rows], dtype=torch.float32)
    logs = {name: torch.tensor([r[name] for r in rows], dtype=torch.float32) for name in SYMBOLIC_REWARDS}
    return {"rewards": scores, "scores": scores, "extra_logs": logs}
