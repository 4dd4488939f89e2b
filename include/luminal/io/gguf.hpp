#pragma once
// Reader for GGUF (versions 2 and 3, little-endian), llama.cpp's model format:
//
//   "GGUF", u32 version, u64 tensor count, u64 metadata count,
//   metadata: (string key, u32 value type, value)...,
//   tensor infos: (string name, u32 n_dims, u64 ne[n_dims], u32 type, u64 offset)...,
//   padding to the alignment, then the data section the offsets index.
//
// Strings are a u64 byte length then the bytes; arrays a u32 element type, a
// u64 count, then the elements. ne[0] is the innermost (contiguous) dimension.
// The alignment is general.alignment (a u32 power of two), 32 when absent.
//
// GgufView parses and validates bytes it does not own (a fuzzer feeds it
// arbitrary input); GgufFile memory-maps a file and keeps the mapping alive, so
// tensor bytes are paged in only when read. Validation: every count and length
// is checked against the bytes left before anything is allocated for it (so
// memory stays proportional to the file), keys and tensor names are unique,
// bools are 0 or 1, arrays nest at most gguf_max_array_depth deep, tensors have
// at most 4 dimensions whose product fits int64 and whose rows are whole blocks,
// offsets are aligned, and tensor bytes lie in the data section without
// overlapping. Every violation is a luminal::Error naming the file, the key or
// tensor, and the numbers involved. Like llama.cpp's reader, strings are not
// checked to be UTF-8 and bytes after the last tensor are allowed; unlike it,
// tensors may leave gaps in the data section (only overlaps are errors) and
// arrays of arrays are read (llama.cpp rejects them; the format allows them).
#include "luminal/core/error.hpp"
#include "luminal/io/gguf_quants.hpp"
#include "luminal/io/gguf_type.hpp"
#include "luminal/io/gguf_value.hpp"
#include "luminal/io/mapped_file.hpp"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace luminal::io {

static_assert(std::endian::native == std::endian::little,
              "GGUF files are read in place as little-endian values");

inline constexpr std::uint32_t gguf_default_alignment = 32;
// ggml's GGML_MAX_DIMS.
inline constexpr std::uint32_t gguf_max_dims = 4;
// The format's limit on tensor name length.
inline constexpr std::uint64_t gguf_max_tensor_name_bytes = 64;
// The format allows arrays of arrays without a limit; recursion needs one.
inline constexpr int gguf_max_array_depth = 8;

// One tensor of a parsed file. `bytes` points into the parsed buffer, so the
// tensor is valid as long as the GgufView's buffer (or GgufFile) is.
struct GgufTensor {
    std::string name;
    GgufType type = GgufType::F32;
    std::vector<std::int64_t> dims;  // ggml order: dims[0] is the contiguous one
    std::int64_t numel = 0;
    std::uint64_t offset = 0;  // of `bytes` within the data section
    std::span<const std::byte> bytes;
    std::string file;  // the source, for error messages

    // The dims outermost first, as PyTorch and Hugging Face shape the tensor.
    std::vector<std::int64_t> shape() const { return {dims.rbegin(), dims.rend()}; }
};

namespace detail {

inline constexpr std::uint64_t gguf_header_bytes = 4 + 4 + 8 + 8;
// The smallest encodings, which bound how many entries the bytes left can hold:
// a key/value is a key length, a value type and at least a 1-byte value; a
// tensor info a name length, n_dims, a type and an offset.
inline constexpr std::uint64_t gguf_min_metadata_bytes = 8 + 4 + 1;
inline constexpr std::uint64_t gguf_min_tensor_info_bytes = 8 + 4 + 4 + 8;

constexpr std::uint64_t gguf_min_value_bytes(GgufValueType type) {
    switch (type) {
        case GgufValueType::U8: case GgufValueType::I8: case GgufValueType::Bool: return 1;
        case GgufValueType::U16: case GgufValueType::I16: return 2;
        case GgufValueType::U32: case GgufValueType::I32: case GgufValueType::F32: return 4;
        case GgufValueType::U64: case GgufValueType::I64: case GgufValueType::F64: return 8;
        case GgufValueType::String: return 8;      // the length
        case GgufValueType::Array: return 4 + 8;   // element type and count
    }
    return 1;
}

// Reads the buffer front to back; every read is bounds-checked and names what
// it was reading in its error.
class GgufCursor {
public:
    // Starts reading at byte `start`; positions in messages count from the buffer's start.
    GgufCursor(std::span<const std::byte> bytes, std::size_t start, const std::string& file)
        : bytes_(bytes), file_(file), position_(start) {}

