// CUB scans used by the encoder and the decoder, kept in one translation unit so that CUB is compiled once.
// Every scan is over 32-bit unsigned values; sums wrap mod 2^32, which is exactly the Lorenzo arithmetic.
#include <cub/device/device_scan.cuh>
#include "gpu_device.cuh"
#include "gpu_internal.h"

namespace zb {
namespace gpu {
namespace {

struct AddU32 {
    __host__ __device__ uint32_t operator()(uint32_t a, uint32_t b) const { return a + b; }
};

struct AddU4 {
    __host__ __device__ uint4 operator()(const uint4 &a, const uint4 &b) const {
        return make_uint4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
    }
};

// Segmented sum on (head, value) pairs: a head restarts the sum (see decode.cuh). Identity (0, 0).
struct SegSumU2 {
    __host__ __device__ uint2 operator()(const uint2 &a, const uint2 &b) const {
        return make_uint2(a.x | b.x, b.x ? b.y : a.y + b.y);
    }
};

void need_32bit(uint64_t n) {
    if (n > 0xFFFFFFFFull) fail(ZB_ERR_INTERNAL, "scan of more than 2^32 items");
}

}  // namespace

void exclusive_sum(void *temp, size_t &temp_bytes, const uint32_t *in, uint32_t *out, uint64_t n, cudaStream_t s) {
    need_32bit(n);
    ZB_CUDA(cub::DeviceScan::ExclusiveScan(temp, temp_bytes, in, out, AddU32(), 0u, (uint32_t)n, s));
}

void exclusive_sum4(void *temp, size_t &temp_bytes, const uint4 *in, uint4 *out, uint64_t n, cudaStream_t s) {
    need_32bit(n);
    ZB_CUDA(cub::DeviceScan::ExclusiveScan(temp, temp_bytes, in, out, AddU4(), make_uint4(0, 0, 0, 0), (uint32_t)n,
                                           s));
}

void exclusive_segmented_sum(void *temp, size_t &temp_bytes, const uint2 *in, uint2 *out, uint64_t n,
                             cudaStream_t s) {
    need_32bit(n);
    ZB_CUDA(cub::DeviceScan::ExclusiveScan(temp, temp_bytes, in, out, SegSumU2(), make_uint2(0, 0), (uint32_t)n, s));
}

size_t exclusive_sum_temp_bytes(std::initializer_list<uint64_t> lengths, cudaStream_t s) {
    size_t most = 0;
    for (uint64_t m : lengths) {
        size_t tb = 0;
        exclusive_sum(nullptr, tb, nullptr, nullptr, m, s);
        most = std::max(most, tb);
    }
    return most;
}

size_t exclusive_sum4_temp_bytes(uint64_t n, cudaStream_t s) {
    size_t tb = 0;
    exclusive_sum4(nullptr, tb, nullptr, nullptr, n, s);
    return tb;
}

}  // namespace gpu
}  // namespace zb
