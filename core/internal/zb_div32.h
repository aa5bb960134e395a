// Unsigned 32-bit division by a divisor fixed in advance, as a multiply-high and two shifts (Granlund and
// Montgomery, "Division by invariant integers using multiplication", 1994, figure 4.1). The GPU kernels divide
// indices by the array's dims with it (FastDiv, cuda/gpu_device.cuh), where an integer divide is a long software
// sequence and a double-precision estimate needs conversions that issue at a quarter rate.
#pragma once
#include <cstdint>
#include "zb_hd.h"

namespace zb {

struct Div32 {
    uint32_t magic = 1, shift1 = 0, shift2 = 0;   // divisor 1 by default

    // For 1 <= d < 2^32 (0 gives the divisor 1's numbers rather than a fault).
    static Div32 make(uint64_t d) {
        Div32 m;
        if (d < 2) return m;
        uint32_t l = 0;  // ceil(log2(d))
        while ((uint64_t(1) << l) < d) ++l;
        // 2^32 * (2^l - d) < 2^64 because 2^l - d < 2^(l-1) <= 2^31.
        m.magic = (uint32_t)(((uint64_t(1) << 32) * ((uint64_t(1) << l) - d)) / d + 1);
        m.shift1 = l < 1 ? l : 1;
        m.shift2 = l < 1 ? 0 : l - 1;
        return m;
    }

    // a / d for every a < 2^32.
    ZB_HD uint32_t div(uint32_t a) const {
#if defined(__CUDA_ARCH__)
        const uint32_t t = __umulhi(magic, a);
#else
        const uint32_t t = (uint32_t)(((uint64_t)magic * a) >> 32);
#endif
        return (t + ((a - t) >> shift1)) >> shift2;
    }
};

}  // namespace zb
