"""The decode engine as TRL's rollout (faithgrpo.trainers.rollout) and the per-phase step timings.

Independent expectations: TRL's own generation path fed the same tokens (loss and gradients), the
PEFT model's own forward (log-probabilities, greedy ``generate``), a chi-square test against the
warped softmax of that forward, and hand-stated properties of the timing keys.
"""

from __future__ import annotations

import copy
import math
import pickle

import pytest
import torch
from datasets import Dataset
from peft import LoraConfig, get_peft_model
from trainer_helpers import tiny_run_args

from faithgrpo.eval.generation.decoding import decode_rows, unsupported_reason
from faithgrpo.eval.generation.sampling import next_token_scores
from faithgrpo.eval.generation.settings import prompt_ids
from faithgrpo.testing import tiny_causal_lm
from faithgrpo.trainers import FaithGRPOTrainer
from faithgrpo.trainers.rollout import DecodeRollout, call_seed, trainer_reason
from faithgrpo.trainers.timing import PHASES

QUESTIONS = ["Question 0: adjust?", "GRAPH: A -> B; B -> C", "Alice says Bob is a knave.", "What is 12 + 30?"]


def _length(completions, **kwargs):
    """Varies within every group, so advantages (and gradients) are non-zero."""
    return [len(c[0]["content"]) / 50 for c in completions]


def _dataset() -> Dataset:
    return Dataset.from_list([{"prompt": [{"role": "user", "content": q}]} for q in QUESTIONS])


def _lora_policy(dtype=torch.float32, seed=0, **lora):
    """A tiny Llama with a non-zero LoRA (so the adapter's weights change what is sampled)."""
    model, tokenizer = tiny_causal_lm("llama", seed=seed)
    torch.manual_seed(seed + 1)
    config = LoraConfig(
        r=4,
        lora_alpha=8,
        target_modules=["q_proj", "v_proj", "gate_proj", "down_proj"],
        init_lora_weights=False,
        **lora,
    )
    policy = get_peft_model(model, config).to(dtype)
    return policy, tokenizer


RUN = dict(max_steps=1, per_device_train_batch_size=8, max_completion_length=10, learning_rate=1e-2)


def _trainer(policy, tokenizer, tmp_path, rollout=None, **overrides):
    return FaithGRPOTrainer(
        model=policy,
        reward_funcs=[_length],
        args=tiny_run_args(tmp_path, **{**RUN, **overrides}),
        train_dataset=_dataset(),
        processing_class=tokenizer,
        rollout_func=rollout,
    )


def _batch():
    """TRL's batch layout: each prompt repeated G = 4 times, consecutively."""
    return [{"prompt": [{"role": "user", "content": q}]} for q in QUESTIONS[:2] for _ in range(4)]


def _loss_and_grads(trainer, inputs):
    trainer.model.zero_grad()
    trainer.current_gradient_accumulation_steps = (
        1  # set by TRL's train loop; this test calls the loss itself
    )
    loss = trainer.compute_loss(trainer.model, inputs)
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    return loss.detach(), grads


def test_same_tokens_give_trls_loss_and_gradients_in_float64(tmp_path):
    policy, tokenizer = _lora_policy(torch.float64)
    twin = copy.deepcopy(policy)
    rollout = DecodeRollout()
    ours = _trainer(policy, tokenizer, tmp_path / "a", rollout)
    theirs = _trainer(twin, tokenizer, tmp_path / "b")
    assert rollout.describe(ours).startswith("rollout: the decode engine")
    ours.model.train()
    theirs.model.train()
    a = ours._generate_and_score_completions(_batch())
    completions = a["completion_ids"]  # right-padded with pad ids; the mask says which are real
    lengths = a["completion_mask"].sum(dim=1)
    assert rollout.last_stats[3] == "decode" and rollout.last_stats[1] == int(lengths.sum())

    def replay(**kwargs):  # TRL's default path, handed the tokens the engine sampled
        input_ids = kwargs["input_ids"]
        return torch.cat([input_ids, completions.to(input_ids.dtype)], dim=1)

    twin.generate = replay
    b = theirs._generate_and_score_completions(_batch())
    assert torch.equal(a["prompt_ids"], b["prompt_ids"]) and torch.equal(
        a["completion_mask"], b["completion_mask"]
    )
    assert torch.equal(a["completion_ids"] * a["completion_mask"], b["completion_ids"] * b["completion_mask"])
    assert torch.allclose(a["advantages"], b["advantages"], atol=1e-12)
    loss_a, grads_a = _loss_and_grads(ours, a)
    loss_b, grads_b = _loss_and_grads(theirs, b)
    assert abs(float(loss_a) - float(loss_b)) < 1e-12
    assert grads_a.keys() == grads_b.keys() and grads_a
    assert any(float(g.abs().max()) > 1e-8 for g in grads_a.values())  # the test compares real gradients
    for name, grad in grads_a.items():
        assert torch.allclose(grad, grads_b[name], atol=1e-12, rtol=1e-9), name


def _full_logits(model, ids):
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids])).logits[0].double()


