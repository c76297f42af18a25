"""Decoder weights arranged for the decode loop (`faithgrpo.eval.generation.decoding`): fused, streamed as the GEMM's left operand.

A decode step multiplies a few rows (one per running sequence) by every weight matrix, so the
number of matmuls and how each one reads its weight decide its speed: q/k/v and gate/up are
concatenated into one weight each (`_fused`), and every product streams its weight as the left
operand of the GEMM (`StepLinear`).

A projection may be a plain ``nn.Linear`` or a PEFT LoRA layer (a policy being trained): `linear_parts`
gives the weight its forward computes with (base weight plus each active adapter's
``scaling * B @ A``, as PEFT merges it), so the engine samples from the live policy without merging
the adapter into the model. `linear_reason` names what it cannot reproduce (DoRA and other LoRA
variants, LoRA biases, other adapter types).
"""

from __future__ import annotations

__all__ = ["DecoderBlock", "StepLinear", "linear_parts", "linear_reason"]


def _is_lora(module) -> bool:
    return hasattr(module, "base_layer") and hasattr(module, "lora_A") and hasattr(module, "lora_B")


def linear_reason(module) -> str | None:
    """Why `linear_parts` cannot give ``module``'s forward weight, or ``None`` when it can.

    Accepted: ``nn.Linear``, and PEFT LoRA ``Linear`` layers whose active adapters are vanilla LoRA
    (no DoRA or other variant, no LoRA bias) over an ``nn.Linear``.
    """
    import torch

    if type(module) is torch.nn.Linear:
        return None
    if not _is_lora(module):
        if hasattr(module, "base_layer"):
            return f"{type(module).__name__} is an adapter layer other than LoRA"
        return f"{type(module).__name__} is not an nn.Linear"
    if type(module.base_layer) is not torch.nn.Linear:
        return f"a LoRA layer wraps {type(module.base_layer).__name__}, not an nn.Linear"
    if module.disable_adapters and module.merged:
        return "a LoRA layer has merged adapters while adapters are disabled"
    for name in module.active_adapters:
        if name not in module.lora_A:
            continue
        if name in getattr(module, "lora_variant", {}) or getattr(module, "use_dora", {}).get(name):
            return f"adapter {name!r} is a LoRA variant (DoRA or other), not vanilla LoRA"
        if getattr(module, "lora_bias", {}).get(name):
            return f"adapter {name!r} has a LoRA bias"
    return None


def linear_parts(module):
    """``(weight, bias)`` that ``module``'s forward computes with (see `linear_reason` for what is accepted).

    A LoRA layer's weight is its base weight plus ``get_delta_weight`` of each active adapter, as
    PEFT's forward adds them (nothing when adapters are disabled or already merged); dropout is not
    applied (the policy is sampled as it is evaluated). Call it under ``torch.no_grad`` or
    ``torch.inference_mode``: the result is a new tensor, not a parameter.
    """
    if not _is_lora(module):
        return module.weight, module.bias
    base = module.base_layer
    if module.disable_adapters or module.merged:
        return base.weight, base.bias
    weight = base.weight
    for name in module.active_adapters:
        if name in module.lora_A:
            weight = weight + module.get_delta_weight(name).to(weight.dtype)
    return weight, base.bias


def _fused(*linears):
    """One weight (and bias) computing several linear layers of the same input in one matmul."""
    import torch

    parts = [linear_parts(m) for m in linears]
    weight = torch.cat([w for w, _ in parts])
    if all(b is None for _, b in parts):
        return weight, None
    biases = [b if b is not None else weight.new_zeros(w.shape[0]) for w, b in parts]
    return weight, torch.cat(biases)


class StepLinear:
    """A linear layer whose decode steps compute ``(W @ xᵀ)ᵀ``: the few rows of a step as columns.

    A decode step multiplies a few rows (one per running sequence) by every weight matrix, so each
    product is bound by reading the weight from memory. Written as ``W @ xᵀ`` (the weight as the
    GEMM's left operand, the rows as its few columns), MKL streams the weight at close to the
    machine's memory bandwidth; ``F.linear``'s ``x @ Wᵀ`` and MKL's prepacked GEMM read it about
    half as fast at 4 rows and a quarter slower at 32 (measured with cold weights on a 2-core CPU,
    the numbers in docs/performance.md). The result equals ``F.linear`` up to float rounding (the
    sums run in another order; the tests compare within 1e-5) and is returned contiguous. Inputs
    that are not 2-D (prefill's ``[1, tokens, hidden]``) use ``F.linear``. Nothing is copied: the
    layer keeps the weight tensor it was given.
    """

    def __init__(self, weight, bias):
        import torch

        self.weight, self.bias = weight, bias
        self._torch = torch

    def __call__(self, x):
        torch = self._torch
        if x.dim() != 2:
            return torch.nn.functional.linear(x, self.weight, self.bias)
        out = torch.mm(self.weight, x.t())
        if self.bias is not None:
            out.add_(self.bias[:, None])
        return out.t().contiguous()


class DecoderBlock:
    """One decoder layer's weights, with q/k/v and gate/up fused (fewer, larger matmuls per step)."""

    def __init__(self, layer):
        attention, mlp = layer.self_attn, layer.mlp
        self.qkv = StepLinear(*_fused(attention.q_proj, attention.k_proj, attention.v_proj))
        self.out = StepLinear(*linear_parts(attention.o_proj))
        self.gate_up = StepLinear(*_fused(mlp.gate_proj, mlp.up_proj))
        self.down = StepLinear(*linear_parts(mlp.down_proj))
        self.act = mlp.act_fn
        self.norms = [
            (n.weight, n.variance_epsilon) for n in (layer.input_layernorm, layer.post_attention_layernorm)
        ]
