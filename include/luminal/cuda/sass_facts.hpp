#pragma once
// Facts read from a kernel's compiled code, the SASS of the cubin NVRTC made
// (cuobjdump), for the cost model to price what ptxas produced rather than what
// the source intends: registers and stack (spills, local arrays) per thread,
// the instruction count, call sites (64-bit division and remainder are
// subroutine calls on the GPU), and, for the main loop (the one streaming the
// most bytes of 16-byte loads per trip), its instructions and the bytes of
// global loads a thread has issued before the first instruction that waits on
// one of them (for copies to shared memory, cp.async, times the trips a wait
// leaves in flight): what Little's law needs.
//
// cuobjdump and nvdisasm come with the CUDA toolkit or as PyPI wheels
// (scripts/setup.sh installs those in build/cuda-tools/bin); they are looked for
// in $LUMINAL_CUDA_TOOLS, on the PATH, in that folder (for the project's own
// programs), then in /usr/local/cuda/bin. Without them
// sass_facts() is nullopt and the plan report says the facts are unknown.
//
// cuobjdump takes about half a second a cubin, so facts are kept in the kernel
// cache beside the cubins (Nvrtc::cache_dir()): a file per cubin and entry that
// holds both in full and is read only when both match, so a changed cubin is
// always read again. That cuobjdump found no code for the entry is kept too.
#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <unistd.h>
#include <vector>

#include "luminal/core/error.hpp"
#include "luminal/cuda/nvrtc.hpp"

namespace luminal::cuda {

struct SassFacts {
    int registers = 0;
    int stack_bytes = 0;   // per thread: spills and local arrays
    int instructions = 0;
    int calls = 0;         // call sites (64-bit division/remainder, other slow paths)
    int tensor_products = 0;  // tensor-core instructions (HMMA): what the model prices at the mma rate
    int main_loop_loads = 0;                // global loads per trip of the loop that reads the most bytes
    int main_loop_instructions = 0;         // instructions in one trip of that loop
    int main_loop_calls = 0;                // call sites in that loop
    double main_loop_bytes_in_flight = 0;   // of those, bytes a thread issues before the first waits
    int serial_load_loops = 0;              // loops that wait on each global load before issuing the next

