#pragma once
// The reference semantics of each HLIR primitive (see graph/op.hpp); backend
// ops bring their own (graph/backend_op.hpp).
#include "luminal/graph/primitive_semantics.hpp"
#include "luminal/runtime/reference_reduce.hpp"

namespace luminal {

inline HostBuffer ReferenceRuntime::run(const ProgramNode& program_node, std::uint32_t id, std::int64_t n,
                                        const DynMap& dims) const {
    const NodeSpec& node = program_node.spec;
    const auto kind = static_cast<OpKind>(node.kind);
    HostBuffer out(node.dtype, static_cast<std::size_t>(n));
    auto size = static_cast<std::size_t>(n);
    auto read_inputs = [&] {
        std::vector<ReferenceInput> inputs;
        for (std::size_t k = 0; k < program_node.sources.size(); ++k) inputs.push_back(reader(program_node, id, k, dims));
        return inputs;
    };
    if (node.op.payload) {
        const std::vector<ReferenceInput> inputs = read_inputs();
        node.op.payload->reference(ReferenceCall{inputs, out, dims, id});
        return out;
    }

    if (kind == OpKind::Constant) {
        out.store_double(0, node.op.value);
    } else if (kind == OpKind::Iota) {
        Expression bound = node.op.iota.bind(dims);
        for (std::size_t i = 0; i < size; ++i) out.store_int(i, bound.eval(dims, static_cast<std::int64_t>(i)));
    } else if (kind == OpKind::Output || kind == OpKind::Cast) {
        ReferenceInput in = reader(program_node, id, 0, dims);
        for (std::size_t i = 0; i < size; ++i) in.copy_to(out, i, static_cast<std::int64_t>(i));
    } else if (is_unary(kind) || is_binary(kind)) {
        const std::vector<ReferenceInput> inputs = read_inputs();
        check(!is_unary(kind) || is_float(inputs[0].dtype()), name_of(kind).data(), "node {} needs a float input, got {}", id,
              name_of(inputs[0].dtype()));
        HostBuffer a(inputs[0].dtype(), 1), b(inputs.back().dtype(), 1);
        for (std::size_t i = 0; i < size; ++i) {
            const auto e = static_cast<std::int64_t>(i);
            inputs[0].copy_to(a, 0, e);
            if (is_binary(kind)) inputs[1].copy_to(b, 0, e);
            semantics::apply(kind, a, &b, out, i, id, e);
        }
    } else if (is_reduce(kind)) {
        reference_fold(kind, reader(program_node, id, 0, dims), node.op.axis, out);
    } else if (kind == OpKind::Gather) {
        ReferenceInput data = reader(program_node, id, 0, dims), indexes = reader(program_node, id, 1, dims);
        for (std::size_t i = 0; i < size; ++i) {
            std::int64_t at = indexes.i(static_cast<std::int64_t>(i));
            check(at >= 0 && at < data.numel(), "Gather", "node {}: index {} at position {} is out of range for {} elements",
                  id, at, i, data.numel());
            data.copy_to(out, i, at);
        }
    } else if (kind == OpKind::Scatter) {
        ReferenceInput dest = reader(program_node, id, 0, dims), indexes = reader(program_node, id, 1, dims), src = reader(program_node, id, 2, dims);
        for (std::size_t i = 0; i < size; ++i) dest.copy_to(out, i, static_cast<std::int64_t>(i));
        for (std::int64_t i = 0; i < indexes.numel(); ++i) {
            std::int64_t at = indexes.i(i);
            check(at >= 0 && at < n, "Scatter", "node {}: index {} at position {} is out of range for {} elements", id, at, i, n);
            src.copy_to(out, static_cast<std::size_t>(at), i);
        }
    } else {
        throw Error("ReferenceRuntime", fmt::format("node {}: no semantics for op {}", id, name_of(kind)));
    }
    return out;
}

}  // namespace luminal
