"""TRL trainers with CRoS bound to the frozen initial policy.

:class:`FaithGRPOTrainer` and :class:`FaithRLOOTrainer` are TRL's ``GRPOTrainer`` / ``RLOOTrainer``
plus one step at the end of ``__init__``, before any update: every
:class:`~faithgrpo.rewards.cros.reward.CRoSReward` without a reference of its own is bound to the initial
policy (see :mod:`faithgrpo.trainers.reference`: adapters disabled for a fresh zero-initialised LoRA,
a frozen copy of the initial adapter for warm starts and non-zero initialisations, a frozen copy of
the model for full fine-tuning; never TRL's synced reference). Every CRoS reward also receives the
trainer's ``chat_template_kwargs`` (and tools / chat template), and one given its own reference is
refused when that reference is the live policy. Both also log where each step's time goes
(``time/<phase>`` metrics, :mod:`faithgrpo.trainers.timing`). All other behaviour, arguments and
logging are TRL's; ``FaithGRPOTrainer`` takes TRL's ``rollout_func``, e.g.
:class:`~faithgrpo.trainers.rollout.DecodeRollout` (the decode engine samples the completions on CPU).

Distributed notes: under accelerate DDP every process holds the full policy, so the unwrapped
model (adapters disabled, or the initial adapter swapped in) scores locally and CRoS gathers Δ
across processes before ranking. Under FSDP2 and DeepSpeed ZeRO-3 the same binding scores through
the policy's own sharded forward: the initial adapter is swapped in shard by shard (FSDP2) or
gathered adapter-sized (ZeRO-3), and every process runs the same number of reference forwards
(:meth:`~faithgrpo.rewards.cros.scoring.ReferenceScorer.is_sharded`), so no process holds a second
model. Only full fine-tuning under sharding needs a separately loaded reference (``--cros_reference``).
Tested on CPU with torch's ``fully_shard`` over two gloo ranks (``tests/test_cros_sharded.py``); TRL's
trainer itself runs FSDP only on GPUs (accelerate enables it only there), and the ZeRO-3 path has
not run here (no DeepSpeed, no GPU).

Memory on CPU: TRL's fused LM head (``add_fused_lm_head``) projects hidden states through the
vocabulary in wide fp32 tiles and, on devices without Triton, scores *every* position of prompt +
completion, although only the completion's labels count. Both trainers therefore run TRL's log-prob
pass on CPU with only the labelled positions projected (the compact path TRL takes on Triton
devices) and narrower vocabulary tiles (:func:`compact_cpu_lm_head`): the same log-probabilities and
gradients up to float rounding, with a fraction of the temporaries and of the head's arithmetic
(measured in docs/performance.md, "Memory").
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from trl import GRPOTrainer, RLOOTrainer

from faithgrpo.rewards.cros.callback import CRoSReferenceCheck
from faithgrpo.trainers.reference import bind_cros_references, cros_rewards
from faithgrpo.trainers.timing import PhaseTimes

__all__ = ["CPU_LM_HEAD_VOCAB_CHUNK", "FaithGRPOTrainer", "FaithRLOOTrainer", "compact_cpu_lm_head"]

#: Vocabulary columns per tile of TRL's fused LM head on CPU (TRL's default is 32768). Each tile's
#: fp32 temporaries scale with it: 8192 keeps them near 0.5 GB for the CPU demo's loss pass.
CPU_LM_HEAD_VOCAB_CHUNK = 8192


@contextlib.contextmanager
def compact_cpu_lm_head(vocab_chunk: int = CPU_LM_HEAD_VOCAB_CHUNK) -> Iterator[bool]:
    """While held, TRL's fused LM head on CPU projects only labelled positions, in ``vocab_chunk`` tiles.

    TRL's ``add_fused_lm_head`` forward decides per call whether to score only the positions whose
    label is not ``-100`` (it does on Triton devices) and reads the vocabulary tile width from a
    module constant. Both are TRL internals, looked up when the forward runs: this context makes the
    compact choice for CPU tensors (other devices keep TRL's choice) and narrows the tile, and
    restores both on exit. The backward pass needs neither (the tile width travels with autograd's
    context), so holding the context around the forward is enough. Values are unchanged up to float
    rounding: every position's log-probability is computed the same way, only fewer positions and
    narrower tiles of the online log-sum-exp.

    Yields whether TRL's internals were found and patched (``False``: a TRL without them; a no-op).
    """
    try:
        from trl.trainer import utils as trl_utils
    except ImportError:  # pragma: no cover - trl is a dependency
        yield False
        return
    original_use_triton = getattr(trl_utils, "_use_triton", None)
    original_chunk = getattr(trl_utils, "_CHUNKED_LOGPROB_CHUNK_SIZE", None)
    if not callable(original_use_triton) or not isinstance(original_chunk, int):
        yield False
        return

    def use_triton_or_compact_on_cpu(device: torch.device) -> bool:
        return device.type == "cpu" or original_use_triton(device)

    trl_utils._use_triton = use_triton_or_compact_on_cpu
    trl_utils._CHUNKED_LOGPROB_CHUNK_SIZE = min(original_chunk, vocab_chunk)
    try:
        yield True
    finally:
        trl_utils._use_triton = original_use_triton
        trl_utils._CHUNKED_LOGPROB_CHUNK_SIZE = original_chunk


class _CompactCPULMHead:
    """Mixin: TRL's per-token log-prob pass through :func:`compact_cpu_lm_head` when training on CPU."""

    def _get_per_token_logps_and_entropies(self, *args: Any, **kwargs: Any):
        if self.accelerator.device.type != "cpu":
            return super()._get_per_token_logps_and_entropies(*args, **kwargs)
        with compact_cpu_lm_head():
            return super()._get_per_token_logps_and_entropies(*args, **kwargs)


class _BindsCRoSReference:
    """Mixin: after TRL's ``__init__``, bind CRoS rewards to the initial policy."""

    cros_reference_mode: str | None = None

    def _bind_cros(self) -> None:
        ref_model = getattr(self, "ref_model", None)
        if ref_model is not None:
            ref_model = self.accelerator.unwrap_model(ref_model)
        self.cros_reference_mode = bind_cros_references(
            self.reward_funcs,
            self.accelerator.unwrap_model(self.model),
            self.processing_class,
            ref_model=ref_model,
            sync_ref_model=bool(getattr(self.args, "sync_ref_model", False)),
            num_generations=getattr(self.args, "num_generations", None),
            chat_template_kwargs=getattr(self, "chat_template_kwargs", None)
            or getattr(self.args, "chat_template_kwargs", None),
            tools=getattr(self, "tools", None) or None,
            chat_template=getattr(self, "chat_template", None),
        )
        # Checked again when training starts, in case a reference was rebound in between.
        for reward in cros_rewards(self.reward_funcs):
            self.add_callback(CRoSReferenceCheck(reward))


class FaithGRPOTrainer(PhaseTimes, _CompactCPULMHead, _BindsCRoSReference, GRPOTrainer):
    """``trl.GRPOTrainer`` whose CRoS rewards score with the initial policy as frozen reference.

    Example:
        ```python
        >>> from peft import LoraConfig
        >>> from faithgrpo.rewards import get_reward_funcs
        >>> trainer = FaithGRPOTrainer(
        ...     model="embedded_checkpoint_dir", reward_funcs=get_reward_funcs("outcome,format,cros"),
        ...     args=grpo_config, train_dataset=dataset, peft_config=LoraConfig(r=16))  # doctest: +SKIP
        ```
    """

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._init_phase_times()
        self._bind_cros()


class FaithRLOOTrainer(PhaseTimes, _CompactCPULMHead, _BindsCRoSReference, RLOOTrainer):
    """``trl.RLOOTrainer`` with the same CRoS reference binding (and CPU LM head) as :class:`FaithGRPOTrainer`."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._init_phase_times()
        self._bind_cros()
