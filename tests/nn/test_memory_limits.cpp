// Memory limits are Errors: nn::Session adds up what the weights, the KV
// caches and the runtime's buffers need before allocating them, against the
// memory available or a MemoryLimit. Expected sizes are derived by hand from
// the llama fixture's config.json (2 layers, 2 KV heads of 16, 4 heads).
#include <doctest/doctest.h>
#include "../test_data.hpp"

#include <cstdint>
#include <filesystem>
#include <luminal/luminal.hpp>
#include <string>
#include <vector>

namespace {

const std::filesystem::path kMemoryFixture = luminal_test::data_dir() / "models" / "llama";
// keys + values of 2 layers x 2 KV heads x 16 dims, f32
constexpr std::uint64_t kCacheBytesPerToken = 2 * 2 * 2 * 16 * 4;

std::string session_error(std::int64_t context, luminal::nn::MemoryLimit limit) {
    luminal::nn::CausalLm model =
        luminal::nn::build_causal_lm(luminal::io::load_model_config(kMemoryFixture), {.context = context});
    luminal::CompileOptions options;
    options.verbosity = 0;
    try {
        luminal::nn::Session session(model, luminal::CpuRuntime{}, options, limit);
    } catch (const luminal::Error& error) {
        return error.what();
    }
    return "";
}

// The fixture's weights as stored (f32): what the session binds.
std::uint64_t fixture_weight_bytes() {
    std::uint64_t total = 0;
    const auto file = luminal::io::SafetensorsFile::open(kMemoryFixture / "model.safetensors");
    for (const auto& t : file.tensors()) total += t.bytes.size();
    return total;
}

}  // namespace

TEST_CASE("a context no machine holds is an Error naming the KV cache's size and the option that lowers it") {
    const std::int64_t context = std::int64_t{1} << 40;  // 2^40 tokens x 512 B = 512 TiB
    const std::string error = session_error(context, {});
    CHECK(error.find("nn::Session") != std::string::npos);
    CHECK(error.find("KV cache (1099511627776 tokens x 2 layers, f32): 512.0 TiB") != std::string::npos);
    CHECK(error.find("--context") != std::string::npos);
    CHECK(error.find("available") != std::string::npos);
}

TEST_CASE("MemoryLimit: the weights and caches over the limit are an Error saying how many tokens fit") {
    // 384 B of slack for the few values the model computes itself (RoPE's frequencies), below a token's 512.
    const luminal::nn::MemoryLimit limit{fixture_weight_bytes() + (std::uint64_t{16} << 20) + 384};
    const std::string error = session_error(std::int64_t{1} << 20, limit);  // 2^20 x 512 B = 512 MiB of cache
    CHECK(error.find("KV cache (1048576 tokens x 2 layers, f32): 512.0 MiB") != std::string::npos);
    CHECK(error.find("the limit set") != std::string::npos);
    INFO(error);
    CHECK(error.find(": 32768 tokens fit") != std::string::npos);  // 16 MiB / 512 B
    CHECK(session_error(1024, limit).empty());  // 512 KiB of cache, and the buffers of its workloads
}

TEST_CASE("MemoryLimit: a prompt whose buffers do not fit is an Error before it runs; shorter ones run") {
    const std::uint64_t weights = fixture_weight_bytes();
    const std::int64_t context = 4096;
    // 32 MiB beyond weights and caches: a 2048-token prompt's attention scores alone
    // are 4 heads x 2048 x 2048 x 4 B = 64 MiB.
    const luminal::nn::MemoryLimit limit{weights + context * kCacheBytesPerToken + (std::uint64_t{32} << 20)};
    luminal::nn::CausalLm model =
        luminal::nn::build_causal_lm(luminal::io::load_model_config(kMemoryFixture), {.context = context});
    luminal::CompileOptions options;
    options.verbosity = 0;
    luminal::nn::Session session(model, luminal::CpuRuntime{}, options, limit);
    session.load_weights(luminal::io::SafetensorsModel::open(kMemoryFixture));
    CHECK_THROWS_WITH_AS(session.forward(std::vector<std::int32_t>(2048, 1)),
                         doctest::Contains("the runtime's buffers for a 2048-token prompt"), luminal::Error);
    CHECK(session.position() == 0);
    CHECK(session.forward(std::vector<std::int32_t>(16, 1)).size() == 16 * 384);
    CHECK(session.position() == 16);
}
