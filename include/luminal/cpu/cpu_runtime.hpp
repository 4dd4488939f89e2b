#pragma once
// CpuRuntime: the fast CPU backend. Same API and error behaviour as
// ReferenceRuntime (the oracle it is tested against), but buffers are typed
// and contiguous (f32 as float, f16/bf16 as 16-bit patterns, integers in their
// width), views are walked without per-element index algebra, elementwise
// work of any kind runs through one blocked kernel (cpu_fused.hpp), Matmul
// runs on Eigen's GEMM, and intermediate buffers are recycled by liveness
// (cpu_memory.hpp). A carried Output (Graph::carry) that is a Scatter into its
// own Input (a KV cache write) shares that Input's buffer, so a step writes only
// its new rows. Block-quantized weights are read as blocks (quantized.hpp).
// Products, quantized ops and large elementwise regions run on the runtime's
// thread pool (CpuOptions::threads), split so that results do not depend on
// the thread count: deterministic.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <unordered_map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "luminal/egraph/core_rules.hpp"
#include "luminal/egraph/rule.hpp"
#include "luminal/graph/graph.hpp"
#include "luminal/graph/graph_tensor.hpp"
#include "luminal/io/mapped_file.hpp"
#include "luminal/cpu/aligned_buffer.hpp"
#include "luminal/cpu/attention.hpp"
#include "luminal/cpu/cost.hpp"
#include "luminal/cpu/dtype.hpp"
#include "luminal/cpu/expert_matmul.hpp"
#include "luminal/cpu/fused.hpp"
#include "luminal/cpu/indexing.hpp"
#include "luminal/cpu/matmul.hpp"
#include "luminal/cpu/op.hpp"
#include "luminal/cpu/memory.hpp"
#include "luminal/cpu/quantized.hpp"
#include "luminal/lowering/sample_token.hpp"
#include "luminal/cpu/thread_pool.hpp"
#include "luminal/cpu/reduce.hpp"
#include "luminal/cpu/cpu_rules.hpp"
#include "luminal/cpu/view.hpp"
#include "luminal/graph/program.hpp"
#include "luminal/lowering/fused_elementwise.hpp"
#include "luminal/lowering/matmul.hpp"
#include "luminal/runtime/runtime.hpp"

namespace luminal {

struct CpuOptions {
    std::size_t threads = 0;  // the pool's width; 0 = the machine's hardware threads
    // The vector instructions the quantized kernels use; the best this CPU has by default.
    cpu::quant::Isa isa = cpu::quant::best_isa();
};

class CpuRuntime {
public:
    CpuRuntime() : CpuRuntime(CpuOptions{}) {}
    explicit CpuRuntime(const CpuOptions& options)
        : isa_(options.isa), threads_(options.threads) {
        check(cpu::quant::supports(isa_), "CpuRuntime", "this CPU cannot run the {} kernels",
              cpu::quant::name_of(isa_));
        add_op<SampleTokenOp>();
        add_op<ArgsortOp>();
    }

    std::size_t threads() const { return threads_->size(); }
    cpu::quant::Isa isa() const { return isa_; }

    // The search picks among core rewrites and the CPU kernels (Matmul, fused regions).
    using Rules = egraph::CpuRules;

    CostModel cost_model() const { return cpu::cost_model(); }

    // Lets programs use the user op T (see cpu_op.hpp): its cpu() runs it.
    template <BackendOpType T>
        requires CpuOp<T>
    CpuRuntime& add_op() {
        user_ops_[op_symbol<T>] = [](const OpPayload& payload, const CpuOpCall& call) {
            const T* op = payload.as<T>();
            check(op != nullptr, "CpuRuntime", "op '{}' has the symbol of '{}'", payload.name(), T::name);
            op->cpu(call);
        };
        return *this;
    }

    void load(const Program& program, InputBinding binding = InputBinding::Drop) {
        std::vector<std::optional<InputData>> kept(program.nodes.size());
        if (binding == InputBinding::Keep)
            for (std::uint32_t i = 0; i < program.nodes.size(); ++i)
                if (auto old = same_input(program.nodes[i].spec)) kept[i] = std::move(inputs_[*old]);
        guards_ = program.guards;
        nodes_ = program.nodes;
        carried_ = carried_indices(program);
        const std::size_t count = nodes_.size();
        plans_.assign(count, Plan{});
        last_use_.resize(count);
        for (std::uint32_t id = 0; id < count; ++id) last_use_[id] = id;  // unused results die at once
        for (std::uint32_t id = 0; id < count; ++id) {
            const ProgramNode& node = nodes_[id];
            check(node.sources.size() == node.spec.views.size(), "CpuRuntime::load",
                  "node {} has {} sources but {} views", id, node.sources.size(), node.spec.views.size());
            for (std::uint32_t source : node.sources) {
                check(source < id, "CpuRuntime::load", "node {} reads node {}, which does not come before it", id,
                      source);
                last_use_[source] = std::max(last_use_[source], id);
            }
            plans_[id] = plan(node, id);
        }
        plan_output_forwarding();
        plan_in_place_updates();
        plan_interleaved_weights();
        inputs_ = std::move(kept);
        outputs_.assign(count, cpu::AlignedBuffer{});
        computed_.assign(count, false);
        data_.assign(count, nullptr);
        numel_.assign(count, 0);
        block_.assign(count, kNoBlock);
        pool_.clear();
    }

