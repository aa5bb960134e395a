// The encoders' 16-bit codes (docs/FORMAT.md sections 5 and 8) of a predictor's integer codes, and back. The Lorenzo
// and interp predictors write them directly, the decoders read them, so that no array of int32 codes is stored.
#pragma once
#include <cstdint>
#include "zb_format.h"
#include "zb_interp_cpu.h"
#include "zb_quant.h"

namespace zb {

// The code radius of an encoder: codes lie in (-radius, radius).
inline int32_t encoder_radius(uint8_t encoder) { return encoder == kEncRatio ? kRatioRadius : kFastRadius; }

// The 16-bit code of a delta d with |d| < radius. fast: sign-magnitude, escaped kEscapeCode; ratio: the symbol
// d + radius, escaped 0.
template <bool Ratio> struct Code16 {
    int32_t radius;
    static constexpr uint16_t kEscaped = Ratio ? 0 : kEscapeCode;
    uint16_t operator()(int32_t d) const { return Ratio ? (uint16_t)(d + radius) : delta_to_code(d); }
};

// Code16's inverse, kEscapedCode for an escaped code. A ratio symbol outside the alphabet [1, 2 radius), which the
// ratio decoder never yields, reads as escaped too: decoders that reject escapes where none may be reject it.
struct FastCode32 {
    int32_t operator()(uint16_t c) const { return c == kEscapeCode ? kEscapedCode : code_to_delta(c); }
};
struct RatioCode32 {
    int32_t radius;
    // Regular for c in [1, 2 radius): one unsigned compare (c - 1 wraps for 0). The same test written with || kept
    // GCC from vectorizing the decoder's widen_row (interp_cpu.cpp): it ran one branchy code at a time.
    int32_t operator()(uint16_t c) const {
        return (uint32_t)c - 1u < (uint32_t)(2 * radius - 1) ? (int32_t)c - radius : kEscapedCode;
    }
};

}  // namespace zb
