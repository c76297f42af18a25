"""faithgrpo: rewards that make a reasoning model's chain of thought valid and causally load-bearing.

The package is one namespace over the repository's top-level folders:
``faithgrpo.rewards`` (rewards/), ``faithgrpo.trainers`` (trainers/), ``faithgrpo.eval`` (eval/) and
``faithgrpo.tasks`` (tasks/). The most used names are re-exported here and imported on first use,
so ``import faithgrpo`` stays instant::

    from faithgrpo import CRoSReward, calver_reward, get_reward_funcs, FaithGRPOTrainer
"""

from importlib import import_module

__version__ = "0.8.0"

_EXPORTS = {
    "CRoSReward": "faithgrpo.rewards.cros.reward",
    "calver_reward": "faithgrpo.rewards.calver.reward",
    "score_trace": "faithgrpo.rewards.calver.reward",
    "format_reward": "faithgrpo.rewards.format",
    "trace_format_reward": "faithgrpo.rewards.format",
    "outcome_reward": "faithgrpo.rewards.outcome",
    "get_reward_funcs": "faithgrpo.rewards.registry",
    "select_best_of_k": "faithgrpo.rewards.selection",
    "plurality": "faithgrpo.rewards.selection",
    "FaithGRPOTrainer": "faithgrpo.trainers.grpo",
    "FaithRLOOTrainer": "faithgrpo.trainers.grpo",
    "build_dataset": "faithgrpo.tasks.mix",
    "grade_answer": "faithgrpo.verifier.queries",
    "resolve": "faithgrpo.models",
    "embedded_model_path": "faithgrpo.models",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'faithgrpo' has no attribute {name!r}")
    return getattr(import_module(module), name)


def __dir__():
    return sorted(__all__)
