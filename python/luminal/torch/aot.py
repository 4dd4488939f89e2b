"""luminal.torch.compile(model, example_inputs, dynamic_shapes=...): torch.export, then
run_decompositions() to core ATen (attention kept whole), translated once. Parameters and
buffers are bound from the model's own tensors (read in place on the CPU); torch.export.Dim
sizes become luminal dimensions, so one compilation serves every size the Dims allow; inputs
and buffers the model mutates (a StaticCache's index_copy_) are written back after each call."""
from __future__ import annotations

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, OutputKind

from .._luminal import Error
from .decompositions import decompositions
from .runner import CompiledGraph
from .translate import translate


class CompiledModule:
    """The exported program on luminal, called with the model's positional inputs."""

    def __init__(self, program: ExportedProgram, *, device: str, search: int, threads: int):
        self.program = program
        signature = program.graph_signature
        self._compiled = CompiledGraph(translate(program.graph_module, name="the exported program"), device=device,
                                       search=search, threads=threads, name="luminal.torch.compile",
                                       mutations=_mutations(signature))
        state = self._state = {**program.state_dict, **program.constants}
        self._fixed: dict[int, torch.Tensor] = {}
        self._user_positions: list[int] = []
        for position, spec in enumerate(signature.input_specs):
            if spec.kind == InputKind.USER_INPUT:
                self._user_positions.append(position)
            elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
                self._fixed[position] = state[spec.target]
            else:
                raise Error(f"luminal.torch.compile: input kind {spec.kind} of '{spec.arg.name}' is not supported")
        self._input_names = [spec.arg.name for spec in signature.input_specs]
        self._outputs = []  # (kind, target) per graph output
        for spec in signature.output_specs:
            if spec.kind == OutputKind.USER_OUTPUT:
                self._outputs.append(("user", None))
            elif spec.kind == OutputKind.USER_INPUT_MUTATION:
                self._outputs.append(("user_mutation", self._input_names.index(spec.target)))
            elif spec.kind == OutputKind.BUFFER_MUTATION:
                self._outputs.append(("buffer_mutation", spec.target))
            else:
                raise Error(f"luminal.torch.compile: output kind {spec.kind} is not supported")
        self._user_count = len(self._user_positions)
        self._out_spec = program.call_spec.out_spec

    def __call__(self, *args):
        flat, _ = torch.utils._pytree.tree_flatten(args)
        if len(flat) != self._user_count:
            raise Error(f"luminal.torch.compile: the model was exported with {self._user_count} tensor inputs, got "
                        f"{len(flat)}")
        inputs = [None] * len(self._input_names)
        for position, value in zip(self._user_positions, flat):
            inputs[position] = value
        for position, value in self._fixed.items():
            inputs[position] = value
        results = self._compiled(*inputs)
        user = []
        for (kind, target), value in zip(self._outputs, results):
            if kind == "user":
                user.append(value)
            else:
                destination = inputs[target] if kind == "user_mutation" else self._state[target]
                if value is not destination:  # the runtime updated it in place where it could
                    destination.copy_(value)
        return torch.utils._pytree.tree_unflatten(user, self._out_spec) if self._out_spec is not None else user


def _mutations(signature) -> dict[int, int]:
    """Output index -> input position of each mutated user input or buffer."""
    positions = {}
    for position, spec in enumerate(signature.input_specs):
        positions[spec.arg.name] = position
        if spec.kind == InputKind.BUFFER:
            positions[("buffer", spec.target)] = position
    mutations = {}
    for output, spec in enumerate(signature.output_specs):
        if spec.kind == OutputKind.USER_INPUT_MUTATION:
            mutations[output] = positions[spec.target]
        elif spec.kind == OutputKind.BUFFER_MUTATION:
            mutations[output] = positions[("buffer", spec.target)]
    return mutations


def compile(model: torch.nn.Module, example_inputs: tuple, *, dynamic_shapes=None, device: str = "cpu",
            search: int = 1, threads: int = 0, strict: bool = False) -> CompiledModule:
    """Exports `model` on `example_inputs` (with torch.export's dynamic_shapes), decomposes to
    core ATen and compiles the result on luminal. Call it like the model."""
    if not isinstance(example_inputs, tuple):
        example_inputs = (example_inputs,)
    with torch.no_grad():
        program = torch.export.export(model, example_inputs, dynamic_shapes=dynamic_shapes, strict=strict)
        program = program.run_decompositions(decompositions())
    return CompiledModule(program, device=device, search=search, threads=threads)
