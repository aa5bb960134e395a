// CRC-32C of 64 KiB payload pieces on the GPU (docs/FORMAT.md section 6), and the payload checksum made from them.
//
// Each thread computes the "raw" CRC (register starting at 0, no final xor) of its own slice with slicing-by-4
// tables. The CRC register update is linear over GF(2), so
//     raw(init c, A || B) = shift(raw(init c, A), |B|) xor raw(0, B)
// where shift(v, k) runs the register over k zero bytes: slices combine into blocks, blocks into pieces, and a
// piece's CRC is shift(0xFFFFFFFF, piece length) xor its raw CRC, then the final xor. shift() by k bytes is a 32x32
// bit matrix.
//
// A block covers 256 slices of S bytes inside one piece. Bytes past the payload's end count as zeros (zeros after
// the data shift its CRC: raw(A || 0^k) = shift(raw(A), k)), so every slice is S bytes long and every combining step
// a shift by a fixed power of two: a warp combines its 32 slices in a tree of shuffles (level k: shift by S 2^k), warp
// 0 the block's 8 warps the same way, and one thread shifts the block's CRC to the end of its piece, and for the
// last, shorter piece back over the zeros that are not there (at most four inverse matrices, one per hex digit of
// their count, copied into the block's shared memory with the other tables). The piece's initial register 0xFFFFFFFF
// is its first four bytes complemented (raw(init ~0, A) = raw(0, A with its first 32 bits flipped), for |A| >= 4).
// No shift by a length read at run time is left on the way (a tree of such shifts took 755 instructions a warp,
// which at one block per SM ran latency-bound: 9.5 us for 0.5 MB of payload; NOTES 133).
//
// Why the slice sizes: a thread's table steps form one dependent chain behind its loads, and a block's shared-memory
// lookups conflict. Small payloads take 16-byte slices, spread over the whole GPU; large ones 64 or 256 bytes, which
// keep the work per byte low (slice_for).
//
// The stream's payload checksum is the CRC-32C of the piece CRCs: k_payload_crc (one block) and the last block of
// k_piece_crc_last compute it on the device (small_block_crc: plain loops, as this work runs cold once per call), so
// that neither the encoder (which seals the header in device memory) nor the decoder (which compares) waits for the
// piece CRCs on the host.
#include <algorithm>
#include <array>
#include <vector>
#include "dependent_launch.cuh"
#include "gpu_internal.h"
#include "zb_crc32c.h"

