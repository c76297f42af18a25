"""CRoS scores with the initial policy, exactly, in every training setup; it refuses to train without
a reference or with the live policy as its reference (docs/recipes.md, "CRoS reference binding"; issue #14 points 1–3).

The setup tests run a real :class:`FaithGRPOTrainer` for a few optimiser steps on CPU with a tiny
model, then compare CRoS's Δ with a naive computation (plain unpadded forwards, full log-softmax in
float64) on a deep copy of the policy taken after the trainer was built and before it trained.
"""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import torch
from cros_helpers import naive_delta, random_llama_with_tokenizer
from datasets import Dataset
from peft import LoraConfig, PeftModel, get_peft_model
from trainer_helpers import tiny_run_args
from trl import GRPOTrainer

from faithgrpo.rewards.cros.reward import CRoSReward
from faithgrpo.testing import tiny_causal_lm
from faithgrpo.text import completion_text
from faithgrpo.trainers import FaithGRPOTrainer, InitialWeights

PROMPT = [{"role": "user", "content": "Question: adjust?"}]
SCORED = [
    "<think>Step 1: U opens X <- U -> Y.\nStep 2: adjust for U.</think><answer>{U}</answer>",
    "<think>Step 1: X -> Y is causal.\nStep 2: nothing to block.\nStep 3: done</think><answer>{}</answer>",
    "<think>Step 1: the path X <- U -> Y\nStep 2: is open, so block it</think>\n<answer> {U, Z1} </answer>",
]
NUM_SCRAMBLES, SEED = 2, 0
TOLERANCE = 1e-6
#: Max |Δ_CRoS − Δ_naive(initial)| per setup, for the report (printed with -s).
ERRORS: dict[str, float] = {}


def _text_length(completions, **kwargs):
    """A reward that varies within every group, so advantages are non-zero and the policy moves."""
    return [len(completion_text(c)) / 50 for c in completions]


def _dataset(n: int = 8) -> Dataset:
    return Dataset.from_list(
        [{"prompt": [{"role": "user", "content": f"Question {i}: adjust?"}]} for i in range(n)]
    )


CONFIG = dict(max_steps=3, max_completion_length=8)  # this file's runs, on top of TINY_RUN


def _snapshot(model: torch.nn.Module) -> torch.nn.Module:
    """A plain deep copy (instance-level forward patches dropped so it computes with its own weights)."""
    initial = copy.deepcopy(model)
    for module in initial.modules():
        module.__dict__.pop("forward", None)
    return initial.eval()


def _naive(model, tok) -> list[float]:
    return [naive_delta(model, tok, PROMPT, c, NUM_SCRAMBLES, SEED) for c in SCORED]


def _cros_deltas(cros) -> list[float]:
    return [s.delta for s in cros.compute_deltas([(PROMPT, c) for c in SCORED])]


