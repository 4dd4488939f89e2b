"""Keys and values repeated per query head in front of an attention op (transformers'
repeat_kv: unsqueeze, expand, clone, view) are handed to it unrepeated, as grouped-query
attention. Repeated, they are a copy of the whole cache per layer at every call, and the
runtimes' attention rules, which find keys and values shared by a group of query heads,
do not fire on the copy. The FX graph itself is left as it is: the translation reads the
arguments from the mapping this returns."""
from __future__ import annotations

import torch
import torch.fx

_SDPA = torch.ops.aten.scaled_dot_product_attention.default
_ATTENTION = (_SDPA, torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default)
_VIEWS = (torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default, torch.ops.aten.reshape.default)
_INT64_MAX = 2**63 - 1
_SDPA_ENABLE_GQA = 7  # its position in scaled_dot_product_attention's schema


def unrepeated_arguments(graph: torch.fx.Graph) -> dict[torch.fx.Node, tuple[tuple, dict]]:
    """Attention node -> (args, kwargs) with its keys and values unrepeated, for each
    attention node whose keys and values are both repeated by the same factor."""
    rewrites = {}
    for node in graph.nodes:
        if node.op != "call_function" or node.target not in _ATTENTION or len(node.args) < 3:
            continue
        keys, values = _repeated(node.args[1]), _repeated(node.args[2])
        if keys is None or values is None or keys[1] != values[1]:
            continue
        args = list(node.args)
        args[1], args[2] = keys[0], values[0]
        kwargs = dict(node.kwargs)
        if node.target is _SDPA:
            if len(args) > _SDPA_ENABLE_GQA:
                args[_SDPA_ENABLE_GQA] = True
            else:
                kwargs["enable_gqa"] = True
        rewrites[node] = (tuple(args), kwargs)
    return rewrites


def _repeated(node) -> tuple[torch.fx.Node, int] | None:
    """(x, n) when `node` is x [B, H, T, E] with each head repeated n times in place
    (view(clone(expand(unsqueeze(x, 2)))), with slices that keep everything between),
    head h reading x's head h // n."""
    if not _is_call(node, _VIEWS):
        return None
    source = node.args[0]
    if _is_call(source, (torch.ops.aten.clone.default,)):
        source = source.args[0]
    if not _is_call(source, (torch.ops.aten.expand.default,)):
        return None
    unsqueezed = _whole(source.args[0])
    if not _is_call(unsqueezed, (torch.ops.aten.unsqueeze.default,)) or unsqueezed.args[1] not in (2, -3):
        return None
    x = _whole(unsqueezed.args[0])
    shapes = [_shape(n) for n in (x, source, node)]
    if any(s is None for s in shapes):
        return None
    x_shape, expanded, viewed = shapes
    if len(x_shape) != 4 or len(expanded) != 5 or len(viewed) != 4:
        return None
    repeats, heads = expanded[2], x_shape[1]
    if not isinstance(repeats, int) or not isinstance(heads, int) or viewed[1] != heads * repeats:
        return None
    same = all(str(a) == str(b) for a, b in zip((x_shape[0], x_shape[2], x_shape[3]), (viewed[0], viewed[2], viewed[3])))
    return (x, repeats) if same else None


def _whole(node):
    """The tensor a chain of slices that keep every element ([:, :, None] indexing) reads."""
    while _is_call(node, (torch.ops.aten.slice.Tensor,)) and not node.kwargs:
        dim, start, end, step = list(node.args[1:]) + [0, None, None, 1][len(node.args) - 1:]
        shape = _shape(node.args[0])
        whole = end is None or end == _INT64_MAX or (shape is not None and str(end) == str(shape[dim]))
        if start not in (0, None) or step != 1 or not whole:
            return node
        node = node.args[0]
    return node


def _is_call(node, targets) -> bool:
    return isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target in targets


def _shape(node: torch.fx.Node) -> list | None:
    val = node.meta.get("val")
    return list(val.shape) if isinstance(val, torch.Tensor) else None
