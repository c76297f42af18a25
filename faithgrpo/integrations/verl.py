"""verl's custom reward function: ``custom_reward_function.path`` = this file, ``name`` = ``compute_score``.

verl calls ``compute_score(data_source, solution_str, ground_truth, extra_info)`` once per response
and logs every key of a returned dict (``score`` is the reward). Put the row in the dataset's
``reward_model.ground_truth`` (the listed answer, or a JSON object with ``problem`` / ``entry`` and
``answer``) and/or ``extra_info`` (``problem`` or ``entry``): `faithgrpo.integrations.scoring.row_of`.

Example config (``verl.trainer.main_ppo``)::

    custom_reward_function:
      path: <site-packages>/faithgrpo/integrations/verl.py   # python -c "import faithgrpo.integrations.verl as m; print(m.__file__)"
      name: compute_score
      reward_kwargs: {weights: {outcome: 1.0, format: 0.25, trace_format: 0.25, calver: 1.0}}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from faithgrpo.integrations.scoring import row_of, score_completion

__all__ = ["compute_score"]


def compute_score(
    data_source: str | None,
    solution_str: str,
    ground_truth: Any = None,
    extra_info: Mapping[str, Any] | None = None,
    *,
    weights: Mapping[str, float] | None = None,
    **kwargs: Any,
) -> dict[str, float]:
    """Score one response for verl; the same numbers as faithgrpo's TRL rewards combined by TRL.

    Args:
        data_source: the dataset's ``data_source`` (recorded by verl; the row decides the grader).
        solution_str: the decoded response.
        ground_truth: the listed answer, or a JSON object / dict with ``problem`` / ``entry`` / ``answer``.
        extra_info: the dataset's ``extra_info`` (may carry ``problem`` / ``entry``).
        weights: reward -> weight (default `faithgrpo.integrations.scoring.DEFAULT_WEIGHTS`).
        **kwargs: other arguments verl may pass (ignored).

    Returns:
        ``{"score": ..., "outcome": ..., "format": ..., "trace_format": ..., "calver": ..., "<name>_applies": ...}``.

    Example:
        >>> problem = {"graph": {"type": "DAG", "nodes": ["U", "X", "Y"], "directed": [["U", "X"], ["U", "Y"],
        ...            ["X", "Y"]]}, "query": {"kind": "backdoor_set", "treatment": "X", "outcome": "Y"}}
        >>> compute_score("causal_graph", "<answer>{U}</answer>", "{U}", {"problem": problem})["outcome"]
        1.0
    """
    return score_completion(solution_str, row_of(ground_truth, extra_info), weights)