namespace zb {
namespace gpu {
namespace {

constexpr int kCrcThreads = 256;           // per block
constexpr int kCrcWarps = kCrcThreads / 32;
constexpr int kShiftMatrices = 17;         // shifts by 2^0 .. 2^16 bytes
constexpr int kMatrixWords = 8 * 16;       // a shift matrix as 8 nibble tables (gf2_apply)
constexpr int kCrcWords = 4 * 256 + kShiftMatrices * kMatrixWords;  // the one-block kernels' shared copy

// The tables in device memory (Context::d_crc), in words: the slicing tables and the shifts by 2^b bytes (the
// kCrcWords that every CRC kernel copies into shared memory), then the inverse shifts by d 16^j bytes (d < 16, j < 4:
// matrix 16 j + d), of which a block of a shorter last piece copies the four it needs.
constexpr int kFwdAt = 4 * 256;
constexpr int kInvHexAt = kCrcWords;
constexpr int kAllCrcWords = kInvHexAt + 4 * 16 * kMatrixWords;
constexpr int kPieceWords = kCrcWords + 4 * kMatrixWords;  // the piece kernels' shared tables: the inverses last

static_assert(kCrcThreads * 256 == (int)kChecksumPiece, "256-byte slices: one block covers one checksum piece");
static_assert(kChecksumPiece <= 65536, "inverse shifts of up to four hex digits");

// One slicing-by-4 step: the register after the 4 bytes of word w (c already xored with w).
__device__ __forceinline__ uint32_t crc_step4(uint32_t c, const uint32_t *tab) {
    return tab[768 + (c & 0xFF)] ^ tab[512 + ((c >> 8) & 0xFF)] ^ tab[256 + ((c >> 16) & 0xFF)] ^ tab[c >> 24];
}

// Applies a 32x32 GF(2) matrix to v. The matrix is kept as 8 tables of 16 words (in shared memory), table p giving
// the image of each value of v's nibble p: 8 independent loads. (As 32 columns, one per bit of v, with a select per
// bit, an apply took about 100 instructions, and the shifts that combine a block's slices were 60 % of the piece
// CRC kernel's instructions: 64 MB of TREFHT, NOTES 130.)
__device__ __forceinline__ uint32_t gf2_apply(const uint32_t *m, uint32_t v) {
    uint32_t r = 0;
#pragma unroll
    for (int p = 0; p < 8; ++p) r ^= m[16 * p + ((v >> (4 * p)) & 15u)];
    return r;
}

// Runs the CRC register over `len` zero bytes (len < 2^17), one matrix per set bit of len. The shifts commute
// (powers of one operator), so the order does not matter.
__device__ __forceinline__ uint32_t crc_shift(const uint32_t *mats, uint32_t v, uint32_t len) {
    for (; len; len &= len - 1) v = gf2_apply(mats + kMatrixWords * (__ffs(len) - 1), v);
    return v;
}

// Level k of a combining tree: the raw CRC of two adjacent ranges of len bytes each (a on the left), len = 2^b
// (mats: the shifts by 2^b bytes).
__device__ __forceinline__ uint32_t crc_join(const uint32_t *mats, int b, uint32_t a, uint32_t right) {
    return gf2_apply(mats + kMatrixWords * b, a) ^ right;
}

// The raw CRC of one whole slice of kWords words that starts at a 4-byte aligned address (all loads issued before
// the chain), its first word xored with flip.
template <int kWords, bool kAligned16>
__device__ __forceinline__ uint32_t slice_crc(const uint8_t *p, const uint32_t *tab, uint32_t flip) {
    uint32_t w[kWords];
    if (kAligned16) {
#pragma unroll
        for (int i = 0; i < kWords / 4; ++i) {
            const uint4 v = __ldg(reinterpret_cast<const uint4 *>(p) + i);
            w[4 * i] = v.x;
            w[4 * i + 1] = v.y;
            w[4 * i + 2] = v.z;
            w[4 * i + 3] = v.w;
        }
    } else {
#pragma unroll
        for (int i = 0; i < kWords; ++i) w[i] = __ldg(reinterpret_cast<const uint32_t *>(p) + i);
    }
    w[0] ^= flip;
    uint32_t c = 0;
#pragma unroll
    for (int i = 0; i < kWords; ++i) c = crc_step4(c ^ w[i], tab);
    return c;
}

// Copies the first kCrcWords of the tables into shared memory (every thread of the block takes part, blockDim.x ==
// kCrcThreads). All of a thread's loads are issued before its stores: a loop of load-store pairs waited for each load
// in turn, seven round trips to memory at the start of every block (the tables leave the L2 between calls).
__device__ __forceinline__ void load_tables(uint32_t *tab, const uint32_t *__restrict__ tables_g) {
    constexpr int kPerThread = (kCrcWords + kCrcThreads - 1) / kCrcThreads;
    uint32_t v[kPerThread];
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
        const int i = (int)threadIdx.x + k * kCrcThreads;
        v[k] = i < kCrcWords ? __ldg(tables_g + i) : 0u;
    }
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
        const int i = (int)threadIdx.x + k * kCrcThreads;
        if (i < kCrcWords) tab[i] = v[k];
    }
    __syncthreads();
}

// The piece kernels' shared tables from word kFrom on (0: all; kCrcWords: the inverse shifts only, where
// load_tables copied the rest): kCrcWords as load_tables copies them, then, where unshift is not 0 (the blocks of a
// shorter last piece), the inverse matrices for its hex digits (digit j at kCrcWords + 128 j; a zero digit's matrix is
// not used). All of a thread's loads before its stores, as in load_tables.
template <int kFrom = 0>
__device__ __forceinline__ void load_piece_tables(uint32_t *tab, const uint32_t *__restrict__ tables_g,
                                                  uint32_t unshift) {
    constexpr int kPerThread = (kPieceWords - kFrom + kCrcThreads - 1) / kCrcThreads;
    uint32_t v[kPerThread];
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
        const int i = kFrom + (int)threadIdx.x + k * kCrcThreads;
        if (i < kCrcWords) {
            v[k] = __ldg(tables_g + i);
        } else {
            const int j = (i - kCrcWords) / kMatrixWords, e = (i - kCrcWords) % kMatrixWords;  // hex digit, entry
            const uint32_t d = j < 4 ? (unshift >> (4 * j)) & 15u : 0u;
            v[k] = d ? __ldg(tables_g + kInvHexAt + kMatrixWords * (16 * j + (int)d) + e) : 0u;
        }
    }
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
        const int i = kFrom + (int)threadIdx.x + k * kCrcThreads;
        if (i < kPieceWords) tab[i] = v[k];
    }
    __syncthreads();
}

// Runs the register back over `len` zero bytes, len the unshift that load_piece_tables was given.
__device__ __forceinline__ uint32_t crc_unshift(const uint32_t *tab, uint32_t v, uint32_t len) {
#pragma unroll
    for (int j = 0; j < 4; ++j)
        if ((len >> (4 * j)) & 15u) v = gf2_apply(tab + kCrcWords + kMatrixWords * j, v);
    return v;
}

