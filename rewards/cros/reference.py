"""How CRoS gets its frozen reference and makes sure it is one (docs/recipes.md, "CRoS reference binding").

`ReferenceBinding` is the part of `~faithgrpo.rewards.cros.reward.CRoSReward` that binds a reference model
(given, loaded lazily from a path, or bound to the initial policy by the trainer glue), adopts the
trainer's prompt rendering, and refuses to train with no reference or with the live policy. The
model itself is held and run by the reward's `~faithgrpo.rewards.cros.scoring.ReferenceScorer`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

import torch

__all__ = ["CRoSReferenceError", "ReferenceBinding", "probe_difference"]

#: The probe text both models score when a separately given reference is compared with the policy.
PROBE_TEXT = "Step 1: X -> M; M -> Y.\nStep 2: so M mediates.\n<answer>{M}</answer>"


class CRoSReferenceError(RuntimeError):
    """CRoS's reference is missing, is the live policy, or is not the initial policy."""


def _probe_ready(model: torch.nn.Module) -> bool:
    """Whether ``model`` can run a plain local forward now (no meta, sharded or partitioned weights)."""
    from faithgrpo.rewards.cros.scoring import is_sharded

    return not is_sharded(model) and not any(p.is_meta for p in model.parameters())


def probe_difference(reference: torch.nn.Module, policy: torch.nn.Module, tokenizer: Any) -> float | None:
    """Largest absolute difference of the two models' next-token log-probabilities on a fixed probe.

    Both run in eval mode (restored after) under ``torch.no_grad`` on ``PROBE_TEXT``. ``None`` when
    the comparison cannot run here: a model sharded or on the meta device (not loaded yet), or vocab
    sizes that differ (the recipe refuses a reference with another tokenizer before this point).
    """
    if not (_probe_ready(reference) and _probe_ready(policy)):
        return None
    ids = list(tokenizer(PROBE_TEXT)["input_ids"])
    outputs = []
    for model in (reference, policy):
        was_training = model.training
        device = next(model.parameters()).device
        try:
            model.eval()
            with torch.no_grad():
                logits = model(input_ids=torch.tensor([ids], device=device)).logits[0]
        finally:
            model.train(was_training)
        outputs.append(torch.log_softmax(logits.double(), dim=-1).cpu())
    if outputs[0].shape != outputs[1].shape:
        return None
    return float((outputs[0] - outputs[1]).abs().max())


def _probe_tolerance(model: torch.nn.Module) -> float:
    dtype = next(model.parameters()).dtype
    return 1e-4 if dtype in (torch.float32, torch.float64) else 5e-2


#: The reward a binding method returns (``self``: a `~faithgrpo.rewards.cros.reward.CRoSReward`).
Binding = TypeVar("Binding", bound="ReferenceBinding")

REFERENCE_FIXES = (
    "Bind one before training: train with faithgrpo.trainers.FaithGRPOTrainer (or FaithRLOOTrainer), "
    "which binds CRoS to the initial policy (LoRA adapters disabled, a frozen copy of the initial "
    "adapter, or a frozen copy of the model), or give CRoS its own frozen reference with "
    "CRoSReward(reference=<checkpoint path | frozen model>, tokenizer=...) or "
    "cros.bind_reference(model, tokenizer)."
)


def _shared_parameters(reference: torch.nn.Module, policy: torch.nn.Module) -> list[str]:
    """Names of ``reference``'s parameters that are (or share storage with) parameters of ``policy``."""

    def storage(param: torch.Tensor) -> int:
        return param.untyped_storage().data_ptr() if param.numel() and not param.is_meta else 0

    storages = {storage(p) for p in policy.parameters()} - {0}
    return [name for name, param in reference.named_parameters() if storage(param) in storages]


