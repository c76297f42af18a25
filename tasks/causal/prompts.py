"""Prompt text for causal problems: the six-slot trace contract and the problem statement.

Two audiences read these strings: a small policy (SmolLM2-135M) that must learn the trace format,
so the instructions are short and end in one worked example; and people reading logs, so the
problem statement is plain English plus the formal ``Query:`` line that the QUERY slot restates.

The worked examples are rendered by :func:`faithgrpo.tasks.certificates.gold.gold_trace` from fixed toy
problems, so they always follow the contract the checker enforces.
"""

from __future__ import annotations

import functools
import json
import random
from collections.abc import Mapping
from typing import Any

from faithgrpo.verifier.graphs.model import CausalGraph, node_sort_key
from faithgrpo.verifier.queries import format_query
from faithgrpo.verifier.query_kinds import QUERY_KINDS

__all__ = [
    "CLAIM_HINTS",
    "EXAMPLE_PROBLEMS",
    "answer_format",
    "answer_instructions",
    "chat_prompt",
    "cpt_text",
    "graph_description",
    "problem_text",
    "question_text",
    "trace_instructions",
    "user_message",
]

_GRAPH_TYPES = {
    "DAG": "a DAG (directed acyclic graph)",
    "ADMG": "an ADMG (acyclic directed mixed graph; A <-> B means A and B share an unmeasured common cause)",
    "DG": "a directed graph that may contain cycles",
}

# The strategies each kind's worked example and gold traces name (a subset of QUERY_KINDS' lists
# that matches the derivation actually written).
STRATEGY_HINTS = {
    "backdoor_set": "backdoor criterion",
    "frontdoor_set": "frontdoor criterion",
    "dsep_set": "d-separation",
    "msep_set": "m-separation",
    "ci_test": "d-separation (m-separation with <-> edges)",
    "directed_path": "directed path search (BFS)",
    "mediator": "directed path search",
    "cycle": "cycle detection (DFS)",
    "ate": "backdoor adjustment formula",
}


# What the DERIVATION must show, per kind, in the claim grammar of faithgrpo.verifier.certificates.derivation.
_PATH = "'path A -> B <- C is blocked given {B}' (or 'is open given {...}')"
CLAIM_HINTS = {
    "backdoor_set": (
        "Write each backdoor path from the treatment as 'backdoor path X <- U -> Y is blocked given "
        "{Z}' with Z your RESULT, and 'U is not a descendant of X' for each member (or 'descendants "
        "of X = {...}'); for a minimal set add, per member, a backdoor path that is open without it; "
        "for a maximal set write 'descendants of X = {...}' and, per other non-descendant V, a backdoor "
        "path that is open given your set plus V; if there is none, write 'no backdoor path from X to Y'."
    ),
    "frontdoor_set": (
        "Write each directed path 'directed path X -> M -> Y' (each must pass through your set); for each "
        "member M, each backdoor path from X to M 'is blocked given {}' and each backdoor path from M to "
        "Y 'is blocked given {X}' (or 'no backdoor path from X to M'). For a minimal set, per member M a "
        "directed path that meets your set only at M; for a maximal set, per other variable V a backdoor "
        "path from X to V open given {} or from V to Y open given {X}."
    ),
    "dsep_set": f"Write every path between the two variables as {_PATH}, given your RESULT set.",
    "msep_set": f"Write every path between the two variables (<-> edges too) as {_PATH}, given your RESULT set.",
    "ci_test": (
        f"For yes, every path between the two variables as {_PATH} given the query's set; for no, one "
        "path that 'is open given' it."
    ),
    "directed_path": (
        "For yes, 'directed path A -> B -> C'; for no, 'descendants of A = {...}' or 'no directed path from A to C'."
    ),
    "mediator": "Write 'directed path X -> M -> Y' through your answer M.",
    "cycle": "Write 'cycle A -> B -> C -> A'.",
    "ate": (
        "Certify the adjustment set Z as for a backdoor set, then per stratum of Z 'P(U=0) = 0.400', "
        "'P(Y=1 | X=1, U=0) = 0.600', 'P(Y=1 | X=0, U=0) = 0.200', and 'ψ = ... = 0.176'."
    ),
}


