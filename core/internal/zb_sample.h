// Samples of an array for tuning on the CPU (predictor/encoder auto, the interp predictor's alpha): a centred
// sub-box and its values, so that samples of every rank keep their rows contiguous along x.
#pragma once
#include <array>
#include <cstdint>
#include <vector>
#include "zb_shape.h"

namespace zb {

// A centred sub-box of s of about `target` values (at least one full row along x, up to 64 values, so that 1D
// samples are contiguous); start[k] receives its first coordinate per dim.
Shape sample_box(const Shape &s, uint64_t target, uint64_t start[3]);

// 2^rank boxes of one shape (returned in `box`, about target / 2^rank values each, at least one full row up to 64
// values along x), centred at the quarter and three-quarter points of every dim: their start coordinates. Spread
// out, they stand for the whole array better than one central box when tuning alpha (a CFD grid with a body in the
// middle); for predictor/encoder auto one central box measured better (geoid 1e-4, ncep Z3 1e-2).
std::vector<std::array<uint64_t, 3>> quarter_boxes(const Shape &s, uint64_t target, Shape &box);

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

// Appends the linear indices of the values of box b (as gather reads them) to idx.
void box_points(const Shape &s, const Shape &b, const uint64_t start[3], std::vector<uint64_t> &idx);

}  // namespace zb
