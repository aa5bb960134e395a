// Instantiates the v2-layout pipelines (interp_gpu.cuh) for double.
#include "interp_gpu.cuh"

namespace zb {
namespace gpu {
template size_t v2_encode<double>(Context &, const zb_params &, const Shape &, const double *, const double *,
                                  const StreamTarget &, cudaStream_t, KernelTimer &);
template zb_params choose_on_device<double>(Context &, const zb_params &, const Shape &, const double *, cudaStream_t);
template void v2_decode<double>(Context &, const Header &, const uint8_t *, bool, void *, bool, bool, cudaStream_t,
                                KernelTimer &);
}  // namespace gpu
}  // namespace zb