    bool operator==(const SassFacts&) const = default;
};

namespace sass_detail {

struct Instruction {
    std::uint32_t address = 0;
    std::string opcode, operands;
    std::string guard;  // the predicate it runs under (@P0, @!P1), empty when unguarded
};

// The registers an operand list names (R12.64 is R12 and R13); RZ names none.
inline std::set<int> registers_in(std::string_view text) {
    static const std::regex reg(R"(\bR(\d+)(\.64)?)");
    std::set<int> out;
    const std::string s(text);
    for (auto it = std::sregex_iterator(s.begin(), s.end(), reg); it != std::sregex_iterator(); ++it) {
        const int r = std::stoi((*it)[1]);
        out.insert(r);
        if ((*it)[2].matched) out.insert(r + 1);
    }
    return out;
}

inline int load_bytes(std::string_view opcode) {
    if (opcode.find(".128") != std::string_view::npos) return 16;
    if (opcode.find(".64") != std::string_view::npos) return 8;
    if (opcode.find(".U16") != std::string_view::npos || opcode.find(".S16") != std::string_view::npos) return 2;
    if (opcode.find(".U8") != std::string_view::npos || opcode.find(".S8") != std::string_view::npos) return 1;
    return 4;
}

// Instructions whose every operand is read (no destination register first).
inline bool reads_every_operand(std::string_view opcode) {
    for (std::string_view prefix : {"ST", "RED", "BRA", "ISETP", "FSETP", "DSETP", "HSETP", "PLOP", "BAR", "EXIT", "RET"})
        if (opcode.starts_with(prefix)) return true;
    return false;
}

// Global loads: into registers (LDG) or copied to shared memory without them (LDGSTS, cp.async); not LDGDEPBAR,
// which commits a group of copies.
inline bool is_global_load(std::string_view opcode) { return opcode.starts_with("LDG") && !opcode.starts_with("LDGDEPBAR"); }
inline bool is_async_copy(std::string_view opcode) { return opcode.starts_with("LDGSTS"); }

// Bytes of global loads issued in `body` before an instruction reads a register one of them writes, or, for
// copies to shared memory, before a DEPBAR waits for them.
inline std::pair<int, double> loads_before_first_use(std::span<const Instruction> body) {
    std::set<int> pending;
    int loads = 0;
    double bytes = 0;
    for (const Instruction& i : body) {
        if (i.opcode.starts_with("DEPBAR") && loads > 0) return {loads, bytes};
        if (is_async_copy(i.opcode)) {
            ++loads;
            bytes += load_bytes(i.opcode);
            continue;
        }
        const std::size_t comma = i.operands.find(',');
        const std::string_view sources =
            reads_every_operand(i.opcode) || comma == std::string::npos ? std::string_view(i.operands)
                                                                        : std::string_view(i.operands).substr(comma + 1);
        for (int r : registers_in(sources))
            if (pending.contains(r)) return {loads, bytes};
        if (is_global_load(i.opcode)) {
            const std::set<int> destination = registers_in(std::string_view(i.operands).substr(0, comma));
            const int width = load_bytes(i.opcode);
            for (int r : destination)
                for (int w = 0; w < std::max(width / 4, 1); ++w) pending.insert(r + w);
            ++loads;
            bytes += width;
        }
    }
    return {loads, bytes};
}

// The most groups of copies to shared memory a wait leaves in flight (DEPBAR.LE SB0, n: cp.async.wait_group n): a
// pipeline's loop issues a group per trip, so n + 1 trips' copies are in flight while it waits.
inline int newer_groups_in_flight(const std::vector<Instruction>& code) {
    static const std::regex wait(R"(SB0,\s*0x([0-9a-f]+))");
    int most = 0;
    for (const Instruction& i : code) {
        std::smatch m;
        if (i.opcode.starts_with("DEPBAR") && std::regex_search(i.operands, m, wait))
            most = std::max(most, static_cast<int>(std::stoul(m[1], nullptr, 16)));
    }
    return most;
}

// `code` without sinf's and cosf's slow path: libdevice reduces an argument of magnitude 105615 or more by
// Payne-Hanek (a loop over the 2/pi table in constant memory, its product staged in registers or on the stack)
// behind a branch the kernels' arguments do not take (RoPE's angles, below 105615 radians for positions below that). A trip is what runs.
inline std::vector<Instruction> without_trig_slow_paths(const std::vector<Instruction>& code) {
    static const std::regex large_argument(R"(^(P\d+), PT, \|R\d+\|, 105615, PT)");
    static const std::regex target(R"(0x([0-9a-f]+))");
    std::vector<Instruction> out;
    std::string predicate;
    std::uint32_t skip_to = 0;
    for (const Instruction& i : code) {
        if (i.address < skip_to) continue;
        std::smatch m;
        if (i.opcode.starts_with("FSETP.GE") && std::regex_search(i.operands, m, large_argument)) predicate = m[1];
        out.push_back(i);
        if (!predicate.empty() && i.opcode.starts_with("BRA") && i.guard == "@!" + predicate && std::regex_search(i.operands, m, target)) {
            skip_to = static_cast<std::uint32_t>(std::stoul(m[1], nullptr, 16));
            predicate.clear();
        }
    }
    return out;
}

inline SassFacts facts_of(const std::vector<Instruction>& all_code) {
    SassFacts f;
    f.instructions = static_cast<int>(all_code.size());
    const std::vector<Instruction> code = without_trig_slow_paths(all_code);
    const int newer_groups = newer_groups_in_flight(code);
    static const std::regex target(R"(0x([0-9a-f]+))");
    std::vector<std::pair<std::size_t, std::size_t>> loops;  // [first, last] of each backward branch's body
    for (const Instruction& i : all_code) {
        if (i.opcode.starts_with("CALL")) ++f.calls;
        if (i.opcode.starts_with("HMMA")) ++f.tensor_products;
    }
    for (std::size_t i = 0; i < code.size(); ++i) {
        std::smatch m;
        if (!code[i].opcode.starts_with("BRA") || !std::regex_search(code[i].operands, m, target)) continue;
        const auto to = static_cast<std::uint32_t>(std::stoul(m[1], nullptr, 16));
        if (to > code[i].address) continue;
        for (std::size_t j = 0; j <= i; ++j)
            if (code[j].address == to) loops.emplace_back(j, i);
    }
    // The main loop: the one that streams, with the most bytes of 16-byte loads per trip (a merge or a
    // prologue reading scalars is not it), then the most bytes, then the most instructions. A loop's trip is
    // its own instructions, without those of the loops inside it: a quantized GEMV's chunk loop issues its
    // weight loads, then walks the chunk in a loop of shared-memory reads.
    std::tuple<double, double, std::size_t> best{};
    std::vector<Instruction> body;
    for (auto [first, last] : loops) {
        body.clear();
        for (std::size_t at = first; at <= last; ++at) {
            const bool nested = std::any_of(loops.begin(), loops.end(), [&](auto other) {
                return other != std::pair(first, last) && other.first >= first && other.second <= last && other.first <= at &&
                       at <= other.second;
            });
            if (!nested) body.push_back(code[at]);
        }
        int loads = 0;
        double bytes_per_trip = 0, vector_bytes = 0;
        for (const Instruction& i : body) {
            if (!is_global_load(i.opcode)) continue;
            ++loads;
            bytes_per_trip += load_bytes(i.opcode);
            if (load_bytes(i.opcode) == 16) vector_bytes += 16;
        }
        if (loads == 0) continue;
        auto [issued, bytes] = loads_before_first_use(body);
        if (std::all_of(body.begin(), body.end(), [](const Instruction& i) { return !is_global_load(i.opcode) || is_async_copy(i.opcode); }))
            bytes *= 1 + newer_groups;
        if (issued <= 1) ++f.serial_load_loops;
        const std::tuple<double, double, std::size_t> rank{vector_bytes, bytes_per_trip, body.size()};
        if (rank > best) {
            best = rank;
            f.main_loop_loads = loads;
            f.main_loop_instructions = static_cast<int>(body.size());
            f.main_loop_calls = static_cast<int>(std::count_if(body.begin(), body.end(), [](const Instruction& i) { return i.opcode.starts_with("CALL"); }));
            f.main_loop_bytes_in_flight = bytes;
        }
    }
    return f;
}

// The facts of `entry` from cuobjdump's -res-usage and -sass text of one cubin.
inline std::optional<SassFacts> parse(const std::string& text, std::string_view entry) {
    static const std::regex usage(R"(REG:(\d+) STACK:(\d+))");
    static const std::regex instruction(R"(/\*([0-9a-f]{4,})\*/\s+(?:(@!?U?P\w+)\s+)?([A-Z][A-Z0-9_.]*)\s*([^;]*);)");
    std::optional<SassFacts> facts;
    std::vector<Instruction> code;
    bool in_usage = false, in_code = false;
    int registers = 0, stack = 0;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
        if (const auto at = line.find("Function "); at != std::string::npos) {
            std::string name = line.substr(at + 9);
            const bool code_header = name.starts_with(": ");
            if (code_header) name = name.substr(2);
            while (!name.empty() && (name.back() == ':' || std::isspace(static_cast<unsigned char>(name.back())))) name.pop_back();
            in_usage = !code_header && name == entry;
            in_code = code_header && name == entry;
            continue;
        }
        std::smatch m;
        if (in_usage && std::regex_search(line, m, usage)) {
            registers = std::stoi(m[1]);
            stack = std::stoi(m[2]);
            in_usage = false;
        } else if (in_code && std::regex_search(line, m, instruction)) {
            code.push_back({static_cast<std::uint32_t>(std::stoul(m[1], nullptr, 16)), m[3], m[4], m[2]});
        }
    }
    if (code.empty()) return facts;
    facts = facts_of(code);
    facts->registers = registers;
    facts->stack_bytes = stack;
    return facts;
}

inline std::optional<std::filesystem::path> tool_folder() {
    std::vector<std::filesystem::path> candidates;
    if (const char* dir = std::getenv("LUMINAL_CUDA_TOOLS"); dir && *dir) candidates.emplace_back(dir);
    if (const char* path = std::getenv("PATH")) {
        std::string_view rest(path);
        while (!rest.empty()) {
            const std::size_t colon = rest.find(':');
            candidates.emplace_back(std::string(rest.substr(0, colon)));
            rest = colon == std::string_view::npos ? std::string_view{} : rest.substr(colon + 1);
        }
    }
#ifdef LUMINAL_CUDA_TOOLS_DIR
    candidates.emplace_back(LUMINAL_CUDA_TOOLS_DIR);
#endif
    candidates.emplace_back("/usr/local/cuda/bin");
    for (const auto& dir : candidates)
        if (::access((dir / "cuobjdump").c_str(), X_OK) == 0 && ::access((dir / "nvdisasm").c_str(), X_OK) == 0) return dir;
    return std::nullopt;
}

// The facts cache file's key: what the facts were read from. Its version changes with what parse() reads.
inline std::string cache_key(std::span<const char> cubin, std::string_view entry) {
    std::string key = fmt::format("luminal sass facts 6\n{}\n{}\n", entry, cubin.size());
    key.append(cubin.data(), cubin.size());
    return key;
}

// Where the facts of `entry` in `cubin` are kept; empty without a kernel cache.
inline std::filesystem::path cache_file(std::span<const char> cubin, std::string_view entry) {
    const auto dir = Nvrtc::cache_dir();
    return dir.empty() ? dir : dir / fmt::format("{:016x}.sass", cache_key_hash(cache_key(cubin, entry)));
}

// What the file kept in place of the facts where cuobjdump found no code for the entry.
inline constexpr std::string_view kNoCode = "none";

// The kept facts of `entry` in `cubin`: nullopt when none are kept, a kept nullopt where it has no code.
inline std::optional<std::optional<SassFacts>> read_cached(std::span<const char> cubin, std::string_view entry) {
    const auto file = cache_file(cubin, entry);
    if (file.empty()) return std::nullopt;
    std::ifstream in(file, std::ios::binary);
    const std::string key = cache_key(cubin, entry);
    std::string stored(key.size(), '\0');
    if (!in.read(stored.data(), static_cast<std::streamsize>(stored.size())) || stored != key) return std::nullopt;
    if ((in >> std::ws).peek() == kNoCode[0]) {
        std::string word;
        if (in >> word && word == kNoCode) return std::optional<SassFacts>{};
        return std::nullopt;
    }
    SassFacts f;
    if (!(in >> f.registers >> f.stack_bytes >> f.instructions >> f.calls >> f.tensor_products >> f.main_loop_loads >> f.main_loop_instructions >>
          f.main_loop_calls >> f.main_loop_bytes_in_flight >> f.serial_load_loops))
        return std::nullopt;
    return f;
}

// Best effort, as the cubin cache: facts not kept are only read again next time.
inline void write_cached(std::span<const char> cubin, std::string_view entry, const std::optional<SassFacts>& facts) {
    const auto file = cache_file(cubin, entry);
    if (file.empty()) return;
    std::error_code ec;
    std::filesystem::create_directories(file.parent_path(), ec);
    const auto partial = file.string() + fmt::format(".{}.tmp", ::getpid());
    {
        std::ofstream out(partial, std::ios::binary);
        out << cache_key(cubin, entry);
        if (const SassFacts* f = facts ? &*facts : nullptr)
            out << fmt::format("{} {} {} {} {} {} {} {} {} {}\n", f->registers, f->stack_bytes, f->instructions, f->calls, f->tensor_products,
                               f->main_loop_loads, f->main_loop_instructions, f->main_loop_calls, f->main_loop_bytes_in_flight, f->serial_load_loops);
        else
            out << kNoCode << '\n';
        if (!out) {
            out.close();
            std::filesystem::remove(partial, ec);
            return;
        }
    }
    std::filesystem::rename(partial, file, ec);  // atomic: readers see a whole file or none
}

}  // namespace sass_detail

