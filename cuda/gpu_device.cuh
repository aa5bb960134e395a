// Device-side helpers shared by the encoder and decoder kernels.
#pragma once
#include <cuda_runtime.h>
#include <cstdint>
#include <type_traits>
#include "zb_div32.h"
#include "zb_quant.h"
#include "zb_transpose8.h"

namespace zb {
namespace gpu {

constexpr uint32_t kFullMask = 0xFFFFFFFFu;
constexpr int kTileThreads = 256;     // one block per 2048-code tile, 8 codes per thread
constexpr int kTileWords = 1024;      // 4096 bytes of a shuffled tile as 32-bit words
constexpr int kPlaneWords = 64;       // one bit plane: 2048 bits
constexpr int kTileFlagWords = 8;     // 256 zero-block flags per tile

// Division by a fixed divisor without a 64-bit integer divide. Dividends below 2^32 (every index of an array of
// fewer than 4 G values) take zb::Div32's multiply-high; larger ones a double-precision estimate of the quotient, off
// by at most one below 2^50, and one exact correction step. (The estimate alone, for every dividend, cost two 64-bit
// conversions, which issue at a quarter rate: about a third of k_encode's instructions went to its three divisions.)
struct FastDiv {
    uint64_t d = 1;
    double inv = 1.0;
    Div32 d32;
    bool small = true;  // d < 2^32: d32 is usable
    FastDiv() = default;
    explicit FastDiv(uint64_t divisor)
        : d(divisor), inv(1.0 / (double)divisor), small(divisor < (uint64_t(1) << 32)) {
        if (small) d32 = Div32::make(divisor);
    }
    __device__ __forceinline__ uint64_t div(uint64_t a) const {
        if (small && a < (uint64_t(1) << 32)) return d32.div((uint32_t)a);
        uint64_t q = (uint64_t)__dmul_rn((double)a, inv);
        const int64_t r = (int64_t)(a - q * d);
        if (r < 0) --q;
        else if (r >= (int64_t)d) ++q;
        return q;
    }
};

// The folded shape as kernels see it (rank 1: ny = nz = 1; rank 2: nz = 1), with the layers per Lorenzo segment
// along the slowest dim (zb_lorenzo.h; rank 1: values).
struct Dims {
    uint64_t n, nx, ny, nz, seg;
    FastDiv dx, dy, dseg;
};

// How a 16-bit code array holds the integer codes q (|q| < radius) for the stream's encoder (docs/FORMAT.md 8):
// the fast encoder's sign-magnitude codes (escape 0x8000), or the ratio encoder's symbols q + radius (escape 0).
struct CodeStyle {
    int32_t radius;
    int ratio;
    ZB_HD uint16_t put(int32_t q) const { return ratio ? (uint16_t)(q + radius) : delta_to_code(q); }
    ZB_HD uint16_t escape() const { return ratio ? (uint16_t)0 : kEscapeCode; }
    ZB_HD int32_t get(uint16_t c) const { return ratio ? (int32_t)c - radius : code_to_delta(c); }
    ZB_HD bool escaped(int32_t q) const { return !(q > -radius && q < radius); }   // stored as escape()
};

// Bits of the per-call error word set by the decoder's kernels; see error_text() in decode.cuh.
enum DecodeError : uint32_t {
    kErrCodeBlocks = 1u << 0,   // code block flags disagree with the stored block count
    kErrPadding = 1u << 1,      // a padding code of the last tile is not zero
    kErrEscapes = 1u << 2,      // escape codes disagree with the escape count
    kErrEdgeSparse = 1u << 3,   // edge-mask flags / blocks inconsistent
    kErrEdgeBits = 1u << 4,     // edge-mask bits past the end, or exception count mismatch
    kErrChangeSparse = 1u << 5, // change-bit flags / blocks inconsistent
    kErrChangeBits = 1u << 6,   // change bits past the end, first bit not set, or run count mismatch
    kErrPayloadCrc = 1u << 15,  // the payload checksum differs from the header's (reported before any other bit)
};

__device__ __forceinline__ void set_error(uint32_t *err, uint32_t bit) { atomicOr(err, bit); }

// 16-byte store to an address of any alignment (segments after the escape list are byte-aligned; a device stream's
// payload starts 8 bytes past a 16-byte boundary), in the widest pieces the address allows.
__device__ __forceinline__ void store16(uint8_t *dst, uint4 v) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(dst);
    if ((a & 15) == 0) {
        *reinterpret_cast<uint4 *>(dst) = v;
    } else if ((a & 7) == 0) {
        reinterpret_cast<uint2 *>(dst)[0] = make_uint2(v.x, v.y);
        reinterpret_cast<uint2 *>(dst)[1] = make_uint2(v.z, v.w);
    } else if ((a & 3) == 0) {
        uint32_t *d = reinterpret_cast<uint32_t *>(dst);
        d[0] = v.x, d[1] = v.y, d[2] = v.z, d[3] = v.w;
    } else {
        // The three whole words inside [dst, dst + 16) from funnel shifts of the block's words, the 4 bytes around
        // them one by one (16 byte stores before: the ratio encoder's bitstream lands at any offset).
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
        const int head = 4 - (int)(a & 3);  // bytes before the first whole word: 1..3
        uint32_t *whole = reinterpret_cast<uint32_t *>(dst + head);
#pragma unroll
        for (int i = 0; i < 3; ++i) whole[i] = __funnelshift_r(w[i], w[i + 1], 8 * head);
#pragma unroll
        for (int j = 0; j < 3; ++j) {
            if (j < head) dst[j] = (uint8_t)(w[0] >> (8 * j));
            if (j >= head - 1) dst[13 + j] = (uint8_t)(w[3] >> (8 * (j + 1)));   // bytes 12 + head .. 15
        }
    }
}

// 16-byte load from an address of any alignment.
__device__ __forceinline__ uint4 load16(const uint8_t *src) {
    if ((reinterpret_cast<uintptr_t>(src) & 15) == 0) return *reinterpret_cast<const uint4 *>(src);
    uint32_t w[4] = {0, 0, 0, 0};
#pragma unroll
    for (int i = 0; i < 16; ++i) w[i >> 2] |= (uint32_t)src[i] << (8 * (i & 3));
    return make_uint4(w[0], w[1], w[2], w[3]);
}

// Lane-wise sum of uint4s (scan operator).
struct AddU4 {
    __host__ __device__ uint4 operator()(const uint4 &a, const uint4 &b) const {
        return make_uint4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
    }
};

__device__ __forceinline__ bool any_bits(uint4 v) { return (v.x | v.y | v.z | v.w) != 0; }
__device__ __forceinline__ uint32_t popc16(uint4 v) { return __popc(v.x) + __popc(v.y) + __popc(v.z) + __popc(v.w); }

// A word of the exception mask's edges (docs/FORMAT.md section 5): bit i set where mask bit i differs from the bit
// before it; prev is the last bit of the word before (0 for the first word).
__device__ __forceinline__ uint32_t edge_bits(uint32_t m, uint32_t prev) { return m ^ ((m << 1) | prev); }

// Bits [0, k) set (k in 0..32).
__device__ __forceinline__ uint32_t low_bits(int k) { return k >= 32 ? kFullMask : ((1u << k) - 1u); }

// Bit k set for each of the `count` (<= 32) values from index i that exist, i.e. i + k < n.
__device__ __forceinline__ uint32_t existing_bits(uint64_t i, int count, uint64_t n) {
    return i >= n ? 0u : low_bits(n - i < (uint64_t)count ? (int)(n - i) : count);
}

// Number of valid bits in 32-bit word w of a bit string of `nbits` bits. I is the index type: uint64_t, or uint32_t
// in the one-block kernels, whose bounds keep 32 nbits below 2^32 and which are bound by instruction issue.
template <typename I>
__device__ __forceinline__ int valid_bits(I w, I nbits) {
    static_assert(std::is_unsigned<I>::value, "an unsigned index type");
    const I start = w * 32;
    return start >= nbits ? 0 : (nbits - start >= 32 ? 32 : (int)(nbits - start));
}

// Flag word g (blocks 32g .. 32g+31) of a sparse pass's flag bytes (docs/FORMAT.md section 5), the bits at or past
// nblocks cleared; `stray` is set where any of them was set (a corrupt stream).
template <typename I>
__device__ __forceinline__ uint32_t sparse_flag_word(const uint8_t *__restrict__ flag_bytes, I g, I nblocks,
                                                     bool &stray) {
    const I nbytes = (nblocks + 7) / 8;
    uint32_t fw = 0;
    for (int b = 0; b < 4; ++b)
        if (4 * g + b < nbytes) fw |= (uint32_t)flag_bytes[4 * g + b] << (8 * b);
    const uint32_t valid = low_bits(valid_bits(g, nblocks));
    if (fw & ~valid) stray = true;
    return fw & valid;
}

// Whether the bytes of a string's last 16-byte block v past its `used` bytes (1..16) are zero, as an encoder writes
// them.
__device__ __forceinline__ bool tail_bytes_zero(uint4 v, uint32_t used) {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
    for (uint32_t i = used; i < 16; ++i)
        if ((w[i >> 2] >> (8 * (i & 3))) & 0xFF) return false;
    return true;
}

// Bitshuffle of 8 consecutive codes 8j .. 8j+7 of a tile (docs/FORMAT.md section 5), two codes per word of w: byte
// p % 4 of planes[p / 4] (p < 16) is byte j of plane p, i.e. its bit k is bit p of code 8j+k. The codes' low and
// high bytes are gathered by byte permutes into two 8x8 bit matrices (rows = codes) and transposed (rows = planes);
// the inverse of decode.cuh's unshuffle8.
__device__ __forceinline__ void shuffle8(const uint32_t (&w)[4], uint32_t (&planes)[4]) {
    planes[0] = __byte_perm(w[0], w[1], 0x6420);  // low bytes of codes 0-3
    planes[1] = __byte_perm(w[2], w[3], 0x6420);  // codes 4-7
    planes[2] = __byte_perm(w[0], w[1], 0x7531);  // high bytes
    planes[3] = __byte_perm(w[2], w[3], 0x7531);
    transpose8x8_halves(planes[0], planes[1]);
    transpose8x8_halves(planes[2], planes[3]);
}

// Where k_encode also makes the exception mask's edges (docs/FORMAT.md section 5) for the one-block exception stage,
// which then need not read every mask word in its single block (its pass 1, about 30 % of it at 4 MB: NOTES 134, 136):
// the edge mask's non-zero 16-byte blocks (128 values each) into E at their block's place (zero blocks are not
// written: only flagged blocks are read, as after k_edge_flags), the tile's 16 block flags into flag16[t] (the flag
// words of the edge segment seen as halves: tile t is the low half of word t / 2 for t even, the high half for t
// odd), and their count into counts[t].w. E nullptr: none of this, counts[t].w = 0.
struct TileEdges {
    uint32_t *E = nullptr;
    uint16_t *flag16 = nullptr;
    uint64_t n = 0, ntiles = 0;  // values (an edge at n, a run that reaches the end, is not stored), tiles
};

// A thread's part of tile t's exception mask: its exceptions (tile_exception_share) and, with edges, the edge word
// of its mask word (stored where its 16-byte block has edges) and, the same in every lane of warp w, the flags of the
// tile's blocks 2w and 2w + 1 (bits 0 and 1). Lanes 0-7 of warp w: words 8w .. 8w+7. Called by whole warps.
struct TileMaskShare {
    uint32_t exceptions = 0, edge_flags2 = 0;
};
__device__ __forceinline__ TileMaskShare tile_mask_share(const uint32_t *__restrict__ mwords, uint64_t t,
                                                         const TileEdges &edges) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const uint64_t i = t * 64 + warp * 8 + lane;
    const uint32_t m = lane < 8 ? mwords[i] : 0u;
    TileMaskShare share;
    share.exceptions = (uint32_t)__popc(m);
    if (!edges.E) return share;  // the same in the whole grid
    uint32_t prev = __shfl_up_sync(kFullMask, m, 1) >> 31;  // the mask bit before this word's first
    if (lane == 0) prev = i ? mwords[i - 1] >> 31 : 0u;
    const uint32_t e = lane < 8 ? edge_bits(m, prev) & low_bits(valid_bits(i, edges.n)) : 0u;
    const uint32_t nz = __ballot_sync(kFullMask, e != 0);  // lanes 0-3: block 2w, lanes 4-7: block 2w + 1
    if (lane < 8 && ((nz >> (lane & 4)) & 0xFu)) edges.E[i] = e;
    share.edge_flags2 = (uint32_t)((nz & 0xFu) != 0) | (uint32_t)((nz & 0xF0u) != 0) << 1;
    return share;
}

