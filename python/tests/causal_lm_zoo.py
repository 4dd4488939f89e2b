"""The decoder-only *ForCausalLM architectures of the installed transformers, each with a
tiny random-weight model built from its own Config() with small sizes, and one check: the
logits of torch.compile(backend="luminal") against eager at three prompt lengths, with and
without a cache. Shared by test_causal_lm_breadth.py and tools/causal_lm_table.py."""
from __future__ import annotations

import copy
import importlib
from dataclasses import dataclass

import torch
import transformers
from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

import luminal

# Small values for whichever of these a config has (names differ between families).
TINY_SIZES = {
    "vocab_size": 128, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "max_position_embeddings": 64,
    "n_embd": 32, "n_layer": 2, "n_head": 4, "n_inner": 64, "n_positions": 64, "d_model": 32, "num_layers": 2,
    "num_heads": 4, "ffn_dim": 64, "moe_intermediate_size": 16, "num_experts": 4, "num_local_experts": 4,
    "n_routed_experts": 4, "num_experts_per_tok": 2, "n_shared_experts": 1, "shared_expert_intermediate_size": 32,
    "kv_lora_rank": 16, "q_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 8,
    "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1, "rotary_dim": 4,
}
LAYER_COUNTS = ("num_hidden_layers", "n_layer", "num_layers")
# Token ids must index the small vocabulary.
TOKEN_IDS = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}
PROMPT_LENGTHS = (3, 6, 11)
TOLERANCE = 1e-5


class NotGeneric(Exception):
    """The architecture's tiny model cannot be built from its Config() with small sizes."""


@dataclass
class Architecture:
    model_type: str
    class_name: str


def decoder_only_architectures() -> list[Architecture]:
    """Every *ForCausalLM whose config is not encoder-decoder and whose family has no
    masked-LM head (BERT-style encoders that can also run as decoders)."""
    out = []
    for model_type, class_name in sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items()):
        if not class_name.endswith("ForCausalLM") or model_type not in CONFIG_MAPPING_NAMES:
            continue
        module = _module_of(class_name)
        if module is None or any(name.endswith("ForMaskedLM") for name in dir(module)):
            continue
        config_class = getattr(transformers, CONFIG_MAPPING_NAMES[model_type], None)
        if config_class is None or _is_encoder_decoder(config_class):
            continue
        out.append(Architecture(model_type, class_name))
    return out


def _is_encoder_decoder(config_class) -> bool:
    try:
        return bool(getattr(config_class(), "is_encoder_decoder", False))
    except Exception:  # a Config() that cannot be built is reported by tiny_model, not dropped here
        return False


def _module_of(class_name: str):
    cls = getattr(transformers, class_name, None)
    return importlib.import_module(cls.__module__) if cls is not None else None


def tiny_model(arch: Architecture) -> tuple[torch.nn.Module, int]:
    """A random-weight f32 model of `arch` in eval mode, and its vocabulary size. Configs
    that tie per-layer lists to their default depth (GPT-Neo's attention_types) are built
    again with that depth, still narrow."""
    config_class = getattr(transformers, CONFIG_MAPPING_NAMES[arch.model_type])
    try:
        defaults = config_class().to_dict()
    except Exception as error:
        raise NotGeneric(f"Config(): {type(error).__name__}: {first_line(error)}") from error
    small = {k: v for k, v in {**TINY_SIZES, **TOKEN_IDS}.items() if k in defaults}
    if "kv_lora_rank" in defaults:  # multi-head latent attention has as many key/value heads as query heads
        small["num_key_value_heads"] = small.get("num_attention_heads", TINY_SIZES["num_attention_heads"])
    small.update(_depth_reaching_attention(defaults, small))
    default_depth = {k: v for k, v in small.items() if k not in LAYER_COUNTS and k != "layer_types"}
    for sizes in (small, default_depth):
        try:
            config = config_class(**sizes)
            torch.manual_seed(0)
            model = getattr(transformers, arch.class_name)(config).eval().float()
            break
        except Exception as error:  # any construction failure makes the architecture out of scope
            failure = error
    else:
        raise NotGeneric(f"{type(failure).__name__}: {first_line(failure)}") from failure
    _randomize_constant_matrices(model)
    return model, model.config.vocab_size


