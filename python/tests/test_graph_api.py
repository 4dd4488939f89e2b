"""The graph API from Python against numpy: the README quickstart's twin, dynamic
dimensions, dtypes in and out, inputs read in place, and errors carrying the C++ message."""
from __future__ import annotations

import numpy as np
import pytest

import luminal


def test_quickstart_matches_numpy():
    g = luminal.Graph()
    a = g.tensor([3, 1])
    b = g.tensor([1, 4])
    c = a.matmul(b).output()
    rt = g.compile("cpu")
    rt.set_data(a, [1, 2, 3])
    rt.set_data(b, [1, 2, 3, 3])
    rt.execute()
    expected = np.array([[1], [2], [3]], np.float32) @ np.array([[1, 2, 3, 3]], np.float32)
    np.testing.assert_array_equal(rt.get(c), expected)


@pytest.mark.parametrize("runtime", ["cpu", "reference"])
def test_one_compile_serves_every_dynamic_size(runtime):
    g = luminal.Graph()
    x = g.tensor(["s", 8], name="x")
    w = g.tensor([8, 5], name="w")
    y = (x.matmul(w).softmax(-1) * 2.0 - x.mean(-1, keepdim=True)).output()
    rt = g.compile(runtime)
    rng = np.random.default_rng(0)
    weights = rng.standard_normal((8, 5)).astype(np.float32)
    rt.set_data(w, weights)
    for rows in (1, 3, 17):
        xs = rng.standard_normal((rows, 8)).astype(np.float32)
        rt.set_data(x, xs)
        rt.execute({"s": rows})
        logits = xs @ weights
        soft = np.exp(logits - logits.max(-1, keepdims=True))
        expected = soft / soft.sum(-1, keepdims=True) * 2 - xs.mean(-1, keepdims=True)
        out = rt.get(y)
        assert out.shape == (rows, 5)
        np.testing.assert_allclose(out, expected, atol=1e-5, rtol=1e-5)


def test_shapes_show_dimensions_as_expressions():
    g = luminal.Graph()
    x = g.tensor(["s", 4])
    shape = x.reshape([-1]).shape
    assert len(shape) == 1 and isinstance(shape[0], luminal.Expr)
    assert shape[0].eval({"s": 3}) == 12
    assert x.shape[1] == 4


def test_dimension_ranges_fold_sizes_and_guard_executions():
    a = luminal.Expr.dim("a", 2, 64)
    assert a.range == (2, 64)
    assert luminal._luminal.min_expr(a, 1) == 1  # a >= 2
    g = luminal.Graph()
    x = g.tensor([a], name="x")
    y = g.tensor(["b"], name="y")
    z = (x + y).output()  # a == b cannot be proven: checked when it runs
    rt = g.compile("cpu")
    rt.set_data(x, [1, 2, 3])
    rt.set_data(y, [10, 20, 30])
    rt.execute({"a": 3, "b": 3})
    np.testing.assert_array_equal(rt.get(z), np.array([11, 22, 33], np.float32))
    with pytest.raises(luminal.Error, match="assumed the sizes a and b equal, but here they are 3 and 4"):
        rt.execute({"a": 3, "b": 4})
    rt.set_data(x, [1])
    rt.set_data(y, [1])
    with pytest.raises(luminal.Error, match=r"dimension 'a' is 1, outside the range \[2, 64\]"):
        rt.execute({"a": 1, "b": 1})