    // Binds values to an Input tensor; they persist across execute() calls.
    void set_data(const GraphTensor& t, const std::vector<float>& values) { set_values(t, std::span(values)); }
    template <typename T>
    void set_data(const GraphTensor& t, const std::vector<T>& values) { set_values(t, std::span(values)); }

    // Binds raw little-endian elements of the input's own dtype (bf16 weights
    // straight from a safetensors file, say): one copy, no conversion.
    void set_bytes(const GraphTensor& t, std::span<const std::byte> bytes) {
        std::uint32_t index = input_index(nodes_, t.id());
        std::size_t count = byte_input_count(nodes_[index].spec, bytes.size(), index);
        InputData in{cpu::AlignedBuffer(bytes.size()), static_cast<std::int64_t>(count), nullptr, {}};
        if (!bytes.empty()) std::memcpy(in.buffer.data(), bytes.data(), bytes.size());
        bind_input(index, std::move(in));
    }

    // Binds zeros to an Input: pages that take memory only once written, so a
    // KV cache for a long context costs the rows a generation writes, and
    // clearing it costs no time.
    void set_zeros(const GraphTensor& t) {
        std::uint32_t index = input_index(nodes_, t.id());
        const NodeSpec& node = nodes_[index].spec;
        const std::int64_t count = numel_of(node.shape, DynMap{}, index);
        bind_input(index, InputData{cpu::AlignedBuffer::zeroed(static_cast<std::size_t>(count) * size_of(node.dtype)),
                                    count, nullptr, {}});
    }

    // As set_bytes, without the copy: the runtime reads `bytes` where they are
    // (a memory-mapped weight file) and keeps `owner` alive while it does.
    // Not for carried inputs, which the runtime writes, except one updated in
    // place (updates_input_in_place): its Scatter writes the new elements into
    // `bytes` themselves, so the caller's memory (a torch KV cache) holds the
    // new state after each execution and no copy of it is ever made.
    void borrow_bytes(const GraphTensor& t, std::span<const std::byte> bytes, std::shared_ptr<const void> owner) {
        std::uint32_t index = input_index(nodes_, t.id());
        for (auto [output, input] : carried_)
            check(input != index || updates_in_place(output), "CpuRuntime::borrow_bytes", "input '{}' is carried "
                  "state that the runtime writes out of place: bind it with set_bytes", nodes_[index].spec.op.label);
        std::size_t count = byte_input_count(nodes_[index].spec, bytes.size(), index);
        InputData in{cpu::AlignedBuffer{}, static_cast<std::int64_t>(count), bytes.data(), std::move(owner)};
        bind_input(index, std::move(in));
    }

    void execute(const DynMap& dims) {
        guards_.check_against(dims);
        pool_.reset();
        std::fill(block_.begin(), block_.end(), kNoBlock);
        std::fill(computed_.begin(), computed_.end(), false);
        for (std::uint32_t id = 0; id < nodes_.size(); ++id) {
            const NodeSpec& node = nodes_[id].spec;
            std::int64_t n = numel_of(node.shape, dims, id);
            numel_[id] = n;
            if (plans_[id].exec == Exec::Input) {
                check(inputs_[id].has_value(), "CpuRuntime::execute", "input '{}' (node {}) has no data; call set_data",
                      node.op.label, node.hlir);
                check(inputs_[id]->count == n, "CpuRuntime::execute",
                      "input '{}' (node {}) has {} values but its shape {} needs {}", node.op.label, node.hlir,
                      inputs_[id]->count, to_string(node.shape), n);
                if (inputs_[id]->released && (!interleaved_[id] || interleaved_[id]->original_read))
                    restore_blocks(id);  // a program kept from another one (the search) reads the file's layout
                data_[id] = inputs_[id]->data();
                if (interleaved_[id]) interleave_input(id);
                continue;
            }
            std::size_t bytes = static_cast<std::size_t>(n) * size_of(node.dtype);
            if (plans_[id].forwarded) {  // the producer already wrote this output's buffer
                data_[id] = data_[nodes_[id].sources[0]];
                computed_[id] = true;
                continue;
            }
            if (plans_[id].in_place_input) {
                data_[id] = data_[*plans_[id].in_place_input];
            } else if (plans_[id].exec == Exec::Output || plans_[id].forward_to) {
                std::uint32_t out = plans_[id].forward_to.value_or(id);
                outputs_[out].reserve(bytes);
                data_[id] = outputs_[out].data();
            } else {
                block_[id] = pool_.acquire(bytes);
                data_[id] = pool_.data(block_[id]);
            }
            run(id, n, dims);
            computed_[id] = true;
            for (std::uint32_t source : plans_[id].sources) release_if_dead(source, id);
            release_if_dead(id, id);
        }
        // Out-of-place carried outputs become their inputs' data; the inputs'
        // old buffers are the outputs' buffers next time.
        for (auto [output, input] : carried_) {
            if (updates_in_place(output)) {  // its values live in the input's buffer: an old one kept by bind_input goes
                outputs_[output] = cpu::AlignedBuffer{};
                continue;
            }
            std::swap(outputs_[output], inputs_[input]->buffer);
            inputs_[input]->count = numel_[output];
        }
    }

