#pragma once
// The CUDA plan of a program at given dims (cuda::plan_report: every launch of one execution
// with its modelled time, without a GPU) as the JSON text Python reads: the totals and, per
// launch, its kernel, op, bytes and modelled microseconds. Shared by a compiled graph's plan
// and nn::Session's plan of a model, so the two are priced alike.
#include <luminal/cuda/plan_report.hpp>

#include <string>

namespace luminal_python {

inline std::string cuda_plan_json(const luminal::Program& program, const luminal::DynMap& dims) {
    luminal::cuda::PlanReportOptions options;
    options.registers = luminal::cuda::Nvrtc::available();  // kernels priced by their registers where NVRTC can build them
    const luminal::cuda::PlanReport report = luminal::cuda::plan_report(program.for_dims(dims), dims, options);
    luminal::io::Json launches = luminal::io::Json::array();
    for (const luminal::cuda::PlanReportRow& row : report.rows)
        launches.push_back({{"kernel", row.kernel}, {"op", row.op}, {"bytes", row.work.bytes()},
                            {"us", row.estimate.seconds * 1e6}});
    luminal::io::Json out = report.totals();
    out["rows"] = std::move(launches);
    return out.dump();
}

}  // namespace luminal_python
