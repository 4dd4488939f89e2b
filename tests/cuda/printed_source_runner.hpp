#pragma once
// Runs the CUDA source the backend prints on the host, so CI checks the
// printed text itself and not only the IR it comes from. The sources of a
// plan are compiled into one shared library with the host C++ compiler,
// each in its own namespace, after a shim of the CUDA subset they use: the
// CUDA threads of a block are fibers switched where they wait,
// __syncthreads a barrier of the block, __shfl_xor_sync an exchange through a
// barrier of the warp, shared memory a static (blocks run one after another),
// f16/bf16 rounded to nearest even. PrintedSourceExecutor plugs this into
// cuda::BasicHostEmulator in place of the IR interpreter.
#include <dlfcn.h>
#include <doctest/doctest.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <luminal/cuda.hpp>
#include <map>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

namespace luminal_test {

inline constexpr std::string_view kCudaHostShim = R"SHIM(#include <bit>
#include <cstdint>
#include <cstring>
#include <functional>
#include <math.h>
#if !defined(__x86_64__)
#include <ucontext.h>
#endif
#include <vector>
#define LUMINAL_HOST_SHIM
#define __global__
#define __launch_bounds__(...)
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __align__(n) alignas(n)
struct luminal_dim3 { unsigned x = 0, y = 0, z = 0; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(16) float4 { float x, y, z, w; };
namespace luminal_shim {
namespace {  // internal: each compiled module keeps its own state
inline luminal_dim3 block_index, block_dim, grid_dim, thread_index;
inline unsigned short f16_bits(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f), sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) return sign | (a > 0x7f800000u ? 0x7e00u : 0x7c00u);
  if (a >= 0x477ff000u) return sign | 0x7c00u;
  if (a < 0x38800000u) return sign | (unsigned)nearbyintf(std::bit_cast<float>(a) * 16777216.0f);
  std::uint32_t h = (((a >> 23) - 112u) << 10) | ((a & 0x7fffffu) >> 13);
  const std::uint32_t rest = a & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return sign | h;
}
inline float f16_value(unsigned short h) {
  const std::uint32_t sign = (std::uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) return (sign ? -1.0f : 1.0f) * ldexpf((float)m, -24);
  if (e == 31) return std::bit_cast<float>(sign | 0x7f800000u | (m << 13));
  return std::bit_cast<float>(sign | ((e + 112u) << 23) | (m << 13));
}
inline unsigned short bf16_bits(float f) {
  std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fc0u;
  x += 0x7fffu + ((x >> 16) & 1u);
  return (unsigned short)(x >> 16);
}
// The threads of a block are fibers on one host thread, switched only where
// they wait: a barrier releases when every thread still running has arrived.
struct Barrier {
  unsigned expected = 0, arrived = 0;
  unsigned long long generation = 0;
};
struct Fiber {
#if defined(__x86_64__)
  void* sp = nullptr;
#else
  ucontext_t context;
#endif
  std::vector<char> stack = std::vector<char>(64 * 1024);
  bool done = false;
};
inline std::vector<Fiber> fibers;
inline unsigned current = 0;
#if defined(__x86_64__)
// A switch that keeps only the registers a call preserves: swapcontext also
// saves the signal mask, a system call per switch that was most of a run.
inline void* scheduler_sp = nullptr;
__attribute__((naked, noinline)) void switch_stack(void** /*save*/, void* /*load*/) {
  asm("pushq %rbp\n\tpushq %rbx\n\tpushq %r12\n\tpushq %r13\n\tpushq %r14\n\tpushq %r15\n\t"
      "movq %rsp, (%rdi)\n\tmovq %rsi, %rsp\n\t"
      "popq %r15\n\tpopq %r14\n\tpopq %r13\n\tpopq %r12\n\tpopq %rbx\n\tpopq %rbp\n\tret");
}
inline void to_scheduler() { switch_stack(&fibers[current].sp, scheduler_sp); }
inline void to_fiber(Fiber& f) { switch_stack(&scheduler_sp, f.sp); }
// The fiber's first switch pops six zero registers and returns into `entry`,
// with the stack aligned as at a call.
inline void start_fiber(Fiber& f, void (*entry)()) {
  auto top = reinterpret_cast<std::uintptr_t>(f.stack.data() + f.stack.size()) & ~std::uintptr_t{15};
  void** sp = reinterpret_cast<void**>(top);
  *--sp = nullptr;
  *--sp = reinterpret_cast<void*>(entry);
  for (int i = 0; i < 6; ++i) *--sp = nullptr;
  f.sp = sp;
}
#else
inline ucontext_t scheduler;
inline void to_scheduler() { swapcontext(&fibers[current].context, &scheduler); }
inline void to_fiber(Fiber& f) { swapcontext(&scheduler, &f.context); }
inline void start_fiber(Fiber& f, void (*entry)()) {
  getcontext(&f.context);
  f.context.uc_stack.ss_sp = f.stack.data();
  f.context.uc_stack.ss_size = f.stack.size();
  f.context.uc_link = &scheduler;
  makecontext(&f.context, entry, 0);
}
#endif
inline Barrier whole;
inline std::vector<Barrier> warps;
// cp.async: a thread's copies not yet committed, and its committed groups, oldest first.
struct AsyncCopy {
  void* to;
  const void* from;
  bool valid;
};
struct AsyncCopies {
  std::vector<AsyncCopy> open;
  std::vector<std::vector<AsyncCopy>> committed;
};
inline std::vector<AsyncCopies> async_copies;
inline unsigned long long progress = 0;
inline const std::function<void()>* kernel = nullptr;
inline void release(Barrier& b) {
  b.arrived = 0;
  ++b.generation;
  ++progress;
}
inline void wait(Barrier& b) {
  const unsigned long long generation = b.generation;
  if (++b.arrived == b.expected) return release(b);
  while (b.generation == generation) to_scheduler();
}
inline void leave(Barrier& b) {
  if (--b.expected == b.arrived && b.arrived > 0) release(b);
}
inline void run_fiber() {
  (*kernel)();
  leave(whole);
  leave(warps[current / 32]);
  fibers[current].done = true;
  ++progress;
  to_scheduler();  // for good: a finished fiber is not resumed
}
// Runs `body` for every thread of every block, a block at a time; false when
// a block's threads wait on each other for ever (a barrier not all reach).
inline bool launch(unsigned grid, unsigned block, const std::function<void()>& body) {
  grid_dim.x = grid;
  block_dim.x = block;
  kernel = &body;
  fibers.resize(block);
  for (unsigned b = 0; b < grid; ++b) {
    block_index.x = b;
    whole = Barrier{block};
    warps.assign((block + 31) / 32, Barrier{});
    async_copies.assign(block, AsyncCopies{});
    for (unsigned w = 0; w < warps.size(); ++w) warps[w].expected = block - w * 32 < 32 ? block - w * 32 : 32;
    for (Fiber& f : fibers) {
      start_fiber(f, run_fiber);
      f.done = false;
    }
    for (bool running = true; running;) {
      running = false;
      const unsigned long long before = progress;
      for (unsigned t = 0; t < block; ++t) {
        if (fibers[t].done) continue;
        running = true;
        current = t;
        thread_index.x = t;
        to_fiber(fibers[t]);
      }
      if (running && progress == before) return false;
    }
  }
  return true;
}
}  // namespace
}  // namespace luminal_shim
#define threadIdx (luminal_shim::thread_index)
#define blockIdx (luminal_shim::block_index)
#define blockDim (luminal_shim::block_dim)
#define gridDim (luminal_shim::grid_dim)
struct __half {
  unsigned short bits = 0;
  __half() = default;
  __half(int v) : bits(luminal_shim::f16_bits((float)v)) {}
};
struct __nv_bfloat16 {
  unsigned short bits = 0;
  __nv_bfloat16() = default;
  __nv_bfloat16(int v) : bits(luminal_shim::bf16_bits((float)v)) {}
};
inline float __half2float(__half h) { return luminal_shim::f16_value(h.bits); }
inline __half __float2half_rn(float f) { __half h; h.bits = luminal_shim::f16_bits(f); return h; }
inline float __bfloat162float(__nv_bfloat16 h) { return std::bit_cast<float>((std::uint32_t)h.bits << 16); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { __nv_bfloat16 h; h.bits = luminal_shim::bf16_bits(f); return h; }
inline float __int_as_float(int i) { return std::bit_cast<float>(i); }
inline float __uint_as_float(unsigned u) { return std::bit_cast<float>(u); }
inline int __popc(unsigned v) { return std::popcount(v); }
inline unsigned __float_as_uint(float f) { return std::bit_cast<unsigned>(f); }
inline __half __ushort_as_half(unsigned short bits) { __half h; h.bits = bits; return h; }
// A block's dynamic shared memory: blocks run one after another, so one static buffer serves them.
inline float* luminal_dynamic_shared() {
  alignas(16) static float storage[1 << 18];
  return storage;
}
// ex2.approx.ftz: 2^x with results below the smallest normal flushed to zero.
inline float luminal_exp2(float x) {
  const float y = exp2f(x);
  return y < 1.17549435e-38f ? 0.0f : y;
}
inline void __syncthreads() { luminal_shim::wait(luminal_shim::whole); }
inline void __syncwarp(unsigned = 0xffffffffu) { luminal_shim::wait(luminal_shim::warps[threadIdx.x / 32]); }
// The four signed byte products of a and b, plus c.
inline int __dp4a(int a, int b, int c) {
  for (int i = 0; i < 4; ++i) c += (int)(signed char)(a >> (8 * i)) * (int)(signed char)(b >> (8 * i));
  return c;
}
template <typename T>
T __shfl_xor_sync(unsigned, T value, int lane_mask) {
  static_assert(sizeof(T) <= sizeof(unsigned long long));
  static unsigned long long exchange[1024];
  const unsigned t = threadIdx.x, warp = t / 32;
  std::memcpy(&exchange[t], &value, sizeof value);
  luminal_shim::wait(luminal_shim::warps[warp]);
  T other;
  std::memcpy(&other, &exchange[warp * 32 + ((t % 32) ^ (unsigned)lane_mask)], sizeof other);
  luminal_shim::wait(luminal_shim::warps[warp]);
  return other;
}
// mma.sync m16n8k16 (bf16 in, f32 accumulation) across the warp: d += A B for
// A 16x16 and B 16x8, each lane holding the fragments the PTX ISA gives it
// (g = lane / 4, q = lane % 4; a: rows g and g + 8 of columns 2q, 2q + 1 and
// those + 8; b: rows 2q, 2q + 1 and those + 8 of column g; d: rows g and
// g + 8 of columns 2q, 2q + 1), two bf16 values per register, low half first.
inline void luminal_mma_bf16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  static unsigned a_fragments[1024][4], b_fragments[1024][2];
  const unsigned t = threadIdx.x, warp = t / 32, first = warp * 32;
  std::memcpy(a_fragments[t], a, sizeof a);
  std::memcpy(b_fragments[t], b, sizeof b);
  luminal_shim::wait(luminal_shim::warps[warp]);
  auto half = [](unsigned reg, int k) { return std::bit_cast<float>((k % 2 ? reg >> 16 : reg & 0xffffu) << 16); };
  auto a_at = [&](int row, int k) { return half(a_fragments[first + (row % 8) * 4 + (k % 8) / 2][(row >= 8) + 2 * (k >= 8)], k); };
  auto b_at = [&](int k, int col) { return half(b_fragments[first + col * 4 + (k % 8) / 2][k >= 8], k); };
  const int g = (int)(t % 32) / 4, q = (int)(t % 32) % 4;
  for (int i = 0; i < 4; ++i) {
    const int row = g + 8 * (i / 2), col = 2 * q + i % 2;
    float sum = 0.0f;
    for (int k = 0; k < 16; ++k) sum = fmaf(a_at(row, k), b_at(k, col), sum);
    d[i] += sum;
  }
  luminal_shim::wait(luminal_shim::warps[warp]);
}
// cp.async: a copy lands only when a wait completes its group, so code that reads shared memory before waiting
// for the copy into it reads the old bytes here (on the device it may read either).
inline void luminal_copy_async16(void* shared, const void* global, bool valid) {
  luminal_shim::async_copies[threadIdx.x].open.push_back({shared, global, valid});
}
inline void luminal_copy_async_commit() {
  luminal_shim::AsyncCopies& copies = luminal_shim::async_copies[threadIdx.x];
  copies.committed.push_back(std::move(copies.open));
  copies.open.clear();
}
template <int pending>
void luminal_copy_async_wait() {
  luminal_shim::AsyncCopies& copies = luminal_shim::async_copies[threadIdx.x];
  while (copies.committed.size() > static_cast<std::size_t>(pending)) {
    for (const luminal_shim::AsyncCopy& c : copies.committed.front())
      c.valid ? (void)std::memcpy(c.to, c.from, 16) : (void)std::memset(c.to, 0, 16);
    copies.committed.erase(copies.committed.begin());
  }
}
// Fibers switch only at barriers, so a read-modify-write is atomic.
inline unsigned long long atomicCAS(unsigned long long* at, unsigned long long compare, unsigned long long value) {
  const unsigned long long old = *at;
  if (old == compare) *at = value;
  return old;
}
inline int atomicMax(int* at, int value) {
  const int old = *at;
  if (value > old) *at = value;
  return old;
}
template <typename T>
T atomicAdd(T* at, T value) {
  const T old = *at;
  *at = old + value;
  return old;
}
// Blocks run one after another, so every write is seen by the next block.
inline void __threadfence() {}
)SHIM";

