"""Where a GRPO step's time goes, logged with the step's metrics (``time/<phase>`` keys).

TRL times its phases (``profiling_context``) but sends the figures only to wandb, mlflow or trackio.
`PhaseTimes` (a trainer mixin) measures them itself and adds, per optimizer step, the seconds spent in:

==========================  ==============================================================================
key                         what
==========================  ==============================================================================
``time/generation``         ``_generate``: tokenising, sampling the completions, decoding them
``time/rewards``            ``_calculate_rewards``: every reward function
``time/reward/<name>``      one reward function (``cros`` includes its reference scoring)
``time/scoring``            log-probabilities without gradient: the old policy's and the KL reference's
``time/forward``            ``compute_loss``: the policy's log-probabilities with gradient and the loss
``time/backward``           the backward pass (with activation checkpointing: the recomputed forward too)
``time/optimizer``          the optimizer step (``on_pre_optimizer_step`` to ``on_optimizer_step``)
``time/step``               the whole optimizer step (micro-batches, optimizer, scheduler)
==========================  ==============================================================================

plus ``time/generation_tokens_per_second`` (completion tokens sampled per second of generation, on
steps that generated). Every key is present at every step (0 where a phase did not run, e.g. the
generation of a step whose completions were sampled at an earlier step), so TRL's averaging over a
logging interval gives seconds per step, and the keys reach ``metrics.jsonl`` like TRL's own.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

import torch
from transformers import TrainerCallback

__all__ = ["PHASES", "PhaseTimes"]

PHASES = ("generation", "rewards", "scoring", "forward", "backward", "optimizer", "step")


class _Clock(TrainerCallback):
    """Times the optimizer step and the whole step, and hands the step's totals to the trainer's metrics."""

    def __init__(self, owner: PhaseTimes):
        self.owner = owner
        self._started: dict[str, float] = {}

    def on_step_begin(self, args, state, control, **kwargs):
        self._started["step"] = time.perf_counter()

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        self._started["optimizer"] = time.perf_counter()

    def on_optimizer_step(self, args, state, control, **kwargs):
        if "optimizer" in self._started:
            self.owner._add_time("optimizer", time.perf_counter() - self._started.pop("optimizer"))

    def on_step_end(self, args, state, control, **kwargs):
        if "step" in self._started:
            self.owner._add_time("step", time.perf_counter() - self._started.pop("step"))
        self.owner._flush_times()


class PhaseTimes:
    """Trainer mixin (before TRL's trainer in the bases): ``time/<phase>`` metrics, see the module docstring."""

    def _init_phase_times(self) -> None:
        self._phase_seconds: dict[str, float] = defaultdict(float)
        self._generated_tokens = 0
        self._reward_keys = [f"reward/{name}" for name in self.reward_func_names]
        self.add_callback(_Clock(self))

    def _add_time(self, phase: str, seconds: float) -> None:
        self._phase_seconds[phase] += seconds

    def _flush_times(self) -> None:
        metrics = self._metrics["train"]
        for phase in (*PHASES, *self._reward_keys):
            metrics[f"time/{phase}"].append(self._phase_seconds.get(phase, 0.0))
        generation = self._phase_seconds.get("generation", 0.0)
        if generation > 0:
            metrics["time/generation_tokens_per_second"].append(self._generated_tokens / generation)
        self._phase_seconds.clear()
        self._generated_tokens = 0

    def _timed(self, phase: str, call, *args: Any, **kwargs: Any):
        start = time.perf_counter()
        try:
            return call(*args, **kwargs)
        finally:
            self._add_time(phase, time.perf_counter() - start)

    def _generate(self, prompts: list):
        output = self._timed("generation", super()._generate, prompts)
        self._generated_tokens += sum(len(ids) for ids in output[1])  # completion ids
        return output

    def _calculate_rewards(self, *args: Any, **kwargs: Any):
        originals = list(self.reward_funcs)
        # Each plain reward function runs through a timer for this call only (model rewards and async
        # ones keep TRL's paths); the list is restored at once, so nothing else sees the wrappers.
        self.reward_funcs = [
            func
            if isinstance(func, torch.nn.Module) or _is_async(func)
            else _timed_reward(self, f"reward/{name}", func)
            for func, name in zip(originals, self.reward_func_names)
        ]
        try:
            return self._timed("rewards", super()._calculate_rewards, *args, **kwargs)
        finally:
            self.reward_funcs = originals

    def _get_per_token_logps_and_entropies(self, *args: Any, **kwargs: Any):
        if torch.is_grad_enabled():  # inside compute_loss: counted as forward
            return super()._get_per_token_logps_and_entropies(*args, **kwargs)
        return self._timed("scoring", super()._get_per_token_logps_and_entropies, *args, **kwargs)

    def compute_loss(self, *args: Any, **kwargs: Any):
        return self._timed("forward", super().compute_loss, *args, **kwargs)

    def training_step(self, *args: Any, **kwargs: Any):
        # backward = the micro-step minus its inputs (generation, rewards, scoring, advantages) and the
        # loss forward; "inputs" is kept for this subtraction only, never logged.
        before = {k: self._phase_seconds.get(k, 0.0) for k in ("inputs", "forward")}
        start = time.perf_counter()
        output = super().training_step(*args, **kwargs)
        spent = time.perf_counter() - start
        inside = sum(self._phase_seconds.get(k, 0.0) - v for k, v in before.items())
        self._add_time("backward", max(spent - inside, 0.0))
        return output

    def _prepare_inputs(self, *args: Any, **kwargs: Any):
        return self._timed("inputs", super()._prepare_inputs, *args, **kwargs)


def _is_async(func) -> bool:
    import inspect

    call = getattr(func, "__call__", None)  # noqa: B004 - a callable object's coroutine method counts
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(call)


def _timed_reward(trainer: PhaseTimes, key: str, func):
    def timed(*args: Any, **kwargs: Any):
        return trainer._timed(key, func, *args, **kwargs)

    return timed
