// The decode plan's kernels (cuda.Gemv, Attention, SampleToken, launch
// groups) found by the rules in graphs as the models write them, their
// printed source run on the host against the reference runtime, every thread
// layout and split, and the plan of a decode step of Llama-3.1-8B.
#include <doctest/doctest.h>
#include "llama8b_decode_plan.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <filesystem>
#include <luminal/cuda.hpp>
#include <luminal/cuda/plan_report.hpp>
#include <luminal/luminal.hpp>
#include <luminal/nn/attention.hpp>
#include <luminal/nn/kv_cache.hpp>
#include <luminal/nn/mlp.hpp>
#include <luminal/nn/norm.hpp>
#include <map>
#include <random>
#include <vector>

#include "nvrtc_coverage.hpp"
#include "printed_source_runner.hpp"

using namespace luminal;

namespace {

std::vector<float> noise(std::size_t n, std::uint64_t seed, double scale = 1.0) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(-scale, scale);
    std::vector<float> v(n);
    for (float& x : v) x = static_cast<float>(u(rng));
    return v;
}

CompileOptions decode_step() {
    CompileOptions o;
    o.verbosity = 0;
    o.workloads = {{DynMap{{'s', 1}}, 1}};
    return o;
}

// How many nodes of the emulator's main program run `op`.
template <typename Emulator>
std::size_t count_op(const Emulator& rt, std::string_view op) {
    return static_cast<std::size_t>(std::count_if(rt.nodes().begin(), rt.nodes().end(), [&](const ProgramNode& n) {
        return n.spec.op.payload && n.spec.op.payload->name() == op;
    }));
}

// How many nodes of the emulator's main program are kernels (all but inputs, outputs and constants).
template <typename Emulator>
std::size_t launches_of(const Emulator& rt) {
    return static_cast<std::size_t>(std::count_if(rt.nodes().begin(), rt.nodes().end(), [](const ProgramNode& n) {
        const OpSymbol kind = n.spec.kind;
        return !(kind == symbol_of(OpKind::Input) || kind == symbol_of(OpKind::Output) || kind == symbol_of(OpKind::Constant));
    }));
}

// `g` compiled for the printed-source emulator (the kernels the decode plan
// picks, one of `ops` among them) and run on `inputs` matches the reference runtime on the same data.
void check_printed_against_reference(Graph& g, const std::vector<std::pair<GraphTensor, HostBuffer>>& inputs,
                                     const std::vector<GraphTensor>& outputs, std::initializer_list<std::string_view> ops,
                                     double tolerance) {
    auto [printed, report] = compile_with_report(g, luminal_test::PrintedSourceEmulator{}, decode_step());
    CHECK_MESSAGE(std::any_of(ops.begin(), ops.end(), [&](std::string_view op) { return count_op(printed, op) > 0; }),
                  report.program.to_string());
    luminal_test::expect_reference_outputs(g, printed, inputs, outputs, tolerance);
}

HostBuffer buffer(DType dtype, const std::vector<float>& values) { return host_buffer_from_values(dtype, std::span<const float>(values)); }

// The bf16 value nearest v.
double nearest_bf16(double v) { return static_cast<double>(bf16_bits_to_f32(f32_to_bf16_bits(static_cast<float>(v)))); }

// Values a bf16 tensor can hold, so that a hand computation starts from what the kernel reads.
std::vector<float> bf16_noise(std::size_t n, std::uint64_t seed, double scale = 1.0) {
    std::vector<float> v = noise(n, seed, scale);
    for (float& e : v) e = static_cast<float>(nearest_bf16(e));
    return v;
}

// `out` of `g` run on `rt` with `inputs` (each stored in its tensor's dtype).
template <typename Emulator>
std::vector<float> run_on(Emulator& rt, const Graph& g, const std::vector<std::pair<GraphTensor, std::vector<float>>>& inputs,
                          const GraphTensor& out) {
    for (const auto& [t, values] : inputs) rt.set_bytes(t, host_buffer_to_bytes(buffer(t.dtype(), values)));
    rt.execute(g.dyn_map());
    return rt.get_f32(out);
}

}  // namespace

namespace {

// Runs the plan's kernels as the printed-source emulator does, and each Gemv
// also in every other layout: its printed source must give the same result.
class EveryGemvLayout : public luminal_test::PrintedSourceExecutor {
public:
    using PrintedSourceExecutor::run;
    void run(const cuda::CustomKernel& k, const cuda::KernelBuffers& b) {
        PrintedSourceExecutor::run(k, b);
        const auto* gemv = dynamic_cast<const cuda::GemvKernel*>(&k);
        if (!gemv) return;
        for (const cuda::GemvLayout& layout : egraph::kGemvLayouts) {
            if (layout == gemv->layout) continue;
            cuda::GemvKernel other = *gemv;
            other.layout = layout;
            HostBuffer out(b.out.dtype, b.out.size());
            luminal_test::PrintedSourceExecutor alone;
            alone.prepare({other.source()});
            alone.run(other, cuda::KernelBuffers{b.inputs, out, b.dims});
            for (std::size_t i = 0; i < out.size(); ++i) REQUIRE(out.as_double(i) == doctest::Approx(b.out.as_double(i)).epsilon(1e-5).scale(1.0));
            ++layouts_checked;
        }
    }
    inline static std::size_t layouts_checked = 0;
};

}  // namespace

