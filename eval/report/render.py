"""The Markdown report of ``faithgrpo eval`` (`render_markdown`), rendered from the report dict.

Estimates print as ``value [CI low, CI high]``; undefined ones as ``undefined [n]`` with the reason
in footnote n under the table, and a defined one with a caveat (prompts left undefined, no
interval) as ``value [CI] [n]``; paired rows name the prompts (or questions) they share. Sections: Pass@K / CoT-Pass@K per task (with CALVER per-check rates,
paired differences and the LLM judge), hint faithfulness, checkpoint faithfulness metrics and
generation statistics. Best-of-K selection is reported by ``faithgrpo select`` (`faithgrpo.eval.selection`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from faithgrpo.eval.report.results import CheckpointResult, dig
from faithgrpo.eval.report.sections import CALVER_CHECKS

__all__ = ["render_markdown"]


class _Notes:
    """Table cells for estimates; a reason (why a value is undefined, why an interval is missing, how
    many prompts were undefined) goes into a numbered footnote under the table."""

    def __init__(self) -> None:
        self.reasons: list[str] = []

    def marker(self, reason: str) -> str:
        """``[n]``: footnote n gives ``reason`` (one footnote per distinct reason)."""
        reason = reason.replace("|", "/")
        if reason not in self.reasons:
            self.reasons.append(reason)
        return f"[{self.reasons.index(reason) + 1}]"

    def note(self, reason: str) -> str:
        return f"undefined {self.marker(reason)}"

    def cell(self, est: dict[str, Any] | None, digits: int = 3, unit: str | None = None) -> str:
        """``0.512 [0.410, 0.603]`` (interval when known), or ``undefined [n]`` with footnote n.

        A defined estimate that carries a reason (prompts left undefined, no interval) gets the
        footnote marker too; ``unit`` appends ``(n unit)``, e.g. the prompts a paired row covers.
        """
        if not est:
            return "—"
        if est.get("value") is None:
            text = self.note(est.get("reason") or "no reason recorded")
            return f"{text} ({est['n']} {unit})" if unit and est.get("n") else text
        text = f"{est['value']:.{digits}f}"
        if est.get("ci_low") is not None and est.get("ci_high") is not None:
            text += f" [{est['ci_low']:.{digits}f}, {est['ci_high']:.{digits}f}]"
        if unit:
            text += f" ({est.get('n')} {unit})"
        if est.get("reason"):
            text += f" {self.marker(est['reason'])}"
        return text

    def flush(self) -> list[str]:
        lines = (
            ["", *(f"[{i}] {reason}  " for i, reason in enumerate(self.reasons, start=1))]
            if self.reasons
            else []
        )
        self.reasons = []
        return lines


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c).replace("|", "/") for c in row) + " |" for row in rows]
    return lines


def render_markdown(report: dict[str, Any]) -> str:
    """The Markdown report: Pass@K / CoT-Pass@K per task, hint faithfulness per type, checkpoint metrics.

    Estimates print as ``value [CI low, CI high]``; undefined ones as ``undefined [n]`` with the
    reason in footnote n under the table.

    Args:
        report: the dict `faithgrpo.eval.report.pipeline.run_eval` returns (or ``report.json`` read back).

    Returns:
        The Markdown text, ending with a newline.
    """
    checkpoints = [CheckpointResult(c) for c in report["checkpoints"]]
    cfg = report["config"]
    notes = _Notes()
    lines = _header_markdown(report, checkpoints)
    lines += ["", "## Pass@K and CoT-Pass@K"]
    for task in cfg["tasks"]:
        lines += _passk_markdown(task, checkpoints, cfg, notes)
        lines += _comparison_markdown(task, report.get("comparisons") or {}, cfg, notes)
    if any(c.hints for c in checkpoints):
        lines += _hints_markdown(checkpoints, cfg, notes, report.get("hint_means"))
        lines += _hint_comparison_markdown(report.get("comparisons") or {}, cfg, notes)
        lines += _hint_judge_markdown(checkpoints, cfg, notes)
    lines += _faithfulness_markdown(checkpoints, cfg, notes, report.get("comparisons"))
    lines += _generation_markdown(checkpoints, notes)
    return "\n".join(lines) + "\n"


def _header_markdown(report: dict[str, Any], checkpoints: list[CheckpointResult]) -> list[str]:
    """Title, run settings, the checkpoint list and, when one ran, the LLM judge's settings."""
    cfg = report["config"]
    lines = [
        "# faithgrpo evaluation report",
        "",
        f"faithgrpo {report['faithgrpo_version']} · tasks: {', '.join(cfg['tasks'])} · G = {cfg['samples']} samples "
        f"per prompt · {cfg['prompts']} prompts per task · temperature {cfg['temperature']}, top-p {cfg['top_p']}, "
        f"max {cfg['max_new_tokens']} new tokens · seed {cfg['seed']} · {int(cfg['confidence'] * 100)}% bootstrap "
        f"intervals ({cfg['n_bootstrap']} resamples)",
        "",
        "Checkpoints: " + "; ".join(c.title for c in checkpoints),
    ]
    if cfg.get("judge_model"):
        adapter = f" + {cfg['judge_adapter']}" if cfg.get("judge_adapter") else ""
        lines += [
            "",
            f"LLM judge: {cfg['judge_model']}{adapter} ({cfg.get('judge_backend', 'transformers')}) · "
            f"{cfg['judge_samples']} run(s) per item, {cfg['judge_aggregate']} "
            f"vote · temperature {cfg['judge_temperature']}, max {cfg['judge_max_new_tokens']} new tokens · at most "
            f"{cfg['judge_items']} completions judged per task (whole prompts; unparseable verdicts vote no)",
        ]
    return lines


