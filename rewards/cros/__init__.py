"""CRoS, the causal-importance reward (docs/rewards.md, "CRoS"): Δ = ℓ(r) − mean_m ℓ(π_m(r)) under a frozen reference.

==========================  ==================================================  =========================
piece                       names                                               module
==========================  ==================================================  =========================
the reward                  :class:`CRoSReward`                                 ``rewards/cros/reward.py``
completions and results     :func:`parse_completion`, :class:`CRoSScore`,       ``rewards/cros/completions.py``
                            ``UNDEFINED_REASONS``
the frozen reference        :class:`CRoSReferenceError`, ``ReferenceBinding``   ``rewards/cros/reference.py``
scoring with the reference  :class:`ReferenceScorer`                            ``rewards/cros/scoring.py``
==========================  ==================================================  =========================

The trainer callback, :class:`~faithgrpo.rewards.cros.callback.CRoSReferenceCheck`, stays in its
module (``rewards/cros/callback.py``): it loads ``transformers``' trainer machinery.
"""

from faithgrpo.rewards.cros.completions import UNDEFINED_REASONS, CRoSScore, parse_completion
from faithgrpo.rewards.cros.reference import CRoSReferenceError, ReferenceBinding
from faithgrpo.rewards.cros.reward import CRoSReward
from faithgrpo.rewards.cros.scoring import ReferenceScorer

__all__ = [
    "UNDEFINED_REASONS",
    "CRoSReferenceError",
    "CRoSReward",
    "CRoSScore",
    "ReferenceBinding",
    "ReferenceScorer",
    "parse_completion",
]
