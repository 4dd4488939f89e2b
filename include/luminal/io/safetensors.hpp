#pragma once
// Reader for the safetensors format: an 8-byte little-endian header length, a
// JSON header mapping tensor names to {dtype, shape, data_offsets} (plus an
// optional "__metadata__" string map), then the data section the offsets index.
//
// SafetensorsView parses and validates bytes it does not own (a fuzzer feeds it
// arbitrary input); SafetensorsFile memory-maps a file and keeps the mapping
// alive, so a tensor stored in the compute dtype is used in place.
//
// Validation follows the Rust safetensors crate (the format's reference
// implementation): the header is at most 100,000,000 bytes; tensors, sorted by
// offset, tile the data section exactly (no gap, no overlap, nothing after the
// last); each tensor's byte length is its element count times its dtype size,
// computed without overflow. It is stricter in two places: entries hold exactly
// dtype/shape/data_offsets, and a key repeated in one JSON object is an error
// (JSON leaves its meaning open). Every violation is a luminal::Error naming the
// file, the tensor and the numbers involved.
#include "luminal/core/error.hpp"
#include "luminal/io/json.hpp"
#include "luminal/io/mapped_file.hpp"
#include "luminal/io/safetensors_dtype.hpp"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace luminal::io {

static_assert(std::endian::native == std::endian::little,
              "safetensors stores little-endian values and luminal reads them in place");

// The crate's cap: a corrupt length must not make us parse gigabytes of JSON.
inline constexpr std::uint64_t safetensors_max_header_bytes = 100'000'000;

using SafetensorsMetadata = std::map<std::string, std::string, std::less<>>;

namespace detail {

// The format's dtype for a C++ element type read in place (none for bool,
// whose storage byte may hold any value).
template <typename T>
inline constexpr std::optional<SafetensorsDType> safetensors_dtype_for = std::nullopt;
template <> inline constexpr std::optional<SafetensorsDType> safetensors_dtype_for<float> = SafetensorsDType::F32;
template <> inline constexpr std::optional<SafetensorsDType> safetensors_dtype_for<double> = SafetensorsDType::F64;
template <> inline constexpr std::optional<SafetensorsDType> safetensors_dtype_for<std::int8_t> = SafetensorsDType::I8;
template <> inline constexpr std::optional<SafetensorsDType> safetensors_dtype_for<std::uint8_t> = SafetensorsDType::U8;
template <> inline constexpr std::optional<SafetensorsDType> safetensors_dtype_for<std::int16_t> = SafetensorsDType::I16;
template <> inline constexpr std::optional<SafetensorsDType> safetensors_dtype_for<std::uint16_t> = SafetensorsDType::U16;
template <> inline constexpr std::optional<SafetensorsDType> safetensors_dtype_for<std::int32_t> = SafetensorsDType::I32;
template <> inline constexpr std::optional<SafetensorsDType> safetensors_dtype_for<std::uint32_t> = SafetensorsDType::U32;
template <> inline constexpr std::optional<SafetensorsDType> safetensors_dtype_for<std::int64_t> = SafetensorsDType::I64;
template <> inline constexpr std::optional<SafetensorsDType> safetensors_dtype_for<std::uint64_t> = SafetensorsDType::U64;

}  // namespace detail

// One tensor of a parsed file. `bytes` points into the parsed buffer, so the
// tensor is valid as long as the SafetensorsView's buffer (or SafetensorsFile) is.
struct SafetensorsTensor {
    std::string name;
    SafetensorsDType stored_dtype = SafetensorsDType::F32;
    std::vector<std::int64_t> shape;
    std::int64_t numel = 0;
    std::span<const std::byte> bytes;
    std::uint64_t data_offset = 0;  // of `bytes` within the data section
    std::string file;               // the source, for error messages

    // The luminal dtype of the stored values, or nullopt (F64, I8, FP8, ...).
    std::optional<DType> luminal_dtype() const { return luminal_dtype_of(stored_dtype); }

    DType dtype() const {
        const auto dtype = luminal_dtype();
        if (!dtype)
            throw Error(file, fmt::format("tensor '{}' is {}, which luminal has no dtype for", name,
                                          name_of(stored_dtype)));
        return *dtype;
    }

