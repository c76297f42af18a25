"""CLEAR records: files and loading (:func:`load_records`), per-file evaluation (:func:`evaluate_file`,
:func:`format_summary`), the judge report (:func:`judge_report`, :func:`format_report`) and CALVER
problems (:func:`to_problem`); the format is documented in :mod:`faithgrpo.tasks.clear`."""

from __future__ import annotations

import errno
import json
import time
from collections.abc import Iterator, Mapping
from pathlib import Path as FsPath
from typing import Any

from faithgrpo.tasks.clear.bits import graph_bits
from faithgrpo.tasks.clear.candidates import judge, listed_answers
from faithgrpo.tasks.clear.descriptions import ADJUSTMENT_TASKS, STRUCTURE_TASKS
from faithgrpo.tasks.clear.forms import read_form_question
from faithgrpo.tasks.clear.questions import read_question, read_typed_question
from faithgrpo.tasks.clear.structure import graph_paths, triples
from faithgrpo.tasks.clear.truth import (
    answer_universe,
    graph_cycles,
    is_supported,
    path_universe,
    question_truth,
    set_family,
    verdict,
)
from faithgrpo.tasks.clear.values import ClearQuestion
from faithgrpo.tasks.clear.verdicts import structure_expected
from faithgrpo.verifier.graphs.model import node_sort_key
from faithgrpo.verifier.query_kinds import QUERY_KINDS

__all__ = [
    "evaluate_file",
    "format_report",
    "format_summary",
    "judge_report",
    "load_records",
    "to_problem",
]


# ---------------------------------------------------------------------------------------------
# CLEAR -> CALVER problems
def to_problem(record: Mapping[str, Any]) -> dict[str, Any] | None:
    """A CLEAR record as a causal problem that CALVER scores, where its question is a query kind's.

    Converted: FO records of ``backdoor_adjustment_set`` (any/minimal/maximal),
    ``frontdoor_adjustment_set`` (any/minimal/maximal) and ``d-separation`` (any/minimal) become
    ``backdoor_set`` / ``frontdoor_set`` / ``dsep_set`` (DAG) or ``msep_set`` (ADMG) queries, and
    d-separation YN records (``Are node A and node B d-separated by nodeset {...}?``) become
    ``ci_test`` queries. Reachability becomes ``directed_path`` (yes/no: is there a directed path
    from treatment to outcome): ``directed_path`` EX records (``Is there a directed path from X to
    Y?``) and the ancestor / descendant YN records of ``2_node_relation`` (``Is node W one of
    ancestors of node V?`` asks for a directed path W to V; descendants, V to W). ``cycle`` FO
    records (``Find one cycle in this graph.``) become ``cycle`` queries. A variant is written only
    when it is not ``"any"``; a combination that :mod:`faithgrpo.verifier.queries` does not
    accept (``check_query`` raises) gives ``None``.

    Not converted (``None``), because no query kind asks the question: backdoor/frontdoor YN
    records (whether a *given* set is valid), front-door records whose treatment has no directed
    path to the outcome (the judge leaves them open too), questions about a *given* path, cycle or
    order (YN, MC), counts and lists (HM, FA), parents and children (an edge, not a derivation),
    triples, edges, nodes, topological orders, sinks, Markov equivalence, identification and the
    C-component / C-forest / C-tree types (docs/clear.md, "CALVER problems from CLEAR").

    Returns:
        ``{"graph", "query", "text", "mode": "supplied", "clear": {"uid", "sid", "task_type",
        "question_type"}}`` with ``text`` from :func:`faithgrpo.tasks.causal.prompts.problem_text`, or
        ``None``.
    """
    q = read_question(record)
    if q is None or q.question_type not in ("FO", "YN", "EX") or not is_supported(q):
        return None
    g = q.graph
    query: dict[str, Any]
    if q.question_type == "EX" and q.task_type != "directed_path":
        return None
    if q.task_type in ADJUSTMENT_TASKS and q.question_type == "FO":
        kind = "backdoor_set" if q.task_type == "backdoor_adjustment_set" else "frontdoor_set"
        query = {"kind": kind, "treatment": q.x, "outcome": q.y}
    elif q.task_type == "d-separation" and q.question_type == "FO":
        kind = "dsep_set" if g.kind == "DAG" else "msep_set"
        query = {"kind": kind, "x": q.x, "y": q.y}
    elif q.task_type == "d-separation" and isinstance(q.claim, frozenset):
        kind = "ci_test"
        query = {"kind": kind, "x": q.x, "y": q.y, "given": sorted(q.claim, key=node_sort_key)}
    elif q.task_type == "directed_path" and q.question_type == "EX":
        kind = "directed_path"
        query = {"kind": kind, "treatment": q.x, "outcome": q.y}
    elif (
        q.task_type == "2_node_relation"
        and q.question_type == "YN"
        and q.relation in ("ancestors", "descendants")
        and isinstance(q.claim, str)
        and q.claim != q.node
    ):
        # W is an ancestor of V exactly when a directed path runs W -> ... -> V
        start, end = (q.claim, q.node) if q.relation == "ancestors" else (q.node, q.claim)
        kind = "directed_path"
        query = {"kind": kind, "treatment": start, "outcome": end}
    elif q.task_type == "cycle" and q.question_type == "FO":
        kind = "cycle"
        query = {"kind": kind}
    else:
        return None
    if q.variant != "any":
        query["variant"] = q.variant
    try:
        QUERY_KINDS[kind].check_query(g, query)
    except ValueError:
        return None
    from faithgrpo.tasks.causal.prompts import problem_text

    return {
        "graph": g.to_dict(),
        "query": query,
        "text": problem_text(g, query),
        "mode": "supplied",
        "clear": {
            "uid": record.get("uid"),
            "sid": record.get("sid"),
            "task_type": q.task_type,
            "question_type": q.question_type,
        },
    }


