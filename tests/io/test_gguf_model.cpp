// A model's config and tokenizer from GGUF metadata alone.
// - tests/data/gguf_model/model.gguf (tools/gen_gguf_model_fixtures.py): a tiny
//   Llama written the way llama.cpp's converter writes one. Its config must be
//   the one the generator wrote, and its tokenizer must give llama.cpp's ids and
//   text for 156 strings (recorded by llama-cpp-python, which honours
//   tokenizer.ggml.pre; the `tokenizers` library agrees on every one).
// - The real SmolLM2-135M-Instruct file, when scripts/fetch_model.sh has put it
//   in the cache: llama.cpp's ids for 39 strings (skipped, and reported as
//   skipped, without the file).
// - Metadata that luminal cannot run is an Error naming the key and value.
#include <doctest/doctest.h>
#include "../test_data.hpp"

#include "gguf_bytes.hpp"
#include "parser_checks.hpp"

#include <luminal/io/gguf.hpp>
#include <luminal/io/gguf_model_config.hpp>
#include <luminal/io/gguf_tokenizer.hpp>
#include <luminal/io/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <span>
#include <string>
#include <variant>
#include <vector>

namespace {

namespace fs = std::filesystem;
using luminal::io::GgufFile;
using luminal::io::GgufValueType;
using luminal::io::GgufView;
using luminal::io::Json;
using parser_checks::as_bytes;
using parser_checks::error_of;

const fs::path gguf_model_data = luminal_test::data_dir() / "gguf_model";

using parser_checks::read_json;

// Where scripts/fetch_model.sh caches SmolLM2 (same defaults).
fs::path smollm2_path() {
    const char* cache = std::getenv("LUMINAL_MODEL_CACHE");
    const char* xdg = std::getenv("XDG_CACHE_HOME");
    const char* home = std::getenv("HOME");
    const fs::path dir = cache ? fs::path(cache)
                         : xdg ? fs::path(xdg) / "luminal"
                               : fs::path(home ? home : "/") / ".cache" / "luminal";
    return dir / "SmolLM2-135M-Instruct.Q4_1.gguf";
}

void check_llama_cpp_ids(const luminal::io::Tokenizer& tokenizer, const Json& cases, bool with_text) {
    for (const Json& item : cases.at("cases")) {
        const auto text = item.at("text").get<std::string>();
        CAPTURE(text);
        const auto ids = item.at("ids").get<std::vector<std::int32_t>>();
        CHECK(tokenizer.encode(text, true) == ids);
        if (with_text) CHECK(tokenizer.decode(ids) == item.at("decoded").get<std::string>());
    }
}

// A metadata-only GGUF file: a Llama config and a 7-token byte-level BPE
// vocabulary, with `edit` applied to the key/value list first.
using Value = std::variant<std::uint32_t, float, bool, std::string, std::vector<std::string>, std::vector<std::int32_t>,
                           std::vector<float>, std::vector<bool>>;
using Metadata = std::vector<std::pair<std::string, Value>>;

Metadata llama_metadata() {
    return {{"general.architecture", std::string("llama")},
            {"llama.block_count", 2u},
            {"llama.context_length", 256u},
            {"llama.embedding_length", 64u},
            {"llama.feed_forward_length", 128u},
            {"llama.attention.head_count", 4u},
            {"llama.attention.head_count_kv", 2u},
            {"llama.attention.layer_norm_rms_epsilon", 1e-5f},
            {"tokenizer.ggml.model", std::string("gpt2")},
            {"tokenizer.ggml.pre", std::string("smollm")},
            {"tokenizer.ggml.tokens", std::vector<std::string>{"<s>", "a", "b", "c", "\xC4\xA0", "ab", "\xC4\xA0" "a"}},
            {"tokenizer.ggml.token_type", std::vector<std::int32_t>{3, 1, 1, 1, 1, 1, 1}},
            {"tokenizer.ggml.merges", std::vector<std::string>{"a b", "\xC4\xA0 a"}},
            {"tokenizer.ggml.bos_token_id", 0u}};
}

// A SentencePiece ("llama") vocabulary small enough to follow by hand:
// "ab" and "▁a" are both tokens, "▁a" scores better; 'c' has only its byte token.
Metadata sentencepiece_metadata() {
    Metadata metadata = llama_metadata();
    const std::string space = "\xE2\x96\x81";  // U+2581
    metadata.erase(std::remove_if(metadata.begin(), metadata.end(),
                                  [](const auto& entry) { return entry.first.starts_with("tokenizer."); }),
                   metadata.end());
    metadata.insert(metadata.end(),
                    {{"tokenizer.ggml.model", std::string("llama")},
                     {"tokenizer.ggml.tokens", std::vector<std::string>{"<unk>", "<s>", "</s>", space, "a", "b", "ab",
                                                                        space + "a", "<0x63>"}},
                     {"tokenizer.ggml.scores", std::vector<float>{0, 0, 0, -10, -20, -30, -2, -1, 0}},
                     {"tokenizer.ggml.token_type", std::vector<std::int32_t>{2, 3, 3, 1, 1, 1, 1, 1, 6}}});
    return metadata;
}

void set(Metadata& metadata, const std::string& key, Value value) {
    for (auto& [name, existing] : metadata)
        if (name == key) {
            existing = std::move(value);
            return;
        }
    metadata.emplace_back(key, std::move(value));
}

void remove_key(Metadata& metadata, const std::string& key) {
    std::erase_if(metadata, [&](const auto& entry) { return entry.first == key; });
}

// llama_metadata as a 7-layer gemma3 file with a head size (32) other than hidden / heads.
Metadata gemma3_metadata() {
    Metadata metadata = llama_metadata();
    for (auto& [key, value] : metadata)
        if (key.starts_with("llama.")) key = "gemma3." + key.substr(6);
    set(metadata, "general.architecture", std::string("gemma3"));
    set(metadata, "gemma3.block_count", 7u);
    set(metadata, "gemma3.attention.key_length", 32u);
    set(metadata, "gemma3.rope.freq_base", 1e6f);
    return metadata;
}

std::string gguf_bytes(const Metadata& metadata) {
    gguf_test::GgufBytes out;
    out.header(0, metadata.size());
    for (const auto& [key, value] : metadata) {
        std::visit(
            [&](const auto& v) {
                using T = std::decay_t<decltype(v)>;
                if constexpr (std::is_same_v<T, std::uint32_t>) out.key(key, GgufValueType::U32).u32(v);
                else if constexpr (std::is_same_v<T, float>) out.key(key, GgufValueType::F32).scalar(v);
                else if constexpr (std::is_same_v<T, bool>) out.key(key, GgufValueType::Bool).u8(v ? 1 : 0);
                else if constexpr (std::is_same_v<T, std::string>) out.key(key, GgufValueType::String).str(v);
                else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
                    out.key(key, GgufValueType::Array).u32(static_cast<std::uint32_t>(GgufValueType::String)).u64(v.size());
                    for (const auto& s : v) out.str(s);
                } else if constexpr (std::is_same_v<T, std::vector<bool>>) {
                    out.key(key, GgufValueType::Array).u32(static_cast<std::uint32_t>(GgufValueType::Bool)).u64(v.size());
                    for (const bool b : v) out.u8(b ? 1 : 0);
                } else if constexpr (std::is_same_v<T, std::vector<float>>) {
                    out.key(key, GgufValueType::Array).u32(static_cast<std::uint32_t>(GgufValueType::F32)).u64(v.size());
                    for (const float f : v) out.scalar(f);
                } else {
                    out.key(key, GgufValueType::Array).u32(static_cast<std::uint32_t>(GgufValueType::I32)).u64(v.size());
                    for (const auto i : v) out.scalar(i);
                }
            },
            value);
    }
    return out.pad_to(32).bytes;
}

