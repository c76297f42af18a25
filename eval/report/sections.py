"""Metric sections of the ``faithgrpo eval`` report, each computed from graded completions.

`passk_section` (Pass@K, CoT-Pass@K and, on causal tasks, `calver_check_rates`),
`faithfulness_section` (early-answering AOC / CIR and the CRoS Δ summary); the differences against
the reference checkpoint are in `faithgrpo.eval.report.comparisons` (best-of-K selection is
``faithgrpo select``, `faithgrpo.eval.selection`). `rate_estimate` and `checker_agreement` are the
prompt-clustered share and checker-agreement estimates the judge sections also use;
`sampling_settings` and `generate_cached` sample (or reuse) completions with the run's settings.
Each returns the JSON-ready dict stored in ``report.json``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from faithgrpo.eval.report.adapters import CAUSAL_TASKS, COT_VERIFIERS, answer_checker, cot_checker
from faithgrpo.eval.report.config import EvalConfig

__all__ = [
    "CALVER_CHECKS",
    "calver_check_rates",
    "checker_agreement",
    "count_task",
    "faithfulness_section",
    "generate_cached",
    "passk_section",
    "rate_estimate",
    "sampling_settings",
]

CALVER_CHECKS = ("graph", "query", "strategy", "derivation", "result", "answer")


def sampling_settings(config: EvalConfig, num_samples: int):
    """The run's sampling settings (`SamplingSettings`) with ``num_samples`` completions per prompt."""
    from faithgrpo.eval.generation.settings import SamplingSettings

    return SamplingSettings(
        num_samples=num_samples,
        temperature=config.temperature,
        top_p=config.top_p,
        max_new_tokens=config.max_new_tokens,
        seed=config.seed,
        batch_size=config.batch_size,
        threads=config.threads,
    )


def generate_cached(
    path: Path, model, tokenizer, prompts, ids, settings, metadata, config
) -> tuple[list, dict]:
    """Reuse ``path`` when it holds exactly these prompts with these settings; generate otherwise.

    Args:
        path: the JSONL cache file.
        model, tokenizer: the loaded checkpoint (only used when generating).
        prompts, ids: the prompts and their unique ids, in order.
        settings: `SamplingSettings` (see `sampling_settings`).
        metadata: extra cache-key fields (model, adapter, weights fingerprint, task, ...).
        config: ``overwrite``, ``progress``, ``backend`` and ``engine`` of the run.

    Returns:
        ``(records, stats)`` as `faithgrpo.eval.generation.backends.cached_generate` returns them.
    """
    from faithgrpo.eval.generation.backends import cached_generate

    return cached_generate(
        path,
        lambda: (model, tokenizer),
        prompts,
        ids,
        settings,
        metadata,
        overwrite=config.overwrite,
        progress=config.progress,
        backend=config.backend,
        engine=config.engine,
    )


def passk_section(rows, records, config: EvalConfig) -> dict[str, Any]:
    """Pass@K and CoT-Pass@K of one task's completions (plus `calver_check_rates` on causal tasks).

    Args:
        rows: the task's evaluation rows.
        records: their completions (`CompletionRecord`), in the same order.
        config: ``ks``, ``samples`` and the bootstrap settings.

    Returns:
        ``{"prompts", "samples", "cot_verifier", "answer_accuracy", "cot_accuracy", "counts",
        "k": {k: {"pass@k", "cot_pass@k"}}}`` and, on causal tasks, ``"calver_checks"``.
    """
    from faithgrpo.eval.metrics.passk import pass_at_k_table

    counts = count_task(rows, records)
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


def count_task(rows, records) -> list:
    """`PromptCounts` (C correct answers, D correct answer and CoT) of each row's completions.

    Args:
        rows: the task's evaluation rows.
        records: their completions (`CompletionRecord`), in the same order.
    """
    from faithgrpo.eval.metrics.passk import count_prompt

    return [
        count_prompt(rec.completions, answer_checker(row), cot_checker(row))
        for row, rec in zip(rows, records)
    ]


