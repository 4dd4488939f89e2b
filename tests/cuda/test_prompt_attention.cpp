// Flash attention for prompts (cuda.FlashAttention): found by the rules in
// the attention nn::attention records over a bf16 cache, its printed source
// run on the host against the reference runtime (GQA groups, head sizes,
// prompts not a multiple of the tile, a cache already holding keys, a sliding
// window, rows written for o_proj in bf16), the causal mask its pricing reads,
// and its SASS as NVRTC builds it.
#include <doctest/doctest.h>

#include <cmath>
#include <luminal/cuda.hpp>
#include <luminal/cuda/sass_facts.hpp>
#include <luminal/luminal.hpp>
#include <luminal/nn/attention.hpp>
#include <luminal/nn/kv_cache.hpp>
#include <optional>
#include <random>
#include <vector>

#include "nvrtc_coverage.hpp"
#include "printed_source_runner.hpp"

using namespace luminal;

namespace {

struct PromptCase {
    std::int64_t heads, kv_heads, head_dim, cached, tokens;
    std::optional<std::int64_t> window;
    bool bf16_queries = false;  // rounded by the model (narrow activations): the kernel reads them as one part
    bool rounded_rows = false;  // the result rounded to bf16 (o_proj's input): the kernel writes those rows
};

std::vector<float> uniform_values(std::size_t n, std::uint64_t seed, double scale) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(-scale, scale);
    std::vector<float> v(n);
    for (float& x : v) x = static_cast<float>(u(rng));
    return v;
}

// The attention of one layer over a bf16 cache of `capacity` positions, compiled for a long prompt (so the
// extraction takes the prompt kernel) and run at the case's dims, on the printed-source emulator and on the
// reference runtime.
void check_prompt_attention(const PromptCase& c) {
    Graph g;
    const std::int64_t capacity = 160;
    auto q = g.named_tensor("q", {Expression('s'), c.heads, c.head_dim});
    auto k = g.named_tensor("k", {Expression('s'), c.kv_heads, c.head_dim});
    auto v = g.named_tensor("v", {Expression('s'), c.kv_heads, c.head_dim});
    nn::CacheWindow window = nn::append_to_cache(g, "cache", capacity, k, v, Expression('p'), DType::BF16);
    nn::AttentionOptions options;
    options.scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
    options.sliding_window = c.window;
    if (c.bf16_queries) options.query_dtype = DType::BF16;
    GraphTensor attended = nn::attention(q, window.keys, window.values, Expression('p'), options);
    auto out = (c.rounded_rows ? attended.cast(DType::BF16) : attended).output();
    CompileOptions compile;
    compile.verbosity = 0;
    compile.workloads = {{DynMap{{'s', 1024}, {'p', 0}}, 1}};
    auto [printed, report] = compile_with_report(g, luminal_test::PrintedSourceEmulator{}, compile);
    const std::string program = report.program.to_string();
    CAPTURE(program);
    REQUIRE(program.find("cuda.FlashAttention") != std::string::npos);
    // Queries the model rounded are read as stored: the flash node's first source is bf16.
    for (const ProgramNode& node : printed.nodes())
        if (node.spec.payload_as<cuda::FlashAttentionOp>()) CHECK((printed.nodes()[node.sources[0]].spec.dtype == DType::BF16) == c.bf16_queries);
    CHECK(program.find(c.window ? fmt::format("causal from p window {}", *c.window) : "causal from p") != std::string::npos);
    CHECK((program.find("token rows bf16") != std::string::npos) == c.rounded_rows);
    luminal_test::NvrtcCoverage::get().compile(printed.plan());
    g.set_dim('s', c.tokens);
    g.set_dim('p', c.cached);
    const std::size_t per_token = static_cast<std::size_t>(c.heads * c.head_dim), per_kv = static_cast<std::size_t>(c.kv_heads * c.head_dim);
    const std::vector<std::pair<GraphTensor, HostBuffer>> inputs = {
        {q, host_buffer_from_values(DType::F32, std::span<const float>(uniform_values(c.tokens * per_token, 21, 2.0)))},
        {k, host_buffer_from_values(DType::F32, std::span<const float>(uniform_values(c.tokens * per_kv, 22, 2.0)))},
        {v, host_buffer_from_values(DType::F32, std::span<const float>(uniform_values(c.tokens * per_kv, 23, 1.0)))},
        {window.cache.keys, host_buffer_from_values(DType::BF16, std::span<const float>(uniform_values(capacity * per_kv, 24, 2.0)))},
        {window.cache.values, host_buffer_from_values(DType::BF16, std::span<const float>(uniform_values(capacity * per_kv, 25, 1.0)))}};
    // Exact scores and weights within 2^-18 (bf16 parts of each f32 value): f32 accumulation separates the two.
    // Rounded to bf16, a value that f32 sums in another order put on the other side of a midpoint is one bf16
    // step (at most 2^-7 of it) away.
    luminal_test::expect_reference_outputs(g, printed, inputs, {out}, c.rounded_rows ? 0x1p-7 : 2e-5);
}

}  // namespace