// Whether cuobjdump and nvdisasm were found (sass_facts() can read cubins).
inline bool sass_tools_available() { return sass_detail::tool_folder().has_value(); }

// The facts of kernel `entry` in `cubin`; nullopt without the tools or when the cubin has no such kernel.
inline std::optional<SassFacts> sass_facts(std::span<const char> cubin, std::string_view entry) {
    static const std::optional<std::filesystem::path> tools = sass_detail::tool_folder();
    if (!tools) return std::nullopt;
    static std::mutex mutex;
    std::lock_guard lock(mutex);
    if (auto cached = sass_detail::read_cached(cubin, entry)) return *cached;
    const auto file = std::filesystem::temp_directory_path() / fmt::format("luminal-sass-{}.cubin", ::getpid());
    {
        std::ofstream out(file, std::ios::binary);
        out.write(cubin.data(), static_cast<std::streamsize>(cubin.size()));
        if (!out) return std::nullopt;
    }
    const std::string command = fmt::format("PATH='{0}':\"$PATH\" '{0}/cuobjdump' -res-usage -sass '{1}' 2>&1", tools->string(), file.string());
    std::string text;
    int status = -1;
    if (FILE* pipe = ::popen(command.c_str(), "r")) {
        std::array<char, 1 << 14> buffer{};
        for (std::size_t n; (n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0;) text.append(buffer.data(), n);
        status = ::pclose(pipe);
    }
    std::filesystem::remove(file);
    auto facts = sass_detail::parse(text, entry);
    // No code where cuobjdump ran is an answer too (else each plan runs it again); a failed run is not.
    if (facts || status == 0) sass_detail::write_cached(cubin, entry, facts);
    return facts;
}

}  // namespace luminal::cuda