TEST_CASE("the decode GEMV: an RMSNorm prologue, two weights with SiLU(gate) * up, a residual epilogue, every layout") {
    constexpr std::int64_t kIntermediate = 40;  // rows a warp pair does not divide evenly, a row length of 16-byte vectors
    EveryGemvLayout::layouts_checked = 0;
    struct Case {
        DType weights;
        std::int64_t hidden, tokens;  // one 16-byte step per lane, or several with a tail; one token or a few
    };
    // Each weight dtype, both row lengths and both token counts; bf16, what the models use, in both pairings.
    const Case cases[] = {{DType::BF16, 1048, 1}, {DType::BF16, 64, 3}, {DType::F16, 1048, 3}, {DType::F32, 64, 1}};
    for (const auto [weights, hidden, tokens] : cases) {
        CAPTURE(name_of(weights));
        CAPTURE(hidden);
        CAPTURE(tokens);
        Graph g;
        nn::ParameterSet params;
        auto x = g.named_tensor("x", {tokens, hidden});
        auto norm = nn::RmsNorm::create(params, g, "norm", hidden, 1e-5);
        auto mlp = nn::GatedMlp::create(params, g, "mlp", hidden, kIntermediate, nn::Activation::Silu, false, weights);
        auto y = (x + mlp(norm(x))).output();
        auto [printed, report] = compile_with_report(g, cuda::BasicHostEmulator<EveryGemvLayout>{}, decode_step());
        REQUIRE_MESSAGE(count_op(printed, "cuda.Gemv") == 2, report.program.to_string());  // gate and up as one, down
        auto reference = g.compile(ReferenceRuntime{});
        std::vector<std::pair<GraphTensor, HostBuffer>> data{{x, buffer(DType::F32, noise(tokens * hidden, 1, 2))}};
        for (const nn::Parameter& p : params.parameters()) {
            std::int64_t n = 1;
            for (auto d : p.shape) n *= d;
            data.emplace_back(p.tensor, buffer(p.tensor.dtype(), noise(static_cast<std::size_t>(n), data.size() + 3, 0.5)));
        }
        for (auto& [t, values] : data) {
            printed.set_bytes(t, host_buffer_to_bytes(values));
            reference.set_bytes(t, host_buffer_to_bytes(values));
        }
        printed.execute(g.dyn_map());
        reference.execute(g.dyn_map());
        const auto got = printed.get_f32(y), want = reference.get_f32(y);
        REQUIRE(got.size() == want.size());
        for (std::size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == doctest::Approx(want[i]).epsilon(1e-4).scale(1.0));
    }
    CHECK(EveryGemvLayout::layouts_checked == std::size(cases) * 2 * (std::size(egraph::kGemvLayouts) - 1));
}

// transformers' LlamaRMSNorm in a bf16 model, as torch.compile hands it over for one token: the [1, 1, H]
// residual widened to f32, normalized, rounded to bf16 before the bf16 weight, the product rounded again,
// then reshaped to [1, H] and widened for the projection. The Gemv computes all of it in its prologue (the
// row kernel through the casts and the reshape), and matches the same arithmetic done here in double with
// bf16 rounding at the same points.
TEST_CASE("an RMSNorm written as transformers writes it for one token, bf16 roundings and a reshape between, is one Gemv") {
    constexpr std::int64_t kHidden = 1048, kOutputs = 40;
    constexpr double kEpsilon = 1e-5;
    Graph g;
    auto x = g.named_tensor("x", {1, 1, kHidden}, DType::BF16);
    auto weight = g.named_tensor("weight", {kHidden}, DType::BF16);
    auto projection = g.named_tensor("projection", {kOutputs, kHidden}, DType::BF16);
    auto h = x.cast(DType::F32);
    auto normed = h * ((h * h).mean(-1, true) + kEpsilon).sqrt().recip();
    auto scaled = weight.expand({1, 1, kHidden}) * normed.cast(DType::BF16);
    auto y = scaled.reshape({1, kHidden}).cast(DType::F32).matmul(projection.cast(DType::F32).t()).output();

    auto [printed, report] = compile_with_report(g, luminal_test::PrintedSourceEmulator{}, decode_step());
    CHECK_MESSAGE(count_op(printed, "cuda.Gemv") == 1, report.program.to_string());
    CHECK_MESSAGE(launches_of(printed) == 1, report.program.to_string());

    const auto xs = bf16_noise(kHidden, 41, 2.0), ws = bf16_noise(kHidden, 42), ps = bf16_noise(kOutputs * kHidden, 43, 0.5);
    double squares = 0;
    for (float v : xs) squares += static_cast<double>(v) * v;
    const double inverse_rms = 1.0 / std::sqrt(squares / kHidden + kEpsilon);
    std::vector<double> activation(kHidden);
    for (std::int64_t k = 0; k < kHidden; ++k) activation[k] = nearest_bf16(ws[k] * nearest_bf16(xs[k] * inverse_rms));
    const auto got = run_on(printed, g, {{x, xs}, {weight, ws}, {projection, ps}}, y);
    REQUIRE(got.size() == static_cast<std::size_t>(kOutputs));
    for (std::int64_t n = 0; n < kOutputs; ++n) {
        double want = 0, magnitude = 0;
        for (std::int64_t k = 0; k < kHidden; ++k) {
            want += activation[k] * ps[n * kHidden + k];
            magnitude += std::abs(activation[k] * ps[n * kHidden + k]);
        }
        // A bf16 rounding of the activation may land on the other side where f32 and double sums differ.
        CHECK(std::abs(got[n] - want) <= 1e-3 * magnitude);
    }
}

