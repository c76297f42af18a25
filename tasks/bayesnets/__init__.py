"""Published Bayesian networks: the ``causal_bn`` dataset over pgmpy's bundled BIF networks and
the exact binary reduction for its ATE questions."""

from faithgrpo.tasks.bayesnets.datasets import (
    BN_KINDS,
    CausalBNConfig,
    CausalBNDataset,
    admitted_kinds,
    make_bn_problem,
)

__all__ = [
    "BN_KINDS",
    "CausalBNConfig",
    "CausalBNDataset",
    "admitted_kinds",
    "make_bn_problem",
]
