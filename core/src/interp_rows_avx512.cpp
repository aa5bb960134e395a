// The interp encoder's and decoder's rows (zb_interp_rows.h) eight points at a time with AVX-512. What AVX-512 adds
// over the AVX2 rows (interp_rows_avx2.cpp): twice the lanes, and masks, so that a span's last points take a partial
// vector (masked loads read nothing past it) instead of the scalar loop, and strided rows take gathers and
// scatters. In a 3D field of a few hundred thousand values the rows are short (tens of points) and those scalar ends
// were a tenth of the decode. Each step is the scalar code's IEEE double operation on a vector, in the same order (no
// FMA: the build has -ffp-contract=off), so the values are bit for bit those of the baseline's rows; core_simd_test
// compares them on every kind of value and every spline case (Simd.InterpRowsIdenticalAtEveryLevel): codes,
// exception bytes and reconstructions of the encoder, values of the decoder.
#include "zb_interp_rows.h"
#include <cstring>
#if ZB_SIMD_X86
// GCC 12's AVX-512 headers start some intrinsics (the conversions, casts and permutes used here) from
// _mm512_undefined_*, which its -Wmaybe-uninitialized reports at every use; the values are defined.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#endif

namespace zb {

#if ZB_SIMD_X86
namespace {

#define ZB_AVX512_INLINE ZB_TARGET_AVX512 ZB_ALWAYS_INLINE

// The vector of eight raw values of type T.
template <typename T> struct Raw8;
template <> struct Raw8<float> { using type = __m256; };
template <> struct Raw8<double> { using type = __m512d; };

// Lane k: k * step (offsets of a gather or scatter, in elements).
ZB_AVX512_INLINE __m256i lane_offsets(int64_t step) {
    return _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32((int)step));
}

// Bit k of m moved to bit 2k: the lanes of a vector twice as wide that hold points of a row with dx == 2.
ZB_AVX512_INLINE uint32_t even_bits(uint32_t m) { return _pdep_u32(m, 0x5555u); }

// The lanes of m (8 bits) of v[0], v[dx], .., v[7 dx]: `raw` in T's vector (other lanes 0), returned as doubles.
// Nothing outside the lanes of m is read (masked loads do not fault there).
ZB_AVX512_INLINE __m512d load8(const float *v, int64_t dx, __mmask8 m, __m256 &raw) {
    if (dx == 1) {
        raw = _mm256_maskz_loadu_ps(m, v);
    } else if (dx == 2) {
        const __m512 pairs = _mm512_maskz_loadu_ps((__mmask16)even_bits(m), v);
        raw = _mm512_castps512_ps256(
            _mm512_permutexvar_ps(_mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 0, 0, 0, 0, 0, 0, 0, 0), pairs));
    } else {
        raw = _mm256_mmask_i32gather_ps(_mm256_setzero_ps(), m, lane_offsets(dx), v, 4);
    }
    return _mm512_cvtps_pd(raw);
}
ZB_AVX512_INLINE __m512d load8(const double *v, int64_t dx, __mmask8 m, __m512d &raw) {
    if (dx == 1) {
        raw = _mm512_maskz_loadu_pd(m, v);
    } else if (dx == 2) {
        const __m512d lo = _mm512_maskz_loadu_pd((__mmask8)even_bits(m & 15u), v);
        const __m512d hi = _mm512_maskz_loadu_pd((__mmask8)even_bits(m >> 4), v + 8);
        raw = _mm512_permutex2var_pd(lo, _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14), hi);
    } else {
        raw = _mm512_mask_i32gather_pd(_mm512_setzero_pd(), m, lane_offsets(dx), v, 8);
    }
    return raw;
}
template <typename T> ZB_AVX512_INLINE __m512d load8(const T *v, int64_t dx, __mmask8 m) {
    typename Raw8<T>::type raw;
    return load8(v, dx, m, raw);
}

// Stores the lanes of `keep` to v[0], v[dx], .., v[7 dx], leaving the other values alone.
ZB_AVX512_INLINE void store8(float *v, int64_t dx, __m256 lanes, __mmask8 keep) {
    if (dx == 1) {
        _mm256_mask_storeu_ps(v, keep, lanes);
    } else if (dx == 2) {
        const __m512 spread = _mm512_permutexvar_ps(
            _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7), _mm512_castps256_ps512(lanes));
        _mm512_mask_storeu_ps(v, (__mmask16)even_bits(keep), spread);
    } else {
        _mm256_mask_i32scatter_ps(v, keep, lane_offsets(dx), lanes, 4);
    }
}
ZB_AVX512_INLINE void store8(double *v, int64_t dx, __m512d lanes, __mmask8 keep) {
    if (dx == 1) {
        _mm512_mask_storeu_pd(v, keep, lanes);
    } else if (dx == 2) {
        _mm512_mask_storeu_pd(v, (__mmask8)even_bits(keep & 15u),
                              _mm512_permutexvar_pd(_mm512_setr_epi64(0, 0, 1, 1, 2, 2, 3, 3), lanes));
        _mm512_mask_storeu_pd(v + 8, (__mmask8)even_bits(keep >> 4),
                              _mm512_permutexvar_pd(_mm512_setr_epi64(4, 4, 5, 5, 6, 6, 7, 7), lanes));
    } else {
        _mm512_mask_i32scatter_pd(v, keep, lane_offsets(dx), lanes, 8);
    }
}

