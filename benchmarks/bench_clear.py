"""Latency of the CLEAR judge per judgement, by task type, over the template records.

Judges every record of ``tests/data/clear_templates.jsonl`` (every CLEAR template of
(docs/clear.md, "Record format") on 4-9 node DAGs, ADMGs and directed graphs) against its listed
answers, its accepted candidates and its brute-force wrong answers. "cold" empties the parse and enumeration caches before each
judgement (a record seen for the first time: description and question parsing, brute force over
subsets, path enumeration); "warm" keeps them (the same record judged again, as for the K samples
of one prompt). ``--structure`` adds the records of the eleven structure types that
``tests/clear_records_more.py`` writes in memory (every template on seeded random graphs, with their
other right answers and brute-force wrong answers). Target: <= 1 ms per judgement.

Prints one JSON object: ``{"cold": {task_type: {"n", "median_us", "p99_us", "max_us"}, ...,
"all": {...}}, "warm": {...}}``.

Usage:
    python benchmarks/bench_clear.py [--repeats 3] [--records tests/data/clear_templates.jsonl] [--structure]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path

from faithgrpo.tasks.clear.candidates import judge, listed_answers
from faithgrpo.tasks.clear.records import _clear_caches

DEFAULT = Path(__file__).resolve().parents[1] / "tests" / "data" / "clear_templates.jsonl"


def summarize(samples: list[float]) -> dict:
    samples = sorted(samples)
    return {
        "n": len(samples),
        "median_us": round(statistics.median(samples), 1),
        "p99_us": round(samples[min(len(samples) - 1, int(0.99 * len(samples)))], 1),
        "max_us": round(samples[-1], 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=Path, default=DEFAULT)
    parser.add_argument("--repeats", type=int, default=3, help="timed passes; the fastest of each is kept")
    parser.add_argument(
        "--structure",
        action="store_true",
        help="also the eleven structure types (tests/clear_records_more.py)",
    )
    args = parser.parse_args()
    records = [json.loads(line) for line in args.records.read_text().splitlines() if line.strip()]
    if args.structure:
        sys.path.insert(0, str(DEFAULT.parents[1]))  # the generator lives with the tests
        import clear_records_more

        records += clear_records_more.generate()
    jobs = [
        (r, c)
        for r in records
        for c in [*(listed_answers(r) or [r["answer"]]), *r.get("accept", []), *r.get("reject", [])]
    ]
    out = {}
    for mode in ("cold", "warm"):
        best: list[float] = [float("inf")] * len(jobs)
        _clear_caches()
        filled = False
        for _ in range(args.repeats + (mode == "warm")):  # warm: one untimed pass fills the caches
            gc.collect()
            gc.disable()
            try:
                for i, (r, c) in enumerate(jobs):
                    if mode == "cold":
                        _clear_caches()
                    t0 = time.perf_counter()
                    judge(r, c)
                    t = (time.perf_counter() - t0) * 1e6
                    if mode == "cold" or filled:
                        best[i] = min(best[i], t)
            finally:
                gc.enable()
            filled = True
        by_task: dict[str, list[float]] = {}
        for (r, _), t in zip(jobs, best):
            by_task.setdefault(r["task_type"], []).append(t)
        out[mode] = {task: summarize(ts) for task, ts in sorted(by_task.items())}
        out[mode]["all"] = summarize(best)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
