// The safetensors reader, writer and sharded model store.
//
// References are independent of luminal: files written by the Python
// safetensors package with values torch read back (tools/gen_safetensors_fixtures.py
// -> tests/data/safetensors/expected.json), byte strings derived by hand, and
// broken files assembled byte by byte here.
#include <doctest/doctest.h>
#include "../test_data.hpp"

#include "parser_checks.hpp"

#include <luminal/io/safetensors.hpp>
#include <luminal/io/safetensors_convert.hpp>
#include <luminal/io/safetensors_model.hpp>
#include <luminal/io/safetensors_writer.hpp>

#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

using namespace luminal;
using namespace luminal::io;
namespace fs = std::filesystem;

const fs::path safetensors_data = luminal_test::data_dir() / "safetensors";

Json expected_values() { return parse_json(read_text_file(safetensors_data / "expected.json"), "expected.json"); }

// A fresh temp directory, removed with its contents.
struct SafetensorsTempDir : parser_checks::TempDir {
    SafetensorsTempDir() : parser_checks::TempDir("luminal_safetensors_test") {}
};

void write_bytes(const fs::path& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    REQUIRE(out.good());
}

std::string le64(std::uint64_t v) {
    std::string out;
    for (int i = 0; i < 8; ++i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
    return out;
}

// A safetensors file assembled by hand: length, header text, data bytes.
std::string raw_file(const std::string& header, const std::string& data) { return le64(header.size()) + header + data; }

using parser_checks::as_bytes;
using parser_checks::error_of;

void check_safetensors_rejected(const std::string& file, std::initializer_list<std::string_view> fragments) {
    parser_checks::check_rejected<SafetensorsView>(file, "bad.safetensors", fragments);
}

std::uint32_t bits_of_float(float v) { return std::bit_cast<std::uint32_t>(v); }

// Checks one tensor against its entry in expected.json.
void check_against_torch(const SafetensorsTensor& tensor, const Json& expected) {
    INFO("tensor ", tensor.name);
    CHECK(name_of(tensor.stored_dtype) == expected["dtype"].get<std::string>());
    CHECK(tensor.shape == expected["shape"].get<std::vector<std::int64_t>>());
    if (expected.contains("f32_bits")) {
        const auto bits = expected["f32_bits"].get<std::vector<std::uint32_t>>();
        const std::vector<float> values = to_f32(tensor);
        REQUIRE(values.size() == bits.size());
        for (std::size_t i = 0; i < bits.size(); ++i) CHECK(bits_of_float(values[i]) == bits[i]);
        const HostBuffer buffer = convert(tensor, DType::F32);
        REQUIRE(buffer.floats.size() == bits.size());
        for (std::size_t i = 0; i < bits.size(); ++i) {
            const float v = static_cast<float>(buffer.floats[i]);
            if (std::isnan(v)) CHECK((bits[i] & 0x7FFFFFFFu) > 0x7F800000u);
            else CHECK(bits_of_float(v) == bits[i]);
        }
    } else {
        const auto values = expected["values"].get<std::vector<std::int64_t>>();
        CHECK(to_vector<std::int64_t>(tensor) == values);
        CHECK(convert(tensor, DType::I64).ints == values);
    }
}

}  // namespace

TEST_CASE("safetensors: every dtype written by Python reads as torch reads it") {
    const auto file = SafetensorsFile::open(safetensors_data / "dtypes.safetensors");
    const Json expected = expected_values()["dtypes.safetensors"];
    REQUIRE(file.size() == expected.size());
    for (const auto& [name, entry] : expected.items()) check_against_torch(file.at(name), entry);

    CHECK(file.metadata() == SafetensorsMetadata{{"format", "pt"}});
    // Data order, as the Python writer laid the tensors out (widest dtype first).
    const std::vector<std::string_view> order{"i64", "f32.random", "f32.special", "scalar", "i32", "bf16.random",
                                              "bf16.special", "empty", "f16.special", "u8", "bool"};
    CHECK(file.names() == order);
    CHECK(file.view().header_length() % 8 == 0);

    const SafetensorsTensor& scalar = file.at("scalar");
    CHECK(scalar.shape.empty());
    CHECK(scalar.numel == 1);
    CHECK(file.at("empty").numel == 0);
    CHECK(file.at("empty").bytes.empty());
    CHECK(to_f32(file.at("empty")).empty());
    CHECK(file.at("bool").dtype() == DType::Bool);
    CHECK(to_vector<std::uint8_t>(file.at("bool")) == std::vector<std::uint8_t>{1, 0, 0, 1});
    CHECK(to_f32(file.at("bool")) == std::vector<float>{1, 0, 0, 1});
}