// A thread's share of tile t's exception count for store_tile, from the tile's 64 mask words: lanes 0-7 of warp w
// count words 8w .. 8w+7 (the values of the warp's 256 codes).
__device__ __forceinline__ uint32_t tile_exception_share(const uint32_t *__restrict__ mwords, uint64_t t) {
    return tile_mask_share(mwords, t, TileEdges{}).exceptions;
}

// The per-warp counts of one tile that store_tile sums: non-zero blocks, escapes and exceptions of each of the 8
// warps, and their edge flags (tile_mask_share's two bits; read only where the kernel makes edges) (shared memory).
struct TileCounts {
    uint32_t nnz[8], esc[8], exc[8], edge[8];
};

// counts[t] = {non-zero blocks, escapes, exceptions, stored edge blocks} from the warps' parts, and with edges the
// tile's edge flags, by one thread.
__device__ __forceinline__ void sum_tile_counts(const TileCounts &wc, uint64_t t, uint4 *__restrict__ counts,
                                                const TileEdges &edges = TileEdges{}) {
    uint4 c = make_uint4(0, 0, 0, 0);
    for (int k = 0; k < 8; ++k) {
        c.x += wc.nnz[k];
        c.y += wc.esc[k];
        c.z += wc.exc[k];
    }
    if (!edges.E) {  // counts[t].w = 0; a caller without edges (the default) compiles none of what follows
        counts[t] = c;
        return;
    }
    uint32_t flags = 0;
    for (int k = 0; k < 8; ++k) flags |= wc.edge[k] << (2 * k);
    c.w = (uint32_t)__popc(flags);
    counts[t] = c;
    // The last flag word's high half belongs to no tile where the count is odd: written 0 with the low one.
    if (t + 1 == edges.ntiles && t % 2 == 0) reinterpret_cast<uint32_t *>(edges.flag16)[t / 2] = flags;
    else edges.flag16[t] = (uint16_t)flags;
}

