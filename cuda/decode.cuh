// The fast decoder on the GPU (docs/FORMAT.md sections 4-6), templated on the value type; decode_f32.cu and
// decode_f64.cu instantiate it.
//
// Flow: the payload is copied into a 16-byte aligned device buffer; per-tile popcounts of the code flags are
// scanned into block offsets; k_decode expands each tile's non-zero blocks into shared memory, un-bitshuffles them
// into codes, turns them into deltas (escapes as 0, counted per tile) and runs the prefix sum along x inside the
// tile (a segmented block scan: rows restart it); k_patch_escapes adds the escaped deltas (rank of each escape
// among escapes) the same way; a scan over the tiles' tails gives each tile's x carry. The y and z passes are
// blocked strided scans with carries that add the x carries on the fly; the last pass is fused with
// dequantization (rank 1: one pass). Rank 3 arrays with up to 128 rows take y and z in one pass instead
// (k_yz_prefix; arrays with few segments in parts, from carries). Exception positions come from the edge mask (prefix
// xor), their values from the change bits (rank among runs).
// Every read of the stream is bounds-checked against the segment lengths; inconsistencies set bits of an error
// word that the host turns into ZB_ERR_CORRUPT.
#pragma once
#include <cub/block/block_scan.cuh>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>
#include "dependent_launch.cuh"
#include "exceptions_block.cuh"
#include "lookback.cuh"
#include "gpu_device.cuh"
#include "gpu_internal.h"
#include "zb_crc32c.h"
#include "zb_lorenzo.h"
#include "zb_quant.h"

namespace zb {
namespace gpu {
namespace dec {
// Internal linkage: this header is compiled once per value type (decode_f32.cu, decode_f64.cu, ...), and the
// type-independent kernels must not clash at link time.
namespace {

// ---- codes -------------------------------------------------------------------------------------------------------

__global__ void k_tile_nnz(const uint32_t *__restrict__ flags, uint64_t ntiles, uint32_t *__restrict__ cnt) {
    wait_for_prior_grids();  // before any memory access (launch_dependent)
    const uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= ntiles) return;
    uint32_t c = 0;
#pragma unroll
    for (int w = 0; w < kTileFlagWords; ++w) c += __popc(flags[t * kTileFlagWords + w]);
    cnt[t] = c;
}

// Expands tile t's stored blocks into shared memory (256 threads, one block each; zeros where the flag is 0).
// Called by whole warps: the stored blocks before warp w's come from one flag word per lane and a warp sum.
__device__ __forceinline__ void load_tile(uint4 *tile4, const uint32_t *__restrict__ flags,
                                          const uint4 *__restrict__ blocks, uint64_t nnz, uint64_t tile_off, uint64_t t,
                                          uint32_t *err) {
    const int b = threadIdx.x, lane = b & 31, warp = b >> 5;
    const uint32_t *f = flags + t * kTileFlagWords;
    const uint32_t fw = f[warp];
    const uint32_t before = __reduce_add_sync(kFullMask, lane < warp ? (uint32_t)__popc(f[lane]) : 0u);
    uint4 v = make_uint4(0, 0, 0, 0);
    if ((fw >> lane) & 1) {
        const uint64_t rank = tile_off + before + __popc(fw & low_bits(lane));
        if (rank < nnz) v = blocks[rank];
        else set_error(err, kErrCodeBlocks);
    }
    tile4[b] = v;
}

// The codes 8j .. 8j+7 of a shuffled tile (thread j of 256): bit p of code 8j+k is bit 8(j%4)+k of word j/4 of
// plane p. Byte j%4 of the words of planes 0-7 (and 8-15), gathered by byte permutes, form an 8x8 bit matrix (rows
// = planes) whose transpose holds the codes' low (high) bytes. Four neighbouring threads read the same words
// (broadcast), a warp reads 8 consecutive banks.
__device__ __forceinline__ void unshuffle8(const uint32_t *tile, int j, uint32_t (&c)[8]) {
    const uint32_t *w = tile + (j >> 2);
    const uint32_t s = (uint32_t)(j & 3), pick = s | ((s + 4) << 4);  // byte s of each of two words
    auto rows4 = [&](int p) {  // byte s of planes p .. p+3
        return __byte_perm(__byte_perm(w[p * kPlaneWords], w[(p + 1) * kPlaneWords], pick),
                           __byte_perm(w[(p + 2) * kPlaneWords], w[(p + 3) * kPlaneWords], pick), 0x5410);
    };
    uint32_t lo0 = rows4(0), lo1 = rows4(4), hi0 = rows4(8), hi1 = rows4(12);
    transpose8x8_halves(lo0, lo1);  // byte k: low byte of code k (k < 4 in lo0, the others in lo1)
    transpose8x8_halves(hi0, hi1);
#pragma unroll
    for (int k = 0; k < 4; ++k) {  // bytes 2 and 3 of a permute repeat byte 0: masked off
        c[k] = __byte_perm(lo0, hi0, (uint32_t)k | ((uint32_t)(k + 4) << 4)) & 0xFFFFu;
        c[k + 4] = __byte_perm(lo1, hi1, (uint32_t)k | ((uint32_t)(k + 4) << 4)) & 0xFFFFu;
    }
}

// Segmented sum: (head, value) pairs where a head restarts the running sum. Associative, identity (0, 0).
struct SegSum {
    __host__ __device__ uint2 operator()(const uint2 &a, const uint2 &b) const {
        return make_uint2(a.x | b.x, b.x ? b.y : a.y + b.y);
    }
};

using TileScan = cub::BlockScan<uint2, kTileThreads>;

// Block-wide segmented inclusive scan of 2048 values, 8 consecutive ones per thread (v, in place); bit k of `heads`
// marks v[k] as the start of a row. Returns the block aggregate: (any head, sum since the last head).
__device__ __forceinline__ uint2 seg_scan8(TileScan::TempStorage &tmp, uint32_t (&v)[8], uint32_t heads) {
    uint2 agg = make_uint2(0, 0);
#pragma unroll
    for (int k = 0; k < 8; ++k) {
        if ((heads >> k) & 1) agg = make_uint2(1, 0);
        agg.y += v[k];
    }
    uint2 prefix, total;
    TileScan(tmp).ExclusiveScan(agg, prefix, make_uint2(0, 0), SegSum(), total);
    uint32_t run = prefix.y;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
        if ((heads >> k) & 1) run = 0;
        run += v[k];
        v[k] = run;
    }
    return total;
}

// Row starts (x == 0) among the 8 values from linear index e (bits; none past n). Rows of 8 or more values have at
// most one start among them.
__device__ __forceinline__ uint32_t row_heads(uint64_t e, uint64_t n, uint64_t nx, const FastDiv &dx) {
    if (e >= n) return 0;
    uint64_t x = e - dx.div(e) * nx;
    if (nx >= 8) {
        const uint64_t k = x == 0 ? 0 : nx - x;
        return k < 8 && e + k < n ? 1u << k : 0u;
    }
    uint32_t heads = 0;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
        if (x == 0 && e + k < n) heads |= 1u << k;
        if (++x == nx) x = 0;
    }
    return heads;
}

// Stores the valid ones of 8 consecutive values at out[e ..] (two 16-byte stores when all 8 are valid).
__device__ __forceinline__ void store8(uint32_t *out, uint64_t e, uint64_t n, const uint32_t (&v)[8]) {
    if (e + 8 <= n) {
        uint4 *o = reinterpret_cast<uint4 *>(out + e);
        o[0] = make_uint4(v[0], v[1], v[2], v[3]);
        o[1] = make_uint4(v[4], v[5], v[6], v[7]);
    } else {
#pragma unroll
        for (int k = 0; k < 8; ++k)
            if (e + k < n) out[e + k] = v[k];
    }
}

// Where k_decode and k_patch_escapes get a tile's codes: the fast encoder's bitshuffled tiles, or a 16-bit code
// array in index order (the v2-layout decoder's Lorenzo codes, which the ratio decoder or its tile decoder wrote).
// codes8() gives thread j's 8 codes of tile t; every thread of the block calls it, and it holds one barrier of the
// block (the tiles' form needs it; k_decode relies on it for its shared counters).
struct TileCodes {
    const uint32_t *flags;
    const uint4 *blocks;
    uint64_t nnz;              // stored blocks
    const uint32_t *cnt, *off; // stored blocks per tile and before it
    static constexpr bool kPadded = true;  // the last tile's codes past n exist and must be 0
    __device__ __forceinline__ void codes8(uint4 *tile4, uint64_t t, int j, uint64_t, uint32_t (&c)[8],
                                           uint32_t *err) const {
        load_tile(tile4, flags, blocks, nnz, off[t], t, err);
        __syncthreads();
        unshuffle8(reinterpret_cast<const uint32_t *>(tile4), j, c);
    }
    __device__ __forceinline__ bool escape(uint32_t c) const { return c == kEscapeCode; }
    __device__ __forceinline__ uint32_t delta(uint32_t c) const { return (uint32_t)code_to_delta((uint16_t)c); }
    __device__ __forceinline__ void check_last(uint64_t t, uint32_t *err) const {
        if ((uint64_t)off[t] + cnt[t] != nnz) set_error(err, kErrCodeBlocks);
    }
};

struct ArrayCodes {
    const uint16_t *codes;  // n codes (16-byte aligned); nothing is read past n
    CodeStyle cs;
    static constexpr bool kPadded = false;
    __device__ __forceinline__ void codes8(uint4 *, uint64_t t, int j, uint64_t n, uint32_t (&c)[8], uint32_t *) const {
        const uint64_t e = t * kTileCodes + 8 * (uint64_t)j;
        if (e + 8 <= n) {
            const uint4 w = *reinterpret_cast<const uint4 *>(codes + e);
            const uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                c[2 * k] = words[k] & 0xFFFFu;
                c[2 * k + 1] = words[k] >> 16;
            }
        } else {
#pragma unroll
            for (int k = 0; k < 8; ++k) c[k] = e + k < n ? codes[e + k] : 0u;
        }
        __syncthreads();
    }
    __device__ __forceinline__ bool escape(uint32_t c) const { return c == cs.escape(); }
    __device__ __forceinline__ uint32_t delta(uint32_t c) const { return (uint32_t)cs.get((uint16_t)c); }
    __device__ __forceinline__ void check_last(uint64_t, uint32_t *) const {}
};

