"""Procedural causal problems: the ``causal_graph`` and ``causal_story`` datasets, their query
builders, stories and prompts. The query kinds, answer parsing and grading they use are the
verifier's (:mod:`faithgrpo.verifier`)."""

from faithgrpo.tasks.causal.datasets import (
    CAUSAL_DATASETS,
    KIND_FAMILIES,
    YES_NO_KINDS,
    CausalGraphConfig,
    CausalGraphDataset,
    CausalStoryConfig,
    CausalStoryDataset,
    make_problem,
)
from faithgrpo.tasks.causal.prompts import (
    CLAIM_HINTS,
    EXAMPLE_PROBLEMS,
    answer_format,
    answer_instructions,
    chat_prompt,
    cpt_text,
    graph_description,
    problem_text,
    question_text,
    trace_instructions,
    user_message,
)

__all__ = [
    "CAUSAL_DATASETS",
    "CLAIM_HINTS",
    "EXAMPLE_PROBLEMS",
    "KIND_FAMILIES",
    "YES_NO_KINDS",
    "CausalGraphConfig",
    "CausalGraphDataset",
    "CausalStoryConfig",
    "CausalStoryDataset",
    "answer_format",
    "answer_instructions",
    "chat_prompt",
    "cpt_text",
    "graph_description",
    "make_problem",
    "problem_text",
    "question_text",
    "trace_instructions",
    "user_message",
]
