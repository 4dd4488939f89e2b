"""The torch front end beyond single ops: one compilation for every sequence length, the
AOT path through torch.export with Dims, mutated inputs written back, the backend's options,
and bad input: unknown ops, unsupported dtypes, wrong shapes."""
from __future__ import annotations

import math
import warnings

import pytest

torch = pytest.importorskip("torch")
import luminal  # noqa: E402
import luminal.torch as lt  # noqa: E402


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(16)
        self.up = torch.nn.Linear(16, 32)
        self.down = torch.nn.Linear(32, 16)

    def forward(self, x):
        h = torch.nn.functional.gelu(self.up(self.norm(x)))
        return x + self.down(h).softmax(-1)


def test_dynamo_recompiles_once_for_a_dynamic_length_then_reuses():
    torch.manual_seed(0)
    model = Block().eval()
    compiled = torch.compile(model, backend="luminal")
    torch._dynamo.reset()
    before = lt.backend.compilations
    with torch.no_grad():
        for length in (3, 5, 9, 12):
            x = torch.randn(2, length, 16)
            torch.testing.assert_close(compiled(x), model(x), atol=1e-5, rtol=1e-5)
    # the first length compiles static, the second marks the length dynamic, the rest reuse it
    assert lt.backend.compilations - before == 2


def test_aot_compile_with_a_dim_serves_every_length_with_one_compilation():
    torch.manual_seed(0)
    model = Block().eval()
    before = lt.backend.compilations
    seq = torch.export.Dim("seq", min=2, max=64)
    compiled = lt.compile(model, (torch.randn(1, 4, 16),), dynamic_shapes={"x": {1: seq}})
    with torch.no_grad():
        for length in (2, 7, 33):
            x = torch.randn(1, length, 16)
            torch.testing.assert_close(compiled(x), model(x), atol=1e-5, rtol=1e-5)
    assert lt.backend.compilations == before  # the AOT path does not go through the dynamo backend


class CacheWriter(torch.nn.Module):
    def forward(self, cache, position, value):
        cache.index_copy_(1, position, value)
        return cache.sum(-1)


