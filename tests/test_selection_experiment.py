"""The best-of-K selection experiment (``faithgrpo select``): questions, frozen pools, features, regime, the run.

Independent expectations: networkx d-separation by brute force for the valid-answer counts, gold
traces and hand-edited ones for the verifier and its structure-only control, byte equality for
the offline re-score, and a tiny in-process model for the whole run.
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import networkx as nx
import pytest

from faithgrpo.eval.selection.command import SelectConfig, SelectError, run_select
from faithgrpo.eval.selection.families import FAMILIES, build_questions, grader, user_text
from faithgrpo.eval.selection.grading import features, public_verifier
from faithgrpo.eval.selection.pools import FrozenPool, PoolSettings, PoolStore, pool_key, question_seed
from faithgrpo.eval.selection.report import valid_answer_count
from faithgrpo.tasks.certificates.gold import gold_trace

ANSWER_WORDS = ("answer", "solution", "gold", "label", "target")


def _keys(tree):
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield str(key)
            yield from _keys(value)
    elif isinstance(tree, list):
        for value in tree:
            yield from _keys(value)


@pytest.mark.parametrize("family", ["causal_graph", "causal_story", "causal_bn", "knights_knaves"])
def test_questions_are_held_out_stratified_and_public(family):
    questions, _ = build_questions(family, 8, seed=39)
    assert len(questions) == 8 and len({q.id for q in questions}) == 8
    again, _ = build_questions(family, 8, seed=39)
    assert [q.prompt for q in again] == [q.prompt for q in questions]
    for q in questions:
        assert not [k for k in _keys(q.problem) if any(w in k.lower() for w in ANSWER_WORDS)], q.problem
    if FAMILIES[family].causal:
        # round-robin over strata: 8 questions cover min(8, strata) kinds
        assert len({q.stratum for q in questions}) >= 5
    banned = {user_text(questions[0].prompt)}
    kept, skipped = build_questions(family, 8, seed=39, holdout=banned)
    assert user_text(questions[0].prompt) not in {user_text(q.prompt) for q in kept}
    assert skipped["prompt is also an SFT prompt"] == 1


def test_a_story_problem_hides_its_edges_from_the_verifier():
    q = build_questions("causal_story", 1, seed=39)[0][0]
    verifier = public_verifier(True, q.problem)
    assert q.gold["problem"]["graph"].get("directed")  # the hidden source graph has edges
    assert not verifier.graph.directed and not verifier.graph.bidirected
    assert sorted(verifier.graph.nodes) == sorted(q.gold["problem"]["graph"]["nodes"])


def _reversed(problem):
    graph = dict(problem["graph"])
    graph["directed"] = [[b, a] for a, b in graph.get("directed", [])]
    return {**problem, "graph": graph, "mode": "supplied"}


def _question_of_kind(family, kind, n=48):
    return next(q for q in build_questions(family, n, seed=39)[0] if q.stratum == kind)


def test_story_traces_are_verified_on_their_own_graph_and_graded_on_the_hidden_one():
    # The paper's reference-free setting: a trace built on the wrong (reversed) graph is internally
    # valid, so CALVER scores it 6, while the gold grade on the hidden graph says the answer is wrong.
    q = _question_of_kind("causal_story", "directed_path")
    hidden = q.gold["problem"]
    wrong = gold_trace(_reversed(hidden), 0, plain=True)
    right = gold_trace({**hidden, "mode": "supplied"}, 0, plain=True)
    grade = grader(q)
    verifier = public_verifier(True, q.problem)
    assert features(right, verifier, True, None).calver == 6 and grade(right) == (True, True)
    assert features(wrong, verifier, True, None).calver == 6 and grade(wrong) == (False, False)
    # on a supplied graph the same wrong-graph trace is bound to the edge list and loses the graph,
    # derivation, result and answer checks
    supplied = _question_of_kind("causal_graph", "directed_path")
    wrong_supplied = gold_trace(_reversed(supplied.gold["problem"]), 0, plain=True)
    assert features(wrong_supplied, public_verifier(True, supplied.problem), True, None).calver <= 2


def test_the_structure_control_passes_a_flipped_verdict_that_calver_rejects():
    # Cheapest text for the structure-only score: a correct trace with its verdict flipped. Its
    # claims still parse and RESULT equals <answer>, so structure stays 6; CALVER fails the
    # derivation, result and answer checks.
    q = _question_of_kind("causal_graph", "directed_path")
    trace = gold_trace(q.gold["problem"], 0, plain=True)
    verdict = "yes" if "RESULT: yes" in trace else "no"
    other = "no" if verdict == "yes" else "yes"
    flipped = trace.replace(f"RESULT: {verdict}", f"RESULT: {other}").replace(
        f"<answer>{verdict}</answer>", f"<answer>{other}</answer>"
    )
    assert flipped != trace
    verifier = public_verifier(True, q.problem)
    good, bad = features(trace, verifier, True, -0.1), features(flipped, verifier, True, -0.1)
    assert (good.calver, good.structure) == (6, 6)
    assert (bad.calver, bad.structure) == (3, 6)
    assert grader(q)(flipped) == (False, False)
    assert features("no trace at all", verifier, True, None).structure == 0


def test_knights_and_knaves_features_come_from_the_truth_table_without_the_solution():
    from faithgrpo.tasks.knights_knaves.gold import gold_kk_trace

    q = build_questions("knights_knaves", 1, seed=39)[0][0]
    assert "solution" not in q.problem
    trace = gold_kk_trace(q.gold["problem"], 0)
    feats = features(trace, public_verifier(False, q.problem), False, None)
    assert feats.calver == 6 and feats.structure == 5 and feats.answer is not None
    assert grader(q)(trace) == (True, True)


def _brute_force_count(problem):
    g = nx.DiGraph()
    g.add_nodes_from(problem["graph"]["nodes"])
    g.add_edges_from(map(tuple, problem["graph"].get("directed", [])))
    q = problem["query"]
    if q["kind"] == "mediator":  # a node on a directed path from treatment to outcome
        x, y = q["treatment"], q["outcome"]
        return sum(n not in (x, y) and n in nx.descendants(g, x) and y in nx.descendants(g, n) for n in g)
    if q["kind"] in ("ci_test", "directed_path"):
        return 1
    if q["kind"] == "dsep_set":
        x, y = q["x"], q["y"]
        free = [n for n in g if n not in (x, y)]
        return sum(
            nx.is_d_separator(g, {x}, {y}, set(z))
            for r in range(len(free) + 1)
            for z in itertools.combinations(free, r)
        )
    x, y = q["treatment"], q["outcome"]  # backdoor criterion: no descendant of X, blocks X <- ... paths
    cut = g.copy()
    cut.remove_edges_from(list(g.out_edges(x)))
    free = [n for n in g if n not in (x, y) and n not in nx.descendants(g, x)]
    return sum(
        nx.is_d_separator(cut, {x}, {y}, set(z))
        for r in range(len(free) + 1)
        for z in itertools.combinations(free, r)
    )


def test_valid_answer_counts_match_networkx_brute_force():
    questions, _ = build_questions("causal_graph", 96, seed=7)
    checked = 0
    for q in questions:
        if q.stratum in ("dsep_set/any", "backdoor_set/any", "mediator", "ci_test", "directed_path"):
            assert valid_answer_count(q.gold["problem"]) == _brute_force_count(q.gold["problem"]), q.id
            checked += 1
    assert checked >= 20


def test_pool_store_is_keyed_by_content_and_refuses_other_settings(tmp_path):
    header = {
        "family": "causal_graph",
        "policy": {"label": "sft", "weights": {"model": {"w": "0"}}},
        "sampling": {"G": 2},
    }
    store = PoolStore(tmp_path / "p.jsonl.gz", header)
    key = pool_key({"model": {"w": "0"}}, [{"role": "user", "content": "q"}], PoolSettings(samples=2))
    store.put(FrozenPool("q1", key, ["a", "b"], [1, 2], [None, -0.5]))
    assert [p.name for p in tmp_path.iterdir()] == ["p.jsonl.gz"]  # no temporary file left behind
    again = PoolStore(tmp_path / "p.jsonl.gz", header)
    assert again.get(key).completions == ["a", "b"]
    with pytest.raises(ValueError, match="sampling"):
        PoolStore(tmp_path / "p.jsonl.gz", {**header, "sampling": {"G": 4}})
    assert key != pool_key({"model": {"w": "1"}}, [{"role": "user", "content": "q"}], PoolSettings(samples=2))
    assert question_seed(0, "a") == question_seed(0, "a") != question_seed(0, "b") != question_seed(1, "b")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from faithgrpo.testing import save_tiny_causal_lm

    return str(save_tiny_causal_lm(tmp_path_factory.mktemp("tiny")))


def _config(tmp_path, model, **overrides):
    fields = dict(
        family="causal_graph", out=str(tmp_path / "out"), pools=str(tmp_path / "pools"), model=model,
        questions=3, samples=4, ks=(1, 2, 4), subsets=4, max_new_tokens=12, n_bootstrap=20,
    )  # fmt: skip
    return SelectConfig(**{**fields, **overrides})


def _clear_folder(tmp_path):
    folder = tmp_path / "clear"
    folder.mkdir()
    records = [
        {
            "description": "Given a DAG (directed acyclic graph) with nodes U, W, X, Y and directed edges "
            "U->X, U->Y, X->Y, W->Y.",
            "graph_type": "DAG",
            "uid": str(i),
            "sid": 0,
            "question_type": "FO",
            "task_type": "backdoor_adjustment_set",
            "answer": "{'U'}",
            "question": "Find one valid backdoor adjustment set for treatment X and outcome Y.",
        }
        for i in range(2)
    ]
    (folder / "backdoor_adjustment_set.json").write_text("\n".join(json.dumps(r) for r in records))
    return str(folder)


@pytest.mark.parametrize("family", ["causal_graph", "causal_story", "knights_knaves", "clear"])
def test_the_whole_experiment_runs_on_a_tiny_model_and_rescores_offline_byte_for_byte(
    tmp_path, tiny_model, family, monkeypatch
):
    extra = {"clear": _clear_folder(tmp_path)} if family == "clear" else {}
    config = _config(tmp_path, tiny_model, family=family, **extra)
    report = run_select(config)
    assert report["complete"] and report["questions_pooled"] == (2 if family == "clear" else 3)
    result = report["result"]
    assert result["ks"] == [1, 2, 4] and "oracle" in result["accuracy"]["4"]
    assert set(result["selectors"]) == {"calver", "structure", "plurality", "confidence", "random"}
    assert report["pool_stats"]["completions"] == 4 * report["questions_pooled"]
    out = tmp_path / "out"
    stem = f"sft-{family}"
    first = {s: (out / f"{stem}{s}").read_bytes() for s in (".json", ".md")}

    # nothing is resampled: loading a model now fails the test, and the offline re-score needs none
    import faithgrpo.eval.generation.checkpoints as checkpoints

    monkeypatch.setattr(
        checkpoints, "load_checkpoint", lambda *a, **k: pytest.fail("a cached pool was resampled")
    )
    run_select(config)
    offline = _config(tmp_path, "no-such-model", family=family, offline=True, **extra)
    run_select(offline)
    assert {s: (out / f"{stem}{s}").read_bytes() for s in (".json", ".md")} == first


def test_pools_do_not_depend_on_question_order(tmp_path, tiny_model):
    from faithgrpo.eval.generation.cache import weights_fingerprint
    from faithgrpo.eval.generation.checkpoints import load_checkpoint
    from faithgrpo.eval.selection.pools import fill_pools, weights_content

    questions, _ = build_questions("causal_graph", 2, seed=39)
    items = [(q.id, q.prompt, user_text(q.prompt)) for q in questions]
    weights = weights_content(weights_fingerprint(tiny_model))
    settings = PoolSettings(samples=3, max_new_tokens=8)
    header = {"family": "causal_graph", "policy": {"label": "t", "weights": weights}, "sampling": {}}
    loaded = load_checkpoint(tiny_model)
    a = fill_pools(
        PoolStore(tmp_path / "a.jsonl.gz", header), items, weights, settings, lambda: loaded, log=print
    )
    b = fill_pools(
        PoolStore(tmp_path / "b.jsonl.gz", header), items[::-1], weights, settings, lambda: loaded, log=print
    )
    assert [p.completions for p in a] == [p.completions for p in b[::-1]]


def test_bad_settings_stop_with_one_line_before_any_model_loads(tmp_path, tiny_model, monkeypatch):
    import faithgrpo.eval.generation.checkpoints as checkpoints

    run_select(_config(tmp_path, tiny_model, questions=1))  # a store sampled with max_new_tokens=12
    monkeypatch.setattr(checkpoints, "load_checkpoint", lambda *a, **k: pytest.fail("a model loaded"))
    cases = [
        ({"family": "causal_graf"}, "--family 'causal_graf' is unknown"),
        ({"family": "clear", "clear": str(tmp_path / "missing")}, "--clear"),
        ({"ks": (1, 8)}, "every --k must be between 1 and --samples=4"),
        ({"questions": 1, "max_new_tokens": 13}, "was made with sampling"),
        ({"adapter": str(tmp_path / "nope")}, "--model/--adapter"),
        ({"policy": "../x"}, "--policy"),
    ]
    for overrides, message in cases:
        with pytest.raises(SelectError, match=message) as err:
            run_select(_config(tmp_path, tiny_model, **overrides))
        assert "\n" not in str(err.value)


def test_another_question_seed_draws_other_questions():
    a = [q.prompt for q in build_questions("causal_graph", 4, seed=39)[0]]
    b = [q.prompt for q in build_questions("causal_graph", 4, seed=40)[0]]
    assert a != b


def test_the_results_page_joins_the_family_reports(tmp_path, tiny_model):
    from faithgrpo.eval.selection.page import main

    for family in ("causal_graph", "knights_knaves"):
        run_select(_config(tmp_path, tiny_model, family=family, questions=2))
    notes = tmp_path / "notes.md"
    notes.write_text("## What the numbers say\n\nHand-written.\n")
    page = tmp_path / "page.md"
    assert main([str(tmp_path / "out"), "--notes", str(notes), "--out", str(page)]) == 0
    text = page.read_text()
    assert text.index("### causal_graph") < text.index("### knights_knaves") and "Hand-written." in text
    rows = json.loads(page.with_suffix(".json").read_text())
    assert set(rows) == {"sft-causal_graph", "sft-knights_knaves"}
    assert set(rows["sft-causal_graph"]["1"]["valid"]) >= {"calver", "plurality", "structure", "oracle"}
    assert main([str(tmp_path / "empty")]) == 2


def test_docstring_examples_run():
    import doctest
    import importlib

    names = ("families", "pools", "grading", "selectors", "report", "command", "page", "judge")
    modules = [importlib.import_module(f"faithgrpo.eval.selection.{n}") for n in names]
    results = [doctest.testmod(m) for m in modules]
    assert sum(r.attempted for r in results) >= 5 and not any(r.failed for r in results)


def test_judge_scores_are_verdict_log_odds_batched_as_one_by_one(tiny_model):
    import torch

    from faithgrpo.eval.generation.checkpoints import load_checkpoint
    from faithgrpo.eval.metrics.judge import cot_judge_prompt
    from faithgrpo.eval.selection.judge import judge_scores, verdict_tokens

    model, tokenizer = load_checkpoint(tiny_model)
    prompt = [{"role": "user", "content": "Is there a directed path from X to Y?"}]
    completions = ["<think>X -> Y</think><answer>yes</answer>", "no", "<answer>" + "long " * 40 + "</answer>"]
    batched = judge_scores(model, tokenizer, prompt, completions, batch_size=3)
    pos, neg = verdict_tokens(tokenizer)
    for completion, score in zip(completions, batched):
        text = tokenizer.apply_chat_template(
            cot_judge_prompt(prompt, completion), add_generation_prompt=True, tokenize=False
        )
        ids = tokenizer(text + "VERDICT:", add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            last = torch.log_softmax(model(torch.tensor([ids])).logits[0, -1].double(), -1)
        assert score == pytest.approx(float(last[pos] - last[neg]), abs=1e-4)


def test_the_judge_selector_runs_when_every_candidate_is_judged_and_rescores_offline(tmp_path, tiny_model):
    config = _config(tmp_path, tiny_model, questions=2, judge=tiny_model)
    report = run_select(config)
    assert "judge" in report["result"]["selectors"] and report["questions_judged"] == 2
    first = (tmp_path / "out" / "sft-causal_graph.json").read_bytes()
    run_select(_config(tmp_path, "no-such-model", questions=2, judge=tiny_model, offline=True))
    assert (tmp_path / "out" / "sft-causal_graph.json").read_bytes() == first
    with pytest.raises(SelectError, match="no judge store"):
        run_select(_config(tmp_path, "no-such-model", questions=2, judge="other-judge", offline=True))


RESULTS = Path(__file__).resolve().parents[1] / "recipes" / "results" / "selection"


@pytest.mark.parametrize(
    "report",
    sorted(
        str(p.relative_to(RESULTS))
        for p in [*RESULTS.glob("*.json"), *RESULTS.glob("with_judge/*.json")]  # with_judge: --judge embedded
        if not p.name.endswith(".timing.json")
    ),
)
def test_the_committed_pools_rescore_to_the_committed_results_byte_for_byte(tmp_path, report):
    # The documented offline command (OFFLINE=1 bash recipes/selection_cpu.sh) on the committed pool
    # stores must reproduce every committed JSON exactly: no model, no resampling.
    committed = json.loads((RESULTS / report).read_text())
    settings = committed["settings"]
    family = committed["family"]
    extra = {}
    if family == "clear":
        folder = os.environ.get("CLEAR")
        if not folder or not Path(folder).is_dir():
            pytest.skip(
                "the CLEAR records are not in the repository: set CLEAR=<CLEAR's data/json_single folder>"
            )
        extra["clear"] = folder
    config = SelectConfig(
        family=family, policy=committed["policy"], out=str(tmp_path), pools=str(RESULTS / "pools"),
        model="unused-offline", offline=True, questions=settings["questions"],
        question_seed=settings["question_seed"], samples=settings["samples"], ks=tuple(settings["ks"]),
        subsets=settings["subsets"], temperature=settings["temperature"], top_p=settings["top_p"],
        max_new_tokens=settings["max_new_tokens"], seed=settings["seed"], threads=settings["threads"],
        n_bootstrap=settings["n_bootstrap"], confidence=settings["confidence"], judge=settings["judge"],
        sft_config=None if settings["sft_config"] is None else str(RESULTS.parents[1] / "configs" / settings["sft_config"]),
        **extra,
    )  # fmt: skip
    run_select(config)
    assert (tmp_path / Path(report).name).read_bytes() == (RESULTS / report).read_bytes()


def test_the_audit_table_lists_k_in_numeric_order():
    from faithgrpo.eval.selection.page import _audit

    row = {
        "draws": 1, "with_valid": 1, "invalid_unique_plurality": 0, "calver_valid_despite_plurality": 0,
        "repairs": 0, "new_errors": 0, "calver_valid_not_listed": 0, "calver_valid": 1,
    }  # fmt: skip
    report = {"result": {"audit": {k: row for k in ("1", "16", "2", "32", "4", "8")}}}
    ks = [line.split("|")[1].strip() for line in _audit(report)[2:]]
    assert ks == ["1", "2", "4", "8", "16", "32"]
