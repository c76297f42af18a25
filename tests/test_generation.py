"""Generation backend: seeded sampling on tiny models, adapters, and the JSONL completions cache."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

from faithgrpo.eval.generation.backends import generate_completions, vllm_available
from faithgrpo.eval.generation.cache import CacheError, CompletionRecord, read_completions, write_completions
from faithgrpo.eval.generation.checkpoints import AdapterMismatchError, load_checkpoint
from faithgrpo.eval.generation.settings import GenerationStats, SamplingSettings, prompt_ids
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
    from faithgrpo.eval.generation import backends

    model, tokenizer = request.getfixturevalue(fixture)
    shared_used = []
    original = backends._shared_prompt_cache

    def spy(*args):
        extra = original(*args)
        shared_used.append(bool(extra))
        return extra

    monkeypatch.setattr(backends, "_shared_prompt_cache", spy)
    # G = 3 shares one prefill per prompt; G = 1 has nothing to share and runs plain generate.
    greedy = SamplingSettings(num_samples=3, temperature=0.0, max_new_tokens=8, batch_size=9)
    kw = dict(
        progress=False, engine="generate"
    )  # the model.generate path (the decode engine prefills its own way)
    shared, _ = generate_completions(model, tokenizer, PROMPTS, greedy, **kw)
    plain, _ = generate_completions(model, tokenizer, PROMPTS, replace(greedy, num_samples=1), **kw)
    assert shared_used == [True, False]  # the shared path really ran for G = 3, and only there
    for many, one in zip(shared, plain):
        assert many.completions == one.completions * 3


def test_chat_template_applied_to_conversational_prompts(tiny_tok):
    ids = prompt_ids(tiny_tok, PROMPTS[1])
    text = tiny_tok.decode(ids)
    assert text == "<|im_start|>user\nIs U a confounder of X and Y?<|im_end|>\n<|im_start|>assistant\n"
    assert tiny_tok.decode(prompt_ids(tiny_tok, "2 + 2 =")) == "2 + 2 ="
    with pytest.raises(TypeError, match="string or a list of chat messages"):
        prompt_ids(tiny_tok, 42)


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
    ids = torch.tensor([prompt_ids(tokenizer, PROMPTS[1])])
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


# --------------------------------------------------------------------------- caches follow content


def test_cache_refuses_completions_of_overwritten_weights_and_edited_prompts(tmp_path, tiny_llama_path):
    import shutil

    from faithgrpo.eval.generation.backends import cached_generate
    from faithgrpo.eval.generation.cache import checkpoint_fingerprint
    from faithgrpo.eval.generation.checkpoints import load_checkpoint
    from faithgrpo.testing import save_tiny_causal_lm

    model_dir = tmp_path / "model"
    shutil.copytree(tiny_llama_path, model_dir)
    settings = SamplingSettings(num_samples=2, max_new_tokens=3, batch_size=4)
    prompts, ids = ["2 + 2 =", "3 + 3 ="], ["a", "b"]
    cache = tmp_path / "completions.jsonl"
    fingerprint = checkpoint_fingerprint(model_dir)
    assert fingerprint == checkpoint_fingerprint(model_dir)  # stable while nothing changes

    def run(fp, these_prompts=prompts):
        meta = {"model": str(model_dir), "adapter": None, "weights": fp}
        load = lambda: load_checkpoint(model_dir)  # noqa: E731
        return cached_generate(cache, load, these_prompts, ids, settings, meta, progress=False)

    assert run(fingerprint)[1]["cached"] is False
    assert run(fingerprint)[1]["cached"] is True
    # New weights written to the same path: a new fingerprint, and the old completions are refused.
    save_tiny_causal_lm(model_dir, seed=1)
    changed = checkpoint_fingerprint(model_dir)
    assert changed != fingerprint
    with pytest.raises(CacheError, match="--overwrite"):
        run(changed)
    # Edited prompt texts under the same ids are refused too.
    with pytest.raises(CacheError, match="--overwrite"):
        run(fingerprint, ["2 + 2 = ?", "3 + 3 = ?"])


def _rewrite_middle_keeping_size_and_mtime(path, nbytes=256 * 1024):
    """Flip ``nbytes`` bytes in the middle of ``path``; restore its access and modification times."""
    import os

    before = path.stat()
    start = before.st_size // 2 - nbytes // 2
    with open(path, "r+b") as handle:
        handle.seek(start)
        chunk = handle.read(nbytes)
        handle.seek(start)
        handle.write(bytes(b ^ 0xFF for b in chunk))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # as cp -p, rsync -t or a restore do
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    return start


def test_cache_refuses_weights_changed_in_the_middle_with_size_and_mtime_kept(tmp_path, tiny_llama):
    # issue 32: the fingerprint read only each file's first and last MiB (+ size, mtime), so 256 KiB
    # changed in the middle of a 10 MB weight file with its mtime kept reused the old completions.
    import hashlib
    import os
    import random

    from faithgrpo.eval.generation.backends import cached_generate
    from faithgrpo.eval.generation.cache import weights_fingerprint

    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "config.json").write_text('{"model_type": "llama"}')
    weights = model_dir / "model.safetensors"
    weights.write_bytes(random.Random(0).randbytes(10 * 10**6))
    settings = SamplingSettings(num_samples=2, max_new_tokens=3, batch_size=4)
    cache = tmp_path / "completions.jsonl"
    loads = []

    def run():
        meta = {"model": str(model_dir), "adapter": None, "weights": weights_fingerprint(model_dir)}
        load = lambda: loads.append(1) or tiny_llama  # noqa: E731 (the weights on disk are not a model)
        return cached_generate(
            cache, load, ["2 + 2 =", "3 + 3 ="], ["a", "b"], settings, meta, progress=False
        )

    assert run()[1]["cached"] is False
    assert run()[1]["cached"] is True and len(loads) == 1
    # Only touched: the same content, so the same completions (a fingerprint of content, not of times).
    os.utime(weights, ns=(10**18, 10**18))
    assert run()[1]["cached"] is True
    start = _rewrite_middle_keeping_size_and_mtime(weights)
    assert start > 4 * 2**20 and weights.stat().st_size - start > 4 * 2**20  # far from both edges
    files = weights_fingerprint(model_dir)["model"]["files"]
    assert files["model.safetensors"] == hashlib.sha256(weights.read_bytes()).hexdigest()
    assert files["config.json"] == hashlib.sha256((model_dir / "config.json").read_bytes()).hexdigest()
    with pytest.raises(CacheError) as refused:
        run()
    message = str(refused.value)
    assert "other weights (model " in message and "model.safetensors has other content" in message
    assert "config.json" not in message and "--overwrite" in message and len(loads) == 1


def test_weight_files_are_read_once_per_memo(tmp_path, monkeypatch):
    from faithgrpo.eval.generation import cache

    for name in ("a.safetensors", "tokenizer.json", "notes.md"):
        (tmp_path / name).write_bytes(name.encode())
    reads = []
    real = cache.file_sha256
    monkeypatch.setattr(cache, "file_sha256", lambda path: reads.append(path.name) or real(path))
    memo = {}
    first = cache.weights_fingerprint(tmp_path, memo=memo)
    assert cache.weights_fingerprint(tmp_path, tmp_path, memo=memo)["adapter"] == first["model"]
    assert sorted(reads) == ["a.safetensors", "tokenizer.json"]  # each once; notes.md is no weight file
    cache.weights_fingerprint(tmp_path)  # no memo: read again
    assert len(reads) == 4


def test_weights_change_messages_name_the_files():
    from faithgrpo.eval.generation.cache import describe_weights_change

    h = lambda c: c * 64  # noqa: E731
    old = {"model": {"source": "/m", "files": {"w.safetensors": h("a"), "gone.json": h("b")}}}
    new = {
        "model": {"source": "/m", "files": {"w.safetensors": h("c"), "new.json": h("d")}},
        "adapter": {"source": "/ad", "files": {}},
    }
    text = describe_weights_change(old, new)
    assert text == (
        "model /m: gone.json is gone; model /m: new.json is new; model /m: w.safetensors has other content "
        "(sha256 aaaaaaaaaaaa... then, cccccccccccc... now); adapter /ad added"
    )
    assert "older faithgrpo" in describe_weights_change("0123456789abcdef", new)


def test_fingerprint_follows_the_adapter_files(tmp_path, tiny_llama_path):
    from faithgrpo.eval.generation.cache import checkpoint_fingerprint

    adapter = tmp_path / "adapter"
    _save_adapter(tiny_llama_path, adapter)
    before = checkpoint_fingerprint(tiny_llama_path, adapter)
    assert before != checkpoint_fingerprint(tiny_llama_path)
    weights = adapter / "adapter_model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1  # one flipped bit in the last MiB
    weights.write_bytes(bytes(data))
    assert checkpoint_fingerprint(tiny_llama_path, adapter) != before


# --------------------------------------------------------------------------- the vLLM path (plumbing)


def _fake_vllm(monkeypatch):
    """A stand-in ``vllm`` package recording what the backend passes to it (vLLM is not installed here)."""
    import sys
    import types
    from types import SimpleNamespace

    built, calls = [], []

    class LLM:
        def __init__(self, model, seed=0, enable_lora=False):
            built.append((model, enable_lora))

        def generate(self, requests, params, use_tqdm=False, lora_request=None):
            calls.append((requests, params, lora_request))
            return [
                SimpleNamespace(
                    outputs=[SimpleNamespace(text=f"out{j}", token_ids=[1, 2]) for j in range(p.n)]
                )
                for p in params
            ]

    class SamplingParams:
        def __init__(self, **kwargs):
            self.__dict__.update(kwargs)

    class LoRARequest:
        def __init__(self, name, index, path):
            self.path = path

    vllm = types.ModuleType("vllm")
    vllm.LLM, vllm.SamplingParams = LLM, SamplingParams
    lora = types.ModuleType("vllm.lora")
    request = types.ModuleType("vllm.lora.request")
    request.LoRARequest = LoRARequest
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.lora", lora)
    monkeypatch.setitem(sys.modules, "vllm.lora.request", request)
    monkeypatch.setattr("faithgrpo.eval.generation.backends.vllm_available", lambda: True)
    monkeypatch.setattr("faithgrpo.eval.generation.backends._VLLM_ENGINES", {})
    return built, calls


def test_vllm_backend_plumbing_one_engine_token_ids_and_cache_key(tmp_path, monkeypatch, tiny_llama_path):
    from transformers import AutoTokenizer

    from faithgrpo.eval.generation.backends import cached_generate
    from faithgrpo.eval.generation.settings import prompt_ids

    built, calls = _fake_vllm(monkeypatch)
    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_path)
    chat = [{"role": "user", "content": "2 + 2?"}]
    settings = SamplingSettings(num_samples=3, max_new_tokens=4)
    records, _ = generate_completions(
        str(tiny_llama_path), tokenizer, ["plain", chat], settings, backend="vllm", progress=False
    )
    generate_completions(str(tiny_llama_path), tokenizer, ["again"], settings, backend="vllm", progress=False)
    assert built == [(str(tiny_llama_path), False)]  # one engine for both calls
    requests = calls[0][0]
    # Token ids exactly as the transformers backend builds them: the chat template's BOS is not doubled.
    assert requests[1]["prompt_token_ids"] == prompt_ids(tokenizer, chat)
    text = tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
    assert requests[1]["prompt_token_ids"] == tokenizer(text, add_special_tokens=False)["input_ids"]
    assert [len(r.completions) for r in records] == [3, 3] and records[0].settings["backend"] == "vllm"
    # The cache is keyed by backend: completions made with vLLM are not reused for transformers.
    cache = tmp_path / "c.jsonl"
    meta = {"model": "m", "adapter": None}
    load = lambda: (str(tiny_llama_path), tokenizer)  # noqa: E731
    cached_generate(cache, load, ["plain"], ["a"], settings, meta, backend="vllm", progress=False)
    assert cached_generate(cache, load, ["plain"], ["a"], settings, meta, backend="vllm", progress=False)[1][
        "cached"
    ]
    with pytest.raises(CacheError, match="backend='vllm'"):
        cached_generate(cache, load, ["plain"], ["a"], settings, meta, backend="transformers", progress=False)


def test_vllm_engine_resolves_embedded_and_a_loaded_model(monkeypatch, tiny_llama_path):
    from transformers import AutoModelForCausalLM

    from faithgrpo.eval.generation.backends import vllm_engine
    from faithgrpo.models import resolve

    built, _ = _fake_vllm(monkeypatch)
    monkeypatch.setattr("faithgrpo.models.embedded_model_path", lambda: tiny_llama_path)
    vllm_engine("embedded")
    assert built == [(str(tiny_llama_path), False)] and resolve("embedded") == str(tiny_llama_path)
    model = AutoModelForCausalLM.from_pretrained(tiny_llama_path)
    vllm_engine(model, enable_lora=True)  # a loaded transformers model: its checkpoint path
    assert built[-1] == (str(tiny_llama_path), True)


def test_cached_generate_passes_the_engine_which_is_recorded_not_keyed(tmp_path, tiny_llama):
    from faithgrpo.eval.generation.backends import cached_generate

    settings = SamplingSettings(num_samples=2, max_new_tokens=3)
    load = lambda: tiny_llama  # noqa: E731
    args = (["2 + 2 ="], ["a"], settings, {"model": "tiny"})
    records, stats = cached_generate(tmp_path / "g.jsonl", load, *args, progress=False, engine="generate")
    assert records[0].settings["engine"] == "generate" and not stats["cached"]
    cached = cached_generate(tmp_path / "g.jsonl", load, *args, progress=False)[1]
    # A cached run names the engine that made its completions (the report showed "—").
    assert cached["cached"] and (cached["engine"], cached["backend"]) == ("generate", "transformers")
    records, _ = cached_generate(tmp_path / "d.jsonl", load, *args, progress=False)
    assert records[0].settings["engine"] == "decode"  # auto: the decode loop for a Llama model
