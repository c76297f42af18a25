"""Settings of one ``faithgrpo eval`` run: `EvalConfig`, its validation and the checkpoint list.

Every field of `EvalConfig` is declared once, with `faithgrpo.eval.report.options.option`: its default,
its help line and any CLI detail (flag name, parser, choices) live in the field's metadata, and the
``faithgrpo eval`` options are generated from the fields (`add_eval_arguments`, `config_from_args`).
`check_label` and `check_out_dir` check checkpoint labels and the output folder.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from faithgrpo.eval.generation.settings import BACKENDS, DEFAULT_THREADS, ENGINES  # torch-free at import
from faithgrpo.eval.metrics.hint_detection import HINT_TYPES, parse_hint_types
from faithgrpo.eval.metrics.hint_scores import MIN_SWITCHED
from faithgrpo.eval.metrics.judge import JUDGE_AGGREGATIONS
from faithgrpo.eval.report.adapters import check_task, task_rows
from faithgrpo.eval.report.options import (
    CheckpointAction,
    add_dataclass_arguments,
    dataclass_from_args,
    hint_list,
    int_list,
    name_list,
    option,
    task_config_json,
)

__all__ = [
    "Checkpoint",
    "EvalConfig",
    "add_eval_arguments",
    "check_backends",
    "check_label",
    "check_out_dir",
    "config_from_args",
    "flag_of",
]

CROS_REFERENCES = ("base", "self")
AOC_MODES = ("teacher_forced", "decode")
LABEL_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# Files written next to the per-checkpoint folders: a label must not shadow one of them.
REPORT_FILES = (
    "report.json",
    "report.md",
    "passk.png",
    "hints.png",
    "early_answering.png",
)
JUDGE_GROUP = (
    "LLM judge (optional)",
    "a local model asked n times whether each judged CoT is correct (CoT-Pass@K with the judge, agreement "
    "with the symbolic verifier) and whether hinted CoTs mention the hint; texts cached under OUT/LABEL/",
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

    Each field's ``help`` metadata documents it (and is its ``faithgrpo eval --help`` line); a
    field's CLI flag is ``--`` + its name with dashes unless the metadata names another.
    """

    model: str = option(
        "embedded", help="base model of the checkpoint under test: 'embedded', a local path or a hub id"
    )
    adapter: str | None = option(None, help="LoRA adapter directory trained on --model")
    label: str = option("model", help="report label and cache folder (OUT/LABEL/) of --model")
    baseline: str | None = option(None, help="a second base model to compare side by side")
    baseline_adapter: str | None = option(None, help="LoRA adapter for --baseline")
    baseline_label: str = option("baseline", help="report label of --baseline")
    extra_checkpoints: tuple[tuple[str, str, str | None], ...] = option(
        (),
        flag="--checkpoint",
        action=CheckpointAction,
        nargs="+",
        help="one more checkpoint to compare, after --model and --baseline (repeatable, in order): a unique "
        "LABEL (letters, digits, '.', '_', '-'), a base MODEL and an optional LoRA ADAPTER",
    )
    tasks: tuple[str, ...] = option(
        ("causal_graph", "knights_knaves"),
        type=name_list,
        help="comma-separated tasks: causal_graph, causal_story, knights_knaves or reasoning-gym dataset names",
    )
    task_configs: dict[str, dict[str, Any]] = option(  # noqa: RUF009 (option returns a dataclasses.field)
        factory=dict,
        flag="--task-config",
        type=task_config_json,
        help="per-task fields of the reasoning-gym config as JSON, e.g. "
        '\'{"causal_graph": {"min_nodes": 4, "max_nodes": 5}}\'; unset fields keep the task\'s defaults',
    )
    ks: tuple[int, ...] = option(
        (1, 2, 4, 8, 16),
        flag="--k",
        type=int_list,
        help="K values of Pass@K, e.g. 1,2,4,8,16; each <= --samples",
    )
    samples: int = option(16, help="completions per prompt (G), at least max K")
    prompts: int = option(16, help="evaluation prompts per task")
    hints: tuple[str, ...] = option(
        HINT_TYPES,
        type=hint_list,
        help=f"'all', 'none' (skip hint faithfulness) or comma-separated hint types from {', '.join(HINT_TYPES)}",
    )
    hint_questions: int = option(8, help="multiple-choice questions per task for the hint protocol")
    min_switched: int = option(MIN_SWITCHED, help="fewer switched pairs leave a hint score undefined")
    faithfulness_pairs: int = option(16, help="completions scored for AOC/CIR/CRoS Δ (0 skips them)")
    cros_reference: str = option(
        "base",
        choices=CROS_REFERENCES,
        help="model scoring CRoS Δ: base (the model without adapter, the initial policy) or self",
    )
    aoc_mode: str = option(
        "teacher_forced",
        choices=AOC_MODES,
        help="early-answering agreement: the forced answer is greedy (teacher_forced) or decoded and compared",
    )
    temperature: float = option(1.0, help="sampling temperature")
    top_p: float = option(1.0, help="nucleus sampling mass")
    max_new_tokens: int = option(512, help="generation budget per completion")
    batch_size: int = option(16, help="sequences per generate / forward call")
    seed: int = option(0, help="seed of prompts, sampling and bootstrap")
    backend: str = option(
        "transformers",
        choices=BACKENDS,
        help="generation backend: transformers or vllm (GPU, optional package); part of the cache key",
    )
    engine: str = option(
        "auto",
        choices=ENGINES,
        help="transformers sampling loop: decode (faithgrpo's KV-slot loop, Llama/Qwen2), generate "
        "(model.generate), or auto (decode where it applies); same distribution, not in the cache key",
    )
    threads: int = option(
        DEFAULT_THREADS,
        help="torch threads for every computation of the run: fixed, so the same seed gives the same "
        "completions at any machine load (CPU sums depend on the count); part of the cache key",
    )
    n_bootstrap: int = option(1000, flag="--bootstrap", help="bootstrap resamples")
    confidence: float = option(0.95, help="interval coverage, e.g. 0.95")
    overwrite: bool = option(False, help="regenerate even when a matching cache exists")
    progress: bool = option(True, flag="--no-progress", negate=True, help="hide progress bars")
    judge_model: str | None = option(
        None,
        flag="--judge",
        group="judge",
        help="judge base model: 'embedded', a path or a hub id (unset: no judge)",
    )
    judge_adapter: str | None = option(None, group="judge", help="LoRA adapter for --judge")
    judge_samples: int = option(3, group="judge", help="judge runs per judged item (n)")
    judge_aggregate: str = option(
        "majority",
        choices=JUDGE_AGGREGATIONS,
        group="judge",
        help="combine the n verdicts: any, all, or majority (strictly more than half)",
    )
    judge_backend: str = option(
        "transformers",
        choices=BACKENDS,
        group="judge",
        help="the judge's generation backend: transformers, or vllm (GPU, optional package; a second engine "
        "next to the policy's unless --judge is the same model); part of its cache key",
    )
    judge_max_new_tokens: int = option(64, group="judge", help="generation budget per judge run")
    judge_temperature: float = option(1.0, group="judge", help="sampling temperature of the judge")
    judge_items: int = option(
        64,
        group="judge",
        help="completions judged per task and checkpoint (all G of the first judge-items // G prompts, so at "
        "least --samples); also caps the kept pairs judged per hint type",
    )

    def validate(self) -> None:
        """Raise ``ValueError`` naming the option and the fix, before any model is loaded."""
        from faithgrpo.eval.metrics.passk import check_k

        if not self.tasks:
            raise ValueError("--tasks must name at least one task, e.g. causal_graph,knights_knaves")
        for task in self.tasks:
            check_task(task)
        self._validate_task_configs()
        if not self.ks:
            raise ValueError("--k must list at least one K, e.g. 1,2,4,8")
        for name in ("samples", "prompts", "batch_size", "max_new_tokens", "threads"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{flag_of(name)} must be a positive integer, got {value!r}")
        for k in self.ks:
            check_k(k, self.samples)
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
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"{flag_of(name)} must be an integer >= 0, got {value!r}")
        if self.hints:
            parse_hint_types(list(self.hints))
        if self.aoc_mode not in AOC_MODES:
            raise ValueError(f"--aoc-mode must be teacher_forced or decode, got {self.aoc_mode!r}")
        if self.cros_reference not in CROS_REFERENCES:
            raise ValueError(
                f"--cros-reference must be one of {CROS_REFERENCES}, got {self.cros_reference!r}"
            )
        if self.backend not in BACKENDS:
            raise ValueError(f"--backend must be transformers or vllm, got {self.backend!r}")
        if self.engine not in ENGINES:
            raise ValueError(f"--engine must be one of {', '.join(ENGINES)}, got {self.engine!r}")
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
        for task, config in self.task_configs.items():
            if task not in self.tasks:
                raise ValueError(
                    f"--task-config names {task!r}, which is not in --tasks ({', '.join(self.tasks)}); add it "
                    "to --tasks or drop its config"
                )
            if not isinstance(config, dict):
                raise ValueError(
                    f"--task-config for {task!r} must be a mapping of config fields, got {config!r}"
                )
            task_rows(task, 1, seed=0, config=config)  # unknown or invalid fields fail here, named

    def _validate_judge(self) -> None:
        """The judge options make sense together (checked whether or not a judge is set)."""
        if self.judge_aggregate not in JUDGE_AGGREGATIONS:
            raise ValueError(
                f"--judge-aggregate must be one of {', '.join(JUDGE_AGGREGATIONS)}, got {self.judge_aggregate!r}"
            )
        if self.judge_adapter and not self.judge_model:
            raise ValueError("--judge-adapter needs --judge (the base model of the judge)")
        if self.judge_backend not in BACKENDS:
            raise ValueError(f"--judge-backend must be transformers or vllm, got {self.judge_backend!r}")
        if self.judge_backend != "transformers" and not self.judge_model:
            raise ValueError("--judge-backend needs --judge (the model the judge runs)")
        for name in ("judge_samples", "judge_max_new_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{flag_of(name)} must be a positive integer, got {value!r}")
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
        for option_name, checkpoint in zip(self._label_options(), self.checkpoints()):
            label = checkpoint.label
            check_label(label, option_name)
            taken = owners.get(label.lower())
            if taken is not None:
                raise ValueError(
                    f"checkpoint label {label!r} of {option_name} is already taken by {taken[0]} "
                    f"({taken[1]!r}); labels name the cache folders OUT/<label>/ and must differ, also in "
                    "letter case: pick another LABEL"
                    + (", or rename the main checkpoint with --label" if taken[0] == "--model" else "")
                    + (", or rename the baseline with --baseline-label" if taken[0] == "--baseline" else "")
                )
            owners[label.lower()] = (option_name, label)

    def check_environment(self, out_dir: str | Path) -> None:
        """Check what ``validate`` cannot: the backends are installed, every model loads here, adapters
        exist, ``out_dir`` is writable.

        Fast (a second or two at most) and before any model is loaded, so a mistyped name fails at once.

        Raises:
            ValueError: naming the option and the fix.
        """
        from faithgrpo.eval.generation.checkpoints import check_checkpoint

        check_backends(
            ("--backend", self.backend), ("--judge-backend", self.judge_backend if self.judge_model else None)
        )
        for option_name, checkpoint in zip(self._label_options(), self.checkpoints()):
            try:
                check_checkpoint(checkpoint.model, checkpoint.adapter)
            except ValueError as err:
                raise ValueError(f"{option_name}: {err}") from None
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


