// Loading safetensors weights against the memory-bandwidth bound.
//
// Writes a model-sized f32 file (default 1 GiB in 16 MiB tensors; set
// LUMINAL_BENCH_SAFETENSORS_BYTES to change it) and a bf16 file with the same
// element count to a temporary directory, deleted at exit, then measures:
//  * BM_OpenValidate: open + header validation (no tensor bytes touched);
//  * BM_OpenAndSumMapped: open, then read every tensor in place through the
//    mapping (a fresh mapping each time: page faults on the page cache count);
//  * BM_SumMapped: the same pass over a file already open and paged in;
//  * BM_SumVector: the same pass over an in-memory std::vector of the same
//    size, the memory-bandwidth peer the two above are compared with;
//  * BM_Bf16ToF32: to_f32 of every bf16 tensor (GB/s counts the f32 produced).
// Prints median ratios (run with --benchmark_repetitions=N for medians).
#include <benchmark/benchmark.h>

#include <luminal/io/safetensors.hpp>
#include <luminal/io/safetensors_convert.hpp>
#include <luminal/io/safetensors_writer.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "ratio_main.hpp"

namespace {

namespace fs = std::filesystem;
using luminal::io::SafetensorsDType;
using luminal::io::SafetensorsFile;
using luminal::io::SafetensorsRecord;

constexpr std::size_t kTensorBytes = std::size_t{16} << 20;

// Eight independent partial sums, so the pass is limited by loads, not by the
// latency of one dependent add chain. Both the mapped and the peer pass use it.
float sum_floats(std::span<const float> values) {
    float partial[8] = {};
    std::size_t i = 0;
    for (; i + 8 <= values.size(); i += 8)
        for (std::size_t k = 0; k < 8; ++k) partial[k] += values[i + k];
    for (; i < values.size(); ++i) partial[0] += values[i];
    float total = 0;
    for (float p : partial) total += p;
    return total;
}

std::size_t total_bytes() {
    const char* text = std::getenv("LUMINAL_BENCH_SAFETENSORS_BYTES");
    const std::size_t bytes = text != nullptr ? std::strtoull(text, nullptr, 10) : std::size_t{1} << 30;
    return std::max<std::size_t>(bytes / kTensorBytes, 1) * kTensorBytes;
}

// The two files and the in-memory peer, made on first use and removed at exit.
struct Fixture {
    fs::path dir;
    fs::path f32_path, bf16_path;
    std::vector<float> peer;

    Fixture() {
        dir = fs::temp_directory_path() / ("luminal_bench_safetensors_" + std::to_string(::getpid()));
        fs::create_directories(dir);
        f32_path = dir / "f32.safetensors";
        bf16_path = dir / "bf16.safetensors";

        const std::size_t count = total_bytes() / sizeof(float);
        peer.resize(count);
        std::uint32_t state = 12345;  // xorshift: cheap, deterministic values in [-1, 1)
        for (float& v : peer) {
            state ^= state << 13, state ^= state >> 17, state ^= state << 5;
            v = static_cast<float>(state >> 8) * 0x1p-23f - 1.0f;
        }
        std::vector<std::uint16_t> bf16(count);
        for (std::size_t i = 0; i < count; ++i) bf16[i] = luminal::f32_to_bf16_bits(peer[i]);

        write(f32_path, SafetensorsDType::F32, std::as_bytes(std::span(peer)), sizeof(float));
        write(bf16_path, SafetensorsDType::BF16, std::as_bytes(std::span(bf16)), sizeof(std::uint16_t));
    }
    ~Fixture() {
        std::error_code ignored;
        fs::remove_all(dir, ignored);
    }

    // Splits `bytes` into tensors of kTensorBytes worth of elements (as a model
    // has many weight matrices) and writes them.
    static void write(const fs::path& path, SafetensorsDType dtype, std::span<const std::byte> bytes,
                      std::size_t element_size) {
        const std::size_t tensor_bytes = kTensorBytes / sizeof(float) * element_size;
        std::vector<SafetensorsRecord> records;
        for (std::size_t offset = 0; offset < bytes.size(); offset += tensor_bytes) {
            const std::size_t n = std::min(tensor_bytes, bytes.size() - offset);
            records.push_back({"layers." + std::to_string(records.size()) + ".weight", dtype,
                               {static_cast<std::int64_t>(n / element_size / 1024), 1024}, bytes.subspan(offset, n)});
        }
        luminal::io::write_safetensors(path, records);
    }
};

Fixture& fixture() {
    static Fixture instance;
    return instance;
}

float sum_file(const SafetensorsFile& file) {
    float total = 0;
    for (const auto& tensor : file.tensors()) total += sum_floats(tensor.values<float>());
    return total;
}

void BM_OpenValidate(benchmark::State& state) {
    const fs::path path = fixture().f32_path;
    for (auto _ : state) {
        auto file = SafetensorsFile::open(path);
        benchmark::DoNotOptimize(file.size());
    }
}

void BM_OpenAndSumMapped(benchmark::State& state) {
    const fs::path path = fixture().f32_path;
    for (auto _ : state) benchmark::DoNotOptimize(sum_file(SafetensorsFile::open(path)));
    state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(fixture().peer.size() * sizeof(float)));
}

void BM_SumMapped(benchmark::State& state) {
    const auto file = SafetensorsFile::open(fixture().f32_path);
    for (auto _ : state) benchmark::DoNotOptimize(sum_file(file));
    state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(fixture().peer.size() * sizeof(float)));
}

void BM_SumVector(benchmark::State& state) {
    const std::vector<float>& peer = fixture().peer;
    for (auto _ : state) benchmark::DoNotOptimize(sum_floats(peer));
    state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(peer.size() * sizeof(float)));
}

void BM_Bf16ToF32(benchmark::State& state) {
    const auto file = SafetensorsFile::open(fixture().bf16_path);
    for (auto _ : state)
        for (const auto& tensor : file.tensors()) benchmark::DoNotOptimize(luminal::io::to_f32(tensor).data());
    state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(fixture().peer.size() * sizeof(float)));
}

BENCHMARK(BM_OpenValidate)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_OpenAndSumMapped)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SumMapped)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SumVector)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Bf16ToF32)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
    return luminal_bench::run_with_ratios(argc, argv, {{"BM_OpenAndSumMapped", "BM_SumVector"},
                                                       {"BM_SumMapped", "BM_SumVector"}});
}
