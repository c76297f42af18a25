"""The published Bayesian networks that pgmpy bundles in its wheel, read offline with pgmpy's BIFReader.

pgmpy (a dependency) ships gzipped BIF files in ``pgmpy/utils/example_models/`` (asia, alarm,
andes, ...). :func:`load_network` reads one of them with pgmpy's own
:class:`pgmpy.readwrite.BIFReader` (never from a model hub) into a :class:`BayesNet`: the DAG as a
:class:`~faithgrpo.verifier.graphs.model.CausalGraph` over the network's own variable names, the states of
each variable in BIF order, and each conditional probability table as a numpy array.

:data:`NETWORKS` lists the networks the ``causal_bn`` dataset (:mod:`faithgrpo.tasks.bayesnets.datasets`)
knows, each with a one-line setting for story mode and its reference; :data:`DEFAULT_NETWORKS`
are the ones it draws from by default (the benchmark in ``benchmarks/bench_bn.py`` and the README
say why the others are left out by default). Every name in :data:`NETWORKS` can be loaded.

Variable names are the networks' own, with two exceptions (:data:`RENAMED`): asia's ``either``
(tuberculosis or lung cancer) is ``TbOrCa``, its name in Lauritzen and Spiegelhalter's original
network, because answer parsing reads the word "either" as a hedge ("either A or B") and would
reject the answer ``{either}``; hepar2's ``edge`` (the palpated edge of the liver) is
``liver_edge``, because the claim grammar reads a DERIVATION line that starts with "edge" as an
edge claim. :func:`load_network` checks that every name reads back as a one-node answer and that
a prose line starting with it is prose, and that no new name is one the network already uses.

Reading a BIF file takes 0.5-3 s (pgmpy's pyparsing grammar), so networks are cached per process,
and what BIFReader read is kept on disk under ``$FAITHGRPO_CACHE/bn_networks`` (default
``~/.cache/faithgrpo``), keyed by the SHA-256 of the file's bytes, pgmpy's version and the renames:
the same bytes read by the same reader give the same network. An unwritable cache is skipped.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from faithgrpo.verifier.graphs.model import NODE_RE, CausalGraph, node_sort_key

__all__ = ["DEFAULT_NETWORKS", "NETWORKS", "RENAMED", "BayesNet", "NetworkInfo", "bif_path", "load_network"]


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

#: Variables renamed on loading, per network (module docstring): BIF name -> name used here.
RENAMED: dict[str, dict[str, str]] = {"asia": {"either": "TbOrCa"}, "hepar2": {"edge": "liver_edge"}}

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
            the BIF file's order. Each column is divided by its sum: the BIF files round their
            probabilities, and some columns sum to 1 ± 1e-7.
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
            names outside ``[A-Za-z0-9_]+`` (or that do not read back as answers).
        FileNotFoundError: the file is missing from the installed pgmpy.
    """
    path = bif_path(name)
    with open(path, "rb") as f:
        raw = f.read()
    cached = _cache_path(name, raw)
    read = _read_cache(cached) if cached is not None else None
    if read is None:
        read = _read_bif(name, path, gzip.decompress(raw).decode("utf-8"))
        if cached is not None:
            _write_cache(cached, *read)
    states, cpds = read
    bad = sorted(v for v in states if not _usable_name(v))
    if bad:
        raise ValueError(
            f"{name}: variable names {bad[:5]} are not [A-Za-z0-9_]+ names that read back as answers "
            "and start prose; add them to RENAMED"
        )
    missing = sorted(set(states) - set(cpds))
    if missing:
        raise ValueError(f"{name}: variables {missing[:5]} have no probability table")
    nodes = tuple(sorted(states, key=node_sort_key))
    directed = frozenset((p, v) for v, (parents, _) in cpds.items() for p in parents)
    graph = CausalGraph("DAG", nodes, directed).validate()
    return BayesNet(name, graph, states, cpds)


def _usable_name(v: str) -> bool:
    """A node name, read back as a one-node answer, that does not turn prose it starts into a claim."""
    from faithgrpo.verifier.answers import parse_node_set
    from faithgrpo.verifier.certificates.claims import parse_claim

    return (
        NODE_RE.fullmatch(v) is not None
        and parse_node_set("{" + v + "}") == {v}
        and parse_claim(f"{v} is not among them") is None
    )


def _read_bif(name: str, path: str, text: str) -> tuple[dict, dict]:
    """States and tables of the BIF ``text``, read by pgmpy's BIFReader (variables renamed per :data:`RENAMED`)."""
    if "variable" not in text or "probability" not in text:
        head = text[:60].replace("\n", " ")
        raise ValueError(f"{path} is not BIF text (it starts {head!r}); reinstall pgmpy from its wheel")
    import warnings

    from pgmpy.readwrite import BIFReader

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pgmpy warns about probabilities that sum to 1 +- 1e-8
        model = BIFReader(string=text).get_model()
    rename = RENAMED.get(name, {})
    clash = sorted(set(rename.values()) & set(model.nodes()))
    if clash:
        raise ValueError(f"{name}: RENAMED targets {clash} are names the network already uses")
    states: dict[str, tuple[str, ...]] = {}
    cpds: dict[str, tuple[tuple[str, ...], np.ndarray]] = {}
    for cpd in model.get_cpds():
        names = cpd.state_names
        for u in cpd.variables:
            prior = states.setdefault(rename.get(u, u), tuple(names[u]))
            if prior != tuple(names[u]):
                raise ValueError(f"{name}: variable {u!r} has states {prior} and {tuple(names[u])}")
        table = np.asarray(cpd.values, dtype=float).reshape([len(names[u]) for u in cpd.variables])
        table = table / table.sum(axis=0, keepdims=True)  # BIF files round: columns sum to 1 +- 1e-7
        v, *parents = (rename.get(u, u) for u in cpd.variables)
        cpds[v] = (tuple(parents), table)
    return states, cpds


_CACHE_FORMAT = 2


def _cache_path(name: str, raw: bytes) -> str | None:
    try:
        import pgmpy

        from faithgrpo.models import cache_dir
    except ImportError:
        return None
    salt = json.dumps([_CACHE_FORMAT, pgmpy.__version__, sorted(RENAMED.get(name, {}).items())])
    key = hashlib.sha256(raw + salt.encode()).hexdigest()[:20]
    return os.path.join(cache_dir(), "bn_networks", f"{name}-{key}.npz")


def _read_cache(path: str) -> tuple[dict, dict] | None:
    """The cached read, or ``None`` when absent or unreadable (then the BIF file is read again)."""
    if not os.path.isfile(path):
        return None
    try:
        with np.load(path, allow_pickle=False) as f:
            meta = json.loads(str(f["meta"]))
            states = {v: tuple(ss) for v, ss in meta["states"].items()}
            cpds = {v: (tuple(ps), np.array(f[f"t{i}"])) for i, (v, ps) in enumerate(meta["parents"])}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return states, cpds


def _write_cache(path: str, states: dict, cpds: dict) -> None:
    meta = {
        "states": {v: list(ss) for v, ss in states.items()},
        "parents": [[v, list(ps)] for v, (ps, _) in cpds.items()],
    }
    arrays = {f"t{i}": table for i, (_, table) in enumerate(cpds.values())}
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".npz.tmp")
    except OSError:
        return  # an unwritable cache is skipped
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, meta=np.array(json.dumps(meta)), **arrays)
        os.replace(tmp, path)  # atomic: concurrent readers see the old file or the whole new one
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
