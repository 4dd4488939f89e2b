#pragma once
// NVRTC, opened at run time: generated source -> cubin for one architecture
// (sm_90 unless told otherwise; the runtime passes its device's). Compiled
// cubins are cached in memory and on disk ($LUMINAL_CACHE_DIR, else
// ~/.cache/luminal/kernels), keyed by the source, the architecture, NVRTC's
// version and the options, so a second run of a model compiles nothing. A
// cache file holds its full key and is used only when the key matches. With
// LUMINAL_DUMP=<dir>, every source compiled lands in <dir>/kernels, and a
// source that does not compile leaves its NVRTC log beside it.
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "luminal/cuda/shared_library.hpp"

namespace luminal::cuda {

// The name of a kernel cache file: FNV-1a of its key (the file holds the key in full, to check).
inline std::uint64_t cache_key_hash(std::string_view key) {
    std::uint64_t h = 1469598103934665603ull;
    for (unsigned char c : key) h = (h ^ c) * 1099511628211ull;
    return h;
}

class Nvrtc {
public:
    // The process-wide NVRTC; Error when the library is not installed.
    static Nvrtc& get() {
        static Nvrtc nvrtc;
        return nvrtc;
    }
    static bool available() {
        try {
            get();
            return true;
        } catch (const Error&) {
            return false;
        }
    }

    std::string version() const { return fmt::format("{}.{}", major_, minor_); }

    // Cubin of `source` for `arch` (e.g. 90); an Error naming `kernel`, with
    // NVRTC's log, when it does not compile.
    std::shared_ptr<const std::vector<char>> compile(const std::string& source, int arch = 90,
                                                     std::string_view kernel = "a generated kernel") {
        const std::vector<std::string> options = options_for(arch);
        std::string key = key_of(source, arch);
        std::lock_guard lock(mutex_);
        if (auto it = memory_.find(key); it != memory_.end()) return it->second;
        const auto start = std::chrono::steady_clock::now();
        auto cubin = read_cache(key);
        const auto dumped = dump_source(key, source);
        if (cubin) {
            ++from_disk_;
        } else {
            cubin = std::make_shared<const std::vector<char>>(run_nvrtc(source, options, kernel, dumped));
            ++compiled_;
            write_cache(key, *cubin);
        }
        memory_.emplace(std::move(key), cubin);
        seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        return cubin;
    }

    // Whether the disk cache holds the cubin of `source` for `arch`.
    bool cached_on_disk(const std::string& source, int arch = 90) const { return read_cache(key_of(source, arch)) != nullptr; }

    // Sources compiled by NVRTC in this process (not found in either cache).
    std::size_t compiled() const { return compiled_; }
    // Sources whose cubin came from the disk cache in this process.
    std::size_t from_disk() const { return from_disk_; }
    // Wall time this process spent getting cubins not already in memory: NVRTC's builds and disk cache reads.
    double seconds() const { return seconds_; }

    // Where LUMINAL_DUMP puts kernel sources; empty when it is not set.
    static std::filesystem::path dump_dir() {
        if (const char* dir = std::getenv("LUMINAL_DUMP"); dir && *dir) return std::filesystem::path(dir) / "kernels";
        return {};
    }

    static std::filesystem::path cache_dir() {
        if (const char* dir = std::getenv("LUMINAL_CACHE_DIR")) return dir;
        if (const char* home = std::getenv("HOME")) return std::filesystem::path(home) / ".cache/luminal/kernels";
        return {};
    }

private:
    using Program = void*;
    using CreateFn = int (*)(Program*, const char*, const char*, int, const char* const*, const char* const*);
    using CompileFn = int (*)(Program, int, const char* const*);
    using SizeFn = int (*)(Program, std::size_t*);
    using GetFn = int (*)(Program, char*);
    using DestroyFn = int (*)(Program*);
    using VersionFn = int (*)(int*, int*);
    using ErrorFn = const char* (*)(int);

