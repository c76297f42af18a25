"""GRPO step time with the full reward stack ÷ outcome + format only (issue 5); per-phase profile (issue 16).

Same model (the embedded SmolLM2-135M-Instruct with the recipe's LoRA), same batch, same seed, on
CPU, through ``recipes/grpo_cros.py`` with the CPU demo config restricted to causal rows (every
reward applies to them). Configurations:

- ``base``: rewards outcome + format;
- ``full_m2`` / ``full_m4``: outcome, format, trace_format, CRoS (M = 2 / 4), CALVER.

Each configuration runs ``--steps`` GRPO steps from the same seed, so step k sees the same prompt in
every configuration; a step's time is TRL's ``step_time`` (generation, rewards, forward and
backward). Configurations are run in ``--rounds`` interleaved rounds and each step keeps its fastest
time over the rounds: on a machine shared with other jobs the minimum is the least disturbed.
Two ratios per M:

- ``ratio``: full step time / base step time, on what the policy generates. A 135M base model
  rarely closes an ``<answer>``, so CRoS scores few completions (``cros_scored_frac``) and costs
  little there;
- ``ratio_all_scored``: the steady state of a policy that writes traces. The extra rewards
  (trace_format, CRoS, CALVER) score G gold six-slot traces for each of ``--gold_prompts`` causal
  prompts (every completion has a defined Δ), with CRoS bound as in training (the policy with its
  adapters disabled); ratio = (base step + extra reward time per step) / base step.

Prints one JSON object. Target: ratio <= 2.0 at M = 4 on CPU (<= 1.15 on a GPU).

On a GPU (``--device cuda``: the recipe's ``use_cpu`` off, bf16 mixed precision where supported)
the issue-16 check runs G = 8, M = 4 (``--num_generations 8 --scrambles 4``); ``--recipe_args``
passes further recipe flags to every configuration (e.g. ``"--warm_start_config none"``).

Every run uses TRL's own generation (``--rollout trl``) unless ``--recipe_args`` names ``--rollout``;
the decode engine's rollout is compared with it by ``benchmarks/bench_rollout.py``.

``--phases``: where the time (and memory) of one GRPO step goes, measured inside a single run of the
recipe on the demo config as given (all its rewards, its M, its mixture; ``--recipe_args`` still
applies): ``--warmup_steps`` untimed steps (default 1), then ``--phase_steps`` timed ones (default
3). The benchmark wraps TRL's methods and the generation prefill for the run only (no recipe
change): per step

- ``step``: on_step_begin -> on_step_end (TRL's ``training_step`` plus the optimizer step);
- ``generation``: ``GRPOTrainer._generate`` (tokenise, ``model.generate``, detokenise); its
  ``generate`` (``model.generate`` alone) splits into ``prefill`` (``GenerationMixin._prefill``: the
  prompts' forward) and ``decode`` (the rest: one forward and one sample per new token), with
  completion tokens and tokens/s;
- ``rewards``: ``GRPOTrainer._calculate_rewards``, and each reward function on its own (``reward/<name>``);
- ``loss_forward``: ``compute_loss`` (policy log-probs through TRL's fused LM head, the loss);
- ``backward``: ``Accelerator.backward`` (with activation checkpointing: recomputed forward included);
- ``other``: the step minus the four above (optimizer step, advantages, TRL bookkeeping, callbacks).

Reported: each phase's median seconds over the timed steps (absolute, noisy on a shared machine) and
its median share of the step (ratios taken within the same step, so they survive machine load), the
resident set size (RSS, sampled every few ms from ``/proc/self/statm``) at the run's start and
its peak inside each phase, RSS at each step's end, and the process peak (``ru_maxrss``). The
ratio modes above are not run.

Usage:
    python benchmarks/bench_step.py --phases        # per-phase profile of the demo config (4 steps)
    python benchmarks/bench_step.py --phases --tiny --phase_steps 2 \
        --recipe_args "--warm_start_config none"    # smoke run on a tiny random Llama
    python benchmarks/bench_step.py                 # embedded model
    python benchmarks/bench_step.py --steps 3 --rounds 3 --model PATH
    python benchmarks/bench_step.py --tiny --steps 1 --rounds 1   # tiny random Llama: a smoke run
    python benchmarks/bench_step.py --device cuda --num_generations 8 --scrambles 4 \
        --recipe_args "--warm_start_config none"    # the GPU check (benchmarks/gpu_check.sh)
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import importlib.util
import json
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
FULL = ["outcome", "format", "trace_format", "cros", "calver"]
WEIGHTS = {"outcome": 1.0, "format": 0.25, "trace_format": 0.25, "cros": 0.5, "calver": 1.0}


def load_recipe():
    spec = importlib.util.spec_from_file_location("grpo_cros", ROOT / "recipes" / "grpo_cros.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------------------------------------
# --phases: per-phase time and RSS of GRPO steps inside one recipe run
PHASES = ("generation", "rewards", "loss_forward", "backward")  # disjoint parts of a step


def _rss_bytes() -> int:
    """Resident set size of this process, from ``/proc/self/statm`` (0 where there is none)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _peak_rss_bytes() -> int:
    """The process's peak RSS so far (``ru_maxrss``: KiB on Linux, bytes on macOS)."""
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


