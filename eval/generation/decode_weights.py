"""Decoder weights arranged for the decode loop (`faithgrpo.eval.generation.decoding`): fused and prepacked.

A decode step multiplies a few rows (one per running sequence) by every weight matrix, so the
number of matmuls and how each one reads its weight decide its speed: q/k/v and gate/up are
concatenated into one weight each (`_fused`), and on a CPU in float32 every weight is prepacked
once for the batch's row count (`PrepackedLinear`).

A projection may be a plain ``nn.Linear`` or a PEFT LoRA layer (a policy being trained): `linear_parts`
gives the weight its forward computes with (base weight plus each active adapter's
``scaling * B @ A``, as PEFT merges it), so the engine samples from the live policy without merging
the adapter into the model. `linear_reason` names what it cannot reproduce (DoRA and other LoRA
variants, LoRA biases, other adapter types).
"""

from __future__ import annotations

__all__ = ["DecoderBlock", "PrepackedLinear", "can_prepack", "linear_parts", "linear_reason"]


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


def can_prepack(weight) -> bool:
    """Whether MKL's prepacked GEMM runs this weight: float32 on a CPU, with a torch built with MKL."""
    import torch

    return (
        weight.device.type == "cpu"
        and weight.dtype == torch.float32
        and torch.backends.mkl.is_available()
        and hasattr(torch.ops.mkl, "_mkl_linear")
    )


class PrepackedLinear:
    """A linear layer whose decode steps use MKL's prepacked GEMM for ``rows`` input rows.

    A decode step multiplies a few rows (one per running sequence) by every weight matrix; a plain
    GEMM repacks the weight into its blocked layout at each call, which for so few rows costs about
    as much as the product itself. The weight is packed once for ``rows`` rows (``cblas_sgemm_pack``
    via ``torch.ops.mkl``, the op inductor's CPU weight prepacking uses). On a 2-core CPU with
    SmolLM2-135M's shapes at 16 rows the products ran 1.5-3.2x faster on two threads and 1.1-1.9x
    on one. They equal ``F.linear`` up to float rounding (MKL may sum in another order; the tests
    compare within 1e-5). A step with fewer rows (the tail of a run) is padded with zero rows to the
    packed count; prefill's 3-D inputs use ``F.linear``. The packed copy costs as much memory as the
    weight.
    """

    def __init__(self, weight, bias, rows: int):
        import torch

        self.weight, self.bias, self.rows = weight, bias, rows
        self._torch = torch
        self.packed = torch.ops.mkl._mkl_reorder_linear_weight(weight, rows) if can_prepack(weight) else None

    def __call__(self, x):
        torch = self._torch
        if self.packed is None or x.dim() != 2:
            return torch.nn.functional.linear(x, self.weight, self.bias)
        n = x.shape[0]
        if n < self.rows:
            # The tail of a run has fewer rows than slots, and MKL would then multiply by the
            # unpacked weight: zero rows up to the packed count are cheaper (a step reads the
            # weights either way; 12 rows ran ~1.4x faster padded on 2 threads). A row's result
            # then does not depend on how many rows run with it.
            padded = torch.nn.functional.pad(x, (0, 0, 0, self.rows - n))
            return torch.ops.mkl._mkl_linear(padded, self.packed, self.weight, self.bias, self.rows)[:n]
        return torch.ops.mkl._mkl_linear(x, self.packed, self.weight, self.bias, self.rows)


class DecoderBlock:
    """One decoder layer's weights, with q/k/v and gate/up fused (fewer, larger matmuls per step)."""

    def __init__(self, layer, rows: int):
        attention, mlp = layer.self_attn, layer.mlp
        self.qkv = PrepackedLinear(*_fused(attention.q_proj, attention.k_proj, attention.v_proj), rows)
        self.out = PrepackedLinear(*linear_parts(attention.o_proj), rows)
        self.gate_up = PrepackedLinear(*_fused(mlp.gate_proj, mlp.up_proj), rows)
        self.down = PrepackedLinear(*linear_parts(mlp.down_proj), rows)
        self.act = mlp.act_fn
        self.norms = [
            (n.weight, n.variance_epsilon) for n in (layer.input_layernorm, layer.post_attention_layernorm)
        ]
