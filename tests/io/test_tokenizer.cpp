// The tokenizer.json tokenizer against the Hugging Face `tokenizers` package:
// tests/data/tokenizers/ holds six small tokenizers shaped like Llama 3, Qwen,
// GPT-2/SmolLM2, Gemma, Llama 2 and a Metaspace model, and for each one the ids
// and decoded text `tokenizers` produced for ~240 strings
// (tools/gen_tokenizer_fixtures.py). Chat templates are checked on strings
// written out by hand from the models' Jinja templates.
#include "luminal/io/chat_template.hpp"
#include "../test_data.hpp"
#include "luminal/io/tokenizer.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <span>
#include <string>
#include <thread>
#include <vector>

using luminal::Error;
using luminal::io::StreamingDecoder;
using luminal::io::Tokenizer;

namespace {

const std::string tokenizer_data = (luminal_test::data_dir() / "tokenizers").string() + "/";

struct Case {
    std::string text;
    std::vector<std::int32_t> ids, ids_plain;
    std::string decoded, decoded_skip;
};

std::vector<Case> load_cases(const std::string& name) {
    const std::string path = tokenizer_data + name + "_cases.json";
    const auto root = luminal::io::parse_json(luminal::io::read_text_file(path), path);
    std::vector<Case> cases;
    for (const auto& item : luminal::io::json_required<std::vector<luminal::io::Json>>(root, "cases", path)) {
        using luminal::io::json_required;
        cases.push_back({json_required<std::string>(item, "text", path),
                         json_required<std::vector<std::int32_t>>(item, "ids", path),
                         json_required<std::vector<std::int32_t>>(item, "ids_plain", path),
                         json_required<std::string>(item, "decoded", path),
                         json_required<std::string>(item, "decoded_skip", path)});
    }
    return cases;
}

std::string stream_decode(const Tokenizer& tokenizer, const std::vector<std::int32_t>& ids, bool skip_special) {
    StreamingDecoder stream(tokenizer, skip_special);
    std::string text;
    for (const auto id : ids) {
        const std::string piece = stream.step(id);
        // A piece is whole characters: valid UTF-8 on its own.
        CHECK_FALSE(luminal::io::utf8::first_invalid(piece).has_value());
        text += piece;
    }
    return text + stream.finish();
}

void check_against_fixtures(const std::string& name) {
    const Tokenizer tokenizer = Tokenizer::from_file(tokenizer_data + name + ".json");
    const auto cases = load_cases(name);
    REQUIRE(cases.size() >= 200);
    std::size_t passed = 0;
    for (const auto& c : cases) {
        INFO(name, " text: '", c.text, "'");
        const auto ids = tokenizer.encode(c.text);
        const auto ids_plain = tokenizer.encode(c.text, false);
        const auto decoded = tokenizer.decode(c.ids);
        const auto decoded_skip = tokenizer.decode(c.ids, true);
        CHECK(ids == c.ids);
        CHECK(ids_plain == c.ids_plain);
        CHECK(decoded == c.decoded);
        CHECK(decoded_skip == c.decoded_skip);
        CHECK(stream_decode(tokenizer, c.ids, false) == c.decoded);
        CHECK(stream_decode(tokenizer, c.ids, true) == c.decoded_skip);
        passed += ids == c.ids && ids_plain == c.ids_plain && decoded == c.decoded && decoded_skip == c.decoded_skip;
    }
    MESSAGE(name, ": ", passed, " of ", cases.size(), " fixture strings match tokenizers exactly");
}

}  // namespace

TEST_CASE("tokenizer: Llama 3 style byte-level BPE matches tokenizers") { check_against_fixtures("llama3"); }
TEST_CASE("tokenizer: Qwen style NFC + byte-level BPE matches tokenizers") { check_against_fixtures("qwen"); }
TEST_CASE("tokenizer: GPT-2 style ByteLevel regex + Digits matches tokenizers") { check_against_fixtures("gpt2"); }
TEST_CASE("tokenizer: Gemma style byte-fallback BPE matches tokenizers") { check_against_fixtures("gemma"); }
TEST_CASE("tokenizer: Llama 2 style Prepend/Replace/Strip matches tokenizers") { check_against_fixtures("llama2"); }
TEST_CASE("tokenizer: Metaspace with unk matches tokenizers") { check_against_fixtures("metaspace"); }

