#pragma once
// Shared helpers of the CpuRuntime tests: random inputs per dtype, output
// comparison with per-dtype tolerances, a differential harness that runs one
// program on CpuRuntime and on ReferenceRuntime (the oracle), and a builder
// for hand-made programs whose Input/Output nodes stand for real graph nodes.
//
// Tolerances (|got - want| <= abs + rel * |want|): CpuRuntime computes f32 in
// float (std::exp2f etc., float accumulators) while the reference uses double
// and rounds per node, so f32 allows 1e-5 + 1e-5 rel; f16 allows about two f16
// ulps (2e-3 + 4e-3 rel); bf16 two bf16 ulps (1.6e-2 rel). Integers, bools and
// pure data movement are exact. NaN must be NaN, an infinity the same infinity.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <luminal/luminal.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace cpu_test {

using luminal::DType;
using luminal::DynMap;
using luminal::GraphTensor;

struct Tol {
    double abs = 1e-5, rel = 1e-5;
};

inline Tol default_tol(DType t) {
    switch (t) {
        case DType::F32: return {1e-5, 1e-5};
        case DType::F16: return {2e-3, 4e-3};
        case DType::BF16: return {1.6e-2, 1.6e-2};
        default: return {0, 0};
    }
}

inline std::int64_t numel(const luminal::Shape& shape, const DynMap& dims) {
    std::int64_t n = 1;
    for (auto& d : shape) n *= d.eval(dims);
    return n;
}

// Values a test feeds to an input: doubles for float dtypes, integers otherwise.
using Generator = std::function<std::vector<double>(std::size_t, std::mt19937_64&)>;

inline Generator uniform(double lo, double hi) {
    return [lo, hi](std::size_t n, std::mt19937_64& rng) {
        std::uniform_real_distribution<double> d(lo, hi);
        std::vector<double> v(n);
        for (double& x : v) x = d(rng);
        return v;
    };
}
inline Generator integers(std::int64_t lo, std::int64_t hi, bool nonzero = false) {
    return [=](std::size_t n, std::mt19937_64& rng) {
        std::uniform_int_distribution<std::int64_t> d(lo, hi);
        std::vector<double> v(n);
        for (double& x : v) {
            std::int64_t k = d(rng);
            while (nonzero && k == 0) k = d(rng);
            x = static_cast<double>(k);
        }
        return v;
    };
}
inline Generator default_generator(DType t) {
    switch (t) {
        case DType::I32: case DType::I64: return integers(-60, 60);
        case DType::U8: return integers(0, 255);
        case DType::Bool: return integers(0, 1);
        default: return uniform(-2, 2);
    }
}

template <typename Runtime>
void bind_input(Runtime& rt, const GraphTensor& t, const std::vector<double>& values) {
    if (luminal::is_float(t.dtype())) {
        rt.set_data(t, values);
    } else {
        std::vector<std::int64_t> ints(values.begin(), values.end());
        rt.set_data(t, ints);
    }
}

// Compares output `t` of two runtimes element by element.
template <typename Got, typename Want>
void compare(const Got& got_rt, const Want& want_rt, const GraphTensor& t, Tol tol, const std::string& what) {
    INFO(what << " (node " << t.id() << ", " << luminal::name_of(t.dtype()) << ")");
    std::ostringstream report;
    std::size_t bad = 0;
    if (luminal::is_float(t.dtype())) {
        std::vector<double> got = got_rt.template get<double>(t), want = want_rt.template get<double>(t);
        REQUIRE(got.size() == want.size());
        for (std::size_t i = 0; i < got.size(); ++i) {
            double g = got[i], w = want[i];
            bool ok = std::isnan(w)   ? std::isnan(g)
                      : std::isinf(w) ? g == w
                                      : std::abs(g - w) <= tol.abs + tol.rel * std::abs(w);
            if (!ok && bad++ < 6) report << "  [" << i << "] got " << g << " want " << w << "\n";
        }
    } else {
        std::vector<std::int64_t> got = got_rt.template get<std::int64_t>(t), want = want_rt.template get<std::int64_t>(t);
        REQUIRE(got.size() == want.size());
        for (std::size_t i = 0; i < got.size(); ++i)
            if (got[i] != want[i] && bad++ < 6) report << "  [" << i << "] got " << got[i] << " want " << want[i] << "\n";
    }
    CHECK_MESSAGE(bad == 0, bad << " mismatching elements:\n" << report.str());
}

