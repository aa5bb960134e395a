// The fast encoder on the GPU (docs/FORMAT.md sections 3-6). Kernel bodies and the host-side driver, templated on
// the value type T (float, double) and, for the kernels that predict, on the rank (1, 2, 3). encode_f32.cu and
// encode_f64.cu instantiate it.
//
// Flow of one call (device memory throughout; "sync" = the host waits for the stream):
//   REL only: min/max keys of the finite non-fill values (k_range), left on the device; its last block derives the
//             absolute bound from them (as derive_abs_bound on the host) and the quantizer's constants
//   k_quantize: q = quantized integer of every value (exactly once; zb::quantize) and the exception mask words
//   k_encode: per 2048-code tile, integer Lorenzo (zb::lorenzo_delta, 8 consecutive codes per thread) + 16-bit
//             codes + bitshuffle (two 8x8 bit transposes per thread) + zero-block flags (written straight into
//             segment 0) + per-tile counts; where the one-block exception stage may run, also the exception
//             mask's edge blocks and flags (TileEdges, gpu_device.cuh)
//   (both in one pass, k_quantize_encode, where the q of a tile's neighbours fit in shared memory and the array has
//   two waves of tiles or more, one for a chunk of a batch (walk_plan): blocks walk runs of tiles keeping the
//   recent q in a ring; then q is not written, and the escaped deltas are kept for k_escapes)
//   CUB exclusive scan of the per-tile counts (totals of code blocks, escapes, exceptions left on the device)
//   exceptions: their values, edge mask, change bits, sparse flags and counts (for their count, or up to a cap);
//             chunk-sized arrays in one launch of one block (exceptions_encode_block.cuh)
//   k_fast_layout (or the one-block exception kernel's end): the segment layout from the totals
//             (fast_segment_lengths, as the host's fast_layout), the raw-passthrough and capacity decisions, the
//             header (the host's template with counts and segment table), the piece CRCs zeroed
//   the segments at their final offsets, read on the device: sparse copy of code blocks, escapes, edge and change
//   masks, run values (into the caller's device buffer, after the header, when it has room for a raw stream);
//   CRC-32C of each 64 KiB piece, the header sealed (payload checksum, header CRC) by the same kernel's last block
//   -> sync (the layout words: through host_small's mapping in a graph)
//   then: a raw-passthrough stream instead, or, with more exceptions than the cap, the exception stage and what
//   follows once more with their count; host output: download.
// A device call of up to kGraphMaxBytes that repeats (the same buffers, shape and parameters: a graph key) runs
// as one CUDA graph (the edge mask and the segment writers on parallel branches), its exception stage queued for up
// to a cap of exceptions, and waits only at that sync. Other calls first wait for the totals: the exception stage is
// then sized exactly and skipped where there are none.
#pragma once
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>
#include "dependent_launch.cuh"
#include "exceptions_encode_block.cuh"
#include "gpu_device.cuh"
#include "gpu_internal.h"
#include "zb_cpu.h"
#include "zb_crc32c.h"
#include "zb_gpu_ops.h"
#include "zb_lorenzo.h"
#include "zb_quant.h"

namespace zb {
namespace gpu {
namespace enc {
// Internal linkage: this header is compiled once per value type (decode_f32.cu, decode_f64.cu, ...), and the
// type-independent kernels must not clash at link time.
namespace {

constexpr int kRangeWords = 3;  // k_range's words in device memory (see k_range)

// Device words of one fast encode (carved once per call); the host reads back their result part at the end. The
// stream's layout is computed on the device (k_fast_layout) from the counts, so that the segments, the checksum and
// the header follow the counting kernels without a round trip to the host.
enum LayoutStatus : uint64_t { kLayoutOk = 0, kLayoutRaw = 1, kLayoutTooSmall = 2, kLayoutOverCap = 3 };
struct LayoutResult {
    unsigned long long totals[3];  // stored code blocks, escapes, exceptions
    double eb;                     // REL: the absolute bound derived on the device
    uint64_t payload_len, stream_len, status;
};
struct EncodeWords {
    unsigned long long totals[3];     // stored code blocks, escapes, exceptions
    unsigned long long ex_totals[3];  // the exception stage's stored edge blocks, stored change blocks, runs
    QuantParams qp;                   // REL: k_range's last block
    uint64_t off[kFastSegmentCount], len[kFastSegmentCount];  // k_fast_layout
    uint64_t payload_len;
    uint64_t status;  // LayoutStatus: the writers do nothing unless kLayoutOk
    uint32_t crc_ticket;  // k_piece_crc_last's tickets: ~0u from k_fast_layout
    uint32_t crc_header;  // k_piece_crc_last's word for the header's part of its CRC
    LayoutResult result;  // k_fast_layout: what the host reads back
};

// ---- value range (REL) -------------------------------------------------------------------------------------------

// Maps a double to an unsigned key with the same order (negative values reversed), so that min/max reduce with
// integer atomics. Finite values never map to 0 or ~0, which therefore serve as "empty" markers.
__device__ __forceinline__ unsigned long long order_key(double d) {
    const unsigned long long u = (unsigned long long)__double_as_longlong(d);
    return (u >> 63) ? ~u : (u | 0x8000000000000000ull);
}
__host__ __device__ inline double key_to_double(unsigned long long k) {
    const unsigned long long u = (k >> 63) ? (k & 0x7FFFFFFFFFFFFFFFull) : ~k;
#if defined(__CUDA_ARCH__)
    return __longlong_as_double((long long)u);
#else
    double d;
    std::memcpy(&d, &u, 8);
    return d;
#endif
}

// The quantizer's constants of a REL bound from k_range's keys (min, max; ~0 when no value is usable), as the host
// derives them (derive_abs_bound, make_quant_params): computed on the device so that quantization can follow the
// range without a host round trip.
__device__ __forceinline__ QuantParams rel_quant_params(const unsigned long long *keys, double bound, int has_fill,
                                                        uint64_t fill_bits) {
    const unsigned long long lo = keys[0], hi = keys[1];
    const double eb = lo == ~0ull ? 0.0 : rel_abs_bound(bound, key_to_double(lo), key_to_double(hi));
    return make_quant_params(eb, has_fill, fill_bits);
}

struct MinOp {
    __device__ unsigned long long operator()(unsigned long long a, unsigned long long b) const { return a < b ? a : b; }
};
struct MaxOp {
    __device__ unsigned long long operator()(unsigned long long a, unsigned long long b) const { return a > b ? a : b; }
};

// Four values of x from index i: one or two 16-byte loads where the caller knows x + i is 16-byte aligned and all four
// exist, else element by element (zero past n).
template <typename T, bool Aligned>
__device__ __forceinline__ void load4(const T *__restrict__ x, uint64_t i, uint64_t n, T (&v)[4]) {
    if (Aligned && i + 4 <= n) {
        if constexpr (sizeof(T) == 4) {
            const float4 f = *reinterpret_cast<const float4 *>(x + i);
            v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
        } else {
            const double2 a = reinterpret_cast<const double2 *>(x + i)[0], b = reinterpret_cast<const double2 *>(x + i)[1];
            v[0] = a.x, v[1] = a.y, v[2] = b.x, v[3] = b.y;
        }
        return;
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) v[k] = i + k < n ? x[i + k] : (T)0;
}

// k_range's words (kRangeWords): the min key and the max key complemented (so that both reduce with atomicMin from
// ~0; set to ~0 before it runs), and where the last block derives the REL bound's quantizer constants (qp), the
// blocks' ticket. That form runs on the context's words (Context::d_range, queue_rel_range), which every launch leaves
// as it found them: the last block reads the keys by exchanging them for ~0, and the ticket (0 before) counts modulo
// the grid (atomicInc), so that it is 0 again when the last block has taken it. No memset node precedes it, and no
// one-thread kernel follows: graph nodes that each cost a chunk-sized call a few us.
// Min and max keys of the finite non-fill values: a grid-stride loop over the array, four consecutive values per
// thread and load (16-byte loads where x is aligned: one value per step kept one load in flight per thread), and
// Loads such loads issued before any is used (one per step left the kernel at 2.2 of the H200's 4 TB/s; 4, or 8 for
// f32 arrays of kRangeWaveBytes or more: queue_range_kernel). The thread's minimum and maximum are kept as values
// (one min/max instruction each) and turned into keys once; order keys per value took a conversion and 64-bit
// compares and selects, 26 instructions per value. (Which zero a min/max returns for -0 against +0 does not matter:
// rel_abs_bound subtracts them to the same difference.)
template <typename T, bool Aligned, int Loads>
__global__ void __launch_bounds__(256)
k_range(const T *__restrict__ x, uint64_t n, int has_fill, uint64_t fill_bits, unsigned long long *keys, double bound,
        QuantParams *__restrict__ qp) {
    wait_for_prior_grids();  // before any memory access (launch_dependent)
    using U = typename FloatBits<T>::U;
    using Reduce = cub::BlockReduce<unsigned long long, 256>;
    __shared__ typename Reduce::TempStorage tmp;
    constexpr T kInf = std::numeric_limits<T>::infinity();
    T vlo = kInf, vhi = -kInf;
    const U fill = (U)fill_bits;
    const uint64_t load_stride = 4 * (uint64_t)gridDim.x * blockDim.x;
    // A step: Loads loads of four values, load_stride apart. Whole steps (every value below n) skip the per-value
    // index check; only a thread's last step can be partial.
    auto step = [&](uint64_t i, auto whole) {
        T v[Loads][4];
#pragma unroll
        for (int u = 0; u < Loads; ++u) load4<T, Aligned>(x, i + u * load_stride, n, v[u]);
#pragma unroll
        for (int u = 0; u < Loads; ++u)
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                const T val = v[u][k];
                bool use = isfinite(val) && !(has_fill && bits_of(val) == fill);
                if constexpr (!decltype(whole)::value) use = use && i + u * load_stride + k < n;
                vlo = min(vlo, use ? val : kInf);
                vhi = max(vhi, use ? val : -kInf);
            }
    };
    const uint64_t step_span = (Loads - 1) * load_stride + 4;  // values from a step's first index to past its last
    uint64_t i = 4 * ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x);
    for (; i + step_span <= n; i += Loads * load_stride) step(i, std::true_type{});
    if (i < n) step(i, std::false_type{});
    // Infinite ends: no usable value, the empty markers.
    unsigned long long lo = vlo == kInf ? ~0ull : order_key((double)vlo);
    unsigned long long hi = vhi == -kInf ? 0ull : order_key((double)vhi);
    lo = Reduce(tmp).Reduce(lo, MinOp());
    __syncthreads();
    hi = Reduce(tmp).Reduce(hi, MaxOp());
    if (threadIdx.x == 0) {
        atomicMin(&keys[0], lo);
        atomicMin(&keys[1], ~hi);
        if (qp) {
            __threadfence();
            unsigned int *ticket = reinterpret_cast<unsigned int *>(&keys[2]);
            if (atomicInc(ticket, gridDim.x - 1) == gridDim.x - 1) {  // the last block; the ticket wraps to 0
                __threadfence();
                const unsigned long long k[2] = {atomicExch(&keys[0], ~0ull), ~atomicExch(&keys[1], ~0ull)};
                *qp = rel_quant_params(k, bound, has_fill, fill_bits);
            }
        }
    }
}

// ---- quantization ------------------------------------------------------------------------------------------------

// Bits 0..7 of b at bits 0, 4, 8, .., 28.
__device__ __forceinline__ uint32_t spread_by_4(uint32_t b) {
    b = (b | (b << 12)) & 0x000F000Fu;
    b = (b | (b << 6)) & 0x03030303u;
    return (b | (b << 3)) & 0x11111111u;
}

// Bits of a warp's 128 consecutive values, four per lane (bit i of `nibble`: value 4 * lane + i), as four 32-bit
// words: lane l gets word l % 4 (values 32m .. 32m+31 for m = l % 4; lanes 0-3 store them). Called by whole warps.
// Ballot i has bit l = bit i of lane l; word m takes bits 8m .. 8m+7 of each.
__device__ __forceinline__ uint32_t warp_words_of_nibbles(uint32_t nibble, int lane) {
    uint32_t word = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const uint32_t b = __ballot_sync(kFullMask, (nibble >> i) & 1u);
        word |= spread_by_4((b >> (8 * (lane & 3))) & 0xFFu) << i;
    }
    return word;
}

// q for every value (0 for an exception) and the exception mask M (bit j of word w: value 32w + j). Each value is
// quantized exactly once; the Lorenzo kernels then work on integers only. Four consecutive values per thread, with
// 16-byte loads and stores (one value per thread left the kernel at half the machine's copy bandwidth); a warp's 128
// values make four mask words, assembled from four ballots. The grid covers whole tiles so that every mask word,
// padding included, is written.
// FromDevice (REL): the constants are read from d_qp (k_range's last block wrote them), after the values' loads are
// issued.
// A block-wide derivation instead (thread 0, a barrier) held every block's loads back: quantize 0.63 -> 0.71 ms per
// GB. Eight blocks per SM: the constants in registers instead of the parameter bank took 34-38 registers, six
// blocks fit, and the kernel, which needs all the loads in flight it can get, ran 20 % slower.
template <typename T, bool Aligned, bool FromDevice>
__global__ void __launch_bounds__(256, 8)
k_quantize(const T *__restrict__ x, uint64_t n, QuantParams qp, const QuantParams *__restrict__ d_qp,
           uint32_t *__restrict__ q, uint32_t *__restrict__ mwords) {
    wait_for_prior_grids();  // before any memory access (launch_dependent)
    const uint64_t thread = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x, i = 4 * thread;
    T v[4];
    load4<T, Aligned>(x, i, n, v);
    if constexpr (FromDevice) qp = *d_qp;
    int32_t qi[4];
    uint32_t exc = 0;
    const uint32_t inside = existing_bits(i, 4, n);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const bool regular = quantize<T>(v[k], qp, qi[k]);
        if (!regular) exc |= 1u << k;
    }
    exc &= inside;
    if (i + 4 <= n) {
        *reinterpret_cast<uint4 *>(q + i) = make_uint4((uint32_t)qi[0], (uint32_t)qi[1], (uint32_t)qi[2], (uint32_t)qi[3]);
    } else {
#pragma unroll
        for (int k = 0; k < 4; ++k)
            if (i + k < n) q[i + k] = (uint32_t)qi[k];
    }
    const int lane = threadIdx.x & 31;
    const uint32_t word = warp_words_of_nibbles(exc, lane);
    if (lane < 4) mwords[(thread - (uint64_t)lane) / 8 + (uint64_t)lane] = word;
}