// The raw CRC of data[s, s + S), the bytes at or past len taken as zeros and the first four xored with flip (a
// piece's initial register), by one thread: a whole aligned slice with slice_crc; a payload's last slice word by
// word (its last word byte by byte: nothing past len is read); data that is not 4-byte aligned byte by byte.
template <int S>
__device__ __forceinline__ uint32_t padded_slice_crc(const uint8_t *__restrict__ data, uint64_t s, uint64_t len,
                                                     uint32_t flip, const uint32_t *tab) {
    if (s >= len) return 0;  // all zeros
    const uintptr_t addr = reinterpret_cast<uintptr_t>(data + s);
    if (s + S <= len && addr % 16 == 0) return slice_crc<S / 4, true>(data + s, tab, flip);
    if (s + S <= len && addr % 4 == 0) return slice_crc<S / 4, false>(data + s, tab, flip);
    uint32_t c = 0;
    if (addr % 4 == 0) {
#pragma unroll 4
        for (int i = 0; i < S / 4; ++i) {
            const uint64_t pos = s + 4 * (uint64_t)i;
            uint32_t w = 0;
            if (pos + 4 <= len) {
                w = __ldg(reinterpret_cast<const uint32_t *>(data + pos));
            } else {
                for (uint64_t b = pos; b < len; ++b) w |= (uint32_t)data[b] << (8 * (b - pos));
            }
            c = crc_step4(c ^ w ^ (i == 0 ? flip : 0u), tab);
        }
        return c;
    }
    for (int i = 0; i < S; ++i) {
        const uint32_t byte = (s + i < len ? data[s + i] : 0u) ^ (i < 4 ? (flip >> (8 * i)) & 0xFF : 0u);
        c = tab[(c ^ byte) & 0xFF] ^ (c >> 8);
    }
    return c;
}

// The raw CRC of the concatenation of the block's 256 ranges of 2^log_per bytes each (raw: this thread's range's, in
// thread order), in thread 0: shuffle trees in which level k joins two neighbours by the fixed shift over 2^(log_per
// + k) bytes (mats: the shifts by 2^b bytes), the warps' ranges, then warp 0 over the warps. log_per + 7 <
// kShiftMatrices. warp_raw: kCrcWarps shared words. Contains barriers: call it from every thread of the block.
__device__ __forceinline__ uint32_t block_join(uint32_t raw, int log_per, const uint32_t *mats, uint32_t *warp_raw) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int k = 0; k < 5; ++k) {  // lane l absorbs lane l + 2^k
        const uint32_t right = __shfl_down_sync(0xFFFFFFFFu, raw, 1 << k);
        if ((lane & ((2 << k) - 1)) == 0) raw = crc_join(mats, log_per + k, raw, right);
    }
    if (lane == 0) warp_raw[warp] = raw;
    __syncthreads();
    if (warp == 0) {
        raw = lane < kCrcWarps ? warp_raw[lane] : 0u;
#pragma unroll
        for (int k = 0; k < 3; ++k) {  // the warps' ranges: 32 2^(log_per + k) bytes
            const uint32_t right = __shfl_down_sync(0xFFFFFFFFu, raw, 1 << k);
            if ((lane & ((2 << k) - 1)) == 0) raw = crc_join(mats, log_per + 5 + k, raw, right);
        }
    }
    __syncthreads();  // warp_raw is written again by the next call
    return raw;
}

// The raw CRC of data[0, len), len <= kChecksumPiece, its first four bytes xored with flip (a CRC's initial register;
// 0 where len < 4), in thread 0, for the work that runs once per call in one block (seal_header_block,
// payload_checksum). The data lies right-aligned in the block's 256 ranges of per bytes (the zeros before it leave a
// raw CRC unchanged), so the ranges join by fixed shifts (block_join). Words where data and the zeros before it are
// whole words, else bytes (a header at any alignment). Loads from the L2 (__ldcg): k_piece_crc_last's last block
// reads piece CRCs that other blocks of the same launch wrote. Contains barriers: call it from every thread of the
// block, after the tables are copied.
__device__ __noinline__ uint32_t small_block_crc(const uint8_t *__restrict__ data, uint32_t len, uint32_t flip,
                                                 const uint32_t *tab, uint32_t *warp_raw) {
    int log_per = 2;
    while (((uint32_t)kCrcThreads << log_per) < len) ++log_per;
    const uint32_t lead = ((uint32_t)kCrcThreads << log_per) - len;  // the zeros before the data
    const uint32_t vs = threadIdx.x << log_per, ve = vs + (1u << log_per);
    uint32_t c = 0;
    if (ve > lead) {
        uint32_t pos = max(vs, lead) - lead;
        const uint32_t end = ve - lead;
        if (reinterpret_cast<uintptr_t>(data) % 4 == 0 && lead % 4 == 0) {
#pragma unroll 1
            for (; pos < end; pos += 4) {
                const uint32_t w = __ldcg(reinterpret_cast<const uint32_t *>(data + pos)) ^ (pos == 0 ? flip : 0u);
                c = crc_step4(c ^ w, tab);
            }
        } else {
#pragma unroll 1
            for (; pos < end; ++pos) {
                const uint32_t byte = __ldcg(data + pos) ^ (pos < 4 ? (flip >> (8 * pos)) & 0xFF : 0u);
                c = tab[(c ^ byte) & 0xFF] ^ (c >> 8);
            }
        }
    }
    return block_join(c, log_per, tab + kFwdAt, warp_raw);
}

