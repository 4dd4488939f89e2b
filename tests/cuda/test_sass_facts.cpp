// What the cost model reads from compiled kernels (cuda/sass_facts.hpp): the
// facts of small kernels written here, whose SASS shape is known by
// construction, then the facts the plan report relies on for the decode
// kernels of the Llama-3.1-8B shape, compiled by NVRTC with the runtime's
// options. A compiler or source change that breaks them fails here, not on a
// device. Needs NVRTC (the CUDA toolkit) and cuobjdump/nvdisasm (scripts/setup.sh).
#include <doctest/doctest.h>
#include "llama8b_decode_plan.hpp"

#include <luminal/cuda.hpp>
#include <luminal/cuda/sass_facts.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

namespace {

using namespace luminal;

#ifdef LUMINAL_HAS_CUDA_TOOLKIT
cuda::SassFacts facts_of(const std::string& source, const char* entry) {
    const auto cubin = cuda::Nvrtc::get().compile(source, 90, entry);
    const auto facts = cuda::sass_facts(*cubin, entry);
    REQUIRE_MESSAGE(facts.has_value(), "cuobjdump could not read ", entry);
    return *facts;
}

// A kernel `name` whose loop issues four independent 16-byte loads a trip and uses them only after all are issued.
std::string four_loads_source(const std::string& name) {
    return "extern \"C\" __global__ void " + name + R"((const float4* __restrict__ in, float* out, int n) {
  float acc = 0.0f;
  #pragma unroll 1
  for (int i = threadIdx.x; i + 768 < n; i += 1024) {
    const float4 a = in[i], b = in[i + 256], c = in[i + 512], d = in[i + 768];
    acc += (a.x + a.y + a.z + a.w) * (b.x + b.y + b.z + b.w) + (c.x + c.y + c.z + c.w) * (d.x + d.y + d.z + d.w);
  }
  out[threadIdx.x] = acc;
})";
}
#endif

}  // namespace