class PhaseProfiler:
    """Time named phases of GRPO steps and sample RSS while they run.

    ``with profiler.phase(name): ...`` adds the block's wall time to ``name`` in the current step's
    record (phases nest; a phase entered twice in a step accumulates). A daemon thread samples RSS
    every ``interval`` seconds and raises the peak of every phase open at that moment. Steps are
    delimited by :meth:`step_begin` / :meth:`step_end` (a ``TrainerCallback`` calls them).
    """

    def __init__(self, interval: float = 0.005):
        self.interval = interval
        self.steps: list[dict[str, float]] = []
        self.counts: list[dict[str, int]] = []
        self.peaks: dict[str, int] = {}
        self.start_rss = _rss_bytes()
        self.train_begin_rss = 0
        self.step_end_rss: list[int] = []
        self.setup_peak_rss = 0
        self._open: list[str] = []
        self._current: dict[str, float] | None = None
        self._current_counts: dict[str, int] | None = None
        self._step_start = 0.0
        self._stop = False
        self._thread = None

    def start_sampling(self) -> None:
        import threading

        self._thread = threading.Thread(target=self._sample, name="rss-sampler", daemon=True)
        self._thread.start()

    def stop_sampling(self) -> None:
        self._stop = True
        if self._thread is not None:
            self._thread.join()

    def _sample(self) -> None:
        while not self._stop:
            rss = _rss_bytes()
            for name in list(self._open):
                if rss > self.peaks.get(name, 0):
                    self.peaks[name] = rss
            time.sleep(self.interval)

    @contextlib.contextmanager
    def phase(self, name: str):
        self._open.append(name)
        rss = _rss_bytes()
        self.peaks[name] = max(self.peaks.get(name, 0), rss)
        start = time.perf_counter()
        try:
            yield
        finally:
            seconds = time.perf_counter() - start
            self._open.remove(name)
            if self._current is not None:
                self._current[name] = self._current.get(name, 0.0) + seconds

    def count(self, name: str, value: int) -> None:
        if self._current_counts is not None:
            self._current_counts[name] = self._current_counts.get(name, 0) + value

    def step_begin(self) -> None:
        self._current, self._current_counts = {}, {}
        self._open.append("step")
        self._step_start = time.perf_counter()

    def step_end(self) -> None:
        if self._current is None:
            return
        self._current["step"] = time.perf_counter() - self._step_start
        if "step" in self._open:
            self._open.remove("step")
        self.step_end_rss.append(_rss_bytes())
        self.steps.append(self._current)
        self.counts.append(self._current_counts)
        self._current, self._current_counts = None, None


