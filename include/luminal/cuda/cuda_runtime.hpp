#pragma once
// CudaRuntime: runs a program on the GPU. Generated kernels are compiled with
// NVRTC for the device's architecture (cached in memory and on disk), Matmuls
// the rules gave to cuBLASLt run there, intermediate results live in one
// arena placed by liveness, each carried Scatter (a KV cache write) writes
// into its input's buffer, and an execution whose launches (grids, buffers,
// library calls) match an earlier one's replays a captured CUDA graph: the
// dims live in device memory, so a decode step whose grids did not change
// replays without re-capture. Memory and grids are planned for the dims
// rounded up to powers of two (kernels stride over any grid), so the decode
// steps of one such bucket enqueue equal work and replay one graph.
// execute() returns when the outputs are ready and reports a kernel's fault
// (a gather index out of range, say) as an Error naming the node; a fault
// that poisons the context is a FatalError naming the last kernel enqueued
// (LUMINAL_CUDA_SYNC=1 synchronises after every launch to name the one that
// faulted), and the runtime refuses to run after it. Constructing one
// without a usable device is an Error starting "no CUDA device".
#include <array>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "luminal/cuda/cublaslt.hpp"
#include "luminal/cuda/cuda_rules.hpp"
#include "luminal/cuda/device_memory.hpp"
#include "luminal/cuda/device_model.hpp"
#include "luminal/cuda/driver.hpp"
#include "luminal/cuda/kernel_modules.hpp"
#include "luminal/cuda/plan.hpp"
#include "luminal/runtime/host_buffer_io.hpp"
#include "luminal/runtime/runtime.hpp"

namespace luminal::cuda {

class CudaRuntime {
public:
    using Rules = egraph::CudaRules;

    CudaRuntime() : driver_(&Driver::get()) {
        driver_->check_usable();
        driver_->make_current();
        const char* sync = std::getenv("LUMINAL_CUDA_SYNC");
        sync_each_launch_ = sync && *sync && std::string_view(sync) != "0";
        check_call(api().stream_create(&stream_, kStreamNonBlocking), "cuStreamCreate");
        check_call(api().event_create(&start_, 0), "cuEventCreate");
        check_call(api().event_create(&stop_, 0), "cuEventCreate");
        dims_buffer_.reserve(kDimSlots * sizeof(std::int64_t));
        fault_buffer_.reserve(4 * sizeof(std::int64_t));
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
        clear_graphs();
        if (start_) api().event_destroy(start_);
        if (stop_) api().event_destroy(stop_);
        if (stream_) api().stream_destroy(stream_);
    }

    CostModel cost_model() const { return device_cost_model(); }

    void load(const Program& program, InputBinding binding = InputBinding::Drop) {
        std::vector<std::optional<Input>> kept(program.nodes.size());
        if (binding == InputBinding::Keep)
            for (std::uint32_t i = 0; i < program.nodes.size(); ++i)
                if (auto old = same_input(program.nodes[i].spec)) kept[i] = std::move(inputs_[*old]);
        driver_->check_usable();
        plan_ = plan_program(program);
        nodes_ = program.nodes;
        inputs_ = std::move(kept);
        outputs_.clear();
        outputs_.resize(nodes_.size());
        numel_.assign(nodes_.size(), 0);
        planned_.assign(nodes_.size(), 0);
        arena_plan_.reset();
        executed_ = false;
        clear_graphs();
        const int arch = driver_->compute_capability();
        functions_.assign(nodes_.size(), {});
        for (std::uint32_t id = 0; id < nodes_.size(); ++id) {
            const PlannedNode& p = plan_.nodes[id];
            const std::string kernel = label(id);
            if (p.kernel) {
                functions_[id][0] = KernelModules::get().function(kernel_source(*p.kernel), kernel_entry(*p.kernel), arch, kernel);
                if (auto vector = vector_kernel_source(*p.kernel))
                    functions_[id][3] = KernelModules::get().function(*vector, kReduceEntry, arch, kernel);
            }
            if (p.scatter) {
                const std::string source = kernel_source(*p.scatter);
                functions_[id][1] = KernelModules::get().function(source, kScatterClaimEntry, arch, kernel);
                functions_[id][2] = KernelModules::get().function(source, kScatterWriteEntry, arch, kernel);
            }
            if (p.role == PlannedNode::Role::HostOp)
                check(nodes_[id].spec.payload_as<BlasMatmulOp>() != nullptr, "CudaRuntime::load",
                      "node {}: cannot run op '{}' on CUDA (no kernel and no host implementation)", id,
                      nodes_[id].spec.op.name());
            if (p.role == PlannedNode::Role::Constant) {
                HostBuffer c(nodes_[id].spec.dtype, 1);
                c.store_double(0, nodes_[id].spec.op.value);
                bind_input(id, host_buffer_to_bytes(c), 1);
            }
        }
    }