def _nodes_text(nodes: Any) -> str:
    if isinstance(nodes, str):
        return nodes
    nodes = sorted(nodes, key=node_sort_key)
    return nodes[0] if len(nodes) == 1 else "{" + ", ".join(nodes) + "}"


def graph_description(graph: CausalGraph) -> str:
    """The supplied-graph rendering: graph type, node list and the canonical edge list.

    Example:
        >>> from faithgrpo.verifier.graphs.edges import parse_graph
        >>> print(graph_description(parse_graph("U -> X; X -> Y")))
        Causal graph: a DAG (directed acyclic graph) with nodes U, X, Y.
        Edges: U -> X; X -> Y
    """
    nodes = ", ".join(sorted(graph.nodes, key=node_sort_key))
    return f"Causal graph: {_GRAPH_TYPES[graph.kind]} with nodes {nodes}.\nEdges: {graph.edge_text()}"


def question_text(query: Mapping) -> str:
    """One English sentence asking ``query`` (no arrow syntax, so stories stay edge-free)."""
    kind = query["kind"]
    variant = query.get("variant", "any")
    minimal = " minimal" if variant == "minimal" else ""
    if kind in ("backdoor_set", "frontdoor_set"):
        extra = {
            "minimal": " (no proper subset may work)",
            "maximal": " (no proper superset may work)",
        }.get(variant, "")
        size = {"minimal": " minimal", "maximal": " maximal"}.get(variant, "")
        criterion = "the backdoor criterion" if kind == "backdoor_set" else "the front-door criterion"
        return (
            f"Find a{size} set of variables that satisfies {criterion} for the effect of "
            f"{query['treatment']} on {query['outcome']}{extra}."
        )
    if kind in ("dsep_set", "msep_set"):
        sep = "d-separates" if kind == "dsep_set" else "m-separates"
        return f"Find a{minimal} set of variables that {sep} {_nodes_text(query['x'])} from {_nodes_text(query['y'])}."
    if kind == "ci_test":
        given = query.get("given") or []
        cond = f"given {_nodes_text(given)}" if given else "given nothing else (marginally)"
        return (
            f"Are {_nodes_text(query['x'])} and {_nodes_text(query['y'])} independent {cond}, "
            "that is, d-separated (m-separated when there are unmeasured common causes)?"
        )
    if kind == "directed_path":
        return (
            f"If we intervene on {query['treatment']}, can that change {query['outcome']}? "
            f"(Is there a directed path from {query['treatment']} to {query['outcome']}?)"
        )
    if kind == "mediator":
        return (
            f"Name one variable that mediates the effect of {query['treatment']} on {query['outcome']}, "
            "that is, lies on a directed path between them."
        )
    if kind == "cycle":
        return "Find a directed cycle (a feedback loop) in the graph."
    if kind == "ate":
        t, y = query["treatment"], query["outcome"]
        return (
            f"All variables are binary (0 or 1). Is the average causal effect of {t} on {y}, "
            f"ψ = P({y}=1 | do({t}=1)) − P({y}=1 | do({t}=0)), greater than {query['threshold']:g}?"
        )
    raise ValueError(f"unknown query kind {kind!r}; known kinds: {sorted(QUERY_KINDS)}")


def answer_format(kind: str) -> str:
    """How the final answer of ``kind`` is written."""
    answer_type = QUERY_KINDS[kind].answer_type
    return {
        "set": "a set of variables in braces, e.g. {A, B}, with nothing after it; write {} for the empty set",
        "yes_no": "yes or no",
        "node": "one variable name",
        "cycle": "the cycle's variables in order, e.g. [A, B, C] when A causes B, B causes C and C causes A",
        "ate": "yes or no (you may add ψ = your estimate)",
    }[answer_type]


