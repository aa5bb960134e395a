// The fast decoder's exceptions in one launch of one thread block, for chunk-sized arrays with few exceptions, and
// the value lookup that every exception path shares (exception_value). Included by decode.cuh.
//
// Why one block: the interval path (decode.cuh's ExceptionDecoder) is about 17 launches of tiny kernels and scans,
// each waiting for the last. At 4 MB of TREFHT they took 0.08 ms of GPU time, as much as the tiles and the prefix
// together, and about as much host time to queue (RESULTS, session 25). Here one block walks the same steps with
// block-wide scans and makes the same checks with the same error bits; after a step that found the stream
// inconsistent it stops (the call fails whatever would follow). The multi-kernel path stays for larger arrays and
// exception counts, where the block's serial loops would cost more than the launches.
#pragma once
#include "block_sum.cuh"
#include "gpu_device.cuh"
#include "zb_quant.h"

namespace zb {
namespace gpu {
namespace dec {
// Internal linkage, as decode.cuh's kernels (compiled once per value type).
namespace {

// The value of exception j (rank among exceptions): run r = (ones of C in [0, j]) - 1 of the change bits, little-
// endian bytes of the run values; false (and an error bit) where the change bits do not give a run.
template <typename T>
__device__ __forceinline__ bool exception_value(uint64_t j, const uint32_t *__restrict__ C,
                                                const uint32_t *__restrict__ offR, uint64_t runs,
                                                const uint8_t *__restrict__ values, uint32_t *__restrict__ err, T &v) {
    using U = typename FloatBits<T>::U;
    const uint64_t ones = (uint64_t)offR[j >> 5] + __popc(C[j >> 5] & low_bits((int)(j & 31) + 1));
    if (ones == 0 || ones > runs) {
        set_error(err, kErrChangeBits);
        return false;
    }
    const uint8_t *src_bytes = values + (ones - 1) * sizeof(T);
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

// What the block needs besides the segments: the counts of ExceptionDecoder::init and the interval path's buffers.
struct ExcBlockArgs {
    uint64_t n, k, runs, nb_edge, ng_edge, edge_stored, nb_change, ng_change, nw_change, change_stored;
    uint64_t *block_of, *edges;
    uint32_t *len_off, *flagC, *offC, *C, *offR;
};

// True (and the error bit set once) where any thread of the block found `bad`.
__device__ __forceinline__ bool block_failed(bool bad, uint32_t *err, uint32_t bit) {
    const bool any = __syncthreads_or(bad) != 0;
    if (any && threadIdx.x == 0) set_error(err, bit);
    return any;
}

// seg: the five exception segments (edge flags, edge blocks, change flags, change blocks, values).
template <typename T>
__global__ void __launch_bounds__(kExcThreads)
k_exceptions_block(ExcBlockArgs a, const uint8_t *__restrict__ edge_flags, const uint8_t *__restrict__ edge_blocks,
                   const uint8_t *__restrict__ change_flags, const uint8_t *__restrict__ change_blocks,
                   const uint8_t *__restrict__ values, T *__restrict__ out, uint32_t *__restrict__ err) {
    __shared__ BlockSum<kExcThreads> block_sum;
    __shared__ uint32_t s_len_off[kExcSharedIntervals];
    const uint64_t tid = threadIdx.x;
    bool bad = false;

    // 1. Edge flags -> the index of each stored edge block (k_sparse_read_flags, k_edge_blocks).
    uint64_t stored = 0;
    for (uint64_t g0 = 0; g0 < a.ng_edge; g0 += kExcThreads) {
        const uint64_t g = g0 + tid;
        uint32_t fw = g < a.ng_edge ? sparse_flag_word(edge_flags, g, a.nb_edge, bad) : 0u;
        uint64_t rank = block_sum.exclusive(__popc(fw), stored);
        for (; fw && rank < a.edge_stored; fw &= fw - 1, ++rank) a.block_of[rank] = 32 * g + (__ffs(fw) - 1);
    }
    if (block_failed(bad || stored != a.edge_stored, err, kErrEdgeSparse)) return;

    // 2. Stored blocks -> the edges' positions, in order (k_edge_counts, k_edge_positions).
    uint64_t nedges = 0;
    for (uint64_t j0 = 0; j0 < a.edge_stored; j0 += kExcThreads) {
        const uint64_t j = j0 + tid;
        const uint4 v = j < a.edge_stored ? load16(edge_blocks + 16 * j) : make_uint4(0, 0, 0, 0);
        uint64_t at = block_sum.exclusive(popc16(v), nedges);
        if (j >= a.edge_stored) continue;
        const uint32_t words[4] = {v.x, v.y, v.z, v.w};
        for (int w = 0; w < 4; ++w)
            for (uint32_t bits = words[w]; bits; bits &= bits - 1) {
                const uint64_t pos = 128 * a.block_of[j] + 32 * (uint64_t)w + (uint64_t)(__ffs(bits) - 1);
                if (pos >= a.n) bad = true;
                a.edges[at++] = pos;
            }
    }
    if (block_failed(bad, err, kErrEdgeBits)) return;

    // 3. Intervals [edges[2i], edges[2i+1]) (the last one open to n when the count is odd): lengths and their
    // offsets, which are the ranks of their first exceptions (k_interval_lengths, its scan, k_expect_total).
    const uint64_t intervals = (nedges + 1) / 2;
    uint64_t total = 0;
    for (uint64_t i0 = 0; i0 < intervals; i0 += kExcThreads) {
        const uint64_t i = i0 + tid;
        uint64_t len = 0;
        if (i < intervals) {
            const uint64_t lo = a.edges[2 * i], hi = 2 * i + 1 < nedges ? a.edges[2 * i + 1] : a.n;
            len = hi > lo ? hi - lo : 0;
            if (len > a.k) {
                bad = true;
                len = 0;
            }
        }
        const uint64_t off = block_sum.exclusive(len, total);
        if (i < intervals) {
            a.len_off[i] = (uint32_t)off;  // below k < 2^32 when the total checks out
            if (i < kExcSharedIntervals) s_len_off[i] = (uint32_t)off;
        }
    }
    if (block_failed(bad || total != a.k, err, kErrEdgeBits)) return;

    // 4. Change-bit flags and blocks -> the change bits C (k_sparse_read_flags, its scan, k_sparse_expand).
    uint64_t change_found = 0;
    for (uint64_t g0 = 0; g0 < a.ng_change; g0 += kExcThreads) {
        const uint64_t g = g0 + tid;
        const uint32_t fw = g < a.ng_change ? sparse_flag_word(change_flags, g, a.nb_change, bad) : 0u;
        const uint64_t off = block_sum.exclusive(__popc(fw), change_found);
        if (g < a.ng_change) {
            a.flagC[g] = fw;
            a.offC[g] = (uint32_t)off;
        }
    }
    if (block_failed(bad || change_found != a.change_stored, err, kErrChangeSparse)) return;
    const uint64_t change_bytes = (a.k + 7) / 8;
    for (uint64_t b = tid; b < a.nb_change; b += kExcThreads) {
        const uint32_t fw = a.flagC[b >> 5];
        const int bit = (int)(b & 31);
        uint4 v = make_uint4(0, 0, 0, 0);
        if ((fw >> bit) & 1) {
            v = load16(change_blocks + 16 * ((uint64_t)a.offC[b >> 5] + __popc(fw & low_bits(bit))));
            // Bytes past the end of the string must be zero, as the encoder wrote them.
            if (b == a.nb_change - 1 && !tail_bytes_zero(v, change_bytes - 16 * (a.nb_change - 1))) bad = true;
        }
        reinterpret_cast<uint4 *>(a.C)[b] = v;
    }
    if (block_failed(bad, err, kErrChangeSparse)) return;

    // 5. Change bits: none past k, the first one set, `runs` in all; each word's run offset (k_change_check, its
    // scan, k_expect_total).
    uint64_t ones = 0;
    for (uint64_t w0 = 0; w0 < a.nw_change; w0 += kExcThreads) {
        const uint64_t w = w0 + tid;
        uint32_t c = 0;
        if (w < a.nw_change) {
            c = a.C[w];
            const uint32_t valid = low_bits(valid_bits(w, a.k));
            if ((c & ~valid) || (w == 0 && !(c & 1u))) bad = true;
            c &= valid;
        }
        const uint64_t off = block_sum.exclusive(__popc(c), ones);
        if (w < a.nw_change) a.offR[w] = (uint32_t)off;
    }
    if (block_failed(bad || ones != a.runs, err, kErrChangeBits)) return;

    // 6. Each exception's value at its position (k_scatter_intervals): rank j lies in the last interval whose
    // offset is <= j.
    const bool offsets_shared = intervals <= kExcSharedIntervals;
    for (uint64_t j = tid; j < a.k; j += kExcThreads) {
        uint64_t lo = 0, hi = intervals;
        while (hi - lo > 1) {
            const uint64_t mid = (lo + hi) / 2;
            if ((offsets_shared ? s_len_off[mid] : a.len_off[mid]) <= j) lo = mid;
            else hi = mid;
        }
        const uint64_t first = offsets_shared ? s_len_off[lo] : a.len_off[lo];
        T v;
        if (exception_value<T>(j, a.C, a.offR, a.runs, values, err, v)) out[a.edges[2 * lo] + (j - first)] = v;
    }
}

}  // namespace
}  // namespace dec
}  // namespace gpu
}  // namespace zb
