#pragma once
// The CPU backend's one elementwise kernel: a FusedProgram run in a single
// pass over the output, block by block. Each step computes a whole block
// (kBlock lanes) before the next step runs, so the interpreter's dispatch is
// paid once per block and the loops themselves are plain and vectorisable;
// no step ever materialises a full-size intermediate. Single primitives
// (unary, binary, Cast, Output, Iota) run as one-step programs.
//
// Values live in lanes: float for float dtypes, int64 for the rest. Every
// step's result is rounded or wrapped to the step's dtype, so a fused chain
// computes exactly what the same primitives would, node by node.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "luminal/cpu/index_expr.hpp"
#include "luminal/cpu/lane_loops.hpp"
#include "luminal/cpu/view.hpp"
#include "luminal/graph/program.hpp"
#include "luminal/lowering/fused_elementwise.hpp"

namespace luminal::cpu {

namespace fused_detail {

// torch.remainder for floats: fmod, moved into the divisor's sign.
inline float float_mod(float a, float b) {
    float r = std::fmod(a, b);
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}

// Floor modulo; b == -1 is special-cased because INT64_MIN / -1 traps.
inline std::int64_t int_mod(std::int64_t a, std::int64_t b) { return b == -1 ? 0 : detail::floor_mod(a, b); }

inline std::int64_t wrapping_add(std::int64_t a, std::int64_t b) {
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b));
}
inline std::int64_t wrapping_mul(std::int64_t a, std::int64_t b) {
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) * static_cast<std::uint64_t>(b));
}

// out[j] = cast of src[j] to dtype d, into lanes of d's domain (out may be src).
template <typename L, typename O>
void finish(DType d, const L* src, std::int64_t len, O* out) {
    visit_dtype(d, [&]<DType D>(DTypeTag<D>) {
        if constexpr (std::is_same_v<lane_t<D>, O>) {
            if constexpr ((D == DType::F32 || D == DType::I64) && std::is_same_v<L, O>) {
                if (static_cast<const void*>(src) != static_cast<const void*>(out)) std::copy(src, src + len, out);
            } else {
                // A local bound: `len` read through the reference may alias `out`, which keeps the loop scalar.
                const std::int64_t n = len;
                for (std::int64_t j = 0; j < n; ++j) out[j] = cast_lane<D>(src[j]);
            }
        }
    });
}

}  // namespace fused_detail

// Per-thread working memory of the kernel (reused across nodes and blocks).
struct FusedScratch {
    std::vector<float> floats;
    std::vector<std::int64_t> ints;
    std::vector<std::int64_t> expr;
    // The value whose home is, for the current block, the output buffer itself.
    std::size_t direct_value = ~std::size_t{0};
    void* direct = nullptr;
};

class FusedKernel {
public:
    static constexpr std::int64_t kBlock = 256;

    // What one execution binds: the inputs' views and buffers, and the Iota
    // steps' expressions with the dims in effect.
    struct Bound {
        std::vector<StridedView> views;
        std::vector<const std::byte*> sources;
        std::vector<BlockExpr> iotas;  // one per step (empty unless Iota)
    };

    FusedKernel() = default;
    // `isa`: the instruction set the float lane loops run with (this CPU must support it).
    FusedKernel(std::shared_ptr<const FusedProgram> program, std::vector<DType> input_dtypes, DType out_dtype,
                std::uint32_t node, quant::Isa isa = quant::best_isa())
        : program_(std::move(program)), inputs_(input_dtypes.size()), out_dtype_(out_dtype), node_(node),
          lanes_(fused_detail::lane_loops(isa)) {
        check(program_ && !program_->steps.empty(), "CpuRuntime::load", "node {}: fused program has no steps", node);
        dtypes_ = std::move(input_dtypes);
        for (const FusedStep& s : program_->steps) dtypes_.push_back(s.dtype);
        used_.assign(inputs_, false);
        for (std::size_t j = 0; j < program_->steps.size(); ++j) {
            const FusedStep& s = program_->steps[j];
            for (std::uint16_t slot : operands(s)) {
                check(slot < inputs_ + j, "CpuRuntime::load", "node {}: fused step {} reads slot {} before it exists",
                      node, j, slot);
                if (slot < inputs_) used_[slot] = true;
            }
        }
    }