def cpt_text(cpts: Mapping, nodes: Any = None) -> str:
    """The CPTs as ``P(V=1 | ...)`` lines, one line per variable (no arrow syntax).

    Args:
        cpts: the CPT dict (format in :mod:`faithgrpo.verifier.graphs.criteria`).
        nodes: the order of the lines (default: natural order of the names).
    """
    order = list(nodes) if nodes is not None else sorted(cpts, key=node_sort_key)
    lines = []
    for v in order:
        spec = cpts[v]
        parents = list(spec.get("parents") or [])
        p1 = spec["p1"]
        if not parents:
            p = p1 if isinstance(p1, (int, float)) else p1[""]
            lines.append(f"P({v}=1) = {p:.2f}")
            continue
        parts = []
        for key in sorted(p1):
            cond = ", ".join(f"{u}={b}" for u, b in zip(parents, key.split(",")))
            parts.append(f"P({v}=1 | {cond}) = {p1[key]:.2f}")
        lines.append("; ".join(parts))
    return "\n".join(lines)


def problem_text(
    graph: CausalGraph, query: Mapping, *, cpts: Mapping | None = None, story: str | None = None
) -> str:
    """The user-facing problem: the graph (edge list, or a story), CPTs for ``ate``, the question, the
    formal ``Query:`` line and the answer format.

    With ``story`` given (constructed-graph mode) no edge appears in arrow syntax.
    """
    parts = [f"Story: {story}" if story is not None else graph_description(graph)]
    if cpts is not None:
        parts.append("Conditional probabilities:\n" + cpt_text(cpts, sorted(graph.nodes, key=node_sort_key)))
    parts.append(f"Question: {question_text(query)}")
    parts.append(f"Query: {format_query(query)}")
    parts.append(f"Answer format: {answer_format(query['kind'])}.")
    return "\n".join(parts)


def user_message(problem: Mapping | str) -> str:
    """The user message for a problem: its stored ``text``, else the supplied-graph rendering.

    Raises:
        ValueError: a malformed problem (see :func:`faithgrpo.verifier.queries.load_problem`).
    """
    from faithgrpo.verifier.queries import load_problem

    if isinstance(problem, str):
        problem = json.loads(problem)
    text = problem.get("text")
    if isinstance(text, str) and text.strip():
        return text
    graph, query, cpts = load_problem(problem)
    return problem_text(graph, query, cpts=cpts)


# ---------------------------------------------------------------------------------------------
# trace contract
def _cpt(parents: list[str], table: dict[str, float]) -> dict:
    return {"parents": parents, "p1": table}


#: Toy problems behind the worked examples, one per query kind (small on purpose: small models read them).
EXAMPLE_PROBLEMS: dict[str, dict] = {
    "backdoor_set": {
        "graph": {"type": "DAG", "nodes": ["M", "U", "X", "Y"], "directed": [["U", "X"], ["U", "Y"], ["X", "M"], ["M", "Y"]]},
        "query": {"kind": "backdoor_set", "treatment": "X", "outcome": "Y"},
    },
    "frontdoor_set": {
        "graph": {"type": "ADMG", "nodes": ["M", "X", "Y"], "directed": [["X", "M"], ["M", "Y"]], "bidirected": [["X", "Y"]]},
        "query": {"kind": "frontdoor_set", "treatment": "X", "outcome": "Y"},
    },
    "dsep_set": {
        "graph": {"type": "DAG", "nodes": ["A", "B", "C", "D"], "directed": [["A", "B"], ["B", "C"], ["A", "D"], ["D", "C"]]},
        "query": {"kind": "dsep_set", "x": "A", "y": "C"},
    },
    "msep_set": {
        "graph": {"type": "ADMG", "nodes": ["A", "B", "C", "D"], "directed": [["A", "B"], ["B", "C"]], "bidirected": [["B", "D"]]},
        "query": {"kind": "msep_set", "x": "A", "y": "C"},
    },
    "ci_test": {
        "graph": {"type": "DAG", "nodes": ["A", "B", "C"], "directed": [["A", "B"], ["C", "B"]]},
        "query": {"kind": "ci_test", "x": "A", "y": "C", "given": ["B"]},
    },
    "directed_path": {
        "graph": {"type": "DAG", "nodes": ["A", "B", "C", "D"], "directed": [["A", "B"], ["B", "C"], ["D", "C"]]},
        "query": {"kind": "directed_path", "treatment": "A", "outcome": "C"},
    },
    "mediator": {
        "graph": {"type": "DAG", "nodes": ["M", "X", "Y"], "directed": [["X", "M"], ["M", "Y"], ["X", "Y"]]},
        "query": {"kind": "mediator", "treatment": "X", "outcome": "Y"},
    },
    "cycle": {
        "graph": {"type": "DG", "nodes": ["A", "B", "C", "D"], "directed": [["A", "B"], ["B", "C"], ["C", "A"], ["C", "D"]]},
        "query": {"kind": "cycle"},
    },
    "ate": {
        "graph": {"type": "DAG", "nodes": ["U", "X", "Y"], "directed": [["U", "X"], ["U", "Y"], ["X", "Y"]]},
        "query": {"kind": "ate", "treatment": "X", "outcome": "Y", "threshold": 0.1, "margin": 0.05},
        "cpts": {
            "U": _cpt([], {"": 0.4}),
            "X": _cpt(["U"], {"0": 0.3, "1": 0.8}),
            "Y": _cpt(["X", "U"], {"0,0": 0.2, "0,1": 0.5, "1,0": 0.6, "1,1": 0.7}),
        },
    },
}  # fmt: skip


