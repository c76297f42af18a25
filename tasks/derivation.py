"""CALVER's DERIVATION as a certificate: a small claim grammar, its checker, and what certifies RESULT.

A derivation line is either a **claim** in the grammar below or free prose, which is ignored. A
derivation passes (DESIGN §3.4, check 4) when (a) it makes at least one claim, (b) every claim is
true on the verification graph, and (c) the claims together certify RESULT for the query kind.
Whatever a reward does not verify, a policy learns to fake; so nothing here trusts prose.

Grammar (one claim per line; keywords in any case; an optional leading ``so``/``hence``/``thus``/
``therefore``/``then``/``and``; a trailing ``.``; text after ``;`` is ignored). Nodes are the graph's
names, sets are ``{A, B}`` or ``{}``, paths are node names joined by ``->``, ``<-`` or ``<->``:

=================  ===============================================  ===========================================
claim              form                                             example
=================  ===============================================  ===========================================
path status        ``[backdoor] path P is open|blocked given S``    ``backdoor path X <- U -> Y is blocked given {U}``
directed path      ``directed path P``                              ``directed path X -> M -> Y``
no path            ``no [backdoor|directed] path from A to B``      ``no backdoor path from X to Y``
descendant         ``A is [not] a descendant of B``                 ``U is not a descendant of X``
descendant set     ``descendants of A = S``                         ``descendants of X = {M, Y}``
parent set         ``parents of A = S``                             ``parents of X = {U}``
separation         ``A and B are [not] d-separated given S``        ``{X} and Y are m-separated given {M}``
cycle              ``cycle P`` (P returns to its first node)        ``cycle A -> B -> C -> A``
edge               ``edge A -> B`` (or ``<->``)                     ``edge U -> X``
probability        ``P(A=a, …) = p``                                ``P(U=1) = 0.300``
conditional        ``P(A=a | B=b, …) = p``                          ``P(Y=1 | X=1, U=0) = 0.412``
effect             ``ψ = [expression =] p`` (or ``psi``)            ``ψ = 0.120 × 0.300 + 0.200 × 0.700 = 0.176``
=================  ===============================================  ===========================================

Truth (on the verification graph ``g``): a path claim needs every step to be an edge of ``g`` in the
written direction, no repeated node, and the stated status recomputed by the d-/m-connection rules
(a non-collider in S blocks; a collider blocks unless it or a descendant is in S); ``backdoor``
adds an arrowhead into the first node. ``d-`` and ``m-separated`` are both read as m-separation
(they agree on DAGs). Probabilities come from the problem's CPTs within :data:`PROB_TOLERANCE`;
ψ is compared with the adjustment formula on the certified set within the query's ``tolerance``. A
line that parses as a claim but names a node the graph lacks is a *false* claim, not prose.

What certifies RESULT (paths from RESULT's treatment/x to outcome/y; ``cap`` = ``max_paths``, 8 by
default: when more such paths exist, ``cap`` distinct true ones suffice):

* ``backdoor_set`` Z: every backdoor path X…Y claimed blocked given Z (or ``no backdoor path``);
  each z ∈ Z claimed a non-descendant of X (or left out of a ``descendants of X`` claim);
  *minimal*: for each z, a backdoor path claimed open given Z∖{z}; *maximal*: a ``descendants of X``
  claim, and for each other node v (not in Z, not X, Y or a descendant of X) a backdoor path claimed
  open given Z ∪ {v} (in a DAG the maximal set is every such node, so nothing is left to show).
  One-node additions decide maximality, in ADMGs too (proof in
  :func:`~faithgrpo.tasks.criteria.is_maximal_backdoor_set`).
* ``frontdoor_set`` Z: every directed path X…Y claimed (``directed path``) and each passes through Z
  (or ``no directed path from X to Y``); for each z, every backdoor path X…z blocked given {} and
  every backdoor path z…Y blocked given {X} (or the ``no backdoor path`` claims). *minimal*: for
  each z, a claimed directed path X…Y whose only node in Z is z (Z∖{z} keeps (ii) and (iii), so it
  fails only by such a path; within the cap the listed directed paths already include one);
  *maximal*: for each node v outside Z ∪ {X, Y}, a backdoor path X…v claimed open given {} (v
  breaks (ii)) or a backdoor path v…Y claimed open given {X} (v breaks (iii)); these are the only
  reasons a node cannot join, since (ii) and (iii) hold member by member and (i) only gets easier.
* ``dsep_set`` / ``msep_set`` Z: every path between X and Y blocked given Z (no path at all: a
  separation claim given Z); *minimal*: for each z, a path open given Z∖{z}.
* ``ci_test``: *yes* as a separation set above, given the query's set; *no*: one path claimed open
  given it.
* ``directed_path``: *yes*: a directed path X…Y; *no*: ``no directed path from X to Y`` or a
  ``descendants of X`` claim without Y.
* ``mediator`` M: a directed path X…Y through M (or X…M and M…Y).
* ``cycle``: a ``cycle`` claim with RESULT's nodes, in order up to rotation.
* ``ate``: the backdoor certificate of RESULT's set Z; for every stratum z with P(z) > 0 the claims
  P(z) (when Z ≠ ∅), P(Y=1 | X=1, z) and P(Y=1 | X=0, z); and a ψ claim.

Parsing is linear-time: lines and line lengths are capped before any pattern runs, and the
patterns have no nested quantifiers. Nothing here raises on model output.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from faithgrpo.tasks import criteria as C
from faithgrpo.tasks.graph import CausalGraph, GraphParseError, Path, node_sort_key, parse_path
from faithgrpo.tasks.queries import parse_node_set

__all__ = [
    "DEFAULT_MAX_PATHS",
    "PROB_TOLERANCE",
    "Claim",
    "DerivationReport",
    "check_derivation",
    "derivation_context",
    "parse_claim",
    "parse_claims",
]

DEFAULT_MAX_PATHS = 8
PROB_TOLERANCE = 0.002  # three printed decimals plus float error
MAX_CLAIM_LINES = 512
MAX_LINE_CHARS = 2_000
MAX_STRATA = 64  # an ATE certificate over more strata than this is not accepted (|Z| <= 6)

_NODE = r"[A-Za-z0-9_]{1,64}"
_SET = r"\{[^{}]{0,1500}\}"
_NODES = rf"(?:{_SET}|{_NODE})"
_NUM = r"[-+]?(?:\d{1,6}(?:\.\d{0,12})?|\.\d{1,12})(?:[eE][-+]?\d{1,3})?"
_PATH_TEXT = r"[^;{}]{1,1500}?"
_LEAD = r"^(?:(?i:so|hence|thus|therefore|then|and)\b[ ,]*)?"

_PATH_STATUS_RE = re.compile(
    _LEAD + rf"(?P<kind>backdoor\s+|back-door\s+|directed\s+)?path\s+(?P<path>{_PATH_TEXT})\s+is\s+"
    rf"(?P<status>open|blocked|unblocked|active|inactive)\s+given\s+(?P<given>{_SET}|∅)\s*\.?$",
    re.IGNORECASE,
)
_DIRECTED_RE = re.compile(_LEAD + rf"directed\s+path\s+(?P<path>{_PATH_TEXT})\s*\.?$", re.IGNORECASE)
_NO_PATH_RE = re.compile(
    _LEAD + rf"(?:there\s+is\s+)?no\s+(?P<kind>backdoor\s+|back-door\s+|directed\s+)?path\s+"
    rf"(?:from|between)\s+(?P<a>{_NODE})\s+(?:to|and)\s+(?P<b>{_NODE})\s*\.?$",
    re.IGNORECASE,
)
_DESCENDANT_RE = re.compile(
    _LEAD + rf"(?P<a>{_NODE})\s+is\s+(?P<neg>not\s+)?an?\s+descendant\s+of\s+(?P<b>{_NODE})\s*\.?$",
    re.IGNORECASE,
)
_FAMILY_RE = re.compile(
    _LEAD + rf"(?P<rel>descendants|parents)\s+of\s+(?P<a>{_NODE})\s*(?:=|:|are)\s*(?P<set>{_SET}|∅)\s*\.?$",
    re.IGNORECASE,
)
_SEPARATION_RE = re.compile(
    _LEAD + rf"(?P<a>{_NODES})\s+and\s+(?P<b>{_NODES})\s+are\s+(?P<neg>not\s+)?(?P<sep>[dm])-separated\s+"
    rf"given\s+(?P<given>{_SET}|∅)\s*\.?$",
    re.IGNORECASE,
)
_CYCLE_RE = re.compile(_LEAD + rf"(?:directed\s+)?cycle\s+(?P<path>{_PATH_TEXT})\s*\.?$", re.IGNORECASE)
_EDGE_RE = re.compile(_LEAD + rf"edge\s+(?P<path>{_PATH_TEXT})\s*\.?$", re.IGNORECASE)
_PROB_RE = re.compile(
    _LEAD
    + rf"P\((?P<target>[^|()]{{1,800}}?)(?:\|(?P<cond>[^|()]{{0,800}}))?\)\s*=\s*(?P<value>{_NUM})\s*\.?$"
)
_PSI_RE = re.compile(
    _LEAD + rf"(?:ψ|psi|ATE)\s*=\s*(?:[^=]{{0,600}}=\s*)?(?P<value>{_NUM})\s*\.?$", re.IGNORECASE
)
_ASSIGN_RE = re.compile(rf"\s*({_NODE})\s*=\s*([01])\s*")
_SPLIT_SET_RE = re.compile(r"[,\s]+")


@dataclass(frozen=True)
class Claim:
    """One parsed derivation claim.

    Attributes:
        kind: ``path``, ``directed``, ``no_path``, ``descendant``, ``family``, ``separation``,
            ``cycle``, ``edge``, ``prob`` or ``psi``.
        line: the claim's line number in DERIVATION (from 1).
        text: the line.
        args: kind-specific values (see :func:`parse_claim`).
    """

    kind: str
    line: int
    text: str
    args: tuple = ()


@dataclass
class DerivationReport:
    """The derivation check's findings for one trace.

    Attributes:
        claims: the parsed claims.
        false: ``(line, reason)`` per false claim.
        missing: why the true claims do not certify RESULT, or ``None`` when they do.
    """

    claims: list[Claim] = field(default_factory=list)
    false: list[tuple[int, str]] = field(default_factory=list)
    missing: str | None = None

    @property
    def passed(self) -> bool:
        return bool(self.claims) and not self.false and self.missing is None

    def reason(self) -> str | None:
        """The failure reason (first false claim, else the missing piece), or ``None``."""
        if not self.claims:
            return "DERIVATION makes no claim in the certificate grammar (prose alone certifies nothing)"
        if self.false:
            line, why = self.false[0]
            more = f" (+{len(self.false) - 1} more false)" if len(self.false) > 1 else ""
            return f"DERIVATION line {line} is false: {why}{more}"
        if self.missing:
            return f"DERIVATION does not certify RESULT: {self.missing}"
        return None


# ---------------------------------------------------------------------------------------------
# parsing
# A path's parse depends only on its text, and the same path shows up in many claim lines (other
# given sets, statuses, leads). Safe to share: a Path is frozen (tuples of str) and the key is the
# text itself; the claim patterns cap a path at 1,500 characters and the cache at 8,192 entries.
@functools.lru_cache(maxsize=8_192)
def _path(text: str) -> Path | None:
    try:
        return parse_path(text.strip(), max_nodes=128, max_chars=1500)
    except (GraphParseError, ValueError):
        return None


def _assignments(text: str) -> tuple[tuple[str, int], ...] | None:
    out = []
    for part in text.split(","):
        m = _ASSIGN_RE.fullmatch(part)
        if m is None:
            return None
        out.append((m.group(1), int(m.group(2))))
    names = [n for n, _ in out]
    return tuple(out) if out and len(set(names)) == len(names) else None


def parse_claim(line: str, number: int = 0) -> Claim | None:
    """Parse one derivation line into a :class:`Claim`, or ``None`` for prose.

    Example:
        >>> parse_claim("backdoor path X <- U -> Y is blocked given {U}").args
        (Path(nodes=('X', 'U', 'Y'), marks=('<-', '->')), 'blocked', frozenset({'U'}), 'backdoor')
        >>> parse_claim("the path is blocked, I think") is None
        True
    """
    if len(line) > MAX_LINE_CHARS:
        return None
    if type(number) is int:  # Claims are frozen (immutable args too), so one object can be shared
        return _claim_at(line, number)
    parsed = _parse_line(line)
    return None if parsed is None else Claim(parsed[0], number, parsed[1], parsed[2])


@functools.lru_cache(maxsize=16_384)
def _claim_at(line: str, number: int) -> Claim | None:
    parsed = _parse_line(line)
    return None if parsed is None else Claim(parsed[0], number, parsed[1], parsed[2])


@functools.lru_cache(maxsize=8_192)
def _parse_line(line: str) -> tuple[str, str, tuple] | None:
    """``(kind, normalised text, args)`` of a claim line (at most MAX_LINE_CHARS), or ``None`` for prose."""
    text = " ".join(line.split(";", 1)[0].split())  # one space between words: no backtracking on runs
    if not text:
        return None
    parsed = _parse_claim_text(text)
    return None if parsed is None else (parsed[0], text, parsed[1])


# Parsing depends only on the normalised line; the G completions of a prompt repeat lines a lot.
# Safe to share: the result is a (kind, args) tuple of str/frozenset/Path/float (all immutable),
# and the key is the text itself. Lines are at most MAX_LINE_CHARS, so the cache is bounded.
@functools.lru_cache(maxsize=16_384)
def _parse_claim_text(text: str) -> tuple[str, tuple] | None:
    low = text.lower()
    if "path" in low:
        m = _PATH_STATUS_RE.match(text)
        if m:
            path, given = _path(m.group("path")), parse_node_set(m.group("given"))
            status = {"unblocked": "open", "active": "open", "inactive": "blocked"}.get(
                m.group("status").lower(), m.group("status").lower()
            )
            prefix = (m.group("kind") or "").strip().lower().replace("back-door", "backdoor")
            if path is None or given is None:
                return ("malformed", (f"unreadable path or set in {text[:60]!r}",))
            return ("path", (path, status, given, prefix))
        m = _NO_PATH_RE.match(text)
        if m:
            prefix = (m.group("kind") or "").strip().lower().replace("back-door", "backdoor")
            return ("no_path", (m.group("a"), m.group("b"), prefix))
        m = _DIRECTED_RE.match(text)
        if m:
            path = _path(m.group("path"))
            if path is None:
                return ("malformed", (f"unreadable path in {text[:60]!r}",))
            return ("directed", (path,))
    if "descendant" in low:
        m = _DESCENDANT_RE.match(text)
        if m:
            return ("descendant", (m.group("a"), m.group("b"), not m.group("neg")))
    if "descendants" in low or "parents" in low:
        m = _FAMILY_RE.match(text)
        if m:
            members = parse_node_set(m.group("set"))
            if members is None:
                return ("malformed", (f"unreadable set in {text[:60]!r}",))
            return ("family", (m.group("rel").lower(), m.group("a"), members))
    if "separated" in low:
        m = _SEPARATION_RE.match(text)
        if m:
            a, b, given = (
                parse_node_set(m.group("a")),
                parse_node_set(m.group("b")),
                parse_node_set(m.group("given")),
            )
            if a is None or b is None or given is None:
                return ("malformed", (f"unreadable set in {text[:60]!r}",))
            return ("separation", (a, b, given, not m.group("neg")))
    if "cycle" in low:
        m = _CYCLE_RE.match(text)
        if m:
            path = _path(m.group("path"))
            if path is None:
                return ("malformed", (f"unreadable cycle in {text[:60]!r}",))
            return ("cycle", (path,))
    if low.startswith("edge") or low.split(" ", 1)[-1].startswith("edge"):
        m = _EDGE_RE.match(text)
        if m:
            path = _path(m.group("path"))
            if path is None or len(path.nodes) != 2:
                return ("malformed", (f"an edge joins two nodes: {text[:60]!r}",))
            return ("edge", (path,))
    if "P(" in text:
        m = _PROB_RE.match(text)
        if m:
            target = _assignments(m.group("target"))
            cond = _assignments(m.group("cond")) if m.group("cond") is not None else ()
            value = float(m.group("value"))
            if target is None or cond is None or not math.isfinite(value):
                return ("malformed", (f"unreadable probability in {text[:60]!r}",))
            return ("prob", (target, cond, value))
    if "ψ" in text or "psi" in low or "ate" in low:
        m = _PSI_RE.match(text)
        if m:
            value = float(m.group("value"))
            if not math.isfinite(value):
                return ("malformed", ("ψ is not a finite number",))
            return ("psi", (value,))
    return None


def parse_claims(lines: Sequence[str]) -> list[Claim]:
    """The claims among ``lines`` (at most :data:`MAX_CLAIM_LINES` lines are read)."""
    out = []
    for number, line in enumerate(lines[:MAX_CLAIM_LINES], start=1):
        if isinstance(line, str):
            claim = parse_claim(line, number)
            if claim is not None:
                out.append(claim)
    return out


# ---------------------------------------------------------------------------------------------
# truth of single claims
class _Context:
    """What claims are checked against: the verification graph, the CPTs and the query."""

    def __init__(self, graph: CausalGraph, cpts: Mapping[str, Any] | None, query: Mapping[str, Any]):
        self.graph, self.cpts, self.query = graph, cpts, query
        self._desc: dict[str, frozenset[str]] = {}
        self._joints: dict[tuple[str, ...], Any] = {}
        # claim text -> why it is false (None: true). A claim's truth depends only on its text (which
        # determines its kind and args) and on this context, so a context reused for the G
        # completions of one problem (:func:`derivation_context`) checks each distinct line once.
        self._truth: dict[str, str | None] = {}
        # (claim texts, kind, value, ...) -> what the claims fail to certify (see check_derivation)
        self._certificates: dict[tuple, str | None] = {}

    @functools.cached_property
    def table(self) -> dict | None:
        # against this graph: CPTs of another graph (a trace's own GRAPH) make every number unverifiable
        return None if self.cpts is None else C.validate_cpts(self.cpts, self.graph)

    def joint(self, names: tuple[str, ...]) -> Any:
        """P(names) as an array (cached: strata claims and certification ask for the same marginals)."""
        if names not in self._joints:
            assert self.table is not None
            self._joints[names] = C._joint(self.table, list(names))
        return self._joints[names]

    def desc(self, v: str) -> frozenset[str]:
        if v not in self._desc:
            self._desc[v] = self.graph.descendants(v)
        return self._desc[v]


_MAX_TRUTHS = 512  # distinct claim lines remembered per context (then the memo starts over)
_MAX_TRUTH_KEY = 300  # longer lines are checked without memoising: <= ~0.3 MB per context
_MAX_CERTIFICATES = 256  # certificates remembered per context (then that memo starts over)
_MAX_CERTIFICATE_KEY = 1_000  # claim text per certificate key: <= ~0.3 MB per context


def derivation_context(
    graph: CausalGraph, cpts: Mapping[str, Any] | None, query: Mapping[str, Any]
) -> _Context:
    """A reusable checking context for many derivations on one problem (pass it to :func:`check_derivation`).

    It remembers descendant sets, CPT marginals and the verdict on each distinct claim line. The
    graph is immutable; ``cpts`` and ``query`` must not be mutated while the context is in use (the
    prepared CALVER problem that owns it never does).
    """
    return _Context(graph, cpts, query)


def _claim_verdict(ctx: _Context, claim: Claim) -> str | None:
    """:func:`_claim_problem` with the error handling of :func:`check_derivation`, memoised per context."""
    key = claim.text
    if key in ctx._truth:
        return ctx._truth[key]
    try:
        why = _claim_problem(ctx, claim)
    except (ValueError, KeyError, IndexError) as exc:  # a claim the graph functions reject
        why = f"cannot be checked: {str(exc)[:100]}"
    if len(key) <= _MAX_TRUTH_KEY:
        if len(ctx._truth) >= _MAX_TRUTHS:
            ctx._truth.clear()
        ctx._truth[key] = why
    return why


def _unknown(ctx: _Context, nodes: Iterable[str]) -> str | None:
    missing = sorted(set(nodes) - ctx.graph.node_set, key=node_sort_key)
    return f"{', '.join(missing[:3])} not node(s) of the graph" if missing else None


def _path_problem(ctx: _Context, path: Path) -> str | None:
    if len(path.nodes) < 2:
        return f"a path joins at least two nodes, got {path}"
    why = _unknown(ctx, path.nodes)
    if why:
        return why
    if len(set(path.nodes)) != len(path.nodes):
        return f"{path} repeats a node"
    for a, m, b in zip(path.nodes, path.marks, path.nodes[1:]):
        g = ctx.graph
        ok = (
            (a, b) in g.directed
            if m == "->"
            else (b, a) in g.directed
            if m == "<-"
            else (a, b) in g.bidirected or (b, a) in g.bidirected
        )
        if not ok:
            return f"{a} {m} {b} is not an edge of the graph"
    return None


def _prob(ctx: _Context, target: tuple, cond: tuple) -> float | None:
    """P(target | cond) from the CPTs, ``None`` when undefined (P(cond) = 0)."""
    names = tuple(n for n, _ in target) + tuple(n for n, _ in cond)
    num = float(ctx.joint(names)[tuple(v for _, v in target) + tuple(v for _, v in cond)])
    if not cond:
        return num
    den = float(ctx.joint(tuple(n for n, _ in cond))[tuple(v for _, v in cond)])
    return None if den <= 1e-12 else num / den


def _claim_problem(ctx: _Context, claim: Claim) -> str | None:
    """``None`` when ``claim`` is true on the context's graph/CPTs, else why it is false."""
    g, a = ctx.graph, claim.args
    if claim.kind == "malformed":
        return a[0]
    if claim.kind in ("path", "directed", "edge", "cycle"):
        path = a[0]
        if claim.kind == "cycle":
            if len(path.nodes) < 3 or path.nodes[0] != path.nodes[-1]:
                return f"cycle {path} does not return to its first node"
            why = _path_problem(ctx, Path(path.nodes[:-1], path.marks[:-1]))
            if why is None and not all(m == "->" for m in path.marks):
                why = f"cycle {path} is not directed"
            if why is None:
                last = Path(path.nodes[-2:], path.marks[-1:])
                why = _path_problem(ctx, last)
            return why
        why = _path_problem(ctx, path)
        if why:
            return why
        if claim.kind == "directed" and not all(m == "->" for m in path.marks):
            return f"{path} is not a directed path"
        if claim.kind == "path":
            _, status, given, prefix = a
            why = _unknown(ctx, given)
            if why:
                return why
            if prefix == "backdoor" and path.marks[0] not in ("<-", "<->"):
                return f"{path} is not a backdoor path (no arrowhead into {path.nodes[0]})"
            if prefix == "directed" and not all(m == "->" for m in path.marks):
                return f"{path} is not a directed path"
            if set(path.nodes[:1] + path.nodes[-1:]) & given:
                return f"the given set {_fmt(given)} contains an endpoint of {path}"
            actual = "blocked" if C.path_is_blocked(g, path, given) else "open"
            if actual != status:
                return f"{path} is {actual} given {_fmt(given)}, not {status}"
        return None
    if claim.kind == "no_path":
        x, y, prefix = a
        why = _unknown(ctx, (x, y))
        if why or x == y:
            return why or "the two ends are the same node"
        if prefix == "directed":
            found = y in ctx.desc(x)
        else:
            firsts = ("<-", "<->") if prefix == "backdoor" else ("->", "<-", "<->")
            found = C.path_exists(g, x, y, first_marks=firsts)
        return f"a {prefix + ' ' if prefix else ''}path from {x} to {y} exists" if found else None
    if claim.kind == "descendant":
        v, of, positive = a
        why = _unknown(ctx, (v, of))
        if why:
            return why
        return (
            None
            if (v in ctx.desc(of)) == positive
            else f"{v} is {'not ' if positive else ''}a descendant of {of}"
        )
    if claim.kind == "family":
        rel, v, members = a
        why = _unknown(ctx, (v, *members))
        if why:
            return why
        actual = ctx.desc(v) if rel == "descendants" else g.parents(v)
        return None if actual == members else f"the {rel} of {v} are {_fmt(actual)}"
    if claim.kind == "separation":
        xs, ys, given, positive = a
        why = _unknown(ctx, (*xs, *ys, *given))
        if why:
            return why
        if (xs & ys) or ((xs | ys) & given) or not xs or not ys:
            return "the two sides and the given set must be disjoint and non-empty"
        if g.kind == "DG":
            return "separation is not defined on a cyclic graph here"
        actual = C.m_separated(g, xs, ys, given)
        return (
            None
            if actual == positive
            else f"{_fmt(xs)} and {_fmt(ys)} are {'' if actual else 'not '}separated given {_fmt(given)}"
        )
    if claim.kind == "prob":
        target, cond, value = a
        if ctx.table is None:
            return "the problem has no CPTs to read probabilities from"
        names = [n for n, _ in target] + [n for n, _ in cond]
        why = _unknown(ctx, names)
        if why or len(set(names)) != len(names):
            return why or "a variable appears twice"
        try:
            actual = _prob(ctx, target, cond)
        except ValueError as exc:
            return str(exc)[:100]
        if actual is None:
            return "the conditioning event has probability 0"
        return (
            None
            if abs(actual - value) <= PROB_TOLERANCE
            else f"the probability is {actual:.4f}, not {value:g}"
        )
    if claim.kind == "psi":
        if ctx.table is None:
            return "the problem has no CPTs to compute ψ from"
        return None  # its value is checked against the certified adjustment set in _certify_ate
    return f"unknown claim kind {claim.kind!r}"


