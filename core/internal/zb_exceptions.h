// Exceptions (values kept bit for bit: NaN, Inf, -0.0, fill, unrepresentable) as stored by every pipeline
// (docs/FORMAT.md section 5): an edge mask, change bits and run values. CPU implementation, shared by the v1 and v2
// pipelines.
#pragma once
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>
#include "zb_bytes.h"
#include "zb_cpu.h"
#include "zb_format.h"
#include "zb_quant.h"
#include "zb_scratch.h"
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace zb {

// The five exception segments, in stream order.
constexpr int kExceptionSegmentCount = 5;

template <typename T> struct ExceptionStreams {
    std::vector<uint8_t> edge_flags, change_flags;
    std::string edge_blocks, change_blocks;
    std::vector<T> run_values;
    uint64_t count = 0;
    uint64_t edge_nonzero_blocks() const { return edge_blocks.size() / kBlockBytes; }
    uint64_t change_nonzero_blocks() const { return change_blocks.size() / kBlockBytes; }
    // Byte length of each of the five segments.
    uint64_t segment_length(int i) const {
        switch (i) {
            case 0: return edge_flags.size();
            case 1: return edge_blocks.size();
            case 2: return change_flags.size();
            case 3: return change_blocks.size();
            default: return run_values.size() * sizeof(T);
        }
    }
    const void *segment_data(int i) const {
        switch (i) {
            case 0: return edge_flags.data();
            case 1: return edge_blocks.data();
            case 2: return change_flags.data();
            case 3: return change_blocks.data();
            default: return run_values.data();
        }
    }
};

// Values per chunk of the exception passes: fixed, so the work split never depends on the thread count.
constexpr uint64_t kExceptionChunk = uint64_t(1) << 16;

// Edge bytes (bit k of byte b: exc[8b+k] != exc[8b+k-1]) of the mask bytes [b0, b1); returns the exceptions there.
inline uint64_t exception_edges(const uint8_t *exc, uint64_t n, uint64_t b0, uint64_t b1, uint8_t *edge) {
    uint64_t count = 0, b = b0;
#if defined(__SSE2__)
    // 64 mask bytes at a time: one bit per byte from SSE2 compares, the edges by a shift of the 64-bit mask, the
    // count by popcount_swar (the baseline has no popcnt instruction).
    if (b + 8 <= b1 && 8 * (b + 8) <= n) {
        uint64_t carry = b ? (exc[8 * b - 1] != 0) : 0;   // the mask bit before the first
        const __m128i zero = _mm_setzero_si128();
        for (; b + 8 <= b1 && 8 * (b + 8) <= n; b += 8) {
            __m128i v[4];
            for (int k = 0; k < 4; ++k)
                v[k] = _mm_loadu_si128(reinterpret_cast<const __m128i *>(exc + 8 * b + 16 * k));
            const __m128i any = _mm_or_si128(_mm_or_si128(v[0], v[1]), _mm_or_si128(v[2], v[3]));
            if (!carry && _mm_movemask_epi8(_mm_cmpeq_epi8(any, zero)) == 0xFFFF) {
                std::memset(edge + b, 0, 8);   // 64 values without an exception and none before: no edge
                continue;
            }
            uint64_t m = 0;
            for (int k = 0; k < 4; ++k)
                m |= (uint64_t)((uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v[k], zero)) ^ 0xFFFFu) << (16 * k);
            const uint64_t e = m ^ ((m << 1) | carry);
            std::memcpy(edge + b, &e, 8);   // little-endian: byte j holds bits 8j .. 8j+7
            carry = m >> 63;
            count += popcount_swar(m);
        }
    }
#endif
    for (; b < b1; ++b) {
        const uint64_t i0 = b * 8;
        if (i0 + 8 <= n) {
            // Eight mask bytes (each 0 or 1) at once: bit k of the edge byte is exc[i0+k] ^ exc[i0+k-1]; the
            // multiplication gathers bit 0 of each byte of `change` into the top byte (byte k -> bit k).
            uint64_t w;
            std::memcpy(&w, exc + i0, 8);
            const uint64_t prev = i0 ? exc[i0 - 1] : 0;
            const uint64_t change = w ^ ((w << 8) | prev);
            edge[b] = (uint8_t)((change * 0x0102040810204080ull) >> 56);
            count += (w * 0x0101010101010101ull) >> 56;   // the sum of the eight 0/1 bytes (no popcnt call)
            continue;
        }
        uint8_t byte = 0;
        for (int k = 0; k < 8; ++k) {
            const uint64_t i = i0 + k;
            if (i >= n) break;
            const uint8_t prev = i ? exc[i - 1] : 0;
            byte |= (uint8_t)((exc[i] ^ prev) << k);
            count += exc[i];
        }
        edge[b] = byte;
    }
    return count;
}

