"""Metric sections of the ``faithgrpo eval`` report, each computed from graded completions.

`passk_section` (Pass@K, CoT-Pass@K and, on causal tasks, `calver_check_rates`),
`faithfulness_section` (early-answering AOC / CIR and the CRoS Δ summary), `best_of_k_section`
(CALVER vs plurality vs confidence selection) and `paired_comparisons` (differences against the
reference checkpoint, bootstrapped over shared prompts). `rate_estimate` and `checker_agreement` are the
prompt-clustered share and checker-agreement estimates the judge sections also use;
`sampling_settings` and `generate_cached` sample (or reuse) completions with the run's settings.
Each returns the JSON-ready dict stored in ``report.json``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from faithgrpo.eval.adapters import CAUSAL_TASKS, COT_VERIFIERS, answer_checker, cot_checker
from faithgrpo.eval.config import EvalConfig
from faithgrpo.eval.results import dig

__all__ = [
    "CALVER_CHECKS",
    "SELECTORS",
    "best_of_k_section",
    "calver_check_rates",
    "checker_agreement",
    "common_hint_means",
    "count_task",
    "faithfulness_section",
    "generate_cached",
    "paired_comparisons",
    "passk_section",
    "rate_estimate",
    "sampling_settings",
]

CALVER_CHECKS = ("graph", "query", "strategy", "derivation", "result", "answer")
SELECTORS = ("calver", "plurality", "confidence")


def sampling_settings(config: EvalConfig, num_samples: int):
    """The run's sampling settings (`SamplingSettings`) with ``num_samples`` completions per prompt."""
    from faithgrpo.eval.generation import SamplingSettings

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
        ``(records, stats)`` as `faithgrpo.eval.generation.cached_generate` returns them.
    """
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
    from faithgrpo.eval.passk import pass_at_k_table

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
    from faithgrpo.eval.passk import count_prompt

    return [
        count_prompt(rec.completions, answer_checker(row), cot_checker(row))
        for row, rec in zip(rows, records)
    ]


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
        ``{"completions", "checks": {name: rate}, "all_six": rate, "mean_score": mean}``, rates and
        the mean S/6 as `Estimate` dicts with prompt-clustered intervals (undefined when there is no
        completion).
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


def _cluster_mean(
    values: Sequence[float], clusters: Sequence[Any], config: EvalConfig, reason: str, salt: Any
) -> dict[str, Any]:
    """Mean of per-completion ``values`` with a prompt-clustered bootstrap interval, or undefined with ``reason``."""
    from faithgrpo.eval.passk import Estimate, bootstrap_cluster_mean

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
    from faithgrpo.eval.deltas import summarize_deltas
    from faithgrpo.eval.faithfulness import truncation_analysis
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
        logprobs: mean log-probability of every completion's answer tokens (the confidence selector).
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


def paired_comparisons(checkpoints: list[dict[str, Any]], config: EvalConfig) -> dict[str, Any]:
    """Pass@K and CoT-Pass@K differences of every checkpoint against the reference, paired over prompts.

    The reference is the ``--baseline`` checkpoint when there is one, else the first (``--model``).
    Every checkpoint is evaluated on the same prompts, so the difference is bootstrapped per prompt
    (one resample draws prompts and keeps both checkpoints' values of each): "did GRPO beat the base?"
    gets an interval that accounts for the prompts being shared.

    Hint scores (raw and normalised per hint type, and their mean) get the same treatment over the
    multiple-choice questions (`faithgrpo.eval.hint_scores.paired_hint_differences`).

    Returns:
        ``{"reference": label, "checkpoints": {label: {task: {k: {"pass@k": Estimate dict,
        "cot_pass@k": Estimate dict}}}}, "faithfulness": {label: {...}}, "hints": {label: {...}}}``;
        empty ``checkpoints`` with a single checkpoint, no ``hints`` when the hint protocol did not run.
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
        out.setdefault("faithfulness", {})[c["label"]] = _paired_faithfulness(c, ref, config)
        hints = _paired_hints(c, ref, config)
        if hints is not None:
            out.setdefault("hints", {})[c["label"]] = hints
    return out


def common_hint_means(checkpoints: list[dict[str, Any]], config: EvalConfig) -> dict[str, Any] | None:
    """Each checkpoint's mean normalised hint score over the hint types defined for *every* checkpoint.

    A checkpoint's own ``mean_normalized`` averages the types defined for it; side by side, means
    over different types would not compare like with like. This mean takes the types every
    checkpoint has, with the bootstrap interval over questions of `mean_normalized`.

    Returns:
        ``{"types": [...], "checkpoints": {label: Estimate dict}}``, or ``None`` when no checkpoint ran
        the hint protocol.
    """
    from faithgrpo.eval.hint_scores import HintFaithfulness, PairOutcome, mean_normalized
    from faithgrpo.eval.passk import Estimate

    ran = [c for c in checkpoints if dig(c, "hints", "outcomes")]
    if not ran:
        return None
    common = [
        t
        for t in config.hints
        if all(dig(c, "hints", "types", t, "normalized", "value") is not None for c in checkpoints)
    ]
    out: dict[str, Any] = {"types": common, "checkpoints": {}}
    for c in checkpoints:
        if c not in ran or not common:
            out["checkpoints"][c["label"]] = Estimate.undefined(
                "no hint type has a normalised score defined for every checkpoint"
            ).to_dict()
            continue
        scores = {}
        for t in common:
            fields = dict(c["hints"]["types"][t])
            for name in ("p", "q", "alpha", "raw", "normalized"):
                fields[name] = Estimate(**fields[name])
            scores[t] = HintFaithfulness(**fields)
        out["checkpoints"][c["label"]] = mean_normalized(
            scores,
            [PairOutcome(**o) for o in c["hints"]["outcomes"]],
            confidence=config.confidence,
            n_bootstrap=config.n_bootstrap,
            seed=config.seed,
        ).to_dict()
    return out


def _paired_hints(c: dict[str, Any], ref: dict[str, Any], config: EvalConfig) -> dict[str, Any] | None:
    """Hint-score differences against ``ref``, paired over the same questions; ``None`` without hints."""
    from faithgrpo.eval.hint_scores import PairOutcome, paired_hint_differences

    mine, theirs = dig(c, "hints", "outcomes"), dig(ref, "hints", "outcomes")
    if not mine or not theirs:
        return None
    result = paired_hint_differences(
        [PairOutcome(**o) for o in mine],
        [PairOutcome(**o) for o in theirs],
        list(config.hints),
        min_switched=config.min_switched,
        confidence=config.confidence,
        n_bootstrap=config.n_bootstrap,
        seed=config.seed,
        salt=(c["label"], ref["label"]),
    )
    return {
        **result,
        "types": {t: {k: e.to_dict() for k, e in per.items()} for t, per in result["types"].items()},
        "mean_normalized": result["mean_normalized"].to_dict(),
    }


def _paired_faithfulness(c: dict[str, Any], ref: dict[str, Any], config: EvalConfig) -> dict[str, Any]:
    """AOC, CIR and CRoS Δ differences against ``ref`` over the prompts where both are defined."""
    from faithgrpo.eval.passk import Estimate, bootstrap_mean

    mine = dig(c, "faithfulness", "per_pair") or {}
    theirs = dig(ref, "faithfulness", "per_pair") or {}
    out = {}
    for name in ("aoc", "cir", "cros_delta"):
        a, b = mine.get(name), theirs.get(name)
        if not a or not b or len(a) != len(b):
            out[name] = Estimate.undefined("faithfulness metrics not computed on the same prompts").to_dict()
            continue
        diffs = [x - y for x, y in zip(a, b) if x is not None and y is not None]
        est = bootstrap_mean(
            diffs,
            n_bootstrap=config.n_bootstrap,
            confidence=config.confidence,
            seed=config.seed,
            salt=("paired-faithfulness", c["label"], name),
        )
        if len(diffs) < len(a) and est.value is not None:
            note = f"{len(a) - len(diffs)} of {len(a)} prompts undefined for one of the two"
            est = Estimate(
                est.value, est.ci_low, est.ci_high, est.n, f"{note}; {est.reason}" if est.reason else note
            )
        out[name] = (
            est.to_dict()
            if est.value is not None
            else Estimate.undefined(f"no prompt where both are defined ({est.reason})").to_dict()
        )
    return out
