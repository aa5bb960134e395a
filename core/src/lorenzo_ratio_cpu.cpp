// The Lorenzo + ratio decoder in slabs (zb_lorenzo_ratio.h).
//
// Why. Decoded in two passes, the Huffman decoder writes n 16-bit codes to memory and the Lorenzo inverse reads them
// back: on the 2-core VM the second pass moved 96 MB for 64 MB of f32 at the machine's two-vCPU copy rate (1.2x of
// one thread's), while the Huffman pass scaled 2x (bench/NOTES.md item 91). In slabs of about 2^17 codes a thread
// decodes the slab's sub-blocks into a buffer of its own and inverts the Lorenzo prediction from there: the codes
// never leave its cache, and the threads meet once per slab instead of once per layer (the grid's bands).
//
// The hand-over. Value (z, y, x) is the sum of the deltas in the box [0, z] x [0, y] x [0, x] (mod 2^32). With
// acc(k) the running sum, at the last layer before slab k, of the layers' in-layer prefix sums (the grid's `acc`),
//   acc(k + 1) = acc(k) + prefix(sum of slab k's delta layers),
// where prefix is the in-layer prefix sum. So a thread that has decoded slab k sums its layers (in its cache) and
// needs only acc(k) from slab k-1 to pass acc(k + 1) on, and writes slab k's values after that. The escaped codes'
// values come from one list in code order: slab k needs the count of escaped codes before it, which slab k-1 hands
// on right after its own Huffman decode. A thread waits only for slabs taken before its own, which the other threads
// hold and finish without waiting for it: no deadlock, whatever the team size. One thread needs no hand-over: acc
// runs from slab to slab.
#include "zb_lorenzo_ratio.h"
#include <omp.h>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <vector>
#include "zb_cpu.h"
#include "zb_lorenzo_grid.h"
#include "zb_scratch.h"

