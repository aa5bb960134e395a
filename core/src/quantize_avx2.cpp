// quantize() (zb_quant.h) eight float or four double values at a time with AVX2 intrinsics: GCC does not
// vectorize the scalar form for AVX2 (it turns its selects into branches), and this is the hottest loop of the fast
// pipeline. Every step is the scalar one's IEEE operation on a vector (the same products, sums, conversions and
// comparisons), so the results are bit for bit those of quantize(); core_simd_test compares them on every kind of
// value (NaN, infinities, signed zeros, subnormals, the fill value, out-of-range values).
#include "zb_quantize_span.h"
#include "zb_bytes.h"
#include <cstring>
#if ZB_SIMD_X86
#include <immintrin.h>
#endif

namespace zb {

#if ZB_SIMD_X86
namespace {

struct QuantVectors {
    __m256d recip, twoeb, eb, limit, magic, absmask, in_range_allowed;
    ZB_TARGET_AVX2 explicit QuantVectors(const QuantParams &qp) {
        recip = _mm256_set1_pd(qp.recip);
        twoeb = _mm256_set1_pd(qp.twoeb);
        eb = _mm256_set1_pd(qp.eb);
        limit = _mm256_set1_pd(kQuantLimit);
        magic = _mm256_set1_pd(6755399441055744.0);  // round_half_even's 1.5 * 2^52
        absmask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffffLL));
        in_range_allowed = _mm256_castsi256_pd(_mm256_set1_epi64x(qp.eb > 0 ? -1 : 0));  // eb > 0 (NaN eb: no)
    }
};

// Four values as doubles: qi (4 x int32) and the double of (T)dequantize, plus the in_range and within masks as
// 4-bit movemasks. T_is_float: the reconstruction is rounded to float as dequantize<float> does.
template <bool TIsFloat>
ZB_TARGET_AVX2 ZB_ALWAYS_INLINE void quantize4(__m256d xd, const QuantVectors &v, __m128i &qi, __m256d &r,
                                               int &in_range, int &within) {
    const __m256d t = _mm256_mul_pd(xd, v.recip);
    const __m256d ok = _mm256_and_pd(_mm256_cmp_pd(_mm256_and_pd(t, v.absmask), v.limit, _CMP_LT_OQ),
                                     v.in_range_allowed);
    const __m256d rounded = _mm256_sub_pd(_mm256_add_pd(_mm256_and_pd(t, ok), v.magic), v.magic);
    qi = _mm256_cvttpd_epi32(rounded);  // exact: an integer below 2^30 in magnitude
    r = _mm256_mul_pd(_mm256_cvtepi32_pd(qi), v.twoeb);
    if (TIsFloat) r = _mm256_cvtps_pd(_mm256_cvtpd_ps(r));
    const __m256d err = _mm256_and_pd(_mm256_sub_pd(xd, r), v.absmask);
    in_range = _mm256_movemask_pd(ok);
    within = _mm256_movemask_pd(_mm256_cmp_pd(err, v.eb, _CMP_LE_OQ));
}

// Lane masks of an 8-bit (or 4-bit) mask: lane k all ones when bit k is set.
ZB_TARGET_AVX2 ZB_ALWAYS_INLINE __m256i lanes_of(int bits) {
    const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(bits), bit), bit);
}

// Bytes 0/1 of an exception mask from the bits of the regular values (bit k clear: byte k is 1).
inline uint64_t exception_bytes(int regular, int count) {
    const uint32_t exc = (uint32_t)~regular & ((1u << count) - 1);
    return bits_to_bytes4(exc) | (uint64_t)bits_to_bytes4(exc >> 4) << 32;
}

}  // namespace

