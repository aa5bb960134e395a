#include <omp.h>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include "zb_cpu.h"

namespace zb {

int resolve_threads(int requested, uint64_t n) {
    if (requested > 0) return requested;
    if (const char *e = std::getenv("ZBOUND_THREADS")) {
        const int v = std::atoi(e);
        if (v > 0) return v;
    }
    const int cores = omp_get_max_threads() > 0 ? omp_get_max_threads() : 1;
    const uint64_t useful = n / kValuesPerThread;
    return useful < 1 ? 1 : (useful < (uint64_t)cores ? (int)useful : cores);
}

void parallel_copy(void *dst, const void *src, size_t bytes, int nt) {
    constexpr size_t kPiece = size_t(1) << 20;
    const int64_t pieces = (int64_t)((bytes + kPiece - 1) / kPiece);
#pragma omp parallel for num_threads(nt) schedule(static) if (pieces > 1)
    for (int64_t k = 0; k < pieces; ++k) {
        const size_t off = (size_t)k * kPiece;
        std::memcpy(static_cast<uint8_t *>(dst) + off, static_cast<const uint8_t *>(src) + off,
                    std::min(kPiece, bytes - off));
    }
}

}  // namespace zb
