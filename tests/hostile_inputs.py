"""Hostile completions of about 1 MB for the "returns promptly, never raises" reward tests.

A smaller cousin of the corpus in ``benchmarks/bench_hostile.py``: the inputs whose old regexes
retried from every opening tag (quadratic), plus single-character runs, step lines, nesting and
unicode. Tests only assert that a value comes back; timing lives in the benchmark.
"""

from __future__ import annotations

SIZE = 1_000_000


def _fill(unit: str, size: int = SIZE) -> str:
    return unit * max(1, size // len(unit))


def hostile_inputs() -> dict[str, str]:
    half = SIZE // 2
    return {
        "answer_open_only": _fill("<answer>"),
        "answer_closed_blocks": _fill("<answer>x</answer>"),
        "answer_nested": _fill("<answer>", half) + "{U}" + _fill("</answer>", half),
        "answer_partial_close": _fill("<answer></answe"),
        "think_open_only": _fill("<think>"),
        "alternating_tags": _fill("<think></answer><answer></think>"),
        "single_char_lt": "<" * SIZE,
        "single_char_newline": "\n" * SIZE + "x",
        "step_lines_in_envelope": "<think>" + _fill("Step 1: x\n") + "</think><answer>{U}</answer>",
        "short_lines_in_envelope": "<think>" + _fill("x\n") + "</think><answer>{U}</answer>",
        "braces_in_answer": "<think>r</think><answer>" + "{" * half + "}" * half + "</answer>",
        "graph_slot_huge": "<think>GRAPH: "
        + "; ".join(f"A{i} -> A{i + 1}" for i in range(SIZE // 14))
        + "\nRESULT: {U}</think><answer>{U}</answer>",
        "unicode_astral": _fill("😀\u2028"),
    }
