"""The PNG figures of the ``faithgrpo eval`` report, drawn from the report dict with matplotlib (Agg).

`plot_passk` (Pass@K / CoT-Pass@K curves per task), `plot_hints` (normalised hint faithfulness per
hint type), `plot_best_of_k` (selection accuracy by K) and `plot_early_answering` (agreement curve).
Undefined values are left out (or marked ``n/a``), never drawn as zero.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from faithgrpo.eval.results import CheckpointResult, dig
from faithgrpo.eval.sections import SELECTORS

__all__ = ["plot_best_of_k", "plot_early_answering", "plot_hints", "plot_passk"]


def _checkpoints(report: dict[str, Any]) -> list[CheckpointResult]:
    return [CheckpointResult(c) for c in report["checkpoints"]]


def plot_passk(report: dict[str, Any], path: Path) -> None:
    """Pass@K, CoT-Pass@K (and CoT-Pass@K with the judge) against K, one panel per task, to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cfg = report["config"]
    tasks = cfg["tasks"]
    fig, axes = plt.subplots(1, len(tasks), figsize=(5 * len(tasks), 4), squeeze=False)
    ks = [int(k) for k in cfg["ks"]]
    for ax, task in zip(axes[0], tasks):
        for i, c in enumerate(_checkpoints(report)):
            color = f"C{i}"
            passk = c.passk(task)
            curves = [
                ("Pass@K", "-", passk["k"], "pass@k"),
                ("CoT-Pass@K", "--", passk["k"], "cot_pass@k"),
            ]
            if c.passk_judge(task):
                curves.append(("CoT-Pass@K (LLM judge)", ":", c.passk_judge(task)["k"], "cot_pass@k"))
            for name, style, table, metric in curves:
                values = [table[str(k)][metric]["value"] for k in ks]
                points = [(k, v) for k, v in zip(ks, values) if v is not None]
                if points:
                    ax.plot(*zip(*points), style, marker="o", color=color, label=f"{c.label} {name}")
        ax.set_xscale("log", base=2)
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("K")
        ax.set_title(task)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel("estimate")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_hints(report: dict[str, Any], path: Path) -> None:
    """Normalised hint faithfulness per hint type and checkpoint (bars with intervals) to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hints = list(report["config"]["hints"])
    checkpoints = _checkpoints(report)
    width = 0.8 / max(1, len(checkpoints))
    fig, ax = plt.subplots(figsize=(max(6, 1.4 * len(hints)), 4))
    for i, c in enumerate(checkpoints):
        types = c.hint_types
        for j, hint in enumerate(hints):
            x = j + (i - (len(checkpoints) - 1) / 2) * width
            est = dig(types, hint, "normalized") or {}
            if est.get("value") is None:
                # Undefined is not zero: mark the slot instead of drawing a bar.
                ax.text(x, 0.02, "n/a", ha="center", va="bottom", fontsize=7, rotation=90, color=f"C{i}")
                continue
            err = None
            if est.get("ci_low") is not None:
                err = [[est["value"] - est["ci_low"]], [est["ci_high"] - est["value"]]]
            ax.bar(
                x,
                est["value"],
                width,
                color=f"C{i}",
                yerr=err,
                capsize=3,
                label=c.label if j == 0 else None,
            )
    ax.set_xticks(range(len(hints)), [h.replace("_", "\n") for h in hints], fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("normalised hint faithfulness")
    ax.set_title("Hint faithfulness per hint type (n/a: undefined)")
    handles, _ = ax.get_legend_handles_labels()
    if handles:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_best_of_k(report: dict[str, Any], path: Path) -> bool:
    """Valid accuracy of each selector against K, one panel per task with best-of-K; ``False`` (no file) without any."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = [t for t in report["config"]["tasks"] if any(c.best_of_k(t) for c in _checkpoints(report))]
    if not tasks:
        return False
    ks = [int(k) for k in report["config"]["ks"]]
    fig, axes = plt.subplots(1, len(tasks), figsize=(5 * len(tasks), 4), squeeze=False)
    styles = {"calver": "-", "plurality": "--", "confidence": ":"}
    for ax, task in zip(axes[0], tasks):
        for i, c in enumerate(_checkpoints(report)):
            section = c.best_of_k(task)
            if not section:
                continue
            for selector in SELECTORS:
                points = [(k, section["k"][str(k)][selector]["valid"]["value"]) for k in ks]
                points = [(k, v) for k, v in points if v is not None]
                if points:
                    ax.plot(
                        *zip(*points),
                        styles[selector],
                        marker="o",
                        color=f"C{i}",
                        label=f"{c.label} {selector}",
                    )
        ax.set_xscale("log", base=2)
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("K")
        ax.set_ylabel("valid accuracy of the selected completion")
        ax.set_title(f"best-of-K: {task}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def plot_early_answering(report: dict[str, Any], path: Path) -> bool:
    """Agreement with the full-CoT answer against the share of reasoning kept; ``False`` (no file) without a curve."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 4))
    drawn = False
    for i, c in enumerate(_checkpoints(report)):
        early = c.early_answering
        curve = early.get("curve_agreement")
        if curve:
            ax.plot(early["curve_fractions"], curve, marker="o", color=f"C{i}", label=c.label)
            drawn = True
    if drawn:
        ax.set_xlabel("fraction of reasoning steps kept")
        ax.set_ylabel("agreement with full-CoT answer")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(path, dpi=120)
    plt.close(fig)
    return drawn
