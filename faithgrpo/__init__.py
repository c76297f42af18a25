"""faithgrpo: rewards that make a reasoning model's chain of thought valid and causally load-bearing.

The package is one namespace over the repository's top-level folders:
``faithgrpo.rewards`` (rewards/), ``faithgrpo.trainers`` (trainers/), ``faithgrpo.eval`` (eval/) and
``faithgrpo.tasks`` (tasks/). See DESIGN.md for the contract.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
