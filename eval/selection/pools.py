"""Frozen candidate pools: G completions per question, sampled once, stored compressed, never resampled.

A pool is keyed by what determines it (:func:`pool_key`): the content of the weights (every file's
SHA-256, not its path), the prompt, and the sampling settings that shape the distribution (G,
temperature, top-p, token budget, seed). The package version is not part of the key, so a release
does not resample; the engine, thread count and machine are recorded with each pool as provenance.

A :class:`PoolStore` is one gzip JSON-lines file per policy and family: a header line (family,
policy, sampling settings) and one line per pool (id, key, completions, their token counts and the
confidence selector's mean answer-token log-probabilities). It is rewritten atomically after every
new pool, so a run killed at any point loses at most the pool it was sampling, and the next run
continues where it stopped. Re-scoring and re-grading read the store only: no model.

Each question's generator seed is derived from the run's seed and the question's user message, so
a pool does not depend on which other questions were sampled before it, or in which order (up to
float rounding between batch compositions: several questions share a decode batch).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "FrozenPool",
    "PoolSettings",
    "PoolStore",
    "PoolStoreError",
    "fill_pools",
    "pool_key",
    "question_seed",
    "read_jsonl_gz",
    "weights_content",
    "write_jsonl_gz",
]

POOL_FORMAT = 1


class PoolStoreError(ValueError):
    """A pool store that cannot serve this run (other settings, other family, unreadable)."""


@dataclass(frozen=True)
class PoolSettings:
    """The sampling settings that determine a pool (all part of its key).

    Attributes:
        samples: completions per question (G).
        temperature, top_p: the sampling distribution.
        max_new_tokens: the generation budget per completion.
        seed: the run's seed; each question's generator seed derives from it (:func:`question_seed`).
    """

    samples: int = 32
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 384
    seed: int = 0


@dataclass
class FrozenPool:
    """One question's G completions as stored."""

    id: str
    key: str
    completions: list[str]
    num_tokens: list[int]
    confidence: list[float | None]
    provenance: dict[str, Any] = field(default_factory=dict)


def weights_content(fingerprint: dict[str, Any]) -> dict[str, Any]:
    """The file digests of a `weights_fingerprint`, without the (machine-specific) paths."""
    return {role: (entry or {}).get("files") for role, entry in sorted(fingerprint.items())}


