"""Generation backend: seeded sampling on tiny models, adapters, and the JSONL completions cache."""

from __future__ import annotations

import json
from dataclasses import asdict, replace

import pytest
import torch

from faithgrpo.eval.generation import (
    AdapterMismatchError,
    CacheError,
    CompletionRecord,
    GenerationStats,
    SamplingSettings,
    _prompt_ids,
    generate_completions,
    load_checkpoint,
    read_completions,
    vllm_available,
    write_completions,
)
from faithgrpo.testing import save_tiny_causal_lm, tiny_causal_lm

PROMPTS = [
    "2 + 2 =",
    [{"role": "user", "content": "Is U a confounder of X and Y?"}],
    [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Knights always tell the truth."},
    ],
]


def test_g_completions_per_prompt_and_settings_recorded(tiny_llama):
    model, tokenizer = tiny_llama
    settings = SamplingSettings(num_samples=3, max_new_tokens=6, batch_size=4, seed=1)
    records, stats = generate_completions(
        model, tokenizer, PROMPTS, settings, ids=["a", "b", "c"], metadata={"model": "tiny"}, progress=False
    )
    assert [r.id for r in records] == ["a", "b", "c"]
    assert records[1].prompt == PROMPTS[1]
    for record in records:
        assert len(record.completions) == 3 and all(isinstance(c, str) for c in record.completions)
        assert len(record.num_tokens) == 3 and all(1 <= n <= 6 for n in record.num_tokens)
        assert record.settings["num_samples"] == 3 and record.settings["model"] == "tiny"
        assert record.settings["backend"] == "transformers"
    assert stats.completions == 9 and stats.prompts == 3
    assert stats.new_tokens == sum(sum(r.num_tokens) for r in records)
    assert stats.tokens_per_second is not None and stats.tokens_per_second > 0


def test_seeded_determinism_and_caller_rng_untouched(tiny_llama):
    model, tokenizer = tiny_llama
    settings = SamplingSettings(num_samples=2, max_new_tokens=8, batch_size=3, seed=7)
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    first, _ = generate_completions(model, tokenizer, PROMPTS, settings, progress=False)
    after = torch.rand(1)
    assert torch.equal(before, after)  # generation forks the RNG instead of consuming the caller's
    second, _ = generate_completions(model, tokenizer, PROMPTS, settings, progress=False)
    assert [r.completions for r in first] == [r.completions for r in second]
    other, _ = generate_completions(model, tokenizer, PROMPTS, replace(settings, seed=8), progress=False)
    assert [r.completions for r in other] != [r.completions for r in first]


def test_left_padded_batches_match_unbatched_greedy(tiny_qwen2):
    model, tokenizer = tiny_qwen2
    greedy = SamplingSettings(num_samples=1, temperature=0.0, max_new_tokens=8, batch_size=8)
    batched, _ = generate_completions(model, tokenizer, PROMPTS, greedy, progress=False)
    for i, prompt in enumerate(PROMPTS):
        alone, _ = generate_completions(
            model, tokenizer, [prompt], replace(greedy, batch_size=1), progress=False
        )
        assert alone[0].completions == batched[i].completions


@pytest.mark.parametrize("fixture", ["tiny_llama", "tiny_qwen2"])
def test_shared_prompt_prefill_matches_plain_generation(request, fixture, monkeypatch):
    from faithgrpo.eval import generation

    model, tokenizer = request.getfixturevalue(fixture)
    shared_used = []
    original = generation._shared_prompt_cache

    def spy(*args):
        extra = original(*args)
        shared_used.append(bool(extra))
        return extra

    monkeypatch.setattr(generation, "_shared_prompt_cache", spy)
    # G = 3 shares one prefill per prompt; G = 1 has nothing to share and runs plain generate.
    greedy = SamplingSettings(num_samples=3, temperature=0.0, max_new_tokens=8, batch_size=9)
    shared, _ = generate_completions(model, tokenizer, PROMPTS, greedy, progress=False)
    plain, _ = generate_completions(model, tokenizer, PROMPTS, replace(greedy, num_samples=1), progress=False)
    assert shared_used == [True, False]  # the shared path really ran for G = 3, and only there
    for many, one in zip(shared, plain):
        assert many.completions == one.completions * 3


