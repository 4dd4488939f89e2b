// Argsort on the CpuRuntime: the rule finds ops::argsort's rank count (and
// topk_indexes, its first k) and the CPU sorts each row; the reference
// runtime runs the same graph as the rank count (tests/argsort_cases.hpp).
#include <doctest/doctest.h>

#include <luminal/luminal.hpp>

#include "../argsort_cases.hpp"

TEST_CASE("argsort and topk_indexes on the CPU are a sort of each row; the reference runtime's rank count agrees") {
    luminal_test::ArgsortCases cases;
    auto [rt, report] = luminal::compile_with_report(cases.cx, luminal::CpuRuntime{});
    cases.check_program(report.program.to_string());
    cases.run_and_check(rt);
    auto reference = cases.cx.compile(luminal::ReferenceRuntime{});
    cases.run_and_check(reference);
}