// The raw CRC of data[bstart, bstart + 256 S), the bytes at or past len taken as zeros and the first four xored with
// flip, in thread 0: each thread's slice (padded_slice_crc), joined by block_join. warp_raw: kCrcWarps shared words.
// Contains barriers: call it from every thread of the block, after load_piece_tables.
template <int S>
__device__ uint32_t block_window_crc(const uint8_t *__restrict__ data, uint64_t bstart, uint64_t len, uint32_t flip,
                                     const uint32_t *tab, uint32_t *warp_raw) {
    constexpr int kLogS = S == 16 ? 4 : S == 64 ? 6 : 8;
    static_assert(S == 1 << kLogS, "slices of 16, 64 or 256 bytes");
    const uint32_t raw = padded_slice_crc<S>(data, bstart + (uint64_t)threadIdx.x * S, len,
                                             threadIdx.x == 0 ? flip : 0u, tab);
    return block_join(raw, kLogS, tab + kFwdAt, warp_raw);
}

// Asks for the L1 line of the thread's first slice, so that its load, after the tables', finds it there: the two
// round trips to the L2 overlap.
template <int S>
__device__ __forceinline__ void prefetch_first_slice(const uint8_t *data, uint64_t len) {
    const uint64_t s = ((uint64_t)blockIdx.x * kCrcThreads + threadIdx.x) * S;
    if (s < len) asm volatile("prefetch.global.L1 [%0];" ::"l"(data + s));
}

// The zero bytes between the end of a len-byte payload's last piece and the end of a whole piece (0: it is whole).
__device__ __forceinline__ uint32_t last_piece_unshift(uint64_t len) {
    return (uint32_t)((kChecksumPiece - len % kChecksumPiece) % kChecksumPiece);
}

// The piece CRCs of the block-sized ranges blockIdx.x, + gridDim.x, ... of data[0, len) (one where the grid covers
// the payload), S bytes per thread: a block's raw CRC (block_window_crc; a piece's first block starts from the
// piece's initial register) is shifted to the end of its piece, back over the zeros past a shorter last piece's end,
// and xored into out[piece], which the caller zeroed; the piece's first block also adds the final xor. XOR is
// commutative: the same words in any order. Contains barriers: call it from every thread of the block, after
// load_piece_tables.
template <int S>
__device__ __forceinline__ void block_piece_crcs(const uint8_t *__restrict__ data, uint64_t len, const uint32_t *tab,
                                                 const uint32_t *__restrict__ tables_g, uint32_t *warp_raw,
                                                 uint32_t *__restrict__ out) {
    constexpr uint64_t kPerBlock = (uint64_t)kCrcThreads * S;
    const uint32_t unshift = last_piece_unshift(len);
    for (uint64_t bstart = (uint64_t)blockIdx.x * kPerBlock; bstart < len; bstart += (uint64_t)gridDim.x * kPerBlock) {
        const uint64_t piece = bstart / kChecksumPiece, pstart = piece * kChecksumPiece;
        const uint64_t pend = min(len, pstart + kChecksumPiece), plen = pend - pstart;
        const bool first = bstart == pstart;
        // The initial register as complemented first bytes needs four of them; a piece of 1-3 bytes (a payload's
        // last) adds the register's shift over its length below.
        const uint32_t flip = first && plen >= 4 ? 0xFFFFFFFFu : 0u;
        const uint32_t raw = block_window_crc<S>(data, bstart, len, flip, tab, warp_raw);
        if (threadIdx.x == 0) {
            const uint64_t to_end = pstart + kChecksumPiece - (bstart + kPerBlock);  // a multiple of kPerBlock
            uint32_t contrib = crc_shift(tab + kFwdAt, raw, (uint32_t)to_end);
            if (plen < kChecksumPiece) contrib = crc_unshift(tab, contrib, unshift);  // kChecksumPiece - plen
            if (first) {
                contrib ^= 0xFFFFFFFFu;
                if (plen < 4) contrib ^= crc_shift(tab + kFwdAt, 0xFFFFFFFFu, (uint32_t)plen);
            }
            atomicXor(out + piece, contrib);
        }
    }
}

// Piece CRCs, S bytes per thread (S = 16, 64 or 256: small payloads spread over the whole GPU, large ones keep the
// work per byte low), blocks of 256 S bytes, each inside one piece (block_piece_crcs).
template <int S>
__global__ void __launch_bounds__(kCrcThreads)
k_piece_crc(const uint8_t *__restrict__ data, uint64_t len, const uint32_t *__restrict__ tables_g,
            uint32_t *__restrict__ out) {
    __shared__ uint32_t tab[kPieceWords];
    __shared__ uint32_t warp_raw[kCrcWarps];
    prefetch_first_slice<S>(data, len);
    load_piece_tables(tab, tables_g, last_piece_unshift(len));
    block_piece_crcs<S>(data, len, tab, tables_g, warp_raw, out);
}

// Piece counts up to which payload_checksum runs in thread 0 alone: a step per piece (four table lookups) is shorter
// than small_block_crc's tree of shifts and two barriers.
constexpr uint64_t kSerialChecksumPieces = 16;

