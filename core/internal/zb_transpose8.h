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

}  // namespace zb