@contextlib.contextmanager
def instrument(profiler: PhaseProfiler):
    """Wrap TRL's GRPO phases (and generation's prefill) with ``profiler`` phases, for the block only.

    Patched: ``GRPOTrainer._generate`` (generation), ``_calculate_rewards`` (rewards),
    ``compute_loss`` (loss_forward), ``training_step``, ``Accelerator.backward`` (backward),
    ``GenerationMixin._prefill`` (prefill, inside generation only), and the ``profiling_context``
    TRL's GRPO module opens around ``model.generate`` and each reward function (``generate``,
    ``reward/<name>``). Everything is restored on exit.
    """
    import accelerate
    from transformers.generation.utils import GenerationMixin
    from trl.trainer import grpo_trainer

    cls = grpo_trainer.GRPOTrainer
    patches: list[tuple[Any, str, Any]] = []

    def patch(owner, attr, make):
        original = owner.__dict__[attr]
        patches.append((owner, attr, original))
        setattr(owner, attr, make(original))

    def timed(name, counter=None):
        def make(original):
            @functools.wraps(original)
            def wrapper(*args, **kwargs):
                with profiler.phase(name):
                    result = original(*args, **kwargs)
                if counter is not None:
                    counter(result)
                return result

            return wrapper

        return make

    def count_tokens(result):
        completion_ids = result[1]  # (prompt_ids, completion_ids, ...)
        profiler.count("completion_tokens", sum(len(ids) for ids in completion_ids))
        profiler.count("completions", len(completion_ids))
        profiler.count("max_completion_tokens", max((len(ids) for ids in completion_ids), default=0))

    def make_prefill(original):
        @functools.wraps(original)
        def wrapper(*args, **kwargs):
            if "generate" not in profiler._open:  # e.g. a cached-prompt scoring path, not the policy's
                return original(*args, **kwargs)
            with profiler.phase("prefill"):
                return original(*args, **kwargs)

        return wrapper

    def make_profiling_context(original):
        @contextlib.contextmanager
        def wrapper(trainer, name):
            if name == "transformers.generate":
                label = "generate"
            elif name in getattr(trainer, "reward_func_names", ()):
                label = f"reward/{name}"
            else:
                label = f"trl/{name}"
            with profiler.phase(label), original(trainer, name):
                yield

        return wrapper

    patch(cls, "_generate", timed("generation", count_tokens))
    patch(cls, "_calculate_rewards", timed("rewards"))
    patch(cls, "compute_loss", timed("loss_forward"))
    patch(cls, "training_step", timed("training_step"))
    patch(accelerate.Accelerator, "backward", timed("backward"))
    patch(GenerationMixin, "_prefill", make_prefill)
    patches.append((grpo_trainer, "profiling_context", grpo_trainer.profiling_context))
    grpo_trainer.profiling_context = make_profiling_context(grpo_trainer.profiling_context)
    try:
        yield profiler
    finally:
        for owner, attr, original in reversed(patches):
            setattr(owner, attr, original)


def _step_callback(profiler: PhaseProfiler):
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            profiler.train_begin_rss = _rss_bytes()
            profiler.setup_peak_rss = _peak_rss_bytes()  # loading, data, warm start, trainer

        def on_step_begin(self, args, state, control, **kwargs):
            profiler.step_begin()

        def on_step_end(self, args, state, control, **kwargs):
            profiler.step_end()

    return StepTimer()


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def summarize_phases(steps: list[dict[str, float]], counts: list[dict[str, int]]) -> dict[str, Any]:
    """Median seconds and median share of the step for every phase over ``steps`` (the timed ones).

    ``decode`` is ``generate`` minus ``prefill``; ``other`` is the step minus :data:`PHASES`;
    ``rewards_other`` is the reward phase minus the reward functions (TRL's gathering and checks).
    Shares are taken within each step, then the median over steps.
    """
    rows = []
    for step, count in zip(steps, counts):
        row = dict(step)
        if "generate" in row:
            row["decode"] = row["generate"] - row.get("prefill", 0.0)
        row["other"] = row["step"] - sum(row.get(p, 0.0) for p in PHASES)
        rewards = [k for k in row if k.startswith("reward/")]
        if "rewards" in row:
            row["rewards_other"] = row["rewards"] - sum(row[k] for k in rewards)
        tokens = count.get("completion_tokens", 0)
        if tokens and row.get("generation"):
            row["tokens_per_s/generation"] = tokens / row["generation"]
        if tokens and row.get("decode"):
            # the first token of each completion comes out of the prefill
            row["tokens_per_s/decode"] = max(tokens - count.get("completions", 0), 0) / row["decode"]
        rows.append(row)
    names = sorted({k for row in rows for k in row if not k.startswith("tokens_per_s/")})
    seconds = {n: _round(_median([r[n] for r in rows if n in r])) for n in names}
    shares = {
        n: _round(_median([r[n] / r["step"] for r in rows if n in r and r["step"] > 0]), 4)
        for n in names
        if n not in ("step", "training_step")
    }
    rates = sorted({k for row in rows for k in row if k.startswith("tokens_per_s/")})
    token_counts = sorted({k for count in counts for k in count})
    return {
        "median_s": seconds,
        "median_share_of_step": shares,
        "per_step_s": [{k: _round(v) for k, v in sorted(r.items())} for r in rows],
        "tokens_per_s": {
            k.split("/", 1)[1]: _round(_median([r[k] for r in rows if k in r]), 1) for k in rates
        },
        "tokens": {k: [c.get(k, 0) for c in counts] for k in token_counts},
    }


