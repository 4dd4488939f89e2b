"""Core ATen overloads that torch.compile's decompositions remove before the backend sees
them (edge pads, fill, select_scatter, inference dropout, batch and group norm), traced as they are with make_fx and translated
directly, against eager. (The README's coverage figure is checked with its op table, in
test_torch_frontend.py.)"""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402

from luminal.torch.runner import CompiledGraph  # noqa: E402
from luminal.torch.translate import translate  # noqa: E402

aten = torch.ops.aten

CASES = {
    "reflection_pad1d": (lambda x: aten.reflection_pad1d(x, [2, 3]), (2, 3, 7)),
    "reflection_pad2d": (lambda x: aten.reflection_pad2d(x, [1, 2, 3, 1]), (1, 2, 5, 6)),
    "reflection_pad3d": (lambda x: aten.reflection_pad3d(x, [1, 1, 2, 0, 3, 2]), (1, 1, 4, 5, 6)),
    "replication_pad1d": (lambda x: aten.replication_pad1d(x, [4, 1]), (2, 3, 3)),
    "replication_pad2d": (lambda x: aten.replication_pad2d(x, [1, 2, 3, 1]), (1, 2, 5, 6)),
    "replication_pad3d": (lambda x: aten.replication_pad3d(x, [0, 2, 1, 1, 3, 0]), (1, 1, 4, 5, 6)),
    "fill": (lambda x: aten.fill.Scalar(x, 2.5), (3, 4)),
    "select_scatter": (lambda x: aten.select_scatter(x, x[:, :, 1] * 2, 2, -1), (2, 3, 4)),
    "native_dropout": (lambda x: aten.native_dropout(x, 0.5, False)[0] * 2, (3, 4)),
}
# Normalisations with their statistics, on a [2, 6, 5, 4] input and [6] parameters.
NORMS = {
    "_native_batch_norm_legit_no_training": lambda x, w, b, m, v: aten._native_batch_norm_legit_no_training(
        x, w, b, m, v.abs() + 0.5, 0.1, 1e-5)[0],
    "_native_batch_norm_legit.no_stats": lambda x, w, b, m, v: aten._native_batch_norm_legit.no_stats(
        x, w, b, True, 0.1, 1e-5),
    "native_group_norm": lambda x, w, b, m, v: aten.native_group_norm(x, w, b, 2, 6, 20, 3, 1e-5),
}


def _check(name, fn, *inputs):
    gm = make_fx(fn, tracing_mode="fake")(*inputs)
    targets = {str(n.target) for n in gm.graph.nodes if n.op == "call_function"}
    assert any(name in t for t in targets), targets  # the overload itself reaches the translator
    ours = CompiledGraph(translate(gm))(*inputs)
    expected = fn(*inputs)
    expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
    assert len(ours) == len(expected)
    for got, want in zip(ours, expected):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", CASES)
def test_core_overload_matches_eager(name):
    fn, shape = CASES[name]
    _check(name, fn, torch.randn(shape, generator=torch.Generator().manual_seed(0)))


@pytest.mark.parametrize("name", NORMS)
def test_normalisation_and_its_statistics_match_eager(name):
    generator = torch.Generator().manual_seed(0)
    inputs = [torch.randn(2, 6, 5, 4, generator=generator)] + [torch.randn(6, generator=generator) for _ in range(4)]
    _check(name, NORMS[name], *inputs)
