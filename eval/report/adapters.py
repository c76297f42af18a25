"""Task adapters of ``faithgrpo eval``: evaluation rows, graders and multiple-choice questions per task.

`task_rows` draws seeded evaluation rows of a featured task (``causal_graph``, ``causal_story``,
``causal_bn``, ``knights_knaves``) or any reasoning-gym dataset; `answer_checker` and `cot_checker` grade a
completion's answer (the outcome grader) and its CoT (CALVER for causal tasks, the truth table for
Knights & Knaves, none otherwise); `hint_questions` turns rows into multiple-choice questions for
the hint protocol.
"""

from __future__ import annotations

import contextlib
import itertools
import json
from dataclasses import replace
from typing import Any

__all__ = [
    "CAUSAL_TASKS",
    "COT_VERIFIERS",
    "FEATURED_TASKS",
    "answer_checker",
    "check_task",
    "cot_checker",
    "hint_questions",
    "task_rows",
]

FEATURED_TASKS = ("causal_graph", "causal_story", "causal_bn", "knights_knaves")
CAUSAL_TASKS = ("causal_graph", "causal_story", "causal_bn")
COT_VERIFIERS = {
    "causal_graph": "CALVER (all six checks)",
    "causal_story": "CALVER (all six checks)",
    "causal_bn": "CALVER (all six checks)",
    "knights_knaves": "Knights & Knaves truth table (all checks)",
}


def check_task(task: str) -> None:
    """Raise ``ValueError`` for a task name that is neither featured nor a reasoning-gym dataset."""
    import reasoning_gym.factory

    import faithgrpo.tasks  # noqa: F401  (registers causal_graph / causal_story / causal_bn)

    if task not in reasoning_gym.factory.DATASETS:
        raise ValueError(
            f"unknown task {task!r}: use one of {', '.join(FEATURED_TASKS)} or a reasoning-gym dataset "
            "name (e.g. basic_arithmetic)"
        )


def task_rows(task: str, n: int, seed: int, config: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """``n`` evaluation rows of ``task`` (TRL rows, see `faithgrpo.tasks.mix.to_trl_row`) with ids.

    ``config`` holds fields of the task's reasoning-gym config (default: the task's defaults); a
    field the task does not have, or a value it rejects, raises ``ValueError`` naming it. Its one
    extra key, ``system_prompt``, replaces the rows' system message (as the recipes'
    ``--system_prompt`` does in training), so a policy is evaluated on the prompt it was trained on.

    Example:
        >>> rows = task_rows("knights_knaves", 2, seed=0)
        >>> rows[0]["id"], rows[0]["task"]
        ('knights_knaves-0', 'knights_knaves')
    """
    import reasoning_gym

    from faithgrpo.tasks.mix import to_trl_row

    check_task(task)
    config = dict(config or {})
    system_prompt = config.pop("system_prompt", None)
    if system_prompt is not None and not isinstance(system_prompt, str):
        raise ValueError(f"--task-config for {task!r}: system_prompt must be a string, got {system_prompt!r}")
    try:
        dataset = reasoning_gym.create_dataset(task, size=n, seed=seed, **config)
    except (TypeError, ValueError, AssertionError) as err:
        raise ValueError(
            f"--task-config for {task!r} is not a valid {task} config ({err}); fix the field"
        ) from None
    rows = []
    for i in range(len(dataset)):
        row = to_trl_row(dataset[i], system_prompt=system_prompt)
        row["id"] = f"{task}-{i}"
        rows.append(row)
    return rows


def _metadata(row: dict[str, Any]) -> dict[str, Any]:
    entry = row.get("entry")
    entry = json.loads(entry) if isinstance(entry, str) else entry or {}
    return entry.get("metadata") or {}


def answer_checker(row: dict[str, Any]):
    """``text -> bool``: the outcome grader (docs/rewards.md, "Outcome") for this row.

    The grade depends only on the last ``<answer>`` span, and the G samples of a prompt repeat
    answers a lot, so each distinct span is graded once.
    """
    from faithgrpo.rewards.outcome import grade_row
    from faithgrpo.text import extract_answer

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
        from faithgrpo.rewards.calver.problem import prepare_problem
        from faithgrpo.rewards.calver.reward import score_trace

        prepared = prepare_problem(row["problem"])
        return lambda text: score_trace(text, prepared).passed
    if task == "knights_knaves":
        from faithgrpo.tasks.knights_knaves.checker import kk_cot_correct
        from faithgrpo.tasks.knights_knaves.puzzle import kk_puzzle

        metadata = _metadata(row)
        # validate the puzzle once for the G completions (it also carries their memo); a malformed
        # row keeps its metadata, so every completion fails as before
        with contextlib.suppress(Exception):
            metadata = kk_puzzle(metadata)
        return lambda text: kk_cot_correct(text, metadata)
    return None


def hint_questions(task: str, n: int, seed: int, config: dict[str, Any] | None = None) -> list:
    """Up to ``n`` 4-option multiple-choice questions built from ``task`` rows (seeded).

    Causal rows use `causal_multiple_choice` (yes/no kinds are skipped); Knights & Knaves uses the
    other role assignments of the same people as distractors; other reasoning-gym tasks use answers
    of other entries that the task's scorer rejects.
    """
    from faithgrpo.eval.metrics.multiple_choice import (
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
                from faithgrpo.tasks.knights_knaves.puzzle import kk_oracle_answer

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