// One tile: its codes, deltas (escapes as 0, counted), and the prefix sum along x inside the tile (rows restart
// it). Outputs local[i] (x-prefix within the tile's row pieces), first_head[t] (offset of the first row start in the
// tile, 2048 if none) and tail[t] = (tile has a row start, sum since the last one), from which the carries between
// tiles are scanned.
template <class Src>
__global__ void __launch_bounds__(kTileThreads)
k_decode(Src src, uint64_t ntiles, uint64_t n, uint64_t nx, FastDiv dx, uint64_t escapes, uint32_t *__restrict__ local,
         uint32_t *__restrict__ first_head, uint2 *__restrict__ tail, uint32_t *__restrict__ esc_cnt,
         uint32_t *__restrict__ err) {
    wait_for_prior_grids();  // before any memory access (launch_dependent)
    __shared__ uint4 tile4[kTileWords / 4];
    __shared__ TileScan::TempStorage tmp;
    __shared__ uint32_t tile_esc, tile_head;
    const uint64_t t = blockIdx.x;
    const int j = threadIdx.x;
    if (j == 0) {
        tile_esc = 0;
        tile_head = kTileCodes;
        if (t == ntiles - 1) src.check_last(t, err);
    }
    uint32_t c[8], v[8];
    src.codes8(tile4, t, j, n, c, err);  // (its barrier publishes tile_esc and tile_head)
    const uint64_t e = t * kTileCodes + 8 * (uint64_t)j;
    uint32_t esc = 0;
    const uint32_t inside = existing_bits(e, 8, n);
#pragma unroll
    for (int k = 0; k < 8; ++k) {
        if ((inside >> k) & 1) {
            const bool is_esc = src.escape(c[k]);
            v[k] = is_esc ? 0u : src.delta(c[k]);
            esc += is_esc;
        } else {
            v[k] = 0;
            if (Src::kPadded && c[k]) set_error(err, kErrPadding);
        }
    }
    const uint32_t heads = row_heads(e, n, nx, dx);
    if (heads) atomicMin(&tile_head, 8 * j + (__ffs(heads) - 1));
    if (esc) atomicAdd(&tile_esc, esc);
    const uint2 total = seg_scan8(tmp, v, heads);
    store8(local, e, n, v);
    __syncthreads();
    if (j == 0) {
        esc_cnt[t] = tile_esc;
        if (!escapes && tile_esc) set_error(err, kErrEscapes);
        first_head[t] = tile_head;
        tail[t] = make_uint2(tile_head < kTileCodes ? 1u : 0u, total.y);
    }
}

// Tiles with escapes: the escaped deltas (escape number = offset of the tile + rank in the tile) are added to the
// in-tile x-prefix as their own segmented prefix sum, and to the tile's tail.
template <class Src>
__global__ void __launch_bounds__(kTileThreads)
k_patch_escapes(Src src, const uint32_t *__restrict__ esc_cnt, const uint32_t *__restrict__ esc_off, uint64_t ntiles,
                uint64_t n, uint64_t nx, FastDiv dx, const int32_t *__restrict__ esc_vals, uint64_t escapes,
                uint32_t *__restrict__ local, uint2 *__restrict__ tail, uint32_t *__restrict__ err) {
    wait_for_prior_grids();  // before any memory access (launch_dependent)
    using CountScan = cub::BlockScan<uint32_t, kTileThreads>;
    __shared__ uint4 tile4[kTileWords / 4];
    __shared__ TileScan::TempStorage tmp;
    __shared__ typename CountScan::TempStorage ctmp;
    const uint64_t t = blockIdx.x;
    const int j = threadIdx.x;
    if (j == 0 && t == ntiles - 1 && (uint64_t)esc_off[t] + esc_cnt[t] != escapes) set_error(err, kErrEscapes);
    if (esc_cnt[t] == 0) return;
    uint32_t c[8], v[8];
    src.codes8(tile4, t, j, n, c, err);
    const uint64_t e = t * kTileCodes + 8 * (uint64_t)j;
    uint32_t mine = 0;
#pragma unroll
    for (int k = 0; k < 8; ++k) mine += (e + k < n && src.escape(c[k]));
    uint32_t rank, unused;
    CountScan(ctmp).ExclusiveSum(mine, rank, unused);
    uint64_t idx = (uint64_t)esc_off[t] + rank;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
        v[k] = 0;
        if (e + k < n && src.escape(c[k])) {
            if (idx < escapes) v[k] = (uint32_t)esc_vals[idx];
            else set_error(err, kErrEscapes);
            ++idx;
        }
    }
    const uint2 total = seg_scan8(tmp, v, row_heads(e, n, nx, dx));
#pragma unroll
    for (int k = 0; k < 8; ++k)
        if (e + k < n) local[e + k] += v[k];
    if (j == 0) tail[t].y += total.y;
}

// Carry of each tile: x-prefix at the end of the previous tile (exclusive segmented scan of the tails), packed with
// the tile's first row start: xc[t] = (first_head[t], carry).
__global__ void k_pack_carries(const uint32_t *__restrict__ first_head, const uint2 *__restrict__ carry, uint64_t ntiles,
                               uint2 *__restrict__ xc) {
    wait_for_prior_grids();  // before any memory access (launch_dependent)
    const uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < ntiles) xc[t] = make_uint2(first_head[t], carry[t].y);
}

// Whether rows of nx values leave x carries between tiles: none when nx divides the tile, since every tile then
// starts a row (first_head 0), and a pass over ranks 2 and 3 can read the in-tile x-prefix as it is.
inline bool tiles_have_x_carries(uint64_t nx) { return kTileCodes % nx != 0; }

// The complete x-prefix at linear index idx: the in-tile value plus the carry for positions before the tile's
// first row start.
__device__ __forceinline__ uint32_t x_prefix(const uint32_t *__restrict__ local, const uint2 *__restrict__ xc,
                                             uint64_t idx) {
    const uint2 c = xc[idx >> 11];
    const uint32_t v = local[idx];
    return (uint32_t)(idx & (kTileCodes - 1)) < c.x ? v + c.y : v;
}

// ---- prefix sums along y and z -----------------------------------------------------------------------------------

// An axis of a C-order array seen as lines: element (o, l, i) of `outer` x `L` x `inner` sits at (o*L + l)*inner + i,
// and the scan runs along l. Each line is cut into nseg segments of S elements so that enough threads work even
// when there are few lines; segment sums are scanned per line and added back as carries. `total` (<= outer * L)
// ends the last line early: the slowest dim of a stream cut into Lorenzo segments (format version 6) is seen as
// outer = the segments, L = the layers per segment, each segment's lines scanned on their own.
struct Lines {
    uint64_t outer, L, inner, S, nseg, total;
    FastDiv d_inner, d_nseg;
    __device__ __forceinline__ uint64_t end_of(uint64_t o, uint64_t l0) const { return min(min(L, l0 + S), total - o * L); }
};

constexpr uint64_t kShortLineSegments = 64;  // up to this many segments per line, a line's scan is one thread's

inline Lines make_lines(uint64_t outer, uint64_t L, uint64_t inner, uint64_t target_threads, uint64_t total = 0) {
    Lines a;
    a.outer = outer;
    a.L = L;
    a.inner = inner;
    a.total = total ? total : outer * L;
    const uint64_t lines = outer * inner;
    // Segments cost a pass more over q and a scan of their sums: worth it only when the lines alone leave most of
    // the GPU idle (half the target still fills the SMs).
    uint64_t nseg = 2 * lines >= target_threads ? 1 : std::min<uint64_t>(L, div_up(target_threads, lines));
    a.S = div_up(L, nseg);
    a.nseg = div_up(L, a.S);
    a.d_inner = FastDiv(inner);
    a.d_nseg = FastDiv(a.nseg);
    return a;
}

// Thread tid -> (o, segment, i), with i fastest so that a warp reads consecutive addresses.
__device__ __forceinline__ void line_coords(const Lines &a, uint64_t tid, uint64_t &o, uint64_t &sg, uint64_t &i) {
    const uint64_t rest = a.d_inner.div(tid);
    i = tid - rest * a.inner;
    o = a.d_nseg.div(rest);
    sg = rest - o * a.nseg;
}

// XCarry: the input is the in-tile x-prefix (add the tile carries on the fly, rank 2 and 3's first pass).
template <bool XCarry>
__device__ __forceinline__ uint32_t load_q(const uint32_t *__restrict__ q, const uint2 *__restrict__ xc, uint64_t idx) {
    if constexpr (XCarry) return x_prefix(q, xc, idx);
    else return q[idx];
}

template <bool XCarry>
__global__ void k_segment_sums(const uint32_t *__restrict__ q, const uint2 *__restrict__ xc, Lines a,
                               uint32_t *__restrict__ sums) {
    const uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= a.outer * a.nseg * a.inner) return;
    uint64_t o, sg, i;
    line_coords(a, tid, o, sg, i);
    const uint64_t l0 = sg * a.S, l1 = a.end_of(o, l0);
    uint64_t idx = (o * a.L + l0) * a.inner + i;
    uint32_t acc = 0;
#pragma unroll 8
    for (uint64_t l = l0; l < l1; ++l, idx += a.inner) acc += load_q<XCarry>(q, xc, idx);
    sums[(o * a.inner + i) * a.nseg + sg] = acc;
}

// One thread's exclusive scan of the count words p[0], p[stride], ..., in place, with Loads loads in flight at a time
// (in a loop of one load and one store per word, every load waits for the store before it, which might alias it).
template <int Loads>
__device__ __forceinline__ void scan_in_place(uint32_t *__restrict__ p, uint64_t count, uint64_t stride) {
    uint32_t carry = 0;
    for (uint64_t j0 = 0; j0 < count; j0 += Loads) {
        uint32_t v[Loads];
#pragma unroll
        for (int k = 0; k < Loads; ++k) v[k] = j0 + k < count ? p[(j0 + k) * stride] : 0u;
#pragma unroll
        for (int k = 0; k < Loads; ++k)
            if (j0 + k < count) {
                p[(j0 + k) * stride] = carry;
                carry += v[k];
            }
    }
}

// Exclusive scan of each of `lines` lines' nseg segment sums, in place, one thread per line: for short lines, where a
// block per line would spend its time being scheduled (a 64 MB 3D array has 250 K lines of 2 segments).
__global__ void k_line_scan_short(uint32_t *__restrict__ sums, uint64_t lines, uint64_t nseg) {
    const uint64_t line = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (line < lines) scan_in_place<8>(sums + line * nseg, nseg, 1);
}

