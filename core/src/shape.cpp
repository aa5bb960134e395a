#include "zb_shape.h"

namespace zb {

bool fold_shape(int rank, const size_t *dims, Shape &out) {
    uint64_t kept[64];
    int nk = 0;
    uint64_t n = 1;
    if (rank < 0 || rank > 64 || (rank > 0 && !dims)) return false;
    for (int i = 0; i < rank; ++i) {
        const uint64_t d = dims[i];
        if (d == 0) return false;
        if (n > UINT64_MAX / d) return false;
        n *= d;
        if (d != 1) kept[nk++] = d;
    }
    out = Shape();
    out.n = n;
    if (nk == 0) return true;  // a scalar or all-unit shape: 1D with one value
    if (nk > 3) {              // fold leading dims into the slowest one
        uint64_t lead = 1;
        for (int i = 0; i < nk - 2; ++i) lead *= kept[i];
        kept[0] = lead;
        kept[1] = kept[nk - 2];
        kept[2] = kept[nk - 1];
        nk = 3;
    }
    out.rank = nk;
    for (int i = 0; i < nk; ++i) out.dims[i] = kept[i];
    return true;
}

}  // namespace zb
