"""The task families of the best-of-K selection experiment: their held-out questions and gold graders.

==================  ===========================================================================
family              questions
==================  ===========================================================================
``causal_graph``    supplied edge list, 4-5 nodes (the SFT policy's distribution), six query kinds
``causal_story``    the same problems told as stories: the graph is built from text (constructed
                    mode) and graded on the hidden source graph
``causal_bn``       the five smallest published networks, edge list
``causal_bn_story`` the same networks told as stories (constructed mode)
``knights_knaves``  reasoning-gym's Knights & Knaves, checked by truth table
``clear``           CLEAR find-one-valid records (backdoor / frontdoor sets, d-separation), read
                    from a folder the user supplies; never committed, never trained on
==================  ===========================================================================

A :class:`Question` is what a selector may see (its id, prompt and a *public* problem stripped of
answer fields); its grader (:func:`grader`) holds the gold side and is only called on a pick. Both
come out of :func:`build_questions`, which draws the rows with their own seed, drops any whose user
message is also an SFT prompt (``holdout``), and stratifies by query kind and variant.
"""

from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "CLEAR_TASKS",
    "FAMILIES",
    "Family",
    "Question",
    "build_questions",
    "grader",
    "holdout_prompts",
    "public_problem",
    "user_text",
]

_KINDS = ("directed_path", "ci_test", "mediator", "dsep_set", "backdoor_set", "frontdoor_set")
_SMALL_NETWORKS = ("cancer", "earthquake", "survey", "asia", "sachs")
_CAUSAL = {"min_nodes": 4, "max_nodes": 5, "families": ["random_dag", "motifs"], "query_kinds": list(_KINDS)}
_BN = {"networks": list(_SMALL_NETWORKS), "query_kinds": list(_KINDS)}
CLEAR_TASKS = ("backdoor_adjustment_set", "frontdoor_adjustment_set", "d-separation")


@dataclass(frozen=True)
class Family:
    """One family: the reasoning-gym task and config its rows come from (``task=None``: CLEAR records)."""

    name: str
    task: str | None
    config: dict[str, Any] = field(default_factory=dict)
    verifier: str = "calver"  # "calver" (six-slot causal trace) or "truth_table" (Knights & Knaves)

    @property
    def causal(self) -> bool:
        return self.verifier == "calver"


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("causal_graph", "causal_graph", _CAUSAL),
        Family("causal_story", "causal_story", _CAUSAL),
        Family("causal_bn", "causal_bn", {**_BN, "modes": ["supplied"]}),
        Family("causal_bn_story", "causal_bn", {**_BN, "modes": ["constructed"]}),
        Family("knights_knaves", "knights_knaves", {}, verifier="truth_table"),
        Family("clear", None),
    )
}


@dataclass(frozen=True)
class Question:
    """What a selector may see of one question.

    Attributes:
        id: unique within the family.
        family: the family's name.
        stratum: query kind/variant (causal, CLEAR) or the number of people (Knights & Knaves).
        prompt: the chat messages the policy answers.
        problem: the public problem: a causal problem without answer fields, or the puzzle's
            statements and names without its solution.
        gold: the gold side (never read by a selector; see :func:`grader`).
    """

    id: str
    family: str
    stratum: str
    prompt: list[dict[str, str]]
    problem: dict[str, Any]
    gold: dict[str, Any] = field(repr=False, compare=False)


def user_text(prompt: Sequence[Mapping[str, str]]) -> str:
    """The user message of a chat prompt (what identifies a question across runs)."""
    return "\n".join(m.get("content", "") for m in prompt if m.get("role") == "user")


