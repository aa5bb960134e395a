// The format-v2-layout pipelines on the GPU (docs/FORMAT.md sections 8-11): the interp predictor (writes format v3,
// reads v2 and v3) or the whole-array Lorenzo predictor (format v2), with the fast or the ratio encoder (v4 when the
// ratio encoder writes run tokens). The same bytes as core/src/pipeline_v2.cpp (+ interp_cpu.cpp), templated on the
// value type; interp_f32.cu / interp_f64.cu instantiate it. The float arithmetic is the host+device code of
// zb_interp.h / zb_quant.h (explicit _rn double operations), so every reconstructed value, and with it every code,
// equals the CPU's.
//
// The two predictors share one driver. The interp predictor's anchors (points whose coordinates are multiples of 8)
// are dual-quantized and coded with an integer 3D Lorenzo on their lattice; the Lorenzo predictor is that Lorenzo on
// every point (at the stream's bound eb, the whole array one segment), which the fast pipeline's kernels compute
// (encode.cuh's k_quantize and k_codes16, decode.cuh's LorenzoInverse), with no interpolation passes after it.
//
// Encode (device memory throughout; "sync" = the host waits for the stream):
//   k_range (interp always: interp_tune needs the finite range for alpha; Lorenzo for REL only) -> sync
//   interp: zb::interp_tune on the host from sample points (from the host copy; for a device array the points
//     zb::interp_tune_points lists are gathered on the device and copied, host_points.cuh)
//   interp: k_anchor_quant: dual-quant of the lattice points -> lattice integers, recon, mask bits; k_anchor_delta:
//     integer Lorenzo on the lattice -> 16-bit codes (escaped: 0x8000 / 0), escape flags; CUB scan. Lorenzo:
//     k_quantize (integers, mask words), k_codes16 (16-bit codes of whole tiles, escapes and exceptions per tile)
//   interp, per level (stride 4, 2, 1) and pass (dim order[0..2]): k_pass_encode, one thread per point of the pass:
//     zb::interp_predict from the reconstruction, zb::quantize_residual -> code, recon, exception mask bit
//   fast: k_code_tiles: per 2048-code tile bitshuffle (8 codes per thread, 8x8 bit transposes in registers) +
//     zero-block flags written straight into segment 1 + per-tile counts; ratio: per-tile exception counts and the
//     ratio encoder's plan; CUB scan -> sync (non-zero blocks, exceptions, escapes)
//   exceptions (encode.cuh's ExceptionStage) -> sync; v2 layout (core's v2_layout), raw-passthrough decision
//   segments at their final offsets: parameters, code blocks (sparse copy) or the ratio segments, escapes (deltas
//   recomputed from the integers: enc::k_escapes for Lorenzo, k_anchor_escapes for the anchors), exceptions; CRC
//   pieces; header on the host (core's write_header) with the combined payload checksum.
// Decode: parameters read on the host; codes (fast: per tile expand + un-bitshuffle, decode.cuh's helpers; ratio:
// ratio_decode). Lorenzo: the fast decoder's inverse on the code array (decode.cuh's LorenzoInverse: x-prefix in
// tiles, escapes patched, the y and z prefix fused with dequantization), then the exceptions' values over it.
// Interp: exceptions -> values and mask (decode.cuh's ExceptionDecoder); the anchors' lattice: codes -> deltas
// (escapes patched in lattice order) -> 3D prefix sums on the lattice (decode.cuh's line scans) -> values; then the
// passes in order. The decoder checks everything the CPU decoder checks (code blocks, padding, escapes, codes out
// of range, exceptions) and answers ZB_ERR_CORRUPT like it.
#pragma once
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include "decode.cuh"
#include "encode.cuh"
#include "host_points.cuh"
#include "interp_gpu.h"
#include "ratio_gpu.cuh"
#include "zb_bytes.h"
#include "zb_interp.h"

