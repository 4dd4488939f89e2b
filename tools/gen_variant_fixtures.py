#!/usr/bin/env python3
"""Tiny random-weight checkpoints shaped like the ones users download, with transformers' outputs.

tools/gen_model_fixtures.py covers the five families in their plain layout; this script
covers what real checkpoints add on top (issue 16). Each case writes tests/data/variants/<name>/
with config.json and model.safetensors as a Hugging Face directory holds them, and
reference.safetensors with the same tensors as gen_model_fixtures.py writes (prompt_ids,
prefill_logits, generated_ids, decode_logits: every prompt position, then the last prompt
position and 8 greedy decode steps through the KV cache; eager attention in f32; seeds tried
in order until every greedy step wins by MIN_MARGIN). Cases:

  qwen3_padded_vocab  a Qwen3 whose vocab_size (320) exceeds its tokenizer's 300 tokens, as
      real Qwen3 and Gemma 3 checkpoints do. tokenizer.json is a byte-level BPE trained here
      on the ASCII lines of gen_tokenizer_fixtures.py's corpus (so every id decodes to text). The seed is chosen so that unconstrained greedy
      decoding picks padded ids (at least two); reference.safetensors adds
          pickable_generated_ids [N] i64, pickable_decode_logits [N, V] f32
      the greedy run with the padded ids suppressed (generate(suppress_tokens=...)); its logits
      are the raw ones, before suppression. reference.json holds the texts the `tokenizers`
      package decodes from both id lists (it skips ids it has no token for):
          {"tokenizer_size", "raw_text", "pickable_text"}
  gemma3_multimodal  a Gemma3ForConditionalGeneration (tiny SigLIP vision tower and projector)
      stored as google/gemma-3-4b-it is: language_model.model.*, vision_tower.*,
      multi_modal_projector.*; the reference is its text-only forward. All cases but the
      first carry a 256-token tokenizer.json trained as above, so each directory opens as a
      model (examples/generate --model DIR).
  gemma4_multimodal  a Gemma4ForConditionalGeneration (tiny vision tower) stored as Gemma 4
      checkpoints are: model.language_model.*, model.vision_tower.*, model.embed_vision.*.

  qwen3_rope_yarn, llama_rope_dynamic, llama_rope_longrope  the RoPE types whose frequencies
      transformers' rope_init_fns scale (see each function below). dynamic and longrope change
      their frequencies with the sequence length at every forward; the fixtures cross the
      lengths where they do.

  gemma4_small  a Gemma 4 text model with what the small published ones (E2B, E4B) add:
      per-layer input embeddings (hidden_size_per_layer_input 8) and KV sharing (the last 2
      of 4 layers reuse the keys and values of layers 0 and 1; double-wide MLPs there).

    pip install torch transformers safetensors tokenizers
    python3 tools/gen_variant_fixtures.py
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ["RAYON_NUM_THREADS"] = "1"  # before importing tokenizers: deterministic training
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402
from safetensors.torch import load_file  # noqa: E402
from transformers import (AutoModelForCausalLM, AutoModelForImageTextToText, Gemma3Config,  # noqa: E402
                          Gemma3TextConfig, Gemma4Config, Gemma4TextConfig, Gemma4VisionConfig, LlamaConfig,
                          Qwen3Config, SiglipVisionConfig)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_model_fixtures import margin, randomize  # noqa: E402
from gen_tokenizer_fixtures import corpus  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "variants"
DECODE_STEPS = 8
MIN_MARGIN = 1e-2
SMALL = dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
             intermediate_size=64, num_hidden_layers=2, max_position_embeddings=256,
             bos_token_id=1, eos_token_id=2, pad_token_id=0)


def greedy(model, prompt: list[int], **generate_args):
    """Prefill logits of every prompt position and the greedy run (ids, raw logits per step)."""
    ids = torch.tensor([prompt])
    with torch.no_grad():
        prefill = model(ids).logits[0]
        out = model.generate(ids, max_new_tokens=DECODE_STEPS + 1, do_sample=False, output_logits=True,
                             return_dict_in_generate=True, eos_token_id=None, pad_token_id=0, **generate_args)
    decode = torch.cat(out.logits, dim=0).float()
    generated = out.sequences[0, len(prompt):]
    assert torch.allclose(decode[0], prefill[-1], atol=1e-5)
    return prefill, generated, decode


def reference_tensors(prompt: list[int], prefill, generated, decode) -> dict[str, torch.Tensor]:
    return {"prompt_ids": torch.tensor(prompt, dtype=torch.int64), "prefill_logits": prefill.contiguous(),
            "generated_ids": generated.to(torch.int64).contiguous(), "decode_logits": decode.contiguous()}


def save_model(model, folder: Path) -> None:
    model.save_pretrained(folder, safe_serialization=True)
    for extra in folder.iterdir():  # only what a model directory needs
        if extra.name not in ("config.json", "model.safetensors"):
            extra.unlink()


def new_model(config, seed: int, auto=AutoModelForCausalLM):
    torch.manual_seed(seed)
    model = auto.from_config(config, attn_implementation="eager", dtype=torch.float32).eval()
    randomize(model, seed)
    model.generation_config.eos_token_id = None
    return model


# ---------------------------------------------------------------------------------------------
# Padded vocabulary

TOKENIZER_SIZE, PADDED_VOCAB = 300, 320


def train_tokenizer(size: int) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    # ASCII text only, and no byte alphabet: every token is whole characters, so any
    # id sequence decodes to valid UTF-8 and streamed text must equal decode()'s.
    trainer = trainers.BpeTrainer(vocab_size=size, show_progress=False,
                                  special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    tok.train_from_iterator([line for line in corpus() if line.isascii()], trainer=trainer)
    assert tok.get_vocab_size() == size, tok.get_vocab_size()
    return tok


def padded_vocab() -> None:
    folder = OUT / "qwen3_padded_vocab"
    folder.mkdir(parents=True)
    tok = train_tokenizer(TOKENIZER_SIZE)
    prompt = tok.encode("the time of 42 and the").ids
    config = Qwen3Config(**SMALL, vocab_size=PADDED_VOCAB, tie_word_embeddings=False,
                         rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    padded = list(range(TOKENIZER_SIZE, PADDED_VOCAB))
    for seed in range(100, 400):
        model = new_model(config, seed)
        prefill, generated, decode = greedy(model, prompt)
        _, pickable, pickable_decode = greedy(model, prompt, suppress_tokens=padded)
        hits = int((generated >= TOKENIZER_SIZE).sum())
        if hits >= 2 and margin(decode) >= MIN_MARGIN and margin(pickable_decode[:, :TOKENIZER_SIZE]) >= MIN_MARGIN:
            break
    else:
        raise RuntimeError("padded_vocab: no seed picks padded ids with a clear margin")
    assert int((pickable >= TOKENIZER_SIZE).sum()) == 0
    save_model(model, folder)
    (folder / "tokenizer.json").write_text(tok.to_str(), encoding="utf-8")
    tensors = reference_tensors(prompt, prefill, generated, decode)
    tensors["pickable_generated_ids"] = pickable.to(torch.int64).contiguous()
    tensors["pickable_decode_logits"] = pickable_decode.contiguous()
    save_file(tensors, folder / "reference.safetensors")
    texts = {"tokenizer_size": TOKENIZER_SIZE, "raw_text": tok.decode(generated.tolist()),
             "pickable_text": tok.decode(pickable.tolist())}
    (folder / "reference.json").write_text(json.dumps(texts, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"qwen3_padded_vocab: seed {seed}, raw {generated.tolist()}, pickable {pickable.tolist()}")


# ---------------------------------------------------------------------------------------------
# Multimodal Gemma: the text model inside *ForConditionalGeneration

MULTIMODAL_VOCAB = 256
PROMPT = [5, 17, 200, 3, 99, 42, 42, 211, 8, 150, 160, 77]
GEMMA_TEXT = dict(vocab_size=MULTIMODAL_VOCAB, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                  head_dim=8, intermediate_size=64, num_hidden_layers=2, max_position_embeddings=256,
                  sliding_window=4, layer_types=["sliding_attention", "full_attention"],
                  bos_token_id=1, eos_token_id=2, pad_token_id=0)


def multimodal(name: str, config, layout) -> None:
    """Writes the model with every tensor renamed by `layout` (transformers' name -> stored name)."""
    folder = OUT / name
    for seed in range(200, 300):
        model = new_model(config, seed, AutoModelForImageTextToText)
        prefill, generated, decode = greedy(model, PROMPT)
        if margin(decode) >= MIN_MARGIN and len(set(generated.tolist())) >= 4:
            break
    else:
        raise RuntimeError(f"{name}: no seed gives a greedy margin of {MIN_MARGIN}")
    save_model(model, folder)
    (folder / "tokenizer.json").write_text(train_tokenizer(MULTIMODAL_VOCAB).to_str(), encoding="utf-8")
    tensors = load_file(folder / "model.safetensors")
    renamed = {layout(key): value.contiguous() for key, value in tensors.items()}
    assert any("vision" in key for key in renamed), sorted(renamed)
    save_file(renamed, folder / "model.safetensors", metadata={"format": "pt"})
    save_file(reference_tensors(PROMPT, prefill, generated, decode), folder / "reference.safetensors")
    print(f"{name}: seed {seed}, {len(renamed)} tensors ({sum(1 for k in renamed if 'vision' in k)} vision), "
          f"generated {generated.tolist()}")


def strip_prefix(key: str, prefix: str) -> str:
    return key[len(prefix):] if key.startswith(prefix) else key


def gemma3_published_layout(key: str) -> str:
    """transformers' names -> gemma-3-4b-it's (language_model.model.*, vision_tower.*, ...)."""
    if key.startswith("model.language_model."):
        return "language_model.model." + strip_prefix(key, "model.language_model.")
    if key.startswith("lm_head."):
        return "language_model." + key
    return strip_prefix(key, "model.")


def gemma4_published_layout(key: str) -> str:
    """Gemma 4's checkpoints keep transformers' names: model.language_model.*, model.vision_tower.*."""
    assert key.startswith("model.") or key.startswith("lm_head."), key
    return key


def gemma3_multimodal() -> None:
    text = Gemma3TextConfig(**GEMMA_TEXT, query_pre_attn_scalar=8, final_logit_softcapping=30.0,
                            rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                                             "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}})
    vision = SiglipVisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                                image_size=28, patch_size=14)
    config = Gemma3Config(text_config=text, vision_config=vision, mm_tokens_per_image=4,
                          image_token_index=MULTIMODAL_VOCAB - 1, boi_token_index=MULTIMODAL_VOCAB - 2,
                          eoi_token_index=MULTIMODAL_VOCAB - 3)
    multimodal("gemma3_multimodal", config, gemma3_published_layout)


def gemma4_multimodal() -> None:
    text = Gemma4TextConfig(**GEMMA_TEXT, global_head_dim=16, hidden_size_per_layer_input=0,
                            vocab_size_per_layer_input=MULTIMODAL_VOCAB, final_logit_softcapping=30.0)
    vision = Gemma4VisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                                num_key_value_heads=2, head_dim=8, patch_size=4, position_embedding_size=64,
                                pooling_kernel_size=1)
    config = Gemma4Config(text_config=text, vision_config=vision, audio_config=None,
                          image_token_id=MULTIMODAL_VOCAB - 1, boi_token_id=MULTIMODAL_VOCAB - 2,
                          eoi_token_id=MULTIMODAL_VOCAB - 3, video_token_id=MULTIMODAL_VOCAB - 4)
    multimodal("gemma4_multimodal", config, gemma4_published_layout)