inline constexpr std::string_view kHostCompileFlags = "-std=c++20 -O1 -fPIC -pthread";

// Runs a host compile; its output in the Error when it fails.
inline void host_compile(const std::string& arguments, const std::filesystem::path& log) {
    const std::string command = fmt::format("{} {} {} > {} 2>&1", LUMINAL_TEST_HOST_CXX, kHostCompileFlags, arguments, log.string());
    if (std::system(command.c_str()) != 0) {
        std::ifstream in(log);
        throw luminal::Error("printed source", fmt::format("the host compile failed ({}):\n{}", command,
                                                           std::string(std::istreambuf_iterator<char>(in), {})));
    }
}

// The shim as a header precompiled once per process: parsing it was most of
// each module's compile.
class PrecompiledShim {
public:
    static const std::filesystem::path& directory() {
        static const PrecompiledShim shim;
        return shim.dir_;
    }
    PrecompiledShim(const PrecompiledShim&) = delete;
    PrecompiledShim& operator=(const PrecompiledShim&) = delete;

private:
    PrecompiledShim() : dir_(std::filesystem::temp_directory_path() / fmt::format("luminal-shim-{}", ::getpid())) {
        std::filesystem::create_directories(dir_);
        std::ofstream(dir_ / "shim.hpp") << kCudaHostShim;
        host_compile(fmt::format("-x c++-header -o {} {}", (dir_ / "shim.hpp.gch").string(), (dir_ / "shim.hpp").string()),
                     dir_ / "compile.log");
    }
    ~PrecompiledShim() {
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    }
    std::filesystem::path dir_;
};

