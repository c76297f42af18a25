"""``faithgrpo eval --task-config``: evaluation prompts drawn from a chosen task configuration."""

from __future__ import annotations

import argparse
import json

import pytest

from faithgrpo.eval.cli import add_eval_subcommand
from faithgrpo.eval.report.adapters import task_rows
from faithgrpo.eval.report.config import EvalConfig


def test_task_rows_follow_the_task_config():
    config = {"min_nodes": 4, "max_nodes": 5, "query_kinds": ["mediator", "dsep_set"]}
    rows = task_rows("causal_graph", 12, seed=3, config=config)
    problems = [json.loads(r["problem"]) for r in rows]
    assert all(4 <= len(p["graph"]["nodes"]) <= 5 for p in problems)
    assert {p["query"]["kind"] for p in problems} <= {"mediator", "dsep_set"}
    # Without a config the task's defaults apply (up to 8 nodes, every query kind): another draw.
    defaults = [json.loads(r["problem"]) for r in task_rows("causal_graph", 12, seed=3)]
    assert defaults != problems


def test_bad_task_configs_name_the_fix():
    with pytest.raises(ValueError, match=r"not a valid causal_graph config.*bogus"):
        task_rows("causal_graph", 1, seed=0, config={"bogus": 1})
    with pytest.raises(ValueError, match=r"names 'knights_knaves', which is not in --tasks"):
        EvalConfig(
            tasks=("causal_graph",), task_configs={"knights_knaves": {}}, ks=(1,), samples=1
        ).validate()
    with pytest.raises(ValueError, match=r"must be a mapping of config fields"):
        EvalConfig(tasks=("causal_graph",), task_configs={"causal_graph": [4]}, ks=(1,), samples=1).validate()


def test_cli_parses_task_config_json_and_rejects_other_text(capsys):
    parser = argparse.ArgumentParser()
    add_eval_subcommand(parser.add_subparsers())
    args = parser.parse_args(["eval", "--out", "x", "--task-config", '{"causal_graph": {"max_nodes": 5}}'])
    assert args.task_configs == {"causal_graph": {"max_nodes": 5}}
    assert parser.parse_args(["eval", "--out", "x"]).task_configs == {}
    for bad in ("{max_nodes: 5}", "[1, 2]"):
        with pytest.raises(SystemExit):
            parser.parse_args(["eval", "--out", "x", "--task-config", bad])
        assert "--task-config" in capsys.readouterr().err


def test_task_config_system_prompt_replaces_the_trace_instructions_and_nothing_else():
    config = {"min_nodes": 4, "max_nodes": 5}
    default = task_rows("causal_graph", 4, seed=3, config=config)
    short = task_rows("causal_graph", 4, seed=3, config={**config, "system_prompt": "Be brief."})
    assert [r["prompt"][0] for r in short] == [{"role": "system", "content": "Be brief."}] * 4
    assert all(r["prompt"][0]["content"] != "Be brief." for r in default)
    # the same problems, users' messages and answers: only the system message differs
    strip = lambda rows: [(r["prompt"][1:], r["problem"], r["answer"]) for r in rows]  # noqa: E731
    assert strip(short) == strip(default)
    with pytest.raises(ValueError, match="system_prompt must be a string"):
        task_rows("causal_graph", 1, seed=0, config={"system_prompt": ["a"]})
