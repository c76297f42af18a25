"""Answer-token log-probabilities under a causal LM, in left-padded batches (shared by the evaluators).

`score_rows` scores ``context + answer`` rows with ``logits_to_keep`` so only the scored window's
logits are materialised; `decode_rows` greedy-decodes a forced answer after each context. On top of
them: `completion_logprobs` (mean log-prob of a whole completion) and `answer_logprobs` (mean log-prob
of the last ``<answer>`` content, in context: the best-of-K confidence selector).
"""

from __future__ import annotations

import contextlib
import inspect
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ScoredRow",
    "answer_logprobs",
    "completion_logprobs",
    "decode_rows",
    "prompt_ids",
    "sampled_answer_logprob",
    "score_rows",
    "scoring_mode",
]

ANSWER_CLOSE = "</answer>"


@dataclass
class ScoredRow:
    """One sequence to score: ``context`` then the ``answer`` (+ ``close``) tokens whose log-probs are summed."""

    sample: int
    k: int
    context: list[int]
    answer: list[int]
    close: list[int]
    logprob_sum: float = math.nan
    greedy_match: bool = False
    decoded: str | None = None


def forward_params(model) -> tuple[frozenset[str], bool]:
    try:
        parameters = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return frozenset(), True
    var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    return frozenset(parameters), var_kw


def prompt_ids(tokenizer, prompt: Any) -> list[int]:
    from faithgrpo.text import prompt_text

    conversational = isinstance(prompt, (list, tuple)) and prompt and all(isinstance(m, dict) for m in prompt)
    if conversational and getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(list(prompt), tokenize=False, add_generation_prompt=True)
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])
    return list(tokenizer(prompt_text(prompt))["input_ids"])