namespace zb {
namespace gpu {
namespace interp {
namespace {

constexpr uint32_t kErrInterpCode = 1u << 16;  // a non-anchor code is the escape code
constexpr int64_t kAnchor = 1 << kInterpAnchorLog2;
constexpr uint64_t kMaxParamBytes = kV2CommonParamBytes + kInterpParamBytes;
// Segment 0: the radius and the reserved word, then the interp parameters (Lorenzo has none).
inline uint64_t param_bytes(uint8_t predictor) {
    return kV2CommonParamBytes + (predictor == kPredInterp ? kInterpParamBytes : 0);
}
// v2-layout segments: 0 parameters, then the encoder's (fast: 1 code flags, 2 code blocks; ratio: 1..4), then the
// escapes and the 5 exception segments.
enum { kSegParams = 0, kSegFlags, kSegBlocks };
constexpr int kMaxSegCount = 1 + kRatioSegmentCount + 1 + 5;
// The encoder's scratch words: the range's (enc::kRangeWords), then three totals, then three exception totals.
constexpr int kTotalsAt = enc::kRangeWords, kExcTotalsAt = kTotalsAt + 3;

inline CodeStyle code_style(uint8_t encoder) {
    return encoder == kEncRatio ? CodeStyle{kRatioRadius, 1} : CodeStyle{kFastRadius, 0};
}
struct SegIndex {   // where the escapes and the exceptions sit for an encoder
    int esc, exc0, count;
};
inline SegIndex seg_index(uint8_t encoder) {
    const int e = encoder == kEncRatio ? kRatioSegmentCount : kFastCodeSegmentCount;
    return {1 + e, 2 + e, 2 + e + 5};
}

// ---- geometry ----------------------------------------------------------------------------------------------------

// The lattice of the 3D view that is dual-quantized and Lorenzo-coded: lattice point a = (az, ay, ax) sits at
// (st az, st ay, st ax), with stride st = 8 for the interp predictor's anchors and 1 for the Lorenzo predictor (the
// lattice is then the array itself, a = the linear index).
struct Lattice {
    int64_t d[3];   // the 3D view's dims
    int64_t L[3];   // lattice dims
    int64_t st;     // stride
    uint64_t n;     // lattice points
    int pass_order; // codes in pass order (format v3): the anchors' codes are codes[0 .. n); else at their index
    FastDiv div2, div1;
};

inline Lattice make_lattice(const Shape &s, InterpCodeOrder order, int64_t stride) {
    Lattice g;
    view3(s, g.d);
    g.st = stride;
    g.pass_order = order == InterpCodeOrder::kPass;
    for (int k = 0; k < 3; ++k) g.L[k] = (g.d[k] - 1) / stride + 1;
    g.n = (uint64_t)(g.L[0] * g.L[1] * g.L[2]);
    g.div2 = FastDiv((uint64_t)g.L[2]);
    g.div1 = FastDiv((uint64_t)g.L[1]);
    return g;
}

__device__ __forceinline__ int64_t lattice_point(const Lattice &g, uint64_t a, int64_t &az, int64_t &ay,
                                                 int64_t &ax) {
    const uint64_t r = g.div2.div(a);
    ax = (int64_t)(a - r * (uint64_t)g.L[2]);
    const uint64_t z = g.div1.div(r);
    ay = (int64_t)(r - z * (uint64_t)g.L[1]);
    az = (int64_t)z;
    return ((az * g.st) * g.d[1] + ay * g.st) * g.d[2] + ax * g.st;
}

// The 3D Lorenzo delta of lattice point (az, ay, ax) from the lattice integers (0 outside the lattice).
__device__ __forceinline__ int32_t lattice_delta(const Lattice &g, const uint32_t *__restrict__ qlat, int64_t az,
                                                 int64_t ay, int64_t ax) {
    auto qat = [&](int64_t z, int64_t y, int64_t xx) -> uint32_t {
        return (z < 0 || y < 0 || xx < 0) ? 0u : qlat[(z * g.L[1] + y) * g.L[2] + xx];
    };
    return lorenzo_delta<3>(az, ay, ax, qat);
}

// One pass (interp_cpu.cpp's make_pass): along dim `dim` the odd multiples of s, along earlier dims of the order
// multiples of s, along later dims multiples of 2s. Threads enumerate its points x fastest.
struct PassGeo {
    int64_t d[3], start[3], step[3], count[3];
    int64_t s, sd;   // stride of the level; linear distance between neighbours along dim
    int64_t base;    // codes in pass order (format v3): point tid's code is codes[base + tid]; -1: at its index
    uint64_t npts;
    int dim, natural;
    FastDiv div2, div1;
};

inline PassGeo make_pass_geo(const InterpParams &ip, const int64_t d[3], int64_t s, int i, int64_t base) {
    PassGeo g;
    g.base = base;
    g.dim = ip.order[i];
    for (int j = 0; j < 3; ++j) {
        const int dj = ip.order[j];
        g.start[dj] = j == i ? s : 0;
        g.step[dj] = j < i ? s : 2 * s;
    }
    for (int k = 0; k < 3; ++k) {
        g.d[k] = d[k];
        g.count[k] = d[k] > g.start[k] ? (d[k] - 1 - g.start[k]) / g.step[k] + 1 : 0;
    }
    g.s = s;
    g.sd = g.dim == 0 ? d[1] * d[2] : (g.dim == 1 ? d[2] : 1);
    g.npts = (uint64_t)(g.count[0] * g.count[1] * g.count[2]);
    g.natural = ip.natural[g.dim];
    g.div2 = FastDiv(g.count[2] > 0 ? (uint64_t)g.count[2] : 1);
    g.div1 = FastDiv(g.count[1] > 0 ? (uint64_t)g.count[1] : 1);
    return g;
}

// Linear index of the pass's point number tid and its coordinate along the pass dim.
__device__ __forceinline__ int64_t pass_point(const PassGeo &g, uint64_t tid, int64_t &c) {
    const uint64_t r = g.div2.div(tid);
    const int64_t ix = (int64_t)(tid - r * (uint64_t)g.count[2]);
    const uint64_t iz = g.div1.div(r);
    const int64_t iy = (int64_t)(r - iz * (uint64_t)g.count[1]);
    const int64_t z = g.start[0] + (int64_t)iz * g.step[0];
    const int64_t y = g.start[1] + iy * g.step[1];
    const int64_t x = g.start[2] + ix * g.step[2];
    c = g.dim == 0 ? z : (g.dim == 1 ? y : x);
    return (z * g.d[1] + y) * g.d[2] + x;
}

__device__ __forceinline__ uint64_t code_pos(const PassGeo &g, uint64_t tid, int64_t idx) {
    return g.base >= 0 ? (uint64_t)g.base + tid : (uint64_t)idx;
}

// Walks the passes in the order the encoder runs them (levels stride 4, 2, 1; per level dims order[0..2]) and
// gives each (level l, pass i) its code base: nlat + the points of the passes before it in pass order, -1 in index
// order.
template <typename F> void for_each_pass(const InterpParams &ip, const Lattice &lat, F f) {
    int64_t base = (int64_t)lat.n;
    for (int l = kInterpLevels - 1; l >= 0; --l)
        for (int i = 0; i < 3; ++i) {
            const PassGeo g = make_pass_geo(ip, lat.d, (int64_t)1 << l, i, lat.pass_order ? base : -1);
            f(l, i, g);
            base += (int64_t)g.npts;
        }
}

// zb::interp_predict along the pass dim from the reconstructed values (interp_cpu.cpp's predict_at).
template <typename T>
__device__ __forceinline__ double predict(const PassGeo &g, const T *rec, int64_t idx, int64_t c) {
    const T *line = rec + (idx - c * g.sd);
    const int64_t sd = g.sd;
    return interp_predict(c, g.s, g.d[g.dim], g.natural != 0, [&](int64_t k) { return (double)line[k * sd]; });
}

__device__ __forceinline__ bool masked(const uint32_t *M, int64_t i) {
    return M && ((M[(uint64_t)i >> 5] >> (i & 31)) & 1u);
}

// ---- encoder kernels ---------------------------------------------------------------------------------------------

template <typename T>
__global__ void __launch_bounds__(256)
k_anchor_quant(Lattice g, const T *__restrict__ x, QuantParams qa, uint32_t *__restrict__ qlat, T *__restrict__ rec,
               uint32_t *__restrict__ mwords) {
    const uint64_t a = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (a >= g.n) return;
    int64_t az, ay, ax;
    const int64_t i = lattice_point(g, a, az, ay, ax);
    const T v = x[i];
    int32_t q;
    const bool regular = quantize<T>(v, qa, q);
    qlat[a] = (uint32_t)q;
    rec[i] = regular ? dequantize<T>(q, qa.twoeb) : v;   // the passes predict from it
    if (!regular) atomicOr(&mwords[(uint64_t)i >> 5], 1u << (i & 31));
}

// The lattice point's 3D Lorenzo delta on the lattice (0 outside); |d| >= radius is escaped.
__global__ void __launch_bounds__(256)
k_anchor_delta(Lattice g, CodeStyle cs, const uint32_t *__restrict__ qlat, uint16_t *__restrict__ codes,
               uint32_t *__restrict__ esc) {
    const uint64_t a = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (a >= g.n) return;
    int64_t az, ay, ax;
    const int64_t i = lattice_point(g, a, az, ay, ax);
    const int32_t d = lattice_delta(g, qlat, az, ay, ax);
    const bool escaped = cs.escaped(d);
    codes[g.pass_order ? a : (uint64_t)i] = escaped ? cs.escape() : cs.put(d);
    esc[a] = escaped ? 1u : 0u;
}

template <typename T>
__global__ void __launch_bounds__(256)
k_pass_encode(PassGeo g, CodeStyle cs, const T *__restrict__ x, T *rec, uint16_t *__restrict__ codes,
              uint32_t *__restrict__ mwords, double twoe, double recip, double eb, int has_fill, uint64_t fill_bits) {
    const uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= g.npts) return;
    int64_t c;
    const int64_t idx = pass_point(g, tid, c);
    const double p = predict(g, rec, idx, c);
    int32_t q;
    T r;
    const bool regular = quantize_residual<T>(x[idx], p, twoe, recip, eb, cs.radius, has_fill, fill_bits, q, r);
    codes[code_pos(g, tid, idx)] = cs.put(q);  // |q| < radius; q = 0 for an exception
    rec[idx] = r;
    if (!regular) atomicOr(&mwords[(uint64_t)idx >> 5], 1u << (idx & 31));
}

// One block of 256 threads per tile of 2048 codes: thread j takes the codes 8j .. 8j+7 (one 16-byte load) and
// store_tile writes the flags (segment 1 of the payload), the non-zero blocks and counts[tile] = {non-zero blocks,
// 0, exceptions, 0}, laid out as encode.cuh's k_encode.
__global__ void __launch_bounds__(kTileThreads)
k_code_tiles(const uint16_t *__restrict__ codes, const uint32_t *__restrict__ mwords, uint4 *__restrict__ dense,
             uint32_t *__restrict__ flags, uint4 *__restrict__ counts) {
    const uint64_t t = blockIdx.x;
    const uint4 v = reinterpret_cast<const uint4 *>(codes + t * kTileCodes)[threadIdx.x];
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
    store_tile(w, 0, tile_exception_share(mwords, t), t, dense, flags, counts);
}

// The ratio encoder's stand-in for k_code_tiles' counts: counts[tile] = {0, 0, exceptions in the tile, 0}.
__global__ void __launch_bounds__(256)
k_tile_exceptions(const uint32_t *__restrict__ mwords, uint64_t ntiles, uint4 *__restrict__ counts) {
    const uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= ntiles) return;
    const uint4 *w = reinterpret_cast<const uint4 *>(mwords + t * 64);   // 64 mask words per tile of 2048 codes
    uint32_t e = 0;
#pragma unroll 4
    for (int k = 0; k < 16; ++k) {
        const uint4 v = w[k];
        e += popc16(v);
    }
    counts[t] = make_uint4(0, 0, e, 0);
}

// Escaped lattice deltas in lattice (= index) order, recomputed from the lattice integers.
__global__ void __launch_bounds__(256)
k_anchor_escapes(Lattice g, const uint32_t *__restrict__ esc, const uint32_t *__restrict__ off,
                 const uint32_t *__restrict__ qlat, int32_t *__restrict__ out) {
    const uint64_t a = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (a >= g.n || !esc[a]) return;
    int64_t az, ay, ax;
    (void)lattice_point(g, a, az, ay, ax);
    out[off[a]] = lattice_delta(g, qlat, az, ay, ax);
}

// Segment 0 (the parameters, len bytes) from the host, passed by value.
struct ParamBlob {
    uint8_t b[kMaxParamBytes];
    uint32_t len;
};
__global__ void k_put_params(ParamBlob p, uint8_t *__restrict__ dst) {
    if (threadIdx.x < p.len) dst[threadIdx.x] = p.b[threadIdx.x];
}

// ---- decoder kernels ---------------------------------------------------------------------------------------------

// Expands one tile's stored blocks and un-bitshuffles them into 16-bit codes; the padding codes of the last tile
// must be zero (decode.cuh's k_decode without the prefix sum).
__global__ void __launch_bounds__(kTileThreads)
k_decode_codes(const uint32_t *__restrict__ flags, const uint4 *__restrict__ blocks, uint64_t nnz,
               const uint32_t *__restrict__ cnt, const uint32_t *__restrict__ off, uint64_t ntiles, uint64_t n,
               uint16_t *__restrict__ codes, uint32_t *__restrict__ err) {
    __shared__ uint4 tile4[kTileWords / 4];
    const uint64_t t = blockIdx.x;
    const int j = threadIdx.x;
    if (j == 0 && t == ntiles - 1 && (uint64_t)off[t] + cnt[t] != nnz) set_error(err, kErrCodeBlocks);
    dec::load_tile(tile4, flags, blocks, nnz, off[t], t, err);
    __syncthreads();
    uint32_t c[8];
    dec::unshuffle8(reinterpret_cast<const uint32_t *>(tile4), j, c);
    const uint64_t e = t * kTileCodes + 8 * (uint64_t)j;
    if (e + 8 <= n) {
        *reinterpret_cast<uint4 *>(codes + e) =
            make_uint4(c[0] | (c[1] << 16), c[2] | (c[3] << 16), c[4] | (c[5] << 16), c[6] | (c[7] << 16));
    } else {
#pragma unroll
        for (int k = 0; k < 8; ++k) {
            if (e + k < n) codes[e + k] = (uint16_t)c[k];
            else if (c[k]) set_error(err, kErrPadding);
        }
    }
}

// Anchor codes -> lattice deltas (escaped ones 0 for now, flagged).
__global__ void __launch_bounds__(256)
k_anchor_read(Lattice g, CodeStyle cs, const uint16_t *__restrict__ codes, uint32_t *__restrict__ qlat,
              uint32_t *__restrict__ esc) {
    const uint64_t a = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (a >= g.n) return;
    int64_t az, ay, ax;
    const int64_t i = lattice_point(g, a, az, ay, ax);
    const uint16_t c = codes[g.pass_order ? a : (uint64_t)i];
    const bool escaped = c == cs.escape();
    esc[a] = escaped ? 1u : 0u;
    qlat[a] = escaped ? 0u : (uint32_t)cs.get(c);
}

__global__ void k_anchor_patch(uint64_t nlat, const uint32_t *__restrict__ esc, const uint32_t *__restrict__ off,
                               const int32_t *__restrict__ vals, uint64_t nesc, uint32_t *__restrict__ qlat,
                               uint32_t *__restrict__ err) {
    const uint64_t a = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (a >= nlat || !esc[a]) return;
    const uint64_t j = off[a];
    if (j < nesc) qlat[a] = (uint32_t)vals[j];
    else set_error(err, kErrEscapes);
}

template <typename T>
__global__ void __launch_bounds__(256)
k_anchor_values(Lattice g, const uint32_t *__restrict__ qlat, const uint32_t *__restrict__ M, double twoa,
                T *__restrict__ out) {
    const uint64_t a = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (a >= g.n) return;
    int64_t az, ay, ax;
    const int64_t i = lattice_point(g, a, az, ay, ax);
    if (!masked(M, i)) out[i] = dequantize<T>((int32_t)qlat[a], twoa);
}

template <typename T>
__global__ void __launch_bounds__(256)
k_pass_decode(PassGeo g, CodeStyle cs, T *out, const uint16_t *__restrict__ codes, const uint32_t *__restrict__ M,
              double twoe, uint32_t *__restrict__ err) {
    const uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= g.npts) return;
    int64_t c;
    const int64_t idx = pass_point(g, tid, c);
    const uint16_t code = codes[code_pos(g, tid, idx)];
    if (code == cs.escape()) {  // only anchors are escaped (checked for exceptions too, as the CPU does)
        set_error(err, kErrInterpCode);
        return;
    }
    if (masked(M, idx)) return;
    out[idx] = dequantize_residual<T>(predict(g, out, idx, c), cs.get(code), twoe);
}

// ---- host helpers ------------------------------------------------------------------------------------------------

const char *const kLevelNames[kInterpLevels] = {"interp s1", "interp s2", "interp s4"};

template <typename T>
void launch_pass_encode(const PassGeo &g, CodeStyle cs, const T *x, T *rec, uint16_t *codes, uint32_t *mwords,
                        double twoe, double recip, double eb, const zb_params &p, cudaStream_t s) {
    if (!g.npts) return;
    k_pass_encode<T><<<grid_for(g.npts, 256), 256, 0, s>>>(g, cs, x, rec, codes, mwords, twoe, recip, eb, p.has_fill,
                                                            p.fill_bits);
    ZB_LAUNCHED("k_pass_encode");
}

// The scan along x (rows of consecutive integers, Lines with inner = 1): one warp per segment of a row, reading 32
// consecutive words at a time (one thread per row would read 32 rows' words per load). Sums and carries as
// decode.cuh's k_segment_sums / k_segment_apply (inner = 1).
__global__ void __launch_bounds__(256) k_row_sums(const uint32_t *__restrict__ q, dec::Lines a,
                                                  uint32_t *__restrict__ sums) {
    const uint64_t w = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (w >= a.outer * a.nseg) return;   // whole warps
    const uint64_t o = a.d_nseg.div(w), sg = w - o * a.nseg;
    const uint64_t l0 = sg * a.S, l1 = min(a.L, l0 + a.S);
    const uint32_t *row = q + o * a.L;
    uint32_t acc = 0;
    for (uint64_t l = l0 + lane; l < l1; l += 32) acc += row[l];
    acc = __reduce_add_sync(kFullMask, acc);
    if (lane == 0) sums[w] = acc;
}

__global__ void __launch_bounds__(256) k_row_apply(uint32_t *__restrict__ q, dec::Lines a,
                                                   const uint32_t *__restrict__ carries) {
    const uint64_t w = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (w >= a.outer * a.nseg) return;
    const uint64_t o = a.d_nseg.div(w), sg = w - o * a.nseg;
    const uint64_t l0 = sg * a.S, l1 = min(a.L, l0 + a.S);
    uint32_t *row = q + o * a.L;
    uint32_t carry = a.nseg > 1 ? carries[w] : 0u;
    for (uint64_t base = l0; base < l1; base += 32) {
        const uint64_t l = base + lane;
        uint32_t v = l < l1 ? row[l] : 0u;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            const uint32_t u = __shfl_up_sync(kFullMask, v, d);
            if (lane >= d) v += u;
        }
        if (l < l1) row[l] = carry + v;
        carry += __shfl_sync(kFullMask, v, 31);
    }
}