TEST_CASE("safetensors: native dtypes are read in place, without a copy") {
    const auto file = SafetensorsFile::open(safetensors_data / "dtypes.safetensors");
    const SafetensorsTensor& f32 = file.at("f32.random");
    const std::span<const float> in_place = f32.values<float>();
    CHECK(static_cast<const void*>(in_place.data()) == static_cast<const void*>(f32.bytes.data()));
    CHECK(std::vector<float>(in_place.begin(), in_place.end()) == to_f32(f32));
    CHECK(file.at("i64").values<std::int64_t>()[2] == std::numeric_limits<std::int64_t>::max());
    CHECK(file.at("i32").values<std::int32_t>()[4] == std::numeric_limits<std::int32_t>::min());
    CHECK(file.at("u8").values<std::uint8_t>()[4] == 255);
    const std::string message = error_of([&] { (void)file.at("bf16.random").values<float>(); });
    CHECK(message.find("'bf16.random' is BF16") != std::string::npos);
}

TEST_CASE("safetensors: conversions are exact or an Error naming the element") {
    const auto file = SafetensorsFile::open(safetensors_data / "dtypes.safetensors");
    // Widening is always exact.
    CHECK(to_vector<std::int64_t>(file.at("i32"))[3] == 2147483647);
    CHECK(to_vector<double>(file.at("i32"))[4] == -2147483648.0);
    CHECK(to_vector<std::int32_t>(file.at("u8")) == std::vector<std::int32_t>{0, 1, 127, 128, 255});
    // i64 -> i32 works value by value: index 2 is INT64_MAX.
    std::string message = error_of([&] { (void)to_vector<std::int32_t>(file.at("i64")); });
    CHECK(message.find("tensor 'i64' (I64): element 2 = 9223372036854775807 is not exactly representable as i32") !=
          std::string::npos);
    CHECK(message.find("dtypes.safetensors") != std::string::npos);
    // 2147483647 needs 31 significant bits; f32 has 24.
    message = error_of([&] { (void)to_f32(file.at("i32")); });
    CHECK(message.find("element 3 = 2147483647 is not exactly representable as f32") != std::string::npos);
    // 0.1f (element 4 of f32.special) is not a bf16 value; 0, -0, 1, -2.5 are.
    message = error_of([&] { (void)convert(file.at("f32.special"), DType::BF16); });
    CHECK(message.find("element 4 = 0.10000000149011612 is not exactly representable as bf16") != std::string::npos);
    // u8 -> bool only for 0 and 1.
    message = error_of([&] { (void)convert(file.at("u8"), DType::Bool); });
    CHECK(message.find("element 2 = 127") != std::string::npos);
    // bf16 -> f16: -65504 rounded to bf16's 8 significant bits is -65536, past f16's
    // largest finite value; the elements before it (0.1 and 1e-3 in bf16 included) fit.
    message = error_of([&] { (void)convert(file.at("bf16.special"), DType::F16); });
    CHECK(message.find("element 10 = -65536 is not exactly representable as f16") != std::string::npos);
    // f16 -> bf16: 0.1 in f16 is 0.0999755859375 = 1.100110011b x 2^-4, 10 bits after the point.
    message = error_of([&] { (void)convert(file.at("f16.special"), DType::BF16); });
    CHECK(message.find("element 4 = 0.0999755859375 is not exactly representable as bf16") != std::string::npos);
    // Integral floats become integers.
    const HostBuffer ints = convert(file.at("scalar"), DType::F16);
    CHECK(ints.floats == std::vector<double>{-7.25});
    CHECK(error_of([&] { (void)convert(file.at("scalar"), DType::I32); }).find("element 0 = -7.25") != std::string::npos);
}