// transformers' LlamaMLP in a bf16 model for one token, as torch.compile hands it over: each projection's
// [1, H] product rounded to bf16 and reshaped to [1, 1, I], SiLU(gate) and its product with up rounded in
// bf16. Gate and up are one Gemv with the SiLU product in its epilogue, read through the reshape; checked
// against the same arithmetic in double with bf16 rounding at the same points.
TEST_CASE("SiLU(gate) * up written as transformers writes it for one token, reshaped between, is the epilogue of one Gemv") {
    constexpr std::int64_t kHidden = 64, kIntermediate = 40;
    Graph g;
    auto x = g.named_tensor("x", {1, 1, kHidden}, DType::BF16);
    auto gate_weight = g.named_tensor("gate", {kIntermediate, kHidden}, DType::BF16);
    auto up_weight = g.named_tensor("up", {kIntermediate, kHidden}, DType::BF16);
    auto linear = [&](const GraphTensor& w) {
        auto product = x.reshape({1, kHidden}).cast(DType::F32).matmul(w.cast(DType::F32).t()).cast(DType::BF16);
        return product.reshape({1, 1, kIntermediate});
    };
    auto gate = linear(gate_weight), up = linear(up_weight);
    auto silu = GraphTensor(gate.cast(DType::F32).silu()).cast(DType::BF16);
    auto y = (silu * up).output();

    auto [printed, report] = compile_with_report(g, luminal_test::PrintedSourceEmulator{}, decode_step());
    CHECK_MESSAGE(count_op(printed, "cuda.Gemv") == 1, report.program.to_string());

    const auto xs = bf16_noise(kHidden, 51), gs = bf16_noise(kIntermediate * kHidden, 52, 0.5), us = bf16_noise(kIntermediate * kHidden, 53, 0.5);
    const auto got = run_on(printed, g, {{x, xs}, {gate_weight, gs}, {up_weight, us}}, y);
    REQUIRE(got.size() == static_cast<std::size_t>(kIntermediate));
    for (std::int64_t n = 0; n < kIntermediate; ++n) {
        double gate_sum = 0, up_sum = 0;
        for (std::int64_t k = 0; k < kHidden; ++k) {
            gate_sum += static_cast<double>(xs[k]) * gs[n * kHidden + k];
            up_sum += static_cast<double>(xs[k]) * us[n * kHidden + k];
        }
        const double g_bf16 = nearest_bf16(gate_sum), u_bf16 = nearest_bf16(up_sum);
        const double want = nearest_bf16(nearest_bf16(g_bf16 / (1.0 + std::exp(-g_bf16))) * u_bf16);
        // One bf16 step either way: an f32 sum may round to the other neighbour of the double one.
        CHECK(std::abs(got[n] - want) <= std::abs(want) * (1.0 / 128) + 1e-6);
    }
}

// transformers' decoder layer for one token in a bf16 model: each product rounded to bf16, each residual sum
// rounded to bf16, and the first sum read twice (by the next RMSNorm and by the next residual sum). The first
// sum is the epilogue of the first Gemv, and the second Gemv reads it (RMSNorm in its prologue, the second sum
// in its epilogue): two launches. Checked against the same arithmetic in double with bf16 rounding at the same points.
TEST_CASE("residual sums rounded to bf16 as transformers writes them, one read twice, are the epilogues of the Gemvs") {
    constexpr std::int64_t kHidden = 64;
    constexpr double kEpsilon = 1e-5;
    Graph g;
    auto residual = g.named_tensor("residual", {1, 1, kHidden}, DType::BF16);
    auto attended = g.named_tensor("attended", {1, kHidden}, DType::BF16);
    auto o_weight = g.named_tensor("o_proj", {kHidden, kHidden}, DType::BF16);
    auto norm_weight = g.named_tensor("norm", {kHidden}, DType::BF16);
    auto down_weight = g.named_tensor("down", {kHidden, kHidden}, DType::BF16);
    auto linear = [&](const GraphTensor& x, const GraphTensor& w) {
        return x.cast(DType::F32).matmul(w.cast(DType::F32).t()).cast(DType::BF16).reshape({1, 1, kHidden});
    };
    auto round_sum = [](const GraphTensor& a, const GraphTensor& b) { return (a.cast(DType::F32) + b.cast(DType::F32)).cast(DType::BF16); };
    auto first = round_sum(residual, linear(attended, o_weight));
    auto h = first.cast(DType::F32);
    auto normed = norm_weight.expand({1, 1, kHidden}) * (h * ((h * h).mean(-1, true) + kEpsilon).sqrt().recip()).cast(DType::BF16);
    auto second = round_sum(first, linear(normed.reshape({1, kHidden}), down_weight)).output();

    auto [printed, report] = compile_with_report(g, luminal_test::PrintedSourceEmulator{}, decode_step());
    CHECK_MESSAGE(count_op(printed, "cuda.Gemv") == 2, report.program.to_string());
    CHECK_MESSAGE(launches_of(printed) == 2, report.program.to_string());

    const auto rs = bf16_noise(kHidden, 61, 2.0), as = bf16_noise(kHidden, 62), os = bf16_noise(kHidden * kHidden, 63, 0.5),
               ns = bf16_noise(kHidden, 64), ds = bf16_noise(kHidden * kHidden, 65, 0.5);
    auto product = [&](const std::vector<double>& x, const std::vector<float>& w, std::int64_t n) {
        double sum = 0;
        for (std::int64_t k = 0; k < kHidden; ++k) sum += x[k] * w[n * kHidden + k];
        return nearest_bf16(sum);
    };
    std::vector<double> attended_values(as.begin(), as.end()), first_values(kHidden), activation(kHidden);
    double squares = 0;
    for (std::int64_t n = 0; n < kHidden; ++n) {
        first_values[n] = nearest_bf16(rs[n] + product(attended_values, os, n));
        squares += first_values[n] * first_values[n];
    }
    const double inverse_rms = 1.0 / std::sqrt(squares / kHidden + kEpsilon);
    for (std::int64_t k = 0; k < kHidden; ++k) activation[k] = nearest_bf16(ns[k] * nearest_bf16(first_values[k] * inverse_rms));
    const auto got = run_on(printed, g, {{residual, rs}, {attended, as}, {o_weight, os}, {norm_weight, ns}, {down_weight, ds}}, second);
    REQUIRE(got.size() == static_cast<std::size_t>(kHidden));
    for (std::int64_t n = 0; n < kHidden; ++n) {
        const double want = nearest_bf16(first_values[n] + product(activation, ds, n));
        // Two bf16 steps either way: an f32 sum may round to the other neighbour of the double one, twice.
        CHECK(std::abs(got[n] - want) <= std::abs(want) * (2.0 / 128) + 1e-6);
    }
}