// In-place 3D inclusive prefix sum (mod 2^32) of the lattice integers: along x (warp-per-segment row scans), then y,
// then z (decode.cuh's segmented line scans). sums: lattice_sums_needed() words.
inline void lattice_lines(const Lattice &g, uint64_t target, dec::Lines out[3]) {
    const uint64_t L0 = (uint64_t)g.L[0], L1 = (uint64_t)g.L[1], L2 = (uint64_t)g.L[2];
    out[0] = dec::make_lines(L0 * L1, L2, 1, div_up(target, 32));   // a warp per segment
    out[1] = dec::make_lines(L0, L1, L2, target);
    out[2] = dec::make_lines(1, L0, L1 * L2, target);
}
inline uint64_t lattice_sums_needed(const dec::Lines ls[3]) {
    uint64_t m = 0;
    for (int k = 0; k < 3; ++k)
        if (ls[k].nseg > 1) m = std::max(m, ls[k].outer * ls[k].inner * ls[k].nseg);
    return m;
}
inline void lattice_prefix(uint32_t *q, const dec::Lines ls[3], uint32_t *sums, cudaStream_t s) {
    for (int k = 0; k < 3; ++k) {
        const dec::Lines &a = ls[k];
        if (a.L <= 1) continue;
        if (k == 0) {   // rows: warps
            const unsigned grid = grid_for(a.outer * a.nseg * 32, 256);
            if (a.nseg > 1) {
                k_row_sums<<<grid, 256, 0, s>>>(q, a, sums);
                ZB_LAUNCHED("k_row_sums");
                dec::launch_line_scan(sums, a.outer, a.nseg, s);
            }
            k_row_apply<<<grid, 256, 0, s>>>(q, a, sums);
            ZB_LAUNCHED("k_row_apply");
            continue;
        }
        const uint64_t threads = a.outer * a.nseg * a.inner;
        const unsigned grid = grid_for(threads, 256);
        if (a.nseg > 1) {
            dec::k_segment_sums<false><<<grid, 256, 0, s>>>(q, nullptr, a, sums);
            ZB_LAUNCHED("k_segment_sums");
            dec::launch_line_scan(sums, a.outer * a.inner, a.nseg, s);
        }
        dec::k_segment_apply<float, false, false><<<grid, 256, 0, s>>>(q, nullptr, a, sums, nullptr, 0.0);
        ZB_LAUNCHED("k_segment_apply");
    }
}

