"""Checkpoint metrics: JS divergence, AOC, early answering / CIR on scripted and tiny models, Δ summary."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from faithgrpo.eval.metrics.deltas import summarize_deltas
from faithgrpo.eval.metrics.faithfulness import (
    area_over_curve,
    cir,
    early_answering_aoc,
    js_divergence_bernoulli,
    truncation_analysis,
    truncation_points,
)
from faithgrpo.rewards.cros.completions import CRoSScore


def entropy2(p):
    return -sum(x * math.log2(x) for x in (p, 1 - p) if x > 0)


# --------------------------------------------------------------------------- JS divergence and AOC


def test_js_hand_values():
    assert js_divergence_bernoulli(0.0, 1.0) == 1.0
    assert js_divergence_bernoulli(0.3, 0.3) == 0.0
    # KL route by hand: M = (0.25, 0.75); ½[0.5 + 0.5·log2(2/3)] + ½[log2(4/3)].
    by_hand = 0.5 * (0.5 + 0.5 * math.log2(2 / 3)) + 0.5 * math.log2(4 / 3)
    assert js_divergence_bernoulli(0.5, 0.0) == pytest.approx(by_hand)
    assert js_divergence_bernoulli(0.5, 0.0) == pytest.approx(0.311278, abs=1e-6)
    # Subnormal inputs: (p + q) / 2 underflows to 0 here; the divergence is still defined (≈ 0).
    assert js_divergence_bernoulli(0.0, 5e-324) == pytest.approx(0.0, abs=1e-300)
    assert js_divergence_bernoulli(5e-324, 1.0) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="probability"):
        js_divergence_bernoulli(1.2, 0.5)


@settings(max_examples=200, deadline=None)
@given(st.floats(0, 1), st.floats(0, 1))
def test_js_equals_entropy_form_symmetric_and_bounded(p, q):
    # JS = H(M) − (H(P) + H(Q)) / 2, an independent formula.
    expected = entropy2((p + q) / 2) - (entropy2(p) + entropy2(q)) / 2
    value = js_divergence_bernoulli(p, q)
    assert value == pytest.approx(max(0.0, expected), abs=1e-9)
    assert value == js_divergence_bernoulli(q, p)
    assert 0.0 <= value <= 1.0


def test_area_over_curve_hand_cases():
    assert area_over_curve([0.0, 0.5, 1.0], [0.0, 1.0, 1.0]) == 0.25
    assert area_over_curve([0.0, 1.0], [1.0, 1.0]) == 0.0  # answer fixed before any reasoning
    assert area_over_curve([0.0, 1.0], [0.0, 0.0]) == 1.0
    n = 4  # agreement only with the whole chain: area is the last half-trapezoid, 1/(2n)
    fractions = [k / n for k in range(n + 1)]
    assert area_over_curve(fractions, [0, 0, 0, 0, 1]) == pytest.approx(1 - 1 / (2 * n))
    for bad in (([0.0, 0.5], [1, 1]), ([0.0, 0.6, 0.5, 1.0], [1, 1, 1, 1]), ([0.0, 1.0], [0, 2])):
        with pytest.raises(ValueError):
            area_over_curve(*bad)


def test_truncation_points():
    assert truncation_points(0, 8) == []
    assert truncation_points(1, 8) == [0, 1]
    assert truncation_points(20, 5) == [0, 5, 10, 15, 20]
    assert truncation_points(7, 4)[0] == 0 and truncation_points(7, 4)[-1] == 7


# --------------------------------------------------------------------------- a scripted model


class ScriptedLM(torch.nn.Module):
    """Greedy answer ``target`` (tokens) only once ``key`` has appeared in the context.

    At each position the model predicts ``target[j]``, where ``j`` is the length of the longest
    suffix of the context equal to ``target[:j]``, with logit ``strength`` (all others 0) when the
    key token is in the context; without the key it predicts ``junk``. So the answer's probability
    and greedy agreement are known in closed form.
    """

    def __init__(self, vocab, key, target, junk, strength=5.0):
        super().__init__()
        self.anchor = torch.nn.Parameter(torch.zeros(1))
        self.vocab, self.key, self.target, self.junk, self.strength = vocab, key, list(target), junk, strength

    def _next(self, context):
        if self.key not in context:
            return self.junk
        for j in range(len(self.target) - 1, -1, -1):
            if j == 0 or context[-j:] == self.target[:j]:
                return self.target[j]
        return self.target[0]

    def forward(self, input_ids, attention_mask=None, position_ids=None, logits_to_keep=0, use_cache=None):
        batch, width = input_ids.shape
        mask = attention_mask if attention_mask is not None else torch.ones_like(input_ids)
        logits = torch.zeros(batch, width, self.vocab)
        for b in range(batch):
            real = [int(t) for t, m in zip(input_ids[b], mask[b]) if m]
            offset = width - len(real)
            for t in range(len(real)):
                logits[b, offset + t, self._next(real[: t + 1])] = self.strength
        if logits_to_keep:
            logits = logits[:, -logits_to_keep:]
        return SimpleNamespace(logits=logits)

    def generate(self, input_ids, attention_mask, max_new_tokens, do_sample, pad_token_id, eos_token_id):
        rows = []
        for b in range(input_ids.shape[0]):
            context = [int(t) for t, m in zip(input_ids[b], attention_mask[b]) if m]
            new = []
            for _ in range(max_new_tokens):
                new.append(self._next(context + new))
            rows.append(input_ids[b].tolist() + new)
        return torch.tensor(rows)


@pytest.fixture(scope="module")
def scripted(tiny_tok):
    key = tiny_tok.convert_tokens_to_ids("@")
    answer = tiny_tok("{U}", add_special_tokens=False)["input_ids"]
    close = tiny_tok("</answer>", add_special_tokens=False)["input_ids"]
    junk = tiny_tok.convert_tokens_to_ids("~")
    assert key != tiny_tok.unk_token_id and junk not in answer + close
    return ScriptedLM(len(tiny_tok), key, answer + close, junk), len(answer)


# The key "@" appears in step 2 of 3: the answer is only produced from two steps on.
KEY_STEP_2 = "<think>Step 1: U causes X.\nStep 2: U also causes Y @.\nStep 3: so adjust for U.</think>\n<answer>{U}</answer>"
KEY_IN_PROMPT = "<think>Step 1: U causes X.\nStep 2: U also causes Y.</think>\n<answer>{U}</answer>"


@pytest.mark.parametrize("mode", ["teacher_forced", "decode"])
def test_scripted_model_gives_hand_computed_aoc_and_cir(scripted, tiny_tok, mode):
    model, n_answer = scripted
    report = truncation_analysis(
        model, tiny_tok, [("Find the set.", KEY_STEP_2), ("Find the set @", KEY_IN_PROMPT)], mode=mode,
        answer_probability="sequence", n_bootstrap=0, progress=False,
    )  # fmt: skip
    first, second = report.samples
    assert first.num_steps == 3 and first.fractions == (0.0, 1 / 3, 2 / 3, 1.0)
    assert first.agreement == (False, False, True, True)
    # Trapezoids: 0 on [0, 1/3], 1/6 on [1/3, 2/3], 1/3 on [2/3, 1] -> area 1/2.
    assert first.aoc == pytest.approx(0.5)
    # The key sits in the prompt: the answer never depends on the chain.
    assert second.agreement == (True, True, True) and second.aoc == 0.0
    vocab = len(tiny_tok)
    p_hi = (math.exp(5) / (math.exp(5) + vocab - 1)) ** n_answer
    p_lo = (1 / (math.exp(5) + vocab - 1)) ** n_answer
    assert first.answer_prob == pytest.approx((p_lo, p_lo, p_hi, p_hi), rel=1e-4)
    # CIR truncates by reasoning tokens: the answer is likely once the kept tokens include "@".
    kept = [pct * _reasoning_tokens(tiny_tok, KEY_STEP_2) // 100 for pct in (0, 20, 40, 60, 80)]
    at = _key_token_index(tiny_tok, KEY_STEP_2)
    cir_probs = tuple(p_hi if at < m else p_lo for m in kept)
    assert cir_probs.count(p_lo) >= 2 and cir_probs.count(p_hi) >= 1  # the key sits mid-chain
    assert first.cir_answer_prob == pytest.approx((*cir_probs, p_hi), rel=1e-4)
    expected_cir = sum(js_divergence_bernoulli(p_hi, p) for p in cir_probs) / 5
    assert first.cir == pytest.approx(expected_cir, rel=1e-4)
    assert second.cir == pytest.approx(0.0, abs=1e-12)
    assert report.aoc.value == pytest.approx(0.25)
    assert report.cir.value == pytest.approx(expected_cir / 2, rel=1e-4)
    # Mean curve over the grid: sample 1 rises from 0 (k/n = 1/3) to 1 (k/n = 2/3); sample 2 is flat 1.
    assert report.curve_agreement[0] == 0.5 and report.curve_agreement[-1] == 1.0
    assert report.curve_agreement[5] == pytest.approx((0.5 + 1) / 2)


def test_the_mean_agreement_curve_has_a_bootstrap_band(scripted, tiny_tok):
    # issue 32 (left over): the early-answering curve was drawn without an interval.
    model, _ = scripted
    pairs = [("Find the set.", KEY_STEP_2), ("Find the set @", KEY_IN_PROMPT)]
    run = lambda n: truncation_analysis(  # noqa: E731
        model, tiny_tok, pairs, answer_probability="sequence", n_bootstrap=n, seed=3, progress=False
    )
    report = run(1000)
    # Two samples at grid point 0 agree 0 and 1: resampled means are 0, 0.5 or 1, each end with
    # probability 1/4, so the 95 % band is [0, 1]; at the end both agree (1): the band is [1, 1].
    assert report.curve_low[0] == 0.0 and report.curve_high[0] == 1.0
    assert report.curve_low[-1] == report.curve_high[-1] == 1.0
    for low, mean, high in zip(report.curve_low, report.curve_agreement, report.curve_high):
        assert low <= mean <= high
    assert run(1000).to_dict() == report.to_dict()  # seeded
    assert run(0).curve_low is None and run(0).curve_high is None


def _reasoning(completion):
    return completion.split("<think>", 1)[1].split("</think>", 1)[0]


def _reasoning_tokens(tokenizer, completion):
    return len(tokenizer(_reasoning(completion), add_special_tokens=False)["input_ids"])


def _key_token_index(tokenizer, completion):
    ids = tokenizer(_reasoning(completion), add_special_tokens=False)["input_ids"]
    return ids.index(tokenizer.convert_tokens_to_ids("@"))


@pytest.mark.parametrize("steps", [2, 5, 10, 15])
def test_cir_does_not_depend_on_the_number_of_steps(scripted, tiny_tok, steps):
    """An answer that only changes when nothing is kept: CIR = JS(p_hi, p_lo) / 5 whatever the step count.

    The old step-based average gave 1/2, 1/5, 1/10, 1/15 of it for 2 / 5 / 10 / 15 steps.
    """
    model, _ = scripted
    chain = "@ " + "\n".join(f"Step {i}: fine." for i in range(1, steps + 1))  # the key is token 0
    completion = f"<think>{chain}</think>\n<answer>{{U}}</answer>"
    report = truncation_analysis(model, tiny_tok, [("Q", completion)], n_bootstrap=0, progress=False)
    vocab = len(tiny_tok)
    p_hi, p_lo = math.exp(5) / (math.exp(5) + vocab - 1), 1 / (math.exp(5) + vocab - 1)  # per token
    assert report.samples[0].cir_answer_prob[0] == pytest.approx(p_lo, rel=1e-4)
    assert report.samples[0].cir_answer_prob[1:] == pytest.approx((p_hi,) * 5, rel=1e-4)
    assert report.samples[0].cir == pytest.approx(js_divergence_bernoulli(p_hi, p_lo) / 5, rel=1e-4)


def test_mean_token_probability(scripted, tiny_tok):
    model, _ = scripted
    report = truncation_analysis(
        model, tiny_tok, [("Q", KEY_STEP_2)], answer_probability="mean_token", n_bootstrap=0, progress=False
    )
    vocab = len(tiny_tok)
    assert report.samples[0].answer_prob[-1] == pytest.approx(
        math.exp(5) / (math.exp(5) + vocab - 1), rel=1e-4
    )


def test_answer_not_greedy_after_full_chain_has_no_aoc(scripted, tiny_tok):
    model, _ = scripted
    no_key = "<think>Step 1: a.\nStep 2: b.</think><answer>{U}</answer>"
    report = truncation_analysis(model, tiny_tok, [("Q", no_key)], n_bootstrap=0, progress=False)
    sample = report.samples[0]
    assert sample.aoc is None and sample.aoc_reason == "full_cot_answer_not_greedy"
    assert sample.cir == pytest.approx(0.0, abs=1e-12)  # p never changes: CIR is still defined
    assert report.aoc.value is None and "full_cot_answer_not_greedy: 1" in report.aoc.reason
    assert report.cir.value == pytest.approx(0.0, abs=1e-12)


def test_undefined_samples_are_counted_with_reasons(scripted, tiny_tok):
    model, _ = scripted
    pairs = [
        ("Q", "no answer at all"),
        ("Q", "<think>x</think><answer>   </answer>"),
        ("Q", "<think>  </think><answer>{U}</answer>"),
        ("Q", KEY_STEP_2),
    ]
    report = truncation_analysis(model, tiny_tok, pairs, n_bootstrap=0, progress=False)
    assert [s.reason for s in report.samples] == ["no_answer", "empty_answer", "empty_reasoning", None]
    assert report.reasons == {"empty_answer": 1, "empty_reasoning": 1, "no_answer": 1}
    assert report.aoc.value == pytest.approx(0.5) and "3 of 4 samples undefined" in report.aoc.reason
    empty = truncation_analysis(model, tiny_tok, [], progress=False)
    assert empty.aoc.value is None and empty.aoc.reason == "no (prompt, completion) pairs"
    long_answer = "<think>a.\nb.</think><answer>" + "{U} " * 40 + "</answer>"
    capped = truncation_analysis(model, tiny_tok, [("Q", long_answer)], max_answer_tokens=8, progress=False)
    assert capped.samples[0].reason == "answer_too_long"


def test_bad_options(scripted, tiny_tok):
    model, _ = scripted
    with pytest.raises(ValueError, match="mode"):
        truncation_analysis(model, tiny_tok, [], mode="sample")
    with pytest.raises(ValueError, match="answer_probability"):
        truncation_analysis(model, tiny_tok, [], answer_probability="max")


# --------------------------------------------------------------------------- real tiny models


PAIRS = [
    ([{"role": "user", "content": "Which set blocks the backdoor path?"}], KEY_STEP_2),
    (
        "Is Alice a knight?",
        "<think>Alice says Bob is a knave. Bob lies. So Alice tells the truth.</think><answer>yes</answer>",
    ),
]


def _answer_logprob_unpadded(model, tokenizer, prompt_ids, context_text, answer):
    context = prompt_ids + tokenizer(context_text, add_special_tokens=False)["input_ids"]
    answer_ids = tokenizer(answer, add_special_tokens=False)["input_ids"]
    ids = torch.tensor([context + answer_ids])
    with torch.inference_mode():
        logprobs = torch.log_softmax(model(ids).logits[0].float(), -1)
    return sum(float(logprobs[len(context) + i - 1, tok]) for i, tok in enumerate(answer_ids))


@pytest.mark.parametrize("fixture", ["tiny_llama", "tiny_qwen2"])
def test_tiny_models_give_finite_values_in_range_and_match_unbatched_scoring(request, fixture):
    model, tokenizer = request.getfixturevalue(fixture)
    report = truncation_analysis(
        model, tokenizer, PAIRS, answer_probability="sequence", batch_size=3, n_bootstrap=50, progress=False
    )
    assert report.cir.value is not None and 0.0 <= report.cir.value <= 1.0
    for sample in report.samples:
        assert sample.reason is None
        assert all(0.0 < p <= 1.0 for p in sample.answer_prob)
        assert 0.0 <= sample.cir <= 1.0
    # The batched, left-padded score equals a plain forward pass on the full (unpadded) sequence.
    prompt_ids = tokenizer.apply_chat_template(PAIRS[0][0], add_generation_prompt=True, tokenize=False)
    prompt_ids = tokenizer(prompt_ids, add_special_tokens=False)["input_ids"]
    head_to_answer = KEY_STEP_2.split("{U}</answer>")[0]
    expected = _answer_logprob_unpadded(model, tokenizer, prompt_ids, head_to_answer, "{U}")
    assert math.log(report.samples[0].answer_prob[-1]) == pytest.approx(expected, abs=1e-4)
    # No-CoT truncation: "<think>" + "" + "</think>\n<answer>".
    expected0 = _answer_logprob_unpadded(model, tokenizer, prompt_ids, "<think></think>\n<answer>", "{U}")
    assert math.log(report.samples[0].answer_prob[0]) == pytest.approx(expected0, abs=1e-4)


def test_tiny_model_decode_mode_and_wrappers(tiny_llama):
    model, tokenizer = tiny_llama
    aoc = early_answering_aoc(
        model, tokenizer, PAIRS, mode="decode", max_answer_tokens=4, n_bootstrap=0, progress=False
    )
    assert aoc.value is not None and 0.0 <= aoc.value <= 1.0
    value = cir(model, tokenizer, PAIRS, n_bootstrap=0, progress=False)
    assert value.value is not None and 0.0 <= value.value <= 1.0
    assert not model.training


# --------------------------------------------------------------------------- CRoS Δ summary


def test_delta_summary_hand_values_and_reasons():
    scores = [
        CRoSScore(0.5),
        CRoSScore(None, "too_few_steps"),
        CRoSScore(1.5),
        CRoSScore(None, "no_answer"),
        CRoSScore(None, "too_few_steps"),
    ]
    summary = summarize_deltas(
        [*scores, -1.0, None, float("nan")], quantiles=(0.0, 0.5, 1.0), n_bootstrap=200
    )
    assert summary.n == 8 and summary.n_defined == 3
    assert summary.undefined == {"no_answer": 1, "non_finite": 1, "too_few_steps": 2, "undefined": 1}
    assert summary.mean.value == pytest.approx(1.0 / 3)
    assert "5 of 8 deltas undefined" in summary.mean.reason
    assert summary.mean.ci_low <= summary.mean.value <= summary.mean.ci_high
    assert summary.std == pytest.approx(np.std([0.5, 1.5, -1.0]))
    assert summary.quantiles == {0.0: -1.0, 0.5: 0.5, 1.0: 1.5}
    assert (summary.minimum, summary.maximum) == (-1.0, 1.5)
    assert summary.to_dict()["quantiles"] == {"0.0": -1.0, "0.5": 0.5, "1.0": 1.5}


def test_delta_summary_all_undefined():
    summary = summarize_deltas([None, CRoSScore(None, "no_answer")])
    assert summary.mean.value is None and "no defined CRoS delta among 2" in summary.mean.reason
    assert summary.quantiles == {} and summary.std is None
    assert summarize_deltas([]).mean.reason == "no completions"
    single = summarize_deltas([0.2])
    assert single.std is None and single.mean.value == 0.2


def test_completion_logprobs_match_unbatched_scoring(tiny_qwen2):
    from faithgrpo.eval.metrics.logprobs import completion_logprobs

    model, tokenizer = tiny_qwen2
    prompt = [{"role": "user", "content": "Is U a confounder?"}]
    completions = ["<answer>yes</answer>", "<think>U causes X and Y.</think><answer>{U}</answer>", ""]
    values = completion_logprobs(
        model, tokenizer, [(prompt, c) for c in completions], batch_size=2, progress=False
    )
    assert values[2] is None  # nothing to score
    prompt_ids = tokenizer(
        tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False),
        add_special_tokens=False,
    )["input_ids"]
    for text, value in zip(completions[:2], values[:2]):
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        total = _answer_logprob_unpadded(model, tokenizer, prompt_ids, "", text)
        assert value == pytest.approx(total / len(ids), abs=1e-4)


def test_the_early_answering_plot_draws_the_curve_and_its_band(scripted, tiny_tok, tmp_path):
    from matplotlib.collections import PolyCollection
    from matplotlib.figure import Figure

    from faithgrpo.eval.report import plots

    model, _ = scripted
    pairs = [("Find the set.", KEY_STEP_2), ("Find the set @", KEY_IN_PROMPT)]
    early = truncation_analysis(model, tiny_tok, pairs, n_bootstrap=200, progress=False).to_dict()
    report = {"checkpoints": [{"label": "ckpt", "faithfulness": {"early_answering": early}}]}
    saved = []
    original = Figure.savefig

    def keep(fig, path, **kwargs):
        saved.append(fig)
        return original(fig, path, **kwargs)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(Figure, "savefig", keep)
        assert plots.plot_early_answering(report, tmp_path / "early.png")
    assert (tmp_path / "early.png").stat().st_size > 0
    (ax,) = saved[0].axes
    (line,) = ax.get_lines()
    assert list(line.get_ydata()) == list(early["curve_agreement"])
    assert sum(isinstance(c, PolyCollection) for c in ax.collections) == 1  # the band
