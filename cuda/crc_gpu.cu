// CRC-32C of 64 KiB payload pieces on the GPU (docs/FORMAT.md section 6).
//
// One block of 256 threads per piece. Each thread computes the "raw" CRC (register starting at 0, no final xor) of
// its own 256-byte slice with slicing-by-4 tables. The CRC register update is linear over GF(2), so
//     raw(init c, A || B) = shift(raw(init c, A), |B|) xor raw(0, B)
// where shift(v, k) runs the register over k zero bytes. The piece's CRC is therefore the xor over threads of
// shift(raw(0, slice_j), bytes after slice_j), xor shift(0xFFFFFFFF, piece length), then the final xor. shift() by
// 2^b bytes is a 32x32 bit matrix; any length is a product of those for the set bits of the length.
//
// Why short slices: a thread's table steps form one dependent chain, behind its loads. With 2 KiB per thread (one
// warp per piece) a call spent about 100 us here whatever the payload size (H200: half of a 4 MB call); 256 bytes
// per thread take 27 us at 4 MB and 0.12 ms for the 125 MB payload of 1 GB. 64 bytes per thread (1024-thread
// blocks) were no faster at 4 MB and took 0.21 ms at 1 GB.
#include "gpu_internal.h"
#include "zb_crc32c.h"