// The same, one block per line: for long lines (few of them).
__global__ void __launch_bounds__(256) k_line_scan(uint32_t *__restrict__ sums, uint64_t nseg) {
    using Scan = cub::BlockScan<uint32_t, 256>;
    __shared__ typename Scan::TempStorage tmp;
    uint32_t *s = sums + (uint64_t)blockIdx.x * nseg;
    uint32_t carry = 0;
    for (uint64_t base = 0; base < nseg; base += 256) {
        const uint64_t j = base + threadIdx.x;
        const uint32_t v = j < nseg ? s[j] : 0u;
        uint32_t ex, total;
        Scan(tmp).ExclusiveSum(v, ex, total);
        if (j < nseg) s[j] = carry + ex;
        carry += total;
        __syncthreads();
    }
}

// Exclusive scans of `lines` lines of nseg segment sums each (sums[line * nseg + segment]), in place.
inline void launch_line_scan(uint32_t *sums, uint64_t lines, uint64_t nseg, cudaStream_t s) {
    if (nseg <= kShortLineSegments)
        k_line_scan_short<<<grid_for(lines, 256), 256, 0, s>>>(sums, lines, nseg);
    else
        k_line_scan<<<(unsigned)lines, 256, 0, s>>>(sums, nseg);
    ZB_LAUNCHED("k_line_scan");
}

// Rescans each segment from its carry: in place (u32), or, on the last axis, straight into dequantized values.
template <typename T, bool Final, bool XCarry>
__global__ void k_segment_apply(uint32_t *__restrict__ q, const uint2 *__restrict__ xc, Lines a,
                                const uint32_t *__restrict__ carries, T *__restrict__ out, double twoeb) {
    const uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= a.outer * a.nseg * a.inner) return;
    uint64_t o, sg, i;
    line_coords(a, tid, o, sg, i);
    const uint64_t l0 = sg * a.S, l1 = a.end_of(o, l0);
    uint64_t idx = (o * a.L + l0) * a.inner + i;
    uint32_t acc = a.nseg > 1 ? carries[(o * a.inner + i) * a.nseg + sg] : 0u;
#pragma unroll 4
    for (uint64_t l = l0; l < l1; ++l, idx += a.inner) {
        acc += load_q<XCarry>(q, xc, idx);
        if constexpr (Final) out[idx] = dequantize<T>((int32_t)acc, twoeb);
        else q[idx] = acc;
    }
}

// ---- rank 3: the y and z prefix in one pass ----------------------------------------------------------------------

// The y pass and the z pass each read and write every value (16 bytes per value in all); k_yz_prefix reads the
// x-prefix once and writes the dequantized values (8 bytes per value). A block takes 32 columns of one Lorenzo
// segment and all its rows: warp w rows Rows*w .. Rows*w + Rows-1, lane = column. It walks the segment's layers
// kYzLayers at a time: each thread loads its rows of those layers (all loads issued before any is used: one layer
// per step left the walk waiting on memory latency), scans them along y and publishes the sum of its rows per layer
// in shared memory; after one barrier each warp adds the sums of the warps above it (its y carry) and accumulates
// the layers along z in registers. Double-buffered sums make one barrier per step enough: a thread that writes a
// buffer again has passed the barrier that every reader of its previous contents reached after reading.
// XCarry: add the tiles' x carries on load (tiles_have_x_carries).
//
// Arrays with few segments (chunk sizes) give too few blocks for a walk over whole segments: there each segment is
// cut into `parts` runs of layers. A first launch (YzMode::kSums) walks each part and keeps only its z sums (the sum
// over its layers of the y-prefixed values: one plane of ny x nx), the planes are scanned along the parts (each
// point's carry), and a second walk (kApply) starts each part from its carry plane and writes the values: the
// x-prefix is read twice, still in 3 launches against the two line passes' 6 (NOTES 89).
//
// Chunk-sized device calls (chunk_decode.cuh) take one launch instead (kLookback): each block walks its part for the
// z sums, publishes them, and gets its carry plane from a decoupled look-back over the parts before it (the sum of
// their published planes back to the nearest part whose own carry is in), then walks again writing the values.
enum class YzMode { kWhole, kSums, kApply, kLookback };
constexpr int kYzLayers = 4;
constexpr uint64_t kYzMaxRows = 128;   // 16 warps of 8 rows: a warp's y carry sums at most 15 partial sums

struct YzShape {
    uint64_t nx, ny, nz, per_segment, col_groups;
    uint64_t parts, part_layers;  // runs of layers per segment (1 and per_segment: the whole segment)
};

// kLookback's words: its ticket (blocks take their (run, column group) in order of it, so that a block waits only
// for blocks that started before it) and one state per block (kLbAggregate, kLbInclusive; 0 before the launch), and
// the planes that a block publishes: its own z sums (aggregate) and those with its carry (inclusive), laid out as the
// carry planes (YzPlan::plane_words each).
struct YzLookback {
    uint32_t *ticket, *state;
    uint32_t *incl;  // `planes` holds the aggregates
};

// One walk of a block over its part's layers (see k_yz_prefix): the y-prefix of its rows, the z sums accumulated in
// zsum from their start, and with Store the dequantized values written.
template <typename T, int Rows, bool XCarry, bool Store>
__device__ __forceinline__ void yz_walk(const uint32_t *__restrict__ local, const uint2 *__restrict__ xc,
                                        const YzShape &a, uint64_t zbeg, uint64_t zend, uint64_t y0, uint64_t x,
                                        int rows, uint32_t (&zsum)[Rows], uint32_t *yz_sums, T *__restrict__ out,
                                        double twoeb) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, warps = blockDim.x >> 5;
    // Offsets inside a step in 32 bits (the launcher checks kYzLayers * nx * ny < 2^31).
    const uint32_t nx = (uint32_t)a.nx, nxy = (uint32_t)(a.nx * a.ny);
    uint64_t base = (zbeg * a.ny + y0) * a.nx + x;  // (z0, y0, x)
    auto load = [&](uint32_t o) { return XCarry ? x_prefix(local, xc, base + o) : local[base + o]; };
    int buf = 0;
    for (uint64_t z0 = zbeg; z0 < zend; z0 += kYzLayers, base += (uint64_t)kYzLayers * nxy, buf ^= 1) {
        const int layers = (int)min((uint64_t)kYzLayers, zend - z0);
        const bool whole = layers == kYzLayers && rows == Rows;  // the common case, without per-value tests
        uint32_t v[kYzLayers][Rows];
        if (whole) {
#pragma unroll
            for (int l = 0; l < kYzLayers; ++l)
#pragma unroll
                for (int r = 0; r < Rows; ++r) v[l][r] = load(l * nxy + r * nx);
        } else {
#pragma unroll
            for (int l = 0; l < kYzLayers; ++l)
#pragma unroll
                for (int r = 0; r < Rows; ++r) v[l][r] = l < layers && r < rows ? load(l * nxy + r * nx) : 0u;
        }
        uint32_t *sums = yz_sums + buf * kYzLayers * warps * 32;
#pragma unroll
        for (int l = 0; l < kYzLayers; ++l) {
#pragma unroll
            for (int r = 1; r < Rows; ++r) v[l][r] += v[l][r - 1];
            sums[(l * warps + w) * 32 + lane] = v[l][Rows - 1];
        }
        __syncthreads();
        T *dst = out + base;
#pragma unroll
        for (int l = 0; l < kYzLayers; ++l) {
            uint32_t carry = 0;
            for (int u = 0; u < w; ++u) carry += sums[(l * warps + u) * 32 + lane];
#pragma unroll
            for (int r = 0; r < Rows; ++r) {
                zsum[r] += v[l][r] + carry;
                if constexpr (Store)
                    if (whole || (l < layers && r < rows)) dst[l * nxy + r * nx] = dequantize<T>((int32_t)zsum[r], twoeb);
            }
        }
    }
}

template <typename T, int Rows, bool XCarry, YzMode Mode>
__global__ void __launch_bounds__(512)
k_yz_prefix(const uint32_t *__restrict__ local, const uint2 *__restrict__ xc, YzShape a, uint32_t *__restrict__ planes,
            T *__restrict__ out, double twoeb, YzLookback lb) {
    wait_for_prior_grids();  // before any memory access (launch_dependent)
    extern __shared__ uint32_t yz_sums[];  // [2][kYzLayers][warps][32]
    __shared__ uint32_t block_index, nearest;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    uint64_t block = blockIdx.x;
    if constexpr (Mode == YzMode::kLookback) {
        if (threadIdx.x == 0) block_index = atomicAdd(lb.ticket, 1u);
        __syncthreads();
        block = block_index;
    }
    const uint64_t run = block / a.col_groups, cg = block - run * a.col_groups;
    const uint64_t seg = run / a.parts, part = run - seg * a.parts;
    const uint64_t x = cg * 32 + lane, y0 = (uint64_t)w * Rows;
    const uint64_t seg_end = min(a.nz, (seg + 1) * a.per_segment);
    const uint64_t zbeg = min(seg_end, seg * a.per_segment + part * a.part_layers);
    const uint64_t zend = min(seg_end, zbeg + a.part_layers);
    // Rows of this thread inside the array (0 for a column past nx): the others load 0 and store nothing.
    const int rows = x < a.nx && y0 < a.ny ? (int)min((uint64_t)Rows, a.ny - y0) : 0;
    // Point (y0 + r, x) of part p's carry plane (k_plane_scan's layout: a warp's lanes at consecutive words).
    auto plane_at = [&](uint64_t p, int r) { return ((seg * a.parts + p) * a.ny + y0 + r) * a.nx + x; };
    uint32_t zsum[Rows];
#pragma unroll
    for (int r = 0; r < Rows; ++r) zsum[r] = Mode == YzMode::kApply && r < rows ? planes[plane_at(part, r)] : 0u;
    constexpr bool kStore = Mode == YzMode::kWhole || Mode == YzMode::kApply;
    yz_walk<T, Rows, XCarry, kStore>(local, xc, a, zbeg, zend, y0, x, rows, zsum, yz_sums, out, twoeb);
    if constexpr (Mode == YzMode::kSums) {
#pragma unroll
        for (int r = 0; r < Rows; ++r)
            if (r < rows) planes[plane_at(part, r)] = zsum[r];
    }
    if constexpr (Mode == YzMode::kLookback) {
        // Publish the part's z sums (part 0's are its inclusive plane already), then add the planes of the parts
        // before it: warp 0 reads up to 32 of their states at a time (lane l: part p - 1 - l) and waits for all;
        // every thread then adds the published planes back to the nearest inclusive one at its own points.
        const uint64_t state_of = seg * a.parts;  // states by (segment, part, column group)
        auto state_word = [&](uint64_t p) { return lb.state + (state_of + p) * a.col_groups + cg; };
        uint32_t *own = part == 0 ? lb.incl : planes;
#pragma unroll
        for (int r = 0; r < Rows; ++r)
            if (r < rows) __stcg(own + plane_at(part, r), zsum[r]);
        __syncthreads();
        if (threadIdx.x == 0) {
            __threadfence();
            lb_publish(state_word(part), part == 0 ? kLbInclusive : kLbAggregate);
        }
        uint32_t carry[Rows] = {};
        for (int64_t top = (int64_t)part - 1; top >= 0; top -= 32) {
            if (w == 0) {
                const int64_t p = top - lane;
                uint32_t st;
                for (;;) {
                    st = p >= 0 ? lb_state(state_word((uint64_t)p)) : kLbInclusive;
                    if (__all_sync(kFullMask, st == kLbAggregate || st == kLbInclusive)) break;
                    __nanosleep(32);
                }
                const uint32_t inclusive = __ballot_sync(kFullMask, st == kLbInclusive);
                if (lane == 0) nearest = inclusive ? (uint32_t)(__ffs(inclusive) - 1) : 32u;
            }
            __syncthreads();
            const int stop = (int)nearest;
            for (int l = 0; l <= min(stop, 31); ++l) {
                const int64_t p = top - l;
                if (p < 0) break;
                const uint32_t *src = l == stop ? lb.incl : planes;
#pragma unroll
                for (int r = 0; r < Rows; ++r)
                    if (r < rows) carry[r] += __ldcg(src + plane_at((uint64_t)p, r));
            }
            __syncthreads();  // `nearest` again in the next window
            if (stop < 32) break;
        }
        if (part > 0) {
#pragma unroll
            for (int r = 0; r < Rows; ++r)
                if (r < rows) __stcg(lb.incl + plane_at(part, r), carry[r] + zsum[r]);
            __syncthreads();
            if (threadIdx.x == 0) {
                __threadfence();
                lb_publish(state_word(part), kLbInclusive);
            }
        }
        yz_walk<T, Rows, XCarry, true>(local, xc, a, zbeg, zend, y0, x, rows, carry, yz_sums, out, twoeb);
    }
}

