"""An exported or AOT-traced FX graph of core ATen ops -> a luminal Graph, node by node
through the table (table.py). What the translation records besides the graph: each
placeholder's input slot, which input axis (or SymInt argument) gives each dynamic
dimension its value at run time, and each output (a tensor, or a size computed from the
dimensions)."""
from __future__ import annotations

import operator
from dataclasses import dataclass, field

import torch
import torch.fx

from .. import _luminal
from .._luminal import Error, Tensor
from . import ops_creation, ops_elementwise, ops_indexing, ops_movement, ops_reduce  # noqa: F401  (fill the table)
from .shared_kv import unrepeated_arguments
from .symbols import SymbolTable
from .table import TRANSLATIONS, Context, luminal_dtype


@dataclass
class InputSlot:
    """One placeholder: a tensor input, a SymInt argument, or a static value."""
    name: str
    kind: str                      # "tensor", "size" or "static"
    tensor: Tensor | None = None
    torch_dtype: torch.dtype | None = None
    shape: list = field(default_factory=list)   # ints and Exprs


@dataclass
class OutputSlot:
    kind: str                      # "tensor" or "value"
    tensor: Tensor | None = None
    torch_dtype: torch.dtype | None = None
    shape: list = field(default_factory=list)
    value: object = None           # an int, an Expr, None, or a Python constant


@dataclass
class Translation:
    graph: _luminal.Graph
    inputs: list[InputSlot]
    outputs: list[OutputSlot]
    dim_sources: dict[str, tuple[int, int | None]]   # letter -> (input index, axis or None for a SymInt)
    constants: list[tuple[Tensor, torch.Tensor]]     # get_attr tensors, bound once


class UnsupportedOp(Error):
    """An aten op with no translation (options={"fallback": True} runs it in PyTorch instead)."""


_SIZE_FUNCTIONS = {operator.add, operator.sub, operator.mul, operator.floordiv, operator.mod, operator.neg,
                   operator.pow, operator.truediv, operator.eq, operator.ne, operator.lt, operator.le, operator.gt,
                   operator.ge} | {getattr(torch, f) for f in ("sym_max", "sym_min", "sym_float", "sym_int", "sym_not",
                                                              "sym_ite") if hasattr(torch, f)}
_IGNORED = {"_assert_scalar", "sym_constrain_range", "sym_constrain_range_for_size", "_assert_async",
            "_assert_tensor_metadata", "_print"}


def target_name(target) -> str:
    return str(target) if not callable(target) or hasattr(target, "_schema") else getattr(target, "__name__", str(target))


def is_supported(node: torch.fx.Node) -> bool:
    """Whether the translator handles this call_function node."""
    ops_indexing.register_late_ops()
    target = node.target
    if target in TRANSLATIONS or target in _SIZE_FUNCTIONS or target is operator.getitem:
        return True
    if _is_size_valued(node):
        return True
    return _overload_name(target) in _IGNORED


def _overload_name(target) -> str:
    schema = getattr(target, "_schema", None)
    return schema.name.split("::")[-1] if schema is not None else ""


def _is_size_valued(node: torch.fx.Node) -> bool:
    val = node.meta.get("val")
    return isinstance(val, (int, torch.SymInt, torch.SymBool, bool)) and not isinstance(val, torch.Tensor)


def translate(gm: torch.fx.GraphModule, *, name: str = "graph") -> Translation:
    ops_indexing.register_late_ops()
    graph = _luminal.Graph()
    symbols = SymbolTable()
    env: dict[torch.fx.Node, object] = {}
    inputs: list[InputSlot] = []
    outputs: list[OutputSlot] = []
    dim_sources: dict[str, tuple[int, int | None]] = {}
    constants: list[tuple[Tensor, torch.Tensor]] = []
    rewritten_arguments = unrepeated_arguments(gm.graph)

    for node in gm.graph.nodes:
        if node.op == "placeholder":
            slot = _placeholder(graph, symbols, node, len(inputs), dim_sources)
            inputs.append(slot)
            env[node] = slot.tensor if slot.kind == "tensor" else _placeholder_value(symbols, node)
        elif node.op == "get_attr":
            value = _attribute(gm, node.target)
            if isinstance(value, torch.Tensor):
                dtype = luminal_dtype(value.dtype, f"constant '{node.target}'")
                t = graph.tensor([symbols.size(d) for d in value.shape], dtype, name=str(node.target))
                constants.append((t, value))
                env[node] = t
            else:
                env[node] = value
        elif node.op == "call_function":
            env[node] = _call(graph, symbols, node, env, rewritten_arguments.get(node, (node.args, node.kwargs)))
        elif node.op == "output":
            for value, out_node in _flat_outputs(node, env):
                outputs.append(_output(graph, symbols, value, out_node))
        else:
            raise Error(f"torch front end: FX node '{node.name}' is a {node.op}, which the translator does not handle "
                        "(call_module/call_method nodes are not core ATen)")
    _check_dims_bound(symbols, dim_sources, name)
    return Translation(graph, inputs, outputs, dim_sources, constants)


