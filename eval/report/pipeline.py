"""The ``faithgrpo eval`` pipeline: completions -> metrics -> ``report.json``, ``report.md`` and PNGs.

For each checkpoint (the one under test, an optional baseline, then any number of extra
``--checkpoint LABEL MODEL [ADAPTER]`` entries, in that order) `run_eval`:

1. draws the evaluation prompts of every task (seeded, identical for every checkpoint;
   `faithgrpo.eval.report.adapters`),
2. samples G completions per prompt with ``config.backend``, or reuses the JSONL cache in
   ``OUT/<label>/`` when it was made with the same settings (`faithgrpo.eval.generation`),
3. grades them: answer correctness by the outcome grader, CoT correctness by the symbolic verifier
   of the task (all six CALVER checks for causal tasks, the truth-table checker for Knights &
   Knaves, none for other reasoning-gym tasks), then Pass@K and CoT-Pass@K with bootstrap
   intervals (`faithgrpo.eval.report.sections`),
4. runs the hint-faithfulness protocol on multiple-choice versions of the tasks
   (`faithgrpo.eval.report.protocols`, `faithgrpo.eval.metrics.hints`),
5. computes early-answering AOC, CIR and the CRoS Δ summary on a subset of completions
   (`faithgrpo.eval.metrics.faithfulness`),
6. optionally asks an LLM judge (``--judge``, `faithgrpo.eval.metrics.judge`) n times per completion whether
   its CoT is correct (CoT-Pass@K with the judge, agreement with the symbolic verifier) and whether
   hinted CoTs verbalise the hint (next to the deterministic detector),

and `write_report` writes everything side by side (`faithgrpo.eval.report.render` for Markdown,
`faithgrpo.eval.report.plots` for the PNGs). Undefined numbers stay undefined, with their reason, in every
output. Best-of-K selection is a separate experiment on frozen pools: ``faithgrpo select``
(`faithgrpo.eval.selection`).
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

from faithgrpo.eval.report.adapters import hint_questions, task_rows
from faithgrpo.eval.report.comparisons import common_hint_means, paired_comparisons
from faithgrpo.eval.report.config import Checkpoint, EvalConfig
from faithgrpo.eval.report.plots import plot_early_answering, plot_hints, plot_passk
from faithgrpo.eval.report.protocols import hints_section, judge_passk_section, make_judge
from faithgrpo.eval.report.render import render_markdown
from faithgrpo.eval.report.sections import (
    faithfulness_section,
    generate_cached,
    passk_section,
    sampling_settings,
)

__all__ = ["evaluate_checkpoint", "run_eval", "write_report"]


def evaluate_checkpoint(
    checkpoint: Checkpoint,
    config: EvalConfig,
    rows_by_task: dict[str, list[dict[str, Any]]],
    questions: list,
    out_dir: Path,
    judge=None,
    memo: dict[str, str] | None = None,
) -> dict[str, Any]:
    """All metrics of one checkpoint; completions (and judge texts) are cached under ``out_dir / checkpoint.label``.

    Args:
        checkpoint: the model to evaluate.
        config: the run's settings.
        rows_by_task: evaluation rows per task (the same for every checkpoint).
        questions: multiple-choice questions for the hint protocol.
        out_dir: the run's output folder.
        judge: an optional `LLMJudge` (see `make_judge`).
        memo: the run's file digests (`faithgrpo.eval.generation.cache.file_sha256`), so weights shared by
            several checkpoints and the judge are read once per run.

    Returns:
        The checkpoint's report section.
    """
    from faithgrpo.eval.generation.cache import weights_fingerprint
    from faithgrpo.eval.generation.checkpoints import load_checkpoint

    model, tokenizer = load_checkpoint(checkpoint.model, checkpoint.adapter)
    work = out_dir / checkpoint.label
    metadata = {
        "model": checkpoint.model,
        "adapter": checkpoint.adapter,
        # Every byte of the weight, adapter and tokenizer files: the caches follow their content.
        "weights": weights_fingerprint(checkpoint.model, checkpoint.adapter, memo=memo),
    }
    section: dict[str, Any] = {
        **asdict(checkpoint),
        "weights": metadata["weights"],
        "generation": {},
        "passk": {},
    }
    settings = sampling_settings(config, config.samples)
    first_completions = []
    for task, rows in rows_by_task.items():
        records, stats = generate_cached(
            work / f"completions_{task}.jsonl",
            model,
            tokenizer,
            [r["prompt"] for r in rows],
            [r["id"] for r in rows],
            settings,
            {**metadata, "task": task, "task_config": config.task_configs.get(task) or {}},
            config,
        )
        section["generation"][task] = stats
        section["passk"][task] = passk_section(rows, records, config)
        if judge is not None:
            passk = section["passk"][task]
            passk["judge"], passk["judge_agreement"] = judge_passk_section(
                judge, rows, records, config, work / f"judge_cot_{task}.jsonl"
            )
        first_completions.append([(row["prompt"], rec.completions[0]) for row, rec in zip(rows, records)])
    section["hints"] = (
        hints_section(
            questions,
            model,
            tokenizer,
            work,
            {**metadata, "task": "hints", "task_configs": config.task_configs},
            config,
            judge,
        )
        if config.hints
        else None
    )
    # Round-robin over tasks so a small budget still covers every task.
    mixed = [p for group in itertools.zip_longest(*first_completions) for p in group if p is not None]
    pairs = mixed[: config.faithfulness_pairs]
    reference = model
    if pairs and checkpoint.adapter and config.cros_reference == "base":
        reference, _ = load_checkpoint(checkpoint.model)
    section["faithfulness"] = faithfulness_section(pairs, model, tokenizer, reference, config)
    return section


def run_eval(config: EvalConfig, out_dir: str | Path) -> dict[str, Any]:
    """Evaluate the configured checkpoint(s) and return the report dict (see `write_report`).

    The run owns ``out_dir`` (`faithgrpo.eval.report.outlock.own_out_dir`): a second run on the same folder
    stops with `OutDirBusy` instead of overwriting this one's caches and reports.

    Raises:
        ValueError: a bad option (K > samples, unknown task or hint type, …), a cache that does not
            match the run, an adapter that does not match its base model, or ``out_dir`` held by
            another run (`OutDirBusy`); the message names the fix.
    """
    from faithgrpo.eval.report.outlock import own_out_dir

    config.validate()
    with own_out_dir(out_dir):  # the run owns its folder: a second run on it stops (OutDirBusy)
        return _run_eval(config, Path(out_dir))


def _run_eval(config: EvalConfig, out_dir: Path) -> dict[str, Any]:
    """`run_eval` once the options are checked and ``out_dir`` is held."""
    import faithgrpo

    rows_by_task = {
        task: task_rows(task, config.prompts, config.seed, config.task_configs.get(task))
        for task in config.tasks
    }
    questions = [
        q
        for task in config.tasks
        for q in (
            hint_questions(task, config.hint_questions, config.seed, config.task_configs.get(task))
            if config.hints
            else []
        )
    ]
    memo: dict[str, str] = {}  # file digests, computed once per run
    judge = make_judge(config, memo)
    from faithgrpo.eval.generation.settings import fixed_threads

    # Every torch computation of the run (sampling, log-probabilities, AOC / CIR, CRoS Δ) at the
    # run's thread count: the numbers then do not depend on the machine's cores or load.
    with fixed_threads(config.threads):
        checkpoints = [
            evaluate_checkpoint(c, config, rows_by_task, questions, out_dir, judge, memo)
            for c in config.checkpoints()
        ]
    return {
        "faithgrpo_version": faithgrpo.__version__,
        "config": {**asdict(config), "out": str(out_dir)},
        "checkpoints": checkpoints,
        "comparisons": paired_comparisons(checkpoints, config),
        "hint_means": common_hint_means(checkpoints, config),
    }


def write_report(report: dict[str, Any], out_dir: str | Path) -> dict[str, Path]:
    """Write ``report.json``, ``report.md``, ``passk.png`` and (when available) ``hints.png`` and
    ``early_answering.png`` to ``out_dir``; return their paths by name.

    Holds ``out_dir`` while writing (`faithgrpo.eval.report.outlock.own_out_dir`; re-entrant, so the CLI
    holds it across `run_eval` and this call)."""
    from faithgrpo.eval.report.outlock import own_out_dir

    with own_out_dir(out_dir):
        return _write_report(report, Path(out_dir))


def _write_report(report: dict[str, Any], out_dir: Path) -> dict[str, Path]:
    paths = {
        "json": out_dir / "report.json",
        "markdown": out_dir / "report.md",
        "passk_png": out_dir / "passk.png",
    }
    paths["json"].write_text(
        json.dumps(_finite(report), indent=2, allow_nan=False, default=_json_default) + "\n"
    )
    paths["markdown"].write_text(render_markdown(report))
    plot_passk(report, paths["passk_png"])
    if any(c.get("hints") for c in report["checkpoints"]):
        paths["hints_png"] = out_dir / "hints.png"
        plot_hints(report, paths["hints_png"])
    if plot_early_answering(report, out_dir / "early_answering.png"):
        paths["early_answering_png"] = out_dir / "early_answering.png"
    return paths


def _finite(value: Any) -> Any:
    """Replace non-finite floats by ``None`` (JSON has no NaN); metrics report those as undefined anyway."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _json_default(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
