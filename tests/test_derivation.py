"""Tests for faithgrpo.verifier.certificates.derivation: the DERIVATION claim grammar, claim truth, certification.

* Parsing: every claim kind of the grammar table in several spellings, prose that must stay prose,
  and malformed claims (a false claim, never prose).
* Truth: random DAGs, ADMGs and cyclic graphs with random claims (true and false, in random
  spellings); the checker's per-claim verdicts must equal an independent oracle written here with
  networkx (d-separation on the latent-parent DAG of an ADMG, descendants, path blocking by the
  definition, probabilities by enumerating the joint from the CPTs).
* Certification per query kind on hand-built graphs: complete certificates pass and dropping any
  required claim fails with a ``missing`` reason; the path cap.
* Bounded inputs: megabyte derivations, 10k lines, deep braces and 100k-char lines return a report.
* A small run of ``benchmarks/fuzz_calver.py``: no exception, internal error or NaN reward.
"""

from __future__ import annotations

import importlib.util
import itertools
import random
from pathlib import Path as FsPath

import networkx as nx
import pytest

from faithgrpo.verifier.certificates.claim_checks import PROB_TOLERANCE
from faithgrpo.verifier.certificates.claims import MAX_CLAIM_LINES, MAX_LINE_CHARS, parse_claim, parse_claims
from faithgrpo.verifier.certificates.derivation import DEFAULT_MAX_PATHS, DerivationReport, check_derivation
from faithgrpo.verifier.graphs.edges import Path
from faithgrpo.verifier.graphs.model import CausalGraph

ROOT = FsPath(__file__).resolve().parents[1]


def P(text: str) -> Path:
    """A Path from ``"X <- U -> Y"`` (written out here, not with the parser under test)."""
    toks = text.split()
    return Path(tuple(toks[0::2]), tuple(toks[1::2]))


def dag(
    *edges: str, nodes: str = "", bidirected: tuple[str, ...] = (), kind: str | None = None
) -> CausalGraph:
    """A graph from ``"U->X"`` edge strings (and ``"X<->Y"`` bidirected ones)."""
    directed = {tuple(e.split("->")) for e in edges}
    bi = {tuple(e.split("<->")) for e in bidirected}
    names = set(nodes.split()) | {v for e in directed | bi for v in e}
    k = kind or ("ADMG" if bi else "DAG")
    return CausalGraph(k, tuple(sorted(names)), frozenset(directed), frozenset(bi)).validate()


# =============================================================================================
# 1. parse_claim
U_SET = frozenset({"U"})
EMPTY = frozenset()

CLAIMS = [
    # path status
    (
        "backdoor path X <- U -> Y is blocked given {U}",
        "path",
        (P("X <- U -> Y"), "blocked", U_SET, "backdoor"),
    ),
    (
        "So backdoor path X <- U -> Y is blocked given {U}.",
        "path",
        (P("X <- U -> Y"), "blocked", U_SET, "backdoor"),
    ),
    ("hence back-door path X ← U → Y is open given ∅", "path", (P("X <- U -> Y"), "open", EMPTY, "backdoor")),
    (
        "thus, Back-Door Path X←U→Y is unblocked given {}",
        "path",
        (P("X <- U -> Y"), "open", EMPTY, "backdoor"),
    ),
    ("path X ↔ Y is open given {}", "path", (P("X <-> Y"), "open", EMPTY, "")),
    ("path X <-> W -> Y is active given { }", "path", (P("X <-> W -> Y"), "open", EMPTY, "")),
    (
        "path X -> M -> Y is blocked given {M} ; M is a conditioned chain node",
        "path",
        (P("X -> M -> Y"), "blocked", frozenset({"M"}), ""),
    ),
    (
        "THEREFORE PATH X --> M <-- Y IS INACTIVE GIVEN {U,V}",
        "path",
        (P("X -> M <- Y"), "blocked", frozenset({"U", "V"}), ""),
    ),
    ("and path X->M->Y is open given {U V}", "path", (P("X -> M -> Y"), "open", frozenset({"U", "V"}), "")),
    ("directed path X -> M -> Y is open given {}", "path", (P("X -> M -> Y"), "open", EMPTY, "directed")),
    (
        "then path Z_1 <- V10 -> Y2 is blocked given {V10}.",
        "path",
        (P("Z_1 <- V10 -> Y2"), "blocked", frozenset({"V10"}), ""),
    ),
    # directed path
    ("directed path X -> M -> Y", "directed", (P("X -> M -> Y"),)),
    ("so directed path X → M → Y.", "directed", (P("X -> M -> Y"),)),
    ("Directed Path X -> Y ; the direct edge", "directed", (P("X -> Y"),)),
    # no path
    ("no backdoor path from X to Y", "no_path", ("X", "Y", "backdoor")),
    ("there is no back-door path from X to Y.", "no_path", ("X", "Y", "backdoor")),
    ("so there is no directed path from X to Y", "no_path", ("X", "Y", "directed")),
    ("No path between X and Y", "no_path", ("X", "Y", "")),
    ("hence no path from A1 to B_2 ; they are in different components", "no_path", ("A1", "B_2", "")),
    # descendant
    ("U is not a descendant of X", "descendant", ("U", "X", False)),
    ("so M is a descendant of X.", "descendant", ("M", "X", True)),
    ("M IS AN DESCENDANT OF X", "descendant", ("M", "X", True)),
    # descendant / parent sets
    ("descendants of X = {M, Y}", "family", ("descendants", "X", frozenset({"M", "Y"}))),
    ("descendants of X: {M,Y}", "family", ("descendants", "X", frozenset({"M", "Y"}))),
    ("hence descendants of X are ∅", "family", ("descendants", "X", EMPTY)),
    ("Descendants of X = {}.", "family", ("descendants", "X", EMPTY)),
    ("parents of X = {U}", "family", ("parents", "X", U_SET)),
    ("parents of Y are {U, M} ; from the edge list", "family", ("parents", "Y", frozenset({"U", "M"}))),
    # separation
    (
        "{X} and Y are m-separated given {M}",
        "separation",
        (frozenset("X"), frozenset("Y"), frozenset("M"), True),
    ),
    ("X and Y are not d-separated given {}", "separation", (frozenset("X"), frozenset("Y"), EMPTY, False)),
    (
        "so {X, W} and {Y} are D-separated given ∅.",
        "separation",
        (frozenset({"X", "W"}), frozenset("Y"), EMPTY, True),
    ),
    # cycle
    ("cycle A -> B -> C -> A", "cycle", (P("A -> B -> C -> A"),)),
    ("directed cycle A → B → A.", "cycle", (P("A -> B -> A"),)),
    ("hence cycle B->C->A->B ; rotated", "cycle", (P("B -> C -> A -> B"),)),
    # edge
    ("edge U -> X", "edge", (P("U -> X"),)),
    ("edge U <-> X", "edge", (P("U <-> X"),)),
    ("so edge X ← U.", "edge", (P("X <- U"),)),
    ("Edge U ↔ X", "edge", (P("U <-> X"),)),
    # probabilities
    ("P(U=1) = 0.300", "prob", ((("U", 1),), (), 0.3)),
    ("P(Y=1 | X=1, U=0) = 0.412", "prob", ((("Y", 1),), (("X", 1), ("U", 0)), 0.412)),
    ("so P(Y = 1|X = 0) = .5.", "prob", ((("Y", 1),), (("X", 0),), 0.5)),
    ("P(U=0, W=1) = 4.2e-1 ; the joint", "prob", ((("U", 0), ("W", 1)), (), 0.42)),
    # effect
    ("ψ = 0.120 × 0.300 + 0.200 × 0.700 = 0.176", "psi", (0.176,)),
    ("psi = 0.1", "psi", (0.1,)),
    ("so ATE = -0.05.", "psi", (-0.05,)),
    ("ψ = (0.500 − 0.100) × 0.700 + (0.800 − 0.300) × 0.300 = 0.430", "psi", (0.43,)),
]