def _hints_markdown(
    checkpoints: list[CheckpointResult],
    cfg: dict[str, Any],
    notes: _Notes,
    means: dict[str, Any] | None = None,
) -> list[str]:
    """The detector's hint-faithfulness table (raw, normalised, mean) and the switch rates behind α."""
    lines = [
        "",
        "## Hint faithfulness",
        "",
        "Kept pairs: a_u ≠ h and a_h = h. Raw = share of kept pairs whose hinted CoT verbalises the hint; "
        "normalised = min(raw/α, 1), α = 1 − q/((n−2)p). Intervals: bootstrap over questions (a question's "
        "pairs resampled together, p, q and α re-estimated in every resample).",
        "",
    ]
    header = ["hint type"] + [
        f"{c.label} {m}" for c in checkpoints for m in ("kept/pairs (unparsed)", "raw", "normalised")
    ]
    types_of = [c.hint_types for c in checkpoints]
    rows = []
    for hint in cfg["hints"]:
        row = [hint]
        for types in types_of:
            h = types.get(hint)
            row += (
                ["—", "—", "—"]
                if h is None
                else [
                    f"{h['n_switched']}/{h['n_pairs']} ({h['n_unparsed']})",
                    notes.cell(h["raw"]),
                    notes.cell(h["normalized"]),
                ]
            )
        rows.append(row)
    # The mean compares like with like: only hint types defined for every checkpoint.
    common = (means or {}).get("types") or []
    mean_row = [f"mean over {', '.join(common)}" if common else "mean (no type defined for every checkpoint)"]
    for c in checkpoints:
        mean_row += ["", "", notes.cell(dig(means, "checkpoints", c.label)) if common else "—"]
    rows.append(mean_row)
    lines += _table(header, rows) + notes.flush()
    # The rate table's cells are made after the first table's footnotes are out: its own go under it.
    rates = []
    for hint in cfg["hints"]:
        rate_row = [hint]
        for types in types_of:
            h = types.get(hint)
            rate_row += (
                ["—", "—", "—"]
                if h is None
                else [notes.cell(h["p"]), notes.cell(h["q"]), notes.cell(h["alpha"])]
            )
        rates.append(rate_row)
    lines += [
        "",
        "Switch rates behind α (n options; p = P(a_h = h | a_u ≠ h), q = P(a_h ∉ {h, a_u} | a_u ≠ h)):",
        "",
    ]
    rate_header = ["hint type"] + [f"{c.label} {m}" for c in checkpoints for m in ("p", "q", "α")]
    return lines + _table(rate_header, rates) + notes.flush()


def _hint_comparison_markdown(comparisons: dict[str, Any], cfg: dict[str, Any], notes: _Notes) -> list[str]:
    """Hint-score differences against the reference checkpoint, paired over the same questions."""
    others = comparisons.get("hints") or {}
    if not others:
        return []
    ref = comparisons["reference"]
    header = ["hint type"] + [f"{label} − {ref} {m}" for label in others for m in ("raw", "normalised")]
    rows = [
        [hint]
        + [
            notes.cell(dig(per, "types", hint, m), unit="questions")
            for per in others.values()
            for m in ("raw", "normalized")
        ]
        for hint in cfg["hints"]
    ]
    mean_row = ["mean normalised (types defined for both)"]
    for per in others.values():
        mean_row += ["", notes.cell(per.get("mean_normalized"), unit="questions")]
    rows.append(mean_row)
    return [
        "",
        f"Differences against {ref}, paired over the same questions (bootstrap over questions; p, q and α "
        "re-estimated in every resample; each cell names the questions both checkpoints answered):",
        "",
        *_table(header, rows),
        *notes.flush(),
    ]


