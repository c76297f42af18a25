"""Benchmark CRoS scoring against one bare batched forward of the reference (issue 4, speed).

For M in (2, 4, 8) scrambles and a group of G completions of one prompt, it times

- ``cros``: a full `CRoSReward` call (parsing, scrambling, tokenisation, batched scoring of the
  (M+1)·G sequences, ranking), with ``batch_size`` covering all sequences (one forward), reusing
  the shared prompt's KV cache (the default);
- ``cros_no_prompt_cache``: the same with ``reuse_prompt_cache=False`` (one plain forward);
- ``bare``: one plain forward, ``model(input_ids, attention_mask, position_ids)`` with full logits,
  over the same token batch (the same sequences, left padded the same way);
- ``backbone``: the same forward with ``logits_to_keep=1`` (for context: nearly no lm_head work);

and prints JSON with medians of ``--repeats`` interleaved runs, ``ratio = cros / bare`` (target <= 1.25 on CPU),
``ratio_no_prompt_cache``,
tokens/s, and peak resident memory of each phase above the process baseline (CUDA: peak allocated).

With ``--fsdp2`` it measures the sharded path instead (issue #28): two CPU ranks (torchrun, gloo)
shard the policy + a warm-start-like LoRA adapter with torch's ``fully_shard``, CRoS scores through
the policy's own sharded forward with the initial adapter swapped in, and the JSON gives the reference
memory per process (``reference_bytes_per_process``: 0 model copies plus this rank's shard of the
adapter snapshot, against the full model a separately loaded ``--cros_reference`` costs) and CRoS
time ÷ one bare sharded forward over the same sequences.

Usage:
    python benchmarks/bench_cros.py                 # embedded SmolLM2-135M-Instruct
    python benchmarks/bench_cros.py --model PATH
    python benchmarks/bench_cros.py --tiny          # tiny random Llama (no checkpoint needed)
    python benchmarks/bench_cros.py --fsdp2 --scrambles 4   # sharded path, 2 CPU ranks
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import platform
import random
import statistics
import threading
import time

import torch

from faithgrpo.rewards.cros.completions import parse_completion
from faithgrpo.rewards.cros.reward import CRoSReward
from faithgrpo.rewards.steps import apply_permutation, scramble_permutations, scramble_seed, step_spans
from faithgrpo.text import prompt_text

NODES = "ABCDEFGH"


def make_group(group_size: int, num_steps: int, seed: int) -> tuple[list[str], list[str]]:
    """One causal-style prompt and ``group_size`` distinct step-by-step completions of it."""
    rng = random.Random(seed)
    edges = [f"{a}->{b}" for i, a in enumerate(NODES) for b in NODES[i + 1 :] if rng.random() < 0.3]
    prompt = (
        f"Given a DAG with nodes {', '.join(NODES)} and directed edges {', '.join(edges)}. "
        "Find a valid backdoor adjustment set for the effect of B on G. Think step by step."
    )
    completions = []
    for _ in range(group_size):
        steps = []
        for k in range(num_steps):
            x, y = rng.sample(NODES, 2)
            steps.append(
                f"Step {k + 1}: the path {x} -> {y} is {rng.choice(['open', 'blocked'])} given {{{x}}}."
            )
        answer = "{" + ", ".join(sorted(rng.sample(NODES, 2))) + "}"
        completions.append("<think>\n" + "\n".join(steps) + f"\n</think>\n<answer>{answer}</answer>")
    return [prompt] * group_size, completions


def same_token_batch(cros: CRoSReward, prompts: list[str], completions: list[str]) -> dict:
    """The (M+1)·G sequences CRoS scores, built from the public pieces, left padded."""
    tok = cros.tokenizer
    rows = []
    for prompt, text in zip(prompts, completions):
        (head, reasoning, middle, answer), _ = parse_completion(text)
        spans = step_spans(reasoning)
        perms = scramble_permutations(
            len(spans), cros.num_scrambles, scramble_seed(cros.seed, prompt_text(prompt), text)
        )
        prompt_ids = tok(prompt)["input_ids"]
        answer_ids = tok(answer, add_special_tokens=False)["input_ids"]
        for variant in [reasoning] + [apply_permutation(reasoning, spans, p) for p in perms]:
            prefix_ids = tok(head + variant + middle, add_special_tokens=False)["input_ids"]
            rows.append(prompt_ids + prefix_ids + answer_ids)
    width = max(len(r) for r in rows)
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    input_ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows])
    attention_mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    return {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "position_ids": (attention_mask.cumsum(-1) - 1).clamp(min=0),
        "tokens": sum(len(r) for r in rows),
        "sequences": len(rows),
    }


class PeakMemory:
    """Peak memory of a code block above its starting level: CUDA allocator, else sampled RSS."""

    def __init__(self, device: torch.device):
        self.device = device
        self.peak_mb = 0.0

    @staticmethod
    def _rss_mb() -> float:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    def _sample(self) -> None:
        while not self._stop.is_set():
            self._max = max(self._max, self._rss_mb())
            self._stop.wait(0.005)

    def __enter__(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self._base = torch.cuda.memory_allocated()
        else:
            self._base = self._max = self._rss_mb()
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        if self.device.type == "cuda":
            torch.cuda.synchronize()
            self.peak_mb = (torch.cuda.max_memory_allocated() - self._base) / 2**20
        else:
            self._stop.set()
            self._thread.join()
            self.peak_mb = max(self._max, self._rss_mb()) - self._base


def _release_freed_memory() -> None:
    """Hand freed heap pages back to the OS so each phase's RSS peak starts from a clean level."""
    with contextlib.suppress(OSError):  # not glibc: peaks then include reused memory
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def timed(phases: dict, device: torch.device, repeats: int) -> dict[str, tuple[float, list[float], float]]:
    """Median time, all times and peak memory of each phase; phases interleave in every repeat,
    so a change in machine load (other jobs on a shared CPU) hits all of them alike."""
    times: dict[str, list[float]] = {name: [] for name in phases}
    peaks = dict.fromkeys(phases, 0.0)
    for _ in range(repeats):
        for name, fn in phases.items():
            _release_freed_memory()
            with PeakMemory(device) as memory:
                start = time.perf_counter()
                fn()
                if device.type == "cuda":
                    torch.cuda.synchronize()
                times[name].append(time.perf_counter() - start)
            peaks[name] = max(peaks[name], memory.peak_mb)
    return {name: (statistics.median(times[name]), times[name], peaks[name]) for name in phases}


