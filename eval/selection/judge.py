"""The LLM-judge selector's scores: a judge model reads each candidate and says how sure it is it is correct.

The judge sees the prompt of `faithgrpo.eval.metrics.judge.cot_judge_prompt` (the problem, the
candidate's reasoning and its final answer; the same prompt ``faithgrpo eval --judge`` samples), with
its reply started as ``VERDICT:``. A candidate's score is the log-odds of the next token:
``log p(first token of " CORRECT") − log p(first token of " INCORRECT")``, one forward pass per
candidate and no sampling, so the scores are deterministic and cheap next to sampling verdicts.

Scores are cached in ``<pools>/<policy>-<family>.judge-<label>.jsonl.gz`` by the pool's key and the
judge's weight digests: a re-score reads them without the judge model.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from faithgrpo.eval.selection.pools import FrozenPool, PoolStoreError, read_jsonl_gz, write_jsonl_gz

__all__ = ["JudgeStore", "fill_judge_scores", "judge_scores", "verdict_tokens"]

JUDGE_FORMAT = 1
_REPLY_START = "VERDICT:"


def verdict_tokens(tokenizer) -> tuple[int, int]:
    """The first token ids of ``" CORRECT"`` and ``" INCORRECT"`` (they must differ)."""
    pos = tokenizer(" CORRECT", add_special_tokens=False)["input_ids"][0]
    neg = tokenizer(" INCORRECT", add_special_tokens=False)["input_ids"][0]
    if pos == neg:
        raise ValueError(
            "the judge's tokenizer starts ' CORRECT' and ' INCORRECT' with one token: use another judge"
        )
    return pos, neg


def judge_scores(
    model, tokenizer, prompt: Any, completions: Sequence[str], *, batch_size: int = 8
) -> list[float]:
    """Verdict log-odds of each completion (module docstring), in left-padded batches.

    Example:
        >>> from faithgrpo.testing import tiny_causal_lm
        >>> model, tokenizer = tiny_causal_lm("llama")
        >>> scores = judge_scores(model, tokenizer, "2 + 3?", ["<answer>5</answer>", "<answer>6</answer>"])
        >>> len(scores), all(isinstance(s, float) for s in scores)
        (2, True)
    """
    import torch

    from faithgrpo.eval.metrics.judge import cot_judge_prompt
    from faithgrpo.eval.metrics.logprobs import scoring_mode

    pos, neg = verdict_tokens(tokenizer)
    seqs = []
    for completion in completions:
        messages = cot_judge_prompt(prompt, completion)
        text = (
            tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False) + _REPLY_START
        )
        seqs.append(list(tokenizer(text, add_special_tokens=False)["input_ids"]))
    pad = next((t for t in (tokenizer.pad_token_id, tokenizer.eos_token_id) if t is not None), 0)
    device = next(model.parameters()).device
    out: list[float] = [0.0] * len(seqs)
    order = sorted(range(len(seqs)), key=lambda i: -len(seqs[i]))
    with scoring_mode(model), torch.inference_mode():
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            width = max(len(seqs[i]) for i in chunk)
            ids = torch.tensor([[pad] * (width - len(seqs[i])) + seqs[i] for i in chunk], device=device)
            mask = torch.tensor(
                [[0] * (width - len(seqs[i])) + [1] * len(seqs[i]) for i in chunk], device=device
            )
            positions = (mask.cumsum(-1) - 1).clamp(min=0)
            logits = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=False).logits
            last = torch.log_softmax(logits[:, -1].float(), dim=-1)
            for r, i in enumerate(chunk):
                out[i] = float(last[r, pos] - last[r, neg])
    return out


class JudgeStore:
    """Judge scores of one policy's pools on one family, keyed by pool key (module docstring)."""

    def __init__(self, path: str | Path, header: dict[str, Any]):
        self.path = Path(path)
        self.header = {"format": JUDGE_FORMAT, **header}
        self.scores: dict[str, list[float]] = {}
        if self.path.exists():
            lines = read_jsonl_gz(self.path)
            if lines and lines[0] != self.header:
                raise PoolStoreError(
                    f"judge store {self.path.name} was made with another judge or family ({lines[0]}); "
                    "use the same --judge, or move it away"
                )
            self.scores = {line["key"]: line["scores"] for line in lines[1:]}

    def put(self, key: str, scores: list[float]) -> None:
        self.scores[key] = [round(s, 6) for s in scores]
        write_jsonl_gz(
            self.path, [self.header, *({"key": k, "scores": self.scores[k]} for k in sorted(self.scores))]
        )


def judge_digest(weights: dict[str, Any]) -> str:
    """A short digest of the judge's weight contents (part of the judge store's header)."""
    return hashlib.sha256(json.dumps(weights, sort_keys=True).encode()).hexdigest()[:16]


def fill_judge_scores(
    store: JudgeStore,
    items: Sequence[tuple[Any, FrozenPool | None]],
    load: Callable[[], tuple[Any, Any]],
    *,
    budget_seconds: float | None = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, list[float]]:
    """Score every pooled question's candidates that the store lacks; returns key -> scores.

    Args:
        store: where scores are read and written.
        items: ``(prompt, pool)`` per question (``None`` pools are skipped).
        load: returns the judge ``(model, tokenizer)``; called once, only when a score is missing.
        budget_seconds: start no new question after this long.
        log: one line per scored question (default: stderr).
    """
    say = log or (lambda line: print(line, file=sys.stderr, flush=True))
    start, loaded = time.perf_counter(), []
    for prompt, pool in items:
        if pool is None or pool.key in store.scores:
            continue
        if budget_seconds is not None and time.perf_counter() - start >= budget_seconds:
            break
        if not loaded:
            loaded.append(load())
        began = time.perf_counter()
        store.put(pool.key, judge_scores(*loaded[0], prompt, pool.completions))
        say(
            f"[judge] {store.path.name} {len(store.scores)}: {pool.id} in {time.perf_counter() - began:.1f} s"
        )
    return store.scores