GgufView view_of(const std::string& bytes) { return GgufView::parse(as_bytes(bytes), "meta.gguf"); }

std::string config_error(const Metadata& metadata) {
    const std::string bytes = gguf_bytes(metadata);
    return error_of([&] { (void)luminal::io::gguf_model_config(view_of(bytes)); });
}

std::string tokenizer_error(const Metadata& metadata) {
    const std::string bytes = gguf_bytes(metadata);
    return error_of([&] { (void)luminal::io::gguf_tokenizer(view_of(bytes)); });
}

using parser_checks::contains;

}  // namespace

TEST_CASE("gguf model: the config the generator wrote") {
    const GgufFile file = GgufFile::open(gguf_model_data / "model.gguf");
    const luminal::io::ModelConfig config = luminal::io::gguf_model_config(file.view());
    CHECK(config.family == luminal::io::ModelFamily::Llama);
    CHECK(config.vocab_size == 512);
    CHECK(config.hidden_size == 64);
    CHECK(config.intermediate_size == 128);
    CHECK(config.num_hidden_layers == 2);
    CHECK(config.num_attention_heads == 4);
    CHECK(config.max_position_embeddings == 256);
    CHECK(config.rms_norm_eps == doctest::Approx(1e-5).epsilon(1e-6));
    CHECK(config.tie_word_embeddings);
    CHECK_FALSE(config.attention_bias);
    CHECK(config.bos_token_id == 1);
    CHECK(config.eos_token_ids == std::vector<std::int64_t>{2});
    REQUIRE(config.layers.size() == 2);
    for (const auto& layer : config.layers) {
        CHECK(layer.head_dim == 16);
        CHECK(layer.num_key_value_heads == 2);
        CHECK(layer.rope.type == luminal::io::RopeType::Default);
        CHECK(layer.rope.theta == 100000.0);
        CHECK(layer.rope.partial_rotary_factor == 1.0);
    }
}

