"""TRL glue: GRPO/RLOO trainers run with every faithgrpo reward; CRoS scores with the initial policy."""

from __future__ import annotations

import json

import pytest
import torch
from datasets import Dataset
from peft import LoraConfig
from trainer_helpers import tiny_run_args
from trl import RLOOConfig

from faithgrpo.rewards.cros.reward import CRoSReward
from faithgrpo.rewards.registry import REWARD_NAMES, get_reward_funcs
from faithgrpo.testing import tiny_causal_lm
from faithgrpo.text import completion_text
from faithgrpo.trainers import FaithGRPOTrainer, FaithRLOOTrainer

PROBLEM = json.dumps(
    {
        "graph": {
            "type": "DAG",
            "nodes": ["U", "X", "Y"],
            "directed": [["U", "X"], ["U", "Y"], ["X", "Y"]],
            "bidirected": [],
        },
        "query": {"kind": "backdoor_set", "treatment": "X", "outcome": "Y"},
    }
)
# Completions that give CRoS a defined Δ (two steps and an answer), for checking the reference.
SCORED = [
    "<think>Step 1: U opens X <- U -> Y.\nStep 2: adjust for U.</think><answer>{U}</answer>",
    "<think>Step 1: X -> Y is causal.\nStep 2: nothing to block.</think><answer>{}</answer>",
]


def _text_length(completions, **kwargs):
    """A reward that varies within every group, so advantages are non-zero and the policy moves."""
    return [len(completion_text(c)) / 50 for c in completions]


def _dataset(n: int = 8) -> Dataset:
    return Dataset.from_list(
        [
            {
                "prompt": [{"role": "user", "content": f"Question {i}: adjust?"}],
                "problem": PROBLEM,
                "answer": "{U}",
            }
            for i in range(n)
        ]
    )


def _reference_deltas(model, tokenizer, reward=None):
    reward = reward or CRoSReward(model, tokenizer, num_scrambles=2, seed=0)
    prompts = [[{"role": "user", "content": "Question: adjust?"}]] * len(SCORED)
    return [s.delta for s in reward.compute_deltas(zip(prompts, SCORED))]


@pytest.mark.slow
def test_grpo_lora_logs_every_reward_and_cros_uses_disabled_adapters(tmp_path):
    model, tok = tiny_causal_lm("llama", seed=0)
    initial, _ = tiny_causal_lm("llama", seed=0)  # an independent copy of the initial weights
    funcs = get_reward_funcs(REWARD_NAMES, cros_num_scrambles=2)
    trainer = FaithGRPOTrainer(
        model=model,
        reward_funcs=[*funcs, _text_length],
        args=tiny_run_args(tmp_path),
        train_dataset=_dataset(),
        processing_class=tok,
        # A fresh zero-initialised LoRA: adapters disabled is exactly the initial policy. (Non-zero
        # initialisations and warm starts: tests/test_cros_binding.py.)
        peft_config=LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]),
    )
    assert trainer.cros_reference_mode == "peft_disabled_adapters"
    cros = funcs[REWARD_NAMES.index("cros")]
    assert cros.num_generations == 4
    trainer.train()

    logged = {key for entry in trainer.state.log_history for key in entry}
    for name in REWARD_NAMES:
        assert f"rewards/{name}/mean" in logged, name
    # The adapters changed the policy, yet CRoS scores exactly with the initial weights.
    bound = _reference_deltas(None, None, reward=cros)
    expected = _reference_deltas(initial, tok)
    assert bound == pytest.approx(expected, abs=1e-5)
    with_adapters = CRoSReward(trainer.model, tok, num_scrambles=2, seed=0)
    assert _reference_deltas(None, None, reward=with_adapters) != pytest.approx(expected, abs=1e-5)


