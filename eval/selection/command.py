"""``faithgrpo select``: the best-of-K selection experiment on one task family, end to end.

Stages (each reusable on its own):

1. **questions** (`faithgrpo.eval.selection.families.build_questions`): held-out, stratified; with
   ``--sft-config`` the policy's SFT prompts are dropped and its system message is used;
2. **pools** (`faithgrpo.eval.selection.pools`): G completions per question, sampled once into the
   frozen store ``<pools>/<policy>-<family>.jsonl.gz`` (``--budget-minutes`` bounds one run; the next
   run continues); ``--offline`` never loads a model and re-scores the stored pools only;
3. **grading** (`faithgrpo.eval.selection.grading`): features from the public problem, grades
   from the gold side;
4. **selection** (`faithgrpo.eval.selection.selectors.run_selection`) and the regime figures;
5. **report** (`faithgrpo.eval.selection.report`): ``<out>/<policy>-<family>.json`` / ``.md``.

Every setting is checked before any model loads; a bad one stops with one line naming the fix.

Example:
    faithgrpo select --family causal_graph --adapter runs/sft_selection_cpu \\
        --sft-config recipes/configs/sft_selection_cpu.yaml --questions 64 --out runs/selection
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from faithgrpo.eval.generation.settings import DEFAULT_THREADS, ENGINES
from faithgrpo.eval.report.options import int_list, option
from faithgrpo.eval.selection.selectors import DEFAULT_SUBSETS

__all__ = ["SelectConfig", "SelectError", "open_store", "run_select", "sft_inputs"]


class SelectError(ValueError):
    """A setting of ``faithgrpo select`` that cannot work; the message says what to change."""


@dataclass
class SelectConfig:
    """Settings of one ``faithgrpo select`` run (every field is a flag)."""

    family: str = option(help="task family: causal_graph, causal_story, causal_bn, causal_bn_story, "
                         "knights_knaves or clear")  # fmt: skip
    out: str = option(
        "runs/selection", help="folder of the results (JSON and Markdown per policy and family)"
    )
    pools: str = option("recipes/results/selection/pools", help="folder of the frozen pool stores")
    policy: str = option("sft", help="the policy's label in file names (e.g. sft, base)")
    model: str = option("embedded", help="policy: 'embedded', a local path or a hub id")
    adapter: str | None = option(None, help="LoRA adapter directory trained on --model")
    sft_config: str | None = option(
        None, help="the policy's SFT config: its prompts are held out and its system message is used"
    )
    clear: str | None = option(None, help="CLEAR's data/json_single folder (family clear only)")
    questions: int = option(64, help="held-out questions (clear: records, stratified)")
    question_seed: int = option(39, help="seed of the held-out questions (apart from SFT/GRPO seeds)")
    samples: int = option(32, help="completions per question (G)")
    ks: tuple[int, ...] = option((1, 2, 4, 8, 16, 32), flag="--k", type=int_list, help="K values")
    subsets: int = option(DEFAULT_SUBSETS, help="seeded K-subsets per question when K < G")
    temperature: float = option(1.0, help="sampling temperature")
    top_p: float = option(1.0, help="nucleus sampling mass")
    max_new_tokens: int = option(384, help="generation budget per completion")
    seed: int = option(0, help="seed of sampling, subsets and bootstrap")
    threads: int = option(DEFAULT_THREADS, help="torch threads (fixed: the same seed gives the same pools)")
    engine: str = option("auto", help="sampling loop: decode, generate, or auto (decode where it applies)")
    batch_questions: int = option(
        1, help="questions sampled per decode call (finished rows take the next one's); 1 measured fastest"
    )
    slots: int | None = option(None, type=int, help="rows decoded together (default: --samples)")
    budget_minutes: float | None = option(
        None, type=float, help="stop sampling new pools after this long (the next run continues)"
    )
    offline: bool = option(False, help="never load a model: re-score and re-grade the stored pools only")
    judge: str | None = option(
        None,
        help="judge model of the judge selector ('embedded', a path); its scores are cached next to the pools",
    )
    n_bootstrap: int = option(1000, help="bootstrap resamples over questions")
    confidence: float = option(0.95, help="interval coverage")

    def validate(self) -> None:
        """Check every setting before anything loads (one line naming the flag and the fix)."""
        from faithgrpo.eval.selection.families import FAMILIES

        if self.family not in FAMILIES:
            raise SelectError(f"--family {self.family!r} is unknown: use one of {', '.join(FAMILIES)}")
        if self.family == "clear":
            if not self.clear or not Path(self.clear).is_dir():
                raise SelectError(
                    f"--clear {self.clear!r} is not a folder: pass CLEAR's data/json_single folder"
                )
        elif self.clear:
            raise SelectError(f"--clear applies to --family clear only, not {self.family!r}")
        if self.sft_config and not Path(self.sft_config).is_file():
            raise SelectError(f"--sft-config {self.sft_config!r} is not a file: pass the policy's SFT YAML")
        if not self.policy or any(c in self.policy for c in "/\\ ") or self.policy.startswith("."):
            raise SelectError(f"--policy {self.policy!r} must be a plain label such as sft or base")
        if self.questions < 1 or self.samples < 1 or self.subsets < 1:
            raise SelectError("--questions, --samples and --subsets must be >= 1")
        if not self.ks or any(k < 1 or k > self.samples for k in self.ks):
            raise SelectError(
                f"every --k must be between 1 and --samples={self.samples}, got {list(self.ks)}"
            )
        if self.temperature <= 0:
            raise SelectError(
                f"--temperature must be > 0 (best-of-K needs distinct samples), got {self.temperature}"
            )
        if not 0 < self.top_p <= 1:
            raise SelectError(f"--top-p must be in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1 or self.threads < 1 or self.batch_questions < 1:
            raise SelectError("--max-new-tokens, --threads and --batch-questions must be >= 1")
        if self.slots is not None and self.slots < 1:
            raise SelectError(f"--slots must be >= 1, got {self.slots}")
        if self.engine not in ENGINES:
            raise SelectError(f"--engine must be one of {ENGINES}, got {self.engine!r}")
        if self.budget_minutes is not None and self.budget_minutes <= 0:
            raise SelectError(f"--budget-minutes must be > 0, got {self.budget_minutes}")
        if self.n_bootstrap < 0 or not 0 < self.confidence < 1:
            raise SelectError("--n-bootstrap must be >= 0 and --confidence in (0, 1)")
        if not self.offline:
            from faithgrpo.eval.generation.checkpoints import check_checkpoint

            for flag, model, adapter in (
                ("--model/--adapter", self.model, self.adapter),
                ("--judge", self.judge, None),
            ):
                if model is None:
                    continue
                try:
                    check_checkpoint(model, adapter)
                except ValueError as err:
                    raise SelectError(f"{flag}: {err}") from None

    def pool_settings(self):
        from faithgrpo.eval.selection.pools import PoolSettings

        return PoolSettings(self.samples, self.temperature, self.top_p, self.max_new_tokens, self.seed)


def sft_inputs(path: str | None) -> tuple[set[str], str | None]:
    """The training prompts (user messages) and the system message of an SFT config, if given."""
    if not path:
        return set(), None
    import yaml

    from faithgrpo.eval.selection.families import holdout_prompts

    return holdout_prompts(path), (yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}).get(
        "system_prompt"
    )


def open_store(config: SelectConfig, weights: dict[str, Any] | None):
    """The family's pool store; offline runs take the policy's weights from its header."""
    from faithgrpo.eval.selection.pools import POOL_FORMAT, PoolStore, PoolStoreError

    path = Path(config.pools) / f"{config.policy}-{config.family}.jsonl.gz"
    if weights is None:
        if not path.exists():
            raise SelectError(
                f"--offline: no pool store {path.name} in --pools {config.pools!r}; sample it first"
            )
        import gzip

        with gzip.open(path, "rt", encoding="utf-8") as handle:
            header = json.loads(handle.readline())
        weights = header.get("policy", {}).get("weights")
        if header.get("format") != POOL_FORMAT or weights is None:
            raise SelectError(f"pool store {path.name} has no readable header; move it away")
    header = {
        "family": config.family,
        "policy": {"label": config.policy, "weights": weights},
        "sampling": asdict(config.pool_settings()),
        # names only, never a machine path
        "source": {"model": Path(config.model).name, "adapter": config.adapter and Path(config.adapter).name},
    }
    try:
        return PoolStore(path, header), weights
    except PoolStoreError as err:
        raise SelectError(str(err)) from None


def _judge(config: SelectConfig, questions, pools, log) -> dict[str, list[float]]:
    """The judge's scores of the pooled candidates: sampled where missing, read offline."""
    from faithgrpo.eval.selection.judge import JudgeStore, fill_judge_scores, judge_digest
    from faithgrpo.eval.selection.pools import PoolStoreError, read_jsonl_gz

    label = Path(config.judge).name
    path = Path(config.pools) / f"{config.policy}-{config.family}.judge-{label}.jsonl.gz"
    if config.offline:
        if not path.exists():
            raise SelectError(f"--offline --judge: no judge store {path.name} in --pools; score it first")
        header = read_jsonl_gz(path)[0]
        header.pop("format", None)
    else:
        from faithgrpo.eval.generation.cache import weights_fingerprint
        from faithgrpo.eval.selection.pools import weights_content

        weights = judge_digest(weights_content(weights_fingerprint(config.judge)))
        header = {
            "family": config.family,
            "policy": config.policy,
            "judge": {"source": label, "weights": weights},
        }
    try:
        store = JudgeStore(path, header)
    except PoolStoreError as err:
        raise SelectError(str(err)) from None
    if config.offline:
        return store.scores
    from faithgrpo.eval.generation.checkpoints import load_checkpoint

    budget = None if config.budget_minutes is None else 60 * config.budget_minutes
    items = [(q.prompt, p) for q, p in zip(questions, pools)]
    return fill_judge_scores(
        store, items, lambda: load_checkpoint(config.judge), budget_seconds=budget, log=log
    )


