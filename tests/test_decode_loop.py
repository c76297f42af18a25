"""The "decode" generation engine (eval/generation/decoding.py) against ``model.generate`` and transformers' warpers."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from faithgrpo.eval.generation.backends import generate_completions
from faithgrpo.eval.generation.decoding import DecodeEngine, unsupported_reason
from faithgrpo.eval.generation.sampling import next_token_scores, sample_tokens
from faithgrpo.eval.generation.settings import SamplingSettings, prompt_ids
from faithgrpo.testing import tiny_causal_lm

PROMPTS = [
    "2 + 2 =",
    [{"role": "user", "content": "Is U a confounder of X and Y?"}],
    [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Knights always tell the truth."},
    ],
    "GRAPH: A -> B; B -> C; A <-> C\nQUERY: backdoor_set(treatment=X, outcome=Y)",
    "Alice says Bob is a knave.",
]


def _model(arch, eos_positions=()):
    """A fresh tiny model; ``eos_positions`` = ((prompt, step), ...) makes the greedy token there an eos."""
    model, tokenizer = tiny_causal_lm(arch)
    if eos_positions:
        settings = SamplingSettings(num_samples=1, temperature=0.0, max_new_tokens=12, batch_size=8)
        greedy = []
        for prompt in PROMPTS:
            ids = torch.tensor([prompt_ids(tokenizer, prompt)])
            out = model.generate(
                input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=12
            )
            greedy.append(out[0, ids.shape[1] :].tolist())
        extra = {greedy[p][s] for p, s in eos_positions}
        model.generation_config.eos_token_id = sorted({tokenizer.eos_token_id, *extra})
        del settings
    return model, tokenizer


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
@pytest.mark.parametrize("batch_size", [1, 3, 16])
def test_greedy_matches_generate_token_for_token(arch, batch_size):
    # Extra eos tokens stop rows at different steps (one at its very first token), so slots are
    # refilled and compacted while others keep running.
    model, tokenizer = _model(arch, eos_positions=((0, 4), (2, 0), (3, 7)))
    greedy = SamplingSettings(num_samples=2, temperature=0.0, max_new_tokens=12, batch_size=batch_size)
    reference, _ = generate_completions(model, tokenizer, PROMPTS, greedy, progress=False, engine="generate")
    decoded, stats = generate_completions(model, tokenizer, PROMPTS, greedy, progress=False, engine="decode")
    assert [r.completions for r in decoded] == [r.completions for r in reference]
    assert [r.num_tokens for r in decoded] == [r.num_tokens for r in reference]
    counts = {n for r in decoded for n in r.num_tokens}
    assert 1 in counts and len(counts) >= 3  # eos at the first token, and rows stopping at other steps
    assert decoded[0].settings["engine"] == "decode" and reference[0].settings["engine"] == "generate"
    assert stats.new_tokens == sum(sum(r.num_tokens) for r in decoded)
    assert stats.to_dict()["engine"] == "decode" and stats.completions == 2 * len(PROMPTS)


SHARED = "You check causal graphs. Answer inside <answer> ... </answer>, after a short derivation."
PREFIXED = [
    [{"role": "system", "content": SHARED}, {"role": "user", "content": question}]
    for question in ("Is U a confounder of X and Y?", "GRAPH: A -> B; B -> C", "QUERY: backdoor_set(X, Y)")
]


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_shared_prompt_prefix_is_prefilled_once_and_changes_nothing(arch, monkeypatch):
    from faithgrpo.eval.generation import decoding

    model, tokenizer = tiny_causal_lm(arch)
    encoded = [prompt_ids(tokenizer, p) for p in PREFIXED]
    shared = decoding._common_prefix(encoded)
    assert len(shared) >= decoding.MIN_SHARED_PREFIX and all(len(shared) < len(e) for e in encoded)
    calls = []
    original = decoding.DecodeEngine.prefill

    def spy(self, ids, past=None):
        calls.append((len(ids), None if past is None else past[0][0].shape[1]))
        return original(self, ids, past)

    monkeypatch.setattr(decoding.DecodeEngine, "prefill", spy)
    greedy = SamplingSettings(num_samples=2, temperature=0.0, max_new_tokens=10, batch_size=3)
    decoded, _ = generate_completions(model, tokenizer, PREFIXED, greedy, progress=False, engine="decode")
    reference, _ = generate_completions(model, tokenizer, PREFIXED, greedy, progress=False, engine="generate")
    assert calls == [(len(shared), None)] + [(len(e), len(shared)) for e in encoded]
    assert [r.completions for r in decoded] == [r.completions for r in reference]
    assert [r.num_tokens for r in decoded] == [r.num_tokens for r in reference]


def test_common_prefix_leaves_the_last_prompt_token():
    from faithgrpo.eval.generation.decoding import _common_prefix

    assert _common_prefix([[1, 2, 3], [1, 2, 3, 4]]) == [1, 2]
    assert _common_prefix([[1, 2, 3], [1, 5]]) == [1]
    assert _common_prefix([[7], [7]]) == []


@pytest.mark.parametrize("engine", ["decode", "generate"])
def test_same_seed_same_tokens_at_any_ambient_thread_count_or_load(tiny_llama, monkeypatch, engine):
    # issue 32: the engine used to pick 1 thread when the load average reached the core count, and
    # a prefill at 1 thread differs from one at 2 by float rounding, enough to flip sampled tokens.
    # Now the count is a setting: the machine's own count (here 1 or 2) and its load change nothing,
    # and every model computation runs at the setting's count.
    import os

    from faithgrpo.eval.generation import decoding

    model, tokenizer = tiny_llama
    settings = SamplingSettings(
        num_samples=2, temperature=1.0, max_new_tokens=12, batch_size=3, seed=2, threads=2
    )
    seen = []
    original_forward = type(model).forward

    def spy_forward(self, *args, **kwargs):
        seen.append(torch.get_num_threads())
        return original_forward(self, *args, **kwargs)

    for name in ("prefill", "step"):
        real = getattr(decoding.DecodeEngine, name)
        monkeypatch.setattr(
            decoding.DecodeEngine,
            name,
            lambda self, *a, _real=real: seen.append(torch.get_num_threads()) or _real(self, *a),
        )
    monkeypatch.setattr(type(model), "forward", spy_forward)
    before = torch.get_num_threads()
    runs = {}
    try:
        for ambient in (1, 2):
            for load in (0.0, 64.0):  # an idle machine, and one far busier than its cores
                monkeypatch.setattr(os, "getloadavg", lambda load=load: (load, load, load))
                torch.set_num_threads(ambient)
                records, _ = generate_completions(
                    model, tokenizer, PROMPTS, settings, progress=False, engine=engine
                )
                assert torch.get_num_threads() == ambient  # the caller's count is restored
                runs[ambient, load] = [(r.completions, r.num_tokens) for r in records]
    finally:
        torch.set_num_threads(before)
    first = runs[1, 0.0]
    assert all(run == first for run in runs.values()), "completions changed with the machine's threads"
    assert len({c for completions, _ in first for c in completions}) > len(PROMPTS)  # really sampled
    assert seen and set(seen) == {2}  # every forward, prefill and step ran at the setting's count
    assert records[0].settings["threads"] == 2  # recorded with the completions (the cache key)


def test_threads_setting_is_validated():
    for bad in (0, -1, 1.5, True, None):
        with pytest.raises(ValueError, match="threads must be a positive int"):
            SamplingSettings(threads=bad)


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_step_logits_match_a_full_forward(arch):
    model, tokenizer = tiny_causal_lm(arch)
    first, second = (prompt_ids(tokenizer, p) for p in PROMPTS[:2])
    prompts = [first, second, first + prompt_ids(tokenizer, " and more")]  # the third extends the first
    engine = DecodeEngine(model, slots=5)
    cache = engine.cache
    cache.reserve(10)
    seqs = []
    with torch.inference_mode():
        caches, slots = [], []
        for index, ids in enumerate(prompts):
            # The third prompt is prefilled from the first one's cache (a shared-prefix prefill).
            logits, kv = engine.prefill(ids, caches[0] if index == 2 else None)
            caches.append(kv)
            full = model(torch.tensor([ids])).logits[0, -1]
            torch.testing.assert_close(logits, full, atol=1e-4, rtol=1e-4)
            slots.append(cache.add_prompt(kv, len(ids)))
        assert slots == [0, 1, 2]
        # Rows 0, 2 and 3 share prompt 0's keys/values; row 1 reads prompt 1, row 4 prompt 2.
        for row, prompt in enumerate([0, 1, 0, 0, 2]):
            cache.start_row(row, slots[prompt])
            seqs.append(list(prompts[prompt]))
        generator = torch.Generator().manual_seed(0)
        for step in range(8):
            if step == 3:  # row 0 finishes: the last row moves into its slot, as in decode_rows
                cache.move_row(len(seqs) - 1, 0)
                seqs = [seqs[-1], *seqs[1:-1]]
            if step == 5:  # prompt 1's row finishes and its prompt slot is reused by a new prompt
                cache.move_row(len(seqs) - 1, 1)
                seqs = [seqs[0], seqs[-1], *seqs[2:-1]]
                cache.drop_prompt(slots[1])
                fresh = prompt_ids(tokenizer, PROMPTS[3])
                logits, kv = engine.prefill(fresh)
                assert cache.add_prompt(kv, len(fresh)) == slots[1]  # the lowest free slot
                cache.start_row(len(seqs), slots[1])
                seqs.append(list(fresh))
            tokens = torch.randint(0, len(tokenizer), (len(seqs),), generator=generator).tolist()
            logits = engine.step(tokens)
            for row, token in enumerate(tokens):
                seqs[row].append(token)
                full = model(torch.tensor([seqs[row]])).logits[0, -1]
                torch.testing.assert_close(logits[row], full, atol=1e-4, rtol=1e-4)


def test_sampling_is_seeded_per_row_and_independent_of_batching(tiny_llama):
    model, tokenizer = tiny_llama
    settings = SamplingSettings(
        num_samples=3, temperature=1.0, top_p=0.9, max_new_tokens=10, seed=5, batch_size=4
    )
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    first, _ = generate_completions(model, tokenizer, PROMPTS, settings, progress=False, engine="decode")
    assert torch.equal(before, torch.rand(1))  # the caller's RNG is not consumed
    for batch_size in (1, 7, 15):
        again, _ = generate_completions(
            model,
            tokenizer,
            PROMPTS,
            replace(settings, batch_size=batch_size),
            progress=False,
            engine="decode",
        )
        assert [r.completions for r in again] == [r.completions for r in first]
    other, _ = generate_completions(
        model, tokenizer, PROMPTS, replace(settings, seed=6), progress=False, engine="decode"
    )
    assert [r.completions for r in other] != [r.completions for r in first]
    assert len({c for r in first for c in r.completions}) > len(PROMPTS)  # samples of a prompt differ


@pytest.mark.parametrize("temperature", [0.3, 1.0, 1.7])
@pytest.mark.parametrize("top_p", [0.05, 0.5, 0.9, 0.999, 1.0])
def test_scores_match_transformers_temperature_and_top_p(temperature, top_p):
    from transformers.generation.logits_process import TemperatureLogitsWarper, TopPLogitsWarper

    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(6, 40, generator=generator) * 3
    logits[0, :10] = 2.0  # ties
    logits[1] = 0.0  # uniform row
    logits[2, 7] = 50.0  # one dominant token
    scores = TemperatureLogitsWarper(temperature)(None, logits.clone())
    if top_p < 1:
        scores = TopPLogitsWarper(top_p)(None, scores)
    mine = next_token_scores(logits, temperature, top_p)
    assert torch.equal(torch.isinf(mine), torch.isinf(scores))
    torch.testing.assert_close(mine.softmax(-1), scores.softmax(-1), atol=0, rtol=0)


def test_top_p_keeps_the_smallest_nucleus_by_hand():
    logits = torch.tensor([[0.5, 0.3, 0.15, 0.05]]).log()
    kept = lambda p: (~torch.isinf(next_token_scores(logits, 1.0, p))).nonzero()[:, 1].tolist()  # noqa: E731
    assert kept(0.4) == [0]  # the top token alone covers 0.4
    assert kept(0.6) == [0, 1]
    assert kept(0.9) == [0, 1, 2]
    assert kept(0.99) == [0, 1, 2, 3]
    assert kept(1e-9) == [0]  # at least one token stays


@pytest.mark.parametrize(("temperature", "top_p"), [(1.0, 1.0), (0.5, 1.0), (1.5, 0.8)])
def test_sample_frequencies_follow_softmax_over_temperature(temperature, top_p):
    logits = torch.tensor([[2.0, 1.0, 0.5, 0.0, -1.0, -3.0]])
    expected = next_token_scores(logits, temperature, top_p).softmax(-1)[0]
    if top_p == 1.0:
        torch.testing.assert_close(expected, (logits[0] / temperature).softmax(-1))
    n = 20000
    generator = torch.Generator().manual_seed(1)
    draws = sample_tokens(logits.expand(n, -1), temperature, top_p, [generator] * n)
    counts = torch.bincount(torch.tensor(draws), minlength=6).double()
    assert counts[expected == 0].sum() == 0  # tokens outside the nucleus are never drawn
    live = expected > 0
    chi2 = (((counts[live] - n * expected[live]) ** 2) / (n * expected[live])).sum().item()
    # 99.99th percentile of chi-square with <= 5 degrees of freedom is about 25.7.
    assert chi2 < 25.7, (chi2, counts.tolist(), (n * expected).tolist())


def test_sample_frequencies_over_a_full_size_vocabulary():
    # 49,152 tokens (SmolLM2's vocabulary): the float64 cumulative sums keep small probabilities
    generator = torch.Generator().manual_seed(2)
    logits = torch.randn(1, 49152, generator=generator) * 2
    logits[0, :4] = torch.tensor([16.0, 15.0, 13.0, 12.0])  # the other 49,148 tokens: ~3 % together
    probs = logits.softmax(-1)[0].double()
    n, rows = 20000, 1000
    # 1,000 rows a call give the draws of one 20,000-row call (one shared generator, rows in order)
    # and keep this test small on their own: the 20,000-row batch once took the process to 19 GB
    drawn = []
    for _ in range(n // rows):
        drawn += sample_tokens(logits.expand(rows, -1), 1.0, 1.0, [generator] * rows)
    draws = torch.tensor(drawn)
    observed = torch.stack([(draws == t).sum() for t in range(4)] + [(draws >= 4).sum()]).double()
    expected = n * torch.cat([probs[:4], probs[4:].sum()[None]])
    assert expected.min() > 5  # every bucket is large enough for the chi-square approximation
    chi2 = (((observed - expected) ** 2) / expected).sum().item()
    assert chi2 < 23.5, (chi2, observed.tolist(), expected.tolist())  # 99.99th percentile, 4 d.o.f.


@pytest.mark.parametrize(("temperature", "top_p", "shared"), [(1.0, 1.0, True), (0.7, 0.9, False)])
def test_chunked_sampling_draws_what_one_batch_draws(monkeypatch, temperature, top_p, shared):
    # a shared generator catches a chunk order that changes which uniform a row gets; per-row
    # generators (the decode loop's) catch a row paired with another row's generator
    from faithgrpo.eval.generation import sampling

    n, vocab = 50, 1000
    logits = torch.randn(n, vocab, generator=torch.Generator().manual_seed(3)) * 3

    def generators():
        if shared:
            return [torch.Generator().manual_seed(4)] * n
        return [torch.Generator().manual_seed(100 + r) for r in range(n)]

    whole = sample_tokens(logits, temperature, top_p, generators(), chunk_rows=n)
    assert len(set(whole)) > 10  # the rows really draw different tokens
    chunks = []
    real = sampling._sample_rows
    monkeypatch.setattr(sampling, "_sample_rows", lambda x, *a: chunks.append(len(x)) or real(x, *a))
    assert sample_tokens(logits, temperature, top_p, generators(), chunk_rows=7) == whole
    assert chunks == [7] * 7 + [1]
    # the default chunk size comes from CHUNK_BYTES: 8 rows of 1,000 float64 sums here
    chunks.clear()
    monkeypatch.setattr(sampling, "CHUNK_BYTES", 8 * 8 * vocab + 7)
    assert sample_tokens(logits, temperature, top_p, generators()) == whole
    assert chunks == [8] * 6 + [2]


def test_a_uniform_draw_at_the_top_of_the_range_lands_on_the_last_live_token(monkeypatch):
    # u * total can round up to total; the draw must still be a token with non-zero probability
    logits = torch.tensor([[1.0, 2.0, 0.5, -float("inf"), -float("inf")]])
    monkeypatch.setattr(torch, "rand", lambda *a, **k: torch.tensor(1.0, dtype=torch.float64))
    assert sample_tokens(logits, 1.0, 1.0, [torch.Generator()]) == [2]
    monkeypatch.setattr(torch, "rand", lambda *a, **k: torch.tensor(0.0, dtype=torch.float64))
    assert sample_tokens(logits, 1.0, 1.0, [torch.Generator()]) == [0]


def test_greedy_is_argmax():
    logits = torch.tensor([[0.1, 3.0, -1.0], [5.0, 4.0, 4.5]])
    assert sample_tokens(logits, 0.0, 1.0, [None, None]) == [1, 0]


def test_unsupported_models_fall_back_to_generate():
    model, tokenizer = tiny_causal_lm("llama")
    assert unsupported_reason(model) is None
    model.generation_config.repetition_penalty = 1.3
    assert "repetition_penalty" in unsupported_reason(model)
    settings = SamplingSettings(num_samples=2, max_new_tokens=3, batch_size=2)
    records, _ = generate_completions(model, tokenizer, PROMPTS[:2], settings, progress=False)
    assert records[0].settings["engine"] == "generate"
    with pytest.raises(ValueError, match=r"repetition_penalty.*engine='generate'"):
        generate_completions(model, tokenizer, PROMPTS[:2], settings, progress=False, engine="decode")
    with pytest.raises(ValueError, match="unknown generation engine"):
        generate_completions(model, tokenizer, PROMPTS[:2], settings, progress=False, engine="fast")


def test_no_prompts_and_fewer_rows_than_slots(tiny_llama):
    model, tokenizer = tiny_llama
    settings = SamplingSettings(num_samples=2, max_new_tokens=4, batch_size=64)
    assert generate_completions(model, tokenizer, [], settings, progress=False, engine="decode")[0] == []
    records, stats = generate_completions(
        model, tokenizer, PROMPTS[:1], settings, progress=False, engine="decode"
    )
    assert stats.completions == 2 and len(records[0].completions) == 2


def test_budget_of_one_token(tiny_qwen2):
    model, tokenizer = tiny_qwen2
    settings = SamplingSettings(num_samples=2, temperature=0.0, max_new_tokens=1, batch_size=2)
    decoded, _ = generate_completions(model, tokenizer, PROMPTS, settings, progress=False, engine="decode")
    reference, _ = generate_completions(
        model, tokenizer, PROMPTS, settings, progress=False, engine="generate"
    )
    assert [r.completions for r in decoded] == [r.completions for r in reference]
    assert all(r.num_tokens == [1, 1] for r in decoded)


def test_bench_generation_runs_on_the_tiny_model():
    import json
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_generation.py"
    args = [
        "--skip-embedded",
        "--tiny-rounds",
        "2",
        "--prompts",
        "2",
        "--samples",
        "2",
        "--max-new-tokens",
        "6",
    ]
    done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)["tiny"]
    assert set(result) >= {"generate", "decode", "generate_1_thread", "ratio_per_round", "ratio_median"}
    assert len(result["ratio_per_round"]) == 2 and result["decode"]["tokens_per_second"] > 0


@pytest.mark.parametrize("rows", [1, 4, 16, 33])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_step_linear_matches_f_linear(rows, dtype):
    from faithgrpo.eval.generation.decode_weights import StepLinear

    generator = torch.Generator().manual_seed(rows)
    weight = torch.randn(96, 40, generator=generator, dtype=dtype)
    bias = torch.randn(96, generator=generator, dtype=dtype)
    for b in (bias, None):
        linear = StepLinear(weight, b)
        assert linear.weight is weight  # no copy of the weight
        x = torch.randn(rows, 40, generator=generator, dtype=dtype)
        out = linear(x)
        assert out.shape == (rows, 96) and out.is_contiguous()
        torch.testing.assert_close(out, torch.nn.functional.linear(x, weight, b), rtol=1e-5, atol=1e-5)
        # a strided input (a column slice, as gate/up halves are) gives the same rows
        wide = torch.randn(rows, 80, generator=generator, dtype=dtype)
        torch.testing.assert_close(
            linear(wide[:, 20:60]), linear(wide[:, 20:60].contiguous()), rtol=0, atol=0
        )
        x3 = torch.randn(1, rows, 40, generator=generator, dtype=dtype)  # prefill's 3-D input: plain F.linear
        assert torch.equal(linear(x3), torch.nn.functional.linear(x3, weight, b))


@pytest.mark.parametrize("seed", range(4))
def test_prompt_shared_attention_equals_attention_over_each_rows_own_sequence(seed):
    from faithgrpo.eval.generation.decode_cache import PromptSharedCache

    # Random prompts (different lengths) shared by 1-3 rows each, with a freed prompt slot left as
    # a hole; rows have generated different numbers of tokens. Reference: softmax attention in
    # float64 over each row's concatenated prompt + own keys, computed row by row.
    rng = torch.Generator().manual_seed(seed)
    layers, kv, g, d, slots = 2, 2, 3, 8, 6
    cache = PromptSharedCache(layers, slots, kv, d, torch.float32, torch.device("cpu"))
    cache.reserve(5)
    lengths = [int(x) for x in torch.randint(1, 70, (4,), generator=rng)]
    prompts = [
        [(torch.randn(kv, n, d, generator=rng), torch.randn(kv, n, d, generator=rng)) for _ in range(layers)]
        for n in lengths
    ]
    slot_of = [cache.add_prompt(p, n) for p, n in zip(prompts, lengths)]
    cache.drop_prompt(slot_of[1])  # a hole: no row refers to prompt 1
    owner = [0, 2, 0, 3, 2, 0]  # row -> prompt
    own = {(r, layer): ([], []) for r in range(slots) for layer in range(layers)}
    for r, p in enumerate(owner):
        cache.start_row(r, slot_of[p])
    scale = d**-0.5
    for step in range(4):
        n = slots - step % 2  # the last row sits out every other step
        plan = cache.plan(n, kv * g)
        assert plan.positions.tolist() == [lengths[owner[r]] + len(own[r, 0][0]) for r in range(n)]
        for layer in range(layers):
            q = torch.randn(n, kv, g, d, generator=rng)
            k, v = torch.randn(n, kv, d, generator=rng), torch.randn(n, kv, d, generator=rng)
            out = cache.attend(layer, plan, q, k, v, scale)
            for r in range(n):
                own[r, layer][0].append(k[r])
                own[r, layer][1].append(v[r])
                pk, pv = prompts[owner[r]][layer]
                keys = torch.cat([pk, torch.stack(own[r, layer][0], dim=1)], dim=1).double()
                values = torch.cat([pv, torch.stack(own[r, layer][1], dim=1)], dim=1).double()
                weights = (q[r].double() @ keys.transpose(-1, -2) * scale).softmax(-1)
                torch.testing.assert_close(out[r].double(), weights @ values, atol=1e-5, rtol=1e-5)
        cache.advance(n)


@pytest.mark.parametrize("engine", ["decode", "generate"])
def test_prompt_seeds_reproduce_each_prompt_sampled_alone(engine):
    # A shared batch with one seed per prompt gives each prompt the completions it gets alone with
    # that seed as the run seed (what lets frozen pools share decode calls).
    model, tokenizer = tiny_causal_lm("llama")
    prompts, seeds = ["alpha beta", "gamma", "delta epsilon zeta"], [11, 5, 11]
    settings = SamplingSettings(num_samples=3, max_new_tokens=6, batch_size=4, seed=0)
    shared, _ = generate_completions(
        model, tokenizer, prompts, settings, progress=False, engine=engine, prompt_seeds=seeds
    )
    for prompt, seed, record in zip(prompts, seeds, shared):
        alone, _ = generate_completions(
            model, tokenizer, [prompt], replace(settings, seed=seed), progress=False, engine=engine
        )
        assert alone[0].completions == record.completions
    with pytest.raises(ValueError, match="prompt seeds"):
        generate_completions(model, tokenizer, prompts, settings, progress=False, prompt_seeds=[1])
