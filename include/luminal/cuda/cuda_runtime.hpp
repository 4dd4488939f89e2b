#pragma once
// CudaRuntime: runs a program on the GPU. Generated kernels are compiled with
// NVRTC for the device's architecture (cached in memory and on disk), Matmuls
// the rules gave to cuBLASLt run there, intermediate results live in one
// arena placed by liveness, each carried Scatter (a KV cache write) writes
// into its input's buffer. A program's specializations (a decode step's
// program for s = 1) are loaded beside it over the same input buffers, and
// each execution runs the one its dims match.
//
// A step costs the host little: memory and grids are planned for the dims
// rounded up to powers of two (kernels stride over any grid), so the launch
// list is built once per such bucket and replayed as one captured CUDA graph;
// the dims live in device memory and only the slots that changed are
// uploaded; small inputs go up and small outputs (a sampled token) come back
// through pinned memory inside the step's one synchronisation, with the fault
// code. execute() returns when the outputs are ready and reports a kernel's
// fault (a gather index out of range, say) as an Error naming the node; a
// fault that poisons the context is a FatalError naming the last kernel
// enqueued (LUMINAL_CUDA_SYNC=1 synchronises after every launch to name the
// one that faulted), and the runtime refuses to run after it. Constructing
// one without a usable device is an Error starting "no CUDA device".
#include <array>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <vector>

#include "luminal/cuda/arena_layout.hpp"
#include "luminal/cuda/cublaslt.hpp"
#include "luminal/cuda/cuda_rules.hpp"
#include "luminal/cuda/device_memory.hpp"
#include "luminal/cuda/device_model.hpp"
#include "luminal/cuda/driver.hpp"
#include "luminal/cuda/kernel_modules.hpp"
#include "luminal/cuda/launch_groups.hpp"
#include "luminal/cuda/launch_plan.hpp"
#include "luminal/cuda/step_transfers.hpp"
#include "luminal/runtime/available_memory.hpp"
#include "luminal/runtime/host_buffer_io.hpp"
#include "luminal/runtime/runtime.hpp"

namespace luminal::cuda {

class CudaRuntime {
public:
    using Rules = egraph::CudaRules;
    static constexpr bool runs_specializations = true;

    explicit CudaRuntime(DeviceSpec device = {}) : driver_(&Driver::get()), device_(device) {
        driver_->check_usable();
        driver_->make_current();
        device_.multiprocessors = driver_->multiprocessors();
        const char* sync = std::getenv("LUMINAL_CUDA_SYNC");
        sync_each_launch_ = sync && *sync && std::string_view(sync) != "0";
        check_call(api().stream_create(&stream_, kStreamNonBlocking), "cuStreamCreate");
        check_call(api().event_create(&start_, 0), "cuEventCreate");
        check_call(api().event_create(&stop_, 0), "cuEventCreate");
        dims_buffer_.reserve(sizeof(DimSlots));
        fault_buffer_.reserve(4 * sizeof(std::int64_t));
        check_call(api().memset_d8_async(dims_buffer_.ptr(), 0, sizeof(DimSlots), stream_), "cuMemsetD8Async");
        check_call(api().memset_d8_async(fault_buffer_.ptr(), 0, 4 * sizeof(std::int64_t), stream_), "cuMemsetD8Async");
        check_call(api().stream_synchronize(stream_), "cuStreamSynchronize");
        step_pinned_.reserve(sizeof(DimSlots) + kFaultCodeBytes);
    }
    CudaRuntime(CudaRuntime&& o) noexcept { swap(o); }
    CudaRuntime& operator=(CudaRuntime&& o) noexcept {
        swap(o);
        return *this;
    }
    CudaRuntime(const CudaRuntime&) = delete;
    CudaRuntime& operator=(const CudaRuntime&) = delete;
    ~CudaRuntime() {
        if (!driver_) return;
        variants_.clear();
        if (start_) api().event_destroy(start_);
        if (stop_) api().event_destroy(stop_);
        if (stream_) api().stream_destroy(stream_);
    }

    CostModel cost_model() const { return device_cost_model(device_); }

    void load(const Program& program, InputBinding binding = InputBinding::Drop) {
        driver_->check_usable();
        check_call(api().stream_synchronize(stream_), "cuStreamSynchronize");
        guards_ = program.guards;
        variants_.clear();
        for (const Program& s : program.specializations) add_variant(s);
        add_variant(program);
        std::map<NodeId, Input> kept;
        if (binding == InputBinding::Keep)
            for (auto& [hlir, input] : inputs_)
                if (const NodeSpec* spec = input_spec(hlir); spec && spec->dtype == input.dtype) kept.emplace(hlir, std::move(input));
        inputs_ = std::move(kept);
        place_batched_weights();
        last_ = kNone;
        ++generation_;
    }

    void set_data(const GraphTensor& t, const std::vector<float>& values) { set_values(t, std::span(values)); }
    template <typename T>
    void set_data(const GraphTensor& t, const std::vector<T>& values) { set_values(t, std::span(values)); }
    void set_bytes(const GraphTensor& t, std::span<const std::byte> bytes) {
        const NodeSpec& spec = bound_input(t);
        bind_input(t.id(), spec, bytes, byte_input_count(spec, bytes.size(), t.id()));
    }

    void execute(const DynMap& dims) {
        guards_.check_against(dims);
        run(dims, false);
    }