ZB_TARGET_AVX2 void quantize_span_avx2(const float *__restrict x, uint64_t i0, uint64_t i1, QuantParams qp,
                                       uint32_t *__restrict q, uint8_t *__restrict exc) {
    const QuantVectors v(qp);
    const __m256i expmask = _mm256_set1_epi32(0x7f800000);
    const __m256i fill = _mm256_set1_epi32((int)(uint32_t)qp.fill_bits);
    const __m256i use_fill = _mm256_set1_epi32(qp.has_fill ? -1 : 0);
    uint64_t i = i0;
    for (; i + 8 <= i1; i += 8) {
        const __m256 xf = _mm256_loadu_ps(x + i);
        const __m256i xb = _mm256_castps_si256(xf);
        const __m256i special = _mm256_or_si256(_mm256_cmpeq_epi32(_mm256_and_si256(xb, expmask), expmask),
                                                _mm256_and_si256(use_fill, _mm256_cmpeq_epi32(xb, fill)));
        __m128i qlo, qhi;
        __m256d rlo, rhi;
        int rg_lo, rg_hi, wi_lo, wi_hi;
        quantize4<true>(_mm256_cvtps_pd(_mm256_castps256_ps128(xf)), v, qlo, rlo, rg_lo, wi_lo);
        quantize4<true>(_mm256_cvtps_pd(_mm256_extractf128_ps(xf, 1)), v, qhi, rhi, rg_hi, wi_hi);
        const __m256 rf = _mm256_set_m128(_mm256_cvtpd_ps(rhi), _mm256_cvtpd_ps(rlo));
        // A zero keeps its sign: x == 0 with a reconstruction of the other sign is an exception.
        const int zero = _mm256_movemask_ps(_mm256_cmp_ps(xf, _mm256_setzero_ps(), _CMP_EQ_OQ));
        const int sign_differs = _mm256_movemask_ps(_mm256_xor_ps(xf, rf));
        const int regular = ~_mm256_movemask_ps(_mm256_castsi256_ps(special)) & (rg_lo | rg_hi << 4) &
                            (wi_lo | wi_hi << 4) & ~(zero & sign_differs) & 0xff;
        const __m256i qi = _mm256_set_m128i(qhi, qlo);
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(q + i), _mm256_and_si256(qi, lanes_of(regular)));
        const uint64_t e = exception_bytes(regular, 8);
        std::memcpy(exc + i, &e, 8);
    }
    quantize_span(x, i, i1, qp, q, exc);   // the last values
}

ZB_TARGET_AVX2 void quantize_span_avx2(const double *__restrict x, uint64_t i0, uint64_t i1, QuantParams qp,
                                       uint32_t *__restrict q, uint8_t *__restrict exc) {
    const QuantVectors v(qp);
    const __m256i expmask = _mm256_set1_epi64x(0x7ff0000000000000LL);
    const __m256i fill = _mm256_set1_epi64x((long long)qp.fill_bits);
    const __m256i use_fill = _mm256_set1_epi64x(qp.has_fill ? -1 : 0);
    uint64_t i = i0;
    for (; i + 4 <= i1; i += 4) {
        const __m256d xd = _mm256_loadu_pd(x + i);
        const __m256i xb = _mm256_castpd_si256(xd);
        const __m256i special = _mm256_or_si256(_mm256_cmpeq_epi64(_mm256_and_si256(xb, expmask), expmask),
                                                _mm256_and_si256(use_fill, _mm256_cmpeq_epi64(xb, fill)));
        __m128i qi;
        __m256d r;
        int in_range, within;
        quantize4<false>(xd, v, qi, r, in_range, within);
        const int zero = _mm256_movemask_pd(_mm256_cmp_pd(xd, _mm256_setzero_pd(), _CMP_EQ_OQ));
        const int sign_differs = _mm256_movemask_pd(_mm256_xor_pd(xd, r));
        const int regular = ~_mm256_movemask_pd(_mm256_castsi256_pd(special)) & in_range & within &
                            ~(zero & sign_differs) & 0xf;
        const __m128i lane = _mm_setr_epi32(1, 2, 4, 8);
        const __m128i keep = _mm_cmpeq_epi32(_mm_and_si128(_mm_set1_epi32(regular), lane), lane);
        _mm_storeu_si128(reinterpret_cast<__m128i *>(q + i), _mm_and_si128(qi, keep));
        const uint32_t e = (uint32_t)exception_bytes(regular, 4);
        std::memcpy(exc + i, &e, 4);
    }
    quantize_span(x, i, i1, qp, q, exc);   // the last values
}
#endif

}  // namespace zb