// What store_tile_parts leaves the calling thread: its 16-byte block of the shuffled tile and its warp's flag word.
struct TileBlock {
    uint4 block;
    uint32_t flag_word;
};

// store_tile without the counts' sum: the warps' parts are in wc once a barrier has passed after the call. One
// barrier; a caller that calls it again for another tile must pass a barrier before that call's shared-memory writes.
// Dense = false: no store into dense (the chunk encoder writes the blocks at their final place itself, from the
// returned TileBlock).
template <bool Dense = true>
__device__ __forceinline__ TileBlock store_tile_parts(const uint32_t (&w)[4], uint32_t esc, uint32_t exc, uint64_t t,
                                                      uint4 *__restrict__ dense, uint32_t *__restrict__ flags,
                                                      TileCounts &wc) {
    __shared__ uint4 tile4[kTileWords / 4];
    uint8_t *tile = reinterpret_cast<uint8_t *>(tile4);
    const int j = threadIdx.x, lane = j & 31, warp = j >> 5;
    uint32_t planes[4];
    shuffle8(w, planes);
#pragma unroll
    for (int p = 0; p < 16; ++p) tile[p * 256 + j] = (uint8_t)(planes[p >> 2] >> (8 * (p & 3)));
    exc = __reduce_add_sync(kFullMask, exc);
    esc = __reduce_add_sync(kFullMask, esc);
    if (lane == 0) {
        wc.exc[warp] = exc;
        wc.esc[warp] = esc;
    }
    __syncthreads();
    const uint4 b = tile4[j];
    const bool nz = any_bits(b);
    const uint32_t fw = __ballot_sync(kFullMask, nz);
    if (Dense && nz) dense[t * 256 + j] = b;
    if (lane == 0) {
        flags[t * kTileFlagWords + warp] = fw;
        wc.nnz[warp] = __popc(fw);
    }
    return TileBlock{b, fw};
}