@pytest.mark.parametrize(("line", "kind", "args"), CLAIMS, ids=[c[0][:40] for c in CLAIMS])
def test_parse_claim_every_kind_and_spelling(line, kind, args):
    claim = parse_claim(line, 7)
    assert claim is not None, line
    assert (claim.kind, claim.line) == (kind, 7)
    if kind == "prob":
        assert claim.args[:2] == args[:2] and claim.args[2] == pytest.approx(args[2])
    elif kind == "psi":
        assert claim.args[0] == pytest.approx(args[0])
    else:
        assert claim.args == args


PROSE = [
    "",
    "   ",
    "; only a comment",
    "the path is blocked, I think",
    "path X -> Y exists",
    "path is open given {}",
    "the backdoor path X <- U -> Y is blocked given {U}",  # a leading word outside the grammar
    "a path X -> Y is open given {}",
    "andpath X -> Y is open given {}",
    "path X <- U -> Y is blocked by U, a non-collider that is conditioned on",
    "path X <- U -> Y is blocked given U",  # the given set must be written as a set
    "X <- U -> Y is blocked given {U}",
    "there is a directed path from X to Y",
    "no path from X",
    "no path from X to Y because of the colliders",
    "descendants of X include M",
    "the descendants of X are {M}",
    "descendants of X = M",
    "M is a descendant",
    "X and Y are d-separated",
    "X and Y are independent given {U}",
    "X and Y are d-separated given M",
    "edges at the query nodes: X -> Y",
    "the edge X -> Y",
    "edgecase handling",
    "cycles are absent in a DAG",
    "P(Y=1 | do(X=1)) = 0.3",
    "P(U=1) is 0.3",
    "ψ ≈ 0.176",
    "we compute the ate = 0.5",
    "so {U} satisfies the backdoor criterion for X and Y",
    "so {U, M} d-separates X and Y",
    "every variable that is not X, Y or a descendant of X is included",
    "0.176 > threshold 0.1, so the answer is yes",
    "so intervening on X can change Y: yes",
    "path X <- U -> Y is blocked given {U; V}",  # ';' starts a comment, the set never closes
    "path " + " -> ".join(f"V{i}" for i in range(400)) + " is open given {}",  # over MAX_LINE_CHARS
]


@pytest.mark.parametrize("line", PROSE, ids=[p[:40] or "empty" for p in PROSE])
def test_prose_is_not_a_claim(line):
    assert parse_claim(line) is None
    assert (
        check_derivation([line], "backdoor_set", {"treatment": "X", "outcome": "Y"}, set(), BD).claims == []
    )


def test_overlong_line_is_prose_by_the_cap():
    assert len(PROSE[-1]) > MAX_LINE_CHARS


MALFORMED = [
    "path X -> -> Y is open given {}",
    "backdoor path X <- U -> Y is blocked given {U-V}",
    "path X <- U -> Y is blocked given {U, V!}",
    "path X <- U -> Y? is blocked given {U}",
    "directed path X -> ?? -> Y",
    "directed path X ->",
    "descendants of X = {M, Y!}",
    "parents of X = {U V W-}",
    "{X, Y!} and Z are d-separated given {}",
    "X and Y are d-separated given {M, #}",
    "cycle A -> B ->",
    "cycle A - B - A",
    "edge A -> B -> C",
    "edge A",
    "edge A B",
    "P(Y=2) = 0.3",
    "P(Y=1, Y=0) = 0.3",
    "P(Y=1 | ) = 0.3",
    "P(Y) = 0.3",
    "P(Y=1) = 1e999",
    "ψ = 1e999",
]


@pytest.mark.parametrize("line", MALFORMED)
def test_malformed_claims_are_false_claims(line):
    claim = parse_claim(line, 3)
    assert claim is not None and claim.kind == "malformed", (line, claim)
    report = check_derivation(["prose first", line], "backdoor_set", {"treatment": "X", "outcome": "Y"},
                              {"U"}, BD)  # fmt: skip
    assert [n for n, _ in report.false] == [2] and not report.passed
    assert report.reason().startswith("DERIVATION line 2 is false")


def test_parse_claims_numbers_lines_skips_non_strings_and_caps_lines():
    lines = ["prose", "edge U -> X", None, 5, "U is not a descendant of X"]
    claims = parse_claims(lines)
    assert [(c.line, c.kind) for c in claims] == [(2, "edge"), (5, "descendant")]
    many = ["edge U -> X"] * (MAX_CLAIM_LINES + 50)
    assert len(parse_claims(many)) == MAX_CLAIM_LINES


def test_prob_claims_take_a_capitalised_lead_like_other_claims():
    # spec: "keywords in any case; an optional leading so/hence/..." (other kinds take "So ...")
    assert parse_claim("So edge U -> X") is not None
    assert parse_claim("So ψ = 0.1") is not None
    assert parse_claim("So P(U=1) = 0.3").kind == "prob"


# =============================================================================================
# 2. truth of single claims against an independent networkx oracle
class Oracle:
    """Ground truth for single claims, from networkx and the definitions (not from faithgrpo)."""

    def __init__(self, g: CausalGraph, cpts: dict | None = None):
        self.g, self.cpts = g, cpts
        self.nodes = set(g.nodes)
        self.D = nx.DiGraph()
        self.D.add_nodes_from(g.nodes)
        self.D.add_edges_from(g.directed)
        self.bi = {frozenset(e) for e in g.bidirected}
        self.S = nx.Graph()
        self.S.add_nodes_from(g.nodes)
        self.S.add_edges_from(g.directed)
        self.S.add_edges_from(g.bidirected)
        # the latent-parent DAG: each a <-> b becomes a <- L -> b (m-separation = d-separation here)
        self.L = self.D.copy()
        for i, (a, b) in enumerate(sorted(g.bidirected)):
            self.L.add_edges_from([(f"_L{i}", a), (f"_L{i}", b)])
        self._joint = None
        self._all = None

    # -- graph facts
    def edge(self, a: str, mark: str, b: str) -> bool:
        if mark == "->":
            return self.D.has_edge(a, b)
        if mark == "<-":
            return self.D.has_edge(b, a)
        return frozenset((a, b)) in self.bi

    def desc(self, v: str) -> set[str]:
        """Nodes at the end of a directed path of length >= 1 from v (v itself when on a cycle)."""
        out: set[str] = set()
        for c in self.D.successors(v):
            out |= {c} | nx.descendants(self.D, c)
        return out

    def is_path(self, nodes, marks) -> bool:
        return (
            len(nodes) >= 2
            and set(nodes) <= self.nodes
            and len(set(nodes)) == len(nodes)
            and all(self.edge(a, m, b) for a, m, b in zip(nodes, marks, nodes[1:]))
        )

    def is_open(self, nodes, marks, z) -> bool:
        """d-/m-connection by the definition: no non-collider in Z, every collider in An(Z) or Z."""
        for i in range(1, len(nodes) - 1):
            v = nodes[i]
            head_left = marks[i - 1] in ("->", "<->")  # arrowhead at v from the left edge
            head_right = marks[i] in ("<-", "<->")  # arrowhead at v from the right edge
            if head_left and head_right:
                if v not in z and not (self.desc(v) & set(z)):
                    return False
            elif v in z:
                return False
        return True

    def all_paths(self) -> list[tuple[tuple, tuple]]:
        """Simple paths between all ordered pairs (up to 30 per pair), cached."""
        if self._all is None:
            self._all = [
                p for x in sorted(self.nodes) for y in sorted(self.nodes) for p in self.paths(x, y, 30)
            ]
        return self._all

    def paths(self, x: str, y: str, limit: int | None = 400) -> list[tuple[tuple, tuple]]:
        """Simple mixed paths x ... y (nodes, marks), by brute-force DFS."""
        out = []
        steps = {v: [] for v in self.nodes}
        for a, b in self.g.directed:
            steps[a].append(("->", b))
            steps[b].append(("<-", a))
        for a, b in self.g.bidirected:
            steps[a].append(("<->", b))
            steps[b].append(("<->", a))

        def walk(nodes, marks):
            if limit is not None and len(out) >= limit:
                return
            for m, w in steps[nodes[-1]]:
                if w in nodes:
                    continue
                if w == y:
                    out.append(((*nodes, w), (*marks, m)))
                else:
                    walk((*nodes, w), (*marks, m))

        if x != y:
            walk((x,), ())
        return out

    # -- claims
    def path_status(self, nodes, marks, status, z, prefix) -> bool:
        if not self.is_path(nodes, marks) or not set(z) <= self.nodes:
            return False
        if prefix == "backdoor" and marks[0] not in ("<-", "<->"):
            return False
        if prefix == "directed" and set(marks) != {"->"}:
            return False
        return ("open" if self.is_open(nodes, marks, z) else "blocked") == status

    def directed(self, nodes, marks) -> bool:
        return self.is_path(nodes, marks) and set(marks) == {"->"}

    def no_path(self, x, y, prefix) -> bool:
        if not {x, y} <= self.nodes or x == y:
            return False
        if prefix == "directed":
            return y not in self.desc(x)
        if prefix == "backdoor":
            starts = set(self.D.predecessors(x)) | {w for e in self.bi if x in e for w in e if w != x}
            rest = self.S.subgraph(self.nodes - {x})
            return not any(w == y or nx.has_path(rest, w, y) for w in starts)
        return not nx.has_path(self.S, x, y)

    def descendant(self, v, of, positive) -> bool:
        return {v, of} <= self.nodes and (v in self.desc(of)) == positive

    def family(self, rel, v, members) -> bool:
        if not {v, *members} <= self.nodes:
            return False
        actual = self.desc(v) if rel == "descendants" else set(self.D.predecessors(v))
        return actual == set(members)

    def separation(self, xs, ys, z, positive) -> bool:
        if not (set(xs) | set(ys) | set(z)) <= self.nodes:
            return False
        return nx.is_d_separator(self.L, set(xs), set(ys), set(z)) == positive

    def cycle(self, nodes, marks) -> bool:
        return (
            len(nodes) >= 3
            and nodes[0] == nodes[-1]
            and set(nodes) <= self.nodes
            and len(set(nodes[:-1])) == len(nodes) - 1
            and set(marks) == {"->"}
            and all(self.D.has_edge(a, b) for a, b in itertools.pairwise(nodes))
        )

    def joint(self) -> list[tuple[dict, float]]:
        if self._joint is None:
            names = sorted(self.cpts)
            self._joint = []
            for values in itertools.product((0, 1), repeat=len(names)):
                a = dict(zip(names, values))
                p = 1.0
                for v in names:
                    p1 = self.cpts[v]["p1"][",".join(str(a[u]) for u in self.cpts[v]["parents"])]
                    p *= p1 if a[v] else 1.0 - p1
                self._joint.append((a, p))
        return self._joint

    def mass(self, event: dict) -> float:
        return sum(p for a, p in self.joint() if all(a[k] == v for k, v in event.items()))

    def prob_value(self, target: dict, cond: dict) -> float:
        return self.mass({**target, **cond}) / self.mass(cond)

    def prob(self, target: dict, cond: dict, value: float) -> bool:
        if self.cpts is None or not (set(target) | set(cond)) <= self.nodes:
            return False
        return abs(self.prob_value(target, cond) - value) <= PROB_TOLERANCE


