#!/usr/bin/env bash
# The main job: installs dependencies, builds the generation example and runs
# it on the CPU. Without --model it first writes a small Llama-architecture
# model with RANDOM weights (build/release/models/random-llama, no download),
# so the text it prints is gibberish; the timings are real. Pass --model DIR
# (a Hugging Face directory of Llama 3, Qwen3, Qwen3-MoE, Gemma 3 or Gemma 4)
# for a real model; any other arguments go to examples/generate (see --help).
# Environment: see scripts/common.sh.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

"$LUMINAL_ROOT/scripts/setup.sh"
luminal_configure "$RELEASE_DIR" "${RELEASE_ARGS[@]}"
cmake --build "$RELEASE_DIR" --target generate random_model -j"$LUMINAL_JOBS"

args=("$@")
if [[ " ${args[*]} " != *" --model "* ]]; then
  model="$RELEASE_DIR/models/random-llama"
  if [[ ! -f "$model/model.safetensors" ]]; then
    "$RELEASE_DIR/examples/random_model" --tokenizer "$LUMINAL_ROOT/tests/data/tokenizers/llama3.json" --out "$model"
  fi
  echo "run_example.sh: $model has RANDOM weights (no download): expect gibberish text, real timings." >&2
  args=(--model "$model" --max-tokens 32 --iters 3 "${args[@]}")
fi
exec "$RELEASE_DIR/examples/generate" "${args[@]}"
