#!/usr/bin/env python
"""Reward ablation: does adding CALVER and/or CRoS to outcome + format make the chain of thought better?

    python recipes/ablation.py                                     # recipes/configs/ablation_cpu.yaml
    python recipes/ablation.py --set train.max_steps=4 --set eval.prompts=8 --output_dir runs/abl_small
    python recipes/ablation.py --config recipes/configs/ablation_gpu.yaml
    python recipes/ablation.py --smoke --output_dir runs/abl_smoke  # wiring check on a tiny model (CI)

One YAML config (every ``--set key.sub=value`` overrides it; values are YAML):

1. **Warm start**: the gold-trace SFT config ``warm_start_config`` is trained once by
   ``recipes/sft_traces.py`` and cached by content (the GRPO recipe's warm-start cache and key), so every
   arm, seed and later run starts from the same adapter; or ``warm_start_adapter`` names a committed
   adapter folder to start from.
2. **Arms**: one ``recipes/grpo_cros.py`` run per arm and seed, from that adapter, with identical flags
   (prompts, data order, seed, steps, group size, learning rate) except ``reward_weights``. Every arm
   computes every reward in ``rewards``; an arm's weights select what it trains on (weight 0: logged
   only), so the arms' training curves share axes. Each run writes ``metrics.jsonl`` and
   ``completions.jsonl`` (every completion it trained on, with its rewards).
3. **Evaluation**: one ``faithgrpo eval`` over the baseline arm (the reference of every paired
   difference), the warm start and the other arms, on held-out prompts of the training distribution
   and on a shifted set (story mode, more nodes).
4. **Results**: ``<results>.md``, ``<results>.json`` (every number, seed, setting and wall time),
   ``<results>_metrics.png`` (arms × metrics with intervals) and ``<results>_rewards.png``.

A stage whose outputs exist (a finished arm with the same command, cached completions) is reused, so an
interrupted ablation continues where it stopped. With ``store`` set, every finished arm is kept there
(its adapter in float16, its metrics and training completions: the files of ``STORED_FILES``) and the
evaluation's caches go to ``<store>/eval``: a folder to commit, so a run spread over several machines or
sessions continues from it. ``--budget-minutes`` stops before the next arm once the budget is spent.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import yaml

RECIPES = Path(__file__).resolve().parent
ROOT = RECIPES.parent
DEFAULT_CONFIG = RECIPES / "configs" / "ablation_cpu.yaml"
GRPO_SCRIPT = RECIPES / "grpo_cros.py"
SFT_SCRIPT = RECIPES / "sft_traces.py"
RUN_RECORD = "ablation_run.json"
_LABEL = re.compile(r"^[A-Za-z0-9._-]+$")
_TOP_KEYS = {
    "model_name_or_path", "output_dir", "results", "warm_start_config", "warm_start_adapter", "warm_start_cache",
    "seeds", "baseline", "system_prompt", "causal", "train", "rewards", "reward_options", "arms", "eval", "store",
}  # fmt: skip
#: What the store keeps of a finished arm: the checkpoint the evaluation reads and what the page needs.
STORED_FILES = ("adapter_config.json", "adapter_model.safetensors", "metrics.jsonl", "completions.jsonl",
                "train.yaml", RUN_RECORD)  # fmt: skip
_EVAL_KEYS = {
    "held_out", "shifted", "shifted_causal", "shifted_story_fraction", "prompts", "samples", "k", "max_new_tokens",
    "seed", "hints", "hint_questions", "min_switched", "faithfulness_pairs", "batch_size", "bootstrap", "engine",
    "backend", "temperature", "top_p",
}  # fmt: skip
# Flags the ablation sets itself for every arm; the train section may not set them.
_ARM_OWNED = {"reward_funcs", "reward_weights", "output_dir", "seed", "warm_start_adapter", "warm_start_config",
              "model_name_or_path", "system_prompt", "causal", "completions_file",
              "multi_objective_aggregation"}  # fmt: skip
#: An arm's optional ``aggregation`` key: TRL's ``multi_objective_aggregation`` (GDPO is "normalize_then_sum").
AGGREGATIONS = ("sum_then_normalize", "normalize_then_sum")


def arm_spec(config: dict[str, Any], arm: str) -> tuple[dict[str, float], str]:
    """An arm's ``(reward weights, aggregation)``: its mapping without the ``aggregation`` key, and that key."""
    spec = dict(config["arms"][arm])
    aggregation = spec.pop("aggregation", AGGREGATIONS[0])
    return spec, aggregation