def _train_and_compare(name, tmp_path, model, tok, *, mode, peft_config=None, **config):
    cros = CRoSReward(num_scrambles=NUM_SCRAMBLES, seed=SEED)
    trainer = FaithGRPOTrainer(
        model=model,
        reward_funcs=[cros, _text_length],
        args=tiny_run_args(tmp_path, **{**CONFIG, **config}),
        train_dataset=_dataset(),
        processing_class=tok,
        peft_config=peft_config,
    )
    assert trainer.cros_reference_mode == mode == cros.reference_mode
    policy = trainer.model
    initial = _snapshot(policy)  # before any update: the initial policy, as a separate plain model
    trainable_before = {n: p.detach().clone() for n, p in policy.named_parameters() if p.requires_grad}
    trainer.train()
    assert trainer.state.global_step == config.get("max_steps", 3)
    moved = [
        n
        for n, p in policy.named_parameters()
        if n in trainable_before and not torch.equal(p, trainable_before[n])
    ]
    assert moved, "the policy should have moved"

    tok = trainer.processing_class
    expected = _naive(initial, tok)
    mode_before = policy.training
    live_before = {n: p.detach().clone() for n, p in policy.named_parameters()}
    got = _cros_deltas(cros)
    # Scoring leaves the policy as it was: same mode, same live weights bit for bit, same trainable set.
    assert policy.training == mode_before
    for n, p in policy.named_parameters():
        assert torch.equal(p, live_before[n]), n
        assert p.requires_grad == (n in trainable_before), n
    error32 = max(abs(a - b) for a, b in zip(got, expected))
    # float32 rounding of ℓ (|ℓ| ≈ 6, eps 6e-8) alone makes errors of a few 1e-7 between batched,
    # KV-cached scoring and one unpadded forward: close to 1e-6 but no sign of a wrong weight.
    assert error32 <= 1e-5, (got, expected)
    # Teeth: the live policy scores differently.
    live = _naive(_snapshot(policy), tok)
    assert max(abs(a - b) for a, b in zip(live, expected)) > 1e-4

    # The same comparison in float64, where rounding cannot hide a wrong weight. The models are cast
    # in place (same Parameter objects), so CRoS's binding is untouched; fp32 snapshots cast exactly.
    for model in {id(m): m for m in (policy, initial, cros.model)}.values():
        model.double()
    got64, expected64 = _cros_deltas(cros), _naive(initial, tok)
    error64 = max(abs(a - b) for a, b in zip(got64, expected64))
    ERRORS[name] = error64
    print(
        f"\n[cros-binding] {name}: mode={mode} max|Δ_cros - Δ_naive(initial)| "
        f"float64 {error64:.3g}, float32 {error32:.3g}"
    )
    assert error64 <= TOLERANCE * 1e-3, (got64, expected64)
    return trainer, cros, initial, expected


@pytest.mark.slow
def test_fresh_lora_scores_with_adapters_disabled(tmp_path):
    model, tok = tiny_causal_lm("llama", seed=0)
    _train_and_compare(
        "fresh_lora",
        tmp_path,
        model,
        tok,
        mode="peft_disabled_adapters",
        peft_config=LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]),
    )


@pytest.mark.slow
def test_warm_start_peft_model_scores_with_its_initial_adapter(tmp_path):
    base, tok = tiny_causal_lm("llama", seed=1)
    # A warm-start adapter on disk (non-zero B), loaded trainable as the policy.
    adapter = get_peft_model(
        base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    )
    adapter.save_pretrained(tmp_path / "adapter")
    base, _ = tiny_causal_lm("llama", seed=1)
    policy = PeftModel.from_pretrained(base, tmp_path / "adapter", is_trainable=True)
    trainer, cros, initial, expected = _train_and_compare(
        "warm_start_peft_model", tmp_path, policy, tok, mode="peft_initial_adapter"
    )
    # The old binding (adapters disabled) would have scored with the bare base.
    with initial.disable_adapter():
        bare = _naive(initial, tok)
    assert max(abs(a - b) for a, b in zip(bare, expected)) > 1e-4
    snapshot = cros._context_factory
    assert isinstance(snapshot, InitialWeights)
    lora = sum(p.numel() for n, p in trainer.model.named_parameters() if "lora_" in n)
    assert snapshot.numel == lora  # adapter-sized
    assert list(trainer.model.peft_config) == ["default"]  # no extra adapter in checkpoints


@pytest.mark.slow
def test_warm_start_with_a_kl_term_shares_trls_ref_adapter(tmp_path):
    """beta > 0: TRL copies the warm-start adapter into a frozen "ref" adapter (its KL anchor); CRoS
    scores with it instead of keeping a snapshot of its own, and still scores the initial policy."""
    base, tok = tiny_causal_lm("llama", seed=1)
    adapter = get_peft_model(
        base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    )
    adapter.save_pretrained(tmp_path / "adapter")
    base, _ = tiny_causal_lm("llama", seed=1)
    policy = PeftModel.from_pretrained(base, tmp_path / "adapter", is_trainable=True)
    trainer, cros, *_ = _train_and_compare(
        "warm_start_kl_anchor", tmp_path, policy, tok, mode="trainer_ref_adapter", beta=0.1
    )
    assert not isinstance(cros._context_factory, InitialWeights)  # no second copy of the adapter
    assert set(trainer.model.peft_config) == {"default", "ref"}


