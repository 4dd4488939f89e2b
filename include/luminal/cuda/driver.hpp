#pragma once
// The CUDA driver API, loaded from libcuda.so.1 at run time. Only the calls
// the runtime makes, declared here with the driver's C ABI, so building needs
// no CUDA headers and a machine without a GPU gets "no CUDA device" as a
// luminal::Error when (and only when) it asks for the CUDA runtime.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "luminal/cuda/shared_library.hpp"

namespace luminal::cuda {

using CuResult = int;
using CuDevice = int;
using CuDevicePtr = unsigned long long;
using CuContext = struct CuContextOpaque*;
using CuModule = struct CuModuleOpaque*;
using CuFunction = struct CuFunctionOpaque*;
using CuStream = struct CuStreamOpaque*;
using CuEvent = struct CuEventOpaque*;
using CuGraph = struct CuGraphOpaque*;
using CuGraphExec = struct CuGraphExecOpaque*;

inline constexpr int kAttributeMultiprocessorCount = 16;
inline constexpr int kAttributeComputeMajor = 75;
inline constexpr int kAttributeComputeMinor = 76;
inline constexpr int kCaptureModeThreadLocal = 1;
inline constexpr unsigned kStreamNonBlocking = 1;
inline constexpr int kFuncAttributeMaxDynamicSharedBytes = 8;

struct DriverApi {
    CuResult (*init)(unsigned);
    CuResult (*device_count)(int*);
    CuResult (*device_get)(CuDevice*, int);
    CuResult (*device_name)(char*, int, CuDevice);
    CuResult (*device_attribute)(int*, int, CuDevice);
    CuResult (*primary_context_retain)(CuContext*, CuDevice);
    CuResult (*context_set_current)(CuContext);
    CuResult (*module_load_data)(CuModule*, const void*);
    CuResult (*module_get_function)(CuFunction*, CuModule, const char*);
    CuResult (*module_unload)(CuModule);
    CuResult (*launch_kernel)(CuFunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CuStream,
                              void**, void**);
    CuResult (*mem_alloc)(CuDevicePtr*, std::size_t);
    CuResult (*mem_free)(CuDevicePtr);
    CuResult (*mem_get_info)(std::size_t*, std::size_t*);
    CuResult (*memcpy_htod_async)(CuDevicePtr, const void*, std::size_t, CuStream);
    CuResult (*memcpy_dtoh_async)(void*, CuDevicePtr, std::size_t, CuStream);
    CuResult (*memcpy_dtod_async)(CuDevicePtr, CuDevicePtr, std::size_t, CuStream);
    CuResult (*memset_d8_async)(CuDevicePtr, unsigned char, std::size_t, CuStream);
    CuResult (*stream_create)(CuStream*, unsigned);
    CuResult (*stream_synchronize)(CuStream);
    CuResult (*stream_destroy)(CuStream);
    CuResult (*event_create)(CuEvent*, unsigned);
    CuResult (*event_record)(CuEvent, CuStream);
    CuResult (*event_synchronize)(CuEvent);
    CuResult (*event_elapsed)(float*, CuEvent, CuEvent);
    CuResult (*event_destroy)(CuEvent);
    CuResult (*stream_begin_capture)(CuStream, int);
    CuResult (*stream_end_capture)(CuStream, CuGraph*);
    CuResult (*graph_instantiate)(CuGraphExec*, CuGraph, unsigned long long);
    CuResult (*graph_launch)(CuGraphExec, CuStream);
    CuResult (*graph_exec_destroy)(CuGraphExec);
    CuResult (*graph_destroy)(CuGraph);
    CuResult (*error_string)(CuResult, const char**);
    CuResult (*mem_host_alloc)(void**, std::size_t, unsigned);
    CuResult (*mem_free_host)(void*);
    CuResult (*func_set_attribute)(CuFunction, int, int);
};

// The process's driver and device 0, with its primary context current on the calling thread.
class Driver {
public:
    static Driver& get() {
        static Driver driver;
        return driver;
    }

    const DriverApi& api() const { return api_; }
    CuDevice device() const { return device_; }
    const std::string& device_name() const { return name_; }
    int compute_capability() const { return arch_; }  // e.g. 90
    int multiprocessors() const { return multiprocessors_; }

