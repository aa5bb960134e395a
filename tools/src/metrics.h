// Quality of a reconstruction against the original: the bound check on every value and the usual error metrics.
#pragma once
#include <cstddef>
#include <cstdint>
#include "zbound.h"

namespace zbtool {

struct ErrorStats {
    uint64_t n = 0;               // values compared
    uint64_t checked = 0;         // finite, non-fill values (the ones the bound applies to; -0.0 included)
    uint64_t specials = 0;        // NaN, +-Inf, -0.0 and fill values (must come back bit for bit)
    uint64_t violations = 0;      // checked values with |x - x'| > eb (or x' not a number)
    uint64_t special_mismatches = 0;
    double max_abs_error = 0;     // over checked values
    uint64_t max_error_index = 0;
    double max_err_over_bound = 0;  // max over checked values of |x - x'| / (its bound); <= 1 when the bound holds
    double vmin = 0, vmax = 0;    // finite non-fill range of the original
    double mse = 0;
    double value_range() const { return checked ? vmax - vmin : 0.0; }
    double psnr() const;          // 20 log10(range) - 10 log10(mse); +inf when mse == 0
    double nrmse() const;         // sqrt(mse) / range; 0 when the range is 0
    bool ok() const { return violations == 0 && special_mismatches == 0; }
};

// Compares every value of `orig` and `recon` (n values of dtype). A value is checked against its bound when it is
// finite and not bit-equal to the fill value (has_fill): eb, or with pw_rel > 0 the point-wise pw_rel * |x| (so a
// zero must come back as a zero); NaN, +-Inf, the fill value and -0.0 must match bit for bit. The difference and
// the point-wise bound are taken in long double so that the check itself does not round a violation away.
ErrorStats compare_arrays(zb_dtype dtype, const void *orig, const void *recon, size_t n, double eb,
                          bool has_fill, uint64_t fill_bits, double pw_rel = 0);

}  // namespace zbtool
