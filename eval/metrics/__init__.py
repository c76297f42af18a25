"""Metrics of chains of thought: Pass@K, faithfulness, hints and the optional LLM judge.

===================  =====================================================================
module               job
===================  =====================================================================
``passk``            Pass@K, CoT-Pass@K, bootstrap intervals (`Estimate`)
``deltas``           the CRoS Δ summary
``logprobs``         batched answer and completion log-probabilities
``faithfulness``     early-answering AOC and CIR (`truncation_analysis`)
``multiple_choice``  multiple-choice questions for the hint protocol
``hints``            unhinted/hinted prompt pairs (`build_hint_pairs`)
``hint_detection``   answer-letter parsing and the hint-verbalisation detector
``hint_scores``      hint-faithfulness scores of one checkpoint (`hint_faithfulness`)
``hint_paired``      two checkpoints on the same pairs (`paired_hint_differences`)
``judge``            the optional LLM judge (`LLMJudge`, `parse_verdict`)
===================  =====================================================================

Names are imported from their modules; of ``faithgrpo.eval``'s sub-packages only ``generation`` is
used here (by the judge). Best-of-K selection lives in ``faithgrpo.eval.selection`` (``faithgrpo select``).
"""
