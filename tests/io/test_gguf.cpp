// The GGUF reader and the block dequantizers.
//
// References are independent of luminal: files written by the gguf Python
// package's GGUFWriter, with metadata and dequantized values as its GGUFReader
// and gguf.quants.dequantize read them (tools/gen_gguf_fixtures.py ->
// tests/data/gguf/expected.json), and broken files assembled byte by byte here.
//
// Dequantized values are compared bit for bit: luminal rounds each step as the
// reference does (see gguf_quants.hpp), and the test build does not contract
// multiply-adds into FMA.
#include <doctest/doctest.h>
#include "../test_data.hpp"

#include "gguf_bytes.hpp"
#include "parser_checks.hpp"

#include <luminal/io/gguf.hpp>
#include <luminal/io/json.hpp>

#include <atomic>
#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <unistd.h>
#include <variant>
#include <vector>

namespace {

using namespace luminal;
using namespace luminal::io;
namespace fs = std::filesystem;

const fs::path gguf_data = luminal_test::data_dir() / "gguf";

const Json& expected_json() {
    static const Json expected = parse_json(read_text_file(gguf_data / "expected.json"), "expected.json");
    return expected;
}

std::string file_bytes(const fs::path& path) { return read_text_file(path); }

using gguf_test::GgufBytes;

constexpr std::uint32_t f32_id = 0;
constexpr std::uint32_t q4_0_id = 2;

// One u32 key and one F32 tensor [1, 2, 3, 4].
std::string minimal_file() {
    return GgufBytes{}
        .header(1, 1)
        .key("answer", GgufValueType::U32)
        .u32(42)
        .tensor_info("weight", {4}, f32_id, 0)
        .pad_to(32)
        .f32_data({1, 2, 3, 4})
        .bytes;
}

using parser_checks::as_bytes;
using parser_checks::error_of;

void check_gguf_rejected(const std::string& file, std::initializer_list<std::string_view> fragments) {
    parser_checks::check_rejected<GgufView>(file, "bad.gguf", fragments);
}

using parser_checks::contains;

// A scalar as expected.json writes it: floats as their bit patterns.
template <typename T>
bool equals_expected(const T& value, const Json& expected) {
    if constexpr (std::is_same_v<T, float>) return std::bit_cast<std::uint32_t>(value) == expected.get<std::uint32_t>();
    else if constexpr (std::is_same_v<T, double>) return std::bit_cast<std::uint64_t>(value) == expected.get<std::uint64_t>();
    else if constexpr (std::is_same_v<T, std::string_view>) return value == expected.get<std::string>();
    else return value == expected.get<T>();
}

void check_array(const GgufArray& array, const Json& expected) {
    CHECK(name_of(array.element_type()) == expected["element_type"].get<std::string>());
    const Json& elements = expected["elements"];
    REQUIRE(array.size() == elements.size());
    std::visit(
        [&](const auto& values) {
            using T = typename std::remove_cvref_t<decltype(values)>::value_type;
            for (std::size_t i = 0; i < values.size(); ++i) {
                INFO("element ", i);
                if constexpr (std::is_same_v<T, GgufArray>) check_array(values[i], elements[i]);
                else CHECK(equals_expected<T>(values[i], elements[i]));
            }
        },
        array.elements());
}

void check_metadata(const GgufMetadata& metadata, const Json& expected) {
    REQUIRE(metadata.size() == expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
        const GgufMetadata::Entry& entry = metadata.entries()[i];
        INFO("metadata ", entry.key);
        CHECK(entry.key == expected[i]["key"].get<std::string>());
        CHECK(name_of(entry.value.type()) == expected[i]["type"].get<std::string>());
        CHECK(metadata.find(entry.key) == &entry.value);
        std::visit(
            [&](const auto& value) {
                using T = std::remove_cvref_t<decltype(value)>;
                if constexpr (std::is_same_v<T, GgufArray>) check_array(value, expected[i]["value"]);
                else CHECK(equals_expected<T>(value, expected[i]["value"]));
            },
            entry.value.storage());
    }
}

// Checks the tensors against the reference; returns how many had their values
// compared.
int check_tensors(const GgufFile& file, const Json& expected) {
    REQUIRE(file.size() == expected.size());
    int compared = 0;
    for (std::size_t i = 0; i < expected.size(); ++i) {
        const GgufTensor& tensor = file.tensors()[i];
        const Json& entry = expected[i];
        INFO("tensor ", tensor.name);
        CHECK(tensor.name == entry["name"].get<std::string>());
        CHECK(&file.at(tensor.name) == &tensor);
        CHECK(name_of(tensor.type) == entry["type"].get<std::string>());
        const auto dims = entry["dims"].get<std::vector<std::int64_t>>();
        CHECK(tensor.dims == dims);
        CHECK(tensor.shape() == std::vector<std::int64_t>(dims.rbegin(), dims.rend()));
        CHECK(tensor.numel == entry["numel"].get<std::int64_t>());
        CHECK(file.view().data_offset() + tensor.offset == entry["file_offset"].get<std::uint64_t>());
        CHECK(tensor.file == file.path().string());
        if (!can_dequantize(tensor.type)) {
            const std::string message = error_of([&] { (void)dequantize(tensor); });
            CHECK(contains(message, tensor.name));
            CHECK(contains(message, name_of(tensor.type)));
            continue;
        }
        REQUIRE(entry.contains("values"));
        const auto bits = entry["values"].get<std::vector<std::uint32_t>>();
        const std::vector<float> values = dequantize(tensor);
        REQUIRE(values.size() == bits.size());
        int mismatches = 0;
        for (std::size_t j = 0; j < bits.size(); ++j)
            if (std::bit_cast<std::uint32_t>(values[j]) != bits[j] && mismatches++ < 5)
                CHECK_MESSAGE(false, "element ", j, ": ", values[j], " (bits ", std::bit_cast<std::uint32_t>(values[j]),
                              ") but the reference has bits ", bits[j]);
        CHECK(mismatches == 0);
        ++compared;
    }
    return compared;
}

// A fresh temp directory, removed with its contents.
struct GgufTempDir : parser_checks::TempDir {
    GgufTempDir() : parser_checks::TempDir("luminal_gguf_test") {}
};

}  // namespace

