"""Next-token sampling of the ``"decode"`` engine (`faithgrpo.eval.generation.decoding`), one seeded generator per row.

`next_token_scores` reproduces ``generate``'s warpers (temperature, then transformers' top-p rule);
`sample_tokens` draws one token per row from their softmax; `row_seed` gives sample ``j`` of prompt
``i`` a seed of its own, so a completion does not depend on the batch it ran in.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

__all__ = ["CHUNK_BYTES", "draw_tokens", "next_token_scores", "row_seed", "sample_tokens"]


def row_seed(seed: int, prompt_index: int, sample_index: int) -> int:
    """The seed of sample ``sample_index`` of prompt ``prompt_index`` (independent of batching)."""
    text = f"faithgrpo-decode:{int(seed)}:{prompt_index}:{sample_index}"
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") % (2**63)


def next_token_scores(logits, temperature: float, top_p: float):
    """``generate``'s sampling scores: ``logits / T`` then transformers' top-p filter (``-inf`` = removed).

    Args:
        logits: ``[rows, vocab]`` next-token logits.
        temperature: > 0.
        top_p: nucleus mass in (0, 1]; 1 keeps every token.

    Returns:
        ``[rows, vocab]`` float32 scores; at ``T = 1`` and ``top_p = 1`` that is float32 ``logits``
        itself (no copy: treat the result as read-only).
    """
    import torch

    scores = logits.float() if temperature == 1 else logits.float() / temperature  # x / 1 == x
    if top_p < 1.0:
        sorted_scores, order = torch.sort(scores, descending=False)
        cumulative = sorted_scores.softmax(dim=-1).cumsum(dim=-1)
        remove = cumulative <= (1 - top_p)
        remove[..., -1:] = False  # at least one token stays
        scores = scores.masked_fill(remove.scatter(1, order, remove), -float("inf"))
    return scores


# Rows sampled together at most: their float64 cumulative sums stay under this many bytes (170 rows
# of a 49,152-token vocabulary), so a large batch never holds a float64 copy of all its distributions.
CHUNK_BYTES = 64 * 2**20


def sample_tokens(
    logits, temperature: float, top_p: float, generators: Sequence[Any], *, chunk_rows: int | None = None
) -> list[int]:
    """One next token per row: greedy at temperature 0, else a draw from ``softmax(scores)``.

    The draw inverts the cumulative distribution at one uniform number from the row's generator
    (float64 sums, so a token keeps its probability to ~1e-16 however small it is). It draws from
    the same distribution as ``torch.multinomial``, which spends a random number per vocabulary
    entry (49,152 for SmolLM2) on each row: about four times slower at a 16-row step.

    Rows are processed ``chunk_rows`` at a time (default: as many as `CHUNK_BYTES` of float64 sums
    hold), in row order, so each row's uniform is the same draw from its generator however the batch
    is chunked, and the result does not depend on ``chunk_rows``.
    """
    return draw_tokens(logits, temperature, top_p, generators, chunk_rows=chunk_rows, logprobs=False)[0]


def draw_tokens(
    logits,
    temperature: float,
    top_p: float,
    generators: Sequence[Any],
    *,
    chunk_rows: int | None = None,
    logprobs: bool = True,
    scratch: Any = None,
) -> tuple[list[int], list[float] | None]:
    """`sample_tokens` and, with ``logprobs``, each drawn token's log-probability.

    ``scratch``: an object whose ``get(name, shape, dtype)`` returns reusable buffers (the decode
    engine's `~faithgrpo.eval.generation.decode_cache.Scratch`) for the probabilities and their sums; the
    values are the same with or without it.

    The log-probability is that of the distribution the token was drawn from: ``log softmax`` of
    the warped scores (temperature, top-p) when sampling, of the raw logits when greedy (what a
    rollout's ``logprobs`` report; the draw itself is exactly `sample_tokens`'s).
    """
    import torch

    if temperature == 0:
        tokens = logits.argmax(dim=-1)
        if not logprobs:
            return tokens.tolist(), None
        chosen = torch.log_softmax(logits.float(), dim=-1).gather(1, tokens[:, None])[:, 0]
        return tokens.tolist(), chosen.tolist()
    if chunk_rows is None:
        chunk_rows = max(1, CHUNK_BYTES // (8 * logits.shape[-1]))
    drawn: list[int] = []
    logps: list[float] = []
    for start in range(0, logits.shape[0], chunk_rows):
        stop = start + chunk_rows
        tokens, probs = _sample_rows(logits[start:stop], temperature, top_p, generators[start:stop], scratch)
        drawn += tokens.tolist()
        if logprobs:
            logps += probs.gather(1, tokens[:, None])[:, 0].log().tolist()
    return drawn, (logps if logprobs else None)


def _sample_rows(logits, temperature: float, top_p: float, generators: Sequence[Any], scratch: Any = None):
    """`sample_tokens` on one chunk of rows (temperature > 0): ``(tokens [rows], probabilities [rows, vocab])``."""
    import torch

    scores = next_token_scores(logits, temperature, top_p)
    shape = tuple(scores.shape)
    if scratch is None:
        probs = scores.softmax(dim=-1)
    else:  # the same softmax, into a reused buffer
        probs = torch.ops.aten._softmax.out(scores, -1, False, out=scratch.get("probs", shape, torch.float32))
    out = None if scratch is None else scratch.get("cumulative", shape, torch.float64)
    cumulative = torch.cumsum(
        probs, dim=-1, dtype=torch.float64, out=out
    )  # = probs.double().cumsum(), one copy fewer
    uniform = torch.stack(
        [torch.rand((), dtype=torch.float64, generator=g, device=g.device) for g in generators]
    )
    total = cumulative[:, -1:]
    # the first token whose cumulative mass exceeds u * total: zero-probability tokens add no width
    drawn = torch.searchsorted(cumulative, uniform.to(total.device)[:, None] * total, right=True)
    if bool((drawn == probs.shape[-1]).any()):  # u * total rounded up to total: the last live token
        drawn = torch.minimum(drawn, torch.searchsorted(cumulative, total))
    return drawn.squeeze(1), probs
