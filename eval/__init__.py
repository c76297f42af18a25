"""Evaluators: is a checkpoint's chain of thought faithful?

==========================  =====================================================  ======================
question                    entry point                                            module
==========================  =====================================================  ======================
right answers, right CoTs?  :func:`pass_at_k`, :func:`cot_pass_at_k`               ``eval/passk.py``
does the CoT admit hints?   :func:`build_hint_pairs` (the prompts)                   ``eval/hints.py``
                            :func:`hint_faithfulness`,                             ``eval/hint_scores.py``
                            :func:`paired_hint_differences` (two checkpoints)
does the answer ride on     :func:`truncation_analysis` (early answering AOC, CIR),  ``eval/faithfulness.py``
the CoT?                    :func:`summarize_deltas` (CRoS Δ)                      ``eval/deltas.py``
answer log-probabilities    :func:`answer_logprobs` (best-of-K confidence)          ``eval/logprobs.py``
sampling + cache            :func:`generate_completions`, :func:`read_completions`  ``eval/generation.py``
optional LLM judge          :class:`LLMJudge`, :func:`parse_verdict`                ``eval/judge.py``
best-of-K selection         :func:`run_selection` (frozen, graded pools)            ``eval/bestofk.py``
the same on CLEAR           :func:`run_clear_bestofk` (``faithgrpo clear-bestofk``) ``eval/clear_bestofk.py``
the whole report            :func:`run_eval`, :func:`write_report`                  ``eval/pipeline.py``
                            (``faithgrpo eval``; names re-exported by ``eval/report.py``)
its settings and CLI        :class:`EvalConfig` (options generated from its fields)  ``eval/config.py``,
                                                                                   ``eval/options.py``
task rows and graders       :func:`task_rows`, :func:`answer_checker`, ...          ``eval/adapters.py``
metric sections             :func:`count_task` (the CoT-Pass@K counts),             ``eval/sections.py``
                            :func:`best_of_k_section`, :func:`paired_comparisons`
hint and judge protocols    :func:`hints_section`, :func:`judge_passk_section`      ``eval/protocols.py``
Markdown and figures        :func:`render_markdown`, ``plot_*``                     ``eval/render.py``,
                                                                                   ``eval/plots.py``
==========================  =====================================================  ======================

Names are imported on first use (no torch import for the pure metrics).
"""

from importlib import import_module

_EXPORTS = {
    "pass_at_k": "passk",
    "cot_pass_at_k": "passk",
    "pass_at_k_table": "passk",
    "hint_faithfulness": "hint_scores",
    "paired_hint_differences": "hint_scores",
    "truncation_analysis": "faithfulness",
    "summarize_deltas": "deltas",
    "answer_logprobs": "logprobs",
    "generate_completions": "generation",
    "read_completions": "generation",
    "load_checkpoint": "generation",
    "LLMJudge": "judge",
    "parse_verdict": "judge",
    "EvalConfig": "config",
    "run_selection": "bestofk",
    "run_clear_bestofk": "clear_bestofk",
    "run_eval": "pipeline",
    "write_report": "pipeline",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'faithgrpo.eval' has no attribute {name!r}")
    return getattr(import_module(f"faithgrpo.eval.{module}"), name)