// Lanes that are finite (|v| <= DBL_MAX; false for NaN and infinities).
ZB_AVX512_INLINE __mmask8 finite8(__m512d v) {
    return _mm512_cmp_pd_mask(_mm512_abs_pd(v), _mm512_set1_pd(std::numeric_limits<double>::max()), _CMP_LE_OQ);
}

// span_prediction (zb_interp_rows.h) of the points of m: the spline of case K, else the finite fallback.
template <SplineCase K, bool Natural, typename T>
ZB_AVX512_INLINE __m512d predict8(int64_t i, int64_t dx, __mmask8 m, const T *a, const T *b, const T *c,
                                  const T *d) {
    const __m512d vb = load8(b + i, dx, m);
    if constexpr (K == SplineCase::kLeftOnly) {
        return _mm512_maskz_mov_pd(finite8(vb), vb);   // b, or 0 if it is not finite
    } else {
        const __m512d vc = load8(c + i, dx, m);
        __m512d p;
        auto load = [&](const T *v, __m512d &out) ZB_TARGET_AVX512 { out = load8(v + i, dx, m); };
        spline_vector<K, Natural>(vb, vc, load, a, d, p);
        // finite_prediction_sel(p, b, c)
        const __m512d fallback = _mm512_mask_blend_pd(finite8(vb), _mm512_maskz_mov_pd(finite8(vc), vc), vb);
        return _mm512_mask_blend_pd(finite8(p), fallback, p);
    }
}

// The lanes of the points ix .. ix + 7 that exist in a span ending at ix1.
ZB_AVX512_INLINE __mmask8 span_lanes(int64_t ix, int64_t ix1) {
    return (__mmask8)(ix1 - ix >= 8 ? 0xFFu : (1u << (ix1 - ix)) - 1u);
}

// The loop over a span for the row body: body.apply8(ix, predictions, lanes) eight points at a time, the last ones
// a partial vector. In a pass along x the neighbours are the row's points at even multiples of the stride and its
// points the odd ones in between: all predictions first, into `pred`, so that no load of a neighbour follows a store
// to the same cache line (it would wait for the store). Along z or y the neighbours lie in rows the pass does not
// write. The body is a copy: a local whose members the compiler keeps in registers.
template <SplineCase K, bool Natural, typename Body, typename T>
ZB_TARGET_AVX512 void span_avx512(Body body, double *pred, int64_t ix0, int64_t ix1, int64_t dx, const T *a,
                                  const T *b, const T *c, const T *d) {
    if (body.along_x()) {
        for (int64_t ix = ix0; ix < ix1; ix += 8) {
            const __mmask8 m = span_lanes(ix, ix1);
            _mm512_mask_storeu_pd(pred + ix, m, predict8<K, Natural>(ix * dx, dx, m, a, b, c, d));
        }
        for (int64_t ix = ix0; ix < ix1; ix += 8) {
            const __mmask8 m = span_lanes(ix, ix1);
            body.apply8(ix, _mm512_maskz_loadu_pd(m, pred + ix), m);
        }
    } else {
        for (int64_t ix = ix0; ix < ix1; ix += 8) {
            const __mmask8 m = span_lanes(ix, ix1);
            body.apply8(ix, predict8<K, Natural>(ix * dx, dx, m, a, b, c, d), m);
        }
    }
}

// The row bodies' part that is AVX-512's: the span that walk_row calls.
template <typename Body, typename Code> class RowBody8 : public RowPoints<Code> {
public:
    using RowPoints<Code>::RowPoints;
    template <SplineCase K, bool Natural, typename T>
    void span(int64_t ix0, int64_t ix1, int64_t dx, const T *a, const T *b, const T *c, const T *d) {
        span_avx512<K, Natural>(static_cast<const Body &>(*this), this->pred_, ix0, ix1, dx, a, b, c, d);
    }
};

// The lanes of raw values whose bits are `fill`.
ZB_AVX512_INLINE __mmask8 fill_lanes(__m256 raw, uint64_t fill) {
    return _mm256_cmpeq_epi32_mask(_mm256_castps_si256(raw), _mm256_set1_epi32((int)fill));
}
ZB_AVX512_INLINE __mmask8 fill_lanes(__m512d raw, uint64_t fill) {
    return _mm512_cmpeq_epi64_mask(_mm512_castpd_si512(raw), _mm512_set1_epi64((long long)fill));
}

