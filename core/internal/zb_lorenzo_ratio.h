// The Lorenzo + ratio decoder's view of the 16-bit codes (the ratio encoder's symbols d + radius, 0 escaped) as
// Lorenzo deltas, and its decode in slabs: Huffman sub-blocks and the Lorenzo inverse of the same layers one after
// the other, while the codes are in the thread's cache (core/src/lorenzo_ratio_cpu.cpp).
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include "zb_format.h"
#include "zb_ratio.h"
#include "zb_shape.h"
#include "zb_simd.h"
#include "zbound.h"

namespace zb {

// zeros[u] = how many of p[u * kRatioZeroUnit ..] (n symbols in all) are 0. Each unit's count is 16 bits wide, so
// the loop vectorizes in 16-bit lanes.
ZB_ALWAYS_INLINE void count_zeros_by_unit(const uint16_t *__restrict p, uint64_t n, uint32_t *__restrict zeros) {
    static_assert(kRatioZeroUnit < 65536, "a unit's count is 16 bits");
    for (uint64_t u0 = 0; u0 < n; u0 += kRatioZeroUnit) {
        const uint64_t m = std::min(kRatioZeroUnit, n - u0);
        uint16_t z = 0;
        for (uint64_t i = 0; i < m; ++i) z += p[u0 + i] == 0;
        zeros[u0 / kRatioZeroUnit] = z;
    }
}
ZB_SIMD_CLONES(count_zeros_by_unit)

// The codes [first, ...) as a delta source of the Lorenzo grid (zb_lorenzo_grid.h): each piece becomes deltas in the
// thread's cursor, escaped ones taken from the list by their rank. esc_start[u] is the number of escapes before
// index first + u * kRatioZeroUnit (units counted from `first`, whatever its alignment), so a piece without escapes
// in its units needs no look at them.
struct RatioCodeTiles {
    const uint16_t *c16;         // the code of index first + i at c16[i]
    uint64_t first;
    const int32_t *escapes;
    const uint64_t *esc_start;
    int32_t radius;

    struct Cursor {
        alignas(64) uint32_t d[kTileCodes];
    };
    static constexpr uint64_t kUnit = kTileCodes;
    static constexpr uint64_t U = kRatioZeroUnit;

    template <class F> void pieces(Cursor &c, uint64_t begin, uint64_t end, F f) const {
        while (begin < end) {
            const uint64_t t0 = begin / kTileCodes * kTileCodes;
            const uint64_t m = std::min(end, t0 + kTileCodes) - begin;
            const uint16_t *code = c16 + (begin - first);
            const uint64_t u0 = (begin - first) / U, u1 = div_up(begin + m - first, U);
            if (esc_start[u1] == esc_start[u0]) {   // the common case: a loop that vectorizes
                for (uint64_t j = 0; j < m; ++j) c.d[j] = (uint32_t)((int32_t)code[j] - radius);
            } else {
                uint64_t e = esc_start[u0];
                for (uint64_t i = u0 * U; i < begin - first; ++i) e += c16[i] == 0;
                for (uint64_t j = 0; j < m; ++j)
                    c.d[j] = code[j] ? (uint32_t)((int32_t)code[j] - radius) : (uint32_t)escapes[e++];
            }
            f(c.d, begin, m);
            begin += m;
        }
    }
};

// Slabs of consecutive layers (one index of the slowest dim: a plane in rank 3, a row in rank 2) of up to 2^17
// codes each, at least two per thread, taken in turn by the threads. count 0: the shape or the thread count does not
// suit them (rank 1, layers of more than 2^17 values, slabs of fewer than 2^15 codes), and the caller decodes in two
// passes.
struct LorenzoRatioSlabs {
    uint64_t layers_per_slab = 0;
    uint64_t count = 0;
};
LorenzoRatioSlabs lorenzo_ratio_slabs(const Shape &s, int nt);

// Decodes the ratio stream opened in `dec` (n = s.n codes, Lorenzo predictor, one segment) and inverts the Lorenzo
// prediction into out, slab by slab: a thread decodes a slab's sub-blocks into its own buffer, checks its escapes
// against the list, sums its layers' deltas and hands the running sum of the layers over to the next slab, then
// writes the slab's values, all from codes in its cache. Values equal the two-pass decoder's (integer sums do not
// depend on the grouping). The stream's errors as the two-pass decoder reports them: a sub-block that does not
// decode, more or fewer escaped codes than escapes.
template <typename T>
zb_status lorenzo_ratio_decode_slabs(const Shape &s, const LorenzoRatioSlabs &plan, double eb, RatioBlockDecoder &dec,
                                     int32_t radius, const int32_t *escapes, uint64_t nescapes, T *out, int nt,
                                     std::string &msg);

}  // namespace zb