    // Median device time of `reps` executions (CUDA events around each), after a warm-up.
    double time_execution(const DynMap& dims, std::size_t reps) {
        run(dims, false);
        std::vector<double> times;
        for (std::size_t i = 0; i < std::max<std::size_t>(reps, 1); ++i) times.push_back(run(dims, true));
        std::sort(times.begin(), times.end());
        return times[times.size() / 2];
    }

    // The next execution enqueues its launches one at a time, each between two
    // events (no CUDA graph), and launch_times() gives their device times in
    // launch order: what each kernel costs, beside the plan report's model of it.
    void time_next_launches() { time_next_launches_ = true; }
    struct LaunchTime {
        int node = 0;
        std::string_view kind;  // kernel, memset, copy or cuBLASLt
        double seconds = 0;
    };
    const std::vector<LaunchTime>& launch_times() const { return launch_times_; }

    std::vector<float> get_f32(const GraphTensor& t) const { return get<float>(t); }
    template <typename T>
    std::vector<T> get(const GraphTensor& t) const {
        check(last_ != kNone, "get", "output node {} has not been computed; call execute first", t.id());
        const Variant& v = variants_[last_];
        const std::uint32_t id = output_index(v.nodes, t.graph(), t.id());
        const DType dtype = v.nodes[id].spec.dtype;
        const auto count = static_cast<std::size_t>(v.numel[id]);
        if (v.prefetch_offset[id] != kNone)
            return host_buffer_values<T>(host_buffer_from_bytes(dtype, v.prefetched.data() + v.prefetch_offset[id], count));
        std::vector<std::byte> bytes(count * size_of(dtype));
        if (!bytes.empty()) {
            check_call(api().memcpy_dtoh_async(bytes.data(), data_of(v, id), bytes.size(), stream_), "cuMemcpyDtoHAsync");
            check_call(api().stream_synchronize(stream_), "cuStreamSynchronize");
            host_device_bytes_ += bytes.size();
        }
        return host_buffer_values<T>(host_buffer_from_bytes(dtype, bytes.data(), count));
    }

    bool updates_in_place(const GraphTensor& output) const {
        return std::all_of(variants_.begin(), variants_.end(), [&](const Variant& v) {
            return v.plan.nodes[output_index(v.nodes, output.graph(), output.id())].aliases_source;
        });
    }
    const std::string& device_name() const { return driver_->device_name(); }
    const DeviceSpec& device() const { return device_; }
    // The weights, caches and arena live on the device: what it has free bounds them, not the host's memory.
    std::optional<AvailableMemory> available_memory() const {
        return AvailableMemory{driver_->memory().first, "the device's free memory (cuMemGetInfo)"};
    }
    std::size_t graph_replays() const { return graph_replays_; }
    std::size_t graph_captures() const { return graph_captures_; }
    // Bytes moved between host and device since construction (weights included).
    std::size_t host_device_bytes() const { return host_device_bytes_; }

private:
    static constexpr std::size_t kNone = ~std::size_t{0};
    static constexpr std::size_t kPinnedInputBytes = 1u << 16;  // per-step inputs this small are staged in pinned memory
    static constexpr std::size_t kDefaultSharedBytes = 48u << 10;  // dynamic shared memory a kernel gets without asking

    // An input's data: its own buffer, or a place in a block it shares with the
    // other weights of a batched product (blas_batches.hpp), side by side.
    struct Input {
        DeviceBuffer buffer;
        std::shared_ptr<DeviceBuffer> block;
        std::size_t offset = 0, placed_bytes = 0;
        DType dtype = DType::F32;
        std::int64_t count = 0;
        bool bound = false;
        PinnedBuffer staging;
        bool staging_in_flight = false;
        CuDevicePtr ptr() const { return block ? block->ptr() + offset : buffer.ptr(); }
        std::size_t bytes() const { return block ? placed_bytes : buffer.bytes(); }
    };
    // One unit of work an execution enqueues, with its buffers' addresses.
    struct Launch {
        enum class Kind : std::uint8_t { Kernel, Memset, Copy, Blas } kind = Kind::Kernel;
        CuFunction function = nullptr;
        unsigned grid = 0, block = 0;
        std::size_t shared = 0;  // dynamic shared memory
        std::vector<std::uint64_t> args;  // each parameter's value (an int's in the low bytes)
        int node = 0;
        CuDevicePtr dst = 0, src = 0;
        std::size_t bytes = 0;
        BlasOperand a, b;
        std::int64_t out_stride = 0;  // Blas: elements between a batch's outputs
        DType operands = DType::F32;
        friend bool operator==(const Launch&, const Launch&) = default;
    };
    struct CapturedGraph {
        CuGraph graph = nullptr;
        CuGraphExec exec = nullptr;
        const DriverApi* api = nullptr;
        CapturedGraph() = default;
        CapturedGraph(const CapturedGraph&) = delete;
        CapturedGraph& operator=(const CapturedGraph&) = delete;
        CapturedGraph(CapturedGraph&& o) noexcept { *this = std::move(o); }
        CapturedGraph& operator=(CapturedGraph&& o) noexcept {
            std::swap(graph, o.graph);
            std::swap(exec, o.exec);
            std::swap(api, o.api);
            return *this;
        }
        ~CapturedGraph() {
            if (exec) api->graph_exec_destroy(exec);
            if (graph) api->graph_destroy(graph);
        }
    };
    // The work of one launch signature (bucket and dims-dependent choices),
    // built once, and the graph captured the second time it runs.
    struct Work {
        std::vector<Launch> launches;
        std::uint64_t generation = 0;  // of the buffer addresses it holds
        std::size_t runs = 0;
        std::optional<CapturedGraph> graph;
    };
    struct Variant {
        DynMap fixed;
        Plan plan;
        std::vector<ProgramNode> nodes;
        std::vector<std::array<CuFunction, kEntries>> functions;
        std::vector<CuFunction> group_functions;  // by plan group
        std::vector<std::uint32_t> dynamic_inputs;  // Input nodes whose shape uses a dim
        std::vector<std::uint32_t> outputs;          // Output nodes
        std::vector<std::uint32_t> choices;          // nodes whose launch depends on the exact dims
        bool exact_dims = false;                     // a cuBLASLt call takes the exact sizes
        std::vector<std::int64_t> numel, planned;
        DynMap planned_for;  // the bucket numel/planned/the arena plan are for
        std::optional<ArenaLayout> arena_plan;
        std::vector<DeviceBuffer> output_buffers;
        std::vector<DeviceBuffer> scratch;  // by node: a custom kernel's memory kept between executions
        std::vector<std::size_t> prefetch_offset;  // by node: where a small output lands in `prefetched`
        PinnedBuffer prefetched;
        std::map<std::vector<std::int64_t>, Work> work;
    };