POOL = ["U", "X", "Y", "M", "W", "Z1", "V_2", "B3", "K"]
UNKNOWN = "Q9"


def random_graph(rng: random.Random, kind: str) -> CausalGraph:
    n = rng.randint(3, 7)
    names = rng.sample(POOL, n)
    order = names[:]
    rng.shuffle(order)
    p = rng.uniform(0.25, 0.6)
    directed = {(order[i], order[j]) for i in range(n) for j in range(i + 1, n) if rng.random() < p}
    bidirected = set()
    if kind == "ADMG":
        for _ in range(rng.randint(1, 3)):
            bidirected.add(tuple(rng.sample(order, 2)))
    if kind == "DG":
        for _ in range(rng.randint(1, 2)):
            i, j = sorted(rng.sample(range(n), 2))
            directed.add((order[j], order[i]))
    return CausalGraph(kind, tuple(names), frozenset(directed), frozenset(bidirected)).validate()


def random_cpts(g: CausalGraph, rng: random.Random) -> dict:
    cpts = {}
    for v in g.nodes:
        parents = sorted(g.parents(v))
        keys = [",".join(map(str, bits)) for bits in itertools.product((0, 1), repeat=len(parents))]
        cpts[v] = {"parents": parents, "p1": {k: round(rng.uniform(0.05, 0.95), 3) for k in keys}}
    return cpts


_ARROWS = {"->": ("->", "→", "-->"), "<-": ("<-", "←", "<--"), "<->": ("<->", "↔")}


