#!/usr/bin/env python
"""Gold-trace SFT warm start with LoRA: teach the policy the six-slot trace before GRPO.

open-r1 style: one YAML config per run, every CLI flag overrides it.

    python recipes/sft_traces.py                                   # recipes/configs/sft_cpu_demo.yaml
    python recipes/sft_traces.py --max_steps 4 --output_dir runs/sft_try
    python recipes/grpo_cros.py --warm_start_adapter runs/sft_cpu_demo   # then GRPO from the adapter

Arguments: :class:`SFTScriptArguments` (task mixture), ``trl.SFTConfig`` (training) and
``trl.ModelConfig`` (model, LoRA). Rows are prompt-completion pairs, so the loss covers the
assistant's trace only (TRL's ``completion_only_loss``). The adapter and tokenizer are saved in
``output_dir`` together with ``sft_data.json`` (rows per task).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from trl import ModelConfig, SFTConfig, SFTTrainer, TrlParser, get_peft_config

DEFAULT_CONFIG = Path(__file__).resolve().parent / "configs" / "sft_cpu_demo.yaml"


@dataclass
class SFTScriptArguments:
    """The task mixture the gold traces are drawn from (fields of ``faithgrpo.tasks.TaskMixConfig``)."""

    task_size: int = field(
        default=96, metadata={"help": "Rows drawn before dropping tasks without a gold trace."}
    )
    task_seed: int = field(default=1, metadata={"help": "Seed of the SFT rows (keep it apart from GRPO's)."})
    causal_weight: float = field(default=1.0, metadata={"help": "Sampling weight of causal rows."})
    story_fraction: float = field(default=0.0, metadata={"help": "Share of causal rows told as stories."})
    causal: dict = field(default_factory=dict, metadata={"help": "CausalGraphConfig fields (YAML mapping)."})
    mixture: dict = field(default_factory=dict, metadata={"help": "reasoning-gym task -> weight."})
    mixture_configs: dict = field(
        default_factory=dict, metadata={"help": "reasoning-gym task -> its config fields (YAML mapping)."}
    )
    system_prompt: str | None = field(
        default=None, metadata={"help": "One system prompt for every row (default: per task, as in GRPO)."}
    )
    gold_style: str = field(
        default="varied",
        metadata={
            "help": "Causal gold traces: 'varied' wording and answers, or 'plain' (one wording, smallest answer)."
        },
    )


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--config" not in argv:
        argv = ["--config", str(DEFAULT_CONFIG), *argv]
    script_args, training_args, model_args = TrlParser(
        (SFTScriptArguments, SFTConfig, ModelConfig)
    ).parse_args_and_config(argv)

    from faithgrpo.models import resolve
    from faithgrpo.tasks.sft import build_sft_dataset

    try:
        model_path = resolve(model_args.model_name_or_path or "embedded")
        dataset, counts = build_sft_dataset(
            {
                "size": script_args.task_size,
                "seed": script_args.task_seed,
                "causal_weight": script_args.causal_weight,
                "story_fraction": script_args.story_fraction,
                "causal": dict(script_args.causal),
                "mixture": dict(script_args.mixture),
                "mixture_configs": dict(script_args.mixture_configs),
                "system_prompt": script_args.system_prompt,
            },
            gold_style=script_args.gold_style,
        )
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"[sft] {len(dataset)} gold-trace rows {counts} on {model_path}", flush=True)

    training_args.model_init_kwargs = {
        **(training_args.model_init_kwargs or {}),
        "dtype": model_args.dtype or "float32",
    }
    trainer = SFTTrainer(
        model=model_path, args=training_args, train_dataset=dataset, peft_config=get_peft_config(model_args)
    )
    result = trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    trainer.save_model(training_args.output_dir)
    if trainer.accelerator.is_main_process:
        out = Path(training_args.output_dir)
        (out / "sft_data.json").write_text(
            json.dumps({"rows": len(dataset), "per_task": counts}, indent=2) + "\n"
        )
        losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
        (out / "sft_losses.json").write_text(json.dumps(losses) + "\n")
        if losses:
            print(
                f"[sft] loss {losses[0]:.3f} -> {losses[-1]:.3f} in {result.global_step} steps; adapter: {out}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
