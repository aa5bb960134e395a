// CUB scans used by the encoder and the decoder, kept in one translation unit so that CUB is compiled once.
// Every scan is over 32-bit unsigned values; sums wrap mod 2^32, which is exactly the Lorenzo arithmetic.
//
// Up to kOneBlockItems items (the per-tile counts of arrays up to 64 MB of f32, the exception stages' flag and word
// counts at chunk sizes) a scan is one launch of one block instead of CUB's two: a chunk-sized call makes up to a
// dozen of them, and each launch costs about 3 us of host time (H200), more than such a scan's GPU time. Such a scan
// needs no temporary storage: its size query returns 0 (a caller that scans several lengths with one buffer asks
// for the largest, as before).
#include <cub/device/device_scan.cuh>
#include <type_traits>
#include "dependent_launch.cuh"
#include "gpu_device.cuh"
#include "gpu_internal.h"

namespace zb {
namespace gpu {
namespace {

struct AddU32 {
    __host__ __device__ uint32_t operator()(uint32_t a, uint32_t b) const { return a + b; }
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

constexpr int kOneBlockThreads = 1024;  // the most; the block is the smallest of 128, 256, 512, 1024 threads that fits
constexpr int kOneBlockPerThread = 8;
constexpr uint64_t kOneBlockItems = (uint64_t)kOneBlockThreads * kOneBlockPerThread;

// Lane shuffles of a scan item, word by word.
__device__ __forceinline__ uint32_t shfl_up_item(uint32_t v, int d) { return __shfl_up_sync(0xFFFFFFFFu, v, d); }
__device__ __forceinline__ uint2 shfl_up_item(uint2 v, int d) {
    return make_uint2(shfl_up_item(v.x, d), shfl_up_item(v.y, d));
}
__device__ __forceinline__ uint4 shfl_up_item(uint4 v, int d) {
    return make_uint4(shfl_up_item(v.x, d), shfl_up_item(v.y, d), shfl_up_item(v.z, d), shfl_up_item(v.w, d));
}
__device__ __forceinline__ uint32_t shfl_item(uint32_t v, int lane) { return __shfl_sync(0xFFFFFFFFu, v, lane); }
__device__ __forceinline__ uint2 shfl_item(uint2 v, int lane) {
    return make_uint2(shfl_item(v.x, lane), shfl_item(v.y, lane));
}
__device__ __forceinline__ uint4 shfl_item(uint4 v, int lane) {
    return make_uint4(shfl_item(v.x, lane), shfl_item(v.y, lane), shfl_item(v.z, lane), shfl_item(v.w, lane));
}

// Exclusive scan of n <= Threads * kOneBlockPerThread items by one block. Warp w takes items [256 w, 256 (w + 1)),
// lane l items 256 w + l + 32 k (k < 8): each load and store instruction of a warp covers consecutive items. (A run of
// 8 consecutive items per thread made every instruction touch 32 lines: 9.0 / 12.4 / 16.9 us for 8192 items of 4 / 8
// / 16 bytes against 4.4 / 6.7 / 9.5 this way, H100, NOTES 130.) The warp scans its 8 rows of 32 items one after
// another with shuffles, carrying each row's total into the next; the warps' totals are summed through shared
// memory. op must be associative with init its identity (init op a == a op init == a).
// totals (uint4 items only, or nullptr): the sums of x, y and z over all n, as scan_totals would give them after the
// scan.
template <int Threads, typename V, typename Op>
__global__ void __launch_bounds__(Threads)
k_scan_one_block(const V *__restrict__ in, V *__restrict__ out, uint32_t n, Op op, V init,
                 unsigned long long *__restrict__ totals) {
    wait_for_prior_grids();  // before any memory access (launch_dependent)
    constexpr int kWarps = Threads / 32;
    __shared__ V warp_total[kWarps];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const uint32_t first = (uint32_t)warp * 32 * kOneBlockPerThread + lane;
    V items[kOneBlockPerThread];
#pragma unroll
    for (int k = 0; k < kOneBlockPerThread; ++k) items[k] = first + 32 * k < n ? in[first + 32 * k] : init;
    V before = init;  // the warp's items in the rows above row k
#pragma unroll
    for (int k = 0; k < kOneBlockPerThread; ++k) {
        V incl = items[k];
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            const V up = shfl_up_item(incl, d);
            if (lane >= d) incl = op(up, incl);
        }
        const V excl = shfl_up_item(incl, 1);
        items[k] = lane ? op(before, excl) : before;
        before = op(before, shfl_item(incl, 31));
    }
    if (lane == 0) warp_total[warp] = before;
    __syncthreads();
    V above = init;  // the items of the warps before this one
    for (int w = 0; w < warp; ++w) above = op(above, warp_total[w]);
#pragma unroll
    for (int k = 0; k < kOneBlockPerThread; ++k)
        if (first + 32 * k < n) out[first + 32 * k] = op(above, items[k]);
    if constexpr (std::is_same_v<V, uint4>) {
        if (totals && threadIdx.x == 0) {
            V all = init;
            for (int w = 0; w < kWarps; ++w) all = op(all, warp_total[w]);
            totals[0] = all.x, totals[1] = all.y, totals[2] = all.z;
        }
    }
}

// The scan of n items with CUB's two-phase protocol (temp == nullptr: only temp_bytes is set); one block and no
// temporary storage (a size of 0) where n is small. CUB's size query costs host time as well (it looks up the
// device's properties): a chunk-sized fast encode made four of them, all for scans that run in one block.
// totals: passed to k_scan_one_block where the scan runs in one block (uint4 items), else unused.
template <typename V, typename Op>
void exclusive_scan(void *temp, size_t &temp_bytes, const V *in, V *out, uint64_t n, Op op, V init, cudaStream_t s,
                    unsigned long long *totals = nullptr) {
    need_32bit(n);
    if (n <= kOneBlockItems) {
        if (!temp) {
            temp_bytes = 0;
        } else if (n > 0) {
            // Warps past the items would only wait at the barrier, and a block of 1024 threads took 7.7 us for 2048
            // items of 16 bytes (NOTES 131).
            auto launch = [&](auto threads) {
                constexpr int kThreads = decltype(threads)::value;
                launch_dependent("launch of k_scan_one_block", k_scan_one_block<kThreads, V, Op>, 1, kThreads, 0, s, in,
                                 out, (uint32_t)n, op, init, totals);
            };
            if (n <= 128 * kOneBlockPerThread) launch(std::integral_constant<int, 128>{});
            else if (n <= 256 * kOneBlockPerThread) launch(std::integral_constant<int, 256>{});
            else if (n <= 512 * kOneBlockPerThread) launch(std::integral_constant<int, 512>{});
            else launch(std::integral_constant<int, kOneBlockThreads>{});
        }
        return;
    }
    ZB_CUDA(cub::DeviceScan::ExclusiveScan(temp, temp_bytes, in, out, op, init, (uint32_t)n, s));
}

}  // namespace

void exclusive_sum(void *temp, size_t &temp_bytes, const uint32_t *in, uint32_t *out, uint64_t n, cudaStream_t s) {
    exclusive_scan(temp, temp_bytes, in, out, n, AddU32(), 0u, s);
}

void exclusive_sum4(void *temp, size_t &temp_bytes, const uint4 *in, uint4 *out, uint64_t n, cudaStream_t s) {
    exclusive_scan(temp, temp_bytes, in, out, n, AddU4(), make_uint4(0, 0, 0, 0), s);
}

// The totals in the scan's launch where it runs in one block; else zeros (no items) or scan_totals after CUB's.
void exclusive_sum4_totals(void *temp, size_t &temp_bytes, const uint4 *in, uint4 *out, uint64_t n,
                           unsigned long long *totals, cudaStream_t s) {
    exclusive_scan(temp, temp_bytes, in, out, n, AddU4(), make_uint4(0, 0, 0, 0), s, totals);
    if (!temp) return;  // a size query
    if (n == 0) {
        ZB_CUDA(cudaMemsetAsync(totals, 0, 3 * sizeof(unsigned long long), s));
    } else if (n > kOneBlockItems) {
        const uint32_t *off = reinterpret_cast<const uint32_t *>(out), *cnt = reinterpret_cast<const uint32_t *>(in);
        const ScanTotal t[3] = {{off, cnt, n, 4}, {off + 1, cnt + 1, n, 4}, {off + 2, cnt + 2, n, 4}};
        scan_totals(t, 3, totals, s);
    }
}

void exclusive_segmented_sum(void *temp, size_t &temp_bytes, const uint2 *in, uint2 *out, uint64_t n,
                             cudaStream_t s) {
    exclusive_scan(temp, temp_bytes, in, out, n, SegSumU2(), make_uint2(0, 0), s);
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
