// The fast pipeline on the CPU: dual-quant Lorenzo -> 16-bit codes -> bitshuffle tiles -> zero-block sparse pass,
// with escapes and exceptions kept losslessly (docs/FORMAT.md). This is the reference the CUDA backend must match
// byte for byte; loops are simple, row-wise and OpenMP-parallel, and the output never depends on the thread count.
#include <omp.h>
#include <algorithm>
#include <atomic>
#include <cstring>
#include <type_traits>
#include <vector>
#include "zb_cpu.h"
#include "zb_crc32c.h"
#include "zb_exceptions.h"
#include "zb_lorenzo.h"
#include "zb_quant.h"
#include "zb_scratch.h"
#include "zb_quantize_span.h"

namespace zb {

// Dual quantization (docs/FORMAT.md section 3) of every value: q and the exception mask (zb_quantize_span.h).
template <typename T>
void quantize_span_base(const T *x, uint64_t i0, uint64_t i1, QuantParams qp, uint32_t *q, uint8_t *exc) {
    quantize_span(x, i0, i1, qp, q, exc);
}

// Every value, in spans of kSpan values over the threads; each span by the AVX2 kernel where the CPU has it (the
// compiler vectorizes quantize_span for the baseline only), else by the loop above.
template <typename T>
void quantize_values(const T *__restrict x, uint64_t n, const QuantParams &params, uint32_t *__restrict q,
                     uint8_t *__restrict exc, int nt) {
    using Span = void (*)(const T *, uint64_t, uint64_t, QuantParams, uint32_t *, uint8_t *);
    Span span = quantize_span_base<T>;
#if ZB_SIMD_X86
    if (simd_level() >= kSimdAvx2) span = quantize_span_avx2;
#endif
    constexpr uint64_t kSpan = 1 << 14;
    const QuantParams qp = params;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t c = 0; c < (int64_t)div_up(n, kSpan); ++c)
        span(x, (uint64_t)c * kSpan, std::min(n, (uint64_t)(c + 1) * kSpan), qp, q, exc);
}
template void quantize_values<float>(const float *, uint64_t, const QuantParams &, uint32_t *, uint8_t *, int);
template void quantize_values<double>(const double *, uint64_t, const QuantParams &, uint32_t *, uint8_t *, int);

