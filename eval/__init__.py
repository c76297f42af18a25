"""Evaluators: is a checkpoint's chain of thought faithful?

=========================  =====================================================  ===================================
question                   entry point                                            module
=========================  =====================================================  ===================================
right answers, right CoTs? :func:`pass_at_k`, :func:`cot_pass_at_k`               ``eval/metrics/passk.py``
does the CoT admit hints?  :func:`build_hint_pairs` (the prompts)                 ``eval/metrics/hints.py``
                           :func:`hint_faithfulness`                              ``eval/metrics/hint_scores.py``
                           :func:`paired_hint_differences` (two checkpoints)      ``eval/metrics/hint_paired.py``
does the answer ride on    :func:`truncation_analysis` (early answering AOC, CIR) ``eval/metrics/faithfulness.py``
the CoT?                   :func:`summarize_deltas` (CRoS Δ)                      ``eval/metrics/deltas.py``
answer log-probabilities   :func:`answer_logprobs` (best-of-K confidence)         ``eval/metrics/logprobs.py``
optional LLM judge         :class:`LLMJudge`, :func:`parse_verdict`               ``eval/metrics/judge.py``
sampling + cache           :func:`generate_completions`                           ``eval/generation/backends.py``
                           :func:`read_completions`                               ``eval/generation/cache.py``
                           :func:`load_checkpoint`                                ``eval/generation/checkpoints.py``
the whole report           :func:`run_eval`, :func:`write_report`                 ``eval/report/pipeline.py``
                           (``faithgrpo eval``)
its settings and CLI       :class:`EvalConfig` (options generated from its fields) ``eval/report/config.py``,
                                                                                  ``eval/report/options.py``
task rows and graders      :func:`task_rows`, :func:`answer_checker`, ...         ``eval/report/adapters.py``
metric sections            :func:`count_task` (the CoT-Pass@K counts)             ``eval/report/sections.py``
checkpoints side by side   :func:`paired_comparisons`                             ``eval/report/comparisons.py``
hint and judge protocols   :func:`hints_section`, :func:`judge_passk_section`     ``eval/report/protocols.py``
Markdown and figures       :func:`render_markdown`, ``plot_*``                    ``eval/report/render.py``,
                                                                                  ``eval/report/plots.py``
best-of-K selection        :func:`run_selection` (frozen, graded pools)           ``eval/selection/selectors.py``
the whole experiment       ``faithgrpo select`` (task families, frozen pool       ``eval/selection/command.py``
                           stores, features, report)
=========================  =====================================================  ===================================

Four sub-packages, each importing only the ones listed before it: ``generation`` (backends, the
decode engine, completion caches, checkpoint loading), ``metrics`` (Pass@K, faithfulness, hints,
the LLM judge), ``report`` (the ``faithgrpo eval`` run: config and CLI options, pipeline, sections,
rendering, plots) and ``selection`` (best-of-K selection on frozen pools: ``faithgrpo select``).
``cli`` and ``ablation`` sit above them.

Names are imported on first use (no torch import for the pure metrics).
"""

from importlib import import_module

_EXPORTS = {
    "pass_at_k": "metrics.passk",
    "cot_pass_at_k": "metrics.passk",
    "pass_at_k_table": "metrics.passk",
    "hint_faithfulness": "metrics.hint_scores",
    "paired_hint_differences": "metrics.hint_paired",
    "truncation_analysis": "metrics.faithfulness",
    "summarize_deltas": "metrics.deltas",
    "answer_logprobs": "metrics.logprobs",
    "generate_completions": "generation.backends",
    "read_completions": "generation.cache",
    "load_checkpoint": "generation.checkpoints",
    "LLMJudge": "metrics.judge",
    "parse_verdict": "metrics.judge",
    "EvalConfig": "report.config",
    "run_selection": "selection.selectors",
    "run_eval": "report.pipeline",
    "write_report": "report.pipeline",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'faithgrpo.eval' has no attribute {name!r}")
    return getattr(import_module(f"faithgrpo.eval.{module}"), name)
