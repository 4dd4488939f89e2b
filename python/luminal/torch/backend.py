"""torch.compile(model, backend="luminal"): dynamo hands each captured FX graph to
AOTAutograd, which functionalises it and decomposes it to core ATen; each ATen graph is
translated, compiled once (symbolic sizes as luminal dimensions, so later sizes reuse it)
and run on a luminal runtime. AOTAutograd writes mutated inputs (a StaticCache's
index_copy_) back after each call: the graph's first outputs are their new values, which the
CPU runtime computes in the inputs' own memory where it can (only the new rows written), so
that write-back copies nothing.

options: device ("cpu", "cuda" or "reference"), search (candidate programs to profile),
threads (CPU threads; 0 = every core), fallback (True: ops without a translation run in
PyTorch between luminal partitions, named in one warning), plan_only (with device "cuda": compile
for the CUDA backend without a GPU and price each call instead of running it; the compiled
graph's `plan` (luminal.torch.backend.planned) holds the last call's launches and modelled
time, and the outputs are meta tensors: call the model with meta inputs, built on the meta
device)."""
from __future__ import annotations

import warnings

import torch
import torch._guards
from torch._dynamo.backends.common import aot_autograd
from torch._subclasses.fake_tensor import unset_fake_temporarily

from .._luminal import Error
from .decompositions import attention_as_cpu_flash, decompositions
from .fallback import split_unsupported
from .runner import CompiledGraph
from .translate import translate

_DEFAULTS = {"device": "cpu", "search": 1, "threads": 0, "fallback": False, "plan_only": False}

compilations = 0  # graphs this backend has compiled in this process (tests count recompiles with it)
planned = []  # plan_only: each graph's CompiledGraph, in the order compiled (its `plan`: its last call's)


def _settings(options) -> dict:
    settings = dict(_DEFAULTS)
    unknown = set(options or {}) - set(_DEFAULTS)
    if unknown:
        raise Error(f"luminal backend: unknown option(s) {sorted(unknown)}; known: {sorted(_DEFAULTS)}")
    settings.update(options or {})
    return settings


def compile_fx(gm: torch.fx.GraphModule, example_inputs, settings: dict):
    """The ATen graph `gm` as a callable on luminal (a split module when it has to fall back)."""
    if settings["fallback"]:
        split, unsupported = split_unsupported(gm, lambda sub: _compile_one(sub, settings, {}))
        if unsupported:
            warnings.warn("luminal: these ops run in PyTorch (graph breaks): " + ", ".join(sorted(unsupported)),
                          stacklevel=2)
        return split
    return _compile_one(gm, settings, _mutated_inputs(gm))


def _mutated_inputs(gm: torch.fx.GraphModule) -> dict[int, int]:
    """Output index -> input index of each input whose data (only) AOTAutograd writes back:
    its epilogue copies output i into the i-th of fw_metadata's mutated inputs."""
    context = torch._guards.TracingContext.try_get()
    metadata = getattr(context, "fw_metadata", None)
    placeholders = sum(1 for node in gm.graph.nodes if node.op == "placeholder")
    if metadata is None or len(metadata.input_info) != placeholders:
        return {}
    mutations = {}
    for output, index in enumerate(metadata.mutated_inp_runtime_indices):
        info = metadata.input_info[index]
        if info.mutates_data and not info.mutates_metadata and not info.mutates_storage_metadata:
            mutations[output] = index
    return mutations


def _compile_one(gm: torch.fx.GraphModule, settings: dict, mutations: dict[int, int]):
    global compilations
    compiled = CompiledGraph(translate(gm, name="the captured graph"), device=settings["device"],
                             search=settings["search"], threads=settings["threads"], name="luminal graph",
                             mutations=mutations, plan_only=settings["plan_only"])
    compilations += 1
    if settings["plan_only"]:
        planned.append(compiled)

    call = compiled.call  # one C++ call per execution

    def run(*args):
        return call(*args)

    run.compiled_graph = compiled
    return run


def _inference_only(gm, example_inputs):
    raise Error("luminal backend: compiles inference graphs only (call the model under torch.no_grad() or "
                "torch.inference_mode())")


# Registered by its entry point (pyproject.toml), which dynamo loads on the first
# backend="luminal": registering here too made that load fail ("duplicate name: luminal")
# whenever luminal had not been imported first.
def luminal_backend(gm: torch.fx.GraphModule, example_inputs, options: dict | None = None):
    settings = _settings(options)

    def forward(aten_gm, aten_inputs):
        # AOTAutograd calls this with its fake-tensor mode on; translating binds real tensors.
        with unset_fake_temporarily():
            return compile_fx(aten_gm, aten_inputs, settings)

    attention_as_cpu_flash(gm)
    return aot_autograd(fw_compiler=forward, inference_compiler=forward, bw_compiler=_inference_only,
                        decompositions=decompositions())(gm, example_inputs)
