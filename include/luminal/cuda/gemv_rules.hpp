#pragma once
// The rules that find cuda.Gemv in the graph the models write:
//  * a Matmul of an activation with a weight matrix read in place (rows of K
//    contiguous values, 16-byte aligned) is also a Gemv, in each thread layout;
//  * a Gemv whose activation is a row op's result (RMSNorm) or an elementwise
//    region's computes the row itself, as its prologue;
//  * an elementwise region reading Gemvs of one activation element for element
//    (a residual add, SiLU(gate) * up) is one Gemv over all their weights,
//    with the region (and their own epilogues) as its epilogue.
#include <algorithm>
#include <array>
#include <limits>
#include <optional>
#include <vector>

#include "luminal/cuda/gemv_op.hpp"
#include "luminal/cuda/row_fusion.hpp"
#include "luminal/egraph/rule_support.hpp"
#include "luminal/lowering/rules.hpp"

namespace luminal::egraph {

inline constexpr cuda::GemvLayout kGemvLayouts[] = {{1, 4}, {2, 4}};
inline constexpr std::size_t kMaxGemvWeights = 4;
inline constexpr std::size_t kMaxGemvInputs = 12;  // a launch passes 16 arguments
inline constexpr std::size_t kMaxPrologueArithmetic = 2;  // products and sums a prologue of an elementwise region recomputes

namespace gemv_detail {

// A weight view the Gemv reads in place: [N, K] of constants, K contiguous,
// every row starting on a 16-byte boundary.
inline bool streamable_weight(const ShapeTracker& w, DType dtype) {
    if (w.rank() != 2 || w.is_padded_or_masked() || !(dtype == DType::BF16 || dtype == DType::F16 || dtype == DType::F32))
        return false;
    const auto& axes = w.axes();
    const auto rows = axes[0].size.as_constant(), k = axes[1].size.as_constant(), stride = axes[0].stride.as_constant();
    const auto start = (w.base() + axes[0].offset * axes[0].stride + axes[1].offset).as_constant();
    if (!rows || !k || !stride || !start || !(axes[1].stride == Expression(1))) return false;
    const auto bytes = static_cast<std::int64_t>(size_of(dtype));
    return *k > 0 && (*k * bytes) % 16 == 0 && (*stride * bytes) % 16 == 0 && (*start * bytes) % 16 == 0;
}

// A Gemv e-node with its spec and op at hand, and what same_activation
// compares first as one number (the layout and the activation's classes).
struct GemvNode {
    ENodeId node;
    const NodeSpec* spec;
    const cuda::GemvOp* op;
    std::uint64_t activation = 0;

