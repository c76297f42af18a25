"""What both generation engines share: sampling settings, throughput stats, thread pinning, prompt tokens.

`SamplingSettings` (how completions are sampled, part of every cache key), `GenerationStats` (the
throughput of a run), `fixed_threads` (torch threads pinned by a setting), `prompt_ids` (a prompt's
token ids, chat template applied to conversations) and `eos_ids` (the ids that stop a completion),
used by the backends (`faithgrpo.eval.generation.backends`) and the decode engine
(`faithgrpo.eval.generation.decoding`). Importing this module does not import torch.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

__all__ = [
    "BACKENDS",
    "DEFAULT_THREADS",
    "ENGINES",
    "GenerationStats",
    "SamplingSettings",
    "eos_ids",
    "fixed_threads",
    "prompt_ids",
]

BACKENDS = ("transformers", "vllm")
# Torch threads of a run unless a setting says otherwise: one thread is what every machine has, and
# on a CPU shared with other jobs it is also often the fastest (a parked second thread stalls each
# operation). The count is a setting, not a measurement of the machine: see `SamplingSettings.threads`.
DEFAULT_THREADS = 1
# Engines of the transformers backend: "decode" is the small sampling loop of `faithgrpo.eval.generation.decoding`
# (Llama/Qwen2 models), "generate" is ``model.generate``; "auto" takes "decode" where it applies.
ENGINES = ("auto", "decode", "generate")


@dataclass(frozen=True)
class SamplingSettings:
    """How completions are sampled.

    Attributes:
        num_samples: completions per prompt (G).
        temperature: sampling temperature; 0 means greedy decoding (all G samples then agree).
        top_p: nucleus sampling mass in (0, 1].
        max_new_tokens: generation budget per completion.
        seed: seed of the sampling (each batch is seeded from it and the batch index).
        batch_size: sequences (prompts × samples) per ``generate`` call.
        threads: torch threads while sampling with the transformers backend (`fixed_threads`). CPU
            kernels split sums differently at different thread counts (the embedded model's prefill
            logits move by ~2e-5 between 1 and 2 threads, enough to flip sampled tokens), so the count
            is fixed by this setting, whatever the machine's cores or load, and is part of every cache
            key: the same settings and seed give the same completions on any load.
    """

    num_samples: int = 8
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 512
    seed: int = 0
    batch_size: int = 16
    threads: int = DEFAULT_THREADS

    def __post_init__(self) -> None:
        if not isinstance(self.num_samples, int) or self.num_samples < 1:
            raise ValueError(f"num_samples (G) must be a positive int, got {self.num_samples!r}")
        if not self.temperature >= 0 or not math.isfinite(self.temperature):
            raise ValueError(f"temperature must be a finite number >= 0, got {self.temperature!r}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p!r}")
        if not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be a positive int, got {self.max_new_tokens!r}")
        if not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {self.batch_size!r}")
        if isinstance(self.threads, bool) or not isinstance(self.threads, int) or self.threads < 1:
            raise ValueError(f"threads must be a positive int, got {self.threads!r}")


@dataclass(frozen=True)
class GenerationStats:
    """Throughput of one generation run (``engine``: the transformers engine that ran, else ``None``)."""

    prompts: int
    completions: int
    new_tokens: int
    seconds: float
    engine: str | None = None

    @property
    def tokens_per_second(self) -> float | None:
        """Generated tokens per wall-clock second; ``None`` when no time was measured."""
        return self.new_tokens / self.seconds if self.seconds > 0 else None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "tokens_per_second": self.tokens_per_second}


@contextlib.contextmanager
def fixed_threads(threads: int) -> Iterator[None]:
    """Run the block with ``torch.set_num_threads(threads)``, then restore the caller's count.

    Every CPU computation whose result feeds a cached or reported number runs under this, so the
    numbers depend on the setting, never on the machine's core count or on its load.
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def prompt_ids(tokenizer, prompt: Any) -> list[int]:
    """Token ids of a prompt: chat template for conversational prompts, plain encoding for strings."""
    if isinstance(prompt, str):
        return list(tokenizer(prompt, add_special_tokens=True)["input_ids"])
    if isinstance(prompt, (list, tuple)) and all(isinstance(m, dict) for m in prompt):
        text = tokenizer.apply_chat_template(list(prompt), add_generation_prompt=True, tokenize=False)
        # The template already holds the special tokens it wants (a BOS would be doubled).
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])
    raise TypeError(f"a prompt must be a string or a list of chat messages, got {type(prompt).__name__}")


def eos_ids(model, tokenizer) -> set[int]:
    """Token ids that end a completion: the model's generation config's and the tokenizer's eos ids."""
    ids: set[int] = set()
    for source in (getattr(model, "generation_config", None), tokenizer):
        value = getattr(source, "eos_token_id", None)
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(v for v in value if isinstance(v, int))
    return ids
