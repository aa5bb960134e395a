// Bitshuffle of code tiles and the zero-block sparse pass, CPU versions (docs/FORMAT.md section 5).
#include <algorithm>
#include <cstring>
#include <vector>
#include "zb_simd.h"
#if ZB_SIMD_X86
#include <immintrin.h>
#endif
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include "zb_cpu.h"
#include "zb_transpose8.h"

namespace zb {
namespace {

constexpr int kPlaneBytes = (int)(kTileCodes / 8);  // 256

}  // namespace

void bitshuffle_tile_portable(const uint16_t *codes, uint8_t *tile) {
    for (int k = 0; k < kPlaneBytes; ++k) {
        const uint16_t *c = codes + 8 * k;
        uint64_t lo = 0, hi = 0;
        for (int b = 0; b < 8; ++b) {
            lo |= (uint64_t)(c[b] & 0xFF) << (8 * b);
            hi |= (uint64_t)(c[b] >> 8) << (8 * b);
        }
        lo = transpose8x8(lo);
        hi = transpose8x8(hi);
        for (int p = 0; p < 8; ++p) {
            tile[p * kPlaneBytes + k] = (uint8_t)(lo >> (8 * p));
            tile[(p + 8) * kPlaneBytes + k] = (uint8_t)(hi >> (8 * p));
        }
    }
}

#if defined(__SSE2__)
// 16 codes at a time: their low bytes (then their high bytes) packed into one 16-byte register; _mm_movemask_epi8
// collects the top bit of every byte, i.e. bit 7 of the 16 codes, which are the two plane bytes of bit plane 7 for
// these codes (code j -> bit j); adding the register to itself moves the next bit to the top. 16 movemasks per 16
// codes instead of two 8x8 bit transposes per 8.
#if ZB_SIMD_X86
// 32 codes per step: their low and high bytes packed in code order into one register each, then each of the 16
// bit planes read with one movemask (bit j of plane p = bit p of code j), four plane bytes at a time.
ZB_TARGET_AVX2 void bitshuffle_tile_avx2(const uint16_t *codes, uint8_t *tile) {
    const __m256i low_byte = _mm256_set1_epi16(0x00FF);
    for (int k = 0; k < kPlaneBytes; k += 4) {
        const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(codes + 8 * k));
        const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(codes + 8 * k + 16));
        // packus works per 128-bit lane: [a0-7, b0-7 | a8-15, b8-15]; the permute restores the code order.
        __m256i lo = _mm256_permute4x64_epi64(
            _mm256_packus_epi16(_mm256_and_si256(a, low_byte), _mm256_and_si256(b, low_byte)), 0xD8);
        __m256i hi = _mm256_permute4x64_epi64(_mm256_packus_epi16(_mm256_srli_epi16(a, 8), _mm256_srli_epi16(b, 8)),
                                              0xD8);
        for (int p = 7; p >= 0; --p) {
            const uint32_t ml = (uint32_t)_mm256_movemask_epi8(lo), mh = (uint32_t)_mm256_movemask_epi8(hi);
            std::memcpy(tile + p * kPlaneBytes + k, &ml, 4);   // little-endian: codes 8k.. in byte k
            std::memcpy(tile + (p + 8) * kPlaneBytes + k, &mh, 4);
            lo = _mm256_add_epi8(lo, lo);
            hi = _mm256_add_epi8(hi, hi);
        }
    }
}
#endif

