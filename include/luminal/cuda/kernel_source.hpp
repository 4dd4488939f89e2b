#pragma once
// Kernel IR -> CUDA C source for NVRTC. One module per kernel with a fixed
// entry name, so equal kernels print equal sources and the compile cache
// (keyed by source) compiles each once. Values live in registers as float
// (f32/f16/bf16, rounded to the step's dtype after each step) or long long
// (integers and bools, wrapped to the step's dtype); index arithmetic is long
// long with floor division where an operand can be negative. Every kernel
// walks its index space with a grid-stride loop, so any grid computes it all.
//
// Kernel arguments: out, the inputs in order, dims (52 long longs: 'a'..'z'
// then 'A'..'Z'), fault (4 long longs: code, node, value, limit; the first
// fault wins) and the program node number for fault reports.
#include <cmath>
#include <deque>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "luminal/cuda/kernel_ir.hpp"

namespace luminal::cuda {

inline constexpr std::string_view kElementwiseEntry = "luminal_elementwise";
inline constexpr std::string_view kReduceEntry = "luminal_reduce";
inline constexpr std::string_view kRowEntry = "luminal_row";
inline constexpr std::string_view kScatterClaimEntry = "luminal_scatter_claim";
inline constexpr std::string_view kScatterWriteEntry = "luminal_scatter_write";
inline constexpr int kDimSlots = 52;

// The entry a kernel's module exports.
inline std::string_view kernel_entry(const Kernel& k) {
    switch (k.shape) {
        case Kernel::Shape::Elementwise: return kElementwiseEntry;
        case Kernel::Shape::Reduce: return kReduceEntry;
        case Kernel::Shape::Row: return kRowEntry;
    }
    return kElementwiseEntry;
}

// Fault codes a kernel reports (host side: cuda/faults.hpp).
enum class FaultCode : int { None = 0, GatherIndex = 1, ModuloByZero = 2, ScatterIndex = 3, ExpertIndex = 4 };

inline int dim_slot(char c) { return c >= 'a' && c <= 'z' ? c - 'a' : 26 + (c - 'A'); }

inline constexpr std::string_view kKernelPrelude = R"(#include <cuda_fp16.h>
#include <cuda_bf16.h>
typedef long long i64;
typedef unsigned long long u64;
__device__ __forceinline__ void luminal_fault(i64* fault, int code, int node, i64 value, i64 limit) {
  if (atomicCAS((u64*)fault, 0ull, (u64)code) == 0ull) { fault[1] = node; fault[2] = value; fault[3] = limit; }
}
__device__ __forceinline__ i64 luminal_floor_div(i64 a, i64 b) {
  i64 q = a / b;
  return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
__device__ __forceinline__ i64 luminal_floor_mod(i64 a, i64 b) { return a - luminal_floor_div(a, b) * b; }
__device__ __forceinline__ float luminal_fmod(float a, float b) {
  float r = fmodf(a, b);
  return (r != 0.0f && ((r < 0.0f) != (b < 0.0f))) ? r + b : r;
}
__device__ __forceinline__ i64 luminal_f2i(float v) {
  if (v != v) return 0;
  if (v >= 9.2233720368547758e18f) return 0x7fffffffffffffffLL;
  if (v <= -9.2233720368547758e18f) return (i64)0x8000000000000000ULL;
  return (i64)v;
}
__device__ __forceinline__ float luminal_round_bf16(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }
__device__ __forceinline__ float luminal_round_f16(float v) { return __half2float(__float2half_rn(v)); }
__device__ __forceinline__ i64 luminal_wrap_i32(i64 v) { return (i64)(int)(unsigned int)(u64)v; }
__device__ __forceinline__ i64 luminal_wrap_u8(i64 v) { return (i64)(unsigned char)(u64)v; }
__device__ __forceinline__ i64 luminal_add(i64 a, i64 b) { return (i64)((u64)a + (u64)b); }
__device__ __forceinline__ i64 luminal_mul(i64 a, i64 b) { return (i64)((u64)a * (u64)b); }
__device__ __forceinline__ float luminal_max(float a, float b) { return (a != a || b != b) ? __int_as_float(0x7fffffff) : fmaxf(a, b); }
__device__ __forceinline__ i64 luminal_max(i64 a, i64 b) { return a > b ? a : b; }
)";

namespace source_detail {

inline std::string storage_type(DType t) {
    switch (t) {
        case DType::F32: return "float";
        case DType::F16: return "__half";
        case DType::BF16: return "__nv_bfloat16";
        case DType::I32: return "int";
        case DType::I64: return "i64";
        case DType::U8:
        case DType::Bool: return "unsigned char";
    }
    return "?";
}
inline std::string value_type(DType t) { return is_float(t) ? "float" : "i64"; }

// A stored element as a register value.
inline std::string widen(DType t, const std::string& element) {
    switch (t) {
        case DType::F32: return element;
        case DType::F16: return "__half2float(" + element + ")";
        case DType::BF16: return "__bfloat162float(" + element + ")";
        default: return "(i64)" + element;
    }
}

// A register value of dtype `from` converted to dtype `to` (the Cast semantics), still in register form.
inline std::string convert(DType from, DType to, const std::string& v) {
    if (is_float(from) && !is_float(to)) {
        if (to == DType::Bool) return "(i64)(" + v + " != 0.0f)";
        return convert(DType::I64, to, "luminal_f2i(" + v + ")");
    }
    if (!is_float(from) && is_float(to)) return convert(DType::F32, to, "(float)" + v);
    switch (to) {
        case DType::F32: return v;
        case DType::F16: return "luminal_round_f16(" + v + ")";
        case DType::BF16: return "luminal_round_bf16(" + v + ")";
        case DType::I32: return "luminal_wrap_i32(" + v + ")";
        case DType::I64: return v;
        case DType::U8: return "luminal_wrap_u8(" + v + ")";
        case DType::Bool: return "(i64)(" + v + " != 0)";
    }
    return v;
}

// A register value of dtype t as the element stored.
inline std::string narrow(DType t, const std::string& v) {
    switch (t) {
        case DType::F32: return v;
        case DType::F16: return fmt::format("__float2half_rn({})", v);
        case DType::BF16: return fmt::format("__float2bfloat16_rn({})", v);
        default: return fmt::format("({}){}", storage_type(t), v);
    }
}

inline std::string literal(double v, DType t) {
    if (!is_float(t)) return fmt::format("{}LL", static_cast<std::int64_t>(v));
    if (std::isnan(v)) return "__int_as_float(0x7fffffff)";
    if (std::isinf(v)) return v > 0 ? "__int_as_float(0x7f800000)" : "__int_as_float(0xff800000)";
    std::string digits = fmt::format("{:.9g}", static_cast<float>(v));
    if (digits.find_first_of(".e") == std::string::npos) digits += ".0";
    return digits + "f";
}

// Prints index expressions as named long long locals, each distinct
// subexpression once per index variable.
class ExpressionPrinter {
public:
    // Locals are named <prefix><n>; printers whose locals share a scope need distinct prefixes.
    ExpressionPrinter(std::string& out, std::string prefix) : out_(out), prefix_(std::move(prefix)) {}

