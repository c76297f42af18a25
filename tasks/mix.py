"""Training rows and mixtures: reasoning-gym entries as TRL rows (:func:`to_trl_row`) and the
training dataset of causal rows plus optional reasoning-gym tasks (:class:`TaskMixConfig`,
:func:`build_dataset`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import reasoning_gym
from reasoning_gym.factory import DATASETS

from faithgrpo.tasks.causal.datasets import (
    CAUSAL_DATASETS,
    CausalGraphConfig,
    CausalGraphDataset,
    CausalStoryDataset,
)
from faithgrpo.tasks.causal.prompts import answer_instructions, trace_instructions

__all__ = ["TaskMixConfig", "build_dataset", "to_trl_row"]

_PROBLEM_SOURCES = (*CAUSAL_DATASETS, "causal_bn")  # sources whose rows carry a problem JSON


# ---------------------------------------------------------------------------------------------
# TRL rows and training datasets
def _jsonable(value: Any) -> Any:
    """Plain JSON types: numpy scalars/arrays, tuples and sets converted, dict keys as strings."""
    if isinstance(value, dict):
        return {str(_jsonable(k)): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((_jsonable(v) for v in value), key=repr)
    if hasattr(value, "tolist") and callable(value.tolist):  # numpy scalar or array
        return _jsonable(value.tolist())
    if isinstance(value, str):
        return str(value)  # numpy str_ becomes str
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return str(value)


def to_trl_row(entry: Mapping[str, Any], system_prompt: str | None = None) -> dict[str, Any]:
    """Turn a reasoning-gym entry into a TRL row with uniform columns.

    Args:
        entry: ``{"question", "answer", "metadata": {"source_dataset", ...}}``.
        system_prompt: the system message; by default the trace contract for causal entries
            (:func:`~faithgrpo.tasks.causal.prompts.trace_instructions`), the Knights & Knaves trace format
            for ``knights_knaves``, and a plain think/answer instruction otherwise.

    Returns:
        ``{"prompt": [system, user], "answer": str, "problem": JSON str | None, "entry": JSON str | None,
        "task": source dataset name}``: causal entries fill ``problem``, others ``entry`` (the whole
        entry as JSON, for the outcome reward's ``score_answer``).
    """
    meta = entry.get("metadata") or {}
    source = str(meta.get("source_dataset", ""))
    problem = meta.get("problem") if source in _PROBLEM_SOURCES else None
    if problem is not None:
        problem = problem if isinstance(problem, str) else json.dumps(problem, ensure_ascii=False)
        kind = json.loads(problem)["query"]["kind"]
        system = system_prompt if system_prompt is not None else trace_instructions(kind)
        entry_json = None
    else:
        if system_prompt is not None:
            system = system_prompt
        elif source == "knights_knaves":
            from faithgrpo.tasks.knights_knaves.gold import kk_prompt_instructions

            system = kk_prompt_instructions()
        else:
            system = answer_instructions()
        entry_json = json.dumps(_jsonable(dict(entry)), ensure_ascii=False)
    answer = entry.get("answer")
    return {
        "prompt": [
            {"role": "system", "content": system},
            {"role": "user", "content": str(entry["question"])},
        ],
        "answer": "" if answer is None else str(_jsonable(answer)),
        "problem": problem,
        "entry": entry_json,
        "task": source,
    }


@dataclass
class TaskMixConfig:
    """A training mixture: causal rows (supplied and story mode) plus optional reasoning-gym tasks.

    Attributes:
        size: number of rows.
        seed: base seed.
        causal_weight: sampling weight of causal rows (0 for reasoning-gym rows only).
        story_fraction: share of causal rows in story (constructed-graph) mode.
        causal: :class:`CausalGraphConfig` fields (``min_nodes``, ``query_kinds``, ...).
        mixture: reasoning-gym dataset name -> sampling weight (relative to ``causal_weight``).
        mixture_configs: reasoning-gym dataset name -> its config fields.
        system_prompt: one system message for every row (default: per task, see :func:`to_trl_row`).
    """

    size: int = 512
    seed: int = 0
    causal_weight: float = 1.0
    story_fraction: float = 0.5
    causal: dict = field(default_factory=dict)
    mixture: dict = field(default_factory=dict)
    mixture_configs: dict = field(default_factory=dict)
    system_prompt: str | None = None

    def validate(self) -> None:
        """Raise ``ValueError`` naming the field and the fix."""
        if not isinstance(self.size, int) or self.size <= 0:
            raise ValueError(f"size must be a positive integer, got {self.size!r}")
        if not isinstance(self.seed, int):
            raise ValueError(f"seed must be an integer, got {self.seed!r}")
        for name in ("causal_weight", "story_fraction"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                raise ValueError(f"{name} must be a number >= 0, got {v!r}")
        if self.story_fraction > 1:
            raise ValueError(f"story_fraction must be in [0, 1], got {self.story_fraction!r}")
        allowed = {f.name for f in fields(CausalGraphConfig)} - {"size", "seed", "mode"}
        bad = sorted(set(self.causal) - allowed)
        if bad:
            raise ValueError(f"causal has unknown fields {bad}; use some of {sorted(allowed)}")
        if self.causal_weight > 0:
            CausalGraphConfig(**self.causal).validate()
        for name, weight in self.mixture.items():
            if name in CAUSAL_DATASETS:
                raise ValueError(f"{name!r} is the causal task; set causal_weight/story_fraction instead")
            if name not in DATASETS:
                raise ValueError(
                    f"unknown reasoning-gym dataset {name!r} in mixture; registered: {sorted(DATASETS)[:40]}..."
                )
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight < 0:
                raise ValueError(f"mixture weight of {name!r} must be a number >= 0, got {weight!r}")
        extra = sorted(set(self.mixture_configs) - set(self.mixture))
        if extra:
            raise ValueError(f"mixture_configs names {extra}, which are not in mixture; add them to mixture")
        if self.causal_weight <= 0 and not any(w > 0 for w in self.mixture.values()):
            raise ValueError("nothing to sample: set causal_weight > 0 or give a mixture weight > 0")


def _specs(config: TaskMixConfig) -> list:
    from reasoning_gym.composite import DatasetSpec

    specs = []
    causal = dict(config.causal)
    for name, weight in (
        ("causal_graph", config.causal_weight * (1 - config.story_fraction)),
        ("causal_story", config.causal_weight * config.story_fraction),
    ):
        if weight > 0:
            specs.append(DatasetSpec(name=name, weight=float(weight), config=dict(causal)))
    for name, weight in config.mixture.items():
        if weight > 0:
            specs.append(
                DatasetSpec(
                    name=name, weight=float(weight), config=dict(config.mixture_configs.get(name, {}))
                )
            )
    return specs


def build_dataset(config: TaskMixConfig | CausalGraphConfig | Mapping[str, Any]):
    """A ``datasets.Dataset`` of TRL rows (see :func:`to_trl_row`) for training.

    Args:
        config: a :class:`TaskMixConfig` (or its fields as a dict, e.g. from YAML), or a
            :class:`CausalGraphConfig` for causal rows of one mode only.

    Returns:
        A dataset with columns ``prompt``, ``answer``, ``problem``, ``entry``, ``task``; the same seed
        gives the same rows.
    """
    import datasets

    if isinstance(config, Mapping):
        config = TaskMixConfig(**config)
    config.validate()
    if isinstance(config, CausalGraphConfig):
        cls = CausalStoryDataset if config.mode == "constructed" else CausalGraphDataset
        source = cls(config)
        system = None
    else:
        source = reasoning_gym.create_dataset(
            "composite", size=config.size, seed=config.seed, datasets=_specs(config)
        )
        system = config.system_prompt
    rows = [to_trl_row(source[i], system) for i in range(len(source))]
    features = datasets.Features(
        {
            "prompt": [{"role": datasets.Value("string"), "content": datasets.Value("string")}],
            "answer": datasets.Value("string"),
            "problem": datasets.Value("string"),
            "entry": datasets.Value("string"),
            "task": datasets.Value("string"),
        }
    )
    return datasets.Dataset.from_list(rows, features=features)
