// The bundled models against transformers: tiny random-weight models of each
// family (tests/data/models, from tools/gen_model_fixtures.py) loaded through
// the same path a real model directory takes, compiled for each runtime (the
// reference, the CPU backend, the toy backend), and compared with
// transformers' logits (model_reference.hpp).
#include "model_reference.hpp"
#include "../test_data.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <span>
#include <tuple>
#include <luminal/luminal.hpp>
#include <string>
#include <vector>

#include "../cuda/nvrtc_coverage.hpp"
#include "../toy_backend/toy_runtime.hpp"

namespace {

using luminal_test::check_against_reference;
using luminal_test::kLogitTolerance;
using luminal_test::max_abs_diff;

const std::filesystem::path kModels = luminal_test::data_dir() / "models";

void check_family(const std::string& name) {
    CAPTURE(name);
    const auto dir = kModels / name;
    const luminal::io::SafetensorsModel weights = luminal::io::SafetensorsModel::open(dir);
    const auto config = luminal::io::load_model_config(dir);
    auto load = [&](auto& session) { session.load_weights(weights); };
    const auto reference = dir / "reference.safetensors";
    SUBCASE("cpu") { check_against_reference<luminal::CpuRuntime>(config, load, reference); }
    SUBCASE("reference") { check_against_reference<luminal::ReferenceRuntime>(config, load, reference); }
    SUBCASE("toy") { check_against_reference<toy::ToyRuntime>(config, load, reference); }
    SUBCASE("cuda (host emulator)") { check_against_reference<luminal_test::CompilingEmulator>(config, load, reference); }
}

}  // namespace

TEST_CASE("llama matches transformers: prefill and greedy decode") { check_family("llama"); }
TEST_CASE("qwen3 matches transformers: prefill and greedy decode") { check_family("qwen3"); }
TEST_CASE("qwen3-moe matches transformers: prefill and greedy decode") { check_family("qwen3_moe"); }
TEST_CASE("gemma3 matches transformers: prefill and greedy decode") { check_family("gemma3"); }
TEST_CASE("gemma4-moe matches transformers: prefill and greedy decode") { check_family("gemma4_moe"); }

// tools/gen_gguf_model_fixtures.py: a Llama in one GGUF file (Q8_0, Q4_1, Q4_0,
// Q5_1, F16 and F32 tensors, Q/K rows permuted as llama.cpp's converter does),
// against transformers run on the dequantized weights in Hugging Face layout.
TEST_CASE("a GGUF Llama matches transformers on its dequantized weights") {
    const auto dir = luminal_test::data_dir() / "gguf_model";
    CHECK(luminal::nn::PretrainedModel::open(dir / "model.gguf").chat_family() == luminal::io::ChatFamily::SmolLm2);
    luminal_test::check_pretrained(dir / "model.gguf");
}

namespace {

// A GGUF Llama with quantized matrices against transformers' logits: on the
// CPU with f32 activations (within 1e-4) and with 8-bit activation blocks
// (within 0.25), through `load` (which also checks the program chosen), and
// on the ReferenceRuntime with the graph as written.
template <typename Load>
void check_quantized_gguf(const luminal::nn::PretrainedModel& pretrained, const std::filesystem::path& dir,
                          luminal::nn::ModelOptions options, const Load& load) {
    SUBCASE("f32 activations") {
        options.q8_activations = false;
        luminal_test::check_against_reference(pretrained.config(), load, dir / "reference.safetensors",
                                              luminal_test::greedy_pick, "", options);
    }
    SUBCASE("8-bit activations") {
        luminal_test::check_against_reference(pretrained.config(), load, dir / "reference.safetensors",
                                              luminal_test::greedy_pick, "", options, 0.25);
    }
    SUBCASE("the ReferenceRuntime on the graph as written") {
        options.q8_activations = false;
        luminal_test::check_against_reference<luminal::ReferenceRuntime>(
            pretrained.config(), [&](auto& session) { session.load_weights(pretrained); }, dir / "reference.safetensors",
            luminal_test::greedy_pick, "", options);
    }
}

}  // namespace

