// Run-time choice of the instruction set of the CPU loops that gain from wider vectors (quantization, the value
// range): each such loop is compiled three times from one inline body, for the baseline (SSE2 on x86-64), for
// AVX2 and for AVX-512, and the best level the CPU has is used. The bytes never depend on the level: the loops use
// IEEE operations only (no contraction into FMA: -ffp-contract=off) and integer arithmetic, which give the same
// results at every vector width (core_simd_test checks every level the machine has).
#pragma once

namespace zb {

enum SimdLevel : int { kSimdBase = 0, kSimdAvx2 = 1, kSimdAvx512 = 2 };

// The level in use: the best this CPU has, lowered by ZBOUND_SIMD=base|avx2|avx512 (read once per process).
SimdLevel simd_level();
// The best level this CPU has (and this build can target).
SimdLevel simd_level_supported();
const char *simd_level_name(SimdLevel level);
// Tests and benchmarks: use `level` (lowered to what the CPU has) from now on, in every thread.
void set_simd_level(SimdLevel level);
// Whether AVX-512 gathers and scatters beat vectors assembled one lane at a time on this CPU: true on Intel, false on
// AMD, whose Zen 4 runs them as microcode (interp encoder's strided rows on an EPYC VM: 25 ms with them, 16.5 with
// the AVX2 rows' scalar loads; on the Xeon of the device machine the gathers were the faster, bench/NOTES.md 94).
bool simd_fast_gathers();

#if defined(__x86_64__) && defined(__GNUC__)
#define ZB_SIMD_X86 1
#define ZB_TARGET_AVX2 __attribute__((target("avx2,bmi,bmi2,popcnt")))
#define ZB_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,bmi,bmi2,popcnt")))
#else
#define ZB_SIMD_X86 0
#define ZB_TARGET_AVX2
#define ZB_TARGET_AVX512
#endif
#define ZB_ALWAYS_INLINE __attribute__((always_inline)) inline

// Defines kernel_base, kernel_avx2 and kernel_avx512: the function template `kernel` (declared ZB_ALWAYS_INLINE, its
// template arguments deduced from the call) compiled for each level.
#define ZB_SIMD_CLONES(kernel)                                                                      \
    template <typename... A> auto kernel##_base(A... a) { return kernel(a...); }                   \
    template <typename... A> ZB_TARGET_AVX2 auto kernel##_avx2(A... a) { return kernel(a...); }     \
    template <typename... A> ZB_TARGET_AVX512 auto kernel##_avx512(A... a) { return kernel(a...); }

// The clone of `kernel` for the level in use, as a pointer of type F.
#define ZB_SIMD_PICK(F, kernel) ::zb::simd_pick<F>(kernel##_base, kernel##_avx2, kernel##_avx512)

// The clone of the level in use.
template <typename F> F simd_pick(F base, F avx2, F avx512) {
    switch (simd_level()) {
        case kSimdAvx512: return avx512;
        case kSimdAvx2: return avx2;
        default: return base;
    }
}

}  // namespace zb
