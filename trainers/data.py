"""The GRPO recipe's training data: the generated task mixture, or a user dataset, checked for the columns
its rewards read (before any model is loaded)."""

from __future__ import annotations

from pathlib import Path

from faithgrpo.trainers.checks import RecipeError

__all__ = ["REQUIRED_COLUMNS", "check_columns", "load_user_dataset", "make_dataset", "task_mix"]

# Columns each reward reads (tuples: any one of them is enough). Every reward also needs "prompt".
REQUIRED_COLUMNS: dict[str, tuple[str, ...]] = {
    "outcome": ("problem", "entry"),
    "calver": ("problem",),
    "calver_gated": ("problem",),
    "calver_certified": ("problem",),
}


def task_mix(script_args, training_args):
    """The :class:`~faithgrpo.tasks.mix.TaskMixConfig` the script arguments describe."""
    from faithgrpo.tasks.mix import TaskMixConfig

    return TaskMixConfig(
        size=script_args.task_size,
        seed=script_args.task_seed if script_args.task_seed is not None else training_args.seed,
        causal_weight=script_args.causal_weight,
        story_fraction=script_args.story_fraction,
        causal=dict(script_args.causal),
        mixture=dict(script_args.mixture),
        mixture_configs=dict(script_args.mixture_configs),
        system_prompt=script_args.system_prompt,
    )


def load_user_dataset(script_args):
    """Load ``dataset_name``'s train split: a ``save_to_disk`` directory, a data file, or a ``load_dataset`` name.

    Hub names and data directories go through ``datasets.load_dataset(name, name=dataset_config,
    streaming=dataset_streaming)`` as in TRL's GRPO script; a single ``.json``/``.jsonl``/``.parquet``/
    ``.csv`` file through its builder.
    """
    import datasets

    name, split = script_args.dataset_name, script_args.dataset_train_split
    path = Path(name).expanduser()
    builders = {".json": "json", ".jsonl": "json", ".parquet": "parquet", ".csv": "csv"}
    try:
        if path.is_dir() and (
            (path / "dataset_info.json").is_file() or (path / "dataset_dict.json").is_file()
        ):
            data = datasets.load_from_disk(str(path))
        elif path.is_file() and path.suffix in builders:
            data = datasets.load_dataset(builders[path.suffix], data_files=str(path))
        else:
            data = datasets.load_dataset(
                name, name=script_args.dataset_config, streaming=script_args.dataset_streaming
            )
    except Exception as error:  # datasets raises many types; all mean "could not load"
        raise RecipeError(
            f"cannot load dataset {name!r}: {error}; pass a save_to_disk directory, a .json/.jsonl/.parquet/.csv "
            "file, or drop --dataset_name to use the generated task mixture"
        ) from None
    if isinstance(data, (datasets.DatasetDict, datasets.IterableDatasetDict)):
        if split not in data:
            raise RecipeError(
                f"dataset {name!r} has no split {split!r}; its splits: {list(data)} (--dataset_train_split)"
            )
        data = data[split]
    return data


def check_columns(dataset, reward_names: list[str], options: dict) -> None:
    """Every column a requested reward reads is present (else a RecipeError naming the fix)."""
    columns = set(dataset.column_names or [])
    if "prompt" not in columns:
        raise RecipeError(f"the dataset has no 'prompt' column (columns: {sorted(columns)}); GRPO needs one")
    needs = dict(REQUIRED_COLUMNS)
    if options.get("cros_gate") == "correct" and "cros_is_correct" not in options:
        needs["cros"] = REQUIRED_COLUMNS["outcome"]  # the gate grades with the outcome reward's columns
    for name in reward_names:
        wanted = needs.get(name)
        if wanted and not columns & set(wanted):
            raise RecipeError(
                f"reward {name!r} reads the column {' or '.join(repr(c) for c in wanted)}, which the dataset "
                f"lacks (columns: {sorted(columns)}); add it, or remove {name!r} from --reward_funcs "
                "(and its --reward_weights entry)"
            )


def make_dataset(script_args, training_args):
    """``--dataset_name`` when given, else the generated task mixture."""
    if script_args.dataset_name is not None:
        return load_user_dataset(script_args)
    from faithgrpo.tasks.mix import build_dataset

    return build_dataset(task_mix(script_args, training_args))