// ---- prediction --------------------------------------------------------------------------------------------------

// Coordinates (z, y, x) of linear index i. Rank 1 counts x from the start of its Lorenzo segment (zb_lorenzo.h),
// so that a segment's first value, like a row's, has no left neighbour.
template <int Rank>
__device__ __forceinline__ void coords(const Dims &dm, uint64_t i, int64_t &z, int64_t &y, int64_t &xx) {
    if constexpr (Rank == 1) {
        z = 0;
        y = 0;
        xx = (int64_t)(i - dm.dseg.div(i) * dm.seg);
    } else {
        const uint64_t row = dm.dx.div(i);
        xx = (int64_t)(i - row * dm.nx);
        if constexpr (Rank == 2) {
            z = 0;
            y = (int64_t)row;
        } else {
            const uint64_t zz = dm.dy.div(row);
            z = (int64_t)zz;
            y = (int64_t)(row - zz * dm.ny);
        }
    }
}

// The position of the layer of (z, y) in its Lorenzo segment (rank 2 and 3). When it is not 0, the neighbours in
// the slowest dim (z-1 in rank 3, y-1 in rank 2) are inside the segment.
template <int Rank> __device__ __forceinline__ uint64_t layer_in_segment(const Dims &dm, int64_t z, int64_t y) {
    const uint64_t layer = Rank == 3 ? (uint64_t)z : (uint64_t)y;
    return layer - dm.dseg.div(layer) * dm.seg;
}

// The earlier lines a point at (z, y) has inside the array and its Lorenzo segment, the rule every Lorenzo kernel
// here loads neighbours by: `up`, the row above (rank 3: y - 1; rank 2: y - 1, the layer before, inside the
// segment), and `back`, the layer before (rank 3: z - 1 inside the segment). Rank 1 has neither.
struct EarlierLines {
    bool up = false, back = false;
};
template <int Rank> __device__ __forceinline__ EarlierLines earlier_lines(const Dims &dm, int64_t z, int64_t y) {
    EarlierLines l;
    if constexpr (Rank == 2) l.up = layer_in_segment<2>(dm, z, y) != 0;
    if constexpr (Rank == 3) {
        l.up = y > 0;
        l.back = layer_in_segment<3>(dm, z, y) != 0;
    }
    return l;
}

// The 2^Rank quantized integers a Lorenzo delta needs, named by offsets (dz dy dx): n000 is the point itself, n001
// its x-1 neighbour, and so on; 0 where the neighbour is outside the array.
struct Neighbours {
    uint32_t n000 = 0, n001 = 0, n010 = 0, n011 = 0, n100 = 0, n101 = 0, n110 = 0, n111 = 0;
};

// The delta at (z, y, x) through the shared zb::lorenzo_delta. Its qat() asks for (z - dz, y - dy, x - dx); after
// inlining the offsets are constants and each call becomes a register.
template <int Rank>
__device__ __forceinline__ int32_t delta_from(const Neighbours &nb, int64_t z, int64_t y, int64_t xx) {
    auto qat = [&](int64_t zz, int64_t yy, int64_t xq) -> uint32_t {
        const bool dz = zz != z, dy = yy != y, dx = xq != xx;
        return dz ? (dy ? (dx ? nb.n111 : nb.n110) : (dx ? nb.n101 : nb.n100))
                  : (dy ? (dx ? nb.n011 : nb.n010) : (dx ? nb.n001 : nb.n000));
    };
    return lorenzo_delta<Rank>(z, y, xx, qat);
}

// The neighbours of (z, y, x) = linear index i, loaded directly (used where no warp shuffle can help).
template <int Rank>
__device__ __forceinline__ Neighbours load_neighbours(const uint32_t *__restrict__ q, const Dims &dm, uint64_t i,
                                                      int64_t z, int64_t y, int64_t xx) {
    Neighbours nb;
    const uint64_t nx = dm.nx, nxy = dm.nx * dm.ny;
    const EarlierLines l = earlier_lines<Rank>(dm, z, y);
    nb.n000 = q[i];
    if (xx > 0) nb.n001 = q[i - 1];
    if (l.up) {
        nb.n010 = q[i - nx];
        if (xx > 0) nb.n011 = q[i - nx - 1];
    }
    if (l.back) {
        nb.n100 = q[i - nxy];
        if (xx > 0) nb.n101 = q[i - nxy - 1];
        if (l.up) {
            nb.n110 = q[i - nxy - nx];
            if (xx > 0) nb.n111 = q[i - nxy - nx - 1];
        }
    }
    return nb;
}

// ---- the tile kernels ------------------------------------------------------------------------------------------

// Where a tile kernel reads q: GlobalQ from the array k_quantize wrote; RingQ from the ring of recent q in shared
// memory that k_quantize_encode keeps (it holds every q that the tile's deltas read).
struct GlobalQ {
    const uint32_t *__restrict__ q;
    __device__ __forceinline__ uint32_t at(uint64_t i) const { return q[i]; }
    // Eight q from index i: two 16-byte loads where i is a multiple of 4 (Vec; q is 16-byte aligned), else eight
    // 4-byte loads.
    template <bool Vec> __device__ __forceinline__ void row8(uint64_t i, uint32_t (&v)[8]) const {
        if constexpr (Vec) {
            const uint4 lo = reinterpret_cast<const uint4 *>(q + i)[0], hi = reinterpret_cast<const uint4 *>(q + i)[1];
            v[0] = lo.x, v[1] = lo.y, v[2] = lo.z, v[3] = lo.w, v[4] = hi.x, v[5] = hi.y, v[6] = hi.z, v[7] = hi.w;
        } else {
#pragma unroll
            for (int k = 0; k < 8; ++k) v[k] = q[i + k];
        }
    }
};
constexpr uint32_t kRingMirror = 4;  // entries past the ring's end (RingQ::row8)
struct RingQ {
    const uint32_t *ring;  // size entries, then kRingMirror more that repeat entries 0..3 (see row8)
    int32_t size;     // entries: a multiple of kTileCodes, at least the lookback and a tile
    int32_t base;     // the ring entry of the current tile's first index, tile_start
    uint64_t tile_start;
    // Indices from tile_start - lookback to the tile's end: the entry base + (i - tile_start), wrapped.
    __device__ __forceinline__ int32_t entry(uint64_t i) const {
        const int32_t p = base + (int32_t)(i - tile_start);  // base + 2047 < size: only below 0 can it wrap
        return p < 0 ? p + size : p;
    }
    __device__ __forceinline__ uint32_t at(uint64_t i) const { return ring[entry(i)]; }
    // Vec: i is a multiple of 4, so each group of four lies in one 16-byte entry of the ring; the second group is
    // the one after the first, or where the first is the ring's last, entries 0..3 again in the mirror past its end
    // (one wrap test for the eight instead of two).
    template <bool Vec> __device__ __forceinline__ void row8(uint64_t i, uint32_t (&v)[8]) const {
        if constexpr (Vec) {
            const uint4 *at = reinterpret_cast<const uint4 *>(ring + entry(i));
            const uint4 lo = at[0], hi = at[1];
            v[0] = lo.x, v[1] = lo.y, v[2] = lo.z, v[3] = lo.w, v[4] = hi.x, v[5] = hi.y, v[6] = hi.z, v[7] = hi.w;
        } else {
#pragma unroll
            for (int k = 0; k < 8; ++k) v[k] = at(i + k);
        }
    }
};

// The q a thread's 8 consecutive values need, value k at linear index e + k: a = q at (z, y, x), up at (z, y-1, x),
// bk at (z-1, y, x), bu at (z-1, y-1, x), each 0 where that point is outside the array or the Lorenzo segment
// (rank 1 uses a only, rank 2 a and up). Bit k of `valid` says that value k exists, of `left` that its x-1
// neighbour does (then value k-1, or for k = 0 value e-1, lies in the same row, so its up/bk/bu are those of
// value k's x-1 neighbours). first: value 0's earlier lines.
struct Rows8 {
    uint32_t a[8], up[8], bk[8], bu[8];
    uint32_t valid = 0, left = 0;
    EarlierLines first;
};

// Fills r for the values e .. e+7 (e a multiple of 8) from src. Common case (all 8 exist and lie in one row, rank 1:
// one segment): one set of neighbour conditions, rows read 8 at a time (16-byte loads of the rows above and before
// when VecRows, i.e. nx % 4 == 0, so that they are aligned too). Otherwise each value's own coordinates.
template <int Rank, bool VecRows, class Src>
__device__ __forceinline__ void load_rows8(const Src &src, const Dims &dm, uint64_t e, Rows8 &r) {
    const uint64_t nx = dm.nx, nxy = dm.nx * dm.ny;
    int64_t z, y, xx;
    coords<Rank>(dm, e, z, y, xx);
    const uint64_t row_len = Rank == 1 ? dm.seg : nx;
    if (e + 8 <= dm.n && (uint64_t)xx + 8 <= row_len) {
        r.first = earlier_lines<Rank>(dm, z, y);
        r.valid = 0xFFu;
        r.left = xx > 0 ? 0xFFu : 0xFEu;
        src.template row8<true>(e, r.a);
        if (Rank >= 2 && r.first.up && (Rank == 2 || r.first.back)) {  // every earlier line the rank has: no zeros
            src.template row8<VecRows>(e - nx, r.up);
            if constexpr (Rank == 3) {
                src.template row8<VecRows>(e - nxy, r.bk);
                src.template row8<VecRows>(e - nxy - nx, r.bu);
            }
            return;
        }
#pragma unroll
        for (int k = 0; k < 8; ++k) r.up[k] = r.bk[k] = r.bu[k] = 0;
        if (r.first.up) src.template row8<VecRows>(e - nx, r.up);
        if (r.first.back) {
            src.template row8<VecRows>(e - nxy, r.bk);
            if (r.first.up) src.template row8<VecRows>(e - nxy - nx, r.bu);
        }
        return;
    }
#pragma unroll
    for (int k = 0; k < 8; ++k) {
        const uint64_t i = e + k;
        r.a[k] = r.up[k] = r.bk[k] = r.bu[k] = 0;
        if (i >= dm.n) continue;
        coords<Rank>(dm, i, z, y, xx);
        const EarlierLines l = earlier_lines<Rank>(dm, z, y);
        if (k == 0) r.first = l;
        r.valid |= 1u << k;
        if (xx > 0) r.left |= 1u << k;
        r.a[k] = src.at(i);
        if (l.up) r.up[k] = src.at(i - nx);
        if (l.back) {
            r.bk[k] = src.at(i - nxy);
            if (l.up) r.bu[k] = src.at(i - nxy - nx);
        }
    }
}

// The x-1 neighbours of value 0 (index e-1): value 7's rows of the thread before, by warp shuffles; lane 0 reads
// them from src where they exist. Called by whole warps.
struct FirstLeft {
    uint32_t a = 0, up = 0, bk = 0, bu = 0;
};
template <int Rank, class Src>
__device__ __forceinline__ FirstLeft first_left(const Src &src, const Dims &dm, uint64_t e, const Rows8 &r) {
    FirstLeft p;
    p.a = __shfl_up_sync(kFullMask, r.a[7], 1);
    if constexpr (Rank >= 2) p.up = __shfl_up_sync(kFullMask, r.up[7], 1);
    if constexpr (Rank == 3) {
        p.bk = __shfl_up_sync(kFullMask, r.bk[7], 1);
        p.bu = __shfl_up_sync(kFullMask, r.bu[7], 1);
    }
    if ((threadIdx.x & 31) == 0) {
        p = FirstLeft{};
        if (r.left & 1) {
            const uint64_t nx = dm.nx, nxy = dm.nx * dm.ny;
            p.a = src.at(e - 1);
            if (r.first.up) p.up = src.at(e - 1 - nx);
            if (r.first.back) {
                p.bk = src.at(e - 1 - nxy);
                if (r.first.up) p.bu = src.at(e - 1 - nxy - nx);
            }
        }
    }
    return p;
}

