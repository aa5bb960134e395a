// The 8x8 bit transpose behind the bitshuffle of code tiles (docs/FORMAT.md section 5), one copy for the CPU and
// the CUDA kernels.
#pragma once
#include <cstdint>
#include "zb_hd.h"

namespace zb {

// Transposes an 8x8 bit matrix held in a uint64 (byte r = row r, bit c = column c): afterwards bit c of byte r holds
// what was bit r of byte c. It is its own inverse.
ZB_HD uint64_t transpose8x8(uint64_t x) {
    uint64_t t;
    t = (x ^ (x >> 7)) & 0x00AA00AA00AA00AAull;
    x = x ^ t ^ (t << 7);
    t = (x ^ (x >> 14)) & 0x0000CCCC0000CCCCull;
    x = x ^ t ^ (t << 14);
    t = (x ^ (x >> 28)) & 0x00000000F0F0F0F0ull;
    x = x ^ t ^ (t << 28);
    return x;
}

// The same transpose with the matrix as two 32-bit halves (lo: rows 0-3, hi: rows 4-7), for the GPU, where each
// 64-bit shift or mask of the form above is two instructions: the first two steps stay inside a half, the third
// swaps the off-diagonal 4x4 blocks between them.
ZB_HD void transpose8x8_halves(uint32_t &lo, uint32_t &hi) {
    uint32_t t;
    t = (lo ^ (lo >> 7)) & 0x00AA00AAu;
    lo = lo ^ t ^ (t << 7);
    t = (hi ^ (hi >> 7)) & 0x00AA00AAu;
    hi = hi ^ t ^ (t << 7);
    t = (lo ^ (lo >> 14)) & 0x0000CCCCu;
    lo = lo ^ t ^ (t << 14);
    t = (hi ^ (hi >> 14)) & 0x0000CCCCu;
    hi = hi ^ t ^ (t << 14);
    t = (lo ^ (hi << 4)) & 0xF0F0F0F0u;
    lo ^= t;
    hi ^= t >> 4;
}

}  // namespace zb