// (T) of eight doubles, in T's vector, and that back as doubles.
ZB_AVX512_INLINE __m512d rounded(__m512d r, __m256 &rt) {
    rt = _mm512_cvtpd_ps(r);
    return _mm512_cvtps_pd(rt);
}
ZB_AVX512_INLINE __m512d rounded(__m512d r, __m512d &rt) { return rt = r; }
ZB_AVX512_INLINE __m256 blend8(__mmask8 take_b, __m256 a, __m256 b) { return _mm256_mask_blend_ps(take_b, a, b); }
ZB_AVX512_INLINE __m512d blend8(__mmask8 take_b, __m512d a, __m512d b) { return _mm512_mask_blend_pd(take_b, a, b); }

// Lanes whose sign bit is set.
ZB_AVX512_INLINE __mmask8 sign_lanes(__m512d v) { return _mm512_movepi64_mask(_mm512_castpd_si512(v)); }

// The encoder's body for walk_row: quantize_residual of every point, eight at a time.
template <typename T> class EncodeRow8 : public RowBody8<EncodeRow8<T>, int32_t> {
    using Base = RowBody8<EncodeRow8<T>, int32_t>;
    using Base::codes_, Base::code_step_, Base::first_, Base::dx_;

public:
    EncodeRow8(const EncodePass<T> &ep, const Row &row, int32_t *codes, int64_t code_step, double *pred)
        : Base(*ep.g.p, row, codes, code_step, pred), ep_(ep) {}

    void point(int64_t ix, double pred) { codes_[ix * code_step_] = encode_point(ep_, first_ + ix * dx_, pred); }

    // quantize_residual of the points of m among ix .. ix + 7 against the predictions p: the steps of EncodeRow's
    // apply4 (interp_rows_avx2.cpp), on eight lanes.
    ZB_AVX512_INLINE void apply8(int64_t ix, __m512d p, __mmask8 m) const {
        const ResidualParams &rp = ep_.rp;
        const int64_t dx = dx_, i = first_ + ix * dx;
        typename Raw8<T>::type raw, rt;
        const __m512d xd = load8(ep_.x + i, dx, m, raw);   // x is never stored to
        const __mmask8 is_fill = rp.has_fill ? fill_lanes(raw, rp.fill_bits) : 0;
        // special: not finite, the fill value, or -0.0
        const __mmask8 zero = _mm512_cmp_pd_mask(xd, _mm512_setzero_pd(), _CMP_EQ_OQ);
        const __mmask8 special = (__mmask8)(~finite8(xd) | is_fill | (zero & sign_lanes(xd)));
        const __m512d t = _mm512_mul_pd(_mm512_sub_pd(xd, p), _mm512_set1_pd(rp.recip));
        const __mmask8 small = _mm512_cmp_pd_mask(_mm512_abs_pd(t), _mm512_set1_pd(kQuantLimit), _CMP_LT_OQ);
        const __m512d magic = _mm512_set1_pd(6755399441055744.0);   // round_half_even's 1.5 * 2^52
        const __m256i qi =
            _mm512_cvttpd_epi32(_mm512_sub_pd(_mm512_add_pd(_mm512_maskz_mov_pd(small, t), magic), magic));
        const __mmask8 in_range = small & _mm256_cmpgt_epi32_mask(qi, _mm256_set1_epi32(-rp.radius)) &
                                  _mm256_cmpgt_epi32_mask(_mm256_set1_epi32(rp.radius), qi);
        const __m512d r =
            rounded(_mm512_add_pd(p, _mm512_mul_pd(_mm512_cvtepi32_pd(qi), _mm512_set1_pd(rp.twoe))), rt);
        const __mmask8 within =
            _mm512_cmp_pd_mask(_mm512_abs_pd(_mm512_sub_pd(xd, r)), _mm512_set1_pd(rp.eb), _CMP_LE_OQ);
        const __mmask8 sign_differs = sign_lanes(_mm512_xor_pd(xd, r));   // +0.0 must not come back as -0.0
        const __mmask8 allowed = rp.eb > 0 ? 0xFF : 0;                     // false for a NaN eb too
        const __mmask8 regular = (__mmask8)(~special & in_range & within & ~(zero & sign_differs) & allowed & m);

        const __m256i q = _mm256_maskz_mov_epi32(regular, qi);
        if (code_step_ == 1)
            _mm256_mask_storeu_epi32(codes_ + ix, m, q);
        else
            _mm256_mask_i32scatter_epi32(codes_ + ix * code_step_, m, lane_offsets(code_step_), q, 4);
        // exception bytes: 1 where a point of m is not regular
        const __mmask8 exceptions = (__mmask8)(m & ~regular);
        const __m128i one = _mm_set1_epi8(1);
        if (dx == 1) {
            _mm_mask_storeu_epi8(ep_.exc + i, m, _mm_maskz_mov_epi8(exceptions, one));
        } else if (dx == 2) {
            _mm_mask_storeu_epi8(ep_.exc + i, (__mmask16)even_bits(m),
                                 _mm_maskz_mov_epi8((__mmask16)even_bits(exceptions), one));
        } else {
            for (int k = 0; k < 8; ++k)
                if ((m >> k) & 1) ep_.exc[i + k * dx] = (uint8_t)((exceptions >> k) & 1);
        }
        if (ep_.store_recon) store8(ep_.recon + i, dx, blend8(regular, raw, rt), m);
    }

private:
    EncodePass<T> ep_;
};

