// Folding a user shape into the rank-1..3 shape the codec works on (docs/FORMAT.md section 1).
#pragma once
#include <cstddef>
#include <cstdint>

namespace zb {

struct Shape {
    int rank = 1;                 // 1..3
    uint64_t dims[3] = {1, 1, 1}; // C order, slowest first; only the first `rank` entries are meaningful
    uint64_t n = 1;
    uint64_t nx() const { return dims[rank - 1]; }
    uint64_t ny() const { return rank >= 2 ? dims[rank - 2] : 1; }
    uint64_t nz() const { return rank >= 3 ? dims[0] : 1; }
};

// Drops unit dims and folds leading dims so that at most 3 remain. Returns false on a zero dim or on overflow of
// the value count.
bool fold_shape(int rank, const size_t *dims, Shape &out);

}  // namespace zb