class AblationError(ValueError):
    """Bad ablation config or a failed stage; the message says what to fix."""


def say(message: str) -> None:
    print(f"[ablation] {message}", flush=True)


# ---------------------------------------------------------------------------------------------
# config
def load_config(path: str | os.PathLike, overrides: list[str] = ()) -> dict[str, Any]:
    """The YAML config with ``key.sub=value`` overrides applied (values parsed as YAML), validated."""
    path = Path(path)
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as error:
        raise AblationError(f"cannot read ablation config {str(path)!r}: {error}") from None
    if not isinstance(config, dict):
        raise AblationError(f"ablation config {str(path)!r} must be a YAML mapping")
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise AblationError(f"--set takes key=value (e.g. train.max_steps=4), got {item!r}")
        target, parts = config, key.split(".")
        for part in parts[:-1]:
            target = target.setdefault(part, {})
            if not isinstance(target, dict):
                raise AblationError(f"--set {item!r}: {part!r} is not a mapping in the config")
        target[parts[-1]] = yaml.safe_load(value)
    config["_config_dir"] = str(path.resolve().parent)
    validate(config)
    return config


def validate(config: dict[str, Any]) -> None:
    """Raise `AblationError` naming the key and the fix."""
    unknown = sorted(set(config) - _TOP_KEYS - {"_config_dir"})
    if unknown:
        raise AblationError(f"unknown ablation config key(s) {unknown}; known: {sorted(_TOP_KEYS)}")
    for key in (
        "model_name_or_path",
        "output_dir",
        "results",
        "rewards",
        "arms",
        "eval",
    ):
        if not config.get(key):
            raise AblationError(f"the ablation config needs {key!r}")
    if bool(config.get("warm_start_config")) == bool(config.get("warm_start_adapter")):
        raise AblationError(
            "the ablation config needs exactly one of 'warm_start_config' (an SFT config to train once) "
            "and 'warm_start_adapter' (an adapter folder): every arm starts from that one warm start"
        )
    rewards = config["rewards"]
    if not isinstance(rewards, list) or len(set(rewards)) != len(rewards):
        raise AblationError(f"rewards must be a list of distinct reward names, got {rewards!r}")
    from faithgrpo.rewards.registry import REWARD_NAMES

    unknown_rewards = [r for r in rewards if r not in REWARD_NAMES]
    if unknown_rewards:
        raise AblationError(
            f"unknown reward name(s) {unknown_rewards} in rewards; choose from {', '.join(REWARD_NAMES)}"
        )
    arms = config["arms"]
    if not isinstance(arms, dict) or len(arms) < 2:
        raise AblationError("arms must map at least two arm names to {reward: weight} mappings")
    for name, spec in arms.items():
        if not _LABEL.match(str(name)) or name == "sft":
            raise AblationError(f"arm name {name!r}: use letters, digits, '.', '_', '-' (and not 'sft')")
        if not isinstance(spec, dict) or not set(spec) - {"aggregation"}:
            raise AblationError(f"arm {name!r} must map reward names to weights, e.g. {{outcome: 1.0}}")
        weights, aggregation = arm_spec(config, name)
        if aggregation not in AGGREGATIONS:
            raise AblationError(
                f"arm {name!r}: aggregation must be one of {', '.join(AGGREGATIONS)} "
                f"(TRL's multi_objective_aggregation; GDPO is normalize_then_sum), got {aggregation!r}"
            )
        stray = sorted(set(weights) - set(rewards))
        if stray:
            raise AblationError(
                f"arm {name!r} weights {stray}, which are not in rewards {rewards}; add them there"
            )
        for reward, weight in weights.items():
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight < 0:
                raise AblationError(
                    f"arm {name!r}: weight of {reward!r} must be a number >= 0, got {weight!r}"
                )
    baseline = config.get("baseline") or next(iter(arms))
    if baseline not in arms:
        raise AblationError(f"baseline {baseline!r} is not an arm ({', '.join(arms)})")
    seeds = config.get("seeds") or [0]
    if not isinstance(seeds, list) or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
        raise AblationError(f"seeds must be a list of integers, got {seeds!r}")
    owned = sorted(set(config.get("train") or {}) & _ARM_OWNED)
    if "multi_objective_aggregation" in owned:
        raise AblationError(
            "train sets multi_objective_aggregation, which is per arm: give the arm an "
            "`aggregation: normalize_then_sum` key instead"
        )
    if owned:
        raise AblationError(
            f"train sets {owned}, which the ablation sets per arm; move them to the top level"
        )
    bad_eval = sorted(set(config["eval"]) - _EVAL_KEYS)
    if bad_eval:
        raise AblationError(f"unknown eval key(s) {bad_eval}; known: {sorted(_EVAL_KEYS)}")
    if config["eval"].get("held_out") == config["eval"].get("shifted"):
        raise AblationError(
            "eval.held_out and eval.shifted must be different tasks (causal_graph, causal_story)"
        )


