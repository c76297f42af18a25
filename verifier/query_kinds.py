"""The causal query kinds: one :class:`QueryKind` per kind, registered in :data:`QUERY_KINDS`.

A kind bundles its query fields, the graph types it applies to, the methods a STRATEGY may name,
its answer grammar, and three predicates over a graph (the query's check, an answer's validity,
enumeration of valid answers), which live in :mod:`faithgrpo.verifier.query_predicates`. The table of
kinds and their fields is in :mod:`faithgrpo.verifier.queries`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from faithgrpo.verifier.answers import FORMATTERS, MEMO_TEXT_CHARS, PARSERS
from faithgrpo.verifier.graphs.model import CausalGraph
from faithgrpo.verifier.query_predicates import (
    check_ate,
    check_ci,
    check_cycle,
    check_pair,
    check_sep,
    ci_enum,
    ci_valid,
    dp_enum,
    dp_valid,
    enum_ate,
    enum_backdoor,
    enum_cycle,
    enum_frontdoor,
    enum_mediator,
    enum_sep,
    query_variant,
    valid_ate,
    valid_backdoor,
    valid_cycle,
    valid_frontdoor,
    valid_mediator,
    valid_sep,
)
from faithgrpo.verifier.strategy_methods import cached_strategy_problem, strategy_check

__all__ = ["QUERY_KINDS", "QueryKind"]


@functools.lru_cache(maxsize=8_192)
def _parse_answer_text(answer_type: str, text: str) -> Any:
    # answer texts repeat across a prompt's completions (and re-grading): parse each once
    return PARSERS[answer_type](text)


@dataclass(frozen=True)
class QueryKind:
    """One query kind: its fields, accepted methods, answer grammar and validity predicate.

    Attributes:
        name: the ``query["kind"]`` string.
        roles: node-valued query fields the query names (in restatement order).
        graph_kinds: graph types the kind is defined on.
        answer_type: ``"set"``, ``"yes_no"``, ``"node"``, ``"cycle"`` or ``"ate"``.
        strategies: method names that decide the kind (matched leniently by :meth:`matches_strategy`).
        variants: allowed ``query["variant"]`` values (``("any",)`` when the kind has none).
        params: non-node query fields (``variant``, ``threshold``...).
        description: one line for prompts and docs.
    """

    name: str
    roles: tuple[str, ...]
    graph_kinds: tuple[str, ...]
    answer_type: str
    strategies: tuple[str, ...]
    description: str
    check: Callable[[CausalGraph, Mapping, Mapping | None], None]
    valid: Callable[[CausalGraph, Mapping, Any, Mapping | None], bool]
    enumerate: Callable[[CausalGraph, Mapping, int, int, Mapping | None], list]
    variants: tuple[str, ...] = ("any",)
    params: tuple[str, ...] = ()

    def parse_answer(self, text: Any) -> Any:
        """Parse answer text into this kind's value (set, bool, node, tuple, (bool, ψ)); ``None`` if unparsable.

        Never raises; text over :data:`MAX_ANSWER_CHARS` is unparsable.

        Example:
            >>> QUERY_KINDS["backdoor_set"].parse_answer("{'U'}")
            frozenset({'U'})
        """
        if isinstance(text, str) and len(text) <= MEMO_TEXT_CHARS:
            return _parse_answer_text(self.answer_type, text)
        return PARSERS[self.answer_type](text)

    def format_answer(self, value: Any) -> str:
        """The canonical string of a parsed value (see the module docstring)."""
        return FORMATTERS[self.answer_type](value)

    def check_query(self, graph: CausalGraph, query: Mapping, cpts: Mapping | None = None) -> None:
        """Raise ``ValueError`` naming the fix when ``query`` is not a well-formed query of this kind on ``graph``."""
        if not isinstance(query, Mapping) or query.get("kind") != self.name:
            raise ValueError(f"query must be a dict with kind {self.name!r}")
        if graph.kind not in self.graph_kinds:
            raise ValueError(
                f"{self.name} queries need a graph of type {list(self.graph_kinds)}, got {graph.kind}"
            )
        if query_variant(query) not in self.variants:
            raise ValueError(
                f"{self.name} variant must be one of {list(self.variants)}, got {query_variant(query)!r}"
            )
        self.check(graph, query, cpts)

    def is_valid(self, graph: CausalGraph, query: Mapping, value: Any, cpts: Mapping | None = None) -> bool:
        """Whether a parsed answer ``value`` satisfies the query predicate on ``graph``.

        Args:
            graph: the verification graph.
            query: the query dict.
            value: output of :meth:`parse_answer` (``None`` gives ``False``).
            cpts: the problem's CPTs (``ate`` only).

        Returns:
            ``True`` iff valid. Unknown nodes in ``value`` give ``False``.

        Raises:
            ValueError: the *query* (or graph kind, or CPTs) is malformed.
        """
        self.check_query(graph, query, cpts)
        return self._valid_checked(graph, query, value, cpts)

    def _valid_checked(self, graph: CausalGraph, query: Mapping, value: Any, cpts: Mapping | None) -> bool:
        """:meth:`is_valid` for a query that :meth:`check_query` already accepted on this graph and CPTs."""
        if value is None:
            return False
        if self.answer_type in ("set", "cycle") and not set(value) <= graph.node_set:
            return False
        try:
            return bool(self.valid(graph, query, value, cpts))
        except (ValueError, TypeError):
            return False  # a value the predicate cannot take (e.g. a set overlapping X) is not valid

    def valid_answers(
        self,
        graph: CausalGraph,
        query: Mapping,
        *,
        limit: int = 64,
        max_checks: int = 4_096,
        cpts: Mapping | None = None,
    ) -> list:
        """Enumerate valid answer values, deterministically and bounded.

        Sets come smallest first (then natural order), at most ``limit`` of them, after at most
        ``max_checks`` candidate subsets; yes/no and ``ate`` kinds give their single true value;
        ``cycle`` gives simple cycles rotated to their smallest node.

        Raises:
            ValueError: a malformed query.

        Example:
            >>> from faithgrpo.verifier.graphs.edges import parse_graph
            >>> g = parse_graph("A -> X; B -> X; A -> Y; B -> Y; X -> Y")
            >>> q = {"kind": "backdoor_set", "treatment": "X", "outcome": "Y"}
            >>> [QUERY_KINDS["backdoor_set"].format_answer(v) for v in QUERY_KINDS["backdoor_set"].valid_answers(g, q)]
            ['{A, B}']
        """
        self.check_query(graph, query, cpts)
        return self.enumerate(graph, query, limit, max_checks, cpts)

    def strategy_problem(self, text: Any) -> str | None:
        """Why ``text`` is not a STRATEGY for this kind, or ``None`` when it names exactly one method that decides it.

        The method names of :data:`METHOD_GROUPS` are found in ``text`` (ignoring case, spaces and
        punctuation, longest name first). It passes when it names at least one, every name found is
        one of :attr:`strategies`, and all of them belong to one method group ("cycle detection
        (DFS)" is one method; "backdoor criterion, d-separation" is two).

        Example:
            >>> QUERY_KINDS["backdoor_set"].strategy_problem("backdoor criterion") is None
            True
            >>> QUERY_KINDS["backdoor_set"].strategy_problem("backdoor criterion or d-separation")
            "names more than one method: ['backdoor criterion', 'd-separation']"
        """
        if type(text) is str and len(text) <= MEMO_TEXT_CHARS and type(self.strategies) is tuple:
            return cached_strategy_problem(self.name, self.strategies, text)
        return strategy_check(self.name, self.strategies, text)

    def matches_strategy(self, text: Any) -> bool:
        """Whether ``text`` names exactly one method that decides this kind (:meth:`strategy_problem`)."""
        return self.strategy_problem(text) is None


_ACYCLIC = ("DAG", "ADMG")
_SEP_STRATEGIES = (
    "d-separation",
    "m-separation",
    "Bayes ball",
    "moral graph",
    "moralization",
    "moralisation",
    "global Markov property",
)

QUERY_KINDS: dict[str, QueryKind] = {
    q.name: q
    for q in (
        QueryKind(
            "backdoor_set",
            ("treatment", "outcome"),
            _ACYCLIC,
            "set",
            (
                "backdoor criterion",
                "back-door criterion",
                "backdoor adjustment",
                "back-door adjustment",
                "adjustment criterion",
                "adjustment set",
            ),
            "a set Z satisfying the backdoor criterion for the effect of treatment on outcome",
            check_pair,
            valid_backdoor,
            enum_backdoor,
            variants=("any", "minimal", "maximal"),
            params=("variant",),
        ),
        QueryKind(
            "frontdoor_set",
            ("treatment", "outcome"),
            _ACYCLIC,
            "set",
            ("frontdoor criterion", "front-door criterion", "frontdoor adjustment", "front-door adjustment"),
            "a set Z satisfying Pearl's front-door criterion for treatment and outcome",
            check_pair,
            valid_frontdoor,
            enum_frontdoor,
            variants=("any", "minimal", "maximal"),
            params=("variant",),
        ),
        QueryKind(
            "dsep_set",
            ("x", "y"),
            ("DAG",),
            "set",
            _SEP_STRATEGIES,
            "a set Z that d-separates x from y",
            check_sep,
            valid_sep,
            enum_sep,
            variants=("any", "minimal"),
            params=("variant",),
        ),
        QueryKind(
            "ci_test",
            ("x", "y", "given"),
            _ACYCLIC,
            "yes_no",
            _SEP_STRATEGIES,
            "whether x and y are d-/m-separated given the listed nodes",
            check_ci,
            ci_valid,
            ci_enum,
        ),
        QueryKind(
            "directed_path",
            ("treatment", "outcome"),
            ("DAG", "ADMG", "DG"),
            "yes_no",
            ("directed path", "reachability", "DFS", "BFS", "depth-first search", "breadth-first search"),
            "whether intervening on treatment can affect outcome (a directed path exists)",
            check_pair,
            dp_valid,
            dp_enum,
        ),
        QueryKind(
            "mediator",
            ("treatment", "outcome"),
            _ACYCLIC,
            "node",
            (
                "directed path",
                "mediation",
                "mediator",
                "DFS",
                "BFS",
                "depth-first search",
                "breadth-first search",
            ),
            "a node on a directed path from treatment to outcome",
            check_pair,
            valid_mediator,
            enum_mediator,
        ),
        QueryKind(
            "cycle",
            (),
            ("DG",),
            "cycle",
            ("DFS", "depth-first search", "cycle detection", "topological sort", "Kahn", "back edge"),
            "a directed cycle, as a node sequence",
            check_cycle,
            valid_cycle,
            enum_cycle,
        ),
        QueryKind(
            "msep_set",
            ("x", "y"),
            ("ADMG", "DAG"),
            "set",
            ("m-separation", "latent projection", "canonical DAG", "d-separation"),
            "a set Z that m-separates x from y",
            check_sep,
            valid_sep,
            enum_sep,
            variants=("any", "minimal"),
            params=("variant",),
        ),
        QueryKind(
            "ate",
            ("treatment", "outcome"),
            ("DAG",),
            "ate",
            (
                "adjustment formula",
                "backdoor adjustment",
                "backdoor criterion",
                "back-door criterion",
                "g-formula",
                "truncated factorization",
                "truncated factorisation",
            ),
            "whether the average treatment effect of treatment on outcome exceeds the threshold",
            check_ate,
            valid_ate,
            enum_ate,
            params=("threshold", "margin", "tolerance"),
        ),
    )
}