def load(args) -> tuple[torch.nn.Module, object, str]:
    if args.tiny:
        from faithgrpo.testing import tiny_causal_lm

        model, tok = tiny_causal_lm("llama", seed=0, hidden_size=128, num_layers=4)
        return model, tok, "tiny-random-llama"
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = args.model
    if path is None:
        from faithgrpo.models import embedded_model_path

        path = str(embedded_model_path())
    model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, args.dtype)).eval()
    return model, AutoTokenizer.from_pretrained(path), path


def _param_bytes(tensors) -> int:
    from faithgrpo.rewards.cros.scoring import is_dtensor

    total = 0
    for t in tensors:
        local = t.to_local() if is_dtensor(t) else t
        total += local.numel() * local.element_size()
    return total


def fsdp2_launch(args) -> None:
    """Run this script's FSDP2 worker on 2 CPU ranks and print rank 0's JSON."""
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as out:
        argv = [a for a in sys.argv[1:] if a != "--fsdp2"]
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
        cmd += [os.path.abspath(__file__), "--fsdp2-worker", out, *argv]
        subprocess.run(cmd, check=True, timeout=1800, env={**os.environ, "OMP_NUM_THREADS": "1"})
        with open(os.path.join(out, "rank0.json")) as f:
            print(f.read())