def _fmt(nodes: Iterable[str]) -> str:
    return "{" + ", ".join(sorted(nodes, key=node_sort_key)) + "}"


# ---------------------------------------------------------------------------------------------
# certification
def _oriented(path: Path, x: str) -> Path:
    return path if path.nodes[0] == x else path.reversed()


def _required_paths(g: CausalGraph, pairs: Iterable[tuple[str, str]], first: tuple[str, ...], cap: int,
                    marks: tuple[str, ...] = ("->", "<-", "<->")) -> tuple[tuple[Path, ...], bool]:  # fmt: skip
    """Paths between the pairs (up to cap + 1) and whether that is all of them."""
    return _required_paths_cached(g, g.nodes, tuple(pairs), tuple(first), cap, tuple(marks))


# Depends only on the graph's content (CausalGraph is immutable and hashes by content; its node
# order, which fixes the search order, is part of the key) and on hashable arguments. The result
# is a tuple of immutable Paths, so sharing it is safe. Bounded.
@functools.lru_cache(maxsize=4_096)
def _required_paths_cached(g: CausalGraph, nodes: tuple[str, ...], pairs: tuple[tuple[str, str], ...],
                           first: tuple[str, ...], cap: int, marks: tuple[str, ...]) -> tuple[tuple[Path, ...], bool]:  # fmt: skip
    found: list[Path] = []
    for x, y in pairs:
        for p in C.simple_paths(g, x, y, first_marks=first, marks=marks, limit=cap + 1 - len(found)):
            found.append(p)
        if len(found) > cap:
            return tuple(found), False
    return tuple(found), True


