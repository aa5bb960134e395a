/*
 * zbound — error-bounded lossy compression of floating-point arrays (CPU and NVIDIA GPU).
 *
 * The whole public C API. A compressed "stream" is self-describing (docs/FORMAT.md): decoding needs only its bytes.
 *
 *   zb_params p = zb_params_default();
 *   p.mode = ZB_MODE_REL; p.bound = 1e-3;
 *   size_t cap = zb_compress_bound(ZB_F32, n), len;
 *   zb_status s = zb_compress(&p, ZB_F32, data, 3, dims, buf, cap, &len, NULL);
 *   if (s != ZB_OK) fprintf(stderr, "%s\n", zb_last_error());
 *   s = zb_decompress(buf, len, out, n * sizeof(float), ZB_BACKEND_AUTO, NULL);
 *
 * Guarantee: for every finite value x that is not the fill value, |x - x'| <= the absolute bound recorded in the
 * stream (PW_REL: <= bound * |x|); NaN (with payload), +-Inf, -0.0 and the fill value come back bit for bit.
 *
 * All functions are thread-safe and reentrant; error details are kept per thread (zb_last_error).
 */
#ifndef ZBOUND_H
#define ZBOUND_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define ZB_API __declspec(dllexport)
#else
#define ZB_API __attribute__((visibility("default")))
#endif

/** Version of the library and of the newest stream format it writes. */
#define ZBOUND_VERSION_MAJOR 0
#define ZBOUND_VERSION_MINOR 1
#define ZBOUND_VERSION_PATCH 0
#define ZBOUND_FORMAT_VERSION 6

/** Status codes. ZB_OK is 0; every other value is an error and zb_last_error() says why. */
typedef enum zb_status {
    ZB_OK = 0,
    ZB_ERR_INVALID_ARG = 1,     /**< a parameter is out of range (bound, rank, dims, null pointer) */
    ZB_ERR_DTYPE = 2,           /**< unsupported data type */
    ZB_ERR_BUFFER_TOO_SMALL = 3,/**< output capacity too small (see zb_compress_bound / zb_stream_info) */
    ZB_ERR_CORRUPT = 4,         /**< the stream is not a valid zbound stream (bad magic, field, checksum, count) */
    ZB_ERR_TRUNCATED = 5,       /**< the stream is shorter than its header says */
    ZB_ERR_VERSION = 6,         /**< the stream's format version is newer than this library */
    ZB_ERR_NOMEM = 7,           /**< host memory allocation failed */
    ZB_ERR_GPU = 8,             /**< GPU failure where the caller required the GPU (backend gpu, device API) */
    ZB_ERR_UNSUPPORTED = 9,     /**< feature not available in this build or format version */
    ZB_ERR_INTERNAL = 10        /**< a bug: please report with the message */
} zb_status;

typedef enum zb_dtype { ZB_F32 = 1, ZB_F64 = 2 } zb_dtype;

/** Error-bound modes. ABS: |x - x'| <= bound. REL: bound * (max - min) over the finite, non-fill values of the
 *  array given to one call (for HDF5 that is one chunk). PW_REL (point-wise relative): |x - x'| <= bound * |x| for
 *  every finite non-fill value, so zeros come back exactly and signs are kept (format v5; host buffers only). */
typedef enum zb_mode { ZB_MODE_ABS = 0, ZB_MODE_REL = 1, ZB_MODE_PW_REL = 2 } zb_mode;

typedef enum zb_predictor { ZB_PRED_AUTO = 0, ZB_PRED_LORENZO = 1, ZB_PRED_INTERP = 2 } zb_predictor;
typedef enum zb_encoder { ZB_ENC_AUTO = 0, ZB_ENC_FAST = 1, ZB_ENC_RATIO = 2 } zb_encoder;

/** Where the work runs. AUTO: the GPU when one works and the array is large enough to pay for the transfer,
 *  else the CPU (the environment variable ZBOUND_BACKEND=auto|cpu|gpu overrides AUTO). GPU: the GPU or an error. */
typedef enum zb_backend { ZB_BACKEND_AUTO = 0, ZB_BACKEND_CPU = 1, ZB_BACKEND_GPU = 2 } zb_backend;

