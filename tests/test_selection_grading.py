"""How best-of-K picks are graded (any valid set vs a listed one), with hand-written completions.

A causal hand case (features and grades of four completions, the selectors' accuracy), then CLEAR
(``faithgrpo select --family clear``) with scripted pools: which records become questions, how picks
are graded, the selection numbers end to end, user errors. No model is loaded: the CLEAR pools are
written straight into the frozen pool store and the run is offline.
"""

from __future__ import annotations

import argparse
import json

import pytest

DAG = "Given a DAG (directed acyclic graph) with nodes {nodes} and directed edges {edges}."


def _record(uid, task, question, answer, description, graph_type="DAG"):
    return {
        "description": description,
        "graph_type": graph_type,
        "uid": uid,
        "sid": 0,
        "question": question,
        "answer": answer,
        "question_type": "FO",
        "task_type": task,
    }


RECORDS = [
    # U confounds X and Y: {U} and {U, W} are valid backdoor sets; only {U} is listed (on purpose).
    _record(
        "1",
        "backdoor_adjustment_set",
        "Find one valid backdoor adjustment set for treatment X and outcome Y.",
        "[{'U'}]",
        DAG.format(nodes="U, X, Y, W", edges="U->X, U->Y, X->Y, W->Y"),
    ),
    # X -> M -> Y with X <- U -> Y: {M} is the front-door set.
    _record(
        "2",
        "frontdoor_adjustment_set",
        "Find one valid frontdoor adjustment set for treatment X and outcome Y.",
        "[{'M'}]",
        DAG.format(nodes="U, X, M, Y", edges="U->X, U->Y, X->M, M->Y"),
    ),
    # A -> B -> C, A -> D -> C: {B, D} separates A and C (listed); so does nothing smaller.
    _record(
        "3",
        "d-separation",
        "Find the minimal nodeset that can d-separate node A and node C .",
        "{'B', 'D'}",
        DAG.format(nodes="A, B, C, D", edges="A->B, B->C, A->D, D->C"),
    ),
    # a YN record is not a find-one CALVER question: skipped
    {
        **_record(
            "4",
            "d-separation",
            "Are node A and node C d-separated by nodeset {'B'}?",
            "No.",
            DAG.format(nodes="A, B, C, D", edges="A->B, B->C, A->D, D->C"),
        ),
        "question_type": "YN",
    },
]
SEED = 39  # SelectConfig's default --question-seed

BACKDOOR = {
    "graph": {
        "type": "DAG",
        "nodes": ["U", "W", "X", "M", "Y", "Z"],
        "directed": [["U", "X"], ["U", "Y"], ["X", "M"], ["M", "Y"], ["W", "Y"], ["Z", "X"]],
    },
    "query": {"kind": "backdoor_set", "treatment": "X", "outcome": "Y"},
}


def _hand_pool(completions, confidences):
    """One causal_graph question on BACKDOOR (listed answer {U}) and its graded pool."""
    from faithgrpo.eval.selection.families import FAMILIES, Question, grader, public_problem
    from faithgrpo.eval.selection.grading import features, public_verifier
    from faithgrpo.eval.selection.selectors import Candidate, Pool

    row = {"task": "causal_graph", "problem": json.dumps(BACKDOOR), "answer": "{U}"}
    public = public_problem(FAMILIES["causal_graph"], BACKDOOR)
    question = Question("p0", "causal_graph", "backdoor_set", [], public, {"row": row, "problem": BACKDOOR})
    verifier, grade = public_verifier(True, question.problem), grader(question)
    return Pool(
        "p0",
        "backdoor_set",
        tuple(Candidate(features(t, verifier, True, c), *grade(t)) for t, c in zip(completions, confidences)),
    )