TEST_CASE("safetensors: the format's other dtypes open; converting them is exact or an Error") {
    // I8 [-1, 127]; F64 [0.5]; U16 [65535]; F8_E4M3 [0x38 (1.0)]; F4 packs two per byte.
    const std::string header =
        R"({"i8":{"dtype":"I8","shape":[2],"data_offsets":[0,2]},)"
        R"("f64":{"dtype":"F64","shape":[1],"data_offsets":[2,10]},)"
        R"("u16":{"dtype":"U16","shape":[1],"data_offsets":[10,12]},)"
        R"("fp8":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[12,13]},)"
        R"("f4":{"dtype":"F4","shape":[2],"data_offsets":[13,14]}})";
    const std::string data = std::string("\xFF\x7F", 2) + std::string("\x00\x00\x00\x00\x00\x00\xE0\x3F", 8) +
                             std::string("\xFF\xFF", 2) + std::string("\x38", 1) + std::string("\x21", 1);
    const std::string bytes = raw_file(header, data);
    const auto view = SafetensorsView::parse(as_bytes(bytes), "others.safetensors");
    CHECK(view.size() == 5);
    CHECK(to_f32(view.at("i8")) == std::vector<float>{-1, 127});
    CHECK(to_f32(view.at("f64")) == std::vector<float>{0.5f});
    CHECK(to_vector<std::int32_t>(view.at("u16")) == std::vector<std::int32_t>{65535});
    CHECK(error_of([&] { (void)to_vector<std::uint8_t>(view.at("u16")); }).find("element 0 = 65535") !=
          std::string::npos);
    CHECK(view.at("fp8").bytes.size() == 1);
    CHECK(!view.at("fp8").luminal_dtype().has_value());
    CHECK(error_of([&] { (void)view.at("fp8").dtype(); }).find("tensor 'fp8' is F8_E4M3") != std::string::npos);
    CHECK(error_of([&] { (void)to_f32(view.at("fp8")); }).find("tensor 'fp8' is F8_E4M3, which luminal cannot convert") !=
          std::string::npos);
    CHECK(view.at("f4").numel == 2);
    CHECK(view.at("f4").bytes.size() == 1);
}

TEST_CASE("safetensors: a header length that is not a multiple of 8 still reads") {
    // 1.5f = 0x3FC00000 behind a 54-byte header: misaligned for in-place access.
    const std::string header = R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
    REQUIRE(header.size() % 4 != 0);
    const std::string bytes = raw_file(header, std::string("\x00\x00\xC0\x3F", 4));
    std::vector<std::byte> aligned(bytes.size());  // vector storage: aligned for the 8-byte length
    std::memcpy(aligned.data(), bytes.data(), bytes.size());
    const auto view = SafetensorsView::parse(aligned, "odd.safetensors");
    CHECK(to_f32(view.at("w")) == std::vector<float>{1.5f});
    CHECK(error_of([&] { (void)view.at("w").values<float>(); }).find("not aligned") != std::string::npos);
}

