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

from faithgrpo.eval.options import HelpFormatter, int_list, name_list

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
    from faithgrpo.eval.config import add_eval_arguments

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
    from faithgrpo.eval.config import config_from_args as build

    return build(args)


def run_eval_command(args: argparse.Namespace) -> int:
    """Run ``faithgrpo eval``; user errors print one line and exit with status 2."""
    from faithgrpo.eval.pipeline import run_eval, write_report
    from faithgrpo.models import EmbeddedModelMissing

    config = config_from_args(args)
    try:
        config.validate()
        config.check_environment(args.out)
        report = run_eval(config, args.out)
    except (ValueError, EmbeddedModelMissing, ImportError) as err:
        # ValueError covers bad options, CacheError and AdapterMismatchError: all name their fix.
        print(f"error: {err}", file=sys.stderr)
        return 2
    paths = write_report(report, args.out)
    for name, path in paths.items():
        print(f"{name}: {path}")
    return 0


# ---------------------------------------------------------------------------------------------------
# faithgrpo clear-bestofk: flags are generated from ClearBestOfKConfig's fields, so each setting is
# written once (the dataclass) plus its help line here.
_CLEAR_BESTOFK_HELP = {
    "clear": "a CLEAR JSONL file or CLEAR's data/json_single directory",
    "out": "output directory: completions cache, clear_bestofk.json / .md / .png",
    "model": "policy: 'embedded', a local path or a hub id",
    "adapter": "LoRA adapter directory trained on --model",
    "tasks": "comma-separated CLEAR task types with find-one questions",
    "limit": "questions, stratified over task type x variant (default: all)",
    "samples": "completions per question (G), at least max K",
    "ks": "K values, e.g. 1,2,4,8,16,32",
    "subsets": "seeded K-subsets per question when K < G",
    "temperature": "sampling temperature",
    "top_p": "nucleus sampling mass",
    "max_new_tokens": "generation budget per completion",
    "batch_size": "sequences per generate / forward call",
    "seed": "seed of sampling, subsets and bootstrap",
    "backend": "generation backend: transformers or vllm (GPU, optional package)",
    "n_bootstrap": "bootstrap resamples over questions",
    "confidence": "interval coverage",
    "overwrite": "regenerate even when the completions cache matches",
    "progress": "hide progress bars",
}


def add_clear_bestofk_subcommand(subparsers) -> argparse.ArgumentParser:
    """Add ``clear-bestofk`` (the CALVER paper's best-of-K experiment on CLEAR) to ``faithgrpo``.

    Example:
        >>> parser = argparse.ArgumentParser(prog="faithgrpo")
        >>> _ = add_clear_bestofk_subcommand(parser.add_subparsers(dest="command"))
        >>> args = parser.parse_args(["clear-bestofk", "--clear", "c", "--out", "o", "--k", "1,2", "--limit", "3"])
        >>> args.ks, args.limit, args.progress
        ((1, 2), 3, True)
    """
    import dataclasses

    from faithgrpo.eval.clear_bestofk import ClearBestOfKConfig

    parser = subparsers.add_parser(
        "clear-bestofk",
        help="best-of-K selection on CLEAR: CALVER vs plurality vs confidence vs random",
        description=(
            "Sample G six-slot traces per CLEAR find-one-valid question, select one per K-subset by CALVER, "
            "plurality, confidence and random, and grade the picks by the judge and by exact match."
        ),
    )
    for f in dataclasses.fields(ClearBestOfKConfig):
        flag = "--" + ("k" if f.name == "ks" else f.name.replace("_", "-"))
        help_text = _CLEAR_BESTOFK_HELP[f.name]
        if f.name == "progress":
            parser.add_argument("--no-progress", dest="progress", action="store_false", help=help_text)
        elif f.type in ("bool", bool):
            parser.add_argument(flag, dest=f.name, action="store_true", help=help_text)
        elif f.name == "ks":
            parser.add_argument(flag, dest="ks", type=int_list, default=f.default, help=help_text)
        elif f.name == "tasks":
            parser.add_argument(flag, dest="tasks", type=name_list, default=f.default, help=help_text)
        elif f.default is dataclasses.MISSING:
            parser.add_argument(flag, dest=f.name, required=True, help=help_text)
        else:
            kind = {"int": int, "float": float}.get(str(f.type).split(" ")[0], str)
            parser.add_argument(flag, dest=f.name, type=kind, default=f.default, help=help_text)
    parser.set_defaults(func=run_clear_bestofk_command)
    return parser


def run_clear_bestofk_command(args: argparse.Namespace) -> int:
    """Run ``faithgrpo clear-bestofk``; user errors print one line and exit with status 2."""
    import dataclasses

    from faithgrpo.eval.clear_bestofk import ClearBestOfKConfig, run_clear_bestofk
    from faithgrpo.eval.generation import CacheError
    from faithgrpo.models import EmbeddedModelMissing

    config = ClearBestOfKConfig(
        **{f.name: getattr(args, f.name) for f in dataclasses.fields(ClearBestOfKConfig)}
    )
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
