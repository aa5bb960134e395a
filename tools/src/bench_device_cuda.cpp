// bench_device.h with the CUDA runtime: buffers allocated once, then timed device-to-device calls.
#include <chrono>
#include <cuda_runtime.h>
#include "bench_device.h"
#include "codec_opts.h"

namespace zbtool {
namespace {

// A device allocation freed on every path.
struct DeviceBuffer {
    void *p = nullptr;
    explicit DeviceBuffer(size_t bytes) {
        if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
            p = nullptr;
            (void)cudaGetLastError();
        }
    }
    ~DeviceBuffer() {
        if (p) cudaFree(p);
    }
    DeviceBuffer(const DeviceBuffer &) = delete;
    DeviceBuffer &operator=(const DeviceBuffer &) = delete;
};

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

}  // namespace

DeviceRun run_device_resident(const zb_params &p, zb_dtype dtype, const std::vector<uint8_t> &src,
                              const std::vector<size_t> &dims, int warmup, int repeat) {
    DeviceRun r;
    if (!zb_gpu_available()) {
        r.why_not = "no usable GPU";
        return r;
    }
    const size_t n = src.size() / (dtype == ZB_F64 ? 8 : 4), cap = zb_compress_bound(dtype, n);
    DeviceBuffer d_src(src.size()), d_stream(cap), d_out(src.size());
    if (!d_src.p || !d_stream.p || !d_out.p) {
        r.why_not = "cannot allocate the device buffers (" + std::to_string(src.size() * 2 + cap) + " bytes)";
        return r;
    }
    if (cudaMemcpy(d_src.p, src.data(), src.size(), cudaMemcpyHostToDevice) != cudaSuccess) {
        r.why_not = "cannot copy the array to the device";
        return r;
    }
    zb_params dp = p;
    dp.backend = ZB_BACKEND_GPU;
    size_t len = 0;
    for (int i = 0; i < warmup + repeat; ++i) {
        zb_run_stats st{};
        const double t0 = now();
        check_status(zb_compress_device(&dp, dtype, d_src.p, (int)dims.size(), dims.data(), d_stream.p, cap, &len,
                                        nullptr, &st),
                     "device-resident compress");
        const double t = now() - t0;
        if (i >= warmup) {
            r.comp_wall.push_back(t);
            r.comp_kernel.push_back(st.kernel_seconds);
        }
    }
    for (int i = 0; i < warmup + repeat; ++i) {
        zb_run_stats st{};
        const double t0 = now();
        check_status(zb_decompress_device(d_stream.p, len, d_out.p, src.size(), nullptr, &st),
                     "device-resident decompress");
        const double t = now() - t0;
        if (i >= warmup) {
            r.decomp_wall.push_back(t);
            r.decomp_kernel.push_back(st.kernel_seconds);
        }
    }
    r.stream.resize(len);
    r.decoded.resize(src.size());
    if (cudaMemcpy(r.stream.data(), d_stream.p, len, cudaMemcpyDeviceToHost) != cudaSuccess ||
        cudaMemcpy(r.decoded.data(), d_out.p, src.size(), cudaMemcpyDeviceToHost) != cudaSuccess) {
        r.why_not = "cannot copy the results back from the device";
        return r;
    }
    r.ran = true;
    return r;
}

}  // namespace zbtool
