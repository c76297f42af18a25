"""CALVER: symbolic verification of a six-slot causal reasoning trace (docs/rewards.md, "CALVER").

A trace fills five labelled slots inside ``<think>`` and puts the final answer in ``<answer>``
(:mod:`faithgrpo.rewards.trace` parses the structure). :func:`score_trace` runs six binary checks and
:func:`calver_reward` turns them into the TRL reward ``S/6``.

**Variants** (:data:`VARIANTS`; docs/rewards.md, "CALVER variants") turn the same six checks into
other rewards, so that the certificate carries a signal of its own instead of repeating outcome's:

=================  ====================  ==========================================================
variant            TRL name              reward
=================  ====================  ==========================================================
``sum``            ``calver``            ``S/6`` (a wrong answer still earns up to 3/6)
``gated``          ``calver_gated``      ``S/6`` when the answer check passes, else 0: among right
                                         answers the rest of the trace decides, among wrong ones
                                         outcome already does
``certified``      ``calver_certified``  1 when all six checks pass, else 0 (CoT-Pass as a reward)
=================  ====================  ==========================================================

=====  ===========  ==================================================================================
#      check        passes when
=====  ===========  ==================================================================================
1      graph        GRAPH parses into a well-formed graph of the problem's type (acyclic for DAG/ADMG)
                    whose nodes are the problem's nodes (every one written, isolated ones as lone
                    names) and nothing else. Supplied-graph mode also binds it to the supplied graph:
                    ``graph_check="exact"`` needs the same edge set; ``"query_local"`` needs the same
                    edges *into* the ancestral set A of the query's nodes (A taken in the supplied
                    graph, query nodes included; bidirected edges with both ends in A) and lets the
                    trace omit nodes outside A. An edge from outside A into A would change A, so it
                    counts as a difference. Kinds without query nodes (``cycle``) bind exactly.
2      query        QUERY restates the problem's kind, node roles and variant
                    (:func:`faithgrpo.verifier.queries.query_matches`).
3      strategy     STRATEGY names exactly one method, and it decides the kind
                    (``QueryKind.strategy_problem``), in at most ``max_strategy_chars`` characters.
4      derivation   DERIVATION is a certificate (:mod:`faithgrpo.verifier.certificates.derivation`): at least one claim
                    in the claim grammar, every claim true on the verification graph, and together
                    they certify RESULT (paths shown blocked/open, non-descendants, directed paths,
                    the cycle, the ATE arithmetic). Prose lines are ignored.
5      result       RESULT parses as the kind's answer and satisfies the query predicate on the
                    verification graph (in constructed mode only when GRAPH passed check 1: an
                    ill-formed graph verifies nothing). ``ate`` results carry the strict
                    certificate: RESULT also names the adjustment set ``{...}``, and X ∉ Z, Z has no
                    descendant of X, Z blocks every backdoor path, positivity holds and the adjusted
                    ψ is more than ``margin`` from the threshold, on the decided side; a ψ stated in
                    RESULT must be within ``tolerance`` of the true effect
                    (e.g. ``RESULT: yes, ψ = 0.35, Z = {U}``).
6      answer       ``<answer>`` equals RESULT after normalisation (``QueryKind.format_answer``) and
                    satisfies the predicate on the *problem's* graph (the hidden source graph in
                    constructed mode).
=====  ===========  ==================================================================================

**Slot discipline.** A completion that breaks it (:mod:`faithgrpo.rewards.trace`: a label twice, out
of order or outside ``<think>``, several ``<answer>`` tags ...) fails every check. When RESULT and
``<answer>`` differ, the result, derivation and answer checks all fail: a certificate for a RESULT
that is not the answer certifies nothing.

**Verification graph.** ``problem["mode"]`` is ``"supplied"`` (the default: the prompt shows the edge
list) or ``"constructed"`` (the prompt tells a story; the source graph is hidden in the problem).
With ``verify_on="problem"`` (the default, and what the reward uses) the verification graph is the
problem's graph in both modes, and check 1 binds GRAPH to it (``graph_check``), so a made-up graph
on which a wrong answer looks valid earns nothing. ``verify_on="trace"`` is the CALVER paper's
reference-free best-of-K setting for constructed problems: checks 4 and 5 run on the trace's own
GRAPH (which check 1 then only needs to be well-formed); the answer is still graded on the hidden
graph. A wrong answer therefore passes at most the graph, query and strategy checks (3/6) under
``verify_on="problem"``, on every graph: beyond the derivation's path cap the claimed paths stand
in for the rest only for a RESULT that satisfies the predicate.

**Answer fields.** The scorer never sees a reference answer: :func:`strip_answer_fields` drops
answer-like keys (``answer``, ``answers``, ``valid_answers``, ``solution``, ``gold``, ``label``,
``target``, ``ground_truth`` ...) from the problem and its query *without reading their values*, and
the scorer then reads only ``graph``, ``query``, ``cpts`` and ``mode``.

**Never raises on model output.** Empty, oversized (``max_chars``, ``max_slot_chars``), garbage,
deeply nested, unicode and adversarial traces (``max_nodes``/``max_edges`` caps, cyclic "DAGs",
huge sets) fail the affected checks with a reason. Unknown query kinds fail closed (score 0).
A malformed *problem* or configuration raises ``ValueError`` naming the fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from faithgrpo.rewards.calver.checks import (
    check_answer,
    check_derivation_slot,
    check_graph,
    check_query_slot,
    check_result,
    check_strategy,
)
from faithgrpo.rewards.calver.problem import (
    DEFAULT_MAX_SLOT_CHARS,
    DEFAULT_MAX_STRATEGY_CHARS,
    CalverConfig,
    CalverProblem,
    cached_config,
    prepare_problem,
)
from faithgrpo.rewards.diagnostics import log_value
from faithgrpo.rewards.trace import DEFAULT_MAX_CHARS, SLOT_NAMES, parse_trace
from faithgrpo.text import completion_text
from faithgrpo.verifier.certificates.derivation import DEFAULT_MAX_PATHS
from faithgrpo.verifier.graphs.edges import MAX_EDGES, MAX_NODES
from faithgrpo.verifier.graphs.model import CausalGraph

__all__ = [
    "CHECK_NAMES",
    "VARIANTS",
    "CalverReward",
    "CalverScore",
    "calver_certified_reward",
    "calver_gated_reward",
    "calver_reward",
    "make_calver_reward",
    "score_trace",
    "variant_reward",
]

#: The six checks, in table order.
CHECK_NAMES = SLOT_NAMES

#: How the six checks become a reward: variant -> the reward's TRL name (module docstring).
VARIANTS = {"sum": "calver", "gated": "calver_gated", "certified": "calver_certified"}


# ---------------------------------------------------------------------------------------------
# the score
@dataclass(frozen=True)
class CalverScore:
    """The six CALVER checks of one completion.

    Attributes:
        graph, query, strategy, derivation, result, answer: whether each check passed.
        reasons: for every failed check, ``{check name: short reason}``.
        claims: DERIVATION claims parsed in the certificate grammar.
        false_claims: how many of them are false on the verification graph.

    Properties ``total`` (0..6), ``reward`` (``total / 6``) and ``passed`` (all six) derive from the
    booleans.
    """

    graph: bool = False
    query: bool = False
    strategy: bool = False
    derivation: bool = False
    result: bool = False
    answer: bool = False
    reasons: dict[str, str] = field(default_factory=dict, hash=False)
    claims: int = 0
    false_claims: int = 0

    @property
    def total(self) -> int:
        """Number of passed checks, 0..6."""
        return sum(getattr(self, name) for name in CHECK_NAMES)

    @property
    def reward(self) -> float:
        """``total / 6``."""
        return self.total / len(CHECK_NAMES)

    @property
    def passed(self) -> bool:
        """All six checks pass (a correct chain of thought, for CoT-Pass@K)."""
        return self.total == len(CHECK_NAMES)

    def failed(self) -> list[str]:
        """Names of the failed checks, in table order."""
        return [name for name in CHECK_NAMES if not getattr(self, name)]

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-serialisable view."""
        return {
            **{name: getattr(self, name) for name in CHECK_NAMES},
            "total": self.total,
            "reward": self.reward,
            "reasons": dict(self.reasons),
            "claims": self.claims,
            "false_claims": self.false_claims,
        }