TEST_CASE("gguf model: the tokenizer from metadata gives llama.cpp's ids and text") {
    const GgufFile file = GgufFile::open(gguf_model_data / "model.gguf");
    const luminal::io::Tokenizer tokenizer = luminal::io::gguf_tokenizer(file.view());
    CHECK(tokenizer.vocab_size() == 512);
    CHECK(tokenizer.is_special(1));
    CHECK(tokenizer.token_to_id("<|im_end|>") == 2);
    check_llama_cpp_ids(tokenizer, read_json(gguf_model_data / "tokenizer_cases.json"), true);
}

TEST_CASE("gguf model: SmolLM2-135M-Instruct's tokenizer gives llama.cpp's ids" *
          doctest::skip(!fs::exists(smollm2_path()))) {
    const GgufFile file = GgufFile::open(smollm2_path());
    const luminal::io::Tokenizer tokenizer = luminal::io::gguf_tokenizer(file.view());
    CHECK(tokenizer.vocab_size() == 49152);
    check_llama_cpp_ids(tokenizer, read_json(gguf_model_data / "smollm2_tokenizer_cases.json"), false);
}

TEST_CASE("gguf model: a hand-built Llama: defaults and the BOS the metadata asks for") {
    Metadata metadata = llama_metadata();
    const std::string plain = gguf_bytes(metadata);
    const auto config = luminal::io::gguf_model_config(view_of(plain));
    CHECK(config.vocab_size == 7);  // no llama.vocab_size: the token count
    CHECK(config.layers.at(0).rope.theta == 10000.0);
    CHECK(config.layers.at(0).head_dim == 16);
    CHECK(luminal::io::gguf_tokenizer(view_of(plain)).encode("ab a") == std::vector<std::int32_t>{5, 6});

    set(metadata, "tokenizer.ggml.add_bos_token", true);
    set(metadata, "llama.rope.scaling.type", std::string("linear"));
    set(metadata, "llama.rope.scaling.factor", 4.0f);
    const std::string framed = gguf_bytes(metadata);
    CHECK(luminal::io::gguf_tokenizer(view_of(framed)).encode("ab a") == std::vector<std::int32_t>{0, 5, 6});
    CHECK(luminal::io::gguf_tokenizer(view_of(framed)).encode("ab a", false) == std::vector<std::int32_t>{5, 6});
    const auto scaled = luminal::io::gguf_model_config(view_of(framed));
    CHECK(scaled.layers.at(0).rope.type == luminal::io::RopeType::Linear);
    CHECK(scaled.layers.at(0).rope.factor == 4.0);
}

