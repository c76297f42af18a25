"""The trainer callback that checks a CRoS reward's reference when training starts.

Its own module so that importing :mod:`faithgrpo.rewards.cros` does not load ``transformers``'
trainer machinery; :meth:`~faithgrpo.rewards.cros.reference.ReferenceBinding.binding_callback` imports
it on first use.
"""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback

__all__ = ["CRoSReferenceCheck"]


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