    const FusedProgram& program() const { return *program_; }

    Bound bind(std::vector<StridedView> views, std::vector<const std::byte*> sources, const DynMap& dims) const {
        Bound b{std::move(views), std::move(sources), {}};
        for (const FusedStep& s : program_->steps)
            b.iotas.push_back(s.kind == OpKind::Iota ? BlockExpr(s.iota, dims) : BlockExpr());
        return b;
    }

    // Computes output elements [begin, end) into `out` (a buffer of out_dtype).
    void run(const Bound& bound, std::byte* out, std::int64_t begin, std::int64_t end, FusedScratch& scratch) const {
        const std::size_t values = dtypes_.size(), slots = values + 3;
        scratch.floats.resize(slots * kBlock);
        scratch.ints.resize(slots * kBlock);
        std::vector<const float*> fp(values, nullptr);
        std::vector<const std::int64_t*> ip(values, nullptr);
        std::vector<bool> fixed(values, false);  // filled once, valid for every block
        scratch.direct_value = ~std::size_t{0};

        // Broadcast scalars and constants do not change from block to block.
        for (std::size_t v = 0; v < values; ++v) {
            bool scalar_input = v < inputs_ && used_[v] && bound.views[v].kind() == StridedView::Kind::Scalar;
            bool constant = v >= inputs_ && step(v).kind == OpKind::Constant;
            if (!scalar_input && !constant) continue;
            fixed[v] = true;
            if (is_float(dtypes_[v])) {
                float* home = fhome(scratch, v);
                if (constant) fill_constant(step(v), home);
                else load_view(dtypes_[v], bound.sources[v], bound.views[v], 0, kBlock, home);
                fp[v] = home;
            } else {
                std::int64_t* home = ihome(scratch, v);
                if (constant) fill_constant(step(v), home);
                else load_view(dtypes_[v], bound.sources[v], bound.views[v], 0, kBlock, home);
                ip[v] = home;
            }
        }

        // The last step writes the output in place when its lanes are the
        // output's storage (f32, i64): no copy out of the scratch.
        const std::size_t last = values - 1;
        const bool in_place = !fixed[last] && last >= inputs_ && dtypes_[last] == out_dtype_ &&
                              (out_dtype_ == DType::F32 || out_dtype_ == DType::I64);
        for (std::int64_t start = begin; start < end; start += kBlock) {
            std::int64_t len = std::min(kBlock, end - start);
            if (in_place) {
                scratch.direct_value = last;
                scratch.direct = out + start * static_cast<std::int64_t>(size_of(out_dtype_));
            }
            for (std::size_t k = 0; k < inputs_; ++k) {
                if (!used_[k] || fixed[k]) continue;
                const StridedView& view = bound.views[k];
                bool direct = view.kind() == StridedView::Kind::Contiguous;
                if (is_float(dtypes_[k])) {
                    if (direct && dtypes_[k] == DType::F32) {
                        fp[k] = reinterpret_cast<const float*>(bound.sources[k]) + view.base() + start;
                    } else {
                        view_load(dtypes_[k], bound.sources[k], view, start, len, fhome(scratch, k));
                        fp[k] = fhome(scratch, k);
                    }
                } else {
                    if (direct && dtypes_[k] == DType::I64) {
                        ip[k] = reinterpret_cast<const std::int64_t*>(bound.sources[k]) + view.base() + start;
                    } else {
                        view_load(dtypes_[k], bound.sources[k], view, start, len, ihome(scratch, k));
                        ip[k] = ihome(scratch, k);
                    }
                }
            }
            for (std::size_t j = 0; j < program_->steps.size(); ++j) {
                std::size_t v = inputs_ + j;
                if (fixed[v]) continue;
                run_step(j, bound, start, len, scratch, fp, ip);
            }
            if (in_place) continue;
            if (is_float(dtypes_[last])) store_lanes(out_dtype_, fp[last], len, out, start);
            else store_lanes(out_dtype_, ip[last], len, out, start);
        }
    }

private:
    static std::vector<std::uint16_t> operands(const FusedStep& s) {
        if (is_binary(s.kind)) return {s.a, s.b};
        if (is_unary(s.kind) || s.kind == OpKind::Cast) return {s.a};
        return {};
    }
    const FusedStep& step(std::size_t value) const { return program_->steps[value - inputs_]; }
    fused_detail::LaneLoop lane(fused_detail::LaneOp op) const { return lanes_[static_cast<std::size_t>(op)]; }
    float* fhome(FusedScratch& s, std::size_t v) const {
        return v == s.direct_value ? static_cast<float*>(s.direct) : s.floats.data() + v * kBlock;
    }
    std::int64_t* ihome(FusedScratch& s, std::size_t v) const {
        return v == s.direct_value ? static_cast<std::int64_t*>(s.direct) : s.ints.data() + v * kBlock;
    }
    // Temporaries 0..2 sit after the values' homes.
    float* ftemp(FusedScratch& s, int t) const { return fhome(s, dtypes_.size() + t); }
    std::int64_t* itemp(FusedScratch& s, int t) const { return ihome(s, dtypes_.size() + t); }

