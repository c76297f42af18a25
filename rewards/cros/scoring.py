"""The reference side of CRoS: answer-span log-probabilities under a frozen model (CRoS step 3).

`CRoSReward` parses a completion and writes out its ordered and scrambled variants; `ReferenceScorer`
turns each variant into ℓ, the mean log-probability of its answer tokens given prompt and reasoning.
It owns the reference model and tokenizer and how they run:

- Tokens are taken in context, as the policy produced them. The prompt is tokenised on its own, the
  way TRL tokenises it for generation (conversational prompts rendered with the chat template and
  the trainer's ``chat_template_kwargs``), so the prompt/completion boundary is a token boundary as
  it is in generation. Each completion (the original and every scramble) is tokenised whole, and the
  answer tokens are the tokens whose character span overlaps the answer (offsets from a fast
  tokenizer; a slow one falls back to tokenising the completion up to and through the answer and
  taking the difference). So a SentencePiece/Metaspace tokenizer scores ``4`` where the policy
  wrote ``<answer>4``, not the ``▁4`` the answer gets when tokenised alone.
- The scored span is the answer *without its outer whitespace* (`scored_span`), and a token is
  scored when its character span overlaps that stripped span. So in ``<answer> 42 </answer>`` a
  token that joins the trailing space to the closing tag (``Ġ</``) or a whitespace-only token
  before or after the answer is not scored, while a token that carries the leading space into the
  answer (``Ġ42``) is: the closing tag's tokenisation never enters ℓ. An answer that is only
  whitespace has no scored tokens (Δ undefined, reason ``empty_answer``).
- ``max_length`` counts prompt + completion up to the end of the answer span. Over it, the prompt
  is cut from the left (a leading BOS is kept); when reasoning plus answer alone do not fit, Δ is
  undefined (reason ``too_long``). The answer is never cut.
- Cost: the (M+1)·G sequences of a group share their prompt, which runs once; its KV cache is repeated
  over the rows of each left-padded batch of completion suffixes, and ``logits_to_keep`` limits the
  vocabulary projection to the answer positions. Identical sequences are scored once.
"""

from __future__ import annotations

import copy
import inspect
import math
from collections import Counter
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import torch

from faithgrpo.text import prompt_text

__all__ = ["ReferenceScorer", "is_dtensor", "is_sharded", "scored_span"]


def is_dtensor(tensor: Any) -> bool:
    """Whether ``tensor`` is a ``torch.distributed.tensor.DTensor`` (an FSDP2 shard, for parameters)."""
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:  # pragma: no cover - torch builds without distributed
        return False
    return isinstance(tensor, DTensor)


def is_sharded(model: torch.nn.Module) -> bool:
    """Whether ``model``'s parameters are sharded across processes (FSDP2 ``DTensor`` or DeepSpeed ZeRO-3).

    A sharded model's forward is a collective: every process must run the same number of forwards.
    """
    return any(is_dtensor(p) or hasattr(p, "ds_id") for p in model.parameters())


def is_conversational(prompt: Any) -> bool:
    """Whether ``prompt`` is a chat (a non-empty list of message dicts), not plain text."""
    return isinstance(prompt, (list, tuple)) and bool(prompt) and all(isinstance(m, dict) for m in prompt)


# Whitespace characters the slow fallback steps back over to find the token boundary before the
# stripped answer (a leading-whitespace run longer than this is scored as the answer alone).
_MAX_LEADING_WHITESPACE_STEPS = 32


def scored_span(text: str, span: tuple[int, int]) -> tuple[int, int]:
    """The part of ``text[span[0]:span[1]]`` that CRoS scores: the answer without its outer whitespace.

    Whitespace is what `str.strip` removes. An answer that is only whitespace gives an empty span
    (``start == end``), which scores no tokens.

    Example:
        >>> scored_span("<answer> 42 </answer>", (8, 12))
        (9, 11)
    """
    start, end = span
    answer = text[start:end]
    stripped = answer.strip()
    if not stripped:
        return end, end
    start += len(answer) - len(answer.lstrip())
    return start, start + len(stripped)


@dataclass
class Pending:
    """One pair on its way through scoring."""

    row: int
    num_steps: int
    prompt_ids: list[int]
    texts: list[str]  # the completion through its answer (+ a short tail): ordered first, then scrambles
    spans: list[tuple[int, int]]  # the answer block's content span in each text (scored stripped)