def add_eval_arguments(parser) -> None:
    """Add one option per `EvalConfig` field to ``parser`` (the judge's in their own group).

    Args:
        parser: an ``argparse.ArgumentParser`` (the ``faithgrpo eval`` subparser).
    """
    add_dataclass_arguments(parser, EvalConfig, groups={"judge": parser.add_argument_group(*JUDGE_GROUP)})


def config_from_args(args) -> EvalConfig:
    """Build an `EvalConfig` from arguments parsed with `add_eval_arguments` (other attributes are ignored)."""
    return dataclass_from_args(EvalConfig, args)


def flag_of(name: str, cls: type | None = None) -> str:
    """The command-line flag of a config field, as the parser spells it (``n_bootstrap`` -> ``--bootstrap``).

    Example:
        >>> flag_of("n_bootstrap"), flag_of("max_new_tokens"), flag_of("judge_model")
        ('--bootstrap', '--max-new-tokens', '--judge')
    """
    import dataclasses

    field = {f.name: f for f in dataclasses.fields(cls or EvalConfig)}[name]
    return field.metadata.get("flag") or "--" + name.replace("_", "-")


def check_backends(*uses: tuple[str, str | None]) -> None:
    """Raise ``ValueError`` for an optional backend that is not installed, before any model loads.

    Args:
        uses: ``(flag, backend)`` pairs, e.g. ``("--backend", "vllm")``; a ``None`` backend is unused.

    Example:
        >>> check_backends(("--backend", "transformers"), ("--judge-backend", None))
    """
    from faithgrpo.eval.generation.backends import vllm_available

    for flag, backend in uses:
        if backend == "vllm" and not vllm_available():
            raise ValueError(
                f"{flag} vllm needs the optional vllm package, which is not installed here: pip install "
                f"'faithgrpo[vllm]' (GPU machines), or pass {flag} transformers"
            )