def public_problem(family: Family, problem_or_metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The problem without any answer field: what verifiers and selectors read.

    Causal problems go through CALVER's own stripping (answer-like keys are dropped without reading
    them); a Knights & Knaves puzzle keeps only its names, statements and role terms, so the truth
    table checker derives the solution itself.

    Example:
        >>> public_problem(FAMILIES["knights_knaves"], {"names": ["A"], "statements": [], "solution": [True]})
        {'names': ['A'], 'statements': []}
    """
    if family.causal:
        from faithgrpo.rewards.calver.problem import strip_answer_fields

        return strip_answer_fields(dict(problem_or_metadata))
    keep = ("names", "statements", "knight_knave_terms")
    return {k: problem_or_metadata[k] for k in keep if k in problem_or_metadata}


def _metadata(row: Mapping[str, Any]) -> dict[str, Any]:
    entry = row.get("entry")
    entry = json.loads(entry) if isinstance(entry, str) else entry or {}
    return dict(entry.get("metadata") or {})


def _row_question(family: Family, row: Mapping[str, Any], index: int) -> Question:
    if family.causal:
        problem = json.loads(row["problem"]) if isinstance(row["problem"], str) else dict(row["problem"])
        query = problem["query"]
        stratum = query["kind"] + (f"/{query['variant']}" if query.get("variant") else "")
        public = public_problem(family, problem)
    else:
        metadata = _metadata(row)
        stratum = f"{len(metadata.get('names', []))} people"
        public = public_problem(family, metadata)
        problem = metadata
    gold = {
        "row": {k: row[k] for k in ("answer", "problem", "entry", "task") if k in row},
        "problem": problem,
    }
    return Question(f"{family.name}-{index}", family.name, stratum, list(row["prompt"]), public, gold)


def _clear_questions(
    folder: str, seed: int, system_prompt: str | None
) -> tuple[list[Question], dict[str, int]]:
    from faithgrpo.tasks.causal.prompts import chat_prompt
    from faithgrpo.tasks.clear.candidates import judge, listed_answers
    from faithgrpo.tasks.clear.descriptions import normalize_task_type
    from faithgrpo.tasks.clear.records import load_records, to_problem
    from faithgrpo.verifier.queries import normalize_answer

    wanted = {normalize_task_type(t) for t in CLEAR_TASKS}
    skipped: Counter[str] = Counter()
    questions, seen = [], set()
    for record in load_records(folder):
        task = normalize_task_type(record.get("task_type", ""))
        if task not in wanted:
            continue
        if str(record.get("question_type", "")).upper() != "FO":
            skipped["not a find-one question"] += 1
            continue
        problem = to_problem(record)
        if problem is None:
            skipped["no CALVER query kind for this question"] += 1
            continue
        members = listed_answers(record) or []
        if not members or not all(judge(record, m) for m in members):
            skipped["listed answer not accepted by the CLEAR judge"] += 1
            continue
        qid = f"clear-{task}/{record.get('uid', '?')}/{record.get('sid', '?')}"
        if qid in seen:
            skipped["duplicate uid/sid"] += 1
            continue
        seen.add(qid)
        listed = sorted({a for a in (normalize_answer(problem, m) for m in members) if a is not None})
        stratum = f"{task}/{problem['query'].get('variant', 'any')}"
        gold = {"record": dict(record), "problem": problem, "listed": listed}
        prompt = chat_prompt(problem, system_prompt)
        questions.append(
            Question(qid, "clear", stratum, prompt, public_problem(FAMILIES["clear"], problem), gold)
        )
    random.Random(f"selection-clear:{seed}").shuffle(questions)
    return questions, dict(skipped)


def _stratified(questions: list[Question], n: int | None) -> list[Question]:
    """Round-robin over strata (sorted), keeping each stratum's order, until ``n`` are taken."""
    strata: dict[str, list[Question]] = defaultdict(list)
    for q in questions:
        strata[q.stratum].append(q)
    queues = [strata[s] for s in sorted(strata)]
    chosen: list[Question] = []
    while any(queues) and (n is None or len(chosen) < n):
        for queue in queues:
            if queue and (n is None or len(chosen) < n):
                chosen.append(queue.pop(0))
    return chosen


