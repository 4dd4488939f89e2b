// The JSON field accessors and the file mapping under the model-file readers.
#include "luminal/io/json.hpp"
#include "luminal/io/mapped_file.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

using luminal::io::Json;
using luminal::io::json_optional;
using luminal::io::json_required;
using luminal::io::json_value_or;

TEST_CASE("typed fields: conversions, ranges and messages") {
    const Json object = luminal::io::parse_json(
        R"({"n": 7, "big": 3000000000, "neg": -1, "f": 1.0, "half": 1.5, "s": "x", "b": true, "z": null,
            "v": [1, 2, 3], "mixed": [1, "a"]})",
        "test.json");
    CHECK(json_required<int>(object, "n", "test.json") == 7);
    CHECK(json_required<std::int64_t>(object, "big", "test.json") == 3000000000LL);
    CHECK(json_required<int>(object, "f", "test.json") == 1);  // 1.0 is the integer 1
    CHECK(json_required<double>(object, "n", "test.json") == 7.0);
    CHECK(json_required<std::string>(object, "s", "test.json") == "x");
    CHECK(json_required<bool>(object, "b", "test.json"));
    CHECK(json_required<std::vector<int>>(object, "v", "test.json") == std::vector<int>{1, 2, 3});
    CHECK_FALSE(json_optional<int>(object, "z", "test.json").has_value());
    CHECK_FALSE(json_optional<int>(object, "absent", "test.json").has_value());
    CHECK(json_value_or<int>(object, "absent", 5, "test.json") == 5);

    CHECK_THROWS_WITH_AS(json_required<int>(object, "big", "test.json"),
                         "test.json: field 'big' must be an integer in range, got number 3000000000", luminal::Error);
    CHECK_THROWS_WITH_AS(json_required<std::uint32_t>(object, "neg", "test.json"),
                         "test.json: field 'neg' must be an integer in range, got number -1", luminal::Error);
    CHECK_THROWS_WITH_AS(json_required<int>(object, "half", "test.json"),
                         "test.json: field 'half' must be an integer in range, got number 1.5", luminal::Error);
    CHECK_THROWS_WITH_AS(json_required<bool>(object, "s", "test.json"),
                         "test.json: field 's' must be a boolean, got string \"x\"", luminal::Error);
    CHECK_THROWS_WITH_AS(json_required<std::vector<int>>(object, "mixed", "test.json"),
                         "test.json: field 'mixed' must be an array, got array [1,\"a\"]", luminal::Error);
    CHECK_THROWS_WITH_AS(json_required<int>(object, "z", "test.json"),
                         "test.json: missing required field 'z'", luminal::Error);
    CHECK_THROWS_WITH_AS(json_required<int>(Json::array(), "n", "test.json"),
                         "test.json: expected an object holding 'n', got array", luminal::Error);
}

TEST_CASE("parse errors give the byte offset") {
    CHECK_THROWS_WITH_AS(luminal::io::parse_json(R"({"a": 1,})", "bad.json"),
                         doctest::Contains("bad.json: not valid JSON (byte 9)"), luminal::Error);
    CHECK_THROWS_WITH_AS(luminal::io::parse_json("", "empty.json"), doctest::Contains("not valid JSON (byte 1)"),
                         luminal::Error);
    CHECK_THROWS_AS(luminal::io::parse_json("\"\xff\"", "utf8.json"), luminal::Error);
}

TEST_CASE("mapped files: contents, empty file, missing file, directory") {
    const auto dir = std::filesystem::temp_directory_path() / "luminal_test_mapped_file";
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "data.bin", std::ios::binary) << "abc";
    std::ofstream(dir / "empty.bin", std::ios::binary).flush();

    luminal::io::MappedFile file(dir / "data.bin");
    REQUIRE(file.size() == 3);
    CHECK(static_cast<char>(file.bytes()[1]) == 'b');
    luminal::io::MappedFile moved = std::move(file);
    CHECK(moved.size() == 3);
    CHECK(luminal::io::read_text_file(dir / "data.bin") == "abc");
    CHECK(luminal::io::MappedFile(dir / "empty.bin").bytes().empty());
    CHECK_THROWS_WITH_AS(luminal::io::MappedFile(dir / "missing.bin"),
                         doctest::Contains("missing.bin: cannot open: No such file or directory"), luminal::Error);
    CHECK_THROWS_WITH_AS(luminal::io::MappedFile{dir}, doctest::Contains("not a regular file"), luminal::Error);
    std::filesystem::remove_all(dir);
}
