// A user-defined op end to end: the Gauss error function erf(x), which the
// primitives cannot express exactly, declared as a type with its shape and
// dtype rules, reference semantics and a CPU kernel; used from tensor code
// (the exact GELU, 0.5 x (1 + erf(x / sqrt 2))); compiled through saturation
// and extraction for the CPU; and checked against the reference with the
// public testing header.
#include <cmath>
#include <cstdio>
#include <vector>

#include <luminal/luminal.hpp>
#include <luminal/testing.hpp>

struct ErfOp {
    static constexpr std::string_view name = "example.Erf";
    bool operator==(const ErfOp&) const = default;
    std::size_t hash() const { return 0; }

    // Elementwise: the input's shape; floats only.
    luminal::DType dtype(std::span<const luminal::DType> inputs) const {
        luminal::check(inputs[0] == luminal::DType::F32, "erf", "needs an f32 input, got {}", luminal::name_of(inputs[0]));
        return inputs[0];
    }
    // What the ReferenceRuntime runs (and every other runtime is compared with).
    void reference(const luminal::ReferenceCall& call) const {
        for (std::size_t i = 0; i < call.out.size(); ++i) call.out.store_double(i, std::erf(call.inputs[0].f(static_cast<std::int64_t>(i))));
    }
    // The CPU kernel: contiguous float arrays in and out.
    void cpu(const luminal::CpuOpCall& call) const {
        const float* x = call.inputs[0].as<float>();
        float* y = call.out.as<float>();
        for (std::int64_t i = 0; i < call.out.numel(); ++i) y[i] = std::erf(x[i]);
    }
};

int main() {
    luminal::Graph cx;
    luminal::GraphTensor x = cx.named_tensor("x", {'s', 8});
    luminal::GraphTensor erf = luminal::custom_op(ErfOp{}, {x * (1.0 / std::sqrt(2.0))});
    luminal::GraphTensor gelu = (x * 0.5 * (erf + 1.0)).output();
    cx.set_dim('s', 3);

    auto rt = cx.compile(luminal::CpuRuntime{}.add_op<ErfOp>());
    std::vector<float> values;
    for (int i = 0; i < 24; ++i) values.push_back(static_cast<float>(i - 12) / 4);
    rt.set_data(x, values);
    rt.execute(cx.dyn_map());
    const std::vector<float> got = rt.get_f32(gelu);
    for (std::size_t i = 0; i < values.size(); i += 6) std::printf("gelu(%g) = %.6f\n", values[i], got[i]);

    // The same graph, compiled for the CPU, against the unoptimised graph on the
    // reference; then random candidate programs of the saturated e-graph.
    auto compiled = luminal::testing::compare_with_reference(cx, luminal::CpuRuntime{}.add_op<ErfOp>());
    luminal::testing::CandidateOptions twenty;
    twenty.count = 20;
    auto candidates = luminal::testing::check_random_candidates(cx, luminal::CpuRuntime{}.add_op<ErfOp>(), twenty);
    std::printf("compiled: %s\ncandidates: %s\n", compiled.report().c_str(), candidates.report().c_str());
    return compiled.ok() && candidates.ok() ? 0 : 1;
}