// Exclusive scan along the parts of each segment's carry planes, in place: planes[((seg * parts + part) * points) +
// point], one thread per (segment, point), a warp's loads at consecutive words. (The planes were laid out
// part-fastest and scanned by k_line_scan_short, each thread walking its own parts one load at a time: 13.4 us at 4
// MB for 32 parts against 4.6; NOTES 112.)
__global__ void k_plane_scan(uint32_t *__restrict__ planes, uint64_t points, uint64_t segs, uint64_t parts) {
    wait_for_prior_grids();  // before any memory access (launch_dependent)
    const uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= segs * points) return;
    const uint64_t seg = t / points;
    scan_in_place<16>(planes + seg * parts * points + (t - seg * points), parts, points);
}

// k_yz_prefix's form for rows per thread (4 or 8) and x carries.
template <typename T, YzMode Mode>
auto yz_kernel(int rows, bool x_carry) {
    return rows == 4 ? (x_carry ? k_yz_prefix<T, 4, true, Mode> : k_yz_prefix<T, 4, false, Mode>)
                     : (x_carry ? k_yz_prefix<T, 8, true, Mode> : k_yz_prefix<T, 8, false, Mode>);
}

// k_yz_prefix's dynamic shared memory for blocks of `warps` warps: yz_sums, [2][kYzLayers][warps][32].
inline size_t yz_smem_bytes(uint64_t warps) { return 2 * kYzLayers * warps * 32 * sizeof(uint32_t); }

// Blocks of k_yz_prefix (rows per thread, warps per block, x carries) that an SM holds at once: the fewest of the
// forms that walk parts (sums, apply, look-back).
template <typename T>
int yz_blocks_per_sm(int rows, int warps, bool x_carry) {
    const size_t smem = yz_smem_bytes((uint64_t)warps);
    return std::min({resident_blocks((const void *)yz_kernel<T, YzMode::kSums>(rows, x_carry), warps * 32, smem),
                     resident_blocks((const void *)yz_kernel<T, YzMode::kApply>(rows, x_carry), warps * 32, smem),
                     resident_blocks((const void *)yz_kernel<T, YzMode::kLookback>(rows, x_carry), warps * 32, smem)});
}

// How k_yz_prefix covers a rank-3 array: it applies with at most kYzMaxRows rows (4 rows per thread up to 64 rows,
// else 8). Segments are cut into parts (at least kYzLayers layers each) until their blocks fill the GPU's block slots
// once (blocks_per_sm, from the kernels' occupancy, times the SMs), and no further: a grid just past a whole number
// of waves leaves a last wave almost empty (64 MB of TREFHT: 64 runs in 9 parts, 576 blocks of 16 warps on 132 SMs
// holding 2 each, 3 waves; in 4 parts one wave, decompression 222-224 -> 210-213 us; NOTES 130). On the H200 a walk
// over whole segments was faster than the two line passes from 64 blocks of 16 warps (NOTES item 66); with parts, 4
// and 16 MB of TREFHT (1 and 4 segments) take 3 launches instead of those passes' 6.
// ZBOUND_GPU_YZ_PARTS=N sets the parts (1: whole segments, for tests and comparisons).
struct YzPlan {
    bool applies = false;
    int rows = 0;
    uint64_t warps = 0, blocks = 0;
    YzShape shape{};
    // Words of the carry planes: one plane per part of each segment (none for whole segments).
    uint64_t plane_words() const {
        return shape.parts > 1 ? shape.parts * div_up(shape.nz, shape.per_segment) * shape.ny * shape.nx : 0;
    }
};

// blocks_per_sm(rows, warps, x_carry): how many blocks of k_yz_prefix (rows per thread, warps per block, x carries)
// an SM holds at once (yz_blocks_per_sm).
template <typename BlocksPerSm>
YzPlan plan_yz(const Context &c, uint64_t nx, uint64_t ny, uint64_t nz, const LorenzoSegments &segs,
               BlocksPerSm blocks_per_sm) {
    YzPlan p;
    if (ny > kYzMaxRows || (uint64_t)kYzLayers * nx * ny >= (1ull << 31)) return p;
    p.rows = ny <= 64 ? 4 : 8;
    p.warps = div_up(ny, (uint64_t)p.rows);
    p.shape = YzShape{nx, ny, nz, segs.per_segment, div_up(nx, 32), 1, segs.per_segment};
    const uint64_t runs = segs.count() * p.shape.col_groups;
    // Parts cost a second read of the codes (the sums pass): worth it only while the whole walk leaves SMs idle
    // (256 runs on 132 SMs: whole 583 GB/s, 3 parts 465; RESULTS, session 26).
    uint64_t parts = 1;
    if (runs < (uint64_t)c.sm_count) {
        const int per_sm = blocks_per_sm(p.rows, (int)p.warps, tiles_have_x_carries(nx));
        const uint64_t slots = (uint64_t)std::max(1, per_sm) * (uint64_t)c.sm_count;
        parts = std::max<uint64_t>(1, std::min(slots / runs, div_up(segs.per_segment, (uint64_t)kYzLayers)));
    }
    if (const long long e = env_integer("ZBOUND_GPU_YZ_PARTS", -1); e >= 0)  // read per call: tests switch it
        parts = std::max<uint64_t>(1, (uint64_t)e);
    p.shape.part_layers = div_up(segs.per_segment, parts);
    p.shape.parts = div_up(segs.per_segment, p.shape.part_layers);
    p.blocks = runs * p.shape.parts;
    p.applies = p.blocks <= UINT32_MAX;
    return p;
}

template <typename T, YzMode Mode>
void launch_yz_mode(const YzPlan &p, bool x_carry, const uint32_t *local, const uint2 *xc, uint32_t *planes, T *out,
                    double twoeb, cudaStream_t s, const YzLookback &lb = YzLookback{}) {
    auto kernel = yz_kernel<T, Mode>(p.rows, x_carry);
    const size_t smem = yz_smem_bytes(p.warps);
    launch_dependent("launch of k_yz_prefix", kernel, (unsigned)p.blocks, (unsigned)(p.warps * 32), smem, s, local, xc,
                     p.shape, planes, out, twoeb, lb);
}

// The y and z prefix of a rank-3 array by plan p (p.applies): one walk, or sums, their scan and the walk from the
// carries, or with lb.ticket (its words zeroed) the look-back form. planes: p.plane_words() words, and as many at
// lb.incl.
template <typename T>
void launch_yz_prefix(const YzPlan &p, const uint32_t *local, const uint2 *xc, uint32_t *planes, T *out, double twoeb,
                      cudaStream_t s, const YzLookback &lb = YzLookback{}) {
    const bool x_carry = tiles_have_x_carries(p.shape.nx);
    if (p.shape.parts == 1) {
        launch_yz_mode<T, YzMode::kWhole>(p, x_carry, local, xc, planes, out, twoeb, s);
        return;
    }
    if (lb.ticket) {
        launch_yz_mode<T, YzMode::kLookback>(p, x_carry, local, xc, planes, out, twoeb, s, lb);
        return;
    }
    launch_yz_mode<T, YzMode::kSums>(p, x_carry, local, xc, planes, out, twoeb, s);
    const uint64_t points = p.shape.ny * p.shape.nx, segs = p.plane_words() / (p.shape.parts * points);
    launch_dependent("launch of k_plane_scan", k_plane_scan, grid_for(segs * points, 128), 128, 0, s, planes, points,
                     segs, p.shape.parts);
    launch_yz_mode<T, YzMode::kApply>(p, x_carry, local, xc, planes, out, twoeb, s);
}

// Rank 1: the x-prefix is the whole prefix sum.
template <typename T>
__global__ void k_finish_1d(const uint32_t *__restrict__ local, const uint2 *__restrict__ xc, uint64_t n, double twoeb,
                            T *__restrict__ out) {
    const uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = dequantize<T>((int32_t)x_prefix(local, xc, i), twoeb);
}

// ---- exceptions --------------------------------------------------------------------------------------------------

