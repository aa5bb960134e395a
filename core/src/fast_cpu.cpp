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
#include "zb_lorenzo_grid.h"
#include "zb_quant.h"
#include "zb_scratch.h"
#include "zb_quantize_span.h"
#include "zb_stage_clock.h"

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
#pragma omp parallel for num_threads(nt) schedule(dynamic, 4)   // taken in turn: some cores run slower than others
    for (int64_t c = 0; c < (int64_t)div_up(n, kSpan); ++c)
        span(x, (uint64_t)c * kSpan, std::min(n, (uint64_t)(c + 1) * kSpan), qp, q, exc);
}
template void quantize_values<float>(const float *, uint64_t, const QuantParams &, uint32_t *, uint8_t *, int);
template void quantize_values<double>(const double *, uint64_t, const QuantParams &, uint32_t *, uint8_t *, int);

namespace {

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

// The 2048 codes of tile t (zero-padded past the end of the array), walking the rows the tile overlaps. The first
// layer of each Lorenzo segment (zb_lorenzo.h) has no neighbours in the slowest dim: in rank 3 its rows at z-1 are
// the zero row, in rank 2 the row above; in rank 1 the array is walked as rows of one segment each, so that a
// segment's first value has no left neighbour.
template <int Rank>
void tile_codes(const uint32_t *q, const Shape &s, uint64_t seg_layers, const uint32_t *zero, uint64_t t,
                uint16_t *codes, std::vector<int32_t> &escapes) {
    using Rows = void (*)(const uint32_t *, const uint32_t *, const uint32_t *, const uint32_t *, uint64_t, uint64_t,
                          uint16_t *, std::vector<int32_t> *, std::integral_constant<int, Rank>);
    static const Rows rows_base = row_codes_base, rows_avx2 = row_codes_avx2, rows_avx512 = row_codes_avx512;
    const Rows rows = simd_pick(rows_base, rows_avx2, rows_avx512);
    const uint64_t nx = Rank == 1 ? seg_layers : s.nx(), ny = s.ny();
    const uint64_t begin = t * kTileCodes, end = std::min(s.n, begin + kTileCodes);
    for (uint64_t i = begin; i < end;) {
        const uint64_t row = i / nx, x0 = i % nx, x1 = std::min(nx, x0 + (end - i));
        const uint64_t z = row / ny, y = row % ny;
        const bool has_up = Rank == 2 ? y % seg_layers != 0 : y != 0;   // rank 3: y never starts a segment
        const bool has_back = z % seg_layers != 0;
        const uint32_t *cur = q + row * nx;
        const uint32_t *up = has_up ? cur - nx : zero;
        const uint32_t *back = has_back ? cur - nx * ny : zero;
        const uint32_t *backup = (has_back && has_up) ? back - nx : zero;
        rows(cur, up, back, backup, x0, x1, codes + (i - begin), &escapes, std::integral_constant<int, Rank>{});
        i += x1 - x0;
    }
    std::fill(codes + (end - begin), codes + kTileCodes, (uint16_t)0);
}

// Per tile: codes, bitshuffle, zero-block flags and the non-zero block count (in tile_nnz[t]). Tiles are split in
// contiguous ranges so that the escapes come out in index order.
template <int Rank>
void shuffle_tiles_rank(const uint32_t *q, const Shape &s, uint8_t *shuffled, uint8_t *code_flags,
                        uint64_t *tile_nnz, std::vector<int32_t> &escapes, int nt) {
    const uint64_t ntiles = code_tiles(s.n);
    const uint64_t seg_layers = lorenzo_segments(s).per_segment;
    const std::vector<uint32_t> zero(Rank >= 2 ? s.nx() : 0, 0);
    // kPartsPerThread contiguous ranges per thread, taken in turn (a slower core takes fewer), each with its own
    // escape list; the lists are joined in range order.
    const int parts = (int)std::max<uint64_t>(1, std::min<uint64_t>(ntiles, kPartsPerThread * (uint64_t)nt));
    const Partition part{ntiles, parts};
    std::vector<std::vector<int32_t>> esc_per_part((size_t)parts);
    // The escape lists grow inside the parallel region. An exception must not leave an OpenMP region (that is
    // std::terminate), so a failed growth is caught in its thread and rethrown after the region as bad_alloc.
    std::atomic<bool> out_of_memory{false};
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
    for (int r = 0; r < parts; ++r) {
        try {
            uint16_t codes[kTileCodes];
            for (uint64_t t = part.begin(r); t < part.begin(r + 1) && !out_of_memory.load(); ++t) {
                tile_codes<Rank>(q, s, seg_layers, zero.data(), t, codes, esc_per_part[r]);
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
                     int nt, std::string &msg, const ValueRange *known_range) {
    const uint64_t n = s.n;
    Header h;
    h.dtype = sizeof(T) == 8 ? ZB_F64 : ZB_F32;
    h.shape = s;
    h.mode = p.mode;
    h.bound = p.bound;
    double vmin = 0, vmax = 0;
    const bool has_range = p.mode == ZB_MODE_REL &&
                           value_range_once(known_range, h.dtype, x, n, p.has_fill, p.fill_bits, nt, vmin, vmax);
    h.eb = derive_abs_bound(p.mode, p.bound, has_range, vmin, vmax);
    const QuantParams qp = make_quant_params(h.eb, p.has_fill, p.fill_bits);
    stage_mark("range");

    struct TrimOnExit { ~TrimOnExit() { t_enc.trim(); } } trim_on_exit;
    uint32_t *q = t_enc.q.get((size_t)n);
    uint8_t *exc = t_enc.exc.get((size_t)n);
    quantize_values(x, n, qp, q, exc, nt);
    stage_mark("quantize");

    // Codes, bitshuffle and block flags per tile; then block offsets by an exclusive scan of the tile counts.
    const uint64_t ntiles = code_tiles(n);
    uint8_t *shuffled = t_enc.shuffled.get((size_t)(ntiles * kTileBytes));
    uint8_t *code_flags = t_enc.code_flags.get((size_t)(ntiles * kTileFlagBytes));
    uint64_t *tile_offset = t_enc.tile_offset.get((size_t)ntiles + 1);
    std::vector<int32_t> escapes;
    shuffle_tiles(q, s, shuffled, code_flags, tile_offset + 1, escapes, nt);
    tile_offset[0] = 0;
    for (uint64_t t = 0; t < ntiles; ++t) tile_offset[t + 1] += tile_offset[t];
    stage_mark("tiles");

    ExceptionStreams<T> ex;
    encode_exceptions(x, exc, n, ex, nt);
    stage_mark("exceptions");

    h.version = lorenzo_fast_version(s);
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
    for (int64_t t = 0; t < (int64_t)ntiles; ++t)
        copy_nonzero_blocks(shuffled + (size_t)t * kTileBytes, code_flags + (size_t)t * kTileFlagBytes,
                            blocks + tile_offset[(size_t)t] * kBlockBytes);
    if (!escapes.empty()) std::memcpy(seg(kSegEscapes), escapes.data(), escapes.size() * 4);
    for (int i = 0; i < kExceptionSegmentCount; ++i)
        if (ex.segment_length(i)) std::memcpy(seg(kSegEdgeFlags + i), ex.segment_data(i), ex.segment_length(i));
    stage_mark("copy");
    h.payload_crc = payload_checksum(payload, (size_t)h.payload_bytes(), nt);
    write_header(h, dst);
    *out_len = total;
    stage_mark("checksum");
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
    ScratchArray<uint64_t> esc_start;
    ScratchArray<uint64_t> block_start;
    void trim() {
        esc_start.trim(kScratchKeepBytes);
        block_start.trim(kScratchKeepBytes);
    }
};
thread_local DecoderScratch t_dec;

// The decoder's per-value loops, compiled for each vector level (zb_simd.h).

ZB_ALWAYS_INLINE void codes_to_deltas(const uint16_t *__restrict c, uint32_t *__restrict q, uint64_t valid) {
    for (uint64_t j = 0; j < valid; ++j) q[j] = (uint32_t)code_to_delta(c[j]);
}
ZB_SIMD_CLONES(codes_to_deltas)

// The fast stream's code tiles as a delta source of the Lorenzo grid (zb_lorenzo_grid.h): each thread expands the
// tiles its bands and slabs touch, one at a time, unshuffles them and turns the codes into deltas (escapes patched
// in order). Nothing of size n is written but the values.
struct CodeTiles {
    const uint8_t *flags, *blocks, *esc_bytes;
    const uint64_t *block_start;   // per tile: its first stored block (ntiles + 1 entries)
    const uint64_t *esc_start;     // per tile: its first escape (ntiles + 1 entries); null when there are none
    uint64_t n;
    void (*to_deltas)(const uint16_t *, uint32_t *, uint64_t);

    struct Cursor {
        uint64_t tile = ~uint64_t(0);   // the tile in d
        bool bad = false;               // a tile's padding or escapes did not match the stream
        alignas(64) uint8_t bytes[kTileBytes];   // the planes of the tile that are partly stored
        alignas(64) uint16_t codes[kTileCodes];
        alignas(64) uint32_t d[kTileCodes];
    };
    static constexpr uint64_t kUnit = kTileCodes;

    void decode(Cursor &c, uint64_t t) const {
        c.tile = t;
        const uint8_t *planes[16];
        stored_tile_planes(flags + t * kTileFlagBytes, blocks + block_start[t] * kBlockBytes, c.bytes, planes);
        bitunshuffle_planes(planes, c.codes);
        for (uint64_t j = std::min<uint64_t>(kTileCodes, n - t * kTileCodes); j < kTileCodes; ++j)
            c.bad |= c.codes[j] != 0;   // the last tile's padding
        uint64_t e = esc_start ? esc_start[t] : 0;
        const uint64_t e_end = esc_start ? esc_start[t + 1] : 0;
        if (e == e_end) return to_deltas(c.codes, c.d, kTileCodes);   // the common case: a loop that vectorizes
        for (uint64_t j = 0; j < kTileCodes; ++j) {
            int32_t d = 0;
            if (c.codes[j] != kEscapeCode) {
                d = code_to_delta(c.codes[j]);
            } else if (e < e_end) {
                std::memcpy(&d, esc_bytes + 4 * e++, 4);
            } else {
                c.bad = true;
            }
            c.d[j] = (uint32_t)d;
        }
        c.bad |= e != e_end;
    }
    template <class F> void pieces(Cursor &c, uint64_t begin, uint64_t end, F f) const {
        while (begin < end) {
            const uint64_t t = begin / kTileCodes, off = begin - t * kTileCodes;
            const uint64_t m = std::min(end - begin, kTileCodes - off);
            if (c.tile != t) decode(c, t);
            f(c.d + off, begin, m);
            begin += m;
        }
    }
};

// The tiles' blocks and escapes located (one pass over the flags, and over the expanded tiles when there are
// escapes), then the slabs (rank 1) or the grid (ranks 2 and 3) decode straight from the tiles.
template <typename T>
zb_status decode_tiles(const Header &h, const uint8_t *payload, T *out, int nt, std::string &msg) {
    const uint64_t n = h.shape.n, ntiles = code_tiles(n);
    const uint8_t *flags = payload + h.seg[kSegCodeFlags].offset;
    const uint8_t *blocks = payload + h.seg[kSegCodeBlocks].offset;
    uint64_t *block_start = t_dec.block_start.get((size_t)ntiles + 1);
    uint64_t *esc_start = h.escapes ? t_dec.esc_start.get((size_t)ntiles + 1) : nullptr;
    if (esc_start) esc_start[0] = 0;
    if (tile_block_starts(flags, ntiles, nt, block_start) != h.nonzero_code_blocks)
        return corrupt(msg, "code blocks do not match their flags");
    if (esc_start) {
#pragma omp parallel for num_threads(nt) schedule(static)
        for (int64_t t = 0; t < (int64_t)ntiles; ++t) {
            alignas(64) uint8_t tile[kTileBytes];
            expand_tile(flags + (uint64_t)t * kTileFlagBytes, blocks + block_start[t] * kBlockBytes, tile);
            esc_start[(size_t)t + 1] = tile_escape_count(tile);
        }
        for (uint64_t t = 0; t < ntiles; ++t) esc_start[t + 1] += esc_start[t];
        if (esc_start[ntiles] != h.escapes) return corrupt(msg, "escape codes do not match the escape count");
    }
    stage_mark("locate");
    const CodeTiles src{flags, blocks, payload + h.seg[kSegEscapes].offset, block_start, esc_start, n,
                        ZB_SIMD_PICK(void (*)(const uint16_t *, uint32_t *, uint64_t), codes_to_deltas)};
    std::vector<CodeTiles::Cursor> cursors((size_t)nt);
    const LorenzoSegments segs =
        h.version == kFormatVersionV6 ? lorenzo_segments(h.shape) : lorenzo_one_segment(h.shape);
    grid::lorenzo_decode(src, cursors.data(), h.shape, segs, nt, 2.0 * h.eb, out);
    for (const CodeTiles::Cursor &c : cursors)
        if (c.bad) return corrupt(msg, "code tiles do not match their padding or the escape list");
    stage_mark("lorenzo");
    return ZB_OK;
}

template <typename T>
zb_status decompress_t(const Header &h, const uint8_t *stream, T *out, int nt, std::string &msg) {
    const uint64_t n = h.shape.n;
    const uint8_t *payload = stream + h.header_bytes();
    if (h.flags & kFlagRaw) {
        std::memcpy(out, payload, (size_t)(n * sizeof(T)));
        return ZB_OK;
    }
    struct TrimOnExit { ~TrimOnExit() { t_dec.trim(); } } trim_on_exit;
    const zb_status st = decode_tiles(h, payload, out, nt, msg);
    if (st != ZB_OK) return st;
    if (h.exceptions) {
        ByteSpan ex[kExceptionSegmentCount];
        for (int i = 0; i < kExceptionSegmentCount; ++i)
            ex[i] = {payload + h.seg[kSegEdgeFlags + i].offset, h.seg[kSegEdgeFlags + i].length};
        if (!decode_exceptions(ex, n, h.exceptions, h.runs, out, nullptr, msg, nt)) return ZB_ERR_CORRUPT;
        stage_mark("exceptions");
    }
    return ZB_OK;
}

}  // namespace

// The N-D prefix sum of the deltas q, dequantized into out: rank 1 by slabs of the row, ranks 2 and 3 on the grid
// of zb_lorenzo_grid.h, both reading q (which stays as it is).
namespace {
struct DeltaArray {
    const uint32_t *q;
    struct Cursor {};
    static constexpr uint64_t kUnit = 1024;
    template <class F> void pieces(Cursor &, uint64_t begin, uint64_t end, F f) const { f(q + begin, begin, end - begin); }
};
}  // namespace

template <typename T> void lorenzo_inverse_dequantize(uint32_t *q, const Shape &s, int nt, double twoeb, T *out) {
    std::vector<DeltaArray::Cursor> cursors((size_t)nt);
    grid::lorenzo_decode(DeltaArray{q}, cursors.data(), s, lorenzo_one_segment(s), nt, twoeb, out);
}
template void lorenzo_inverse_dequantize<float>(uint32_t *, const Shape &, int, double, float *);
template void lorenzo_inverse_dequantize<double>(uint32_t *, const Shape &, int, double, double *);

zb_status cpu_compress(const zb_params &p, zb_dtype dtype, const void *src, const Shape &shape, uint8_t *dst,
                       size_t dst_capacity, size_t *dst_len, int threads, std::string &msg, const ValueRange *range) {
    if (dtype == ZB_F64)
        return compress_t(p, static_cast<const double *>(src), shape, dst, dst_capacity, dst_len, threads, msg, range);
    return compress_t(p, static_cast<const float *>(src), shape, dst, dst_capacity, dst_len, threads, msg, range);
}

zb_status cpu_decompress(const Header &h, const uint8_t *stream, void *dst, int threads, std::string &msg) {
    if (h.dtype == ZB_F64) return decompress_t(h, stream, static_cast<double *>(dst), threads, msg);
    return decompress_t(h, stream, static_cast<float *>(dst), threads, msg);
}

}  // namespace zb
