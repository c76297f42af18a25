"""Grade frozen pools, run the selectors, and write one family's report (JSON and Markdown).

`build_report` turns pools into graded candidates (features from the public problem, grades from
the gold side), runs `faithgrpo.eval.selection.selectors.run_selection`, and adds the *regime* per
stratum: how many valid answers a question has (counted exhaustively over the answer space), how
many distinct valid answers a pool holds (fragmentation), and the verifier's share of wall time at
K = 8 (features of 8 completions against generating them). `write_report` writes
``<policy>-<family>.json`` and ``.md``; `faithgrpo.eval.selection.page` joins families into the
results page.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["build_report", "family_markdown", "valid_answer_count", "write_report"]

_MAX_ENUMERATED_NODES = 14  # 2^14 subsets: the most a set-valued answer space is enumerated over


def valid_answer_count(problem: dict[str, Any]) -> int | None:
    """How many answers the query admits on the problem's graph (``None`` past the enumeration cap).

    Set-valued kinds count the valid subsets of the non-query nodes, node-valued kinds the valid
    nodes, yes/no kinds one.

    Example:
        >>> p = {"graph": {"type": "DAG", "nodes": ["U", "W", "X", "Y"], "directed": [["U", "X"], ["U", "Y"],
        ...      ["X", "Y"], ["W", "Y"]]}, "query": {"kind": "backdoor_set", "treatment": "X", "outcome": "Y"}}
        >>> valid_answer_count(p)  # {U} and {U, W}
        2
    """
    from faithgrpo.rewards.calver.problem import prepare_problem
    from faithgrpo.verifier.queries import valid_value

    kind = prepare_problem(problem).kind
    if kind is None:
        return None
    text = json.dumps(problem, sort_keys=True)
    query = problem["query"]
    nodes = [str(n) for n in problem["graph"]["nodes"]]
    roles = {
        str(v) for k, v in query.items() if k in ("treatment", "outcome", "x", "y") and isinstance(v, str)
    }
    if kind.parse_answer("{}") is not None:  # set-valued
        free = [n for n in nodes if n not in roles]
        if len(free) > _MAX_ENUMERATED_NODES:
            return None
        subsets = itertools.chain.from_iterable(itertools.combinations(free, r) for r in range(len(free) + 1))
        return sum(valid_value(text, frozenset(s)) for s in subsets)
    if isinstance(kind.parse_answer("yes"), bool):  # yes/no: one valid answer
        return 1
    if isinstance(kind.parse_answer(nodes[0]), str):  # node-valued
        return sum(valid_value(text, n) for n in nodes)
    return 1


def _candidates(question, pool, stats: Counter, judged: list[float] | None = None) -> tuple[tuple, float]:
    from faithgrpo.eval.selection.families import FAMILIES, grader
    from faithgrpo.eval.selection.grading import Features, features, public_verifier
    from faithgrpo.eval.selection.selectors import Candidate

    causal = FAMILIES[question.family].causal
    verifier = public_verifier(causal, question.problem)
    grade = grader(question)
    out, verify_seconds = [], 0.0
    judge = (
        judged
        if judged is not None and len(judged) == len(pool.completions)
        else [None] * len(pool.completions)
    )
    for text, conf, opinion in zip(pool.completions, pool.confidence, judge):
        began = time.perf_counter()
        try:
            feats = features(text, verifier, causal, conf)
        except Exception as err:  # a verifier bug on odd text scores 0 and is counted, never raised
            stats[f"features failed: {type(err).__name__}"] += 1
            feats = Features(None, 0, 0, conf)
        if opinion is not None:
            feats = Features(feats.answer, feats.calver, feats.structure, feats.confidence, opinion)
        verify_seconds += time.perf_counter() - began
        out.append(Candidate(feats, *grade(text)))
    return tuple(out), verify_seconds


def _regime(questions, pools) -> dict[str, Any]:
    by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for q, pool in zip(questions, pools):
        valid_answers = {c.features.answer for c in pool.candidates if c.valid and c.features.answer}
        count = valid_answer_count(q.gold["problem"]) if q.family != "knights_knaves" else 1
        by[q.stratum].append(
            {
                "admitted": count,
                "distinct_valid": len(valid_answers),
                "valid_share": statistics.fmean(c.valid for c in pool.candidates),
            }
        )
    out = {}
    for stratum, rows in sorted(by.items()):
        counted = [r["admitted"] for r in rows if r["admitted"] is not None]
        out[stratum] = {
            "questions": len(rows),
            "share_with_several_valid": (sum(c > 1 for c in counted) / len(counted)) if counted else None,
            "mean_valid_answers_admitted": statistics.fmean(counted) if counted else None,
            "mean_distinct_valid_in_pool": statistics.fmean(r["distinct_valid"] for r in rows),
            "pools_with_valid": sum(r["distinct_valid"] > 0 for r in rows),
            "mean_valid_share": statistics.fmean(r["valid_share"] for r in rows),
        }
    return out


def build_report(
    config,
    questions: Sequence,
    frozen: Sequence,
    skipped: dict[str, int],
    header: dict[str, Any],
    judged: dict[str, list[float]] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Grade the pools that exist, select, and collect the figures (module docstring).

    Returns:
        ``(report, timing)``: the report is a function of the pools and settings only (a re-score
        reproduces it byte for byte); ``timing`` holds this run's measured verifier seconds.
    """
    from faithgrpo.eval.selection.selectors import Pool, run_selection

    stats: Counter[str] = Counter()
    done = [(q, p) for q, p in zip(questions, frozen) if p is not None]
    pools, verify_seconds, gen_seconds, completions = [], 0.0, 0.0, 0
    for q, fp in done:
        candidates, seconds = _candidates(q, fp, stats, (judged or {}).get(fp.key))
        pools.append(Pool(q.id, q.stratum, candidates))
        verify_seconds += seconds
        gen_seconds += float(fp.provenance.get("generation_seconds", 0.0))
        completions += len(fp.completions)
    tokens = [t for _, fp in done for t in fp.num_tokens]
    every = [c for p in pools for c in p.candidates]
    report: dict[str, Any] = {
        "family": config.family,
        "policy": config.policy,
        # the policy as the pool store records it: the same on a re-score without the model
        "policy_source": header.get("source"),
        "policy_weights": hashlib.sha256(json.dumps(header["policy"], sort_keys=True).encode()).hexdigest()[
            :16
        ],
        "settings": {
            "sft_config": None if config.sft_config is None else Path(config.sft_config).name,
            "judge": None if config.judge is None else Path(config.judge).name,
            "questions": config.questions,
            "question_seed": config.question_seed,
            "samples": config.samples,
            "ks": list(config.ks),
            "subsets": config.subsets,
            "temperature": config.temperature,
            "top_p": config.top_p,
            "max_new_tokens": config.max_new_tokens,
            "seed": config.seed,
            "threads": config.threads,
            "n_bootstrap": config.n_bootstrap,
            "confidence": config.confidence,
        },
        "questions_asked": len(questions),
        "questions_pooled": len(done),
        "questions_judged": sum(fp.key in (judged or {}) for _, fp in done),
        "complete": len(done) == len(questions),
        "skipped": skipped,
        "feature_failures": dict(stats),
        "pool_stats": {
            "completions": len(every),
            "new_tokens": sum(tokens),
            "mean_tokens": statistics.fmean(tokens) if tokens else None,
            "budget_hits": sum(t >= config.max_new_tokens for t in tokens),
            "with_answer": sum(c.features.answer is not None for c in every),
            "valid": sum(c.valid for c in every),
            "exact": sum(c.exact for c in every),
            "calver_histogram": {str(s): sum(c.features.calver == s for c in every) for s in range(7)},
            "structure_histogram": {str(s): sum(c.features.structure == s for c in every) for s in range(7)},
        },
        # recorded when the pools were sampled, so a re-score reproduces it
        "generation_seconds": round(gen_seconds, 3),
        "regime": _regime([q for q, _ in done], pools) if pools else {},
        "result": None,
    }
    usable = [k for k in config.ks if k <= config.samples]
    if pools:
        result = run_selection(
            pools, usable, subsets=config.subsets, seed=config.seed, n_bootstrap=config.n_bootstrap,
            confidence=config.confidence,
        )  # fmt: skip
        report["result"] = result.to_dict()
    timing = {
        "generation_seconds": round(gen_seconds, 3),
        "verifier_seconds": round(verify_seconds, 3),
        # the same ratio at any K: scoring K completions against sampling them (per-completion means)
        "verifier_share_at_k8": (verify_seconds / (verify_seconds + gen_seconds)) if gen_seconds else None,
        "completions": completions,
    }
    return report, timing


