// Instantiates the v2-layout pipelines (interp_gpu.cuh) for float.
#include "interp_gpu.cuh"

namespace zb {
namespace gpu {
template size_t v2_encode<float>(Context &, const zb_params &, const Shape &, const float *, const float *,
                                 const StreamTarget &, cudaStream_t, KernelTimer &);
template zb_params choose_on_device<float>(Context &, const zb_params &, const Shape &, const float *, cudaStream_t);
template void v2_decode<float>(Context &, const Header &, const uint8_t *, bool, void *, bool, bool, cudaStream_t,
                               KernelTimer &);
}  // namespace gpu
}  // namespace zb