    std::size_t position() const { return position_; }
    std::uint64_t remaining() const { return bytes_.size() - position_; }
    const std::string& file() const { return file_; }

    void require(std::uint64_t count, std::string_view what) const {
        if (count > remaining())
            throw Error(file_, fmt::format("{} at byte {} needs {} bytes but the file ends at byte {}", what,
                                           position_, count, bytes_.size()));
    }

    template <typename T>
    T read(std::string_view what) {
        require(sizeof(T), what);
        T value;
        std::memcpy(&value, bytes_.data() + position_, sizeof(T));
        position_ += sizeof(T);
        return value;
    }

    std::string_view read_string(std::string_view what) {
        const auto length = read<std::uint64_t>(what);
        if (length > remaining())
            throw Error(file_, fmt::format("{}: string length {} at byte {} runs past the end of the file ({} bytes)",
                                           what, length, position_ - 8, bytes_.size()));
        const std::string_view text(reinterpret_cast<const char*>(bytes_.data()) + position_, length);
        position_ += length;
        return text;
    }

    // Rejects a count of entries that cannot fit in the bytes left, before
    // anything is allocated for them.
    void require_count(std::uint64_t count, std::uint64_t min_entry_bytes, std::string_view what) const {
        if (count > remaining() / min_entry_bytes)
            throw Error(file_, fmt::format("{} {} cannot fit in the {} bytes left after byte {} (each takes at least "
                                           "{} bytes)", what, count, remaining(), position_, min_entry_bytes));
    }

private:
    std::span<const std::byte> bytes_;
    const std::string& file_;
    std::size_t position_;
};

inline GgufValueType read_gguf_value_type(GgufCursor& cursor, std::string_view what) {
    const std::size_t at = cursor.position();
    const auto id = cursor.read<std::uint32_t>(what);
    if (id >= gguf_value_type_count)
        throw Error(cursor.file(), fmt::format("{}: unknown value type {} at byte {} (the format's types are 0 to {})",
                                               what, id, at, gguf_value_type_count - 1));
    return static_cast<GgufValueType>(id);
}

inline bool read_gguf_bool(GgufCursor& cursor, std::string_view what) {
    const std::size_t at = cursor.position();
    const auto stored = cursor.read<std::uint8_t>(what);
    if (stored > 1)
        throw Error(cursor.file(), fmt::format("{}: bool at byte {} holds {}, not 0 or 1", what, at, stored));
    return stored == 1;
}

inline GgufArray read_gguf_array(GgufCursor& cursor, std::string_view what, int depth);

template <typename T>
T read_gguf_element(GgufCursor& cursor, std::string_view what, int depth) {
    if constexpr (std::is_same_v<T, bool>) return read_gguf_bool(cursor, what);
    else if constexpr (std::is_same_v<T, std::string_view>) return cursor.read_string(what);
    else if constexpr (std::is_same_v<T, GgufArray>) return read_gguf_array(cursor, what, depth + 1);
    else return cursor.read<T>(what);
}

template <typename T>
std::vector<T> read_gguf_elements(GgufCursor& cursor, std::uint64_t count, std::string_view what, int depth) {
    std::vector<T> elements;
    elements.reserve(count);  // count was checked against the bytes left
    for (std::uint64_t i = 0; i < count; ++i) elements.push_back(read_gguf_element<T>(cursor, what, depth));
    return elements;
}

// Calls make<T>() with T the C++ type of `type`'s values.
template <typename Make>
auto visit_gguf_value_type(GgufValueType type, Make&& make) {
    switch (type) {
        case GgufValueType::U8: return make.template operator()<std::uint8_t>();
        case GgufValueType::I8: return make.template operator()<std::int8_t>();
        case GgufValueType::U16: return make.template operator()<std::uint16_t>();
        case GgufValueType::I16: return make.template operator()<std::int16_t>();
        case GgufValueType::U32: return make.template operator()<std::uint32_t>();
        case GgufValueType::I32: return make.template operator()<std::int32_t>();
        case GgufValueType::F32: return make.template operator()<float>();
        case GgufValueType::Bool: return make.template operator()<bool>();
        case GgufValueType::String: return make.template operator()<std::string_view>();
        case GgufValueType::Array: return make.template operator()<GgufArray>();
        case GgufValueType::U64: return make.template operator()<std::uint64_t>();
        case GgufValueType::I64: return make.template operator()<std::int64_t>();
        case GgufValueType::F64: return make.template operator()<double>();
    }
    return make.template operator()<std::uint8_t>();  // unreachable: types are validated when read
}

inline GgufArray read_gguf_array(GgufCursor& cursor, std::string_view what, int depth) {
    if (depth > gguf_max_array_depth)
        throw Error(cursor.file(), fmt::format("{}: arrays nested more than {} deep at byte {}", what,
                                               gguf_max_array_depth, cursor.position()));
    const GgufValueType element_type = read_gguf_value_type(cursor, what);
    const std::size_t count_at = cursor.position();
    const auto count = cursor.read<std::uint64_t>(what);
    const std::uint64_t min_element_bytes = gguf_min_value_bytes(element_type);
    if (count > cursor.remaining() / min_element_bytes)
        throw Error(cursor.file(), fmt::format("{}: array count {} at byte {} cannot fit in the {} bytes left ({} "
                                               "takes at least {} bytes)", what, count, count_at, cursor.remaining(),
                                               name_of(element_type), min_element_bytes));
    return visit_gguf_value_type(element_type, [&]<typename T>() {
        return GgufArray(GgufArray::Elements(read_gguf_elements<T>(cursor, count, what, depth)));
    });
}

inline GgufValue read_gguf_value(GgufCursor& cursor, GgufValueType type, std::string_view what) {
    return visit_gguf_value_type(type, [&]<typename T>() { return GgufValue(read_gguf_element<T>(cursor, what, 0)); });
}

inline GgufMetadata read_gguf_metadata(GgufCursor& cursor, std::uint64_t count) {
    std::vector<GgufMetadata::Entry> entries;
    entries.reserve(count);  // count was checked against the bytes left
    std::map<std::string_view, std::uint64_t, std::less<>> seen;
    for (std::uint64_t i = 0; i < count; ++i) {
        const std::string_view key = cursor.read_string(fmt::format("key of metadata entry {}", i));
        const std::string what = fmt::format("metadata '{}'", key);
        if (const auto [it, inserted] = seen.emplace(key, i); !inserted)
            throw Error(cursor.file(), fmt::format("{} appears twice (entries {} and {})", what, it->second, i));
        const GgufValueType type = read_gguf_value_type(cursor, what);
        entries.push_back({key, read_gguf_value(cursor, type, what)});
    }
    return GgufMetadata(std::move(entries), cursor.file());
}

inline std::uint32_t gguf_alignment(const GgufMetadata& metadata, const std::string& file) {
    const GgufValue* value = metadata.find("general.alignment");
    if (value == nullptr) return gguf_default_alignment;
    const auto* alignment = value->get_if<std::uint32_t>();
    if (alignment == nullptr)
        throw Error(file, fmt::format("general.alignment is {}, expected u32", value->type_name()));
    if (!std::has_single_bit(*alignment))
        throw Error(file, fmt::format("general.alignment {} is not a power of two", *alignment));
    return *alignment;
}

// A tensor info checked on its own; offsets are checked against the data
// section and each other once it is known.
struct GgufTensorInfo {
    std::string_view name;
    GgufType type;
    std::vector<std::int64_t> dims;
    std::int64_t numel;
    std::uint64_t offset;
    std::uint64_t byte_size;
};

inline GgufTensorInfo read_gguf_tensor_info(GgufCursor& cursor, std::uint64_t index) {
    const std::string& file = cursor.file();
    const std::string_view name = cursor.read_string(fmt::format("name of tensor info {}", index));
    const std::string what = fmt::format("tensor '{}'", name);
    if (name.size() > gguf_max_tensor_name_bytes)
        throw Error(file, fmt::format("{}: name is {} bytes, over the format's limit of {}", what, name.size(),
                                      gguf_max_tensor_name_bytes));
    const auto n_dims = cursor.read<std::uint32_t>(what);
    if (n_dims > gguf_max_dims)
        throw Error(file, fmt::format("{}: {} dimensions, more than ggml's {}", what, n_dims, gguf_max_dims));
    std::vector<std::uint64_t> stored_dims;
    for (std::uint32_t i = 0; i < n_dims; ++i) stored_dims.push_back(cursor.read<std::uint64_t>(what));
    const std::size_t type_at = cursor.position();
    const auto type_id = cursor.read<std::uint32_t>(what);
    const auto layout = gguf_type_layout(type_id);
    if (!layout) throw Error(file, fmt::format("{}: unknown tensor type id {} at byte {}", what, type_id, type_at));
    const auto offset = cursor.read<std::uint64_t>(what);

    GgufTensorInfo info{name, layout->type, {}, 1, offset, 0};
    for (std::uint64_t dim : stored_dims) {
        if (dim > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ||
            __builtin_mul_overflow(info.numel, static_cast<std::int64_t>(dim), &info.numel))
            throw Error(file, fmt::format("{}: dims {} have more than 2^63-1 elements", what, stored_dims));
        info.dims.push_back(static_cast<std::int64_t>(dim));
    }
    const std::uint64_t row = stored_dims.empty() ? 1 : stored_dims[0];
    if (row % layout->block_elements != 0)
        throw Error(file, fmt::format("{}: dims {}: a row of {} elements is not whole {} blocks of {}", what,
                                      stored_dims, row, layout->name, layout->block_elements));
    const auto blocks = static_cast<std::uint64_t>(info.numel) / layout->block_elements;
    if (__builtin_mul_overflow(blocks, std::uint64_t{layout->block_bytes}, &info.byte_size))
        throw Error(file, fmt::format("{}: dims {} of {} take more than 2^64 bytes", what, stored_dims, layout->name));
    return info;
}

// Tensors must lie in the data section at aligned offsets, no two sharing a byte.
inline void check_gguf_tensor_ranges(std::span<const GgufTensorInfo> infos, std::uint64_t data_size,
                                     std::uint32_t alignment, const std::string& file) {
    for (const GgufTensorInfo& info : infos) {
        if (info.offset % alignment != 0)
            throw Error(file, fmt::format("tensor '{}': data offset {} is not a multiple of the alignment {}", info.name,
                                          info.offset, alignment));
        if (info.offset > data_size || info.byte_size > data_size - info.offset)
            throw Error(file, fmt::format("tensor '{}': {} bytes at data offset {} run past the end of the data "
                                          "section ({} bytes)", info.name, info.byte_size, info.offset, data_size));
    }
    std::vector<const GgufTensorInfo*> by_offset;
    for (const GgufTensorInfo& info : infos)
        if (info.byte_size > 0) by_offset.push_back(&info);
    std::ranges::sort(by_offset, {}, [](const GgufTensorInfo* info) { return info->offset; });
    for (std::size_t i = 1; i < by_offset.size(); ++i) {
        const GgufTensorInfo& previous = *by_offset[i - 1];
        const GgufTensorInfo& current = *by_offset[i];
        if (current.offset < previous.offset + previous.byte_size)
            throw Error(file, fmt::format("tensor '{}': bytes [{}, {}) overlap tensor '{}' at [{}, {})", current.name,
                                          current.offset, current.offset + current.byte_size, previous.name,
                                          previous.offset, previous.offset + previous.byte_size));
    }
}

}  // namespace detail

