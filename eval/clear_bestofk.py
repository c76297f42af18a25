"""CLEAR best-of-K: the CALVER paper's selection experiment, run on CLEAR's find-one-valid questions.

For every selected CLEAR ``FO`` question (backdoor / frontdoor adjustment sets, d-separation; any,
minimal and maximal variants) the record becomes a DESIGN §4 problem
(`faithgrpo.tasks.clear.records.to_problem`), the six-slot trace prompt is built from it
(`faithgrpo.tasks.causal.prompts.chat_prompt`), ``G`` completions are sampled once with the shared
generation backend and cached (`faithgrpo.eval.generation.backends.cached_generate`), and every completion is
graded once:

- CALVER score S (`faithgrpo.rewards.calver.reward.score_trace`, supplied-graph mode, no reference answer);
- its normalised answer (plurality's vote) and mean answer-token log-probability (confidence);
- ``valid``: the CLEAR judge accepts the answer (any graph-valid set, listed or not);
- ``exact``: the answer equals a listed answer (any member where CLEAR lists several).

The selectors then run on these frozen pools (`faithgrpo.eval.metrics.bestofk.run_selection`): accuracy per
selector and K under both gradings, prompt-clustered bootstrap intervals, the paired CALVER −
plurality difference and the paper's audit figures. Output: ``clear_bestofk.json``,
``clear_bestofk.md`` and ``clear_bestofk.png`` in ``--out``.

Example:
    faithgrpo clear-bestofk --model embedded --clear CLEAR/data/json_single --limit 24 \\
        --samples 8 --k 1,2,4,8 --max-new-tokens 384 --out runs/clear_bestofk
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from faithgrpo.eval.generation.settings import BACKENDS, DEFAULT_THREADS, ENGINES
from faithgrpo.eval.metrics.bestofk import DEFAULT_SUBSETS, BestOfKResult, Candidate, Pool, run_selection
from faithgrpo.eval.report.options import int_list, name_list, option

__all__ = [
    "DEFAULT_TASKS",
    "ClearBestOfKConfig",
    "ClearBestOfKReport",
    "ConfigError",
    "grade_pool",
    "run_clear_bestofk",
    "select_questions",
]

DEFAULT_TASKS = ("backdoor_adjustment_set", "frontdoor_adjustment_set", "d-separation")


class ConfigError(ValueError):
    """A user setting that cannot work; the message says what to change."""


@dataclass
class ClearBestOfKConfig:
    """Settings of one CLEAR best-of-K run (every field is a ``faithgrpo clear-bestofk`` flag).

    Attributes:
        clear: a CLEAR JSONL file or CLEAR's ``data/json_single`` directory.
        out: output directory (created).
        model: ``"embedded"``, a local checkpoint or a hub id.
        adapter: optional LoRA adapter directory.
        tasks: CLEAR task types to draw ``FO`` questions from.
        limit: number of questions, stratified over task type × variant (``None``: all).
        samples: completions per question (G); every K must be ≤ G.
        ks: subset sizes K.
        subsets: K-subsets drawn per question when K < G.
        temperature, top_p, max_new_tokens, batch_size, seed: sampling settings.
        threads: torch threads of the run (fixed, so the same seed gives the same completions at
            any machine load; part of the cache key).
        backend: ``"transformers"`` or ``"vllm"``.
        n_bootstrap, confidence: bootstrap settings.
        overwrite: regenerate even when the completions cache matches.
        progress: progress bars.
    """

    clear: str = option(help="a CLEAR JSONL file or CLEAR's data/json_single directory")
    out: str = option(help="output directory: completions cache, clear_bestofk.json / .md / .png")
    model: str = option("embedded", help="policy: 'embedded', a local path or a hub id")
    adapter: str | None = option(None, help="LoRA adapter directory trained on --model")
    tasks: tuple[str, ...] = option(
        DEFAULT_TASKS, type=name_list, help="comma-separated CLEAR task types with find-one questions"
    )
    limit: int | None = option(
        None, type=int, help="questions, stratified over task type x variant (default: all)"
    )
    samples: int = option(32, help="completions per question (G), at least max K")
    ks: tuple[int, ...] = option(
        (1, 2, 4, 8, 16, 32), flag="--k", type=int_list, help="K values, e.g. 1,2,4,8,16,32"
    )
    subsets: int = option(DEFAULT_SUBSETS, help="seeded K-subsets per question when K < G")
    temperature: float = option(1.0, help="sampling temperature")
    top_p: float = option(1.0, help="nucleus sampling mass")
    max_new_tokens: int = option(512, help="generation budget per completion")
    batch_size: int = option(16, help="sequences per generate / forward call")
    seed: int = option(0, help="seed of sampling, subsets and bootstrap")
    threads: int = option(
        DEFAULT_THREADS,
        help="torch threads of the run: fixed, so a seed gives the same completions at any load",
    )
    backend: str = option(
        "transformers", help="generation backend: transformers or vllm (GPU, optional package)"
    )
    engine: str = option(
        "auto", help="transformers sampling loop: decode, generate, or auto (decode where it applies)"
    )
    n_bootstrap: int = option(1000, help="bootstrap resamples over questions")
    confidence: float = option(0.95, help="interval coverage")
    overwrite: bool = option(False, help="regenerate even when the completions cache matches")
    progress: bool = option(True, flag="--no-progress", negate=True, help="hide progress bars")

    def validate(self) -> None:
        """Check every setting before anything loads.

        Raises:
            ConfigError: with a one-line message naming the flag and the fix.
        """
        from faithgrpo.tasks.clear.descriptions import normalize_task_type

        if not Path(self.clear).exists():
            raise ConfigError(
                f"--clear {self.clear!r} does not exist: pass a CLEAR .json(l) file or its data directory"
            )
        known = {normalize_task_type(t) for t in DEFAULT_TASKS}
        unknown = [t for t in self.tasks if normalize_task_type(t) not in known]
        if not self.tasks or unknown:
            raise ConfigError(f"--tasks must name some of {', '.join(DEFAULT_TASKS)}; unknown: {unknown}")
        if self.limit is not None and self.limit < 1:
            raise ConfigError(f"--limit must be >= 1, got {self.limit}")
        if self.samples < 1:
            raise ConfigError(f"--samples must be >= 1, got {self.samples}")
        if not self.ks or any(k < 1 or k > self.samples for k in self.ks):
            raise ConfigError(
                f"every --k must be between 1 and --samples={self.samples}, got {list(self.ks)}"
            )
        if self.subsets < 1:
            raise ConfigError(f"--subsets must be >= 1, got {self.subsets}")
        if self.temperature < 0:
            raise ConfigError(f"--temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"--top-p must be in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1 or self.batch_size < 1:
            raise ConfigError("--max-new-tokens and --batch-size must be >= 1")
        if self.threads < 1:
            raise ConfigError(f"--threads must be >= 1, got {self.threads}")
        if self.backend not in BACKENDS:
            raise ConfigError(f"--backend must be one of {BACKENDS}, got {self.backend!r}")
        if self.engine not in ENGINES:
            raise ConfigError(f"--engine must be one of {ENGINES}, got {self.engine!r}")
        if self.n_bootstrap < 0 or not 0 < self.confidence < 1:
            raise ConfigError("--n-bootstrap must be >= 0 and --confidence in (0, 1)")

    def check_environment(self) -> None:
        """The model loads here, the adapter is a LoRA directory, ``out`` is writable (fast, before loading).

        Raises:
            ConfigError: naming the option and the fix.
        """
        from faithgrpo.eval.generation.checkpoints import check_checkpoint
        from faithgrpo.eval.report.config import check_backends, check_out_dir

        try:
            check_backends(("--backend", self.backend))
        except ValueError as err:
            raise ConfigError(str(err)) from None
        try:
            check_checkpoint(self.model, self.adapter)
        except ValueError as err:
            raise ConfigError(f"--model/--adapter: {err}") from None
        try:
            check_out_dir(self.out)
        except ValueError as err:
            raise ConfigError(str(err)) from None


@dataclass(frozen=True)
class Question:
    """One selected CLEAR record with its problem and the listed answers (normalised)."""

    id: str
    stratum: str
    record: dict[str, Any]
    problem: dict[str, Any]
    listed: frozenset[str]


def _variant(problem: Mapping[str, Any]) -> str:
    return str(problem["query"].get("variant", "any"))


def select_questions(
    records: Sequence[Mapping[str, Any]], tasks: Sequence[str], limit: int | None, seed: int
) -> tuple[list[Question], dict[str, int]]:
    """The ``FO`` questions of ``tasks`` that convert to CALVER problems, stratified and seeded.

    Strata are task type × variant; each stratum is shuffled with ``seed`` and the strata are
    visited round-robin until ``limit`` questions are taken, so a small limit still covers every
    stratum.

    Returns:
        ``(questions, skipped)``: ``skipped`` counts records left out and why.
    """
    from faithgrpo.tasks.causal.queries import normalize_answer
    from faithgrpo.tasks.clear.candidates import judge, listed_answers
    from faithgrpo.tasks.clear.descriptions import normalize_task_type
    from faithgrpo.tasks.clear.records import to_problem

    wanted = {normalize_task_type(t) for t in tasks}
    skipped: Counter[str] = Counter()
    strata: dict[str, list[Question]] = defaultdict(list)
    for record in records:
        task = normalize_task_type(record.get("task_type", ""))
        if task not in wanted:
            continue
        if str(record.get("question_type", "")).upper() != "FO":
            skipped["not a find-one question"] += 1
            continue
        problem = to_problem(record)
        members = listed_answers(record) or []
        if problem is None:
            skipped["no CALVER query kind for this question"] += 1
            continue
        if not members or not all(judge(record, m) for m in members):
            skipped["listed answer not accepted by the judge"] += 1
            continue
        listed = frozenset(a for a in (normalize_answer(problem, m) for m in members) if a is not None)
        stratum = f"{task}/{_variant(problem)}"
        qid = f"{task}/{record.get('uid', '?')}/{record.get('sid', len(strata[stratum]))}"
        strata[stratum].append(Question(qid, stratum, dict(record), problem, listed))
    rng = random.Random(f"clear-bestofk:{seed}")
    queues = []
    for name in sorted(strata):
        items = sorted(strata[name], key=lambda q: q.id)
        rng.shuffle(items)
        queues.append(items)
    chosen: list[Question] = []
    seen: set[str] = set()
    while queues and (limit is None or len(chosen) < limit):
        queues = [q for q in queues if q]
        for queue in queues:
            if limit is not None and len(chosen) >= limit:
                break
            question = queue.pop(0)
            if question.id in seen:
                skipped["duplicate uid/sid"] += 1
                continue
            seen.add(question.id)
            chosen.append(question)
    return chosen, dict(skipped)


def grade_pool(question: Question, completions: Sequence[str], confidences: Sequence[float | None]) -> Pool:
    """Grade every completion of one question (CALVER score, vote, confidence, valid, exact).

    Example:
        >>> from faithgrpo.tasks.clear import to_problem
        >>> rec = {"description": "Given a DAG (directed acyclic graph) with nodes U, X, Y and directed edges "
        ...        "U->X, U->Y, X->Y.", "graph_type": "DAG", "uid": "1", "sid": 0, "question_type": "FO",
        ...        "task_type": "backdoor_adjustment_set", "answer": "{'U'}",
        ...        "question": "Find one valid backdoor adjustment set for treatment X and outcome Y."}
        >>> q = Question("q", "backdoor_adjustment_set/any", rec, to_problem(rec), frozenset({"{U}"}))
        >>> pool = grade_pool(q, ["<answer>{U}</answer>", "<answer>set()</answer>"], [-0.1, None])
        >>> [(c.answer, c.valid, c.exact) for c in pool.candidates]
        [('{U}', True, True), ('{}', False, False)]
    """
    from faithgrpo.rewards.calver.problem import prepare_problem
    from faithgrpo.rewards.calver.reward import score_trace
    from faithgrpo.rewards.selection import normalized_answer
    from faithgrpo.rewards.text import extract_answer
    from faithgrpo.tasks.clear.candidates import judge

    prepared = prepare_problem(question.problem)
    candidates = []
    for text, conf in zip(completions, confidences):
        span = extract_answer(text)
        answer = None if span is None else normalized_answer(text, prepared)
        valid = span is not None and judge(question.record, span) is True
        candidates.append(
            Candidate(
                answer=answer,
                calver=score_trace(text, prepared).total,
                confidence=conf,
                valid=valid,
                exact=answer is not None and answer in question.listed,
            )
        )
    return Pool(question.id, question.stratum, tuple(candidates))


@dataclass
class ClearBestOfKReport:
    """What one run produced: the settings, which questions, generation figures, the selection result."""

    config: dict[str, Any]
    questions: list[dict[str, Any]]
    skipped: dict[str, int]
    generation: dict[str, Any]
    grading_seconds: float
    pool_stats: dict[str, Any]
    result: BestOfKResult
    files: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": self.config,
            "questions": self.questions,
            "skipped": self.skipped,
            "generation": self.generation,
            "grading_seconds": self.grading_seconds,
            "pool_stats": self.pool_stats,
            "result": self.result.to_dict(),
            "files": self.files,
        }


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _confidences(
    path: Path,
    completions_path: Path,
    load: Callable[[], tuple[Any, Any]],
    pairs: list[tuple[Any, str]],
    config,
    memo: dict[str, str] | None = None,
) -> list[float | None]:
    """Mean answer log-probabilities, cached next to the completions they were computed from."""
    from faithgrpo.eval.generation.cache import checkpoint_fingerprint
    from faithgrpo.eval.metrics.logprobs import answer_logprobs

    key = {
        "completions_sha256": _sha256(completions_path),
        "weights": checkpoint_fingerprint(config.model, config.adapter, memo=memo),
    }
    if path.exists() and not config.overwrite:
        try:
            cached = json.loads(path.read_text(encoding="utf-8"))
            if cached.get("key") == key and len(cached.get("values", [])) == len(pairs):
                return cached["values"]
        except (OSError, json.JSONDecodeError):
            pass
    model, tokenizer = load()
    values = answer_logprobs(model, tokenizer, pairs, batch_size=config.batch_size, progress=config.progress)
    path.write_text(json.dumps({"key": key, "values": values}), encoding="utf-8")
    return values


def run_clear_bestofk(config: ClearBestOfKConfig) -> ClearBestOfKReport:
    """Run the experiment end to end and write JSON, Markdown and the plot into ``config.out``.

    The run owns ``config.out`` while it runs (`faithgrpo.eval.report.outlock.own_out_dir`).

    Raises:
        ConfigError: a bad setting, or no question left to run on.
        OutDirBusy: another run holds ``config.out``.
    """
    from faithgrpo.eval.report.outlock import own_out_dir

    config.validate()
    config.check_environment()
    with own_out_dir(config.out):
        return _run_clear_bestofk(config)


def _run_clear_bestofk(config: ClearBestOfKConfig) -> ClearBestOfKReport:
    """`run_clear_bestofk` once the settings are checked and the output folder is held."""
    from faithgrpo.eval.bestofk_render import render_markdown, write_plot
    from faithgrpo.eval.generation.backends import cached_generate
    from faithgrpo.eval.generation.cache import weights_fingerprint
    from faithgrpo.eval.generation.checkpoints import load_checkpoint
    from faithgrpo.eval.generation.settings import SamplingSettings, fixed_threads
    from faithgrpo.tasks.causal.prompts import chat_prompt
    from faithgrpo.tasks.clear.records import load_records

    try:
        records = load_records(config.clear)
    except (OSError, ValueError) as err:
        raise ConfigError(f"--clear {config.clear!r}: {err}") from None
    questions, skipped = select_questions(records, config.tasks, config.limit, config.seed)
    if not questions:
        raise ConfigError(
            f"no find-one question of {list(config.tasks)} in {config.clear!r} converts to a CALVER problem"
        )
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)

    loaded: dict[str, Any] = {}

    def load() -> tuple[Any, Any]:
        if "model" not in loaded:
            loaded["model"] = load_checkpoint(config.model, config.adapter)
        return loaded["model"]

    def load_for_generation() -> tuple[Any, Any]:
        if config.backend == "vllm":
            from transformers import AutoTokenizer

            from faithgrpo.models import resolve

            path = resolve(config.model)
            return path, AutoTokenizer.from_pretrained(path)
        return load()

    settings = SamplingSettings(
        num_samples=config.samples,
        temperature=config.temperature,
        top_p=config.top_p,
        max_new_tokens=config.max_new_tokens,
        seed=config.seed,
        batch_size=config.batch_size,
        threads=config.threads,
    )
    prompts = [chat_prompt(q.problem) for q in questions]
    completions_path = out / "completions.jsonl"
    memo: dict[str, str] = {}  # each weight file is hashed once per run
    metadata = {
        "model": config.model,
        "adapter": config.adapter,
        "weights": weights_fingerprint(config.model, config.adapter, memo=memo),
        "experiment": "clear-bestofk",
    }
    records_out, generation = cached_generate(
        completions_path,
        load_for_generation,
        prompts,
        [q.id for q in questions],
        settings,
        metadata,
        overwrite=config.overwrite,
        progress=config.progress,
        check_prompts=True,
        backend=config.backend,
        engine=config.engine,
    )
    pairs = [(p, c) for p, r in zip(prompts, records_out) for c in r.completions]
    with fixed_threads(config.threads):
        flat = _confidences(out / "confidence.json", completions_path, load, pairs, config, memo)
    start = time.perf_counter()
    pools = []
    for i, (question, record) in enumerate(zip(questions, records_out)):
        g = len(record.completions)
        pools.append(grade_pool(question, record.completions, flat[i * g : (i + 1) * g]))
    grading_seconds = time.perf_counter() - start
    result = run_selection(
        pools,
        config.ks,
        subsets=config.subsets,
        seed=config.seed,
        n_bootstrap=config.n_bootstrap,
        confidence=config.confidence,
    )
    every = [c for p in pools for c in p.candidates]
    pool_stats = {
        "completions": len(every),
        "with_answer": sum(c.answer is not None for c in every),
        "valid": sum(c.valid for c in every),
        "exact": sum(c.exact for c in every),
        "calver_score_histogram": {str(s): sum(c.calver == s for c in every) for s in range(7)},
        "pools_with_valid": sum(any(c.valid for c in p.candidates) for p in pools),
    }
    report = ClearBestOfKReport(
        config={**asdict(config), "tasks": list(config.tasks), "ks": list(config.ks)},
        questions=[
            {
                "id": q.id,
                "stratum": q.stratum,
                "listed": sorted(q.listed),
                "question": q.record.get("question"),
            }
            for q in questions
        ],
        skipped=skipped,
        generation=generation,
        grading_seconds=grading_seconds,
        pool_stats=pool_stats,
        result=result,
    )
    files = {
        "json": out / "clear_bestofk.json",
        "markdown": out / "clear_bestofk.md",
        "plot": out / "clear_bestofk.png",
    }
    report.files = {name: str(path) for name, path in files.items()}
    if not write_plot(report, files["plot"]):
        report.files.pop("plot")
    files["markdown"].write_text(render_markdown(report), encoding="utf-8")
    files["json"].write_text(json.dumps(report.to_dict(), indent=2, allow_nan=False), encoding="utf-8")
    return report