// The payload checksum, CRC-32C of the `count` little-endian piece CRCs (0 when there are none), in thread 0 of the
// block (read from the L2: another block of the same launch may have written them). Contains barriers unless count
// <= kSerialChecksumPieces: call it from every thread of the block, after load_tables.
__device__ uint32_t payload_checksum(const uint32_t *__restrict__ crcs, uint64_t count, const uint32_t *tab,
                                     uint32_t *warp_raw) {
    if (count <= kSerialChecksumPieces) {  // the same in every thread
        uint32_t reg = 0xFFFFFFFFu;
        if (threadIdx.x == 0)
            for (uint64_t i = 0; i < count; ++i) reg = crc_step4(reg ^ __ldcg(crcs + i), tab);
        return reg ^ 0xFFFFFFFFu;
    }
    const uint8_t *bytes = reinterpret_cast<const uint8_t *>(crcs);
    const uint64_t len = 4 * count;
    // raw(init c, A || B) = shift(raw(init c, A), |B|) xor raw(0, B), thread 0's; the first window (at least four
    // bytes) starts from the initial register as its first bytes complemented.
    uint32_t reg = 0xFFFFFFFFu;
    for (uint64_t p = 0; p < len; p += kChecksumPiece) {
        const uint32_t wlen = (uint32_t)min(len - p, kChecksumPiece);
        const uint32_t raw = small_block_crc(bytes + p, wlen, p == 0 ? 0xFFFFFFFFu : 0u, tab, warp_raw);
        reg = p == 0 ? raw : crc_shift(tab + kFwdAt, reg, wlen) ^ raw;
    }
    return reg ^ 0xFFFFFFFFu;  // 0 for no pieces, as crc32c of nothing
}

// One block: the payload checksum (payload_checksum), then either (field != nullptr) written into a header at `field`
// (4 bytes, then the header's own CRC, which the host computed with zeros in the field: see seal_payload_crc), or
// compared with `expected` (err |= errbit if unequal).
__global__ void __launch_bounds__(kCrcThreads)
k_payload_crc(const uint32_t *__restrict__ crcs, uint64_t count, const uint32_t *__restrict__ tables_g,
              uint8_t *__restrict__ field, uint32_t expected, uint32_t *__restrict__ err, uint32_t errbit) {
    __shared__ uint32_t tab[kCrcWords];
    __shared__ uint32_t warp_raw[kCrcWarps];
    load_tables(tab, tables_g);
    const uint32_t pc = payload_checksum(crcs, count, tab, warp_raw);
    if (threadIdx.x != 0) return;
    if (!field) {
        if (pc != expected) atomicOr(err, errbit);
        return;
    }
    // The header's CRC covers the field: with zeros there it was h; the field's 4 bytes, the last ones it covers,
    // add one slicing step of pc to it (CRC-32C is affine over GF(2) for a fixed length).
    const uint32_t delta = crc_step4(pc, tab);
    for (int b = 0; b < 4; ++b) {
        field[b] = (uint8_t)(pc >> (8 * b));
        field[4 + b] ^= (uint8_t)(delta >> (8 * b));
    }
}

// Whether the header CRC's initial register is folded into its first four bytes (there are four before the payload
// checksum field) rather than shifted over them: header_raw_before_field and seal_header_block must agree.
__device__ __forceinline__ bool header_init_folded(uint32_t hb) { return hb - 8 >= 4; }

// The header's raw CRC over its bytes before the payload checksum field (hb - 8 of them; the initial register as
// the first four complemented, where there are four), in thread 0. Contains barriers: call it from every thread of
// the block, after the tables are copied.
__device__ uint32_t header_raw_before_field(const uint8_t *__restrict__ hdr, uint32_t hb, const uint32_t *tab,
                                            uint32_t *warp_raw) {
    return small_block_crc(hdr, hb - 8, header_init_folded(hb) ? 0xFFFFFFFFu : 0u, tab, warp_raw);
}

// The payload checksum of the piece CRCs of a len-byte payload into the header at hdr (hb bytes, any alignment,
// written with zeros in its two checksum fields), then the header's own CRC over everything before it. The header CRC
// covers the payload checksum field, which this writes: it is the CRC of the bytes before the field (before, from
// header_raw_before_field; written by earlier kernels) shifted over the field and combined with the field's own, so
// that no thread reads what another wrote. Contains barriers: call it from every thread of the block, after the
// tables are copied.
__device__ void seal_header_block(const uint32_t *crcs, uint64_t len, const uint32_t *tab, uint32_t *warp_raw,
                                  uint8_t *__restrict__ hdr, uint32_t hb, uint32_t before) {
    const uint64_t pieces = (len + kChecksumPiece - 1) / kChecksumPiece;
    const uint32_t pc = payload_checksum(crcs, pieces, tab, warp_raw);
    const bool folded = header_init_folded(hb);  // as header_raw_before_field took it
    if (threadIdx.x != 0) return;
    uint32_t field = 0;  // the raw CRC of the field's four bytes
    for (int b = 0; b < 4; ++b) field = tab[(field ^ (pc >> (8 * b))) & 0xFF] ^ (field >> 8);
    const uint32_t raw = crc_shift(tab + kFwdAt, before, 4) ^ field;
    const uint32_t crc = (folded ? raw : crc_shift(tab + kFwdAt, 0xFFFFFFFFu, hb - 4) ^ raw) ^ 0xFFFFFFFFu;
    for (int b = 0; b < 4; ++b) {
        hdr[hb - 8 + b] = (uint8_t)(pc >> (8 * b));
        hdr[hb - 4 + b] = (uint8_t)(crc >> (8 * b));
    }
}

