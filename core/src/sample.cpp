// Sample boxes for tuning (zb_sample.h).
#include <algorithm>
#include <cmath>
#include "zb_sample.h"

namespace zb {

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

}  // namespace zb
