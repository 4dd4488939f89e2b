// A user-defined op through the whole pipeline: an op type with a shape rule,
// reference semantics and a CPU kernel, used from tensor code, compiled
// through saturation and extraction, checked with luminal/testing.hpp; and
// the errors a user gets for an op a runtime cannot run.
#include <doctest/doctest.h>

#include <luminal/luminal.hpp>
#include <luminal/testing.hpp>

#include "../toy_backend/toy_runtime.hpp"

namespace {

// Sum of squares over the last axis: [.., n] -> [..].
struct SquaredNormOp {
    static constexpr std::string_view name = "test.SquaredNorm";
    bool operator==(const SquaredNormOp&) const = default;
    std::size_t hash() const { return 0; }

    luminal::Shape shape(std::span<const luminal::ShapeTracker> inputs) const {
        luminal::Shape s = inputs[0].dims();
        s.pop_back();
        return s;
    }
    void reference(const luminal::ReferenceCall& call) const {
        const std::int64_t n = call.inputs[0].dim(call.inputs[0].rank() - 1);
        for (std::size_t row = 0; row < call.out.size(); ++row) {
            double sum = 0;
            for (std::int64_t j = 0; j < n; ++j) {
                const double x = call.inputs[0].f(static_cast<std::int64_t>(row) * n + j);
                sum += x * x;
            }
            call.out.store_double(row, sum);
        }
    }
    void cpu(const luminal::CpuOpCall& call) const {
        const float* x = call.inputs[0].as<float>();
        const std::int64_t n = call.inputs[0].dims.back();
        for (std::int64_t row = 0; row < call.out.numel(); ++row) {
            float sum = 0;
            for (std::int64_t j = 0; j < n; ++j) sum += x[row * n + j] * x[row * n + j];
            call.out.as<float>()[row] = sum;
        }
    }
};

// An op with no reference semantics and no kernels anywhere.
struct OpaqueOp {
    static constexpr std::string_view name = "test.Opaque";
    bool operator==(const OpaqueOp&) const = default;
    std::size_t hash() const { return 1; }
};

}  // namespace

TEST_CASE("custom op: shape rule, hand-derived values on the reference and the CPU runtime") {
    luminal::Graph cx;
    auto x = cx.named_tensor("x", {2, 3});
    auto norms = luminal::custom_op(SquaredNormOp{}, {x.permute({1, 0})}).output();  // read through a transposed view
    CHECK(norms.shape() == luminal::Shape{3});
    const std::vector<float> values{1, 2, 3, 4, 5, 6};  // x^T rows: (1,4) (2,5) (3,6)
    auto reference = cx.compile(luminal::ReferenceRuntime{});
    reference.set_data(x, values);
    reference.execute(cx.dyn_map());
    CHECK(reference.get_f32(norms) == std::vector<float>{17, 29, 45});
    auto cpu = cx.compile(luminal::CpuRuntime{}.add_op<SquaredNormOp>());
    cpu.set_data(x, values);
    cpu.execute(cx.dyn_map());
    CHECK(cpu.get_f32(norms) == std::vector<float>{17, 29, 45});
}

TEST_CASE("custom op: compiled programs and random candidates agree with the reference") {
    luminal::Graph cx;
    auto x = cx.named_tensor("x", {'s', 8}), w = cx.named_tensor("w", {8, 8});
    auto h = (x.matmul(w) * 0.5 + 1.0).exp();
    (luminal::custom_op(SquaredNormOp{}, {h}).sqrt() * 2.0 + x.sum(-1)).output();
    cx.set_dim('s', 5);
    const luminal::testing::Tolerance tolerance{1e-4, 1e-5};
    luminal::CompileOptions searched;
    searched.search_candidates = 10;
    searched.verbosity = 0;
    auto compiled = luminal::testing::compare_with_reference(cx, luminal::CpuRuntime{}.add_op<SquaredNormOp>(), {}, tolerance,
                                                             searched);
    CHECK_MESSAGE(compiled.ok(), compiled.report());
    luminal::testing::CandidateOptions fifty;
    fifty.count = 50;
    fifty.tolerance = tolerance;
    auto candidates = luminal::testing::check_random_candidates(cx, luminal::CpuRuntime{}.add_op<SquaredNormOp>(), fifty);
    CHECK_MESSAGE(candidates.ok(), candidates.report());
    CHECK(candidates.programs == 50);
}

TEST_CASE("custom op: a runtime that cannot run an op names it") {
    luminal::Graph cx;
    auto x = cx.named_tensor("x", {4});
    auto y = luminal::custom_op(SquaredNormOp{}, {x}).output();
    (void)y;
    CHECK_THROWS_WITH_AS(cx.compile(luminal::CpuRuntime{}), doctest::Contains("cannot run op 'test.SquaredNorm'"), luminal::Error);
    CHECK_THROWS_WITH_AS(cx.compile(toy::ToyRuntime{}), doctest::Contains("cannot run op 'test.SquaredNorm'"), luminal::Error);

    luminal::Graph other;
    auto z = other.named_tensor("z", {4});
    luminal::custom_op(OpaqueOp{}, {z}).output();
    auto rt = other.compile(luminal::ReferenceRuntime{});
    rt.set_data(z, std::vector<float>{1, 2, 3, 4});
    CHECK_THROWS_WITH_AS(rt.execute(other.dyn_map()), doctest::Contains("op 'test.Opaque' (node 1) has no reference semantics"),
                         luminal::Error);
}

TEST_CASE("backend op symbols: fixed by the name, shown by name in programs") {
    static_assert(luminal::op_symbol<SquaredNormOp> >= luminal::kFirstBackendSymbol);
    static_assert(luminal::op_symbol<SquaredNormOp> != luminal::op_symbol<OpaqueOp>);
    luminal::Graph cx;
    auto x = cx.named_tensor("x", {2, 2});
    luminal::custom_op(SquaredNormOp{}, {x}).output();
    CHECK(luminal::program_of(cx).to_string().find("test.SquaredNorm(%0)") != std::string::npos);
}
