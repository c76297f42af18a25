"""Worst-case latency of every reward's text handling on hostile model output (issue 12).

Builds a corpus of adversarial completions of about ``--size`` characters each (1 MB by default):
runs of ``<answer>`` / ``<think>`` tags (unclosed, closed, nested, alternating open/close, partial
tags), 1 MB of a single character, 1 MB of ``Step 1:`` lines, deeply nested braces/brackets (also
inside an answer just under the answer cap), huge ``GRAPH:`` slots (``A0 -> A1; A1 -> A2; …`` with
tens of thousands of nodes, and one just under the trace length cap), long lines without
newlines, and unicode (astral characters, ``\\u2028`` line separators, combining marks). Then it
times each reward on each input, on one thread:

- ``outcome_causal`` / ``outcome_reasoning_gym``: `outcome_reward` with a causal problem row and a
  reasoning-gym (``knights_knaves``) row;
- ``format``: `format_reward`;
- ``trace_format``: `trace_format_reward`;
- ``calver``: `calver_reward` with the causal problem row;
- ``cros_text``: CRoS's text path without a model: `parse_completion`, `step_spans`, the seeded
  scrambles and `apply_permutation` (the work `CRoSReward.compute_deltas` does before the
  reference model runs), with the same reasoning length bound (``MAX_REASONING_CHARS``; the corpus
  has inputs just under it, where the splitter does run).

Each (reward, input) pair runs ``--repeats`` times; its time is the median. Prints one JSON object
with, per reward, the worst-case median in milliseconds (wall clock and thread CPU time) and the
input it came from, the per-input medians, and whether it meets the target: at most 50 ms per
call on any input of at most 1 MB. The machine may be shared: thread CPU time is the less noisy
number and decides ``meets_target``.

Usage:
    python benchmarks/bench_hostile.py [--size 1000000] [--repeats 3] [--only outcome_causal,format]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one CPU thread

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

TARGET_MS = 50.0

PROBLEM = json.dumps(
    {
        "graph": {
            "type": "DAG",
            "nodes": ["Z1", "U", "X", "M", "Y"],
            "directed": [["Z1", "U"], ["U", "X"], ["U", "Y"], ["X", "M"], ["M", "Y"]],
            "bidirected": [],
        },
        "query": {"kind": "backdoor_set", "treatment": "X", "outcome": "Y"},
    }
)


def _fill(unit: str, size: int) -> str:
    """``unit`` repeated to about ``size`` characters (at least once)."""
    return unit * max(1, size // max(1, len(unit)))


def _graph_slot(size: int) -> str:
    """``A0 -> A1; A1 -> A2; …`` of about ``size`` characters."""
    parts, total, i = [], 0, 0
    while total < size:
        part = f"A{i} -> A{i + 1}"
        parts.append(part)
        total += len(part) + 2
        i += 1
    return "; ".join(parts)


def _trace(graph: str, derivation: str = "- U -> X\n- U -> Y", result: str = "{U}") -> str:
    return (
        f"<think>\nGRAPH: {graph}\nQUERY: backdoor_set(treatment=X, outcome=Y)\n"
        f"STRATEGY: backdoor criterion\nDERIVATION:\n{derivation}\nRESULT: {result}\n</think>\n"
        f"<answer>{result}</answer>"
    )


def hostile_corpus(size: int) -> dict[str, str]:
    """Named adversarial completions of about ``size`` characters (some deliberately smaller)."""
    n = size
    half = n // 2
    corpus = {
        # <answer> tags
        "answer_open_only": _fill("<answer>", n),
        "answer_close_only": _fill("</answer>", n),
        "answer_closed_blocks": _fill("<answer>x</answer>", n),
        "answer_nested": _fill("<answer>", half) + "{U}" + _fill("</answer>", half),
        "answer_open_then_one_close": _fill("<answer>", n - 9) + "</answer>",
        "answer_one_open_then_text": "<answer>" + _fill("x", n - 8),
        "answer_partial_tags": _fill("<answer", n),
        "answer_partial_close": _fill("<answer></answe", n),
        "answer_lt_runs": _fill("<", half) + "<answer>{U}</answer>" + _fill("<", half),
        # <think> tags
        "think_open_only": _fill("<think>", n),
        "think_closed_blocks": _fill("<think>a</think>", n),
        "think_then_answer": _fill("<think>", n - 30) + "</think><answer>{U}</answer>",
        "think_close_only": _fill("</think>", n),
        "answer_then_huge_tail": "<think>r</think><answer>{U}</answer>" + _fill("x", n - 40),
        "think_huge_valid_envelope": "<think>" + _fill("x", n - 40) + "</think><answer>{U}</answer>",
        # alternating open/close tags
        "alternating_answer": _fill("</answer><answer>", n),
        "alternating_mixed": _fill("<think></answer><answer></think>", n),
        "alternating_think": _fill("</think><think>", n),
        # a single character
        "single_char_a": "a" * n,
        "single_char_lt": "<" * n,
        "single_char_space": " " * n,
        "single_char_newline": "\n" * n,
        "single_char_dot": "." * n,
        "single_char_hash": "#" * n,
        "single_char_digit": "1" * n,
        # step lines
        "step_lines": _fill("Step 1: x\n", n),
        "step_lines_in_envelope": "<think>" + _fill("Step 1: x\n", n - 40) + "</think><answer>{U}</answer>",
        "numbered_lines_in_envelope": "<think>" + _fill("1. x\n", n - 40) + "</think><answer>{U}</answer>",
        "short_lines_in_envelope": "<think>" + _fill("x\n", n - 40) + "</think><answer>{U}</answer>",
        "sentences_in_envelope": "<think>" + _fill("a. ", n - 40) + "</think><answer>{U}</answer>",
        "sentence_marks_no_space": "<think>" + _fill('a.)")]', n - 40) + " b</think><answer>{U}</answer>",
        "step_lines_blank_content": "<think>" + _fill("Step 1:\n", n - 40) + "</think><answer>{U}</answer>",
        "digit_lines_no_label": "<think>" + _fill("1\n", n - 40) + "</think><answer>{U}</answer>",
        "blank_lines_then_text": "<think>" + "\n" * (n - 40) + "x</think><answer>{U}</answer>",
        "cr_only_lines": "<think>" + _fill("x\r", n - 40) + "</think><answer>{U}</answer>",
        "step_label_prefix_runs": "<think>"
        + _fill("#" * 1000 + "Step\n", n - 40)
        + "</think><answer>{U}</answer>",
        # nested braces / brackets
        "braces_nested": "{" * half + "}" * half,
        "brackets_nested": "[" * half + "]" * half,
        "parens_nested": "(" * half + ")" * half,
        "braces_in_answer": "<think>r</think><answer>" + "{" * half + "}" * half + "</answer>",
        "braces_in_answer_under_cap": "<think>r</think><answer>"
        + "{" * 1995
        + "U"
        + "}" * 1995
        + "</answer>",
        "brackets_in_answer_under_cap": "<think>r</think><answer>"
        + "[" * 1995
        + "U"
        + "]" * 1995
        + "</answer>",
        "set_of_many_in_answer_under_cap": "<think>r</think><answer>{" + _fill("U, ", 3990) + "}</answer>",
        "query_parens_in_trace": _trace("U -> X", derivation="- " + "(" * 5000).replace(
            "backdoor_set(treatment=X, outcome=Y)", "f(" + "(" * 5000 + ")"
        ),
        # GRAPH slots
        "graph_slot_huge": _trace(_graph_slot(n - 200)),
        "graph_slot_under_trace_cap": _trace(_graph_slot(19_000 - 200)),
        "graph_slot_under_slot_cap": _trace(_graph_slot(15_000)),
        "graph_slot_arrow_runs": _trace(_fill("A -> ", 15_000)),
        "graph_slot_semicolons": _trace(";" * 15_000),
        "derivation_many_lines_under_cap": _trace(
            "U -> X; U -> Y; X -> Y", derivation=_fill("- U -> X\n", 18_000)
        ),
        "derivation_one_long_path_under_cap": _trace(
            "U -> X; U -> Y; X -> Y", derivation="- " + _fill("X <- U -> ", 18_000) + "Y is open"
        ),
        "slot_labels_repeated": "<think>" + _fill("GRAPH:\n", n - 40) + "</think><answer>{U}</answer>",
        "slot_labels_repeated_under_cap": "<think>"
        + _fill("RESULT: {U}\n", 19_000)
        + "</think><answer>{U}</answer>",
        # long lines without newlines
        "long_line_words": _fill("word ", n),
        "long_line_tabs_and_words": _fill("a\t \t", n),
        # unicode
        "unicode_astral": _fill("😀", n),
        "unicode_line_separators": _fill("x\u2028", n),
        "unicode_combining": _fill("a\u0301\u0302\u0303", n),
        "unicode_fullwidth_tags": _fill("＜answer＞", n),
        "unicode_in_envelope": "<think>" + _fill("第三步。\u2029ß ", n - 40) + "</think><answer>{U}</answer>",
    }
    # Just under CRoS's reasoning cap, where the step splitter does run (longer reasoning is
    # rejected before any pattern): one line start every two characters, most of them label-like.
    from faithgrpo.rewards.steps import MAX_REASONING_CHARS

    cap = min(n, MAX_REASONING_CHARS) - 100
    for label, unit in (
        ("digit_lines", "1\n"),
        ("s_lines", "s\n"),
        ("hash_lines", "#\n"),
        ("blank_lines", "\n"),
        ("short_lines", "x\n"),
        ("blank_step_labels", "Step 1:\n"),
        ("step_lines", "Step 1: x\n"),
        ("sentences", "a. "),
    ):
        corpus[f"{label}_under_reasoning_cap"] = (
            "<think>" + _fill(unit, cap) + "1. x</think><answer>{U}</answer>"
        )
    return corpus


def _kk_entry() -> str | None:
    try:
        import reasoning_gym

        entry = reasoning_gym.create_dataset("knights_knaves", size=1, seed=3, n_people=3)[0]
        return json.dumps(entry, default=str)
    except Exception:  # reasoning-gym missing: that reward is skipped
        return None


def _cros_text(text: str) -> Any:
    """CRoS's model-free text path for one completion (what compute_deltas does before scoring)."""
    from faithgrpo.rewards.cros.completions import parse_completion
    from faithgrpo.rewards.steps import (
        MAX_REASONING_CHARS,
        apply_permutation,
        scramble_permutations,
        scramble_seed,
        step_spans,
    )

    parsed, reason = parse_completion(text)
    if parsed is None:
        return reason
    head, reasoning, middle, _answer = parsed
    if not reasoning.strip():
        return "empty_reasoning"
    if len(reasoning) > MAX_REASONING_CHARS:
        return "too_long"
    spans = step_spans(reasoning)
    if len(spans) < 2:
        return "too_few_steps"
    perms = scramble_permutations(len(spans), 4, scramble_seed(0, "prompt", text))
    return [head + apply_permutation(reasoning, spans, p) + middle for p in perms]


