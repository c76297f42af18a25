"""CRoS reward (docs/rewards.md, "CRoS"): semantics on toy models, exact scoring, ranking, bad input, config."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from cros_helpers import (
    SIMPLE_CHAT_TEMPLATE,
    CopyModel,
    leaking_chain,
    ordered_chain,
    random_llama_with_tokenizer,
    trained_toy,
    word_tokenizer,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from faithgrpo.rewards.cros.completions import UNDEFINED_REASONS, parse_completion
from faithgrpo.rewards.cros.ranking import average_ranks, group_ids, group_rank_normalize, rank_normalize
from faithgrpo.rewards.cros.reward import CRoSReward
from faithgrpo.rewards.steps import apply_permutation, scramble_permutations, scramble_seed, step_spans
from faithgrpo.text import completion_text, extract_answer


@pytest.fixture(scope="module")
def byte_llama():
    model, tok = random_llama_with_tokenizer(seed=0)
    return model.requires_grad_(False), tok  # a frozen reference (CRoS refuses a trainable one in training)


@pytest.fixture(scope="module")
def byte_llama_bos():
    model, tok = random_llama_with_tokenizer(seed=1, bos=True)
    return model.requires_grad_(False), tok


def completion(reasoning: str, answer: str) -> str:
    return f"<think>{reasoning}</think>\n<answer>{answer}</answer>"


def reference_logprob(model, tok, prompt_ids, context_text, answer):
    """ℓ computed the slow, obvious way: one unpadded sequence, full logits, full log-softmax."""
    answer_ids = tok(answer, add_special_tokens=False)["input_ids"]
    ids = prompt_ids + tok(context_text, add_special_tokens=False)["input_ids"] + answer_ids
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0].double()
    logprobs = torch.log_softmax(logits, dim=-1)
    start = len(ids) - len(answer_ids)
    return sum(logprobs[start + t - 1, a].item() for t, a in enumerate(answer_ids)) / len(answer_ids)


def reference_delta(model, tok, prompt, reasoning, answer, num_scrambles, seed, prompt_ids=None):
    text = completion(reasoning, answer)
    if prompt_ids is None:
        prompt_ids = tok(prompt)["input_ids"]
    spans = step_spans(reasoning)
    perms = scramble_permutations(len(spans), num_scrambles, scramble_seed(seed, prompt, text))

    def ell(r):
        return reference_logprob(model, tok, prompt_ids, f"<think>{r}</think>\n<answer>", answer)

    scrambled = [ell(apply_permutation(reasoning, spans, p)) for p in perms]
    return ell(reasoning) - sum(scrambled) / len(scrambled)


VARIED = [
    ("Q: 2+3*4?", "Step 1: 3*4 = 12\nStep 2: 2 + 12 = 14\nStep 3: check 14", "14"),
    ("Q: 2+3*4?", "first 12\nthen 14", "14"),
    ("Q: who?", "Alice lies. Bob lies. So Carol is honest. Done.", "Carol"),
    ("Q: longer prompt about a causal graph with nodes A, B, C", "1. A->B\n2. B->C\n3. so A->C", "{A}"),
    ("Q: w", "x\ny\nz\nw\nv", "ω ünïcode"),
]


# ----------------------------------------------------------------------------- semantics


def _assert_prefers_ordered(model, tok, ordered_min, leak_max):
    cros = CRoSReward(model, tok, num_scrambles=4, seed=0)
    ordered = [ordered_chain([3, 5, 7]), ordered_chain([1, 8]), ordered_chain([2, 4, 6, 9, 0])]
    leaking = [leaking_chain(7, [3, 5]), leaking_chain(1, [8]), leaking_chain(2, [4, 6, 9, 0])]
    scores = cros.compute_deltas([("Q", c) for c in ordered + leaking])
    assert all(s.reason is None for s in scores)
    for s in scores[:3]:
        assert s.delta > ordered_min  # the ordered chain carries the answer
    for s in scores[3:]:
        assert abs(s.delta) < leak_max  # the stated answer survives any order
    # Within one group of six, every ordered chain outranks every leaking one.
    rewards = cros(["Q"] * 6, ordered + leaking)
    assert min(rewards[:3]) > max(rewards[3:])
    assert sorted(rewards[:3]) == pytest.approx([0.6, 0.8, 1.0]) or rewards[:3] == [0.9] * 3
    assert sum(rewards) == pytest.approx(3.0)
    return scores


def test_hand_set_copy_model_prefers_ordered_chains():
    tok = word_tokenizer()
    scores = _assert_prefers_ordered(CopyModel(tok), tok, ordered_min=4.0, leak_max=1e-6)
    # Hand computation: copying scores s - log(e^s + V - 1); a wrong copy -log(e^s + V - 1).
    vocab, s = len(tok), 8.0
    right, wrong = s - math.log(math.exp(s) + vocab - 1), -math.log(math.exp(s) + vocab - 1)
    two_step = scores[1]  # one scramble (the swap), which moves the last assignment
    assert two_step.logprob == pytest.approx(right, abs=1e-5)
    assert two_step.delta == pytest.approx(right - wrong, abs=1e-5)


@pytest.mark.slow
def test_trained_toy_prefers_ordered_chains():
    model, tok, loss = trained_toy()
    assert loss < 0.2, "the toy did not learn its task"
    _assert_prefers_ordered(model, tok, ordered_min=1.0, leak_max=0.2)


# ----------------------------------------------------------------------------- exact scoring


def test_matches_unbatched_reference_and_is_batch_size_invariant(byte_llama):
    model, tok = byte_llama
    pairs = [(p, completion(r, a)) for p, r, a in VARIED]
    by_batch = {}
    for batch_size in (1, 3, 64):
        cros = CRoSReward(model, tok, num_scrambles=3, seed=5, batch_size=batch_size)
        by_batch[batch_size] = [s.delta for s in cros.compute_deltas(pairs)]
    expected = [reference_delta(model, tok, p, r, a, 3, 5) for p, r, a in VARIED]
    for batch_size, deltas in by_batch.items():
        assert deltas == pytest.approx(expected, abs=1e-5), batch_size
    assert any(abs(d) > 1e-3 for d in expected)  # a random model still distinguishes orders


def test_prompt_cache_reuse_matches_plain_batches(byte_llama_bos):
    model, tok = byte_llama_bos
    prompts = ["a shared prompt, long enough to matter"] * 4 + ["another one"] * 3
    comps = [completion(r, a) for _, r, a in VARIED[:4]] + [completion(r, a) for _, r, a in VARIED[2:]]
    pairs = list(zip(prompts, comps))
    cached = CRoSReward(model, tok, num_scrambles=3, batch_size=4)
    plain = CRoSReward(model, tok, num_scrambles=3, batch_size=4, reuse_prompt_cache=False)
    got, want = cached.compute_deltas(pairs), plain.compute_deltas(pairs)
    assert [s.delta for s in got] == pytest.approx([s.delta for s in want], abs=1e-5)
    for a, b in zip(got, want):
        assert a.scrambled_logprobs == pytest.approx(b.scrambled_logprobs, abs=1e-5)
    # Each prompt ran once; every chunk reused a cache (4 + 3 completions x 4 sequences, 4 per chunk).
    assert cached.forward_counts == {"prompt": 2, "cached_chunk": 4 + 3}
    assert plain.forward_counts == {"chunk": 7}


def test_prompt_cache_with_truncated_prompts_and_models_without_cache(byte_llama_bos):
    model, tok = byte_llama_bos
    prompt = "P" * 60
    comps = [completion("Step 1: a\nStep 2: bb", "x"), completion("Step 1: aaaa\nStep 2: b\nStep 3: c", "y")]
    pairs = [(prompt, c) for c in comps]
    cached = CRoSReward(model, tok, max_length=70)
    plain = CRoSReward(model, tok, max_length=70, reuse_prompt_cache=False)
    got, want = cached.compute_deltas(pairs), plain.compute_deltas(pairs)
    assert all(s.prompt_truncated for s in got)
    assert [s.delta for s in got] == pytest.approx([s.delta for s in want], abs=1e-5)
    assert cached.forward_counts["prompt"] == 2  # cut to different lengths: two distinct prompts
    word_tok = word_tokenizer()
    copy = CRoSReward(CopyModel(word_tok), word_tok)
    copy.compute_deltas([("Q", ordered_chain([1, 2, 3]))])
    assert copy.forward_counts == {"chunk": 1}  # no KV-cache interface: plain batches


def test_qwen2_with_chat_template_matches_reference_with_and_without_prompt_cache(tiny_qwen2):
    model, tok = tiny_qwen2
    messages = [{"role": "user", "content": "Which set blocks the backdoor path?"}]
    rendered = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    prompt_ids = tok(rendered, add_special_tokens=False)["input_ids"]
    reasoning, answer = "Step 1: U -> X and U -> Y\nStep 2: condition on U", "{U}"
    expected = reference_delta(model, tok, "", reasoning, answer, 1, 0, prompt_ids=prompt_ids)
    pairs = [(messages, completion(reasoning, answer)), (messages, completion("a\nb\nc", "{V}"))]
    for reuse in (True, False):
        cros = CRoSReward(model, tok, reuse_prompt_cache=reuse)
        scores = cros.compute_deltas(pairs)
        assert scores[0].delta == pytest.approx(expected, abs=1e-5)
        assert scores[1].reason is None and math.isfinite(scores[1].delta)
        assert (cros.forward_counts["cached_chunk"] > 0) is reuse


def test_sliding_window_reference_falls_back_to_plain_batches():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    _, tok = random_llama_with_tokenizer(seed=0)
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        use_sliding_window=True,
        sliding_window=8,
        max_window_layers=0,
        max_position_embeddings=512,
    )
    model = Qwen2ForCausalLM(config).eval()
    pairs = [("a prompt", completion(r, a)) for _, r, a in VARIED[:3]]
    cros = CRoSReward(model, tok, num_scrambles=2)
    got = [s.delta for s in cros.compute_deltas(pairs)]
    assert cros.forward_counts["cached_chunk"] == 0 and cros.forward_counts["chunk"] == 1
    want = [reference_delta(model, tok, "a prompt", r, a, 2, 0) for _, r, a in VARIED[:3]]
    assert got == pytest.approx(want, abs=1e-5)


def test_seed_determinism(byte_llama):
    model, tok = byte_llama
    pairs = [(p, completion(r, a)) for p, r, a in VARIED]
    first = CRoSReward(model, tok, seed=3).compute_deltas(pairs)
    again = CRoSReward(model, tok, seed=3, batch_size=2).compute_deltas(list(reversed(pairs)))[::-1]
    assert [s.delta for s in first] == pytest.approx([s.delta for s in again], abs=1e-6)
    for a, b in zip(first, again):
        assert a.scrambled_logprobs == pytest.approx(b.scrambled_logprobs, abs=1e-6)
    other = CRoSReward(model, tok, seed=4).compute_deltas(pairs)
    # Five-step chains have 119 scrambles: another seed draws other ones.
    assert first[4].scrambled_logprobs != pytest.approx(other[4].scrambled_logprobs)


def test_left_truncates_prompt_keeps_bos_and_whole_answer(byte_llama_bos):
    model, tok = byte_llama_bos
    prompt, reasoning, answer = "P" * 40 + " the end", "Step 1: a\nStep 2: b", "yes"
    text = completion(reasoning, answer)
    prefix_len = len(tok(f"<think>{reasoning}</think>\n<answer>", add_special_tokens=False)["input_ids"])
    answer_len = len(tok(answer, add_special_tokens=False)["input_ids"])
    full_prompt = tok(prompt)["input_ids"]
    assert full_prompt[0] == tok.bos_token_id
    max_length = prefix_len + answer_len + 10
    cros = CRoSReward(model, tok, num_scrambles=1, max_length=max_length)
    score = cros.compute_deltas([(prompt, text)])[0]
    assert score.prompt_truncated and score.reason is None
    kept = [tok.bos_token_id, *full_prompt[-9:]]  # BOS + the last 9 prompt tokens = 10
    assert score.delta == pytest.approx(
        reference_delta(model, tok, prompt, reasoning, answer, 1, 0, prompt_ids=kept), abs=1e-5
    )
    # One token short of even fitting reasoning + answer: undefined, never a cut answer.
    tight = CRoSReward(model, tok, max_length=prefix_len + answer_len - 1)
    assert tight.compute_deltas([(prompt, text)])[0].reason == "too_long"
    # Exactly fitting without prompt is fine (prompt fully cut).
    exact = CRoSReward(model, tok, num_scrambles=1, max_length=prefix_len + answer_len)
    assert exact.compute_deltas([(prompt, text)])[0].delta == pytest.approx(
        reference_delta(model, tok, prompt, reasoning, answer, 1, 0, prompt_ids=[]), abs=1e-5
    )


def test_conversational_prompt_uses_chat_template_and_message_completions():
    model, tok = random_llama_with_tokenizer(seed=2, chat_template=SIMPLE_CHAT_TEMPLATE)
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "2+2?"}]
    reasoning, answer = "two and two\nmake four", "4"  # two steps: the single scramble is the swap
    rendered = "<|system|>be brief\n<|user|>2+2?\n<|assistant|>"
    expected = reference_delta(
        model,
        tok,
        "",
        reasoning,
        answer,
        1,
        0,
        prompt_ids=tok(rendered, add_special_tokens=False)["input_ids"],
    )
    cros = CRoSReward(model, tok)
    as_messages = [{"role": "assistant", "content": completion(reasoning, answer)}]
    scores = cros.compute_deltas([(messages, completion(reasoning, answer)), (messages, as_messages)])
    assert [s.delta for s in scores] == pytest.approx([expected, expected], abs=1e-5)


def test_duplicate_completions_tie_exactly(byte_llama):
    model, tok = byte_llama
    p, r, a = VARIED[0]
    comps = [completion(r, a), completion("Step 1: 2 + 12 = 14\nStep 2: 3*4 = 12", a), completion(r, a)]
    rewards = CRoSReward(model, tok)([p] * 3, comps)
    assert rewards[0] == rewards[2]
    assert sorted(rewards) in ([0.0, 0.75, 0.75], [0.25, 0.25, 1.0])


# ----------------------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("<think>a\nb</think>\n<answer>5</answer>", ("<think>", "a\nb", "</think>\n<answer>", "5")),
        ("a\nb\n<answer> 5 </answer>", ("", "a\nb\n", "<answer>", " 5 ")),
        ("<think>a\nb <answer>5</answer>", ("<think>", "a\nb ", "<answer>", "5")),
        # Template-supplied <think>: the completion starts inside the reasoning.
        ("a\nb</think><answer>5</answer>", ("", "a\nb", "</think><answer>", "5")),
        # The last answer block is the answer; earlier ones are reasoning text.
        (
            "<think>x</think><answer>1</answer><answer>2</answer>",
            ("<think>", "x", "</think><answer>1</answer><answer>", "2"),
        ),
    ],
)
def test_parse_completion(text, parts):
    parsed, reason = parse_completion(text)
    assert reason is None and parsed == parts
    assert "".join(parsed[:3]) + parsed[3] == text[: text.rfind("</answer>")]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("no tags", "no_answer"),
        ("<answer>5", "no_answer"),
        ("5</answer>", "no_answer"),
        ("<answer> \n</answer>", "empty_answer"),
        (None, "no_answer"),
    ],
)
def test_parse_completion_failures(text, reason):
    assert parse_completion(text) == (None, reason)


# ----------------------------------------------------------------------------- ranking


def test_rank_normalisation_hand_cases():
    assert average_ranks([0.3, -1.0, 0.3, 2.0]) == [2.5, 1.0, 2.5, 4.0]
    assert rank_normalize([0.2]) == [0.5]
    assert rank_normalize([None]) == [0.5]
    assert rank_normalize([None], undefined="none") == [None]
    assert rank_normalize([1.0, 1.0, 1.0]) == [0.5, 0.5, 0.5]
    assert rank_normalize([3.0, -2.0, 0.5]) == [1.0, 0.0, 0.5]
    # Undefined ranks lowest and ties among themselves: ranks 1.5, 1.5, 3, 4 of G = 4.
    assert rank_normalize([None, 0.1, None, 0.4]) == pytest.approx([1 / 6, 2 / 3, 1 / 6, 1.0])
    assert rank_normalize([None, 0.1, None, 0.4], undefined="none") == [None, 0.0, None, 1.0]
    assert rank_normalize([None, None, 0.7], undefined="none") == [None, None, 0.5]
    assert rank_normalize([-math.inf, None, 0.0]) == [0.25, 0.25, 1.0]
    assert rank_normalize([math.nan, 1.0, 2.0]) == [0.0, 0.5, 1.0]
    assert rank_normalize([math.nan, 1.0, 2.0], undefined="none") == [None, 0.0, 1.0]


def test_groups_by_prompt_text_and_position():
    assert group_ids(["a", "a", "b", "b", "b", "a", "a"]) == [0, 0, 1, 1, 1, 2, 2]
    assert group_ids(["a"] * 6, num_generations=3) == [0, 0, 0, 1, 1, 1]
    assert group_ids([]) == []
    assert group_rank_normalize([1.0, 2.0, 9.0, 0.0, None], ["a", "a", "b", "b", "b"]) == [
        0.0,
        1.0,
        1.0,
        0.5,
        0.0,
    ]


def _brute_force_rank(values):
    g = len(values)
    if g == 1:
        return [0.5]
    keyed = [-math.inf if v is None else v for v in values]
    out = []
    for i, v in enumerate(keyed):
        below = sum(w < v for w in keyed)
        tied = sum(w == v for j, w in enumerate(keyed) if j != i)
        out.append((below + tied / 2) / (g - 1))
    return out


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.integers(-3, 3).map(float), st.floats(-5, 5)), min_size=1, max_size=12)
)
def test_rank_normalisation_matches_brute_force(values):
    ranked = rank_normalize(values)
    assert ranked == pytest.approx(_brute_force_rank(values))
    assert all(0.0 <= r <= 1.0 for r in ranked)
    assert sum(ranked) == pytest.approx(len(values) / 2)  # mean rank is (G + 1) / 2
    defined = [v for v in values if v is not None]
    expected_defined = _brute_force_rank(defined) if defined else []
    assert [r for r in rank_normalize(values, undefined="none") if r is not None] == pytest.approx(
        expected_defined
    )


# ----------------------------------------------------------------------------- TRL contract and bad input


BAD = {
    "no_answer": ["no tags at all", "   \n\t ", "", None, 12345, [{"role": "user", "content": "hi"}]],
    "empty_answer": ["<think>a\nb</think><answer>   </answer>"],
    "empty_reasoning": ["<think>  \n </think><answer>4</answer>", "<answer>4</answer>"],
    "too_few_steps": ["<think>just one thought</think><answer>4</answer>"],
    "too_long": [
        "<think>" + "Step 1: blah blah\n" * 6000 + "</think><answer>4</answer>",  # ~100k characters
        "<think>" + "a fairly long line\n" * 40 + "</think><answer>4</answer>",  # > max_length tokens
    ],
}


def test_bad_inputs_get_defined_scores_and_counted_reasons(byte_llama):
    model, tok = byte_llama
    good = [
        completion("Schritt 1: ü ∑\nSchritt 2: 😀 第二", "Ω"),
        [{"role": "assistant", "content": completion("x\ny", "z")}],
    ]
    comps = [c for cases in BAD.values() for c in cases] + good
    expected_reasons = [r for r, cases in BAD.items() for _ in cases] + [None, None]
    assert len(BAD["too_long"][0]) > 100_000
    metrics, extra = {}, {}
    cros = CRoSReward(model, tok, max_length=300)
    rewards = cros(
        ["Q"] * len(comps),
        comps,
        log_metric=lambda k, v: metrics.__setitem__(k, v),
        log_extra=lambda k, v: extra.__setitem__(k, v),
        trainer_state=SimpleNamespace(global_step=0),
    )
    assert [s.reason for s in cros.last_scores] == expected_reasons
    assert all(isinstance(r, float) and math.isfinite(r) and 0.0 <= r <= 1.0 for r in rewards)
    n = len(comps)
    # All undefined tie at the bottom (ranks 1..n-2 -> average (n-1)/2); the two defined are on top.
    assert rewards[:-2] == pytest.approx([((n - 1) / 2 - 1) / (n - 1)] * (n - 2))
    assert sorted(rewards[-2:]) == pytest.approx([(n - 2) / (n - 1), 1.0])
    assert set(metrics) == {
        "cros/delta_mean",
        "cros/delta_std",
        "cros/undefined_frac",
        "cros/prompt_truncated_frac",
        *(f"cros/undefined/{r}" for r in UNDEFINED_REASONS),
    }
    for reason, cases in BAD.items():
        assert metrics[f"cros/undefined/{reason}"] == pytest.approx(len(cases) / n)
    assert metrics["cros/undefined_frac"] == pytest.approx((n - 2) / n)
    defined = [s.delta for s in cros.last_scores[-2:]]
    assert metrics["cros/delta_mean"] == pytest.approx(sum(defined) / 2)
    assert metrics["cros/delta_std"] == pytest.approx(
        abs(defined[0] - defined[1]) / 2
    )  # two values: half their gap
    assert extra["cros_delta"][-2:] == defined and extra["cros_delta"][0] is None
    assert extra["cros_reason"] == [r or "" for r in expected_reasons]
    assert cros.reason_counts["no_answer"] == len(BAD["no_answer"])

    none_mode = CRoSReward(model, tok, max_length=300, undefined="none")(["Q"] * n, comps)
    assert none_mode[:-2] == [None] * (n - 2)
    assert sorted(none_mode[-2:]) == [0.0, 1.0]


class _NaNModel(torch.nn.Module):
    def __init__(self, vocab):
        super().__init__()
        self.vocab = vocab
        self.anchor = torch.nn.Parameter(torch.zeros(()))

    def forward(self, input_ids, attention_mask=None, **kwargs):
        return SimpleNamespace(logits=torch.full((*input_ids.shape, self.vocab), math.nan))


def test_non_finite_reference_output_never_reaches_trl(byte_llama):
    _, tok = byte_llama
    cros = CRoSReward(_NaNModel(len(tok)), tok)
    comps = [completion("a\nb", "c"), completion("d\ne", "f")]
    rewards = cros(["Q", "Q"], comps)
    assert [s.reason for s in cros.last_scores] == ["non_finite", "non_finite"]
    assert rewards == [0.5, 0.5]


def test_gate_scores_only_correct_answers():
    tok = word_tokenizer()
    seen_kwargs = []

    def is_correct(prompt, completion, answer, **row):
        seen_kwargs.append(set(row))
        return extract_answer(completion_text(completion)) == answer

    comps = [ordered_chain([1, 8]), ordered_chain([2, 9]), leaking_chain(3, [5]), ordered_chain([4, 6])]
    answers = ["8", "9", "3", "5"]  # the last completion answers 6: wrong
    cros = CRoSReward(CopyModel(tok), tok, gate="correct", is_correct=is_correct)
    rewards = cros(
        ["Q"] * 4, comps, answer=answers, source=["s"] * 4, log_metric=lambda *_: None, trainer_state=1
    )
    assert seen_kwargs == [{"source"}] * 4  # dataset columns only, never TRL's hooks
    assert [s.reason for s in cros.last_scores] == [None, None, None, "gated"]
    # Ranks: gated 1, leaking (Δ = 0) 2, the two ordered chains tie at 3.5.
    assert rewards == pytest.approx([5 / 6, 5 / 6, 1 / 3, 0.0])

    def broken(prompt, completion, **row):
        raise RuntimeError("grader bug")

    gated_all = CRoSReward(CopyModel(tok), tok, gate="correct", is_correct=broken)
    assert gated_all(["Q"] * 2, comps[:2]) == [0.5, 0.5]
    assert [s.reason for s in gated_all.last_scores] == ["gated", "gated"]


def test_groups_ranked_separately(byte_llama):
    model, tok = byte_llama
    prompts = ["A"] * 3 + ["B"] * 3
    comps = [completion(r, a) for _, r, a in VARIED[:3]] * 2
    rewards = CRoSReward(model, tok)(prompts, comps)
    for group in (rewards[:3], rewards[3:]):
        assert sorted(group) == pytest.approx([0.0, 0.5, 1.0])


# ----------------------------------------------------------------------------- reference binding


def test_reference_loaded_from_path_is_frozen_and_matches(tmp_path, byte_llama):
    model, tok = byte_llama
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    pairs = [(p, completion(r, a)) for p, r, a in VARIED]
    expected = [s.delta for s in CRoSReward(model, tok).compute_deltas(pairs)]
    from_path = CRoSReward(str(tmp_path))
    assert from_path.model is None  # loaded lazily, on first use
    assert [s.delta for s in from_path.compute_deltas(pairs)] == pytest.approx(expected, abs=1e-6)
    assert not any(p.requires_grad for p in from_path.model.parameters())
    assert not from_path.model.training


def test_bound_peft_policy_with_adapters_disabled_scores_the_base_model():
    peft = pytest.importorskip("peft")
    model, tok = random_llama_with_tokenizer(seed=7)
    pairs = [(p, completion(r, a)) for p, r, a in VARIED[:3]]
    base = [s.delta for s in CRoSReward(model, tok).compute_deltas(pairs)]
    config = peft.LoraConfig(r=4, lora_alpha=16, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    policy = peft.get_peft_model(model, config)
    policy.train()
    probe = torch.tensor([[5, 6, 7, 8]])
    with torch.no_grad():
        adapted_before = policy(input_ids=probe).logits

    cros = CRoSReward(num_scrambles=4)
    cros.bind_reference(policy, tok, context_manager_factory=policy.disable_adapter)
    assert [s.delta for s in cros.compute_deltas(pairs)] == pytest.approx(base, abs=1e-6)
    # The policy comes back as it was: training mode, adapters active.
    assert policy.training
    with torch.no_grad():
        assert torch.equal(policy(input_ids=probe).logits, adapted_before)
    adapted = [s.delta for s in CRoSReward(policy, tok).compute_deltas(pairs)]
    assert max(abs(a - b) for a, b in zip(adapted, base)) > 1e-4


# ----------------------------------------------------------------------------- configuration errors


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"num_scrambles": 0}, "num_scrambles"),
        ({"num_scrambles": 2.5}, "num_scrambles"),
        ({"batch_size": 0}, "batch_size"),
        ({"max_length": 1}, "max_length"),
        ({"gate": "wrong"}, "gate"),
        ({"gate": "correct"}, "is_correct"),
        ({"undefined": "zero"}, "undefined"),
        ({"num_generations": 0}, "num_generations"),
        ({"distributed": "yes"}, "distributed"),
        ({"reference": 3}, "reference"),
        ({"reference": torch.nn.Linear(2, 2)}, "tokenizer"),
    ],
)
def test_bad_config_is_a_clear_value_error(kwargs, match):
    with pytest.raises(ValueError, match=match):
        CRoSReward(**kwargs)


def test_unbound_reference_is_reported(byte_llama):
    from trl.trainer import utils as trl_utils

    cros = CRoSReward()
    # TRL logs rewards/cros/mean: by get_callable_name (TRL >= 1.10), by __name__ before it
    logged_as = getattr(trl_utils, "get_callable_name", lambda f: f.__name__)(cros)
    assert cros.__name__ == "cros" == logged_as
    with pytest.raises(RuntimeError, match=r"FaithGRPOTrainer.*bind_reference"):
        cros(["Q"], [completion("a\nb", "c")])
    # Even with nothing to score: a run without a reference stops at its first call, not mid-run.
    with pytest.raises(RuntimeError, match=r"FaithGRPOTrainer.*bind_reference"):
        cros(["Q"], ["no answer"])
    # Raw Δ for evaluators needs no model while nothing is scorable.
    assert cros.compute_deltas([("Q", "no answer")])[0].reason == "no_answer"
    with pytest.raises(ValueError, match="completions"):
        cros(["Q"], [])


# ----------------------------------------------------------------------------- TRL trainer


@pytest.mark.slow
def test_grpo_trainer_runs_cros_and_logs_its_diagnostics(tmp_path, tiny_llama):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    model, tok = tiny_llama
    # Any frozen causal LM with its own tokenizer can be the reference.
    reference, reference_tok = random_llama_with_tokenizer(seed=0)
    reference.requires_grad_(False)
    cros = CRoSReward(reference, reference_tok, num_generations=4)
    calls = []

    def spy(prompts, completions, **kwargs):
        calls.append(sorted(kwargs))
        return cros(prompts, completions, **kwargs)

    spy.__name__ = "cros"
    dataset = Dataset.from_dict(
        {"prompt": [[{"role": "user", "content": f"question {i}"}] for i in range(4)]}
    )
    args = GRPOConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=8,
        max_steps=1,
        logging_steps=1,
        report_to=[],
        use_cpu=True,
        seed=0,
    )
    trainer = GRPOTrainer(
        model=model, reward_funcs=[spy], args=args, train_dataset=dataset, processing_class=tok
    )
    trainer.train()
    logged = {k for entry in trainer.state.log_history for k in entry}
    assert {"rewards/cros/mean", "cros/undefined_frac", "cros/undefined/no_answer"} <= logged
    assert "log_metric" in calls[0] and "log_extra" in calls[0]
    means = [e["rewards/cros/mean"] for e in trainer.state.log_history if "rewards/cros/mean" in e]
    assert means and all(0.0 <= m <= 1.0 for m in means)