class Writer:
    """Random spellings of claims: case of keywords, lead words, comments, arrows, sets."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def kw(self, words: str) -> str:
        return self.rng.choice((str.lower, str.upper, str.capitalize, str.lower))(words)

    def lead(self, lower_only: bool = False) -> str:
        leads = ["", "", "", "so ", "hence ", "thus, ", "therefore ", "then ", "and "]
        return self.rng.choice(leads) if lower_only else self.kw(self.rng.choice(leads))

    def tail(self) -> str:
        return self.rng.choice(["", "", ".", " ; because of the rule", "; note: X -> Y is {not} relevant"])

    def path(self, nodes, marks) -> str:
        sep = self.rng.choice((" ", " ", ""))
        out = [nodes[0]]
        for m, v in zip(marks, nodes[1:]):
            out += [self.rng.choice(_ARROWS[m]), v]
        return sep.join(out)

    def set(self, nodes, bare_ok: bool = False) -> str:
        nodes = list(nodes)
        self.rng.shuffle(nodes)
        if not nodes:
            return self.rng.choice(("{}", "∅", "{ }"))
        if bare_ok and len(nodes) == 1 and self.rng.random() < 0.5:
            return nodes[0]
        return "{" + self.rng.choice((", ", ",", " ")).join(nodes) + "}"


def _maybe_unknown(rng: random.Random, nodes: list[str], p: float = 0.05) -> list[str]:
    nodes = list(nodes)
    if nodes and rng.random() < p:
        nodes[rng.randrange(len(nodes))] = UNKNOWN
    return nodes


def random_claim(rng: random.Random, o: Oracle) -> tuple[str, bool]:
    """One claim line in a random spelling and the oracle's verdict on it."""
    w, g = Writer(rng), o.g
    names = list(g.nodes)
    kinds = ["path", "path", "path", "directed", "no_path", "descendant", "family", "edge", "psi"]
    kinds += ["cycle", "cycle"] if g.kind == "DG" else ["separation", "separation", "separation"]
    kinds += ["prob", "prob", "prob"] if o.cpts else []
    kind = rng.choice(kinds)

    def some_path(want: str = ""):
        """A real path (60%; backdoor/directed ones when ``want`` says so), sometimes corrupted, or a
        random walk that is usually no path at all."""
        found = o.all_paths()
        if want == "backdoor":
            found = [p for p in found if p[1][0] in ("<-", "<->")] or found
        elif want == "directed":
            found = [p for p in found if set(p[1]) == {"->"}] or found
        if found and rng.random() < 0.6:
            nodes, marks = rng.choice(found)
            nodes, marks = list(nodes), list(marks)
            if rng.random() < 0.15:  # flip one mark: usually not an edge any more
                i = rng.randrange(len(marks))
                marks[i] = rng.choice([m for m in _ARROWS if m != marks[i]])
            if rng.random() < 0.1:  # read it from the other end
                nodes = nodes[::-1]
                marks = [{"->": "<-", "<-": "->", "<->": "<->"}[m] for m in reversed(marks)]
            return _maybe_unknown(rng, nodes), marks
        k = rng.randint(2, 5)  # a random walk, possibly repeating nodes / using non-edges
        nodes = [rng.choice(names) for _ in range(k)]
        marks = [rng.choice(list(_ARROWS)) for _ in range(k - 1)]
        return _maybe_unknown(rng, nodes), marks

    if kind == "path":
        prefix = rng.choice(("", "", "backdoor", "directed"))
        nodes, marks = some_path(prefix)
        others = [v for v in names if v not in (nodes[0], nodes[-1])]
        z = rng.sample(others, rng.randint(0, min(3, len(others))))
        z = _maybe_unknown(rng, z, 0.03)
        status = rng.choice(("open", "blocked"))
        if rng.random() < 0.6 and o.is_path(nodes, marks) and set(z) <= o.nodes:
            status = "open" if o.is_open(nodes, marks, z) else "blocked"  # mostly the true status
        word = rng.choice(
            {"open": ("open", "open", "unblocked", "active"), "blocked": ("blocked", "inactive")}[status]
        )
        pre = {"": "", "backdoor": rng.choice(("backdoor ", "back-door ")), "directed": "directed "}[prefix]
        text = f"{w.lead()}{w.kw(pre + 'path')} {w.path(nodes, marks)} {w.kw('is ' + word + ' given')} {w.set(z)}"
        return text + w.tail(), o.path_status(nodes, marks, status, z, prefix)
    if kind == "directed":
        nodes, marks = some_path("directed" if rng.random() < 0.8 else "")
        return f"{w.lead()}{w.kw('directed path')} {w.path(nodes, marks)}{w.tail()}", o.directed(nodes, marks)
    if kind == "no_path":
        x, y = _maybe_unknown(rng, rng.sample(names, 2))
        prefix = rng.choice(("", "backdoor", "directed"))
        pre = {"": "", "backdoor": rng.choice(("backdoor ", "back-door ")), "directed": "directed "}[prefix]
        there = rng.choice(("", "there is "))
        fr, to = rng.choice((("from", "to"), ("between", "and")))
        text = f"{w.lead()}{w.kw(there + 'no ' + pre + 'path ' + fr)} {x} {w.kw(to)} {y}"
        return text + w.tail(), o.no_path(x, y, prefix)
    if kind == "descendant":
        v, of = _maybe_unknown(rng, [rng.choice(names), rng.choice(names)])
        positive = rng.random() < 0.5
        art = rng.choice(("a", "an"))
        text = f"{w.lead()}{v} {w.kw('is ' + ('' if positive else 'not ') + art + ' descendant of')} {of}"
        return text + w.tail(), o.descendant(v, of, positive)
    if kind == "family":
        rel = rng.choice(("descendants", "parents"))
        v = rng.choice(names)
        members = set(o.desc(v) if rel == "descendants" else o.D.predecessors(v))
        if rng.random() < 0.5:  # perturb: add or drop a node
            extra = rng.choice([*names, UNKNOWN])
            members ^= {extra}
        eq = rng.choice(("=", ":", "are", " = "))
        text = f"{w.lead()}{w.kw(rel + ' of')} {v} {w.kw(eq.strip())} {w.set(members)}"
        return text + w.tail(), o.family(rel, v, members)
    if kind == "separation":
        k = len(names)
        shuffled = rng.sample(names, k)
        a = rng.randint(1, max(1, min(2, k - 1)))
        b = rng.randint(1, max(1, min(2, k - a)))
        xs, ys = shuffled[:a], shuffled[a : a + b]
        rest = shuffled[a + b :]
        z = rng.sample(rest, rng.randint(0, len(rest)))
        xs, z = _maybe_unknown(rng, xs, 0.03), _maybe_unknown(rng, z, 0.03)
        positive = rng.random() < 0.5
        sep = rng.choice(("d", "m", "D"))
        text = (
            f"{w.lead()}{w.set(xs, bare_ok=True)} {w.kw('and')} {w.set(ys, bare_ok=True)} "
            f"{w.kw('are ' + ('' if positive else 'not '))}{sep}{w.kw('-separated given')} {w.set(z)}"
        )
        return text + w.tail(), o.separation(xs, ys, z, positive)
    if kind == "cycle":
        cycles = list(itertools.islice(nx.simple_cycles(o.D), 20))
        if cycles and rng.random() < 0.7:
            c = rng.choice(cycles)
            k = rng.randrange(len(c))
            nodes = c[k:] + c[:k] + [c[k]]
            marks = ["->"] * (len(nodes) - 1)
            if rng.random() < 0.3:  # break it: drop a node or flip a mark
                if len(nodes) > 3 and rng.random() < 0.5:
                    del nodes[rng.randrange(1, len(nodes) - 1)]
                    marks.pop()
                else:
                    marks[rng.randrange(len(marks))] = "<-"
        else:
            k = rng.randint(2, 4)
            inner = [rng.choice(names) for _ in range(k)]
            nodes, marks = [*inner, inner[0]], ["->"] * k
        nodes = _maybe_unknown(rng, nodes, 0.03)
        word = rng.choice(("cycle", "directed cycle"))
        return f"{w.lead()}{w.kw(word)} {w.path(nodes, marks)}{w.tail()}", o.cycle(nodes, marks)
    if kind == "edge":
        a, b = _maybe_unknown(rng, rng.sample(names, 2))
        if rng.random() < 0.5 and (g.directed or g.bidirected):
            e = rng.choice(sorted(g.directed | g.bidirected))
            a, b = e
        m = rng.choice(list(_ARROWS))
        return f"{w.lead()}{w.kw('edge')} {w.path([a, b], [m])}{w.tail()}", o.edge(a, m, b) and {
            a,
            b,
        } <= o.nodes
    if kind == "psi":  # its value is checked against the certified set; alone it needs CPTs
        value = round(rng.uniform(-1, 1), 3)
        word = rng.choice(("ψ", "psi", "ATE"))
        return (
            f"{w.lead()}{word} = {rng.choice(('', '0.1 × 0.2 + 0.3 = '))}{value}{w.tail()}",
            o.cpts is not None,
        )
    # prob: lower-case leads only (see test_prob_claims_take_a_capitalised_lead_like_other_claims)
    vs = rng.sample(names, min(len(names), rng.randint(1, 4)))
    t = rng.randint(1, min(2, len(vs)))
    target = {v: rng.randint(0, 1) for v in vs[:t]}
    cond = {v: rng.randint(0, 1) for v in vs[t:]}
    true = o.prob_value(target, cond)
    value = (
        round(true, 3)
        if rng.random() < 0.5
        else round(true + rng.choice((-1, 1)) * rng.uniform(0.01, 0.3), 3)
    )
    if rng.random() < 0.03:
        target = {UNKNOWN: 1, **target}
    sp = rng.choice(("", " "))

    def assign(d):
        return ("," + sp).join(f"{k}{sp}={sp}{v}" for k, v in d.items())

    inner = assign(target) + (f"{sp}|{sp}{assign(cond)}" if cond else "")
    text = f"{w.lead(lower_only=True)}P({inner}){sp}={sp}{value}"
    return text + rng.choice(("", " ; read off the CPTs")), o.prob(target, cond, value)


def _run_truth_cases(kind: str, seed: int, cases: int) -> int:
    rng = random.Random(seed)
    checked = 0
    for case in range(cases):
        g = random_graph(rng, kind)
        cpts = random_cpts(g, rng) if kind == "DAG" and rng.random() < 0.6 else None
        o = Oracle(g, cpts)
        lines, expected_false, claim_lines = [], set(), []
        for _ in range(rng.randint(1, 14)):
            if rng.random() < 0.15:
                lines.append(rng.choice(PROSE[3:-1]))
            text, true = random_claim(rng, o)
            lines.append(rng.choice(("", "", "  ")) + text)
            claim_lines.append(len(lines))
            if not true:
                expected_false.add(len(lines))
        x, y = rng.sample(list(g.nodes), 2)
        report = check_derivation(lines, "directed_path", {"kind": "directed_path", "treatment": x, "outcome": y},
                                  True, g, cpts)  # fmt: skip
        context = f"seed={seed} case={case} graph={g.to_dict()} cpts={cpts}"
        assert [c.line for c in report.claims] == claim_lines, (context, lines)
        got = {n for n, _ in report.false}
        if got != expected_false:
            diff = sorted(got ^ expected_false)
            shown = [(n, lines[n - 1], "checker: " + ("false" if n in got else "true")) for n in diff]
            reasons = dict(report.false)
            raise AssertionError(f"{context}\n" + "\n".join(f"{s} {reasons.get(s[0], '')}" for s in shown))
        checked += len(claim_lines)
    return checked


