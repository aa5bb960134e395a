// The fast encoder's exception stage in one launch of one thread block, for chunk-sized arrays. Included by
// encode.cuh.
//
// Why one block: the stage's separate launches (k_edge_flags, the edges' scan, k_gather_exceptions,
// k_change_bits, two more scans and the totals: about ten kernels, each waiting for the last) took 45-58 us of GPU
// time at 4 MB of TREFHT, a third of the whole compression (NOTES item 90). Here one block makes the same buffers:
//   the edge mask's non-zero 16-byte blocks (E; sparse_copy reads no other block), its flag words and their
//   exclusive offsets (flagE, offE), the exception values in index order (V), the change bits with the runs before
//   each word (C, offR), their flag words and offsets (flagC, offC), and the three totals (stored edge blocks, stored
//   change blocks, runs),
// so that write() and write_at() read them as they read the separate launches' output. The block reads the mask
// words once; it pays where they are few (chunks of up to kExcEncMaxValues values), the separate launches stay for
// larger arrays and exception counts.
// In a fast stream's call the kernel then runs the stream's layout (encode.cuh FastLayout, otherwise k_fast_layout):
// a graph node less. In a graphed call it also scans the tiles' counts first (scan_tile_counts; at 4 MB of TREFHT the
// one-block scan before it was a 3.7 us node, NOTES 133).
#pragma once
#include <cub/block/block_scan.cuh>
#include "block_sum.cuh"
#include "dependent_launch.cuh"
#include "gpu_device.cuh"
#include "zb_format.h"
#include "zb_quant.h"