    double time_execution(const DynMap& dims, std::size_t reps) { return host_execution_seconds(*this, dims, reps); }

    std::vector<float> get_f32(const GraphTensor& t) const { return get<float>(t); }
    template <typename T>
    std::vector<T> get(const GraphTensor& t) const {
        std::uint32_t id = output_node(t);
        std::vector<T> out(static_cast<std::size_t>(numel_[id]));
        cpu::visit_dtype(nodes_[id].spec.dtype, [&]<DType D>(cpu::DTypeTag<D>) {
            auto* src = reinterpret_cast<const cpu::storage_t<D>*>(data_[id]);
            for (std::size_t i = 0; i < out.size(); ++i) {
                if constexpr (std::is_floating_point_v<T>)
                    out[i] = static_cast<T>(static_cast<double>(cpu::to_lane<D>(src[i])));
                else
                    out[i] = static_cast<T>(cpu::read_as<std::int64_t, D>(src[i]));
            }
        });
        return out;
    }

    // Whether the carried `output` is updated in place: its Scatter writes only
    // the scattered elements into the carried input's buffer, O(rows written).
    // False for an output computed out of place (or not carried).
    bool updates_in_place(const GraphTensor& output) const {
        return updates_in_place(output_index(nodes_, output.graph(), output.id()));
    }

    // Whether `input` is carried state whose output updates it in place: what
    // borrow_bytes accepts for a carried input.
    bool updates_input_in_place(const GraphTensor& input) const {
        const std::uint32_t index = input_index(nodes_, input.id());
        for (auto [output, carried_input] : carried_)
            if (carried_input == index) return updates_in_place(output);
        return false;
    }

    // Bytes one execution at `dims` needs for its intermediate buffers and
    // outputs at the widest point: buffers alive together summed in program
    // order (the pool may round a block up). What a caller checks before
    // executing a shape it has not run.
    std::uint64_t planned_bytes(const DynMap& dims) const {
        std::uint64_t live = 0, peak = 0, outputs = 0;
        std::vector<std::uint64_t> held(nodes_.size(), 0);
        for (std::uint32_t id = 0; id < nodes_.size(); ++id) {
            const Plan& p = plans_[id];
            if (p.exec == Exec::Input || p.forwarded || p.in_place_input) continue;
            const NodeSpec& node = nodes_[id].spec;
            const auto bytes = static_cast<std::uint64_t>(numel_of(node.shape, dims, id)) * size_of(node.dtype);
            if (p.exec == Exec::Output || p.forward_to) {
                outputs += bytes;
                continue;
            }
            held[id] = bytes;
            live += bytes;
            peak = std::max(peak, live);
            for (std::uint32_t source : p.sources)
                if (last_use_[source] == id) live -= std::exchange(held[source], 0);
            if (last_use_[id] == id) live -= std::exchange(held[id], 0);
        }
        return peak + outputs;
    }

    // Bytes held for intermediate buffers (not inputs or outputs) at the
    // widest point of the executions so far, after reuse.
    std::size_t peak_bytes() const { return pool_.held_bytes(); }

private:
    enum class Exec {
        Input, Output, Constant, Elementwise, Reduce, Gather, Scatter, Matmul, UserOp,
        QuantizedMatmul, QuantizedGather, Dequantize, ExpertMatmul, Attention
    };
    using UserKernel = std::function<void(const OpPayload&, const CpuOpCall&)>;
    static constexpr cpu::BufferPool::BlockId kNoBlock = ~cpu::BufferPool::BlockId{0};

    struct Plan {
        Exec exec = Exec::Input;
        std::vector<std::uint32_t> sources;  // distinct
        std::shared_ptr<const cpu::FusedKernel> kernel;  // Output and Elementwise
        UserKernel user;                                  // UserOp
        std::vector<std::shared_ptr<const cpu::FusedKernel>> gathers;  // UserOp: copies each input's view contiguous
        std::optional<std::uint32_t> forward_to;  // writes straight into this Output's buffer
        bool forwarded = false;                   // Output whose producer wrote its buffer
        std::optional<std::uint32_t> in_place_input;  // Scatter writing into this carried Input's buffer
        bool reads_interleaved = false;  // QuantizedMatmul/Gather reading its weight's repacked copy
    };
    struct InterleavedWeight {
        QuantFormat format;
        std::int64_t rows, cols;
        bool original_read;  // by a Blocks product or a Dequantize
    };
    struct InputData {
        cpu::AlignedBuffer buffer;
        std::int64_t count = 0;
        const std::byte* borrowed = nullptr;  // borrow_bytes: read in place, written only by an in-place update
        std::shared_ptr<const void> owner{};
        cpu::AlignedBuffer interleaved{};  // the blocks repacked for Interleaved8 products; empty until then
        std::optional<InterleavedWeight> interleaved_as{};  // the matrix `interleaved` holds
        bool released = false;  // `buffer` freed after the repack: nothing read the blocks
        // Kernels take inputs as std::byte*; a borrowed input is only read.
        std::byte* data() { return borrowed ? const_cast<std::byte*>(borrowed) : buffer.data(); }
    };