void bitshuffle_tile(const uint16_t *codes, uint8_t *tile) {
#if ZB_SIMD_X86
    if (simd_level() >= kSimdAvx2) return bitshuffle_tile_avx2(codes, tile);
#endif
    const __m128i low_byte = _mm_set1_epi16(0x00FF);
    for (int k = 0; k < kPlaneBytes; k += 2) {
        const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i *>(codes + 8 * k));
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(codes + 8 * k + 8));
        __m128i lo = _mm_packus_epi16(_mm_and_si128(a, low_byte), _mm_and_si128(b, low_byte));
        __m128i hi = _mm_packus_epi16(_mm_srli_epi16(a, 8), _mm_srli_epi16(b, 8));
        for (int p = 7; p >= 0; --p) {
            const int ml = _mm_movemask_epi8(lo), mh = _mm_movemask_epi8(hi);
            tile[p * kPlaneBytes + k] = (uint8_t)ml;
            tile[p * kPlaneBytes + k + 1] = (uint8_t)(ml >> 8);
            tile[(p + 8) * kPlaneBytes + k] = (uint8_t)mh;
            tile[(p + 8) * kPlaneBytes + k + 1] = (uint8_t)(mh >> 8);
            lo = _mm_add_epi8(lo, lo);
            hi = _mm_add_epi8(hi, hi);
        }
    }
}
#else
void bitshuffle_tile(const uint16_t *codes, uint8_t *tile) { bitshuffle_tile_portable(codes, tile); }
#endif

namespace {
const uint8_t kZeroPlane[kPlaneBytes] = {};
}  // namespace

void bitunshuffle_planes_portable(const uint8_t *const planes[16], uint16_t *codes) {
    const uint8_t *pl[16];
    for (int p = 0; p < 16; ++p) pl[p] = planes[p] ? planes[p] : kZeroPlane;
    for (int k = 0; k < kPlaneBytes; ++k) {
        uint64_t lo = 0, hi = 0;
        for (int p = 0; p < 8; ++p) {
            lo |= (uint64_t)pl[p][k] << (8 * p);
            hi |= (uint64_t)pl[p + 8][k] << (8 * p);
        }
        lo = transpose8x8(lo);
        hi = transpose8x8(hi);
        for (int b = 0; b < 8; ++b)
            codes[8 * k + b] = (uint16_t)(((lo >> (8 * b)) & 0xFF) | (((hi >> (8 * b)) & 0xFF) << 8));
    }
}

#if defined(__SSE2__)
namespace {
// Bytes k0 .. k0+15 of 8 planes (pl[0..7]) transposed into 8 registers: register c holds, at byte h*8 + p,
// byte k0 + 2c + h of plane p (two 8-plane columns per register).
inline void columns_of_8_planes(const uint8_t *const pl[8], int k0, __m128i v[8]) {
    __m128i r[8], t[8], u[8];
    for (int p = 0; p < 8; ++p) r[p] = _mm_loadu_si128(reinterpret_cast<const __m128i *>(pl[p] + k0));
    for (int p = 0; p < 8; p += 2) {
        t[p] = _mm_unpacklo_epi8(r[p], r[p + 1]);       // columns 0..7 of planes p, p+1
        t[p + 1] = _mm_unpackhi_epi8(r[p], r[p + 1]);   // columns 8..15
    }
    for (int q = 0; q < 2; ++q) {   // planes 0-3 (q = 0) and 4-7 (q = 1)
        u[4 * q + 0] = _mm_unpacklo_epi16(t[4 * q + 0], t[4 * q + 2]);   // columns 0..3
        u[4 * q + 1] = _mm_unpackhi_epi16(t[4 * q + 0], t[4 * q + 2]);   // 4..7
        u[4 * q + 2] = _mm_unpacklo_epi16(t[4 * q + 1], t[4 * q + 3]);   // 8..11
        u[4 * q + 3] = _mm_unpackhi_epi16(t[4 * q + 1], t[4 * q + 3]);   // 12..15
    }
    for (int g = 0; g < 4; ++g) {
        v[2 * g] = _mm_unpacklo_epi32(u[g], u[4 + g]);       // columns 4g, 4g+1
        v[2 * g + 1] = _mm_unpackhi_epi32(u[g], u[4 + g]);   // columns 4g+2, 4g+3
    }
}
}  // namespace

