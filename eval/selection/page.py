"""The selection results page: every family's report side by side, with the CALVER paper's numbers.

    python -m faithgrpo.eval.selection.page recipes/results/selection --notes recipes/results/selection_notes.md \\
        --out recipes/results/selection_cpu.md

reads every ``<policy>-<family>.json`` (and its ``.timing.json``) in the folder, and writes the
page (Markdown), ``selection_cpu.json`` (the key rows) and ``selection_cpu.png`` (accuracy by K).
``--notes`` is a hand-written Markdown file put under the summary: what the numbers say.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from faithgrpo.eval.selection.report import family_markdown

__all__ = ["PAPER", "key_rows", "main", "render_page"]

# The CALVER paper's figures (accuracy of the selected answer, validity grading), for comparison.
PAPER = {
    "clear_several_valid": {
        "calver": 0.421,
        "reward_model": 0.305,
        "plurality": 0.309,
        "judge": 0.274,
        "confidence": 0.301,
        "structure": 0.235,
    },
    "sft_policy_by_k": {"calver": {1: 0.206, 32: 0.579}, "plurality": {32: 0.325}},
    "gap_points": {2: 7.7, 32: 25.4},
    "graph_from_text_gain_points": (14.2, 17.6),
    "audited_valid_not_listed": (11, 21),
    "scoring_share_of_generation_at_k8": 0.07,
}
KEY_KS = (1, 8, 32)
KEY_SELECTORS = ("calver", "plurality", "structure", "judge", "confidence", "oracle")


def _value(result: dict[str, Any], k: int, selector: str, grading: str) -> float | None:
    cell = result["accuracy"].get(str(k), {}).get(selector, {}).get(grading)
    return None if not cell else cell.get("value")


def key_rows(report: dict[str, Any]) -> dict[str, Any]:
    """K = 1, 8, 32 × the key selectors × both gradings, plus the paired CALVER − plurality."""
    result = report["result"]
    rows: dict[str, Any] = {"questions": report["questions_pooled"], "complete": report["complete"]}
    for k in KEY_KS:
        if str(k) not in result["accuracy"]:
            continue
        rows[str(k)] = {
            grading: {
                s: _value(result, k, s, grading) for s in KEY_SELECTORS if s in result["accuracy"][str(k)]
            }
            for grading in ("valid", "exact")
        }
        paired = result["paired_calver_minus"][str(k)]["plurality"]
        rows[str(k)]["calver_minus_plurality"] = {
            g: {key: paired[g][key] for key in ("value", "ci_low", "ci_high")} for g in ("valid", "exact")
        }
    return rows


def _fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def _summary(reports: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| family | policy | questions | K | calver valid | plurality valid | structure valid | calver exact "
        "| plurality exact | structure exact | calver − plurality (valid) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for report in reports:
        if not report.get("result"):
            continue
        rows = key_rows(report)
        for k in KEY_KS:
            row = rows.get(str(k))
            if row is None:
                continue
            v, e, d = row["valid"], row["exact"], row["calver_minus_plurality"]["valid"]
            interval = (
                "–" if d["value"] is None else f"{d['value']:+.3f} [{d['ci_low']:+.2f}, {d['ci_high']:+.2f}]"
            )
            lines.append(
                f"| {report['family']} | {report['policy']} | {rows['questions']} | {k} | {_fmt(v.get('calver'))} "
                f"| {_fmt(v.get('plurality'))} | {_fmt(v.get('structure'))} | {_fmt(e.get('calver'))} "
                f"| {_fmt(e.get('plurality'))} | {_fmt(e.get('structure'))} | {interval} |"
            )
    return lines


def _regime(report: dict[str, Any]) -> list[str]:
    lines = [
        "| stratum | questions | share with several valid answers | mean valid answers | distinct valid per pool "
        "| pools with a valid answer | valid share |",
        "|---|---|---|---|---|---|---|",
    ]
    for stratum, r in report.get("regime", {}).items():
        several = r["share_with_several_valid"]
        admitted = r["mean_valid_answers_admitted"]
        lines.append(
            f"| {stratum} | {r['questions']} | {_fmt(several)} | {'–' if admitted is None else f'{admitted:.1f}'} "
            f"| {r['mean_distinct_valid_in_pool']:.2f} | {r['pools_with_valid']} | {r['mean_valid_share']:.3f} |"
        )
    return lines


def _audit(report: dict[str, Any]) -> list[str]:
    lines = [
        "| K | draws | with a valid answer | invalid unique plurality | CALVER valid there | repairs | new errors "
        "| CALVER valid, not listed |",
        "|---|---|---|---|---|---|---|---|",
    ]
    audit = report["result"]["audit"]
    for k in sorted(audit, key=int):  # JSON keys are strings: "16" must not sort before "2"
        a = audit[k]
        lines.append(
            f"| {k} | {a['draws']} | {a['with_valid']} | {a['invalid_unique_plurality']} "
            f"| {a['calver_valid_despite_plurality']} | {a['repairs']} | {a['new_errors']} "
            f"| {a['calver_valid_not_listed']} of {a['calver_valid']} |"
        )
    return lines


def render_page(reports: list[dict[str, Any]], timings: dict[str, dict[str, Any]], notes: str = "") -> str:
    """The whole page (module docstring)."""
    lines = [
        "# Best-of-K selection: CALVER against plurality, structure-only, confidence and random",
        "",
        "Written by `python -m faithgrpo.eval.selection.page` from the per-family reports of "
        "`faithgrpo select` (`recipes/selection_cpu.sh`). Every number is re-derived from the frozen pools "
        "in `recipes/results/selection/pools/` without a model: `OFFLINE=1 bash recipes/selection_cpu.sh`.",
        "",
        "## Key rows (K = 1, 8, 32)",
        "",
        *_summary(reports),
        "",
        "The paper (CALVER; CLEAR find-one-valid questions with several graph-valid answers, validity grading): "
        f"CALVER {PAPER['clear_several_valid']['calver']:.3f}, plurality {PAPER['clear_several_valid']['plurality']:.3f}, "
        f"structure-only {PAPER['clear_several_valid']['structure']:.3f}, confidence "
        f"{PAPER['clear_several_valid']['confidence']:.3f}, LLM judge {PAPER['clear_several_valid']['judge']:.3f}, "
        f"reward model {PAPER['clear_several_valid']['reward_model']:.3f}; with an SFT policy CALVER "
        f"{PAPER['sft_policy_by_k']['calver'][1]:.3f} at K = 1 and {PAPER['sft_policy_by_k']['calver'][32]:.3f} "
        f"at K = 32, plurality {PAPER['sft_policy_by_k']['plurality'][32]:.3f} at K = 32 (gap 7.7 points at K = 2, "
        "25.4 at K = 32); graph from text: +14.2 / +17.6 points over plurality; symbolic scoring ~7 % of "
        "generation cost at K = 8.",
        "",
    ]
    if notes.strip():
        lines += [notes.strip(), ""]
    for report in reports:
        lines += family_markdown(report)
        if report.get("result"):
            lines += ["Regime by stratum:", "", *_regime(report), "", "Audit (counts over drawn subsets):", "",
                      *_audit(report), ""]  # fmt: skip
        stem = f"{report['policy']}-{report['family']}"
        ps, timing = report["pool_stats"], timings.get(stem, {})
        share = timing.get("verifier_share_at_k8")
        lines += [
            f"Pools: {ps['completions']} completions, {ps['new_tokens']} new tokens (mean "
            f"{_fmt(ps['mean_tokens'])}, {ps['budget_hits']} at the budget), {ps['with_answer']} with an answer, "
            f"{ps['valid']} valid, {ps['exact']} exact; sampled in {report['generation_seconds']:.0f} s. "
            + ("" if share is None else f"Verifier share of wall time at K = 8: {100 * share:.1f} %."),
            "",
        ]
    return "\n".join(lines) + "\n"


def write_plot(reports: list[dict[str, Any]], path: Path) -> bool:
    """Accuracy (valid grading) by K, one panel per family; ``False`` without matplotlib."""
    try:
        import matplotlib
    except ImportError:
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [r for r in reports if r.get("result")]
    if not shown:
        return False
    fig, axes = plt.subplots(1, len(shown), figsize=(4.2 * len(shown), 3.8), squeeze=False)
    for ax, report in zip(axes[0], shown):
        result = report["result"]
        ks = result["ks"]
        for i, selector in enumerate((*result["selectors"], "oracle")):
            ys = [_value(result, k, selector, "valid") for k in ks]
            style = {"linestyle": "--", "color": "grey"} if selector == "oracle" else {"color": f"C{i}"}
            ax.plot(ks, ys, marker="o", label=selector, **style)
        ax.set_xscale("log", base=2)
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(f"{report['family']} ({report['policy']}, n={report['questions_pooled']})", fontsize=9)
        ax.set_xlabel("K")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("selected answer valid")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m faithgrpo.eval.selection.page", description=__doc__.split("\n")[0]
    )
    parser.add_argument("folder", help="folder of <policy>-<family>.json reports")
    parser.add_argument("--out", default="recipes/results/selection_cpu.md", help="the page (Markdown)")
    parser.add_argument("--notes", default=None, help="hand-written Markdown put under the summary")
    args = parser.parse_args(argv)
    folder = Path(args.folder)
    files = sorted(p for p in folder.glob("*.json") if not p.name.endswith(".timing.json"))
    if not files:
        print(f"error: no <policy>-<family>.json report in {folder}", file=sys.stderr)
        return 2
    order = ("causal_graph", "causal_story", "causal_bn", "causal_bn_story", "knights_knaves", "clear")
    reports = [json.loads(p.read_text(encoding="utf-8")) for p in files]
    reports.sort(
        key=lambda r: (r["policy"] != "sft", order.index(r["family"]) if r["family"] in order else 99)
    )
    timings = {}
    for p in folder.glob("*.timing.json"):
        timings[p.name[: -len(".timing.json")]] = json.loads(p.read_text(encoding="utf-8"))
    notes = Path(args.notes).read_text(encoding="utf-8") if args.notes and Path(args.notes).exists() else ""
    out = Path(args.out)
    out.write_text(render_page(reports, timings, notes), encoding="utf-8")
    summary = {f"{r['policy']}-{r['family']}": key_rows(r) for r in reports if r.get("result")}
    out.with_suffix(".json").write_text(
        json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    write_plot(reports, out.with_suffix(".png"))
    print(f"page: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
