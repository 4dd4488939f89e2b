"""A translated graph compiled for a luminal runtime, called like the FX graph it came from:
torch tensors in (bound without a copy where dtype and layout allow), dynamic dimensions
read from the inputs' sizes, torch tensors out, in one C++ call (TorchCall) that looks again
only at tensors whose object or memory changed. An output that is the new value of a mutated
input (a StaticCache's index_copy_) is carried state: the new values are in the input tensor
itself (the rows written in place where the CPU runtime updates it so, small state copied
back) and that tensor is the output, so writing it back (AOTAutograd's copy_, the AOT
path's) costs nothing.

plan_only (device "cuda"): the graph is compiled for the CUDA backend without a device (its
program run by cuda::HostEmulator, never executed here) and each call prices one execution at
the call's sizes (`plan`: the launches and their modelled time); the outputs are tensors on
the meta device, sizes without values, as a plan has none. Mutated inputs are planned as carried
state, as on the CPU; the CUDA runtime's binding here copies them instead (not yet carried)."""
from __future__ import annotations

import json

import torch

from .._luminal import Error, TorchCall
from ..graph import compile_graph
from .table import LUMINAL_TO_TORCH
from .translate import Translation


class CompiledGraph:
    def __init__(self, translation: Translation, *, device: str = "cpu", search: int = 1, threads: int = 0,
                 name: str = "graph", mutations: dict[int, int] | None = None, plan_only: bool = False):
        """mutations: output index -> index of the input whose new value that output is."""
        self.translation = translation
        self.name = name
        self.plan = None  # plan_only: the CUDA plan of the last call
        runtime = {"cpu": "cpu", "cuda": "cuda", "reference": "reference"}.get(device)
        if runtime is None:
            raise Error(f"luminal backend: device must be 'cpu', 'cuda' or 'reference', got {device!r}")
        if plan_only and runtime != "cuda":
            raise Error(f"luminal backend: plan_only plans for the CUDA backend (device 'cuda'), got device {device!r}")
        if plan_only:
            # Planned as the CPU path runs it: each mutated input carried, its new rows written in place.
            self._carry(mutations or {})
            self.compiled = compile_graph(translation.graph, "cuda-emulator", search=search)
            self.call = self._plan
            return
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

    def _plan(self, *args):
        """Prices one execution at the sizes of `args` (the inputs' values are not read) and
        returns the outputs' sizes as meta tensors."""
        dims = {letter: int(args[index]) if axis is None else int(args[index].shape[axis])
                for letter, (index, axis) in self.translation.dim_sources.items()}
        self.plan = json.loads(self.compiled.cuda_plan(dims))
        return [torch.empty([d if isinstance(d, int) else d.eval(dims) for d in slot.shape],
                            dtype=slot.torch_dtype or LUMINAL_TO_TORCH[slot.tensor.dtype], device="meta")
                if slot.kind == "tensor" else slot.value for slot in self.translation.outputs]

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