# ---------------------------------------------------------------------------------------------
# RoPE types whose frequencies transformers scales (rope_init_fns)

ROPE_MODEL = dict(vocab_size=MULTIMODAL_VOCAB, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                  intermediate_size=64, num_hidden_layers=2, bos_token_id=1, eos_token_id=2, pad_token_id=0)


def text_model(name: str, config, plainer_rope: dict) -> None:
    """`plainer_rope`: rope_parameters without the feature under test; its logits must differ
    clearly from the fixture's in the prefill and in the last decode steps, or the fixture
    could not tell the feature from its absence."""
    folder = OUT / name
    for seed in range(300, 400):
        model = new_model(config, seed)
        prefill, generated, decode = greedy(model, PROMPT)
        if margin(decode) >= MIN_MARGIN and len(set(generated.tolist())) >= 4:
            break
    else:
        raise RuntimeError(f"{name}: no seed gives a greedy margin of {MIN_MARGIN}")
    plain_config = type(config).from_dict({**config.to_dict(), "rope_parameters": plainer_rope})
    plain = new_model(plain_config, seed)
    plain.load_state_dict(model.state_dict())
    with torch.no_grad():
        forced = torch.cat([torch.tensor(PROMPT), generated[:-1]]).unsqueeze(0)
        plain_logits = plain(forced).logits[0, len(PROMPT) - 1:]
    gaps = (plain_logits - decode).abs().amax(-1)
    assert float(gaps[-1]) > 1e-2, (name, gaps)
    print(f"{name}: max logit gap to {plainer_rope['rope_type']} rope per step {[round(float(g), 3) for g in gaps]}")
    save_model(model, folder)
    (folder / "tokenizer.json").write_text(train_tokenizer(MULTIMODAL_VOCAB).to_str(), encoding="utf-8")
    save_file(reference_tensors(PROMPT, prefill, generated, decode), folder / "reference.safetensors")
    print(f"{name}: seed {seed}, generated {generated.tolist()}")


