"""The ATen decompositions both paths (torch.compile's AOTAutograd, the AOT path's
run_decompositions) apply before translation: PyTorch's core ATen table, except that attention
stays one op. The translation writes it as product, masked softmax and product, the form the
runtimes' attention rules look for; the core decomposition spells it out with a second scaling
and gathers guarding fully masked rows, which nothing fuses.

On another device than the CPU (meta tensors for a plan, CUDA tensors) PyTorch lowers attention
to that device's kernels or to the spelled-out form before any table is consulted, so
`attention_as_cpu_flash` rewrites dynamo's calls of it into the CPU flash op first: only the
translation reads that op, alike on every device."""
from __future__ import annotations

import torch


def decompositions() -> dict:
    from torch._decomp import core_aten_decompositions  # imported on first use, as torch.compile does

    table = core_aten_decompositions()
    for op in (torch.ops.aten.scaled_dot_product_attention.default,
               torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default):
        table.pop(op, None)
    return table


def _cpu_flash_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                         enable_gqa=False):
    if query.device.type == "cpu":
        return torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal,
                                                                scale=scale, enable_gqa=enable_gqa)
    if key.shape[-3] != query.shape[-3] and not enable_gqa:
        raise RuntimeError("scaled_dot_product_attention: key/value heads differ from the query's without enable_gqa")
    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default(
        query, key, value, dropout_p, is_causal, attn_mask=attn_mask, scale=scale)[0]


def attention_as_cpu_flash(gm: torch.fx.GraphModule) -> None:
    """Points dynamo's attention calls in `gm` at the CPU flash op (see above), in place."""
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is torch.nn.functional.scaled_dot_product_attention:
            node.target = _cpu_flash_attention
    gm.recompile()