TEST_CASE("safetensors: malformed files are Errors naming the numbers") {
    const std::string ok_header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
    const std::string eight(8, '\x01');

    SUBCASE("shorter than the length field") { check_safetensors_rejected(std::string(5, '\0'), {"file is 5 bytes"}); }
    SUBCASE("empty") { check_safetensors_rejected("", {"file is 0 bytes"}); }
    SUBCASE("header length past the end of the file") {
        check_safetensors_rejected(le64(1000) + ok_header, {"header length 1000 runs past the end of the file (62 bytes, so at most 54)"});
    }
    SUBCASE("header length over the crate's limit") {
        check_safetensors_rejected(le64(100'000'001) + ok_header, {"header length 100000001 exceeds", "100000000"});
        check_safetensors_rejected(le64(std::numeric_limits<std::uint64_t>::max()) + ok_header, {"18446744073709551615"});
    }
    SUBCASE("header not JSON") {
        check_safetensors_rejected(raw_file("{\"a\":", ""), {"not valid JSON"});
        check_safetensors_rejected(raw_file(R"({"a":{"dtype":"U8","shape":[1e999],"data_offsets":[0,0]}})", ""),
                       {"not valid JSON", "1e999"});
    }
    SUBCASE("header not UTF-8") { check_safetensors_rejected(raw_file("{\"\xFF\":{}}", ""), {"not valid JSON"}); }
    SUBCASE("header not an object") { check_safetensors_rejected(raw_file("[1,2]", ""), {"must be a JSON object, got array"}); }
    SUBCASE("file truncated inside the data") {
        check_safetensors_rejected(raw_file(ok_header, eight.substr(0, 6)),
                       {"tensor 'a': data_offsets [0, 8] run past the end of the data section (6 bytes)"});
    }
    SUBCASE("offsets out of range") {
        check_safetensors_rejected(raw_file(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[100,104]}})", eight),
                       {"tensor 'a': data_offsets [100, 104] run past the end of the data section (8 bytes)"});
    }
    SUBCASE("offsets overlapping") {
        check_safetensors_rejected(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                eight + "\x02\x02\x02\x02"),
                       {"tensor 'b': data_offsets [4, 12] overlap tensor 'a' at [0, 8]"});
    }
    SUBCASE("a gap between tensors") {
        check_safetensors_rejected(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                                eight + "\x02\x02\x02\x02"),
                       {"data bytes [4, 8) belong to no tensor (the next, 'b', starts at 8)"});
    }
    SUBCASE("bytes after the last tensor") {
        check_safetensors_rejected(raw_file(ok_header, eight + "xyz"), {"data section is 11 bytes but the tensors end at byte 8: 3"});
    }
    SUBCASE("end before begin") {
        check_safetensors_rejected(raw_file(R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[8,0]}})", eight),
                       {"tensor 'a': data_offsets [8, 0] end before they begin"});
    }
    SUBCASE("unknown dtype") {
        check_safetensors_rejected(raw_file(R"({"a":{"dtype":"Q4","shape":[8],"data_offsets":[0,8]}})", eight),
                       {"tensor 'a': unknown dtype 'Q4'", "BF16"});
        check_safetensors_rejected(raw_file(R"({"a":{"dtype":"f32","shape":[2],"data_offsets":[0,8]}})", eight),
                       {"unknown dtype 'f32'"});
    }
    SUBCASE("shape and byte length disagree") {
        check_safetensors_rejected(raw_file(R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", std::string(20, '\0')),
                       {"tensor 'a': shape [2, 3] of F32 needs 24 bytes but data_offsets [0, 20] hold 20"});
    }
    SUBCASE("element count overflows") {
        check_safetensors_rejected(raw_file(R"({"a":{"dtype":"U8","shape":[1099511627776,1099511627776],"data_offsets":[0,8]}})", eight),
                       {"tensor 'a': shape [1099511627776, 1099511627776] has more than 2^64 elements"});
        check_safetensors_rejected(raw_file(R"({"a":{"dtype":"F32","shape":[2147483648,2147483648],"data_offsets":[0,8]}})", eight),
                       {"shape [2147483648, 2147483648] of F32 is more than 2^64 bits"});
        check_safetensors_rejected(raw_file(R"({"a":{"dtype":"U8","shape":[9223372036854775808],"data_offsets":[0,8]}})", eight),
                       {"dimension above 2^63-1"});
    }
    SUBCASE("sub-byte dtype ending mid-byte") {
        check_safetensors_rejected(raw_file(R"({"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", "\x01\x02"),
                       {"shape [3] of F4 is 12 bits, not a whole number of bytes"});
    }
    SUBCASE("entries hold exactly dtype, shape and data_offsets") {
        check_safetensors_rejected(raw_file(R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8],"x":1}})", eight),
                       {"tensor 'a': unexpected field 'x'"});
        check_safetensors_rejected(raw_file(R"({"a":{"dtype":"U8","data_offsets":[0,8]}})", eight),
                       {"tensor 'a': missing field 'shape'"});
        check_safetensors_rejected(raw_file(R"({"a":[1]})", eight), {"tensor 'a': entry must be an object"});
        check_safetensors_rejected(raw_file(R"({"a":{"dtype":8,"shape":[8],"data_offsets":[0,8]}})", eight),
                       {"tensor 'a': dtype must be a string, got number 8"});
        check_safetensors_rejected(raw_file(R"({"a":{"dtype":"U8","shape":[-8],"data_offsets":[0,8]}})", eight),
                       {"tensor 'a': shape must hold non-negative integers, got number -8"});
        check_safetensors_rejected(raw_file(R"({"a":{"dtype":"U8","shape":[8.0],"data_offsets":[0,8]}})", eight),
                       {"shape must hold non-negative integers, got number 8.0"});
        check_safetensors_rejected(raw_file(R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8,8]}})", eight),
                       {"tensor 'a': data_offsets must be [begin, end], got [0,8,8]"});
    }
    SUBCASE("a key given twice") {
        check_safetensors_rejected(raw_file(R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},)"
                                R"("a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}})", eight),
                       {"header repeats the key 'a'"});
        check_safetensors_rejected(raw_file(R"({"a":{"dtype":"U8","dtype":"I8","shape":[8],"data_offsets":[0,8]}})", eight),
                       {"header repeats the key 'dtype'"});
    }
    SUBCASE("__metadata__ is a string map") {
        check_safetensors_rejected(raw_file(R"({"__metadata__":{"k":1}})", ""), {"'__metadata__' entry 'k' must be a string, got number 1"});
        check_safetensors_rejected(raw_file(R"({"__metadata__":"x"})", ""), {"'__metadata__' must be an object of strings, got string"});
    }
}

