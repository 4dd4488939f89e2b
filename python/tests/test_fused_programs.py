"""transformers' Llama through torch.compile(backend="luminal") reaches the program nn::llama
compiles for the same config.json, for the prompt with a StaticCache and for a decode step:
one fused attention per layer, every product a Matmul, the KV-cache rows scattered in place,
and the launches that compute the model's values (float results: norms, rotary embedding,
SwiGLU, attention, products) within 10% of nn::llama's. Integer launches are left out of the
count: transformers' StaticCache keeps a position per layer, so its graph computes cache
positions and scatter offsets in every layer, where nn::llama computes one for all. The
logits are checked against eager's."""
from __future__ import annotations

import collections

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
import luminal  # noqa: E402
import luminal.torch as lt  # noqa: E402

CONFIG = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
              num_key_value_heads=2)
PROMPT = 6
CONTEXT = 16
FLOATS = ("f32", "f16", "bf16")


def _launches(ops, dtypes=None) -> collections.Counter:
    """The program's kernels by op (inputs, outputs and constants launch nothing), of results
    of `dtypes` if given."""
    return collections.Counter(op for op, dtype in ops if op not in ("Input", "Output", "Constant")
                               and (dtypes is None or dtype in dtypes))


@pytest.fixture
def compiled_programs(monkeypatch):
    """The (op, dtype) lists of the graphs the backend compiles, in order."""
    programs = []
    compile_fx = lt.backend.compile_fx

    def recording(gm, example_inputs, settings):
        run = compile_fx(gm, example_inputs, settings)
        programs.append(run.compiled_graph.compiled.program_ops)
        return run

    monkeypatch.setattr(lt.backend, "compile_fx", recording)
    return programs


def test_llama_programs_match_nn_llama(compiled_programs):
    config = transformers.LlamaConfig(**CONFIG)
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="luminal")
    ours_cache = transformers.StaticCache(config=config, max_cache_len=CONTEXT)
    eager_cache = transformers.StaticCache(config=config, max_cache_len=CONTEXT)
    ids = torch.randint(0, config.vocab_size, (1, PROMPT), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        for positions in (torch.arange(PROMPT), torch.tensor([PROMPT])):
            ours = compiled(input_ids=ids, past_key_values=ours_cache, cache_position=positions, use_cache=True).logits
            eager = model(input_ids=ids, past_key_values=eager_cache, cache_position=positions, use_cache=True).logits
            torch.testing.assert_close(ours, eager, atol=1e-5, rtol=1e-5)
            ids = eager[:, -1:].argmax(-1)
    assert len(compiled_programs) == 2, "the prompt and the decode step should be one graph each"

    reference_ops = luminal._luminal.causal_lm_program_ops(config.to_json_string(), CONTEXT)
    reference, reference_values = _launches(reference_ops), _launches(reference_ops, FLOATS)
    layers = config.num_hidden_layers
    assert reference["Attention"] == layers and reference["Scatter"] == 2 * layers
    for ops in compiled_programs:
        ours, values = _launches(ops), _launches(ops, FLOATS)
        for fused in ("Attention", "Scatter"):
            assert ours[fused] == reference[fused], f"{fused}: {dict(ours)} against nn::llama's {dict(reference)}"
        # A decode step's first sum of squares may be priced as a product too.
        assert ours["Matmul"] >= reference["Matmul"], f"products: {dict(ours)} against nn::llama's {dict(reference)}"
        total, expected = sum(values.values()), sum(reference_values.values())
        assert abs(total - expected) <= 0.1 * expected, \
            f"{total} float launches against nn::llama's {expected}: {dict(values)} against {dict(reference_values)}"