# ---------------------------------------------------------------------------------------------
# files
def _files(path: str | FsPath) -> list[FsPath]:
    p = FsPath(path)
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.is_file() and f.suffix in (".json", ".jsonl"))
        if not files:
            raise ValueError(f"{p}: no .json or .jsonl files in the directory")
        return files
    if p.is_file():
        return [p]
    raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(p))


def _iter_records(path: str | FsPath) -> Iterator[tuple[FsPath, int, Any]]:
    """``(file, line, value)`` per non-blank line (``value`` is ``None`` for a line that is not JSON)."""
    for f in _files(path):
        with open(f, encoding="utf-8") as fh:
            text = fh.read()
        if text.lstrip().startswith("["):  # a whole-file JSON array
            try:
                values = json.loads(text)
            except json.JSONDecodeError:
                values = None
            if isinstance(values, list):
                for i, value in enumerate(values, 1):
                    yield f, i, value
                continue
        for i, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                yield f, i, json.loads(line)
            except json.JSONDecodeError:
                yield f, i, None


def load_records(path: str | FsPath) -> list[dict[str, Any]]:
    """Read CLEAR records from a JSON-Lines file or a directory of them (CLEAR's ``data/json_single/``).

    A directory contributes its ``*.json`` and ``*.jsonl`` files in name order; CLEAR's
    ``<task_type>.json`` files are JSON Lines despite the suffix (a whole-file JSON array is read
    too).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: a line that is not a JSON object, named as ``file:line``; a directory without
            record files.
    """
    out = []
    for f, line, value in _iter_records(path):
        if not isinstance(value, dict):
            raise ValueError(f"{f}:{line}: not a JSON object (one CLEAR record per line expected)")
        out.append(value)
    return out


def _record_verdict(record: Mapping[str, Any]) -> bool | None:
    listed = listed_answers(record)
    if not listed:
        return judge(record, record.get("answer"))
    verdicts = [judge(record, a) for a in listed]
    if any(v is None for v in verdicts):
        return None
    return all(verdicts)


_COUNTS = ("total", "judged", "accepted", "rejected", "unsupported")