// The sources of one plan, compiled for the host; entries by (source, entry name).
class PrintedSourceModule {
public:
    using Entry = bool (*)(unsigned grid, unsigned block, void* const* args);  // false: the threads deadlocked

    explicit PrintedSourceModule(const std::vector<std::string>& sources) {
        static int serial = 0;
        dir_ = std::filesystem::temp_directory_path() / fmt::format("luminal-printed-{}-{}", ::getpid(), serial++);
        std::filesystem::create_directories(dir_);
        std::string unit;
        for (std::size_t i = 0; i < sources.size(); ++i) {
            std::string body = sources[i];
            for (const char* include : {"#include <cuda_fp16.h>\n", "#include <cuda_bf16.h>\n"})
                if (auto at = body.find(include); at != std::string::npos) body.erase(at, std::string(include).size());
            std::string renames, undoes, wrappers;
            const std::string_view opening = "extern \"C\" __global__ void ";
            for (std::size_t at = body.find(opening); at != std::string::npos; at = body.find(opening, at + 1)) {
                const std::size_t name = at + opening.size(), open = body.find('(', name), close = body.find(')', open);
                const std::string entry = body.substr(name, open - name), symbol = fmt::format("k{}_{}", i, entry);
                renames += fmt::format("#define {} {}\n", entry, symbol);
                undoes += fmt::format("#undef {}\n", entry);
                wrappers += wrapper(symbol, body.substr(open + 1, close - open - 1));
                names_.emplace(std::make_pair(sources[i], entry), "shim_" + symbol);
            }
            unit += renames + fmt::format("namespace k{} {{\n{}\n{}}}\n", i, body, wrappers) + undoes;
        }
        const auto source = dir_ / "kernels.cpp", library = dir_ / "kernels.so", log = dir_ / "compile.log";
        std::ofstream(source) << unit;
        host_compile(fmt::format("-shared -I{} -include shim.hpp -o {} {}", PrecompiledShim::directory().string(), library.string(),
                                 source.string()),
                     log);
        handle_ = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
        luminal::check(handle_ != nullptr, "printed source", "dlopen {}: {}", library.string(), ::dlerror());
    }
    ~PrintedSourceModule() {
        if (handle_) ::dlclose(handle_);
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    }
    PrintedSourceModule(const PrintedSourceModule&) = delete;
    PrintedSourceModule& operator=(const PrintedSourceModule&) = delete;

