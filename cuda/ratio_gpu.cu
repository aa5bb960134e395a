// The ratio encoder stage on the GPU (docs/FORMAT.md, "Ratio encoder (format v2)"); see ratio_gpu.cuh for the API.
//
// Encode (device memory throughout; the codebook is built on the host by the same functions as the CPU's):
//   k_hist        privatized shared-memory histogram (runs of equal symbols among 8 neighbours added at once);
//                 with a run symbol k_hist_runs: token histogram, and every thread's run carry (block scan) stored
//   -> sync, host: package-merge lengths, canonical codes, code table upload, total bits = sum hist * len
//   k_sub_bits    bits of every sub-block (one block of S/32 threads per sub-block, 32 symbols per thread);
//                 k_sub_bits_runs also stores every thread's bit offset inside its sub-block
//   k_part_scan   one block: exclusive scan of the partition sums -> absolute bit offset of every partition
//   k_offsets     one warp per partition: start bit of every sub-block; zeroes the words two sub-blocks share
//   k_encode      one block per sub-block: block scan of the threads' bit counts, codes OR-ed into shared words,
//                 written out (shared boundary words with atomicOr, the others with plain stores); k_encode_runs
//                 takes the carries and offsets of the kernels before and tokenizes once, with no scan
//   sparse_flags + exclusive_sum + scan_totals (sparse_gpu.cu, scan_gpu.cu) -> sync (non-zero block count)
// write(): codebook upload, k_metadata (offsets and lengths), flag bytes, sparse_copy of the non-zero blocks.
// Decode: host codebook -> tables; sparse_read_flags / exclusive_sum / sparse_expand into a zero-padded word
// buffer; k_decode: one warp per partition, one lane per sub-block (offsets from a warp scan of the lengths, every
// entry validated), an 11-bit lookup table in shared memory, 8 symbols per 16-byte store; with run tokens up to
// two items per loop iteration and a bounded amount of run filling, so the lanes of a warp keep in step.
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <algorithm>
#include <cstring>
#include <mutex>
#include "gpu_device.cuh"
#include "gpu_internal.h"
#include "ratio_gpu.cuh"

