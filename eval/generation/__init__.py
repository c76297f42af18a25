"""Sampling completions from a checkpoint: the backends, the decode engine, caches and checkpoint loading.

==================  ==========================================================================
module              job
==================  ==========================================================================
``settings``        `SamplingSettings`, `GenerationStats`, `fixed_threads`, prompt token ids
``backends``        `generate_completions` (transformers, vLLM), `cached_generate`
``decoding``        the decode engine of the transformers backend (Llama/Qwen2 models)
``decode_cache``    its prompt-shared KV cache
``decode_weights``  its fused weights (LoRA applied)
``sampling``        its per-token scoring and seeded sampling
``cache``           completion caches (JSONL) and weight fingerprints
``checkpoints``     `load_checkpoint`, `check_checkpoint` (base model + optional LoRA adapter)
==================  ==========================================================================

Names are imported from their modules; this package imports nothing from ``faithgrpo.eval``'s
other sub-packages.
"""