TEST_CASE("tokenizer: added and special tokens, vocabulary queries") {
    const Tokenizer tokenizer = Tokenizer::from_file(tokenizer_data + "llama3.json");
    const auto bos = tokenizer.token_to_id("<|begin_of_text|>");
    const auto eot = tokenizer.token_to_id("<|eot_id|>");
    REQUIRE(bos.has_value());
    REQUIRE(eot.has_value());
    CHECK(tokenizer.bos_id() == bos);
    CHECK(tokenizer.eos_id() == tokenizer.token_to_id("<|end_of_text|>"));
    CHECK(tokenizer.is_special(*eot));
    CHECK(tokenizer.id_to_token(*eot) == "<|eot_id|>");
    CHECK_FALSE(tokenizer.id_to_token(-1).has_value());
    CHECK_FALSE(tokenizer.id_to_token(tokenizer.vocab_size()).has_value());
    CHECK_FALSE(tokenizer.token_to_id("no such token").has_value());
    // tokenizer.json: 995 model tokens, 5 special ones below them, one reserved after.
    CHECK(tokenizer.vocab_size() == 1001);

    CHECK(tokenizer.encode("<|eot_id|>") == std::vector<std::int32_t>{*bos, *eot});
    CHECK(tokenizer.encode("<|eot_id|>", false) == std::vector<std::int32_t>{*eot});
    const std::vector<std::int32_t> ids{*bos, *eot};
    CHECK(tokenizer.decode(ids) == "<|begin_of_text|><|eot_id|>");
    CHECK(tokenizer.decode(ids, true).empty());

    const Tokenizer qwen = Tokenizer::from_file(tokenizer_data + "qwen.json");
    const auto think = qwen.token_to_id("<think>");
    REQUIRE(think.has_value());
    CHECK_FALSE(qwen.is_special(*think));  // non-special: kept by skip_special_tokens
    CHECK(qwen.decode(std::vector<std::int32_t>{*think}, true) == "<think>");
    CHECK_FALSE(qwen.bos_id().has_value());  // no post-processor BOS, no conventional BOS name
    CHECK(qwen.eos_id() == qwen.token_to_id("<|endoftext|>"));
}

TEST_CASE("tokenizer: encode is safe from several threads at once") {
    const Tokenizer tokenizer = Tokenizer::from_file(tokenizer_data + "llama3.json");
    const auto cases = load_cases("llama3");
    std::vector<int> mismatches(3, 0);
    std::vector<std::thread> threads;
    for (std::size_t t = 0; t < mismatches.size(); ++t)
        threads.emplace_back([&, t] {
            for (int round = 0; round < 5; ++round)
                for (const auto& c : cases) mismatches[t] += tokenizer.encode(c.text) != c.ids;
        });
    for (auto& thread : threads) thread.join();
    CHECK(mismatches == std::vector<int>(mismatches.size(), 0));
}

TEST_CASE("tokenizer: long and unusual inputs round-trip through byte-level models") {
    // Byte-level BPE is lossless: decode(encode(x)) == x is the reference here.
    for (const char* name : {"llama3", "qwen", "gpt2"}) {
        const Tokenizer tokenizer = Tokenizer::from_file(tokenizer_data + name + ".json");
        for (const std::string& text :
             {std::string(200000, ' '), std::string(200000, 'a'), std::string(100000, '\n') + "x",
              std::string(50000, '9'), [] {
                  std::string s;
                  for (int i = 0; i < 20000; ++i) s += "😀 中文 e\u0301 ";
                  return s;
              }()}) {
            INFO(name, " input of ", text.size(), " bytes");
            const auto ids = tokenizer.encode(text, false);
            // Qwen normalizes to NFC first: compare with the composed text.
            const std::string expected = std::string(name) == "qwen" && text.find("e\u0301") != std::string::npos
                                             ? [&] {
                                                   std::string s;
                                                   for (int i = 0; i < 20000; ++i) s += "😀 中文 \u00e9 ";
                                                   return s;
                                               }()
                                             : text;
            CHECK(tokenizer.decode(ids) == expected);
        }
    }
}

