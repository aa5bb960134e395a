// The fast decoder's exceptions for chunk-sized arrays with few exceptions: one thread block reads the exception
// segments (k_exceptions_prepare), then k_exceptions_scatter writes the values; and the value lookup that every
// exception path shares (exception_value). Included by decode.cuh.
//
// Why one block: the interval path (decode.cuh's ExceptionDecoder) is about 17 launches of tiny kernels and scans,
// each waiting for the last. At 4 MB of TREFHT they took 0.08 ms of GPU time, as much as the tiles and the prefix
// together, and about as much host time to queue (RESULTS, session 25). Here one block walks the same steps with
// block-wide scans and makes the same checks with the same error bits; after a step that found the stream
// inconsistent it stops (the call fails whatever would follow). The multi-kernel path stays for larger arrays and
// exception counts, where the block's serial loops would cost more than the launches.
//
// Why two kernels: only the last step writes the output. The block's steps read nothing but the stream, so a graph
// runs them on a branch beside the tiles and the prefix, and only the short scatter follows the values (the one
// kernel of all six steps was 7.3-7.8 us at 4 MB, on the call's critical path: NOTES 143).
#pragma once
#include "block_sum.cuh"
#include "dependent_launch.cuh"
#include "gpu_device.cuh"
#include "zb_quant.h"