// M = running xor of the edge bits: prefix xor inside the word, flipped when the edges before it are odd.
__global__ void k_mask(const uint32_t *__restrict__ E, const uint32_t *__restrict__ edges_before, uint64_t nwords,
                       uint64_t n, uint32_t *__restrict__ M, uint32_t *__restrict__ cntM, uint32_t *__restrict__ err) {
    const uint64_t w = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (w >= nwords) return;
    const uint32_t e = E[w];
    const uint32_t valid = low_bits(valid_bits(w, n));
    if (e & ~valid) set_error(err, kErrEdgeBits);
    uint32_t m = e;
    m ^= m << 1;
    m ^= m << 2;
    m ^= m << 4;
    m ^= m << 8;
    m ^= m << 16;
    if (edges_before[w] & 1) m = ~m;
    m &= valid;
    M[w] = m;
    cntM[w] = __popc(m);
}

// Change bits: none past k, the first one set; counts per word for the run ranks.
__global__ void k_change_check(const uint32_t *__restrict__ C, uint64_t nwords, uint64_t k, uint32_t *__restrict__ cnt,
                               uint32_t *__restrict__ err) {
    const uint64_t w = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (w >= nwords) return;
    const uint32_t c = C[w];
    const uint32_t valid = low_bits(valid_bits(w, k));
    if ((c & ~valid) || (w == 0 && !(c & 1u))) set_error(err, kErrChangeBits);
    cnt[w] = __popc(c & valid);
}

__global__ void k_expect_total(const uint32_t *__restrict__ off, const uint32_t *__restrict__ cnt, uint64_t n,
                               uint64_t expected, uint32_t bit, uint32_t *__restrict__ err) {
    if (threadIdx.x != 0) return;
    const uint64_t total = n ? (uint64_t)off[n - 1] + cnt[n - 1] : 0;
    if (total != expected) set_error(err, bit);
}

// An exception gets its rank j among exceptions (offset of its mask word + rank in the word), its run
// r = (ones of C in [0, j]) - 1, and the value of run r. One thread per mask word: a warp loads 32 words (1024
// values) and skips them when they are all zero, so an array with few exceptions costs one coalesced load per 1024
// values (one thread per value spent 0.6 ms of a 1 GB decode scheduling blocks); the warp then takes its non-empty
// words one at a time, lane b handling bit b (consecutive values: coalesced stores).
template <typename T>
__global__ void k_scatter(const uint32_t *__restrict__ M, const uint32_t *__restrict__ offM, uint64_t n, uint64_t k,
                          const uint32_t *__restrict__ C, const uint32_t *__restrict__ offR, uint64_t runs,
                          const uint8_t *__restrict__ values, T *__restrict__ out, uint32_t *__restrict__ err) {
    const uint64_t w = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x, w0 = w - (threadIdx.x & 31);
    const int lane = threadIdx.x & 31;
    const uint32_t mine = w < (n + 31) / 32 ? M[w] : 0u;
    for (uint32_t busy = __ballot_sync(kFullMask, mine != 0); busy; busy &= busy - 1) {
        const int src = __ffs(busy) - 1;
        const uint32_t m = __shfl_sync(kFullMask, mine, src);
        const uint64_t word = w0 + (uint64_t)src, i = word * 32 + (uint64_t)lane;
        if (!((m >> lane) & 1) || i >= n) continue;
        const uint64_t j = (uint64_t)offM[word] + __popc(m & low_bits(lane));
        if (j >= k) {
            set_error(err, kErrEdgeBits);
            continue;
        }
        T v;
        if (exception_value<T>(j, C, offR, runs, values, err, v)) out[i] = v;
    }
}

// ---- exceptions from a few edge blocks ---------------------------------------------------------------------------
// When only a few of the edge mask's 16-byte blocks are stored (kSparseEdgeRatio), the positions of the exceptions
// come from the stored blocks alone: no mask of the whole array is built, scanned or read (at 1 GB with a few
// thousand exceptions that took 0.19 ms, 9 % of the decode). The edges, in order, open and close intervals of
// exceptions ([e0, e1), [e2, e3), ..., the last one open to n); an exception's rank is the exclusive sum of the
// interval lengths before its interval plus its offset in it. The checks are the dense path's: edge bits at or past
// n, stored blocks against their flags, exceptions against the header's count.

// Per flag word (32 edge blocks): the index of each stored block, in stored order (entries past a short flag count
// stay unset: the count mismatch is an error, and k_interval_lengths clamps every position below n before any write).
__global__ void k_edge_blocks(const uint32_t *__restrict__ flags, const uint32_t *__restrict__ off, uint64_t ngroups,
                              uint64_t nstored, uint64_t *__restrict__ block_of) {
    const uint64_t g = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= ngroups) return;
    uint64_t rank = off[g];
    for (uint32_t fw = flags[g]; fw && rank < nstored; fw &= fw - 1, ++rank) block_of[rank] = 32 * g + (__ffs(fw) - 1);
}

// Per stored block: its number of edges.
__global__ void k_edge_counts(const uint8_t *__restrict__ stored, uint64_t nstored, uint32_t *__restrict__ edge_cnt) {
    const uint64_t j = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= nstored) return;
    const uint4 v = load16(stored + 16 * j);
    edge_cnt[j] = popc16(v);
}

// Per stored block: its edges' positions at their ranks among all edges (edge_off: exclusive sum of the counts).
__global__ void k_edge_positions(const uint8_t *__restrict__ stored, const uint64_t *__restrict__ block_of,
                                 const uint32_t *__restrict__ edge_off, uint64_t nstored, uint64_t n,
                                 uint64_t *__restrict__ edges, uint32_t *__restrict__ err) {
    const uint64_t j = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= nstored) return;
    const uint4 v = load16(stored + 16 * j);
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
    uint64_t at = edge_off[j];
#pragma unroll
    for (int w = 0; w < 4; ++w)
        for (uint32_t bits = words[w]; bits; bits &= bits - 1) {
            const uint64_t pos = 128 * block_of[j] + 32 * (uint64_t)w + (uint64_t)(__ffs(bits) - 1);
            if (pos >= n) set_error(err, kErrEdgeBits);
            edges[at++] = pos;
        }
}

// Interval i = [edges[2i], edges[2i+1]) (or to n): its length, 0 past the last edge. nedges is read from the scan.
__global__ void k_interval_lengths(const uint64_t *__restrict__ edges, const uint32_t *__restrict__ edge_off,
                                   const uint32_t *__restrict__ edge_cnt, uint64_t nstored, uint64_t intervals,
                                   uint64_t n, uint64_t k, uint32_t *__restrict__ len, uint32_t *__restrict__ err) {
    const uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= intervals) return;
    const uint64_t nedges = (uint64_t)edge_off[nstored - 1] + edge_cnt[nstored - 1];
    uint64_t l = 0;
    if (2 * i < nedges) {
        // Edges at or past n are flagged by k_edge_positions; clamped here so that no position reaches n.
        const uint64_t a = min(edges[2 * i], n), b = 2 * i + 1 < nedges ? min(edges[2 * i + 1], n) : n;
        l = b > a ? b - a : 0;
        if (l > k) {
            set_error(err, kErrEdgeBits);
            l = 0;
        }
    }
    len[i] = (uint32_t)l;
}

// One thread per exception: its interval by binary search over the intervals' offsets (len_off, exclusive sums).
template <typename T>
__global__ void k_scatter_intervals(const uint64_t *__restrict__ edges, const uint32_t *__restrict__ len_off,
                                    const uint32_t *__restrict__ len, uint64_t intervals, uint64_t k,
                                    const uint32_t *__restrict__ C, const uint32_t *__restrict__ offR, uint64_t runs,
                                    const uint8_t *__restrict__ values, T *__restrict__ out,
                                    uint32_t *__restrict__ err) {
    const uint64_t j = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= k || j >= (uint64_t)len_off[intervals - 1] + len[intervals - 1]) return;  // a short total is flagged
    uint64_t lo = 0, hi = intervals;  // the last interval with len_off <= j
    while (hi - lo > 1) {
        const uint64_t mid = (lo + hi) / 2;
        if (len_off[mid] <= j) lo = mid;
        else hi = mid;
    }
    T v;
    if (exception_value<T>(j, C, offR, runs, values, err, v)) out[edges[2 * lo] + (j - len_off[lo])] = v;
}

// The exception decoder (docs/FORMAT.md section 5), shared by the v1 decoder and the v2 pipelines (interp_gpu.cu):
// edge mask -> exception mask M (one bit per value, div_up(n, 32) words) and each exception's rank; change bits ->
// run rank; values scattered into out. init(), then the scan temporaries (scan_bytes) and the buffers (carve) are
// taken from the caller's arena, then run() queues the kernels; errors go to the caller's error word.
// A caller that does not read M afterwards (mask_wanted false) gets the interval path where few edge blocks are
// stored (at most 1 in kSparseEdgeRatio): M stays null.
constexpr uint64_t kSparseEdgeRatio = 64;
struct ExceptionDecoder {
    uint64_t n = 0, k = 0, runs = 0, nb_edge = 0, ng_edge = 0, nw_mask = 0, nb_change = 0, ng_change = 0, nw_change = 0;
    uint64_t edge_stored = 0, intervals = 0;  // interval path: stored edge blocks, upper bound of the intervals
    bool by_intervals = false;
    bool one_block = false;  // the interval path in one block and a scatter (k_exceptions_prepare, _scatter)
    uint32_t *flagE = nullptr, *cntE = nullptr, *offE = nullptr, *E = nullptr, *cntP = nullptr, *offP = nullptr;
    uint32_t *M = nullptr, *cntM = nullptr, *offM = nullptr;
    uint32_t *flagC = nullptr, *cntC = nullptr, *offC = nullptr, *C = nullptr, *cntR = nullptr, *offR = nullptr;
    uint64_t *block_of = nullptr, *edges = nullptr;
    uint32_t *edge_cnt = nullptr, *edge_off = nullptr, *len = nullptr, *len_off = nullptr;
    uint32_t *interval_count = nullptr;  // one_block: k_exceptions_prepare's count for k_exceptions_scatter

