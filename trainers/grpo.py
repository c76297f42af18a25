"""TRL trainers with CRoS bound to the frozen initial policy.

:class:`FaithGRPOTrainer` and :class:`FaithRLOOTrainer` are TRL's ``GRPOTrainer`` / ``RLOOTrainer``
plus one step at the end of ``__init__``, before any update: every
:class:`~faithgrpo.rewards.cros.CRoSReward` without a reference of its own is bound to the initial
policy (see :mod:`faithgrpo.trainers.reference`: adapters disabled for a fresh zero-initialised LoRA,
a frozen copy of the initial adapter for warm starts and non-zero initialisations, a frozen copy of
the model for full fine-tuning; never TRL's synced reference). Every CRoS reward also receives the
trainer's ``chat_template_kwargs`` (and tools / chat template), and one given its own reference is
refused when that reference is the live policy. All other behaviour, arguments and logging are TRL's.

Distributed notes: under accelerate DDP every process holds the full policy, so the unwrapped
model (adapters disabled, or the initial adapter swapped in) scores locally and CRoS gathers Δ
across processes before ranking. Under DeepSpeed ZeRO-3 and FSDP the parameters are sharded;
scoring with the unwrapped module would need the parameters gathered (e.g.
``deepspeed.zero.GatheredParameters``) on every process, which this glue does not do yet: give CRoS
its own ``reference`` path there (a separate, small frozen model on each device), or use ZeRO-2,
where parameters are not sharded.
"""

from __future__ import annotations

from typing import Any

from trl import GRPOTrainer, RLOOTrainer

from faithgrpo.trainers.reference import CRoSReferenceCheck, bind_cros_references, cros_rewards


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


class FaithGRPOTrainer(_BindsCRoSReference, GRPOTrainer):
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
        self._bind_cros()


class FaithRLOOTrainer(_BindsCRoSReference, RLOOTrainer):
    """``trl.RLOOTrainer`` with the same CRoS reference binding as :class:`FaithGRPOTrainer`."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._bind_cros()
