"""Sample G completions per prompt from a checkpoint, and cache them to JSONL.

A checkpoint (a base model plus an optional LoRA adapter) loads through `load_checkpoint`, in
``eval/checkpoints.py`` and re-exported here. Two backends:

- ``"transformers"`` (default, always available), chat template applied to conversational
  prompts, with two engines: ``"decode"`` (`faithgrpo.eval.decoding`, Llama/Qwen2 models: shared
  prompt prefill, finished rows replaced at once, each completion seeded on its own) and
  ``"generate"`` (``model.generate`` in batches of prompts × samples, left padding, seeded per
  batch; every other model). ``engine="auto"`` (default) picks ``"decode"`` where it applies.
- ``"vllm"`` (optional): used when the ``vllm`` package is importable (``pip install
  'faithgrpo[vllm]'``; it is not installed on CPU-only machines). Seeds go through vLLM's
  per-request seed, so its samples differ from the transformers backend's for the same seed.

The cache (`write_completions` / `read_completions` / `cached_generate`, in ``eval/cache.py`` and
re-exported here) holds one JSON record per prompt: ``{"id", "prompt", "completions", "num_tokens",
"settings"}``. Metrics read it back without regenerating; the reader refuses empty, truncated,
inconsistent or stale files with an error that names the fix.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from faithgrpo.eval.cache import (
    CacheError,
    CompletionRecord,
    cached_generate,
    checkpoint_fingerprint,
    read_completions,
    weights_fingerprint,
    write_completions,
)
from faithgrpo.eval.checkpoints import AdapterMismatchError, check_checkpoint, load_checkpoint

__all__ = [
    "DEFAULT_THREADS",
    "AdapterMismatchError",
    "CacheError",
    "CompletionRecord",
    "GenerationStats",
    "SamplingSettings",
    "cached_generate",
    "check_checkpoint",
    "checkpoint_fingerprint",
    "fixed_threads",
    "generate_completions",
    "load_checkpoint",
    "read_completions",
    "vllm_available",
    "vllm_engine",
    "weights_fingerprint",
    "write_completions",
]

BACKENDS = ("transformers", "vllm")
# Torch threads of a run unless a setting says otherwise: one thread is what every machine has, and
# on a CPU shared with other jobs it is also often the fastest (a parked second thread stalls each
# operation). The count is a setting, not a measurement of the machine: see `SamplingSettings.threads`.
DEFAULT_THREADS = 1
# Engines of the transformers backend: "decode" is the small sampling loop of `faithgrpo.eval.decoding`
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


# ---------------------------------------------------------------------------------------------------
# Generation
# ---------------------------------------------------------------------------------------------------


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


def vllm_available() -> bool:
    """Whether the optional vLLM backend can be used (the ``vllm`` package is importable)."""
    return importlib.util.find_spec("vllm") is not None


def _prompt_ids(tokenizer, prompt: Any) -> list[int]:
    """Token ids of a prompt: chat template for conversational prompts, plain encoding for strings."""
    if isinstance(prompt, str):
        return list(tokenizer(prompt, add_special_tokens=True)["input_ids"])
    if isinstance(prompt, (list, tuple)) and all(isinstance(m, dict) for m in prompt):
        text = tokenizer.apply_chat_template(list(prompt), add_generation_prompt=True, tokenize=False)
        # The template already holds the special tokens it wants (a BOS would be doubled).
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])
    raise TypeError(f"a prompt must be a string or a list of chat messages, got {type(prompt).__name__}")


def _batch_seed(seed: int, batch_index: int) -> int:
    digest = hashlib.sha256(f"faithgrpo-generation:{int(seed)}:{batch_index}".encode()).digest()
    return int.from_bytes(digest[:8], "little") % (2**63)


def _chunks(total: int, size: int) -> Iterator[range]:
    for start in range(0, total, size):
        yield range(start, min(start + size, total))


def _eos_ids(model, tokenizer) -> set[int]:
    ids: set[int] = set()
    for source in (getattr(model, "generation_config", None), tokenizer):
        value = getattr(source, "eos_token_id", None)
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(v for v in value if isinstance(v, int))
    return ids


def generate_completions(
    model,
    tokenizer,
    prompts: Sequence[Any],
    settings: SamplingSettings | None = None,
    *,
    ids: Sequence[str] | None = None,
    backend: str = "transformers",
    metadata: dict[str, Any] | None = None,
    progress: bool = True,
    engine: str = "auto",
) -> tuple[list[CompletionRecord], GenerationStats]:
    """Sample ``settings.num_samples`` completions for every prompt.

    Args:
        model: a causal LM (transformers backend) or a model path/id (vLLM backend).
        tokenizer: its tokenizer (a chat template is needed for conversational prompts).
        prompts: strings or chat-message lists.
        settings: sampling settings (defaults to `SamplingSettings()`).
        ids: one identifier per prompt (defaults to the prompt indices as strings); must be unique.
        backend: ``"transformers"`` or ``"vllm"`` (needs the optional ``vllm`` package).
        metadata: extra fields stored in every record's ``settings`` (e.g. model and adapter names).
        progress: show a tqdm progress bar.
        engine: for the transformers backend, ``"decode"`` (`faithgrpo.eval.decoding`: the prompt
            prefilled once, finished rows replaced at once, per-row seeded sampling; Llama/Qwen2 models
            only), ``"generate"`` (``model.generate``) or ``"auto"`` (decode where it applies). Both
            sample from the same distribution (temperature, then top-p, as ``generate`` does) but draw
            different samples for one seed; the engine used is recorded in the settings, not keyed.

    Returns:
        ``(records, stats)``: one `CompletionRecord` per prompt, in order, and the throughput.

    Example:
        >>> from faithgrpo.testing import tiny_causal_lm
        >>> model, tokenizer = tiny_causal_lm("llama")
        >>> records, stats = generate_completions(
        ...     model, tokenizer, ["2 + 2 ="], SamplingSettings(num_samples=2, max_new_tokens=4), progress=False)
        >>> len(records[0].completions)
        2
    """
    settings = settings or SamplingSettings()
    if backend not in BACKENDS:
        raise ValueError(f"unknown generation backend {backend!r}; use one of {BACKENDS}")
    ids = [str(i) for i in range(len(prompts))] if ids is None else [str(i) for i in ids]
    if len(ids) != len(prompts):
        raise ValueError(f"got {len(ids)} ids for {len(prompts)} prompts")
    if len(set(ids)) != len(ids):
        raise ValueError("prompt ids must be unique: the cache is keyed by id")
    if engine not in ENGINES:
        raise ValueError(f"unknown generation engine {engine!r}; use one of {ENGINES}")
    record_settings = {**asdict(settings), "backend": backend, **(metadata or {})}
    if backend == "vllm":
        return _generate_vllm(model, tokenizer, prompts, settings, ids, record_settings, progress)
    from faithgrpo.eval import decoding

    why_not = decoding.unsupported_reason(model) if engine != "generate" else "engine='generate'"
    if engine == "decode" and why_not:
        raise ValueError(
            f"the decode engine cannot sample this model: {why_not}; use engine='generate' (--engine generate)"
        )
    with fixed_threads(settings.threads):
        if why_not is None and all(_prompt_ids(tokenizer, p) for p in prompts):
            record_settings["engine"] = "decode"
            return decoding.generate_decode(
                model, tokenizer, prompts, settings, ids, record_settings, progress
            )
        record_settings["engine"] = "generate"
        return _generate_transformers(model, tokenizer, prompts, settings, ids, record_settings, progress)


def _generate_transformers(model, tokenizer, prompts, settings, ids, record_settings, progress):
    import torch
    from tqdm.auto import tqdm

    pad_id = tokenizer.pad_token_id
    if pad_id is None:
        pad_id = tokenizer.eos_token_id
    if pad_id is None:
        raise ValueError("the tokenizer has neither a pad nor an eos token; set tokenizer.pad_token first")
    eos = _eos_ids(model, tokenizer)
    encoded = [_prompt_ids(tokenizer, p) for p in prompts]
    g = settings.num_samples
    # One row per (prompt, sample); batches cut across prompts so small G still fills a batch.
    rows = [(i, j) for i in range(len(prompts)) for j in range(g)]
    texts: list[list[str]] = [[""] * g for _ in prompts]
    counts: list[list[int]] = [[0] * g for _ in prompts]
    device = next(model.parameters()).device
    sample = settings.temperature > 0
    kwargs: dict[str, Any] = dict(
        max_new_tokens=settings.max_new_tokens,
        do_sample=sample,
        pad_token_id=pad_id,
        eos_token_id=sorted(eos) or None,
    )
    if sample:
        # top_k=0 switches off the model's default top-k: only temperature and top_p shape sampling.
        kwargs.update(temperature=settings.temperature, top_p=settings.top_p, top_k=0)
    new_tokens = 0
    batches = list(_chunks(len(rows), settings.batch_size))
    start = time.perf_counter()
    # Seeding per batch must not disturb the caller's RNG streams.
    rng_devices = [device.index or 0] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=rng_devices), torch.inference_mode():
        for batch_index, chunk in enumerate(
            tqdm(batches, desc="generating", unit="batch", disable=not progress or not batches)
        ):
            batch_rows = [rows[r] for r in chunk]
            width = max(len(encoded[i]) for i, _ in batch_rows)
            input_ids = torch.full((len(batch_rows), width), pad_id, dtype=torch.long)
            attention = torch.zeros((len(batch_rows), width), dtype=torch.long)
            for r, (i, _) in enumerate(batch_rows):
                ids_i = encoded[i]
                if ids_i:
                    input_ids[r, width - len(ids_i) :] = torch.tensor(ids_i)  # left padding
                    attention[r, width - len(ids_i) :] = 1
            input_ids, attention = input_ids.to(device), attention.to(device)
            extra = _shared_prompt_cache(model, input_ids, attention, [i for i, _ in batch_rows])
            torch.manual_seed(_batch_seed(settings.seed, batch_index))
            output = model.generate(input_ids=input_ids, attention_mask=attention, **kwargs, **extra)
            generated = output[:, width:].tolist()
            for (i, j), tokens in zip(batch_rows, generated):
                cut = next((t + 1 for t, tok in enumerate(tokens) if tok in eos), None)
                # Rows that stop early are padded after their eos; a row without eos ran the full budget.
                kept = tokens if cut is None else tokens[:cut]
                counts[i][j] = len(kept)
                new_tokens += len(kept)
                texts[i][j] = tokenizer.decode(kept, skip_special_tokens=True)
    seconds = time.perf_counter() - start
    records = [
        CompletionRecord(ids[i], prompts[i], texts[i], counts[i], dict(record_settings))
        for i in range(len(prompts))
    ]
    return records, GenerationStats(len(prompts), len(rows), new_tokens, seconds, "generate")


def _shared_prompt_cache(model, input_ids, attention, prompt_of_row: list[int]) -> dict[str, Any]:
    """Prefill each distinct prompt of a batch once and share its KV cache among its G samples.

    ``generate`` would otherwise encode every prompt G times; with the long instruction prompts of
    the causal and Knights & Knaves tasks that prefill dominates CPU generation time. The cache
    covers all prompt tokens but the last, which ``generate`` then feeds itself. Returns the extra
    ``generate`` kwargs, or ``{}`` (plain generation) when nothing repeats or the model's cache
    cannot be re-indexed.
    """
    import inspect

    import torch

    unique = sorted(set(prompt_of_row))
    if len(unique) == len(prompt_of_row) or input_ids.shape[1] < 2:
        return {}
    first_row = {p: prompt_of_row.index(p) for p in unique}
    rows = torch.tensor([first_row[p] for p in unique], device=input_ids.device)
    ids, mask = input_ids[rows, :-1], attention[rows, :-1]
    # Left padding: positions count real tokens only, as generate computes them.
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True)
    cache = getattr(out, "cache", None)
    if cache is None:
        cache = getattr(out, "past_key_values", None)
    if cache is None or not hasattr(cache, "batch_select_indices"):
        return {}
    slot = {p: k for k, p in enumerate(unique)}
    cache.batch_select_indices(torch.tensor([slot[p] for p in prompt_of_row], device=input_ids.device))
    # transformers 5 renamed generate's past_key_values to cache; older versions only know the old name.
    parameters = inspect.signature(model.forward).parameters
    return {"cache": cache} if "cache" in parameters else {"past_key_values": cache}


_VLLM_ENGINES: dict[tuple[str, bool], Any] = {}


def vllm_engine(model: Any, *, enable_lora: bool = False, seed: int = 0):
    """The run's one vLLM engine for ``model`` (``"embedded"``, a path, a hub id or a ``vllm.LLM``).

    Building an engine loads the weights and reserves GPU memory, so it is built once per
    (model, LoRA) and reused by every later call in the process.
    """
    from vllm import LLM

    if isinstance(model, LLM):
        return model
    from faithgrpo.models import resolve

    # A transformers model handed over by a caller that loaded it: its checkpoint path.
    model = getattr(getattr(model, "config", None), "_name_or_path", None) or model

    key = (resolve(model), bool(enable_lora))
    if key not in _VLLM_ENGINES:
        _VLLM_ENGINES[key] = LLM(model=key[0], seed=seed, enable_lora=key[1])
    return _VLLM_ENGINES[key]


def _generate_vllm(model, tokenizer, prompts, settings, ids, record_settings, progress):
    """vLLM backend: ``model`` is ``"embedded"``, a model path/id or a ``vllm.LLM``; adapters via
    ``record_settings["adapter"]``.

    Prompts go in as token ids built exactly as the transformers backend builds them (chat template
    applied once, no second BOS), and the engine is shared across calls (`vllm_engine`). The CPU test
    suite checks this plumbing with a stand-in ``vllm`` module; the real engine runs where vLLM installs.
    """
    if not vllm_available():
        raise ImportError(
            "the vLLM backend needs the optional vllm package: pip install 'faithgrpo[vllm]' "
            "(GPU machines), or use backend='transformers' (--backend transformers)"
        )
    from vllm import SamplingParams

    adapter = record_settings.get("adapter")
    llm = vllm_engine(model, enable_lora=bool(adapter), seed=settings.seed)
    lora = None
    if adapter:
        from vllm.lora.request import LoRARequest

        lora = LoRARequest("adapter", 1, str(adapter))
    requests = [{"prompt_token_ids": _prompt_ids(tokenizer, p)} for p in prompts]
    params = [
        SamplingParams(
            n=settings.num_samples,
            temperature=settings.temperature,
            top_p=settings.top_p,
            max_tokens=settings.max_new_tokens,
            seed=_batch_seed(settings.seed, i) % (2**31),
        )
        for i in range(len(prompts))
    ]
    start = time.perf_counter()
    outputs = llm.generate(requests, params, use_tqdm=progress, lora_request=lora)
    seconds = time.perf_counter() - start
    records, new_tokens = [], 0
    for i, out in enumerate(outputs):
        completions = [o.text for o in out.outputs]
        counts = [len(o.token_ids) for o in out.outputs]
        new_tokens += sum(counts)
        records.append(CompletionRecord(ids[i], prompts[i], completions, counts, dict(record_settings)))
    return records, GenerationStats(len(prompts), len(prompts) * settings.num_samples, new_tokens, seconds)