namespace zb {
namespace {

constexpr uint64_t kSlabCodes = uint64_t(1) << 17;   // 256 KiB of codes: in a core's L2 with its planes
// Smaller slabs (arrays of few layers per thread) would spend much of their time handing a plane over.
constexpr uint64_t kMinSlabCodes = uint64_t(1) << 15;

// The messages of the two-pass decoder: the ratio stage's own, the pipeline's with its prefix.
zb_status corrupt(std::string &msg, const std::string &what, bool pipeline) {
    msg = pipeline ? "corrupt stream: " + what : what;
    return ZB_ERR_CORRUPT;
}

// The calling thread's scratch for the threads' buffers (HDF5 decodes chunk after chunk: no page faults per call).
thread_local ScratchArray<uint8_t> t_slab_scratch;

// sum[p] = the sum over `layers` layers of lsize codes c of (code - radius), mod 2^32: the slab's deltas summed
// down the slowest dim, escaped codes (0) counted as -radius (the caller adds their values).
ZB_ALWAYS_INLINE void sum_layer_deltas(const uint16_t *__restrict c, uint64_t layers, uint64_t lsize, int32_t radius,
                                       uint32_t *__restrict sum) {
    const uint32_t bias = (uint32_t)layers * (uint32_t)radius;
    for (uint64_t p = 0; p < lsize; ++p) sum[p] = (uint32_t)c[p] - bias;
    for (uint64_t z = 1; z < layers; ++z) {
        const uint16_t *__restrict layer = c + z * lsize;
        for (uint64_t p = 0; p < lsize; ++p) sum[p] += layer[p];
    }
}
ZB_SIMD_CLONES(sum_layer_deltas)

}  // namespace

LorenzoRatioSlabs lorenzo_ratio_slabs(const Shape &s, int nt) {
    LorenzoRatioSlabs p;
    // ZBOUND_CPU_LORENZO_SLABS=0: the two passes, for tests and A/B runs (read per call: tests switch it).
    const char *e = std::getenv("ZBOUND_CPU_LORENZO_SLABS");
    if (s.rank < 2 || (e && std::strcmp(e, "0") == 0)) return p;
    const uint64_t layers = s.dims[0], lsize = s.n / layers;
    if (lsize > kSlabCodes) return p;
    uint64_t per = kSlabCodes / lsize;
    if (nt > 1) per = std::min(per, layers / (2 * (uint64_t)nt));   // at least two slabs per thread
    if (per * lsize < kMinSlabCodes) return p;
    p.layers_per_slab = per;
    p.count = div_up(layers, per);
    return p;
}

template <typename T>
zb_status lorenzo_ratio_decode_slabs(const Shape &s, const LorenzoRatioSlabs &plan, double eb, RatioBlockDecoder &dec,
                                     int32_t radius, const int32_t *escapes, uint64_t nescapes, T *out, int nt,
                                     std::string &msg) {
    const uint64_t layers = s.dims[0], lsize = s.n / layers, L = plan.layers_per_slab, count = plan.count;
    const uint64_t rows = s.rank == 3 ? s.ny() : 1, nx = s.nx();
    const int lg = dec.sub_block_log2();
    const uint64_t S = uint64_t(1) << lg, B = dec.sub_blocks(), U = kRatioZeroUnit;
    const double twoeb = 2.0 * eb;
    const bool streaming = s.n * sizeof(T) >= kStreamingBytes;

    // Per thread, on 64-byte lines: the codes of the sub-blocks a slab touches, the escape starts of its units, the
    // layer sum, the running sum, the column sums; shared: two running sums handed over (slab k writes slot k % 2
    // once slab k-1's is ready, and slab k-1 has read slot (k-2) % 2 by then).
    const uint64_t line = 16;   // uint32 words per cache line
    auto round_words = [&](uint64_t bytes) { return div_up(bytes, 4 * line) * line; };
    const uint64_t codes_words = round_words((div_up(L * lsize, S) + 1) * S * 2);
    const uint64_t units_max = div_up(L * lsize, U) + 1;
    const uint64_t zc_words = round_words(units_max * 4), est_words = round_words((units_max + 1) * 8);
    const uint64_t plane_words = round_words(lsize * 4), col_words = round_words(nx * 4);
    const uint64_t per_thread = codes_words + zc_words + est_words + 2 * plane_words + col_words +
                                round_words(sizeof(RatioCodeTiles::Cursor));
    const uint64_t total_words = (uint64_t)nt * per_thread + 2 * plane_words + line;
    std::unique_ptr<std::atomic<uint64_t>[]> esc_after, carry_ready;
    uint32_t *base;
    try {
        base = reinterpret_cast<uint32_t *>(t_slab_scratch.get((size_t)total_words * 4));
        esc_after.reset(new std::atomic<uint64_t>[(size_t)count]);
        carry_ready.reset(new std::atomic<uint64_t>[(size_t)count]);
    } catch (const std::bad_alloc &) {
        msg = "out of memory for the Lorenzo slabs";
        return ZB_ERR_NOMEM;
    }
    struct TrimOnExit {
        ~TrimOnExit() { t_slab_scratch.trim(kScratchKeepBytes); }
    } trim_on_exit;
    base += -(uintptr_t)base / 4 & (line - 1);
    uint32_t *const ring = base + (uint64_t)nt * per_thread;
    for (uint64_t k = 0; k < count; ++k) esc_after[k].store(0, std::memory_order_relaxed), carry_ready[k].store(0);
    std::atomic<uint64_t> next{0};
    std::atomic<bool> failed{false}, too_many{false};

    const auto count_zeros = ZB_SIMD_PICK(void (*)(const uint16_t *, uint64_t, uint32_t *), count_zeros_by_unit);
    const auto sum_layers = ZB_SIMD_PICK(void (*)(const uint16_t *, uint64_t, uint64_t, int32_t, uint32_t *),
                                         sum_layer_deltas);
    const auto add = ZB_SIMD_PICK(void (*)(uint32_t *, const uint32_t *, uint64_t), grid::add_span);
    using Piece = void (*)(const uint32_t *, uint64_t, uint64_t, uint64_t, uint32_t *, uint32_t *, uint32_t *, T *,
                           double);
    const Piece piece = ZB_SIMD_PICK(Piece, grid::decode_piece);

#pragma omp parallel num_threads(nt)
    {
        const int t = omp_get_thread_num();
        const bool chained = omp_get_num_threads() > 1;
        uint32_t *w = base + (uint64_t)t * per_thread;
        uint16_t *const codes = reinterpret_cast<uint16_t *>(w);
        uint32_t *const zc = w + codes_words;
        uint64_t *const est = reinterpret_cast<uint64_t *>(zc + zc_words);
        uint32_t *const sum = zc + zc_words + est_words, *const acc = sum + plane_words, *const col = acc + plane_words;
        auto &cur = *reinterpret_cast<RatioCodeTiles::Cursor *>(col + col_words);
        bool first_slab = true;
        for (uint64_t k; (k = next.fetch_add(1, std::memory_order_relaxed)) < count;) {
            const uint64_t z0 = k * L, z1 = std::min(layers, z0 + L), a = z0 * lsize, b = z1 * lsize;
            const uint64_t j0 = a >> lg, j1 = std::min(B, div_up(b, S)), units = div_up(b - a, U);
            auto wait_slab = [&](std::atomic<uint64_t> *flags) {
                grid::wait_for([&] { return flags[k - 1].load(std::memory_order_acquire) != 0; });
            };
            // A slab after a failure only keeps the hand-over going: the call fails anyway.
            bool ok = !failed.load(std::memory_order_relaxed);
            // 1. Huffman: the sub-blocks that hold codes [a, b); one on a slab border is decoded by both slabs.
            if (ok && !dec.decode(j0, j1, codes)) ok = false;
            const uint16_t *const c = codes + (a - j0 * S);
            // 2. Escapes: the count before this slab from slab k-1, the count after it to slab k+1.
            if (ok) count_zeros(c, b - a, zc);
            uint64_t e = 0;
            if (k > 0) {
                wait_slab(esc_after.get());
                e = esc_after[k - 1].load(std::memory_order_relaxed) - 1;
            }
            est[0] = e;
            for (uint64_t u = 0; u < units; ++u) est[u + 1] = est[u] + (ok ? zc[u] : 0);
            if (est[units] > nescapes) {
                too_many = true;
                ok = false;
            }
            esc_after[k].store(est[units] + 1, std::memory_order_release);
            if (!ok) failed = true;
            const RatioCodeTiles src{c, a, escapes, est, radius};
            // 3. The running sum at the slab's first layer: from slab k-1 (and acc(k + 1) on to slab k+1), or, on
            // one thread, what the previous slab left in acc.
            if (chained) {
                if (ok) {
                    sum_layers(c, z1 - z0, lsize, radius, sum);
                    for (uint64_t u = 0; u < units; ++u) {   // escaped codes counted as -radius above
                        if (est[u + 1] == est[u]) continue;
                        uint64_t ei = est[u];
                        for (uint64_t i = u * U; i < std::min(b - a, (u + 1) * U); ++i)
                            if (c[i] == 0) sum[i % lsize] += (uint32_t)escapes[ei++] + (uint32_t)radius;
                    }
                    grid::layer_prefix_sum(sum, rows, nx);
                }
                if (k > 0) {
                    wait_slab(carry_ready.get());
                    std::memcpy(acc, ring + ((k - 1) & 1) * plane_words, (size_t)lsize * 4);
                } else {
                    std::memset(acc, 0, (size_t)lsize * 4);
                }
                uint32_t *const handed = ring + (k & 1) * plane_words;
                std::memcpy(handed, acc, (size_t)lsize * 4);
                if (ok) add(handed, sum, lsize);
                carry_ready[k].store(1, std::memory_order_release);
            } else if (first_slab) {
                std::memset(acc, 0, (size_t)lsize * 4);
            }
            first_slab = false;
            if (!ok) continue;
            // 4. The slab's values, layer by layer (as the grid's slabs do).
            for (uint64_t z = z0; z < z1; ++z) {
                uint32_t row_sum = 0;
                src.pieces(cur, z * lsize, (z + 1) * lsize, [&](const uint32_t *d, uint64_t i, uint64_t m) {
                    const uint64_t p = i - z * lsize;
                    if (!streaming) return piece(d, p, m, nx, col, &row_sum, acc + p, out + i, twoeb);
                    alignas(64) T buf[kTileCodes];
                    piece(d, p, m, nx, col, &row_sum, acc + p, buf, twoeb);
                    copy_streaming(out + i, buf, (size_t)m * sizeof(T));
                });
            }
        }
        if (streaming) stream_fence();
    }

    if (dec.first_bad() != ~0ull)
        return corrupt(msg,
                       "ratio bitstream: sub-block " + std::to_string(dec.first_bad()) + " does not decode to its length",
                       false);
    if (too_many.load()) return corrupt(msg, "more escape codes than escapes", true);
    if (esc_after[count - 1].load() - 1 != nescapes)
        return corrupt(msg, "escape count does not match the codes", true);
    return ZB_OK;
}

template zb_status lorenzo_ratio_decode_slabs<float>(const Shape &, const LorenzoRatioSlabs &, double,
                                                     RatioBlockDecoder &, int32_t, const int32_t *, uint64_t, float *,
                                                     int, std::string &);
template zb_status lorenzo_ratio_decode_slabs<double>(const Shape &, const LorenzoRatioSlabs &, double,
                                                      RatioBlockDecoder &, int32_t, const int32_t *, uint64_t,
                                                      double *, int, std::string &);

}  // namespace zb
