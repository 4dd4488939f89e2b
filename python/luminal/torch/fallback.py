"""options={"fallback": True}: the ATen graph cut into runs of translatable nodes, each
compiled on luminal, with the nodes between them left to PyTorch (a graph break)."""
from __future__ import annotations

from typing import Callable

import torch
from torch.fx.passes.split_module import split_module

from .translate import is_supported, target_name


def split_unsupported(gm: torch.fx.GraphModule, compile_part: Callable) -> tuple[torch.fx.GraphModule, set[str]]:
    """The graph as a module of parts: luminal parts compiled with compile_part, the others
    run as they are. Returns it and the names of the ops left to PyTorch."""
    unsupported: set[str] = set()
    part_of: dict[torch.fx.Node, int] = {}
    part, previous = 0, None
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        ours = is_supported(node)
        if not ours:
            unsupported.add(target_name(node.target))
        if previous is not None and ours != previous:
            part += 1
        part_of[node] = part
        previous = ours
    if not unsupported:
        return compile_part(gm), unsupported
    split = split_module(gm, gm, lambda node: part_of[node], keep_original_order=True)
    supported_parts = {part_of[n] for n in part_of if is_supported(n)}
    for name, child in list(split.named_children()):
        index = int(name.removeprefix("submod_"))
        if index in supported_parts:
            compiled = compile_part(child)
            setattr(split, name, _CallableModule(compiled))
    split.recompile()
    return split, unsupported


class _CallableModule(torch.nn.Module):
    """A compiled luminal part where the split graph calls a submodule."""

    def __init__(self, run: Callable):
        super().__init__()
        self.run = run

    def forward(self, *args):
        outputs = self.run(*args)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)
