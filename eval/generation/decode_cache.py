"""Keys and values of the decode loop (`faithgrpo.eval.generation.decoding`), each prompt's stored once.

The G samples of a prompt decode side by side, and all of them attend to the same prompt keys and
values. On a CPU a decode step's attention is bound by reading those from memory, so the cache
keeps each prompt's keys and values once, in a *prompt slot*, and each row's generated tokens in a
*row slot* of its own; a step reads every prompt in the batch once, however many of its samples
are running. At 16 rows of 4 prompts (G = 4) with ~450-token prompts, attention reads about a
third of what a copy per row needs.

Attention of one step (`PromptSharedCache.attend`), per layer, for queries ``q [n, kv, g, d]``
(``g`` query heads share each key/value head):

1. the queries of each prompt's rows are laid side by side, ``[P, kv, M * g, d]`` (``P`` prompt
   slots in use, ``M`` the most rows of one prompt), and one batched matmul scores them against
   their prompt's keys; each row's own keys are scored in a second matmul;
2. the two score blocks of a row are joined and normalised by one softmax over the row's whole
   sequence (masked beyond each prompt's and each row's length), so the weights are those of
   attention over the row's concatenated sequence;
3. the weights multiply the prompt's values (laid out by prompt again) and the row's values, and
   the two sums are added.

The result equals attention over each row's own copy of its whole sequence up to float rounding
(the sums run in another order). Keys are stored transposed (``[.., d, tokens]``), so scoring a
slice of them is a plain batched matmul.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["PromptSharedCache", "Scratch", "StepPlan"]


@dataclass
class StepPlan:
    """What every layer of one step needs, computed once per step (see `PromptSharedCache.plan`).

    Attributes:
        rows: ``arange(n)``, the row slots of the step.
        grid: For row ``r`` and key/value head ``j``, the index of its queries in the ``queries``
            buffer viewed as ``[P * kv * M, g, d]`` (``[n * kv]``, row-major; the same for
            ``weights``): ``(prompt slot * kv + j) * M + rank``, where rank counts the step's
            earlier rows of the same prompt.
        written: Where each row's new key/value goes in its row slot (its generated length, ``[n]``).
        positions: Each row's position in its sequence (prompt length + generated length, ``[n]``).
        mask: ``[n, 1, 1, prompt_span + own_span]``: 0 where a row attends, ``-inf`` elsewhere.
        prompt_span: Longest prompt among the step's prompt slots.
        own_span: Longest row sequence of the step, the new token included.
        queries: ``[P, kv, M, g, d]`` buffer the queries are laid out in, by prompt.
        weights: ``[P, kv, M, g, prompt_span]`` buffer the prompt attention weights are laid out in.
    """

    rows: Any
    grid: Any
    written: Any
    positions: Any
    mask: Any
    prompt_span: int
    own_span: int
    queries: Any
    weights: Any


class PromptSharedCache:
    """Keys/values of up to ``slots`` prompts and of ``slots`` rows' generated tokens.

    A row slot refers to one prompt slot (`start_row`); `plan` and `attend` run a step over row
    slots ``0 .. n-1``. Buffers grow on demand (`add_prompt`: prompt slots and length; `reserve`: the
    tokens a row may generate); unused positions stay zero, so masked scores stay finite.
    """

    def __init__(self, layers: int, slots: int, kv_heads: int, head_dim: int, dtype, device):
        import torch

        self._torch = torch
        self.layers, self.slots, self.kv_heads, self.head_dim = layers, slots, kv_heads, head_dim
        self.dtype, self.device = dtype, device
        self.prompt_keys: list[Any] = []  # per layer: [prompt slots, kv, d, prompt capacity]
        self.prompt_values: list[Any] = []  # per layer: [prompt slots, kv, prompt capacity, d]
        self.row_keys: list[Any] = []  # per layer: [slots, kv, d, row capacity]
        self.row_values: list[Any] = []  # per layer: [slots, kv, row capacity, d]
        self.prompt_capacity = self.row_capacity = 0
        self.prompt_lengths: list[int] = []  # per prompt slot in use or freed (0 = free)
        self.row_prompt = [0] * slots
        self.row_lengths = [0] * slots  # generated tokens cached per row slot

    # -- storage -------------------------------------------------------------------------------

    def _grown(self, keys: list, values: list, count: int, tokens: int) -> int:
        """Reallocate ``keys``/``values`` (per layer) to ``count`` slots of ``tokens`` (rounded up to
        64) positions, keeping what they hold; returns the new position capacity."""
        torch = self._torch
        tokens = -(-tokens // 64) * 64
        kv, d = self.kv_heads, self.head_dim
        for index in range(self.layers):
            k = torch.zeros((count, kv, d, tokens), dtype=self.dtype, device=self.device)
            v = torch.zeros((count, kv, tokens, d), dtype=self.dtype, device=self.device)
            if index < len(keys):
                old_count, _, _, old_tokens = keys[index].shape
                k[:old_count, ..., :old_tokens] = keys[index]
                v[:old_count, :, :old_tokens] = values[index]
                keys[index], values[index] = k, v
            else:
                keys.append(k)
                values.append(v)
        return tokens

    def reserve(self, tokens: int) -> None:
        """Make every row slot hold ``tokens`` generated tokens."""
        if tokens > self.row_capacity:
            self.row_capacity = self._grown(self.row_keys, self.row_values, self.slots, tokens)

    def add_prompt(self, cache: Sequence[tuple[Any, Any]], length: int) -> int:
        """Store a prefilled prompt (``[(keys [kv, length, d], values)]`` per layer); returns its slot."""
        free = [p for p, used in enumerate(self.prompt_lengths) if not used]
        if free:
            slot = free[0]  # the lowest free slot: the prompts a step reads stay packed at the front
        elif len(self.prompt_lengths) < self.slots:
            slot = len(self.prompt_lengths)
            self.prompt_lengths.append(0)
        else:
            raise RuntimeError(f"all {self.slots} prompt slots are in use")
        allocated = self.prompt_keys[0].shape[0] if self.prompt_keys else 0
        # prompt slots are allocated as needed, doubling (about slots / G of them are in use at once)
        count = allocated if slot < allocated else min(self.slots, max(2 * allocated, slot + 1))
        if length > self.prompt_capacity or count > allocated:
            tokens = max(length, self.prompt_capacity)
            self.prompt_capacity = self._grown(self.prompt_keys, self.prompt_values, count, tokens)
        for index, (k, v) in enumerate(cache):
            self.prompt_keys[index][slot, :, :, :length] = k.transpose(-1, -2)
            self.prompt_values[index][slot, :, :length] = v
        self.prompt_lengths[slot] = length
        return slot

    def drop_prompt(self, slot: int) -> None:
        """Free a prompt slot (no running row may refer to it any more)."""
        self.prompt_lengths[slot] = 0

    def start_row(self, row: int, prompt: int) -> None:
        """Begin a sequence in row slot ``row`` after the prompt in prompt slot ``prompt``."""
        self.row_prompt[row], self.row_lengths[row] = prompt, 0

    def move_row(self, source: int, target: int) -> None:
        """Copy row slot ``source`` onto row slot ``target``."""
        length = self.row_lengths[source]
        for index in range(self.layers):
            self.row_keys[index][target, ..., :length] = self.row_keys[index][source, ..., :length]
            self.row_values[index][target, :, :length] = self.row_values[index][source, :, :length]
        self.row_prompt[target], self.row_lengths[target] = self.row_prompt[source], length

    def advance(self, n: int) -> None:
        """Count the token just cached in each of row slots ``0 .. n-1``."""
        for row in range(n):
            self.row_lengths[row] += 1

    # -- one step ------------------------------------------------------------------------------

    def plan(self, n: int, query_heads: int) -> StepPlan:
        """Index tensors, mask and layout buffers of a step over row slots ``0 .. n-1``."""
        torch = self._torch
        prompt = self.row_prompt[:n]
        rank, seen = [], {}
        for p in prompt:
            rank.append(seen.get(p, 0))
            seen[p] = rank[-1] + 1
        used, most = max(prompt) + 1, max(seen.values())
        lengths = [self.prompt_lengths[p] for p in prompt]
        written = self.row_lengths[:n]
        prompt_span, own_span = max(lengths), max(written) + 1
        device = self.device
        index = torch.arange(prompt_span + own_span, device=device)[None]
        prompt_length = torch.tensor(lengths, device=device)[:, None]
        written_t = torch.tensor(written, device=device)
        # row r attends to its prompt's positions < its length and to its own positions 0 .. written[r]
        attends = (index < prompt_length) | (
            (index >= prompt_span) & (index - prompt_span <= written_t[:, None])
        )
        mask = torch.zeros(attends.shape, device=device).masked_fill_(~attends, float("-inf"))
        g, kv, d = query_heads // self.kv_heads, self.kv_heads, self.head_dim
        prompt_t, rank_t = torch.tensor(prompt, device=device), torch.tensor(rank, device=device)
        heads = torch.arange(kv, device=device)
        return StepPlan(
            rows=torch.arange(n, device=device),
            grid=((prompt_t[:, None] * kv + heads) * most + rank_t[:, None]).reshape(-1),
            written=written_t,
            positions=prompt_length[:, 0] + written_t,
            mask=mask[:, None, None],
            prompt_span=prompt_span,
            own_span=own_span,
            queries=torch.zeros((used, kv, most, g, d), dtype=self.dtype, device=device),
            weights=torch.zeros((used, kv, most, g, prompt_span), dtype=self.dtype, device=device),
        )

    def attend(self, layer: int, plan: StepPlan, q, k, v, scale: float):
        """Cache the step's keys/values ``k``, ``v`` (``[n, kv, d]``) and attend with ``q`` (``[n, kv, g, d]``).

        Returns ``[n, kv, g, d]``: softmax-weighted values over each row's prompt and own tokens.
        """
        torch = self._torch
        own_keys, own_values = self.row_keys[layer], self.row_values[layer]
        own_keys[plan.rows, :, :, plan.written] = k
        own_values[plan.rows, :, plan.written] = v
        used, kv, most, g, d = plan.queries.shape
        span, own = plan.prompt_span, plan.own_span
        n = len(plan.rows)
        q = q * scale
        # (index_copy_/index_select over the grid's first axis: a few times faster than indexing
        # the prompt and rank axes, which a key/value head axis separates)
        plan.queries.view(-1, g, d).index_copy_(0, plan.grid, q.view(n * kv, g, d))
        prompt_keys = self.prompt_keys[layer][:used, :, :, :span]
        prompt_scores = torch.matmul(plan.queries.view(used, kv, most * g, d), prompt_keys)
        prompt_scores = prompt_scores.view(-1, g, span).index_select(0, plan.grid).view(n, kv, g, span)
        own_scores = torch.matmul(q, own_keys[:n, :, :, :own])
        scores = torch.cat([prompt_scores, own_scores], dim=-1).float().add_(plan.mask)
        weights = scores.softmax(dim=-1).to(q.dtype)
        plan.weights.view(-1, g, span).index_copy_(0, plan.grid, weights[..., :span].reshape(n * kv, g, span))
        prompt_values = self.prompt_values[layer][:used, :, :span]
        out = torch.matmul(plan.weights.view(used, kv, most * g, span), prompt_values)
        out = out.view(-1, g, d).index_select(0, plan.grid).view(n, kv, g, d)
        return out.add_(torch.matmul(weights[..., span:], own_values[:n, :, :own]))


class Scratch:
    """Reusable buffers for a decode step's large temporaries (logits, sampling probabilities and sums).

    A step at 32 rows of a 49,152-token vocabulary makes ~25 MB of such temporaries; allocated anew,
    they come from fresh pages each time (glibc returns large freed blocks to the system), and the
    page faults cost about as much as the arithmetic on them. `get` hands out a contiguous view of
    one growing flat buffer per name, so steps reuse the same memory.
    """

    def __init__(self, device):
        self.device = device
        self._buffers: dict[str, Any] = {}

    def get(self, name: str, shape: tuple[int, ...], dtype):
        """A contiguous tensor of ``shape`` and ``dtype`` (contents undefined), reused by later calls of ``name``."""
        import math

        import torch

        size = math.prod(shape)
        buffer = self._buffers.get(name)
        if buffer is None or buffer.dtype != dtype or buffer.numel() < size:
            buffer = self._buffers[name] = torch.empty(size, dtype=dtype, device=self.device)
        return buffer[:size].view(shape)