def test_best_of_k_selectors_hand_case():
    from faithgrpo.eval.selection.selectors import run_selection
    from faithgrpo.tasks.certificates.gold import gold_trace
    from faithgrpo.text import extract_answer

    gold = gold_trace(BACKDOOR, plain=True)
    assert extract_answer(gold) == "{U}"
    completions = [
        "<answer>{M}</answer>",  # invalid: M is a descendant of X; the most frequent answer
        "<think>M</think><answer>{M}</answer>",
        gold,  # all six CALVER checks, valid, equals the listed answer
        "<answer>{U, W}</answer>",  # valid but not the listed answer; the most confident
    ]
    confidences = [-3.0, -2.0, -1.5, -0.5]
    pool = _hand_pool(completions, confidences)
    grades = [(c.valid, c.exact) for c in pool.candidates]
    assert grades == [(False, False), (False, False), (True, True), (True, False)]
    assert pool.candidates[2].features.calver == 6
    result = run_selection([pool], [1, 4], subsets=8, n_bootstrap=0)
    full = result.accuracy[4]
    assert (full["calver"]["valid"].value, full["calver"]["exact"].value) == (1.0, 1.0)
    assert (full["plurality"]["valid"].value, full["plurality"]["exact"].value) == (0.0, 0.0)
    assert (full["confidence"]["valid"].value, full["confidence"]["exact"].value) == (1.0, 0.0)
    # Exact match needs an <answer> tag, like validity: prose that merely mentions {U} is neither.
    untagged = _hand_pool([*completions[:3], "I think the answer is {U}"], confidences)
    assert untagged.candidates[3].features.answer is None
    assert (untagged.candidates[3].valid, untagged.candidates[3].exact) == (False, False)
    again = run_selection([untagged], [4], subsets=8, n_bootstrap=0).accuracy[4]["confidence"]
    assert again["valid"].value == again["exact"].value == 0.0
    # K = 1: every deterministic selector keeps the only candidate, so all agree on every subset.
    single = result.accuracy[1]
    assert single["calver"] == single["structure"] == single["plurality"] == single["confidence"]
    assert result.questions == 1 and result.subsets == 8


def _clear_folder(tmp_path, records=RECORDS):
    clear = tmp_path / "clear"
    clear.mkdir(exist_ok=True)
    (clear / "mixed.json").write_text("".join(json.dumps(r) + "\n" for r in records))
    return clear


def _questions(tmp_path):
    from faithgrpo.eval.selection.families import build_questions

    return build_questions("clear", None, SEED, clear=str(_clear_folder(tmp_path)))


def _by_task(questions):
    return {q.stratum.split("/")[0]: q for q in questions}


def test_clear_questions_are_the_find_one_records_with_a_public_problem(tmp_path):
    questions, skipped = _questions(tmp_path)
    assert skipped == {"not a find-one question": 1}
    assert sorted(q.id for q in questions) == [
        "clear-backdoor_adjustment_set/1/0",
        "clear-d_separation/3/0",
        "clear-frontdoor_adjustment_set/2/0",
    ]
    for q in questions:
        assert q.family == "clear" and q.gold["listed"]
        assert "answer" not in q.problem and "answer" not in q.problem["query"]  # selectors never see it
    assert _by_task(questions)["backdoor_adjustment_set"].gold["listed"] == ["{U}"]


def test_clear_grades_any_valid_set_as_valid_but_only_a_listed_one_as_exact(tmp_path):
    from faithgrpo.eval.selection.families import grader

    questions = _by_task(_questions(tmp_path)[0])
    backdoor = grader(questions["backdoor_adjustment_set"])
    assert backdoor("<think>x</think><answer>{U}</answer>") == (True, True)
    assert backdoor("<answer>{W, U}</answer>") == (True, False)  # valid (the CLEAR judge), not listed
    assert backdoor("<answer>{X}</answer>") == (False, False)
    assert backdoor("{U}") == (False, False)  # no <answer> tag: no answer
    assert backdoor("<answer>{X}</answer> then <answer>{U}</answer>") == (True, True)  # the last tag counts
    assert grader(questions["frontdoor_adjustment_set"])("<answer>{M}</answer>") == (True, True)
    dsep = grader(questions["d_separation"])
    assert dsep("<answer>{B, D}</answer>") == (True, True)
    assert dsep("<answer>{B}</answer>") == (False, False)


def _wrong(problem):
    q = problem["query"]
    node = q.get("treatment") or q.get("x")
    return f"<think>guess</think><answer>{{{node}}}</answer>"  # the treatment itself: never valid


def _scripted(problem):
    """[wrong, wrong, gold trace, listed answer without a trace]: CALVER finds the gold, plurality the wrong."""
    from faithgrpo.tasks.certificates.gold import gold_trace
    from faithgrpo.text import extract_answer

    gold = gold_trace(problem, rng=0)
    return [_wrong(problem), _wrong(problem), gold, f"<answer>{extract_answer(gold)}</answer>"]


