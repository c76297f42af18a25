"""Trainer callbacks: ``metrics.jsonl``, a one-line summary per logging step, a reward plot at train end.

- :class:`MetricsJSONLCallback` appends every logging step's metrics (TRL's ``rewards/<name>/mean``,
  ``reward``, ``loss``, CRoS/CALVER diagnostics, ...) as one JSON line to ``<output_dir>/metrics.jsonl``
  and, at train end, draws each reward's mean per step into a PNG. On a resumed run it drops lines
  past the checkpoint's step first (those steps are redone), so every step appears once.
- :class:`SummaryProgressCallback` / :class:`SummaryPrinterCallback` replace transformers'
  ``ProgressCallback`` / ``PrinterCallback``: the progress bar stays, but each logging step prints
  one line (step, total reward, each reward's mean, seconds per step) instead of a 40-key dict.
- :func:`install_callbacks` wires both into a trainer.

Only the main process writes or prints. ``report_to`` integrations (tensorboard, wandb) are untouched:
they run next to these callbacks.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from transformers import PrinterCallback, ProgressCallback, TrainerCallback

__all__ = [
    "CompletionsJSONLCallback",
    "MetricsJSONLCallback",
    "SummaryPrinterCallback",
    "SummaryProgressCallback",
    "install_callbacks",
    "plot_reward_means",
    "read_metrics",
    "reward_names_in",
    "summary_line",
]

# Keys of the one-off end-of-training log (train_runtime, ...): not a logging step.
_SUMMARY_KEYS = frozenset({"train_runtime", "train_samples_per_second", "train_steps_per_second"})


def _finite(value: Any) -> Any:
    """JSON-safe value: non-finite floats become ``None`` (JSON has no NaN), tensors become numbers."""
    if hasattr(value, "item") and callable(value.item):
        try:
            value = value.item()
        except (ValueError, RuntimeError):
            return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """Read a ``metrics.jsonl`` file; a torn last line (killed mid-write) is skipped."""
    rows = []
    path = Path(path)
    if not path.is_file():
        return rows
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows


def reward_names_in(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """Reward names logged by TRL (``rewards/<name>/mean``), in first-seen order."""
    names: list[str] = []
    for row in rows:
        for key in row:
            if key.startswith("rewards/") and key.endswith("/mean"):
                name = key[len("rewards/") : -len("/mean")]
                if name not in names:
                    names.append(name)
    return names


def _series(rows: Sequence[Mapping[str, Any]], key: str) -> list[tuple[Any, float]]:
    return [(r["step"], r[key]) for r in rows if r.get(key) is not None and "step" in r]


def plot_reward_means(
    metrics: str | Path | Sequence[Mapping[str, Any]], png_path: str | Path, title: str | None = None
) -> Path | None:
    """Plot each reward's mean per step (and the weighted total ``reward``) into a PNG.

    CRoS is drawn by its raw Δ (``cros/delta_mean``, with a band of ± ``cros/delta_std``) in a panel of
    its own: the reward is a within-group rank, so its mean is 0.5 at every step by construction and
    its line would say nothing. Next to CALVER's S/6 the certificate rate (``calver/certified``: all
    six checks passed) is drawn dashed.

    Args:
        metrics: a ``metrics.jsonl`` path or its rows.
        png_path: where to write the PNG.
        title: figure title.

    Returns:
        The PNG path, or ``None`` when no row carries a reward mean (nothing to plot).
    """
    rows = read_metrics(metrics) if isinstance(metrics, (str, Path)) else list(metrics)
    names = reward_names_in(rows)
    if not names:
        return None
    import matplotlib

    matplotlib.use("Agg")  # no display on training machines
    import matplotlib.pyplot as plt

    delta = _series(rows, "cros/delta_mean")
    panels = 3 if delta else 2
    fig, axes = plt.subplots(1, panels, figsize=(5.5 * panels, 4), constrained_layout=True)
    ax_each, ax_total = axes[0], axes[-1]
    for name in names:
        if name == "cros" and delta:
            continue  # the rank's mean is 0.5 by construction: its raw Δ has the middle panel
        points = _series(rows, f"rewards/{name}/mean")
        if points:
            (line,) = ax_each.plot(*zip(*points), marker="o", markersize=3, label=name)
            if name == "calver" and _series(rows, "calver/certified"):
                certified = _series(rows, "calver/certified")
                ax_each.plot(
                    *zip(*certified), linestyle="--", color=line.get_color(), label="certificate rate"
                )
    ax_each.set(xlabel="step", ylabel="mean reward", title="per reward (unweighted)")
    ax_each.legend(fontsize=8)
    if delta:
        ax_delta = axes[1]
        steps, means = zip(*delta)
        ax_delta.plot(steps, means, marker="o", markersize=3, color="tab:red", label="mean Δ")
        spread = dict(_series(rows, "cros/delta_std"))
        if spread:
            low = [m - spread.get(s, 0.0) for s, m in delta]
            high = [m + spread.get(s, 0.0) for s, m in delta]
            ax_delta.fill_between(steps, low, high, color="tab:red", alpha=0.2, label="± std")
        ax_delta.axhline(0.0, color="grey", linewidth=0.8)
        ax_delta.set(xlabel="step", ylabel="Δ", title="CRoS raw Δ (answer log-prob drop when scrambled)")
        ax_delta.legend(fontsize=8)
    total = _series(rows, "reward")
    if total:
        ax_total.plot(*zip(*total), marker="o", markersize=3, color="black")
    ax_total.set(xlabel="step", ylabel="weighted reward", title="total (reward_weights applied)")
    if title:
        fig.suptitle(title)
    png_path = Path(png_path)
    png_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png_path, dpi=100)
    plt.close(fig)
    return png_path


def summary_line(logs: Mapping[str, Any], step: int, max_steps: int, seconds_per_step: float | None) -> str:
    """One line per logging step: step, weighted reward, each reward's mean, loss, seconds per step.

    Example:
        >>> summary_line({"reward": 0.5, "rewards/outcome/mean": 1.0, "rewards/cros/mean": 0.25,
        ...               "loss": 0.01}, 3, 10, 12.34)
        'step 3/10 | reward 0.500 | outcome 1.000 cros 0.250 | loss 0.0100 | 12.3 s/step'
    """
    parts = [f"step {step}/{max_steps}"]
    if logs.get("reward") is not None:
        parts.append(f"reward {logs['reward']:.3f}")
    means = []
    for name in reward_names_in([logs]):
        value = logs.get(f"rewards/{name}/mean")
        means.append(f"{name} {'n/a' if value is None else format(value, '.3f')}")
    if means:
        parts.append(" ".join(means))
    if logs.get("loss") is not None:
        parts.append(f"loss {logs['loss']:.4g}")
    if seconds_per_step is not None:
        parts.append(f"{seconds_per_step:.1f} s/step")
    return " | ".join(parts)


class _StepClock:
    """Wall seconds per step between logging steps (generation, rewards and update included)."""

    def __init__(self) -> None:
        self._last: tuple[float, int] | None = None

    def start(self, step: int) -> None:
        self._last = (time.perf_counter(), step)

    def lap(self, step: int) -> float | None:
        now = time.perf_counter()
        last, self._last = self._last, (now, step)
        if last is None or step <= last[1]:
            return None
        return (now - last[0]) / (step - last[1])


class MetricsJSONLCallback(TrainerCallback):
    """Write one JSON line per logging step; plot each reward's mean per step at train end.

    Each line holds ``step``, ``epoch``, ``wall_s_per_step`` (wall time since the previous logging
    step, divided by the steps in between) and every logged value (non-finite numbers as ``null``).

    Args:
        path: the JSONL file (default ``<output_dir>/metrics.jsonl``).
        plot_path: the PNG (default ``<output_dir>/reward_means.png``); ``False`` for no plot.
    """

    def __init__(self, path: str | Path | None = None, plot_path: str | Path | bool | None = None):
        self.path = Path(path) if path else None
        self.plot_path = plot_path
        self.plotted: Path | None = None
        self._clock = _StepClock()

    def _resolve(self, args: Any) -> None:
        if self.path is None:
            self.path = Path(args.output_dir) / "metrics.jsonl"
        if self.plot_path is None or self.plot_path is True:
            self.plot_path = Path(args.output_dir) / "reward_means.png"

    def on_train_begin(self, args, state, control, **kwargs):
        self._resolve(args)
        self._clock.start(state.global_step)
        if not state.is_world_process_zero:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # A fresh run starts a fresh file. A resumed run keeps the steps its checkpoint covers and drops
        # later ones: they were lost with the interrupted process and are about to be redone.
        kept = [r for r in read_metrics(self.path) if 0 < r.get("step", 0) <= state.global_step]
        with self.path.open("w", encoding="utf-8") as f:
            for row in kept:
                f.write(json.dumps(row, allow_nan=False) + "\n")

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.path is None:
            self._resolve(args)
        seconds = self._clock.lap(state.global_step)
        if not state.is_world_process_zero or not logs or _SUMMARY_KEYS & set(logs):
            return
        row = {"step": state.global_step, "epoch": _finite(state.epoch), "wall_s_per_step": seconds}
        row.update({k: _finite(v) for k, v in logs.items() if k not in ("step", "epoch")})
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row, allow_nan=False) + "\n")
            f.flush()

    def on_train_end(self, args, state, control, **kwargs):
        if self.path is None:
            self._resolve(args)
        if state.is_world_process_zero and self.plot_path:
            self.plotted = plot_reward_means(self.path, self.plot_path, title=Path(args.output_dir).name)


class CompletionsJSONLCallback(TrainerCallback):
    """Write each logging step's prompts, completions, per-reward scores and advantages as JSON lines.

    One line per completion: ``{"step", "prompt", "completion", "rewards": {name: value}, "advantage"}``.
    It reads the batch TRL keeps for its own completion table (``GRPOTrainer._logs``, filled by every
    generation and sized to one generation batch), so it costs nothing at generation time. A run
    with ``logging_steps: 1`` and one generation per step records every completion it trained on:
    what the policy actually wrote, for inspection, and a check that two runs saw the same prompts.

    Args:
        trainer: the GRPO trainer (its ``_logs``; a trainer without them writes nothing).
        path: the JSONL file (a fresh run starts a fresh file).
    """

    def __init__(self, trainer: Any, path: str | Path):
        self.trainer, self.path = trainer, Path(path)

    def on_train_begin(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            kept = [r for r in read_metrics(self.path) if 0 < r.get("step", 0) <= state.global_step]
            with self.path.open("w", encoding="utf-8") as f:
                f.writelines(json.dumps(r, allow_nan=False) + "\n" for r in kept)

    def on_log(self, args, state, control, logs=None, **kwargs):
        batch = getattr(self.trainer, "_logs", None)
        if not state.is_world_process_zero or not batch or _SUMMARY_KEYS & set(logs or {}):
            return
        prompts, completions = list(batch.get("prompt", ())), list(batch.get("completion", ()))
        rewards = {name: list(values) for name, values in (batch.get("rewards") or {}).items()}
        advantages = list(batch.get("advantages", ()))
        with self.path.open("a", encoding="utf-8") as f:
            for i, (prompt, completion) in enumerate(zip(prompts, completions)):
                row = {
                    "step": state.global_step,
                    "prompt": prompt,
                    "completion": completion,
                    "rewards": {n: _finite(v[i]) if i < len(v) else None for n, v in rewards.items()},
                    "advantage": _finite(advantages[i]) if i < len(advantages) else None,
                }
                f.write(json.dumps(row, allow_nan=False, default=str) + "\n")


class _SummaryMixin:
    """Print :func:`summary_line` per logging step instead of the raw log dict."""

    def _summary(self, state, logs) -> str | None:
        if not hasattr(self, "_clock"):
            self._clock = _StepClock()
        seconds = self._clock.lap(state.global_step)
        if not logs or _SUMMARY_KEYS & set(logs):
            return None
        return summary_line(logs, state.global_step, state.max_steps, seconds)


class SummaryProgressCallback(_SummaryMixin, ProgressCallback):
    """transformers' progress bar, with one summary line per logging step written above it."""

    def on_train_begin(self, args, state, control, **kwargs):
        super().on_train_begin(args, state, control, **kwargs)
        self._clock = _StepClock()
        self._clock.start(state.global_step)

    def on_log(self, args, state, control, logs=None, **kwargs):
        line = self._summary(state, logs)
        if line and state.is_world_process_zero and self.training_bar is not None:
            self.training_bar.write(line)