namespace zb {
namespace gpu {
namespace {

constexpr uint32_t kSharedHistBins = 8192;   // histogram in shared memory up to this alphabet size
constexpr uint32_t kSharedTable = 4096;      // code table / symbol permutation in shared memory up to this size
constexpr int kHistThreads = 512;
constexpr int kDecodeThreads = 64;           // two partitions per block
constexpr int kLutSize = 1 << kRatioLutBits;
constexpr int kL = kRatioMaxCodeLength;
// Decode table blob (32-bit words): lut, limit[17], first[17], base[17], then the permutation as u16 pairs.
constexpr int kBlobLimit = kLutSize, kBlobFirst = kBlobLimit + kL + 1, kBlobBase = kBlobFirst + kL + 1;
constexpr int kBlobPerm = kBlobBase + kL + 1;

enum RatioError : uint32_t {
    kRErrSymbol = 1u << 0,     // encoder: a symbol >= alphabet
    kRErrMeta = 1u << 1,       // decoder: metadata entry out of range
    kRErrCode = 1u << 2,       // decoder: a bit pattern that is no code
    kRErrLength = 1u << 3,     // decoder: a sub-block does not decode to its length
    kRErrPadding = 1u << 4,    // decoder: non-zero bits after the last code
    kRErrFlags = 1u << 5,      // decoder: block flags past the end
    kRErrBlocks = 1u << 6,     // decoder: flags disagree with the stored blocks, or block padding not zero
};

// ---- run tokens (zb_ratio.h): a thread tokenizes its 32 symbols; runs continue across the threads of a sub-block
// through a block scan of (all z, trailing z count), and the thread where a run ends (at a symbol other than z, or
// the last thread with symbols at the sub-block's end) emits its token.

constexpr uint32_t kAllRun = 1u << 31;  // summary flag: every symbol of the thread is z (the low bits count them)

struct RunScanOp {
    __device__ __forceinline__ uint32_t operator()(uint32_t a, uint32_t b) const {
        return (b & kAllRun) ? ((a & b & kAllRun) | ((a & ~kAllRun) + (b & ~kAllRun))) : b;
    }
};

// The thread's 32 symbols [i0, i0 + 32) as 16 words (two per word, the first in the low half); cnt of them exist.
__device__ __forceinline__ int load_symbols(const uint16_t *__restrict__ sym, uint64_t i0, uint64_t end,
                                            uint32_t (&w)[16]) {
    if (i0 + 32 <= end) {
        const uint4 *v4 = reinterpret_cast<const uint4 *>(sym + i0);
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const uint4 v = __ldg(v4 + q);
            w[4 * q] = v.x;
            w[4 * q + 1] = v.y;
            w[4 * q + 2] = v.z;
            w[4 * q + 3] = v.w;
        }
        return 32;
    }
    const int cnt = i0 < end ? (int)(end - i0) : 0;
#pragma unroll
    for (int k = 0; k < 16; ++k) {
        const uint32_t a = 2 * k < cnt ? sym[i0 + 2 * k] : 0u, b = 2 * k + 1 < cnt ? sym[i0 + 2 * k + 1] : 0u;
        w[k] = a | (b << 16);
    }
    return cnt;
}

// Bit k set: symbol k of the thread exists (k < cnt) and is z.
__device__ __forceinline__ uint32_t run_mask(const uint32_t (&w)[16], int cnt, uint32_t z) {
    const uint32_t zz = z < 0x10000u ? z | (z << 16) : 0u;
    uint32_t m = 0;
#pragma unroll
    for (int k = 0; k < 16; ++k) {
        const uint32_t eq = __vcmpeq2(w[k], zz);  // 0xFFFF in each equal half
        m |= ((eq & 1u) | ((eq >> 15) & 2u)) << (2 * k);
    }
    if (z >= 0x10000u) m = 0;
    return cnt >= 32 ? m : m & ((1u << cnt) - 1u);
}

// Scan summary of a thread's symbols: kAllRun | 32 when all are z, else the trailing z count. (Only the last
// thread with symbols can have fewer than 32, and no thread reads its summary.)
__device__ __forceinline__ uint32_t run_summary(uint32_t mask) {
    return mask == kFullMask ? (kAllRun | 32u) : (uint32_t)__clz(~mask);
}

// Calls emit(symbol or token, extra bits, extra) for the thread's items: the symbols other than z are visited
// through the mask (z-heavy pieces cost a few iterations), their values read again from `sym` (an L1 hit). carry:
// z symbols before the thread's first symbol in the sub-block; last: this thread ends the sub-block's symbols (it
// emits a run still open).
template <typename F>
__device__ __forceinline__ void tokenize_thread(const uint16_t *__restrict__ sym, uint64_t i0, int cnt, uint32_t mask,
                                                uint32_t carry, bool last, uint32_t A, uint32_t z, F &&emit) {
    uint32_t run = carry;
    uint32_t others = ~mask & (cnt >= 32 ? kFullMask : ((1u << cnt) - 1u));
    int prev = -1;
    while (others) {
        const int p = __ffs(others) - 1;
        others &= others - 1;
        run += (uint32_t)(p - prev - 1);
        prev = p;
        if (run) ratio_emit_run(run, A, z, emit);
        run = 0;
        emit(__ldg(sym + i0 + p), 0, 0u);
    }
    run += (uint32_t)(cnt - prev - 1);
    if (last && run) ratio_emit_run(run, A, z, emit);
}

// Per thread of a sub-block block (TPB threads, 32 symbols each): loads the symbols and the run carry. Contains a
// block-wide scan: every thread of the block must call it.
template <int TPB> struct SubBlockRuns {
    using Scan = cub::BlockScan<uint32_t, TPB>;
    typename Scan::TempStorage tmp;
    // Loads the thread's symbols of sub-block j: w, cnt, their z mask, the carry, whether it ends the sub-block,
    // and i0, its first symbol's index.
    __device__ __forceinline__ void load(const uint16_t *__restrict__ sym, uint64_t n, uint64_t j, int lg, uint32_t z,
                                         uint32_t (&w)[16], int &cnt, uint32_t &mask, uint32_t &carry, bool &last,
                                         uint64_t &i0) {
        const uint64_t base = j << lg, end = min((unsigned long long)n, (unsigned long long)(base + (1ull << lg)));
        i0 = base + 32 * (uint64_t)threadIdx.x;
        cnt = load_symbols(sym, i0, end, w);
        last = cnt > 0 && i0 + 32 >= end;
        mask = run_mask(w, cnt, z);
        uint32_t prefix;
        Scan(tmp).ExclusiveScan(run_summary(mask), prefix, kAllRun, RunScanOp());
        carry = prefix & ~kAllRun;
    }
};

std::string error_text(uint32_t e) {
    if (e & kRErrFlags) return "ratio bitstream: block flags past the end of the bitstream";
    if (e & kRErrBlocks) return "ratio bitstream: inconsistent zero-block flags";
    if (e & kRErrPadding) return "ratio bitstream: padding bits after the last code are not zero";
    if (e & kRErrMeta) return "ratio metadata: impossible offset or length";
    if (e & kRErrCode) return "ratio bitstream: invalid code";
    return "ratio bitstream: a sub-block does not decode to its length";
}

__device__ __forceinline__ uint32_t bswap32(uint32_t v) { return __byte_perm(v, 0, 0x0123); }

template <typename F> inline void timed(KernelTimer *t, const char *name, F &&f) {
    if (t) t->begin(name);
    f();
    if (t) t->end();
}

// ---- encoder kernels ---------------------------------------------------------------------------------------------

template <bool kShared>
__global__ void __launch_bounds__(kHistThreads)
k_hist(const uint16_t *__restrict__ sym, uint64_t n, uint32_t A, uint32_t *__restrict__ hist, uint32_t *err) {
    extern __shared__ uint32_t sh[];
    if constexpr (kShared) {
        for (uint32_t i = threadIdx.x; i < A; i += blockDim.x) sh[i] = 0;
        __syncthreads();
    }
    uint32_t *h = kShared ? sh : hist;
    bool bad = false;
    auto add = [&](uint32_t s, uint32_t c) {
        if (s < A) atomicAdd(&h[s], c);
        else bad = true;
    };
    const uint64_t nv = n >> 3;
    const uint4 *v4 = reinterpret_cast<const uint4 *>(sym);
    for (uint64_t c = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; c < nv; c += (uint64_t)gridDim.x * blockDim.x) {
        const uint4 v = __ldg(v4 + c);
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
        uint32_t prev = w[0] & 0xFFFFu, run = 1;
#pragma unroll
        for (int k = 1; k < 8; ++k) {
            const uint32_t s = (w[k >> 1] >> (16 * (k & 1))) & 0xFFFFu;
            if (s == prev) {
                ++run;
            } else {
                add(prev, run);
                prev = s;
                run = 1;
            }
        }
        add(prev, run);
    }
    if (blockIdx.x == 0 && threadIdx.x < (n & 7)) add(sym[(nv << 3) + threadIdx.x], 1);
    if (bad) atomicOr(err, kRErrSymbol);
    if constexpr (kShared) {
        __syncthreads();
        for (uint32_t i = threadIdx.x; i < A; i += blockDim.x)
            if (sh[i]) atomicAdd(&hist[i], sh[i]);
    }
}

// Token histogram (runs possible): blocks of one sub-block's threads loop over sub-blocks; shared bins when AT fits.
// Also stores every thread's run carry for k_sub_bits_runs and k_encode_runs.
template <int LG, bool kShared>
__global__ void __launch_bounds__(1 << (LG - 5))
k_hist_runs(const uint16_t *__restrict__ sym, uint64_t n, uint64_t B, uint32_t A, uint32_t z,
            uint32_t *__restrict__ hist, uint16_t *__restrict__ carries, uint32_t *err) {
    constexpr int TPB = 1 << (LG - 5);
    extern __shared__ uint32_t sh[];
    __shared__ SubBlockRuns<TPB> runs;
    const uint32_t AT = A + kRatioRunTokens;
    if constexpr (kShared) {
        for (uint32_t i = threadIdx.x; i < AT; i += blockDim.x) sh[i] = 0;
        __syncthreads();
    }
    uint32_t *h = kShared ? sh : hist;
    const uint32_t AA = A | (A << 16);  // A < 65536 with runs
    uint32_t bad = 0;
    for (uint64_t j = blockIdx.x; j < B; j += gridDim.x) {
        uint32_t w[16], mask, carry;
        int cnt;
        bool last;
        uint64_t i0;
        runs.load(sym, n, j, LG, z, w, cnt, mask, carry, last, i0);
        carries[(j << (LG - 5)) + threadIdx.x] = (uint16_t)carry;  // < S
        // A symbol >= A would count as a token or fall outside: the call fails (symbols past cnt are 0).
#pragma unroll
        for (int k = 0; k < 16; ++k) bad |= __vcmpgeu2(w[k], AA);
        if (!bad)  // a bad symbol may index past the bins
            tokenize_thread(sym, i0, cnt, mask, carry, last, A, z,
                            [&](uint32_t v, int, uint32_t) { atomicAdd(&h[v], 1u); });
        __syncthreads();  // the scan storage is reused
    }
    if (bad) atomicOr(err, kRErrSymbol);
    if constexpr (kShared) {
        __syncthreads();
        for (uint32_t i = threadIdx.x; i < AT; i += blockDim.x)
            if (sh[i]) atomicAdd(&hist[i], sh[i]);
    }
}

// Code table entries (code << 16 | length) of the 32 symbols [i0, i0 + 32) (entries past n are 0).
__device__ __forceinline__ void load_codes(const uint16_t *__restrict__ sym, uint64_t i0, uint64_t n,
                                           const uint32_t *table, uint32_t (&e)[32]) {
    if (i0 + 32 <= n) {
        const uint4 *v4 = reinterpret_cast<const uint4 *>(sym + i0);
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const uint4 v = __ldg(v4 + q);
            const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int k = 0; k < 8; ++k) e[8 * q + k] = table[(w[k >> 1] >> (16 * (k & 1))) & 0xFFFFu];
        }
    } else {
#pragma unroll
        for (int k = 0; k < 32; ++k) e[k] = i0 + (uint64_t)k < n ? table[sym[i0 + (uint64_t)k]] : 0u;
    }
}

// Loads the code table into shared memory when it fits (kShared), returns the table to use.
template <bool kShared>
__device__ __forceinline__ const uint32_t *code_table(const uint32_t *__restrict__ g, uint32_t A, uint32_t *sh) {
    if constexpr (kShared) {
        for (uint32_t i = threadIdx.x; i < A; i += blockDim.x) sh[i] = g[i];
        __syncthreads();
        return sh;
    } else {
        return g;
    }
}

