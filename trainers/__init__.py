"""TRL glue: CRoS reference binding, trainers and callbacks."""

from faithgrpo.trainers.grpo import FaithGRPOTrainer, FaithRLOOTrainer
from faithgrpo.trainers.reference import bind_cros_references

__all__ = ["FaithGRPOTrainer", "FaithRLOOTrainer", "bind_cros_references"]
