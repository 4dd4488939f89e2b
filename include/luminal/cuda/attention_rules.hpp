#pragma once
// Which Attention nodes the CUDA kernel (attention_kernel.hpp, flash decoding)
// runs: keys and values read as 16-byte vectors.
#include "luminal/cuda/attention_kernel.hpp"
#include "luminal/lowering/attention_rules.hpp"

namespace luminal::egraph {

namespace attention_detail {

// A 16-byte vector of the innermost axis starts at every position the other axes reach.
inline bool vector_rows(const ShapeTracker& v, std::size_t inner, DType dtype) {
    if (v.is_padded_or_masked() || !(v.axes()[inner].stride == Expression(1))) return false;
    const auto bytes = static_cast<std::int64_t>(size_of(dtype));
    Expression start = v.base();
    for (std::size_t a = 0; a < v.rank(); ++a) {
        start = start + v.axes()[a].offset * v.axes()[a].stride;
        if (a == inner) continue;
        const auto stride = v.axes()[a].stride.as_constant();
        if (!stride || (*stride * bytes) % 16 != 0) return false;
    }
    const auto first = start.as_constant();
    return first && (*first * bytes) % 16 == 0;
}

}  // namespace attention_detail

struct CudaAttentionReads {
    static constexpr std::string_view rule_name = "cuda.attention";
    // What the kernel reads as 16-byte vectors: keys [KV, G, T, D] and values
    // [KV, G, DV, T] of one float dtype, broadcast over G, D = DV a multiple of
    // the vector width that lane groups split evenly, at most kMaxDepth.
    static bool accepts(const EGraph& g, const HlirContext& ctx, const NodeSpec& spec, ClassId k, ClassId v) {
        using attention_detail::vector_rows;
        const ShapeTracker &qv = spec.views[0], &kv = spec.views[1], &vv = spec.views[2], &bv = spec.views[3];
        if (qv.rank() != 4 || kv.rank() != 4 || vv.rank() != 4 || bv.rank() != 4 || qv.is_padded_or_masked() || bv.is_padded_or_masked())
            return false;
        const DType kt = ctx.facts(g, k).dtype;
        if (kt != ctx.facts(g, v).dtype || !is_float(kt) || !kv.is_broadcast(1) || !vv.is_broadcast(1)) return false;
        const auto d = qv.dim(3).as_constant(), dv = vv.dim(2).as_constant();
        const auto width = static_cast<std::int64_t>(16 / size_of(kt));
        if (!d || !dv || *d != *dv || *d % width != 0 || *d > cuda::kMaxDepth) return false;
        const std::int64_t chunks = *d / width;
        if (chunks > 32 ? chunks % 32 != 0 : (32 % chunks) != 0) return false;
        return vector_rows(kv, 3, kt) && vector_rows(vv, 2, kt);
    }
};

}  // namespace luminal::egraph
