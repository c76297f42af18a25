"""The judge against a written record's labels (shared by tests/test_clear.py and tests/test_clear_types.py)."""

from __future__ import annotations

from faithgrpo.tasks.clear.candidates import judge, listed_answers


def judge_failures(records: list[dict]) -> list[tuple]:
    """``(what, question, answer...)`` for each verdict that misses a record's labels: a listed
    answer not accepted, an ``accept`` answer not ``True``, a ``reject`` answer not ``False``."""
    failures: list[tuple] = []
    for r in records:
        listed = listed_answers(r)
        verdicts = [judge(r, a) for a in listed]
        if verdicts != [True] * len(listed):
            failures.append(("listed", r["question"], listed, verdicts))
        failures += [("accept", r["question"], a) for a in r["accept"] if judge(r, a) is not True]
        failures += [("reject", r["question"], a) for a in r["reject"] if judge(r, a) is not False]
    return failures
