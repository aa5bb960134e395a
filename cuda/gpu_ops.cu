// zb::gpu_ops(): the CUDA backend's entry points as core/ calls them (core/internal/zb_gpu_ops.h).
// Each entry point leases a context of the pool (gpu_internal.h), runs the codec, and turns every failure into a
// status and a message; no exception leaves this file. The batch entry points run their chunks on several leased
// contexts at once, one host thread each.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <new>
#include <system_error>
#include <thread>
#include <vector>
#include "gpu_internal.h"
#include "interp_gpu.h"
#include "pwrel_gpu.h"
#include "zb_cpu.h"
#include "zb_gpu_ops.h"

namespace zb {
namespace {

double now_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void fill_stats(zb_run_stats *st, double kernel, double t0, size_t in, size_t out) {
    if (!st) return;
    st->backend_used = ZB_BACKEND_GPU;
    st->kernel_seconds = kernel;
    st->total_seconds = now_seconds() - t0;
    st->bytes_in = in;
    st->bytes_out = out;
}

// Leases a context (gpu_internal.h), runs f(context, stream) and turns failures into a status and `msg`. The
// stream is the caller's (`given`, device API) or, with own_stream, the context's own (host API, batches). After a
// failure the stream is drained before the lease ends, so that no queued work of this call still uses the
// context's buffers when the next call gets it.
template <typename F> zb_status leased(std::string &msg, bool own_stream, cudaStream_t given, F &&f) {
    std::unique_ptr<gpu::ContextLease> lease;  // outlives the handlers below
    cudaStream_t s = given;
    auto drain = [&] {
        if (lease && s) (void)cudaStreamSynchronize(s);
        (void)cudaGetLastError();  // clear a non-sticky error so later calls start clean
    };
    try {
        lease.reset(new gpu::ContextLease);
        gpu::Context &c = lease->get();
        if (own_stream) s = c.stream;
        return f(c, s);
    } catch (const gpu::Failure &e) {
        drain();
        msg = e.msg;
        return e.status;
    } catch (const std::bad_alloc &) {
        drain();
        msg = "out of host memory";
        return ZB_ERR_NOMEM;
    } catch (const std::exception &e) {
        drain();
        msg = std::string("internal error in the CUDA backend: ") + e.what();
        return ZB_ERR_INTERNAL;
    }
}

zb_status too_large(std::string &msg, uint64_t n) {
    msg = "the CUDA backend takes at most " + std::to_string(gpu::kMaxValues) + " values per call, got " +
          std::to_string(n);
    return ZB_ERR_UNSUPPORTED;
}

bool available() { return gpu::try_context(nullptr); }

// The pipeline of p (AUTO: the v1 defaults; core's API passes the pipeline it chose explicitly), written into
// `explicit_p` with no AUTO left: false with a message for a pipeline this backend does not run, else v2 = whether
// it is a format-v2-layout one.
bool gpu_pipeline(const zb_params &p, zb_params &explicit_p, bool &v2, std::string &msg) {
    if (p.mode == ZB_MODE_PW_REL) {  // the API compresses the log magnitudes with an ABS bound instead
        msg = "the point-wise relative bound is not a pipeline of this backend";
        return false;
    }
    uint8_t pred, enc;
    resolve_pipeline(p, pred, enc);
    v2 = !is_v1_pipeline(pred, enc);
    if (v2 && !gpu::gpu_runs_v2(pred, enc)) {
        msg = "a v2-layout pipeline this backend does not run";
        return false;
    }
    explicit_p = p;
    explicit_p.predictor = pred == kPredInterp ? ZB_PRED_INTERP : ZB_PRED_LORENZO;
    explicit_p.encoder = enc == kEncRatio ? ZB_ENC_RATIO : ZB_ENC_FAST;
    return true;
}

zb_status compress_host(const zb_params &user_p, zb_dtype dtype, const void *src, const Shape &shape, void *dst,
                        size_t dst_capacity, size_t *dst_len, zb_run_stats *stats, std::string &msg) {
    const double t0 = now_seconds();
    if (shape.n > gpu::kMaxValues) return too_large(msg, shape.n);
    bool v2 = false;
    zb_params p;
    if (!gpu_pipeline(user_p, p, v2, msg)) return ZB_ERR_UNSUPPORTED;
    return leased(msg, true, nullptr, [&](gpu::Context &c, cudaStream_t s) -> zb_status {
        gpu::KernelTimer timer(c, s, stats != nullptr);
        const gpu::StreamTarget out{false, static_cast<uint8_t *>(dst), dst_capacity};
        size_t len;
        if (dtype == ZB_F64) {
            const double *x = static_cast<const double *>(src);
            len = v2 ? gpu::v2_encode<double>(c, p, shape, nullptr, x, out, s, timer)
                     : gpu::encode<double>(c, p, shape, nullptr, x, out, s, timer);
        } else {
            const float *x = static_cast<const float *>(src);
            len = v2 ? gpu::v2_encode<float>(c, p, shape, nullptr, x, out, s, timer)
                     : gpu::encode<float>(c, p, shape, nullptr, x, out, s, timer);
        }
        *dst_len = len;
        fill_stats(stats, timer.seconds(), t0, (size_t)shape.n * (dtype == ZB_F64 ? 8 : 4), len);
        return ZB_OK;
    });
}

zb_status decompress_host(const Header &h, const uint8_t *src, void *dst, zb_run_stats *stats, std::string &msg) {
    const double t0 = now_seconds();
    if (h.shape.n > gpu::kMaxValues) return too_large(msg, h.shape.n);
    return leased(msg, true, nullptr, [&](gpu::Context &c, cudaStream_t s) -> zb_status {
        gpu::KernelTimer timer(c, s, stats != nullptr);
        const uint8_t *payload = src + h.header_bytes();
        // The payload checksum was verified by read_header on the host.
        if (!fast_layout_version(h.version)) {
            if (h.dtype == ZB_F64) gpu::v2_decode<double>(c, h, payload, false, dst, false, false, s, timer);
            else gpu::v2_decode<float>(c, h, payload, false, dst, false, false, s, timer);
        } else if (h.dtype == ZB_F64) {
            gpu::decode<double>(c, h, payload, false, dst, false, false, s, timer);
        } else {
            gpu::decode<float>(c, h, payload, false, dst, false, false, s, timer);
        }
        fill_stats(stats, timer.seconds(), t0, h.header_bytes() + (size_t)h.payload_bytes(),
                   (size_t)h.shape.n * h.value_bytes());
        return ZB_OK;
    });
}

// zb_compress_device's work on a leased context and stream s.
zb_status compress_on_device(gpu::Context &c, cudaStream_t s, const zb_params &user_p, zb_dtype dtype,
                             const void *d_src, const Shape &shape, void *d_dst, size_t dst_capacity, size_t *dst_len,
                             double t0, zb_run_stats *stats, std::string &msg) {
    const size_t vb = dtype == ZB_F64 ? 8 : 4;
    const gpu::StreamTarget out{true, static_cast<uint8_t *>(d_dst), dst_capacity};
    if (user_p.mode == ZB_MODE_PW_REL) {
        double kernel = 0;
        *dst_len = gpu::pwrel_encode(c, user_p, dtype, shape, d_src, nullptr, out, true, s, &kernel);
        fill_stats(stats, kernel, t0, (size_t)shape.n * vb, *dst_len);
        return ZB_OK;
    }
    // predictor / encoder auto: the host API's choice, made from the device data (same bytes as zb_compress).
    zb_params chosen = user_p;
    if (user_p.predictor == ZB_PRED_AUTO || user_p.encoder == ZB_ENC_AUTO)
        chosen = dtype == ZB_F64 ? gpu::choose_on_device(c, user_p, shape, static_cast<const double *>(d_src), s)
                                 : gpu::choose_on_device(c, user_p, shape, static_cast<const float *>(d_src), s);
    bool v2 = false;
    zb_params p;
    if (!gpu_pipeline(chosen, p, v2, msg)) return ZB_ERR_UNSUPPORTED;
    gpu::KernelTimer timer(c, s, stats != nullptr);
    size_t len;
    if (dtype == ZB_F64) {
        const double *x = static_cast<const double *>(d_src);
        len = v2 ? gpu::v2_encode<double>(c, p, shape, x, nullptr, out, s, timer)
                 : gpu::encode<double>(c, p, shape, x, nullptr, out, s, timer);
    } else {
        const float *x = static_cast<const float *>(d_src);
        len = v2 ? gpu::v2_encode<float>(c, p, shape, x, nullptr, out, s, timer)
                 : gpu::encode<float>(c, p, shape, x, nullptr, out, s, timer);
    }
    *dst_len = len;
    fill_stats(stats, timer.seconds(), t0, (size_t)shape.n * vb, len);
    return ZB_OK;
}

zb_status misaligned_source(const void *d_src, zb_dtype dtype, std::string &msg) {
    if (reinterpret_cast<uintptr_t>(d_src) % (dtype == ZB_F64 ? 8 : 4) == 0) return ZB_OK;
    msg = "device source array is not aligned to its value size";
    return ZB_ERR_INVALID_ARG;
}

zb_status compress_device(const zb_params &p, zb_dtype dtype, const void *d_src, const Shape &shape, void *d_dst,
                          size_t dst_capacity, size_t *dst_len, void *stream, zb_run_stats *stats, std::string &msg) {
    const double t0 = now_seconds();
    if (shape.n > gpu::kMaxValues) return too_large(msg, shape.n);
    if (zb_status st = misaligned_source(d_src, dtype, msg)) return st;
    return leased(msg, false, static_cast<cudaStream_t>(stream), [&](gpu::Context &c, cudaStream_t s) {
        return compress_on_device(c, s, p, dtype, d_src, shape, d_dst, dst_capacity, dst_len, t0, stats, msg);
    });
}

// A fast-layout stream decoded from device to device: remembered so that the next call on the same buffers can be
// replayed (replayed_decompression). hdr: the header's bytes as copied to the host.
void remember_decompression(gpu::Context &c, const Header &h, const uint8_t *hdr, const uint8_t *d_src,
                            size_t src_len, void *d_dst, size_t dst_capacity) {
    gpu::Context::LastDecode &last = c.last_decode;
    last.valid = h.header_bytes() <= sizeof last.header;
    if (!last.valid) return;
    last.src = d_src;
    last.src_len = src_len;
    last.dst = d_dst;
    last.dst_capacity = dst_capacity;
    last.h = h;
    std::memcpy(last.header, hdr, h.header_bytes());
}

// A repeated device-to-device decompression (same buffers and lengths as the last one on this context) decodes with
// the last call's header at once, the copy of its own header to the host queued before the work: one wait instead
// of two (the header's round trip cost a chunk-sized call about as much as its kernels; NOTES 114). Where the header
// that arrives is byte for byte the last one, the result stands: true, with the decoder's status (and message where
// it failed, e.g. a corrupt payload). Otherwise false, and the caller decodes the stream with its own header (dst is
// written again; the lengths being the same as the last call's keeps the replayed work inside both buffers).
bool replayed_decompression(gpu::Context &c, cudaStream_t s, const uint8_t *d_src, size_t src_len, void *d_dst,
                            size_t dst_capacity, gpu::KernelTimer &timer, zb_status &status, std::string &msg) {
    const gpu::Context::LastDecode &last = c.last_decode;
    if (!last.valid || last.src != d_src || last.src_len != src_len || last.dst != d_dst ||
        last.dst_capacity != dst_capacity || timer.records() || !gpu::graphs_usable(c))
        return false;
    const size_t hb = last.h.header_bytes();
    // The decoder copies the stream's header here (in its graph: no copy of its own before the work). Cleared
    // first: a decoder that fails before it queues that copy leaves a header that cannot match.
    uint8_t *arrived = c.host_small + gpu::kHostReplayHeaderOffset;
    std::memset(arrived, 0, hb);
    zb_status failed = ZB_OK;
    std::string failure;
    try {
        if (last.h.dtype == ZB_F64)
            gpu::decode<double>(c, last.h, d_src + hb, true, d_dst, true, true, s, timer, d_src);
        else gpu::decode<float>(c, last.h, d_src + hb, true, d_dst, true, true, s, timer, d_src);
    } catch (const gpu::Failure &e) {
        failed = e.status;
        failure = e.msg;
        ZB_CUDA(cudaStreamSynchronize(s));  // the decoder waits for its work, unless it failed before its wait
    }
    if (std::memcmp(arrived, last.header, hb) != 0) return false;
    status = failed;
    if (failed) msg = failure;
    return true;
}

// zb_decompress_device's work on a leased context and stream s.
zb_status decompress_on_device(gpu::Context &c, cudaStream_t s, const uint8_t *d_src, size_t src_len, void *d_dst,
                               size_t dst_capacity, double t0, zb_run_stats *stats, std::string &msg) {
    gpu::KernelTimer timer(c, s, stats != nullptr);
    zb_status replayed = ZB_OK;
    if (replayed_decompression(c, s, d_src, src_len, d_dst, dst_capacity, timer, replayed, msg)) {
        const Header &h = c.last_decode.h;
        if (replayed == ZB_OK)
            fill_stats(stats, timer.seconds(), t0, h.header_bytes() + (size_t)h.payload_bytes(),
                       (size_t)h.shape.n * h.value_bytes());
        return replayed;
    }
    c.last_decode.valid = false;  // until this call's stream proves to be one that can be replayed
    // The header is parsed on the host: copy at most the largest header there is.
    const size_t max_header = gpu::kMaxHeaderBytes;
    const size_t hcopy = src_len < max_header ? src_len : max_header;
    uint8_t *hdr = c.host_small;
    std::memset(hdr, 0, max_header);
    if (hcopy) ZB_CUDA(cudaMemcpyAsync(hdr, d_src, hcopy, cudaMemcpyDeviceToHost, s));
    ZB_CUDA(cudaStreamSynchronize(s));
    timer.mark("header");
    Header h;
    if (zb_status st = read_header(hdr, src_len, h, msg, false)) return st;
    if (h.shape.n > gpu::kMaxValues) return too_large(msg, h.shape.n);
    const size_t out_bytes = (size_t)h.shape.n * h.value_bytes();
    if (dst_capacity < out_bytes) {
        msg = "destination holds " + std::to_string(dst_capacity) + " bytes, the stream decodes to " +
              std::to_string(out_bytes);
        return ZB_ERR_BUFFER_TOO_SMALL;
    }
    if (h.version == kFormatVersionV5) {
        double kernel = 0;
        gpu::pwrel_decode(c, h, d_src, true, d_dst, true, true, s, &kernel);
        fill_stats(stats, kernel, t0, h.header_bytes() + (size_t)h.payload_bytes(), out_bytes);
        return ZB_OK;
    }
    const uint8_t *payload = d_src + h.header_bytes();
    if (!fast_layout_version(h.version)) {
        if (h.dtype == ZB_F64) gpu::v2_decode<double>(c, h, payload, true, d_dst, true, true, s, timer);
        else gpu::v2_decode<float>(c, h, payload, true, d_dst, true, true, s, timer);
    } else {
        remember_decompression(c, h, hdr, d_src, src_len, d_dst, dst_capacity);
        if (h.dtype == ZB_F64) gpu::decode<double>(c, h, payload, true, d_dst, true, true, s, timer);
        else gpu::decode<float>(c, h, payload, true, d_dst, true, true, s, timer);
    }
    fill_stats(stats, timer.seconds(), t0, h.header_bytes() + (size_t)h.payload_bytes(), out_bytes);
    return ZB_OK;
}

zb_status decompress_device(const uint8_t *d_src, size_t src_len, void *d_dst, size_t dst_capacity, void *stream,
                            zb_run_stats *stats, std::string &msg) {
    const double t0 = now_seconds();
    return leased(msg, false, static_cast<cudaStream_t>(stream), [&](gpu::Context &c, cudaStream_t s) {
        return decompress_on_device(c, s, d_src, src_len, d_dst, dst_capacity, t0, stats, msg);
    });
}

// ---- batches -------------------------------------------------------------------------------------------------------

// Runs item(i, stats_i, msg_i) for every i < count on up to pool_size() host threads, each with its own leased
// context (its own stream), after the caller's stream has drained. statuses[i] (optional) gets each item's status;
// returns the first failed item's status with "chunk i: ..." in msg. stats: the items' sums, total_seconds the wall
// time of the whole batch.
template <typename Item>
zb_status run_batch(size_t count, cudaStream_t caller, zb_status *statuses, zb_run_stats *stats, std::string &msg,
                    Item &&item) {
    const double t0 = now_seconds();
    const cudaError_t before = cudaStreamSynchronize(caller);  // work queued before the call comes first
    if (before != cudaSuccess) {
        (void)cudaGetLastError();
        msg = std::string("the caller's CUDA stream failed before the batch: ") + cudaGetErrorString(before);
        return ZB_ERR_GPU;
    }
    std::vector<zb_status> st(count, ZB_OK);
    std::vector<std::string> msgs(count);
    std::vector<zb_run_stats> per(count);
    std::atomic<size_t> next{0};
    auto worker = [&] {
        for (size_t i; (i = next.fetch_add(1)) < count;) {
            per[i] = zb_run_stats{};
            st[i] = item(i, stats ? &per[i] : nullptr, msgs[i]);  // no statistics asked: no kernel timing
        }
    };
    const size_t nthreads = std::min<size_t>(count, (size_t)gpu::pool_size());
    std::vector<std::thread> helpers;
    try {
        for (size_t t = 1; t < nthreads; ++t) helpers.emplace_back(worker);
    } catch (const std::system_error &) {
        // No more host threads: the ones started (and this one) do the whole batch.
    }
    worker();
    for (std::thread &h : helpers) h.join();
    zb_status first = ZB_OK;
    zb_run_stats sum{};
    for (size_t i = 0; i < count; ++i) {
        if (statuses) statuses[i] = st[i];
        if (st[i] != ZB_OK && first == ZB_OK) {
            first = st[i];
            msg = "chunk " + std::to_string(i) + " of the batch: " + msgs[i];
        }
        sum.kernel_seconds += per[i].kernel_seconds;
        sum.bytes_in += per[i].bytes_in;
        sum.bytes_out += per[i].bytes_out;
    }
    if (stats) {
        *stats = sum;
        stats->backend_used = ZB_BACKEND_GPU;
        stats->total_seconds = now_seconds() - t0;
    }
    return first;
}

zb_status compress_device_batch(const zb_params &p, zb_dtype dtype, const Shape &shape, size_t count,
                                const void *const *d_srcs, void *const *d_dsts, size_t dst_capacity, size_t *dst_lens,
                                zb_status *statuses, void *stream, zb_run_stats *stats, std::string &msg) {
    if (shape.n > gpu::kMaxValues) return too_large(msg, shape.n);
    return run_batch(count, static_cast<cudaStream_t>(stream), statuses, stats, msg,
                     [&](size_t i, zb_run_stats *st, std::string &m) -> zb_status {
        dst_lens[i] = 0;
        if (!d_srcs[i] || !d_dsts[i]) {
            m = "null buffer";
            return ZB_ERR_INVALID_ARG;
        }
        if (zb_status bad = misaligned_source(d_srcs[i], dtype, m)) return bad;
        const double t0 = now_seconds();
        return leased(m, true, nullptr, [&](gpu::Context &c, cudaStream_t s) {
            struct BatchItem {  // for this chunk only, also when it throws
                gpu::Context &c;
                explicit BatchItem(gpu::Context &c_) : c(c_) { c.batch_item = true; }
                ~BatchItem() { c.batch_item = false; }
            } item(c);
            return compress_on_device(c, s, p, dtype, d_srcs[i], shape, d_dsts[i], dst_capacity, &dst_lens[i], t0,
                                      st, m);
        });
    });
}

zb_status decompress_device_batch(size_t count, const void *const *d_srcs, const size_t *src_lens,
                                  void *const *d_dsts, size_t dst_capacity, zb_status *statuses, void *stream,
                                  zb_run_stats *stats, std::string &msg) {
    return run_batch(count, static_cast<cudaStream_t>(stream), statuses, stats, msg,
                     [&](size_t i, zb_run_stats *st, std::string &m) -> zb_status {
        if (!d_srcs[i] || !d_dsts[i]) {
            m = "null buffer";
            return ZB_ERR_INVALID_ARG;
        }
        const double t0 = now_seconds();
        return leased(m, true, nullptr, [&](gpu::Context &c, cudaStream_t s) {
            return decompress_on_device(c, s, static_cast<const uint8_t *>(d_srcs[i]), src_lens[i], d_dsts[i],
                                        dst_capacity, t0, st, m);
        });
    });
}

zb_status pwrel_compress_host(const zb_params &p, zb_dtype dtype, const void *src, const Shape &shape, void *dst,
                              size_t dst_capacity, size_t *dst_len, zb_run_stats *stats, std::string &msg) {
    const double t0 = now_seconds();
    if (shape.n > gpu::kMaxValues) return too_large(msg, shape.n);
    return leased(msg, true, nullptr, [&](gpu::Context &c, cudaStream_t s) -> zb_status {
        const gpu::StreamTarget out{false, static_cast<uint8_t *>(dst), dst_capacity};
        double kernel = 0;
        *dst_len = gpu::pwrel_encode(c, p, dtype, shape, nullptr, src, out, true, s, &kernel);
        fill_stats(stats, kernel, t0, (size_t)shape.n * (dtype == ZB_F64 ? 8 : 4), *dst_len);
        return ZB_OK;
    });
}

zb_status pwrel_decompress_host(const Header &h, const uint8_t *src, void *dst, zb_run_stats *stats,
                                std::string &msg) {
    const double t0 = now_seconds();
    if (h.shape.n > gpu::kMaxValues) return too_large(msg, h.shape.n);
    return leased(msg, true, nullptr, [&](gpu::Context &c, cudaStream_t s) -> zb_status {
        double kernel = 0;
        // The payload checksum was verified by read_header on the host.
        gpu::pwrel_decode(c, h, src, false, dst, false, false, s, &kernel);
        fill_stats(stats, kernel, t0, h.header_bytes() + (size_t)h.payload_bytes(),
                   (size_t)h.shape.n * h.value_bytes());
        return ZB_OK;
    });
}

const GpuOps kOps = {available,           compress_host,          decompress_host,
                     compress_device,     decompress_device,      compress_device_batch,
                     decompress_device_batch, pwrel_compress_host, pwrel_decompress_host};

}  // namespace

const GpuOps *gpu_ops() { return &kOps; }

}  // namespace zb
