#pragma once
// Writer for the safetensors format, laid out as the Python and Rust writers do:
// the header is compact JSON ("__metadata__" first when there is any, then the
// tensors as {"dtype","shape","data_offsets"}), padded with spaces to a multiple
// of 8 bytes so the data section, and every tensor whose offset is a multiple of
// its element size, is aligned for in-place reads. Tensors are laid out in the
// order given (put wider dtypes first to keep every tensor aligned).
#include "luminal/core/error.hpp"
#include "luminal/io/json.hpp"
#include "luminal/io/safetensors.hpp"
#include "luminal/io/safetensors_dtype.hpp"

#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <span>
#include <string>
#include <vector>

namespace luminal::io {

static_assert(std::endian::native == std::endian::little, "safetensors stores little-endian values");

// One tensor to write: `bytes` are its values, row-major, little-endian.
struct SafetensorsRecord {
    std::string name;
    SafetensorsDType dtype = SafetensorsDType::F32;
    std::vector<std::int64_t> shape;
    std::span<const std::byte> bytes;
};

// The 8-byte length followed by the padded JSON header, after checking every
// record: unique names other than "__metadata__", non-negative dimensions, and
// exactly numel x dtype size bytes of data.
inline std::string safetensors_header(std::span<const SafetensorsRecord> records, const SafetensorsMetadata& metadata,
                                      const std::string& where) {
    nlohmann::ordered_json header = nlohmann::ordered_json::object();
    if (!metadata.empty()) header["__metadata__"] = metadata;
    std::set<std::string_view> names;
    std::uint64_t offset = 0;
    for (const SafetensorsRecord& record : records) {
        if (record.name == "__metadata__")
            throw Error(where, "'__metadata__' is reserved for the metadata map and cannot name a tensor");
        if (!names.insert(record.name).second)
            throw Error(where, fmt::format("tensor '{}' is given twice", record.name));
        std::uint64_t bits = bits_of(record.dtype);
        for (std::int64_t dim : record.shape) {
            if (dim < 0)
                throw Error(where, fmt::format("tensor '{}': shape {} has a negative dimension", record.name,
                                               record.shape));
            if (__builtin_mul_overflow(bits, static_cast<std::uint64_t>(dim), &bits))
                throw Error(where, fmt::format("tensor '{}': shape {} of {} is more than 2^64 bits", record.name,
                                               record.shape, name_of(record.dtype)));
        }
        if (bits % 8 != 0)
            throw Error(where, fmt::format("tensor '{}': shape {} of {} is {} bits, not a whole number of bytes",
                                           record.name, record.shape, name_of(record.dtype), bits));
        if (bits / 8 != record.bytes.size())
            throw Error(where, fmt::format("tensor '{}': shape {} of {} needs {} bytes but {} were given", record.name,
                                           record.shape, name_of(record.dtype), bits / 8, record.bytes.size()));
        header[record.name] = {{"dtype", std::string(name_of(record.dtype))},
                               {"shape", record.shape},
                               {"data_offsets", {offset, offset + record.bytes.size()}}};
        offset += record.bytes.size();
    }
    std::string text;
    try {
        text = header.dump();
    } catch (const nlohmann::ordered_json::type_error& error) {  // names and metadata must be UTF-8
        throw Error(where, fmt::format("cannot encode the header: {}", error.what()));
    }
    text.append((8 - text.size() % 8) % 8, ' ');
    if (text.size() > safetensors_max_header_bytes)
        throw Error(where, fmt::format("header is {} bytes, over the format's limit of {}", text.size(),
                                       safetensors_max_header_bytes));
    const std::uint64_t length = text.size();
    std::string out(sizeof length, '\0');
    std::memcpy(out.data(), &length, sizeof length);  // little-endian host
    return out + text;
}

// The whole file in memory (tests, fuzzing seeds, small tools).
inline std::vector<std::byte> serialize_safetensors(std::span<const SafetensorsRecord> records,
                                                    const SafetensorsMetadata& metadata = {}) {
    const std::string header = safetensors_header(records, metadata, "serialize_safetensors");
    std::size_t total = header.size();
    for (const SafetensorsRecord& record : records) total += record.bytes.size();
    std::vector<std::byte> out;
    out.reserve(total);
    const auto* header_bytes = reinterpret_cast<const std::byte*>(header.data());
    out.insert(out.end(), header_bytes, header_bytes + header.size());
    for (const SafetensorsRecord& record : records) out.insert(out.end(), record.bytes.begin(), record.bytes.end());
    return out;
}

// Streams the file to `path` (tensor data is not gathered in memory first).
inline void write_safetensors(const std::filesystem::path& path, std::span<const SafetensorsRecord> records,
                              const SafetensorsMetadata& metadata = {}) {
    const std::string where = path.string();
    const std::string header = safetensors_header(records, metadata, where);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(where, fmt::format("cannot create: {}", std::strerror(errno)));
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    for (const SafetensorsRecord& record : records)
        out.write(reinterpret_cast<const char*>(record.bytes.data()), static_cast<std::streamsize>(record.bytes.size()));
    out.close();
    if (!out) throw Error(where, fmt::format("cannot write: {}", std::strerror(errno)));
}

}  // namespace luminal::io
