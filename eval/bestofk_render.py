"""Markdown tables and the accuracy-vs-K plot of a CLEAR best-of-K run (`faithgrpo.eval.clear_bestofk`)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from faithgrpo.eval.metrics.bestofk import GRADINGS, SELECTORS
from faithgrpo.eval.metrics.passk import Estimate

__all__ = ["format_estimate", "render_markdown", "write_plot"]

_GRADING_TITLES = {
    "valid": "judge-graded (any graph-valid answer counts, listed or not)",
    "exact": "exact match to the listed answer (any listed member)",
}


def format_estimate(est: Estimate, digits: int = 3) -> str:
    """``0.333 [0.210, 0.460]``; ``n/a`` when undefined; no interval when there is none.

    Example:
        >>> format_estimate(Estimate(0.5, 0.25, 0.75, n=4)), format_estimate(Estimate.undefined("none"))
        ('0.500 [0.250, 0.750]', 'n/a')
    """
    if est.value is None:
        return "n/a"
    if est.ci_low is None or est.ci_high is None:
        return f"{est.value:.{digits}f}"
    return f"{est.value:.{digits}f} [{est.ci_low:.{digits}f}, {est.ci_high:.{digits}f}]"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def render_markdown(report: Any) -> str:
    """The run as Markdown: settings, accuracy tables under both gradings, audit, strata, pool figures."""
    cfg, result = report.config, report.result
    strata = Counter(q["stratum"] for q in report.questions)
    gen = report.generation
    lines = [
        "# CLEAR best-of-K selection",
        "",
        f"- model: `{cfg['model']}`"
        + (f", adapter `{cfg['adapter']}`" if cfg.get("adapter") else "")
        + f", backend `{cfg['backend']}`",
        f"- questions: {result.questions} find-one-valid CLEAR questions from `{cfg['clear']}` ("
        + ", ".join(f"{name}: {n}" for name, n in sorted(strata.items()))
        + ")",
        f"- samples per question G = {result.samples}; K ∈ {list(result.ks)}; {result.subsets} seeded "
        "K-subsets per question when K < G",
        f"- sampling: temperature {cfg['temperature']}, top-p {cfg['top_p']}, max {cfg['max_new_tokens']} "
        f"new tokens, seed {cfg['seed']}",
        "- generation: "
        + ("cached completions reused" if gen.get("cached") else f"{gen.get('new_tokens', 0)} new tokens")
        + (f" at {gen['tokens_per_second']:.1f} tokens/s" if gen.get("tokens_per_second") else "")
        + f"; grading (CALVER + judge) {report.grading_seconds:.2f} s",
        f"- intervals: {cfg['confidence']:.0%} bootstrap over questions ({cfg['n_bootstrap']} resamples); "
        "the CALVER − plurality difference is paired per question",
    ]
    if report.skipped:
        lines.append(
            "- records left out: " + ", ".join(f"{why}: {n}" for why, n in sorted(report.skipped.items()))
        )
    for grading in GRADINGS:
        lines += ["", f"## Accuracy, {_GRADING_TITLES[grading]}", ""]
        rows = [
            [str(k)]
            + [format_estimate(result.accuracy[k][s][grading]) for s in SELECTORS]
            + [format_estimate(result.paired[k][grading])]
            for k in result.ks
        ]
        lines += _table(["K", *SELECTORS, "CALVER − plurality"], rows)
    lines += [
        "",
        "## Audit (counts over drawn subsets)",
        "",
        "*valid pools*: subsets holding a valid answer; *invalid unique plurality*: an invalid answer has "
        "strictly the most votes; *repairs* / *new errors*: CALVER valid where plurality is invalid / the "
        "reverse, among valid pools; *valid, not listed*: CALVER picks that are valid but differ from "
        "every listed answer.",
        "",
    ]
    rows = [
        [
            str(a.k),
            str(a.draws),
            str(a.with_valid),
            str(a.invalid_unique_plurality),
            str(a.calver_valid_despite_plurality),
            str(a.repairs),
            str(a.new_errors),
            str(a.calver_valid),
            str(a.calver_valid_not_listed),
        ]
        for a in result.audit.values()
    ]
    lines += _table(
        [
            "K",
            "draws",
            "valid pools",
            "invalid unique plurality",
            "CALVER valid there",
            "repairs",
            "new errors",
            "CALVER valid",
            "valid, not listed",
        ],
        rows,
    )
    k = max(result.ks)
    lines += ["", f"## By stratum (K = {k})", ""]
    rows = []
    for stratum, by_k in result.by_stratum.items():
        cells = [by_k[k][s][gr] for gr in GRADINGS for s in ("calver", "plurality")]
        rows.append([stratum, str(cells[0].n)] + [format_estimate(c, 2) for c in cells])
    lines += _table(
        ["stratum", "n", "CALVER valid", "plurality valid", "CALVER exact", "plurality exact"], rows
    )
    ps = report.pool_stats
    hist = ", ".join(f"S={s}: {n}" for s, n in ps["calver_score_histogram"].items())
    lines += [
        "",
        "## Pools",
        "",
        f"{ps['completions']} completions: {ps['with_answer']} with a parsable answer, {ps['valid']} valid, "
        f"{ps['exact']} equal to a listed answer; {ps['pools_with_valid']} of {result.questions} pools hold a "
        f"valid answer. CALVER scores: {hist}.",
        "",
    ]
    return "\n".join(lines)


def write_plot(report: Any, path: str | Path) -> bool:
    """Accuracy vs K per selector, one panel per grading, with interval bars; ``False`` without matplotlib."""
    try:
        import matplotlib
    except ImportError:
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    result = report.result
    ks = list(result.ks)
    fig, axes = plt.subplots(1, len(GRADINGS), figsize=(5.5 * len(GRADINGS), 4), squeeze=False)
    for ax, grading in zip(axes[0], GRADINGS):
        for i, selector in enumerate(SELECTORS):
            points = [(k, result.accuracy[k][selector][grading]) for k in ks]
            points = [(k, e) for k, e in points if e.value is not None]
            if not points:
                continue
            xs = [k for k, _ in points]
            ys = [e.value for _, e in points]
            low = [e.value - (e.ci_low if e.ci_low is not None else e.value) for _, e in points]
            high = [(e.ci_high if e.ci_high is not None else e.value) - e.value for _, e in points]
            ax.errorbar(xs, ys, yerr=[low, high], marker="o", capsize=3, color=f"C{i}", label=selector)
        ax.set_xscale("log", base=2)
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("K (samples to select from)")
        ax.set_ylabel("accuracy of the selected answer")
        ax.set_title(_GRADING_TITLES[grading].split(" (")[0], fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"CLEAR best-of-K, {result.questions} questions, G = {result.samples}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True
