// Products of one activation by weights of one shape (k and v, gate and up)
// as one batched cuBLASLt call, and the arena that places a plan's results
// by the launches that touch them. No GPU here: the call is read as cuBLAS
// documents its column-major layouts, over host memory laid out as the
// runtime lays out its weights and arena, and compared with loops in double.
#include <doctest/doctest.h>
#include "llama8b_decode_plan.hpp"

#include <cmath>
#include <luminal/cuda.hpp>
#include <luminal/luminal.hpp>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <tuple>
#include <vector>

using namespace luminal;

namespace {

// Element (r, c) of batch `batch` of a column-major matrix as cuBLASLt's layout names it.
double element(const std::vector<double>& memory, std::int64_t base, const cuda::BlasLayout& l, std::int64_t batch, std::int64_t r,
               std::int64_t c) {
    const std::int64_t at = base + batch * l.stride + r + c * l.ld;
    if (r < 0 || r >= l.rows || c < 0 || c >= l.cols || batch >= l.batch || at < 0 || at >= static_cast<std::int64_t>(memory.size()))
        throw std::out_of_range(fmt::format("element ({}, {}) of batch {} at {}: outside the layout or the memory", r, c, batch, at));
    return memory[static_cast<std::size_t>(at)];
}

// D[b] = op(A[b]) . op(B[b]) for every batch, as cuBLAS defines the call (op: the transpose where asked).
void run_blas_call(const cuda::BlasCall& call, const std::vector<double>& a, std::int64_t a_base, const std::vector<double>& b,
                   std::int64_t b_base, std::vector<double>& d, std::int64_t d_base) {
    const std::int64_t depth = call.transpose_a ? call.a.rows : call.a.cols;
    for (std::int64_t batch = 0; batch < call.d.batch; ++batch)
        for (std::int64_t i = 0; i < call.d.rows; ++i)
            for (std::int64_t j = 0; j < call.d.cols; ++j) {
                double sum = 0;
                for (std::int64_t l = 0; l < depth; ++l)
                    sum += (call.transpose_a ? element(a, a_base, call.a, batch, l, i) : element(a, a_base, call.a, batch, i, l)) *
                           (call.transpose_b ? element(b, b_base, call.b, batch, j, l) : element(b, b_base, call.b, batch, l, j));
                const std::int64_t at = d_base + batch * call.d.stride + i + j * call.d.ld;
                if (at < 0 || at >= static_cast<std::int64_t>(d.size())) throw std::out_of_range(fmt::format("output element {}", at));
                d[static_cast<std::size_t>(at)] = sum;
            }
}

double round_bf16(double x) { return bf16_bits_to_f32(f32_to_bf16_bits(static_cast<float>(x))); }

}  // namespace