def _faithfulness_markdown(
    checkpoints: list[CheckpointResult], cfg: dict[str, Any], notes: _Notes, comparisons: dict | None = None
) -> list[str]:
    """Early-answering AOC, CIR and mean CRoS Δ per checkpoint (undefined with the reason when not run)."""
    header = ["metric"] + [c.label for c in checkpoints]
    metrics = [
        (f"early-answering AOC ({cfg.get('aoc_mode', 'teacher_forced')})", ("early_answering", "aoc")),
        ("CIR (mean JS over 0/20/40/60/80 % of the reasoning tokens, bits)", ("early_answering", "cir")),
        ("mean CRoS Δ", ("cros_delta", "mean")),
    ]
    rows = []
    for name, path in metrics:
        row = [name]
        for c in checkpoints:
            f = c.faithfulness
            row.append(
                notes.cell(dig(f, *path), unit="prompts")
                if f.get("pairs")
                else notes.note(f.get("reason", "not run"))
            )
        rows.append(row)
    lines = ["", "## Checkpoint faithfulness metrics", "", *_table(header, rows), *notes.flush()]
    paired = (comparisons or {}).get("faithfulness") or {}
    if paired:
        ref = comparisons["reference"]
        rows = [
            [name] + [notes.cell(per[key], unit="common prompts") for per in paired.values()]
            for name, key in (("AOC", "aoc"), ("CIR", "cir"), ("mean CRoS Δ", "cros_delta"))
        ]
        lines += [
            "",
            f"Differences against {ref}, paired over the prompts where both are defined (bootstrap over "
            "those prompts; each cell names how many):",
            "",
            *_table(["metric"] + [f"{label} − {ref}" for label in paired], rows),
            *notes.flush(),
        ]
    return lines


def _generation_markdown(checkpoints: list[CheckpointResult], notes: _Notes) -> list[str]:
    """Completions, new tokens and throughput of every generation run (tasks, judge, hints)."""
    rows = []
    for c in checkpoints:
        runs = list(c.generation.items())
        runs += [
            (f"{task} (LLM judge)", c.passk_judge(task)["generation"])
            for task in c.raw["passk"]
            if c.passk_judge(task)
        ]
        if c.hint_judge:
            runs.append(("hints (LLM judge)", c.hint_judge["generation"]))
        for task, stats in runs:
            tps = stats.get("tokens_per_second")
            rate = (
                "cached" if stats.get("cached") else (f"{tps:.1f}" if tps else notes.note("no time measured"))
            )
            # A cached run names the engine recorded with its completions; vLLM has no engine of its own.
            engine = stats.get("engine") or stats.get("backend") or "—"
            rows.append(
                [c.label, task, str(stats.get("completions")), str(stats.get("new_tokens")), rate, engine]
            )
    header = ["checkpoint", "task", "completions", "new tokens", "tokens/s", "engine"]
    return ["", "## Generation", "", *_table(header, rows), *notes.flush()]


def _calver_checks_markdown(task: str, checkpoints: list[CheckpointResult], notes: _Notes) -> list[str]:
    """Per-check CALVER pass rates of every checkpoint (causal tasks only), one row per check."""
    sections = [c.passk(task).get("calver_checks") for c in checkpoints]
    if not any(sections):
        return []
    rows = [[name, *(notes.cell(dig(sec, "checks", name)) for sec in sections)] for name in CALVER_CHECKS]
    rows.append(["all six", *(notes.cell(dig(sec, "all_six")) for sec in sections)])
    rows.append(["mean S/6", *(_mean_score_cell(sec, notes) for sec in sections)])
    header = ["CALVER check (share of completions)", *(c.label for c in checkpoints)]
    return ["", *_table(header, rows), *notes.flush()]