TEST_CASE("safetensors: what the reference implementation accepts, so do we") {
    // Zero-size tensors share an offset; a null __metadata__ means none;
    // leading and trailing whitespace pad the header; an empty file has no tensors.
    const std::string bytes = raw_file(
        R"( {"__metadata__":null,"e1":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},)"
        R"("e2":{"dtype":"I64","shape":[4,0],"data_offsets":[0,0]},"b":{"dtype":"U8","shape":[],"data_offsets":[0,1]}}   )",
        "\x09");
    const auto view = SafetensorsView::parse(as_bytes(bytes), "fine.safetensors");
    CHECK(view.names() == std::vector<std::string_view>{"e1", "e2", "b"});
    CHECK(view.metadata().empty());
    CHECK(to_vector<std::uint8_t>(view.at("b")) == std::vector<std::uint8_t>{9});
    CHECK(view.at("e2").shape == std::vector<std::int64_t>{4, 0});

    const std::string empty = raw_file("{}      ", "");
    CHECK(SafetensorsView::parse(as_bytes(empty), "empty.safetensors").size() == 0);

    const std::string message = error_of([&] { (void)view.at("nope"); });
    CHECK(message == "fine.safetensors: no tensor named 'nope' (the file holds 3 tensors)");
    CHECK(view.find("nope") == nullptr);
}

TEST_CASE("safetensors writer: the bytes match a hand-derived file") {
    const float a[] = {1.0f, -2.0f};
    const std::uint8_t b[] = {7};
    const SafetensorsRecord records[] = {
        {"a", SafetensorsDType::F32, {2}, std::as_bytes(std::span(a))},
        {"b", SafetensorsDType::U8, {}, std::as_bytes(std::span(b))},
    };
    const std::vector<std::byte> bytes = serialize_safetensors(records, {{"k", "v"}});
    // 130 bytes of JSON, padded with 6 spaces to 136 = 0x88.
    const std::string expected = std::string("\x88\0\0\0\0\0\0\0", 8) +
                                 R"({"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                 R"("b":{"dtype":"U8","shape":[],"data_offsets":[8,9]}})" +
                                 "      " + std::string("\x00\x00\x80\x3F\x00\x00\x00\xC0\x07", 9);
    CHECK(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()) == expected);

    SafetensorsTempDir dir;
    write_safetensors(dir.path / "w.safetensors", records, {{"k", "v"}});
    CHECK(read_text_file(dir.path / "w.safetensors") == expected);
}

