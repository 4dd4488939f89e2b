// Inputs bound from raw bytes and state carried between executions
// (set_bytes, Graph::carry), on both runtimes; expected values by hand.
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <luminal/luminal.hpp>
#include <span>
#include <type_traits>
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

TEST_CASE_TEMPLATE("carried state: an output becomes its input's data for the next execution", Runtime,
                   luminal::ReferenceRuntime, luminal::CpuRuntime) {
    luminal::Graph cx;
    GraphTensor state = cx.named_tensor("state", {3});
    GraphTensor step = cx.named_tensor("step", {3});
    GraphTensor next = (state * 2 + step).output();
    cx.carry(next, state);
    auto [rt, report] = luminal::compile_with_report(cx, Runtime{});
    CHECK(report.program.carried == cx.carried());
    rt.set_data(state, std::vector<float>{1, 0, -1});
    rt.set_data(step, std::vector<float>{1, 2, 3});
    // state_{n+1} = 2 state_n + step: (1,0,-1) -> (3,2,1) -> (7,6,5) -> (15,14,13)
    const std::vector<std::vector<float>> expected{{3, 2, 1}, {7, 6, 5}, {15, 14, 13}};
    for (const auto& values : expected) {
        rt.execute(cx.dyn_map());
        CHECK(rt.get_f32(next) == values);
    }
    // Rebinding the state starts over; the last output stays readable until then.
    rt.set_data(state, std::vector<float>{0, 0, 0});
    CHECK(rt.get_f32(next) == std::vector<float>{15, 14, 13});
    rt.execute(cx.dyn_map());
    CHECK(rt.get_f32(next) == std::vector<float>{1, 2, 3});
}

namespace {

// A cache of 4 rows of 2, written at rows p..p+s-1 each execution, carried to
// the next, and read back up to the last written row (as attention reads a KV cache).
struct RowCache {
    luminal::Graph cx;
    GraphTensor cache = cx.named_tensor("cache", {4, 2});
    GraphTensor rows = cx.named_tensor("rows", {'s', 2});
    GraphTensor updated = cache.scatter(cx.iota(luminal::Expression('p') * 2 + luminal::Expression::index(), {'s', 2}),
                                        rows)
                              .output();
    GraphTensor column_sums = updated.slice_along(0, 0, luminal::Expression('p') + 's').sum(0).output();

    RowCache() { cx.carry(updated, cache); }

    template <typename Runtime>
    void write(Runtime& rt, std::int64_t p, const std::vector<float>& values) {
        cx.set_dim('p', p);
        cx.set_dim('s', static_cast<std::int64_t>(values.size() / 2));
        rt.set_data(rows, values);
        rt.execute(cx.dyn_map());
    }
};

}  // namespace

TEST_CASE_TEMPLATE("a carried scatter into a cache writes rows after the earlier ones", Runtime,
                   luminal::ReferenceRuntime, luminal::CpuRuntime) {
    RowCache m;
    m.cx.set_dim('p', 0);
    m.cx.set_dim('s', 1);
    Runtime rt = m.cx.compile(Runtime{});
    if constexpr (std::is_same_v<Runtime, luminal::CpuRuntime>) CHECK(rt.updates_in_place(m.updated));
    rt.set_data(m.cache, std::vector<float>(8, 0.0f));

    m.write(rt, 0, {1, 2, 3, 4});  // a two-row prefill
    CHECK(rt.get_f32(m.updated) == std::vector<float>{1, 2, 3, 4, 0, 0, 0, 0});
    CHECK(rt.get_f32(m.column_sums) == std::vector<float>{4, 6});
    m.write(rt, 2, {5, 6});  // one-row steps
    CHECK(rt.get_f32(m.column_sums) == std::vector<float>{9, 12});
    m.write(rt, 3, {7, 8});
    CHECK(rt.get_f32(m.updated) == std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8});
    CHECK(rt.get_f32(m.column_sums) == std::vector<float>{16, 20});

    // Clearing the cache (as Session::reset does) forgets the rows written so
    // far; the last output stays readable until the next execution.
    rt.set_data(m.cache, std::vector<float>(8, 0.0f));
    CHECK(rt.get_f32(m.updated) == std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8});
    m.write(rt, 1, {-1, -2});
    CHECK(rt.get_f32(m.updated) == std::vector<float>{0, 0, -1, -2, 0, 0, 0, 0});
    CHECK(rt.get_f32(m.column_sums) == std::vector<float>{-1, -2});
    if constexpr (std::is_same_v<Runtime, luminal::CpuRuntime>) {  // the CPU's clear: zeros bound without values
        rt.set_zeros(m.cache);
        m.write(rt, 3, {9, 10});
        CHECK(rt.get_f32(m.updated) == std::vector<float>{0, 0, 0, 0, 0, 0, 9, 10});
        CHECK(rt.get_f32(m.column_sums) == std::vector<float>{9, 10});
    }
}

