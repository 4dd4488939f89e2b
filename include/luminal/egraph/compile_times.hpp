#pragma once
// Wall time of each phase of a compilation (CompileReport::times), printed on
// one line by LUMINAL_VERBOSE=1 and per model by bench_model_build, so that a
// slower compile shows which phase grew.
#include <string>
#include <vector>

#include <fmt/format.h>

namespace luminal {

// One program's extraction from the saturated e-graph: the main program's, or a specialization's.
struct ExtractionTimes {
    std::vector<double> costing_seconds;  // pricing every e-node, one entry per workload
    double choice_seconds = 0;            // the cost model's cheapest program from those prices
    double search_seconds = 0;            // profiling candidates (none with search_candidates = 1)
    double lowering_seconds = 0;          // the chosen e-nodes to a Program

    double seconds() const {
        double costing = 0;
        for (double s : costing_seconds) costing += s;
        return costing + choice_seconds + search_seconds + lowering_seconds;
    }
};

struct CompileTimes {
    double build_seconds = 0;                  // the HLIR graph into an e-graph
    double shared_seconds = 0;                 // what every extraction reads of the saturated e-graph, gathered once
    double saturation_seconds = 0;
    std::vector<ExtractionTimes> extractions;  // the main program's, then each specialization's
    double load_seconds = 0;                   // Runtime::load of the chosen program

    double seconds() const {
        double total = build_seconds + saturation_seconds + shared_seconds + load_seconds;
        for (const ExtractionTimes& e : extractions) total += e.seconds();
        return total;
    }

    // "compile 12.3 ms: build 1.0, saturation 5.0, extraction graph 1.0, extraction
    // [costing 0.5+0.4, choice 2.0, search 0, lowering 0.3], s=1 [...], load 1.0"
    std::string to_string() const {
        auto ms = [](double s) { return fmt::format("{:.1f}", s * 1e3); };
        std::string out = fmt::format("compile {} ms: build {}, saturation {}, extraction graph {}", ms(seconds()),
                                      ms(build_seconds), ms(saturation_seconds), ms(shared_seconds));
        for (std::size_t i = 0; i < extractions.size(); ++i) {
            const ExtractionTimes& e = extractions[i];
            std::string costing;
            for (double s : e.costing_seconds) {
                if (!costing.empty()) costing += '+';
                costing += ms(s);
            }
            out += fmt::format(", {} [costing {}, choice {}, search {}, lowering {}]",
                               i == 0 ? std::string("extraction") : fmt::format("specialization {}", i), costing,
                               ms(e.choice_seconds), ms(e.search_seconds), ms(e.lowering_seconds));
        }
        return out + fmt::format(", load {}", ms(load_seconds));
    }
};

}  // namespace luminal
