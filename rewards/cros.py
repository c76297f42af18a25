"""CRoS: a step-scrambling causal reward scored by a frozen reference model (DESIGN §3.3).

For a completion with reasoning ``r`` and answer span ``a`` to prompt ``x``, CRoS compares the mean
token log-probability of the answer under the reference model given the ordered reasoning with the
same quantity given ``M`` scrambles of its steps:

    ℓ(r) = (1/|a|) Σ_t log p_ref(a_t | x, r, a_<t)
    Δ    = ℓ(r) − (1/M) Σ_m ℓ(π_m(r))

and rank-normalises Δ within each group of completions of one prompt. Large Δ: the answer rides on
the order of the reasoning. Δ ≈ 0: the reasoning is decorative or leaks the answer.

Conventions fixed here:

- The answer span ``a`` is the *content* of the last ``<answer>…</answer>`` block, tags excluded
  and whitespace kept; the opening ``<answer>`` tag is part of the conditioning context, the
  closing tag is not scored (it says the answer ended, not what it is).
- The reasoning is the ``<think>`` content; without a closed think block before the answer it is
  the text before ``<answer>`` (after an unclosed ``<think>``, or from a template-supplied
  ``<think>`` up to ``</think>``). Everything else of the completion stays in place in every
  scramble.
- Tokens are taken in context, as the policy produced them. The prompt is tokenised on its own, the
  way TRL tokenises it for generation (conversational prompts rendered with the chat template and
  the trainer's ``chat_template_kwargs``), so the prompt/completion boundary is a token boundary as
  it is in generation. Each completion (the original and every scramble) is tokenised whole, and the
  answer tokens are the tokens whose character span overlaps the answer (offsets from a fast
  tokenizer; a slow one falls back to tokenising the completion up to and through the answer and
  taking the difference). So a SentencePiece/Metaspace tokenizer scores ``4`` where the policy
  wrote ``<answer>4``, not the ``▁4`` the answer gets when tokenised alone.
- ``max_length`` counts prompt + completion up to the end of the answer span. Over it, the prompt
  is cut from the left (a leading BOS is kept); when reasoning plus answer alone do not fit, Δ is
  undefined (reason ``too_long``). The answer is never cut.
- Ranking uses average ranks for ties. Undefined Δ are the lowest values and tie among
  themselves, so ``k`` undefined completions of a group share the ranks ``1..k`` (each gets
  ``((k + 1)/2 − 1)/(G − 1)``, which is 0 for a single one).

Scoring cost: the (M+1)·G sequences of a group share their prompt, which runs once; its KV cache
is repeated over the rows of each left-padded batch of completion suffixes, and ``logits_to_keep``
limits the vocabulary projection to the answer positions. Identical sequences (duplicate
completions, coinciding scrambles) are scored once.
"""

from __future__ import annotations

import copy
import hashlib
import inspect
import logging
import math
import os
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import torch

from .steps import MAX_REASONING_CHARS, apply_permutation, scramble_permutations, scramble_seed, step_spans
from .text import completion_text, prompt_text

__all__ = [
    "UNDEFINED_REASONS",
    "CRoSReward",
    "CRoSScore",
    "average_ranks",
    "group_ids",
    "group_rank_normalize",
    "parse_completion",
    "rank_normalize",
]

logger = logging.getLogger(__name__)

ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"

# Why Δ can be undefined; every reason is logged on every call so metric keys stay stable.
UNDEFINED_REASONS = (
    "no_answer",  # no <answer>…</answer> block
    "empty_answer",  # the answer block is blank
    "empty_reasoning",  # nothing (but whitespace) before the answer
    "too_few_steps",  # the reasoning splits into fewer than two steps
    "too_long",  # reasoning + answer exceed max_length (or the reasoning exceeds the char bound)
    "gated",  # gate="correct" and the answer is not graded correct
    "non_finite",  # the reference produced a NaN/inf log-probability
)
# Kwargs TRL passes that are not per-row dataset columns.
_NON_ROW_KWARGS = frozenset({"trainer_state", "log_extra", "log_metric", "environments"})
_MAX_NUM_SCRAMBLES = 1024
# Characters of the completion after the answer that are tokenised with it, so the answer's last
# tokens are the ones the whole completion gets (merges are local), without an unbounded tail.
_TAIL_CHARS = 64