def _require_paths(
    claimed: set[Path], required: Sequence[Path], complete: bool, cap: int, what: str, given: frozenset[str]
) -> str | None:
    """All required paths claimed; with more than ``cap`` of them, ``cap`` distinct claimed ones."""
    if complete:
        missing = [p for p in required if p not in claimed]
        if missing:
            return f"{what} {missing[0]} is not shown blocked given {_fmt(given)}" + (
                f" (+{len(missing) - 1} more)" if len(missing) > 1 else ""
            )
        return None
    if len(claimed) < cap:
        return f"more than {cap} {what}s exist; show at least {cap} of them blocked given {_fmt(given)}"
    return None


class _Claims:
    """True claims indexed for certification."""

    def __init__(self, claims: list[Claim]):
        self.all = claims

    def paths(self, status: str, given: frozenset[str], x: str, y: str, backdoor: bool = False) -> set[Path]:
        out = set()
        for c in self.all:
            if c.kind == "path" and c.args[1] == status and c.args[2] == given:
                p = c.args[0]
                if {p.nodes[0], p.nodes[-1]} == {x, y}:
                    p = _oriented(p, x)
                    if not backdoor or p.marks[0] in ("<-", "<->"):
                        out.add(p)
        return out

    def directed(self, x: str, y: str) -> set[Path]:
        out = set()
        for c in self.all:
            p = c.args[0] if c.kind in ("directed", "path") else None
            if p is not None and p.nodes[0] == x and p.nodes[-1] == y and all(m == "->" for m in p.marks):
                out.add(p)
        return out

    def no_path(self, x: str, y: str, prefix: str) -> bool:
        """A ``no [prefix] path from x to y`` claim (either direction when undirected)."""
        ends = {(x, y), (y, x)} if prefix == "" else {(x, y)}
        return any(c.kind == "no_path" and c.args[2] == prefix and c.args[:2] in ends for c in self.all)

    def descendant_set(self, x: str) -> frozenset[str] | None:
        return next(
            (c.args[2] for c in self.all if c.kind == "family" and c.args[:2] == ("descendants", x)), None
        )

    def non_descendant(self, v: str, x: str) -> bool:
        desc = self.descendant_set(x)
        if desc is not None and v not in desc:
            return True
        return any(c.kind == "descendant" and c.args == (v, x, False) for c in self.all)

    def separated(self, xs: frozenset[str], ys: frozenset[str], given: frozenset[str]) -> bool:
        return any(
            c.kind == "separation" and c.args[3] and c.args[2] == given and {c.args[0], c.args[1]} == {xs, ys}
            for c in self.all
        )