def _evaluate(path: str | FsPath, details: bool) -> dict[str, Any]:
    by_type: dict[str, dict[str, dict[str, int]]] = {}
    overall = dict.fromkeys(_COUNTS, 0)
    bad = 0
    files = set()
    disagreements: list[dict[str, Any]] = []
    undecided: list[dict[str, Any]] = []
    for f, line, record in _iter_records(path):
        files.add(f)
        if not isinstance(record, dict):
            bad += 1
            continue
        verdict = _record_verdict(record)
        outcome = "unsupported" if verdict is None else ("accepted" if verdict else "rejected")
        task = str(record.get("task_type", "?"))[:64]
        qtype = str(record.get("question_type", "?"))[:8]
        counts = by_type.setdefault(task, {}).setdefault(qtype, dict.fromkeys(_COUNTS, 0))
        for c in (counts, overall):
            c["total"] += 1
            c[outcome] += 1
            if verdict is not None:
                c["judged"] += 1
        if details and verdict is not True:
            (undecided if verdict is None else disagreements).append(_case(f, line, record))
    out = {"by_type": by_type, "overall": overall, "bad_lines": bad, "files": len(files)}
    if details:
        out |= {"disagreements": disagreements, "undecided": undecided}
    return out


def evaluate_file(path: str | FsPath) -> dict[str, Any]:
    """Judge every CLEAR record's own listed answer (a file or a directory of files).

    An FO answer listing every valid set is accepted when each member is (see
    :func:`listed_answers`).

    Returns:
        ``{"by_type": {task_type: {question_type: counts}}, "overall": counts, "bad_lines": n,
        "files": n}`` with ``counts = {"total", "judged", "accepted", "rejected", "unsupported"}``
        (``judged = accepted + rejected``). Lines that are not JSON objects count in
        ``bad_lines`` only.

    Raises:
        FileNotFoundError: ``path`` does not exist. ValueError: a directory without record files.
    """
    return _evaluate(path, details=False)


def format_summary(summary: Mapping[str, Any]) -> str:
    """Render :func:`evaluate_file`'s summary as a table, one row per task type and question type."""
    header = f"{'task_type':<28} {'qtype':<5} " + " ".join(f"{c:>11}" for c in _COUNTS)
    lines = [header, "-" * len(header)]

    def row(task: str, qtype: str, c: Mapping[str, int]) -> str:
        return f"{task:<28} {qtype:<5} " + " ".join(f"{c.get(k, 0):>11}" for k in _COUNTS)

    for task in sorted(summary.get("by_type", {})):
        for qtype in sorted(summary["by_type"][task]):
            lines.append(row(task, qtype, summary["by_type"][task][qtype]))
    lines.append("-" * len(header))
    lines.append(row("all", "", summary.get("overall", dict.fromkeys(_COUNTS, 0))))
    if summary.get("bad_lines"):
        lines.append(f"{summary['bad_lines']} line(s) were not JSON records and were skipped")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# the judge report (``faithgrpo clear-judge``)