TEST_CASE("gguf: every metadata type and tensor type written by Python reads as the gguf package reads it") {
    const auto file = GgufFile::open(gguf_data / "types.gguf");
    const Json& expected = expected_json()["types.gguf"];
    CHECK(file.version() == expected["version"].get<std::uint32_t>());
    CHECK(file.alignment() == expected["alignment"].get<std::uint32_t>());
    CHECK(file.alignment() == gguf_default_alignment);  // no general.alignment key
    check_metadata(file.metadata(), expected["metadata"]);
    // F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K; I32 and IQ4_NL are rejected by name.
    CHECK(check_tensors(file, expected["tensors"]) == 13);
}

TEST_CASE("gguf: a custom alignment, a 3-D tensor and an empty tensor") {
    const auto file = GgufFile::open(gguf_data / "aligned64.gguf");
    const Json& expected = expected_json()["aligned64.gguf"];
    CHECK(file.alignment() == 64);
    CHECK(file.view().data_offset() % 64 == 0);
    check_metadata(file.metadata(), expected["metadata"]);
    CHECK(check_tensors(file, expected["tensors"]) == 3);
    CHECK(file.at("blk.0.attn_q.weight").shape() == std::vector<std::int64_t>{2, 3, 4});
    CHECK(file.at("empty").bytes.empty());
}