def labels(config: dict[str, Any]) -> list[tuple[str, str, int]]:
    """``(label, arm, seed)`` for every run, the baseline arm's first seed first."""
    arms, seeds = list(config["arms"]), config.get("seeds") or [0]
    baseline = config.get("baseline") or arms[0]
    order = [baseline, *(a for a in arms if a != baseline)]
    runs = [(arm, seed) for seed in seeds for arm in order]
    return [(arm if len(seeds) == 1 else f"{arm}-s{seed}", arm, seed) for arm, seed in runs]


# ---------------------------------------------------------------------------------------------
# stages
def run_logged(
    command: list[str], log: Path, env: dict[str, str] | None = None, cwd: Path | None = None
) -> tuple[int, float]:
    """Run ``command`` (in ``cwd``) with stdout/stderr appended to ``log``; ``(exit status, wall seconds)``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with log.open("a", encoding="utf-8") as f:
        f.write(f"$ {' '.join(command)}\n")
        f.flush()
        status = subprocess.run(
            command, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=cwd, check=False
        ).returncode
    return status, time.perf_counter() - start


def warm_start(config: dict[str, Any], out: Path) -> dict[str, Any]:
    """Train (or reuse) the warm-start adapter; ``{"adapter", "key", "reused", "sft_seconds", "config"}``."""
    from faithgrpo.trainers.checks import RecipeError
    from faithgrpo.trainers.warm_start import (
        WARM_START_RECORD,
        train_warm_start,
        warm_start_cache,
        warm_start_config_path,
        warm_start_key,
    )

    if config.get("warm_start_adapter"):
        return _given_warm_start(config)
    try:
        sft_config = warm_start_config_path(
            config["warm_start_config"], [config["_config_dir"], RECIPES / "configs"]
        )
        if sft_config is None:
            raise AblationError("warm_start_config is required: the arms must share one warm start")
        model = config["model_name_or_path"]
        key = warm_start_key(sft_config, model)
        # the GRPO recipe's cache: --warm_start_cache, else $FAITHGRPO_CACHE/warm_start
        cache = warm_start_cache(SimpleNamespace(warm_start_cache=config.get("warm_start_cache")))
        target = cache / f"sft-{key}"
        reused = (target / WARM_START_RECORD).is_file()
        if not reused:
            target.parent.mkdir(parents=True, exist_ok=True)
            say(f"warm start: gold-trace SFT with {sft_config} -> {target} (log: {out / 'logs' / 'sft.log'})")
            _with_log(
                out / "logs" / "sft.log", lambda: train_warm_start(sft_config, model, target, SFT_SCRIPT)
            )
        record = json.loads((target / WARM_START_RECORD).read_text())
    except RecipeError as error:
        raise AblationError(str(error)) from None
    say(f"warm start: {'reusing' if reused else 'trained'} {target} (SFT {record.get('sft_seconds')} s)")
    return {"adapter": str(target), "key": key, "reused": reused, "sft_seconds": record.get("sft_seconds"),
            "config": str(sft_config)}  # fmt: skip


def _given_warm_start(config: dict[str, Any]) -> dict[str, Any]:
    """``warm_start_adapter``: an adapter folder (relative to the repository, the config's folder, or absolute)."""
    given = Path(config["warm_start_adapter"]).expanduser()
    candidates = [given] if given.is_absolute() else [ROOT / given, Path(config["_config_dir"]) / given]
    adapter = next((c for c in candidates if (c / "adapter_config.json").is_file()), None)
    if adapter is None:
        raise AblationError(
            f"warm_start_adapter {str(given)!r} is not an adapter folder (no adapter_config.json); "
            "give a PEFT adapter saved by recipes/sft_traces.py"
        )
    say(f"warm start: the given adapter {adapter}")
    # its SFT time is not the ablation's: the page says "time unknown" rather than guess
    return {"adapter": str(adapter.resolve()), "key": _digest(adapter / "adapter_model.safetensors"),
            "reused": True, "sft_seconds": None, "config": None}  # fmt: skip


def _digest(path: Path) -> str | None:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path.is_file() else None


def _with_log(log: Path, fn):
    """Run ``fn`` with this process's stdout/stderr (and its children's) sent to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with log.open("a", encoding="utf-8") as f:
        os.dup2(f.fileno(), 1)
        os.dup2(f.fileno(), 2)
        try:
            return fn()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def arm_command(config: dict[str, Any], arm: str, seed: int, adapter: str, run_dir: Path) -> list[str]:
    """The ``grpo_cros.py`` command of one arm and seed: shared flags, then this arm's reward weights
    (and its aggregation, when it is not TRL's default)."""
    weights, aggregation = arm_spec(config, arm)
    train = dict(config.get("train") or {})
    train_yaml = run_dir / "train.yaml"
    shared = {
        **train,
        "model_name_or_path": config["model_name_or_path"],
        "system_prompt": config.get("system_prompt"),
        "causal": config.get("causal") or {},
        **(config.get("reward_options") or {}),
    }
    run_dir.mkdir(parents=True, exist_ok=True)
    train_yaml.write_text(yaml.safe_dump({k: v for k, v in shared.items() if v is not None}, sort_keys=True))
    return [
        sys.executable, str(GRPO_SCRIPT), "--config", str(train_yaml),
        "--warm_start_adapter", adapter,
        "--seed", str(seed),
        "--output_dir", str(run_dir),
        "--completions_file", "completions.jsonl",
        "--reward_funcs", *config["rewards"],
        "--reward_weights", *(str(float(weights.get(r, 0.0))) for r in config["rewards"]),
        *(["--multi_objective_aggregation", aggregation] if aggregation != AGGREGATIONS[0] else []),
    ]  # fmt: skip


def arm_location(config: dict[str, Any], out: Path, label: str) -> Path:
    """Where a finished arm is read from: ``<store>/<label>`` with a store, else its run folder."""
    return _store(config) / label if config.get("store") else out / "arms" / label


def _store(config: dict[str, Any]) -> Path:
    store = Path(config["store"]).expanduser()
    return store if store.is_absolute() else ROOT / store


def _rooted(tree: Any) -> Any:
    """``tree`` with absolute paths under the repository written relative to it (a run's identity must
    not change with the checkout's location, and the store is committed)."""
    if isinstance(tree, list):
        return [_rooted(v) for v in tree]
    if isinstance(tree, str) and os.path.isabs(tree) and tree.startswith(str(ROOT) + os.sep):
        return os.path.relpath(tree, ROOT)
    return tree


def publish_arm(run_dir: Path, target: Path) -> None:
    """Copy a finished run's `STORED_FILES` into ``target``, the adapter's floating tensors as float16
    (half the bytes; the stored adapter *is* the checkpoint: the evaluation reads it)."""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    target.mkdir(parents=True, exist_ok=True)
    for name in STORED_FILES:
        if name == RUN_RECORD or not (run_dir / name).is_file():
            continue
        if name == "adapter_model.safetensors":
            tensors = load_file(str(run_dir / name))
            half = {k: v.to(torch.float16) if v.is_floating_point() else v for k, v in tensors.items()}
            save_file(half, str(target / name), metadata={"format": "pt"})
        else:
            shutil.copyfile(run_dir / name, target / name)


def train_arms(
    config: dict[str, Any], out: Path, adapter: str, deadline: float | None = None
) -> dict[str, Any]:
    """Run every arm and seed (reusing finished runs with the same command); per label, its record.
    Past ``deadline`` (``time.time()``) no new arm starts: the labels not yet run are missing."""
    records = {}
    for label, arm, seed in labels(config):
        run_dir = out / "arms" / label
        final = arm_location(config, out, label)
        command = arm_command(config, arm, seed, adapter, run_dir)
        record_path = final / RUN_RECORD
        identity = {"command": _rooted(command[1:]), "train": (run_dir / "train.yaml").read_text()}
        if record_path.is_file():
            record = json.loads(record_path.read_text())
            if record.get("identity") == identity and (final / "adapter_config.json").is_file():
                say(f"arm {label}: reusing the finished run in {final} ({record['seconds']:.0f} s)")
                records[label] = record
                continue
        if deadline is not None and time.time() >= deadline:
            say(f"arm {label}: not started, the budget is spent")
            continue
        for stale in ("metrics.jsonl", "completions.jsonl", RUN_RECORD):
            (run_dir / stale).unlink(missing_ok=True)
        say(f"arm {label} (seed {seed}, weights {config['arms'][arm]}): training -> {run_dir}")
        status, seconds = run_logged(command, out / "logs" / f"{label}.log")
        if status != 0:
            raise AblationError(
                f"arm {label} failed (exit status {status}); see {out / 'logs' / f'{label}.log'}"
            )
        weights, aggregation = arm_spec(config, arm)
        if final != run_dir:
            publish_arm(run_dir, final)
        record = {"label": label, "arm": arm, "seed": seed, "weights": weights, "aggregation": aggregation,
                  "seconds": seconds, "identity": identity, "output_dir": _rooted(str(final))}  # fmt: skip
        record_path.write_text(json.dumps(record, indent=2) + "\n")
        say(f"arm {label}: {seconds:.0f} s")
        records[label] = record
    return records


def eval_task_configs(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``--task-config`` of the evaluation: the training distribution (held out) and its shifted variant."""
    ev = config["eval"]
    held, shifted = ev.get("held_out", "causal_graph"), ev.get("shifted", "causal_story")
    causal = dict(config.get("causal") or {})
    task_config = {held: dict(causal), shifted: {**causal, **(ev.get("shifted_causal") or {})}}
    if config.get("system_prompt"):
        for fields in task_config.values():
            fields["system_prompt"] = config["system_prompt"]
    return task_config


def eval_dir(config: dict[str, Any], out: Path) -> Path:
    """The evaluation's folder (its report and completion caches): ``<store>/eval`` with a store."""
    return _store(config) / "eval" if config.get("store") else out / "eval"


def eval_command(config: dict[str, Any], out: Path, adapter: str) -> list[str]:
    """One ``faithgrpo eval`` over the baseline arm (first: the paired reference), the warm start, the rest.
    Paths under the repository are written relative to it (run it there): its report may be committed."""
    ev, model = config["eval"], config["model_name_or_path"]
    runs = labels(config)
    (base_label, _, _), rest = runs[0], runs[1:]
    held, shifted = ev.get("held_out", "causal_graph"), ev.get("shifted", "causal_story")
    task_config = eval_task_configs(config)
    command = [
        sys.executable, "-m", "faithgrpo.cli", "eval",
        "--model", model, "--adapter", _rooted(str(arm_location(config, out, base_label))), "--label", base_label,
        "--checkpoint", "sft", model, _rooted(adapter),
    ]  # fmt: skip
    for label, _, _ in rest:
        command += ["--checkpoint", label, model, _rooted(str(arm_location(config, out, label)))]
    ks = ev.get("k", [1, 2, 4, 8])
    hints = ev.get("hints", "none")
    command += [
        "--tasks", f"{held},{shifted}", "--task-config", json.dumps(task_config),
        "--prompts", str(ev.get("prompts", 16)), "--samples", str(ev.get("samples", 8)),
        "--k", ",".join(str(k) for k in (ks if isinstance(ks, list) else [ks])),
        "--max-new-tokens", str(ev.get("max_new_tokens", 224)), "--seed", str(ev.get("seed", 101)),
        "--hints", ",".join(hints) if isinstance(hints, list) else str(hints),
        "--hint-questions", str(ev.get("hint_questions", 8)), "--min-switched", str(ev.get("min_switched", 2)),
        "--faithfulness-pairs", str(ev.get("faithfulness_pairs", 16)),
        "--batch-size", str(ev.get("batch_size", 16)), "--bootstrap", str(ev.get("bootstrap", 1000)),
        "--no-progress", "--out", _rooted(str(eval_dir(config, out))),
    ]  # fmt: skip
    for key, flag in (("engine", "--engine"), ("backend", "--backend"), ("temperature", "--temperature"),
                      ("top_p", "--top-p")):  # fmt: skip
        if ev.get(key) is not None:
            command += [flag, str(ev[key])]
    return command


# ---------------------------------------------------------------------------------------------
# results


def portable_paths(tree: Any) -> Any:
    """``tree`` with every absolute path string made portable for a committed results file: relative
    to the working directory when inside it, ``~/...`` when under the home directory."""
    if isinstance(tree, dict):
        return {k: portable_paths(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [portable_paths(v) for v in tree]
    if isinstance(tree, str) and os.path.isabs(tree):
        for root, shown in ((os.getcwd(), ""), (os.path.expanduser("~"), "~")):
            if tree == root or tree.startswith(root.rstrip(os.sep) + os.sep):
                rest = os.path.relpath(tree, root)
                return rest if not shown else f"{shown}/{rest}"
    return tree


def write_results(
    config: dict[str, Any], out: Path, warm: dict, arms: dict, evaluation: dict
) -> dict[str, Path]:
    """The results page (Markdown, JSON, two PNGs) from the eval report and the arms' metrics."""
    from faithgrpo.eval.ablation import (
        advantage_sources,
        per_kind_rates,
        plot_metrics,
        plot_reward_curves,
        render_markdown,
        render_per_kind,
        reward_curves,
        summarize,
    )
    from faithgrpo.eval.ablation import write_json as write_results_json
    from faithgrpo.eval.report.adapters import task_rows
    from faithgrpo.trainers.callbacks import read_metrics

    evaluated = eval_dir(config, out)
    report = json.loads((evaluated / "report.json").read_text())
    runs = labels(config)
    summary = summarize(report, baseline=runs[0][0])
    curves = {
        label: reward_curves(read_metrics(arm_location(config, out, label) / "metrics.jsonl"))
        for label, _, _ in runs
    }
    results = Path(config["results"])
    results.parent.mkdir(parents=True, exist_ok=True)
    paths = {
        "json": results.with_suffix(".json"),
        "markdown": results.with_suffix(".md"),
        "metrics_png": results.with_name(results.name + "_metrics.png"),
        "rewards_png": results.with_name(results.name + "_rewards.png"),
    }
    ev = config["eval"]
    held, shifted = ev.get("held_out", "causal_graph"), ev.get("shifted", "causal_story")
    per_kind = {}
    for task, task_config in eval_task_configs(config).items():
        rows = task_rows(task, int(ev.get("prompts", 16)), int(ev.get("seed", 101)), task_config)
        per_kind[task] = {
            label: per_kind_rates(evaluated / label / f"completions_{task}.jsonl", rows)
            for label in summary["checkpoints"]
        }
    sources = {}
    for label, record in arms.items():
        rows = read_metrics(arm_location(config, out, label) / "completions.jsonl")
        aggregation = record.get("aggregation", AGGREGATIONS[0])  # records written before the option
        sources[label] = advantage_sources(rows, record["weights"], aggregation=aggregation)
    payload = {
        "config": {k: v for k, v in config.items() if not k.startswith("_")},
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
        },
        "warm_start": warm,
        "arms": {label: {k: v for k, v in r.items() if k != "identity"} for label, r in arms.items()},
        "evaluation": evaluation,
        "summary": summary,
        "per_kind": per_kind,
        "advantage_sources": sources,
        "reward_curves": curves,
    }
    payload = portable_paths(payload)
    write_results_json(paths["json"], payload)
    plot_metrics(summary, paths["metrics_png"])
    plot_reward_curves(curves, paths["rewards_png"])
    total = (warm.get("sft_seconds") or 0) + sum(r["seconds"] for r in arms.values()) + evaluation["seconds"]
    preamble = [
        f"From `python recipes/ablation.py` ({config.get('_config_name', 'config')}"
        + "".join(f" `--set {item}`" for item in config.get("_overrides") or [])
        + "); every number below is from "
        f"`{portable_paths(str(evaluated / 'report.json'))}`, all of it in `{paths['json'].name}`.",
        "",
        f"- Warm start: `{portable_paths(str(warm['adapter']))}` (SFT {_seconds(warm.get('sft_seconds'))}"
        f"{', reused from the cache' if warm.get('reused') else ''}); every arm starts from it.",
        f"- Arms (same prompts, data order, seeds {config.get('seeds') or [0]}, steps, group size): "
        + "; ".join(
            f"**{label}** {r['weights']}"
            + (f", {r['aggregation']} (GDPO)" if r.get("aggregation") == "normalize_then_sum" else "")
            + f" ({_seconds(r['seconds'])})"
            for label, r in arms.items()
        )
        + ". Every arm computes every reward; weights not listed are 0 (logged, not trained on).",
        f"- Evaluation ({_seconds(evaluation['seconds'])}): {ev.get('prompts')} prompts × {ev.get('samples')} "
        f"samples per task, K ∈ {ev.get('k')}, ≤ {ev.get('max_new_tokens')} new tokens, seed {ev.get('seed')}. "
        f"`{held}`: held-out prompts of the training distribution; `{shifted}`: the shifted set "
        f"({ev.get('shifted_causal')}, graph told as a story). CoT-Pass@K counts a sample only when all six "
        "CALVER checks pass (the derivation is a verified certificate).",
        f"- Wall time in all: {_seconds(total)}.",
        "",
        "![arms × metrics](" + paths["metrics_png"].name + ")",
        "",
        "![training rewards per arm](" + paths["rewards_png"].name + ")",
    ]
    markdown = render_markdown(
        summary,
        title="Reward ablation",
        preamble=preamble,
        task_titles={held: f"Held-out: {held}", shifted: f"Shifted: {shifted}"},
    )
    rewards = config["rewards"]
    markdown += (
        "\n## What moved the advantages in training\n\nShare of the weighted within-group reward spread "
        "per reward (GRPO's advantage is the weighted sum centred within each group; a reward constant "
        "within a group adds nothing there), and groups where no trained reward varied:\n\n"
        "| arm | groups | without signal | "
        + " | ".join(rewards)
        + " |\n|"
        + "---|" * (len(rewards) + 3)
        + "\n"
    )
    for label, src in sources.items():
        cells = [f"{src['share'][r]:.2f}" if r in src["share"] else "—" for r in rewards]
        markdown += (
            f"| {label} | {src['groups']} | {src['groups_without_signal']} | " + " | ".join(cells) + " |\n"
        )
    for task, per_label in per_kind.items():
        markdown += (
            f"\n## Per query kind, {task}: answer correct / all six CALVER checks (per completion)\n\n"
            + "\n".join(render_per_kind(per_label))
            + "\n"
        )
    paths["markdown"].write_text(markdown, encoding="utf-8")
    return paths


def _seconds(value: float | None) -> str:
    if value is None:
        return "time unknown"
    minutes, seconds = divmod(round(value), 60)
    return f"{minutes} min {seconds} s" if minutes else f"{seconds} s"


# ---------------------------------------------------------------------------------------------
# smoke
def smoke_config(config: dict[str, Any], out: Path) -> dict[str, Any]:
    """The same ablation, shrunk for a wiring check: a tiny in-process model, one step per arm, two prompts."""
    from faithgrpo.testing import save_tiny_causal_lm

    config = copy.deepcopy(config)
    model = out / "tiny_model"
    if not (model / "config.json").is_file():  # a rerun keeps the files, so the eval's caches stay valid
        model = save_tiny_causal_lm(model, "llama", seed=0)
    sft = {
        "model_name_or_path": str(model), "use_peft": True, "lora_r": 4, "lora_alpha": 8,
        "lora_target_modules": ["q_proj", "v_proj"], "task_size": 4, "task_seed": 1, "causal_weight": 1.0,
        "story_fraction": 0.0, "causal": config.get("causal") or {}, "system_prompt": config.get("system_prompt"),
        "output_dir": "unused", "use_cpu": True, "max_steps": 1, "per_device_train_batch_size": 4,
        "learning_rate": 1e-3, "max_length": 4096, "save_strategy": "no", "report_to": "none",
    }  # fmt: skip
    (out / "sft_smoke.yaml").write_text(yaml.safe_dump({k: v for k, v in sft.items() if v is not None}))
    config.update(
        model_name_or_path=str(model),
        warm_start_config=str(out / "sft_smoke.yaml"),
        warm_start_cache=str(out / "warm_start_cache"),
        seeds=[0],
        results=str(out / "results" / "ablation_smoke"),
    )
    config["train"] = {
        **(config.get("train") or {}),
        "task_size": 2, "max_steps": 1, "per_device_train_batch_size": 2, "num_generations": 2,
        "max_completion_length": 8, "logging_steps": 1, "save_strategy": "no",
    }  # fmt: skip
    config["eval"] = {
        **config["eval"],
        "prompts": 2, "samples": 2, "k": [1, 2], "max_new_tokens": 8, "hints": ["sycophancy"],
        "hint_questions": 2, "min_switched": 1, "faithfulness_pairs": 2, "bootstrap": 20, "batch_size": 8,
    }  # fmt: skip
    return config


# ---------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--config", default=str(DEFAULT_CONFIG), help="the ablation YAML")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value, e.g. train.max_steps=4 or eval.prompts=8 (repeatable)",
    )
    parser.add_argument("--output_dir", help="override output_dir (runs, logs, the eval)")
    parser.add_argument("--results", help="override results (the page's path without suffix)")
    parser.add_argument(
        "--budget-minutes",
        type=float,
        help="start no new arm after this many minutes; unfinished arms (and the evaluation) wait for a rerun",
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="wiring check: a tiny in-process model, one step per arm, two evaluation prompts",
    )
    args = parser.parse_args(argv)  # fmt: skip
    try:
        config = load_config(args.config, args.overrides)
        config["_overrides"] = list(args.overrides)
        config["_config_name"] = (
            os.path.relpath(args.config, ROOT) if Path(args.config).is_absolute() else args.config
        )
        if args.output_dir:
            config["output_dir"] = args.output_dir
        out = Path(config["output_dir"]).resolve()
        out.mkdir(parents=True, exist_ok=True)
        if args.smoke:
            config = smoke_config(config, out)
        if args.results:
            config["results"] = args.results
        started = time.perf_counter()
        deadline = None if args.budget_minutes is None else time.time() + 60 * args.budget_minutes
        warm = warm_start(config, out)
        arms = train_arms(config, out, warm["adapter"], deadline)
        missing = [label for label, _, _ in labels(config) if label not in arms]
        if missing:
            say(
                f"{len(arms)} of {len(arms) + len(missing)} arms finished; rerun to train {', '.join(missing)}"
            )
            return 0
        say(
            f"evaluating {', '.join(label for label, _, _ in labels(config))} and the warm start "
            f"-> {eval_dir(config, out)}"
        )
        command = eval_command(config, out, warm["adapter"])
        status, seconds = run_logged(command, out / "logs" / "eval.log", cwd=ROOT)
        if status != 0:
            raise AblationError(
                f"the evaluation failed (exit status {status}); see {out / 'logs' / 'eval.log'}"
            )
        evaluation = {"seconds": seconds, "report": str(eval_dir(config, out) / "report.json")}
        paths = write_results(config, out, warm, arms, evaluation)
    except AblationError as error:
        print(f"error: {error}", file=sys.stderr, flush=True)
        return 2
    say(f"done in {_seconds(time.perf_counter() - started)}; results: {paths['markdown']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
