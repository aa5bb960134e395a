// Decoupled look-back (Merrill and Garland, "Single-pass Parallel Prefix Scan with Decoupled Look-back", 2016) over
// per-tile values of four 32-bit words combined by an associative operator (sums of counters, or a segmented sum):
// each tile learns what the tiles before it add up to inside the kernel that computes its own value, so that it can
// write its output at its final place without a scan launch in between (the chunk-sized paths, chunk_encode.cuh and
// chunk_decode.cuh).
//
// Protocol: tile t publishes its own value (an "aggregate") as soon as it has it, then looks back: a warp reads the
// states of the 32 tiles before a point, waits while any of them has published nothing, and combines aggregates from
// the nearest tile back to the first that has published its inclusive value (its own combined with everything before
// it), which ends the walk; otherwise it moves 32 tiles further back. Tile t then publishes its inclusive value. Tiles
// must be handed to thread blocks in order (a ticket counter, not blockIdx): a block then only waits for blocks that
// started before it and never wait for it, so the walk cannot deadlock however the blocks are scheduled.
//
// Memory order: a state word is written with a release store after the value it announces, and read with an acquire
// load before that value is read (from the L2, __ldcg: other SMs wrote it during this kernel).
#pragma once
#include <cuda/atomic>
#include <cuda_runtime.h>
#include <cstdint>
#include "gpu_device.cuh"

namespace zb {
namespace gpu {

// State words: any value but these two means "nothing published yet", so that a memset of 0 or of 0xFF prepares them.
constexpr uint32_t kLbAggregate = 1, kLbInclusive = 2;

struct Lookback {
    uint32_t *state;  // per tile, neither kLbAggregate nor kLbInclusive before the call
    uint4 *agg;       // per tile: its own value (valid once state says kLbAggregate or more)
    uint4 *incl;      // per tile: its value combined with those of every tile before it (state kLbInclusive)
};

// Sums of four counters.
struct SumOp {
    __device__ __forceinline__ uint4 operator()(uint4 earlier, uint4 later) const {
        return make_uint4(earlier.x + later.x, earlier.y + later.y, earlier.z + later.z, earlier.w + later.w);
    }
};

__device__ __forceinline__ uint32_t lb_state(uint32_t *word) {
    return cuda::atomic_ref<uint32_t, cuda::thread_scope_device>(*word).load(cuda::memory_order_acquire);
}
__device__ __forceinline__ void lb_publish(uint32_t *word, uint32_t v) {
    cuda::atomic_ref<uint32_t, cuda::thread_scope_device>(*word).store(v, cuda::memory_order_release);
}

// Publishes tile t's value (its aggregate, or with kLbInclusive its inclusive value). One thread.
__device__ __forceinline__ void lookback_publish(const Lookback &lb, uint64_t t, uint4 v, uint32_t state) {
    __stcg((state == kLbInclusive ? lb.incl : lb.agg) + t, v);
    lb_publish(lb.state + t, state);
}

__device__ __forceinline__ uint4 shfl_down4(uint4 v, int d) {
    return make_uint4(__shfl_down_sync(kFullMask, v.x, d), __shfl_down_sync(kFullMask, v.y, d),
                      __shfl_down_sync(kFullMask, v.z, d), __shfl_down_sync(kFullMask, v.w, d));
}

// The combined value of the tiles before t (`identity` for t == 0), by one whole warp (the result in every lane),
// without publishing anything: the caller publishes t's own value before (lookback_exclusive) or, where its own value
// needs this one first, its inclusive value after.
template <class Op>
__device__ __forceinline__ uint4 lookback_walk(const Lookback &lb, uint64_t t, uint4 identity, Op op) {
    const int lane = threadIdx.x & 31;
    uint4 before = identity;
    for (int64_t top = (int64_t)t - 1; top >= 0; top -= 32) {
        const int64_t idx = top - lane;  // lanes past tile 0 act as an inclusive identity
        uint32_t st;
        for (;;) {
            st = idx >= 0 ? lb_state(lb.state + idx) : kLbInclusive;
            if (__all_sync(kFullMask, st == kLbAggregate || st == kLbInclusive)) break;
            __nanosleep(32);
        }
        const uint32_t inclusive = __ballot_sync(kFullMask, st == kLbInclusive);
        const int stop = inclusive ? __ffs(inclusive) - 1 : 31;  // the nearest tile with its inclusive value
        uint4 v = identity;
        if (idx >= 0 && lane <= stop) v = lane < stop || !inclusive ? __ldcg(lb.agg + idx) : __ldcg(lb.incl + idx);
        // Lane l holds tile top - l: combine in tile order, the earlier (higher lane) on the left.
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            const uint4 earlier = shfl_down4(v, d);
            if ((lane & (2 * d - 1)) == 0) v = op(earlier, v);  // lane + d < 32 here
        }
        before = op(make_uint4(__shfl_sync(kFullMask, v.x, 0), __shfl_sync(kFullMask, v.y, 0),
                               __shfl_sync(kFullMask, v.z, 0), __shfl_sync(kFullMask, v.w, 0)),
                    before);
        if (inclusive) break;
    }
    return before;
}

// Publishes tile t's value `own`, walks back and publishes its inclusive value; returns the value of the tiles
// before t (exclusive prefix) in every lane. One whole warp.
template <class Op>
__device__ __forceinline__ uint4 lookback_exclusive(const Lookback &lb, uint64_t t, uint4 own, uint4 identity, Op op) {
    const int lane = threadIdx.x & 31;
    if (lane == 0 && t > 0) lookback_publish(lb, t, own, kLbAggregate);
    const uint4 before = lookback_walk(lb, t, identity, op);
    if (lane == 0) lookback_publish(lb, t, op(before, own), kLbInclusive);
    return before;
}

}  // namespace gpu
}  // namespace zb
