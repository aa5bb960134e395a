// zb_simd.h: which instruction set the CPU loops use.
#include "zb_simd.h"
#include <atomic>
#include <cstdlib>
#include <cstring>

namespace zb {
namespace {

SimdLevel detect() {
#if ZB_SIMD_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("bmi2"))
        return kSimdAvx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi2")) return kSimdAvx2;
#endif
    return kSimdBase;
}

SimdLevel from_environment(SimdLevel best) {
    const char *e = std::getenv("ZBOUND_SIMD");
    if (!e || !*e) return best;
    SimdLevel want = best;
    if (!std::strcmp(e, "base") || !std::strcmp(e, "sse2")) want = kSimdBase;
    else if (!std::strcmp(e, "avx2")) want = kSimdAvx2;
    else if (!std::strcmp(e, "avx512")) want = kSimdAvx512;
    return want < best ? want : best;
}

std::atomic<int> &current() {
    static std::atomic<int> level{(int)from_environment(simd_level_supported())};
    return level;
}

}  // namespace

SimdLevel simd_level_supported() {
    static const SimdLevel best = detect();
    return best;
}

SimdLevel simd_level() { return (SimdLevel)current().load(std::memory_order_relaxed); }

void set_simd_level(SimdLevel level) {
    const SimdLevel best = simd_level_supported();
    current().store((int)(level < best ? level : best), std::memory_order_relaxed);
}

bool simd_fast_gathers() {
#if ZB_SIMD_X86
    static const bool fast = [] {
        __builtin_cpu_init();
        return !__builtin_cpu_is("amd");
    }();
    return fast;
#else
    return false;
#endif
}

const char *simd_level_name(SimdLevel level) {
    switch (level) {
        case kSimdAvx512: return "avx512";
        case kSimdAvx2: return "avx2";
        default: return "base";
    }
}

}  // namespace zb