inline double host_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// zb::interp_tune on the host: from h_x when the caller has a host copy, else from the sample points it reads
// (zb::interp_tune_points) gathered from the device array x.
template <typename T>
InterpParams tune_on_host(Context &c, const Shape &shape, const T *x, const T *h_x, double eb, double range,
                          const zb_params &p, uint8_t encoder, cudaStream_t s) {
    const double t_tune = host_seconds();
    std::unique_ptr<T[], points::FreeDeleter> host_copy;
    const T *hx = h_x;
    if (!hx) {
        std::vector<uint64_t> idx;
        interp_tune_points(shape, idx);
        host_copy = points::host_points<T>(c, x, shape.n, std::move(idx), s);
        hx = host_copy.get();
    }
    // The alpha tuning's sample compressions on the host's threads (the choice does not depend on their number).
    const InterpParams ip =
        interp_tune(hx, shape, eb, range, p.has_fill, p.fill_bits, encoder, true, resolve_threads(p.threads, shape.n));
    static const bool print_timing = std::getenv("ZBOUND_GPU_TIMING") != nullptr;
    if (print_timing)
        std::fprintf(stderr, "zbound gpu timing: interp tune on the host %.3f ms%s\n", (host_seconds() - t_tune) * 1e3,
                     h_x ? "" : " (sample points copied from the device)");
    return ip;
}

// ---- encoder driver ----------------------------------------------------------------------------------------------