// Runs program_of(graph) on CpuRuntime and ReferenceRuntime with the same
// random inputs and compares every registered output.
class Differential {
public:
    luminal::Graph g;

    GraphTensor in(const luminal::Shape& shape, DType dtype = DType::F32, Generator gen = nullptr) {
        GraphTensor t = g.tensor(shape, dtype);
        inputs_.push_back({t, gen ? gen : default_generator(dtype)});
        return t;
    }
    void out(const GraphTensor& t, std::string what, Tol tol) { outputs_.push_back({t.output(), std::move(what), tol}); }
    void out(const GraphTensor& t, std::string what) {
        GraphTensor o = t.output();
        outputs_.push_back({o, std::move(what), default_tol(o.dtype())});
    }

    // Loads once; each call binds fresh inputs and executes with `dims`.
    void run(const DynMap& dims = {}, std::uint64_t seed = 1) {
        if (!loaded_) {
            luminal::Program p = luminal::program_of(g);
            cpu.load(p);
            ref.load(p);
            loaded_ = true;
        }
        std::mt19937_64 rng(seed);
        for (auto& [t, gen] : inputs_) {
            std::vector<double> v = gen(static_cast<std::size_t>(numel(t.shape(), dims)), rng);
            bind_input(cpu, t, v);
            bind_input(ref, t, v);
        }
        cpu.execute(dims);
        ref.execute(dims);
        for (auto& o : outputs_) compare(cpu, ref, o.tensor, o.tol, o.what);
    }

    luminal::CpuRuntime cpu;
    luminal::ReferenceRuntime ref;

private:
    struct Out {
        GraphTensor tensor;
        std::string what;
        Tol tol;
    };
    std::vector<std::pair<GraphTensor, Generator>> inputs_;
    std::vector<Out> outputs_;
    bool loaded_ = false;
};

// Builds a Program by hand. Its Input and Output nodes stand for real nodes
// of `g`, so set_data / get with the graph's tensors find them.
class ProgramBuilder {
public:
    luminal::Graph g;
    luminal::Program program;

    // An Input program node for graph input `t`; returns its program index.
    std::uint32_t input(const GraphTensor& t) {
        luminal::ProgramNode n;
        n.spec.kind = luminal::symbol_of(luminal::OpKind::Input);
        n.spec.op = g.node(t.id()).op;
        n.spec.shape = g.node(t.id()).shape;
        n.spec.dtype = t.dtype();
        n.spec.hlir = t.id();
        return push(std::move(n));
    }
    // A backend op node with payload `op`.
    template <luminal::BackendOpType T>
    std::uint32_t node(T op, std::vector<luminal::ShapeTracker> views, std::vector<std::uint32_t> sources,
                       luminal::Shape shape, DType dtype) {
        luminal::ProgramNode n;
        n.spec = luminal::NodeSpec::backend(std::move(op), std::move(views), std::move(shape), dtype);
        n.sources = std::move(sources);
        return push(std::move(n));
    }
    // An Output node reading program node `source` contiguously; the returned
    // tensor is the graph Output node it stands for (use it with get()).
    GraphTensor output(std::uint32_t source) {
        const luminal::NodeSpec& s = program.nodes[source].spec;
        GraphTensor placeholder = g.tensor(s.shape, s.dtype);
        GraphTensor out = placeholder.output();
        luminal::ProgramNode n;
        n.spec.kind = luminal::symbol_of(luminal::OpKind::Output);
        n.spec.op = luminal::Op(luminal::OpKind::Output);
        n.spec.views = {luminal::ShapeTracker(s.shape)};
        n.spec.shape = s.shape;
        n.spec.dtype = s.dtype;
        n.spec.hlir = out.id();
        n.sources = {source};
        push(std::move(n));
        return out;
    }

private:
    std::uint32_t push(luminal::ProgramNode n) {
        program.nodes.push_back(std::move(n));
        return static_cast<std::uint32_t>(program.nodes.size() - 1);
    }
};

}  // namespace cpu_test