def run_phases(recipe, model: str, work: Path, args, extra: list[str]) -> dict[str, Any]:
    """One recipe run on the demo config with :func:`instrument`; the ``--phases`` JSON."""
    steps = args.warmup_steps + args.phase_steps
    argv = [
        "--config", str(ROOT / "recipes" / "configs" / "cpu_demo.yaml"),
        "--model_name_or_path", model, "--output_dir", str(work / "phases"), "--max_steps", str(steps),
        "--save_strategy", "no", "--logging_steps", "1", "--disable_tqdm", "true", "--report_to", "none",
        *extra,
    ]  # fmt: skip
    profiler = PhaseProfiler()
    profiler.start_sampling()
    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    start = time.perf_counter()
    try:
        with instrument(profiler), contextlib.redirect_stdout(sys.stderr):
            script_args, training_args, model_args = recipe.parse_args(argv)
            trainer = recipe.main(
                script_args, training_args, model_args, callbacks=[_step_callback(profiler)]
            )
    finally:
        profiler.stop_sampling()
    wall = time.perf_counter() - start
    if len(profiler.steps) < steps:
        raise RuntimeError(f"expected {steps} steps, recorded {len(profiler.steps)}")
    timed = profiler.steps[args.warmup_steps :]
    summary = summarize_phases(timed, profiler.counts[args.warmup_steps :])
    trl_step_time = [e["step_time"] for e in trainer.state.log_history if "step_time" in e]
    gib = 1024**3
    return {
        "benchmark": "grpo_step_phases",
        "model": "tiny-llama" if args.tiny else model,
        "config": "recipes/configs/cpu_demo.yaml",
        "recipe_args": extra,
        "rewards": list(script_args.reward_funcs),
        "cros_num_scrambles": script_args.cros_num_scrambles,
        "num_generations": trainer.num_generations,
        "per_device_train_batch_size": training_args.per_device_train_batch_size,
        "max_completion_length": training_args.max_completion_length,
        "activation_checkpointing": bool(getattr(training_args, "activation_checkpointing", False)),
        "warmup_steps": args.warmup_steps,
        "timed_steps": len(timed),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "load_average_1m": {
            "before": _round(load_before, 2),
            "after": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
        },
        "platform": platform.platform(),
        "run_wall_s": round(wall, 1),
        **summary,
        "trl_step_time_s": [round(t, 3) for t in trl_step_time],
        "memory_gib": {
            "rss_at_start": round(profiler.start_rss / gib, 3),
            "rss_at_train_begin": round(profiler.train_begin_rss / gib, 3),
            "peak_rss_before_train": round(profiler.setup_peak_rss / gib, 3),
            "rss_at_step_end": [round(v / gib, 3) for v in profiler.step_end_rss],
            "peak_rss_in_phase": {k: round(v / gib, 3) for k, v in sorted(profiler.peaks.items())},
            "process_peak_rss": round(_peak_rss_bytes() / gib, 3),
        },
    }


def run(
    recipe,
    model: str,
    out: Path,
    rewards: list[str],
    steps: int,
    extra: list[str],
    m: int = 4,
    cros_batch_size: int | None = None,
):
    argv = [
        "--config", str(ROOT / "recipes" / "configs" / "cpu_demo.yaml"),
        "--model_name_or_path", model, "--output_dir", str(out), "--max_steps", str(steps),
        "--save_strategy", "no", "--logging_steps", "1", "--disable_tqdm", "true", "--report_to", "none",
        "--reward_funcs", *rewards, "--reward_weights", *[str(WEIGHTS[r]) for r in rewards],
        *(["--cros_num_scrambles", str(m)] if "cros" in rewards else []),
        *(["--cros_batch_size", str(cros_batch_size)] if "cros" in rewards and cros_batch_size else []),
        *extra,
    ]  # fmt: skip
    with contextlib.redirect_stdout(sys.stderr):  # stdout carries the JSON only
        trainer = recipe.main(*recipe.parse_args(argv))
    logs = [entry for entry in trainer.state.log_history if "step_time" in entry]
    return trainer, logs


