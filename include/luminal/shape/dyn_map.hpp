#pragma once
// Values of the dynamic dimensions ('s', 'p', ...) for one execution.
#include <array>
#include <bitset>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "luminal/core/error.hpp"

namespace luminal {

class DynMap {
public:
    DynMap() = default;
    DynMap(std::initializer_list<std::pair<char, std::int64_t>> entries) {
        for (auto [dim, value] : entries) set(dim, value);
    }

    void set(char dim, std::int64_t value) {
        check(valid_name(dim), "DynMap::set", "dimension name '{}' must be a letter", dim);
        check(value >= 0, "DynMap::set", "dimension '{}' set to negative size {}", dim, value);
        values_[slot(dim)] = value;
        present_.set(slot(dim));
    }
    std::optional<std::int64_t> get(char dim) const {
        if (!valid_name(dim) || !present_.test(slot(dim))) return std::nullopt;
        return values_[slot(dim)];
    }
    bool contains(char dim) const { return get(dim).has_value(); }
    std::int64_t at(char dim) const {
        auto value = get(dim);
        check(value.has_value(), "DynMap", "dynamic dimension '{}' is not set (call Graph::set_dim)", dim);
        return *value;
    }
    std::vector<std::pair<char, std::int64_t>> entries() const {
        std::vector<std::pair<char, std::int64_t>> out;
        for (std::size_t i = 0; i < values_.size(); ++i)
            if (present_.test(i)) out.emplace_back(static_cast<char>(i), values_[i]);
        return out;
    }
    // Whether every dimension set here has the same value in `other`.
    bool agrees_with(const DynMap& other) const {
        for (std::size_t i = 0; i < values_.size(); ++i)
            if (present_.test(i) && other.get(static_cast<char>(i)) != values_[i]) return false;
        return true;
    }
    friend bool operator==(const DynMap& a, const DynMap& b) {
        return a.present_ == b.present_ && a.entries() == b.entries();
    }

    static bool valid_name(char dim) {
        return (dim >= 'a' && dim <= 'z') || (dim >= 'A' && dim <= 'Z');
    }

private:
    static std::size_t slot(char dim) { return static_cast<unsigned char>(dim) & 127u; }
    std::array<std::int64_t, 128> values_{};
    std::bitset<128> present_;
};

}  // namespace luminal
