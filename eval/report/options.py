"""Command-line options generated from dataclass fields, so each setting is written once.

A config dataclass declares every field with `option` (default, help text and any CLI detail in
the field's metadata); `add_dataclass_arguments` turns the fields into ``argparse`` options and
`dataclass_from_args` builds the dataclass back from the parsed namespace. `EvalConfig`
(``faithgrpo eval``) is the user; the argparse types below (`int_list`, `name_list`, `task_config_json`,
`hint_list`) and `CheckpointAction` are the custom parsers its fields name.

Field metadata keys (all optional but ``help``):

=============  ==========================================================================
``help``       the ``--help`` line (and the field's documentation)
``flag``       the option string (default: ``--`` + the field name with ``-`` for ``_``)
``type``       an argparse type callable (default: from the annotation: int, float or str)
``choices``    allowed values
``action``     an argparse action (class or name); ``nargs`` goes with it
``negate``     a bool field set to ``False`` by its flag (e.g. ``--no-progress``)
``group``      the name of an argument group (see `add_dataclass_arguments`)
``metavar``    the value's name in ``--help``
=============  ==========================================================================
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

__all__ = [
    "CheckpointAction",
    "HelpFormatter",
    "add_dataclass_arguments",
    "dataclass_from_args",
    "hint_list",
    "int_list",
    "name_list",
    "option",
    "task_config_json",
]

_CLI_KEYS = ("flag", "type", "choices", "action", "nargs", "negate", "group", "metavar")


def option(default: Any = dataclasses.MISSING, *, help: str, factory: Any = None, **cli: Any) -> Any:
    """A dataclass field whose metadata carries its help text and CLI details (keys in the module doc).

    Args:
        default: the default value (immutable); use ``factory`` for a mutable one.
        help: the help line.
        factory: a ``default_factory`` instead of ``default``.
        **cli: ``flag``, ``type``, ``choices``, ``action``, ``nargs``, ``negate``, ``group``, ``metavar``.

    Returns:
        A `dataclasses.field`.
    """
    unknown = set(cli) - set(_CLI_KEYS)
    if unknown:
        raise TypeError(f"unknown option metadata {sorted(unknown)}")
    metadata = {"help": help, **cli}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def _default(f: dataclasses.Field) -> Any:
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


def add_dataclass_arguments(
    parser: argparse.ArgumentParser, cls: type, groups: dict[str, Any] | None = None
) -> None:
    """Add one option per field of the dataclass ``cls`` to ``parser`` (dest = the field name).

    Args:
        parser: the parser (or subparser) to extend.
        cls: a dataclass whose fields were declared with `option`.
        groups: argument groups by name, for fields with a ``group`` key (default: none).
    """
    for f in dataclasses.fields(cls):
        meta = f.metadata
        target = (groups or {}).get(meta.get("group"), parser)
        flag = meta.get("flag") or "--" + f.name.replace("_", "-")
        kwargs: dict[str, Any] = {"dest": f.name, "help": meta["help"]}
        kind = str(f.type)
        if kind == "bool":
            kwargs["action"] = "store_false" if meta.get("negate") else "store_true"
            kwargs["default"] = _default(f)
        else:
            if "action" in meta:
                kwargs["action"] = meta["action"]
                kwargs["nargs"] = meta.get("nargs")
            else:
                kwargs["type"] = meta.get("type") or {"int": int, "float": float}.get(kind, str)
            for key in ("choices", "metavar"):
                if key in meta:
                    kwargs[key] = meta[key]
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                kwargs["required"] = True
            else:
                kwargs["default"] = _default(f)
        target.add_argument(flag, **kwargs)


def dataclass_from_args(cls: type, args: argparse.Namespace) -> Any:
    """Build ``cls`` from a namespace parsed with `add_dataclass_arguments` (lists of tuple fields become tuples)."""
    values = {}
    for f in dataclasses.fields(cls):
        value = getattr(args, f.name)
        if str(f.type).startswith("tuple") and isinstance(value, list):
            value = tuple(tuple(v) if isinstance(v, list) else v for v in value)
        values[f.name] = value
    return cls(**values)


# ---------------------------------------------------------------------------------------------------
# argparse types and actions named by config fields
# ---------------------------------------------------------------------------------------------------


def int_list(text: str) -> tuple[int, ...]:
    """``"1,2,4"`` -> ``(1, 2, 4)``; raises ``ArgumentTypeError`` otherwise."""
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers like 1,2,4,8, got {text!r}"
        ) from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one integer")
    return values


def name_list(text: str) -> tuple[str, ...]:
    """``"a, b,"`` -> ``("a", "b")``."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


def task_config_json(text: str) -> dict:
    """A JSON object mapping task names to config fields; raises ``ArgumentTypeError`` otherwise."""
    import json

    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(
            f'expected a JSON object like \'{{"causal_graph": {{"max_nodes": 5}}}}\' ({err})'
        ) from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("expected a JSON object mapping task names to config fields")
    return value


def hint_list(text: str) -> tuple[str, ...]:
    """``"all"``, ``"none"`` (or empty: no hints) or comma-separated hint types."""
    from faithgrpo.eval.metrics.hint_detection import parse_hint_types

    if text.strip().lower() in ("none", ""):
        return ()
    try:
        return parse_hint_types(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"{err} (or 'none' to skip)") from None


class CheckpointAction(argparse.Action):
    """``--checkpoint LABEL MODEL [ADAPTER]``, repeatable: appends ``(label, model, adapter or None)``."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        if len(values) not in (2, 3):
            raise argparse.ArgumentError(
                self,
                f"expected LABEL MODEL [ADAPTER] (2 or 3 values), got {len(values)}: {' '.join(values)!r}; "
                "e.g. --checkpoint sft embedded runs/sft/final",
            )
        label, model, adapter = (*values, None) if len(values) == 2 else values
        entries = list(getattr(namespace, self.dest, None) or [])
        entries.append((label, model, adapter))
        setattr(namespace, self.dest, entries)


class HelpFormatter(argparse.HelpFormatter):
    """Shows ``--checkpoint LABEL MODEL [ADAPTER]`` instead of argparse's ``LABEL [LABEL ...]``."""

    def _format_args(self, action, default_metavar):
        if isinstance(action, CheckpointAction):
            return "LABEL MODEL [ADAPTER]"
        return super()._format_args(action, default_metavar)
