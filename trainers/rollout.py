"""Training rollouts through the decode engine: a ``rollout_func`` for TRL's ``GRPOTrainer``.

TRL 1.x lets a trainer take its completions from ``rollout_func(prompts, trainer)`` instead of its
own generation (``model.generate``, or vLLM). `DecodeRollout` is such a function: it samples every
completion of the batch with the decode engine of `faithgrpo.eval.generation.decoding` from the
live policy (LoRA adapters applied, their current weights read at each call) and returns what TRL
needs: the prompt's token ids exactly as TRL tokenises them (``trainer._tokenize_prompts``), the
completion's token ids (up to and including the first end-of-sequence token, at most
``max_completion_length``) and each token's sampling log-probability. TRL then decodes, scores,
computes advantages and the loss exactly as it does for its own completions: only where the tokens
come from changes.

Sampling is TRL's: ``temperature`` and ``top_p`` of the trainer, drawn from the warped softmax
(`faithgrpo.eval.generation.sampling`), stopping at the trainer's ``eos_token_ids``. Each
completion draws from its own generator, seeded by the trainer's seed, the process index, the
optimizer step and the call within that step, so a run is reproducible and a resumed run samples
what an uninterrupted one would at the same step. The engine reads the adapter weights without
dropout (the policy as it is evaluated; vLLM samples the same way).

Where the engine cannot reproduce TRL's generation (a model or adapter it does not run, vLLM,
tools or environments, images, sharded parameters, a sampling option it does not apply such as
``top_k``, ``min_p`` or ``repetition_penalty``), `DecodeRollout.reason` says why and the call falls
back to TRL's own path, so the trainer behaves as without a ``rollout_func``.

Example:
    ```python
    >>> from faithgrpo.trainers.rollout import DecodeRollout
    >>> trainer = FaithGRPOTrainer(model=model, reward_funcs=rewards, args=config,
    ...                            train_dataset=dataset, rollout_func=DecodeRollout())  # doctest: +SKIP
    ```
"""

from __future__ import annotations

import hashlib
from typing import Any

__all__ = [
    "ROLLOUTS",
    "DecodeRollout",
    "call_seed",
    "check_rollout_choice",
    "rollout_for",
    "rollout_line",
    "trainer_reason",
]

#: Values of the recipe's ``--rollout``: ``auto`` takes ``decode`` on CPU without vLLM, else ``trl``.
ROLLOUTS = ("auto", "decode", "trl")

# Sampling options of TRL's generation config the engine does not apply, with their neutral values.
_NEUTRAL_SAMPLING = {"top_k": (None, 0), "min_p": (None, 0, 0.0), "repetition_penalty": (None, 1, 1.0)}


def check_rollout_choice(choice: str, use_vllm: bool) -> str | None:
    """What is wrong with the recipe's ``--rollout`` value (one line saying what to fix), or ``None``."""
    if choice not in ROLLOUTS:
        return f"--rollout must be one of {', '.join(ROLLOUTS)}, got {choice!r}"
    if choice == "decode" and use_vllm:
        return "--rollout decode samples with faithgrpo's engine, but use_vllm is true; drop one of them"
    return None


def rollout_for(choice: str, training_args) -> DecodeRollout | None:
    """The recipe's ``rollout_func`` for ``--rollout choice``: a `DecodeRollout`, or ``None`` for TRL's path.

    ``auto`` takes the engine when the run trains on a CPU (``use_cpu``, or no CUDA device) without
    vLLM; on GPUs TRL's generation (``generate`` or vLLM) stays, as users of TRL expect.
    """
    if choice == "trl" or getattr(training_args, "use_vllm", False):
        return None
    if choice == "auto":
        import torch

        on_cpu = bool(getattr(training_args, "use_cpu", False)) or not torch.cuda.is_available()
        if not on_cpu:
            return None
    return DecodeRollout()


def rollout_line(choice: str, training_args, rollout: DecodeRollout | None, trainer) -> str:
    """The recipe's one line on who samples the completions (``rollout: ...``), and why."""
    if rollout is not None:
        return rollout.describe(trainer)
    if getattr(training_args, "use_vllm", False):
        why = "use_vllm"
    elif choice == "trl":
        why = "--rollout trl"
    else:
        why = "--rollout auto on a GPU run"
    return f"rollout: TRL's generation ({why})"


def trainer_reason(trainer) -> str | None:
    """Why `DecodeRollout` cannot stand in for ``trainer``'s generation, or ``None`` when it can."""
    from faithgrpo.eval.generation.decoding import unsupported_reason

    if getattr(trainer, "use_vllm", False):
        return "the trainer generates with vLLM (use_vllm)"
    if getattr(trainer, "tools", None) or getattr(trainer, "environment_factories", None) is not None:
        return "the trainer runs tools or environments"
    if getattr(trainer, "_is_vlm", False):
        return "the model is a vision-language model"
    if getattr(trainer, "is_fsdp_enabled", False) or getattr(trainer, "is_deepspeed_enabled", False):
        return "the policy's parameters are sharded (FSDP or DeepSpeed)"
    if not hasattr(trainer, "_tokenize_prompts"):
        return "this TRL version has no GRPOTrainer._tokenize_prompts"
    kwargs = dict(getattr(trainer, "generation_kwargs", None) or {})
    for key, neutral in _NEUTRAL_SAMPLING.items():
        if kwargs.get(key) not in neutral:
            return f"the trainer samples with {key}={kwargs[key]!r}, which the engine does not apply"
    extra = set(getattr(trainer.args, "generation_kwargs", None) or {})
    if extra:
        return f"generation_kwargs {sorted(extra)} are set (only temperature and top_p are reproduced)"
    temperature = kwargs.get("temperature", getattr(trainer, "temperature", 1.0))
    if not temperature or temperature <= 0:
        return f"temperature {temperature!r} (TRL samples; the engine needs a temperature > 0)"
    return unsupported_reason(trainer.accelerator.unwrap_model(trainer.model))


