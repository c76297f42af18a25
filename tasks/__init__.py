"""faithgrpo.tasks: procedural causal problems, their prompts and gold traces.

Importing this package registers the reasoning-gym datasets ``causal_graph`` (supplied edge list),
``causal_story`` (graph told as a story) and ``causal_bn`` (published Bayesian networks, both
renderings), so ``reasoning_gym.create_dataset("causal_graph", ...)`` and composite mixtures work.
It does not import torch (nor pgmpy, which is read when a network is first loaded).

===================  =====================================================================
where                what
===================  =====================================================================
``causal/``          the ``causal_graph`` / ``causal_story`` datasets, query builders, stories,
                     prompts
``certificates/``    gold derivations and gold traces (``gold``)
``bayesnets/``       the ``causal_bn`` dataset over pgmpy's networks, the exact binary ATE reduction
``knights_knaves/``  Knights & Knaves: truth tables, formulas, trace slots, claims, gold traces,
                     the checker
``clear/``           the CLEAR adapter: descriptions, typed questions, truth, candidates, records
``mix.py``           TRL rows and training mixtures (:func:`build_dataset`)
``sft.py``           gold-trace SFT rows
===================  =====================================================================

The graphs, query kinds, grading and the certificate grammar the problems are checked with are
:mod:`faithgrpo.verifier`'s (``CausalGraph``, ``parse_graph``, ``QUERY_KINDS``, ``load_problem``,
``grade_answer``, ... are imported from there). Imports run one way: the verifier <-
``causal`` <- ``certificates`` <- ``bayesnets``; ``knights_knaves`` and ``clear`` read the verifier
and ``causal``; ``mix`` and ``sft`` sit on top. (The prompts' worked examples are gold traces:
``causal.prompts`` imports ``certificates.gold`` on first use.)
"""

from faithgrpo.tasks.bayesnets.datasets import CausalBNConfig, CausalBNDataset
from faithgrpo.tasks.causal.datasets import (
    CAUSAL_DATASETS,
    CausalGraphConfig,
    CausalGraphDataset,
    CausalStoryConfig,
    CausalStoryDataset,
    make_problem,
)
from faithgrpo.tasks.causal.prompts import chat_prompt, trace_instructions, user_message
from faithgrpo.tasks.certificates.gold import gold_trace
from faithgrpo.tasks.mix import TaskMixConfig, build_dataset, to_trl_row

__all__ = [
    "CAUSAL_DATASETS",
    "CausalBNConfig",
    "CausalBNDataset",
    "CausalGraphConfig",
    "CausalGraphDataset",
    "CausalStoryConfig",
    "CausalStoryDataset",
    "TaskMixConfig",
    "build_dataset",
    "chat_prompt",
    "gold_trace",
    "make_problem",
    "to_trl_row",
    "trace_instructions",
    "user_message",
]
