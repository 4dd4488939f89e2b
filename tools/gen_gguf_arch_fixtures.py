#!/usr/bin/env python3
"""Tiny GGUF files of the architectures and features beyond plain Llama, with transformers' outputs.

Each case writes tests/data/gguf_arch/<name>/ (committed: CI never runs Python):
  model.gguf             a random-weight transformers model written as llama.cpp's
                         convert_hf_to_gguf.py writes that architecture (its metadata keys,
                         tensor names and layout), matrices F16, vectors F32, and a byte-level
                         BPE ("gpt2") tokenizer trained here on the ASCII lines of
                         gen_tokenizer_fixtures.py's corpus, or for gemma3 and llama2 a
                         SentencePiece BPE ("llama") trained here with the sentencepiece package
                         and written as the converter's _create_vocab_sentencepiece writes it
                         (pieces, scores, token types)
  reference.safetensors  what transformers computes in f32 (eager attention) with every
                         weight rounded to f16 as stored: prompt_ids, prefill_logits,
                         generated_ids, decode_logits, as gen_model_fixtures.py writes them;
                         and llama_cpp_generated_ids, llama.cpp's greedy ids for the same prompt
                         (llama-cpp-python, its CPU backend, f16 weights as stored), where
                         llama.cpp loads the file; a case it cannot load is printed with
                         llama.cpp's reason and written without that tensor. That is qwen3moe:
                         llama.cpp's qwen3moe wants a router in every layer ("tensor
                         'blk.1.ffn_gate_inp.weight' not found"), so files with dense layers
                         (mlp_only_layers, decoder_sparse_step > 1) do not load there
  tokenizer_cases.json   (SentencePiece cases) {"model", "cases": [{"text", "ids", "decoded"}]}:
                         "ids" are llama.cpp's tokenize(text, add_bos=True, special=True),
                         "decoded" its llama_detokenize(ids without the BOS, remove_special
                         false, unparse_special true). The script also encodes every text
                         with transformers' GGUF tokenizer loader and with the sentencepiece
                         model itself, and prints where they differ from llama.cpp
                         (KNOWN_TOKENIZER_DIVERGENCES says why).
Where transformers' own GGUF loader reads a file (qwen2), it must give the same logits: a check
that the file is laid out as llama.cpp's converter lays it out.
Cases:
  qwen2     architecture "qwen2": q/k/v projections with biases, o_proj without, tied head,
            no Q/K row permutation, head size hidden / heads (no key_length), pre "qwen2".
  qwen3     architecture "qwen3": Q/K norms (attn_q_norm, attn_k_norm), a head size (16) other
            than hidden / heads (8) given by qwen3.attention.key_length, untied head, no Q/K row
            permutation (llama.cpp rotates Qwen's halves as transformers does), pre "qwen2".
  qwen3moe  architecture "qwen3moe": as qwen3, with 4 experts (top 2, renormalised) in layers 0
            and 2 stored stacked (ffn_{gate,up,down}_exps [experts, out, in], router ffn_gate_inp),
            layer 1 dense, expert_count / expert_used_count / expert_feed_forward_length keys.
  llama31   architecture "llama" with Llama 3.1's RoPE scaling (llama3 type: factor 8,
            low/high_freq_factor 1/4, a 64-token original context, so all three bands occur):
            the converter stores it as the per-pair divisors of tensor rope_freqs.weight,
            not as metadata; Q/K rows permuted; tied head.
  gemma3    architecture "gemma3" from a Gemma3ForCausalLM: 6 layers, so the sliding-window
            pattern llama.cpp assumes for gemma3 (every sixth layer global; the converter writes
            no pattern) is the one transformers' default layer_types give; a 4-token window,
            shorter than the prompt; global RoPE base 1e6 (rope.freq_base), local 5e4
            (rope.freq_base_swa); head size 8 = query_pre_attn_scalar (llama.cpp scales scores
            by 1/sqrt(head size), except for the 62-layer 27B); every RMSNorm weight stored as
            1 + w (the converter's norm_shift); final_logit_softcapping 30; tied head; Gemma's
            SentencePiece layout (pad 0, eos 1, bos 2, unk 3, no space prefix,
            <start_of_turn>/<end_of_turn> control tokens, a user-defined "\n\n").
  llama2    architecture "llama" with a Llama 2 style SentencePiece tokenizer (unk 0, bos 1,
            eos 2, space prefix, byte fallback), Q/K rows permuted, untied head.

    pip install numpy torch transformers accelerate safetensors tokenizers gguf sentencepiece llama-cpp-python
    python3 tools/gen_gguf_arch_fixtures.py
"""
from __future__ import annotations