def call_seed(seed: int, process: int, step: int, call: int) -> int:
    """The seed of one rollout call (see the module docstring): independent of batching and of resuming."""
    text = f"faithgrpo-rollout:{int(seed)}:{process}:{step}:{call}"
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") % (2**63)


class DecodeRollout:
    """A TRL ``rollout_func`` that samples the batch's completions with the decode engine.

    Args:
        slots: sequences decoded together (default: every completion of the call, at most 32).

    The first call that cannot use the engine prints one line with `trainer_reason` and every call
    then uses TRL's own generation. ``last_stats`` holds the latest call's ``(completions, tokens,
    seconds, engine)``. The object holds no model: it pickles, and one instance can serve any trainer.
    """

    __name__ = "decode_rollout"

    def __init__(self, slots: int | None = None):
        if slots is not None and (isinstance(slots, bool) or not isinstance(slots, int) or slots < 1):
            raise ValueError(f"slots must be a positive int or None, got {slots!r}")
        self.slots = slots
        self.reason: str | None = None
        self._checked = False
        self._step_calls: tuple[int, int] = (-1, 0)
        self.last_stats: tuple[int, int, float, str] | None = None

    def check(self, trainer) -> str | None:
        """`trainer_reason` for ``trainer``, remembered; printed once when it is not ``None``."""
        if not self._checked:
            self.reason = trainer_reason(trainer)
            self._checked = True
            if self.reason is not None:
                print(f"rollout: TRL's generation ({self.reason})", flush=True)
        return self.reason

    def describe(self, trainer) -> str:
        """One line: which engine generates the trainer's completions, and why."""
        reason = self.check(trainer)
        if reason is None:
            return "rollout: the decode engine (faithgrpo.trainers.rollout) samples the live policy"
        return f"rollout: TRL's generation ({reason})"

    def _seed(self, trainer) -> int:
        step = trainer.state.global_step
        last, calls = self._step_calls
        calls = calls + 1 if step == last else 0
        self._step_calls = (step, calls)
        return call_seed(trainer.args.seed, trainer.accelerator.process_index, step, calls)

    def __call__(self, prompts: list, trainer) -> dict[str, Any]:
        import time

        start = time.perf_counter()
        fallback = self.check(trainer) is not None
        prompt_ids, images, multimodal = trainer._tokenize_prompts(prompts)
        if fallback:
            mode = "train" if trainer.model.training else "eval"
            generations = trainer.num_generations if mode == "train" else trainer.num_generations_eval
            completion_ids, logprobs = trainer._generate_single_turn(
                prompt_ids, images, multimodal, generations
            )
            engine = "generate"
        else:
            completion_ids, logprobs = self._decode(trainer, prompt_ids)
            engine = "decode"
        tokens = sum(len(c) for c in completion_ids)
        self.last_stats = (len(completion_ids), tokens, time.perf_counter() - start, engine)
        return {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "logprobs": logprobs}

    def _decode(self, trainer, prompt_ids: list[list[int]]):
        import torch

        from faithgrpo.eval.generation.decoding import decode_rows

        # Rows of one prompt share its prefill and keys/values: TRL repeats each prompt G times.
        unique: dict[tuple[int, ...], int] = {}
        encoded: list[list[int]] = []
        rows: list[tuple[int, int]] = []
        seen: dict[int, int] = {}
        for ids in prompt_ids:
            key = tuple(ids)
            if key not in unique:
                unique[key] = len(encoded)
                encoded.append(list(ids))
            i = unique[key]
            rows.append((i, seen.get(i, 0)))
            seen[i] = seen.get(i, 0) + 1
        # decode_rows wants the rows ordered by prompt; keep the caller's order for the result.
        order = sorted(range(len(rows)), key=lambda r: rows[r])
        kwargs = trainer.generation_kwargs
        model = trainer.accelerator.unwrap_model(trainer.model)
        logprobs: list[list[float]] = []
        with torch.inference_mode():
            tokens = decode_rows(
                model,
                encoded,
                [rows[r] for r in order],
                temperature=float(kwargs.get("temperature", trainer.temperature)),
                top_p=float(kwargs.get("top_p", trainer.top_p) or 1.0),
                max_new_tokens=trainer.max_completion_length,
                slots=self.slots or min(len(rows), 32),
                eos=set(trainer.eos_token_ids),
                seed=self._seed(trainer),
                logprobs=logprobs,
            )
        completion_ids: list[list[int]] = [[] for _ in rows]
        sampled: list[list[float]] = [[] for _ in rows]
        for position, r in enumerate(order):
            completion_ids[r], sampled[r] = tokens[position], logprobs[position]
        return completion_ids, sampled
