"""Reward functions for TRL trainers, one small module per family.

==============  ===============================  ===========================================
name            callable                         module
==============  ===============================  ===========================================
outcome         :func:`outcome_reward`           ``rewards/outcome.py``
format          :func:`format_reward`            ``rewards/format.py``
trace_format    :func:`trace_format_reward`      ``rewards/format.py``
cros            :class:`CRoSReward` (instance)   ``rewards/cros.py`` (steps: ``rewards/steps.py``)
calver          :func:`calver_reward`            ``rewards/calver.py`` (slots: ``rewards/trace.py``)
==============  ===============================  ===========================================

:func:`get_reward_funcs` builds them by name (``rewards/registry.py``); best-of-K selection is in
``rewards/selection.py``. ``CRoSReward`` is imported on first use, so importing this package does
not load torch.
"""

from faithgrpo.rewards.calver import CalverScore, calver_reward, make_calver_reward, score_trace
from faithgrpo.rewards.format import format_reward, trace_format_reward
from faithgrpo.rewards.outcome import make_outcome_reward, outcome_reward
from faithgrpo.rewards.registry import REWARD_NAMES, get_reward_funcs
from faithgrpo.rewards.selection import plurality, select_best_of_k

__all__ = [
    "REWARD_NAMES",
    "CRoSReward",
    "CalverScore",
    "calver_reward",
    "format_reward",
    "get_reward_funcs",
    "make_calver_reward",
    "make_outcome_reward",
    "outcome_reward",
    "plurality",
    "score_trace",
    "select_best_of_k",
    "trace_format_reward",
]


def __getattr__(name: str):
    if name == "CRoSReward":
        from faithgrpo.rewards.cros import CRoSReward

        return CRoSReward
    raise AttributeError(f"module 'faithgrpo.rewards' has no attribute {name!r}")