    void set_data(const GraphTensor& t, const std::vector<float>& values) { set_values(t, std::span(values)); }
    template <typename T>
    void set_data(const GraphTensor& t, const std::vector<T>& values) { set_values(t, std::span(values)); }
    void set_bytes(const GraphTensor& t, std::span<const std::byte> bytes) {
        const std::uint32_t index = input_index(nodes_, t.id());
        const std::size_t count = byte_input_count(nodes_[index].spec, bytes.size(), index);
        bind_input(index, std::vector<std::byte>(bytes.begin(), bytes.end()), count);
    }

    void execute(const DynMap& dims) { run(dims, false); }

    // Median device time of `reps` executions (CUDA events around each), after a warm-up.
    double time_execution(const DynMap& dims, std::size_t reps) {
        run(dims, false);
        std::vector<double> times;
        for (std::size_t i = 0; i < std::max<std::size_t>(reps, 1); ++i) times.push_back(run(dims, true));
        std::sort(times.begin(), times.end());
        return times[times.size() / 2];
    }

    std::vector<float> get_f32(const GraphTensor& t) const { return get<float>(t); }
    template <typename T>
    std::vector<T> get(const GraphTensor& t) const {
        const std::uint32_t id = output_index(nodes_, t.graph(), t.id());
        const auto [ptr, count] = output_data(id);
        std::vector<std::byte> bytes(static_cast<std::size_t>(count) * size_of(nodes_[id].spec.dtype));
        if (!bytes.empty()) {
            check_call(api().memcpy_dtoh_async(bytes.data(), ptr, bytes.size(), stream_), "cuMemcpyDtoHAsync");
            check_call(api().stream_synchronize(stream_), "cuStreamSynchronize");
        }
        return host_buffer_values<T>(host_buffer_from_bytes(nodes_[id].spec.dtype, bytes.data(), static_cast<std::size_t>(count)));
    }

    bool updates_in_place(const GraphTensor& output) const {
        return plan_.nodes[output_index(nodes_, output.graph(), output.id())].aliases_source;
    }
    const std::string& device_name() const { return driver_->device_name(); }
    std::size_t graph_replays() const { return graph_replays_; }
    std::size_t graph_captures() const { return graph_captures_; }

private:
    struct Input {
        DeviceBuffer buffer;
        std::int64_t count = 0;
    };
    // One unit of work an execution enqueues; equal lists enqueue equal work.
    struct Launch {
        enum class Kind : std::uint8_t { Kernel, Memset, Copy, Blas } kind = Kind::Kernel;
        CuFunction function = nullptr;
        unsigned grid = 0, block = 0;
        std::array<std::uint64_t, 12> args{};
        std::uint8_t arg_count = 0;
        int node = 0;
        CuDevicePtr dst = 0, src = 0;
        std::size_t bytes = 0;
        BlasOperand a, b;
        DType operands = DType::F32;
        friend bool operator==(const Launch&, const Launch&) = default;
    };
    struct CapturedGraph {
        std::vector<Launch> launches;
        CuGraph graph = nullptr;
        CuGraphExec exec = nullptr;
    };
    static constexpr unsigned kBlock = 256;

    const DriverApi& api() const { return driver_->api(); }
    void check_call(CuResult r, std::string_view call) const { driver_->check_call(r, call); }
    std::string label(std::uint32_t id) const { return fmt::format("node {} ({})", id, nodes_[id].spec.op.name()); }

