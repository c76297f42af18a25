"""A small sampling loop for Llama-style causal LMs: the ``"decode"`` generation engine.

``model.generate`` spends a CPU decode step on more than the model: its `DynamicCache` concatenates
every layer's keys and values into new tensors at each step (a copy of the whole cache per token),
rows that reached end-of-sequence keep being computed until the last row of the batch stops, and
shared prompts are prefilled with full-vocabulary logits at every prompt position. This loop does
only what evaluation sampling needs:

- the prompts' common token prefix (the task instructions) is prefilled once for all of them, then
  each prompt's own tokens once, with logits for the last position only;
- a prompt's keys and values are stored once and shared by its G samples, which attend to them
  together (`PromptSharedCache`: a step reads each prompt's cache once, not once per sample); each
  sequence's generated tokens go into a preallocated row slot of its own (written in place,
  attention masked to each row's length);
- a row that stops (end-of-sequence or budget) hands its slot to the next waiting (prompt, sample)
  row at once, so the batch stays full; at the tail, finished rows leave the batch;
- a step issues few operations (q/k/v and gate/up as one matmul each, fused RMS norm, rotary
  embedding in three operations); its matmuls take the weight as the GEMM's left operand and the
  rows as its columns (`StepLinear`: the weight streams at close to memory bandwidth);
- the whole run (prefill, steps, sampling) keeps one thread count, the one its caller fixed
  (`faithgrpo.eval.generation.settings.fixed_threads`, from `SamplingSettings.threads`): CPU kernels split
  sums differently at different counts (the embedded model's shared-prefix prefill moved logits by
  ~2e-5 between 1 and 2 threads, which flipped sampled tokens), so the loop never changes the
  count itself, and the same settings and seed give the same tokens on a busy or an idle machine;
- each row draws from its own seeded generator, so a completion does not depend on the batch it
  ran in (up to float rounding, which can differ between row counts), and the caller's RNG is
  never touched.

Sampling keeps ``generate``'s semantics (`next_token_scores`): logits in float32, divided by the
temperature, then transformers' top-p rule (`TopPLogitsWarper`: drop the smallest tokens whose
cumulative probability stays within ``1 - top_p``, keep at least one), then ``softmax`` and one draw
per row from it (`sample_tokens`: the distribution of ``torch.multinomial`` in a quarter of its
time); temperature 0 is greedy ``argmax``.

A PEFT model with vanilla LoRA adapters on the decoder projections runs as it is: the engine's
weights are the base weights plus the active adapters' deltas (`linear_parts`), which is how training
rollouts sample the live policy (`faithgrpo.trainers.rollout`). Models the loop does not cover
(other architectures, other adapter types or LoRA variants, sliding-window attention, generation
configs that add logits processors) are reported by `unsupported_reason` and left to ``generate``.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from faithgrpo.eval.generation.cache import CompletionRecord
from faithgrpo.eval.generation.decode_cache import PromptSharedCache, Scratch
from faithgrpo.eval.generation.decode_weights import DecoderBlock, StepLinear, linear_reason
from faithgrpo.eval.generation.sampling import draw_tokens, row_seed
from faithgrpo.eval.generation.settings import GenerationStats, eos_ids, prompt_ids

__all__ = [
    "SUPPORTED_MODELS",
    "DecodeEngine",
    "causal_lm",
    "decode_rows",
    "generate_decode",
    "unsupported_reason",
]

SUPPORTED_MODELS = ("LlamaForCausalLM", "Qwen2ForCausalLM")

# Generation-config fields whose non-neutral values make ``generate`` add a logits processor this
# loop does not apply; a model whose config sets one is left to ``generate``.
_NEUTRAL = {
    **dict.fromkeys(("repetition_penalty", "typical_p", "guidance_scale", "num_beams"), (None, 1)),
    **dict.fromkeys(("no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "min_length"), (None, 0)),
    **dict.fromkeys(("min_new_tokens", "epsilon_cutoff", "eta_cutoff"), (None, 0)),
    **dict.fromkeys(
        [
            "bad_words_ids",
            "forced_bos_token_id",
            "forced_eos_token_id",
            "suppress_tokens",
            "begin_suppress_tokens",
            "sequence_bias",
            "min_p",
            "watermarking_config",
            "exponential_decay_length_penalty",
            "penalty_alpha",
            "dola_layers",
        ],
        (None,),
    ),
}


def causal_lm(model):
    """The transformers model inside ``model``: a PEFT model's base model (its LoRA layers in place), else itself."""
    if hasattr(model, "peft_config") and hasattr(model, "get_base_model"):
        return model.get_base_model()
    return model