TEST_CASE("gguf model: config metadata luminal cannot run is an Error naming the key") {
    Metadata m = llama_metadata();
    set(m, "general.architecture", std::string("phi3"));
    CHECK(contains(config_error(m), "general.architecture 'phi3' is not supported (luminal runs GGUF files of "
                                    "architectures llama, qwen2, qwen3, qwen3moe, gemma3)"));

    m = llama_metadata();
    remove_key(m, "llama.embedding_length");
    CHECK(contains(config_error(m), "no metadata key 'llama.embedding_length'"));

    m = llama_metadata();
    set(m, "llama.attention.head_count_kv", 3u);
    CHECK(contains(config_error(m), "llama.attention.head_count 4 is not a multiple of llama.attention.head_count_kv 3"));

    m = llama_metadata();
    set(m, "llama.block_count", 0u);
    CHECK(contains(config_error(m), "'llama.block_count' must be positive, got 0"));

    m = llama_metadata();
    set(m, "llama.rope.dimension_count", 8u);
    CHECK(contains(config_error(m), "llama.rope.dimension_count 8 differs from the head size 16"));

    m = llama_metadata();
    set(m, "llama.rope.scaling.type", std::string("yarn"));
    CHECK(contains(config_error(m), "llama.rope.scaling.type 'yarn' is not supported"));

    m = llama_metadata();
    set(m, "llama.attention.layer_norm_rms_epsilon", std::string("tiny"));
    CHECK(contains(config_error(m), "'llama.attention.layer_norm_rms_epsilon' is string, expected f32 or f64"));
}

TEST_CASE("gguf model: tokenizer metadata luminal cannot run is an Error naming the key") {
    Metadata m = llama_metadata();
    set(m, "tokenizer.ggml.model", std::string("bert"));
    CHECK(contains(tokenizer_error(m), "tokenizer.ggml.model 'bert' is not supported (luminal reads 'gpt2', "
                                       "byte-level BPE, and 'llama', SentencePiece BPE)"));

    m = llama_metadata();
    remove_key(m, "tokenizer.ggml.tokens");
    CHECK(contains(tokenizer_error(m), "no metadata key 'tokenizer.ggml.tokens'"));

    m = llama_metadata();
    set(m, "tokenizer.ggml.pre", std::string("deepseek-coder"));
    CHECK(contains(tokenizer_error(m), "tokenizer.ggml.pre 'deepseek-coder' is not supported"));

    m = llama_metadata();
    set(m, "tokenizer.ggml.token_type", std::vector<std::int32_t>{3, 1});
    CHECK(contains(tokenizer_error(m), "tokenizer.ggml.token_type has 2 entries for 7 tokens"));

    m = llama_metadata();
    set(m, "tokenizer.ggml.tokens", std::vector<std::string>{"<s>", "a", "b", "a", "\xC4\xA0", "ab", "\xC4\xA0" "a"});
    CHECK(contains(tokenizer_error(m), "token 'a' appears twice in tokenizer.ggml.tokens (ids 1 and 3)"));

    m = llama_metadata();
    set(m, "tokenizer.ggml.merges", std::vector<std::string>{"a z"});
    CHECK(contains(tokenizer_error(m), "merge 'a z' names 'z', which is not in the vocab"));

    m = llama_metadata();
    set(m, "tokenizer.ggml.add_bos_token", true);
    remove_key(m, "tokenizer.ggml.bos_token_id");
    CHECK(contains(tokenizer_error(m), "'tokenizer.ggml.bos_token_id' is not set"));

    m = llama_metadata();
    set(m, "tokenizer.ggml.bos_token_id", 7u);
    set(m, "tokenizer.ggml.add_bos_token", true);
    CHECK(contains(tokenizer_error(m), "'tokenizer.ggml.bos_token_id' = 7 is outside the vocabulary of 7 tokens"));
}

