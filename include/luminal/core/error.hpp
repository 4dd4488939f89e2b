#pragma once
// luminal::Error: the one exception type users see. Messages name the offending
// tensors, shapes and values so a user can find the mistake without a debugger.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace luminal {

class Error : public std::runtime_error {
public:
    Error(std::string where, std::string what)
        : std::runtime_error(where.empty() ? what : where + ": " + what),
          where_(std::move(where)) {}

    // The API call or component that detected the problem (e.g. "matmul").
    const std::string& where() const noexcept { return where_; }

private:
    std::string where_;
};

// An error after which the runtime that raised it cannot be used again (a
// sticky device fault, a lost context): the search stops and rethrows it
// instead of moving on to the next candidate.
class FatalError : public Error {
public:
    using Error::Error;
};

// Throws Error(where, formatted message) when `condition` is false.
template <typename... Args>
void check(bool condition, const char* where, fmt::format_string<Args...> format, Args&&... args) {
    if (!condition) throw Error(where, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace luminal
