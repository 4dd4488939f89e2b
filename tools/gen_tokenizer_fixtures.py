#!/usr/bin/env python3
"""Builds small tokenizers with the Hugging Face `tokenizers` package and records
what it returns for a fixed set of strings, as fixtures for tests/io/test_tokenizer.cpp.

Everything is offline and deterministic: the training corpus is generated here
from a seeded RNG, and training runs single-threaded.  Six tokenizers, each
shaped like a real model family's tokenizer.json:

  llama3   byte-level BPE, ignore_merges, Split(Llama 3 regex) + ByteLevel(use_regex=false),
           TemplateProcessing adding <|begin_of_text|>
  qwen     NFC normalizer, Split(Qwen regex) + ByteLevel, ChatML special tokens,
           non-special <think> / </think>
  gpt2     SmolLM2 / GPT-2: Digits(individual) + ByteLevel(use_regex=true); merges
           stored in the legacy "a b" string form; added tokens with lstrip, rstrip,
           single_word and normalized flags
  gemma    SentencePiece-style BPE: Replace(" " -> "▁") normalizer, byte_fallback with
           the <0x00>..<0xFF> tokens in the vocab, decoder Replace/ByteFallback/Fuse,
           TemplateProcessing adding <bos>
  llama2   legacy SentencePiece-style: Prepend("▁") + Replace normalizers, byte_fallback,
           decoder Replace/ByteFallback/Fuse/Strip
  metaspace  Metaspace pre-tokenizer (prepend_scheme=always, split=true) and decoder,
           unk_token with fuse_unk, no byte fallback

Output: tests/data/tokenizers/<name>.json (the tokenizer) and
tests/data/tokenizers/<name>_cases.json: {"tokenizer": file, "cases": [{"text",
"ids" (add_special_tokens=True), "ids_plain" (False), "decoded" (decode(ids)),
"decoded_skip" (decode(ids, skip_special_tokens=True))}]}.

Run: python3 tools/gen_tokenizer_fixtures.py
"""
import json
import os
import random
import sys
from pathlib import Path

os.environ["RAYON_NUM_THREADS"] = "1"  # before importing tokenizers: deterministic training
os.environ["TOKENIZERS_PARALLELISM"] = "false"

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers  # noqa: E402
from tokenizers import pre_tokenizers, processors, trainers  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "tokenizers"

LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
              r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

WORDS = """the of and to in is was for on that with as by at from his her it an be this which
or are had not but were have one all their they has been there who more when would said
she will into time only other new some could these two may first then do any like my now
over such our man me even most made after also did many before must through back years
where much your way well down should because each just those people how too little state
good very make world still own see men work long get here between both life being under
never day same another know while last might us great old year off come since against
go came right used take three small house model token tokenizer merge vocabulary byte
encode decode stream chat template graph tensor kernel compile runtime memory cache
running jumped quickly happiness unbelievable internationalization don't can't I'm we're
they've you'll she'd it's""".split()

UNICODE_LINES = [
    "Ça va très bien, merci. Où est la bibliothèque ? Élève, garçon, naïve, façade.",
    "Größe, Straße, Übermut, schön, Mädchen, Fußgänger.",
    "Привет, как дела? Москва и Санкт-Петербург — большие города.",
    "Γειά σου κόσμε. Η γλώσσα είναι ελληνική.",
    "日本語のテキストです。東京は大きい都市です。",
    "中文文本，你好世界。我们喜欢学习。",
    "한국어 텍스트입니다. 안녕하세요.",
    "español: ¿Dónde está el baño? ¡Olé! año, niño, corazón.",
    "Tiếng Việt có dấu: Xin chào, cảm ơn bạn.",
]
CODE_LINES = [
    "def main(argc, argv):\n    return argc + 1\n",
    "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }",
    "if x == 10:\n\tprint('ten')\nelse:\n\tprint(\"other\")",
    "#include <vector>\nstd::vector<int> v{1, 2, 3};",
    "SELECT name, COUNT(*) FROM users WHERE age >= 21 GROUP BY name;",
]


