"""PyTorch's own OpInfo samples (op_db) for every op family the translation table covers,
through torch.compile(backend="luminal") against eager: f32 within 1e-5 (abs and rel),
bf16 within 1.6e-2 (two bf16 ulps near 1; products round differently). A sample known to
fail is listed in KNOWN_FAILURES with its reason and runs as a strict xfail."""
from __future__ import annotations

import functools

import pytest

torch = pytest.importorskip("torch")
from torch.testing._internal.common_methods_invocations import op_db  # noqa: E402

import luminal.torch as lt  # noqa: E402
from luminal.torch.table import TRANSLATIONS  # noqa: E402
from opinfo_known_failures import KNOWN_FAILURES  # noqa: E402

SAMPLES = {torch.float32: 3, torch.bfloat16: 1}
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 1.6e-2}
# Not compared: a triton-only variant, and ops whose values are uninitialised memory (empty*).
_SKIPPED_VARIANTS = {"triton_optimized"}
_UNINITIALISED = {"empty", "empty_like", "empty_strided", "empty_permuted", "new_empty"}


def _table_names() -> set[str]:
    return {str(t).split(".")[1] for t in TRANSLATIONS if str(t).startswith("aten.")}


def _covered(op) -> bool:
    names = _table_names()
    short = op.name.removeprefix("nn.functional.")
    return op.variant_test_name not in _SKIPPED_VARIANTS and op.name not in _UNINITIALISED and (
        op.aten_name in names or op.name in names or short in names or short.split(".")[0] in names)


OPS = sorted((op for op in op_db if _covered(op)), key=lambda o: (o.name, o.variant_test_name))


def _full_name(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


@functools.lru_cache(maxsize=None)
def _samples(name: str, dtype):
    op = next(o for o in OPS if _full_name(o) == name)
    torch.manual_seed(0)
    return op, list(op.sample_inputs("cpu", dtype, requires_grad=False))[:SAMPLES[dtype]]


def _cases():
    for op in OPS:
        name = _full_name(op)
        for dtype in SAMPLES:
            if dtype not in op.supported_dtypes("cpu"):
                continue
            torch.manual_seed(0)
            count = min(SAMPLES[dtype], sum(1 for _ in op.sample_inputs("cpu", dtype, requires_grad=False)))
            for index in range(count):
                key = (name, str(dtype).removeprefix("torch."), index)
                marks = [pytest.mark.xfail(reason=KNOWN_FAILURES[key], strict=True)] if key in KNOWN_FAILURES else []
                yield pytest.param(name, dtype, index, id=f"{name}-{key[1]}-{index}", marks=marks)


def _split(sample):
    """The sample's tensors as the compiled function's arguments; everything else fixed."""
    leaves = [sample.input, *sample.args]
    tensors = [v for v in leaves if isinstance(v, torch.Tensor)]
    slots = [isinstance(v, torch.Tensor) for v in leaves]

    def rebuild(values):
        it = iter(values)
        return [next(it) if is_tensor else v for v, is_tensor in zip(leaves, slots)]
    return tensors, rebuild


@pytest.mark.parametrize("name,dtype,index", list(_cases()))
def test_opinfo_sample(name, dtype, index):
    op, samples = _samples(name, dtype)
    sample = samples[index]
    tensors, rebuild = _split(sample)
    kwargs = sample.kwargs

    def call(*values):
        first, *rest = rebuild(values)
        return op(first, *rest, **kwargs)

    with torch.no_grad():
        expected = call(*tensors)
        torch._dynamo.reset()
        before = lt.backend.compilations
        actual = torch.compile(call, backend="luminal", dynamic=False)(*[t.clone() for t in tensors])
    assert lt.backend.compilations > before, "no graph reached the luminal backend"
    tol = TOLERANCE[dtype]
    torch.testing.assert_close(actual, expected, atol=tol, rtol=tol, equal_nan=True, check_stride=False)