// The 16-bit codes of values e .. e+7 into w (two per word); returns the bits of the escaped ones (bit k: value
// e+k). Keep: their deltas are also stored at escd[e + k] (k_quantize_encode, which keeps no q for k_escapes to
// compute them again from). kInside: all 8 values exist and values 1..7 have their x-1 neighbour (every thread but
// those at a row's or the array's end), so no per-value tests.
// Each word is made from the pair's capped magnitudes (one byte permute) and their signs, delta_to_code's parts; one
// test of the words' bits 15 and 31 finds the rare thread with escapes, which alone tests its codes one by one (a
// compare, a select and a predicated store per value before: about 5 of k_quantize_encode's 76 instructions per
// value).
// The Lorenzo deltas of values e .. e+7 from their rows (0 for a value past the end; kInside as for codes8).
template <int Rank, bool kInside>
__device__ __forceinline__ void deltas8(const Rows8 &r, const FirstLeft &p, int32_t (&d)[8]) {
#pragma unroll
    for (int k = 0; k < 8; ++k) {
        const bool has_left = (kInside && k > 0) || ((r.left >> k) & 1);
        Neighbours nb;
        nb.n000 = r.a[k];
        nb.n010 = r.up[k];
        nb.n100 = r.bk[k];
        nb.n110 = r.bu[k];
        nb.n001 = has_left ? (k ? r.a[k > 0 ? k - 1 : 0] : p.a) : 0u;
        nb.n011 = has_left ? (k ? r.up[k > 0 ? k - 1 : 0] : p.up) : 0u;
        nb.n101 = has_left ? (k ? r.bk[k > 0 ? k - 1 : 0] : p.bk) : 0u;
        nb.n111 = has_left ? (k ? r.bu[k > 0 ? k - 1 : 0] : p.bu) : 0u;
        // Coordinates (0, 0, 0): they only tell lorenzo_delta's qat() which neighbour is asked for. A value past
        // the end gets code 0 (delta 0).
        const bool valid = kInside || ((r.valid >> k) & 1);
        d[k] = valid ? delta_from<Rank>(nb, 0, 0, 0) : 0;
    }
}
template <int Rank, bool kInside, bool Keep>
__device__ __forceinline__ uint32_t codes8(const Rows8 &r, const FirstLeft &p, uint32_t (&w)[4],
                                           int32_t *__restrict__ escd, uint64_t e) {
    int32_t d[8];
    uint32_t capped[8];
    deltas8<Rank, kInside>(r, p, d);
#pragma unroll
    for (int k = 0; k < 8; ++k) capped[k] = capped_magnitude(d[k]);
    uint32_t any = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const uint32_t mags = __byte_perm(capped[2 * i], capped[2 * i + 1], 0x5410);
        w[i] = mags | (((uint32_t)d[2 * i] >> 16) & 0x8000u) | ((uint32_t)d[2 * i + 1] & 0x80000000u);
        any |= mags;
    }
    if ((any & 0x80008000u) == 0) return 0;
    uint32_t escaped = 0;
#pragma unroll
    for (int k = 0; k < 8; ++k)
        if (capped[k] == 0x8000u) {
            escaped |= 1u << k;
            if constexpr (Keep) escd[e + k] = d[k];
        }
    return escaped;
}
template <int Rank, bool Keep>
__device__ __forceinline__ uint32_t tile_codes(const Rows8 &r, const FirstLeft &p, uint32_t (&w)[4],
                                               int32_t *__restrict__ escd, uint64_t e) {
    if (r.valid == 0xFFu && (r.left | 1u) == 0xFFu) return codes8<Rank, true, Keep>(r, p, w, escd, e);
    return codes8<Rank, false, Keep>(r, p, w, escd, e);
}

// One block of 256 threads per tile of 2048 codes, thread j the codes 8j .. 8j+7 (linear index e = tile start +
// 8j) from the q array: its values and rows of neighbours are loaded 8 at a time (load_rows8), the x-1 neighbours of
// value 0 come from thread j-1's value 7 (first_left), and the 8 codes, computed in registers, are bitshuffled by
// store_tile. (The previous form, lane l taking code 32g + l of 8 groups, loaded every q with its own 4-byte load
// and moved the codes through shared memory: about 110 instructions per value.)
// Outputs (store_tile): flags (segment 0 of the payload, 8 words per tile), dense[tile * 256 + block] for non-zero
// blocks only, counts[tile] = {non-zero blocks, escapes, exceptions, stored edge blocks}; with edges.E set, the
// exception mask's edges for the one-block exception stage (TileEdges), else counts[tile].w = 0.
template <int Rank, bool VecRows>
__global__ void __launch_bounds__(kTileThreads)
k_encode(const uint32_t *__restrict__ q, const uint32_t *__restrict__ mwords, Dims dm, uint4 *__restrict__ dense,
         uint32_t *__restrict__ flags, uint4 *__restrict__ counts, TileEdges edges) {
    wait_for_prior_grids();  // before any memory access (launch_dependent)
    const uint64_t t = blockIdx.x, e = t * kTileCodes + 8 * (uint64_t)threadIdx.x;
    const GlobalQ src{q};
    Rows8 r;
    load_rows8<Rank, VecRows>(src, dm, e, r);
    const FirstLeft p = first_left<Rank>(src, dm, e, r);
    uint32_t w[4];  // written whole by codes8
    const uint32_t escaped = tile_codes<Rank, false>(r, p, w, nullptr, e);
    store_tile(w, (uint32_t)__popc(escaped), tile_mask_share(mwords, t, edges), t, dense, flags, counts, edges);
}

// k_encode's form for the ratio encoder (v2-layout Lorenzo streams, interp_gpu.cuh): the tile's 16-bit codes in
// index order at codes[t * 2048 ..] (cs.put(d), cs.escape() where |d| >= cs.radius, 0 past n) and counts[t] = {0,
// escapes, exceptions, 0}, which k_escapes and the exception stage read as they read k_encode's.
template <int Rank, bool VecRows>
__global__ void __launch_bounds__(kTileThreads)
k_codes16(const uint32_t *__restrict__ q, const uint32_t *__restrict__ mwords, Dims dm, CodeStyle cs,
          uint16_t *__restrict__ codes, uint4 *__restrict__ counts) {
    __shared__ TileCounts wc;
    const uint64_t t = blockIdx.x, e = t * kTileCodes + 8 * (uint64_t)threadIdx.x;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const GlobalQ src{q};
    Rows8 r;
    load_rows8<Rank, VecRows>(src, dm, e, r);
    const FirstLeft p = first_left<Rank>(src, dm, e, r);
    int32_t d[8];
    if (r.valid == 0xFFu && (r.left | 1u) == 0xFFu) deltas8<Rank, true>(r, p, d);
    else deltas8<Rank, false>(r, p, d);
    uint32_t w[4], esc = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        uint32_t half[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int k = 2 * i + h;
            const bool valid = (r.valid >> k) & 1;
            const bool escaped = valid && cs.escaped(d[k]);
            esc += escaped;
            half[h] = !valid ? 0u : escaped ? cs.escape() : cs.put(d[k]);
        }
        w[i] = half[0] | (half[1] << 16);
    }
    *reinterpret_cast<uint4 *>(codes + e) = make_uint4(w[0], w[1], w[2], w[3]);
    esc = __reduce_add_sync(kFullMask, esc);
    const uint32_t exc = __reduce_add_sync(kFullMask, tile_exception_share(mwords, t));
    if (lane == 0) {
        wc.nnz[warp] = 0;
        wc.esc[warp] = esc;
        wc.exc[warp] = exc;
    }
    __syncthreads();
    if (threadIdx.x == 0) sum_tile_counts(wc, t, counts);
}

// ---- quantization and the tile kernel in one pass ----------------------------------------------------------------

// Bits of 8 values per lane (bit k of byte8: value 8 * lane + k) as a warp's 8 words of a bit string: lanes
// 4m .. 4m+3 make word m, which lane 4m gets (as the other three). Called by whole warps.
__device__ __forceinline__ uint32_t warp_words_of_bytes(uint32_t byte8, int lane) {
    uint32_t word = byte8 << (8 * (lane & 3));
    word |= __shfl_xor_sync(kFullMask, word, 1);
    word |= __shfl_xor_sync(kFullMask, word, 2);
    return word;
}

// Eight values of x from index i (a multiple of 8), zero past n; 16-byte loads where x is 16-byte aligned.
template <typename T>
__device__ __forceinline__ void load8x(const T *__restrict__ x, uint64_t i, uint64_t n, bool aligned, T (&v)[8]) {
    T lo[4], hi[4];
    if (aligned) {
        load4<T, true>(x, i, n, lo);
        load4<T, true>(x, i + 4, n, hi);
    } else {
        load4<T, false>(x, i, n, lo);
        load4<T, false>(x, i + 4, n, hi);
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) v[k] = lo[k], v[k + 4] = hi[k];
}

// How k_quantize_encode covers an array: each block walks `tiles_per_block` consecutive tiles, keeping the q of the
// last `ring` indices in shared memory, which must hold the `lookback` indices before a tile (the farthest neighbour
// of a Lorenzo delta: rank 3 nx*ny + nx + 1 back, rank 2 nx + 1, rank 1 one) and the tile itself. A block starts by
// quantizing the lookback before its first tile (values its predecessor quantizes too: the same q), so that a walk
// should be long against the lookback; and the blocks should fill the GPU several times over.
struct WalkPlan {
    uint64_t lookback = 0;
    uint32_t ring = 0;  // entries, a multiple of kTileCodes; 0: the two-pass form is used
    uint64_t tiles_per_block = 0;
    unsigned blocks = 0;
    size_t shared_bytes() const { return ((size_t)ring + kRingMirror) * 4; }
};
// At most 48 KiB of ring: with store_tile's 4 KiB, four blocks per SM, as many as k_quantize_encode's 64 registers
// per thread allow. (A ring of a power of 2 entries, 64 KiB for TREFHT's 128 x 64 planes, left three.)
constexpr uint32_t kMaxRing = 12288;

// ZBOUND_GPU_WALK: unset or empty (or not a number), the plan below: -1; "0" the two-pass form (k_quantize, then
// k_encode) for comparisons; a number of tiles per block otherwise.
inline long walk_env() {
    static const long v = (long)env_integer("ZBOUND_GPU_WALK", -1);
    return v;
}

inline WalkPlan walk_plan(const Dims &dm, int rank, uint64_t ntiles, int sm_count, bool batch_item) {
    WalkPlan wp;
    const long env = walk_env();
    if (env == 0) return wp;
    wp.lookback = rank == 3 ? dm.nx * dm.ny + dm.nx + 1 : rank == 2 ? dm.nx + 1 : 1;
    const uint64_t ring = (div_up(wp.lookback, kTileCodes) + 1) * kTileCodes;
    if (ring > kMaxRing) return wp;
    // Walks long enough that the lookback adds at most an eighth to the values quantized, and at least one wave of
    // such walks (four blocks per SM); else the two-pass form, which has no lookback to pay. Rows whose length is
    // not a multiple of 4 take 4-byte ring reads, each wrapped on its own: then the two passes were as fast (1 GB of
    // gmt_geoid, 601 columns: 539-558 GB/s walking, 551 not). Five waves: walks of 48 tiles at 1 GB (16 to 124
    // measured, H200: 618-631 GB/s, 48 the best).
    // Below that, from two waves of tiles (chunk sizes): one wave of walks of at least 4 tiles. They quantize up to a
    // lookback again per walk (TREFHT's 128 x 64 planes: 4 tiles, so twice the values at walks of 4) but save
    // k_encode's launch and the round trip of q. H100, TREFHT, per device call, compressing: 16 MB 72.1-72.9 us in
    // two passes -> 67.6 (walks of 4; 2: 71.6, 8: 70.3); 32 MB 115.6-117.0 -> 99.0-100.2 (walks of 8; 4: 106.8-108.2,
    // 16, half a wave: 103.1-103.3); 64 MB 201.7-202.1 -> 169.4-170.5 (walks of 16; 8: 173.2-174.2, 12: 177.3-177.6);
    // 128 MB 288.7-289.1 with walks of 32 (16: 289.6-293.5). At 8 MB (1024 tiles) walks of 4 lost (49.9-50.9 ->
    // 53.2) and at 4 MB every walk length did (NOTES 136-138).
    // A chunk of a batched call walks from one wave of tiles, in half a wave of walks: chunks on other streams fill
    // the SMs that its walks leave idle. Per chunk, compressing: 8 MB x 64 357-360 GB/s (walks of 4; two passes
    // 329-330), 16 MB x 64 470-474 (8; 4: 435-439), 32 MB x 32 547 (16; 8: 509-520), 64 MB x 16 591-597 (32; 16:
    // 580-582, 8: 547-555), 128 MB x 8 633-644 (64; 32: 628-632, 16: 604-607) (NOTES 138).
    const uint64_t min_walk = div_up(8 * wp.lookback, kTileCodes);
    const uint64_t wave = 4 * (uint64_t)std::max(sm_count, 1);
    const bool long_walks = ntiles >= min_walk * wave, chunk_walks = ntiles >= (batch_item ? 1 : 2) * wave;
    if (env < 0 && ((!long_walks && !chunk_walks) || (rank >= 2 && dm.nx % 4 != 0))) return wp;
    wp.ring = (uint32_t)ring;
    wp.tiles_per_block = env > 0       ? (uint64_t)env
                         : long_walks ? std::max(min_walk, div_up(ntiles, 5 * wave))
                                      : std::max<uint64_t>(4, div_up(ntiles, batch_item ? wave / 2 : wave));
    wp.blocks = (unsigned)div_up(ntiles, wp.tiles_per_block);
    return wp;
}