// 128 codes at a time: the plane bytes transposed into columns (byte k of planes 0-7 and of planes 8-15), then
// _mm_movemask_epi8 collects bit 7 of each column byte, which is the low (high) byte of code 8k+7; adding the
// register to itself brings the bits of code 8k+6 to the top, and so on.
#if ZB_SIMD_X86
// 32 codes per step: the four bytes of each non-zero plane at k are spread over 32 byte lanes (lane j gets bit j)
// and OR-ed into the low or high code bytes as bit p % 8, then the two are interleaved into the codes. Zero planes
// cost nothing: a smooth field's codes use a few low planes and the sign plane.
ZB_TARGET_AVX2 void bitunshuffle_planes_avx2(const uint8_t *const planes[16], uint16_t *codes) {
    // Lane j takes byte j / 8 of the broadcast plane word (shuffles stay within 128-bit halves: the word is in both).
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,   //
                                            2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);   // lane j: bit j % 8
    const uint8_t *lo_planes[8], *hi_planes[8];
    __m256i lo_bit[8], hi_bit[8];   // bit p % 8 in every lane
    int nlo = 0, nhi = 0;
    for (int p = 0; p < 16; ++p) {
        if (!planes[p]) continue;
        if (p < 8) lo_bit[nlo] = _mm256_set1_epi8((char)(1 << p)), lo_planes[nlo++] = planes[p];
        else hi_bit[nhi] = _mm256_set1_epi8((char)(1 << (p - 8))), hi_planes[nhi++] = planes[p];
    }
    auto plane_bits = [&](const uint8_t *p) ZB_TARGET_AVX2 {   // 0xFF in lane j where bit j of the word is set
        uint32_t w;
        std::memcpy(&w, p, 4);
        const __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)w), spread);
        return _mm256_cmpeq_epi8(_mm256_and_si256(b, bit), bit);
    };
    for (int k = 0; k < kPlaneBytes; k += 4) {
        __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();
        for (int i = 0; i < nlo; ++i)
            lo = _mm256_or_si256(lo, _mm256_and_si256(plane_bits(lo_planes[i] + k), lo_bit[i]));
        for (int i = 0; i < nhi; ++i)
            hi = _mm256_or_si256(hi, _mm256_and_si256(plane_bits(hi_planes[i] + k), hi_bit[i]));
        // unpack works per 128-bit half: c0 = codes 0-7 | 16-23, c1 = codes 8-15 | 24-31.
        const __m256i c0 = _mm256_unpacklo_epi8(lo, hi), c1 = _mm256_unpackhi_epi8(lo, hi);
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(codes + 8 * k), _mm256_permute2x128_si256(c0, c1, 0x20));
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(codes + 8 * k + 16), _mm256_permute2x128_si256(c0, c1, 0x31));
    }
}
#endif

void bitunshuffle_planes(const uint8_t *const planes[16], uint16_t *codes) {
#if ZB_SIMD_X86
    if (simd_level() >= kSimdAvx2) return bitunshuffle_planes_avx2(planes, codes);
#endif
    const uint8_t *pl[16];
    for (int p = 0; p < 16; ++p) pl[p] = planes[p] ? planes[p] : kZeroPlane;
    for (int k0 = 0; k0 < kPlaneBytes; k0 += 16) {
        __m128i lo[8], hi[8];
        columns_of_8_planes(pl, k0, lo);
        columns_of_8_planes(pl + 8, k0, hi);
        for (int c = 0; c < 8; ++c) {
            uint16_t *out = codes + 8 * (k0 + 2 * c);   // codes of columns k0+2c (out[0..7]) and k0+2c+1 (out[8..15])
            for (int b = 7; b >= 0; --b) {
                const unsigned ml = (unsigned)_mm_movemask_epi8(lo[c]), mh = (unsigned)_mm_movemask_epi8(hi[c]);
                out[b] = (uint16_t)((ml & 0xFFu) | ((mh & 0xFFu) << 8));
                out[8 + b] = (uint16_t)((ml >> 8) | (mh & 0xFF00u));
                lo[c] = _mm_add_epi8(lo[c], lo[c]);
                hi[c] = _mm_add_epi8(hi[c], hi[c]);
            }
        }
    }
}
#else
void bitunshuffle_planes(const uint8_t *const planes[16], uint16_t *codes) {
    bitunshuffle_planes_portable(planes, codes);
}
#endif

