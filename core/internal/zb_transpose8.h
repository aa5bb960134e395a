// The 8x8 bit transpose behind the bitshuffle of code tiles (docs/FORMAT.md section 5), one copy for the CPU and
// the CUDA kernels.
#pragma once
#include <cstdint>
#include "zb_hd.h"

namespace zb {

// One step of the transposes below: swaps the bits of x selected by mask m with those s places above them.
template <typename U> ZB_HD U swap_bits(U x, int s, U m) {
    const U t = (x ^ (x >> s)) & m;
    return x ^ t ^ (t << s);
}

// Transposes an 8x8 bit matrix held in a uint64 (byte r = row r, bit c = column c): afterwards bit c of byte r holds
// what was bit r of byte c. It is its own inverse.
ZB_HD uint64_t transpose8x8(uint64_t x) {
    x = swap_bits<uint64_t>(x, 7, 0x00AA00AA00AA00AAull);
    x = swap_bits<uint64_t>(x, 14, 0x0000CCCC0000CCCCull);
    return swap_bits<uint64_t>(x, 28, 0x00000000F0F0F0F0ull);
}

// The same transpose with the matrix as two 32-bit halves (lo: rows 0-3, hi: rows 4-7), for the GPU, where each
// 64-bit shift or mask of the form above is two instructions: the first two steps stay inside a half, the third
// swaps the off-diagonal 4x4 blocks between them.
ZB_HD void transpose8x8_halves(uint32_t &lo, uint32_t &hi) {
    lo = swap_bits<uint32_t>(swap_bits<uint32_t>(lo, 7, 0x00AA00AAu), 14, 0x0000CCCCu);
    hi = swap_bits<uint32_t>(swap_bits<uint32_t>(hi, 7, 0x00AA00AAu), 14, 0x0000CCCCu);
    const uint32_t t = (lo ^ (hi << 4)) & 0xF0F0F0F0u;
    lo ^= t;
    hi ^= t >> 4;
}

}  // namespace zb
