// predictor=auto / encoder=auto: compress a sample of the array with each candidate and keep the smallest.
#include <algorithm>
#include <cmath>
#include <new>
#include <vector>
#include "zb_cpu.h"

namespace zb {
namespace {

// A centred sub-box of about `target` values (at least one full row along x, so 1D samples are contiguous).
Shape sample_box(const Shape &s, uint64_t target, uint64_t start[3]) {
    Shape b = s;
    const double side = std::pow((double)target, 1.0 / s.rank);
    b.n = 1;
    for (int k = 0; k < s.rank; ++k) {
        uint64_t len = (uint64_t)std::max(1.0, std::floor(side));
        if (k == s.rank - 1) len = std::max<uint64_t>(len, std::min<uint64_t>(s.dims[k], 64));
        len = std::min(len, s.dims[k]);
        b.dims[k] = len;
        start[k] = (s.dims[k] - len) / 2;
        b.n *= len;
    }
    for (int k = s.rank; k < 3; ++k) start[k] = 0;
    return b;
}

template <typename T> std::vector<T> gather(const T *x, const Shape &s, const Shape &b, const uint64_t start[3]) {
    std::vector<T> out((size_t)b.n);
    const uint64_t bz = b.rank >= 3 ? b.dims[0] : 1, by = b.rank >= 2 ? b.dims[b.rank - 2] : 1, bx = b.dims[b.rank - 1];
    const uint64_t sz = start[0], sy = b.rank >= 2 ? start[b.rank - 2] : 0, sx = start[b.rank - 1];
    const uint64_t ny = s.ny(), nx = s.nx();
    size_t o = 0;
    for (uint64_t z = 0; z < bz; ++z)
        for (uint64_t y = 0; y < by; ++y)
            for (uint64_t xx = 0; xx < bx; ++xx)
                out[o++] = x[((z + (b.rank >= 3 ? sz : 0)) * ny + y + sy) * nx + xx + sx];
    return out;
}

template <typename T>
void choose(const zb_params &p, const T *x, const Shape &s, bool v1_only, int nt, uint8_t &pred, uint8_t &enc) {
    resolve_pipeline(p, pred, enc);  // explicit choices and the defaults
    std::vector<uint8_t> preds, encs;
    if (p.predictor == ZB_PRED_AUTO && !v1_only) preds = {kPredLorenzo, kPredInterp};
    else preds = {pred};
    if (p.encoder == ZB_ENC_AUTO && !v1_only) encs = {kEncFast, kEncRatio};
    else encs = {enc};
    if (preds.size() * encs.size() == 1) return;

    // The sample is compressed at the whole array's absolute bound, on one thread.
    const zb_dtype dtype = sizeof(T) == 8 ? ZB_F64 : ZB_F32;
    double vmin = 0, vmax = 0;
    const bool has_range = value_range(dtype, x, s.n, p.has_fill, p.fill_bits, nt, vmin, vmax);
    zb_params sp = p;
    sp.mode = ZB_MODE_ABS;
    sp.bound = derive_abs_bound(p.mode, p.bound, has_range, vmin, vmax);
    const uint64_t target = std::min<uint64_t>(s.n, std::max<uint64_t>(8192, std::min<uint64_t>(s.n / 32, 1u << 20)));
    uint64_t start[3];
    const Shape b = sample_box(s, target, start);
    const std::vector<T> sample = gather(x, s, b, start);
    std::vector<uint8_t> buf(raw_stream_bytes(dtype, b.n));
    size_t best = SIZE_MAX;
    std::string msg;
    for (uint8_t pc : preds)
        for (uint8_t ec : encs) {
            size_t len = 0;
            const zb_status st =
                is_v1_pipeline(pc, ec)
                    ? cpu_compress(sp, dtype, sample.data(), b, buf.data(), buf.size(), &len, 1, msg)
                    : cpu_compress_v2(sp, pc, ec, dtype, sample.data(), b, buf.data(), buf.size(), &len, 1, msg);
            // Out of memory must fail the call: skipping the candidate would make the bytes depend on the
            // memory state (invariant 4). Other failures of a sample only rule the candidate out.
            if (st == ZB_ERR_NOMEM) throw std::bad_alloc();
            if (st == ZB_OK && len < best) {  // strictly smaller: ties keep the earlier, faster candidate
                best = len;
                pred = pc;
                enc = ec;
            }
        }
}

}  // namespace

void choose_pipeline(const zb_params &p, zb_dtype dtype, const void *src, const Shape &s, bool v1_only, int nt,
                     uint8_t &pred, uint8_t &enc) {
    if (dtype == ZB_F64) choose(p, static_cast<const double *>(src), s, v1_only, nt, pred, enc);
    else choose(p, static_cast<const float *>(src), s, v1_only, nt, pred, enc);
}

}  // namespace zb