    template <typename L>
    static void view_load(DType d, const std::byte* src, const StridedView& v, std::int64_t start, std::int64_t len,
                          L* dst) {
        load_view(d, src, v, start, len, dst);
    }

    template <typename L>
    void fill_constant(const FusedStep& s, L* home) const {
        visit_dtype(s.dtype, [&]<DType D>(DTypeTag<D>) {
            if constexpr (std::is_same_v<lane_t<D>, L>) std::fill(home, home + kBlock, cast_double<D>(s.value));
        });
    }

    // Operand `slot` as float lanes, converting int lanes into temporary `t`.
    const float* as_float(std::uint16_t slot, std::int64_t len, int t, FusedScratch& s, const std::vector<const float*>& fp,
                          const std::vector<const std::int64_t*>& ip) const {
        if (fp[slot]) return fp[slot];
        float* tmp = ftemp(s, t);
        for (std::int64_t j = 0; j < len; ++j) tmp[j] = static_cast<float>(static_cast<double>(ip[slot][j]));
        return tmp;
    }
    const std::int64_t* as_int(std::uint16_t slot, std::int64_t len, int t, FusedScratch& s,
                               const std::vector<const float*>& fp, const std::vector<const std::int64_t*>& ip) const {
        if (ip[slot]) return ip[slot];
        std::int64_t* tmp = itemp(s, t);
        for (std::int64_t j = 0; j < len; ++j) tmp[j] = float_to_int(DType::I64, static_cast<double>(fp[slot][j]));
        return tmp;
    }

    // Writes a result computed in lanes of type L to value v's home, cast to
    // v's dtype. `r` may already be v's home (then it is rounded in place).
    template <typename L>
    void finish_into(std::size_t v, const L* r, std::int64_t len, FusedScratch& s, std::vector<const float*>& fp,
                     std::vector<const std::int64_t*>& ip) const {
        if (is_float(dtypes_[v])) {
            fused_detail::finish(dtypes_[v], r, len, fhome(s, v));
            fp[v] = fhome(s, v);
        } else {
            fused_detail::finish(dtypes_[v], r, len, ihome(s, v));
            ip[v] = ihome(s, v);
        }
    }

    // A comparison's 0/1 lanes are already every integer dtype's values; only a float result is converted.
    void finish_comparison(std::size_t v, const std::int64_t* r, std::int64_t len, FusedScratch& s,
                           std::vector<const float*>& fp, std::vector<const std::int64_t*>& ip) const {
        if (is_float(dtypes_[v])) return finish_into(v, r, len, s, fp, ip);
        ip[v] = r;  // r is v's home (run_step computes integer results there)
    }

    static bool integer_range_contains(DType wide, DType narrow) {
        if (is_float(wide) || is_float(narrow)) return false;
        auto rank = [](DType t) { return t == DType::Bool ? 0 : t == DType::U8 ? 1 : t == DType::I32 ? 2 : 3; };
        return rank(narrow) <= rank(wide);
    }

