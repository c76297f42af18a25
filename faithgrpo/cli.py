"""The ``faithgrpo`` console script.

Subcommands live in small functions registered in :func:`build_parser`; each one imports what it
needs lazily so ``faithgrpo --version`` stays instant.
"""

from __future__ import annotations

import argparse
import sys

from faithgrpo import __version__


def _cmd_model(args: argparse.Namespace) -> int:
    """Resolve a model reference, load it, print its path and parameter count."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from faithgrpo.models import EmbeddedModelMissing, count_parameters, resolve

    try:
        path = resolve(args.model)
    except (EmbeddedModelMissing, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    model = AutoModelForCausalLM.from_pretrained(path)
    print(f"path: {path}")
    print(f"parameters: {count_parameters(model):,}")
    if args.generate:
        tokenizer = AutoTokenizer.from_pretrained(path)
        messages = [{"role": "user", "content": args.generate}]
        inputs = tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        output = model.generate(**inputs, max_new_tokens=args.max_new_tokens, do_sample=False)
        reply = tokenizer.decode(output[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
        print(f"prompt: {args.generate}")
        print(f"reply: {reply.strip()}")
    return 0


def _cmd_clear_eval(args: argparse.Namespace) -> int:
    """Judge every CLEAR record's listed answer; print counts per task type and question type."""
    from faithgrpo.tasks.clear.records import evaluate_file, format_summary

    summary = _read_clear(evaluate_file, args.path)
    if summary is None:
        return 2
    print(format_summary(summary))
    return 0


def _read_clear(read, path: str):
    """``read(path)``, or None after one error line (a missing path, a folder without records,
    undecodable bytes)."""
    try:
        return read(path)
    except FileNotFoundError:
        print(f"error: No such file or directory: {path}", file=sys.stderr)
    except (OSError, ValueError) as err:
        print(f"error: {' '.join(str(err).split())}", file=sys.stderr)
    return None


def _cmd_clear_judge(args: argparse.Namespace) -> int:
    """The CLEAR judge report: decided / accepted per type, then every record it disagrees with."""
    from faithgrpo.tasks.clear.records import format_report, judge_report

    report = _read_clear(judge_report, args.path)
    if report is None:
        return 2
    print(format_report(report, max_cases=args.max_cases))
    return 0


def _cmd_data(args: argparse.Namespace) -> int:
    """Write seeded rows of a task as a dataset folder (TRL's CLI or verl reads it)."""
    import json

    from faithgrpo.eval.report.adapters import task_rows
    from faithgrpo.tasks.export import export_rows

    try:
        config = json.loads(args.task_config) if args.task_config else {}
        if not isinstance(config, dict):
            raise ValueError("--task-config must be a JSON object of the task's config fields")
        if args.size < 1:
            raise ValueError(f"--size must be >= 1, got {args.size}")
        path = export_rows(task_rows(args.task, args.size, args.seed, config), args.out, args.format)
    except json.JSONDecodeError as err:
        print(f"error: --task-config is not JSON ({err.msg})", file=sys.stderr)
        return 2
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"rows: {args.size}")
    print(f"dataset: {path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="faithgrpo",
        description="Rewards and evaluators for faithful chains of thought in GRPO training.",
    )
    parser.add_argument("--version", action="version", version=f"faithgrpo {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    model = sub.add_parser("model", help="resolve a model (default: the embedded SmolLM2-135M-Instruct)")
    model.add_argument("model", nargs="?", default="embedded", help="'embedded', a local path or a hub id")
    model.add_argument("--generate", metavar="TEXT", help="also greedily answer TEXT as a chat prompt")
    model.add_argument("--max-new-tokens", type=int, default=32)
    model.set_defaults(func=_cmd_model)

    clear = sub.add_parser(
        "clear-eval",
        help="judge each CLEAR record's listed answer; counts per task type and question type",
    )
    clear.add_argument(
        "path", help="a CLEAR JSON-Lines file, or a directory of them (CLEAR's data/json_single/)"
    )
    clear.set_defaults(func=_cmd_clear_eval)

    report = sub.add_parser(
        "clear-judge",
        help="the CLEAR judge report: records decided and listed answers accepted per task type and "
        "question type, and each record where the judge disagrees with the label, with its answer",
    )
    report.add_argument(
        "path", help="a CLEAR JSON-Lines file, or a directory of them (CLEAR's data/json_single/)"
    )
    report.add_argument("--max-cases", type=int, default=50, help="records listed per section (default 50)")
    report.set_defaults(func=_cmd_clear_judge)

    data = sub.add_parser(
        "data",
        help="write seeded rows of a task as a dataset folder (for trl grpo --dataset_name, or verl)",
    )
    data.add_argument(
        "task", help="causal_graph, causal_story, causal_bn, knights_knaves or a reasoning-gym task"
    )
    data.add_argument("--out", required=True, help="output folder (train.jsonl, or train.parquet for verl)")
    data.add_argument("--size", type=int, default=512, help="rows")
    data.add_argument("--seed", type=int, default=0, help="seed of the rows")
    data.add_argument("--task-config", default=None, help="JSON object of the task's config fields")
    data.add_argument("--format", default="trl", choices=("trl", "verl"), help="column layout")
    data.set_defaults(func=_cmd_data)

    from faithgrpo.eval.cli import add_eval_subcommand, add_select_subcommand

    add_eval_subcommand(sub)
    add_select_subcommand(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