@pytest.mark.parametrize("kind", ["DAG", "ADMG", "DG"])
@pytest.mark.parametrize("seed", [0, 1])
def test_claim_truth_matches_networkx_oracle(kind, seed):
    checked = _run_truth_cases(kind, 100 * seed + len(kind), cases=150)
    assert checked >= 500


@pytest.mark.parametrize("kind", ["DAG", "ADMG"])
def test_oracle_path_rule_agrees_with_networkx_d_separation(kind):
    # the oracle's path-blocking rule, summed over all paths, is networkx's d-separation on the
    # latent-parent DAG: the oracle the truth test uses is itself right
    rng = random.Random(5)
    for _ in range(150):
        g = random_graph(rng, kind)
        o = Oracle(g)
        x, y = rng.sample(list(g.nodes), 2)
        rest = [v for v in g.nodes if v not in (x, y)]
        z = set(rng.sample(rest, rng.randint(0, len(rest))))
        all_blocked = not any(o.is_open(n, m, z) for n, m in o.paths(x, y, limit=None))
        assert all_blocked == nx.is_d_separator(o.L, {x}, {y}, z), (g.to_dict(), x, y, z)


def test_claim_conventions_spelled_out():
    g = dag("U->X", "U->Y", "X->M", "M->Y")
    q = {"kind": "backdoor_set", "treatment": "X", "outcome": "Y"}

    def false_lines(*lines):
        return [n for n, _ in check_derivation(list(lines), "backdoor_set", q, {"U"}, g).false]

    # a given set holding an endpoint is not a d-separation statement about that path: false
    assert false_lines("path X <- U -> Y is blocked given {X, U}") == [1]
    # a node of no graph: false, not prose
    assert false_lines(
        "Q is not a descendant of X", "edge Q -> X", "path X <- U -> Y is blocked given {Q}"
    ) == [1, 2, 3]
    # the same node at both ends of a no-path claim
    assert false_lines("no path from X to X") == [1]
    # repeated node
    assert false_lines("path X -> M -> Y <- U -> X is open given {}") == [1]
    # backdoor needs an arrowhead into the first node; directed needs every edge forward
    assert false_lines("backdoor path X -> M -> Y is open given {}") == [1]
    assert false_lines("directed path X <- U -> Y is open given {}") == [1]
    assert false_lines("directed path Y <- M <- X") == [1]
    # a directed cycle must be written forward
    c = dag("A->B", "B->C", "C->A", kind="DG")
    cq = {"kind": "cycle"}
    assert [
        n for n, _ in check_derivation(["cycle A <- C <- B <- A"], "cycle", cq, ("A", "B", "C"), c).false
    ] == [1]
    # separation on a cyclic graph is not defined here: false
    assert [
        n
        for n, _ in check_derivation(
            ["A and B are d-separated given {}"], "cycle", cq, ("A", "B", "C"), c
        ).false
    ] == [1]


def test_degenerate_claims_are_false():
    # a path joins two distinct nodes (criteria.is_path agrees): a one-node "path" is no true claim;
    # a ψ claim needs CPTs to be computed from
    g = dag("U->X", "U->Y", "X->M", "M->Y")
    q = {"kind": "backdoor_set", "treatment": "X", "outcome": "Y"}
    for line in (
        "path X is open given {}",
        "directed path X",
        "backdoor path X is blocked given {}",
        "ψ = 0.1",
    ):
        assert [n for n, _ in check_derivation([line], "backdoor_set", q, {"U"}, g).false] == [1], line


def test_prob_claims_zero_probability_condition_and_missing_cpts():
    g = dag("X->Y")
    cpts = {"X": {"parents": [], "p1": {"": 0.0}}, "Y": {"parents": ["X"], "p1": {"0": 0.2, "1": 0.9}}}
    q = {"kind": "directed_path", "treatment": "X", "outcome": "Y"}
    r = check_derivation(
        ["P(Y=1 | X=1) = 0.9", "P(Y=1 | X=0) = 0.2", "P(X=1) = 0"], "directed_path", q, True, g, cpts
    )
    assert [n for n, _ in r.false] == [1]  # P(X=1) = 0: the conditional is undefined
    r = check_derivation(["P(Y=1) = 0.2"], "directed_path", q, True, g, None)
    assert [n for n, _ in r.false] == [1]
    # tolerance: within PROB_TOLERANCE is true, beyond it false
    r = check_derivation([f"P(Y=1) = {0.2 + PROB_TOLERANCE * 0.9}", f"P(Y=1) = {0.2 + PROB_TOLERANCE * 1.5}"],
                         "directed_path", q, True, g, cpts)  # fmt: skip
    assert [n for n, _ in r.false] == [2]


def test_prob_claims_need_cpts_that_fit_the_graph():
    # The CPTs belong to the problem's graph. On a verification graph they do not fit (the trace's own
    # GRAPH under verify_on="trace"), probabilities and ψ cannot be read from them: here the trace
    # drops U's edges, so "no backdoor path" is true on its graph and the unadjusted contrast
    # (0.552, true effect 0.43) would be certified as ψ.
    cpts = {
        "U": {"parents": [], "p1": {"": 0.3}},
        "X": {"parents": ["U"], "p1": {"0": 0.2, "1": 0.7}},
        "Y": {"parents": ["U", "X"], "p1": {"0,0": 0.1, "0,1": 0.5, "1,0": 0.3, "1,1": 0.8}},
    }
    trace_graph = dag("X->Y", nodes="U")
    lines = ["no backdoor path from X to Y", "P(Y=1 | X=1) = 0.680", "P(Y=1 | X=0) = 0.128", "ψ = 0.552"]
    q = {"kind": "ate", "treatment": "X", "outcome": "Y", "threshold": 0.2, "margin": 0.05}
    r = check_derivation(lines, "ate", q, (True, 0.552), trace_graph, cpts, ate_set=frozenset())
    assert not r.passed  # the CPTs belong to another graph: their numbers verify nothing here
    assert {n for n, _ in r.false} >= {2, 3}


# =============================================================================================
# 3. certification per query kind
BD = dag("U->X", "U->Y", "V->X", "V->Y", "X->M", "M->Y")  # two backdoor paths, one mediator
DS = dag("X->M", "M->Y", "C->X", "C->Y", "X->K", "Y->K")  # chain, fork, collider between X and Y
FD = dag("X->M", "M->Y", bidirected=("X<->Y",))  # the front-door graph
MS = dag("X->M", "W->Y", bidirected=("M<->Y", "X<->W"))
CY = dag("A->B", "B->C", "C->A", "D->C", kind="DG")
BM = dag("U->X", "U->Y", "X->Y", bidirected=("X<->C", "C<->Y"))  # C: a collider, not addable to {U}
BM2 = dag("X->Y", bidirected=("X<->B", "B<->A", "A<->Y"))  # two maximal backdoor sets, {A} and {B}
FD2 = dag("X->A", "A->Y", "X->B", "B->Y", bidirected=("X<->Y",))  # {A, B} is minimal: two routes
FDM = dag("X->M", "M->Y", "W->X", bidirected=("X<->Y", "S<->Y"))  # W breaks (ii), S breaks (iii)
ATE_G = dag("U->X", "U->Y", "X->Y")
ATE_CPTS = {
    "U": {"parents": [], "p1": {"": 0.3}},
    "X": {"parents": ["U"], "p1": {"0": 0.2, "1": 0.7}},
    "Y": {"parents": ["U", "X"], "p1": {"0,0": 0.1, "0,1": 0.5, "1,0": 0.3, "1,1": 0.8}},
}
ATE_Q = {"kind": "ate", "treatment": "X", "outcome": "Y", "threshold": 0.2, "margin": 0.05, "tolerance": 0.01}
ATE_LINES = [
    "U is not a descendant of X",
    "backdoor path X <- U -> Y is blocked given {U}",
    "P(U=0) = 0.700",
    "P(U=1) = 0.300",
    "P(Y=1 | X=1, U=0) = 0.500",
    "P(Y=1 | X=0, U=0) = 0.100",
    "P(Y=1 | U=1, X=1) = 0.800",  # any order of the conditioning variables
    "P(Y=1 | X=0, U=1) = 0.300",
    "ψ = (0.500 − 0.100) × 0.700 + (0.800 − 0.300) × 0.300 = 0.430",
]