def variant_reward(score: CalverScore, variant: str = "sum") -> float:
    """One completion's reward under a CALVER variant (:data:`VARIANTS`).

    Args:
        score: the six checks of the completion.
        variant: ``"sum"`` (``S/6``), ``"gated"`` (``S/6`` if the answer check passed, else 0) or
            ``"certified"`` (1 if all six passed, else 0).

    Returns:
        The reward in [0, 1].

    Raises:
        ValueError: an unknown variant.

    Example:
        >>> right_but_unproved = CalverScore(graph=True, query=True, strategy=True, result=True, answer=True)
        >>> [round(variant_reward(right_but_unproved, v), 3) for v in VARIANTS]
        [0.833, 0.833, 0.0]
        >>> wrong_with_tidy_slots = CalverScore(graph=True, query=True, strategy=True)
        >>> [variant_reward(wrong_with_tidy_slots, v) for v in VARIANTS]
        [0.5, 0.0, 0.0]
    """
    if variant == "sum":
        return score.reward
    if variant == "gated":
        return score.reward if score.answer else 0.0
    if variant == "certified":
        return 1.0 if score.passed else 0.0
    raise ValueError(f"unknown CALVER variant {variant!r}; choose from {', '.join(VARIANTS)}")


def score_trace(
    text: Any,
    problem: Mapping[str, Any] | str | CalverProblem,
    *,
    graph_check: str = "exact",
    verify_on: str = "problem",
    max_paths: int = DEFAULT_MAX_PATHS,
    max_chars: int = DEFAULT_MAX_CHARS,
    max_slot_chars: int = DEFAULT_MAX_SLOT_CHARS,
    max_strategy_chars: int = DEFAULT_MAX_STRATEGY_CHARS,
    max_nodes: int = MAX_NODES,
    max_edges: int = MAX_EDGES,
) -> CalverScore:
    """Run the six CALVER checks (module docstring) on one completion.

    Args:
        text: the completion: a string or a TRL conversational completion.
        problem: the causal problem (dict, JSON string, or :func:`prepare_problem`'s result).
            Answer fields are stripped before anything is read.
        graph_check: ``"exact"`` (GRAPH has the problem's edge set) or ``"query_local"`` (the same
            edges into the ancestral set of the query nodes).
        verify_on: ``"problem"`` (default) or ``"trace"`` (constructed problems verified on the trace's
            own GRAPH, the paper's reference-free best-of-K setting).
        max_paths: the derivation certificate's path cap.
        max_chars: longest completion scored.
        max_slot_chars: longest slot.
        max_strategy_chars: longest STRATEGY.
        max_nodes: most nodes read from GRAPH.
        max_edges: most edges read from GRAPH.

    Returns:
        A :class:`CalverScore`. Never raises on the completion.

    Raises:
        ValueError: a malformed problem or setting (naming the fix).

    Example:
        >>> problem = {"graph": {"type": "DAG", "nodes": ["U", "X", "M", "Y"],
        ...            "directed": [["U", "X"], ["U", "Y"], ["X", "M"], ["M", "Y"]]},
        ...            "query": {"kind": "backdoor_set", "treatment": "X", "outcome": "Y"}}
        >>> trace = ("<think>GRAPH: U -> X; U -> Y; X -> M; M -> Y\\n"
        ...          "QUERY: backdoor_set(treatment=X, outcome=Y)\\nSTRATEGY: backdoor criterion\\n"
        ...          "DERIVATION:\\n- backdoor path X <- U -> Y is blocked given {U}\\n"
        ...          "- U is not a descendant of X\\nRESULT: {U}</think><answer>{U}</answer>")
        >>> score_trace(trace, problem).total
        6
        >>> s = score_trace(trace.replace("{U}", "{M}"), problem)
        >>> s.total, s.failed()
        (3, ['derivation', 'result', 'answer'])
    """
    config = cached_config(graph_check, verify_on, max_paths, max_chars, max_slot_chars, max_strategy_chars,
                     max_nodes, max_edges)  # fmt: skip
    return _score(completion_text(text), prepare_problem(problem), config)


