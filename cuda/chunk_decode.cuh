// The fast decoder's chunk path: the tile stage of a device-to-device decompression in one launch instead of six
// (the payload's copy into an aligned buffer, the tiles' block counts and their scan, k_decode, the escapes' scan and
// patch, the carries' segmented scan and packing: serial graph nodes of a few us each at chunk sizes, bench/NOTES.md
// 110, 117). Part of decode.cuh, which includes it after the kernels and helpers it uses.
//
// k_chunk_decode: one block per tile, tiles handed out in order by a ticket. Its stored blocks' offset comes from a
// decoupled look-back (lookback.cuh) over the tiles' counts of set flags, so the blocks are read straight from the
// caller's stream; the codes become deltas (escapes patched in from their rank, which a second look-back gives with
// the x carries) and the in-tile x-prefix, written where LorenzoInverse::values reads them (q, and xc: each tile's
// first row start and the x-prefix carried into it). The same checks and error bits as k_decode and k_patch_escapes.
#pragma once
#include <cub/block/block_scan.cuh>
#include "lookback.cuh"

namespace zb {
namespace gpu {
namespace dec {
namespace {

// The second look-back's value: escapes of the tiles (x), and the x-prefix as a segmented sum (y: the sum since the
// last row start, z: whether there is one), as exclusive_segmented_sum combines the tiles' tails.
struct EscapesAndCarry {
    __device__ __forceinline__ uint4 operator()(uint4 earlier, uint4 later) const {
        return make_uint4(earlier.x + later.x, later.z ? later.y : earlier.y + later.y, earlier.z | later.z, 0u);
    }
};

// Device words of one call, zeroed by its first node together with the two look-backs' states and the piece CRCs
// (carved after them).
struct ChunkDecodeWords {
    uint32_t err;          // DecodeError bits of the whole call
    uint32_t tile_ticket;
    uint32_t crc_ticket;   // piece_crcs_check's
    uint32_t yz_ticket;    // the y/z walk's look-back (YzLookback)
};

struct ChunkDecodeArgs {
    const uint8_t *pay;      // the stream's payload in the caller's buffer, 8-byte aligned
    uint64_t ntiles, n, row_len;
    FastDiv dx;
    uint64_t nnz, escapes;   // the header's counts
    uint64_t escapes_at;     // segment 2's offset in the payload (4-byte aligned)
    ChunkDecodeWords *w;
    Lookback blocks, carry;
    uint32_t *local;         // LorenzoInverse's q: the in-tile x-prefix
    uint2 *xc;               // per tile: first row start, x carry (k_pack_carries' output)
};

// A stored 16-byte code block from an 8-byte aligned address.
__device__ __forceinline__ uint4 load_block8(const uint8_t *p) {
    const uint2 lo = reinterpret_cast<const uint2 *>(p)[0], hi = reinterpret_cast<const uint2 *>(p)[1];
    return make_uint4(lo.x, lo.y, hi.x, hi.y);
}

__global__ void __launch_bounds__(kTileThreads) k_chunk_decode(const ChunkDecodeArgs a) {
    using CountScan = cub::BlockScan<uint32_t, kTileThreads>;
    __shared__ uint4 tile4[kTileWords / 4];
    __shared__ TileScan::TempStorage tmp;
    __shared__ typename CountScan::TempStorage ctmp;
    __shared__ uint32_t tile_index, tile_esc, tile_head;
    __shared__ uint4 blocks_before, carry_before;
    const int j = threadIdx.x, lane = j & 31, warp = j >> 5;
    if (j == 0) {
        tile_index = atomicAdd(&a.w->tile_ticket, 1u);
        tile_esc = 0;
        tile_head = kTileCodes;
    }
    __syncthreads();
    const uint64_t t = tile_index, e = t * kTileCodes + 8 * (uint64_t)j;

    // The tile's stored blocks: their count from its flags, their offset from the tiles before it.
    const uint32_t *flags = reinterpret_cast<const uint32_t *>(a.pay) + t * kTileFlagWords;
    if (warp == 0) {
        const uint32_t own = __reduce_add_sync(kFullMask, lane < kTileFlagWords ? (uint32_t)__popc(flags[lane]) : 0u);
        const uint4 before = lookback_exclusive(a.blocks, t, make_uint4(own, 0, 0, 0), make_uint4(0, 0, 0, 0), SumOp());
        if (lane == 0) {
            blocks_before = before;
            if (t == a.ntiles - 1 && (uint64_t)before.x + own != a.nnz) set_error(&a.w->err, kErrCodeBlocks);
        }
    }
    __syncthreads();
    {  // load_tile's expansion, from the caller's stream
        const uint32_t fw = flags[warp];
        const uint32_t earlier = __reduce_add_sync(kFullMask, lane < warp ? (uint32_t)__popc(flags[lane]) : 0u);
        uint4 v = make_uint4(0, 0, 0, 0);
        if ((fw >> lane) & 1) {
            const uint64_t rank = (uint64_t)blocks_before.x + earlier + __popc(fw & low_bits(lane));
            if (rank < a.nnz) v = load_block8(a.pay + a.ntiles * kTileFlagBytes + 16 * rank);
            else set_error(&a.w->err, kErrCodeBlocks);
        }
        tile4[j] = v;
    }
    __syncthreads();

    // Codes -> deltas (escapes as 0, counted), row starts (k_decode's).
    uint32_t c[8], v[8];
    unshuffle8(reinterpret_cast<const uint32_t *>(tile4), j, c);
    uint32_t esc = 0;
    const uint32_t inside = existing_bits(e, 8, a.n);
#pragma unroll
    for (int k = 0; k < 8; ++k) {
        if ((inside >> k) & 1) {
            const bool is_esc = c[k] == kEscapeCode;
            v[k] = is_esc ? 0u : (uint32_t)code_to_delta((uint16_t)c[k]);
            esc += is_esc;
        } else {
            v[k] = 0;
            if (c[k]) set_error(&a.w->err, kErrPadding);
        }
    }
    const uint32_t heads = row_heads(e, a.n, a.row_len, a.dx);
    if (heads) atomicMin(&tile_head, 8 * j + (__ffs(heads) - 1));
    if (esc) atomicAdd(&tile_esc, esc);
    __syncthreads();
    const uint4 zero = make_uint4(0, 0, 0, 0);
    uint2 total;
    if (tile_esc == 0) {
        // The common case: the tile's own value is known now; publish it before looking back.
        total = seg_scan8(tmp, v, heads);
        if (warp == 0) {
            const uint4 before = lookback_exclusive(a.carry, t, make_uint4(0, total.y, total.x, 0), zero,
                                                    EscapesAndCarry());
            if (lane == 0) carry_before = before;
        }
    } else {
        // The escaped deltas need their rank among all escapes before the tile's own sum exists.
        if (warp == 0) {
            const uint4 before = lookback_walk(a.carry, t, zero, EscapesAndCarry());
            if (lane == 0) carry_before = before;
        }
        __syncthreads();
        uint32_t rank, unused;
        CountScan(ctmp).ExclusiveSum(esc, rank, unused);
        uint64_t idx = (uint64_t)carry_before.x + rank;
        const int32_t *esc_vals = reinterpret_cast<const int32_t *>(a.pay + a.escapes_at);
#pragma unroll
        for (int k = 0; k < 8; ++k)
            if (((inside >> k) & 1) && c[k] == kEscapeCode) {
                if (idx < a.escapes) v[k] = (uint32_t)esc_vals[idx];
                else set_error(&a.w->err, kErrEscapes);
                ++idx;
            }
        total = seg_scan8(tmp, v, heads);
        if (j == 0)
            lookback_publish(a.carry, t, EscapesAndCarry()(carry_before, make_uint4(tile_esc, total.y, total.x, 0)),
                             kLbInclusive);
    }
    store8(a.local, e, a.n, v);
    __syncthreads();
    if (j == 0) {
        const uint4 before = carry_before;
        a.xc[t] = make_uint2(tile_head, before.y);
        if (t == a.ntiles - 1 && (uint64_t)before.x + tile_esc != a.escapes) set_error(&a.w->err, kErrEscapes);
    }
}

}  // namespace
}  // namespace dec
}  // namespace gpu
}  // namespace zb
