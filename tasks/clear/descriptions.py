"""CLEAR task-type names, caps and graph descriptions: :func:`parse_description`.

The record format and the wording of descriptions are in :mod:`faithgrpo.tasks.clear`.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

from faithgrpo.verifier.graphs.edges import parse_graph
from faithgrpo.verifier.graphs.model import NODE_RE, CausalGraph, GraphParseError, edges_are_acyclic

QUESTION_TYPES = ("FO", "FA", "HM", "YN", "EX", "MC")
STRUCTURE_TASKS = (  # judged by tasks/clear/verdicts.py
    "2_node_relation",
    "3_node_relation",
    "edge",
    "node",
    "path",
    "topological",
    "maximal_root_set",
    "markov_equivalent",
    "identification",
    "c-forest",
    "c-tree",
)
TASK_TYPES = (
    "backdoor_adjustment_set",
    "frontdoor_adjustment_set",
    "d-separation",
    "blocked_path",
    "backdoor_path",
    "directed_path",
    "cycle",
    "markov_blanket",
    "c-component",
    *STRUCTURE_TASKS,
)
VARIANTS = ("any", "minimal", "maximal", "shortest", "longest")

MAX_TEXT_CHARS = 16_384  # description, question and candidate caps (CLEAR's are < 2,000)
MAX_GRAPH_NODES = 64
MAX_SUBSET_POOL = 12  # brute force over at most 2^12 subsets
MAX_PATHS = 10_000
MAX_ITEMS = 4_096  # members of one FA answer

ADJUSTMENT_TASKS = ("backdoor_adjustment_set", "frontdoor_adjustment_set")
_SET_TASKS = (*ADJUSTMENT_TASKS, "d-separation", "blocked_path", "markov_blanket")
PATH_TASKS = ("backdoor_path", "directed_path", "cycle")
ACYCLIC_TYPES = ("DAG", "ADMG")
_ADMG_TYPES = ("admg", "c_component", "c_forest", "c_tree")


def normalize_task_type(name: Any) -> str:
    """``"d-separation"`` -> ``"d_separation"``, ``"Backdoor Adjustment Set"`` -> ``"backdoor_adjustment_set"``."""
    return re.sub(r"[^a-z0-9]+", "_", str(name).lower()[:200]).strip("_")


CANONICAL_TASK_TYPES = {normalize_task_type(t): t for t in TASK_TYPES}


# ---------------------------------------------------------------------------------------------
# descriptions
_KW_RE = re.compile(
    r"(?P<nodes>\bnodes?\b)|(?P<bi>\bbi-?directed\s+edges?\b)|(?P<dir>(?<![-\w])directed\s+edges?\b)"
    r"|(?P<none>\bno\s+edges\b)",
    re.IGNORECASE,
)
_EDGE_RE = re.compile(r"\s*([A-Za-z0-9_]{1,64})\s*(<->|->|<-)\s*([A-Za-z0-9_]{1,64})\s*")


def parse_description(description: str, graph_type: str | None = None) -> CausalGraph:
    """Parse a CLEAR description into a graph.

    Reads ``Given a DAG (directed acyclic graph) with nodes M, H, V and directed edges M->V, H->V.``,
    ``Given an ADMG (...) with nodes I, Y, H, directed edges I->H and bi-directed edges H<->Y.`` and
    ``Given a directed graph with nodes W, K and directed edges K->W, W->K.``. The kind is ADMG when
    bi-directed edges appear (or ``graph_type`` names an ADMG family), DAG when the directed edges
    are acyclic, DG otherwise.

    Raises:
        GraphParseError: no node list, a malformed edge, an edge with a node missing from the list,
            a self loop, or an ADMG with a directed cycle.

    Example:
        >>> parse_description("Given a DAG with nodes A, B and C and directed edges A->B, B->C.").edge_text()
        'A -> B; B -> C'
    """
    if not isinstance(description, str) or len(description) > MAX_TEXT_CHARS:
        raise GraphParseError(f"description must be a string of at most {MAX_TEXT_CHARS:,} characters")
    marks = list(itertools.islice(_KW_RE.finditer(description), 16))
    sections: dict[str, str] = {}
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(description)
        chunk = description[m.end() : end]
        chunk = re.split(r"\.(?:\s|$)", chunk, maxsplit=1)[0]  # a sentence ends the list
        chunk = re.sub(r"(?:,|\band\b|\s)+$", "", chunk.strip(" :"))
        sections.setdefault(m.lastgroup or "", chunk)
    if "nodes" not in sections:
        raise GraphParseError("description has no 'nodes' list")
    nodes = tuple(dict.fromkeys(t for t in re.split(r"[,\s]+|\band\b", sections["nodes"]) if t))
    if not nodes or len(nodes) > MAX_GRAPH_NODES or not all(NODE_RE.fullmatch(v) for v in nodes):
        raise GraphParseError(f"cannot read the node list {sections['nodes'][:80]!r}")
    directed: set[tuple[str, str]] = set()
    bidirected: set[tuple[str, str]] = set()
    texts = [sections[k] for k in ("dir", "bi") if sections.get(k)]
    items = [t for text in texts for t in re.split(r",|;|\band\b", text) if t.strip()]
    matches = [_EDGE_RE.fullmatch(t) for t in items]
    if all(matches):
        for m in matches:
            a, arrow, b = m.groups()
            if arrow == "<->":
                bidirected.add((a, b))
            else:
                directed.add((a, b) if arrow == "->" else (b, a))
    else:  # chains (A->B->C) and unicode arrows: the general edge parser
        g = parse_graph("; ".join(texts), nodes=nodes, max_nodes=MAX_GRAPH_NODES, validate=False)
        directed, bidirected = set(g.directed), set(g.bidirected)
    used = {v for e in directed | bidirected for v in e}
    if not used <= set(nodes):
        raise GraphParseError(f"edges use node(s) {sorted(used - set(nodes))} missing from the node list")
    if any(a == b for a, b in directed | bidirected):
        raise GraphParseError("self loop in the description")
    acyclic = edges_are_acyclic(nodes, directed)
    if bidirected or normalize_task_type(graph_type or "") in _ADMG_TYPES:
        if not acyclic:
            raise GraphParseError("an ADMG description with a directed cycle")
        kind = "ADMG"
    else:
        kind = "DAG" if acyclic else "DG"
    return CausalGraph(kind, nodes, frozenset(directed), frozenset(bidirected))
