"""Procedural causal problems (docs/tasks.md), registered with reasoning-gym as ``causal_graph`` and ``causal_story``.

Each row is one causal question about a random graph:

* ``causal_graph`` (supplied-graph mode) shows the edge list, ``A -> B; B -> C``;
* ``causal_story`` (constructed-graph mode) tells the graph as a story over variable names
  ("Smoking raises Tar. ...") and hides the edge list; the problem JSON keeps the source graph for
  grading.

Graph families: ``random_dag`` (edges by probability over a random order), ``motifs`` (chains, forks
and colliders glued together), ``admg`` (a DAG plus bidirected edges for hidden common causes) and
``cyclic`` (a DAG plus back edges; used only by the ``cycle`` and ``directed_path`` kinds).

Find-one queries (sets, mediators, cycles) are drawn so that at least two answers are valid, and the
listed ``answer`` is one of them chosen by the seeded rng, not always the smallest; yes/no queries
(``ci_test``, ``directed_path``, ``ate``) first draw the answer by a fair coin, then build a query
with that answer. ``ate`` problems carry random CPTs for binary variables and a threshold at more
than ``ate_margin`` from the true ψ, so CALVER's strict ATE certificate holds.

Rows are deterministic per (dataset name, seed, index).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

import reasoning_gym
from reasoning_gym.dataset import ProceduralDataset
from reasoning_gym.factory import DATASETS

from faithgrpo.tasks.causal.prompts import problem_text
from faithgrpo.tasks.causal.query_builders import BUILDERS as _BUILDERS
from faithgrpo.tasks.causal.query_builders import MAX_CHECKS as _MAX_CHECKS
from faithgrpo.tasks.causal.stories import THEMES, name_graph, story_text
from faithgrpo.verifier.graphs.families import FAMILIES, make_graph
from faithgrpo.verifier.queries import MODES, grade_answer
from faithgrpo.verifier.query_kinds import QUERY_KINDS

__all__ = [
    "CAUSAL_DATASETS",
    "KIND_FAMILIES",
    "YES_NO_KINDS",
    "CausalGraphConfig",
    "CausalGraphDataset",
    "CausalStoryConfig",
    "CausalStoryDataset",
    "make_problem",
]

_DAGS = ("random_dag", "motifs")
#: Graph families each query kind is drawn on (the kind must be defined on the family's graph type).
KIND_FAMILIES: dict[str, tuple[str, ...]] = {
    "backdoor_set": (*_DAGS, "admg"),
    "frontdoor_set": (*_DAGS, "admg"),
    "dsep_set": _DAGS,
    "msep_set": ("admg",),
    "ci_test": (*_DAGS, "admg"),
    "directed_path": FAMILIES,
    "mediator": (*_DAGS, "admg"),
    "cycle": ("cyclic",),
    "ate": _DAGS,
}
YES_NO_KINDS = ("ci_test", "directed_path", "ate")
_SET_VARIANT_KINDS = ("backdoor_set", "dsep_set", "msep_set")
CAUSAL_DATASETS = ("causal_graph", "causal_story")
# reasoning-gym datasets whose rows carry a problem JSON (the trace contract, CALVER): these two
# and causal_bn (faithgrpo.tasks.bayesnets.datasets), which mixtures name like any reasoning-gym dataset

# Letters that read as variables; no I/O (look like digits) and no P (probabilities are P(...)).
_LETTERS = "ABCDEFGHJKLMNQRSTUVWXYZ"
ANSWER_CHOICES = 16  # valid answers the listed answer is drawn from
_PREFERENCE_TRIES = 5  # extra graphs drawn for a preferred (confounded) query before the fallback


# ---------------------------------------------------------------------------------------------
# config
def check_query_settings(set_variants, ate_margin) -> None:
    """Validate the query settings every causal dataset config shares; ``ValueError`` names the fix."""
    if not set_variants or any(v not in ("any", "minimal") for v in set_variants):
        raise ValueError(
            f"set_variants must be a non-empty subset of ('any', 'minimal'), got {set_variants!r} "
            "('maximal' has a unique answer, so it cannot give find-one queries with several answers)"
        )
    if isinstance(ate_margin, bool) or not isinstance(ate_margin, (int, float)) or not 0 <= ate_margin <= 0.2:
        raise ValueError(f"ate_margin must be a number in [0, 0.2], got {ate_margin!r}")


@dataclass
class CausalGraphConfig:
    """Configuration of the causal problem generator (supplied-graph mode by default).

    Attributes:
        size: number of rows.
        seed: base seed (``None``: a random one, as in reasoning-gym).
        min_nodes, max_nodes: node-count range, within 4..12.
        families: graph families to draw from (see the module docstring).
        query_kinds: query kinds to draw from, uniformly; ``None`` means every kind that some family
            in ``families`` supports.
        edge_prob: edge probability of ``random_dag`` (and the base DAG of ``admg``/``cyclic``).
        max_parents: cap on a node's parents in DAGs and ADMGs (keeps CPTs and path lists short);
            the back edges of ``cyclic`` graphs prefer heads under the cap but may exceed it.
        max_bidirected: at most this many bidirected edges in an ``admg`` graph (at least one).
        max_back_edges: at most this many back edges in a ``cyclic`` graph (at least one).
        set_variants: variants of ``backdoor_set``/``dsep_set``/``msep_set`` queries, from
            ``("any", "minimal")``; ``maximal`` is excluded because its answer is unique.
        ate_margin: the ``ate`` threshold lies more than this far from the true ψ.
        mode: ``"supplied"`` (edge list in the prompt) or ``"constructed"`` (story, graph hidden).
        max_attempts: graphs drawn per row before giving up on a query kind.
    """

    size: int = 500
    seed: int | None = None
    min_nodes: int = 4
    max_nodes: int = 8
    families: tuple[str, ...] = FAMILIES
    query_kinds: tuple[str, ...] | None = None
    edge_prob: float = 0.3
    max_parents: int = 3
    max_bidirected: int = 2
    max_back_edges: int = 2
    set_variants: tuple[str, ...] = ("any", "minimal")
    ate_margin: float = 0.05
    mode: str = "supplied"
    max_attempts: int = 200

    def __post_init__(self) -> None:
        # YAML and reasoning-gym's composite pass lists; keep tuples so configs compare and hash cleanly.
        for name in ("families", "query_kinds", "set_variants"):
            value = getattr(self, name)
            if isinstance(value, str):
                setattr(self, name, (value,))
            elif isinstance(value, list):
                setattr(self, name, tuple(value))

    def kinds(self) -> tuple[str, ...]:
        """The query kinds rows are drawn from (resolving ``query_kinds=None``)."""
        if self.query_kinds is not None:
            return tuple(self.query_kinds)
        return tuple(k for k, fams in KIND_FAMILIES.items() if set(fams) & set(self.families))

    def validate(self) -> None:
        """Raise ``ValueError`` naming the field and the fix when the configuration is unusable."""
        if not isinstance(self.size, int) or self.size <= 0:
            raise ValueError(f"size must be a positive integer, got {self.size!r}")
        if self.seed is not None and not isinstance(self.seed, int):
            raise ValueError(f"seed must be an integer or None, got {self.seed!r}")
        for name in ("min_nodes", "max_nodes"):
            v = getattr(self, name)
            if not isinstance(v, int) or not 4 <= v <= 12:
                raise ValueError(f"{name} must be an integer in 4..12, got {v!r}")
        if self.min_nodes > self.max_nodes:
            raise ValueError(
                f"min_nodes ({self.min_nodes}) must be <= max_nodes ({self.max_nodes}); swap or widen them"
            )
        if not self.families:
            raise ValueError(f"families must name at least one of {list(FAMILIES)}")
        unknown = [f for f in self.families if f not in FAMILIES]
        if unknown:
            raise ValueError(f"unknown graph families {unknown}; choose from {list(FAMILIES)}")
        if self.query_kinds is not None:
            if not self.query_kinds:
                raise ValueError("query_kinds must not be empty; use None for every applicable kind")
            unknown = [k for k in self.query_kinds if k not in KIND_FAMILIES]
            if unknown:
                raise ValueError(f"unknown query kinds {unknown}; choose from {list(KIND_FAMILIES)}")
        for kind in self.kinds():
            if not set(KIND_FAMILIES[kind]) & set(self.families):
                raise ValueError(
                    f"query kind {kind!r} needs one of the families {list(KIND_FAMILIES[kind])}; "
                    f"add one to families or drop {kind!r} from query_kinds"
                )
        if not self.kinds():
            raise ValueError("no query kind applies to these families; add 'random_dag' to families")
        if (
            isinstance(self.edge_prob, bool)
            or not isinstance(self.edge_prob, (int, float))
            or not 0.05 <= self.edge_prob <= 0.9
        ):
            raise ValueError(f"edge_prob must be a number in [0.05, 0.9], got {self.edge_prob!r}")
        if not isinstance(self.max_parents, int) or not 2 <= self.max_parents <= 6:
            raise ValueError(f"max_parents must be an integer in 2..6, got {self.max_parents!r}")
        for name in ("max_bidirected", "max_back_edges"):
            v = getattr(self, name)
            if not isinstance(v, int) or not 1 <= v <= 6:
                raise ValueError(f"{name} must be an integer in 1..6, got {v!r}")
        check_query_settings(self.set_variants, self.ate_margin)
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {list(MODES)}, got {self.mode!r}")
        if not isinstance(self.max_attempts, int) or self.max_attempts < 10:
            raise ValueError(f"max_attempts must be an integer >= 10, got {self.max_attempts!r}")


@dataclass
class CausalStoryConfig(CausalGraphConfig):
    """:class:`CausalGraphConfig` for constructed-graph mode (stories; the edge list is hidden)."""

    mode: str = "constructed"


# ---------------------------------------------------------------------------------------------
# rows
def make_problem(config: CausalGraphConfig, rng: random.Random) -> tuple[dict, str, dict]:
    """Draw one problem.

    Returns:
        ``(problem, answer, info)``: the problem dict (``graph``, ``query``, ``cpts`` for
        ``ate``, ``text``, ``mode``), one valid answer in canonical form, and ``{"family", "kind",
        "n_nodes", "n_edges", "theme"}``.

    Raises:
        RuntimeError: no problem of the drawn kind was found in ``config.max_attempts`` graphs.
    """
    kinds = config.kinds()
    kind = rng.choice(kinds)
    target = rng.random() < 0.5 if kind in YES_NO_KINDS else None
    families = [f for f in config.families if f in KIND_FAMILIES[kind]]
    story = config.mode == "constructed"
    chosen, fallback_at = None, None
    for attempt in range(config.max_attempts):
        family = rng.choice(families)
        n = rng.randint(config.min_nodes, config.max_nodes)
        graph = make_graph(family, rng.sample(_LETTERS, n), rng, config)
        theme = rng.choice(THEMES) if story else None
        if theme is not None:
            graph = name_graph(graph, theme, rng)
        built = _BUILDERS[kind](graph, rng, config, target)
        if built is None:
            continue
        if built[2]:
            chosen = (family, graph, theme, built)
            break
        if chosen is None:
            chosen, fallback_at = (family, graph, theme, built), attempt
        elif attempt - fallback_at >= _PREFERENCE_TRIES:
            break
    if chosen is None:
        raise RuntimeError(
            f"no {kind} problem found in {config.max_attempts} graphs with {config.min_nodes}-"
            f"{config.max_nodes} nodes; raise max_nodes or max_attempts, or drop {kind!r} from query_kinds"
        )
    family, graph, theme, (query, cpts, _) = chosen
    qk = QUERY_KINDS[kind]
    value = rng.choice(
        qk.valid_answers(graph, query, limit=ANSWER_CHOICES, max_checks=_MAX_CHECKS, cpts=cpts)
    )
    answer = qk.format_answer(value)
    text = problem_text(
        graph, query, cpts=cpts, story=story_text(graph, rng, setting=theme.setting) if story else None
    )
    problem: dict[str, Any] = {"graph": graph.to_dict(), "query": query}
    if cpts is not None:
        problem["cpts"] = cpts
    problem["text"] = text
    problem["mode"] = config.mode
    info = {
        "family": family,
        "kind": kind,
        "n_nodes": len(graph.nodes),
        "n_edges": len(graph.directed) + len(graph.bidirected),
        "theme": theme.name if theme else None,
    }
    return problem, answer, info


class CausalProblemDataset(ProceduralDataset):
    """Shared body of the causal reasoning-gym datasets: one problem per index, graded by its predicate.

    A subclass names ``DATASET_NAME`` and implements :meth:`make` (problem, answer, info for one seeded
    ``rng``) and :meth:`extra_metadata` (its own metadata fields). Entries: ``question`` (the problem
    text), ``answer`` (one valid answer), ``metadata`` with ``source_dataset``, ``source_index``,
    ``problem`` (the problem as a JSON string), ``query_kind``, ``mode``, ``difficulty`` and the extras.
    """

    DATASET_NAME = ""

    def __init__(self, config):
        super().__init__(config=config, seed=config.seed, size=config.size)

    def make(self, rng: random.Random) -> tuple[dict[str, Any], str, dict[str, Any]]:
        raise NotImplementedError(f"{type(self).__name__} must implement make(rng)")

    def extra_metadata(self, problem: dict[str, Any], info: dict[str, Any]) -> dict[str, Any]:
        return {}

    def __getitem__(self, idx: int) -> dict[str, Any]:
        # String seeds hash with SHA-512: stable across runs and distinct per dataset, unlike seed + idx.
        rng = random.Random(f"{self.DATASET_NAME}:{self.seed}:{idx}")
        problem, answer, info = self.make(rng)
        return {
            "question": problem["text"],
            "answer": answer,
            "metadata": {
                "source_dataset": self.DATASET_NAME,
                "source_index": idx,
                "problem": json.dumps(problem, ensure_ascii=False),
                "query_kind": info["kind"],
                **self.extra_metadata(problem, info),
                "difficulty": {"n_nodes": info["n_nodes"], "n_edges": info["n_edges"]},
            },
        }

    def score_answer(self, answer: str | None, entry: dict[str, Any]) -> float:
        """1.0 when ``answer`` satisfies the graph predicate of the entry's problem, else 0.0."""
        problem = (entry.get("metadata") or {}).get("problem")
        return 1.0 if problem is not None and grade_answer(problem, answer) else 0.0


class CausalGraphDataset(CausalProblemDataset):
    """reasoning-gym dataset ``causal_graph``: causal questions over a supplied edge list.

    Metadata beyond :class:`CausalProblemDataset`'s: ``family``, ``mode`` and ``theme``.
    """

    DATASET_NAME = "causal_graph"

    def make(self, rng: random.Random) -> tuple[dict[str, Any], str, dict[str, Any]]:
        return make_problem(self.config, rng)

    def extra_metadata(self, problem: dict[str, Any], info: dict[str, Any]) -> dict[str, Any]:
        return {"family": info["family"], "mode": problem["mode"], "theme": info["theme"]}


class CausalStoryDataset(CausalGraphDataset):
    """reasoning-gym dataset ``causal_story``: the same questions told as stories (graph hidden)."""

    DATASET_NAME = "causal_story"


def _register() -> None:
    # Guarded: importing this module twice (reload, two import paths) must not raise.
    for name, dataset_cls, config_cls in (
        ("causal_graph", CausalGraphDataset, CausalGraphConfig),
        ("causal_story", CausalStoryDataset, CausalStoryConfig),
    ):
        if name not in DATASETS:
            reasoning_gym.register_dataset(name, dataset_cls, config_cls)


_register()