def test_chat_template_applied_to_conversational_prompts(tiny_tok):
    ids = _prompt_ids(tiny_tok, PROMPTS[1])
    text = tiny_tok.decode(ids)
    assert text == "<|im_start|>user\nIs U a confounder of X and Y?<|im_end|>\n<|im_start|>assistant\n"
    assert tiny_tok.decode(_prompt_ids(tiny_tok, "2 + 2 =")) == "2 + 2 ="
    with pytest.raises(TypeError, match="string or a list of chat messages"):
        _prompt_ids(tiny_tok, 42)


def test_bad_arguments(tiny_llama):
    model, tokenizer = tiny_llama
    with pytest.raises(ValueError, match="num_samples"):
        SamplingSettings(num_samples=0)
    with pytest.raises(ValueError, match="top_p"):
        SamplingSettings(top_p=0)
    with pytest.raises(ValueError, match="unique"):
        generate_completions(model, tokenizer, ["a", "b"], ids=["x", "x"], progress=False)
    with pytest.raises(ValueError, match="backend"):
        generate_completions(model, tokenizer, ["a"], backend="tgi", progress=False)


@pytest.mark.skipif(vllm_available(), reason="vLLM installed: the guard does not apply")
def test_vllm_backend_is_guarded(tiny_llama):
    model, tokenizer = tiny_llama
    with pytest.raises(ImportError, match=r"pip install 'faithgrpo\[vllm\]'"):
        generate_completions(model, tokenizer, ["a"], backend="vllm", progress=False)


def test_stats_without_time_are_undefined():
    assert GenerationStats(1, 1, 10, 0.0).tokens_per_second is None
    assert GenerationStats(1, 1, 10, 2.0).to_dict()["tokens_per_second"] == 5.0


# --------------------------------------------------------------------------- cache


def _records(g=2):
    settings = {"num_samples": g, "seed": 0, "model": "tiny"}
    return [
        CompletionRecord("p0", "2 + 2 =", ["4", "5"][:g], [1, 1][:g], settings),
        CompletionRecord("p1", PROMPTS[1], ["<answer>{U}</answer>", "é ∅ ■"][:g], [3, 4][:g], settings),
    ]


def test_cache_round_trip(tmp_path):
    path = write_completions(tmp_path / "sub" / "completions.jsonl", _records())
    assert read_completions(path) == _records()
    assert read_completions(path, expected_settings={"num_samples": 2, "model": "tiny"}) == _records()
    assert not list((tmp_path / "sub").glob(".completions.jsonl.*"))  # no temporary file left behind


def test_generated_records_round_trip(tmp_path, tiny_llama):
    model, tokenizer = tiny_llama
    records, _ = generate_completions(
        model, tokenizer, PROMPTS[:2], SamplingSettings(num_samples=2, max_new_tokens=4), progress=False
    )
    assert read_completions(write_completions(tmp_path / "c.jsonl", records)) == records


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda lines: "", "is empty"),
        (lambda lines: "\n\n", "is empty"),
        (lambda lines: lines[0] + "\n" + lines[1][: len(lines[1]) // 2], "truncated"),
        (lambda lines: lines[0] + "\n" + lines[1][:-5] + "\n", "line 2 is not valid JSON"),
        (lambda lines: lines[0] + "\n" + lines[0] + "\n", "repeats prompt id 'p0'"),
        (lambda lines: "[1, 2]\n", "not a JSON object"),
        (lambda lines: json.dumps({"id": "x", "prompt": "p"}) + "\n", "'completions'"),
    ],
)
def test_bad_cache_files_name_the_fix(tmp_path, mutate, match):
    good = write_completions(tmp_path / "good.jsonl", _records())
    lines = good.read_text().splitlines()
    path = _write(tmp_path / "bad.jsonl", mutate(lines))
    with pytest.raises(CacheError, match=match) as info:
        read_completions(path)
    assert "generate" in str(info.value)