namespace {

// Splits [0, count) into `parts` contiguous ranges; range r is [begin(r), begin(r+1)).
struct Partition {
    uint64_t count;
    int parts;
    uint64_t begin(int r) const { return count * (uint64_t)r / (uint64_t)parts; }
};

// ---------------------------------------------------------------------------------------------------------------
// Encoding
// ---------------------------------------------------------------------------------------------------------------

// Lorenzo deltas of part [x0, x1) of one row (fixed z, y) as codes (codes[0] is for x0); escaped deltas are
// appended to `escapes` in order. `up`, `back`, `backup` are the rows at (z, y-1), (z-1, y), (z-1, y-1), or a
// zero row where outside; rows that the rank does not have are never read.
template <int Rank>
ZB_ALWAYS_INLINE void row_codes(const uint32_t *cur, const uint32_t *up, const uint32_t *back, const uint32_t *backup,
                                uint64_t x0, uint64_t x1, uint16_t *codes, std::vector<int32_t> *escapes,
                                std::integral_constant<int, Rank>) {
    uint32_t any_escape = 0;   // an integer OR-reduction (a bool one keeps the loop from vectorizing)
    auto emit = [&](uint64_t x, uint32_t pred) {
        const uint16_t c = delta_to_code((int32_t)(cur[x] - pred));
        any_escape |= (uint32_t)(c == kEscapeCode);
        codes[x - x0] = c;
    };
    uint64_t x = x0;
    if (x == 0) {  // no left neighbours
        uint32_t pred0 = 0;
        if constexpr (Rank >= 2) pred0 += up[0];
        if constexpr (Rank == 3) pred0 += back[0] - backup[0];
        emit(0, pred0);
        x = 1;
    }
    for (; x < x1; ++x) {
        uint32_t pred = cur[x - 1];
        if constexpr (Rank >= 2) pred += up[x] - up[x - 1];
        if constexpr (Rank == 3) pred += back[x] - back[x - 1] - backup[x] + backup[x - 1];
        emit(x, pred);
    }
    if (any_escape)  // rare: a second look keeps the main loop free of push_back
        for (x = x0; x < x1; ++x)
            if (codes[x - x0] == kEscapeCode) {
                uint32_t pred = x ? cur[x - 1] : 0;
                if constexpr (Rank >= 2) pred += up[x] - (x ? up[x - 1] : 0);
                if constexpr (Rank == 3) pred += back[x] - (x ? back[x - 1] : 0) - backup[x] + (x ? backup[x - 1] : 0);
                escapes->push_back((int32_t)(cur[x] - pred));
            }
}
ZB_SIMD_CLONES(row_codes)

// The 2048 codes of tile t (zero-padded past the end of the array), walking the rows the tile overlaps.
template <int Rank>
void tile_codes(const uint32_t *q, const Shape &s, const uint32_t *zero, uint64_t t, uint16_t *codes,
                std::vector<int32_t> &escapes) {
    using Rows = void (*)(const uint32_t *, const uint32_t *, const uint32_t *, const uint32_t *, uint64_t, uint64_t,
                          uint16_t *, std::vector<int32_t> *, std::integral_constant<int, Rank>);
    static const Rows rows_base = row_codes_base, rows_avx2 = row_codes_avx2, rows_avx512 = row_codes_avx512;
    const Rows rows = simd_pick(rows_base, rows_avx2, rows_avx512);
    const uint64_t nx = s.nx(), ny = s.ny();
    const uint64_t begin = t * kTileCodes, end = std::min(s.n, begin + kTileCodes);
    for (uint64_t i = begin; i < end;) {
        const uint64_t row = i / nx, x0 = i % nx, x1 = std::min(nx, x0 + (end - i));
        const uint64_t z = row / ny, y = row % ny;
        const uint32_t *cur = q + row * nx;
        const uint32_t *up = y ? cur - nx : zero;
        const uint32_t *back = z ? cur - nx * ny : zero;
        const uint32_t *backup = (z && y) ? back - nx : zero;
        rows(cur, up, back, backup, x0, x1, codes + (i - begin), &escapes, std::integral_constant<int, Rank>{});
        i += x1 - x0;
    }
    std::fill(codes + (end - begin), codes + kTileCodes, (uint16_t)0);
}

// Per tile: codes, bitshuffle, zero-block flags and the non-zero block count (in tile_nnz[t]). Tiles are split in
// contiguous ranges per thread so that the escapes come out in index order.
template <int Rank>
void shuffle_tiles_rank(const uint32_t *q, const Shape &s, uint8_t *shuffled, uint8_t *code_flags,
                        uint64_t *tile_nnz, std::vector<int32_t> &escapes, int nt) {
    const uint64_t ntiles = code_tiles(s.n);
    const std::vector<uint32_t> zero(Rank >= 2 ? s.nx() : 0, 0);
    const Partition part{ntiles, nt};
    std::vector<std::vector<int32_t>> esc_per_part(nt);
    // The escape lists grow inside the parallel region. An exception must not leave an OpenMP region (that is
    // std::terminate), so a failed growth is caught in its thread and rethrown after the region as bad_alloc.
    std::atomic<bool> out_of_memory{false};
#pragma omp parallel for num_threads(nt) schedule(static, 1)
    for (int r = 0; r < nt; ++r) {
        try {
            uint16_t codes[kTileCodes];
            for (uint64_t t = part.begin(r); t < part.begin(r + 1) && !out_of_memory.load(); ++t) {
                tile_codes<Rank>(q, s, zero.data(), t, codes, esc_per_part[r]);
                uint8_t *tile = shuffled + t * kTileBytes;
                bitshuffle_tile(codes, tile);
                tile_nnz[t] = tile_flags(tile, code_flags + t * kTileFlagBytes);
            }
        } catch (const std::bad_alloc &) {
            out_of_memory = true;
        }
    }
    if (out_of_memory) throw std::bad_alloc();
    for (auto &e : esc_per_part) escapes.insert(escapes.end(), e.begin(), e.end());
}

void shuffle_tiles(const uint32_t *q, const Shape &s, uint8_t *shuffled, uint8_t *code_flags, uint64_t *tile_nnz,
                   std::vector<int32_t> &escapes, int nt) {
    if (s.rank == 1) shuffle_tiles_rank<1>(q, s, shuffled, code_flags, tile_nnz, escapes, nt);
    else if (s.rank == 2) shuffle_tiles_rank<2>(q, s, shuffled, code_flags, tile_nnz, escapes, nt);
    else shuffle_tiles_rank<3>(q, s, shuffled, code_flags, tile_nnz, escapes, nt);
}

// Scratch memory of the encoder, one set per calling thread.
struct EncoderScratch {
    ScratchArray<uint32_t> q;
    ScratchArray<uint8_t> exc, shuffled, code_flags;
    ScratchArray<uint64_t> tile_offset;
    void trim() {
        q.trim(kScratchKeepBytes);
        exc.trim(kScratchKeepBytes);
        shuffled.trim(kScratchKeepBytes);
        code_flags.trim(kScratchKeepBytes);
        tile_offset.trim(kScratchKeepBytes);
    }
};
thread_local EncoderScratch t_enc;

template <typename T>
zb_status compress_t(const zb_params &p, const T *x, const Shape &s, uint8_t *dst, size_t cap, size_t *out_len,
                     int nt, std::string &msg) {
    const uint64_t n = s.n;
    Header h;
    h.dtype = sizeof(T) == 8 ? ZB_F64 : ZB_F32;
    h.shape = s;
    h.mode = p.mode;
    h.bound = p.bound;
    double vmin = 0, vmax = 0;
    const bool has_range = p.mode == ZB_MODE_REL &&
                           value_range(h.dtype, x, n, p.has_fill, p.fill_bits, nt, vmin, vmax);
    h.eb = derive_abs_bound(p.mode, p.bound, has_range, vmin, vmax);
    const QuantParams qp = make_quant_params(h.eb, p.has_fill, p.fill_bits);

    struct TrimOnExit { ~TrimOnExit() { t_enc.trim(); } } trim_on_exit;
    uint32_t *q = t_enc.q.get((size_t)n);
    uint8_t *exc = t_enc.exc.get((size_t)n);
    quantize_values(x, n, qp, q, exc, nt);

    // Codes, bitshuffle and block flags per tile; then block offsets by an exclusive scan of the tile counts.
    const uint64_t ntiles = code_tiles(n);
    uint8_t *shuffled = t_enc.shuffled.get((size_t)(ntiles * kTileBytes));
    uint8_t *code_flags = t_enc.code_flags.get((size_t)(ntiles * kTileFlagBytes));
    uint64_t *tile_offset = t_enc.tile_offset.get((size_t)ntiles + 1);
    std::vector<int32_t> escapes;
    shuffle_tiles(q, s, shuffled, code_flags, tile_offset + 1, escapes, nt);
    tile_offset[0] = 0;
    for (uint64_t t = 0; t < ntiles; ++t) tile_offset[t + 1] += tile_offset[t];

    ExceptionStreams<T> ex;
    encode_exceptions(x, exc, n, ex, nt);

    h.predictor = 1;
    h.encoder = 1;
    h.escapes = escapes.size();
    h.exceptions = ex.count;
    h.runs = ex.run_values.size();
    h.nonzero_code_blocks = tile_offset[ntiles];
    fast_layout(h, ex.edge_nonzero_blocks(), ex.change_nonzero_blocks());

    bool raw_written = false;
    if (zb_status st = raw_or_fits(h, x, dst, cap, out_len, raw_written, nt, msg)) return st;
    if (raw_written) return ZB_OK;
    const size_t total = h.header_bytes() + (size_t)h.payload_bytes();

    uint8_t *payload = dst + h.header_bytes();
    auto seg = [&](int i) { return payload + h.seg[i].offset; };
    std::memcpy(seg(kSegCodeFlags), code_flags, (size_t)(ntiles * kTileFlagBytes));
    uint8_t *blocks = seg(kSegCodeBlocks);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t t = 0; t < (int64_t)ntiles; ++t) {
        const uint8_t *tile = shuffled + (size_t)t * kTileBytes;
        const uint8_t *flags = code_flags + (size_t)t * kTileFlagBytes;
        uint8_t *out = blocks + tile_offset[(size_t)t] * kBlockBytes;
        for (uint64_t b = 0; b < kTileBytes / kBlockBytes; ++b)
            if (flags[b >> 3] & (1u << (b & 7))) {
                std::memcpy(out, tile + b * kBlockBytes, kBlockBytes);
                out += kBlockBytes;
            }
    }
    if (!escapes.empty()) std::memcpy(seg(kSegEscapes), escapes.data(), escapes.size() * 4);
    for (int i = 0; i < kExceptionSegmentCount; ++i)
        if (ex.segment_length(i)) std::memcpy(seg(kSegEdgeFlags + i), ex.segment_data(i), ex.segment_length(i));
    h.payload_crc = payload_checksum(payload, (size_t)h.payload_bytes(), nt);
    write_header(h, dst);
    *out_len = total;
    return ZB_OK;
}