    // Decides how a node runs; elementwise primitives become one-step programs.
    Plan plan(const ProgramNode& node, std::uint32_t id) const {
        Plan p;
        for (std::uint32_t s : node.sources)
            if (std::find(p.sources.begin(), p.sources.end(), s) == p.sources.end()) p.sources.push_back(s);
        const NodeSpec& spec = node.spec;
        auto program = std::make_shared<FusedProgram>();
        auto kind = static_cast<OpKind>(spec.kind);
        if (spec.payload_as<MatmulOp>()) {
            check(node.sources.size() == 2, "CpuRuntime::load", "Matmul node {} needs 2 inputs", id);
            p.exec = Exec::Matmul;
            return p;
        }
        if (spec.payload_as<AttentionOp>()) {
            check(node.sources.size() == 4, "CpuRuntime::load", "Attention node {} needs 4 inputs", id);
            for (std::uint32_t s : node.sources)
                check(is_float(nodes_[s].spec.dtype), "CpuRuntime::load", "Attention node {} reads a {} input", id,
                      name_of(nodes_[s].spec.dtype));
            p.exec = Exec::Attention;
            return p;
        }
        if (spec.payload_as<ExpertMatmulOp>()) {
            check(node.sources.size() == 3, "CpuRuntime::load", "ExpertMatmul node {} needs 3 inputs", id);
            p.exec = Exec::ExpertMatmul;
            return p;
        }
        if (spec.payload_as<QuantizedMatmulOp>() || spec.payload_as<QuantizedGatherOp>() || spec.payload_as<DequantizeOp>()) {
            p.exec = spec.payload_as<QuantizedMatmulOp>()   ? Exec::QuantizedMatmul
                     : spec.payload_as<QuantizedGatherOp>() ? Exec::QuantizedGather
                                                            : Exec::Dequantize;
            check(node.sources.size() == (p.exec == Exec::Dequantize ? 1u : 2u), "CpuRuntime::load",
                  "{} node {} has {} inputs", spec.op.name(), id, node.sources.size());
            return p;
        }
        if (const auto* fused = spec.payload_as<FusedElementwiseOp>()) {
            check(fused->program != nullptr, "CpuRuntime::load", "FusedElementwise node {} has no program", id);
            p.exec = Exec::Elementwise;
            p.kernel = std::make_shared<cpu::FusedKernel>(fused->program, source_dtypes(node), spec.dtype, id, isa_);
            return p;
        }
        if (spec.op.payload) {
            auto user = user_ops_.find(spec.kind);
            check(user != user_ops_.end(), "CpuRuntime::load",
                  "node {}: the CPU runtime cannot run op '{}' (a user op needs CpuRuntime::add_op<{}>())", id,
                  spec.op.name(), spec.op.name());
            p.exec = Exec::UserOp;
            p.user = user->second;
            for (std::uint32_t k = 0; k < node.sources.size(); ++k) {
                const DType t = nodes_[node.sources[k]].spec.dtype;
                auto copy = std::make_shared<FusedProgram>();
                copy->steps.push_back(FusedStep{OpKind::Cast, 0, 0, t, 0, Expression()});
                p.gathers.push_back(
                    std::make_shared<cpu::FusedKernel>(std::move(copy), std::vector<DType>{t}, t, id, isa_));
            }
            return p;
        }
        switch (kind) {
            case OpKind::Input: p.exec = Exec::Input; return p;
            case OpKind::Constant: p.exec = Exec::Constant; return p;
            case OpKind::SumReduce: case OpKind::MaxReduce: p.exec = Exec::Reduce; return p;
            case OpKind::Gather: p.exec = Exec::Gather; return p;
            case OpKind::Scatter: p.exec = Exec::Scatter; return p;
            case OpKind::Output: case OpKind::Cast:
                program->steps.push_back(FusedStep{OpKind::Cast, 0, 0, spec.dtype, 0, Expression()});
                break;
            case OpKind::Iota: program->steps.push_back(FusedStep{OpKind::Iota, 0, 0, spec.dtype, 0, spec.op.iota}); break;
            default:  // unary and binary primitives
                program->steps.push_back(FusedStep{kind, 0, 1, spec.dtype, 0, Expression()});
                if (is_unary(kind)) program->steps.back().b = 0;
                break;
        }
        p.exec = kind == OpKind::Output ? Exec::Output : Exec::Elementwise;
        p.kernel = std::make_shared<cpu::FusedKernel>(std::move(program), source_dtypes(node), spec.dtype, id, isa_);
        return p;
    }

