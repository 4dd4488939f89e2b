#pragma once
// A test-only backend, written only against the public boundary: its own op
// (MulAdd), a rule that introduces it, its own cost model, and a runtime. It
// accepts programs of primitives and MulAdd only (anything else is an Error
// naming the op), runs them with their reference semantics, and reports a
// modelled time instead of a measured one, so a search over it is
// deterministic: the same seed gives the same program.
#include <luminal/egraph/core_rules.hpp>
#include <luminal/runtime/reference_runtime.hpp>
#include <luminal/runtime/runtime.hpp>

#include "mul_add_rule.hpp"

namespace toy {

class ToyRuntime {
public:
    using Rules = luminal::egraph::concat_t<luminal::egraph::CoreRules, luminal::egraph::RuleSet<MulAddFromAddMul>>;

    // A slow device on which a kernel launch costs as much as 40 kB of traffic.
    luminal::CostModel cost_model() const { return {1e9, 4e-5, 1e9}; }

    void load(const luminal::Program& program, luminal::InputBinding binding = luminal::InputBinding::Drop) {
        for (std::uint32_t i = 0; i < program.nodes.size(); ++i) {
            const luminal::NodeSpec& s = program.nodes[i].spec;
            luminal::check(!s.op.payload || s.payload_as<MulAddOp>(), "ToyRuntime::load",
                           "node {}: the toy backend cannot run op '{}'", i, s.op.name());
        }
        program_ = program;
        inner_.load(program, binding);
    }
    template <typename T>
    void set_data(const luminal::GraphTensor& t, const std::vector<T>& values) { inner_.set_data(t, values); }
    void set_bytes(const luminal::GraphTensor& t, std::span<const std::byte> bytes) { inner_.set_bytes(t, bytes); }
    void execute(const luminal::DynMap& dims) { inner_.execute(dims); }
    std::vector<float> get_f32(const luminal::GraphTensor& t) const { return inner_.get_f32(t); }
    template <typename T>
    std::vector<T> get(const luminal::GraphTensor& t) const { return inner_.get<T>(t); }

    // The modelled seconds of one execution (a function of the program alone).
    double time_execution(const luminal::DynMap& dims, std::size_t) const {
        double seconds = 0;
        for (const luminal::ProgramNode& n : program_.nodes) {
            std::vector<luminal::DType> inputs;
            for (std::uint32_t s : n.sources) inputs.push_back(program_.nodes[s].spec.dtype);
            seconds += luminal::node_seconds(n.spec, inputs, dims, cost_model());
        }
        return seconds;
    }

private:
    luminal::Program program_;
    luminal::ReferenceRuntime inner_;
};

static_assert(luminal::Runtime<ToyRuntime>);

}  // namespace toy