// The piece CRCs and the payload checksum in one launch (a graph node less in a chunk-sized call): every block takes a
// ticket once its share of the piece CRCs is xored in, and the last one to do so finishes: with hdr, it seals the
// header (the encoder, seal_header_block); without, it compares the checksum with `expected` and sets errbit in *err
// where they differ (the decoder). The piece CRCs are read from the L2 there (small_block_crc). The piece CRCs must be
// zero and the ticket hold ticket_start when the launch starts. len, or with d_len the length read on the device;
// with d_status nothing is done unless it is 0.
// The header's CRC over its bytes before the payload checksum field does not depend on the piece CRCs: the grid's
// last block (blockIdx), which past the payload has nothing else to do, computes it into *hdr_raw before taking its
// ticket, so that the block finishing last only adds the payload checksum to it: its two block CRCs ran in series
// (NOTES 149).
struct CrcFinish {
    uint8_t *hdr;  // seal this header (hb bytes), or nullptr: compare
    uint32_t hb, expected, errbit;
    uint32_t *err;
    uint32_t *hdr_raw;  // with hdr: a device word for header_raw_before_field's result
};
// kEarlyTables: the tables every block uses are copied before the wait for the kernel before it (launch_dependent),
// which never writes them (they are made once, with the context); the length-dependent inverse shifts after it.
// Only for grids of up to two blocks per SM (chunk-sized payloads): in larger grids every block copying the tables
// early took SM slots and L2 bandwidth from a predecessor still running (64 MB of TREFHT: 1.6 us lost, NOTES 136).
// With it, the header's part above and few-piece checksums in one thread, a 4 MB compression of TREFHT took 2.2-3.6 us
// less (NOTES 149).
template <int S, bool kEarlyTables>
__global__ void __launch_bounds__(kCrcThreads)
k_piece_crc_last(const uint8_t *__restrict__ data, uint64_t len, const uint64_t *__restrict__ d_len,
                 const uint64_t *__restrict__ d_status, const uint32_t *__restrict__ tables_g, uint32_t *crcs,
                 uint32_t *ticket, uint32_t ticket_start, CrcFinish fin) {
    __shared__ uint32_t tab[kPieceWords];
    __shared__ uint32_t warp_raw[kCrcWarps];
    __shared__ bool last;
    if constexpr (kEarlyTables) load_tables(tab, tables_g);
    wait_for_prior_grids();  // before any access to memory that earlier kernels write (launch_dependent)
    const bool active = !d_status || *d_status == 0;
    if (d_len) len = *d_len;
    // The grid is sized for the likely length (the encoder's is known on the device only): blocks past the payload
    // skip the tables, and copy them only if they finish last.
    const bool work = active && (uint64_t)blockIdx.x * kCrcThreads * S < len;
    if (work) {
        prefetch_first_slice<S>(data, len);
        if constexpr (kEarlyTables) load_piece_tables<kCrcWords>(tab, tables_g, last_piece_unshift(len));
        else load_piece_tables(tab, tables_g, last_piece_unshift(len));
        block_piece_crcs<S>(data, len, tab, tables_g, warp_raw, crcs);
    }
    bool have_tables = work || kEarlyTables;
    if (fin.hdr && active && blockIdx.x == gridDim.x - 1) {  // the same in the whole block
        if (!have_tables) load_tables(tab, tables_g);
        have_tables = true;
        const uint32_t before = header_raw_before_field(fin.hdr, fin.hb, tab, warp_raw);
        if (threadIdx.x == 0) *fin.hdr_raw = before;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();  // this block's piece CRCs (thread 0's atomics) and header CRC before its ticket
        last = atomicAdd(ticket, 1u) - ticket_start == gridDim.x - 1u;
    }
    __syncthreads();
    if (!last || !active) return;
    __threadfence();
    if (!have_tables) load_tables(tab, tables_g);
    if (fin.hdr) {
        seal_header_block(crcs, len, tab, warp_raw, fin.hdr, fin.hb, __ldcg(fin.hdr_raw));
        return;
    }
    const uint32_t pc = payload_checksum(crcs, (len + kChecksumPiece - 1) / kChecksumPiece, tab, warp_raw);
    if (threadIdx.x == 0 && pc != fin.expected) atomicOr(fin.err, fin.errbit);
}

// The slice for a payload of about len bytes. 256 bytes where that still gives every SM about 1024 threads (the
// fewest shifts per byte); else 64 bytes from about 512 threads per SM, where 16-byte slices would take four times
// the blocks' trees of shifts (a 16-byte slice everywhere below 256: 64 MB of TREFHT, 7.8 MB of payload, 3.6 us
// slower compressing, 8.6-9.1 decompressing); else 16 bytes, spread over the whole GPU, so that a block's chain of
// dependent steps stays short (16 MB of TREFHT, 1.95 MB of payload: 16 bytes instead of 64 took 1.0-2.7 us off a
// compression; NOTES 155. From about 128 threads per SM, as before, the trees of run-time shifts that NOTES 133
// replaced were the cost: NOTES 130).
int slice_for(const Context &c, uint64_t len) {
    const uint64_t sms = (uint64_t)c.sm_count;
    return len / 256 >= sms * 1024 ? 256 : len / 64 >= sms * 512 ? 64 : 16;
}

