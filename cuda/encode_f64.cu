// Instantiates the GPU encoder for double values (kernel bodies in encode.cuh).
#include "encode.cuh"

namespace zb {
namespace gpu {
template size_t encode<double>(Context &, const zb_params &, const Shape &, const double *, const double *,
                              const StreamTarget &, cudaStream_t, KernelTimer &);
}  // namespace gpu
}  // namespace zb