_PROJECTIONS = {
    "self_attn": ("q_proj", "k_proj", "v_proj", "o_proj"),
    "mlp": ("gate_proj", "up_proj", "down_proj"),
}


def unsupported_reason(model) -> str | None:
    """Why the loop cannot reproduce ``generate`` for ``model``, or ``None`` when it can.

    ``model`` may be a PEFT model with LoRA adapters on the decoder layers' projections (the engine
    then computes with base weights plus the active adapters, `linear_parts`).
    """
    import torch

    model = causal_lm(model)
    name = type(model).__name__
    if name not in SUPPORTED_MODELS:
        return f"{name} is not one of {SUPPORTED_MODELS}"
    inner = getattr(model, "model", None)
    if not all(hasattr(inner, part) for part in ("embed_tokens", "layers", "norm", "rotary_emb")):
        return f"{name} lacks the usual embed_tokens/layers/norm/rotary_emb modules"
    if type(inner.embed_tokens) is not torch.nn.Embedding or type(model.lm_head) is not torch.nn.Linear:
        return "the embedding or the LM head is wrapped (an adapter or modules_to_save on it)"
    parts = {
        "self_attn": ("head_dim", "scaling"),
        "mlp": ("act_fn",),
        "input_layernorm": ("weight", "variance_epsilon"),
        "post_attention_layernorm": ("weight", "variance_epsilon"),
    }
    for layer in inner.layers:
        for module, names in parts.items():
            sub = getattr(layer, module, None)
            if not all(hasattr(sub, n) for n in (*names, *_PROJECTIONS.get(module, ()))):
                return f"a decoder layer's {module} is not the usual Llama module"
        for module, projections in _PROJECTIONS.items():
            for projection in projections:
                reason = linear_reason(getattr(getattr(layer, module), projection))
                if reason:
                    return f"{module}.{projection}: {reason}"
        if getattr(layer.self_attn, "sliding_window", None):
            return "sliding-window attention layers"
    if not hasattr(inner.norm, "variance_epsilon"):
        return "the final norm is not an RMS norm"
    config = getattr(model, "generation_config", None)
    for key, neutral in _NEUTRAL.items():
        value = getattr(config, key, None)
        if value not in neutral:
            return f"its generation config sets {key}={value!r} (a logits processor the loop does not apply)"
    return None


