#pragma once
// The toy backend's own op: out = a * b + c in one node, each product rounded
// to the dtype before the sum, so it computes exactly what Mul then Add do.
#include <luminal/graph/backend_op.hpp>
#include <luminal/graph/primitive_semantics.hpp>

namespace toy {

struct MulAddOp {
    static constexpr std::string_view name = "toy.MulAdd";
    bool operator==(const MulAddOp&) const = default;
    std::size_t hash() const { return 0x70f; }

    void reference(const luminal::ReferenceCall& call) const {
        using luminal::OpKind;
        luminal::HostBuffer a(call.inputs[0].dtype(), 1), b(call.inputs[1].dtype(), 1), c(call.inputs[2].dtype(), 1),
            product(call.out.dtype, 1);
        for (std::size_t i = 0; i < call.out.size(); ++i) {
            const auto e = static_cast<std::int64_t>(i);
            call.inputs[0].copy_to(a, 0, e);
            call.inputs[1].copy_to(b, 0, e);
            call.inputs[2].copy_to(c, 0, e);
            luminal::semantics::apply(OpKind::Mul, a, &b, product, 0, call.node, e);
            luminal::semantics::apply(OpKind::Add, product, &c, call.out, i, call.node, e);
        }
    }
};

}  // namespace toy