def rewards() -> dict[str, Callable[[str], Any]]:
    from faithgrpo.rewards.calver.reward import calver_reward
    from faithgrpo.rewards.format import format_reward, trace_format_reward
    from faithgrpo.rewards.outcome import outcome_reward

    out: dict[str, Callable[[str], Any]] = {
        "outcome_causal": lambda t: outcome_reward([t], problem=[PROBLEM]),
    }
    entry = _kk_entry()
    if entry is not None:
        out["outcome_reasoning_gym"] = lambda t: outcome_reward([t], entry=[entry])
    out.update(
        {
            "format": lambda t: format_reward([t]),
            "trace_format": lambda t: trace_format_reward([t]),
            "calver": lambda t: calver_reward([t], problem=[PROBLEM]),
            "cros_text": _cros_text,
        }
    )
    return out


def time_call(fn: Callable[[str], Any], text: str, repeats: int) -> tuple[float, float]:
    """Median (wall ms, thread CPU ms) of ``repeats`` calls."""
    wall, cpu = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.thread_time()
        fn(text)
        wall.append((time.perf_counter() - t0) * 1e3)
        cpu.append((time.thread_time() - c0) * 1e3)
    return statistics.median(wall), statistics.median(cpu)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1_000_000, help="characters per hostile input")
    ap.add_argument("--repeats", type=int, default=3, help="calls per (reward, input); the median counts")
    ap.add_argument("--only", default="", help="comma-separated reward names to run (default: all)")
    args = ap.parse_args(argv)
    corpus = hostile_corpus(args.size)
    funcs = rewards()
    if args.only:
        wanted = set(args.only.split(","))
        funcs = {k: v for k, v in funcs.items() if k in wanted}
    for fn in funcs.values():  # warm-up: imports, regex compilation, problem caches
        fn(_trace("U -> X; U -> Y; X -> Y"))
    out: dict[str, Any] = {
        "target_ms_per_call": TARGET_MS,
        "max_input_chars": max(len(t) for t in corpus.values()),
        "inputs": len(corpus),
        "repeats": args.repeats,
        "rewards": {},
    }
    for name, fn in funcs.items():
        per_input: dict[str, dict[str, float]] = {}
        for label, text in corpus.items():
            wall, cpu = time_call(fn, text, args.repeats)
            per_input[label] = {"wall_ms": round(wall, 3), "cpu_ms": round(cpu, 3)}
        worst_cpu = max(per_input, key=lambda k: per_input[k]["cpu_ms"])
        worst_wall = max(per_input, key=lambda k: per_input[k]["wall_ms"])
        out["rewards"][name] = {
            "worst_cpu_ms": per_input[worst_cpu]["cpu_ms"],
            "worst_cpu_input": worst_cpu,
            "worst_wall_ms": per_input[worst_wall]["wall_ms"],
            "worst_wall_input": worst_wall,
            "meets_target": per_input[worst_cpu]["cpu_ms"] <= TARGET_MS,
            "top3_cpu_ms": dict(
                sorted(((k, v["cpu_ms"]) for k, v in per_input.items()), key=lambda kv: -kv[1])[:3]
            ),
        }
    out["all_meet_target"] = all(r["meets_target"] for r in out["rewards"].values())
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