def _depth_reaching_attention(defaults: dict, small: dict) -> dict:
    """Hybrid stacks list a type per layer (three linear-attention layers, then one full
    attention): two layers may hold no softmax attention, and then their cache has no layer
    for eager to read the length from. The shortest depth that reaches one (up to 8 layers),
    with its layer types; nothing when the small depth already does."""
    kinds = defaults.get("layer_types")
    counts = [k for k in LAYER_COUNTS if k in small]
    if not isinstance(kinds, list) or not counts:
        return {}
    attention = [i for i, k in enumerate(kinds) if isinstance(k, str) and "attention" in k and "linear" not in k]
    if not attention or attention[0] < small[counts[0]] or attention[0] >= 8:
        return {}
    depth = attention[0] + 1
    return {**{k: depth for k in counts}, "layer_types": kinds[:depth]}


def _randomize_constant_matrices(model: torch.nn.Module) -> None:
    """Some families initialise a weight matrix to one value (MoE routers to zeros): every
    score then ties, and which expert top-k picks is the implementation's choice, not a
    computation to compare. Random values make the scores distinct."""
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.ndim >= 2 and parameter.is_floating_point() and parameter.numel() > 1 and \
                    bool((parameter == parameter.flatten()[0]).all()):
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.02)


def check_against_eager(model: torch.nn.Module, vocab: int) -> None:
    """Compiles `model` with the luminal backend and compares its logits with eager's at
    every prompt length, without and with a cache (assert_close raises on a mismatch; where
    eager's own f32 rounding exceeds the tolerance, against the f64 model instead)."""
    prompts = [torch.randint(3, vocab, (1, n), generator=torch.Generator().manual_seed(n)) for n in PROMPT_LENGTHS]
    for use_cache in (False, True):
        try:
            with torch.no_grad():
                expected = [model(input_ids=ids, use_cache=use_cache).logits for ids in prompts]
        except Exception as error:  # the tiny model does not run in eager either
            raise NotGeneric(f"eager: {type(error).__name__}: {first_line(error)}") from error
        torch._dynamo.reset()
        # As a user calls it: the first length compiles static, the second recompiles with
        # symbolic sizes, which the third reuses.
        compiled = torch.compile(model, backend="luminal")
        for ids, eager in zip(prompts, expected):
            with torch.no_grad():
                ours = compiled(input_ids=ids, use_cache=use_cache).logits
            if ours.shape == eager.shape and not torch.allclose(ours, eager, atol=TOLERANCE, rtol=TOLERANCE) and \
                    _as_accurate_as_eager(model, ids, use_cache, ours, eager):
                continue
            # The first line (the table's reason) sizes the difference against the logits' scale.
            worst = (ours - eager).abs().max().item() if ours.shape == eager.shape else float("nan")
            torch.testing.assert_close(ours, eager, atol=TOLERANCE, rtol=TOLERANCE,
                                       msg=lambda m: f"use_cache={use_cache}, prompt length {ids.shape[1]}: logits "
                                                     f"differ by up to {worst:.1e} (largest |logit| "
                                                     f"{eager.abs().max().item():.1f})\n{m}")


def _as_accurate_as_eager(model, ids, use_cache: bool, ours: torch.Tensor, eager: torch.Tensor) -> bool:
    """Where f32 eager itself is further than the tolerance from the f64 model (logits in
    the tens, as CpmAnt's), rounding alone separates two f32 results: ours then passes when
    it is within eager's own error of the f64 logits, plus the tolerance."""
    try:
        with torch.no_grad():
            exact = copy.deepcopy(model).double()(input_ids=ids, use_cache=use_cache).logits
    except Exception:  # the model does not run in f64: only the f32 comparison applies
        return False
    own = (eager.double() - exact).abs().max().item()
    return own > TOLERANCE and (ours.double() - exact).abs().max().item() <= own + TOLERANCE


def luminal_error_in(error: BaseException) -> luminal.Error | None:
    """The luminal.Error that caused `error` (dynamo wraps a backend's exceptions), if any."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, luminal.Error):
            return error
        seen.add(id(error))
        error = getattr(error, "inner_exception", None) or error.__cause__ or error.__context__
    return None


def innermost(error: BaseException) -> BaseException:
    """The exception at the bottom of `error`'s chain of causes (what dynamo wrapped)."""
    seen = set()
    while id(error) not in seen:
        seen.add(id(error))
        inner = getattr(error, "inner_exception", None) or error.__cause__
        if inner is None:
            return error
        error = inner
    return error


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