_FIXES = (
    "Bind one before training: train with faithgrpo.trainers.FaithGRPOTrainer (or FaithRLOOTrainer), "
    "which binds CRoS to the initial policy (LoRA adapters disabled, a frozen copy of the initial "
    "adapter, or a frozen copy of the model), or give CRoS its own frozen reference with "
    "CRoSReward(reference=<checkpoint path | frozen model>, tokenizer=...) or "
    "cros.bind_reference(model, tokenizer)."
)


@dataclass(frozen=True)
class CRoSScore:
    """CRoS result for one (prompt, completion) pair.

    Attributes:
        delta: Δ = ℓ(r) − mean_m ℓ(π_m(r)), or ``None`` when undefined.
        reason: why Δ is undefined (one of `UNDEFINED_REASONS`), ``None`` when defined.
        logprob: ℓ(r), mean answer-token log-probability given the ordered reasoning.
        scrambled_logprobs: ℓ(π_m(r)) for each scramble, in draw order.
        num_steps: number of reasoning steps found.
        prompt_truncated: the prompt was cut from the left to fit ``max_length``.
    """

    delta: float | None
    reason: str | None = None
    logprob: float | None = None
    scrambled_logprobs: tuple[float, ...] = field(default=())
    num_steps: int = 0
    prompt_truncated: bool = False


def parse_completion(text: str) -> tuple[tuple[str, str, str, str] | None, str | None]:
    """Cut a completion into ``(head, reasoning, middle, answer)`` around its reasoning and answer.

    ``head + reasoning + middle`` is the completion up to and including the last ``<answer>`` tag;
    ``answer`` is that block's content. Only ``reasoning`` is scrambled. Linear time (``str.find``
    only), never raises.

    Args:
        text (`str`):
            The completion text.

    Returns:
        `tuple`: ``((head, reasoning, middle, answer), None)``, or ``(None, reason)`` with reason
        ``"no_answer"`` or ``"empty_answer"``.

    Example:
        >>> parse_completion("<think>a\\nb</think>\\n<answer>5</answer>")
        (('<think>', 'a\\nb', '</think>\\n<answer>', '5'), None)
    """
    if not isinstance(text, str):
        return None, "no_answer"
    close = text.rfind(ANSWER_CLOSE)
    open_ = text.rfind(ANSWER_OPEN, 0, close) if close >= 0 else -1
    if open_ < 0:
        return None, "no_answer"
    answer_start = open_ + len(ANSWER_OPEN)
    answer = text[answer_start:close]
    if not answer.strip():
        return None, "empty_answer"
    think_close = text.find(THINK_CLOSE, 0, open_)
    reasoning_end = think_close if think_close >= 0 else open_
    think_open = text.find(THINK_OPEN, 0, reasoning_end)
    reasoning_start = think_open + len(THINK_OPEN) if think_open >= 0 else 0
    return (
        text[:reasoning_start],
        text[reasoning_start:reasoning_end],
        text[reasoning_end:answer_start],
        answer,
    ), None


def average_ranks(values: Sequence[float]) -> list[float]:
    """Ascending ranks starting at 1, ties sharing the average of the ranks they span.

    Example:
        >>> average_ranks([0.3, -1.0, 0.3, 2.0])
        [2.5, 1.0, 2.5, 4.0]
    """
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        average = (start + end) / 2 + 1
        for k in range(start, end + 1):
            ranks[order[k]] = average
        start = end + 1
    return ranks