// The decoder's body for walk_row: the values of the points that are not exceptions (mask byte 0), eight at a time.
template <typename T> class DecodeRow8 : public RowBody8<DecodeRow8<T>, const int32_t> {
    using Base = RowBody8<DecodeRow8<T>, const int32_t>;
    using Base::codes_, Base::code_step_, Base::first_, Base::dx_;

public:
    DecodeRow8(const DecodePass<T> &dp, const Row &row, const int32_t *codes, int64_t code_step, double *pred)
        : Base(*dp.g.p, row, codes, code_step, pred), dp_(dp) {}

    void point(int64_t ix, double pred) { decode_point(dp_, first_ + ix * dx_, pred, codes_[ix * code_step_]); }

    // dequantize_residual of the points of m among ix .. ix + 7 with the predictions p, stored where the point is
    // not an exception.
    ZB_AVX512_INLINE void apply8(int64_t ix, __m512d p, __mmask8 m) const {
        const int64_t dx = dx_, i = first_ + ix * dx;
        const __m256i q =
            code_step_ == 1
                ? _mm256_maskz_loadu_epi32(m, codes_ + ix)
                : _mm256_mmask_i32gather_epi32(_mm256_setzero_si256(), m, lane_offsets(code_step_),
                                               codes_ + ix * code_step_, 4);
        typename Raw8<T>::type v;
        rounded(_mm512_add_pd(p, _mm512_mul_pd(_mm512_cvtepi32_pd(q), _mm512_set1_pd(dp_.twoe))), v);
        const __m128i zero = _mm_setzero_si128();
        __mmask8 keep;
        if (!dp_.mask) {   // no exceptions in the stream
            keep = m;
        } else if (dx == 1) {
            keep = (__mmask8)_mm_mask_cmpeq_epi8_mask(m, _mm_maskz_loadu_epi8(m, dp_.mask + i), zero);
        } else if (dx == 2) {
            const __mmask16 even = (__mmask16)even_bits(m);
            keep = (__mmask8)_pext_u32(_mm_mask_cmpeq_epi8_mask(even, _mm_maskz_loadu_epi8(even, dp_.mask + i), zero),
                                       0x5555u);
        } else {
            keep = 0;
            for (int k = 0; k < 8; ++k)
                if (((m >> k) & 1) && !dp_.mask[i + k * dx]) keep = (__mmask8)(keep | (1u << k));
        }
        store8(dp_.out + i, dx, v, keep);
    }

private:
    DecodePass<T> dp_;
};

}  // namespace

template <typename T>
ZB_TARGET_AVX512 void encode_row_avx512(const EncodePass<T> &ep, int64_t z, int64_t y, const Row &row, int32_t *codes,
                                        int64_t code_step, double *scratch) {
    EncodeRow8<T> body(ep, row, codes, code_step, scratch);
    walk_row(ep.g, ep.recon, z, y, row, body);
}
template <typename T>
ZB_TARGET_AVX512 void decode_row_avx512(const DecodePass<T> &dp, int64_t z, int64_t y, const Row &row,
                                        const int32_t *codes, int64_t code_step, double *scratch) {
    DecodeRow8<T> body(dp, row, codes, code_step, scratch);
    walk_row(dp.g, dp.out, z, y, row, body);
}
template void encode_row_avx512<float>(const EncodePass<float> &, int64_t, int64_t, const Row &, int32_t *, int64_t,
                                       double *);
template void encode_row_avx512<double>(const EncodePass<double> &, int64_t, int64_t, const Row &, int32_t *,
                                        int64_t, double *);
template void decode_row_avx512<float>(const DecodePass<float> &, int64_t, int64_t, const Row &, const int32_t *,
                                       int64_t, double *);
template void decode_row_avx512<double>(const DecodePass<double> &, int64_t, int64_t, const Row &, const int32_t *,
                                        int64_t, double *);
#endif

}  // namespace zb