    const DriverApi& api() const { return driver_->api(); }
    void check_call(CuResult r, std::string_view call) const { driver_->check_call(r, call); }
    std::string label(const Variant& v, std::uint32_t id) const { return fmt::format("node {} ({})", id, v.nodes[id].spec.op.name()); }

    void swap(CudaRuntime& o) noexcept {
        std::swap(driver_, o.driver_);
        std::swap(device_, o.device_);
        std::swap(stream_, o.stream_);
        std::swap(start_, o.start_);
        std::swap(stop_, o.stop_);
        std::swap(dims_buffer_, o.dims_buffer_);
        std::swap(fault_buffer_, o.fault_buffer_);
        std::swap(arena_, o.arena_);
        std::swap(step_pinned_, o.step_pinned_);
        std::swap(uploaded_dims_, o.uploaded_dims_);
        std::swap(variants_, o.variants_);
        std::swap(inputs_, o.inputs_);
        std::swap(last_, o.last_);
        std::swap(generation_, o.generation_);
        std::swap(sync_each_launch_, o.sync_each_launch_);
        std::swap(graph_replays_, o.graph_replays_);
        std::swap(graph_captures_, o.graph_captures_);
        std::swap(time_next_launches_, o.time_next_launches_);
        std::swap(launch_times_, o.launch_times_);
        std::swap(host_device_bytes_, o.host_device_bytes_);
        std::swap(raised_shared_, o.raised_shared_);
    }

    void add_variant(const Program& program) {
        const Program scheduled = schedule_for_groups(program);
        Variant v;
        v.fixed = scheduled.fixed_dims;
        v.plan = plan_program(scheduled);
        v.nodes = scheduled.nodes;
        const std::size_t n = v.nodes.size();
        v.functions.assign(n, {});
        v.numel.assign(n, 0);
        v.planned.assign(n, 0);
        v.output_buffers.resize(n);
        v.scratch.resize(n);
        v.prefetch_offset.assign(n, kNone);
        const int arch = driver_->compute_capability();
        std::size_t prefetch_bytes = 0;
        for (std::uint32_t id = 0; id < n; ++id) {
            const PlannedNode& p = v.plan.nodes[id];
            const NodeSpec& spec = v.nodes[id].spec;
            const std::string kernel = label(v, id);
            if (p.custom) v.functions[id][0] = KernelModules::get().function(p.custom->source(), p.custom->entry(), arch, kernel);
            if (p.kernel) {
                v.functions[id][0] = KernelModules::get().function(kernel_source(*p.kernel), kernel_entry(*p.kernel), arch, kernel);
                if (auto vector = vector_kernel_source(*p.kernel)) {
                    v.functions[id][3] = KernelModules::get().function(*vector, kReduceEntry, arch, kernel);
                    v.choices.push_back(id);
                }
            }
            if (p.update)
                v.functions[id][static_cast<std::size_t>(Entry::Update)] =
                    KernelModules::get().function(kernel_source(*p.update), kElementwiseEntry, arch, kernel);
            if (p.scatter) {
                const std::string source = kernel_source(*p.scatter);
                v.functions[id][1] = KernelModules::get().function(source, kScatterClaimEntry, arch, kernel);
                v.functions[id][2] = KernelModules::get().function(source, kScatterWriteEntry, arch, kernel);
            }
            if (p.role == PlannedNode::Role::HostOp) {
                check(spec.payload_as<BlasMatmulOp>() != nullptr, "CudaRuntime::load",
                      "node {}: cannot run op '{}' on CUDA (no kernel and no host implementation)", id, spec.op.name());
                v.choices.push_back(id);
                v.exact_dims = true;
            }
            if (p.role == PlannedNode::Role::Input &&
                std::any_of(spec.shape.begin(), spec.shape.end(), [](const Expression& d) { return !d.dims().empty(); }))
                v.dynamic_inputs.push_back(id);
            if (spec.kind == symbol_of(OpKind::Output)) {
                v.outputs.push_back(id);
                if (const auto bytes = max_static_bytes(spec); bytes && *bytes <= kPrefetchedOutputBytes) {
                    v.prefetch_offset[id] = prefetch_bytes;
                    prefetch_bytes += (*bytes + 15) / 16 * 16;
                }
            }
        }
        v.prefetched.reserve(prefetch_bytes);
        const std::vector<std::string> groups = group_sources(v.plan);
        for (std::size_t g = 0; g < groups.size(); ++g)
            v.group_functions.push_back(KernelModules::get().function(groups[g], kGroupEntry, arch, fmt::format("launch group {}", g)));
        for (std::uint32_t id = 0; id < n; ++id)
            if (v.plan.nodes[id].role == PlannedNode::Role::Constant) {
                HostBuffer c(v.nodes[id].spec.dtype, 1);
                c.store_double(0, v.nodes[id].spec.op.value);
                v.output_buffers[id].reserve(size_of(c.dtype));
                const std::vector<std::byte> bytes = host_buffer_to_bytes(c);
                check_call(api().memcpy_htod_async(v.output_buffers[id].ptr(), bytes.data(), bytes.size(), stream_), "cuMemcpyHtoDAsync");
                check_call(api().stream_synchronize(stream_), "cuStreamSynchronize");
            }
        variants_.push_back(std::move(v));
    }

