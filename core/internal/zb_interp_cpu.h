// The interp predictor's passes on the CPU (core/src/interp_cpu.cpp).
#pragma once
#include <cstdint>
#include <string>
#include <vector>
#include "zb_interp.h"
#include "zbound.h"

namespace zb {

// Marks a code whose value is in the escape list (anchors only: their integer Lorenzo deltas must be exact).
constexpr int32_t kEscapedCode = INT32_MIN;

// Predicts every value: c16[i], i in `order`, is the code of value i in the 16-bit form of `encoder` (zb_codes16.h:
// kEncRatio: code + kRatioRadius, escaped 0; kEncFast: sign-magnitude, escaped kEscapeCode), codes in
// (-radius, radius) of that encoder, 0 for exceptions; escaped are anchor deltas out of range, whose values go to
// `escapes` in lattice order. exc[i] = 1 for exceptions. `recon` is scratch of n values.
template <typename T>
void interp_encode_cpu(const T *x, const Shape &s, const InterpParams &ip, InterpCodeOrder order, double eb,
                       uint8_t encoder, int has_fill, uint64_t fill_bits, uint16_t *c16, uint8_t *exc, T *recon,
                       std::vector<int32_t> &escapes, int nt);

// Inverse: `out` holds the exception values and mask[i] = 1 marks them (decode_exceptions did both; mask may be null
// when there are none); the other values are reconstructed from the 16-bit codes of `encoder`. Validates the escapes: escaped codes only at anchors,
// as many as the escape list holds (the 16-bit forms hold no other code out of range).
template <typename T>
zb_status interp_decode_cpu(const Shape &s, const InterpParams &ip, InterpCodeOrder order, uint8_t encoder,
                            const uint16_t *c16, const int32_t *escapes, uint64_t nescapes, const uint8_t *mask,
                            T *out, int nt, std::string &msg);

}  // namespace zb