TEST_CASE("flash attention for prompts through its printed source: GQA groups 1 to 8, head sizes 64 to 256, prompts not a "
          "multiple of the tile, a cache holding earlier keys, a sliding window, o_proj's bf16 rows written by the kernel") {
    for (const PromptCase& c : {PromptCase{4, 1, 64, 0, 70, std::nullopt}, PromptCase{8, 1, 128, 5, 33, std::nullopt},
                                PromptCase{8, 2, 256, 0, 20, std::nullopt}, PromptCase{4, 2, 128, 40, 50, 16},
                                PromptCase{6, 2, 64, 64, 67, std::nullopt}, PromptCase{3, 3, 64, 0, 1, std::nullopt},
                                PromptCase{8, 2, 128, 3, 45, std::nullopt, true}, PromptCase{4, 1, 64, 0, 64, 8, true},
                                PromptCase{8, 2, 64, 7, 37, std::nullopt, true, true}, PromptCase{4, 4, 128, 0, 70, 32, false, true}}) {
        CAPTURE(c.heads);
        CAPTURE(c.kv_heads);
        CAPTURE(c.head_dim);
        CAPTURE(c.cached);
        CAPTURE(c.tokens);
        CAPTURE(c.window.value_or(0));
        CAPTURE(c.bf16_queries);
        CAPTURE(c.rounded_rows);
        check_prompt_attention(c);
    }
}

TEST_CASE("the causal mask read back from nn::attention_mask's index expression, and only from it") {
    const Expression s('s'), p('p'), t = s + p, z = Expression::index();
    const Expression query = p + z / t, key = z % t;
    const auto plain = cuda::causal_mask_of(gt(key, query), t);
    REQUIRE(plain.has_value());
    CHECK(plain->offset == p);
    CHECK_FALSE(plain->window.has_value());
    const auto windowed = cuda::causal_mask_of(logical_or(gt(key, query), gt(query - 512 + 1, key)), t);
    REQUIRE(windowed.has_value());
    CHECK(windowed->offset == p);
    CHECK(windowed->window == 512);
    CHECK_FALSE(cuda::causal_mask_of(gt(key, query + 1), s).has_value());  // keys of another length
    CHECK_FALSE(cuda::causal_mask_of(gt(query, key), t).has_value());       // the past hidden, not the future
    CHECK_FALSE(cuda::causal_mask_of(eq(key, query), t).has_value());
    // Tiles of 64 keys a block of query rows multiplies: rows 0..63 at offset 0 see keys 0..63, one tile;
    // rows 64..127 of a 1024-key cache at offset 900 see up to key 1023 (tiles 0..15), with a window of 100 from
    // key 865 (tiles 13..15).
    CHECK(cuda::causal_live_tiles(*plain, 0, 0, 63, 1024, 64) == 1);
    CHECK(cuda::causal_live_tiles(*plain, 900, 64, 127, 1024, 64) == 16);
    CHECK(cuda::causal_live_tiles(cuda::CausalMask{p, 100}, 900, 64, 127, 1024, 64) == 3);
}

#ifdef LUMINAL_HAS_CUDA_TOOLKIT
TEST_CASE("the flash kernel as NVRTC builds it: tensor-core products, no spills at head sizes 64 and 128") {
    REQUIRE_MESSAGE(cuda::sass_tools_available(), "cuobjdump and nvdisasm are needed (scripts/setup.sh installs them)");
    for (const std::int64_t d : {64, 128}) {
        CAPTURE(d);
        cuda::FlashAttentionKernel k;
        k.inputs = {DType::F32, DType::BF16, DType::BF16, DType::F32};
        const Expression s('s'), t = Expression('s') + Expression('p');
        k.q_view = ShapeTracker({8, 4, s, d});
        k.k_view = ShapeTracker({8, 4, t, d});
        k.v_view = ShapeTracker({8, 4, d, t});
        k.bias_view = ShapeTracker({8, 4, s, t});
        k.heads = 8;
        k.group = 4;
        k.tokens = s;
        k.keys = t;
        k.depth = d;
        const std::string source = k.source();
        const auto cubin = cuda::Nvrtc::get().compile(source, 90, std::string(k.entry()));
        const auto facts = cuda::sass_facts(*cubin, std::string(k.entry()));
        REQUIRE(facts.has_value());
        CHECK(facts->stack_bytes == 0);
        CHECK(facts->registers <= 255);
        // Per k16 step of the scores, the query's parts times eight n8 tiles; per k16 step of P V, the weight's
        // parts times D / 8 n8 tiles.
        CHECK(facts->tensor_products >= cuda::kFlashQueryParts * 8 * (d / 16) + cuda::kFlashWeightParts * (d / 8) * 4);
    }
}
#endif
