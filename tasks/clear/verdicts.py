"""The judge of the eleven structure task types: :func:`judge_structure`, :func:`structure_expected`.

Candidates are read by bounded parsers (sets, names, triples, edges, paths, orders, DAG
descriptions) and decided by the graph predicates of :mod:`faithgrpo.tasks.clear.structure` and
:mod:`faithgrpo.tasks.clear.identification`; labels and wording cues (capitalisation, the
``graph_type`` field) are never read. The semantics are in docs/clear.md ("The eleven structure
types").
"""

from __future__ import annotations

import re
from typing import Any

from faithgrpo.tasks.clear.descriptions import MAX_ITEMS, MAX_PATHS, MAX_TEXT_CHARS, parse_description
from faithgrpo.tasks.clear.forms import EdgeKey, option_reader, parse_edge, parse_names
from faithgrpo.tasks.clear.identification import non_identifiable_pair
from faithgrpo.tasks.clear.structure import (
    graph_paths,
    is_c_forest,
    is_c_tree,
    is_dag,
    is_graph_path,
    is_topological_order,
    markov_equivalent,
    relatives,
    sinks,
    triple_kind,
    triples,
)
from faithgrpo.tasks.clear.values import (
    ClearQuestion,
    as_items,
    parse_count,
    parse_letter,
    parse_one_path,
    parse_path_list,
    parse_set,
    single,
)
from faithgrpo.verifier.answers import parse_node, parse_yes_no
from faithgrpo.verifier.graphs.edges import Path
from faithgrpo.verifier.graphs.model import CausalGraph, GraphParseError, node_sort_key

__all__ = [
    "judge_structure",
    "structure_expected",
    "structure_holds",
    "structure_truth",
    "structure_universe",
]

_FLIP = {"->": "<-", "<-": "->", "<->": "<->"}


# ---------------------------------------------------------------------------------------------
# truth
def _supported(q: ClearQuestion) -> bool:
    if q.task_type == "markov_equivalent":
        return is_dag(q.graph)
    if q.task_type == "identification":
        return q.graph.is_acyclic()
    return True


def _paths(q: ClearQuestion) -> tuple | None:
    return graph_paths(q.graph, q.x, q.y, MAX_PATHS)


def structure_universe(q: ClearQuestion) -> tuple | None:
    """Every member of an FA/HM answer (nodes, triples, edge keys, path keys); None: over the cap."""
    g, t = q.graph, q.task_type
    if t == "2_node_relation":
        return tuple(sorted(relatives(g, q.relation, q.node), key=node_sort_key))
    if t == "3_node_relation":
        return tuple(triples(g, q.relation))
    if t == "edge":
        return q.edges
    if t == "node":
        return tuple(g.nodes)
    if t == "path":
        return _paths(q)
    if t == "maximal_root_set":
        return tuple(sorted(sinks(g), key=node_sort_key))
    return None


def _orient(q: ClearQuestion, p: Path, *, claim: bool) -> Path | None:
    if len(p.nodes) >= 2 and p.nodes[0] == q.y and p.nodes[-1] == q.x:
        return None if claim else p.reversed()  # written from the end back to the start
    return p


def _path_holds(q: ClearQuestion, p: Path, *, claim: bool) -> bool | None:
    p = _orient(q, p, claim=claim)
    if p is None:
        return None
    if p.nodes[0] != q.x or p.nodes[-1] != q.y or not is_graph_path(q.graph, p.nodes, p.marks):
        return False
    if q.variant not in ("shortest", "longest"):
        return True
    paths = _paths(q)
    if paths is None:
        return None
    lengths = [len(marks) for _, marks in paths]
    return len(p.marks) == (min(lengths) if q.variant == "shortest" else max(lengths))


def _read_dag(text: Any, given: CausalGraph) -> CausalGraph | None:
    """A candidate DAG: ``DAG with nodes ... and directed edges ...`` or an edge list on the given nodes."""
    if not isinstance(text, str) or len(text) > MAX_TEXT_CHARS:
        return None
    s = text.strip()
    if not re.search(r"\bnodes?\b", s, re.IGNORECASE):
        s = f"nodes {', '.join(given.nodes)} and directed edges {s.rstrip('.')}"
    try:
        return parse_description(s)
    except GraphParseError:
        return None


