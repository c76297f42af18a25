"""``faithgrpo data``: task rows on disk that ``datasets``, TRL's own ``trl grpo`` CLI and verl read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from faithgrpo.cli import main
from faithgrpo.eval.report.adapters import task_rows
from faithgrpo.tasks.certificates.gold import gold_trace


def test_trl_format_loads_with_datasets_and_keeps_every_column(tmp_path, capsys):
    import datasets

    assert main(["data", "causal_graph", "--size", "4", "--seed", "3", "--out", str(tmp_path / "d")]) == 0
    loaded = datasets.load_dataset(str(tmp_path / "d"))["train"]
    rows = task_rows("causal_graph", 4, 3)
    assert loaded["prompt"] == [r["prompt"] for r in rows]
    assert loaded["problem"] == [r["problem"] for r in rows] and loaded["answer"] == [
        r["answer"] for r in rows
    ]
    from faithgrpo.rewards.outcome import outcome_reward

    golds = [gold_trace(p, 0, plain=True) for p in loaded["problem"]]
    assert outcome_reward(golds, problem=loaded["problem"], answer=loaded["answer"]) == [1.0] * 4
    assert "dataset:" in capsys.readouterr().out


def test_verl_format_carries_the_row_for_compute_score(tmp_path):
    import pandas as pd

    from faithgrpo.integrations.verl import compute_score

    assert main(["data", "knights_knaves", "--size", "2", "--format", "verl", "--out", str(tmp_path)]) == 0
    frame = pd.read_parquet(tmp_path / "train.parquet")
    assert list(frame.columns) == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    first = frame.iloc[0]
    entry = json.loads(first["extra_info"]["entry"])
    from faithgrpo.tasks.knights_knaves.gold import gold_kk_trace

    gold = gold_kk_trace(entry["metadata"], 0)
    got = compute_score(
        first["data_source"], gold, first["reward_model"]["ground_truth"], dict(first["extra_info"])
    )
    assert got["outcome"] == 1.0 and got["outcome_applies"] == 1.0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["data", "no_such_task", "--out", "{tmp}/x"], "unknown task"),
        (["data", "causal_graph", "--size", "0", "--out", "{tmp}/x"], "--size"),
        (["data", "causal_graph", "--task-config", "[1]", "--out", "{tmp}/x"], "JSON object"),
        (["data", "causal_graph", "--task-config", "{bad", "--out", "{tmp}/x"], "not JSON"),
        (["data", "causal_graph", "--size", "1", "--out", "{tmp}/file"], "is a file"),
    ],
)
def test_bad_options_stop_with_one_line(tmp_path, capsys, argv, message):
    (tmp_path / "file").write_text("")
    assert main([a.replace("{tmp}", str(tmp_path)) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


@pytest.mark.slow
def test_trls_own_grpo_cli_trains_one_step_with_our_rewards_by_dotted_path(tmp_path):
    from faithgrpo.models import resolve

    data = tmp_path / "data"
    assert main(["data", "causal_graph", "--size", "2", "--out", str(data)]) == 0
    trl = Path(sys.executable).with_name("trl")
    command = [
        str(trl), "grpo", "--model_name_or_path", resolve("embedded"), "--dataset_name", str(data),
        "--reward_funcs", "faithgrpo.rewards.outcome_reward", "faithgrpo.rewards.calver_reward",
        "faithgrpo.rewards.format_reward", "--max_steps", "1", "--per_device_train_batch_size", "2",
        "--num_generations", "2", "--max_completion_length", "8", "--use_cpu", "--report_to", "none",
        "--save_strategy", "no", "--logging_steps", "1", "--output_dir", str(tmp_path / "out"),
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=1200, env=env, cwd=tmp_path)
    except subprocess.TimeoutExpired as err:
        pytest.fail(
            f"trl grpo did not finish in 1200 s; last output:\n{(err.stdout or '')[-3000:]}{(err.stderr or '')[-3000:]}"
        )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    logged = done.stdout + done.stderr
    assert "rewards/calver_reward/mean" in logged or "rewards/calver/mean" in logged, logged[-3000:]
