// Base-2 logarithm and exponential of the point-wise relative mode (docs/FORMAT.md section 12), written with IEEE
// double additions, multiplications and one division only, so that every CPU and the GPU compute the same bits
// (libm's log2/exp2 differ between libraries by an ulp, and a decoder on another machine must reconstruct exactly
// the values the encoder checked against the bound). Accuracy is about 1e-16 relative; the encoder checks every
// reconstructed value anyway, so accuracy affects the ratio, never the bound.
#pragma once
#include <cstdint>
#include "zb_quant.h"

namespace zb {

ZB_HD double div_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
    return __ddiv_rn(a, b);
#else
    return a / b;
#endif
}

constexpr double kLn2 = 0.6931471805599453;       // ln 2 rounded to double
constexpr double kInvLn2 = 1.4426950408889634;    // 1 / ln 2 rounded to double

// log2(x) for finite x > 0 (double, subnormals included).
ZB_HD double det_log2(double x) {
    uint64_t u = bits_of(x);
    int k = 0;
    if ((u >> 52) == 0) {  // subnormal: scale into the normal range by an exact power of two
        u = bits_of(mul_rn(x, 18014398509481984.0));  // 2^54
        k = -54;
    }
    k += (int)(u >> 52) - 1023;
    // m in [1, 2), then into (sqrt(1/2), sqrt(2)] so that |s| below stays under 0.172.
    uint64_t mu = (u & 0x000FFFFFFFFFFFFFull) | 0x3FF0000000000000ull;
    if (mu > 0x3FF6A09E667F3BCDull) {  // m > sqrt(2): halve it (exact)
        mu -= 0x0010000000000000ull;
        ++k;
    }
    const double m = from_bits<double>(mu);
    // ln m = 2 atanh(s) = 2 (s + s^3/3 + s^5/5 + ...), s = (m - 1) / (m + 1); m - 1 is exact.
    const double s = div_rn(sub_rn(m, 1.0), add_rn(m, 1.0));
    const double s2 = mul_rn(s, s);
    double p = 1.0 / 25.0;
    for (int j = 11; j >= 0; --j) p = add_rn(mul_rn(p, s2), 1.0 / (double)(2 * j + 1));
    const double ln_m = mul_rn(mul_rn(2.0, s), p);
    return add_rn((double)k, mul_rn(ln_m, kInvLn2));
}

// 2^y for finite y: +inf above 1024, +0 below -1100 (past the smallest subnormal).
ZB_HD double det_exp2(double y) {
    if (y > 1024.0) return from_bits<double>(0x7FF0000000000000ull);
    if (y < -1100.0) return 0.0;
    const double kd = round_half_even(y);
    const int k = (int)kd;
    const double t = mul_rn(sub_rn(y, kd), kLn2);  // |t| <= 0.347
    // e^t by its Taylor series to t^14/14!.
    double p = 1.0;
    for (int j = 14; j >= 1; --j) p = add_rn(1.0, mul_rn(mul_rn(p, t), 1.0 / (double)j));
    // Times 2^k in at most two exact-power steps (each an IEEE multiply; the second may round into subnormals).
    auto pow2 = [](int e) { return from_bits<double>((uint64_t)(e + 1023) << 52); };
    if (k > 1023) return mul_rn(mul_rn(p, pow2(1023)), pow2(k - 1023));
    if (k < -1022) return mul_rn(mul_rn(p, pow2(-1022)), pow2(k + 1022));  // k >= -1100
    return mul_rn(p, pow2(k));
}

// The point-wise relative mode's value for a decoded log magnitude y and a sign bit: +-2^y rounded to T.
template <typename T> ZB_HD T pwrel_value(T y, bool negative) {
    const double m = det_exp2((double)y);
    return (T)(negative ? -m : m);
}

}  // namespace zb