def _certify_blocking(
    have: _Claims, g: CausalGraph, xs: frozenset[str], ys: frozenset[str], z: frozenset[str], cap: int,
    *, backdoor: bool = False,
) -> str | None:  # fmt: skip
    """Every (backdoor) path between xs and ys shown blocked by z (or none exists, shown)."""
    pairs = [(a, b) for a in sorted(xs, key=node_sort_key) for b in sorted(ys, key=node_sort_key)]
    first = ("<-", "<->") if backdoor else ("->", "<-", "<->")
    required, complete = _required_paths(g, pairs, first, cap)
    what = "backdoor path" if backdoor else "path"
    if not required:
        if backdoor:
            (x,), (y,) = xs, ys
            if have.no_path(x, y, "backdoor"):
                return None
            return f"no backdoor path from {x} to {y} exists; say so ('no backdoor path from {x} to {y}')"
        if have.separated(xs, ys, z) or (len(xs) == len(ys) == 1 and have.no_path(min(xs), min(ys), "")):
            return None
        return f"no path joins {_fmt(xs)} and {_fmt(ys)}; claim they are separated given {_fmt(z)}"
    claimed: set[Path] = set()
    for a, b in pairs:
        claimed |= have.paths("blocked", z, a, b, backdoor=backdoor)
    return _require_paths(claimed, required, complete, cap, what, z)


