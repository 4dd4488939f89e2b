// E-graph saturation timings on the arithmetic test language, for the side by
// side with egglog (tools/egglog_compare.py writes the same rules in egglog and
// runs both). A plain main, not Google Benchmark, so the script can parse it:
// one line per workload,
//
//   workload=ac_sum n=8 rules=ac classes=255 nodes=6058 iterations=9 reps=5
//     median_ms=... min_ms=... term=(Add (Var 0) (Add (Var 1) ...))
//
// (all on one line; term= is last and runs to the end of the line). After an
// untimed warm-up (kWarmUpMs), each rep builds a fresh e-graph and the input term
// (untimed), then times saturate() alone. By default the backoff scheduler is off (match_limit and the other
// limits are effectively infinite), which is what egglog's (saturate ...) does;
// --backoff uses the default Limits instead.
//
//   bench_egraph_arith [--reps N] [--only NAME] [--backoff] [--report]
//
// classes = EGraph::num_classes() (canonical classes), nodes = num_nodes()
// (live, i.e. canonical and distinct, e-nodes), both at the fixpoint.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "egraph/arith_language.hpp"

namespace {

using namespace luminal::egraph;
using arith::add;
using arith::mul;
using arith::num;
using arith::var;

struct Workload {
    std::string name;
    int n;                // size parameter (0 when the term is fixed)
    std::string rules;    // "ac" or "classic"
    std::function<ClassId(EGraph&)> build;
    long expected_classes = -1, expected_nodes = -1;  // known fixpoints, -1 if none
};

// The input term as an s-expression in egglog's syntax, read back from the
// e-graph before saturation (every class then holds exactly one e-node).
std::string sexpr(const EGraph& g, ClassId c) {
    ENodeId id = g.class_nodes(c).front();
    const ENode& n = g.node(id);
    switch (n.op) {
        case arith::Num: return "(Num " + std::to_string(arith::number_of(n.attr)) + ")";
        case arith::Var: return "(Var " + std::to_string(n.attr) + ")";
        default: {
            std::string out = n.op == arith::Add ? "(Add" : "(Mul";
            for (ClassId child : g.children(id)) out += " " + sexpr(g, child);
            return out + ")";
        }
    }
}

std::vector<Workload> workloads() {
    std::vector<Workload> out;
    // (a) AC of + on x0 + (x1 + (... + x{n-1})): 2^n - 1 classes, 3^n - 2^(n+1) + 1 + n nodes.
    for (int n = 6; n <= 10; ++n) {
        long pow3 = 1;
        for (int i = 0; i < n; ++i) pow3 *= 3;
        out.push_back({"ac_sum", n, "ac", [n](EGraph& g) { return arith::sum_of_vars(g, n); }, (1L << n) - 1,
                       pow3 - (1L << (n + 1)) + 1 + n});
    }
    // (b) The classic set on small polynomial-ish terms that saturate.
    // (x*1 + y*2) * (3 + 4) + x + x
    out.push_back({"classic_poly1", 0, "classic", [](EGraph& g) {
                       ClassId x = var(g, 0), y = var(g, 1);
                       ClassId sum = add(g, mul(g, x, num(g, 1)), mul(g, y, num(g, 2)));
                       ClassId p = mul(g, sum, add(g, num(g, 3), num(g, 4)));
                       return add(g, add(g, p, x), x);
                   }});
    // (x + 0*y) * 1 + x  (the unit test's term)
    out.push_back({"classic_poly2", 0, "classic", [](EGraph& g) {
                       ClassId x = var(g, 0), y = var(g, 1);
                       return add(g, mul(g, add(g, x, mul(g, num(g, 0), y)), num(g, 1)), x);
                   }});
    // (x*y + z*1) * (2*3) + (x*y + z) + 5
    out.push_back({"classic_poly3", 0, "classic", [](EGraph& g) {
                       ClassId x = var(g, 0), y = var(g, 1), z = var(g, 2);
                       ClassId s = add(g, mul(g, x, y), mul(g, z, num(g, 1)));
                       ClassId t = mul(g, s, mul(g, num(g, 2), num(g, 3)));
                       return add(g, add(g, t, add(g, mul(g, x, y), z)), num(g, 5));
                   }});
    // x*(y*(z*(w*1))) + (1 + 2) * (w + w)
    out.push_back({"classic_poly4", 0, "classic", [](EGraph& g) {
                       ClassId x = var(g, 0), y = var(g, 1), z = var(g, 2), w = var(g, 3);
                       ClassId prod = mul(g, x, mul(g, y, mul(g, z, mul(g, w, num(g, 1)))));
                       return add(g, prod, mul(g, add(g, num(g, 1), num(g, 2)), add(g, w, w)));
                   }});
    // x0*(x1*(x2*(x3*(x4*1)))) + (x5 + (x6 + (2 + (3 + x5)))): AC of * and + at once, with folding.
    out.push_back({"classic_mixed", 0, "classic", [](EGraph& g) {
                       ClassId prod = mul(g, var(g, 4), num(g, 1));
                       for (int i = 3; i >= 0; --i) prod = mul(g, var(g, static_cast<AttrId>(i)), prod);
                       ClassId sum = add(g, var(g, 6), add(g, num(g, 2), add(g, num(g, 3), var(g, 5))));
                       return add(g, prod, add(g, var(g, 5), sum));
                   }});
    // (x0 + x1 + ... + x6) * (y*1) with the sum right-nested: AC of + under a product.
    out.push_back({"classic_sum7", 0, "classic", [](EGraph& g) {
                       return mul(g, arith::sum_of_vars(g, 7), mul(g, var(g, 7), num(g, 1)));
                   }});
    return out;
}

// Each rep destroys its e-graph. glibc then returns the top of the heap, and
// every block it had mmap'ed, to the kernel, and the next rep faults those
// pages in afresh: a fifth of the time of ac_sum7 on a VM. egglog's reps run
// in a long-lived Python process whose heap keeps its pages, so the driver
// keeps freed memory too (blocks up to glibc's 32 MiB mmap cap).
void keep_freed_memory_in_heap() {
#if defined(__GLIBC__)
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
#endif
}

constexpr double kWarmUpMs = 20;

template <typename Rules>
RunReport run_once(const Workload& w, const Limits& limits, double& ms, std::string* term) {
    EGraph g;
    arith::Context ctx;
    ClassId root = w.build(g);
    g.rebuild();
    if (term) *term = sexpr(g, root);
    auto start = std::chrono::steady_clock::now();
    RunReport report = saturate(g, ctx, Rules{}, limits);
    ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return report;
}

}  // namespace

