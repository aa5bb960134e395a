// The Lorenzo inverse of rank 2 and 3 (the N-D prefix sum of the deltas, mod 2^32) fused with the dequantization,
// on several threads: as bands (each thread a part of every layer) or as slabs (runs of consecutive layers). A layer
// is one index of the slowest dim (rows x nx values: a plane in rank 3, a row in rank 2).
//
// Why two ways. A value depends on every delta before it in each dim. Bands need no extra pass: a band needs only
// the state of the band before it at the same layer (the in-layer column sums and the running row sum, handed over
// through a small ring), so the bands of one layer run as a pipeline, one layer apart. But bands narrower than the
// deltas' source unit (a 2048-code tile of the fast encoder) decode that unit more than once, so a small layer has
// too few bands for many threads. Slabs need the sum of all layers before a slab, a pass over the deltas that one
// thread does not make; in exchange any thread can take any slab, in any order, so faster threads take more.
// make_plan: bands when every thread gets one, else slabs. Rank 1 (one row) has its own slabs (lorenzo_slabs_1d);
// lorenzo_decode picks by rank. Streams cut into Lorenzo segments (format version 6, zb_lorenzo.h) need neither:
// lorenzo_decode gives each thread whole segments in turn, which are independent arrays.
//
// The deltas come from a Source, so that the fast decoder can expand its tiles straight into the pass (no array of
// codes or deltas in memory: the traffic is the stream read and the values written) while the other decoders read
// an array. A Source has:
//   struct Cursor;                                   per-thread state (e.g. the tile it decoded last)
//   static constexpr uint64_t kUnit;                 the narrowest band worth having
//   template <class F> void pieces(Cursor &, uint64_t begin, uint64_t end, F f) const;
//       calls f(const uint32_t *deltas, uint64_t index, uint64_t count) for consecutive pieces of [begin, end).
//
// The values do not depend on the plan (integer sums mod 2^32 do not depend on the grouping), so neither on the
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
#include "zb_cpu.h"
#include "zb_lorenzo.h"
#include "zb_parallel_tasks.h"
#include "zb_quant.h"
#include "zb_shape.h"
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

constexpr uint64_t kRing = 8;            // layers a band may run ahead of the next band
constexpr uint64_t kSlabSumBytes = uint64_t(64) << 20;   // at most this much scratch for the slabs' running sums

// Either `bands` (> 0) threads, each the same part of every layer, or `slabs` runs of consecutive layers that the
// threads take in turn (bands == 0).
struct Plan {
    int bands = 0;
    uint64_t slabs = 1;
};