// A parsed, validated GGUF buffer it does not own.
class GgufView {
public:
    // `name` (usually the path) prefixes every error message.
    static GgufView parse(std::span<const std::byte> buffer, std::string name) {
        GgufView view;
        view.name_ = std::move(name);
        const std::string& file = view.name_;
        if (buffer.size() < detail::gguf_header_bytes)
            throw Error(file, fmt::format("file is {} bytes, too short for the {}-byte GGUF header", buffer.size(),
                                          detail::gguf_header_bytes));
        if (std::memcmp(buffer.data(), "GGUF", 4) != 0) {
            std::vector<unsigned> magic;
            for (std::byte b : buffer.first(4)) magic.push_back(static_cast<unsigned>(b));
            throw Error(file, fmt::format("bad magic: the file starts with {:02x}, not 'GGUF' (47 47 55 46)",
                                          fmt::join(magic, " ")));
        }
        detail::GgufCursor cursor(buffer, 4, file);
        view.version_ = cursor.read<std::uint32_t>("version");
        if (view.version_ != 2 && view.version_ != 3) {
            const std::uint32_t swapped = __builtin_bswap32(view.version_);
            throw Error(file, fmt::format("GGUF version {} is not supported (only 2 and 3){}", view.version_,
                                          swapped == 2 || swapped == 3 ? "; this is a big-endian file" : ""));
        }
        const auto tensor_count = cursor.read<std::uint64_t>("tensor count");
        const auto metadata_count = cursor.read<std::uint64_t>("metadata count");
        cursor.require_count(tensor_count, detail::gguf_min_tensor_info_bytes, "tensor count");
        cursor.require_count(metadata_count, detail::gguf_min_metadata_bytes, "metadata count");

        view.metadata_ = detail::read_gguf_metadata(cursor, metadata_count);
        view.alignment_ = detail::gguf_alignment(view.metadata_, file);

        std::vector<detail::GgufTensorInfo> infos;
        infos.reserve(tensor_count);  // checked against the bytes left
        std::map<std::string_view, std::uint64_t, std::less<>> seen;
        for (std::uint64_t i = 0; i < tensor_count; ++i) {
            infos.push_back(detail::read_gguf_tensor_info(cursor, i));
            if (const auto [it, inserted] = seen.emplace(infos.back().name, i); !inserted)
                throw Error(file, fmt::format("tensor '{}' appears twice (tensor infos {} and {})", it->first,
                                              it->second, i));
        }

        const std::uint64_t infos_end = cursor.position();
        const std::uint64_t data_start = (infos_end + view.alignment_ - 1) / view.alignment_ * view.alignment_;
        if (data_start > buffer.size() && tensor_count > 0)
            throw Error(file, fmt::format("the data section would start at byte {} (tensor infos end at {}, aligned to "
                                          "{}), past the end of the file ({} bytes)", data_start, infos_end,
                                          view.alignment_, buffer.size()));
        view.data_offset_ = std::min<std::uint64_t>(data_start, buffer.size());
        const auto data = buffer.subspan(view.data_offset_);
        detail::check_gguf_tensor_ranges(infos, data.size(), view.alignment_, file);

        view.tensors_.reserve(infos.size());
        for (const detail::GgufTensorInfo& info : infos) {
            view.index_.emplace(info.name, view.tensors_.size());
            view.tensors_.push_back(GgufTensor{
                .name = std::string(info.name),
                .type = info.type,
                .dims = info.dims,
                .numel = info.numel,
                .offset = info.offset,
                .bytes = data.subspan(info.offset, info.byte_size),
                .file = file,
            });
        }
        return view;
    }

