"""The ATen decompositions both paths (torch.compile's AOTAutograd, the AOT path's
run_decompositions) apply before translation: PyTorch's core ATen table, except that attention
stays one op. The translation writes it as product, masked softmax and product, the form the
runtimes' attention rules look for; the core decomposition spells it out with a second scaling
and gathers guarding fully masked rows, which nothing fuses."""
from __future__ import annotations

import torch


def decompositions() -> dict:
    from torch._decomp import core_aten_decompositions  # imported on first use, as torch.compile does

    table = core_aten_decompositions()
    for op in (torch.ops.aten.scaled_dot_product_attention.default,
               torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default):
        table.pop(op, None)
    return table
