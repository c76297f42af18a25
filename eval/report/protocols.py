"""The hint and LLM-judge protocols of the ``faithgrpo eval`` report.

`hints_section` samples unhinted and hinted completions of the multiple-choice questions and scores
hint faithfulness per hint type (`faithgrpo.eval.metrics.hints`); `make_judge` builds the optional
`LLMJudge`, `judge_passk_section` uses it as the CoT checker of CoT-Pass@K (with its agreement with
the symbolic verifier), and `judge_hints_section` asks it whether hinted CoTs verbalise the hint.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from faithgrpo.eval.report.adapters import COT_VERIFIERS, answer_checker, cot_checker
from faithgrpo.eval.report.config import EvalConfig
from faithgrpo.eval.report.sections import (
    checker_agreement,
    generate_cached,
    rate_estimate,
    sampling_settings,
)

__all__ = ["hints_section", "judge_hints_section", "judge_passk_section", "make_judge"]


def make_judge(config: EvalConfig, memo: dict[str, str] | None = None):
    """The `LLMJudge` configured by ``config.judge_*``, or ``None`` without ``--judge``.

    The judge model is loaded on first use and shared by all checkpoints of the run; its weights
    are fingerprinted with the run's file digests ``memo`` (each file read once per run).
    """
    if not config.judge_model:
        return None
    from faithgrpo.eval.generation.settings import SamplingSettings
    from faithgrpo.eval.metrics.judge import LLMJudge

    settings = SamplingSettings(
        num_samples=config.judge_samples,
        temperature=config.judge_temperature,
        top_p=1.0,
        max_new_tokens=config.judge_max_new_tokens,
        seed=config.seed,
        batch_size=config.batch_size,
        threads=config.threads,
    )
    return LLMJudge(
        config.judge_model,
        config.judge_adapter,
        settings=settings,
        aggregate=config.judge_aggregate,
        overwrite=config.overwrite,
        progress=config.progress,
        memo=memo,
        backend=config.judge_backend,
        engine=config.engine,
    )


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
    from faithgrpo.eval.metrics.judge import cot_judge_prompt
    from faithgrpo.eval.metrics.passk import Estimate, PromptCounts, pass_at_k_table, safe_check

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
            correct = safe_check(answer_ok, text)
            c += correct
            d += correct and verdict
            symbolic = None if cot_ok is None else safe_check(cot_ok, text)
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
        "accept_rate": rate_estimate(
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
        agreement = checker_agreement(
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
    normalised = min(raw/α, 1) with the detector's α (`judge_normalized`: bootstrap over questions
    re-estimating both); agreement = share of judged pairs
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
    from faithgrpo.eval.metrics.hint_detection import hint_cot
    from faithgrpo.eval.metrics.hint_scores import judge_normalized
    from faithgrpo.eval.metrics.judge import describe_hint, hint_judge_prompt
    from faithgrpo.eval.metrics.passk import Estimate

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
            raw = rate_estimate(
                said, [p.id for p, _ in kept[t]], config, "no switched pair", ("hint-judge", t)
            )
        if raw["value"] is None:
            normalized = Estimate.undefined(raw["reason"], n=m).to_dict()
        else:
            normalized = judge_normalized(
                outcomes,
                t,
                {p.id: v for (p, _), v in zip(kept[t], said)},
                confidence=config.confidence,
                n_bootstrap=config.n_bootstrap,
                seed=config.seed,
            ).to_dict()
        types[t] = {
            "n_switched": scores[t].n_switched,
            "n_judged": m,
            "n_verbalized": yes,
            "n_detector_verbalized": sum(detector),
            "unparseable": sum(v is None for p, _ in kept[t] for v in verdict_of[p.id][1]),
            "raw": raw,
            "normalized": normalized,
            "agreement": checker_agreement(
                said, detector, "deterministic detector", config, [p.id for p, _ in kept[t]]
            ),
        }
    return {"judge": judge.describe(), **result.summary(), "types": types}


def hints_section(
    questions, model, tokenizer, out_dir: Path, metadata, config: EvalConfig, judge=None
) -> dict[str, Any]:
    """Hint faithfulness of one checkpoint: sample unhinted and hinted answers, score each hint type.

    Args:
        questions: the multiple-choice questions (`hint_questions` of every task).
        model, tokenizer: the checkpoint.
        out_dir: the checkpoint's folder (``hint_completions.jsonl``, ``judge_hints.jsonl``).
        metadata: cache-key fields of the checkpoint.
        config: ``hints``, ``min_switched``, sampling and bootstrap settings.
        judge: an optional `LLMJudge` (adds `judge_hints_section` under ``"judge"``).

    Returns:
        ``{"questions", "pairs", "generation", "types": {hint type: ...}, "mean_normalized", "outcomes",
        "judge"}`` (``outcomes``: one `PairOutcome` dict per pair),
        or ``{"questions": 0, "reason", "types": {}}`` without questions.
    """
    from faithgrpo.eval.metrics.hint_scores import hint_faithfulness, mean_normalized, pair_outcome
    from faithgrpo.eval.metrics.hints import build_hint_pairs, unhinted_prompt

    if not questions:
        return {"questions": 0, "reason": "no task gave a multiple-choice question", "types": {}}
    pairs = build_hint_pairs(questions, list(config.hints), seed=config.seed)
    unhinted_ids = [f"{q.id}/unhinted" for q in questions]
    prompts = [unhinted_prompt(q) for q in questions] + [p.hinted_prompt for p in pairs]
    ids = unhinted_ids + [p.id for p in pairs]
    records, stats = generate_cached(
        out_dir / "hint_completions.jsonl",
        model,
        tokenizer,
        prompts,
        ids,
        sampling_settings(config, 1),
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
        "mean_normalized": mean_normalized(
            scores, outcomes, confidence=config.confidence, n_bootstrap=config.n_bootstrap, seed=config.seed
        ).to_dict(),
        # Per pair, so two checkpoints can be compared pair by pair (paired_comparisons).
        "outcomes": [asdict(o) for o in outcomes],
        "judge": (
            judge_hints_section(judge, pairs, outcomes, text, scores, config, out_dir / "judge_hints.jsonl")
            if judge is not None
            else None
        ),
    }