@pytest.mark.parametrize(("temperature", "top_p"), [(1.0, 1.0), (0.7, 0.9)])
def test_logprobs_are_the_live_adapters_warped_softmax(temperature, top_p):
    policy, tokenizer = _lora_policy(torch.float64)
    policy.train()  # as during training: the engine ignores mode (no dropout in sampling)
    encoded = [prompt_ids(tokenizer, [{"role": "user", "content": q}]) for q in QUESTIONS[:2]]
    rows = [(i, j) for i in range(2) for j in range(3)]
    logprobs: list[list[float]] = []
    tokens = decode_rows(
        policy, encoded, rows, temperature=temperature, top_p=top_p, max_new_tokens=8, slots=4,
        eos={tokenizer.eos_token_id}, seed=3, logprobs=logprobs,
    )  # fmt: skip
    base = policy.get_base_model()
    checked = 0
    for (i, _), row, logps in zip(rows, tokens, logprobs):
        assert len(row) == len(logps)
        logits = _full_logits(policy, encoded[i] + row)[len(encoded[i]) - 1 : -1]
        expected = torch.log_softmax(next_token_scores(logits.float(), temperature, top_p).double(), dim=-1)
        with policy.disable_adapter():
            plain = torch.log_softmax(_full_logits(base, encoded[i] + row)[len(encoded[i]) - 1 : -1], -1)
        for t, token in enumerate(row):
            assert logps[t] == pytest.approx(float(expected[t, token]), abs=1e-4)
            checked += 1
        assert any(abs(logps[t] - float(plain[t, tok])) > 1e-2 for t, tok in enumerate(row))  # LoRA matters
    assert checked >= 12


def test_first_tokens_follow_the_warped_softmax_chi_square():
    policy, tokenizer = _lora_policy()
    with torch.no_grad():  # a larger adapter, so the adapter-free distribution is clearly another one
        for name, parameter in policy.named_parameters():
            if "lora_B" in name:
                parameter.mul_(8)
    encoded = [prompt_ids(tokenizer, [{"role": "user", "content": QUESTIONS[0]}])]
    n, temperature, top_p = 3000, 0.8, 0.95
    tokens = decode_rows(
        policy, encoded, [(0, j) for j in range(n)], temperature=temperature, top_p=top_p,
        max_new_tokens=1, slots=1, eos=set(), seed=11,
    )  # fmt: skip
    counts = torch.bincount(torch.tensor([t[0] for t in tokens]), minlength=len(tokenizer)).double()

    def warped(model):
        logits = _full_logits(model, encoded[0])[-1]
        return next_token_scores(logits[None].float(), temperature, top_p).softmax(-1)[0].double()

    def chi_square(p):
        big = p * n >= 5  # tokens expected at least 5 times; the rest pooled
        expected = torch.cat([p[big] * n, (p[~big].sum() * n)[None]])
        observed = torch.cat([counts[big], counts[~big].sum()[None]])
        keep = expected > 0
        stat = float((((observed - expected) ** 2)[keep] / expected[keep]).sum())
        if bool((observed[~keep] > 0).any()):  # a draw where the distribution has no mass
            stat = math.inf
        return stat, int(keep.sum()) - 1

    stat, dof = chi_square(warped(policy))
    # cut-off about 5 standard deviations (sqrt(2 dof)) above the mean dof: p ~ 1e-6
    assert stat < dof + 5 * math.sqrt(2 * dof), (stat, dof)
    with policy.disable_adapter():
        wrong, wrong_dof = chi_square(warped(policy))
    assert wrong > wrong_dof + 5 * math.sqrt(2 * wrong_dof), (wrong, wrong_dof)  # the base model is rejected


def test_greedy_equals_the_peft_models_generate():
    policy, tokenizer = _lora_policy()
    policy.eval()
    encoded = [prompt_ids(tokenizer, [{"role": "user", "content": q}]) for q in QUESTIONS]
    tokens = decode_rows(
        policy, encoded, [(i, 0) for i in range(len(encoded))], temperature=0.0, top_p=1.0,
        max_new_tokens=12, slots=3, eos={tokenizer.eos_token_id}, seed=0,
    )  # fmt: skip
    for ids, ours in zip(encoded, tokens):
        x = torch.tensor([ids])
        out = policy.generate(
            input_ids=x, attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=12,
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
        )  # fmt: skip
        assert out[0, x.shape[1] :].tolist()[: len(ours)] == ours


def test_lora_variants_and_wrapped_heads_are_refused_with_a_reason():
    dora, _ = _lora_policy(use_dora=True)
    assert "DoRA" in unsupported_reason(dora)
    model, _ = tiny_causal_lm("llama", seed=0)
    head = get_peft_model(model, LoraConfig(r=2, target_modules=["q_proj"], modules_to_save=["lm_head"]))
    assert "LM head" in unsupported_reason(head)
    plain, _ = _lora_policy()
    assert unsupported_reason(plain) is None