    // An output's size where its shape is static (a sampled token), else nullopt.
    static std::optional<std::size_t> max_static_bytes(const NodeSpec& spec) {
        std::size_t n = size_of(spec.dtype);
        for (const Expression& d : spec.shape) {
            const auto c = d.as_constant();
            if (!c) return std::nullopt;
            n *= static_cast<std::size_t>(*c);
        }
        return n;
    }

    const NodeSpec* input_spec(NodeId hlir) const {
        for (const ProgramNode& n : variants_.back().nodes)
            if (n.spec.kind == symbol_of(OpKind::Input) && n.spec.hlir == hlir) return &n.spec;
        return nullptr;
    }
    const NodeSpec& bound_input(const GraphTensor& t) const {
        check(!variants_.empty(), "set_data", "no program loaded");
        return variants_.back().nodes[input_index(variants_.back().nodes, t.id())].spec;
    }

    std::size_t variant_for(const DynMap& dims) const {
        check(!variants_.empty(), "CudaRuntime", "no program loaded");
        for (std::size_t i = 0; i + 1 < variants_.size(); ++i)
            if (variants_[i].fixed.agrees_with(dims)) return i;
        return variants_.size() - 1;
    }

    // Each batched product's weights side by side in one block, in member
    // order, so one cuBLASLt call walks them at one stride; data already bound
    // moves with them.
    void place_batched_weights() {
        for (const Variant& v : variants_)
            for (std::uint32_t id = 0; id < v.nodes.size(); ++id) {
                if (v.plan.batch[id] != id) continue;
                const std::vector<std::uint32_t> members = batch_members(v.plan.batch, id);
                const NodeSpec& first = v.nodes[v.nodes[id].sources[1]].spec;
                const std::size_t bytes = static_input_bytes(first);
                std::vector<Input*> weights;
                for (std::uint32_t m : members) weights.push_back(&inputs_[v.nodes[v.nodes[m].sources[1]].spec.hlir]);
                bool placed = weights.front()->block != nullptr;
                for (std::size_t i = 1; i < weights.size(); ++i)
                    placed = placed && weights[i]->block == weights.front()->block && weights[i]->offset == weights.front()->offset + i * bytes;
                if (placed) continue;
                auto block = std::make_shared<DeviceBuffer>();
                block->reserve(bytes * weights.size());
                for (std::size_t i = 0; i < weights.size(); ++i) {
                    Input& in = *weights[i];
                    if (in.bound) {
                        check_call(api().memcpy_dtod_async(block->ptr() + i * bytes, in.ptr(), bytes, stream_), "cuMemcpyDtoDAsync");
                        check_call(api().stream_synchronize(stream_), "cuStreamSynchronize");
                    }
                    in.buffer = DeviceBuffer{};
                    in.block = block;
                    in.offset = i * bytes;
                    in.placed_bytes = bytes;
                    in.dtype = first.dtype;
                }
                ++generation_;
            }
    }

    // Binding keeps the input's buffer where the data fits, so a decode step's
    // new token enqueues the same work as the last one; a small input of a
    // dynamic shape (bound every step) goes up from pinned memory without a
    // synchronisation of its own.
    void bind_input(NodeId hlir, const NodeSpec& spec, std::span<const std::byte> bytes, std::size_t count) {
        Input& in = inputs_[hlir];
        in.dtype = spec.dtype;
        check(!in.block || bytes.size() == in.placed_bytes, "set_data", "input '{}' (node {}) of {} bytes placed for {}", spec.op.label,
              hlir, bytes.size(), in.placed_bytes);
        if (!in.block && in.buffer.reserve(bytes.size())) ++generation_;
        in.count = static_cast<std::int64_t>(count);
        in.bound = true;
        if (bytes.empty()) return;
        host_device_bytes_ += bytes.size();
        const bool per_step = std::any_of(spec.shape.begin(), spec.shape.end(), [](const Expression& d) { return !d.dims().empty(); });
        if (!per_step || bytes.size() > kPinnedInputBytes) {
            check_call(api().memcpy_htod_async(in.ptr(), bytes.data(), bytes.size(), stream_), "cuMemcpyHtoDAsync");
            check_call(api().stream_synchronize(stream_), "cuStreamSynchronize");
            return;
        }
        if (in.staging_in_flight) check_call(api().stream_synchronize(stream_), "cuStreamSynchronize");
        in.staging.reserve(bytes.size());
        std::memcpy(in.staging.data(), bytes.data(), bytes.size());
        check_call(api().memcpy_htod_async(in.ptr(), in.staging.data(), bytes.size(), stream_), "cuMemcpyHtoDAsync");
        in.staging_in_flight = true;
    }

