// Instantiates the GPU encoder for float values (kernel bodies in encode.cuh).
#include "encode.cuh"

namespace zb {
namespace gpu {
template size_t encode<float>(Context &, const zb_params &, const Shape &, const float *, const float *,
                              const StreamTarget &, cudaStream_t, KernelTimer &);
}  // namespace gpu
}  // namespace zb
