"""Gold-trace SFT rows: the warm start that teaches a small policy the trace format (issue 7).

A 135M model rarely writes the six-slot trace or ``<answer>`` tags on its own, so GRPO rewards are
mostly 0 or undefined at first. A little SFT on correct traces fixes that (Yu et al. 2026 found a
small SFT before RLVR is what makes reasoning causally important; DeepSeek-R1 used a cold start).

Rows are TRL's conversational *prompt-completion* format, so ``SFTTrainer`` trains on the
assistant's trace only::

    {"prompt": [system, user], "completion": [{"role": "assistant", "content": trace}], "task": ...}
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Mapping
from typing import Any

from faithgrpo.tasks.certificates.gold import gold_trace
from faithgrpo.tasks.mix import TaskMixConfig, build_dataset

GOLD_STYLES = ("varied", "plain")


def gold_completion(row: Mapping[str, Any], rng: random.Random, *, plain: bool = False) -> str | None:
    """A correct trace for one training row (see :func:`faithgrpo.tasks.mix.to_trl_row`).

    Causal rows get :func:`~faithgrpo.tasks.certificates.gold.gold_trace` (``plain``: one fixed wording and the
    smallest valid answer, which a small policy learns from fewer traces); Knights & Knaves rows
    :func:`~faithgrpo.tasks.knights_knaves.gold.gold_kk_trace`. Other reasoning-gym tasks have no
    symbolic trace: ``None``.
    """
    if row.get("problem"):
        return gold_trace(row["problem"], rng, plain=plain)
    entry = row.get("entry")
    if entry:
        entry = json.loads(entry) if isinstance(entry, str) else entry
        if (entry.get("metadata") or {}).get("source_dataset") == "knights_knaves":
            from faithgrpo.tasks.knights_knaves.gold import gold_kk_trace

            return gold_kk_trace(entry["metadata"], rng)
    return None


def build_sft_dataset(config: TaskMixConfig | Mapping[str, Any], gold_style: str = "varied"):
    """Gold-trace SFT rows for the rows of :func:`~faithgrpo.tasks.mix.build_dataset` that have one.

    Args:
        config: the task mixture (same fields as for GRPO). Rows of tasks without a gold trace are
            dropped, so ``len(result) <= config.size``.
        gold_style: ``"varied"`` (random wording and valid answer per row) or ``"plain"`` (one
            wording, the smallest valid answer) for causal traces.

    Returns:
        ``(dataset, counts)``: a ``datasets.Dataset`` with ``prompt``, ``completion`` and ``task``
        columns, and per task the number of rows kept. The same seed gives the same rows; each row's
        wording and chosen valid answer come from its own seeded rng.
    """
    import datasets

    if gold_style not in GOLD_STYLES:
        raise ValueError(f"gold_style must be one of {GOLD_STYLES}, got {gold_style!r}")
    if isinstance(config, Mapping):
        config = TaskMixConfig(**config)
    source = build_dataset(config)
    rows, counts = [], Counter()
    for i, row in enumerate(source):
        trace = gold_completion(row, random.Random(f"{config.seed}:{i}"), plain=gold_style == "plain")
        if trace is None:
            continue
        counts[row["task"]] += 1
        rows.append(
            {
                "prompt": row["prompt"],
                "completion": [{"role": "assistant", "content": trace}],
                "task": row["task"],
            }
        )
    if not rows:
        raise ValueError(
            "No row of this task mixture has a gold trace: include causal tasks (causal_weight > 0) "
            "or knights_knaves in the mixture."
        )
    message = [{"role": datasets.Value("string"), "content": datasets.Value("string")}]
    features = datasets.Features({"prompt": message, "completion": message, "task": datasets.Value("string")})
    return datasets.Dataset.from_list(rows, features=features), dict(counts)
