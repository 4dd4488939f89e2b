#pragma once
// Checks shared by the file-parser tests: a malformed input must be rejected
// with a luminal::Error naming the file and quoting the offending values;
// plus the small helpers those tests share (fixture JSON, substring checks).
#include <doctest/doctest.h>

#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <filesystem>
#include <initializer_list>
#include <luminal/core/error.hpp>
#include <luminal/io/json.hpp>
#include <luminal/io/mapped_file.hpp>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

namespace parser_checks {

inline bool contains(const std::string& text, std::string_view fragment) { return text.find(fragment) != std::string::npos; }

inline luminal::io::Json read_json(const std::filesystem::path& path) {
    return luminal::io::parse_json(luminal::io::read_text_file(path), path.string());
}

inline std::span<const std::byte> as_bytes(const std::string& s) {
    return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

// View::parse(file, name) fails with an Error whose message contains every fragment.
template <typename View>
void check_rejected(const std::string& file, const std::string& name,
                    std::initializer_list<std::string_view> fragments) {
    try {
        (void)View::parse(as_bytes(file), name);
        FAIL("parsed a malformed file");
    } catch (const luminal::Error& error) {
        const std::string message = error.what();
        CHECK(error.where() == name);
        for (std::string_view fragment : fragments) {
            INFO("message: ", message);
            CHECK(message.find(fragment) != std::string::npos);
        }
    }
}

// The message of the Error f() throws.
template <typename F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const luminal::Error& error) {
        return error.what();
    }
    FAIL("no Error thrown");
    return {};
}

// A fresh directory under the system temp dir, removed with its contents.
struct TempDir {
    std::filesystem::path path;
    explicit TempDir(const std::string& prefix) {
        static std::atomic<int> counter{0};
        path = std::filesystem::temp_directory_path() /
               (prefix + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
        std::filesystem::remove_all(path);
        std::filesystem::create_directories(path);
    }
    ~TempDir() {
        std::error_code ignored;
        std::filesystem::remove_all(path, ignored);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
};

}  // namespace parser_checks