// sdpa's output for one token as torch.compile hands it over: the attention's [kv heads, group, 1, D] rows
// times the factor that zeroes fully masked rows (one value, broadcast), reshaped to [1, H, 1, D], rounded to
// bf16 and widened for o_proj. The Gemv computes the product and both casts in its prologue, through the
// reshape: no pass of its own. Checked against the same arithmetic in double with the bf16 rounding.
TEST_CASE("sdpa's masked-row factor and bf16 rounding, read through a reshape, are the prologue of o_proj's Gemv") {
    constexpr std::int64_t kKvHeads = 2, kGroup = 4, kDim = 16, kHidden = kKvHeads * kGroup * kDim, kOutputs = 24;
    Graph g;
    auto attention = g.named_tensor("attention", {kKvHeads, kGroup, 1, kDim});
    auto factor = g.named_tensor("factor", {1, 1, 1, 1});
    auto projection = g.named_tensor("projection", {kOutputs, kHidden}, DType::BF16);
    auto scaled = attention * factor.expand({kKvHeads, kGroup, 1, kDim});
    auto rounded = scaled.reshape({1, kKvHeads * kGroup, 1, kDim}).cast(DType::BF16);
    auto y = rounded.reshape({1, kHidden}).cast(DType::F32).matmul(projection.cast(DType::F32).t()).output();

    auto [printed, report] = compile_with_report(g, luminal_test::PrintedSourceEmulator{}, decode_step());
    CHECK_MESSAGE(count_op(printed, "cuda.Gemv") == 1, report.program.to_string());
    CHECK_MESSAGE(launches_of(printed) == 1, report.program.to_string());

    const auto as = noise(kHidden, 71, 3.0), ps = bf16_noise(kOutputs * kHidden, 72, 0.5);
    for (const float held : {1.0f, 0.0f, 0.75f}) {
        CAPTURE(held);
        const auto got = run_on(printed, g, {{attention, as}, {factor, {held}}, {projection, ps}}, y);
        REQUIRE(got.size() == static_cast<std::size_t>(kOutputs));
        for (std::int64_t n = 0; n < kOutputs; ++n) {
            double want = 0, magnitude = 0;
            for (std::int64_t k = 0; k < kHidden; ++k) {
                const double a = nearest_bf16(static_cast<double>(as[k]) * held) * ps[n * kHidden + k];
                want += a;
                magnitude += std::abs(a);
            }
            CHECK(std::abs(got[n] - want) <= 1e-5 * magnitude + 1e-6);
        }
    }
}

