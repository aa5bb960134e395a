// The Lorenzo inverse of rank 2 and 3 (the N-D prefix sum of the deltas, mod 2^32) fused with the dequantization,
// on a grid of threads: `groups` slabs of consecutive layers times `bands` parts of every layer. A layer is one
// index of the slowest dim (rows x nx values: a plane in rank 3, a row in rank 2).
//
// Why a grid. A value depends on every delta before it in each dim. Slabs alone (each thread a range of layers)
// need the sum of all layers before a slab, which costs a pass over the deltas that one thread does not make: two
// threads then reach about 1.4x of one. Bands alone (each thread the same part of every layer) need no such pass:
// a band needs only the state of the band before it at the same layer (the in-layer column sums and the running
// row sum, handed over through a small ring), so the bands of one layer run as a pipeline, one layer apart. But
// bands narrower than the deltas' source unit (a 2048-code tile of the fast encoder) decode that unit more than
// once. So: as many bands as the layer holds source units (up to the thread count), and slabs for the rest.
//
// The deltas come from a Source, so that the fast decoder can expand its tiles straight into the pass (no array of
// codes or deltas in memory: the traffic is the stream read and the values written) while the other decoders read
// an array. A Source has:
//   struct Cursor;                                   per-thread state (e.g. the tile it decoded last)
//   static constexpr uint64_t kUnit;                 the narrowest band worth having
//   template <class F> void pieces(Cursor &, uint64_t begin, uint64_t end, F f) const;
//       calls f(const uint32_t *deltas, uint64_t index, uint64_t count) for consecutive pieces of [begin, end).
//
// The values do not depend on the grid (integer sums mod 2^32 do not depend on the grouping), so neither on the
// thread count nor on the vector level: LorenzoInverse.MatchesPrefixSumDefinition and the Threads tests check it.
#pragma once
#include <omp.h>
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>
#include "zb_quant.h"
#include "zb_scratch.h"
#include "zb_simd.h"
#if ZB_SIMD_X86
#include <immintrin.h>
#endif

