// The point-wise relative mode (format v5, docs/FORMAT.md section 12) on the GPU, writing the same bytes as
// core/src/pwrel.cpp (DESIGN invariant 4). The arithmetic is the host+device code of zb_log2.h (det_log2,
// det_exp2, pwrel_value: explicit _rn double operations) and a copy of pwrel.cpp's exact bound test with explicit
// __dadd_rn / __dsub_rn / __dmul_rn / __fma_rn, so every log magnitude, every reconstruction and every decision
// equals the CPU's.
//
// Encode (device memory throughout; "sync" = the host waits for the stream):
//   k_pw_log: per block of 4096 values (the CPU's fill-forward block) log2 |x| of the regular values, the
//     fill-forward over the others (last regular y before them in the block, else the block's first, else 0), the
//     sign bits (one warp ballot per 32 values) and max |y| (exact: a max of non-negative doubles as integer
//     keys) -> sync; the inner bound (core's pwrel_log_bound) on the host
//   sign bits: the zero-block sparse pass (sparse_gpu.cu)
//   the inner stream: encode (v1) or v2_encode with an ABS bound, into device memory at its place in the stream
//   the inner stream decoded on the device (decode / v2_decode) into y'
//   k_pw_check: per 2048-value tile, x' = pwrel_value(y', sign), exact |x - x'| <= pw |x| test, exception mask
//     words (specials and misses) and per-tile counts; CUB scan -> sync
//   exceptions: encode.cuh's ExceptionStage -> sync; v2 layout and the raw-passthrough decision on the host
//   segments at their final offsets, CRC pieces, header on the host.
// Decode: parameters and the inner header read on the host (a few bytes copied from the device); sign bits
// expanded by the sparse pass; the inner stream decoded into the output; k_pw_exp applies exp2 and the signs in
// place; decode.cuh's ExceptionDecoder writes the stored values over their positions.
#include <cstring>
#include <vector>
#include "decode.cuh"
#include "encode.cuh"
#include "host_points.cuh"
#include "interp_gpu.h"
#include "pwrel_gpu.h"
#include "zb_bytes.h"
#include "zb_log2.h"
#include "zb_pwrel.h"

