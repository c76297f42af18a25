"""The CALVER scorer's settings and the problem as the scorer sees it.

One job: validate the settings (:class:`CalverConfig`) and prepare a problem once for scoring many
completions (:func:`strip_answer_fields`, :class:`CalverProblem`, :func:`prepare_problem`), with the
per-problem memo of pure check results (:func:`memoised`). The contract (what the scorer reads, which
fields it strips, which errors it raises) is in :mod:`faithgrpo.rewards.calver.reward`; the package
face :mod:`faithgrpo.rewards.calver` exposes the public names.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from faithgrpo.rewards.trace import DEFAULT_MAX_CHARS
from faithgrpo.verifier import graphs as C
from faithgrpo.verifier.certificates.claim_checks import derivation_context
from faithgrpo.verifier.certificates.derivation import DEFAULT_MAX_PATHS
from faithgrpo.verifier.graphs.ate import checked_cpts
from faithgrpo.verifier.graphs.edges import MAX_EDGES, MAX_NODES
from faithgrpo.verifier.graphs.model import CausalGraph, GraphParseError
from faithgrpo.verifier.queries import MODES, load_problem_text, valid_value
from faithgrpo.verifier.query_kinds import QUERY_KINDS, QueryKind

GRAPH_CHECKS = ("exact", "query_local")
VERIFY_ON = ("problem", "trace")

DEFAULT_MAX_SLOT_CHARS = 16_000
DEFAULT_MAX_STRATEGY_CHARS = 300

_ANSWER_KEY_RE = re.compile(
    r"answer|solution|gold|ground_?truth|label|target|expected|reference|oracle|correct",
    re.IGNORECASE,
)
_SCORER_FIELDS = ("graph", "query", "cpts", "mode")
_PLAIN_NAME_RE = re.compile(r"[A-Za-z0-9_]+")  # a node name of graph.plain_edges' plain form


# ---------------------------------------------------------------------------------------------
# configuration
@dataclass(frozen=True)
class CalverConfig:
    """Scorer settings (all caps bound the work on adversarial traces).

    Attributes:
        graph_check: ``"exact"`` or ``"query_local"`` (how GRAPH binds to the problem's graph).
        verify_on: ``"problem"`` (the reward) or ``"trace"`` (reference-free best-of-K on constructed
            problems: the trace's own GRAPH); see the module docstring.
        max_paths: the derivation certificate's path cap (:mod:`faithgrpo.verifier.certificates.derivation`).
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


cached_config = functools.lru_cache(maxsize=64)(CalverConfig)


# ---------------------------------------------------------------------------------------------
# the problem, as the scorer sees it
def strip_answer_fields(problem: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``problem`` without answer-like keys, at the top level and inside ``query``.

    A key is answer-like when its name contains ``answer``, ``solution``, ``gold``, ``ground_truth``,
    ``label``, ``target``, ``expected``, ``reference``, ``oracle`` or ``correct`` (any case). Their
    values are never read. ``graph`` and ``cpts`` are copied untouched (their keys are node names).
    Query fields set to ``None`` (how ``datasets`` fills fields a row lacks) are dropped too.

    Args:
        problem: a causal problem dict (any ``Mapping``).

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
        kind: the :class:`~faithgrpo.verifier.query_kinds.QueryKind`, or ``None`` for an unknown kind
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
        return edges_into(self.graph, self.local_set)

    @functools.cached_property
    def _plain_words(self) -> tuple[frozenset[str], frozenset[str], tuple[tuple[str, str], ...]] | None:
        """The plain-form GRAPH items that name a piece of the problem graph, and which ones a copy needs.

        ``(pieces, required, pairs)``: ``pieces`` holds ``"A"`` per node, ``"A -> B"`` per directed
        edge and ``"A <-> B"`` and ``"B <-> A"`` per bidirected edge; a copy names every directed
        edge and every node without edges (``required``) and each bidirected pair in one of its two
        spellings (``pairs``). ``None`` when some node name is not a plain name (``[A-Za-z0-9_]+``,
        not ``and``), the graph has a self loop (the plain form never reads such graphs) or it stores
        a bidirected pair both ways round.
        """
        g = self.graph
        if g is None or not all(_PLAIN_NAME_RE.fullmatch(v) and v != "and" for v in g.nodes):
            return None
        edges = g.directed | g.bidirected
        if any(a == b for a, b in edges) or any((b, a) in g.bidirected for a, b in g.bidirected):
            return None
        directed = {f"{a} -> {b}" for a, b in g.directed}
        pairs = tuple((f"{a} <-> {b}", f"{b} <-> {a}") for a, b in g.bidirected)
        linked = {v for edge in edges for v in edge}
        required = frozenset(directed | {v for v in g.nodes if v not in linked})
        return frozenset(directed | set(g.nodes) | {w for pair in pairs for w in pair}), required, pairs

    @functools.cached_property
    def _cpts_checked(self) -> tuple[dict, tuple | None]:
        """``ate._checked`` of the CPTs on the problem's graph (the validated table and its key), once."""
        return checked_cpts(self.cpts, self.graph)

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
        """Per-problem results of pure checks, keyed by slot text and settings (see :func:`memoised`)."""
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
                return valid_value(self._shared_text, value)
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
            graph, query, cpts = load_problem_text(self.source)
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
    """Strip answer fields and check a causal problem once, for scoring many completions.

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
        raise ValueError("problem needs 'graph' and 'query' fields (docs/tasks.md, 'The problem JSON')")
    query = view["query"]
    if not isinstance(query, Mapping):
        raise ValueError(f"problem 'query' must be a dict with a 'kind', got {type(query).__name__}")
    graph = _loaded_graph(source) or CausalGraph.from_dict(view["graph"])
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
    # check_query just accepted these (equal) inputs: what _query_fits would compute again
    prepared.__dict__["_query_fits"] = True
    if kind.name == "ate":
        _ = prepared.true_ate  # a problem whose effect cannot be computed is malformed: raise now
    return prepared


def _loaded_graph(source: str | None) -> CausalGraph | None:
    """The outcome grader's graph of the problem text, if it reads one (None: build our own).

    Both are ``CausalGraph.from_dict`` of the same JSON ``graph`` field (answer fields never sit in
    it), so they are equal, node order and edge sets alike; sharing one also shares its caches.
    """
    if source is None:
        return None
    try:
        return load_problem_text(source)[0]
    except Exception:  # a problem the grader rejects (unknown kind ...): ours decides, with its message
        return None


_MEMO_ENTRIES = 256  # per prepared problem (G completions x 5 slots fit); then the memo starts over
_MEMO_KEY_CHARS = 1_000  # longer slots are checked without memoising: <= ~0.5 MB per problem


def memoised(p: CalverProblem, key: tuple, text: str | None, compute: Any) -> Any:
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


def edges_into(g: CausalGraph, nodes: frozenset[str]) -> tuple[frozenset, frozenset]:
    """The directed edges into ``nodes`` and the bidirected edges among them."""
    directed = frozenset(e for e in g.directed if e[1] in nodes)
    bidirected = frozenset(e for e in g.bidirected if e[0] in nodes and e[1] in nodes)
    return directed, bidirected
