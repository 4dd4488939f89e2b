// The graph API in Python: Expr (symbolic sizes), DType, Graph, Tensor (the
// fluent GraphTensor ops) and Compiled (a graph compiled for a runtime, with
// inputs bound from and outputs read into numpy arrays).
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>

#include "compiled.hpp"

namespace nb = nanobind;
using namespace nb::literals;
using luminal::DType;
using luminal::Expression;
using luminal::Graph;
using luminal::GraphTensor;
using luminal::Scalar;

namespace luminal_python {
namespace {

// ---- symbolic sizes: an int, a one-letter dimension name, or an Expr ----

Expression to_expr(nb::handle h) {
    if (nb::isinstance<Expression>(h)) return nb::cast<Expression>(h);
    if (PyBool_Check(h.ptr())) throw luminal::Error("shape", "a size cannot be a bool");
    if (PyIndex_Check(h.ptr())) return Expression(nb::cast<std::int64_t>(nb::int_(h)));
    if (nb::isinstance<nb::str>(h)) {
        std::string name = nb::cast<std::string>(h);
        luminal::check(name.size() == 1 && luminal::DynMap::valid_name(name[0]), "shape",
                       "a dynamic dimension is named by one letter, got '{}'", name);
        return Expression(name[0]);
    }
    throw luminal::Error("shape", fmt::format("a size must be an int, a one-letter dimension name or an Expr, got {}",
                                              nb::cast<std::string>(nb::str(h.type()))));
}

luminal::Shape to_shape(nb::handle h) {
    luminal::Shape shape;
    if (PyIndex_Check(h.ptr()) || nb::isinstance<nb::str>(h) || nb::isinstance<Expression>(h)) return {to_expr(h)};
    for (nb::handle d : nb::iter(h)) shape.push_back(to_expr(d));
    return shape;
}

luminal::Ranges to_ranges(nb::handle h) {
    luminal::Ranges ranges;
    for (nb::handle r : nb::iter(h)) {
        nb::sequence pair = nb::borrow<nb::sequence>(r);
        luminal::check(nb::len(pair) == 2, "ranges", "each range is a (start, end) pair");
        ranges.emplace_back(to_expr(pair[0]), to_expr(pair[1]));
    }
    return ranges;
}

luminal::Axes to_axes(nb::handle h) {
    if (PyIndex_Check(h.ptr())) return {nb::cast<int>(nb::int_(h))};
    luminal::Axes axes;
    for (nb::handle a : nb::iter(h)) axes.push_back(nb::cast<int>(nb::int_(a)));
    return axes;
}

// A size as Python sees it: an int when constant, the Expr otherwise.
nb::object from_expr(const Expression& e) {
    if (auto c = e.as_constant()) return nb::int_(*c);
    return nb::cast(e);
}

// ---- compiling a graph for a runtime ----

template <typename Runtime>
Compiled compile_on(nb::object graph_owner, Runtime runtime, const CompileSettings& s) {
    Graph& graph = *nb::cast<Graph*>(graph_owner);
    luminal::CompileOptions options;
    options.search_candidates = std::max<std::size_t>(s.search, 1);
    options.search_seconds = s.search_seconds;
    options.seed = s.seed;
    options.verbosity = s.verbosity;
    options.dump_dir = s.dump_dir;
    auto start = std::chrono::steady_clock::now();
    std::optional<std::pair<Runtime, luminal::CompileReport>> compiled;
    {
        nb::gil_scoped_release release;
        compiled.emplace(luminal::compile_with_report(graph, std::move(runtime), options));
    }
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return Compiled(std::move(graph_owner), AnyRuntime(std::move(compiled->first)), std::move(compiled->second), ms);
}

Compiled compile_graph(nb::object graph_owner, const std::string& runtime, std::size_t threads, const CompileSettings& s) {
    if (runtime == "reference") return compile_on(std::move(graph_owner), luminal::ReferenceRuntime{}, s);
    if (runtime == "cpu")
        return compile_on(std::move(graph_owner), luminal::CpuRuntime(luminal::CpuOptions{.threads = threads}), s);
    if (runtime == "cuda") return compile_on(std::move(graph_owner), luminal::cuda::CudaRuntime{}, s);
    if (runtime == "cuda-emulator") return compile_on(std::move(graph_owner), luminal::cuda::HostEmulator{}, s);
    throw luminal::Error("compile", fmt::format("unknown runtime '{}': expected 'reference', 'cpu', 'cuda' or 'cuda-emulator'",
                                                runtime));
}

// ---- the fluent tensor API ----

GraphTensor materialize(const GraphTensor& t) { return t; }
template <typename E> GraphTensor materialize(const E& e) { return GraphTensor(e); }

Scalar scalar_of(nb::handle h) {
    if (PyBool_Check(h.ptr())) return Scalar{h.ptr() == Py_True ? 1.0 : 0.0, true};
    if (PyIndex_Check(h.ptr())) return Scalar{static_cast<double>(nb::cast<std::int64_t>(nb::int_(h))), true};
    return Scalar{nb::cast<double>(nb::float_(h)), false};
}

// One binary op for tensor/tensor, tensor/scalar and scalar/tensor operands.
template <typename Fn>
GraphTensor binary(nb::handle a, nb::handle b) {
    bool ta = nb::isinstance<GraphTensor>(a), tb = nb::isinstance<GraphTensor>(b);
    if (ta && tb) return materialize(luminal::make_binary<Fn>(nb::cast<GraphTensor>(a), nb::cast<GraphTensor>(b)));
    // A symbolic size next to a tensor is a scalar of the tensor's dtype (bool: i64), as a SymInt is in torch.
    auto size_scalar = [](const GraphTensor& t, nb::handle e) {
        const DType dtype = t.dtype() == DType::Bool ? DType::I64 : t.dtype();
        return luminal::detail::expression_scalar(t.graph(), nb::cast<Expression>(e), dtype);
    };
    if (ta && nb::isinstance<Expression>(b))
        return materialize(luminal::make_binary<Fn>(nb::cast<GraphTensor>(a), size_scalar(nb::cast<GraphTensor>(a), b)));
    if (tb && nb::isinstance<Expression>(a))
        return materialize(luminal::make_binary<Fn>(size_scalar(nb::cast<GraphTensor>(b), a), nb::cast<GraphTensor>(b)));
    if (ta) return materialize(luminal::make_binary<Fn>(nb::cast<GraphTensor>(a), scalar_of(b)));
    if (tb) return materialize(luminal::make_binary<Fn>(scalar_of(a), nb::cast<GraphTensor>(b)));
    throw luminal::Error("binary op", "needs at least one tensor operand");
}

template <typename Fn>
void def_binary(nb::class_<GraphTensor>& c, const char* name, const char* reflected = nullptr) {
    c.def(name, [](nb::handle a, nb::handle b) { return binary<Fn>(a, b); }, nb::keep_alive<0, 1>());
    if (reflected) c.def(reflected, [](nb::handle a, nb::handle b) { return binary<Fn>(b, a); }, nb::keep_alive<0, 1>());
}

template <typename Fn>
void def_unary(nb::class_<GraphTensor>& c, const char* name) {
    c.def(name, [](const GraphTensor& x) { return materialize(luminal::Unary<Fn, GraphTensor>(x)); }, nb::keep_alive<0, 1>());
}

nb::list shape_of(const GraphTensor& t) {
    nb::list out;
    for (const Expression& d : t.shape()) out.append(from_expr(d));
    return out;
}

void bind_tensor(nb::module_& m) {
    using namespace luminal;
    auto ka = nb::keep_alive<0, 1>();
    nb::class_<GraphTensor> c(m, "Tensor", "A tensor being recorded in a Graph; operations return new tensors.");
    c.def_prop_ro("shape", &shape_of, "sizes: ints, or Expr for dynamic ones")
        .def_prop_ro("dtype", &GraphTensor::dtype)
        .def_prop_ro("ndim", [](const GraphTensor& t) { return t.rank(); })
        .def_prop_ro("id", &GraphTensor::id, "the graph node this tensor reads")
        .def("numel", [](const GraphTensor& t) { return from_expr(t.numel()); })
        .def("__repr__", [](const GraphTensor& t) {
            return fmt::format("Tensor(node {}, shape {}, {})", t.id(), to_string(t.shape()), name_of(t.dtype()));
        });
    def_binary<add_fn>(c, "__add__", "__radd__");
    def_binary<sub_fn>(c, "__sub__", "__rsub__");
    def_binary<mul_fn>(c, "__mul__", "__rmul__");
    def_binary<div_fn>(c, "__truediv__", "__rtruediv__");
    def_binary<mod_fn>(c, "__mod__", "__rmod__");
    def_binary<pow_fn>(c, "__pow__", "__rpow__");
    def_binary<lt_fn>(c, "__lt__");
    def_binary<gt_fn>(c, "__gt__");
    def_binary<le_fn>(c, "__le__");
    def_binary<ge_fn>(c, "__ge__");
    def_binary<logical_and_fn>(c, "__and__", "__rand__");
    def_binary<logical_or_fn>(c, "__or__", "__ror__");
    def_binary<pow_fn>(c, "pow");
    def_binary<maximum_fn>(c, "maximum");
    def_binary<minimum_fn>(c, "minimum");
    def_binary<lt_fn>(c, "lt");
    def_binary<gt_fn>(c, "gt");
    def_binary<le_fn>(c, "le");
    def_binary<ge_fn>(c, "ge");
    def_binary<eq_fn>(c, "eq");
    def_binary<ne_fn>(c, "ne");
    def_binary<logical_and_fn>(c, "logical_and");
    def_binary<logical_or_fn>(c, "logical_or");
    c.def("__neg__", [](const GraphTensor& x) { return materialize(-x); }, ka);
    c.def("__invert__", [](const GraphTensor& x) { return materialize(!x); }, ka);
    def_unary<neg_fn>(c, "neg");
    def_unary<abs_fn>(c, "abs");
    def_unary<sign_fn>(c, "sign");
    def_unary<exp_fn>(c, "exp");
    def_unary<exp2_fn>(c, "exp2");
    def_unary<log_fn>(c, "log");
    def_unary<log2_fn>(c, "log2");
    def_unary<sin_fn>(c, "sin");
    def_unary<cos_fn>(c, "cos");
    def_unary<sqrt_fn>(c, "sqrt");
    def_unary<rsqrt_fn>(c, "rsqrt");
    def_unary<recip_fn>(c, "recip");
    def_unary<square_fn>(c, "square");
    def_unary<sigmoid_fn>(c, "sigmoid");
    def_unary<tanh_fn>(c, "tanh");
    def_unary<relu_fn>(c, "relu");
    def_unary<gelu_fn>(c, "gelu");
    def_unary<gelu_tanh_fn>(c, "gelu_tanh");
    def_unary<silu_fn>(c, "silu");
    def_unary<logical_not_fn>(c, "logical_not");
    def_unary<isnan_fn>(c, "isnan");
    c.def("erf", [](const GraphTensor& x) { return detail::in_f32(x, [](const GraphTensor& f) { return detail::erf(f); }); }, ka);

    c.def("cast", [](const GraphTensor& x, DType t) { return ops::cast(x, t); }, "dtype"_a, ka)
        .def("clamp", [](const GraphTensor& x, double lo, double hi) { return ops::clamp(x, lo, hi); }, "lo"_a, "hi"_a, ka)
        .def("output", [](const GraphTensor& x) { return ops::output(x); }, ka,
             "marks the tensor as a result to read after execution; read it through the returned tensor or this one")
        .def("sum", [](const GraphTensor& x, nb::handle a, bool k) { return ops::sum(x, to_axes(a), k); }, "axes"_a, "keepdim"_a = false, ka)
        .def("max", [](const GraphTensor& x, nb::handle a, bool k) { return ops::max(x, to_axes(a), k); }, "axes"_a, "keepdim"_a = false, ka)
        .def("min", [](const GraphTensor& x, nb::handle a, bool k) { return ops::min(x, to_axes(a), k); }, "axes"_a, "keepdim"_a = false, ka)
        .def("mean", [](const GraphTensor& x, nb::handle a, bool k) { return ops::mean(x, to_axes(a), k); }, "axes"_a, "keepdim"_a = false, ka)
        .def("var", [](const GraphTensor& x, nb::handle a, int c, bool k) { return ops::var(x, to_axes(a), c, k); },
             "axes"_a, "correction"_a = 1, "keepdim"_a = false, ka)
        .def("std", [](const GraphTensor& x, nb::handle a, int c, bool k) { return ops::std(x, to_axes(a), c, k); },
             "axes"_a, "correction"_a = 1, "keepdim"_a = false, ka)
        .def("argmax", [](const GraphTensor& x, int a, bool k) { return ops::argmax(x, a, k); }, "axis"_a, "keepdim"_a = false, ka)
        .def("argmin", [](const GraphTensor& x, int a, bool k) { return ops::argmin(x, a, k); }, "axis"_a, "keepdim"_a = false, ka)
        .def("logsumexp", [](const GraphTensor& x, nb::handle a, bool k) { return ops::logsumexp(x, to_axes(a), k); },
             "axes"_a, "keepdim"_a = false, ka)
        .def("softmax", [](const GraphTensor& x, int a) { return ops::softmax(x, a); }, "axis"_a, ka)
        .def("log_softmax", [](const GraphTensor& x, int a) { return ops::log_softmax(x, a); }, "axis"_a, ka)
        .def("layer_norm", [](const GraphTensor& x, nb::handle a, double e) { return ops::layer_norm(x, to_axes(a), e); },
             "axes"_a, "epsilon"_a = 1e-5, ka)
        .def("rms_norm", [](const GraphTensor& x, nb::handle a, double e) { return ops::rms_norm(x, to_axes(a), e); },
             "axes"_a, "epsilon"_a = 1e-6, ka)
        .def("reshape", [](const GraphTensor& x, nb::handle s) { return ops::reshape(x, to_shape(s)); }, "shape"_a, ka)
        .def("permute", [](const GraphTensor& x, nb::handle o) { return ops::permute(x, to_axes(o)); }, "order"_a, ka)
        .def("transpose", [](const GraphTensor& x, int a, int b) { return ops::transpose(x, a, b); }, "a"_a, "b"_a, ka)
        .def("t", [](const GraphTensor& x) { return x.t(); }, ka)
        .def("expand", [](const GraphTensor& x, nb::handle s) { return ops::expand(x, to_shape(s)); }, "shape"_a, ka)
        .def("expand_dim", [](const GraphTensor& x, int a, nb::handle n) { return ops::expand_dim(x, a, to_expr(n)); },
             "axis"_a, "size"_a, ka)
        .def("unsqueeze", [](const GraphTensor& x, int a) { return ops::unsqueeze(x, a); }, "axis"_a, ka)
        .def("squeeze", [](const GraphTensor& x, int a) { return ops::squeeze(x, a); }, "axis"_a, ka)
        .def("slice", [](const GraphTensor& x, nb::handle r) { return ops::slice(x, to_ranges(r)); }, "ranges"_a, ka)
        .def("slice_along", [](const GraphTensor& x, int a, nb::handle s, nb::handle e) {
            return ops::slice_along(x, a, to_expr(s), to_expr(e));
        }, "axis"_a, "start"_a, "end"_a, ka)
        .def("pad", [](const GraphTensor& x, nb::handle p, double v) { return ops::pad(x, to_ranges(p), v); },
             "padding"_a, "value"_a = 0.0, ka)
        .def("pad_along", [](const GraphTensor& x, int a, nb::handle b, nb::handle e, double v) {
            return ops::pad_along(x, a, to_expr(b), to_expr(e), v);
        }, "axis"_a, "before"_a, "after"_a, "value"_a = 0.0, ka)
        .def("concat_along", [](const GraphTensor& x, const GraphTensor& o, int a) { return ops::concat_along(x, o, a); },
             "other"_a, "axis"_a, ka)
        .def("split_dims", [](const GraphTensor& x, int a, nb::handle n) { return ops::split_dims(x, a, to_expr(n)); },
             "axis"_a, "inner"_a, ka)
        .def("merge_dims", [](const GraphTensor& x, int a) { return ops::merge_dims(x, a); }, "axis"_a, ka)
        .def("flatten", [](const GraphTensor& x, int s, int e) { return ops::flatten(x, s, e); }, "start"_a = 0, "end"_a = -1, ka)
        .def("contiguous", [](const GraphTensor& x) { return ops::contiguous(x); }, ka)
        .def("matmul", [](const GraphTensor& x, const GraphTensor& o) { return ops::matmul(x, o); }, "other"_a, ka)
        .def("__matmul__", [](const GraphTensor& x, const GraphTensor& o) { return ops::matmul(x, o); }, ka)
        .def("gather", [](const GraphTensor& x, const GraphTensor& i) { return ops::gather(x, i); }, "indexes"_a, ka)
        .def("gather_elements", [](const GraphTensor& x, const GraphTensor& i, int a) { return ops::gather_elements(x, i, a); },
             "indexes"_a, "axis"_a, ka)
        .def("index_select", [](const GraphTensor& x, int a, const GraphTensor& i) { return ops::index_select(x, a, i); },
             "axis"_a, "indexes"_a, ka)
        .def("scatter", [](const GraphTensor& x, const GraphTensor& i, const GraphTensor& s) { return ops::scatter(x, i, s); },
             "indexes"_a, "src"_a, ka)
        .def("scatter_elements", [](const GraphTensor& x, int a, const GraphTensor& i, const GraphTensor& s) {
            return ops::scatter_elements(x, a, i, s);
        }, "axis"_a, "indexes"_a, "src"_a, ka)
        .def("argsort", [](const GraphTensor& x, int a, bool d) { return ops::argsort(x, a, d); }, "axis"_a, "descending"_a = false, ka)
        .def("topk_indexes", [](const GraphTensor& x, nb::handle k, int a) { return ops::topk_indexes(x, to_expr(k), a); },
             "k"_a, "axis"_a, ka)
        .def("topk", [](const GraphTensor& x, nb::handle k, int a) { return ops::topk(x, to_expr(k), a); }, "k"_a, "axis"_a, ka)
        .def("cumsum", [](const GraphTensor& x, int a) { return ops::cumsum(x, a); }, "axis"_a, ka)
        .def("one_hot", [](const GraphTensor& x, nb::handle n) { return ops::one_hot(x, to_expr(n)); }, "num_classes"_a, ka)
        .def("tril", [](const GraphTensor& x, int d) { return ops::tril(x, d); }, "diagonal"_a = 0, ka)
        .def("triu", [](const GraphTensor& x, int d) { return ops::triu(x, d); }, "diagonal"_a = 0, ka);

    m.def("where", [](const GraphTensor& c, nb::handle a, nb::handle b) -> GraphTensor {
        bool ta = nb::isinstance<GraphTensor>(a), tb = nb::isinstance<GraphTensor>(b);
        if (ta && tb) return where(c, nb::cast<GraphTensor>(a), nb::cast<GraphTensor>(b));
        if (ta) return where(c, nb::cast<GraphTensor>(a), scalar_of(b));
        if (tb) return where(c, scalar_of(a), nb::cast<GraphTensor>(b));
        return where(c, scalar_of(a), scalar_of(b));
    }, "condition"_a, "a"_a, "b"_a, nb::keep_alive<0, 1>(), "torch.where: a where condition holds, else b");
    m.def("stack", [](const std::vector<GraphTensor>& xs, int a) { return ops::stack(xs, a); }, "tensors"_a, "axis"_a = 0,
          nb::keep_alive<0, 1>());
    m.def("cat", [](const std::vector<GraphTensor>& xs, int a) {
        check(!xs.empty(), "cat", "needs at least one tensor");
        GraphTensor out = xs[0];
        for (std::size_t i = 1; i < xs.size(); ++i) out = ops::concat_along(out, xs[i], a);
        return out;
    }, "tensors"_a, "axis"_a = 0, nb::keep_alive<0, 1>());
}

void bind_expr(nb::module_& m) {
    nb::class_<Expression> e(m, "Expr", "A symbolic size over one-letter dynamic dimensions.");
    e.def("__init__", [](Expression* self, nb::handle h) { new (self) Expression(to_expr(h)); }, "value"_a)
        .def("__add__", [](const Expression& a, nb::handle b) { return a + to_expr(b); })
        .def("__radd__", [](const Expression& a, nb::handle b) { return to_expr(b) + a; })
        .def("__sub__", [](const Expression& a, nb::handle b) { return a - to_expr(b); })
        .def("__rsub__", [](const Expression& a, nb::handle b) { return to_expr(b) - a; })
        .def("__mul__", [](const Expression& a, nb::handle b) { return a * to_expr(b); })
        .def("__rmul__", [](const Expression& a, nb::handle b) { return to_expr(b) * a; })
        .def("__floordiv__", [](const Expression& a, nb::handle b) { return a / to_expr(b); })
        .def("__rfloordiv__", [](const Expression& a, nb::handle b) { return to_expr(b) / a; })
        .def("__mod__", [](const Expression& a, nb::handle b) { return a % to_expr(b); })
        .def("__rmod__", [](const Expression& a, nb::handle b) { return to_expr(b) % a; })
        .def("__neg__", [](const Expression& a) { return -a; })
        .def("__eq__", [](const Expression& a, nb::handle b) {
            try { return a == to_expr(b); } catch (const luminal::Error&) { return false; }
        })
        .def("__hash__", [](const Expression& a) { return a.structural_key(); })
        .def("__repr__", [](const Expression& a) { return fmt::format("Expr({})", a.to_string()); })
        .def("__str__", &Expression::to_string)
        .def_prop_ro("constant", [](const Expression& a) { return a.as_constant(); }, "its value when it has no dimension")
        .def_prop_ro("dims", [](const Expression& a) {
            std::vector<std::string> out;
            for (char c : a.dims()) out.emplace_back(1, c);
            return out;
        })
        .def("eval", [](const Expression& a, const std::map<std::string, std::int64_t>& dims) {
            return a.eval(to_dyn_map({}, dims));
        }, "dims"_a);
    e.def_static("index", &Expression::index, "the element index, for Graph.iota");
    e.def_static("dim", [](const std::string& name, std::int64_t min, std::optional<std::int64_t> max) {
        luminal::check(name.size() == 1, "Expr.dim", "a dynamic dimension is named by one letter, got '{}'", name);
        return Expression::dim(name[0], min, max);
    }, "name"_a, "min"_a, "max"_a = nb::none(),
       "a dimension known to lie in [min, max] (max None: unbounded); the simplifier uses the range and every "
       "execution checks it");
    e.def_prop_ro("range", [](const Expression& a) {
        return std::pair(a.lower_bound(), a.bounded_above() ? std::optional(a.upper_bound()) : std::nullopt);
    }, "(lowest, highest or None) value it can take, from its dimensions' ranges");
    m.def("min_expr", [](nb::handle a, nb::handle b) { return luminal::min(to_expr(a), to_expr(b)); });
    m.def("max_expr", [](nb::handle a, nb::handle b) { return luminal::max(to_expr(a), to_expr(b)); });
}

void bind_graph_class(nb::module_& m) {
    using namespace luminal;
    nb::class_<Graph>(m, "Graph", "Records a model; nothing runs until it is compiled.")
        .def(nb::init<>())
        .def("tensor", [](Graph& g, nb::handle shape, DType dtype, std::optional<std::string> name) {
            return name ? g.named_tensor(*name, to_shape(shape), dtype) : g.tensor(to_shape(shape), dtype);
        }, "shape"_a, "dtype"_a = DType::F32, "name"_a = nb::none(), nb::keep_alive<0, 1>())
        .def("constant", [](Graph& g, double v, DType t) { return g.constant(v, t); }, "value"_a, "dtype"_a = DType::F32,
             nb::keep_alive<0, 1>())
        .def("iota", [](Graph& g, nb::handle expr, nb::handle shape, DType t) {
            return g.iota(to_expr(expr), to_shape(shape), t);
        }, "expr"_a, "shape"_a, "dtype"_a = DType::I32, nb::keep_alive<0, 1>(),
             "element i is `expr` with Expr.index() = i")
        .def("arange", [](Graph& g, nb::handle n, DType t) { return g.arange(to_expr(n), t); }, "n"_a, "dtype"_a = DType::I32,
             nb::keep_alive<0, 1>())
        .def("arange_range", &Graph::arange_options, "start"_a, "end"_a, "step"_a = 1.0, "dtype"_a = DType::F32,
             nb::keep_alive<0, 1>())
        .def("expr_scalar", [](Graph& g, nb::handle e, DType t) { return detail::expression_scalar(g, to_expr(e), t); },
             "expr"_a, "dtype"_a = DType::I64, nb::keep_alive<0, 1>(), "a scalar tensor holding a symbolic size")
        .def("set_dim", [](Graph& g, const std::string& name, std::int64_t v) {
            check(name.size() == 1, "set_dim", "a dynamic dimension is named by one letter, got '{}'", name);
            g.set_dim(name[0], v);
        }, "name"_a, "size"_a)
        .def_prop_ro("dims", [](const Graph& g) {
            std::map<std::string, std::int64_t> out;
            for (auto [c, v] : g.dyn_map().entries()) out[std::string(1, c)] = v;
            return out;
        })
        .def("carry", &Graph::carry, "output"_a, "input"_a,
             "after every execution the values of `output` become the data of `input`")
        .def("__len__", &Graph::size)
        .def("to_dot", &Graph::to_dot)
        .def("_compile", [](nb::object self, const std::string& runtime, std::size_t threads, std::size_t search,
                            double search_seconds, std::uint64_t seed, int verbosity, const std::string& dump_dir) {
            return compile_graph(std::move(self), runtime, threads, CompileSettings{search, search_seconds, seed, verbosity, dump_dir});
        }, "runtime"_a, "threads"_a, "search"_a, "search_seconds"_a, "seed"_a, "verbosity"_a, "dump_dir"_a);

    nb::class_<Compiled>(m, "Compiled", "A graph compiled for a runtime: bind inputs, execute, read outputs.")
        .def("set_data", &Compiled::set_data, "tensor"_a, "array"_a)
        .def("reads", &Compiled::reads, "tensor"_a)
        .def("updates_in_place", &Compiled::updates_in_place, "output"_a,
             "whether the carried output is computed in its input's memory (only the rows written)")
        .def("execute", &Compiled::execute, "dims"_a = nb::none())
        .def("time_execution", &Compiled::time_execution, "dims"_a = nb::none(), "reps"_a = 5)
        .def("get", &Compiled::get, "tensor"_a, "raw"_a = false)
        .def_prop_ro("runtime", &Compiled::runtime_name)
        .def_prop_ro("compile_ms", &Compiled::compile_ms)
        .def_prop_ro("candidates", &Compiled::candidates)
        .def_prop_ro("program_ops", &Compiled::ops,
                     "(op, result dtype) of each node of the extracted program, in execution order (inputs and outputs included)")
        .def("cuda_plan", &Compiled::cuda_plan, "dims"_a = nb::none(),
             "the CUDA plan of one execution at dims as JSON (totals, and each launch's kernel, op, bytes and modelled "
             "us): runtime 'cuda' or 'cuda-emulator', no device needed");
}

}  // namespace

std::vector<std::pair<std::string, std::string>> program_ops(const luminal::Program& program) {
    std::vector<std::pair<std::string, std::string>> ops;
    for (const luminal::ProgramNode& node : program.nodes)
        ops.emplace_back(luminal::symbol_name(node.spec.kind), std::string(luminal::name_of(node.spec.dtype)));
    return ops;
}

void bind_graph(nb::module_& m) {
    nb::enum_<DType>(m, "DType")
        .value("f32", DType::F32).value("f16", DType::F16).value("bf16", DType::BF16)
        .value("i32", DType::I32).value("i64", DType::I64).value("u8", DType::U8).value("bool", DType::Bool);
    bind_expr(m);
    bind_tensor(m);
    bind_graph_class(m);
}

}  // namespace luminal_python