// Quantization, Lorenzo deltas, codes and the tile's bitshuffle in one pass: k_quantize's and k_encode's outputs
// (mask words, flags, non-zero blocks, counts), without writing q or reading it back (those were 2 of the 3.3
// bytes moved per input byte of the two-pass form). Block b walks tiles [b * R, (b + 1) * R) (R = tiles_per_block),
// thread j values 8j .. 8j+7 of each: their x (loaded one tile ahead) quantized into the ring, a barrier, then the
// neighbours read from the ring and the tile stored as k_encode's store_tile does (store_tile_parts; each tile's
// counts are summed after the next tile's barrier). Escaped codes: bits in escbits (laid out as the mask words) and
// deltas at escd[index], for k_escapes_kept.
// x's alignment and the constants' place (d_qp: REL, from k_range) are arguments, not template parameters:
// the same for every thread, they cost a branch where k_quantize's four forms cost compile time.
template <typename T, int Rank, bool VecRows>
__global__ void __launch_bounds__(kTileThreads)
k_quantize_encode(const T *__restrict__ x, bool aligned, QuantParams qp, const QuantParams *__restrict__ d_qp, Dims dm,
                  uint64_t ntiles, uint64_t tiles_per_block, uint64_t lookback, uint32_t ring_size,
                  uint32_t *__restrict__ mwords, uint32_t *__restrict__ escbits, int32_t *__restrict__ escd,
                  uint4 *__restrict__ dense, uint32_t *__restrict__ flags, uint4 *__restrict__ counts) {
    extern __shared__ uint4 ring4[];
    __shared__ TileCounts wc[2];  // store_tile_parts' counts of tiles t (t & 1) and t - 1, summed after t's barrier
    uint32_t *ring = reinterpret_cast<uint32_t *>(ring4);
    const int j = threadIdx.x, lane = j & 31;
    const uint64_t n = dm.n, t0 = (uint64_t)blockIdx.x * tiles_per_block;
    const uint64_t t1 = t0 + tiles_per_block < ntiles ? t0 + tiles_per_block : ntiles;
    T v[8];
    load8x<T>(x, t0 * kTileCodes + 8 * (uint64_t)j, n, aligned, v);
    if (d_qp) qp = *d_qp;
    // The lookback before the first tile (start <= n: t0 < ntiles).
    const uint64_t start = t0 * kTileCodes, lo = start > lookback ? start - lookback : 0;
    RingQ src{ring, (int32_t)ring_size, 0, start};
    for (uint64_t i = lo + j; i < start; i += kTileThreads) {
        int32_t qi;
        (void)quantize<T>(x[i], qp, qi);
        ring[src.entry(i)] = (uint32_t)qi;
    }
    for (uint64_t t = t0; t < t1; ++t) {
        const uint64_t e = t * kTileCodes + 8 * (uint64_t)j;
        int32_t qi[8];
        uint32_t exc = 0;
#pragma unroll
        for (int k = 0; k < 8; ++k)
            if (!quantize<T>(v[k], qp, qi[k])) exc |= 1u << k;
        exc &= existing_bits(e, 8, n);
        if (t + 1 < t1) load8x<T>(x, e + kTileCodes, n, aligned, v);  // the next tile's, in flight meanwhile
        uint4 *slot = reinterpret_cast<uint4 *>(ring + src.base + 8 * j);
        const uint4 first4 = make_uint4((uint32_t)qi[0], (uint32_t)qi[1], (uint32_t)qi[2], (uint32_t)qi[3]);
        slot[0] = first4;
        slot[1] = make_uint4((uint32_t)qi[4], (uint32_t)qi[5], (uint32_t)qi[6], (uint32_t)qi[7]);
        if (src.base == 0 && j == 0) reinterpret_cast<uint4 *>(ring + src.size)[0] = first4;  // RingQ's mirror
        const uint32_t exc_word = warp_words_of_bytes(exc, lane);
        if ((lane & 3) == 0) mwords[t * 64 + (uint64_t)(j >> 2)] = exc_word;
        __syncthreads();  // the tile's q in the ring; the last tile's store_tile ended all reads of what it replaces
        if (t > t0 && j == 0) sum_tile_counts(wc[(t - 1) & 1], t - 1, counts);  // one barrier less per tile
        Rows8 r;
        load_rows8<Rank, VecRows>(src, dm, e, r);
        const FirstLeft p = first_left<Rank>(src, dm, e, r);
        uint32_t w[4];  // written whole by codes8
        const uint32_t escaped = tile_codes<Rank, true>(r, p, w, escd, e);
        const uint32_t esc_word = warp_words_of_bytes(escaped, lane);
        if ((lane & 3) == 0) escbits[t * 64 + (uint64_t)(j >> 2)] = esc_word;
        store_tile_parts(w, (uint32_t)__popc(escaped), (uint32_t)__popc(exc), t, dense, flags, wc[t & 1]);
        src.tile_start += kTileCodes;
        src.base += kTileCodes;
        if (src.base == src.size) src.base = 0;
    }
    __syncthreads();
    if (j == 0 && t1 > t0) sum_tile_counts(wc[(t1 - 1) & 1], t1 - 1, counts);
}

// ---- escapes -----------------------------------------------------------------------------------------------------

// Tiles with escapes (cs.escaped) recompute their deltas and append the escaped ones, in index order, at the tile's
// offset: in the payload where the layout words w put the escape segment (the fast encoder), or at dst.
template <int Rank>
__global__ void __launch_bounds__(kTileThreads)
k_escapes(const uint32_t *__restrict__ q, Dims dm, const uint4 *__restrict__ counts, const uint4 *__restrict__ offs,
          uint8_t *__restrict__ pay, const EncodeWords *__restrict__ w, int32_t *__restrict__ dst, CodeStyle cs) {
    wait_for_prior_grids();  // before any memory access (launch_dependent)
    using Scan = cub::BlockScan<uint32_t, kTileThreads>;
    __shared__ typename Scan::TempStorage tmp;
    const uint64_t t = blockIdx.x;
    if ((w && w->status != kLayoutOk) || counts[t].y == 0) return;
    int32_t *out = dst ? dst : reinterpret_cast<int32_t *>(pay + w->off[kSegEscapes]);  // 4-byte aligned: see encode_impl
    uint64_t run = offs[t].y;
    for (int r = 0; r < 8; ++r) {
        const uint64_t i = t * kTileCodes + (uint64_t)r * kTileThreads + threadIdx.x;
        int32_t d = 0;
        uint32_t f = 0;
        if (i < dm.n) {
            int64_t z, y, xx;
            coords<Rank>(dm, i, z, y, xx);
            d = delta_from<Rank>(load_neighbours<Rank>(q, dm, i, z, y, xx), z, y, xx);
            f = cs.escaped(d);
        }
        uint32_t pos, total;
        Scan(tmp).ExclusiveSum(f, pos, total);
        if (f) out[run + pos] = d;
        run += total;
        __syncthreads();  // tmp is reused by the next round
    }
}

// Escapes of k_quantize_encode, which keeps no q: tiles with escapes append the escaped deltas it stored at
// escd[index] (escbits, laid out as the mask words, says which) in index order at the tile's offset; thread j takes
// values 8j .. 8j+7.
__global__ void __launch_bounds__(kTileThreads)
k_escapes_kept(const uint32_t *__restrict__ escbits, const int32_t *__restrict__ escd, const uint4 *__restrict__ counts,
               const uint4 *__restrict__ offs, uint8_t *__restrict__ pay, const EncodeWords *__restrict__ w) {
    using Scan = cub::BlockScan<uint32_t, kTileThreads>;
    __shared__ typename Scan::TempStorage tmp;
    const uint64_t t = blockIdx.x;
    if (w->status != kLayoutOk || counts[t].y == 0) return;
    const int j = threadIdx.x;
    const uint32_t bits = (escbits[t * 64 + (uint64_t)(j >> 2)] >> (8 * (j & 3))) & 0xFFu;
    uint32_t rank, unused;
    Scan(tmp).ExclusiveSum((uint32_t)__popc(bits), rank, unused);
    int32_t *out = reinterpret_cast<int32_t *>(pay + w->off[kSegEscapes]);  // 4-byte aligned: see encode_impl
    uint64_t pos = offs[t].y + rank;
    const uint64_t e = t * kTileCodes + 8 * (uint64_t)j;
#pragma unroll
    for (int k = 0; k < 8; ++k)
        if ((bits >> k) & 1) out[pos++] = escd[e + k];
}

// ---- exceptions --------------------------------------------------------------------------------------------------

// With the count on the device (d_k), the values are gathered and the change bits found only when there are
// exceptions and they fit the buffers carved for kcap of them; without it (nullptr) the host knew the count.
__device__ __forceinline__ bool exceptions_fit(const unsigned long long *d_k, uint64_t kcap) {
    if (!d_k) return true;
    const unsigned long long k = *d_k;
    return k != 0 && k <= kcap;
}

// Exception values in index order: V[offset of the tile + rank in the tile] = bits of x. A block looks at
// `per_block` tiles (gather_tiles) and takes those with exceptions in turn (one block per tile spent 80 us of a 1 GB
// encode starting blocks for tiles without any); 256 threads per tile, 8 consecutive values each (one byte of a mask
// word), ranks from a block scan of the per-thread counts.
template <typename T>
__global__ void __launch_bounds__(kTileThreads)
k_gather_exceptions(const T *__restrict__ x, const uint32_t *__restrict__ mwords, const uint4 *__restrict__ counts,
                    const uint4 *__restrict__ offs, uint64_t ntiles, uint32_t per_block,
                    typename FloatBits<T>::U *__restrict__ V, const unsigned long long *__restrict__ d_k,
                    uint64_t kcap) {
    wait_for_prior_grids();  // before any memory access (launch_dependent)
    using Scan = cub::BlockScan<uint32_t, kTileThreads>;
    __shared__ typename Scan::TempStorage tmp;
    __shared__ uint32_t listed, list[kTileThreads];  // tiles of this block with exceptions (any order)
    if (!exceptions_fit(d_k, kcap)) return;
    const int j = threadIdx.x;
    const uint64_t t0 = (uint64_t)blockIdx.x * per_block;
    if (j == 0) listed = 0;
    __syncthreads();
    if (j < (int)per_block && t0 + j < ntiles && counts[t0 + j].z) list[atomicAdd(&listed, 1u)] = (uint32_t)j;
    __syncthreads();
    for (uint32_t i = 0; i < listed; ++i) {
        const uint64_t t = t0 + list[i];
        const uint32_t m8 = (mwords[t * 64 + (j >> 2)] >> ((j & 3) * 8)) & 0xFFu;  // values e .. e+7
        uint32_t rank, unused;
        Scan(tmp).ExclusiveSum((uint32_t)__popc(m8), rank, unused);
        uint64_t pos = (uint64_t)offs[t].z + rank;
        const uint64_t e = t * kTileCodes + 8 * (uint64_t)j;
#pragma unroll
        for (int k = 0; k < 8; ++k)
            if ((m8 >> k) & 1) V[pos++] = bits_of(x[e + k]);
        __syncthreads();  // tmp is reused by the next tile
    }
}

// Edge mask E[i] = M[i] xor M[i-1] as words, bits at or past n cleared, and its sparse flags (as sparse_flags's:
// flag words and their popcounts): thread b makes the four edge words of 16-byte block b (nblocks of them) from four
// mask words and the top bit of the word before (the lane before's, or lane 0's own load), and stores the block only
// where it is not zero: the sparse copy reads flagged blocks only. (E written whole by a kernel of its own and read
// back by sparse_flags took 39 us of a 1 GB compression, ncu.)
__global__ void k_edge_flags(const uint4 *__restrict__ M4, uint64_t nblocks, uint64_t n, uint4 *__restrict__ E4,
                             uint32_t *__restrict__ flagwords, uint32_t *__restrict__ counts) {
    wait_for_prior_grids();  // before any memory access (launch_dependent)
    const uint64_t b = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const uint64_t g = b >> 5;
    if ((g << 5) >= nblocks) return;  // the whole warp is past the end
    const int lane = threadIdx.x & 31;
    const uint4 m = b < nblocks ? M4[b] : make_uint4(0, 0, 0, 0);
    uint32_t prev = __shfl_up_sync(kFullMask, m.w, 1) >> 31;
    if (lane == 0) prev = b ? reinterpret_cast<const uint32_t *>(M4)[4 * b - 1] >> 31 : 0u;
    const uint64_t w = 4 * b;
    uint4 e;
    e.x = edge_bits(m.x, prev) & low_bits(valid_bits(w, n));
    e.y = edge_bits(m.y, m.x >> 31) & low_bits(valid_bits(w + 1, n));
    e.z = edge_bits(m.z, m.y >> 31) & low_bits(valid_bits(w + 2, n));
    e.w = edge_bits(m.w, m.z >> 31) & low_bits(valid_bits(w + 3, n));
    const bool nz = b < nblocks && any_bits(e);
    if (nz) E4[b] = e;
    const uint32_t fw = __ballot_sync(kFullMask, nz);
    if (lane == 0) {
        flagwords[g] = fw;
        counts[g] = __popc(fw);
    }
}

