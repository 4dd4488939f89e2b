// Writes a Llama-architecture model directory with random weights (config.json,
// model.safetensors, tokenizer.json copied from --tokenizer), so that the
// generation example runs with no download. Its text is random by design.
//
//   random_model --tokenizer tests/data/tokenizers/llama3.json --out DIR
#include <CLI/CLI.hpp>
#include <luminal/luminal.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <vector>

int main(int argc, char** argv) {
    CLI::App app{"Write a random-weight Llama model directory"};
    std::filesystem::path tokenizer_path, out;
    int hidden = 256, layers = 4, heads = 8, kv_heads = 4, intermediate = 768;
    std::uint64_t seed = 0;
    app.add_option("--tokenizer", tokenizer_path, "tokenizer.json to ship with the model")->required();
    app.add_option("--out", out, "model directory to write")->required();
    app.add_option("--hidden", hidden, "hidden size");
    app.add_option("--layers", layers, "decoder layers");
    app.add_option("--heads", heads, "attention heads");
    app.add_option("--kv-heads", kv_heads, "key/value heads");
    app.add_option("--intermediate", intermediate, "MLP width");
    app.add_option("--seed", seed, "weight seed");
    CLI11_PARSE(app, argc, argv);

    try {
        const auto tokenizer = luminal::io::Tokenizer::from_file(tokenizer_path);
        luminal::io::Json config = {
            {"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"},
            {"vocab_size", tokenizer.vocab_size()}, {"hidden_size", hidden}, {"intermediate_size", intermediate},
            {"num_hidden_layers", layers}, {"num_attention_heads", heads}, {"num_key_value_heads", kv_heads},
            {"max_position_embeddings", 2048}, {"rms_norm_eps", 1e-5}, {"rope_theta", 10000.0},
            {"tie_word_embeddings", true}, {"hidden_act", "silu"},
            {"bos_token_id", tokenizer.bos_id() ? luminal::io::Json(*tokenizer.bos_id()) : luminal::io::Json()},
            {"eos_token_id", tokenizer.eos_id() ? luminal::io::Json(*tokenizer.eos_id()) : luminal::io::Json()},
            {"luminal_note", "random weights, written by examples/random_model"}};
        std::filesystem::create_directories(out);
        std::ofstream(out / "config.json") << config.dump(2) << "\n";
        std::filesystem::copy_file(tokenizer_path, out / "tokenizer.json",
                                   std::filesystem::copy_options::overwrite_existing);

        // The model itself names its parameters and their shapes.
        const auto model = luminal::nn::build_causal_lm(luminal::io::load_model_config(out));
        std::mt19937_64 rng(seed);
        std::vector<std::vector<float>> values;
        std::vector<luminal::io::SafetensorsRecord> records;
        for (const auto& parameter : model.parameters.parameters()) {
            if (!parameter.computed.empty()) continue;
            std::int64_t count = 1;
            for (auto d : parameter.shape) count *= d;
            const bool norm = parameter.shape.size() == 1;
            std::normal_distribution<float> normal(norm ? 1.0f : 0.0f, norm ? 0.1f : 0.05f);
            auto& v = values.emplace_back(static_cast<std::size_t>(count));
            for (float& x : v) x = normal(rng);
            records.push_back({parameter.name, luminal::io::SafetensorsDType::F32, parameter.shape,
                               std::as_bytes(std::span(v))});
        }
        luminal::io::write_safetensors(out / "model.safetensors", records, {{"format", "pt"}});
        std::printf("wrote %s: %zu tensors, random weights\n", out.c_str(), records.size());
    } catch (const luminal::Error& error) {
        std::fprintf(stderr, "random_model: %s\n", error.what());
        return 1;
    }
}
