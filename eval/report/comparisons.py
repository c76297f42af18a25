"""Checkpoints side by side in the ``faithgrpo eval`` report: paired differences and common hint means.

`paired_comparisons` gives every checkpoint's Pass@K / CoT-Pass@K, faithfulness (AOC, CIR, CRoS Δ) and
hint-score differences against the reference checkpoint, bootstrapped over the shared prompts (or
questions); `common_hint_means` gives each checkpoint's mean normalised hint score over the hint
types defined for every checkpoint. Each returns the JSON-ready dict stored in ``report.json``.
"""

from __future__ import annotations

from typing import Any

from faithgrpo.eval.report.config import EvalConfig
from faithgrpo.eval.report.results import dig

__all__ = ["common_hint_means", "paired_comparisons"]


def paired_comparisons(checkpoints: list[dict[str, Any]], config: EvalConfig) -> dict[str, Any]:
    """Pass@K and CoT-Pass@K differences of every checkpoint against the reference, paired over prompts.

    The reference is the ``--baseline`` checkpoint when there is one, else the first (``--model``).
    Every checkpoint is evaluated on the same prompts, so the difference is bootstrapped per prompt
    (one resample draws prompts and keeps both checkpoints' values of each): "did GRPO beat the base?"
    gets an interval that accounts for the prompts being shared.

    Hint scores (raw and normalised per hint type, and their mean) get the same treatment over the
    multiple-choice questions (`faithgrpo.eval.metrics.hint_paired.paired_hint_differences`).

    Returns:
        ``{"reference": label, "checkpoints": {label: {task: {k: {"pass@k": Estimate dict,
        "cot_pass@k": Estimate dict}}}}, "faithfulness": {label: {...}}, "hints": {label: {...}}}``;
        empty ``checkpoints`` with a single checkpoint, no ``hints`` when the hint protocol did not run.
    """
    from faithgrpo.eval.metrics.passk import Estimate, PromptCounts, bootstrap_mean, per_prompt_pass_at_k

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
    from faithgrpo.eval.metrics.hint_scores import HintFaithfulness, PairOutcome, mean_normalized
    from faithgrpo.eval.metrics.passk import Estimate

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
    from faithgrpo.eval.metrics.hint_paired import paired_hint_differences
    from faithgrpo.eval.metrics.hint_scores import PairOutcome

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
    from faithgrpo.eval.metrics.passk import Estimate, bootstrap_mean

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
