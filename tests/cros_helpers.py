"""Tiny models and tokenizers for the CRoS tests, plus the 2-process worker.

Imported by tests/test_cros*.py. Run as a script under ``torchrun --nproc_per_node 2`` it scores a
fixed batch split across the ranks and writes each rank's rewards to ``$CROS_OUT/rank<k>.json``.
"""

from __future__ import annotations

import copy
import json
import os
import random
import sys
from itertools import pairwise
from types import SimpleNamespace

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from faithgrpo.trainers.distributed import shutdown_process_group

TAGS = ["<think>", "</think>", "<answer>", "</answer>"]

SIMPLE_CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def byte_tokenizer(bos: bool = False, chat_template: str | None = None) -> PreTrainedTokenizerFast:
    """A byte-level tokenizer without merges: every text (unicode included) maps to known tokens."""
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {"<pad>": 0, "<bos>": 1, "<eos>": 2}
    for ch in alphabet:
        vocab[ch] = len(vocab)
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    if bos:
        core.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", 1)])
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<pad>", bos_token="<bos>", eos_token="<eos>"
    )
    tok.add_tokens(TAGS)
    if chat_template is not None:
        tok.chat_template = chat_template
    return tok


def tiny_llama(vocab_size: int, seed: int = 0, layers: int = 2, hidden: int = 32) -> LlamaForCausalLM:
    """A randomly initialised float32 Llama, identical for the same seed in every process."""
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    model = LlamaForCausalLM(config)
    return model.eval()


def random_llama_with_tokenizer(seed: int = 0, bos: bool = False, chat_template: str | None = None):
    """``(model, tokenizer)``: a tiny random Llama over `byte_tokenizer` (parameters trainable, as built)."""
    tok = byte_tokenizer(bos=bos, chat_template=chat_template)
    return tiny_llama(len(tok), seed=seed), tok


# --------------------------------------------------------------------------- in-context scoring

METASPACE_CORPUS = [
    "Q: what is 4,2 reversed? Step 1: read 4,2 Step 2: swap to 2,4",
    "Step 1: x = 4 Step 2: y = 2 so the pair is 4,2",
    "the answer is 4,2 and 2,4 is not",
]


