"""TRL glue: CRoS reference binding, trainers, callbacks, a safe multi-process teardown, and the GRPO
recipe's library side (arguments and validation, data, warm start)."""

from faithgrpo.trainers.callbacks import (
    MetricsJSONLCallback,
    SummaryPrinterCallback,
    SummaryProgressCallback,
    install_callbacks,
    plot_reward_means,
)
from faithgrpo.trainers.checks import RecipeError
from faithgrpo.trainers.data import check_columns, make_dataset
from faithgrpo.trainers.distributed import distributed_teardown
from faithgrpo.trainers.grpo import FaithGRPOTrainer, FaithRLOOTrainer
from faithgrpo.trainers.recipe import FaithScriptArguments, parse_recipe_args, validate
from faithgrpo.trainers.reference import InitialWeights, bind_cros_references
from faithgrpo.trainers.warm_start import load_warm_started_policy, run_warm_start, warm_start_key

__all__ = [
    "FaithGRPOTrainer",
    "FaithRLOOTrainer",
    "FaithScriptArguments",
    "InitialWeights",
    "MetricsJSONLCallback",
    "RecipeError",
    "SummaryPrinterCallback",
    "SummaryProgressCallback",
    "bind_cros_references",
    "check_columns",
    "distributed_teardown",
    "install_callbacks",
    "load_warm_started_policy",
    "make_dataset",
    "parse_recipe_args",
    "plot_reward_means",
    "run_warm_start",
    "validate",
    "warm_start_key",
]