def _fail_all(reason: str) -> CalverScore:
    return CalverScore(reasons=dict.fromkeys(CHECK_NAMES, reason))


def _score(text: str, p: CalverProblem, cfg: CalverConfig) -> CalverScore:
    if p.kind is None:
        return _fail_all(f"unknown query kind {p.query.get('kind')!r}: CALVER fails closed")
    if not text.strip():
        return _fail_all("empty completion")
    if len(text) > cfg.max_chars:
        return _fail_all(f"completion has {len(text)} characters, over max_chars={cfg.max_chars}")
    trace = parse_trace(text, max_chars=cfg.max_chars)
    if trace.problems:
        return _fail_all(f"slot discipline: {trace.problems[0]}")
    graph_why, trace_graph = _run(check_graph, trace, p, cfg)
    query_why, _ = _run(check_query_slot, trace, p, cfg)
    strategy_why, _ = _run(check_strategy, trace, p, cfg)
    graph, where = _verification_graph(p, cfg, trace_graph)
    memo: dict = {}
    result_why, result_value = _run(check_result, trace, p, cfg, graph, where, memo)
    derivation_why, report = _run(check_derivation_slot, trace, p, cfg, graph, result_value)
    answer_why, agrees = _run(check_answer, trace, p, cfg, result_value, memo)
    # the failed checks' reasons, in the order the checks ran
    ran = (("graph", graph_why), ("query", query_why), ("strategy", strategy_why), ("result", result_why),
           ("derivation", derivation_why), ("answer", answer_why))  # fmt: skip
    reasons = {name: why for name, why in ran if why is not None}
    if result_value is not None and not agrees:
        # a certificate for a RESULT that is not the answer certifies nothing
        why = f"RESULT is not the answer ({reasons['answer']})"
        for name in ("result", "derivation"):
            reasons[name] = why
        result_why = derivation_why = why
    claims, false_claims = report if report is not None else (0, 0)
    return CalverScore(
        graph=graph_why is None,
        query=query_why is None,
        strategy=strategy_why is None,
        derivation=derivation_why is None,
        result=result_why is None,
        answer=answer_why is None,
        reasons=reasons,
        claims=claims,
        false_claims=false_claims,
    )


