"""Reward functions for TRL trainers, one small module per family.

================  ==============================  =================================================
name              callable                        module
================  ==============================  =================================================
outcome           :func:`outcome_reward`          ``rewards/outcome.py``
format            :func:`format_reward`           ``rewards/format.py``
trace_format      :func:`trace_format_reward`     ``rewards/format.py``
cros              :class:`CRoSReward` (instance)  ``rewards/cros/`` (steps: ``rewards/steps.py``)
calver            :func:`calver_reward`           ``rewards/calver/`` (slots: ``rewards/trace.py``)
calver_gated      ``calver_gated_reward``         ``rewards/calver/reward.py`` (the variants)
calver_certified  ``calver_certified_reward``     ``rewards/calver/reward.py`` (the variants)
================  ==============================  =================================================

:func:`get_reward_funcs` builds them by name (``rewards/registry.py``); best-of-K selection is in
``rewards/selection.py``. Every name is imported on first use, so importing this package does not load torch.
"""

from importlib import import_module

# Names load on first use: importing one reward loads its own module only, and this package stays
# torch-free (CRoS needs torch).
_EXPORTS = {
    "REWARD_NAMES": "registry",
    "get_reward_funcs": "registry",
    "CRoSReward": "cros.reward",
    "CalverReward": "calver.reward",
    "CalverScore": "calver.reward",
    "calver_reward": "calver.reward",
    "calver_gated_reward": "calver.reward",
    "calver_certified_reward": "calver.reward",
    "make_calver_reward": "calver.reward",
    "score_trace": "calver.reward",
    "format_reward": "format",
    "trace_format_reward": "format",
    "make_outcome_reward": "outcome",
    "outcome_reward": "outcome",
    "plurality": "selection",
    "select_best_of_k": "selection",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'faithgrpo.rewards' has no attribute {name!r}")
    return getattr(import_module(f"faithgrpo.rewards.{module}"), name)