import io
import json
import math
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from gguf import GGUFWriter, LlamaFileType, TokenType
from sentencepiece import SentencePieceProcessor, SentencePieceTrainer
from safetensors.torch import save_file
from safetensors.torch import load_file
from transformers import (AutoModelForCausalLM, AutoTokenizer, Gemma3TextConfig, LlamaConfig, Qwen2Config,
                          Qwen3Config, Qwen3MoeConfig)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_model_fixtures import margin  # noqa: E402
from gen_tokenizer_fixtures import BASE_CASES, corpus  # noqa: E402
from gen_variant_fixtures import DECODE_STEPS, PROMPT, greedy, reference_tensors, train_tokenizer  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "gguf_arch"
VOCAB = 256
MIN_MARGIN = 1e-2
SIZES = dict(vocab_size=VOCAB, hidden_size=32, num_attention_heads=4, num_key_value_heads=2, intermediate_size=64,
             num_hidden_layers=2, max_position_embeddings=256, bos_token_id=1, eos_token_id=2, pad_token_id=0)
LAYER_NAMES = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
               "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
               "self_attn.k_norm": "attn_k_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
               "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
               "mlp.gate": "ffn_gate_inp"}
# Gemma 3's four norms per layer (post_attention_layernorm is ffn_norm elsewhere).
GEMMA3_NAMES = {"input_layernorm": "attn_norm", "post_attention_layernorm": "post_attention_norm",
                "pre_feedforward_layernorm": "ffn_norm", "post_feedforward_layernorm": "post_ffw_norm"}
EXPERT_NAMES = {"gate_proj": "ffn_gate_exps", "up_proj": "ffn_up_exps", "down_proj": "ffn_down_exps"}


def gguf_name(hf: str, arch: str) -> str:
    if hf == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf == "model.norm.weight":
        return "output_norm.weight"
    if hf == "lm_head.weight":
        return "output.weight"
    parts = hf.split(".")  # model.layers.N.<module...>.weight
    module = ".".join(parts[3:-1])
    names = {**LAYER_NAMES, **GEMMA3_NAMES} if arch == "gemma3" else LAYER_NAMES
    return f"blk.{parts[2]}.{names[module]}.{parts[-1]}"


def permute(weights: np.ndarray, n_head: int) -> np.ndarray:
    """convert_hf_to_gguf.py's LlamaModel.permute: each head's rotary halves interleaved."""
    return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))


def randomized_f16_model(config, seed: int):
    """Random weights as gen_model_fixtures.py draws them, matrices rounded to f16 (as stored)."""
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager", dtype=torch.float32).eval()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, tensor in model.named_parameters():
            if tensor.dim() == 1:
                tensor.copy_(1.0 + 0.3 * torch.randn(tensor.shape, generator=generator))
            else:
                tensor.copy_((torch.randn(tensor.shape, generator=generator) / tensor.shape[-1] ** 0.5)
                             .to(torch.float16).float())
    model.generation_config.eos_token_id = None
    return model


def llama3_rope_factors(rope: dict, head_dim: int) -> np.ndarray:
    """LlamaModel.generate_extra_tensors of convert_hf_to_gguf.py: the divisor of each pair's frequency."""
    base, factor = rope["rope_theta"], rope["factor"]
    low, high, old_context = rope["low_freq_factor"], rope["high_freq_factor"], rope["original_max_position_embeddings"]
    freqs = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    low_wavelen, high_wavelen = old_context / low, old_context / high
    factors = []
    for freq in freqs.tolist():
        wavelen = 2 * math.pi / freq
        if wavelen < high_wavelen:
            factors.append(1)
        elif wavelen > low_wavelen:
            factors.append(factor)
        else:
            smooth = (old_context / wavelen - low) / (high - low)
            factors.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(factors, dtype=np.float32)


