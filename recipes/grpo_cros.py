#!/usr/bin/env python
"""GRPO + LoRA with faithfulness rewards (outcome, format, trace_format, CRoS, CALVER) on causal tasks.

open-r1 style: one YAML config per run, every CLI flag overrides it.

    python recipes/grpo_cros.py                         # the CPU demo: recipes/configs/cpu_demo.yaml
    accelerate launch recipes/grpo_cros.py              # the same, through accelerate
    python recipes/grpo_cros.py --max_steps 2 --cros_num_scrambles 2        # demo config, overridden
    accelerate launch --config_file recipes/accelerate_configs/multi_gpu.yaml \\
        recipes/grpo_cros.py --config recipes/configs/qwen2.5-1.5b-instruct.yaml
    python recipes/grpo_cros.py --model_name_or_path Qwen/Qwen2.5-1.5B-Instruct --use_peft true  # TRL defaults
    python recipes/grpo_cros.py --output_dir runs/cpu_demo --resume_from_checkpoint true   # latest checkpoint

Which config is in force (printed at start): ``--config FILE`` when given; the CPU demo config when
neither ``--config`` nor ``--model_name_or_path`` is given; otherwise none, so TRL's ``GRPOConfig``
and ``ModelConfig`` defaults apply to the model given. Arguments: ``FaithScriptArguments`` (rewards,
reward options, task mixture, warm start; ``faithgrpo.trainers.recipe``), ``trl.GRPOConfig`` and
``trl.ModelConfig``. Bad input stops with ``error: ...`` before any model is trained.

Completions are sampled by faithgrpo's decode engine on CPU (``--rollout auto``, the default; TRL's
``rollout_func``), by TRL's own generation on GPUs or with ``--rollout trl`` (``generate``, or vLLM
with ``--use_vllm true``); the line ``rollout: ...`` says which, and why.

Outputs in ``output_dir``: the LoRA adapter (and tokenizer), checkpoints, ``metrics.jsonl`` (one line
per logging step, with ``time/<phase>`` seconds per step), ``reward_means.png`` (each reward's mean
per step) and ``train_results.json``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from trl import get_peft_config, get_quantization_config

from faithgrpo.rewards.cros.reference import CRoSReferenceError
from faithgrpo.trainers.checks import (
    RecipeError,
    model_init_kwargs,
    resolve_model,
    resolve_resume,
    say,
    single_process_launch_warning,
)
from faithgrpo.trainers.data import check_columns, make_dataset
from faithgrpo.trainers.recipe import collect_reward_options, parse_recipe_args, validate
from faithgrpo.trainers.warm_start import load_warm_started_policy, run_warm_start

RECIPES = Path(__file__).resolve().parent
DEFAULT_CONFIG = RECIPES / "configs" / "cpu_demo.yaml"
SEARCH_DIRS = (RECIPES, RECIPES / "configs")  # relative --warm_start_config paths, after the working dir
SFT_SCRIPT = RECIPES / "sft_traces.py"


def parse_args(argv: list[str] | None = None):
    """``(script_args, training_args, model_args)`` from ``argv`` (default ``sys.argv[1:]``)."""
    return parse_recipe_args(argv, demo_config=DEFAULT_CONFIG)


def main(script_args, training_args, model_args, callbacks: list | None = None):
    """Validate, build the data, rewards and trainer, train, save. Returns the trainer."""
    from faithgrpo.trainers import FaithGRPOTrainer
    from faithgrpo.trainers.callbacks import install_callbacks
    from faithgrpo.trainers.rollout import rollout_for, rollout_line

    say(script_args.config_source or "config: as given")
    launch_warning = single_process_launch_warning()
    if launch_warning:
        say(launch_warning)
    reward_funcs = validate(script_args, training_args, model_args, search_dirs=SEARCH_DIRS)
    resume = resolve_resume(training_args)
    dataset = make_dataset(script_args, training_args)
    check_columns(dataset, script_args.reward_funcs, collect_reward_options(script_args, training_args))

    adapter = run_warm_start(
        script_args, training_args, model_args, sft_script=SFT_SCRIPT, search_dirs=SEARCH_DIRS
    )
    cros = (
        reward_funcs[script_args.reward_funcs.index("cros")] if "cros" in script_args.reward_funcs else None
    )
    if cros is not None and adapter is not None and cros.is_bound and cros.model is None:
        # A separately loaded reference is the initial policy only with the warm-start adapter on it.
        cros.reference_adapter = adapter
    path = resolve_model(model_args.model_name_or_path, check=False)
    init_kwargs = model_init_kwargs(model_args, training_args)
    quantization_config = get_quantization_config(model_args)
    if adapter is not None:
        # The warm-start adapter is the policy's trainable adapter; no peft_config, no merged copy:
        # FaithGRPOTrainer binds CRoS to a frozen copy of the adapter's initial tensors.
        model = load_warm_started_policy(path, adapter, init_kwargs, training_args, quantization_config)
        peft_config, quantization_config = None, None
        training_args.model_init_kwargs = None  # used above; TRL warns about them next to a loaded model
    else:
        model, peft_config = path, get_peft_config(model_args)  # TRL loads the model id, as in its script
        training_args.model_init_kwargs = init_kwargs
    weights = training_args.reward_weights or [1.0] * len(reward_funcs)
    rewards = ", ".join(f"{n}×{w:g}" for n, w in zip(script_args.reward_funcs, weights))
    kind = "warm-start LoRA" if adapter is not None else ("LoRA" if peft_config else "full fine-tuning")
    say(f"model {model_args.model_name_or_path} ({path}), {kind}; {len(dataset)} rows; rewards {rewards}")

    rollout = rollout_for(script_args.rollout, training_args)  # the decode engine on CPU (--rollout)
    trainer = FaithGRPOTrainer(
        model=model,
        reward_funcs=reward_funcs,
        args=training_args,
        train_dataset=dataset,
        peft_config=peft_config,
        quantization_config=quantization_config,
        callbacks=callbacks,
        rollout_func=rollout,
    )
    say(rollout_line(script_args.rollout, training_args, rollout, trainer))
    metrics_cb = install_callbacks(
        trainer,
        metrics_path=Path(training_args.output_dir) / script_args.metrics_file,
        plot_path=Path(training_args.output_dir) / script_args.plot_file,
        completions_path=(
            Path(training_args.output_dir) / script_args.completions_file
            if script_args.completions_file
            else None
        ),
    )
    if cros is not None:
        say(f"CRoS reference: {cros.reference_mode}: {cros.describe_reference()}")
        if cros.reference_mode == "path" and (adapter is not None or peft_config is not None):
            say(
                "with LoRA, --cros_reference is not needed (CRoS can score through the policy's own forward "
                "with its initial adapter); it costs one full model per process"
            )

    result = trainer.train(resume_from_checkpoint=resume)
    trainer.save_model(training_args.output_dir)
    trainer.log_metrics("train", result.metrics)
    trainer.save_metrics("train", result.metrics)
    trainer.save_state()
    say(f"trained weights (the adapter, with LoRA) and tokenizer saved to {training_args.output_dir}")
    say(f"metrics: {metrics_cb.path}" + (f"; plot: {metrics_cb.plotted}" if metrics_cb.plotted else ""))
    return trainer


def cli(argv: list[str] | None = None) -> int:
    from faithgrpo.trainers.distributed import distributed_teardown

    trainer = None
    try:
        script_args, training_args, model_args = parse_args(argv)
        trainer = main(script_args, training_args, model_args)
    except (RecipeError, CRoSReferenceError) as error:
        print(f"error: {error}", file=sys.stderr, flush=True)
        return 2
    finally:
        # Every rank leaves the process group (or torchrun/accelerate report an abort), with the
        # group's last reference a Python one: the gloo exit deadlock (docs/development.md). The barrier only
        # after a finished run: a rank that failed would leave the others waiting.
        with distributed_teardown(barrier=trainer is not None):
            if trainer is not None:
                trainer.end()  # trackers; accelerate destroys the process group here
                del trainer
    return 0


if __name__ == "__main__":
    sys.exit(cli())