def _certify_minimal(have: _Claims, xs, ys, z, backdoor: bool) -> str | None:
    for v in sorted(z, key=node_sort_key):
        rest = z - {v}
        if not any(have.paths("open", rest, a, b, backdoor=backdoor) for a in xs for b in ys):
            kind = "backdoor path" if backdoor else "path"
            return f"minimality: no {kind} is shown open given {_fmt(rest)} (without {v})"
    return None


def _certify_backdoor(have: _Claims, g: CausalGraph, x: str, y: str, z: frozenset[str], variant: str,
                      cap: int) -> str | None:  # fmt: skip
    for v in sorted(z, key=node_sort_key):
        if not have.non_descendant(v, x):
            return f"{v} is not shown to be a non-descendant of {x}"
    why = _certify_blocking(have, g, frozenset((x,)), frozenset((y,)), z, cap, backdoor=True)
    if why:
        return why
    if variant == "minimal":
        return _certify_minimal(have, {x}, {y}, z, backdoor=True)
    if variant == "maximal":
        desc = have.descendant_set(x)
        if desc is None:
            return f"maximality: claim the descendants of {x} ('descendants of {x} = {{...}}')"
        # one-node additions decide maximality (criteria.is_maximal_backdoor_set); in a DAG the
        # maximal set is every candidate, so there is nothing left to add
        for v in sorted(g.node_set - desc - z - {x, y}, key=node_sort_key):
            if not have.paths("open", z | {v}, x, y, backdoor=True):
                return (
                    f"maximality: {v} is neither in {_fmt(z)} nor a descendant of {x}, and no backdoor "
                    f"path is shown open given {_fmt(z | {v})}"
                )
    return None


