#pragma once
// The two halves of the module, one translation unit each.
#include <nanobind/nanobind.h>

namespace luminal_python {
void bind_graph(nanobind::module_& m);  // Expr, DType, Graph, Tensor, compiled graphs (graph_bindings.cpp)
void bind_llm(nanobind::module_& m);    // LLM sessions and tokenizers (llm_bindings.cpp)
}  // namespace luminal_python
