// Stream header of format v1: fields, field-by-field little-endian serialization, validation, and the fast
// encoder's segment layout (docs/FORMAT.md). Shared by the CPU codec, the CUDA backend and the tools.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include "zb_hd.h"
#include "zb_shape.h"
#include "zbound.h"

namespace zb {

constexpr uint8_t kMagic[4] = {'Z', 'B', 'N', 'D'};
constexpr uint16_t kFormatVersion = 6;     // newest version this library reads and writes
constexpr uint16_t kFormatVersionV1 = 1;   // Lorenzo + fast encoder streams are still written as v1 (byte-stable)
constexpr uint16_t kFormatVersionV2 = 2;   // Lorenzo + ratio; interp streams with codes in index order (read only)
// Version 3 = the version 2 layout with the interp predictor's codes in pass order (docs/FORMAT.md section 10).
constexpr uint16_t kFormatVersionV3 = 3;
// Version 4 = version 2 (Lorenzo) or 3 (interp) where the ratio encoder's bitstream has run tokens (section 9);
// a writer uses it only for streams that have them.
constexpr uint16_t kFormatVersionV4 = 4;
// Version 5 = the point-wise relative mode (section 12): a container around an inner ABS stream (versions 1-4) of
// the values' base-2 log magnitudes, with their signs and the values stored exactly.
constexpr uint16_t kFormatVersionV5 = 5;
// Version 6 = version 1 (Lorenzo + fast) with the Lorenzo prediction cut into segments along the slowest dim
// (section 13, zb_lorenzo.h); written for arrays of more than one segment, version 1 for the others.
constexpr uint16_t kFormatVersionV6 = 6;

// Versions with the fast encoder's own layout (section 5): 1 and 6.
inline bool fast_layout_version(uint16_t version) { return version == kFormatVersionV1 || version == kFormatVersionV6; }

// The version a writer of the Lorenzo + fast pipeline uses for an array of this shape: 6 when its Lorenzo
// segments (zb_lorenzo.h) are more than one, else 1 (the same bytes as before version 6).
uint16_t lorenzo_fast_version(const Shape &s);
constexpr size_t kHeaderFixedBytes = 96;   // up to the segment table
constexpr int kMaxSegments = 16;  // v2 with the ratio encoder uses up to 1 + 4 + 1 + 5

// Predictors and encoders as stored in the header.
enum StoredPredictor : uint8_t { kPredRaw = 0, kPredLorenzo = 1, kPredInterp = 2 };
enum StoredEncoder : uint8_t { kEncRaw = 0, kEncFast = 1, kEncRatio = 2 };

// The version a writer uses for a pipeline of the v2 layout: interp codes in pass order need version 3; Lorenzo +
// ratio stays version 2 (writers use the lowest version that can express a stream).
inline uint16_t v2_layout_version(uint8_t predictor, bool run_tokens = false) {
    if (run_tokens) return kFormatVersionV4;
    return predictor == kPredInterp ? kFormatVersionV3 : kFormatVersionV2;
}

// Format v2 (docs/FORMAT.md section 8): segment 0 holds the pipeline parameters, then the encoder's segments, the
// escapes and the five exception segments.
constexpr uint64_t kV2CommonParamBytes = 8;  // u32 radius, u32 reserved (0)
constexpr int kFastCodeSegmentCount = 2;      // block flags, non-zero blocks
// Code radius R of a v2-layout stream (every code |c| < R), fixed per encoder (docs/FORMAT.md section 8).
constexpr int32_t kFastRadius = 32768;   // every |code| < 2^15 fits a sign-magnitude 16-bit code
constexpr int32_t kRatioRadius = 512;    // ratio encoder: symbol = code + R in [1, 2R), 0 = escaped anchor delta
int v2_encoder_segments(uint8_t encoder);     // 0 if unknown

// Format v5 (docs/FORMAT.md section 12): parameters, inner stream, sign-bit flags and blocks, five exception segments.
enum PwRelSegment { kPwSegParams = 0, kPwSegInner, kPwSegSignFlags, kPwSegSignBlocks, kPwSegExceptions };
constexpr int kPwRelSegmentCount = kPwSegExceptions + 5;
constexpr uint64_t kPwRelParamBytes = 8;   // u32 transform (1 = base-2 log of the magnitude), u32 reserved (0)
constexpr uint32_t kPwRelTransformLog2 = 1;

enum HeaderFlags : uint8_t { kFlagRaw = 1, kFlagEscapes = 2, kFlagExceptions = 4, kKnownFlags = 7 };

// Fast encoder segments (docs/FORMAT.md section 5).
enum FastSegment {
    kSegCodeFlags = 0, kSegCodeBlocks, kSegEscapes, kSegEdgeFlags, kSegEdgeBlocks, kSegChangeFlags,
    kSegChangeBlocks, kSegExceptionValues, kFastSegmentCount
};

constexpr uint64_t kTileCodes = 2048;   // codes per bitshuffle tile
constexpr uint64_t kTileBytes = 4096;   // bytes per shuffled tile
constexpr uint64_t kBlockBytes = 16;    // zero-block size
constexpr uint64_t kTileFlagBytes = kTileBytes / kBlockBytes / 8;  // 32

struct Segment { uint64_t offset = 0, length = 0; };

// A read-only view of bytes (a segment of a stream).
struct ByteSpan {
    const uint8_t *data = nullptr;
    uint64_t size = 0;
};

struct Header {
    uint16_t version = kFormatVersionV1;
    zb_dtype dtype = ZB_F32;
    Shape shape;
    zb_mode mode = ZB_MODE_ABS;
    uint8_t predictor = 0;   // 0 raw, 1 lorenzo
    uint8_t encoder = 0;     // 0 raw, 1 fast
    uint8_t flags = 0;
    double bound = 0;        // user value
    double eb = 0;           // derived absolute bound
    uint64_t escapes = 0, exceptions = 0, runs = 0, nonzero_code_blocks = 0;
    int nsegments = 0;
    Segment seg[kMaxSegments];
    uint32_t payload_crc = 0;

