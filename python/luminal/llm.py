"""luminal.LLM: text generation from a Hugging Face directory or a GGUF file over the C++
nn::Session, the same prompt handling, sampling and figures as examples/generate."""
from __future__ import annotations

import os
from typing import Iterator, Sequence

from . import _luminal


class LLM:
    """LLM("model.gguf" | "hf_dir/", device="cpu", threads=0, context=512).

    threads=0 takes every hardware thread (as generate does); weights: "f32", "f16" or
    "bf16" for the matrices of a Hugging Face checkpoint; GGUF block formats stay quantized
    on the CPU unless dequantize=True; activations "q8" (as llama.cpp) or "f32" (exact)."""

    def __init__(self, path: str | os.PathLike, device: str = "cpu", threads: int = 0, context: int = 512, *,
                 weights: str = "f32", dequantize: bool = False, activations: str = "q8", search: int = 1):
        self._native = _luminal._LLM(os.fspath(path), device, threads, context, weights, dequantize, activations,
                                     search)
        self.stats: dict = {"compile_ms": self._native.compile_ms, "load_ms": self._native.load_ms}

    def stream(self, prompt: str | Sequence[int], max_tokens: int = 32, temperature: float = 0.0, top_k: int = 0,
               seed: int = 0, *, chat: bool = False, ignore_eos: bool = False, raw_ids: bool = False) -> Iterator[str]:
        """Yields the text as it decodes (never half a character). A list of ints is used as the
        prompt's ids; text is tokenized as generate does (chat=True: through the chat template).
        After the last piece, self.stats holds COMPILE/LOAD/TTFT/TPOT and the ids."""
        text, ids = ("", list(prompt)) if not isinstance(prompt, str) else (prompt, None)
        generation = self._native._start(text, ids, max_tokens, temperature, top_k, seed, chat, ignore_eos, raw_ids)
        for piece in generation:
            yield piece
        self.stats = generation.stats

    def generate(self, prompt: str | Sequence[int], max_tokens: int = 32, temperature: float = 0.0, top_k: int = 0,
                 seed: int = 0, *, chat: bool = False, ignore_eos: bool = False, raw_ids: bool = False) -> str:
        """The generated text (without the prompt)."""
        return "".join(self.stream(prompt, max_tokens, temperature, top_k, seed, chat=chat, ignore_eos=ignore_eos,
                                   raw_ids=raw_ids))

    def tokenize(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self._native.tokenize(text, add_special_tokens)

    def detokenize(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        return self._native.detokenize(list(ids), skip_special_tokens)

    def apply_chat_template(self, messages: Sequence[dict], add_generation_prompt: bool = True) -> str:
        """The model family's chat format (Llama 3, Qwen3, Gemma 3, SmolLM2) of
        [{"role": ..., "content": ...}, ...]."""
        return self._native.apply_chat_template([(m["role"], m["content"]) for m in messages], add_generation_prompt)

    @property
    def vocab_size(self) -> int:
        return self._native.vocab_size

    @property
    def device(self) -> str:
        return self._native.device
