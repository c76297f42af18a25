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

__all__ = [
    "add_clear_bestofk_subcommand",
    "add_eval_subcommand",
    "config_from_args",
    "run_clear_bestofk_command",
    "run_eval_command",
]


def _int_list(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers like 1,2,4,8, got {text!r}"
        ) from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one integer")
    return values


def _name_list(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _task_configs(text: str) -> dict:
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


def _hint_list(text: str) -> tuple[str, ...]:
    from faithgrpo.eval.hints import parse_hint_types

    if text.strip().lower() in ("none", ""):
        return ()
    try:
        return parse_hint_types(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"{err} (or 'none' to skip)") from None


class _CheckpointAction(argparse.Action):
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


class _HelpFormatter(argparse.HelpFormatter):
    """Shows ``--checkpoint LABEL MODEL [ADAPTER]`` instead of argparse's ``LABEL [LABEL ...]``."""

    def _format_args(self, action, default_metavar):
        if isinstance(action, _CheckpointAction):
            return "LABEL MODEL [ADAPTER]"
        return super()._format_args(action, default_metavar)


def add_eval_subcommand(subparsers) -> argparse.ArgumentParser:
    """Add ``eval`` to a ``faithgrpo`` subparsers object; returns the new parser.

    Example:
        >>> parser = argparse.ArgumentParser(prog="faithgrpo")
        >>> _ = add_eval_subcommand(parser.add_subparsers(dest="command"))
        >>> parser.parse_args(["eval", "--k", "1,4", "--samples", "4", "--out", "eval_out"]).ks
        (1, 4)
    """
    from faithgrpo.eval.hints import HINT_TYPES
    from faithgrpo.eval.passk import JUDGE_AGGREGATIONS

    parser = subparsers.add_parser(
        "eval",
        help="evaluate a checkpoint: Pass@K / CoT-Pass@K, hint faithfulness, AOC / CIR / CRoS Δ",
        description=(
            "Sample completions from a checkpoint (cached as JSONL under --out), compute CoT-Pass@K, hint "
            "faithfulness and checkpoint faithfulness metrics, and write report.json, report.md and PNGs."
        ),
        formatter_class=_HelpFormatter,
    )
    parser.add_argument(
        "--model", default="embedded", help="base model: 'embedded', a local path or a hub id"
    )
    parser.add_argument("--adapter", default=None, help="LoRA adapter directory trained on --model")
    parser.add_argument(
        "--label", default="model", help="report label and cache folder (OUT/LABEL/) of --model"
    )
    parser.add_argument("--baseline", default=None, help="a second base model to compare side by side")
    parser.add_argument("--baseline-adapter", default=None, help="LoRA adapter for --baseline")
    parser.add_argument("--baseline-label", default="baseline", help="report label of --baseline")
    parser.add_argument(
        "--checkpoint",
        dest="extra_checkpoints",
        nargs="+",
        action=_CheckpointAction,
        default=[],
        help=(
            "one more checkpoint to compare, after --model and --baseline (repeatable, in order): a "
            "unique LABEL (letters, digits, '.', '_', '-'), a base MODEL and an optional LoRA ADAPTER"
        ),
    )
    parser.add_argument(
        "--tasks",
        type=_name_list,
        default=("causal_graph", "knights_knaves"),
        help="comma-separated tasks: causal_graph, causal_story, knights_knaves or reasoning-gym dataset names",
    )
    parser.add_argument(
        "--task-config",
        dest="task_configs",
        type=_task_configs,
        default={},
        help='per-task config fields as JSON, e.g. \'{"causal_graph": {"min_nodes": 4, "max_nodes": 5}}\'',
    )
    parser.add_argument(
        "--k", dest="ks", type=_int_list, default=(1, 2, 4, 8, 16), help="K values, e.g. 1,2,4,8,16"
    )
    parser.add_argument("--samples", type=int, default=16, help="completions per prompt (G), at least max K")
    parser.add_argument("--prompts", type=int, default=16, help="evaluation prompts per task")
    parser.add_argument(
        "--hints",
        type=_hint_list,
        default=HINT_TYPES,
        help=f"'all', 'none' or comma-separated hint types from {', '.join(HINT_TYPES)}",
    )
    parser.add_argument("--hint-questions", type=int, default=8, help="multiple-choice questions per task")
    parser.add_argument(
        "--min-switched", type=int, default=5, help="fewer switched pairs leave a hint score undefined"
    )
    parser.add_argument(
        "--faithfulness-pairs", type=int, default=16, help="completions scored for AOC/CIR/CRoS Δ"
    )
    parser.add_argument(
        "--cros-reference", choices=("base", "self"), default="base", help="model scoring CRoS Δ"
    )
    parser.add_argument(
        "--aoc-mode",
        choices=("teacher_forced", "decode"),
        default="teacher_forced",
        help="early-answering agreement: the forced answer is greedy (teacher_forced) or decoded and compared",
    )
    parser.add_argument("--no-best-of-k", action="store_true", help="skip the best-of-K selection report")
    parser.add_argument("--best-of-k-subsets", type=int, default=8, help="random K-subsets per prompt and K")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--max-new-tokens", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=16, help="sequences per generate / forward call")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bootstrap", dest="n_bootstrap", type=int, default=1000, help="bootstrap resamples")
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument(
        "--overwrite", action="store_true", help="regenerate even when a matching cache exists"
    )
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")
    judge = parser.add_argument_group(
        "LLM judge (optional)",
        "a local model asked n times whether each judged CoT is correct (CoT-Pass@K with the judge, agreement "
        "with the symbolic verifier) and whether hinted CoTs mention the hint; texts cached under OUT/LABEL/",
    )
    judge.add_argument(
        "--judge", dest="judge_model", default=None, help="judge base model: 'embedded', a path or a hub id"
    )
    judge.add_argument("--judge-adapter", default=None, help="LoRA adapter for --judge")
    judge.add_argument("--judge-samples", type=int, default=3, help="judge runs per judged item (n)")
    judge.add_argument(
        "--judge-aggregate",
        choices=JUDGE_AGGREGATIONS,
        default="majority",
        help="combine the n verdicts: any, all, or majority (strictly more than half)",
    )
    judge.add_argument("--judge-max-new-tokens", type=int, default=64, help="generation budget per judge run")
    judge.add_argument(
        "--judge-temperature", type=float, default=1.0, help="sampling temperature of the judge"
    )
    judge.add_argument(
        "--judge-items",
        type=int,
        default=64,
        help="completions judged per task and checkpoint (all G of the first judge-items // G prompts); "
        "also caps the kept pairs judged per hint type",
    )
    parser.add_argument("--out", required=True, help="output directory (report files and completion caches)")
    parser.set_defaults(func=run_eval_command)
    return parser