def rank_normalize(deltas: Sequence[float | None], undefined: str = "lowest") -> list[float | None]:
    """Rank-normalise the Δ of one group into [0, 1] (DESIGN §3.3 step 5).

    ``r_i = (rank_i − 1)/(G − 1)`` with ascending average ranks; a group of one scores 0.5.

    Args:
        deltas (`Sequence[float | None]`):
            Δ per completion of the group, ``None`` when undefined.
        undefined (`str`, *optional*, defaults to `"lowest"`):
            ``"lowest"``: undefined Δ rank below every defined one (tied among themselves).
            ``"none"``: undefined Δ score ``None`` and the defined ones are ranked among themselves.

    Returns:
        `list[float | None]`: the normalised rewards.

    Example:
        >>> rank_normalize([0.1, None, 0.5, 0.5])
        [0.3333333333333333, 0.0, 0.8333333333333334, 0.8333333333333334]
        >>> rank_normalize([0.1, None, 0.5], undefined="none")
        [0.0, None, 1.0]
    """
    if undefined not in ("lowest", "none"):
        raise ValueError(f"undefined must be 'lowest' or 'none', got {undefined!r}")
    # NaN cannot be ranked: it counts as undefined (CRoS itself never produces one).
    deltas = [None if d is None or math.isnan(d) else float(d) for d in deltas]
    if undefined == "none":
        defined = [i for i, d in enumerate(deltas) if d is not None]
        out: list[float | None] = [None] * len(deltas)
        for i, r in zip(defined, rank_normalize([deltas[i] for i in defined])):
            out[i] = r
        return out
    if len(deltas) == 1:
        return [0.5]
    keyed = [-math.inf if d is None else d for d in deltas]
    g = len(keyed)
    return [(rank - 1) / (g - 1) for rank in average_ranks(keyed)]


def group_ids(keys: Sequence[Any], num_generations: int | None = None) -> list[int]:
    """Group rows by prompt key and position.

    TRL repeats each prompt ``G`` times consecutively, so a group is a run of consecutive rows
    with the same key; with ``num_generations`` a longer run (the same prompt text drawn twice in
    one batch) is cut into groups of that size.

    Example:
        >>> group_ids(["a", "a", "b", "b", "a"])
        [0, 0, 1, 1, 2]
        >>> group_ids(["a"] * 4, num_generations=2)
        [0, 0, 1, 1]
    """
    ids: list[int] = []
    current, run = -1, 0
    for i, key in enumerate(keys):
        new_run = i == 0 or key != keys[i - 1]
        if new_run or (num_generations is not None and run == num_generations):
            current, run = current + 1, 0
        ids.append(current)
        run += 1
    return ids


def group_rank_normalize(
    deltas: Sequence[float | None],
    keys: Sequence[Any],
    undefined: str = "lowest",
    num_generations: int | None = None,
) -> list[float | None]:
    """Rank-normalise Δ within each group of rows (see `group_ids` and `rank_normalize`).

    Example:
        >>> group_rank_normalize([1.0, 2.0, 5.0], ["p", "p", "q"])
        [0.0, 1.0, 0.5]
    """
    if len(deltas) != len(keys):
        raise ValueError(f"got {len(deltas)} deltas for {len(keys)} group keys")
    members: dict[int, list[int]] = {}
    for row, gid in enumerate(group_ids(keys, num_generations)):
        members.setdefault(gid, []).append(row)
    out: list[float | None] = [None] * len(deltas)
    for rows in members.values():
        for row, value in zip(rows, rank_normalize([deltas[r] for r in rows], undefined)):
            out[row] = value
    return out


def _is_conversational(prompt: Any) -> bool:
    return isinstance(prompt, (list, tuple)) and bool(prompt) and all(isinstance(m, dict) for m in prompt)


def _prompt_key(prompt: Any) -> str:
    """Short stable key of a prompt's text (what gets gathered across processes)."""
    return hashlib.sha1(prompt_text(prompt).encode("utf-8", errors="surrogatepass")).hexdigest()


