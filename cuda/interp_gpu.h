// The interp pipeline (interp predictor + fast or ratio encoder, format v3) on the GPU: entry points for gpu_ops.cu.
// Kernels and drivers are in interp_gpu.cuh, instantiated per value type in interp_f32.cu / interp_f64.cu.
#pragma once
#include "gpu_internal.h"

namespace zb {
namespace gpu {

// Compresses like encode() (same arguments), but always with the interp predictor, and the ratio encoder when
// p.encoder is ZB_ENC_RATIO (else the fast one): writes the same bytes as zb::cpu_compress_v2(p, kPredInterp, enc,
// ...). The tuning (zb::interp_tune) runs on the host:
// from h_x when the caller has a host copy, else from a copy of the device array.
template <typename T>
size_t interp_encode(Context &c, const zb_params &p, const Shape &shape, const T *d_x, const T *h_x,
                     const StreamTarget &out, cudaStream_t s, KernelTimer &timer);

// Decodes a validated interp stream, format v2 or v3, either encoder (arguments as decode()). Throws Failure(ZB_ERR_CORRUPT) on
// inconsistent data, Failure(ZB_ERR_UNSUPPORTED) for another v2 pipeline.
template <typename T>
void interp_decode(Context &c, const Header &h, const uint8_t *src_payload, bool src_on_device, void *dst,
                   bool dst_on_device, bool verify_crc, cudaStream_t s, KernelTimer &timer);

// True for the v2-layout pipelines this backend runs (the interp predictor with either encoder).
inline bool gpu_runs_v2(uint8_t predictor, uint8_t encoder) {
    return predictor == kPredInterp && (encoder == kEncFast || encoder == kEncRatio);
}

}  // namespace gpu
}  // namespace zb