class ReferenceBinding:
    """Reference binding and checks of `CRoSReward`.

    A mixin: the state it reads and sets (``scorer``, ``tokenizer``, ``reference_mode``,
    ``_reference_path``, ``_reference_checked``, the trainer's rendering arguments) is created by
    ``CRoSReward.__init__``.
    """

    def bind_reference(
        self: Binding,
        model: torch.nn.Module,
        tokenizer: Any = None,
        context_manager_factory: Callable[[], Any] | None = None,
        *,
        mode: str = "user",
    ) -> Binding:
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
        self.scorer.bind(model, context_manager_factory)
        self.reference_mode = mode
        self._reference_checked = False
        self.reference_probe_difference = None
        return self

    def describe_reference(self) -> str:
        """One line on what CRoS scores with, for logs (e.g. the recipe's ``CRoS reference:`` line)."""
        mode = self.reference_mode
        if mode == "peft_disabled_adapters":
            return (
                "the initial policy: the policy's own forward with its LoRA adapters disabled (a fresh "
                "adapter adds nothing yet); no second model"
            )
        if mode == "peft_initial_adapter":
            factory = self._context_factory
            size = f" ({factory.numel:,} values)" if hasattr(factory, "numel") else ""
            return (
                "the initial policy: the policy's own forward with a frozen copy of its initial trainable "
                f"tensors{size} swapped in; no second model"
            )
        if mode == "trainer_ref_adapter":
            return (
                "the initial policy: the policy's own forward with TRL's frozen \"ref\" adapter (the KL anchor, "
                "a copy of the warm-start adapter) active; no second copy"
            )
        if mode == "frozen_copy":
            return "the initial policy: a frozen copy of the model (full fine-tuning)"
        if mode == "trainer_ref_model":
            return "the initial policy: TRL's frozen ref_model (never synchronised)"
        if mode == "path":
            adapter = getattr(self, "reference_adapter", None)
            what = f"{self._reference_path}" + (f" + adapter {adapter}" if adapter else "")
            difference = self.reference_probe_difference
            verified = (
                f"equal to the initial policy on a probe (max |Δ log p| {difference:.2g})"
                if difference is not None
                else "not compared with the policy (not materialised locally when bound)"
            )
            return f"{what}, a separately loaded frozen model; {verified}"
        if mode == "user":
            return "a model given to CRoSReward"
        return "none bound yet"

    @property
    def is_bound(self) -> bool:
        """Whether a reference is bound (a model, or a path that is loaded on first use)."""
        return self.model is not None or self._reference_path is not None

    def check_reference(self, policy: torch.nn.Module | None = None, *, verify: bool = False) -> None:
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
            verify (`bool`, *optional*, defaults to `False`):
                Also compare the reference with ``policy`` on a probe and refuse it when they differ
                (`probe_difference`). Only when ``policy`` is known to be the initial policy: the
                trainer glue does it when the trainer is built, before any update or checkpoint load
                (at ``on_train_begin`` a resumed run already holds trained weights).

        Raises:
            RuntimeError: no reference is bound, or the reference is (part of) the live policy.
        """
        if not self.is_bound:
            raise CRoSReferenceError(
                f"CRoSReward has no reference model, so CRoS cannot score. {REFERENCE_FIXES}"
            )
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
            raise CRoSReferenceError(
                f"CRoS reference {problem}. CRoS must score with the frozen initial policy (docs/recipes.md, 'CRoS reference binding'). "
                "Do not pass the policy to CRoSReward; " + REFERENCE_FIXES[0].lower() + REFERENCE_FIXES[1:]
            )
        if verify and policy is not None:
            self._verify_initial_policy(policy)
        self._reference_checked = True

    def _verify_initial_policy(self, policy: torch.nn.Module) -> None:
        """Refuse a separately given reference that does not compute the policy it is checked against.

        Run when the trainer binds CRoS, before any update, so the policy is the initial policy: a
        reference loaded from the base checkpoint while the policy warm-starts from an adapter is
        caught here (its log-probabilities differ), not after a run spent against the wrong model.
        Skipped (difference ``None``) when the policy is not materialised locally yet.
        """
        difference = probe_difference(self.model, policy, self.tokenizer)
        self.reference_probe_difference = difference
        tolerance = _probe_tolerance(self.model)
        if difference is not None and difference > tolerance:
            where = f" ({self._reference_path})" if self._reference_path is not None else ""
            adapter = (
                f" + adapter {self.reference_adapter}" if getattr(self, "reference_adapter", None) else ""
            )
            raise CRoSReferenceError(
                f"CRoS reference{where}{adapter} is not the initial policy: on a probe its next-token "
                f"log-probabilities differ from the policy's by up to {difference:.3g} (tolerance "
                f"{tolerance:g}). With a warm start the reference needs the warm-start adapter "
                "(CRoSReward(reference_adapter=...); the recipe applies it); with LoRA, drop the reference "
                "and let the trainer bind the policy's own forward with its initial adapter"
            )

    def binding_callback(self) -> Any:
        """A ``transformers.TrainerCallback`` that runs `check_reference` at ``on_train_begin``.

        For a plain ``trl.GRPOTrainer`` (``callbacks=[cros.binding_callback()]``): it checks the
        reference against the policy before the first step and hands the trainer's
        ``chat_template_kwargs`` (``GRPOConfig.chat_template_kwargs``) to CRoS. Without it the
        reference is still checked at the first call, but the chat-template arguments are not known.
        :class:`~faithgrpo.trainers.FaithGRPOTrainer` installs it itself.
        """
        from faithgrpo.rewards.cros.callback import CRoSReferenceCheck

        return CRoSReferenceCheck(self)

    def configure_from_trainer(
        self: Binding,
        *,
        chat_template_kwargs: dict | None = None,
        tools: list | None = None,
        chat_template: str | None = None,
        num_generations: int | None = None,
    ) -> Binding:
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

    def _render_kwargs(self) -> dict:
        """Arguments for ``apply_chat_template``: the trainer's, then CRoS's own (which win)."""
        return {
            **self._trainer_render_kwargs,
            **self._trainer_chat_template_kwargs,
            **self.chat_template_kwargs,
        }

    def _ensure_reference(self) -> None:
        if self.model is not None:
            return
        if self._reference_path is None:
            raise RuntimeError(f"CRoSReward has no reference model, so CRoS cannot score. {REFERENCE_FIXES}")
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
        if self.reference_adapter is not None:
            from peft import PeftModel

            # Unmerged, as the policy computes it: base weights plus the adapter's initial tensors.
            model = PeftModel.from_pretrained(model, os.fspath(self.reference_adapter), is_trainable=False)
            model = model.to(device)
        model.eval().requires_grad_(False)
        tokenizer = self.tokenizer
        if tokenizer is None:
            spec = self._tokenizer_spec if self._tokenizer_spec is not None else path
            tokenizer = AutoTokenizer.from_pretrained(os.fspath(spec))
        self.bind_reference(model, tokenizer, mode="path")
