// Error-bound modes: the value range over finite non-fill values and the absolute bound derived from it.
#include <cmath>
#include <limits>
#include "zb_cpu.h"
#include "zb_gpu_ops.h"
#include "zb_quant.h"

namespace zb {

double derive_abs_bound(zb_mode mode, double bound, bool has_range, double vmin, double vmax) {
    if (mode == ZB_MODE_ABS) return bound;
    // REL: relative to the finite range. No finite values, or a constant field: lossless (eb = 0), which costs
    // almost nothing since every value is then an exception of one run.
    if (!has_range) return 0.0;
    // min/max of +0 and -0 depend on evaluation order (thread count, backend), so a zero range may come out as
    // -0: every non-positive or non-finite result is the canonical +0, so the header bytes never depend on it.
    const double eb = bound * (vmax - vmin);
    return (eb > 0 && std::isfinite(eb)) ? eb : 0.0;
}

void resolve_pipeline(const zb_params &p, uint8_t &predictor, uint8_t &encoder) {
    predictor = p.predictor == ZB_PRED_INTERP ? kPredInterp : kPredLorenzo;
    encoder = p.encoder == ZB_ENC_RATIO ? kEncRatio : kEncFast;
}

namespace {
template <typename T>
bool range_of(const T *x, uint64_t n, int has_fill, uint64_t fill_bits, int threads, double &vmin, double &vmax) {
    using U = typename FloatBits<T>::U;
    const U fill = (U)fill_bits;
    T lo = std::numeric_limits<T>::infinity(), hi = -std::numeric_limits<T>::infinity();
#pragma omp parallel for num_threads(threads) reduction(min : lo) reduction(max : hi) schedule(static)
    for (int64_t i = 0; i < (int64_t)n; ++i) {
        const T v = x[i];
        if (!std::isfinite(v) || (has_fill && bits_of(v) == fill)) continue;
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
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

}  // namespace zb