def _select(tmp_path, *extra, pools=True):
    """``faithgrpo select --family clear --offline`` on a pool store holding the scripted pools."""
    from faithgrpo.eval.cli import add_select_subcommand
    from faithgrpo.eval.selection.command import SelectConfig, open_store
    from faithgrpo.eval.selection.families import build_questions
    from faithgrpo.eval.selection.pools import FrozenPool, pool_key

    clear = _clear_folder(tmp_path)
    argv = ["select", "--family", "clear", "--clear", str(clear), "--pools", str(tmp_path / "pools"),
            "--out", str(tmp_path / "out"), "--samples", "4", "--k", "1,2,4", "--subsets", "12",
            "--n-bootstrap", "50", *extra]  # fmt: skip
    parser = argparse.ArgumentParser()
    add_select_subcommand(parser.add_subparsers())
    args = parser.parse_args(argv)
    if pools:
        config = SelectConfig(
            family="clear", clear=str(clear), pools=str(tmp_path / "pools"), samples=4, ks=(1, 2, 4)
        )
        store, weights = open_store(config, {"model": {"weights.safetensors": "00" * 32}})
        for q in build_questions("clear", config.questions, config.question_seed, clear=str(clear))[0]:
            completions = _scripted(q.gold["problem"])
            key = pool_key(weights, q.prompt, config.pool_settings())
            store.put(FrozenPool(q.id, key, completions, [1] * 4, [-1.0, -1.0, -2.0, -0.5]))
    return args.func(args)


def test_calver_beats_plurality_on_scripted_clear_pools(tmp_path, capsys):
    assert _select(tmp_path, "--offline") == 0
    assert "clear: 3 of 3 questions pooled" in capsys.readouterr().out
    report = json.loads((tmp_path / "out" / "sft-clear.json").read_text())
    assert (tmp_path / "out" / "sft-clear.md").read_text().startswith("### clear")
    assert report["complete"] and report["skipped"] == {"not a find-one question": 1}
    result = report["result"]
    assert result["questions"] == 3
    acc = result["accuracy"]
    # K = G = 4: CALVER takes the gold trace (valid), plurality the twice-repeated wrong answer.
    assert acc["4"]["calver"]["valid"]["value"] == 1.0
    assert acc["4"]["plurality"]["valid"]["value"] == 0.0
    assert acc["4"]["oracle"]["valid"]["value"] == 1.0
    assert result["paired_calver_minus"]["4"]["plurality"]["valid"]["value"] == 1.0
    # exact match: the gold trace answers {U, W} on the backdoor graph, valid but not listed, so
    # exact grading drops CALVER to 2/3 there while the CLEAR judge keeps 3/3.
    assert acc["4"]["calver"]["exact"]["value"] == pytest.approx(2 / 3)
    # K = 1: every selector picks the single candidate; 2 of 4 candidates are valid.
    for selector in ("calver", "plurality", "confidence", "random"):
        assert acc["1"][selector]["valid"]["value"] == pytest.approx(0.5, abs=0.25)
    audit = result["audit"]["4"]
    # {X} x2 ties the gold answer x2: plurality picks the earlier (invalid) one, but not as a unique plurality
    assert audit["draws"] == 3 and audit["invalid_unique_plurality"] == 0
    assert audit["calver_valid_despite_plurality"] == 0 and audit["repairs"] == 3 and audit["new_errors"] == 0
    assert audit["calver_valid"] == 3 and audit["calver_valid_not_listed"] == 1
    assert report["pool_stats"]["valid"] == 6 and report["pool_stats"]["calver_histogram"]["6"] == 3


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--k", "1,8"), "--samples"),
        (("--top-p", "0"), "--top-p"),
        (("--temperature", "-1"), "--temperature"),
        (("--questions", "0"), "--questions"),
        (("--engine", "beam"), "--engine"),
    ],
)
def test_clear_user_errors_are_one_line(tmp_path, capsys, extra, message):
    assert _select(tmp_path, "--offline", *extra, pools=False) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and message in err and "\n" not in err


def test_clear_needs_a_clear_folder_and_an_offline_run_a_pool_store(tmp_path, capsys):
    import shutil

    from faithgrpo.eval.cli import add_select_subcommand

    assert _select(tmp_path, "--offline", pools=False) == 2  # no pool store sampled yet
    assert "--offline" in capsys.readouterr().err
    shutil.rmtree(tmp_path / "clear")
    parser = argparse.ArgumentParser()
    add_select_subcommand(parser.add_subparsers())
    args = parser.parse_args(["select", "--family", "clear", "--clear", str(tmp_path / "clear"), "--offline"])
    assert args.func(args) == 2
    assert "--clear" in capsys.readouterr().err


def test_clear_unknown_model_offline_fails_fast(tmp_path, monkeypatch, capsys):
    import socket

    import faithgrpo.eval.generation.checkpoints as checkpoints

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    monkeypatch.setattr(checkpoints, "load_checkpoint", lambda *a, **k: pytest.fail("a model loaded"))
    connects = []

    def no_network(sock, address):  # counts download attempts instead of timing their retries
        connects.append(address)
        raise OSError("no network in this test")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    assert _select(tmp_path, "--model", "mymodel", pools=False) == 2
    err = capsys.readouterr().err
    assert connects == []  # no download attempt, so no retries
    assert "'embedded'" in err and "local checkpoint directory" in err and "network" in err