namespace {
void planes_of_tile(const uint8_t *tile, const uint8_t *planes[16]) {
    for (int p = 0; p < 16; ++p) planes[p] = tile + p * kPlaneBytes;
}
}  // namespace

void bitunshuffle_tile(const uint8_t *tile, uint16_t *codes) {
    const uint8_t *planes[16];
    planes_of_tile(tile, planes);
    bitunshuffle_planes(planes, codes);
}

void bitunshuffle_tile_portable(const uint8_t *tile, uint16_t *codes) {
    const uint8_t *planes[16];
    planes_of_tile(tile, planes);
    bitunshuffle_planes_portable(planes, codes);
}

void stored_tile_planes(const uint8_t *flags, const uint8_t *src, uint8_t *buf, const uint8_t *planes[16]) {
    constexpr int kBlocksPerPlane = kPlaneBytes / (int)kBlockBytes;   // 16: two flag bytes
    for (int p = 0; p < 16; ++p) {
        const unsigned f = flags[2 * p] | (unsigned)flags[2 * p + 1] << 8;   // bit b: block b of the plane stored
        if (f == 0) {
            planes[p] = nullptr;
        } else if (f == 0xFFFF) {   // whole plane in the stream
            planes[p] = src;
            src += kPlaneBytes;
        } else {
            uint8_t *plane = buf + p * kPlaneBytes;
            for (int b = 0; b < kBlocksPerPlane; ++b) {
                const unsigned stored = (f >> b) & 1u;
                if (stored) std::memcpy(plane + b * kBlockBytes, src, kBlockBytes);
                else std::memset(plane + b * kBlockBytes, 0, kBlockBytes);
                src += stored * kBlockBytes;
            }
            planes[p] = plane;
        }
    }
}

uint64_t tile_flags(const uint8_t *tile, uint8_t *flags) {
    std::memset(flags, 0, kTileFlagBytes);
    uint64_t nnz = 0;
    for (uint64_t b = 0; b < kTileBytes / kBlockBytes; ++b) {
        uint64_t w0, w1;
        std::memcpy(&w0, tile + b * kBlockBytes, 8);
        std::memcpy(&w1, tile + b * kBlockBytes + 8, 8);
        if (w0 | w1) {
            flags[b >> 3] |= (uint8_t)(1u << (b & 7));
            ++nnz;
        }
    }
    return nnz;
}

uint8_t *copy_nonzero_blocks(const uint8_t *tile, const uint8_t *flags, uint8_t *out) {
    for (uint64_t b = 0; b < kTileBytes / kBlockBytes; ++b)
        if (flags[b >> 3] & (1u << (b & 7))) {
            std::memcpy(out, tile + b * kBlockBytes, kBlockBytes);
            out += kBlockBytes;
        }
    return out;
}

namespace {
// fast_encode_codes' memory, reused by the calls of a thread (a zeroed allocation per call was a serial fill and a
// page fault per 4 KiB of the shuffled tiles and of the blocks: 2.5 bytes per code).
struct CodeSegmentScratch {
    ScratchArray<uint8_t> shuffled, flags, blocks;
    ScratchArray<uint64_t> offset;
};
thread_local CodeSegmentScratch t_codes;
}  // namespace

void fast_encode_codes_release() {
    for (ScratchArray<uint8_t> *a : {&t_codes.shuffled, &t_codes.flags, &t_codes.blocks}) a->trim(kScratchKeepBytes);
    t_codes.offset.trim(kScratchKeepBytes);
}

