#pragma once
// Wall time of each phase of a compilation (CompileReport::times), printed on
// one line by LUMINAL_VERBOSE=1 and per model by bench_model_build, so that a
// slower compile shows which phase grew.
#include <string>
#include <vector>

#include <fmt/format.h>

namespace luminal {

// One program's extraction from the priced e-graph: the main program's, or a specialization's.
struct ExtractionTimes {
    double choice_seconds = 0;    // the cost model's cheapest program from the prices
    double search_seconds = 0;    // profiling candidates (none with search_candidates = 1)
    double lowering_seconds = 0;  // the chosen e-nodes to a Program

    double seconds() const { return choice_seconds + search_seconds + lowering_seconds; }
};

struct CompileTimes {
    double build_seconds = 0;                  // the HLIR graph into an e-graph
    double shared_seconds = 0;                 // what every extraction reads of the saturated e-graph, gathered once
    double saturation_seconds = 0;
    double costing_seconds = 0;                // pricing every e-node at every workload of every extraction
    std::vector<ExtractionTimes> extractions;  // the main program's, then each specialization's
    double load_seconds = 0;                   // Runtime::load of the chosen program

    double seconds() const {
        double total = build_seconds + saturation_seconds + shared_seconds + costing_seconds + load_seconds;
        for (const ExtractionTimes& e : extractions) total += e.seconds();
        return total;
    }

    // "compile 12.3 ms: build 1.0, saturation 5.0, extraction graph 1.0, costing 0.9,
    // extraction [choice 2.0, search 0, lowering 0.3], specialization 1 [...], load 1.0"
    std::string to_string() const {
        auto ms = [](double s) { return fmt::format("{:.1f}", s * 1e3); };
        std::string out = fmt::format("compile {} ms: build {}, saturation {}, extraction graph {}, costing {}", ms(seconds()),
                                      ms(build_seconds), ms(saturation_seconds), ms(shared_seconds), ms(costing_seconds));
        for (std::size_t i = 0; i < extractions.size(); ++i) {
            const ExtractionTimes& e = extractions[i];
            out += fmt::format(", {} [choice {}, search {}, lowering {}]",
                               i == 0 ? std::string("extraction") : fmt::format("specialization {}", i), ms(e.choice_seconds),
                               ms(e.search_seconds), ms(e.lowering_seconds));
        }
        return out + fmt::format(", load {}", ms(load_seconds));
    }
};

}  // namespace luminal
