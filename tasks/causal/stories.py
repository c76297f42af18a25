"""Natural-language causal stories: a graph told as sentences over plausible variable names.

Constructed-graph mode hides the edge list: the prompt tells a short story
("Smoking raises Tar. Tar raises Cancer. Smoking and Cancer share an unmeasured common cause.")
and the model must build the graph itself. Node names *are* the variable names (``Smoking``,
``BloodPressure``), CamelCase identifiers that :func:`faithgrpo.verifier.graphs.edges.parse_graph` accepts,
so a trace can copy them verbatim into its GRAPH slot.

Every directed edge ``A -> B`` appears in exactly one sentence that names both ``A`` and ``B``; every
bidirected edge ``A <-> B`` in a sentence about a hidden common cause of both; isolated variables are
listed up front. The story ends by saying these are all the direct relations, so the graph is
determined by the text.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from faithgrpo.verifier.graphs.model import CausalGraph, node_sort_key

__all__ = ["THEMES", "Theme", "name_graph", "story_text", "variable_names"]


class Theme:
    """A topic with a pool of variable names (at least 12, so any node count 4-12 fits).

    The pool is listed roughly from root causes to outcomes, so that placing names along a graph's
    topological order (:func:`name_graph`) gives mostly plausible stories ("Smoking raises Tar").
    """

    def __init__(self, name: str, setting: str, variables: Sequence[str]):
        self.name = name
        self.setting = setting
        self.variables = tuple(variables)

    def __repr__(self) -> str:
        return f"Theme({self.name!r}, {len(self.variables)} variables)"


THEMES: tuple[Theme, ...] = (
    Theme(
        "health",
        "a study of lifestyle and health",
        (
            "Genetics", "Age", "Income", "Stress", "Diet", "Exercise", "Smoking", "Alcohol", "Sleep",
            "Tar", "Obesity", "Cholesterol", "BloodPressure", "Medication", "HeartDisease", "Cancer",
        ),
    ),
    Theme(
        "economy",
        "a model of a national economy",
        (
            "OilPrice", "TaxRate", "InterestRate", "ExchangeRate", "Confidence", "Productivity",
            "Exports", "Investment", "Wages", "Spending", "Savings", "Inflation", "HousePrices",
            "StockPrices", "Unemployment", "PublicDebt",
        ),
    ),
    Theme(
        "education",
        "a study of school outcomes",
        (
            "FamilyIncome", "Nutrition", "ClassSize", "TeacherSkill", "Tutoring", "Motivation",
            "ScreenTime", "Anxiety", "Attendance", "Absences", "StudyTime", "Homework", "TestScore",
            "Grades", "Scholarship", "Graduation",
        ),
    ),
    Theme(
        "farming",
        "a field trial on a farm",
        (
            "Sunlight", "Rainfall", "Temperature", "Drainage", "SoilQuality", "SeedQuality",
            "Irrigation", "Fertilizer", "LaborHours", "Weeds", "Pests", "Pesticide", "Pollinators",
            "Erosion", "CropYield", "FarmIncome",
        ),
    ),
    Theme(
        "operations",
        "monitoring data from a web service",
        (
            "Deployments", "Traffic", "Signups", "ServerLoad", "CpuUsage", "MemoryUsage", "DiskUsage",
            "QueueLength", "CacheHits", "Latency", "Timeouts", "Retries", "Errors", "Outages",
            "UserChurn", "Revenue",
        ),
    ),
    Theme(
        "environment",
        "an environmental health survey of a city",
        (
            "Factories", "CarTraffic", "Commuting", "TreeCover", "ParkAccess", "Wind", "Heat",
            "Humidity", "Pollen", "AirPollution", "Ozone", "Smog", "Noise", "Allergies", "Asthma",
            "HospitalVisits",
        ),
    ),
)  # fmt: skip

# Verbs are decoration: any of them means "is a direct cause of".
_VERBS = (
    "raises",
    "increases",
    "boosts",
    "lowers",
    "reduces",
    "affects",
    "influences",
    "drives",
    "directly changes",
    "has a direct effect on",
)
_ONE_EFFECT = (
    "{a} {verb} {b}.",
    "{b} is directly affected by {a}.",
    "Changes in {a} directly change {b}.",
    "{a} {verb} {b}.",
)
_MANY_EFFECTS = (
    "{a} {verb} {bs}.",
    "{a} directly affects {bs}.",
    "Changing {a} directly changes {bs}.",
)
_MANY_CAUSES = (
    "{b} depends directly on {as_}.",
    "{as_} each directly affect {b}.",
    "{b} is directly influenced by {as_}.",
)
_HIDDEN = (
    "{a} and {b} share an unmeasured common cause.",
    "An unobserved factor affects both {a} and {b}.",
    "{a} and {b} are confounded by a hidden variable.",
)
_OPENINGS = (
    "Consider {setting}. The variables are {names}.",
    "In {setting}, researchers track {names}.",
    "Data come from {setting}; the variables are {names}.",
)
_CLOSINGS = (
    "These are all the direct causal relations; there are no others.",
    "No other direct causal relations exist.",
    "Nothing else directly causes anything else.",
)
_LOOPS = (
    "Feedback loops are possible.",
    "Some effects may feed back on their causes.",
)


def name_graph(graph: CausalGraph, theme: Theme, rng: random.Random) -> CausalGraph:
    """Relabel ``graph`` with ``len(graph.nodes)`` variables of ``theme``.

    For acyclic graphs the chosen names follow the theme's cause-to-outcome order along a
    topological order of the graph; directed graphs with cycles get them in random order.
    """
    names = rng.sample(theme.variables, len(graph.nodes))
    if graph.kind == "DG":
        order = list(graph.nodes)
    else:
        names.sort(key=theme.variables.index)
        order = _topological(graph, rng)
    mapping = dict(zip(order, names))
    return CausalGraph(
        graph.kind,
        tuple(sorted(names, key=node_sort_key)),
        frozenset((mapping[a], mapping[b]) for a, b in graph.directed),
        frozenset((mapping[a], mapping[b]) for a, b in graph.bidirected),
    ).validate()


def _topological(graph: CausalGraph, rng: random.Random) -> list[str]:
    """A topological order of the directed part, ties broken at random (Kahn's algorithm)."""
    indeg = {v: len(graph.parents(v)) for v in graph.nodes}
    ready = sorted((v for v in graph.nodes if indeg[v] == 0), key=node_sort_key)
    order = []
    while ready:
        v = ready.pop(rng.randrange(len(ready)))
        order.append(v)
        for c in sorted(graph.children(v), key=node_sort_key):
            indeg[c] -= 1
            if indeg[c] == 0:
                ready.append(c)
    return order


def variable_names(n: int, rng: random.Random) -> tuple[Theme, list[str]]:
    """Pick a theme and ``n`` distinct variable names from it, in random order.

    Raises:
        ValueError: ``n`` is outside 1..12 (every theme holds at least 12 names).
    """
    if not 1 <= n <= 12:
        raise ValueError(f"stories support 1 to 12 variables, got {n}")
    theme = rng.choice(THEMES)
    return theme, rng.sample(theme.variables, n)


def _join(names: Sequence[str]) -> str:
    if len(names) == 1:
        return names[0]
    return ", ".join(names[:-1]) + " and " + names[-1]


def story_text(graph: CausalGraph, rng: random.Random, *, setting: str | None = None) -> str:
    """Tell ``graph`` as a short story whose sentences name every edge's endpoints.

    Args:
        graph: the hidden source graph; its node names are the variable names.
        rng: chooses sentence templates, verbs and the order of sentences.
        setting: a phrase such as ``"a study of lifestyle and health"``; found from the node names
            when omitted.

    Returns:
        One paragraph: an opening listing every variable, one sentence per group of edges sharing a
        cause (or an effect), one per bidirected edge, a remark on feedback loops for directed graphs
        with cycles, and a closing that rules out other relations. It contains no arrow syntax.
    """
    if setting is None:
        setting = next((t.setting for t in THEMES if graph.node_set <= set(t.variables)), "a causal system")
    names = list(graph.nodes)
    rng.shuffle(names)
    sentences = [rng.choice(_OPENINGS).format(setting=setting, names=_join(names))]

    remaining = set(graph.directed)
    groups: list[str] = []
    for a in sorted({a for a, _ in graph.directed}, key=node_sort_key):
        heads = sorted((b for x, b in remaining if x == a), key=node_sort_key)
        if not heads:
            continue
        # Sometimes tell a node's causes together instead (fan-in), from the effect's side.
        if rng.random() < 0.25:
            b = rng.choice(heads)
            tails = sorted((x for x, y in remaining if y == b), key=node_sort_key)
            if len(tails) >= 2:
                rng.shuffle(tails)
                groups.append(rng.choice(_MANY_CAUSES).format(b=b, as_=_join(tails)))
                remaining -= {(t, b) for t in tails}
                heads = [h for h in heads if (a, h) in remaining]
        if not heads:
            continue
        rng.shuffle(heads)
        if len(heads) == 1:
            text = rng.choice(_ONE_EFFECT).format(a=a, b=heads[0], verb=rng.choice(_VERBS))
        else:
            text = rng.choice(_MANY_EFFECTS).format(a=a, bs=_join(heads), verb=rng.choice(_VERBS))
        groups.append(text)
        remaining -= {(a, h) for h in heads}
    for a, b in sorted(graph.bidirected):
        pair = [a, b]
        rng.shuffle(pair)
        groups.append(rng.choice(_HIDDEN).format(a=pair[0], b=pair[1]))
    rng.shuffle(groups)
    sentences += groups
    if graph.kind == "DG":
        sentences.append(rng.choice(_LOOPS))
    sentences.append(rng.choice(_CLOSINGS))
    return " ".join(sentences)
