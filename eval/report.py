"""``faithgrpo.eval.report``: the public names of the ``faithgrpo eval`` report, in one place.

The report used to live in this module; it is now split along its jobs, and this module re-exports
the names callers import from here:

==============================  ====================================================================
module                          job
==============================  ====================================================================
``eval/config.py``              `EvalConfig` (each field once, the CLI generated from it), labels
``eval/options.py``             dataclass fields -> argparse options, the custom option parsers
``eval/adapters.py``            task rows, answer / CoT graders, multiple-choice questions
``eval/sections.py``            metric sections: Pass@K, CALVER checks, AOC/CIR/CRoS Δ, best-of-K
``eval/protocols.py``           the hint protocol and the LLM judge
``eval/pipeline.py``            orchestration: `run_eval`, `evaluate_checkpoint`, `write_report`
``eval/results.py``             typed read access to a checkpoint's report section
``eval/render.py``              the Markdown report
``eval/plots.py``               the PNG figures
==============================  ====================================================================
"""

from __future__ import annotations

from faithgrpo.eval.adapters import (
    CAUSAL_TASKS,
    COT_VERIFIERS,
    FEATURED_TASKS,
    answer_checker,
    check_task,
    cot_checker,
    hint_questions,
    task_rows,
)
from faithgrpo.eval.config import (
    BACKENDS,
    CROS_REFERENCES,
    LABEL_RE,
    REPORT_FILES,
    Checkpoint,
    EvalConfig,
    check_label,
    check_out_dir,
)
from faithgrpo.eval.pipeline import evaluate_checkpoint, run_eval, write_report
from faithgrpo.eval.protocols import hints_section, judge_hints_section, judge_passk_section, make_judge
from faithgrpo.eval.render import render_markdown
from faithgrpo.eval.sections import (
    CALVER_CHECKS,
    SELECTORS,
    best_of_k_section,
    calver_check_rates,
    faithfulness_section,
    paired_comparisons,
    passk_section,
)

__all__ = [
    "BACKENDS",
    "CALVER_CHECKS",
    "CAUSAL_TASKS",
    "COT_VERIFIERS",
    "CROS_REFERENCES",
    "FEATURED_TASKS",
    "LABEL_RE",
    "REPORT_FILES",
    "SELECTORS",
    "Checkpoint",
    "EvalConfig",
    "answer_checker",
    "best_of_k_section",
    "calver_check_rates",
    "check_label",
    "check_out_dir",
    "check_task",
    "cot_checker",
    "evaluate_checkpoint",
    "faithfulness_section",
    "hint_questions",
    "hints_section",
    "judge_hints_section",
    "judge_passk_section",
    "make_judge",
    "paired_comparisons",
    "passk_section",
    "render_markdown",
    "run_eval",
    "task_rows",
    "write_report",
]
