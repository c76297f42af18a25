"""TRL glue: CRoS reference binding, trainers, callbacks and a safe multi-process teardown."""

from faithgrpo.trainers.callbacks import (
    MetricsJSONLCallback,
    SummaryPrinterCallback,
    SummaryProgressCallback,
    install_callbacks,
    plot_reward_means,
)
from faithgrpo.trainers.distributed import distributed_teardown
from faithgrpo.trainers.grpo import FaithGRPOTrainer, FaithRLOOTrainer
from faithgrpo.trainers.reference import CRoSReferenceCheck, InitialWeights, bind_cros_references

__all__ = [
    "CRoSReferenceCheck",
    "FaithGRPOTrainer",
    "FaithRLOOTrainer",
    "InitialWeights",
    "MetricsJSONLCallback",
    "SummaryPrinterCallback",
    "SummaryProgressCallback",
    "bind_cros_references",
    "distributed_teardown",
    "install_callbacks",
    "plot_reward_means",
]
