// The least a step must compute (nn/step_floor.hpp), against a count by hand.
#include "../test_data.hpp"

#include <doctest/doctest.h>

#include <luminal/luminal.hpp>
#include <luminal/nn/step_floor.hpp>

TEST_CASE("step floor: a step's flops are its tokens' products and their causal, windowed attention") {
    // The gemma3 fixture: hidden 64, 4 query heads of 16, 2 KV heads, MLP 128, 4 layers
    // (sliding window 4, full, sliding, full), vocabulary 384, the LM head tied to the embedding.
    const auto config = luminal::io::load_model_config(luminal_test::data_dir() / "models" / "gemma3");
    const luminal::nn::CausalLm model = luminal::nn::build_causal_lm(config, {.context = 16});
    // Per layer: q 64x64, k and v 32x64, o 64x64, gate and up 128x64, down 64x128: 36,864 weights.
    const double products = 2.0 * 4 * 36864 * 5, head = 2.0 * 384 * 64 * 5;
    // 5 new tokens after 2 cached see 3, 4, 5, 6, 7 keys (25); within a window of 4: 3, 4, 4, 4, 4 (19).
    const double attention = 2.0 * 2 * 4 * 16 * (19 + 25 + 19 + 25);
    CHECK(luminal::nn::step_floor_flops(model, 2, 5) == doctest::Approx(products + head + attention));

    // Logits of the last token only: the LM head runs on one row.
    const luminal::nn::CausalLm last = luminal::nn::build_causal_lm(config, {.context = 16, .last_logits_only = true});
    CHECK(luminal::nn::step_floor_flops(last, 2, 5) == doctest::Approx(products + head / 5 + attention));
}