def gold_batch(dataset, group: int, prompts: int):
    """``group`` gold traces for each of the first ``prompts`` causal rows, as TRL would pass them."""
    from faithgrpo.tasks.certificates.gold import gold_trace

    rows = [r for r in dataset if r["problem"]][:prompts]
    batch = {"prompts": [], "completions": [], "problem": [], "entry": [], "answer": []}
    for i, row in enumerate(rows):
        for k in range(group):
            trace = gold_trace(row["problem"], 1000 * i + k)
            batch["prompts"].append(row["prompt"])
            batch["completions"].append([{"role": "assistant", "content": trace}])
            batch["problem"].append(row["problem"])
            batch["entry"].append(row["entry"])
            batch["answer"].append(row["answer"])
    return batch, len(rows)


def extra_reward_funcs(trainer, m: int, cros_batch_size: int | None = None) -> list:
    """trace_format, CRoS (M = m) and CALVER, CRoS bound to ``trainer``'s policy as in training."""
    from faithgrpo.rewards.registry import get_reward_funcs
    from faithgrpo.trainers.reference import bind_cros_references

    options = {"cros_batch_size": cros_batch_size} if cros_batch_size else {}
    funcs = get_reward_funcs(["trace_format", "cros", "calver"], cros_num_scrambles=m, cros_seed=0, **options)
    policy = trainer.accelerator.unwrap_model(trainer.model)
    bind_cros_references(funcs, policy, trainer.processing_class, num_generations=trainer.num_generations)
    return funcs


