"""The ``faithgrpo eval`` subcommand (registered by ``faithgrpo/cli.py`` via `add_eval_subcommand`).

Example:
    faithgrpo eval --model embedded --adapter runs/grpo_cros/final --tasks causal_graph,knights_knaves \\
        --k 1,2,4,8,16 --samples 16 --hints all --out eval_out --baseline embedded

    # three checkpoints side by side, named base / sft / grpo, and an LLM judge of CoT correctness
    faithgrpo eval --model embedded --label base --checkpoint sft embedded runs/sft/final \\
        --checkpoint grpo embedded runs/grpo_cros/final --judge embedded --judge-samples 3 \\
        --judge-aggregate majority --judge-items 64 --out eval_out
"""

from __future__ import annotations

import argparse
import sys

from faithgrpo.eval.report.options import HelpFormatter, add_dataclass_arguments, dataclass_from_args

__all__ = [
    "add_clear_bestofk_subcommand",
    "add_eval_subcommand",
    "config_from_args",
    "run_clear_bestofk_command",
    "run_eval_command",
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
# faithgrpo clear-bestofk: flags generated from ClearBestOfKConfig's fields, like faithgrpo eval's.


def add_clear_bestofk_subcommand(subparsers) -> argparse.ArgumentParser:
    """Add ``clear-bestofk`` (the CALVER paper's best-of-K experiment on CLEAR) to ``faithgrpo``.

    Example:
        >>> parser = argparse.ArgumentParser(prog="faithgrpo")
        >>> _ = add_clear_bestofk_subcommand(parser.add_subparsers(dest="command"))
        >>> args = parser.parse_args(["clear-bestofk", "--clear", "c", "--out", "o", "--k", "1,2", "--limit", "3"])
        >>> args.ks, args.limit, args.progress
        ((1, 2), 3, True)
    """
    from faithgrpo.eval.clear_bestofk import ClearBestOfKConfig

    parser = subparsers.add_parser(
        "clear-bestofk",
        help="best-of-K selection on CLEAR: CALVER vs plurality vs confidence vs random",
        description=(
            "Sample G six-slot traces per CLEAR find-one-valid question, select one per K-subset by CALVER, "
            "plurality, confidence and random, and grade the picks by the judge and by exact match."
        ),
    )
    add_dataclass_arguments(parser, ClearBestOfKConfig)
    parser.set_defaults(func=run_clear_bestofk_command)
    return parser


def run_clear_bestofk_command(args: argparse.Namespace) -> int:
    """Run ``faithgrpo clear-bestofk``; user errors print one line and exit with status 2."""
    from faithgrpo.eval.clear_bestofk import ClearBestOfKConfig, run_clear_bestofk
    from faithgrpo.eval.generation.cache import CacheError
    from faithgrpo.models import EmbeddedModelMissing

    config = dataclass_from_args(ClearBestOfKConfig, args)
    try:
        report = run_clear_bestofk(config)
    except (ValueError, CacheError, EmbeddedModelMissing, ImportError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    result = report.result
    k = max(result.ks)
    for selector in ("calver", "plurality", "confidence", "random"):
        acc = result.accuracy[k][selector]
        print(f"K={k} {selector:<10} valid {acc['valid'].value:.3f}  exact {acc['exact'].value:.3f}")
    for name, path in report.files.items():
        print(f"{name}: {path}")
    return 0
