"""The published Bayesian networks that pgmpy bundles in its wheel, read offline with pgmpy's BIFReader.

pgmpy (a dependency) ships gzipped BIF files in ``pgmpy/utils/example_models/`` (asia, alarm,
andes, ...). :func:`load_network` reads one of them with pgmpy's own
:class:`pgmpy.readwrite.BIFReader` (never from a model hub) into a :class:`BayesNet`: the DAG as a
:class:`~faithgrpo.tasks.graph.CausalGraph` over the network's own variable names, the states of
each variable in BIF order, and each conditional probability table as a numpy array.

:data:`NETWORKS` lists the networks the ``causal_bn`` dataset (:mod:`faithgrpo.tasks.causal_bn`)
knows, each with a one-line setting for story mode and its reference; :data:`DEFAULT_NETWORKS`
are the ones it draws from by default (the benchmark in ``benchmarks/bench_bn.py`` and the README
say why the others are left out by default). Every name in :data:`NETWORKS` can be loaded.

Reading a BIF file takes 0.5-3 s (pgmpy's pyparsing grammar), so networks are cached per process.
"""

from __future__ import annotations

import functools
import gzip
import os
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from faithgrpo.tasks.causal_graph import NODE_RE, CausalGraph, node_sort_key

__all__ = ["DEFAULT_NETWORKS", "NETWORKS", "BayesNet", "NetworkInfo", "bif_path", "load_network"]


@dataclass(frozen=True)
class NetworkInfo:
    """What the dataset tells about a network: the story's setting and where the network comes from."""

    setting: str
    reference: str


#: Networks the dataset knows (all bundled in pgmpy's wheel), smallest first.
NETWORKS: dict[str, NetworkInfo] = {
    "cancer": NetworkInfo("the CANCER network of pollution, smoking and lung cancer",
                          "Korb & Nicholson, Bayesian Artificial Intelligence, 2010"),
    "earthquake": NetworkInfo("the EARTHQUAKE network of a burglar alarm and the neighbours who call",
                              "Korb & Nicholson, Bayesian Artificial Intelligence, 2010"),
    "survey": NetworkInfo("the SURVEY network of age, sex, education, occupation, residence and travel",
                          "Scutari & Denis, Bayesian Networks with Examples in R, 2014"),
    "asia": NetworkInfo("the ASIA chest-clinic network (Lauritzen and Spiegelhalter)",
                        "Lauritzen & Spiegelhalter, JRSS B 50(2), 1988"),
    "sachs": NetworkInfo("the SACHS protein-signalling network", "Sachs et al., Science 308(5721), 2005"),
    "child": NetworkInfo("the CHILD network for diagnosing congenital heart disease in newborns",
                         "Spiegelhalter & Cowell, Bayesian Statistics 4, 1992"),
    "insurance": NetworkInfo("the INSURANCE network for car-insurance risk",
                             "Binder et al., Machine Learning 29(2-3), 1997"),
    "water": NetworkInfo("the WATER network of a waste-water treatment plant",
                         "Jensen et al., Research Report R-89-17, Aalborg University, 1989"),
    "alarm": NetworkInfo("the ALARM patient-monitoring network of an intensive-care unit",
                         "Beinlich et al., AIME 1989"),
    "hailfinder": NetworkInfo("the HAILFINDER network for forecasting severe weather",
                              "Abramson et al., International Journal of Forecasting 12(1), 1996"),
    "hepar2": NetworkInfo("the HEPAR II network for diagnosing liver disorders",
                          "Onisko, PhD thesis, Warsaw University of Technology, 2003"),
    "win95pts": NetworkInfo("the WIN95PTS printer-troubleshooting network of Windows 95",
                            "Microsoft Research, 1995 (bnlearn repository)"),
    "pathfinder": NetworkInfo("the PATHFINDER network for lymph-node pathology",
                              "Heckerman et al., Methods of Information in Medicine 31, 1992"),
    "munin1": NetworkInfo("the MUNIN subnetwork 1 for electromyography diagnosis",
                          "Andreassen et al., Artificial Intelligence in Medicine, 1989"),
    "andes": NetworkInfo("the ANDES network of a physics-tutoring student model",
                         "Conati et al., UM 1997"),
}  # fmt: skip