// The same file with its Q8_0, Q4_0, Q4_1 and Q5_1 matrices kept as blocks: the CPU
// multiplies the blocks (QuantizedMatmul) and looks up embeddings in them
// (QuantizedGather). With f32 activations the logits stay within 1e-4; with
// activations rounded to 8-bit blocks (llama.cpp's way) the difference is
// reported, and bounded loosely, but greedy ids still agree on this model.
TEST_CASE("a GGUF Llama with its matrices kept quantized matches transformers") {
    const auto dir = luminal_test::data_dir() / "gguf_model";
    const auto pretrained = luminal::nn::PretrainedModel::open(dir / "model.gguf");
    luminal::nn::ModelOptions options;
    options.quantized = pretrained.quantized_weights();
    CHECK(options.quantized.size() == 1 + 2 * 6);  // the embedding; per layer q, k, v, o (Q4_1), gate (Q4_0), up (Q5_1)
    CHECK(options.quantized.at("model.embed_tokens.weight") == luminal::QuantFormat::Q8_0);
    CHECK(options.quantized.at("model.layers.1.mlp.gate_proj.weight") == luminal::QuantFormat::Q4_0);
    CHECK(options.quantized.at("model.layers.1.mlp.up_proj.weight") == luminal::QuantFormat::Q5_1);
    CHECK_FALSE(options.quantized.contains("model.layers.1.mlp.down_proj.weight"));  // F16: read as stored
    const auto load = [&](auto& session) {
        session.load_weights(pretrained);
        const std::string program = session.report().program.to_string();
        CHECK(program.find("QuantizedMatmul Q4_1") != std::string::npos);
        CHECK(program.find("QuantizedMatmul Q4_0") != std::string::npos);
        CHECK(program.find("QuantizedMatmul Q5_1") != std::string::npos);
        CHECK(program.find("QuantizedMatmul Q8_0") != std::string::npos);  // the tied LM head
        CHECK(program.find("QuantizedGather Q8_0") != std::string::npos);
        CHECK(program.find("Dequantize") == std::string::npos);
    };
    check_quantized_gguf(pretrained, dir, options, load);  // 8-bit activations measured: 0.11
}

// tools/gen_gguf_q4_k_m_fixtures.py: a Llama quantized by llama.cpp to Q4_K_M
// (Q4_K and Q6_K matrices, the Q6_K embedding doubling as the LM head), its
// super-blocks kept as they are stored, against transformers on the gguf
// package's dequantization of the same file.
TEST_CASE("a Q4_K_M GGUF Llama with its K super-blocks kept quantized matches transformers") {
    const auto dir = luminal_test::data_dir() / "gguf_model_q4_k_m";
    const auto pretrained = luminal::nn::PretrainedModel::open(dir / "model.gguf");
    luminal::nn::ModelOptions options;
    options.quantized = pretrained.quantized_weights();
    CHECK(options.quantized.size() == 1 + 7);  // the embedding; q, k, v, o, gate, up, down
    CHECK(options.quantized.at("model.embed_tokens.weight") == luminal::QuantFormat::Q6_K);
    CHECK(options.quantized.at("model.layers.0.self_attn.q_proj.weight") == luminal::QuantFormat::Q4_K);
    CHECK(options.quantized.at("model.layers.0.mlp.down_proj.weight") == luminal::QuantFormat::Q6_K);
    const auto load = [&](auto& session) {
        session.load_weights(pretrained);
        const std::string program = session.report().program.to_string();
        CHECK(program.find("QuantizedMatmul Q4_K") != std::string::npos);
        CHECK(program.find("QuantizedMatmul Q6_K") != std::string::npos);  // ffn_down, v and the tied LM head
        CHECK(program.find("QuantizedGather Q6_K") != std::string::npos);
        CHECK(program.find("Dequantize") == std::string::npos);
    };
    check_quantized_gguf(pretrained, dir, options, load);
}