// ---------------------------------------------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------------------------------------------

zb_status corrupt(std::string &msg, const char *why) {
    msg = std::string("corrupt stream: ") + why;
    return ZB_ERR_CORRUPT;
}

// Scratch memory of the decoder, one set per calling thread.
struct DecoderScratch {
    ScratchArray<uint16_t> codes;
    ScratchArray<uint32_t> q;
    ScratchArray<uint64_t> esc_start;
    void trim() {
        codes.trim(kScratchKeepBytes);
        q.trim(kScratchKeepBytes);
        esc_start.trim(kScratchKeepBytes);
    }
};
thread_local DecoderScratch t_dec;

// The decoder's per-value loops, compiled for each vector level (zb_simd.h).
ZB_ALWAYS_INLINE uint64_t count_escape_codes(const uint16_t *c, uint64_t valid) {
    uint64_t esc = 0;
    for (uint64_t j = 0; j < valid; ++j) esc += c[j] == kEscapeCode;
    return esc;
}
ZB_SIMD_CLONES(count_escape_codes)

ZB_ALWAYS_INLINE void codes_to_deltas(const uint16_t *__restrict c, uint32_t *__restrict q, uint64_t valid) {
    for (uint64_t j = 0; j < valid; ++j) q[j] = (uint32_t)code_to_delta(c[j]);
}
ZB_SIMD_CLONES(codes_to_deltas)