@pytest.mark.slow
def test_grpo_full_finetune_binds_a_frozen_copy(tmp_path):
    model, tok = tiny_causal_lm("qwen2", seed=1)
    initial, _ = tiny_causal_lm("qwen2", seed=1)
    funcs = get_reward_funcs("outcome,cros", cros_num_scrambles=2)
    trainer = FaithGRPOTrainer(
        model=model,
        reward_funcs=[*funcs, _text_length],
        args=tiny_run_args(tmp_path),
        train_dataset=_dataset(),
        processing_class=tok,
    )
    assert trainer.cros_reference_mode == "frozen_copy"
    cros = funcs[1]
    assert cros.model is not trainer.model
    assert not any(p.requires_grad for p in cros.model.parameters())
    trainer.train()
    changed = any(not torch.equal(a, b) for a, b in zip(trainer.model.parameters(), initial.parameters()))
    assert changed, "the policy should have moved"
    assert _reference_deltas(None, None, reward=cros) == pytest.approx(
        _reference_deltas(initial, tok), abs=1e-5
    )


@pytest.mark.slow
def test_rloo_accepts_the_same_rewards(tmp_path):
    model, tok = tiny_causal_lm("llama", seed=2)
    funcs = get_reward_funcs("outcome,format,trace_format,cros", cros_num_scrambles=2)
    trainer = FaithRLOOTrainer(
        model=model,
        reward_funcs=funcs,
        args=tiny_run_args(tmp_path, RLOOConfig),
        train_dataset=_dataset(),
        processing_class=tok,
        peft_config=LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]),
    )
    assert trainer.cros_reference_mode == "peft_disabled_adapters"
    trainer.train()
    logged = {key for entry in trainer.state.log_history for key in entry}
    assert {"rewards/outcome/mean", "rewards/cros/mean", "rewards/trace_format/mean"} <= logged


def test_reward_registry_errors_name_the_fix():
    with pytest.raises(ValueError, match="choose from outcome, format"):
        get_reward_funcs("outcome,accuracy")
    with pytest.raises(ValueError, match="given twice"):
        get_reward_funcs(["format", "format"])
    with pytest.raises(ValueError, match="does not belong to a requested reward"):
        get_reward_funcs("outcome", cros_num_scrambles=2)
    with pytest.raises(ValueError, match="No reward names"):
        get_reward_funcs(" , ")


def test_registry_routes_options_and_gates_cros_on_correct_answers(tiny_llama):
    model, tok = tiny_llama
    _, cros = get_reward_funcs(
        "outcome, cros", cros_reference=model, cros_tokenizer=tok, cros_gate="correct", cros_num_scrambles=3
    )
    assert cros.num_scrambles == 3 and cros.gate == "correct"
    prompts = [[{"role": "user", "content": "q"}]] * 2
    rewards = cros(prompts, SCORED, problem=[PROBLEM] * 2)
    # SCORED[1] answers {} (wrong), so it is gated out and ranks lowest; SCORED[0] is graded and ranks above.
    assert [s.reason for s in cros.last_scores][1] == "gated"
    assert rewards == [1.0, 0.0]


def _fused_pass(model, input_ids, labels):
    """TRL's fused LM head forward + backward: (log_probs, entropy, grad of the first layer's q_proj)."""
    model.zero_grad()
    out = model(
        input_ids=input_ids, attention_mask=torch.ones_like(input_ids), labels=labels, fused_lm_head=True
    )
    (out.log_probs.sum() + 0.1 * out.entropy.sum()).backward()
    grad = model.model.layers[0].self_attn.q_proj.weight.grad.clone()
    return out.log_probs.detach(), out.entropy.detach(), out.label_mask, grad


