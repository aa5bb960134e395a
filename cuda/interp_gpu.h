// The format-v2-layout pipelines on the GPU (the interp predictor, format v3, and the whole-array Lorenzo predictor,
// format v2, each with the fast or the ratio encoder; v4 with run tokens): entry points for gpu_ops.cu. Kernels and
// drivers are in interp_gpu.cuh, instantiated per value type in interp_f32.cu / interp_f64.cu.
#pragma once
#include "gpu_internal.h"

namespace zb {
namespace gpu {

// Compresses like encode() (same arguments), with the predictor and encoder of p, which the caller resolved
// (p.predictor ZB_PRED_INTERP or ZB_PRED_LORENZO, p.encoder ZB_ENC_FAST or ZB_ENC_RATIO): writes the same bytes as
// zb::cpu_compress_v2(p, pred, enc, ...). The interp tuning (zb::interp_tune) runs on the host: from h_x when the
// caller has a host copy, else from its sample points gathered from the device array.
template <typename T>
size_t v2_encode(Context &c, const zb_params &p, const Shape &shape, const T *d_x, const T *h_x,
                 const StreamTarget &out, cudaStream_t s, KernelTimer &timer);

// predictor=auto / encoder=auto for a device array: the choice the host API makes (zb::choose_pipeline), from the
// sample points it reads, gathered from the device. A REL bound is first made absolute with the device range, as
// the host API does with the whole array. Returns p with an explicit predictor and encoder.
template <typename T>
zb_params choose_on_device(Context &c, const zb_params &p, const Shape &shape, const T *d_x, cudaStream_t s);

// Decodes a validated v2-layout stream (versions 2 to 4; arguments as decode()). Throws Failure(ZB_ERR_CORRUPT) on
// inconsistent data, Failure(ZB_ERR_UNSUPPORTED) for a stream gpu_runs_v2 refuses.
template <typename T>
void v2_decode(Context &c, const Header &h, const uint8_t *src_payload, bool src_on_device, void *dst,
               bool dst_on_device, bool verify_crc, cudaStream_t s, KernelTimer &timer);

// True for the v2-layout pipelines this backend runs: every one (Lorenzo or interp, fast or ratio).
inline bool gpu_runs_v2(uint8_t predictor, uint8_t encoder) {
    return (predictor == kPredLorenzo || predictor == kPredInterp) && (encoder == kEncFast || encoder == kEncRatio);
}

}  // namespace gpu
}  // namespace zb
