"""Two-rank recipe runs on a loaded machine: does any rank hang at exit? (issue 11; docs/development.md, "Multi-process on CPU")

Starts ``--load`` busy-loop processes (default: one per core), then runs
``torchrun --nproc_per_node 2 recipes/grpo_cros.py`` on a tiny in-process model ``--runs`` times,
each under a watchdog (`faithgrpo.watchdog.run_with_deadline`): a run that does not exit within
``--timeout`` seconds counts as a hang and its stacks are saved under ``--out``. Prints one JSON
object: runs, passed, failed, hangs, per-run wall seconds (median, max), and the load.

Usage:
    python benchmarks/stress_distributed.py [--runs 20] [--load 2] [--steps 2] [--timeout 600]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _busy() -> None:
    while True:
        pass


def recipe_args(model: Path, out: Path, steps: int) -> list[str]:
    """A tiny two-rank GRPO run with every faithgrpo reward; one group of 4 split across the ranks."""
    return [
        "--config", str(ROOT / "recipes" / "configs" / "cpu_demo.yaml"),
        "--model_name_or_path", str(model), "--output_dir", str(out),
        "--reward_funcs", "outcome", "format", "trace_format", "cros", "calver",
        "--reward_weights", "1.0", "0.25", "0.25", "0.5", "1.0",
        "--task_size", "16", "--mixture", json.dumps({"basic_arithmetic": 0.5}),
        "--causal", json.dumps({"min_nodes": 4, "max_nodes": 4, "families": ["random_dag"],
                                "query_kinds": ["backdoor_set", "directed_path"]}),
        "--per_device_train_batch_size", "2", "--num_generations", "4", "--max_completion_length", "8",
        "--max_steps", str(steps), "--logging_steps", "1", "--save_strategy", "no",
        "--use_cpu", "true", "--disable_tqdm", "true", "--warm_start_config", "none",
        "--cros_num_scrambles", "2",
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--load", type=int, default=os.cpu_count() or 2, help="busy-loop processes")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--out", type=Path, default=None, help="where logs of failed runs go")
    args = parser.parse_args()

    from faithgrpo.testing import save_tiny_causal_lm
    from faithgrpo.watchdog import run_with_deadline

    work = Path(tempfile.mkdtemp(prefix="faithgrpo-stress-"))
    out_dir = args.out or work / "failures"
    model = save_tiny_causal_lm(work / "tiny-llama")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           str(ROOT / "recipes" / "grpo_cros.py")]  # fmt: skip

    loaders = [mp.Process(target=_busy, daemon=True) for _ in range(args.load)]
    for p in loaders:
        p.start()
    results = []
    start = time.monotonic()
    try:
        for i in range(args.runs):
            done = run_with_deadline(
                cmd + recipe_args(model, work / f"run{i}", args.steps),
                env=env,
                timeout=args.timeout,
                cwd=work,
            )
            ok = done.returncode == 0 and "destroy_process_group() was not called" not in done.stderr
            results.append({"run": i, "seconds": round(done.seconds, 1), "ok": ok, "hung": done.timed_out})
            if not ok:
                out_dir.mkdir(parents=True, exist_ok=True)
                (out_dir / f"run{i}.log").write_text(done.log(tail=200_000))
            print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    finally:
        for p in loaders:
            p.terminate()
    seconds = [r["seconds"] for r in results]
    print(
        json.dumps(
            {
                "runs": len(results),
                "passed": sum(r["ok"] for r in results),
                "failed": sum(not r["ok"] for r in results),
                "hangs": sum(r["hung"] for r in results),
                "load_processes": args.load,
                "cpu_count": os.cpu_count(),
                "run_seconds_median": statistics.median(seconds) if seconds else None,
                "run_seconds_max": max(seconds) if seconds else None,
                "wall_seconds": round(time.monotonic() - start, 1),
                "failure_logs": str(out_dir) if any(not r["ok"] for r in results) else None,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