FastCodeSegments fast_encode_codes(const uint16_t *codes, uint64_t n, int nt) {
    const uint64_t ntiles = code_tiles(n);
    CodeSegmentScratch &m = t_codes;
    uint8_t *shuffled = m.shuffled.get((size_t)(ntiles * kTileBytes));
    uint8_t *flags = m.flags.get((size_t)(ntiles * kTileFlagBytes));
    uint64_t *offset = m.offset.get((size_t)ntiles + 1);
    // kPartsPerThread ranges of tiles per thread, taken in turn (a slower core takes fewer).
    const Partition part{ntiles,
                         (int)std::max<uint64_t>(1, std::min<uint64_t>(ntiles, kPartsPerThread * (uint64_t)nt))};
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
    for (int r = 0; r < part.parts; ++r) {
        uint16_t tile_codes[kTileCodes];
        for (uint64_t t = part.begin(r); t < part.begin(r + 1); ++t) {
            const uint64_t base = t * kTileCodes, valid = std::min<uint64_t>(kTileCodes, n - base);
            std::memcpy(tile_codes, codes + base, (size_t)valid * 2);
            std::fill(tile_codes + valid, tile_codes + kTileCodes, (uint16_t)0);
            uint8_t *tile = shuffled + t * kTileBytes;
            bitshuffle_tile(tile_codes, tile);
            offset[t + 1] = tile_flags(tile, flags + t * kTileFlagBytes);
        }
    }
    offset[0] = 0;
    for (uint64_t t = 0; t < ntiles; ++t) offset[t + 1] += offset[t];
    uint8_t *out = m.blocks.get((size_t)(offset[ntiles] * kBlockBytes) + 1);
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
    for (int r = 0; r < part.parts; ++r)
        for (uint64_t t = part.begin(r); t < part.begin(r + 1); ++t)
            copy_nonzero_blocks(shuffled + t * kTileBytes, flags + t * kTileFlagBytes, out + offset[t] * kBlockBytes);
    return FastCodeSegments{{flags, ntiles * kTileFlagBytes}, {out, offset[ntiles] * kBlockBytes}, offset[ntiles]};
}

void expand_tile(const uint8_t *flags, const uint8_t *src, uint8_t *tile) {
    // Without branches (a tile's flags are close to random): a block is copied from the stream or from zeros, and
    // the stream pointer advances by 16 bytes or 0.
    static const uint8_t zeros[kBlockBytes] = {};
    for (uint64_t b = 0; b < kTileBytes / kBlockBytes; ++b) {
        const uint64_t stored = (flags[b >> 3] >> (b & 7)) & 1u;
        std::memcpy(tile + b * kBlockBytes, stored ? src : zeros, kBlockBytes);
        src += stored * kBlockBytes;
    }
}

uint64_t tile_escape_count(const uint8_t *tile) {
    // Code 0x8000 has bit 15 set and bits 0-14 clear: one 64-bit word of each plane covers 64 codes.
    uint64_t count = 0;
    for (int k = 0; k < kPlaneBytes; k += 8) {
        uint64_t low = 0, top;
        for (int p = 0; p < 15; ++p) {
            uint64_t w;
            std::memcpy(&w, tile + p * kPlaneBytes + k, 8);
            low |= w;
        }
        std::memcpy(&top, tile + 15 * kPlaneBytes + k, 8);
        count += (uint64_t)__builtin_popcountll(top & ~low);
    }
    return count;
}

namespace {
ZB_ALWAYS_INLINE uint64_t count_ones_words(const uint8_t *bytes, uint64_t n) {
    uint64_t c = 0, i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        std::memcpy(&w, bytes + i, 8);
        c += (uint64_t)__builtin_popcountll(w);
    }
    for (; i < n; ++i) c += (uint64_t)__builtin_popcount(bytes[i]);
    return c;
}
ZB_SIMD_CLONES(count_ones_words)
}  // namespace

uint64_t count_ones(const uint8_t *bytes, uint64_t n) {
    return ZB_SIMD_PICK(uint64_t (*)(const uint8_t *, uint64_t), count_ones_words)(bytes, n);
}