def _certify_frontdoor(
    have: _Claims, g: CausalGraph, x: str, y: str, z: frozenset[str], variant: str, cap: int
) -> str | None:
    required, complete = _required_paths(g, [(x, y)], ("->",), cap, marks=("->",))
    if not required:
        if not (
            have.no_path(x, y, "directed")
            or (have.descendant_set(x) is not None and y not in have.descendant_set(x))
        ):
            return f"no directed path from {x} to {y} exists; say so ('no directed path from {x} to {y}')"
    else:
        claimed = {p for p in have.directed(x, y) if set(p.nodes[1:-1]) & z}
        if complete:
            missing = [p for p in required if p not in claimed]
            if missing:
                return f"directed path {missing[0]} is not shown (or does not pass through {_fmt(z)})"
        elif len(claimed) < cap:
            return f"more than {cap} directed paths exist; show {cap} of them passing through {_fmt(z)}"
    for v in sorted(z, key=node_sort_key):
        why = _certify_blocking(have, g, frozenset((x,)), frozenset((v,)), frozenset(), cap, backdoor=True)
        if why:
            return f"condition (ii) for {v}: {why}"
        why = _certify_blocking(
            have, g, frozenset((v,)), frozenset((y,)), frozenset((x,)), cap, backdoor=True
        )
        if why:
            return f"condition (iii) for {v}: {why}"
    if variant == "minimal":
        # Z minus one member still meets (ii) and (iii); it fails only by a directed path avoiding it
        for v in sorted(z, key=node_sort_key):
            if not any(set(p.nodes[1:-1]) & z == {v} for p in have.directed(x, y)):
                return (
                    f"minimality: no directed path from {x} to {y} is shown that meets {_fmt(z)} only at {v}"
                )
    if variant == "maximal":
        # a node outside Z can be added iff it meets (ii) and (iii) on its own. The (iii) claim is
        # checked in the whole graph, not with v's outgoing edges removed; the two agree unless v
        # is an ancestor of X, and then v breaks (ii) anyway, so the claim still proves v is out.
        for v in sorted(g.node_set - z - {x, y}, key=node_sort_key):
            if not (
                have.paths("open", frozenset(), x, v, backdoor=True)
                or have.paths("open", frozenset((x,)), v, y, backdoor=True)
            ):
                return (
                    f"maximality: {v} is not shown to break (ii) (a backdoor path {x} … {v} open "
                    f"given {{}}) or (iii) (a backdoor path {v} … {y} open given {{{x}}})"
                )
    return None