TEST_CASE("gguf: typed metadata getters") {
    const auto file = GgufFile::open(gguf_data / "types.gguf");
    const GgufMetadata& metadata = file.metadata();
    CHECK(metadata.get_u8("test.u8") == 200);
    CHECK(metadata.get_i8("test.i8") == -100);
    CHECK(metadata.get_u16("test.u16") == 60000);
    CHECK(metadata.get_i16("test.i16") == -30000);
    CHECK(metadata.get_u32("test.u32") == 4'000'000'000u);
    CHECK(metadata.get_i32("test.i32") == -2'000'000'000);
    CHECK(metadata.get_u64("test.u64") == (std::uint64_t{1} << 63) + 5);
    CHECK(metadata.get_i64("test.i64") == -(std::int64_t{1} << 62) - 3);
    CHECK(metadata.get_f32("test.f32") == 3.14159f);
    CHECK(metadata.get_f64("test.f64") == 2.718281828459045);
    CHECK(metadata.get_bool("test.bool_true"));
    CHECK_FALSE(metadata.get_bool("test.bool_false"));
    CHECK(metadata.get_string("general.architecture") == "luminal-test");
    CHECK(metadata.get_string("test.empty_string").empty());

    const auto& tokens = metadata.get_array<std::string_view>("tokenizer.ggml.tokens");
    REQUIRE(tokens.size() == 1000);
    CHECK(tokens[0] == "tok0");
    CHECK(tokens[999] == "tok999");
    CHECK(metadata.get_array<std::int8_t>("test.array.i8") == std::vector<std::int8_t>{-128, 0, 127});
    CHECK(metadata.get_array<bool>("test.array.bool") == std::vector<bool>{true, false, true});
    const auto& nested = metadata.get_array<GgufArray>("test.array.nested_i32");
    REQUIRE(nested.size() == 2);
    CHECK(*nested[1].get_if<std::int32_t>() == std::vector<std::int32_t>{-4, 5});
    CHECK(metadata.at("test.array.nested3").type_name() == "array of array of array of i32");

    CHECK(metadata.get_integer<std::uint32_t>("test.u8") == 200);
    CHECK(metadata.get_integer<std::int64_t>("test.i16") == -30000);
    CHECK(metadata.get_integer<std::uint64_t>("test.u64") == (std::uint64_t{1} << 63) + 5);

    const std::string wrong_type = error_of([&] { (void)metadata.get_u32("test.u64"); });
    CHECK(contains(wrong_type, "test.u64"));
    CHECK(contains(wrong_type, "is u64, expected u32"));
    CHECK(contains(wrong_type, file.path().string()));
    CHECK(contains(error_of([&] { (void)metadata.get_string("no.such.key"); }), "no metadata key 'no.such.key'"));
    CHECK(contains(error_of([&] { (void)metadata.get_array<std::int32_t>("test.array.string"); }),
                   "'test.array.string' is array of string, expected array of i32"));
    CHECK(contains(error_of([&] { (void)metadata.get_array<std::string_view>("test.string"); }),
                   "'test.string' is string, expected array"));
    CHECK(contains(error_of([&] { (void)metadata.get_integer<std::uint8_t>("test.u16"); }),
                   "'test.u16' = 60000 (u16) does not fit 8 bits unsigned"));
    CHECK(contains(error_of([&] { (void)metadata.get_integer<std::uint32_t>("test.i8"); }), "= -100 (i8)"));
    CHECK(contains(error_of([&] { (void)metadata.get_integer<int>("test.f32"); }),
                   "'test.f32' is f32, expected an integer"));
}

TEST_CASE("gguf: tensor lookup and dequantization errors name the tensor and file") {
    const auto file = GgufFile::open(gguf_data / "types.gguf");
    CHECK(file.find("nope") == nullptr);
    CHECK_FALSE(file.contains("nope"));
    const std::string missing = error_of([&] { (void)file.at("nope"); });
    CHECK(contains(missing, "no tensor named 'nope'"));
    CHECK(contains(missing, file.path().string()));

    std::vector<float> too_small(3);
    const std::string size = error_of([&] { dequantize_into(file.at("q4_0"), too_small); });
    CHECK(contains(size, "'q4_0' has 192 elements but the output holds 3"));
    CHECK(contains(error_of([&] { (void)dequantize(file.at("i32")); }), "'i32' is I32, which luminal cannot dequantize"));

    const GgufTensor& q8 = file.at("q8_0");
    std::vector<float> one_block(32);
    CHECK(contains(error_of([&] { dequantize_blocks(GgufType::Q8_0, q8.bytes.first(33), one_block); }),
                   "33 bytes of Q8_0 (blocks of 32 elements in 34 bytes) do not decode to 32 elements"));
    CHECK(contains(error_of([&] { dequantize_blocks(GgufType::IQ4_NL, q8.bytes.first(18), one_block); }),
                   "luminal cannot dequantize IQ4_NL"));
    dequantize_blocks(GgufType::Q8_0, q8.bytes.first(34), one_block);
    const std::vector<float> whole = dequantize(q8);
    CHECK(std::vector<float>(whole.begin(), whole.begin() + 32) == one_block);
}

TEST_CASE("gguf: version 2 has the same layout; others are rejected") {
    std::string bytes = file_bytes(gguf_data / "types.gguf");
    bytes[4] = 2;
    const auto v2 = GgufView::parse(as_bytes(bytes), "v2.gguf");
    CHECK(v2.version() == 2);
    CHECK(v2.size() == 15);
    CHECK(v2.metadata().get_u32("test.u32") == 4'000'000'000u);

    bytes[4] = 1;
    check_gguf_rejected(bytes, {"GGUF version 1 is not supported"});
    check_gguf_rejected(GgufBytes{}.raw("GGUF").u32(0x03000000).u64(0).u64(0).bytes,
                   {"version 50331648", "big-endian"});
}

TEST_CASE("gguf: a hand-built minimal file, and an empty array") {
    const std::string bytes = minimal_file();
    const auto view = GgufView::parse(as_bytes(bytes), "minimal.gguf");
    CHECK(view.metadata().get_u32("answer") == 42);
    CHECK(view.data_offset() == 96);
    CHECK(dequantize(view.at("weight")) == std::vector<float>{1, 2, 3, 4});

    const std::string empty_array = GgufBytes{}.header(0, 1).key("list", GgufValueType::Array).u32(4).u64(0).bytes;
    const auto with_array = GgufView::parse(as_bytes(empty_array), "empty_array.gguf");
    CHECK(with_array.metadata().get_array<std::uint32_t>("list").empty());
    CHECK(with_array.size() == 0);
}

TEST_CASE("gguf: every truncation of a valid file is an Error") {
    const std::string whole = file_bytes(gguf_data / "aligned64.gguf");
    for (std::size_t length = 0; length < whole.size(); ++length) {
        INFO("truncated to ", length, " bytes");
        CHECK_THROWS_AS((void)GgufView::parse(as_bytes(whole.substr(0, length)), "cut.gguf"), Error);
    }
    check_gguf_rejected(whole.substr(0, 10), {"file is 10 bytes, too short for the 24-byte GGUF header"});
    // Its 3 tensor infos need at least 72 bytes after the header.
    check_gguf_rejected(whole.substr(0, 50), {"tensor count 3 cannot fit in the 26 bytes left after byte 24"});
    check_gguf_rejected(whole.substr(0, 134), {"metadata 'test.note' at byte 130 needs 8 bytes but the file ends at byte 134"});
    check_gguf_rejected(whole.substr(0, 145), {"metadata 'test.note': string length 12 at byte 130 runs past the end of the "
                                          "file (145 bytes)"});
    check_gguf_rejected(whole.substr(0, 300), {"tensor 'empty'", "the file ends at byte 300"});
    check_gguf_rejected(whole.substr(0, 310), {"the data section would start at byte 320 (tensor infos end at 304, aligned "
                                          "to 64), past the end of the file (310 bytes)"});
    check_gguf_rejected(whole.substr(0, 320), {"tensor 'blk.0.attn_q.weight': 48 bytes at data offset 0 run past the end "
                                          "of the data section (0 bytes)"});
    check_gguf_rejected(whole.substr(0, 400), {"tensor 'q8': 68 bytes at data offset 64 run past the end of the data section (80 bytes)"});
}

TEST_CASE("gguf: malformed headers and metadata") {
    check_gguf_rejected("GGUX" + minimal_file().substr(4), {"bad magic", "47 47 55 58"});
    check_gguf_rejected(GgufBytes{}.header(1'000'000, 0).bytes, {"tensor count 1000000 cannot fit in the 0 bytes left"});
    check_gguf_rejected(GgufBytes{}.header(0, 5).key("k", GgufValueType::U8).u8(1).bytes,
                   {"metadata count 5 cannot fit in the 14 bytes left"});
    check_gguf_rejected(GgufBytes{}.header(0, 1).u64(1000).raw("abcdefgh").bytes,
                   {"key of metadata entry 0: string length 1000 at byte 24 runs past the end of the file (40 bytes)"});
    check_gguf_rejected(GgufBytes{}.header(0, 2).key("a.twenty.byte.key...", GgufValueType::U8).u8(1).raw("12345").bytes,
                   {"key of metadata entry 1 at byte 57 needs 8 bytes but the file ends at byte 62"});
    check_gguf_rejected(GgufBytes{}.header(0, 1).key("name", GgufValueType::String).u64(99).raw("x").bytes,
                   {"metadata 'name': string length 99"});
    check_gguf_rejected(GgufBytes{}.header(0, 1).str("odd").u32(13).u8(0).bytes,
                   {"metadata 'odd': unknown value type 13 at byte 35"});
    check_gguf_rejected(GgufBytes{}.header(0, 1).key("list", GgufValueType::Array).u32(99).u64(0).bytes,
                   {"metadata 'list': unknown value type 99"});
    check_gguf_rejected(GgufBytes{}.header(0, 1).key("list", GgufValueType::Array).u32(10).u64(std::uint64_t{1} << 60).u64(7).bytes,
                   {"metadata 'list': array count 1152921504606846976", "u64 takes at least 8 bytes"});
    check_gguf_rejected(GgufBytes{}.header(0, 1).key("flag", GgufValueType::Bool).u8(2).bytes,
                   {"metadata 'flag': bool at byte", "holds 2, not 0 or 1"});
    check_gguf_rejected(GgufBytes{}.header(0, 2).key("k", GgufValueType::U8).u8(1).key("k", GgufValueType::U8).u8(2).bytes,
                   {"metadata 'k' appears twice (entries 0 and 1)"});

    GgufBytes deep;
    deep.header(0, 1).key("deep", GgufValueType::Array);
    for (int level = 0; level < 9; ++level) deep.u32(static_cast<std::uint32_t>(GgufValueType::Array)).u64(1);
    deep.u32(0).u64(0);
    check_gguf_rejected(deep.bytes, {"metadata 'deep': arrays nested more than 8 deep"});
}

TEST_CASE("gguf: alignment must be a u32 power of two") {
    const auto with_alignment = [](GgufValueType type, std::uint32_t value) {
        return GgufBytes{}.header(0, 1).key("general.alignment", type).u32(value).bytes;
    };
    check_gguf_rejected(with_alignment(GgufValueType::U32, 0), {"general.alignment 0 is not a power of two"});
    check_gguf_rejected(with_alignment(GgufValueType::U32, 48), {"general.alignment 48 is not a power of two"});
    check_gguf_rejected(with_alignment(GgufValueType::I32, 32), {"general.alignment is i32, expected u32"});
    CHECK(GgufView::parse(as_bytes(with_alignment(GgufValueType::U32, 8)), "a.gguf").alignment() == 8);
}

TEST_CASE("gguf: malformed tensor infos") {
    const auto one_tensor = [](std::string_view name, std::initializer_list<std::uint64_t> dims, std::uint32_t type,
                               std::uint64_t offset, std::size_t data_bytes) {
        GgufBytes file;
        file.header(1, 0).tensor_info(name, dims, type, offset).pad_to(32);
        file.bytes.append(data_bytes, '\0');
        return file.bytes;
    };
    CHECK(GgufView::parse(as_bytes(one_tensor("ok", {32, 2}, q4_0_id, 0, 36)), "ok.gguf").at("ok").numel == 64);

    check_gguf_rejected(one_tensor("t", {4}, 4, 0, 16), {"tensor 't': unknown tensor type id 4"});
    check_gguf_rejected(one_tensor("t", {4}, 1000, 0, 16), {"unknown tensor type id 1000"});
    check_gguf_rejected(one_tensor("t", {1, 1, 1, 1, 1}, f32_id, 0, 4), {"tensor 't': 5 dimensions, more than ggml's 4"});
    check_gguf_rejected(one_tensor("t", {std::uint64_t{1} << 32, std::uint64_t{1} << 32}, f32_id, 0, 0),
                   {"tensor 't': dims [4294967296, 4294967296] have more than 2^63-1 elements"});
    check_gguf_rejected(one_tensor("t", {std::uint64_t{1} << 63}, f32_id, 0, 0),
                   {"dims [9223372036854775808] have more than 2^63-1 elements"});
    check_gguf_rejected(one_tensor("t", {std::uint64_t{1} << 62}, f32_id, 0, 0),
                   {"tensor 't': dims [4611686018427387904] of F32 take more than 2^64 bytes"});
    check_gguf_rejected(one_tensor("t", {31}, q4_0_id, 0, 18), {"a row of 31 elements is not whole Q4_0 blocks of 32"});
    check_gguf_rejected(one_tensor(std::string(65, 'n'), {4}, f32_id, 0, 16), {"name is 65 bytes, over the format's limit of 64"});
    check_gguf_rejected(one_tensor("t", {4}, f32_id, 4, 32), {"tensor 't': data offset 4 is not a multiple of the alignment 32"});
    check_gguf_rejected(one_tensor("t", {4}, f32_id, 64, 32),
                   {"tensor 't': 16 bytes at data offset 64 run past the end of the data section (32 bytes)"});
    check_gguf_rejected(one_tensor("t", {4}, f32_id, std::numeric_limits<std::uint64_t>::max() - 31, 32),
                   {"data offset 18446744073709551584 run past the end"});

    GgufBytes overlap;
    overlap.header(2, 0).tensor_info("a", {16}, f32_id, 0).tensor_info("b", {4}, f32_id, 32).pad_to(32);
    overlap.bytes.append(64, '\0');
    check_gguf_rejected(overlap.bytes, {"tensor 'b': bytes [32, 48) overlap tensor 'a' at [0, 64)"});

    GgufBytes twice;
    twice.header(2, 0).tensor_info("a", {4}, f32_id, 0).tensor_info("a", {4}, f32_id, 32).pad_to(32);
    twice.bytes.append(64, '\0');
    check_gguf_rejected(twice.bytes, {"tensor 'a' appears twice (tensor infos 0 and 1)"});
}

TEST_CASE("gguf: GgufFile::open names the path in its errors") {
    GgufTempDir dir;
    const fs::path path = dir.path / "broken.gguf";
    {
        std::ofstream out(path, std::ios::binary);
        out << "GGUF";
    }
    const std::string message = error_of([&] { (void)GgufFile::open(path); });
    CHECK(contains(message, path.string()));
    CHECK(contains(message, "too short"));
    CHECK(contains(error_of([&] { (void)GgufFile::open(dir.path / "missing.gguf"); }), "cannot open"));
}
