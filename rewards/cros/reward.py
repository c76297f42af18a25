"""CRoS: a step-scrambling causal reward scored by a frozen reference model (docs/rewards.md, "CRoS").

For a completion with reasoning ``r`` and answer span ``a`` to prompt ``x``, CRoS compares the mean
token log-probability of the answer under the reference model given the ordered reasoning with the
same quantity given ``M`` scrambles of its steps:

    ℓ(r) = (1/|a|) Σ_t log p_ref(a_t | x, r, a_<t)
    Δ    = ℓ(r) − (1/M) Σ_m ℓ(π_m(r))

and rank-normalises Δ within each group of completions of one prompt. Large Δ: the answer rides on
the order of the reasoning. Δ ≈ 0: the reasoning is decorative or leaks the answer.

Conventions fixed here:

- The answer span ``a`` is the *content* of the last ``<answer>…</answer>`` block without its outer
  whitespace, and a token is scored when its character span overlaps that stripped span (one rule,
  applied by `faithgrpo.rewards.cros.scoring.scored_span` for fast and slow tokenizers alike). The
  opening ``<answer>`` tag is part of the conditioning context; the closing tag is not scored (it
  says the answer ended, not what it is), and neither is a token that only joins the answer's
  trailing whitespace to it (``Ġ</`` in ``<answer> 42 </answer>``), so the closing tag's
  tokenisation never enters ℓ. A token that carries leading whitespace into the answer (``Ġ42``)
  is scored. An answer that is only whitespace is empty: Δ undefined, reason ``empty_answer``.
- The reasoning is the ``<think>`` content; without a closed think block before the answer it is
  the text before ``<answer>`` (after an unclosed ``<think>``, or from a template-supplied
  ``<think>`` up to ``</think>``). Everything else of the completion stays in place in every
  scramble.
- Tokens are taken in context, as the policy produced them, and ``max_length`` is a token budget
  that cuts the prompt, never the answer: see `faithgrpo.rewards.cros.scoring`.
- Ranking uses average ranks for ties. Undefined Δ are the lowest values and tie among
  themselves, so ``k`` undefined completions of a group share the ranks ``1..k`` (each gets
  ``((k + 1)/2 − 1)/(G − 1)``, which is 0 for a single one).

Where each part lives: parsing, scrambles, Δ and the TRL call here; the reference's log-probabilities
in `faithgrpo.rewards.cros.scoring`; binding and checking the reference in
`faithgrpo.rewards.cros.reference`; rank normalisation in `faithgrpo.rewards.cros.ranking`.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

from faithgrpo.rewards.cros.completions import UNDEFINED_REASONS, CRoSScore, parse_completion
from faithgrpo.rewards.cros.ranking import gathered_group_rank_normalize
from faithgrpo.rewards.cros.reference import REFERENCE_FIXES, ReferenceBinding
from faithgrpo.rewards.cros.scoring import Pending, ReferenceScorer, is_conversational
from faithgrpo.rewards.steps import (
    MAX_REASONING_CHARS,
    apply_permutation,
    scramble_permutations,
    scramble_seed,
    step_spans,
)
from faithgrpo.text import completion_text, prompt_text

__all__ = ["CRoSReward"]

logger = logging.getLogger(__name__)

# Kwargs TRL passes that are not per-row dataset columns.
_NON_ROW_KWARGS = frozenset({"trainer_state", "log_extra", "log_metric", "environments"})
_MAX_NUM_SCRAMBLES = 1024
# Characters of the completion after the answer that are tokenised with it, so the answer's last
# tokens are the ones the whole completion gets (merges are local), without an unbounded tail.
_TAIL_CHARS = 64


def _prompt_key(prompt: Any) -> str:
    """Short stable key of a prompt's text (what gets gathered across processes)."""
    return hashlib.sha1(prompt_text(prompt).encode("utf-8", errors="surrogatepass")).hexdigest()


