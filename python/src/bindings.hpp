#pragma once
// The parts of the module, one translation unit each.
#include <nanobind/nanobind.h>

#include <string>
#include <utility>
#include <vector>

namespace luminal {
struct Program;
}

namespace luminal_python {
void bind_graph(nanobind::module_& m);  // Expr, DType, Graph, Tensor, compiled graphs (graph_bindings.cpp)
void bind_llm(nanobind::module_& m);    // LLM sessions and tokenizers (llm_bindings.cpp)
void bind_torch_call(nanobind::module_& m);  // one call per execution of a translated torch graph (torch_call.cpp)
// The op and result dtype of each node of a compiled program, in execution order (graph_bindings.cpp).
std::vector<std::pair<std::string, std::string>> program_ops(const luminal::Program& program);
}  // namespace luminal_python
