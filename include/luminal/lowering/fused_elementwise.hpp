#pragma once
// FusedElementwise: a chain of elementwise primitives over the node's inputs in
// one pass, with no intermediate buffers. A backend-neutral LLIR op; the rules
// that grow regions are in lowering/rules.hpp.
#include <bit>
#include <memory>
#include <string_view>
#include <vector>

#include "luminal/graph/backend_op.hpp"
#include "luminal/graph/primitive_semantics.hpp"

namespace luminal {

// One step of a fused region. Operand slots below the region's input count
// name its inputs; slot input_count + j names step j's result.
struct FusedStep {
    OpKind kind;  // a unary or binary primitive, Cast, Constant or Iota
    std::uint16_t a = 0, b = 0;
    DType dtype = DType::F32;
    double value = 0;  // Constant
    Expression iota;   // Iota
    friend bool operator==(const FusedStep& x, const FusedStep& y) {  // constants by bit pattern, as in Op
        return x.kind == y.kind && x.a == y.a && x.b == y.b && x.dtype == y.dtype && x.iota == y.iota &&
               std::bit_cast<std::uint64_t>(x.value) == std::bit_cast<std::uint64_t>(y.value);
    }
};

struct FusedProgram {
    std::vector<FusedStep> steps;  // the last step is the region's result
    friend bool operator==(const FusedProgram&, const FusedProgram&) = default;
};

struct FusedElementwiseOp {
    static constexpr std::string_view name = "FusedElementwise";
    std::shared_ptr<const FusedProgram> program;

    bool operator==(const FusedElementwiseOp& o) const {
        return program == o.program || (program && o.program && *program == *o.program);
    }
    std::size_t hash() const {
        std::size_t h = 0x51ED27u;
        for (const FusedStep& s : program->steps) {
            h = (h ^ static_cast<std::size_t>(s.kind)) * 0x100000001B3ull;
            h = (h ^ (std::size_t{s.a} << 16 | s.b)) * 0x100000001B3ull;
            h = (h ^ static_cast<std::size_t>(s.dtype) ^ std::bit_cast<std::uint64_t>(s.value) ^ s.iota.hash()) * 0x9E3779B97F4A7C15ull;
        }
        return h;
    }
    std::string attributes() const { return fmt::format("steps={}", program->steps.size()); }

    // Each step's arithmetic per output element (elementwise_flops).
    double flops(const OpCostQuery& q) const {
        double per_element = 0;
        for (const FusedStep& s : program->steps) per_element += elementwise_flops(s.kind);
        return per_element * q.elements(q.shape);
    }
    DType dtype(std::span<const DType>) const { return program->steps.back().dtype; }

    // Each step is a primitive applied per element, rounded to the step's
    // dtype, exactly as the separate primitive nodes would compute it.
    void reference(const ReferenceCall& call) const {
        const auto& steps = program->steps;
        const std::size_t n_in = call.inputs.size();
        std::vector<Expression> iotas;
        for (auto& st : steps) iotas.push_back(st.kind == OpKind::Iota ? st.iota.bind(call.dims) : Expression(0));
        std::vector<HostBuffer> values, loaded;
        for (auto& st : steps) values.emplace_back(st.dtype, 1);
        for (auto& in : call.inputs) loaded.emplace_back(in.dtype(), 1);
        auto value = [&](std::uint16_t slot) -> const HostBuffer& { return slot < n_in ? loaded[slot] : values[slot - n_in]; };
        for (std::size_t e = 0; e < call.out.size(); ++e) {
            const auto index = static_cast<std::int64_t>(e);
            for (std::size_t k = 0; k < n_in; ++k) call.inputs[k].copy_to(loaded[k], 0, index);
            for (std::size_t j = 0; j < steps.size(); ++j) {
                const FusedStep& st = steps[j];
                switch (st.kind) {
                    case OpKind::Constant: values[j].store_double(0, st.value); break;
                    case OpKind::Iota: values[j].store_int(0, iotas[j].eval(call.dims, index)); break;
                    case OpKind::Cast: values[j].copy_element(0, value(st.a), 0); break;
                    default:
                        semantics::apply(st.kind, value(st.a), is_binary(st.kind) ? &value(st.b) : nullptr, values[j], 0,
                                         call.node, index);
                }
            }
            call.out.copy_element(e, values.back(), 0);
        }
    }
};

}  // namespace luminal