def test_ref_adapter_is_shared_only_when_it_is_the_trainable_adapters_twin():
    from faithgrpo.trainers.reference import trainer_ref_adapter_is_initial

    def policy(**lora):
        base, _ = tiny_causal_lm("llama", seed=1)
        config = LoraConfig(
            r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False, **lora
        )
        model = get_peft_model(base, config)
        model.add_adapter("ref", config)
        with torch.no_grad():
            for name, param in model.named_parameters():
                if ".default." in name:
                    model.get_parameter(name.replace(".default.", ".ref.")).copy_(param)
        return model

    assert trainer_ref_adapter_is_initial(policy())
    assert not trainer_ref_adapter_is_initial(
        get_peft_model(
            tiny_causal_lm("llama", seed=1)[0],
            LoraConfig(r=4, target_modules=["q_proj"], init_lora_weights=False),
        )
    )  # fmt: skip  (no "ref" adapter)
    moved = policy()
    with torch.no_grad():
        next(p for n, p in moved.named_parameters() if ".ref." in n).add_(1.0)
    assert not trainer_ref_adapter_is_initial(moved)  # a twin that differs is not the initial policy
    extra = policy()
    next(p for n, p in extra.named_parameters() if "embed_tokens" in n).requires_grad_(True)
    assert not trainer_ref_adapter_is_initial(extra)  # a trainable tensor the "ref" adapter does not hold


@pytest.mark.slow
def test_lora_with_trained_biases_scores_with_the_initial_biases(tmp_path):
    model, tok = tiny_causal_lm("qwen2", seed=2)  # Qwen2 has q/k/v biases
    trainer, *_ = _train_and_compare(
        "lora_bias_all",
        tmp_path,
        model,
        tok,
        mode="peft_initial_adapter",
        peft_config=LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], bias="all"),
    )
    biases = [n for n, p in trainer.model.named_parameters() if p.requires_grad and n.endswith("bias")]
    assert biases  # biases train: adapters disabled would keep the trained ones


@pytest.mark.slow
def test_pissa_initialised_lora_scores_with_the_initial_adapter(tmp_path):
    model, tok = tiny_causal_lm("llama", seed=3)
    _trainer, _cros, initial, expected = _train_and_compare(
        "lora_pissa",
        tmp_path,
        model,
        tok,
        mode="peft_initial_adapter",
        peft_config=LoraConfig(
            r=4, lora_alpha=4, target_modules=["q_proj", "v_proj"], init_lora_weights="pissa"
        ),
    )
    with initial.disable_adapter():  # the residual base PiSSA leaves: not the initial policy
        residual = _naive(initial, tok)
    assert max(abs(a - b) for a, b in zip(residual, expected)) > 1e-4


@pytest.mark.slow
def test_full_finetune_never_follows_the_synced_trl_reference(tmp_path, tiny_llama_path):
    trainer, cros, _initial, expected = _train_and_compare(
        "full_ft_beta_sync_ref_model",
        tmp_path,
        str(tiny_llama_path),
        None,
        mode="frozen_copy",
        beta=0.1,
        sync_ref_model=True,
        ref_model_sync_steps=1,
        ref_model_mixup_alpha=0.9,
    )
    # TRL's reference moved towards the policy; CRoS's did not.
    trl_ref = _snapshot(trainer.accelerator.unwrap_model(trainer.ref_model))
    assert max(abs(a - b) for a, b in zip(_naive(trl_ref, trainer.processing_class), expected)) > 1e-4
    assert cros.model is not trainer.ref_model


