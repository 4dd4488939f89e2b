// One step of a translated torch graph in one C++ call (luminal.torch's CompiledGraph): the
// dimensions read from the inputs' sizes, each tensor input checked and bound, the program
// executed, the outputs made torch tensors. A tensor bound in place is remembered by
// identity (the same object over the same memory) and not looked at again, so a decode
// step's parameters and KV cache cost one pointer comparison each. Mutated inputs (carried
// state) come back as the caller's tensors holding the new values: the rows the program
// wrote in place, or small state copied back into them, so AOTAutograd's write-back copies
// nothing. Tensors are read through their own methods (data_ptr, shape, ...), not DLPack,
// whose export costs more than a small input's copy.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "compiled.hpp"

namespace luminal_python {
namespace {

using namespace nb::literals;

// The torch.Tensor attributes and methods a call reads, looked up once.
struct TorchNames {
    nb::object tensor_type, empty;
    nb::str dtype{"dtype"}, shape{"shape"}, is_cpu{"is_cpu"}, data_ptr{"data_ptr"}, is_contiguous{"is_contiguous"},
        contiguous{"contiguous"}, numel{"numel"}, size{"size"};
    TorchNames() {
        nb::module_ torch = nb::module_::import_("torch");
        tensor_type = torch.attr("Tensor");
        empty = torch.attr("empty");
    }
};

// "(1, 4, 16)", "(5,)": a shape as Python prints a tuple.
std::string tuple_text(const std::vector<std::int64_t>& sizes) {
    std::string text = "(";
    for (std::size_t i = 0; i < sizes.size(); ++i) text += (i ? ", " : "") + std::to_string(sizes[i]);
    return text + (sizes.size() == 1 ? ",)" : ")");
}

std::string shape_text(const luminal::Shape& shape) {
    std::string text = "(";
    for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + shape[i].to_string();
    return text + ")";
}

class TorchCall {
public:
    // inputs: (name, Tensor or None for a size or static argument, torch dtype or None) per
    // placeholder; dims: (letter, input index, axis or None for a SymInt argument); outputs:
    // (Tensor, index of the carried input it updates or None, torch dtype, None) or
    // (None, None, None, value), the value an int, an Expr of the dimensions or any constant.
    TorchCall(nb::object compiled, std::string name, nb::list inputs, nb::list dims, nb::list outputs)
        : compiled_owner_(std::move(compiled)), compiled_(nb::cast<Compiled*>(compiled_owner_)), name_(std::move(name)) {
        for (nb::handle spec : inputs) {
            nb::tuple t = nb::borrow<nb::tuple>(spec);
            Input in;
            in.name = nb::cast<std::string>(t[0]);
            if (!t[1].is_none()) {
                in.tensor = nb::cast<GraphTensor>(t[1]);
                in.torch_dtype = nb::borrow(t[2]);
                in.read = compiled_->reads(*in.tensor);
                const luminal::Shape shape = in.tensor->shape();
                in.static_shape = std::all_of(shape.begin(), shape.end(), [](const Expression& d) { return d.is_constant(); });
            }
            inputs_.push_back(std::move(in));
        }
        for (nb::handle spec : dims) {
            nb::tuple t = nb::borrow<nb::tuple>(spec);
            dims_.push_back({nb::cast<std::string>(t[0]).at(0), nb::cast<std::size_t>(t[1]),
                             t[2].is_none() ? std::nullopt : std::optional(nb::cast<int>(t[2]))});
        }
        for (nb::handle spec : outputs) {
            nb::tuple t = nb::borrow<nb::tuple>(spec);
            Output out;
            if (!t[0].is_none()) out.tensor = nb::cast<GraphTensor>(t[0]);
            if (!t[1].is_none()) out.carried_source = nb::cast<std::size_t>(t[1]);
            out.torch_dtype = nb::borrow(t[2]);
            out.value = nb::borrow(t[3]);
            outputs_.push_back(std::move(out));
        }
    }

    nb::list operator()(nb::args args) {
        luminal::check(args.size() == inputs_.size(), name_.c_str(), "takes {} inputs, got {}", inputs_.size(), args.size());
        luminal::DynMap dims = read_dims(args);
        for (std::size_t i = 0; i < inputs_.size(); ++i)
            if (inputs_[i].tensor) bind(inputs_[i], args[i], dims);
        compiled_->execute_at(dims);
        nb::list results;
        for (const Output& out : outputs_) results.append(result(out, args, dims));
        return results;
    }

private:
    struct Input {
        std::string name;
        std::optional<GraphTensor> tensor;  // none: a SymInt or static argument
        nb::object torch_dtype;
        bool read = false;          // the program reads it (an unused input is pruned)
        bool static_shape = false;
        nb::object checked;         // the tensor of the last call, when it needs no look again
        std::uintptr_t checked_data = 0;
        // This call's: whether the runtime uses the tensor's memory in place, and where the
        // tensor's contiguous values are (for carried state copied back), if they are its own.
        bool in_place = false;
        void* own_data = nullptr;
        std::size_t own_bytes = 0;
    };
    struct Dim {
        char letter;
        std::size_t input;
        std::optional<int> axis;  // none: the input is a SymInt
    };
    struct Output {
        std::optional<GraphTensor> tensor;  // none: a value
        std::optional<std::size_t> carried_source;
        nb::object torch_dtype;
        nb::object value;
    };