template <typename T>
size_t encode_impl(Context &c, const zb_params &p, const Shape &shape, const T *d_x_in, const T *h_x,
                   const StreamTarget &out, cudaStream_t s, KernelTimer &timer) {
    const zb_dtype dtype = sizeof(T) == 8 ? ZB_F64 : ZB_F32;
    const uint64_t n = shape.n;
    const uint64_t ntiles = code_tiles(n);
    const size_t raw_bytes = raw_stream_bytes(dtype, n);
    const bool lorenzo = p.predictor == ZB_PRED_LORENZO;   // the caller resolved auto
    // Interp: the anchors, codes in pass order (format v3). Lorenzo: every point, codes in index order (format v2).
    // Lorenzo runs the fast encoder's quantization and its Lorenzo deltas (one segment) as 16-bit codes
    // (enc::k_quantize, enc::k_codes16: no lattice); the v2 encoder runs Lorenzo only with the ratio encoder (the fast
    // one is format v1 or v6, encode.cuh).
    if (lorenzo && p.encoder != ZB_ENC_RATIO) fail(ZB_ERR_INTERNAL, "v2 encoder: Lorenzo runs with the ratio encoder");
    const Lattice lat = lorenzo ? Lattice{} : make_lattice(shape, InterpCodeOrder::kPass, kAnchor);
    const uint64_t nlat = lat.n;
    const Dims dm = enc::make_dims(shape, lorenzo_one_segment(shape));

    const size_t scan_bytes = std::max(exclusive_sum4_temp_bytes(ntiles, s), exclusive_sum_temp_bytes({nlat}, s));
    struct {
        T *x, *rec;
        uint16_t *codes;
        uint32_t *mwords;
        uint4 *dense, *counts, *offs;
        uint32_t *qlat, *esc, *esc_off;
        unsigned long long *scratch;  // the range's words, then kTotalsAt: totals, kExcTotalsAt: exception totals
        uint8_t *payload;
        uint32_t *crcs;
        void *temp;
    } b{};
    auto carve = [&](Carver &cv) {
        b.x = d_x_in ? nullptr : cv.take<T>(n);
        b.rec = cv.take<T>(lorenzo ? 0 : n);   // interp: the reconstruction the passes predict from
        b.codes = cv.take<uint16_t>(ntiles * kTileCodes);
        b.mwords = cv.take<uint32_t>(ntiles * 64);
        b.dense = cv.take<uint4>(p.encoder == ZB_ENC_RATIO ? 0 : ntiles * 256);   // fast encoder only
        b.counts = cv.take<uint4>(ntiles);
        b.offs = cv.take<uint4>(ntiles);
        b.qlat = cv.take<uint32_t>(lorenzo ? n : nlat);   // Lorenzo: the quantized integers of every value
        b.esc = cv.take<uint32_t>(nlat);
        b.esc_off = cv.take<uint32_t>(nlat);
        b.scratch = cv.take<unsigned long long>(kExcTotalsAt + 3);
        b.payload = cv.take<uint8_t>(raw_bytes);
        b.crcs = cv.take<uint32_t>(piece_count(raw_bytes));
        b.temp = cv.take<uint8_t>(scan_bytes);
    };
    carve_from(c.arena[kArenaMain], carve);
    const T *x = d_x_in;
    if (!x) {
        upload(c, b.x, h_x, n * sizeof(T), s);
        x = b.x;
    }

    Header h;
    h.predictor = lorenzo ? kPredLorenzo : kPredInterp;
    h.version = v2_layout_version(h.predictor);   // interp: v3 (codes in pass order); Lorenzo: v2
    h.dtype = dtype;
    h.shape = shape;
    h.mode = p.mode;
    h.bound = p.bound;
    h.encoder = p.encoder == ZB_ENC_RATIO ? kEncRatio : kEncFast;   // the caller resolved auto
    const bool ratio = h.encoder == kEncRatio;
    const CodeStyle cs = code_style(h.encoder);
    const SegIndex si = seg_index(h.encoder);

    // ---- 1. value range (interp always: alpha depends on it; Lorenzo for REL), absolute bound, interp tuning on
    //      the host
    double vmin = 0, vmax = 0;
    const bool has_range = (!lorenzo || p.mode == ZB_MODE_REL) &&
                           enc::device_range(c, x, n, p, b.scratch, s, timer, vmin, vmax);
    h.eb = derive_abs_bound(p.mode, p.bound, has_range, vmin, vmax);
    const InterpParams ip =
        lorenzo ? InterpParams() : tune_on_host(c, shape, x, h_x, h.eb, has_range ? vmax - vmin : 0.0, p, h.encoder, s);

    // ---- 2. the predictor: the lattice (interp: anchors at level_eb[3]; Lorenzo: every point at eb), then the
    //      interp passes of each level
    size_t tb;
    timer.begin(lorenzo ? "lorenzo" : "anchors");
    const QuantParams qa = make_quant_params(lorenzo ? h.eb : ip.level_eb[kInterpLevels], p.has_fill, p.fill_bits);
    if (lorenzo) {   // q and every mask word, then the codes of whole tiles and counts {0, escapes, exceptions, 0}
        const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0;
        (aligned ? enc::k_quantize<T, true, false> : enc::k_quantize<T, false, false>)
            <<<(unsigned)(ntiles * (kTileCodes / 1024)), 256, 0, s>>>(x, n, qa, nullptr, b.qlat, b.mwords);
        ZB_LAUNCHED("k_quantize");
        enc::launch_codes16(shape.rank, ntiles, s, b.qlat, b.mwords, dm, cs, b.codes, b.counts);
    } else {
        ZB_CUDA(cudaMemsetAsync(b.mwords, 0, ntiles * 64 * sizeof(uint32_t), s));
        if (ntiles * kTileCodes > n)
            ZB_CUDA(cudaMemsetAsync(b.codes + n, 0, (ntiles * kTileCodes - n) * sizeof(uint16_t), s));
        k_anchor_quant<T><<<grid_for(nlat, 256), 256, 0, s>>>(lat, x, qa, b.qlat, b.rec, b.mwords);
        ZB_LAUNCHED("k_anchor_quant");
        k_anchor_delta<<<grid_for(nlat, 256), 256, 0, s>>>(lat, cs, b.qlat, b.codes, b.esc);
        ZB_LAUNCHED("k_anchor_delta");
        tb = scan_bytes;
        exclusive_sum(b.temp, tb, b.esc, b.esc_off, nlat, s);
    }
    timer.end();
    if (!lorenzo)
        for_each_pass(ip, lat, [&](int l, int i, const PassGeo &g) {
            const double twoe = 2.0 * ip.level_eb[l];
            const double recip = twoe > 0 ? 1.0 / twoe : 0.0;
            if (i == 0) timer.begin(kLevelNames[l]);
            launch_pass_encode<T>(g, cs, x, b.rec, b.codes, b.mwords, twoe, recip, h.eb, p, s);
            if (i == 2) timer.end();
        });

    // ---- 3. fast: code tiles (flags straight into segment 1, whose offset is fixed), counts; ratio: exception
    //      counts per tile, then the ratio encoder's plan (histogram, codebook, bitstream) on the code array
    uint8_t *pay = b.payload;
    const uint64_t pbytes = param_bytes(h.predictor);
    uint32_t *code_flags = reinterpret_cast<uint32_t *>(pay + pbytes);   // segment 1 follows the parameters
    RatioEncoder renc;
    timer.begin("tiles");
    if (ratio && !lorenzo) {   // (Lorenzo: k_codes16 wrote the counts)
        k_tile_exceptions<<<grid_for(ntiles, 256), 256, 0, s>>>(b.mwords, ntiles, b.counts);
        ZB_LAUNCHED("k_tile_exceptions");
    } else if (!ratio) {
        k_code_tiles<<<(unsigned)ntiles, kTileThreads, 0, s>>>(b.codes, b.mwords, b.dense, code_flags, b.counts);
        ZB_LAUNCHED("k_code_tiles");
    }
    tb = scan_bytes;
    exclusive_sum4(b.temp, tb, b.counts, b.offs, ntiles, s);
    {
        const uint32_t *off = reinterpret_cast<const uint32_t *>(b.offs);
        const uint32_t *cnt = reinterpret_cast<const uint32_t *>(b.counts);
        // Escapes: Lorenzo's per tile (counts .y), the anchors' per lattice point.
        const ScanTotal esc = lorenzo ? ScanTotal{off + 1, cnt + 1, ntiles, 4} : ScanTotal{b.esc_off, b.esc, nlat, 1};
        const ScanTotal t[3] = {{off, cnt, ntiles, 4}, {off + 2, cnt + 2, ntiles, 4}, esc};
        scan_totals(t, 3, b.scratch + kTotalsAt, s);
    }
    timer.end();
    {
        const unsigned long long *tot = enc::fetch_totals(c, b.scratch + kTotalsAt, 3, s);
        h.nonzero_code_blocks = tot[0];   // 0 for the ratio encoder (its counts have no blocks)
        h.exceptions = tot[1];
        h.escapes = tot[2];
    }
    if (ratio) {
        RatioOptions ro;
        ro.run_symbol = (uint32_t)cs.radius;  // code 0 (as the CPU pipeline)
        renc.plan(c, c.arena[kArenaRatio], b.codes, n, 2 * (uint32_t)cs.radius, s, &timer, ro);
        h.version = v2_layout_version(h.predictor, renc.stats().run_tokens);
    }

    // ---- 4. exceptions
    const uint64_t k = h.exceptions;
    enc::ExceptionStage<T> ex;
    ex.plan(c, x, b.mwords, b.counts, b.offs, n, k, b.scratch + kExcTotalsAt, s, timer);
    h.runs = ex.runs;

    // ---- 5. layout (core's v2_layout), raw-passthrough decision
    uint64_t lengths[kMaxSegCount] = {pbytes};
    if (ratio) {
        for (int i = 0; i < kRatioSegmentCount; ++i) lengths[1 + i] = renc.segment_length(i);
    } else {
        lengths[kSegFlags] = ntiles * kTileFlagBytes;
        lengths[kSegBlocks] = h.nonzero_code_blocks * kBlockBytes;
    }
    const uint64_t exc_lengths[6] = {h.escapes * 4,
                                     sparse_flag_bytes(div_up(n, 8)),
                                     ex.edge_nnz * kBlockBytes,
                                     k ? sparse_flag_bytes(div_up(k, 8)) : 0,
                                     ex.change_nnz * kBlockBytes,
                                     h.runs * sizeof(T)};
    std::copy(exc_lengths, exc_lengths + 6, lengths + si.esc);
    v2_layout(h, lengths, si.count);
    const size_t total = h.header_bytes() + (size_t)h.payload_bytes();
    if (total >= raw_bytes)
        return enc::write_raw(c, h, x, h_x, b.crcs, out, resolve_threads(p.threads, n), s, timer);
    if (out.capacity < total) enc::too_small(total);

    // ---- 6. segments at their final offsets
    auto seg = [&](int i) { return pay + h.seg[i].offset; };
    ParamBlob pb{};
    pb.len = (uint32_t)pbytes;
    put_u32(pb.b, (uint32_t)cs.radius);
    put_u32(pb.b + 4, 0);
    if (!lorenzo) interp_params_write(ip, pb.b + kV2CommonParamBytes);
    timer.begin("segments");
    k_put_params<<<1, 64, 0, s>>>(pb, seg(kSegParams));
    ZB_LAUNCHED("k_put_params");
    const int x0 = si.exc0;
    // The kernels store the escapes as int32 and the run values as T: with the fast encoder their segments are
    // aligned; after the ratio encoder's segments (any length) they may not be, so they are staged.
    uint8_t *esc_at = seg(si.esc), *values_at = seg(x0 + 4);
    const size_t esc_bytes = h.escapes * 4, values_bytes = h.runs * sizeof(T);
    if (ratio) {
        uint8_t *dst[kRatioSegmentCount];
        for (int i = 0; i < kRatioSegmentCount; ++i) dst[i] = seg(1 + i);
        renc.write(dst, s, &timer);
        // The ratio arena is free once write() is queued (stream order; a growing reserve() synchronizes first).
        const size_t esc_room = div_up(esc_bytes, 16) * 16;
        uint8_t *staging = c.arena[kArenaRatio].reserve(esc_room + values_bytes + 16);
        esc_at = staging;
        values_at = staging + esc_room;
    } else {
        sparse_copy(reinterpret_cast<const uint32_t *>(b.dense), ntiles * 256, h.nonzero_code_blocks, code_flags,
                    reinterpret_cast<const uint32_t *>(b.offs), 4, kTileFlagWords, seg(kSegBlocks), s);
    }
    if (h.escapes && lorenzo) {
        enc::launch_escapes(shape.rank, ntiles, s, b.qlat, dm, b.counts, b.offs, nullptr, nullptr,
                            reinterpret_cast<int32_t *>(esc_at), cs);
    } else if (h.escapes) {
        k_anchor_escapes<<<grid_for(nlat, 256), 256, 0, s>>>(lat, b.esc, b.esc_off, b.qlat,
                                                             reinterpret_cast<int32_t *>(esc_at));
        ZB_LAUNCHED("k_anchor_escapes");
    }
    ex.write(seg(x0), h.seg[x0].length, seg(x0 + 1), seg(x0 + 2), h.seg[x0 + 2].length, seg(x0 + 3), values_at, s);
    if (ratio && esc_bytes) ZB_CUDA(cudaMemcpyAsync(seg(si.esc), esc_at, esc_bytes, cudaMemcpyDeviceToDevice, s));
    if (ratio && values_bytes)
        ZB_CUDA(cudaMemcpyAsync(seg(x0 + 4), values_at, values_bytes, cudaMemcpyDeviceToDevice, s));
    timer.end();
    return enc::finish_stream(c, h, pay, b.crcs, out, s, timer);
}

