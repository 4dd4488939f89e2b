#pragma once
// Compiled: a graph compiled for one of the runtimes, with inputs bound from host arrays
// (numpy, or anything with DLPack) and outputs read back; and the dtype conversions between
// luminal and DLPack it needs. Shared by the graph API (graph_bindings.cpp) and the one-call
// step of a translated torch graph (torch_call.cpp).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <luminal/cuda.hpp>
#include <luminal/luminal.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "bindings.hpp"
#include "plan_json.hpp"

namespace luminal_python {

namespace nb = nanobind;
using luminal::DType;
using luminal::Expression;
using luminal::Graph;
using luminal::GraphTensor;

inline luminal::DynMap to_dyn_map(const luminal::DynMap& base, const std::optional<std::map<std::string, std::int64_t>>& dims) {
    luminal::DynMap out = base;
    if (dims)
        for (auto& [name, value] : *dims) {
            luminal::check(name.size() == 1 && luminal::DynMap::valid_name(name[0]), "dims",
                           "a dynamic dimension is named by one letter, got '{}'", name);
            out.set(name[0], value);
        }
    return out;
}

// ---- dtypes between luminal and numpy / DLPack ----

inline nb::dlpack::dtype dlpack_of(DType t) {
    switch (t) {
        case DType::F32: return nb::dtype<float>();
        case DType::F16: return {static_cast<std::uint8_t>(nb::dlpack::dtype_code::Float), 16, 1};
        case DType::BF16: return {static_cast<std::uint8_t>(nb::dlpack::dtype_code::Bfloat), 16, 1};
        case DType::I32: return nb::dtype<std::int32_t>();
        case DType::I64: return nb::dtype<std::int64_t>();
        case DType::U8: return nb::dtype<std::uint8_t>();
        case DType::Bool: return nb::dtype<bool>();
    }
    return nb::dtype<float>();
}

inline std::string dlpack_name(nb::dlpack::dtype d) {
    const char* kind = "?";
    switch (static_cast<nb::dlpack::dtype_code>(d.code)) {
        case nb::dlpack::dtype_code::Int: kind = "int"; break;
        case nb::dlpack::dtype_code::UInt: kind = "uint"; break;
        case nb::dlpack::dtype_code::Float: kind = "float"; break;
        case nb::dlpack::dtype_code::Bfloat: kind = "bfloat"; break;
        case nb::dlpack::dtype_code::Bool: kind = "bool"; break;
        default: break;
    }
    return fmt::format("{}{}", kind, d.bits);
}

// What an array holds, converted to a C++ vector for set_data when its dtype
// differs from the input's (float64 numpy arrays into an f32 input, say).
template <typename T>
std::vector<T> values_as(const std::byte* data, nb::dlpack::dtype d, std::size_t n) {
    std::vector<T> out(n);
    auto convert = [&]<typename S>(const S* src) { for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<T>(src[i]); };
    using Code = nb::dlpack::dtype_code;
    auto code = static_cast<Code>(d.code);
    if (code == Code::Float && d.bits == 64) convert(reinterpret_cast<const double*>(data));
    else if (code == Code::Float && d.bits == 32) convert(reinterpret_cast<const float*>(data));
    else if (code == Code::Float && d.bits == 16)
        for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<T>(luminal::f16_bits_to_f32(reinterpret_cast<const std::uint16_t*>(data)[i]));
    else if (code == Code::Bfloat && d.bits == 16)
        for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<T>(luminal::bf16_bits_to_f32(reinterpret_cast<const std::uint16_t*>(data)[i]));
    else if (code == Code::Int && d.bits == 64) convert(reinterpret_cast<const std::int64_t*>(data));
    else if (code == Code::Int && d.bits == 32) convert(reinterpret_cast<const std::int32_t*>(data));
    else if (code == Code::Int && d.bits == 16) convert(reinterpret_cast<const std::int16_t*>(data));
    else if (code == Code::Int && d.bits == 8) convert(reinterpret_cast<const std::int8_t*>(data));
    else if ((code == Code::UInt || code == Code::Bool) && d.bits == 8) convert(reinterpret_cast<const std::uint8_t*>(data));
    else throw luminal::Error("set_data", fmt::format("arrays of dtype {} are not supported", dlpack_name(d)));
    return out;
}

using HostArray = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;

// An output's values as raw elements of its dtype, owned by a capsule: what an array of any
// framework wraps without a copy.
struct OwnedValues {
    void* data = nullptr;
    nb::capsule owner;
    nb::dlpack::dtype dtype;
    std::vector<std::size_t> shape;
};

template <typename T>
OwnedValues owned(std::vector<T>&& values, nb::dlpack::dtype dtype, std::vector<std::size_t> shape) {
    auto* held = new std::vector<T>(std::move(values));
    nb::capsule owner(held, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
    return OwnedValues{held->data(), std::move(owner), dtype, std::move(shape)};
}

// The values as an array of `Framework` (nb::numpy, nb::pytorch) sharing their memory.
template <typename Framework>
nb::object array_of(const OwnedValues& v) {
    return nb::cast(nb::ndarray<Framework>(v.data, v.shape.size(), v.shape.data(), v.owner, nullptr, v.dtype));
}

// ---- a compiled graph on one of the runtimes ----

// cuda::HostEmulator is the CUDA backend's program run on the host: what a plan without a device compiles for.
using AnyRuntime =
    std::variant<luminal::ReferenceRuntime, luminal::CpuRuntime, luminal::cuda::CudaRuntime, luminal::cuda::HostEmulator>;

struct CompileSettings {
    std::size_t search = 1;
    double search_seconds = 0;
    std::uint64_t seed = 0;
    int verbosity = 0;
    std::string dump_dir;
};

class Compiled {
public:
    Compiled(nb::object graph_owner, AnyRuntime runtime, luminal::CompileReport report, double compile_ms)
        : graph_owner_(std::move(graph_owner)), graph_(nb::cast<Graph*>(graph_owner_)), runtime_(std::move(runtime)),
          compile_ms_(compile_ms), candidates_(report.candidates), program_ops_(program_ops(report.program)),
          program_(std::move(report.program)) {
        for (const auto& node : program_.nodes)
            if (node.spec.kind == luminal::symbol_of(luminal::OpKind::Input)) inputs_.insert(node.spec.hlir);
        for (auto [output, input] : graph_->carried()) carried_.insert(input);
    }

    // Whether `t` is an input the program reads (an unused input is pruned).
    bool reads(const GraphTensor& t) const { return inputs_.count(t.id()) != 0; }

    // Binds an array to an input. Same dtype and C-contiguous on the CPU
    // runtime: read in place (the array is kept alive, and later writes to
    // it are seen); otherwise copied, converting the dtype if needed. Carried
    // state is copied too, except a writable array for an input the program
    // updates in place (updates_in_place), whose new rows are then written into
    // the array itself. Returns whether the array is used in place.
    bool set_data(const GraphTensor& t, nb::handle array_like) {
        check_graph(t, "set_data");
        luminal::check(graph_->node(t.id()).op.kind == luminal::OpKind::Input, "set_data", "node {} ({}) is not an input",
                       t.id(), luminal::name_of(graph_->node(t.id()).op.kind));
        if (!reads(t)) return false;  // the compiled program does not read it
        HostArray array = nb::cast<HostArray>(array_like);
        return bind(t, array_like, array.data(), array.size(), array.dtype(), writable(array_like));
    }

    // set_data's work on an array already read: `n` values of `dtype` at `data`, kept alive by
    // `owner` while the runtime reads them in place.
    bool bind(const GraphTensor& t, nb::handle owner, const void* data_ptr, std::size_t n, nb::dlpack::dtype dtype,
              bool is_writable) {
        const luminal::Node& node = graph_->node(t.id());
        if (auto expected = static_numel(node.shape))
            luminal::check(static_cast<std::int64_t>(n) == *expected, "set_data",
                           "input '{}' has shape {} ({} values) but the array has {}", node.op.label,
                           luminal::to_string(node.shape), *expected, n);
        const auto* data = static_cast<const std::byte*>(data_ptr);
        if (dtype == dlpack_of(node.dtype)) {
            std::span<const std::byte> bytes(data, n * luminal::size_of(node.dtype));
            auto* cpu = std::get_if<luminal::CpuRuntime>(&runtime_);
            const bool carried = carried_.count(t.id()) != 0;
            if (cpu && (!carried || (cpu->updates_input_in_place(t) && is_writable))) {
                auto* keep = new nb::object(nb::borrow(owner));
                std::shared_ptr<const void> keeper(keep, [](const void* p) {
                    nb::gil_scoped_acquire gil;
                    delete static_cast<const nb::object*>(p);
                });
                cpu->borrow_bytes(t, bytes, std::move(keeper));
                return true;
            }
            std::visit([&](auto& rt) { rt.set_bytes(t, bytes); }, runtime_);
            return false;
        }
        if (luminal::is_float(node.dtype)) {
            auto values = values_as<float>(data, dtype, n);
            std::visit([&](auto& rt) { rt.set_data(t, values); }, runtime_);
        } else {
            auto values = values_as<std::int64_t>(data, dtype, n);
            std::visit([&](auto& rt) { rt.set_data(t, values); }, runtime_);
        }
        return false;
    }

    // Whether the carried `output` is computed in the memory of its input
    // (CpuRuntime::updates_in_place: a Scatter into the input, the rows written).
    bool updates_in_place(const GraphTensor& output) const {
        check_graph(output, "updates_in_place");
        const auto* cpu = std::get_if<luminal::CpuRuntime>(&runtime_);
        return cpu && cpu->updates_in_place(output);
    }

    void execute(const std::optional<std::map<std::string, std::int64_t>>& dims) {
        execute_at(to_dyn_map(graph_->dyn_map(), dims));
    }

    void execute_at(luminal::DynMap map) {
        {
            nb::gil_scoped_release release;
            std::visit([&](auto& rt) { rt.execute(map); }, runtime_);
        }
        last_dims_ = std::move(map);
    }

    double time_execution(const std::optional<std::map<std::string, std::int64_t>>& dims, std::size_t reps) {
        luminal::DynMap map = to_dyn_map(graph_->dyn_map(), dims);
        nb::gil_scoped_release release;
        return std::visit([&](auto& rt) { return rt.time_execution(map, reps); }, runtime_);
    }

    // An output as numpy: f32/f16/i32/i64/u8/bool as themselves, bf16 as f32
    // (numpy has no bf16), or with raw=True every 16-bit float as its uint16
    // bits (the torch front end views them as torch.bfloat16 / float16).
    nb::object get(const GraphTensor& t, bool raw) const {
        const DType dtype = output_dtype(t);
        if (dtype == DType::BF16 && !raw) {
            std::vector<float> values = std::visit([&](const auto& rt) { return rt.template get<float>(t); }, runtime_);
            return array_of<nb::numpy>(owned(std::move(values), nb::dtype<float>(), concrete_shape(t)));
        }
        // numpy reads 16-bit floats and bools through their bits' integer dtype, viewed back.
        OwnedValues v = values(t);
        if (dtype == DType::F16 || dtype == DType::BF16) {
            v.dtype = nb::dtype<std::uint16_t>();
            return raw ? array_of<nb::numpy>(v) : array_of<nb::numpy>(v).attr("view")("float16");
        }
        if (dtype == DType::Bool) {
            v.dtype = nb::dtype<std::uint8_t>();
            return array_of<nb::numpy>(v).attr("view")("bool");
        }
        return array_of<nb::numpy>(v);
    }

    // An output's values as elements of its own dtype (16-bit floats as their bits).
    OwnedValues values(const GraphTensor& t) const {
        check_graph(t, "get");
        std::vector<std::size_t> shape = concrete_shape(t);
        const DType dtype = output_dtype(t);
        return std::visit([&](const auto& rt) -> OwnedValues {
            switch (dtype) {
                case DType::F32: return owned(rt.template get<float>(t), dlpack_of(dtype), std::move(shape));
                case DType::F16:
                case DType::BF16: {
                    std::vector<float> floats = rt.template get<float>(t);
                    std::vector<std::uint16_t> bits(floats.size());
                    for (std::size_t i = 0; i < floats.size(); ++i)
                        bits[i] = dtype == DType::BF16 ? luminal::f32_to_bf16_bits(floats[i]) : luminal::f32_to_f16_bits(floats[i]);
                    return owned(std::move(bits), dlpack_of(dtype), std::move(shape));
                }
                case DType::I32: return owned(rt.template get<std::int32_t>(t), dlpack_of(dtype), std::move(shape));
                case DType::I64: return owned(rt.template get<std::int64_t>(t), dlpack_of(dtype), std::move(shape));
                case DType::U8:
                case DType::Bool: return owned(rt.template get<std::uint8_t>(t), dlpack_of(dtype), std::move(shape));
            }
            throw luminal::Error("get", "unknown dtype");
        }, runtime_);
    }

    const Graph& graph() const { return *graph_; }
    bool is_carried(const GraphTensor& input) const { return carried_.count(input.id()) != 0; }

    std::string runtime_name() const {
        static constexpr const char* names[] = {"reference", "cpu", "cuda", "cuda-emulator"};
        return names[runtime_.index()];
    }
    double compile_ms() const { return compile_ms_; }
    std::size_t candidates() const { return candidates_; }
    const std::vector<std::pair<std::string, std::string>>& ops() const { return program_ops_; }

    // The CUDA plan of one execution at `dims` (cuda::plan_report) as JSON: the program
    // compiled for "cuda" or "cuda-emulator" priced launch by launch, no device needed.
    std::string cuda_plan(const std::optional<std::map<std::string, std::int64_t>>& dims) const {
        luminal::check(runtime_.index() >= 2, "cuda_plan", "the program was compiled for '{}': a CUDA plan needs "
                       "runtime 'cuda' or 'cuda-emulator'", runtime_name());
        const luminal::DynMap map = to_dyn_map(graph_->dyn_map(), dims);
        nb::gil_scoped_release release;
        return cuda_plan_json(program_, map);
    }

private:
    void check_graph(const GraphTensor& t, const char* where) const {
        luminal::check(&t.graph() == graph_, where, "tensor (node {}) belongs to another graph than the compiled one", t.id());
    }
    // A C-contiguous host array that may be written (a torch tensor; not a read-only numpy view).
    static bool writable(nb::handle array_like) {
        nb::ndarray<nb::c_contig, nb::device::cpu> array;
        return nb::try_cast(array_like, array, /*convert=*/false);
    }
    DType output_dtype(const GraphTensor& t) const {
        return graph_->node(graph_->output_of(t.id()).value_or(t.id())).dtype;
    }
    static std::optional<std::int64_t> static_numel(const luminal::Shape& shape) {
        std::int64_t n = 1;
        for (const Expression& d : shape) {
            if (!d.is_constant()) return std::nullopt;
            n *= d.constant_value();
        }
        return n;
    }
    std::vector<std::size_t> concrete_shape(const GraphTensor& t) const {
        std::vector<std::size_t> shape;
        for (const Expression& d : t.shape()) shape.push_back(static_cast<std::size_t>(d.eval(last_dims_)));
        return shape;
    }

    nb::object graph_owner_;
    Graph* graph_;
    AnyRuntime runtime_;
    double compile_ms_;
    std::size_t candidates_;
    std::vector<std::pair<std::string, std::string>> program_ops_;
    luminal::Program program_;
    std::set<luminal::NodeId> inputs_;
    std::set<luminal::NodeId> carried_;
    luminal::DynMap last_dims_;
};

}  // namespace luminal_python
