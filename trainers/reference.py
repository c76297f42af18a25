"""Binding CRoS to its frozen reference: the initial policy, without a second copy when possible.

DESIGN §3.3: the reference is the initial policy. Three cases, in order of preference:

1. **PEFT/LoRA policy**: the same model with its adapters disabled (``PeftModel.disable_adapter``
   held while CRoS scores). No extra memory; exactly the initial weights, since only adapters train.
2. **The trainer already holds a frozen reference** (TRL builds ``ref_model`` when ``beta > 0``):
   reuse it.
3. **Full fine-tuning without a reference**: a frozen copy of the policy, taken before the first
   update (one extra copy of the weights).

A CRoS reward that was given its own ``reference`` (a path or a model) keeps it.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

import torch


def is_peft_model(model: Any) -> bool:
    try:
        from peft import PeftModel
    except ImportError:  # peft is a dependency, but keep the glue importable without it
        return False
    return isinstance(model, PeftModel)


def unbound_cros_rewards(reward_funcs: Iterable[Any]) -> list[Any]:
    """The CRoS rewards among ``reward_funcs`` that still need a reference model."""
    from faithgrpo.rewards.cros import CRoSReward

    return [
        f for f in reward_funcs if isinstance(f, CRoSReward) and f.model is None and f._reference_path is None
    ]


def bind_cros_references(
    reward_funcs: Iterable[Any],
    policy: torch.nn.Module,
    tokenizer: Any,
    *,
    ref_model: torch.nn.Module | None = None,
    num_generations: int | None = None,
) -> str | None:
    """Bind every CRoS reward that has no reference to the initial policy.

    Args:
        reward_funcs: the trainer's reward functions (others are left alone).
        policy: the unwrapped policy (a ``PeftModel`` when training LoRA adapters).
        tokenizer: the policy's tokenizer.
        ref_model: a frozen reference the trainer already holds (TRL's ``ref_model``), if any.
        num_generations: TRL's group size, given to CRoS rewards that do not set their own.

    Returns:
        How the reference was bound (``"peft_disabled_adapters"``, ``"trainer_ref_model"``,
        ``"frozen_copy"``), or ``None`` when no CRoS reward needed one.
    """
    rewards = list(reward_funcs)
    from faithgrpo.rewards.cros import CRoSReward

    for reward in rewards:
        if isinstance(reward, CRoSReward) and reward.num_generations is None and num_generations:
            reward.num_generations = num_generations
    pending = unbound_cros_rewards(rewards)
    if not pending:
        return None
    if is_peft_model(policy):
        for reward in pending:
            reward.bind_reference(policy, tokenizer, policy.disable_adapter)
        return "peft_disabled_adapters"
    if ref_model is not None:
        for reward in pending:
            reward.bind_reference(ref_model, tokenizer)
        return "trainer_ref_model"
    frozen = frozen_copy(policy)
    for reward in pending:
        reward.bind_reference(frozen, tokenizer)
    return "frozen_copy"


def frozen_copy(model: torch.nn.Module) -> torch.nn.Module:
    """A deep copy of ``model`` in eval mode, without gradients and with its classes' own forwards.

    Trainers patch ``forward`` on the instance (TRL's fused LM head, fp32 casts of the head) with
    closures that call the *original* module's forward; a plain deep copy would keep calling the
    live policy. Dropping the instance-level overrides makes the copy compute with its own weights.
    """
    frozen = copy.deepcopy(model)
    for module in frozen.modules():
        module.__dict__.pop("forward", None)
    frozen.eval().requires_grad_(False)
    return frozen
