#pragma once
// The CUDA backend as the suites run it without a GPU: cuda::HostEmulator
// (the plan's kernels interpreted on the host, checked against each suite's
// independent reference), and every kernel source the plan holds compiled with
// NVRTC for sm_90. A suite prints how many distinct kernels it compiled when
// it exits. Where the CUDA Toolkit was found at configure time NVRTC must load;
// elsewhere compiling is skipped, and the summary says so.
#include <doctest/doctest.h>

#include <cerrno>
#include <cstdio>
#include <luminal/cuda.hpp>
#include <set>
#include <string>

namespace luminal_test {

// Whether this build must compile generated kernels with NVRTC (the Toolkit was found), or may where NVRTC loads.
inline bool nvrtc_expected() {
#ifdef LUMINAL_HAS_CUDA_TOOLKIT
    return true;
#else
    return luminal::cuda::Nvrtc::available();
#endif
}

class NvrtcCoverage {
public:
    static NvrtcCoverage& get() {
        static NvrtcCoverage coverage;
        return coverage;
    }
    void compile(const luminal::cuda::Plan& plan) {
        if (!enabled_) return;
        for (const std::string& source : luminal::cuda::plan_sources(plan))
            if (sources_.insert(source).second) luminal::cuda::Nvrtc::get().compile(source, 90);
        for (const std::string& source : luminal::cuda::group_sources(plan))
            if (sources_.insert(source).second) luminal::cuda::Nvrtc::get().compile(source, 90);
    }
    ~NvrtcCoverage() {
        if (enabled_)
            std::printf("%s: %zu distinct generated kernels compiled with NVRTC for sm_90\n", program_invocation_short_name,
                        sources_.size());
        else
            std::printf("%s: NVRTC not available, generated kernels were not compiled (interpreted only)\n",
                        program_invocation_short_name);
    }

private:
    NvrtcCoverage() {
#ifdef LUMINAL_HAS_CUDA_TOOLKIT
        enabled_ = true;  // and Nvrtc::get() throws if it cannot load
#else
        enabled_ = luminal::cuda::Nvrtc::available();
#endif
    }
    bool enabled_ = false;
    std::set<std::string> sources_;
};

// HostEmulator whose loads also compile the program's kernels.
struct CompilingEmulator : luminal::cuda::HostEmulator {
    void load(const luminal::Program& program, luminal::InputBinding binding = luminal::InputBinding::Drop) {
        luminal::cuda::HostEmulator::load(program, binding);
        NvrtcCoverage::get().compile(plan());
    }
};

}  // namespace luminal_test

static_assert(luminal::Runtime<luminal_test::CompilingEmulator>);