namespace zb {
namespace grid {

// a[i] += b[i] for i < n.
ZB_ALWAYS_INLINE void add_span(uint32_t *__restrict a, const uint32_t *__restrict b, uint64_t n) {
    for (uint64_t i = 0; i < n; ++i) a[i] += b[i];
}
ZB_SIMD_CLONES(add_span)

// count deltas d at in-layer positions p .. p+count-1 -> values. s is the running sum along the current row, col[x]
// the prefix sum down the rows of this layer at column x so far (the first row sets it), acc (indexed from p) the
// running sum of the layers before, out (indexed from p) the values. The row scan is serial; the rest vectorizes.
template <typename T>
ZB_ALWAYS_INLINE void decode_piece(const uint32_t *__restrict d, uint64_t p, uint64_t count, uint64_t nx,
                                   uint32_t *__restrict col, uint32_t *s_io, uint32_t *__restrict acc,
                                   T *__restrict out, double twoeb) {
    uint32_t s = *s_io;
    uint64_t row = p / nx, x = p - row * nx;
    for (uint64_t i = 0; i < count; x = 0, ++row) {
        if (x == 0) s = 0;
        const uint64_t m = std::min(count - i, nx - x);
        const uint32_t *__restrict dr = d + i;
        uint32_t *__restrict c = col + x;
        uint64_t j = 0;
        if (m >= 8) {   // the scan along the row eight at a time (a log-step scan in a vector)
            using V8 = uint32_t __attribute__((vector_size(32)));
            const V8 zero = {0, 0, 0, 0, 0, 0, 0, 0};
            V8 carry = zero + s;
            for (; j + 8 <= m; j += 8) {
                V8 v, cv;
                std::memcpy(&v, dr + j, 32);
                v += __builtin_shufflevector(v, zero, 8, 0, 1, 2, 3, 4, 5, 6);
                v += __builtin_shufflevector(v, zero, 8, 8, 0, 1, 2, 3, 4, 5);
                v += __builtin_shufflevector(v, zero, 8, 8, 8, 8, 0, 1, 2, 3);
                v += carry;
                carry = __builtin_shufflevector(v, v, 7, 7, 7, 7, 7, 7, 7, 7);
                if (row == 0) {
                    cv = v;
                } else {
                    std::memcpy(&cv, c + j, 32);
                    cv += v;
                }
                std::memcpy(c + j, &cv, 32);
            }
            s = carry[0];
        }
        if (row == 0) {
            for (; j < m; ++j) c[j] = s += dr[j];
        } else {
            for (; j < m; ++j) c[j] += s += dr[j];
        }
        uint32_t *__restrict a = acc + i;
        T *__restrict o = out + i;
        for (uint64_t j = 0; j < m; ++j) {
            a[j] += c[j];
            o[j] = dequantize<T>((int32_t)a[j], twoeb);
        }
        i += m;
    }
    *s_io = s;
}
ZB_SIMD_CLONES(decode_piece)

// The in-layer prefix sum (along x, then down the rows) of one layer, in place.
inline void layer_prefix_sum(uint32_t *l, uint64_t rows, uint64_t nx) {
    const auto add = ZB_SIMD_PICK(void (*)(uint32_t *, const uint32_t *, uint64_t), add_span);
    for (uint64_t r = 0; r < rows; ++r) {
        uint32_t *row = l + r * nx;
        for (uint64_t x = 1; x < nx; ++x) row[x] += row[x - 1];
        if (r > 0) add(row, row - nx, nx);
    }
}

// Waits for another thread of the grid: spins briefly, then yields (threads may outnumber cores).
template <typename Ready> void wait_for(Ready ready) {
    for (unsigned i = 0; !ready(); ++i) {
        if (i < 256) {
#if ZB_SIMD_X86
            _mm_pause();
#endif
        } else {
            std::this_thread::yield();
        }
    }
}

// Progress of one band thread, for the band after it: layers handed over, and layers taken from the band before.
struct alignas(64) Progress {
    std::atomic<uint64_t> given{0};
    std::atomic<uint64_t> taken{0};
};

constexpr uint64_t kRing = 8;   // layers a band may run ahead of the next band

struct Plan {
    int groups = 1, bands = 1;
    std::vector<uint64_t> first;   // group g has layers [first[g], first[g+1])
};

// bands: the largest divisor of nt whose bands hold at least `unit` values and (with several rows per layer) at
// least a row; groups: the rest of the threads, at most one per layer. Slabs are equal: every group waits for the
// slab sums of the others before it decodes, so the last group (which sums nothing) gains nothing from a larger
// slab (measured with slabs weighted by the sum cost: the last group finished 1.5x after the others).
inline Plan make_plan(uint64_t layers, uint64_t rows, uint64_t nx, int nt, uint64_t unit) {
    Plan p;
    const uint64_t lsize = rows * nx;
    uint64_t most = std::max<uint64_t>(1, lsize / unit);
    if (rows > 1) most = std::min(most, rows);
    for (int b = 1; b <= nt; ++b)
        if (nt % b == 0 && (uint64_t)b <= most) p.bands = b;
    p.groups = (int)std::min<uint64_t>((uint64_t)(nt / p.bands), layers);
    p.first.resize((size_t)p.groups + 1);
    for (int g = 0; g <= p.groups; ++g) p.first[(size_t)g] = layers * (uint64_t)g / (uint64_t)p.groups;
    return p;
}

// Per-call scratch of the grid, kept by the calling thread (HDF5 calls once per chunk).
struct Scratch {
    std::vector<uint32_t> words;
    std::unique_ptr<Progress[]> progress;
    int progress_count = 0;
};
inline Scratch &scratch() {
    thread_local Scratch s;
    return s;
}

// `layers` layers of `rows` rows of nx values: deltas from src -> values out, on nt threads.
template <typename T, class Source>
void lorenzo_grid(const Source &src, typename Source::Cursor *cursors, uint64_t layers, uint64_t rows, uint64_t nx,
                  int nt, double twoeb, T *out) {
    const uint64_t lsize = rows * nx;
    Plan plan = make_plan(layers, rows, nx, nt, Source::kUnit);
    const uint64_t slot = rows > 1 ? nx + 1 : 1;   // a hand-over: the column sums (several rows) and the row sum
    const uint64_t per_thread = (nx + kRing * slot + 15) / 16 * 16;   // whole cache lines: no false sharing
    // Layout: the slab sums of groups 0 .. G-2, the running sums of groups 0 .. G-1, then per thread its column
    // sums and its ring. Allocated here: an exception (bad_alloc) must not leave a parallel region.
    Scratch &sc = scratch();
    struct TrimOnExit {
        Scratch &sc;
        ~TrimOnExit() {
            if (sc.words.size() * 4 > kScratchKeepBytes) std::vector<uint32_t>().swap(sc.words);
        }
    } trim_on_exit{sc};
    const Plan one{1, 1, {0, layers}};
    const uint64_t lstride = (lsize + 15) / 16 * 16;   // layer-sized arrays start on a cache line
    sc.words.resize((size_t)((2 * (uint64_t)plan.groups - 1) * lstride + (uint64_t)nt * per_thread + 16));
    if (sc.progress_count < nt) {
        sc.progress.reset(new Progress[(size_t)nt]);
        sc.progress_count = nt;
    }
    uint32_t *const sums = sc.words.data() + (-(uintptr_t)sc.words.data() / 4 & 15);
    uint32_t *const accs = sums + (plan.groups - 1) * lstride, *const per = accs + plan.groups * lstride;
    Progress *const prog = sc.progress.get();
    for (int t = 0; t < nt; ++t) prog[t].given.store(0, std::memory_order_relaxed), prog[t].taken.store(0);

    const auto add = ZB_SIMD_PICK(void (*)(uint32_t *, const uint32_t *, uint64_t), add_span);
    using Piece = void (*)(const uint32_t *, uint64_t, uint64_t, uint64_t, uint32_t *, uint32_t *, uint32_t *, T *,
                           double);
    const Piece piece = ZB_SIMD_PICK(Piece, decode_piece);

#pragma omp parallel num_threads(nt)
    {
        // The grid needs every one of its threads running; with fewer than asked for, thread 0 does it all.
        const int nth = omp_get_num_threads();
        const Plan &pl = nth >= plan.groups * plan.bands ? plan : one;
        const int t = omp_get_thread_num();
        const bool active = t < pl.groups * pl.bands;
        const int g = active ? t / pl.bands : 0, b = active ? t % pl.bands : 0;
        // Band boundaries on multiples of 16 values: the bands' running sums share no cache line.
        auto boundary = [&](int k) { return k == pl.bands ? lsize : lsize * (uint64_t)k / (uint64_t)pl.bands / 16 * 16; };
        const uint64_t b0 = boundary(b), b1 = boundary(b + 1);
        const uint64_t z0 = pl.first[(size_t)g], z1 = pl.first[(size_t)g + 1];
        uint32_t *const acc = accs + (uint64_t)g * lstride;
        typename Source::Cursor &cur = cursors[t];

        // Slab sums, then each group's running sum starts as the in-layer prefix sum of the slabs before it.
        if (pl.groups > 1) {
            if (active && g + 1 < pl.groups) {
                uint32_t *const sg = sums + (uint64_t)g * lstride;
                std::memset(sg + b0, 0, (size_t)(b1 - b0) * 4);
                for (uint64_t z = z0; z < z1; ++z)
                    src.pieces(cur, z * lsize + b0, z * lsize + b1,
                               [&](const uint32_t *d, uint64_t i, uint64_t count) { add(sg + (i - z * lsize), d, count); });
            }
#pragma omp barrier
            if (active && g > 0) {
                std::memcpy(acc + b0, sums + b0, (size_t)(b1 - b0) * 4);
                for (int k = 1; k < g; ++k) add(acc + b0, sums + (uint64_t)k * lstride + b0, b1 - b0);
            }
#pragma omp barrier
            if (active && g > 0 && b == 0) layer_prefix_sum(acc, rows, nx);
#pragma omp barrier
        }
        if (active && g == 0) std::memset(acc + b0, 0, (size_t)(b1 - b0) * 4);

        // The layers of the slab, band by band: band b takes the state at its start from band b-1's ring.
        if (active) {
            uint32_t *const col = per + (uint64_t)t * per_thread, *const ring = col + nx;
            const uint32_t *const prev_ring = ring - per_thread;   // band b-1's (thread t-1)
            for (uint64_t z = z0, k = 0; z < z1; ++z, ++k) {
                uint32_t s = 0;
                if (b > 0) {
                    wait_for([&] { return prog[t - 1].given.load(std::memory_order_acquire) > k; });
                    const uint32_t *in = prev_ring + (k % kRing) * slot;
                    if (rows > 1) std::memcpy(col, in, (size_t)nx * 4);
                    s = in[slot - 1];
                    prog[t].taken.store(k + 1, std::memory_order_release);
                }
                const uint64_t base = z * lsize;
                src.pieces(cur, base + b0, base + b1, [&](const uint32_t *d, uint64_t i, uint64_t count) {
                    piece(d, i - base, count, nx, col, &s, acc + (i - base), out + i, twoeb);
                });
                if (b + 1 < pl.bands) {
                    wait_for([&] { return prog[t + 1].taken.load(std::memory_order_acquire) + kRing > k; });
                    uint32_t *o = ring + (k % kRing) * slot;
                    if (rows > 1) std::memcpy(o, col, (size_t)nx * 4);
                    o[slot - 1] = s;
                    prog[t].given.store(k + 1, std::memory_order_release);
                }
            }
        }
    }
}

}  // namespace grid
}  // namespace zb
