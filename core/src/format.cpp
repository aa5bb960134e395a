// Stream header v1: writing, reading and validating (docs/FORMAT.md section 2).
#include "zb_format.h"
#include <cmath>
#include <cstring>
#include "zb_bytes.h"
#include "zb_crc32c.h"
#include "zb_interp.h"
#include "zb_lorenzo.h"
#include "zb_ratio.h"

namespace zb {

static_assert(kFormatVersion == ZBOUND_FORMAT_VERSION, "zbound.h announces another format version");

void fast_layout(Header &h, uint64_t edge_nonzero_blocks, uint64_t change_nonzero_blocks) {
    const FastCounts c{h.shape.n, h.value_bytes(), h.nonzero_code_blocks, h.escapes, h.exceptions,
                       edge_nonzero_blocks, change_nonzero_blocks, h.runs};
    uint64_t len[kFastSegmentCount];
    h.flags = fast_segment_lengths(c, len);
    h.nsegments = kFastSegmentCount;
    uint64_t off = 0;
    for (int i = 0; i < kFastSegmentCount; ++i) {
        h.seg[i].offset = off;
        h.seg[i].length = len[i];
        off += len[i];
    }
}

uint16_t lorenzo_fast_version(const Shape &s) {
    return lorenzo_segments(s).count() > 1 ? kFormatVersionV6 : kFormatVersionV1;
}

int v2_encoder_segments(uint8_t encoder) {
    if (encoder == kEncFast) return kFastCodeSegmentCount;
    if (encoder == kEncRatio) return kRatioSegmentCount;
    return 0;
}

void v2_layout(Header &h, const uint64_t *lengths, int count) {
    h.nsegments = count;
    uint64_t off = 0;
    for (int i = 0; i < count; ++i) {
        h.seg[i].offset = off;
        h.seg[i].length = lengths[i];
        off += lengths[i];
    }
    h.flags = (uint8_t)((h.escapes ? kFlagEscapes : 0) | (h.exceptions ? kFlagExceptions : 0));
}

void write_header(const Header &h, uint8_t *p) {
    std::memcpy(p, kMagic, 4);
    put_u16(p + 4, h.version);
    put_u16(p + 6, (uint16_t)h.header_bytes());
    put_u8(p + 8, (uint8_t)h.dtype);
    put_u8(p + 9, (uint8_t)h.shape.rank);
    put_u8(p + 10, (uint8_t)h.mode);
    put_u8(p + 11, h.predictor);
    put_u8(p + 12, h.encoder);
    put_u8(p + kHdrFlagsAt, h.flags);
    put_u16(p + 14, (uint16_t)h.nsegments);
    put_f64(p + 16, h.bound);
    put_f64(p + kHdrEbAt, h.eb);
    put_u64(p + 32, h.shape.n);
    for (int i = 0; i < 3; ++i) put_u64(p + 40 + 8 * i, h.shape.dims[i]);
    put_u64(p + kHdrCountsAt, h.escapes);
    put_u64(p + kHdrCountsAt + 8, h.exceptions);
    put_u64(p + kHdrCountsAt + 16, h.runs);
    put_u64(p + kHdrCountsAt + 24, h.nonzero_code_blocks);
    uint8_t *t = p + kHeaderFixedBytes;
    for (int i = 0; i < h.nsegments; ++i) {
        put_u64(t + 16 * i, h.seg[i].offset);
        put_u64(t + 16 * i + 8, h.seg[i].length);
    }
    uint8_t *tail = t + 16 * h.nsegments;
    put_u32(tail, h.payload_crc);
    put_u32(tail + 4, crc32c(p, (size_t)(tail + 4 - p)));
}

namespace {
zb_status fail(std::string &msg, zb_status s, const std::string &why) {
    msg = why;
    return s;
}

// Counts that no valid stream of n values exceeds.
bool counts_plausible(const Header &h) {
    const uint64_t n = h.shape.n;
    return h.escapes <= n && h.exceptions <= n && h.runs <= h.exceptions && (h.exceptions > 0) == (h.runs > 0) &&
           h.nonzero_code_blocks <= code_tiles(n) * (kTileBytes / kBlockBytes) && !(h.eb == 0 && h.exceptions != n);
}
}  // namespace

zb_status read_header(const uint8_t *p, size_t len, Header &h, std::string &msg, bool verify_payload) {
    h = Header();
    if (!p) return fail(msg, ZB_ERR_INVALID_ARG, "stream pointer is null");
    if (len < 4 || std::memcmp(p, kMagic, 4) != 0) return fail(msg, ZB_ERR_CORRUPT, "not a zbound stream (bad magic)");
    if (len < kHeaderFixedBytes + 8) return fail(msg, ZB_ERR_TRUNCATED, "stream shorter than a header");
    const uint16_t version = get_u16(p + 4);
    if (version > kFormatVersion)
        return fail(msg, ZB_ERR_VERSION, "stream format version " + std::to_string(version) +
                                             " is newer than this library (" + std::to_string(kFormatVersion) + ")");
    if (version < kFormatVersionV1) return fail(msg, ZB_ERR_CORRUPT, "unknown stream format version");
    h.version = version;
    const int nseg = get_u16(p + 14);
    if (nseg < 1 || nseg > kMaxSegments) return fail(msg, ZB_ERR_CORRUPT, "bad segment count");
    const size_t hbytes = kHeaderFixedBytes + 16 * (size_t)nseg + 8;
    if (get_u16(p + 6) != hbytes) return fail(msg, ZB_ERR_CORRUPT, "header size does not match segment count");
    if (len < hbytes) return fail(msg, ZB_ERR_TRUNCATED, "stream shorter than its header");
    if (get_u32(p + hbytes - 4) != crc32c(p, hbytes - 4)) return fail(msg, ZB_ERR_CORRUPT, "header checksum mismatch");

    const uint8_t dtype = p[8], rank = p[9], mode = p[10];
    h.version = version;
    h.predictor = p[11];
    h.encoder = p[12];
    h.flags = p[13];
    if (dtype != ZB_F32 && dtype != ZB_F64) return fail(msg, ZB_ERR_CORRUPT, "bad dtype");
    if (rank < 1 || rank > 3) return fail(msg, ZB_ERR_CORRUPT, "bad rank");
    if (mode > ZB_MODE_PW_REL) return fail(msg, ZB_ERR_CORRUPT, "bad bound mode");
    // The point-wise relative mode is a version-5 container, or raw passthrough; version 5 holds nothing else.
    if ((mode == ZB_MODE_PW_REL) != (version == kFormatVersionV5) && !(mode == ZB_MODE_PW_REL && (p[13] & kFlagRaw)))
        return fail(msg, ZB_ERR_CORRUPT, "bound mode and format version disagree");
    if (h.flags & ~kKnownFlags) return fail(msg, ZB_ERR_CORRUPT, "unknown flags");
    h.dtype = (zb_dtype)dtype;
    h.mode = (zb_mode)mode;
    h.nsegments = nseg;
    h.bound = get_f64(p + 16);
    h.eb = get_f64(p + 24);
    if (!std::isfinite(h.eb) || h.eb < 0) return fail(msg, ZB_ERR_CORRUPT, "bad absolute bound");
    h.shape.rank = rank;
    h.shape.n = get_u64(p + 32);
    uint64_t prod = 1;
    for (int i = 0; i < 3; ++i) {
        const uint64_t d = get_u64(p + 40 + 8 * i);
        if (d == 0 || (i >= rank && d != 1)) return fail(msg, ZB_ERR_CORRUPT, "bad dims");
        if (prod > UINT64_MAX / d) return fail(msg, ZB_ERR_CORRUPT, "dims overflow");
        prod *= d;
        h.shape.dims[i] = d;
    }
    if (prod != h.shape.n || h.shape.n == 0 || h.shape.n > (UINT64_MAX / 16))
        return fail(msg, ZB_ERR_CORRUPT, "value count does not match dims");
    h.escapes = get_u64(p + 64);
    h.exceptions = get_u64(p + 72);
    h.runs = get_u64(p + 80);
    h.nonzero_code_blocks = get_u64(p + 88);
    const uint8_t *t = p + kHeaderFixedBytes;
    uint64_t expect_off = 0;
    for (int i = 0; i < nseg; ++i) {
        h.seg[i].offset = get_u64(t + 16 * i);
        h.seg[i].length = get_u64(t + 16 * i + 8);
        if (h.seg[i].offset != expect_off) return fail(msg, ZB_ERR_CORRUPT, "segments are not contiguous");
        if (h.seg[i].length > UINT64_MAX - expect_off) return fail(msg, ZB_ERR_CORRUPT, "segment length overflow");
        expect_off += h.seg[i].length;
    }
    h.payload_crc = get_u32(p + hbytes - 8);

    // Structure of each kind of stream: counts must match the segment lengths exactly.
    const uint64_t n = h.shape.n, vb = h.value_bytes();
    if (h.flags & kFlagRaw) {
        // Every writer stores raw passthrough as version 1 (section 7); another version would send the stream to
        // a pipeline decoder that expects that version's segments.
        if (h.version != kFormatVersionV1) return fail(msg, ZB_ERR_CORRUPT, "raw passthrough in a version other than 1");
        if (h.predictor || h.encoder || nseg != 1 || h.escapes || h.exceptions || h.runs || h.nonzero_code_blocks ||
            h.seg[0].length != n * vb)
            return fail(msg, ZB_ERR_CORRUPT, "inconsistent raw-passthrough header");
    } else if (fast_layout_version(h.version)) {
        if (h.predictor != kPredLorenzo || h.encoder != kEncFast)
            return fail(msg, ZB_ERR_CORRUPT, "unknown predictor or encoder");
        if (nseg != kFastSegmentCount) return fail(msg, ZB_ERR_CORRUPT, "bad segment count for the fast encoder");
        if (!counts_plausible(h)) return fail(msg, ZB_ERR_CORRUPT, "inconsistent counts");
        Header expect = h;
        fast_layout(expect, h.seg[kSegEdgeBlocks].length / kBlockBytes, h.seg[kSegChangeBlocks].length / kBlockBytes);
        if (expect.flags != h.flags) return fail(msg, ZB_ERR_CORRUPT, "inconsistent flags");
        for (int i = 0; i < kFastSegmentCount; ++i)
            if (expect.seg[i].length != h.seg[i].length)
                return fail(msg, ZB_ERR_CORRUPT, "segment " + std::to_string(i) + " has the wrong length");
    } else if (h.version == kFormatVersionV5) {
        // [parameters][inner stream][sign flags][sign blocks][5 exception segments]; the inner stream's own header
        // is checked when it is decoded. eb > 0: a writer stores a lossless point-wise chunk raw.
        if (h.predictor > kPredInterp || h.encoder > kEncRatio)
            return fail(msg, ZB_ERR_CORRUPT, "unknown predictor or encoder");
        if (nseg != kPwRelSegmentCount) return fail(msg, ZB_ERR_CORRUPT, "bad segment count for a v5 stream");
        if (!(h.eb > 0) || h.escapes || h.nonzero_code_blocks || !counts_plausible(h))
            return fail(msg, ZB_ERR_CORRUPT, "inconsistent counts");
        if (h.flags != (h.exceptions ? kFlagExceptions : 0)) return fail(msg, ZB_ERR_CORRUPT, "inconsistent flags");
        const int ex = kPwSegExceptions;
        const bool ok = h.seg[kPwSegParams].length == kPwRelParamBytes &&
                        h.seg[kPwSegInner].length >= kHeaderFixedBytes + 24 &&
                        h.seg[kPwSegSignFlags].length == sparse_flag_bytes(div_up(n, 8)) &&
                        h.seg[kPwSegSignBlocks].length % kBlockBytes == 0 &&
                        h.seg[ex].length == sparse_flag_bytes(div_up(n, 8)) && h.seg[ex + 1].length % kBlockBytes == 0 &&
                        h.seg[ex + 2].length == (h.exceptions ? sparse_flag_bytes(div_up(h.exceptions, 8)) : 0) &&
                        h.seg[ex + 3].length % kBlockBytes == 0 && h.seg[ex + 4].length == h.runs * vb;
        if (!ok) return fail(msg, ZB_ERR_CORRUPT, "a v5 segment has the wrong length");
    } else {
        // v2: [parameters][encoder segments][escapes][5 exception segments].
        if ((h.predictor != kPredLorenzo && h.predictor != kPredInterp) || v2_encoder_segments(h.encoder) == 0)
            return fail(msg, ZB_ERR_CORRUPT, "unknown predictor or encoder");
        // Version 3 differs from 2 only in the interp code order: a Lorenzo stream is always version 2.
        if (h.version == kFormatVersionV3 && h.predictor != kPredInterp)
            return fail(msg, ZB_ERR_CORRUPT, "a version 3 stream must use the interp predictor");
        // Version 4 adds run tokens to the ratio encoder only.
        if (h.version == kFormatVersionV4 && h.encoder != kEncRatio)
            return fail(msg, ZB_ERR_CORRUPT, "a version 4 stream must use the ratio encoder");
        const int enc = v2_encoder_segments(h.encoder);
        if (nseg != 1 + enc + 1 + 5) return fail(msg, ZB_ERR_CORRUPT, "bad segment count for a v2 stream");
        if (!counts_plausible(h)) return fail(msg, ZB_ERR_CORRUPT, "inconsistent counts");
        const uint8_t want_flags = (uint8_t)((h.escapes ? kFlagEscapes : 0) | (h.exceptions ? kFlagExceptions : 0));
        if (want_flags != h.flags) return fail(msg, ZB_ERR_CORRUPT, "inconsistent flags");
        const uint64_t params = kV2CommonParamBytes + (h.predictor == kPredInterp ? (uint64_t)kInterpParamBytes : 0);
        const int esc = 1 + enc, ex = esc + 1;
        bool ok = h.seg[0].length == params && h.seg[esc].length == h.escapes * 4 &&
                  h.seg[ex].length == sparse_flag_bytes(div_up(n, 8)) && h.seg[ex + 1].length % kBlockBytes == 0 &&
                  h.seg[ex + 2].length == (h.exceptions ? sparse_flag_bytes(div_up(h.exceptions, 8)) : 0) &&
                  h.seg[ex + 3].length % kBlockBytes == 0 && h.seg[ex + 4].length == h.runs * vb;
        if (h.encoder == kEncFast)
            ok = ok && h.seg[1].length == code_tiles(n) * kTileFlagBytes &&
                 h.seg[2].length == h.nonzero_code_blocks * kBlockBytes;
        if (!ok) return fail(msg, ZB_ERR_CORRUPT, "a v2 segment has the wrong length");
    }
    if (expect_off > len - hbytes)
        return fail(msg, ZB_ERR_TRUNCATED, "stream truncated: payload needs " + std::to_string(expect_off) +
                                               " bytes, " + std::to_string(len - hbytes) + " present");
    return verify_payload ? check_payload(p, h, msg, 1) : ZB_OK;
}

zb_status check_payload(const uint8_t *src, const Header &h, std::string &msg, int threads) {
    if (payload_checksum(src + h.header_bytes(), (size_t)h.payload_bytes(), threads) != h.payload_crc)
        return fail(msg, ZB_ERR_CORRUPT, "payload checksum mismatch");
    return ZB_OK;
}

size_t raw_stream_bytes(zb_dtype dtype, uint64_t n) {
    return kHeaderFixedBytes + 16 + 8 + (size_t)n * (dtype == ZB_F64 ? 8 : 4);
}

zb_status raw_or_fits(const Header &h, const void *values, uint8_t *dst, size_t cap, size_t *out_len,
                      bool &raw_written, int threads, std::string &msg) {
    const size_t total = h.header_bytes() + (size_t)h.payload_bytes();
    const size_t raw_total = raw_stream_bytes(h.dtype, h.shape.n);
    raw_written = total >= raw_total;
    const size_t need = raw_written ? raw_total : total;
    if (cap < need) {
        raw_written = false;
        msg = "output buffer too small: " + std::to_string(need) + " bytes needed";
        return ZB_ERR_BUFFER_TOO_SMALL;
    }
    if (raw_written) *out_len = write_raw_stream(h, values, dst, threads);
    return ZB_OK;
}

size_t write_raw_stream(Header h, const void *values, uint8_t *dst, int threads) {
    h.version = kFormatVersionV1;  // the raw layout is the same in every version
    h.predictor = 0;
    h.encoder = 0;
    h.flags = kFlagRaw;
    h.escapes = h.exceptions = h.runs = h.nonzero_code_blocks = 0;
    h.nsegments = 1;
    h.seg[0].offset = 0;
    h.seg[0].length = h.shape.n * h.value_bytes();
    uint8_t *payload = dst + h.header_bytes();
    std::memcpy(payload, values, (size_t)h.seg[0].length);
    h.payload_crc = payload_checksum(payload, (size_t)h.seg[0].length, threads);
    write_header(h, dst);
    return h.header_bytes() + (size_t)h.seg[0].length;
}

}  // namespace zb