TEST_CASE("a Q4_K_M GGUF file cut short is an Error naming the tensor whose blocks are missing") {
    const auto source = luminal_test::data_dir() / "gguf_model_q4_k_m" / "model.gguf";
    const auto path = std::filesystem::temp_directory_path() / "luminal_test_q4_k_m_truncated.gguf";
    std::ifstream in(source, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // The last tensor in the file, blk.0.ffn_up.weight (Q4_K, 73728 bytes), loses one super-block.
    bytes.resize(bytes.size() - 144);
    std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    CHECK_THROWS_WITH_AS(luminal::nn::PretrainedModel::open(path),
                         doctest::Contains("tensor 'blk.0.ffn_up.weight': 73728 bytes at data offset"), luminal::Error);
    std::filesystem::remove(path);
}

TEST_CASE("a generation model computes the last position's logits only") {
    const auto dir = luminal_test::data_dir() / "gguf_model";
    const auto pretrained = luminal::nn::PretrainedModel::open(dir / "model.gguf");
    const auto reference = luminal::io::SafetensorsFile::open(dir / "reference.safetensors");
    const auto prompt64 = luminal::io::to_vector<std::int64_t>(reference.at("prompt_ids"));
    const auto prefill = luminal::io::to_f32(reference.at("prefill_logits"));
    luminal::nn::ModelOptions options;
    options.context = 32;
    options.last_logits_only = true;
    luminal::nn::CausalLm model = luminal::nn::build_causal_lm(pretrained.config(), options);
    luminal::CompileOptions compile;
    compile.verbosity = 0;
    luminal::nn::Session session(model, luminal::CpuRuntime{}, compile);
    session.load_weights(pretrained);
    const auto logits = session.forward(std::vector<std::int32_t>(prompt64.begin(), prompt64.end()));
    const auto vocab = static_cast<std::size_t>(pretrained.config().vocab_size);
    REQUIRE(logits.size() == vocab);
    CHECK(luminal_test::max_abs_diff(logits, std::span(prefill).last(vocab)) <= luminal_test::kLogitTolerance);
}

namespace {

// The llama fixture rewritten into `dir` with `edit` applied to its tensor list.
template <typename Edit>
std::string binding_error(const std::filesystem::path& dir, Edit edit) {
    const auto source = luminal::io::SafetensorsFile::open(kModels / "llama" / "model.safetensors");
    std::vector<luminal::io::SafetensorsRecord> records;
    for (const auto& t : source.tensors()) records.push_back({t.name, t.stored_dtype, t.shape, t.bytes});
    edit(records);
    std::filesystem::create_directories(dir);
    std::filesystem::copy_file(kModels / "llama" / "config.json", dir / "config.json",
                               std::filesystem::copy_options::overwrite_existing);
    luminal::io::write_safetensors(dir / "model.safetensors", records);

    luminal::nn::CausalLm model = luminal::nn::build_causal_lm(luminal::io::load_model_config(dir), {.context = 8});
    luminal::CompileOptions options;
    options.verbosity = 0;
    luminal::nn::Session session(model, luminal::CpuRuntime{}, options);
    try {
        session.load_weights(luminal::io::SafetensorsModel::open(dir));
    } catch (const luminal::Error& error) {
        return error.what();
    }
    return "";
}

}  // namespace

TEST_CASE("weights that do not fit the model: missing, extra, mis-shaped tensors") {
    const auto dir = std::filesystem::temp_directory_path() / "luminal_test_model_binding";
    using Records = std::vector<luminal::io::SafetensorsRecord>;
    CHECK(binding_error(dir, [](Records&) {}).empty());
    CHECK(binding_error(dir, [](Records& r) {
              std::erase_if(r, [](const auto& t) { return t.name == "model.layers.1.mlp.up_proj.weight"; });
          }).find("missing tensor 'model.layers.1.mlp.up_proj.weight' (the model expects shape [128, 64])") !=
          std::string::npos);
    CHECK(binding_error(dir, [](Records& r) {
              r.push_back({"model.layers.7.extra.weight", r[0].dtype, r[0].shape, r[0].bytes});
          }).find("1 tensor(s) the model does not use: model.layers.7.extra.weight") != std::string::npos);
    CHECK(binding_error(dir, [](Records& r) {
              for (auto& t : r)
                  if (t.name == "model.norm.weight") t = {t.name, t.dtype, {32}, t.bytes.first(t.bytes.size() / 2)};
          }).find("tensor 'model.norm.weight' has shape [32] but the model expects [64]") != std::string::npos);
    std::filesystem::remove_all(dir);
}

namespace {

// The GGUF fixture with one tensor name replaced by another of the same length
// (the file stays valid), loaded into its model: the binding error, or "".
std::string gguf_binding_error(std::string_view from, std::string_view to) {
    const auto source = luminal_test::data_dir() / "gguf_model" / "model.gguf";
    std::string bytes = luminal::io::read_text_file(source);
    const auto at = bytes.find(from);
    REQUIRE(at != std::string::npos);
    REQUIRE(from.size() == to.size());
    bytes.replace(at, from.size(), to);
    const auto path = std::filesystem::temp_directory_path() / "luminal_test_renamed.gguf";
    std::ofstream(path, std::ios::binary) << bytes;
    std::string message;
    try {
        const auto pretrained = luminal::nn::PretrainedModel::open(path);
        luminal::nn::CausalLm model = luminal::nn::build_causal_lm(pretrained.config(), {.context = 8});
        luminal::CompileOptions options;
        options.verbosity = 0;
        luminal::nn::Session session(model, luminal::CpuRuntime{}, options);
        session.load_weights(pretrained);
    } catch (const luminal::Error& error) {
        message = error.what();
    }
    std::filesystem::remove(path);
    return message;
}

}  // namespace

TEST_CASE("a GGUF file whose tensors do not fit the model names them") {
    CHECK(gguf_binding_error("blk.1.ffn_up.weight", "blk.1.ffn_xx.weight")
              .find("1 tensor(s) the model does not use: blk.1.ffn_xx.weight") != std::string::npos);
    // Layer 9 of a 2-layer model: not mapped to a Hugging Face name, so unused.
    CHECK(gguf_binding_error("blk.0.attn_q.weight", "blk.9.attn_q.weight")
              .find("1 tensor(s) the model does not use: blk.9.attn_q.weight") != std::string::npos);
    CHECK(gguf_binding_error("output_norm.weight", "output_norm.weigh2")
              .find("output_norm.weigh2") != std::string::npos);
}

namespace {

// A copy of family `name`'s fixture with every weight rounded to bf16 (to
// nearest even, as torch's .to(torch.bfloat16)) and stored so.
struct Bf16Copy {
    explicit Bf16Copy(const std::string& name)
        : dir(std::filesystem::temp_directory_path() / ("luminal_test_model_bf16_" + name)) {
        std::filesystem::create_directories(dir);
        std::filesystem::copy_file(kModels / name / "config.json", dir / "config.json",
                                   std::filesystem::copy_options::overwrite_existing);
        const auto source = luminal::io::SafetensorsFile::open(kModels / name / "model.safetensors");
        std::vector<std::vector<std::uint16_t>> storage;
        std::vector<luminal::io::SafetensorsRecord> records;
        for (const auto& t : source.tensors()) {
            auto& bits = storage.emplace_back();
            for (float v : luminal::io::to_f32(t)) bits.push_back(luminal::f32_to_bf16_bits(v));
            records.push_back({t.name, luminal::io::SafetensorsDType::BF16, t.shape, std::as_bytes(std::span(bits))});
        }
        luminal::io::write_safetensors(dir / "model.safetensors", records);
    }
    ~Bf16Copy() { std::filesystem::remove_all(dir); }
    Bf16Copy(const Bf16Copy&) = delete;
    Bf16Copy& operator=(const Bf16Copy&) = delete;

    // The prompt's logits, the model's matrices kept in bf16.
    template <typename Runtime>
    std::vector<float> prefill(Runtime runtime, std::span<const std::int64_t> prompt, bool narrow_activations) const {
        luminal::nn::CausalLm model = luminal::nn::build_causal_lm(
            luminal::io::load_model_config(dir),
            {.context = 16, .weight_dtype = luminal::DType::BF16, .narrow_activations = narrow_activations});
        luminal::CompileOptions options;
        options.verbosity = 0;
        luminal::nn::Session session(model, std::move(runtime), options);
        session.load_weights(luminal::io::SafetensorsModel::open(dir));
        return session.forward(std::vector<std::int32_t>(prompt.begin(), prompt.end()));
    }

    std::filesystem::path dir;
};

std::vector<std::int64_t> prompt_of(const std::string& name) {
    return luminal::io::to_vector<std::int64_t>(
        luminal::io::SafetensorsFile::open(kModels / name / "reference.safetensors").at("prompt_ids"));
}

// The best id of each row, and its lead over the second best.
std::vector<std::pair<std::size_t, double>> row_best(std::span<const float> logits, std::size_t vocab) {
    std::vector<std::pair<std::size_t, double>> best;
    for (std::size_t row = 0; row + vocab <= logits.size(); row += vocab) {
        const std::span<const float> r = logits.subspan(row, vocab);
        const auto top = static_cast<std::size_t>(std::max_element(r.begin(), r.end()) - r.begin());
        double second = -std::numeric_limits<double>::infinity();
        for (std::size_t i = 0; i < vocab; ++i)
            if (i != top) second = std::max(second, static_cast<double>(r[i]));
        best.emplace_back(top, static_cast<double>(r[top]) - second);
    }
    return best;
}

}  // namespace

TEST_CASE("bf16 weights: stored as bf16, computed in f32, match transformers on the rounded weights") {
    // transformers' reference ran the same rounded weights in f32.
    const Bf16Copy copy("llama");
    const auto reference = luminal::io::SafetensorsFile::open(kModels / "llama" / "reference.safetensors");
    const auto prompt = prompt_of("llama");
    for (const auto& [runtime, logits] : {std::pair{"cpu", copy.prefill(luminal::CpuRuntime{}, prompt, false)},
                                          std::pair{"cuda (host emulator)", copy.prefill(luminal_test::CompilingEmulator{}, prompt, false)}}) {
        CAPTURE(runtime);
        CHECK(max_abs_diff(logits, luminal::io::to_f32(reference.at("bf16_prefill_logits"))) <= kLogitTolerance);
        // Rounding the weights moved the logits well beyond the tolerance: the check above can tell them apart.
        CHECK(max_abs_diff(logits, luminal::io::to_f32(reference.at("prefill_logits"))) > 100 * kLogitTolerance);
    }
}

// tools/gen_bf16_fixtures.py. With narrow_activations every product with a bf16
// matrix (a MoE router's aside; the experts' included) reads its activations
// rounded to bf16. Against transformers in f32 with the same roundings (every
// F.linear's input) the logits agree but for an activation on the edge between
// two bf16 neighbours, which f32 sums taken in another order may round the
// other way: Gemma 4's fixture is 0.025 away (the fixture's own f32 and f64
// runs are 0.013 apart), the others 4e-6 at most. That is within half of what
// the roundings move, so the check tells the rounded model from the exact one.
// That check runs the CPU's f32 sums (the AVX2 kernels, or fewer): where the
// CPU has AVX512_BF16 the default kernels add each product pair first
// (cpu/gemm.hpp), an order that flips such an edge in Qwen3's and Gemma 3's
// fixtures (0.0098 and 0.005). Against transformers' own bf16 run, where every
// op rounds, every runtime's logits are within that run's distance from the
// exact roundings, and the greedy token of every position whose top-2 margin
// exceeds twice that is the same.
TEST_CASE("narrow activations: bf16 products match transformers' bf16 run, on the CPU and the CUDA backend") {
    constexpr double kEdgeTolerance = 3e-2;
    for (const std::string name : {"llama", "qwen3", "qwen3_moe", "gemma3", "gemma4_moe"}) {
        CAPTURE(name);
        const Bf16Copy copy(name);
        const auto prompt = prompt_of(name);
        const auto bf16 = luminal::io::SafetensorsFile::open(kModels / name / "bf16_reference.safetensors");
        const std::vector<float> narrow = luminal::io::to_f32(bf16.at("narrow_prefill_logits"));
        const std::vector<float> hf_bf16 = luminal::io::to_f32(bf16.at("hf_bf16_prefill_logits"));
        const double hf_tolerance = luminal::io::to_f32(bf16.at("hf_bf16_error"))[0] + kEdgeTolerance;
        const std::size_t vocab = narrow.size() / prompt.size();
        const double rounding_effect = max_abs_diff(copy.prefill(luminal::CpuRuntime{}, prompt, false), narrow);
        CHECK(rounding_effect > 1e-2);
        const luminal::CpuOptions f32_sums{.isa = std::min(luminal::cpu::quant::best_isa(), luminal::cpu::quant::Isa::Avx2)};
        for (const auto& [runtime, logits, same_sums] :
             {std::tuple{"cpu, f32 sums", copy.prefill(luminal::CpuRuntime{f32_sums}, prompt, true), true},
              std::tuple{"cpu", copy.prefill(luminal::CpuRuntime{}, prompt, true), false},
              std::tuple{"cuda (host emulator)", copy.prefill(luminal_test::CompilingEmulator{}, prompt, true), true}}) {
            CAPTURE(runtime);
            if (same_sums) CHECK(max_abs_diff(logits, narrow) <= std::min(kEdgeTolerance, rounding_effect / 2));
            CHECK(max_abs_diff(logits, hf_bf16) <= hf_tolerance);
            const auto ours = row_best(logits, vocab), theirs = row_best(hf_bf16, vocab);
            for (std::size_t row = 0; row < theirs.size(); ++row)
                if (theirs[row].second > 2 * hf_tolerance) CHECK(ours[row].first == theirs[row].first);
        }
    }
}
