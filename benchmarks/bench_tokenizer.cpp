// Tokenizer encode throughput: a plain driver (tools/tokenizer_throughput.py runs
// it next to the `tokenizers` package on the same file and text).
//
//   bench_tokenizer <tokenizer.json> <text file> [--per-line] [--repeats N]
//
// Encodes the whole text as one string, or with --per-line each line (with its
// newline) as its own string, single-threaded, add_special_tokens=false; repeats
// N times (default 5) on the same Tokenizer and prints the median:
//   bytes <n>  tokens <n>  seconds <median>  MB/s <n>
#include "luminal/io/tokenizer.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

namespace {

std::vector<std::string_view> lines_of(std::string_view text) {
    std::vector<std::string_view> lines;
    std::size_t start = 0;
    while (start < text.size()) {
        std::size_t end = text.find('\n', start);
        end = end == std::string_view::npos ? text.size() : end + 1;
        lines.push_back(text.substr(start, end - start));
        start = end;
    }
    return lines;
}

int run(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s <tokenizer.json> <text file> [--per-line] [--repeats N]\n", argv[0]);
        return 2;
    }
    bool per_line = false;
    int repeats = 5;
    for (int i = 3; i < argc; ++i) {
        const std::string_view arg = argv[i];
        if (arg == "--per-line") per_line = true;
        else if (arg == "--repeats" && i + 1 < argc) repeats = std::max(1, std::atoi(argv[++i]));
        else {
            std::fprintf(stderr, "unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    const auto tokenizer = luminal::io::Tokenizer::from_file(argv[1]);
    const std::string text = luminal::io::read_text_file(argv[2]);
    const auto pieces = per_line ? lines_of(text) : std::vector<std::string_view>{text};

    std::vector<double> seconds;
    std::size_t tokens = 0;
    for (int r = 0; r < repeats; ++r) {
        tokens = 0;
        const auto start = std::chrono::steady_clock::now();
        for (const auto piece : pieces) tokens += tokenizer.encode(piece, false).size();
        seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(seconds.begin(), seconds.end());
    const double median = seconds[seconds.size() / 2];
    std::printf("bytes %zu\ntokens %zu\nseconds %.6f\nMB/s %.3f\n", text.size(), tokens, median,
                static_cast<double>(text.size()) / 1e6 / median);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception& error) {
        std::fprintf(stderr, "error: %s\n", error.what());
        return 1;
    }
}