def _clip(value: Any, n: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


def _judge_answer(q: ClearQuestion) -> str | None:
    """The judge's own answer to ``q`` in words (None when it cannot say)."""
    if q.task_type in STRUCTURE_TASKS:
        return structure_expected(q)
    if not is_supported(q):
        return None
    if q.question_type in ("YN", "EX"):
        truth = question_truth(q)
        return None if truth is None else ("Yes." if truth else "No.")
    if q.question_type == "MC":
        right = [a for a, v in q.options if verdict(q, v, claim=True)]
        return "option(s) " + (", ".join(right) or "none")
    universe = answer_universe(q)
    if q.question_type == "HM":
        return None if universe is None else str(len(universe))
    return "another answer (the listed one is not valid under the predicate)"


def _case(f: FsPath, line: int, record: Mapping[str, Any]) -> dict[str, Any]:
    """One record the judge does not accept as labelled: where it is, the label, the judge's answer."""
    q = read_question(record)
    listed = listed_answers(record) or []
    rejected = [a for a in listed if judge(record, a) is False]
    return {
        "file": f.name,
        "line": line,
        "uid": record.get("uid"),
        "sid": record.get("sid"),
        "task_type": str(record.get("task_type", "?"))[:64],
        "question_type": str(record.get("question_type", "?"))[:8],
        "graph_type": _clip(record.get("graph_type", ""), 40),
        "question": _clip(record.get("question", "")),
        "label": _clip(record.get("answer", "")),
        "rejected": [_clip(a, 80) for a in rejected[:5]],
        "judge": None if q is None else _judge_answer(q),
        "read": q is not None,
    }


def judge_report(path: str | FsPath) -> dict[str, Any]:
    """:func:`evaluate_file`'s counts plus every record the judge rejects or leaves open, and the time.

    Returns:
        The summary of :func:`evaluate_file` with ``"disagreements"`` (records whose listed answer
        the judge rejects: ``file``, ``line``, ``uid``, ``sid``, ``task_type``, ``question_type``,
        ``graph_type`` (shown, never judged), ``question``, ``label``, ``rejected`` (the listed members rejected), ``judge`` (its own
        answer, with the evidence for the district and identification types)), ``"undecided"``
        (the same fields, for records it leaves ``None``; ``read`` says whether the question was
        read at all) and ``"seconds"`` (wall time, reading included).
    """
    start = time.perf_counter()
    out = _evaluate(path, details=True)
    out["seconds"] = time.perf_counter() - start
    return out


def format_report(report: Mapping[str, Any], *, max_cases: int = 50) -> str:
    """Render :func:`judge_report`: per task type and question type the records, how many the judge
    decides and accepts as labelled, then the disagreements and the undecided records, each with
    the judge's own answer."""
    cols = (("records", "total"), ("decided", "judged"), ("accepted", "accepted"),
            ("disagree", "rejected"), ("undecided", "unsupported"))  # fmt: skip
    header = f"{'task_type':<28} {'qtype':<5} " + " ".join(f"{c:>10}" for c, _ in cols)
    lines = [header, "-" * len(header)]

    def row(task: str, qtype: str, c: Mapping[str, int]) -> str:
        return f"{task:<28} {qtype:<5} " + " ".join(f"{c.get(k, 0):>10}" for _, k in cols)

    by_type = report.get("by_type", {})
    for task in sorted(by_type):
        for qtype in sorted(by_type[task]):
            lines.append(row(task, qtype, by_type[task][qtype]))
        if len(by_type[task]) > 1:
            total = {k: sum(c.get(k, 0) for c in by_type[task].values()) for _, k in cols}
            lines.append(row(task, "all", total))
    lines.append("-" * len(header))
    lines.append(row("all", "", report.get("overall", {})))
    lines.append(
        f"{len(by_type)} task type(s), {report.get('files', 0)} file(s), "
        f"judged in {report.get('seconds', 0.0):.2f} s"
    )
    if report.get("bad_lines"):
        lines.append(f"{report['bad_lines']} line(s) were not JSON records and were skipped")
    for title, key in (("disagreements with the label", "disagreements"), ("undecided", "undecided")):
        cases = report.get(key, [])
        lines.append("")
        lines.append(f"{title}: {len(cases)}")
        for c in cases[:max_cases]:
            where = f"{c['file']}:{c['line']} uid {c['uid']} sid {c['sid']} {c['question_type']} ({c['graph_type']})"
            lines.append(f"  {where}: {c['question']}")
            judged = c["judge"] if c["judge"] is not None else ("-" if c["read"] else "question not read")
            lines.append(f"    label {c['label']}; judge: {judged}")
        if len(cases) > max_cases:
            lines.append(f"  ... and {len(cases) - max_cases} more")
    return "\n".join(lines)


def _clear_caches() -> None:
    """Empty the parse and enumeration caches (benchmarks measure cold judgements with it)."""
    for fn in (read_typed_question, read_form_question, graph_bits, set_family, path_universe,
               graph_cycles, graph_paths, triples):  # fmt: skip
        fn.cache_clear()