def _attribute(gm: torch.nn.Module, target: str):
    value = gm
    for part in target.split("."):
        value = getattr(value, part)
    return value


def _placeholder(graph, symbols: SymbolTable, node, index: int, dim_sources) -> InputSlot:
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor):
        dtype = luminal_dtype(val.dtype, f"input '{node.name}'")
        shape = [symbols.size(d) for d in val.shape]
        for axis, d in enumerate(val.shape):
            if isinstance(d, torch.SymInt) and d.node.expr.is_Symbol:
                dim_sources.setdefault(symbols.letter(d.node.expr), (index, axis))
        tensor = graph.tensor(shape, dtype, name=node.name)
        return InputSlot(node.name, "tensor", tensor, val.dtype, shape)
    if isinstance(val, torch.SymInt):
        if val.node.expr.is_Symbol:
            dim_sources.setdefault(symbols.letter(val.node.expr), (index, None))
        return InputSlot(node.name, "size")
    if val is None and "example_value" not in node.meta and not node.users:
        return InputSlot(node.name, "static")
    if isinstance(val, (int, float, bool)) or val is None:
        return InputSlot(node.name, "static")
    raise Error(f"torch front end: input '{node.name}' is a {type(val).__name__}, which luminal cannot take")


def _placeholder_value(symbols: SymbolTable, node):
    val = node.meta.get("val")
    if isinstance(val, torch.SymInt):
        return symbols.size(val)
    return val


def _check_dims_bound(symbols: SymbolTable, dim_sources, name: str) -> None:
    for symbol, letter in symbols.letters.items():
        if letter not in dim_sources:
            raise Error(f"torch front end: the symbolic size {symbol} of {name} is not the size of any input axis, so "
                        "its value is unknown at run time (a data-dependent shape?)")


def _call(graph, symbols: SymbolTable, node: torch.fx.Node, env, arguments: tuple[tuple, dict]):
    target = node.target
    args = torch.fx.node.map_arg(arguments[0], lambda n: env[n])
    kwargs = torch.fx.node.map_arg(arguments[1], lambda n: env[n])
    if target is operator.getitem:
        return args[0][args[1]]
    if _is_size_valued(node):
        val = node.meta["val"]
        return symbols.size(val) if isinstance(val, (int, torch.SymInt)) and not isinstance(val, bool) else val
    if _overload_name(target) in _IGNORED:
        return None
    translation = TRANSLATIONS.get(target)
    if translation is None:
        val = node.meta.get("val")
        complex_result = ": its result is complex, and luminal has no complex dtype" \
            if isinstance(val, torch.Tensor) and val.is_complex() else ""
        raise UnsupportedOp(f"torch front end: no luminal translation for {target_name(target)} "
                            f"(FX node '{node.name}'){complex_result}; options={{'fallback': True}} runs unsupported "
                            "ops in PyTorch")
    cx = Context(graph, symbols, node)
    try:
        result = translation(cx, *args, **kwargs)
    except UnsupportedOp:
        raise
    except Error as error:
        message = str(error)
        if f"FX node '{node.name}'" not in message:
            message = f"{message} (in {target_name(target)}, FX node '{node.name}')"
        raise Error(message) from error
    return _conform(cx, result)


def _conform(cx: Context, result):
    """Casts each tensor of the result to the dtype the metadata gives, and checks its rank."""
    val = cx.node.meta.get("val")
    if isinstance(result, Tensor):
        return _conform_tensor(cx, result, val)
    if isinstance(result, (tuple, list)) and isinstance(val, (tuple, list)):
        conformed = [_conform_tensor(cx, r, v) if isinstance(r, Tensor) else r for r, v in zip(result, val)]
        return type(result)(conformed) if isinstance(result, tuple) else conformed
    return result


def _conform_tensor(cx: Context, t: Tensor, val) -> Tensor:
    if not isinstance(val, torch.Tensor):
        return t
    if t.ndim != val.ndim:
        raise Error(f"torch front end: {cx.where()} gave a rank-{t.ndim} tensor {t.shape} where PyTorch has shape "
                    f"{list(val.shape)} (a translation bug)")
    dtype = luminal_dtype(val.dtype, cx.where())
    return t if t.dtype == dtype else t.cast(dtype)


def _flat_outputs(node: torch.fx.Node, env):
    values = node.args[0]
    if not isinstance(values, (tuple, list)):
        values = (values,)
    for v in values:
        yield (env[v] if isinstance(v, torch.fx.Node) else v), v


def _output(graph, symbols, value, out_node) -> OutputSlot:
    if isinstance(value, Tensor):
        val = out_node.meta.get("val") if isinstance(out_node, torch.fx.Node) else None
        torch_dtype = val.dtype if isinstance(val, torch.Tensor) else None
        shape = [symbols.size(d) for d in val.shape] if isinstance(val, torch.Tensor) else value.shape
        return OutputSlot("tensor", value.output(), torch_dtype, shape)
    return OutputSlot("value", value=value)
