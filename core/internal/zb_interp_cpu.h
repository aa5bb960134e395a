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

// Predicts every value: codes[i] in (-radius, radius), i in `order` (0 for exceptions, kEscapedCode for escaped
// anchor deltas,
// whose values go to `escapes` in index order), exc[i] = 1 for exceptions. `recon` is scratch of n values.
template <typename T>
void interp_encode_cpu(const T *x, const Shape &s, const InterpParams &ip, InterpCodeOrder order, double eb,
                       int32_t radius, int has_fill, uint64_t fill_bits, int32_t *codes, uint8_t *exc, T *recon,
                       std::vector<int32_t> &escapes, int nt);

// Inverse: `out` holds the exception values and mask[i] = 1 marks them (decode_exceptions did both); the other
// values are reconstructed from the codes. Validates escapes and code ranges: the codes outside (-radius, radius)
// must be the escaped anchors. `outside`, when not null, is their count as the caller knows it (the codes widened
// from an encoder's 16-bit codes: all in range but the escaped ones, which the widening counted); else the decoder
// counts them (a pass over the codes).
template <typename T>
zb_status interp_decode_cpu(const Shape &s, const InterpParams &ip, InterpCodeOrder order, int32_t radius,
                            const int32_t *codes, const int32_t *escapes, uint64_t nescapes, const uint8_t *mask,
                            T *out, int nt, std::string &msg, const uint64_t *outside = nullptr);

}  // namespace zb
