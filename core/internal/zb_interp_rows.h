// The interp predictor's passes on the CPU, one row at a time (core/src/interp_cpu.cpp runs the passes; this header
// holds what its row loops share with their AVX2 versions in core/src/interp_rows_avx2.cpp and AVX-512 ones in
// core/src/interp_rows_avx512.cpp): the points of a pass,
// the walk over a row's spans of one spline case, and the encoder's and decoder's work per row.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include "zb_interp.h"
#include "zb_simd.h"

namespace zb {

// Linear index of (z, y, x) in the 3D view.
inline int64_t lin(const int64_t d[3], int64_t z, int64_t y, int64_t x) { return (z * d[1] + y) * d[2] + x; }

// The points of one pass: along dims[order[i]] the odd multiples of s, along earlier dims multiples of s, along
// later dims multiples of 2s (with s the level's stride).
struct Pass {
    int dim;
    int64_t start[3], step[3], count[3];
};

// One row of a pass: the points at array indices first + ix * dx, numbered k0 + ix within the pass (ix < count).
struct Row {
    int64_t first, dx, k0, count;
};

// finite_prediction (zb_interp.h) written with selects instead of early returns, and "finite" as |v| <= DBL_MAX (a
// double compare; the bit test needs 64-bit integer vector compares, which SSE2 lacks), so that loops using it
// vectorize. Same result.
inline bool finite_double(double v) { return std::fabs(v) <= std::numeric_limits<double>::max(); }
inline double finite_prediction_sel(double p, double left, double right) {
    const double fallback = finite_double(left) ? left : (finite_double(right) ? right : 0.0);
    return finite_double(p) ? p : fallback;
}

// The spline of case K from the neighbours a, b, c, d at -3s, -s, +s, +3s (those K does not use are ignored).
template <SplineCase K, bool Natural> ZB_ALWAYS_INLINE double spline_of(double a, double b, double c, double d) {
    if constexpr (K == SplineCase::kCubic) return spline_cubic(Natural, a, b, c, d);
    else if constexpr (K == SplineCase::kQuadLeft) return spline_quad_left(a, b, c);
    else if constexpr (K == SplineCase::kQuadRight) return spline_quad_right(b, c, d);
    else if constexpr (K == SplineCase::kLinear) return spline_linear(b, c);
    else return b;
}

// The prediction of point ix of a span of case K (the scalar form of what every body's span computes). Left-only
// points have no right neighbour: c is not read. Branchless: the fallback for a non-finite spline without branches,
// for loops that are to vectorize; else the early-return form, which is faster one point at a time.
template <SplineCase K, bool Natural, bool Branchless, typename T>
ZB_ALWAYS_INLINE double span_prediction(int64_t i, const T *a, const T *b, const T *c, const T *d) {
    const double vb = b[i], vc = K == SplineCase::kLeftOnly ? vb : (double)c[i];
    const double va = K == SplineCase::kCubic || K == SplineCase::kQuadLeft ? (double)a[i] : 0.0;
    const double vd = K == SplineCase::kCubic || K == SplineCase::kQuadRight ? (double)d[i] : 0.0;
    const double p = spline_of<K, Natural>(va, vb, vc, vd);
    return Branchless ? finite_prediction_sel(p, vb, vc) : finite_prediction(p, vb, vc);
}

// The spline of case K (not kLeftOnly) on a vector of doubles (a GCC vector type: the AVX2 and AVX-512 rows) into p,
// each operation the scalar spline's (zb_interp.h), in its order. ld(v, out) loads the neighbours at v: a and d only
// for the cases that use them (they may lie outside the array). Vectors by reference: a vector passed or returned by
// value in a function without the vector target changes the ABI (GCC warns), though this one is always inlined.
template <SplineCase K, bool Natural, typename V, typename Load, typename T>
ZB_ALWAYS_INLINE void spline_vector(const V &vb, const V &vc, Load ld, const T *a, const T *d, V &p) {
    V va, vd;
    if constexpr (K == SplineCase::kCubic) {
        ld(a, va);
        ld(d, vd);
        const V inner = vb + vc, outer = va + vd;
        if (Natural) p = (23.0 * inner - 3.0 * outer) * 0.025;   // (-3a + 23b + 23c - 3d) / 40
        else p = (9.0 * inner - outer) * 0.0625;                   // (-a + 9b + 9c - d) / 16
    } else if constexpr (K == SplineCase::kQuadLeft) {
        ld(a, va);
        p = (6.0 * vb + 3.0 * vc - va) * 0.125;   // (-a + 6b + 3c) / 8
    } else if constexpr (K == SplineCase::kQuadRight) {
        ld(d, vd);
        p = (3.0 * vb + 6.0 * vc - vd) * 0.125;   // (3b + 6c - d) / 8
    } else {
        p = (vb + vc) * 0.5;   // linear
    }
}

// Walks the points of one row of pass p in order, from the values rec at stride s (the arithmetic of
// interp_predict), handing them to body in spans of one spline case:
//   body.template span<K, Natural>(ix0, ix1, dx, a, b, c, d): the points ix in [ix0, ix1), each predicted by spline K
//     from its neighbours a[ix * dx], b[ix * dx], c[ix * dx], d[ix * dx] along the pass dim (the pointers K does not
//     use may lie outside the array: they must not be read);
//   body.point(ix, prediction): one point predicted here (near the ends of a row along x).
// A row of a pass along z or y has one spline case for all its points (their coordinate along the pass dim is the
// row's), so it is one span; along x the cubic interior is one span and the few points near the ends, each with its
// own case, go one by one. Always inlined, so that a caller compiled for AVX2 compiles it for AVX2 too.
template <bool Natural, typename T, typename Body>
ZB_ALWAYS_INLINE void walk_row(const Pass &p, const int64_t d[3], int64_t s, const T *rec, int64_t z, int64_t y,
                               const Row &row, Body &body) {
    const int64_t stride = p.dim == 0 ? d[1] * d[2] : (p.dim == 1 ? d[2] : 1);
    const int64_t o1 = s * stride, o3 = 3 * s * stride;   // neighbours at idx -+ o1, -+ o3
    const int64_t n = row.count, dx = row.dx;
    const T *v = rec + row.first;   // v[ix * dx]: the point ix's value
    // The four neighbour streams, each read with its own pointer (one load per point from each, which the
    // vectorizer handles; four loads at offsets from one pointer it does not).
    const T *va = v - o3, *vb = v - o1, *vc = v + o1, *vd = v + o3;
    auto span = [&](SplineCase k, int64_t ix0, int64_t ix1) {
        switch (k) {
            case SplineCase::kLeftOnly:
                body.template span<SplineCase::kLeftOnly, Natural>(ix0, ix1, dx, va, vb, vc, vd);
                break;
            case SplineCase::kCubic:
                body.template span<SplineCase::kCubic, Natural>(ix0, ix1, dx, va, vb, vc, vd);
                break;
            case SplineCase::kQuadLeft:
                body.template span<SplineCase::kQuadLeft, Natural>(ix0, ix1, dx, va, vb, vc, vd);
                break;
            case SplineCase::kQuadRight:
                body.template span<SplineCase::kQuadRight, Natural>(ix0, ix1, dx, va, vb, vc, vd);
                break;
            default: body.template span<SplineCase::kLinear, Natural>(ix0, ix1, dx, va, vb, vc, vd);
        }
    };
    if (p.dim != 2) {
        span(spline_case(p.dim == 0 ? z : y, s, d[p.dim]), 0, n);
        return;
    }
    const int64_t x0 = p.start[2];
    auto edge_point = [&](int64_t ix) {
        const int64_t i = ix * dx;
        double pred;
        switch (spline_case(x0 + i, s, d[2])) {
            case SplineCase::kLeftOnly:
                pred = span_prediction<SplineCase::kLeftOnly, Natural, false>(i, va, vb, vc, vd);
                break;
            case SplineCase::kCubic:
                pred = span_prediction<SplineCase::kCubic, Natural, false>(i, va, vb, vc, vd);
                break;
            case SplineCase::kQuadLeft:
                pred = span_prediction<SplineCase::kQuadLeft, Natural, false>(i, va, vb, vc, vd);
                break;
            case SplineCase::kQuadRight:
                pred = span_prediction<SplineCase::kQuadRight, Natural, false>(i, va, vb, vc, vd);
                break;
            default: pred = span_prediction<SplineCase::kLinear, Natural, false>(i, va, vb, vc, vd);
        }
        body.point(ix, pred);
    };
    const int64_t lo = std::min(n, x0 >= 3 * s ? (int64_t)0 : (3 * s - x0 + dx - 1) / dx);
    const int64_t hi = std::max(lo, std::min(n, d[2] - 3 * s > x0 ? (d[2] - 3 * s - x0 + dx - 1) / dx : 0));
    for (int64_t ix = 0; ix < lo; ++ix) edge_point(ix);
    span(SplineCase::kCubic, lo, hi);
    for (int64_t ix = hi; ix < n; ++ix) edge_point(ix);
}

// What the encoder's and decoder's passes share: the pass, the array's dims, the stride and the spline variant.
struct PassGeometry {
    const Pass *p;
    const int64_t *d;
    int64_t s;
    bool natural;
};

// walk_row with the spline variant chosen at run time.
template <typename T, typename Body>
ZB_ALWAYS_INLINE void walk_row(const PassGeometry &g, const T *rec, int64_t z, int64_t y, const Row &row, Body &body) {
    if (g.natural) walk_row<true>(*g.p, g.d, g.s, rec, z, y, row, body);
    else walk_row<false>(*g.p, g.d, g.s, rec, z, y, row, body);
}

// What quantize_residual needs besides the value and its prediction.
struct ResidualParams {
    double twoe, recip;   // bin width of the level (2 * level bound) and its reciprocal
    double eb;            // the global bound every reconstruction must meet
    int32_t radius;       // codes lie in (-radius, radius)
    int has_fill;
    uint64_t fill_bits;
};

// One pass of the encoder: predictions from recon (the reconstructed values of earlier passes), then for each point
// quantize_residual against x: its code, exception byte (exc, 1 = exception) and reconstruction (recon). The last
// pass stores no reconstructions (store_recon false): no later pass reads them, and on 16 threads, where the last
// level is bound by memory traffic, their stores were a fifth of it.
template <typename T> struct EncodePass {
    PassGeometry g;
    const T *x;
    T *recon;
    uint8_t *exc;
    ResidualParams rp;
    bool store_recon = true;
};

// One pass of the decoder: predictions from out, then the values of the regular points (mask[i] = 1 marks the
// exceptions, whose values decode_exceptions already wrote; no mask when the stream has no exceptions).
template <typename T> struct DecodePass {
    PassGeometry g;
    T *out;
    const uint8_t *mask;
    double twoe;
};

// The scalar work of one point, for the vector rows' points near a row's ends: the encoder's quantize_residual of
// x[idx] against pred (exception byte and reconstruction stored, the code returned), the decoder's value of a point
// that is not an exception.
template <typename T> ZB_ALWAYS_INLINE int32_t encode_point(const EncodePass<T> &ep, int64_t idx, double pred) {
    const ResidualParams &rp = ep.rp;
    int32_t q;
    T r;
    const bool regular =
        quantize_residual<T>(ep.x[idx], pred, rp.twoe, rp.recip, rp.eb, rp.radius, rp.has_fill, rp.fill_bits, q, r);
    ep.exc[idx] = regular ? 0 : 1;
    if (ep.store_recon) ep.recon[idx] = r;
    return q;
}
template <typename T>
ZB_ALWAYS_INLINE void decode_point(const DecodePass<T> &dp, int64_t idx, double pred, int32_t code) {
    if (!dp.mask || !dp.mask[idx]) dp.out[idx] = dequantize_residual<T>(pred, code, dp.twoe);
}

// What the vector rows' bodies share: where the row's points and codes are (codes of point ix at
// codes_[ix * code_step_]) and the scratch for a row's predictions. Each level adds the span that walk_row calls.
template <typename Code> class RowPoints {
public:
    RowPoints(const Pass &p, const Row &row, Code *codes, int64_t code_step, double *pred)
        : codes_(codes), code_step_(code_step), first_(row.first), dx_(row.dx), pred_(pred), along_x_(p.dim == 2) {}
    bool along_x() const { return along_x_; }

protected:
    Code *codes_;
    int64_t code_step_, first_, dx_;
    double *pred_;   // row.count doubles
    bool along_x_;
};

// One row of a pass (its points' codes at codes[ix * code_step]); `scratch` holds row.count doubles.
#if ZB_SIMD_X86
template <typename T>
void encode_row_avx2(const EncodePass<T> &ep, int64_t z, int64_t y, const Row &row, int32_t *codes, int64_t code_step,
                     double *scratch);
template <typename T>
void decode_row_avx2(const DecodePass<T> &dp, int64_t z, int64_t y, const Row &row, const int32_t *codes,
                     int64_t code_step, double *scratch);
template <typename T>
void encode_row_avx512(const EncodePass<T> &ep, int64_t z, int64_t y, const Row &row, int32_t *codes,
                       int64_t code_step, double *scratch);
template <typename T>
void decode_row_avx512(const DecodePass<T> &dp, int64_t z, int64_t y, const Row &row, const int32_t *codes,
                       int64_t code_step, double *scratch);
#endif

}  // namespace zb