    const std::string& name() const { return name_; }
    std::uint32_t version() const { return version_; }
    std::uint32_t alignment() const { return alignment_; }
    // Where the data section starts in the file.
    std::uint64_t data_offset() const { return data_offset_; }
    const GgufMetadata& metadata() const { return metadata_; }

    // In file order (of the tensor infos).
    std::span<const GgufTensor> tensors() const { return tensors_; }
    std::size_t size() const { return tensors_.size(); }
    const GgufTensor* find(std::string_view name) const {
        const auto it = index_.find(name);
        return it == index_.end() ? nullptr : &tensors_[it->second];
    }
    bool contains(std::string_view name) const { return index_.contains(name); }
    const GgufTensor& at(std::string_view name) const {
        if (const GgufTensor* tensor = find(name)) return *tensor;
        throw Error(name_, fmt::format("no tensor named '{}' (the file holds {} tensors)", name, tensors_.size()));
    }

private:
    std::string name_;
    std::uint32_t version_ = 0;
    std::uint32_t alignment_ = gguf_default_alignment;
    std::uint64_t data_offset_ = 0;
    GgufMetadata metadata_;
    std::vector<GgufTensor> tensors_;
    std::map<std::string_view, std::size_t, std::less<>> index_;  // views into the buffer, like the names
};

