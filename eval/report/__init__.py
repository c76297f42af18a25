"""The ``faithgrpo eval`` report: settings and CLI options, pipeline, sections, rendering and plots.

================  ==========================================================================
module            job
================  ==========================================================================
``config``        `EvalConfig` (each field once, the CLI generated from it), labels, ``--out``
``options``       dataclass fields -> argparse options, the custom option parsers
``adapters``      task rows, answer / CoT graders, multiple-choice questions
``sections``      metric sections: Pass@K, CALVER checks, AOC/CIR/CRoS Δ
``comparisons``   every checkpoint against the reference, paired over prompts
``protocols``     the hint protocol and the LLM judge
``pipeline``      orchestration: `run_eval`, `evaluate_checkpoint`, `write_report`
``results``       typed read access to a checkpoint's report section
``render``        the Markdown report
``plots``         the PNG figures
``outlock``       a run's lock on its output folder
================  ==========================================================================

Names are imported from their modules.
"""