    Entry entry(const std::string& source, std::string_view name) const {
        auto it = names_.find({source, std::string(name)});
        luminal::check(it != names_.end(), "printed source", "no entry {} in the module", name);
        return reinterpret_cast<Entry>(::dlsym(handle_, it->second.c_str()));
    }

private:
    // extern "C" shim_<symbol>(grid, block, args): the kernel with each argument cast from args[i].
    static std::string wrapper(const std::string& symbol, const std::string& parameters) {
        std::vector<std::string> casts;
        std::size_t start = 0;
        while (start < parameters.size()) {
            std::size_t end = parameters.find(',', start);
            if (end == std::string::npos) end = parameters.size();
            std::string p = parameters.substr(start, end - start);
            if (auto r = p.find("__restrict__"); r != std::string::npos) p.erase(r, 12);
            const std::string type = p.substr(0, p.find_last_of(' '));
            const std::size_t i = casts.size();
            casts.push_back(type.find('*') == std::string::npos ? fmt::format("*({}*)args[{}]", type, i)
                                                                 : fmt::format("({})args[{}]", type, i));
            start = end + 1;
        }
        return fmt::format("extern \"C\" bool shim_{}(unsigned grid, unsigned block, void* const* args) {{\n"
                           "  return luminal_shim::launch(grid, block, [&] {{ {}({}); }});\n}}\n",
                           symbol, symbol, fmt::join(casts, ", "));
    }