# (id, graph, kind, query, value, required claims, cpts, ate_set); every certificate also gets a
# true but irrelevant claim and a prose line, so dropping a required claim leaves claims behind.
CERTIFICATES = [
    (
        "backdoor_any",
        BD,
        "backdoor_set",
        {"treatment": "X", "outcome": "Y"},
        {"U", "V"},
        [
            "U is not a descendant of X",
            "V is not a descendant of X",
            "backdoor path X <- U -> Y is blocked given {U, V}",
            "backdoor path X <- V -> Y is blocked given {U, V}",
        ],
    ),
    (
        "backdoor_any_descendant_set",
        BD,
        "backdoor_set",
        {"treatment": "X", "outcome": "Y"},
        {"U", "V"},
        [
            "descendants of X = {M, Y}",
            "path Y <- U -> X is blocked given {U, V}",
            "backdoor path X <- V -> Y is blocked given {V, U}",
        ],
    ),
    (
        "backdoor_minimal",
        BD,
        "backdoor_set",
        {"treatment": "X", "outcome": "Y", "variant": "minimal"},
        {"U", "V"},
        [
            "U is not a descendant of X",
            "V is not a descendant of X",
            "backdoor path X <- U -> Y is blocked given {U, V}",
            "backdoor path X <- V -> Y is blocked given {U, V}",
            "backdoor path X <- U -> Y is open given {V}",
            "backdoor path X <- V -> Y is open given {U}",
        ],
    ),
    (
        "backdoor_maximal",
        BD,
        "backdoor_set",
        {"treatment": "X", "outcome": "Y", "variant": "maximal"},
        {"U", "V"},
        [
            "descendants of X = {M, Y}",
            "backdoor path X <- U -> Y is blocked given {U, V}",
            "backdoor path X <- V -> Y is blocked given {U, V}",
        ],
    ),
    (
        "backdoor_maximal_admg",
        BM,
        "backdoor_set",
        {"treatment": "X", "outcome": "Y", "variant": "maximal"},
        {"U"},
        [
            "descendants of X = {Y}",
            "backdoor path X <- U -> Y is blocked given {U}",
            "backdoor path X <-> C <-> Y is blocked given {U}",
            "backdoor path X <-> C <-> Y is open given {C, U}",
        ],
    ),
    (
        "backdoor_maximal_admg_one_of_two",
        BM2,
        "backdoor_set",
        {"treatment": "X", "outcome": "Y", "variant": "maximal"},
        {"A"},
        [
            "descendants of X = {Y}",
            "backdoor path X <-> B <-> A <-> Y is blocked given {A}",
            "backdoor path X <-> B <-> A <-> Y is open given {A, B}",
        ],
    ),
    (
        "backdoor_no_path",
        dag("X->M", "M->Y", "W->Y"),
        "backdoor_set",
        {"treatment": "X", "outcome": "Y"},
        {"W"},
        ["W is not a descendant of X", "no backdoor path from X to Y"],
    ),
    (
        "frontdoor",
        FD,
        "frontdoor_set",
        {"treatment": "X", "outcome": "Y"},
        {"M"},
        [
            "directed path X -> M -> Y",
            "backdoor path X <-> Y <- M is blocked given {}",
            "backdoor path M <- X <-> Y is blocked given {X}",
        ],
    ),
    (
        "frontdoor_minimal",
        FD2,
        "frontdoor_set",
        {"treatment": "X", "outcome": "Y", "variant": "minimal"},
        {"A", "B"},
        [
            "directed path X -> A -> Y",
            "directed path X -> B -> Y",
            "backdoor path X <-> Y <- A is blocked given {}",
            "backdoor path X <-> Y <- B is blocked given {}",
            "backdoor path A <- X -> B -> Y is blocked given {X}",
            "backdoor path A <- X <-> Y is blocked given {X}",
            "backdoor path B <- X -> A -> Y is blocked given {X}",
            "backdoor path B <- X <-> Y is blocked given {X}",
        ],
    ),
    (
        "frontdoor_maximal",
        FDM,
        "frontdoor_set",
        {"treatment": "X", "outcome": "Y", "variant": "maximal"},
        {"M"},
        [
            "directed path X -> M -> Y",
            "backdoor path X <-> Y <- M is blocked given {}",
            "backdoor path M <- X <-> Y is blocked given {X}",
            "backdoor path X <- W is open given {}",
            "backdoor path S <-> Y is open given {X}",
        ],
    ),
    (
        "frontdoor_no_backdoor",
        dag("X->M", "M->Y"),
        "frontdoor_set",
        {"treatment": "X", "outcome": "Y"},
        {"M"},
        ["directed path X -> M -> Y", "no backdoor path from X to M", "no backdoor path from M to Y"],
    ),
    (
        "dsep",
        DS,
        "dsep_set",
        {"x": "X", "y": "Y"},
        {"M", "C"},
        [
            "path X -> M -> Y is blocked given {C, M}",
            "path X <- C -> Y is blocked given {C, M}",
            "path X -> K <- Y is blocked given {C, M}",
        ],
    ),
    (
        "dsep_minimal",
        DS,
        "dsep_set",
        {"x": "X", "y": "Y", "variant": "minimal"},
        {"M", "C"},
        [
            "path X -> M -> Y is blocked given {C, M}",
            "path X <- C -> Y is blocked given {C, M}",
            "path Y -> K <- X is blocked given {C, M}",
            "path X -> M -> Y is open given {C}",
            "path X <- C -> Y is open given {M}",
        ],
    ),
    (
        "dsep_disconnected",
        dag("X->A", "Y->B"),
        "dsep_set",
        {"x": "X", "y": "Y"},
        set(),
        ["X and Y are d-separated given {}"],
    ),
    (
        "msep",
        MS,
        "msep_set",
        {"x": "X", "y": "Y"},
        {"W"},
        ["path X -> M <-> Y is blocked given {W}", "path X <-> W -> Y is blocked given {W}"],
    ),
    (
        "ci_yes",
        DS,
        "ci_test",
        {"x": "X", "y": "Y", "given": ["M", "C"]},
        True,
        [
            "path X -> M -> Y is blocked given {C, M}",
            "path X <- C -> Y is blocked given {C, M}",
            "path X -> K <- Y is blocked given {C, M}",
        ],
    ),
    (
        "ci_no",
        DS,
        "ci_test",
        {"x": "X", "y": "Y", "given": ["K"]},
        False,
        ["path X -> K <- Y is open given {K}"],
    ),
    (
        "directed_yes",
        DS,
        "directed_path",
        {"treatment": "X", "outcome": "Y"},
        True,
        ["directed path X -> M -> Y"],
    ),
    (
        "directed_no",
        DS,
        "directed_path",
        {"treatment": "Y", "outcome": "X"},
        False,
        ["no directed path from Y to X"],
    ),
    (
        "directed_no_descendants",
        DS,
        "directed_path",
        {"treatment": "Y", "outcome": "X"},
        False,
        ["descendants of Y = {K}"],
    ),
    ("mediator", BD, "mediator", {"treatment": "X", "outcome": "Y"}, "M", ["directed path X -> M -> Y"]),
    (
        "mediator_two_halves",
        BD,
        "mediator",
        {"treatment": "X", "outcome": "Y"},
        "M",
        ["directed path X -> M", "directed path M -> Y"],
    ),
    ("cycle", CY, "cycle", {}, ("A", "B", "C"), ["cycle A -> B -> C -> A"]),
    ("cycle_rotated", CY, "cycle", {}, ("A", "B", "C"), ["cycle C -> A -> B -> C"]),
    ("ate", ATE_G, "ate", ATE_Q, (True, 0.43), ATE_LINES),
    (
        "ate_empty_set",
        dag("X->Y"),
        "ate",
        {**ATE_Q, "threshold": 0.1},
        (True, 0.3),
        [
            "no backdoor path from X to Y",
            "P(Y=1 | X=1) = 0.600",
            "P(Y=1 | X=0) = 0.300",
            "ψ = 0.600 − 0.300 = 0.300",
        ],
    ),
]
_EXTRA_CPTS = {
    "ate": ATE_CPTS,
    "ate_empty_set": {
        "X": {"parents": [], "p1": {"": 0.4}},
        "Y": {"parents": ["X"], "p1": {"0": 0.3, "1": 0.6}},
    },
}
_ATE_SETS = {"ate": frozenset({"U"}), "ate_empty_set": frozenset()}