def _certify_ate(
    have: _Claims, ctx: _Context, x: str, y: str, z: frozenset[str], cap: int, result: Any
) -> str | None:
    why = _certify_backdoor(have, ctx.graph, x, y, z, "any", cap)
    if why:
        return why
    zs = sorted(z, key=node_sort_key)
    if 2 ** len(zs) > MAX_STRATA:
        return f"adjusting for {len(zs)} variables needs {2 ** len(zs)} strata, over the cap of {MAX_STRATA}"
    stated = {(c.args[0], c.args[1]) for c in have.all if c.kind == "prob"}
    norm = lambda t: tuple(sorted(t, key=lambda nv: node_sort_key(nv[0])))  # noqa: E731
    stated = {(norm(t), norm(c)) for t, c in stated}
    psi = 0.0
    for values in itertools.product((0, 1), repeat=len(zs)):
        stratum = tuple(zip(zs, values))
        pz = _prob(ctx, stratum, ()) if zs else 1.0
        if pz is None or pz <= 1e-12:
            continue
        if zs and (norm(stratum), ()) not in stated:
            return f"P({', '.join(f'{n}={v}' for n, v in stratum)}) is not stated"
        p = []
        for a in (1, 0):
            cond = norm(((x, a), *stratum))
            if (((y, 1),), cond) not in stated:
                shown = ", ".join(f"{n}={v}" for n, v in ((x, a), *stratum))
                return f"P({y}=1 | {shown}) is not stated"
            value = _prob(ctx, ((y, 1),), ((x, a), *stratum))
            if value is None:
                return "positivity fails"
            p.append(value)
        psi += (p[0] - p[1]) * pz
    claims = [c.args[0] for c in have.all if c.kind == "psi"]
    if not claims:
        return "ψ is not stated"
    tolerance = float(ctx.query.get("tolerance", 0.01))
    wrong = [v for v in claims if abs(v - psi) > tolerance]
    if wrong:
        return f"ψ = {wrong[0]:g} but the adjustment formula on {_fmt(z)} gives {psi:.4f}"
    decision, stated = result
    threshold = float(ctx.query["threshold"])
    if decision != (psi > threshold):
        return f"ψ = {psi:.4f} is {'above' if psi > threshold else 'not above'} {threshold:g}: RESULT decides the other way"
    if stated is not None and abs(stated - psi) > tolerance:
        return f"RESULT's ψ = {stated:g} is not the certified {psi:.4f}"
    return None


