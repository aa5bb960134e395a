// Instantiates the GPU decoder for double values (kernel bodies in decode.cuh).
#include "decode.cuh"

namespace zb {
namespace gpu {
template void decode<double>(Context &, const Header &, const uint8_t *, bool, void *, bool, bool, cudaStream_t,
                            KernelTimer &, const uint8_t *);
}  // namespace gpu
}  // namespace zb
