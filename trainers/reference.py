"""Binding CRoS to its frozen reference: the initial policy, exactly, without a second model when possible.

The contract (docs/recipes.md, "CRoS reference binding"): the reference is the initial policy in every setup, and it never moves. The trainer
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
2b. **A PEFT policy next to TRL's own "ref" adapter** (``beta > 0`` from a warm start: TRL copies the
   adapter into a frozen ``"ref"`` adapter, the KL anchor): when every trainable tensor is a LoRA
   matrix of the ``"default"`` adapter and equals its ``"ref"`` twin when the trainer is built, CRoS
   scores with that adapter active (TRL's ``use_adapter``), sharing TRL's copy instead of keeping a
   second one. Not with ``sync_ref_model`` (TRL then moves the ``"ref"`` adapter). Mode
   ``"trainer_ref_adapter"``.
3. **Full fine-tuning**: TRL's own ``ref_model`` when it exists, is not synchronised
   (``sync_ref_model=False``) and equals the policy bit for bit when the trainer is built (mode
   ``"trainer_ref_model"``); otherwise a frozen copy of the policy (mode ``"frozen_copy"``). CRoS
   never follows ``sync_ref_model``: TRL's reference may move, CRoS's does not.

Sharded training (FSDP2, DeepSpeed ZeRO-3) keeps modes 1 and 2: the binding is made before the
wrapper shards the policy, :class:`InitialWeights` finds the parameters by name at every swap (FSDP2
replaces the parameter objects) and lays its snapshot out like them, and the scorer runs as many
forwards on every process as the busiest one needs (a sharded forward is a collective).

A CRoS reward given its own reference (a path or a frozen model) keeps it, after a check that it
does not share parameters with the policy and, when the policy can run a forward here, that both
give the same log-probabilities on a probe (so a base-model reference next to a warm-started policy
is refused). The check also runs when training starts
(:class:`~faithgrpo.rewards.cros.callback.CRoSReferenceCheck`, ``on_train_begin``) and at the reward's first call from a trainer.
"""

from __future__ import annotations

import contextlib
import copy
import re
from collections.abc import Iterable, Iterator
from typing import Any

import torch

from faithgrpo.rewards.cros.scoring import is_dtensor