def check_derivation(
    lines: Sequence[str] | None,
    kind: str,
    query: Mapping[str, Any],
    value: Any,
    graph: CausalGraph,
    cpts: Mapping[str, Any] | None = None,
    *,
    ate_set: frozenset[str] | None = None,
    max_paths: int = DEFAULT_MAX_PATHS,
    context: _Context | None = None,
) -> DerivationReport:
    """Parse DERIVATION's claims, check each on ``graph``, and check that they certify ``value``.

    Args:
        lines: the DERIVATION lines (bullets stripped).
        kind: the query kind (``backdoor_set`` …).
        query: the query dict (roles, variant, tolerance).
        value: RESULT's parsed value (a set, ``bool``, node, cycle tuple, or ``(decision, ψ)``).
        graph: the verification graph.
        cpts: the problem's CPTs (``ate``).
        ate_set: the adjustment set RESULT names (``ate``).
        max_paths: the path cap (module docstring).
        context: a :func:`derivation_context` for these ``graph``, ``cpts`` and ``query`` (the same
            objects), shared across calls to check repeated claims once; otherwise ignored.

    Returns:
        A :class:`DerivationReport`; ``passed`` is the check's verdict. Never raises on model output.
    """
    report = DerivationReport(claims=parse_claims(list(lines or ())))
    if not report.claims:
        return report
    if context is not None and context.graph is graph and context.cpts is cpts and context.query is query:
        ctx = context
    else:  # no context, or one made for other inputs: a fresh one
        ctx = _Context(graph, cpts, query)
    for claim in report.claims:
        why = _claim_verdict(ctx, claim)
        if why:
            report.false.append((claim.line, why))
    if report.false:
        return report
    if ctx is not context:
        report.missing = _certify_safely(report.claims, ctx, kind, query, value, ate_set, max_paths)
        return report
    # A shared context remembers certificates: _certify reads only the claims' kinds and args (fixed
    # by their normalised texts, in order), the context and the arguments below. ``repr`` tells
    # apart values that are equal but print differently (ψ = 0.0 and -0.0). The value is a string.
    texts = tuple(c.text for c in report.claims)
    key = (texts, kind, value, repr(value) if kind == "ate" else None, ate_set, max_paths)
    try:
        if key in ctx._certificates:
            report.missing = ctx._certificates[key]
            return report
    except TypeError:  # an unhashable value from a caller: check without the memo
        key = None
    report.missing = _certify_safely(report.claims, ctx, kind, query, value, ate_set, max_paths)
    if key is not None and sum(map(len, texts)) <= _MAX_CERTIFICATE_KEY:
        if len(ctx._certificates) >= _MAX_CERTIFICATES:
            ctx._certificates.clear()
        ctx._certificates[key] = report.missing
    return report


def _certify_safely(claims: list[Claim], ctx: _Context, kind: str, query: Mapping[str, Any], value: Any,
                    ate_set: frozenset[str] | None, cap: int) -> str | None:  # fmt: skip
    try:
        return _certify(_Claims(claims), ctx, kind, query, value, ate_set, cap)
    except (ValueError, KeyError, IndexError) as exc:
        return f"cannot be certified: {str(exc)[:100]}"


def _as_set(v: Any) -> frozenset[str]:
    return frozenset([v] if isinstance(v, str) else v or [])


def _certify(have: _Claims, ctx: _Context, kind: str, q: Mapping[str, Any], value: Any,
             ate_set: frozenset[str] | None, cap: int) -> str | None:  # fmt: skip
    g = ctx.graph
    if value is None:
        return "RESULT does not parse"
    if kind in ("backdoor_set", "frontdoor_set", "dsep_set", "msep_set") or (kind == "ate" and ate_set):
        z = frozenset(ate_set if kind == "ate" else value)
        why = _unknown(ctx, z)
        if why:
            return f"RESULT names {why}"
        ends = {q[r] for r in ("treatment", "outcome") if isinstance(q.get(r), str)}
        ends |= _as_set(q.get("x")) | _as_set(q.get("y"))
        if z & ends:
            return f"RESULT contains the query's own node(s) {_fmt(z & ends)}"
    if kind == "backdoor_set":
        return _certify_backdoor(
            have, g, q["treatment"], q["outcome"], frozenset(value), q.get("variant", "any"), cap
        )
    if kind == "frontdoor_set":
        return _certify_frontdoor(
            have, g, q["treatment"], q["outcome"], frozenset(value), q.get("variant", "any"), cap
        )
    if kind in ("dsep_set", "msep_set", "ci_test"):
        xs, ys = _as_set(q["x"]), _as_set(q["y"])
        if kind == "ci_test":
            given = _as_set(q.get("given"))
            if value:
                return _certify_blocking(have, g, xs, ys, given, cap)
            if any(have.paths("open", given, a, b) for a in xs for b in ys):
                return None
            return f"no path is shown open given {_fmt(given)}"
        z = frozenset(value)
        why = _certify_blocking(have, g, xs, ys, z, cap)
        if why is None and q.get("variant", "any") == "minimal":
            why = _certify_minimal(have, xs, ys, z, backdoor=False)
        return why
    if kind == "directed_path":
        x, y = q["treatment"], q["outcome"]
        if value:
            return None if have.directed(x, y) else f"no directed path from {x} to {y} is shown"
        desc = have.descendant_set(x)
        if have.no_path(x, y, "directed") or (desc is not None and y not in desc):
            return None
        return f"show there is none: 'no directed path from {x} to {y}' or the descendants of {x}"
    if kind == "mediator":
        x, y, m = q["treatment"], q["outcome"], value
        if m in (x, y):
            return f"{m} is an end of the query, not a mediator"
        if any(m in p.nodes[1:-1] for p in have.directed(x, y)):
            return None
        if have.directed(x, m) and have.directed(m, y):
            return None
        return f"no directed path from {x} through {m} to {y} is shown"
    if kind == "cycle":
        seq = tuple(value)
        for c in have.all:
            if c.kind == "cycle":
                nodes = c.args[0].nodes[:-1]
                if len(nodes) == len(seq) and any(nodes[i:] + nodes[:i] == seq for i in range(len(nodes))):
                    return None
        return f"the cycle {' -> '.join((*seq, seq[0]))} is not shown edge by edge"
    if kind == "ate":
        if ate_set is None:
            return "RESULT names no adjustment set"
        return _certify_ate(have, ctx, q["treatment"], q["outcome"], ate_set, cap, value)
    return f"no certificate is defined for query kind {kind!r}"