def metaspace_tokenizer(chat_template: str | None = SIMPLE_CHAT_TEMPLATE) -> PreTrainedTokenizerFast:
    """A SentencePiece-style tokenizer: BPE over a Metaspace pre-tokenizer (``prepend_scheme="first"``).

    ``▁`` marks a word start, and the text's first word gets one too. So ``"4,2"`` tokenised alone
    starts with ``▁4``, while after ``<answer>`` inside a completion it starts with ``4``.
    """
    from tokenizers import trainers

    core = Tokenizer(models.BPE(unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    core.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first")
    alphabet = sorted(set("".join(METASPACE_CORPUS)) | set("abcdefghijklmnopqrstuvwxyz0123456789:,.?=\n▁"))
    trainer = trainers.BpeTrainer(
        vocab_size=200,
        special_tokens=["<pad>", "<unk>", "<bos>"],
        initial_alphabet=alphabet,
        show_progress=False,
    )
    core.train_from_iterator(METASPACE_CORPUS * 8, trainer=trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<pad>", unk_token="<unk>", bos_token="<bos>"
    )
    tok.add_tokens(TAGS)
    if chat_template is not None:
        tok.chat_template = chat_template
    return tok


def decoded_offsets(tok, ids: list[int], text: str) -> list[tuple[int, int]]:
    """Each token's character span in ``text``, found without the tokenizer's offsets: token ``k``
    spans from the length of the decoded ``ids[:k]`` to that of ``ids[:k + 1]`` (every decoded
    prefix must be a prefix of ``text``, which holds for the byte-level and Metaspace test tokenizers
    on ASCII text)."""
    ends = [0]
    for k in range(1, len(ids) + 1):
        decoded = tok.decode(ids[:k], clean_up_tokenization_spaces=False)
        assert text.startswith(decoded), (decoded, text)
        ends.append(len(decoded))
    assert ends[-1] == len(text)
    return list(pairwise(ends))


def stripped_span(start: int, end: int, text: str) -> tuple[int, int]:
    """``(start, end)`` narrowed to the answer without its outer whitespace."""
    answer = text[start:end]
    lead = len(answer) - len(answer.lstrip())
    return start + lead, start + lead + len(answer.strip())


def naive_logprob(model, prompt_ids: list[int], tok, text: str, start: int, end: int) -> float:
    """ℓ the slow, obvious way: tokenise the completion whole, take the tokens whose decoded
    character span overlaps ``text[start:end]`` (the answer without its outer whitespace), one
    unpadded forward over prompt + completion in float64, full log-softmax."""
    ids = tok(text, add_special_tokens=False)["input_ids"]
    answer = [k for k, (a, b) in enumerate(decoded_offsets(tok, ids, text)) if a < end and b > start]
    assert answer == list(range(answer[0], answer[-1] + 1))
    ids = list(prompt_ids) + ids[: answer[-1] + 1]
    model64 = copy.deepcopy(model).double()
    with torch.no_grad():
        logprobs = torch.log_softmax(model64(input_ids=torch.tensor([ids])).logits[0], dim=-1)
    first = len(prompt_ids) + answer[0]
    return sum(logprobs[first + t - 1, ids[first + t]].item() for t in range(len(answer))) / len(answer)


def naive_delta(model, tok, prompt, completion: str, num_scrambles: int, seed: int, prompt_ids=None) -> float:
    """Δ with `naive_logprob`, from the completion text (``<think>`` reasoning, ``<answer>`` span
    without its outer whitespace)."""
    from faithgrpo.rewards.steps import apply_permutation, scramble_permutations, scramble_seed, step_spans
    from faithgrpo.text import prompt_text

    if prompt_ids is None:
        if isinstance(prompt, list):
            rendered = tok.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
            prompt_ids = tok(rendered, add_special_tokens=False)["input_ids"]
        else:
            prompt_ids = tok(prompt)["input_ids"]
    open_, close = completion.index("<think>") + len("<think>"), completion.index("</think>")
    reasoning = completion[open_:close]
    spans = step_spans(reasoning)
    perms = scramble_permutations(
        len(spans), num_scrambles, scramble_seed(seed, prompt_text(prompt), completion)
    )
    answer_start, answer_end = stripped_span(
        completion.rindex("<answer>") + len("<answer>"), completion.rindex("</answer>"), completion
    )

    def ell(r: str) -> float:
        text = completion[:open_] + r + completion[close:]
        shift = len(r) - len(reasoning)
        return naive_logprob(model, prompt_ids, tok, text, answer_start + shift, answer_end + shift)

    scrambled = [ell(apply_permutation(reasoning, spans, p)) for p in perms]
    return ell(reasoning) - sum(scrambled) / len(scrambled)


# --------------------------------------------------------------------------- trained toy

_DIGITS = [str(d) for d in range(10)]


def word_tokenizer() -> PreTrainedTokenizerFast:
    vocab = {w: i for i, w in enumerate(["<pad>", "[UNK]", "Q", "set", "ans", *_DIGITS])}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", unk_token="[UNK]")
    tok.add_tokens(TAGS)
    return tok


def ordered_chain(values: list[int]) -> str:
    """Assignments executed in order: the answer is the value assigned last."""
    steps = "\n".join(f"set {v}" for v in values)
    return f"<think>{steps}</think><answer>{values[-1]}</answer>"


def leaking_chain(answer: int, decoys: list[int], position: int = 0) -> str:
    """The answer is stated outright in one step; the other steps are decorative assignments."""
    steps = [f"set {v}" for v in decoys]
    steps.insert(position, f"ans {answer}")
    return "<think>" + "\n".join(steps) + f"</think><answer>{answer}</answer>"


def _toy_example(rng: random.Random) -> str:
    n = rng.randint(2, 5)
    values = rng.sample(range(10), n)
    if rng.random() < 0.5:
        return ordered_chain(values)
    return leaking_chain(values[0], values[1:], position=rng.randrange(n))


def toy_ids(tok, prompt: str, completion: str) -> list[int]:
    """Token ids as CRoS builds them: prompt, completion through ``<answer>``, answer content."""
    prefix, answer = completion.split("<answer>")
    ids = tok(prompt)["input_ids"] + tok(prefix + "<answer>", add_special_tokens=False)["input_ids"]
    return ids + tok(answer.replace("</answer>", ""), add_special_tokens=False)["input_ids"]


def trained_toy(steps: int = 250, seed: int = 0):
    """A 2-layer Llama trained until it answers from the ordered chain or from a stated answer.

    The training data mixes ordered assignment chains (answer = last assigned value, so only the
    order of the steps determines it) with answer-leaking chains (``ans v`` anywhere in the
    reasoning). Loss is on the answer token only. About 15 s on one CPU thread. Returns
    (model, tokenizer, final loss).
    """
    tok = word_tokenizer()
    rng = random.Random(seed)
    data = [toy_ids(tok, "Q", _toy_example(rng)) for _ in range(4000)]
    answer_open = tok.convert_tokens_to_ids("<answer>")
    threads = torch.get_num_threads()
    # Tiny matmuls: one thread beats two contending ones on a shared 2-core machine.
    torch.set_num_threads(1)
    try:
        torch.manual_seed(seed)
        config = LlamaConfig(
            vocab_size=len(tok),
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=4,
            max_position_embeddings=64,
            pad_token_id=0,
        )
        model = LlamaForCausalLM(config)
        optimizer = torch.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.0)
        batch_size = 64
        loss = torch.tensor(float("nan"))
        for step in range(steps):
            batch = [data[(step * batch_size + i) % len(data)] for i in range(batch_size)]
            width = max(len(b) for b in batch)
            input_ids = torch.tensor([b + [0] * (width - len(b)) for b in batch])
            # Position of the answer token in each row; it is predicted from the position before.
            answer_pos = torch.tensor([b.index(answer_open) + 1 for b in batch])
            logits = model(input_ids=input_ids, attention_mask=(input_ids != 0).long()).logits
            rows = torch.arange(batch_size)
            loss = torch.nn.functional.cross_entropy(
                logits[rows, answer_pos - 1], input_ids[rows, answer_pos]
            )
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    finally:
        torch.set_num_threads(threads)
    return model.eval(), tok, float(loss.detach())


class CopyModel(torch.nn.Module):
    """A hand-set causal LM over `word_tokenizer` with the HF interface.

    At each position it predicts (log-odds ``strength``) the token right after the last ``ans`` seen
    so far, or else the token two positions back, which before ``<answer>`` is the value of the
    last ``set`` step (``... set 7 </think> <answer>``). So the answer follows the order of an
    ordered chain and ignores the order of a chain that states its answer.
    """

    def __init__(self, tok, strength: float = 8.0):
        super().__init__()
        self.vocab_size = len(tok)
        self.ans_id = tok.convert_tokens_to_ids("ans")
        self.strength = strength
        # Gives the module a device and dtype; frozen, as a reference is.
        self.anchor = torch.nn.Parameter(torch.zeros(()), requires_grad=False)
        self.config = LlamaConfig(vocab_size=self.vocab_size, max_position_embeddings=64)

    def forward(self, input_ids, attention_mask=None, position_ids=None, logits_to_keep=0, use_cache=None):
        batch, width = input_ids.shape
        positions = torch.arange(width, device=input_ids.device).expand(batch, width)
        is_ans = input_ids == self.ans_id
        last_ans = torch.where(is_ans, positions, torch.full_like(positions, -1)).cummax(dim=1).values
        source = torch.where(last_ans >= 0, last_ans + 1, positions - 2).clamp(0, width - 1)
        # "ans" at the current position: the stated value is not visible yet, fall back to copying.
        source = torch.where(source > positions, (positions - 2).clamp(min=0), source)
        copied = input_ids.gather(1, source)
        logits = torch.nn.functional.one_hot(copied, self.vocab_size).float() * self.strength
        logits = logits + self.anchor
        if logits_to_keep:
            logits = logits[:, -logits_to_keep:]
        return SimpleNamespace(logits=logits)


# --------------------------------------------------------------------------- distributed worker

# 3 prompts x G=4: with 6 rows per rank, the second group straddles the two processes.
DIST_PROMPTS = ["p0: count", "p1: add up", "p2: and so"]
DIST_G = 4


def dist_batch() -> tuple[list[str], list[str]]:
    prompts, completions = [], []
    for i, prompt in enumerate(DIST_PROMPTS):
        for j in range(DIST_G):
            prompts.append(prompt)
            if (i, j) == (1, 3):
                completions.append("no answer at all")  # undefined: must rank lowest globally
            else:
                completions.append(
                    f"<think>Step 1: x{i} is {j}\nStep 2: y{j} gets {i + j}\nStep 3: sum {2 * i + j}"
                    f"</think><answer>{(i * 7 + j * 3) % 10}</answer>"
                )
    return prompts, completions


def _worker() -> None:
    from accelerate import PartialState

    from faithgrpo.rewards.cros.reward import CRoSReward

    state = PartialState(cpu=True)
    model, tok = random_llama_with_tokenizer(seed=3)
    cros = CRoSReward(model, tok, num_scrambles=3, seed=11, batch_size=5)
    prompts, completions = dist_batch()
    per_rank = len(prompts) // state.num_processes
    lo = state.process_index * per_rank
    logged = {}
    rewards = cros(
        prompts[lo : lo + per_rank],
        completions[lo : lo + per_rank],
        log_metric=lambda name, value: logged.__setitem__(name, value),
    )
    out = {
        "rank": state.process_index,
        "world": state.num_processes,
        "backend": torch.distributed.get_backend() if torch.distributed.is_initialized() else None,
        "rewards": rewards,
        "deltas": [s.delta for s in cros.last_scores],
        "metrics": logged,
    }
    with open(os.path.join(os.environ["CROS_OUT"], f"rank{state.process_index}.json"), "w") as f:
        json.dump(out, f)
    shutdown_process_group()


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    _worker()