def structure_holds(q: ClearQuestion, value: Any, *, claim: bool) -> bool | None:
    """Whether ``value`` (a claim or an option, read by the task's reader) is a right answer."""
    g, t = q.graph, q.task_type
    if value is None:
        return None if claim else False
    if t in ("2_node_relation", "node"):
        if not isinstance(value, str):
            return False
        if t == "node":
            return (value in g.node_set) != q.negated
        return value in relatives(g, q.relation, q.node)
    if t == "3_node_relation":
        return triple_kind(g, value) == q.relation
    if t == "edge":
        return (value in q.edges) != q.negated
    if t == "path":
        return _path_holds(q, value, claim=claim) if isinstance(value, Path) else False
    if t == "topological":
        return is_topological_order(g, value)
    if t == "maximal_root_set":
        return value == sinks(g)
    if t == "markov_equivalent":
        if not isinstance(value, CausalGraph) or not is_dag(value):
            return None if claim else False
        same_class = markov_equivalent(g, value)
        return same_class if claim else same_class and value != g  # FO: *another* graph
    return None


def structure_truth(q: ClearQuestion) -> bool | None:
    """The right yes/no of a YN or EX question."""
    g, t = q.graph, q.task_type
    if q.claim is not None:
        return structure_holds(q, q.claim, claim=True)
    if t == "2_node_relation":
        return bool(relatives(g, q.relation, q.node))
    if t == "3_node_relation":
        return bool(triples(g, q.relation))
    if t == "path":
        paths = graph_paths(g, q.x, q.y, 0)
        return paths is None or bool(paths)  # over a limit of 0: some path exists
    if t == "identification":
        return non_identifiable_pair(g, q.x, q.y) is None
    if t == "c-forest":
        return is_c_forest(g)
    if t == "c-tree":
        return is_c_tree(g)
    return None


# ---------------------------------------------------------------------------------------------
# find-all candidates
_GROUP_RE = re.compile(r"[({\[][^(){}\[\]]{0,400}[)}\]]")


def _triple_list(text: Any, limit: int) -> list[frozenset[str]] | None:
    items = as_items(text)
    if isinstance(items, list):
        groups = items
    elif items is None:
        return None
    else:
        s = items.strip().rstrip(".").strip()
        if re.fullmatch(r"(?:\[\s*\]|none|no\s+\S+|set\(\))", s, re.IGNORECASE):
            return []
        if s.startswith("[") and s.endswith("]"):
            s = s[1:-1]
        groups = _GROUP_RE.findall(s)
        if not groups or _GROUP_RE.sub("", s).strip(" ,;\n") or len(groups) > limit:
            return None
    out = []
    for grp in groups[: limit + 1]:
        names = parse_names(grp, 8)
        if names is None or len(names) != 3 or len(set(names)) != 3:
            return None
        out.append(frozenset(names))
    return out


def _token_list(text: Any, read, limit: int) -> list | None:
    """Members of a comma-separated list (or an actual list), each read by ``read``."""
    items = as_items(text)
    if items is None:
        return None
    if isinstance(items, str):
        s = items.strip().rstrip(".").strip()
        if len(s) >= 2 and s[0] + s[-1] in ("[]", "{}", "()"):
            s = s[1:-1]
        if not s.strip() or s.strip().lower() in ("set()", "none"):
            return []
        items = [re.sub(r"^and\s+", "", t.strip()) for t in re.split(r"\s*[,;]\s*|\s+and\s+", s) if t.strip()]
    if len(items) > limit:
        return None
    values = [read(t) for t in items]
    return None if any(v is None for v in values) else values


def _judge_all(q: ClearQuestion, candidate: Any) -> bool | None:
    universe = structure_universe(q)
    if universe is None:
        return None
    limit = min(len(universe) + 1, MAX_ITEMS)
    t = q.task_type
    if isinstance(candidate, str) and len(candidate) > (limit + 1) * 80 * max(len(q.graph.nodes), 4):
        return False
    if t in ("2_node_relation", "maximal_root_set"):
        value = parse_set(single(candidate)) if isinstance(single(candidate), str) else None
        if value is None:
            value = _token_list(candidate, parse_node, limit)
            if value is None or len(set(value)) != len(value):
                return False
            value = frozenset(value)
        return value == frozenset(universe)
    if t == "3_node_relation":
        found = _triple_list(candidate, limit)
    elif t == "edge":
        found = _token_list(candidate, parse_edge, limit)
    elif t == "node":
        found = _token_list(candidate, parse_node, limit)
    else:  # path
        keys = parse_path_list(candidate, limit, 72 * len(q.graph.nodes))
        found = None
        if keys is not None:
            found = []
            for nodes, marks in keys:
                if nodes[0] == q.y and nodes[-1] == q.x:
                    nodes, marks = nodes[::-1], tuple(_FLIP[m] for m in reversed(marks))
                found.append((nodes, marks))
    if found is None:
        return False
    return len(set(found)) == len(found) and set(found) == set(universe)


