#!/usr/bin/env python
"""A plain TRL GRPO script that gains faithgrpo's CRoS and CALVER rewards in three lines.

    python recipes/add_reward_term.py --model_name_or_path Qwen/Qwen2.5-0.5B-Instruct --output_dir runs/plus
    python recipes/add_reward_term.py --model_name_or_path ./my-checkpoint --use_cpu true --bf16 false \
        --max_steps 2 --per_device_train_batch_size 4 --num_generations 4

Everything else is TRL as usual: ``TrlParser``, a dataset, reward functions, ``GRPOConfig``,
``GRPOTrainer``. The three lines marked ``faithgrpo`` import the rewards, build CRoS with the initial
policy as its frozen reference, and append both rewards to the list (weights, if you set any, need
two more entries). CALVER reads the dataset's ``problem`` column (DESIGN §4); rows without one (e.g.
other tasks in a mixture) score ``None`` and TRL skips them.

With LoRA, ``from faithgrpo.trainers import FaithGRPOTrainer`` in place of ``GRPOTrainer`` binds CRoS
to the policy with its adapters disabled instead of loading a second copy (then build
``CRoSReward()`` without a reference).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from trl import GRPOConfig, GRPOTrainer, ModelConfig, ScriptArguments, TrlParser, get_peft_config
from trl.rewards import think_format_reward

from faithgrpo.rewards import CRoSReward, calver_reward  # faithgrpo 1/3


@dataclass
class ExampleArguments(ScriptArguments):
    """``ScriptArguments`` plus the size of the example causal dataset."""

    num_problems: int = 64


def example_dataset(size: int, seed: int):
    """Example data: causal questions with the ``problem`` column CALVER reads (your dataset goes here)."""
    from faithgrpo.tasks.causal import CausalGraphConfig, build_dataset

    return build_dataset(CausalGraphConfig(size=size, seed=seed, min_nodes=4, max_nodes=5))


def main(argv: list[str] | None = None) -> GRPOTrainer:
    parser = TrlParser((ExampleArguments, GRPOConfig, ModelConfig))
    script_args, training_args, model_args = parser.parse_args_and_config(argv)
    model = model_args.model_name_or_path
    dataset = example_dataset(script_args.num_problems, training_args.seed)

    reward_funcs = [think_format_reward]
    cros = CRoSReward(reference=model, num_scrambles=4, seed=training_args.seed)  # faithgrpo 2/3
    reward_funcs += [cros, calver_reward]  # faithgrpo 3/3

    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward_funcs,
        args=training_args,
        train_dataset=dataset,
        peft_config=get_peft_config(model_args),
    )
    trainer.train()
    trainer.save_model(training_args.output_dir)
    return trainer


if __name__ == "__main__":
    main(sys.argv[1:])
