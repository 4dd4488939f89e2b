#pragma once
// ops::argsort and topk_indexes in one graph, each case as a backend should
// run it: the rank count found by the rule and run as Argsort. Cases: both
// directions; NaN, infinities, both zeros and ties; a transposed axis; i32
// and bf16 values; rows of 1, 17, 40, 1000 (padded to 1024) and 128 values
// (a mixture of experts' router: the first 8 of a softmax, 70 rows). Checked
// against orders computed here with std::stable_sort under torch's rules
// (NaN largest, -0 equal to +0, equal values in their original order).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <luminal/luminal.hpp>
#include <numeric>
#include <string>
#include <vector>

namespace luminal_test {

// Values with repeats, both zeros, NaN and infinities.
inline std::vector<float> argsort_tricky_values(std::size_t n) {
    const float specials[] = {0.0f, -0.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity(), 1.5f, 1.5f, -2.25f};
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i)
        v[i] = i % 5 == 0 ? specials[(i / 5) % 8] : static_cast<float>(static_cast<int>((i * 37 + 11) % 23) - 11) * 0.5f;
    return v;
}

// The stable order of each row of `values` ([rows, n], row-major).
inline std::vector<std::int32_t> stable_order(const std::vector<float>& values, std::int64_t rows, std::int64_t n, bool descending) {
    std::vector<std::int32_t> out;
    for (std::int64_t r = 0; r < rows; ++r) {
        std::vector<std::int32_t> idx(static_cast<std::size_t>(n));
        std::iota(idx.begin(), idx.end(), 0);
        auto value = [&](std::int32_t i) { return values[static_cast<std::size_t>(r * n + i)]; };
        std::stable_sort(idx.begin(), idx.end(), [&](std::int32_t a, std::int32_t b) {
            const float x = value(a), y = value(b);
            if (std::isnan(x) || std::isnan(y)) return descending ? std::isnan(x) && !std::isnan(y) : !std::isnan(x) && std::isnan(y);
            return descending ? x > y : x < y;
        });
        out.insert(out.end(), idx.begin(), idx.end());
    }
    return out;
}

class ArgsortCases {
public:
    luminal::Graph cx;

    ArgsortCases() {
        using luminal::DType;
        add(5, 17, argsort_tricky_values(5 * 17), DType::F32, false);
        add(5, 17, argsort_tricky_values(5 * 17), DType::F32, true);
        add(3, 40, integral_values(3 * 40), DType::I32, true);
        add(3, 40, integral_values(3 * 40), DType::BF16, false);
        add(2, 1000, argsort_tricky_values(2 * 1000), DType::F32, true);
        add(4, 1, argsort_tricky_values(4), DType::F32, false);
        add_transposed(17, 5, argsort_tricky_values(17 * 5));
        add_router(70, 128, 8);
    }

    // Whether the compiled program sorts each case (no rank count left).
    void check_program(const std::string& program) const {
        INFO(program);
        std::size_t sorts = 0;
        for (std::size_t at = program.find("Argsort"); at != std::string::npos; at = program.find("Argsort", at + 1)) ++sorts;
        CHECK(sorts == cases_.size());
    }

    template <typename Runtime>
    void run_and_check(Runtime& rt) const {
        for (const Case& c : cases_) rt.set_data(c.in, c.values);
        rt.execute(cx.dyn_map());
        for (const Case& c : cases_) {
            INFO(c.name);
            const std::vector<std::int32_t> got = rt.template get<std::int32_t>(c.out);
            CHECK(got == c.want);
        }
    }

private:
    struct Case {
        std::string name;
        luminal::GraphTensor in, out;
        std::vector<float> values;
        std::vector<std::int32_t> want;
    };
    std::vector<Case> cases_;

    static std::vector<float> integral_values(std::size_t n) {
        std::vector<float> v(n);
        for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(static_cast<int>((i * 7919) % 13) - 6);
        return v;
    }

    void add(std::int64_t rows, std::int64_t n, std::vector<float> values, luminal::DType dtype, bool descending) {
        luminal::GraphTensor in = cx.tensor({rows, n});
        luminal::GraphTensor x = dtype == luminal::DType::F32 ? in : in.cast(dtype);
        std::vector<std::int32_t> want = stable_order(values, rows, n, descending);
        cases_.push_back({fmt::format("{}x{} {} {}", rows, n, luminal::name_of(dtype), descending ? "descending" : "ascending"), in,
                          x.argsort(-1, descending).output(), std::move(values), std::move(want)});
    }

    // argsort along axis 0 of [n, rows]: the rows of its transpose, read through a permuted view.
    void add_transposed(std::int64_t n, std::int64_t rows, std::vector<float> values) {
        luminal::GraphTensor in = cx.tensor({n, rows});
        std::vector<float> rows_first(values.size());
        for (std::int64_t i = 0; i < n; ++i)
            for (std::int64_t j = 0; j < rows; ++j) rows_first[static_cast<std::size_t>(j * n + i)] = values[static_cast<std::size_t>(i * rows + j)];
        cases_.push_back({"axis 0", in, in.argsort(0, true).permute({1, 0}).contiguous().output(), std::move(values),
                          stable_order(rows_first, rows, n, true)});
    }

    // A router's top k of a softmax: scores 0.05 apart, far more than f32 rounding moves them, so softmax keeps their order.
    void add_router(std::int64_t tokens, std::int64_t experts, std::int64_t k) {
        luminal::GraphTensor in = cx.tensor({tokens, experts});
        std::vector<float> values(static_cast<std::size_t>(tokens * experts));
        for (std::size_t i = 0; i < values.size(); ++i)
            values[i] = static_cast<float>((i * 37 + i / static_cast<std::size_t>(experts) * 11) % static_cast<std::size_t>(experts)) * 0.05f - 3.0f;
        const std::vector<std::int32_t> order = stable_order(values, tokens, experts, true);
        std::vector<std::int32_t> want;
        for (std::int64_t t = 0; t < tokens; ++t) want.insert(want.end(), order.begin() + t * experts, order.begin() + t * experts + k);
        cases_.push_back({"router top k", in, in.softmax(-1).topk_indexes(luminal::Expression(k), -1).output(), std::move(values),
                          std::move(want)});
    }
};

}  // namespace luminal_test
