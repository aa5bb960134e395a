// Integer Lorenzo prediction on the whole chunk (docs/FORMAT.md section 4), shared by host and device.
// `qat(z, y, x)` returns the quantized integer at a position (0 outside the array), as uint32_t.
#pragma once
#include <cstdint>
#include "zb_hd.h"
#include "zb_shape.h"

namespace zb {

// Lorenzo segments (docs/FORMAT.md section 13, format version 6). The Lorenzo + fast pipeline cuts the slowest
// dim into segments of `layers` layers (a layer: one index of the slowest dim, i.e. a plane in rank 3, a row in
// rank 2, a value in rank 1) and predicts each segment as if it were the whole array: a neighbour in an earlier
// segment counts as outside (0). Segments can then be decoded on separate threads with no pass over the layers
// before them. They hold at least kLorenzoSegmentValues values, and only layers of at most kLorenzoSegmentMaxLayer
// values are cut, so at most 1 in 64 layers loses its neighbours in the slowest dim (larger layers split into bands
// of a layer instead, zb_lorenzo_grid.h). The cost in ratio was measured on the real fields (bench/NOTES.md).
constexpr uint64_t kLorenzoSegmentValues = uint64_t(1) << 20;
constexpr uint64_t kLorenzoSegmentMaxLayer = kLorenzoSegmentValues / 64;

struct LorenzoSegments {
    uint64_t layers = 1;         // layers along the slowest dim (rank 1: values)
    uint64_t layer_values = 1;   // values per layer
    uint64_t per_segment = 1;    // layers per segment; == layers when the array is one segment
    uint64_t count() const { return (layers + per_segment - 1) / per_segment; }
};

// The segments the fast encoder uses for a shape (a function of the shape alone).
inline LorenzoSegments lorenzo_segments(const Shape &s) {
    LorenzoSegments g;
    g.layers = s.rank == 1 ? s.n : s.dims[0];
    g.layer_values = s.n / g.layers;
    g.per_segment = g.layers;
    if (g.layer_values <= kLorenzoSegmentMaxLayer) {
        const uint64_t k = (kLorenzoSegmentValues + g.layer_values - 1) / g.layer_values;
        if (k < g.layers) g.per_segment = k;
    }
    return g;
}

// The same array as one segment (the Lorenzo + ratio pipeline, format version 1 streams).
inline LorenzoSegments lorenzo_one_segment(const Shape &s) {
    LorenzoSegments g = lorenzo_segments(s);
    g.per_segment = g.layers;
    return g;
}

// Delta d = q - prediction, in wrap-around 32-bit arithmetic, for a point with coordinates (z, y, x) in a
// rank-r array (rank 1: only x; rank 2: y, x). Neighbour coordinates below 0 give 0 through `qat`.
template <int Rank, typename QAt>
ZB_HD int32_t lorenzo_delta(int64_t z, int64_t y, int64_t x, QAt qat) {
    uint32_t p;
    if constexpr (Rank == 1) {
        p = qat(0, 0, x - 1);
    } else if constexpr (Rank == 2) {
        p = qat(0, y, x - 1) + qat(0, y - 1, x) - qat(0, y - 1, x - 1);
    } else {
        p = qat(z, y, x - 1) + qat(z, y - 1, x) + qat(z - 1, y, x) - qat(z, y - 1, x - 1) - qat(z - 1, y, x - 1) -
            qat(z - 1, y - 1, x) + qat(z - 1, y - 1, x - 1);
    }
    return (int32_t)(qat(z, y, x) - p);
}

}  // namespace zb