// Bands when every thread gets one (nt bands of at least `unit` values, and at least a row each when a layer has
// several rows): no sums pass. Otherwise slabs, kPartsPerThread per thread (zb_cpu.h: why several): each slab's
// deltas are summed first (any thread, any order), then each slab is decoded from the sum of those before it.
inline Plan make_plan(uint64_t layers, uint64_t rows, uint64_t nx, int nt, uint64_t unit) {
    Plan p;
    const uint64_t lsize = rows * nx;
    uint64_t most = std::max<uint64_t>(1, lsize / unit);
    if (rows > 1) most = std::min(most, rows);
    const uint64_t fit = kSlabSumBytes / (4 * lsize) + 1;   // slabs whose running sums fit the scratch budget
    if ((uint64_t)nt <= most || fit < (uint64_t)nt) {
        // (Layers too large for a slab per thread in the budget: a few rows of huge rows. Fewer bands than threads.)
        p.bands = (int)std::min<uint64_t>((uint64_t)nt, most);
        return p;
    }
    p.slabs = std::min<uint64_t>({layers, kPartsPerThread * (uint64_t)nt, fit});
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

// `layers` layers of `rows` rows of nx values: deltas from src -> values out, on nt threads; `streaming`: through
// copy_streaming (outputs too large for the cache, decided for the whole array).
template <typename T, class Source>
void lorenzo_grid(const Source &src, typename Source::Cursor *cursors, uint64_t layers, uint64_t rows, uint64_t nx,
                  int nt, double twoeb, bool streaming, T *out) {
    const uint64_t lsize = rows * nx;
    const Plan plan = make_plan(layers, rows, nx, nt, Source::kUnit);
    const uint64_t slot = rows > 1 ? nx + 1 : 1;   // a hand-over: the column sums (several rows) and the row sum
    const uint64_t per_thread = (nx + kRing * slot + 15) / 16 * 16;   // whole cache lines: no false sharing
    const uint64_t lstride = (lsize + 15) / 16 * 16;   // layer-sized arrays start on a cache line
    const uint64_t S = plan.slabs;
    // Layout: per thread its column sums and its ring; then the running sum of the layers before: one array whose
    // parts the bands own, or one per slab. Allocated here: an exception (bad_alloc) must not leave a parallel region.
    Scratch &sc = scratch();
    struct TrimOnExit {
        Scratch &sc;
        ~TrimOnExit() {
            if (sc.words.size() * 4 > kScratchKeepBytes) std::vector<uint32_t>().swap(sc.words);
        }
    } trim_on_exit{sc};
    sc.words.resize((size_t)((uint64_t)nt * per_thread + (plan.bands ? 1 : S) * lstride + 16));
    if (sc.progress_count < nt) {
        sc.progress.reset(new Progress[(size_t)nt]);
        sc.progress_count = nt;
    }
    uint32_t *const per = sc.words.data() + (-(uintptr_t)sc.words.data() / 4 & 15);
    uint32_t *const accs = per + (uint64_t)nt * per_thread;   // slab k's at accs + k * lstride
    Progress *const prog = sc.progress.get();
    for (int t = 0; t < nt; ++t) prog[t].given.store(0, std::memory_order_relaxed), prog[t].taken.store(0);
    std::atomic<uint64_t> next_sum{0}, next_decode{0};

    const auto add = ZB_SIMD_PICK(void (*)(uint32_t *, const uint32_t *, uint64_t), add_span);
    using Piece = void (*)(const uint32_t *, uint64_t, uint64_t, uint64_t, uint32_t *, uint32_t *, uint32_t *, T *,
                           double);
    const Piece piece = ZB_SIMD_PICK(Piece, decode_piece);
    auto first_layer = [&](uint64_t k) { return layers * k / S; };   // slab k has layers [first(k), first(k + 1))
    // decode_piece into out, or, for outputs too large for the cache, into a buffer that copy_streaming writes out.
    auto decode_to_out = [&](const uint32_t *d, uint64_t p, uint64_t count, uint32_t *col, uint32_t *s, uint32_t *acc,
                             T *o) {
        if (!streaming) return piece(d, p, count, nx, col, s, acc, o, twoeb);
        constexpr uint64_t kStage = 2048;
        alignas(64) T buf[kStage];
        for (uint64_t j = 0; j < count; j += kStage) {
            const uint64_t m = std::min(kStage, count - j);
            piece(d + j, p + j, m, nx, col, s, acc + j, buf, twoeb);
            copy_streaming(o + j, buf, (size_t)m * sizeof(T));
        }
    };

    // Layers [z0, z1) of the part [b0, b1) of every layer, acc holding the running sum of the layers before z0 (it
    // is updated). With several bands, band b takes the state at its start from band b-1's ring.
    auto decode_layers = [&](int t, int b, int bands, uint64_t z0, uint64_t z1, uint64_t b0, uint64_t b1,
                             uint32_t *acc) {
        typename Source::Cursor &cur = cursors[t];
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
                decode_to_out(d, i - base, count, col, &s, acc + (i - base), out + i);
            });
            if (b + 1 < bands) {
                wait_for([&] { return prog[t + 1].taken.load(std::memory_order_acquire) + kRing > k; });
                uint32_t *o = ring + (k % kRing) * slot;
                if (rows > 1) std::memcpy(o, col, (size_t)nx * 4);
                o[slot - 1] = s;
                prog[t].given.store(k + 1, std::memory_order_release);
            }
        }
    };

    if (plan.bands) {
#pragma omp parallel num_threads(nt)
        {
            // The pipeline needs every one of its threads running; with fewer than asked for, thread 0 does it all.
            const int nth = omp_get_num_threads(), t = omp_get_thread_num();
            const int bands = nth >= plan.bands ? plan.bands : 1;
            if (t < bands) {
                // Band boundaries on multiples of 16 values: the bands' running sums share no cache line.
                auto boundary = [&](int k) { return k == bands ? lsize : lsize * (uint64_t)k / (uint64_t)bands / 16 * 16; };
                const uint64_t b0 = boundary(t), b1 = boundary(t + 1);
                std::memset(accs + b0, 0, (size_t)(b1 - b0) * 4);
                decode_layers(t, t, bands, 0, layers, b0, b1, accs);
                if (streaming) stream_fence();
            }
        }
        return;
    }

