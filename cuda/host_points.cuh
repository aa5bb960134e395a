// Host copies of a few values of a device array: the host-side tuning (zb::interp_tune, zb::choose_pipeline) reads
// sample points only (zb::interp_tune_points / zb::choose_pipeline_points list them), so a device-resident array is
// not copied whole: the points are gathered on the device and scattered into a zero-filled host array whose other
// pages are never touched (calloc).
#pragma once
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>
#include "gpu_device.cuh"
#include "gpu_internal.h"

namespace zb {
namespace gpu {
namespace points {
namespace {

template <typename T>
__global__ void k_gather_points(const T *__restrict__ x, const uint64_t *__restrict__ idx, uint64_t m,
                                T *__restrict__ out) {
    const uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < m) out[i] = x[idx[i]];
}

struct FreeDeleter {
    void operator()(void *p) const { std::free(p); }
};

// n values: x[i] (device) at every i of idx (each < n), 0 elsewhere.
template <typename T>
std::unique_ptr<T[], FreeDeleter> host_points(Context &c, const T *x, uint64_t n, std::vector<uint64_t> idx,
                                              cudaStream_t s) {
    std::unique_ptr<T[], FreeDeleter> h(static_cast<T *>(std::calloc((size_t)std::max<uint64_t>(n, 1), sizeof(T))));
    if (!h) throw std::bad_alloc();
    std::sort(idx.begin(), idx.end());
    idx.erase(std::unique(idx.begin(), idx.end()), idx.end());
    const uint64_t m = idx.size();
    if (!m) return h;
    uint64_t *d_idx = nullptr;
    T *d_val = nullptr;
    auto carve = [&](Carver &cv) {
        d_idx = cv.take<uint64_t>(m);
        d_val = cv.take<T>(m);
    };
    carve_from(c.arena[kArenaPoints], carve);
    upload(c, d_idx, idx.data(), m * sizeof(uint64_t), s);
    k_gather_points<T><<<grid_for(m, 256), 256, 0, s>>>(x, d_idx, m, d_val);
    ZB_LAUNCHED("k_gather_points");
    std::vector<T> vals((size_t)m);
    download(c, vals.data(), d_val, m * sizeof(T), s);
    for (uint64_t k = 0; k < m; ++k) h[(size_t)idx[k]] = vals[(size_t)k];
    return h;
}

}  // namespace
}  // namespace points
}  // namespace gpu
}  // namespace zb
