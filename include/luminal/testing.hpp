#pragma once
// Testing a runtime, a rule or a custom op against the ReferenceRuntime, for
// any test framework: each check returns a Comparison, whose ok() a test
// asserts and whose report() says what differed.
//
//   auto c = luminal::testing::compare_with_reference(graph, luminal::CpuRuntime{}.add_op<MyOp>());
//   CHECK_MESSAGE(c.ok(), c.report());
//   auto d = luminal::testing::check_random_candidates(graph, luminal::CpuRuntime{}.add_op<MyOp>());
//
// The expected values always come from the unoptimised graph on the
// ReferenceRuntime, on the same inputs: given ones, the rest random.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "luminal/egraph/compile.hpp"
#include "luminal/egraph/search.hpp"
#include "luminal/runtime/reference_runtime.hpp"
#include "luminal/runtime/runtime.hpp"

namespace luminal::testing {

// |got - want| <= abs + rel * |want|; NaN must match NaN, infinities exactly.
struct Tolerance {
    double abs = 1e-5;
    double rel = 1e-5;
};

struct Inputs {
    std::vector<std::pair<GraphTensor, std::vector<double>>> given;  // values for some inputs
    std::uint64_t seed = 7;
    double low = -2, high = 2;   // other float inputs: uniform in [low, high)
    std::int64_t int_bound = 4;  // other integer inputs: uniform in [0, int_bound)
};

struct CandidateOptions {
    std::size_t count = 100;  // distinct candidate programs to check
    std::uint64_t seed = 42;
    Inputs inputs;
    Tolerance tolerance;
};

struct Comparison {
    std::size_t programs = 0;           // programs compared with the reference
    std::vector<std::string> failures;  // one line per mismatching program (empty: all agreed)

    bool ok() const { return failures.empty(); }
    std::string report() const {
        std::string out = fmt::format("{} program(s) compared, {} differed", programs, failures.size());
        for (const std::string& f : failures) out += "\n" + f;
        return out;
    }
};

namespace detail {

inline GraphTensor tensor_of(const Graph& g, NodeId id) {
    const Node& n = g.node(id);
    return GraphTensor(const_cast<Graph*>(&g), id, ShapeTracker(n.shape), n.dtype);
}

template <typename R>
void bind_inputs(R& rt, const Graph& g, const Inputs& inputs) {
    std::mt19937_64 rng(inputs.seed);
    for (NodeId id = 0; id < g.size(); ++id) {
        const Node& n = g.node(id);
        if (n.op.kind != OpKind::Input) continue;
        GraphTensor t = tensor_of(g, id);
        std::vector<double> values;
        for (const auto& [tensor, given] : inputs.given)
            if (tensor.id() == id) values = given;
        if (values.empty()) {
            std::int64_t count = 1;
            for (auto& d : n.shape) count *= d.eval(g.dyn_map());
            values.resize(static_cast<std::size_t>(count));
            std::uniform_real_distribution<double> real(inputs.low, inputs.high);
            for (double& v : values)
                v = is_float(n.dtype) ? real(rng)
                                      : static_cast<double>(rng() % static_cast<std::uint64_t>(std::max<std::int64_t>(inputs.int_bound, 1)));
        }
        if (is_float(n.dtype)) rt.set_data(t, std::vector<float>(values.begin(), values.end()));
        else rt.set_data(t, std::vector<std::int64_t>(values.begin(), values.end()));
    }
}

template <typename R>
std::vector<std::vector<double>> outputs_of(const R& rt, const Graph& g) {
    std::vector<std::vector<double>> out;
    for (NodeId o : g.outputs()) out.push_back(rt.template get<double>(tensor_of(g, o)));
    return out;
}

// The first mismatch between two runs' outputs, or an empty string.
inline std::string first_mismatch(const std::vector<std::vector<double>>& got, const std::vector<std::vector<double>>& want,
                                  const Tolerance& tol) {
    for (std::size_t o = 0; o < want.size(); ++o) {
        if (got[o].size() != want[o].size())
            return fmt::format("output {} has {} elements, the reference {}", o, got[o].size(), want[o].size());
        for (std::size_t i = 0; i < want[o].size(); ++i) {
            const double g = got[o][i], w = want[o][i];
            const bool same = std::isnan(w) ? std::isnan(g) : std::isinf(w) ? g == w : std::abs(g - w) <= tol.abs + tol.rel * std::abs(w);
            if (!same) return fmt::format("output {} element {}: got {}, reference {}", o, i, g, w);
        }
    }
    return {};
}

inline CompileOptions quiet() {
    CompileOptions options;
    options.verbosity = 0;
    return options;
}

inline std::vector<std::vector<double>> reference_outputs(const Graph& g, const Inputs& inputs) {
    ReferenceRuntime ref;
    ref.load(program_of(g));
    bind_inputs(ref, g, inputs);
    ref.execute(g.dyn_map());
    return outputs_of(ref, g);
}

}  // namespace detail

// Compiles `graph` for `runtime` (saturation, extraction and search as
// `options` say), runs it, and compares every output with the reference.
template <Runtime R>
Comparison compare_with_reference(const Graph& graph, R runtime, const Inputs& inputs = {}, const Tolerance& tolerance = {},
                                  const CompileOptions& options = detail::quiet()) {
    const auto want = detail::reference_outputs(graph, inputs);
    auto [rt, report] = compile_with_report(graph, std::move(runtime), options);
    detail::bind_inputs(rt, graph, inputs);
    rt.execute(graph.dyn_map());
    Comparison c{1, {}};
    if (std::string bad = detail::first_mismatch(detail::outputs_of(rt, graph), want, tolerance); !bad.empty())
        c.failures.push_back(bad + "\n" + report.program.to_string());
    return c;
}

// Draws up to `options.count` distinct random candidate programs from the
// e-graph saturated with R::Rules (each a few random choices away from one
// seen before), runs each on `runtime`, and compares with the reference.
template <Runtime R>
Comparison check_random_candidates(const Graph& graph, R runtime, const CandidateOptions& options = {}) {
    const auto want = detail::reference_outputs(graph, options.inputs);
    egraph::HlirEGraph h;
    egraph::build_egraph(graph, h);
    const egraph::RunReport saturation = egraph::saturate(h.graph, h.ctx, typename R::Rules{});
    Comparison c;
    if (saturation.stop != egraph::StopReason::Saturated)
        c.failures.push_back("saturation stopped early:\n" + saturation.to_string());
    const auto workloads = costing_workloads({}, graph.dyn_map());
    egraph::CandidateGenerator generator(h, egraph::extract_min_cost(h.graph, h.ctx, workloads, runtime.cost_model(), h.roots),
                                         options.seed);
    std::vector<egraph::Choice> seen{generator.base()};
    std::mt19937_64 rng(options.seed + 1);
    while (c.programs < options.count) {
        generator.set_base(seen[rng() % seen.size()]);
        std::optional<egraph::Choice> candidate = generator.next();
        if (!candidate) break;
        const Program p = egraph::lower(h.graph, h.ctx, *candidate, h.roots);
        runtime.load(p);
        detail::bind_inputs(runtime, graph, options.inputs);
        runtime.execute(graph.dyn_map());
        if (std::string bad = detail::first_mismatch(detail::outputs_of(runtime, graph), want, options.tolerance); !bad.empty())
            c.failures.push_back(fmt::format("candidate {}: {}\n{}", c.programs, bad, p.to_string()));
        seen.push_back(std::move(*candidate));
        ++c.programs;
    }
    return c;
}

}  // namespace luminal::testing
