"""``faithgrpo clear-bestofk`` end to end with scripted pools: selection numbers, caching, user errors."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

import pytest

from faithgrpo.eval.generation.cache import CompletionRecord
from faithgrpo.eval.generation.settings import GenerationStats

DAG = "Given a DAG (directed acyclic graph) with nodes {nodes} and directed edges {edges}."
ADMG = (
    "Given an ADMG (acyclic directed mixed graph) with nodes {nodes}, directed edges {edges} "
    "and bi-directed edges {bi}."
)


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
    # a YN record and a blocked_path FO record are not find-one CALVER questions: skipped
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


def _wrong(problem):
    q = problem["query"]
    node = q.get("treatment") or q.get("x")
    return f"<think>guess</think><answer>{{{node}}}</answer>"  # the treatment itself: never valid


def _scripted(problem):
    """[wrong, wrong, gold trace, listed answer without a trace]: CALVER finds the gold, plurality the wrong."""
    from faithgrpo.rewards.text import extract_answer
    from faithgrpo.tasks.certificates.gold import gold_trace

    gold = gold_trace(problem, rng=0)
    return [_wrong(problem), _wrong(problem), gold, f"<answer>{extract_answer(gold)}</answer>"]


def _run(tmp_path, monkeypatch, tiny_llama, *extra, records=RECORDS, model=None):
    from faithgrpo.eval.cli import add_clear_bestofk_subcommand
    from faithgrpo.eval.generation import backends, checkpoints

    clear = tmp_path / "clear"
    clear.mkdir(exist_ok=True)
    with open(clear / "mixed.json", "w") as fh:
        for r in records:
            fh.write(json.dumps(r) + "\n")
    calls = {"generate": 0, "load": 0}

    problems = {}

    def fake_generate_impl(
        model, tokenizer, prompts, settings, *, ids, metadata, progress, backend="transformers"
    ):
        calls["generate"] += 1
        records_out = []
        for pid, prompt in zip(ids, prompts):
            completions = _scripted(problems[pid])[: settings.num_samples]
            records_out.append(
                CompletionRecord(
                    pid,
                    prompt,
                    completions,
                    [1] * len(completions),
                    {**asdict(settings), "backend": backend, **metadata},
                )
            )
        return records_out, GenerationStats(
            len(prompts), sum(len(r.completions) for r in records_out), 4, 0.5
        )

    def fake_load(model, adapter=None, **kw):
        calls["load"] += 1
        return tiny_llama

    from faithgrpo.tasks.clear.records import to_problem

    for r in records:
        p = to_problem(r)
        if p is not None:
            problems[f"{r['task_type'].replace('-', '_')}/{r['uid']}/{r['sid']}"] = p
    monkeypatch.setattr(backends, "generate_completions", fake_generate_impl)
    monkeypatch.setattr(checkpoints, "load_checkpoint", fake_load)
    parser = argparse.ArgumentParser()
    add_clear_bestofk_subcommand(parser.add_subparsers())
    checkpoint = tmp_path / "model"  # a local checkpoint directory; the loader above is faked
    checkpoint.mkdir(exist_ok=True)
    argv = ["clear-bestofk", "--model", str(model or checkpoint), "--clear", str(clear), "--samples", "4", "--k", "1,2,4",
            "--subsets", "12", "--n-bootstrap", "50", "--no-progress", "--out", str(tmp_path / "out"), *extra]  # fmt: skip
    args = parser.parse_args(argv)
    return args.func(args), calls


def test_clear_bestofk_numbers_from_scripted_pools(tmp_path, monkeypatch, tiny_llama):
    status, calls = _run(tmp_path, monkeypatch, tiny_llama)
    assert status == 0 and calls["generate"] == 1
    report = json.loads((tmp_path / "out" / "clear_bestofk.json").read_text())
    assert (tmp_path / "out" / "clear_bestofk.md").read_text().startswith("# CLEAR best-of-K")
    assert (tmp_path / "out" / "clear_bestofk.png").stat().st_size > 1000
    assert report["result"]["questions"] == 3
    assert report["skipped"] == {"not a find-one question": 1}
    acc = report["result"]["accuracy"]
    # K = G = 4: CALVER takes the gold trace (valid), plurality the twice-repeated wrong answer.
    assert acc["4"]["calver"]["valid"]["value"] == 1.0
    assert acc["4"]["plurality"]["valid"]["value"] == 0.0
    assert report["result"]["paired_calver_minus_plurality"]["4"]["valid"]["value"] == 1.0
    # exact match: the gold trace answers {U, W} on the backdoor graph, valid but not listed, so
    # exact grading drops CALVER to 2/3 there while the judge keeps 3/3.
    assert acc["4"]["calver"]["exact"]["value"] == pytest.approx(2 / 3)
    # K = 1: every selector picks the single candidate; 2 of 4 candidates are valid.
    for selector in ("calver", "plurality", "confidence", "random"):
        assert acc["1"][selector]["valid"]["value"] == pytest.approx(0.5, abs=0.25)
    audit = report["result"]["audit"]["4"]
    # {X} x2 ties the gold answer x2: plurality picks the earlier (invalid) one, but not as a unique plurality
    assert audit["draws"] == 3 and audit["invalid_unique_plurality"] == 0
    assert audit["calver_valid_despite_plurality"] == 0 and audit["repairs"] == 3 and audit["new_errors"] == 0
    assert audit["calver_valid"] == 3 and audit["calver_valid_not_listed"] == 1
    assert report["pool_stats"]["valid"] == 6 and report["pool_stats"]["calver_score_histogram"]["6"] == 3


def test_clear_bestofk_reuses_its_caches(tmp_path, monkeypatch, tiny_llama):
    assert _run(tmp_path, monkeypatch, tiny_llama)[0] == 0
    status, calls = _run(tmp_path, monkeypatch, tiny_llama)
    assert status == 0 and calls == {"generate": 0, "load": 0}  # completions and confidences cached
    status, calls = _run(tmp_path, monkeypatch, tiny_llama, "--overwrite")
    assert status == 0 and calls["generate"] == 1


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--k", "1,8"), "--samples"),
        (("--tasks", "cycle"), "--tasks"),
        (("--top-p", "0"), "--top-p"),
        (("--temperature", "-1"), "--temperature"),
        (("--limit", "0"), "--limit"),
        (("--backend", "tgi"), "--backend"),
        (("--engine", "beam"), "--engine"),
    ],
)
def test_clear_bestofk_user_errors_are_one_line_before_loading(
    tmp_path, monkeypatch, tiny_llama, capsys, extra, message
):
    status, calls = _run(tmp_path, monkeypatch, tiny_llama, *extra)
    err = capsys.readouterr().err.strip()
    assert status == 2 and calls == {"generate": 0, "load": 0}
    assert err.startswith("error:") and message in err and "\n" not in err


def test_clear_bestofk_refuses_an_out_file_and_a_missing_clear_path(
    tmp_path, monkeypatch, tiny_llama, capsys
):
    (tmp_path / "out").write_text("not a directory")
    status, calls = _run(tmp_path, monkeypatch, tiny_llama)
    assert status == 2 and calls["load"] == 0 and "--out" in capsys.readouterr().err


def test_clear_bestofk_unknown_model_offline_fails_fast(tmp_path, monkeypatch, tiny_llama, capsys):
    import socket

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    connects = []

    def no_network(sock, address):  # counts download attempts instead of timing their retries
        connects.append(address)
        raise OSError("no network in this test")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    status, calls = _run(tmp_path, monkeypatch, tiny_llama, model="mymodel")
    err = capsys.readouterr().err
    assert status == 2 and calls["load"] == 0 and connects == []  # no download attempt, so no retries
    assert "'embedded'" in err and "local checkpoint directory" in err and "network" in err