// transformers' StaticCache for one token, as torch.compile hands it over: the new k rows written into a
// [1, heads, rows, dim] bf16 cache with index_put at `arange(1) + length`, the length a tensor read at run time
// and wrapped as Python wraps a negative index; the translation's flat positions are an iota over the other
// axes plus that index times the row. The positions are proven distinct (an iota plus a value shared by every
// element), so it is one WriteAt computing them and the bf16 rounding itself: no claim table, no other launch.
TEST_CASE("a cache row written at a length held in a tensor, as transformers' StaticCache writes it, is one WriteAt") {
    constexpr std::int64_t kHeads = 2, kRows = 16, kDim = 8;
    Graph g;
    auto cache = g.named_tensor("cache", {1, kHeads, kRows, kDim}, DType::BF16);
    auto length = g.named_tensor("length", {}, DType::I64);
    auto k = g.named_tensor("k", {1, kHeads, 1, kDim});
    GraphTensor at = g.arange(1, DType::I64) + length.expand({1});
    at = at + (at < 0).cast(DType::I64) * kRows;
    const Expression z = Expression::index();
    const Expression others = z / (kHeads * kDim) * (kHeads * kRows * kDim) + z / kDim % kHeads * (kRows * kDim) + z % kDim;
    auto offsets = g.iota(others, {1, kHeads, 1, kDim}, DType::I64) + at.reshape({1, 1, 1, 1}).expand({1, kHeads, 1, kDim}) * kDim;
    auto written = ops::scatter(cache, offsets, k.cast(DType::BF16)).output();

    auto [printed, report] = compile_with_report(g, luminal_test::PrintedSourceEmulator{}, decode_step());
    CHECK_MESSAGE(count_op(printed, "cuda.WriteAt") == 1, report.program.to_string());
    CHECK_MESSAGE(launches_of(printed) == 1, report.program.to_string());

    const auto old_rows = bf16_noise(kHeads * kRows * kDim, 61), new_rows = noise(kHeads * kDim, 62);
    for (const std::int64_t held : {std::int64_t{5}, std::int64_t{-3}}) {
        CAPTURE(held);
        const std::int64_t row = held < 0 ? held + kRows : held;
        const auto got = run_on(printed, g, {{cache, old_rows}, {length, {static_cast<float>(held)}}, {k, new_rows}}, written);
        REQUIRE(got.size() == old_rows.size());
        for (std::int64_t h = 0; h < kHeads; ++h)
            for (std::int64_t r = 0; r < kRows; ++r)
                for (std::int64_t d = 0; d < kDim; ++d) {
                    const std::size_t e = static_cast<std::size_t>((h * kRows + r) * kDim + d);
                    const double want = r == row ? nearest_bf16(new_rows[static_cast<std::size_t>(h * kDim + d)]) : old_rows[e];
                    CHECK(got[e] == want);
                }
    }
}

TEST_CASE("a cache length held in a tensor and advanced each step is written in place, after the cache write that reads it") {
    // StaticCache's cumulative_length: the Output carrying length + 1 back would otherwise be a copy each step.
    constexpr std::int64_t kRows = 8, kDim = 4;
    Graph g;
    auto cache = g.named_tensor("cache", {kRows, kDim}, DType::BF16);
    auto length = g.named_tensor("length", {}, DType::I64);
    auto k = g.named_tensor("k", {1, kDim});
    auto offsets = g.iota(Expression::index(), {1, kDim}, DType::I64) + length.reshape({1, 1}).expand({1, kDim}) * kDim;
    auto written = ops::scatter(cache, offsets, k.cast(DType::BF16)).output();
    auto advanced = (length + g.constant(1, DType::I64)).output();
    g.carry(written, cache);
    g.carry(advanced, length);

    auto [printed, report] = compile_with_report(g, luminal_test::PrintedSourceEmulator{}, decode_step());
    CHECK_MESSAGE(printed.updates_in_place(advanced), report.program.to_string());
    CHECK_MESSAGE(printed.updates_in_place(written), report.program.to_string());
    const auto& plan = printed.plan();
    CHECK(std::none_of(plan.carried.begin(), plan.carried.end(), [&](auto c) { return !plan.nodes[c.first].aliases_source; }));

    printed.set_bytes(cache, host_buffer_to_bytes(buffer(DType::BF16, std::vector<float>(kRows * kDim, 0.0f))));
    printed.set_data(length, std::vector<std::int64_t>{2});
    const auto first = bf16_noise(kDim, 71), second = bf16_noise(kDim, 72);
    for (const auto& row : {first, second}) {
        printed.set_bytes(k, host_buffer_to_bytes(buffer(DType::F32, row)));
        printed.execute(g.dyn_map());
    }
    CHECK(printed.get<std::int64_t>(advanced) == std::vector<std::int64_t>{4});
    const auto rows = printed.get_f32(written);
    for (std::int64_t r = 0; r < kRows; ++r)
        for (std::int64_t d = 0; d < kDim; ++d) {
            const std::size_t e = static_cast<std::size_t>(d);
            const float want = r == 2 ? first[e] : r == 3 ? second[e] : 0.0f;
            CHECK(rows[static_cast<std::size_t>(r * kDim + d)] == want);
        }
}

// Over a bf16 cache the prompt kernel is the decode kernel's alternative: a wide GQA group of few keys may take it.
TEST_CASE("flash-decoding attention: GQA groups, head sizes, cache dtypes, split and unsplit keys, one and several queries, "
          "more KV heads than one counter line holds") {
    struct Case {
        std::int64_t heads, kv_heads, head_dim, cached, tokens;
        DType cache;
    };
    for (const Case c : {Case{4, 1, 64, 100, 1, DType::F32}, Case{8, 2, 128, 37, 1, DType::BF16}, Case{4, 4, 256, 5, 1, DType::F16},
                         Case{4, 1, 128, 0, 1, DType::BF16}, Case{6, 2, 64, 70, 3, DType::BF16}, Case{2, 2, 64, 33, 2, DType::F32},
                         Case{8, 1, 64, 50, 1, DType::BF16}, Case{3, 1, 64, 20, 1, DType::F32},
                         Case{72, 72, 64, 90, 1, DType::BF16}}) {
        CAPTURE(c.heads);
        CAPTURE(c.kv_heads);
        CAPTURE(c.head_dim);
        CAPTURE(c.cached);
        CAPTURE(c.tokens);
        CAPTURE(name_of(c.cache));
        Graph g;
        const std::int64_t capacity = 128;
        auto q = g.named_tensor("q", {Expression('s'), c.heads, c.head_dim});
        auto k = g.named_tensor("k", {Expression('s'), c.kv_heads, c.head_dim});
        auto v = g.named_tensor("v", {Expression('s'), c.kv_heads, c.head_dim});
        nn::CacheWindow window = nn::append_to_cache(g, "cache", capacity, k, v, Expression('p'), c.cache);
        nn::AttentionOptions options;
        options.scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
        auto out = nn::attention(q, window.keys, window.values, Expression('p'), options).output();
        g.set_dim('s', c.tokens);
        g.set_dim('p', c.cached);
        const std::size_t per_token = static_cast<std::size_t>(c.heads * c.head_dim), per_kv = static_cast<std::size_t>(c.kv_heads * c.head_dim);
        check_printed_against_reference(g,
                                        {{q, buffer(DType::F32, noise(c.tokens * per_token, 11))},
                                         {k, buffer(DType::F32, noise(c.tokens * per_kv, 12))},
                                         {v, buffer(DType::F32, noise(c.tokens * per_kv, 13))},
                                         {window.cache.keys, buffer(c.cache, noise(capacity * per_kv, 14))},
                                         {window.cache.values, buffer(c.cache, noise(capacity * per_kv, 15))}},
                                        {out, window.cache.updated_keys}, {"Attention", "cuda.FlashAttention"}, 1e-4);
    }
}

