"""Binary Bayesian networks: CPT validation, the adjustment-formula ATE and the interventional ATE.

Definitions: with the observational distribution given by binary CPTs (the CPT JSON format is in
the "Binary Bayesian networks" section of :mod:`faithgrpo.verifier.graphs.criteria`), the adjustment formula
gives ``ψ = Σ_z [P(y=1 | x=1, z) − P(y=1 | x=0, z)] P(z)`` (Pearl 2009, Eq. 3.19) and the
truncated factorisation gives ``P(y=1 | do(x=1)) − P(y=1 | do(x=0))`` (Pearl 2009, Eq. 3.10), both
by variable elimination (``numpy.einsum``) over at most :data:`MAX_ATE_VARIABLES` variables.

The graph criteria as a whole, including the ATE certificate built on these, are in
:mod:`faithgrpo.verifier.graphs.criteria`; the package face :mod:`faithgrpo.verifier.graphs` exposes
the public names of all four modules.

References
----------
.. [1] J. Pearl, *Causality*, 2nd ed., Cambridge University Press, 2009 (truncated factorisation
   Eq. 3.10, adjustment formula Eq. 3.19).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from faithgrpo.verifier.graphs.model import CausalGraph, node_sort_key

if TYPE_CHECKING:
    import numpy as np

MAX_ATE_VARIABLES = 40  # einsum labels are limited to 52; 40 leaves room and bounds the work


# ---------------------------------------------------------------------------------------------
# binary ATE
def validate_cpts(
    cpts: Mapping[str, Any], g: CausalGraph | None = None
) -> dict[str, tuple[tuple[str, ...], dict]]:
    """Check a CPT dict (module docstring format) and return ``{v: (parents, {parent_values: p1})}``.

    With ``g`` given, every node of ``g`` needs a CPT whose parents equal ``g.parents(v)``.

    Raises:
        ValueError: naming the variable and the fix.
    """
    table, _ = checked_cpts(cpts, g)
    # a fresh copy: the memoised table is shared by this module's callers and must not change
    return {v: (parents, dict(probs)) for v, (parents, probs) in table.items()}


def checked_cpts(
    cpts: Mapping[str, Any], g: CausalGraph | None = None
) -> tuple[dict[str, tuple[tuple[str, ...], dict]], tuple | None]:
    """:func:`validate_cpts` without the copy: the memoised table (shared: read it only) and its key.

    Callers that check one problem's CPTs many times keep this pair and use the ``_*_ate`` functions
    below, which take it instead of the CPTs (one content key per problem instead of one per call).
    """
    table, key = _validated(cpts)
    if g is not None:
        _check_against(table, g)
    _check_acyclic(table, key)  # after the graph, as the errors always came
    return table, key


def _check_against(table: dict, g: CausalGraph) -> None:
    for v in g.nodes:
        if v not in table:
            raise ValueError(f"node {v!r} has no CPT")
        if set(table[v][0]) != set(g.parents(v)):
            raise ValueError(
                f"cpts[{v!r}] parents {sorted(table[v][0])} differ from the graph's {sorted(g.parents(v))}"
            )


# Validated tables and effects, keyed by the CPTs' content (_cpts_key): a problem's CPTs are
# validated and its effects computed by the outcome grader, CALVER and the certificate alike.
# Only successes are stored (errors raise again); values are floats and tables no caller mutates.
_MEMO: dict[tuple, Any] = {}
_MEMO_ENTRIES = 4_096
_MISSING = object()


def _memo(key: tuple | None, compute: Any) -> Any:
    if key is None:
        return compute()
    value = _MEMO.get(key, _MISSING)
    if value is not _MISSING:
        return value
    value = compute()
    if len(_MEMO) >= _MEMO_ENTRIES:
        _MEMO.clear()
    _MEMO[key] = value
    return value


_NUMBERS = (int, float)


def _leaf(p: Any) -> tuple:
    # exact type and, for a float zero, its sign: the key tells apart all that validation tells apart
    return (type(p), p, str(p)) if type(p) is float and p == 0 else (type(p), p)


def _cpts_key(cpts: Any) -> tuple | None:
    """A hashable key equal for CPTs that validate identically; ``None`` for any other shape (not memoised).

    Only plain JSON-like CPTs get a key: str names, list/tuple parents of str, p1 a number or a dict
    of str keys to numbers (exact types, so 1, 1.0 and True stay apart). Order is kept.
    """
    if type(cpts) is not dict:
        return None
    parts = []
    for v, spec in cpts.items():
        if type(v) is not str or type(spec) is not dict or "p1" not in spec:
            return None
        parents, raw = spec.get("parents"), spec["p1"]
        if parents is not None and (
            type(parents) not in (list, tuple) or any(type(p) is not str for p in parents)
        ):
            return None
        if type(raw) in _NUMBERS:
            probs: Any = _leaf(raw)
        elif type(raw) is dict and all(type(k) is str and type(p) in _NUMBERS for k, p in raw.items()):
            probs = tuple((k, *_leaf(p)) for k, p in raw.items())
        else:
            return None
        parts.append((v, None if parents is None else tuple(parents), probs))
    return tuple(parts)


def _validated(cpts: Any) -> tuple[dict[str, tuple[tuple[str, ...], dict]], tuple | None]:
    """The validated table (before the graph and cycle checks), memoised by content, and its key."""
    key = _cpts_key(cpts)
    return _memo(None if key is None else ("table", key), lambda: _validate(cpts)), key


def _check_acyclic(table: dict, key: tuple | None) -> None:
    message = _memo(None if key is None else ("cycle", key), lambda: _cycle_message(table))
    if message is not None:
        raise ValueError(message)


def _cycle_message(table: dict) -> str | None:
    probe = CausalGraph("DAG", tuple(table), frozenset((p, v) for v, (ps, _) in table.items() for p in ps))
    cycle = probe.find_cycle()
    return None if cycle is None else f"cpts parents form a cycle {' -> '.join((*cycle, cycle[0]))}"


def _validate(cpts: Mapping[str, Any]) -> dict[str, tuple[tuple[str, ...], dict]]:
    if not isinstance(cpts, Mapping) or not cpts:
        raise ValueError("cpts must be a non-empty dict {variable: {'parents': [...], 'p1': {...}}}")
    out: dict[str, tuple[tuple[str, ...], dict]] = {}
    for v, spec in cpts.items():
        if not isinstance(spec, Mapping) or "p1" not in spec:
            raise ValueError(f"cpts[{v!r}] must be a dict with 'parents' and 'p1'")
        parents = tuple(spec.get("parents") or ())
        raw = spec["p1"]
        if not parents and isinstance(raw, (int, float)):
            raw = {"": raw}
        if not isinstance(raw, Mapping):
            raise ValueError(f"cpts[{v!r}]['p1'] must map comma-joined parent values to P({v}=1 | parents)")
        table = {}
        for values in itertools.product((0, 1), repeat=len(parents)):
            key = ",".join(map(str, values))
            if key not in raw:
                raise ValueError(
                    f"cpts[{v!r}]['p1'] lacks key {key!r} (values of {list(parents)} joined by commas)"
                )
            p = raw[key]
            if (
                not isinstance(p, (int, float))
                or isinstance(p, bool)
                or not (0.0 <= p <= 1.0)
                or math.isnan(p)
            ):
                raise ValueError(f"cpts[{v!r}]['p1'][{key!r}] = {p!r} is not a probability in [0, 1]")
            table[values] = float(p)
        out[str(v)] = (parents, table)
    for v, (parents, _) in out.items():
        for p in parents:
            if p not in out:
                raise ValueError(f"cpts[{v!r}] lists parent {p!r} that has no CPT")
    return out


def joint_marginal(table: dict, targets: list[str], drop: str | None = None) -> np.ndarray:
    """P(targets) (or the truncated-factorisation sum with ``drop``'s factor removed) via einsum."""
    import numpy as np  # loaded with the first ATE, so importing the verifier stays light

    # ancestral closure: the marginal of an ancestral set only needs that set's factors
    closure, stack = set(), list(targets)
    while stack:
        v = stack.pop()
        if v not in closure:
            closure.add(v)
            stack.extend(table[v][0])
    if len(closure) > MAX_ATE_VARIABLES:
        raise ValueError(f"ATE needs {len(closure)} variables, over the cap of {MAX_ATE_VARIABLES}")
    order = sorted(closure, key=node_sort_key)
    label = {v: i for i, v in enumerate(order)}
    operands: list[Any] = []
    # A fixed factor order: einsum's float sums depend on it, and set order varies with PYTHONHASHSEED.
    for v in order:
        if v == drop:
            continue
        parents, probs = table[v]
        factor = np.empty((2,) * (len(parents) + 1))
        for values, p in probs.items():
            factor[(*values, 1)] = p
            factor[(*values, 0)] = 1.0 - p
        operands += [factor, [label[p] for p in parents] + [label[v]]]
    if drop is not None and drop in closure:
        operands += [np.ones(2), [label[drop]]]  # keeps the dropped variable as a free axis
    return np.einsum(*operands, [label[t] for t in targets], optimize="greedy")


def adjusted_ate(
    cpts: Mapping[str, Any], x: str, y: str, zs: Iterable[str] = (), *, eps: float = 1e-12
) -> float:
    """The adjustment-formula ATE of binary x on binary y given z, from a binary Bayesian network.

    Definition (Pearl 2009, Eq. 3.19):
    ``ψ = Σ_z [P(y=1 | x=1, z) − P(y=1 | x=0, z)] P(z)``, with the observational distribution given
    by the CPTs (module docstring). It equals the causal effect when z is a backdoor set.

    Complexity: variable elimination (``numpy.einsum``) over the ancestral closure of {x, y} ∪ z;
    at most :data:`MAX_ATE_VARIABLES` variables.

    Raises:
        ValueError: malformed CPTs, unknown variables, x == y, x or y in z, or a positivity violation
            (some z with P(z) > eps has P(x=a, z) <= eps).

    Example:
        >>> cpts = {"X": {"parents": [], "p1": 0.5}, "Y": {"parents": ["X"], "p1": {"0": 0.2, "1": 0.7}}}
        >>> round(adjusted_ate(cpts, "X", "Y"), 6)
        0.5
    """
    table, key = checked_cpts(cpts)
    return adjusted_ate_on_table(table, key, x, y, zs, eps)


def adjusted_ate_on_table(
    table: dict, key: tuple | None, x: str, y: str, zs: Iterable[str], eps: float = 1e-12
) -> float:
    """:func:`adjusted_ate` on :func:`checked_cpts`'s ``(table, key)``."""
    z = sorted(set(zs), key=node_sort_key)
    plain = key is not None and type(x) is str and type(y) is str and type(eps) is float
    return _memo(
        ("adjusted", key, x, y, tuple(z), eps) if plain else None, lambda: _adjusted(table, x, y, z, eps)
    )


def _adjusted(table: dict, x: str, y: str, z: list[str], eps: float) -> float:
    for v in (x, y, *z):
        if v not in table:
            raise ValueError(f"variable {v!r} has no CPT")
    if x == y or x in z or y in z:
        raise ValueError("x, y and z must be distinct (x and y not in z)")
    joint = joint_marginal(table, [x, y, *z])  # axes: x, y, z...
    p_xz = joint.sum(axis=1)  # x, z...
    p_z = p_xz.sum(axis=0)
    psi = 0.0
    for zv in itertools.product((0, 1), repeat=len(z)):
        pz = float(p_z[zv]) if z else 1.0
        if pz <= eps:
            continue
        den1, den0 = float(p_xz[(1, *zv)]), float(p_xz[(0, *zv)])
        if den1 <= eps or den0 <= eps:
            where = ", ".join(f"{n}={val}" for n, val in zip(z, zv)) or "the empty set"
            raise ValueError(f"positivity fails: P({x}=a, {where}) = 0 for some a")
        psi += (float(joint[(1, 1, *zv)]) / den1 - float(joint[(0, 1, *zv)]) / den0) * pz
    return psi


def interventional_ate(cpts: Mapping[str, Any], x: str, y: str) -> float:
    """``P(y=1 | do(x=1)) − P(y=1 | do(x=0))`` by the truncated factorisation (no adjustment set needed).

    Definition (Pearl 2009, Eq. 3.10): drop x's CPT, fix x, marginalise. Needs no positivity.
    Complexity as :func:`adjusted_ate`.
    """
    return _interventional_ate(*checked_cpts(cpts), x, y)


def _interventional_ate(table: dict, key: tuple | None, x: str, y: str) -> float:
    """:func:`interventional_ate` on :func:`checked_cpts`'s ``(table, key)``."""
    plain = key is not None and type(x) is str and type(y) is str
    return _memo(("interventional", key, x, y) if plain else None, lambda: _interventional(table, x, y))


def _interventional(table: dict, x: str, y: str) -> float:
    for v in (x, y):
        if v not in table:
            raise ValueError(f"variable {v!r} has no CPT")
    if x == y:
        raise ValueError("x and y must differ")
    f = joint_marginal(table, [x, y], drop=x)  # f[x, y] = P(y | do(x)); rows agree when x is no ancestor of y
    return float(f[1, 1] - f[0, 1])
