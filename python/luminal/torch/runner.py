"""A translated graph compiled for a luminal runtime, called like the FX graph it came from:
torch tensors in (bound without a copy where dtype and layout allow), dynamic dimensions
read from the inputs' sizes, torch tensors out, in one C++ call (TorchCall) that looks again
only at tensors whose object or memory changed. An output that is the new value of a mutated
input (a StaticCache's index_copy_) is carried state: the new values are in the input tensor
itself (the rows written in place where the CPU runtime updates it so, small state copied
back) and that tensor is the output, so writing it back (AOTAutograd's copy_, the AOT
path's) costs nothing."""
from __future__ import annotations

import torch

from .._luminal import Error, TorchCall
from ..graph import compile_graph
from .table import LUMINAL_TO_TORCH
from .translate import Translation


class CompiledGraph:
    def __init__(self, translation: Translation, *, device: str = "cpu", search: int = 1, threads: int = 0,
                 name: str = "graph", mutations: dict[int, int] | None = None):
        """mutations: output index -> index of the input whose new value that output is."""
        self.translation = translation
        self.name = name
        runtime = {"cpu": "cpu", "cuda": "cuda", "reference": "reference"}.get(device)
        if runtime is None:
            raise Error(f"luminal backend: device must be 'cpu', 'cuda' or 'reference', got {device!r}")
        carried = self._carry(mutations or {}) if runtime == "cpu" else {}
        self.compiled = compile_graph(translation.graph, runtime, search=search, threads=threads)
        for lum, value in translation.constants:
            self.compiled.set_data(lum, value.detach().contiguous())
        inputs = [(slot.name, slot.tensor, slot.torch_dtype) if slot.kind == "tensor" else (slot.name, None, None)
                  for slot in translation.inputs]
        dims = [(letter, index, axis) for letter, (index, axis) in translation.dim_sources.items()]
        outputs = [(slot.tensor, carried.get(index), slot.torch_dtype or LUMINAL_TO_TORCH[slot.tensor.dtype], None)
                   if slot.kind == "tensor" else (None, None, None, slot.value)
                   for index, slot in enumerate(translation.outputs)]
        # Checking, binding, executing and reading the outputs: one C++ call.
        self.call = TorchCall(self.compiled, name, inputs, dims, outputs)

    def __call__(self, *args):
        return self.call(*args)

    def _carry(self, mutations: dict[int, int]) -> dict[int, int]:
        """Declares each mutated input's new value as carried state (Graph.carry), so the CPU
        runtime may write it in place; returns the pairs declared."""
        carried = {}
        for output, source in mutations.items():
            out_slot, in_slot = self.translation.outputs[output], self.translation.inputs[source]
            if out_slot.kind != "tensor" or in_slot.kind != "tensor" or out_slot.torch_dtype != in_slot.torch_dtype \
                    or [str(d) for d in out_slot.shape] != [str(d) for d in in_slot.shape]:
                continue
            self.translation.graph.carry(out_slot.tensor, in_slot.tensor)
            carried[output] = source
        return carried