// Bits of every sub-block (no run tokens).
template <int LG, bool kShared>
__global__ void __launch_bounds__(1 << (LG - 5))
k_sub_bits(const uint16_t *__restrict__ sym, uint64_t n, uint32_t AT, const uint32_t *__restrict__ enc,
           uint32_t *__restrict__ bits) {
    constexpr int TPB = 1 << (LG - 5);
    extern __shared__ uint32_t sh[];
    const uint32_t *table = code_table<kShared>(enc, AT, sh);
    uint32_t b = 0;
    uint32_t e[32];
    load_codes(sym, ((uint64_t)blockIdx.x << LG) + 32 * (uint64_t)threadIdx.x, n, table, e);
#pragma unroll
    for (int k = 0; k < 32; ++k) b += e[k] & 31u;
    using Reduce = cub::BlockReduce<uint32_t, TPB>;
    __shared__ typename Reduce::TempStorage tmp;
    const uint32_t sum = Reduce(tmp).Sum(b);
    if (threadIdx.x == 0) bits[blockIdx.x] = sum;
}

// The thread's symbols of sub-block blockIdx.x with run tokens: its z mask, whether it ends the sub-block and i0
// (the run carries come from k_hist_runs, which tokenized the same symbols with the same run symbol).
template <int LG>
__device__ __forceinline__ int load_run_mask(const uint16_t *__restrict__ sym, uint64_t n, uint32_t z,
                                             uint32_t &mask, bool &last, uint64_t &i0) {
    const uint64_t base = (uint64_t)blockIdx.x << LG;
    const uint64_t end = min((unsigned long long)n, (unsigned long long)(base + (1ull << LG)));
    i0 = base + 32 * (uint64_t)threadIdx.x;
    uint32_t w[16];
    const int cnt = load_symbols(sym, i0, end, w);
    last = cnt > 0 && i0 + 32 >= end;
    mask = run_mask(w, cnt, z);
    return cnt;
}

// Bits of every sub-block with run tokens, and every thread's bit offset inside its sub-block (toff), so that
// k_encode_runs tokenizes once and needs no scan.
template <int LG, bool kShared>
__global__ void __launch_bounds__(1 << (LG - 5))
k_sub_bits_runs(const uint16_t *__restrict__ sym, uint64_t n, uint32_t AT, uint32_t A, uint32_t z,
                const uint32_t *__restrict__ enc, const uint16_t *__restrict__ carries, uint32_t *__restrict__ toff,
                uint32_t *__restrict__ bits) {
    constexpr int TPB = 1 << (LG - 5);
    extern __shared__ uint32_t sh[];
    const uint32_t *table = code_table<kShared>(enc, AT, sh);
    const uint64_t t = ((uint64_t)blockIdx.x << (LG - 5)) + threadIdx.x;
    uint32_t mask;
    bool last;
    uint64_t i0;
    const int cnt = load_run_mask<LG>(sym, n, z, mask, last, i0);
    uint32_t b = 0;
    tokenize_thread(sym, i0, cnt, mask, carries[t], last, A, z,
                    [&](uint32_t v, int xb, uint32_t) { b += (table[v] & 31u) + xb; });
    using Scan = cub::BlockScan<uint32_t, TPB>;
    __shared__ typename Scan::TempStorage tmp;
    uint32_t off, sum;
    Scan(tmp).ExclusiveSum(b, off, sum);
    toff[t] = off;
    if (threadIdx.x == 0) bits[blockIdx.x] = sum;
}

// One block: poff[p] = sum of the bits of all sub-blocks before partition p.
__global__ void __launch_bounds__(1024)
k_part_scan(const uint32_t *__restrict__ bits, uint64_t B, uint64_t P, unsigned long long *__restrict__ poff) {
    using Scan = cub::BlockScan<unsigned long long, 1024>;
    __shared__ typename Scan::TempStorage tmp;
    unsigned long long carry = 0;
    for (uint64_t b0 = 0; b0 < P; b0 += 1024) {
        const uint64_t p = b0 + threadIdx.x;
        unsigned long long v = 0;
        if (p < P)
            for (uint64_t j = p * kRatioPartition; j < B && j < (p + 1) * kRatioPartition; ++j) v += bits[j];
        unsigned long long ex, agg;
        Scan(tmp).ExclusiveSum(v, ex, agg);
        if (p < P) poff[p] = carry + ex;
        carry += agg;
        __syncthreads();
    }
}

// One warp per partition: start bit of every sub-block; zeroes the words that two neighbours share (they are
// OR-ed by k_encode) and the words after the bitstream up to the end of its last 16-byte block.
__global__ void k_offsets(const uint32_t *__restrict__ bits, const unsigned long long *__restrict__ poff, uint64_t B,
                          uint64_t P, uint64_t total, uint64_t nwords_padded, unsigned long long *__restrict__ start,
                          uint32_t *__restrict__ words) {
    const uint64_t p = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (p >= P) return;  // whole warps
    const int lane = threadIdx.x & 31;
    const uint64_t j = p * kRatioPartition + (uint64_t)lane;
    const uint32_t b = j < B ? bits[j] : 0u;
    uint32_t incl = b;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const uint32_t o = __shfl_up_sync(kFullMask, incl, d);
        if (lane >= d) incl += o;
    }
    if (j >= B) return;
    const unsigned long long st = poff[p] + (incl - b);
    start[j] = st;
    if (st & 31) words[st >> 5] = 0;
    if (j == B - 1) {
        if (total & 31) words[total >> 5] = 0;
        for (uint64_t w = (total + 31) >> 5; w < nwords_padded; ++w) words[w] = 0;
    }
}

// The words of sub-block j in shared memory -> out (stream byte order); the words shared with a neighbour with
// atomicOr (k_offsets zeroed them), the others with plain stores.
template <int TPB>
__device__ __forceinline__ void store_words(const uint32_t *wbuf, uint64_t st, uint32_t nbits, uint32_t *out) {
    const int lead = (int)(st & 31);
    const uint32_t nw = (uint32_t)((lead + nbits + 31) >> 5);
    const uint64_t g0 = st >> 5;
    const bool end_shared = ((st + nbits) & 31) != 0;
    for (uint32_t k = threadIdx.x; k < nw; k += TPB) {
        const uint32_t v = bswap32(wbuf[k]);  // stream order: the first bit is the top bit of the first byte
        if ((k == 0 && lead) || (k == nw - 1 && end_shared)) atomicOr(&out[g0 + k], v);
        else out[g0 + k] = v;
    }
}

// A thread's codes into the shared words: put(code, l) appends l <= 28 bits (a code with its extra bits) at bit
// position pos (relative to wbuf[0]'s top bit) through a 64-bit accumulator; flush() writes the partial last word.
struct WordWriter {
    uint32_t *wbuf;
    uint32_t wi;
    int fill;
    unsigned long long acc = 0;
    __device__ __forceinline__ WordWriter(uint32_t *b, uint32_t pos) : wbuf(b), wi(pos >> 5), fill((int)(pos & 31)) {}
    __device__ __forceinline__ void put(uint32_t code, int l) {
        acc |= (unsigned long long)code << (64 - fill - l);
        fill += l;
        if (fill >= 32) {
            atomicOr(&wbuf[wi++], (uint32_t)(acc >> 32));
            acc <<= 32;
            fill -= 32;
        }
    }
    __device__ __forceinline__ void flush() {
        if (fill > 0) atomicOr(&wbuf[wi], (uint32_t)(acc >> 32));
    }
};