TEST_CASE("safetensors writer: round trip through the reader, every dtype") {
    const std::vector<std::uint16_t> bf16{0x3F80, 0xC020, 0x0001, 0x7F80};  // 1, -2.5, smallest subnormal, inf
    const std::vector<std::uint16_t> f16{0x3C00, 0x0001, 0xFC00};            // 1, 2^-24, -inf
    const std::vector<std::int64_t> i64{-5, 1LL << 50};
    const std::vector<std::int32_t> i32{-7, 9, 11};
    const std::vector<float> f32{0.25f, -1e30f};
    const std::vector<std::uint8_t> u8{3, 200}, flags{1, 0, 1};
    const SafetensorsRecord records[] = {
        {"i64", SafetensorsDType::I64, {2}, std::as_bytes(std::span(i64))},
        {"f32", SafetensorsDType::F32, {1, 2}, std::as_bytes(std::span(f32))},
        {"i32", SafetensorsDType::I32, {3, 1}, std::as_bytes(std::span(i32))},
        {"bf16", safetensors_dtype_of(DType::BF16), {2, 2}, std::as_bytes(std::span(bf16))},
        {"f16", SafetensorsDType::F16, {3}, std::as_bytes(std::span(f16))},
        {"u8", SafetensorsDType::U8, {2}, std::as_bytes(std::span(u8))},
        {"flags", SafetensorsDType::BOOL, {3}, std::as_bytes(std::span(flags))},
    };
    SafetensorsTempDir dir;
    write_safetensors(dir.path / "all.safetensors", records, {{"format", "pt"}, {"note", "round trip"}});
    const auto file = SafetensorsFile::open(dir.path / "all.safetensors");
    CHECK(file.metadata() == SafetensorsMetadata{{"format", "pt"}, {"note", "round trip"}});
    CHECK(file.names() == std::vector<std::string_view>{"i64", "f32", "i32", "bf16", "f16", "u8", "flags"});
    CHECK(file.at("i32").shape == std::vector<std::int64_t>{3, 1});
    CHECK(to_vector<std::int64_t>(file.at("i64")) == i64);
    CHECK(to_f32(file.at("f32")) == f32);
    CHECK(to_vector<std::int32_t>(file.at("i32")) == i32);
    CHECK(to_f32(file.at("bf16")) == std::vector<float>{1.0f, -2.5f, std::ldexp(1.0f, -133), INFINITY});
    CHECK(to_f32(file.at("f16")) == std::vector<float>{1.0f, std::ldexp(1.0f, -24), -INFINITY});
    CHECK(to_vector<std::uint8_t>(file.at("u8")) == u8);
    CHECK(to_vector<std::uint8_t>(file.at("flags")) == flags);
    CHECK(file.at("flags").dtype() == DType::Bool);
}

TEST_CASE("safetensors writer: invalid records are Errors") {
    const std::vector<float> three{1, 2, 3};
    const auto bytes = std::as_bytes(std::span(three));
    auto message_for = [&](std::vector<SafetensorsRecord> records) {
        return error_of([&] { (void)serialize_safetensors(records); });
    };
    CHECK(message_for({{"w", SafetensorsDType::F32, {2, 2}, bytes}}) ==
          "serialize_safetensors: tensor 'w': shape [2, 2] of F32 needs 16 bytes but 12 were given");
    CHECK(message_for({{"w", SafetensorsDType::F32, {3}, bytes}, {"w", SafetensorsDType::F32, {3}, bytes}})
              .find("tensor 'w' is given twice") != std::string::npos);
    CHECK(message_for({{"w", SafetensorsDType::F32, {-3}, bytes}}).find("negative dimension") != std::string::npos);
    CHECK(message_for({{"__metadata__", SafetensorsDType::F32, {3}, bytes}}).find("reserved") != std::string::npos);
    CHECK(message_for({{"w", SafetensorsDType::F4, {3}, bytes.first(2)}}).find("12 bits") != std::string::npos);
    CHECK(message_for({{"w", SafetensorsDType::F32, {1LL << 62, 1LL << 62}, bytes}}).find("more than 2^64 bits") !=
          std::string::npos);
    CHECK(message_for({{"\xFF", SafetensorsDType::F32, {3}, bytes}}).find("cannot encode the header") != std::string::npos);
    CHECK(error_of([&] {
              const SafetensorsRecord ok{"w", SafetensorsDType::F32, {3}, bytes};
              write_safetensors("/nonexistent-dir/x.safetensors", std::span(&ok, 1));
          }).find("/nonexistent-dir/x.safetensors: cannot create") != std::string::npos);
}

TEST_CASE("safetensors model: two shards behind model.safetensors.index.json") {
    const Json expected = expected_values()["sharded"];
    const auto model = SafetensorsModel::open(safetensors_data / "sharded");
    CHECK(model.size() == expected.size());
    CHECK(model.shards().size() == 2);
    for (const auto& [name, entry] : expected.items()) check_against_torch(model.at(name), entry);
    CHECK(model.at("lm_head.weight").file.ends_with("model-00002-of-00002.safetensors"));
    CHECK(model.at("model.embed_tokens.weight").file.ends_with("model-00001-of-00002.safetensors"));
    // Two 6x4 bf16, two 4-element f32, one 8x4 f16: 2*48 + 2*16 + 64 bytes.
    CHECK(model.metadata().at("total_size") == "192");
    CHECK(model.names().front() == "lm_head.weight");
    const std::string message = error_of([&] { (void)model.at("model.layers.1.mlp.up_proj.weight"); });
    CHECK(message.find("no tensor named 'model.layers.1.mlp.up_proj.weight' in the model (5 tensors in 2 shards)") !=
          std::string::npos);
    CHECK(message.find("model.safetensors.index.json") != std::string::npos);

    // The index file itself opens the same model.
    CHECK(SafetensorsModel::open(safetensors_data / "sharded" / "model.safetensors.index.json").size() == expected.size());
}