uint64_t tile_block_starts(const uint8_t *flags, uint64_t ntiles, int nt, uint64_t *start) {
    start[0] = 0;
    const auto count = ZB_SIMD_PICK(uint64_t (*)(const uint8_t *, uint64_t), count_ones_words);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t t = 0; t < (int64_t)ntiles; ++t)
        start[(size_t)t + 1] = count(flags + t * kTileFlagBytes, kTileFlagBytes);
    for (uint64_t t = 0; t < ntiles; ++t) start[t + 1] += start[t];
    return start[ntiles];
}

bool fast_decode_codes(const uint8_t *flags, const uint8_t *blocks, uint64_t nblocks, uint64_t n, uint16_t *codes,
                       int nt) {
    const uint64_t ntiles = code_tiles(n);
    std::vector<uint64_t> start((size_t)ntiles + 1);
    if (tile_block_starts(flags, ntiles, nt, start.data()) != nblocks) return false;
    int bad_padding = 0;
#pragma omp parallel for num_threads(nt) schedule(static) reduction(| : bad_padding)
    for (int64_t t = 0; t < (int64_t)ntiles; ++t) {
        uint8_t buf[kTileBytes];
        const uint8_t *planes[16];
        stored_tile_planes(flags + t * kTileFlagBytes, blocks + start[(size_t)t] * kBlockBytes, buf, planes);
        uint16_t *c = codes + (size_t)t * kTileCodes;
        bitunshuffle_planes(planes, c);
        const uint64_t valid = std::min<uint64_t>(kTileCodes, n - (uint64_t)t * kTileCodes);
        for (uint64_t j = valid; j < kTileCodes; ++j) bad_padding |= c[j] != 0;
    }
    return !bad_padding;
}

namespace {

// The zero-block flags of `bytes` bytes (the last block zero-padded); returns the number of non-zero blocks.
uint64_t sparse_flags(const uint8_t *data, uint64_t bytes, uint8_t *flags) {
    const uint64_t nblocks = div_up(bytes, kBlockBytes);
    std::memset(flags, 0, (size_t)sparse_flag_bytes(bytes));
    uint64_t nnz = 0;
    for (uint64_t b = 0; b < nblocks; ++b) {
        uint8_t blk[kBlockBytes] = {0};
        const uint64_t off = b * kBlockBytes;
        const uint64_t len = bytes - off < kBlockBytes ? bytes - off : kBlockBytes;
        std::memcpy(blk, data + off, (size_t)len);
        uint64_t w0, w1;
        std::memcpy(&w0, blk, 8);
        std::memcpy(&w1, blk + 8, 8);
        if (w0 | w1) {
            flags[b >> 3] |= (uint8_t)(1u << (b & 7));
            ++nnz;
        }
    }
    return nnz;
}

// The blocks that `flags` marks non-zero, in order, into out (the last block zero-padded).
void sparse_blocks(const uint8_t *data, uint64_t bytes, const uint8_t *flags, uint8_t *out) {
    const uint64_t nblocks = div_up(bytes, kBlockBytes);
    for (uint64_t b = 0; b < nblocks; ++b) {
        if (!((flags[b >> 3] >> (b & 7)) & 1)) continue;
        const uint64_t off = b * kBlockBytes;
        const uint64_t len = bytes - off < kBlockBytes ? bytes - off : kBlockBytes;
        std::memcpy(out, data + off, (size_t)len);
        std::memset(out + len, 0, (size_t)(kBlockBytes - len));
        out += kBlockBytes;
    }
}

}  // namespace