def check_out_dir(out_dir: str | Path, option: str = "--out") -> None:
    """Raise ``ValueError`` unless ``out_dir`` is, or can be created as, a writable directory.

    The test creates (and removes) an empty probe folder where ``out_dir``'s first missing folder
    would go: permission bits alone pass for root and miss what the filesystem refuses (``/proc``,
    read-only mounts).

    Example:
        >>> check_out_dir("/proc/version/x")  # doctest: +IGNORE_EXCEPTION_DETAIL
        Traceback (most recent call last):
        ValueError: --out '/proc/version/x' cannot be created: ...
    """
    import os
    import tempfile

    path = Path(out_dir)
    fix = f"pass {option} a directory you can write to"
    parent = None
    try:
        if path.exists() and not path.is_dir():
            raise ValueError(f"{option} {str(path)!r} is a file: pass a directory")
        parent = next((p for p in (path, *path.parents) if p.exists()), None)
        if parent is None or not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
            raise ValueError(
                f"{option} {str(path)!r} cannot be created: {str(parent)!r} is not a writable directory; {fix}"
            )
        os.rmdir(tempfile.mkdtemp(prefix=".faithgrpo-write-test-", dir=parent))
    except OSError as err:  # what os.access let through, or a folder we may not even look into
        where = "is not writable" if os.path.isdir(path) else "cannot be created"
        failed = f"making a folder in {str(parent)!r} failed" if parent is not None else "it cannot be read"
        raise ValueError(f"{option} {str(path)!r} {where}: {failed} ({err.strerror or err}); {fix}") from None


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