#: Networks ``causal_bn`` draws from by default: 13 networks, 5 to 223 nodes (README: which and why).
DEFAULT_NETWORKS: tuple[str, ...] = (
    "cancer", "earthquake", "survey", "asia", "sachs", "child", "insurance", "water", "alarm",
    "hailfinder", "hepar2", "win95pts", "andes",
)  # fmt: skip


@dataclass(frozen=True, eq=False)
class BayesNet:
    """A discrete Bayesian network read from a BIF file.

    Attributes:
        name: the network's name (``"alarm"``).
        graph: the DAG over the variable names (nodes in natural order).
        states: each variable's state names, in the BIF file's order.
        cpds: each variable's table ``(parents, table)``: ``table[s, p1, ..., pk]`` is
            ``P(v = states[v][s] | parents[0] = states[parents[0]][p1], ...)``; the parents are in
            the BIF file's order.
    """

    name: str
    graph: CausalGraph
    states: Mapping[str, tuple[str, ...]]
    cpds: Mapping[str, tuple[tuple[str, ...], np.ndarray]]

    def is_binary(self, v: str) -> bool:
        """Whether ``v`` has exactly two states."""
        return len(self.states[v]) == 2

    def __repr__(self) -> str:
        g = self.graph
        return f"BayesNet({self.name!r}, {len(g.nodes)} nodes, {len(g.directed)} edges)"


def _models_dir() -> str:
    try:
        import pgmpy
    except ImportError as exc:  # a dependency: a broken install, not a user error
        raise ImportError(
            "the causal_bn networks are read with pgmpy, which is not installed; run "
            "`pip install pgmpy` (it is a dependency of faithgrpo: `pip install -e .` installs it)"
        ) from exc
    return os.path.join(os.path.dirname(pgmpy.__file__), "utils", "example_models")


def bif_path(name: str) -> str:
    """The path of network ``name``'s gzipped BIF file inside the installed pgmpy package.

    Raises:
        ValueError: ``name`` is not in :data:`NETWORKS`.
        FileNotFoundError: the installed pgmpy does not bundle the file.
    """
    if name not in NETWORKS:
        raise ValueError(f"unknown network {name!r}; choose from {sorted(NETWORKS)}")
    path = os.path.join(_models_dir(), f"{name}.bif.gz")
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"pgmpy does not bundle {name}.bif.gz at {path}; install a pgmpy release that ships "
            "utils/example_models (1.1 does)"
        )
    return path


@functools.cache
def load_network(name: str) -> BayesNet:
    """Read network ``name`` (one of :data:`NETWORKS`) from pgmpy's bundled BIF file, offline.

    Raises:
        ValueError: an unknown name, a file that is not BIF text (e.g. a Git LFS pointer), or variable
            names outside ``[A-Za-z0-9_]+``.
        FileNotFoundError: the file is missing from the installed pgmpy.
    """
    path = bif_path(name)
    with gzip.open(path, "rt", encoding="utf-8") as f:
        text = f.read()
    if "variable" not in text or "probability" not in text:
        head = text[:60].replace("\n", " ")
        raise ValueError(f"{path} is not BIF text (it starts {head!r}); reinstall pgmpy from its wheel")
    import warnings

    from pgmpy.readwrite import BIFReader

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pgmpy warns about probabilities that sum to 1 +- 1e-8
        model = BIFReader(string=text).get_model()
    states: dict[str, tuple[str, ...]] = {}
    cpds: dict[str, tuple[tuple[str, ...], np.ndarray]] = {}
    for cpd in model.get_cpds():
        v, *parents = cpd.variables
        names = cpd.state_names
        for u in cpd.variables:
            prior = states.setdefault(u, tuple(names[u]))
            if prior != tuple(names[u]):
                raise ValueError(f"{name}: variable {u!r} has states {prior} and {tuple(names[u])}")
        table = np.asarray(cpd.values, dtype=float).reshape([len(names[u]) for u in cpd.variables])
        cpds[v] = (tuple(parents), table)
    bad = sorted(v for v in states if not NODE_RE.fullmatch(v))
    if bad:
        raise ValueError(f"{name}: variable names {bad[:5]} are not [A-Za-z0-9_]+")
    missing = sorted(set(states) - set(cpds))
    if missing:
        raise ValueError(f"{name}: variables {missing[:5]} have no probability table")
    nodes = tuple(sorted(states, key=node_sort_key))
    directed = frozenset((p, v) for v, (parents, _) in cpds.items() for p in parents)
    graph = CausalGraph("DAG", nodes, directed).validate()
    return BayesNet(name, graph, states, cpds)