    std::string print(Expression e, const std::string& index) {
        const detail::ExprNode* n = e.node();
        switch (n->op) {
            case ExprOp::Num: return fmt::format("{}LL", n->value);
            case ExprOp::Var: dims_[dim_slot(n->var)] = n->var; return fmt::format("d_{}", n->var);
            case ExprOp::Index: return index;
            default: break;
        }
        auto key = std::make_pair(n, index);
        if (auto it = named_.find(key); it != named_.end()) return it->second;
        const std::string a = print(e.lhs(), index), b = print(e.rhs(), index);
        const bool plain = e.lhs().lower_bound() >= 0 && e.rhs().lower_bound() > 0;
        std::string value;
        switch (n->op) {
            case ExprOp::Add: value = a + " + " + b; break;
            case ExprOp::Mul: value = a + " * " + b; break;
            case ExprOp::Div: value = plain ? a + " / " + b : "luminal_floor_div(" + a + ", " + b + ")"; break;
            case ExprOp::Mod: value = plain ? a + " % " + b : "luminal_floor_mod(" + a + ", " + b + ")"; break;
            case ExprOp::Min: value = a + " < " + b + " ? " + a + " : " + b; break;
            case ExprOp::Max: value = a + " > " + b + " ? " + a + " : " + b; break;
            case ExprOp::Lt: value = "(i64)(" + a + " < " + b + ")"; break;
            case ExprOp::Eq: value = "(i64)(" + a + " == " + b + ")"; break;
            case ExprOp::And: value = "(i64)(" + a + " != 0 && " + b + " != 0)"; break;
            case ExprOp::Or: value = "(i64)(" + a + " != 0 || " + b + " != 0)"; break;
            default: break;
        }
        std::string name = fmt::format("{}{}", prefix_, named_.size());
        out_ += fmt::format("    const i64 {} = {};\n", name, value);
        named_.emplace(key, name);
        return name;
    }
    const std::map<int, char>& dims() const { return dims_; }

private:
    struct KeyHash {
        std::size_t operator()(const std::pair<const detail::ExprNode*, std::string>& k) const {
            return std::hash<const void*>{}(k.first) ^ std::hash<std::string>{}(k.second);
        }
    };
    std::string& out_;
    std::string prefix_;
    std::unordered_map<std::pair<const detail::ExprNode*, std::string>, std::string, KeyHash> named_;
    std::map<int, char> dims_;
};

// Declarations of the dims the printers' expressions used, read from `dims`.
inline std::string dim_declarations(std::span<const ExpressionPrinter* const> printers) {
    std::map<int, char> used;
    for (auto* p : printers) used.insert(p->dims().begin(), p->dims().end());
    std::string decl;
    for (auto [slot, c] : used) decl += fmt::format("  const i64 d_{} = dims[{}];\n", c, slot);
    return decl;
}
inline std::string dim_declarations(std::initializer_list<const ExpressionPrinter*> printers) {
    return dim_declarations(std::span(printers.begin(), printers.size()));
}

inline std::string binary_value(const Step& s, DType a_type, const std::string& a, DType b_type, const std::string& b) {
    if (is_float(a_type)) {
        const std::string y = is_float(b_type) ? b : "(float)" + b;
        switch (s.op) {
            case OpKind::Add: return a + " + " + y;
            case OpKind::Mul: return a + " * " + y;
            case OpKind::Mod: return "luminal_fmod(" + a + ", " + y + ")";
            case OpKind::LessThan: return is_float(s.dtype) ? "(float)(" + a + " < " + y + ")" : "(i64)(" + a + " < " + y + ")";
            default: break;
        }
    } else {
        const std::string y = is_float(b_type) ? "luminal_f2i(" + b + ")" : b;
        switch (s.op) {
            case OpKind::Add: return "luminal_add(" + a + ", " + y + ")";
            case OpKind::Mul: return "luminal_mul(" + a + ", " + y + ")";
            case OpKind::Mod: return "luminal_floor_mod(" + a + ", " + y + ")";
            case OpKind::LessThan: return "(i64)(" + a + " < " + y + ")";
            default: break;
        }
    }
    throw Error("cuda codegen", fmt::format("{} is not a binary primitive", name_of(s.op)));
}

inline std::string unary_value(OpKind op, const std::string& x) {
    switch (op) {
        case OpKind::Log2: return "log2f(" + x + ")";
        case OpKind::Exp2: return "exp2f(" + x + ")";
        case OpKind::Sin: return "sinf(" + x + ")";
        case OpKind::Sqrt: return "sqrtf(" + x + ")";
        case OpKind::Recip: return "1.0f / " + x;
        default: throw Error("cuda codegen", fmt::format("{} is not a unary primitive", name_of(op)));
    }
}

// The statements computing a body at index variable `index`; its result is
// v<last>. A load whose entry in `loaded` is not empty takes that value
// instead (one the caller loaded); a row stage's value is the local stage<j>.
// Faults (a gather index out of range, read at 0 instead; a modulo by zero)
// are reported after the body: a branch between two loads would keep the
// compiler from issuing the second before the first returns.
inline void print_body(const Body& body, const std::string& index, ExpressionPrinter& exprs, std::string& out,
                       std::span<const std::string> loaded = {}) {
    const auto& steps = body.steps;
    std::string faults;
    for (std::size_t j = 0; j < steps.size(); ++j) {
        const Step& s = steps[j];
        const std::string v = fmt::format("v{}", j), type = value_type(s.dtype);
        auto operand = [&](std::uint16_t i) { return fmt::format("v{}", i); };
        if (s.kind == StepKind::Load && j < loaded.size() && !loaded[j].empty()) {
            out += fmt::format("    const {} {} = {};\n", type, v, loaded[j]);
            continue;
        }
        switch (s.kind) {
            case StepKind::Load: {
                std::string at = index;
                if (s.at != kAtElement) {
                    const Step& src = steps[static_cast<std::size_t>(s.at)];
                    at = fmt::format("g{}", j);
                    const std::string numel = exprs.print(s.view.numel(), index);
                    out += fmt::format("    const i64 r{0} = {1};\n    const bool bad{0} = r{0} < 0 || r{0} >= {2};\n"
                                       "    const i64 {3} = bad{0} ? 0 : r{0};\n",
                                       j, convert(src.dtype, DType::I64, operand(static_cast<std::uint16_t>(s.at))), numel, at);
                    faults += fmt::format("    if (bad{0}) luminal_fault(fault, {1}, node, r{0}, {2});\n", j,
                                          static_cast<int>(FaultCode::GatherIndex), numel);
                }
                const std::string position = exprs.print(s.view.index_expression(), at);
                const std::string valid = exprs.print(s.view.valid_expression(), at);
                const std::string element = widen(s.dtype, fmt::format("in{}[{}]", s.input, position));
                out += fmt::format("    const {} {} = {} != 0 ? {} : ({})0;\n", type, v, valid, element, type);
                break;
            }
            case StepKind::Constant: out += fmt::format("    const {} {} = {};\n", type, v, literal(s.value, s.dtype)); break;
            case StepKind::StageValue: out += fmt::format("    const {} {} = stage{};\n", type, v, s.input); break;
            case StepKind::Masked:
                out += fmt::format("    const {0} {1} = {2} != 0 ? {3} : ({0})0;\n", type, v, operand(s.a), operand(s.b));
                break;
            case StepKind::Index:
                out += fmt::format("    const {} {} = {};\n", type, v, convert(DType::I64, s.dtype, exprs.print(s.index, index)));
                break;
            case StepKind::Cast:
                out += fmt::format("    const {} {} = {};\n", type, v, convert(steps[s.a].dtype, s.dtype, operand(s.a)));
                break;
            case StepKind::Unary:
                out += fmt::format("    const {} {} = {};\n", type, v, convert(DType::F32, s.dtype, unary_value(s.op, operand(s.a))));
                break;
            case StepKind::Binary: {
                const DType at = steps[s.a].dtype, bt = steps[s.b].dtype;
                if (!is_float(at) && s.op == OpKind::Mod)
                    faults += fmt::format("    if ({} == 0) luminal_fault(fault, {}, node, {}, 0);\n",
                                          is_float(bt) ? "luminal_f2i(" + operand(s.b) + ")" : operand(s.b),
                                          static_cast<int>(FaultCode::ModuloByZero), index);
                std::string value = binary_value(s, at, operand(s.a), bt, operand(s.b));
                if (!is_float(at) && s.op == OpKind::Mod)
                    value = fmt::format("{} == 0 ? 0LL : {}", is_float(bt) ? "luminal_f2i(" + operand(s.b) + ")" : operand(s.b), value);
                const DType produced = s.op == OpKind::LessThan ? s.dtype : (is_float(at) ? DType::F32 : DType::I64);
                out += fmt::format("    const {} {} = {};\n", type, v, convert(produced, s.dtype, value));
                break;
            }
        }
    }
    out += faults;
}

// The kernel's parameters: out, the inputs, a scratch buffer where it keeps one, dims, fault and node.
// An input that is out's own buffer (`overwritten`) and out are not restrict.
inline std::string signature(std::string_view entry, DType out, std::span<const DType> inputs, bool scratch = false,
                             std::optional<std::uint16_t> overwritten = std::nullopt) {
    auto qualifier = [](bool aliased) { return aliased ? "" : " __restrict__"; };
    std::string params = fmt::format("{}*{} out", storage_type(out), qualifier(overwritten.has_value()));
    for (std::size_t i = 0; i < inputs.size(); ++i)
        params += fmt::format(", const {}*{} in{}", storage_type(inputs[i]), qualifier(overwritten == i), i);
    if (scratch) params += ", float* __restrict__ scratch";
    return fmt::format("extern \"C\" __global__ void {}({}, const i64* __restrict__ dims, i64* fault, int node)", entry, params);
}
inline std::string signature(std::string_view entry, const Kernel& k) {
    return signature(entry, k.out, k.inputs, false, k.overwrites);
}

// A declaration bounding a kernel's blocks to kThreadsPerBlock threads with `min_blocks` of them resident per
// SM, printed before a kernel every launch of which has that many threads. With one block, ptxas may give a
// thread up to 255 registers and issues all of a GEMV's weight loads before the first product (without a
// bound it keeps a thread to 32-40 registers and waits on the first load after two or three); with two, a
// thread keeps to 128 registers, so attention runs two blocks per SM. A declaration, so the definition keeps
// the form launch groups and the host shim look for.
inline std::string block_bound_declaration(const std::string& signature, int min_blocks = 1) {
    static_assert(kThreadsPerBlock == 256);
    const std::string_view plain = "__global__ void ";
    const std::size_t at = signature.find(plain);
    return signature.substr(0, at) + fmt::format("__global__ __launch_bounds__(256, {}) void ", min_blocks) +
           signature.substr(at + plain.size()) + ";\n";
}
// Removes `entry`'s bounding declaration from `source`; the blocks per SM it asked for, 0 when it had none.
inline int erase_block_bound(std::string& source, std::string_view entry) {
    const std::string_view opening = "extern \"C\" __global__ __launch_bounds__(256, ";
    const std::string closing = fmt::format(") void {}(", entry);
    for (std::size_t at = source.find(opening); at != std::string::npos; at = source.find(opening, at + 1)) {
        const std::size_t digits = at + opening.size(), end = source.find(')', digits);
        if (end == std::string::npos || source.compare(end, closing.size(), closing) != 0) continue;
        const int min_blocks = std::stoi(source.substr(digits, end - digits));
        source.erase(at, source.find(";\n", at) + 2 - at);
        return min_blocks;
    }
    return 0;
}

inline std::string fold_step(OpKind fold, DType value, const std::string& acc, const std::string& v) {
    if (fold == OpKind::SumReduce) return is_float(value) ? acc + " + " + v : "luminal_add(" + acc + ", " + v + ")";
    return "luminal_max(" + acc + ", " + v + ")";
}
inline std::string fold_step(const Kernel& k, const std::string& acc, const std::string& v) {
    return fold_step(k.fold, k.body.steps.back().dtype, acc, v);
}

// The fold's identity for values of `value` stored as `out`.
inline std::string fold_init(OpKind fold, DType value, DType out) {
    const bool floats = is_float(value);
    if (fold == OpKind::SumReduce) return floats ? "0.0f" : "0LL";
    if (floats) return "__int_as_float(0xff800000)";
    if (out == DType::I32) return "-2147483648LL";
    if (out == DType::U8 || out == DType::Bool) return "0LL";
    return "(i64)0x8000000000000000ULL";
}
inline std::string fold_init(const Kernel& k) { return fold_init(k.fold, k.body.steps.back().dtype, k.out); }

}  // namespace source_detail

std::string row_kernel_source(const Kernel& k);  // row_kernel_source.hpp, included below

inline std::string kernel_source(const Kernel& k) {
    using namespace source_detail;
    if (k.shape == Kernel::Shape::Row) return row_kernel_source(k);
    std::string body;
    ExpressionPrinter exprs(body, "e");
    const DType last = k.body.steps.back().dtype;
    const std::string result = fmt::format("v{}", k.body.steps.size() - 1);
    std::string head = std::string(kKernelPrelude);
    if (k.shape == Kernel::Shape::Elementwise) {
        std::string loop, tail;
        ExpressionPrinter counts(loop, "c"), tail_exprs(tail, "t");
        const std::string count = counts.print(k.count, "0"), value = narrow(k.out, convert(last, k.out, result));
        // One element's statements at `index`, stored (a scatter's position out of range is a fault, not a store).
        auto element = [&](ExpressionPrinter& printer, std::string& out, const std::string& index, std::span<const std::string> loaded) {
            print_body(k.body, index, printer, out, loaded);
            if (!k.store_at) {
                out += fmt::format("    out[{}] = {};\n", index, value);
                return;
            }
            const std::string position = convert(k.body.steps[*k.store_at].dtype, DType::I64, fmt::format("v{}", *k.store_at));
            const std::string n = counts.print(k.store_count, "0");
            out += fmt::format("    const i64 at = {0};\n    if (at < 0 || at >= {1}) luminal_fault(fault, {2}, node, at, {1});\n"
                               "    else out[at] = {3};\n",
                               position, n, static_cast<int>(FaultCode::ScatterIndex), value);
        };
        // A whole trip: kElementwiseUnroll elements a grid stride apart, every element's direct loads issued
        // before any is used (a call in the arithmetic, a division's slow path, would otherwise hold back the
        // next element's loads); the last elements, fewer than a trip, one at a time.
        std::vector<std::vector<std::string>> loaded(kElementwiseUnroll, std::vector<std::string>(k.body.steps.size()));
        for (int u = 0; u < kElementwiseUnroll; ++u) body += fmt::format("    const i64 z{0} = first + {0} * stride;\n", u);
        for (int u = 0; u < kElementwiseUnroll; ++u)
            for (std::size_t j = 0; j < k.body.steps.size(); ++j) {
                const Step& s = k.body.steps[j];
                if (s.kind != StepKind::Load || s.at != kAtElement) continue;
                const std::string index = fmt::format("z{}", u), type = value_type(s.dtype);
                const std::string position = exprs.print(s.view.index_expression(), index), valid = exprs.print(s.view.valid_expression(), index);
                loaded[u][j] = fmt::format("l{}_{}", u, j);
                body += fmt::format("    const {0} {1} = {2} != 0 ? {3} : ({0})0;\n", type, loaded[u][j], valid,
                                    widen(s.dtype, fmt::format("in{}[{}]", s.input, position)));
            }
        // Each element's block prints its own locals (a gather's index is named alike in every block).
        std::deque<ExpressionPrinter> blocks;
        std::vector<const ExpressionPrinter*> printers{&exprs, &tail_exprs, &counts};
        for (int u = 0; u < kElementwiseUnroll; ++u) {
            body += "    {\n";
            printers.push_back(&blocks.emplace_back(body, fmt::format("b{}_", u)));
            element(blocks.back(), body, fmt::format("z{}", u), loaded[u]);
            body += "    }\n";
        }
        element(tail_exprs, tail, "z", {});
        std::string code = signature(kElementwiseEntry, k) + " {\n";
        code += dim_declarations(printers) + loop;
        code += fmt::format("  const i64 stride = (i64)gridDim.x * blockDim.x;\n  i64 first = blockIdx.x * (i64)blockDim.x + threadIdx.x;\n"
                            "  for (; first + {} * stride < {}; first += {} * stride) {{\n",
                            kElementwiseUnroll - 1, count, kElementwiseUnroll);
        code += body + "  }\n";
        code += fmt::format("  for (i64 z = first; z < {}; z += stride) {{\n", count) + tail + "  }\n}\n";
        return head + code;
    }
    std::string sizes;
    ExpressionPrinter size_exprs(sizes, "c");
    const std::string count = size_exprs.print(k.count, "0"), extent = size_exprs.print(k.extent, "0"),
                      inner = size_exprs.print(k.inner, "0");
    print_body(k.body, "i", exprs, body);
    const std::string acc_type = value_type(last);
    const std::string store = narrow(k.out, convert(is_float(last) ? DType::F32 : DType::I64, k.out, "acc"));
    std::string code = signature(kReduceEntry, k) + " {\n" + dim_declarations({&exprs, &size_exprs}) + sizes;
    auto element_loop = [&](const std::string& start, const std::string& step) {
        return fmt::format("    {} acc = {};\n    for (i64 r = {}; r < {}; r += {}) {{\n      const i64 i = first + r * {};\n"
                           "{}      acc = {};\n    }}\n",
                           acc_type, fold_init(k), start, extent, step, inner, body, fold_step(k, "acc", result));
    };
    const std::string first = fmt::format("    const i64 first = (o / {0}) * {1} * {0} + o % {0};\n", inner, extent);
    const std::string warp_fold = "    for (int s = 16; s > 0; s >>= 1) acc = " +
                                  fold_step(k, "acc", "__shfl_xor_sync(0xffffffffu, acc, s)") + ";\n";
    switch (k.strategy) {
        case ReduceStrategy::ThreadPerOutput:
            code += "  for (i64 o = blockIdx.x * (i64)blockDim.x + threadIdx.x; o < " + count +
                    "; o += (i64)gridDim.x * blockDim.x) {\n" + first + element_loop("0", "1") + "    out[o] = " + store + ";\n  }\n";
            break;
        case ReduceStrategy::WarpPerOutput:
            code += "  const int lane = threadIdx.x & 31;\n";
            code += "  for (i64 o = (blockIdx.x * (i64)blockDim.x + threadIdx.x) >> 5; o < " + count +
                    "; o += ((i64)gridDim.x * blockDim.x) >> 5) {\n" + first + element_loop("lane", "32") + warp_fold +
                    "    if (lane == 0) out[o] = " + store + ";\n  }\n";
            break;
        case ReduceStrategy::BlockPerOutput:
            code += "  __shared__ " + acc_type + " partial[32];\n  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n";
            code += "  for (i64 o = blockIdx.x; o < " + count + "; o += gridDim.x) {\n" + first +
                    element_loop("threadIdx.x", "blockDim.x") + warp_fold +
                    "    if (lane == 0) partial[warp] = acc;\n    __syncthreads();\n"
                    "    if (warp == 0) {\n      acc = lane < (int)(blockDim.x >> 5) ? partial[lane] : " + fold_init(k) + ";\n" +
                    "  " + warp_fold + "      if (lane == 0) out[o] = " + store + ";\n    }\n    __syncthreads();\n  }\n";
            break;
    }
    return head + code + "}\n";
}

// Two entries: claim (each position's highest writer index, into `winner`,
// which starts at -1) and write (only the claimed writers store).
inline std::string kernel_source(const ScatterKernel& k) {
    using namespace source_detail;
    std::string pre;
    ExpressionPrinter exprs(pre, "c");
    const std::string count = exprs.print(k.count, "0"), n = exprs.print(k.out_count, "0");
    std::string body;
    ExpressionPrinter element(body, "e");
    const std::string index_at = element.print(k.indexes.index_expression(), "i");
    const std::string index_valid = element.print(k.indexes.valid_expression(), "i");
    body += fmt::format("    const i64 at = {} != 0 ? {} : 0LL;\n", index_valid,
                        convert(k.inputs[0], DType::I64, widen(k.inputs[0], "indexes[" + index_at + "]")));
    std::string write;
    ExpressionPrinter source(write, "s");
    const std::string source_at = source.print(k.source.index_expression(), "i");
    const std::string source_valid = source.print(k.source.valid_expression(), "i");
    const std::string value_t = value_type(k.inputs[1]);
    write += fmt::format("    const {} v = {} != 0 ? {} : ({})0;\n", value_t, source_valid,
                         widen(k.inputs[1], "src[" + source_at + "]"), value_t);
    write += fmt::format("    out[at] = {};\n", narrow(k.out, convert(k.inputs[1], k.out, "v")));
    const std::string decls = dim_declarations({&exprs, &element, &source});
    const std::string loop = "  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < " + count +
                             "; i += (i64)gridDim.x * blockDim.x) {\n";
    const std::string params = fmt::format("const {}* __restrict__ indexes, const {}* __restrict__ src, const i64* __restrict__ dims, i64* fault, int node",
                                           storage_type(k.inputs[0]), storage_type(k.inputs[1]));
    std::string code = std::string(kKernelPrelude);
    code += fmt::format("extern \"C\" __global__ void {}(int* winner, {}) {{\n", kScatterClaimEntry, params) + decls + pre + loop + body;
    code += fmt::format("    if (at < 0 || at >= {0}) {{ luminal_fault(fault, {1}, node, at, {0}); continue; }}\n", n,
                        static_cast<int>(FaultCode::ScatterIndex));
    code += "    atomicMax(winner + at, (int)i);\n  }\n}\n";
    code += fmt::format("extern \"C\" __global__ void {}({}* __restrict__ out, const int* __restrict__ winner, {}) {{\n",
                        kScatterWriteEntry, storage_type(k.out), params) + decls + pre + loop + body;
    code += fmt::format("    if (at < 0 || at >= {} || winner[at] != (int)i) continue;\n", n) + write + "  }\n}\n";
    return code;
}

}  // namespace luminal::cuda

#include "luminal/cuda/row_kernel_source.hpp"