def test_cache_consistency_checks(tmp_path):
    records = _records()
    records[1].completions = ["only one"]
    records[1].num_tokens = [1]
    with pytest.raises(CacheError, match="1 completions but num_samples=2"):
        read_completions(write_completions(tmp_path / "a.jsonl", records))
    records = _records()
    records[1].settings = {**records[1].settings, "seed": 1}
    with pytest.raises(CacheError, match="other settings than line 1"):
        read_completions(write_completions(tmp_path / "b.jsonl", records))
    path = write_completions(tmp_path / "c.jsonl", _records())
    with pytest.raises(CacheError, match=r"num_samples=2 \(wanted 8\)"):
        read_completions(path, expected_settings={"num_samples": 8})
    with pytest.raises(CacheError, match="does not exist"):
        read_completions(tmp_path / "missing.jsonl")


# --------------------------------------------------------------------------- checkpoints and adapters


def _save_adapter(base_dir, out_dir, *, record_base=True):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(base_dir)
    torch.manual_seed(0)
    # init_lora_weights=False: random A and B, so the adapter really changes the model.
    config = LoraConfig(
        r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False, task_type="CAUSAL_LM"
    )
    peft_model = get_peft_model(base, config)
    peft_model.save_pretrained(out_dir)
    if not record_base:
        # peft records the base path; an adapter trained elsewhere may carry none (or an uncached hub id).
        config_file = out_dir / "adapter_config.json"
        config = json.loads(config_file.read_text())
        config["base_model_name_or_path"] = None
        config_file.write_text(json.dumps(config))
    return peft_model.eval()


def test_load_checkpoint_with_adapter_matches_peft(tmp_path, tiny_llama_path):
    peft_model = _save_adapter(tiny_llama_path, tmp_path / "adapter")
    model, tokenizer = load_checkpoint(str(tiny_llama_path), tmp_path / "adapter", device="cpu")
    base, _ = load_checkpoint(str(tiny_llama_path), device="cpu")
    ids = torch.tensor([_prompt_ids(tokenizer, PROMPTS[1])])
    with torch.inference_mode():
        merged = model(ids).logits
        reference = peft_model(input_ids=ids).logits
        plain = base(ids).logits
    assert torch.allclose(merged, reference, atol=1e-4)
    assert not torch.allclose(merged, plain, atol=1e-3)


def test_adapter_for_another_base_is_a_clear_error(tmp_path, tiny_llama_path):
    _save_adapter(tiny_llama_path, tmp_path / "adapter")
    qwen = save_tiny_causal_lm(tmp_path / "qwen", "qwen2")
    with pytest.raises(AdapterMismatchError, match=r"model_type=llama.*--model"):
        load_checkpoint(str(qwen), tmp_path / "adapter", device="cpu")


def test_adapter_shape_and_depth_mismatch_without_recorded_base(tmp_path, tiny_llama_path):
    _save_adapter(tiny_llama_path, tmp_path / "adapter", record_base=False)
    wide_model, wide_tok = tiny_causal_lm("llama", hidden_size=128)
    wide_model.save_pretrained(tmp_path / "wide")
    wide_tok.save_pretrained(tmp_path / "wide")
    with pytest.raises(AdapterMismatchError, match="does not fit base model"):
        load_checkpoint(str(tmp_path / "wide"), tmp_path / "adapter", device="cpu")
    deep_model, deep_tok = tiny_causal_lm("llama", num_layers=3)
    deep_model.save_pretrained(tmp_path / "deep")
    deep_tok.save_pretrained(tmp_path / "deep")
    # peft itself only warns here (layer 2 gets no adapter weights); we refuse.
    with pytest.raises(AdapterMismatchError, match="not in the adapter"):
        load_checkpoint(str(tmp_path / "deep"), tmp_path / "adapter", device="cpu")


def test_adapter_directory_errors(tmp_path, tiny_llama_path):
    with pytest.raises(ValueError, match="does not exist"):
        load_checkpoint(str(tiny_llama_path), tmp_path / "nope", device="cpu")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"no adapter_config\.json"):
        load_checkpoint(str(tiny_llama_path), tmp_path / "empty", device="cpu")


# --------------------------------------------------------------------------- the eval report from cached completions
# (These exercise eval/report.py and eval/cli.py on top of the generation cache.)