#ifdef LUMINAL_HAS_CUDA_TOOLKIT
TEST_CASE("SASS facts of kernels whose shape is known: loads in flight, a serial chain, a 64-bit division's call, a stack array") {
    REQUIRE_MESSAGE(cuda::sass_tools_available(), "cuobjdump and nvdisasm are needed (scripts/setup.sh installs them)");
    // Four independent 16-byte loads per trip, used only after all are issued: 64 bytes in flight.
    const cuda::SassFacts four = facts_of(
        "extern \"C\" __global__ __launch_bounds__(256, 1) void four(const float4* __restrict__ in, float* out, int n);\n" +
            four_loads_source("four"),
        "four");
    CHECK(four.main_loop_loads == 4);
    CHECK(four.main_loop_bytes_in_flight == 64);
    CHECK(four.main_loop_instructions >= 4 + 15 + 1);  // the loads, the arithmetic, the branch back
    CHECK(four.main_loop_instructions < four.instructions);
    CHECK(four.serial_load_loops == 0);
    CHECK(four.calls == 0);
    CHECK(four.stack_bytes == 0);

    // A merge loop reading more scalar bytes per trip than the streaming loop reads in 16-byte vectors: the
    // streaming loop is the main one.
    const cuda::SassFacts merged = facts_of(R"(extern "C" __global__ void merged(const float4* __restrict__ in, const float* __restrict__ parts, float* out, int n, int splits) {
  float acc = 0.0f;
  #pragma unroll 1
  for (int i = threadIdx.x; i + 256 < n; i += 512) {
    const float4 a = in[i], b = in[i + 256];
    acc += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
  }
  #pragma unroll 1
  for (int k = 0; k + 15 < splits; k += 16) {
    float s = 0.0f;
    #pragma unroll
    for (int u = 0; u < 16; ++u) s += parts[(k + u) * 256 + threadIdx.x];
    acc += s;
  }
  out[threadIdx.x] = acc;
})", "merged");
    CHECK(merged.main_loop_loads == 2);
    CHECK(merged.main_loop_bytes_in_flight == 32);

    // A loop that issues its loads, then walks what they brought in a loop of shared-memory reads (a quantized
    // GEMV's chunk loop): its own four loads are the main loop's, the nested loop's instructions are not its trip.
    const cuda::SassFacts chunks = facts_of(R"(extern "C" __global__ __launch_bounds__(256, 1) void chunks(const float4* __restrict__ in, float* out, int n, int inner) {
  __shared__ float4 stage[1024];
  float acc = 0.0f;
  #pragma unroll 1
  for (int i = threadIdx.x; i + 768 < n; i += 1024) {
    const float4 a = in[i], b = in[i + 256], c = in[i + 512], d = in[i + 768];
    stage[threadIdx.x] = a, stage[threadIdx.x + 256] = b, stage[threadIdx.x + 512] = c, stage[threadIdx.x + 768] = d;
    __syncthreads();
    #pragma unroll 1
    for (int j = 0; j < inner; ++j) {
      const float4 v = stage[(threadIdx.x + 32 * j) & 1023];
      acc += v.x * v.y + v.z * v.w;
    }
    __syncthreads();
  }
  out[threadIdx.x] = acc;
})", "chunks");
    CHECK(chunks.main_loop_loads == 4);
    CHECK(chunks.main_loop_bytes_in_flight == 64);
    CHECK(chunks.main_loop_instructions < chunks.instructions);

    // Each load's address comes from the one before: one load in flight per trip.
    const cuda::SassFacts chain = facts_of(R"(extern "C" __global__ void chain(const int* __restrict__ next, int* out, int steps) {
  int at = threadIdx.x;
  #pragma unroll 1
  for (int i = 0; i < steps; ++i) at = next[at];
  out[threadIdx.x] = at;
})", "chain");
    CHECK(chain.main_loop_loads == 1);
    CHECK(chain.main_loop_bytes_in_flight == 4);
    CHECK(chain.serial_load_loops == 1);

    // A pipeline of copies to shared memory (cp.async): two 16-byte copies per trip, each trip waiting only for the
    // trip before, so both trips' copies are in flight while it waits.
    const cuda::SassFacts copies = facts_of(R"cu(extern "C" __global__ void copies(const float4* __restrict__ in, float* out, int n) {
  __shared__ __align__(16) float4 stage[2][512];
  float acc = 0.0f;
  int s = 0;
  #pragma unroll 1
  for (int i = threadIdx.x; i + 256 < n; i += 512, s ^= 1) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"((unsigned)__cvta_generic_to_shared(&stage[s][threadIdx.x])), "l"(in + i) : "memory");
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"((unsigned)__cvta_generic_to_shared(&stage[s][threadIdx.x + 256])), "l"(in + i + 256) : "memory");
    asm volatile("cp.async.commit_group;\n" ::: "memory");
    asm volatile("cp.async.wait_group 1;\n" ::: "memory");
    const float4 a = stage[s ^ 1][threadIdx.x], b = stage[s ^ 1][threadIdx.x + 256];
    acc += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
  }
  out[threadIdx.x] = acc;
})cu", "copies");
    CHECK(copies.main_loop_loads == 2);
    CHECK(copies.main_loop_bytes_in_flight == 2 * 32);
    CHECK(copies.serial_load_loops == 0);

    // A 64-bit division by a value known only at run time is a subroutine call.
    const cuda::SassFacts divide = facts_of(R"(extern "C" __global__ void divide(const long long* a, long long b, long long* out) {
  out[threadIdx.x] = a[threadIdx.x] / b;
})", "divide");
    CHECK(divide.calls >= 1);
    // In a loop that reads memory, the call is the loop's.
    const cuda::SassFacts divide_loop = facts_of(R"(extern "C" __global__ void divide_loop(const long long* a, long long b, long long* out, int n) {
  long long acc = 0;
  for (int i = threadIdx.x; i < n; i += 256) acc += a[i] / b;
  out[threadIdx.x] = acc;
})", "divide_loop");
    CHECK(divide_loop.main_loop_calls >= 1);
    CHECK(four.main_loop_calls == 0);

    // An array written and read at indexes known only at run time lives on the stack.
    const cuda::SassFacts local = facts_of(R"(extern "C" __global__ void local(const int* in, float* out) {
  float table[64];
  for (int i = 0; i < 64; ++i) table[i] = 0.0f;
  for (int i = 0; i < 64; ++i) table[in[i] & 63] += (float)i;
  out[threadIdx.x] = table[in[threadIdx.x] & 63];
})", "local");
    CHECK(local.stack_bytes >= 256);
    CHECK(local.registers > 0);
    CHECK(local.instructions > 0);
}