namespace zb {
namespace gpu {
namespace {

constexpr int kCrcThreads = 256;           // per block; one block per piece
constexpr int kSliceBytes = 256;           // per thread
constexpr int kSliceWords = kSliceBytes / 4;
constexpr int kShiftMatrices = 17;         // shifts by 2^0 .. 2^16 bytes
constexpr int kCrcWords = 4 * 256 + kShiftMatrices * 32;

static_assert(kCrcThreads * kSliceBytes == (int)kChecksumPiece, "one block covers one checksum piece");

// Applies a 32x32 GF(2) matrix (column i = image of bit i) to v.
__device__ __forceinline__ uint32_t gf2_apply(const uint32_t *m, uint32_t v) {
    uint32_t r = 0;
    while (v) {
        const int i = __ffs(v) - 1;
        r ^= m[i];
        v &= v - 1;
    }
    return r;
}

// Runs the CRC register over `len` zero bytes (len < 2^17).
__device__ __forceinline__ uint32_t crc_shift(const uint32_t *mats, uint32_t v, uint32_t len) {
    while (len) {
        const int b = __ffs(len) - 1;
        v = gf2_apply(mats + 32 * b, v);
        len &= len - 1;
    }
    return v;
}

// The raw CRC of one whole slice that starts at a 4-byte aligned address (all loads issued before the chain).
template <bool kAligned16>
__device__ __forceinline__ uint32_t slice_crc(const uint8_t *p, const uint32_t *t0, const uint32_t *t1,
                                              const uint32_t *t2, const uint32_t *t3) {
    uint32_t w[kSliceWords];
    if (kAligned16) {
#pragma unroll
        for (int i = 0; i < kSliceWords / 4; ++i) {
            const uint4 v = __ldg(reinterpret_cast<const uint4 *>(p) + i);
            w[4 * i] = v.x;
            w[4 * i + 1] = v.y;
            w[4 * i + 2] = v.z;
            w[4 * i + 3] = v.w;
        }
    } else {
#pragma unroll
        for (int i = 0; i < kSliceWords; ++i) w[i] = __ldg(reinterpret_cast<const uint32_t *>(p) + i);
    }
    uint32_t c = 0;
#pragma unroll
    for (int i = 0; i < kSliceWords; ++i) {
        c ^= w[i];
        c = t3[c & 0xFF] ^ t2[(c >> 8) & 0xFF] ^ t1[(c >> 16) & 0xFF] ^ t0[c >> 24];
    }
    return c;
}

__global__ void __launch_bounds__(kCrcThreads)
k_piece_crc(const uint8_t *__restrict__ data, uint64_t len, const uint32_t *__restrict__ tables_g,
            uint32_t *__restrict__ out) {
    __shared__ uint32_t tab[kCrcWords];
    __shared__ uint32_t warp_xor[kCrcThreads / 32];
    for (int i = threadIdx.x; i < kCrcWords; i += blockDim.x) tab[i] = tables_g[i];
    __syncthreads();
    const uint32_t *t0 = tab, *t1 = tab + 256, *t2 = tab + 512, *t3 = tab + 768, *mats = tab + 1024;

    const uint64_t pstart = (uint64_t)blockIdx.x * kChecksumPiece;
    const uint64_t pend = min(len, pstart + kChecksumPiece);
    const uint64_t s = min(pend, pstart + (uint64_t)threadIdx.x * kSliceBytes);
    const uint64_t e = min(pend, s + kSliceBytes);

    uint32_t c = 0;
    const uintptr_t addr = reinterpret_cast<uintptr_t>(data + s);
    if (e - s == kSliceBytes && addr % 16 == 0) {
        c = slice_crc<true>(data + s, t0, t1, t2, t3);
    } else if (e - s == kSliceBytes && addr % 4 == 0) {
        c = slice_crc<false>(data + s, t0, t1, t2, t3);
    } else {  // the last piece's partial slice, or a payload that is not 4-byte aligned
        for (uint64_t pos = s; pos < e; ++pos) c = t0[(c ^ data[pos]) & 0xFF] ^ (c >> 8);
    }

    uint32_t contrib = crc_shift(mats, c, (uint32_t)(pend - e));
    for (int o = 16; o; o >>= 1) contrib ^= __shfl_xor_sync(0xFFFFFFFFu, contrib, o);
    if ((threadIdx.x & 31) == 0) warp_xor[threadIdx.x >> 5] = contrib;
    __syncthreads();
    if (threadIdx.x == 0) {
        uint32_t all = 0;
        for (int w = 0; w < kCrcThreads / 32; ++w) all ^= warp_xor[w];
        out[blockIdx.x] = crc_shift(mats, 0xFFFFFFFFu, (uint32_t)(pend - pstart)) ^ all ^ 0xFFFFFFFFu;
    }
}

}  // namespace

void init_crc_tables(Context &c) {
    uint32_t h[kCrcWords];
    const uint32_t *t0 = crc32c_table();
    for (int i = 0; i < 256; ++i) h[i] = t0[i];
    for (int k = 1; k < 4; ++k)
        for (int i = 0; i < 256; ++i) {
            const uint32_t prev = h[(k - 1) * 256 + i];
            h[k * 256 + i] = (prev >> 8) ^ t0[prev & 0xFF];
        }
    // Matrix 0: one zero byte. Matrix b+1 = matrix b applied twice.
    uint32_t *m = h + 1024;
    for (int i = 0; i < 32; ++i) {
        const uint32_t v = 1u << i;
        m[i] = t0[v & 0xFF] ^ (v >> 8);
    }
    auto apply = [](const uint32_t *mat, uint32_t v) {
        uint32_t r = 0;
        for (int i = 0; i < 32; ++i)
            if (v >> i & 1) r ^= mat[i];
        return r;
    };
    for (int b = 1; b < kShiftMatrices; ++b)
        for (int i = 0; i < 32; ++i) m[32 * b + i] = apply(m + 32 * (b - 1), apply(m + 32 * (b - 1), 1u << i));
    ZB_CUDA(cudaMalloc(reinterpret_cast<void **>(&c.d_crc), sizeof h));
    ZB_CUDA(cudaMemcpy(c.d_crc, h, sizeof h, cudaMemcpyHostToDevice));
}

void piece_crcs(const Context &c, const uint8_t *payload, uint64_t len, uint32_t *d_out, cudaStream_t s) {
    const uint64_t pieces = piece_count(len);
    if (!pieces) return;
    k_piece_crc<<<(unsigned)pieces, kCrcThreads, 0, s>>>(payload, len, c.d_crc, d_out);
    ZB_LAUNCHED("k_piece_crc");
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
