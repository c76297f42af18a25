"""Binding CRoS to its frozen reference: the initial policy, exactly, without a second model when possible.

DESIGN §3.3: the reference is the initial policy in every setup, and it never moves. The trainer
glue (:class:`~faithgrpo.trainers.FaithGRPOTrainer`) binds it from the policy it holds when the
trainer is built, before any update:

1. **PEFT policy whose adapters add nothing yet** (a fresh zero-initialised LoRA: every ``lora_B``
   is zero and only LoRA matrices train): the same model with its adapters disabled
   (``PeftModel.disable_adapter`` held while CRoS scores). No extra memory, and exact, since only
   the adapters train. Mode ``"peft_disabled_adapters"``.
2. **Any other PEFT policy**: a warm start from an existing adapter, a non-zero initial delta
   (PiSSA/OLoRA/LoftQ-style or random init), or trainable tensors outside the LoRA matrices
   (``bias="all"``/``"lora_only"``, ``modules_to_save``, DoRA magnitudes, trainable tokens). Adapters
   disabled would be the bare (for PiSSA: residual) base, not the initial policy. CRoS keeps a frozen
   copy of the initial values of every trainable tensor (adapter-sized, on the policy's device) and
   swaps it in while it scores (:class:`InitialWeights`). Mode ``"peft_initial_adapter"``.

   Why not a second PEFT adapter (as TRL's ``"ref"`` adapter)? PEFT refuses a second adapter when
   the first trains biases (biases are base-model tensors shared by all adapters), ``set_adapter``
   resets ``requires_grad`` on every adapter layer, adding a PiSSA-configured adapter re-runs its
   initialisation on the base weights, and the copy would be saved with every checkpoint. The swap
   has none of these problems and is exact for every PEFT method: the initial policy is the frozen
   tensors (which never change) plus the initial values of the trainable ones.
3. **Full fine-tuning**: TRL's own ``ref_model`` when it exists, is not synchronised
   (``sync_ref_model=False``) and equals the policy bit for bit when the trainer is built (mode
   ``"trainer_ref_model"``); otherwise a frozen copy of the policy (mode ``"frozen_copy"``). CRoS
   never follows ``sync_ref_model``: TRL's reference may move, CRoS's does not.

A CRoS reward given its own reference (a path or a frozen model) keeps it, after a check that it
does not share parameters with the policy. The check also runs when training starts
(:class:`CRoSReferenceCheck`, ``on_train_begin``) and at the reward's first call from a trainer.
"""

from __future__ import annotations

import contextlib
import copy
import re
from collections.abc import Iterable, Iterator
from typing import Any

import torch
from transformers import TrainerCallback

__all__ = [
    "CRoSReferenceCheck",
    "InitialWeights",
    "adapters_add_nothing",
    "bind_cros_references",
    "cros_rewards",
    "frozen_copy",
    "initial_policy_reference",
    "is_peft_model",
    "unboundcros_rewards",
]

# PEFT LoRA matrices (``...lora_A.<adapter>.weight``, ``...lora_embedding_B.<adapter>``).
_LORA_MATRIX = re.compile(r"(^|\.)lora_(A|B|embedding_A|embedding_B)\.")
_LORA_B = re.compile(r"(^|\.)lora_(B|embedding_B)\.")


def is_peft_model(model: Any) -> bool:
    try:
        from peft import PeftModel
    except ImportError:  # peft is a dependency, but keep the glue importable without it
        return False
    return isinstance(model, PeftModel)


def cros_rewards(reward_funcs: Iterable[Any]) -> list[Any]:
    """The CRoS rewards among ``reward_funcs``."""
    from faithgrpo.rewards.cros import CRoSReward

    return [f for f in reward_funcs if isinstance(f, CRoSReward)]


def unboundcros_rewards(reward_funcs: Iterable[Any]) -> list[Any]:
    """The CRoS rewards among ``reward_funcs`` that still need a reference model."""
    return [f for f in cros_rewards(reward_funcs) if not f.is_bound]


class InitialWeights:
    """The initial values of a model's trainable tensors, swapped in while CRoS scores.

    Taken when the trainer is built (before any update): a detached copy of every parameter with
    ``requires_grad=True``, on its own device and in its own dtype (for a PEFT policy, adapter-sized).
    Calling the object gives a context manager that copies the initial values into those parameters
    and, on exit (also on error), copies the live values back, bit for bit. Frozen parameters never
    change, so inside the context the model computes the initial policy exactly.

    Example:
        ```python
        >>> initial = InitialWeights(peft_policy)  # doctest: +SKIP
        >>> with initial():  # doctest: +SKIP
        ...     reference_logits = peft_policy(input_ids).logits
        ```
    """

    def __init__(self, model: torch.nn.Module):
        self.names: list[str] = []
        self.params: list[torch.nn.Parameter] = []
        for name, param in model.named_parameters():
            if param.requires_grad:
                self.names.append(name)
                self.params.append(param)
        with torch.no_grad():
            self.initial = [p.detach().clone() for p in self.params]

    @property
    def numel(self) -> int:
        """Number of elements held (the snapshot's size)."""
        return sum(t.numel() for t in self.initial)

    @contextlib.contextmanager
    def _swapped(self) -> Iterator[None]:
        with torch.no_grad():
            live = [p.detach().clone() for p in self.params]
            for param, value in zip(self.params, self.initial):
                param.copy_(value)
        try:
            yield
        finally:
            with torch.no_grad():
                for param, value in zip(self.params, live):
                    param.copy_(value)

    def __call__(self) -> contextlib.AbstractContextManager:
        return self._swapped()