def _run(check: Any, *args: Any) -> tuple[str | None, Any]:
    """``check(*args)``: (reason or None, extra); an exception becomes the reason."""
    try:
        reason, extra = check(*args)
    except Exception as exc:  # the scorer never raises on model output; tests assert this never fires
        return f"internal error {type(exc).__name__}: {str(exc)[:120]}", None
    return reason, extra


def _verification_graph(
    p: CalverProblem, cfg: CalverConfig, trace_graph: CausalGraph | None
) -> tuple[CausalGraph | None, str]:
    if p.mode == "constructed" and cfg.verify_on == "trace":
        return trace_graph, "the trace's GRAPH"
    return p.graph, ("the hidden source graph" if p.mode == "constructed" else "the supplied graph")


# ---------------------------------------------------------------------------------------------
# the TRL reward
def make_calver_reward(
    *,
    variant: str = "sum",
    graph_check: str = "exact",
    max_paths: int = DEFAULT_MAX_PATHS,
    max_chars: int = DEFAULT_MAX_CHARS,
    max_slot_chars: int = DEFAULT_MAX_SLOT_CHARS,
    max_strategy_chars: int = DEFAULT_MAX_STRATEGY_CHARS,
    max_nodes: int = MAX_NODES,
    max_edges: int = MAX_EDGES,
) -> CalverReward:
    """Build the CALVER reward with the given variant and scorer settings (see :func:`score_trace`).

    Args:
        variant: how the six checks become the reward (:data:`VARIANTS`): ``"sum"`` (``calver``),
            ``"gated"`` (``calver_gated``) or ``"certified"`` (``calver_certified``).
        graph_check, max_paths, max_chars, max_slot_chars, max_strategy_chars, max_nodes, max_edges:
            the scorer's settings (:func:`score_trace`).

    Returns:
        A `CalverReward` (a picklable TRL reward named after its variant).

    Raises:
        ValueError: a setting out of range or an unknown variant (checked here, before training starts).
    """
    config = CalverConfig(graph_check, "problem", max_paths, max_chars, max_slot_chars, max_strategy_chars,
                          max_nodes, max_edges)  # fmt: skip
    return CalverReward(config, variant=variant)