    // The dims memory and grids are planned for: each rounded up to a power of two.
    static DynMap size_bucket(const DynMap& dims) {
        DynMap bucket;
        for (auto [c, v] : dims.entries())
            bucket.set(c, v > 1 ? static_cast<std::int64_t>(std::bit_ceil(static_cast<std::uint64_t>(v))) : v);
        return bucket;
    }
    static std::int64_t numel_at(const Shape& shape, const DynMap& dims) {
        std::int64_t n = 1;
        for (auto& d : shape) n *= std::max<std::int64_t>(d.eval(dims), 0);
        return n;
    }

    void swap(CudaRuntime& o) noexcept {
        std::swap(driver_, o.driver_);
        std::swap(stream_, o.stream_);
        std::swap(start_, o.start_);
        std::swap(stop_, o.stop_);
        std::swap(dims_buffer_, o.dims_buffer_);
        std::swap(fault_buffer_, o.fault_buffer_);
        std::swap(arena_, o.arena_);
        std::swap(plan_, o.plan_);
        std::swap(nodes_, o.nodes_);
        std::swap(inputs_, o.inputs_);
        std::swap(outputs_, o.outputs_);
        std::swap(functions_, o.functions_);
        std::swap(numel_, o.numel_);
        std::swap(planned_, o.planned_);
        std::swap(sync_each_launch_, o.sync_each_launch_);
        std::swap(arena_plan_, o.arena_plan_);
        std::swap(arena_sizes_, o.arena_sizes_);
        std::swap(scratch_of_, o.scratch_of_);
        std::swap(executed_, o.executed_);
        std::swap(graphs_, o.graphs_);
        std::swap(last_launches_, o.last_launches_);
        std::swap(graph_replays_, o.graph_replays_);
        std::swap(graph_captures_, o.graph_captures_);
    }

    void clear_graphs() {
        for (CapturedGraph& g : graphs_) {
            if (g.exec) api().graph_exec_destroy(g.exec);
            if (g.graph) api().graph_destroy(g.graph);
        }
        graphs_.clear();
        last_launches_.clear();
    }

    // Rebinding keeps the input's buffer where the data fits, so a decode
    // step's new token enqueues the same work as the last one.
    void bind_input(std::uint32_t index, const std::vector<std::byte>& bytes, std::size_t count) {
        Input in;
        if (inputs_[index]) in.buffer = std::move(inputs_[index]->buffer);
        in.buffer.reserve(bytes.size());
        in.count = static_cast<std::int64_t>(count);
        if (!bytes.empty()) {
            check_call(api().memcpy_htod_async(in.buffer.ptr(), bytes.data(), bytes.size(), stream_), "cuMemcpyHtoDAsync");
            check_call(api().stream_synchronize(stream_), "cuStreamSynchronize");
        }
        inputs_[index] = std::move(in);
    }

    template <typename T>
    void set_values(const GraphTensor& t, std::span<const T> values) {
        const std::uint32_t index = input_index(nodes_, t.id());
        check_input_length(nodes_[index].spec, values.size(), index);
        bind_input(index, host_buffer_to_bytes(host_buffer_from_values(nodes_[index].spec.dtype, values)), values.size());
    }

    std::optional<std::uint32_t> same_input(const NodeSpec& input) const {
        return bound_input_like(nodes_, input, [&](std::uint32_t i) { return inputs_[i].has_value(); });
    }

    bool in_arena(std::uint32_t id) const {
        const PlannedNode& p = plan_.nodes[id];
        const bool output = nodes_[id].spec.kind == symbol_of(OpKind::Output);
        return !output && !p.in_place_input &&
               (p.role == PlannedNode::Role::Kernel || p.role == PlannedNode::Role::Scatter || p.role == PlannedNode::Role::HostOp);
    }

