"""The reward ablation's results page: arms × metrics with intervals, paired against the baseline arm.

`recipes/ablation.py` trains one GRPO run per arm (reward set) from one warm start and evaluates the
warm start and every arm in one ``faithgrpo eval`` run. This module reads that run's ``report.json``
and each arm's ``metrics.jsonl`` and writes the results page:

- `summarize` collects, per checkpoint and evaluation task, Pass@K, CoT-Pass@K (certificate-verified),
  CALVER per-check rates and mean S/6, AOC, CIR, CRoS Δ and the mean normalised hint score, each with
  its prompt-clustered bootstrap interval from the report; and the paired differences of every
  checkpoint against the baseline arm (same prompts, bootstrap over prompts) that the report computed.
- `reward_curves` reads each arm's per-step reward means.
- `render_markdown`, `plot_metrics` and `plot_reward_curves` draw them.

Nothing here recomputes a statistic: every number is the report's, so the page and ``report.md``
cannot disagree.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from faithgrpo.eval.report.results import dig
from faithgrpo.eval.report.sections import CALVER_CHECKS

__all__ = [
    "advantage_sources",
    "format_interval",
    "per_kind_rates",
    "plot_metrics",
    "plot_reward_curves",
    "render_markdown",
    "render_per_kind",
    "reward_curves",
    "summarize",
]

_FAITHFULNESS = (("aoc", "early-answering AOC"), ("cir", "CIR (JS, bits)"), ("cros_delta", "CRoS Δ"))


def _estimate(value: Any) -> dict[str, Any] | None:
    """An ``Estimate`` dict of the report (value, ci_low, ci_high, n, reason), or ``None``."""
    return value if isinstance(value, Mapping) and "value" in value else None


def format_interval(estimate: Mapping[str, Any] | None, digits: int = 3, signed: bool = False) -> str:
    """``0.250 [0.125, 0.375]``; ``undefined`` when the estimate has no value.

    Example:
        >>> format_interval({"value": 0.25, "ci_low": 0.125, "ci_high": 0.375, "n": 8})
        '0.250 [0.125, 0.375]'
        >>> format_interval({"value": None, "reason": "no prompts"})
        'undefined'
    """
    if not estimate or estimate.get("value") is None:
        return "undefined"
    fmt = f"{{:+.{digits}f}}" if signed else f"{{:.{digits}f}}"
    text = fmt.format(estimate["value"])
    if estimate.get("ci_low") is not None and estimate.get("ci_high") is not None:
        text += f" [{fmt.format(estimate['ci_low'])}, {fmt.format(estimate['ci_high'])}]"
    return text


def _checkpoint_metrics(checkpoint: Mapping[str, Any], tasks: Sequence[str], ks: Sequence[int]) -> dict:
    """Per task: Pass@K and CoT-Pass@K per K, CALVER checks, mean S/6; then faithfulness and hints."""
    out: dict[str, Any] = {"tasks": {}}
    for task in tasks:
        section = dig(checkpoint, "passk", task) or {}
        checks = section.get("calver_checks") or {}
        out["tasks"][task] = {
            "prompts": section.get("prompts"),
            "samples": section.get("samples"),
            "answer_accuracy": section.get("answer_accuracy"),
            "cot_accuracy": section.get("cot_accuracy"),
            "pass@k": {str(k): _estimate(dig(section, "k", str(k), "pass@k")) for k in ks},
            "cot_pass@k": {str(k): _estimate(dig(section, "k", str(k), "cot_pass@k")) for k in ks},
            "calver_checks": {name: _estimate(dig(checks, "checks", name)) for name in CALVER_CHECKS},
            "calver_all_six": _estimate(checks.get("all_six")),
            # An Estimate dict since issue 32 (a bare number in older reports).
            "calver_mean_score": dig(checks, "mean_score", "value")
            if isinstance(checks.get("mean_score"), dict)
            else checks.get("mean_score"),
        }
    early = dig(checkpoint, "faithfulness", "early_answering") or {}
    out["faithfulness"] = {
        "aoc": _estimate(early.get("aoc")),
        "cir": _estimate(early.get("cir")),
        "cros_delta": _estimate(dig(checkpoint, "faithfulness", "cros_delta", "mean")),
    }
    out["hints"] = {"mean_normalized": _estimate(dig(checkpoint, "hints", "mean_normalized"))}
    return out


def summarize(
    report: Mapping[str, Any], *, baseline: str, tasks: Sequence[str] | None = None
) -> dict[str, Any]:
    """Arms × metrics from a ``faithgrpo eval`` report whose reference checkpoint is ``baseline``.

    Args:
        report: the parsed ``report.json``.
        baseline: the label every other checkpoint is compared with; it must be the report's
            reference (the first checkpoint, no ``--baseline``), so the paired rows exist.
        tasks: evaluation tasks in display order (default: the report's ``--tasks``).

    Returns:
        ``{"baseline", "tasks", "ks", "checkpoints": {label: metrics}, "paired": {label: {...}}}``;
        ``paired[label]["tasks"][task]["pass@k"|"cot_pass@k"][k]`` and
        ``paired[label]["faithfulness"][name]``, ``paired[label]["hints"]`` are the report's
        ``Estimate`` dicts (difference label − baseline, prompt-clustered bootstrap).

    Raises:
        ValueError: ``baseline`` is not the report's reference checkpoint.
    """
    comparisons = report.get("comparisons") or {}
    if comparisons.get("reference") != baseline:
        raise ValueError(
            f"the report compares against {comparisons.get('reference')!r}, not the baseline arm {baseline!r}: "
            "evaluate the baseline arm as the first checkpoint (--model/--adapter/--label), without --baseline"
        )
    config = report.get("config") or {}
    tasks = list(tasks if tasks is not None else config.get("tasks") or [])
    ks = [int(k) for k in config.get("ks") or []]
    checkpoints = {c["label"]: _checkpoint_metrics(c, tasks, ks) for c in report.get("checkpoints") or []}
    paired = {}
    for label in checkpoints:
        if label == baseline:
            continue
        per_task = dig(comparisons, "checkpoints", label) or {}
        paired[label] = {
            "tasks": {
                task: {
                    name: {str(k): _estimate(dig(per_task, task, str(k), name)) for k in ks}
                    for name in ("pass@k", "cot_pass@k")
                }
                for task in tasks
            },
            "faithfulness": {
                name: _estimate(dig(comparisons, "faithfulness", label, name)) for name, _ in _FAITHFULNESS
            },
            "hints": _estimate(dig(comparisons, "hints", label, "mean_normalized")),
        }
    return {"baseline": baseline, "tasks": tasks, "ks": ks, "checkpoints": checkpoints, "paired": paired}


#: Training diagnostics drawn next to the reward means: CRoS's mean Δ (its reward, a within-group
#: rank, has mean 0.5 by construction) and the share of completions passing CALVER's derivation check.
CURVE_DIAGNOSTICS = {"cros/delta_mean": "cros Δ (mean)", "calver/derivation": "derivation check"}


def reward_curves(metrics_rows: Sequence[Mapping[str, Any]]) -> dict[str, list[tuple[int, float]]]:
    """``{name: [(step, value), ...]}`` from ``metrics.jsonl`` rows: each reward's mean, ``"total"``
    (the weighted sum) and the `CURVE_DIAGNOSTICS`; the CRoS rank's mean (always 0.5) is left out.

    Example:
        >>> reward_curves([{"step": 1, "reward": 0.5, "rewards/outcome/mean": 0.25, "rewards/cros/mean": 0.5,
        ...                 "cros/delta_mean": 0.125}])
        {'outcome': [(1, 0.25)], 'cros Δ (mean)': [(1, 0.125)], 'total': [(1, 0.5)]}
    """
    curves: dict[str, list[tuple[int, float]]] = {}
    for row in metrics_rows:
        step = row.get("step")
        if step is None:
            continue
        for key, value in row.items():
            if key.startswith("rewards/") and key.endswith("/mean") and _finite(value):
                name = key[len("rewards/") : -len("/mean")]
                if name != "cros":
                    curves.setdefault(name, []).append((int(step), float(value)))
            elif key in CURVE_DIAGNOSTICS and _finite(value):
                curves.setdefault(CURVE_DIAGNOSTICS[key], []).append((int(step), float(value)))
        if _finite(row.get("reward")):
            curves.setdefault("total", []).append((int(step), float(row["reward"])))
    return curves


def per_kind_rates(
    completions_path: str | Path, rows: Sequence[Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Per query kind: answer-correct and all-six (certificate) rates over an eval's cached completions.

    A breakdown the report does not carry (it pools the kinds): which kinds a checkpoint has learned.
    Each completion is graded by the eval's own graders (`faithgrpo.eval.report.adapters.answer_checker`,
    CALVER `score_trace`), so the pooled rates equal the report's.

    Args:
        completions_path: ``OUT/<label>/completions_<task>.jsonl`` of a ``faithgrpo eval`` run.
        rows: the task rows it sampled (`faithgrpo.eval.report.adapters.task_rows` with the eval's
            prompts, seed and task config), matched by ``id``.

    Returns:
        ``{kind: {"prompts", "completions", "answer_rate", "all_six_rate", "mean_score"}}``.
    """
    from faithgrpo.eval.report.adapters import answer_checker
    from faithgrpo.rewards.calver.problem import prepare_problem
    from faithgrpo.rewards.calver.reward import score_trace

    by_id = {row["id"]: row for row in rows}
    tallies: dict[str, dict[str, float]] = {}
    for line in Path(completions_path).read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        row = by_id[record["id"]]
        kind = json.loads(row["problem"])["query"]["kind"]
        grade, prepared = answer_checker(row), prepare_problem(row["problem"])
        t = tallies.setdefault(kind, {"prompts": 0, "completions": 0, "correct": 0, "all_six": 0, "score": 0})
        t["prompts"] += 1
        for text in record["completions"]:
            score = score_trace(text, prepared)
            t["completions"] += 1
            t["correct"] += bool(grade(text))
            t["all_six"] += score.passed
            t["score"] += score.total / 6
    return {
        kind: {
            "prompts": t["prompts"],
            "completions": t["completions"],
            "answer_rate": t["correct"] / t["completions"],
            "all_six_rate": t["all_six"] / t["completions"],
            "mean_score": t["score"] / t["completions"],
        }
        for kind, t in sorted(tallies.items())
        if t["completions"]
    }


def advantage_sources(
    completions: Sequence[Mapping[str, Any]],
    weights: Mapping[str, float],
    *,
    aggregation: str = "sum_then_normalize",
) -> dict[str, Any]:
    """Which rewards moved a run's group advantages: the spread each weighted reward puts into its groups.

    With TRL's default ``aggregation="sum_then_normalize"``, GRPO's advantage is the weighted reward
    sum centred (and scaled) within each group of completions of one prompt, so a reward that is
    constant within a group contributes nothing there; per group and reward this takes
    ``Σ_i |w·(x_i − mean(x))|`` (NaN/None rewards count as 0, as TRL's ``nansum`` does). With
    ``"normalize_then_sum"`` (GDPO) each reward is first standardised within its group,
    ``(x_i − mean) / (std + 1e-4)`` over its finite values (Bessel-corrected std, as TRL's ``nanstd``),
    so the term is ``Σ_i |w·(x_i − mean)| / (std + 1e-4)``: every reward that varies in a group
    weighs by its weight, not by its spread. A reward's share is its part of the groups' total.

    Args:
        completions: ``completions.jsonl`` rows (``step``, ``prompt``, ``rewards``), a group being
            the consecutive rows of one step with the same prompt.
        weights: reward name -> weight (absent: 0, logged only).
        aggregation: TRL's ``multi_objective_aggregation`` of the run.

    Returns:
        ``{"groups", "groups_without_signal", "share": {reward: fraction of all weighted spread},
        "groups_moved_by": {reward: groups where that reward varies}, "aggregation"}``.

    Raises:
        ValueError: an unknown aggregation.

    Example:
        >>> rows = [{"step": 1, "prompt": "p", "rewards": {"outcome": o, "calver": c}}
        ...         for o, c in ((1.0, 0.5), (0.0, 0.5), (0.0, 1.0), (0.0, 0.0))]
        >>> advantage_sources(rows, {"outcome": 1.0, "calver": 0.5})["share"]
        {'outcome': 0.75, 'calver': 0.25}
        >>> advantage_sources(rows, {"outcome": 1.0, "calver": 0.5}, aggregation="normalize_then_sum")["share"]
        {'outcome': 0.710111, 'calver': 0.289889}
    """
    if aggregation not in ("sum_then_normalize", "normalize_then_sum"):
        raise ValueError(f"unknown aggregation {aggregation!r}; use sum_then_normalize or normalize_then_sum")
    groups: list[list[Mapping[str, Any]]] = []
    key = None
    for row in completions:
        k = (row.get("step"), json.dumps(row.get("prompt"), sort_keys=True, default=str))
        if k != key:
            groups.append([])
            key = k
        groups[-1].append(row)
    names = list(dict.fromkeys(name for row in completions for name in (row.get("rewards") or {})))
    spread = dict.fromkeys(names, 0.0)
    moved = dict.fromkeys(names, 0)
    silent = 0
    for group in groups:
        total = 0.0
        for name in names:
            raw = [(row.get("rewards") or {}).get(name) for row in group]
            if aggregation == "sum_then_normalize":
                xs = [x if _finite(x) else 0.0 for x in raw]
                mean = sum(xs) / len(xs)
                dev = sum(abs(x - mean) for x in xs)
                scaled = dev
            else:
                xs = [float(x) for x in raw if _finite(x)]
                mean = sum(xs) / len(xs) if xs else 0.0
                dev = sum(abs(x - mean) for x in xs)
                std = math.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else 0.0
                scaled = dev / (std + 1e-4) if len(xs) > 1 else 0.0
            moved[name] += dev > 1e-12
            term = abs(float(weights.get(name, 0.0))) * scaled if dev > 1e-12 else 0.0
            spread[name] += term
            total += term
        silent += total <= 1e-12
    grand = sum(spread.values())
    return {
        "groups": len(groups),
        "groups_without_signal": silent,
        "share": {n: round(spread[n] / grand, 6) if grand else 0.0 for n in names if weights.get(n)},
        "groups_moved_by": moved,
        "aggregation": aggregation,
    }


def render_per_kind(per_kind: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> list[str]:
    """Markdown rows: per checkpoint, ``answer / all six`` per query kind."""
    kinds = sorted({kind for per in per_kind.values() for kind in per})
    lines = ["| checkpoint | " + " | ".join(kinds) + " |", "|" + "---|" * (len(kinds) + 1)]
    for label, per in per_kind.items():
        cells = [
            f"{per[k]['answer_rate']:.2f} / {per[k]['all_six_rate']:.2f}" if k in per else "—" for k in kinds
        ]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# ---------------------------------------------------------------------------------------------
# rendering
def _task_rows(summary: Mapping[str, Any], task: str) -> list[str]:
    ks = summary["ks"]
    kmax, order = str(max(ks)), list(summary["checkpoints"])
    head = [
        "checkpoint",
        "Pass@1",
        f"Pass@{kmax}",
        f"CoT-Pass@{kmax}",
        "all six (per completion)",
        "mean S/6",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label in order:
        m = summary["checkpoints"][label]["tasks"][task]
        mean_score = m["calver_mean_score"]
        lines.append(
            "| "
            + " | ".join(
                [
                    label,
                    format_interval(m["pass@k"].get("1")),
                    format_interval(m["pass@k"].get(kmax)),
                    format_interval(m["cot_pass@k"].get(kmax)),
                    format_interval(m["calver_all_six"]),
                    "undefined" if mean_score is None else f"{mean_score:.3f}",
                ]
            )
            + " |"
        )
    checks = ["| checkpoint | " + " | ".join(CALVER_CHECKS) + " |", "|" + "---|" * (len(CALVER_CHECKS) + 1)]
    for label in order:
        m = summary["checkpoints"][label]["tasks"][task]["calver_checks"]
        values = [
            ("—" if not m[c] or m[c]["value"] is None else f"{m[c]['value']:.2f}") for c in CALVER_CHECKS
        ]
        checks.append(f"| {label} | " + " | ".join(values) + " |")
    paired = [
        f"| checkpoint − {summary['baseline']} | ΔPass@1 | ΔPass@{kmax} | ΔCoT-Pass@1 | ΔCoT-Pass@{kmax} |",
        "|---|---|---|---|---|",
    ]
    for label, p in summary["paired"].items():
        t = p["tasks"][task]
        paired.append(
            f"| {label} | {format_interval(t['pass@k'].get('1'), signed=True)} | "
            f"{format_interval(t['pass@k'].get(kmax), signed=True)} | "
            f"{format_interval(t['cot_pass@k'].get('1'), signed=True)} | "
            f"{format_interval(t['cot_pass@k'].get(kmax), signed=True)} |"
        )
    return [*lines, "", "CALVER per-check pass rates (all completions):", "", *checks, "",
            "Paired differences against the baseline arm (same prompts; 95 % bootstrap over prompts):", "",
            *paired]  # fmt: skip


def render_markdown(
    summary: Mapping[str, Any],
    *,
    title: str,
    preamble: Sequence[str] = (),
    task_titles: Mapping[str, str] = (),
) -> str:
    """The results page: one section per evaluation task, then faithfulness and hints, then the arms' wall times."""
    task_titles = dict(task_titles)
    lines = [f"# {title}", "", *preamble]
    for task in summary["tasks"]:
        lines += ["", f"## {task_titles.get(task, task)}", "", *_task_rows(summary, task)]
    lines += ["", "## Faithfulness metrics and hints", ""]
    head = ["checkpoint", *(name for _, name in _FAITHFULNESS), "hint score (normalised, mean)"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, m in summary["checkpoints"].items():
        cells = [format_interval(m["faithfulness"][key]) for key, _ in _FAITHFULNESS]
        lines.append(
            f"| {label} | " + " | ".join(cells) + f" | {format_interval(m['hints']['mean_normalized'])} |"
        )
    lines += ["", f"Paired against {summary['baseline']}:", ""]
    lines += ["| checkpoint | " + " | ".join(f"Δ {name}" for _, name in _FAITHFULNESS) + " | Δ hint score |",
              "|" + "---|" * (len(_FAITHFULNESS) + 2)]  # fmt: skip
    for label, p in summary["paired"].items():
        cells = [format_interval(p["faithfulness"][key], signed=True) for key, _ in _FAITHFULNESS]
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {format_interval(p['hints'], signed=True)} |")
    return "\n".join(lines) + "\n"


def plot_metrics(summary: Mapping[str, Any], path: str | Path) -> Path:
    """One panel per evaluation task: Pass@1, Pass@K, CoT-Pass@K and all-six rate per checkpoint, with intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kmax = str(max(summary["ks"]))
    metrics = [("Pass@1", "pass@k", "1"), (f"Pass@{kmax}", "pass@k", kmax), (f"CoT-Pass@{kmax}", "cot_pass@k", kmax),
               ("all six", "calver_all_six", None)]  # fmt: skip
    labels = list(summary["checkpoints"])
    fig, axes = plt.subplots(1, len(summary["tasks"]), figsize=(6 * len(summary["tasks"]), 4), squeeze=False)
    width = 0.8 / max(len(labels), 1)
    for ax, task in zip(axes[0], summary["tasks"]):
        for i, label in enumerate(labels):
            m = summary["checkpoints"][label]["tasks"][task]
            values, lows, highs = [], [], []
            for _, key, k in metrics:
                est = m[key].get(k) if k is not None else m[key]
                v = est["value"] if est and est["value"] is not None else float("nan")
                values.append(v)
                lows.append(v - est["ci_low"] if est and est.get("ci_low") is not None else 0.0)
                highs.append(est["ci_high"] - v if est and est.get("ci_high") is not None else 0.0)
            xs = [j + (i - (len(labels) - 1) / 2) * width for j in range(len(metrics))]
            ax.bar(xs, values, width, yerr=[lows, highs], capsize=2, label=label)
        ax.set_xticks(range(len(metrics)), [name for name, _, _ in metrics])
        ax.set(ylim=(0, 1.05), title=task, ylabel="rate (95 % CI over prompts)")
    return _save(fig, axes[0][0], path, legend_size=8)


def plot_reward_curves(
    curves: Mapping[str, Mapping[str, Sequence[tuple[int, float]]]], path: str | Path
) -> Path:
    """Each reward's mean per training step, one panel per reward, one line per arm."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted({name for per_arm in curves.values() for name in per_arm}, key=lambda n: (n == "total", n))
    fig, axes = plt.subplots(1, max(len(names), 1), figsize=(3.2 * max(len(names), 1), 3), squeeze=False)
    for ax, name in zip(axes[0], names):
        for arm, per_arm in curves.items():
            points = per_arm.get(name) or []
            if points:
                ax.plot([s for s, _ in points], [v for _, v in points], label=arm, lw=1.2)
        ax.set(title=name, xlabel="step")
    return _save(fig, axes[0][0], path, legend_size=7)


def _save(fig, legend_axis, path: str | Path, *, legend_size: int) -> Path:
    import matplotlib.pyplot as plt

    legend_axis.legend(fontsize=legend_size)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_json(path: str | Path, payload: Any) -> Path:
    """Pretty JSON with a trailing newline (NaN refused: a results file must parse everywhere)."""
    path = Path(path)
    path.write_text(json.dumps(payload, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    return path
