// Format-v2 pipelines on the CPU (docs/FORMAT.md section 8): a predictor that yields one integer code per value
// (Lorenzo or interp), an encoder for the codes (fast or ratio), escapes and exceptions. Segment 0 carries the parameters the decoder
// needs, so it never re-tunes.
#include <algorithm>
#include <cstring>
#include <vector>
#include "zb_bytes.h"
#include "zb_chunk_escapes.h"
#include "zb_codes16.h"
#include "zb_cpu.h"
#include "zb_crc32c.h"
#include "zb_exceptions.h"
#include "zb_interp_cpu.h"
#include "zb_lorenzo.h"
#include "zb_lorenzo_grid.h"
#include "zb_lorenzo_ratio.h"
#include "zb_ratio.h"
#include "zb_scratch.h"
#include "zb_simd.h"
#include "zb_stage_clock.h"

namespace zb {
namespace {

struct V2Scratch {
    ScratchArray<int32_t> codes;
    ScratchArray<uint8_t> exc;
    ScratchArray<uint16_t> codes16;
    ScratchArray<uint8_t> recon;  // T values, typed at use
    ScratchArray<uint32_t> quant;  // Lorenzo: the quantized integers
    void trim() {
        codes.trim(kScratchKeepBytes);
        exc.trim(kScratchKeepBytes);
        codes16.trim(kScratchKeepBytes);
        recon.trim(kScratchKeepBytes);
        quant.trim(kScratchKeepBytes);
    }
};
thread_local V2Scratch t_v2;

zb_status corrupt(std::string &msg, const std::string &why) {
    msg = "corrupt stream: " + why;
    return ZB_ERR_CORRUPT;
}

// codes[i] = code_of(c16[i]) for i < count; returns how many are escaped. Selects only, and restrict pointers, so
// that it vectorizes (one clone per vector level).
template <typename CodeOf>
ZB_ALWAYS_INLINE uint64_t widen_codes_kernel(const uint16_t *__restrict c16, int32_t *__restrict codes, uint64_t count,
                                             CodeOf code_of) {
    uint32_t escaped = 0;   // count <= kChunkValues
    for (uint64_t i = 0; i < count; ++i) {
        const int32_t c = code_of(c16[i]);
        codes[i] = c;
        escaped += c == kEscapedCode ? 1u : 0u;
    }
    return escaped;
}
ZB_SIMD_CLONES(widen_codes_kernel)
template <typename CodeOf> uint64_t widen_codes(const uint16_t *c16, int32_t *codes, uint64_t count, CodeOf code_of) {
    return ZB_SIMD_PICK(uint64_t (*)(const uint16_t *, int32_t *, uint64_t, CodeOf), widen_codes_kernel)(
        c16, codes, count, code_of);
}

// Codes of the values x0 <= x < x1 of one row of the Lorenzo deltas: `cur` the row's quantized integers, `up`,
// `back`, `backup` the rows at (z, y-1), (z-1, y), (z-1, y-1) or a zero row where outside (rows the rank does not
// have are not read). The arithmetic of lorenzo_delta (wrap-around uint32), without coordinates or bounds checks per
// point, so it vectorizes. The codes are the encoder's (written directly: no int32 code array and no second pass).
// Returns the number of escaped codes.
template <int Rank, bool Ratio>
uint64_t lorenzo_row_codes(const uint32_t *__restrict cur, const uint32_t *__restrict up,
                           const uint32_t *__restrict back, const uint32_t *__restrict backup, int64_t x0, int64_t x1,
                           Code16<Ratio> code16, uint16_t *__restrict codes) {
    const int32_t radius = code16.radius;
    uint32_t escaped = 0;
    auto code = [&](int64_t x, uint32_t pred) {
        const int32_t d = (int32_t)(cur[x] - pred);
        const bool ok = d > -radius && d < radius;
        codes[x] = ok ? code16(d) : Code16<Ratio>::kEscaped;
        escaped += ok ? 0u : 1u;
    };
    int64_t x = x0;
    if (x == 0 && x1 > 0) {  // no left neighbours
        uint32_t pred0 = 0;
        if constexpr (Rank >= 2) pred0 += up[0];
        if constexpr (Rank == 3) pred0 += back[0] - backup[0];
        code(0, pred0);
        ++x;
    }
    for (; x < x1; ++x) {
        uint32_t pred = cur[x - 1];
        if constexpr (Rank >= 2) pred += up[x] - up[x - 1];
        if constexpr (Rank == 3) pred += back[x] - back[x - 1] - backup[x] + backup[x - 1];
        code(x, pred);
    }
    return escaped;
}

// Lorenzo codes of the values [i0, i1) (whole rows or parts of rows); returns the number of escaped codes.
template <int Rank, bool Ratio>
uint64_t lorenzo_range_codes(const uint32_t *q, const Shape &s, const uint32_t *zero, uint64_t i0, uint64_t i1,
                             Code16<Ratio> code16, uint16_t *codes) {
    const uint64_t nx = s.nx(), ny = s.ny();
    uint64_t escaped = 0;
    for (uint64_t r = i0 / nx; r * nx < i1; ++r) {
        const uint64_t z = r / ny, y = r % ny;
        const uint32_t *cur = q + r * nx;
        const uint32_t *up = y ? cur - nx : zero;
        const uint32_t *back = z ? cur - nx * ny : zero;
        const uint32_t *backup = (z && y) ? back - nx : zero;
        const uint64_t x0 = std::max(i0, r * nx) - r * nx, x1 = std::min(i1, (r + 1) * nx) - r * nx;
        escaped += lorenzo_row_codes<Rank>(cur, up, back, backup, (int64_t)x0, (int64_t)x1, code16, codes + r * nx);
    }
    return escaped;
}

// The Lorenzo predictor with the encoder's 16-bit codes: dual-quantization (section 3) and the whole-chunk Lorenzo
// deltas (section 4); deltas with |d| >= radius are escaped (their values in index order). `q` is scratch for n
// values.
template <typename T, bool Ratio>
void lorenzo_encode_v2(const T *x, const Shape &s, const QuantParams &qp, Code16<Ratio> code16, uint32_t *q,
                       uint16_t *codes, uint8_t *exc, std::vector<int32_t> &escapes, int nt) {
    const uint64_t n = s.n;
    quantize_values(x, n, qp, q, exc, nt);
    const std::vector<uint32_t> zero((size_t)s.nx(), 0);
    const std::vector<uint64_t> first = count_escapes_by_chunk(n, nt, [&](uint64_t i0, uint64_t i1) {
        if (s.rank == 1) return lorenzo_range_codes<1>(q, s, zero.data(), i0, i1, code16, codes);
        if (s.rank == 2) return lorenzo_range_codes<2>(q, s, zero.data(), i0, i1, code16, codes);
        return lorenzo_range_codes<3>(q, s, zero.data(), i0, i1, code16, codes);
    });
    // The escaped deltas (rare) are computed again, with coordinates.
    const int64_t nx = (int64_t)s.nx(), ny = (int64_t)s.ny();
    auto qat = [&](int64_t zz, int64_t yy, int64_t xx) -> uint32_t {
        return (zz < 0 || yy < 0 || xx < 0) ? 0u : q[(size_t)((zz * ny + yy) * nx + xx)];
    };
    escapes.resize((size_t)first.back());
    auto is_escaped = [codes](uint64_t i) { return codes[i] == Code16<Ratio>::kEscaped; };
    for_each_escape(n, first, nt, is_escaped, [&](uint64_t i, uint64_t e) {
        const int64_t xx = (int64_t)i % nx, y = ((int64_t)i / nx) % ny, z = (int64_t)i / (nx * ny);
        escapes[(size_t)e] = s.rank == 1   ? lorenzo_delta<1>(z, y, xx, qat)
                             : s.rank == 2 ? lorenzo_delta<2>(z, y, xx, qat)
                                           : lorenzo_delta<3>(z, y, xx, qat);
    });
}

// Inverse: codes (escapes patched in order, in place) -> N-D prefix sums (in place, as uint32) -> values, the last
// prefix pass fused with the dequantization (as in format v1). Exceptions get values here too: the caller overwrites
// them with the stored ones. `first` is count_escapes_by_chunk of the codes.
template <typename T>
zb_status lorenzo_decode_v2(const Shape &s, double eb, int32_t *codes, const std::vector<uint64_t> &first,
                            const int32_t *escapes, uint64_t nescapes, T *out, int nt, std::string &msg) {
    const uint64_t n = s.n;
    if (first.back() > nescapes) return corrupt(msg, "more escape codes than escapes");
    if (first.back() != nescapes) return corrupt(msg, "escape count does not match the codes");
    for_each_escape(n, first, nt, [codes](uint64_t i) { return codes[i] == kEscapedCode; },
                    [&](uint64_t i, uint64_t e) { codes[i] = escapes[e]; });
    uint32_t *q = reinterpret_cast<uint32_t *>(codes);  // int32_t and uint32_t may alias
    lorenzo_inverse_dequantize(q, s, nt, 2.0 * eb, out);
    return ZB_OK;
}

// Lorenzo + ratio inverse straight from the 16-bit codes: the running sums of `zeros` (the decoder's count of escaped
// codes per kRatioZeroUnit codes: no pass over the codes here) checked against the stream's escape count, then the
// grid (or rank 1's slabs) reading RatioCodeTiles.
template <typename T>
zb_status lorenzo_decode_ratio_codes(const Shape &s, double eb, const uint16_t *c16, const uint32_t *zeros,
                                     int32_t radius, const int32_t *escapes, uint64_t nescapes, T *out, int nt,
                                     std::string &msg) {
    const uint64_t units = div_up(s.n, kRatioZeroUnit);
    std::vector<uint64_t> esc_start((size_t)units + 1, 0);
    for (uint64_t u = 0; u < units; ++u) esc_start[(size_t)u + 1] = esc_start[(size_t)u] + zeros[u];
    const uint64_t total = esc_start.back();
    if (total > nescapes) return corrupt(msg, "more escape codes than escapes");
    if (total != nescapes) return corrupt(msg, "escape count does not match the codes");
    const RatioCodeTiles src{c16, 0, escapes, esc_start.data(), radius};
    std::vector<RatioCodeTiles::Cursor> cursors((size_t)nt);
    grid::lorenzo_decode(src, cursors.data(), s, lorenzo_one_segment(s), nt, 2.0 * eb, out);
    return ZB_OK;
}

template <typename T>
zb_status compress_t(const zb_params &p, uint8_t predictor, uint8_t encoder, const T *x, const Shape &s,
                     uint8_t *dst, size_t cap, size_t *out_len, int nt, bool tune_alpha, std::string &msg,
                     const ValueRange *known_range) {
    struct TrimOnExit { ~TrimOnExit() { t_v2.trim(); } } trim_on_exit;
    const uint64_t n = s.n;
    Header h;
    h.version = v2_layout_version(predictor);
    h.dtype = sizeof(T) == 8 ? ZB_F64 : ZB_F32;
    h.shape = s;
    h.mode = p.mode;
    h.bound = p.bound;
    h.predictor = predictor;
    h.encoder = encoder;
    double vmin = 0, vmax = 0;
    const bool has_range = value_range_once(known_range, h.dtype, x, n, p.has_fill, p.fill_bits, nt, vmin, vmax);
    h.eb = derive_abs_bound(p.mode, p.bound, has_range, vmin, vmax);
    const int32_t radius = encoder_radius(encoder);
    stage_mark("range");

    // Predictor: one 16-bit code per value in the encoder's form (fast: sign-magnitude, escaped 0x8000; ratio: code + R,
    // escaped 0), exceptions, escapes; its parameters go to segment 0.
    uint16_t *c16 = t_v2.codes16.get((size_t)n);
    const Code16<false> fast_code{radius};
    const Code16<true> ratio_code{radius};
    uint8_t *exc = t_v2.exc.get((size_t)n);
    std::vector<int32_t> escapes;
    std::vector<uint8_t> params(kV2CommonParamBytes, 0);
    put_u32(params.data(), (uint32_t)radius);
    if (predictor == kPredInterp) {
        T *recon = reinterpret_cast<T *>(t_v2.recon.get((size_t)n * sizeof(T)));
        const InterpParams ip =
            interp_tune(x, s, h.eb, has_range ? vmax - vmin : 0.0, p.has_fill, p.fill_bits, encoder, tune_alpha, nt);
        stage_mark("tune");
        interp_encode_cpu(x, s, ip, interp_code_order(h.version), h.eb, encoder, p.has_fill, p.fill_bits, c16, exc,
                          recon, escapes, nt);
        params.resize(kV2CommonParamBytes + kInterpParamBytes);
        interp_params_write(ip, params.data() + kV2CommonParamBytes);
    } else {
        const QuantParams qp = make_quant_params(h.eb, p.has_fill, p.fill_bits);
        uint32_t *q = t_v2.quant.get((size_t)n);
        if (encoder == kEncFast) lorenzo_encode_v2(x, s, qp, fast_code, q, c16, exc, escapes, nt);
        else lorenzo_encode_v2(x, s, qp, ratio_code, q, c16, exc, escapes, nt);
        stage_mark("lorenzo");
    }

    // Encoder. fast: bitshuffle and the sparse pass. ratio: canonical Huffman and the sparse pass. Either's segments
    // stay in the encoder's reused memory until they are copied into the stream below.
    std::vector<ByteSpan> enc_segs;
    struct ReleaseOnExit {
        ~ReleaseOnExit() {
            ratio_encode_release();
            fast_encode_codes_release();
        }
    } release_on_exit;
    if (encoder == kEncFast) {
        const FastCodeSegments fc = fast_encode_codes(c16, n, nt);
        h.nonzero_code_blocks = fc.nonzero_blocks;
        enc_segs = {fc.flags, fc.blocks};
    } else {
        RatioOptions ro;
        ro.run_symbol = (uint32_t)radius;  // code 0
        RatioStats rs;
        RatioSegmentViews views;
        if (zb_status st = ratio_encode_cpu_views(c16, n, 2 * (uint32_t)radius, nt, views, &rs, msg, ro)) return st;
        enc_segs.assign(views.seg, views.seg + kRatioSegmentCount);
        h.version = v2_layout_version(predictor, rs.run_tokens);
    }

    stage_mark("encoder");
    ExceptionStreams<T> ex;
    encode_exceptions(x, exc, n, ex, nt);
    h.escapes = escapes.size();
    h.exceptions = ex.count;
    h.runs = ex.run_values.size();
    stage_mark("exceptions");

    // Segments in stream order.
    std::vector<std::pair<const void *, uint64_t>> segs;
    segs.push_back({params.data(), params.size()});
    for (const ByteSpan &e : enc_segs) segs.push_back({e.data, e.size});
    segs.push_back({escapes.data(), escapes.size() * 4});
    for (int i = 0; i < kExceptionSegmentCount; ++i) segs.push_back({ex.segment_data(i), ex.segment_length(i)});
    uint64_t lengths[kMaxSegments];
    for (size_t i = 0; i < segs.size(); ++i) lengths[i] = segs[i].second;
    v2_layout(h, lengths, (int)segs.size());

    bool raw_written = false;
    if (zb_status st = raw_or_fits(h, x, dst, cap, out_len, raw_written, nt, msg)) return st;
    if (raw_written) return ZB_OK;
    const size_t total = h.header_bytes() + (size_t)h.payload_bytes();
    uint8_t *payload = dst + h.header_bytes();
    for (size_t i = 0; i < segs.size(); ++i)   // in parallel: serial, the copies were 3 ms of a 100 ms 16-thread call
        if (segs[i].second) parallel_copy(payload + h.seg[i].offset, segs[i].first, (size_t)segs[i].second, nt);
    stage_mark("copy");
    h.payload_crc = payload_checksum(payload, (size_t)h.payload_bytes(), nt);
    write_header(h, dst);
    *out_len = total;
    stage_mark("checksum");
    return ZB_OK;
}

template <typename T>
zb_status decompress_t(const Header &h, const uint8_t *stream, T *out, int nt, std::string &msg) {
    struct TrimOnExit { ~TrimOnExit() { t_v2.trim(); } } trim_on_exit;
    const uint64_t n = h.shape.n;
    const uint8_t *payload = stream + h.header_bytes();
    auto span = [&](int i) { return ByteSpan{payload + h.seg[i].offset, h.seg[i].length}; };
    const ByteSpan params = span(0);
    const int32_t radius = (int32_t)get_u32(params.data);
    if (get_u32(params.data + 4) != 0) return corrupt(msg, "reserved parameter bytes are not zero");
    if (radius != encoder_radius(h.encoder)) return corrupt(msg, "bad code radius");
    InterpParams ip;
    std::string why;
    if (h.predictor == kPredInterp && !interp_params_read(params.data + kV2CommonParamBytes, ip, why))
        return corrupt(msg, why);

    // Codes. Interp, and Lorenzo with the ratio encoder, read the 16-bit codes (interp's rows widen their own,
    // lorenzo_decode_ratio_codes its pieces); Lorenzo with the fast encoder widens them to int32 codes, counting the
    // escaped ones per chunk.
    const bool widen = h.predictor != kPredInterp && h.encoder != kEncRatio;
    // Lorenzo with the ratio encoder in slabs (zb_lorenzo_ratio.h) where the shape suits them: the Huffman decode
    // and the Lorenzo inverse in one pass from the decoder opened here; else the codes array in between.
    const LorenzoRatioSlabs slabs = h.predictor != kPredInterp && h.encoder == kEncRatio
                                        ? lorenzo_ratio_slabs(h.shape, nt) : LorenzoRatioSlabs{};
    RatioBlockDecoder ratio_dec;
    uint16_t *c16 = slabs.count ? nullptr : t_v2.codes16.get((size_t)(code_tiles(n) * kTileCodes));
    int32_t *codes = widen ? t_v2.codes.get((size_t)n) : nullptr;
    const int nenc = v2_encoder_segments(h.encoder);
    std::vector<uint64_t> first;
    std::vector<uint32_t> zeros;   // Lorenzo with the ratio encoder: its escaped codes per kRatioZeroUnit
    auto to_codes = [&](auto code_of) {
        return count_escapes_by_chunk(n, nt, [&](uint64_t i0, uint64_t i1) {
            return widen_codes(c16 + i0, codes + i0, i1 - i0, code_of);
        });
    };
    if (h.encoder == kEncFast) {
        if (!fast_decode_codes(span(1).data, span(2).data, h.nonzero_code_blocks, n, c16, nt))
            return corrupt(msg, "code blocks do not match their flags");
        stage_mark("decoder");
        if (widen) first = to_codes(FastCode32{});
    } else {
        ByteSpan rs[kRatioSegmentCount];
        for (int i = 0; i < kRatioSegmentCount; ++i) rs[i] = span(1 + i);
        if (slabs.count) {   // the Huffman sub-blocks with the Lorenzo inverse below
            if (zb_status st = ratio_dec.open(rs, n, 2 * (uint32_t)radius, nt, msg, h.version >= kFormatVersionV4))
                return st;
            stage_mark("sparse");
        } else {
            if (h.predictor != kPredInterp) zeros.resize((size_t)div_up(n, kRatioZeroUnit));
            if (zb_status st = ratio_decode_cpu(rs, n, 2 * (uint32_t)radius, nt, c16, msg,
                                                h.version >= kFormatVersionV4, zeros.empty() ? nullptr : zeros.data()))
                return st;
            stage_mark("decoder");
        }
    }
    if (widen) stage_mark("widen");

    const int ex0 = 1 + nenc + 1;
    ByteSpan ex[kExceptionSegmentCount];
    for (int i = 0; i < kExceptionSegmentCount; ++i) ex[i] = span(ex0 + i);
    std::vector<int32_t> escapes((size_t)h.escapes);
    if (h.escapes) std::memcpy(escapes.data(), span(ex0 - 1).data, (size_t)h.escapes * 4);
    if (h.predictor == kPredInterp) {
        // Exceptions first: the predictor needs their exact values and positions. Without exceptions no mask (a
        // pass writing n bytes here and the predictor's reads of them: 16 threads, 256 MB of f32, about 3 ms of 40).
        uint8_t *mask = h.exceptions ? t_v2.exc.get((size_t)n) : nullptr;
        if (mask) {
#pragma omp parallel for num_threads(nt) schedule(static)
            for (int64_t c = 0; c < (int64_t)div_up(n, kChunkValues); ++c)
                std::memset(mask + c * kChunkValues, 0, (size_t)std::min(kChunkValues, n - c * kChunkValues));
        }
        stage_mark("mask");
        if (h.exceptions && !decode_exceptions(ex, n, h.exceptions, h.runs, out, mask, msg, nt)) return ZB_ERR_CORRUPT;
        stage_mark("exceptions");
        // The 16-bit codes lie in (-radius, radius) but the escaped ones (fast: 15-bit magnitudes; ratio: the
        // decoder yields symbols of its alphabet [0, 2R) only).
        return interp_decode_cpu(h.shape, ip, interp_code_order(h.version), h.encoder, c16, escapes.data(),
                                 h.escapes, mask, out, nt, msg);
    }
    // Lorenzo needs no mask (one pass less over n bytes and one over the values, 16 threads: 8 of 63 ms for 64M
    // values): the stored exception values overwrite what the prefix sums gave there, as in format v1.
    const zb_status st =
        widen ? lorenzo_decode_v2(h.shape, h.eb, codes, first, escapes.data(), h.escapes, out, nt, msg)
        : slabs.count
            ? lorenzo_ratio_decode_slabs(h.shape, slabs, h.eb, ratio_dec, radius, escapes.data(), h.escapes, out, nt,
                                         msg)
            : lorenzo_decode_ratio_codes(h.shape, h.eb, c16, zeros.data(), radius, escapes.data(), h.escapes, out,
                                         nt, msg);
    if (st != ZB_OK) return st;
    stage_mark("lorenzo");
    if (h.exceptions && !decode_exceptions(ex, n, h.exceptions, h.runs, out, nullptr, msg, nt)) return ZB_ERR_CORRUPT;
    stage_mark("exceptions");
    return ZB_OK;
}

}  // namespace

zb_status cpu_compress_v2(const zb_params &p, uint8_t predictor, uint8_t encoder, zb_dtype dtype, const void *src,
                          const Shape &shape, uint8_t *dst, size_t cap, size_t *len, int nt, std::string &msg,
                          bool tune_alpha, const ValueRange *range) {
    if (dtype == ZB_F64)
        return compress_t(p, predictor, encoder, static_cast<const double *>(src), shape, dst, cap, len, nt,
                          tune_alpha, msg, range);
    return compress_t(p, predictor, encoder, static_cast<const float *>(src), shape, dst, cap, len, nt, tune_alpha,
                      msg, range);
}

zb_status cpu_decompress_v2(const Header &h, const uint8_t *stream, void *dst, int nt, std::string &msg) {
    if (h.dtype == ZB_F64) return decompress_t(h, stream, static_cast<double *>(dst), nt, msg);
    return decompress_t(h, stream, static_cast<float *>(dst), nt, msg);
}

}  // namespace zb