def _shared_parameters(reference: torch.nn.Module, policy: torch.nn.Module) -> list[str]:
    """Names of ``reference``'s parameters that are (or share storage with) parameters of ``policy``."""

    def storage(param: torch.Tensor) -> int:
        return param.untyped_storage().data_ptr() if param.numel() and not param.is_meta else 0

    storages = {storage(p) for p in policy.parameters()} - {0}
    return [name for name, param in reference.named_parameters() if storage(param) in storages]


def _world() -> tuple[int, int]:
    """(rank, world size) of the default process group, (0, 1) when not distributed."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


def _graded_correct(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and math.isfinite(value):
        return value >= 1.0
    return False


def _check_int(name: str, value: Any, low: int, high: int | None, hint: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high and value > high):
        bound = f"in [{low}, {high}]" if high else f">= {low}"
        raise ValueError(f"{name} must be an int {bound}, got {value!r}; {hint}")


@dataclass
class _Pending:
    """One pair on its way through scoring."""

    row: int
    num_steps: int
    prompt_ids: list[int]
    texts: list[str]  # the completion through its answer (+ a short tail): ordered first, then scrambles
    spans: list[tuple[int, int]]  # the answer's character span in each text


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


class CRoSReward:
    r"""CRoS reward: rank-normalised step-scrambling Δ under a frozen reference model.

    A TRL reward callable, ``reward(prompts, completions, **kwargs) -> list[float | None]``, named
    ``"cros"``. See the module docstring and DESIGN §3.3 for the formula and span conventions.

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

        self.num_scrambles = num_scrambles
        self.seed = seed
        self.max_length = max_length
        self.batch_size = batch_size
        self.gate = gate
        self.is_correct = is_correct
        self.undefined = undefined
        self.num_generations = num_generations
        self.distributed = distributed
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.model_kwargs = dict(model_kwargs or {})
        self.device = device
        self.reuse_prompt_cache = bool(reuse_prompt_cache)
        #: Forward passes run so far: ``prompt`` (cached prompts), ``cached_chunk``, ``chunk``.
        self.forward_counts: Counter[str] = Counter()

        self._reference_path = None if isinstance(reference, torch.nn.Module) else reference
        self._tokenizer_spec = tokenizer
        self.model: torch.nn.Module | None = None
        self.tokenizer: Any = None
        #: How the reference was bound: ``None`` (not yet), ``"path"``, ``"user"`` (a model given to
        #: the constructor or `bind_reference`), or the trainer glue's mode (``"peft_disabled_adapters"``,
        #: ``"peft_initial_adapter"``, ``"frozen_copy"``, ``"trainer_ref_model"``).
        self.reference_mode: str | None = "path" if self._reference_path is not None else None
        self._context_factory: Callable[[], Any] | None = None
        self._forward_params: frozenset[str] = frozenset()
        self._forward_var_kw = False
        self._cache_usable = True
        self._trainer_chat_template_kwargs: dict = {}
        self._trainer_render_kwargs: dict = {}  # tools / chat_template the trainer renders prompts with
        self._reference_checked = False
        if isinstance(reference, torch.nn.Module):
            self.bind_reference(reference, tokenizer)
        elif tokenizer is not None and not isinstance(tokenizer, (str, os.PathLike)):
            self.tokenizer = tokenizer

        #: CRoS results of the last call (this process's rows), for inspection.
        self.last_scores: list[CRoSScore] = []
        #: Undefined reasons (and ``prompt_truncated``) counted over all calls.
        self.reason_counts: Counter[str] = Counter()
        self._warned: set[str] = set()

    # ------------------------------------------------------------------ reference binding

    def bind_reference(
        self,
        model: torch.nn.Module,
        tokenizer: Any = None,
        context_manager_factory: Callable[[], Any] | None = None,
        *,
        mode: str = "user",
    ) -> CRoSReward:
        """Score with ``model`` from now on.

        Args:
            model (`torch.nn.Module`):
                A causal LM with the HF interface (``model(input_ids, attention_mask, ...).logits``),
                unwrapped from DDP/accelerate. It is not modified: only switched to eval mode while
                scoring, then restored. Without a context manager it must be frozen (no parameter
                with ``requires_grad=True``) when training starts: a reference that trains is the
                live policy, and `check_reference` refuses it.
            tokenizer (`PreTrainedTokenizerBase`, *optional*):
                Its tokenizer; defaults to the one given before.
            context_manager_factory (`Callable[[], ContextManager]`, *optional*):
                Called before each scoring pass; the context it returns is held while the reference
                runs, and must make ``model`` compute the initial policy (the caller vouches for it:
                such a binding is not checked against the policy). The trainer glue uses
                ``peft_model.disable_adapter`` for a fresh zero-initialised LoRA, and a swap-in of
                the initial adapter weights otherwise (see :mod:`faithgrpo.trainers.reference`).
            mode (`str`, *optional*, defaults to `"user"`):
                Recorded in `reference_mode`. Any mode other than ``"user"`` marks a binding made by
                the trainer glue from the policy it holds, which `check_reference` trusts.

        Returns:
            `CRoSReward`: ``self``.

        Example:
            ```python
            >>> cros = CRoSReward(num_scrambles=4)
            >>> cros.bind_reference(peft_model, tokenizer, peft_model.disable_adapter)  # doctest: +SKIP
            ```
        """
        if not isinstance(model, torch.nn.Module):
            raise ValueError(f"bind_reference needs a torch.nn.Module, got {type(model).__name__}")
        if tokenizer is not None:
            self.tokenizer = tokenizer
        elif self.tokenizer is None:
            raise ValueError("bind_reference needs the reference's tokenizer: pass tokenizer=...")
        if context_manager_factory is not None and not callable(context_manager_factory):
            raise ValueError("context_manager_factory must be a callable returning a context manager")
        self.model = model
        self._context_factory = context_manager_factory
        self.reference_mode = mode
        self._reference_checked = False
        self._cache_usable = True  # until this model's cache layers prove otherwise
        try:
            params = inspect.signature(model.forward).parameters
        except (TypeError, ValueError):
            params = {}
        self._forward_params = frozenset(params)
        self._forward_var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        return self

    @property
    def is_bound(self) -> bool:
        """Whether a reference is bound (a model, or a path that is loaded on first use)."""
        return self.model is not None or self._reference_path is not None

    def check_reference(self, policy: torch.nn.Module | None = None) -> None:
        """Refuse to train without a reference, or with the live policy as the reference.

        Called when training starts: by `binding_callback` (``on_train_begin``), by
        :class:`~faithgrpo.trainers.FaithGRPOTrainer`, and by the first call of the reward from a
        trainer (TRL passes ``trainer_state``), so a plain ``trl.GRPOTrainer`` stops at its first
        step rather than mid-run. A path reference is loaded here.

        A reference bound by the trainer glue (`reference_mode` other than ``"user"``/``"path"``) or
        through a context manager is trusted. Any other must not share a parameter with ``policy``
        (same module or same storage) and must have no parameter with ``requires_grad=True`` (a
        reference being trained is the policy; a separate reference is frozen with
        ``reference.requires_grad_(False)``).

        Args:
            policy (`torch.nn.Module`, *optional*):
                The model being trained, when known.

        Raises:
            RuntimeError: no reference is bound, or the reference is (part of) the live policy.
        """
        if not self.is_bound:
            raise RuntimeError(f"CRoSReward has no reference model, so CRoS cannot score. {_FIXES}")
        self._ensure_reference()
        if self.reference_mode not in ("user", "path") or self._context_factory is not None:
            self._reference_checked = True
            return
        problem = None
        if policy is not None:
            shared = _shared_parameters(self.model, policy)
            if shared:
                problem = (
                    f"shares {len(shared)} parameter(s) with the policy being trained (e.g. {shared[0]!r}): "
                    "it is the live policy, which moves with every update"
                )
        if problem is None:
            trainable = [n for n, p in self.model.named_parameters() if p.requires_grad]
            if trainable:
                problem = (
                    f"has {len(trainable)} parameter(s) with requires_grad=True (e.g. {trainable[0]!r}): a "
                    "reference that is being trained is the live policy (with a PEFT config the trainer "
                    "injects the adapter into the model you passed), not the frozen initial policy. If "
                    "it is a separate model, freeze it with reference.requires_grad_(False)"
                )
        if problem is not None:
            raise RuntimeError(
                f"CRoS reference {problem}. CRoS must score with the frozen initial policy (DESIGN §3.3). "
                "Do not pass the policy to CRoSReward; " + _FIXES[0].lower() + _FIXES[1:]
            )
        self._reference_checked = True

    def binding_callback(self) -> Any:
        """A ``transformers.TrainerCallback`` that runs `check_reference` at ``on_train_begin``.

        For a plain ``trl.GRPOTrainer`` (``callbacks=[cros.binding_callback()]``): it checks the
        reference against the policy before the first step and hands the trainer's
        ``chat_template_kwargs`` (``GRPOConfig.chat_template_kwargs``) to CRoS. Without it the
        reference is still checked at the first call, but the chat-template arguments are not known.
        :class:`~faithgrpo.trainers.FaithGRPOTrainer` installs it itself.
        """
        from faithgrpo.trainers.reference import CRoSReferenceCheck

        return CRoSReferenceCheck(self)

    def configure_from_trainer(
        self,
        *,
        chat_template_kwargs: dict | None = None,
        tools: list | None = None,
        chat_template: str | None = None,
        num_generations: int | None = None,
    ) -> CRoSReward:
        """Adopt how the trainer renders prompts, so CRoS conditions on the prompt the policy saw.

        Args:
            chat_template_kwargs (`dict`, *optional*): the trainer's ``chat_template_kwargs``; keys
                given to the constructor win.
            tools (`list`, *optional*): tools the trainer renders into conversational prompts.
            chat_template (`str`, *optional*): a chat template the trainer uses instead of the
                tokenizer's own.
            num_generations (`int`, *optional*): TRL's group size, when CRoS has none of its own.

        Returns:
            `CRoSReward`: ``self``.
        """
        if chat_template_kwargs:
            if not isinstance(chat_template_kwargs, dict):
                raise ValueError(
                    f"chat_template_kwargs must be a dict, got {type(chat_template_kwargs).__name__}"
                )
            clash = sorted(
                k
                for k, v in chat_template_kwargs.items()
                if k in self.chat_template_kwargs and self.chat_template_kwargs[k] != v
            )
            if clash:
                self._warn_once(
                    "chat_kwargs_clash",
                    f"CRoS chat_template_kwargs {clash} differ from the trainer's; CRoS keeps its own, so its "
                    "prompts may differ from the ones the policy saw",
                )
            self._trainer_chat_template_kwargs = dict(chat_template_kwargs)
        if tools:
            self._trainer_render_kwargs["tools"] = list(tools)
        if chat_template:
            self._trainer_render_kwargs["chat_template"] = chat_template
        if num_generations and self.num_generations is None:
            self.num_generations = num_generations
        return self

    def _ensure_reference(self) -> None:
        if self.model is not None:
            return
        if self._reference_path is None:
            raise RuntimeError(f"CRoSReward has no reference model, so CRoS cannot score. {_FIXES}")
        from transformers import AutoModelForCausalLM, AutoTokenizer

        path = os.fspath(self._reference_path)
        try:
            from faithgrpo.models import resolve

            path = resolve(path)
        except ImportError:
            pass
        device = self.device
        if device is None:
            device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else "cpu"
        model = AutoModelForCausalLM.from_pretrained(path, **self.model_kwargs).to(device)
        model.eval().requires_grad_(False)
        tokenizer = self.tokenizer
        if tokenizer is None:
            spec = self._tokenizer_spec if self._tokenizer_spec is not None else path
            tokenizer = AutoTokenizer.from_pretrained(os.fspath(spec))
        self.bind_reference(model, tokenizer, mode="path")

    # ------------------------------------------------------------------ tokenisation

    def _effective_max_length(self) -> int | None:
        if self.max_length is not None:
            return self.max_length
        config = getattr(self.model, "config", None)
        limit = getattr(config, "max_position_embeddings", None)
        return limit if isinstance(limit, int) and limit > 1 else None

    def _render_kwargs(self) -> dict:
        """Arguments for ``apply_chat_template``: the trainer's, then CRoS's own (which win)."""
        return {
            **self._trainer_render_kwargs,
            **self._trainer_chat_template_kwargs,
            **self.chat_template_kwargs,
        }

    def _prompt_ids(self, prompt: Any) -> list[int]:
        tok = self.tokenizer
        if _is_conversational(prompt):
            render = self._render_kwargs()
            if getattr(tok, "chat_template", None) or render.get("chat_template"):
                # As TRL's generation renders it: template text, then tokens without added specials.
                text = tok.apply_chat_template(
                    list(prompt), tokenize=False, add_generation_prompt=True, **render
                )
                return list(tok(text, add_special_tokens=False)["input_ids"])
            self._warn_once(
                "no_chat_template",
                "conversational prompt but the tokenizer has no chat template: joining message texts",
            )
        # Plain prompts are tokenised the way TRL's GRPOTrainer does (special tokens added).
        return list(tok(prompt_text(prompt))["input_ids"])

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            logger.warning(message)

    def _in_context_tokens(
        self, texts: list[str], spans: list[tuple[int, int]]
    ) -> list[tuple[list[int], list[int]]]:
        """``(context ids, answer ids)`` of each completion text, tokenised whole.

        The answer ids are the tokens whose character span overlaps the answer's ``span`` (a token
        straddling the answer's start or end belongs to the answer); the context ids are all tokens
        before them. Fast tokenizers give offsets for the whole batch in one call.
        """
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

        When the tokens through the answer extend the tokens before it, their difference is the
        answer in context. Otherwise (a merge across the answer's start) the answer is tokenised on
        its own after the context, with a warning.
        """
        tok = self.tokenizer
        start, end = span
        before = list(tok(text[:start], add_special_tokens=False)["input_ids"])
        through = list(tok(text[:end], add_special_tokens=False)["input_ids"])
        if len(through) > len(before) and through[: len(before)] == before:
            return before, through[len(before) :]
        self._warn_once(
            "answer_merge",
            "the tokenizer merges the answer with the text before it and gives no offsets: "
            "scoring the answer tokenised on its own",
        )
        return before, list(tok(text[start:end], add_special_tokens=False)["input_ids"])

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
        pending: list[tuple[Any, _Pending]] = []
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
                start = len(head) + len(variant) + len(middle)
                texts.append(head + variant + middle + answer + tail)
                answer_spans.append((start, start + len(answer)))
            pending.append((prompt, _Pending(row, len(spans), [], texts, answer_spans)))
        if pending:
            # The model is only needed (and loaded) when something is left to score.
            self._ensure_reference()
            prompt_cache: dict[str, list[int]] = {}
            for prompt, item in pending:
                key = repr(prompt) if _is_conversational(prompt) else prompt_text(prompt)
                if key not in prompt_cache:
                    prompt_cache[key] = self._prompt_ids(prompt)
                item.prompt_ids = prompt_cache[key]
            for row, score in self._score_pending([item for _, item in pending]):
                results[row] = score
        return [r if r is not None else CRoSScore(None, "non_finite") for r in results]

    def _score_pending(self, pending: list[_Pending]) -> list[tuple[int, CRoSScore]]:
        tok = self.tokenizer
        # One tokenizer call for every variant of every completion (fast tokenizers batch in Rust).
        pieces = self._in_context_tokens(
            [t for item in pending for t in item.texts], [sp for item in pending for sp in item.spans]
        )
        max_length = self._effective_max_length()
        bos = getattr(tok, "bos_token_id", None)

        sequences: dict[_Sequence, int] = {}
        plans: list[tuple[_Pending, list[int] | None, bool, str | None]] = []
        cursor = 0
        for item in pending:
            variants = pieces[cursor : cursor + len(item.texts)]
            cursor += len(item.texts)
            if not all(answer for _, answer in variants):
                plans.append((item, None, False, "empty_answer"))
                continue
            prompt = item.prompt_ids
            truncated = False
            if max_length is not None:
                tail = max(len(p) + len(a) for p, a in variants)
                if tail > max_length:
                    plans.append((item, None, False, "too_long"))
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
            plans.append((item, index_list, truncated, None))

        logprobs = self._sequence_logprobs(list(sequences)) if sequences else []
        out = []
        for item, index_list, truncated, reason in plans:
            if index_list is None:
                out.append((item.row, CRoSScore(None, reason, num_steps=item.num_steps)))
                continue
            values = [logprobs[i] for i in index_list]
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

    def _sequence_logprobs(self, sequences: list[_Sequence]) -> list[float]:
        """Mean log-probability of each answer given prompt and completion prefix, batched.

        The model input is ``prompt + prefix + answer[:-1]`` (the last answer token is only ever a
        target), left padded so every answer ends at the last position: ``logits_to_keep`` then
        materialises logits for the answer positions only. With ``reuse_prompt_cache``, sequences
        sharing a prompt run it once; its KV cache is repeated over the batch rows of the suffixes.
        """
        model = self.model
        results = [math.nan] * len(sequences)
        by_prompt: dict[tuple[int, ...], list[int]] = {}
        for i, seq in enumerate(sequences):
            by_prompt.setdefault(seq.prompt, []).append(i)
        was_training = model.training
        context = self._context_factory() if self._context_factory is not None else nullcontext()
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
        tok = self.tokenizer
        pad = next((t for t in (tok.pad_token_id, tok.eos_token_id) if t is not None), 0)
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

    def _rank(self, deltas: list[float | None], keys: list[str]) -> list[float | None]:
        rank, world = _world()
        gather = self.distributed if self.distributed is not None else world > 1
        if not gather or world == 1:
            return group_rank_normalize(deltas, keys, self.undefined, self.num_generations)
        # Groups may straddle processes: rank over the global batch (rank order = TRL's row order).
        gathered: list[Any] = [None] * world
        torch.distributed.all_gather_object(gathered, (keys, deltas))
        all_keys = [k for part_keys, _ in gathered for k in part_keys]
        all_deltas = [d for _, part_deltas in gathered for d in part_deltas]
        offset = sum(len(part_keys) for part_keys, _ in gathered[:rank])
        ranked = group_rank_normalize(all_deltas, all_keys, self.undefined, self.num_generations)
        return ranked[offset : offset + len(deltas)]

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
            raise RuntimeError(f"CRoSReward has no reference model, so CRoS cannot score. {_FIXES}")
        if not self._reference_checked and "trainer_state" in kwargs:
            self.check_reference()
        n = len(prompts)
        passed = self._gate_rows(prompts, completions, kwargs)
        scored_rows = [i for i in range(n) if passed[i]]
        scored = self.compute_deltas((prompts[i], completions[i]) for i in scored_rows) if scored_rows else []
        scores = [CRoSScore(None, "gated")] * n
        for i, score in zip(scored_rows, scored):
            scores[i] = score
        deltas = [s.delta for s in scores]
        rewards = self._rank(deltas, [_prompt_key(p) for p in prompts])
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
                log_metric(f"{self.__name__}/delta_mean", sum(defined) / len(defined))
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
