"""aten.convolution (1-d) through torch.compile(backend="luminal") against eager: the causal
depthwise convolution of Mamba-style layers, grouped, strided and dilated ones, over
several lengths of one compilation; a 2-d convolution is a clear luminal.Error."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
import luminal  # noqa: E402
import luminal.torch  # noqa: E402,F401

F = torch.nn.functional


@pytest.mark.parametrize("options", [dict(groups=8, padding=3), dict(groups=2), dict(stride=2, dilation=2, padding=1)],
                         ids=["depthwise-causal", "grouped", "strided-dilated"])
def test_conv1d_matches_eager(options):
    generator = torch.Generator().manual_seed(0)
    groups = options.get("groups", 1)
    weight = torch.randn(8, 8 // groups, 4, generator=generator)
    bias = torch.randn(8, generator=generator)

    def conv(x):
        return F.conv1d(x, weight, bias, **options)

    torch._dynamo.reset()
    compiled = torch.compile(conv, backend="luminal")
    with torch.no_grad():
        for length in (9, 12, 15):
            x = torch.randn(2, 8, length, generator=generator)
            torch.testing.assert_close(compiled(x), conv(x), atol=1e-5, rtol=1e-5)


def test_conv2d_is_a_clear_error():
    weight = torch.randn(4, 3, 3, 3)
    torch._dynamo.reset()
    compiled = torch.compile(lambda x: F.conv2d(x, weight), backend="luminal")
    with pytest.raises(Exception) as raised, torch.no_grad():
        compiled(torch.randn(1, 3, 8, 8))
    chain = [raised.value] + [getattr(raised.value, "inner_exception", None), raised.value.__cause__]
    assert any(isinstance(e, luminal.Error) and "2-d convolution is not supported" in str(e) for e in chain if e)