/** Compression parameters. Always start from zb_params_default(). */
typedef struct zb_params {
    zb_mode mode;           /**< default ZB_MODE_REL */
    double bound;           /**< default 1e-3; must be finite and >= 0 (0 = lossless) */
    zb_predictor predictor; /**< default AUTO (v1: lorenzo) */
    zb_encoder encoder;     /**< default AUTO (v1: fast) */
    zb_backend backend;     /**< default AUTO */
    int has_fill;           /**< non-zero: values bit-equal to fill_bits are kept exactly and ignored by REL */
    uint64_t fill_bits;     /**< the fill value's bit pattern (f32 in the low 32 bits) */
    int threads;            /**< CPU threads, 0 = ZBOUND_THREADS or all cores */
} zb_params;

/** Timings and choices of one call (optional output). On the GPU the kernel time is measured only for callers that
 *  pass one (the CUDA events cost host time: a few microseconds per call, visible on chunks of a few MB). */
typedef struct zb_run_stats {
    zb_backend backend_used; /**< ZB_BACKEND_CPU or ZB_BACKEND_GPU */
    double kernel_seconds;   /**< GPU: sum of kernel time measured with CUDA events; CPU: compute time */
    double total_seconds;    /**< call to return, including transfers */
    size_t bytes_in, bytes_out;
} zb_run_stats;

/** Description of a stream, from its header alone. */
typedef struct zb_stream_info {
    int format_version;
    zb_dtype dtype;
    int rank;                /**< after dropping unit dims and folding to at most 3 */
    uint64_t dims[3];
    uint64_t n;              /**< number of values */
    size_t decompressed_bytes;
    size_t stream_bytes;     /**< header + payload */
    zb_mode mode;
    double bound;            /**< as the user gave it */
    double abs_bound;        /**< derived absolute bound (0 = lossless); PW_REL: the bound on the base-2 log magnitudes */
    zb_predictor predictor;  /**< 0 for raw passthrough */
    zb_encoder encoder;      /**< 0 for raw passthrough */
    int raw;                 /**< 1 if stored raw (compression did not pay) */
    uint64_t escapes, exceptions, exception_runs, nonzero_code_blocks;
    /** Ratio encoder only (0 otherwise): its decode metadata (sub-block offsets and lengths) and its payload (the
     *  Huffman bitstream after the zero-block pass, flags included). The metadata overhead factor f of the stream is
     *  ratio_metadata_bytes / ratio_payload_bytes. */
    uint64_t ratio_metadata_bytes, ratio_payload_bytes;
} zb_stream_info;

/** Defaults: REL 1e-3, auto predictor/encoder/backend, no fill value, default threads. */
ZB_API zb_params zb_params_default(void);

/** Upper bound of the stream size for n values of dtype (never 0 for a valid dtype). */
ZB_API size_t zb_compress_bound(zb_dtype dtype, size_t n);

/** Compress a host array of dtype with `rank` dims (C order, slowest first). dims may contain unit dims;
 *  rank 0 means a scalar. Writes at most dst_capacity bytes and sets *dst_len. stats may be NULL. */
ZB_API zb_status zb_compress(const zb_params *params, zb_dtype dtype, const void *src, int rank,
                             const size_t *dims, void *dst, size_t dst_capacity, size_t *dst_len,
                             zb_run_stats *stats);

/** Read a stream's header (validates the header checksum, not the payload). */
ZB_API zb_status zb_stream_info_get(const void *src, size_t src_len, zb_stream_info *info);

/** Decompress a stream into a host buffer of at least info.decompressed_bytes bytes, on ZBOUND_THREADS or all
 *  cores when it decodes on the CPU (zb_decompress_threads(..., 0, ...)). */
ZB_API zb_status zb_decompress(const void *src, size_t src_len, void *dst, size_t dst_capacity,
                               zb_backend backend, zb_run_stats *stats);

/** zb_decompress on `threads` CPU threads (0: ZBOUND_THREADS or all cores, as zb_params.threads; < 0 is
 *  ZB_ERR_INVALID_ARG). The values written do not depend on it. Applications that decode many chunks at once
 *  (one chunk per thread of their own) pass 1, so that the calls do not each start a team of every core. */
ZB_API zb_status zb_decompress_threads(const void *src, size_t src_len, void *dst, size_t dst_capacity,
                                       zb_backend backend, int threads, zb_run_stats *stats);

/* ---- device-pointer API (needs a CUDA build and a working GPU, else ZB_ERR_UNSUPPORTED / ZB_ERR_GPU) ---- */