    // edge_blocks_len: the length of the stored edge blocks segment.
    void init(uint64_t n_, uint64_t k_, uint64_t runs_, uint64_t edge_blocks_len = 0, bool mask_wanted = true) {
        n = n_;
        k = k_;
        runs = runs_;
        nb_edge = div_up(div_up(n, 8), kBlockBytes);
        ng_edge = div_up(nb_edge, 32);
        nw_mask = div_up(n, 32);
        nb_change = div_up(div_up(k, 8), kBlockBytes);
        ng_change = div_up(nb_change, 32);
        nw_change = 4 * nb_change;
        edge_stored = edge_blocks_len / kBlockBytes;
        by_intervals = k && !mask_wanted && edge_stored > 0 && edge_stored * kSparseEdgeRatio <= nb_edge;
        intervals = by_intervals ? 64 * edge_stored : 0;  // 128 edges per block at most
        one_block = by_intervals && ng_edge <= kExcMaxFlagWords && edge_stored <= kExcMaxStored &&
                    k <= kExcMaxExceptions && exception_block_enabled();
    }
    // Largest scan temporary run() needs (0 without exceptions).
    size_t scan_bytes(cudaStream_t s) const {
        if (!k || one_block) return 0;
        if (by_intervals) return exclusive_sum_temp_bytes({ng_edge, edge_stored, intervals, ng_change, nw_change}, s);
        return exclusive_sum_temp_bytes({ng_edge, nw_mask, ng_change, nw_change}, s);
    }
    void carve(Carver &cv) {
        if (!k) return;
        flagE = cv.take<uint32_t>(ng_edge);
        cntE = cv.take<uint32_t>(ng_edge);
        offE = cv.take<uint32_t>(ng_edge);
        if (by_intervals) {
            block_of = cv.take<uint64_t>(edge_stored);
            edge_cnt = cv.take<uint32_t>(edge_stored);
            edge_off = cv.take<uint32_t>(edge_stored);
            edges = cv.take<uint64_t>(2 * intervals);
            len = cv.take<uint32_t>(intervals);
            len_off = cv.take<uint32_t>(intervals);
            interval_count = cv.take<uint32_t>(one_block ? 1 : 0);
        } else {
            E = cv.take<uint32_t>(4 * nb_edge);
            cntP = cv.take<uint32_t>(nw_mask);
            offP = cv.take<uint32_t>(nw_mask);
            M = cv.take<uint32_t>(nw_mask);
            cntM = cv.take<uint32_t>(nw_mask);
            offM = cv.take<uint32_t>(nw_mask);
        }
        flagC = cv.take<uint32_t>(ng_change);
        cntC = cv.take<uint32_t>(ng_change);
        offC = cv.take<uint32_t>(ng_change);
        C = cv.take<uint32_t>(nw_change);
        cntR = cv.take<uint32_t>(nw_change);
        offR = cv.take<uint32_t>(nw_change);
    }
    // seg: the five exception segments in device memory (edge flags, edge blocks, change flags, change blocks,
    // values); blocks_len: the lengths of the two block segments. prepare() queues what reads only the segments
    // (one_block: k_exceptions_prepare; else nothing), scatter() the rest, which writes the values into out: a caller
    // may queue prepare() on a graph branch beside the values' decoding and join it before scatter(); run() is both.
    // Both with the same segments and err.
    template <typename T>
    void run(const uint8_t *const *seg, uint64_t edge_blocks_len, uint64_t change_blocks_len, T *out, uint32_t *err,
             void *temp, size_t temp_bytes, cudaStream_t s) const {
        prepare(seg, change_blocks_len, err, s);
        scatter<T>(seg, edge_blocks_len, change_blocks_len, out, err, temp, temp_bytes, s);
    }
    ExcBlockArgs block_args(uint64_t change_blocks_len) const {
        return ExcBlockArgs{n,         k,     runs,       nb_edge, ng_edge, edge_stored, nb_change, ng_change,
                            nw_change, change_blocks_len / kBlockBytes, block_of, edges, len_off, flagC, offC, C,
                            offR,      interval_count};
    }
    void prepare(const uint8_t *const *seg, uint64_t change_blocks_len, uint32_t *err, cudaStream_t s) const {
        if (!k || !one_block) return;
        launch_dependent("launch of k_exceptions_prepare", k_exceptions_prepare, 1, kExcThreads, 0, s,
                         block_args(change_blocks_len), seg[0], seg[1], seg[2], seg[3], err);
    }
    template <typename T>
    void scatter(const uint8_t *const *seg, uint64_t edge_blocks_len, uint64_t change_blocks_len, T *out,
                 uint32_t *err, void *temp, size_t temp_bytes, cudaStream_t s) const {
        if (!k) return;
        if (one_block) {
            launch_dependent("launch of k_exceptions_scatter", k_exceptions_scatter<T>,
                             (unsigned)div_up(k, (uint64_t)kExcThreads), kExcThreads, 0, s,
                             block_args(change_blocks_len), seg[4], out, err);
            return;
        }
        size_t tb;
        sparse_read_flags(seg[0], nb_edge, flagE, cntE, err, kErrEdgeSparse, s);
        tb = temp_bytes;
        exclusive_sum(temp, tb, cntE, offE, ng_edge, s);
        if (by_intervals) {
            // Stored edge blocks -> edge positions -> intervals of exceptions and their ranks.
            k_expect_total<<<1, 32, 0, s>>>(offE, cntE, ng_edge, edge_stored, kErrEdgeSparse, err);
            ZB_LAUNCHED("k_expect_total");
            k_edge_blocks<<<grid_for(ng_edge, 256), 256, 0, s>>>(flagE, offE, ng_edge, edge_stored, block_of);
            ZB_LAUNCHED("k_edge_blocks");
            k_edge_counts<<<grid_for(edge_stored, 256), 256, 0, s>>>(seg[1], edge_stored, edge_cnt);
            ZB_LAUNCHED("k_edge_counts");
            tb = temp_bytes;
            exclusive_sum(temp, tb, edge_cnt, edge_off, edge_stored, s);
            k_edge_positions<<<grid_for(edge_stored, 256), 256, 0, s>>>(seg[1], block_of, edge_off, edge_stored, n,
                                                                        edges, err);
            ZB_LAUNCHED("k_edge_positions");
            k_interval_lengths<<<grid_for(intervals, 256), 256, 0, s>>>(edges, edge_off, edge_cnt, edge_stored,
                                                                         intervals, n, k, len, err);
            ZB_LAUNCHED("k_interval_lengths");
            tb = temp_bytes;
            exclusive_sum(temp, tb, len, len_off, intervals, s);
            k_expect_total<<<1, 32, 0, s>>>(len_off, len, intervals, k, kErrEdgeBits, err);
            ZB_LAUNCHED("k_expect_total");
        } else {
            // Edge mask -> exception mask M and each exception's rank.
            sparse_expand(flagE, cntE, offE, nb_edge, seg[1], edge_blocks_len / 16, div_up(n, 8), E, err,
                          kErrEdgeSparse, s);
            popcount_words(E, nw_mask, cntP, s);
            tb = temp_bytes;
            exclusive_sum(temp, tb, cntP, offP, nw_mask, s);
            k_mask<<<grid_for(nw_mask, 256), 256, 0, s>>>(E, offP, nw_mask, n, M, cntM, err);
            ZB_LAUNCHED("k_mask");
            tb = temp_bytes;
            exclusive_sum(temp, tb, cntM, offM, nw_mask, s);
            k_expect_total<<<1, 32, 0, s>>>(offM, cntM, nw_mask, k, kErrEdgeBits, err);
            ZB_LAUNCHED("k_expect_total");
        }
        // Change bits -> run rank of each exception.
        sparse_read_flags(seg[2], nb_change, flagC, cntC, err, kErrChangeSparse, s);
        tb = temp_bytes;
        exclusive_sum(temp, tb, cntC, offC, ng_change, s);
        sparse_expand(flagC, cntC, offC, nb_change, seg[3], change_blocks_len / 16, div_up(k, 8), C, err,
                      kErrChangeSparse, s);
        k_change_check<<<grid_for(nw_change, 256), 256, 0, s>>>(C, nw_change, k, cntR, err);
        ZB_LAUNCHED("k_change_check");
        tb = temp_bytes;
        exclusive_sum(temp, tb, cntR, offR, nw_change, s);
        k_expect_total<<<1, 32, 0, s>>>(offR, cntR, nw_change, runs, kErrChangeBits, err);
        ZB_LAUNCHED("k_expect_total");
        if (by_intervals) {
            k_scatter_intervals<T><<<grid_for(k, 256), 256, 0, s>>>(edges, len_off, len, intervals, k, C, offR, runs,
                                                                    seg[4], out, err);
            ZB_LAUNCHED("k_scatter_intervals");
        } else {
            k_scatter<T><<<grid_for(div_up(n, 32), 256), 256, 0, s>>>(M, offM, n, k, C, offR, runs, seg[4], out, err);
            ZB_LAUNCHED("k_scatter");
        }
    }
};

// ---- the Lorenzo inverse after the codes ------------------------------------------------------------------------

// Codes of the tiles -> deltas (escapes patched) -> x-prefix in the tiles and the carries between them -> the y and z
// prefix sums fused with dequantization (rank 1: the x-prefix is the whole sum). The fast decoder runs it on its
// bitshuffled tiles (TileCodes); the v2-layout decoder (interp_gpu.cuh) on the 16-bit code array of a Lorenzo stream
// (ArrayCodes), whose codes are the same deltas in another form. plan(), then carve() inside the caller's carve,
// then tiles() and values().
struct LorenzoInverse {
    uint64_t n = 0, ntiles = 0, row_len = 0;
    int rank = 1;
    FastDiv dx;
    Lines ly{}, lz{};
    YzPlan yz;
    uint64_t nsums = 0;
    uint32_t *q = nullptr, *first_head = nullptr, *esc_cnt = nullptr, *esc_off = nullptr, *sums = nullptr;
    uint2 *tail = nullptr, *carry = nullptr, *xc = nullptr;

