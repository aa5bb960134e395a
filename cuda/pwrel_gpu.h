// The point-wise relative mode (format v5, docs/FORMAT.md section 12) on the GPU: the same bytes as
// core/src/pwrel.cpp. Entry points for gpu_ops.cu; kernels and drivers in pwrel_gpu.cu.
#pragma once
#include "gpu_internal.h"

namespace zb {
namespace gpu {

// Compresses n values (p.mode == ZB_MODE_PW_REL) into a version-5 stream (or raw passthrough) at `out`. d_x: the
// values in device memory, or nullptr when only the host copy h_x exists (host API: uploaded first). The inner
// stream's pipeline: with choose_on_host core's choose_pipeline over the log magnitudes (its sample points copied
// from the device), as zb_compress's CPU path (both APIs pass true); else resolve_pipeline. No full-size copy to
// the host: the interp tuning gathers its sample points on the device too. Returns the stream length; adds the
// kernel time to *kernel_seconds.
size_t pwrel_encode(Context &c, const zb_params &p, zb_dtype dtype, const Shape &shape, const void *d_x,
                    const void *h_x, const StreamTarget &out, bool choose_on_host, cudaStream_t s,
                    double *kernel_seconds);

// Decodes a version-5 stream whose header h was parsed by read_header (on the host API also with its payload
// checksum: verify_crc false; the device API checks it here). `stream` is the whole stream (header first), in
// device or host memory; dst (n values) likewise. Throws Failure(ZB_ERR_CORRUPT) on inconsistent data.
void pwrel_decode(Context &c, const Header &h, const uint8_t *stream, bool src_on_device, void *dst,
                  bool dst_on_device, bool verify_crc, cudaStream_t s, double *kernel_seconds);

}  // namespace gpu
}  // namespace zb