#pragma omp parallel num_threads(nt)
    {
        const int nth = omp_get_num_threads(), t = omp_get_thread_num();
        typename Source::Cursor &cur = cursors[t];
        // 1. The sum of the deltas of every slab but the last, into the running sum of the slab after it.
        if (t == 0) std::memset(accs, 0, (size_t)lsize * 4);
        for (uint64_t k; (k = next_sum.fetch_add(1, std::memory_order_relaxed)) + 1 < S;) {
            uint32_t *const sk = accs + (k + 1) * lstride;
            std::memset(sk, 0, (size_t)lsize * 4);
            for (uint64_t z = first_layer(k); z < first_layer(k + 1); ++z)
                src.pieces(cur, z * lsize, (z + 1) * lsize,
                           [&](const uint32_t *d, uint64_t i, uint64_t count) { add(sk + (i - z * lsize), d, count); });
        }
#pragma omp barrier
        // 2. Running sums over the slabs, each thread a part of the layer.
        {
            const uint64_t c0 = lsize * (uint64_t)t / (uint64_t)nth / 16 * 16;
            const uint64_t c1 = t + 1 == nth ? lsize : lsize * (uint64_t)(t + 1) / (uint64_t)nth / 16 * 16;
            for (uint64_t k = 2; k < S && c1 > c0; ++k) add(accs + k * lstride + c0, accs + (k - 1) * lstride + c0, c1 - c0);
        }
#pragma omp barrier
        // 3. Each slab from the in-layer prefix sum of the slabs before it.
        for (uint64_t k; (k = next_decode.fetch_add(1, std::memory_order_relaxed)) < S;) {
            uint32_t *const acc = accs + k * lstride;
            if (k > 0) layer_prefix_sum(acc, rows, nx);
            decode_layers(t, 0, 1, first_layer(k), first_layer(k + 1), 0, lsize, acc);
        }
        if (streaming) stream_fence();
    }
}

// n deltas -> values: a scan of chunks into a buffer (serial), then the dequantization of the chunk (vectorized),
// into out or, streaming (kStreamingBytes), into a buffer that copy_streaming writes out.
template <typename T>
ZB_ALWAYS_INLINE uint32_t scan_dequantize(const uint32_t *__restrict d, uint64_t n, uint32_t carry,
                                          T *__restrict out, double twoeb, bool streaming) {
    constexpr uint64_t kChunk = 1024;
    uint32_t buf[kChunk];
    alignas(64) T values[kChunk];
    for (uint64_t c0 = 0; c0 < n; c0 += kChunk) {
        const uint64_t m = std::min(kChunk, n - c0);
        for (uint64_t i = 0; i < m; ++i) buf[i] = carry += d[c0 + i];
        T *__restrict o = streaming ? values : out + c0;
        for (uint64_t i = 0; i < m; ++i) o[i] = dequantize<T>((int32_t)buf[i], twoeb);
        if (streaming) copy_streaming(out + c0, values, (size_t)m * sizeof(T));
    }
    return carry;
}
ZB_SIMD_CLONES(scan_dequantize)

// The sum of n values (mod 2^32).
ZB_ALWAYS_INLINE uint32_t sum_span(const uint32_t *__restrict d, uint64_t n) {
    uint32_t s = 0;
    for (uint64_t i = 0; i < n; ++i) s += d[i];
    return s;
}
ZB_SIMD_CLONES(sum_span)