// ---- decoder driver ----------------------------------------------------------------------------------------------

inline std::string error_text(uint32_t e) {
    std::string s = (e & ~kErrInterpCode) ? dec::error_text(e & ~kErrInterpCode) : "corrupt stream (GPU decoder):";
    if (e & kErrInterpCode)
        s += (e & ~kErrInterpCode) ? "; an escape code outside the anchors" : " an escape code outside the anchors";
    return s;
}

template <typename T>
void decode_impl(Context &c, const Header &h, const uint8_t *src_payload, bool src_on_device, void *dst,
                 bool dst_on_device, bool verify_crc, cudaStream_t s, KernelTimer &timer) {
    // Raw streams are version 1 (a raw flag in a v2 header has predictor 0 and is refused here, as by the CPU).
    if ((h.flags & kFlagRaw) || !gpu_runs_v2(h.predictor, h.encoder))
        fail(ZB_ERR_UNSUPPORTED, "not a v2-layout stream of a predictor and encoder the GPU decodes");
    const bool lorenzo = h.predictor == kPredLorenzo;
    const uint64_t n = h.shape.n;
    const uint64_t len = h.payload_bytes();
    const uint64_t ntiles = code_tiles(n);
    const uint64_t k = h.exceptions;

    // ---- parameters (segment 0) on the host, validated as the CPU does
    // (read_header checked that segment 0 has param_bytes(predictor) bytes)
    const uint64_t plen = param_bytes(h.predictor);
    uint8_t pbytes[kMaxParamBytes];
    if (src_on_device) {
        ZB_CUDA(cudaMemcpyAsync(c.host_small, src_payload, plen, cudaMemcpyDeviceToHost, s));
        ZB_CUDA(cudaStreamSynchronize(s));
        std::memcpy(pbytes, c.host_small, plen);
    } else {
        std::memcpy(pbytes, src_payload, plen);
    }
    if (get_u32(pbytes + 4) != 0) fail(ZB_ERR_CORRUPT, "corrupt stream: reserved parameter bytes are not zero");
    const bool ratio = h.encoder == kEncRatio;
    const CodeStyle cs = code_style(h.encoder);
    const SegIndex si = seg_index(h.encoder);
    if (get_u32(pbytes) != (uint32_t)cs.radius) fail(ZB_ERR_CORRUPT, "corrupt stream: bad code radius");
    InterpParams ip;
    std::string why;
    if (!lorenzo && !interp_params_read(pbytes + kV2CommonParamBytes, ip, why))
        fail(ZB_ERR_CORRUPT, "corrupt stream: " + why);

    // Lorenzo: the fast decoder's inverse on the code array (dec::LorenzoInverse), the exceptions written after it;
    // interp: the anchors' lattice, then the passes, which read the exceptions' values and skip them by their mask.
    const Lattice lat = lorenzo ? Lattice{} : make_lattice(h.shape, interp_code_order(h.version), kAnchor);
    const uint64_t nlat = lat.n;
    dec::Lines lines[3];
    if (!lorenzo) lattice_lines(lat, (uint64_t)c.sm_count * 2048, lines);
    dec::LorenzoInverse li;
    if (lorenzo) li.plan<T>(c, h.shape, lorenzo_one_segment(h.shape));
    dec::ExceptionDecoder ex;
    ex.init(n, k, h.runs, h.seg[si.exc0 + 1].length, !lorenzo);
    const size_t scan_bytes = std::max({ex.scan_bytes(s), exclusive_sum_temp_bytes({ntiles, nlat}, s),
                                        lorenzo ? li.scan_bytes(s) : size_t(0)});
    const bool dst_aligned = (reinterpret_cast<uintptr_t>(dst) % sizeof(T)) == 0;
    const bool own_out = !dst_on_device || !dst_aligned;
    // After the ratio encoder's segments (any length) the escapes and exception segments may be unaligned for the
    // kernels' word loads: they are copied to 16-byte aligned places first.
    uint64_t tail_off[kMaxSegCount] = {}, tail_room = 0;
    if (ratio)
        for (int i = si.esc; i < si.count; ++i) {
            tail_off[i] = tail_room;
            tail_room += div_up(h.seg[i].length, 16) * 16;
        }
    struct {
        uint8_t *payload;
        uint32_t *err, *crcs, *cnt, *off, *qlat, *esc, *esc_off, *sums;
        uint16_t *codes;
        uint8_t *tail;   // ratio: aligned copies of the escape and exception segments
        T *out;
        void *temp;
    } b{};
    auto carve = [&](Carver &cv) {
        b.payload = cv.take<uint8_t>(len + 32);
        b.err = cv.take<uint32_t>(1);
        b.crcs = cv.take<uint32_t>(verify_crc ? piece_count(len) : 0);
        b.out = own_out ? cv.take<T>(n) : nullptr;
        b.codes = cv.take<uint16_t>(ntiles * kTileCodes);
        b.cnt = cv.take<uint32_t>(ntiles);
        b.off = cv.take<uint32_t>(ntiles);
        b.qlat = cv.take<uint32_t>(nlat);
        b.esc = cv.take<uint32_t>(nlat);
        b.esc_off = cv.take<uint32_t>(nlat);
        b.sums = cv.take<uint32_t>(lorenzo ? 0 : lattice_sums_needed(lines));
        if (lorenzo) li.carve(cv);
        b.tail = cv.take<uint8_t>(tail_room);
        ex.carve(cv);
        b.temp = cv.take<uint8_t>(scan_bytes);
    };
    carve_from(c.arena[kArenaMain], carve);
    T *out = own_out ? b.out : static_cast<T *>(dst);

    // The payload 8 bytes into an aligned buffer: segment 1 (code flags) starts 56 (interp) or 8 (Lorenzo) bytes in,
    // so with the fast encoder the code blocks (segment 2, read as 16-byte words) and the escapes land on 16-byte
    // boundaries.
    uint8_t *pay = b.payload + 8;
    if (src_on_device) {
        if (len) ZB_CUDA(cudaMemcpyAsync(pay, src_payload, len, cudaMemcpyDeviceToDevice, s));
    } else {
        upload(c, pay, src_payload, len, s);
    }
    ZB_CUDA(cudaMemsetAsync(b.err, 0, 4, s));
    auto seg = [&](int i) { return pay + h.seg[i].offset; };
    auto tail_seg = [&](int i) { return ratio ? b.tail + tail_off[i] : seg(i); };   // escapes and exceptions
    if (ratio)
        for (int i = si.esc; i < si.count; ++i)
            if (h.seg[i].length)
                ZB_CUDA(cudaMemcpyAsync(b.tail + tail_off[i], seg(i), h.seg[i].length, cudaMemcpyDeviceToDevice, s));
    if (verify_crc) {
        timer.begin("crc");
        piece_crcs(c, pay, len, b.crcs, s);
        timer.end();
    }

    // ---- codes
    size_t tb;
    if (ratio) {   // ratio_decode times its own kernels
        ByteSpan rs[kRatioSegmentCount], hcb;
        for (int i = 0; i < kRatioSegmentCount; ++i) rs[i] = {seg(1 + i), h.seg[1 + i].length};
        if (!src_on_device) hcb = {src_payload + h.seg[1].offset, h.seg[1].length};   // the codebook, on the host
        ratio_decode(c, c.arena[kArenaRatio], rs, src_on_device ? nullptr : &hcb, n, 2 * (uint32_t)cs.radius,
                     b.codes, s, &timer, h.version >= kFormatVersionV4);
    } else {
        timer.begin("tiles");
        const uint32_t *flags = reinterpret_cast<const uint32_t *>(seg(kSegFlags));
        dec::k_tile_nnz<<<grid_for(ntiles, 256), 256, 0, s>>>(flags, ntiles, b.cnt);
        ZB_LAUNCHED("k_tile_nnz");
        tb = scan_bytes;
        exclusive_sum(b.temp, tb, b.cnt, b.off, ntiles, s);
        k_decode_codes<<<(unsigned)ntiles, kTileThreads, 0, s>>>(flags,
                                                                reinterpret_cast<const uint4 *>(seg(kSegBlocks)),
                                                                h.nonzero_code_blocks, b.cnt, b.off, ntiles, n,
                                                                b.codes, b.err);
        ZB_LAUNCHED("k_decode_codes");
        timer.end();
    }

    const int x0 = si.exc0;
    const uint8_t *xs[5] = {tail_seg(x0), tail_seg(x0 + 1), tail_seg(x0 + 2), tail_seg(x0 + 3), tail_seg(x0 + 4)};
    auto exceptions = [&] {
        if (!k) return;
        timer.begin("exceptions");
        ex.run<T>(xs, h.seg[x0 + 1].length, h.seg[x0 + 3].length, out, b.err, b.temp, scan_bytes, s);
        timer.end();
    };
    const int32_t *esc_vals = reinterpret_cast<const int32_t *>(tail_seg(si.esc));
    if (lorenzo) {
        timer.begin("lorenzo");
        li.tiles(dec::ArrayCodes{b.codes, cs}, esc_vals, h.escapes, b.err, b.temp, scan_bytes, s);
        li.values<T>(2.0 * h.eb, out, s);
        timer.end();
        exceptions();   // their values over the dequantized codes
    } else {
        // ---- exceptions first: the passes read their values, and their mask skips them
        exceptions();
        const uint32_t *M = k ? ex.M : nullptr;
        // ---- the anchors' lattice
        timer.begin("anchors");
        k_anchor_read<<<grid_for(nlat, 256), 256, 0, s>>>(lat, cs, b.codes, b.qlat, b.esc);
        ZB_LAUNCHED("k_anchor_read");
        tb = scan_bytes;
        exclusive_sum(b.temp, tb, b.esc, b.esc_off, nlat, s);
        k_anchor_patch<<<grid_for(nlat, 256), 256, 0, s>>>(nlat, b.esc, b.esc_off, esc_vals, h.escapes, b.qlat, b.err);
        ZB_LAUNCHED("k_anchor_patch");
        dec::k_expect_total<<<1, 32, 0, s>>>(b.esc_off, b.esc, nlat, h.escapes, kErrEscapes, b.err);
        ZB_LAUNCHED("k_expect_total");
        lattice_prefix(b.qlat, lines, b.sums, s);
        k_anchor_values<T><<<grid_for(nlat, 256), 256, 0, s>>>(lat, b.qlat, M, 2.0 * ip.level_eb[kInterpLevels], out);
        ZB_LAUNCHED("k_anchor_values");
        timer.end();

        // ---- the levels, as the encoder ran them
        for_each_pass(ip, lat, [&](int l, int i, const PassGeo &g) {
            if (i == 0) timer.begin(kLevelNames[l]);
            if (g.npts) {
                k_pass_decode<T><<<grid_for(g.npts, 256), 256, 0, s>>>(g, cs, out, b.codes, M,
                                                                        2.0 * ip.level_eb[l], b.err);
                ZB_LAUNCHED("k_pass_decode");
            }
            if (i == 2) timer.end();
        });
    }

    // ---- payload checksum compared on the device, the error word back to the host; the values only once they
    //      are known to be good
    uint32_t *err_host = reinterpret_cast<uint32_t *>(c.host_small);
    if (verify_crc) check_payload_crc(c, b.crcs, len, h.payload_crc, b.err, kErrPayloadCrc, s);
    ZB_CUDA(cudaMemcpyAsync(err_host, b.err, 4, cudaMemcpyDeviceToHost, s));
    ZB_CUDA(cudaStreamSynchronize(s));
    if (*err_host & kErrPayloadCrc) fail(ZB_ERR_CORRUPT, "payload checksum mismatch");
    if (*err_host) fail(ZB_ERR_CORRUPT, error_text(*err_host));
    if (!dst_on_device) {
        download(c, dst, out, n * sizeof(T), s);
    } else if (own_out) {
        ZB_CUDA(cudaMemcpyAsync(dst, out, n * sizeof(T), cudaMemcpyDeviceToDevice, s));
        ZB_CUDA(cudaStreamSynchronize(s));
    }
}

}  // namespace
}  // namespace interp