# ---------------------------------------------------------------------------------------------
# the judge
def _find_one(q: ClearQuestion, candidate: Any) -> bool | None:
    t, text = q.task_type, single(candidate)
    if t == "path":
        return structure_holds(q, parse_one_path(text), claim=False)
    if t == "topological":
        return structure_holds(q, parse_names(text), claim=False)
    if t == "markov_equivalent":
        return structure_holds(q, _read_dag(text, q.graph), claim=False)
    if t == "maximal_root_set":
        return _judge_all(q, candidate)
    return None


def judge_structure(q: ClearQuestion, candidate: Any) -> bool | None:
    """Whether ``candidate`` answers a structure-type question (None: the judge cannot decide)."""
    if not _supported(q):
        return None
    qt = q.question_type
    if qt == "MC":
        text = single(candidate)
        if not isinstance(text, str) or len(text) > 1024:
            return False
        parsed = parse_letter(text)
        options = dict(q.options)
        if parsed is None or parsed[0] not in options:
            return False
        letter, rest = parsed
        if options[letter] is None:
            return None
        if rest:
            restated = option_reader(q.task_type)(rest)
            if restated is not None and restated != options[letter]:
                return False
        return structure_holds(q, options[letter], claim=True)
    if qt in ("YN", "EX"):
        truth = structure_truth(q)
        if truth is None:
            return None
        said = parse_yes_no(single(candidate))
        return said is not None and said == truth
    if qt == "HM":
        universe = structure_universe(q)
        if universe is None:
            return None
        n = parse_count(single(candidate))
        return n is not None and n == len(universe)
    if qt == "FA":
        return _judge_all(q, candidate)
    return _find_one(q, candidate)


# ---------------------------------------------------------------------------------------------
# the judge's own answer (for reports)
def _fmt_set(vs) -> str:
    return "{" + ", ".join(f"'{v}'" for v in sorted(vs, key=node_sort_key)) + "}" if vs else "set()"


def _fmt_path(key) -> str:
    nodes, marks = key
    return nodes[0] + "".join(m + v for m, v in zip(marks, nodes[1:]))


def _fmt_edge(key: EdgeKey) -> str:
    return "".join(key)


def structure_expected(q: ClearQuestion) -> str | None:
    """The judge's own answer to ``q`` in words, with the evidence where a label is in doubt."""
    if not _supported(q):
        return None
    g, t, qt = q.graph, q.task_type, q.question_type
    if qt == "MC":
        right = [a for a, v in q.options if structure_holds(q, v, claim=True)]
        return "option(s) " + (", ".join(right) or "none")
    if qt in ("YN", "EX"):
        truth = structure_truth(q)
        if truth is None:
            return None
        words = "Yes." if truth else "No."
        if t in ("c-forest", "c-tree"):
            many = sorted((v for v in g.nodes if len(g.children(v)) > 1), key=node_sort_key)
            words += (
                f" ({len(g.districts())} district(s); nodes with 2+ children: {', '.join(many) or 'none'};"
                f" roots {_fmt_set(sinks(g))})"
            )
        elif t == "identification" and not truth:
            t_set, s_set = non_identifiable_pair(g, q.x, q.y)
            words += f" (hedge: Q[{_fmt_set(s_set)}] is not identifiable within {_fmt_set(t_set)})"
        return words
    universe = structure_universe(q)
    if qt == "HM":
        return None if universe is None else str(len(universe))
    if t == "topological" or (t == "path" and qt == "FO"):
        return "any valid answer"
    if t == "markov_equivalent":
        return "any other DAG with the same skeleton and v-structures"
    if universe is None:
        return None
    if t in ("2_node_relation", "maximal_root_set"):
        return _fmt_set(universe)
    if t == "3_node_relation":
        return "[" + ", ".join(str(tuple(sorted(s, key=node_sort_key))) for s in universe) + "]"
    if t == "edge":
        return ", ".join(_fmt_edge(k) for k in universe)
    if t == "node":
        return ", ".join(universe)
    return ", ".join(_fmt_path(k) for k in universe)