TEST_CASE("gguf model: a SentencePiece ('llama') vocabulary merges by score, falls back to bytes, frames with BOS") {
    Metadata metadata = sentencepiece_metadata();
    const std::string bytes = gguf_bytes(metadata);
    const luminal::io::Tokenizer tokenizer = luminal::io::gguf_tokenizer(view_of(bytes));
    // "ab c" -> "▁ab▁c": "▁a" (score -1) merges before "ab" (-2); 'c' is its byte token;
    // llama.cpp adds BOS (id 1) when the file does not say.
    CHECK(tokenizer.encode("ab c") == std::vector<std::int32_t>{1, 7, 5, 3, 8});
    CHECK(tokenizer.encode("ab c", false) == std::vector<std::int32_t>{7, 5, 3, 8});
    CHECK(tokenizer.decode(std::vector<std::int32_t>{7, 5, 3, 8}) == "ab c");
    CHECK(tokenizer.encode("<s>ab", false) == std::vector<std::int32_t>{1, 7, 5});

    // Without the space prefix (Gemma) "ab" is one token; no BOS when the file says so.
    set(metadata, "tokenizer.ggml.add_space_prefix", false);
    set(metadata, "tokenizer.ggml.add_bos_token", false);
    const std::string unprefixed = gguf_bytes(metadata);
    const luminal::io::Tokenizer gemma_like = luminal::io::gguf_tokenizer(view_of(unprefixed));
    CHECK(gemma_like.encode("ab c") == std::vector<std::int32_t>{6, 3, 8});
    CHECK(gemma_like.decode(std::vector<std::int32_t>{3, 6}) == " ab");

    // EOS (llama.cpp's default id 2) when asked; without a byte token, the unknown token.
    set(metadata, "tokenizer.ggml.add_eos_token", true);
    set(metadata, "tokenizer.ggml.token_type", std::vector<std::int32_t>{2, 3, 3, 1, 1, 1, 1, 1, 1});
    set(metadata, "tokenizer.ggml.tokens", std::vector<std::string>{"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "b",
                                                                    "ab", "\xE2\x96\x81" "a", "d"});
    const std::string framed = gguf_bytes(metadata);
    CHECK(luminal::io::gguf_tokenizer(view_of(framed)).encode("ab c") == std::vector<std::int32_t>{6, 3, 0, 2});
}

TEST_CASE("gguf model: SentencePiece tokenizers (gemma3, llama2 fixtures) give llama.cpp's ids and text") {
    const fs::path arch = luminal_test::data_dir() / "gguf_arch";
    for (const char* name : {"gemma3", "llama2"}) {
        CAPTURE(name);
        const GgufFile file = GgufFile::open(arch / name / "model.gguf");
        const luminal::io::Tokenizer tokenizer = luminal::io::gguf_tokenizer(file.view());
        CHECK(tokenizer.vocab_size() == 512);
        const Json cases = read_json(arch / name / "tokenizer_cases.json");
        REQUIRE(cases.at("cases").size() > 100);
        for (const Json& item : cases.at("cases")) {
            const auto text = item.at("text").get<std::string>();
            CAPTURE(text);
            const auto ids = item.at("ids").get<std::vector<std::int32_t>>();
            CHECK(tokenizer.encode(text) == ids);
            CHECK(tokenizer.decode(std::span(ids).subspan(1)) == item.at("decoded").get<std::string>());
        }
    }
}

TEST_CASE("gguf model: malformed SentencePiece metadata is an Error naming the key") {
    Metadata m = sentencepiece_metadata();
    remove_key(m, "tokenizer.ggml.scores");
    CHECK(contains(tokenizer_error(m), "tokenizer.ggml.model 'llama' needs tokenizer.ggml.scores"));

    m = sentencepiece_metadata();
    set(m, "tokenizer.ggml.scores", std::vector<float>{0, 0, 0});
    CHECK(contains(tokenizer_error(m), "tokenizer.ggml.scores has 3 entries for 9 tokens"));

    m = sentencepiece_metadata();
    set(m, "tokenizer.ggml.scores", std::vector<float>{0, 0, 0, -10, -20, -30, std::nanf(""), -1, 0});
    CHECK(contains(tokenizer_error(m), "tokenizer.ggml.scores[6] is NaN"));

    m = sentencepiece_metadata();
    set(m, "tokenizer.ggml.scores", std::vector<std::int32_t>{0, 0, 0, 0, 0, 0, 0, 0, 0});
    CHECK(contains(tokenizer_error(m), "metadata key 'tokenizer.ggml.scores' is array of i32, expected array of f32"));

    m = sentencepiece_metadata();
    set(m, "tokenizer.ggml.unknown_token_id", 9u);
    CHECK(contains(tokenizer_error(m), "'tokenizer.ggml.unknown_token_id' = 9 is outside the vocabulary of 9 tokens"));

    m = sentencepiece_metadata();
    set(m, "tokenizer.ggml.tokens", std::vector<std::string>{});
    set(m, "tokenizer.ggml.scores", std::vector<float>{});
    set(m, "tokenizer.ggml.token_type", std::vector<std::int32_t>{});
    CHECK(contains(tokenizer_error(m), "tokenizer.ggml.tokens is empty"));
}

