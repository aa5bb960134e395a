// Dual-quantization of one value and the 16-bit code mapping (docs/FORMAT.md sections 3 and 4).
// Host and device share this code; it contains no expression a compiler could contract into an FMA.
#pragma once
#include <cstdint>
#include <cfloat>
#include <cmath>
#include "zb_hd.h"

namespace zb {

// |t| must stay below this so that q and every Lorenzo sum of q fit the 32-bit wrap-around arithmetic exactly.
constexpr double kQuantLimit = 1073741824.0;  // 2^30
constexpr uint16_t kEscapeCode = 0x8000;       // sign-magnitude "negative zero": delta stored in the escape list
constexpr int32_t kMaxCodeMagnitude = 32767;

template <typename T> struct FloatBits;
template <> struct FloatBits<float> { using U = uint32_t; };
template <> struct FloatBits<double> { using U = uint64_t; };

template <typename T> ZB_HD typename FloatBits<T>::U bits_of(T v) {
    typename FloatBits<T>::U u;
#if defined(__CUDA_ARCH__)
    if constexpr (sizeof(T) == 4) u = __float_as_uint(v); else u = (uint64_t)__double_as_longlong(v);
#else
    __builtin_memcpy(&u, &v, sizeof(T));
#endif
    return u;
}

template <typename T> ZB_HD T from_bits(typename FloatBits<T>::U u) {
    T v;
#if defined(__CUDA_ARCH__)
    if constexpr (sizeof(T) == 4) v = __uint_as_float(u); else v = __longlong_as_double((long long)u);
#else
    __builtin_memcpy(&v, &u, sizeof(T));
#endif
    return v;
}

// Classification by bits: the same on host and device, independent of math-library overloads.
template <typename T> ZB_HD bool is_finite_value(T v) {
    if constexpr (sizeof(T) == 4) return (bits_of(v) & 0x7F800000u) != 0x7F800000u;
    else return (bits_of(v) & 0x7FF0000000000000ull) != 0x7FF0000000000000ull;
}
template <typename T> ZB_HD bool sign_bit(T v) { return (bits_of(v) >> (8 * sizeof(T) - 1)) != 0; }

ZB_HD double abs_value(double v) {
#if defined(__CUDA_ARCH__)
    return ::fabs(v);
#else
    return std::fabs(v);
#endif
}
ZB_HD double add_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
    return __dadd_rn(a, b);
#else
    return a + b;
#endif
}

// Constants derived once from the absolute bound; pass them by value to kernels.
struct QuantParams {
    double eb;        // absolute bound; 0 = lossless (every value is an exception)
    double twoeb;     // 2 * eb
    double recip;     // 1 / (2 * eb)
    int has_fill;
    uint64_t fill_bits;
};

// On the device too (the GPU's fast encoder derives them there from the value range, without a host round trip):
// the product, the quotient and the doubling are IEEE operations that round the same way on both.
ZB_HD QuantParams make_quant_params(double eb, int has_fill, uint64_t fill_bits) {
    QuantParams p;
    p.eb = eb;
    p.twoeb = 2.0 * eb;
    p.recip = eb > 0 ? 1.0 / p.twoeb : 0.0;
    p.has_fill = has_fill;
    p.fill_bits = fill_bits;
    return p;
}

// The value reconstructed from quantized integer q.
// Products and differences are written with explicit round-to-nearest operations on the device so that no
// compiler flag can contract them; on the host -ffp-contract=off and SSE2 double arithmetic give the same results.
ZB_HD double mul_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
    return __dmul_rn(a, b);
#else
    return a * b;
#endif
}
ZB_HD double sub_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
    return __dsub_rn(a, b);
#else
    return a - b;
#endif
}

// The absolute bound of a REL bound over the finite range [vmin, vmax] (derive_abs_bound, zb_format.h): bound *
// (vmax - vmin), and +0 for every non-positive or non-finite result. Shared by the host and the GPU's encoder so that
// both derive the same bits.
ZB_HD double rel_abs_bound(double bound, double vmin, double vmax) {
    const double eb = mul_rn(bound, sub_rn(vmax, vmin));
    return (eb > 0 && eb <= DBL_MAX) ? eb : 0.0;
}

template <typename T> ZB_HD T dequantize(int32_t q, double twoeb) { return (T)mul_rn((double)q, twoeb); }

