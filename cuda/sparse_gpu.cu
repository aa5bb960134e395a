// The zero-block sparse pass over bit strings held as 32-bit words (docs/FORMAT.md section 5), both directions,
// plus small helpers (popcounts, totals of exclusive scans).
#include <stdexcept>
#include "dependent_launch.cuh"
#include "gpu_device.cuh"
#include "gpu_internal.h"

namespace zb {
namespace gpu {
namespace {

constexpr unsigned kBlock = 256;

__global__ void k_sparse_flags(const uint4 *__restrict__ blocks, uint64_t nblocks, uint32_t *__restrict__ flagwords,
                               uint32_t *__restrict__ counts) {
    wait_for_prior_grids();  // before any memory access (launch_dependent)
    const uint64_t b = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const uint64_t g = b >> 5;
    if ((g << 5) >= nblocks) return;  // the whole warp is past the end
    const bool nz = b < nblocks && any_bits(blocks[b]);
    const uint32_t fw = __ballot_sync(kFullMask, nz);
    if ((threadIdx.x & 31) == 0) {
        flagwords[g] = fw;
        counts[g] = __popc(fw);
    }
}

// One thread per K consecutive blocks (K = 1, or 4: a nibble of a flag word): the rank of the first flagged one from
// its unit's offset and the popcounts of the unit's earlier flag words, then the flagged blocks' loads, all issued
// before the stores. unit_shift: log2 of the flag words per unit. Where few blocks are stored, one thread per block
// spends its time on that chain of dependent loads in n / 8 threads: the code blocks of a 1 GB TREFHT encode (22 %
// stored) took 0.170 ms, 0.109 with K = 4, 0.134 with K = 8. Where most are stored, or the destination is not 4-byte
// aligned (16 byte stores per block), K = 4 spreads a warp's stores over four times the span: gmt_sst's code blocks
// 0.452 -> 0.468 ms, and the ratio encoder's bitstream (dense, any alignment) cost TREFHT's 1 GB interp/ratio
// compression 10 %. sparse_copy takes K = 4 only for sparse copies to aligned destinations.
template <int K>
__device__ __forceinline__ void copy_blocks(uint64_t t, const uint4 *__restrict__ blocks, uint64_t nblocks,
                                            const uint32_t *__restrict__ flagwords,
                                            const uint32_t *__restrict__ unit_off, int unit_stride, int unit_shift,
                                            uint8_t *__restrict__ dst) {
    const uint64_t b0 = K * t;
    if (b0 >= nblocks) return;
    const uint64_t g = b0 >> 5;
    const int bit0 = (int)(b0 & 31);
    const uint32_t fw = flagwords[g];
    const uint32_t mine = (fw >> bit0) & low_bits(K) & low_bits(nblocks - b0 < K ? (int)(nblocks - b0) : K);
    if (!mine) return;
    const uint64_t unit = g >> unit_shift;
    uint64_t rank = unit_off[unit * (uint64_t)unit_stride];
    for (uint64_t gg = unit << unit_shift; gg < g; ++gg) rank += __popc(flagwords[gg]);
    rank += __popc(fw & low_bits(bit0));
    uint4 v[K];
#pragma unroll
    for (int k = 0; k < K; ++k)
        if ((mine >> k) & 1) v[k] = blocks[b0 + k];
#pragma unroll
    for (int k = 0; k < K; ++k)
        if ((mine >> k) & 1) store16(dst + 16 * rank++, v[k]);
}

template <int K>
__global__ void k_sparse_copy(const uint4 *__restrict__ blocks, uint64_t nblocks, const uint32_t *__restrict__ flagwords,
                              const uint32_t *__restrict__ unit_off, int unit_stride, int unit_shift,
                              uint8_t *__restrict__ dst) {
    copy_blocks<K>((uint64_t)blockIdx.x * blockDim.x + threadIdx.x, blocks, nblocks, flagwords, unit_off, unit_stride,
                   unit_shift, dst);
}

// sparse_copy_at: the destination (base + *d_off) and the stored count (*d_len / 16) are read on the device, and K
// chosen there by sparse_copy's rule (k_hint 0: a thread per four blocks in the grid), or by the host that knew both
// (k_hint 1 or 4, the grid sized for it).
__global__ void k_sparse_copy_at(const uint4 *__restrict__ blocks, uint64_t nblocks,
                                 const uint32_t *__restrict__ flagwords, const uint32_t *__restrict__ unit_off,
                                 int unit_stride, int unit_shift, uint8_t *__restrict__ base,
                                 const uint64_t *__restrict__ d_off, const uint64_t *__restrict__ d_len,
                                 const uint64_t *__restrict__ d_status, int k_hint) {
    wait_for_prior_grids();  // before any memory access (launch_dependent)
    if (*d_status || *d_len == 0) return;
    uint8_t *dst = base + *d_off;
    const uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x, threads = (uint64_t)gridDim.x * blockDim.x;
    const bool four = k_hint ? k_hint == 4 : 2 * (*d_len / 16) <= nblocks && reinterpret_cast<uintptr_t>(dst) % 4 == 0;
    if (four) {
        copy_blocks<4>(t, blocks, nblocks, flagwords, unit_off, unit_stride, unit_shift, dst);
    } else {  // a thread per block, or (k_hint 0: a thread per four blocks) blocks t, t + threads, ...
        for (uint64_t b = t; b < nblocks; b += threads)
            copy_blocks<1>(b, blocks, nblocks, flagwords, unit_off, unit_stride, unit_shift, dst);
    }
}

__global__ void k_sparse_read_flags(const uint8_t *__restrict__ flag_bytes, uint64_t nblocks,
                                    uint32_t *__restrict__ flagwords, uint32_t *__restrict__ counts,
                                    uint32_t *__restrict__ err, uint32_t errbit) {
    const uint64_t g = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const uint64_t ngroups = (nblocks + 31) / 32;
    if (g >= ngroups) return;
    bool stray = false;
    const uint32_t fw = sparse_flag_word(flag_bytes, g, nblocks, stray);
    if (stray) set_error(err, errbit);
    flagwords[g] = fw;
    counts[g] = __popc(fw);
}

__global__ void k_sparse_expand(const uint32_t *__restrict__ flagwords, const uint32_t *__restrict__ counts,
                                const uint32_t *__restrict__ off, uint64_t nblocks, const uint8_t *__restrict__ stored,
                                uint64_t nstored, uint64_t string_bytes, uint4 *__restrict__ out,
                                uint32_t *__restrict__ err, uint32_t errbit) {
    const uint64_t b = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nblocks) return;
    const uint64_t ngroups = (nblocks + 31) / 32;
    if (b == 0 && (uint64_t)off[ngroups - 1] + counts[ngroups - 1] != nstored) set_error(err, errbit);
    const uint64_t g = b >> 5;
    const int bit = (int)(b & 31);
    const uint32_t fw = flagwords[g];
    uint4 v = make_uint4(0, 0, 0, 0);
    if ((fw >> bit) & 1) {
        const uint64_t rank = (uint64_t)off[g] + __popc(fw & low_bits(bit));
        if (rank < nstored) {
            v = load16(stored + 16 * rank);
            // Bytes of the last block past the end of the string must be zero, as the encoder wrote them.
            if (b == nblocks - 1 && !tail_bytes_zero(v, string_bytes - 16 * (nblocks - 1))) set_error(err, errbit);
        } else {
            set_error(err, errbit);
        }
    }
    out[b] = v;
}

__global__ void k_popcount(const uint32_t *__restrict__ w, uint64_t n, uint32_t *__restrict__ out) {
    const uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = __popc(w[i]);
}

struct ScanTotals4 {
    ScanTotal t[4];
    int count;
};

__global__ void k_scan_totals(ScanTotals4 a, unsigned long long *totals) {
    wait_for_prior_grids();  // before any memory access (launch_dependent)
    if (threadIdx.x != 0) return;
    for (int j = 0; j < a.count; ++j) {
        const ScanTotal &t = a.t[j];
        const uint64_t last = (t.n - 1) * (uint64_t)t.stride;
        totals[j] = t.n ? (unsigned long long)t.off[last] + t.cnt[last] : 0ull;
    }
}

int unit_shift_of(int groups_per_unit) {
    int unit_shift = 0;
    while ((1 << unit_shift) < groups_per_unit) ++unit_shift;
    if ((1 << unit_shift) != groups_per_unit) throw std::logic_error("sparse_copy: groups_per_unit is not a power of 2");
    return unit_shift;
}

}  // namespace

void sparse_flags(const uint32_t *words, uint64_t nblocks, uint32_t *flagwords, uint32_t *counts, cudaStream_t s) {
    if (!nblocks) return;
    const uint64_t threads = (nblocks + 31) / 32 * 32;
    launch_dependent("launch of k_sparse_flags", k_sparse_flags, grid_for(threads, kBlock), kBlock, 0, s,
                     reinterpret_cast<const uint4 *>(words), nblocks, flagwords, counts);
}

void sparse_copy(const uint32_t *words, uint64_t nblocks, uint64_t nstored, const uint32_t *flagwords,
                 const uint32_t *unit_off, int unit_stride, int groups_per_unit, uint8_t *dst, cudaStream_t s) {
    if (!nblocks) return;
    const int unit_shift = unit_shift_of(groups_per_unit);
    const uint4 *blocks = reinterpret_cast<const uint4 *>(words);
    if (sparse_copy_form(nblocks, nstored, dst) == 4) {
        k_sparse_copy<4><<<grid_for(div_up(nblocks, 4), kBlock), kBlock, 0, s>>>(blocks, nblocks, flagwords, unit_off,
                                                                               unit_stride, unit_shift, dst);
    } else {
        k_sparse_copy<1><<<grid_for(nblocks, kBlock), kBlock, 0, s>>>(blocks, nblocks, flagwords, unit_off, unit_stride,
                                                                      unit_shift, dst);
    }
    ZB_LAUNCHED("k_sparse_copy");
}

void sparse_copy_at(const uint32_t *words, uint64_t nblocks, const uint32_t *flagwords, const uint32_t *unit_off,
                    int unit_stride, int groups_per_unit, uint8_t *base, const uint64_t *d_off, const uint64_t *d_len,
                    const uint64_t *d_status, int k_hint, cudaStream_t s) {
    if (!nblocks) return;
    const uint64_t threads = k_hint == 1 ? nblocks : div_up(nblocks, 4);
    launch_dependent("launch of k_sparse_copy_at", k_sparse_copy_at, grid_for(threads, kBlock), kBlock, 0, s,
                     reinterpret_cast<const uint4 *>(words), nblocks, flagwords, unit_off, unit_stride,
                     unit_shift_of(groups_per_unit), base, d_off, d_len, d_status, k_hint);
}

void sparse_read_flags(const uint8_t *flag_bytes, uint64_t nblocks, uint32_t *flagwords, uint32_t *counts,
                       uint32_t *err, uint32_t errbit, cudaStream_t s) {
    if (!nblocks) return;
    k_sparse_read_flags<<<grid_for((nblocks + 31) / 32, kBlock), kBlock, 0, s>>>(flag_bytes, nblocks, flagwords,
                                                                                   counts, err, errbit);
    ZB_LAUNCHED("k_sparse_read_flags");
}

void sparse_expand(const uint32_t *flagwords, const uint32_t *counts, const uint32_t *off, uint64_t nblocks,
                   const uint8_t *blocks, uint64_t nstored, uint64_t string_bytes, uint32_t *words, uint32_t *err,
                   uint32_t errbit, cudaStream_t s) {
    if (!nblocks) return;
    k_sparse_expand<<<grid_for(nblocks, kBlock), kBlock, 0, s>>>(flagwords, counts, off, nblocks, blocks, nstored,
                                                                  string_bytes, reinterpret_cast<uint4 *>(words), err,
                                                                  errbit);
    ZB_LAUNCHED("k_sparse_expand");
}

void popcount_words(const uint32_t *words, uint64_t nwords, uint32_t *out, cudaStream_t s) {
    if (!nwords) return;
    k_popcount<<<grid_for(nwords, kBlock), kBlock, 0, s>>>(words, nwords, out);
    ZB_LAUNCHED("k_popcount");
}

void scan_totals(const ScanTotal *t, int count, unsigned long long *totals, cudaStream_t s) {
    ScanTotals4 a{};
    a.count = count;
    for (int j = 0; j < count; ++j) a.t[j] = t[j];
    launch_dependent("launch of k_scan_totals", k_scan_totals, 1, 32, 0, s, a, totals);
}

}  // namespace gpu
}  // namespace zb