// sinf and cosf reduce an argument of magnitude 105615 or more by Payne-Hanek: a loop over a table in constant
// memory, behind a branch RoPE's angles do not take. A trip of the kernel's own loop is
// priced on the path that runs: its 16-byte load, not the table's 4-byte ones in a loop of their own.
TEST_CASE("SASS facts of a grid loop taking sines and cosines: its own loads and the instructions that run, not the slow path's") {
    REQUIRE_MESSAGE(cuda::sass_tools_available(), "cuobjdump and nvdisasm are needed (scripts/setup.sh installs them)");
    const cuda::SassFacts rope = facts_of(R"(extern "C" __global__ void rope(const float4* __restrict__ in, float* out, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const float4 v = in[i];
    out[i] = sinf(v.x) * v.z + cosf(v.y) * v.w;
  }
})",
                                          "rope");
    CHECK(rope.main_loop_loads == 1);
    CHECK(rope.main_loop_bytes_in_flight == 16);
    CHECK(rope.serial_load_loops == 1);  // the grid loop's one load a trip; the table loops are not counted
    CHECK(rope.main_loop_instructions < rope.instructions / 2);
}

TEST_CASE("SASS facts are kept beside the cubins, and a cubin other than the one they were read from reads its own") {
    REQUIRE_MESSAGE(cuda::sass_tools_available(), "cuobjdump and nvdisasm are needed (scripts/setup.sh installs them)");
    const auto dir = std::filesystem::temp_directory_path() / fmt::format("luminal-sass-cache-{}", ::getpid());
    std::filesystem::remove_all(dir);
    ::setenv("LUMINAL_CACHE_DIR", dir.c_str(), 1);
    // Two kernels of one entry name: a chain of dependent loads, and four independent 16-byte loads a trip.
    const auto chain = cuda::Nvrtc::get().compile(R"(extern "C" __global__ void k(const int* __restrict__ next, int* out, int steps) {
  int at = threadIdx.x;
  #pragma unroll 1
  for (int i = 0; i < steps; ++i) at = next[at];
  out[threadIdx.x] = at;
})", 90, "k");
    const auto four = cuda::Nvrtc::get().compile(four_loads_source("k"), 90, "k");
    const auto chain_file = cuda::sass_detail::cache_file(*chain, "k"), four_file = cuda::sass_detail::cache_file(*four, "k");
    CHECK(chain_file.parent_path() == dir);
    CHECK(chain_file != four_file);

    const auto read = cuda::sass_facts(*chain, "k");
    REQUIRE(read.has_value());
    CHECK(read->main_loop_bytes_in_flight == 4);
    CHECK(read->serial_load_loops == 1);
    REQUIRE(std::filesystem::exists(chain_file));
    CHECK(cuda::sass_facts(*chain, "k") == read);

    // Facts planted under the chain's key are what a later read of the chain returns: the file is read, not the SASS.
    const std::string planted = cuda::sass_detail::cache_key(*chain, "k") + "1 2 3 4 5 6 7 8 9.5 10\n";
    std::ofstream(chain_file, std::ios::binary) << planted;
    const auto from_file = cuda::sass_facts(*chain, "k");
    REQUIRE(from_file.has_value());
    CHECK(from_file->registers == 1);
    CHECK(from_file->tensor_products == 5);
    CHECK(from_file->main_loop_bytes_in_flight == 9.5);
    CHECK(from_file->serial_load_loops == 10);

    // The same file where the other cubin's facts belong (as if their names collided) is not its facts:
    // that cubin's SASS is read, and its own facts replace the file.
    std::ofstream(four_file, std::ios::binary) << planted;
    const auto other = cuda::sass_facts(*four, "k");
    REQUIRE(other.has_value());
    CHECK(other->main_loop_bytes_in_flight == 64);
    CHECK(other->serial_load_loops == 0);
    CHECK(other->registers != 1);
    const auto kept = cuda::sass_detail::read_cached(*four, "k");
    REQUIRE(kept.has_value());
    CHECK(*kept == other);
    // Nor are the chain's facts another entry's in the same cubin.
    CHECK_FALSE(cuda::sass_detail::read_cached(*chain, "k2").has_value());

    ::unsetenv("LUMINAL_CACHE_DIR");
    std::filesystem::remove_all(dir);
}

