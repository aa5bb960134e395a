// Samples of an array for tuning on the CPU (predictor/encoder auto, the interp predictor's alpha): a centred
// sub-box and its values, so that samples of every rank keep their rows contiguous along x.
#pragma once
#include <cstdint>
#include <vector>
#include "zb_shape.h"

namespace zb {

// A centred sub-box of s of about `target` values (at least one full row along x, up to 64 values, so that 1D
// samples are contiguous); start[k] receives its first coordinate per dim.
Shape sample_box(const Shape &s, uint64_t target, uint64_t start[3]);

// The values of x inside the box b (from sample_box) in C order.
template <typename T> std::vector<T> gather(const T *x, const Shape &s, const Shape &b, const uint64_t start[3]) {
    std::vector<T> out((size_t)b.n);
    const uint64_t bz = b.rank >= 3 ? b.dims[0] : 1, by = b.rank >= 2 ? b.dims[b.rank - 2] : 1, bx = b.dims[b.rank - 1];
    const uint64_t sz = start[0], sy = b.rank >= 2 ? start[b.rank - 2] : 0, sx = start[b.rank - 1];
    const uint64_t ny = s.ny(), nx = s.nx();
    size_t o = 0;
    for (uint64_t z = 0; z < bz; ++z)
        for (uint64_t y = 0; y < by; ++y)
            for (uint64_t xx = 0; xx < bx; ++xx)
                out[o++] = x[((z + (b.rank >= 3 ? sz : 0)) * ny + y + sy) * nx + xx + sx];
    return out;
}

}  // namespace zb
