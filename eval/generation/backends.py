"""Sample G completions per prompt from a checkpoint (the generation backends), with a cache.

Checkpoints load through `faithgrpo.eval.generation.checkpoints.load_checkpoint`. Two backends:

- ``"transformers"`` (default, always available), chat template applied to conversational
  prompts, with two engines: ``"decode"`` (`faithgrpo.eval.generation.decoding`, Llama/Qwen2 models: shared
  prompt prefill, finished rows replaced at once, each completion seeded on its own) and
  ``"generate"`` (``model.generate`` in batches of prompts × samples, left padding, seeded per
  batch; every other model). ``engine="auto"`` (default) picks ``"decode"`` where it applies.
- ``"vllm"`` (optional): used when the ``vllm`` package is importable (``pip install
  'faithgrpo[vllm]'``; it is not installed on CPU-only machines). Seeds go through vLLM's
  per-request seed, so its samples differ from the transformers backend's for the same seed.

`cached_generate` reuses a completions cache (`faithgrpo.eval.generation.cache`: one JSON record per
prompt, ``{"id", "prompt", "completions", "num_tokens", "settings"}``) when it matches, and generates
and writes it otherwise. Metrics read it back without regenerating; the reader refuses empty,
truncated, inconsistent or stale files with an error that names the fix. The settings and stats
types live in `faithgrpo.eval.generation.settings`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from faithgrpo.eval.generation.cache import (
    CacheError,
    CompletionRecord,
    read_completions,
    write_completions,
)
from faithgrpo.eval.generation.settings import (
    BACKENDS,
    ENGINES,
    GenerationStats,
    SamplingSettings,
    eos_ids,
    fixed_threads,
    prompt_ids,
)

__all__ = [
    "cached_generate",
    "generate_completions",
    "vllm_available",
    "vllm_engine",
]

# ---------------------------------------------------------------------------------------------------
# Generation
# ---------------------------------------------------------------------------------------------------


def vllm_available() -> bool:
    """Whether the optional vLLM backend can be used (the ``vllm`` package is importable)."""
    return importlib.util.find_spec("vllm") is not None


def _batch_seed(seed: int, batch_index: int) -> int:
    digest = hashlib.sha256(f"faithgrpo-generation:{int(seed)}:{batch_index}".encode()).digest()
    return int.from_bytes(digest[:8], "little") % (2**63)


def _chunks(total: int, size: int) -> Iterator[range]:
    for start in range(0, total, size):
        yield range(start, min(start + size, total))


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
    prompt_seeds: Sequence[int] | None = None,
    sampled: list | None = None,
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
        engine: for the transformers backend, ``"decode"`` (`faithgrpo.eval.generation.decoding`: the prompt
            prefilled once, finished rows replaced at once, per-row seeded sampling; Llama/Qwen2 models
            only), ``"generate"`` (``model.generate``) or ``"auto"`` (decode where it applies). Both
            sample from the same distribution (temperature, then top-p, as ``generate`` does) but draw
            different samples for one seed; the engine used is recorded in the settings, not keyed.
        prompt_seeds: one seed per prompt instead of ``settings.seed`` (transformers backend): each
            prompt then gets the completions it would get if sampled alone with its own seed (up to
            float rounding between batch sizes), so prompts can share a batch and still be reproduced
            one by one. The ``generate`` engine samples such prompts one at a time.
        sampled: an empty list to receive, per prompt, each completion's ``(token ids, log-probabilities
            of the sampled tokens under the distribution they were drawn from)``; the decode engine
            only (`ValueError` where another engine would run).

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
    if prompt_seeds is not None and len(prompt_seeds) != len(prompts):
        raise ValueError(f"got {len(prompt_seeds)} prompt seeds for {len(prompts)} prompts")
    if prompt_seeds is not None and backend == "vllm":
        raise ValueError("prompt_seeds needs the transformers backend")
    if sampled is not None and (backend != "transformers" or engine == "generate"):
        raise ValueError("sampled token log-probabilities need the decode engine (engine='decode' or 'auto')")
    record_settings = {**asdict(settings), "backend": backend, **(metadata or {})}
    if backend == "vllm":
        return _generate_vllm(model, tokenizer, prompts, settings, ids, record_settings, progress)
    from faithgrpo.eval.generation import decoding

    why_not = decoding.unsupported_reason(model) if engine != "generate" else "engine='generate'"
    if engine == "decode" and why_not:
        raise ValueError(
            f"the decode engine cannot sample this model: {why_not}; use engine='generate' (--engine generate)"
        )
    with fixed_threads(settings.threads):
        if why_not is None and all(prompt_ids(tokenizer, p) for p in prompts):
            record_settings["engine"] = "decode"
            return decoding.generate_decode(
                model, tokenizer, prompts, settings, ids, record_settings, progress, prompt_seeds, sampled
            )
        if sampled is not None:
            raise ValueError(
                f"sampled token log-probabilities need the decode engine, which cannot run: {why_not}"
            )
        record_settings["engine"] = "generate"
        if prompt_seeds is not None:
            return _one_seed_each(
                model, tokenizer, prompts, settings, ids, record_settings, progress, prompt_seeds
            )
        return _generate_transformers(model, tokenizer, prompts, settings, ids, record_settings, progress)


def _one_seed_each(model, tokenizer, prompts, settings, ids, record_settings, progress, prompt_seeds):
    """``model.generate`` for prompts that each carry their own seed: one prompt per call."""
    from dataclasses import replace

    records, stats = [], []
    for prompt, pid, seed in zip(prompts, ids, prompt_seeds):
        one, st = _generate_transformers(
            model, tokenizer, [prompt], replace(settings, seed=int(seed)), [pid], record_settings, progress
        )
        records += one
        stats.append(st)
    total = GenerationStats(
        len(prompts),
        sum(s.completions for s in stats),
        sum(s.new_tokens for s in stats),
        sum(s.seconds for s in stats),
        "generate",
    )
    return records, total


def _generate_transformers(model, tokenizer, prompts, settings, ids, record_settings, progress):
    import torch
    from tqdm.auto import tqdm

    pad_id = tokenizer.pad_token_id
    if pad_id is None:
        pad_id = tokenizer.eos_token_id
    if pad_id is None:
        raise ValueError("the tokenizer has neither a pad nor an eos token; set tokenizer.pad_token first")
    eos = eos_ids(model, tokenizer)
    encoded = [prompt_ids(tokenizer, p) for p in prompts]
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
    requests = [{"prompt_token_ids": prompt_ids(tokenizer, p)} for p in prompts]
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


def cached_generate(
    path: str | os.PathLike,
    load,
    prompts: Sequence[Any],
    ids: Sequence[str],
    settings: SamplingSettings,
    metadata: dict[str, Any],
    *,
    overwrite: bool = False,
    progress: bool = True,
    check_prompts: bool = True,
    backend: str = "transformers",
    engine: str = "auto",
) -> tuple[list[CompletionRecord], dict[str, Any]]:
    """Reuse the cache at ``path`` when it holds exactly these prompts with these settings; generate otherwise.

    Args:
        path: the JSONL cache file.
        load: a zero-argument callable returning ``(model, tokenizer)``; only called when generating,
            so a fully cached run never loads the model.
        prompts, ids: the prompts and their unique ids, in order.
        settings: sampling settings; with ``metadata`` they must match the cache's.
        metadata: extra settings recorded in (and checked against) the cache, e.g. model and adapter.
        overwrite: regenerate even when a matching cache exists.
        progress: show a progress bar while generating.
        check_prompts: also require the cached prompt texts to equal ``prompts`` (default; an edited
            prompt keeps its id, so ids alone would reuse stale completions).
        backend: the generation backend (``"transformers"`` or ``"vllm"``); part of the cache key.
        engine: the transformers backend's engine (``"auto"``, ``"decode"`` or ``"generate"``, see
            `generate_completions`); recorded in the settings but not part of the cache key (both
            sample the same distribution).

    Returns:
        ``(records, stats)``: the records in ``ids`` order, and ``{"cached": bool, "completions",
        "new_tokens", "engine", "backend", ...}`` (throughput fields when generated; a cached run's
        engine is the one recorded with its completions).

    Raises:
        CacheError: the cache holds other prompts or was made with other settings; the message names the fix.
    """
    path = Path(path)
    if path.exists() and not overwrite:
        expected = {**asdict(settings), **metadata, "backend": backend}
        records = read_completions(path, expected_settings=expected)
        stale = [r.id for r in records] != [str(i) for i in ids]
        if not stale and check_prompts:
            stale = [r.prompt for r in records] != json.loads(json.dumps(list(prompts)))
        if stale:
            raise CacheError(
                f"completions cache {str(path)!r} holds other prompts than this run asks for: pass --overwrite "
                "or a fresh --out directory"
            )
        tokens = sum(sum(r.num_tokens) for r in records)
        recorded = records[0].settings if records else {}
        return records, {
            "cached": True,
            "completions": sum(len(r.completions) for r in records),
            "new_tokens": tokens,
            # The engine that made the cached completions (recorded with them), for the report.
            "engine": recorded.get("engine"),
            "backend": recorded.get("backend", backend),
        }
    model, tokenizer = load()
    # Only a chosen engine is passed on: stand-ins for generate_completions need not know the keyword.
    chosen = {} if engine == "auto" else {"engine": engine}
    records, stats = generate_completions(
        model,
        tokenizer,
        prompts,
        settings,
        ids=ids,
        metadata=metadata,
        progress=progress,
        backend=backend,
        **chosen,
    )
    write_completions(path, records)
    return records, {"cached": False, "backend": backend, **stats.to_dict()}