def _check(cid, g, kind, query, value, lines, **kw):
    return check_derivation(lines, kind, {"kind": kind, **query}, value, g, _EXTRA_CPTS.get(cid),
                            ate_set=_ATE_SETS.get(cid), **kw)  # fmt: skip


def _filler(g: CausalGraph) -> str:
    a, b = sorted(g.directed)[0]
    return f"edge {a} -> {b}"


@pytest.mark.parametrize(("cid", "g", "kind", "query", "value", "required"), CERTIFICATES,
                         ids=[c[0] for c in CERTIFICATES])  # fmt: skip
def test_complete_certificate_passes_and_every_claim_is_required(cid, g, kind, query, value, required):
    lines = ["first, the claims", _filler(g), *required, "so that settles it"]
    report = _check(cid, g, kind, query, value, lines)
    assert report.passed, report.reason()
    for claim in required:
        rest = [line for line in lines if line != claim]
        report = _check(cid, g, kind, query, value, rest)
        assert not report.false, (claim, report.false)
        assert report.missing is not None and not report.passed, f"{cid}: dropping {claim!r} still certifies"
        assert report.reason().startswith("DERIVATION does not certify RESULT")


def test_ate_psi_outside_tolerance_and_a_wrong_set_fail_certification():
    psi = ATE_LINES[-1]
    ok = _check("ate", ATE_G, "ate", ATE_Q, (True, 0.43), [*ATE_LINES[:-1], psi.replace("0.430", "0.436")])
    assert ok.passed  # within the query's tolerance (0.01)
    bad = _check("ate", ATE_G, "ate", ATE_Q, (True, 0.43), [*ATE_LINES[:-1], psi.replace("0.430", "0.450")])
    assert not bad.false and bad.missing and "ψ" in bad.missing
    # a second ψ claim that disagrees also fails
    two = _check("ate", ATE_G, "ate", ATE_Q, (True, 0.43), [*ATE_LINES, "psi = 0.2"])
    assert two.missing and "ψ" in two.missing
    # the unadjusted contrast is a true probability claim but not the adjustment certificate
    r = check_derivation(["no backdoor path from X to Y", "P(Y=1 | X=1) = 0.680", "P(Y=1 | X=0) = 0.128",
                          "ψ = 0.505"], "ate", ATE_Q, (True, 0.5), ATE_G, ATE_CPTS, ate_set=frozenset())  # fmt: skip
    assert [n for n, _ in r.false] == [1]


def test_wrong_results_are_not_certified_by_true_claims():
    # true claims about another answer certify nothing
    r = _check("backdoor_any", BD, "backdoor_set", {"treatment": "X", "outcome": "Y"}, {"U"},
               ["U is not a descendant of X", "backdoor path X <- U -> Y is blocked given {U}"])  # fmt: skip
    assert r.missing and "X <- V -> Y" in r.missing
    r = _check(
        "mediator", BD, "mediator", {"treatment": "X", "outcome": "Y"}, "U", ["directed path X -> M -> Y"]
    )
    assert r.missing
    r = _check("cycle", CY, "cycle", {}, ("A", "C", "B"), ["cycle A -> B -> C -> A"])
    assert r.missing
    r = check_derivation(["edge X -> M"], "no_such_kind", {}, {"U"}, BD)
    assert r.missing and not r.passed
    r = check_derivation(["edge X -> M"], "backdoor_set", {"treatment": "X", "outcome": "Y"}, None, BD)
    assert r.missing == "RESULT does not parse"


def test_frontdoor_minimality_needs_a_witness_per_member_beyond_the_cap():
    # with a cap of 1, one directed path through Z certifies condition (i), but minimality still
    # needs, for each member, a directed path that meets Z only there
    q = {"kind": "frontdoor_set", "treatment": "X", "outcome": "Y", "variant": "minimal"}
    conditions = CERTIFICATES[[c[0] for c in CERTIFICATES].index("frontdoor_minimal")][5][2:]
    one = ["directed path X -> A -> Y", *conditions]
    assert check_derivation(
        one, "frontdoor_set", {**q, "variant": "any"}, {"A", "B"}, FD2, max_paths=1
    ).passed
    r = check_derivation(one, "frontdoor_set", q, {"A", "B"}, FD2, max_paths=1)
    assert not r.false and r.missing and r.missing.startswith("minimality") and "only at B" in r.missing
    both = ["directed path X -> B -> Y", *one]
    assert check_derivation(both, "frontdoor_set", q, {"A", "B"}, FD2, max_paths=1).passed


def test_valid_but_not_minimal_or_maximal_sets_are_not_certified_by_true_claims():
    # front-door, not minimal: the one route X -> A -> B -> Y meets {A, B} at both members
    g = dag("X->A", "A->B", "B->Y", bidirected=("X<->Y",))
    q = {"kind": "frontdoor_set", "treatment": "X", "outcome": "Y", "variant": "minimal"}
    lines = ["directed path X -> A -> B -> Y", "directed path X -> A -> B", "directed path A -> B -> Y",
             "backdoor path X <-> Y <- B <- A is blocked given {}", "backdoor path X <-> Y <- B is blocked given {}",
             "backdoor path A <- X <-> Y is blocked given {X}", "backdoor path B <- A <- X <-> Y is blocked given {X}"]  # fmt: skip
    r = check_derivation(lines, "frontdoor_set", q, {"A", "B"}, g)
    assert not r.false and r.missing and r.missing.startswith("minimality")
    assert check_derivation(lines, "frontdoor_set", {**q, "variant": "any"}, {"A", "B"}, g).passed
    # front-door, not maximal: N (a child of X only) meets (ii) and (iii), so {M} is not maximal
    g = dag("X->M", "M->Y", "W->X", "X->N", bidirected=("X<->Y", "S<->Y"))
    q = {"kind": "frontdoor_set", "treatment": "X", "outcome": "Y", "variant": "maximal"}
    cert = CERTIFICATES[[c[0] for c in CERTIFICATES].index("frontdoor_maximal")][5]
    honest = ["no backdoor path from X to N", "backdoor path N <- X <-> Y is blocked given {X}",
              "backdoor path N <- X -> M -> Y is blocked given {X}", "backdoor path N <- X <- W is blocked given {X}"]  # fmt: skip
    r = check_derivation([*cert, *honest], "frontdoor_set", q, {"M"}, g)
    assert not r.false and r.missing and "maximality: N" in r.missing
    # backdoor on an ADMG, not maximal: {} is valid but {A} (or {B}) is too
    q = {"kind": "backdoor_set", "treatment": "X", "outcome": "Y", "variant": "maximal"}
    lines = ["descendants of X = {Y}", "backdoor path X <-> B <-> A <-> Y is blocked given {}",
             "backdoor path X <-> B <-> A <-> Y is blocked given {A}",
             "backdoor path X <-> B <-> A <-> Y is blocked given {B}"]  # fmt: skip
    r = check_derivation(lines, "backdoor_set", q, set(), BM2)
    assert not r.false and r.missing and r.missing.startswith("maximality")


def test_no_claims_fails_without_a_missing_reason():
    r = check_derivation(["just prose"], "backdoor_set", {"treatment": "X", "outcome": "Y"}, {"U"}, BD)
    assert not r.passed and r.claims == [] and "no claim" in r.reason()
    assert not check_derivation(None, "backdoor_set", {"treatment": "X", "outcome": "Y"}, {"U"}, BD).passed