template <int LG, bool kShared>
__global__ void __launch_bounds__(1 << (LG - 5))
k_encode(const uint16_t *__restrict__ sym, uint64_t n, uint32_t AT, const uint32_t *__restrict__ enc,
         const uint32_t *__restrict__ bits, const unsigned long long *__restrict__ start, uint32_t *__restrict__ out) {
    constexpr int TPB = 1 << (LG - 5);
    constexpr int kMaxWords = (1 << LG) * kL / 32 + 2;
    extern __shared__ uint32_t sh[];
    __shared__ uint32_t wbuf[kMaxWords];
    using Scan = cub::BlockScan<uint32_t, TPB>;
    __shared__ typename Scan::TempStorage tmp;
    const uint64_t j = blockIdx.x;
    const uint64_t st = start[j];
    const uint32_t nbits = bits[j];
    const uint32_t nw = (uint32_t)(((st & 31) + nbits + 31) >> 5);
    for (uint32_t k = threadIdx.x; k < nw; k += TPB) wbuf[k] = 0;
    const uint32_t *table = code_table<kShared>(enc, AT, sh);  // synchronizes when it loads
    uint32_t e[32];
    uint32_t mine = 0;
    load_codes(sym, (j << LG) + 32 * (uint64_t)threadIdx.x, n, table, e);
#pragma unroll
    for (int k = 0; k < 32; ++k) mine += e[k] & 31u;
    uint32_t off;
    Scan(tmp).ExclusiveSum(mine, off);
    __syncthreads();  // wbuf zeroed
    WordWriter ww(wbuf, (uint32_t)(st & 31) + off);
#pragma unroll
    for (int k = 0; k < 32; ++k) {
        const int l = (int)(e[k] & 31u);
        if (l) ww.put(e[k] >> 16, l);  // l = 0: past the last symbol
    }
    ww.flush();
    __syncthreads();
    store_words<TPB>(wbuf, st, nbits, out);
}

// k_encode with run tokens: the carries (k_hist_runs) and the threads' bit offsets (k_sub_bits_runs) are known, so
// every thread tokenizes its symbols once, straight into the shared words.
template <int LG, bool kShared>
__global__ void __launch_bounds__(1 << (LG - 5))
k_encode_runs(const uint16_t *__restrict__ sym, uint64_t n, uint32_t AT, uint32_t A, uint32_t z,
              const uint32_t *__restrict__ enc, const uint32_t *__restrict__ bits,
              const unsigned long long *__restrict__ start, const uint16_t *__restrict__ carries,
              const uint32_t *__restrict__ toff, uint32_t *__restrict__ out) {
    constexpr int TPB = 1 << (LG - 5);
    constexpr int kMaxWords = (1 << LG) * kL / 32 + 2;
    extern __shared__ uint32_t sh[];
    __shared__ uint32_t wbuf[kMaxWords];
    const uint64_t j = blockIdx.x, t = (j << (LG - 5)) + threadIdx.x;
    const uint64_t st = start[j];
    const uint32_t nbits = bits[j];
    const uint32_t nw = (uint32_t)(((st & 31) + nbits + 31) >> 5);
    for (uint32_t k = threadIdx.x; k < nw; k += TPB) wbuf[k] = 0;
    const uint32_t *table = code_table<kShared>(enc, AT, sh);
    uint32_t mask;
    bool last;
    uint64_t i0;
    const int cnt = load_run_mask<LG>(sym, n, z, mask, last, i0);
    const uint32_t carry = carries[t];
    WordWriter ww(wbuf, (uint32_t)(st & 31) + toff[t]);
    if constexpr (!kShared) __syncthreads();  // wbuf zeroed (code_table synchronizes when it loads)
    tokenize_thread(sym, i0, cnt, mask, carry, last, A, z, [&](uint32_t v, int xb, uint32_t extra) {
        const uint32_t e = table[v];
        ww.put(((e >> 16) << xb) | extra, (int)(e & 31u) + xb);
    });
    ww.flush();
    __syncthreads();
    store_words<TPB>(wbuf, st, nbits, out);
}

__device__ __forceinline__ void put_le(uint8_t *p, unsigned long long v, int bytes) {
    for (int i = 0; i < bytes; ++i) p[i] = (uint8_t)(v >> (8 * i));
}

__global__ void k_metadata(const uint32_t *__restrict__ bits, const unsigned long long *__restrict__ poff, uint64_t n,
                           int lg, uint64_t B, uint64_t P, bool runs, uint8_t *__restrict__ dst) {
    const uint64_t j = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= B) return;
    const uint64_t p = j / kRatioPartition, r = j % kRatioPartition;
    const uint64_t bp = min((unsigned long long)kRatioPartition, (unsigned long long)(B - p * kRatioPartition));
    if (r == 0) put_le(dst + 8 * p, poff[p], 8);
    if (r + 1 < bp) {
        const uint64_t cnt = min((unsigned long long)(1ull << lg), (unsigned long long)(n - (j << lg)));
        put_le(dst + 8 * P + 2 * ((kRatioPartition - 1) * p + r), bits[j] - (runs ? 1 : cnt), 2);  // length floor
    }
}

// ---- decoder kernel ------------------------------------------------------------------------------------------------

