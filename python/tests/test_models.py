"""Hugging Face causal LMs with random weights through torch.compile(backend="luminal"),
transformers' eager forward as the oracle: the prefill logits, then 5 greedy decode steps
with a StaticCache (its tensors written in place) compiled once, for Llama, Qwen3,
Qwen3-MoE and Gemma 3 with eager and SDPA attention; one layer of Llama-3-8B's width; and models
loaded in bf16, against the f32 run of their rounded weights."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
import luminal.torch as lt  # noqa: E402

SMALL = dict(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2)


def _config(family: str):
    if family == "llama":
        return transformers.LlamaConfig(**SMALL)
    if family == "qwen3":
        return transformers.Qwen3Config(**SMALL, head_dim=8)
    if family == "qwen3_moe":
        return transformers.Qwen3MoeConfig(**SMALL, head_dim=8, moe_intermediate_size=16, num_experts=4,
                                           num_experts_per_tok=2)
    if family == "gemma3":
        return transformers.Gemma3TextConfig(**SMALL, head_dim=8, sliding_window=4)
    raise ValueError(family)


def _model(config, attention: str):
    config._attn_implementation = attention
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(config).eval()


PROMPT = 7
STEPS = 5


@pytest.mark.parametrize("attention", ["eager", "sdpa"])
@pytest.mark.parametrize("family", ["llama", "qwen3", "qwen3_moe", "gemma3"])
def test_prefill_and_static_cache_decode_match_transformers(family, attention):
    config = _config(family)
    model = _model(config, attention)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="luminal")
    ids = torch.randint(0, config.vocab_size, (1, PROMPT), generator=torch.Generator().manual_seed(1))
    ours_cache = transformers.StaticCache(config=config, max_cache_len=PROMPT + STEPS + 2)
    eager_cache = transformers.StaticCache(config=config, max_cache_len=PROMPT + STEPS + 2)
    with torch.no_grad():
        positions = torch.arange(PROMPT)
        ours = compiled(input_ids=ids, past_key_values=ours_cache, cache_position=positions, use_cache=True).logits
        eager = model(input_ids=ids, past_key_values=eager_cache, cache_position=positions, use_cache=True).logits
        torch.testing.assert_close(ours, eager, atol=1e-5, rtol=1e-5)
        token = eager[:, -1:].argmax(-1)
        before = lt.backend.compilations
        for step in range(STEPS):
            position = torch.tensor([PROMPT + step])
            ours = compiled(input_ids=token, past_key_values=ours_cache, cache_position=position, use_cache=True).logits
            eager = model(input_ids=token, past_key_values=eager_cache, cache_position=position, use_cache=True).logits
            torch.testing.assert_close(ours, eager, atol=1e-5, rtol=1e-5)
            token = eager[:, -1:].argmax(-1)
        assert lt.backend.compilations - before == 1, "the decode steps should share one compilation"
        for ours_layer, eager_layer in zip(ours_cache.layers, eager_cache.layers):
            torch.testing.assert_close(ours_layer.keys, eager_layer.keys, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(ours_layer.values, eager_layer.values, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_prefill_without_cache_matches_transformers(family):
    config = _config(family)
    model = _model(config, "sdpa")
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="luminal")
    with torch.no_grad():
        for length in (5, 9, 13):
            ids = torch.randint(0, config.vocab_size, (1, length), generator=torch.Generator().manual_seed(length))
            torch.testing.assert_close(compiled(ids).logits, model(ids).logits, atol=1e-5, rtol=1e-5)


def test_one_layer_at_llama3_8b_width():
    config = transformers.LlamaConfig(vocab_size=1024, hidden_size=4096, intermediate_size=14336,
                                      num_hidden_layers=1, num_attention_heads=32, num_key_value_heads=8,
                                      rope_theta=500000.0, max_position_embeddings=256)
    model = _model(config, "sdpa")
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="luminal")
    ids = torch.randint(0, config.vocab_size, (1, 6), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        # 4096-wide f32 sums: a looser bound than the small models' 1e-5
        torch.testing.assert_close(compiled(ids).logits, model(ids).logits, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("family", ["llama", "qwen3", "gemma3"])
def test_bf16_model_is_as_close_to_f32_as_transformers_bf16_run(family):
    """A model loaded in bf16 (weights, activations and cache), with prompts of more rows than
    the decode products take (so the prompt GEMMs run, on bf16 pairs where the CPU has
    AVX512_BF16) and with one row. Two bf16 runs that round in different orders differ by about
    what each moved from the exact result, so the oracle is the f32 run of the same rounded
    weights: ours must be within 1.5x of transformers' own bf16 distance from it, and pick the
    same greedy token wherever the f32 run's top-2 margin exceeds both distances."""
    config = _config(family)
    config.hidden_size, config.intermediate_size = 64, 128
    model = _model(config, "sdpa").to(torch.bfloat16)
    exact = _model(config, "sdpa")
    exact.load_state_dict({name: value.float() for name, value in model.state_dict().items()})
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="luminal")
    with torch.no_grad():
        for length in (1, 24, 37):
            ids = torch.randint(0, config.vocab_size, (1, length), generator=torch.Generator().manual_seed(length))
            reference = exact(ids).logits
            theirs = (model(ids).logits.float() - reference).abs().max().item()
            ours_logits = compiled(ids).logits
            assert ours_logits.dtype == torch.bfloat16
            ours = (ours_logits.float() - reference).abs().max().item()
            assert ours <= 1.5 * theirs + 1e-3, f"length {length}: ours {ours} from f32, transformers' bf16 {theirs}"
            top2 = reference[0].topk(2, -1).values
            clear = (top2[:, 0] - top2[:, 1]) > 2 * max(ours, theirs)
            assert torch.equal(ours_logits[0].float().argmax(-1)[clear], reference[0].argmax(-1)[clear])
