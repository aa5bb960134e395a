// Spline-interpolation predictor (cuSZ-i G-Interp, docs/FORMAT.md "Interp predictor"): parameters, the spline
// formulas and the residual quantization, shared by host and device. Every floating-point operation is an explicit
// round-to-nearest double operation in a fixed order, so the CPU and the GPU reconstruct identical values.
#pragma once
#include <cstdint>
#include <string>
#include <vector>
#include "zb_hd.h"
#include "zb_quant.h"
#include "zb_shape.h"

namespace zb {

constexpr int kInterpLevels = 3;        // strides 4, 2, 1
constexpr int kInterpAnchorLog2 = 3;    // anchors on the lattice of multiples of 8 in every dim
constexpr int kInterpParamBytes = 48;   // serialized size (after the v2 common parameters)

// Where the code of each point goes in the code array. kIndex (format version 2): at the point's array index.
// kPass (version 3): the anchors in lattice order, then each pass's points in the order the passes run, so that
// the codes of one level (which share a bound and a distribution) are contiguous for the encoder.
enum class InterpCodeOrder : uint8_t { kIndex, kPass };
inline InterpCodeOrder interp_code_order(uint16_t format_version) {
    return format_version >= 3 ? InterpCodeOrder::kPass : InterpCodeOrder::kIndex;
}

// What the encoder tuned and the decoder needs; stored in the stream, never recomputed by the decoder.
struct InterpParams {
    uint8_t order[3] = {0, 1, 2};    // the 3D view's dims (0 = z, 1 = y, 2 = x) in processing order
    uint8_t natural[3] = {0, 0, 0};  // per 3D dim: 1 = natural cubic spline, 0 = not-a-knot
    double alpha = 1.0;              // level-wise bound reduction (Eq. 2 of cusz-i.txt)
    // Bound of each level: level_eb[0] for stride 1, [1] stride 2, [2] stride 4, [3] the anchors.
    double level_eb[kInterpLevels + 1] = {0, 0, 0, 0};
};

// The spline that predicts the value at coordinate c along a dim of length len at stride s (c - s always exists):
// which of the neighbours at c-3s, c-s, c+s, c+3s exist decides it.
enum class SplineCase : uint8_t { kLeftOnly, kLinear, kCubic, kQuadLeft, kQuadRight };
ZB_HD SplineCase spline_case(int64_t c, int64_t s, int64_t len) {
    if (c + s >= len) return SplineCase::kLeftOnly;
    const bool left3 = c - 3 * s >= 0, right3 = c + 3 * s < len;
    if (left3 && right3) return SplineCase::kCubic;
    if (left3) return SplineCase::kQuadLeft;
    return right3 ? SplineCase::kQuadRight : SplineCase::kLinear;
}
// The formulas (docs/FORMAT.md section 8), with a, b, c, d the values at c-3s, c-s, c+s, c+3s.
ZB_HD double spline_cubic(bool natural, double a, double b, double c, double d) {
    const double inner = add_rn(b, c), outer = add_rn(a, d);
    if (natural)  // (-3a + 23b + 23c - 3d) / 40
        return mul_rn(sub_rn(mul_rn(23.0, inner), mul_rn(3.0, outer)), 0.025);
    return mul_rn(sub_rn(mul_rn(9.0, inner), outer), 0.0625);  // (-a + 9b + 9c - d) / 16
}
ZB_HD double spline_quad_left(double a, double b, double c) {  // (-a + 6b + 3c) / 8
    return mul_rn(sub_rn(add_rn(mul_rn(6.0, b), mul_rn(3.0, c)), a), 0.125);
}
ZB_HD double spline_quad_right(double b, double c, double d) {  // (3b + 6c - d) / 8
    return mul_rn(sub_rn(add_rn(mul_rn(3.0, b), mul_rn(6.0, c)), d), 0.125);
}
ZB_HD double spline_linear(double b, double c) { return mul_rn(add_rn(b, c), 0.5); }

// A neighbour may be an exception stored exactly (NaN, Inf), and then the spline is not finite: the prediction
// falls back to the neighbour at c-s, else the one at c+s, else 0, whichever is finite first, so that a special
// value does not turn its neighbours into exceptions too (land masks: NaN next to every coast). Streams written
// without this rule decode the same: a point whose spline was not finite was an exception, never predicted.
ZB_HD double finite_prediction(double p, double left, double right) {
    if (is_finite_value(p)) return p;
    if (is_finite_value(left)) return left;
    return is_finite_value(right) ? right : 0.0;
}

// Prediction of the value at coordinate c along one dim of length len, interpolating at stride s from the
// reconstructed values at c-3s, c-s, c+s, c+3s (fetch(k) returns the value at coordinate k as a double). c-s always
// exists (c >= s). Cubic with 4 neighbours, quadratic with 3, linear with 2, the left neighbour alone with 1.
template <typename Fetch>
ZB_HD double interp_predict(int64_t c, int64_t s, int64_t len, bool natural, Fetch fetch) {
    const SplineCase k = spline_case(c, s, len);
    const double b = fetch(c - s);
    if (k == SplineCase::kLeftOnly) return finite_prediction(b, b, b);
    const double cc = fetch(c + s);
    switch (k) {
        case SplineCase::kCubic:
            return finite_prediction(spline_cubic(natural, fetch(c - 3 * s), b, cc, fetch(c + 3 * s)), b, cc);
        case SplineCase::kQuadLeft: return finite_prediction(spline_quad_left(fetch(c - 3 * s), b, cc), b, cc);
        case SplineCase::kQuadRight: return finite_prediction(spline_quad_right(b, cc, fetch(c + 3 * s)), b, cc);
        default: return finite_prediction(spline_linear(b, cc), b, cc);
    }
}

// Quantizes the residual of x against prediction p with bin width twoe (= 2 * level bound): q in (-radius, radius)
// and the reconstruction recon = (T)(p + q * twoe), which must lie within the global bound eb of x. Returns false
// (q = 0, recon = x: the value becomes an exception stored exactly) when x is special or not representable.
template <typename T>
ZB_HD bool quantize_residual(T x, double p, double twoe, double recip, double eb, int32_t radius, int has_fill,
                             uint64_t fill_bits, int32_t &q, T &recon) {
    using U = typename FloatBits<T>::U;
    // The conditions are combined with & and |, not && and ||, and t is clamped before rounding instead of
    // branching: with no control flow the CPU loops over a row vectorize (the values are the same either way).
    // -0.0 is always kept exactly: a prediction near zero could otherwise reconstruct it as a tiny negative value,
    // within the bound but not bit for bit (DESIGN invariant 2).
    const bool special = (!is_finite_value(x)) | ((has_fill != 0) & (bits_of(x) == (U)fill_bits)) |
                         ((x == (T)0) & sign_bit(x));
    const double xd = (double)x;
    const double t = mul_rn(sub_rn(xd, p), recip);
    const bool small = abs_value(t) < kQuantLimit;  // false for NaN
    const int32_t qi = (int32_t)round_half_even(small ? t : 0.0);
    const bool in_range = small & (qi > -radius) & (qi < radius);
    const T r = (T)add_rn(p, mul_rn((double)qi, twoe));
    const bool within = abs_value(sub_rn(xd, (double)r)) <= eb;
    const bool sign_ok = !((x == (T)0) & (sign_bit(x) != sign_bit(r)));  // +0.0 must not come back as -0.0
    const bool regular = (!special) & in_range & within & sign_ok & (eb > 0);
    q = regular ? qi : 0;
    recon = regular ? r : x;
    return regular;
}

// The decoder's reconstruction of a regular value.
template <typename T> ZB_HD T dequantize_residual(double p, int32_t q, double twoe) {
    return (T)add_rn(p, mul_rn((double)q, twoe));
}

// Eq. 2 of cusz-i.txt: alpha from the value-range-relative bound eps.
double interp_alpha(double eps);

// Tunes the cubic variant per dim and the dim order from samples of x (host; the GPU path calls it on a host copy)
// and derives alpha and the level bounds from eb and the finite value range (Eq. 2).
// Then, with tune_alpha, alpha is chosen for the stream's encoder by compressing a sample with each candidate
// (interp_tune_alpha); without it Eq. 2's default stays.
// nt: threads for the alpha tuning's sample compressions (the result does not depend on it).
template <typename T>
InterpParams interp_tune(const T *x, const Shape &s, double eb, double range, int has_fill, uint64_t fill_bits,
                         uint8_t encoder, bool tune_alpha = true, int nt = 1);

// The linear indices of every value interp_tune (with tune_alpha) may read, in some order with repeats: the GPU path
// copies only these to the host when the array lives on the device. Must list every read of interp_tune and
// interp_tune_alpha (core_interp_test checks it: the tuning on a copy holding only these values is the same).
void interp_tune_points(const Shape &s, std::vector<uint64_t> &idx);

// The part of interp_tune_points that interp_tune_alpha reads (its sample boxes), appended to idx.
void interp_tune_alpha_points(const Shape &s, std::vector<uint64_t> &idx);

// Sets alpha and the level bounds e_l = eb / alpha^l (computed by repeated division, l = 0 .. kInterpLevels).
void interp_set_alpha(InterpParams &ip, double eb, double alpha);

// Replaces ip's alpha by the candidate (Eq. 2's default first, then 1, 1.25, 1.5, 1.75, 2) whose compressed sample
// (2^rank boxes around the quarter points of the dims, together about 1/64 of the array, 2^15 .. 2^16 values,
// the stream's encoder) is smallest. The candidates' sample compressions run on up to nt threads, one each.
// Arrays under 16384 values keep the default. Host only; deterministic (whatever nt).
template <typename T>
void interp_tune_alpha(const T *x, const Shape &s, double eb, uint8_t encoder, int has_fill, uint64_t fill_bits,
                       InterpParams &ip, int nt = 1);

// Serialization of the parameters (little-endian, kInterpParamBytes) and its validating inverse.
void interp_params_write(const InterpParams &p, uint8_t *dst);
bool interp_params_read(const uint8_t *src, InterpParams &p, std::string &why);

// The 3D view of a folded shape: rank-1 and rank-2 shapes get leading unit dims.
inline void view3(const Shape &s, int64_t d[3]) {
    d[0] = (int64_t)s.nz();
    d[1] = (int64_t)s.ny();
    d[2] = (int64_t)s.nx();
}

}  // namespace zb