def time_rewards(funcs, batch) -> float:
    columns = {k: batch[k] for k in ("problem", "entry", "answer")}
    start = time.perf_counter()
    for func in funcs:
        func(prompts=batch["prompts"], completions=batch["completions"], **columns)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--model", default="embedded", help="policy: 'embedded', a checkpoint dir or a hub id"
    )
    parser.add_argument("--tiny", action="store_true", help="a tiny random Llama instead (smoke run)")
    parser.add_argument("--steps", type=int, default=2, help="GRPO steps per configuration and round")
    parser.add_argument(
        "--rounds", type=int, default=2, help="interleaved rounds; each step keeps its fastest"
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="timed calls of the extra rewards (fastest kept)"
    )
    parser.add_argument("--gold_prompts", type=int, default=2, help="causal prompts with G gold traces each")
    parser.add_argument("--scrambles", type=int, nargs="+", default=[2, 4], help="CRoS M values")
    parser.add_argument(
        "--device",
        choices=["cpu", "cuda"],
        default="cpu",
        help="cpu (the demo config's use_cpu) or cuda (use_cpu false, bf16 where supported)",
    )
    parser.add_argument(
        "--num_generations",
        type=int,
        default=None,
        help="G, completions per prompt (one prompt per step); default: the config's (4)",
    )
    parser.add_argument(
        "--cros_batch_size", type=int, default=None, help="CRoS sequences per forward (default: config's)"
    )
    parser.add_argument(
        "--recipe_args", default="", help="further recipe flags for every configuration, one string"
    )
    parser.add_argument(
        "--phases",
        action="store_true",
        help="per-phase time and RSS of one run on the demo config (see above)",
    )
    parser.add_argument("--warmup_steps", type=int, default=1, help="--phases: untimed steps first")
    parser.add_argument("--phase_steps", type=int, default=3, help="--phases: timed steps (median taken)")
    args = parser.parse_args()
    if args.phases and (args.warmup_steps < 0 or args.phase_steps < 1):
        parser.error("--phases needs --warmup_steps >= 0 and --phase_steps >= 1")

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    recipe = load_recipe()
    work = Path(tempfile.mkdtemp(prefix="bench_step_"))
    model = args.model
    extra: list[str] = []
    if args.tiny:
        from faithgrpo.testing import save_tiny_causal_lm

        model = str(save_tiny_causal_lm(work / "tiny", "llama", seed=0))
        extra += [
            "--max_completion_length",
            "16",
            "--system_prompt",
            "Think, then answer in <answer></answer>.",
        ]
    bf16 = False
    if args.device == "cuda":
        if not torch.cuda.is_available():
            parser.error("--device cuda: no CUDA device is available")
        bf16 = torch.cuda.is_bf16_supported()
        extra += ["--use_cpu", "false", "--bf16", str(bf16).lower()]
    if args.num_generations:
        g = str(args.num_generations)
        extra += ["--num_generations", g, "--per_device_train_batch_size", g]
    extra += shlex.split(args.recipe_args)
    if "--rollout" not in extra:
        # The profile splits TRL's model.generate into prefill and decode, and both ratio modes compare
        # reward stacks over the same generation path: TRL's (the engine's rollout: bench_rollout.py).
        extra += ["--rollout", "trl"]
    if args.phases:  # the demo config's own rows and rewards
        print(json.dumps(run_phases(recipe, model, work, args, extra), indent=2))
        return
    extra = ["--mixture", "{}", *extra]  # causal rows only: every reward applies

    configs = {"base": (["outcome", "format"], 4)} | {f"full_m{m}": (FULL, m) for m in args.scrambles}
    # One untimed step first: the process's first forward/generate pays one-off allocation costs.
    run(recipe, model, work / "warmup", ["outcome", "format"], 1, extra)
    fastest: dict[str, list[float]] = {}
    scored: dict[str, list[float]] = {name: [] for name in configs}
    trainer = None
    for r in range(args.rounds):
        for name, (rewards, m) in configs.items():
            trainer = None
            gc.collect()
            trainer, logs = run(
                recipe, model, work / f"{name}_{r}", rewards, args.steps, extra, m, args.cros_batch_size
            )
            times = [e["step_time"] for e in logs]
            fastest[name] = [min(a, b) for a, b in zip(fastest[name], times)] if name in fastest else times
            scored[name] += [
                1 - e["cros/undefined_frac"] for e in logs if e.get("cros/undefined_frac") is not None
            ]

    group = trainer.num_generations
    prompts_per_step = max(trainer.args.per_device_train_batch_size // group, 1)
    batch, n_prompts = gold_batch(trainer.train_dataset, group, args.gold_prompts)
    tok = trainer.processing_class
    gold_tokens = [
        len(tok(c[0]["content"], add_special_tokens=False)["input_ids"]) for c in batch["completions"]
    ]
    funcs = {m: extra_reward_funcs(trainer, m, args.cros_batch_size) for m in args.scrambles}
    reward_times: dict[int, list[float]] = {m: [] for m in args.scrambles}
    for _ in range(args.repeats):  # interleaved, fastest kept
        for m in args.scrambles:
            reward_times[m].append(time_rewards(funcs[m], batch))

    base = statistics.mean(fastest["base"])
    results = {}
    for m in args.scrambles:
        full = fastest[f"full_m{m}"]
        per_step = min(reward_times[m]) / n_prompts * prompts_per_step
        cros = funcs[m][1]
        results[f"M={m}"] = {
            "full_step_s": [round(t, 3) for t in full],
            "ratio": round(statistics.mean(full) / base, 3),
            "cros_scored_frac": round(statistics.mean(scored[f"full_m{m}"]), 3)
            if scored[f"full_m{m}"]
            else None,
            "all_scored": {
                "extra_reward_s_per_step": round(per_step, 3),
                "ratio_all_scored": round((base + per_step) / base, 3),
                "cros_scored_frac": sum(s.delta is not None for s in cros.last_scores)
                / len(cros.last_scores),
                "reward_call_s": [round(t, 3) for t in reward_times[m]],
            },
        }

    print(
        json.dumps(
            {
                "benchmark": "grpo_step_full_vs_outcome_format",
                "model": "tiny-llama" if args.tiny else args.model,
                "device": args.device,
                "device_name": torch.cuda.get_device_name() if args.device == "cuda" else None,
                "bf16": bf16,
                "torch": torch.__version__,
                "recipe_args": extra,
                "torch_threads": torch.get_num_threads(),
                "cpu_count": os.cpu_count(),
                "load_average_1m": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
                "platform": platform.platform(),
                "steps_per_config": args.steps,
                "rounds": args.rounds,
                "num_generations": group,
                "prompts_per_step": prompts_per_step,
                "max_completion_length": trainer.args.max_completion_length,
                "base_step_s": [round(t, 3) for t in fastest["base"]],
                "gold_prompts": n_prompts,
                "gold_trace_tokens_mean": round(statistics.mean(gold_tokens), 1),
                "results": results,
                "target": {"ratio_at_M4_cpu": 2.0, "ratio_at_M4_gpu": 1.15},
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