@pytest.mark.slow
def test_full_finetune_scores_with_a_frozen_copy(tmp_path):
    model, tok = tiny_causal_lm("qwen2", seed=4)
    _, cros, _, _ = _train_and_compare("full_ft", tmp_path, model, tok, mode="frozen_copy")
    assert not any(p.requires_grad for p in cros.model.parameters())


@pytest.mark.slow
def test_full_finetune_reuses_an_unsynced_trl_reference(tmp_path, tiny_llama_path):
    trainer, cros, _, _ = _train_and_compare(
        "full_ft_beta_no_sync", tmp_path, str(tiny_llama_path), None, mode="trainer_ref_model", beta=0.1
    )
    assert cros.model is trainer.accelerator.unwrap_model(trainer.ref_model)


# ----------------------------------------------------------------------------- refusing to train


def _plain_trainer(tmp_path, model, tok, cros, **kwargs):
    return GRPOTrainer(
        model=model,
        reward_funcs=[cros, _text_length],
        args=tiny_run_args(tmp_path, **{**CONFIG, "max_steps": 2}),
        train_dataset=_dataset(),
        processing_class=tok,
        **kwargs,
    )


@pytest.mark.slow
def test_plain_trl_trainer_without_reference_stops_at_the_first_step(tmp_path):
    model, tok = tiny_causal_lm("llama", seed=0)
    trainer = _plain_trainer(tmp_path, model, tok, CRoSReward(num_scrambles=2))
    # Random tiny-model completions have no answer: nothing is scorable, yet the run stops at once.
    with pytest.raises(RuntimeError, match=r"no reference model.*FaithGRPOTrainer.*bind_reference"):
        trainer.train()
    assert trainer.state.global_step == 0


@pytest.mark.slow
@pytest.mark.parametrize("peft", [True, False], ids=["lora", "full"])
def test_plain_trl_trainer_with_the_policy_as_reference_stops_at_the_first_step(tmp_path, peft):
    model, tok = tiny_causal_lm("llama", seed=0)
    cros = CRoSReward(model, tok, num_scrambles=2)
    extra = {"peft_config": LoraConfig(r=4, target_modules=["q_proj", "v_proj"])} if peft else {}
    trainer = _plain_trainer(tmp_path, model, tok, cros, **extra)
    with pytest.raises(RuntimeError, match=r"requires_grad=True.*FaithGRPOTrainer"):
        trainer.train()
    assert trainer.state.global_step == 0
    # With the binding callback it stops before the first step, naming the shared parameters.
    model, tok = tiny_causal_lm("llama", seed=0)
    cros = CRoSReward(model, tok)
    trainer = _plain_trainer(tmp_path, model, tok, cros, callbacks=[cros.binding_callback()], **extra)
    with pytest.raises(RuntimeError, match=r"shares .* parameter"):
        trainer.train()
    assert trainer.state.global_step == 0


@pytest.mark.parametrize("peft", [True, False], ids=["lora", "full"])
def test_faith_trainer_refuses_a_reward_bound_to_the_policy(tmp_path, peft):
    model, tok = tiny_causal_lm("llama", seed=0)
    extra = {"peft_config": LoraConfig(r=4, target_modules=["q_proj", "v_proj"])} if peft else {}
    with pytest.raises(RuntimeError, match=r"shares .* parameter.*FaithGRPOTrainer"):
        FaithGRPOTrainer(
            model=model,
            reward_funcs=[CRoSReward(model, tok)],
            args=tiny_run_args(tmp_path, **CONFIG),
            train_dataset=_dataset(),
            processing_class=tok,
            **extra,
        )