def test_aot_mutated_input_is_written_back():
    model = CacheWriter()
    cache = torch.zeros(2, 6, 4)
    position = torch.tensor([1])
    value = torch.randn(2, 1, 4)
    compiled = lt.compile(model, (cache.clone(), position, value))
    ours, eager = torch.zeros(2, 6, 4), torch.zeros(2, 6, 4)
    for step in range(3):
        pos = torch.tensor([step * 2])
        v = torch.randn(2, 1, 4)
        torch.testing.assert_close(compiled(ours, pos, v), model(eager, pos, v), atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(ours, eager, atol=0, rtol=0)


def test_dynamo_mutated_input_is_written_back():
    def write(cache, position, value):
        cache.index_put_((torch.arange(2)[:, None], position[None, :]), value)
        return cache * 2

    cache_ours, cache_eager = torch.zeros(2, 5), torch.zeros(2, 5)
    compiled = torch.compile(write, backend="luminal")
    with torch.no_grad():
        for step in range(3):
            pos, v = torch.tensor([step]), torch.randn(2, 1)
            torch.testing.assert_close(compiled(cache_ours, pos, v), write(cache_eager, pos, v))
    torch.testing.assert_close(cache_ours, cache_eager, atol=0, rtol=0)


class Attender(torch.nn.Module):
    """A StaticCache's pattern: index_copy_ new rows into a cache buffer, then read all of it."""

    def __init__(self):
        super().__init__()
        self.register_buffer("cache", torch.randn(2, 8, 4))

    def forward(self, position, value):
        self.cache.index_copy_(1, position, value)
        return torch.softmax(self.cache @ value.transpose(1, 2), dim=1)


def test_dynamo_cache_rows_are_written_into_the_callers_tensor():
    torch.manual_seed(0)
    ours, eager = Attender(), Attender()
    eager.cache.copy_(ours.cache)
    compiled = torch.compile(ours, backend="luminal")
    storage = ours.cache.data_ptr()
    with torch.no_grad():
        for step in range(4):
            position, value = torch.tensor([step * 2]), torch.randn(2, 1, 4)
            torch.testing.assert_close(compiled(position, value), eager(position, value), atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(ours.cache, eager.cache, atol=0, rtol=0)
            # a change made outside the graph (a cache reset, say) is what the next call reads
            ours.cache.mul_(0.5)
            eager.cache.mul_(0.5)
    assert ours.cache.data_ptr() == storage


def test_aot_cache_rows_are_written_in_place_or_copied_back():
    torch.manual_seed(0)
    model = CacheWriter()
    compiled = lt.compile(model, (torch.zeros(2, 6, 4), torch.tensor([1]), torch.randn(2, 1, 4)))
    contiguous = torch.randn(2, 6, 4)
    strided = torch.randn(2, 4, 6).transpose(1, 2)  # not contiguous: bound by a copy, written back by copy_
    for ours in (contiguous, strided):
        eager = ours.clone()
        for step in range(3):
            position, value = torch.tensor([step * 2]), torch.randn(2, 1, 4)
            torch.testing.assert_close(compiled(ours, position, value), model(eager, position, value),
                                       atol=1e-6, rtol=1e-6)
            torch.testing.assert_close(ours, eager, atol=0, rtol=0)
            ours.add_(1.0)
            eager.add_(1.0)


class StepCounter(torch.nn.Module):
    """State a graph mutates without a scatter (transformers' per-layer cache lengths): the
    runtime computes it out of place, and the call copies it into the caller's tensor."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)
        self.register_buffer("steps", torch.zeros((), dtype=torch.int64))

    def forward(self, x):
        self.steps.add_(1)
        return self.proj(x) * self.steps


def test_dynamo_state_computed_out_of_place_is_copied_into_the_callers_tensor():
    torch.manual_seed(0)
    ours, eager = StepCounter(), StepCounter()
    eager.load_state_dict(ours.state_dict())
    compiled = torch.compile(ours, backend="luminal")
    storage = ours.steps.data_ptr()
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(2, 4)
            torch.testing.assert_close(compiled(x), eager(x), atol=1e-5, rtol=1e-5)
            assert int(ours.steps) == int(eager.steps)
    assert ours.steps.data_ptr() == storage


def test_a_parameter_given_new_memory_is_read_from_there():
    # Tensors bound in place are not looked at again while their object and memory are the
    # same; a parameter whose data is replaced (new memory, same object) is bound again.
    torch.manual_seed(0)
    model = Block().eval()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="luminal")
    x = torch.randn(1, 3, 16)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), atol=1e-5, rtol=1e-5)
        compilations = lt.backend.compilations
        model.up.weight.data = torch.randn(32, 16)
        torch.testing.assert_close(compiled(x), model(x), atol=1e-5, rtol=1e-5)
        model.up.weight.mul_(0.5)  # same memory, new values: read in place
        torch.testing.assert_close(compiled(x), model(x), atol=1e-5, rtol=1e-5)
    assert lt.backend.compilations == compilations  # the same compiled graph, bound again


def test_wrong_input_dtype_in_the_aot_path_names_both_dtypes():
    compiled = lt.compile(Block().eval(), (torch.randn(1, 4, 16),))
    with pytest.raises(luminal.Error, match=r"input 'x' was compiled for torch.float32, got torch.float64"):
        compiled(torch.randn(1, 4, 16, dtype=torch.float64))


def _unknown_op(x):
    return torch.special.bessel_j0(x) + 1


def test_slice_from_a_symbolic_negative_start():
    # x[..., -n:] with n a dynamic size (Mamba's convolution state): the start is -n, which
    # must count from the end, not be clamped as a non-negative index.
    def tail(x, y):
        return x[..., -y.shape[-1]:] * y

    torch._dynamo.reset()
    compiled = torch.compile(tail, backend="luminal")
    x = torch.randn(2, 12)
    for n in (3, 5, 8):
        y = torch.randn(2, n)
        torch.testing.assert_close(compiled(x, y), tail(x, y))


def test_slice_of_static_length_broadcasts_over_a_symbolic_axis():
    # z[..., -1:] is 1 long, which torch knows; ours is size - max(size - 1, 0) for a size
    # (P / (P / 4), Mamba-2's chunks) the simplifier cannot bound below, and broadcasting it
    # against z must see the 1 (NemotronH), not guard it equal to 4.
    def last_column_minus(x):
        y = torch.nn.functional.pad(x, (0, (-x.shape[1]) % 4))
        z = y.reshape(1, y.shape[1] // 4, -1)
        return z[..., -1:] - z

    torch._dynamo.reset()
    compiled = torch.compile(last_column_minus, backend="luminal")
    for n in (5, 6, 9, 13):
        x = torch.randn(1, n)
        torch.testing.assert_close(compiled(x), last_column_minus(x))


@pytest.mark.parametrize("upper,left,unitriangular", [(False, True, True), (False, True, False), (True, True, False),
                                                     (True, False, True), (False, False, False)])
def test_triangular_solve_matches_eager(upper, left, unitriangular):
    generator = torch.Generator().manual_seed(0)
    # A well-conditioned triangle of the gated delta rule's chunk size, batched.
    a = torch.randn(2, 3, 64, 64, generator=generator) * 0.1 + torch.eye(64) * 2
    b = torch.randn(2, 3, 64, 5, generator=generator) if left else torch.randn(2, 3, 5, 64, generator=generator)

    def solve(a, b):
        return torch.linalg.solve_triangular(a, b, upper=upper, left=left, unitriangular=unitriangular)

    torch._dynamo.reset()
    torch.testing.assert_close(torch.compile(solve, backend="luminal")(a, b), solve(a, b), atol=1e-5, rtol=1e-5)


def test_select_on_an_axis_one_long_only_under_guards():
    # [:, 0] of the chunk axis reads min(chunks, 1) long, which is 1 for every length
    # torch allows but not provably (the chunked gated delta rule of Qwen3-Next).
    def first_chunk(x):
        y = torch.nn.functional.pad(x, (0, (-x.shape[1]) % 4))
        return y.reshape(1, -1, 4)[:, 0] * 2

    torch._dynamo.reset()
    compiled = torch.compile(first_chunk, backend="luminal")
    for n in (5, 6, 9, 13):
        x = torch.randn(1, n)
        torch.testing.assert_close(compiled(x), first_chunk(x))


def _bitwise(x, y):
    return x & y, x | y, x ^ y, ~x, x & 6, x | -3 if x.is_signed() else x | 3, (x > 0) | y


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int32, torch.int64])
def test_integer_bitwise_ops_match_torch(dtype):
    torch._dynamo.reset()
    info = torch.iinfo(dtype)
    edges = torch.tensor([0, 1, info.max, info.min, info.max - 1, info.min + 1], dtype=dtype)
    random = torch.randint(info.min, info.max, (2, 40), dtype=dtype, generator=torch.Generator().manual_seed(0))
    x, y = torch.cat([edges, random[0]]), torch.cat([edges.flip(0), random[1]])
    if dtype.is_signed:
        x, y = torch.cat([x, torch.tensor([-1, -2, 5], dtype=dtype)]), torch.cat([y, torch.tensor([-1, 3, -6], dtype=dtype)])
    ours = torch.compile(_bitwise, backend="luminal")(x, y)
    for got, expected in zip(ours, _bitwise(x, y)):
        assert got.dtype == expected.dtype
        assert torch.equal(got, expected), (got, expected)


def test_unknown_op_names_the_aten_op_and_the_fx_node():
    compiled = torch.compile(_unknown_op, backend="luminal")
    with pytest.raises(Exception, match=r"no luminal translation for aten\.special_bessel_j0\.default \(FX node "
                                        r"'special_bessel_j0'\)"):
        compiled(torch.randn(4))


def test_complex_op_says_complex_tensors_are_not_supported():
    torch._dynamo.reset()
    compiled = torch.compile(lambda x: torch.view_as_real(torch.polar(torch.ones_like(x), x)), backend="luminal")
    with pytest.raises(Exception, match=r"aten\.polar\.default \(FX node 'polar'\): its result is complex, and "
                                        r"luminal has no complex dtype"):
        compiled(torch.randn(4))


def test_fallback_runs_the_unknown_op_in_torch_and_warns_once():
    torch._dynamo.reset()
    compiled = torch.compile(_unknown_op, backend="luminal", options={"fallback": True})
    x = torch.randn(4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = compiled(x)
    torch.testing.assert_close(out, _unknown_op(x))
    messages = [str(w.message) for w in caught if "luminal" in str(w.message)]
    assert len(messages) == 1 and "aten.special_bessel_j0.default" in messages[0]


def test_unsupported_dtype_is_an_error_naming_it():
    compiled = torch.compile(lambda x: x * 2, backend="luminal")
    with pytest.raises(Exception, match="dtype torch.float64 is not supported"):
        compiled(torch.randn(3, dtype=torch.float64))


def test_wrong_input_shape_in_the_aot_path_names_the_input():
    compiled = lt.compile(Block().eval(), (torch.randn(1, 4, 16),))
    with pytest.raises(luminal.Error, match=r"input 'x' has shape \(1, 5, 16\) but the compiled graph takes "
                                            r"\(1, 4, 16\)"):
        compiled(torch.randn(1, 5, 16))


def test_unknown_option_is_an_error():
    compiled = torch.compile(lambda x: x + 1, backend="luminal", options={"serach": 3})
    with pytest.raises(Exception, match=r"unknown option\(s\) \['serach'\]"):
        compiled(torch.randn(2))


def test_search_and_reference_device_options():
    torch._dynamo.reset()
    model = Block().eval()
    x = torch.randn(1, 3, 16)
    with torch.no_grad():
        for options in ({"search": 4}, {"device": "reference"}):
            torch._dynamo.reset()
            out = torch.compile(model, backend="luminal", options=options)(x)
            torch.testing.assert_close(out, model(x), atol=1e-5, rtol=1e-5)


def test_cuda_device_without_a_gpu_says_so():
    torch._dynamo.reset()
    compiled = torch.compile(lambda x: x + 1, backend="luminal", options={"device": "cuda"})
    try:
        compiled(torch.randn(2))
    except Exception as error:  # dynamo wraps the backend's error
        assert "no CUDA device" in str(error)
    else:
        pytest.skip("a CUDA device is present")


def test_backend_is_found_through_the_entry_point():
    import importlib.metadata
    names = [ep.name for ep in importlib.metadata.entry_points(group="torch_dynamo_backends")]
    assert "luminal" in names
    assert "luminal" in torch._dynamo.list_backends()


def test_backend_by_name_without_importing_luminal_first():
    import subprocess
    import sys
    code = ("import torch\n"
            "with torch.no_grad():\n"
            "    print(torch.compile(lambda x: x * 2 + 1, backend='luminal')(torch.ones(3)).tolist())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[3.0, 3.0, 3.0]"


def test_readme_table_of_supported_ops_is_current():
    import importlib.util
    from pathlib import Path
    repo = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("op_table", repo / "python" / "tools" / "op_table.py")
    op_table = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(op_table)
    readme = (repo / "README.md").read_text()
    assert op_table.replaced(readme, op_table.table()) == readme, \
        "README's aten table is stale: python python/tools/op_table.py --write README.md"


@pytest.mark.parametrize("mask_dtype", [torch.bool, torch.float32])
def test_attention_with_shared_key_heads_and_a_fully_masked_row_matches_eager(mask_dtype):
    """scaled_dot_product_attention reaches the translation whole (not decomposed), through
    torch.compile and the AOT path: grouped key/value heads, a mask, and a query row the mask
    hides entirely (eager gives it zeros)."""
    class Attention(torch.nn.Module):
        def forward(self, q, k, v, mask):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)

    torch.manual_seed(0)
    q, k, v = torch.randn(1, 6, 5, 8), torch.randn(1, 2, 7, 8), torch.randn(1, 2, 7, 8)
    keep = torch.rand(1, 1, 5, 7) > 0.3
    keep[..., 2, :] = False
    mask = keep if mask_dtype == torch.bool else torch.zeros(keep.shape).masked_fill(~keep, -math.inf)
    model = Attention()
    with torch.no_grad():
        want = model(q, k, v, mask)
        got = torch.compile(model, backend="luminal")(q, k, v, mask)
        aot = lt.compile(model, (q, k, v, mask))
        got_aot = aot(q, k, v, mask)
    assert torch.all(want[..., 2, :] == 0)
    assert "scaled_dot_product" in aot.program.graph_module.code
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got_aot, want, atol=1e-5, rtol=1e-5)
