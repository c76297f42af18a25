"""Tiny causal LMs and tokenizers built in-process, for tests, examples and benchmarks.

Nothing here touches a model hub: the tokenizer is a byte-level BPE trained in a fraction of a second
on a small built-in corpus (so any text encodes), with a ChatML chat template; the models are
randomly initialised Llama or Qwen2 networks of a few hundred thousand parameters.

Example:
    >>> model, tokenizer = tiny_causal_lm("llama", seed=0)
    >>> model.config.model_type
    'llama'
"""

from __future__ import annotations

from pathlib import Path

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIAL_TOKENS = ["<|pad|>", "<|im_start|>", "<|im_end|>"]

_CORPUS = [
    "<think> Step 1: the graph has edges U -> X, U -> Y and X -> M -> Y. </think>",
    "<answer> {U} </answer>",
    "GRAPH: A -> B; B -> C; A <-> C",
    "QUERY: backdoor_set(treatment=X, outcome=Y)",
    "STRATEGY: backdoor criterion",
    "DERIVATION:\n- the backdoor path X <- U -> Y is open; conditioning on U blocks it",
    "RESULT: {U, Z1, Z2}",
    "Knights always tell the truth and knaves always lie. Alice says Bob is a knave.",
    "What is 12 + 30? Let us add the tens first, then the units. The answer is 42.",
    "yes no true false 0 1 2 3 4 5 6 7 8 9 ( ) [ ] { } , ; : . = + - * / < > ' \"",
    "system user assistant You are a helpful assistant.",
]


def tiny_tokenizer(vocab_size: int = 512):
    """Return a ``PreTrainedTokenizerFast``: byte-level BPE, ChatML template, pad/eos set.

    Args:
        vocab_size: target vocabulary size (at least 256 byte tokens plus the specials).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(_CORPUS * 4, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="<|pad|>",
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        unk_token=None,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def tiny_causal_lm(arch: str = "llama", *, seed: int = 0, hidden_size: int = 64, num_layers: int = 2):
    """Build a randomly initialised tiny causal LM and its tokenizer.

    Args:
        arch: ``"llama"`` or ``"qwen2"``.
        seed: torch seed for the initial weights.
        hidden_size: width of the network (heads are 4, KV heads 2).
        num_layers: number of decoder layers.

    Returns:
        ``(model, tokenizer)``; the model is in eval mode, float32, on CPU.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    tokenizer = tiny_tokenizer()
    common = dict(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=False,
    )
    if arch == "llama":
        config, cls = LlamaConfig(**common), LlamaForCausalLM
    elif arch == "qwen2":
        config, cls = Qwen2Config(**common), Qwen2ForCausalLM
    else:
        raise ValueError(f"Unknown tiny architecture {arch!r}; use 'llama' or 'qwen2'.")
    torch.manual_seed(seed)
    model = cls(config).eval()
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model, tokenizer


def save_tiny_causal_lm(directory: str | Path, arch: str = "llama", *, seed: int = 0) -> Path:
    """Save a tiny model and tokenizer as a local HF checkpoint; return the directory."""
    model, tokenizer = tiny_causal_lm(arch, seed=seed)
    directory = Path(directory)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory
