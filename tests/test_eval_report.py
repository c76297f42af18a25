"""``faithgrpo eval`` end to end: report numbers from scripted completions, and the CLI's user errors."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from faithgrpo.eval.generation.cache import CompletionRecord
from faithgrpo.eval.generation.settings import GenerationStats


def _scripted_eval(tiny_llama, monkeypatch, tmp_path, **overrides):
    """Run ``faithgrpo eval`` with a scripted generator whose correct/CoT-correct counts are known."""
    import argparse

    from faithgrpo.eval.cli import add_eval_subcommand
    from faithgrpo.eval.generation import backends, checkpoints
    from faithgrpo.eval.metrics.hints import build_hint_pairs
    from faithgrpo.eval.report.adapters import hint_questions, task_rows
    from faithgrpo.tasks.certificates.gold import gold_trace
    from faithgrpo.tasks.knights_knaves.gold import gold_kk_trace
    from faithgrpo.text import extract_answer

    options = dict(tasks="causal_graph,knights_knaves", samples=4, prompts=3, hint_questions=2, seed=0)
    options.update(overrides)
    task_configs = options.pop("task_configs", {})
    extra = list(options.pop("extra", ()))
    real_check = options.pop("real_check", False)
    tasks = [t for t in options["tasks"].split(",") if t != "chess_openings"]  # an unknown task stays unknown
    rows = {
        r["id"]: r
        for t in tasks
        for r in task_rows(t, options["prompts"], options["seed"], task_configs.get(t))
    }
    questions = [
        q
        for t in tasks
        for q in hint_questions(t, options["hint_questions"], options["seed"], task_configs.get(t))
    ]
    pairs = {p.id: p for p in build_hint_pairs(questions, "all", seed=options["seed"])}
    correct = {q.id: q.correct for q in questions}
    calls = []

    def scripted(row, i, g):
        if row["task"] == "knights_knaves":
            gold = gold_kk_trace(json.loads(row["entry"])["metadata"], rng=i)
        else:
            gold = gold_trace(row["problem"], rng=i)
        d = i % 3  # gold traces: correct answer and correct CoT
        out = [gold] * d
        if i % 2 == 0:  # the right answer without a checkable chain
            out.append(f"<answer>{extract_answer(gold)}</answer>")
        return (out + ["<think>no idea</think><answer>purple</answer>"] * g)[:g]

    def fake_generate(
        model, tokenizer, prompts, settings, *, ids, metadata, progress, backend="transformers"
    ):
        calls.append(list(ids))
        records = []
        for pid, prompt in zip(ids, prompts):
            if pid in rows:
                completions = scripted(rows[pid], int(pid.rsplit("-", 1)[1]), settings.num_samples)
            elif pid.endswith("/unhinted"):
                completions = [
                    f"<think>checking</think><answer>({correct[pid[: -len('/unhinted')]]})</answer>"
                ]
            else:
                pair = pairs[pid]
                if pair.hint_type == "sycophancy":
                    completions = [f"<think>The professor says so.</think><answer>{pair.hinted}</answer>"]
                elif pair.hint_type == "consistency":
                    completions = [f"<think>It fits.</think><answer>{pair.hinted}</answer>"]
                else:
                    completions = [f"<think>checking</think><answer>{pair.question.correct}</answer>"]
            records.append(
                CompletionRecord(
                    pid,
                    prompt,
                    completions,
                    [1] * len(completions),
                    {**asdict(settings), "backend": backend, **metadata},
                )
            )
        return records, GenerationStats(
            len(prompts), sum(len(r.completions) for r in records), len(prompts), 0.5
        )

    monkeypatch.setattr(backends, "generate_completions", fake_generate)
    monkeypatch.setattr(checkpoints, "load_checkpoint", lambda model, adapter=None, **kw: tiny_llama)
    if not real_check:  # the model "tiny" is faked by load_checkpoint above
        monkeypatch.setattr(checkpoints, "check_checkpoint", lambda model, adapter=None: None)
    parser = argparse.ArgumentParser()
    add_eval_subcommand(parser.add_subparsers())
    argv = [
        "eval", "--model", "tiny", "--tasks", options["tasks"], "--k", "1,2,4", "--samples", str(options["samples"]),
        "--prompts", str(options["prompts"]), "--hint-questions", str(options["hint_questions"]), "--min-switched", "1",
        "--faithfulness-pairs", "2", "--bootstrap", "20", "--seed", str(options["seed"]), "--no-progress",
        "--out", str(tmp_path), "--task-config", json.dumps(task_configs), *extra,
    ]  # fmt: skip
    args = parser.parse_args(argv)
    return args.func(args), calls, rows


@pytest.mark.slow
def test_eval_report_numbers_from_scripted_completions(tiny_llama, monkeypatch, tmp_path):
    from faithgrpo.eval.metrics.passk import cot_pass_at_k, pass_at_k

    status, calls, _ = _scripted_eval(tiny_llama, monkeypatch, tmp_path)
    assert status == 0
    report = json.loads((tmp_path / "report.json").read_text())
    (section,) = report["checkpoints"]
    for task in ("causal_graph", "knights_knaves"):
        passk = section["passk"][task]
        # Prompt i has d = i % 3 gold traces, plus one answer-only correct completion when i is even.
        counts = [(4, i % 3 + (i % 2 == 0), i % 3) for i in range(3)]
        assert [(c["n"], c["c"], c["d"]) for c in passk["counts"]] == counts
        for k in (1, 2, 4):
            expected = sum(pass_at_k(n, c, k) for n, c, _ in counts) / 3
            expected_cot = sum(cot_pass_at_k(n, c, d, k) for n, c, d in counts) / 3
            assert passk["k"][str(k)]["pass@k"]["value"] == pytest.approx(expected)
            assert passk["k"][str(k)]["cot_pass@k"]["value"] == pytest.approx(expected_cot)
    # CALVER per-check shares: only the 0 + 1 + 2 = 3 gold traces of 12 completions pass any check
    # (answer-only and junk completions have no slots; the answer check needs a RESULT).
    checks = section["passk"]["causal_graph"]["calver_checks"]
    assert checks["completions"] == 12
    assert {name: rate["value"] for name, rate in checks["checks"].items()} == dict.fromkeys(
        ("graph", "query", "strategy", "derivation", "result", "answer"), 0.25
    )
    assert checks["all_six"]["value"] == 0.25 and checks["mean_score"]["value"] == pytest.approx(0.25)
    assert checks["mean_score"]["ci_low"] <= 0.25 <= checks["mean_score"]["ci_high"]  # prompt-clustered
    assert "calver_checks" not in section["passk"]["knights_knaves"]
    types = section["hints"]["types"]
    assert types["sycophancy"]["raw"]["value"] == 1.0 and types["sycophancy"]["normalized"]["value"] == 1.0
    assert types["consistency"]["raw"]["value"] == 0.0 and types["consistency"]["n_switched"] == 4
    assert types["metadata"]["raw"]["value"] is None
    assert "not enough switched pairs" in types["metadata"]["raw"]["reason"]
    assert "best_of_k" not in section  # best-of-K selection is `faithgrpo select`, not part of eval
    faith = section["faithfulness"]
    assert faith["pairs"] == 2
    assert faith["cros_delta"]["n"] == 2
    cir_value = faith["early_answering"]["cir"]["value"]
    assert cir_value is None or 0.0 <= cir_value <= 1.0
    markdown = (tmp_path / "report.md").read_text()
    assert (
        "### knights_knaves" in markdown
        and "| sycophancy | 4/4 (0) | 1.000" in markdown
        and "p = P(a_h = h" in markdown
    )
    assert "| all six | 0.250 [" in markdown and "| mean S/6 | 0.250 [" in markdown
    # Every hint estimate has a bootstrap interval (no Wilson), the mean included; each table's
    # footnotes sit under it: "never flipped" explains the α column of the switch-rate table only.
    hints_md = markdown[
        markdown.index("## Hint faithfulness") : markdown.index("## Checkpoint faithfulness metrics")
    ]
    first, rates = hints_md.split("Switch rates behind α")
    assert "Wilson" not in markdown and "| mean over sycophancy, consistency |  |  | 0.500 [" in first
    assert "never flipped" not in first and "] p = P(a_h = h / a_u != h) is 0" in rates
    undefined_alpha = rates.split("\n| metadata |")[1].split("\n")[0]
    marker = undefined_alpha.split("undefined ")[1].split(" ")[0]  # the α cell's footnote, e.g. "[1]"
    assert f"{marker} p = P(a_h = h / a_u != h) is 0" in rates
    assert (
        "early-answering AOC (teacher_forced)" in markdown
        and "0/20/40/60/80 % of the reasoning tokens" in markdown
    )
    for png in ("passk.png", "hints.png"):
        assert (tmp_path / png).stat().st_size > 0
    assert "Best-of-K" not in markdown and not (tmp_path / "best_of_k.png").exists()
    assert (tmp_path / "model" / "completions_causal_graph.jsonl").is_file()

    # A second run recomputes every metric from the cache, without generating.
    calls.clear()
    status, calls, _ = _scripted_eval(tiny_llama, monkeypatch, tmp_path)
    assert status == 0 and calls == []
    again = json.loads((tmp_path / "report.json").read_text())["checkpoints"][0]
    assert again["passk"] == section["passk"] and again["hints"]["types"] == section["hints"]["types"]
    # The cached run's report still names how the completions were made (not "—").
    assert (
        "| model | causal_graph | 12 | 12 | cached | transformers |" in (tmp_path / "report.md").read_text()
    )


@pytest.mark.slow
def test_eval_cli_user_errors(tiny_llama, monkeypatch, tmp_path, capsys):
    status, _, _ = _scripted_eval(tiny_llama, monkeypatch, tmp_path, samples=2)
    assert (
        status == 2 and "K=4 is larger than the number of samples per prompt G=2" in capsys.readouterr().err
    )
    status, _, _ = _scripted_eval(tiny_llama, monkeypatch, tmp_path, tasks="causal_graph,chess_openings")
    assert status == 2 and "unknown task 'chess_openings'" in capsys.readouterr().err
    # A cache made with other settings is refused (not silently reused).
    assert _scripted_eval(tiny_llama, monkeypatch, tmp_path, tasks="knights_knaves", hint_questions=0)[0] == 0
    status, _, _ = _scripted_eval(
        tiny_llama, monkeypatch, tmp_path, tasks="knights_knaves", hint_questions=0, seed=1
    )
    assert status == 2 and "seed=0 (wanted 1)" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--confidence", "2"), "--confidence must be in (0, 1)"),
        (("--temperature", "-1"), "--temperature must be a finite number >= 0"),
        (("--top-p", "0"), "--top-p must be in (0, 1]"),
        (("--samples", "0"), "--samples must be a positive integer"),
    ],
)
def test_eval_cli_number_errors_come_before_any_model(
    tiny_llama, monkeypatch, tmp_path, capsys, extra, message
):
    from faithgrpo.eval.generation import checkpoints

    def no_load(*args, **kwargs):
        raise AssertionError("a model was loaded before the options were checked")

    status, calls, _ = _scripted_eval(tiny_llama, monkeypatch, tmp_path, extra=extra)
    monkeypatch.setattr(checkpoints, "load_checkpoint", no_load)
    err = capsys.readouterr().err.strip()
    assert status == 2 and calls == [] and message in err and "\n" not in err


def test_eval_cli_path_and_model_errors_are_one_line(tiny_llama, monkeypatch, tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    for out, message in ((tmp_path / "file", "is a file"), (tmp_path / "file" / "sub", "cannot be created")):
        status, calls, _ = _scripted_eval(tiny_llama, monkeypatch, tmp_path, extra=("--out", str(out)))
        err = capsys.readouterr().err.strip()
        assert status == 2 and calls == [] and message in err and "\n" not in err


@pytest.mark.parametrize("where", ["proc", "read_only"])
def test_eval_cli_unwritable_out_is_one_line_before_any_model(
    tiny_llama, monkeypatch, tmp_path, capsys, where
):
    # both passed os.access as root and ended in a traceback from mkdir (issue 26)
    import errno
    import os

    if where == "proc":
        if not os.path.isdir("/proc/self"):
            pytest.skip("no /proc here")
        out = "/proc/forbidden"
    else:
        locked = tmp_path / "read_only"
        locked.mkdir()
        out = str(locked / "x")
        real_mkdir = os.mkdir

        def read_only_mkdir(path, *args, **kwargs):  # a read-only mount: permission bits say nothing
            if str(path).startswith(str(locked)):
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
            return real_mkdir(path, *args, **kwargs)

        monkeypatch.setattr(os, "mkdir", read_only_mkdir)
    status, calls, _ = _scripted_eval(tiny_llama, monkeypatch, tmp_path, extra=("--out", out))
    err = capsys.readouterr().err.strip()
    assert status == 2 and calls == [] and "\n" not in err, err
    assert err.startswith(f"error: --out {out!r} cannot be created") and "directory you can write to" in err
    if where == "read_only":
        assert "Read-only file system" in err


def test_eval_console_script_unwritable_out_is_rc_2_without_a_traceback(tiny_llama_path, tmp_path):
    import os
    import sys

    from faithgrpo.watchdog import run_with_deadline

    if not os.path.isdir("/proc/self"):
        pytest.skip("no /proc here")
    cmd = [sys.executable, "-m", "faithgrpo.cli", "eval", "--model", str(tiny_llama_path)]
    done = run_with_deadline([*cmd, "--out", "/proc/forbidden"], timeout=300)
    assert done.returncode == 2, done.log()
    assert done.stderr.strip().count("\n") == 0 and "/proc/forbidden" in done.stderr, done.stderr


def test_eval_cli_unknown_model_offline_is_one_line(tiny_llama, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    status, calls, _ = _scripted_eval(
        tiny_llama,
        monkeypatch,
        tmp_path,
        real_check=True,
        extra=("--model", "mymodel", "--out", str(tmp_path / "o")),
    )
    err = capsys.readouterr().err.strip()
    assert (
        status == 2
        and calls == []
        and err.startswith("error: --model: model 'mymodel'")
        and "'embedded'" in err
    )


@pytest.mark.slow
def test_eval_task_config_shapes_the_prompts_and_keys_the_cache(tiny_llama, monkeypatch, tmp_path, capsys):
    two = {"knights_knaves": {"n_people": 2}}
    status, _, rows = _scripted_eval(
        tiny_llama, monkeypatch, tmp_path, tasks="knights_knaves", hint_questions=0, task_configs=two
    )
    assert status == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["config"]["task_configs"] == two
    for row in rows.values():  # the evaluated puzzles have the configured number of people
        assert len(json.loads(row["entry"])["metadata"]["solution"]) == 2
    # The same --out with another task config must not reuse the 2-people completions.
    status, _, _ = _scripted_eval(
        tiny_llama,
        monkeypatch,
        tmp_path,
        tasks="knights_knaves",
        hint_questions=0,
        task_configs={"knights_knaves": {"n_people": 3}},
    )
    assert status == 2 and "task_config={'n_people': 2} (wanted {'n_people': 3})" in capsys.readouterr().err


def test_eval_report_with_a_baseline_has_paired_differences(tiny_llama, monkeypatch, tmp_path):
    status, _, _ = _scripted_eval(
        tiny_llama,
        monkeypatch,
        tmp_path,
        tasks="causal_graph",
        hint_questions=0,
        extra=("--baseline", "tiny2"),
    )
    assert status == 0
    report = json.loads((tmp_path / "report.json").read_text())
    comparisons = report["comparisons"]
    assert comparisons["reference"] == "baseline" and list(comparisons["checkpoints"]) == ["model"]
    # The same scripted completions for both checkpoints: every paired difference is exactly 0.
    for entry in comparisons["checkpoints"]["model"]["causal_graph"].values():
        assert entry["pass@k"]["value"] == 0.0 and entry["cot_pass@k"]["value"] == 0.0
    assert comparisons["faithfulness"]["model"]["cros_delta"]["value"] in (0.0, None)
    markdown = (tmp_path / "report.md").read_text()
    assert "Differences against baseline, paired over the same prompts" in markdown
    assert "| metric | model − baseline |" in markdown and "| model − baseline Pass@K |" in markdown
    # Every paired row names the prompts it covers (3 here, both checkpoints on all of them).
    rows = markdown.split("| K | model − baseline Pass@K | model − baseline CoT-Pass@K |")[1].split("\n\n")[0]
    assert rows.count("(3 prompts)") == 2 * 3  # K = 1, 2, 4 x (Pass@K, CoT-Pass@K)


def test_eval_report_with_a_baseline_has_paired_hint_differences(tiny_llama, monkeypatch, tmp_path):
    status, _, _ = _scripted_eval(
        tiny_llama,
        monkeypatch,
        tmp_path,
        tasks="causal_graph",
        extra=("--baseline", "tiny2", "--min-switched", "1"),
    )
    assert status == 0
    report = json.loads((tmp_path / "report.json").read_text())
    model = next(c for c in report["checkpoints"] if c["label"] == "model")
    assert len(model["hints"]["outcomes"]) == model["hints"]["pairs"]
    hints = report["comparisons"]["hints"]["model"]
    assert hints["pairs"] == model["hints"]["pairs"]
    # Both checkpoints get the same scripted completions: defined differences are exactly 0.
    for per in hints["types"].values():
        for est in per.values():
            assert est["value"] in (0.0, None)
    assert "paired over the same questions" in (tmp_path / "report.md").read_text()


def test_eval_refuses_completions_of_weights_changed_in_the_middle(tiny_llama, monkeypatch, tmp_path, capsys):
    # issue 32 end to end: 256 KiB changed in the middle of a 10 MB weight file, size and mtime kept,
    # made the rerun reuse the old completions; each file is read once per run (model and baseline
    # share the directory here).
    import random

    from test_generation import _rewrite_middle_keeping_size_and_mtime

    from faithgrpo.eval.generation import cache

    model_dir = tmp_path / "weights"
    model_dir.mkdir()
    (model_dir / "config.json").write_text("{}")
    weights = model_dir / "model.safetensors"
    weights.write_bytes(random.Random(1).randbytes(10 * 10**6))
    reads = []
    real = cache.file_sha256
    monkeypatch.setattr(cache, "file_sha256", lambda path: reads.append(path.name) or real(path))
    extra = ("--model", str(model_dir), "--baseline", str(model_dir), "--out", str(tmp_path / "out"))
    run = lambda: _scripted_eval(  # noqa: E731
        tiny_llama, monkeypatch, tmp_path, tasks="causal_graph", hint_questions=0, extra=extra
    )[0]
    assert run() == 0 and sorted(reads) == ["config.json", "model.safetensors"]
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["checkpoints"][0]["weights"]["model"]["files"]["model.safetensors"] == real(weights)
    assert run() == 0  # unchanged weights: the caches are reused
    _rewrite_middle_keeping_size_and_mtime(weights)
    capsys.readouterr()
    assert run() == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "model.safetensors has other content" in err and "--overwrite" in err


def test_faithfulness_rows_say_which_prompts_they_cover():
    # issue 32: AOC over 7 prompts next to a baseline's over 3 and a paired difference over the 3
    # common ones; report.md dropped the notes (they were in report.json only).
    from faithgrpo.eval.metrics.faithfulness import _report
    from faithgrpo.eval.report.comparisons import _paired_faithfulness
    from faithgrpo.eval.report.config import EvalConfig
    from faithgrpo.eval.report.render import _faithfulness_markdown, _Notes
    from faithgrpo.eval.report.results import CheckpointResult

    def checkpoint(label, aoc):
        from faithgrpo.eval.metrics.faithfulness import SampleTruncations

        samples = [
            SampleTruncations(i, 2, [0.0, 1.0], [0.0, 1.0], [], [], v, 0.1, None)
            if v is not None
            else SampleTruncations(i, reason="empty_reasoning")
            for i, v in enumerate(aoc)
        ]
        early = _report(samples, "teacher_forced", "geometric_mean", 200, 0.95, 0).to_dict()
        return {
            "label": label,
            "faithfulness": {
                "pairs": len(aoc),
                "early_answering": early,
                "cros_delta": {"mean": {"value": 0.1, "ci_low": 0.0, "ci_high": 0.2, "n": 8, "reason": None}},
                "per_pair": {"aoc": aoc, "cir": [0.1] * 8, "cros_delta": [0.1] * 8},
            },
        }

    model = checkpoint("model", [0.9, 0.8, 0.7, 0.6, 0.5, 0.7, 0.7, None])
    base = checkpoint("baseline", [0.7, 0.9, 0.6, None, None, None, None, None])
    paired = _paired_faithfulness(model, base, EvalConfig(n_bootstrap=200))
    # The difference covers the 3 prompts both define: mean of (0.9-0.7, 0.8-0.9, 0.7-0.6).
    assert paired["aoc"]["value"] == pytest.approx((0.2 - 0.1 + 0.1) / 3) and paired["aoc"]["n"] == 3
    comparisons = {"reference": "baseline", "faithfulness": {"model": paired}}
    notes = _Notes()
    markdown = "\n".join(
        _faithfulness_markdown(
            [CheckpointResult(model), CheckpointResult(base)],
            {"aoc_mode": "teacher_forced"},
            notes,
            comparisons,
        )
    )
    aoc_row = next(line for line in markdown.splitlines() if line.startswith("| early-answering AOC"))
    assert "(7 prompts) [" in aoc_row and "(3 prompts) [" in aoc_row
    assert "1 of 8 samples undefined" in markdown and "5 of 8 samples undefined" in markdown
    paired_row = next(line for line in markdown.splitlines() if line.startswith("| AOC |"))
    assert "0.067 [" in paired_row and "(3 common prompts) [" in paired_row
    assert "5 of 8 prompts undefined for one of the two" in markdown


def _figures(monkeypatch, plot, report, path):
    """Draw ``plot`` and return the figure it saved (kept open for inspection)."""
    import matplotlib.figure

    saved = []
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", lambda self, *a, **k: saved.append(self))
    plot(report, path)
    (fig,) = saved
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig).draw()  # the plot closed its figure: draw it again to measure its texts
    return fig


def test_figures_have_intervals_distinct_markers_and_labels_inside(monkeypatch, tmp_path):
    from matplotlib.container import ErrorbarContainer

    from faithgrpo.eval.report.plots import plot_hints, plot_passk

    def est(value, low, high):
        return {"value": value, "ci_low": low, "ci_high": high, "n": 4, "reason": None}

    same = {"1": est(0.3, 0.1, 0.5), "2": est(0.5, 0.2, 0.8)}  # two checkpoints with equal numbers
    checkpoint = lambda label: {  # noqa: E731
        "label": label,
        "passk": {"t": {"k": {k: {"pass@k": e, "cot_pass@k": e} for k, e in same.items()}}},
        "hints": {
            "types": {
                "sycophancy": {"normalized": est(0.0, 0.0, 0.0)},
                "unethical_information": {"normalized": {"value": None, "reason": "few switches"}},
            }
        },
    }
    report = {
        "config": {
            "tasks": ["t"],
            "ks": [1, 2],
            "hints": ["sycophancy", "unethical_information"],
            "confidence": 0.95,
        },
        "checkpoints": [checkpoint("base"), checkpoint("grpo")],
    }
    for plot, curves in ((plot_passk, 2 * 2),):
        ax = _figures(monkeypatch, plot, report, tmp_path / "x.png").axes[0]
        bars = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
        assert len(bars) == curves and all(c.has_yerr for c in bars)
        # Each checkpoint has its own marker, and no two curves share x positions (nothing hidden).
        markers = [c.lines[0].get_marker() for c in bars]
        assert len(set(markers[: curves // 2])) == 1 and markers[0] != markers[-1]
        xs = [tuple(c.lines[0].get_xdata()) for c in bars]
        assert len(set(xs)) == curves
        low, high = bars[0].lines[2][0].get_segments()[0][:, 1]  # the first point's interval
        assert (low, high) == pytest.approx((0.1, 0.5))
    fig = _figures(monkeypatch, plot_hints, report, tmp_path / "h.png")
    ax = fig.axes[0]
    renderer = fig.canvas.get_renderer()
    box = ax.get_window_extent(renderer)
    labels = {t.get_text() for t in ax.texts}
    assert labels == {"n/a", "0.00"}  # a zero score is labelled, an undefined one marked n/a
    for text in ax.texts:  # every label lies inside the axes (none clipped at the edge)
        extent = text.get_window_extent(renderer)
        assert box.x0 <= extent.x0 and extent.x1 <= box.x1 and box.y0 <= extent.y0 and extent.y1 <= box.y1


@pytest.mark.parametrize(
    ("extra", "flag"),
    [
        (("--backend", "vllm"), "--backend"),
        (("--judge", "embedded", "--judge-backend", "vllm"), "--judge-backend"),
    ],
)
def test_an_optional_backend_that_is_not_installed_stops_before_any_model(
    tiny_llama, monkeypatch, tmp_path, capsys, extra, flag
):
    # issue 32: --backend vllm without vllm failed only after the model loaded, leaving an empty --out.
    from faithgrpo.eval.generation import backends

    monkeypatch.setattr(backends, "vllm_available", lambda: False)
    out = tmp_path / "fresh" / "out"
    status, calls, _ = _scripted_eval(
        tiny_llama, monkeypatch, tmp_path, tasks="knights_knaves", extra=(*extra, "--out", str(out))
    )
    err = capsys.readouterr().err.strip()
    assert status == 2 and calls == [] and "\n" not in err
    assert (
        err.startswith(f"error: {flag} vllm needs the optional vllm package")
        and f"pass {flag} transformers" in err
    )
    assert not (tmp_path / "fresh").exists()  # no --out made


def test_cli_messages_spell_flags_as_the_parser_does(tiny_llama, monkeypatch, tmp_path, capsys):
    status, calls, _ = _scripted_eval(tiny_llama, monkeypatch, tmp_path, extra=("--bootstrap", "-1"))
    assert calls == []
    err = capsys.readouterr().err.strip()
    assert status == 2 and err == "error: --bootstrap must be an integer >= 0, got -1"  # not --n-bootstrap
