// zb::gpu_ops(): the CUDA backend's entry points as core/ calls them (core/internal/zb_gpu_ops.h).
// Each entry point takes the context lock, runs the codec, and turns every failure into a status and a message;
// no exception leaves this file.
#include <chrono>
#include <cstring>
#include <new>
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

// Runs f(); converts failures. After a failure the stream is drained (errors ignored) so that no queued work of
// this call still uses the arenas when the next call starts.
template <typename F> zb_status guarded(std::string &msg, cudaStream_t *stream, F &&f) {
    auto drain = [&] {
        if (stream && *stream) (void)cudaStreamSynchronize(*stream);
        (void)cudaGetLastError();  // clear a non-sticky error so later calls start clean
    };
    try {
        return f();
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
    cudaStream_t s = nullptr;
    return guarded(msg, &s, [&]() -> zb_status {
        gpu::Context &c = gpu::context();
        std::lock_guard<std::mutex> lock(c.mu);
        s = c.stream;
        gpu::KernelTimer timer(c, s);
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
    cudaStream_t s = nullptr;
    return guarded(msg, &s, [&]() -> zb_status {
        gpu::Context &c = gpu::context();
        std::lock_guard<std::mutex> lock(c.mu);
        s = c.stream;
        gpu::KernelTimer timer(c, s);
        const uint8_t *payload = src + h.header_bytes();
        // The payload checksum was verified by read_header on the host.
        if (h.version != kFormatVersionV1) {
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

zb_status compress_device(const zb_params &user_p, zb_dtype dtype, const void *d_src, const Shape &shape, void *d_dst,
                          size_t dst_capacity, size_t *dst_len, void *stream, zb_run_stats *stats, std::string &msg) {
    const double t0 = now_seconds();
    if (shape.n > gpu::kMaxValues) return too_large(msg, shape.n);
    const size_t vb = dtype == ZB_F64 ? 8 : 4;
    if (reinterpret_cast<uintptr_t>(d_src) % vb) {
        msg = "device source array is not aligned to its value size";
        return ZB_ERR_INVALID_ARG;
    }
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (user_p.mode == ZB_MODE_PW_REL) {
        return guarded(msg, &s, [&]() -> zb_status {
            gpu::Context &c = gpu::context();
            std::lock_guard<std::mutex> lock(c.mu);
            const gpu::StreamTarget out{true, static_cast<uint8_t *>(d_dst), dst_capacity};
            double kernel = 0;
            *dst_len = gpu::pwrel_encode(c, user_p, dtype, shape, d_src, nullptr, out, true, s, &kernel);
            fill_stats(stats, kernel, t0, (size_t)shape.n * vb, *dst_len);
            return ZB_OK;
        });
    }
    return guarded(msg, &s, [&]() -> zb_status {
        gpu::Context &c = gpu::context();
        std::lock_guard<std::mutex> lock(c.mu);
        // predictor / encoder auto: the host API's choice, made from the device data (same bytes as zb_compress).
        zb_params chosen = user_p;
        if (user_p.predictor == ZB_PRED_AUTO || user_p.encoder == ZB_ENC_AUTO)
            chosen = dtype == ZB_F64 ? gpu::choose_on_device(c, user_p, shape, static_cast<const double *>(d_src), s)
                                     : gpu::choose_on_device(c, user_p, shape, static_cast<const float *>(d_src), s);
        bool v2 = false;
        zb_params p;
        if (!gpu_pipeline(chosen, p, v2, msg)) return ZB_ERR_UNSUPPORTED;
        gpu::KernelTimer timer(c, s);
        const gpu::StreamTarget out{true, static_cast<uint8_t *>(d_dst), dst_capacity};
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
    });
}

zb_status decompress_device(const uint8_t *d_src, size_t src_len, void *d_dst, size_t dst_capacity, void *stream,
                            zb_run_stats *stats, std::string &msg) {
    const double t0 = now_seconds();
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    return guarded(msg, &s, [&]() -> zb_status {
        gpu::Context &c = gpu::context();
        std::lock_guard<std::mutex> lock(c.mu);
        gpu::KernelTimer timer(c, s);
        // The header is parsed on the host: copy at most the largest header there is.
        const size_t max_header = kHeaderFixedBytes + 16 * kMaxSegments + 8;
        const size_t hcopy = src_len < max_header ? src_len : max_header;
        uint8_t *hdr = c.host_small;
        std::memset(hdr, 0, max_header);
        if (hcopy) ZB_CUDA(cudaMemcpyAsync(hdr, d_src, hcopy, cudaMemcpyDeviceToHost, s));
        ZB_CUDA(cudaStreamSynchronize(s));
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
        if (h.version != kFormatVersionV1) {
            if (h.dtype == ZB_F64) gpu::v2_decode<double>(c, h, payload, true, d_dst, true, true, s, timer);
            else gpu::v2_decode<float>(c, h, payload, true, d_dst, true, true, s, timer);
        } else if (h.dtype == ZB_F64) {
            gpu::decode<double>(c, h, payload, true, d_dst, true, true, s, timer);
        } else {
            gpu::decode<float>(c, h, payload, true, d_dst, true, true, s, timer);
        }
        fill_stats(stats, timer.seconds(), t0, h.header_bytes() + (size_t)h.payload_bytes(), out_bytes);
        return ZB_OK;
    });
}

zb_status pwrel_compress_host(const zb_params &p, zb_dtype dtype, const void *src, const Shape &shape, void *dst,
                              size_t dst_capacity, size_t *dst_len, zb_run_stats *stats, std::string &msg) {
    const double t0 = now_seconds();
    if (shape.n > gpu::kMaxValues) return too_large(msg, shape.n);
    cudaStream_t s = nullptr;
    return guarded(msg, &s, [&]() -> zb_status {
        gpu::Context &c = gpu::context();
        std::lock_guard<std::mutex> lock(c.mu);
        s = c.stream;
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
    cudaStream_t s = nullptr;
    return guarded(msg, &s, [&]() -> zb_status {
        gpu::Context &c = gpu::context();
        std::lock_guard<std::mutex> lock(c.mu);
        s = c.stream;
        double kernel = 0;
        // The payload checksum was verified by read_header on the host.
        gpu::pwrel_decode(c, h, src, false, dst, false, false, s, &kernel);
        fill_stats(stats, kernel, t0, h.header_bytes() + (size_t)h.payload_bytes(),
                   (size_t)h.shape.n * h.value_bytes());
        return ZB_OK;
    });
}

const GpuOps kOps = {available,         compress_host,       decompress_host,      compress_device,
                     decompress_device, pwrel_compress_host, pwrel_decompress_host};

}  // namespace

const GpuOps *gpu_ops() { return &kOps; }

}  // namespace zb