    std::filesystem::path dir_;
    void* handle_ = nullptr;
    std::map<std::pair<std::string, std::string>, std::string> names_;
};

// cuda::BasicHostEmulator's executor that runs the printed sources, as the
// device would: the 16-byte-load form where the runtime would pick it, the
// scatter's claim then write passes. Small grids, so every grid-stride loop
// takes more than one turn, and blocks of two warps, so cross-warp combines run.
class PrintedSourceExecutor {
public:
    static constexpr unsigned kGrid = 3, kBlock = 64;
    static constexpr int kMultiprocessors = 2;

    // Compiled on first use: the search loads candidates it only prices.
    void prepare(std::vector<std::string> sources) {
        sources_ = std::move(sources);
        module_.reset();
    }

    void run(const luminal::cuda::Kernel& k, const luminal::cuda::KernelBuffers& buffers) {
        using namespace luminal::cuda;
        std::string source = kernel_source(k);
        const std::string_view entry = kernel_entry(k);
        if (auto vector = vector_kernel_source(k); vector && vector_launch_ok(k, buffers.dims)) source = *vector;
        std::vector<std::vector<std::byte>> data;
        data.push_back(luminal::host_buffer_to_bytes(buffers.out));
        for (const luminal::HostBuffer* in : buffers.inputs) data.push_back(luminal::host_buffer_to_bytes(*in));
        call(source, entry, data, buffers);
        buffers.out = luminal::host_buffer_from_bytes(buffers.out.dtype, data[0].data(), buffers.out.size());
    }