template <typename T>
zb_status decompress_t(const Header &h, const uint8_t *stream, T *out, int nt, std::string &msg) {
    const uint64_t n = h.shape.n;
    const uint8_t *payload = stream + h.header_bytes();
    if (h.flags & kFlagRaw) {
        std::memcpy(out, payload, (size_t)(n * sizeof(T)));
        return ZB_OK;
    }
    const uint64_t ntiles = code_tiles(n);
    const uint8_t *code_flags = payload + h.seg[kSegCodeFlags].offset;
    const uint8_t *blocks = payload + h.seg[kSegCodeBlocks].offset;

    struct TrimOnExit { ~TrimOnExit() { t_dec.trim(); } } trim_on_exit;
    uint16_t *codes = t_dec.codes.get((size_t)(ntiles * kTileCodes));
    if (!fast_decode_codes(code_flags, blocks, h.nonzero_code_blocks, n, codes, nt))
        return corrupt(msg, "code blocks do not match their flags");
    // Escapes per tile, then where each tile's escapes start.
    uint64_t *esc_start = t_dec.esc_start.get((size_t)ntiles + 1);
    esc_start[0] = 0;
    const auto count_escapes = ZB_SIMD_PICK(uint64_t (*)(const uint16_t *, uint64_t), count_escape_codes);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t t = 0; t < (int64_t)ntiles; ++t) {
        const uint64_t valid = std::min<uint64_t>(kTileCodes, n - (uint64_t)t * kTileCodes);
        esc_start[(size_t)t + 1] = count_escapes(codes + (size_t)t * kTileCodes, valid);
    }
    for (uint64_t t = 0; t < ntiles; ++t) esc_start[t + 1] += esc_start[t];
    if (esc_start[ntiles] != h.escapes) return corrupt(msg, "escape codes do not match the escape count");

    // Deltas (escapes patched in order), then the prefix sums give q.
    uint32_t *q = t_dec.q.get((size_t)n);
    const uint8_t *esc_bytes = payload + h.seg[kSegEscapes].offset;
    const auto to_deltas = ZB_SIMD_PICK(void (*)(const uint16_t *, uint32_t *, uint64_t), codes_to_deltas);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t t = 0; t < (int64_t)ntiles; ++t) {
        const uint64_t base = (uint64_t)t * kTileCodes;
        const uint64_t valid = std::min<uint64_t>(kTileCodes, n - base);
        uint64_t e = esc_start[(size_t)t];
        if (e == esc_start[(size_t)t + 1]) {   // no escape in this tile (the common case): a loop that vectorizes
            to_deltas(codes + base, q + base, valid);
            continue;
        }
        for (uint64_t j = 0; j < valid; ++j) {
            const uint16_t c = codes[base + j];
            int32_t d;
            if (c == kEscapeCode) {
                std::memcpy(&d, esc_bytes + 4 * e++, 4);
            } else {
                d = code_to_delta(c);
            }
            q[base + j] = (uint32_t)d;
        }
    }
    lorenzo_inverse_dequantize(q, h.shape, nt, 2.0 * h.eb, out);
    if (h.exceptions) {
        ByteSpan ex[kExceptionSegmentCount];
        for (int i = 0; i < kExceptionSegmentCount; ++i)
            ex[i] = {payload + h.seg[kSegEdgeFlags + i].offset, h.seg[kSegEdgeFlags + i].length};
        if (!decode_exceptions(ex, n, h.exceptions, h.runs, out, nullptr, msg)) return ZB_ERR_CORRUPT;
    }
    return ZB_OK;
}

}  // namespace