// Calls f(j, i) for the exceptions i of [i0, i1) that start a run, in order: those whose bits differ from the
// exception before (at index `before`, or none if before < 0); j counts every exception on from j0. Eight mask bytes
// at a time where they are all clear, or all set with the bits of the run going on (a NaN or fill region): there a
// value-by-value walk was a third of a compression of a field 40 % NaN.
template <typename T, typename F>
void walk_run_starts(const T *x, const uint8_t *exc, uint64_t i0, uint64_t i1, int64_t before, uint64_t j0, F f) {
    using U = typename FloatBits<T>::U;
    constexpr uint64_t kAllSet = 0x0101010101010101ull;   // exc bytes are 0 or 1
    bool have_prev = before >= 0;
    U prev = have_prev ? bits_of(x[before]) : 0;
    uint64_t j = j0, i = i0;
    while (i < i1) {
        if (i + 8 <= i1) {
            uint64_t m;
            std::memcpy(&m, exc + i, 8);
            if (m == 0) {
                i += 8;
                continue;
            }
            if (m == kAllSet && have_prev) {
                uint32_t differ = 0;
                for (int k = 0; k < 8; ++k) differ |= (uint32_t)(bits_of(x[i + k]) != prev);
                if (!differ) {
                    i += 8;
                    j += 8;
                    continue;
                }
            }
        }
        if (exc[i]) {
            const U v = bits_of(x[i]);
            if (!have_prev || v != prev) f(j, i);
            prev = v;
            have_prev = true;
            ++j;
        }
        ++i;
    }
}

// The edge bytes of encode_exceptions: grow-only per calling thread (zb_scratch.h), every byte written before use.
inline ScratchArray<uint8_t> &edge_scratch() {
    static thread_local ScratchArray<uint8_t> s;
    return s;
}