def test_check_reference_rules():
    model, tok = random_llama_with_tokenizer(seed=0)
    state = SimpleNamespace(global_step=0)
    with pytest.raises(
        RuntimeError, match=r"no reference model.*FaithGRPOTrainer.*reference=.*bind_reference"
    ):
        CRoSReward()(["Q"], ["no answer"])  # even with nothing to score
    assert CRoSReward().compute_deltas([("Q", "no answer")])[0].reason == "no_answer"  # evaluators: lazy
    # An unfrozen model is fine outside training, refused inside it.
    unfrozen = CRoSReward(model, tok)
    assert unfrozen(["Q"], ["no answer"]) == [0.5]
    with pytest.raises(RuntimeError, match="requires_grad"):
        unfrozen(["Q"], ["no answer"], trainer_state=state)
    frozen_model, _ = random_llama_with_tokenizer(seed=1)
    frozen = CRoSReward(frozen_model.requires_grad_(False), tok)
    assert frozen(["Q"], ["no answer"], trainer_state=state) == [0.5]
    with pytest.raises(RuntimeError, match="shares"):
        frozen.check_reference(policy=frozen_model)
    # A binding through a context manager is the caller's word (the PEFT glue's way); it is trusted.
    policy = get_peft_model(model, LoraConfig(r=2, target_modules=["q_proj"]))
    trusted = CRoSReward(num_scrambles=2)
    trusted.bind_reference(policy, tok, policy.disable_adapter)
    trusted.check_reference(policy)
    assert trusted(["Q"], ["no answer"], trainer_state=state) == [0.5]