    // An Output that copies, unchanged, a result nobody else reads lets the
    // producer write into the output buffer directly: no copy, no pool block.
    void plan_output_forwarding() {
        std::vector<std::uint32_t> readers(nodes_.size(), 0);
        for (auto& n : nodes_)
            for (std::uint32_t s : n.sources) ++readers[s];
        for (std::uint32_t id = 0; id < nodes_.size(); ++id) {
            if (plans_[id].exec != Exec::Output) continue;
            std::uint32_t s = nodes_[id].sources[0];
            const NodeSpec &out = nodes_[id].spec, &src = nodes_[s].spec;
            bool forward = readers[s] == 1 && plans_[s].exec != Exec::Input && plans_[s].exec != Exec::Output &&
                           src.dtype == out.dtype && out.views[0].is_contiguous() &&
                           product(src.shape) == product(out.shape);
            if (!forward) continue;
            plans_[s].forward_to = id;
            plans_[id].forwarded = true;
        }
    }

    // The index of the bound Input node in the current program that `input` stands for too.
    std::optional<std::uint32_t> same_input(const NodeSpec& input) const {
        if (input.kind != symbol_of(OpKind::Input)) return std::nullopt;
        for (std::uint32_t i = 0; i < nodes_.size(); ++i) {
            const NodeSpec& s = nodes_[i].spec;
            if (s.kind == input.kind && s.hlir == input.hlir && s.dtype == input.dtype && s.shape == input.shape &&
                inputs_.size() == nodes_.size() && inputs_[i].has_value())
                return i;
        }
        return std::nullopt;
    }

    void run_user_op(std::uint32_t id, std::vector<cpu::StridedView> views, const DynMap& dims);

    // A carried Output that publishes, unchanged, a Scatter into its own Input
    // needs no copy of that Input: the Scatter writes its elements into the
    // Input's buffer, which the Output shares. Safe when the Scatter reads the
    // whole Input contiguously as its dest and is its last reader (nothing
    // after it expects the old values), and reads it nowhere else.
    void plan_in_place_updates() {
        for (auto [output, input] : carried_) {
            const ProgramNode& out = nodes_[output];
            const std::uint32_t s = out.sources[0];
            const ProgramNode& producer = nodes_[s];
            const NodeSpec& in = nodes_[input].spec;
            bool in_place = plans_[s].exec == Exec::Scatter && producer.sources[0] == input &&
                            producer.sources[1] != input && producer.sources[2] != input && last_use_[input] == s &&
                            producer.spec.views[0].is_contiguous() &&
                            product(producer.spec.views[0].dims()) == product(in.shape) &&
                            producer.spec.dtype == in.dtype && out.spec.dtype == in.dtype &&
                            out.spec.views[0].is_contiguous() &&
                            product(producer.spec.shape) == product(out.spec.shape);
            if (!in_place) continue;
            plans_[s].forward_to.reset();
            plans_[s].in_place_input = input;
            plans_[output].forwarded = true;
        }
    }

    // A block-quantized weight that Interleaved8 products read is repacked once
    // per binding (when bound, or at the next execution for a weight kept from
    // another program); products of that layout and lookups
    // then read the repacked copy. Where nothing else reads the file's blocks,
    // their mapped pages are handed back (they are re-read from the file if
    // ever touched again) and a copy of them is freed, so memory stays at the
    // weights' size.
    void plan_interleaved_weights() {
        interleaved_.assign(nodes_.size(), std::nullopt);
        for (std::uint32_t id = 0; id < nodes_.size(); ++id) {
            const auto* op = nodes_[id].spec.payload_as<QuantizedMatmulOp>();
            if (!op || op->layout != WeightLayout::Interleaved8) continue;
            const std::uint32_t w = nodes_[id].sources[1];
            check(plans_[w].exec == Exec::Input, "CpuRuntime::load", "node {}: an interleaved product reads its "
                  "weight from node {}, which is not an input", id, w);
            auto& plan = interleaved_[w];
            check(!plan || (plan->format == op->format && plan->rows == op->rows && plan->cols == op->cols),
                  "CpuRuntime::load", "node {}: input {} is read as two different interleaved matrices", id, w);
            plan = InterleavedWeight{op->format, op->rows, op->cols, false};
        }
        for (std::uint32_t id = 0; id < nodes_.size(); ++id) {
            const NodeSpec& spec = nodes_[id].spec;
            const auto* product = spec.payload_as<QuantizedMatmulOp>();
            const auto* gather = spec.payload_as<QuantizedGatherOp>();
            if (product) plans_[id].reads_interleaved = product->layout == WeightLayout::Interleaved8;
            if (const auto* w = gather ? &interleaved_[nodes_[id].sources[0]] : nullptr; w && *w)
                plans_[id].reads_interleaved = gather->format == (*w)->format && gather->rows == (*w)->rows &&
                                               gather->cols == (*w)->cols;
            for (std::size_t k = 0; k < nodes_[id].sources.size(); ++k) {
                const std::uint32_t s = nodes_[id].sources[k];
                const bool weight_slot = k == (product ? 1u : 0u);
                if (interleaved_[s] && !(plans_[id].reads_interleaved && weight_slot))
                    interleaved_[s]->original_read = true;
            }
        }
    }
    void interleave_input(std::uint32_t id) {
        InputData& in = *inputs_[id];
        if (in.interleaved.data()) return;
        const InterleavedWeight& w = *interleaved_[id];
        ::luminal::quantized_detail::check_blocks(w.format, w.rows, w.cols, in.count, "QuantizedMatmul", id);
        in.interleaved.reserve(static_cast<std::size_t>(in.count));
        cpu::interleave_weight(w.format, w.rows, w.cols, in.data(), in.interleaved.data(), *threads_);
        in.interleaved_as = w;
        if (w.original_read) return;
        if (in.borrowed) io::release_mapped_pages({in.borrowed, static_cast<std::size_t>(in.count)});
        else in.buffer = cpu::AlignedBuffer{}, in.released = true;  // a copy (reordered Q/K rows): freed
    }
    // The file's blocks again, from the repacked copy (the repack is exact both ways).
    void restore_blocks(std::uint32_t id) {
        InputData& in = *inputs_[id];
        const InterleavedWeight& w = *in.interleaved_as;
        in.buffer.reserve(static_cast<std::size_t>(in.count));
        cpu::deinterleave_weight(w.format, w.rows, w.cols, in.interleaved.data(), in.buffer.data(), *threads_);
        in.released = false;
    }