TEST_CASE("tokenizer: input that is not valid UTF-8 is an Error naming the byte") {
    const Tokenizer tokenizer = Tokenizer::from_file(tokenizer_data + "llama3.json");
    for (const std::string& bad : {std::string("ab\xff"), std::string("ab\xc3"), std::string("ab\xc0\xaf"),
                                   std::string("ab\xed\xa0\x80"), std::string("ab\xf4\x90\x80\x80"),
                                   std::string("ab\x80"), std::string("ab\xe2\x82")}) {
        CHECK_THROWS_WITH_AS(tokenizer.encode(bad), doctest::Contains("not valid UTF-8 (byte 2"), Error);
    }
    CHECK(tokenizer.encode(std::string("a\0b", 3), false).size() >= 2);  // NUL is valid UTF-8
}

TEST_CASE("tokenizer: decode rejects ids outside the vocabulary") {
    const Tokenizer tokenizer = Tokenizer::from_file(tokenizer_data + "gemma.json");
    CHECK_THROWS_WITH_AS(tokenizer.decode(std::vector<std::int32_t>{5, 100000}), doctest::Contains("id 100000"), Error);
    CHECK_THROWS_WITH_AS(tokenizer.decode(std::vector<std::int32_t>{-3}), doctest::Contains("id -3"), Error);
}

TEST_CASE("tokenizer: streaming decode holds back incomplete characters") {
    const Tokenizer tokenizer = Tokenizer::from_file(tokenizer_data + "gemma.json");
    // "😀" is outside the vocab: four <0xHH> byte tokens.
    const auto ids = tokenizer.encode("a😀b", false);
    REQUIRE(ids.size() >= 6);
    StreamingDecoder stream(tokenizer);
    std::vector<std::string> pieces;
    for (const auto id : ids) pieces.push_back(stream.step(id));
    pieces.push_back(stream.finish());
    std::string joined;
    for (const auto& piece : pieces) {
        joined += piece;
        CHECK(piece.find(luminal::io::utf8::replacement_character) == std::string::npos);
    }
    CHECK(joined == "a😀b");
    CHECK(std::count(pieces.begin(), pieces.end(), "😀") == 1);

    // A byte sequence that never completes is flushed by finish(), as decode() shows it.
    const auto lead = tokenizer.token_to_id("<0xF0>");
    REQUIRE(lead.has_value());
    StreamingDecoder truncated(tokenizer);
    CHECK(truncated.step(*lead).empty());
    CHECK(truncated.finish() == tokenizer.decode(std::vector<std::int32_t>{*lead}));
}

namespace {

// A small valid tokenizer.json to break one field at a time.
luminal::io::Json tiny_tokenizer() {
    return luminal::io::parse_json(R"({
      "version": "1.0", "truncation": null, "padding": null,
      "added_tokens": [{"id": 5, "content": "<s>", "special": true, "normalized": false,
                        "lstrip": false, "rstrip": false, "single_word": false}],
      "normalizer": {"type": "NFC"},
      "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
          {"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "Isolated", "invert": false},
          {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]},
      "post_processor": {"type": "TemplateProcessing",
          "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
          "special_tokens": {"<s>": {"id": "<s>", "ids": [5], "tokens": ["<s>"]}}},
      "decoder": {"type": "ByteLevel"},
      "model": {"type": "BPE", "dropout": null, "unk_token": null, "ignore_merges": false,
                "vocab": {"a": 0, "b": 1, "ab": 2, "c": 3, "abc": 4},
                "merges": [["a", "b"], "ab c"]}
    })", "tiny");
}

void check_load_error(const luminal::io::Json& json, const std::string& expected) {
    INFO("expected an Error containing: ", expected);
    CHECK_THROWS_WITH_AS(Tokenizer::from_json(json.dump(), "tokenizer.json"), doctest::Contains(expected.c_str()), Error);
}

}  // namespace

TEST_CASE("tokenizer: the tiny tokenizer.json used by the error tests is valid") {
    const Tokenizer tokenizer = Tokenizer::from_json(tiny_tokenizer().dump(), "tokenizer.json");
    CHECK(tokenizer.encode("abc") == std::vector<std::int32_t>{5, 4});
    CHECK(tokenizer.encode("ab", false) == std::vector<std::int32_t>{2});
    CHECK(tokenizer.decode(std::vector<std::int32_t>{5, 4, 0}, true) == "abca");
}