class DecodeEngine:
    """Prefill and batched decode steps of a Llama-style model over preallocated key/value slots.

    The keys and values live in `cache` (`PromptSharedCache`): each prompt's once, in a prompt slot
    (`PromptSharedCache.add_prompt`, from `prefill`), and each running sequence's generated tokens in
    a row slot that refers to its prompt (`PromptSharedCache.start_row`). `step` runs row slots
    ``0 .. n-1`` together; `PromptSharedCache.move_row` copies a row slot onto another (to keep the
    running slots contiguous). The layers are computed from the model's own weights (q/k/v and
    gate/up concatenated once, so a step issues fewer, larger operations).
    """

    def __init__(self, model, slots: int):
        import torch

        model = causal_lm(model)
        inner = model.model
        self.embed, self.rotary = inner.embed_tokens, inner.rotary_emb
        self.head_linear = StepLinear(model.lm_head.weight, None)  # no bias in Llama/Qwen2 heads
        self.final_norm = (inner.norm.weight, inner.norm.variance_epsilon)
        self.blocks = [DecoderBlock(layer) for layer in inner.layers]
        attention = inner.layers[0].self_attn
        self.heads = model.config.num_attention_heads
        self.kv_heads = model.config.num_key_value_heads
        self.head_dim, self.scale = attention.head_dim, attention.scaling
        self.device, self.dtype = model.lm_head.weight.device, model.lm_head.weight.dtype
        self.slots = slots
        self.cache = PromptSharedCache(
            len(self.blocks), slots, self.kv_heads, self.head_dim, self.dtype, self.device
        )
        self._torch = torch
        self.scratch = Scratch(self.device)

    def _norm(self, x, norm):
        weight, eps = norm
        return self._torch.nn.functional.rms_norm(x, weight.shape, weight, eps)

    def _rope_tables(self, x, positions):
        """``cos`` and ``sin`` with the sign of ``rotate_half`` folded in: ``rope(t) = t*cos + roll(t)*sin``."""
        cos, sin = self.rotary(x, positions)
        half = self.head_dim // 2
        return cos, self._torch.cat([-sin[..., :half], sin[..., half:]], dim=-1)

    def _rope(self, t, cos, sin):
        # rotate_half(t) = cat(-t2, t1) = roll(t, half) with the first half negated (folded into sin).
        return self._torch.addcmul(t * cos, t.roll(self.head_dim // 2, dims=-1), sin)

    def _mlp(self, x, block):
        gate, up = block.gate_up(self._norm(x, block.norms[1])).chunk(2, dim=-1)
        return x + block.down(block.act(gate) * up)

    def _logits(self, x):
        return self.head_linear(self._norm(x, self.final_norm)).float()

    def _step_logits(self, x):
        """A step's logits ``[n, vocab]`` in `scratch` (valid until the next step): no new buffers."""
        torch = self._torch
        n, vocab = x.shape[0], self.head_linear.weight.shape[0]
        columns = self.scratch.get("head", (vocab, n), self.dtype)
        torch.mm(self.head_linear.weight, self._norm(x, self.final_norm).t(), out=columns)
        rows = self.scratch.get("logits", (n, vocab), torch.float32)
        return rows.copy_(columns.t())

    def prefill(self, ids: Sequence[int], past=None):
        """Run a prompt once: ``(float32 logits of its last position, [(keys, values)] per layer)``.

        ``past``: the cache of a prefix of ``ids`` (from an earlier `prefill`), which is reused
        instead of recomputed; the prompt must extend it by at least one token.
        """
        torch = self._torch
        F = torch.nn.functional
        start = 0 if past is None else past[0][0].shape[1]
        tokens = torch.tensor([list(ids[start:])], device=self.device)
        length = tokens.shape[1]
        positions = torch.arange(start, len(ids), device=self.device)[None]
        x = self.embed(tokens)
        cos, sin = self._rope_tables(x, positions)
        cos, sin = cos[:, None], sin[:, None]  # over heads
        h, kv, d = self.heads, self.kv_heads, self.head_dim
        # Causal over the whole prompt; with a prefix, query t sees keys 0 .. start + t.
        mask = None
        if start:
            mask = torch.arange(len(ids), device=self.device)[None] <= positions[0][:, None]
        cache = []
        for index, block in enumerate(self.blocks):
            qkv = block.qkv(self._norm(x, block.norms[0])).view(1, length, h + 2 * kv, d)
            qkv = qkv.transpose(1, 2)
            qk = self._rope(qkv[:, : h + kv], cos, sin)
            q, k, v = qk[:, :h], qk[:, h:], qkv[:, h + kv :]
            if start:
                k = torch.cat([past[index][0][None], k], dim=2)
                v = torch.cat([past[index][1][None], v], dim=2)
            cache.append((k[0].contiguous(), v[0].contiguous()))
            if h > kv:
                k, v = k.repeat_interleave(h // kv, dim=1), v.repeat_interleave(h // kv, dim=1)
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, is_causal=mask is None, scale=self.scale
            )
            x = x + block.out(out.transpose(1, 2).reshape(1, length, h * d))
            x = self._mlp(x, block)
        return self._logits(x[:, -1])[0], cache

    def step(self, tokens: Sequence[int]):
        """Feed one token to each of row slots ``0 .. len(tokens)-1``; returns their float32 next-token logits.

        The logits live in the engine's `Scratch` and are overwritten by the next step.
        """
        torch = self._torch
        n = len(tokens)
        h, kv, d = self.heads, self.kv_heads, self.head_dim
        plan = self.cache.plan(n, h)
        x = self.embed(torch.tensor(tokens, device=self.device))  # [n, hidden]: one position per row
        cos, sin = self._rope_tables(x, plan.positions[:, None])  # [n, 1, d]: broadcast over heads
        for index, block in enumerate(self.blocks):
            qkv = block.qkv(self._norm(x, block.norms[0])).view(n, h + 2 * kv, d)
            qk = self._rope(qkv[:, : h + kv], cos, sin)
            # One query position: the query heads sharing a key/value head go along the query axis,
            # so grouped-query attention reads the shared keys without copying them per head.
            out = self.cache.attend(
                index, plan, qk[:, :h].reshape(n, kv, h // kv, d), qk[:, h:], qkv[:, h + kv :], self.scale
            )
            x = x + block.out(out.reshape(n, h * d))
            x = self._mlp(x, block)
        self.cache.advance(n)
        return self._step_logits(x)


MIN_SHARED_PREFIX = 16


def _common_prefix(sequences: Sequence[Sequence[int]]) -> list[int]:
    """The longest common prefix of the prompts, short of the shortest prompt's last token."""
    first = list(sequences[0])
    length = min(len(s) for s in sequences) - 1
    for other in sequences[1:]:
        same = 0
        while same < length and other[same] == first[same]:
            same += 1
        length = same
    return first[: max(length, 0)]


def decode_rows(
    model,
    encoded: Sequence[Sequence[int]],
    rows: Sequence[tuple[int, int]],
    *,
    temperature: float,
    top_p: float,
    max_new_tokens: int,
    slots: int,
    eos: set[int],
    seed: int | Sequence[int],
    on_done: Callable[[], None] | None = None,
    logprobs: list[list[float]] | None = None,
) -> list[list[int]]:
    """Sample the completion of every ``(prompt index, sample index)`` row; returns its tokens (eos included).

    Args:
        model: a model `unsupported_reason` accepts, in eval mode.
        encoded: token ids of every prompt (non-empty).
        rows: the rows to sample, ordered by prompt (a prompt's prefill is dropped after its last row).
        temperature, top_p, max_new_tokens: as in `SamplingSettings`.
        slots: sequences decoded together.
        eos: end-of-sequence token ids (a row stops after emitting one).
        seed: the run's seed; row ``(i, j)`` samples with `row_seed`\\ ``(seed, i, j)``. A sequence
            gives each prompt its own seed: row ``(i, j)`` then samples with ``row_seed(seed[i], 0, j)``,
            the generator it would have if prompt ``i`` were sampled alone with ``seed[i]``.
        on_done: called once per finished row (progress).
        logprobs: an empty list to receive, per row, each sampled token's log-probability under the
            distribution it was drawn from (`draw_tokens`); ``None`` skips computing them.

    Runs at torch's current thread count and never changes it: the caller fixes the count
    (`generate_completions` runs under ``fixed_threads(settings.threads)``), so the tokens do not
    depend on the machine's load. Runs under ``torch.inference_mode`` whatever the caller's mode.
    """
    import torch

    if (
        not torch.is_inference_mode_enabled()
    ):  # sampling needs no gradients (and its out= products refuse them)
        with torch.inference_mode():
            return decode_rows(
                model, encoded, rows, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens,
                slots=slots, eos=eos, seed=seed, on_done=on_done, logprobs=logprobs,
            )  # fmt: skip
    if not rows:
        return []
    engine = DecodeEngine(model, min(slots, len(rows)))
    slots = engine.slots
    device = engine.device
    pending = deque(range(len(rows)))
    left = {}
    for i, _ in rows:
        left[i] = left.get(i, 0) + 1
    prompts: dict[int, tuple[Any, Any]] = {}  # prefill of a prompt whose rows are still to start
    prompt_slot: dict[int, int] = {}  # prompt -> its keys/values' slot in the cache, while rows use them
    users: dict[int, int] = {}  # running rows per prompt
    engine.cache.reserve(max_new_tokens)
    prefix = None
    out: list[list[int]] = [[] for _ in rows]
    keep = logprobs is not None
    logps: list[list[float]] = [[] for _ in rows]
    running: list[int] = []  # row of each busy slot
    generators: list[Any] = []

    def release(i: int) -> None:
        """Free prompt ``i``'s cache slot once none of its rows runs or waits."""
        if not left[i] and not users.get(i) and i in prompt_slot:
            engine.cache.drop_prompt(prompt_slot.pop(i))

    def finish(row: int, ran: bool = True) -> None:
        if ran:
            i = rows[row][0]
            users[i] -= 1
            release(i)
        if on_done is not None:
            on_done()

    def start(slot: int) -> bool:
        """Start waiting rows until one keeps running in ``slot``; False when none is left."""
        while pending:
            row = pending.popleft()
            i, j = rows[row]
            if i not in prompts:
                prompts[i] = engine.prefill(encoded[i], prefix)
            logits, cache = prompts[i]
            generator = torch.Generator(device=device).manual_seed(
                row_seed(seed, i, j) if isinstance(seed, int) else row_seed(seed[i], 0, j)
            )
            tokens, chosen = draw_tokens(logits[None], temperature, top_p, [generator], logprobs=keep)
            token = tokens[0]
            out[row].append(token)
            if keep:
                logps[row].append(chosen[0])
            alive = token not in eos and max_new_tokens > 1
            if alive:
                if i not in prompt_slot:
                    prompt_slot[i] = engine.cache.add_prompt(cache, len(encoded[i]))
                engine.cache.start_row(slot, prompt_slot[i])
                users[i] = users.get(i, 0) + 1
            left[i] -= 1
            if not left[i]:
                del prompts[i]
            if not alive:
                finish(row, ran=False)
                release(i)
                continue
            if slot == len(running):
                running.append(row)
                generators.append(generator)
            else:
                running[slot], generators[slot] = row, generator
            return True
        return False

    # Evaluation prompts of one task share a long instruction prefix: prefill it once for all.
    shared = _common_prefix([encoded[i] for i in left])
    if len(shared) >= MIN_SHARED_PREFIX and len(left) > 1:
        prefix = engine.prefill(shared)[1]
    while len(running) < slots and start(len(running)):
        pass
    while running:
        logits = engine.step([out[row][-1] for row in running])
        tokens, chosen = draw_tokens(
            logits, temperature, top_p, generators, logprobs=keep, scratch=engine.scratch
        )
        done = []
        for slot, token in enumerate(tokens):
            row = running[slot]
            out[row].append(token)
            if keep:
                logps[row].append(chosen[slot])
            if token in eos or len(out[row]) >= max_new_tokens:
                done.append(slot)
        for slot in reversed(done):  # from the back: a slot moved down is never one still to handle
            finish(running[slot])
            if start(slot):
                continue
            last = len(running) - 1
            if slot != last:
                engine.cache.move_row(last, slot)
                running[slot], generators[slot] = running[last], generators[last]
            running.pop()
            generators.pop()
        while len(running) < slots and start(len(running)):
            pass
    if keep:
        logprobs.extend(logps)
    return out


def generate_decode(
    model, tokenizer, prompts, settings, ids, record_settings, progress, prompt_seeds=None, sampled=None
):
    """The ``"decode"`` engine behind `generate_completions`: records and stats like the ``generate`` path.

    ``prompt_seeds`` (one per prompt) replaces ``settings.seed`` with a seed per prompt (`decode_rows`);
    ``sampled``, an empty list, receives per prompt each completion's ``(token ids, log-probabilities)``.
    """
    import torch
    from tqdm.auto import tqdm

    eos = eos_ids(model, tokenizer)
    encoded = [prompt_ids(tokenizer, p) for p in prompts]
    if any(not e for e in encoded):
        raise ValueError(
            "the decode engine needs at least one prompt token per prompt; use engine='generate' (--engine generate)"
        )
    g = settings.num_samples
    rows = [(i, j) for i in range(len(prompts)) for j in range(g)]
    logps: list[list[float]] | None = [] if sampled is not None else None
    start = time.perf_counter()
    with (
        torch.inference_mode(),
        tqdm(total=len(rows), desc="generating", unit="completion", disable=not progress) as bar,
    ):
        tokens = decode_rows(
            model,
            encoded,
            rows,
            temperature=settings.temperature,
            top_p=settings.top_p,
            max_new_tokens=settings.max_new_tokens,
            slots=settings.batch_size,
            eos=eos,
            seed=settings.seed if prompt_seeds is None else [int(x) for x in prompt_seeds],
            on_done=lambda: bar.update(1),
            logprobs=logps,
        )
    seconds = time.perf_counter() - start
    texts: list[list[str]] = [[""] * g for _ in prompts]
    counts: list[list[int]] = [[0] * g for _ in prompts]
    for (i, j), kept in zip(rows, tokens):
        counts[i][j] = len(kept)
        texts[i][j] = tokenizer.decode(kept, skip_special_tokens=True)
    if sampled is not None:
        sampled.extend([[] for _ in prompts])
        for (i, _), kept, lp in zip(rows, tokens, logps):
            sampled[i].append((list(kept), list(lp)))
    records = [
        CompletionRecord(ids[i], prompts[i], texts[i], counts[i], dict(record_settings))
        for i in range(len(prompts))
    ]
    return records, GenerationStats(len(prompts), len(rows), sum(map(sum, counts)), seconds, "decode")