    template <typename T>
    void set_values(const GraphTensor& t, std::span<const T> values) {
        const NodeSpec& spec = bound_input(t);
        check_input_length(spec, values.size(), t.id());
        const std::vector<std::byte> bytes = host_buffer_to_bytes(host_buffer_from_values(spec.dtype, values));
        bind_input(t.id(), spec, bytes, values.size());
    }

    bool in_arena(const Variant& v, std::uint32_t id) const {
        const PlannedNode& p = v.plan.nodes[id];
        const bool output = v.nodes[id].spec.kind == symbol_of(OpKind::Output);
        return !output && !p.in_place_input &&
               (p.role == PlannedNode::Role::Kernel || p.role == PlannedNode::Role::Scatter || p.role == PlannedNode::Role::Update ||
                p.role == PlannedNode::Role::HostOp);
    }

    // Sizes every result (and each scatter's claim table) for `bucket` and places them in the arena.
    void plan_memory(Variant& v, const DynMap& dims, const DynMap& bucket) {
        std::vector<std::size_t> result_bytes(v.nodes.size(), 0), claim_bytes(v.nodes.size(), 0);
        for (std::uint32_t id = 0; id < v.nodes.size(); ++id) {
            const NodeSpec& spec = v.nodes[id].spec;
            v.planned[id] = std::max(numel_of(spec.shape, dims, id), numel_of(spec.shape, bucket, id));
            const std::size_t bytes = static_cast<std::size_t>(v.planned[id]) * size_of(spec.dtype);
            if (in_arena(v, id)) result_bytes[id] = bytes;
            if (v.plan.nodes[id].scatter) claim_bytes[id] = static_cast<std::size_t>(v.planned[id]) * sizeof(std::int32_t);
            if (spec.kind == symbol_of(OpKind::Output) && !v.plan.nodes[id].aliases_source && v.output_buffers[id].reserve(bytes))
                ++generation_;
        }
        for (std::uint32_t id = 0; id < v.nodes.size(); ++id)
            if (const auto& custom = v.plan.nodes[id].custom)
                if (const std::size_t bytes = custom->scratch_bytes(bucket); bytes > v.scratch[id].bytes()) {
                    v.scratch[id].reserve(bytes);
                    check_call(api().memset_d8_async(v.scratch[id].ptr(), 0, v.scratch[id].bytes(), stream_), "cuMemsetD8Async");
                    ++generation_;
                }
        v.arena_plan = plan_arena_layout(v.plan, result_bytes, claim_bytes);
        v.planned_for = bucket;
        if (arena_.bytes() < v.arena_plan->bytes) {
            check_call(api().stream_synchronize(stream_), "cuStreamSynchronize");
            arena_.reserve(v.arena_plan->bytes);
            ++generation_;
        }
    }

    CuDevicePtr data_of(const Variant& v, std::uint32_t id) const {
        const PlannedNode& p = v.plan.nodes[id];
        if (p.aliases_source) return data_of(v, v.nodes[id].sources[0]);
        if (p.in_place_input) return input_of(v, *p.in_place_input).ptr();
        if (p.role == PlannedNode::Role::Input) return input_of(v, id).ptr();
        if (p.role == PlannedNode::Role::Constant || v.nodes[id].spec.kind == symbol_of(OpKind::Output))
            return v.output_buffers[id].ptr();
        return arena_.ptr() + v.arena_plan->offsets[id];
    }
    const Input& input_of(const Variant& v, std::uint32_t id) const { return inputs_.at(v.nodes[id].spec.hlir); }

    // The signature of the work at `dims`: equal signatures enqueue equal work.
    std::vector<std::int64_t> signature(const Variant& v, const DynMap& dims, const DynMap& bucket) const {
        std::vector<std::int64_t> key;
        for (auto [c, value] : (v.exact_dims ? dims : bucket).entries()) key.push_back(std::int64_t{c} << 56 | value);
        for (std::uint32_t id : v.choices) {
            const PlannedNode& p = v.plan.nodes[id];
            key.push_back(p.role == PlannedNode::Role::HostOp ? blas_runs_library(v.nodes[id].spec, dims)
                                                              : vector_launch_ok(*p.kernel, dims));
        }
        return key;
    }