namespace zb {
namespace gpu {

// The codec entry points are instantiated in encode_*.cu, decode_*.cu and interp_*.cu.
extern template size_t encode<float>(Context &, const zb_params &, const Shape &, const float *, const float *,
                                     const StreamTarget &, cudaStream_t, KernelTimer &);
extern template size_t encode<double>(Context &, const zb_params &, const Shape &, const double *, const double *,
                                      const StreamTarget &, cudaStream_t, KernelTimer &);
extern template void decode<float>(Context &, const Header &, const uint8_t *, bool, void *, bool, bool,
                                   cudaStream_t, KernelTimer &, const uint8_t *);
extern template void decode<double>(Context &, const Header &, const uint8_t *, bool, void *, bool, bool,
                                    cudaStream_t, KernelTimer &, const uint8_t *);

namespace pw {
namespace {

constexpr int kBlockValues = 4096;  // the fill-forward block of pwrel.cpp
constexpr int kLogThreads = 256;
constexpr uint32_t kErrSignSparse = 1u << 24;  // sign flags / blocks inconsistent
constexpr uint32_t kErrSignTail = 1u << 25;    // a sign bit past the last value

template <typename T>
__device__ __forceinline__ bool is_special(T v, int has_fill, uint64_t fill_bits) {
    using U = typename FloatBits<T>::U;
    return !is_finite_value(v) || v == (T)0 || (has_fill && bits_of(v) == (U)fill_bits);
}

__device__ __forceinline__ unsigned long long max_u64(unsigned long long a, unsigned long long b) {
    return a > b ? a : b;
}

// One block per 4096 values. y as log_magnitudes in pwrel.cpp; sign words (bit i of word w = sign of value
// 32 w + i when regular, 0 past n: every word of the block is written); max |y| into *max_key as the bits of a
// non-negative double (integer order = value order).
template <typename T>
__global__ void __launch_bounds__(kLogThreads)
k_pw_log(const T *__restrict__ x, uint64_t n, int has_fill, uint64_t fill_bits, T *__restrict__ y,
         uint32_t *__restrict__ sign_words, unsigned long long *__restrict__ max_key) {
    __shared__ T ys[kBlockValues];
    __shared__ uint32_t reg[kBlockValues / 32];
    __shared__ int last_upto[kBlockValues / 32];  // last regular index within words 0..w of the block, or -1
    __shared__ int first_reg;
    const int tid = threadIdx.x, lane = tid & 31;
    const uint64_t lo = (uint64_t)blockIdx.x * kBlockValues;
    if (tid == 0) first_reg = kBlockValues;
    double most = 0;
    for (int k = 0; k < kBlockValues / kLogThreads; ++k) {
        const int idx = k * kLogThreads + tid;
        const uint64_t i = lo + idx;
        bool r = false, neg = false;
        if (i < n) {
            const T v = x[i];
            r = !is_special(v, has_fill, fill_bits);
            if (r) {
                const T l = (T)det_log2(fabs((double)v));
                ys[idx] = l;
                most = fmax(most, fabs((double)l));
                neg = sign_bit(v);
            }
        }
        const uint32_t rb = __ballot_sync(kFullMask, r), sb = __ballot_sync(kFullMask, neg);
        if (lane == 0) {
            reg[idx >> 5] = rb;
            sign_words[(lo >> 5) + (idx >> 5)] = sb;
        }
    }
    __syncthreads();
    if (tid < kBlockValues / 32) {
        const uint32_t w = reg[tid];
        last_upto[tid] = w ? tid * 32 + 31 - __clz(w) : -1;
        if (w) atomicMin(&first_reg, tid * 32 + __ffs(w) - 1);
    }
    __syncthreads();
    // Inclusive max scan of last_upto over the 128 words (Hillis-Steele in shared memory).
    for (int d = 1; d < kBlockValues / 32; d <<= 1) {
        int v = -1;
        if (tid < kBlockValues / 32 && tid >= d) v = last_upto[tid - d];
        __syncthreads();
        if (tid < kBlockValues / 32 && v > last_upto[tid]) last_upto[tid] = v;
        __syncthreads();
    }
    const int first = first_reg;
    for (int k = 0; k < kBlockValues / kLogThreads; ++k) {
        const int idx = k * kLogThreads + tid;
        const uint64_t i = lo + idx;
        if (i >= n) break;
        const int w = idx >> 5;
        const uint32_t bits = reg[w] & low_bits((idx & 31) + 1);
        int src = bits ? w * 32 + 31 - __clz(bits) : (w ? last_upto[w - 1] : -1);
        if (src < 0) src = first < kBlockValues ? first : -1;
        y[i] = src >= 0 ? ys[src] : (T)0;
    }
    unsigned long long key = (unsigned long long)__double_as_longlong(most);
    for (int o = 16; o; o >>= 1) key = max_u64(key, __shfl_xor_sync(kFullMask, key, o));
    if (lane == 0 && key) atomicMax(max_key, key);
}

// pwrel.cpp's within_pw, operation by operation.
__device__ __forceinline__ bool within_pw(double x, double r, double pw) {
    if (!isfinite(r)) return false;
    if (fabs(x) < 0x1p-800) {
        x = __dmul_rn(x, 0x1p256);
        r = __dmul_rn(r, 0x1p256);
    }
    const double d = __dsub_rn(x, r), xb = __dadd_rn(d, r);  // TwoSum of x and -r
    const double e = __dadd_rn(__dsub_rn(x, xb), __dsub_rn(-r, __dsub_rn(d, xb)));
    if (e != 0) return false;
    return __fma_rn(pw, fabs(x), -fabs(d)) >= 0;
}

__device__ __forceinline__ bool sign_at(const uint32_t *__restrict__ sign_words, uint64_t i) {
    return (sign_words[i >> 5] >> (i & 31)) & 1;
}

// One block per 2048-value tile (the exception stage's layout): mask words (special or missing the bound) and the
// tile's count in .z.
template <typename T>
__global__ void __launch_bounds__(kTileThreads)
k_pw_check(const T *__restrict__ x, const T *__restrict__ yr, const uint32_t *__restrict__ sign_words, uint64_t n,
           int has_fill, uint64_t fill_bits, double pw, uint32_t *__restrict__ mwords, uint4 *__restrict__ counts) {
    __shared__ uint32_t total;
    const uint64_t t = blockIdx.x;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (threadIdx.x == 0) total = 0;
    __syncthreads();
    uint32_t cnt = 0;
    for (int j = 0; j < kPlaneWords / (kTileThreads / 32); ++j) {
        const uint64_t w = t * kPlaneWords + (uint64_t)warp * (kPlaneWords / (kTileThreads / 32)) + j;
        const uint64_t i = w * 32 + lane;
        bool e = false;
        if (i < n) {
            const T v = x[i];
            if (is_special(v, has_fill, fill_bits)) {
                e = true;
            } else {
                const double r = (double)pwrel_value<T>(yr[i], sign_at(sign_words, i));
                e = !within_pw((double)v, r, pw);
            }
        }
        const uint32_t m = __ballot_sync(kFullMask, e);
        if (lane == 0) {
            mwords[w] = m;
            cnt += __popc(m);
        }
    }
    if (lane == 0 && cnt) atomicAdd(&total, cnt);
    __syncthreads();
    if (threadIdx.x == 0) counts[t] = make_uint4(0, 0, total, 0);
}

template <typename T>
__global__ void k_pw_exp(T *__restrict__ v, const uint32_t *__restrict__ sign_words, uint64_t n) {
    const uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) v[i] = pwrel_value<T>(v[i], sign_at(sign_words, i));
}

// The bits of the last sign byte past n must be zero (the sparse pass checks the bytes past it).
__global__ void k_sign_tail(const uint32_t *__restrict__ sign_words, uint64_t n, uint32_t *__restrict__ err) {
    if (n % 8 == 0) return;
    const uint64_t byte = n >> 3;
    const uint32_t b = (sign_words[byte >> 2] >> (8 * (byte & 3))) & 0xFFu;
    if (b >> (n % 8)) set_error(err, kErrSignTail);
}

// The stream's payload checksum from device piece CRCs (the same combination as finish_stream).
uint32_t payload_crc_of(Context &c, const uint8_t *d_payload, uint64_t len, uint32_t *d_crcs, cudaStream_t s,
                        KernelTimer &timer) {
    if (!len) return 0;
    timer.begin("crc");
    piece_crcs(c, d_payload, len, d_crcs, s);
    timer.end();
    const HostCrcs crcs(c, d_crcs, len, s);
    ZB_CUDA(cudaStreamSynchronize(s));
    return crcs.combined();
}

[[noreturn]] void corrupt(const std::string &why) { fail(ZB_ERR_CORRUPT, "corrupt stream: " + why); }

template <typename T>
size_t encode_t(Context &c, const zb_params &p, const Shape &shape, const T *d_x_in, const T *h_x,
                const StreamTarget &out, bool choose_on_host, cudaStream_t s, double *kernel_seconds) {
    const zb_dtype dtype = sizeof(T) == 8 ? ZB_F64 : ZB_F32;
    const uint64_t n = shape.n;
    const int nt = resolve_threads(p.threads, n);
    const uint64_t nblocks = div_up(n, kBlockValues), ntiles = code_tiles(n);
    const uint64_t sign_bytes = div_up(n, 8), nb_sign = div_up(sign_bytes, kBlockBytes), ng_sign = div_up(nb_sign, 32);
    const size_t raw_bytes = raw_stream_bytes(dtype, n);
    const size_t inner_offset = kPwRelInnerOffset;
    // The stream is assembled in device memory: in the caller's buffer (device API), else in the arena.
    const size_t container_bytes = out.on_device ? 0 : inner_offset + raw_bytes;

    const size_t scan_bytes =
        std::max(exclusive_sum4_temp_bytes(ntiles, s), exclusive_sum_temp_bytes({ng_sign}, s));
    struct {
        T *x, *y;
        uint32_t *signw, *sflag, *scnt, *soff, *mwords;
        uint4 *counts, *offs;
        unsigned long long *scratch;
        uint8_t *container;
        uint32_t *crcs;
        void *temp;
    } b{};
    auto carve = [&](Carver &cv) {
        b.x = d_x_in ? nullptr : cv.take<T>(n);
        b.y = cv.take<T>(n);
        b.signw = cv.take<uint32_t>(nblocks * (kBlockValues / 32));
        b.sflag = cv.take<uint32_t>(ng_sign);
        b.scnt = cv.take<uint32_t>(ng_sign);
        b.soff = cv.take<uint32_t>(ng_sign);
        b.mwords = cv.take<uint32_t>(ntiles * kPlaneWords);
        b.counts = cv.take<uint4>(ntiles);
        b.offs = cv.take<uint4>(ntiles);
        b.scratch = cv.take<unsigned long long>(8);
        b.container = cv.take<uint8_t>(container_bytes);
        b.crcs = cv.take<uint32_t>(piece_count(inner_offset + raw_bytes));
        b.temp = cv.take<uint8_t>(scan_bytes);
    };
    carve_from(c.arena[kArenaPwRel], carve);
    const T *x = d_x_in;
    if (!x) {
        upload(c, b.x, h_x, n * sizeof(T), s);
        x = b.x;
    }

    Header h;
    h.version = kFormatVersionV5;
    h.dtype = dtype;
    h.shape = shape;
    h.mode = ZB_MODE_PW_REL;
    h.bound = p.bound;

    // ---- 1. log magnitudes, sign bits, max |y| -> the inner bound
    KernelTimer t1(c, s);
    ZB_CUDA(cudaMemsetAsync(b.scratch, 0, 8 * sizeof(unsigned long long), s));
    t1.begin("pw log");
    if (nblocks) {
        k_pw_log<T><<<(unsigned)nblocks, kLogThreads, 0, s>>>(x, n, p.has_fill, p.fill_bits, b.y, b.signw,
                                                              b.scratch);
        ZB_LAUNCHED("k_pw_log");
    }
    // Sign bits: the sparse pass over the ceil(n / 8) bytes (the words past them are zero).
    if (nb_sign) {
        sparse_flags(b.signw, nb_sign, b.sflag, b.scnt, s);
        size_t tb = scan_bytes;
        exclusive_sum(b.temp, tb, b.scnt, b.soff, ng_sign, s);
        const ScanTotal st[1] = {{b.soff, b.scnt, ng_sign, 1}};
        scan_totals(st, 1, b.scratch + 1, s);
    }
    t1.end();
    const unsigned long long *tot = enc::fetch_totals(c, b.scratch, 2, s);
    const double max_abs_log = from_bits<double>((uint64_t)tot[0]);
    const uint64_t sign_nnz = nb_sign ? tot[1] : 0;
    *kernel_seconds += t1.seconds();
    h.eb = pwrel_log_bound(p.bound, max_abs_log, sizeof(T) == 8);

    KernelTimer traw(c, s);
    auto store_raw = [&]() -> size_t {
        const size_t len = enc::write_raw(c, h, x, h_x, b.crcs, out, nt, s, traw);
        *kernel_seconds += traw.seconds();
        return len;
    };
    if (!(h.eb > 0) || out.capacity <= inner_offset) return store_raw();

    // ---- 2. the inner stream, at its place in the stream
    zb_params ip = p;
    ip.mode = ZB_MODE_ABS;
    ip.bound = h.eb;
    ip.has_fill = 0;
    ip.fill_bits = 0;
    uint8_t pred = 0, encd = 0;
    resolve_pipeline(ip, pred, encd);
    if (choose_on_host && (ip.predictor == ZB_PRED_AUTO || ip.encoder == ZB_ENC_AUTO)) {
        // As the CPU path (api.cpp compress_values): choose_pipeline from the log magnitudes, of which it reads
        // its sample box only (the inner call is mode ABS).
        std::vector<uint64_t> idx;
        choose_pipeline_points(shape, idx);
        const auto h_pts = points::host_points<T>(c, b.y, n, std::move(idx), s);
        choose_pipeline(ip, dtype, h_pts.get(), shape, false, nt, pred, encd);
    }
    ip.predictor = pred == kPredInterp ? ZB_PRED_INTERP : ZB_PRED_LORENZO;
    ip.encoder = encd == kEncRatio ? ZB_ENC_RATIO : ZB_ENC_FAST;
    uint8_t *base = out.on_device ? out.ptr : b.container;
    uint8_t *inner_at = base + inner_offset;
    const size_t inner_cap =
        out.on_device ? out.capacity - inner_offset : std::min(out.capacity - inner_offset, raw_bytes);
    const StreamTarget inner_out{true, inner_at, inner_cap};
    size_t inner_len = 0;
    {
        KernelTimer t2(c, s);
        const T *hy = nullptr;  // the interp tuning gathers its sample points from the device (host_points.cuh)
        try {
            inner_len = is_v1_pipeline(pred, encd) ? encode<T>(c, ip, shape, b.y, hy, inner_out, s, t2)
                                                   : v2_encode<T>(c, ip, shape, b.y, hy, inner_out, s, t2);
        } catch (const Failure &f) {
            if (f.status != ZB_ERR_BUFFER_TOO_SMALL) throw;
            (void)cudaStreamSynchronize(s);
            *kernel_seconds += t2.seconds();
            return store_raw();  // the whole stream would not fit either
        }
        *kernel_seconds += t2.seconds();
    }
    Header ih;
    {
        const size_t max_header = kHeaderFixedBytes + 16 * kMaxSegments + 8;
        const size_t hcopy = std::min(inner_len, max_header);
        uint8_t *hdr = c.host_small;
        std::memset(hdr, 0, max_header);
        ZB_CUDA(cudaMemcpyAsync(hdr, inner_at, hcopy, cudaMemcpyDeviceToHost, s));
        ZB_CUDA(cudaStreamSynchronize(s));
        std::string why;
        if (read_header(hdr, inner_len, ih, why, false) != ZB_OK)
            fail(ZB_ERR_INTERNAL, "internal error: the inner stream does not parse: " + why);
    }
    h.predictor = ih.predictor;
    h.encoder = ih.encoder;

    // ---- 3. what a decoder will reconstruct, checked value by value
    {
        KernelTimer t3(c, s);
        const uint8_t *ipay = inner_at + ih.header_bytes();
        if (fast_layout_version(ih.version)) decode<T>(c, ih, ipay, true, b.y, true, false, s, t3);
        else v2_decode<T>(c, ih, ipay, true, b.y, true, false, s, t3);
        *kernel_seconds += t3.seconds();
    }
    KernelTimer t4(c, s);
    t4.begin("pw check");
    k_pw_check<T><<<(unsigned)ntiles, kTileThreads, 0, s>>>(x, b.y, b.signw, n, p.has_fill, p.fill_bits, p.bound,
                                                             b.mwords, b.counts);
    ZB_LAUNCHED("k_pw_check");
    {
        size_t tb = scan_bytes;
        exclusive_sum4(b.temp, tb, b.counts, b.offs, ntiles, s);
        const uint32_t *off = reinterpret_cast<const uint32_t *>(b.offs);
        const uint32_t *cnt = reinterpret_cast<const uint32_t *>(b.counts);
        const ScanTotal st[1] = {{off + 2, cnt + 2, ntiles, 4}};
        scan_totals(st, 1, b.scratch + 2, s);
    }
    t4.end();
    const uint64_t k = enc::fetch_totals(c, b.scratch + 2, 1, s)[0];
    enc::ExceptionStage<T> ex;
    ex.plan(c, x, b.mwords, b.counts, b.offs, n, k, b.scratch + 3, s, t4);

    // ---- 4. layout and the raw-passthrough decision (raw_or_fits)
    h.exceptions = k;
    h.runs = ex.runs;
    uint64_t lengths[kPwRelSegmentCount] = {kPwRelParamBytes,
                                            inner_len,
                                            sparse_flag_bytes(sign_bytes),
                                            sign_nnz * kBlockBytes,
                                            sparse_flag_bytes(sign_bytes),
                                            ex.edge_nnz * kBlockBytes,
                                            k ? sparse_flag_bytes(div_up(k, 8)) : 0,
                                            ex.change_nnz * kBlockBytes,
                                            ex.runs * sizeof(T)};
    v2_layout(h, lengths, kPwRelSegmentCount);
    const size_t hb = h.header_bytes();
    const size_t total = hb + (size_t)h.payload_bytes();
    if (hb + h.seg[kPwSegInner].offset != inner_offset) fail(ZB_ERR_INTERNAL, "internal error: v5 layout");
    if (total >= raw_bytes) {
        *kernel_seconds += t4.seconds();
        return store_raw();
    }
    if (out.capacity < total) enc::too_small(total);

    // ---- 5. the other segments at their final offsets, checksum, header
    uint8_t *payload = base + hb;
    auto seg = [&](int i) { return payload + h.seg[i].offset; };
    t4.begin("pw segments");
    ZB_CUDA(cudaMemsetAsync(payload, 0, kPwRelParamBytes, s));
    ZB_CUDA(cudaMemsetAsync(payload, (int)kPwRelTransformLog2, 1, s));  // u32 1 little-endian, u32 0
    if (h.seg[kPwSegSignFlags].length)
        ZB_CUDA(cudaMemcpyAsync(seg(kPwSegSignFlags), b.sflag, h.seg[kPwSegSignFlags].length,
                                cudaMemcpyDeviceToDevice, s));
    if (sign_nnz) sparse_copy(b.signw, nb_sign, sign_nnz, b.sflag, b.soff, 1, 1, seg(kPwSegSignBlocks), s);
    ex.write(seg(kPwSegExceptions), h.seg[kPwSegExceptions].length, seg(kPwSegExceptions + 1),
             seg(kPwSegExceptions + 2), h.seg[kPwSegExceptions + 2].length, seg(kPwSegExceptions + 3),
             seg(kPwSegExceptions + 4), s);
    t4.end();
    const uint64_t plen = h.payload_bytes();
    h.payload_crc = payload_crc_of(c, payload, plen, b.crcs, s, t4);
    if (out.on_device) {
        uint8_t *hdr = c.host_small;
        write_header(h, hdr);
        ZB_CUDA(cudaMemcpyAsync(out.ptr, hdr, hb, cudaMemcpyHostToDevice, s));
        ZB_CUDA(cudaStreamSynchronize(s));
    } else {
        download(c, out.ptr + hb, payload, plen, s);
        ZB_CUDA(cudaStreamSynchronize(s));
        write_header(h, out.ptr);
    }
    *kernel_seconds += t4.seconds();
    return total;
}

template <typename T>
void decode_t(Context &c, const Header &h, const uint8_t *stream, bool src_on_device, void *dst, bool dst_on_device,
              bool verify_crc, cudaStream_t s, double *kernel_seconds) {
    const uint64_t n = h.shape.n;
    const size_t hb = h.header_bytes();
    const uint64_t plen = h.payload_bytes();
    const uint64_t sign_bytes = div_up(n, 8), nb_sign = div_up(sign_bytes, kBlockBytes), ng_sign = div_up(nb_sign, 32);

    size_t scan_bytes = 0;
    exclusive_sum(nullptr, scan_bytes, nullptr, nullptr, ng_sign, s);
    // Values are decoded in place when dst is device memory aligned to the value size, else into the arena.
    const bool own_out = !dst_on_device || reinterpret_cast<uintptr_t>(dst) % sizeof(T) != 0;
    struct {
        uint8_t *payload;
        T *out;
        uint32_t *signw, *sflag, *scnt, *soff, *err, *crcs;
        void *temp;
    } b{};
    auto carve = [&](Carver &cv) {
        b.payload = src_on_device ? nullptr : cv.take<uint8_t>(plen);
        b.out = own_out ? cv.take<T>(n) : nullptr;
        b.signw = cv.take<uint32_t>(4 * nb_sign);
        b.sflag = cv.take<uint32_t>(ng_sign);
        b.scnt = cv.take<uint32_t>(ng_sign);
        b.soff = cv.take<uint32_t>(ng_sign);
        b.err = cv.take<uint32_t>(1);
        b.crcs = cv.take<uint32_t>(verify_crc ? piece_count(plen) : 0);
        b.temp = cv.take<uint8_t>(scan_bytes);
    };
    carve_from(c.arena[kArenaPwRel], carve);
    const uint8_t *payload = src_on_device ? stream + hb : b.payload;
    if (!src_on_device) upload(c, b.payload, stream + hb, plen, s);
    T *out = own_out ? b.out : static_cast<T *>(dst);
    KernelTimer t1(c, s);
    if (verify_crc && payload_crc_of(c, payload, plen, b.crcs, s, t1) != h.payload_crc)
        fail(ZB_ERR_CORRUPT, "payload checksum mismatch");

    // Parameters and the inner header on the host.
    const uint64_t in_off = h.seg[kPwSegInner].offset, in_size = h.seg[kPwSegInner].length;
    const size_t max_header = kHeaderFixedBytes + 16 * kMaxSegments + 8;
    std::vector<uint8_t> params(kPwRelParamBytes), ihdr(max_header, 0);
    const size_t icopy = (size_t)std::min<uint64_t>(in_size, max_header);
    if (src_on_device) {
        ZB_CUDA(cudaMemcpyAsync(params.data(), payload + h.seg[kPwSegParams].offset, kPwRelParamBytes,
                                cudaMemcpyDeviceToHost, s));
        if (icopy) ZB_CUDA(cudaMemcpyAsync(ihdr.data(), payload + in_off, icopy, cudaMemcpyDeviceToHost, s));
        ZB_CUDA(cudaStreamSynchronize(s));
    } else {
        std::memcpy(params.data(), stream + hb + h.seg[kPwSegParams].offset, kPwRelParamBytes);
        if (icopy) std::memcpy(ihdr.data(), stream + hb + in_off, icopy);
    }
    if (get_u32(params.data()) != kPwRelTransformLog2 || get_u32(params.data() + 4) != 0)
        corrupt("unknown point-wise transform");
    Header ih;
    std::string why;
    if (read_header(ihdr.data(), (size_t)in_size, ih, why, false) != ZB_OK) corrupt("inner stream: " + why);
    bool same_shape = ih.shape.rank == h.shape.rank && ih.shape.n == n;
    for (int i = 0; i < 3; ++i) same_shape = same_shape && ih.shape.dims[i] == h.shape.dims[i];
    if (ih.version == kFormatVersionV5 || ih.mode != ZB_MODE_ABS || ih.dtype != h.dtype || !same_shape ||
        ih.predictor != h.predictor || ih.encoder != h.encoder || ih.header_bytes() + ih.payload_bytes() != in_size)
        corrupt("the inner stream does not match its container");

    // Sign bits.
    ZB_CUDA(cudaMemsetAsync(b.err, 0, 4, s));
    t1.begin("pw signs");
    if (nb_sign) {
        sparse_read_flags(payload + h.seg[kPwSegSignFlags].offset, nb_sign, b.sflag, b.scnt, b.err, kErrSignSparse,
                          s);
        size_t tb = scan_bytes;
        exclusive_sum(b.temp, tb, b.scnt, b.soff, ng_sign, s);
        sparse_expand(b.sflag, b.scnt, b.soff, nb_sign, payload + h.seg[kPwSegSignBlocks].offset,
                      h.seg[kPwSegSignBlocks].length / kBlockBytes, sign_bytes, b.signw, b.err, kErrSignSparse, s);
        k_sign_tail<<<1, 1, 0, s>>>(b.signw, n, b.err);
        ZB_LAUNCHED("k_sign_tail");
    }
    t1.end();
    uint32_t *err_host = reinterpret_cast<uint32_t *>(c.host_small);
    ZB_CUDA(cudaMemcpyAsync(err_host, b.err, 4, cudaMemcpyDeviceToHost, s));
    ZB_CUDA(cudaStreamSynchronize(s));
    if (*err_host & kErrSignSparse) corrupt("sign bits do not match their flags");
    if (*err_host & kErrSignTail) corrupt("sign bits past the end");
    *kernel_seconds += t1.seconds();

    // The inner stream into out (its bytes are covered by the container's checksum).
    {
        KernelTimer t2(c, s);
        const uint8_t *ipay = payload + in_off + ih.header_bytes();
        if (fast_layout_version(ih.version)) decode<T>(c, ih, ipay, true, out, true, false, s, t2);
        else v2_decode<T>(c, ih, ipay, true, out, true, false, s, t2);
        *kernel_seconds += t2.seconds();
    }

    // exp2 and signs, then the stored values.
    KernelTimer t3(c, s);
    t3.begin("pw exp");
    if (n) {
        k_pw_exp<T><<<grid_for(n, 256), 256, 0, s>>>(out, b.signw, n);
        ZB_LAUNCHED("k_pw_exp");
    }
    t3.end();
    if (h.exceptions) {
        dec::ExceptionDecoder ex;
        ex.init(n, h.exceptions, h.runs);
        const size_t etb = ex.scan_bytes(s);
        void *etemp = nullptr;
        auto carve_ex = [&](Carver &cv) {
            ex.carve(cv);
            etemp = cv.take<uint8_t>(etb);
        };
        carve_from(c.arena[kArenaExceptions], carve_ex);
        const uint8_t *xs[5];
        for (int i = 0; i < 5; ++i) xs[i] = payload + h.seg[kPwSegExceptions + i].offset;
        t3.begin("pw exceptions");
        ex.run<T>(xs, h.seg[kPwSegExceptions + 1].length, h.seg[kPwSegExceptions + 3].length, out, b.err, etemp, etb,
                  s);
        t3.end();
        ZB_CUDA(cudaMemcpyAsync(err_host, b.err, 4, cudaMemcpyDeviceToHost, s));
        ZB_CUDA(cudaStreamSynchronize(s));
        if (*err_host) fail(ZB_ERR_CORRUPT, dec::error_text(*err_host));
    }
    if (!dst_on_device) download(c, dst, out, n * sizeof(T), s);
    else if (own_out) ZB_CUDA(cudaMemcpyAsync(dst, out, n * sizeof(T), cudaMemcpyDeviceToDevice, s));
    ZB_CUDA(cudaStreamSynchronize(s));
    *kernel_seconds += t3.seconds();
}

}  // namespace
}  // namespace pw

size_t pwrel_encode(Context &c, const zb_params &p, zb_dtype dtype, const Shape &shape, const void *d_x,
                    const void *h_x, const StreamTarget &out, bool choose_on_host, cudaStream_t s,
                    double *kernel_seconds) {
    if (dtype == ZB_F64)
        return pw::encode_t<double>(c, p, shape, static_cast<const double *>(d_x), static_cast<const double *>(h_x),
                                    out, choose_on_host, s, kernel_seconds);
    return pw::encode_t<float>(c, p, shape, static_cast<const float *>(d_x), static_cast<const float *>(h_x), out,
                               choose_on_host, s, kernel_seconds);
}

void pwrel_decode(Context &c, const Header &h, const uint8_t *stream, bool src_on_device, void *dst,
                  bool dst_on_device, bool verify_crc, cudaStream_t s, double *kernel_seconds) {
    if (h.dtype == ZB_F64)
        pw::decode_t<double>(c, h, stream, src_on_device, dst, dst_on_device, verify_crc, s, kernel_seconds);
    else
        pw::decode_t<float>(c, h, stream, src_on_device, dst, dst_on_device, verify_crc, s, kernel_seconds);
}

}  // namespace gpu
}  // namespace zb