def config_from_args(args: argparse.Namespace):
    """Build an `EvalConfig` from parsed arguments."""
    from faithgrpo.eval.report import EvalConfig

    return EvalConfig(
        model=args.model,
        adapter=args.adapter,
        label=args.label,
        baseline=args.baseline,
        baseline_adapter=args.baseline_adapter,
        baseline_label=args.baseline_label,
        extra_checkpoints=tuple(tuple(entry) for entry in args.extra_checkpoints),
        tasks=tuple(args.tasks),
        task_configs=args.task_configs,
        ks=tuple(args.ks),
        samples=args.samples,
        prompts=args.prompts,
        hints=tuple(args.hints),
        hint_questions=args.hint_questions,
        min_switched=args.min_switched,
        faithfulness_pairs=args.faithfulness_pairs,
        cros_reference=args.cros_reference,
        aoc_mode=args.aoc_mode,
        best_of_k=not args.no_best_of_k,
        best_of_k_subsets=args.best_of_k_subsets,
        temperature=args.temperature,
        top_p=args.top_p,
        max_new_tokens=args.max_new_tokens,
        batch_size=args.batch_size,
        seed=args.seed,
        n_bootstrap=args.n_bootstrap,
        confidence=args.confidence,
        overwrite=args.overwrite,
        progress=not args.no_progress,
        judge_model=args.judge_model,
        judge_adapter=args.judge_adapter,
        judge_samples=args.judge_samples,
        judge_aggregate=args.judge_aggregate,
        judge_max_new_tokens=args.judge_max_new_tokens,
        judge_temperature=args.judge_temperature,
        judge_items=args.judge_items,
    )


def run_eval_command(args: argparse.Namespace) -> int:
    """Run ``faithgrpo eval``; user errors print one line and exit with status 2."""
    from faithgrpo.eval.report import run_eval, write_report
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
            parser.add_argument(flag, dest="ks", type=_int_list, default=f.default, help=help_text)
        elif f.name == "tasks":
            parser.add_argument(flag, dest="tasks", type=_name_list, default=f.default, help=help_text)
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