    // Where node `reader` finds the blocks of its weight, source `s`.
    const std::byte* weight_data(std::uint32_t reader, std::uint32_t s) const {
        return plans_[reader].reads_interleaved ? inputs_[s]->interleaved.data() : data_[s];
    }

    bool updates_in_place(std::uint32_t output) const {
        return plans_[output].forwarded && plans_[nodes_[output].sources[0]].in_place_input.has_value();
    }

    // Rebinding a carried input leaves its output readable: after execute()
    // the output's values are in the input's buffer, which the output keeps.
    // A weight that interleaved products read is repacked here, when it is bound
    // (the model's load), not in the first execution (the prompt's time).
    void bind_input(std::uint32_t index, InputData in) {
        for (auto [output, input] : carried_)
            if (input == index && computed_[output] && inputs_[index])
                outputs_[output] = std::move(inputs_[index]->buffer);
        inputs_[index] = std::move(in);
        // Blocks that do not fit the matrix are left to execute(), whose Error names the sizes.
        const auto& w = interleaved_[index];
        if (w && w->cols % block_elements(w->format) == 0 &&
            inputs_[index]->count == quantized_bytes(w->format, w->rows, w->cols))
            interleave_input(index);
    }

    std::vector<DType> source_dtypes(const ProgramNode& node) const {
        std::vector<DType> out;
        for (std::uint32_t s : node.sources) out.push_back(nodes_[s].spec.dtype);
        return out;
    }

    template <typename T>
    void set_values(const GraphTensor& t, std::span<const T> values) {
        std::uint32_t index = input_index(nodes_, t.id());
        const NodeSpec& node = nodes_[index].spec;
        check_input_length(node, values.size(), index);
        InputData in{cpu::AlignedBuffer(values.size() * size_of(node.dtype)), static_cast<std::int64_t>(values.size()),
                     nullptr, {}};
        cpu::visit_dtype(node.dtype, [&]<DType D>(cpu::DTypeTag<D>) {
            auto* out = reinterpret_cast<cpu::storage_t<D>*>(in.buffer.data());
            for (std::size_t i = 0; i < values.size(); ++i) {
                if constexpr (std::is_floating_point_v<T>)
                    out[i] = cpu::to_storage<D>(cpu::cast_double<D>(static_cast<double>(values[i])));
                else
                    out[i] = cpu::to_storage<D>(cpu::cast_lane<D>(static_cast<std::int64_t>(values[i])));
            }
        });
        bind_input(index, std::move(in));
    }

    std::uint32_t output_node(const GraphTensor& t) const {
        std::uint32_t out = output_index(nodes_, t.graph(), t.id());
        check(computed_[out], "get", "output node {} has not been computed; call execute first", nodes_[out].spec.hlir);
        return out;
    }

    void release_if_dead(std::uint32_t node, std::uint32_t consumer) {
        if (last_use_[node] != consumer || block_[node] == kNoBlock) return;
        pool_.release(block_[node]);
        block_[node] = kNoBlock;
    }

    // Input k of node id, bound to dims, checked to stay inside its buffer.
    cpu::StridedView bound_view(std::uint32_t id, std::size_t k, const DynMap& dims) const {
        cpu::StridedView v(nodes_[id].spec.views[k], dims);
        std::uint32_t source = nodes_[id].sources[k];
        if (auto e = v.extent()) {
            std::int64_t bad = e->first < 0 ? e->first : e->second;
            check(e->first >= 0 && e->second < numel_[source], "CpuRuntime",
                  "node {} reads position {} of a {}-element buffer (invalid view)", id, bad, numel_[source]);
        }
        return v;
    }
    cpu::ViewedBuffer viewed(std::uint32_t id, std::size_t k, const cpu::StridedView& v) const {
        std::uint32_t source = nodes_[id].sources[k];
        return cpu::ViewedBuffer{nodes_[source].spec.dtype, data_[source], v};
    }

    void run(std::uint32_t id, std::int64_t n, const DynMap& dims);

