// The public C API: argument checks, backend choice (GPU with CPU fallback), error messages per thread.
// No exception crosses this boundary.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include "zb_cpu.h"
#include "zb_format.h"
#include "zb_gpu_ops.h"
#include "zb_pwrel.h"
#include "zb_ratio.h"
#include "zb_stage_clock.h"
#include "zbound.h"

namespace {

thread_local std::string t_last_error;

zb_status set_error(zb_status s, const std::string &msg) {
    t_last_error = msg;
    return s;
}

double now_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// With ZBOUND_LOG set, each distinct message is printed once per process on stderr.
void log_once(const std::string &msg) {
    static const bool enabled = std::getenv("ZBOUND_LOG") != nullptr;
    if (!enabled) return;
    static std::mutex mu;
    static std::set<std::string> seen;
    std::lock_guard<std::mutex> lock(mu);
    if (seen.insert(msg).second) std::fprintf(stderr, "zbound: %s\n", msg.c_str());
}

// AUTO resolves through ZBOUND_BACKEND (auto|cpu|gpu).
zb_backend resolve_backend(zb_backend requested) {
    if (requested != ZB_BACKEND_AUTO) return requested;
    if (const char *e = std::getenv("ZBOUND_BACKEND")) {
        if (!std::strcmp(e, "cpu")) return ZB_BACKEND_CPU;
        if (!std::strcmp(e, "gpu")) return ZB_BACKEND_GPU;
    }
    return ZB_BACKEND_AUTO;
}

// Below this many bytes AUTO stays on the CPU: the transfer would cost more than the GPU saves.
size_t gpu_min_bytes() {
    static const size_t v = [] {
        const char *e = std::getenv("ZBOUND_GPU_MIN_BYTES");
        return e ? (size_t)std::strtoull(e, nullptr, 10) : (size_t)(1u << 20);
    }();
    return v;
}

// AUTO decodes a Lorenzo + fast stream of at least kCpuFastDecodeMinBytes on the CPU when the call gets at least
// kCpuFastDecodeThreads threads: the GPU's host path is bound by the download of the values through pinned memory
// (64 MB on the device machine, H200 with 16 Xeon cores: 21.6-22.3 GB/s), while 16 threads decode there at 27-31
// GB/s. At 16 MB the two were even over two machine sessions (CPU 12.3 and 20-27 GB/s, GPU 20.9 and 13-19: the
// CPU's fixed costs per call weigh more), so smaller arrays stay on the GPU (bench/RESULTS.md, session 10). The
// values are the same either way (DESIGN invariant 4); the other pipelines decode faster on the GPU.
constexpr int kCpuFastDecodeThreads = 12;
constexpr size_t kCpuFastDecodeMinBytes = size_t(32) << 20;

// The GPU ops to use for a call, or nullptr for the CPU. Sets `required` when the caller insisted on the GPU.
const zb::GpuOps *choose_gpu(zb_backend requested, size_t bytes, bool &required) {
    const zb_backend b = resolve_backend(requested);
    required = b == ZB_BACKEND_GPU;
    if (b == ZB_BACKEND_CPU) return nullptr;
    if (b == ZB_BACKEND_AUTO && bytes < gpu_min_bytes()) return nullptr;
    const zb::GpuOps *ops = zb::gpu_ops();
    if (!ops) {
        if (!required) log_once("no CUDA backend in this build: using the CPU");
        return nullptr;
    }
    if (!ops->available()) {
        if (!required) log_once("no usable GPU: using the CPU");
        return nullptr;
    }
    return ops;
}

// C callers may pass any int in an enum-typed argument; reading such a value through the C++ enum type is
// undefined, so enums from the caller are read as their int representation before they are checked.
template <typename E> int as_int(const E &e) {
    static_assert(sizeof(E) == sizeof(int), "C enums are int-sized");
    int v;
    std::memcpy(&v, &e, sizeof v);
    return v;
}

zb_status check_params(const zb_params *p) {
    if (!p) return set_error(ZB_ERR_INVALID_ARG, "params is null");
    const int mode = as_int(p->mode), pred = as_int(p->predictor), enc = as_int(p->encoder),
              backend = as_int(p->backend);
    if (mode != ZB_MODE_ABS && mode != ZB_MODE_REL && mode != ZB_MODE_PW_REL)
        return set_error(ZB_ERR_INVALID_ARG, "unknown bound mode " + std::to_string(mode));
    if (!std::isfinite(p->bound) || p->bound < 0)
        return set_error(ZB_ERR_INVALID_ARG, "the bound must be finite and >= 0, got " + std::to_string(p->bound));
    if (pred != ZB_PRED_AUTO && pred != ZB_PRED_LORENZO && pred != ZB_PRED_INTERP)
        return set_error(ZB_ERR_INVALID_ARG, "unknown predictor " + std::to_string(pred));
    if (enc != ZB_ENC_AUTO && enc != ZB_ENC_FAST && enc != ZB_ENC_RATIO)
        return set_error(ZB_ERR_INVALID_ARG, "unknown encoder " + std::to_string(enc));
    if (backend != ZB_BACKEND_AUTO && backend != ZB_BACKEND_CPU && backend != ZB_BACKEND_GPU)
        return set_error(ZB_ERR_INVALID_ARG, "unknown backend " + std::to_string(backend));
    if (p->threads < 0) return set_error(ZB_ERR_INVALID_ARG, "threads must be >= 0");
    return ZB_OK;
}

size_t dtype_size(const zb_dtype &t) { return as_int(t) == ZB_F64 ? 8 : 4; }
bool dtype_ok(const zb_dtype &t) { return as_int(t) == ZB_F32 || as_int(t) == ZB_F64; }

template <typename F> zb_status guarded(F &&f) {
    try {
        return f();
    } catch (const std::bad_alloc &) {
        return set_error(ZB_ERR_NOMEM, "out of host memory");
    } catch (const std::exception &e) {
        return set_error(ZB_ERR_INTERNAL, std::string("internal error: ") + e.what());
    } catch (...) {
        return set_error(ZB_ERR_INTERNAL, "internal error");
    }
}

void fill_stats(zb_run_stats *st, zb_backend used, double kernel, double total, size_t in, size_t out) {
    if (!st) return;
    st->backend_used = used;
    st->kernel_seconds = kernel;
    st->total_seconds = total;
    st->bytes_in = in;
    st->bytes_out = out;
}

// The GPU's part of a call, given choose_gpu's answer: true with `result` set when that settles the call (the GPU
// succeeded; or it failed and was required, or failed with `final_error`, which the CPU would only repeat; or it
// was required and there is none); false to go on with the CPU (no GPU, or a GPU failure, logged once).
template <typename Run>
bool gpu_settles(const zb::GpuOps *gpu, bool required, zb_status final_error, const char *what, Run &&run,
                 zb_status &result) {
    if (!gpu) {
        if (required)
            result = set_error(ZB_ERR_GPU, "backend gpu requested but no usable GPU (CPU-only build, no device or "
                                           "no driver)");
        return required;
    }
    std::string msg;
    const zb_status s = run(msg);
    if (s == ZB_OK || required || s == final_error) {
        result = s == ZB_OK ? ZB_OK : set_error(s, msg);
        return true;
    }
    log_once(std::string("GPU ") + what + " failed, using the CPU: " + msg);
    return false;
}

// Compression with an ABS or REL bound, after the argument checks (also the inner stream of PW_REL).
zb_status compress_values(const zb_params *params, zb_dtype dtype, const void *src, const zb::Shape &shape,
                          void *dst, size_t dst_capacity, size_t *dst_len, zb_run_stats *stats) {
    const size_t in_bytes = (size_t)shape.n * dtype_size(dtype);
    const double t0 = now_seconds();
    std::string msg;
    bool required = false;
    const zb::GpuOps *gpu = choose_gpu(params->backend, in_bytes, required);
    const int nt = zb::resolve_threads(params->threads, shape.n);
    // The choice depends on the data and parameters only, never on the backend: the CPU and the GPU must
    // write the same bytes (DESIGN invariant 4). The GPU runs every pipeline; the one chosen here (predictor and
    // encoder auto included) is passed to it explicitly, so both backends write it.
    uint8_t pred, enc;
    zb::ValueRange range;   // the array's value range, when the choice computes it (REL bounds)
    zb::StageClock clock("compress");
    clock.set_threads(nt);
    // The choice on the team of the regions that follow, the GPU's staging copies where it runs the call (as in
    // decompress_stream; a chunk's sample keeps at most a few threads busy anyway): h5py, 16 MB chunks, predictor
    // and encoder auto, callbacks 3.7-3.9 -> 4.3-4.4 GB/s (NOTES 106).
    zb::choose_pipeline(*params, dtype, src, shape, false, gpu ? zb::staging_team() : nt, pred, enc, &range);
    clock.mark("choice");
    const bool v1 = zb::is_v1_pipeline(pred, enc);
    zb_params gp = *params;
    gp.predictor = pred == zb::kPredInterp ? ZB_PRED_INTERP : ZB_PRED_LORENZO;
    gp.encoder = enc == zb::kEncRatio ? ZB_ENC_RATIO : ZB_ENC_FAST;
    zb_status settled;
    if (gpu_settles(gpu, required, ZB_ERR_BUFFER_TOO_SMALL, "compression", [&](std::string &m) {
            return gpu->compress_host(gp, dtype, src, shape, dst, dst_capacity, dst_len, stats, m);
        }, settled)) {
        clock.mark("gpu");
        return settled;
    }
    uint8_t *out = static_cast<uint8_t *>(dst);
    const zb_status s = v1 ? zb::cpu_compress(*params, dtype, src, shape, out, dst_capacity, dst_len, nt, msg, &range)
                           : zb::cpu_compress_v2(*params, pred, enc, dtype, src, shape, out, dst_capacity,
                                                 dst_len, nt, msg, true, &range);
    if (s != ZB_OK) return set_error(s, msg);
    const double dt = now_seconds() - t0;
    fill_stats(stats, ZB_BACKEND_CPU, dt, dt, in_bytes, *dst_len);
    return ZB_OK;
}

zb::PwRelInnerCodec inner_codec(zb_backend backend, zb_dtype dtype, const zb::Shape &shape, zb_run_stats *stats,
                                bool decoding, int decode_threads);
void finish_pwrel_stats(zb_run_stats *st, double t0, size_t in, size_t out);

// Decompression after the argument checks (also of the inner stream of PW_REL, whose bytes the container's payload
// checksum already covers: verify_payload false).
zb_status decompress_stream(const uint8_t *stream, size_t src_len, void *dst, size_t dst_capacity,
                            zb_backend backend, int threads, zb_run_stats *stats, bool verify_payload = true) {
    const double t0 = now_seconds();
    zb::Header h;
    std::string msg;
    zb::StageClock clock("decompress");
    if (zb_status s = zb::read_header(stream, src_len, h, msg, false)) return set_error(s, msg);
    const int nt = zb::resolve_threads(threads, h.shape.n);
    const size_t out_bytes = (size_t)h.shape.n * h.value_bytes();
    bool required = false;
    const bool pw_rel = h.version == zb::kFormatVersionV5;
    const bool cpu_faster = resolve_backend(backend) == ZB_BACKEND_AUTO && !pw_rel &&
                            h.predictor == zb::kPredLorenzo && h.encoder == zb::kEncFast &&
                            nt >= kCpuFastDecodeThreads && out_bytes >= kCpuFastDecodeMinBytes;
    const zb::GpuOps *gpu = cpu_faster ? nullptr : choose_gpu(backend, out_bytes, required);
    // The checksum on the team of the parallel regions that follow (the decode's, or the staging copies' before a GPU
    // decode): libgomp restarts threads when a region's team is larger than the last one's (zb_cpu.h,
    // team_threads), and a count from the stream's size (7 for a 16 MB chunk at ratio 9, the staging copies 8)
    // cost 0.1-0.2 ms per chunk (NOTES 104).
    if (verify_payload)
        if (zb_status s = zb::check_payload(stream, h, msg, gpu ? zb::staging_team() : nt)) return set_error(s, msg);
    clock.mark("header");
    clock.set_threads(nt);
    if (dst_capacity < out_bytes)
        return set_error(ZB_ERR_BUFFER_TOO_SMALL, "destination holds " + std::to_string(dst_capacity) +
                                                      " bytes, the stream decodes to " +
                                                      std::to_string(out_bytes));
    // The GPU decodes every stream (raw passthrough is always version 1; version 5: the transform, the inner stream
    // and the exceptions on the device, cuda/pwrel_gpu.cu); the CPU is the reference and the fallback.
    zb_status settled;
    if (gpu_settles(gpu, required, ZB_ERR_CORRUPT, "decompression", [&](std::string &m) {
            return pw_rel ? gpu->pwrel_decompress_host(h, stream, dst, stats, m)
                          : gpu->decompress_host(h, stream, dst, stats, m);
        }, settled)) {
        clock.mark("gpu");
        return settled;
    }
    if (pw_rel) {
        if (stats) *stats = zb_run_stats{};
        const zb::PwRelInnerCodec inner = inner_codec(ZB_BACKEND_CPU, h.dtype, h.shape, stats, true, nt);
        if (zb_status s = zb::pwrel_decompress(h, stream, dst, nt, inner, msg)) return set_error(s, msg);
        finish_pwrel_stats(stats, t0, src_len, out_bytes);
        return ZB_OK;
    }
    const zb_status s = zb::fast_layout_version(h.version) ? zb::cpu_decompress(h, stream, dst, nt, msg)
                                                           : zb::cpu_decompress_v2(h, stream, dst, nt, msg);
    if (s != ZB_OK) return set_error(s, msg);
    const double dt = now_seconds() - t0;
    fill_stats(stats, ZB_BACKEND_CPU, dt, dt, src_len, out_bytes);
    return ZB_OK;
}

// Adds the kernel time of an inner call to the whole call's stats; the backend is the inner stream's encoder's
// (or decoder's, when decoding).
void add_inner_stats(zb_run_stats *st, const zb_run_stats &inner, bool set_backend) {
    if (!st) return;
    st->kernel_seconds += inner.kernel_seconds;
    if (set_backend) st->backend_used = inner.backend_used;
}

// The inner stream of a PW_REL call on the CPU path (the GPU path makes and reads it on the device). The stats
// report the inner encoder's backend when compressing (the check decodes too), the decoder's when decompressing.
// The inner stream decodes on decode_threads threads (the call's; compression takes its parameters' count).
zb::PwRelInnerCodec inner_codec(zb_backend backend, zb_dtype dtype, const zb::Shape &shape, zb_run_stats *stats,
                                bool decoding, int decode_threads) {
    zb::PwRelInnerCodec c;
    c.compress = [=](const zb_params &ip, const void *values, uint8_t *d, size_t cap, size_t *len) {
        zb_run_stats is{};
        zb_params q = ip;
        q.backend = backend;
        const zb_status s = compress_values(&q, dtype, values, shape, d, cap, len, &is);
        add_inner_stats(stats, is, true);
        return s;
    };
    c.decompress = [=](const uint8_t *stream, size_t len, void *values) {
        zb_run_stats is{};
        const zb_status s =
            decompress_stream(stream, len, values, (size_t)shape.n * dtype_size(dtype), backend, decode_threads, &is,
                              false);
        add_inner_stats(stats, is, decoding);
        return s;
    };
    return c;
}

void finish_pwrel_stats(zb_run_stats *st, double t0, size_t in, size_t out) {
    if (!st) return;
    if (st->backend_used == ZB_BACKEND_AUTO) st->backend_used = ZB_BACKEND_CPU;  // stored raw by the host alone
    st->total_seconds = now_seconds() - t0;
    st->bytes_in = in;
    st->bytes_out = out;
}

}  // namespace