__all__ = [
    "InitialWeights",
    "adapters_add_nothing",
    "bind_cros_references",
    "cros_rewards",
    "frozen_copy",
    "initial_policy_reference",
    "is_peft_model",
    "trainer_ref_adapter_is_initial",
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
    from faithgrpo.rewards.cros.reward import CRoSReward

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

    Parameters are looked up by name at every swap, not held: a sharding wrapper applied after the
    snapshot (FSDP2's ``fully_shard``, which accelerate applies when training starts) replaces the
    parameter objects, and a swap into the old ones would leave the live policy scoring. So it works
    through sharding:

    - **FSDP2** (parameters become ``DTensor`` shards): at the first swap each snapshot is laid out
      like its parameter (``distribute_tensor`` with the parameter's mesh and placements, sharded
      locally without communication, since every rank holds the same snapshot), and the full
      snapshot is dropped; each rank then holds and copies only its shard of the adapter.
    - **DeepSpeed ZeRO-3** (parameters keep their objects, their data is partitioned): the trainable
      parameters are gathered (``deepspeed.zero.GatheredParameters``, adapter-sized) for the copy and
      re-partitioned after it. This path is written against DeepSpeed's documented API but has not
      run here (no DeepSpeed, no GPU); FSDP2 is the tested sharded path.

    A parameter that disappeared or whose layout cannot be matched (e.g. FSDP1's flattened
    parameters) stops scoring with an error naming it, never a silent swap into nothing.

    Example:
        ```python
        >>> initial = InitialWeights(peft_policy)  # doctest: +SKIP
        >>> with initial():  # doctest: +SKIP
        ...     reference_logits = peft_policy(input_ids).logits
        ```
    """

    def __init__(self, model: torch.nn.Module):
        self.model = model
        self.names: list[str] = []
        initial: list[torch.Tensor] = []
        with torch.no_grad():
            for name, param in model.named_parameters():
                if param.requires_grad:
                    self.names.append(name)
                    initial.append(param.detach().clone())
        self.initial: dict[str, torch.Tensor] = dict(zip(self.names, initial))

    @property
    def numel(self) -> int:
        """Number of elements held on this process (the snapshot's size; a shard of it under FSDP2)."""
        return sum(_local(t).numel() for t in self.initial.values())

    @property
    def nbytes(self) -> int:
        """Bytes held on this process by the snapshot."""
        return sum(_local(t).numel() * _local(t).element_size() for t in self.initial.values())

    def _params(self) -> list[torch.nn.Parameter]:
        current = dict(self.model.named_parameters())
        missing = [name for name in self.names if name not in current]
        if missing:
            raise RuntimeError(
                f"CRoS cannot swap in the initial adapter: parameter {missing[0]!r} is no longer in the model "
                f"({len(missing)} missing); the policy was rebuilt or re-wrapped after CRoS was bound"
            )
        return [current[name] for name in self.names]

    def _laid_out(self, name: str, param: torch.nn.Parameter) -> torch.Tensor:
        """The snapshot of ``name`` in ``param``'s layout (sharded like it under FSDP2)."""
        value = self.initial[name]
        if value.dtype != param.dtype:  # the policy was cast after the snapshot (e.g. for training)
            value = self.initial[name] = value.to(param.dtype)
        if is_dtensor(param) and not is_dtensor(value):
            from torch.distributed.tensor import distribute_tensor

            value = distribute_tensor(
                value.to(param.to_local().device), param.device_mesh, param.placements, src_data_rank=None
            )
            self.initial[name] = value  # the full snapshot is dropped: each rank keeps its shard
        if value.shape != param.shape:
            raise RuntimeError(
                f"CRoS cannot swap in the initial adapter: parameter {name!r} is now {tuple(param.shape)}, "
                f"its snapshot {tuple(value.shape)}. Flattened parameters "
                "(FSDP1) are not supported: use FSDP2 (fsdp_version: 2) or DeepSpeed ZeRO-3"
            )
        return value

    @contextlib.contextmanager
    def _swapped(self) -> Iterator[None]:
        _reshard(self.model)
        params = self._params()
        partitioned = [p for p in params if hasattr(p, "ds_id")]  # DeepSpeed ZeRO-3
        with _gathered(partitioned), torch.no_grad():
            values = [self._laid_out(n, p) for n, p in zip(self.names, params)]
            live = [p.detach().clone() for p in params]
            for param, value in zip(params, values):
                param.copy_(value)
        try:
            yield
        finally:
            with _gathered(partitioned), torch.no_grad():
                for param, value in zip(params, live):
                    param.copy_(value)

    def __call__(self) -> contextlib.AbstractContextManager:
        return self._swapped()


def _reshard(model: torch.nn.Module) -> None:
    """Put FSDP2 modules back in their sharded state (the root stays gathered after a forward), so
    every parameter is its registered ``DTensor`` shard while the initial values are swapped in."""
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:  # pragma: no cover - torch builds without distributed
        return
    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.reshard()


def _local(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.to_local() if is_dtensor(tensor) else tensor


def _gathered(params: list[torch.nn.Parameter]) -> contextlib.AbstractContextManager:
    """DeepSpeed ZeRO-3 partitioned ``params`` gathered while held (and re-partitioned after), else nothing."""
    if not params:
        return contextlib.nullcontext()
    import deepspeed  # present: the parameters carry its partitioning attributes

    # Every rank writes the same values; rank 0's are the ones re-partitioned.
    return deepspeed.zero.GatheredParameters(params, modifier_rank=0)


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


def trainer_ref_adapter_is_initial(policy: torch.nn.Module, name: str = "ref") -> bool:
    """Whether the PEFT adapter ``name`` (TRL's frozen KL anchor) is exactly the trainable adapter's state.

    True when ``"default"`` is the active adapter, every trainable tensor is one of its LoRA matrices
    (and every one of them trains, so switching adapters back restores the same trainable set), and
    each has a frozen twin in ``name`` with equal values. Call it before the first update.
    """
    config = getattr(policy, "peft_config", None)
    if (
        not isinstance(config, dict)
        or name not in config
        or getattr(policy, "active_adapter", None) != "default"
    ):
        return False
    params = dict(policy.named_parameters())
    default = {n: p for n, p in params.items() if ".default." in n and _LORA_MATRIX.search(n)}
    trainable = {n for n, p in params.items() if p.requires_grad}
    if not default or trainable != set(default):
        return False
    twins = {n: params.get(n.replace(".default.", f".{name}.")) for n in default}
    return all(
        twin is not None and not twin.requires_grad and twin.shape == p.shape and torch.equal(twin, p)
        for (n, p), twin in zip(default.items(), twins.values())
    )


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
        if not sync_ref_model and trainer_ref_adapter_is_initial(policy):
            from trl.trainer.utils import use_adapter

            return "trainer_ref_adapter", policy, lambda: use_adapter(policy, "ref")
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
        ``"trainer_ref_adapter"``, ``"trainer_ref_model"``, ``"frozen_copy"``), or ``None`` when no
        CRoS reward needed one.

    Raises:
        CRoSReferenceError: a CRoS reward's own reference is the live policy, or does not compute the
            policy (the initial policy, here) on a probe (see ``CRoSReward.check_reference``).
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
            # Before any update: the policy is the initial policy, so a separate reference must equal it.
            reward.check_reference(policy, verify=True)
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