    // Places every arena result (and each scatter's claim table) for the current sizes.
    void plan_memory() {
        std::vector<std::size_t> sizes;
        std::vector<ArenaRequest> requests;
        scratch_of_.assign(nodes_.size(), kNoScratch);
        for (std::uint32_t id = 0; id < nodes_.size(); ++id) {
            if (in_arena(id))
                requests.push_back({static_cast<std::size_t>(planned_[id]) * size_of(nodes_[id].spec.dtype), id, plan_.last_use[id]});
            else
                requests.push_back({0, id, id});
            sizes.push_back(requests.back().bytes);
        }
        for (std::uint32_t id = 0; id < nodes_.size(); ++id)
            if (plan_.nodes[id].scatter) {
                scratch_of_[id] = requests.size();
                requests.push_back({static_cast<std::size_t>(planned_[id]) * sizeof(std::int32_t), id, id});
                sizes.push_back(requests.back().bytes);
            }
        if (arena_plan_ && sizes == arena_sizes_) return;
        arena_plan_ = plan_arena(requests);
        arena_sizes_ = std::move(sizes);
        if (arena_.bytes() < arena_plan_->bytes) {
            check_call(api().stream_synchronize(stream_), "cuStreamSynchronize");
            clear_graphs();  // they hold the old arena's addresses
            arena_.reserve(arena_plan_->bytes);
        }
    }

    CuDevicePtr data_of(std::uint32_t id) const {
        const PlannedNode& p = plan_.nodes[id];
        if (p.aliases_source) return data_of(nodes_[id].sources[0]);
        if (p.in_place_input) return inputs_[*p.in_place_input]->buffer.ptr();
        if (p.role == PlannedNode::Role::Input || p.role == PlannedNode::Role::Constant) return inputs_[id]->buffer.ptr();
        if (nodes_[id].spec.kind == symbol_of(OpKind::Output)) return outputs_[id].ptr();
        return arena_.ptr() + arena_plan_->offsets[id];
    }

    std::pair<CuDevicePtr, std::int64_t> output_data(std::uint32_t id) const {
        check(executed_, "get", "output node {} has not been computed; call execute first", nodes_[id].spec.hlir);
        return {data_of(id), numel_[id]};
    }

    static unsigned grid_for(std::int64_t units, std::int64_t per_block, int multiprocessors) {
        const std::int64_t blocks = (units + per_block - 1) / per_block;
        return static_cast<unsigned>(std::clamp<std::int64_t>(blocks, 1, std::int64_t{multiprocessors} * 32));
    }

    Launch kernel_launch(std::uint32_t id, CuFunction f, const Kernel& k, CuDevicePtr out, std::span<const CuDevicePtr> ins,
                         const DynMap& dims) const {
        Launch l;
        l.function = f;
        l.block = kBlock;
        std::int64_t count = k.count.eval(dims);
        if (k.shape == Kernel::Shape::Row) count = k.extent.eval(dims) > 0 ? count / k.extent.eval(dims) : 0;  // rows
        const int sms = driver_->multiprocessors();
        if (k.shape == Kernel::Shape::Elementwise || k.strategy == ReduceStrategy::ThreadPerOutput) l.grid = grid_for(count, kBlock, sms);
        else if (k.strategy == ReduceStrategy::WarpPerOutput) l.grid = grid_for(count, kBlock / 32, sms);
        else l.grid = grid_for(count, 1, sms);
        l.args[l.arg_count++] = out;
        for (CuDevicePtr p : ins) l.args[l.arg_count++] = p;
        l.args[l.arg_count++] = dims_buffer_.ptr();
        l.args[l.arg_count++] = fault_buffer_.ptr();
        l.node = static_cast<int>(id);
        if (count == 0) l.grid = 0;
        return l;
    }