TEST_CASE("SampleToken on the device: the first maximum of the biased logits, and top-k draws with softmax frequencies") {
    constexpr std::int64_t vocab = 1000;
    Graph g;
    auto logits = g.named_tensor("logits", {1, vocab});
    auto bias = g.named_tensor("bias", {vocab});
    auto settings = g.named_tensor("settings", {3});
    auto token = custom_op(SampleTokenOp{Expression('p')}, {logits, bias, settings}).output();
    g.set_dim('p', 0);
    auto printed = g.compile(luminal_test::PrintedSourceEmulator{}, decode_step());
    REQUIRE(count_op(printed, "SampleToken") == 1);
    std::vector<float> values = noise(vocab, 21, 3), masked(vocab, 0.0f);
    values[17] = values[600] = 9;  // a tie: the first one wins
    values[3] = 20;                // the largest, but masked
    masked[3] = -INFINITY;
    printed.set_data(logits, values);
    printed.set_data(bias, masked);
    printed.set_data(settings, std::vector<float>{0, 0, 0});
    printed.execute(g.dyn_map());
    CHECK(printed.get<std::int32_t>(token).at(0) == 17);

    // Five logits a top-3 draw keeps (the ids 0, 3, 4), at temperature 0.8: each drawn with its softmax probability.
    std::vector<float> few(vocab, -50.0f);
    few[0] = 1.0f, few[1] = -1.0f, few[2] = -2.0f, few[3] = 0.5f, few[4] = 0.2f;
    const double temperature = 0.8;
    std::vector<double> p(5, 0);
    double total = 0;
    for (int id : {0, 3, 4}) total += p[id] = std::exp(few[id] / temperature);
    printed.set_data(logits, few);
    printed.set_data(bias, std::vector<float>(vocab, 0.0f));
    printed.set_data(settings, std::vector<float>{static_cast<float>(temperature), 3, 1234});
    constexpr int draws = 3000;
    std::vector<int> counts(vocab, 0);
    for (int step = 0; step < draws; ++step) {
        g.set_dim('p', step);
        printed.execute(g.dyn_map());
        ++counts[printed.get<std::int32_t>(token).at(0)];
    }
    for (int id = 0; id < vocab; ++id) {
        CAPTURE(id);
        const double expected = id < 5 ? p[id] / total : 0.0;
        // Within four standard deviations of the draw count; ids outside the top 3 never.
        CHECK(std::abs(static_cast<double>(counts[id]) / draws - expected) <= 4 * std::sqrt(expected * (1 - expected) / draws));
    }
}

