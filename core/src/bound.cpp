// Error-bound modes: the value range over finite non-fill values and the absolute bound derived from it.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include "zb_cpu.h"
#include "zb_gpu_ops.h"
#include "zb_quant.h"
#include "zb_simd.h"

namespace zb {

double derive_abs_bound(zb_mode mode, double bound, bool has_range, double vmin, double vmax) {
    if (mode == ZB_MODE_ABS) return bound;
    // REL: relative to the finite range. No finite values, or a constant field: lossless (eb = 0), which costs
    // almost nothing since every value is then an exception of one run.
    if (!has_range) return 0.0;
    // min/max of +0 and -0 depend on evaluation order (thread count, backend), so a zero range may come out as
    // -0: every non-positive or non-finite result is the canonical +0, so the header bytes never depend on it.
    return rel_abs_bound(bound, vmin, vmax);
}

void resolve_pipeline(const zb_params &p, uint8_t &predictor, uint8_t &encoder) {
    predictor = p.predictor == ZB_PRED_INTERP ? kPredInterp : kPredLorenzo;
    encoder = p.encoder == ZB_ENC_RATIO ? kEncRatio : kEncFast;
}

namespace {
// Min and max of the finite non-fill values of x[begin, end), into lo / hi (which hold +inf / -inf when there are
// none). Kept in kLanes independent accumulators, with the "usable" test as a mask instead of a branch (finite:
// |v| <= max, a floating-point compare; the fill test compares bits, only when there is a fill value), so that the
// compiler vectorizes the inner loop.
template <typename T, bool UseFill>
ZB_ALWAYS_INLINE void range_part(const T *x, uint64_t begin, uint64_t end, uint64_t fill_bits, T *lo, T *hi,
                                 std::integral_constant<bool, UseFill>) {
    using U = typename FloatBits<T>::U;
    constexpr int kLanes = 16;
    const U fill = (U)fill_bits;
    T l[kLanes], h[kLanes];
    for (int k = 0; k < kLanes; ++k) {
        l[k] = std::numeric_limits<T>::infinity();
        h[k] = -std::numeric_limits<T>::infinity();
    }
    auto step = [&](int k, T v) {
        bool usable = std::fabs(v) <= std::numeric_limits<T>::max();
        if constexpr (UseFill) usable = usable & (bits_of(v) != fill);
        l[k] = (usable & (v < l[k])) ? v : l[k];
        h[k] = (usable & (v > h[k])) ? v : h[k];
    };
    uint64_t i = begin;
    for (; i + kLanes <= end; i += kLanes)
        for (int k = 0; k < kLanes; ++k) step(k, x[i + k]);
    for (int k = 0; i < end; ++i, ++k) step(k, x[i]);
    for (int k = 0; k < kLanes; ++k) {
        *lo = l[k] < *lo ? l[k] : *lo;
        *hi = h[k] > *hi ? h[k] : *hi;
    }
}
ZB_SIMD_CLONES(range_part)

template <typename T>
bool range_of(const T *x, uint64_t n, int has_fill, uint64_t fill_bits, int threads, double &vmin, double &vmax) {
    T lo = std::numeric_limits<T>::infinity(), hi = -std::numeric_limits<T>::infinity();
    const int parts = n < (1u << 16) ? 1 : (int)std::min<uint64_t>(kPartsPerThread * (uint64_t)threads, n >> 14);
    using WithFill = std::integral_constant<bool, true>;
    using NoFill = std::integral_constant<bool, false>;
    using Part = void (*)(const T *, uint64_t, uint64_t, uint64_t, T *, T *, WithFill);
    using PartNoFill = void (*)(const T *, uint64_t, uint64_t, uint64_t, T *, T *, NoFill);
    const Part with_fill = simd_pick<Part>(range_part_base, range_part_avx2, range_part_avx512);
    const PartNoFill no_fill = simd_pick<PartNoFill>(range_part_base, range_part_avx2, range_part_avx512);
    const Partition part{n, parts};
#pragma omp parallel for num_threads(team_threads(threads, (uint64_t)parts)) reduction(min : lo) \
    reduction(max : hi) schedule(dynamic, 1)
    for (int r = 0; r < parts; ++r)
    {
        if (has_fill) with_fill(x, part.begin(r), part.begin(r + 1), fill_bits, &lo, &hi, WithFill{});
        else no_fill(x, part.begin(r), part.begin(r + 1), fill_bits, &lo, &hi, NoFill{});
    }
    if (!(lo <= hi)) return false;
    vmin = (double)lo;
    vmax = (double)hi;
    return true;
}
}  // namespace

bool value_range(zb_dtype dtype, const void *src, uint64_t n, int has_fill, uint64_t fill_bits, int threads,
                 double &vmin, double &vmax) {
    if (dtype == ZB_F64) return range_of(static_cast<const double *>(src), n, has_fill, fill_bits, threads, vmin, vmax);
    return range_of(static_cast<const float *>(src), n, has_fill, fill_bits, threads, vmin, vmax);
}

bool value_range_once(const ValueRange *known, zb_dtype dtype, const void *src, uint64_t n, int has_fill,
                      uint64_t fill_bits, int threads, double &vmin, double &vmax) {
    if (!known || !known->computed) return value_range(dtype, src, n, has_fill, fill_bits, threads, vmin, vmax);
    vmin = known->vmin;
    vmax = known->vmax;
    return known->has;
}

}  // namespace zb
