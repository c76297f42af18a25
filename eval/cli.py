"""The ``faithgrpo eval`` and ``faithgrpo select`` subcommands (registered by ``faithgrpo/cli.py`` via
`add_eval_subcommand` and `add_select_subcommand`).

Example:
    faithgrpo eval --model embedded --adapter runs/grpo_cros/final --tasks causal_graph,knights_knaves \\
        --k 1,2,4,8,16 --samples 16 --hints all --out eval_out --baseline embedded

    # three checkpoints side by side, named base / sft / grpo, and an LLM judge of CoT correctness
    faithgrpo eval --model embedded --label base --checkpoint sft embedded runs/sft/final \\
        --checkpoint grpo embedded runs/grpo_cros/final --judge embedded --judge-samples 3 \\
        --judge-aggregate majority --judge-items 64 --out eval_out

    # best-of-K selection on frozen pools (eval/selection)
    faithgrpo select --family causal_graph --adapter runs/sft/final --questions 64 --samples 32
"""

from __future__ import annotations

import argparse
import sys

from faithgrpo.eval.report.options import HelpFormatter, add_dataclass_arguments, dataclass_from_args

__all__ = [
    "add_eval_subcommand",
    "add_select_subcommand",
    "config_from_args",
    "run_eval_command",
    "run_select_command",
]


def add_eval_subcommand(subparsers) -> argparse.ArgumentParser:
    """Add ``eval`` to a ``faithgrpo`` subparsers object; returns the new parser.

    Example:
        >>> parser = argparse.ArgumentParser(prog="faithgrpo")
        >>> _ = add_eval_subcommand(parser.add_subparsers(dest="command"))
        >>> parser.parse_args(["eval", "--k", "1,4", "--samples", "4", "--out", "eval_out"]).ks
        (1, 4)
    """
    from faithgrpo.eval.report.config import add_eval_arguments

    parser = subparsers.add_parser(
        "eval",
        help="evaluate a checkpoint: Pass@K / CoT-Pass@K, hint faithfulness, AOC / CIR / CRoS Δ",
        description=(
            "Sample completions from a checkpoint (cached as JSONL under --out), compute CoT-Pass@K, hint "
            "faithfulness and checkpoint faithfulness metrics, and write report.json, report.md and PNGs."
        ),
        formatter_class=HelpFormatter,
    )
    add_eval_arguments(parser)  # one option per EvalConfig field
    parser.add_argument("--out", required=True, help="output directory (report files and completion caches)")
    parser.set_defaults(func=run_eval_command)
    return parser


def config_from_args(args: argparse.Namespace):
    """Build an `EvalConfig` from parsed arguments (generic over its fields; ``--out`` is not one)."""
    from faithgrpo.eval.report.config import config_from_args as build

    return build(args)


def run_eval_command(args: argparse.Namespace) -> int:
    """Run ``faithgrpo eval``; user errors print one line and exit with status 2."""
    from faithgrpo.eval.report.outlock import own_out_dir
    from faithgrpo.eval.report.pipeline import run_eval, write_report
    from faithgrpo.models import EmbeddedModelMissing

    config = config_from_args(args)
    try:
        config.validate()
        config.check_environment(args.out)
        # The run owns --out from its first write to its last: a second run on it stops here.
        with own_out_dir(args.out) as interrupted:
            if interrupted:
                print(
                    f"note: the last run on --out {args.out!r} did not finish (pid {interrupted.get('pid')}); "
                    "its lock died with it, and this run reuses only the caches that match",
                    file=sys.stderr,
                )
            report = run_eval(config, args.out)
            paths = write_report(report, args.out)
    except (ValueError, EmbeddedModelMissing, ImportError) as err:
        # ValueError covers bad options, CacheError, AdapterMismatchError and OutDirBusy: all name their fix.
        print(f"error: {err}", file=sys.stderr)
        return 2
    for name, path in paths.items():
        print(f"{name}: {path}")
    return 0


# ---------------------------------------------------------------------------------------------------
# faithgrpo select: flags generated from SelectConfig's fields, like faithgrpo eval's.


def add_select_subcommand(subparsers) -> argparse.ArgumentParser:
    """Add ``select`` (the best-of-K selection experiment on one task family) to ``faithgrpo``.

    Example:
        >>> parser = argparse.ArgumentParser(prog="faithgrpo")
        >>> _ = add_select_subcommand(parser.add_subparsers(dest="command"))
        >>> args = parser.parse_args(["select", "--family", "clear", "--clear", "c", "--k", "1,2"])
        >>> args.ks, args.questions, args.offline
        ((1, 2), 64, False)
    """
    from faithgrpo.eval.selection.command import SelectConfig

    parser = subparsers.add_parser(
        "select",
        help="best-of-K selection on frozen pools: CALVER vs structure-only, plurality, confidence, random",
        description=(
            "Sample G completions per held-out question once into a frozen pool store, select one per "
            "K-subset with every selector, and grade the picks by validity and by exact match."
        ),
        formatter_class=HelpFormatter,
    )
    add_dataclass_arguments(parser, SelectConfig)
    parser.set_defaults(func=run_select_command)
    return parser


def run_select_command(args: argparse.Namespace) -> int:
    """Run ``faithgrpo select``; user errors print one line and exit with status 2."""
    from faithgrpo.eval.selection.command import SelectConfig, run_select
    from faithgrpo.models import EmbeddedModelMissing

    config = dataclass_from_args(SelectConfig, args)
    try:
        report = run_select(config)
    except (ValueError, EmbeddedModelMissing, ImportError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    result = report["result"]
    print(f"{report['family']}: {report['questions_pooled']} of {report['questions_asked']} questions pooled")
    if result:
        k = max(result["ks"])
        for selector in (*result["selectors"], "oracle"):
            acc = result["accuracy"][str(k)][selector]
            print(
                f"K={k} {selector:<10} valid {acc['valid']['value']:.3f}  exact {acc['exact']['value']:.3f}"
            )
    return 0