TEST_CASE("tokenizer: malformed tokenizer.json is an Error naming the field and value") {
    const std::string text = tiny_tokenizer().dump();
    CHECK_THROWS_WITH_AS(Tokenizer::from_json(text.substr(0, text.size() / 2), "tokenizer.json"),
                         doctest::Contains("not valid JSON"), Error);
    CHECK_THROWS_WITH_AS(Tokenizer::from_json("", "tokenizer.json"), doctest::Contains("not valid JSON"), Error);
    CHECK_THROWS_WITH_AS(Tokenizer::from_json("[1, 2]", "tokenizer.json"), doctest::Contains("JSON object"), Error);
    CHECK_THROWS_WITH_AS(Tokenizer::from_json("{\"model\": {\"vocab\": {\"a\": 0}, \"merges\": [], \"type\": \"BPE\"}, "
                                              "\"added_tokens\": [], \"x\": \"\xff\"}",
                                              "tokenizer.json"),
                         doctest::Contains("not valid JSON"), Error);
    CHECK_THROWS_WITH_AS(Tokenizer::from_file(tokenizer_data + "no_such_file.json"), doctest::Contains("no_such_file.json"), Error);

    auto json = tiny_tokenizer();
    json.erase("model");
    check_load_error(json, "missing required field 'model'");

    json = tiny_tokenizer();
    json["model"]["type"] = "Unigram";
    check_load_error(json, "model type 'Unigram' is not supported");

    json = tiny_tokenizer();
    json["model"]["vocab"]["a"] = "zero";
    check_load_error(json, "field 'vocab.a' must be an integer");

    json = tiny_tokenizer();
    json["model"]["vocab"] = luminal::io::Json::array();
    check_load_error(json, "field 'vocab' must be an object");

    json = tiny_tokenizer();
    json["model"]["merges"].push_back(luminal::io::Json::array({"a", "zz"}));
    check_load_error(json, "merge 'a zz' names 'zz', which is not in the vocab");

    json = tiny_tokenizer();
    json["model"]["merges"].push_back("b c");
    check_load_error(json, "merge 'b c' names 'bc'");

    json = tiny_tokenizer();
    json["model"]["merges"].push_back("abc");
    check_load_error(json, "merges[2] must be two tokens separated by one space, got 'abc'");

    json = tiny_tokenizer();
    json["model"]["merges"].push_back(42);
    check_load_error(json, "merges[2] must be");

    json = tiny_tokenizer();
    json["model"]["unk_token"] = "<unk>";
    check_load_error(json, "unk_token '<unk>' is not in the vocab");

    json = tiny_tokenizer();
    json["model"]["dropout"] = 0.1;
    check_load_error(json, "dropout 0.1 is not supported");

    json = tiny_tokenizer();
    json["model"]["vocab"]["d"] = 3;
    check_load_error(json, "id 3 is given to both");

    json = tiny_tokenizer();
    json["model"]["vocab"]["far"] = 2000000000;
    check_load_error(json, "ids are too sparse");

    json = tiny_tokenizer();
    json["normalizer"] = {{"type", "Precompiled"}};
    check_load_error(json, "unknown normalizer type 'Precompiled'");

    json = tiny_tokenizer();
    json["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "Bogus"}}}}};
    check_load_error(json, "normalizer.normalizers[1]: unknown normalizer type 'Bogus'");

    json = tiny_tokenizer();
    json["pre_tokenizer"]["pretokenizers"][1]["type"] = "BertPreTokenizer";
    check_load_error(json, "pre_tokenizer.pretokenizers[1]: unknown pre_tokenizer type 'BertPreTokenizer'");

    json = tiny_tokenizer();
    json["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"Regex", "(unclosed"}};
    check_load_error(json, "regex '(unclosed' does not compile");

    json = tiny_tokenizer();
    json["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"Glob", "*"}};
    check_load_error(json, "unknown pattern kind 'Glob'");

    json = tiny_tokenizer();
    json["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Sideways";
    check_load_error(json, "unknown split behavior 'Sideways'");

    json = tiny_tokenizer();
    json["pre_tokenizer"]["pretokenizers"][0]["invert"] = "yes";
    check_load_error(json, "field 'invert' must be a boolean");

    json = tiny_tokenizer();
    json["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "ab"}};
    check_load_error(json, "field 'replacement' must be one character, got 'ab'");

    json = tiny_tokenizer();
    json["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "_"}, {"prepend_scheme", "sometimes"}};
    check_load_error(json, "unknown prepend_scheme 'sometimes'");

    json = tiny_tokenizer();
    json["decoder"] = {{"type", "WordPiece"}};
    check_load_error(json, "unknown decoder type 'WordPiece'");

    json = tiny_tokenizer();
    json["decoder"] = {{"type", "Strip"}, {"content", " "}, {"start", -1}};
    check_load_error(json, "field 'start' must be an integer in range");

    json = tiny_tokenizer();
    json["post_processor"]["type"] = "Mystery";
    check_load_error(json, "unknown post_processor type 'Mystery'");

    json = tiny_tokenizer();
    json["post_processor"]["single"][0]["SpecialToken"]["id"] = "<missing>";
    check_load_error(json, "special token '<missing>' is not in 'special_tokens'");

    json = tiny_tokenizer();
    json["post_processor"]["special_tokens"]["<s>"]["ids"] = {99};
    check_load_error(json, "special token id 99 is not in the vocabulary");

    json = tiny_tokenizer();
    json["post_processor"]["single"][1]["Sequence"]["id"] = "B";
    check_load_error(json, "can only hold sequence 'A', got 'B'");

    json = tiny_tokenizer();
    json["added_tokens"][0].erase("id");
    check_load_error(json, "added_tokens[0]: missing required field 'id'");

    json = tiny_tokenizer();
    json["added_tokens"][0]["content"] = 7;
    check_load_error(json, "field 'content' must be a string");

    json = tiny_tokenizer();
    json["added_tokens"][0]["id"] = 1;  // "b" already has id 1
    check_load_error(json, "id 1 of '<s>' is already the vocab's id of 'b'");

    json = tiny_tokenizer();
    json["added_tokens"] = "none";
    check_load_error(json, "field 'added_tokens' must be an array");

    json = tiny_tokenizer();
    json["normalizer"] = {{"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", "aaaaaaaa"}};
    for (int i = 0; i < 4; ++i) json["normalizer"] = {{"type", "Sequence"}, {"normalizers", {json["normalizer"], json["normalizer"]}}};
    check_load_error(json, "normalizers could grow text");

    json = tiny_tokenizer();
    for (int i = 0; i < 40; ++i) json["decoder"] = {{"type", "Sequence"}, {"decoders", {json["decoder"]}}};
    check_load_error(json, "Sequence nested more than 16 deep");

    json = tiny_tokenizer();
    json["truncation"] = {{"max_length", 8}};
    check_load_error(json, "field 'truncation' must be null");
}

TEST_CASE("chat templates: Llama 3") {
    using luminal::io::ChatFamily;
    const std::vector<luminal::io::ChatMessage> messages{
        {"system", "You are terse."}, {"user", "  Hi there!\n"}, {"assistant", "Hello."}, {"user", "2+2?"}};
    CHECK(luminal::io::render_chat(ChatFamily::Llama3, messages) ==
          "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
          "<|start_header_id|>user<|end_header_id|>\n\nHi there!<|eot_id|>"
          "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
          "<|start_header_id|>user<|end_header_id|>\n\n2+2?<|eot_id|>"
          "<|start_header_id|>assistant<|end_header_id|>\n\n");
    CHECK(luminal::io::render_chat(ChatFamily::Llama3, std::span(messages).subspan(1, 1), {.add_generation_prompt = false}) ==
          "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi there!<|eot_id|>");
    CHECK(luminal::io::chat_stop_tokens(ChatFamily::Llama3).front() == "<|eot_id|>");

    // The rendered prompt encodes to the special tokens it names, with no second BOS.
    const Tokenizer tokenizer = Tokenizer::from_file(tokenizer_data + "llama3.json");
    const auto ids = tokenizer.encode(luminal::io::render_chat(ChatFamily::Llama3, messages), false);
    CHECK(ids.front() == tokenizer.bos_id());
    CHECK(std::count(ids.begin(), ids.end(), *tokenizer.token_to_id("<|eot_id|>")) == 4);
    CHECK(std::count(ids.begin(), ids.end(), *tokenizer.bos_id()) == 1);
}

TEST_CASE("chat templates: Qwen 3 (ChatML) with thinking") {
    using luminal::io::ChatFamily;
    const std::vector<luminal::io::ChatMessage> messages{
        {"system", "Be brief."},
        {"user", "Hi"},
        {"assistant", "<think>\nGreet back.\n</think>\n\nHello!"},
        {"user", "Bye"},
    };
    CHECK(luminal::io::render_chat(ChatFamily::Qwen3, messages) ==
          "<|im_start|>system\nBe brief.<|im_end|>\n"
          "<|im_start|>user\nHi<|im_end|>\n"
          "<|im_start|>assistant\nHello!<|im_end|>\n"  // reasoning before the last query is dropped
          "<|im_start|>user\nBye<|im_end|>\n"
          "<|im_start|>assistant\n");
    CHECK(luminal::io::render_chat(ChatFamily::Qwen3, std::span(messages).subspan(1, 1), {.enable_thinking = false}) ==
          "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
    // The final assistant turn, after the last query, keeps its reasoning.
    const std::vector<luminal::io::ChatMessage> answered{{"user", "Hi"},
                                                         {"assistant", "<think>\nGreet back.\n</think>\n\nHello!"}};
    CHECK(luminal::io::render_chat(ChatFamily::Qwen3, answered, {.add_generation_prompt = false}) ==
          "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\nGreet back.\n</think>\n\nHello!<|im_end|>\n");
    const std::vector<luminal::io::ChatMessage> tools{{"user", "Weather?"}, {"tool", "sunny"}, {"tool", "22C"}};
    CHECK(luminal::io::render_chat(ChatFamily::Qwen3, tools, {.add_generation_prompt = false}) ==
          "<|im_start|>user\nWeather?<|im_end|>\n"
          "<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n<tool_response>\n22C\n</tool_response><|im_end|>\n");

    const Tokenizer tokenizer = Tokenizer::from_file(tokenizer_data + "qwen.json");
    const auto ids = tokenizer.encode(luminal::io::render_chat(ChatFamily::Qwen3, messages), false);
    CHECK(std::count(ids.begin(), ids.end(), *tokenizer.token_to_id("<|im_start|>")) == 5);
    CHECK(std::count(ids.begin(), ids.end(), *tokenizer.token_to_id("<|im_end|>")) == 4);
}

TEST_CASE("chat templates: Gemma 3") {
    using luminal::io::ChatFamily;
    const std::vector<luminal::io::ChatMessage> messages{
        {"system", "Be brief."}, {"user", " Hi "}, {"assistant", "Hello!"}, {"user", "Bye"}};
    CHECK(luminal::io::render_chat(ChatFamily::Gemma3, messages) ==
          "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n"
          "<start_of_turn>model\nHello!<end_of_turn>\n"
          "<start_of_turn>user\nBye<end_of_turn>\n"
          "<start_of_turn>model\n");
    const std::vector<luminal::io::ChatMessage> out_of_turn{{"user", "a"}, {"user", "b"}};
    CHECK_THROWS_WITH_AS(luminal::io::render_chat(ChatFamily::Gemma3, out_of_turn),
                         doctest::Contains("roles must alternate"), Error);
    const std::vector<luminal::io::ChatMessage> unknown_role{{"narrator", "a"}};
    CHECK_THROWS_WITH_AS(luminal::io::render_chat(ChatFamily::Gemma3, unknown_role),
                         doctest::Contains("role 'narrator'"), Error);

    const Tokenizer tokenizer = Tokenizer::from_file(tokenizer_data + "gemma.json");
    const auto ids = tokenizer.encode(luminal::io::render_chat(ChatFamily::Gemma3, messages), false);
    CHECK(ids.front() == tokenizer.bos_id());
    CHECK(std::count(ids.begin(), ids.end(), *tokenizer.token_to_id("<start_of_turn>")) == 4);
}