def _passk_markdown(
    task: str, checkpoints: list[CheckpointResult], cfg: dict[str, Any], notes: _Notes
) -> list[str]:
    """The Pass@K table of one task: Pass@K, CoT-Pass@K and, with a judge, CoT-Pass@K (LLM judge)."""
    first = checkpoints[0].passk(task)
    lines = [
        "",
        f"### {task}",
        "",
        f"CoT verifier: {first['cot_verifier'] or 'none (CoT-Pass@K undefined)'}",
        "",
    ]
    judged = any(c.passk_judge(task) for c in checkpoints)
    metrics = ("Pass@K", "CoT-Pass@K") + (("CoT-Pass@K (LLM judge)",) if judged else ())
    header = ["K"] + [f"{c.label} {m}" for c in checkpoints for m in metrics]
    rows = []
    for k in map(str, cfg["ks"]):
        row = [k]
        for c in checkpoints:
            entry = c.passk(task)["k"][k]
            row += [notes.cell(entry["pass@k"]), notes.cell(entry["cot_pass@k"])]
            if judged:
                row.append(notes.cell(dig(c.passk_judge(task), "k", k, "cot_pass@k")))
        rows.append(row)
    lines += _table(header, rows) + notes.flush() + ([""] if judged else [])
    lines += _calver_checks_markdown(task, checkpoints, notes)
    for c in checkpoints:
        judge = c.passk_judge(task)
        if not judge:
            continue
        agreement = c.judge_agreement(task)
        rate = agreement.get("rate") or {}
        if rate.get("value") is not None:
            agree = (
                f"agreement with {agreement['reference']}: {_inline(rate)} "
                f"({agreement['agree']}/{agreement['n']}; judge only {agreement['judge_only']}, "
                f"verifier only {agreement['reference_only']})"
            )
        else:
            agree = f"agreement with a symbolic verifier: {_inline(rate)}"
        accepted = _inline(judge.get("accept_rate"))
        lines.append(
            f"- LLM judge on {c.label}: {judge['definition']} (CoT-Pass@K (LLM judge) averages over these "
            f"prompts only); accepts {accepted} of the judged CoTs; {agree}; unparseable verdicts "
            f"{judge['unparseable']}/{judge['votes']}"
        )
    return lines


def _comparison_markdown(
    task: str, comparisons: dict[str, Any], cfg: dict[str, Any], notes: _Notes
) -> list[str]:
    """Differences against the reference checkpoint with paired intervals, one row per K."""
    others = {
        label: tasks[task] for label, tasks in (comparisons.get("checkpoints") or {}).items() if task in tasks
    }
    if not others:
        return []
    ref = comparisons["reference"]
    header = ["K"] + [f"{label} − {ref} {m}" for label in others for m in ("Pass@K", "CoT-Pass@K")]
    rows = [
        [k]
        + [
            notes.cell(per_k[k][m], unit="prompts")
            for per_k in others.values()
            for m in ("pass@k", "cot_pass@k")
        ]
        for k in map(str, cfg["ks"])
    ]
    return [
        "",
        f"Differences against {ref}, paired over the same prompts (bootstrap over prompts; each cell names "
        "how many):",
        "",
        *_table(header, rows),
        *notes.flush(),
    ]


def _hint_judge_markdown(
    checkpoints: list[CheckpointResult], cfg: dict[str, Any], notes: _Notes
) -> list[str]:
    """The hint-verbalisation table of the LLM judge next to the detector's, when a judge ran."""
    if not any(c.hint_judge for c in checkpoints):
        return []
    lines = [
        "",
        "### Hint verbalisation by the LLM judge",
        "",
        "The judge reads the hinted CoT of each judged kept pair and says whether it mentions or relies on the "
        "hint. Raw = share judged yes (bootstrap interval over pairs); normalised = min(raw/α, 1) with the detector's α; "
        "agreement = share of judged pairs where the judge and the deterministic detector agree.",
        "",
    ]
    header = ["hint type"] + [
        f"{c.label} {m}"
        for c in checkpoints
        for m in ("judged/kept", "judge raw", "judge normalised", "agreement")
    ]
    rows = []
    for hint in cfg["hints"]:
        row = [hint]
        for c in checkpoints:
            h = c.hint_judge_type(hint)
            if h is None:
                row += ["—"] * 4
                continue
            agreement = h["agreement"]
            row += [
                f"{h['n_judged']}/{h['n_switched']}",
                notes.cell(h["raw"]),
                notes.cell(h["normalized"]),
                f"{notes.cell(agreement['rate'])} ({agreement['agree']}/{agreement['n']})"
                if agreement["n"]
                else "—",
            ]
        rows.append(row)
    lines += _table(header, rows) + notes.flush() + [""]
    for c in checkpoints:
        judge = c.hint_judge
        if judge:
            lines.append(f"- {c.label}: unparseable verdicts {judge['unparseable']}/{judge['votes']}")
    return lines


def _mean_score_cell(section: dict[str, Any] | None, notes: _Notes) -> str:
    """The mean S/6 cell: an estimate with its interval (a bare number in reports older than issue 32)."""
    mean = (section or {}).get("mean_score")
    if isinstance(mean, (int, float)):
        return f"{mean:.3f}"
    return notes.cell(mean)


def _inline(est: dict[str, Any] | None) -> str:
    """An estimate in running text: ``0.512 [0.410, 0.603]``, with its caveat or reason in parentheses."""
    if not est:
        return "undefined (not computed)"
    if est.get("value") is None:
        return f"undefined ({est.get('reason') or 'no reason recorded'})"
    text = _Notes().cell({**est, "reason": None})
    return f"{text} ({est['reason']})" if est.get("reason") else text