    luminal::DynMap read_dims(const nb::args& args) {
        luminal::DynMap dims = compiled_->graph().dyn_map();
        for (const Dim& d : dims_) {
            nb::handle arg = args[d.input];
            if (d.axis) {
                require_tensor(inputs_[d.input], arg);
                dims.set(d.letter, nb::cast<std::int64_t>(arg.attr(names_.size)(*d.axis)));
            } else {
                dims.set(d.letter, nb::cast<std::int64_t>(nb::int_(arg)));
            }
        }
        return dims;
    }

    void require_tensor(const Input& in, nb::handle arg) const {
        if (!nb::isinstance(arg, names_.tensor_type))
            throw luminal::Error(name_, fmt::format("input '{}' must be a tensor, got {}", in.name,
                                                    nb::cast<std::string>(nb::str(arg.type().attr("__name__")))));
    }

    static std::uintptr_t data_address(nb::handle tensor, const nb::str& data_ptr) {
        return nb::cast<std::uintptr_t>(tensor.attr(data_ptr)());
    }

    void bind(Input& in, nb::handle arg, const luminal::DynMap& dims) {
        if (in.checked.is_valid() && arg.ptr() == in.checked.ptr() && data_address(arg, names_.data_ptr) == in.checked_data)
            return;  // the same tensor over the same memory: bound in place (or unread) already
        in.checked = nb::object();
        in.in_place = false;
        in.own_data = nullptr;
        check(in, arg, dims);
        const bool contiguous = nb::cast<bool>(arg.attr(names_.is_contiguous)());
        nb::object values = contiguous ? nb::borrow(arg) : arg.attr(names_.contiguous)();
        const std::uintptr_t address = data_address(values, names_.data_ptr);
        const auto n = nb::cast<std::size_t>(values.attr(names_.numel)());
        if (contiguous) {
            in.own_data = reinterpret_cast<void*>(address);
            in.own_bytes = n * luminal::size_of(in.tensor->dtype());
        }
        if (in.read)
            in.in_place = compiled_->bind(*in.tensor, values, reinterpret_cast<const void*>(address), n,
                                          dlpack_of(in.tensor->dtype()), /*is_writable=*/true) && contiguous;
        if (in.in_place || (!in.read && in.static_shape)) {
            in.checked = nb::borrow(arg);
            in.checked_data = address;
        }
    }

    void check(const Input& in, nb::handle arg, const luminal::DynMap& dims) const {
        require_tensor(in, arg);
        nb::object dtype = arg.attr(names_.dtype);
        if (!dtype.is(in.torch_dtype))
            throw luminal::Error(name_, fmt::format("input '{}' was compiled for {}, got {}", in.name,
                                                    nb::cast<std::string>(nb::str(in.torch_dtype)),
                                                    nb::cast<std::string>(nb::str(dtype))));
        std::vector<std::int64_t> actual, expected;
        for (nb::handle d : arg.attr(names_.shape)) actual.push_back(nb::cast<std::int64_t>(d));
        for (const Expression& d : in.tensor->shape()) expected.push_back(d.eval(dims));
        if (actual != expected)
            throw luminal::Error(name_, fmt::format("input '{}' has shape {} but the compiled graph takes {} (here {})",
                                                    in.name, tuple_text(actual), shape_text(in.tensor->shape()),
                                                    tuple_text(expected)));
        if (!nb::cast<bool>(arg.attr(names_.is_cpu)))
            throw luminal::Error(name_, fmt::format("input '{}' is on {}; luminal reads inputs from host memory", in.name,
                                                    nb::cast<std::string>(nb::str(arg.attr("device")))));
    }

    nb::object result(const Output& out, const nb::args& args, const luminal::DynMap& dims) const {
        if (!out.tensor) {
            if (nb::isinstance<Expression>(out.value)) return nb::int_(nb::cast<Expression>(out.value).eval(dims));
            return out.value;
        }
        // State updated in place is the caller's tensor already: reading it out would copy the
        // whole cache on every step.
        if (out.carried_source && inputs_[*out.carried_source].in_place) return nb::borrow(args[*out.carried_source]);
        OwnedValues values = compiled_->values(*out.tensor);
        const std::size_t bytes = luminal::size_of(out.tensor->dtype()) * numel(values.shape);
        if (out.carried_source) {
            const Input& source = inputs_[*out.carried_source];
            if (source.own_data && source.own_bytes == bytes) {  // its new value copied into the caller's tensor
                std::memcpy(source.own_data, values.data, bytes);
                return nb::borrow(args[*out.carried_source]);
            }
        }
        nb::object shape = nb::cast(std::vector<std::int64_t>(values.shape.begin(), values.shape.end()));
        nb::object tensor = names_.empty(shape, "dtype"_a = out.torch_dtype);
        std::memcpy(reinterpret_cast<void*>(data_address(tensor, names_.data_ptr)), values.data, bytes);
        return tensor;
    }

    static std::size_t numel(const std::vector<std::size_t>& shape) {
        std::size_t n = 1;
        for (std::size_t d : shape) n *= d;
        return n;
    }

    nb::object compiled_owner_;
    Compiled* compiled_;
    std::string name_;
    TorchNames names_;
    std::vector<Input> inputs_;
    std::vector<Dim> dims_;
    std::vector<Output> outputs_;
};

}  // namespace

void bind_torch_call(nb::module_& m) {
    nb::class_<TorchCall>(m, "TorchCall",
                          "A compiled translated torch graph called with torch tensors: one C++ call per execution")
        .def(nb::init<nb::object, std::string, nb::list, nb::list, nb::list>(), "compiled"_a, "name"_a, "inputs"_a,
             "dims"_a, "outputs"_a)
        .def("__call__", &TorchCall::operator(), "returns the outputs: torch tensors, sizes and constants");
}

}  // namespace luminal_python