// k and v (two weights of one shape) batch; q (another shape) stays its own call. The weights sit side by side as
// the runtime places them (member order), the outputs where the arena layout puts them; the one call, read as the
// library reads it, must leave each product where its consumers look, equal to loops over the weights as stored.
TEST_CASE("products of one activation by weights of one shape run as one batched cuBLASLt call computing each product") {
    Graph g;
    constexpr std::int64_t kRows = 37, kDepth = 512, kKv = 256, kQ = 512;
    auto x = g.named_tensor("x", {'s', kDepth});
    auto wk = g.named_tensor("wk", {kKv, kDepth}, DType::BF16);
    auto wv = g.named_tensor("wv", {kKv, kDepth}, DType::BF16);
    auto wq = g.named_tensor("wq", {kQ, kDepth}, DType::BF16);
    auto rows = x.cast(DType::BF16).cast(DType::F32);
    auto product = [&](GraphTensor w) { return ops::matmul(rows, ops::transpose(w.cast(DType::F32), 0, 1)).output(); };
    auto k = product(wk), v = product(wv), q = product(wq);
    CompileOptions options;
    options.verbosity = 0;
    options.workloads = {{DynMap{{'s', 1024}}, 1}};
    auto [emulated, report] = compile_with_report(g, cuda::HostEmulator{}, options);
    const Program program = cuda::schedule_for_groups(report.program);
    const cuda::Plan plan = cuda::plan_program(program);
    CAPTURE(program.to_string());

    const DynMap dims{{'s', kRows}};
    const auto launches = cuda::plan_launches(plan, program.nodes, dims, 132, [](auto, auto) { return true; });
    const cuda::PlannedLaunch* batched = nullptr;
    std::size_t blas = 0;
    for (const cuda::PlannedLaunch& l : launches)
        if (l.kind == cuda::PlannedLaunch::Kind::Blas) {
            ++blas;
            if (!l.members.empty()) batched = &l;
        }
    CHECK(blas == 2);
    REQUIRE(batched != nullptr);
    REQUIRE(batched->members.size() == 1);
    const std::uint32_t leader = batched->node, member = batched->members[0].node;
    auto weights_of = [&](std::uint32_t n) { return program.nodes[program.nodes[n].sources[1]].spec.op.label; };
    CHECK(weights_of(leader) == "wk");
    CHECK(weights_of(member) == "wv");

    // Host memory as the runtime lays it out: the activation rounded to bf16, the batch's weights side by side in
    // member order, the results in the arena at the layout's offsets (f32 elements).
    std::mt19937_64 rng(11);
    std::uniform_real_distribution<double> u(-1, 1);
    std::vector<double> xs(kRows * kDepth), activation(xs.size()), weights(2 * kKv * kDepth), wqs(kQ * kDepth);
    for (std::size_t i = 0; i < xs.size(); ++i) activation[i] = round_bf16(xs[i] = u(rng));
    for (double& w : weights) w = round_bf16(u(rng));
    for (double& w : wqs) w = round_bf16(u(rng));
    std::vector<std::size_t> result_bytes(program.nodes.size(), 0), claim_bytes(program.nodes.size(), 0);
    for (std::uint32_t n = 0; n < program.nodes.size(); ++n)
        if (plan.nodes[n].role == cuda::PlannedNode::Role::HostOp)
            result_bytes[n] = static_cast<std::size_t>(numel_of(program.nodes[n].spec.shape, dims, n)) * sizeof(float);
    const cuda::ArenaLayout layout = cuda::plan_arena_layout(plan, result_bytes, claim_bytes);
    std::vector<double> arena(layout.bytes / sizeof(float), std::nan(""));

    const cuda::BlasOperand a = cuda::blas_operand(program.nodes[leader].spec.views[0], dims);
    const cuda::BlasOperand b = cuda::blas_operand(program.nodes[leader].spec.views[1], dims);
    const auto weights_stride = static_cast<std::int64_t>(cuda::static_input_bytes(program.nodes[program.nodes[leader].sources[1]].spec) / 2);
    const auto out_stride = static_cast<std::int64_t>((layout.offsets[member] - layout.offsets[leader]) / sizeof(float));
    CHECK(out_stride >= kRows * kKv);
    const cuda::BatchedBlasCall call = cuda::batched_blas_call(a, b, 2, weights_stride, out_stride);
    const cuda::BlasCall library = cuda::blas_call(call.a, call.b, call.batch, call.out_stride);
    run_blas_call(library, weights, call.b.base, activation, call.a.base, arena,
                  static_cast<std::int64_t>(layout.offsets[leader] / sizeof(float)));

    // Each product where its consumers read it, against loops over the weights as stored; and the emulator's.
    g.set_dim('s', kRows);
    emulated.set_data(x, std::vector<float>(xs.begin(), xs.end()));
    auto bf16_values = [](const std::vector<double>& values, std::size_t first, std::size_t count) {
        return std::vector<float>(values.begin() + static_cast<std::ptrdiff_t>(first), values.begin() + static_cast<std::ptrdiff_t>(first + count));
    };
    emulated.set_data(wk, bf16_values(weights, 0, kKv * kDepth));
    emulated.set_data(wv, bf16_values(weights, kKv * kDepth, kKv * kDepth));
    emulated.set_data(wq, bf16_values(wqs, 0, wqs.size()));
    emulated.execute(g.dyn_map());
    for (const auto& [node, first, got] : {std::tuple{leader, std::size_t{0}, emulated.get_f32(k)},
                                           std::tuple{member, std::size_t(kKv * kDepth), emulated.get_f32(v)}}) {
        const std::size_t base = layout.offsets[node] / sizeof(float);
        for (std::int64_t r = 0; r < kRows; ++r)
            for (std::int64_t c = 0; c < kKv; ++c) {
                double want = 0;
                for (std::int64_t d = 0; d < kDepth; ++d)
                    want += activation[static_cast<std::size_t>(r * kDepth + d)] * weights[first + static_cast<std::size_t>(c * kDepth + d)];
                const std::size_t at = static_cast<std::size_t>(r * kKv + c);
                CHECK(arena[base + at] == doctest::Approx(want).epsilon(1e-12));
                CHECK(got[at] == doctest::Approx(want).epsilon(1e-5).scale(1.0));
            }
    }
    std::vector<float> qs = emulated.get_f32(q);
    CHECK(qs.size() == static_cast<std::size_t>(kRows * kQ));
}