def calver_check_rates(rows, records, config: EvalConfig | None = None) -> dict[str, Any]:
    """Share of completions passing each CALVER check, all six, and the mean score S/6.

    CoT-Pass@K needs all six checks at once, so on a small model it is often 0 for every
    checkpoint; the per-check shares show where traces fail (graph restated, query, strategy,
    derivation, result, answer) and how a checkpoint moves on each. Intervals resample prompts
    (`faithgrpo.eval.metrics.passk.bootstrap_rate`): a prompt's completions are not independent.

    Args:
        rows: causal task rows (with ``problem`` and ``id``), in the order of ``records``.
        records: their completions (`CompletionRecord`).
        config: bootstrap settings (defaults: `EvalConfig`'s).

    Returns:
        ``{"completions", "checks": {name: rate}, "all_six": rate, "mean_score": mean}``, rates and
        the mean S/6 as `Estimate` dicts with prompt-clustered intervals (undefined when there is no
        completion).
    """
    from faithgrpo.rewards.calver.problem import prepare_problem
    from faithgrpo.rewards.calver.reward import score_trace

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
            name: rate_estimate(
                [getattr(s, name) for s in scores], clusters, config, reason, ("calver", name)
            )
            for name in CALVER_CHECKS
        },
        "all_six": rate_estimate([s.passed for s in scores], clusters, config, reason, ("calver", "all")),
        "mean_score": _cluster_mean([s.reward for s in scores], clusters, config, reason, ("calver", "mean")),
    }


def rate_estimate(
    outcomes: Sequence[bool], clusters: Sequence[Any], config: EvalConfig, reason: str, salt: Any
) -> dict[str, Any]:
    """Share of true ``outcomes`` with a prompt-clustered bootstrap interval, or undefined with ``reason``."""
    from faithgrpo.eval.metrics.passk import Estimate, bootstrap_rate

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


def _cluster_mean(
    values: Sequence[float], clusters: Sequence[Any], config: EvalConfig, reason: str, salt: Any
) -> dict[str, Any]:
    """Mean of per-completion ``values`` with a prompt-clustered bootstrap interval, or undefined with ``reason``."""
    from faithgrpo.eval.metrics.passk import Estimate, bootstrap_cluster_mean

    if not values:
        return Estimate.undefined(reason).to_dict()
    return bootstrap_cluster_mean(
        values,
        clusters,
        n_bootstrap=config.n_bootstrap,
        confidence=config.confidence,
        seed=config.seed,
        salt=salt,
    ).to_dict()


def checker_agreement(
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
        "rate": rate_estimate(
            [j == r for j, r in pairs], list(clusters), config, "no completion was judged", ("agree", name)
        ),
    }


def faithfulness_section(pairs, model, tokenizer, reference, config: EvalConfig) -> dict[str, Any]:
    """Early-answering AOC / CIR and the CRoS Δ summary on ``(prompt, completion)`` ``pairs``.

    Args:
        pairs: the scored completions with their prompts (empty: not requested).
        model, tokenizer: the checkpoint.
        reference: the model scoring CRoS Δ (``config.cros_reference``).
        config: ``aoc_mode``, ``batch_size``, bootstrap settings, ``progress``.

    Returns:
        ``{"pairs", "early_answering", "cros_delta", "cros_reference"}``, or ``{"pairs": 0, "reason"}``.
    """
    from faithgrpo.eval.metrics.deltas import summarize_deltas
    from faithgrpo.eval.metrics.faithfulness import truncation_analysis
    from faithgrpo.rewards.cros.reward import CRoSReward

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
    scores = cros.compute_deltas(pairs)
    deltas = summarize_deltas(
        scores,
        n_bootstrap=config.n_bootstrap,
        confidence=config.confidence,
        seed=config.seed,
    )
    return {
        "pairs": len(pairs),
        "early_answering": early.to_dict(),
        "cros_delta": deltas.to_dict(),
        "cros_reference": config.cros_reference,
        # Per pair (the same prompts for every checkpoint), for paired differences; None = undefined.
        "per_pair": {
            "aoc": [s.aoc for s in early.samples],
            "cir": [s.cir for s in early.samples],
            "cros_delta": [s.delta for s in scores],
        },
    }