/** Compress a device array into a device buffer, on `cuda_stream` (a cudaStream_t, or NULL for the default
 *  stream). Returns when the result is complete. dst_capacity should be zb_compress_bound(). Every mode, PW_REL
 *  included; AUTO predictor / encoder choose like zb_compress (from a sample of the device array), so the bytes are
 *  zb_compress's for the same values and parameters. A call that repeats one before it (the same buffers, shape and
 *  parameters; Lorenzo + fast, up to 256 MiB) runs as a CUDA graph, much faster for chunk-sized arrays
 *  (ZBOUND_GPU_GRAPHS=0 turns that off); stats (kernel timing) keep a call out of the graph. */
ZB_API zb_status zb_compress_device(const zb_params *params, zb_dtype dtype, const void *d_src, int rank,
                                    const size_t *dims, void *d_dst, size_t dst_capacity, size_t *dst_len,
                                    void *cuda_stream, zb_run_stats *stats);

/** Decompress a stream held in device memory into a device buffer, on `cuda_stream`. A call that repeats one before
 *  it on the same buffers (Lorenzo + fast streams, up to 256 MiB of values) runs as a CUDA graph, and where the
 *  lengths repeat as well it is decoded with the previous stream's header while its own is read, the result kept
 *  only where the two headers are identical (else decoded again): much faster for chunk-sized streams
 *  (ZBOUND_GPU_GRAPHS=0 turns both off; stats keep a call out of them). On failure d_dst may be partly written. */
ZB_API zb_status zb_decompress_device(const void *d_src, size_t src_len, void *d_dst, size_t dst_capacity,
                                      void *cuda_stream, zb_run_stats *stats);

/** Compress `count` device arrays of one dtype and shape (the chunks of a dataset) in one call: chunk i is read
 *  from d_srcs[i] and its stream written to d_dsts[i] (room for dst_capacity bytes each, zb_compress_bound), its
 *  length to dst_lens[i]. The chunks run several at a time, each on a CUDA stream of the library's own (up to
 *  ZBOUND_GPU_STREAMS at once, default 8), which hides the per-chunk launches and synchronizations that dominate
 *  chunks of a few MB. Work queued on `cuda_stream` (or the default stream when NULL) before the call is finished
 *  before any chunk is read; every stream is complete on return. Chunk i's bytes are zb_compress_device's for that
 *  chunk. `statuses` (may be NULL) receives each chunk's status; the call returns ZB_OK when every chunk succeeded,
 *  else the first failed chunk's status, and zb_last_error() names that chunk (a call refused before any chunk
 *  runs, for bad arguments or no GPU, leaves `statuses` as it was). `stats` (may be NULL): kernel time
 *  and bytes summed over the chunks, total_seconds the wall time of the call. */
ZB_API zb_status zb_compress_device_batch(const zb_params *params, zb_dtype dtype, int rank, const size_t *dims,
                                          size_t count, const void *const *d_srcs, void *const *d_dsts,
                                          size_t dst_capacity, size_t *dst_lens, zb_status *statuses,
                                          void *cuda_stream, zb_run_stats *stats);

/** Decompress `count` streams held in device memory (d_srcs[i], src_lens[i] bytes) into device buffers d_dsts[i]
 *  of dst_capacity bytes each, several at a time as zb_compress_device_batch does; statuses, return value, stream
 *  order and stats as there. */
ZB_API zb_status zb_decompress_device_batch(size_t count, const void *const *d_srcs, const size_t *src_lens,
                                            void *const *d_dsts, size_t dst_capacity, zb_status *statuses,
                                            void *cuda_stream, zb_run_stats *stats);

/** 1 if this build has the CUDA backend and a GPU can be used now, else 0 (never fails). */
ZB_API int zb_gpu_available(void);

/* ---- errors ---- */

/** Short fixed text for a status code. */
ZB_API const char *zb_status_string(zb_status status);

/** Detailed message of the last failed call on this thread ("" if none). */
ZB_API const char *zb_last_error(void);

/** Sets this thread's zb_last_error() message. For layers built on zbound that report through the same channel
 *  (the HDF5 filter's cd_values parser); applications do not need it. NULL clears the message. */
ZB_API void zb_set_last_error(const char *msg);

#ifdef __cplusplus
}
#endif

#endif /* ZBOUND_H */
