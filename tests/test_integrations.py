"""verl's compute_score and OpenRLHF's reward_func give the numbers TRL gives with the same rewards.

The expectation is TRL's own combination rule, written here independently: each reward function
scores the batch, ``None`` becomes NaN, and the score is ``nansum(weight · reward)`` per completion
(``GRPOTrainer._calculate_rewards`` then the weighted ``nansum``). Neither framework installs on
this CPU machine (verl needs Ray and vLLM, OpenRLHF DeepSpeed and Ray), so the entry points are
called exactly as each framework's reward manager calls them.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from faithgrpo.eval.report.adapters import task_rows
from faithgrpo.integrations.openrlhf import reward_func
from faithgrpo.integrations.scoring import DEFAULT_WEIGHTS, SYMBOLIC_REWARDS
from faithgrpo.integrations.verl import compute_score
from faithgrpo.rewards.registry import get_reward_funcs
from faithgrpo.tasks.certificates.gold import gold_trace
from faithgrpo.tasks.knights_knaves.gold import gold_kk_trace


def _trl_scores(completions, rows, weights=DEFAULT_WEIGHTS):
    funcs = get_reward_funcs(list(SYMBOLIC_REWARDS))
    columns = {k: [r.get(k) for r in rows] for k in ("problem", "entry", "answer")}
    table = torch.tensor(
        [[math.nan if v is None else v for v in f(prompts=[None] * len(completions), completions=completions, **columns)]
         for f in funcs],
        dtype=torch.float64,
    ).T  # fmt: skip
    w = torch.tensor([weights[f.__name__] for f in funcs], dtype=torch.float64)
    return torch.nansum(table * w, dim=1).tolist()


def _cases():
    causal = task_rows("causal_graph", 2, seed=3)
    kk = task_rows("knights_knaves", 1, seed=3)
    out = []
    for row in causal:
        gold = gold_trace(row["problem"], 0, plain=True)
        out += [
            (row, gold),
            (row, gold.replace("RESULT:", "RESULT: maybe")),
            (row, "<answer>nonsense</answer>"),
        ]
    entry = json.loads(kk[0]["entry"])
    out += [(kk[0], gold_kk_trace(entry["metadata"], 0)), (kk[0], "no tags"), (kk[0], "")]
    return out


def test_verl_compute_score_matches_trl_on_gold_wrong_and_garbage():
    cases = _cases()
    expected = _trl_scores([t for _, t in cases], [r for r, _ in cases])
    assert max(expected) > 2.0 and min(expected) == 0.0  # gold traces score high, garbage 0
    for (row, text), want in zip(cases, expected):
        extra = {"problem": row["problem"]} if row.get("problem") else {"entry": row["entry"]}
        got = compute_score(
            data_source=row["task"], solution_str=text, ground_truth=row["answer"], extra_info=extra
        )
        assert got["score"] == pytest.approx(want)
        assert set(got) == {"score", *SYMBOLIC_REWARDS, *(f"{n}_applies" for n in SYMBOLIC_REWARDS)}
    # the row can also travel as one JSON ground truth
    row, text = cases[0]
    as_json = json.dumps({"problem": row["problem"], "answer": row["answer"]})
    assert compute_score("causal_graph", text, as_json)["score"] == pytest.approx(expected[0])


def test_openrlhf_reward_func_matches_trl():
    cases = _cases()
    expected = _trl_scores([t for _, t in cases], [r for r, _ in cases])
    prompts = [f"PROMPT {i}: " for i in range(len(cases))]
    labels = [json.dumps({k: r.get(k) for k in ("problem", "entry", "answer")}) for r, _ in cases]
    out = reward_func([p + t for p, (_, t) in zip(prompts, cases)], prompts, labels)
    assert out["rewards"].dtype == torch.float32 and out["rewards"].shape == (len(cases),)
    assert out["rewards"].tolist() == pytest.approx(expected, abs=1e-6)
    assert torch.equal(out["rewards"], out["scores"])
    assert set(out["extra_logs"]) == set(SYMBOLIC_REWARDS)


def test_entry_points_never_raise_on_model_output_or_odd_labels():
    for text in (
        None,
        "",
        "x" * 200_000,
        "<answer>" * 1000,
        "<think>GRAPH: A -> A</think><answer>{A}</answer>",
    ):
        for truth in (None, "", "{not json", json.dumps({"problem": "{broken"}), 17):
            got = compute_score("causal_graph", text, truth, None)
            assert math.isfinite(got["score"])
    with pytest.raises(ValueError, match="unknown rewards"):
        compute_score("causal_graph", "", None, None, weights={"cros": 1.0})


def test_docstring_examples_run():
    import doctest

    import faithgrpo.integrations.openrlhf as openrlhf
    import faithgrpo.integrations.scoring as scoring
    import faithgrpo.integrations.verl as verl

    results = [doctest.testmod(m) for m in (openrlhf, scoring, verl)]
    assert sum(r.attempted for r in results) >= 3 and not any(r.failed for r in results)
