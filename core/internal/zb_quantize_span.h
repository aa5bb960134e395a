// quantize() (zb_quant.h) over a span of values: the plain loop, which the compiler vectorizes for the baseline
// instruction set, and an AVX2 kernel (core/src/quantize_avx2.cpp) with the same q and exception bytes.
#pragma once
#include <cstdint>
#include "zb_quant.h"
#include "zb_simd.h"

namespace zb {

// q[i] (0 for exceptions) and exc[i] (1 for exceptions) for i in [i0, i1). The pointers are restrict-qualified:
// stores through the uint8_t mask may alias anything and would otherwise make the compiler reload them for every
// value, which keeps the loop scalar.
template <typename T>
ZB_ALWAYS_INLINE void quantize_span(const T *__restrict x, uint64_t i0, uint64_t i1, QuantParams qp,
                                    uint32_t *__restrict q, uint8_t *__restrict exc) {
    for (uint64_t i = i0; i < i1; ++i) {
        int32_t qi;
        exc[i] = quantize<T>(x[i], qp, qi) ? 0 : 1;
        q[i] = (uint32_t)qi;
    }
}

#if ZB_SIMD_X86
// The same with AVX2 (call only when simd_level() >= kSimdAvx2).
void quantize_span_avx2(const float *x, uint64_t i0, uint64_t i1, QuantParams qp, uint32_t *q, uint8_t *exc);
void quantize_span_avx2(const double *x, uint64_t i0, uint64_t i1, QuantParams qp, uint32_t *q, uint8_t *exc);
#endif

}  // namespace zb
