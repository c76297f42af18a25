"""Question templates of the eleven structure task types and their reading: :func:`read_form_question`.

The types are :data:`~faithgrpo.tasks.clear.descriptions.STRUCTURE_TASKS` (kinship, triples,
edges, nodes, paths, topological orders, root sets, Markov equivalence, identification, C-forests
and C-trees); the wording of each template is in docs/clear.md ("The eleven structure types").
Undirected graphs (``Given a undirected graph with nodes S, L and undirected edges S-L.``) are
read here too; only the ``edge`` and ``node`` tasks take them. Every reader is bounded by the
caps of :mod:`~faithgrpo.tasks.clear.descriptions` and nothing is evaluated.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from faithgrpo.tasks.clear.descriptions import MAX_GRAPH_NODES, MAX_TEXT_CHARS, parse_description
from faithgrpo.tasks.clear.values import (
    END,
    NAME,
    SET_GROUP,
    ClearQuestion,
    match_template,
    node_group,
    parse_one_path,
    parse_set,
    path_group,
)
from faithgrpo.verifier.answers import parse_node, parse_node_set
from faithgrpo.verifier.graphs.edges import parse_path
from faithgrpo.verifier.graphs.model import NODE_RE, CausalGraph, GraphParseError, node_sort_key

EdgeKey = tuple[str, str, str]  # (a, mark, b): "->" tail first; "<->" and "-" with a < b
_EDGE_MARKS = r"(?:<->|->|<-|--|-|→|←|↔)"
_MARK = {"->": "->", "→": "->", "<-": "<-", "←": "<-", "<->": "<->", "↔": "<->", "-": "-", "--": "-"}
_EDGE_RE = re.compile(rf"\s*({NAME})\s*({_EDGE_MARKS})\s*({NAME})\s*")


def edge_key(a: str, mark: str, b: str) -> EdgeKey:
    """The key of one edge: ``B<-A`` is ``("A", "->", "B")``; ``<->`` and ``-`` edges sort their ends."""
    mark = _MARK[mark]
    if mark == "<-":
        return (b, "->", a)
    if mark in ("<->", "-") and node_sort_key(b) < node_sort_key(a):
        return (b, mark, a)
    return (a, mark, b)


def parse_edge(text: Any) -> EdgeKey | None:
    """One candidate edge (``A->B``, ``B<-A``, ``A<->B``, ``A-B``, quotes and a period ignored).

    Example:
        >>> parse_edge("B<-A"), parse_edge("'B<->A'."), parse_edge("A-A")
        (('A', '->', 'B'), ('A', '<->', 'B'), None)
    """
    if not isinstance(text, str) or len(text) > 300:
        return None
    m = _EDGE_RE.fullmatch(text.strip().rstrip(".").strip().strip("'\"`"))
    if not m or m.group(1) == m.group(3):
        return None
    return edge_key(m.group(1), m.group(2), m.group(3))


def graph_edges(g: CausalGraph) -> tuple[EdgeKey, ...]:
    """The edge keys of a directed or mixed graph (a pair joined by ``->`` and ``<->`` gives two)."""
    keys = {(a, "->", b) for a, b in g.directed} | {edge_key(a, "<->", b) for a, b in g.bidirected}
    return tuple(sorted(keys, key=lambda k: (node_sort_key(k[0]), k[1], node_sort_key(k[2]))))


_UG_HEAD_RE = re.compile(r"\s*(?:given\s+)?an?\s+undirected\s+graph\s+with\s+nodes?\s+", re.IGNORECASE)
_UG_EDGES_RE = re.compile(r",?\s+and\s+(?:(undirected\s+edges\s+)|no\s+edges\b)", re.IGNORECASE)


def parse_undirected(description: str) -> tuple[CausalGraph, tuple[EdgeKey, ...]]:
    """An undirected-graph description as ``(graph of kind "UG" with the nodes only, edge keys)``.

    Raises:
        GraphParseError: not an undirected-graph description, an unreadable node list or edge, an
            edge naming a node outside the list, or a self loop.
    """
    if not isinstance(description, str) or len(description) > MAX_TEXT_CHARS:
        raise GraphParseError(f"description must be a string of at most {MAX_TEXT_CHARS:,} characters")
    head = _UG_HEAD_RE.match(description)
    if not head:
        raise GraphParseError("not an undirected-graph description")
    rest = description[head.end() :].strip().removesuffix(".")
    cut = _UG_EDGES_RE.search(rest)
    node_text, edge_text = (
        (rest[: cut.start()], rest[cut.end() :] if cut.group(1) else "") if cut else (rest, "")
    )
    if "." in node_text or "." in edge_text:
        raise GraphParseError("an undirected-graph description is one sentence")
    nodes = tuple(dict.fromkeys(t for t in re.split(r"[,\s]+|\band\b", node_text) if t))
    if not nodes or len(nodes) > MAX_GRAPH_NODES or not all(NODE_RE.fullmatch(v) for v in nodes):
        raise GraphParseError(f"cannot read the node list {node_text[:80]!r}")
    keys: list[EdgeKey] = []
    for item in re.split(r",|;|\band\b", edge_text):
        if not item.strip():
            continue
        e = _EDGE_RE.fullmatch(item)
        if not e or _MARK[e.group(2)] != "-":
            raise GraphParseError(f"cannot read the undirected edge {item.strip()[:40]!r}")
        a, b = e.group(1), e.group(3)
        if a == b or a not in nodes or b not in nodes:
            raise GraphParseError(f"edge {a}-{b} is a self loop or names a node outside the list")
        keys.append(edge_key(a, "-", b))
    return CausalGraph("UG", nodes), tuple(dict.fromkeys(keys))


def parse_names(text: Any, limit: int = MAX_GRAPH_NODES) -> tuple[str, ...] | None:
    """Names in order from ``('P', 'O', 'C')``, ``{C, O, R}``, ``K, A, H, C`` or ``[K, A]``; else None."""
    if not isinstance(text, str) or len(text) > 72 * limit:
        return None
    s = text.strip().rstrip(".").strip()
    if len(s) >= 2 and s[0] + s[-1] in ("()", "{}", "[]"):
        s = s[1:-1]
    if any(ch in s for ch in "()[]{}"):
        return None
    names = [t.strip().strip("'\"`") for t in re.split(r",|\s+(?:and\s+)?|;", s) if t.strip()]
    names = [t for t in names if t and t.lower() != "and"]
    if not names or len(names) > limit or not all(NODE_RE.fullmatch(t) for t in names):
        return None
    return tuple(names)


# ---------------------------------------------------------------------------------------------
# templates
_X, _Y, _V = node_group("x"), node_group("y"), node_group("node")
_CAND = node_group("cand")
_FROM = rf"from\s{_X}\sto\s{_Y}"
_REL = r"(?P<rel>parents?|child(?:ren)?|ancestors?|descendants?)"
_KIND = r"(?P<rel>chains?|forks?|v-?\s?structures?)"
_OF_GRAPH = r"(?:of|in)\s(?:this|the)\s(?:given\s)?graph"
_HAS = rf"(?:does\s(?:this|the)\sgraph\shave|are\sthere\s{_OF_GRAPH}|are\sthere)"
_MEC = r"markov\sequivalen(?:t|ce)\sclass"
_FORM_QTYPES = {
    "find": ("FO",),
    "all": ("FA",),
    "root": ("FA", "FO"),
    "count": ("HM",),
    "claim": ("YN",),
    "choice": ("MC",),
    "exists": ("EX", "YN"),
    "whole": ("YN", "EX"),
}
_TEMPLATE_TEXT: dict[str, list[tuple[str, str]]] = {
    "2_node_relation": [
        ("all", rf"(?:list|find)\sall\s(?:the\s)?{_REL}\sof\s{_V}{END}"),
        ("count", rf"how\smany\s{_REL}\sdoes\s{_V}\shave{END}"),
        ("claim", rf"is\s{_CAND}\s(?:one\sof\s(?:the\s)?|an?\s|the\s)?{_REL}\sof\s{_V}{END}"),
        ("choice", rf"which\sof\sthe\sfollowing\sis\s(?:one\sof\s(?:the\s)?|an?\s|the\s)?{_REL}\sof\s{_V}{END}"),
        ("exists", rf"does\s{_V}\shave\sany\s{_REL}{END}"),
    ],
    "3_node_relation": [
        ("all", rf"(?:list|find)\sall\s(?:the\s)?{_KIND}\s{_OF_GRAPH}{END}"),
        ("count", rf"how\smany\s{_KIND}\s{_HAS}{END}"),
        ("claim", rf"(?:does|do)\s(?:the\s)?nodes\s(?P<triple>[{{(\[][^{{}}()\[\]]{{0,400}}[}})\]])\sform\san?\s{_KIND}\s{_OF_GRAPH}{END}"),
        ("choice", rf"which\sof\sthe\sfollowing\sis\san?\s{_KIND}\s{_OF_GRAPH}{END}"),
        ("exists", rf"(?:are\sthere\sany|is\sthere\san?)\s{_KIND}\s{_OF_GRAPH}{END}"),
    ],
    "edge": [
        ("all", rf"(?:list|find)\sall\s(?:the\s)?edges\s{_OF_GRAPH}{END}"),
        ("count", rf"how\smany\sedges\s{_HAS}{END}"),
        ("claim", rf"is\s(?P<edge>{NAME}\s?{_EDGE_MARKS}\s?{NAME})\san\sedge\s{_OF_GRAPH}{END}"),
        ("choice", rf"which\sof\sthe\sfollowing\sis\s(?P<neg>not\s)?an\sedge\s{_OF_GRAPH}{END}"),
    ],
    "node": [
        ("all", rf"(?:list|find)\sall\s(?:the\s)?nodes\s{_OF_GRAPH}{END}"),
        ("count", rf"how\smany\snodes\s{_HAS}{END}"),
        ("claim", rf"is\s{_CAND}\sa\snode\s{_OF_GRAPH}{END}"),
        ("choice", rf"which\sof\sthe\sfollowing\sis\s(?P<neg>not\s)?a\snode\s{_OF_GRAPH}{END}"),
    ],
    "path": [
        ("find", rf"find\s(?:one|a)\spath\s{_FROM}{END}"),
        ("find", rf"find\s(?:the|a|one)\s(?P<v1>shortest|longest)\spaths?\s{_FROM}{END}"),
        ("all", rf"find\sall\s(?:the\s)?paths\s{_FROM}{END}"),
        ("count", rf"how\smany\spaths\s(?:are\sthere\s|exist\s)?{_FROM}{END}"),
        ("claim", rf"is\s{path_group('cpath')}\sa\spath\s{_FROM}{END}"),
        ("choice", rf"which\sof\sthe\sfollowing\sis\sa\spath\s{_FROM}{END}"),
        ("exists", rf"is\sthere\sa\spath\s{_FROM}{END}"),
    ],
    "topological": [
        ("find", rf"find\s(?:one|a)\s(?:valid\s)?topological\s(?:ordering|order|sort)\sof\s(?:this|the)\sgraph{END}"),
        ("claim", rf"is\s(?P<order>{NAME}(?:\s?,\s?{NAME}){{0,63}})\sa\svalid\stopological\s(?:ordering|order)\sof\s(?:this|the)\sgraph{END}"),
        ("choice", rf"which\sof\sthe\sfollowing\sis\sa\svalid\stopological\s(?:ordering|order)\sof\s(?:this|the)\sgraph{END}"),
    ],
    "maximal_root_set": [
        ("root", rf"(?:find|what\sis)\sthe\smaximal\sroot\sset\sof\s(?:this|the)\sgraph{END}"),
        ("count", rf"how\smany\snodes\sare\s(?:there\s)?in\sthe\smaximal\sroot\sset\sof\s(?:this|the)\sgraph{END}"),
        ("claim", rf"is\s{SET_GROUP}\sthe\smaximal\sroot\sset\sof\s(?:this|the)\sgraph{END}"),
        ("choice", rf"which\sof\sthe\sfollowing\s(?:options\s|sets\s)?is\sthe\smaximal\sroot\sset\sof\s(?:this|the)\sgraph{END}"),
    ],
    "markov_equivalent": [
        ("find", rf"find\sanother\s(?:graph|dag)\sthat\sbelongs\sto\sthe\ssame\s{_MEC}\s(?:of|as)\sthe\sgiven\sgraph{END}"),
        ("claim", rf"given\sanother\sdag\s(?P<other>with\snodes\s[^?]{{1,8000}}?),?\sdo\sthese\stwo\sgraphs\sbelong\sto\sthe\ssame\s{_MEC}{END}"),
    ],
    "identification": [
        ("whole", rf"can\sthe\s(?:causal\s)?effect\sof\s(?:the\s)?(?:treatment\s)?{_X}\son\s(?:the\s)?(?:outcome\s)?{_Y}\sbe\sidentified(?:\sor\snot)?{END}"),
        ("whole", rf"is\sthe\s(?:causal\s)?effect\sof\s(?:the\s)?(?:treatment\s)?{_X}\son\s(?:the\s)?(?:outcome\s)?{_Y}\sidentifiable{END}"),
    ],
    "c-forest": [("whole", rf"is\s(?:it|this\sgraph|the\s(?:given\s)?graph)\sa\sc-?forest{END}")],
    "c-tree": [("whole", rf"is\s(?:it|this\sgraph|the\s(?:given\s)?graph)\sa\sc-?tree{END}")],
}  # fmt: skip
_TEMPLATES = {
    task: [(form, re.compile(text, re.IGNORECASE)) for form, text in items]
    for task, items in _TEMPLATE_TEXT.items()
}
_RELATIONS = {"parent": "parents", "child": "children", "ancestor": "ancestors", "descendant": "descendants"}


def _relation(word: str) -> str:
    w = re.sub(r"\s", "", word.lower())
    if w.startswith("v"):
        return "v-structure"
    for stem, name in _RELATIONS.items():
        if w.startswith(stem):
            return name
    return w.rstrip("s")  # chains -> chain, forks -> fork


def option_reader(task: str):
    """The reader of one option's text for ``task`` (None: unreadable)."""
    return {
        "2_node_relation": parse_node,
        "node": parse_node,
        "3_node_relation": lambda t: parse_names(t, 8),
        "edge": parse_edge,
        "path": parse_one_path,
        "topological": parse_names,
        "maximal_root_set": parse_set,
    }.get(task, lambda t: None)