def test_reshape_to_a_size_equal_only_at_run_time_is_guarded():
    # Mamba's parallel scan reshapes a static size to a symbolic one torch knows equal under
    # its guards; this used to crash (SIGBUS) instead of reshaping.
    a = luminal.Expr.dim("a", 5, 7)
    g = luminal.Graph()
    x = g.tensor([3, 2], name="x")
    y = x.permute([1, 0]).reshape([(a - 1) // 2 + 1, 2]).output()
    rt = g.compile("cpu")
    data = np.arange(6, dtype=np.float32).reshape(3, 2)
    rt.set_data(x, data)
    rt.execute({"a": 6})
    np.testing.assert_array_equal(rt.get(y), data.T.reshape(3, 2))
    with pytest.raises(luminal.Error, match="reshape assumed the sizes"):
        rt.execute({"a": 7})


def test_integer_and_bool_outputs():
    g = luminal.Graph()
    x = g.tensor([2, 5], name="x")
    idx = x.argmax(-1).output()
    positive = (x > 0).output()
    order = x.topk_indexes(2, -1).output()
    rt = g.compile("cpu")
    values = np.array([[0.5, -1, 3, 2, 0], [-2, -3, -1, -5, -4]], np.float32)
    rt.set_data(x, values)
    rt.execute()
    np.testing.assert_array_equal(rt.get(idx), values.argmax(-1))
    assert rt.get(positive).dtype == np.bool_
    np.testing.assert_array_equal(rt.get(positive), values > 0)
    np.testing.assert_array_equal(rt.get(order), np.argsort(-values, axis=-1, kind="stable")[:, :2])


def test_half_precision_round_trip():
    g = luminal.Graph()
    x = g.tensor([4], luminal.f16, name="x")
    y = (x * 2).output()
    rt = g.compile("cpu")
    values = np.array([1.5, -0.25, 65504 / 2, 3e-5], np.float16)
    rt.set_data(x, values)
    rt.execute()
    out = rt.get(y)
    assert out.dtype == np.float16
    np.testing.assert_array_equal(out, values * np.float16(2))


def test_float64_arrays_convert_to_the_input_dtype():
    g = luminal.Graph()
    x = g.tensor([3], name="x")
    y = (x + 1).output()
    rt = g.compile("cpu")
    rt.set_data(x, np.array([0.5, 1.5, 2.5]))
    rt.execute()
    np.testing.assert_array_equal(rt.get(y), np.array([1.5, 2.5, 3.5], np.float32))


def test_cpu_runtime_reads_a_matching_array_in_place():
    g = luminal.Graph()
    x = g.tensor([3], name="x")
    y = (x * 10).output()
    rt = g.compile("cpu")
    values = np.array([1, 2, 3], np.float32)
    rt.set_data(x, values)
    values[0] = 7  # the runtime reads the bound array itself
    rt.execute()
    np.testing.assert_array_equal(rt.get(y), [70, 20, 30])


def _row_writer():
    """A [4, 3] cache whose row `index` (as flat element indexes) gets `row`, carried."""
    g = luminal.Graph()
    cache = g.tensor([4, 3], name="cache")
    index = g.tensor([3], luminal.DType.i32, name="index")
    row = g.tensor([3], name="row")
    updated = cache.scatter(index, row).output()
    g.carry(updated, cache)
    return g.compile("cpu"), cache, index, row, updated


def test_carried_scatter_writes_its_rows_into_the_bound_array():
    rt, cache, index, row, updated = _row_writer()
    assert rt.updates_in_place(updated)
    memory = np.arange(12, dtype=np.float32).reshape(4, 3)
    expected = memory.copy()
    assert rt.set_data(cache, memory)  # used in place
    rng = np.random.default_rng(0)
    for step in (2, 0):
        values = rng.standard_normal(3).astype(np.float32)
        rt.set_data(index, np.arange(3, dtype=np.int32) + 3 * step)
        rt.set_data(row, values)
        rt.execute()
        expected[step] = values
        np.testing.assert_array_equal(memory, expected)  # the bound array itself, no copy back
        np.testing.assert_array_equal(rt.get(updated), expected)
    memory[1] = -1  # later writes to it are seen, as for any input read in place
    expected[1] = -1
    rt.execute()
    np.testing.assert_array_equal(rt.get(updated), expected)


def test_carried_state_from_a_read_only_array_is_copied():
    rt, cache, index, row, updated = _row_writer()
    frozen = np.ones((4, 3), np.float32)
    frozen.flags.writeable = False
    assert not rt.set_data(cache, frozen)
    rt.set_data(index, np.array([3, 4, 5], np.int32))
    rt.set_data(row, np.full(3, 7, np.float32))
    rt.execute()
    np.testing.assert_array_equal(frozen, np.ones((4, 3)))
    np.testing.assert_array_equal(rt.get(updated), [[1, 1, 1], [7, 7, 7], [1, 1, 1], [1, 1, 1]])


def test_unused_input_is_accepted():
    g = luminal.Graph()
    x = g.tensor([2], name="x")
    unused = g.tensor([2], name="unused")
    y = (x + 1).output()
    rt = g.compile("cpu")
    rt.set_data(unused, np.zeros(2, np.float32))
    rt.set_data(x, np.ones(2, np.float32))
    rt.execute()
    np.testing.assert_array_equal(rt.get(y), [2, 2])


def test_errors_carry_the_cpp_message():
    g = luminal.Graph()
    with pytest.raises(luminal.Error, match=r"matmul: inner dimensions differ: \[2, 3\] @ \[4, 5\]"):
        g.tensor([2, 3]).matmul(g.tensor([4, 5]))
    x = g.tensor([3], name="x")
    (x + 1).output()
    rt = g.compile("cpu")
    with pytest.raises(luminal.Error, match=r"input 'x' has shape \[3\] \(3 values\) but the array has 4"):
        rt.set_data(x, np.zeros(4, np.float32))
    with pytest.raises(luminal.Error, match="unknown runtime 'tpu'"):
        g.compile("tpu")
    with pytest.raises(luminal.Error, match="a dynamic dimension is named by one letter"):
        g.tensor(["seq"])
    assert issubclass(luminal.Error, RuntimeError)


def test_cuda_without_a_device_says_so():
    g = luminal.Graph()
    (g.tensor([2]) + 1).output()
    try:
        g.compile("cuda")
    except luminal.Error as error:
        assert "no CUDA device" in str(error)
    else:
        pytest.skip("a CUDA device is present")


def test_import_does_not_import_torch(tmp_path):
    import subprocess
    import sys
    code = "import sys, luminal; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path)
    assert out.stdout.strip() == "False"
