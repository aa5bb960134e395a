// The interp encoder's and decoder's rows (zb_interp_rows.h) four points at a time with AVX2 intrinsics: the spline
// prediction, the fallback for a non-finite one, and then quantize_residual (encoder) or dequantize_residual into
// the points that are not exceptions (decoder). GCC vectorizes neither loop for AVX2 by itself (it turns their
// selects into branches, and the decoder's store is masked and strided). Each step is the scalar code's IEEE double
// operation on a vector, in the same order, so codes, exception bytes and values are bit for bit the scalar ones;
// core_simd_test compares them on every kind of value (NaN, infinities, signed zeros, the fill value, residuals
// beyond the radius or the bound) and every spline case.
#include "zb_interp_rows.h"
#include <cstring>
#include "zb_bytes.h"
#if ZB_SIMD_X86
#include <immintrin.h>
#endif

namespace zb {

#if ZB_SIMD_X86
namespace {

// The vector of four raw values of type T.
template <typename T> struct Raw4;
template <> struct Raw4<float> { using type = __m128; };
template <> struct Raw4<double> { using type = __m256d; };

// Four values v[0], v[dx], v[2 dx], v[3 dx] of type T: `raw` in the type's own vector, returned as doubles.
// Contiguous values load as one vector. With dx == 2 (most passes of the last level), when `wide` says that v[7]
// exists and has not just been stored to, as one vector of twice the width whose even lanes are taken: a load that
// overlaps a recent narrower store waits for that store instead of being forwarded, which made wide loads of a
// row's own neighbours slower than one by one when each point was stored right after its prediction (passes along
// x: see span_avx2). Other strides one by one.
ZB_TARGET_AVX2 ZB_ALWAYS_INLINE __m256d load4(const float *v, int64_t dx, bool wide, __m128 &raw) {
    if (dx == 1)
        raw = _mm_loadu_ps(v);
    else if (dx == 2 && wide)
        raw = _mm256_castps256_ps128(
            _mm256_permutevar8x32_ps(_mm256_loadu_ps(v), _mm256_setr_epi32(0, 2, 4, 6, 0, 0, 0, 0)));
    else
        raw = _mm_setr_ps(v[0], v[dx], v[2 * dx], v[3 * dx]);
    return _mm256_cvtps_pd(raw);
}
ZB_TARGET_AVX2 ZB_ALWAYS_INLINE __m256d load4(const double *v, int64_t dx, bool wide, __m256d &raw) {
    if (dx == 1)
        raw = _mm256_loadu_pd(v);
    else if (dx == 2 && wide)   // (v0 v4 v2 v6) -> (v0 v2 v4 v6)
        raw = _mm256_permute4x64_pd(_mm256_unpacklo_pd(_mm256_loadu_pd(v), _mm256_loadu_pd(v + 4)), 0xd8);
    else
        raw = _mm256_setr_pd(v[0], v[dx], v[2 * dx], v[3 * dx]);
    return raw;
}
template <typename T> ZB_TARGET_AVX2 ZB_ALWAYS_INLINE __m256d load4(const T *v, int64_t dx, bool wide) {
    typename Raw4<T>::type raw;
    return load4(v, dx, wide, raw);
}

// The lanes of four raw values whose bits are `fill` (a 4-bit mask).
ZB_TARGET_AVX2 ZB_ALWAYS_INLINE int fill_lanes(__m128 raw, uint64_t fill) {
    return _mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(_mm_castps_si128(raw), _mm_set1_epi32((int)fill))));
}
ZB_TARGET_AVX2 ZB_ALWAYS_INLINE int fill_lanes(__m256d raw, uint64_t fill) {
    return _mm256_movemask_pd(
        _mm256_castsi256_pd(_mm256_cmpeq_epi64(_mm256_castpd_si256(raw), _mm256_set1_epi64x((long long)fill))));
}

// The lanes of a 4-bit mask as 32-bit and 64-bit lane masks.
ZB_TARGET_AVX2 ZB_ALWAYS_INLINE __m128i lanes32(int bits) {
    const __m128i bit = _mm_setr_epi32(1, 2, 4, 8);
    return _mm_cmpeq_epi32(_mm_and_si128(_mm_set1_epi32(bits), bit), bit);
}