def run_select(config: SelectConfig, *, log=None) -> dict[str, Any]:
    """Run the experiment on one family (module docstring); returns the report dict it wrote."""
    from faithgrpo.eval.generation.cache import weights_fingerprint
    from faithgrpo.eval.selection.families import build_questions, user_text
    from faithgrpo.eval.selection.pools import fill_pools, pool_key, weights_content
    from faithgrpo.eval.selection.report import build_report, write_report

    config.validate()
    holdout, system_prompt = sft_inputs(config.sft_config)
    try:
        questions, skipped = build_questions(
            config.family, config.questions, config.question_seed, clear=config.clear, holdout=holdout,
            system_prompt=system_prompt,
        )  # fmt: skip
    except (OSError, ValueError) as err:
        raise SelectError(f"--family {config.family}: {err}") from None
    if not questions:
        raise SelectError(f"no question of family {config.family!r} is left to select on")
    weights = None if config.offline else weights_content(weights_fingerprint(config.model, config.adapter))
    store, weights = open_store(config, weights)
    settings = config.pool_settings()
    items = [(q.id, q.prompt, user_text(q.prompt)) for q in questions]
    if config.offline:
        pools = [store.get(pool_key(weights, q.prompt, settings)) for q in questions]
    else:
        from faithgrpo.eval.generation.checkpoints import load_checkpoint

        pools = fill_pools(
            store,
            items,
            weights,
            settings,
            lambda: load_checkpoint(config.model, config.adapter),
            threads=config.threads,
            engine=config.engine,
            group=config.batch_questions,
            slots=config.slots,
            budget_seconds=None if config.budget_minutes is None else 60 * config.budget_minutes,
            log=log,
        )
    judged = None if config.judge is None else _judge(config, questions, pools, log)
    report, timing = build_report(config, questions, pools, skipped, store.header, judged)
    write_report(report, timing, Path(config.out))
    return report