# ---- the path cap
def fan(k: int, backdoor: bool = False) -> CausalGraph:
    """X -> Mi -> Y for i < k (k directed paths), or X <- Ui -> Y (k backdoor paths)."""
    if backdoor:
        return dag(*[f"U{i}->X" for i in range(k)], *[f"U{i}->Y" for i in range(k)])
    return dag(*[f"X->M{i}" for i in range(k)], *[f"M{i}->Y" for i in range(k)])


def _fan_claims(k: int, z: str) -> list[str]:
    return [f"path X -> M{i} -> Y is blocked given {z}" for i in range(k)]


@pytest.mark.parametrize("cap", [DEFAULT_MAX_PATHS, 3])
def test_path_cap_more_paths_than_cap(cap):
    g = fan(cap + 1)
    z = "{" + ", ".join(f"M{i}" for i in range(cap + 1)) + "}"
    q = {"kind": "dsep_set", "x": "X", "y": "Y"}
    value = {f"M{i}" for i in range(cap + 1)}

    def run(lines):
        return check_derivation(lines, "dsep_set", q, value, g, max_paths=cap)

    claims = _fan_claims(cap + 1, z)
    assert run(claims).passed  # all of them
    assert run(claims[:cap]).passed  # cap distinct true ones suffice
    r = run(claims[: cap - 1])
    assert r.missing and f"more than {cap}" in r.missing
    # duplicates do not count: the same line twice, or the same path read from the other end
    assert run([*claims[: cap - 1], claims[0]]).missing
    assert run([*claims[: cap - 1], f"path Y <- M0 <- X is blocked given {z}"]).missing
    # claims given another set do not count towards the cap
    other = "{" + ", ".join(f"M{i}" for i in range(cap + 1)) + ", X9}"
    g2 = dag(*[f"X->M{i}" for i in range(cap + 1)], *[f"M{i}->Y" for i in range(cap + 1)], nodes="X9")
    r = check_derivation(_fan_claims(cap, other), "dsep_set", q, value, g2, max_paths=cap)
    assert not r.false and r.missing


@pytest.mark.parametrize("cap", [DEFAULT_MAX_PATHS, 3])
def test_path_cap_exactly_cap_paths_needs_all(cap):
    g = fan(cap)
    z = "{" + ", ".join(f"M{i}" for i in range(cap)) + "}"
    q = {"kind": "dsep_set", "x": "X", "y": "Y"}
    value = {f"M{i}" for i in range(cap)}
    claims = _fan_claims(cap, z)
    assert check_derivation(claims, "dsep_set", q, value, g, max_paths=cap).passed
    r = check_derivation(claims[1:], "dsep_set", q, value, g, max_paths=cap)
    assert r.missing and "X -> M0 -> Y" in r.missing


def test_path_cap_backdoor_paths():
    cap = DEFAULT_MAX_PATHS
    g = fan(cap + 1, backdoor=True)
    value = {f"U{i}" for i in range(cap + 1)}
    z = "{" + ", ".join(sorted(value)) + "}"
    q = {"kind": "backdoor_set", "treatment": "X", "outcome": "Y"}
    claims = ["descendants of X = {}"] + [
        f"backdoor path X <- U{i} -> Y is blocked given {z}" for i in range(cap + 1)
    ]
    assert check_derivation(claims[: cap + 1], "backdoor_set", q, value, g).passed
    r = check_derivation(claims[:cap], "backdoor_set", q, value, g)
    assert r.missing and f"more than {cap}" in r.missing


# =============================================================================================
# 4. bounded inputs: always a report, never an exception
def _big_graph() -> CausalGraph:
    return dag(
        *[f"V{i}->V{j}" for i in range(12) for j in range(i + 1, min(12, i + 3))], "V0->X", "X->Y", "V11->Y"
    )


HUGE = {
    "10k_true_claims": ["U is not a descendant of X"] * 10_000,
    "10k_mixed_lines": [
        (
            "backdoor path X <- U -> Y is blocked given {U}",
            "no path from X to Y",
            "P(U=1) = 0.3",
            "prose " * 10,
            "descendants of X = {M, Y}",
            "{X} and {Y} are d-separated given {U, V}",
        )[i % 6]
        for i in range(10_000)
    ],
    "1MB_one_line": ["path " + "X -> " * 200_000 + "Y is open given {}"],
    "1MB_lines": ["path X -> M -> Y is blocked given {" + "U, " * 30 + "V}"] * 8_000,
    "100k_path": ["path " + " -> ".join(["X", "M"] * 25_000) + " is open given {}"],
    "100k_set": ["descendants of X = {" + ", ".join(f"N{i}" for i in range(20_000)) + "}"],
    "100k_prob": ["P(" + ", ".join(f"N{i}=1" for i in range(15_000)) + ") = 0.5"],
    "100k_psi": ["ψ = " + "1" * 100_000],
    "100k_number": ["P(U=1) = 0." + "3" * 100_000],
    "100k_separation": ["{" + ", ".join(f"N{i}" for i in range(20_000)) + "} and Y are d-separated given {}"],
    "nested_braces": ["backdoor path X <- U -> Y is blocked given " + "{" * 50_000 + "U" + "}" * 50_000],
    "nested_braces_short": ["path X <- U -> Y is blocked given " + "{" * 900 + "U" + "}" * 900],
    "nested_parens": ["P(" * 50_000 + "U=1" + ")" * 50_000 + " = 0.3"],
    "arrow_soup": [" ".join(["->", "<-", "<->", "→"] * 25_000)],
    "keywords_soup": ["so path is open given no directed path from descendant of " * 2_000],
    "512_no_path_claims": ["no backdoor path from V0 to Y", "no path between X and V11"] * 256,
    "unicode": [
        "path X\u2028<- U -> Y is blocked given {U}",
        "😀" * 50_000,
        "path X <- U\x00 -> Y is open given {}",
    ],
    "non_strings": [None, 5, b"edge U -> X", ["edge U -> X"], "edge U -> X"],
}


@pytest.mark.parametrize("name", sorted(HUGE))
def test_huge_and_hostile_derivations_return_a_report(name):
    for g, kind, q, value in (
        (BD, "backdoor_set", {"treatment": "X", "outcome": "Y"}, {"U", "V"}),
        (_big_graph(), "dsep_set", {"x": "X", "y": "V11"}, {"Y"}),
        (ATE_G, "ate", ATE_Q, (True, 0.43)),
    ):
        report = check_derivation(HUGE[name], kind, q, value, g, ATE_CPTS if kind == "ate" else None,
                                  ate_set=frozenset({"U"}))  # fmt: skip
        assert isinstance(report, DerivationReport)
        assert report.reason() is None or isinstance(report.reason(), str)
        assert len(report.claims) <= MAX_CLAIM_LINES


def test_no_path_claims_are_polynomial():
    # 18 nodes, each reaching the next three: exponentially many dead-end walks from A0, no path to Y
    # (before the reachability pruning this ran for hours)
    k = 18
    a = [f"A{i}" for i in range(k)]
    g = dag("X->Y", "A0->X", *[f"{a[i]}->{a[j]}" for i in range(k) for j in range(i + 1, min(k, i + 4))])
    r = check_derivation(["no backdoor path from X to Y"], "backdoor_set",
                         {"treatment": "X", "outcome": "Y"}, set(), g)  # fmt: skip
    assert r.passed


# =============================================================================================
# 5. the CALVER fuzzer, small
def _fuzzer():
    spec = importlib.util.spec_from_file_location("fuzz_calver", ROOT / "benchmarks" / "fuzz_calver.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_fuzzed_completions_never_raise_or_error():
    result = _fuzzer().run_fuzz(n=2_000, seed=1)
    assert result["completions"] == 2_000
    assert result["exceptions"] == 0, result["examples"]
    assert result["internal_errors"] == 0, result["examples"]
    assert result["nan_rewards"] == 0
    assert result["bad_totals"] == 0
    assert set(result["by_kind"]) >= {"backdoor_set", "frontdoor_set", "dsep_set", "ci_test", "directed_path",
                                      "mediator", "cycle", "msep_set", "ate"}  # fmt: skip
    assert set(result["by_mode"]) == {"supplied", "constructed"}
    assert result["by_source"]["soup"] > 0 and result["by_source"]["mutant"] > 0