def _other_graph(text: str) -> CausalGraph | None:
    try:
        g = parse_description(f"Given a DAG {text}.")
    except GraphParseError:
        return None
    return g


def _graph(task: str, description: str, graph_type: str | None):
    if re.match(r"\s*(?:given\s+)?an?\s+undirected\b", description[:200], re.IGNORECASE):
        if task not in ("edge", "node"):
            return None
        return parse_undirected(description)
    g = parse_description(description, graph_type)
    return g, graph_edges(g)


@functools.lru_cache(maxsize=4096)
def read_form_question(
    task: str, qtype: str, description: str, graph_type: str | None, question: str
) -> ClearQuestion | None:
    """The typed question of one structure-type record (None when outside the templates)."""
    try:
        parsed = _graph(task, description, graph_type)
    except GraphParseError:
        return None
    if parsed is None:
        return None
    g, edges = parsed
    matched = match_template(question, qtype, _TEMPLATES[task], _FORM_QTYPES, g.node_set)
    if matched is None:
        return None
    form, groups, options = matched
    x, y, node = groups.get("x"), groups.get("y"), groups.get("node")
    claim: Any = None
    if groups.get("cand"):
        claim = groups["cand"]
    elif groups.get("triple"):
        claim = parse_names(groups["triple"], 8)
    elif groups.get("edge"):
        claim = parse_edge(groups["edge"])
    elif groups.get("order"):
        claim = parse_names(groups["order"])
    elif groups.get("set"):
        claim = parse_node_set(groups["set"])
    elif groups.get("other"):
        claim = _other_graph(groups["other"])
    elif groups.get("cpath"):
        try:
            claim = parse_path(groups["cpath"])
        except GraphParseError:
            return None
    if form == "claim" and claim is None:
        return None
    read = option_reader(task)
    return ClearQuestion(
        task_type=task,
        question_type=qtype,
        graph=g,
        x=x,
        y=y,
        node=node,
        variant=(groups.get("v1") or "any").lower(),
        claim=claim,
        options=tuple((letter, read(text)) for letter, text in options),
        relation=_relation(groups["rel"]) if groups.get("rel") else "",
        negated=bool(groups.get("neg")),
        edges=edges if task in ("edge", "node") else (),
    )