class CalverReward:
    """The CALVER reward as a callable object, so it pickles (TRL's async trainer, process pools).

    Built by :func:`make_calver_reward`; ``calver_reward``, ``calver_gated_reward`` and
    ``calver_certified_reward`` are the default ones. ``__name__`` (what TRL logs) is the variant's
    name in :data:`VARIANTS`, and so is the prefix of the check rates it logs.
    """

    __name__ = "calver"

    def __init__(self, config: CalverConfig | None = None, variant: str = "sum"):
        if variant not in VARIANTS:
            raise ValueError(f"unknown CALVER variant {variant!r}; choose from {', '.join(VARIANTS)}")
        self.config = config if config is not None else cached_config(
            "exact", "problem", DEFAULT_MAX_PATHS, DEFAULT_MAX_CHARS, DEFAULT_MAX_SLOT_CHARS,
            DEFAULT_MAX_STRATEGY_CHARS, MAX_NODES, MAX_EDGES,
        )  # fmt: skip
        self.variant = variant
        self.__name__ = VARIANTS[variant]

    def __repr__(self) -> str:
        return f"CalverReward({self.config!r}, variant={self.variant!r})"

    def __call__(
        self, completions: list[Any], problem: list[Any] | None = None, **kwargs: Any
    ) -> list[float | None]:
        config, name = self.config, self.__name__
        rewards: list[float | None] = []
        scores: list[CalverScore] = []
        failed: list[str] = []
        bad_rows = 0
        prepared: dict[Any, CalverProblem | None] = {}
        for i, completion in enumerate(completions):
            row = problem[i] if isinstance(problem, (list, tuple)) and i < len(problem) else None
            if row is None or (isinstance(row, str) and not row.strip()):
                rewards.append(None)  # not a causal row (e.g. reasoning-gym): CALVER does not apply
                failed.append("")
                continue
            key = row if isinstance(row, str) else id(row)
            if key not in prepared:
                try:
                    prepared[key] = prepare_problem(row)
                except ValueError:
                    prepared[key] = None  # a malformed row must not crash training
            if prepared[key] is None:
                bad_rows += 1
                rewards.append(None)
                failed.append("bad_row")
                continue
            score = _score(completion_text(completion), prepared[key], config)
            scores.append(score)
            rewards.append(variant_reward(score, self.variant))
            failed.append(",".join(score.failed()))
        if scores:
            for check in CHECK_NAMES:
                log_value(f"{name}/{check}", sum(getattr(s, check) for s in scores) / len(scores), kwargs)
            log_value(f"{name}/total", sum(s.total for s in scores) / len(scores), kwargs)
            n = len(scores)
            # the certificate rate: every check passed (CoT-Pass's criterion for one sample)
            log_value(f"{name}/certified", sum(s.total == len(CHECK_NAMES) for s in scores) / n, kwargs)
            log_value(f"{name}/derivation/claims", sum(s.claims for s in scores) / n, kwargs)
            log_value(f"{name}/derivation/no_claims", sum(s.claims == 0 for s in scores) / n, kwargs)
            log_value(f"{name}/derivation/false", sum(s.false_claims > 0 for s in scores) / n, kwargs)
            incomplete = sum(s.claims > 0 and s.false_claims == 0 and not s.derivation for s in scores)
            log_value(f"{name}/derivation/incomplete", incomplete / n, kwargs)
        if completions:
            log_value(f"{name}/bad_row", bad_rows / len(completions), kwargs)
        log_extra = kwargs.get("log_extra")
        if callable(log_extra) and completions:
            log_extra(f"{name}_failed", failed)
        return rewards


_REWARD_DOC = """CALVER reward: the six symbolic trace checks as the variant's reward; ``None`` for non-causal rows.

    Args:
        completions: plain strings or conversational completions.
        problem: the ``problem`` column (the problem JSON string or dict per row); rows whose problem
            is ``None`` or empty (e.g. reasoning-gym rows) get ``None``, and so do malformed problems.
        **kwargs: other TRL reward kwargs. ``log_metric`` receives each check's pass rate
            (``calver/graph`` … ``calver/answer``), the mean total ``calver/total`` (0..6), the share
            with all six checks passed ``calver/certified`` (the certificate rate) and the
            share of malformed rows ``calver/bad_row``; ``log_extra`` receives a ``calver_failed``
            column naming each completion's failed checks.

        The metric and column names start with the reward's name (``calver``, ``calver_gated``,
        ``calver_certified``).

    Returns:
        One float in {0, 1/6, …, 1} (or ``None``) per completion: ``S/6`` for ``calver``, ``S/6`` or 0
        for ``calver_gated``, 0 or 1 for ``calver_certified``.

    Example:
        >>> problem = {"graph": {"type": "DAG", "nodes": ["X", "M", "Y"], "directed": [["X", "M"], ["M", "Y"]]},
        ...            "query": {"kind": "mediator", "treatment": "X", "outcome": "Y"}}
        >>> calver_reward(["<answer>M</answer>", "no trace"], problem=[problem, None])
        [0.0, None]
    """

CalverReward.__call__.__doc__ = _REWARD_DOC
calver_reward = make_calver_reward()
calver_gated_reward = make_calver_reward(variant="gated")
calver_certified_reward = make_calver_reward(variant="certified")
