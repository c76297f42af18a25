"""The reward ablation (recipes/ablation.py): config checks, the results summary, and the smoke run end to end."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import yaml

from faithgrpo.eval.ablation import format_interval, render_markdown, reward_curves, summarize
from faithgrpo.watchdog import run_with_deadline

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "recipes" / "configs" / "ablation_cpu.yaml"


def _ablation_module():
    spec = importlib.util.spec_from_file_location("ablation_recipe", ROOT / "recipes" / "ablation.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------------------------------------
# config
@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("colour=blue", "unknown ablation config key"),
        ("arms.outcome_format.brevity=1.0", "not in rewards"),
        ("arms.full.calver=-1", "must be a number >= 0"),
        ("train.reward_weights=[1.0]", "sets per arm"),
        ("baseline=best", "is not an arm"),
        ("eval.shifted=causal_graph", "must be different tasks"),
        ("eval.sample=8", "unknown eval key"),
        ("seeds=[0, one]", "seeds must be a list of integers"),
        ("arms.sft={outcome: 1.0}", "not 'sft'"),
        ("train.max_steps", "takes key=value"),
        ("arms.full.aggregation=mean", "aggregation must be one of"),
        ("rewards=[outcome, calver_max]", "unknown reward name"),
        ("train.multi_objective_aggregation=normalize_then_sum", "give the arm an `aggregation"),
        ("arms.full={aggregation: normalize_then_sum}", "must map reward names to weights"),
    ],
)
def test_bad_config_is_refused_naming_the_key(override, message):
    ablation = _ablation_module()
    with pytest.raises(ablation.AblationError, match=message):
        ablation.load_config(CONFIG, [override])


def test_the_cpu_config_runs_every_arm_with_every_reward_and_only_the_weights_differ(tmp_path):
    ablation = _ablation_module()
    config = ablation.load_config(CONFIG, ["seeds=[0, 1]"])
    runs = ablation.labels(config)
    # the baseline first (the eval's paired reference), every arm once per seed
    assert runs[0] == ("outcome_format-s0", "outcome_format", 0)
    assert sorted(runs) == sorted((f"{a}-s{s}", a, s) for a in config["arms"] for s in (0, 1))
    commands = {
        label: ablation.arm_command(config, arm, seed, "/sft", tmp_path / label) for label, arm, seed in runs
    }
    yamls = {(tmp_path / label / "train.yaml").read_text() for label in commands}
    assert len(yamls) == 1, "every arm trains with the same shared settings"

    def flags(command):
        out, i = {}, 2
        while i < len(command):
            j = i + 1
            while j < len(command) and not command[j].startswith("--"):
                j += 1
            out[command[i]] = command[i + 1 : j]
            i = j
        return out

    parsed = {label: flags(c) for label, c in commands.items()}
    for label, arm, seed in runs:
        f = parsed[label]
        assert f["--reward_funcs"] == ["outcome", "format", "trace_format", "cros", "calver"]
        expected = [float(config["arms"][arm].get(r, 0.0)) for r in f["--reward_funcs"]]
        assert [float(w) for w in f["--reward_weights"]] == expected
        assert f["--seed"] == [str(seed)] and f["--warm_start_adapter"] == ["/sft"]
        others = {
            k: v for k, v in f.items() if k not in ("--reward_weights", "--output_dir", "--config", "--seed")
        }
        assert others == {k: v for k, v in parsed[runs[0][0]].items() if k in others}
    shared = yaml.safe_load(next(iter(yamls)))
    assert shared["system_prompt"] == config["system_prompt"] and shared["causal"] == config["causal"]


def test_the_scale_config_has_two_seeds_64_prompts_and_the_gdpo_and_variant_arms(tmp_path):
    ablation = _ablation_module()
    config = ablation.load_config(ROOT / "recipes" / "configs" / "ablation_scale_cpu.yaml")
    assert (
        config["seeds"] == [0, 1] and config["eval"]["prompts"] >= 64 and config["train"]["task_size"] >= 64
    )
    train = config["train"]
    assert train["per_device_train_batch_size"] // train["num_generations"] >= 2  # >= 2 prompts per step
    assert train["max_steps"] * train["per_device_train_batch_size"] // train["num_generations"] >= 64
    specs = {arm: ablation.arm_spec(config, arm) for arm in config["arms"]}
    assert specs["full_gdpo"] == (specs["full"][0], "normalize_then_sum")
    assert {w for arm in ("full_gated", "full_certified") for w in specs[arm][0]} >= {
        "calver_gated",
        "calver_certified",
    }
    assert len(ablation.labels(config)) == 2 * len(config["arms"])


def test_a_gdpo_arm_passes_trls_aggregation_and_only_that_arm_does(tmp_path):
    ablation = _ablation_module()
    config = ablation.load_config(
        CONFIG, ["arms.full_gdpo={outcome: 1.0, format: 0.25, calver: 1.0, aggregation: normalize_then_sum}"]
    )
    for label, arm, seed in ablation.labels(config):
        command = ablation.arm_command(config, arm, seed, "/sft", tmp_path / label)
        if arm == "full_gdpo":
            i = command.index("--multi_objective_aggregation")
            assert command[i + 1] == "normalize_then_sum"
            weights = command[command.index("--reward_weights") + 1 : i]
            assert [float(w) for w in weights] == [1.0, 0.25, 0.0, 0.0, 1.0]  # aggregation is not a weight
        else:
            assert "--multi_objective_aggregation" not in command  # TRL's default, and the cached identity


def test_advantage_sources_under_gdpo_weigh_a_varying_reward_by_its_weight_not_its_spread():
    from faithgrpo.eval.ablation import advantage_sources

    # calver is a scaled copy of outcome with a tenth of its spread: summed first, outcome moves the
    # advantage (by hand: |dev| sums 1.5 vs 0.15, share 0.15 / 1.65); normalised first (GDPO), both
    # standardise to the same values, so they share it equally (up to TRL's 1e-4 in the denominator)
    rows = [{"step": 1, "prompt": "p", "rewards": {"outcome": o, "calver": c}}
            for o, c in ((1.0, 0.6), (0.0, 0.5), (0.0, 0.5), (0.0, 0.5))]  # fmt: skip
    weights = {"outcome": 1.0, "calver": 1.0}
    summed = advantage_sources(rows, weights)
    assert summed["share"]["calver"] == pytest.approx(0.15 / 1.65, abs=1e-6)
    gdpo = advantage_sources(rows, weights, aggregation="normalize_then_sum")
    # by hand: std (Bessel) 0.5 and 0.05, so 1.5 / 0.5001 and 0.15 / 0.0501
    o, c = 1.5 / 0.5001, 0.15 / 0.0501
    assert gdpo["share"]["calver"] == pytest.approx(c / (o + c), abs=1e-6)
    assert gdpo["aggregation"] == "normalize_then_sum"
    # a None reward is left out of its group's mean and std, and a one-value group moves nothing
    lone = [{"step": 2, "prompt": "q", "rewards": {"outcome": 1.0, "calver": None}},
            {"step": 2, "prompt": "q", "rewards": {"outcome": 0.0, "calver": 0.5}}]  # fmt: skip
    assert advantage_sources(lone, weights, aggregation="normalize_then_sum")["share"]["calver"] == 0.0
    with pytest.raises(ValueError, match="unknown aggregation"):
        advantage_sources(rows, weights, aggregation="gdpo")


def test_the_eval_puts_the_baseline_first_and_evaluates_both_task_sets_on_the_training_prompt(tmp_path):
    ablation = _ablation_module()
    config = ablation.load_config(CONFIG)
    command = ablation.eval_command(config, tmp_path, "/sft")
    i = command.index("--label")
    assert command[i + 1] == "outcome_format" and "--baseline" not in command
    checkpoints = [command[j + 1] for j, c in enumerate(command) if c == "--checkpoint"]
    assert checkpoints == ["sft", "plus_calver", "plus_cros", "full"]
    task_config = json.loads(command[command.index("--task-config") + 1])
    assert command[command.index("--tasks") + 1] == "causal_graph,causal_story"
    assert task_config["causal_graph"]["max_nodes"] == config["causal"]["max_nodes"]
    assert task_config["causal_story"]["min_nodes"] == config["eval"]["shifted_causal"]["min_nodes"]
    assert all(t["system_prompt"] == config["system_prompt"] for t in task_config.values())


# ---------------------------------------------------------------------------------------------
# results summary
def _est(value, low=None, high=None, n=4, reason=None):
    return {"value": value, "ci_low": low, "ci_high": high, "n": n, "reason": reason}


def _checkpoint(label, pass1, cot1, checks):
    return {
        "label": label,
        "passk": {
            "causal_graph": {
                "prompts": 4,
                "samples": 2,
                "k": {"1": {"pass@k": _est(pass1, 0.0, 1.0), "cot_pass@k": _est(cot1, 0.0, 1.0)}},
                "calver_checks": {
                    "checks": {name: _est(v) for name, v in checks.items()},
                    "all_six": _est(cot1),
                    "mean_score": sum(checks.values()) / 6,
                },
            }
        },
        "faithfulness": {
            "early_answering": {"aoc": _est(0.5), "cir": _est(None, reason="no answer")},
            "cros_delta": {"mean": _est(0.1)},
        },
        "hints": None,
    }


def _report():
    names = ("graph", "query", "strategy", "derivation", "result", "answer")
    return {
        "config": {"tasks": ["causal_graph"], "ks": [1]},
        "checkpoints": [
            _checkpoint("base", 0.5, 0.25, dict.fromkeys(names, 0.5)),
            _checkpoint("arm", 0.75, 0.5, {**dict.fromkeys(names, 1.0), "graph": 0.0}),
        ],
        "comparisons": {
            "reference": "base",
            "checkpoints": {
                "arm": {
                    "causal_graph": {
                        "1": {"pass@k": _est(0.25, -0.25, 0.5), "cot_pass@k": _est(0.25, 0.0, 0.5)}
                    }
                }
            },
            "faithfulness": {"arm": {"aoc": _est(-0.1), "cir": _est(None), "cros_delta": _est(0.05)}},
        },
    }


def test_summary_reads_every_metric_and_the_paired_rows_from_the_report():
    summary = summarize(_report(), baseline="base")
    arm = summary["checkpoints"]["arm"]["tasks"]["causal_graph"]
    assert arm["pass@k"]["1"]["value"] == 0.75 and arm["cot_pass@k"]["1"]["value"] == 0.5
    assert arm["calver_checks"]["graph"]["value"] == 0.0 and arm["calver_checks"]["answer"]["value"] == 1.0
    assert arm["calver_mean_score"] == pytest.approx(5 / 6)
    paired = summary["paired"]["arm"]
    assert list(summary["paired"]) == ["arm"], "the baseline is not paired with itself"
    assert paired["tasks"]["causal_graph"]["cot_pass@k"]["1"] == _est(0.25, 0.0, 0.5)
    assert paired["faithfulness"]["aoc"]["value"] == -0.1 and paired["hints"] is None
    markdown = render_markdown(summary, title="t")
    assert "| arm | 0.750 [0.000, 1.000] |" in markdown
    # K = 1 is also the largest K here: ΔPass@1, ΔPass@Kmax, ΔCoT-Pass@1, ΔCoT-Pass@Kmax
    pass_diff, cot_diff = "+0.250 [-0.250, +0.500]", "+0.250 [+0.000, +0.500]"
    assert f"| arm | {pass_diff} | {pass_diff} | {cot_diff} | {cot_diff} |" in markdown
    assert "| arm | 0.00 | 1.00 | 1.00 | 1.00 | 1.00 | 1.00 |" in markdown


def test_summary_refuses_a_report_whose_reference_is_not_the_baseline_arm():
    with pytest.raises(ValueError, match="compares against 'base'"):
        summarize(_report(), baseline="arm")


def test_reward_curves_keep_finite_means_per_reward_and_the_weighted_total():
    rows = [
        {"step": 1, "reward": 0.5, "rewards/outcome/mean": 0.25, "rewards/calver/mean": None,
         "rewards/cros/mean": 0.5, "cros/delta_mean": 0.25, "calver/derivation": 0.5},
        {"step": 2, "reward": float("nan"), "rewards/outcome/mean": 0.5, "rewards/calver/mean": 0.125,
         "rewards/cros/mean": 0.5, "cros/delta_mean": None},
        {"epoch": 1.0, "train_runtime": 3.0},
    ]  # fmt: skip
    assert reward_curves(rows) == {
        "outcome": [(1, 0.25), (2, 0.5)],
        "cros Δ (mean)": [(1, 0.25)],
        "derivation check": [(1, 0.5)],
        "total": [(1, 0.5)],
        "calver": [(2, 0.125)],
    }
    assert format_interval(_est(-0.125, -0.5, 0.25), signed=True) == "-0.125 [-0.500, +0.250]"


# ---------------------------------------------------------------------------------------------
# the whole ablation on a tiny model
@pytest.mark.slow
def test_smoke_ablation_shares_one_warm_start_and_data_and_reports_paired_intervals(tmp_path):
    out = tmp_path / "ablation"
    command = [sys.executable, str(ROOT / "recipes" / "ablation.py"), "--smoke", "--output_dir", str(out)]
    done = run_with_deadline(command, timeout=1500, cwd=ROOT)
    assert done.returncode == 0, done.log()
    config = yaml.safe_load(CONFIG.read_text())
    arms = list(config["arms"])
    results = json.loads((out / "results" / "ablation_smoke.json").read_text())

    # one warm start, trained once, continued by every arm
    (cached,) = (out / "warm_start_cache").iterdir()
    assert results["warm_start"]["adapter"] == str(cached)
    for arm in arms:
        note = json.loads((out / "arms" / arm / "warm_start.json").read_text())
        assert note["adapter"] == str(cached)

    # same prompts in the same order, and at step 1 (same policy, same seed) the same completions
    def step_rows(arm):
        rows = [
            json.loads(line) for line in (out / "arms" / arm / "completions.jsonl").read_text().splitlines()
        ]
        return [(r["step"], r["prompt"], r["completion"]) for r in rows], rows

    first, _ = step_rows(arms[0])
    assert first, "completions.jsonl is empty"
    for arm in arms[1:]:
        assert step_rows(arm)[0] == first, f"{arm} saw other prompts or generated other completions at step 1"
    # each arm logged every reward and trained on its own weights
    for arm in arms:
        _, rows = step_rows(arm)
        assert set(rows[0]["rewards"]) == set(config["rewards"])
        assert results["arms"][arm]["weights"] == config["arms"][arm]
    # every section, every paired row with an interval
    summary = results["summary"]
    assert list(summary["checkpoints"]) == [arms[0], "sft", *arms[1:]]
    assert set(summary["paired"]) == {"sft", *arms[1:]}
    for paired in summary["paired"].values():
        for task in ("causal_graph", "causal_story"):
            estimate = paired["tasks"][task]["cot_pass@k"]["2"]
            assert (
                estimate["value"] is not None
                and estimate["ci_low"] <= estimate["value"] <= estimate["ci_high"]
            )
    markdown = (out / "results" / "ablation_smoke.md").read_text()
    for heading in (
        "## Held-out: causal_graph",
        "## Shifted: causal_story",
        "## Faithfulness metrics and hints",
    ):
        assert heading in markdown
    assert markdown.count("Paired differences against the baseline arm") == 2
    assert "## What moved the advantages in training" in markdown
    assert set(results["advantage_sources"]) == set(arms)
    assert all(s["groups"] >= 1 for s in results["advantage_sources"].values())
    assert (out / "results" / "ablation_smoke_metrics.png").stat().st_size > 0
    assert (out / "results" / "ablation_smoke_rewards.png").stat().st_size > 0

    # a second run reuses the warm start, the arms and the cached completions
    again = run_with_deadline(command, timeout=900, cwd=ROOT)
    assert again.returncode == 0, again.log()
    assert "warm start: reusing" in again.stdout
    assert all(f"arm {arm}: reusing" in again.stdout for arm in arms)


def test_per_kind_rates_grade_each_cached_completion_by_its_rows_kind(tmp_path):
    from faithgrpo.eval.ablation import per_kind_rates
    from faithgrpo.eval.report.adapters import task_rows
    from faithgrpo.tasks.certificates.gold import gold_trace

    config = {"min_nodes": 4, "max_nodes": 4, "query_kinds": ["directed_path", "mediator"]}
    rows = task_rows("causal_graph", 6, seed=3, config=config)
    kinds = [json.loads(r["problem"])["query"]["kind"] for r in rows]
    path = tmp_path / "completions_causal_graph.jsonl"
    # per prompt: one gold trace (right answer, 6/6) and one bare wrong-format answer (0/6, not graded right)
    path.write_text(
        "".join(
            json.dumps({"id": r["id"], "completions": [gold_trace(r["problem"], plain=True), "no idea"]})
            + "\n"
            for r in rows
        )
    )
    rates = per_kind_rates(path, rows)
    assert set(rates) == set(kinds)
    for kind, r in rates.items():
        assert r["prompts"] == kinds.count(kind) and r["completions"] == 2 * kinds.count(kind)
        assert r["answer_rate"] == r["all_six_rate"] == r["mean_score"] == 0.5


def test_results_module_docstring_examples():
    import doctest

    from faithgrpo.eval import ablation

    result = doctest.testmod(ablation)
    assert result.attempted >= 4 and result.failed == 0


# ---------------------------------------------------------------------------------------------
# the store: a run spread over sessions
def test_the_warm_start_is_one_of_a_config_or_an_adapter_folder(tmp_path):
    ablation = _ablation_module()
    with pytest.raises(ablation.AblationError, match="exactly one of 'warm_start_config'"):
        ablation.load_config(CONFIG, [f"warm_start_adapter={tmp_path}"])
    with pytest.raises(ablation.AblationError, match="exactly one of"):
        ablation.load_config(CONFIG, ["warm_start_config=null"])
    config = ablation.load_config(
        CONFIG, ["warm_start_config=null", f"warm_start_adapter={tmp_path / 'nope'}"]
    )
    with pytest.raises(ablation.AblationError, match="is not an adapter folder"):
        ablation.warm_start(config, tmp_path)
    (tmp_path / "adapter").mkdir()
    (tmp_path / "adapter" / "adapter_config.json").write_text("{}")
    (tmp_path / "adapter" / "adapter_model.safetensors").write_bytes(b"weights")
    config["warm_start_adapter"] = str(tmp_path / "adapter")
    warm = ablation.warm_start(config, tmp_path)
    assert warm["adapter"] == str((tmp_path / "adapter").resolve()) and warm["reused"]
    assert warm["key"] == __import__("hashlib").sha256(b"weights").hexdigest()[:16]


def test_the_scale_config_starts_from_the_committed_policy_and_keeps_its_arms_in_the_repository():
    ablation = _ablation_module()
    config = ablation.load_config(ROOT / "recipes" / "configs" / "ablation_scale_cpu.yaml")
    assert (ROOT / config["warm_start_adapter"] / "adapter_config.json").is_file()
    store = Path(config["store"])
    assert not store.is_absolute() and store.parts[:2] == ("recipes", "results")
    assert ablation.arm_location(config, Path("runs"), "full-s1") == ROOT / store / "full-s1"
    assert ablation.eval_dir(config, Path("runs")) == ROOT / store / "eval"


def test_a_published_arm_keeps_only_its_stored_files_with_a_float16_adapter(tmp_path):
    import torch
    from safetensors.torch import load_file, save_file

    ablation = _ablation_module()
    run = tmp_path / "run"
    run.mkdir()
    weights = {"lora_A": torch.tensor([[0.1, -1 / 3]], dtype=torch.float32), "step": torch.tensor([7])}
    save_file(weights, str(run / "adapter_model.safetensors"))
    for name in ("adapter_config.json", "metrics.jsonl", "completions.jsonl", "train.yaml", "tokenizer.json"):
        (run / name).write_text(name)
    ablation.publish_arm(run, tmp_path / "store")
    kept = sorted(p.name for p in (tmp_path / "store").iterdir())
    assert kept == sorted(set(ablation.STORED_FILES) - {ablation.RUN_RECORD})  # no tokenizer, no record yet
    stored = load_file(str(tmp_path / "store" / "adapter_model.safetensors"))
    assert stored["lora_A"].dtype == torch.float16 and stored["step"].dtype == torch.int64
    assert torch.equal(stored["lora_A"], weights["lora_A"].to(torch.float16))
    assert (tmp_path / "store" / "metrics.jsonl").read_text() == "metrics.jsonl"


def test_a_stored_arm_is_reused_and_past_the_budget_no_arm_starts(tmp_path, monkeypatch):
    ablation = _ablation_module()
    config = ablation.load_config(CONFIG, [f"store={tmp_path / 'store'}"])
    started = []
    monkeypatch.setattr(
        ablation, "run_logged", lambda command, log, env=None: started.append(command) or (1, 0.0)
    )
    runs = ablation.labels(config)
    # nothing stored and the budget spent: nothing runs, every label is missing
    assert ablation.train_arms(config, tmp_path / "out", str(tmp_path / "sft"), deadline=0.0) == {}
    assert started == []
    # the baseline stored under the same command: reused; its identity holds no machine path
    label, arm, seed = runs[0]
    command = ablation.arm_command(
        config, arm, seed, str(tmp_path / "sft"), tmp_path / "out" / "arms" / label
    )
    identity = {
        "command": ablation._rooted(command[1:]),
        "train": (tmp_path / "out" / "arms" / label / "train.yaml").read_text(),
    }
    assert not any(str(ROOT) in part for part in identity["command"])
    final = tmp_path / "store" / label
    final.mkdir(parents=True)
    (final / "adapter_config.json").write_text("{}")
    (final / ablation.RUN_RECORD).write_text(json.dumps({"identity": identity, "seconds": 5.0}))
    records = ablation.train_arms(config, tmp_path / "out", str(tmp_path / "sft"), deadline=0.0)
    assert list(records) == [label] and started == []
    # another seed's identity differs: with budget left it would train (here the fake run fails)
    with pytest.raises(ablation.AblationError, match="failed"):
        ablation.train_arms(config, tmp_path / "out", str(tmp_path / "sft"))
    assert len(started) == 1 and str(tmp_path / "out" / "arms" / runs[1][0]) in started[0]


def test_a_float16_stored_adapter_loads_into_the_float32_model_as_its_rounded_weights(tmp_path):
    import torch
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM

    from faithgrpo.testing import save_tiny_causal_lm

    ablation = _ablation_module()
    base_dir = save_tiny_causal_lm(tmp_path / "tiny", "llama", seed=0)
    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(base_dir),
        LoraConfig(r=4, target_modules=["q_proj"], init_lora_weights=False),
    )
    model.save_pretrained(tmp_path / "run")
    trained = {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" in n}
    ablation.publish_arm(tmp_path / "run", tmp_path / "store")
    loaded = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(base_dir), str(tmp_path / "store")
    )
    params = {n: p for n, p in loaded.named_parameters() if "lora_" in n}
    assert params.keys() == trained.keys()
    for name, value in params.items():
        assert value.dtype == torch.float32
        assert torch.equal(value, trained[name].to(torch.float16).to(torch.float32)), name
        assert not torch.equal(value, trained[name]) or trained[name].abs().max() == 0  # it was rounded