// Round half to even for |t| < 2^51 (the result of rint() in the default rounding mode): adding 1.5 * 2^52 moves t
// where the spacing of doubles is exactly 1, so the addition itself rounds; subtracting gives the integer back.
// Unlike a libm call it is the same two instructions on every CPU and on the GPU.
constexpr double kRoundMagic = 6755399441055744.0;  // 1.5 * 2^52
ZB_HD double round_half_even(double t) {
    return sub_rn(add_rn(t, kRoundMagic), kRoundMagic);
}

// Returns true and sets q if x is regular (representable within the bound); false (q = 0) if x is an exception.
// Written without early returns, and with & and | rather than && and || (no control flow at all), so that it
// vectorizes on the CPU and does not diverge on the GPU; no conversion of an out-of-range double to int happens.
template <typename T> ZB_HD bool quantize(T x, const QuantParams &p, int32_t &q) {
    using U = typename FloatBits<T>::U;
    const U fill = (U)p.fill_bits;
    // A NaN or infinite x needs no test of its own: t is then NaN or infinite (recip >= 0), never in range.
    const bool fill_value = (p.has_fill != 0) & (bits_of(x) == fill);
    const double xd = (double)x;
    const double t = mul_rn(xd, p.recip);
    const bool in_range = (abs_value(t) < kQuantLimit) & (p.eb > 0);  // false for NaN t as well
    // round_half_even(t) in two steps: the integer sits in the low bits of `shifted` (two's complement, as for
    // |t| < 2^31 the sum's spacing is 1), and `rounded` is that integer as a double, i.e. (double)qi exactly, so
    // dequantize<T>(qi) is the product below. On the GPU, where conversions between int and double issue at a
    // quarter of the arithmetic rate, qi is read from the bits instead of converted.
    // On the GPU, t goes in unselected: __double2loint reads the bits of any double, and where t is out of range the
    // value is not regular (q = 0 below) whatever qi and r are (two selects and a compare per value fewer).
#if defined(__CUDA_ARCH__)
    const double shifted = add_rn(t, kRoundMagic);
    const double rounded = sub_rn(shifted, kRoundMagic);
    const int32_t qi = (int32_t)__double2loint(shifted);
#else
    const double shifted = add_rn(in_range ? t : 0.0, kRoundMagic);
    const double rounded = sub_rn(shifted, kRoundMagic);
    const int32_t qi = (int32_t)rounded;
#endif
    const T r = (T)mul_rn(rounded, p.twoeb);
    const bool within = abs_value(sub_rn(xd, (double)r)) <= p.eb;
    // A zero must come back with its sign. For x = +-0 the quantizer gives q = 0 and r = +0 (eb > 0 whenever the
    // value can be regular), so the test "x == 0 and its sign differs from r's" is "x is -0.0".
    const bool sign_ok = bits_of(x) != (U(1) << (8 * sizeof(T) - 1));
    const bool regular = (!fill_value) & in_range & within & sign_ok;
    q = regular ? qi : 0;
    return regular;
}

// Sign-magnitude 16-bit code of a Lorenzo delta, or kEscapeCode when |d| > 32767.
// Selects only (no branch), so that the CPU's code loops vectorize; the magnitude in unsigned arithmetic, so that
// INT32_MIN is an escape too.
// Its two parts: the magnitude capped at 0x8000 (bit 15 set exactly for the escaped deltas) and the sign bit, at bit
// 15 (the GPU's tile kernels put two codes in a word from these).
ZB_HD uint32_t capped_magnitude(int32_t d) {
    const uint32_t mag = d < 0 ? 0u - (uint32_t)d : (uint32_t)d;
    // Magnitudes past 32767 become 0x8000, which with either sign bit is kEscapeCode.
    return mag < 0x8000u ? mag : 0x8000u;
}
ZB_HD uint16_t delta_to_code(int32_t d) {
    return (uint16_t)(capped_magnitude(d) | (((uint32_t)d >> 16) & 0x8000u));
}

// Inverse of delta_to_code for non-escape codes.
ZB_HD int32_t code_to_delta(uint16_t c) {
    const int32_t mag = (int32_t)(c & 0x7FFFu);
    return (c & 0x8000u) ? -mag : mag;
}

}  // namespace zb
