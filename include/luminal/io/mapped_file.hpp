#pragma once
// Read-only memory map of a whole file. Model files are read through this, so a
// tensor stored in the compute dtype is used in place: no copy, and the OS pages
// it in on first touch.
#include "luminal/core/error.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <utility>

namespace luminal::io {

// Hands the whole pages of a range of a read-only file mapping back to the
// kernel; touched again, they are read from the file.
inline void release_mapped_pages(std::span<const std::byte> range) {
    const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    const auto start = reinterpret_cast<std::uintptr_t>(range.data());
    const auto begin = (start + page - 1) / page * page, end = (start + range.size()) / page * page;
    if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

class MappedFile {
public:
    explicit MappedFile(std::filesystem::path path) : path_(std::move(path)) {
        const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) fail("cannot open");
        struct stat info {};
        if (::fstat(fd, &info) != 0) {
            const int saved = errno;
            ::close(fd);
            errno = saved;
            fail("cannot stat");
        }
        if (!S_ISREG(info.st_mode)) {
            ::close(fd);
            throw Error(path_.string(), "not a regular file");
        }
        size_ = static_cast<std::size_t>(info.st_size);
        if (size_ > 0) {  // mmap rejects a zero length; an empty file maps to an empty span
            void* mapped = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
            if (mapped == MAP_FAILED) {
                const int saved = errno;
                ::close(fd);
                errno = saved;
                fail("cannot mmap");
            }
            data_ = static_cast<const std::byte*>(mapped);
        }
        ::close(fd);  // the mapping keeps the file alive
    }

    MappedFile(MappedFile&& other) noexcept
        : path_(std::move(other.path_)),
          data_(std::exchange(other.data_, nullptr)),
          size_(std::exchange(other.size_, 0)) {}
    MappedFile& operator=(MappedFile&& other) noexcept {
        if (this != &other) {
            unmap();
            path_ = std::move(other.path_);
            data_ = std::exchange(other.data_, nullptr);
            size_ = std::exchange(other.size_, 0);
        }
        return *this;
    }
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    ~MappedFile() { unmap(); }

    std::span<const std::byte> bytes() const { return {data_, size_}; }
    std::size_t size() const { return size_; }
    const std::filesystem::path& path() const { return path_; }

private:
    [[noreturn]] void fail(const char* action) const {
        throw Error(path_.string(), std::string(action) + ": " + std::strerror(errno));
    }
    void unmap() noexcept {
        if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
        data_ = nullptr;
    }

    std::filesystem::path path_;
    const std::byte* data_ = nullptr;
    std::size_t size_ = 0;
};

// The whole file as a string (JSON files: config.json, tokenizer.json).
inline std::string read_text_file(const std::filesystem::path& path) {
    const MappedFile file(path);
    const auto bytes = file.bytes();
    return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

}  // namespace luminal::io