__device__ __forceinline__ unsigned long long get_le(const uint8_t *p, int bytes) {
    unsigned long long v = 0;
    for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

struct DecodeArgs {
    const uint32_t *words;     // the expanded bitstream (stream-order bytes), zero padded
    const uint8_t *meta;       // segment 1 (device, any alignment)
    const uint32_t *blob;      // decode tables
    uint16_t *out;
    uint64_t n, B, P, total;
    uint32_t used;
    int lg, min_len, max_len;
    uint32_t A, z;             // symbols and the run symbol (run tokens: codes A .. A + 22)
    uint32_t *err;
};

template <bool kSharedPerm, bool kRuns>
__global__ void __launch_bounds__(kDecodeThreads) k_decode(DecodeArgs a) {
    extern __shared__ uint32_t sh[];
    const int nshared = kBlobPerm + (kSharedPerm ? (int)((a.used + 1) / 2) : 0);
    for (int i = threadIdx.x; i < nshared; i += blockDim.x) sh[i] = a.blob[i];
    __syncthreads();
    const uint32_t *lut = sh, *limit = sh + kBlobLimit, *first = sh + kBlobFirst, *base = sh + kBlobBase;
    const uint16_t *perm = reinterpret_cast<const uint16_t *>(kSharedPerm ? sh + kBlobPerm : a.blob + kBlobPerm);

    if (blockIdx.x == 0 && threadIdx.x == 0 && (a.total & 7)) {
        const uint64_t last = (a.total - 1) >> 3;
        const uint8_t byte = reinterpret_cast<const uint8_t *>(a.words)[last];
        if (byte & (0xFFu >> (a.total & 7))) set_error(a.err, kRErrPadding);
    }
    const uint64_t p = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (p >= a.P) return;  // whole warps
    const int lane = threadIdx.x & 31;
    const uint64_t S = 1ull << a.lg, j = p * kRatioPartition + (uint64_t)lane;
    const uint64_t bp = min((unsigned long long)kRatioPartition, (unsigned long long)(a.B - p * kRatioPartition));
    const uint64_t cnt = j < a.B ? min((unsigned long long)S, (unsigned long long)(a.n - j * S)) : 0;
    const unsigned long long off = get_le(a.meta + 8 * p, 8);
    const unsigned long long next = p + 1 < a.P ? get_le(a.meta + 8 * (p + 1), 8) : a.total;
    const bool stored = (uint64_t)lane + 1 < bp;
    const uint32_t floor_bits = kRuns ? 1u : (uint32_t)cnt;  // ratio_length_floor
    const uint32_t mine =
        stored ? floor_bits + (uint32_t)get_le(a.meta + 8 * a.P + 2 * ((kRatioPartition - 1) * p + lane), 2) : 0u;
    uint32_t incl = mine;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const uint32_t o = __shfl_up_sync(kFullMask, incl, d);
        if (lane >= d) incl += o;
    }
    if ((uint64_t)lane >= bp) return;
    const unsigned long long st = off + (incl - mine);
    bool bad = (p == 0 && off != 0) || off > a.total || next > a.total;
    unsigned long long nbits = mine;
    if (!stored) {
        bad = bad || next < st;
        nbits = next - st;
    }
    bad = bad || nbits < (kRuns ? 1 : cnt) * (uint64_t)a.min_len || nbits > cnt * (uint64_t)a.max_len ||
          st + nbits > a.total;
    if (bad) {
        set_error(a.err, kRErrMeta);
        return;
    }
    // Bit reader: buf holds nb valid bits at its top; refilled a word at a time (the buffer is padded with zeros
    // for S * 16 bits past the end, so even corrupt data stays in bounds).
    const uint32_t *w = a.words + (st >> 5);
    const int sh0 = (int)(st & 31);
    unsigned long long buf = (((unsigned long long)bswap32(__ldg(w)) << 32) | bswap32(__ldg(w + 1))) << sh0;
    int nb = 64 - sh0;
    w += 2;
    const uint32_t *const w_start = w - 2;
    bool invalid = false;
    // Without run tokens (a code of at most 16 bits per symbol) the next word is loaded ahead, and a warp refills
    // its lanes together: when any lane is below 16 bits, every lane with room (at most 32 bits buffered) takes its
    // word loaded ahead and loads the next. A lane refilling alone waited for its load at once, and with 32 lanes
    // some lane refilled at nearly every symbol: the warp waited for a load per symbol (ncu: 30-47 % of the stall
    // samples; NOTES 111). With run tokens (up to 28 bits per item) the lanes refill at almost every item either
    // way, and the word ahead measured no gain there.
    constexpr bool kAhead = !kRuns;
    uint32_t ahead = kAhead ? __ldg(w++) : 0u;
    // Runs: refill below 32 bits, so a code (<= 16 bits) and its extra bits (<= 12) are always there.
    auto one = [&]() -> uint32_t {
        bool need = nb < (kRuns ? 32 : 16);
        if constexpr (kAhead) need = __any_sync(__activemask(), need) && nb <= 32;
        if (need) {
            uint32_t word;
            if constexpr (kAhead) {
                word = ahead;
                ahead = __ldg(w++);
            } else {
                word = __ldg(w++);
            }
            buf |= (unsigned long long)bswap32(word) << (32 - nb);
            nb += 32;
        }
        const uint32_t e = lut[buf >> (64 - kRatioLutBits)];
        uint32_t l = e & 31u, s = e >> 16;
        if (!l) {
            // The length is the first k > kRatioLutBits with w16 < limit[k]; limit grows with k, so k is
            // kRatioLutBits + 1 plus the count of limits <= w16 (independent loads instead of a search).
            const uint32_t w16 = (uint32_t)(buf >> 48);
            int k = kRatioLutBits + 1;
#pragma unroll
            for (int q = kRatioLutBits + 1; q <= kL; ++q) k += (q <= a.max_len && w16 >= limit[q]) ? 1 : 0;
            if (k <= a.max_len) {
                l = (uint32_t)k;
                s = perm[base[k] + (w16 >> (kL - k)) - first[k]];
            } else {
                invalid = true;
                l = 1;
            }
        }
        buf <<= l;
        nb -= (int)l;
        return s;
    };
    uint16_t *o = a.out + j * S;
    uint64_t i = 0;
    if constexpr (kRuns) {
        // Every iteration costs about the same in every lane (lanes decode different sub-blocks in lockstep): it
        // decodes up to two items while no run is pending and fewer than 8 symbols are staged, then moves at most
        // 8 symbols of a pending run to the staging register, or stores up to 32 z of it directly. Staging: a
        // 128-bit shift register (lo, hi), the c newest symbols at its top; at c = 8 it holds the next 8 symbols
        // in store order. Counters are 32-bit (cnt <= 4096).
        unsigned long long lo = 0, hi = 0;
        uint32_t c = 0, R = 0, k32 = 0;  // staged symbols, copies of z still to stage, symbols stored
        const uint32_t cnt32 = (uint32_t)cnt;
        const unsigned long long z4 = (unsigned long long)a.z * 0x0001000100010001ull;
        const uint32_t zz = a.z | (a.z << 16);
        bool overrun = false;
        auto item = [&] {
            const uint32_t v = one();
            if (v < a.A) {
                lo = (lo >> 16) | (hi << 48);
                hi = (hi >> 16) | ((unsigned long long)v << 48);
                ++c;
            } else {
                const int xb = ratio_run_extra_bits(v - a.A);
                const uint32_t extra = xb ? (uint32_t)(buf >> (64 - xb)) : 0u;
                buf <<= xb;
                nb -= xb;
                R = ratio_run_length(v - a.A, extra);
                if (R > cnt32 - (k32 + c)) {
                    overrun = true;
                    R = 0;
                }
            }
        };
        while (k32 + c < cnt32 && !invalid && !overrun) {
            if (R == 0) {
                item();
                if (R == 0 && c < 8 && k32 + c < cnt32 && !invalid && !overrun) item();  // 3 per iteration: slower
            }
            if (R) {
                if (c == 0 && R >= 8) {
                    const uint4 q = make_uint4(zz, zz, zz, zz);
                    uint4 *d = reinterpret_cast<uint4 *>(o + k32);
                    d[0] = q;
                    if (R >= 16) d[1] = q;
                    if (R >= 24) d[2] = q;
                    if (R >= 32) d[3] = q;
                    const uint32_t k = R >= 32 ? 32u : R & ~7u;
                    k32 += k;
                    R -= k;
                } else {
                    const uint32_t k = min(R, 8 - c);  // 1..8 copies shifted in
                    const int b = 16 * (int)k;         // 16..128 bits
                    if (b >= 64) {
                        lo = b == 64 ? hi : (b == 128 ? z4 : (hi >> (b - 64)) | (z4 << (128 - b)));
                        hi = z4;
                    } else {
                        lo = (lo >> b) | (hi << (64 - b));
                        hi = (hi >> b) | (z4 << (64 - b));
                    }
                    c += k;
                    R -= k;
                }
            }
            if (c == 8) {
                *reinterpret_cast<uint4 *>(o + k32) =
                    make_uint4((uint32_t)lo, (uint32_t)(lo >> 32), (uint32_t)hi, (uint32_t)(hi >> 32));
                k32 += 8;
                c = 0;
            }
        }
        i = k32;
        // The last c < 8 symbols: the top c of the 8 slots.
        for (int k = 0; k < (int)c; ++k) {
            const int slot = 8 - (int)c + k;
            o[i + (uint64_t)k] = (uint16_t)((slot < 4 ? lo >> (16 * slot) : hi >> (16 * (slot - 4))) & 0xFFFFu);
        }
        if (overrun) set_error(a.err, kRErrLength);
    } else {
        for (; i + 8 <= cnt; i += 8) {
            uint32_t v[4];
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                const uint32_t lo = one();
                v[k] = lo | (one() << 16);
            }
            *reinterpret_cast<uint4 *>(o + i) = make_uint4(v[0], v[1], v[2], v[3]);
        }
        for (; i < cnt; ++i) o[i] = (uint16_t)one();
    }
    // Bits consumed: the words read, less the bits still buffered and the first word's bits before the start.
    const unsigned long long used =
        32ull * (unsigned long long)(w - w_start - (kAhead ? 1 : 0)) - (unsigned long long)(nb + sh0);
    if (invalid) set_error(a.err, kRErrCode);
    else if (used != nbits) set_error(a.err, kRErrLength);
}

// ---- host helpers ---------------------------------------------------------------------------------------------