// Change bits C[j] = (j == 0 || V[j] != V[j-1]) packed in words (nwords of them, a multiple of 4, zero past k), with
// popcounts. Four consecutive values per thread (one thread per value started k / 256 thread blocks: 420 K for the
// 107 M NaN of gmt_sst at 1 GB), the value before them from the lane before (lane 0 loads it); a warp's 128 values
// make four words (warp_words_of_nibbles, as k_quantize's mask words).
template <typename U>
__global__ void k_change_bits(const U *__restrict__ V, uint64_t k, uint64_t nwords, uint32_t *__restrict__ C,
                              uint32_t *__restrict__ cnt, const unsigned long long *__restrict__ d_k) {
    wait_for_prior_grids();  // before any memory access (launch_dependent)
    const uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x, j = 4 * t;
    const int lane = threadIdx.x & 31;
    if ((t - lane) / 8 >= nwords) return;   // the warp's first word is past the end (whole warps)
    // k is the cap where the count is on the device (d_k): words past the count are zero, and all of them where
    // there are none or more than the cap (written all the same: the flags and scans after it read every word).
    if (d_k) k = exceptions_fit(d_k, k) ? *d_k : 0;
    U v[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) v[i] = j + i < k ? V[j + i] : U(0);
    U before = __shfl_up_sync(kFullMask, v[3], 1);
    if (lane == 0) before = j > 0 && j - 1 < k ? V[j - 1] : U(0);
    uint32_t changes = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i)
        changes |= (uint32_t)(j + i < k && (j + i == 0 || v[i] != (i ? v[i > 0 ? i - 1 : 0] : before))) << i;
    const uint32_t word = warp_words_of_nibbles(changes, lane);
    if (lane < 4) {
        const uint64_t w = (t - lane) / 8 + lane;
        C[w] = word;
        cnt[w] = __popc(word);
    }
}

// Run values: V[j] for each j with C[j] = 1, at its rank, little-endian (segment 7 is byte-aligned). Warp g reads
// change words g * per_warp + l in lane l < per_warp (nwords of them in all); the warp then takes the non-zero words
// one at a time, lane b the value of bit b. (One thread per exception spent about as long starting blocks as reading
// C where the runs are few and the exceptions many: a NaN land mask has one run for 40 % of the values.) per_warp
// (runs_per_warp) is 32 unless the words are few: 63 words on two warps took 17 us of a 1 GB compression, one value
// load after another. words (or nullptr): a stream laid out on the device, dst its payload.
template <typename U>
__global__ void k_runs(const U *__restrict__ V, uint64_t nwords, uint32_t per_warp, const uint32_t *__restrict__ C,
                       const uint32_t *__restrict__ offR, uint8_t *__restrict__ dst,
                       const EncodeWords *__restrict__ words) {
    wait_for_prior_grids();  // before any memory access (launch_dependent)
    const uint64_t w0 = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32 * per_warp;  // the warp's first word
    const int lane = threadIdx.x & 31;
    if (w0 >= nwords) return;   // the whole warp is past the end
    if (words) {
        if (words->status != kLayoutOk || words->len[kSegExceptionValues] == 0) return;
        dst += words->off[kSegExceptionValues];
    }
    const uint64_t w = w0 + lane;
    const bool mine = (uint32_t)lane < per_warp && w < nwords;
    const uint32_t word = mine ? C[w] : 0u;
    const uint64_t first = mine && word ? offR[w] : 0;
    for (uint32_t nz = __ballot_sync(kFullMask, word != 0); nz; nz &= nz - 1) {
        const int src = __ffs(nz) - 1;
        const uint32_t bits = __shfl_sync(kFullMask, word, src);
        const uint64_t base = __shfl_sync(kFullMask, first, src);
        if ((bits >> lane) & 1) {
            const U v = V[32 * (w0 + src) + lane];
            uint8_t *o = dst + (base + __popc(bits & low_bits(lane))) * sizeof(U);
#pragma unroll
            for (int b = 0; b < (int)sizeof(U); ++b) o[b] = (uint8_t)(v >> (8 * b));
        }
    }
}

// ---- host driver -------------------------------------------------------------------------------------------------

// segs: the Lorenzo segments of the stream (format version 6), or lorenzo_one_segment (version 2).
inline Dims make_dims(const Shape &s, const LorenzoSegments &segs) {
    Dims d;
    d.n = s.n;
    d.nx = s.nx();
    d.ny = s.ny();
    d.nz = s.nz();
    d.seg = segs.per_segment;
    d.dx = FastDiv(d.nx);
    d.dy = FastDiv(d.ny);
    d.dseg = FastDiv(d.seg);
    return d;
}
inline Dims make_dims(const Shape &s) { return make_dims(s, lorenzo_segments(s)); }

inline void launch_encode(int rank, uint64_t ntiles, cudaStream_t s, const uint32_t *q, const uint32_t *mwords,
                          const Dims &dm, uint4 *dense, uint32_t *flags, uint4 *counts, const TileEdges &edges) {
    // Rows above and layers before are 16-byte aligned when nx is a multiple of 4 (q itself is).
    const bool vec = dm.nx % 4 == 0;
    auto kernel = rank == 1 ? k_encode<1, false>
                  : rank == 2 ? (vec ? k_encode<2, true> : k_encode<2, false>)
                              : (vec ? k_encode<3, true> : k_encode<3, false>);
    launch_dependent("launch of k_encode", kernel, (unsigned)ntiles, kTileThreads, 0, s, q, mwords, dm, dense, flags,
                     counts, edges);
}

inline void launch_codes16(int rank, uint64_t ntiles, cudaStream_t s, const uint32_t *q, const uint32_t *mwords,
                           const Dims &dm, CodeStyle cs, uint16_t *codes, uint4 *counts) {
    const bool vec = dm.nx % 4 == 0;  // as launch_encode
    auto kernel = rank == 1 ? k_codes16<1, false>
                  : rank == 2 ? (vec ? k_codes16<2, true> : k_codes16<2, false>)
                              : (vec ? k_codes16<3, true> : k_codes16<3, false>);
    kernel<<<(unsigned)ntiles, kTileThreads, 0, s>>>(q, mwords, dm, cs, codes, counts);
    ZB_LAUNCHED("k_codes16");
}

// Escapes (cs.escaped) of a stream laid out on the device (k_escapes reads the layout words w; pay = the payload),
// or, with w null, at dst.
inline void launch_escapes(int rank, uint64_t ntiles, cudaStream_t s, const uint32_t *q, const Dims &dm,
                           const uint4 *counts, const uint4 *offs, uint8_t *pay, const EncodeWords *w,
                           int32_t *dst = nullptr, CodeStyle cs = CodeStyle{kFastRadius, 0}) {
    auto kernel = rank == 1 ? k_escapes<1> : rank == 2 ? k_escapes<2> : k_escapes<3>;
    launch_dependent("launch of k_escapes", kernel, (unsigned)ntiles, kTileThreads, 0, s, q, dm, counts, offs, pay, w,
                     dst, cs);
}

// The form of k_quantize_encode for the rank and row alignment (as launch_encode's).
template <typename T>
inline auto quantize_encode_kernel(int rank, const Dims &dm) {
    const bool vec = dm.nx % 4 == 0;
    return rank == 1 ? k_quantize_encode<T, 1, false>
           : rank == 2 ? (vec ? k_quantize_encode<T, 2, true> : k_quantize_encode<T, 2, false>)
                       : (vec ? k_quantize_encode<T, 3, true> : k_quantize_encode<T, 3, false>);
}

// A kernel that uses more than 48 KiB of shared memory, static (store_tile's) and dynamic together, must say so
// first (outside a graph capture).
template <typename T>
inline void allow_walk_ring(const WalkPlan &wp, int rank, const Dims &dm) {
    if (wp.ring)
        ZB_CUDA(cudaFuncSetAttribute(quantize_encode_kernel<T>(rank, dm), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)wp.shared_bytes()));
}

template <typename T>
inline void launch_quantize_encode(const WalkPlan &wp, int rank, cudaStream_t s, const T *x, const QuantParams &qp,
                                   const QuantParams *d_qp, const Dims &dm, uint64_t ntiles, uint32_t *mwords,
                                   uint32_t *escbits, int32_t *escd, uint4 *dense, uint32_t *flags, uint4 *counts) {
    const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0;
    quantize_encode_kernel<T>(rank, dm)<<<wp.blocks, kTileThreads, wp.shared_bytes(), s>>>(
        x, aligned, qp, d_qp, dm, ntiles, wp.tiles_per_block, wp.lookback, wp.ring, mwords, escbits, escd, dense,
        flags, counts);
    ZB_LAUNCHED("k_quantize_encode");
}

// The header written by the host with zero counts and checksums, as a kernel argument (k_fast_layout): a graph of the
// call (queue_as_graph) then holds no copy into the caller's buffer, whose allocation a copy node would keep from the
// capture (a buffer freed and allocated again at the same address made such a replay fail).
constexpr size_t kFastHeaderBytes = kHeaderFixedBytes + 16 * (size_t)kFastSegmentCount + 8;
struct FastHeaderBytes {
    uint8_t b[kFastHeaderBytes];
};

// The fields of a fast-layout header that its counts decide (flags, a REL bound's eb, the counts, the segment table),
// by one thread into hdr, a copy of the host's template (which has everything else).
__device__ __forceinline__ void put_fast_header_fields(uint8_t *__restrict__ hdr, uint8_t flags, bool rel, double eb,
                                                       const FastCounts &fc, const uint64_t *off, const uint64_t *len) {
    auto put = [hdr](size_t at, uint64_t v, int bytes) {
        for (int b = 0; b < bytes; ++b) hdr[at + b] = (uint8_t)(v >> (8 * b));
    };
    put(kHdrFlagsAt, flags, 1);
    if (rel) put(kHdrEbAt, (uint64_t)__double_as_longlong(eb), 8);
    put(kHdrCountsAt, fc.escapes, 8);
    put(kHdrCountsAt + 8, fc.exceptions, 8);
    put(kHdrCountsAt + 16, fc.runs, 8);
    put(kHdrCountsAt + 24, fc.nonzero_code_blocks, 8);
    for (int i = 0; i < kFastSegmentCount; ++i) {
        put(kHeaderFixedBytes + 16 * i, off[i], 8);
        put(kHeaderFixedBytes + 16 * i + 8, len[i], 8);
    }
}

// A fast stream laid out from its counts by one thread (fast_segment_lengths, as the host's fast_layout): the header's
// flags, the segments' offsets and lengths, the payload and stream lengths, and the raw-passthrough / capacity decision
// (status). Shared by FastLayout and the chunk path's last block (chunk_tail).
struct FastStreamPlan {
    uint64_t off[kFastSegmentCount], len[kFastSegmentCount];
    uint64_t payload_len, stream_len, status;
    uint8_t flags;
};

__device__ inline void plan_fast_stream(const FastCounts &fc, uint64_t raw_bytes, uint64_t capacity,
                                        FastStreamPlan &p) {
    p.flags = fast_segment_lengths(fc, p.len);
    p.payload_len = 0;
    for (int i = 0; i < kFastSegmentCount; ++i) {
        p.off[i] = p.payload_len;
        p.payload_len += p.len[i];
    }
    p.stream_len = kFastHeaderBytes + p.payload_len;
    p.status = p.stream_len >= raw_bytes ? kLayoutRaw : p.stream_len > capacity ? kLayoutTooSmall : kLayoutOk;
}

// The stream's layout from the counts in w (fast_segment_lengths, as the host's fast_layout), and the
// raw-passthrough and capacity decisions (w->status), by thread 0, which fills in the header's flags, counts, segment
// table and (REL) bound in a shared copy of the template tmpl; for a stream to be written, the block then copies the
// header to hdr. The checksums are sealed last (piece_crcs_seal_at), for which the block zeroes the payload's piece
// CRCs (crcs) and sets the ticket: no memset node before that kernel. kcap: the exceptions the exception stage had
// room for. host_result (result_mapping, or nullptr): the result for the host written there too, so that no node
// after the stream's writers has to. Run by k_fast_layout, or at the end of the one-block exception kernel (one node
// less); contains barriers: call it from every thread of the block.
struct FastLayout {
    EncodeWords *w;
    uint64_t n;
    uint32_t value_bytes;
    uint64_t kcap, raw_bytes, capacity;
    int rel;
    FastHeaderBytes tmpl;
    uint8_t *hdr;
    uint32_t *crcs;
    LayoutResult *host_result;

