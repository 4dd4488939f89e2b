"""llama.cpp (llama-cpp-python, in process) on a GGUF file: its own quantized kernels,
n_threads = n_threads_batch = --threads, the whole prompt in one batch, logits of the last
prompt position only (as ours computes them)."""
from __future__ import annotations

import time
from pathlib import Path

from .measure import arguments, emit, measure, ms_since


def main() -> None:
    args = arguments(__doc__.split("\n")[0])
    import llama_cpp
    import numpy as np

    prompt_tokens = len(args.prompt_ids)
    start = time.perf_counter()
    llm = llama_cpp.Llama(model_path=args.model, n_ctx=max(512, prompt_tokens + args.decode_tokens + 8),
                          n_batch=max(512, prompt_tokens), n_ubatch=max(512, prompt_tokens),
                          n_threads=args.threads, n_threads_batch=args.threads, logits_all=False, verbose=False)
    load_ms = ms_since(start)

    n_vocab = llm.n_vocab()

    # The context's logits: one row, the last evaluated position's (only it asks for logits).
    # Llama.eval no longer copies them into Llama.scores without logits_all (0.3.x).
    def pick() -> int:
        return int(np.argmax(np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(n_vocab,))))

    def prefill(ids: list[int]) -> int:
        llm.eval(ids)
        return pick()

    def step(token: int, _position: int) -> int:
        llm.eval([token])
        return pick()

    result = measure(llm.reset, prefill, step, args.prompt_ids, args.iters, args.decode_tokens)
    result.update(path="llama.cpp", model=Path(args.model).name, device="cpu",
                  dtype="GGUF weights as stored (llama.cpp kernels, activations rounded to 8-bit blocks)",
                  load_ms=load_ms,
                  threads=args.threads, versions={"llama_cpp_python": llama_cpp.__version__},
                  system_info=llama_cpp.llama_print_system_info().decode(errors="replace").strip())
    emit(result)


if __name__ == "__main__":
    main()