    void run_step(std::size_t j, const Bound& bound, std::int64_t start, std::int64_t len, FusedScratch& s,
                  std::vector<const float*>& fp, std::vector<const std::int64_t*>& ip) const {
        using namespace fused_detail;
        const FusedStep& st = program_->steps[j];
        const std::size_t v = inputs_ + j;
        // Float results go straight to the home when the step's dtype is a float.
        float* fr = is_float(dtypes_[v]) ? fhome(s, v) : ftemp(s, 2);
        std::int64_t* ir = is_float(dtypes_[v]) ? itemp(s, 2) : ihome(s, v);

        if (is_unary(st.kind)) {
            const float* x = as_float(st.a, len, 0, s, fp, ip);
            switch (st.kind) {
                case OpKind::Log2: for (std::int64_t i = 0; i < len; ++i) fr[i] = std::log2(x[i]); break;
                case OpKind::Exp2: lane(LaneOp::Exp2)(x, nullptr, fr, len); break;
                case OpKind::Sin: lane(LaneOp::Sin)(x, nullptr, fr, len); break;
                case OpKind::Sqrt: for (std::int64_t i = 0; i < len; ++i) fr[i] = std::sqrt(x[i]); break;
                default: lane(LaneOp::Recip)(x, nullptr, fr, len); break;
            }
            return finish_into(v, fr, len, s, fp, ip);
        }
        if (is_binary(st.kind)) {
            // The first operand's domain decides, as in the reference.
            if (is_float(dtypes_[st.a])) {
                const float* x = as_float(st.a, len, 0, s, fp, ip);
                const float* y = as_float(st.b, len, 1, s, fp, ip);
                switch (st.kind) {
                    case OpKind::Add: lane(LaneOp::Add)(x, y, fr, len); break;
                    case OpKind::Mul: lane(LaneOp::Mul)(x, y, fr, len); break;
                    case OpKind::Mod: for (std::int64_t i = 0; i < len; ++i) fr[i] = float_mod(x[i], y[i]); break;
                    default:
                        for (std::int64_t i = 0; i < len; ++i) ir[i] = x[i] < y[i];
                        return finish_comparison(v, ir, len, s, fp, ip);
                }
                return finish_into(v, fr, len, s, fp, ip);
            }
            const std::int64_t* x = as_int(st.a, len, 0, s, fp, ip);
            const std::int64_t* y = as_int(st.b, len, 1, s, fp, ip);
            switch (st.kind) {
                case OpKind::Add: for (std::int64_t i = 0; i < len; ++i) ir[i] = wrapping_add(x[i], y[i]); break;
                case OpKind::Mul: for (std::int64_t i = 0; i < len; ++i) ir[i] = wrapping_mul(x[i], y[i]); break;
                case OpKind::Mod: {
                    const std::int64_t zero = std::find(y, y + len, 0) - y;
                    check(zero == len, "Mod", "node {}: integer modulo by zero at element {}", node_, start + zero);
                    for (std::int64_t i = 0; i < len; ++i) ir[i] = int_mod(x[i], y[i]);
                    break;
                }
                default:
                    for (std::int64_t i = 0; i < len; ++i) ir[i] = x[i] < y[i];
                    return finish_comparison(v, ir, len, s, fp, ip);
            }
            return finish_into(v, ir, len, s, fp, ip);
        }
        if (st.kind == OpKind::Cast) {
            if (fp[st.a]) return finish_into(v, fp[st.a], len, s, fp, ip);
            // A widening integer cast changes no value: the result is its operand's lanes.
            if (v != s.direct_value && integer_range_contains(dtypes_[v], dtypes_[st.a])) {
                ip[v] = ip[st.a];
                return;
            }
            return finish_into(v, ip[st.a], len, s, fp, ip);
        }
        if (st.kind == OpKind::Iota) {
            std::int64_t* tmp = itemp(s, 0);
            bound.iotas[j].eval(start, len, tmp, s.expr);
            return finish_into(v, static_cast<const std::int64_t*>(tmp), len, s, fp, ip);
        }
        check(false, "CpuRuntime", "node {}: fused step {} has unsupported kind {}", node_, j, name_of(st.kind));
    }

    std::shared_ptr<const FusedProgram> program_;
    std::size_t inputs_ = 0;
    DType out_dtype_ = DType::F32;
    std::uint32_t node_ = 0;
    std::vector<DType> dtypes_;  // per value: inputs, then steps
    std::vector<bool> used_;     // per input: read by some step
    fused_detail::LaneLoops lanes_;
};

}  // namespace luminal::cpu