def score_rows(model, tokenizer, rows: list[ScoredRow], batch_size: int, progress: bool) -> None:
    """Fill ``logprob_sum`` and ``greedy_match`` of every row, in left-padded batched passes.

    The input is ``context + (answer + close)[:-1]``; left padding puts every scored token at the end,
    so ``logits_to_keep`` materialises logits for the scored window only.
    """
    import torch
    from tqdm.auto import tqdm

    device = next(model.parameters()).device
    pad = next((t for t in (tokenizer.pad_token_id, tokenizer.eos_token_id) if t is not None), 0)
    accepts, var_kw = forward_params(model)
    order = sorted(range(len(rows)), key=lambda i: -(len(rows[i].context) + len(rows[i].answer)))
    chunks = [order[s : s + batch_size] for s in range(0, len(order), batch_size)]
    for chunk in tqdm(chunks, desc="scoring truncations", unit="batch", disable=not progress or not chunks):
        targets = [rows[i].answer + rows[i].close for i in chunk]
        # The last target is only ever predicted, never an input.
        seqs = [rows[i].context + target[:-1] for i, target in zip(chunk, targets)]
        width = max(len(s) for s in seqs)
        keep = max(len(t) for t in targets)
        input_ids = torch.tensor([[pad] * (width - len(s)) + s for s in seqs], device=device)
        attention = torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in seqs], device=device)
        kwargs: dict[str, Any] = {"input_ids": input_ids, "attention_mask": attention}
        if "position_ids" in accepts or var_kw:
            kwargs["position_ids"] = (attention.cumsum(-1) - 1).clamp(min=0)
        if "logits_to_keep" in accepts or var_kw:
            kwargs["logits_to_keep"] = keep
        if "use_cache" in accepts or var_kw:
            kwargs["use_cache"] = False
        output = model(**kwargs)
        logits = (output.logits if hasattr(output, "logits") else output[0])[:, -keep:].float()
        for r, i in enumerate(chunk):
            target = targets[r]
            window = logits[r, keep - len(target) :]
            ids = torch.tensor(target, device=window.device)
            token_logprobs = window.gather(-1, ids.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(
                window, dim=-1
            )
            n_answer = len(rows[i].answer)
            rows[i].logprob_sum = float(token_logprobs[:n_answer].sum())
            rows[i].greedy_match = bool((window.argmax(-1) == ids).all())


def decode_rows(
    model, tokenizer, rows: list[ScoredRow], batch_size: int, max_answer_tokens: int, progress: bool
) -> None:
    """Greedy-decode the forced answer after each row's context; cut at ``</answer>``."""
    import torch
    from tqdm.auto import tqdm

    device = next(model.parameters()).device
    pad = next((t for t in (tokenizer.pad_token_id, tokenizer.eos_token_id) if t is not None), 0)
    eos = tokenizer.eos_token_id
    order = sorted(range(len(rows)), key=lambda i: -len(rows[i].context))
    chunks = [order[s : s + batch_size] for s in range(0, len(order), batch_size)]
    for chunk in tqdm(chunks, desc="forcing answers", unit="batch", disable=not progress or not chunks):
        contexts = [rows[i].context for i in chunk]
        width = max(len(c) for c in contexts)
        input_ids = torch.tensor([[pad] * (width - len(c)) + c for c in contexts], device=device)
        attention = torch.tensor([[0] * (width - len(c)) + [1] * len(c) for c in contexts], device=device)
        output = model.generate(
            input_ids=input_ids,
            attention_mask=attention,
            max_new_tokens=max_answer_tokens,
            do_sample=False,
            pad_token_id=pad,
            eos_token_id=eos,
        )
        for r, i in enumerate(chunk):
            text = tokenizer.decode(output[r, width:].tolist(), skip_special_tokens=True)
            rows[i].decoded = text.split(ANSWER_CLOSE, 1)[0].strip()


def completion_logprobs(
    model, tokenizer, pairs: Iterable[tuple[Any, Any]], *, batch_size: int = 16, progress: bool = True
) -> list[float | None]:
    """Mean token log-probability of each completion given its prompt (a confidence score).

    The log-probability-based best-of-K baseline picks the completion the model was most sure of.
    Prompt and completion are tokenised separately (the completion's tokens are the same whatever
    the prompt); an empty completion gives ``None``.

    Args:
        model: the causal LM that generated the completions.
        tokenizer: its tokenizer.
        pairs: ``(prompt, completion)`` pairs.
        batch_size: sequences per forward pass.
        progress: tqdm progress bar.

    Returns:
        `list[float | None]`: one value per pair (≤ 0), ``None`` when undefined.

    Example:
        >>> from faithgrpo.testing import tiny_causal_lm
        >>> model, tokenizer = tiny_causal_lm("llama")
        >>> [v < 0 for v in completion_logprobs(model, tokenizer, [("Q?", "yes")], progress=False)]
        [True]
    """
    from faithgrpo.text import completion_text

    rows: list[ScoredRow] = []
    cache: dict[str, list[int]] = {}
    out: list[float | None] = []
    for index, (prompt, completion) in enumerate(pairs):
        ids = list(tokenizer(completion_text(completion), add_special_tokens=False)["input_ids"])
        out.append(None)
        if not ids:
            continue
        key = repr(prompt)
        if key not in cache:
            cache[key] = prompt_ids(tokenizer, prompt)
        rows.append(ScoredRow(index, 0, cache[key], ids, []))
    return mean_logprobs(model, tokenizer, rows, out, batch_size, progress)


@contextlib.contextmanager
def scoring_mode(model):
    """Eval mode and ``torch.inference_mode`` while scoring; the model's train/eval mode is restored after."""
    import torch

    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            yield
    finally:
        if was_training:
            model.train()


def mean_logprobs(
    model, tokenizer, rows: list[ScoredRow], out: list, batch_size: int, progress: bool
) -> list:
    """Score ``rows`` in eval mode and write each row's mean token log-probability into ``out[row.sample]``."""
    if rows:
        with scoring_mode(model):
            score_rows(model, tokenizer, rows, batch_size, progress)
    for row in rows:
        value = row.logprob_sum / len(row.answer)
        out[row.sample] = value if math.isfinite(value) else None
    return out


def _answer_span(text: str) -> tuple[int, int] | None:
    """Character span of the last ``<answer>`` content, whitespace trimmed; ``None`` when empty or absent."""
    from faithgrpo.text import ANSWER_CLOSE as CLOSE
    from faithgrpo.text import ANSWER_OPEN as OPEN

    close = text.rfind(CLOSE)
    open_ = text.rfind(OPEN, 0, close) if close >= 0 else -1
    if open_ < 0:
        return None
    start, end = open_ + len(OPEN), close
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if start == end:
        return None
    return start, end


def answer_split(tokenizer, text: str) -> tuple[list[int], list[int]] | None:
    """Token ids of ``text`` before its last ``<answer>`` content and of that content, in context.

    The completion is tokenised whole and split by character offsets, so a tokenizer that merges
    across the boundary scores the tokens the policy produced; slow tokenizers (no offsets) fall
    back to tokenising the two pieces separately.
    """
    span = _answer_span(text)
    if span is None:
        return None
    start, end = span
    if getattr(tokenizer, "is_fast", False):
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        ids, offsets = list(enc["input_ids"]), list(enc["offset_mapping"])
        cut = next((i for i, (a, b) in enumerate(offsets) if b > start), len(ids))
        stop = next((i for i, (a, b) in enumerate(offsets) if i >= cut and a >= end), len(ids))
        return (ids[:cut], ids[cut:stop]) if cut < stop else None
    before = list(tokenizer(text[:start], add_special_tokens=False)["input_ids"])
    answer = list(tokenizer(text[start:end], add_special_tokens=False)["input_ids"])
    return (before, answer) if answer else None


def answer_logprobs(
    model, tokenizer, pairs: Iterable[tuple[Any, Any]], *, batch_size: int = 16, progress: bool = True
) -> list[float | None]:
    """Mean log-probability of the tokens of each completion's last ``<answer>`` content (confidence).

    The best-of-K confidence selector picks the answer the model was surest of; the reasoning's
    tokens do not count. A token that straddles the start of the answer counts as answer.

    Args:
        model: the causal LM that generated the completions.
        tokenizer: its tokenizer.
        pairs: ``(prompt, completion)`` pairs.
        batch_size: sequences per forward pass.
        progress: tqdm progress bar.

    Returns:
        `list[float | None]`: one value per pair (≤ 0); ``None`` without a non-empty answer.

    Example:
        >>> from faithgrpo.testing import tiny_causal_lm
        >>> model, tokenizer = tiny_causal_lm("llama")
        >>> answer_logprobs(model, tokenizer, [("Q?", "<think>a</think><answer>1</answer>"), ("Q?", "none")],
        ...                 progress=False)[1] is None
        True
    """
    from faithgrpo.text import completion_text

    rows: list[ScoredRow] = []
    prompt_cache: dict[str, list[int]] = {}
    out: list[float | None] = []
    for index, (prompt, completion) in enumerate(pairs):
        out.append(None)
        split = answer_split(tokenizer, completion_text(completion))
        if split is None:
            continue
        key = repr(prompt)
        if key not in prompt_cache:
            prompt_cache[key] = prompt_ids(tokenizer, prompt)
        rows.append(ScoredRow(index, 0, prompt_cache[key] + split[0], split[1], []))
    return mean_logprobs(model, tokenizer, rows, out, batch_size, progress)


def sampled_answer_logprob(tokenizer, token_ids: list[int], logprobs: list[float]) -> float | None:
    """`answer_logprobs`'s confidence from the sampling itself: the mean log-probability of the
    generated tokens that make up the last ``<answer>`` content (a token straddling its start counts).

    Equal to `answer_logprobs` where the policy sampled at temperature 1 without top-p (the sampling
    distribution is the model's) and the completion re-tokenises to the tokens it was sampled as;
    it reads the tokens the policy produced, with no forward pass. ``None`` without a non-empty answer.

    Example:
        >>> from faithgrpo.testing import tiny_tokenizer
        >>> tok = tiny_tokenizer()
        >>> ids = tok("<answer>ab</answer>", add_special_tokens=False)["input_ids"]
        >>> sampled_answer_logprob(tok, ids, [-1.0] * len(ids)), sampled_answer_logprob(tok, ids[:2], [-1.0] * 2)
        (-1.0, None)
    """
    from faithgrpo.text import ANSWER_CLOSE as CLOSE
    from faithgrpo.text import ANSWER_OPEN as OPEN

    text = tokenizer.decode(token_ids, skip_special_tokens=True)
    close = text.rfind(CLOSE)
    open_ = text.rfind(OPEN, 0, close) if close >= 0 else -1
    if open_ < 0:
        return None
    start, end = open_ + len(OPEN), close
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if start == end:
        return None
    # character end of each token's text: the length of the decoded prefix through it
    ends = [
        len(tokenizer.decode(token_ids[: k + 1], skip_special_tokens=True)) for k in range(len(token_ids))
    ]
    chosen = [lp for k, lp in enumerate(logprobs) if ends[k] > start and (ends[k - 1] if k else 0) < end]
    if not chosen:
        return None
    value = sum(chosen) / len(chosen)
    return value if math.isfinite(value) else None
