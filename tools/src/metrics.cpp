#include "metrics.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace zbtool {

double ErrorStats::psnr() const {
    if (checked == 0) return 0.0;
    if (mse == 0) return std::numeric_limits<double>::infinity();
    double range = value_range();
    if (range == 0) return 0.0;
    return 20.0 * std::log10(range) - 10.0 * std::log10(mse);
}

double ErrorStats::nrmse() const {
    double range = value_range();
    return range > 0 ? std::sqrt(mse) / range : 0.0;
}

namespace {

template <typename T, typename U>
ErrorStats compare_typed(const T *a, const T *b, size_t n, double eb, bool has_fill, uint64_t fill_bits,
                         double pw_rel) {
    static_assert(sizeof(T) == sizeof(U), "bit type");
    const U fill = (U)fill_bits;
    const U sign_only = (U)1 << (sizeof(U) * 8 - 1);
    const long double ebl = eb;
    ErrorStats s;
    s.n = n;
    long double sq = 0;
    double vmin = std::numeric_limits<double>::infinity(), vmax = -vmin, emax = 0, ratio_max = 0;
    for (size_t i = 0; i < n; ++i) {
        U ua, ub;
        std::memcpy(&ua, &a[i], sizeof(U));
        std::memcpy(&ub, &b[i], sizeof(U));
        const T x = a[i];
        if (!std::isfinite(x) || (has_fill && ua == fill)) {
            ++s.specials;
            if (ua != ub) ++s.special_mismatches;
            continue;
        }
        if (ua == sign_only) {  // -0.0: within the bound like any finite value, and bit for bit
            ++s.specials;
            if (ua != ub) ++s.special_mismatches;
        }
        ++s.checked;
        const long double err = std::fabs((long double)x - (long double)b[i]);
        const long double bound = pw_rel > 0 ? (long double)pw_rel * std::fabs((long double)x) : ebl;
        if (!(err <= bound)) ++s.violations;  // also catches a NaN reconstruction
        const double ratio = err == 0 ? 0.0 : bound > 0 ? (double)(err / bound) : INFINITY;
        if (!(ratio <= ratio_max)) ratio_max = std::isnan(ratio) ? INFINITY : ratio;
        const double e = std::isfinite((double)err) ? (double)err : std::numeric_limits<double>::infinity();
        if (e > emax) { emax = e; s.max_error_index = i; }
        sq += err * err;
        if ((double)x < vmin) vmin = (double)x;
        if ((double)x > vmax) vmax = (double)x;
    }
    s.max_abs_error = emax;
    s.max_err_over_bound = ratio_max;
    if (s.checked) {
        s.vmin = vmin;
        s.vmax = vmax;
        s.mse = (double)(sq / (long double)s.checked);
    }
    return s;
}

}  // namespace

ErrorStats compare_arrays(zb_dtype dtype, const void *orig, const void *recon, size_t n, double eb,
                          bool has_fill, uint64_t fill_bits, double pw_rel) {
    if (dtype == ZB_F64)
        return compare_typed<double, uint64_t>((const double *)orig, (const double *)recon, n, eb, has_fill,
                                               fill_bits, pw_rel);
    return compare_typed<float, uint32_t>((const float *)orig, (const float *)recon, n, eb, has_fill, fill_bits,
                                          pw_rel);
}

}  // namespace zbtool
