#pragma once
// The instruction sets the quantized kernels are written for, chosen at run
// time (the headers are compiled with the user's flags, which need not enable
// AVX2): each kernel is a function compiled for its own target
// (__attribute__((target)), LUMINAL_AVX2 / LUMINAL_VNNI) and called only
// where the CPU reports the features (__builtin_cpu_supports); and the vector
// primitives the kernels of every format share.
#include <cstdint>
#include <cstring>

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

inline Isa best_isa() {
    if (supports(Isa::Avx512Vnni)) return Isa::Avx512Vnni;
    if (supports(Isa::Avx2)) return Isa::Avx2;
    return Isa::Scalar;
}

#ifdef LUMINAL_QUANT_X86
#define LUMINAL_AVX2 __attribute__((target("avx2,fma,f16c")))
#define LUMINAL_VNNI __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))

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

}  // namespace simd_detail
#endif

}  // namespace luminal::cpu::quant