class SummaryPrinterCallback(_SummaryMixin, PrinterCallback):
    """With ``disable_tqdm``: one printed summary line per logging step."""

    def on_train_begin(self, args, state, control, **kwargs):
        self._clock = _StepClock()
        self._clock.start(state.global_step)

    def on_log(self, args, state, control, logs=None, **kwargs):
        line = self._summary(state, logs)
        if line and state.is_local_process_zero:
            print(line, flush=True)


def install_callbacks(
    trainer: Any,
    *,
    metrics_path: str | Path | None = None,
    plot_path: str | Path | bool | None = None,
    summary: bool = True,
    completions_path: str | Path | None = None,
) -> MetricsJSONLCallback:
    """Add the metrics writer to ``trainer`` and swap its log printer for the one-line summary.

    Args:
        trainer: a transformers/TRL trainer.
        metrics_path, plot_path: see :class:`MetricsJSONLCallback`.
        summary: replace the raw-dict printer (``ProgressCallback``/``PrinterCallback``) with the
            one-line summary; the progress bar itself is kept.
        completions_path: also write every logged completion there (:class:`CompletionsJSONLCallback`).

    Returns:
        The metrics callback (its ``plotted`` attribute holds the PNG path after training).
    """
    metrics = MetricsJSONLCallback(metrics_path, plot_path)
    trainer.add_callback(metrics)
    if completions_path is not None:
        trainer.add_callback(CompletionsJSONLCallback(trainer, completions_path))
    if summary:
        handler = trainer.callback_handler
        for old, new in (
            (ProgressCallback, SummaryProgressCallback),
            (PrinterCallback, SummaryPrinterCallback),
        ):
            if any(type(cb) is old for cb in handler.callbacks):
                trainer.remove_callback(old)
                trainer.add_callback(new)
    return metrics
