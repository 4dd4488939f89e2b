// Argsort on CUDA (cuda/argsort_kernel.hpp): the bitonic sort of each row in
// shared memory, on the host emulator (and compiled by NVRTC) and through its
// printed source, against orders computed with std::stable_sort
// (tests/argsort_cases.hpp).
#include <doctest/doctest.h>

#include <luminal/cuda.hpp>
#include <luminal/luminal.hpp>

#include "../argsort_cases.hpp"
#include "nvrtc_coverage.hpp"
#include "printed_source_runner.hpp"

namespace {

template <typename Emulator>
void check_argsort_cases() {
    luminal_test::ArgsortCases cases;
    luminal::CompileOptions options;
    options.verbosity = 0;
    auto [rt, report] = luminal::compile_with_report(cases.cx, Emulator{}, options);
    cases.check_program(report.program.to_string());
    luminal_test::NvrtcCoverage::get().compile(rt.plan());
    cases.run_and_check(rt);
}

}  // namespace

TEST_CASE("argsort and topk_indexes on CUDA: a bitonic sort per row, on the host emulator and through the printed source") {
    check_argsort_cases<luminal_test::CompilingEmulator>();
    check_argsort_cases<luminal_test::PrintedSourceEmulator>();
}