def rope_yarn() -> None:
    # Qwen3's documented long-context setting, shrunk: theta 100 and a 256-token pretraining
    # context put the ramp over pairs 0..7 of the 8, so every YaRN band is exercised.
    text_model("qwen3_rope_yarn", Qwen3Config(
        **ROPE_MODEL, head_dim=16, max_position_embeddings=1024,
        rope_parameters={"rope_type": "yarn", "rope_theta": 100.0, "factor": 4.0,
                         "original_max_position_embeddings": 256}),
        {"rope_type": "default", "rope_theta": 100.0})


def rope_dynamic() -> None:
    # max_position_embeddings 8 < the 12-token prompt: the base grows at the prefill and again
    # at every decode step.
    text_model("llama_rope_dynamic", LlamaConfig(
        **ROPE_MODEL, head_dim=8, max_position_embeddings=8,
        rope_parameters={"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0}),
        {"rope_type": "default", "rope_theta": 10000.0})


def rope_longrope() -> None:
    # A 16-token pretraining context: the prefill (12 tokens) and the first decode steps use
    # the short factors, the steps from 17 tokens on the long ones. No factor: 64 / 16.
    text_model("llama_rope_longrope", LlamaConfig(
        **ROPE_MODEL, head_dim=8, max_position_embeddings=64,
        rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0, "original_max_position_embeddings": 16,
                         "short_factor": [1.0, 1.3, 2.1, 3.5], "long_factor": [1.5, 4.0, 9.0, 20.0]}),
        {"rope_type": "longrope", "rope_theta": 10000.0, "original_max_position_embeddings": 16,
         "short_factor": [1.0, 1.3, 2.1, 3.5], "long_factor": [1.0, 1.3, 2.1, 3.5]})


# ---------------------------------------------------------------------------------------------
# Gemma 4's small-model features

def gemma4_small() -> None:
    # As gemma-4-E2B is built, shrunk: per-layer input embeddings, and the last two of four
    # layers without K/V projections, attending to layer 0's (sliding) and layer 1's (full)
    # keys and values, with double-wide MLPs.
    config = Gemma4TextConfig(
        **{**GEMMA_TEXT, "num_hidden_layers": 4,
           "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"]},
        global_head_dim=16, hidden_size_per_layer_input=8, vocab_size_per_layer_input=MULTIMODAL_VOCAB,
        num_kv_shared_layers=2, use_double_wide_mlp=True, final_logit_softcapping=30.0)
    folder = OUT / "gemma4_small"
    for seed in range(400, 500):
        model = new_model(config, seed)
        prefill, generated, decode = greedy(model, PROMPT)
        if margin(decode) >= MIN_MARGIN and len(set(generated.tolist())) >= 4:
            break
    else:
        raise RuntimeError(f"gemma4_small: no seed gives a greedy margin of {MIN_MARGIN}")
    save_model(model, folder)
    (folder / "tokenizer.json").write_text(train_tokenizer(MULTIMODAL_VOCAB).to_str(), encoding="utf-8")
    names = set(load_file(folder / "model.safetensors"))
    assert "model.layers.2.self_attn.k_proj.weight" not in names and "model.embed_tokens_per_layer.weight" in names
    save_file(reference_tensors(PROMPT, prefill, generated, decode), folder / "reference.safetensors")
    print(f"gemma4_small: seed {seed}, generated {generated.tolist()}")


CASES = {"qwen3_padded_vocab": padded_vocab, "gemma3_multimodal": gemma3_multimodal,
         "gemma4_multimodal": gemma4_multimodal, "qwen3_rope_yarn": rope_yarn, "llama_rope_dynamic": rope_dynamic,
         "llama_rope_longrope": rope_longrope, "gemma4_small": gemma4_small}


def main() -> None:
    chosen = sys.argv[1:] or list(CASES)
    for name in chosen:
        folder = OUT / name
        if folder.exists():
            for path in folder.iterdir():
                path.unlink()
            folder.rmdir()
        CASES[name]()


if __name__ == "__main__":
    main()
