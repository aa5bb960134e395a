#include <omp.h>
#include <cstdlib>
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

}  // namespace zb