def _graded_correct(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and math.isfinite(value):
        return value >= 1.0
    return False


def _on_scorer(name: str, doc: str) -> property:
    """A `CRoSReward` attribute that lives on its `ReferenceScorer` (read and written through)."""
    return property(
        lambda self: getattr(self.scorer, name),
        lambda self, value: setattr(self.scorer, name, value),
        doc=doc,
    )


def _check_int(name: str, value: Any, low: int, high: int | None, hint: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high and value > high):
        bound = f"in [{low}, {high}]" if high else f">= {low}"
        raise ValueError(f"{name} must be an int {bound}, got {value!r}; {hint}")


class CRoSReward(ReferenceBinding):
    r"""CRoS reward: rank-normalised step-scrambling Δ under a frozen reference model.

    A TRL reward callable, ``reward(prompts, completions, **kwargs) -> list[float | None]``, named
    ``"cros"``. See the module docstring for the formula and span conventions.

    Args:
        reference (`str`, `os.PathLike`, `torch.nn.Module` or `None`, *optional*):
            A checkpoint path, hub id or ``"embedded"`` (loaded lazily with transformers, put in eval
            mode and frozen), a frozen model instance (used as is, switched to eval mode only while
            scoring; it must not be the policy being trained), or ``None`` to be bound to the initial
            policy by :class:`~faithgrpo.trainers.FaithGRPOTrainer` (or later with `bind_reference`).
            The reference is checked when training starts (see `check_reference`): none bound, or
            one that is being trained (parameters with ``requires_grad=True``, or shared with the
            policy), stops training at once with the fix in the message.
        tokenizer (`PreTrainedTokenizerBase` or `str`, *optional*):
            Tokenizer of the reference; loaded from ``reference`` when that is a path.
        num_scrambles (`int`, *optional*, defaults to `4`):
            ``M``, scrambles per completion (all non-identity ones when fewer exist).
        seed (`int`, *optional*, defaults to `0`):
            Global seed mixed into the per-completion scramble seed.
        max_length (`int`, *optional*):
            Token budget of prompt + completion through the answer. Defaults to the reference's
            ``max_position_embeddings`` (no limit if it has none).
        batch_size (`int`, *optional*, defaults to `32`):
            Sequences per forward pass. Sequences are sorted by length before chunking.
        gate (`str`, *optional*, defaults to `"none"`):
            ``"correct"``: only completions graded correct by ``is_correct`` get a Δ; the others are
            undefined (reason ``gated``) and skip the forward passes.
        is_correct (`Callable`, *optional*):
            ``is_correct(prompt, completion, **row) -> bool | float | None`` for ``gate="correct"``,
            where ``row`` holds this row's dataset columns. ``True`` or a number >= 1 is correct.
        undefined (`str`, *optional*, defaults to `"lowest"`):
            ``"lowest"``: undefined Δ rank below all defined Δ of the group. ``"none"``: they score
            ``None`` (TRL ignores them) and the rest of the group is ranked among itself.
        num_generations (`int`, *optional*):
            Group size ``G``; when given, runs of one prompt longer than ``G`` are split into groups
            of ``G``. Without it a group is a run of consecutive rows with the same prompt text.
        distributed (`bool`, *optional*):
            Gather Δ across processes before ranking. ``None`` (default): when a
            ``torch.distributed`` process group with more than one process is initialised. Every
            process must then call the reward together (as TRL trainers do).
        chat_template_kwargs (`dict`, *optional*):
            Extra arguments for ``tokenizer.apply_chat_template`` on conversational prompts. The
            trainer's own ``chat_template_kwargs`` (``GRPOConfig.chat_template_kwargs``) are used as
            well, handed over by :class:`~faithgrpo.trainers.FaithGRPOTrainer` or by
            `binding_callback` (TRL does not pass them to reward functions); keys given here win.
        model_kwargs (`dict`, *optional*):
            Extra arguments for ``from_pretrained`` when ``reference`` is a path (e.g. ``dtype``).
        reference_adapter (`str` or `os.PathLike`, *optional*):
            A PEFT adapter directory applied (unmerged, frozen) to a reference loaded from a path:
            when the run warm-starts from an adapter, the initial policy is the base model plus that
            adapter, and so must the reference be. The recipe sets it from its warm start.
        device (`str` or `torch.device`, *optional*):
            Device for a reference loaded from a path; defaults to the current CUDA device, else CPU.
        reuse_prompt_cache (`bool`, *optional*, defaults to `True`):
            Run each distinct prompt once and reuse its KV cache for all (M+1)·G sequences that
            share it, instead of re-encoding the prompt in every sequence. Falls back to plain
            batches for models without a transformers KV-cache interface or with sliding-window /
            linear-attention cache layers. Same Δ up to float rounding.

    Example:
        ```python
        >>> from faithgrpo.rewards.cros import CRoSReward

        >>> cros = CRoSReward("embedded", num_scrambles=4)
        >>> cros(["2+3?"] * 2, ["<think>Step 1: 2+3=5\nStep 2: done</think><answer>5</answer>",
        ...                     "<answer>5</answer>"])  # doctest: +SKIP
        [1.0, 0.0]
        ```
    """

    __name__ = "cros"

    def __init__(
        self,
        reference: str | os.PathLike | torch.nn.Module | None = None,
        tokenizer: Any = None,
        *,
        num_scrambles: int = 4,
        seed: int = 0,
        max_length: int | None = None,
        batch_size: int = 32,
        gate: str = "none",
        is_correct: Callable[..., Any] | None = None,
        undefined: str = "lowest",
        num_generations: int | None = None,
        distributed: bool | None = None,
        chat_template_kwargs: dict | None = None,
        model_kwargs: dict | None = None,
        device: str | torch.device | None = None,
        reuse_prompt_cache: bool = True,
        reference_adapter: str | os.PathLike | None = None,
    ):
        _check_int("num_scrambles", num_scrambles, 1, _MAX_NUM_SCRAMBLES, "use a small M such as 4")
        _check_int("seed", seed, -(2**63), None, "pass an integer seed")
        _check_int("batch_size", batch_size, 1, None, "use e.g. 32 (sequences per forward pass)")
        if max_length is not None:
            _check_int("max_length", max_length, 2, None, "or None for the model's context size")
        if num_generations is not None:
            _check_int("num_generations", num_generations, 1, None, "pass TRL's num_generations or None")
        if gate not in ("none", "correct"):
            raise ValueError(f"gate must be 'none' or 'correct', got {gate!r}")
        if gate == "correct" and not callable(is_correct):
            raise ValueError(
                "gate='correct' needs is_correct=callable(prompt, completion, **row) that grades an "
                "answer (e.g. faithgrpo's outcome grader); pass one or use gate='none'"
            )
        if undefined not in ("lowest", "none"):
            raise ValueError(f"undefined must be 'lowest' or 'none', got {undefined!r}")
        if distributed not in (None, True, False):
            raise ValueError(f"distributed must be None (auto), True or False, got {distributed!r}")
        if reference is not None and not isinstance(reference, (str, os.PathLike, torch.nn.Module)):
            raise ValueError(
                "reference must be a model path / hub id / 'embedded', a PreTrainedModel, or None "
                f"(bind one later with bind_reference), got {type(reference).__name__}"
            )
        if isinstance(reference, torch.nn.Module) and tokenizer is None:
            raise ValueError("a reference model instance needs its tokenizer: pass tokenizer=...")
        if reference_adapter is not None and not isinstance(reference, (str, os.PathLike)):
            raise ValueError(
                "reference_adapter applies to a reference loaded from a path; with a model instance, "
                "attach the adapter to it yourself (PeftModel.from_pretrained) or bind the initial policy"
            )

        #: Runs the reference: holds the model, tokenizer, batch size and forward counts (see
        #: `faithgrpo.rewards.cros.scoring`); they read and write through this reward's attributes.
        self.scorer = ReferenceScorer(batch_size, bool(reuse_prompt_cache), self._warn_once)
        self.num_scrambles = num_scrambles
        self.seed = seed
        self.max_length = max_length
        self.gate = gate
        self.is_correct = is_correct
        self.undefined = undefined
        self.num_generations = num_generations
        self.distributed = distributed
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.model_kwargs = dict(model_kwargs or {})
        self.device = device
        self.reference_adapter = reference_adapter

        self._reference_path = None if isinstance(reference, torch.nn.Module) else reference
        self._tokenizer_spec = tokenizer
        #: How the reference was bound: ``None`` (not yet), ``"path"``, ``"user"`` (a model given to
        #: the constructor or `bind_reference`), or the trainer glue's mode (``"peft_disabled_adapters"``,
        #: ``"peft_initial_adapter"``, ``"trainer_ref_adapter"``, ``"frozen_copy"``, ``"trainer_ref_model"``).
        self.reference_mode: str | None = "path" if self._reference_path is not None else None
        self._trainer_chat_template_kwargs: dict = {}
        self._trainer_render_kwargs: dict = {}  # tools / chat_template the trainer renders prompts with
        self._reference_checked = False
        #: Max |Δ log p| between a separately given reference and the policy on a probe, measured
        #: when the trainer binds CRoS (``None``: not compared, e.g. a sharded or trainer-bound one).
        self.reference_probe_difference: float | None = None
        if isinstance(reference, torch.nn.Module):
            self.bind_reference(reference, tokenizer)
        elif tokenizer is not None and not isinstance(tokenizer, (str, os.PathLike)):
            self.tokenizer = tokenizer

        #: CRoS results of the last call (this process's rows), for inspection.
        self.last_scores: list[CRoSScore] = []
        #: Undefined reasons (and ``prompt_truncated``) counted over all calls.
        self.reason_counts: Counter[str] = Counter()
        self._warned: set[str] = set()

    model = _on_scorer("model", "The bound reference model, or ``None``.")
    tokenizer = _on_scorer("tokenizer", "The reference's tokenizer.")
    batch_size = _on_scorer("batch_size", "Sequences per forward pass.")
    reuse_prompt_cache = _on_scorer("reuse_prompt_cache", "Whether a shared prompt's KV cache is reused.")
    forward_counts = _on_scorer(
        "forward_counts",
        "Forward passes run so far: ``prompt`` (cached prompts), ``cached_chunk``, ``chunk``.",
    )
    _context_factory = _on_scorer("context_factory", "The context manager factory the reference runs under.")

    def _prompt_ids(self, prompt: Any) -> list[int]:
        return self.scorer.prompt_ids(prompt, self._render_kwargs())

    def __getstate__(self) -> dict[str, Any]:
        """Pickle by configuration: the settings and the reference *path*, never a live model.

        A copy in another process (TRL's async trainer, a process pool) loads the reference itself
        from the path on its first call. A reward bound to a model object (the trainer's initial
        policy, or a model passed in) cannot leave its process.
        """
        if self.reference_mode not in (None, "path"):
            raise TypeError(
                f"this CRoS reward is bound to a live reference model (mode {self.reference_mode!r}) that a "
                "copy in another process cannot share: pickle it before it is bound, or give it a reference "
                "path (CRoSReward('embedded') or a checkpoint directory), which each process loads itself"
            )
        state = dict(self.__dict__)
        scorer = state.pop("scorer")
        state["_scorer_settings"] = (scorer.batch_size, scorer.reuse_prompt_cache)
        if scorer.model is not None:  # loaded from the path: the copy reloads it
            state["reference_mode"] = "path"
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        batch_size, reuse_prompt_cache = state.pop("_scorer_settings")
        self.__dict__.update(state)
        self.scorer = ReferenceScorer(batch_size, reuse_prompt_cache, self._warn_once)
        if self._tokenizer_spec is not None and not isinstance(self._tokenizer_spec, (str, os.PathLike)):
            self.tokenizer = self._tokenizer_spec

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            logger.warning(message)

    # ------------------------------------------------------------------ scoring

    def compute_deltas(self, pairs: Iterable[tuple[Any, Any]]) -> list[CRoSScore]:
        """Raw CRoS Δ for (prompt, completion) pairs: no gating, no ranking, no gathering.

        This is what checkpoint evaluators average ("mean CRoS Δ"). Prompts and completions may be
        strings or conversational message lists.

        Args:
            pairs (`Iterable[tuple[prompt, completion]]`):
                The pairs to score.

        Returns:
            `list[CRoSScore]`: one result per pair, in order. Never raises on model output.

        Example:
            ```python
            >>> [s.delta for s in cros.compute_deltas([("2+3?", completion)])]  # doctest: +SKIP
            [0.84]
            ```
        """
        pairs = list(pairs)
        results: list[CRoSScore | None] = [None] * len(pairs)
        pending: list[tuple[Any, Pending]] = []
        for row, (prompt, completion) in enumerate(pairs):
            text = completion_text(completion)
            parsed, reason = parse_completion(text)
            if parsed is None:
                results[row] = CRoSScore(None, reason)
                continue
            head, reasoning, middle, answer = parsed
            if not reasoning.strip():
                results[row] = CRoSScore(None, "empty_reasoning")
                continue
            if len(reasoning) > MAX_REASONING_CHARS:
                results[row] = CRoSScore(None, "too_long")
                continue
            spans = step_spans(reasoning)
            if len(spans) < 2:
                results[row] = CRoSScore(None, "too_few_steps", num_steps=len(spans))
                continue
            perms = scramble_permutations(
                len(spans), self.num_scrambles, scramble_seed(self.seed, prompt_text(prompt), text)
            )
            if not perms:  # unreachable for n >= 2; keeps the mean over scrambles well defined
                results[row] = CRoSScore(None, "too_few_steps", num_steps=len(spans))
                continue
            variants = [reasoning] + [apply_permutation(reasoning, spans, p) for p in perms]
            answer_end = len(head) + len(reasoning) + len(middle) + len(answer)
            tail = text[answer_end : answer_end + _TAIL_CHARS]
            texts, answer_spans = [], []
            for variant in variants:
                # The block's content; the scorer narrows it to the stripped answer (`scored_span`).
                start = len(head) + len(variant) + len(middle)
                texts.append(head + variant + middle + answer + tail)
                answer_spans.append((start, start + len(answer)))
            pending.append((prompt, Pending(row, len(spans), [], texts, answer_spans)))
        if pending or self.scorer.is_sharded():
            # The model is only needed (and loaded) when something is left to score, except a
            # sharded policy: its forwards are collectives that every process runs (cros_scoring).
            self._ensure_reference()
            prompt_cache: dict[str, list[int]] = {}
            for prompt, item in pending:
                key = repr(prompt) if is_conversational(prompt) else prompt_text(prompt)
                if key not in prompt_cache:
                    prompt_cache[key] = self._prompt_ids(prompt)
                item.prompt_ids = prompt_cache[key]
            for row, score in self._score_pending([item for _, item in pending]):
                results[row] = score
        return [r if r is not None else CRoSScore(None, "non_finite") for r in results]

    def _score_pending(self, pending: list[Pending]) -> list[tuple[int, CRoSScore]]:
        out = []
        scored = self.scorer.score(pending, self.max_length)
        for item, (values, truncated, reason) in zip(pending, scored):
            if values is None:
                out.append((item.row, CRoSScore(None, reason, num_steps=item.num_steps)))
                continue
            ordered, scrambled = values[0], tuple(values[1:])
            delta = ordered - sum(scrambled) / len(scrambled)
            if not all(math.isfinite(v) for v in values) or not math.isfinite(delta):
                out.append((item.row, CRoSScore(None, "non_finite", num_steps=item.num_steps)))
                continue
            out.append(
                (
                    item.row,
                    CRoSScore(delta, None, ordered, scrambled, item.num_steps, prompt_truncated=truncated),
                )
            )
        return out

    # ------------------------------------------------------------------ TRL entry point

    def _gate_rows(self, prompts: Sequence[Any], completions: Sequence[Any], kwargs: dict) -> list[bool]:
        if self.gate == "none":
            return [True] * len(prompts)
        n = len(prompts)
        columns = {
            k: v
            for k, v in kwargs.items()
            if k not in _NON_ROW_KWARGS and isinstance(v, (list, tuple)) and len(v) == n
        }
        passed = []
        for i in range(n):
            row = {k: v[i] for k, v in columns.items()}
            try:
                verdict = self.is_correct(prompts[i], completions[i], **row)
            except Exception as error:  # a grader failing on odd model output must not stop training
                self._warn_once("gate_error", f"is_correct raised {error!r}; counting the row as gated")
                verdict = False
            passed.append(_graded_correct(verdict))
        return passed

    def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any
    ) -> list[float | None]:
        """Score a TRL batch: Δ per completion, rank-normalised within each prompt's group.

        Args:
            prompts (`list`):
                Prompts (strings or message lists), each repeated ``G`` times consecutively.
            completions (`list`):
                Completions (strings or message lists).
            **kwargs:
                Dataset columns (passed to ``is_correct`` row by row) and TRL's ``log_metric`` /
                ``log_extra`` hooks, used when present.

        Returns:
            `list[float | None]`: rewards in [0, 1]; ``None`` only with ``undefined="none"``.

        Raises:
            RuntimeError: at the first call when no reference is bound, and at the first call from a
                trainer (``trainer_state`` given) when the reference is the live policy (see
                `check_reference`), whether or not anything in the batch can be scored.
        """
        if len(prompts) != len(completions):
            raise ValueError(f"got {len(prompts)} prompts but {len(completions)} completions")
        if not self.is_bound:
            raise RuntimeError(f"CRoSReward has no reference model, so CRoS cannot score. {REFERENCE_FIXES}")
        if not self._reference_checked and "trainer_state" in kwargs:
            self.check_reference()
        n = len(prompts)
        passed = self._gate_rows(prompts, completions, kwargs)
        scored_rows = [i for i in range(n) if passed[i]]
        scored = (
            self.compute_deltas((prompts[i], completions[i]) for i in scored_rows)
            if scored_rows or self.scorer.is_sharded()
            else []
        )
        scores = [CRoSScore(None, "gated")] * n
        for i, score in zip(scored_rows, scored):
            scores[i] = score
        deltas = [s.delta for s in scores]
        keys = [_prompt_key(p) for p in prompts]
        rewards = gathered_group_rank_normalize(
            deltas, keys, self.undefined, self.num_generations, self.distributed
        )
        self.last_scores = scores
        self._log(scores, kwargs.get("log_metric"), kwargs.get("log_extra"))
        return rewards

    def _log(self, scores: list[CRoSScore], log_metric: Any, log_extra: Any) -> None:
        counts = Counter(s.reason for s in scores if s.reason is not None)
        truncated = sum(s.prompt_truncated for s in scores)
        self.reason_counts.update(counts)
        self.reason_counts["prompt_truncated"] += truncated
        n = len(scores)
        if callable(log_metric) and n:
            defined = [s.delta for s in scores if s.delta is not None]
            if defined:
                mean = sum(defined) / len(defined)
                log_metric(f"{self.__name__}/delta_mean", mean)
                # the raw Δ's spread: the reward itself is a within-group rank, whose mean is 0.5 by construction
                log_metric(
                    f"{self.__name__}/delta_std",
                    (sum((d - mean) ** 2 for d in defined) / len(defined)) ** 0.5,
                )
            log_metric(f"{self.__name__}/undefined_frac", (n - len(defined)) / n)
            for reason in UNDEFINED_REASONS:
                log_metric(f"{self.__name__}/undefined/{reason}", counts.get(reason, 0) / n)
            log_metric(f"{self.__name__}/prompt_truncated_frac", truncated / n)
        if callable(log_extra) and n:
            log_extra(f"{self.__name__}_delta", [s.delta for s in scores])
            log_extra(f"{self.__name__}_reason", [s.reason or "" for s in scores])

    def __repr__(self) -> str:
        reference = self._reference_path if self.model is None else type(self.model).__name__
        return (
            f"CRoSReward(reference={reference!r}, num_scrambles={self.num_scrambles}, seed={self.seed}, "
            f"gate={self.gate!r}, undefined={self.undefined!r})"
        )
