#pragma once
// The part of an expert kernel that finds its work: which expert a block
// reads, and the rows that chose it, in order, in tiles; and what that reads.
// Shared by the expert GEMV (expert_gemv_*.hpp) and the expert GEMM
// (expert_gemm_*.hpp).
//
// The grid is one-dimensional: block b takes slot j = b / columns, the j-th
// distinct expert among experts[0, R) in increasing order (a block whose slot
// names none returns). Each block marks the experts its R indexes name in a
// shared byte per expert packed into a bitmap (an index outside [0, E) is a
// FaultCode::ExpertIndex fault), picks the j-th set bit, then collects the
// rows that chose it a window of blockDim rows at a time (a prefix sum of the
// matches) into `picked`, and runs them in tiles of at most `tile` rows as
// they accumulate. The code declares R, E, N, K, slot, expert, picked, done
// and tile for the parts it wraps.
#include <algorithm>
#include <span>
#include <string>

#include "luminal/cuda/kernel_source.hpp"
#include "luminal/cuda/kernel_work.hpp"

namespace luminal::cuda {

struct ExpertRowsSource {
    std::string mark_decls, mark_at;  // the experts view read at row r, for marking
    std::string scan_decls, scan_at;  // and again for the windows' scan
    std::string seen_bytes;           // where the shared bytes start (after the kernel's own dynamic shared memory)
    int tile = 1;
    int columns_per_block = 1;        // output columns a block takes: columns = ceil(N / this)
    std::string experts = "in2";      // the kernel parameter holding the experts

    // From the kernel's opening brace to the point where `expert` is known.
    std::string prologue(const std::string& r, const std::string& e, const std::string& n, const std::string& k) const {
        std::string code = fmt::format("  const i64 R = {}, E = {}, N = {}, K = {};\n", r, e, n, k);
        code += fmt::format("  const i64 columns = (N + {0}) / {1}, slot = (i64)blockIdx.x / columns;\n"
                            "  const i64 first_n = ((i64)blockIdx.x % columns) * {1}, last_n = first_n + {1} < N ? first_n + {1} : N;\n"
                            "  if (slot >= E || slot >= R) return;\n",
                            columns_per_block - 1, columns_per_block);
        code += fmt::format("  unsigned* const words = (unsigned*)({});\n"
                            "  unsigned char* const seen = (unsigned char*)(words + (E + 31) / 32);\n"
                            "  __shared__ int picked[{}];\n  __shared__ int prefix[{}];\n  __shared__ i64 chosen;\n",
                            seen_bytes, kThreadsPerBlock + tile, kThreadsPerBlock);
        code += "  for (i64 x = threadIdx.x; x < E; x += blockDim.x) seen[x] = 0;\n  __syncthreads();\n";
        code += fmt::format("  for (i64 r = threadIdx.x; r < R; r += blockDim.x) {{\n{}    const i64 x = (i64){}[{}];\n"
                            "    if (x < 0 || x >= E) {{ luminal_fault(fault, {}, node, x, E); continue; }}\n"
                            "    seen[x] = 1;\n  }}\n  __syncthreads();\n",
                            mark_decls, experts, mark_at, static_cast<int>(FaultCode::ExpertIndex));
        code += "  for (i64 w = threadIdx.x; w * 32 < E; w += blockDim.x) {\n    unsigned bits = 0u;\n"
                "    for (int b = 0; b < 32 && w * 32 + b < E; ++b) bits |= (unsigned)seen[w * 32 + b] << b;\n"
                "    words[w] = bits;\n  }\n  __syncthreads();\n"
                "  if (threadIdx.x == 0) {\n    chosen = -1;\n    i64 j = slot;\n"
                "    for (i64 w = 0; w * 32 < E; ++w) {\n      const int count = __popc(words[w]);\n"
                "      if (j < count) {\n        unsigned bits = words[w];\n        for (; j > 0; --j) bits &= bits - 1u;\n"
                "        chosen = w * 32 + __popc((bits & (0u - bits)) - 1u);\n        break;\n      }\n      j -= count;\n    }\n  }\n"
                "  __syncthreads();\n  const i64 expert = chosen;\n  if (expert < 0) return;\n";
        return code;
    }

    // The windows of rows, running `body` on each tile of picked[done, done + tile) and closing the kernel.
    std::string tiles(const std::string& body) const {
        std::string code = "  int held = 0;\n";
        // A window of rows: the matches' prefix sum places them after the rows held over, in order.
        code += fmt::format("  for (i64 r0 = 0; r0 < R; r0 += blockDim.x) {{\n    const i64 r = r0 + threadIdx.x;\n    int match = 0;\n"
                            "    if (r < R) {{\n{}    match = (i64){}[{}] == expert;\n    }}\n"
                            "    prefix[threadIdx.x] = match;\n    __syncthreads();\n"
                            "    for (int s = 1; s < (int)blockDim.x; s <<= 1) {{\n"
                            "      const int before = (int)threadIdx.x >= s ? prefix[threadIdx.x - s] : 0;\n"
                            "      __syncthreads();\n      prefix[threadIdx.x] += before;\n      __syncthreads();\n    }}\n"
                            "    if (match) picked[held + prefix[threadIdx.x] - 1] = (int)r;\n"
                            "    held += prefix[blockDim.x - 1];\n    __syncthreads();\n"
                            "    const bool last = r0 + (i64)blockDim.x >= R;\n    int done = 0;\n",
                            scan_decls, experts, scan_at);
        code += fmt::format("    while (held - done >= {0} || (last && held > done)) {{\n"
                            "      const int tile = held - done < {0} ? held - done : {0};\n",
                            tile);
        code += body;
        code += "      done += tile;\n      __syncthreads();\n    }\n";
        // The rows of a partial tile move to the front (fewer than a tile, so the ranges do not overlap).
        code += "    if ((int)threadIdx.x < held - done) picked[threadIdx.x] = picked[done + threadIdx.x];\n"
                "    held -= done;\n    __syncthreads();\n  }\n}\n";
        return code;
    }
};

// Shared memory of the row grouping: the picks' bitmap words, then a byte per expert.
inline std::size_t expert_grouping_shared_bytes(std::int64_t experts) {
    return static_cast<std::size_t>((experts + 31) / 32) * sizeof(std::uint32_t) + static_cast<std::size_t>(experts);
}

// The reads of an expert kernel over sources x, `weights` weights, experts:
// each weight's chosen experts (`matrices` elements) once per tile of their
// rows, from L2 after the first where they are a step's result; the rows'
// activations, again from L2 for each block of columns after the first; the
// experts, which every live block scans twice.
inline void add_expert_reads(LaunchWork& w, std::span<const SourceInfo> sources, int weights, double matrices, double tiles, double r,
                             double k, double column_blocks, double live, const DeviceSpec& device) {
    for (int j = 1; j <= weights; ++j) {
        add_read(w, sources[j], matrices, device);
        (from_l2(sources[j], device) ? w.l2_rereads : w.dram_read) +=
            std::max(tiles - 1, 0.0) * matrices * static_cast<double>(size_of(sources[j].dtype));
    }
    const double x_before = w.bytes();
    add_read(w, sources[0], r * k, device);
    w.l2_rereads += std::max(column_blocks - 1, 0.0) * (w.bytes() - x_before);
    const SourceInfo& picks = sources[static_cast<std::size_t>(weights) + 1];
    add_read(w, picks, r, device);
    w.l2_rereads += std::max(2 * live - 1, 0.0) * r * static_cast<double>(size_of(picks.dtype));
}

}  // namespace luminal::cuda