// Liveness in launches: every result a launch writes or reads (a group's members, a batch's products run at once)
// has memory of its own for that launch, and a batch's outputs are evenly spaced slots.
TEST_CASE("the arena of a prompt and a decode plan of Llama-3.1-8B: nothing one launch touches shares memory") {
    for (const auto& [tokens, cached] : {std::pair{std::int64_t{512}, std::int64_t{0}}, std::pair{std::int64_t{1}, std::int64_t{1024}}}) {
        CAPTURE(tokens);
        const auto [unscheduled, report] = luminal_test::llama8b_decode_plan(2, false, tokens, cached);
        const Program program = cuda::schedule_for_groups(unscheduled);
        const cuda::Plan plan = cuda::plan_program(program);
        const DynMap dims{{'s', tokens}, {'p', cached}};
        std::vector<std::size_t> result_bytes(program.nodes.size(), 0), claim_bytes(program.nodes.size(), 0);
        for (std::uint32_t n = 0; n < program.nodes.size(); ++n) {
            const cuda::PlannedNode& p = plan.nodes[n];
            const bool arena = !p.in_place_input && !p.aliases_source && program.nodes[n].spec.kind != symbol_of(OpKind::Output) &&
                               p.role != cuda::PlannedNode::Role::Input && p.role != cuda::PlannedNode::Role::Constant;
            if (arena) result_bytes[n] = static_cast<std::size_t>(numel_of(program.nodes[n].spec.shape, dims, n)) * size_of(program.nodes[n].spec.dtype);
        }
        const cuda::ArenaLayout layout = cuda::plan_arena_layout(plan, result_bytes, claim_bytes);
        std::map<std::uint32_t, std::set<std::uint32_t>> touched;  // by launch: results written or read there
        std::size_t batches = 0;
        for (std::uint32_t n = 0; n < program.nodes.size(); ++n) {
            if (result_bytes[n] == 0) continue;
            touched[plan.step[n]].insert(n);
            for (std::uint32_t reader = n + 1; reader < program.nodes.size(); ++reader)
                for (std::uint32_t s : program.nodes[reader].sources)
                    if (s == n) touched[plan.step[reader]].insert(n);
            if (plan.batch[n] == n) {
                ++batches;
                const auto members = cuda::batch_members(plan.batch, n);
                for (std::size_t i = 1; i < members.size(); ++i)
                    CHECK(layout.offsets[members[i]] - layout.offsets[members[i - 1]] == cuda::arena_slot(result_bytes[members[0]]));
            }
        }
        CHECK(batches == (tokens > 1 ? 2 * 2 : 0));  // k and v, gate and up, in each layer of a prompt
        for (const auto& [step, results] : touched)
            for (std::uint32_t i : results)
                for (std::uint32_t j : results) {
                    if (i >= j) continue;
                    const bool apart = layout.offsets[i] + result_bytes[i] <= layout.offsets[j] ||
                                       layout.offsets[j] + result_bytes[j] <= layout.offsets[i];
                    CHECK_MESSAGE(apart, "launch " << step << ": nodes " << i << " and " << j);
                }
    }
}