def build_questions(
    family: str,
    n: int | None,
    seed: int,
    *,
    clear: str | None = None,
    holdout: Iterable[str] = (),
    system_prompt: str | None = None,
) -> tuple[list[Question], dict[str, int]]:
    """The family's first ``n`` held-out questions (``None``: every CLEAR record), seeded and stratified.

    Args:
        family: a name in :data:`FAMILIES`.
        n: questions wanted.
        seed: the rows' seed (keep it apart from the SFT and GRPO seeds).
        clear: CLEAR's ``json_single`` folder (family ``clear`` only).
        holdout: user messages of training prompts; a question with one of them is dropped.
        system_prompt: the system message to ask with (the policy's training one); default: the
            task's own instructions.

    Returns:
        ``(questions, skipped)``: ``skipped`` counts what was left out and why.

    Raises:
        ValueError: an unknown family, or ``clear`` without a folder.
    """
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; use one of {', '.join(FAMILIES)}")
    spec = FAMILIES[family]
    banned = set(holdout)
    if spec.task is None:
        if not clear:
            raise ValueError("family 'clear' needs --clear: CLEAR's data/json_single folder")
        questions, skipped = _clear_questions(clear, seed, system_prompt)
    else:
        from faithgrpo.eval.report.adapters import task_rows

        # Draw spares so dropped (training) prompts and thin strata still leave n questions.
        config = {**spec.config, **({"system_prompt": system_prompt} if system_prompt is not None else {})}
        rows = task_rows(spec.task, 3 * (n or 64), seed, config)
        questions = [_row_question(spec, row, i) for i, row in enumerate(rows)]
        skipped = {}
    kept = [q for q in questions if user_text(q.prompt) not in banned]
    if len(kept) < len(questions):
        skipped = {**skipped, "prompt is also an SFT prompt": len(questions) - len(kept)}
    return _stratified(kept, n), skipped


def grader(question: Question) -> Callable[[str], tuple[bool, bool]]:
    """``text -> (valid, exact)`` for one question: the gold side, applied to a pick only.

    ``valid``: the answer is correct by the task's own predicate (any valid set counts; the CLEAR
    judge for CLEAR; reasoning-gym's scorer for Knights & Knaves). ``exact``: the answer equals the
    listed answer (any listed member for CLEAR; the unique solution for Knights & Knaves, where the
    two gradings agree). Both read only the last ``<answer>``.
    """
    from faithgrpo.text import extract_answer

    if question.family == "clear":
        from faithgrpo.tasks.clear.candidates import judge
        from faithgrpo.verifier.queries import normalize_answer

        record, problem, listed = (
            question.gold["record"],
            question.gold["problem"],
            set(question.gold["listed"]),
        )

        def grade_clear(text: str) -> tuple[bool, bool]:
            span = extract_answer(text)
            if span is None:
                return False, False
            return judge(record, span) is True, normalize_answer(problem, span) in listed

        return grade_clear
    from faithgrpo.eval.report.adapters import answer_checker

    row = question.gold["row"]
    valid_of = answer_checker(row)
    if question.family == "knights_knaves":
        return lambda text: (valid_of(text),) * 2
    from faithgrpo.verifier.queries import normalize_answer

    problem = question.gold["problem"]
    listed = normalize_answer(problem, row["answer"])

    def grade(text: str) -> tuple[bool, bool]:
        span = extract_answer(text)
        exact = span is not None and listed is not None and normalize_answer(problem, span) == listed
        return valid_of(text), exact

    return grade


def holdout_prompts(sft_config: str | Path) -> set[str]:
    """User messages of every row an SFT config (``recipes/sft_traces.py`` YAML) trains on."""
    import yaml

    from faithgrpo.tasks.sft import build_sft_dataset

    cfg = yaml.safe_load(Path(sft_config).read_text(encoding="utf-8"))
    dataset, _ = build_sft_dataset(
        {
            "size": cfg.get("task_size", 96),
            "seed": cfg.get("task_seed", 1),
            "causal_weight": cfg.get("causal_weight", 1.0),
            "story_fraction": cfg.get("story_fraction", 0.0),
            "causal": dict(cfg.get("causal") or {}),
            "mixture": dict(cfg.get("mixture") or {}),
            "mixture_configs": dict(cfg.get("mixture_configs") or {}),
            "system_prompt": cfg.get("system_prompt"),
        },
        gold_style=cfg.get("gold_style", "varied"),
    )
    return {user_text(row["prompt"]) for row in dataset}