// Encodes the exceptions of x marked by exc[i] != 0. Chunks in parallel: edge bytes and counts per chunk, then the
// edge mask's sparse pass (once serial, over a zero-filled vector of n/8 bytes: with 16 threads the stage took 9 ms
// of a 48 ms compression of 64M values); then the change bits and run values, whose positions come from prefix sums
// of the per-chunk exception and run counts.
template <typename T>
void encode_exceptions(const T *x, const uint8_t *exc, uint64_t n, ExceptionStreams<T> &out, int nt) {
    const uint64_t mask_bytes = div_up(n, 8);
    const int64_t chunks = (int64_t)div_up(n, kExceptionChunk);
    constexpr uint64_t chunk_bytes = kExceptionChunk / 8;
    struct TrimOnExit { ~TrimOnExit() { edge_scratch().trim(kScratchKeepBytes); } } trim_on_exit;
    uint8_t *const edge = edge_scratch().get((size_t)mask_bytes);
    std::vector<uint64_t> first((size_t)chunks + 1, 0);   // exceptions before chunk c
#pragma omp parallel for num_threads(nt) schedule(guided)
    for (int64_t c = 0; c < chunks; ++c)
        first[(size_t)c + 1] = exception_edges(exc, n, (uint64_t)c * chunk_bytes,
                                               std::min(mask_bytes, (uint64_t)(c + 1) * chunk_bytes), edge);
    for (int64_t c = 0; c < chunks; ++c) first[(size_t)c + 1] += first[(size_t)c];
    const uint64_t count = first.back();
    out.count = count;
    out.edge_flags.resize((size_t)sparse_flag_bytes(mask_bytes));
    sparse_encode_parallel(edge, mask_bytes, out.edge_flags.data(), out.edge_blocks, nt);
    if (!count) return;

    // The last exception before each chunk (the run of its first exception may continue from there).
    auto chunk_end = [&](int64_t c) { return std::min(n, (uint64_t)(c + 1) * kExceptionChunk); };
    std::vector<int64_t> last((size_t)chunks, -1), before((size_t)chunks, -1);
#pragma omp parallel for num_threads(nt) schedule(guided)
    for (int64_t c = 0; c < chunks; ++c) {
        if (first[(size_t)c + 1] == first[(size_t)c]) continue;
        int64_t i = (int64_t)chunk_end(c) - 1;
        while (!exc[i]) --i;
        last[(size_t)c] = i;
    }
    for (int64_t c = 1; c < chunks; ++c)
        before[(size_t)c] = last[(size_t)c - 1] >= 0 ? last[(size_t)c - 1] : before[(size_t)c - 1];
    auto walk = [&](int64_t c, auto f) {
        walk_run_starts(x, exc, (uint64_t)c * kExceptionChunk, chunk_end(c), before[(size_t)c], first[(size_t)c], f);
    };
    std::vector<uint64_t> first_run((size_t)chunks + 1, 0);   // runs starting before chunk c
#pragma omp parallel for num_threads(nt) schedule(dynamic, 16)
    for (int64_t c = 0; c < chunks; ++c) {
        uint64_t runs = 0;
        if (first[(size_t)c + 1] > first[(size_t)c]) walk(c, [&](uint64_t, uint64_t) { ++runs; });
        first_run[(size_t)c + 1] = runs;
    }
    for (int64_t c = 0; c < chunks; ++c) first_run[(size_t)c + 1] += first_run[(size_t)c];

    // Change bit j per exception; neighbouring chunks may share a byte of them, so whole bytes are OR-ed atomically.
    std::vector<uint8_t> change((size_t)div_up(count, 8), 0);
    out.run_values.resize((size_t)first_run.back());
#pragma omp parallel for num_threads(nt) schedule(dynamic, 16)
    for (int64_t c = 0; c < chunks; ++c) {
        if (first[(size_t)c + 1] == first[(size_t)c]) continue;
        uint64_t r = first_run[(size_t)c], byte = first[(size_t)c] >> 3;
        uint8_t acc = 0;
        auto flush = [&] {
            if (!acc) return;
#pragma omp atomic
            change[(size_t)byte] |= acc;
        };
        walk(c, [&](uint64_t j, uint64_t i) {
            if (j >> 3 != byte) {
                flush();
                byte = j >> 3;
                acc = 0;
            }
            acc |= (uint8_t)(1u << (j & 7));
            out.run_values[(size_t)r++] = x[i];
        });
        flush();
    }
    out.change_flags.resize((size_t)sparse_flag_bytes(change.size()));
    sparse_encode(change.data(), change.size(), out.change_flags.data(), out.change_blocks);
}

// Edge-mask blocks per part of the parallel exception decoder (a multiple of 8, so that a part starts at a flag
// byte): 32 KiB of the mask, 256K values. Fixed, as everything the decoder does does not depend on the threads.
constexpr uint64_t kExceptionPartBlocks = 2048;

// The bits of an edge byte e that lie inside a run, given whether the byte starts inside one: the prefix xor of the
// edges (bit k set when an odd number of edges up to bit k), flipped when it starts inside.
inline unsigned exception_bits_inside(uint8_t e, bool inside) {
    unsigned in = e;
    in ^= in << 1;
    in ^= in << 2;
    in ^= in << 4;
    return (in ^ (inside ? 0xFFu : 0u)) & 0xFFu;
}

// The number of set bits among bits [b0, b1) of a little-endian bit string (bit k: byte k/8, bit k%8).
inline uint64_t count_bits(const uint8_t *bits, uint64_t b0, uint64_t b1) {
    uint64_t count = 0;
    for (; b0 < b1 && (b0 & 7); ++b0) count += (bits[b0 >> 3] >> (b0 & 7)) & 1;
    if (b1 - b0 >= 8) {
        count += count_ones(bits + (b0 >> 3), (b1 - b0) >> 3);
        b0 += (b1 - b0) & ~uint64_t(7);
    }
    for (; b0 < b1; ++b0) count += (bits[b0 >> 3] >> (b0 & 7)) & 1;
    return count;
}