    // Throws luminal::Error naming the call and the driver's message unless
    // `result` is success; FatalError for the faults that poison the context
    // (illegal address, launch failure, ...), after which nothing runs again.
    void check_call(CuResult result, std::string_view call) const {
        if (result == 0) return;
        const char* message = nullptr;
        if (api_.error_string) api_.error_string(result, &message);
        std::string text = fmt::format("{} failed: {} (error {})", call, message ? message : "unknown error", result);
        const bool sticky = (result >= 700 && result <= 720) || result == 999;
        if (!sticky) throw Error("cuda", std::move(text));
        std::lock_guard lock(fault_mutex_);
        if (fault_.empty()) fault_ = text;
        throw FatalError("cuda", std::move(text));
    }
    // FatalError once a fault has poisoned the context: the device cannot run anything again in this process.
    void check_usable() const {
        std::lock_guard lock(fault_mutex_);
        if (!fault_.empty())
            throw FatalError("cuda", fmt::format("the device faulted earlier ({}); its context cannot run anything again, "
                                                 "so this process cannot use the GPU any more",
                                                 fault_));
    }
    // Free and total device memory, in bytes.
    std::pair<std::size_t, std::size_t> memory() const {
        std::size_t free = 0, total = 0;
        check_call(api_.mem_get_info(&free, &total), "cuMemGetInfo");
        return {free, total};
    }
    void make_current() const { check_call(api_.context_set_current(context_), "cuCtxSetCurrent"); }

private:
    Driver() {
        try {
            lib_ = SharedLibrary::open({"libcuda.so.1", "libcuda.so"}, "the CUDA driver");
        } catch (const Error& e) {
            throw Error("cuda", fmt::format("no CUDA device: {}", std::string(e.what()).substr(e.where().size() + 2)));
        }
        resolve();
        const CuResult init = api_.init(0);
        int count = 0;
        if (init != 0 || api_.device_count(&count) != 0 || count == 0)
            throw Error("cuda", fmt::format("no CUDA device: the driver ({}) reports {}", lib_->name(),
                                            init != 0 ? fmt::format("cuInit error {}", init) : std::string("no devices")));
        check_call(api_.device_get(&device_, 0), "cuDeviceGet");
        char name[256] = {};
        check_call(api_.device_name(name, sizeof name, device_), "cuDeviceGetName");
        name_ = name;
        int major = 0, minor = 0;
        check_call(api_.device_attribute(&major, kAttributeComputeMajor, device_), "cuDeviceGetAttribute");
        check_call(api_.device_attribute(&minor, kAttributeComputeMinor, device_), "cuDeviceGetAttribute");
        check_call(api_.device_attribute(&multiprocessors_, kAttributeMultiprocessorCount, device_), "cuDeviceGetAttribute");
        arch_ = major * 10 + minor;
        check_call(api_.primary_context_retain(&context_, device_), "cuDevicePrimaryCtxRetain");
        make_current();
    }

    template <typename F>
    void bind(F& slot, const char* name) {
        slot = lib_->symbol<F>(name);
    }
    template <typename F>
    void bind_either(F& slot, const char* newer, const char* older) {
        try {
            slot = lib_->symbol<F>(newer);
        } catch (const Error&) {
            slot = lib_->symbol<F>(older);
        }
    }

    void resolve() {
        bind(api_.error_string, "cuGetErrorString");
        bind(api_.init, "cuInit");
        bind(api_.device_count, "cuDeviceGetCount");
        bind(api_.device_get, "cuDeviceGet");
        bind(api_.device_name, "cuDeviceGetName");
        bind(api_.device_attribute, "cuDeviceGetAttribute");
        bind(api_.primary_context_retain, "cuDevicePrimaryCtxRetain");
        bind(api_.context_set_current, "cuCtxSetCurrent");
        bind(api_.module_load_data, "cuModuleLoadData");
        bind(api_.module_get_function, "cuModuleGetFunction");
        bind(api_.module_unload, "cuModuleUnload");
        bind(api_.launch_kernel, "cuLaunchKernel");
        bind(api_.mem_alloc, "cuMemAlloc_v2");
        bind(api_.mem_free, "cuMemFree_v2");
        bind(api_.mem_get_info, "cuMemGetInfo_v2");
        bind(api_.memcpy_htod_async, "cuMemcpyHtoDAsync_v2");
        bind(api_.memcpy_dtoh_async, "cuMemcpyDtoHAsync_v2");
        bind(api_.memcpy_dtod_async, "cuMemcpyDtoDAsync_v2");
        bind(api_.memset_d8_async, "cuMemsetD8Async");
        bind(api_.stream_create, "cuStreamCreate");
        bind(api_.stream_synchronize, "cuStreamSynchronize");
        bind(api_.stream_destroy, "cuStreamDestroy_v2");
        bind(api_.event_create, "cuEventCreate");
        bind(api_.event_record, "cuEventRecord");
        bind(api_.event_synchronize, "cuEventSynchronize");
        bind_either(api_.event_elapsed, "cuEventElapsedTime_v2", "cuEventElapsedTime");
        bind(api_.event_destroy, "cuEventDestroy_v2");
        bind(api_.stream_begin_capture, "cuStreamBeginCapture_v2");
        bind(api_.stream_end_capture, "cuStreamEndCapture");
        bind(api_.graph_instantiate, "cuGraphInstantiateWithFlags");
        bind(api_.graph_launch, "cuGraphLaunch");
        bind(api_.graph_exec_destroy, "cuGraphExecDestroy");
        bind(api_.graph_destroy, "cuGraphDestroy");
        bind(api_.mem_host_alloc, "cuMemHostAlloc");
        bind(api_.mem_free_host, "cuMemFreeHost");
        bind(api_.func_set_attribute, "cuFuncSetAttribute");
    }

    std::unique_ptr<SharedLibrary> lib_;
    DriverApi api_{};
    CuDevice device_ = 0;
    CuContext context_ = nullptr;
    std::string name_;
    int arch_ = 0, multiprocessors_ = 0;
    mutable std::mutex fault_mutex_;
    mutable std::string fault_;  // the first sticky fault
};

// Whether a CUDA device can be used here (the driver loads and reports one).
inline bool device_available() {
    try {
        Driver::get();
        return true;
    } catch (const Error&) {
        return false;
    }
}

}  // namespace luminal::cuda
