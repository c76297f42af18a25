"""TRL trainer arguments for the tests' tiny CPU training runs (tests/test_trainers.py, test_cros_binding.py,
test_rollout.py): one set of defaults, each test overriding what it needs."""

from __future__ import annotations

from trl import GRPOConfig

TINY_RUN = dict(
    max_steps=2,
    per_device_train_batch_size=4,
    num_generations=4,
    max_completion_length=12,
    learning_rate=5e-2,
    logging_steps=1,
    report_to=[],
    use_cpu=True,
    bf16=False,  # fp32 end to end, so references can be compared with an fp32 copy exactly
    save_strategy="no",
    seed=0,
)


def tiny_run_args(tmp_path, cls=GRPOConfig, **overrides):
    """``cls(output_dir=tmp_path / "out", **TINY_RUN, **overrides)``: a few CPU steps of a tiny model."""
    return cls(**{"output_dir": str(tmp_path / "out"), **TINY_RUN, **overrides})