// Where the exception decoder stands at the start of a part of the edge mask: inside a run or not, the exceptions
// and runs before it, its first stored block.
template <typename T> struct ExceptionCursor {
    bool inside = false;
    uint64_t j = 0, run = 0;
    const uint8_t *stored = nullptr;
    T current{};   // the value of the run the part starts in
};

// Decodes the exceptions of the edge-mask blocks [blk0, blk1) from cursor c (see decode_exceptions); false with msg
// set on corrupt input. The edge mask is walked block by block from its zero-block flags instead of being expanded
// first: outside a run of exceptions a zero flag byte skips 1024 values at once.
template <typename T>
bool decode_exception_blocks(const uint8_t *flags, uint64_t blk0, uint64_t blk1, uint64_t n, uint64_t k,
                             uint64_t runs, const uint8_t *change, uint64_t change_bytes, const uint8_t *values,
                             ExceptionCursor<T> &c, T *out, uint8_t *mask, const char *&msg) {
    const uint64_t mask_bytes = div_up(n, 8);
    // One byte e of the edge mask (values 8b .. 8b+7).
    auto edge_byte = [&](uint64_t b, uint8_t e) {
        if (b * 8 + 8 <= n && c.j > 0) {
            // The points of the byte that are exceptions. Where none of them changes the value (no change bit among
            // their j's), each gets the current value: a value-by-value walk here was 8 % of decoding a field with a
            // few thousand -0.0 among its values. The first exception (j == 0) goes the checked way below.
            const unsigned in = exception_bits_inside(e, c.inside);
            const unsigned cnt = popcount_swar(in);
            if (!cnt) {   // the byte's edges only close a run: no exception in it (and no change bit to read)
                c.inside = false;
                return true;
            }
            if (c.j + cnt <= k) {
                const uint64_t w = c.j >> 3;   // < change_bytes: j < k
                const unsigned word = change[w] | (w + 1 < change_bytes ? (unsigned)change[w + 1] << 8 : 0u);
                if (!((word >> (c.j & 7)) & ((1u << cnt) - 1u))) {
                    if (in == 0xFFu) {   // inside a run (a NaN or fill region): eight at once
                        for (int bit = 0; bit < 8; ++bit) out[b * 8 + bit] = c.current;
                        if (mask) std::memset(mask + b * 8, 1, 8);
                    } else {
                        for (unsigned m = in; m; m &= m - 1) {
                            const uint64_t i = b * 8 + (uint64_t)__builtin_ctz(m);
                            out[i] = c.current;
                            if (mask) mask[i] = 1;
                        }
                    }
                    c.j += cnt;
                    c.inside = (in >> 7) & 1;
                    return true;
                }
            }
        }
        for (int bit = 0; bit < 8; ++bit) {
            const uint64_t i = b * 8 + bit;
            if (i >= n) {
                if (e >> bit) { msg = "corrupt stream: edge mask bits past the end"; return false; }
                break;
            }
            c.inside ^= (e >> bit) & 1;
            if (!c.inside) continue;
            if (c.j >= k) { msg = "corrupt stream: more exceptions than the header says"; return false; }
            const bool differs = (change[c.j >> 3] >> (c.j & 7)) & 1;
            if (c.j == 0 && !differs) { msg = "corrupt stream: first exception does not start a run"; return false; }
            if (differs) {
                if (c.run >= runs) { msg = "corrupt stream: more exception runs than the header says"; return false; }
                std::memcpy(&c.current, values + c.run * sizeof(T), sizeof(T));
                ++c.run;
            }
            out[i] = c.current;
            if (mask) mask[i] = 1;
            ++c.j;
        }
        return true;
    };
    for (uint64_t blk = blk0; blk < blk1; ++blk) {
        const uint8_t f = flags[blk >> 3];
        if (!c.inside && !(blk & 7) && !f) {   // eight zero blocks outside a run: nothing to do
            blk += 7;
            continue;
        }
        const bool nonzero = (f >> (blk & 7)) & 1;
        if (!nonzero && !c.inside) continue;
        const uint64_t b0 = blk * kBlockBytes, b1 = std::min(mask_bytes, b0 + kBlockBytes);
        for (uint64_t b = b0; b < b1; ++b) {
            const uint8_t e = nonzero ? c.stored[b - b0] : 0;
            if (!e && !c.inside) continue;   // eight values outside a run
            if (!edge_byte(b, e)) return false;
        }
        if (nonzero) c.stored += kBlockBytes;
    }
    return true;
}