def _cell(estimate: dict[str, Any] | None) -> str:
    if not estimate or estimate.get("value") is None or math.isnan(estimate["value"]):
        return "–"
    lo, hi = estimate.get("ci_low"), estimate.get("ci_high")
    if lo is None or hi is None:
        return f"{estimate['value']:.3f}"
    return f"{estimate['value']:.3f} [{lo:.2f}, {hi:.2f}]"


def family_markdown(report: dict[str, Any]) -> list[str]:
    """One family's tables: K down the rows, selectors across, one block per grading."""
    result = report.get("result")
    head = f"### {report['family']} ({report['policy']} policy): {report['questions_pooled']} questions"
    if not report.get("complete"):
        head += f" of {report['questions_asked']} (pools still being sampled)"
    lines = [head, ""]
    if not result:
        return [*lines, "No pool sampled yet.", ""]
    selectors = result["selectors"]
    for grading in ("valid", "exact"):
        lines += [
            f"**{grading}** grading; G = {result['samples']}, {result['subsets']} K-subsets per question, "
            "95 % bootstrap interval over questions.",
            "",
            "| K | " + " | ".join(selectors) + " | calver − plurality | calver − structure |",
            "|---|" + "---|" * (len(selectors) + 2),
        ]
        for k in result["ks"]:
            acc = result["accuracy"][str(k)]
            paired = result["paired_calver_minus"][str(k)]
            cells = [_cell(acc[s][grading]) for s in selectors]
            cells += [_cell(paired["plurality"][grading]), _cell(paired["structure"][grading])]
            lines.append(f"| {k} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def write_report(report: dict[str, Any], timing: dict[str, Any], out: Path) -> dict[str, Path]:
    """Write ``<policy>-<family>.json``, ``.md`` and ``.timing.json`` into ``out``; return their paths."""
    out.mkdir(parents=True, exist_ok=True)
    stem = f"{report['policy']}-{report['family']}"
    paths = {
        "json": out / f"{stem}.json",
        "markdown": out / f"{stem}.md",
        "timing": out / f"{stem}.timing.json",
    }
    paths["timing"].write_text(json.dumps(timing, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    paths["json"].write_text(
        json.dumps(report, indent=2, sort_keys=True, allow_nan=False) + "\n", encoding="utf-8"
    )
    paths["markdown"].write_text("\n".join(family_markdown(report)) + "\n", encoding="utf-8")
    return paths
