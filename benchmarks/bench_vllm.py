"""vLLM where it pays (issue 38, item 5): generation equality and speed, and GRPO training with weight sync.

Run on a GPU machine with the optional extra (``pip install 'faithgrpo[vllm]'``); prints one JSON object.
Without vLLM or CUDA it prints ``{"skipped": "<why>"}`` and exits 0, so the GPU script records why.

1. **Generation** (`generate_completions`, the embedded model in bfloat16, 16 causal-graph prompts):
   greedy completions of ``--backend vllm`` against transformers' ``generate`` (``engine="generate"``),
   prompt by prompt (bf16 kernels differ, so the report counts the prompts whose greedy text is
   equal, and the first differing character of the others), then tokens/s of both backends at
   G = 8, temperature 1, ≤ 224 new tokens.
2. **Training** (``recipes/grpo_cros.py`` with ``--use_vllm true --vllm_mode colocate``, a child
   process, ``--steps`` steps from the base model, lr 1e-4 so the policy moves): TRL computes, at
   every step, the difference between the log-probabilities vLLM sampled with and the trainer's own
   (``sampling/sampling_logp_difference/mean``, with ``vllm_importance_sampling_correction``). If the
   weights were not synced after each update, that difference would grow with the steps; the report
   lists it per step with the step times and TRL's ``time/generation``.

Usage:
    python benchmarks/bench_vllm.py [--steps 4] [--prompts 16] [--timeout 400]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def skipped() -> str | None:
    if importlib.util.find_spec("vllm") is None:
        return "vllm is not installed (pip install 'faithgrpo[vllm]')"
    import torch

    if not torch.cuda.is_available():
        return "no CUDA device"
    return None


def first_difference(a: str, b: str) -> int | None:
    """Index of the first differing character of two strings (``None`` when equal)."""
    if a == b:
        return None
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def generation(args) -> dict:
    import torch

    from faithgrpo.eval.generation.backends import generate_completions
    from faithgrpo.eval.generation.checkpoints import load_checkpoint
    from faithgrpo.eval.generation.settings import SamplingSettings
    from faithgrpo.eval.report.adapters import task_rows

    prompts = [row["prompt"] for row in task_rows("causal_graph", args.prompts, 0)]
    model, tokenizer = load_checkpoint("embedded", dtype=torch.bfloat16, device="cuda")
    greedy = SamplingSettings(num_samples=1, temperature=0.0, max_new_tokens=128, batch_size=16)
    reference, _ = generate_completions(model, tokenizer, prompts, greedy, progress=False, engine="generate")
    ours, _ = generate_completions("embedded", tokenizer, prompts, greedy, progress=False, backend="vllm")
    diffs = [first_difference(a.completions[0], b.completions[0]) for a, b in zip(reference, ours)]
    sampled = SamplingSettings(num_samples=8, temperature=1.0, max_new_tokens=224, batch_size=128)
    speed = {}
    for name, kwargs in (("generate", {"engine": "generate"}), ("vllm", {"backend": "vllm"})):
        target = model if name == "generate" else "embedded"
        _, stats = generate_completions(target, tokenizer, prompts, sampled, progress=False, **kwargs)
        speed[name] = stats.to_dict()
    return {
        "greedy_equal_prompts": sum(d is None for d in diffs),
        "prompts": len(prompts),
        "first_difference_at": diffs,
        "tokens_per_second": {k: v["tokens_per_second"] for k, v in speed.items()},
        "runs": speed,
    }


def training(args) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench_vllm_") as tmp:
        out = Path(tmp)
        command = [
            sys.executable, str(ROOT / "recipes" / "grpo_cros.py"),
            "--config", str(ROOT / "recipes" / "configs" / "cpu_demo.yaml"),
            "--use_cpu", "false", "--bf16", "true", "--dtype", "bfloat16",
            "--use_vllm", "true", "--vllm_mode", "colocate", "--vllm_gpu_memory_utilization", "0.3",
            "--vllm_importance_sampling_correction", "true", "--warm_start_config", "none",
            "--num_generations", "8", "--per_device_train_batch_size", "8", "--learning_rate", "1e-4",
            "--max_steps", str(args.steps), "--logging_steps", "1", "--save_strategy", "no",
            "--output_dir", str(out),
        ]  # fmt: skip
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout, cwd=ROOT)
        rows = []
        metrics = out / "metrics.jsonl"
        if metrics.is_file():
            rows = [json.loads(line) for line in metrics.read_text().splitlines() if '"loss"' in line]
        keys = (
            "sampling/sampling_logp_difference/mean",
            "sampling/sampling_logp_difference/max",
            "sampling/importance_sampling_ratio/mean",
            "time/step",
            "time/generation",
            "time/generation_tokens_per_second",
        )
        return {
            "exit": done.returncode,
            "wall_seconds": round(time.perf_counter() - start, 1),
            "rollout_line": next((line for line in done.stdout.splitlines() if "rollout:" in line), None),
            "steps": [{k: row.get(k) for k in ("step", *keys)} for row in rows],
            "stderr_tail": done.stderr[-1500:] if done.returncode else "",
        }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--timeout", type=float, default=400)
    parser.add_argument("--skip-training", action="store_true")
    args = parser.parse_args()
    why = skipped()
    if why:
        print(json.dumps({"skipped": why}))
        return
    out = {"settings": vars(args), "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
    out["generation"] = generation(args)
    if not args.skip_training:
        out["training"] = training(args)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