@functools.cache
def _example(kind: str) -> str:
    from faithgrpo.tasks.certificates.gold import gold_trace

    problem = dict(EXAMPLE_PROBLEMS[kind], mode="supplied")
    problem["text"] = problem_text(
        CausalGraph.from_dict(problem["graph"]), problem["query"], cpts=problem.get("cpts")
    )
    return gold_trace(problem, random.Random(0), plain=True)


def _result_hint(kind: str | None) -> str:
    hint = (
        "the answer, written as the answer format says. Commit to one answer: RESULT and <answer> "
        "that offer alternatives ('A or B', 'A / B', 'either ...', 'yes or no') are wrong."
    )
    if kind in (None, "ate"):
        hint += " For an ATE question also name the one set you adjust for, e.g. 'yes, ψ = 0.35, Z = {U}'."
    return hint


def trace_instructions(kind: str | None = None) -> str:
    """The six-slot trace contract, short, with one worked example (of ``kind``, default backdoor_set).

    Raises:
        ValueError: an unknown ``kind``.

    Example:
        >>> print(trace_instructions("mediator").splitlines()[0])
        Think inside <think> ... </think> in five labelled parts, then give only the final answer inside <answer> ... </answer>.
    """
    if kind is not None and kind not in QUERY_KINDS:
        raise ValueError(f"unknown query kind {kind!r}; known kinds: {sorted(QUERY_KINDS)}")
    example_kind = kind or "backdoor_set"
    strategy = STRATEGY_HINTS[kind] if kind else "backdoor criterion, d-separation or cycle detection (DFS)"
    example = EXAMPLE_PROBLEMS[example_kind]
    return (
        "Think inside <think> ... </think> in five labelled parts, then give only the final answer "
        "inside <answer> ... </answer>.\n"
        "GRAPH: every edge of the causal graph, separated by '; ', as A -> B (A directly causes B) or "
        "A <-> B (unmeasured common cause), and any variable with no edges on its own (A -> B; C). "
        "Copy the given edges, or read them off the story.\n"
        "QUERY: the question exactly as in the Query line, e.g. "
        f"{format_query(example['query'])}\n"
        f"STRATEGY: the method you use, e.g. {strategy}.\n"
        "DERIVATION: lines starting with '- ', each a checkable claim (other lines are ignored); "
        "every claim must be true, and together they must prove RESULT. "
        f"{CLAIM_HINTS[example_kind] if kind else CLAIM_HINTS['backdoor_set']}\n"
        f"RESULT: {_result_hint(kind)}\n"
        "Example:\n" + _example(example_kind)
    )


def answer_instructions() -> str:
    """The format instruction for reasoning-gym tasks without a trace contract."""
    return (
        "Think step by step inside <think> ... </think>, one step per line, then give only the final "
        "answer inside <answer> ... </answer>."
    )


def chat_prompt(problem: Mapping | str, system_prompt: str | None = None) -> list[dict[str, str]]:
    """Chat messages for a causal problem: the trace contract as system message, the problem as user message."""
    if isinstance(problem, str):
        problem = json.loads(problem)
    system = system_prompt if system_prompt is not None else trace_instructions(problem["query"]["kind"])
    return [{"role": "system", "content": system}, {"role": "user", "content": user_message(problem)}]