    __device__ void operator()() const {
        __shared__ uint64_t status, pieces;
        // The header is made in shared memory and copied out by the block: thread 0's byte stores to hdr (global)
        // made each later read of w wait for them (0.5-1.3 us of a 4 MiB call, NOTES 134).
        __shared__ uint8_t s_hdr[kFastHeaderBytes];
        for (unsigned i = threadIdx.x; i < kFastHeaderBytes; i += blockDim.x) s_hdr[i] = tmpl.b[i];
        __syncthreads();
        if (threadIdx.x == 0) {
            // Every word of w that thread 0 needs, read before it writes any (the writes below could alias them).
            unsigned long long totals[3], ex_totals[3];
            for (int i = 0; i < 3; ++i) {
                totals[i] = w->totals[i];
                ex_totals[i] = w->ex_totals[i];
            }
            const double eb = rel ? w->qp.eb : 0.0;
            const unsigned long long k = totals[2];
            FastStreamPlan p{};  // an over-cap call: no layout, lengths 0
            if (k > kcap) {
                p.status = kLayoutOverCap;
            } else {
                const bool ex = k != 0;
                const FastCounts fc{n, value_bytes, totals[0], totals[1], k, ex ? ex_totals[0] : 0,
                                    ex ? ex_totals[1] : 0, ex ? ex_totals[2] : 0};
                plan_fast_stream(fc, raw_bytes, capacity, p);
                if (p.status == kLayoutOk) put_fast_header_fields(s_hdr, p.flags, rel, eb, fc, p.off, p.len);
                for (int i = 0; i < kFastSegmentCount; ++i) {
                    w->off[i] = p.off[i];
                    w->len[i] = p.len[i];
                }
                w->payload_len = p.payload_len;
            }
            status = p.status;
            w->status = p.status;
            w->crc_ticket = ~0u;
            pieces = div_up(p.payload_len, (uint64_t)kChecksumPiece);
            // What the host reads back, every word written on every call (it copies this part only).
            LayoutResult r;
            for (int i = 0; i < 3; ++i) r.totals[i] = totals[i];
            r.eb = eb;
            r.payload_len = p.payload_len;
            r.stream_len = p.stream_len;
            r.status = p.status;
            w->result = r;
            if (host_result) *host_result = r;
        }
        __syncthreads();
        if (status != kLayoutOk) return;
        for (uint64_t i = threadIdx.x; i < pieces; i += blockDim.x) crcs[i] = 0;
        for (unsigned i = threadIdx.x; i < kFastHeaderBytes; i += blockDim.x) hdr[i] = s_hdr[i];
    }
};

__global__ void k_fast_layout(FastLayout layout) {
    wait_for_prior_grids();  // before any memory access (launch_dependent)
    layout();
}

// The flag segments of the exception masks (blockIdx.y 0: edges, 1: changes) at their offsets in a stream laid out on
// the device: the flag words' bytes, or zeros where there are no exceptions (the edge flags are never empty).
__global__ void k_put_flags(const EncodeWords *__restrict__ w, uint8_t *__restrict__ pay,
                            const uint32_t *__restrict__ flagE, const uint32_t *__restrict__ flagC) {
    wait_for_prior_grids();  // before any memory access (launch_dependent)
    if (w->status != kLayoutOk) return;
    const int seg = blockIdx.y ? kSegChangeFlags : kSegEdgeFlags;
    const uint64_t len = w->len[seg];
    const bool zeros = w->totals[2] == 0;
    const uint8_t *src = reinterpret_cast<const uint8_t *>(blockIdx.y ? flagC : flagE);
    uint8_t *dst = pay + w->off[seg];
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < len; i += (uint64_t)gridDim.x * blockDim.x)
        dst[i] = zeros ? 0 : src[i];
}

// Copies `count` 64-bit results from device memory to the context's pinned scratch and waits for them.
inline const unsigned long long *fetch_totals(Context &c, const unsigned long long *d, int count, cudaStream_t s) {
    ZB_CUDA(cudaMemcpyAsync(c.host_small, d, sizeof(unsigned long long) * count, cudaMemcpyDeviceToHost, s));
    ZB_CUDA(cudaStreamSynchronize(s));
    return reinterpret_cast<const unsigned long long *>(c.host_small);
}

[[noreturn]] inline void too_small(size_t need) {
    fail(ZB_ERR_BUFFER_TOO_SMALL, "output buffer too small: " + std::to_string(need) + " bytes needed");
}

// Finishes a stream whose payload (payload_len bytes at d_payload, device) is complete: piece CRCs on the GPU, the
// header delivered to `out`. Returns the stream length. Device output: the payload is copied after the header
// unless it was written there already (d_payload == out.ptr + header bytes); the host writes the header with a zero
// payload checksum, the GPU seals it (seal_payload_crc): one synchronization. Host output: the payload and piece
// CRCs are downloaded and the header written on the host.
inline size_t finish_stream(Context &c, Header &h, const uint8_t *d_payload, uint32_t *d_crcs,
                            const StreamTarget &out, cudaStream_t s, KernelTimer &timer) {
    const uint64_t len = h.payload_bytes();
    const size_t hb = h.header_bytes();
    timer.mark("segments launched");
    timer.begin("crc");
    piece_crcs(c, d_payload, len, d_crcs, s);
    timer.end();
    if (out.on_device) {
        if (len && d_payload != out.ptr + hb)
            ZB_CUDA(cudaMemcpyAsync(out.ptr + hb, d_payload, len, cudaMemcpyDeviceToDevice, s));
        h.payload_crc = 0;
        uint8_t *hdr = c.host_small;  // pinned, and free: every earlier result has been read
        write_header(h, hdr);
        ZB_CUDA(cudaMemcpyAsync(out.ptr, hdr, hb, cudaMemcpyHostToDevice, s));
        seal_payload_crc(c, d_crcs, len, out.ptr + hb - 8, s);
        ZB_CUDA(cudaStreamSynchronize(s));  // also keeps hdr untouched until its copy is done
        timer.mark("sealed");
        return hb + (size_t)len;
    }
    const HostCrcs crcs(c, d_crcs, len, s);
    download(c, out.ptr + hb, d_payload, len, s);  // synchronizes, so crcs is ready too
    ZB_CUDA(cudaStreamSynchronize(s));
    timer.mark("payload");
    h.payload_crc = crcs.combined();
    write_header(h, out.ptr);
    timer.mark("header");
    return hb + (size_t)len;
}

// k_range over x (keys: kRangeWords device words, as k_range wants them). Below kRangeWaveBytes a grid-stride loop
// of up to 8 blocks per SM, 4 loads per thread (the aligned f32 form's 39 registers let an H100 SM hold 6; a grid of
// exactly the resident blocks was no faster there: 64 MB 37.0 -> 34.6 us, 16 MB 11.8 -> 14.0, NOTES 130). From it,
// f32 threads issue 8 loads and the grid is one wave of resident blocks: a 64 MiB array takes two passes of the
// whole wave instead of a third, partial one (NOTES 142).
constexpr uint64_t kRangeWaveBytes = uint64_t(32) << 20;
constexpr int kRangeLoads = 4;  // loads per thread below the wave, and of f64 in it
template <typename T>
void queue_range_kernel(const Context &c, const T *x, uint64_t n, const zb_params &p, unsigned long long *keys,
                        QuantParams *qp, cudaStream_t s) {
    const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0;
    const bool wave = sizeof(T) == 4 && n * sizeof(T) >= kRangeWaveBytes;
    constexpr int kWaveLoads = sizeof(T) == 4 ? 8 : kRangeLoads;
    auto kernel = wave ? (aligned ? k_range<T, true, kWaveLoads> : k_range<T, false, kWaveLoads>)
                       : (aligned ? k_range<T, true, kRangeLoads> : k_range<T, false, kRangeLoads>);
    const int loads = wave ? kWaveLoads : kRangeLoads;
    const uint64_t cap = wave ? (uint64_t)c.sm_count * resident_blocks(reinterpret_cast<const void *>(kernel), 256)
                              : (uint64_t)c.sm_count * 8;
    const unsigned grid = (unsigned)std::min<uint64_t>(div_up(n, 1024 * (uint64_t)loads), cap);
    launch_dependent("launch of k_range", kernel, grid, 256, 0, s, x, n, p.has_fill, p.fill_bits, keys, p.bound, qp);
}

// The REL bound's quantizer constants of x's range into *qp (k_range on the context's words, which need no memset).
template <typename T>
void queue_rel_range(const Context &c, const T *x, uint64_t n, const zb_params &p, QuantParams *qp, cudaStream_t s) {
    queue_range_kernel(c, x, n, p, c.d_range, qp, s);
}

// Queues the min and max keys of the finite non-fill values of x into scratch (kRangeWords device words; the max
// complemented), for the host to read.
template <typename T>
void launch_range(const Context &c, const T *x, uint64_t n, const zb_params &p, unsigned long long *scratch,
                  cudaStream_t s, KernelTimer &timer) {
    ZB_CUDA(cudaMemsetAsync(scratch, 0xFF, 8 * kRangeWords, s));
    timer.begin("range");
    queue_range_kernel(c, x, n, p, scratch, nullptr, s);
    timer.end();
}

// The range from keys fetched to the host: false when no value was usable.
inline bool range_of_keys(const unsigned long long *keys, double &vmin, double &vmax) {
    if (keys[0] == ~0ull) return false;
    vmin = key_to_double(keys[0]);
    vmax = key_to_double(~keys[1]);
    return true;
}

// Min and max over the finite non-fill values of x (REL): false when there is none. scratch: kRangeWords device words.
template <typename T>
bool device_range(Context &c, const T *x, uint64_t n, const zb_params &p, unsigned long long *scratch, cudaStream_t s,
                  KernelTimer &timer, double &vmin, double &vmax) {
    launch_range(c, x, n, p, scratch, s, timer);
    return range_of_keys(fetch_totals(c, scratch, 2, s), vmin, vmax);
}

// Raw passthrough of the n values (docs/FORMAT.md section 2) for header h (shape, mode, bound and eb set): from the
// host copy h_x when there is one (host API), else from the device values x with the checksum computed on the GPU.
template <typename T>
size_t write_raw(Context &c, const Header &h, const T *x, const T *h_x, uint32_t *d_crcs, const StreamTarget &out,
                 int threads, cudaStream_t s, KernelTimer &timer) {
    const size_t raw_bytes = raw_stream_bytes(h.dtype, h.shape.n);
    if (out.capacity < raw_bytes) too_small(raw_bytes);
    if (!out.on_device) return write_raw_stream(h, h_x, out.ptr, threads);
    // Device API: the same stream as write_raw_stream, with the payload checksum computed on the GPU.
    Header r = h;
    r.version = kFormatVersionV1;  // the raw layout is the same in every version
    r.predictor = 0;
    r.encoder = 0;
    r.flags = kFlagRaw;
    r.escapes = r.exceptions = r.runs = r.nonzero_code_blocks = 0;
    r.nsegments = 1;
    r.seg[0].offset = 0;
    r.seg[0].length = h.shape.n * sizeof(T);
    return finish_stream(c, r, reinterpret_cast<const uint8_t *>(x), d_crcs, out, s, timer);
}

// Tiles per block of k_gather_exceptions for k exceptions among ntiles tiles (k = 0: the count is on the device):
// as many as keep about one tile with exceptions per block, from 4 to 256. Where most tiles have exceptions (gmt_sst,
// 40 % NaN) a block's tiles come one after another, so four, not more (1 GB compression 361 -> 357 GB/s with 4, 351
// with 16; TREFHT 544 -> 559 and 563, session 19); where they are few (TREFHT at 1 GB: about 2000 in 131072 tiles)
// blocks of four tiles were mostly started to find none (31 us).
inline uint32_t gather_tiles(uint64_t ntiles, uint64_t k) {
    uint32_t per_block = 4;
    while (k && per_block < kTileThreads && 2 * (uint64_t)per_block * k <= ntiles) per_block *= 2;
    return per_block;
}

// Change words per warp of k_runs: up to 32, fewer where the words would not fill 32 warps per SM.
inline uint32_t runs_per_warp(uint64_t nwords, int sm_count) {
    const uint64_t warps = 32 * (uint64_t)std::max(sm_count, 1);
    return (uint32_t)std::min<uint64_t>(32, std::max<uint64_t>(1, div_up(nwords, warps)));
}

