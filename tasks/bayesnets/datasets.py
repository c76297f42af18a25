"""Causal problems on published Bayesian networks, registered with reasoning-gym as ``causal_bn``.

Each row asks one causal question (a CALVER query kind) about a real network's structure, read
offline from the BIF files pgmpy bundles (:mod:`faithgrpo.tasks.bayesnets.networks`): 5 to 223 nodes,
hubs, long backdoor paths, and the networks' own variable names. Two renderings, drawn per row from
``modes``:

* ``supplied``: the edge list (``HISTORY -> LVFAILURE; ...``), as ``causal_graph``;
* ``constructed``: a story over the network's own variable names with the edge list hidden, as
  ``causal_story`` (the problem JSON keeps the source graph for grading).

Query kinds: every kind defined on DAGs (``backdoor_set``, ``frontdoor_set``, ``dsep_set``,
``msep_set``, ``ci_test``, ``directed_path``, ``mediator``, ``ate``; a BN has no directed cycle, so
no ``cycle``) that the network *admits*: a seeded, bounded search finds a query of that kind on it
(find-one kinds with at least two valid answers, as in ``causal_graph``; yes/no kinds with either
answer). :func:`admitted_kinds` gives them per network; a row draws the network uniformly from
``networks``, then the kind uniformly from the requested kinds it admits.

Non-ATE problems use the whole network as the graph. ``ate`` problems use the network's own CPTs,
reduced exactly to binary variables on the ancestral set of the outcome
(:mod:`faithgrpo.tasks.bayesnets.ate`: binary variables as they are, a multi-state outcome as the
indicator of one state, a multi-state treatment as a contrast of two of its states); the prompt
says what 1 and 0 stand for. The problem JSON is the causal one (docs/tasks.md, "The problem JSON": ``graph``, ``query``, ``cpts`` for
``ate``, ``text``, ``mode``), so CALVER, the outcome reward and ``faithgrpo eval`` read it
unchanged. The network's name is in the row's metadata.

Rows are deterministic per (seed, index).
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass
from typing import Any

import reasoning_gym
from reasoning_gym.factory import DATASETS

from faithgrpo.tasks.bayesnets.ate import ate_candidates, coding_text, cpt_lines, reduce_for_ate
from faithgrpo.tasks.bayesnets.networks import DEFAULT_NETWORKS, NETWORKS, BayesNet, load_network
from faithgrpo.tasks.causal.datasets import (
    ANSWER_CHOICES,
    YES_NO_KINDS,
    CausalProblemDataset,
    check_query_settings,
)
from faithgrpo.tasks.causal.prompts import answer_format, graph_description, problem_text, question_text
from faithgrpo.tasks.causal.query_builders import BUILDERS, MAX_CHECKS
from faithgrpo.tasks.causal.stories import story_text
from faithgrpo.verifier import graphs as C
from faithgrpo.verifier.queries import MODES, format_query
from faithgrpo.verifier.query_kinds import QUERY_KINDS

__all__ = [
    "BN_KINDS",
    "CausalBNConfig",
    "CausalBNDataset",
    "admitted_kinds",
    "make_bn_problem",
]

#: Query kinds defined on DAGs, in ``QUERY_KINDS`` order.
BN_KINDS = (
    "backdoor_set", "frontdoor_set", "dsep_set", "msep_set", "ci_test", "directed_path", "mediator", "ate",
)  # fmt: skip
_PAIRS_PER_CALL = 40  # (X, Y) candidates an ate search examines per call (as the other builders)
_PREFERENCE_TRIES = 5  # calls after a non-preferred query before settling for it
_ADMIT_ATTEMPTS = 30  # builder calls of the admission search per (kind, answer)
_MAX_ATE_SET = 3  # an ate problem's smallest backdoor set has at most this many nodes (8 strata)


@dataclass
class CausalBNConfig:
    """Configuration of ``causal_bn``.

    Attributes:
        size: number of rows.
        seed: base seed (``None``: a random one, as in reasoning-gym).
        networks: networks to draw from (names in :data:`~faithgrpo.tasks.bayesnets.networks.NETWORKS`).
        query_kinds: query kinds to draw from; ``None`` means all of :data:`BN_KINDS`. Each row
            draws among those its network admits (:func:`admitted_kinds`).
        modes: renderings drawn per row: ``"supplied"`` (edge list) and/or ``"constructed"`` (story).
        set_variants: variants of ``backdoor_set``/``dsep_set``/``msep_set``, from ``("any", "minimal")``.
        ate_margin: the ``ate`` threshold lies more than this far from the true ψ.
        ate_max_variables: the most variables an ``ate`` problem's graph (the outcome's ancestral
            set) may have (4..16; the prompt lists every CPT).
        max_attempts: builder calls per row before the row falls back to the admission search's
            query of the drawn kind.
    """

    size: int = 500
    seed: int | None = None
    networks: tuple[str, ...] = DEFAULT_NETWORKS
    query_kinds: tuple[str, ...] | None = None
    modes: tuple[str, ...] = MODES
    set_variants: tuple[str, ...] = ("any", "minimal")
    ate_margin: float = 0.05
    ate_max_variables: int = 12
    max_attempts: int = 30

    def __post_init__(self) -> None:
        # YAML and reasoning-gym's composite pass lists; keep tuples so configs compare and hash cleanly
        for name in ("networks", "query_kinds", "modes", "set_variants"):
            value = getattr(self, name)
            if isinstance(value, str):
                setattr(self, name, (value,))
            elif isinstance(value, list):
                setattr(self, name, tuple(value))

    def kinds(self) -> tuple[str, ...]:
        """The requested query kinds (``None`` resolved to :data:`BN_KINDS`)."""
        return BN_KINDS if self.query_kinds is None else tuple(self.query_kinds)

    def validate(self) -> None:
        """Raise ``ValueError`` naming the field and the fix when the configuration is unusable."""
        if not isinstance(self.size, int) or isinstance(self.size, bool) or self.size <= 0:
            raise ValueError(f"size must be a positive integer, got {self.size!r}")
        if self.seed is not None and (not isinstance(self.seed, int) or isinstance(self.seed, bool)):
            raise ValueError(f"seed must be an integer or None, got {self.seed!r}")
        if not isinstance(self.networks, tuple) or not self.networks:
            raise ValueError(f"networks must name at least one of {sorted(NETWORKS)}")
        unknown = [n for n in self.networks if n not in NETWORKS]
        if unknown:
            raise ValueError(f"unknown networks {unknown}; choose from {sorted(NETWORKS)}")
        if self.query_kinds is not None:
            if not isinstance(self.query_kinds, tuple) or not self.query_kinds:
                raise ValueError("query_kinds must not be empty; use None for every kind")
            bad = [k for k in self.query_kinds if k not in BN_KINDS]
            if bad:
                why = " (Bayesian networks are acyclic)" if "cycle" in bad else ""
                raise ValueError(
                    f"query kinds {bad} are not drawn on Bayesian networks{why}; choose from {list(BN_KINDS)}"
                )
        if not isinstance(self.modes, tuple) or not self.modes or any(m not in MODES for m in self.modes):
            raise ValueError(f"modes must be a non-empty subset of {MODES}, got {self.modes!r}")
        check_query_settings(self.set_variants, self.ate_margin)
        if (
            not isinstance(self.ate_max_variables, int)
            or isinstance(self.ate_max_variables, bool)
            or not 4 <= self.ate_max_variables <= 16
        ):
            raise ValueError(f"ate_max_variables must be an integer in 4..16, got {self.ate_max_variables!r}")
        if (
            not isinstance(self.max_attempts, int)
            or isinstance(self.max_attempts, bool)
            or self.max_attempts < 1
        ):
            raise ValueError(f"max_attempts must be a positive integer, got {self.max_attempts!r}")


# ---------------------------------------------------------------------------------------------
# query builders: (query, ate reduction or None, preferred) or None
def _confounded(g, x: str, y: str) -> bool:
    return not C.is_backdoor_set(g, x, y, ())


def _q_ate(net: BayesNet, rng: random.Random, cfg: CausalBNConfig, target: bool):
    """An ate query on the exact binary reduction (:mod:`~faithgrpo.tasks.bayesnets.ate`); preferred: confounded."""
    pairs = list(ate_candidates(net, cfg.ate_max_variables))
    rng.shuffle(pairs)
    fallback = None
    for x, y in pairs[:_PAIRS_PER_CALL]:
        confounded = _confounded(net.graph, x, y)
        if fallback is not None and not confounded:
            continue
        built = _ate_query(net, x, y, rng, cfg, target)
        if built is None:
            continue
        if confounded:
            return (*built, True)
        fallback = (*built, False)
    return fallback


def _ate_query(net: BayesNet, x: str, y: str, rng: random.Random, cfg: CausalBNConfig, target: bool):
    x_states = None
    if not net.is_binary(x):
        x_states = tuple(rng.sample(net.states[x], 2))
    y_state = rng.choice(net.states[y]) if not net.is_binary(y) else None
    try:
        red = reduce_for_ate(net, x, y, x_states, y_state)
    except ValueError:
        return None  # e.g. a parent row of X without mass on either state
    bd = {"kind": "backdoor_set", "treatment": x, "outcome": y}
    sets = QUERY_KINDS["backdoor_set"].valid_answers(red.graph, bd, limit=ANSWER_CHOICES, max_checks=1024)
    if not sets or min(map(len, sets)) > _MAX_ATE_SET:
        return None
    try:  # positivity on every small set a gold trace or a model may adjust for
        for z in sets:
            if len(z) <= _MAX_ATE_SET:
                C.adjusted_ate(red.cpts, x, y, z)
    except ValueError:
        return None
    psi = C.interventional_ate(red.cpts, x, y)
    gap = rng.uniform(cfg.ate_margin + 0.02, cfg.ate_margin + 0.25)
    threshold = round(psi - gap if target else psi + gap, 2)
    if abs(psi - threshold) <= cfg.ate_margin or (psi > threshold) != target:
        return None
    q = {"kind": "ate", "treatment": x, "outcome": y, "threshold": threshold, "margin": float(cfg.ate_margin)}
    return q, red


def _build(net: BayesNet, kind: str, rng: random.Random, cfg: CausalBNConfig, target: bool | None):
    if kind == "ate":
        return _q_ate(net, rng, cfg, bool(target))
    built = BUILDERS[kind](net.graph, rng, cfg, target)
    return None if built is None else (built[0], None, built[2])


def _search(net: BayesNet, kind: str, rng: random.Random, cfg: CausalBNConfig, target, attempts: int):
    """The first preferred query in ``attempts`` builder calls, else the first acceptable one."""
    fallback, found_at = None, 0
    for attempt in range(attempts):
        built = _build(net, kind, rng, cfg, target)
        if built is None:
            continue
        if built[2]:
            return built
        if fallback is None:
            fallback, found_at = built, attempt
        elif attempt - found_at >= _PREFERENCE_TRIES:
            break
    return fallback


@functools.lru_cache(maxsize=256)
def _admission(name: str, set_variants: tuple[str, ...], ate_margin: float, ate_max_variables: int) -> dict:
    """``{(kind, answer): built or None}``: the seeded admission search per kind (answer: yes/no kinds)."""
    net = load_network(name)
    cfg = CausalBNConfig(networks=(name,), set_variants=set_variants, ate_margin=ate_margin,
                         ate_max_variables=ate_max_variables)  # fmt: skip
    out = {}
    for kind in BN_KINDS:
        for target in (True, False) if kind in YES_NO_KINDS else (None,):
            rng = random.Random(
                f"causal_bn-admit:{name}:{kind}:{target}:{set_variants}:{ate_margin}:{ate_max_variables}"
            )
            out[(kind, target)] = _search(net, kind, rng, cfg, target, _ADMIT_ATTEMPTS)
    return out


def admitted_kinds(name: str, config: CausalBNConfig | None = None) -> tuple[str, ...]:
    """The query kinds network ``name`` admits under ``config``'s settings (in :data:`BN_KINDS` order).

    A kind is admitted when a seeded search (:data:`_ADMIT_ATTEMPTS` builder calls per answer) finds
    a query of it: for find-one kinds one with at least two valid answers, for yes/no kinds one with
    either answer. Cached per process.
    """
    cfg = config or CausalBNConfig()
    found = _admission(name, tuple(cfg.set_variants), float(cfg.ate_margin), cfg.ate_max_variables)
    return tuple(k for k in BN_KINDS if any(found[key] is not None for key in found if key[0] == k))


# ---------------------------------------------------------------------------------------------
# rows
def _ate_text(red, query, story: str | None) -> str:
    parts = [f"Story: {story}" if story is not None else graph_description(red.graph)]
    parts.append("Coding of the variables:\n" + coding_text(red, query["treatment"]))
    parts.append("Conditional probabilities (from the network's own tables, printed to 6 decimals):\n"
                 + cpt_lines(red.cpts))  # fmt: skip
    parts.append(f"Question: {question_text(query)}")
    parts.append(f"Query: {format_query(query)}")
    parts.append(f"Answer format: {answer_format('ate')}.")
    return "\n".join(parts)


def make_bn_problem(config: CausalBNConfig, rng: random.Random) -> tuple[dict, str, dict]:
    """Draw one problem.

    Returns:
        ``(problem, answer, info)``: the problem dict, one valid answer in canonical form,
        and ``{"network", "kind", "mode", "n_nodes", "n_edges", "coding"}`` (``coding`` for ``ate``).

    Raises:
        ValueError: none of ``config.networks`` admits any of the requested kinds.
    """
    kinds = config.kinds()
    networks = list(config.networks)
    settings = (tuple(config.set_variants), float(config.ate_margin), config.ate_max_variables)
    while True:
        name = rng.choice(networks)
        found = _admission(name, *settings)
        admitted = [k for k in kinds if any(found[key] is not None for key in found if key[0] == k)]
        if admitted:
            break
        networks.remove(name)
        if not networks:
            raise ValueError(
                f"no network of {list(config.networks)} admits any of the query kinds {list(kinds)}; "
                "add networks or kinds"
            )
    net = load_network(name)
    kind = rng.choice(admitted)
    target = None
    if kind in YES_NO_KINDS:
        target = rng.random() < 0.5
        if found[(kind, target)] is None:
            target = not target
    mode = rng.choice(config.modes)
    built = _search(net, kind, rng, config, target, config.max_attempts) or found[(kind, target)]
    query, red, _ = built
    graph, cpts = (red.graph, red.cpts) if red is not None else (net.graph, None)
    qk = QUERY_KINDS[kind]
    value = rng.choice(qk.valid_answers(graph, query, limit=ANSWER_CHOICES, max_checks=MAX_CHECKS, cpts=cpts))
    story = story_text(graph, rng, setting=NETWORKS[name].setting) if mode == "constructed" else None
    if red is not None:
        text = _ate_text(red, query, story)
    else:
        text = problem_text(graph, query, story=story)
    problem: dict[str, Any] = {"graph": graph.to_dict(), "query": query}
    if cpts is not None:
        problem["cpts"] = cpts
    problem["text"] = text
    problem["mode"] = mode
    info = {
        "network": name,
        "kind": kind,
        "mode": mode,
        "n_nodes": len(graph.nodes),
        "n_edges": len(graph.directed),
        "coding": {v: list(c) for v, c in red.coding.items()} if red is not None else None,
    }
    return problem, qk.format_answer(value), info


class CausalBNDataset(CausalProblemDataset):
    """reasoning-gym dataset ``causal_bn``: causal questions on published Bayesian networks.

    Metadata beyond :class:`~faithgrpo.tasks.causal.datasets.CausalProblemDataset`'s: ``network``,
    ``mode`` and ``coding`` (``ate``: what 1 and 0 stand for).
    """

    DATASET_NAME = "causal_bn"

    def make(self, rng: random.Random) -> tuple[dict[str, Any], str, dict[str, Any]]:
        return make_bn_problem(self.config, rng)

    def extra_metadata(self, problem: dict[str, Any], info: dict[str, Any]) -> dict[str, Any]:
        return {"network": info["network"], "mode": info["mode"], "coding": info["coding"]}


def _register() -> None:
    if "causal_bn" not in DATASETS:  # guarded: importing this module twice must not raise
        reasoning_gym.register_dataset("causal_bn", CausalBNDataset, CausalBNConfig)


_register()
