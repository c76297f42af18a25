"""Decoder weights arranged for the decode loop (`faithgrpo.eval.generation.decoding`): fused and prepacked.

A decode step multiplies a few rows (one per running sequence) by every weight matrix, so the
number of matmuls and how each one reads its weight decide its speed: q/k/v and gate/up are
concatenated into one weight each (`_fused`), and on a CPU in float32 every weight is prepacked
once for the batch's row count (`PrepackedLinear`).
"""

from __future__ import annotations

__all__ = ["DecoderBlock", "PrepackedLinear", "can_prepack"]


def _fused(*linears):
    """One weight (and bias) computing several ``nn.Linear`` layers of the same input in one matmul."""
    import torch

    weight = torch.cat([m.weight for m in linears])
    if all(m.bias is None for m in linears):
        return weight, None
    biases = [m.bias if m.bias is not None else weight.new_zeros(m.out_features) for m in linears]
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
        self.out = PrepackedLinear(attention.o_proj.weight, attention.o_proj.bias, rows)
        self.gate_up = PrepackedLinear(*_fused(mlp.gate_proj, mlp.up_proj), rows)
        self.down = PrepackedLinear(mlp.down_proj.weight, mlp.down_proj.bias, rows)
        self.act = mlp.act_fn
        self.norms = [
            (n.weight, n.variance_epsilon) for n in (layer.input_layernorm, layer.post_attention_layernorm)
        ]
