"""The prompt ids every path of a model receives: the first N ids of the configuration's
text under the model's own tokenizer (as examples/generate encodes it, BOS included),
computed once per model file and cached, then passed to every engine as ids, so no
engine tokenizes."""
from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

from . import process


class PromptError(RuntimeError):
    pass


def _cache_key(model_file: Path, text: str, count: int) -> str:
    stat = model_file.stat()
    return hashlib.sha256(f"{model_file.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{count}|{text}".encode()
                          ).hexdigest()[:20]


def prompt_ids(model_file: Path, text: str, count: int, binaries: Path, work: Path) -> list[int]:
    cache = work / "prompts" / f"{_cache_key(model_file, text, count)}.json"
    if cache.exists():
        return json.loads(cache.read_text())
    generate = binaries / "examples" / "generate"
    if not generate.exists():
        raise PromptError(f"{generate} is not built (it tokenizes the prompt)")
    repeated = text
    for _ in range(8):  # repeat the text until it has enough tokens
        outcome = process.run([str(generate), "--model", str(model_file), "--prompt", repeated, "--max-tokens", "1",
                               "--iters", "1", "--context", str(len(repeated.encode()) + 64)], timeout_s=600)
        results = process.parse_results(outcome.stdout) if outcome.returncode == 0 else []
        if not results:
            raise PromptError(f"tokenizing with generate failed ({outcome.returncode}): {outcome.tail(3)}")
        ids = results[-1]["prompt_ids"]
        if len(ids) >= count:
            cache.parent.mkdir(parents=True, exist_ok=True)
            cache.write_text(json.dumps(ids[:count]))
            return ids[:count]
        repeated = f"{repeated} {text}"
    raise PromptError(f"the prompt text gives fewer than {count} tokens even repeated")


def seeded_ids(model_folder: Path, count: int, seed: int = 0) -> list[int]:
    """`count` ids drawn uniformly from the model's vocabulary with a fixed seed: the prompt
    of a random-weight model (its text would mean nothing), needing no tokenizer run."""
    try:
        vocab = int(json.loads((model_folder / "config.json").read_text())["vocab_size"])
    except (OSError, KeyError, ValueError) as error:
        raise PromptError(f"no vocab_size in {model_folder / 'config.json'}: {error}") from error
    rng = random.Random(seed)
    return [rng.randrange(vocab) for _ in range(count)]