// Stores the lanes whose bit is set in `keep` (4 bits) to v[0], v[dx], v[2 dx], v[3 dx]. Contiguous, and with dx == 2
// when `wide` says that v[7] exists: the values v[0 .. 3] or v[0 .. 7] loaded, the kept lanes blended in and the
// vector stored, which writes the others (values in between, points not kept) back unchanged. A masked store
// (VMASKMOVPS) instead cost the AMD EPYC of the 2-core VM about as much as the rest of the decoder's row: one-thread
// decoding of the last level 66-67 -> 46-48 ms for 64 MB (TREFHT, interp/ratio). The values written back belong to
// the same row, which one thread owns while the pass runs (zb_interp_levels.h); a thread that reads them meanwhile
// (a neighbour plane's pass along the plane dim) reads the same bytes either way. Else one by one.
ZB_TARGET_AVX2 ZB_ALWAYS_INLINE void store4_masked(float *v, int64_t dx, bool wide, __m128 lanes, int keep) {
    if (dx == 1) {
        _mm_storeu_ps(v, keep == 0xf ? lanes : _mm_blendv_ps(_mm_loadu_ps(v), lanes, _mm_castsi128_ps(lanes32(keep))));
        return;
    }
    if (dx == 2 && wide) {
        const __m256 spread = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(lanes),
                                                       _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3));
        const __m256i bit = _mm256_setr_epi32(1, 0, 2, 0, 4, 0, 8, 0);
        const __m256i want = _mm256_setr_epi32(1, -1, 2, -1, 4, -1, 8, -1);
        const __m256i take = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(keep), bit), want);
        _mm256_storeu_ps(v, _mm256_blendv_ps(_mm256_loadu_ps(v), spread, _mm256_castsi256_ps(take)));
        return;
    }
    alignas(16) float lane[4];
    _mm_store_ps(lane, lanes);
    for (int k = 0; k < 4; ++k)
        if ((keep >> k) & 1) v[k * dx] = lane[k];
}
ZB_TARGET_AVX2 ZB_ALWAYS_INLINE void store4_masked(double *v, int64_t dx, bool wide, __m256d lanes, int keep) {
    const __m256i bit = _mm256_setr_epi64x(1, 2, 4, 8);
    if (dx == 1) {
        const __m256i take64 = _mm256_cmpeq_epi64(_mm256_and_si256(_mm256_set1_epi64x(keep), bit), bit);
        const __m256d take = _mm256_castsi256_pd(take64);
        _mm256_storeu_pd(v, keep == 0xf ? lanes : _mm256_blendv_pd(_mm256_loadu_pd(v), lanes, take));
        return;
    }
    if (dx == 2 && wide) {   // (l0 l0 l1 l1) to v[0 .. 3] and (l2 l2 l3 l3) to v[4 .. 7], the even lanes kept
        const __m256i even = _mm256_setr_epi64x(1, 0, 2, 0), want = _mm256_setr_epi64x(1, -1, 2, -1);
        const __m256i lo = _mm256_cmpeq_epi64(_mm256_and_si256(_mm256_set1_epi64x(keep & 3), even), want);
        const __m256i hi = _mm256_cmpeq_epi64(_mm256_and_si256(_mm256_set1_epi64x(keep >> 2), even), want);
        _mm256_storeu_pd(v, _mm256_blendv_pd(_mm256_loadu_pd(v), _mm256_permute4x64_pd(lanes, 0x50),
                                             _mm256_castsi256_pd(lo)));
        _mm256_storeu_pd(v + 4, _mm256_blendv_pd(_mm256_loadu_pd(v + 4), _mm256_permute4x64_pd(lanes, 0xfa),
                                                 _mm256_castsi256_pd(hi)));
        return;
    }
    alignas(32) double lane[4];
    _mm256_store_pd(lane, lanes);
    for (int k = 0; k < 4; ++k)
        if ((keep >> k) & 1) v[k * dx] = lane[k];
}

// (T) of four doubles, in T's vector, and that back as doubles.
ZB_TARGET_AVX2 ZB_ALWAYS_INLINE __m256d round_to(__m256d r, __m128 &rt) {
    rt = _mm256_cvtpd_ps(r);
    return _mm256_cvtps_pd(rt);
}
ZB_TARGET_AVX2 ZB_ALWAYS_INLINE __m256d round_to(__m256d r, __m256d &rt) {
    rt = r;
    return r;
}
ZB_TARGET_AVX2 ZB_ALWAYS_INLINE __m128 blend4(__m128 a, __m128 b, int take_b) {
    return _mm_blendv_ps(a, b, _mm_castsi128_ps(lanes32(take_b)));
}
ZB_TARGET_AVX2 ZB_ALWAYS_INLINE __m256d blend4(__m256d a, __m256d b, int take_b) {
    return _mm256_blendv_pd(a, b, _mm256_castsi256_pd(_mm256_cvtepi32_epi64(lanes32(take_b))));
}

