// What the kernels that walk a whole stage in one thread block share (the fast decoder's exceptions_block.cuh, the
// fast encoder's exceptions_encode_block.cuh): a running exclusive sum over the block, and the switch back to the
// stages' separate launches.
#pragma once
#include <cub/block/block_scan.cuh>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace zb {
namespace gpu {

// A running exclusive sum over the Threads threads of a block; declare it __shared__.
template <int Threads>
struct BlockSum {
    typename cub::BlockScan<uint64_t, Threads>::TempStorage tmp;

    // Exclusive sum over the block of each thread's v, plus `running` (the same in every thread), which then
    // advances by the block's total. Every thread of the block must call it; the barrier after the scan lets loops
    // call it again.
    __device__ __forceinline__ uint64_t exclusive(uint64_t v, uint64_t &running) {
        uint64_t before, total;
        cub::BlockScan<uint64_t, Threads>(tmp).ExclusiveSum(v, before, total);
        __syncthreads();
        before += running;
        running += total;
        return before;
    }
};

// ZBOUND_GPU_EXCEPTION_BLOCK=0 keeps the exception stages' separate launches in both directions (comparisons,
// tests of both forms); read on every call so that a test can switch it.
inline bool exception_block_enabled() {
    const char *e = std::getenv("ZBOUND_GPU_EXCEPTION_BLOCK");
    return !(e && std::strcmp(e, "0") == 0);
}

}  // namespace gpu
}  // namespace zb
