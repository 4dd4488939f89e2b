#pragma once
// Ops beyond the HLIR primitives, declared as types by a backend or a user:
//
//   struct Axpy {                                   // the payload: the op's attributes
//       static constexpr std::string_view name = "Axpy";
//       double alpha = 1;
//       bool operator==(const Axpy&) const = default;
//       std::size_t hash() const;
//       // optional:
//       std::string attributes() const;                          // shown in programs and dumps
//       Shape shape(std::span<const ShapeTracker> inputs) const;  // default: the first input's dims
//       DType dtype(std::span<const DType> inputs) const;        // default: the first input's dtype
//       double flops(const OpCostQuery&) const;                  // arithmetic, for the cost model
//       void reference(const ReferenceCall&) const;              // what the ReferenceRuntime runs
//   };
//
// A node holds the payload type-erased (Op::payload). An op's symbol (its
// e-graph op) is a hash of its name, known at compile time so that patterns can
// name it (Pat<op_symbol<Axpy>, ...>); two ops whose names hash alike are an
// Error when the second one is used. Backends find their own ops with
// payload_as<T>(); a runtime meeting an op it cannot run says so by name.
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <typeindex>
#include <typeinfo>
#include <unordered_map>

#include "luminal/core/dtype.hpp"
#include "luminal/core/error.hpp"
#include "luminal/core/host_buffer.hpp"
#include "luminal/shape/bound_view.hpp"
#include "luminal/shape/shape_tracker.hpp"

namespace luminal {

using OpSymbol = std::uint16_t;

// Primitives use symbols below this; backend ops hash into [kFirstBackendSymbol, 2^16).
inline constexpr OpSymbol kFirstBackendSymbol = 256;

constexpr OpSymbol symbol_of_name(std::string_view name) {
    std::uint32_t h = 2166136261u;  // FNV-1a
    for (char c : name) h = (h ^ static_cast<std::uint8_t>(c)) * 16777619u;
    return static_cast<OpSymbol>(kFirstBackendSymbol + h % (65536u - kFirstBackendSymbol));
}

// What the cost model knows about a node when it asks an op for its arithmetic.
struct OpCostQuery {
    std::span<const ShapeTracker> inputs;
    const Shape& shape;
    DType dtype;
    const DynMap& dims;
    double elements(const Shape& s) const {
        double n = 1;
        for (auto& d : s) n *= static_cast<double>(std::max<std::int64_t>(d.eval(dims), 0));
        return n;
    }
};

// One input of a node, read element by element through its view as the
// reference semantics see it: floats as double, integers as int64, padding as 0.
class ReferenceInput {
public:
    ReferenceInput(const HostBuffer& buffer, const ShapeTracker& view, const DynMap& dims, std::uint32_t node)
        : buffer_(&buffer), view_(view, dims), rank_(view.rank()), node_(node) {}

    DType dtype() const { return buffer_->dtype; }
    std::size_t rank() const { return rank_; }
    std::int64_t dim(std::size_t axis) const { return view_.dim(axis); }
    std::int64_t numel() const { return view_.numel(); }