    Launch to_launch(const Variant& v, const PlannedLaunch& l, const DynMap& dims) const {
        const ProgramNode& node = v.nodes[l.node];
        std::vector<CuDevicePtr> ins;
        for (std::uint32_t s : node.sources) ins.push_back(data_of(v, s));
        Launch out;
        out.node = static_cast<int>(l.node);
        out.grid = l.grid;
        out.block = l.block;
        out.shared = l.shared_bytes;
        auto args = [&](std::initializer_list<CuDevicePtr> first, std::span<const CuDevicePtr> rest) {
            out.args.assign(first.begin(), first.end());
            out.args.insert(out.args.end(), rest.begin(), rest.end());
            if (v.scratch[l.node].bytes() > 0) out.args.push_back(v.scratch[l.node].ptr());
            out.args.push_back(dims_buffer_.ptr());
            out.args.push_back(fault_buffer_.ptr());
            out.args.push_back(static_cast<std::uint64_t>(l.node));
        };
        const CuDevicePtr winner = v.plan.nodes[l.node].scatter ? arena_.ptr() + v.arena_plan->claim_offsets[l.node] : 0;
        switch (l.kind) {
            case PlannedLaunch::Kind::Memset:
                out.kind = Launch::Kind::Memset;
                out.dst = winner;
                out.bytes = l.bytes;
                return out;
            case PlannedLaunch::Kind::Copy:
                out.kind = Launch::Kind::Copy;
                out.dst = input_of(v, l.carried_input).ptr();
                out.src = data_of(v, l.node);
                out.bytes = l.bytes;
                return out;
            case PlannedLaunch::Kind::Blas: {
                out.kind = Launch::Kind::Blas;
                out.a = blas_operand(node.spec.views[0], dims);
                out.b = blas_operand(node.spec.views[1], dims);
                out.out_stride = out.a.rows * out.b.rows;
                out.operands = v.nodes[node.sources[0]].spec.dtype;
                out.src = ins[0];
                out.args.assign(ins.begin() + 1, ins.end());
                out.dst = data_of(v, l.node);
                if (!l.members.empty()) {
                    const std::int64_t weights = uniform_stride(v, l, 1, size_of(out.operands));
                    const std::int64_t outputs = uniform_stride(v, l, kNone, size_of(node.spec.dtype));
                    const BatchedBlasCall call = batched_blas_call(out.a, out.b, 1 + static_cast<std::int64_t>(l.members.size()), weights, outputs);
                    out.a = call.a;
                    out.b = call.b;
                    out.out_stride = call.out_stride;
                }
                return out;
            }
            case PlannedLaunch::Kind::Group:
                // Each member's parameters, then its grid size.
                out.function = v.group_functions[l.group];
                for (const PlannedLaunch& m : l.members) {
                    const Launch member = to_launch(v, m, dims);
                    out.args.insert(out.args.end(), member.args.begin(), member.args.end());
                    out.args.push_back(m.grid);
                }
                return out;
            case PlannedLaunch::Kind::Kernel: break;
        }
        const CuDevicePtr dst = data_of(v, l.node);
        switch (l.entry) {
            case Entry::ScatterClaim: out.function = v.functions[l.node][1]; args({winner, ins[1], ins[2]}, {}); break;
            case Entry::ScatterWrite: out.function = v.functions[l.node][2]; args({dst, winner, ins[1], ins[2]}, {}); break;
            case Entry::Vector: out.function = v.functions[l.node][3]; args({dst}, ins); break;
            case Entry::Update: out.function = v.functions[l.node][4]; args({dst}, ins); break;
            case Entry::Main:
                out.function = v.functions[l.node][0];
                if (const auto role = v.plan.nodes[l.node].role; role == PlannedNode::Role::Scatter || role == PlannedNode::Role::Update)
                    args({dst}, std::span(ins).first(1));
                else args({dst}, ins);
                if (!out.function) out.function = blas_fallback_function(v, l.node);
                break;
        }
        return out;
    }

    // Elements between consecutive members' buffers in a batched product: source `source`'s (kNone: the results').
    std::int64_t uniform_stride(const Variant& v, const PlannedLaunch& l, std::size_t source, std::size_t element) const {
        auto address = [&](std::uint32_t node) { return source == kNone ? data_of(v, node) : data_of(v, v.nodes[node].sources[source]); };
        const CuDevicePtr first = address(l.node);
        const CuDevicePtr second = address(l.members.front().node);
        check(second > first && (second - first) % element == 0, "CudaRuntime", "node {}: a batched product's buffers are not side by side",
              l.node);
        for (std::size_t i = 0; i < l.members.size(); ++i)
            check(address(l.members[i].node) == first + (i + 1) * (second - first), "CudaRuntime",
                  "node {}: a batched product's buffers are not evenly spaced", l.node);
        return static_cast<std::int64_t>((second - first) / element);
    }

    CuFunction blas_fallback_function(const Variant& v, std::uint32_t id) const {
        const Kernel k = blas_fallback_kernel(v.nodes[id].spec, source_dtypes(v.nodes, id), id);
        return KernelModules::get().function(kernel_source(k), kReduceEntry, driver_->compute_capability(), label(v, id));
    }

    Work& work_for(Variant& v, const DynMap& dims, const DynMap& bucket) {
        Work& w = v.work[signature(v, dims, bucket)];
        if (w.generation == generation_ && !w.launches.empty()) return w;
        w = Work{};
        w.generation = generation_;
        const auto fits = [&](std::uint32_t output, std::uint32_t input) {
            return static_cast<std::size_t>(v.numel[output]) * size_of(v.nodes[output].spec.dtype) <= input_of(v, input).bytes();
        };
        for (const PlannedLaunch& l : plan_launches(v.plan, v.nodes, dims, driver_->multiprocessors(), fits))
            w.launches.push_back(to_launch(v, l, dims));
        for (const Launch& l : w.launches)
            if (l.shared > kDefaultSharedBytes && raised_shared_.insert(l.function).second)
                check_call(api().func_set_attribute(l.function, kFuncAttributeMaxDynamicSharedBytes, static_cast<int>(l.shared)),
                           "cuFuncSetAttribute");
        return w;
    }

    void enqueue(const Launch& l) {
        switch (l.kind) {
            case Launch::Kind::Kernel: {
                if (l.grid == 0) return;
                std::vector<std::uint64_t> args = l.args;
                std::vector<void*> params;
                for (std::uint64_t& a : args) params.push_back(&a);
                check_call(api().launch_kernel(l.function, l.grid, 1, 1, l.block, 1, 1, static_cast<unsigned>(l.shared), stream_,
                                               params.data(), nullptr),
                           "cuLaunchKernel");
                return;
            }
            case Launch::Kind::Memset:
                if (l.bytes) check_call(api().memset_d8_async(l.dst, 0xFF, l.bytes, stream_), "cuMemsetD8Async");
                return;
            case Launch::Kind::Copy:
                if (l.bytes && l.dst != l.src) check_call(api().memcpy_dtod_async(l.dst, l.src, l.bytes, stream_), "cuMemcpyDtoDAsync");
                return;
            case Launch::Kind::Blas:
                BlasLt::get().matmul(stream_, l.operands, l.a, l.src, l.b, l.args.at(0), l.args.size() > 1 ? l.args[1] : 0, l.dst, l.a.batch,
                                     l.out_stride);
                return;
        }
    }