def adapters_add_nothing(policy: torch.nn.Module) -> bool:
    """Whether disabling the PEFT adapters of ``policy`` gives exactly the current policy.

    True when only LoRA matrices train and every ``lora_B`` (of every adapter) is zero, so every LoRA
    delta ``B A`` is zero: a fresh LoRA with the default initialisation. Any other trainable tensor
    (biases, ``modules_to_save``, DoRA magnitudes, prompt embeddings) or a non-zero ``B`` (a warm
    start, PiSSA/OLoRA, ``init_lora_weights=False``) gives False.
    """
    found_b = False
    for name, param in policy.named_parameters():
        if "lora_magnitude_vector" in name:  # DoRA rescales even when B is zero
            return False
        if param.requires_grad and not _LORA_MATRIX.search(name):
            return False
        if _LORA_B.search(name):
            found_b = True
            if param.count_nonzero().item():
                return False
    return found_b


def _same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    named_a, named_b = list(a.named_parameters()), list(b.named_parameters())
    if len(named_a) != len(named_b):
        return False
    for (name_a, pa), (name_b, pb) in zip(named_a, named_b):
        if name_a != name_b or pa.shape != pb.shape or pa.dtype != pb.dtype or pa.device != pb.device:
            return False
        if not torch.equal(pa, pb):
            return False
    return True


def initial_policy_reference(
    policy: torch.nn.Module,
    *,
    ref_model: torch.nn.Module | None = None,
    sync_ref_model: bool = False,
) -> tuple[str, torch.nn.Module, Any]:
    """How to score with the initial policy: ``(mode, model, context_manager_factory)``.

    Call it before the first update (the policy *is* the initial policy then). See the module
    docstring for the modes.

    Args:
        policy: the unwrapped policy (a ``PeftModel`` when training adapters).
        ref_model: TRL's frozen reference (``beta > 0`` without PEFT), if any.
        sync_ref_model: whether TRL moves ``ref_model`` towards the policy during training.
    """
    if is_peft_model(policy):
        if adapters_add_nothing(policy):
            return "peft_disabled_adapters", policy, policy.disable_adapter
        return "peft_initial_adapter", policy, InitialWeights(policy)
    if ref_model is not None and not sync_ref_model and _same_weights(ref_model, policy):
        return "trainer_ref_model", ref_model, None
    return "frozen_copy", frozen_copy(policy), None


def bind_cros_references(
    reward_funcs: Iterable[Any],
    policy: torch.nn.Module,
    tokenizer: Any,
    *,
    ref_model: torch.nn.Module | None = None,
    sync_ref_model: bool = False,
    num_generations: int | None = None,
    chat_template_kwargs: dict | None = None,
    tools: list | None = None,
    chat_template: str | None = None,
) -> str | None:
    """Bind every CRoS reward that has no reference to the initial policy; check the others.

    Args:
        reward_funcs: the trainer's reward functions (others are left alone).
        policy: the unwrapped policy (a ``PeftModel`` when training LoRA adapters), before any update.
        tokenizer: the policy's tokenizer.
        ref_model: a frozen reference the trainer holds (TRL's ``ref_model``), if any.
        sync_ref_model: TRL's ``sync_ref_model``: when set, ``ref_model`` moves and is never used.
        num_generations: TRL's group size, given to CRoS rewards that do not set their own.
        chat_template_kwargs, tools, chat_template: how the trainer renders conversational prompts,
            handed to every CRoS reward (see ``CRoSReward.configure_from_trainer``).

    Returns:
        How the reference was bound (``"peft_disabled_adapters"``, ``"peft_initial_adapter"``,
        ``"trainer_ref_model"``, ``"frozen_copy"``), or ``None`` when no CRoS reward needed one.

    Raises:
        RuntimeError: a CRoS reward's own reference is the live policy (see
            ``CRoSReward.check_reference``).
    """
    rewards = cros_rewards(reward_funcs)
    for reward in rewards:
        reward.configure_from_trainer(
            chat_template_kwargs=chat_template_kwargs,
            tools=tools,
            chat_template=chat_template,
            num_generations=num_generations,
        )
    pending = [r for r in rewards if not r.is_bound]
    for reward in rewards:
        if reward.is_bound:
            reward.check_reference(policy)
    if not pending:
        return None
    mode, model, factory = initial_policy_reference(
        policy, ref_model=ref_model, sync_ref_model=sync_ref_model
    )
    for reward in pending:
        reward.bind_reference(model, tokenizer, factory, mode=mode)
    return mode


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


class CRoSReferenceCheck(TrainerCallback):
    """Check a CRoS reward's reference when training starts (``on_train_begin``).

    Hands the trainer's ``chat_template_kwargs`` to the reward and runs
    ``CRoSReward.check_reference`` against the model being trained: no reference, or one that is
    the live policy, stops training before its first step. Get one with
    ``CRoSReward.binding_callback()``; :class:`~faithgrpo.trainers.FaithGRPOTrainer` installs it.
    """

    def __init__(self, reward: Any):
        self.reward = reward

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self.reward.configure_from_trainer(chat_template_kwargs=getattr(args, "chat_template_kwargs", None))
        self.reward.check_reference(policy=model)
        return control