def pool_key(weights: dict[str, Any], prompt: Any, settings: PoolSettings) -> str:
    """SHA-256 of what determines a pool: weight contents, prompt and sampling settings.

    Example:
        >>> a = pool_key({"model": {"w": "00"}}, [{"role": "user", "content": "q"}], PoolSettings())
        >>> a == pool_key({"model": {"w": "00"}}, [{"role": "user", "content": "q"}], PoolSettings(seed=0))
        True
        >>> a == pool_key({"model": {"w": "01"}}, [{"role": "user", "content": "q"}], PoolSettings())
        False
    """
    text = json.dumps({"weights": weights, "prompt": prompt, "sampling": asdict(settings)}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def question_seed(seed: int, user_message: str) -> int:
    """The generator seed of one question's pool: a function of the run seed and the question only."""
    digest = hashlib.sha256(f"faithgrpo-pool:{int(seed)}:{user_message}".encode()).digest()
    return int.from_bytes(digest[:8], "little") % (2**31)


class PoolStore:
    """The pools of one policy on one family, in one gzip JSON-lines file (module docstring).

    Args:
        path: the ``.jsonl.gz`` file (created on the first `put`).
        header: ``{"family", "policy", "sampling", "source"}``; an existing file whose family, policy
            (label and weight digests) or sampling differ is refused. ``source`` (the model and
            adapter names the pools were first sampled with) is provenance: the file's own is kept.

    Raises:
        PoolStoreError: the file holds another family, policy or sampling settings, or is unreadable.
    """

    def __init__(self, path: str | os.PathLike, header: dict[str, Any]):
        self.path = Path(path)
        self.header = {"format": POOL_FORMAT, **header}
        self.pools: dict[str, FrozenPool] = {}
        if self.path.exists():
            self._load()

    def _load(self) -> None:
        lines = read_jsonl_gz(self.path)
        if not lines:
            return
        have = lines[0]
        # where the weights came from is provenance, kept from the file's first run
        self.header["source"] = have.get("source", self.header.get("source"))
        for name in ("format", "family", "policy", "sampling"):
            if have.get(name) != self.header.get(name):
                raise PoolStoreError(
                    f"pool store {self.path.name} was made with {name} {have.get(name)!r}, this run asks for "
                    f"{self.header.get(name)!r}: use the same settings, or another --pools folder"
                )
        for line in lines[1:]:
            self.pools[line["key"]] = FrozenPool(**line)

    def get(self, key: str) -> FrozenPool | None:
        return self.pools.get(key)

    def put(self, pool: FrozenPool) -> None:
        """Add one pool and rewrite the file atomically (`write_jsonl_gz`)."""
        self.pools[pool.key] = pool
        write_jsonl_gz(self.path, [self.header, *(asdict(self.pools[key]) for key in sorted(self.pools))])


def read_jsonl_gz(path: Path) -> list[dict[str, Any]]:
    """Every line of a gzip JSON-lines file (`PoolStoreError` when it cannot be read)."""
    try:
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            return [json.loads(line) for line in handle if line.strip()]
    except (OSError, EOFError, json.JSONDecodeError) as err:
        raise PoolStoreError(f"store {path.name} is unreadable ({err}); move it away") from None


def write_jsonl_gz(path: Path, lines: Sequence[dict[str, Any]]) -> None:
    """Write ``lines`` as gzip JSON lines atomically: a temporary file, then ``os.replace``; a run
    killed mid-write leaves the previous file whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
            for line in lines:
                gz.write((json.dumps(line, sort_keys=True) + "\n").encode())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; a store is an ordinary, shareable file
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def fill_pools(
    store: PoolStore,
    items: Sequence[tuple[str, Any, str]],
    weights: dict[str, Any],
    settings: PoolSettings,
    load: Callable[[], tuple[Any, Any]],
    *,
    threads: int = 1,
    engine: str = "auto",
    group: int = 1,
    slots: int | None = None,
    budget_seconds: float | None = None,
    log: Callable[[str], None] | None = None,
) -> list[FrozenPool | None]:
    """Sample every missing pool (in ``items`` order), store each as it finishes, return them all.

    Args:
        store: where pools are read and written.
        items: ``(id, prompt, user_message)`` per question.
        weights: `weights_content` of the policy (part of every key).
        settings: sampling settings.
        load: zero-argument callable returning ``(model, tokenizer)``; called once, only when a pool
            is missing.
        threads: torch threads (recorded; the same count reproduces the same completions).
        engine: the transformers backend's engine (``"auto"``: the decode engine where it applies).
        group: missing questions sampled per call: a finished row's slot takes the next question's
            row, so the batch stays full (each question keeps its own seed, `question_seed`).
        slots: rows decoded together (default: G).
        budget_seconds: start no new call after this long (the rest stay ``None``).
        log: one line per new pool (default: stderr).

    Returns:
        One `FrozenPool` per item, ``None`` where the budget ran out first.
    """
    from faithgrpo.eval.generation.backends import generate_completions
    from faithgrpo.eval.generation.settings import SamplingSettings, fixed_threads
    from faithgrpo.eval.metrics.logprobs import answer_logprobs, sampled_answer_logprob

    say = log or (lambda line: print(line, file=sys.stderr, flush=True))
    start = time.perf_counter()
    keys = [pool_key(weights, prompt, settings) for _, prompt, _ in items]
    missing = [i for i, key in enumerate(keys) if store.get(key) is None]
    loaded: list[tuple[Any, Any]] = []
    exact_distribution = settings.temperature == 1.0 and settings.top_p == 1.0
    for first in range(0, len(missing), max(1, group)):
        if budget_seconds is not None and time.perf_counter() - start >= budget_seconds:
            break
        if not loaded:
            loaded.append(load())
        model, tokenizer = loaded[0]
        chunk = missing[first : first + max(1, group)]
        sampling = SamplingSettings(
            num_samples=settings.samples,
            temperature=settings.temperature,
            top_p=settings.top_p,
            max_new_tokens=settings.max_new_tokens,
            seed=settings.seed,
            batch_size=slots or settings.samples,
            threads=threads,
        )
        prompts = [items[i][1] for i in chunk]
        seeds = [question_seed(settings.seed, items[i][2]) for i in chunk]
        # At temperature 1 without top-p the sampling distribution is the model's: the confidence
        # selector's answer log-probabilities come with the sampled tokens, no second forward pass.
        sampled: list | None = [] if exact_distribution and engine != "generate" else None
        began = time.perf_counter()
        try:
            records, _ = generate_completions(
                model, tokenizer, prompts, sampling, ids=[items[i][0] for i in chunk], progress=False,
                engine=engine, prompt_seeds=seeds, sampled=sampled,
            )  # fmt: skip
        except ValueError:
            if sampled is None:
                raise
            sampled = None  # the decode engine cannot run this model: generate, then score
            records, _ = generate_completions(
                model, tokenizer, prompts, sampling, ids=[items[i][0] for i in chunk], progress=False,
                engine=engine, prompt_seeds=seeds,
            )  # fmt: skip
        generated = time.perf_counter() - began
        tokens = sum(sum(r.num_tokens) for r in records)
        for n, (i, record) in enumerate(zip(chunk, records)):
            scored = time.perf_counter()
            if sampled is not None:
                confidence = [sampled_answer_logprob(tokenizer, ids, lps) for ids, lps in sampled[n]]
            else:
                with fixed_threads(threads):
                    confidence = answer_logprobs(
                        model, tokenizer, [(items[i][1], c) for c in record.completions], batch_size=8,
                        progress=False,
                    )  # fmt: skip
            store.put(
                FrozenPool(
                    id=items[i][0],
                    key=keys[i],
                    completions=record.completions,
                    num_tokens=record.num_tokens,
                    confidence=confidence,
                    provenance={
                        "engine": record.settings.get("engine"),
                        "threads": threads,
                        "questions_per_call": len(chunk),
                        "slots": sampling.batch_size,
                        "confidence_from": "sampling" if sampled is not None else "forward pass",
                        # this pool's share of its call, by generated tokens
                        "generation_seconds": round(generated * sum(record.num_tokens) / max(tokens, 1), 3),
                        "scoring_seconds": round(time.perf_counter() - scored, 3),
                    },
                )
            )
        say(
            f"[pools] {store.path.name} {len(store.pools)}: {', '.join(items[i][0] for i in chunk)} "
            f"{tokens} tokens in {generated:.1f} s ({tokens / max(generated, 1e-9):.1f} tok/s)"
        )
    return [store.get(key) for key in keys]