def fsdp2_worker(args) -> None:
    """One rank of the sharded measurement (see the module docstring)."""
    import torch.distributed as dist
    from peft import LoraConfig, get_peft_model
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    from faithgrpo.trainers.distributed import shutdown_process_group
    from faithgrpo.trainers.reference import bind_cros_references

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model, tok, name = load(args)
    full_bytes = _param_bytes(model.parameters())
    torch.manual_seed(
        args.seed
    )  # a non-zero adapter, as after a warm start: the initial adapter is swapped in
    policy = get_peft_model(
        model, LoraConfig(r=16, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    )
    adapter_bytes = _param_bytes(p for p in policy.parameters() if p.requires_grad)
    m = int(args.scrambles.split(",")[0])
    cros = CRoSReward(num_scrambles=m, seed=args.seed, batch_size=10**6, distributed=False)
    mode = bind_cros_references([cros], policy, tok)
    prompts, completions = make_group(args.group_size, args.steps, args.seed)
    batch = same_token_batch(cros, prompts, completions)
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "position_ids")}

    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    for layer in policy.base_model.model.model.layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(policy, mesh=mesh)

    def bare():
        with torch.inference_mode():
            policy(**inputs, use_cache=False)

    def score():
        cros(prompts, completions)

    score()  # warm-up; every completion scored
    assert all(s.reason is None for s in cros.last_scores), [s.reason for s in cros.last_scores]
    runs: dict[str, list[float]] = {"cros": [], "bare": []}
    for _ in range(args.repeats):
        for phase, fn in (("cros", score), ("bare", bare)):
            dist.barrier()
            start = time.perf_counter()
            fn()
            runs[phase].append(time.perf_counter() - start)
    policy.reshard()
    snapshot = cros.scorer.context_factory
    snapshot_bytes = snapshot.nbytes if hasattr(snapshot, "nbytes") else 0
    cros_s, bare_s = statistics.median(runs["cros"]), statistics.median(runs["bare"])
    result = {
        "benchmark": "cros_fsdp2",
        "model": name,
        "ranks": dist.get_world_size(),
        "backend": dist.get_backend(),
        "reference_mode": mode,
        "M": m,
        "group_size": args.group_size,
        "sequences": batch["sequences"],
        "tokens": batch["tokens"],
        "threads_per_rank": torch.get_num_threads(),
        "full_model_bytes": full_bytes,
        "adapter_bytes": adapter_bytes,
        "policy_bytes_per_rank": _param_bytes(policy.parameters()),
        "reference_bytes_per_process": {
            "separate_reference (--cros_reference)": full_bytes + adapter_bytes,
            "sharded_policy (initial adapter swapped in)": snapshot_bytes,
        },
        "cros_s": round(cros_s, 4),
        "bare_sharded_forward_s": round(bare_s, 4),
        "ratio": round(cros_s / bare_s, 3),
        "cros_runs_s": [round(t, 4) for t in runs["cros"]],
        "bare_runs_s": [round(t, 4) for t in runs["bare"]],
        "forward_counts": dict(cros.scorer.forward_counts),
        "repeats": args.repeats,
    }
    if rank == 0:
        with open(os.path.join(args.fsdp2_worker, "rank0.json"), "w") as f:
            json.dump(result, f, indent=2)
    shutdown_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="checkpoint path (default: the embedded SmolLM2-135M)")
    parser.add_argument("--tiny", action="store_true", help="use a tiny random Llama instead")
    parser.add_argument("--group-size", type=int, default=4, help="G, completions per prompt")
    parser.add_argument("--steps", type=int, default=4, help="reasoning steps per completion")
    parser.add_argument("--scrambles", default="2,4,8", help="comma-separated M values")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--threads", type=int, default=None, help="torch CPU threads (1 is steadiest on a shared CPU)"
    )
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backbone", action="store_true", help="also time a forward with logits_to_keep=1")
    parser.add_argument("--fsdp2", action="store_true", help="measure the sharded path on 2 CPU ranks")
    parser.add_argument("--fsdp2-worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.fsdp2:
        return fsdp2_launch(args)
    if args.fsdp2_worker:
        return fsdp2_worker(args)

    model, tok, name = load(args)
    device = torch.device(args.device)
    model.to(device)
    prompts, completions = make_group(args.group_size, args.steps, args.seed)
    results = []
    for m in [int(x) for x in args.scrambles.split(",")]:
        options = {"num_scrambles": m, "seed": args.seed, "batch_size": 10**6, "distributed": False}
        cros = CRoSReward(model, tok, **options)
        plain = CRoSReward(model, tok, reuse_prompt_cache=False, **options)
        batch = same_token_batch(cros, prompts, completions)
        inputs = {k: batch[k].to(device) for k in ("input_ids", "attention_mask", "position_ids")}

        def bare(inputs=inputs):
            with torch.inference_mode():
                model(**inputs, use_cache=False)

        def backbone(inputs=inputs):
            with torch.inference_mode():
                model(**inputs, use_cache=False, logits_to_keep=1)

        def score(cros=cros):
            cros(prompts, completions)

        def score_plain(plain=plain):
            plain(prompts, completions)

        score()  # warm-up (allocator, kernels); also checks every completion is scored
        assert all(s.reason is None for s in cros.last_scores), [s.reason for s in cros.last_scores]
        assert cros.forward_counts["cached_chunk"] == 1 and cros.forward_counts["chunk"] == 0
        phases = {"cros": score, "plain": score_plain, "bare": bare}
        if args.backbone:
            phases["backbone"] = backbone
        timings = timed(phases, device, args.repeats)
        cros_s, cros_all, cros_mem = timings["cros"]
        plain_s, plain_all, plain_mem = timings["plain"]
        bare_s, bare_all, bare_mem = timings["bare"]
        backbone_s = timings["backbone"][0] if args.backbone else None
        # Both scoring paths must agree (prompt cache reuse changes rounding only).
        gap = max(abs(a.delta - b.delta) for a, b in zip(cros.last_scores, plain.last_scores))
        results.append(
            {
                "M": m,
                "sequences": batch["sequences"],
                "tokens": batch["tokens"],
                "padded_tokens": int(batch["input_ids"].numel()),
                "cros_s": round(cros_s, 4),
                "bare_forward_s": round(bare_s, 4),
                "prompt_tokens_per_sequence": len(tok(prompts[0])["input_ids"]),
                "cros_no_prompt_cache_s": round(plain_s, 4),
                "backbone_forward_s": None if backbone_s is None else round(backbone_s, 4),
                "ratio": round(cros_s / bare_s, 3),
                "ratio_no_prompt_cache": round(plain_s / bare_s, 3),
                "ratio_vs_backbone": None if backbone_s is None else round(cros_s / backbone_s, 3),
                "cros_tokens_per_s": round(batch["tokens"] / cros_s, 1),
                "cros_no_prompt_cache_tokens_per_s": round(batch["tokens"] / plain_s, 1),
                "bare_tokens_per_s": round(batch["tokens"] / bare_s, 1),
                "cros_peak_mb": round(cros_mem, 1),
                "cros_no_prompt_cache_peak_mb": round(plain_mem, 1),
                "bare_peak_mb": round(bare_mem, 1),
                "cros_runs_s": [round(t, 4) for t in cros_all],
                "cros_no_prompt_cache_runs_s": [round(t, 4) for t in plain_all],
                "bare_runs_s": [round(t, 4) for t in bare_all],
                "max_abs_delta_gap_cache_vs_plain": gap,
                "mean_delta": round(
                    statistics.fmean(s.delta for s in cros.last_scores if s.delta is not None), 5
                ),
            }
        )
    print(
        json.dumps(
            {
                "benchmark": "cros",
                "model": name,
                "device": str(device),
                "dtype": str(next(model.parameters()).dtype),
                "threads": torch.get_num_threads(),
                "cpu": platform.processor() or platform.machine(),
                "group_size": args.group_size,
                "steps": args.steps,
                "repeats": args.repeats,
                "target_ratio": 1.25,
                "results": results,
                "max_ratio": max(r["ratio"] for r in results),
                "max_ratio_no_prompt_cache": max(r["ratio_no_prompt_cache"] for r in results),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