    // The stored values in place (no copy). T must be the stored type exactly
    // (float for F32, std::uint16_t for U16, ...); 16-bit floats have no C++
    // type here: read `bytes` or convert with to_vector.
    template <typename T>
    std::span<const T> values() const {
        constexpr auto wanted = detail::safetensors_dtype_for<T>;
        static_assert(wanted.has_value(), "values<T>: T must be a fixed-width integer, float or double");
        if (stored_dtype != *wanted)
            throw Error(file, fmt::format("tensor '{}' is {}; reading it in place as {} needs a conversion (to_vector)",
                                          name, name_of(stored_dtype), name_of(*wanted)));
        if (reinterpret_cast<std::uintptr_t>(bytes.data()) % alignof(T) != 0)
            throw Error(file, fmt::format("tensor '{}' at data offset {} is not aligned to {} bytes for in-place "
                                          "access (the header length is not a multiple of 8?); use to_vector",
                                          name, data_offset, alignof(T)));
        return {reinterpret_cast<const T*>(bytes.data()), static_cast<std::size_t>(numel)};
    }
};

namespace detail {

// Parses the header, rejecting a key repeated within one object: nlohmann would
// keep the last silently, hiding a tensor whose bytes another name then claims.
inline Json parse_safetensors_header(std::string_view text, const std::string& file) {
    std::vector<std::set<std::string, std::less<>>> open_objects;
    std::optional<std::string> duplicate;
    const Json::parser_callback_t track_keys = [&](int, Json::parse_event_t event, Json& parsed) {
        if (event == Json::parse_event_t::object_start) {
            open_objects.emplace_back();
        } else if (event == Json::parse_event_t::object_end) {
            open_objects.pop_back();
        } else if (event == Json::parse_event_t::key && !duplicate) {
            const auto& key = parsed.get_ref<const std::string&>();
            if (!open_objects.back().insert(key).second) duplicate = key;
        }
        return true;
    };
    Json header;
    try {
        header = Json::parse(text.begin(), text.end(), track_keys);
    } catch (const Json::parse_error& error) {
        throw Error(file, fmt::format("header is not valid JSON (byte {} of {}): {}", error.byte, text.size(),
                                      error.what()));
    } catch (const Json::exception& error) {  // e.g. out_of_range for a number like 1e999
        throw Error(file, fmt::format("header is not valid JSON: {}", error.what()));
    }
    if (duplicate) throw Error(file, fmt::format("header repeats the key '{}'", *duplicate));
    return header;
}

inline SafetensorsMetadata parse_safetensors_metadata(const Json& value, const std::string& file) {
    SafetensorsMetadata metadata;
    if (value.is_null()) return metadata;
    if (!value.is_object())
        throw Error(file, fmt::format("'__metadata__' must be an object of strings, got {} {}", value.type_name(),
                                      json_excerpt(value)));
    for (const auto& [key, entry] : value.items()) {
        if (!entry.is_string())
            throw Error(file, fmt::format("'__metadata__' entry '{}' must be a string, got {} {}", key,
                                          entry.type_name(), json_excerpt(entry)));
        metadata.emplace(key, entry.get<std::string>());
    }
    return metadata;
}

inline std::uint64_t header_unsigned(const Json& value, const std::string& tensor, std::string_view field,
                                     const std::string& file) {
    if (!value.is_number_unsigned())
        throw Error(file, fmt::format("tensor '{}': {} must hold non-negative integers, got {} {}", tensor, field,
                                      value.type_name(), json_excerpt(value)));
    return value.get<std::uint64_t>();
}

// A header entry checked on its own; offsets are checked against each other later.
struct SafetensorsEntry {
    std::string name;
    SafetensorsDType dtype;
    std::vector<std::int64_t> shape;
    std::uint64_t numel;
    std::uint64_t begin, end;
};

inline SafetensorsEntry parse_safetensors_entry(const std::string& name, const Json& value, const std::string& file) {
    static constexpr std::string_view fields[] = {"dtype", "shape", "data_offsets"};
    if (!value.is_object())
        throw Error(file, fmt::format("tensor '{}': entry must be an object with dtype, shape and data_offsets, got {} {}",
                                      name, value.type_name(), json_excerpt(value)));
    for (const auto& [key, unused] : value.items())
        if (std::ranges::find(fields, key) == std::end(fields))
            throw Error(file, fmt::format("tensor '{}': unexpected field '{}' (entries hold exactly dtype, shape, "
                                          "data_offsets)", name, key));
    for (std::string_view field : fields)
        if (!value.contains(field)) throw Error(file, fmt::format("tensor '{}': missing field '{}'", name, field));

    SafetensorsEntry entry{name, SafetensorsDType::F32, {}, 1, 0, 0};
    const Json& dtype = value["dtype"];
    if (!dtype.is_string())
        throw Error(file, fmt::format("tensor '{}': dtype must be a string, got {} {}", name, dtype.type_name(),
                                      json_excerpt(dtype)));
    const auto parsed_dtype = parse_safetensors_dtype(dtype.get_ref<const std::string&>());
    if (!parsed_dtype)
        throw Error(file, fmt::format("tensor '{}': unknown dtype '{}' (the format's dtypes: {})", name,
                                      dtype.get_ref<const std::string&>(), known_safetensors_dtypes()));
    entry.dtype = *parsed_dtype;

    const Json& shape = value["shape"];
    if (!shape.is_array())
        throw Error(file, fmt::format("tensor '{}': shape must be an array, got {} {}", name, shape.type_name(),
                                      json_excerpt(shape)));
    std::vector<std::uint64_t> dims;
    dims.reserve(shape.size());
    for (const Json& dim : shape) dims.push_back(header_unsigned(dim, name, "shape", file));
    for (std::uint64_t dim : dims) {
        // A dimension must fit luminal's int64 shapes; their product, the crate's
        // checked multiplication (a zero anywhere makes it 0, as in the crate).
        if (dim > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
            throw Error(file, fmt::format("tensor '{}': shape {} has a dimension above 2^63-1", name, dims));
        if (__builtin_mul_overflow(entry.numel, dim, &entry.numel))
            throw Error(file, fmt::format("tensor '{}': shape {} has more than 2^64 elements", name, dims));
        entry.shape.push_back(static_cast<std::int64_t>(dim));
    }

    const Json& offsets = value["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2)
        throw Error(file, fmt::format("tensor '{}': data_offsets must be [begin, end], got {}", name,
                                      json_excerpt(offsets)));
    entry.begin = header_unsigned(offsets[0], name, "data_offsets", file);
    entry.end = header_unsigned(offsets[1], name, "data_offsets", file);
    if (entry.end < entry.begin)
        throw Error(file, fmt::format("tensor '{}': data_offsets [{}, {}] end before they begin", name, entry.begin,
                                      entry.end));

    std::uint64_t bits = 0;
    if (__builtin_mul_overflow(entry.numel, std::uint64_t{bits_of(entry.dtype)}, &bits))
        throw Error(file, fmt::format("tensor '{}': shape {} of {} is more than 2^64 bits", name, dims,
                                      name_of(entry.dtype)));
    if (bits % 8 != 0)
        throw Error(file, fmt::format("tensor '{}': shape {} of {} is {} bits, not a whole number of bytes", name, dims,
                                      name_of(entry.dtype), bits));
    if (bits / 8 != entry.end - entry.begin)
        throw Error(file, fmt::format("tensor '{}': shape {} of {} needs {} bytes but data_offsets [{}, {}] hold {}",
                                      name, dims, name_of(entry.dtype), bits / 8, entry.begin, entry.end,
                                      entry.end - entry.begin));
    return entry;
}

// Sorted by offset, tensors must cover [0, data_size) exactly once.
inline void check_safetensors_tiling(std::vector<SafetensorsEntry>& entries, std::uint64_t data_size,
                                     const std::string& file) {
    for (const SafetensorsEntry& entry : entries)
        if (entry.end > data_size)
            throw Error(file, fmt::format("tensor '{}': data_offsets [{}, {}] run past the end of the data section "
                                          "({} bytes)", entry.name, entry.begin, entry.end, data_size));
    std::ranges::sort(entries, [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
        return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
    });
    std::uint64_t covered = 0;
    const SafetensorsEntry* previous = nullptr;
    for (const SafetensorsEntry& entry : entries) {
        if (entry.begin < covered)
            throw Error(file, fmt::format("tensor '{}': data_offsets [{}, {}] overlap tensor '{}' at [{}, {}]",
                                          entry.name, entry.begin, entry.end, previous->name, previous->begin,
                                          previous->end));
        if (entry.begin > covered)
            throw Error(file, fmt::format("data bytes [{}, {}) belong to no tensor (the next, '{}', starts at {})",
                                          covered, entry.begin, entry.name, entry.begin));
        covered = entry.end;
        previous = &entry;
    }
    if (covered != data_size)
        throw Error(file, fmt::format("the data section is {} bytes but the tensors end at byte {}: {} trailing "
                                      "bytes belong to no tensor", data_size, covered, data_size - covered));
}

}  // namespace detail

// A parsed, validated safetensors buffer it does not own.
class SafetensorsView {
public:
    // `name` (usually the path) prefixes every error message.
    static SafetensorsView parse(std::span<const std::byte> buffer, std::string name) {
        SafetensorsView view;
        view.name_ = std::move(name);
        const std::string& file = view.name_;
        if (buffer.size() < 8)
            throw Error(file, fmt::format("file is {} bytes, too short for the 8-byte header length", buffer.size()));
        std::uint64_t header_length = 0;
        std::memcpy(&header_length, buffer.data(), sizeof header_length);  // little-endian host
        if (header_length > safetensors_max_header_bytes)
            throw Error(file, fmt::format("header length {} exceeds the format's limit of {} bytes", header_length,
                                          safetensors_max_header_bytes));
        if (header_length > buffer.size() - 8)
            throw Error(file, fmt::format("header length {} runs past the end of the file ({} bytes, so at most {})",
                                          header_length, buffer.size(), buffer.size() - 8));
        view.header_length_ = header_length;

        const auto header_text = std::string_view(reinterpret_cast<const char*>(buffer.data()) + 8, header_length);
        const Json header = detail::parse_safetensors_header(header_text, file);
        if (!header.is_object())
            throw Error(file, fmt::format("header must be a JSON object, got {} {}", header.type_name(),
                                          json_excerpt(header)));

        std::vector<detail::SafetensorsEntry> entries;
        entries.reserve(header.size());
        for (const auto& [key, value] : header.items()) {
            if (key == "__metadata__") view.metadata_ = detail::parse_safetensors_metadata(value, file);
            else entries.push_back(detail::parse_safetensors_entry(key, value, file));
        }
        const auto data = buffer.subspan(8 + header_length);
        detail::check_safetensors_tiling(entries, data.size(), file);

        view.tensors_.reserve(entries.size());
        for (detail::SafetensorsEntry& entry : entries) {
            view.index_.emplace(entry.name, view.tensors_.size());
            view.tensors_.push_back(SafetensorsTensor{
                .name = std::move(entry.name),
                .stored_dtype = entry.dtype,
                .shape = std::move(entry.shape),
                .numel = static_cast<std::int64_t>(entry.numel),  // <= 8 x the data size: fits
                .bytes = data.subspan(entry.begin, entry.end - entry.begin),
                .data_offset = entry.begin,
                .file = file,
            });
        }
        return view;
    }

    const std::string& name() const { return name_; }
    // In data order (by offset), the order the format's writers lay them out.
    std::span<const SafetensorsTensor> tensors() const { return tensors_; }
    std::size_t size() const { return tensors_.size(); }
    std::vector<std::string_view> names() const {
        std::vector<std::string_view> out;
        out.reserve(tensors_.size());
        for (const SafetensorsTensor& tensor : tensors_) out.push_back(tensor.name);
        return out;
    }
    const SafetensorsMetadata& metadata() const { return metadata_; }
    // Length of the JSON header; the data section starts at byte 8 + this.
    std::uint64_t header_length() const { return header_length_; }

    const SafetensorsTensor* find(std::string_view name) const {
        const auto it = index_.find(name);
        return it == index_.end() ? nullptr : &tensors_[it->second];
    }
    bool contains(std::string_view name) const { return index_.contains(name); }
    const SafetensorsTensor& at(std::string_view name) const {
        if (const SafetensorsTensor* tensor = find(name)) return *tensor;
        throw Error(name_, fmt::format("no tensor named '{}' (the file holds {} tensors)", name, tensors_.size()));
    }

private:
    std::string name_;
    std::vector<SafetensorsTensor> tensors_;
    std::map<std::string, std::size_t, std::less<>> index_;
    SafetensorsMetadata metadata_;
    std::uint64_t header_length_ = 0;
};

// A memory-mapped safetensors file. Opening reads only the header (and checks
// it); tensor bytes are paged in by the OS when first touched.
class SafetensorsFile {
public:
    static SafetensorsFile open(const std::filesystem::path& path) {
        MappedFile mapping(path);
        SafetensorsView view = SafetensorsView::parse(mapping.bytes(), path.string());
        return SafetensorsFile(std::move(mapping), std::move(view));
    }

    const std::filesystem::path& path() const { return mapping_.path(); }
    const SafetensorsView& view() const { return view_; }

    std::span<const SafetensorsTensor> tensors() const { return view_.tensors(); }
    std::size_t size() const { return view_.size(); }
    std::vector<std::string_view> names() const { return view_.names(); }
    const SafetensorsMetadata& metadata() const { return view_.metadata(); }
    const SafetensorsTensor* find(std::string_view name) const { return view_.find(name); }
    bool contains(std::string_view name) const { return view_.contains(name); }
    const SafetensorsTensor& at(std::string_view name) const { return view_.at(name); }

private:
    // The view's spans point into the mapping, whose address survives moves.
    SafetensorsFile(MappedFile mapping, SafetensorsView view) : mapping_(std::move(mapping)), view_(std::move(view)) {}

    MappedFile mapping_;
    SafetensorsView view_;
};

}  // namespace luminal::io