def test_initial_weights_swap_is_exact_and_restores_the_live_values():
    model, _tok = random_llama_with_tokenizer(seed=2)
    policy = get_peft_model(
        model, LoraConfig(r=2, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    )
    snapshot = InitialWeights(policy)
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    with torch.no_grad():
        before = policy(input_ids=ids).logits
        for p in policy.parameters():
            if p.requires_grad:
                p.add_(0.5)
        live = policy(input_ids=ids).logits
        with snapshot():
            assert torch.equal(policy(input_ids=ids).logits, before)
        assert torch.equal(policy(input_ids=ids).logits, live)
        with pytest.raises(ValueError), snapshot():
            raise ValueError("scoring failed")
        assert torch.equal(policy(input_ids=ids).logits, live)


def _replace_trainable_parameters(model: torch.nn.Module) -> None:
    """Re-register every trainable parameter as a new object, as a sharding wrapper does."""
    for name, param in list(model.named_parameters()):
        if param.requires_grad:
            owner_name, _, leaf = name.rpartition(".")
            owner = model.get_submodule(owner_name)
            setattr(owner, leaf, torch.nn.Parameter(param.detach().clone()))


def test_initial_weights_follow_parameters_replaced_after_the_snapshot():
    # FSDP2's fully_shard (applied by accelerate when training starts, after the trainer bound
    # CRoS) replaces the parameter objects: a swap into the old objects would score the live policy.
    model, _tok = random_llama_with_tokenizer(seed=2)
    policy = get_peft_model(
        model, LoraConfig(r=2, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    )
    snapshot = InitialWeights(policy)
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    with torch.no_grad():
        before = policy(input_ids=ids).logits
        _replace_trainable_parameters(policy)
        for p in policy.parameters():
            if p.requires_grad:
                p.add_(0.5)
        live = policy(input_ids=ids).logits
        assert not torch.allclose(live, before)
        with snapshot():
            assert torch.equal(policy(input_ids=ids).logits, before)
        assert torch.equal(policy(input_ids=ids).logits, live)


def test_initial_weights_name_a_parameter_that_disappeared():
    model, _tok = random_llama_with_tokenizer(seed=2)
    policy = get_peft_model(model, LoraConfig(r=2, target_modules=["q_proj"], init_lora_weights=False))
    snapshot = InitialWeights(policy)
    snapshot.names.append("base_model.model.lm_head.lora_A.default.weight")
    snapshot.initial[snapshot.names[-1]] = torch.zeros(1)
    missing = r"lm_head\.lora_A\.default\.weight' is no longer in the model"
    with pytest.raises(RuntimeError, match=missing), snapshot():
        pass


def _warm_start_on_disk(tmp_path):
    """``(base_dir, adapter_dir)``: a tiny base checkpoint and a non-zero LoRA adapter trained from it."""
    from faithgrpo.testing import save_tiny_causal_lm

    base_dir = save_tiny_causal_lm(tmp_path / "base", "llama", seed=1)
    base, _ = tiny_causal_lm("llama", seed=1)
    adapter = get_peft_model(
        base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    )
    adapter.save_pretrained(tmp_path / "adapter")
    return base_dir, tmp_path / "adapter"


def _warm_started_policy(adapter_dir):
    base, tok = tiny_causal_lm("llama", seed=1)
    return PeftModel.from_pretrained(base, adapter_dir, is_trainable=True), tok


def test_path_reference_without_the_warm_start_adapter_is_refused(tmp_path):
    # Issue #28: --cros_reference <base> while the policy is base + the SFT adapter scored against the
    # bare base for the whole run, silently. The binding now compares the two on a probe.
    from faithgrpo.rewards.cros.reference import CRoSReferenceError
    from faithgrpo.trainers.reference import bind_cros_references

    base_dir, adapter_dir = _warm_start_on_disk(tmp_path)
    policy, tok = _warm_started_policy(adapter_dir)
    cros = CRoSReward(base_dir, num_scrambles=NUM_SCRAMBLES, seed=SEED)
    with pytest.raises(CRoSReferenceError, match=r"is not the initial policy.*warm-start adapter"):
        bind_cros_references([cros], policy, tok)
    assert cros.reference_probe_difference > 1e-2
    # The same reference with the warm-start adapter applied is the initial policy.
    fixed = CRoSReward(base_dir, num_scrambles=NUM_SCRAMBLES, seed=SEED, reference_adapter=adapter_dir)
    bind_cros_references([fixed], policy, tok)
    assert fixed.reference_mode == "path" and fixed.reference_probe_difference == 0.0
    assert not any(p.requires_grad for p in fixed.model.parameters())
    with pytest.raises(ValueError, match="reference_adapter applies to a reference loaded from a path"):
        CRoSReward(policy, tok, reference_adapter=adapter_dir)


@pytest.mark.slow
def test_path_reference_with_the_warm_start_adapter_scores_the_initial_policy(tmp_path):
    base_dir, adapter_dir = _warm_start_on_disk(tmp_path)
    policy, tok = _warm_started_policy(adapter_dir)
    cros = CRoSReward(base_dir, num_scrambles=NUM_SCRAMBLES, seed=SEED, reference_adapter=adapter_dir)
    trainer = FaithGRPOTrainer(
        model=policy,
        reward_funcs=[cros, _text_length],
        args=tiny_run_args(tmp_path, **{**CONFIG, "max_steps": 2}),
        train_dataset=_dataset(),
        processing_class=tok,
    )
    assert cros.reference_mode == "path" and cros.reference_probe_difference == 0.0
    initial = _snapshot(trainer.model)
    trainer.train()
    expected = _naive(initial, tok)
    got = _cros_deltas(cros)
    assert max(abs(a - b) for a, b in zip(got, expected)) <= 1e-5, (got, expected)
    with initial.disable_adapter():
        bare = _naive(initial, tok)  # what the reference scored before the adapter was applied
    assert max(abs(a - b) for a, b in zip(bare, expected)) > 1e-4
    live = _naive(_snapshot(trainer.model), tok)
    assert max(abs(a - b) for a, b in zip(live, expected)) > 1e-4
    # In float64, where rounding cannot hide a wrong weight: ≤ 1e-6 (issue #28).
    cros.model.double()
    initial.double()
    error64 = max(abs(a - b) for a, b in zip(_cros_deltas(cros), _naive(initial, tok)))
    ERRORS["path_reference_with_warm_start_adapter"] = error64
    assert error64 <= TOLERANCE, error64
