"""CALVER, the verifier reward (docs/rewards.md, "CALVER"): six binary checks on a six-slot causal trace, ``S/6``.

=========================  ==================================================  ==============================
piece                      names                                               module
=========================  ==================================================  ==============================
the reward and the score   :func:`calver_reward`, :func:`make_calver_reward`,  ``rewards/calver/reward.py``
                           :func:`score_trace`, :class:`CalverScore`,
                           :data:`VARIANTS`, :func:`variant_reward`
the problem, prepared      :func:`prepare_problem`, :class:`CalverProblem`,    ``rewards/calver/problem.py``
once per prompt            :class:`CalverConfig`, :func:`strip_answer_fields`
the six checks             one function per slot                               ``rewards/calver/checks.py``
=========================  ==================================================  ==============================
"""

from faithgrpo.rewards.calver.problem import (
    GRAPH_CHECKS,
    CalverConfig,
    CalverProblem,
    prepare_problem,
    strip_answer_fields,
)
from faithgrpo.rewards.calver.reward import (
    CHECK_NAMES,
    VARIANTS,
    CalverReward,
    CalverScore,
    calver_certified_reward,
    calver_gated_reward,
    calver_reward,
    make_calver_reward,
    score_trace,
    variant_reward,
)

__all__ = [
    "CHECK_NAMES",
    "GRAPH_CHECKS",
    "VARIANTS",
    "CalverConfig",
    "CalverProblem",
    "CalverReward",
    "CalverScore",
    "calver_certified_reward",
    "calver_gated_reward",
    "calver_reward",
    "make_calver_reward",
    "prepare_problem",
    "score_trace",
    "strip_answer_fields",
    "variant_reward",
]
