#pragma once
// Loaded kernels, process-wide: a generated source is compiled (Nvrtc, which
// caches cubins) and loaded into the device's primary context once, and every
// runtime and search candidate that prints the same source shares it.
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "luminal/cuda/driver.hpp"
#include "luminal/cuda/nvrtc.hpp"

namespace luminal::cuda {

class KernelModules {
public:
    static KernelModules& get() {
        static KernelModules modules;
        return modules;
    }

    // `kernel` names it in errors ("node 12 (cuda.Row)").
    CuFunction function(const std::string& source, std::string_view entry, int arch, std::string_view kernel) {
        std::lock_guard lock(mutex_);
        auto key = std::make_tuple(source, std::string(entry), arch);
        if (auto it = functions_.find(key); it != functions_.end()) return it->second;
        const Driver& driver = Driver::get();
        CuModule& module = modules_[{source, arch}];
        if (!module) {
            auto cubin = Nvrtc::get().compile(source, arch, kernel);
            driver.check_call(driver.api().module_load_data(&module, cubin->data()), "cuModuleLoadData");
        }
        CuFunction f = nullptr;
        driver.check_call(driver.api().module_get_function(&f, module, std::string(entry).c_str()), "cuModuleGetFunction");
        functions_.emplace(std::move(key), f);
        return f;
    }

private:
    std::mutex mutex_;
    std::map<std::pair<std::string, int>, CuModule> modules_;
    std::map<std::tuple<std::string, std::string, int>, CuFunction> functions_;
};

}  // namespace luminal::cuda