// Lanes of four doubles that are finite (|v| <= DBL_MAX; false for NaN and infinities).
ZB_TARGET_AVX2 ZB_ALWAYS_INLINE __m256d finite4(__m256d v) {
    const __m256d absmask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffffLL));
    return _mm256_cmp_pd(_mm256_and_pd(v, absmask), _mm256_set1_pd(std::numeric_limits<double>::max()),
                         _CMP_LE_OQ);
}

// span_prediction (zb_interp_rows.h) of four points: the spline of case K, else the finite fallback.
template <SplineCase K, bool Natural, typename T>
ZB_TARGET_AVX2 ZB_ALWAYS_INLINE __m256d predict4(int64_t i, int64_t dx, bool wide, const T *a, const T *b, const T *c,
                                                 const T *d) {
    const __m256d vb = load4(b + i, dx, wide);
    if constexpr (K == SplineCase::kLeftOnly) {
        return _mm256_and_pd(vb, finite4(vb));   // finite_prediction_sel(b, b, b): b, or 0 if it is not finite
    } else {
        const __m256d vc = load4(c + i, dx, wide);
        __m256d p;
        auto load = [&](const T *v, __m256d &out) ZB_TARGET_AVX2 { out = load4(v + i, dx, wide); };
        spline_vector<K, Natural>(vb, vc, load, a, d, p);
        // finite_prediction_sel(p, b, c)
        const __m256d fallback = _mm256_blendv_pd(_mm256_and_pd(vc, finite4(vc)), vb, finite4(vb));
        return _mm256_blendv_pd(fallback, p, finite4(p));
    }
}

// The AVX2 loop over a span for a row body (EncodeRow, DecodeRow): body.apply4(ix, predictions, more, wide) takes
// four points at a time (more: the next point exists, so do the values up to 8 lanes on; wide: its stores may be
// single vectors), body.point the last ones. The body is a copy: a local whose members the compiler keeps in
// registers (the vector stores may alias anything, and it would otherwise reload a member after each one). walk_row
// calls the body's span, which calls this (an always-inlined caller without the target attribute could not inline
// AVX2 code).
// Wide loads and stores with dx == 2 (see load4): in a pass along z or y the neighbours lie in rows the pass does
// not write, so both are wide. In a pass along x the neighbours are the row's even points and its points the odd
// ones in between: all predictions first, into `pred` (wide loads, no store pending), then the points (wide stores,
// no load of those values following).
template <SplineCase K, bool Natural, typename Body, typename T>
ZB_TARGET_AVX2 void span_avx2(Body body, double *pred, int64_t ix0, int64_t ix1, int64_t dx, const T *a, const T *b,
                              const T *c, const T *d) {
    int64_t ix = ix0;
    if (body.along_x() && dx == 2) {
        for (int64_t jx = ix0; jx + 4 <= ix1; jx += 4)
            _mm256_storeu_pd(pred + jx, predict4<K, Natural>(jx * dx, dx, jx + 4 < ix1, a, b, c, d));
        for (; ix + 4 <= ix1; ix += 4) body.apply4(ix, _mm256_loadu_pd(pred + ix), ix + 4 < ix1, ix + 4 < ix1);
    } else {
        for (; ix + 4 <= ix1; ix += 4) {
            const bool more = ix + 4 < ix1, wide = more && !body.along_x();
            body.apply4(ix, predict4<K, Natural>(ix * dx, dx, wide, a, b, c, d), more, wide);
        }
    }
    for (; ix < ix1; ++ix) body.point(ix, span_prediction<K, Natural, false>(ix * dx, a, b, c, d));
}

// The row bodies' part that is AVX2's: the span that walk_row calls.
template <typename Body, typename Code> class RowBody : public RowPoints<Code> {
public:
    using RowPoints<Code>::RowPoints;
    template <SplineCase K, bool Natural, typename T>
    void span(int64_t ix0, int64_t ix1, int64_t dx, const T *a, const T *b, const T *c, const T *d) {
        span_avx2<K, Natural>(static_cast<const Body &>(*this), this->pred_, ix0, ix1, dx, a, b, c, d);
    }
};

