"""CALVER: symbolic verification of a six-slot causal reasoning trace (DESIGN §3.4).

A trace fills five labelled slots inside ``<think>`` and puts the final answer in ``<answer>``
(:mod:`faithgrpo.rewards.trace` parses the structure). :func:`score_trace` runs six binary checks and
:func:`calver_reward` turns them into the TRL reward ``S/6``.

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
                    (:func:`faithgrpo.tasks.queries.query_matches`).
3      strategy     STRATEGY names exactly one method, and it decides the kind
                    (``QueryKind.strategy_problem``), in at most ``max_strategy_chars`` characters.
4      derivation   DERIVATION is a certificate (:mod:`faithgrpo.tasks.derivation`): at least one claim
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
``verify_on="problem"``, and the derivation only on graphs with more paths than the cap.

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

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from faithgrpo.rewards.diagnostics import log_value
from faithgrpo.rewards.text import completion_text
from faithgrpo.rewards.trace import DEFAULT_MAX_CHARS, SLOT_NAMES, Trace, parse_trace
from faithgrpo.tasks import criteria as C
from faithgrpo.tasks.derivation import (
    DEFAULT_MAX_PATHS,
    check_derivation,
    derivation_context,
)
from faithgrpo.tasks.graph import (
    MAX_EDGES,
    MAX_NODES,
    CausalGraph,
    GraphParseError,
    node_sort_key,
    parse_graph,
)
from faithgrpo.tasks.queries import (
    QUERY_KINDS,
    QueryKind,
    _load_problem_text,
    _valid_value,
    format_query,
    parse_node_set,
    query_matches,
)

__all__ = [
    "CHECK_NAMES",
    "GRAPH_CHECKS",
    "CalverConfig",
    "CalverProblem",
    "CalverScore",
    "calver_reward",
    "make_calver_reward",
    "prepare_problem",
    "score_trace",
    "strip_answer_fields",
]

#: The six checks, in table order.
CHECK_NAMES = SLOT_NAMES
GRAPH_CHECKS = ("exact", "query_local")
VERIFY_ON = ("problem", "trace")
MODES = ("supplied", "constructed")

DEFAULT_MAX_SLOT_CHARS = 16_000
DEFAULT_MAX_STRATEGY_CHARS = 300

_ANSWER_KEY_RE = re.compile(
    r"answer|solution|gold|ground_?truth|label|target|expected|reference|oracle|correct",
    re.IGNORECASE,
)
_SCORER_FIELDS = ("graph", "query", "cpts", "mode")


# ---------------------------------------------------------------------------------------------
# configuration
@dataclass(frozen=True)
class CalverConfig:
    """Scorer settings (all caps bound the work on adversarial traces).

    Attributes:
        graph_check: ``"exact"`` or ``"query_local"`` (how GRAPH binds to the problem's graph).
        verify_on: ``"problem"`` (the reward) or ``"trace"`` (reference-free best-of-K on constructed
            problems: the trace's own GRAPH); see the module docstring.
        max_paths: the derivation certificate's path cap (:mod:`faithgrpo.tasks.derivation`).
        max_chars: longest completion scored; longer ones fail every check.
        max_slot_chars: longest GRAPH / QUERY / DERIVATION / RESULT / answer slot.
        max_strategy_chars: longest STRATEGY slot (a method name, not an essay).
        max_nodes: most distinct nodes read from GRAPH.
        max_edges: most edges read from GRAPH.

    Raises:
        ValueError: a setting out of range, naming the fix.
    """

    graph_check: str = "exact"
    verify_on: str = "problem"
    max_paths: int = DEFAULT_MAX_PATHS
    max_chars: int = DEFAULT_MAX_CHARS
    max_slot_chars: int = DEFAULT_MAX_SLOT_CHARS
    max_strategy_chars: int = DEFAULT_MAX_STRATEGY_CHARS
    max_nodes: int = MAX_NODES
    max_edges: int = MAX_EDGES

    def __post_init__(self) -> None:
        if self.graph_check not in GRAPH_CHECKS:
            raise ValueError(f"graph_check must be one of {list(GRAPH_CHECKS)}, got {self.graph_check!r}")
        if self.verify_on not in VERIFY_ON:
            raise ValueError(f"verify_on must be one of {list(VERIFY_ON)}, got {self.verify_on!r}")
        for name in (
            "max_paths",
            "max_chars",
            "max_slot_chars",
            "max_strategy_chars",
            "max_nodes",
            "max_edges",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")


_config = functools.lru_cache(maxsize=64)(CalverConfig)


# ---------------------------------------------------------------------------------------------
# the problem, as the scorer sees it
def strip_answer_fields(problem: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``problem`` without answer-like keys, at the top level and inside ``query``.

    A key is answer-like when its name contains ``answer``, ``solution``, ``gold``, ``ground_truth``,
    ``label``, ``target``, ``expected``, ``reference``, ``oracle`` or ``correct`` (any case). Their
    values are never read. ``graph`` and ``cpts`` are copied untouched (their keys are node names).
    Query fields set to ``None`` (how ``datasets`` fills fields a row lacks) are dropped too.

    Args:
        problem: a DESIGN §4 problem dict (any ``Mapping``).

    Returns:
        A new dict.

    Example:
        >>> strip_answer_fields({"graph": {}, "query": {"kind": "cycle", "answer": "A"}, "valid_answers": [1]})
        {'graph': {}, 'query': {'kind': 'cycle'}}
    """
    out: dict[str, Any] = {}
    for key in list(problem.keys()):
        if isinstance(key, str) and _ANSWER_KEY_RE.search(key):
            continue
        value = problem[key]
        if key == "query" and isinstance(value, Mapping):
            value = {
                k: value[k]
                for k in list(value.keys())
                if not (isinstance(k, str) and _ANSWER_KEY_RE.search(k)) and value[k] is not None
            }
        out[key] = value
    return out


@dataclass(frozen=True, eq=False)
class CalverProblem:
    """A problem prepared for scoring (answer fields stripped, graph and query checked).

    Build it once with :func:`prepare_problem` and pass it to :func:`score_trace` to score many
    completions of one prompt without re-validating the problem.

    Attributes:
        graph: the problem's graph (supplied graph, or the hidden source graph in constructed mode).
        query: the query dict (answer-like fields removed).
        cpts: the CPTs (``ate`` only) or ``None``.
        mode: ``"supplied"`` or ``"constructed"``.
        kind: the :class:`~faithgrpo.tasks.queries.QueryKind`, or ``None`` for an unknown kind
            (every completion then scores 0).
        query_nodes: the nodes named by the query's roles.
    """

    graph: CausalGraph | None
    query: dict[str, Any]
    cpts: Mapping[str, Any] | None
    mode: str
    kind: QueryKind | None
    query_nodes: frozenset[str] = frozenset()
    #: the JSON text the problem was prepared from (None for a dict); see :attr:`_shared_text`
    source: str | None = field(default=None, repr=False)

    @functools.cached_property
    def local_set(self) -> frozenset[str]:
        """Ancestors of the query nodes in the problem graph, query nodes included."""
        if self.graph is None or not self.query_nodes:
            return frozenset()
        return self.graph.ancestors(self.query_nodes, include_self=True)

    @functools.cached_property
    def local_edges(self) -> tuple[frozenset, frozenset]:
        """The problem graph's edges into :attr:`local_set` (directed) and within it (bidirected)."""
        assert self.graph is not None
        return _edges_into(self.graph, self.local_set)

    @functools.cached_property
    def _graph_valid(self) -> bool:
        """Whether the problem's graph is well-formed (``prepare_problem`` checks it; a hand-built one may not be)."""
        try:
            return self.graph is not None and self.graph.validate() is self.graph
        except GraphParseError:
            return False

    @functools.cached_property
    def _derivation_context(self) -> Any:
        """The derivation checker's context for this problem's graph (shared by its completions)."""
        return derivation_context(self.graph, self.cpts, self.query)

    @functools.cached_property
    def _memo(self) -> dict:
        """Per-problem results of pure checks, keyed by slot text and settings (see :func:`_memoised`)."""
        return {}

    @functools.cached_property
    def true_ate(self) -> float:
        """The interventional ψ of an ``ate`` problem (from the CPTs, computed once per problem)."""
        return C.interventional_ate(self.cpts, self.query["treatment"], self.query["outcome"])

    def is_valid(self, graph: CausalGraph, value: Any) -> bool:
        """``QueryKind.is_valid`` on ``graph``; ``ate`` values on the problem's own graph reuse :attr:`true_ate`.

        Raises:
            ValueError: the query or CPTs do not fit ``graph`` (a constructed trace graph).
        """
        assert self.kind is not None
        if self.kind.name == "ate" and graph is self.graph and value is not None:
            # queries._valid_ate, with ψ computed once: the CPTs were checked against this graph
            decision, psi = value
            q = self.query
            if decision != (self.true_ate > float(q["threshold"])):
                return False
            return psi is None or abs(psi - self.true_ate) <= float(q.get("tolerance", 0.01))
        if graph is self.graph and self._query_fits:  # check_query already passed on these inputs
            if self._shared_text is not None:
                # the outcome grader's memo (keyed by the problem text and the value): an answer it
                # graded is not checked again here, and vice versa
                return _valid_value(self._shared_text, value)
            return self.kind._valid_checked(graph, self.query, value, self.cpts)
        return self.kind.is_valid(graph, self.query, value, self.cpts)

    @functools.cached_property
    def _shared_text(self) -> str | None:
        """:attr:`source` when the outcome grader reads exactly this graph, query and CPTs from it.

        ``queries._valid_value(source, value)`` is then ``kind._valid_checked`` on inputs equal to
        ours (same node order, edge sets, query dict and CPTs; the query had no answer-like field to
        strip), a pure function of them, so its memo may answer for this problem too.
        """
        if self.source is None or self.graph is None or self.kind is None:
            return None
        try:
            graph, query, cpts = _load_problem_text(self.source)
        except Exception:  # the grader cannot read it: check on our own inputs
            return None
        mine = (self.graph.kind, self.graph.nodes, self.graph.directed, self.graph.bidirected)
        same = mine == (graph.kind, graph.nodes, graph.directed, graph.bidirected)
        return self.source if same and query == self.query and cpts == self.cpts else None

    @functools.cached_property
    def _query_fits(self) -> bool:
        """Whether ``check_query`` accepts the query on the problem's graph (``prepare_problem`` ensures it)."""
        try:
            self.kind.check_query(self.graph, self.query, self.cpts)
        except Exception:  # a hand-built problem: is_valid then raises as before
            return False
        return True


def prepare_problem(problem: Mapping[str, Any] | str | CalverProblem) -> CalverProblem:
    """Strip answer fields and check a DESIGN §4 problem once, for scoring many completions.

    Args:
        problem: the problem dict, its JSON string, or an already prepared problem.

    Returns:
        A :class:`CalverProblem`. An unknown query kind is not an error: it gives a problem whose
        completions all score 0 (fail closed).

    Raises:
        ValueError: malformed JSON, graph, query, CPTs or mode (the message names the fix).

    Example:
        >>> p = prepare_problem('{"graph": {"type": "DAG", "nodes": ["X", "Y"], "directed": [["X", "Y"]]},'
        ...                     ' "query": {"kind": "mediator", "treatment": "X", "outcome": "Y"}}')
        >>> p.mode, p.kind.name, sorted(p.query_nodes)
        ('supplied', 'mediator', ['X', 'Y'])
    """
    if isinstance(problem, CalverProblem):
        return problem
    if isinstance(problem, str):
        return _prepare_json(problem)
    if not isinstance(problem, Mapping):
        raise ValueError(
            f"problem must be a dict (or its JSON string) with 'graph' and 'query', got {type(problem).__name__}"
        )
    return _prepare(strip_answer_fields(problem))


@functools.lru_cache(maxsize=512)
def _prepare_json(text: str) -> CalverProblem:
    try:
        problem = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"problem is not valid JSON: {exc}") from None
    if not isinstance(problem, Mapping):
        raise ValueError("problem JSON must be an object with 'graph' and 'query'")
    return _prepare(strip_answer_fields(problem), text)


def _prepare(clean: dict[str, Any], source: str | None = None) -> CalverProblem:
    view = {k: clean[k] for k in _SCORER_FIELDS if clean.get(k) is not None}
    mode = view.get("mode", "supplied")
    if mode not in MODES:
        raise ValueError(f"problem 'mode' must be one of {list(MODES)}, got {mode!r}")
    if "graph" not in view or "query" not in view:
        raise ValueError("problem needs 'graph' and 'query' fields (DESIGN §4)")
    query = view["query"]
    if not isinstance(query, Mapping):
        raise ValueError(f"problem 'query' must be a dict with a 'kind', got {type(query).__name__}")
    graph = CausalGraph.from_dict(view["graph"])
    kind = QUERY_KINDS.get(query.get("kind")) if isinstance(query.get("kind"), str) else None
    if kind is None:
        return CalverProblem(graph, dict(query), None, mode, None)
    cpts = view.get("cpts")
    kind.check_query(graph, query, cpts)  # ValueError naming the fix
    nodes: set[str] = set()
    for role in kind.roles:
        value = query.get(role)
        nodes.update([value] if isinstance(value, str) else value or ())
    prepared = CalverProblem(graph, dict(query), cpts, mode, kind, frozenset(nodes), source)
    if kind.name == "ate":
        _ = prepared.true_ate  # a problem whose effect cannot be computed is malformed: raise now
    return prepared


_MEMO_ENTRIES = 256  # per prepared problem (G completions x 5 slots fit); then the memo starts over
_MEMO_KEY_CHARS = 1_000  # longer slots are checked without memoising: <= ~0.5 MB per problem


def _memoised(p: CalverProblem, key: tuple, text: str | None, compute: Any) -> Any:
    """``compute()``, remembered on the prepared problem under ``key``.

    Only for checks that are pure functions of the problem, ``key`` (the slot text and the settings
    they read) and nothing else, and whose results are immutable (reason strings, frozen graphs,
    booleans): the G completions of a prompt then repeat no work, and no caller can alter a stored
    value. A check that raises is not remembered (it raises again next time).
    """
    memo = p._memo
    if key in memo:
        return memo[key]
    value = compute()
    if text is None or len(text) <= _MEMO_KEY_CHARS:
        if len(memo) >= _MEMO_ENTRIES:
            memo.clear()
        memo[key] = value
    return value


def _edges_into(g: CausalGraph, nodes: frozenset[str]) -> tuple[frozenset, frozenset]:
    directed = frozenset(e for e in g.directed if e[1] in nodes)
    bidirected = frozenset(e for e in g.bidirected if e[0] in nodes and e[1] in nodes)
    return directed, bidirected


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
        problem: the DESIGN §4 problem (dict, JSON string, or :func:`prepare_problem`'s result).
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
    config = _config(graph_check, verify_on, max_paths, max_chars, max_slot_chars, max_strategy_chars,
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
    reasons: dict[str, str] = {}
    passed: dict[str, bool] = {}

    def run(name: str, check: Any, *args: Any) -> Any:
        try:
            reason, extra = check(*args)
        except Exception as exc:  # the scorer never raises on model output; tests assert this never fires
            reason, extra = f"internal error {type(exc).__name__}: {str(exc)[:120]}", None
        passed[name] = reason is None
        if reason is not None:
            reasons[name] = reason
        return extra

    trace_graph = run("graph", _check_graph, trace, p, cfg)
    run("query", _check_query, trace, p, cfg)
    run("strategy", _check_strategy, trace, p, cfg)
    graph, where = _verification_graph(p, cfg, trace_graph)
    memo: dict = {}
    result_value = run("result", _check_result, trace, p, cfg, graph, where, memo)
    report = run("derivation", _check_derivation, trace, p, cfg, graph, result_value)
    agrees = run("answer", _check_answer, trace, p, cfg, result_value, memo)
    if result_value is not None and not agrees:
        # a certificate for a RESULT that is not the answer certifies nothing
        for name in ("result", "derivation"):
            passed[name] = False
            reasons[name] = f"RESULT is not the answer ({reasons['answer']})"
    claims, false_claims = report if report is not None else (0, 0)
    return CalverScore(**passed, reasons=reasons, claims=claims, false_claims=false_claims)


def _verification_graph(
    p: CalverProblem, cfg: CalverConfig, trace_graph: CausalGraph | None
) -> tuple[CausalGraph | None, str]:
    if p.mode == "constructed" and cfg.verify_on == "trace":
        return trace_graph, "the trace's GRAPH"
    return p.graph, ("the hidden source graph" if p.mode == "constructed" else "the supplied graph")


# ---------------------------------------------------------------------------------------------
# the six checks: each returns (reason or None, extra)
def _slot(trace: Trace, name: str, cap: int) -> tuple[str | None, str | None]:
    value = getattr(trace, name)
    if isinstance(value, tuple):
        value = "\n".join(value)
    label = "<answer>" if name == "answer" else name.upper()
    if not value:
        return None, f"no {label} slot"
    if len(value) > cap:
        return None, f"{label} has {len(value)} characters, over the cap of {cap}"
    return value, None


def _short(items: Any, limit: int = 3) -> str:
    items = sorted(items, key=lambda v: node_sort_key(v) if isinstance(v, str) else (str(v), ""))
    text = ", ".join(map(str, items[:limit]))
    return text + (f" (+{len(items) - limit} more)" if len(items) > limit else "")


def _edge_diff(mine: tuple[frozenset, frozenset], theirs: tuple[frozenset, frozenset]) -> str | None:
    parts = []
    for arrow, a, b in (("->", mine[0], theirs[0]), ("<->", mine[1], theirs[1])):
        if a - b:
            parts.append("extra " + _short(f"{u} {arrow} {v}" for u, v in a - b))
        if b - a:
            parts.append("missing " + _short(f"{u} {arrow} {v}" for u, v in b - a))
    return "; ".join(parts) or None


def _check_graph(trace: Trace, p: CalverProblem, cfg: CalverConfig) -> tuple[str | None, CausalGraph | None]:
    # reads only the GRAPH slot, the problem and cfg; returns a reason and an immutable graph
    return _memoised(p, ("graph", trace.graph, cfg), trace.graph, lambda: _graph_check(trace, p, cfg))


def _graph_check(trace: Trace, p: CalverProblem, cfg: CalverConfig) -> tuple[str | None, CausalGraph | None]:
    text, why = _slot(trace, "graph", cfg.max_slot_chars)
    if why:
        return why, None
    assert p.graph is not None
    if len(p.graph.nodes) > cfg.max_nodes:
        return f"the problem has {len(p.graph.nodes)} nodes, over max_nodes={cfg.max_nodes}; raise it", None
    try:
        parsed = parse_graph(
            text,
            p.graph.kind,
            max_nodes=cfg.max_nodes,
            max_edges=cfg.max_edges,
            max_chars=cfg.max_slot_chars,
            validate=False,
        )
    except GraphParseError as exc:
        return f"GRAPH does not parse: {str(exc)[:160]}", None
    unknown = parsed.node_set - p.graph.node_set
    if unknown:
        return f"GRAPH names node(s) not in the problem: {_short(unknown)}", None
    binds = not (p.mode == "constructed" and cfg.verify_on == "trace")
    local = binds and cfg.graph_check == "query_local" and bool(p.query_nodes)
    if not local:
        missing = p.graph.node_set - parsed.node_set
        if missing:
            return f"GRAPH omits node(s) {_short(missing)} (write isolated nodes as lone names)", None
    if parsed.node_set == p.graph.node_set:
        full = parsed
    else:  # query_local: nodes the trace left out are isolated in its graph
        full = CausalGraph(p.graph.kind, p.graph.nodes, parsed.directed, parsed.bidirected)
    try:
        if not (p._graph_valid and full == p.graph):  # a graph equal to a valid one is valid
            full.validate()
    except GraphParseError as exc:
        return f"GRAPH is not a well-formed {p.graph.kind}: {str(exc)[:160]}", None
    if binds:
        source = "hidden source graph" if p.mode == "constructed" else "supplied graph"
        if local:
            diff = _edge_diff(_edges_into(full, p.local_set), p.local_edges)
            where = f"from the {source} among the ancestors of the query nodes"
        else:
            diff = _edge_diff((full.directed, full.bidirected), (p.graph.directed, p.graph.bidirected))
            where = f"from the {source}"
        # the trace's graph verifies nothing here (_verification_graph): the memo keeps no copy of it
        return (f"GRAPH differs {where}: {diff}" if diff else None), None
    return None, full


def _check_query(trace: Trace, p: CalverProblem, cfg: CalverConfig) -> tuple[str | None, None]:
    key = ("query", trace.query, cfg.max_slot_chars)
    return _memoised(p, key, trace.query, lambda: _query_check(trace, p, cfg))


def _query_check(trace: Trace, p: CalverProblem, cfg: CalverConfig) -> tuple[str | None, None]:
    text, why = _slot(trace, "query", cfg.max_slot_chars)
    if why:
        return why, None
    if query_matches(p.query, text):
        return None, None
    return f"QUERY {text[:80]!r} does not restate {format_query(p.query)}", None


def _check_strategy(trace: Trace, p: CalverProblem, cfg: CalverConfig) -> tuple[str | None, None]:
    key = ("strategy", trace.strategy, cfg.max_strategy_chars)
    return _memoised(p, key, trace.strategy, lambda: _strategy_check(trace, p, cfg))


def _strategy_check(trace: Trace, p: CalverProblem, cfg: CalverConfig) -> tuple[str | None, None]:
    text, why = _slot(trace, "strategy", cfg.max_strategy_chars)
    if why:
        return why, None
    assert p.kind is not None
    problem = p.kind.strategy_problem(text)
    return (None if problem is None else f"STRATEGY {text[:60]!r} {problem}"), None


def _check_derivation(
    trace: Trace, p: CalverProblem, cfg: CalverConfig, graph: CausalGraph | None, result_value: Any
) -> tuple[str | None, tuple[int, int] | None]:
    """(reason, (claims, false claims)) of the derivation check."""
    text, why = _slot(trace, "derivation", cfg.max_slot_chars)
    if why:
        return why, None
    if graph is None:
        return "no verification graph: the trace's GRAPH is not a well-formed graph", None
    if result_value is None:
        return "there is no parsable RESULT for the derivation to certify", None
    if graph is p.graph:
        # a pure function of the lines (``text`` joins them; no line holds a "\n"), RESULT's text
        # (which fixes its value and adjustment set) and the path cap: the G completions of a prompt
        # often repeat a whole derivation under other GRAPH/STRATEGY wording. Immutable value.
        key = ("derivation", text, trace.result, cfg.max_paths)
        return _memoised(p, key, text, lambda: _derivation_check(trace, p, cfg, graph, result_value))
    return _derivation_check(trace, p, cfg, graph, result_value)


def _derivation_check(
    trace: Trace, p: CalverProblem, cfg: CalverConfig, graph: CausalGraph, result_value: Any
) -> tuple[str | None, tuple[int, int]]:
    assert p.kind is not None and trace.derivation is not None
    value, ate_set = result_value, None
    if p.kind.name == "ate":
        ate_set, _ = _ate_adjustment_set(trace.result or "")
    # the problem's context remembers claim verdicts across its completions (same graph only)
    context = p._derivation_context if graph is p.graph else None
    report = check_derivation(
        trace.derivation, p.kind.name, p.query, value, graph, p.cpts, ate_set=ate_set, max_paths=cfg.max_paths,
        context=context,
    )  # fmt: skip
    return report.reason(), (len(report.claims), len(report.false))


_ATE_SET_RE = re.compile(r"\{[^{}]*\}|\bset\(\)|∅")


def _ate_adjustment_set(text: str) -> tuple[frozenset[str] | None, str | None]:
    blocks = _ATE_SET_RE.findall(text[:DEFAULT_MAX_SLOT_CHARS])
    if len(blocks) != 1:
        what = "no" if not blocks else "more than one"
        return None, (
            f"ate RESULT names {what} adjustment set; write the decision, ψ and the one set Z it "
            "adjusts for, e.g. 'yes, ψ = 0.35, Z = {U}'"
        )
    z = parse_node_set(blocks[0])
    if z is None:
        return None, f"ate RESULT adjustment set {blocks[0][:60]!r} does not parse"
    return z, None


def _verify(
    p: CalverProblem, graph: CausalGraph, value: Any, text: str, where: str, certify: bool, memo: dict
) -> str | None:
    """None when ``value`` satisfies the predicate on ``graph``; else the reason.

    ``memo`` caches the predicate per (graph, value) within one completion: RESULT and ``<answer>``
    usually carry the same value on the same graph.
    """
    assert p.kind is not None
    key = (id(graph), value)
    try:
        if key not in memo:
            if graph is p.graph:  # a pure function of the problem and the (immutable) value
                memo[key] = _memoised(p, ("valid", value), None, lambda: p.is_valid(graph, value))
            else:
                memo[key] = p.is_valid(graph, value)
        ok = memo[key]
    except ValueError as exc:  # the query or CPTs do not fit this graph (constructed mode)
        return f"the query cannot be checked on {where}: {str(exc)[:120]}"
    if not ok:
        shown = p.kind.format_answer(value)
        unknown = set(value) - graph.node_set if p.kind.answer_type in ("set", "cycle") else set()
        if unknown:
            return f"{shown[:80]} names node(s) not in the graph: {_short(unknown)}"
        return f"{shown[:80]} does not satisfy {p.kind.name} on {where}"
    if certify and p.kind.name == "ate":
        z, why = _ate_adjustment_set(text)
        if why:
            return why
        if graph is p.graph:  # the certificate depends only on the problem and z
            certified, detail = _memoised(
                p, ("ate_certificate", z), None, lambda: _ate_certificate(p, graph, z)
            )
        else:
            certified, detail = _ate_certificate(p, graph, z)
        if not certified:  # False, or None when the query or CPTs do not fit the graph
            return f"no ATE certificate on {where}: {detail[:120]}"
    return None


def _ate_certificate(p: CalverProblem, graph: CausalGraph, z: frozenset[str]) -> tuple[bool | None, str]:
    """``criteria.ate_certificate`` on ``graph``; ``(None, message)`` when the query or CPTs do not fit it."""
    q = p.query
    try:
        return C.ate_certificate(
            graph, p.cpts, q["treatment"], q["outcome"], z, float(q["threshold"]), float(q.get("margin", 0.0))
        )
    except ValueError as exc:
        return None, str(exc)[:120]


def _parsed_slot(trace: Trace, slot: str, p: CalverProblem, cfg: CalverConfig) -> tuple[str, Any, str | None]:
    """``(text, value, reason)`` of an answer-typed slot (RESULT or <answer>); reason when it fails."""
    text, why = _slot(trace, slot, cfg.max_slot_chars)
    if why:
        return text, None, why
    assert p.kind is not None and p.graph is not None
    value = p.kind.parse_answer(text)
    if value is None:
        label = "<answer>" if slot == "answer" else slot.upper()
        return text, None, f"{label} {text[:60]!r} does not parse as a {p.kind.answer_type} answer"
    return text, value, None


def _check_result(
    trace: Trace, p: CalverProblem, cfg: CalverConfig, graph: CausalGraph | None, where: str, memo: dict
) -> tuple[str | None, Any]:
    text, value, why = _parsed_slot(trace, "result", p, cfg)
    if why:
        return why, None
    if graph is None:
        return "no verification graph: the trace's GRAPH is not a well-formed graph", value
    return _verify(p, graph, value, text, where, True, memo), value


def _check_answer(
    trace: Trace, p: CalverProblem, cfg: CalverConfig, result_value: Any, memo: dict
) -> tuple[str | None, bool]:
    """(reason, whether ``<answer>`` parses and equals RESULT)."""
    text, value, why = _parsed_slot(trace, "answer", p, cfg)
    if why:
        return why, False
    if result_value is None:
        return "no parsable RESULT to compare the answer with", False
    mine, theirs = p.kind.format_answer(value), p.kind.format_answer(result_value)
    if (
        p.kind.name == "ate"
        and None not in (value[1], result_value[1])
        and abs(value[1] - result_value[1]) > 1e-9
    ):
        return f"<answer> ψ = {value[1]:g} differs from RESULT's ψ = {result_value[1]:g}", False
    if mine != theirs:
        return f"<answer> {mine[:60]} differs from RESULT {theirs[:60]}", False
    where = "the hidden source graph" if p.mode == "constructed" else "the supplied graph"
    return _verify(p, p.graph, value, text, where, False, memo), True


# ---------------------------------------------------------------------------------------------
# the TRL reward
def make_calver_reward(
    *,
    graph_check: str = "exact",
    max_paths: int = DEFAULT_MAX_PATHS,
    max_chars: int = DEFAULT_MAX_CHARS,
    max_slot_chars: int = DEFAULT_MAX_SLOT_CHARS,
    max_strategy_chars: int = DEFAULT_MAX_STRATEGY_CHARS,
    max_nodes: int = MAX_NODES,
    max_edges: int = MAX_EDGES,
):
    """Build the CALVER reward with the given scorer settings (see :func:`score_trace`).

    Returns:
        A TRL reward function named ``calver``.

    Raises:
        ValueError: a setting out of range (checked here, before training starts).
    """
    config = CalverConfig(graph_check, "problem", max_paths, max_chars, max_slot_chars, max_strategy_chars,
                          max_nodes, max_edges)  # fmt: skip

    def calver(completions: list[Any], problem: list[Any] | None = None, **kwargs: Any) -> list[float | None]:
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
            rewards.append(score.reward)
            failed.append(",".join(score.failed()))
        if scores:
            for name in CHECK_NAMES:
                log_value(f"calver/{name}", sum(getattr(s, name) for s in scores) / len(scores), kwargs)
            log_value("calver/total", sum(s.total for s in scores) / len(scores), kwargs)
            n = len(scores)
            log_value("calver/derivation/claims", sum(s.claims for s in scores) / n, kwargs)
            log_value("calver/derivation/no_claims", sum(s.claims == 0 for s in scores) / n, kwargs)
            log_value("calver/derivation/false", sum(s.false_claims > 0 for s in scores) / n, kwargs)
            incomplete = sum(s.claims > 0 and s.false_claims == 0 and not s.derivation for s in scores)
            log_value("calver/derivation/incomplete", incomplete / n, kwargs)
        if completions:
            log_value("calver/bad_row", bad_rows / len(completions), kwargs)
        log_extra = kwargs.get("log_extra")
        if callable(log_extra) and completions:
            log_extra("calver_failed", failed)
        return rewards

    calver.__doc__ = _REWARD_DOC
    return calver


_REWARD_DOC = """CALVER reward: S/6 for the six symbolic trace checks (DESIGN §3.4); ``None`` for non-causal rows.

    Args:
        completions: plain strings or conversational completions.
        problem: the ``problem`` column (DESIGN §4 JSON string or dict per row); rows whose problem
            is ``None`` or empty (e.g. reasoning-gym rows) get ``None``, and so do malformed problems.
        **kwargs: other TRL reward kwargs. ``log_metric`` receives each check's pass rate
            (``calver/graph`` … ``calver/answer``), the mean total ``calver/total`` (0..6) and the
            share of malformed rows ``calver/bad_row``; ``log_extra`` receives a ``calver_failed``
            column naming each completion's failed checks.

    Returns:
        One float in {0, 1/6, …, 1} (or ``None``) per completion.

    Example:
        >>> problem = {"graph": {"type": "DAG", "nodes": ["X", "M", "Y"], "directed": [["X", "M"], ["M", "Y"]]},
        ...            "query": {"kind": "mediator", "treatment": "X", "outcome": "Y"}}
        >>> calver_reward(["<answer>M</answer>", "no trace"], problem=[problem, None])
        [0.0, None]
    """

calver_reward = make_calver_reward()
