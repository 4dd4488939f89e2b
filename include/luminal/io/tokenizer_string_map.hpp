#pragma once
// A string-keyed absl::flat_hash_map that is looked up with std::string_view
// without building a std::string (Debian's abseil has its own string_view type,
// so its default heterogeneous lookup does not accept std::string_view).
#include <absl/container/flat_hash_map.h>
#include <absl/hash/hash.h>
#include <absl/strings/string_view.h>

#include <string>
#include <string_view>

namespace luminal::io::tokenizer {

struct StringHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view text) const {
        return absl::Hash<absl::string_view>{}(absl::string_view(text.data(), text.size()));
    }
};

struct StringEqual {
    using is_transparent = void;
    bool operator()(std::string_view a, std::string_view b) const { return a == b; }
};

template <typename Value>
using StringMap = absl::flat_hash_map<std::string, Value, StringHash, StringEqual>;

}  // namespace luminal::io::tokenizer
