#pragma once
// The Runtime concept: the contract between the compiler and a backend.
//
//  R::Rules                  the rule set saturation runs for it (an egraph::RuleSet)
//  cost_model()              the numbers extraction prices nodes with (CostModel)
//  load(program[, binding])  takes a Program to run; inputs bound before are dropped, or with
//                            InputBinding::Keep kept where the new program has the same Input
//  set_data(t, values)       binds an Input from floats or integers, converted to its dtype;
//  set_bytes(t, bytes)       or from raw little-endian elements of its own dtype
//  execute(dims)             runs the program; when it returns every output is computed and
//                            readable, and each carried output (Graph::carry) is its input's data
//  get_f32(t), get<T>(t)     an output's values
//  time_execution(dims, n)   seconds one execute() takes: the median of n after a warm-up,
//                            on the runtime's own clock, synchronised as the device needs
//
// A runtime throws luminal::Error for what its caller can fix (an op it cannot
// run, named; a missing input) and FatalError once it cannot be used again.
#include <algorithm>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "luminal/egraph/cost_model.hpp"
#include "luminal/egraph/rule.hpp"
#include "luminal/graph/graph_tensor.hpp"
#include "luminal/graph/program.hpp"

namespace luminal {

template <typename R>
concept Runtime = std::movable<R> &&
    requires(R& rt, const R& crt, const Program& program, const GraphTensor& t, const DynMap& dims,
             std::span<const std::byte> bytes, const std::vector<float>& floats,
             const std::vector<std::int32_t>& ints, const std::vector<std::int64_t>& longs) {
        typename R::Rules;
        { crt.cost_model() } -> std::convertible_to<CostModel>;
        rt.load(program);
        rt.load(program, InputBinding::Keep);
        rt.set_data(t, floats);
        rt.set_data(t, ints);
        rt.set_data(t, longs);
        rt.set_bytes(t, bytes);
        rt.execute(dims);
        { crt.get_f32(t) } -> std::same_as<std::vector<float>>;
        { crt.template get<std::int64_t>(t) } -> std::same_as<std::vector<std::int64_t>>;
        { rt.time_execution(dims, std::size_t{3}) } -> std::convertible_to<double>;
    };

// For load(program, InputBinding::Keep): the node of the program loaded
// before (`nodes`) binding the same HLIR Input as `input` (same dtype and
// shape) whose data is bound (`bound(i)`), if any.
template <typename Bound>
std::optional<std::uint32_t> bound_input_like(const std::vector<ProgramNode>& nodes, const NodeSpec& input, Bound bound) {
    if (input.kind != symbol_of(OpKind::Input)) return std::nullopt;
    for (std::uint32_t i = 0; i < nodes.size(); ++i) {
        const NodeSpec& s = nodes[i].spec;
        if (s.kind == input.kind && s.hlir == input.hlir && s.dtype == input.dtype && s.shape == input.shape && bound(i))
            return i;
    }
    return std::nullopt;
}

// time_execution for a runtime whose execute() has finished its work when it
// returns (the host runtimes): the median of `reps` timed runs after one more.
template <typename R>
double host_execution_seconds(R& rt, const DynMap& dims, std::size_t reps) {
    rt.execute(dims);
    std::vector<double> times;
    for (std::size_t i = 0; i < std::max<std::size_t>(reps, 1); ++i) {
        auto start = std::chrono::steady_clock::now();
        rt.execute(dims);
        times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

}  // namespace luminal