// The end of a tile kernel (encode.cuh's k_encode, interp_gpu.cuh's k_code_tiles), one block of 256 threads per
// tile: thread j holds the tile's codes 8j .. 8j+7 (two per word of w), its count of escape codes and its share of
// the tile's exceptions (tile_exception_share, or its own values' count). Bitshuffles the codes (byte j of each of
// the 16 planes stored in shared memory), then each thread tests one 16-byte block. Writes the tile's zero-block
// flags (8 words at flags[t * kTileFlagWords]), its non-zero blocks at dense[t * 256 + block] (zero blocks are never
// read back: their stores are skipped) and counts[t] = {non-zero blocks, escapes, exceptions, 0}. Two barriers; once
// per block (k_quantize_encode, which walks tiles, sums each tile's counts after its next barrier instead:
// store_tile_parts). With edges (k_encode's, TileEdges), mask is tile_mask_share's for that: the tile's edge flags
// and their count in counts[t].w; without, counts[t].w = 0.
__device__ __forceinline__ void store_tile(const uint32_t (&w)[4], uint32_t esc, const TileMaskShare &mask, uint64_t t,
                                           uint4 *__restrict__ dense, uint32_t *__restrict__ flags,
                                           uint4 *__restrict__ counts, const TileEdges &edges = TileEdges{}) {
    __shared__ TileCounts wc;
    if (edges.E && threadIdx.x % 32 == 0) wc.edge[threadIdx.x / 32] = mask.edge_flags2;  // read after the barrier
    store_tile_parts(w, esc, mask.exceptions, t, dense, flags, wc);
    __syncthreads();
    if (threadIdx.x == 0) sum_tile_counts(wc, t, counts, edges);
}
__device__ __forceinline__ void store_tile(const uint32_t (&w)[4], uint32_t esc, uint32_t exc, uint64_t t,
                                           uint4 *__restrict__ dense, uint32_t *__restrict__ flags,
                                           uint4 *__restrict__ counts) {
    TileMaskShare mask;
    mask.exceptions = exc;
    store_tile(w, esc, mask, t, dense, flags, counts);
}

// Launch configuration for a flat grid of `threads` threads in blocks of `block`.
inline unsigned grid_for(uint64_t threads, unsigned block) {
    const uint64_t g = (threads + block - 1) / block;
    return (unsigned)(g ? g : 1);
}

}  // namespace gpu
}  // namespace zb