def corpus():
    rng = random.Random(1234)
    lines = []
    for _ in range(3000):
        n = rng.randint(4, 18)
        words = [rng.choice(WORDS) for _ in range(n)]
        if rng.random() < 0.3:
            words.insert(rng.randrange(len(words)), str(rng.randint(0, 100000)))
        if rng.random() < 0.2:
            words[0] = words[0].capitalize()
        sep = rng.choice([" ", " ", " ", "  ", "\t"])
        line = sep.join(words) + rng.choice([".", ",", "!", "?", "", ";", ":"])
        lines.append(line)
    for i in range(40):
        lines.extend(UNICODE_LINES)
        lines.extend(CODE_LINES)
    return lines


# Strings every tokenizer is checked on; the per-tokenizer special tokens are added below.
BASE_CASES = [
    "", " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\t\t  \n\n\n   x",
    "a", "A", "hello", "Hello world", "hello  world", "hello   world   ", "  leading spaces",
    "trailing spaces   ", "The quick brown fox jumps over the lazy dog.",
    "I'm sure they've done it, we'll see. It's what she'd said; you're right, don't you?",
    "I'M SURE THEY'VE DONE IT, WE'LL SEE. IT'S",
    "0", "7", "42", "123", "1234", "12345", "1234567890", "3.14159", "1,000,000", "2024-01-15",
    "v1.2.3", "x=10+20*30", "phone: +1 (555) 123-4567", "٣٤٥ and ١٢", "½ ¼ ²³",
    "café", "cafe\u0301", "e\u0301le\u0300ve", "Å vs A\u030a vs \u212b", "ñ vs n\u0303",
    "\u1e9b\u0323", "한국어", "\u1112\u1161\u11ab", "ﬁ ligature", "Ｆｕｌｌｗｉｄｔｈ",
    "日本語のテキスト", "中文，你好世界", "東京タワー", "Привет мир", "Γειά σου κόσμε",
    "مرحبا بالعالم", "السلام عليكم ورحمة الله", "नमस्ते दुनिया", "हिन्दी भाषा", "שלום עולם",
    "ภาษาไทย", "ქართული", "Ελληνικά και English mixed", "Tiếng Việt có dấu",
    "emoji 😀", "😀😃😄😁", "👍🏽", "👨‍👩‍👧‍👦 family", "🇫🇷🇯🇵", "❤️", "♥ ☺ ✓ ✗", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
    "𐍈 gothic", "\U0001f600 at end", "tab\tseparated\tvalues", "line1\nline2\nline3",
    "windows\r\nline\r\nends", "mixed \t \n whitespace", "trailing newline\n", "\n\nleading newlines",
    "non\u00a0breaking\u00a0space", "zero\u200bwidth", "ideographic\u3000space", "em\u2003space",
    "word\u0085nel", "soft\u00adhyphen", "control\u0001char\u007f", "null\u0000byte",
    "<not a special token>", "<|fake_token|>", "<", "<|", "|>", "<<>>", "a<b>c",
    "def f(x):\n    return x * 2\n", "    indented code", "{\"key\": [1, 2, 3]}",
    "https://example.com/path?query=1&b=2#frag", "user@example.com", "C:\\Windows\\System32",
    "~!@#$%^&*()_+`-={}[]|\\:;\"'<>,.?/", "...", "!!!", "?!?!", "--", "—", "…", "«quotes»",
    "\u201csmart quotes\u201d", "'single'", "\"double\"", "a'b", "'s", "'t", "'re'", "'ll'",
    "ſ's K's", "x'S", "supercalifragilisticexpialidocious", "antidisestablishmentarianism",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "ababababababababababab", "the the the the",
    "tokenizer tokenizers tokenization", "Model MODEL model mOdEl", "unbelievable happiness",
    "internationalization", "running quickly", "zzzz qqqq xxxx", "éééé", "ÿ", "ĀāĂă",
    "\u0300 leading combining", "a\u0300\u0301\u0302\u0303", "Z\u0351\u036b\u0343\u036a",
    "\U000e0041 tag char", "\ufeffBOM", "\ufffd replacement", "\uffff", "\U0010ffff",
]


