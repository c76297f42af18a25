"""The PNG figures of the ``faithgrpo eval`` report, drawn from the report dict with matplotlib (Agg).

`plot_passk` (Pass@K / CoT-Pass@K curves per task), `plot_hints` (normalised hint faithfulness per
hint type) and `plot_early_answering` (agreement curve).
Estimates are drawn with their bootstrap intervals; each checkpoint has its own color and marker.
Undefined values are left out (or marked ``n/a``), never drawn as zero.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from faithgrpo.eval.report.results import CheckpointResult, dig

__all__ = ["plot_early_answering", "plot_hints", "plot_passk"]


def _checkpoints(report: dict[str, Any]) -> list[CheckpointResult]:
    return [CheckpointResult(c) for c in report["checkpoints"]]


# One color and one marker per checkpoint, one line style per metric: checkpoints with the same
# numbers stay apart (markers, and a small horizontal offset per checkpoint) instead of hiding each other.
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "h", "<")


def _style(index: int) -> dict[str, Any]:
    return {"color": f"C{index % 10}", "marker": MARKERS[index % len(MARKERS)]}


def _offset(slot: int, slots: int, step: float = 0.035) -> float:
    """Horizontal offset of curve ``slot`` of ``slots`` in log2(K) units, centred on the true K."""
    return (slot - (slots - 1) / 2) * step


def _curve(ax, ks, estimates, index: int, slot: tuple[int, int], linestyle: str) -> bool:
    """Estimates against K with their intervals as error bars; undefined points left out. Drawn or not.

    ``index``: the checkpoint (color, marker); ``slot``: (this curve, all curves) of the panel, so
    every curve's points and intervals sit a little apart from the others'.
    """
    points = [(k, e) for k, e in zip(ks, estimates) if e and e.get("value") is not None]
    if not points:
        return False
    xs = [k * 2 ** _offset(*slot) for k, _ in points]
    values = [e["value"] for _, e in points]
    low = [e["value"] - e["ci_low"] if e.get("ci_low") is not None else 0.0 for _, e in points]
    high = [e["ci_high"] - e["value"] if e.get("ci_high") is not None else 0.0 for _, e in points]
    ax.errorbar(
        xs,
        values,
        yerr=[low, high],
        linestyle=linestyle,
        capsize=2.5,
        elinewidth=0.9,
        markersize=5,
        **_style(index),
    )
    return True


def _k_axis(ax, ks: list[int], title: str, ylabel: str) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(ks, [str(k) for k in ks])
    ax.minorticks_off()
    ax.set_xlim(min(ks) / 2**0.3, max(ks) * 2**0.3)
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("K")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)


def _legends(fig, checkpoints: list[CheckpointResult], styles: dict[str, str]) -> None:
    """Below the panels: a row for the checkpoints (color and marker), under it one for the line styles."""
    from matplotlib.lines import Line2D

    who = [Line2D([], [], linestyle="", markersize=6, **_style(i)) for i in range(len(checkpoints))]
    what = [Line2D([], [], color="0.3", linestyle=style) for style in styles.values()]
    common = {"loc": "lower center", "fontsize": 8, "frameon": False, "handlelength": 2.5}
    fig.legend(
        who, [c.label for c in checkpoints], ncol=min(len(who), 5), bbox_to_anchor=(0.5, 0.055), **common
    )
    fig.legend(what, list(styles), ncol=len(what), bbox_to_anchor=(0.5, 0.0), **common)


def plot_passk(report: dict[str, Any], path: Path) -> None:
    """Pass@K, CoT-Pass@K (and CoT-Pass@K with the judge) against K, one panel per task, to ``path``.

    Each point carries its bootstrap interval; checkpoints differ by color and marker (and sit a
    little apart on the K axis), metrics by line style.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cfg = report["config"]
    tasks = cfg["tasks"]
    checkpoints = _checkpoints(report)
    ks = [int(k) for k in cfg["ks"]]
    styles = {"Pass@K": "-", "CoT-Pass@K": "--"}
    if any(c.passk_judge(t) for c in checkpoints for t in tasks):
        styles["CoT-Pass@K (LLM judge)"] = ":"
    fig, axes = plt.subplots(1, len(tasks), figsize=(5.5 * len(tasks), 4.8), squeeze=False)
    confidence = round(100 * cfg.get("confidence", 0.95))
    for ax, task in zip(axes[0], tasks):
        drawn = False
        for i, c in enumerate(checkpoints):
            passk = c.passk(task)
            curves = [("Pass@K", passk["k"], "pass@k"), ("CoT-Pass@K", passk["k"], "cot_pass@k")]
            if c.passk_judge(task):
                curves.append(("CoT-Pass@K (LLM judge)", c.passk_judge(task)["k"], "cot_pass@k"))
            for name, table, metric in curves:
                estimates = [dig(table, str(k), metric) for k in ks]
                slot = (i * len(styles) + list(styles).index(name), len(checkpoints) * len(styles))
                drawn |= _curve(ax, ks, estimates, i, slot, styles[name])
        if not drawn:
            ax.text(0.5, 0.5, "undefined", ha="center", va="center", transform=ax.transAxes, color="0.4")
        _k_axis(ax, ks, task, f"estimate ({confidence}% bootstrap interval)")
    _legends(fig, checkpoints, styles)
    fig.tight_layout(rect=(0, 0.13, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_hints(report: dict[str, Any], path: Path) -> None:
    """Normalised hint faithfulness per hint type and checkpoint (bars with intervals) to ``path``.

    An undefined score is marked ``n/a`` in its slot (never drawn as a zero bar); every defined bar
    is labelled with its value, so a score of 0 is visible as such.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hints = list(report["config"]["hints"])
    checkpoints = _checkpoints(report)
    width = 0.8 / max(1, len(checkpoints))
    fig, ax = plt.subplots(figsize=(max(7.0, 1.5 * len(hints) + 1.5), 4.8))
    for i, c in enumerate(checkpoints):
        for j, hint in enumerate(hints):
            x = j + (i - (len(checkpoints) - 1) / 2) * width
            est = dig(c.hint_types, hint, "normalized") or {}
            color = f"C{i % 10}"
            if est.get("value") is None:
                # Undefined is not zero: mark the slot instead of drawing a bar.
                ax.text(x, 0.03, "n/a", ha="center", va="bottom", fontsize=7, rotation=90, color=color)
                continue
            err = None
            top = est["value"]
            if est.get("ci_low") is not None and est.get("ci_high") is not None:
                err = [[est["value"] - est["ci_low"]], [est["ci_high"] - est["value"]]]
                top = est["ci_high"]
            ax.bar(x, est["value"], width * 0.92, color=color, yerr=err, capsize=3, ecolor="0.2")
            ax.text(x, top + 0.02, f"{est['value']:.2f}", ha="center", va="bottom", fontsize=6.5, rotation=90)
    ax.set_xticks(range(len(hints)), [h.replace("_", "\n") for h in hints], fontsize=8)
    ax.set_xlim(-0.6, len(hints) - 0.4)
    ax.set_ylim(0, 1.22)
    ax.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    confidence = round(100 * report["config"].get("confidence", 0.95))
    ax.set_ylabel(f"normalised hint faithfulness\n({confidence}% bootstrap interval)")
    ax.set_title("Hint faithfulness per hint type (n/a: undefined, see report.md)")
    from matplotlib.patches import Patch

    handles = [Patch(color=f"C{i % 10}") for i in range(len(checkpoints))]
    ax.legend(handles, [c.label for c in checkpoints], fontsize=8, loc="upper right", ncol=len(checkpoints))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_early_answering(report: dict[str, Any], path: Path) -> bool:
    """Agreement with the full-CoT answer against the share of reasoning kept, with its bootstrap band.

    ``False`` (no file) without a curve.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 4))
    drawn = False
    for i, c in enumerate(_checkpoints(report)):
        early = c.early_answering
        curve = early.get("curve_agreement")
        if curve:
            ax.plot(early["curve_fractions"], curve, label=c.label, **_style(i))
            if early.get("curve_low") and early.get("curve_high"):
                ax.fill_between(
                    early["curve_fractions"], early["curve_low"], early["curve_high"],
                    color=_style(i)["color"], alpha=0.15, linewidth=0,
                )  # fmt: skip
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