@dataclass(frozen=True)
class _Sequence:
    """One scored sequence: prompt ids, completion-prefix ids, answer ids (the targets)."""

    prompt: tuple[int, ...]
    prefix: tuple[int, ...]
    answer: tuple[int, ...]

    def input_ids(self, cached_prompt: bool = False) -> list[int]:
        # The last answer token is only a target, never an input.
        head = [] if cached_prompt else list(self.prompt)
        return head + list(self.prefix) + list(self.answer[:-1])

    def input_length(self, cached_prompt: bool = False) -> int:
        return (0 if cached_prompt else len(self.prompt)) + len(self.prefix) + len(self.answer) - 1


class ReferenceScorer:
    """Scores completion variants with the reference model, batched; used by `CRoSReward`.

    Args:
        batch_size (`int`): sequences per forward pass.
        reuse_prompt_cache (`bool`): run each distinct prompt once and reuse its KV cache.
        warn (`Callable[[str, str], None]`): ``warn(key, message)`` logs ``message`` once per ``key``.
    """

    def __init__(self, batch_size: int, reuse_prompt_cache: bool, warn: Callable[[str, str], None]):
        self.batch_size = batch_size
        self.reuse_prompt_cache = reuse_prompt_cache
        self.model: torch.nn.Module | None = None
        self.tokenizer: Any = None
        #: Called before each scoring pass; its context makes ``model`` compute the reference.
        self.context_factory: Callable[[], Any] | None = None
        #: Forward passes run so far: ``prompt`` (cached prompts), ``cached_chunk``, ``chunk``, and
        #: ``sharded_filler`` (forwards a sharded model runs to match the other processes' count).
        self.forward_counts: Counter[str] = Counter()
        self._warn_once = warn
        self._forward_params: frozenset[str] = frozenset()
        self._forward_var_kw = False
        self._cache_usable = True

    def bind(self, model: torch.nn.Module, context_factory: Callable[[], Any] | None) -> None:
        """Score with ``model`` (its tokenizer is `tokenizer`) from now on."""
        self.model = model
        self.context_factory = context_factory
        self._cache_usable = True  # until this model's cache layers prove otherwise
        try:
            params = inspect.signature(model.forward).parameters
        except (TypeError, ValueError):
            params = {}
        self._forward_params = frozenset(params)
        self._forward_var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())

    # ------------------------------------------------------------------ tokenisation

    def effective_max_length(self, max_length: int | None) -> int | None:
        """The token budget: ``max_length``, else the model's context size, else ``None``."""
        if max_length is not None:
            return max_length
        config = getattr(self.model, "config", None)
        limit = getattr(config, "max_position_embeddings", None)
        return limit if isinstance(limit, int) and limit > 1 else None

    def prompt_ids(self, prompt: Any, render_kwargs: dict) -> list[int]:
        """Token ids of ``prompt`` as the policy saw it (``render_kwargs`` for the chat template)."""
        tok = self.tokenizer
        if is_conversational(prompt):
            if getattr(tok, "chat_template", None) or render_kwargs.get("chat_template"):
                # As TRL's generation renders it: template text, then tokens without added specials.
                text = tok.apply_chat_template(
                    list(prompt), tokenize=False, add_generation_prompt=True, **render_kwargs
                )
                return list(tok(text, add_special_tokens=False)["input_ids"])
            self._warn_once(
                "no_chat_template",
                "conversational prompt but the tokenizer has no chat template: joining message texts",
            )
        # Plain prompts are tokenised the way TRL's GRPOTrainer does (special tokens added).
        return list(tok(prompt_text(prompt))["input_ids"])

    def in_context_tokens(
        self, texts: list[str], spans: list[tuple[int, int]]
    ) -> list[tuple[list[int], list[int]]]:
        """``(context ids, answer ids)`` of each completion text, tokenised whole.

        The answer ids are the tokens whose character span overlaps the answer without its outer
        whitespace (`scored_span` of ``span``): a token straddling the stripped answer's start or
        end belongs to the answer, a token that only holds outer whitespace and/or the closing tag
        does not. The context ids are all tokens before the answer ids. An answer that is only
        whitespace gets no answer ids. Fast tokenizers give offsets for the whole batch in one call.
        """
        spans = [scored_span(text, span) for text, span in zip(texts, spans)]
        tok = self.tokenizer
        encoding = None
        if getattr(tok, "is_fast", False):
            try:
                encoding = tok(texts, add_special_tokens=False, return_offsets_mapping=True)
            except (NotImplementedError, TypeError, ValueError):
                encoding = None
        if encoding is None:
            return [self._in_context_tokens_slow(text, span) for text, span in zip(texts, spans)]
        out = []
        for ids, offsets, (start, end) in zip(encoding["input_ids"], encoding["offset_mapping"], spans):
            if start >= end:  # only whitespace: nothing to score
                out.append((list(ids), []))
                continue
            # The answer is near the end (only a short tail follows): scan back from the last token.
            k = len(offsets) - 1
            while k >= 0 and offsets[k][0] >= end:
                k -= 1
            last = k
            while k >= 0 and offsets[k][1] > start:
                k -= 1
            out.append((list(ids[: k + 1]), list(ids[k + 1 : last + 1])))
        return out

    def _in_context_tokens_slow(self, text: str, span: tuple[int, int]) -> tuple[list[int], list[int]]:
        """Fallback without offsets: tokenise the completion up to and through the answer.

        ``span`` is already the stripped answer (see `in_context_tokens`), so the same rule holds:
        the tokens through the answer end where the stripped answer ends (its trailing whitespace
        and the closing tag are not tokenised at all). When the tokens through the answer extend the
        tokens before its start, their difference is the answer in context. When they do not, the
        answer's first token carries leading whitespace with it (``Ġ42`` after ``<answer> ``), or
        the whitespace tokenises differently at the end of a text (``ĊĠ`` for ``\n `` where the
        whole completion has ``Ċ``, ``Ġ``, ``4``): the cut steps back one whitespace character at a
        time until the tokens before it are a prefix, and the leading tokens of the difference that
        decode to whitespace only go to the context. So the token overlapping the answer's start is
        scored and whitespace-only tokens before it are not. Otherwise (a merge across the answer's
        start) the answer is tokenised on its own after the context, with a warning.
        """
        tok = self.tokenizer
        start, end = span
        if start >= end:  # only whitespace: nothing to score
            return list(tok(text[:end], add_special_tokens=False)["input_ids"]), []
        through = list(tok(text[:end], add_special_tokens=False)["input_ids"])
        cut = start
        for _ in range(_MAX_LEADING_WHITESPACE_STEPS + 1):
            before = list(tok(text[:cut], add_special_tokens=False)["input_ids"])
            if len(through) > len(before) and through[: len(before)] == before:
                answer = through[len(before) :]
                lead = 0
                if cut < start:  # tokens of the skipped whitespace may lead the difference
                    while (
                        lead < len(answer) - 1
                        and not tok.decode(answer[: lead + 1], clean_up_tokenization_spaces=False).strip()
                    ):
                        lead += 1
                return before + answer[:lead], answer[lead:]
            if cut == 0 or not text[cut - 1].isspace():
                break
            cut -= 1
        before = list(tok(text[:start], add_special_tokens=False)["input_ids"])
        self._warn_once(
            "answer_merge",
            "the tokenizer merges the answer with the text before it and gives no offsets: "
            "scoring the answer tokenised on its own",
        )
        return before, list(tok(text[start:end], add_special_tokens=False)["input_ids"])

    # ------------------------------------------------------------------ scoring

    def score(
        self, pending: list[Pending], max_length: int | None
    ) -> list[tuple[list[float] | None, bool, str | None]]:
        """ℓ of every variant of each pending completion, in order.

        Returns:
            One ``(logprobs, prompt_truncated, reason)`` per item: ``logprobs`` holds ℓ of its
            texts (ordered first), or is ``None`` with ``reason`` ``"empty_answer"`` or ``"too_long"``.
        """
        tok = self.tokenizer
        # One tokenizer call for every variant of every completion (fast tokenizers batch in Rust).
        pieces = self.in_context_tokens(
            [t for item in pending for t in item.texts], [sp for item in pending for sp in item.spans]
        )
        max_length = self.effective_max_length(max_length)
        bos = getattr(tok, "bos_token_id", None)

        sequences: dict[_Sequence, int] = {}
        plans: list[tuple[list[int] | None, bool, str | None]] = []
        cursor = 0
        for item in pending:
            variants = pieces[cursor : cursor + len(item.texts)]
            cursor += len(item.texts)
            if not all(answer for _, answer in variants):
                plans.append((None, False, "empty_answer"))
                continue
            prompt = item.prompt_ids
            truncated = False
            if max_length is not None:
                tail = max(len(p) + len(a) for p, a in variants)
                if tail > max_length:
                    plans.append((None, False, "too_long"))
                    continue
                budget = max_length - tail
                if len(prompt) > budget:
                    # Same cut for every variant of this completion, so they see the same prompt.
                    keep_bos = budget > 0 and bos is not None and prompt[0] == bos
                    tail_len = budget - 1 if keep_bos else budget
                    prompt = ([bos] if keep_bos else []) + (prompt[-tail_len:] if tail_len > 0 else [])
                    truncated = True
            prompt_key = tuple(prompt)
            index_list = []
            for prefix, answer in variants:
                key = _Sequence(prompt_key, tuple(prefix), tuple(answer))
                index_list.append(sequences.setdefault(key, len(sequences)))
            plans.append((index_list, truncated, None))

        # A sharded model runs even with nothing to score: its forwards are collectives (see below).
        logprobs = self._sequence_logprobs(list(sequences)) if sequences or self.is_sharded() else []
        return [
            (None if index_list is None else [logprobs[i] for i in index_list], truncated, reason)
            for index_list, truncated, reason in plans
        ]

    def _sequence_logprobs(self, sequences: list[_Sequence]) -> list[float]:
        """Mean log-probability of each answer given prompt and completion prefix, batched.

        The model input is ``prompt + prefix + answer[:-1]`` (the last answer token is only ever a
        target), left padded so every answer ends at the last position: ``logits_to_keep`` then
        materialises logits for the answer positions only. With ``reuse_prompt_cache``, sequences
        sharing a prompt run it once; its KV cache is repeated over the batch rows of the suffixes.
        """
        model = self.model
        results = [math.nan] * len(sequences)
        if self.is_sharded():
            self._sharded_logprobs(sequences, results)
            return results
        by_prompt: dict[tuple[int, ...], list[int]] = {}
        for i, seq in enumerate(sequences):
            by_prompt.setdefault(seq.prompt, []).append(i)
        was_training = model.training
        context = self.context_factory() if self.context_factory is not None else nullcontext()
        try:
            model.eval()
            with context, torch.inference_mode():
                plain: list[int] = []
                for prompt, members in by_prompt.items():
                    cache = self._prompt_cache(prompt) if len(members) > 1 else None
                    if cache is None:
                        plain.extend(members)
                        continue
                    self._run_chunks(sequences, members, results, cache=cache, prompt_len=len(prompt))
                self._run_chunks(sequences, plain, results)
        finally:
            if was_training:
                model.train()
        return results

    def is_sharded(self) -> bool:
        """Whether the bound model is sharded across processes (see :func:`is_sharded`)."""
        return self.model is not None and is_sharded(self.model)

    def _sharded_logprobs(self, sequences: list[_Sequence], results: list[float]) -> None:
        """`_sequence_logprobs` for a model sharded across processes (FSDP2, DeepSpeed ZeRO-3).

        Each forward of a sharded model gathers every layer's parameters from all processes, so all
        processes must run the same number of forwards, whatever their share of the batch (rows
        gated out, undefined, deduplicated). The count is agreed first (an all-reduce of each
        process's chunk count, max), and a process with fewer chunks runs one-token forwards to
        match. The prompt KV cache is not used here: whether it applies is only known after a
        forward, which would make the count depend on the data.
        """
        import torch.distributed as dist

        model = self.model
        order = sorted(range(len(sequences)), key=lambda i: -sequences[i].input_length())
        chunks = [order[k : k + self.batch_size] for k in range(0, len(order), self.batch_size)]
        count = torch.tensor([len(chunks)], device=self._device())
        if dist.is_available() and dist.is_initialized():
            dist.all_reduce(count, op=dist.ReduceOp.MAX)
        was_training = model.training
        context = self.context_factory() if self.context_factory is not None else nullcontext()
        try:
            model.eval()
            with context, torch.inference_mode():
                for chunk in chunks:
                    values = self._chunk_logprobs([sequences[i] for i in chunk], None, 0)
                    for i, value in zip(chunk, values):
                        results[i] = value
                filler = _Sequence((), (self._pad_id(),), (self._pad_id(),))  # one input token
                for _ in range(int(count.item()) - len(chunks)):
                    self._chunk_logprobs([filler], None, 0)
                    self.forward_counts["chunk"] -= 1
                    self.forward_counts["sharded_filler"] += 1
        finally:
            if was_training:
                model.train()

    def _pad_id(self) -> int:
        tok = self.tokenizer
        return next((t for t in (tok.pad_token_id, tok.eos_token_id) if t is not None), 0)

    def _run_chunks(
        self,
        sequences: list[_Sequence],
        members: list[int],
        results: list[float],
        cache: Any = None,
        prompt_len: int = 0,
    ) -> None:
        # Longest first, so each chunk holds sequences of similar length (little padding).
        order = sorted(members, key=lambda i: -sequences[i].input_length(cached_prompt=cache is not None))
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            values = self._chunk_logprobs([sequences[i] for i in chunk], cache, prompt_len)
            for i, value in zip(chunk, values):
                results[i] = value

    def _accepts(self, name: str) -> bool:
        return name in self._forward_params or self._forward_var_kw

    def _cache_kwarg(self) -> str | None:
        """The forward argument that takes a KV cache (``cache`` in recent transformers)."""
        if not (self.reuse_prompt_cache and self._cache_usable):
            return None
        get_base = getattr(self.model, "get_base_model", None)  # PEFT wrappers forward **kwargs
        base = get_base() if callable(get_base) else self.model
        try:
            params = inspect.signature(base.forward).parameters
        except (TypeError, ValueError):
            return None
        return next((name for name in ("cache", "past_key_values") if name in params), None)

    def _prompt_cache(self, prompt: tuple[int, ...]) -> Any:
        """KV cache of ``prompt`` (batch of one), or ``None`` when the model cannot reuse it."""
        name = self._cache_kwarg()
        if name is None or not prompt:
            return None
        try:
            from transformers.cache_utils import DynamicLayer
        except ImportError:  # transformers without layered caches
            self._cache_usable = False
            return None

        input_ids = torch.tensor([prompt], device=self._device())
        kwargs: dict[str, Any] = {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids)}
        if self._accepts("logits_to_keep"):
            kwargs["logits_to_keep"] = 1
        output = self.model(**kwargs, use_cache=True)
        cache = getattr(output, name, None)
        layers = getattr(cache, "layers", None)
        # Only plain full-attention layers take left-padded suffixes after the cached prompt
        # exactly; sliding-window and linear-attention caches go the uncached way.
        if not layers or any(type(layer) is not DynamicLayer for layer in layers):
            self._warn_once(
                "no_prompt_cache", "reference cache layers not reusable: scoring without prompt cache"
            )
            self._cache_usable = False
            return None
        self.forward_counts["prompt"] += 1
        return cache

    def _device(self) -> torch.device:
        try:
            return next(self.model.parameters()).device
        except StopIteration:
            return torch.device("cpu")

    def _chunk_logprobs(self, chunk: list[_Sequence], cache: Any, prompt_len: int) -> list[float]:
        device = self._device()
        pad = self._pad_id()
        rows = [seq.input_ids(cached_prompt=cache is not None) for seq in chunk]
        width = max(len(r) for r in rows)
        keep = max(len(seq.answer) for seq in chunk)
        input_ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows], device=device)
        mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows], device=device)
        # Left padding: positions count real tokens only (absolute-position models need it).
        position_ids = (mask.cumsum(-1) - 1).clamp(min=0) + prompt_len
        kwargs: dict[str, Any] = {"input_ids": input_ids}
        if cache is not None:
            batch_cache = copy.deepcopy(cache)
            batch_cache.batch_repeat_interleave(len(chunk))
            kwargs[self._cache_kwarg()] = batch_cache
            kwargs["use_cache"] = True
            # The mask spans cached prompt + suffix; the suffix padding sits between them.
            mask = torch.cat([mask.new_ones(len(chunk), prompt_len), mask], dim=1)
            self.forward_counts["cached_chunk"] += 1
        else:
            if self._accepts("use_cache"):
                kwargs["use_cache"] = False
            self.forward_counts["chunk"] += 1
        kwargs["attention_mask"] = mask
        if self._accepts("position_ids"):
            kwargs["position_ids"] = position_ids
        if self._accepts("logits_to_keep"):
            kwargs["logits_to_keep"] = keep
        output = self.model(**kwargs)
        logits = output.logits if hasattr(output, "logits") else output[0]
        # A model that ignores logits_to_keep returns every position: keep the answer window.
        logits = logits[:, -keep:]
        sums = []
        for r, seq in enumerate(chunk):
            span = logits[r, keep - len(seq.answer) :]
            span = span if span.dtype == torch.float64 else span.float()  # bf16/fp16 logits: upcast
            target = torch.tensor(seq.answer, device=span.device).unsqueeze(-1)
            token_logprobs = span.gather(-1, target).squeeze(-1) - torch.logsumexp(span, dim=-1)
            sums.append(token_logprobs.mean())
        # One device->host transfer per chunk.
        return torch.stack(sums).double().cpu().tolist()