    // The work of one execution at `dims`, in order; grids for `bucket`.
    std::vector<Launch> launches(const DynMap& dims, const DynMap& bucket) {
        std::vector<Launch> out;
        for (std::uint32_t id = 0; id < nodes_.size(); ++id) {
            const ProgramNode& node = nodes_[id];
            const PlannedNode& p = plan_.nodes[id];
            if (p.role == PlannedNode::Role::Input || p.role == PlannedNode::Role::Constant || p.aliases_source) continue;
            std::vector<CuDevicePtr> ins;
            for (std::uint32_t s : node.sources) ins.push_back(data_of(s));
            const CuDevicePtr dst = data_of(id);
            if (p.role == PlannedNode::Role::HostOp) {
                append_blas(out, id, ins, dst, dims);
            } else if (p.role == PlannedNode::Role::Scatter) {
                if (p.kernel) out.push_back(kernel_launch(id, functions_[id][0], *p.kernel, dst, std::span(ins).first(1), bucket));
                const CuDevicePtr winner = arena_.ptr() + arena_plan_->offsets[scratch_of_[id]];
                Launch clear;
                clear.kind = Launch::Kind::Memset;
                clear.dst = winner;
                clear.bytes = static_cast<std::size_t>(planned_[id]) * sizeof(std::int32_t);
                out.push_back(clear);
                const std::int64_t count = p.scatter->count.eval(dims);
                check(count < std::numeric_limits<std::int32_t>::max(), "CudaRuntime", "node {}: {} scattered elements", id, count);
                Launch claim;
                claim.function = functions_[id][1];
                claim.block = kBlock;
                claim.grid = count == 0 ? 0 : grid_for(std::max(count, p.scatter->count.eval(bucket)), kBlock, driver_->multiprocessors());
                claim.node = static_cast<int>(id);
                for (CuDevicePtr a : {winner, ins[1], ins[2], dims_buffer_.ptr(), fault_buffer_.ptr()}) claim.args[claim.arg_count++] = a;
                out.push_back(claim);
                Launch write = claim;
                write.function = functions_[id][2];
                write.arg_count = 0;
                for (CuDevicePtr a : {dst, winner, ins[1], ins[2], dims_buffer_.ptr(), fault_buffer_.ptr()}) write.args[write.arg_count++] = a;
                out.push_back(write);
            } else {
                const bool vector = functions_[id][3] != nullptr && vector_launch_ok(*p.kernel, dims);
                out.push_back(kernel_launch(id, functions_[id][vector ? 3 : 0], *p.kernel, dst, ins, bucket));
            }
        }
        for (auto [output, input] : plan_.carried) {
            if (plan_.nodes[output].aliases_source || !carried_fits(output, input)) continue;
            Launch copy;
            copy.kind = Launch::Kind::Copy;
            copy.dst = inputs_[input]->buffer.ptr();
            copy.src = data_of(output);
            copy.bytes = static_cast<std::size_t>(numel_[output]) * size_of(nodes_[output].spec.dtype);
            out.push_back(copy);
        }
        return out;
    }

    // cuBLASLt where the evaluated layouts suit it, else the generated matmul kernel.
    void append_blas(std::vector<Launch>& out, std::uint32_t id, const std::vector<CuDevicePtr>& ins, CuDevicePtr dst,
                     const DynMap& dims) {
        const NodeSpec& spec = nodes_[id].spec;
        Launch l;
        l.kind = Launch::Kind::Blas;
        l.node = static_cast<int>(id);
        l.a = blas_operand(spec.views[0], dims);
        l.b = blas_operand(spec.views[1], dims);
        l.operands = nodes_[nodes_[id].sources[0]].spec.dtype;
        l.src = ins[0];
        l.args[0] = ins[1];
        l.dst = dst;
        if (blas_accepts(l.a) && blas_accepts(l.b)) {
            out.push_back(l);
            return;
        }
        std::vector<DType> dtypes{l.operands, nodes_[nodes_[id].sources[1]].spec.dtype};
        const Kernel k = lowering_detail::matmul_kernel(spec, dtypes, id);
        CuFunction f = KernelModules::get().function(kernel_source(k), kReduceEntry, driver_->compute_capability(), label(id));
        out.push_back(kernel_launch(id, f, k, dst, ins, dims));
    }

