#pragma once
// A CUDA library opened at run time (dlopen), so a program built with CUDA
// support starts on a machine without one and says plainly what is missing
// only when asked for it. Searched in the loader's path, then in the
// toolkit's library folders: $CUDA_HOME/lib64, $CUDA_PATH/lib64, the folder
// the build found (LUMINAL_CUDA_LIBRARY_DIR), /usr/local/cuda/lib64.
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "luminal/core/error.hpp"

namespace luminal::cuda {

class SharedLibrary {
public:
    SharedLibrary() = default;
    SharedLibrary(const SharedLibrary&) = delete;
    SharedLibrary& operator=(const SharedLibrary&) = delete;
    // Never unloaded: the CUDA libraries are process-wide (contexts, modules and
    // NVRTC's runtime outlive any one user), and unloading at exit would orphan
    // their static allocations.
    ~SharedLibrary() = default;

    // The first of `names` that opens, or an Error "<what> is not available" listing where it looked.
    static std::unique_ptr<SharedLibrary> open(const std::vector<std::string>& names, const std::string& what) {
        std::vector<std::string> folders{""};
        auto add = [&](std::string folder) {
            if (std::find(folders.begin(), folders.end(), folder) == folders.end()) folders.push_back(std::move(folder));
        };
        for (const char* env : {"CUDA_HOME", "CUDA_PATH"})
            if (const char* v = std::getenv(env)) add(std::string(v) + "/lib64/");
#ifdef LUMINAL_CUDA_LIBRARY_DIR
        add(std::string(LUMINAL_CUDA_LIBRARY_DIR) + "/");
#endif
        add("/usr/local/cuda/lib64/");
        std::string tried;
        for (const std::string& folder : folders)
            for (const std::string& name : names) {
                const std::string path = folder + name;
                if (void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
                    std::unique_ptr<SharedLibrary> lib(new SharedLibrary);
                    lib->handle_ = h;
                    lib->name_ = path;
                    return lib;
                }
                tried += (tried.empty() ? "" : ", ") + path;
            }
        throw Error("cuda", fmt::format("{} is not available (tried {})", what, tried));
    }

    template <typename F>
    F symbol(const char* name) const {
        void* p = dlsym(handle_, name);
        check(p != nullptr, "cuda", "{} has no symbol {}", name_, name);
        return reinterpret_cast<F>(p);
    }
    const std::string& name() const { return name_; }

private:
    void* handle_ = nullptr;
    std::string name_;
};

}  // namespace luminal::cuda
