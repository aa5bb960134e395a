// Integer Lorenzo prediction on the whole chunk (docs/FORMAT.md section 4), shared by host and device.
// `qat(z, y, x)` returns the quantized integer at a position (0 outside the array), as uint32_t.
#pragma once
#include <cstdint>
#include "zb_hd.h"

namespace zb {

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
