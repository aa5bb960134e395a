#include <omp.h>
#include <cstdlib>
#include "zb_cpu.h"

namespace zb {

int resolve_threads(int requested) {
    if (requested > 0) return requested;
    if (const char *e = std::getenv("ZBOUND_THREADS")) {
        const int v = std::atoi(e);
        if (v > 0) return v;
    }
    const int m = omp_get_max_threads();
    return m > 0 ? m : 1;
}

}  // namespace zb
