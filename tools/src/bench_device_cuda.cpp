// bench_device.h with the CUDA runtime: buffers allocated once, then timed device-to-device calls.
#include <algorithm>
#include <chrono>
#include <memory>
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

// Runs call(stats) warmup + repeat times back to back, timed by the wall clock without statistics (a caller that
// asks for none gets no kernel timing, which costs host time of its own), as a program's loop over its chunks
// runs them; then as many times with statistics, for the kernel time. Keeps the runs after each warm-up. (A call
// with statistics runs its stages as separate launches, not as the repeated call's graph, so pairs of the two
// forms put such a call before every timed one: on one H100, 16 MB of TREFHT decompressed in 58.6-59.1 us a call
// that way and in 56.4-56.8 us back to back, where a loop of calls alone took 55.1-55.4: NOTES 161.)
template <typename Call>
void timed_runs(int warmup, int repeat, std::vector<double> &wall, std::vector<double> &kernel, Call &&call) {
    for (int i = 0; i < warmup + repeat; ++i) {
        const double t0 = now();
        call(nullptr);
        if (i >= warmup) wall.push_back(now() - t0);
    }
    for (int i = 0; i < warmup + repeat; ++i) {
        zb_run_stats st{};
        call(&st);
        if (i >= warmup) kernel.push_back(st.kernel_seconds);
    }
}

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
    timed_runs(warmup, repeat, r.comp_wall, r.comp_kernel, [&](zb_run_stats *st) {
        check_status(zb_compress_device(&dp, dtype, d_src.p, (int)dims.size(), dims.data(), d_stream.p, cap, &len,
                                        nullptr, st),
                     "device-resident compress");
    });
    timed_runs(warmup, repeat, r.decomp_wall, r.decomp_kernel, [&](zb_run_stats *st) {
        check_status(zb_decompress_device(d_stream.p, len, d_out.p, src.size(), nullptr, st),
                     "device-resident decompress");
    });
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

DeviceRun run_device_batch(const zb_params &p, zb_dtype dtype, const std::vector<uint8_t> &src,
                           const std::vector<size_t> &dims, int warmup, int repeat, size_t batch) {
    DeviceRun r;
    if (!zb_gpu_available()) {
        r.why_not = "no usable GPU";
        return r;
    }
    if (!batch) batch = std::max<size_t>(2, std::min<size_t>(64, ((size_t)1 << 30) / std::max<size_t>(1, src.size())));
    r.batch = batch;
    const size_t n = src.size() / (dtype == ZB_F64 ? 8 : 4), cap = zb_compress_bound(dtype, n);
    std::vector<std::unique_ptr<DeviceBuffer>> bufs;
    std::vector<const void *> srcs;
    std::vector<void *> streams, outs;
    for (size_t i = 0; i < batch; ++i) {
        bufs.emplace_back(new DeviceBuffer(src.size()));
        srcs.push_back(bufs.back()->p);
        bufs.emplace_back(new DeviceBuffer(cap));
        streams.push_back(bufs.back()->p);
        bufs.emplace_back(new DeviceBuffer(src.size()));
        outs.push_back(bufs.back()->p);
    }
    for (const auto &b : bufs)
        if (!b->p) {
            r.why_not = "cannot allocate the device buffers of a batch of " + std::to_string(batch);
            return r;
        }
    for (const void *d : srcs)
        if (cudaMemcpy(const_cast<void *>(d), src.data(), src.size(), cudaMemcpyHostToDevice) != cudaSuccess) {
            r.why_not = "cannot copy the array to the device";
            return r;
        }
    zb_params dp = p;
    dp.backend = ZB_BACKEND_GPU;
    std::vector<size_t> lens(batch, 0);
    timed_runs(warmup, repeat, r.comp_wall, r.comp_kernel, [&](zb_run_stats *st) {
        check_status(zb_compress_device_batch(&dp, dtype, (int)dims.size(), dims.data(), batch, srcs.data(),
                                              streams.data(), cap, lens.data(), nullptr, nullptr, st),
                     "device-resident batch compress");
    });
    std::vector<const void *> ins(streams.begin(), streams.end());
    timed_runs(warmup, repeat, r.decomp_wall, r.decomp_kernel, [&](zb_run_stats *st) {
        check_status(zb_decompress_device_batch(batch, ins.data(), lens.data(), outs.data(), src.size(), nullptr,
                                                nullptr, st),
                     "device-resident batch decompress");
    });
    r.stream.resize(lens[0]);
    r.decoded.resize(src.size());
    std::vector<uint8_t> other;
    for (size_t i = 0; i < batch; ++i) {
        other.resize(lens[i]);
        if (cudaMemcpy(other.data(), streams[i], lens[i], cudaMemcpyDeviceToHost) != cudaSuccess) {
            r.why_not = "cannot copy the results back from the device";
            return r;
        }
        if (i == 0) r.stream = other;
        r.batch_same_bytes = r.batch_same_bytes && other == r.stream;
    }
    if (cudaMemcpy(r.decoded.data(), outs[0], src.size(), cudaMemcpyDeviceToHost) != cudaSuccess) {
        r.why_not = "cannot copy the results back from the device";
        return r;
    }
    r.ran = true;
    return r;
}

}  // namespace zbtool