namespace {
// The sparse pass on nt threads, in slices of whole flag bytes: flags, then the blocks at blocks_at(their bytes).
template <class BlocksAt>
uint64_t sparse_encode_slices(const uint8_t *data, uint64_t bytes, uint8_t *flags, int nt, BlocksAt blocks_at) {
    constexpr uint64_t kSlice = uint64_t(1) << 16;   // bytes per work item: whole flag bytes (a multiple of 128)
    const int64_t slices = (int64_t)div_up(bytes, kSlice);
    if (nt <= 1 || slices < 2) {
        const uint64_t nnz = sparse_flags(data, bytes, flags);
        sparse_blocks(data, bytes, flags, blocks_at((size_t)(nnz * kBlockBytes)));
        return nnz;
    }
    auto slice_bytes = [&](int64_t k) { return std::min(kSlice, bytes - (uint64_t)k * kSlice); };
    std::vector<uint64_t> first((size_t)slices + 1, 0);   // non-zero blocks before slice k
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t k = 0; k < slices; ++k)
        first[(size_t)k + 1] = sparse_flags(data + k * kSlice, slice_bytes(k), flags + k * (kSlice / 128));
    for (int64_t k = 0; k < slices; ++k) first[(size_t)k + 1] += first[(size_t)k];
    uint8_t *out = blocks_at((size_t)(first.back() * kBlockBytes));
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t k = 0; k < slices; ++k)
        sparse_blocks(data + k * kSlice, slice_bytes(k), flags + k * (kSlice / 128),
                      out + first[(size_t)k] * kBlockBytes);
    return first.back();
}
}  // namespace

uint64_t sparse_encode(const uint8_t *data, uint64_t bytes, uint8_t *flags, std::string &blocks) {
    return sparse_encode_parallel(data, bytes, flags, blocks, 1);
}

uint64_t sparse_encode_parallel(const uint8_t *data, uint64_t bytes, uint8_t *flags, std::string &blocks, int nt) {
    return sparse_encode_slices(data, bytes, flags, nt, [&](size_t len) {
        const size_t start = blocks.size();
        blocks.resize(start + len);
        return reinterpret_cast<uint8_t *>(&blocks[0]) + start;
    });
}

uint64_t sparse_encode_parallel(const uint8_t *data, uint64_t bytes, uint8_t *flags, ScratchArray<uint8_t> &blocks,
                                int nt) {
    return sparse_encode_slices(data, bytes, flags, nt, [&](size_t len) { return blocks.get(len ? len : 1); });
}

bool sparse_valid(const uint8_t *flags, const uint8_t *blocks, uint64_t nblocks_stored, uint64_t bytes) {
    const uint64_t nblocks = div_up(bytes, kBlockBytes), nflag_bytes = sparse_flag_bytes(bytes);
    if (count_ones(flags, nflag_bytes) != nblocks_stored) return false;
    // Flag bits beyond the last block must be zero (then every flagged block exists) ...
    for (uint64_t b = nblocks; b < nflag_bytes * 8; ++b)
        if (flags[b >> 3] & (1u << (b & 7))) return false;
    // ... and the bytes past the end of the string in the last block, if it is stored, zero as the encoder wrote them.
    const uint64_t last = nblocks - 1;
    if (nblocks && (flags[last >> 3] & (1u << (last & 7))))
        for (uint64_t i = bytes - last * kBlockBytes; i < kBlockBytes; ++i)
            if (blocks[(nblocks_stored - 1) * kBlockBytes + i]) return false;
    return true;
}

bool sparse_decode(const uint8_t *flags, const uint8_t *blocks, uint64_t nblocks_stored, uint64_t bytes,
                   uint8_t *out) {
    if (!sparse_valid(flags, blocks, nblocks_stored, bytes)) return false;
    const uint64_t nblocks = div_up(bytes, kBlockBytes);
    for (uint64_t b = 0; b < nblocks; ++b) {
        const uint64_t off = b * kBlockBytes;
        const uint64_t len = bytes - off < kBlockBytes ? bytes - off : kBlockBytes;
        if (flags[b >> 3] & (1u << (b & 7))) {
            std::memcpy(out + off, blocks, (size_t)len);
            blocks += kBlockBytes;
        } else {
            std::memset(out + off, 0, (size_t)len);
        }
    }
    return true;
}

}  // namespace zb