TEST_CASE("a launch group runs each member on its own blocks, as the members run alone") {
    Graph g;
    auto x = g.named_tensor("x", {1, 96});
    auto a = g.named_tensor("a", {40, 96}, DType::BF16);
    auto b = g.named_tensor("b", {24, 96}, DType::BF16);
    auto c = g.named_tensor("c", {1, 50});
    auto ya = ops::matmul(x, ops::transpose(ops::cast(a, DType::F32), 0, 1)).output();
    auto yb = ops::matmul(x, ops::transpose(ops::cast(b, DType::F32), 0, 1)).output();
    auto yc = (c * 3.0 + 1.0).output();
    auto rt = g.compile(cuda::HostEmulator{}, decode_step());
    const cuda::Plan& plan = rt.plan();
    std::vector<std::uint32_t> members;
    for (std::uint32_t id = 0; id < plan.nodes.size(); ++id)
        if (plan.group[id] != cuda::kNoGroup && plan.group[id] == plan.group[members.empty() ? id : members[0]]) members.push_back(id);
    REQUIRE(members.size() >= 2);
    std::vector<std::pair<std::string, std::string_view>> sources;
    for (std::uint32_t m : members) sources.push_back(cuda::member_source(plan.nodes[m]));
    const std::string group = cuda::group_source(sources);
    if (luminal_test::nvrtc_expected()) CHECK_NOTHROW(cuda::Nvrtc::get().compile(group, 90));
    // Each member alone on two blocks, then all of them through the group, on the graph's inputs.
    const auto& nodes = rt.nodes();
    const std::map<NodeId, std::vector<std::byte>> inputs{{x.id(), host_buffer_to_bytes(buffer(DType::F32, noise(96, 31)))},
                                                          {a.id(), host_buffer_to_bytes(buffer(DType::BF16, noise(40 * 96, 32)))},
                                                          {b.id(), host_buffer_to_bytes(buffer(DType::BF16, noise(24 * 96, 33)))},
                                                          {c.id(), host_buffer_to_bytes(buffer(DType::F32, noise(50, 34)))}};
    std::vector<std::string> all{group};
    for (const auto& [source, entry] : sources) all.push_back(source);
    luminal_test::PrintedSourceModule module(all);
    std::array<std::int64_t, cuda::kDimSlots> dims{};
    std::array<std::int64_t, 4> fault{};
    constexpr unsigned kGrid = 2;
    const unsigned grid = kGrid;
    std::deque<std::vector<std::byte>> alone, together, constants;
    std::deque<int> node_ids;
    std::vector<void*> group_args;
    for (std::size_t i = 0; i < members.size(); ++i) {
        const ProgramNode& node = nodes[members[i]];
        const std::size_t bytes = static_cast<std::size_t>(product(node.spec.shape).eval({})) * size_of(node.spec.dtype);
        std::vector<void*> args{alone.emplace_back(bytes, std::byte{0}).data()};
        group_args.push_back(together.emplace_back(bytes, std::byte{0}).data());
        for (std::uint32_t s : node.sources) {
            const NodeSpec& source = nodes[s].spec;
            void* in = nullptr;
            if (source.kind == symbol_of(OpKind::Constant)) {
                HostBuffer value(source.dtype, 1);
                value.store_double(0, source.op.value);
                in = constants.emplace_back(host_buffer_to_bytes(value)).data();
            } else {
                in = const_cast<std::byte*>(inputs.at(source.hlir).data());
            }
            args.push_back(in);
            group_args.push_back(in);
        }
        int* id = &node_ids.emplace_back(static_cast<int>(members[i]));
        for (void* p : {static_cast<void*>(dims.data()), static_cast<void*>(fault.data()), static_cast<void*>(id)}) {
            args.push_back(p);
            group_args.push_back(p);
        }
        group_args.push_back(const_cast<unsigned*>(&grid));
        REQUIRE(module.entry(sources[i].first, sources[i].second)(kGrid, 64, args.data()));
    }
    REQUIRE(module.entry(group, cuda::kGroupEntry)(static_cast<unsigned>(kGrid * members.size()), 64, group_args.data()));
    for (std::size_t i = 0; i < members.size(); ++i) CHECK(alone[i] == together[i]);
    CHECK(fault[0] == 0);
}

TEST_CASE("the decode plan of Llama-3.1-8B (bf16 weights and cache, p = 1024): launches, bytes, host traffic, and its kernels compile") {
    const auto [decode, report] = luminal_test::llama8b_decode_plan(0, false);
    CAPTURE(report.to_string());
    luminal_test::NvrtcCoverage::get().compile(cuda::plan_program(decode));
    // 6 per layer (q, k, v with the RMSNorm; the cache writes and RoPE; attention; o_proj; gate and up; down),
    // the activations' rounding to bf16 computed in the GEMVs' prologues, not launched apart.
    CHECK(report.launches_per_layer() <= 6.5);
    CHECK(report.bytes_moved <= 1.05 * report.floor_bytes);
    // What one greedy step moves between host and device: the dims that changed (p), the new token's id up, the
    // fault code and the picked id down.
    CHECK(cuda::step_transfer_bytes(DynMap{{'s', 1}, {'p', 1023}}, DynMap{{'s', 1}, {'p', 1024}}, 4, 4) <= 64);
}