    GemvNode(const EGraph& g, ENodeId n, const NodeSpec* s, const cuda::GemvOp* o) : node(n), spec(s), op(o) {
        activation = (std::uint64_t{op->activation_inputs} << 16) | (std::uint64_t{op->layout.rows} << 8) | op->layout.unroll;
        const auto kids = g.children(n);
        for (std::size_t i = 0; i < op->activation_inputs; ++i) activation = activation * 0x9E3779B97F4A7C15ull ^ g.find(kids[i]);
    }
};

// Whether two Gemvs read the same activation rows (prologue, inputs and their views) the same way.
inline bool same_activation(const EGraph& g, const GemvNode& a, const GemvNode& b) {
    const cuda::GemvOp &x = *a.op, &y = *b.op;
    // The activation's classes first: they tell most pairs apart, and comparing prologues is dearer.
    if (x.activation_inputs != y.activation_inputs || !(x.layout == y.layout)) return false;
    const auto xs = g.children(a.node), ys = g.children(b.node);
    for (std::size_t i = 0; i < x.activation_inputs; ++i)
        if (g.find(xs[i]) != g.find(ys[i])) return false;
    if (!(x.prologue == y.prologue) || !(x.quant == y.quant)) return false;
    for (std::size_t i = 0; i < x.activation_inputs; ++i)
        if (!(a.spec->views[i] == b.spec->views[i])) return false;
    // Quantized weights of one format and shape (compared above) fuse; others by their row length.
    return x.quant || a.spec->views[x.activation_inputs].dim(1) == b.spec->views[y.activation_inputs].dim(1);
}

// Whether class c is a 16-bit tensor widened to f32: its Matmul also reads it as
// stored (matmul-reads-narrow-operand), which is the product worth streaming.
inline bool widened(const EGraph& g, const HlirContext& ctx, ClassId c) {
    for (ENodeId n : g.class_nodes(g.find(c))) {
        if (!g.alive(n) || ctx.spec(g, n).kind != sym(OpKind::Cast)) continue;
        const DType from = ctx.facts(g, g.children(n)[0]).dtype;
        if (from == DType::BF16 || from == DType::F16) return true;
    }
    return false;
}

}  // namespace gemv_detail

struct GemvFromMatmul {
    static constexpr std::string_view name = "cuda.gemv";
    using pattern = As<"gemm", Pat<op_symbol<MatmulOp>, Var<"a">, Var<"w">>>;
    static bool guard(const EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec& gemm = ctx.spec(g, m.node<"gemm">());
        return gemm.dtype == DType::F32 && gemm.views[0].rank() == 2 && ctx.facts(g, m.var<"a">()).dtype == DType::F32 &&
               gemv_detail::streamable_weight(gemm.views[1], ctx.facts(g, m.var<"w">()).dtype) &&
               !gemv_detail::widened(g, ctx, m.var<"w">());
    }
    static void apply(EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec gemm = ctx.spec(g, m.node<"gemm">());  // a copy: add_spec may move the specs
        ClassId children[] = {m.var<"a">(), m.var<"w">()};
        const ClassId root = m.root(g);
        for (const cuda::GemvLayout& layout : kGemvLayouts) {
            cuda::GemvOp op;
            op.layout = layout;
            g.merge(root, add_spec(g, ctx, NodeSpec::backend(op, gemm.views, gemm.shape, gemm.dtype), children));
        }
    }
};

// The activation rows a Gemv reads element for element from a row op's
// result (RMSNorm), or from an elementwise region's (activations rounded to
// the weights' dtype), are computed by the Gemv.
struct GemvAbsorbsPrologue {
    static constexpr std::string_view name = "cuda.gemv-prologue";
    using pattern = As<"gemv", AnyArity<op_symbol<cuda::GemvOp>>>;
    static constexpr bool reads_child_classes = true;
    static constexpr std::array<Symbol, 2> reads_child_ops = {op_symbol<cuda::RowOp>, op_symbol<FusedElementwiseOp>};
    static void apply(EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec& spec = ctx.spec(g, m.node<"gemv">());
        // Plain products only: the epilogue rule carries a prologue into the Gemvs it fuses.
        if (spec.payload_as<cuda::GemvOp>()->prologue || spec.payload_as<cuda::GemvOp>()->epilogue) return;
        // Of the activation's class, the row op that leaves the fewest of its inputs to other launches, then
        // hoists the most per-row work; else each region of casts and at most a few products and sums (the
        // activation rounded to the weights' dtype, sdpa's factor for fully masked rows; reaching back to
        // different producers: the extraction weighs them). A region computing more would be recomputed by
        // every block, and each prologue is one more Gemv for every epilogue the Gemv's consumers offer.
        std::optional<ENodeId> row_op;
        std::vector<ENodeId> regions;
        auto light = [&](ENodeId n) {
            const auto& steps = ctx.spec(g, n).payload_as<FusedElementwiseOp>()->program->steps;
            std::size_t arithmetic = 0;
            for (const FusedStep& s : steps) {
                if (s.kind == OpKind::Add || s.kind == OpKind::Mul) ++arithmetic;
                else if (s.kind != OpKind::Cast && s.kind != OpKind::Constant) return false;
            }
            return arithmetic <= kMaxPrologueArithmetic;
        };
        for (ENodeId r : g.class_nodes(g.find(g.children(m.node<"gemv">())[0]))) {
            if (!g.alive(r)) continue;
            const OpSymbol kind = ctx.spec(g, r).kind;
            if (kind == op_symbol<cuda::RowOp> && (!row_op || row_detail::consumer_rank(g, ctx, r) < row_detail::consumer_rank(g, ctx, *row_op)))
                row_op = r;
            if (kind == op_symbol<FusedElementwiseOp> && light(r)) regions.push_back(r);
        }
        if (row_op) regions = {*row_op};
        // The view is tested after the class, which most often holds no producer to absorb.
        if (regions.empty() || !spec.views[0].is_contiguous()) return;
        // Copies: add_spec may move the specs, merge the children.
        const NodeSpec gemv = spec;
        const cuda::GemvOp op = *gemv.payload_as<cuda::GemvOp>();
        const auto gemv_kids = g.children(m.node<"gemv">());
        const std::vector<ClassId> kids(gemv_kids.begin(), gemv_kids.end());
        const ClassId root = m.root(g);
        for (ENodeId producer : regions) {
            // References into the specs: add_spec, the iteration's last call, takes what it needs first.
            const NodeSpec& row = ctx.spec(g, producer);
            const auto row_kids = g.children(producer);
            if (row.dtype != DType::F32 || row.shape != gemv.views[0].dims() || row_kids.size() + (kids.size() - 1) > kMaxGemvInputs)
                continue;
            cuda::GemvOp fused = op;
            if (row_op) {
                fused.prologue = *row.payload_as<cuda::RowOp>();
            } else {
                fused.prologue = cuda::RowOp{};
                fused.prologue->program = row.payload_as<FusedElementwiseOp>()->program;
                for (std::uint16_t i = 0; i < row_kids.size(); ++i) fused.prologue->operands.push_back({cuda::RowOperand::Kind::Input, i});
            }
            fused.prologue->strategy = cuda::ReduceStrategy::BlockPerOutput;
            fused.activation_inputs = static_cast<std::uint16_t>(row_kids.size());
            std::vector<ClassId> children(row_kids.begin(), row_kids.end());
            std::vector<ShapeTracker> views = row.views;
            for (std::size_t i = 1; i < kids.size(); ++i) {
                children.push_back(kids[i]);
                views.push_back(gemv.views[i]);
            }
            g.merge(root, add_spec(g, ctx, NodeSpec::backend(fused, std::move(views), gemv.shape, gemv.dtype), children));
        }
    }
};

// A region reading Gemvs of one activation element for element is one Gemv.
struct GemvAbsorbsEpilogue {
    static constexpr std::string_view name = "cuda.gemv-epilogue";
    using pattern = As<"region", AnyArity<op_symbol<FusedElementwiseOp>>>;
    static constexpr bool reads_child_classes = true;
    static constexpr std::array<Symbol, 1> reads_child_ops = {op_symbol<cuda::GemvOp>};
    // What a lead fuses into is a function of the region's classes, the lead
    // and its partners: a match found again (a class the region reads gained
    // an e-node) fuses only the leads it did not fuse with the same ones last
    // time, and is passed over before anything is built when there are none.
    static void apply(EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const ENodeId matched = m.node<"region">();
        std::vector<ClassId> region_kids;
        for (ClassId c : g.children(matched)) region_kids.push_back(g.find(c));
        // One fused Gemv per activation a Gemv input offers (each layout, with or without its prologue).
        // Products fuse plain or with an epilogue of the product alone (rounded to bf16): a region grows
        // into all its inputs at once, so a region reading the plain product may also compute another
        // input (a residual rounded by the step before) that its own consumers already read. An epilogue
        // reading other tensors is not taken: the region holds every step a chain of such epilogues would.
        std::vector<std::pair<ENodeId, std::vector<std::optional<ENodeId>>>> leads;  // each with its partner per input
        {
            // The products of each input read whole, in class order: the leads, and where each lead's partners are.
            // References into the specs: nothing is added before the last use.
            const NodeSpec& spec = ctx.spec(g, matched);
            std::vector<std::vector<gemv_detail::GemvNode>> products_of(region_kids.size());
            bool any = false;
            for (std::size_t i = 0; i < region_kids.size(); ++i)
                for (ENodeId n : g.class_nodes(region_kids[i])) {
                    // The op is in the e-node's own record: most nodes are passed over without reading their spec.
                    if (!g.alive(n) || g.node(n).op != op_symbol<cuda::GemvOp>) continue;
                    const NodeSpec& s = ctx.spec(g, n);
                    if (!same_row_layout(s.shape, spec.shape)) continue;
                    const cuda::GemvOp* op = s.payload_as<cuda::GemvOp>();
                    if (!op->epilogue || g.children(n).size() == std::size_t{op->activation_inputs} + op->weights)
                        products_of[i].emplace_back(g, n, &s, op), any = true;
                }
            if (!any) return;
            // What follows is a function of these products (a product whose children change is stamped
            // again): most matches are found again for an e-node they do not read (a fused Gemv) and end here.
            std::vector<std::uint32_t> found(region_kids.begin(), region_kids.end());
            for (const auto& products : products_of) {
                found.push_back(static_cast<std::uint32_t>(products.size()));
                for (const gemv_detail::GemvNode& n : products) found.push_back(n.node), found.push_back(g.stamp_of(n.node));
            }
            if (ctx.read_before(kProductsRead, matched, std::move(found))) return;
            // The view is tested only where there is a product (most classes hold none): it builds expressions.
            for (std::size_t i = 0; i < region_kids.size(); ++i)
                if (!products_of[i].empty() && !reads_in_order(spec.views[i])) products_of[i].clear();
            std::vector<const gemv_detail::GemvNode*> lead_of;
            for (const auto& products : products_of)
                for (const gemv_detail::GemvNode& n : products) {
                    leads.push_back({n.node, std::vector<std::optional<ENodeId>>(region_kids.size())});
                    lead_of.push_back(&n);
                }
            for (std::size_t k = 0; k < leads.size(); ++k)
                for (std::size_t i = 0; i < region_kids.size(); ++i)
                    for (const gemv_detail::GemvNode& n : products_of[i])
                        if (n.activation == lead_of[k]->activation && gemv_detail::same_activation(g, *lead_of[k], n)) {
                            leads[k].second[i] = n.node;
                            break;
                        }
        }
        if (leads.empty()) return;
        const std::size_t stride = 1 + region_kids.size();
        std::vector<std::uint32_t> reads(region_kids.begin(), region_kids.end());
        for (const auto& [lead, gemvs] : leads) {
            reads.push_back(lead);
            for (const std::optional<ENodeId>& p : gemvs) reads.push_back(p ? *p : kNoPartner);
        }
        const std::span<const std::uint32_t> last = ctx.last_read(name, matched);
        const std::vector<std::uint32_t> before(last.begin(), last.end());
        if (ctx.read_before(name, matched, reads)) return;
        const bool same_classes = before.size() >= region_kids.size() && std::equal(region_kids.begin(), region_kids.end(), before.begin());
        auto fused_before = [&](std::size_t k) {
            const auto block = reads.begin() + static_cast<std::ptrdiff_t>(region_kids.size() + k * stride);
            for (std::size_t at = region_kids.size(); same_classes && at + stride <= before.size(); at += stride)
                if (std::equal(block, block + static_cast<std::ptrdiff_t>(stride), before.begin() + static_cast<std::ptrdiff_t>(at)))
                    return true;
            return false;
        };
        // The fused Gemv is a function of the partners (the lead reads its activation as they do): leads
        // with the same ones (the gate's product and the up's, for SiLU(gate) * up) make one Gemv.
        auto partners_seen = [&](std::size_t k) {
            for (std::size_t j = 0; j < k; ++j)
                if (leads[j].second == leads[k].second) return true;
            return false;
        };
        const NodeSpec region = ctx.spec(g, matched);  // a copy: add_spec may move the specs
        for (std::size_t k = 0; k < leads.size(); ++k)
            if (!fused_before(k) && !partners_seen(k)) fuse(g, ctx, m.root(g), region, region_kids, leads[k].first, leads[k].second);
    }

private:

    static constexpr std::uint32_t kNoPartner = std::numeric_limits<std::uint32_t>::max();
    static constexpr std::string_view kProductsRead = "cuda.gemv-epilogue products";

    static void fuse(EGraph& g, HlirContext& ctx, ClassId root, const NodeSpec& region, const std::vector<ClassId>& region_kids,
                     ENodeId first, const std::vector<std::optional<ENodeId>>& gemvs) {
        const std::size_t n_in = region_kids.size();
        // An input made deeper than the product may be computed from it (RMSNorm's scale of the sum a
        // residual add makes): the product computed elsewhere first, this Gemv would stream the weights
        // again. Only inputs that cannot depend on it (the residual, a bias) join an epilogue. Tested
        // first: most leads a region offers stop here, before anything is built.
        const std::uint32_t product_depth = ctx.facts(g, g.class_of(first)).depth;
        for (std::size_t i = 0; i < n_in; ++i)
            if (!gemvs[i] && ctx.facts(g, region_kids[i]).depth > product_depth) return;
        // References into the specs: add_spec, the last call, takes what it needs first.
        const NodeSpec& lead = ctx.spec(g, first);
        const auto& lead_op = *lead.payload_as<cuda::GemvOp>();
        std::vector<ClassId> children;
        std::vector<ShapeTracker> views;
        const auto lead_kids = g.children(first);
        for (std::size_t i = 0; i < lead_op.activation_inputs; ++i) {
            children.push_back(lead_kids[i]);
            views.push_back(lead.views[i]);
        }
        std::vector<std::pair<ClassId, ShapeTracker>> weights, extras;
        auto slot_of = [](std::vector<std::pair<ClassId, ShapeTracker>>& list, ClassId c, const ShapeTracker& v) {
            for (std::size_t i = 0; i < list.size(); ++i)
                if (list[i].first == c && list[i].second == v) return static_cast<std::uint16_t>(i);
            list.emplace_back(c, v);
            return static_cast<std::uint16_t>(list.size() - 1);
        };
        // Steps as (kind, operand references) over three spaces: weights, extras, earlier steps.
        struct Ref {
            enum Space : std::uint8_t { Weight, Extra, Step } space;
            std::uint16_t index;
        };
        struct Draft {
            FusedStep step;
            Ref a{Ref::Step, 0}, b{Ref::Step, 0};
        };
        std::vector<Draft> steps;
        auto append_program = [&](const FusedProgram& program, const std::vector<Ref>& inputs) {
            const std::size_t base = steps.size(), count = inputs.size();
            auto ref = [&](std::uint16_t slot) {
                return slot < count ? inputs[slot] : Ref{Ref::Step, static_cast<std::uint16_t>(base + slot - count)};
            };
            for (const FusedStep& f : program.steps) {
                Draft d{f};
                if (f.kind != OpKind::Constant && f.kind != OpKind::Iota) d.a = ref(f.a);
                if (is_binary(f.kind)) d.b = ref(f.b);
                steps.push_back(d);
            }
            return Ref{Ref::Step, static_cast<std::uint16_t>(steps.size() - 1)};
        };
        std::vector<Ref> region_inputs;
        for (std::size_t i = 0; i < n_in; ++i) {
            if (!gemvs[i]) {
                region_inputs.push_back({Ref::Extra, slot_of(extras, g.find(region_kids[i]), region.views[i])});
                continue;
            }
            const NodeSpec& part = ctx.spec(g, *gemvs[i]);
            const auto& part_op = *part.payload_as<cuda::GemvOp>();
            const auto part_kids = g.children(*gemvs[i]);
            std::vector<Ref> part_inputs;
            for (std::uint16_t j = 0; j < part_op.weights; ++j) {
                const std::size_t at = part_op.activation_inputs + j;
                part_inputs.push_back({Ref::Weight, slot_of(weights, g.find(part_kids[at]), part.views[at])});
            }
            if (!part_op.epilogue) {
                region_inputs.push_back(part_inputs[0]);
                continue;
            }
            for (std::size_t at = part_op.activation_inputs + part_op.weights; at < part_kids.size(); ++at)
                part_inputs.push_back({Ref::Extra, slot_of(extras, g.find(part_kids[at]), part.views[at])});
            region_inputs.push_back(append_program(*part_op.epilogue, part_inputs));
        }
        append_program(detail::region_program(region), region_inputs);
        if (weights.size() > kMaxGemvWeights || steps.size() > 2 * kMaxFusedSteps ||
            children.size() + weights.size() + extras.size() > kMaxGemvInputs)
            return;
        for (std::size_t i = 1; i < weights.size(); ++i)
            if (ctx.facts(g, weights[i].first).dtype != ctx.facts(g, weights[0].first).dtype) return;
        const auto m_weights = static_cast<std::uint16_t>(weights.size()), n_slots = static_cast<std::uint16_t>(weights.size() + extras.size());
        auto slot = [&](Ref r) {
            switch (r.space) {
                case Ref::Weight: return r.index;
                case Ref::Extra: return static_cast<std::uint16_t>(m_weights + r.index);
                case Ref::Step: break;
            }
            return static_cast<std::uint16_t>(n_slots + r.index);
        };
        auto program = std::make_shared<FusedProgram>();
        for (const Draft& d : steps) {
            FusedStep f = d.step;
            if (f.kind != OpKind::Constant && f.kind != OpKind::Iota) f.a = slot(d.a);
            if (is_binary(f.kind)) f.b = slot(d.b);
            program->steps.push_back(f);
        }
        cuda::GemvOp fused = lead_op;
        fused.weights = m_weights;
        fused.epilogue = std::move(program);
        for (const auto& [c, v] : weights) children.push_back(c), views.push_back(v);
        for (const auto& [c, v] : extras) children.push_back(c), views.push_back(v);
        g.merge(root, add_spec(g, ctx, NodeSpec::backend(fused, std::move(views), region.shape, region.dtype), children));
    }
};

// A Gemv reading a copy of a tensor (a Cast to the same or a wider float
// dtype through a view: the contiguous copy a permute-then-merge needs) reads
// the tensor through that view itself: it stages its activation rows anyway.
struct GemvReadsThroughCopy {
    static constexpr std::string_view name = "cuda.gemv-through-copy";
    using pattern = As<"gemv", AnyArity<op_symbol<cuda::GemvOp>>>;
    static constexpr bool reads_child_classes = true;
    static constexpr std::array<Symbol, 1> reads_child_ops = {sym(OpKind::Cast)};
    static void apply(EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec& gemv = ctx.spec(g, m.node<"gemv">());
        if (gemv.payload_as<cuda::GemvOp>()->prologue) return;
        const auto kids = g.children(m.node<"gemv">());
        // Most activations have no copy: the view is tested only once one is found.
        for (ENodeId c : g.class_nodes(g.find(kids[0]))) {
            if (!g.alive(c) || ctx.spec(g, c).kind != sym(OpKind::Cast)) continue;
            if (!gemv.views[0].is_contiguous()) return;
            const NodeSpec& cast = ctx.spec(g, c);
            const DType from = ctx.facts(g, g.children(c)[0]).dtype;
            // The Gemv reads its activation by element index, so any view of as many elements will do.
            if (!is_float(from) || cast.dtype != DType::F32 || !(cast.views[0].numel() == gemv.views[0].numel())) continue;
            std::vector<ClassId> children(kids.begin(), kids.end());
            children[0] = g.find(g.children(c)[0]);
            std::vector<ShapeTracker> views = gemv.views;
            views[0] = cast.views[0];
            // Built before add_spec, which may move the specs `gemv` and `cast` refer to.
            NodeSpec through = NodeSpec::backend(*gemv.payload_as<cuda::GemvOp>(), std::move(views), gemv.shape, gemv.dtype);
            g.merge(m.root(g), add_spec(g, ctx, std::move(through), children));
            return;
        }
    }
};

using GemvRules = RuleSet<GemvFromMatmul, GemvAbsorbsPrologue, GemvAbsorbsEpilogue, GemvReadsThroughCopy>;

}  // namespace luminal::egraph