def gpt2_vocab(tokenizer, pre: str):
    """The tokenizer metadata of a byte-level BPE, as the converter's _set_vocab_gpt2 writes it."""
    by_id = {index: token for token, index in tokenizer.get_vocab(with_added_tokens=True).items()}
    specials = {t.content for t in tokenizer.get_added_tokens_decoder().values() if t.special}
    merges = [m if isinstance(m, str) else " ".join(m) for m in json.loads(tokenizer.to_str())["model"]["merges"]]

    def write(writer: GGUFWriter) -> None:
        writer.add_tokenizer_model("gpt2")
        writer.add_tokenizer_pre(pre)
        writer.add_token_list([by_id[i] for i in range(VOCAB)])
        writer.add_token_types([TokenType.CONTROL if by_id[i] in specials else TokenType.NORMAL
                                for i in range(VOCAB)])
        writer.add_token_merges(merges)
        writer.add_bos_token_id(1)
        writer.add_eos_token_id(2)
        writer.add_add_bos_token(False)
    return write


def write_gguf(path: Path, arch: str, model, config, write_vocab, permute_qk: bool,
               extra: dict[str, np.ndarray]) -> None:
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    gemma3 = arch == "gemma3"
    writer = GGUFWriter(str(path), arch)
    writer.add_type("model")
    writer.add_name(f"Luminal Test {arch}")
    writer.add_block_count(config.num_hidden_layers)
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    rope = config.rope_parameters
    writer.add_rope_freq_base(rope.get("full_attention", rope)["rope_theta"])
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    # As the converter: only when it differs from hidden / heads, but always for gemma3.
    if gemma3 or head_dim * config.num_attention_heads != config.hidden_size:
        writer.add_key_length(head_dim)
        writer.add_value_length(head_dim)
    if gemma3:
        writer.add_rope_freq_base_swa(rope["sliding_attention"]["rope_theta"])
        writer.add_sliding_window(config.sliding_window)
        if config.final_logit_softcapping:
            writer.add_final_logit_softcapping(config.final_logit_softcapping)
    else:
        writer.add_rope_dimension_count(head_dim)
    if getattr(config, "num_experts", None):
        writer.add_expert_count(config.num_experts)
        writer.add_expert_used_count(config.num_experts_per_tok)
        writer.add_expert_feed_forward_length(config.moe_intermediate_size)
    writer.add_file_type(LlamaFileType.MOSTLY_F16)
    writer.add_vocab_size(config.vocab_size)
    write_vocab(writer)
    writer.add_quantization_version(2)
    for name, array in extra.items():
        writer.add_tensor(name, array)
    for hf, tensor in checkpoint_tensors(model, config).items():
        if hf == "lm_head.weight" and config.tie_word_embeddings:
            continue
        array = tensor.numpy()
        if permute_qk and hf.endswith("q_proj.weight"):
            array = permute(array, config.num_attention_heads)
        elif permute_qk and hf.endswith("k_proj.weight"):
            array = permute(array, config.num_key_value_heads)
        if gemma3 and hf.endswith("norm.weight"):
            array = array + 1.0  # Gemma3Model.norm_shift: llama.cpp scales by the stored weight
        array = np.ascontiguousarray(array.astype(np.float16 if array.ndim >= 2 else np.float32))
        writer.add_tensor(hf if hf.startswith("blk.") else gguf_name(hf, arch), array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def checkpoint_tensors(model, config) -> dict[str, torch.Tensor]:
    """The tensors as a checkpoint names them (save_pretrained: per-expert MoE weights), with
    each MoE layer's experts stacked into llama.cpp's blk.N.ffn_{gate,up,down}_exps [E, out, in]."""
    with tempfile.TemporaryDirectory() as folder:
        model.save_pretrained(folder, safe_serialization=True)
        tensors = load_file(Path(folder) / "model.safetensors")
    experts = getattr(config, "num_experts", 0) or 0
    for layer in range(config.num_hidden_layers):
        prefix = f"model.layers.{layer}.mlp.experts."
        for projection, gguf in EXPERT_NAMES.items():
            parts = [tensors.pop(f"{prefix}{e}.{projection}.weight", None) for e in range(experts)]
            if parts and parts[0] is not None:
                tensors[f"blk.{layer}.{gguf}.weight"] = torch.stack(parts)
    return tensors


def case(name: str, arch: str, config, write_vocab, permute_qk: bool, extra_of, prompt=PROMPT) -> Path:
    folder = OUT / name
    folder.mkdir(parents=True)
    for seed in range(500, 600):
        model = randomized_f16_model(config, seed)
        prefill, generated, decode = greedy(model, prompt)
        if margin(decode) >= MIN_MARGIN and len(set(generated.tolist())) >= 4:
            break
    else:
        raise RuntimeError(f"{name}: no seed gives a greedy margin of {MIN_MARGIN}")
    write_gguf(folder / "model.gguf", arch, model, config, write_vocab, permute_qk, extra_of(config))
    tensors = reference_tensors(prompt, prefill, generated, decode)
    llama_cpp_ids = llama_cpp_greedy(folder / "model.gguf", prompt)
    if llama_cpp_ids is not None:
        tensors["llama_cpp_generated_ids"] = torch.tensor(llama_cpp_ids, dtype=torch.int64)
        agrees = "agrees" if llama_cpp_ids == generated.tolist() else "DIFFERS"
        print(f"{name}: llama.cpp's greedy ids {llama_cpp_ids} ({agrees} with transformers)")
    save_file(tensors, folder / "reference.safetensors")
    print(f"{name}: seed {seed}, generated {generated.tolist()}")
    if name in TRANSFORMERS_READS:
        check_with_transformers_gguf(folder, prefill)
    return folder


def llama_cpp_greedy(path: Path, prompt: list[int]) -> list[int] | None:
    """llama.cpp's greedy ids (DECODE_STEPS + 1 of them) after the prompt, or None (and why) where
    llama-cpp-python is missing or cannot load the file."""
    try:
        from llama_cpp import Llama
    except ImportError as error:
        print(f"{path.parent.name}: llama.cpp not run ({error})")
        return None

    def run() -> list[int]:
        llm = Llama(model_path=str(path), n_ctx=64, n_threads=1, n_threads_batch=1, logits_all=True, verbose=True)
        llm.eval(prompt)
        ids = [int(np.argmax(llm.scores[len(prompt) - 1]))]
        while len(ids) < DECODE_STEPS + 1:
            llm.eval([ids[-1]])
            ids.append(int(np.argmax(llm.scores[llm.n_tokens - 1])))
        del llm
        return ids

    ids, log = with_c_stderr(run)
    if ids is None:
        reasons = [line.strip() for line in log.splitlines() if "error" in line]
        print(f"{path.parent.name}: llama.cpp cannot load the file: {'; '.join(reasons)}")
    return ids


def with_c_stderr(load):
    """(load() or None if it raised ValueError, what C code wrote to stderr meanwhile): llama.cpp
    says why it rejects a file only in its log."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+") as log:
        os.dup2(log.fileno(), 2)
        try:
            result = load()
        except ValueError:
            result = None
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        log.seek(0)
        return result, log.read()


# transformers' own GGUF loader reads these files as written; it reads no qwen3 key_length
# (so not the qwen3 case) and no rope_freqs tensor (so not llama31).
TRANSFORMERS_READS = {"qwen2"}


def check_with_transformers_gguf(folder: Path, prefill: torch.Tensor) -> None:
    model = AutoModelForCausalLM.from_pretrained(str(folder), gguf_file="model.gguf", dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    with torch.no_grad():
        got = model(torch.tensor([PROMPT])).logits[0]
    diff = float((got - prefill).abs().max())
    assert diff <= 1e-5, diff
    print(f"{folder.name}: transformers' GGUF loader agrees (max diff {diff})")


def qwen3() -> None:
    config = Qwen3Config(**SIZES, head_dim=16, tie_word_embeddings=False,
                         rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})
    case("qwen3", "qwen3", config, gpt2_vocab(train_tokenizer(VOCAB), "qwen2"), False, lambda c: {})


def qwen2() -> None:
    config = Qwen2Config(**SIZES, tie_word_embeddings=True,
                         rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})
    case("qwen2", "qwen2", config, gpt2_vocab(train_tokenizer(VOCAB), "qwen2"), False, lambda c: {})


def qwen3moe() -> None:
    # Layer 1 dense (mlp_only_layers), layers 0 and 2 sparse: which layers route follows from
    # which hold ffn_gate_inp. Qwen3-MoE checkpoints renormalise the top-k weights, which
    # llama.cpp does for this architecture without a metadata key.
    config = Qwen3MoeConfig(**{**SIZES, "num_hidden_layers": 3}, head_dim=16, num_experts=4, num_experts_per_tok=2,
                            moe_intermediate_size=16, norm_topk_prob=True, mlp_only_layers=[1],
                            tie_word_embeddings=False,
                            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})
    case("qwen3moe", "qwen3moe", config, gpt2_vocab(train_tokenizer(VOCAB), "qwen2"), False, lambda c: {})


def llama31() -> None:
    rope = {"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
    config = LlamaConfig(**SIZES, head_dim=8, tie_word_embeddings=True, rope_parameters=rope)
    factors = llama3_rope_factors(rope, 8)
    assert len(set(factors.tolist())) >= 3, factors  # every band: 1, factor, and between
    case("llama31", "llama", config, gpt2_vocab(train_tokenizer(VOCAB), "llama-bpe"), True,
         lambda c: {"rope_freqs.weight": factors})


SPM_VOCAB = 512


def train_sentencepiece(add_dummy_prefix: bool, specials: dict[str, tuple[int, str]], user_defined: list[str]):
    """A SentencePiece BPE shaped like Llama 2's / Gemma's: identity normalization (llama.cpp
    normalizes nothing), byte fallback for the rarest characters (character_coverage < 1),
    digits split, whitespace-only pieces allowed. Single-threaded: deterministic."""
    model = io.BytesIO()
    SentencePieceTrainer.train(
        sentence_iterator=iter(corpus()), model_writer=model, model_type="bpe", vocab_size=SPM_VOCAB,
        byte_fallback=True, character_coverage=0.9995, normalization_rule_name="identity",
        add_dummy_prefix=add_dummy_prefix, remove_extra_whitespaces=False, split_digits=True,
        allow_whitespace_only_pieces=True, user_defined_symbols=user_defined, num_threads=1,
        minloglevel=2, **{f"{kind}_id": specials.get(kind, (-1, ""))[0] for kind in ("pad", "unk", "bos", "eos")},
        **{f"{kind}_piece": piece for kind, (_, piece) in specials.items()})
    return SentencePieceProcessor(model_proto=model.getvalue())


def spm_vocab(sp, add_space_prefix: bool, control: set[str], user_defined: set[str]):
    """The tokenizer metadata of a SentencePiece model as the converter writes it
    (_create_vocab_sentencepiece): pieces, scores and SentencePiece's types; the pieces a
    tokenizer_config.json lists as added tokens become CONTROL (special) or USER_DEFINED."""
    tokens, scores, types = [], [], []
    for i in range(sp.vocab_size()):
        piece = sp.id_to_piece(i)
        kind = (TokenType.UNKNOWN if sp.is_unknown(i) else TokenType.CONTROL if sp.is_control(i)
                else TokenType.UNUSED if sp.is_unused(i) else TokenType.BYTE if sp.is_byte(i) else TokenType.NORMAL)
        if piece in control:
            kind = TokenType.CONTROL
        elif piece in user_defined:
            kind = TokenType.USER_DEFINED
        tokens.append(piece)
        scores.append(sp.get_score(i))
        types.append(kind)

    def write(writer: GGUFWriter) -> None:
        writer.add_tokenizer_model("llama")
        writer.add_tokenizer_pre("default")
        writer.add_token_list(tokens)
        writer.add_token_scores(scores)
        writer.add_token_types(types)
        writer.add_bos_token_id(sp.bos_id())
        writer.add_eos_token_id(sp.eos_id())
        writer.add_unk_token_id(sp.unk_id())
        if sp.pad_id() >= 0:
            writer.add_pad_token_id(sp.pad_id())
        writer.add_add_bos_token(True)
        writer.add_add_eos_token(False)
        if not add_space_prefix:
            writer.add_add_space_prefix(False)
    return write


# Why the other two encoders part from llama.cpp's SPM tokenizer where they do (printed by
# tokenizer_cases; the fixture holds llama.cpp's ids).
KNOWN_TOKENIZER_DIVERGENCES = {
    "sentencepiece": "it matches no control tokens (<s>, <unk>, <start_of_turn>) in the text; "
                     "llama.cpp tokenizes with special=True",
    "transformers": "its GGUF loader builds Llama's tokenizer with a Metaspace that prefixes only the "
                    "first piece and does not double a leading space (llama.cpp prefixes the text and "
                    "each stretch after a special token, as SentencePiece's legacy behaviour does)",
}


def spm_case_texts(specials: list[str]) -> list[str]:
    extra = [f"{specials[0]}user\nhi{specials[1]}", f"text {specials[0]} more", f"  {specials[0]}  x",
             f"a{specials[1]}b", "\n\nparagraph\n\n\nthree", " leading space", "  two leading",
             "<0x41> literal byte name", "<unk>", "<s>", "</s>", "<bos>", "<eos>", "▁already▁metaspace"]
    return list(dict.fromkeys(BASE_CASES + extra))


def llama_cpp_detokenize(llm, ids: list[int]) -> str:
    """llama.cpp's llama_detokenize (special tokens rendered), as its tools show text: unlike
    llama-cpp-python's Llama.detokenize it drops the space prefix the tokenizer added."""
    import ctypes
    import llama_cpp
    tokens = (llama_cpp.llama_token * max(len(ids), 1))(*ids)
    size = 16 * len(ids) + 16
    text = ctypes.create_string_buffer(size)
    n = llama_cpp.llama_detokenize(llm._model.vocab, tokens, len(ids), text, size, False, True)
    assert 0 <= n <= size, n
    return text.raw[:n].decode("utf-8", errors="replace")


def tokenizer_cases(folder: Path, sp, specials: list[str]) -> None:
    """llama.cpp's ids and text for each string (the fixture), checked against transformers' GGUF
    tokenizer and the sentencepiece model."""
    try:
        from llama_cpp import Llama
        llm = Llama(model_path=str(folder / "model.gguf"), vocab_only=True, verbose=False)
    except ImportError:
        llm = None
        print(f"{folder.name}: llama.cpp not available: the tokenizer cases are transformers' ids")
    hf = AutoTokenizer.from_pretrained(str(folder), gguf_file="model.gguf")
    bos = sp.bos_id()
    cases, differs = [], {"transformers": 0, "sentencepiece": 0}
    for text in spm_case_texts(specials):
        hf_ids = hf.encode(text, add_special_tokens=True)
        sp_ids = [bos] + sp.encode(text)
        if llm is not None:
            ids = list(llm.tokenize(text.encode("utf-8"), add_bos=True, special=True))
            decoded = llama_cpp_detokenize(llm, ids[1:])
        else:
            ids, decoded = hf_ids, hf.decode(hf_ids[1:])
        for oracle, other in (("transformers", hf_ids), ("sentencepiece", sp_ids)):
            if other != ids:
                differs[oracle] += 1
                print(f"  {folder.name} {oracle} differs on {text!r}: llama.cpp {ids}, {oracle} {other}")
        cases.append({"text": text, "ids": ids, "decoded": decoded})
    (folder / "tokenizer_cases.json").write_text(
        json.dumps({"model": "model.gguf", "cases": cases}, ensure_ascii=False, separators=(",", ":")),
        encoding="utf-8")
    print(f"{folder.name}: {len(cases)} tokenizer cases; differing from llama.cpp: {differs}")
    for oracle, count in differs.items():
        if count:
            print(f"  {oracle} differs because {KNOWN_TOKENIZER_DIVERGENCES[oracle]}")


def gemma3() -> None:
    specials = ["<start_of_turn>", "<end_of_turn>"]
    sp = train_sentencepiece(False, {"pad": (0, "<pad>"), "eos": (1, "<eos>"), "bos": (2, "<bos>"),
                                     "unk": (3, "<unk>")}, specials + ["\n\n"])
    assert sp.vocab_size() == SPM_VOCAB, sp.vocab_size()
    config = Gemma3TextConfig(vocab_size=SPM_VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=6,
                              num_attention_heads=4, num_key_value_heads=2, head_dim=8, query_pre_attn_scalar=8,
                              sliding_window=4, max_position_embeddings=256, final_logit_softcapping=30.0,
                              rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1e6},
                                               "sliding_attention": {"rope_type": "default", "rope_theta": 5e4}},
                              bos_token_id=2, eos_token_id=1, pad_token_id=0, tie_word_embeddings=True)
    assert config.layer_types == ["sliding_attention"] * 5 + ["full_attention"], config.layer_types
    folder = case("gemma3", "gemma3", config, spm_vocab(sp, False, set(specials), {"\n\n"}), False, lambda c: {})
    tokenizer_cases(folder, sp, specials)


def llama2() -> None:
    sp = train_sentencepiece(True, {"unk": (0, "<unk>"), "bos": (1, "<s>"), "eos": (2, "</s>")}, [])
    assert sp.vocab_size() == SPM_VOCAB, sp.vocab_size()
    config = LlamaConfig(**{**SIZES, "vocab_size": SPM_VOCAB}, tie_word_embeddings=False,
                         rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    folder = case("llama2", "llama", config, spm_vocab(sp, True, set(), set()), True, lambda c: {})
    tokenizer_cases(folder, sp, ["<s>", "</s>"])


def main() -> None:
    if OUT.exists():
        shutil.rmtree(OUT)
    qwen2()
    qwen3()
    qwen3moe()
    llama31()
    gemma3()
    llama2()


if __name__ == "__main__":
    main()