def generated_cases(rng, specials, count):
    """Random mixes of words, Unicode fragments, special tokens and whitespace."""
    fragments = WORDS + [
        "😀", "🚀", "中文", "日本", "Привет", "مرحبا", "नमस्ते", "é", "e\u0301", "12", "345678",
        "\t", "\n", "  ", "   ", ".", ",", "!", "'s", "'ll", "(", ")", "{", "}", "--", "ß", "ﬀ",
        "한", "ไทย", "𝔘", "\u00a0", "\r\n", "9", "0.5",
    ]
    cases = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, 12)):
            r = rng.random()
            if specials and r < 0.12:
                parts.append(rng.choice(specials))
            else:
                parts.append(rng.choice(fragments))
            parts.append(rng.choice(["", " ", " ", " ", "  "]))
        cases.append("".join(parts))
    return cases


def special_cases(specials, bos):
    s = specials
    out = [
        f"{s[0]}", f"{s[0]}{s[0]}", f"{s[0]} {s[-1]}", f"text {s[0]} more text",
        f"  {s[0]}  ", f"{s[0]}\n{s[-1]}\n", f"a{s[0]}b", f"{s[-1]}hello",
        f"hello{s[-1]}", f"{s[0]}😀{s[-1]}", f"{s[0][:-1]}", f"{s[0]}{s[0][1:]}",
    ]
    if bos:
        out += [f"{bos}Hello", f"{bos} {bos}", f"prefix {bos}"]
    return out


def top_chars(lines, count):
    """The `count` most frequent characters (spaces counted as "▁"), ties broken by code
    point: the trainer's own limit_alphabet breaks ties in hash order, which varies by run."""
    counts = {"▁": 0}
    for line in lines:
        for ch in line.replace(" ", "▁"):
            counts[ch] = counts.get(ch, 0) + 1
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return [ch for ch, _ in ranked[:count]]


def sentencepiece_trainer(lines, vocab_size, specials, alphabet_size):
    alphabet = top_chars(lines, alphabet_size)
    return trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                               initial_alphabet=alphabet, limit_alphabet=len(alphabet))


def train(tok, lines, trainer):
    tok.train_from_iterator(lines, trainer=trainer)
    return tok


def byte_level_trainer(vocab_size, specials):
    return trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                               initial_alphabet=pre_tokenizers.ByteLevel.alphabet())


def build_llama3(lines):
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                "<|eot_id|>"]
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    train(tok, lines, byte_level_trainer(1000, specials))
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                      pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
                                      special_tokens=[("<|begin_of_text|>", bos)])])
    tok.add_special_tokens([AddedToken("<|reserved_special_token_0|>", special=True, normalized=False)])
    return tok, specials + ["<|reserved_special_token_0|>"], "<|begin_of_text|>"


def build_qwen(lines):
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    train(tok, lines, byte_level_trainer(1000, specials))
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.add_tokens([AddedToken("<think>", special=False, normalized=False),
                    AddedToken("</think>", special=False, normalized=False)])
    return tok, specials + ["<think>", "</think>"], None


def build_gpt2(lines):
    specials = ["<|endoftext|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    train(tok, lines, byte_level_trainer(900, specials))
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True, normalized=False),
                            AddedToken("[END]", rstrip=True, special=True, normalized=False)])
    tok.add_tokens([AddedToken("hello world", single_word=True, normalized=True, special=False),
                    AddedToken("ABC", single_word=False, normalized=False, special=False)])
    return tok, specials + ["<mask>", "[END]", "hello world", "ABC"], None