def test_compact_cpu_lm_head_scores_only_labelled_positions_with_the_same_values(tiny_llama, monkeypatch):
    """On CPU, FaithGRPOTrainer's log-prob pass projects only labelled positions, in narrow tiles,
    and gets the log-probs, entropies and gradients of a full-logits computation."""
    from trl.trainer import utils as trl_utils

    if not hasattr(
        trl_utils, "add_fused_lm_head"
    ):  # TRL < 1.15: no fused head, compact_cpu_lm_head is a no-op
        from faithgrpo.trainers.grpo import compact_cpu_lm_head

        with compact_cpu_lm_head() as patched:
            assert patched is False
        pytest.skip("this TRL has no fused LM head (trl.trainer.utils.add_fused_lm_head, TRL >= 1.15)")
    from trl.trainer.utils import add_fused_lm_head

    from faithgrpo.trainers.grpo import compact_cpu_lm_head

    model, _ = tiny_llama
    model.train()
    add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    torch.manual_seed(1)
    input_ids = torch.randint(3, model.config.vocab_size, (3, 20))
    labels = input_ids.clone()
    labels[:, :12] = -100  # a prompt of 12 tokens: only the completion's 8 labels count
    labels[2, 17:] = -100  # a shorter completion

    calls = []
    apply = trl_utils._ChunkedLogProbFunction.apply

    def spy(hidden, weight, bias, targets, temperature, chunk_size, *rest):
        calls.append((hidden.shape[0], chunk_size))
        return apply(hidden, weight, bias, targets, temperature, chunk_size, *rest)

    monkeypatch.setattr(trl_utils._ChunkedLogProbFunction, "apply", spy)
    default = _fused_pass(model, input_ids, labels)
    with compact_cpu_lm_head(vocab_chunk=100) as patched:
        compact = _fused_pass(model, input_ids, labels)
    assert patched
    valid = int((labels[:, 1:] != -100).sum())
    assert calls == [(3 * 19, trl_utils._CHUNKED_LOGPROB_CHUNK_SIZE), (valid, 100)]
    assert trl_utils._CHUNKED_LOGPROB_CHUNK_SIZE == 32768  # restored

    # Independent expectation: log-softmax of the model's own full logits at the labels.
    model.zero_grad()
    logits = model(input_ids=input_ids).logits[:, :-1].float()
    mask = labels[:, 1:] != -100
    logp_all = torch.log_softmax(logits, dim=-1)
    target = labels[:, 1:].clamp(min=0)
    expected_logp = logp_all.gather(-1, target.unsqueeze(-1)).squeeze(-1) * mask
    expected_entropy = -(logp_all.exp() * logp_all).sum(-1) * mask
    (expected_logp.sum() + 0.1 * expected_entropy.sum()).backward()
    expected_grad = model.model.layers[0].self_attn.q_proj.weight.grad
    for logp, entropy, label_mask, grad in (default, compact):
        assert torch.equal(label_mask, mask)
        torch.testing.assert_close(logp, expected_logp, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(entropy, expected_entropy, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(grad, expected_grad, atol=1e-5, rtol=1e-4)


def test_faith_trainers_hold_the_compact_head_on_cpu_only(monkeypatch):
    """The override enters compact_cpu_lm_head around TRL's log-prob pass on CPU, not elsewhere."""
    from types import SimpleNamespace

    from trl.trainer import utils as trl_utils

    if not hasattr(trl_utils, "_CHUNKED_LOGPROB_CHUNK_SIZE"):
        pytest.skip("this TRL has no fused LM head to narrow (TRL >= 1.15)")
    seen = []

    def fake_pass(self, *args, **kwargs):
        seen.append((trl_utils._CHUNKED_LOGPROB_CHUNK_SIZE, trl_utils._use_triton(torch.device("cpu"))))
        return "out"

    for cls, base in ((FaithGRPOTrainer, "trl.GRPOTrainer"), (FaithRLOOTrainer, "trl.RLOOTrainer")):
        monkeypatch.setattr(f"{base}._get_per_token_logps_and_entropies", fake_pass)
        for device in ("cpu", "meta"):
            trainer = object.__new__(cls)
            trainer.accelerator = SimpleNamespace(device=torch.device(device))
            assert trainer._get_per_token_logps_and_entropies("model", "ids") == "out"
    assert seen == [(8192, True), (32768, False)] * 2