def _scripted_eval(tiny_llama, monkeypatch, tmp_path, **overrides):
    """Run ``faithgrpo eval`` with a scripted generator whose correct/CoT-correct counts are known."""
    import argparse

    from faithgrpo.eval import generation
    from faithgrpo.eval.cli import add_eval_subcommand
    from faithgrpo.eval.hints import build_hint_pairs
    from faithgrpo.eval.report import hint_questions, task_rows
    from faithgrpo.rewards.text import extract_answer
    from faithgrpo.tasks.gold import gold_trace
    from faithgrpo.tasks.knights_knaves import gold_kk_trace

    options = dict(tasks="causal_graph,knights_knaves", samples=4, prompts=3, hint_questions=2, seed=0)
    options.update(overrides)
    tasks = [t for t in options["tasks"].split(",") if t != "chess_openings"]  # an unknown task stays unknown
    rows = {r["id"]: r for t in tasks for r in task_rows(t, options["prompts"], options["seed"])}
    questions = [q for t in tasks for q in hint_questions(t, options["hint_questions"], options["seed"])]
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

    monkeypatch.setattr(generation, "generate_completions", fake_generate)
    monkeypatch.setattr(generation, "load_checkpoint", lambda model, adapter=None, **kw: tiny_llama)
    parser = argparse.ArgumentParser()
    add_eval_subcommand(parser.add_subparsers())
    argv = [
        "eval", "--model", "tiny", "--tasks", options["tasks"], "--k", "1,2,4", "--samples", str(options["samples"]),
        "--prompts", str(options["prompts"]), "--hint-questions", str(options["hint_questions"]), "--min-switched", "1",
        "--faithfulness-pairs", "2", "--bootstrap", "20", "--seed", str(options["seed"]), "--no-progress",
        "--out", str(tmp_path),
    ]  # fmt: skip
    args = parser.parse_args(argv)
    return args.func(args), calls, rows


@pytest.mark.slow
def test_eval_report_numbers_from_scripted_completions(tiny_llama, monkeypatch, tmp_path):
    from faithgrpo.eval.passk import cot_pass_at_k, pass_at_k

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
    types = section["hints"]["types"]
    assert types["sycophancy"]["raw"]["value"] == 1.0 and types["sycophancy"]["normalized"]["value"] == 1.0
    assert types["consistency"]["raw"]["value"] == 0.0 and types["consistency"]["n_switched"] == 4
    assert types["metadata"]["raw"]["value"] is None
    assert "not enough switched pairs" in types["metadata"]["raw"]["reason"]
    best = section["best_of_k"]["causal_graph"]
    assert best["prompts"] == 3 and set(best["k"]) == {"1", "2", "4"}
    # With all G samples CALVER best-of-K picks a gold trace where a prompt has one (prompts 1, 2); prompt 0
    # has none, every completion ties at the lowest score and the earliest (the valid answer-only one) wins.
    assert best["k"]["4"]["calver"]["valid"]["value"] == 1.0
    assert best["k"]["4"]["calver"]["exact"]["value"] <= 1.0
    assert "knights_knaves" not in section["best_of_k"]
    faith = section["faithfulness"]
    assert faith["pairs"] == 2
    assert faith["cros_delta"]["n"] == 2
    cir_value = faith["early_answering"]["cir"]["value"]
    assert cir_value is None or 0.0 <= cir_value <= 1.0
    markdown = (tmp_path / "report.md").read_text()
    assert "### knights_knaves" in markdown and "| sycophancy | 4/4 | 1.000" in markdown
    for png in ("passk.png", "hints.png", "best_of_k.png"):
        assert (tmp_path / png).stat().st_size > 0
    assert (tmp_path / "model" / "completions_causal_graph.jsonl").is_file()

    # A second run recomputes every metric from the cache, without generating.
    calls.clear()
    status, calls, _ = _scripted_eval(tiny_llama, monkeypatch, tmp_path)
    assert status == 0 and calls == []
    again = json.loads((tmp_path / "report.json").read_text())["checkpoints"][0]
    assert again["passk"] == section["passk"] and again["hints"]["types"] == section["hints"]["types"]


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