def with_byte_tokens(tok):
    """Appends <0x00>..<0xFF> to the model vocab (SentencePiece keeps them there, not as
    added tokens) and reloads the tokenizer through tokenizers itself."""
    data = json.loads(tok.to_str())
    vocab = data["model"]["vocab"]
    next_id = max(max(vocab.values()), max(t["id"] for t in data["added_tokens"])) + 1
    for b in range(256):
        name = f"<0x{b:02X}>"
        if name not in vocab:
            vocab[name] = next_id
            next_id += 1
    return Tokenizer.from_str(json.dumps(data, ensure_ascii=False))


def build_gemma(lines):
    specials = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]
    tok = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>", fuse_unk=True))
    tok.normalizer = normalizers.Replace(" ", "▁")
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    train(tok, lines, sentencepiece_trainer(lines, 800, specials, 200))
    tok = with_byte_tokens(tok)
    tok.post_processor = processors.TemplateProcessing(
        single="<bos> $A", pair="<bos> $A <bos> $B", special_tokens=[("<bos>", tok.token_to_id("<bos>"))])
    tok.add_tokens([AddedToken("good morning", normalized=True, special=False),
                    AddedToken("<unused0>", normalized=False, special=False)])
    return tok, ["<bos>", "<start_of_turn>", "<end_of_turn>", "<eos>", "good morning", "<unused0>"], "<bos>"


def build_llama2(lines):
    specials = ["<unk>", "<s>", "</s>"]
    tok = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>", fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    train(tok, lines, sentencepiece_trainer(lines, 800, specials, 150))
    tok = with_byte_tokens(tok)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A </s> $B", special_tokens=[("<s>", tok.token_to_id("<s>")),
                                                                ("</s>", tok.token_to_id("</s>"))])
    return tok, specials[1:], "<s>"


def build_metaspace(lines):
    specials = ["<unk>", "<s>", "</s>"]
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    train(tok, lines, sentencepiece_trainer(lines, 700, specials, 120))
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> $B </s>",
        special_tokens=[("<s>", tok.token_to_id("<s>")), ("</s>", tok.token_to_id("</s>"))])
    return tok, specials[1:], "<s>"


def legacy_string_merges(tok):
    """Rewrites merges from [["a", "b"]] to the older ["a b"] form and reloads it."""
    data = json.loads(tok.to_str())
    merges = data["model"]["merges"]
    assert all(" " not in a and " " not in b for a, b in merges)
    data["model"]["merges"] = [f"{a} {b}" for a, b in merges]
    return Tokenizer.from_str(json.dumps(data, ensure_ascii=False)), data


def record(name, tok, specials, bos, rng):
    data = json.loads(tok.to_str())
    if name == "gpt2":
        tok, data = legacy_string_merges(tok)
    (OUT / f"{name}.json").write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")),
                                      encoding="utf-8")
    # Reload from disk: the fixtures describe exactly the file the C++ test reads.
    tok = Tokenizer.from_file(str(OUT / f"{name}.json"))
    texts = BASE_CASES + special_cases(specials, bos) + generated_cases(rng, specials, 90)
    cases = []
    for text in texts:
        ids = tok.encode(text, add_special_tokens=True).ids
        cases.append({
            "text": text,
            "ids": ids,
            "ids_plain": tok.encode(text, add_special_tokens=False).ids,
            "decoded": tok.decode(ids, skip_special_tokens=False),
            "decoded_skip": tok.decode(ids, skip_special_tokens=True),
        })
    fixture = {"tokenizer": f"{name}.json", "cases": cases}
    (OUT / f"{name}_cases.json").write_text(json.dumps(fixture, ensure_ascii=False, separators=(",", ":")),
                                            encoding="utf-8")
    print(f"{name}: vocab {tok.get_vocab_size()}, {len(cases)} cases", file=sys.stderr)


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    lines = corpus()
    builders = {"llama3": build_llama3, "qwen": build_qwen, "gpt2": build_gpt2, "gemma": build_gemma,
                "llama2": build_llama2, "metaspace": build_metaspace}
    for index, (name, build) in enumerate(builders.items()):
        tok, specials, bos = build(lines)
        record(name, tok, specials, bos, random.Random(100 + index))


if __name__ == "__main__":
    main()