// k_decode's lanes read their sub-blocks' bitstreams a word at a time, each lane its own 128-byte line, which must
// stay in L1 between refills (a warp waits for its slowest lane, so one lane's miss stalls all 32). A kernel with
// dynamic shared memory gets the largest carveout by default: 233 of the SM's 256 KB on the H200, leaving about 23
// KB of L1 for the lines of up to 8 blocks (64 KB; ncu: L1 hit rate 78 % at 1 GB). Asks for the shared memory that
// the grid's blocks per SM need and no more: ratio:decode 1.25 -> 1.18 ms per GB of TREFHT (NOTES 111).
template <typename K> void leave_l1_for_lines(const Context &c, K kernel, unsigned grid, size_t smem) {
    if (c.smem_per_sm <= 0) return;
    const uint64_t blocks = div_up((uint64_t)grid, (uint64_t)std::max(1, c.sm_count));
    const uint64_t need = blocks * (smem + 1024);  // the driver reserves 1 KB per block
    const int carveout = (int)std::min<uint64_t>(100, div_up(100 * need, (uint64_t)c.smem_per_sm));
    ZB_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, carveout));
}

void check_aligned(const void *p, const char *what) {
    if (reinterpret_cast<uintptr_t>(p) & 15)
        fail(ZB_ERR_INVALID_ARG, std::string("ratio: ") + what + " must be 16-byte aligned");
}

// What the encoder kernels need of the codebook.
struct EncodeTable {
    uint32_t size, A, z;  // code table entries (A, or A + kRatioRunTokens with runs), symbols, run symbol
    bool runs;
};

// Buffers of the encoder kernels.
struct EncodeBufs {
    const uint16_t *sym;
    uint64_t n;
    const uint32_t *enc;
    uint32_t *bits;
    const unsigned long long *start;
    uint32_t *words;
    uint16_t *carries;  // run carry of every thread of every sub-block (k_hist_runs), with run tokens
    uint32_t *toff;     // bit offset of every thread inside its sub-block (k_sub_bits_runs), with run tokens
};

template <int LG, bool kShared>
void launch_phase(uint64_t B, const EncodeTable &t, cudaStream_t s, const EncodeBufs &e, int phase) {
    constexpr int TPB = 1 << (LG - 5);
    const size_t shb = kShared ? (size_t)t.size * 4 : 0;
    if (phase == 0) {
        if (t.runs)
            k_sub_bits_runs<LG, kShared><<<(unsigned)B, TPB, shb, s>>>(e.sym, e.n, t.size, t.A, t.z, e.enc, e.carries,
                                                                       e.toff, e.bits);
        else
            k_sub_bits<LG, kShared><<<(unsigned)B, TPB, shb, s>>>(e.sym, e.n, t.size, e.enc, e.bits);
        ZB_LAUNCHED("k_sub_bits");
    } else {
        if (t.runs)
            k_encode_runs<LG, kShared><<<(unsigned)B, TPB, shb, s>>>(e.sym, e.n, t.size, t.A, t.z, e.enc, e.bits,
                                                                     e.start, e.carries, e.toff, e.words);
        else
            k_encode<LG, kShared><<<(unsigned)B, TPB, shb, s>>>(e.sym, e.n, t.size, e.enc, e.bits, e.start, e.words);
        ZB_LAUNCHED("k_encode");
    }
}

template <int LG>
void launch_bits_and_encode(uint64_t B, const EncodeTable &t, cudaStream_t s, const EncodeBufs &e, int phase) {
    if (t.size <= kSharedTable) launch_phase<LG, true>(B, t, s, e, phase);
    else launch_phase<LG, false>(B, t, s, e, phase);
}

void bits_and_encode(int lg, uint64_t B, const EncodeTable &t, cudaStream_t s, const EncodeBufs &e, int phase) {
    switch (lg) {
        case 10: launch_bits_and_encode<10>(B, t, s, e, phase); break;
        case 11: launch_bits_and_encode<11>(B, t, s, e, phase); break;
        default: launch_bits_and_encode<12>(B, t, s, e, phase); break;
    }
}

template <int LG>
void launch_hist_runs(int sm_count, uint64_t B, uint32_t A, uint32_t z, cudaStream_t s, const uint16_t *sym,
                      uint64_t n, uint32_t *hist, uint16_t *carries, uint32_t *err) {
    constexpr int TPB = 1 << (LG - 5);
    const uint32_t AT = A + kRatioRunTokens;
    // One wave of blocks (as many as are resident at once): a second, partial wave of the grid-stride loop left
    // SMs idle at the end.
    auto grid_of = [&](auto kernel, size_t shb) {
        int per_sm = 0;
        ZB_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, TPB, shb));
        return (unsigned)std::max<uint64_t>(1, std::min<uint64_t>(B, (uint64_t)sm_count * (uint64_t)std::max(per_sm, 1)));
    };
    if (AT <= kSharedHistBins) {
        const size_t shb = 4 * (size_t)AT;
        k_hist_runs<LG, true><<<grid_of(k_hist_runs<LG, true>, shb), TPB, shb, s>>>(sym, n, B, A, z, hist, carries, err);
    } else {
        k_hist_runs<LG, false><<<grid_of(k_hist_runs<LG, false>, 0), TPB, 0, s>>>(sym, n, B, A, z, hist, carries, err);
    }
    ZB_LAUNCHED("k_hist_runs");
}

}  // namespace

// ---- encoder -----------------------------------------------------------------------------------------------------

