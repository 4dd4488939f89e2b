"""A translated graph compiled for a luminal runtime, called like the FX graph it came from:
torch tensors in (bound without a copy where dtype and layout allow), dynamic dimensions
read from the inputs' sizes, torch tensors out."""
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
                 name: str = "graph"):
        self.translation = translation
        self.name = name
        runtime = {"cpu": "cpu", "cuda": "cuda", "reference": "reference"}.get(device)
        if runtime is None:
            raise Error(f"luminal backend: device must be 'cpu', 'cuda' or 'reference', got {device!r}")
        self.compiled = compile_graph(translation.graph, runtime, search=search, threads=threads)
        self._in_place = runtime == "cpu"
        self._bound: dict[int, tuple[int, tuple]] = {}
        for lum, value in translation.constants:
            self._bind(lum, value, key=None)

    def __call__(self, *args):
        dims = self._dims(args)
        for index, (slot, arg) in enumerate(zip(self.translation.inputs, args)):
            if slot.kind != "tensor":
                continue
            self._check_input(slot, arg, dims)
            self._bind(slot.tensor, arg, key=index)
        self.compiled.execute(dims)
        return [self._read(slot, dims) for slot in self.translation.outputs]

    # ---- inputs ----
    def _dims(self, args) -> dict[str, int]:
        if len(args) != len(self.translation.inputs):
            raise Error(f"{self.name}: takes {len(self.translation.inputs)} inputs, got {len(args)}")
        dims = {}
        for letter, (index, axis) in self.translation.dim_sources.items():
            arg = args[index]
            dims[letter] = int(arg) if axis is None else int(arg.shape[axis])
        return dims

    def _check_input(self, slot, arg, dims) -> None:
        if not isinstance(arg, torch.Tensor):
            raise Error(f"{self.name}: input '{slot.name}' must be a tensor, got {type(arg).__name__}")
        if arg.dtype != slot.torch_dtype:
            raise Error(f"{self.name}: input '{slot.name}' was compiled for {slot.torch_dtype}, got {arg.dtype}")
        expected = [d if isinstance(d, int) else d.eval(dims) for d in slot.shape]
        if list(arg.shape) != expected:
            raise Error(f"{self.name}: input '{slot.name}' has shape {tuple(arg.shape)} but the compiled graph takes "
                        f"{_describe(slot.shape)} (here {tuple(expected)})")
        if arg.device.type != "cpu":
            raise Error(f"{self.name}: input '{slot.name}' is on {arg.device}; luminal reads inputs from host memory")

    def _bind(self, lum, value: torch.Tensor, key) -> None:
        if not self.compiled.reads(lum):
            return
        value = value.detach()
        contiguous = value.is_contiguous()
        if not contiguous:
            value = value.contiguous()
        # The CPU runtime reads a borrowed tensor in place: an unchanged one needs no rebinding.
        identity = (value.data_ptr(), tuple(value.shape))
        if key is not None and contiguous and self._in_place and self._bound.get(key) == identity:
            return
        self.compiled.set_data(lum, value)
        if key is not None:
            self._bound[key] = identity if contiguous else None

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