TEST_CASE("safetensors model: a single file, by path or as a directory's model.safetensors") {
    const auto by_path = SafetensorsModel::open(safetensors_data / "dtypes.safetensors");
    CHECK(by_path.size() == 11);
    CHECK(by_path.metadata() == SafetensorsMetadata{{"format", "pt"}});
    SafetensorsTempDir dir;
    fs::copy_file(safetensors_data / "dtypes.safetensors", dir.path / "model.safetensors");
    const auto by_dir = SafetensorsModel::open(dir.path);
    CHECK(by_dir.size() == 11);
    CHECK(to_f32(by_dir.at("scalar")) == std::vector<float>{-7.25f});
}

TEST_CASE("safetensors model: broken checkpoints are Errors naming tensor and shard") {
    const std::string one_byte = raw_file(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", "\x05");
    const std::string two = raw_file(R"({"v":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                                     R"("w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                                     "\x06\x07");
    SafetensorsTempDir dir;
    write_bytes(dir.path / "a.safetensors", one_byte);
    write_bytes(dir.path / "b.safetensors", two);
    auto open_with = [&](const std::string& index) {
        write_bytes(dir.path / "model.safetensors.index.json", index);
        return error_of([&] { (void)SafetensorsModel::open(dir.path); });
    };
    SUBCASE("missing shard") {
        const std::string message = open_with(R"({"weight_map":{"w":"a.safetensors","x":"c.safetensors"}})");
        CHECK(message.find("shard 'c.safetensors' (named for tensor 'x') does not exist") != std::string::npos);
        CHECK(message.find("model.safetensors.index.json") != std::string::npos);
    }
    SUBCASE("a tensor the index lists is absent from its shard") {
        CHECK(open_with(R"({"weight_map":{"w":"a.safetensors","ghost":"a.safetensors"}})")
                  .find("the index puts tensor 'ghost' in a.safetensors, which does not hold it") != std::string::npos);
    }
    SUBCASE("the same tensor in two shards") {
        // Shards open in the sorted weight map's order: v's b.safetensors first.
        CHECK(open_with(R"({"weight_map":{"w":"a.safetensors","v":"b.safetensors"}})")
                  .find("tensor 'w' is in two shards: b.safetensors and a.safetensors") != std::string::npos);
    }
    SUBCASE("a shard outside the model directory") {
        CHECK(open_with(R"({"weight_map":{"w":"../a.safetensors"}})")
                  .find("names shard '../a.safetensors', which is not a path inside the model directory") !=
              std::string::npos);
    }
    SUBCASE("malformed index") {
        CHECK(open_with(R"({"metadata":{}})").find("missing required field 'weight_map'") != std::string::npos);
        CHECK(open_with(R"({"weight_map":["a.safetensors"]})").find("'weight_map' must be an object") != std::string::npos);
        CHECK(open_with(R"({"weight_map":{"w":3}})").find("weight_map['w'] must be a shard file name, got number 3") !=
              std::string::npos);
        CHECK(open_with(R"({"weight_map":)").find("not valid JSON") != std::string::npos);
    }
    SUBCASE("a broken shard names its file") {
        write_bytes(dir.path / "bad.safetensors", "\x01\x02");
        CHECK(open_with(R"({"weight_map":{"w":"bad.safetensors"}})").find("bad.safetensors: file is 2 bytes") !=
              std::string::npos);
    }
    SUBCASE("a valid index over both kinds of content") {
        write_bytes(dir.path / "b.safetensors", raw_file(R"({"v":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", "\x06"));
        write_bytes(dir.path / "model.safetensors.index.json", R"({"weight_map":{"w":"a.safetensors","v":"b.safetensors"}})");
        const auto model = SafetensorsModel::open(dir.path);
        CHECK(to_vector<std::uint8_t>(model.at("v")) == std::vector<std::uint8_t>{6});
        CHECK(to_vector<std::uint8_t>(model.at("w")) == std::vector<std::uint8_t>{5});
    }
    SUBCASE("a directory with neither file") {
        SafetensorsTempDir empty;
        CHECK(error_of([&] { (void)SafetensorsModel::open(empty.path); }).find("holds neither") != std::string::npos);
    }
}
