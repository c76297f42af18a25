"""CRoS, the causal-importance reward (DESIGN §3.3): Δ = ℓ(r) − mean_m ℓ(π_m(r)) under a frozen reference.

==========================  ==================================================  =========================
piece                       names                                               module
==========================  ==================================================  =========================
the reward                  :class:`CRoSReward`                                 ``rewards/cros/reward.py``
completions and results     :func:`parse_completion`, :class:`CRoSScore`,       ``rewards/cros/completions.py``
                            ``UNDEFINED_REASONS``
the frozen reference        :class:`CRoSReferenceError`, ``ReferenceBinding``   ``rewards/cros/reference.py``
scoring with the reference  :class:`ReferenceScorer`                            ``rewards/cros/scoring.py``
the trainer callback        :class:`CRoSReferenceCheck`                         ``rewards/cros/callback.py``
==========================  ==================================================  =========================

Names are imported on first use: ``faithgrpo.rewards.cros.completions`` stays torch-free.
"""

from importlib import import_module

_EXPORTS = {
    "CRoSReward": "reward",
    "CRoSScore": "completions",
    "UNDEFINED_REASONS": "completions",
    "parse_completion": "completions",
    "CRoSReferenceError": "reference",
    "ReferenceBinding": "reference",
    "ReferenceScorer": "scoring",
    "CRoSReferenceCheck": "callback",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'faithgrpo.rewards.cros' has no attribute {name!r}")
    return getattr(import_module(f"faithgrpo.rewards.cros.{module}"), name)
