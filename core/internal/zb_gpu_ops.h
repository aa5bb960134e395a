// The interface between core/ and the CUDA backend in cuda/. core/ calls these through gpu_ops(); a CPU-only build
// links core/src/gpu_ops_none.cpp, which returns nullptr. Every function returns ZB_OK or an error with a message
// in `msg`; on any error from a host-API entry point the caller falls back to the CPU (unless backend == GPU).
#pragma once
#include <cstddef>
#include <string>
#include "zb_format.h"
#include "zbound.h"

namespace zb {

struct GpuOps {
    // True when a device can be used now (lazily initializes the context once per process).
    bool (*available)();
    // Compress host array `src` (shape already folded) into a complete stream in host memory dst.
    zb_status (*compress_host)(const zb_params &p, zb_dtype dtype, const void *src, const Shape &shape,
                               void *dst, size_t dst_capacity, size_t *dst_len, zb_run_stats *stats,
                               std::string &msg);
    // Decompress a validated stream (header already parsed into h) from host memory into host memory.
    zb_status (*decompress_host)(const Header &h, const uint8_t *src, void *dst, zb_run_stats *stats,
                                 std::string &msg);
    // Device-pointer variants; `stream` is a cudaStream_t.
    zb_status (*compress_device)(const zb_params &p, zb_dtype dtype, const void *d_src, const Shape &shape,
                                 void *d_dst, size_t dst_capacity, size_t *dst_len, void *stream,
                                 zb_run_stats *stats, std::string &msg);
    zb_status (*decompress_device)(const uint8_t *d_src, size_t src_len, void *d_dst, size_t dst_capacity,
                                   void *stream, zb_run_stats *stats, std::string &msg);
    // Batches of device arrays of one dtype and shape (zb_compress_device_batch / zb_decompress_device_batch):
    // chunk i as the single-array calls would do it, several chunks at once on the pool's streams.
    zb_status (*compress_device_batch)(const zb_params &p, zb_dtype dtype, const Shape &shape, size_t count,
                                       const void *const *d_srcs, void *const *d_dsts, size_t dst_capacity,
                                       size_t *dst_lens, zb_status *statuses, void *stream, zb_run_stats *stats,
                                       std::string &msg);
    zb_status (*decompress_device_batch)(size_t count, const void *const *d_srcs, const size_t *src_lens,
                                         void *const *d_dsts, size_t dst_capacity, zb_status *statuses, void *stream,
                                         zb_run_stats *stats, std::string &msg);
    // The point-wise relative mode (format v5) from and to host memory, transform and check on the device: the
    // same bytes as core's pwrel_compress (the inner pipeline chosen from the log magnitudes like zb_compress's
    // CPU path), and pwrel_decompress of a stream whose header (and payload checksum) read_header validated.
    // (compress_device and decompress_device take format v5 too.)
    zb_status (*pwrel_compress_host)(const zb_params &p, zb_dtype dtype, const void *src, const Shape &shape,
                                     void *dst, size_t dst_capacity, size_t *dst_len, zb_run_stats *stats,
                                     std::string &msg);
    zb_status (*pwrel_decompress_host)(const Header &h, const uint8_t *src, void *dst, zb_run_stats *stats,
                                       std::string &msg);
};

// nullptr when this build has no CUDA backend.
const GpuOps *gpu_ops();

// Shared rules used by both backends (derive_abs_bound, raw_stream_bytes, ...) are declared in zb_format.h.

}  // namespace zb