namespace zb {
namespace gpu {
namespace dec {
// Internal linkage, as decode.cuh's kernels (compiled once per value type).
namespace {

// The value of exception j (rank among exceptions): run r = (ones of C in [0, j]) - 1 of the change bits, little-
// endian bytes of the run values; false (and an error bit) where the change bits do not give a run.
// I is the index type: uint64_t, or uint32_t in k_exceptions_scatter (where offR's offsets and runs are at most k, so
// `ones` and the byte offset do not wrap).
template <typename T, typename I>
__device__ __forceinline__ bool exception_value(I j, const uint32_t *__restrict__ C, const uint32_t *__restrict__ offR,
                                                I runs, const uint8_t *__restrict__ values, uint32_t *__restrict__ err,
                                                T &v) {
    using U = typename FloatBits<T>::U;
    const I ones = (I)offR[j >> 5] + (I)__popc(C[j >> 5] & low_bits((int)(j & 31) + 1));
    if (ones == 0 || ones > runs) {
        set_error(err, kErrChangeBits);
        return false;
    }
    const uint8_t *src_bytes = values + (ones - 1) * (I)sizeof(T);
    U u = 0;
#pragma unroll
    for (int b = 0; b < (int)sizeof(T); ++b) u |= (U)src_bytes[b] << (8 * b);
    v = from_bits<T>(u);
    return true;
}

constexpr int kExcThreads = 512;
// Interval offsets searched in shared memory (each exception looks up its interval); past it, in global memory.
constexpr uint64_t kExcSharedIntervals = 4096;
// When the one-block form is taken (ExceptionDecoder::init): each bounds one of the block's loops.
constexpr uint64_t kExcMaxFlagWords = 16384;  // edge flag words: arrays up to 2^26 values
constexpr uint64_t kExcMaxStored = 2048;      // stored edge blocks
constexpr uint64_t kExcMaxExceptions = 16384;
// The kernels' indices are 32-bit (k_exceptions_prepare, _scatter): the largest, an output index (a value index below
// n <= 4096 * kExcMaxFlagWords, plus an offset below k), and the values' byte offsets (below 8k) must stay well below
// 2^32, as the edges (at most 128 * kExcMaxStored).
static_assert(kExcMaxFlagWords <= (uint64_t(1) << 18) && kExcMaxStored <= (uint64_t(1) << 22) &&
                  kExcMaxExceptions <= (uint64_t(1) << 27),
              "the exception kernels' 32-bit indices");

// What the block needs besides the segments: the counts of ExceptionDecoder::init and the interval path's buffers.
struct ExcBlockArgs {
    uint64_t n, k, runs, nb_edge, ng_edge, edge_stored, nb_change, ng_change, nw_change, change_stored;
    uint64_t *block_of, *edges;
    uint32_t *len_off, *flagC, *offC, *C, *offR;
    uint32_t *intervals;  // one word: the count of intervals, from k_exceptions_prepare to k_exceptions_scatter
};

// The error bits of the exception steps: k_exceptions_scatter writes nothing where k_exceptions_prepare set one.
constexpr uint32_t kErrExceptionSteps = kErrEdgeSparse | kErrEdgeBits | kErrChangeSparse | kErrChangeBits;

// True (and the error bit set once) where any thread of the block found `bad`.
__device__ __forceinline__ bool block_failed(bool bad, uint32_t *err, uint32_t bit) {
    const bool any = __syncthreads_or(bad) != 0;
    if (any && threadIdx.x == 0) set_error(err, bit);
    return any;
}

// Steps 1-5 of the interval path from four of the exception segments (edge flags, edge blocks, change flags, change
// blocks): the edges' positions (a.edges), the intervals' offsets (a.len_off) and count (*a.intervals), the change
// bits (a.C) and each word's run offset (a.offR), every count checked. One block.
__global__ void __launch_bounds__(kExcThreads)
k_exceptions_prepare(ExcBlockArgs a, const uint8_t *__restrict__ edge_flags, const uint8_t *__restrict__ edge_blocks,
                     const uint8_t *__restrict__ change_flags, const uint8_t *__restrict__ change_blocks,
                     uint32_t *__restrict__ err) {
    wait_for_prior_grids();  // before any memory access (launch_dependent)
    __shared__ BlockSum<kExcThreads> block_sum;
    // Every index here is 32-bit. The kernel runs only where ExceptionDecoder::init chose it: ng_edge <=
    // kExcMaxFlagWords (nb_edge <= 2^19 blocks, so n <= 2^26; nb_edge >= 64 edge_stored > 0 rules out div_up's wrap
    // at n near 2^64), edge_stored <= kExcMaxStored and 0 < k <= kExcMaxExceptions (nb_change <= 128, nw_change <=
    // 512). So the stored blocks' indices and ranks stay at most 2^19, the positions below n, the edges at most 2^18,
    // the change blocks' and runs' offsets at most k (static_assert above). The host's 64-bit fields made every
    // counter, comparison and product two instructions or more, and this kernel, one block on one SM, is bound by
    // its instruction issue. Values read back from block_of and edges (64-bit: the interval path's buffers) are
    // narrowed only after the step that wrote them passed its checks. The two counts that init does not bound (runs
    // from the header, change_stored from a segment's length) are compared in 64 bits, as BlockSum's sums are; runs
    // is narrowed only once it equals the change bits' ones.
    const uint32_t n = (uint32_t)a.n, k = (uint32_t)a.k, nb_edge = (uint32_t)a.nb_edge, ng_edge = (uint32_t)a.ng_edge;
    const uint32_t edge_stored = (uint32_t)a.edge_stored, nb_change = (uint32_t)a.nb_change;
    const uint32_t ng_change = (uint32_t)a.ng_change, nw_change = (uint32_t)a.nw_change;
    const uint32_t tid = threadIdx.x;
    bool bad = false;

    // 1. Edge flags -> the index of each stored edge block (k_sparse_read_flags, k_edge_blocks).
    uint64_t stored = 0;  // BlockSum's sums are 64-bit
    for (uint32_t g0 = 0; g0 < ng_edge; g0 += kExcThreads) {
        const uint32_t g = g0 + tid;
        uint32_t fw = g < ng_edge ? sparse_flag_word(edge_flags, g, nb_edge, bad) : 0u;
        uint32_t rank = (uint32_t)block_sum.exclusive(__popc(fw), stored);  // at most 32 ng_edge
        for (; fw && rank < edge_stored; fw &= fw - 1, ++rank) a.block_of[rank] = 32 * g + (__ffs(fw) - 1);
    }
    if (block_failed(bad || stored != edge_stored, err, kErrEdgeSparse)) return;

    // 2. Stored blocks -> the edges' positions, in order (k_edge_counts, k_edge_positions).
    uint64_t nedges64 = 0;
    for (uint32_t j0 = 0; j0 < edge_stored; j0 += kExcThreads) {
        const uint32_t j = j0 + tid;
        const uint4 v = j < edge_stored ? load16(edge_blocks + 16 * j) : make_uint4(0, 0, 0, 0);
        uint32_t at = (uint32_t)block_sum.exclusive(popc16(v), nedges64);
        if (j >= edge_stored) continue;
        // Written by step 1 for every rank below edge_stored (its count checked): below 32 ng_edge.
        const uint32_t block = (uint32_t)a.block_of[j];
        const uint32_t words[4] = {v.x, v.y, v.z, v.w};
        for (int w = 0; w < 4; ++w)
            for (uint32_t bits = words[w]; bits; bits &= bits - 1) {
                const uint32_t pos = 128 * block + 32 * w + (__ffs(bits) - 1);
                if (pos >= n) bad = true;
                a.edges[at++] = pos;
            }
    }
    if (block_failed(bad, err, kErrEdgeBits)) return;
    const uint32_t nedges = (uint32_t)nedges64;  // at most 128 edge_stored

    // 3. Intervals [edges[2i], edges[2i+1]) (the last one open to n when the count is odd): lengths and their
    // offsets, which are the ranks of their first exceptions (k_interval_lengths, its scan, k_expect_total).
    const uint32_t intervals = (nedges + 1) / 2;
    uint64_t total = 0;
    for (uint32_t i0 = 0; i0 < intervals; i0 += kExcThreads) {
        const uint32_t i = i0 + tid;
        uint32_t len = 0;
        if (i < intervals) {
            // Every edge below n (step 2).
            const uint32_t lo = (uint32_t)a.edges[2 * i], hi = 2 * i + 1 < nedges ? (uint32_t)a.edges[2 * i + 1] : n;
            len = hi > lo ? hi - lo : 0;
            if (len > k) {
                bad = true;
                len = 0;
            }
        }
        const uint32_t off = (uint32_t)block_sum.exclusive(len, total);  // below k < 2^32 when the total checks out
        if (i < intervals) a.len_off[i] = off;
    }
    if (block_failed(bad || total != k, err, kErrEdgeBits)) return;
    if (tid == 0) *a.intervals = intervals;

    // 4. Change-bit flags and blocks -> the change bits C (k_sparse_read_flags, its scan, k_sparse_expand).
    uint64_t change_found = 0;
    for (uint32_t g0 = 0; g0 < ng_change; g0 += kExcThreads) {
        const uint32_t g = g0 + tid;
        const uint32_t fw = g < ng_change ? sparse_flag_word(change_flags, g, nb_change, bad) : 0u;
        const uint32_t off = (uint32_t)block_sum.exclusive(__popc(fw), change_found);  // at most nb_change
        if (g < ng_change) {
            a.flagC[g] = fw;
            a.offC[g] = off;
        }
    }
    // change_stored is the change blocks segment's length / 16: 64 bits.
    if (block_failed(bad || change_found != a.change_stored, err, kErrChangeSparse)) return;
    const uint32_t change_bytes = (k + 7) / 8;
    for (uint32_t b = tid; b < nb_change; b += kExcThreads) {
        const uint32_t fw = a.flagC[b >> 5];
        const int bit = (int)(b & 31);
        uint4 v = make_uint4(0, 0, 0, 0);
        if ((fw >> bit) & 1) {
            v = load16(change_blocks + 16 * (a.offC[b >> 5] + __popc(fw & low_bits(bit))));
            // Bytes past the end of the string must be zero, as the encoder wrote them.
            if (b == nb_change - 1 && !tail_bytes_zero(v, change_bytes - 16 * (nb_change - 1))) bad = true;
        }
        reinterpret_cast<uint4 *>(a.C)[b] = v;
    }
    if (block_failed(bad, err, kErrChangeSparse)) return;

    // 5. Change bits: none past k, the first one set, `runs` in all; each word's run offset (k_change_check, its
    // scan, k_expect_total).
    uint64_t ones = 0;
    for (uint32_t w0 = 0; w0 < nw_change; w0 += kExcThreads) {
        const uint32_t w = w0 + tid;
        uint32_t c = 0;
        if (w < nw_change) {
            c = a.C[w];
            const uint32_t valid = low_bits(valid_bits(w, k));
            if ((c & ~valid) || (w == 0 && !(c & 1u))) bad = true;
            c &= valid;
        }
        const uint32_t off = (uint32_t)block_sum.exclusive(__popc(c), ones);  // at most k
        if (w < nw_change) a.offR[w] = off;
    }
    // runs is the header's: 64 bits; equal to the ones, it is at most k.
    block_failed(bad || ones != a.runs, err, kErrChangeBits);
}

// Step 6: each exception's value (the values segment) at its position, where k_exceptions_prepare's checks passed:
// rank j lies in the last interval whose offset is <= j (offset 0 for the first, so j - first does not wrap). A
// thread per exception, the intervals' offsets searched in shared memory where they fit.
template <typename T>
__global__ void __launch_bounds__(kExcThreads)
k_exceptions_scatter(ExcBlockArgs a, const uint8_t *__restrict__ values, T *__restrict__ out,
                     uint32_t *__restrict__ err) {
    wait_for_prior_grids();  // before any memory access (launch_dependent)
    __shared__ uint32_t s_len_off[kExcSharedIntervals];
    // Prepare's bits are final here; one thread reads them for the block (another block's exception_value may set
    // kErrChangeBits meanwhile, and the block must leave together: the barrier below).
    if (__syncthreads_or(threadIdx.x == 0 && (*(volatile uint32_t *)err & kErrExceptionSteps) != 0)) return;
    const uint32_t k = (uint32_t)a.k, runs = (uint32_t)a.runs, intervals = *a.intervals;
    const bool offsets_shared = intervals <= kExcSharedIntervals;
    if (offsets_shared)
        for (uint32_t i = threadIdx.x; i < intervals; i += kExcThreads) s_len_off[i] = a.len_off[i];
    __syncthreads();
    const uint32_t *len_off = offsets_shared ? s_len_off : a.len_off;
    for (uint32_t j = blockIdx.x * kExcThreads + threadIdx.x; j < k; j += gridDim.x * kExcThreads) {
        uint32_t lo = 0, hi = intervals;
        while (hi - lo > 1) {
            const uint32_t mid = (lo + hi) / 2;
            if (len_off[mid] <= j) lo = mid;
            else hi = mid;
        }
        T v;
        if (exception_value<T>(j, a.C, a.offR, runs, values, err, v))
            out[(uint32_t)a.edges[2 * lo] + (j - len_off[lo])] = v;
    }
}

}  // namespace
}  // namespace dec
}  // namespace gpu
}  // namespace zb
