"""faithgrpo.tasks: procedural causal problems, their prompts and gold traces.

Importing this package registers the reasoning-gym datasets ``causal_graph`` (supplied edge list),
``causal_story`` (graph told as a story) and ``causal_bn`` (published Bayesian networks, both
renderings), so ``reasoning_gym.create_dataset("causal_graph", ...)`` and composite mixtures work.
It does not import torch (nor pgmpy, which is read when a network is first loaded).

===================  =====================================================================
where                what
===================  =====================================================================
``graphs/``          the graph type (``model``), edge text and paths (``edges``), graph criteria
                     (``criteria``, ``separation``, ``paths``, ``ate``), random graph families,
                     ATE strata
``causal/``          the ``causal_graph`` / ``causal_story`` datasets, query kinds and their
                     predicates, answer parsing, grading, stories, prompts
``certificates/``    the DERIVATION claim grammar (``claims``), claim truth (``claim_checks``),
                     certification (``derivation``), gold derivations and gold traces (``gold``)
``bayesnets/``       the ``causal_bn`` dataset over pgmpy's networks, the exact binary ATE reduction
``knights_knaves/``  Knights & Knaves: truth tables, formulas, trace slots, claims, gold traces,
                     the checker
``clear/``           the CLEAR adapter: descriptions, typed questions, truth, candidates, records
``mix.py``           TRL rows and training mixtures (:func:`build_dataset`)
``sft.py``           gold-trace SFT rows
===================  =====================================================================

Imports run one way: ``graphs`` <- ``causal`` <- ``certificates`` <- ``bayesnets``;
``knights_knaves`` and ``clear`` read ``graphs`` and ``causal``; ``mix`` and ``sft`` sit on top. (The
prompts' worked examples are gold traces: ``causal.prompts`` imports ``certificates.gold`` on first use.)
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
from faithgrpo.tasks.causal.queries import format_query, grade_answer, load_problem, normalize_answer
from faithgrpo.tasks.causal.query_kinds import QUERY_KINDS
from faithgrpo.tasks.certificates.gold import gold_trace
from faithgrpo.tasks.graphs.edges import parse_graph
from faithgrpo.tasks.graphs.families import FAMILIES
from faithgrpo.tasks.graphs.model import CausalGraph
from faithgrpo.tasks.mix import TaskMixConfig, build_dataset, to_trl_row

__all__ = [
    "CAUSAL_DATASETS",
    "FAMILIES",
    "QUERY_KINDS",
    "CausalBNConfig",
    "CausalBNDataset",
    "CausalGraph",
    "CausalGraphConfig",
    "CausalGraphDataset",
    "CausalStoryConfig",
    "CausalStoryDataset",
    "TaskMixConfig",
    "build_dataset",
    "chat_prompt",
    "format_query",
    "gold_trace",
    "grade_answer",
    "load_problem",
    "make_problem",
    "normalize_answer",
    "parse_graph",
    "to_trl_row",
    "trace_instructions",
    "user_message",
]