TEST_CASE("CpuRuntime::set_zeros binds zeros to inputs of every size (mapped pages from 1 MiB)") {
    for (const std::int64_t n : {std::int64_t{5}, std::int64_t{1} << 19}) {  // 20 B and 2 MiB of f32
        luminal::Graph cx;
        luminal::GraphTensor x = cx.named_tensor("x", {n});
        const luminal::GraphTensor shifted = x + 1.0f;
        luminal::GraphTensor total = shifted.sum(0).output();
        luminal::CpuRuntime rt = cx.compile(luminal::CpuRuntime{});
        rt.set_zeros(x);
        rt.execute(cx.dyn_map());
        CHECK(rt.get_f32(total) == std::vector<float>{static_cast<float>(n)});
        rt.set_data(x, std::vector<float>(static_cast<std::size_t>(n), 2.0f));
        rt.execute(cx.dyn_map());
        CHECK(rt.get_f32(total) == std::vector<float>{static_cast<float>(3 * n)});
        rt.set_zeros(x);
        rt.execute(cx.dyn_map());
        CHECK(rt.get_f32(total) == std::vector<float>{static_cast<float>(n)});
    }
}

TEST_CASE_TEMPLATE("a carried cache also read after its scatter keeps copy semantics", Runtime,
                   luminal::ReferenceRuntime, luminal::CpuRuntime) {
    luminal::Graph cx;
    GraphTensor cache = cx.named_tensor("cache", {3});
    GraphTensor row = cx.named_tensor("row", {1});
    GraphTensor updated = cache.scatter(cx.iota(luminal::Expression('p'), {1}), row).output();
    // Reads the cache before the write and after it, so the write cannot go into the cache's buffer.
    GraphTensor old_plus_new = (cache + updated).output();
    cx.carry(updated, cache);
    cx.set_dim('p', 0);
    Runtime rt = cx.compile(Runtime{});
    if constexpr (std::is_same_v<Runtime, luminal::CpuRuntime>) CHECK_FALSE(rt.updates_in_place(updated));
    rt.set_data(cache, std::vector<float>{10, 20, 30});
    const std::vector<std::vector<float>> updated_after{{1, 20, 30}, {1, 2, 30}, {1, 2, 3}};
    const std::vector<std::vector<float>> sums_after{{11, 40, 60}, {2, 22, 60}, {2, 4, 33}};
    for (std::int64_t p = 0; p < 3; ++p) {
        CAPTURE(p);
        cx.set_dim('p', p);
        rt.set_data(row, std::vector<float>{static_cast<float>(p + 1)});
        rt.execute(cx.dyn_map());
        CHECK(rt.get_f32(updated) == updated_after[p]);
        CHECK(rt.get_f32(old_plus_new) == sums_after[p]);
    }
}

TEST_CASE("carry declarations that cannot hold are Errors naming both tensors") {
    luminal::Graph cx;
    GraphTensor cache = cx.named_tensor("cache", {3});
    GraphTensor other = cx.named_tensor("other", {3});
    GraphTensor ints = cx.named_tensor("ints", {3}, DType::I32);
    GraphTensor wide = cx.named_tensor("wide", {4});
    GraphTensor doubled = cache * 2;
    GraphTensor next = doubled.output();

    CHECK_THROWS_WITH_AS(cx.carry(doubled + 1, cache), doctest::Contains("is not an output (call .output() on it)"),
                         luminal::Error);
    CHECK_THROWS_WITH_AS(cx.carry(next, doubled), doctest::Contains("that is not an Input"), luminal::Error);
    CHECK_THROWS_WITH_AS(
        cx.carry(next, wide),
        doctest::Contains("([3] f32) cannot carry into input node 3 (wide [4] f32): shapes or dtypes differ"),
        luminal::Error);
    CHECK_THROWS_WITH_AS(cx.carry(next, ints), doctest::Contains("(ints [3] i32): shapes or dtypes differ"),
                         luminal::Error);
    CHECK(cx.carried().empty());

    cx.carry(next, cache);
    REQUIRE(cx.carried().size() == 1);
    CHECK(cx.carried()[0].input == cache.id());
    CHECK(cx.carried()[0].output == next.id());
    CHECK_THROWS_WITH_AS(cx.carry((other + 1).output(), cache), doctest::Contains("already does"), luminal::Error);
    CHECK_THROWS_WITH_AS(cx.carry(next, other), doctest::Contains("it already carries into input node 0"),
                         luminal::Error);
    // The tensor an output publishes names that output too.
    CHECK_THROWS_WITH_AS(cx.carry(doubled, other), doctest::Contains("already carries"), luminal::Error);
}