    // Checks the inputs and sizes the outputs for `dims`.
    void prepare_step(Variant& v, const DynMap& dims) {
        for (std::uint32_t id : v.dynamic_inputs) {
            const NodeSpec& node = v.nodes[id].spec;
            const auto it = inputs_.find(node.hlir);
            check(it != inputs_.end() && it->second.bound, "CudaRuntime::execute", "input '{}' (node {}) has no data; call set_data", node.op.label,
                  node.hlir);
            const std::int64_t n = numel_of(node.shape, dims, id);
            check(it->second.count == n, "CudaRuntime::execute", "input '{}' (node {}) has {} values but its shape {} needs {}",
                  node.op.label, node.hlir, it->second.count, to_string(node.shape), n);
        }
        for (std::uint32_t id = 0; id < v.nodes.size(); ++id)
            if (v.plan.nodes[id].role == PlannedNode::Role::Input && !(inputs_.contains(v.nodes[id].spec.hlir) && inputs_.at(v.nodes[id].spec.hlir).bound))
                throw Error("CudaRuntime::execute", fmt::format("input '{}' (node {}) has no data; call set_data",
                                                                v.nodes[id].spec.op.label, v.nodes[id].spec.hlir));
        for (std::uint32_t id : v.outputs) v.numel[id] = numel_of(v.nodes[id].spec.shape, dims, id);
        for (auto [output, input] : v.plan.carried) v.numel[output] = numel_of(v.nodes[output].spec.shape, dims, output);
    }

    // One execution; with `timed`, the device seconds between events around its work.
    double run(const DynMap& dims, bool timed) {
        driver_->check_usable();
        const std::size_t index = variant_for(dims);
        Variant& v = variants_[index];
        const DynMap bucket = size_bucket(dims);
        prepare_step(v, dims);
        if (!v.arena_plan || !(v.planned_for == bucket)) plan_memory(v, dims, bucket);
        upload_dims(dims);
        Work& work = work_for(v, dims, bucket);
        std::int64_t fault_code = 0;
        try {
            if (timed) check_call(api().event_record(start_, stream_), "cuEventRecord");
            if (time_next_launches_) time_each_launch(work);
            else replay_or_enqueue(v, work);
            time_next_launches_ = false;
            if (timed) check_call(api().event_record(stop_, stream_), "cuEventRecord");
            check_call(api().memcpy_dtoh_async(step_pinned_.data(), fault_buffer_.ptr(), kFaultCodeBytes, stream_), "cuMemcpyDtoHAsync");
            host_device_bytes_ += kFaultCodeBytes;
            for (std::uint32_t id : v.outputs)
                if (v.prefetch_offset[id] != kNone && v.numel[id] > 0) {
                    const std::size_t bytes = static_cast<std::size_t>(v.numel[id]) * size_of(v.nodes[id].spec.dtype);
                    check_call(api().memcpy_dtoh_async(v.prefetched.data() + v.prefetch_offset[id], data_of(v, id), bytes, stream_),
                               "cuMemcpyDtoHAsync");
                    host_device_bytes_ += bytes;
                }
            check_call(api().stream_synchronize(stream_), "cuStreamSynchronize");
            std::memcpy(&fault_code, step_pinned_.data(), sizeof fault_code);
        } catch (const FatalError& e) {
            if (sync_each_launch_) throw;
            throw FatalError("CudaRuntime", fmt::format("{}; the last kernel enqueued before it was reported is {} "
                                                        "(LUMINAL_CUDA_SYNC=1 synchronises after each launch to name the one that faulted)",
                                                        e.what(), last_kernel(v, work.launches)));
        }
        for (auto& [hlir, input] : inputs_) input.staging_in_flight = false;
        if (fault_code != 0) report_fault();
        hand_carried_state_over(v);
        last_ = index;
        if (!timed) return 0;
        float ms = 0;
        check_call(api().event_elapsed(&ms, start_, stop_), "cuEventElapsedTime");
        return ms * 1e-3;
    }

    // Uploads the dims slots that changed since the last execution.
    void upload_dims(const DynMap& dims) {
        const DimSlots now = dim_slots(dims);
        const auto [first, last] = changed_slots(uploaded_dims_, now);
        if (first == last) return;
        std::int64_t* staged = reinterpret_cast<std::int64_t*>(step_pinned_.data() + kFaultCodeBytes);
        std::copy(now.begin() + static_cast<std::ptrdiff_t>(first), now.begin() + static_cast<std::ptrdiff_t>(last), staged);
        const std::size_t bytes = (last - first) * sizeof(std::int64_t);
        check_call(api().memcpy_htod_async(dims_buffer_.ptr() + first * sizeof(std::int64_t), staged, bytes, stream_),
                   "cuMemcpyHtoDAsync");
        host_device_bytes_ += bytes;
        uploaded_dims_ = now;
    }