namespace {

// Inclusive prefix sum (mod 2^32) of one long row on nt threads: each thread scans its own part, then adds the sum
// of the parts before it. Integer sums mod 2^32 do not depend on the grouping, so neither does the result.
void prefix_sum_parallel(uint32_t *r, uint64_t len, int nt) {
    if (nt <= 1 || len < 2 * kValuesPerThread) {
        for (uint64_t x = 1; x < len; ++x) r[x] += r[x - 1];
        return;
    }
    std::vector<uint32_t> carry((size_t)nt + 1, 0);
#pragma omp parallel num_threads(nt)
    {
        const int t = omp_get_thread_num(), T = omp_get_num_threads();
        const uint64_t x0 = len * (uint64_t)t / (uint64_t)T, x1 = len * (uint64_t)(t + 1) / (uint64_t)T;
        for (uint64_t x = x0 + 1; x < x1; ++x) r[x] += r[x - 1];
        carry[(size_t)t + 1] = x1 > x0 ? r[x1 - 1] : 0;
#pragma omp barrier
#pragma omp single
        for (int k = 1; k <= T; ++k) carry[(size_t)k] += carry[(size_t)k - 1];
        const uint32_t c = carry[(size_t)t];
        for (uint64_t x = x0; x < x1; ++x) r[x] += c;
    }
}

// Columns [c0, c1) of a slab of `rows` rows of `width` values: each row plus the one before.
ZB_ALWAYS_INLINE void add_row_runs(uint32_t *slab, uint64_t rows, uint64_t width, uint64_t c0, uint64_t c1) {
    for (uint64_t r = 1; r < rows; ++r) {
        uint32_t *__restrict cur = slab + r * width;
        const uint32_t *__restrict prev = cur - width;
        for (uint64_t c = c0; c < c1; ++c) cur[c] += prev[c];
    }
}
ZB_SIMD_CLONES(add_row_runs)

// In each of `slabs` slabs of `rows` rows of `width` values, adds every row to the next (a prefix sum down the
// columns). The work items are (slab, run of columns), so that a pass has enough of them for every thread even when
// there is one slab of long columns (the z pass); a run is at least 256 columns so each row access stays a stream.
void prefix_sum_columns(uint32_t *q, uint64_t slabs, uint64_t rows, uint64_t width, int nt) {
    if (rows < 2) return;
    const uint64_t want = div_up(width * slabs, 4 * (uint64_t)nt);
    const uint64_t run = std::min(width, std::max<uint64_t>(256, div_up(want, 16) * 16));
    const uint64_t runs = div_up(width, run);
    const auto add_rows = ZB_SIMD_PICK(void (*)(uint32_t *, uint64_t, uint64_t, uint64_t, uint64_t), add_row_runs);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t item = 0; item < (int64_t)(slabs * runs); ++item) {
        const uint64_t c0 = (uint64_t)item % runs * run;
        add_rows(q + (uint64_t)item / runs * rows * width, rows, width, c0, std::min(width, c0 + run));
    }
}

}  // namespace

