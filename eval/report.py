"""The ``faithgrpo eval`` pipeline: completions -> metrics -> ``report.json``, ``report.md`` and PNGs.

For each checkpoint (the one under test, an optional baseline, then any number of extra
``--checkpoint LABEL MODEL [ADAPTER]`` entries, in that order) `run_eval`:

1. draws the evaluation prompts of every task (seeded, identical for both checkpoints),
2. samples G completions per prompt, or reuses the JSONL cache in ``OUT/<label>/`` when it was
   made with the same settings (`faithgrpo.eval.generation`),
3. grades them: answer correctness by the outcome grader, CoT correctness by the symbolic verifier
   of the task (all six CALVER checks for causal tasks, the truth-table checker for Knights &
   Knaves, none for other reasoning-gym tasks), then Pass@K and CoT-Pass@K with bootstrap
   intervals (`faithgrpo.eval.passk`),
4. runs the hint-faithfulness protocol on multiple-choice versions of the tasks (`faithgrpo.eval.hints`),
5. computes early-answering AOC, CIR and the CRoS Δ summary on a subset of completions
   (`faithgrpo.eval.faithfulness`),
6. optionally asks an LLM judge (``--judge``, `faithgrpo.eval.judge`) n times per completion whether
   its CoT is correct (CoT-Pass@K with the judge, agreement with the symbolic verifier) and whether
   hinted CoTs verbalise the hint (next to the deterministic detector),

and `write_report` renders everything side by side. Undefined numbers stay undefined, with their
reason, in every output.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from faithgrpo.eval.hints import HINT_TYPES, parse_hint_types

__all__ = [
    "FEATURED_TASKS",
    "Checkpoint",
    "EvalConfig",
    "best_of_k_section",
    "check_label",
    "hint_questions",
    "render_markdown",
    "run_eval",
    "task_rows",
    "write_report",
]

FEATURED_TASKS = ("causal_graph", "causal_story", "knights_knaves")
CAUSAL_TASKS = ("causal_graph", "causal_story")
COT_VERIFIERS = {
    "causal_graph": "CALVER (all six checks)",
    "causal_story": "CALVER (all six checks)",
    "knights_knaves": "Knights & Knaves truth table (all checks)",
}
CROS_REFERENCES = ("base", "self")
LABEL_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# Files written next to the per-checkpoint folders: a label must not shadow one of them.
REPORT_FILES = (
    "report.json",
    "report.md",
    "passk.png",
    "hints.png",
    "best_of_k.png",
    "early_answering.png",
)


@dataclass(frozen=True)
class Checkpoint:
    """A model to evaluate: base model reference, optional LoRA adapter, and a report label."""

    label: str
    model: str
    adapter: str | None = None


@dataclass
class EvalConfig:
    """Settings of one ``faithgrpo eval`` run.

    Attributes:
        model, adapter: the checkpoint under test (``"embedded"``/path/hub id, LoRA folder or ``None``).
        label: its report label and cache folder name (``OUT/<label>/``).
        baseline, baseline_adapter: an optional second checkpoint reported side by side.
        baseline_label: the baseline's label.
        extra_checkpoints: more checkpoints, as ``(label, model, adapter or None)`` triples (a pair
            ``(label, model)`` means no adapter), evaluated after the model and the baseline, in order.
        tasks: task names (`FEATURED_TASKS` or any reasoning-gym dataset name).
        task_configs: per task, fields of its reasoning-gym config (e.g. ``{"causal_graph":
            {"min_nodes": 4, "max_nodes": 5}}`` to evaluate on a training distribution); unset
            fields keep the task's defaults.
        ks: the K values of Pass@K; each must be ≤ ``samples``.
        samples: completions per prompt (G).
        prompts: evaluation prompts per task.
        hints: hint types to run (empty: skip hint faithfulness).
        hint_questions: multiple-choice questions per task for the hint protocol.
        min_switched: fewer switched pairs than this leave a hint score undefined.
        faithfulness_pairs: completions scored for AOC / CIR / CRoS Δ (0 skips them).
        cros_reference: ``"base"`` (the model without adapter, i.e. the initial policy, as in
            training) or ``"self"`` (the checkpoint itself) scores CRoS Δ.
        aoc_mode: how early-answering agreement is measured: ``"teacher_forced"`` (the forced
            answer is the greedy continuation) or ``"decode"`` (greedy-decode and compare answers).
        best_of_k: run the best-of-K selection report on causal tasks (CALVER vs plurality vs
            confidence).
        best_of_k_subsets: random K-subsets of the G samples averaged per prompt and K.
        temperature, top_p, max_new_tokens, batch_size, seed: generation settings.
        n_bootstrap, confidence: bootstrap intervals.
        overwrite: regenerate even when a matching cache exists.
        progress: show progress bars.
        judge_model, judge_adapter: an optional LLM judge (base model and LoRA adapter); ``None``
            skips the judge.
        judge_samples: judge runs per judged item (n), combined with ``judge_aggregate``.
        judge_aggregate: ``"any"``, ``"all"`` or ``"majority"`` (strictly more than half say yes).
        judge_max_new_tokens, judge_temperature: generation settings of each judge run.
        judge_items: cap on completions judged per task and checkpoint. The judge reads all G
            completions of the first ``judge_items // samples`` prompts (so must be >= ``samples``),
            which keeps CoT-Pass@K (LLM judge) a per-prompt estimate over whole prompts; it also caps
            the switched pairs judged per hint type.
    """

    model: str = "embedded"
    adapter: str | None = None
    label: str = "model"
    baseline: str | None = None
    baseline_adapter: str | None = None
    baseline_label: str = "baseline"
    extra_checkpoints: tuple[tuple[str, str, str | None], ...] = ()
    tasks: tuple[str, ...] = ("causal_graph", "knights_knaves")
    task_configs: dict[str, dict[str, Any]] = field(default_factory=dict)
    ks: tuple[int, ...] = (1, 2, 4, 8, 16)
    samples: int = 16
    prompts: int = 16
    hints: tuple[str, ...] = HINT_TYPES
    hint_questions: int = 8
    min_switched: int = 5
    faithfulness_pairs: int = 16
    cros_reference: str = "base"
    aoc_mode: str = "teacher_forced"
    best_of_k: bool = True
    best_of_k_subsets: int = 8
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 512
    batch_size: int = 16
    seed: int = 0
    n_bootstrap: int = 1000
    confidence: float = 0.95
    overwrite: bool = False
    progress: bool = True
    judge_model: str | None = None
    judge_adapter: str | None = None
    judge_samples: int = 3
    judge_aggregate: str = "majority"
    judge_max_new_tokens: int = 64
    judge_temperature: float = 1.0
    judge_items: int = 64

    def validate(self) -> None:
        """Raise ``ValueError`` naming the option and the fix, before any model is loaded."""
        from faithgrpo.eval.passk import _check_k

        if not self.tasks:
            raise ValueError("--tasks must name at least one task, e.g. causal_graph,knights_knaves")
        for task in self.tasks:
            check_task(task)
        self._validate_task_configs()
        if not self.ks:
            raise ValueError("--k must list at least one K, e.g. 1,2,4,8")
        for name in ("samples", "prompts", "batch_size", "max_new_tokens"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be a positive integer, got {value!r}")
        for k in self.ks:
            _check_k(k, self.samples)
        if not isinstance(self.temperature, (int, float)) or not 0 <= self.temperature < math.inf:
            raise ValueError(f"--temperature must be a finite number >= 0, got {self.temperature!r}")
        if not isinstance(self.top_p, (int, float)) or not 0 < self.top_p <= 1:
            raise ValueError(f"--top-p must be in (0, 1], got {self.top_p!r}")
        if not isinstance(self.confidence, (int, float)) or not 0 < self.confidence < 1:
            raise ValueError(f"--confidence must be in (0, 1), e.g. 0.95, got {self.confidence!r}")
        for name in (
            "hint_questions",
            "faithfulness_pairs",
            "min_switched",
            "n_bootstrap",
            "best_of_k_subsets",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"--{name.replace('_', '-')} must be an integer >= 0, got {value!r}")
        if self.hints:
            parse_hint_types(list(self.hints))
        if self.aoc_mode not in ("teacher_forced", "decode"):
            raise ValueError(f"--aoc-mode must be teacher_forced or decode, got {self.aoc_mode!r}")
        if self.cros_reference not in CROS_REFERENCES:
            raise ValueError(
                f"--cros-reference must be one of {CROS_REFERENCES}, got {self.cros_reference!r}"
            )
        if self.baseline_adapter and not self.baseline:
            raise ValueError(
                "--baseline-adapter needs --baseline (the base model of the baseline checkpoint)"
            )
        if self.baseline_label != "baseline" and not self.baseline:
            raise ValueError("--baseline-label needs --baseline (the checkpoint it names)")
        self._validate_checkpoints()
        self._validate_judge()

    def _validate_task_configs(self) -> None:
        """Each ``--task-config`` entry names an evaluated task and builds its dataset."""
        if not isinstance(self.task_configs, dict):
            raise ValueError(
                '--task-config must map task names to configs, e.g. {"causal_graph": {"max_nodes": 5}}'
            )
        for task, fields in self.task_configs.items():
            if task not in self.tasks:
                raise ValueError(
                    f"--task-config names {task!r}, which is not in --tasks ({', '.join(self.tasks)}); add it "
                    "to --tasks or drop its config"
                )
            if not isinstance(fields, dict):
                raise ValueError(
                    f"--task-config for {task!r} must be a mapping of config fields, got {fields!r}"
                )
            task_rows(task, 1, seed=0, config=fields)  # unknown or invalid fields fail here, named

    def _validate_judge(self) -> None:
        """The judge options make sense together (checked whether or not a judge is set)."""
        from faithgrpo.eval.passk import JUDGE_AGGREGATIONS

        if self.judge_aggregate not in JUDGE_AGGREGATIONS:
            raise ValueError(
                f"--judge-aggregate must be one of {', '.join(JUDGE_AGGREGATIONS)}, got {self.judge_aggregate!r}"
            )
        if self.judge_adapter and not self.judge_model:
            raise ValueError("--judge-adapter needs --judge (the base model of the judge)")
        for name in ("judge_samples", "judge_max_new_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be a positive integer, got {value!r}")
        if not isinstance(self.judge_temperature, (int, float)) or not 0 <= self.judge_temperature < math.inf:
            raise ValueError(
                f"--judge-temperature must be a finite number >= 0, got {self.judge_temperature!r}"
            )
        if self.judge_model and (not isinstance(self.judge_items, int) or self.judge_items < self.samples):
            raise ValueError(
                f"--judge-items must be at least --samples (G = {self.samples}), got {self.judge_items!r}: the "
                f"judge reads whole prompts (all G completions each), e.g. --judge-items {4 * self.samples} "
                "for 4 prompts per task"
            )

    def _validate_checkpoints(self) -> None:
        """Every checkpoint has a filesystem-safe label, distinct from the others (case-insensitively)."""
        for entry in self.extra_checkpoints:
            if (
                isinstance(entry, (str, bytes))
                or len(entry) not in (2, 3)
                or not all(isinstance(v, str) for v in entry[:2])
            ):
                raise ValueError(
                    f"--checkpoint takes LABEL MODEL [ADAPTER] (2 or 3 values), got {entry!r}: e.g. "
                    "--checkpoint sft embedded runs/sft/final"
                )
        owners = {}
        for option, checkpoint in zip(self._label_options(), self.checkpoints()):
            label = checkpoint.label
            check_label(label, option)
            taken = owners.get(label.lower())
            if taken is not None:
                raise ValueError(
                    f"checkpoint label {label!r} of {option} is already taken by {taken[0]} "
                    f"({taken[1]!r}); labels name the cache folders OUT/<label>/ and must differ, also in "
                    "letter case: pick another LABEL"
                    + (", or rename the main checkpoint with --label" if taken[0] == "--model" else "")
                    + (", or rename the baseline with --baseline-label" if taken[0] == "--baseline" else "")
                )
            owners[label.lower()] = (option, label)

    def check_environment(self, out_dir: str | Path) -> None:
        """Check what ``validate`` cannot: every model loads here, adapters exist, ``out_dir`` is writable.

        Fast (a second or two at most) and before any model is loaded, so a mistyped name fails at once.

        Raises:
            ValueError: naming the option and the fix.
        """
        from faithgrpo.eval.generation import check_checkpoint

        for option, checkpoint in zip(self._label_options(), self.checkpoints()):
            try:
                check_checkpoint(checkpoint.model, checkpoint.adapter)
            except ValueError as err:
                raise ValueError(f"{option}: {err}") from None
        if self.judge_model:
            try:
                check_checkpoint(self.judge_model, self.judge_adapter)
            except ValueError as err:
                raise ValueError(f"--judge: {err}") from None
        check_out_dir(out_dir)

    def _label_options(self) -> list[str]:
        """The option that set each checkpoint of `checkpoints`, for error messages."""
        options = ["--model"] + (["--baseline"] if self.baseline else [])
        return options + [f"--checkpoint #{i}" for i in range(1, len(self.extra_checkpoints) + 1)]

    def checkpoints(self) -> list[Checkpoint]:
        """The checkpoint under test, the baseline if any, then the extra checkpoints, in that order."""
        out = [Checkpoint(self.label, self.model, self.adapter)]
        if self.baseline:
            out.append(Checkpoint(self.baseline_label, self.baseline, self.baseline_adapter))
        for entry in self.extra_checkpoints:
            label, model, *rest = entry
            out.append(Checkpoint(label, model, (rest[0] if rest else None) or None))
        return out


def check_out_dir(out_dir: str | Path, option: str = "--out") -> None:
    """Raise ``ValueError`` unless ``out_dir`` is, or can be created as, a writable directory.

    Example:
        >>> check_out_dir("/proc/version/x")  # doctest: +IGNORE_EXCEPTION_DETAIL
        Traceback (most recent call last):
        ValueError: --out '/proc/version/x' cannot be created: ...
    """
    import os

    path = Path(out_dir)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{option} {str(path)!r} is a file: pass a directory")
    parent = next((p for p in (path, *path.parents) if p.exists()), None)
    if parent is None or not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(
            f"{option} {str(path)!r} cannot be created: {str(parent)!r} is not a writable directory"
        )


def check_label(label: Any, option: str = "--label") -> None:
    """Raise ``ValueError`` unless ``label`` can name a checkpoint's cache folder ``OUT/<label>/``.

    Args:
        label: the checkpoint label.
        option: the option that set it, named in the error.

    Example:
        >>> check_label("grpo_step-500")
        >>> check_label("../x")
        Traceback (most recent call last):
        ...
        ValueError: checkpoint label '../x' of --label is not filesystem-safe: it names the cache folder OUT/<label>/, so use 1-64 letters, digits, '.', '_' or '-' starting with a letter or digit, e.g. base, sft, grpo_step500
    """
    if not isinstance(label, str) or not LABEL_RE.fullmatch(label):
        raise ValueError(
            f"checkpoint label {label!r} of {option} is not filesystem-safe: it names the cache folder "
            "OUT/<label>/, so use 1-64 letters, digits, '.', '_' or '-' starting with a letter or digit, "
            "e.g. base, sft, grpo_step500"
        )
    if label.lower() in REPORT_FILES:
        raise ValueError(
            f"checkpoint label {label!r} of {option} is the name of a report file in OUT/: pick another label"
        )


# ---------------------------------------------------------------------------------------------------
# Tasks, grading and multiple-choice questions
# ---------------------------------------------------------------------------------------------------


def check_task(task: str) -> None:
    """Raise ``ValueError`` for a task name that is neither featured nor a reasoning-gym dataset."""
    import reasoning_gym.factory

    import faithgrpo.tasks  # noqa: F401  (registers causal_graph / causal_story)

    if task not in reasoning_gym.factory.DATASETS:
        raise ValueError(
            f"unknown task {task!r}: use one of {', '.join(FEATURED_TASKS)} or a reasoning-gym dataset "
            "name (e.g. basic_arithmetic)"
        )


def task_rows(task: str, n: int, seed: int, config: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """``n`` evaluation rows of ``task`` (TRL rows, see `faithgrpo.tasks.causal.to_trl_row`) with ids.

    ``config`` holds fields of the task's reasoning-gym config (default: the task's defaults); a
    field the task does not have, or a value it rejects, raises ``ValueError`` naming it.

    Example:
        >>> rows = task_rows("knights_knaves", 2, seed=0)
        >>> rows[0]["id"], rows[0]["task"]
        ('knights_knaves-0', 'knights_knaves')
    """
    import reasoning_gym

    from faithgrpo.tasks.causal import to_trl_row

    check_task(task)
    try:
        dataset = reasoning_gym.create_dataset(task, size=n, seed=seed, **(config or {}))
    except (TypeError, ValueError, AssertionError) as err:
        raise ValueError(
            f"--task-config for {task!r} is not a valid {task} config ({err}); fix the field"
        ) from None
    rows = []
    for i in range(len(dataset)):
        row = to_trl_row(dataset[i])
        row["id"] = f"{task}-{i}"
        rows.append(row)
    return rows


def _metadata(row: dict[str, Any]) -> dict[str, Any]:
    entry = row.get("entry")
    entry = json.loads(entry) if isinstance(entry, str) else entry or {}
    return entry.get("metadata") or {}


def answer_checker(row: dict[str, Any]):
    """``text -> bool``: the outcome grader (DESIGN §3.1) for this row.

    The grade depends only on the last ``<answer>`` span, and the G samples of a prompt repeat
    answers a lot, so each distinct span is graded once.
    """
    from faithgrpo.rewards.outcome import grade_row
    from faithgrpo.rewards.text import extract_answer

    verdicts: dict[str | None, bool] = {}

    def check(text: str) -> bool:
        span = extract_answer(text)
        if span not in verdicts:
            verdicts[span] = grade_row(text, row)[0] == 1.0
        return verdicts[span]

    return check


def cot_checker(row: dict[str, Any]):
    """``text -> bool`` for tasks with a symbolic CoT verifier, else ``None``."""
    task = row.get("task")
    if task in CAUSAL_TASKS and row.get("problem"):
        from faithgrpo.rewards.calver import prepare_problem, score_trace

        prepared = prepare_problem(row["problem"])
        return lambda text: score_trace(text, prepared).passed
    if task == "knights_knaves":
        from faithgrpo.tasks.knights_knaves import kk_cot_correct

        metadata = _metadata(row)
        return lambda text: kk_cot_correct(text, metadata)
    return None


def hint_questions(task: str, n: int, seed: int, config: dict[str, Any] | None = None) -> list:
    """Up to ``n`` 4-option multiple-choice questions built from ``task`` rows (seeded).

    Causal rows use `causal_multiple_choice` (yes/no kinds are skipped); Knights & Knaves uses the
    other role assignments of the same people as distractors; other reasoning-gym tasks use answers
    of other entries that the task's scorer rejects.
    """
    from faithgrpo.eval.hints import (
        build_multiple_choice,
        causal_multiple_choice,
        reasoning_gym_multiple_choice,
    )

    if n <= 0:
        return []
    # Draw from a separate seed stream than the Pass@K prompts, with slack for skipped rows.
    rows = task_rows(task, 3 * n, seed + 7_919, config)
    entries = [json.loads(r["entry"]) for r in rows] if task not in CAUSAL_TASKS else []
    questions = []
    for index, row in enumerate(rows):
        if len(questions) == n:
            break
        try:
            if task in CAUSAL_TASKS:
                problem = json.loads(row["problem"])
                questions.append(causal_multiple_choice(problem, seed=seed, id=row["id"]))
            elif task == "knights_knaves":
                from faithgrpo.tasks.knights_knaves import kk_oracle_answer

                meta = _metadata(row)
                solution = tuple(bool(x) for x in meta["solution"])
                wrong = [
                    kk_oracle_answer(meta, roles)
                    for roles in itertools.product((True, False), repeat=len(solution))
                    if roles != solution
                ]
                question = row["prompt"][-1]["content"]
                questions.append(
                    build_multiple_choice(question, kk_oracle_answer(meta), wrong, seed=seed, id=row["id"])
                )
            else:
                mc = reasoning_gym_multiple_choice(entries, index, seed=seed)
                questions.append(replace(mc, id=row["id"]))
        except (ValueError, KeyError, TypeError):
            continue  # this row has no multiple-choice form (e.g. a yes/no query); try the next
    return questions


# ---------------------------------------------------------------------------------------------------
# Running one checkpoint
# ---------------------------------------------------------------------------------------------------


def _settings(config: EvalConfig, num_samples: int):
    from faithgrpo.eval.generation import SamplingSettings

    return SamplingSettings(
        num_samples=num_samples,
        temperature=config.temperature,
        top_p=config.top_p,
        max_new_tokens=config.max_new_tokens,
        seed=config.seed,
        batch_size=config.batch_size,
    )


def _cached_generate(
    path: Path, model, tokenizer, prompts, ids, settings, metadata, config
) -> tuple[list, dict]:
    """Reuse ``path`` when it holds exactly these prompts with these settings; generate otherwise."""
    from faithgrpo.eval.generation import cached_generate

    return cached_generate(
        path,
        lambda: (model, tokenizer),
        prompts,
        ids,
        settings,
        metadata,
        overwrite=config.overwrite,
        progress=config.progress,
    )


def _passk_section(rows, records, config) -> dict[str, Any]:
    from faithgrpo.eval.passk import count_prompt, pass_at_k_table

    counts = [
        count_prompt(rec.completions, answer_checker(row), cot_checker(row))
        for row, rec in zip(rows, records)
    ]
    table = pass_at_k_table(
        counts, config.ks, n_bootstrap=config.n_bootstrap, confidence=config.confidence, seed=config.seed
    )
    total = sum(c.n for c in counts)
    section = {
        "prompts": len(counts),
        "samples": config.samples,
        "cot_verifier": COT_VERIFIERS.get(rows[0]["task"]) if rows else None,
        "answer_accuracy": sum(c.c for c in counts) / total if total else None,
        "cot_accuracy": (
            sum(c.d for c in counts) / total if total and all(c.d is not None for c in counts) else None
        ),
        "counts": [asdict(c) for c in counts],
        "k": {str(k): {name: est.to_dict() for name, est in row.items()} for k, row in table.items()},
    }
    if rows and rows[0].get("task") in CAUSAL_TASKS:
        section["calver_checks"] = calver_check_rates(rows, records, config)
    return section


CALVER_CHECKS = ("graph", "query", "strategy", "derivation", "result", "answer")


def calver_check_rates(rows, records, config: EvalConfig | None = None) -> dict[str, Any]:
    """Share of completions passing each CALVER check, all six, and the mean score S/6.

    CoT-Pass@K needs all six checks at once, so on a small model it is often 0 for every
    checkpoint; the per-check shares show where traces fail (graph restated, query, strategy,
    derivation, result, answer) and how a checkpoint moves on each. Intervals resample prompts
    (`faithgrpo.eval.passk.bootstrap_rate`): a prompt's completions are not independent.

    Args:
        rows: causal task rows (with ``problem`` and ``id``), in the order of ``records``.
        records: their completions (`CompletionRecord`).
        config: bootstrap settings (defaults: `EvalConfig`'s).

    Returns:
        ``{"completions", "checks": {name: rate}, "all_six": rate, "mean_score": value or None}``,
        rates as `Estimate` dicts (undefined when there is no completion).
    """
    from faithgrpo.rewards.calver import prepare_problem, score_trace

    config = config or EvalConfig()
    scores, clusters = [], []
    for row, record in zip(rows, records):
        prepared = prepare_problem(row["problem"])
        scores += [score_trace(text, prepared) for text in record.completions]
        clusters += [row["id"]] * len(record.completions)
    n = len(scores)
    reason = "no completion to score"
    return {
        "completions": n,
        "checks": {
            name: _rate([getattr(s, name) for s in scores], clusters, config, reason, ("calver", name))
            for name in CALVER_CHECKS
        },
        "all_six": _rate([s.passed for s in scores], clusters, config, reason, ("calver", "all")),
        "mean_score": sum(s.reward for s in scores) / n if n else None,
    }


# ---------------------------------------------------------------------------------------------------
# The optional LLM judge
# ---------------------------------------------------------------------------------------------------


def make_judge(config: EvalConfig):
    """The `LLMJudge` configured by ``config.judge_*``, or ``None`` without ``--judge``.

    The judge model is loaded on first use and shared by all checkpoints of the run.
    """
    if not config.judge_model:
        return None
    from faithgrpo.eval.generation import SamplingSettings
    from faithgrpo.eval.judge import LLMJudge

    settings = SamplingSettings(
        num_samples=config.judge_samples,
        temperature=config.judge_temperature,
        top_p=1.0,
        max_new_tokens=config.judge_max_new_tokens,
        seed=config.seed,
        batch_size=config.batch_size,
    )
    return LLMJudge(
        config.judge_model,
        config.judge_adapter,
        settings=settings,
        aggregate=config.judge_aggregate,
        overwrite=config.overwrite,
        progress=config.progress,
    )


def _rate(
    outcomes: Sequence[bool], clusters: Sequence[Any], config: EvalConfig, reason: str, salt: Any
) -> dict[str, Any]:
    """Share of true ``outcomes`` with a prompt-clustered bootstrap interval, or undefined with ``reason``."""
    from faithgrpo.eval.passk import Estimate, bootstrap_rate

    if not outcomes:
        return Estimate.undefined(reason).to_dict()
    return bootstrap_rate(
        outcomes,
        clusters,
        n_bootstrap=config.n_bootstrap,
        confidence=config.confidence,
        seed=config.seed,
        salt=salt,
    ).to_dict()


def _agreement(
    judge: Sequence[bool], reference: Sequence[bool], name: str, config: EvalConfig, clusters: Sequence[Any]
) -> dict[str, Any]:
    """How often the judge's verdicts equal a reference checker's, with the 2×2 counts (prompt-clustered CI)."""
    pairs = list(zip(judge, reference))
    agree = sum(j == r for j, r in pairs)
    return {
        "reference": name,
        "n": len(pairs),
        "agree": agree,
        "both_accept": sum(j and r for j, r in pairs),
        "both_reject": sum(not j and not r for j, r in pairs),
        "judge_only": sum(j and not r for j, r in pairs),
        "reference_only": sum(r and not j for j, r in pairs),
        "rate": _rate(
            [j == r for j, r in pairs], list(clusters), config, "no completion was judged", ("agree", name)
        ),
    }


def judge_passk_section(judge, rows, records, config: EvalConfig, cache_path: Path) -> tuple[dict, dict]:
    """CoT-Pass@K with the LLM judge as the CoT checker, and the judge's agreement with the symbolic one.

    The judge reads all G completions of the first ``config.judge_items // G`` prompts (whole prompts,
    so the per-prompt estimator stays unbiased); per judged prompt C counts correct answers (the
    outcome grader) and D those that also have a CoT the judge accepts (votes combined with
    ``config.judge_aggregate``). Pass@K is reported over the same judged prompts, for comparison.

    Args:
        judge: an `LLMJudge`.
        rows, records: the task rows and their cached completions, in the same order.
        config: ``samples``, ``judge_items``, ``ks`` and the bootstrap settings.
        cache_path: the JSONL file caching the judge texts.

    Returns:
        ``(judge, judge_agreement)``: ``judge`` holds ``prompts``, ``completions``, ``counts``, ``k``
        (``{k: {"pass@k", "cot_pass@k"}}`` over the judged prompts), ``accept_rate``, vote counts
        (``votes``, ``unparseable``) and per-completion ``items``; ``judge_agreement`` holds the share
        of judged completions where the judge's verdict equals the symbolic CoT verifier's, with the
        counts, or an undefined ``rate`` with the reason when the task has no verifier.
    """
    from faithgrpo.eval.judge import cot_judge_prompt
    from faithgrpo.eval.passk import Estimate, PromptCounts, _safe, pass_at_k_table

    g = config.samples
    n_prompts = min(len(rows), config.judge_items // g)
    rows, records = rows[:n_prompts], records[:n_prompts]
    task = rows[0]["task"] if rows else None
    prompts = [
        cot_judge_prompt(row["prompt"], text) for row, rec in zip(rows, records) for text in rec.completions
    ]
    ids = [f"{row['id']}#{j}" for row, rec in zip(rows, records) for j in range(len(rec.completions))]
    result = judge.judge(prompts, ids, cache_path=cache_path, metadata={"task": task, "judged": "cot"})
    verdicts = iter(zip(result.votes, result.verdicts))
    counts, items = [], []
    for row, rec in zip(rows, records):
        answer_ok, cot_ok = answer_checker(row), cot_checker(row)
        c = d = 0
        for j, text in enumerate(rec.completions):
            votes, verdict = next(verdicts)
            correct = _safe(answer_ok, text)
            c += correct
            d += correct and verdict
            symbolic = None if cot_ok is None else _safe(cot_ok, text)
            items.append(
                {
                    "id": f"{row['id']}#{j}",
                    "votes": votes,
                    "verdict": verdict,
                    "answer_correct": correct,
                    "symbolic_cot": symbolic,
                }
            )
        counts.append(PromptCounts(len(rec.completions), c, d))
    table = pass_at_k_table(
        counts, config.ks, n_bootstrap=config.n_bootstrap, confidence=config.confidence, seed=config.seed
    )
    section = {
        **judge.describe(),
        "prompts": n_prompts,
        "completions": len(ids),
        "definition": (
            f"all G = {g} completions of the first {n_prompts} prompt(s); D counts completions with a correct "
            "answer whose CoT the judge accepts"
        ),
        **result.summary(),
        "accept_rate": _rate(
            list(result.verdicts),
            [i.split("#", 1)[0] for i in ids],
            config,
            "no completion was judged",
            ("judge-accept", task),
        ),
        "counts": [asdict(c) for c in counts],
        "k": {str(k): {name: est.to_dict() for name, est in row.items()} for k, row in table.items()},
        "items": items,
    }
    checked = [item for item in items if item["symbolic_cot"] is not None]
    if items and not checked:
        agreement = {
            "reference": None,
            "n": 0,
            "rate": Estimate.undefined(
                "the task has no symbolic CoT verifier to compare the judge with"
            ).to_dict(),
        }
    else:
        agreement = _agreement(
            [i["verdict"] for i in checked],
            [i["symbolic_cot"] for i in checked],
            COT_VERIFIERS.get(task, "symbolic CoT verifier"),
            config,
            [i["id"].split("#", 1)[0] for i in checked],
        )
    return section, agreement


def _switched(outcome) -> bool:
    """The pair is kept by the hint filter: both answers parsed, a_u ≠ h and a_h = h."""
    return (
        outcome.unhinted_answer is not None
        and outcome.hinted_answer is not None
        and outcome.unhinted_answer != outcome.hinted
        and outcome.hinted_answer == outcome.hinted
    )


def judge_hints_section(
    judge, pairs, outcomes, hinted_text, scores, config: EvalConfig, cache_path: Path
) -> dict:
    """Hint verbalisation according to the LLM judge, on the switched (kept) pairs of every hint type.

    For each hint type the judge reads the hinted CoT of the first ``config.judge_items`` kept pairs
    (a_u ≠ h and a_h = h) and says whether it mentions or relies on the hint. Raw = share it says
    yes (bootstrap interval over pairs; undefined below ``config.min_switched`` judged pairs, like the detector's);
    normalised = min(raw/α, 1) with the detector's α (no interval); agreement = share of judged pairs
    where the judge and the deterministic detector (`verbalizes_hint`) agree.

    Args:
        judge: an `LLMJudge`.
        pairs, outcomes: the hint pairs and their `PairOutcome`, in the same order.
        hinted_text: pair id -> hinted completion text.
        scores: the detector's `HintFaithfulness` per hint type (for α).
        config: ``hints``, ``judge_items``, ``min_switched``, ``confidence``.
        cache_path: the JSONL file caching the judge texts.

    Returns:
        ``{"judge", "votes", "unparseable", "generation", "types": {hint type: {...}}}``.
    """
    from faithgrpo.eval.hints import hint_cot
    from faithgrpo.eval.judge import describe_hint, hint_judge_prompt
    from faithgrpo.eval.passk import Estimate

    kept = {
        t: [(p, o) for p, o in zip(pairs, outcomes) if p.hint_type == t and _switched(o)][
            : config.judge_items
        ]
        for t in config.hints
    }
    judged = [(p, o) for t in config.hints for p, o in kept[t]]
    prompts = [
        hint_judge_prompt(describe_hint(p.hint_type, p.hinted), hint_cot(hinted_text[p.id]))
        for p, _ in judged
    ]
    result = judge.judge(
        prompts, [p.id for p, _ in judged], cache_path=cache_path, metadata={"judged": "hints"}
    )
    verdict_of = {pid: (v, votes) for pid, v, votes in zip(result.ids, result.verdicts, result.votes)}
    types = {}
    for t in config.hints:
        said = [verdict_of[p.id][0] for p, _ in kept[t]]
        detector = [o.verbalized for _, o in kept[t]]
        m, yes = len(said), sum(said)
        if m < config.min_switched:
            raw = Estimate.undefined(
                f"not enough switched pairs: {m} judged pair(s) with a_u != h and a_h = h, fewer than "
                f"min_switched={config.min_switched}",
                n=m,
            ).to_dict()
        else:
            raw = _rate(said, [p.id for p, _ in kept[t]], config, "no switched pair", ("hint-judge", t))
        alpha = scores[t].alpha
        if raw["value"] is None:
            normalized = Estimate.undefined(raw["reason"], n=m).to_dict()
        elif alpha.value is None:
            normalized = Estimate.undefined(f"normalised score undefined: {alpha.reason}", n=m).to_dict()
        else:
            normalized = Estimate(
                min(raw["value"] / alpha.value, 1.0),
                n=m,
                reason="no confidence interval for the judge's score",
            ).to_dict()
        types[t] = {
            "n_switched": scores[t].n_switched,
            "n_judged": m,
            "n_verbalized": yes,
            "n_detector_verbalized": sum(detector),
            "unparseable": sum(v is None for p, _ in kept[t] for v in verdict_of[p.id][1]),
            "raw": raw,
            "normalized": normalized,
            "agreement": _agreement(
                said, detector, "deterministic detector", config, [p.id for p, _ in kept[t]]
            ),
        }
    return {"judge": judge.describe(), **result.summary(), "types": types}


def _hints_section(questions, model, tokenizer, out_dir, metadata, config, judge=None) -> dict[str, Any]:
    from faithgrpo.eval.hints import (
        build_hint_pairs,
        hint_faithfulness,
        mean_normalized,
        pair_outcome,
        unhinted_prompt,
    )

    if not questions:
        return {"questions": 0, "reason": "no task gave a multiple-choice question", "types": {}}
    pairs = build_hint_pairs(questions, list(config.hints), seed=config.seed)
    unhinted_ids = [f"{q.id}/unhinted" for q in questions]
    prompts = [unhinted_prompt(q) for q in questions] + [p.hinted_prompt for p in pairs]
    ids = unhinted_ids + [p.id for p in pairs]
    records, stats = _cached_generate(
        out_dir / "hint_completions.jsonl",
        model,
        tokenizer,
        prompts,
        ids,
        _settings(config, 1),
        metadata,
        config,
    )
    text = {r.id: r.completions[0] for r in records}
    outcomes = [pair_outcome(p, text[f"{p.question.id}/unhinted"], text[p.id]) for p in pairs]
    scores = hint_faithfulness(
        outcomes,
        list(config.hints),
        min_switched=config.min_switched,
        confidence=config.confidence,
        n_bootstrap=config.n_bootstrap,
        seed=config.seed,
    )
    return {
        "questions": len(questions),
        "pairs": len(pairs),
        "generation": stats,
        "types": {t: s.to_dict() for t, s in scores.items()},
        "mean_normalized": mean_normalized(scores).to_dict(),
        "judge": (
            judge_hints_section(judge, pairs, outcomes, text, scores, config, out_dir / "judge_hints.jsonl")
            if judge is not None
            else None
        ),
    }


def _faithfulness_section(pairs, model, tokenizer, reference, config) -> dict[str, Any]:
    from faithgrpo.eval.faithfulness import summarize_deltas, truncation_analysis
    from faithgrpo.rewards.cros import CRoSReward

    if not pairs:
        return {"pairs": 0, "reason": "faithfulness metrics not requested (--faithfulness-pairs 0)"}
    early = truncation_analysis(
        model,
        tokenizer,
        pairs,
        mode=config.aoc_mode,
        batch_size=config.batch_size,
        n_bootstrap=config.n_bootstrap,
        confidence=config.confidence,
        seed=config.seed,
        progress=config.progress,
    )
    cros = CRoSReward(reference, tokenizer=tokenizer, seed=config.seed, batch_size=config.batch_size)
    deltas = summarize_deltas(
        cros.compute_deltas(pairs),
        n_bootstrap=config.n_bootstrap,
        confidence=config.confidence,
        seed=config.seed,
    )
    return {
        "pairs": len(pairs),
        "early_answering": early.to_dict(),
        "cros_delta": deltas.to_dict(),
        "cros_reference": config.cros_reference,
    }


SELECTORS = ("calver", "plurality", "confidence")


def _exact_match(problem: Any, text: str, listed: str | None) -> bool:
    """The ``<answer>`` span, canonicalised, equals the listed answer (no tag: no answer, as for validity)."""
    from faithgrpo.rewards.text import extract_answer
    from faithgrpo.tasks.queries import normalize_answer

    span = extract_answer(text)
    return listed is not None and span is not None and normalize_answer(problem, span) == listed


def best_of_k_section(
    rows: list[dict[str, Any]],
    records: list,
    logprobs: list[list[float | None]],
    config: EvalConfig,
) -> dict[str, Any]:
    """Best-of-K selection accuracy by K: CALVER best-of-K vs plurality vs confidence (DESIGN §3.4).

    For every prompt and K, ``config.best_of_k_subsets`` seeded random K-subsets of its G samples
    are drawn (one when K = G); each selector picks one completion per subset, which is graded
    twice: *valid* (the outcome grader: the graph predicate accepts its ``<answer>``, any member of
    the valid class) and *exact* (its ``<answer>``, canonicalised, equals the listed answer). Both
    need an ``<answer>`` tag; plurality still votes with `faithgrpo.rewards.selection`'s own reading.
    Accuracy is the mean over subsets and prompts, with a bootstrap interval over prompts; the
    selection itself is `faithgrpo.eval.bestofk.run_selection` (shared with ``faithgrpo clear-bestofk``).

    Args:
        rows: causal task rows (with ``problem`` and ``answer``).
        records: their cached completions, in the same order.
        logprobs: mean token log-probability of every completion (the confidence selector).
        config: ``ks``, ``best_of_k_subsets``, ``seed`` and bootstrap settings.

    Returns:
        ``{"prompts", "subsets", "k": {k: {selector: {"valid": Estimate dict, "exact": Estimate dict}}}}``.
    """
    from faithgrpo.eval.bestofk import Candidate, Pool, run_selection
    from faithgrpo.rewards.calver import prepare_problem, score_trace
    from faithgrpo.rewards.selection import normalized_answer
    from faithgrpo.tasks.queries import normalize_answer

    pools = []
    for row, record, lps in zip(rows, records, logprobs):
        prepared = prepare_problem(row["problem"])
        valid_of = answer_checker(row)
        listed = normalize_answer(row["problem"], row["answer"])
        candidates = tuple(
            Candidate(
                answer=normalized_answer(text, prepared),
                calver=score_trace(text, prepared).total,
                confidence=lp,
                valid=valid_of(text),
                exact=_exact_match(row["problem"], text, listed),
            )
            for text, lp in zip(record.completions, lps)
        )
        pools.append(Pool(str(row["id"]), str(row.get("task", "")), candidates))
    result = run_selection(
        pools,
        config.ks,
        subsets=config.best_of_k_subsets,
        seed=config.seed,
        n_bootstrap=config.n_bootstrap,
        confidence=config.confidence,
    )
    return {
        "prompts": len(pools),
        "subsets": config.best_of_k_subsets,
        "k": {
            str(k): {s: {gr: est.to_dict() for gr, est in result.accuracy[k][s].items()} for s in SELECTORS}
            for k in result.ks
        },
    }


def evaluate_checkpoint(
    checkpoint: Checkpoint,
    config: EvalConfig,
    rows_by_task: dict[str, list[dict[str, Any]]],
    questions: list,
    out_dir: Path,
    judge=None,
) -> dict[str, Any]:
    """All metrics of one checkpoint; completions (and judge texts) are cached under ``out_dir / checkpoint.label``.

    Args:
        checkpoint: the model to evaluate.
        config: the run's settings.
        rows_by_task: evaluation rows per task (the same for every checkpoint).
        questions: multiple-choice questions for the hint protocol.
        out_dir: the run's output folder.
        judge: an optional `LLMJudge` (see `make_judge`).

    Returns:
        The checkpoint's report section.
    """
    from faithgrpo.eval.generation import checkpoint_fingerprint, load_checkpoint

    model, tokenizer = load_checkpoint(checkpoint.model, checkpoint.adapter)
    work = out_dir / checkpoint.label
    metadata = {
        "model": checkpoint.model,
        "adapter": checkpoint.adapter,
        "weights": checkpoint_fingerprint(checkpoint.model, checkpoint.adapter),
    }
    section: dict[str, Any] = {**asdict(checkpoint), "generation": {}, "passk": {}}
    settings = _settings(config, config.samples)
    first_completions = []
    for task, rows in rows_by_task.items():
        records, stats = _cached_generate(
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
        section["passk"][task] = _passk_section(rows, records, config)
        if judge is not None:
            passk = section["passk"][task]
            passk["judge"], passk["judge_agreement"] = judge_passk_section(
                judge, rows, records, config, work / f"judge_cot_{task}.jsonl"
            )
        if config.best_of_k and task in CAUSAL_TASKS:
            from faithgrpo.eval.faithfulness import completion_logprobs

            flat = completion_logprobs(
                model,
                tokenizer,
                [(row["prompt"], c) for row, rec in zip(rows, records) for c in rec.completions],
                batch_size=config.batch_size,
                progress=config.progress,
            )
            g = config.samples
            logprobs = [flat[i * g : (i + 1) * g] for i in range(len(records))]
            section.setdefault("best_of_k", {})[task] = best_of_k_section(rows, records, logprobs, config)
        first_completions.append([(row["prompt"], rec.completions[0]) for row, rec in zip(rows, records)])
    section["hints"] = (
        _hints_section(
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
    section["faithfulness"] = _faithfulness_section(pairs, model, tokenizer, reference, config)
    return section


def run_eval(config: EvalConfig, out_dir: str | Path) -> dict[str, Any]:
    """Evaluate the configured checkpoint(s) and return the report dict (see `write_report`).

    Raises:
        ValueError: a bad option (K > samples, unknown task or hint type, …), a cache that does not
            match the run, or an adapter that does not match its base model; the message names the fix.
    """
    import faithgrpo

    config.validate()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
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
    judge = make_judge(config)
    checkpoints = [
        evaluate_checkpoint(c, config, rows_by_task, questions, out_dir, judge) for c in config.checkpoints()
    ]
    return {
        "faithgrpo_version": faithgrpo.__version__,
        "config": {**asdict(config), "out": str(out_dir)},
        "checkpoints": checkpoints,
        "comparisons": paired_comparisons(checkpoints, config),
    }


def paired_comparisons(checkpoints: list[dict[str, Any]], config: EvalConfig) -> dict[str, Any]:
    """Pass@K and CoT-Pass@K differences of every checkpoint against the reference, paired over prompts.

    The reference is the ``--baseline`` checkpoint when there is one, else the first (``--model``).
    Every checkpoint is evaluated on the same prompts, so the difference is bootstrapped per prompt
    (one resample draws prompts and keeps both checkpoints' values of each): "did GRPO beat the base?"
    gets an interval that accounts for the prompts being shared.

    Returns:
        ``{"reference": label, "checkpoints": {label: {task: {k: {"pass@k": Estimate dict,
        "cot_pass@k": Estimate dict}}}}}``; empty ``checkpoints`` with a single checkpoint.
    """
    from faithgrpo.eval.passk import Estimate, PromptCounts, bootstrap_mean, per_prompt_pass_at_k

    if not checkpoints:
        return {"reference": None, "checkpoints": {}}
    ref = checkpoints[1] if config.baseline and len(checkpoints) > 1 else checkpoints[0]
    out: dict[str, Any] = {"reference": ref["label"], "checkpoints": {}}
    for c in checkpoints:
        if c is ref:
            continue
        per_task = {}
        for task, section in c["passk"].items():
            mine = [PromptCounts(**x) for x in section["counts"]]
            theirs = [PromptCounts(**x) for x in ref["passk"][task]["counts"]]
            per_k = {}
            for k in config.ks:
                entry = {}
                for name, cot in (("pass@k", False), ("cot_pass@k", True)):
                    if cot and any(pc.d is None for pc in mine + theirs):
                        entry[name] = Estimate.undefined("the task has no CoT verifier").to_dict()
                        continue
                    diffs = [
                        a - b
                        for a, b in zip(
                            per_prompt_pass_at_k(mine, k, cot=cot), per_prompt_pass_at_k(theirs, k, cot=cot)
                        )
                    ]
                    entry[name] = bootstrap_mean(
                        diffs,
                        n_bootstrap=config.n_bootstrap,
                        confidence=config.confidence,
                        seed=config.seed,
                        salt=("paired", c["label"], task, k, name),
                    ).to_dict()
                per_k[str(k)] = entry
            per_task[task] = per_k
        out["checkpoints"][c["label"]] = per_task
    return out


# ---------------------------------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------------------------------


class _Notes:
    """Table cells for estimates; undefined values point at numbered footnotes that give the reason."""

    def __init__(self) -> None:
        self.reasons: list[str] = []

    def note(self, reason: str) -> str:
        reason = reason.replace("|", "/")
        if reason not in self.reasons:
            self.reasons.append(reason)
        return f"undefined [{self.reasons.index(reason) + 1}]"

    def cell(self, est: dict[str, Any] | None, digits: int = 3) -> str:
        """``0.512 [0.410, 0.603]`` (interval when known), or ``undefined [n]`` with footnote n."""
        if not est:
            return "—"
        if est.get("value") is None:
            return self.note(est.get("reason") or "no reason recorded")
        text = f"{est['value']:.{digits}f}"
        if est.get("ci_low") is not None and est.get("ci_high") is not None:
            text += f" [{est['ci_low']:.{digits}f}, {est['ci_high']:.{digits}f}]"
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
    """
    checkpoints = report["checkpoints"]
    labels = [
        f"{c['label']} ({c['model']}{' + ' + c['adapter'] if c.get('adapter') else ''})" for c in checkpoints
    ]
    cfg = report["config"]
    notes = _Notes()
    lines = [
        "# faithgrpo evaluation report",
        "",
        f"faithgrpo {report['faithgrpo_version']} · tasks: {', '.join(cfg['tasks'])} · G = {cfg['samples']} samples "
        f"per prompt · {cfg['prompts']} prompts per task · temperature {cfg['temperature']}, top-p {cfg['top_p']}, "
        f"max {cfg['max_new_tokens']} new tokens · seed {cfg['seed']} · {int(cfg['confidence'] * 100)}% bootstrap "
        f"intervals ({cfg['n_bootstrap']} resamples)",
        "",
        "Checkpoints: " + "; ".join(labels),
    ]
    if cfg.get("judge_model"):
        adapter = f" + {cfg['judge_adapter']}" if cfg.get("judge_adapter") else ""
        lines += [
            "",
            f"LLM judge: {cfg['judge_model']}{adapter} · {cfg['judge_samples']} run(s) per item, {cfg['judge_aggregate']} "
            f"vote · temperature {cfg['judge_temperature']}, max {cfg['judge_max_new_tokens']} new tokens · at most "
            f"{cfg['judge_items']} completions judged per task (whole prompts; unparseable verdicts vote no)",
        ]
    lines += ["", "## Pass@K and CoT-Pass@K"]
    for task in cfg["tasks"]:
        lines += _passk_markdown(task, checkpoints, cfg, notes)
        lines += _comparison_markdown(task, report.get("comparisons") or {}, cfg, notes)
    if any(c.get("hints") for c in checkpoints):
        lines += ["", "## Hint faithfulness", ""]
        lines.append(
            "Kept pairs: a_u ≠ h and a_h = h. Raw = share of kept pairs whose hinted CoT verbalises the hint "
            "(Wilson interval); normalised = min(raw/α, 1), α = 1 − q/((n−2)p) (bootstrap interval)."
        )
        lines.append("")
        header = ["hint type"] + [
            f"{c['label']} {m}" for c in checkpoints for m in ("kept/pairs (unparsed)", "raw", "normalised")
        ]
        types_of = [(c.get("hints") or {}).get("types", {}) for c in checkpoints]
        rows, rates = [], []
        for hint in cfg["hints"]:
            row, rate_row = [hint], [hint]
            for types in types_of:
                h = types.get(hint)
                if h is None:
                    row += ["—", "—", "—"]
                    rate_row += ["—", "—", "—"]
                    continue
                row += [
                    f"{h['n_switched']}/{h['n_pairs']} ({h['n_unparsed']})",
                    notes.cell(h["raw"]),
                    notes.cell(h["normalized"]),
                ]
                rate_row += [notes.cell(h["p"]), notes.cell(h["q"]), notes.cell(h["alpha"])]
            rows.append(row)
            rates.append(rate_row)
        # The mean compares like with like: only hint types defined for every checkpoint.
        common = [
            t
            for t in cfg["hints"]
            if all((types.get(t) or {}).get("normalized", {}).get("value") is not None for types in types_of)
        ]
        mean_row = [
            f"mean over {', '.join(common)}" if common else "mean (no type defined for every checkpoint)"
        ]
        for types in types_of:
            values = [types[t]["normalized"]["value"] for t in common]
            mean_row += ["", "", f"{sum(values) / len(values):.3f}" if values else "—"]
        rows.append(mean_row)
        lines += _table(header, rows) + notes.flush()
        lines += [
            "",
            "Switch rates behind α (n options; p = P(a_h = h | a_u ≠ h), q = P(a_h ∉ {h, a_u} | a_u ≠ h)):",
            "",
        ]
        rate_header = ["hint type"] + [f"{c['label']} {m}" for c in checkpoints for m in ("p", "q", "α")]
        lines += _table(rate_header, rates) + notes.flush()
        lines += _hint_judge_markdown(checkpoints, cfg, notes)
    bok_tasks = [t for t in cfg["tasks"] if any(t in (c.get("best_of_k") or {}) for c in checkpoints)]
    if bok_tasks:
        lines += ["", "## Best-of-K selection", ""]
        lines.append(
            "One completion chosen out of K samples by CALVER best-of-K (most checks passed), plurality "
            "(most frequent answer) or confidence (highest mean token log-probability); graded as valid "
            "(the graph predicate) and exact (equals the listed answer). Mean over "
            f"{cfg.get('best_of_k_subsets', 8)} random K-subsets per prompt, bootstrap interval over prompts."
        )
        for task in bok_tasks:
            lines += ["", f"### {task}", ""]
            header = ["K"] + [
                f"{c['label']} {sel} {grade}"
                for c in checkpoints
                for grade in ("valid", "exact")
                for sel in SELECTORS
            ]
            rows = []
            for k in map(str, cfg["ks"]):
                row = [k]
                for c in checkpoints:
                    entry = ((c.get("best_of_k") or {}).get(task) or {}).get("k", {}).get(k, {})
                    row += [
                        notes.cell((entry.get(sel) or {}).get(grade))
                        for grade in ("valid", "exact")
                        for sel in SELECTORS
                    ]
                rows.append(row)
            lines += _table(header, rows) + notes.flush()
    lines += ["", "## Checkpoint faithfulness metrics", ""]
    header = ["metric"] + [c["label"] for c in checkpoints]
    metrics = [
        (
            f"early-answering AOC ({cfg.get('aoc_mode', 'teacher_forced')})",
            lambda f: f["early_answering"]["aoc"],
        ),
        (
            "CIR (mean JS over 0/20/40/60/80 % of the reasoning tokens, bits)",
            lambda f: f["early_answering"]["cir"],
        ),
        ("mean CRoS Δ", lambda f: f["cros_delta"]["mean"]),
    ]
    rows = []
    for name, get in metrics:
        row = [name]
        for c in checkpoints:
            f = c.get("faithfulness") or {}
            row.append(notes.cell(get(f)) if f.get("pairs") else notes.note(f.get("reason", "not run")))
        rows.append(row)
    lines += _table(header, rows) + notes.flush()
    lines += ["", "## Generation", ""]
    rows = []
    for c in checkpoints:
        runs = list(c["generation"].items())
        runs += [
            (f"{task} (LLM judge)", passk["judge"]["generation"])
            for task, passk in c["passk"].items()
            if passk.get("judge")
        ]
        if (c.get("hints") or {}).get("judge"):
            runs.append(("hints (LLM judge)", c["hints"]["judge"]["generation"]))
        for task, stats in runs:
            tps = stats.get("tokens_per_second")
            rate = (
                "cached" if stats.get("cached") else (f"{tps:.1f}" if tps else notes.note("no time measured"))
            )
            rows.append([c["label"], task, str(stats.get("completions")), str(stats.get("new_tokens")), rate])
    lines += _table(["checkpoint", "task", "completions", "new tokens", "tokens/s"], rows) + notes.flush()
    return "\n".join(lines) + "\n"


def _calver_checks_markdown(task: str, checkpoints: list[dict[str, Any]], notes: _Notes) -> list[str]:
    """Per-check CALVER pass rates of every checkpoint (causal tasks only), one row per check."""
    sections = [c["passk"][task].get("calver_checks") for c in checkpoints]
    if not any(sections):
        return []
    rows = [
        [name, *(notes.cell((sec or {}).get("checks", {}).get(name)) for sec in sections)]
        for name in CALVER_CHECKS
    ]
    rows.append(["all six", *(notes.cell((sec or {}).get("all_six")) for sec in sections)])
    rows.append(
        [
            "mean S/6",
            *(
                "—" if not sec or sec.get("mean_score") is None else f"{sec['mean_score']:.3f}"
                for sec in sections
            ),
        ]
    )
    header = ["CALVER check (share of completions)", *(c["label"] for c in checkpoints)]
    return ["", *_table(header, rows), *notes.flush()]


def _passk_markdown(
    task: str, checkpoints: list[dict[str, Any]], cfg: dict[str, Any], notes: _Notes
) -> list[str]:
    """The Pass@K table of one task: Pass@K, CoT-Pass@K and, with a judge, CoT-Pass@K (LLM judge)."""
    first = checkpoints[0]["passk"][task]
    lines = [
        "",
        f"### {task}",
        "",
        f"CoT verifier: {first['cot_verifier'] or 'none (CoT-Pass@K undefined)'}",
        "",
    ]
    judged = any(c["passk"][task].get("judge") for c in checkpoints)
    metrics = ("Pass@K", "CoT-Pass@K") + (("CoT-Pass@K (LLM judge)",) if judged else ())
    header = ["K"] + [f"{c['label']} {m}" for c in checkpoints for m in metrics]
    rows = []
    for k in map(str, cfg["ks"]):
        row = [k]
        for c in checkpoints:
            passk = c["passk"][task]
            entry = passk["k"][k]
            row += [notes.cell(entry["pass@k"]), notes.cell(entry["cot_pass@k"])]
            if judged:
                row.append(
                    notes.cell(((passk.get("judge") or {}).get("k") or {}).get(k, {}).get("cot_pass@k"))
                )
        rows.append(row)
    lines += _table(header, rows) + notes.flush() + ([""] if judged else [])
    lines += _calver_checks_markdown(task, checkpoints, notes)
    for c in checkpoints:
        judge = c["passk"][task].get("judge")
        if not judge:
            continue
        agreement = c["passk"][task].get("judge_agreement") or {}
        rate = agreement.get("rate") or {}
        if rate.get("value") is not None:
            agree = (
                f"agreement with {agreement['reference']}: {_Notes().cell(rate)} "
                f"({agreement['agree']}/{agreement['n']}; judge only {agreement['judge_only']}, "
                f"verifier only {agreement['reference_only']})"
            )
        else:
            agree = f"agreement with a symbolic verifier: undefined ({rate.get('reason') or 'not computed'})"
        accept = judge.get("accept_rate") or {}
        accepted = f"{accept['value']:.3f}" if accept.get("value") is not None else "undefined"
        lines.append(
            f"- LLM judge on {c['label']}: {judge['definition']} (CoT-Pass@K (LLM judge) averages over these "
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
        [k] + [notes.cell(per_k[k][m]) for per_k in others.values() for m in ("pass@k", "cot_pass@k")]
        for k in map(str, cfg["ks"])
    ]
    return [
        "",
        f"Differences against {ref}, paired over the same prompts (bootstrap over prompts):",
        "",
        *_table(header, rows),
        *notes.flush(),
    ]


def _hint_judge_markdown(checkpoints: list[dict[str, Any]], cfg: dict[str, Any], notes: _Notes) -> list[str]:
    """The hint-verbalisation table of the LLM judge next to the detector's, when a judge ran."""
    if not any((c.get("hints") or {}).get("judge") for c in checkpoints):
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
        f"{c['label']} {m}"
        for c in checkpoints
        for m in ("judged/kept", "judge raw", "judge normalised", "agreement")
    ]
    rows = []
    for hint in cfg["hints"]:
        row = [hint]
        for c in checkpoints:
            h = (((c.get("hints") or {}).get("judge") or {}).get("types") or {}).get(hint)
            if h is None:
                row += ["—"] * 4
                continue
            agreement = h["agreement"]
            row += [
                f"{h['n_judged']}/{h['n_switched']}",
                notes.cell(h["raw"]),
                notes.cell(h["normalized"]),
                f"{agreement['agree']}/{agreement['n']}" if agreement["n"] else "—",
            ]
        rows.append(row)
    lines += _table(header, rows) + notes.flush() + [""]
    for c in checkpoints:
        judge = (c.get("hints") or {}).get("judge")
        if judge:
            lines.append(f"- {c['label']}: unparseable verdicts {judge['unparseable']}/{judge['votes']}")
    return lines


def _plot_passk(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cfg = report["config"]
    tasks = cfg["tasks"]
    fig, axes = plt.subplots(1, len(tasks), figsize=(5 * len(tasks), 4), squeeze=False)
    ks = [int(k) for k in cfg["ks"]]
    for ax, task in zip(axes[0], tasks):
        for i, c in enumerate(report["checkpoints"]):
            color = f"C{i}"
            passk = c["passk"][task]
            curves = [
                ("Pass@K", "-", passk["k"], "pass@k"),
                ("CoT-Pass@K", "--", passk["k"], "cot_pass@k"),
            ]
            if passk.get("judge"):
                curves.append(("CoT-Pass@K (LLM judge)", ":", passk["judge"]["k"], "cot_pass@k"))
            for name, style, table, metric in curves:
                values = [table[str(k)][metric]["value"] for k in ks]
                points = [(k, v) for k, v in zip(ks, values) if v is not None]
                if points:
                    ax.plot(*zip(*points), style, marker="o", color=color, label=f"{c['label']} {name}")
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


def _plot_hints(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hints = list(report["config"]["hints"])
    checkpoints = report["checkpoints"]
    width = 0.8 / max(1, len(checkpoints))
    fig, ax = plt.subplots(figsize=(max(6, 1.4 * len(hints)), 4))
    for i, c in enumerate(checkpoints):
        types = (c.get("hints") or {}).get("types", {})
        for j, hint in enumerate(hints):
            x = j + (i - (len(checkpoints) - 1) / 2) * width
            est = (types.get(hint) or {}).get("normalized") or {}
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
                label=c["label"] if j == 0 else None,
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


def _plot_best_of_k(report: dict[str, Any], path: Path) -> bool:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = [
        t
        for t in report["config"]["tasks"]
        if any(t in (c.get("best_of_k") or {}) for c in report["checkpoints"])
    ]
    if not tasks:
        return False
    ks = [int(k) for k in report["config"]["ks"]]
    fig, axes = plt.subplots(1, len(tasks), figsize=(5 * len(tasks), 4), squeeze=False)
    styles = {"calver": "-", "plurality": "--", "confidence": ":"}
    for ax, task in zip(axes[0], tasks):
        for i, c in enumerate(report["checkpoints"]):
            section = (c.get("best_of_k") or {}).get(task)
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
                        label=f"{c['label']} {selector}",
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


def _plot_early_answering(report: dict[str, Any], path: Path) -> bool:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 4))
    drawn = False
    for i, c in enumerate(report["checkpoints"]):
        early = (c.get("faithfulness") or {}).get("early_answering") or {}
        curve = early.get("curve_agreement")
        if curve:
            ax.plot(early["curve_fractions"], curve, marker="o", color=f"C{i}", label=c["label"])
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


def write_report(report: dict[str, Any], out_dir: str | Path) -> dict[str, Path]:
    """Write ``report.json``, ``report.md``, ``passk.png`` and (when available) ``hints.png``,
    ``best_of_k.png`` and ``early_answering.png`` to ``out_dir``; return their paths by name."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {
        "json": out_dir / "report.json",
        "markdown": out_dir / "report.md",
        "passk_png": out_dir / "passk.png",
    }
    paths["json"].write_text(
        json.dumps(_finite(report), indent=2, allow_nan=False, default=_json_default) + "\n"
    )
    paths["markdown"].write_text(render_markdown(report))
    _plot_passk(report, paths["passk_png"])
    if any(c.get("hints") for c in report["checkpoints"]):
        paths["hints_png"] = out_dir / "hints.png"
        _plot_hints(report, paths["hints_png"])
    if _plot_best_of_k(report, out_dir / "best_of_k.png"):
        paths["best_of_k_png"] = out_dir / "best_of_k.png"
    if _plot_early_answering(report, out_dir / "early_answering.png"):
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
