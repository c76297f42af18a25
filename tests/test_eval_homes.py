"""Every public name of ``faithgrpo.eval`` lives in one documented module (issue #31: no re-export shims)."""

import importlib

import pytest

import faithgrpo.eval

# Independent of eval/__init__.py's own table: the homes the docs (docs/api/eval.md) name.
HOMES = {
    "pass_at_k": "faithgrpo.eval.metrics.passk",
    "cot_pass_at_k": "faithgrpo.eval.metrics.passk",
    "pass_at_k_table": "faithgrpo.eval.metrics.passk",
    "hint_faithfulness": "faithgrpo.eval.metrics.hint_scores",
    "paired_hint_differences": "faithgrpo.eval.metrics.hint_paired",
    "truncation_analysis": "faithgrpo.eval.metrics.faithfulness",
    "summarize_deltas": "faithgrpo.eval.metrics.deltas",
    "answer_logprobs": "faithgrpo.eval.metrics.logprobs",
    "generate_completions": "faithgrpo.eval.generation.backends",
    "read_completions": "faithgrpo.eval.generation.cache",
    "load_checkpoint": "faithgrpo.eval.generation.checkpoints",
    "LLMJudge": "faithgrpo.eval.metrics.judge",
    "parse_verdict": "faithgrpo.eval.metrics.judge",
    "EvalConfig": "faithgrpo.eval.report.config",
    "run_selection": "faithgrpo.eval.selection.selectors",
    "run_eval": "faithgrpo.eval.report.pipeline",
    "write_report": "faithgrpo.eval.report.pipeline",
}


def test_the_package_exports_exactly_the_documented_names():
    assert sorted(faithgrpo.eval.__all__) == sorted(HOMES)


@pytest.mark.parametrize("name", sorted(HOMES))
def test_each_public_name_lives_in_its_documented_home(name):
    obj = getattr(faithgrpo.eval, name)
    assert obj.__module__ == HOMES[name]
    assert getattr(importlib.import_module(HOMES[name]), name) is obj


@pytest.mark.parametrize(
    "old",
    [
        "faithgrpo.eval.passk",
        "faithgrpo.eval.sections",
        "faithgrpo.eval.hint_scores",
        "faithgrpo.eval.cache",
        "faithgrpo.eval.decoding",
        "faithgrpo.eval.pipeline",
        "faithgrpo.eval.clear_bestofk",
        "faithgrpo.eval.bestofk_render",
        "faithgrpo.eval.metrics.bestofk",
    ],
)
def test_old_flat_modules_are_gone(old):
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)


def test_the_sub_packages_hold_no_names():
    # generation/, metrics/ and report/ are folders of modules: a name is imported from its module.
    for package in ("generation", "metrics", "report", "selection"):
        module = importlib.import_module(f"faithgrpo.eval.{package}")
        assert not [
            n
            for n in vars(module)
            if not n.startswith("_")
            and not hasattr(getattr(module, n), "__path__")
            and not isinstance(getattr(module, n), type(module))
        ]
