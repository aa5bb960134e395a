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
//
// The stream's payload checksum is the CRC-32C of the piece CRCs: k_payload_crc, one block, computes it the same way
// on the device, so that neither the encoder (which seals the header in device memory) nor the decoder (which
// compares) waits for the piece CRCs on the host.
#include <vector>
#include "gpu_internal.h"
#include "zb_crc32c.h"

namespace zb {
namespace gpu {
namespace {

constexpr int kCrcThreads = 256;           // per block; one block per piece
constexpr int kSliceBytes = 256;           // per thread
constexpr int kSliceWords = kSliceBytes / 4;
constexpr int kShiftMatrices = 17;         // shifts by 2^0 .. 2^16 bytes
constexpr int kCrcWords = 4 * 256 + kShiftMatrices * 32;    // copied into each block's shared memory
// Shifts by 2^8 .. 2^16 bytes also as byte-sliced tables (4 x 256 words each: the matrix applied to each byte value
// in each byte position), read through the cache: 4 independent lookups per shift instead of one dependent step per
// set bit of the value. They follow the kCrcWords in the device table.
constexpr int kByteShiftFirst = 8, kByteShifts = kShiftMatrices - kByteShiftFirst;
constexpr int kAllCrcWords = kCrcWords + kByteShifts * 1024;

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

// Runs the CRC register over `len` zero bytes (len < 2^17): the low 8 bits of len by the bit matrices (mats, in
// shared memory), the others by the byte-sliced tables (bytes_g, global memory). The shifts commute (powers of one
// operator), so the order does not matter.
__device__ __forceinline__ uint32_t crc_shift(const uint32_t *mats, const uint32_t *__restrict__ bytes_g, uint32_t v,
                                              uint32_t len) {
    for (uint32_t low = len & 0xFFu; low; low &= low - 1) v = gf2_apply(mats + 32 * (__ffs(low) - 1), v);
    for (uint32_t high = len >> kByteShiftFirst; high; high &= high - 1) {
        const uint32_t *t = bytes_g + 1024 * (__ffs(high) - 1);
        v = __ldg(t + (v & 0xFF)) ^ __ldg(t + 256 + ((v >> 8) & 0xFF)) ^ __ldg(t + 512 + ((v >> 16) & 0xFF)) ^
            __ldg(t + 768 + (v >> 24));
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

// Copies the first kCrcWords of the tables into shared memory (every thread of the block takes part).
__device__ __forceinline__ void load_tables(uint32_t *tab, const uint32_t *__restrict__ tables_g) {
    for (int i = threadIdx.x; i < kCrcWords; i += blockDim.x) tab[i] = tables_g[i];
    __syncthreads();
}

// The raw CRC (register from 0, no final xor) of data[pstart, pend), at most one piece, by the block's threads;
// every thread returns it. warp_xor: kCrcThreads / 32 words of shared memory. Contains barriers: call it from every
// thread of the block.
__device__ uint32_t block_raw_crc(const uint8_t *__restrict__ data, uint64_t pstart, uint64_t pend,
                                  const uint32_t *tab, const uint32_t *__restrict__ bytes_g, uint32_t *warp_xor) {
    const uint32_t *t0 = tab, *t1 = tab + 256, *t2 = tab + 512, *t3 = tab + 768, *mats = tab + 1024;
    const uint64_t s = min(pend, pstart + (uint64_t)threadIdx.x * kSliceBytes);
    const uint64_t e = min(pend, s + kSliceBytes);
    uint32_t c = 0;
    const uintptr_t addr = reinterpret_cast<uintptr_t>(data + s);
    if (e - s == kSliceBytes && addr % 16 == 0) {
        c = slice_crc<true>(data + s, t0, t1, t2, t3);
    } else if (e - s == kSliceBytes && addr % 4 == 0) {
        c = slice_crc<false>(data + s, t0, t1, t2, t3);
    } else {  // a partial slice, or data that is not 4-byte aligned
        for (uint64_t pos = s; pos < e; ++pos) c = t0[(c ^ data[pos]) & 0xFF] ^ (c >> 8);
    }
    uint32_t contrib = crc_shift(mats, bytes_g, c, (uint32_t)(pend - e));
    for (int o = 16; o; o >>= 1) contrib ^= __shfl_xor_sync(0xFFFFFFFFu, contrib, o);
    if ((threadIdx.x & 31) == 0) warp_xor[threadIdx.x >> 5] = contrib;
    __syncthreads();
    uint32_t all = 0;
    for (int w = 0; w < kCrcThreads / 32; ++w) all ^= warp_xor[w];
    __syncthreads();  // warp_xor may be written again by the next call
    return all;
}

__global__ void __launch_bounds__(kCrcThreads)
k_piece_crc(const uint8_t *__restrict__ data, uint64_t len, const uint32_t *__restrict__ tables_g,
            uint32_t *__restrict__ out) {
    __shared__ uint32_t tab[kCrcWords];
    __shared__ uint32_t warp_xor[kCrcThreads / 32];
    load_tables(tab, tables_g);
    const uint64_t pstart = (uint64_t)blockIdx.x * kChecksumPiece;
    const uint64_t pend = min(len, pstart + kChecksumPiece);
    const uint32_t *bytes_g = tables_g + kCrcWords;
    const uint32_t raw = block_raw_crc(data, pstart, pend, tab, bytes_g, warp_xor);
    if (threadIdx.x == 0)
        out[blockIdx.x] = crc_shift(tab + 1024, bytes_g, 0xFFFFFFFFu, (uint32_t)(pend - pstart)) ^ raw ^ 0xFFFFFFFFu;
}

// One block: the payload checksum (CRC-32C of the `count` little-endian piece CRCs, 0 when there are none), then
// either (field != nullptr) written into a header at `field` (4 bytes, then the header's own CRC, which the host
// computed with zeros in the field: see seal_payload_crc), or compared with `expected` (err |= errbit if unequal).
__global__ void __launch_bounds__(kCrcThreads)
k_payload_crc(const uint32_t *__restrict__ crcs, uint64_t count, const uint32_t *__restrict__ tables_g,
              uint8_t *__restrict__ field, uint32_t expected, uint32_t *__restrict__ err, uint32_t errbit) {
    __shared__ uint32_t tab[kCrcWords];
    __shared__ uint32_t warp_xor[kCrcThreads / 32];
    load_tables(tab, tables_g);
    const uint8_t *bytes = reinterpret_cast<const uint8_t *>(crcs);
    const uint64_t len = 4 * count;
    uint32_t reg = 0xFFFFFFFFu;  // raw(init c, A || B) = shift(raw(init c, A), |B|) xor raw(0, B)
    for (uint64_t p = 0; p < len; p += kChecksumPiece) {
        const uint64_t pend = min(len, p + kChecksumPiece);
        reg = crc_shift(tab + 1024, tables_g + kCrcWords, reg, (uint32_t)(pend - p)) ^
              block_raw_crc(bytes, p, pend, tab, tables_g + kCrcWords, warp_xor);
    }
    if (threadIdx.x != 0) return;
    const uint32_t pc = reg ^ 0xFFFFFFFFu;  // 0 for no pieces, as crc32c of nothing
    if (!field) {
        if (pc != expected) atomicOr(err, errbit);
        return;
    }
    // The header's CRC covers the field: with zeros there it was h; the field's 4 bytes, the last ones it covers,
    // add one slicing step of pc to it (CRC-32C is affine over GF(2) for a fixed length).
    const uint32_t delta = tab[768 + (pc & 0xFF)] ^ tab[512 + ((pc >> 8) & 0xFF)] ^ tab[256 + ((pc >> 16) & 0xFF)] ^
                           tab[pc >> 24];
    for (int b = 0; b < 4; ++b) {
        field[b] = (uint8_t)(pc >> (8 * b));
        field[4 + b] ^= (uint8_t)(delta >> (8 * b));
    }
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
    // Matrix 0: one zero byte. Matrix b+1 = matrix b applied twice.
    uint32_t *m = h.data() + 1024;
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
    // Byte-sliced forms of matrices kByteShiftFirst.. : entry 256 p + v = the matrix applied to v << 8p.
    for (int j = 0; j < kByteShifts; ++j) {
        const uint32_t *mat = m + 32 * (kByteShiftFirst + j);
        uint32_t *t = h.data() + kCrcWords + 1024 * j;
        for (int p = 0; p < 4; ++p)
            for (uint32_t v = 0; v < 256; ++v) t[256 * p + v] = apply(mat, v << (8 * p));
    }
    const size_t bytes = sizeof(uint32_t) * h.size();
    ZB_CUDA(cudaMalloc(reinterpret_cast<void **>(&c.d_crc), bytes));
    ZB_CUDA(cudaMemcpy(c.d_crc, h.data(), bytes, cudaMemcpyHostToDevice));
}

void piece_crcs(const Context &c, const uint8_t *payload, uint64_t len, uint32_t *d_out, cudaStream_t s) {
    const uint64_t pieces = piece_count(len);
    if (!pieces) return;
    k_piece_crc<<<(unsigned)pieces, kCrcThreads, 0, s>>>(payload, len, c.d_crc, d_out);
    ZB_LAUNCHED("k_piece_crc");
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