def test_unsupported_sampling_falls_back_to_trls_generation_with_one_line(tmp_path, capsys):
    policy, tokenizer = _lora_policy()
    rollout = DecodeRollout()
    trainer = _trainer(policy, tokenizer, tmp_path, rollout, top_k=5)
    assert "top_k=5" in trainer_reason(trainer)
    trainer.train()
    assert rollout.last_stats[3] == "generate"
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("rollout:")]
    assert lines == [
        "rollout: TRL's generation (the trainer samples with top_k=5, which the engine does not apply)"
    ]


def _train_completions(tmp_path, seed):
    policy, tokenizer = _lora_policy()
    rollout = DecodeRollout()
    trainer = _trainer(policy, tokenizer, tmp_path, rollout, max_steps=2, seed=seed, log_completions=False)
    seen = []
    real = rollout._decode

    def recorded(trainer, ids):
        out = real(trainer, ids)
        seen.append(out[0])
        return out

    rollout._decode = recorded
    trainer.train()
    return seen, trainer


@pytest.mark.slow
def test_training_with_the_engine_is_reproducible_and_logs_every_phase(tmp_path):
    first, trainer = _train_completions(tmp_path / "a", seed=0)
    again, _ = _train_completions(tmp_path / "b", seed=0)
    other, _ = _train_completions(tmp_path / "c", seed=1)
    assert len(first) == 2 and first == again and first != other
    assert first[0] != first[1]  # each step samples with a seed of its own
    logged = [e for e in trainer.state.log_history if "loss" in e]
    assert len(logged) == 2
    for entry in logged:
        for phase in (*PHASES, "reward/_length"):
            assert entry[f"time/{phase}"] >= 0, phase
        parts = sum(
            entry[f"time/{p}"]
            for p in ("generation", "rewards", "scoring", "forward", "backward", "optimizer")
        )
        assert entry["time/generation"] > 0 and entry["time/backward"] > 0 and entry["time/forward"] > 0
        assert parts <= entry["time/step"] * 1.001 + 1e-4  # phases are disjoint parts of the step
        assert entry["time/generation_tokens_per_second"] > 0


def test_call_seeds_differ_by_step_call_and_process_and_the_rollout_pickles():
    seeds = {call_seed(0, p, s, c) for p in range(2) for s in range(3) for c in range(2)}
    assert len(seeds) == 12
    clone = pickle.loads(pickle.dumps(DecodeRollout(slots=8)))
    assert clone.slots == 8 and clone.__name__ == "decode_rollout"
    with pytest.raises(ValueError, match="slots"):
        DecodeRollout(slots=0)


def test_recipe_rollout_choice_auto_takes_the_engine_on_cpu_only():
    from types import SimpleNamespace

    from faithgrpo.trainers.rollout import check_rollout_choice, rollout_for, rollout_line

    assert check_rollout_choice("auto", False) is None and check_rollout_choice("trl", True) is None
    assert "one of auto, decode, trl" in check_rollout_choice("fast", False)
    assert "use_vllm" in check_rollout_choice("decode", True)
    cpu = SimpleNamespace(use_cpu=True, use_vllm=False)
    assert isinstance(rollout_for("auto", cpu), DecodeRollout) and isinstance(
        rollout_for("decode", cpu), DecodeRollout
    )
    assert rollout_for("trl", cpu) is None
    assert rollout_for("auto", SimpleNamespace(use_cpu=True, use_vllm=True)) is None
    assert rollout_line("trl", cpu, None, None) == "rollout: TRL's generation (--rollout trl)"
    assert (
        rollout_line("auto", SimpleNamespace(use_vllm=True), None, None)
        == "rollout: TRL's generation (use_vllm)"
    )


def test_recipe_refuses_a_bad_rollout_before_any_model_loads(tmp_path):
    from faithgrpo.trainers.checks import RecipeError
    from faithgrpo.trainers.recipe import parse_recipe_args, validate

    script, training, model = parse_recipe_args(
        ["--model_name_or_path", "embedded", "--output_dir", str(tmp_path), "--rollout", "fastest",
         "--reward_funcs", "outcome", "--use_cpu", "true"]
    )  # fmt: skip
    with pytest.raises(RecipeError, match="--rollout must be one of auto, decode, trl"):
        validate(script, training, model, check_paths=False)


def test_bench_rollout_compute_bound_by_hand():
    import importlib.util
    from pathlib import Path
    from types import SimpleNamespace

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_rollout.py"
    spec = importlib.util.spec_from_file_location("bench_rollout", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    config = SimpleNamespace(
        hidden_size=4, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
        intermediate_size=8, vocab_size=10,
    )  # fmt: skip
    bound = bench.compute_bound(config, rows=2, prompt_tokens=6, new_tokens=4, gflops=1.0)
    # q/k/v 4x(2+1+1)x2 = 32, o 2x2x4 = 16, gate/up/down 3x4x8 = 96, head 4x10 = 40
    assert bound["linear_weights"] == 184
    assert bound["mean_context"] == 8  # 6 prompt tokens + 4 / 2
    assert bound["flops_per_token"] == 2 * 184 + 4 * 1 * 2 * 2 * 8
    assert bound["tokens_per_second_bound"] == round(1e9 / (2 * 184 + 128), 1)