TEST_CASE("the prompt plan of Llama-3.1-8B (bf16, 512 tokens): every projection on cuBLASLt's tensor cores, no weight widened, "
          "k and v, gate and up batched, the residual adds in their epilogues, each layer's attention one flash kernel writing "
          "o_proj's rows") {
    const auto [prompt, report] = luminal_test::llama8b_decode_plan(2, false, 512, 0);
    CAPTURE(report.to_string());
    std::size_t products = 0;
    for (const ProgramNode& node : prompt.nodes)
        for (std::uint32_t source : node.sources) {
            const NodeSpec& input = prompt.nodes[source].spec;
            const bool projection = input.kind == symbol_of(OpKind::Input) && input.op.label.starts_with("model.layers.") &&
                                    input.shape.size() == 2;
            if (!projection) continue;
            CAPTURE(input.op.label);
            // Read as stored by the library GEMM, its activations bf16 too (its first source).
            CHECK(symbol_name(node.spec.kind) == "cuda.BlasMatmul");
            CHECK(prompt.nodes[node.sources[0]].spec.dtype == DType::BF16);
            ++products;
        }
    CHECK(products == 2 * 7);
    for (const luminal::cuda::PlanReportRow& row : report.rows)
        if (row.kernel == "cuBLASLt") CHECK(row.work.tensor_cores);
    // Each residual add in the epilogue of the product before it (o_proj's, down's): not a launch of its own.
    std::size_t residual_epilogues = 0;
    for (const ProgramNode& node : prompt.nodes) {
        const bool residual_add = node.spec.kind == symbol_of(OpKind::Add) && node.spec.shape.size() == 2 && node.spec.shape[1] == Expression(4096);
        CHECK_FALSE(residual_add);
        if (const auto* blas = node.spec.payload_as<cuda::BlasMatmulOp>(); blas && blas->adds_addend) ++residual_epilogues;
    }
    CHECK(residual_epilogues == 2 * 2);
    // Each layer's attention is one flash kernel over the bf16 cache as stored, its causal mask recognised for
    // pricing; no cache widened to f32, no score materialised.
    std::size_t flash = 0;
    for (const ProgramNode& node : prompt.nodes) {
        CHECK_FALSE(node.spec.payload_as<AttentionOp>());
        const bool widened_cache = node.spec.kind == symbol_of(OpKind::Cast) && node.spec.dtype == DType::F32 && node.spec.shape.size() == 3;
        CHECK_FALSE(widened_cache);
        if (const auto* op = node.spec.payload_as<cuda::FlashAttentionOp>()) {
            CHECK(op->mask.has_value());
            // Writing o_proj's bf16 rows itself, so no launch rounds them.
            CHECK(op->token_rows);
            CHECK(op->out == DType::BF16);
            ++flash;
        }
    }
    CHECK(flash == 2);
    // 10 per layer (RMSNorm; k and v as one batched call; q; the cache writes and RoPE; attention; o_proj; RMSNorm;
    // gate and up as one batched call; SiLU(gate) * up; down) and 9 once (RoPE's tables, the embedding, its
    // widening, the last row's norm in two, the head, the sampler, two outputs).
    std::size_t batched = 0;
    for (const luminal::cuda::PlanReportRow& row : report.rows)
        if (row.kernel == "cuBLASLt" && row.launch.members.size() == 1) ++batched;
    CHECK(batched == 2 * 2);
    CHECK(report.rows.size() <= 2 * 10 + 9);
}

// The residual add the library's epilogue computes (beta = 1): found where the product's operands suit cuBLASLt at every
// size, with the semantics of Matmul then Add (the host emulator runs the op's reference), checked against loops in
// double; where they need not (an activation read transposed, its leading dimension the prompt's length), the add
// stays a launch of its own.
TEST_CASE("a product plus a residual as one cuBLASLt call, the residual added in its epilogue, equals the sum by loops") {
    for (const bool transposed : {false, true}) {
        CAPTURE(transposed);
        Graph g;
        // Narrow bf16 products, or f32 ones whose activations are read transposed.
        auto x = transposed ? g.named_tensor("x", {512, 's'}) : g.named_tensor("x", {'s', 512});
        auto w = g.named_tensor("w", {384, 512}, transposed ? DType::F32 : DType::BF16);
        auto residual = g.named_tensor("residual", {'s', 384});
        auto rows = transposed ? ops::transpose(x, 0, 1) : x.cast(DType::BF16).cast(DType::F32);
        auto y = (residual + ops::matmul(rows, ops::transpose(transposed ? w : w.cast(DType::F32), 0, 1))).output();
        CompileOptions options;
        options.verbosity = 0;
        options.workloads = {{DynMap{{'s', 1024}}, 1}};
        auto [emulated, report] = compile_with_report(g, cuda::HostEmulator{}, options);
        const std::string program = report.program.to_string();
        CAPTURE(program);
        CHECK(program.find("cuda.BlasMatmul") != std::string::npos);
        CHECK((program.find("cuda.BlasMatmul plus addend") != std::string::npos) == !transposed);
        std::mt19937_64 rng(5);
        std::uniform_real_distribution<float> u(-1, 1);
        auto values = [&](std::size_t n) {
            std::vector<float> v(n);
            for (float& e : v) e = u(rng);
            return v;
        };
        constexpr std::int64_t kRows = 37, kDepth = 512, kOut = 384;
        g.set_dim('s', kRows);
        const HostBuffer xs = host_buffer_from_values(DType::F32, std::span<const float>(values(kRows * kDepth))),
                         ws = host_buffer_from_values(w.dtype(), std::span<const float>(values(kOut * kDepth))),
                         rs = host_buffer_from_values(DType::F32, std::span<const float>(values(kRows * kOut)));
        emulated.set_bytes(x, host_buffer_to_bytes(xs));
        emulated.set_bytes(w, host_buffer_to_bytes(ws));
        emulated.set_bytes(residual, host_buffer_to_bytes(rs));
        emulated.execute(g.dyn_map());
        const auto got = emulated.get_f32(y);
        REQUIRE(got.size() == static_cast<std::size_t>(kRows * kOut));
        // By loops in double: the residual plus each row (rounded to bf16 where narrow) by each weight row as stored.
        for (std::int64_t r = 0; r < kRows; ++r)
            for (std::int64_t n = 0; n < kOut; ++n) {
                double want = rs.as_double(static_cast<std::size_t>(r * kOut + n));
                for (std::int64_t k = 0; k < kDepth; ++k) {
                    const double a = xs.as_double(static_cast<std::size_t>(transposed ? k * kRows + r : r * kDepth + k));
                    const double rounded = transposed ? a : bf16_bits_to_f32(f32_to_bf16_bits(static_cast<float>(a)));
                    want += rounded * ws.as_double(static_cast<std::size_t>(n * kDepth + k));
                }
                CHECK(got[static_cast<std::size_t>(r * kOut + n)] == doctest::Approx(want).epsilon(1e-5).scale(1.0));
            }
    }
}