namespace zb {
namespace gpu {
namespace enc {
// Internal linkage, as encode.cuh's kernels (compiled once per value type).
namespace {

constexpr int kExcEncThreads = 512;
constexpr int kExcEncWarps = kExcEncThreads / 32;
// Mask blocks a warp loads before it uses any (the loads of a batch are in flight together).
constexpr int kExcEncBatch = 8;
// When the one-block form is taken (ExceptionStage::carve): up to 65536 exceptions (the default cap of such arrays,
// exception_cap), and arrays of up to 2^22 values (the mask: 512 KiB) where the host knows the count, up to 2^20
// where the count is on the device (a graph, whose separate launches run on parallel branches: on the H200 the
// block gained 5-10 % of a 1-4 MB device-resident compression of TREFHT and lost 4 % at 16 MB; NOTES item 90).
constexpr uint64_t kExcEncMaxValues = uint64_t(1) << 22;
constexpr uint64_t kExcEncMaxValuesGraphed = uint64_t(1) << 20;
constexpr uint64_t kExcEncMaxExceptions = 65536;
// The change words and their flag groups for that many (exceptions_encode_block keeps them in shared memory).
constexpr uint32_t kExcEncMaxChangeWords = (uint32_t)(kExcEncMaxExceptions / 32);
constexpr uint32_t kExcEncMaxChangeGroups = kExcEncMaxChangeWords / 4 / 32;
// The kernel's indices are 32-bit (exceptions_encode_block): the largest, a value index of the last mask group
// (at most kExcEncMaxValues + 4096), must stay well below 2^32.
static_assert(kExcEncMaxValues <= (uint64_t(1) << 31) && kExcEncMaxExceptions <= (uint64_t(1) << 31),
              "k_exceptions_encode_block's 32-bit indices");

template <typename U>
struct ExcEncodeArgs {
    uint64_t n, kcap, nb_edge, nb_change;      // nb_change: change blocks carved for kcap exceptions
    const unsigned long long *d_k;             // the count on the device, or nullptr: kcap is the count
    U *V;
    uint32_t *E, *flagE, *offE, *C, *offR, *flagC, *offC;
    uint32_t *group_exceptions;                // per edge flag group (128 mask words): its exceptions
    unsigned long long *totals;                // stored edge blocks, stored change blocks, runs
    // Where the tiles' counts are scanned here (a graph node less; counts nullptr: the caller scanned them): the
    // counts, their exclusive scan and its totals (as exclusive_sum4_totals writes them). The count is then the
    // scan's exceptions total, not *d_k.
    const uint4 *counts;
    uint4 *offs;
    uint64_t ntiles;
    unsigned long long *scan_totals;
    // Set where k_encode made the edge mask's blocks and flag words (E and flagE; TileEdges in gpu_device.cuh): the
    // tiles' counts (z: exceptions, w: stored edge blocks) and their exclusive scan (the caller's, or this kernel's
    // into offs). Pass 1 is then skipped: the groups' counts and offsets come from these.
    const uint4 *edge_counts = nullptr, *edge_offs = nullptr;
};

// Bits of block b (words 4b .. 4b+3: values 128b .. 128b+127) at or past n cleared (only the last block has any).
__device__ __forceinline__ uint4 clear_past_n(uint4 v, uint32_t b, uint32_t n) {
    if (128 * (b + 1) <= n) return v;
    return make_uint4(v.x & low_bits(valid_bits(4 * b, n)), v.y & low_bits(valid_bits(4 * b + 1, n)),
                      v.z & low_bits(valid_bits(4 * b + 2, n)), v.w & low_bits(valid_bits(4 * b + 3, n)));
}

// Mask words of block b, bits at or past n cleared; zero past the blocks.
__device__ __forceinline__ uint4 mask_block(const uint32_t *__restrict__ M, uint32_t b, uint32_t nb, uint32_t n) {
    if (b >= nb) return make_uint4(0, 0, 0, 0);
    return clear_past_n(*reinterpret_cast<const uint4 *>(M + 4 * b), b, n);  // 16-byte aligned: carved
}

// Sum of v over lanes 0 .. lane of the warp (all lanes call it).
__device__ __forceinline__ uint32_t warp_inclusive_sum(uint32_t v, int lane) {
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const uint32_t below = __shfl_up_sync(kFullMask, v, o);
        if (lane >= o) v += below;
    }
    return v;
}

// The stage's work for k exceptions (0 < k <= a.kcap), by the whole block.
template <typename T>
__device__ __forceinline__ void exceptions_encode_block(const T *__restrict__ x, const uint32_t *__restrict__ M,
                                                        const ExcEncodeArgs<typename FloatBits<T>::U> &a,
                                                        uint64_t k64) {
    using U = typename FloatBits<T>::U;
    __shared__ BlockSum<kExcEncThreads> block_sum;
    __shared__ uint32_t warp_edges[kExcEncWarps], warp_exceptions[kExcEncWarps];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    // Every index here is 32-bit: the kernel runs only for n <= kExcEncMaxValues (2^22 values, 2^17 mask words,
    // 2^15 mask blocks) and k <= kcap <= kExcEncMaxExceptions (ExceptionStage::carve), so the sums (edge blocks,
    // exceptions, runs) stay below 2^23 too. The host's 64-bit fields made every counter, comparison and product
    // two instructions or more, and this kernel, one block on one SM, is bound by its instruction issue.
    const uint32_t n = (uint32_t)a.n, nb_edge = (uint32_t)a.nb_edge, nb_change = (uint32_t)a.nb_change;
    const uint32_t k = (uint32_t)k64;

    // 1. Warp w takes the edge flag groups [g_begin, g_end) (32 mask blocks each, lane l block 32g + l): the edge
    //    mask E = M xor (M << 1) of its non-zero blocks, the flag words, its stored blocks and each group's
    //    exceptions. Skipped where the tiles made them (a.edge_counts).
    const uint32_t ng_edge = (uint32_t)div_up(nb_edge, 32), per_warp = (uint32_t)div_up(ng_edge, kExcEncWarps);
    const uint32_t g_begin = min(ng_edge, warp * per_warp), g_end = min(ng_edge, g_begin + per_warp);
    const bool tile_edges = a.edge_counts != nullptr;
    uint32_t edges_stored = 0, exceptions_seen = 0;  // this warp's (the same in every lane)
    for (uint32_t g0 = g_begin; g0 < g_end && !tile_edges; g0 += kExcEncBatch) {
        uint4 m[kExcEncBatch];
        uint32_t before[kExcEncBatch];  // lane 0: the last mask word before its block
#pragma unroll
        for (int i = 0; i < kExcEncBatch; ++i) {
            const uint32_t b = 32 * (g0 + i) + lane;
            const bool in = g0 + i < g_end;
            m[i] = in ? mask_block(M, b, nb_edge, n) : make_uint4(0, 0, 0, 0);
            before[i] = in && lane == 0 && b > 0 ? M[4 * b - 1] : 0u;
        }
#pragma unroll
        for (int i = 0; i < kExcEncBatch; ++i) {
            if (g0 + i >= g_end) break;  // the same for the whole warp
            const uint32_t g = g0 + i, b = 32 * g + lane;
            uint32_t prev = __shfl_up_sync(kFullMask, m[i].w, 1) >> 31;
            if (lane == 0) prev = before[i] >> 31;
            // The common case, a group without exceptions and without the end of a run before it: ten instructions
            // where the rest costs over a hundred (one SM's issue rate bounds this pass: NOTES item 90).
            if (!__any_sync(kFullMask, any_bits(m[i]) || prev)) {
                if (lane == 0) {
                    a.flagE[g] = 0;
                    a.group_exceptions[g] = 0;
                }
                continue;
            }
            const uint4 e = make_uint4(edge_bits(m[i].x, prev), edge_bits(m[i].y, m[i].x >> 31),
                                       edge_bits(m[i].z, m[i].y >> 31), edge_bits(m[i].w, m[i].z >> 31));
            // Bits past n: the mask is zero there, but its last one's edge (a run reaching n) is not stored.
            const uint4 ev = clear_past_n(e, b, n);
            const bool stored = any_bits(ev);
            if (stored) *reinterpret_cast<uint4 *>(a.E + 4 * b) = ev;
            const uint32_t fw = __ballot_sync(kFullMask, stored);
            const uint32_t exceptions = __reduce_add_sync(kFullMask, popc16(m[i]));
            if (lane == 0) {
                a.flagE[g] = fw;
                a.group_exceptions[g] = exceptions;
            }
            edges_stored += __popc(fw);
            exceptions_seen += exceptions;
        }
    }
    if (lane == 0) {
        warp_edges[warp] = edges_stored;
        warp_exceptions[warp] = exceptions_seen;
    }
    __syncthreads();

    // 2. Each warp again over its groups, 32 at a time (lane l: group g + l): the flag words' offsets, and for the
    //    groups with exceptions their values at their ranks. Group g is tiles 2g and 2g + 1: where the tiles made
    //    the edges, its offsets are their scan's at tile 2g.
    uint32_t edge_at = 0, exception_at = 0;
    for (int w = 0; w < warp; ++w) {
        edge_at += warp_edges[w];
        exception_at += warp_exceptions[w];
    }
    for (uint32_t g0 = g_begin; g0 < g_end; g0 += 32) {
        const uint32_t g = g0 + lane;
        uint32_t ge = 0, group_at = 0;
        if (tile_edges) {
            if (g < g_end) {
                const uint4 before = a.edge_offs[2 * g];
                ge = a.edge_counts[2 * g].z + (2 * g + 1 < a.ntiles ? a.edge_counts[2 * g + 1].z : 0u);
                a.offE[g] = before.w;
                group_at = before.z;
            }
        } else {
            const uint32_t fw = g < g_end ? a.flagE[g] : 0u;
            ge = g < g_end ? a.group_exceptions[g] : 0u;
            // Inclusive sums over the lanes (made exclusive below).
            const uint32_t fw_before = warp_inclusive_sum(__popc(fw), lane), ge_before = warp_inclusive_sum(ge, lane);
            if (g < g_end) a.offE[g] = edge_at + fw_before - __popc(fw);
            group_at = exception_at + ge_before - ge;
            edge_at += __shfl_sync(kFullMask, fw_before, 31);
            exception_at += __shfl_sync(kFullMask, ge_before, 31);
        }
        for (uint32_t busy = __ballot_sync(kFullMask, ge != 0); busy; busy &= busy - 1) {
            const int src = __ffs(busy) - 1;
            const uint32_t gg = g0 + src, b = 32 * gg + lane;
            uint32_t rank = __shfl_sync(kFullMask, group_at, src);
            const uint4 m = mask_block(M, b, nb_edge, n);
            const uint32_t c = popc16(m);
            rank += warp_inclusive_sum(c, lane) - c;
            const uint32_t words[4] = {m.x, m.y, m.z, m.w};
#pragma unroll
            for (int wi = 0; wi < 4; ++wi)
                for (uint32_t bits = words[wi]; bits; bits &= bits - 1, ++rank)
                    if (rank < k) a.V[rank] = bits_of(x[128 * b + 32 * wi + (__ffs(bits) - 1)]);
        }
    }
    __syncthreads();  // V complete

    // 3. Change bits C[j] = (j == 0 || V[j] != V[j-1]) over the carved words (zero past k), kept in shared memory
    //    (sC) for the runs and flags below: the words that hold exceptions a warp each (lane l: value 32 w + l, its
    //    value before from the lane before, lane 0 loading it beside its own), the others zero. (A thread per run of
    //    words read its values one load after another: at 4 MB of TREFHT, thread 0 alone, seven round trips to the L2
    //    in series.) Then each thread's run of words: stored, their runs summed, the runs before each word (offR).
    __shared__ __align__(16) uint32_t sC[kExcEncMaxChangeWords];  // read as uint4 in step 4
    __shared__ uint32_t sFlagC[kExcEncMaxChangeGroups];
    const uint32_t nw_change = 4 * nb_change, per_thread = (uint32_t)div_up(nw_change, kExcEncThreads);
    const uint32_t nw_k = (uint32_t)div_up(k, 32);  // words with exceptions
    for (uint32_t w = warp; w < nw_k; w += kExcEncWarps) {
        const uint32_t j = 32 * w + lane;
        const U v = j < k ? a.V[j] : U(0);
        const U v_before = lane == 0 && j > 0 ? a.V[j - 1] : U(0);
        U before = __shfl_up_sync(kFullMask, v, 1);
        if (lane == 0) before = v_before;
        const uint32_t word = __ballot_sync(kFullMask, j < k && (j == 0 || v != before));
        if (lane == 0) sC[w] = word;
    }
    for (uint32_t w = nw_k + threadIdx.x; w < nw_change; w += kExcEncThreads) sC[w] = 0;
    __syncthreads();  // sC complete
    const uint32_t w_begin = min(nw_change, threadIdx.x * per_thread), w_end = min(nw_change, w_begin + per_thread);
    uint32_t my_runs = 0;
    for (uint32_t w = w_begin; w < w_end; ++w) {
        a.C[w] = sC[w];
        my_runs += __popc(sC[w]);
    }
    uint64_t runs = 0;  // BlockSum's sums are 64-bit
    uint32_t run_at = (uint32_t)block_sum.exclusive(my_runs, runs);
    for (uint32_t w = w_begin; w < w_end; ++w) {
        a.offR[w] = run_at;
        run_at += __popc(sC[w]);
    }

    // 4. The change bits' flag words (a warp per group of 32 blocks, from sC) and their offsets.
    const uint32_t ng_change = (uint32_t)div_up(nb_change, 32);
    for (uint32_t g = warp; g < ng_change; g += kExcEncWarps) {
        const uint32_t b = 32 * g + lane;
        const bool stored = b < nb_change && any_bits(reinterpret_cast<const uint4 *>(sC)[b]);
        const uint32_t fw = __ballot_sync(kFullMask, stored);
        if (lane == 0) a.flagC[g] = sFlagC[g] = fw;
    }
    __syncthreads();
    uint64_t changes_stored = 0;
    for (uint32_t g0 = 0; g0 < ng_change; g0 += kExcEncThreads) {
        const uint32_t g = g0 + threadIdx.x;
        const uint32_t at = (uint32_t)block_sum.exclusive(g < ng_change ? __popc(sFlagC[g]) : 0u, changes_stored);
        if (g < ng_change) a.offC[g] = at;
    }
    if (threadIdx.x == 0) {
        uint32_t edges = 0;
        for (int w = 0; w < kExcEncWarps; ++w) edges += warp_edges[w];
        if (tile_edges) edges = a.edge_offs[a.ntiles - 1].w + a.edge_counts[a.ntiles - 1].w;
        a.totals[0] = edges;
        a.totals[1] = changes_stored;
        a.totals[2] = runs;
    }
}

// The tiles' counts' exclusive scan into a.offs, and the sums of their x, y and z into a.scan_totals, as
// exclusive_sum4_totals makes them, by the whole block. Returns the exceptions' total (z) in every thread.
template <typename U>
__device__ __forceinline__ uint64_t scan_tile_counts(const ExcEncodeArgs<U> &a) {
    using Scan = cub::BlockScan<uint4, kExcEncThreads>;
    __shared__ typename Scan::TempStorage scan_tmp;
    const uint4 zero = make_uint4(0, 0, 0, 0);
    uint4 running = zero;
    for (uint64_t t0 = 0; t0 < a.ntiles; t0 += kExcEncThreads) {
        const uint64_t t = t0 + threadIdx.x;
        uint4 before, total;
        Scan(scan_tmp).ExclusiveScan(t < a.ntiles ? a.counts[t] : zero, before, zero, AddU4(), total);
        __syncthreads();  // scan_tmp again in the next round
        if (t < a.ntiles) a.offs[t] = AddU4()(running, before);
        running = AddU4()(running, total);
    }
    if (threadIdx.x == 0) {
        a.scan_totals[0] = running.x;
        a.scan_totals[1] = running.y;
        a.scan_totals[2] = running.z;
    }
    return running.z;
}

// What the kernel runs after the stage where the caller lays out the stream itself.
struct NoTail {
    __device__ void operator()() const {}
};

// x: the values, M: the exception mask words (k_quantize's, zero past n). tail(): run by the whole block at the end
// (every thread, whatever the count), after the totals are written: the fast stream's layout (encode.cuh
// FastLayout) or NoTail. With a.counts, the tiles' counts are scanned first (scan_tile_counts), whatever the count:
// a call with more exceptions than the buffers hold runs the stage again with the scan's offsets.
template <typename T, typename Tail>
__global__ void __launch_bounds__(kExcEncThreads)
k_exceptions_encode_block(const T *__restrict__ x, const uint32_t *__restrict__ M,
                          ExcEncodeArgs<typename FloatBits<T>::U> a, Tail tail) {
    wait_for_prior_grids();  // before any memory access (launch_dependent)
    // None: the layout writes empty segments; more than the buffers hold: the layout has the call run again.
    const uint64_t k = a.counts ? scan_tile_counts(a) : a.d_k ? *a.d_k : a.kcap;
    if (a.counts && a.edge_counts) __syncthreads();  // pass 2 reads offs that other threads wrote
    if (k != 0 && k <= a.kcap) exceptions_encode_block<T>(x, M, a, k);
    __syncthreads();  // the totals, for the tail
    tail();
}

}  // namespace
}  // namespace enc
}  // namespace gpu
}  // namespace zb