    size_t header_bytes() const { return kHeaderFixedBytes + 16 * (size_t)nsegments + 8; }
    uint64_t payload_bytes() const { uint64_t s = 0; for (int i = 0; i < nsegments; ++i) s += seg[i].length; return s; }
    size_t value_bytes() const { return dtype == ZB_F64 ? 8 : 4; }
};

ZB_HD uint64_t div_up(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// Sizes of the sparse encoding of a byte string of `bytes` bytes: flag bytes (non-zero blocks are counted apart).
ZB_HD uint64_t sparse_flag_bytes(uint64_t bytes) { return div_up(div_up(bytes, kBlockBytes), 8); }
ZB_HD uint64_t code_tiles(uint64_t n) { return div_up(n, kTileCodes); }

// Byte offsets of the header fields that the fast encoder's counts fill (write_header; the GPU encoder patches them
// into a header written with zero counts).
constexpr size_t kHdrFlagsAt = 13, kHdrEbAt = 24, kHdrCountsAt = 64;  // counts: escapes, exceptions, runs, blocks

// What the fast encoder's segment lengths depend on (docs/FORMAT.md section 5).
struct FastCounts {
    uint64_t n, value_bytes, nonzero_code_blocks, escapes, exceptions, edge_nonzero_blocks, change_nonzero_blocks,
        runs;
};

// The fast encoder's segment lengths; returns the header flags. On the device too: the GPU encoder lays a stream
// out there, without a round trip to the host (encode.cuh).
ZB_HD uint8_t fast_segment_lengths(const FastCounts &c, uint64_t (&len)[kFastSegmentCount]) {
    len[kSegCodeFlags] = code_tiles(c.n) * kTileFlagBytes;
    len[kSegCodeBlocks] = c.nonzero_code_blocks * kBlockBytes;
    len[kSegEscapes] = c.escapes * 4;
    len[kSegEdgeFlags] = sparse_flag_bytes(div_up(c.n, 8));
    len[kSegEdgeBlocks] = c.edge_nonzero_blocks * kBlockBytes;
    len[kSegChangeFlags] = c.exceptions ? sparse_flag_bytes(div_up(c.exceptions, 8)) : 0;
    len[kSegChangeBlocks] = c.change_nonzero_blocks * kBlockBytes;
    len[kSegExceptionValues] = c.runs * c.value_bytes;
    return (uint8_t)((c.escapes ? kFlagEscapes : 0) | (c.exceptions ? kFlagExceptions : 0));
}

// Fills seg[] offsets/lengths of a fast-encoder header from its counts and the two mask non-zero block counts.
void fast_layout(Header &h, uint64_t edge_nonzero_blocks, uint64_t change_nonzero_blocks);

// Fills the offsets of a v2 header from its segment lengths (h.nsegments = count) and sets the flags from the counts.
void v2_layout(Header &h, const uint64_t *lengths, int count);

// Writes the header (h.header_bytes() bytes) to dst, computing the header CRC. Payload CRC must be set.
void write_header(const Header &h, uint8_t *dst);

// Parses and validates a header: magic, version, sizes, enums, counts against segment lengths, segment contiguity,
// header CRC and that the stream holds the whole payload; with verify_payload also the payload checksum (on one
// thread; decompress_stream checks it with check_payload on the team of the decode). Sets `msg` on error.
zb_status read_header(const uint8_t *src, size_t len, Header &h, std::string &msg, bool verify_payload = true);

// The payload checksum of a stream whose header read_header has accepted (without verify_payload), on `threads`.
zb_status check_payload(const uint8_t *src, const Header &h, std::string &msg, int threads);

// Size of the raw-passthrough stream for n values; an encoder emits raw passthrough exactly when its encoded stream
// (header + payload) would be >= this size. It is also the largest stream any encoder writes.
size_t raw_stream_bytes(zb_dtype dtype, uint64_t n);

// The raw-passthrough rule for an encoder whose header h has its final segment layout: if the encoded stream
// would not be smaller than the raw one, writes the raw stream (sets *out_len and raw_written); otherwise only
// checks that the encoded stream fits. Returns ZB_ERR_BUFFER_TOO_SMALL with msg when what must be written
// does not fit in cap.
zb_status raw_or_fits(const Header &h, const void *values, uint8_t *dst, size_t cap, size_t *out_len,
                      bool &raw_written, int threads, std::string &msg);

// Writes a complete raw-passthrough stream into dst (raw_stream_bytes() bytes). `base` supplies dtype, shape,
// mode, bound and eb; the rest is set here. Returns the number of bytes written.
size_t write_raw_stream(Header base, const void *values, uint8_t *dst, int threads);

// The absolute bound for a mode, given the range of the finite non-fill values (has_range false: there are none).
// REL over an empty or constant range gives 0, i.e. lossless.
double derive_abs_bound(zb_mode mode, double bound, bool has_range, double vmin, double vmax);

}  // namespace zb