// The encoder's body for walk_row: quantize_residual of every point, four at a time with AVX2.
template <typename T> class EncodeRow : public RowBody<EncodeRow<T>, int32_t> {
    using Base = RowBody<EncodeRow<T>, int32_t>;
    using Base::codes_, Base::code_step_, Base::first_, Base::dx_;

public:
    EncodeRow(const EncodePass<T> &ep, const Row &row, int32_t *codes, int64_t code_step, double *pred)
        : Base(*ep.g.p, row, codes, code_step, pred), ep_(ep) {}

    void point(int64_t ix, double pred) { codes_[ix * code_step_] = encode_point(ep_, first_ + ix * dx_, pred); }

    // quantize_residual of points ix .. ix + 3 against the predictions p.
    ZB_TARGET_AVX2 ZB_ALWAYS_INLINE void apply4(int64_t ix, __m256d p, bool more, bool wide) {
        const ResidualParams &rp = ep_.rp;
        const __m256d absmask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffffLL));
        const int64_t dx = dx_, i = first_ + ix * dx;
        typename Raw4<T>::type raw, rt;
        const __m256d xd = load4(ep_.x + i, dx, more, raw);   // x is never stored to
        const int is_fill = rp.has_fill ? fill_lanes(raw, rp.fill_bits) : 0;
        // special: not finite, the fill value, or -0.0
        const int zero = _mm256_movemask_pd(_mm256_cmp_pd(xd, _mm256_setzero_pd(), _CMP_EQ_OQ));
        const int special = ~_mm256_movemask_pd(finite4(xd)) | is_fill | (zero & _mm256_movemask_pd(xd));
        const __m256d t = _mm256_mul_pd(_mm256_sub_pd(xd, p), _mm256_set1_pd(rp.recip));
        const __m256d small = _mm256_cmp_pd(_mm256_and_pd(t, absmask), _mm256_set1_pd(kQuantLimit), _CMP_LT_OQ);
        const __m256d magic = _mm256_set1_pd(6755399441055744.0);   // round_half_even's 1.5 * 2^52
        const __m128i qi = _mm256_cvttpd_epi32(_mm256_sub_pd(_mm256_add_pd(_mm256_and_pd(t, small), magic), magic));
        const __m128i in_radius = _mm_and_si128(_mm_cmpgt_epi32(qi, _mm_set1_epi32(-rp.radius)),
                                                _mm_cmpgt_epi32(_mm_set1_epi32(rp.radius), qi));
        const int in_range = _mm256_movemask_pd(small) & _mm_movemask_ps(_mm_castsi128_ps(in_radius));
        const __m256d r =
            round_to(_mm256_add_pd(p, _mm256_mul_pd(_mm256_cvtepi32_pd(qi), _mm256_set1_pd(rp.twoe))), rt);
        const int within = _mm256_movemask_pd(
            _mm256_cmp_pd(_mm256_and_pd(_mm256_sub_pd(xd, r), absmask), _mm256_set1_pd(rp.eb), _CMP_LE_OQ));
        const int sign_differs = _mm256_movemask_pd(_mm256_xor_pd(xd, r));   // +0.0 must not come back as -0.0
        const int allowed = rp.eb > 0 ? 0xf : 0;                              // false for a NaN eb too
        const int regular = ~special & in_range & within & ~(zero & sign_differs) & allowed & 0xf;

        const __m128i q = _mm_and_si128(qi, lanes32(regular));
        if (code_step_ == 1) {
            _mm_storeu_si128(reinterpret_cast<__m128i *>(codes_ + ix), q);
        } else {
            alignas(16) int32_t lane[4];
            _mm_store_si128(reinterpret_cast<__m128i *>(lane), q);
            for (int k = 0; k < 4; ++k) codes_[(ix + k) * code_step_] = lane[k];
        }
        const uint32_t e = bits_to_bytes4((uint32_t)~regular);   // byte k: 1 if point k is an exception
        if (dx == 1)
            std::memcpy(ep_.exc + i, &e, 4);
        else
            for (int k = 0; k < 4; ++k) ep_.exc[i + k * dx] = (uint8_t)(e >> 8 * k);
        if (ep_.store_recon) store4_masked(ep_.recon + i, dx, wide, blend4(raw, rt, regular), 0xf);
    }

