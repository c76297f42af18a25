"""Typed read access to one checkpoint's section of the ``faithgrpo eval`` report.

``report.json`` keeps nested dicts (its keys are the public format); `CheckpointResult` reads them
for the Markdown and plots, with absent or ``null`` parts (no hints run, no judge)
read as empty mappings instead of chains of ``(x.get(...) or {}).get(...)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["CheckpointResult", "dig"]


def dig(mapping: Mapping[str, Any] | None, *keys: str) -> Any:
    """``mapping[k1][k2]...``, or ``None`` as soon as a level is missing or ``None``.

    Example:
        >>> dig({"a": {"b": 1}}, "a", "b"), dig({"a": None}, "a", "b")
        (1, None)
    """
    value: Any = mapping
    for key in keys:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class CheckpointResult:
    """One entry of ``report["checkpoints"]`` (see `faithgrpo.eval.report.pipeline.evaluate_checkpoint`).

    Attributes:
        raw: the section as stored in ``report.json``.
    """

    raw: dict[str, Any]

    @property
    def label(self) -> str:
        return self.raw["label"]

    @property
    def title(self) -> str:
        """``label (model + adapter)``, as in the report's checkpoint list."""
        adapter = self.raw.get("adapter")
        return f"{self.label} ({self.raw['model']}{' + ' + adapter if adapter else ''})"

    def passk(self, task: str) -> dict[str, Any]:
        """The Pass@K section of ``task`` (always present)."""
        return self.raw["passk"][task]

    def passk_judge(self, task: str) -> dict[str, Any]:
        """CoT-Pass@K with the LLM judge on ``task`` (empty without a judge)."""
        return _mapping(self.passk(task).get("judge"))

    def judge_agreement(self, task: str) -> dict[str, Any]:
        """The judge's agreement with the symbolic verifier on ``task`` (empty without a judge)."""
        return _mapping(self.passk(task).get("judge_agreement"))

    @property
    def hints(self) -> dict[str, Any]:
        """The hint-faithfulness section (empty when hints were not run)."""
        return _mapping(self.raw.get("hints"))

    @property
    def hint_types(self) -> dict[str, Any]:
        """Hint type -> detector scores (``raw``, ``normalized``, ``p``, ``q``, ``alpha``, counts)."""
        return _mapping(self.hints.get("types"))

    @property
    def hint_judge(self) -> dict[str, Any]:
        """The LLM judge's hint verbalisation section (empty without a judge)."""
        return _mapping(self.hints.get("judge"))

    def hint_judge_type(self, hint: str) -> dict[str, Any] | None:
        """The judge's scores for one hint type, or ``None``."""
        return _mapping(self.hint_judge.get("types")).get(hint)

    @property
    def faithfulness(self) -> dict[str, Any]:
        """AOC / CIR / CRoS Δ section (empty when absent)."""
        return _mapping(self.raw.get("faithfulness"))

    @property
    def early_answering(self) -> dict[str, Any]:
        return _mapping(self.faithfulness.get("early_answering"))

    @property
    def generation(self) -> dict[str, Any]:
        """Task -> generation statistics of the completions."""
        return self.raw["generation"]