    std::vector<ProgramNode> nodes_;
    std::vector<std::pair<std::uint32_t, std::uint32_t>> carried_;  // (Output, Input) program indices
    std::vector<Plan> plans_;
    std::vector<std::uint32_t> last_use_;
    std::vector<std::optional<InterleavedWeight>> interleaved_;  // per input node
    std::vector<std::optional<InputData>> inputs_;
    std::vector<cpu::AlignedBuffer> outputs_;  // per Output node; kept for get()
    std::vector<bool> computed_;
    // Per execution: where each node's values are, and how many.
    std::vector<std::byte*> data_;
    std::vector<std::int64_t> numel_;
    std::vector<cpu::BufferPool::BlockId> block_;
    cpu::BufferPool pool_;
    // Elements per thread at least in an elementwise region: below, waking costs more.
    static constexpr std::int64_t kElementwiseGrain = 1 << 14;
    std::vector<cpu::FusedScratch> fused_scratch_;  // one per thread
    cpu::ReduceScratch reduce_scratch_;
    cpu::MatmulScratch matmul_scratch_;
    cpu::IndexScratch index_scratch_;
    cpu::QuantScratch quant_scratch_;
    cpu::ExpertScratch expert_scratch_;
    cpu::AttentionScratch attention_scratch_;
    std::unordered_map<OpSymbol, UserKernel> user_ops_;
    cpu::quant::Isa isa_;
    ShapeGuards guards_;
    cpu::OwnedThreadPool threads_;
};

inline void CpuRuntime::run(std::uint32_t id, std::int64_t n, const DynMap& dims) {
    const ProgramNode& node = nodes_[id];
    const NodeSpec& spec = node.spec;
    const Plan& p = plans_[id];
    std::byte* out = data_[id];
    std::vector<cpu::StridedView> views;
    for (std::size_t k = 0; k < node.sources.size(); ++k) views.push_back(bound_view(id, k, dims));
    auto source_dtype = [&](std::size_t k) { return nodes_[node.sources[k]].spec.dtype; };

    switch (p.exec) {
        case Exec::Input: return;
        case Exec::Constant:
            cpu::visit_dtype(spec.dtype, [&]<DType D>(cpu::DTypeTag<D>) {
                auto* o = reinterpret_cast<cpu::storage_t<D>*>(out);
                std::fill(o, o + n, cpu::storage_t<D>{});
                if (n > 0) o[0] = cpu::to_storage<D>(cpu::cast_double<D>(spec.op.value));
            });
            return;
        case Exec::Output: case Exec::Elementwise: {
            auto kind = static_cast<OpKind>(spec.kind);
            if (is_unary(kind))
                check(is_float(source_dtype(0)), name_of(kind).data(), "node {} needs a float input, got {}", id,
                      name_of(source_dtype(0)));
            // Each input is read at the output's element index; a rank-0 view is
            // a scalar read everywhere (as BoundView reads it).
            for (std::size_t k = 0; k < views.size(); ++k)
                check(views[k].numel() == n || spec.views[k].rank() == 0, "CpuRuntime",
                      "node {} input {} has {} elements through its view but the node has {}", id, k, views[k].numel(), n);
            // A same-dtype copy of a contiguous range needs no kernel.
            bool copy = (kind == OpKind::Output || kind == OpKind::Cast) && source_dtype(0) == spec.dtype &&
                        views[0].kind() == cpu::StridedView::Kind::Contiguous;
            if (copy) {
                std::size_t size = size_of(spec.dtype);
                if (n > 0) std::memcpy(out, data_[node.sources[0]] + views[0].base() * size, n * size);
                return;
            }
            std::vector<const std::byte*> sources;
            for (std::uint32_t s : node.sources) sources.push_back(data_[s]);
            cpu::FusedKernel::Bound bound = p.kernel->bind(std::move(views), std::move(sources), dims);
            fused_scratch_.resize(static_cast<std::size_t>(threads_->max_parts()));
            threads_->parallel_parts(n, kElementwiseGrain, [&](std::int64_t part, std::int64_t begin, std::int64_t end) {
                p.kernel->run(bound, out, begin, end, fused_scratch_[static_cast<std::size_t>(part)]);
            });
            return;
        }
        case Exec::Reduce:
        {
            check(spec.op.axis < spec.views[0].rank(), "CpuRuntime", "node {}: reduce axis {} out of range", id,
                  spec.op.axis);
            std::int64_t kept = 1;
            for (std::size_t a = 0; a < spec.views[0].rank(); ++a)
                if (a != spec.op.axis) kept *= spec.views[0].dim(a).eval(dims);
            check(kept == n, "CpuRuntime", "node {}: reduce keeps {} elements but the node has {}", id, kept, n);
            cpu::reduce(static_cast<OpKind>(spec.kind), spec.op.axis, source_dtype(0), data_[node.sources[0]],
                        spec.views[0], dims, spec.dtype, out, reduce_scratch_);
            return;
        }
        case Exec::Gather:
            check(views[1].numel() == n, "Gather", "node {}: {} indexes for {} outputs", id, views[1].numel(), n);
            cpu::gather(viewed(id, 0, views[0]), viewed(id, 1, views[1]), spec.dtype, out, n, id, index_scratch_);
            return;
        case Exec::Scatter:
            check(views[0].numel() == n, "Scatter", "node {}: dest has {} elements, the output {}", id,
                  views[0].numel(), n);
            if (p.in_place_input)  // out is dest's own buffer: only the scattered elements change
                cpu::scatter_into(viewed(id, 1, views[1]), viewed(id, 2, views[2]), spec.dtype, out, n, id,
                                  index_scratch_);
            else
                cpu::scatter(viewed(id, 0, views[0]), viewed(id, 1, views[1]), viewed(id, 2, views[2]), spec.dtype,
                             out, n, id, index_scratch_);
            return;
        case Exec::Matmul:
            matmul_scratch_.pool = threads_.get();
            matmul_scratch_.isa = isa_;
            cpu::matmul(source_dtype(0), data_[node.sources[0]], spec.views[0], source_dtype(1),
                        data_[node.sources[1]], spec.views[1], dims, spec.dtype, out, n, id, matmul_scratch_);
            return;
        case Exec::ExpertMatmul:
            cpu::expert_matmul(*spec.payload_as<ExpertMatmulOp>(), source_dtype(0), data_[node.sources[0]], views[0],
                               source_dtype(1), data_[node.sources[1]], spec.views[1], source_dtype(2),
                               data_[node.sources[2]], views[2], dims, reinterpret_cast<float*>(out), n, id, isa_,
                               *threads_, expert_scratch_);
            return;
        case Exec::Attention: {
            auto dim = [&](std::size_t k, std::size_t axis) { return spec.views[k].dim(axis).eval(dims); };
            const std::int64_t heads = dim(0, 0), group = dim(0, 1), s = dim(0, 2), d = dim(0, 3), t = dim(1, 2),
                               dv = dim(2, 2);
            check(n == heads * group * s * dv, "Attention", "node {}: {} outputs for {} x {} x {} rows of {}", id, n, heads,
                  group, s, dv);
            auto operand = [&](std::size_t k) {
                return cpu::AttentionOperand{source_dtype(k), data_[node.sources[k]], &views[k],
                                             cpu::PlainRows::of(spec.views[k], dims)};
            };
            cpu::attention(*spec.payload_as<AttentionOp>(), operand(0), operand(1), operand(2), operand(3), heads, group, s,
                           d, t, dv, reinterpret_cast<float*>(out), isa_, *threads_, attention_scratch_);
            return;
        }
        case Exec::UserOp:
            run_user_op(id, std::move(views), dims);
            return;
        case Exec::QuantizedMatmul: {
            const std::uint32_t blocks = node.sources[1];
            check(source_dtype(1) == DType::U8, "QuantizedMatmul", "node {}: blocks must be u8", id);
            const auto& op = *spec.payload_as<QuantizedMatmulOp>();
            cpu::quantized_matmul(op, source_dtype(0), data_[node.sources[0]], views[0], weight_data(id, blocks),
                                  views[1], reinterpret_cast<float*>(out), n, id, isa_, *threads_, quant_scratch_);
            return;
        }
        case Exec::QuantizedGather:
            check(source_dtype(0) == DType::U8, "QuantizedGather", "node {}: blocks must be u8", id);
            cpu::quantized_gather(*spec.payload_as<QuantizedGatherOp>(), weight_data(id, node.sources[0]),
                                  views[0], p.reads_interleaved, source_dtype(1), data_[node.sources[1]], views[1], reinterpret_cast<float*>(out), n,
                                  id, quant_scratch_);
            return;
        case Exec::Dequantize:
            check(source_dtype(0) == DType::U8, "Dequantize", "node {}: blocks must be u8", id);
            cpu::dequantize(*spec.payload_as<DequantizeOp>(), data_[node.sources[0]], views[0],
                            reinterpret_cast<float*>(out), n, id, isa_, *threads_);
            return;
    }
}

inline void CpuRuntime::run_user_op(std::uint32_t id, std::vector<cpu::StridedView> views, const DynMap& dims) {
    const ProgramNode& node = nodes_[id];
    const Plan& p = plans_[id];
    std::vector<cpu::AlignedBuffer> copies;
    std::vector<CpuTensor> inputs;
    for (std::size_t k = 0; k < node.sources.size(); ++k) {
        const DType t = nodes_[node.sources[k]].spec.dtype;
        const std::int64_t count = views[k].numel();
        copies.emplace_back(static_cast<std::size_t>(count) * size_of(t));
        cpu::FusedKernel::Bound bound = p.gathers[k]->bind({views[k]}, {data_[node.sources[k]]}, dims);
        fused_scratch_.resize(std::max<std::size_t>(fused_scratch_.size(), 1));
        p.gathers[k]->run(bound, copies.back().data(), 0, count, fused_scratch_[0]);
        std::vector<std::int64_t> dims_k;
        for (auto& d : node.spec.views[k].dims()) dims_k.push_back(d.eval(dims));
        inputs.push_back(CpuTensor{t, std::move(dims_k), copies.back().data()});
    }
    std::vector<std::int64_t> out_dims;
    for (auto& d : node.spec.shape) out_dims.push_back(d.eval(dims));
    const CpuTensor out{node.spec.dtype, std::move(out_dims), data_[id]};
    p.user(*node.spec.op.payload, CpuOpCall{inputs, out, dims});
}

}  // namespace luminal

static_assert(luminal::Runtime<luminal::CpuRuntime>);