// Rank 1: each thread decodes a contiguous slab; with several threads it first sums its slab's deltas (the carry of
// a slab is the sum of the slabs before it). Deltas from a Source as for lorenzo_grid.
template <typename T, class Source>
void lorenzo_slabs_1d(const Source &src, typename Source::Cursor *cursors, uint64_t n, int nt, double twoeb,
                      bool streaming, T *out) {
    std::vector<uint32_t> sums((size_t)nt);
    const auto sum = ZB_SIMD_PICK(uint32_t (*)(const uint32_t *, uint64_t), sum_span);
    using Scan = uint32_t (*)(const uint32_t *, uint64_t, uint32_t, T *, double, bool);
    const Scan scan = ZB_SIMD_PICK(Scan, scan_dequantize);
#pragma omp parallel num_threads(nt)
    {
        const uint64_t t = (uint64_t)omp_get_thread_num(), nth = (uint64_t)omp_get_num_threads();
        const uint64_t i0 = n * t / nth, i1 = n * (t + 1) / nth;
        typename Source::Cursor &cur = cursors[t];
        uint32_t carry = 0;
        if (nth > 1) {
            uint32_t s = 0;
            src.pieces(cur, i0, i1, [&](const uint32_t *d, uint64_t, uint64_t count) { s += sum(d, count); });
            sums[t] = s;
#pragma omp barrier
            for (uint64_t k = 0; k < t; ++k) carry += sums[k];
        }
        src.pieces(cur, i0, i1, [&](const uint32_t *d, uint64_t i, uint64_t count) {
            carry = scan(d, count, carry, out + i, twoeb, streaming);
        });
        if (streaming) stream_fence();
    }
}

// A Source seen from index `base` on (one Lorenzo segment as an array of its own).
template <class Source> struct OffsetSource {
    using Cursor = typename Source::Cursor;
    static constexpr uint64_t kUnit = Source::kUnit;
    const Source &src;
    uint64_t base;
    template <class F> void pieces(Cursor &c, uint64_t begin, uint64_t end, F f) const {
        src.pieces(c, base + begin, base + end,
                   [&](const uint32_t *d, uint64_t i, uint64_t count) { f(d, i - base, count); });
    }
};

// The Lorenzo inverse of deltas from src for an array of shape s (any rank) cut into Lorenzo segments `segs`
// (zb_lorenzo.h; one segment for unsegmented streams), dequantized into out. With at least half as many segments
// as threads, each thread decodes whole segments, taking the next one when it is done (no sums pass, no hand-over
// between threads); otherwise the segments are decoded one after another, each on all threads.
template <typename T, class Source>
void lorenzo_decode(const Source &src, typename Source::Cursor *cursors, const Shape &s, const LorenzoSegments &segs,
                    int nt, double twoeb, T *out) {
    const bool streaming = s.n * sizeof(T) >= kStreamingBytes;
    const uint64_t lsize = segs.layer_values, count = segs.count();
    auto decode_segment = [&](uint64_t k, typename Source::Cursor *cur, int threads) {
        const uint64_t z0 = k * segs.per_segment, layers = std::min(segs.per_segment, segs.layers - z0);
        const OffsetSource<Source> part{src, z0 * lsize};
        T *o = out + z0 * lsize;
        if (s.rank == 1) lorenzo_slabs_1d(part, cur, layers, threads, twoeb, streaming, o);
        else lorenzo_grid(part, cur, layers, s.rank == 3 ? s.ny() : 1, s.nx(), threads, twoeb, streaming, o);
    };
    if (count == 1 || 2 * count < (uint64_t)nt) {
        for (uint64_t k = 0; k < count; ++k) decode_segment(k, cursors, nt);
        return;
    }
    // Whole segments taken in turn, each on one thread (a nested region of one thread: this one).
    parallel_tasks((int64_t)count, nt,
                   [&](int64_t k, int thread) { decode_segment((uint64_t)k, cursors + thread, 1); });
}

}  // namespace grid
}  // namespace zb