TEST_CASE("SASS facts: that a cubin has no code for an entry is kept too, and read back instead of running cuobjdump again") {
    REQUIRE_MESSAGE(cuda::sass_tools_available(), "cuobjdump and nvdisasm are needed (scripts/setup.sh installs them)");
    const auto dir = std::filesystem::temp_directory_path() / fmt::format("luminal-sass-none-{}", ::getpid());
    std::filesystem::remove_all(dir);
    ::setenv("LUMINAL_CACHE_DIR", dir.c_str(), 1);
    const auto cubin = cuda::Nvrtc::get().compile(four_loads_source("k"), 90, "k");
    CHECK_FALSE(cuda::sass_facts(*cubin, "absent").has_value());
    const auto kept = cuda::sass_detail::read_cached(*cubin, "absent");
    REQUIRE(kept.has_value());
    CHECK_FALSE(kept->has_value());
    // "No code" planted under an entry the cubin has is what a later read returns: the file is read, not the SASS.
    std::ofstream(cuda::sass_detail::cache_file(*cubin, "k"), std::ios::binary) << cuda::sass_detail::cache_key(*cubin, "k") << "none\n";
    CHECK_FALSE(cuda::sass_facts(*cubin, "k").has_value());
    ::unsetenv("LUMINAL_CACHE_DIR");
    std::filesystem::remove_all(dir);
}

TEST_CASE("the 8B shape's decode kernels as compiled: every GEMV issues all its weight loads before the first product, none spills") {
    REQUIRE_MESSAGE(cuda::sass_tools_available(), "cuobjdump and nvdisasm are needed (scripts/setup.sh installs them)");
    // Every layer's kernels are the same: two show the first and the rest.
    const cuda::PlanReport report = luminal_test::llama8b_decode_plan(2, true).report;
    CAPTURE(report.to_string());
    CHECK(report.sass_read);
    int gemvs = 0, attentions = 0;
    for (const cuda::PlanReportRow& row : report.rows) {
        if (row.kernel == "memset" || row.kernel == "copy" || row.kernel == "cuBLASLt") continue;
        CAPTURE(row.kernel);
        CAPTURE(row.op);
        REQUIRE(row.facts.has_value());
        const bool gemv = row.op.find("Gemv") != std::string::npos;
        if (gemv || row.kernel == "luminal_attention") CHECK(row.facts->stack_bytes == 0);
        if (row.kernel == "luminal_attention") {
            ++attentions;
            // 32-bit positions and affine views: no 64-bit division in the key loop (the calls left are the
            // slow paths of the final f32 divisions); two blocks per SM; both keys' K and V issued before the
            // first product; its instructions priced from its own loop.
            CHECK(row.facts->main_loop_calls == 0);
            CHECK(row.facts->calls <= 8);
            CHECK(row.facts->registers <= 128);
            CHECK(row.facts->main_loop_bytes_in_flight >= 64);
            CHECK(row.work.loop_instructions == row.facts->main_loop_instructions);
            CHECK(row.work.loop_trips > 0);
        }
        if (!gemv) continue;
        ++gemvs;
        // Four 16-byte loads per weight row a lane walks (a launch group's GEMVs: its members').
        CHECK(row.facts->main_loop_bytes_in_flight >= 64);
        CHECK(row.work.dram_in_flight == row.facts->main_loop_bytes_in_flight);  // what the model prices
    }
    CHECK(gemvs >= 2 * 3 + 1);  // q/k/v, o, gate/up and down per layer share launches; the LM head
    CHECK(attentions == 2);
}

TEST_CASE("the 8B shape's decode kernels with Q4_K weights as compiled: every quantized GEMV issues its chunk's weight loads "
          "before the first use, none spills") {
    REQUIRE_MESSAGE(cuda::sass_tools_available(), "cuobjdump and nvdisasm are needed (scripts/setup.sh installs them)");
    const cuda::PlanReport report = luminal_test::llama8b_decode_plan(2, true, 1, 1024, QuantFormat::Q4_K).report;
    CAPTURE(report.to_string());
    int quantized = 0;
    for (const cuda::PlanReportRow& row : report.rows) {
        // Every product here is quantized: q/k/v's share a launch group, whose code is theirs.
        if (row.op.find("QuantizedMatmul") == std::string::npos && !row.op.starts_with("group: cuda.Gemv")) continue;
        CAPTURE(row.op);
        REQUIRE(row.facts.has_value());
        ++quantized;
        // Four 16-byte loads a lane makes per chunk of blocks, where the loop staging the activation reads 4 bytes a trip.
        CHECK(row.facts->main_loop_bytes_in_flight >= 64);
        CHECK(row.work.dram_in_flight == row.facts->main_loop_bytes_in_flight);
        CHECK(row.facts->stack_bytes == 0);
    }
    CHECK(quantized == 2 * 4 + 1);  // q/k/v, o, gate/up and down per layer; the LM head
}
#endif
