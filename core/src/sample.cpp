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

void box_points(const Shape &s, const Shape &b, const uint64_t start[3], std::vector<uint64_t> &idx) {
    const uint64_t bz = b.rank >= 3 ? b.dims[0] : 1, by = b.rank >= 2 ? b.dims[b.rank - 2] : 1, bx = b.dims[b.rank - 1];
    const uint64_t sz = start[0], sy = b.rank >= 2 ? start[b.rank - 2] : 0, sx = start[b.rank - 1];
    const uint64_t ny = s.ny(), nx = s.nx();
    for (uint64_t z = 0; z < bz; ++z)
        for (uint64_t y = 0; y < by; ++y)
            for (uint64_t xx = 0; xx < bx; ++xx) idx.push_back(((z + (b.rank >= 3 ? sz : 0)) * ny + y + sy) * nx + xx + sx);
}

std::vector<std::array<uint64_t, 3>> quarter_boxes(const Shape &s, uint64_t target, Shape &box) {
    const int nbox = 1 << s.rank;
    uint64_t centre_start[3];
    box = sample_box(s, std::max<uint64_t>(target / (uint64_t)nbox, 1), centre_start);
    std::vector<std::array<uint64_t, 3>> starts((size_t)nbox, std::array<uint64_t, 3>{0, 0, 0});
    for (int m = 0; m < nbox; ++m)
        for (int k = 0; k < s.rank; ++k) {
            const uint64_t q = ((m >> k) & 1) ? 3 * s.dims[k] / 4 : s.dims[k] / 4;   // the box's centre
            const uint64_t lo = q > box.dims[k] / 2 ? q - box.dims[k] / 2 : 0;
            starts[(size_t)m][(size_t)k] = std::min(lo, s.dims[k] - box.dims[k]);
        }
    return starts;
}

}  // namespace zb