    void enqueue(const Launch& l) {
        switch (l.kind) {
            case Launch::Kind::Kernel: {
                if (l.grid == 0) return;
                std::array<void*, 13> params{};
                std::array<std::uint64_t, 12> args = l.args;
                int node = l.node;
                for (std::uint8_t i = 0; i < l.arg_count; ++i) params[i] = &args[i];
                params[l.arg_count] = &node;
                check_call(api().launch_kernel(l.function, l.grid, 1, 1, l.block, 1, 1, 0, stream_, params.data(), nullptr),
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
                BlasLt::get().matmul(stream_, l.operands, l.a, l.src, l.b, l.args[0], l.dst, l.a.batch);
                return;
        }
    }

    // One execution; with `timed`, the device seconds between events around its work.
    double run(const DynMap& dims, bool timed) {
        driver_->check_usable();
        const DynMap bucket = size_bucket(dims);
        for (std::uint32_t id = 0; id < nodes_.size(); ++id) {
            const NodeSpec& node = nodes_[id].spec;
            numel_[id] = numel_of(node.shape, dims, id);
            planned_[id] = std::max(numel_[id], numel_at(node.shape, bucket));
            if (plan_.nodes[id].role == PlannedNode::Role::Input) {
                check(inputs_[id].has_value(), "CudaRuntime::execute", "input '{}' (node {}) has no data; call set_data",
                      node.op.label, node.hlir);
                check(inputs_[id]->count == numel_[id], "CudaRuntime::execute",
                      "input '{}' (node {}) has {} values but its shape {} needs {}", node.op.label, node.hlir,
                      inputs_[id]->count, to_string(node.shape), numel_[id]);
            }
            if (node.kind == symbol_of(OpKind::Output) && !plan_.nodes[id].aliases_source)
                outputs_[id].reserve(static_cast<std::size_t>(planned_[id]) * size_of(node.dtype));
        }
        plan_memory();
        std::array<std::int64_t, kDimSlots> dim_values{};
        for (auto [c, v] : dims.entries()) dim_values[static_cast<std::size_t>(dim_slot(c))] = v;
        check_call(api().memcpy_htod_async(dims_buffer_.ptr(), dim_values.data(), sizeof dim_values, stream_), "cuMemcpyHtoDAsync");
        check_call(api().memset_d8_async(fault_buffer_.ptr(), 0, 4 * sizeof(std::int64_t), stream_), "cuMemsetD8Async");
        std::vector<Launch> work = launches(dims, bucket);
        std::array<std::int64_t, 4> fault{};
        try {
            if (timed) check_call(api().event_record(start_, stream_), "cuEventRecord");
            replay_or_enqueue(work);
            if (timed) check_call(api().event_record(stop_, stream_), "cuEventRecord");
            check_call(api().memcpy_dtoh_async(fault.data(), fault_buffer_.ptr(), sizeof fault, stream_), "cuMemcpyDtoHAsync");
            check_call(api().stream_synchronize(stream_), "cuStreamSynchronize");
        } catch (const FatalError& e) {
            if (sync_each_launch_) throw;
            throw FatalError("CudaRuntime", fmt::format("{}; the last kernel enqueued before it was reported is {} "
                                                        "(LUMINAL_CUDA_SYNC=1 synchronises after each launch to name the one that faulted)",
                                                        e.what(), last_kernel(work)));
        }
        report(fault);
        hand_carried_state_over();
        executed_ = true;
        if (!timed) return 0;
        float ms = 0;
        check_call(api().event_elapsed(&ms, start_, stop_), "cuEventElapsedTime");
        return ms * 1e-3;
    }

    std::size_t carried_bytes(std::uint32_t output) const {
        return static_cast<std::size_t>(numel_[output]) * size_of(nodes_[output].spec.dtype);
    }
    // An out-of-place carried output is copied into its input's buffer inside
    // the execution when it fits there; one that grew gets a new buffer after
    // it (the execution still read the old one).
    bool carried_fits(std::uint32_t output, std::uint32_t input) const {
        return carried_bytes(output) <= inputs_[input]->buffer.bytes();
    }
    void hand_carried_state_over() {
        for (auto [output, input] : plan_.carried) {
            if (plan_.nodes[output].aliases_source) continue;
            if (!carried_fits(output, input)) {
                DeviceBuffer grown;
                grown.reserve(carried_bytes(output));
                check_call(api().memcpy_dtod_async(grown.ptr(), data_of(output), carried_bytes(output), stream_), "cuMemcpyDtoDAsync");
                check_call(api().stream_synchronize(stream_), "cuStreamSynchronize");
                inputs_[input]->buffer = std::move(grown);
            }
            inputs_[input]->count = numel_[output];
        }
    }

    std::string last_kernel(const std::vector<Launch>& work) const {
        for (auto l = work.rbegin(); l != work.rend(); ++l)
            if (l->kind == Launch::Kind::Kernel || l->kind == Launch::Kind::Blas) return label(static_cast<std::uint32_t>(l->node));
        return "none";
    }

    // Replays the graph captured for this exact work; captures one the second time the same work comes.
    void replay_or_enqueue(const std::vector<Launch>& work) {
        if (sync_each_launch_) {
            for (const Launch& l : work) {
                enqueue(l);
                check_call(api().stream_synchronize(stream_), fmt::format("the launch for {}", label(static_cast<std::uint32_t>(l.node))));
            }
            return;
        }
        for (CapturedGraph& g : graphs_)
            if (g.launches == work) {
                check_call(api().graph_launch(g.exec, stream_), "cuGraphLaunch");
                ++graph_replays_;
                return;
            }
        if (work != last_launches_) {
            for (const Launch& l : work) enqueue(l);
            last_launches_ = work;
            return;
        }
        CapturedGraph g;
        g.launches = work;
        check_call(api().stream_begin_capture(stream_, kCaptureModeThreadLocal), "cuStreamBeginCapture");
        for (const Launch& l : work) enqueue(l);
        check_call(api().stream_end_capture(stream_, &g.graph), "cuStreamEndCapture");
        check_call(api().graph_instantiate(&g.exec, g.graph, 0), "cuGraphInstantiate");
        check_call(api().graph_launch(g.exec, stream_), "cuGraphLaunch");
        ++graph_captures_;
        if (graphs_.size() == kMaxGraphs) {
            api().graph_exec_destroy(graphs_.front().exec);
            api().graph_destroy(graphs_.front().graph);
            graphs_.erase(graphs_.begin());
        }
        graphs_.push_back(std::move(g));
    }

    void report(const std::array<std::int64_t, 4>& fault) const {
        const auto code = static_cast<FaultCode>(fault[0]);
        const auto node = fault[1];
        switch (code) {
            case FaultCode::None: return;
            case FaultCode::GatherIndex:
                throw Error("Gather", fmt::format("node {}: index {} is out of range for {} elements", node, fault[2], fault[3]));
            case FaultCode::ModuloByZero:
                throw Error("Mod", fmt::format("node {}: integer modulo by zero at element {}", node, fault[2]));
            case FaultCode::ScatterIndex:
                throw Error("Scatter", fmt::format("node {}: index {} is out of range for {} elements", node, fault[2], fault[3]));
        }
        throw Error("CudaRuntime", fmt::format("node {}: kernel fault {}", node, fault[0]));
    }

    static constexpr std::size_t kMaxGraphs = 16;
    static constexpr std::size_t kNoScratch = ~std::size_t{0};

    Driver* driver_ = nullptr;
    CuStream stream_ = nullptr;
    CuEvent start_ = nullptr, stop_ = nullptr;
    DeviceBuffer dims_buffer_, fault_buffer_, arena_;
    Plan plan_;
    std::vector<ProgramNode> nodes_;
    std::vector<std::optional<Input>> inputs_;
    std::vector<DeviceBuffer> outputs_;
    std::vector<std::array<CuFunction, 4>> functions_;  // kernel, scatter claim, scatter write, 16-byte-load kernel
    std::vector<std::int64_t> numel_;
    std::vector<std::int64_t> planned_;  // elements memory is planned for: at least numel_, for the dims' bucket
    std::optional<ArenaPlan> arena_plan_;
    std::vector<std::size_t> arena_sizes_;
    std::vector<std::size_t> scratch_of_;
    std::vector<CapturedGraph> graphs_;
    std::vector<Launch> last_launches_;
    std::size_t graph_replays_ = 0, graph_captures_ = 0;
    bool executed_ = false;
    bool sync_each_launch_ = false;
};

}  // namespace luminal::cuda

static_assert(luminal::Runtime<luminal::cuda::CudaRuntime>);
