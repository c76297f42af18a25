"""faithgrpo.tasks: procedural causal problems, their prompts and gold traces.

Importing this package registers the reasoning-gym datasets ``causal_graph`` (supplied edge list),
``causal_story`` (graph told as a story) and ``causal_bn`` (published Bayesian networks, both
renderings), so ``reasoning_gym.create_dataset("causal_graph", ...)`` and composite mixtures work.
It does not import torch (nor pgmpy, which is read when a network is first loaded).
"""

from faithgrpo.tasks.causal import (
    CAUSAL_DATASETS,
    FAMILIES,
    CausalGraphConfig,
    CausalGraphDataset,
    CausalStoryConfig,
    CausalStoryDataset,
    TaskMixConfig,
    build_dataset,
    make_problem,
    to_trl_row,
)
from faithgrpo.tasks.causal_bn import CausalBNConfig, CausalBNDataset
from faithgrpo.tasks.gold import gold_trace
from faithgrpo.tasks.graph import CausalGraph, parse_graph
from faithgrpo.tasks.prompts import chat_prompt, trace_instructions, user_message
from faithgrpo.tasks.queries import QUERY_KINDS, format_query, grade_answer, load_problem, normalize_answer

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
