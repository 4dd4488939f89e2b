// The extension module luminal._luminal: luminal::Error becomes luminal.Error
// (a RuntimeError carrying the C++ message), then the parts register.
#include <nanobind/nanobind.h>

#include <luminal/core/error.hpp>

#include "bindings.hpp"

namespace nb = nanobind;

NB_MODULE(_luminal, m) {
    m.doc() = "luminal: a header-only C++20 inference compiler (native part of the Python package)";
    nb::exception<luminal::Error>(m, "Error", PyExc_RuntimeError);
    // torch.compile's caches keep compiled graphs (and so tensors and graphs) alive until the
    // interpreter exits, after nanobind's leak check would run.
    nb::set_leak_warnings(false);
    luminal_python::bind_graph(m);
    luminal_python::bind_llm(m);
    luminal_python::bind_torch_call(m);
}