    // An out-of-place carried output was copied into its input's buffer inside
    // the execution when it fits there; one that grew gets a new buffer now
    // (the execution still read the old one).
    void hand_carried_state_over(Variant& v) {
        for (auto [output, input] : v.plan.carried) {
            if (v.plan.nodes[output].aliases_source) continue;
            Input& in = inputs_.at(v.nodes[input].spec.hlir);
            const std::size_t bytes = static_cast<std::size_t>(v.numel[output]) * size_of(v.nodes[output].spec.dtype);
            if (bytes > in.buffer.bytes()) {
                DeviceBuffer grown;
                grown.reserve(bytes);
                check_call(api().memcpy_dtod_async(grown.ptr(), data_of(v, output), bytes, stream_), "cuMemcpyDtoDAsync");
                check_call(api().stream_synchronize(stream_), "cuStreamSynchronize");
                in.buffer = std::move(grown);
                ++generation_;
            }
            in.count = v.numel[output];
        }
    }

    std::string last_kernel(const Variant& v, const std::vector<Launch>& work) const {
        for (auto l = work.rbegin(); l != work.rend(); ++l)
            if (l->kind == Launch::Kind::Kernel || l->kind == Launch::Kind::Blas) return label(v, static_cast<std::uint32_t>(l->node));
        return "none";
    }

    // Replays the work's captured graph; captures it the second time the same work runs.
    void replay_or_enqueue(const Variant& v, Work& work) {
        if (sync_each_launch_) {
            for (const Launch& l : work.launches) {
                enqueue(l);
                check_call(api().stream_synchronize(stream_), fmt::format("the launch for {}", label(v, static_cast<std::uint32_t>(l.node))));
            }
            return;
        }
        if (work.graph) {
            check_call(api().graph_launch(work.graph->exec, stream_), "cuGraphLaunch");
            ++graph_replays_;
            return;
        }
        if (work.runs++ == 0) {
            for (const Launch& l : work.launches) enqueue(l);
            return;
        }
        CapturedGraph g;
        g.api = &api();
        check_call(api().stream_begin_capture(stream_, kCaptureModeThreadLocal), "cuStreamBeginCapture");
        for (const Launch& l : work.launches) enqueue(l);
        check_call(api().stream_end_capture(stream_, &g.graph), "cuStreamEndCapture");
        check_call(api().graph_instantiate(&g.exec, g.graph, 0), "cuGraphInstantiate");
        check_call(api().graph_launch(g.exec, stream_), "cuGraphLaunch");
        ++graph_captures_;
        work.graph = std::move(g);
    }

    void time_each_launch(const Work& work) {
        static constexpr std::string_view kKinds[] = {"kernel", "memset", "copy", "cuBLASLt"};
        launch_times_.clear();
        for (const Launch& l : work.launches) {
            check_call(api().event_record(start_, stream_), "cuEventRecord");
            enqueue(l);
            check_call(api().event_record(stop_, stream_), "cuEventRecord");
            check_call(api().event_synchronize(stop_), "cuEventSynchronize");
            float ms = 0;
            check_call(api().event_elapsed(&ms, start_, stop_), "cuEventElapsedTime");
            launch_times_.push_back({l.node, kKinds[static_cast<int>(l.kind)], ms * 1e-3});
        }
    }

    // Reads the whole fault record, clears it for the next execution, and throws.
    void report_fault() {
        std::array<std::int64_t, 4> fault{};
        check_call(api().memcpy_dtoh_async(fault.data(), fault_buffer_.ptr(), sizeof fault, stream_), "cuMemcpyDtoHAsync");
        check_call(api().memset_d8_async(fault_buffer_.ptr(), 0, sizeof fault, stream_), "cuMemsetD8Async");
        check_call(api().stream_synchronize(stream_), "cuStreamSynchronize");
        host_device_bytes_ += sizeof fault;
        const auto node = fault[1];
        switch (static_cast<FaultCode>(fault[0])) {
            case FaultCode::None: return;
            case FaultCode::GatherIndex:
                throw Error("Gather", fmt::format("node {}: index {} is out of range for {} elements", node, fault[2], fault[3]));
            case FaultCode::ModuloByZero:
                throw Error("Mod", fmt::format("node {}: integer modulo by zero at element {}", node, fault[2]));
            case FaultCode::ScatterIndex:
                throw Error("Scatter", fmt::format("node {}: index {} is out of range for {} elements", node, fault[2], fault[3]));
            case FaultCode::ExpertIndex:
                throw Error("ExpertMatmul", fmt::format("node {}: a row picks expert {}, outside [0, {})", node, fault[2], fault[3]));
        }
        throw Error("CudaRuntime", fmt::format("node {}: kernel fault {}", node, fault[0]));
    }

    Driver* driver_ = nullptr;
    DeviceSpec device_;
    ShapeGuards guards_;
    CuStream stream_ = nullptr;
    CuEvent start_ = nullptr, stop_ = nullptr;
    bool time_next_launches_ = false;
    std::vector<LaunchTime> launch_times_;
    DeviceBuffer dims_buffer_, fault_buffer_, arena_;
    PinnedBuffer step_pinned_;  // the fault code read back, then the dims staged for upload
    DimSlots uploaded_dims_{};
    std::vector<Variant> variants_;  // the specializations, then the main program
    std::map<NodeId, Input> inputs_;  // by HLIR id, shared by the variants
    std::size_t last_ = kNone;       // the variant the last execution ran
    std::uint64_t generation_ = 1;   // bumped whenever a buffer a launch may hold moves
    bool sync_each_launch_ = false;
    std::size_t graph_replays_ = 0, graph_captures_ = 0;
    mutable std::size_t host_device_bytes_ = 0;
    std::set<CuFunction> raised_shared_;  // functions allowed more than kDefaultSharedBytes
};

}  // namespace luminal::cuda

static_assert(luminal::Runtime<luminal::cuda::CudaRuntime>);
