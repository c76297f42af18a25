"""Fuzz CALVER: score many mutated gold traces and token soups; count exceptions, NaNs and internal errors.

Builds problems of every query kind in both modes (``CausalGraphDataset``: supplied graph;
``CausalStoryDataset``: constructed graph, as in ``tests/test_gold_traces.py``), writes gold traces
for them with :func:`faithgrpo.tasks.certificates.gold.gold_trace`, and then scores ``--n`` fuzzed completions
with :func:`faithgrpo.rewards.calver.reward.score_trace`:

* ``mutant``: a gold trace with 1-4 random edits (delete/duplicate/swap/repeat lines, swap a node
  name, flip an arrow, flip a claim keyword, edit a ``{...}`` set, perturb a number, truncate,
  splice a line of another trace, another RESULT/answer, change case, unicode arrows, break tags,
  insert a token soup);
* ``soup``: random tokens from a trace-shaped alphabet (slot labels, tags, the problem's node
  names, arrows, braces, claim keywords, numbers), either free or inside a six-slot skeleton whose
  DERIVATION lines are soups.

Problems are passed prepared, as dicts or as JSON strings, with random ``graph_check``,
``verify_on`` and ``max_paths``. Prints one JSON object: completions scored, exceptions raised by
``score_trace``, NaN rewards, internal-error reasons (a reason containing ``"internal error"``:
a check raised and ``score_trace`` caught it), totals outside 0..6, p50/p99/max milliseconds per
call and the slowest input, counts by source/kind/mode/total, and up to 10 examples of failures.
It also counts completions whose derivation check passed while the result check failed
(``derivation_passed_result_failed``, with examples): a certificate for a RESULT that does not hold,
which only the path cap (``max_paths``) should allow.

Usage:
    python benchmarks/fuzz_calver.py [--n 100000] [--seed 0] [--per-kind 4]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one CPU thread

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import random  # noqa: E402
import re  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from collections import Counter  # noqa: E402
from typing import Any  # noqa: E402

from faithgrpo.rewards.calver.problem import prepare_problem  # noqa: E402
from faithgrpo.rewards.calver.reward import score_trace  # noqa: E402
from faithgrpo.tasks.causal.datasets import (  # noqa: E402
    CausalGraphConfig,
    CausalGraphDataset,
    CausalStoryConfig,
    CausalStoryDataset,
)
from faithgrpo.tasks.certificates.gold import gold_trace  # noqa: E402
from faithgrpo.verifier.query_kinds import QUERY_KINDS  # noqa: E402

MAX_EXAMPLES = 10

_ARROWS = ["->", "<-", "<->", "→", "←", "↔", "-->", "<--", "⟶", "-", ">", "<"]
_WORDS = [
    "path", "backdoor", "back-door", "directed", "is", "open", "blocked", "unblocked", "active",
    "inactive", "given", "no", "not", "from", "to", "between", "and", "there", "descendant",
    "descendants", "parents", "of", "a", "an", "are", "d-separated", "m-separated", "cycle", "edge",
    "so", "hence", "thus", "therefore", "then", "=", ":", "ψ", "psi", "ATE", "P(", ")", "|", ",",
    ";", ".", "{", "}", "{}", "∅", "×", "+", "−", "-", "0", "1", "0.5", "0.300", "1e999", "-0.1",
    "nan", "inf", "yes", "no", "X", "Y", "U", "M", "Q9", "😀", "\u2028", "\x00", " ", " ", " ",
]  # fmt: skip
_STRUCT = ["GRAPH:", "QUERY:", "STRATEGY:", "DERIVATION:", "RESULT:", "<think>", "</think>", "<answer>",
           "</answer>", "\n", "\n- ", "\n* ", "\n1. ", "Step 1:", "**GRAPH:**"]  # fmt: skip
_FLIPS = [
    ("blocked", "open"), ("open", "blocked"), (" not ", " "), (" is ", " is not "), ("no ", ""),
    ("backdoor ", ""), ("directed ", ""), ("d-separated", "m-separated"), ("descendants", "parents"),
    ("parents", "descendants"), ("given", "conditioned on"), ("edge", "path"), ("cycle", "directed path"),
    ("yes", "no"), ("no", "yes"), ("=", "=="), ("P(", "p("), ("{", "{{"), ("}", ""),
]  # fmt: skip
_ARROW_RE = re.compile(r"<->|->|<-|→|←|↔")
_NODE_TOKEN_RE = re.compile(r"\b[A-Za-z][A-Za-z0-9_]*\b")
_SET_RE = re.compile(r"\{[^{}]*\}")
_NUM_RE = re.compile(r"-?\d+\.\d+|\b\d+\b")


def problems(cls: type, n: int, seed: int, **kw: Any) -> list[dict]:
    """``n`` problems of ``cls`` (as ``tests/test_gold_traces.py`` builds them)."""
    config_cls = CausalStoryConfig if cls is CausalStoryDataset else CausalGraphConfig
    ds = cls(config_cls(size=n, seed=seed, **kw))
    return [json.loads(ds[i]["metadata"]["problem"]) for i in range(n)]


def build_pool(seed: int, per_kind: int) -> list[dict[str, Any]]:
    """Problems of every kind in both modes, each with a few gold traces."""
    pool = []
    for m, cls in enumerate((CausalGraphDataset, CausalStoryDataset)):
        for k, kind in enumerate(QUERY_KINDS):
            for i, p in enumerate(problems(cls, per_kind, seed * 1000 + 100 * m + k, query_kinds=(kind,),
                                           min_nodes=4, max_nodes=12)):  # fmt: skip
                golds = [gold_trace(p, seed * 7919 + 31 * i + s) for s in range(3)]
                pool.append({
                    "problem": p,
                    "prepared": prepare_problem(p),
                    "json": json.dumps(p),
                    "golds": golds,
                    "kind": kind,
                    "mode": p.get("mode", "supplied"),
                    "nodes": list(p["graph"]["nodes"]),
                })  # fmt: skip
    return pool


# ---------------------------------------------------------------------------------------------
# mutations: (rng, text, entry, pool) -> text
def _lines(text: str) -> list[str]:
    return text.split("\n")


def _derivation_span(lines: list[str]) -> tuple[int, int]:
    start = next((i + 1 for i, line in enumerate(lines) if line.startswith("DERIVATION")), 1)
    end = next((i for i, line in enumerate(lines) if line.startswith("RESULT")), len(lines) - 1)
    return start, max(start, end)


def _pick_line(rng: random.Random, lines: list[str]) -> int:
    a, b = _derivation_span(lines)
    if b > a and rng.random() < 0.8:
        return rng.randrange(a, b)
    return rng.randrange(len(lines))


def m_delete_line(rng, text, entry, pool):
    lines = _lines(text)
    del lines[_pick_line(rng, lines)]
    return "\n".join(lines)


def m_duplicate_line(rng, text, entry, pool):
    lines = _lines(text)
    i = _pick_line(rng, lines)
    lines.insert(i, lines[i])
    return "\n".join(lines)


def m_repeat_line(rng, text, entry, pool):
    lines = _lines(text)
    i = _pick_line(rng, lines)
    lines[i:i] = [lines[i]] * rng.choice((10, 100, 600))
    return "\n".join(lines)


def m_swap_lines(rng, text, entry, pool):
    lines = _lines(text)
    i, j = _pick_line(rng, lines), _pick_line(rng, lines)
    lines[i], lines[j] = lines[j], lines[i]
    return "\n".join(lines)


def _replace_one(rng: random.Random, text: str, pattern: re.Pattern, repl: Any) -> str:
    found = list(pattern.finditer(text))
    if not found:
        return text
    m = rng.choice(found)
    new = repl(m.group(0)) if callable(repl) else repl
    return text[: m.start()] + new + text[m.end() :]


def m_swap_node(rng, text, entry, pool):
    nodes = entry["nodes"]
    names = set(nodes)
    found = [m for m in _NODE_TOKEN_RE.finditer(text) if m.group(0) in names]
    if not found:
        return text
    m = rng.choice(found)
    new = rng.choice([*nodes, "Q9", m.group(0).lower(), m.group(0) + "_", ""])
    return text[: m.start()] + new + text[m.end() :]


def m_flip_arrow(rng, text, entry, pool):
    return _replace_one(rng, text, _ARROW_RE, lambda _: rng.choice(_ARROWS))


def m_flip_word(rng, text, entry, pool):
    old, new = rng.choice(_FLIPS)
    spots = [m.start() for m in re.finditer(re.escape(old), text)]
    if not spots:
        return text
    i = rng.choice(spots)
    return text[:i] + new + text[i + len(old) :]


def m_edit_set(rng, text, entry, pool):
    def edit(s: str) -> str:
        inner = [t for t in re.split(r"[,\s]+", s[1:-1]) if t]
        roll = rng.random()
        if roll < 0.3 and inner:
            inner.pop(rng.randrange(len(inner)))
        elif roll < 0.6:
            inner.append(rng.choice([*entry["nodes"], "Q9"]))
        elif roll < 0.7:
            return "{" + s + "}"
        elif roll < 0.8:
            return s[:-1]
        elif roll < 0.9:
            return "∅"
        else:
            inner = inner * 2
        return "{" + ", ".join(inner) + "}"

    return _replace_one(rng, text, _SET_RE, edit)


def m_number(rng, text, entry, pool):
    def perturb(s: str) -> str:
        roll = rng.random()
        if roll < 0.1:
            return rng.choice(("nan", "inf", "1e999", "-0", "1e-400", "9" * 40))
        try:
            v = float(s)
        except ValueError:
            return s
        return (
            f"{v + rng.choice((-1, 1)) * rng.choice((0.0005, 0.002, 0.01, 0.1, 1.0)):.{rng.randint(0, 6)}f}"
        )

    return _replace_one(rng, text, _NUM_RE, perturb)


def m_truncate(rng, text, entry, pool):
    return text[: rng.randrange(len(text) + 1)]


def m_delete_span(rng, text, entry, pool):
    i = rng.randrange(len(text) + 1)
    return text[:i] + text[i + rng.randint(1, 40) :]


def m_splice(rng, text, entry, pool):
    other = rng.choice(pool) if rng.random() < 0.5 else entry
    donor = _lines(rng.choice(other["golds"]))
    a, b = _derivation_span(donor)
    line = donor[rng.randrange(a, b)] if b > a else rng.choice(donor)
    lines = _lines(text)
    lines.insert(_pick_line(rng, lines), line)
    return "\n".join(lines)


def m_other_result(rng, text, entry, pool):
    other = _lines(rng.choice((rng.choice(pool) if rng.random() < 0.5 else entry)["golds"]))
    result = next((line for line in other if line.startswith("RESULT")), "RESULT: {}")
    answer = next((line for line in other if line.startswith("<answer>")), "<answer></answer>")
    lines = _lines(text)
    for i, line in enumerate(lines):
        if line.startswith("RESULT") and rng.random() < 0.8:
            lines[i] = result
        elif line.startswith("<answer>") and rng.random() < 0.8:
            lines[i] = answer
    return "\n".join(lines)


def m_case(rng, text, entry, pool):
    lines = _lines(text)
    i = _pick_line(rng, lines)
    lines[i] = rng.choice((str.upper, str.lower, str.title, str.swapcase))(lines[i])
    return "\n".join(lines)


def m_unicode(rng, text, entry, pool):
    table = {"->": "→", "<-": "←", "<->": "↔", "{}": "∅", "psi": "ψ"}
    for a, b in table.items():
        if rng.random() < 0.5:
            text = text.replace(a, b)
    if rng.random() < 0.3:
        i = rng.randrange(len(text) + 1)
        text = text[:i] + rng.choice(("\u2028", "😀", "\x00", "\u0301", "\ufeff")) + text[i:]
    return text


def m_tags(rng, text, entry, pool):
    tag = rng.choice(("<think>", "</think>", "<answer>", "</answer>", "DERIVATION:", "RESULT:", "GRAPH:"))
    roll = rng.random()
    if roll < 0.4:
        return text.replace(tag, "", 1)
    if roll < 0.8:
        i = rng.randrange(len(text) + 1)
        return text[:i] + tag + text[i:]
    return text.replace(tag, tag.lower(), 1)


def m_bullets(rng, text, entry, pool):
    bullet = rng.choice(("", "- ", "* ", "• ", "1) ", "Step 9: ", "> ", "  "))
    return re.sub(r"(?m)^(?:- |\* |\d+\. |Step \d+: )", bullet, text)


def m_soup(rng, text, entry, pool):
    i = rng.randrange(len(text) + 1)
    return text[:i] + soup(rng, entry, rng.randint(1, 30)) + text[i:]


MUTATIONS = [
    m_delete_line, m_duplicate_line, m_repeat_line, m_swap_lines, m_swap_node, m_swap_node, m_flip_arrow,
    m_flip_arrow, m_flip_word, m_flip_word, m_edit_set, m_edit_set, m_number, m_number, m_truncate,
    m_delete_span, m_splice, m_splice, m_other_result, m_case, m_unicode, m_tags, m_bullets, m_soup,
]  # fmt: skip


# ---------------------------------------------------------------------------------------------
# token soups
def soup(rng: random.Random, entry: dict, k: int, structural: bool = True) -> str:
    alphabet = _WORDS + entry["nodes"] * 3 + _ARROWS * 2 + (_STRUCT if structural else [])
    out = []
    for _ in range(k):
        tok = rng.choice(alphabet)
        out.append(tok)
        if rng.random() < 0.7:
            out.append(" ")
    return "".join(out)


def soup_trace(rng: random.Random, entry: dict) -> str:
    if rng.random() < 0.4:
        return soup(rng, entry, rng.randint(1, 400))
    gold = _lines(rng.choice(entry["golds"]))
    slots = {line.split(":", 1)[0]: line for line in gold if ":" in line[:12]}
    derivation = [
        f"- {soup(rng, entry, rng.randint(2, 25), structural=False)}" for _ in range(rng.randint(1, 20))
    ]
    # keep some real claims among the soup lines, so certification runs on mixed input
    a, b = _derivation_span(gold)
    derivation += [line for line in gold[a:b] if rng.random() < 0.5]
    rng.shuffle(derivation)
    result = (
        slots.get("RESULT", "RESULT: {}") if rng.random() < 0.7 else "RESULT: " + soup(rng, entry, 3, False)
    )
    answer = next((line for line in gold if line.startswith("<answer>")), "<answer>x</answer>")
    parts = [
        "<think>",
        slots.get("GRAPH", "GRAPH: ") if rng.random() < 0.8 else "GRAPH: " + soup(rng, entry, 20, False),
        slots.get("QUERY", "QUERY: "),
        slots.get("STRATEGY", "STRATEGY: ")
        if rng.random() < 0.8
        else "STRATEGY: " + soup(rng, entry, 3, False),
        "DERIVATION:",
        *derivation,
        result,
        "</think>",
        answer if rng.random() < 0.8 else f"<answer>{soup(rng, entry, 3, False)}</answer>",
    ]
    return "\n".join(parts)


# ---------------------------------------------------------------------------------------------
def run_fuzz(n: int = 100_000, seed: int = 0, per_kind: int = 4) -> dict[str, Any]:
    """Score ``n`` fuzzed completions; return the counts (module docstring)."""
    rng = random.Random(seed)
    t_start = time.perf_counter()
    pool = build_pool(seed, per_kind)
    gold_not_six = sum(score_trace(g, e["prepared"]).total != 6 for e in pool for g in e["golds"])
    counts: Counter = Counter()
    by_source: Counter = Counter()
    by_kind: Counter = Counter()
    by_mode: Counter = Counter()
    totals: Counter = Counter()
    times: list[float] = []
    worst: dict[str, Any] = {"ms": -1.0}
    examples: list[dict[str, Any]] = []
    full_marks_mutants = 0
    unsound: list[dict[str, Any]] = []  # derivation certified a RESULT that the result check rejects
    unsound_count = 0
    for i in range(n):
        entry = rng.choice(pool)
        if rng.random() < 0.75:
            source = "mutant"
            text = rng.choice(entry["golds"])
            for _ in range(rng.choice((1, 1, 2, 3, 4))):
                text = rng.choice(MUTATIONS)(rng, text, entry, pool)
        else:
            source = "soup"
            text = soup_trace(rng, entry)
        form = rng.random()
        problem = entry["prepared"] if form < 0.7 else entry["problem"] if form < 0.9 else entry["json"]
        kwargs: dict[str, Any] = {}
        if rng.random() < 0.3:
            kwargs["graph_check"] = rng.choice(("exact", "query_local"))
        if entry["mode"] == "constructed" and rng.random() < 0.3:
            kwargs["verify_on"] = "trace"
        if rng.random() < 0.2:
            kwargs["max_paths"] = rng.choice((1, 2, 3, 8))
        by_source[source] += 1
        by_kind[entry["kind"]] += 1
        by_mode[entry["mode"]] += 1
        t0 = time.perf_counter()
        try:
            score = score_trace(text, problem, **kwargs)
        except Exception as exc:  # the scorer must never raise on a completion
            counts["exceptions"] += 1
            if len(examples) < MAX_EXAMPLES:
                examples.append({"i": i, "what": "exception", "error": traceback.format_exc(limit=4)[-800:],
                                 "kind": entry["kind"], "text": text[:600], "kwargs": kwargs})  # fmt: skip
            del exc
            continue
        finally:
            ms = (time.perf_counter() - t0) * 1e3
            times.append(ms)
            if ms > worst["ms"]:
                worst = {"ms": round(ms, 3), "i": i, "source": source, "kind": entry["kind"],
                         "mode": entry["mode"], "chars": len(text), "kwargs": kwargs, "text_head": text[:200]}  # fmt: skip
        total = score.total
        totals[total] += 1
        if source == "mutant" and total == 6:
            full_marks_mutants += 1
        if not isinstance(score.reward, float) or math.isnan(score.reward):
            counts["nan_rewards"] += 1
        if total not in range(7) or abs(score.reward - total / 6) > 1e-12:
            counts["bad_totals"] += 1
        if score.derivation and not score.result:
            unsound_count += 1
            if len(unsound) < MAX_EXAMPLES:
                unsound.append({"i": i, "kind": entry["kind"], "mode": entry["mode"], "kwargs": kwargs,
                                "reasons": score.reasons, "text": text[:1500]})  # fmt: skip
        internal = [f"{k}: {r}" for k, r in score.reasons.items() if "internal error" in r]
        if internal:
            counts["internal_errors"] += 1
            if len(examples) < MAX_EXAMPLES:
                examples.append({"i": i, "what": "internal error", "reasons": internal[:3], "kind": entry["kind"],
                                 "text": text[:600], "kwargs": kwargs})  # fmt: skip
    times.sort()
    return {
        "completions": n,
        "seed": seed,
        "problems": len(pool),
        "gold_traces": sum(len(e["golds"]) for e in pool),
        "gold_not_six": gold_not_six,
        "exceptions": counts["exceptions"],
        "nan_rewards": counts["nan_rewards"],
        "internal_errors": counts["internal_errors"],
        "bad_totals": counts["bad_totals"],
        "p50_ms": round(statistics.median(times), 4) if times else None,
        "p99_ms": round(times[min(len(times) - 1, int(0.99 * len(times)))], 4) if times else None,
        "max_ms": round(times[-1], 3) if times else None,
        "worst": worst,
        "full_marks_mutants": full_marks_mutants,
        "derivation_passed_result_failed": unsound_count,
        "derivation_passed_result_failed_examples": unsound,
        "totals": {str(k): totals[k] for k in sorted(totals)},
        "by_source": dict(by_source),
        "by_kind": dict(sorted(by_kind.items())),
        "by_mode": dict(by_mode),
        "examples": examples,
        "elapsed_s": round(time.perf_counter() - t_start, 1),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000, help="fuzzed completions to score")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--per-kind", type=int, default=4, help="problems per query kind and mode")
    args = ap.parse_args(argv)
    result = run_fuzz(args.n, args.seed, args.per_kind)
    print(json.dumps(result, indent=1, ensure_ascii=False))
    bad = result["exceptions"] + result["nan_rewards"] + result["internal_errors"] + result["bad_totals"]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
