// CPU-only build: there is no CUDA backend.
#include "zb_gpu_ops.h"

namespace zb {
const GpuOps *gpu_ops() { return nullptr; }
}  // namespace zb