void RatioEncoder::plan(Context &c, Arena &arena, const uint16_t *d_symbols, uint64_t n, uint32_t alphabet,
                        cudaStream_t s, KernelTimer *timer, const RatioOptions &opt) {
    if (alphabet < 2 || alphabet > kRatioMaxAlphabet) fail(ZB_ERR_INVALID_ARG, "ratio: alphabet size must be 2..65536");
    if (n == 0 || n >= (1ull << 32)) fail(ZB_ERR_INVALID_ARG, "ratio: the GPU takes 1 .. 2^32-1 symbols");
    if (opt.sub_block_log2 < kRatioMinSubBlockLog2 || opt.sub_block_log2 > kRatioMaxSubBlockLog2)
        fail(ZB_ERR_INVALID_ARG, "ratio: bad sub-block size");
    check_aligned(d_symbols, "symbols");
    const int lg = opt.sub_block_log2;
    const uint64_t B = ratio_sub_blocks(n, lg), P = div_up(B, kRatioPartition);
    n_ = n;
    B_ = B;
    P_ = P;
    lg_ = lg;
    const uint32_t A = alphabet;
    // Run tokens are an option when the caller names a run symbol; the histogram then counts tokens.
    const uint32_t z =
        opt.run_symbol < A && A <= kRatioRunMaxAlphabet ? opt.run_symbol : kRatioNoRunSymbol;
    const uint32_t AT = z < A ? A + kRatioRunTokens : A;
    // Upper bounds (16 bits per symbol) for everything sized by the bitstream.
    const uint64_t max_bytes = 2 * n, max_blocks = div_up(max_bytes, kBlockBytes), max_groups = div_up(max_blocks, 32);
    size_t scan_bytes = 0;
    exclusive_sum(nullptr, scan_bytes, nullptr, nullptr, max_groups, s);
    struct {
        uint32_t *hist, *err, *enc, *bits, *words, *flagw, *counts, *off, *toff;
        uint16_t *carries;
        unsigned long long *poff, *start, *totals;
        void *temp;
    } b{};
    auto carve = [&](Carver &cv) {
        b.hist = cv.take<uint32_t>(AT);
        b.err = cv.take<uint32_t>(1);
        b.totals = cv.take<unsigned long long>(2);
        b.enc = cv.take<uint32_t>(AT);
        b.bits = cv.take<uint32_t>(B);
        b.poff = cv.take<unsigned long long>(P);
        b.start = cv.take<unsigned long long>(B);
        b.words = cv.take<uint32_t>(4 * max_blocks + 4);
        b.flagw = cv.take<uint32_t>(max_groups);
        b.counts = cv.take<uint32_t>(max_groups);
        b.off = cv.take<uint32_t>(max_groups);
        b.temp = cv.take<uint8_t>(scan_bytes);
        const uint64_t threads = z < A ? B << (lg - 5) : 0;  // the threads of all sub-blocks, with run tokens
        b.carries = cv.take<uint16_t>(threads);
        b.toff = cv.take<uint32_t>(threads);
    };
    carve_from(arena, carve);

    // 1. histogram (of tokens when runs are possible)
    ZB_CUDA(cudaMemsetAsync(b.hist, 0, 4 * (size_t)AT, s));
    ZB_CUDA(cudaMemsetAsync(b.err, 0, 4, s));
    timed(timer, "ratio:histogram", [&] {
        if (z < A) {
            switch (lg) {
                case 10: launch_hist_runs<10>(c.sm_count, B, A, z, s, d_symbols, n, b.hist, b.carries, b.err); break;
                case 11: launch_hist_runs<11>(c.sm_count, B, A, z, s, d_symbols, n, b.hist, b.carries, b.err); break;
                default: launch_hist_runs<12>(c.sm_count, B, A, z, s, d_symbols, n, b.hist, b.carries, b.err); break;
            }
            return;
        }
        const uint64_t nv = n >> 3;
        const unsigned grid =
            (unsigned)std::max<uint64_t>(1, std::min<uint64_t>(div_up(nv, kHistThreads), (uint64_t)c.sm_count * 4));
        if (A <= kSharedHistBins) k_hist<true><<<grid, kHistThreads, 4 * (size_t)A, s>>>(d_symbols, n, A, b.hist, b.err);
        else k_hist<false><<<grid, kHistThreads, 0, s>>>(d_symbols, n, A, b.hist, b.err);
        ZB_LAUNCHED("k_hist");
    });
    std::vector<uint32_t> h32((size_t)AT + 1);
    ZB_CUDA(cudaMemcpyAsync(h32.data(), b.hist, 4 * (size_t)AT, cudaMemcpyDeviceToHost, s));
    ZB_CUDA(cudaMemcpyAsync(h32.data() + AT, b.err, 4, cudaMemcpyDeviceToHost, s));
    ZB_CUDA(cudaStreamSynchronize(s));
    if (h32[AT] & kRErrSymbol) fail(ZB_ERR_INVALID_ARG, "ratio: a symbol is outside the alphabet of " + std::to_string(A));

    // 2. codebook on the host (the CPU encoder's functions, so the choice of tokens is the same)
    std::vector<uint64_t> hist(h32.begin(), h32.begin() + AT);
    RatioCodebook cb;
    ratio_choose_codebook(hist.data(), n, A, z, lg, cb);
    const uint64_t total = cb.total_bits;
    runs_ = cb.runs;
    codebook_ = ratio_write_codebook(cb);
    enc_.resize(cb.alphabet);
    for (uint32_t k = 0; k < cb.alphabet; ++k) enc_[k] = ((uint32_t)cb.code[k] << 16) | cb.len[k];
    ZB_CUDA(cudaMemcpyAsync(b.enc, enc_.data(), 4 * (size_t)cb.alphabet, cudaMemcpyHostToDevice, s));
    const EncodeTable table{cb.alphabet, A, cb.runs ? z : kRatioNoRunSymbol, cb.runs};

    // 3. the Huffman bitstream
    const uint64_t bytes = div_up(total, 8), nblocks = div_up(bytes, kBlockBytes), ngroups = div_up(nblocks, 32);
    nblocks_ = nblocks;
    timed(timer, "ratio:encode", [&] {
        const EncodeBufs eb{d_symbols, n, b.enc, b.bits, b.start, b.words, b.carries, b.toff};
        bits_and_encode(lg, B, table, s, eb, 0);
        k_part_scan<<<1, 1024, 0, s>>>(b.bits, B, P, b.poff);
        ZB_LAUNCHED("k_part_scan");
        k_offsets<<<grid_for(P * 32, 256), 256, 0, s>>>(b.bits, b.poff, B, P, total, 4 * nblocks, b.start, b.words);
        ZB_LAUNCHED("k_offsets");
        bits_and_encode(lg, B, table, s, eb, 1);
    });
    // 4. zero-block flags and counts
    timed(timer, "ratio:sparse", [&] {
        sparse_flags(b.words, nblocks, b.flagw, b.counts, s);
        size_t tb = scan_bytes;
        exclusive_sum(b.temp, tb, b.counts, b.off, ngroups, s);
        const ScanTotal t{b.off, b.counts, ngroups, 1};
        scan_totals(&t, 1, b.totals, s);
    });
    unsigned long long nnz = 0;
    ZB_CUDA(cudaMemcpyAsync(&nnz, b.totals, 8, cudaMemcpyDeviceToHost, s));
    ZB_CUDA(cudaStreamSynchronize(s));

    len_[kRatioSegCodebook] = codebook_.size();
    len_[kRatioSegMetadata] = ratio_metadata_bytes(n, lg);
    len_[kRatioSegFlags] = sparse_flag_bytes(bytes);
    len_[kRatioSegBlocks] = nnz * kBlockBytes;
    d_bits_ = b.bits;
    d_poff_ = b.poff;
    d_words_ = b.words;
    d_flagw_ = b.flagw;
    d_off_ = b.off;
    stats_ = RatioStats();
    stats_.codebook_bytes = len_[0];
    stats_.metadata_bytes = len_[1];
    stats_.payload_bytes = len_[2] + len_[3];
    stats_.overhead_f = stats_.payload_bytes ? (double)stats_.metadata_bytes / (double)stats_.payload_bytes : 0;
    stats_.huffman_bytes = bytes;
    stats_.used_symbols = cb.used;
    stats_.max_code_length = cb.max_len;
    stats_.run_tokens = cb.runs;
}

void RatioEncoder::write(uint8_t *const *dst, cudaStream_t s, KernelTimer *timer) const {
    timed(timer, "ratio:segments", [&] {
        ZB_CUDA(cudaMemcpyAsync(dst[kRatioSegCodebook], codebook_.data(), len_[0], cudaMemcpyHostToDevice, s));
        k_metadata<<<grid_for(B_, 256), 256, 0, s>>>(d_bits_, d_poff_, n_, lg_, B_, P_, runs_, dst[kRatioSegMetadata]);
        ZB_LAUNCHED("k_metadata");
        ZB_CUDA(cudaMemcpyAsync(dst[kRatioSegFlags], d_flagw_, len_[2], cudaMemcpyDeviceToDevice, s));
        if (len_[3])
            sparse_copy(d_words_, nblocks_, len_[3] / kBlockBytes, d_flagw_, d_off_, 1, 1, dst[kRatioSegBlocks], s);
    });
}

// ---- decoder -----------------------------------------------------------------------------------------------------

