"""A translated graph compiled for a luminal runtime, called like the FX graph it came from:
torch tensors in (bound without a copy where dtype and layout allow), dynamic dimensions
read from the inputs' sizes, torch tensors out. An output that is the new value of a mutated
input (a StaticCache's index_copy_) is carried state: where the CPU runtime updates it in
place, the new rows are written into the input tensor itself and that tensor is the output,
so writing it back (AOTAutograd's copy_, the AOT path's) costs nothing."""
from __future__ import annotations

import numpy as np
import torch

from .._luminal import Error, Expr
from ..graph import compile_graph
from .table import LUMINAL_TO_TORCH
from .translate import Translation

_RAW_16_BIT = {torch.bfloat16, torch.float16}


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
        self._updated_in_place = {output: source for output, source in carried.items()
                                  if self.compiled.updates_in_place(translation.outputs[output].tensor)}
        self._bound: dict[int, tuple[int, tuple]] = {}
        # Per tensor input: its index, slot, and its shape when no dimension is symbolic (the
        # parameters: checked by one comparison at each call).
        self._tensor_inputs = [(index, slot, tuple(slot.shape) if all(isinstance(d, int) for d in slot.shape)
                                else None) for index, slot in enumerate(translation.inputs) if slot.kind == "tensor"]
        for lum, value in translation.constants:
            self._bind(lum, value, key=None)

    def __call__(self, *args):
        dims = self._dims(args)
        in_place = set()
        for index, slot, static_shape in self._tensor_inputs:
            arg = args[index]
            self._check_input(slot, arg, dims, static_shape)
            if self._bind(slot.tensor, arg, key=index):
                in_place.add(index)
        self.compiled.execute(dims)
        results = []
        for index, slot in enumerate(self.translation.outputs):
            source = self._updated_in_place.get(index)
            results.append(args[source] if source in in_place else self._read(slot, dims))
        return results

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

    # ---- inputs ----
    def _dims(self, args) -> dict[str, int]:
        if len(args) != len(self.translation.inputs):
            raise Error(f"{self.name}: takes {len(self.translation.inputs)} inputs, got {len(args)}")
        dims = {}
        for letter, (index, axis) in self.translation.dim_sources.items():
            arg = args[index]
            dims[letter] = int(arg) if axis is None else int(arg.shape[axis])
        return dims

    def _check_input(self, slot, arg, dims, static_shape) -> None:
        if not isinstance(arg, torch.Tensor):
            raise Error(f"{self.name}: input '{slot.name}' must be a tensor, got {type(arg).__name__}")
        if arg.dtype != slot.torch_dtype:
            raise Error(f"{self.name}: input '{slot.name}' was compiled for {slot.torch_dtype}, got {arg.dtype}")
        if arg.shape == static_shape and arg.is_cpu:
            return
        expected = [d if isinstance(d, int) else d.eval(dims) for d in slot.shape]
        if list(arg.shape) != expected:
            raise Error(f"{self.name}: input '{slot.name}' has shape {tuple(arg.shape)} but the compiled graph takes "
                        f"{_describe(slot.shape)} (here {tuple(expected)})")
        if arg.device.type != "cpu":
            raise Error(f"{self.name}: input '{slot.name}' is on {arg.device}; luminal reads inputs from host memory")

    def _bind(self, lum, value: torch.Tensor, key) -> bool:
        """Binds `value` to the input `lum`; returns whether the runtime uses its memory in place."""
        # A tensor the runtime uses in place needs no rebinding while its storage is unchanged;
        # a copied one (carried state updated out of place, other runtimes) is copied at each call.
        identity = (value.data_ptr(), tuple(value.shape))
        if key is not None and self._bound.get(key) == identity and value.is_contiguous():
            return True
        if not self.compiled.reads(lum):
            return False
        value = value.detach()
        contiguous = value.is_contiguous()
        if not contiguous:
            value = value.contiguous()
        in_place = self.compiled.set_data(lum, value) and contiguous
        if key is not None:
            self._bound[key] = identity if in_place else None
        return in_place

    # ---- outputs ----
    def _read(self, slot, dims):
        if slot.kind == "value":
            value = slot.value
            return value.eval(dims) if isinstance(value, Expr) else value
        array = self.compiled.get(slot.tensor, raw=True)
        dtype = slot.torch_dtype or LUMINAL_TO_TORCH[slot.tensor.dtype]
        out = torch.from_numpy(array) if array.ndim else torch.from_numpy(np.array(array))
        if dtype in _RAW_16_BIT:
            out = out.view(dtype)
        return out if out.dtype == dtype else out.to(dtype)


def _describe(shape) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ")"