int main(int argc, char** argv) {
    int reps = 5;
    bool backoff = false, print_report = false;
    std::string only;
    for (int i = 1; i < argc; ++i) {
        std::string_view a = argv[i];
        if (a == "--reps" && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
        else if (a == "--only" && i + 1 < argc) only = argv[++i];
        else if (a == "--backoff") backoff = true;
        else if (a == "--report") print_report = true;
        else {
            std::fprintf(stderr, "usage: %s [--reps N] [--only NAME] [--backoff] [--report]\n", argv[0]);
            return 2;
        }
    }
    keep_freed_memory_in_heap();
    Limits limits;
    if (!backoff) {
        limits.iterations = 1'000'000;
        limits.nodes = std::numeric_limits<std::size_t>::max() / 2;
        limits.seconds = 1e9;
        limits.match_limit = std::numeric_limits<std::size_t>::max() / 4;  // never banned
    }
    int status = 0;
    for (const Workload& w : workloads()) {
        std::string label = w.name + (w.n ? std::to_string(w.n) : "");
        if (!only.empty() && only != w.name && only != label) continue;
        std::vector<double> times;
        std::string term;
        RunReport report;
        auto run = [&](double& ms, std::string* term_out) {
            return w.rules == "ac" ? run_once<arith::AcRules>(w, limits, ms, term_out)
                                   : run_once<arith::ClassicRules>(w, limits, ms, term_out);
        };
        // Untimed runs first, for kWarmUpMs or one run if longer: a fresh
        // process faults in its heap pages and starts with cold caches and
        // branch predictors, which cost a 0.2 ms workload's first reps up to
        // 80% (egglog's reps run in a Python process that has just run the
        // same workload; see also keep_freed_memory_in_heap).
        double warm_up_ms = 0;
        report = run(warm_up_ms, &term);
        for (double spent = warm_up_ms; spent < kWarmUpMs; spent += warm_up_ms) report = run(warm_up_ms, nullptr);
        for (int r = 0; r < reps; ++r) {
            double ms = 0;
            report = run(ms, nullptr);
            times.push_back(ms);
        }
        std::sort(times.begin(), times.end());
        double median = times.size() % 2 ? times[times.size() / 2]
                                         : (times[times.size() / 2 - 1] + times[times.size() / 2]) / 2;
        std::printf("workload=%s n=%d rules=%s stop=%s classes=%zu nodes=%zu iterations=%zu reps=%d median_ms=%.4f "
                    "min_ms=%.4f term=%s\n",
                    w.name.c_str(), w.n, w.rules.c_str(), std::string(name_of(report.stop)).c_str(), report.classes,
                    report.nodes, report.iterations, reps, median, times.front(), term.c_str());
        if (print_report) std::fprintf(stderr, "%s: %s", label.c_str(), report.to_string().c_str());
        std::fflush(stdout);
        if (report.stop != StopReason::Saturated) {
            std::fprintf(stderr, "%s: stopped by %s, not saturated\n", label.c_str(),
                         std::string(name_of(report.stop)).c_str());
            status = 1;
        }
        if ((w.expected_classes >= 0 && static_cast<long>(report.classes) != w.expected_classes) ||
            (w.expected_nodes >= 0 && static_cast<long>(report.nodes) != w.expected_nodes)) {
            std::fprintf(stderr, "%s: fixpoint %zu classes / %zu nodes, expected %ld / %ld\n", label.c_str(),
                         report.classes, report.nodes, w.expected_classes, w.expected_nodes);
            status = 1;
        }
    }
    return status;
}