// The exception segments (docs/FORMAT.md section 5) from the exception mask words (one bit per value, ntiles * 64
// words, zero past n) and the per-tile counts and their exclusive scan (.z = exceptions of the tile), as k_encode
// lays them out: the values, the edge mask, the change bits, their sparse flags and counts (buffers in the
// exceptions arena). carve() and queue() set them up for k exceptions, or, with the count only on the device (d_k),
// for up to k (values and change bits only where there are some and no more); plan() does both for a known count and
// waits for the totals. write() queues the five segments at offsets the host knows, write_at() at those of a stream
// laid out on the device.
template <typename T> struct ExceptionStage {
    using U = typename FloatBits<T>::U;
    uint64_t k = 0, n = 0, nb_edge = 0, nb_change = 0, edge_nnz = 0, change_nnz = 0, runs = 0;
    U *V = nullptr;
    uint32_t *E = nullptr, *flagE = nullptr, *cntE = nullptr, *offE = nullptr;
    uint32_t *C = nullptr, *cntR = nullptr, *offR = nullptr, *flagC = nullptr, *cntC = nullptr, *offC = nullptr;
    void *temp = nullptr, *temp_edges = nullptr;  // the edges' scan has its own: it may run beside the others
    bool one_block = false;  // the stage in one launch (k_exceptions_encode_block; cntE: exceptions per flag group)
    bool tile_edges = false;  // one_block, with the edge mask and its flags made by k_encode (use_tile_edges)
    int sm_count = 1;        // the context's, for k_runs's grid

    size_t ex_scan_bytes = 0;

    // The buffers for k exceptions (the count, or, count_known false, the cap of a count on the device), in the
    // exceptions arena.
    void carve(Context &c, uint64_t n_, uint64_t k_, cudaStream_t s, bool count_known = true) {
        n = n_;
        k = k_;
        sm_count = c.sm_count;
        const uint64_t ntiles = code_tiles(n);
        nb_edge = div_up(div_up(n, 8), kBlockBytes);
        nb_change = div_up(div_up(k, 8), kBlockBytes);
        const uint64_t ng_edge = div_up(nb_edge, 32), ng_change = div_up(nb_change, 32), nw_change = 4 * nb_change;
        if (!k) return;
        one_block = n <= (count_known ? kExcEncMaxValues : kExcEncMaxValuesGraphed) && k <= kExcEncMaxExceptions &&
                    exception_block_enabled();
        ex_scan_bytes = one_block ? 0 : exclusive_sum_temp_bytes({ng_edge, nw_change, ng_change}, s);
        auto carve_ex = [&](Carver &cv) {
            V = cv.take<U>(k);
            E = cv.take<uint32_t>(ntiles * 64);
            flagE = cv.take<uint32_t>(ng_edge);
            cntE = cv.take<uint32_t>(ng_edge);
            offE = cv.take<uint32_t>(ng_edge);
            C = cv.take<uint32_t>(nw_change);
            cntR = cv.take<uint32_t>(nw_change);
            offR = cv.take<uint32_t>(nw_change);
            flagC = cv.take<uint32_t>(ng_change);
            cntC = cv.take<uint32_t>(ng_change);
            offC = cv.take<uint32_t>(ng_change);
            temp = cv.take<uint8_t>(ex_scan_bytes);
            temp_edges = cv.take<uint8_t>(ex_scan_bytes);
        };
        carve_from(c.arena[kArenaExceptions], carve_ex);
    }

    // Where k_encode made the edge mask's blocks and flag words (TileEdges) into tile_E and tile_flagE, the one-block
    // form reads those instead of its own and skips its pass over the mask (the other form makes its own).
    void use_tile_edges(uint32_t *tile_E, uint32_t *tile_flagE) {
        if (!one_block) return;
        E = tile_E;
        flagE = tile_flagE;
        tile_edges = true;
    }

    // Queues the stage (after carve). d_k: nullptr when k is the count, else the count's device word. ex_totals: 3
    // device words (stored edge blocks, stored change blocks, runs).
    // br: the edge mask on a branch of its own, beside the values and change bits (a graph's parallel nodes).
    // layout (the fast stream's, or nullptr where the caller lays out a stream of its own): run by the one-block
    // kernel after the stage, in which case queue returns true; else (false) the caller runs it after the stage.
    // tile_totals (one-block form only, else nullptr): the stage's kernel scans the tiles' counts first, into offs
    // and tile_totals (as exclusive_sum4_totals), and the count is their exceptions' total (d_k unused); else offs
    // holds that scan already.
    bool queue(const T *x, const uint32_t *mwords, const uint4 *counts, uint4 *offs, const unsigned long long *d_k,
               unsigned long long *ex_totals, GraphBranches &br, KernelTimer &timer, const FastLayout *layout = nullptr,
               unsigned long long *tile_totals = nullptr) const {
        if (!k) return false;
        const cudaStream_t s = br.main();
        const uint64_t ntiles = code_tiles(n);
        const uint64_t ng_edge = div_up(nb_edge, 32), ng_change = div_up(nb_change, 32), nw_change = 4 * nb_change;
        timer.begin("exceptions");
        if (one_block) {
            ExcEncodeArgs<U> a{n, k, nb_edge, nb_change, d_k, V, E, flagE, offE, C, offR, flagC, offC, cntE,
                               ex_totals, tile_totals ? counts : nullptr, tile_totals ? offs : nullptr,
                               ntiles, tile_totals};
            if (tile_edges) {
                a.edge_counts = counts;
                a.edge_offs = offs;
            }
            const char *what = "launch of k_exceptions_encode_block";
            if (layout) launch_dependent(what, k_exceptions_encode_block<T, FastLayout>, 1, kExcEncThreads, 0, s, x,
                                         mwords, a, *layout);
            else launch_dependent(what, k_exceptions_encode_block<T, NoTail>, 1, kExcEncThreads, 0, s, x, mwords, a,
                                  NoTail{});
            timer.end();
            return layout != nullptr;
        }
        br.fork(1);
        const cudaStream_t se = br.stream(0);
        launch_dependent("launch of k_edge_flags", k_edge_flags, grid_for(ng_edge * 32, 256), 256, 0, se,
                         reinterpret_cast<const uint4 *>(mwords), nb_edge, n, reinterpret_cast<uint4 *>(E), flagE,
                         cntE);
        size_t tbe = ex_scan_bytes;
        exclusive_sum(temp_edges, tbe, cntE, offE, ng_edge, se);
        const uint32_t per_block = gather_tiles(ntiles, d_k ? 0 : k);
        launch_dependent("launch of k_gather_exceptions", k_gather_exceptions<T>, (unsigned)div_up(ntiles, per_block),
                         kTileThreads, 0, s, x, mwords, counts, offs, ntiles, per_block, V, d_k, k);
        size_t tb;
        launch_dependent("launch of k_change_bits", k_change_bits<U>, grid_for(nw_change * 8, 256), 256, 0, s, V, k,
                         nw_change, C, cntR, d_k);
        tb = ex_scan_bytes;
        exclusive_sum(temp, tb, cntR, offR, nw_change, s);
        sparse_flags(C, nb_change, flagC, cntC, s);
        tb = ex_scan_bytes;
        exclusive_sum(temp, tb, cntC, offC, ng_change, s);
        br.join(1);
        const ScanTotal t[3] = {{offE, cntE, ng_edge, 1}, {offC, cntC, ng_change, 1}, {offR, cntR, nw_change, 1}};
        scan_totals(t, 3, ex_totals, s);
        timer.end();
        return false;
    }

    // k exceptions (known): carve, queue on s, then wait for the totals. scratch: 3 device words.
    void plan(Context &c, const T *x, const uint32_t *mwords, const uint4 *counts, uint4 *offs, uint64_t n_,
              uint64_t k_, unsigned long long *scratch, cudaStream_t s, KernelTimer &timer) {
        carve(c, n_, k_, s);
        GraphBranches serial(c, s, false);
        queue(x, mwords, counts, offs, nullptr, scratch, serial, timer);
        if (!k) return;
        const unsigned long long *tot = fetch_totals(c, scratch, 3, s);
        edge_nnz = tot[0];
        change_nnz = tot[1];
        runs = tot[2];
    }

    // The five segments (device addresses, any alignment) with the lengths of the two flag segments.
    void write(uint8_t *edge_flags, uint64_t edge_flags_len, uint8_t *edge_blocks, uint8_t *change_flags,
               uint64_t change_flags_len, uint8_t *change_blocks, uint8_t *values, cudaStream_t s) const {
        if (!k) {
            ZB_CUDA(cudaMemsetAsync(edge_flags, 0, edge_flags_len, s));
            return;
        }
        ZB_CUDA(cudaMemcpyAsync(edge_flags, flagE, edge_flags_len, cudaMemcpyDeviceToDevice, s));
        sparse_copy(E, nb_edge, edge_nnz, flagE, offE, 1, 1, edge_blocks, s);
        ZB_CUDA(cudaMemcpyAsync(change_flags, flagC, change_flags_len, cudaMemcpyDeviceToDevice, s));
        sparse_copy(C, nb_change, change_nnz, flagC, offC, 1, 1, change_blocks, s);
        const uint64_t nwords = div_up(k, 32);   // C is zero past k
        const uint32_t per_warp = runs_per_warp(nwords, sm_count);
        launch_dependent("launch of k_runs", k_runs<U>, grid_for(div_up(nwords, per_warp) * 32, 256), 256, 0, s, V,
                         nwords, per_warp, C, offR, values, nullptr);
    }

    // The five segments of a fast stream laid out on the device (k_fast_layout's words w, payload pay).
    // Each segment on a stream of its own (s0: the flags; s1: the edge and change blocks; s2: the run values).
    void write_at(uint8_t *pay, EncodeWords *w, cudaStream_t s0, cudaStream_t s1, cudaStream_t s2) const {
        const uint64_t flag_bytes = std::max(sparse_flag_bytes(div_up(n, 8)), sparse_flag_bytes(div_up(k, 8)));
        launch_dependent("launch of k_put_flags", k_put_flags, dim3(grid_for(flag_bytes, 256), 2), 256, 0, s0, w, pay,
                         flagE, flagC);
        if (!k) return;
        sparse_copy_at(E, nb_edge, flagE, offE, 1, 1, pay, &w->off[kSegEdgeBlocks], &w->len[kSegEdgeBlocks], &w->status,
                       0, s1);
        sparse_copy_at(C, nb_change, flagC, offC, 1, 1, pay, &w->off[kSegChangeBlocks], &w->len[kSegChangeBlocks],
                       &w->status, 0, s1);
        const uint64_t nwords = div_up(k, 32);   // C is zero past the count
        const uint32_t per_warp = runs_per_warp(nwords, sm_count);
        launch_dependent("launch of k_runs", k_runs<U>, grid_for(div_up(nwords, per_warp) * 32, 256), 256, 0, s2, V,
                         nwords, per_warp, C, offR, pay, w);
    }
};

// Calls on device data of up to kGraphMaxBytes raw bytes may run as a graph (see the flow above): the exception stage
// is queued for up to exception_cap(n) exceptions (with more it runs again once their count is known), and the host
// waits once, at the end.
// The exceptions a device call's first round has room for: n / 64, at least 65536, or, where the context's last call
// had a larger fraction of exceptions, a quarter more than that fraction (as a power of 2, so that graphs repeat).
inline uint64_t exception_cap(uint64_t n, double last_fraction) {
    uint64_t cap = std::max<uint64_t>(65536, n / 64);
    const double want = 1.25 * last_fraction * (double)n;
    while ((double)cap < want) cap *= 2;
    return std::min<uint64_t>(n, cap);
}

// The part of a device compression's graph key that both fast-encoder paths share: its kind (tag), value type,
// shape, parameters and buffers.
template <typename T>
GraphKey encode_call_key(uint64_t tag, const Shape &shape, const zb_params &p, const T *x, const StreamTarget &out) {
    GraphKey key;
    key.add(tag);
    key.add(sizeof(T));
    key.add(shape.n);
    for (int i = 0; i < 3; ++i) key.add(shape.dims[i]);
    key.add((uint64_t)shape.rank);
    key.add((uint64_t)p.mode);
    uint64_t bound_bits;
    std::memcpy(&bound_bits, &p.bound, 8);
    key.add(bound_bits);
    key.add((uint64_t)p.has_fill);
    key.add(p.fill_bits);
    key.add_ptr(x);
    key.add_ptr(out.ptr);
    key.add(out.capacity);
    return key;
}

}  // namespace
}  // namespace enc
}  // namespace gpu
}  // namespace zb

#include "chunk_encode.cuh"

