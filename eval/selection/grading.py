"""What each selector reads of one completion (:class:`Features`), and the pick's gold grades.

Features come from the completion and the question's *public* problem only
(`faithgrpo.eval.selection.families.Question.problem`, answer fields stripped, a story's source graph
hidden): the firewall is structural, since :func:`features` never receives the gold side, and a
selector (`faithgrpo.eval.selection.selectors.pick`) receives only features.

=============  =================================================================================
feature        meaning
=============  =================================================================================
``calver``     the verifier's score S (0..6): CALVER's six checks for causal traces, the truth
               table checker's six for Knights & Knaves
``structure``  the paper's structure-only control (0..6): the same parsing and binding checks,
               the derivation only *parsed* (at least one claim in the grammar), RESULT only
               parsed, ``<answer>`` only equal to RESULT; no check of semantic validity
``answer``     the normalised answer (plurality's vote), ``None`` without an ``<answer>`` tag
``confidence`` mean answer-token log-probability (stored with the pool)
``judge``      the LLM judge's score, when a judge stage ran
=============  =================================================================================

**Story (constructed) problems** are verified on the trace's own GRAPH, the paper's reference-free
setting: the public problem keeps the story's nodes but not its edges, check 1 needs a well-formed
graph on exactly those nodes, checks 4-5 run on that graph, and check 6 (``<answer>`` equals RESULT
and holds on the verification graph) is then the same event as check 5. The gold grade still uses
the hidden source graph.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Features", "features", "public_verifier"]


@dataclass(frozen=True)
class Features:
    """What the selectors may read of one completion (module table)."""

    answer: str | None
    calver: int
    structure: int
    confidence: float | None
    judge: float | None = None


def _edgeless(problem: Mapping[str, Any]) -> dict[str, Any]:
    """A constructed problem whose source graph is reduced to its (public) node list and type."""
    graph = problem.get("graph") or {}
    return {**problem, "graph": {"type": graph.get("type", "DAG"), "nodes": list(graph.get("nodes", []))}}


def public_verifier(family_causal: bool, problem: Mapping[str, Any]):
    """The prepared problem features are scored against (hidden edges removed in constructed mode)."""
    if not family_causal:
        from faithgrpo.tasks.knights_knaves.puzzle import kk_puzzle

        return kk_puzzle(dict(problem))
    from faithgrpo.rewards.calver.problem import prepare_problem

    if problem.get("mode") == "constructed":
        return prepare_problem(_edgeless(problem))
    return prepare_problem(problem)


def _causal_structure(text: str, prepared, score) -> int:
    from faithgrpo.rewards.trace import parse_trace
    from faithgrpo.verifier.certificates.claims import parse_claims

    trace = parse_trace(text)
    if trace.problems or prepared.kind is None:
        return 0
    kind = prepared.kind
    derivation = bool(trace.derivation) and bool(parse_claims(list(trace.derivation)))
    result = None if trace.result is None else kind.parse_answer(trace.result)
    answer = None if trace.answer is None else kind.parse_answer(trace.answer)
    agrees = (
        result is not None and answer is not None and kind.format_answer(answer) == kind.format_answer(result)
    )
    return (
        int(score.graph) + int(score.query) + int(score.strategy) + derivation + (result is not None) + agrees
    )


def _causal_features(text: str, prepared, confidence: float | None) -> Features:
    from faithgrpo.rewards.calver.reward import score_trace
    from faithgrpo.rewards.selection import normalized_answer
    from faithgrpo.text import extract_answer

    constructed = prepared.mode == "constructed"
    score = score_trace(text, prepared, verify_on="trace" if constructed else "problem")
    calver = score.total
    if constructed:  # check 6 on the trace's graph is check 5 (module docstring)
        calver = score.total - int(score.answer) + int(score.result)
    answer = normalized_answer(text, prepared) if extract_answer(text) is not None else None
    return Features(answer, calver, _causal_structure(text, prepared, score), confidence)


def _kk_features(text: str, puzzle, confidence: float | None) -> Features:
    from faithgrpo.rewards.selection import normalized_answer
    from faithgrpo.tasks.knights_knaves.checker import check_kk_trace
    from faithgrpo.tasks.knights_knaves.claims import parse_kk_claim
    from faithgrpo.tasks.knights_knaves.trace import parse_kk_trace, trace_slot
    from faithgrpo.text import extract_answer

    check = check_kk_trace(text, puzzle)
    derivation, _ = trace_slot(parse_kk_trace(text), "DERIVATION")
    parsed = bool(derivation) and any(parse_kk_claim(line, puzzle)[0] for line in derivation.splitlines())
    structure = (
        int(check.statements)
        + int(check.strategy)
        + parsed
        + (check.assignment is not None)
        + int(check.answer)
    )
    answer = normalized_answer(text, None) if extract_answer(text) is not None else None
    return Features(answer, check.total, structure, confidence)


def features(text: str, verifier, causal: bool, confidence: float | None) -> Features:
    """The features of one completion against a prepared public problem (`public_verifier`).

    Never raises on the completion: a verifier error scores 0 (counted by the caller as a reason).
    """
    if causal:
        return _causal_features(text, verifier, confidence)
    return _kk_features(text, verifier, confidence)
