// The kernels a CUDA plan generates are the same in every process: their
// sources, which key the NVRTC cache on disk, depend on no address. Interned
// expressions live wherever the process first made them, so two children of
// this process build one graph's plan, one after interning unrelated
// expressions: each graph's expressions lie at other addresses, and the
// sources must not differ.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <luminal/cuda.hpp>
#include <luminal/luminal.hpp>
#include <luminal/nn/mlp.hpp>
#include <luminal/nn/norm.hpp>
#include <sstream>
#include <string>
#include <vector>

using namespace luminal;

namespace {

// Sizes no other test uses, so that their expressions are first interned in
// the children, after the unrelated ones.
constexpr std::int64_t kDeterminismHidden = 1064;
constexpr std::int64_t kDeterminismIntermediate = 56;

// Every kernel source of a decoder block's plan (RMSNorm, a gated MLP, the
// residual, a softmax of the result), of its program and its decode specialization.
std::vector<std::string> block_kernel_sources() {
    Graph g;
    nn::ParameterSet params;
    auto x = g.named_tensor("x", {Expression('s'), Expression(kDeterminismHidden)});
    auto norm = nn::RmsNorm::create(params, g, "norm", kDeterminismHidden, 1e-5);
    auto mlp = nn::GatedMlp::create(params, g, "mlp", kDeterminismHidden, kDeterminismIntermediate, nn::Activation::Silu, false,
                                    DType::BF16);
    auto scale = params.add(g, "scale", {kDeterminismHidden});
    auto y = x + mlp(norm(x));
    (y * scale.expand_dim(0, Expression('s'))).softmax(1).output();
    CompileOptions options;
    options.verbosity = 0;
    options.workloads = {{DynMap{{'s', 4}}, 1}};
    options.specializations = {{DynMap{{'s', 1}}, {{DynMap{{'s', 1}}, 1}}}};
    const Program program = compile_with_report(g, cuda::HostEmulator{}, options).second.program;
    std::vector<const Program*> programs{&program};
    for (const Program& special : program.specializations) programs.push_back(&special);
    std::vector<std::string> sources;
    for (const Program* p : programs) {
        const cuda::Plan plan = cuda::plan_program(*p);
        for (std::string& s : cuda::plan_sources(plan)) sources.push_back(std::move(s));
        for (std::string& s : cuda::group_sources(plan)) sources.push_back(std::move(s));
    }
    return sources;
}

// block_kernel_sources() in a child process that first interns `unrelated`
// expressions of its own; the child hands the sources back through `file`.
std::vector<std::string> sources_in_child(std::size_t unrelated, const std::filesystem::path& file) {
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        int status = 1;
        try {
            for (std::size_t i = 0; i < unrelated; ++i) (void)(Expression('q') * Expression(static_cast<std::int64_t>(104729 + i)));
            std::ofstream out(file, std::ios::binary);
            for (const std::string& s : block_kernel_sources()) out << s.size() << '\n' << s;
            status = out ? 0 : 1;
        } catch (...) {
        }
        std::_Exit(status);  // not exit(): the child must not run the parent's destructors and doctest's report
    }
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
    std::ifstream in(file, std::ios::binary);
    std::vector<std::string> sources;
    for (std::size_t size = 0; in >> size;) {
        in.get();
        std::string s(size, '\0');
        in.read(s.data(), static_cast<std::streamsize>(size));
        sources.push_back(std::move(s));
    }
    return sources;
}

// The first line where two sources differ, both ways.
std::string first_difference(const std::string& a, const std::string& b) {
    std::istringstream x(a), y(b);
    std::string p, q;
    for (int line = 1; std::getline(x, p) && std::getline(y, q); ++line)
        if (p != q) return "line " + std::to_string(line) + ": `" + p + "` against `" + q + "`";
    return "one ends early";
}

}  // namespace

TEST_CASE("a plan's kernel sources (the NVRTC cache's keys) are the same wherever its expressions were allocated") {
    const auto dir = std::filesystem::temp_directory_path() / ("luminal-determinism-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::vector<std::string> first = sources_in_child(0, dir / "first");
    const std::vector<std::string> second = sources_in_child(5000, dir / "second");
    std::filesystem::remove_all(dir);
    REQUIRE(!first.empty());
    REQUIRE(first.size() == second.size());
    for (std::size_t i = 0; i < first.size(); ++i) CHECK_MESSAGE(first[i] == second[i], "kernel ", i, ": ", first_difference(first[i], second[i]));
}
