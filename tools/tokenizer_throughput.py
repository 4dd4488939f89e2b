#!/usr/bin/env python3
"""Tokenizer encode throughput: luminal's C++ tokenizer (benchmarks/bench_tokenizer)
against the Hugging Face `tokenizers` package, on the same tokenizer.json and the
same text, in MB/s of input, and their ratio.

Like for like: both sides are single-threaded (RAYON_NUM_THREADS=1, and
Tokenizer.encode, never encode_batch), both use add_special_tokens=False, both
keep one tokenizer object across repetitions (so both word caches are warm after
the first), and both report the median of --repeats runs. Two modes, each
reported: "whole" encodes the text as one string; "lines" encodes each line
(with its newline) as its own string, which is how chat-sized inputs arrive.
Token counts are compared first, so the two sides provably did the same work.

Text (unless --text): the license texts under /usr/share/common-licenses (English
prose) plus Python standard-library sources (code), plus multilingual lines, about
--megabytes MB; written to the work directory. Tokenizers (unless --tokenizer):
trained here with `tokenizers` on that text, as in tools/gen_tokenizer_fixtures.py
but at realistic sizes: a Llama-3-style byte-level BPE (32k vocab) and a
Gemma-style byte-fallback BPE (16k vocab).

Run after building the benchmark (cmake --build build/release --target bench_tokenizer):
  python3 tools/tokenizer_throughput.py --bench build/release/benchmarks/bench_tokenizer
"""
import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gen_tokenizer_fixtures as fixtures  # noqa: E402
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers  # noqa: E402


def build_text(megabytes):
    parts = []
    for path in sorted(Path("/usr/share/common-licenses").glob("*")):
        if path.is_file():
            parts.append(path.read_text(encoding="utf-8", errors="replace"))
    stdlib = Path(os.__file__).parent
    budget = int(megabytes * 1e6)
    for path in sorted(stdlib.glob("*.py")):
        if sum(len(p) for p in parts) >= budget * 0.9:
            break
        parts.append(path.read_text(encoding="utf-8", errors="replace"))
    multilingual = "\n".join(fixtures.UNICODE_LINES) + "\n"
    parts.append(multilingual * max(1, int(budget * 0.1 / len(multilingual.encode()))))
    return "\n".join(parts)


def train_llama3(lines, path):
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(fixtures.Regex(fixtures.LLAMA3_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(lines, trainer=fixtures.byte_level_trainer(32000, ["<|begin_of_text|>"]))
    tok.save(str(path))


def train_gemma(lines, path):
    tok = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>", fuse_unk=True))
    tok.normalizer = normalizers.Replace(" ", "▁")
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    tok.train_from_iterator(lines, trainer=fixtures.sentencepiece_trainer(lines, 16000, ["<bos>", "<unk>"], 500))
    fixtures.with_byte_tokens(tok).save(str(path))


def python_side(tokenizer_path, text, per_line, repeats):
    tok = Tokenizer.from_file(str(tokenizer_path))
    pieces = text.splitlines(keepends=True) if per_line else [text]
    times, tokens = [], 0
    for _ in range(repeats):
        start = time.perf_counter()
        tokens = sum(len(tok.encode(piece, add_special_tokens=False).ids) for piece in pieces)
        times.append(time.perf_counter() - start)
    return tokens, statistics.median(times)


def cpp_side(bench, tokenizer_path, text_path, per_line, repeats):
    cmd = [bench, str(tokenizer_path), str(text_path), "--repeats", str(repeats)] + (["--per-line"] if per_line else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    fields = dict(line.rsplit(" ", 1) for line in out.strip().splitlines())
    return int(fields["tokens"]), float(fields["seconds"])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", required=True, help="path of the bench_tokenizer binary")
    parser.add_argument("--tokenizer", action="append", help="tokenizer.json to measure (default: train two)")
    parser.add_argument("--text", help="UTF-8 text file (default: built here)")
    parser.add_argument("--megabytes", type=float, default=2.0)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--work-dir", default="/tmp/luminal_tokenizer_throughput")
    args = parser.parse_args()

    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    if args.text:
        text_path = Path(args.text)
        text = text_path.read_text(encoding="utf-8")
    else:
        text = build_text(args.megabytes)
        text_path = work / "text.txt"
        text_path.write_text(text, encoding="utf-8")
    tokenizer_paths = [Path(p) for p in args.tokenizer or []]
    if not tokenizer_paths:
        lines = text.splitlines()
        for name, train in (("llama3_32k", train_llama3), ("gemma_16k", train_gemma)):
            path = work / f"{name}.json"
            if not path.exists():
                train(lines, path)
            tokenizer_paths.append(path)

    size_mb = len(text.encode("utf-8")) / 1e6
    print(f"text: {text_path} ({size_mb:.2f} MB); median of {args.repeats} runs, single-threaded")
    print(f"{'tokenizer':<16} {'mode':<6} {'tokens':>9} {'luminal MB/s':>13} {'tokenizers MB/s':>16} {'ratio':>6}")
    for path in tokenizer_paths:
        for per_line in (False, True):
            ours_tokens, ours = cpp_side(args.bench, path, text_path, per_line, args.repeats)
            peer_tokens, peer = python_side(path, text, per_line, args.repeats)
            if ours_tokens != peer_tokens:
                sys.exit(f"{path.name}: token counts differ (luminal {ours_tokens}, tokenizers {peer_tokens})")
            mode = "lines" if per_line else "whole"
            print(f"{path.stem:<16} {mode:<6} {ours_tokens:>9} {size_mb / ours:>13.2f} {size_mb / peer:>16.2f} "
                  f"{peer / ours:>6.2f}")


if __name__ == "__main__":
    main()