void ratio_decode(Context &c, Arena &arena, const ByteSpan *d_seg, const ByteSpan *h_codebook, uint64_t n,
                  uint32_t alphabet, uint16_t *d_symbols, cudaStream_t s, KernelTimer *timer, bool allow_runs) {
    if (n == 0 || n >= (1ull << 32)) fail(ZB_ERR_INVALID_ARG, "ratio: the GPU takes 1 .. 2^32-1 symbols");
    check_aligned(d_symbols, "symbols");
    // The codebook, on the host.
    std::vector<uint8_t> cbh;
    ByteSpan cbs;
    if (h_codebook) {
        cbs = *h_codebook;
    } else {
        // Largest valid codebook: the fixed fields, a bitmap of 65536 bits, 65536 nibbles and the run part.
        if (d_seg[kRatioSegCodebook].size > kRatioCodebookFixedBytes + 8192 + 32768 + 6 + 12)
            fail(ZB_ERR_CORRUPT, "ratio codebook: segment too long");
        cbh.resize((size_t)d_seg[kRatioSegCodebook].size);
        if (!cbh.empty()) {
            ZB_CUDA(cudaMemcpyAsync(cbh.data(), d_seg[kRatioSegCodebook].data, cbh.size(), cudaMemcpyDeviceToHost, s));
            ZB_CUDA(cudaStreamSynchronize(s));
        }
        cbs = {cbh.data(), (uint64_t)cbh.size()};
    }
    RatioCodebook cb;
    std::string msg;
    zb_status st = ratio_read_codebook(cbs, alphabet, cb, msg, allow_runs);
    if (st == ZB_OK) st = ratio_check_lengths(d_seg, n, cb, msg);
    if (st != ZB_OK) fail(st, msg);
    RatioDecodeTables tab;
    ratio_build_decode_tables(cb, tab);
    std::vector<uint32_t> blob((size_t)kBlobPerm + (cb.used + 1) / 2, 0);
    std::copy(tab.lut.begin(), tab.lut.end(), blob.begin());
    for (int l = 0; l <= kL; ++l) {
        blob[(size_t)(kBlobLimit + l)] = tab.limit[l];
        blob[(size_t)(kBlobFirst + l)] = cb.first[l];
        blob[(size_t)(kBlobBase + l)] = cb.base[l];
    }
    std::memcpy(&blob[kBlobPerm], cb.perm.data(), 2 * (size_t)cb.used);

    const int lg = cb.sub_block_log2;
    const uint64_t B = ratio_sub_blocks(n, lg), P = div_up(B, kRatioPartition);
    const uint64_t total = cb.total_bits, bytes = div_up(total, 8), nblocks = div_up(bytes, kBlockBytes);
    const uint64_t ngroups = div_up(nblocks, 32), nstored = d_seg[kRatioSegBlocks].size / kBlockBytes;
    // S symbols of 16 bits past a sub-block's start, and the words buffered and loaded ahead (k_decode: at most 4)
    const uint64_t pad_words = (1ull << lg) / 2 + 8;
    size_t scan_bytes = 0;
    exclusive_sum(nullptr, scan_bytes, nullptr, nullptr, ngroups, s);
    struct {
        uint32_t *words, *flagw, *counts, *off, *blob, *err;
        void *temp;
    } b{};
    auto carve = [&](Carver &cv) {
        b.words = cv.take<uint32_t>(4 * nblocks + pad_words);
        b.flagw = cv.take<uint32_t>(ngroups);
        b.counts = cv.take<uint32_t>(ngroups);
        b.off = cv.take<uint32_t>(ngroups);
        b.blob = cv.take<uint32_t>(blob.size());
        b.err = cv.take<uint32_t>(1);
        b.temp = cv.take<uint8_t>(scan_bytes);
    };
    carve_from(arena, carve);
    ZB_CUDA(cudaMemcpyAsync(b.blob, blob.data(), 4 * blob.size(), cudaMemcpyHostToDevice, s));
    ZB_CUDA(cudaMemsetAsync(b.err, 0, 4, s));
    ZB_CUDA(cudaMemsetAsync(b.words + 4 * nblocks, 0, 4 * pad_words, s));
    timed(timer, "ratio:sparse", [&] {
        sparse_read_flags(d_seg[kRatioSegFlags].data, nblocks, b.flagw, b.counts, b.err, kRErrFlags, s);
        size_t tb = scan_bytes;
        exclusive_sum(b.temp, tb, b.counts, b.off, ngroups, s);
        sparse_expand(b.flagw, b.counts, b.off, nblocks, d_seg[kRatioSegBlocks].data, nstored, bytes, b.words, b.err,
                      kRErrBlocks, s);
    });
    DecodeArgs a;
    a.words = b.words;
    a.meta = d_seg[kRatioSegMetadata].data;
    a.blob = b.blob;
    a.out = d_symbols;
    a.n = n;
    a.B = B;
    a.P = P;
    a.total = total;
    a.used = cb.used;
    a.lg = lg;
    a.min_len = cb.min_len;
    a.max_len = cb.max_len;
    a.A = cb.symbols;
    a.z = cb.run_symbol;
    a.err = b.err;
    timed(timer, "ratio:decode", [&] {
        const unsigned grid = grid_for(P * 32, kDecodeThreads);
        const bool shared_perm = cb.used <= kSharedTable;
        const size_t smem = 4 * ((size_t)kBlobPerm + (shared_perm ? (cb.used + 1) / 2 : 0));
        auto kernel = cb.runs ? (shared_perm ? k_decode<true, true> : k_decode<false, true>)
                              : (shared_perm ? k_decode<true, false> : k_decode<false, false>);
        leave_l1_for_lines(c, kernel, grid, smem);
        kernel<<<grid, kDecodeThreads, smem, s>>>(a);
        ZB_LAUNCHED("k_decode");
    });
    uint32_t err = 0;
    ZB_CUDA(cudaMemcpyAsync(&err, b.err, 4, cudaMemcpyDeviceToHost, s));
    ZB_CUDA(cudaStreamSynchronize(s));
    if (err) fail(ZB_ERR_CORRUPT, error_text(err));
}

// ---- wrappers ----------------------------------------------------------------------------------------------------

namespace {

template <typename F> zb_status guarded_call(std::string &msg, cudaStream_t s, F &&f) {
    try {
        f();
        return ZB_OK;
    } catch (const Failure &e) {
        if (s) (void)cudaStreamSynchronize(s);
        (void)cudaGetLastError();
        msg = e.msg;
        return e.status;
    } catch (const std::bad_alloc &) {
        msg = "ratio: out of host memory";
        return ZB_ERR_NOMEM;
    }
}

}  // namespace

zb_status ratio_encode_gpu(const uint16_t *d_symbols, uint64_t n, uint32_t alphabet, cudaStream_t s,
                           std::vector<std::string> &segments, RatioStats *stats, std::string &msg, Arena *scratch,
                           const RatioOptions &opt) {
    Arena local, out_arena;  // outlive guarded_call, which drains the stream after a failure
    return guarded_call(msg, s, [&] {
        ContextLease lease;
        Context &c = lease.get();
        Arena &work = scratch ? *scratch : local;
        RatioEncoder enc;
        enc.plan(c, work, d_symbols, n, alphabet, s, nullptr, opt);
        uint8_t *d_out = out_arena.reserve(enc.total_length() + 1);
        uint8_t *dst[kRatioSegmentCount];
        uint64_t off = 0;
        for (int k = 0; k < kRatioSegmentCount; ++k) {
            dst[k] = d_out + off;
            off += enc.segment_length(k);
        }
        enc.write(dst, s, nullptr);
        std::vector<std::string> out(kRatioSegmentCount);
        for (int k = 0; k < kRatioSegmentCount; ++k) {
            out[(size_t)k].resize((size_t)enc.segment_length(k));
            if (!out[(size_t)k].empty())
                ZB_CUDA(cudaMemcpyAsync(&out[(size_t)k][0], dst[k], out[(size_t)k].size(), cudaMemcpyDeviceToHost, s));
        }
        ZB_CUDA(cudaStreamSynchronize(s));
        for (std::string &o : out) segments.emplace_back(std::move(o));
        if (stats) *stats = enc.stats();
    });
}

zb_status ratio_decode_gpu(const ByteSpan *d_segments, uint64_t n, uint32_t alphabet, cudaStream_t s,
                           uint16_t *d_symbols, std::string &msg, Arena *scratch, bool allow_runs) {
    Arena local;
    return guarded_call(msg, s, [&] {
        ContextLease lease;
        Context &c = lease.get();
        ratio_decode(c, scratch ? *scratch : local, d_segments, nullptr, n, alphabet, d_symbols, s, nullptr, allow_runs);
    });
}

}  // namespace gpu
}  // namespace zb
