#pragma once
// Registers per thread of a kernel in a cubin, read without a device: the
// cubin is an ELF file whose ".nv.info" section lists attributes, among them
// the register count (EIATTR_REGCOUNT) of each kernel by its symbol index.
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace luminal::cuda {

namespace cubin_detail {

struct Elf {
    const std::vector<char>& bytes;
    std::optional<std::uint64_t> read(std::uint64_t at, std::size_t size) const {
        if (at + size > bytes.size()) return std::nullopt;
        std::uint64_t v = 0;
        std::memcpy(&v, bytes.data() + at, size);
        return v;
    }
    bool name_is(std::uint64_t at, std::string_view name) const {
        return at + name.size() < bytes.size() && std::memcmp(bytes.data() + at, name.data(), name.size()) == 0 &&
               bytes[at + name.size()] == '\0';
    }
};

struct Section {
    std::uint64_t name = 0, type = 0, offset = 0, size = 0, link = 0, entry_size = 0;
};

}  // namespace cubin_detail

inline std::optional<int> cubin_registers(const std::vector<char>& cubin, std::string_view kernel) {
    using namespace cubin_detail;
    const Elf elf{cubin};
    if (cubin.size() < 64 || std::memcmp(cubin.data(), "\x7f" "ELF", 4) != 0 || cubin[4] != 2) return std::nullopt;
    const auto table = elf.read(0x28, 8), header_size = elf.read(0x3A, 2), count = elf.read(0x3C, 2), names = elf.read(0x3E, 2);
    if (!table || !header_size || !count || !names || *header_size < 64) return std::nullopt;
    std::vector<Section> sections;
    for (std::uint64_t i = 0; i < *count; ++i) {
        const std::uint64_t at = *table + i * *header_size;
        const auto name = elf.read(at, 4), type = elf.read(at + 4, 4), offset = elf.read(at + 24, 8), size = elf.read(at + 32, 8),
                   link = elf.read(at + 40, 4), entry = elf.read(at + 56, 8);
        if (!name || !type || !offset || !size || !link || !entry) return std::nullopt;
        sections.push_back({*name, *type, *offset, *size, *link, *entry});
    }
    if (*names >= sections.size()) return std::nullopt;
    const std::uint64_t section_names = sections[*names].offset;
    constexpr std::uint64_t kSymbolTable = 2, kRegisterCount = 0x2f, kSizedValue = 4;
    std::optional<std::uint64_t> symbol;
    for (const Section& s : sections) {
        if (s.type != kSymbolTable || s.entry_size < 24 || s.link >= sections.size()) continue;
        for (std::uint64_t at = s.offset; at + 24 <= s.offset + s.size; at += s.entry_size)
            if (auto name = elf.read(at, 4); name && elf.name_is(sections[s.link].offset + *name, kernel))
                symbol = (at - s.offset) / s.entry_size;
    }
    if (!symbol) return std::nullopt;
    for (const Section& s : sections) {
        if (!elf.name_is(section_names + s.name, ".nv.info")) continue;
        for (std::uint64_t at = s.offset; at + 2 <= s.offset + s.size;) {
            const auto format = elf.read(at, 1), attribute = elf.read(at + 1, 1);
            at += 2;
            if (*format != kSizedValue) {
                at += *format == 3 ? 2 : *format == 2 ? 1 : 0;
                continue;
            }
            const auto size = elf.read(at, 2);
            if (!size) return std::nullopt;
            at += 2;
            if (*attribute == kRegisterCount && *size == 8 && elf.read(at, 4) == symbol)
                if (auto registers = elf.read(at + 4, 4)) return static_cast<int>(*registers);
            at += *size;
        }
    }
    return std::nullopt;
}

}  // namespace luminal::cuda