    double f(std::int64_t index) const {
        std::int64_t p = position(index);
        return p < 0 ? 0.0 : buffer_->as_double(static_cast<std::size_t>(p));
    }
    std::int64_t i(std::int64_t index) const {
        std::int64_t p = position(index);
        return p < 0 ? 0 : buffer_->as_int(static_cast<std::size_t>(p));
    }
    // out[to] = this[index], exact for every dtype pair the Cast semantics allow.
    void copy_to(HostBuffer& out, std::size_t to, std::int64_t index) const {
        std::int64_t p = position(index);
        if (p < 0) out.store_int(to, 0);
        else out.copy_element(to, *buffer_, static_cast<std::size_t>(p));
    }

private:
    std::int64_t position(std::int64_t index) const {
        std::int64_t p = view_.locate(index);
        check(p < static_cast<std::int64_t>(buffer_->size()), "ReferenceRuntime",
              "node {} reads position {} of a {}-element buffer (invalid view)", node_, p, buffer_->size());
        return p;
    }
    const HostBuffer* buffer_;
    BoundView view_;
    std::size_t rank_;
    std::uint32_t node_;
};

// What an op's reference semantics get: its inputs, the output buffer (sized
// to the node's shape, rounding or wrapping each stored value to its dtype),
// the dims, and the program index of the node for messages.
struct ReferenceCall {
    std::span<const ReferenceInput> inputs;
    HostBuffer& out;
    const DynMap& dims;
    std::uint32_t node;
};

template <typename T>
concept BackendOpType = std::equality_comparable<T> && std::copy_constructible<T> && requires(const T& op) {
    { T::name } -> std::convertible_to<std::string_view>;
    { op.hash() } -> std::convertible_to<std::size_t>;
};

template <BackendOpType T>
inline constexpr OpSymbol op_symbol = symbol_of_name(T::name);

namespace detail {

struct RegisteredOp {
    std::string_view name;
    std::type_index type;
};

inline std::unordered_map<OpSymbol, RegisteredOp>& op_registry(std::unique_lock<std::mutex>& lock) {
    static std::mutex mutex;
    static std::unordered_map<OpSymbol, RegisteredOp> ops;
    lock = std::unique_lock(mutex);
    return ops;
}

template <BackendOpType T>
void register_op() {
    static const bool registered = [] {
        std::unique_lock<std::mutex> lock;
        auto& ops = op_registry(lock);
        auto [it, fresh] = ops.emplace(op_symbol<T>, RegisteredOp{T::name, typeid(T)});
        check(fresh || it->second.type == std::type_index(typeid(T)), "backend op",
              "op '{}' has the same symbol ({}) as op '{}' (a different type): rename one of them", T::name,
              op_symbol<T>, it->second.name);
        return true;
    }();
    (void)registered;
}

}  // namespace detail

// The name of a registered backend op's symbol ("?" if none is registered).
inline std::string_view backend_op_name(OpSymbol symbol) {
    std::unique_lock<std::mutex> lock;
    auto& ops = detail::op_registry(lock);
    auto it = ops.find(symbol);
    return it == ops.end() ? std::string_view("?") : it->second.name;
}

// A backend op's payload, type-erased: equality, hash and printing for the
// e-graph and programs, the shape, dtype and cost rules, and the reference
// semantics where the op has them.
class OpPayload {
public:
    virtual ~OpPayload() = default;
    virtual OpSymbol symbol() const = 0;
    virtual std::string_view name() const = 0;
    virtual bool equals(const OpPayload& other) const = 0;
    virtual std::size_t hash() const = 0;
    virtual std::string attributes() const = 0;
    virtual Shape shape(std::span<const ShapeTracker> inputs) const = 0;
    virtual DType dtype(std::span<const DType> inputs) const = 0;
    virtual double flops(const OpCostQuery& query) const = 0;
    virtual bool has_reference() const = 0;
    virtual void reference(const ReferenceCall& call) const = 0;

    // The op as its declared type, or nullptr when it is another op.
    template <BackendOpType T>
    const T* as() const;
};

template <BackendOpType T>
class PayloadOf final : public OpPayload {
public:
    explicit PayloadOf(T op) : op_(std::move(op)) { detail::register_op<T>(); }
    const T& op() const { return op_; }

    OpSymbol symbol() const override { return op_symbol<T>; }
    std::string_view name() const override { return T::name; }
    bool equals(const OpPayload& other) const override {
        const T* o = other.as<T>();
        return o && *o == op_;
    }
    std::size_t hash() const override { return op_.hash() ^ std::size_t{op_symbol<T>} << 48; }
    std::string attributes() const override {
        if constexpr (requires { op_.attributes(); }) return op_.attributes();
        else return {};
    }
    Shape shape(std::span<const ShapeTracker> inputs) const override {
        if constexpr (requires { op_.shape(inputs); }) return op_.shape(inputs);
        check(!inputs.empty(), T::name.data(), "an op without inputs must define its shape");
        return inputs[0].dims();
    }
    DType dtype(std::span<const DType> inputs) const override {
        if constexpr (requires { op_.dtype(inputs); }) return op_.dtype(inputs);
        check(!inputs.empty(), T::name.data(), "an op without inputs must define its dtype");
        return inputs[0];
    }
    double flops(const OpCostQuery& query) const override {
        if constexpr (requires { op_.flops(query); }) return op_.flops(query);
        else return 0;
    }
    bool has_reference() const override { return requires(const ReferenceCall& c) { op_.reference(c); }; }
    void reference(const ReferenceCall& call) const override {
        if constexpr (requires { op_.reference(call); }) op_.reference(call);
        else throw Error("ReferenceRuntime", fmt::format("op '{}' (node {}) has no reference semantics", T::name, call.node));
    }

private:
    T op_;
};

// Rules ask this of most nodes they meet, so it compares symbols instead of
// casting dynamically: a symbol belongs to one registered type (register_op
// refuses a second), and registering T here makes that hold before any T is made.
template <BackendOpType T>
const T* OpPayload::as() const {
    detail::register_op<T>();
    return symbol() == op_symbol<T> ? &static_cast<const PayloadOf<T>*>(this)->op() : nullptr;
}

}  // namespace luminal