namespace zb {
namespace gpu {
namespace enc {
namespace {

template <typename T>
size_t encode_impl(Context &c, const zb_params &p, const Shape &shape, const T *d_x_in, const T *h_x,
                   const StreamTarget &out, cudaStream_t s, KernelTimer &timer) {
    const zb_dtype dtype = sizeof(T) == 8 ? ZB_F64 : ZB_F32;
    const uint64_t n = shape.n;
    const uint64_t ntiles = code_tiles(n);
    const size_t raw_bytes = raw_stream_bytes(dtype, n);

    // Device output that can hold a raw stream (so any compressed one: a compressed stream is only written when it
    // is shorter) and segment 0, which k_encode writes before that choice; with the payload's start 4-byte aligned,
    // the header and the segments are written in place and no copy is needed.
    const size_t fast_hb = kFastHeaderBytes;
    const size_t before_choice = fast_hb + ntiles * kTileFlagBytes;
    const bool in_place = out.on_device && out.capacity >= std::max(raw_bytes, before_choice) &&
                          reinterpret_cast<uintptr_t>(out.ptr + fast_hb) % 4 == 0;

    const Dims dm = make_dims(shape);
    // Quantization and codes in one pass where the ring fits (k_quantize_encode; q then holds escaped deltas only),
    // else k_quantize and k_encode.
    const WalkPlan wp = walk_plan(dm, shape.rank, ntiles, c.sm_count, c.batch_item);
    const bool rel = p.mode == ZB_MODE_REL;
    const QuantParams qp = make_quant_params(p.bound, p.has_fill, p.fill_bits);  // ABS (REL: k_range)

    // The header with zero counts and checksums: k_fast_layout (or chunk_tail) writes it with them, the last block of
    // k_piece_crc_last adds the checksums (piece_crcs_seal_at).
    Header h;
    h.version = lorenzo_fast_version(shape);
    h.dtype = dtype;
    h.shape = shape;
    h.mode = p.mode;
    h.predictor = 1;
    h.encoder = 1;
    h.bound = p.bound;
    h.eb = rel ? 0.0 : qp.eb;
    h.nsegments = kFastSegmentCount;
    FastHeaderBytes tmpl;
    write_header(h, tmpl.b);

    // What a laid-out stream's status leaves to do: a raw-passthrough stream instead (its piece CRCs in crcs, room for
    // piece_count(raw_bytes)), or an error; true where the stream is ready to be delivered.
    auto settle = [&](const LayoutResult &got, const T *x, uint32_t *crcs, size_t &raw_len) {
        if (got.status == kLayoutRaw) {
            h.eb = rel ? got.eb : qp.eb;
            raw_len = write_raw(c, h, x, h_x, crcs, out, resolve_threads(p.threads, h.shape.n), s, timer);
            return false;
        }
        if (got.status == kLayoutTooSmall) too_small(got.stream_len);
        if (got.status != kLayoutOk) fail(ZB_ERR_INTERNAL, "fast encoder: unexpected layout status");
        return true;
    };

    // Chunk-sized device calls: five graph nodes (chunk_encode.cuh); the general path below where their exceptions
    // outnumber its lists.
    if (chunk_path_applies(c, wp, n, d_x_in != nullptr, in_place)) {
        uint32_t *crcs = nullptr;
        const LayoutResult got = encode_chunk<T>(c, p, shape, d_x_in, out, tmpl, s, timer, crcs);
        c.exception_fraction = (double)got.totals[2] / (double)n;
        if (got.status != kLayoutOverCap) {
            size_t raw_len = 0;
            return settle(got, d_x_in, crcs, raw_len) ? (size_t)got.stream_len : raw_len;
        }
    }

    // ---- main arena: input (host API), tile buffers, payload, scan temporaries
    size_t scan_bytes = 0;
    exclusive_sum4(nullptr, scan_bytes, nullptr, nullptr, ntiles, s);
    allow_walk_ring<T>(wp, shape.rank, dm);
    struct {
        T *x;
        uint32_t *q, *escbits;
        uint4 *dense;
        uint32_t *mwords;
        uint4 *counts, *offs;
        EncodeWords *w;
        uint8_t *hdr, *payload;
        uint32_t *crcs;
        void *temp;
        uint32_t *tile_E, *tile_flagE;  // k_encode's edge mask for the one-block exception stage (TileEdges)
    } b{};
    // k_encode makes the edge mask where the one-block exception stage may take it (the walk's kernel does not: the
    // word before its first tile may be its predecessor's, still being written).
    const bool tiles_may_edge = !wp.ring && n <= kExcEncMaxValues;
    auto carve = [&](Carver &cv) {
        b.x = d_x_in ? nullptr : cv.take<T>(n);
        b.q = cv.take<uint32_t>(n);
        b.dense = cv.take<uint4>(ntiles * 256);
        b.mwords = cv.take<uint32_t>(ntiles * 64);
        b.escbits = cv.take<uint32_t>(wp.ring ? ntiles * 64 : 0);
        b.counts = cv.take<uint4>(ntiles);
        b.offs = cv.take<uint4>(ntiles);
        b.w = cv.take<EncodeWords>(1);
        b.hdr = in_place ? out.ptr : cv.take<uint8_t>(fast_hb);
        b.payload = in_place ? out.ptr + fast_hb : cv.take<uint8_t>(raw_bytes);
        b.crcs = cv.take<uint32_t>(piece_count(raw_bytes));
        b.temp = cv.take<uint8_t>(scan_bytes);
        b.tile_E = cv.take<uint32_t>(tiles_may_edge ? ntiles * 64 : 0);
        b.tile_flagE = cv.take<uint32_t>(tiles_may_edge ? div_up(ntiles, (uint64_t)2) : 0);
    };
    carve_from(c.arena[kArenaMain], carve);
    timer.mark("carved");
    const T *x = d_x_in;
    if (!x) {
        upload(c, b.x, h_x, n * sizeof(T), s);
        x = b.x;
    }
    EncodeWords *w = b.w;
    uint32_t *code_flags = reinterpret_cast<uint32_t *>(b.payload);  // segment 0 sits at payload offset 0
    uint8_t *pay = b.payload;

    // ---- 1. the absolute bound: ABS as given; REL from the range, derived on the device (k_range), where
    //      k_fast_layout also writes it into the header. 2. codes, flags, masks, per-tile counts and their totals.
    //      Queued on q (the call's stream, or the stream that captures a graph of the call).
    // scan_counts false: the one-block exception stage scans the tiles' counts (queue_stream's scan_in_stage).
    // tile_edges: k_encode makes the edge mask (b.tile_E, b.tile_flagE) for that stage.
    auto queue_codes = [&](cudaStream_t q, bool scan_counts, bool tile_edges) {
        if (rel) {
            timer.begin("range");
            queue_rel_range(c, x, n, p, &w->qp, q);
            timer.end();
        }
        timer.begin(wp.ring ? "quantize+encode" : "quantize");
        if (wp.ring) {
            launch_quantize_encode<T>(wp, shape.rank, q, x, qp, rel ? &w->qp : nullptr, dm, ntiles, b.mwords,
                                      b.escbits, reinterpret_cast<int32_t *>(b.q), b.dense, code_flags, b.counts);
        } else {
            const unsigned qblocks = (unsigned)(ntiles * (kTileCodes / 1024));   // 1024 values per block of 256 threads
            const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0;
            auto quantize_kernel = rel ? (aligned ? k_quantize<T, true, true> : k_quantize<T, false, true>)
                                       : (aligned ? k_quantize<T, true, false> : k_quantize<T, false, false>);
            launch_dependent("launch of k_quantize", quantize_kernel, qblocks, 256, 0, q, x, n, qp, &w->qp, b.q,
                             b.mwords);
            timer.end();
            timer.begin("encode");
            TileEdges edges;
            if (tile_edges) edges = TileEdges{b.tile_E, reinterpret_cast<uint16_t *>(b.tile_flagE), n, ntiles};
            launch_encode(shape.rank, ntiles, q, b.q, b.mwords, dm, b.dense, code_flags, b.counts, edges);
        }
        if (scan_counts) {
            size_t tb = scan_bytes;
            exclusive_sum4_totals(b.temp, tb, b.counts, b.offs, ntiles, w->totals, q);
        }
        timer.end();
    };

    // ---- 3. exceptions (ex carved for up to kcap; known: the host has the totals tot, kcap is their count), the
    //      layout, the segments at their final offsets, the checksums, and the layout words to the host.
    auto queue_stream = [&](cudaStream_t q, bool capturing, const ExceptionStage<T> &ex, uint64_t kcap, bool known,
                            const unsigned long long *tot, bool scan_in_stage) {
        GraphBranches br(c, q, capturing);
        LayoutResult *host_result = static_cast<LayoutResult *>(result_mapping(c, q));
        const FastLayout layout{w, n, (uint32_t)sizeof(T), kcap, raw_bytes, out.capacity, rel, tmpl, b.hdr, b.crcs,
                                host_result};
        if (!ex.queue(x, b.mwords, b.counts, b.offs, known ? nullptr : &w->totals[2], w->ex_totals, br, timer,
                      &layout, scan_in_stage ? w->totals : nullptr)) {
            launch_dependent("launch of k_fast_layout", k_fast_layout, 1, 64, 0, q, layout);
        }
        timer.begin("segments");
        // The segments are disjoint: code blocks here, the exception segments and the escapes beside them (at 64 MB
        // the escapes' 7.5 us kernel ran after the code blocks' 14.6 us copy; NOTES 130).
        br.fork(4);
        ex.write_at(pay, w, br.stream(0), br.stream(1), br.stream(2));
        const uint64_t nblocks = ntiles * 256;
        uint8_t *blocks_at = pay + ntiles * kTileFlagBytes;  // segment 1 follows segment 0
        sparse_copy_at(reinterpret_cast<const uint32_t *>(b.dense), nblocks, code_flags,
                       reinterpret_cast<const uint32_t *>(b.offs), 4, kTileFlagWords, pay, &w->off[kSegCodeBlocks],
                       &w->len[kSegCodeBlocks], &w->status, known ? sparse_copy_form(nblocks, tot[0], blocks_at) : 0,
                       q);
        const cudaStream_t se = br.stream(3);
        if ((!known || tot[1]) && wp.ring) {
            k_escapes_kept<<<(unsigned)ntiles, kTileThreads, 0, se>>>(b.escbits, reinterpret_cast<const int32_t *>(b.q),
                                                                       b.counts, b.offs, pay, w);
            ZB_LAUNCHED("k_escapes_kept");
        } else if (!known || tot[1]) {
            launch_escapes(shape.rank, ntiles, se, b.q, dm, b.counts, b.offs, pay, w);
        }
        br.join(4);
        timer.end();
        timer.begin("crc");
        const uint64_t likely = known ? before_choice + 16 * tot[0] + 4 * tot[1] : raw_bytes / 8;
        piece_crcs_seal_at(c, pay, raw_bytes, likely, &w->payload_len, &w->status, b.crcs, &w->crc_ticket,
                           &w->crc_header, b.hdr, fast_hb, q);
        timer.end();
        if (!host_result) result_to_host(c, &w->result, sizeof(LayoutResult), q);
    };
    auto wait_for_words = [&] {
        ZB_CUDA(cudaStreamSynchronize(s));
        timer.mark("laid out");
        LayoutResult got;
        std::memcpy(&got, c.host_small, sizeof got);
        return got;
    };
    // With the totals on the host: the exception stage sized for exactly their count. tile_edges: k_encode made the
    // edge mask (queue_codes).
    auto with_known_totals = [&](const unsigned long long *tot, bool tile_edges) {
        const unsigned long long known[3] = {tot[0], tot[1], tot[2]};
        ExceptionStage<T> ex;
        ex.carve(c, n, known[2], s);
        if (tile_edges) ex.use_tile_edges(b.tile_E, b.tile_flagE);
        queue_stream(s, false, ex, known[2], true, known, false);
        return wait_for_words();
    };

    // A device call that repeats (same buffers, shape and parameters) runs as one graph, with the exception stage
    // queued for up to kcap exceptions and one wait; other calls wait for the totals first (the exception stage is
    // then sized exactly and skipped where there are none, which costs a dozen fewer launches).
    bool graphed = false;
    LayoutResult got;
    if (d_x_in && raw_bytes <= kGraphMaxBytes && !timer.records() && graphs_usable(c)) {
        const uint64_t kcap = exception_cap(n, c.exception_fraction);
        ExceptionStage<T> ex;
        ex.carve(c, n, kcap, s, false);
        const bool tile_edges = tiles_may_edge && ex.one_block;
        if (tile_edges) ex.use_tile_edges(b.tile_E, b.tile_flagE);
        GraphKey key = encode_call_key<T>(0x66656e63, shape, p, x, out);  // "fenc"
        key.add_ptr(b.q);   // the main arena (every buffer's place follows from it and n)
        key.add_ptr(ex.V);  // the exceptions arena
        key.add(c.arena[kArenaMain].allocations());
        key.add(c.arena[kArenaExceptions].allocations());
        key.add(kcap);
        key.add((uint64_t)ex.one_block);  // ZBOUND_GPU_EXCEPTION_BLOCK may change between calls
        // The one-block exception stage scans the tiles' counts itself: a node less on the call's path.
        graphed = queue_as_graph(c, key, s, [&](cudaStream_t q) {
            queue_codes(q, !ex.one_block, tile_edges);
            queue_stream(q, true, ex, kcap, false, nullptr, ex.one_block);
        });
        if (graphed) {
            timer.mark("graph queued");
            got = wait_for_words();
            if (got.status == kLayoutOverCap) got = with_known_totals(got.totals, tile_edges);  // over kcap
        }
    }
    if (!graphed) {
        const bool tile_edges = tiles_may_edge && exception_block_enabled();
        queue_codes(s, true, tile_edges);
        got = with_known_totals(fetch_totals(c, w->totals, 3, s), tile_edges);
    }
    if (d_x_in) c.exception_fraction = n ? (double)got.totals[2] / (double)n : 0.0;

    // ---- 5. the raw-passthrough stream instead, or the stream delivered
    size_t raw_len = 0;
    if (!settle(got, x, b.crcs, raw_len)) return raw_len;
    if (!out.on_device) {
        download(c, out.ptr, b.hdr, fast_hb, s);
        download(c, out.ptr + fast_hb, pay, got.payload_len, s);
    } else if (!in_place) {
        ZB_CUDA(cudaMemcpyAsync(out.ptr, b.hdr, fast_hb, cudaMemcpyDeviceToDevice, s));
        ZB_CUDA(cudaMemcpyAsync(out.ptr + fast_hb, pay, got.payload_len, cudaMemcpyDeviceToDevice, s));
        ZB_CUDA(cudaStreamSynchronize(s));
    }
    timer.mark("delivered");
    return (size_t)got.stream_len;
}

}  // namespace
}  // namespace enc

template <typename T>
size_t encode(Context &c, const zb_params &p, const Shape &shape, const T *d_x, const T *h_x, const StreamTarget &out,
              cudaStream_t s, KernelTimer &timer) {
    return enc::encode_impl<T>(c, p, shape, d_x, h_x, out, s, timer);
}

}  // namespace gpu
}  // namespace zb
