#pragma once
// The metadata of a GGUF file: key/value pairs whose values are scalars, strings
// or arrays (of any of these, arrays included). Strings are std::string_view
// into the parsed buffer, so a 50k-entry tokenizer vocabulary costs one view per
// token; they stay valid as long as the GgufView's buffer (or GgufFile) does.
//
// Getters are typed exactly: get_u32 on a value stored as u64 is an Error naming
// the key and both types, because the format stores what the writer chose and a
// silent conversion could hide a corrupt value. get_integer<T> accepts any
// integer type whose value fits T, for keys writers disagree on.
#include "luminal/core/error.hpp"

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace luminal::io {

// The format's value type ids.
enum class GgufValueType : std::uint32_t {
    U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, Bool = 7, String = 8, Array = 9,
    U64 = 10, I64 = 11, F64 = 12,
};

inline constexpr std::uint32_t gguf_value_type_count = 13;

constexpr std::string_view name_of(GgufValueType type) {
    constexpr std::string_view names[] = {"u8",  "i8",     "u16",   "i16", "u32", "i32", "f32",
                                          "bool", "string", "array", "u64", "i64", "f64"};
    const auto id = static_cast<std::uint32_t>(type);
    return id < gguf_value_type_count ? names[id] : "unknown";
}

class GgufArray;

namespace detail {

// The C++ type holding one value of each GgufValueType, in id order, so a
// variant's index() is the type id.
template <template <typename...> class Holder, template <typename> class Wrap>
using GgufValueTypes = Holder<Wrap<std::uint8_t>, Wrap<std::int8_t>, Wrap<std::uint16_t>, Wrap<std::int16_t>,
                              Wrap<std::uint32_t>, Wrap<std::int32_t>, Wrap<float>, Wrap<bool>, Wrap<std::string_view>,
                              Wrap<GgufArray>, Wrap<std::uint64_t>, Wrap<std::int64_t>, Wrap<double>>;

template <typename T>
using GgufSame = T;
template <typename T>
using GgufVectorOf = std::vector<T>;

template <typename T, typename Variant, std::size_t I = 0>
constexpr std::size_t gguf_variant_index() {
    if constexpr (I == std::variant_size_v<Variant>) return I;
    else if constexpr (std::is_same_v<std::variant_alternative_t<I, Variant>, T>) return I;
    else return gguf_variant_index<T, Variant, I + 1>();
}

}  // namespace detail

// The elements of one array, all of one type.
class GgufArray {
public:
    using Elements = detail::GgufValueTypes<std::variant, detail::GgufVectorOf>;

    GgufArray() = default;
    explicit GgufArray(Elements elements) : elements_(std::move(elements)) {}

    GgufValueType element_type() const { return static_cast<GgufValueType>(elements_.index()); }
    std::size_t size() const {
        return std::visit([](const auto& elements) { return elements.size(); }, elements_);
    }
    bool empty() const { return size() == 0; }

    // The elements if they are of type T (std::string_view for strings,
    // GgufArray for nested arrays), else nullptr.
    template <typename T>
    const std::vector<T>* get_if() const {
        return std::get_if<std::vector<T>>(&elements_);
    }
    const Elements& elements() const { return elements_; }

private:
    Elements elements_;
};

// One metadata value.
class GgufValue {
public:
    using Storage = detail::GgufValueTypes<std::variant, detail::GgufSame>;

    template <typename T>
    static constexpr bool holds_type = detail::gguf_variant_index<T, Storage>() < std::variant_size_v<Storage>;

    // The type id storing a T (T must be one of the format's value types).
    template <typename T>
        requires holds_type<T>
    static constexpr GgufValueType type_of = static_cast<GgufValueType>(detail::gguf_variant_index<T, Storage>());

    GgufValue() = default;
    template <typename T>
        requires holds_type<std::remove_cvref_t<T>>
    explicit GgufValue(T&& value) : storage_(std::forward<T>(value)) {}

    GgufValueType type() const { return static_cast<GgufValueType>(storage_.index()); }

    // "u32", "string", "array of string", "array of array of i32", ...
    std::string type_name() const {
        std::string name(name_of(type()));
        for (const GgufArray* array = get_if<GgufArray>(); array != nullptr;) {
            name += " of ";
            name += name_of(array->element_type());
            const auto* nested = array->get_if<GgufArray>();
            array = nested != nullptr && !nested->empty() ? &nested->front() : nullptr;
        }
        return name;
    }

    template <typename T>
        requires holds_type<T>
    const T* get_if() const {
        return std::get_if<T>(&storage_);
    }
    const Storage& storage() const { return storage_; }

private:
    Storage storage_;
};

// The key/value pairs of one file, in file order, with lookup by key. `file`
// prefixes error messages.
class GgufMetadata {
public:
    struct Entry {
        std::string_view key;
        GgufValue value;
    };

    GgufMetadata() = default;
    GgufMetadata(std::vector<Entry> entries, std::string file) : entries_(std::move(entries)), file_(std::move(file)) {
        for (std::size_t i = 0; i < entries_.size(); ++i) index_.emplace(entries_[i].key, i);
    }

    std::span<const Entry> entries() const { return entries_; }
    std::size_t size() const { return entries_.size(); }
    bool contains(std::string_view key) const { return index_.contains(key); }
    const GgufValue* find(std::string_view key) const {
        const auto it = index_.find(key);
        return it == index_.end() ? nullptr : &entries_[it->second].value;
    }
    const GgufValue& at(std::string_view key) const {
        if (const GgufValue* value = find(key)) return *value;
        throw Error(file_, fmt::format("no metadata key '{}' (the file has {} keys)", key, entries_.size()));
    }

    // The value of `key`, which must be stored as exactly T.
    template <typename T>
        requires GgufValue::holds_type<T>
    const T& get(std::string_view key) const {
        const GgufValue& value = at(key);
        if (const T* typed = value.get_if<T>()) return *typed;
        throw Error(file_, fmt::format("metadata key '{}' is {}, expected {}", key, value.type_name(),
                                       name_of(GgufValue::type_of<T>)));
    }

    std::uint8_t get_u8(std::string_view key) const { return get<std::uint8_t>(key); }
    std::int8_t get_i8(std::string_view key) const { return get<std::int8_t>(key); }
    std::uint16_t get_u16(std::string_view key) const { return get<std::uint16_t>(key); }
    std::int16_t get_i16(std::string_view key) const { return get<std::int16_t>(key); }
    std::uint32_t get_u32(std::string_view key) const { return get<std::uint32_t>(key); }
    std::int32_t get_i32(std::string_view key) const { return get<std::int32_t>(key); }
    std::uint64_t get_u64(std::string_view key) const { return get<std::uint64_t>(key); }
    std::int64_t get_i64(std::string_view key) const { return get<std::int64_t>(key); }
    float get_f32(std::string_view key) const { return get<float>(key); }
    double get_f64(std::string_view key) const { return get<double>(key); }
    bool get_bool(std::string_view key) const { return get<bool>(key); }
    std::string_view get_string(std::string_view key) const { return get<std::string_view>(key); }

    // The elements of the array `key`, which must hold exactly T.
    template <typename T>
    const std::vector<T>& get_array(std::string_view key) const {
        const GgufArray& array = get<GgufArray>(key);
        if (const std::vector<T>* elements = array.get_if<T>()) return *elements;
        throw Error(file_, fmt::format("metadata key '{}' is {}, expected array of {}", key, at(key).type_name(),
                                       name_of(GgufValue::type_of<T>)));
    }

    // An integer stored as any of the format's integer types, converted to T
    // when its value fits.
    template <std::integral T>
        requires(!std::same_as<T, bool>)
    T get_integer(std::string_view key) const {
        const GgufValue& value = at(key);
        return std::visit(
            [&](const auto& stored) -> T {
                using Stored = std::remove_cvref_t<decltype(stored)>;
                if constexpr (std::integral<Stored> && !std::same_as<Stored, bool>) {
                    if (!std::in_range<T>(stored))
                        throw Error(file_, fmt::format("metadata key '{}' = {} ({}) does not fit {} bits{}", key,
                                                       stored, value.type_name(), sizeof(T) * 8,
                                                       std::is_signed_v<T> ? " signed" : " unsigned"));
                    return static_cast<T>(stored);
                } else {
                    throw Error(file_, fmt::format("metadata key '{}' is {}, expected an integer", key,
                                                   value.type_name()));
                }
            },
            value.storage());
    }

    // A float stored as f32 or f64.
    double get_real(std::string_view key) const {
        const GgufValue& value = at(key);
        if (const float* f = value.get_if<float>()) return *f;
        if (const double* d = value.get_if<double>()) return *d;
        throw Error(file_, fmt::format("metadata key '{}' is {}, expected f32 or f64", key, value.type_name()));
    }

    // The file these entries came from, for error messages.
    const std::string& file() const { return file_; }

private:
    std::vector<Entry> entries_;
    std::map<std::string_view, std::size_t, std::less<>> index_;
    std::string file_;
};

}  // namespace luminal::io
