// Instantiates the interp pipeline (interp_gpu.cuh) for float.
#include "interp_gpu.cuh"

namespace zb {
namespace gpu {
template size_t interp_encode<float>(Context &, const zb_params &, const Shape &, const float *, const float *,
                                   const StreamTarget &, cudaStream_t, KernelTimer &);
template void interp_decode<float>(Context &, const Header &, const uint8_t *, bool, void *, bool, bool, cudaStream_t,
                                 KernelTimer &);
}  // namespace gpu
}  // namespace zb