// A block per 256 S bytes of the payload.
void launch_piece_crcs(const Context &c, const uint8_t *payload, uint64_t len, uint32_t *d_out, cudaStream_t s) {
    ZB_CUDA(cudaMemsetAsync(d_out, 0, 4 * piece_count(len), s));
    const int slice = slice_for(c, len);
    const uint64_t per_block = (uint64_t)kCrcThreads * slice;
    const unsigned grid = (unsigned)((len + per_block - 1) / per_block);
    if (slice == 256) k_piece_crc<256><<<grid, kCrcThreads, 0, s>>>(payload, len, c.d_crc, d_out);
    else if (slice == 64) k_piece_crc<64><<<grid, kCrcThreads, 0, s>>>(payload, len, c.d_crc, d_out);
    else k_piece_crc<16><<<grid, kCrcThreads, 0, s>>>(payload, len, c.d_crc, d_out);
    ZB_LAUNCHED("k_piece_crc");
}

// k_piece_crc_last's instance for a slice (256, 64 or 16 bytes a thread) and where its fixed tables are copied.
template <bool kEarlyTables>
auto piece_crc_last_kernel(int slice) {
    return slice == 256 ? k_piece_crc_last<256, kEarlyTables>
           : slice == 64 ? k_piece_crc_last<64, kEarlyTables> : k_piece_crc_last<16, kEarlyTables>;
}

void launch_piece_crc_last(const Context &c, const uint8_t *payload, uint64_t max_len, uint64_t likely_len,
                           const uint64_t *d_len, const uint64_t *d_status, uint32_t *d_crcs, uint32_t *ticket,
                           uint32_t ticket_start, const CrcFinish &fin, cudaStream_t s) {
    const int slice = slice_for(c, likely_len);
    const uint64_t per_block = (uint64_t)kCrcThreads * slice;
    const uint64_t most = std::max<uint64_t>(1, (max_len + per_block - 1) / per_block);
    const uint64_t likely = std::max<uint64_t>((likely_len + per_block - 1) / per_block, 2 * (uint64_t)c.sm_count);
    const unsigned grid = (unsigned)std::min(most, likely);
    const bool early = grid <= 2 * (unsigned)c.sm_count;
    auto kernel = early ? piece_crc_last_kernel<true>(slice) : piece_crc_last_kernel<false>(slice);
    launch_dependent("launch of k_piece_crc_last", kernel, grid, kCrcThreads, 0, s, payload, max_len, d_len, d_status,
                     c.d_crc, d_crcs, ticket, ticket_start, fin);
}

}  // namespace

namespace {

// A 32x32 matrix over GF(2) as its columns (column i: the image of bit i).
using Cols = std::array<uint32_t, 32>;

uint32_t apply_cols(const Cols &m, uint32_t v) {
    uint32_t r = 0;
    for (int i = 0; i < 32; ++i)
        if (v >> i & 1) r ^= m[i];
    return r;
}

// a after b.
Cols compose(const Cols &a, const Cols &b) {
    Cols r{};
    for (int i = 0; i < 32; ++i) r[i] = apply_cols(a, b[i]);
    return r;
}

Cols identity() {
    Cols r{};
    for (int i = 0; i < 32; ++i) r[i] = 1u << i;
    return r;
}

// The inverse by Gauss-Jordan elimination on the rows of [m | I] (the register's shift by a zero byte is
// multiplication by x^8 modulo the generator, which has a constant term: invertible).
Cols invert(const Cols &m) {
    uint64_t rows[32];
    for (int r = 0; r < 32; ++r) {
        uint64_t row = uint64_t(1) << (32 + r);
        for (int c = 0; c < 32; ++c) row |= uint64_t(m[c] >> r & 1) << c;
        rows[r] = row;
    }
    for (int c = 0; c < 32; ++c) {
        int pivot = c;
        while (pivot < 32 && !(rows[pivot] >> c & 1)) ++pivot;
        if (pivot == 32) fail(ZB_ERR_INTERNAL, "CRC tables: a shift matrix is singular");
        std::swap(rows[c], rows[pivot]);
        for (int r = 0; r < 32; ++r)
            if (r != c && (rows[r] >> c & 1)) rows[r] ^= rows[c];
    }
    Cols inv{};
    for (int r = 0; r < 32; ++r)
        for (int c = 0; c < 32; ++c) inv[c] |= uint32_t(rows[r] >> (32 + c) & 1) << r;
    if (compose(m, inv) != identity()) fail(ZB_ERR_INTERNAL, "CRC tables: inverse check failed");
    return inv;
}

// Writes m as gf2_apply reads it at out (entry 16 p + x: the image of nibble value x at nibble p).
void put_nibble_tables(const Cols &m, uint32_t *out) {
    for (int p = 0; p < 8; ++p)
        for (uint32_t x = 0; x < 16; ++x) out[16 * p + x] = apply_cols(m, x << (4 * p));
}

}  // namespace

