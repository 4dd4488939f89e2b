// Inputs bound from raw bytes and state carried between executions
// (set_bytes, move_output_to_input), on both runtimes; expected values by hand.
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <luminal/luminal.hpp>
#include <span>
#include <vector>

using luminal::DType;
using luminal::GraphTensor;

namespace {

template <typename T>
std::span<const std::byte> bytes_of(const std::vector<T>& values) {
    return std::as_bytes(std::span(values));
}

}  // namespace

TEST_CASE_TEMPLATE("set_bytes binds raw elements of the input's dtype", Runtime, luminal::ReferenceRuntime,
                   luminal::CpuRuntime) {
    luminal::Graph cx;
    GraphTensor weights = cx.named_tensor("w", {3}, DType::BF16);
    GraphTensor ids = cx.named_tensor("ids", {2}, DType::I64);
    GraphTensor as_f32 = weights.cast(DType::F32).output();
    GraphTensor doubled = (ids * 2).output();
    Runtime rt = cx.compile(Runtime{});
    // bf16 bit patterns of 1.0, -2.0 and 1.5.
    rt.set_bytes(weights, bytes_of(std::vector<std::uint16_t>{0x3f80, 0xc000, 0x3fc0}));
    rt.set_bytes(ids, bytes_of(std::vector<std::int64_t>{7, -40000000000}));
    rt.execute(cx.dyn_map());
    CHECK(rt.get_f32(as_f32) == std::vector<float>{1.0f, -2.0f, 1.5f});
    CHECK(rt.template get<std::int64_t>(doubled) == std::vector<std::int64_t>{14, -80000000000});

    CHECK_THROWS_WITH_AS(rt.set_bytes(weights, bytes_of(std::vector<std::uint8_t>{1, 2, 3})),
                         doctest::Contains("input 'w' is bf16 (2 bytes per element) but 3 bytes were given"),
                         luminal::Error);
    CHECK_THROWS_WITH_AS(rt.set_bytes(weights, bytes_of(std::vector<std::uint16_t>{1, 2})),
                         doctest::Contains("input 'w' has shape [3] (3 elements) but 2 values were given"),
                         luminal::Error);
}

TEST_CASE_TEMPLATE("move_output_to_input carries state across executions", Runtime, luminal::ReferenceRuntime,
                   luminal::CpuRuntime) {
    luminal::Graph cx;
    GraphTensor state = cx.named_tensor("state", {3});
    GraphTensor step = cx.named_tensor("step", {3});
    GraphTensor next = (state * 2 + step).output();
    Runtime rt = cx.compile(Runtime{});
    rt.set_data(state, std::vector<float>{1, 0, -1});
    rt.set_data(step, std::vector<float>{1, 2, 3});
    // state_{n+1} = 2 state_n + step: (1,0,-1) -> (3,2,1) -> (7,6,5) -> (15,14,13)
    for (int i = 0; i < 3; ++i) {
        rt.execute(cx.dyn_map());
        rt.move_output_to_input(next, state);
    }
    rt.execute(cx.dyn_map());
    CHECK(rt.get_f32(next) == std::vector<float>{31, 30, 29});

    GraphTensor wrong = cx.named_tensor("ints", {3}, DType::I32);
    CHECK_THROWS_AS(rt.move_output_to_input(next, wrong), luminal::Error);
}