private:
    EncodePass<T> ep_;
};

// The decoder's body for walk_row: the values of the points that are not exceptions, four at a time with AVX2.
template <typename T> class DecodeRow : public RowBody<DecodeRow<T>, const int32_t> {
    using Base = RowBody<DecodeRow<T>, const int32_t>;
    using Base::codes_, Base::code_step_, Base::first_, Base::dx_;

public:
    DecodeRow(const DecodePass<T> &dp, const Row &row, const int32_t *codes, int64_t code_step, double *pred)
        : Base(*dp.g.p, row, codes, code_step, pred), dp_(dp) {}

    void point(int64_t ix, double pred) { decode_point(dp_, first_ + ix * dx_, pred, codes_[ix * code_step_]); }

    // dequantize_residual of points ix .. ix + 3 with the predictions p, stored where the point is not an exception.
    ZB_TARGET_AVX2 ZB_ALWAYS_INLINE void apply4(int64_t ix, __m256d p, bool more, bool wide) {
        const int64_t dx = dx_, i = first_ + ix * dx;
        const __m128i q = code_step_ == 1
                              ? _mm_loadu_si128(reinterpret_cast<const __m128i *>(codes_ + ix))
                              : _mm_setr_epi32(codes_[ix * code_step_], codes_[(ix + 1) * code_step_],
                                               codes_[(ix + 2) * code_step_], codes_[(ix + 3) * code_step_]);
        typename Raw4<T>::type v;
        round_to(_mm256_add_pd(p, _mm256_mul_pd(_mm256_cvtepi32_pd(q), _mm256_set1_pd(dp_.twoe))), v);
        // keep: bit k set when point k is not an exception, gathered from the mask bytes (0, or 1 where
        // decode_exceptions marked one) by a multiply that moves bit 0 of byte k to bit 24 + k without carries
        // (no pext: AMD cores before Zen 3 run it in microcode).
        int keep;
        if (!dp_.mask) {   // no exceptions in the stream
            keep = 0xf;
        } else if (dx == 2 && more) {   // the even bytes of eight: byte 2k's bit 0 to bit 56 + k
            uint64_t m8;
            std::memcpy(&m8, dp_.mask + i, 8);
            keep = (int)((((~m8) & 0x0001000100010001ull) * 0x0100020004000800ull) >> 56);
        } else {
            uint32_t m;
            if (dx == 1)
                std::memcpy(&m, dp_.mask + i, 4);
            else
                m = dp_.mask[i] | dp_.mask[i + dx] << 8 | dp_.mask[i + 2 * dx] << 16 |
                    (uint32_t)dp_.mask[i + 3 * dx] << 24;
            keep = (int)((((~m) & 0x01010101u) * 0x01020408u) >> 24);
        }
        store4_masked(dp_.out + i, dx, wide, v, keep);
    }

private:
    DecodePass<T> dp_;
};

}  // namespace

template <typename T>
ZB_TARGET_AVX2 void encode_row_avx2(const EncodePass<T> &ep, int64_t z, int64_t y, const Row &row, int32_t *codes,
                                    int64_t code_step, double *scratch) {
    EncodeRow<T> body(ep, row, codes, code_step, scratch);
    walk_row(ep.g, ep.recon, z, y, row, body);
}
template <typename T>
ZB_TARGET_AVX2 void decode_row_avx2(const DecodePass<T> &dp, int64_t z, int64_t y, const Row &row,
                                    const int32_t *codes, int64_t code_step, double *scratch) {
    DecodeRow<T> body(dp, row, codes, code_step, scratch);
    walk_row(dp.g, dp.out, z, y, row, body);
}
template void encode_row_avx2<float>(const EncodePass<float> &, int64_t, int64_t, const Row &, int32_t *, int64_t,
                                     double *);
template void encode_row_avx2<double>(const EncodePass<double> &, int64_t, int64_t, const Row &, int32_t *, int64_t,
                                      double *);
template void decode_row_avx2<float>(const DecodePass<float> &, int64_t, int64_t, const Row &, const int32_t *,
                                     int64_t, double *);
template void decode_row_avx2<double>(const DecodePass<double> &, int64_t, int64_t, const Row &, const int32_t *,
                                      int64_t, double *);
#endif

}  // namespace zb
