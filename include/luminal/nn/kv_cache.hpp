#pragma once
// Per-layer key/value caches kept in the graph: persistent [capacity, kv_heads,
// head_dim] inputs into which each execution scatters the keys and values of
// its s new tokens at rows p .. p+s-1. One compiled graph thus serves prefill
// (s = prompt length, p = 0) and decode (s = 1, p = tokens so far). The
// scattered caches are graph outputs carried into the inputs (Graph::carry),
// so a runtime may write the new rows in place.
#include "luminal/graph/graph.hpp"
#include "luminal/graph/graph_tensor.hpp"
#include "luminal/graph/graph_creation.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace luminal::nn {

struct KvCache {
    GraphTensor keys, values;                  // inputs: the caches before this execution
    GraphTensor updated_keys, updated_values;  // outputs: with the new tokens written
};

struct CacheWindow {
    KvCache cache;
    GraphTensor keys, values;  // positions 0..p+s-1
};

// Declares the caches `name`.keys/.values ([capacity, kv_heads, dim] inputs
// of `dtype`) and writes k, v ([s, kv_heads, dim] of positions p..p+s-1,
// rounded to `dtype`) into them. The window attention reads is f32.
inline CacheWindow append_to_cache(Graph& cx, const std::string& name, std::int64_t capacity, const GraphTensor& k,
                                   const GraphTensor& v, Expression p, DType dtype = DType::F32) {
    auto write = [&](const GraphTensor& rows, const char* part) {
        GraphTensor cache = cx.named_tensor(name + "." + part, {capacity, rows.view().dim(1), rows.view().dim(2)}, dtype);
        const Expression row = rows.view().dim(1) * rows.view().dim(2);
        GraphTensor positions = cx.iota(p * row + Expression::index(), rows.shape());
        GraphTensor updated = cache.scatter(positions, rows.cast(dtype)).output();
        cx.carry(updated, cache);
        return std::pair(cache, updated);
    };
    auto [keys, updated_keys] = write(k, "keys");
    auto [values, updated_values] = write(v, "values");
    const Expression end = p + k.view().dim(0);
    return {{keys, values, updated_keys, updated_values},
            updated_keys.slice_along(0, 0, end).cast(DType::F32),
            updated_values.slice_along(0, 0, end).cast(DType::F32)};
}

// The caches of all layers of a model.
struct KvCaches {
    std::vector<KvCache> layers;

    // Zeros in every cache; where the runtime binds zeros itself (the CPU's
    // untouched pages), in time and memory that do not grow with the capacity.
    template <typename Runtime>
    void clear(Runtime& rt) const {
        for (const KvCache& c : layers)
            for (const GraphTensor& t : {c.keys, c.values}) {
                if constexpr (requires { rt.set_zeros(t); }) rt.set_zeros(t);
                else rt.set_data(t, std::vector<float>(numel(t), 0.0f));
            }
    }

    // Bytes the caches hold at their capacity.
    std::uint64_t bytes() const {
        std::uint64_t total = 0;
        for (const KvCache& c : layers)
            for (const GraphTensor& t : {c.keys, c.values}) total += numel(t) * size_of(t.dtype());
        return total;
    }

private:
    static std::size_t numel(const GraphTensor& t) {
        std::size_t n = 1;
        for (const Expression& d : t.shape()) n *= static_cast<std::size_t>(d.eval({}));
        return n;
    }
};

}  // namespace luminal::nn
