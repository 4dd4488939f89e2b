#pragma once
// The instruction sets the quantized kernels are written for, chosen at run
// time (the headers are compiled with the user's flags, which need not enable
// AVX2): each kernel is a function compiled for its own target
// (__attribute__((target)), LUMINAL_AVX2 / LUMINAL_VNNI) and called only
// where the CPU reports the features (__builtin_cpu_supports); and the vector
// primitives the kernels of every format share.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "luminal/core/error.hpp"
#include "luminal/lowering/quantized.hpp"

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define LUMINAL_QUANT_X86 1
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace luminal::cpu::quant {

enum class Isa { Scalar, Avx2, Avx512Vnni };

inline const char* name_of(Isa isa) {
    switch (isa) {
        case Isa::Avx2: return "avx2";
        case Isa::Avx512Vnni: return "avx512vnni";
        default: return "scalar";
    }
}

// Whether this CPU runs `isa`'s kernels.
inline bool supports(Isa isa) {
#ifdef LUMINAL_QUANT_X86
    // F16C through cpuid (leaf 1, ECX bit 29): clang's __builtin_cpu_supports has no "f16c".
    static const bool f16c = [] {
        unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
        return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
    }();
    static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
    static const bool vnni = avx2 && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl") &&
                             __builtin_cpu_supports("avx512bw");
    if (isa == Isa::Avx2) return avx2;
    if (isa == Isa::Avx512Vnni) return vnni;
#else
    if (isa != Isa::Scalar) return false;
#endif
    return true;
}

// Whether this CPU multiplies bf16 pairs into f32 sums (AVX512_BF16's
// vdpbf16ps; cpuid leaf 7, subleaf 1, EAX bit 5), on top of `isa`'s kernels:
// only the AVX-512 ones use it, so a cap below them turns it off too.
inline bool supports_bf16_dot(Isa isa) {
#ifdef LUMINAL_QUANT_X86
    static const bool bf16 = [] {
        unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
        return __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && (eax & (1u << 5)) != 0;
    }();
    return isa == Isa::Avx512Vnni && supports(isa) && bf16;
#else
    (void)isa;
    return false;
#endif
}

// The instruction set `name` names ("scalar", "avx2", "avx512vnni").
inline Isa isa_named(std::string_view name, const char* where) {
    for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512Vnni})
        if (name == name_of(isa)) return isa;
    throw Error(where, fmt::format("unknown instruction set '{}' (one of scalar, avx2, avx512vnni)", name));
}

// The best instruction set this CPU runs, at most `cap`.
inline Isa best_isa(Isa cap) {
    for (Isa isa : {Isa::Avx512Vnni, Isa::Avx2})
        if (isa <= cap && supports(isa)) return isa;
    return Isa::Scalar;
}

// The best instruction set this CPU runs, at most what LUMINAL_MAX_CPU_ISA names
// when it is set: so an AVX-512 machine can time and test the AVX2 kernels.
inline Isa best_isa() {
    const char* cap = std::getenv("LUMINAL_MAX_CPU_ISA");
    return best_isa(cap && *cap ? isa_named(cap, "LUMINAL_MAX_CPU_ISA") : Isa::Avx512Vnni);
}

#ifdef LUMINAL_QUANT_X86
#define LUMINAL_AVX2 __attribute__((target("avx2,fma,f16c")))
#define LUMINAL_VNNI __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))
#define LUMINAL_BF16_DOT __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni,avx512bf16")))

// The body of a product over weight rows [t.j_begin, t.j_end) in steps of STEP
// (1, or a group of interleaved rows) and the activations in tiles of 4 rows
// (then 2, 1): ROWS<F, R>(weight rows, x, first activation row, out, out stride).
#define LUMINAL_ROW_TILES(ROWS, STEP)                                                                       \
    for (std::int64_t j = t.j_begin; j < t.j_end; j += (STEP)) {                                          \
        const std::byte* w = t.weight + j * t.row_bytes;                                                  \
        std::int64_t i = 0;                                                                               \
        for (; i + 4 <= x.rows; i += 4) ROWS<F, 4>(w, x, i, t.out + i * t.out_stride + j, t.out_stride);  \
        for (; i + 2 <= x.rows; i += 2) ROWS<F, 2>(w, x, i, t.out + i * t.out_stride + j, t.out_stride);  \
        for (; i < x.rows; ++i) ROWS<F, 1>(w, x, i, t.out + i * t.out_stride + j, t.out_stride);           \
    }

namespace simd_detail {

LUMINAL_AVX2 inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

LUMINAL_AVX2 inline float f16(const std::byte* p) {
    std::uint16_t bits;
    std::memcpy(&bits, p, sizeof bits);
    return _cvtsh_ss(bits);
}

// sum over 8-lane groups of w * x (as i32 lanes): w unsigned (the 4- and 5-bit
// values), or signed (Q8_0, through the |w|, sign(x, w) identity).
template <QuantFormat F>
LUMINAL_AVX2 inline __m256i dot_avx2(__m256i w, __m256i x) {
    __m256i pairs;
    if constexpr (F == QuantFormat::Q8_0) pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
    else pairs = _mm256_maddubs_epi16(w, x);
    return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
}

template <QuantFormat F>
LUMINAL_VNNI inline __m256i dot_vnni(__m256i w, __m256i x) {
    if constexpr (F == QuantFormat::Q8_0)
        return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
    else return _mm256_dpbusd_epi32(_mm256_setzero_si256(), w, x);
}

// Per 4-byte lane, the sum over vectors j < N of w[j] times the 4 activation
// bytes at q + 4j (broadcast): unsigned weights of at most kMaxWeight, signed
// activations in [-127, 127]. AVX2 has no vpdpbusd: vpmaddubsw's pair sums are
// added as i16 in groups that cannot overflow, then widened by one vpmaddwd per
// group (SmolLM2-135M's 4-bit weights: one widening per 8 products instead of 8).
template <int N, int kMaxWeight>
LUMINAL_AVX2 inline __m256i unsigned_dots_avx2(const __m256i* w, const std::int8_t* q) {
    constexpr int pair_max = 2 * kMaxWeight * 127;
    constexpr int group = 32767 / pair_max >= N ? N : 32767 / pair_max >= 4 ? 4 : 32767 / pair_max >= 2 ? 2 : 1;
    static_assert(group >= 1 && N % group == 0);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i total = _mm256_setzero_si256();
    for (int g = 0; g < N; g += group) {
        // two i16 chains, so the adds are not one serial dependency
        __m256i pairs[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
        for (int j = g; j < g + group; ++j) {
            std::int32_t four;
            std::memcpy(&four, q + 4 * j, 4);
            pairs[j & 1] = _mm256_add_epi16(pairs[j & 1], _mm256_maddubs_epi16(w[j], _mm256_set1_epi32(four)));
        }
        total = _mm256_add_epi32(total, _mm256_madd_epi16(_mm256_add_epi16(pairs[0], pairs[1]), ones));
    }
    return total;
}

// unsigned_dots_avx2 with vpdpbusd: two chains of N / 2 for latency.
template <int N>
LUMINAL_VNNI inline __m256i unsigned_dots_vnni(const __m256i* w, const std::int8_t* q) {
    __m256i sums[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int j = 0; j < N; ++j) {
        std::int32_t four;
        std::memcpy(&four, q + 4 * j, 4);
        sums[j & 1] = _mm256_dpbusd_epi32(sums[j & 1], w[j], _mm256_set1_epi32(four));
    }
    return _mm256_add_epi32(sums[0], sums[1]);
}

}  // namespace simd_detail
#endif

}  // namespace luminal::cpu::quant