    // segs: the stream's Lorenzo segments along the slowest dim (version 6), else lorenzo_one_segment. T: the values'
    // type (the y/z walk's occupancy depends on it).
    template <typename T> void plan(const Context &c, const Shape &shape, const LorenzoSegments &segs) {
        n = shape.n;
        ntiles = code_tiles(n);
        rank = shape.rank;
        const uint64_t nx = shape.nx(), ny = shape.ny(), nz = shape.nz();
        const uint64_t target = (uint64_t)c.sm_count * 2048;
        // Rank 1 scans the rows of a segment each in the tiles (like the rows of ranks 2 and 3); ranks 2 and 3 see
        // their slowest dim as segments x layers.
        row_len = rank == 1 ? segs.per_segment : nx;
        dx = FastDiv(row_len);
        // Rank 2: y lines (segments x layers x nx). Rank 3: y lines (nz x ny x nx), then z lines (segments x layers
        // x ny*nx).
        ly = rank == 3 ? make_lines(nz, ny, nx, target) : make_lines(segs.count(), segs.per_segment, nx, target, ny);
        lz = make_lines(segs.count(), segs.per_segment, nx * ny, target, nz);  // read in rank 3 only
        yz = rank == 3 ? plan_yz(c, nx, ny, nz, segs, yz_blocks_per_sm<T>) : YzPlan{};
        auto sums_needed = [](const Lines &a) { return a.nseg > 1 ? a.outer * a.inner * a.nseg : 0; };
        nsums = yz.applies ? yz.plane_words()
                           : std::max(rank >= 2 ? sums_needed(ly) : 0, rank == 3 ? sums_needed(lz) : 0);
    }
    // The scan temporary the stages need.
    size_t scan_bytes(cudaStream_t s) const {
        size_t a = 0, b = 0;
        exclusive_sum(nullptr, a, nullptr, nullptr, ntiles, s);
        exclusive_segmented_sum(nullptr, b, nullptr, nullptr, ntiles, s);
        return std::max(a, b);
    }
    void carve(Carver &cv) {
        esc_cnt = cv.take<uint32_t>(ntiles);
        esc_off = cv.take<uint32_t>(ntiles);
        first_head = cv.take<uint32_t>(ntiles);
        tail = cv.take<uint2>(ntiles);
        carry = cv.take<uint2>(ntiles);
        xc = cv.take<uint2>(ntiles);
        q = cv.take<uint32_t>(n);
        sums = cv.take<uint32_t>(nsums);
    }
    // Deltas and the x-prefix of every tile, the escapes (`escapes` int32 deltas at esc_vals, device memory) added,
    // and the carries between tiles.
    template <class Src>
    void tiles(const Src &src, const int32_t *esc_vals, uint64_t escapes, uint32_t *err, void *temp, size_t temp_bytes,
               cudaStream_t s) const {
        size_t tb;
        launch_dependent("launch of k_decode", k_decode<Src>, (unsigned)ntiles, kTileThreads, 0, s, src, ntiles, n,
                         row_len, dx, escapes, q, first_head, tail, esc_cnt, err);
        if (escapes) {
            tb = temp_bytes;
            exclusive_sum(temp, tb, esc_cnt, esc_off, ntiles, s);
            launch_dependent("launch of k_patch_escapes", k_patch_escapes<Src>, (unsigned)ntiles, kTileThreads, 0, s,
                             src, esc_cnt, esc_off, ntiles, n, row_len, dx, esc_vals, escapes, q, tail, err);
        }
        tb = temp_bytes;
        exclusive_segmented_sum(temp, tb, tail, carry, ntiles, s);
        launch_dependent("launch of k_pack_carries", k_pack_carries, grid_for(ntiles, 256), 256, 0, s, first_head,
                         carry, ntiles, xc);
    }
    // The rest of the N-D inclusive prefix sum (y, then z), the last pass fused with dequantization into out.
    // yz_lb: the y/z walk's look-back words (chunk sizes, launch_yz_prefix), or none.
    template <typename T> void values(double twoeb, T *out, cudaStream_t s, const YzLookback &yz_lb = YzLookback{}) const {
        if (rank == 1) {
            k_finish_1d<T><<<grid_for(n, 256), 256, 0, s>>>(q, xc, n, twoeb, out);
            ZB_LAUNCHED("k_finish_1d");
            return;
        }
        if (yz.applies) {
            launch_yz_prefix<T>(yz, q, xc, sums, out, twoeb, s, yz_lb);
            return;
        }
        // x_carry: this pass reads the in-tile x-prefix and adds the tile carries.
        auto pass = [&](const Lines &a, bool final_pass, bool x_carry) {
            const uint64_t threads = a.outer * a.nseg * a.inner;
            const unsigned grid = grid_for(threads, 256);
            if (a.nseg > 1) {
                if (x_carry) k_segment_sums<true><<<grid, 256, 0, s>>>(q, xc, a, sums);
                else k_segment_sums<false><<<grid, 256, 0, s>>>(q, xc, a, sums);
                ZB_LAUNCHED("k_segment_sums");
                launch_line_scan(sums, a.outer * a.inner, a.nseg, s);
            }
            if (final_pass && x_carry)
                k_segment_apply<T, true, true><<<grid, 256, 0, s>>>(q, xc, a, sums, out, twoeb);
            else if (final_pass)
                k_segment_apply<T, true, false><<<grid, 256, 0, s>>>(q, xc, a, sums, out, twoeb);
            else if (x_carry)
                k_segment_apply<T, false, true><<<grid, 256, 0, s>>>(q, xc, a, sums, out, twoeb);
            else
                k_segment_apply<T, false, false><<<grid, 256, 0, s>>>(q, xc, a, sums, out, twoeb);
            ZB_LAUNCHED("k_segment_apply");
        };
        pass(ly, rank == 2, tiles_have_x_carries(row_len));  // ranks 2 and 3: row_len = nx
        if (rank == 3) pass(lz, true, false);
    }
};

// ---- host driver -------------------------------------------------------------------------------------------------

// The payload into the decoder's aligned buffer inside a graph (a copy node would keep the caller's allocation it
// was captured with: queue_as_graph). 8-byte words where the source allows (a header of 216 bytes leaves the payload
// of a 16-byte aligned stream 8-byte aligned), else bytes. It also zeroes the error word and the `zero_words` words
// at zero (the piece CRCs and their ticket), which would otherwise take two memset nodes, one of them on the path,
// and copies hdr_bytes bytes at hdr_src to hdr_host (mapped host memory; decode's d_header), which a copy node
// before the graph took 2-3 us of a chunk-sized call for (NOTES 144).
__global__ void k_copy_in(const uint8_t *__restrict__ src, uint8_t *__restrict__ dst, uint64_t len,
                          uint32_t *__restrict__ err, uint32_t *__restrict__ zero, uint64_t zero_words,
                          const uint8_t *__restrict__ hdr_src, uint8_t *__restrict__ hdr_host, uint32_t hdr_bytes) {
    wait_for_prior_grids();  // before any memory access (launch_dependent)
    const uint64_t first = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x, stride = (uint64_t)gridDim.x * blockDim.x;
    if (first == 0) *err = 0;
    if (blockIdx.x == 0)
        for (uint32_t i = threadIdx.x; i < hdr_bytes; i += blockDim.x) hdr_host[i] = hdr_src[i];
    for (uint64_t i = first; i < zero_words; i += stride) zero[i] = 0;
    uint64_t done = 0;
    if ((reinterpret_cast<uintptr_t>(src) & 7) == 0) {
        const uint64_t words = len / 8;
        for (uint64_t i = first; i < words; i += stride)
            reinterpret_cast<uint2 *>(dst)[i] = reinterpret_cast<const uint2 *>(src)[i];
        done = 8 * words;
    }
    for (uint64_t i = done + first; i < len; i += stride) dst[i] = src[i];
}

inline std::string error_text(uint32_t e) {
    std::string s = "corrupt stream (GPU decoder):";
    if (e & kErrCodeBlocks) s += " code block flags do not match the count;";
    if (e & kErrPadding) s += " non-zero padding codes;";
    if (e & kErrEscapes) s += " escape codes do not match the escape count;";
    if (e & kErrEdgeSparse) s += " exception edge mask blocks inconsistent;";
    if (e & kErrEdgeBits) s += " exception edge mask inconsistent with the exception count;";
    if (e & kErrChangeSparse) s += " exception change-bit blocks inconsistent;";
    if (e & kErrChangeBits) s += " exception change bits inconsistent with the run count;";
    s.pop_back();
    return s;
}

}  // namespace
}  // namespace dec
}  // namespace gpu
}  // namespace zb

#include "chunk_decode.cuh"