void init_crc_tables(Context &c) {
    std::vector<uint32_t> h(kAllCrcWords);
    const uint32_t *t0 = crc32c_table();
    for (int i = 0; i < 256; ++i) h[i] = t0[i];
    for (int k = 1; k < 4; ++k)
        for (int i = 0; i < 256; ++i) {
            const uint32_t prev = h[(k - 1) * 256 + i];
            h[k * 256 + i] = (prev >> 8) ^ t0[prev & 0xFF];
        }
    // The register run over one zero byte, its powers of two and their inverses.
    Cols one_byte{};
    for (int i = 0; i < 32; ++i) {
        const uint32_t v = 1u << i;
        one_byte[i] = t0[v & 0xFF] ^ (v >> 8);
    }
    std::vector<Cols> fwd(kShiftMatrices), inv(kShiftMatrices);
    fwd[0] = one_byte;
    inv[0] = invert(one_byte);
    for (int b = 1; b < kShiftMatrices; ++b) {
        fwd[b] = compose(fwd[b - 1], fwd[b - 1]);
        inv[b] = compose(inv[b - 1], inv[b - 1]);
    }
    auto power = [](const std::vector<Cols> &pow2, uint32_t bytes) {  // the shift (or its inverse) by bytes < 2^17
        Cols m = identity();
        for (int b = 0; b < kShiftMatrices; ++b)
            if (bytes >> b & 1) m = compose(pow2[b], m);
        return m;
    };
    for (int b = 0; b < kShiftMatrices; ++b) put_nibble_tables(fwd[b], h.data() + kFwdAt + kMatrixWords * b);
    for (int j = 0; j < 4; ++j)
        for (uint32_t d = 0; d < 16; ++d)
            put_nibble_tables(power(inv, d << (4 * j)), h.data() + kInvHexAt + kMatrixWords * (16 * j + d));
    const size_t bytes = sizeof(uint32_t) * h.size();
    ZB_CUDA(cudaMalloc(reinterpret_cast<void **>(&c.d_crc), bytes));
    ZB_CUDA(cudaMemcpy(c.d_crc, h.data(), bytes, cudaMemcpyHostToDevice));
}

void piece_crcs(const Context &c, const uint8_t *payload, uint64_t len, uint32_t *d_out, cudaStream_t s) {
    if (!len) return;
    launch_piece_crcs(c, payload, len, d_out, s);
}

void piece_crcs_seal_at(const Context &c, const uint8_t *payload, uint64_t max_len, uint64_t likely_len,
                        const uint64_t *d_len, const uint64_t *d_status, uint32_t *d_crcs, uint32_t *ticket,
                        uint32_t *d_header_raw, uint8_t *d_header, size_t header_bytes, cudaStream_t s) {
    launch_piece_crc_last(c, payload, max_len, likely_len, d_len, d_status, d_crcs, ticket, ~0u,
                          CrcFinish{d_header, (uint32_t)header_bytes, 0, 0, nullptr, d_header_raw}, s);
}

void piece_crcs_check(const Context &c, const uint8_t *payload, uint64_t len, uint32_t *d_crcs, uint32_t *ticket,
                      uint32_t expected, uint32_t *d_err, uint32_t errbit, cudaStream_t s) {
    if (!len) {  // no pieces (the checksum of an empty payload is 0): the plain check
        check_payload_crc(c, d_crcs, 0, expected, d_err, errbit, s);
        return;
    }
    launch_piece_crc_last(c, payload, len, len, nullptr, nullptr, d_crcs, ticket, 0u,
                          CrcFinish{nullptr, 0, expected, errbit, d_err, nullptr}, s);
}

void seal_payload_crc(const Context &c, const uint32_t *d_crcs, uint64_t len, uint8_t *d_field, cudaStream_t s) {
    k_payload_crc<<<1, kCrcThreads, 0, s>>>(d_crcs, piece_count(len), c.d_crc, d_field, 0, nullptr, 0);
    ZB_LAUNCHED("k_payload_crc");
}

void check_payload_crc(const Context &c, const uint32_t *d_crcs, uint64_t len, uint32_t expected, uint32_t *d_err,
                       uint32_t errbit, cudaStream_t s) {
    k_payload_crc<<<1, kCrcThreads, 0, s>>>(d_crcs, piece_count(len), c.d_crc, nullptr, expected, d_err, errbit);
    ZB_LAUNCHED("k_payload_crc");
}

HostCrcs::HostCrcs(Context &c, const uint32_t *d_crcs, uint64_t len, cudaStream_t s) : count_((size_t)piece_count(len)) {
    if (!count_) return;
    if (4 * count_ <= kHostSmallBytes - kHostCrcOffset) {
        words_ = reinterpret_cast<const uint32_t *>(c.host_small + kHostCrcOffset);
    } else {
        spill_.resize(count_);
        words_ = spill_.data();
    }
    ZB_CUDA(cudaMemcpyAsync(const_cast<uint32_t *>(words_), d_crcs, 4 * count_, cudaMemcpyDeviceToHost, s));
}

uint32_t HostCrcs::combined() const { return count_ ? crc32c(words_, 4 * count_) : 0u; }

}  // namespace gpu
}  // namespace zb