    Nvrtc() {
        lib_ = SharedLibrary::open({"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}, "NVRTC (the CUDA runtime compiler)");
        create_ = lib_->symbol<CreateFn>("nvrtcCreateProgram");
        compile_ = lib_->symbol<CompileFn>("nvrtcCompileProgram");
        log_size_ = lib_->symbol<SizeFn>("nvrtcGetProgramLogSize");
        log_ = lib_->symbol<GetFn>("nvrtcGetProgramLog");
        cubin_size_ = lib_->symbol<SizeFn>("nvrtcGetCUBINSize");
        cubin_ = lib_->symbol<GetFn>("nvrtcGetCUBIN");
        destroy_ = lib_->symbol<DestroyFn>("nvrtcDestroyProgram");
        error_ = lib_->symbol<ErrorFn>("nvrtcGetErrorString");
        lib_->symbol<VersionFn>("nvrtcVersion")(&major_, &minor_);
    }

    std::string key_of(const std::string& source, int arch) const {
        std::string key = fmt::format("nvrtc {} sm_{}", version(), arch);
        for (auto& o : options_for(arch)) key += " " + o;
        return key + "\n" + source;
    }

    std::vector<std::string> options_for(int arch) const {
        std::vector<std::string> o{fmt::format("--gpu-architecture=sm_{}", arch), "--std=c++17", "-default-device"};
        for (const char* env : {"CUDA_HOME", "CUDA_PATH"})
            if (const char* v = std::getenv(env)) o.push_back(fmt::format("--include-path={}/include", v));
#ifdef LUMINAL_CUDA_INCLUDE_DIR
        o.push_back(fmt::format("--include-path={}", LUMINAL_CUDA_INCLUDE_DIR));
#endif
        o.push_back("--include-path=/usr/local/cuda/include");
        return o;
    }

    std::vector<char> run_nvrtc(const std::string& source, const std::vector<std::string>& options, std::string_view kernel,
                                const std::filesystem::path& dumped) {
        Program program = nullptr;
        check_nvrtc(create_(&program, source.c_str(), "luminal_kernel.cu", 0, nullptr, nullptr), "nvrtcCreateProgram");
        std::vector<const char*> argv;
        for (auto& o : options) argv.push_back(o.c_str());
        const int status = compile_(program, static_cast<int>(argv.size()), argv.data());
        if (status != 0) {
            std::size_t size = 0;
            log_size_(program, &size);
            std::string log(size, '\0');
            log_(program, log.data());
            destroy_(&program);
            if (dumped.empty())
                throw Error("nvrtc", fmt::format("{} does not compile ({}):\n{}\n--- source (LUMINAL_DUMP=<dir> keeps it) ---\n{}",
                                                 kernel, error_(status), log, source));
            auto log_file = dumped;
            log_file.replace_extension(".log");
            std::ofstream(log_file) << log;
            throw Error("nvrtc", fmt::format("{} does not compile ({}); source {}, log {}:\n{}", kernel, error_(status),
                                             dumped.string(), log_file.string(), log));
        }
        std::size_t size = 0;
        check_nvrtc(cubin_size_(program, &size), "nvrtcGetCUBINSize");
        std::vector<char> cubin(size);
        check_nvrtc(cubin_(program, cubin.data()), "nvrtcGetCUBIN");
        destroy_(&program);
        return cubin;
    }

    void check_nvrtc(int status, const char* call) const {
        check(status == 0, "nvrtc", "{} failed: {}", call, error_(status));
    }

    static std::filesystem::path cache_file(const std::string& key) {
        const auto dir = cache_dir();
        return dir.empty() ? dir : dir / fmt::format("{:016x}.cubin", cache_key_hash(key));
    }

    // Best effort, like the cache: the source's path, or empty.
    static std::filesystem::path dump_source(const std::string& key, const std::string& source) {
        const auto dir = dump_dir();
        if (dir.empty()) return {};
        std::error_code ec;
        std::filesystem::create_directories(dir, ec);
        const auto file = dir / fmt::format("{:016x}.cu", cache_key_hash(key));
        std::ofstream out(file);
        out << source;
        return out ? file : std::filesystem::path{};
    }

    std::shared_ptr<const std::vector<char>> read_cache(const std::string& key) const {
        const auto file = cache_file(key);
        if (file.empty()) return nullptr;
        std::ifstream in(file, std::ios::binary);
        if (!in) return nullptr;
        std::uint64_t key_size = 0;
        if (!in.read(reinterpret_cast<char*>(&key_size), sizeof key_size) || key_size != key.size()) return nullptr;
        std::string stored(key_size, '\0');
        if (!in.read(stored.data(), static_cast<std::streamsize>(key_size)) || stored != key) return nullptr;
        // The rest of the file in one read (a character at a time was most of a cached plan's load).
        std::error_code ec;
        const std::uintmax_t size = std::filesystem::file_size(file, ec), header = sizeof key_size + key_size;
        if (ec || size <= header) return nullptr;
        std::vector<char> cubin(static_cast<std::size_t>(size - header));
        if (!in.read(cubin.data(), static_cast<std::streamsize>(cubin.size()))) return nullptr;
        return std::make_shared<const std::vector<char>>(std::move(cubin));
    }

    // Best effort: a cache that cannot be written only costs a compile next time.
    void write_cache(const std::string& key, const std::vector<char>& cubin) const {
        const auto file = cache_file(key);
        if (file.empty()) return;
        std::error_code ec;
        std::filesystem::create_directories(file.parent_path(), ec);
        const auto partial = file.string() + fmt::format(".{}.tmp", reinterpret_cast<std::uintptr_t>(&cubin));
        {
            std::ofstream out(partial, std::ios::binary);
            if (!out) return;
            const std::uint64_t key_size = key.size();
            out.write(reinterpret_cast<const char*>(&key_size), sizeof key_size);
            out.write(key.data(), static_cast<std::streamsize>(key.size()));
            out.write(cubin.data(), static_cast<std::streamsize>(cubin.size()));
        }
        if (std::filesystem::file_size(partial, ec) != sizeof(std::uint64_t) + key.size() + cubin.size()) {
            std::filesystem::remove(partial, ec);
            return;
        }
        std::filesystem::rename(partial, file, ec);  // atomic: readers see a whole file or none
    }

    std::unique_ptr<SharedLibrary> lib_;
    CreateFn create_ = nullptr;
    CompileFn compile_ = nullptr;
    SizeFn log_size_ = nullptr, cubin_size_ = nullptr;
    GetFn log_ = nullptr, cubin_ = nullptr;
    DestroyFn destroy_ = nullptr;
    ErrorFn error_ = nullptr;
    int major_ = 0, minor_ = 0;
    std::mutex mutex_;
    std::unordered_map<std::string, std::shared_ptr<const std::vector<char>>> memory_;
    std::size_t compiled_ = 0;
    std::size_t from_disk_ = 0;
    double seconds_ = 0;
};

}  // namespace luminal::cuda