TEST_CASE("gguf model: gemma3 metadata read as llama.cpp reads it") {
    using luminal::io::AttentionKind;
    const auto kinds = [](const luminal::io::ModelConfig& config) {
        std::string out;
        for (const auto& layer : config.layers) out += layer.attention == AttentionKind::Sliding ? 's' : 'F';
        return out;
    };
    Metadata m = gemma3_metadata();
    const std::string plain = gguf_bytes(m);
    const auto no_window = luminal::io::gguf_model_config(view_of(plain));
    CHECK(no_window.family == luminal::io::ModelFamily::Gemma3);
    CHECK(kinds(no_window) == "FFFFFFF");  // no sliding_window: every layer global
    CHECK_FALSE(no_window.sliding_window.has_value());
    CHECK(no_window.layers[0].rope.theta == 1e6);
    REQUIRE(no_window.gemma.has_value());
    CHECK(no_window.gemma->query_pre_attn_scalar == 32);  // the head size
    CHECK_FALSE(no_window.gemma->final_logit_softcapping.has_value());

    set(m, "gemma3.attention.sliding_window", 512u);
    set(m, "gemma3.rope.scaling.type", std::string("linear"));
    set(m, "gemma3.rope.scaling.factor", 8.0f);
    const std::string windowed = gguf_bytes(m);
    const auto sixth = luminal::io::gguf_model_config(view_of(windowed));
    CHECK(kinds(sixth) == "sssssFs");  // llama.cpp's default period for gemma3: 6
    CHECK(sixth.sliding_window == 512);
    CHECK(sixth.layers[0].rope.theta == 10000.0);  // no rope.freq_base_swa
    CHECK(sixth.layers[0].rope.type == luminal::io::RopeType::Default);  // scaling is the global layers'
    CHECK(sixth.layers[5].rope.type == luminal::io::RopeType::Linear);
    CHECK(sixth.layers[5].rope.theta == 1e6);

    set(m, "gemma3.attention.sliding_window_pattern", 2u);
    set(m, "gemma3.rope.freq_base_swa", 5e4f);
    set(m, "gemma3.final_logit_softcapping", 30.0f);
    const std::string period = gguf_bytes(m);
    const auto alternating = luminal::io::gguf_model_config(view_of(period));
    CHECK(kinds(alternating) == "sFsFsFs");
    CHECK(alternating.layers[0].rope.theta == 5e4);
    CHECK(alternating.gemma->final_logit_softcapping == 30.0);

    set(m, "gemma3.attention.sliding_window_pattern", std::vector<bool>{true, false, false, true, true, false, true});
    const std::string flags = gguf_bytes(m);
    CHECK(kinds(luminal::io::gguf_model_config(view_of(flags))) == "sFFssFs");

    set(m, "gemma3.attention.sliding_window_pattern", std::vector<bool>{true, false});
    CHECK(contains(config_error(m), "gemma3.attention.sliding_window_pattern has 2 entries for 7 layers"));

    m = gemma3_metadata();
    set(m, "gemma3.block_count", 62u);  // the 27B: query_pre_attn_scalar = hidden / heads
    const std::string large = gguf_bytes(m);
    CHECK(luminal::io::gguf_model_config(view_of(large)).gemma->query_pre_attn_scalar == 16);

    m = gemma3_metadata();
    set(m, "gemma3.final_logit_softcapping", -1.0f);
    CHECK(contains(config_error(m), "gemma3.final_logit_softcapping must be a non-negative number, got -1"));
}