    void run(const luminal::cuda::ScatterKernel& k, const luminal::cuda::KernelBuffers& buffers) {
        using namespace luminal::cuda;
        const std::string source = kernel_source(k);
        std::vector<std::int32_t> winner(buffers.out.size(), -1);
        const auto indexes = luminal::host_buffer_to_bytes(*buffers.inputs[0]), src = luminal::host_buffer_to_bytes(*buffers.inputs[1]);
        auto as_bytes = [](auto& v) { return std::vector<std::byte>(reinterpret_cast<std::byte*>(v.data()), reinterpret_cast<std::byte*>(v.data() + v.size())); };
        std::vector<std::vector<std::byte>> claim{as_bytes(winner), indexes, src};
        call(source, kScatterClaimEntry, claim, buffers);
        std::vector<std::vector<std::byte>> write{luminal::host_buffer_to_bytes(buffers.out), claim[0], indexes, src};
        call(source, kScatterWriteEntry, write, buffers);
        buffers.out = luminal::host_buffer_from_bytes(buffers.out.dtype, write[0].data(), buffers.out.size());
    }

    // A custom kernel (GEMV, attention, ...) on the grid it asks for on a device of kMultiprocessors
    // SMs (its layout may depend on the grid), with a zeroed scratch buffer where it keeps one.
    void run(const luminal::cuda::CustomKernel& k, const luminal::cuda::KernelBuffers& buffers) {
        std::vector<std::vector<std::byte>> data;
        data.push_back(luminal::host_buffer_to_bytes(buffers.out));
        for (const luminal::HostBuffer* in : buffers.inputs) data.push_back(luminal::host_buffer_to_bytes(*in));
        if (const std::size_t scratch = k.scratch_bytes(buffers.dims)) data.emplace_back(scratch, std::byte{0});
        const unsigned grid = k.geometry(buffers.dims, kMultiprocessors).grid;
        if (grid > 0) call(k.source(), k.entry(), data, buffers, grid);
        buffers.out = luminal::host_buffer_from_bytes(buffers.out.dtype, data[0].data(), buffers.out.size());
    }

    std::size_t sources_compiled() const { return module_ ? sources_.size() : 0; }

private:
    // Runs `entry` over buffers `data` (in the kernel's parameter order), then dims, fault and node.
    void call(const std::string& source, std::string_view entry, std::vector<std::vector<std::byte>>& data,
              const luminal::cuda::KernelBuffers& buffers, unsigned grid = kGrid) {
        if (!module_) module_ = std::make_unique<PrintedSourceModule>(sources_);
        std::array<std::int64_t, luminal::cuda::kDimSlots> dims{};
        for (auto [c, v] : buffers.dims.entries()) dims[static_cast<std::size_t>(luminal::cuda::dim_slot(c))] = v;
        std::array<std::int64_t, 4> fault{};
        int node = 0;
        std::vector<void*> args;
        for (auto& d : data) args.push_back(d.empty() ? nullptr : d.data());
        args.push_back(dims.data());
        args.push_back(fault.data());
        args.push_back(&node);
        luminal::check(module_->entry(source, entry)(grid, kBlock, args.data()), "printed source",
                       "{}: the block's threads wait at a barrier that not all of them reach", entry);
        luminal::check(fault[0] == 0, "printed source", "kernel fault {} (value {}, limit {})", fault[0], fault[2], fault[3]);
    }

    std::vector<std::string> sources_;
    std::unique_ptr<PrintedSourceModule> module_;
};

using PrintedSourceEmulator = luminal::cuda::BasicHostEmulator<PrintedSourceExecutor>;

// `printed` (g compiled for the printed-source emulator) and g's reference runtime, both given `inputs` and run
// at g's dims, agree on `outputs` within `tolerance` (relative, absolute near zero).
template <typename Printed>
void expect_reference_outputs(luminal::Graph& g, Printed& printed,
                                     const std::vector<std::pair<luminal::GraphTensor, luminal::HostBuffer>>& inputs,
                                     const std::vector<luminal::GraphTensor>& outputs, double tolerance) {
    auto reference = g.compile(luminal::ReferenceRuntime{});
    for (const auto& [t, values] : inputs) {
        const auto bytes = luminal::host_buffer_to_bytes(values);
        printed.set_bytes(t, bytes);
        reference.set_bytes(t, bytes);
    }
    printed.execute(g.dyn_map());
    reference.execute(g.dyn_map());
    for (const luminal::GraphTensor& o : outputs) {
        const auto got = printed.get_f32(o), want = reference.get_f32(o);
        REQUIRE(got.size() == want.size());
        for (std::size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == doctest::Approx(want[i]).epsilon(tolerance).scale(1.0));
    }
}

}  // namespace luminal_test