extern "C" {

zb_params zb_params_default(void) {
    zb_params p;
    std::memset(&p, 0, sizeof p);
    p.mode = ZB_MODE_REL;
    p.bound = 1e-3;
    p.predictor = ZB_PRED_AUTO;
    p.encoder = ZB_ENC_AUTO;
    p.backend = ZB_BACKEND_AUTO;
    return p;
}

size_t zb_compress_bound(zb_dtype dtype, size_t n) {
    if (!dtype_ok(dtype)) return 0;
    return zb::raw_stream_bytes(dtype, n ? n : 1);
}

zb_status zb_compress(const zb_params *params, zb_dtype dtype, const void *src, int rank, const size_t *dims,
                      void *dst, size_t dst_capacity, size_t *dst_len, zb_run_stats *stats) {
    return guarded([&]() -> zb_status {
        if (zb_status s = check_params(params)) return s;
        if (!dtype_ok(dtype)) return set_error(ZB_ERR_DTYPE, "unsupported dtype " + std::to_string(as_int(dtype)));
        if (!src || !dst || !dst_len) return set_error(ZB_ERR_INVALID_ARG, "null buffer or length pointer");
        zb::Shape shape;
        if (!zb::fold_shape(rank, dims, shape))
            return set_error(ZB_ERR_INVALID_ARG, "bad shape: rank must be 0..64 and every dim > 0");
        if (as_int(params->mode) != ZB_MODE_PW_REL)
            return compress_values(params, dtype, src, shape, dst, dst_capacity, dst_len, stats);
        const double t0 = now_seconds();
        const size_t in_bytes = (size_t)shape.n * dtype_size(dtype);
        std::string msg;
        bool required = false;
        // On the GPU: transform, inner stream, check and exceptions (cuda/pwrel_gpu.cu), the same bytes as the
        // CPU reference below.
        const zb::GpuOps *gpu = choose_gpu(params->backend, in_bytes, required);
        zb_status settled;
        if (gpu_settles(gpu, required, ZB_ERR_BUFFER_TOO_SMALL, "compression", [&](std::string &m) {
                return gpu->pwrel_compress_host(*params, dtype, src, shape, dst, dst_capacity, dst_len, stats, m);
            }, settled))
            return settled;
        if (stats) *stats = zb_run_stats{};
        const int nt = zb::resolve_threads(params->threads, shape.n);
        const zb::PwRelInnerCodec inner = inner_codec(ZB_BACKEND_CPU, dtype, shape, stats, false, nt);
        const zb_status s = zb::pwrel_compress(*params, dtype, src, shape, static_cast<uint8_t *>(dst), dst_capacity,
                                               dst_len, nt, inner, msg);
        if (s != ZB_OK) return set_error(s, msg);
        finish_pwrel_stats(stats, t0, (size_t)shape.n * dtype_size(dtype), *dst_len);
        return ZB_OK;
    });
}

zb_status zb_stream_info_get(const void *src, size_t src_len, zb_stream_info *info) {
    return guarded([&]() -> zb_status {
        if (!info) return set_error(ZB_ERR_INVALID_ARG, "info is null");
        zb::Header h;
        std::string msg;
        if (zb_status s = zb::read_header(static_cast<const uint8_t *>(src), src_len, h, msg, false))
            return set_error(s, msg);
        std::memset(info, 0, sizeof *info);
        info->format_version = h.version;
        info->dtype = h.dtype;
        info->rank = h.shape.rank;
        for (int i = 0; i < 3; ++i) info->dims[i] = h.shape.dims[i];
        info->n = h.shape.n;
        info->decompressed_bytes = (size_t)h.shape.n * h.value_bytes();
        info->stream_bytes = h.header_bytes() + (size_t)h.payload_bytes();
        info->mode = h.mode;
        info->bound = h.bound;
        info->abs_bound = h.eb;
        info->predictor = (zb_predictor)h.predictor;
        info->encoder = (zb_encoder)h.encoder;
        info->raw = (h.flags & zb::kFlagRaw) ? 1 : 0;
        info->escapes = h.escapes;
        info->exceptions = h.exceptions;
        info->exception_runs = h.runs;
        info->nonzero_code_blocks = h.nonzero_code_blocks;
        // The ratio encoder's sizes are in the stream's own segments, or in its inner stream's (version 5), when
        // src holds that inner header.
        zb::Header eh = h;
        if (h.version == zb::kFormatVersionV5) {
            const uint64_t at = h.header_bytes() + h.seg[zb::kPwSegInner].offset;
            const uint8_t *s8 = static_cast<const uint8_t *>(src);
            if (at >= src_len || zb::read_header(s8 + at, src_len - (size_t)at, eh, msg, false) != ZB_OK ||
                eh.version == zb::kFormatVersionV5)
                eh.encoder = 0;
        }
        if (!(eh.flags & zb::kFlagRaw) && eh.encoder == zb::kEncRatio) {  // v2 layout: parameters, then the encoder's
            info->ratio_metadata_bytes = eh.seg[1 + zb::kRatioSegMetadata].length;
            info->ratio_payload_bytes =
                eh.seg[1 + zb::kRatioSegFlags].length + eh.seg[1 + zb::kRatioSegBlocks].length;
        }
        return ZB_OK;
    });
}

zb_status zb_decompress(const void *src, size_t src_len, void *dst, size_t dst_capacity, zb_backend backend,
                        zb_run_stats *stats) {
    return zb_decompress_threads(src, src_len, dst, dst_capacity, backend, 0, stats);
}

zb_status zb_decompress_threads(const void *src, size_t src_len, void *dst, size_t dst_capacity, zb_backend backend,
                                int threads, zb_run_stats *stats) {
    return guarded([&]() -> zb_status {
        if (!dst) return set_error(ZB_ERR_INVALID_ARG, "destination is null");
        const int b = as_int(backend);
        if (b != ZB_BACKEND_AUTO && b != ZB_BACKEND_CPU && b != ZB_BACKEND_GPU)
            return set_error(ZB_ERR_INVALID_ARG, "unknown backend " + std::to_string(b));
        if (threads < 0) return set_error(ZB_ERR_INVALID_ARG, "threads must be >= 0");
        return decompress_stream(static_cast<const uint8_t *>(src), src_len, dst, dst_capacity, backend, threads,
                                 stats);
    });
}

zb_status zb_compress_device(const zb_params *params, zb_dtype dtype, const void *d_src, int rank,
                             const size_t *dims, void *d_dst, size_t dst_capacity, size_t *dst_len,
                             void *cuda_stream, zb_run_stats *stats) {
    return guarded([&]() -> zb_status {
        if (zb_status s = check_params(params)) return s;
        if (!dtype_ok(dtype)) return set_error(ZB_ERR_DTYPE, "unsupported dtype");
        if (!d_src || !d_dst || !dst_len) return set_error(ZB_ERR_INVALID_ARG, "null buffer or length pointer");
        zb::Shape shape;
        if (!zb::fold_shape(rank, dims, shape)) return set_error(ZB_ERR_INVALID_ARG, "bad shape");
        const zb::GpuOps *gpu = zb::gpu_ops();
        if (!gpu) return set_error(ZB_ERR_UNSUPPORTED, "this build has no CUDA backend");
        if (!gpu->available()) return set_error(ZB_ERR_GPU, "no usable GPU");
        std::string msg;
        if (zb_status s = gpu->compress_device(*params, dtype, d_src, shape, d_dst, dst_capacity, dst_len,
                                               cuda_stream, stats, msg))
            return set_error(s, msg);
        return ZB_OK;
    });
}

zb_status zb_decompress_device(const void *d_src, size_t src_len, void *d_dst, size_t dst_capacity,
                               void *cuda_stream, zb_run_stats *stats) {
    return guarded([&]() -> zb_status {
        if (!d_src || !d_dst) return set_error(ZB_ERR_INVALID_ARG, "null buffer");
        const zb::GpuOps *gpu = zb::gpu_ops();
        if (!gpu) return set_error(ZB_ERR_UNSUPPORTED, "this build has no CUDA backend");
        if (!gpu->available()) return set_error(ZB_ERR_GPU, "no usable GPU");
        std::string msg;
        if (zb_status s = gpu->decompress_device(static_cast<const uint8_t *>(d_src), src_len, d_dst, dst_capacity,
                                                 cuda_stream, stats, msg))
            return set_error(s, msg);
        return ZB_OK;
    });
}

zb_status zb_compress_device_batch(const zb_params *params, zb_dtype dtype, int rank, const size_t *dims,
                                   size_t count, const void *const *d_srcs, void *const *d_dsts, size_t dst_capacity,
                                   size_t *dst_lens, zb_status *statuses, void *cuda_stream, zb_run_stats *stats) {
    return guarded([&]() -> zb_status {
        if (zb_status s = check_params(params)) return s;
        if (!dtype_ok(dtype)) return set_error(ZB_ERR_DTYPE, "unsupported dtype");
        if (count && (!d_srcs || !d_dsts || !dst_lens))
            return set_error(ZB_ERR_INVALID_ARG, "null array of buffers or lengths");
        zb::Shape shape;
        if (!zb::fold_shape(rank, dims, shape)) return set_error(ZB_ERR_INVALID_ARG, "bad shape");
        const zb::GpuOps *gpu = zb::gpu_ops();
        if (!gpu) return set_error(ZB_ERR_UNSUPPORTED, "this build has no CUDA backend");
        if (!gpu->available()) return set_error(ZB_ERR_GPU, "no usable GPU");
        if (!count) return ZB_OK;
        std::string msg;
        if (zb_status s = gpu->compress_device_batch(*params, dtype, shape, count, d_srcs, d_dsts, dst_capacity,
                                                     dst_lens, statuses, cuda_stream, stats, msg))
            return set_error(s, msg);
        return ZB_OK;
    });
}

zb_status zb_decompress_device_batch(size_t count, const void *const *d_srcs, const size_t *src_lens,
                                     void *const *d_dsts, size_t dst_capacity, zb_status *statuses,
                                     void *cuda_stream, zb_run_stats *stats) {
    return guarded([&]() -> zb_status {
        if (count && (!d_srcs || !src_lens || !d_dsts))
            return set_error(ZB_ERR_INVALID_ARG, "null array of buffers or lengths");
        const zb::GpuOps *gpu = zb::gpu_ops();
        if (!gpu) return set_error(ZB_ERR_UNSUPPORTED, "this build has no CUDA backend");
        if (!gpu->available()) return set_error(ZB_ERR_GPU, "no usable GPU");
        if (!count) return ZB_OK;
        std::string msg;
        if (zb_status s = gpu->decompress_device_batch(count, d_srcs, src_lens, d_dsts, dst_capacity, statuses,
                                                       cuda_stream, stats, msg))
            return set_error(s, msg);
        return ZB_OK;
    });
}

int zb_gpu_available(void) {
    try {
        const zb::GpuOps *gpu = zb::gpu_ops();
        return gpu && gpu->available() ? 1 : 0;
    } catch (...) {
        return 0;
    }
}

const char *zb_status_string(zb_status status) {
    switch (status) {
        case ZB_OK: return "ok";
        case ZB_ERR_INVALID_ARG: return "invalid argument";
        case ZB_ERR_DTYPE: return "unsupported data type";
        case ZB_ERR_BUFFER_TOO_SMALL: return "buffer too small";
        case ZB_ERR_CORRUPT: return "corrupt stream";
        case ZB_ERR_TRUNCATED: return "truncated stream";
        case ZB_ERR_VERSION: return "stream format version not supported";
        case ZB_ERR_NOMEM: return "out of memory";
        case ZB_ERR_GPU: return "GPU error";
        case ZB_ERR_UNSUPPORTED: return "not supported";
        case ZB_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

const char *zb_last_error(void) { return t_last_error.c_str(); }

void zb_set_last_error(const char *msg) { t_last_error = msg ? msg : ""; }

}  // extern "C"