template <typename T>
zb_params choose_on_device(Context &c, const zb_params &p, const Shape &shape, const T *d_x, cudaStream_t s) {
    zb_params cp = p;
    if (p.mode == ZB_MODE_REL) {
        unsigned long long *scratch = nullptr;
        auto carve = [&](Carver &cv) { scratch = cv.take<unsigned long long>(enc::kRangeWords); };
        carve_from(c.arena[kArenaPoints], carve);
        KernelTimer timer(c, s);
        double vmin = 0, vmax = 0;
        const bool has_range = enc::device_range(c, d_x, shape.n, p, scratch, s, timer, vmin, vmax);
        cp.mode = ZB_MODE_ABS;
        cp.bound = derive_abs_bound(p.mode, p.bound, has_range, vmin, vmax);
    }
    std::vector<uint64_t> idx;
    choose_pipeline_points(shape, idx);
    const auto h_pts = points::host_points<T>(c, d_x, shape.n, std::move(idx), s);
    uint8_t pred = 0, enc = 0;
    choose_pipeline(cp, sizeof(T) == 8 ? ZB_F64 : ZB_F32, h_pts.get(), shape, false, 1, pred, enc);
    zb_params out = p;
    out.predictor = pred == kPredInterp ? ZB_PRED_INTERP : ZB_PRED_LORENZO;
    out.encoder = enc == kEncRatio ? ZB_ENC_RATIO : ZB_ENC_FAST;
    return out;
}

template <typename T>
size_t v2_encode(Context &c, const zb_params &p, const Shape &shape, const T *d_x, const T *h_x,
                 const StreamTarget &out, cudaStream_t s, KernelTimer &timer) {
    return interp::encode_impl<T>(c, p, shape, d_x, h_x, out, s, timer);
}

template <typename T>
void v2_decode(Context &c, const Header &h, const uint8_t *src_payload, bool src_on_device, void *dst,
               bool dst_on_device, bool verify_crc, cudaStream_t s, KernelTimer &timer) {
    interp::decode_impl<T>(c, h, src_payload, src_on_device, dst, dst_on_device, verify_crc, s, timer);
}

}  // namespace gpu
}  // namespace zb
