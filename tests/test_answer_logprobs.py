"""answer_logprobs: the confidence of best-of-K is the mean log-prob of the answer's tokens, in context."""

from __future__ import annotations

import math

import pytest
import torch

from faithgrpo.eval.metrics.logprobs import answer_logprobs
from faithgrpo.rewards.text import prompt_text


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