// Decodes the exceptions from their five segments (edge flags, edge blocks, change flags, change blocks, values):
// writes each exception's value to out[i] and, if mask is not null, mask[i] = 1 for exceptions (mask must be
// zeroed by the caller). Validates the counts k and runs; false with msg set on corrupt input.
// On nt > 1 threads, in parts of kExceptionPartBlocks mask blocks: a first pass gives each part its edge parity and
// its exceptions were it to start outside a run, from which a scan gives every part its starting state (inside a
// run, exceptions and runs before it); the parts then decode independently. (Serial, the stage took 50-65 ms of a
// 100 ms 16-thread decompression of a 256 MB field 40 % NaN.) One thread decodes the mask as one part.
template <typename T>
bool decode_exceptions(const ByteSpan *seg, uint64_t n, uint64_t k, uint64_t runs, T *out, uint8_t *mask,
                       std::string &msg, int nt = 1) {
    const uint64_t mask_bytes = div_up(n, 8), nblocks = div_up(mask_bytes, kBlockBytes);
    const uint8_t *flags = seg[0].data, *stored = seg[1].data;
    const uint64_t nstored = seg[1].size / kBlockBytes;
    if (!sparse_valid(flags, stored, nstored, mask_bytes)) {
        msg = "corrupt stream: exception edge mask";
        return false;
    }
    std::vector<uint8_t> change((size_t)div_up(k, 8));
    if (k && !sparse_decode(seg[2].data, seg[3].data, seg[3].size / kBlockBytes, change.size(), change.data())) {
        msg = "corrupt stream: exception change bits";
        return false;
    }
    const uint8_t *values = seg[4].data;
    auto change_bits_past_end = [&] {
        for (uint64_t bit = k; bit < change.size() * 8; ++bit)
            if ((change[bit >> 3] >> (bit & 7)) & 1) return true;
        return false;
    };
    if (nt <= 1 || nblocks <= kExceptionPartBlocks) {   // one part: no first pass (3 % of a one-thread decode)
        ExceptionCursor<T> c;
        c.stored = stored;
        const char *why = nullptr;
        if (!decode_exception_blocks(flags, 0, nblocks, n, k, runs, change.data(), change.size(), values, c, out, mask,
                                     why)) {
            msg = why;
            return false;
        }
        if (c.j != k || c.run != runs) {
            msg = "corrupt stream: exception counts do not match the header";
            return false;
        }
        if (change_bits_past_end()) {
            msg = "corrupt stream: change bits past the end";
            return false;
        }
        return true;
    }
    const int64_t parts = (int64_t)div_up(nblocks, kExceptionPartBlocks);
    auto part_blocks = [&](int64_t p, uint64_t &blk0, uint64_t &blk1) {
        blk0 = (uint64_t)p * kExceptionPartBlocks;
        blk1 = std::min(nblocks, blk0 + kExceptionPartBlocks);
    };

    // 1. Per part: its stored blocks, its edge parity and its exceptions from outside a run (bits past the end of
    // the array left out here; the decode below rejects them).
    std::vector<uint64_t> part_stored((size_t)parts + 1, 0), outside_count((size_t)parts, 0);
    std::vector<uint8_t> parity((size_t)parts, 0);
#pragma omp parallel for num_threads(nt) schedule(dynamic, 4) if (parts > 1)
    for (int64_t p = 0; p < parts; ++p) {
        uint64_t blk0, blk1;
        part_blocks(p, blk0, blk1);
        part_stored[(size_t)p + 1] = count_ones(flags + blk0 / 8, div_up(blk1 - blk0, 8));   // past nblocks: zero
    }
    for (int64_t p = 0; p < parts; ++p) part_stored[(size_t)p + 1] += part_stored[(size_t)p];
#pragma omp parallel for num_threads(nt) schedule(dynamic, 4) if (parts > 1)
    for (int64_t p = 0; p < parts; ++p) {
        uint64_t blk0, blk1;
        part_blocks(p, blk0, blk1);
        const uint8_t *st = stored + part_stored[(size_t)p] * kBlockBytes;
        bool inside = false;
        uint64_t count = 0;
        for (uint64_t blk = blk0; blk < blk1; ++blk) {
            const uint64_t b0 = blk * kBlockBytes, b1 = std::min(mask_bytes, b0 + kBlockBytes);
            if (!((flags[blk >> 3] >> (blk & 7)) & 1)) {
                if (inside) count += std::min(n, 8 * b1) - 8 * b0;
                continue;
            }
            for (uint64_t b = b0; b < b1; ++b) {
                unsigned in = exception_bits_inside(st[b - b0], inside);
                if (8 * b + 8 > n) in &= (1u << (n - 8 * b)) - 1u;
                count += popcount_swar(in);
                inside = (in >> 7) & 1;
            }
            st += kBlockBytes;
        }
        outside_count[(size_t)p] = count;
        parity[(size_t)p] = inside;
    }
    // 2. Each part's starting state; the exception and run counts checked against the header.
    std::vector<ExceptionCursor<T>> start((size_t)parts + 1);
    for (int64_t p = 0; p < parts; ++p) {
        const ExceptionCursor<T> &c = start[(size_t)p];
        uint64_t blk0, blk1;
        part_blocks(p, blk0, blk1);
        const uint64_t part_values = std::min(n, blk1 * kBlockBytes * 8) - blk0 * kBlockBytes * 8;
        start[(size_t)p + 1].inside = c.inside != (parity[(size_t)p] != 0);
        start[(size_t)p + 1].j = c.j + (c.inside ? part_values - outside_count[(size_t)p] : outside_count[(size_t)p]);
    }
    if (start[(size_t)parts].j != k) {
        msg = "corrupt stream: exception counts do not match the header";
        return false;
    }
#pragma omp parallel for num_threads(nt) schedule(static) if (parts > 1)
    for (int64_t p = 0; p < parts; ++p)
        start[(size_t)p + 1].run = count_bits(change.data(), start[(size_t)p].j, start[(size_t)p + 1].j);
    for (int64_t p = 0; p < parts; ++p) start[(size_t)p + 1].run += start[(size_t)p].run;
    if (start[(size_t)parts].run != runs) {
        msg = "corrupt stream: exception counts do not match the header";
        return false;
    }
    if (change_bits_past_end()) {
        msg = "corrupt stream: change bits past the end";
        return false;
    }
    for (int64_t p = 0; p < parts; ++p) {
        ExceptionCursor<T> &c = start[(size_t)p];
        c.stored = stored + part_stored[(size_t)p] * kBlockBytes;
        if (c.run > 0) std::memcpy(&c.current, values + (c.run - 1) * sizeof(T), sizeof(T));
    }

    // 3. The parts, each from its state; the first failing part's message is reported.
    std::vector<const char *> why((size_t)parts, nullptr);
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (parts > 1)
    for (int64_t p = 0; p < parts; ++p) {
        uint64_t blk0, blk1;
        part_blocks(p, blk0, blk1);
        ExceptionCursor<T> c = start[(size_t)p];
        if (!decode_exception_blocks(flags, blk0, blk1, n, k, runs, change.data(), change.size(), values, c, out, mask,
                                     why[(size_t)p]))
            continue;
        if (c.j != start[(size_t)p + 1].j || c.run != start[(size_t)p + 1].run)
            why[(size_t)p] = "corrupt stream: exception counts do not match the header";
    }
    for (const char *w : why)
        if (w) {
            msg = w;
            return false;
        }
    return true;
}

}  // namespace zb