// N-D inclusive prefix sum (mod 2^32) along x, then y, then z: the inverse of the Lorenzo deltas. Each pass is one
// parallel region (the z pass once ran one region per plane: on a 7920-plane array that made two threads 4x slower
// than one).
namespace {

// The prefix sum along x of every row.
void prefix_sum_rows(uint32_t *q, const Shape &s, int nt) {
    const uint64_t nx = s.nx(), rows = s.ny() * s.nz();
    if (rows < (uint64_t)nt) {
        for (uint64_t row = 0; row < rows; ++row) prefix_sum_parallel(q + row * nx, nx, nt);
    } else {
#pragma omp parallel for num_threads(nt) schedule(static)
        for (int64_t row = 0; row < (int64_t)rows; ++row) {
            uint32_t *r = q + (uint64_t)row * nx;
            for (uint64_t x = 1; x < nx; ++x) r[x] += r[x - 1];
        }
    }
}

constexpr uint64_t kFusedRun = 2048;   // most columns per work item of the fused last pass (its running sums)

template <typename T>
ZB_ALWAYS_INLINE void dequantize_span(const uint32_t *__restrict q, T *__restrict out, uint64_t i0, uint64_t i1,
                                      double twoeb) {
    for (uint64_t i = i0; i < i1; ++i) out[i] = dequantize<T>((int32_t)q[i], twoeb);
}
ZB_SIMD_CLONES(dequantize_span)

// Columns [c0, c1) (at most kFusedRun) of `rows` rows of `width` integers: the running sum down each column,
// dequantized into out (same layout), without writing the sums back.
template <typename T>
ZB_ALWAYS_INLINE void sum_rows_dequantize(const uint32_t *q, uint64_t rows, uint64_t width, uint64_t c0, uint64_t c1,
                                          T *out, double twoeb) {
    uint32_t acc[kFusedRun];
    const uint64_t w = c1 - c0;
    for (uint64_t c = 0; c < w; ++c) acc[c] = 0;
    for (uint64_t r = 0; r < rows; ++r) {
        const uint32_t *__restrict row = q + r * width + c0;
        T *__restrict o = out + r * width + c0;
        for (uint64_t c = 0; c < w; ++c) {
            acc[c] += row[c];
            o[c] = dequantize<T>((int32_t)acc[c], twoeb);
        }
    }
}
ZB_SIMD_CLONES(sum_rows_dequantize)


// The slab decoder. Its unit is a layer: one index of the slowest dim (a plane of `rows` rows of nx values in rank
// 3, one row in rank 2; rank 1 has its own loop below). Each thread takes a contiguous slab of layers: a read-only
// pass sums its layers column by column, and once every thread has its sums, a thread's carry (the prefix sum of
// all layers before its slab) is the in-layer prefix sum of the sums of the slabs before it. Then one pass over the
// slab, reading the deltas and writing the values, keeps the running sum of the layers so far in a layer-sized
// buffer that stays in cache. Threads thus stream contiguous memory (the column-run passes walked thousands of
// planes with a plane-sized stride), and the memory traffic is 12 bytes per value (4 for the sums, 8 for the pass;
// 8 on one thread, which needs no sums) instead of 24 (read and write q in each of the x and y passes, then read q
// and write the values). Sums are mod 2^32, so the values do not depend on the grouping (nor on the thread count).

// a[i] += b[i] for i < n.
ZB_ALWAYS_INLINE void add_span(uint32_t *__restrict a, const uint32_t *__restrict b, uint64_t n) {
    for (uint64_t i = 0; i < n; ++i) a[i] += b[i];
}
ZB_SIMD_CLONES(add_span)

// The in-layer inclusive prefix sum (along x, then down the rows) of one layer, in place.
void layer_prefix_sum(uint32_t *l, uint64_t rows, uint64_t nx) {
    for (uint64_t r = 0; r < rows; ++r) {
        uint32_t *row = l + r * nx;
        for (uint64_t x = 1; x < nx; ++x) row[x] += row[x - 1];
        if (r > 0) add_span(row, row - nx, nx);
    }
}

// One layer of deltas d -> values: acc (the running sum of the layers before, `rows` x nx) += the in-layer prefix
// sum of d, out = dequantize(acc). col holds the prefix sum down the rows of this layer so far (nx values).
template <typename T>
ZB_ALWAYS_INLINE void decode_layer(const uint32_t *__restrict d, uint64_t rows, uint64_t nx, uint32_t *__restrict acc,
                                   uint32_t *__restrict col, T *__restrict out, double twoeb) {
    for (uint64_t r = 0; r < rows; ++r) {
        const uint32_t *__restrict dr = d + r * nx;
        uint32_t s = 0;   // the scan along x is serial; the rest vectorizes
        if (r == 0) {
            for (uint64_t x = 0; x < nx; ++x) col[x] = s += dr[x];
        } else {
            for (uint64_t x = 0; x < nx; ++x) col[x] += s += dr[x];
        }
        uint32_t *__restrict a = acc + r * nx;
        T *__restrict o = out + r * nx;
        for (uint64_t x = 0; x < nx; ++x) {
            a[x] += col[x];
            o[x] = dequantize<T>((int32_t)a[x], twoeb);
        }
    }
}
ZB_SIMD_CLONES(decode_layer)

// Rank 2 and 3: `layers` layers of `rows` rows of nx deltas q (only read) -> values out.
template <typename T>
void lorenzo_slabs(const uint32_t *q, uint64_t layers, uint64_t rows, uint64_t nx, int nt, double twoeb, T *out) {
    const uint64_t lsize = rows * nx;
    // Per thread: its slab's column sums, its running sum (which starts as its carry) and a row of column sums. All
    // allocated here: an exception (bad_alloc) must not leave a parallel region.
    std::vector<uint32_t> sums(nt > 1 ? (size_t)(nt * lsize) : 0), acc((size_t)(nt * lsize)), cols((size_t)(nt * nx));
    const auto add = ZB_SIMD_PICK(void (*)(uint32_t *, const uint32_t *, uint64_t), add_span);
    using Layer = void (*)(const uint32_t *, uint64_t, uint64_t, uint32_t *, uint32_t *, T *, double);
    const Layer layer = ZB_SIMD_PICK(Layer, decode_layer);
#pragma omp parallel num_threads(nt)
    {
        const uint64_t t = (uint64_t)omp_get_thread_num(), nth = (uint64_t)omp_get_num_threads();
        const uint64_t z0 = layers * t / nth, z1 = layers * (t + 1) / nth;
        uint32_t *a = acc.data() + t * lsize;
        if (nth > 1) {
            for (uint64_t z = z0; z < z1; ++z) add(sums.data() + t * lsize, q + z * lsize, lsize);
#pragma omp barrier
            for (uint64_t k = 0; k < t; ++k) add(a, sums.data() + k * lsize, lsize);
            layer_prefix_sum(a, rows, nx);
        }
        uint32_t *col = cols.data() + t * nx;
        for (uint64_t z = z0; z < z1; ++z) layer(q + z * lsize, rows, nx, a, col, out + z * lsize, twoeb);
    }
}

// n deltas -> values: a scan of chunks into a buffer (serial), then the dequantization of the chunk (vectorized).
template <typename T>
ZB_ALWAYS_INLINE uint32_t scan_dequantize(const uint32_t *__restrict d, uint64_t n, uint32_t carry,
                                          T *__restrict out, double twoeb) {
    constexpr uint64_t kChunk = 1024;
    uint32_t buf[kChunk];
    for (uint64_t c0 = 0; c0 < n; c0 += kChunk) {
        const uint64_t m = std::min(kChunk, n - c0);
        for (uint64_t i = 0; i < m; ++i) buf[i] = carry += d[c0 + i];
        for (uint64_t i = 0; i < m; ++i) out[c0 + i] = dequantize<T>((int32_t)buf[i], twoeb);
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

// Rank 1: the slab decoder with layers of one value, each thread's slab being a contiguous range.
template <typename T> void lorenzo_slabs_1d(const uint32_t *q, uint64_t n, int nt, double twoeb, T *out) {
    std::vector<uint32_t> sums((size_t)nt);
    const auto sum = ZB_SIMD_PICK(uint32_t (*)(const uint32_t *, uint64_t), sum_span);
    using Scan = uint32_t (*)(const uint32_t *, uint64_t, uint32_t, T *, double);
    const Scan scan = ZB_SIMD_PICK(Scan, scan_dequantize);
#pragma omp parallel num_threads(nt)
    {
        const uint64_t t = (uint64_t)omp_get_thread_num(), nth = (uint64_t)omp_get_num_threads();
        const uint64_t i0 = n * t / nth, i1 = n * (t + 1) / nth;
        uint32_t carry = 0;
        if (nth > 1) {
            sums[t] = sum(q + i0, i1 - i0);
#pragma omp barrier
            for (uint64_t k = 0; k < t; ++k) carry += sums[k];
        }
        scan(q + i0, i1 - i0, carry, out + i0, twoeb);
    }
}

// Layers of at most this many values take the slab decoder: its two layer-sized buffers per thread (1 MiB each at
// most) stay mostly in cache.
constexpr uint64_t kSlabLayerMax = uint64_t(1) << 18;

}  // namespace

// lorenzo_inverse, then out = dequantize(q). The slab decoder above where each thread gets a few layers; otherwise
// (few layers, or very large ones) the column passes, with the prefix sum along the slowest dim fused into the
// dequantization. The values are those of lorenzo_inverse followed by dequantize either way (integer sums mod 2^32).
template <typename T> void lorenzo_inverse_dequantize(uint32_t *q, const Shape &s, int nt, double twoeb, T *out) {
    const uint64_t nx = s.nx(), ny = s.ny(), nz = s.nz();
    if (s.rank == 1) return lorenzo_slabs_1d(q, s.n, nt, twoeb, out);
    const uint64_t layers = s.rank == 2 ? ny : nz, layer_rows = s.rank == 2 ? 1 : ny;
    if (layer_rows * nx <= kSlabLayerMax && (nt == 1 || layers >= 4 * (uint64_t)nt))
        return lorenzo_slabs(q, layers, layer_rows, nx, nt, twoeb, out);
    prefix_sum_rows(q, s, nt);
    uint64_t rows = ny, width = nx;
    if (s.rank == 3) {
        prefix_sum_columns(q, nz, ny, nx, nt);
        rows = nz;
        width = nx * ny;
    }
    // Work items are runs of columns; a run is at least 64 columns so each row access stays a stream. When that
    // leaves fewer items than threads (narrow arrays), the unfused passes parallelize better.
    const uint64_t run = std::min(kFusedRun, std::max<uint64_t>(64, div_up(div_up(width, 4 * (uint64_t)nt), 16) * 16));
    const uint64_t runs = div_up(width, run);
    if (runs < (uint64_t)nt && rows > 1) {
        prefix_sum_columns(q, 1, rows, width, nt);
        using Span = void (*)(const uint32_t *, T *, uint64_t, uint64_t, double);
        const Span span = ZB_SIMD_PICK(Span, dequantize_span);
        constexpr uint64_t kSpan = 1 << 14;
#pragma omp parallel for num_threads(nt) schedule(static)
        for (int64_t c = 0; c < (int64_t)div_up(s.n, kSpan); ++c)
            span(q, out, (uint64_t)c * kSpan, std::min(s.n, (uint64_t)(c + 1) * kSpan), twoeb);
        return;
    }
    using Pass = void (*)(const uint32_t *, uint64_t, uint64_t, uint64_t, uint64_t, T *, double);
    const Pass pass = ZB_SIMD_PICK(Pass, sum_rows_dequantize);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t item = 0; item < (int64_t)runs; ++item) {
        const uint64_t c0 = (uint64_t)item * run;
        pass(q, rows, width, c0, std::min(width, c0 + run), out, twoeb);
    }
}
template void lorenzo_inverse_dequantize<float>(uint32_t *, const Shape &, int, double, float *);
template void lorenzo_inverse_dequantize<double>(uint32_t *, const Shape &, int, double, double *);

zb_status cpu_compress(const zb_params &p, zb_dtype dtype, const void *src, const Shape &shape, uint8_t *dst,
                       size_t dst_capacity, size_t *dst_len, int threads, std::string &msg) {
    if (dtype == ZB_F64)
        return compress_t(p, static_cast<const double *>(src), shape, dst, dst_capacity, dst_len, threads, msg);
    return compress_t(p, static_cast<const float *>(src), shape, dst, dst_capacity, dst_len, threads, msg);
}

zb_status cpu_decompress(const Header &h, const uint8_t *stream, void *dst, int threads, std::string &msg) {
    if (h.dtype == ZB_F64) return decompress_t(h, stream, static_cast<double *>(dst), threads, msg);
    return decompress_t(h, stream, static_cast<float *>(dst), threads, msg);
}

}  // namespace zb
