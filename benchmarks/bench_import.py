"""What importing a reward costs: wall time and modules loaded, each in a fresh interpreter.

Each statement runs ``--repeats`` times in its own ``python -c`` (so no module is cached), alternating
statements within a round so a busy machine slows them alike; the median is kept. ``import networkx``
is the floor (the verifier's one dependency). Target: ``from faithgrpo import calver_reward`` within
~0.1 s of ``import networkx``, with no reasoning-gym, torch or numpy loaded.

Prints one JSON object: ``{statement: {"median_s", "modules", "heavy"}, ...}`` where ``heavy`` lists
which of reasoning_gym, torch, numpy, datasets and faithgrpo.tasks the statement loaded.

Usage:
    python benchmarks/bench_import.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

STATEMENTS = (
    "import networkx",
    "from faithgrpo import calver_reward",
    "from faithgrpo import outcome_reward, format_reward",
    "import faithgrpo.tasks",
)
HEAVY = ("reasoning_gym", "torch", "numpy", "datasets", "faithgrpo.tasks")
PROBE = (
    "import sys, time, json; t = time.perf_counter(); {stmt}; dt = time.perf_counter() - t; "
    "print(json.dumps([dt, len(sys.modules), [m for m in {heavy!r} if m in sys.modules]]))"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    runs: dict[str, list] = {s: [] for s in STATEMENTS}
    for _ in range(args.repeats):
        for stmt in STATEMENTS:
            code = PROBE.format(stmt=stmt, heavy=HEAVY)
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
            if out.returncode != 0:
                raise SystemExit(f"{stmt!r} failed: {out.stderr.strip().splitlines()[-1:]}")
            runs[stmt].append(json.loads(out.stdout.strip().splitlines()[-1]))
    result = {
        stmt: {
            "median_s": round(statistics.median(r[0] for r in rows), 3),
            "modules": rows[-1][1],
            "heavy": rows[-1][2],
        }
        for stmt, rows in runs.items()
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
