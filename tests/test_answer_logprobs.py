"""answer_logprobs: the confidence of best-of-K is the mean log-prob of the answer's tokens, in context."""

from __future__ import annotations

import math

import pytest
import torch

from faithgrpo.eval.metrics.logprobs import answer_logprobs
from faithgrpo.text import prompt_text


def _naive(model, tokenizer, prompt, completion):
    """One plain forward pass over prompt + whole completion; average the answer tokens' log-probs."""
    prompt_ids = list(tokenizer(prompt_text(prompt))["input_ids"])
    enc = tokenizer(completion, add_special_tokens=False, return_offsets_mapping=True)
    start = completion.rindex("<answer>") + len("<answer>")
    while completion[start].isspace():
        start += 1
    end = completion.rindex("</answer>")
    while completion[end - 1].isspace():
        end -= 1
    ids = prompt_ids + list(enc["input_ids"])
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].double()
    logprobs = torch.log_softmax(logits, -1)
    picked = [
        logprobs[len(prompt_ids) + i - 1, tok].item()
        for i, (tok, (a, b)) in enumerate(zip(enc["input_ids"], enc["offset_mapping"]))
        if b > start and a < end
    ]
    return sum(picked) / len(picked)


@pytest.mark.parametrize(
    "completion",
    [
        "<think>a then b</think><answer>{U, W}</answer>",
        "<think>x</think><answer>  yes </answer>",
        "<answer>first</answer> retracted <answer>{M}</answer>",
    ],
)
def test_answer_logprobs_match_a_plain_forward_pass(tiny_llama, completion):
    model, tokenizer = tiny_llama
    assert tokenizer.is_fast
    (value,) = answer_logprobs(model, tokenizer, [("Which set?", completion)], progress=False)
    assert value == pytest.approx(_naive(model, tokenizer, "Which set?", completion), abs=1e-5)


def test_answer_logprobs_undefined_without_an_answer(tiny_llama):
    model, tokenizer = tiny_llama
    values = answer_logprobs(
        model,
        tokenizer,
        [("Q", "no tags"), ("Q", "<answer>   </answer>"), ("Q", "<answer>1</answer>")],
        progress=False,
    )
    assert values[0] is None and values[1] is None and math.isfinite(values[2]) and values[2] < 0


def test_answer_logprobs_ignore_the_reasoning_tokens(tiny_llama):
    """Only the answer is scored: changing the reasoning changes the context, not which tokens count."""
    model, tokenizer = tiny_llama
    a, b = answer_logprobs(
        model,
        tokenizer,
        [
            ("Q", "<think>short</think><answer>{A}</answer>"),
            ("Q", "<think>" + "long " * 50 + "</think><answer>{A}</answer>"),
        ],
        progress=False,
    )
    assert a != b  # the context differs
    for value, completion in ((a, "<think>short</think><answer>{A}</answer>"),):
        assert value == pytest.approx(_naive(model, tokenizer, "Q", completion), abs=1e-5)


@pytest.mark.parametrize(
    "completion",
    [
        "<think>a then b</think><answer>{U, W}</answer>",
        "<think>x</think><answer>  yes </answer>",
        "<answer>first</answer> retracted <answer>{M}</answer>",
    ],
)
def test_the_sampled_tokens_give_the_same_confidence_without_a_forward_pass(tiny_llama, completion):
    # sampled_answer_logprob reads the policy's own token log-probabilities (what the decode engine
    # returns at temperature 1): given exactly those, it equals answer_logprobs' forward pass.
    from faithgrpo.eval.metrics.logprobs import sampled_answer_logprob

    model, tokenizer = tiny_llama
    prompt_ids = list(tokenizer(prompt_text("Which set?"))["input_ids"])
    ids = list(tokenizer(completion, add_special_tokens=False)["input_ids"])
    with torch.no_grad():
        logits = model(torch.tensor([prompt_ids + ids])).logits[0].double()
    logprobs = torch.log_softmax(logits, -1)
    per_token = [logprobs[len(prompt_ids) + i - 1, tok].item() for i, tok in enumerate(ids)]
    (forward,) = answer_logprobs(model, tokenizer, [("Which set?", completion)], progress=False)
    assert sampled_answer_logprob(tokenizer, ids, per_token) == pytest.approx(forward, abs=1e-5)
    assert sampled_answer_logprob(tokenizer, ids[:3], per_token[:3]) is None


def test_the_decode_engine_hands_back_each_sampled_token_and_its_log_probability(tiny_llama):
    from faithgrpo.eval.generation.backends import generate_completions
    from faithgrpo.eval.generation.settings import SamplingSettings

    model, tokenizer = tiny_llama
    sampled: list = []
    settings = SamplingSettings(num_samples=3, max_new_tokens=5, seed=1)
    records, _ = generate_completions(
        model, tokenizer, ["a b", "c"], settings, progress=False, sampled=sampled
    )
    assert len(sampled) == 2 and all(len(s) == 3 for s in sampled)
    for record, rows in zip(records, sampled):
        for text, count, (ids, lps) in zip(record.completions, record.num_tokens, rows):
            assert len(ids) == len(lps) == count and tokenizer.decode(ids, skip_special_tokens=True) == text
            assert all(lp <= 0 for lp in lps)
    with pytest.raises(ValueError, match="decode engine"):
        generate_completions(model, tokenizer, ["a"], settings, progress=False, engine="generate", sampled=[])