namespace zb {
namespace gpu {
namespace dec {
namespace {

template <typename T>
void decode_impl(Context &c, const Header &h, const uint8_t *src_payload, bool src_on_device, void *dst,
                 bool dst_on_device, bool verify_crc, cudaStream_t s, KernelTimer &timer, const uint8_t *d_header) {
    const uint64_t n = h.shape.n;
    const uint64_t len = h.payload_bytes();
    const bool raw = (h.flags & kFlagRaw) != 0;
    const bool dst_aligned = (reinterpret_cast<uintptr_t>(dst) % sizeof(T)) == 0;

    if (raw && !src_on_device && !dst_on_device) {  // host to host: nothing for the GPU to do
        std::memcpy(dst, src_payload, (size_t)(n * sizeof(T)));
        return;
    }

    const uint64_t ntiles = raw ? 0 : code_tiles(n);
    const uint64_t k = h.exceptions;
    ExceptionDecoder ex;
    ex.init(n, raw ? 0 : k, h.runs, h.seg[kSegEdgeBlocks].length, false);
    // Lorenzo segments along the slowest dim (version 6): each an array of its own.
    LorenzoInverse li;
    if (!raw) {
        const LorenzoSegments segs =
            h.version == kFormatVersionV6 ? lorenzo_segments(h.shape) : lorenzo_one_segment(h.shape);
        li.plan<T>(c, h.shape, segs);
    }

    size_t scan_bytes = 0;
    if (!raw) scan_bytes = std::max(li.scan_bytes(s), ex.scan_bytes(s));

    struct {
        uint8_t *payload;
        uint32_t *cnt, *off, *err, *crcs;
        T *out;
        void *temp;
        ChunkDecodeWords *cw;                // the chunk path's words, then the look-backs' states
        Lookback blocks, carry;
        YzLookback yz;
        uint8_t *zero_end;                   // the end of what the chunk path's memset zeroes
    } b{};
    const bool own_out = !dst_on_device || !dst_aligned;
    const uint64_t crc_words = verify_crc ? piece_count(len) + 1 : 0;  // the general path's crcs and ticket
    // Device-to-device calls of chunk sizes whose payload is 8-byte aligned run the tile stage as one kernel that
    // reads the caller's stream (chunk_decode.cuh); the others copy the payload into an aligned buffer first.
    const bool chunk = chunk_paths_enabled() && src_on_device && dst_on_device && !own_out && !raw &&
                       n <= kChunkMaxValues && reinterpret_cast<uintptr_t>(src_payload) % 8 == 0;
    auto carve = [&](Carver &cv) {
        if (chunk) {
            b.cw = cv.take<ChunkDecodeWords>(1);
            b.blocks.state = cv.take<uint32_t>(ntiles);
            b.carry.state = cv.take<uint32_t>(ntiles);
            const bool yz_parts = li.rank == 3 && li.yz.applies && li.yz.shape.parts > 1;
            b.yz.state = cv.take<uint32_t>(yz_parts ? li.yz.blocks : 0);
            b.crcs = cv.take<uint32_t>(verify_crc ? piece_count(len) : 0);
            b.zero_end = cv.take<uint8_t>(0);  // everything from the words to here is zeroed by one memset
            b.yz.ticket = yz_parts && b.cw ? &b.cw->yz_ticket : nullptr;
            b.yz.incl = cv.take<uint32_t>(yz_parts ? li.yz.plane_words() : 0);
            b.blocks.agg = cv.take<uint4>(ntiles);
            b.blocks.incl = cv.take<uint4>(ntiles);
            b.carry.agg = cv.take<uint4>(ntiles);
            b.carry.incl = cv.take<uint4>(ntiles);
            b.err = b.cw ? &b.cw->err : nullptr;
        } else {
            b.payload = cv.take<uint8_t>(len + 16);
            b.err = cv.take<uint32_t>(1);
        }
        // The general path's piece CRCs and, after them, piece_crcs_check's ticket (zeroed together).
        if (!chunk) b.crcs = cv.take<uint32_t>(crc_words);
        b.out = own_out ? cv.take<T>(n) : nullptr;
        if (raw) return;
        b.cnt = cv.take<uint32_t>(chunk ? 0 : ntiles);
        b.off = cv.take<uint32_t>(chunk ? 0 : ntiles);
        li.carve(cv);
        ex.carve(cv);
        b.temp = cv.take<uint8_t>(scan_bytes);
    };
    carve_from(c.arena[kArenaMain], carve);
    timer.mark("carved");
    T *out = own_out ? b.out : static_cast<T *>(dst);
    uint32_t *err_host = reinterpret_cast<uint32_t *>(c.host_small);
    const uint8_t *pay = chunk ? src_payload : b.payload;
    auto seg = [&](int i) { return pay + h.seg[i].offset; };

    // Everything from the payload's copy to the error word's, on q (the call's stream, or the stream that captures
    // a graph of the call: the payload then comes in through a kernel, see queue_as_graph).
    // d_header to the host: by k_copy_in where the call runs as a graph (the general path, the host memory mapped),
    // else a copy queued before the work (a copy node in the graph would keep the caller's allocation).
    const bool hdr_by_kernel = d_header && !chunk && c.host_small_mapped;
    auto header_copy = [&](cudaStream_t q) {
        ZB_CUDA(cudaMemcpyAsync(c.host_small + kHostReplayHeaderOffset, d_header, h.header_bytes(),
                                cudaMemcpyDeviceToHost, q));
    };
    if (d_header && !hdr_by_kernel) header_copy(s);
    auto queue = [&](cudaStream_t q, bool capturing) {
        uint8_t *hdr_mapped = nullptr;
        if (hdr_by_kernel && capturing) hdr_mapped = c.host_small_mapped + kHostReplayHeaderOffset;
        else if (hdr_by_kernel) header_copy(q);
        // Payload into aligned device memory (the chunk path reads it where it is: its words zeroed instead).
        if (chunk) {
            ZB_CUDA(cudaMemsetAsync(b.cw, 0, b.zero_end - reinterpret_cast<uint8_t *>(b.cw), q));
        } else if (capturing) {
            const unsigned grid = std::min(grid_for(div_up(len, 8), 256), 8u * (unsigned)c.sm_count);
            launch_dependent("launch of k_copy_in", k_copy_in, grid, 256, 0, q, src_payload, b.payload, len, b.err,
                             b.crcs, crc_words, d_header, hdr_mapped, hdr_mapped ? (uint32_t)h.header_bytes() : 0u);
        } else if (src_on_device) {
            if (len) ZB_CUDA(cudaMemcpyAsync(b.payload, src_payload, len, cudaMemcpyDeviceToDevice, q));
        } else {
            upload(c, b.payload, src_payload, len, q);
        }
        const bool zeroed = chunk || capturing;  // the error word, piece CRCs and ticket (k_copy_in or the memset)
        if (!zeroed) ZB_CUDA(cudaMemsetAsync(b.err, 0, 4, q));

        // In a graph the checksum runs on a branch of its own beside the decoding, joined before its check; so does
        // the one-block exception decoder's reading of its segments (ex.prepare), joined before its scatter.
        GraphBranches br(c, q, capturing);
        const bool exc_branch = !raw && k && ex.one_block;
        const int crc_at = 0, exc_at = verify_crc ? 1 : 0;
        br.fork((verify_crc ? 1 : 0) + (exc_branch ? 1 : 0));
        if (verify_crc) {
            timer.begin("crc");
            // The piece CRCs and the comparison in one kernel: its crcs and ticket zeroed with the chunk path's
            // words, by k_copy_in, or by a memset on the branch.
            uint32_t *ticket = chunk ? &b.cw->crc_ticket : b.crcs + piece_count(len);
            if (!zeroed) ZB_CUDA(cudaMemsetAsync(b.crcs, 0, 4 * crc_words, br.stream(crc_at)));
            piece_crcs_check(c, pay, len, b.crcs, ticket, h.payload_crc, b.err, kErrPayloadCrc, br.stream(crc_at));
            timer.end();
        }
        const uint8_t *xs[5] = {seg(kSegEdgeFlags), seg(kSegEdgeBlocks), seg(kSegChangeFlags), seg(kSegChangeBlocks),
                                seg(kSegExceptionValues)};
        if (exc_branch) ex.prepare(xs, h.seg[kSegChangeBlocks].length, b.err, br.stream(exc_at));
        if (raw) {
            if (len) ZB_CUDA(cudaMemcpyAsync(out, pay, len, cudaMemcpyDeviceToDevice, q));
        } else {
            size_t tb;
            const TileCodes src{reinterpret_cast<const uint32_t *>(seg(kSegCodeFlags)),
                                reinterpret_cast<const uint4 *>(seg(kSegCodeBlocks)), h.nonzero_code_blocks, b.cnt,
                                b.off};
            timer.begin("tiles");
            if (chunk) {
                const ChunkDecodeArgs a{pay,      ntiles,   n,   li.row_len, li.dx, h.nonzero_code_blocks, h.escapes,
                                        h.seg[kSegEscapes].offset, b.cw, b.blocks, b.carry, li.q, li.xc};
                k_chunk_decode<<<(unsigned)ntiles, kTileThreads, 0, q>>>(a);
                ZB_LAUNCHED("k_chunk_decode");
            } else {
                launch_dependent("launch of k_tile_nnz", k_tile_nnz, grid_for(ntiles, 256), 256, 0, q, src.flags,
                                 ntiles, b.cnt);
                tb = scan_bytes;
                exclusive_sum(b.temp, tb, b.cnt, b.off, ntiles, q);
                li.tiles(src, reinterpret_cast<const int32_t *>(seg(kSegEscapes)), h.escapes, b.err, b.temp,
                         scan_bytes, q);
            }
            timer.end();
            timer.begin("prefix");
            li.values<T>(2.0 * h.eb, out, q, chunk ? b.yz : YzLookback{});
            timer.end();

            if (k) {
                timer.begin("exceptions");
                if (exc_branch) br.join_branch(exc_at);  // ex.prepare, queued above (else it queues nothing)
                ex.scatter<T>(xs, h.seg[kSegEdgeBlocks].length, h.seg[kSegChangeBlocks].length, out, b.err, b.temp,
                              scan_bytes, q);
                timer.end();
            }
        }
        // Payload checksum compared on the device, the error word back to the host; the values only once they are
        // known to be good.
        timer.mark("launched");
        if (verify_crc) br.join_branch(crc_at);
        result_to_host(c, b.err, 4, q);  // the error word into err_host
    };

    // A device-to-device call that repeats (same buffers and header) runs as one graph: a chunk-sized call is a
    // dozen launches of a few us of host time each, more than its kernels take (NOTES 113).
    bool graphed = false;
    if (src_on_device && !own_out && !raw && n * sizeof(T) <= kGraphMaxBytes && !timer.records() &&
        graphs_usable(c)) {
        GraphKey key;
        key.add(0x66646563);  // "fdec"
        key.add(sizeof(T));
        for (int i = 0; i < 3; ++i) key.add(h.shape.dims[i]);
        key.add((uint64_t)h.shape.rank);
        key.add(h.version);
        key.add(h.flags);
        uint64_t eb_bits;
        std::memcpy(&eb_bits, &h.eb, 8);
        key.add(eb_bits);
        key.add(h.exceptions);
        key.add(h.runs);
        key.add(h.escapes);
        key.add(h.nonzero_code_blocks);
        key.add(h.payload_crc);
        key.add(len);
        for (int i = 0; i < kFastSegmentCount; ++i) key.add(h.seg[i].offset), key.add(h.seg[i].length);
        key.add_ptr(src_payload);
        key.add_ptr(out);
        key.add_ptr(b.payload);  // the main arena (every buffer's place follows from it and the header)
        key.add(c.arena[kArenaMain].allocations());
        key.add((uint64_t)verify_crc);
        key.add((uint64_t)ex.one_block);     // ZBOUND_GPU_EXCEPTION_BLOCK may change between calls
        key.add(li.yz.shape.parts);          // and ZBOUND_GPU_YZ_PARTS
        key.add((uint64_t)chunk);            // and ZBOUND_GPU_CHUNK
        key.add_ptr(d_header);
        graphed = queue_as_graph(c, key, s, [&](cudaStream_t q) { queue(q, true); });
        if (graphed) timer.mark("graph queued");
    }
    if (!graphed) queue(s, false);
    ZB_CUDA(cudaStreamSynchronize(s));
    timer.mark("checked");
    if (*err_host & kErrPayloadCrc) fail(ZB_ERR_CORRUPT, "payload checksum mismatch");
    if (*err_host) fail(ZB_ERR_CORRUPT, error_text(*err_host));
    if (!dst_on_device) {
        download(c, dst, out, n * sizeof(T), s);
    } else if (own_out) {
        ZB_CUDA(cudaMemcpyAsync(dst, out, n * sizeof(T), cudaMemcpyDeviceToDevice, s));
        ZB_CUDA(cudaStreamSynchronize(s));
    }
    timer.mark("done");
}

}  // namespace
}  // namespace dec

template <typename T>
void decode(Context &c, const Header &h, const uint8_t *src_payload, bool src_on_device, void *dst,
            bool dst_on_device, bool verify_crc, cudaStream_t s, KernelTimer &timer, const uint8_t *d_header) {
    dec::decode_impl<T>(c, h, src_payload, src_on_device, dst, dst_on_device, verify_crc, s, timer, d_header);
}

}  // namespace gpu
}  // namespace zb
