#pragma once
// A main() for benchmarks that compare luminal with a peer in the same run:
// after the usual Google Benchmark output it prints, for each (ours, peer)
// pair, the ratio of their median real times (run with
// --benchmark_repetitions=N to get medians on a noisy machine).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace luminal_bench {

class RecordingReporter : public benchmark::ConsoleReporter {
public:
    void ReportRuns(const std::vector<Run>& runs) override {
        for (const Run& run : runs) {
            std::string name = run.benchmark_name();
            bool aggregate = run.run_type == Run::RT_Aggregate;
            if (aggregate && run.aggregate_name != "median") continue;
            std::string base = aggregate ? name.substr(0, name.rfind('_')) : name;
            if (aggregate || !medians_.count(base)) medians_[base] = run.GetAdjustedRealTime();
        }
        ConsoleReporter::ReportRuns(runs);
    }
    const std::map<std::string, double>& times() const { return medians_; }

private:
    std::map<std::string, double> medians_;
};

// Runs all registered benchmarks, then prints "ratio <ours> / <peer> = x" lines.
inline int run_with_ratios(int argc, char** argv, const std::vector<std::pair<std::string, std::string>>& pairs) {
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    RecordingReporter reporter;
    benchmark::RunSpecifiedBenchmarks(&reporter);
    for (auto& [ours, peer] : pairs) {
        auto a = reporter.times().find(ours), b = reporter.times().find(peer);
        if (a == reporter.times().end() || b == reporter.times().end()) continue;
        std::printf("ratio %s / %s = %.2f\n", ours.c_str(), peer.c_str(), a->second / b->second);
    }
    benchmark::Shutdown();
    return 0;
}

}  // namespace luminal_bench
