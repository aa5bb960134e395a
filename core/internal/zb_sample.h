// Samples of an array for tuning on the CPU (predictor/encoder auto, the interp predictor's alpha): a centred
// sub-box and its values, so that samples of every rank keep their rows contiguous along x.
#pragma once
#include <array>
#include <cstdint>
#include <cstring>
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

// The values of x inside the box b (from sample_box) into out (b.n values) in C order: a row along x at a time, the
// rows on nt threads when the box is large (the pipeline choice's sample of up to 2^20 values).
template <typename T>
void gather_into(const T *x, const Shape &s, const Shape &b, const uint64_t start[3], T *out, int nt = 1) {
    const uint64_t bz = b.rank >= 3 ? b.dims[0] : 1, by = b.rank >= 2 ? b.dims[b.rank - 2] : 1, bx = b.dims[b.rank - 1];
    const uint64_t sz = b.rank >= 3 ? start[0] : 0, sy = b.rank >= 2 ? start[b.rank - 2] : 0, sx = start[b.rank - 1];
    const uint64_t ny = s.ny(), nx = s.nx();
    const int64_t rows = (int64_t)(bz * by);
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1 && b.n > (uint64_t(1) << 16))
    for (int64_t r = 0; r < rows; ++r) {
        const uint64_t z = (uint64_t)r / by, y = (uint64_t)r % by;
        std::memcpy(out + (uint64_t)r * bx, x + ((z + sz) * ny + y + sy) * nx + sx, (size_t)bx * sizeof(T));
    }
}

// gather_into a new vector.
template <typename T> std::vector<T> gather(const T *x, const Shape &s, const Shape &b, const uint64_t start[3]) {
    std::vector<T> out((size_t)b.n);
    gather_into(x, s, b, start, out.data());
    return out;
}

// Appends the linear indices of the values of box b (as gather reads them) to idx.
void box_points(const Shape &s, const Shape &b, const uint64_t start[3], std::vector<uint64_t> &idx);

}  // namespace zb