// A memory-mapped GGUF file. Opening reads the header, metadata and tensor
// infos (and checks them); tensor bytes are paged in by the OS when first touched.
class GgufFile {
public:
    static GgufFile open(const std::filesystem::path& path) {
        MappedFile mapping(path);
        GgufView view = GgufView::parse(mapping.bytes(), path.string());
        return GgufFile(std::move(mapping), std::move(view));
    }

    const std::filesystem::path& path() const { return mapping_.path(); }
    const GgufView& view() const { return view_; }

    std::uint32_t version() const { return view_.version(); }
    std::uint32_t alignment() const { return view_.alignment(); }
    const GgufMetadata& metadata() const { return view_.metadata(); }
    std::span<const GgufTensor> tensors() const { return view_.tensors(); }
    std::size_t size() const { return view_.size(); }
    const GgufTensor* find(std::string_view name) const { return view_.find(name); }
    bool contains(std::string_view name) const { return view_.contains(name); }
    const GgufTensor& at(std::string_view name) const { return view_.at(name); }

private:
    // The view's spans and string views point into the mapping, whose address
    // survives moves.
    GgufFile(MappedFile mapping, GgufView view) : mapping_(std::move(mapping)), view_(std::move(view)) {}

    MappedFile mapping_;
    GgufView view_;
};

namespace detail {

inline void require_dequantizable(const GgufTensor& tensor) {
    if (!can_dequantize(tensor.type))
        throw Error(tensor.file, fmt::format("tensor '{}' is {}, which luminal cannot dequantize (it can: {})",
                                             tensor.name, name_of(tensor.type), gguf_dequantizable_type_names()));
}

}  // namespace detail

// The tensor's values as f32, in storage order (dims[0] fastest), into `out`,
// which must hold numel elements.
inline void dequantize_into(const GgufTensor& tensor, std::span<float> out) {
    detail::require_dequantizable(tensor);
    if (out.size() != static_cast<std::uint64_t>(tensor.numel))
        throw Error(tensor.file, fmt::format("tensor '{}' has {} elements but the output holds {}", tensor.name,
                                             tensor.numel, out.size()));
    dequantize_blocks(tensor.type, tensor.bytes, out);
}

inline std::vector<float> dequantize(const GgufTensor& tensor) {
    detail::require_dequantizable(tensor);  // before allocating numel floats for nothing
    std::vector<float> values(static_cast<std::size_t>(tensor.numel));
    dequantize_into(tensor, values);
    return values;
}

}  // namespace luminal::io
