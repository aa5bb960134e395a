// Lorenzo segments (docs/FORMAT.md section 13, format version 6): the fast pipeline cuts the slowest dim into
// segments that are predicted as arrays of their own. Checked against the spec, not against the encoder:
//   - the segment sizes for shapes worked out by hand from the rule (at least 2^20 values, whole layers, only
//     layers of at most 2^14 values);
//   - the codes of a segment are those of the same values compressed as an array of their own (a stream of one
//     segment, version 1), i.e. no prediction crosses a segment border;
//   - every value within the bound and the same bytes and values for 1, 2, 3 and 16 threads.
#include <gtest/gtest.h>
#include <cstring>
#include <string>
#include <vector>
#include "test_util.h"
#include "zb_format.h"
#include "zb_lorenzo.h"

namespace {

using Dims = std::vector<size_t>;

TEST(LorenzoSegments, SizesFollowTheRule) {
    struct Want {
        Dims dims;
        uint64_t per_segment, count;
    };
    const Want cases[] = {
        {{440, 64, 128}, 128, 4},      // planes of 8192 values: 2^20 / 8192 = 128 planes
        {{1080, 2160}, 486, 3},        // rows of 2160: ceil(1048576 / 2160) = 486 rows
        {{3604480}, 1048576, 4},       // rank 1: 2^20 values
        {{1048576}, 1048576, 1},       // exactly one segment
        {{20, 200, 200}, 20, 1},       // planes of 40000 > 16384 values: never cut
        {{2000, 16384}, 64, 32},       // the largest layer that is cut: 64 layers per segment
        {{2000, 16385}, 2000, 1},      // one value more: not cut
        {{10, 7}, 10, 1},              // small arrays are one segment
    };
    for (const Want &w : cases) {
        const zb::LorenzoSegments g = zb::lorenzo_segments(zbt::shape_of(w.dims));
        EXPECT_EQ(g.per_segment, w.per_segment) << w.dims[0];
        EXPECT_EQ(g.count(), w.count) << w.dims[0];
        EXPECT_EQ(zb::lorenzo_fast_version(zbt::shape_of(w.dims)), w.count > 1 ? 6 : 1);
    }
}

// The payload's code flags and code blocks of tiles [t0, t1) of a fast-layout stream, as bytes.
struct TileBytes {
    std::vector<uint8_t> flags, blocks;
};
TileBytes tile_bytes(const std::vector<uint8_t> &stream, uint64_t t0, uint64_t t1) {
    zb::Header h;
    std::string msg;
    EXPECT_EQ(zb::read_header(stream.data(), stream.size(), h, msg), ZB_OK) << msg;
    const uint8_t *payload = stream.data() + h.header_bytes();
    const uint8_t *flags = payload + h.seg[zb::kSegCodeFlags].offset;
    const uint8_t *blocks = payload + h.seg[zb::kSegCodeBlocks].offset;
    auto blocks_before = [&](uint64_t t) {
        uint64_t c = 0;
        for (uint64_t b = 0; b < t * zb::kTileFlagBytes; ++b) c += (uint64_t)__builtin_popcount(flags[b]);
        return c;
    };
    TileBytes r;
    r.flags.assign(flags + t0 * zb::kTileFlagBytes, flags + t1 * zb::kTileFlagBytes);
    r.blocks.assign(blocks + blocks_before(t0) * zb::kBlockBytes, blocks + blocks_before(t1) * zb::kBlockBytes);
    return r;
}

// The escape list of a fast-layout stream, as bytes.
std::vector<uint8_t> escape_bytes(const std::vector<uint8_t> &stream) {
    zb::Header h;
    std::string msg;
    EXPECT_EQ(zb::read_header(stream.data(), stream.size(), h, msg), ZB_OK) << msg;
    const uint8_t *e = stream.data() + h.header_bytes() + h.seg[zb::kSegEscapes].offset;
    return std::vector<uint8_t>(e, e + h.seg[zb::kSegEscapes].length);
}

// `dims` holds several segments whose sizes are whole tiles; segment k is compressed alone (its layers as an array
// of the same rank) and its tiles must equal the whole stream's tiles of that segment.
template <typename T> void check_segments(const Dims &dims) {
    const zb::LorenzoSegments g = zb::lorenzo_segments(zbt::shape_of(dims));
    ASSERT_GT(g.count(), 1u);
    ASSERT_EQ(g.per_segment * g.layer_values % zb::kTileCodes, 0u) << "the test needs whole tiles per segment";
    const std::vector<T> data = zbt::smooth_field<T>(dims, 0.02, 7, 250.0);
    const zb_params p = zbt::cpu_params(ZB_MODE_ABS, 1e-3, ZB_PRED_LORENZO, ZB_ENC_FAST, 2);
    const zbt::Stream whole = zbt::compress(data, dims, p);
    ASSERT_EQ(whole.status, ZB_OK);
    ASSERT_EQ(zb::get_u16(whole.bytes.data() + 4), zb::kFormatVersionV6);
    zb_stream_info info;
    ASSERT_EQ(zb_stream_info_get(whole.bytes.data(), whole.bytes.size(), &info), ZB_OK);
    ASSERT_GE(info.escapes, g.count());   // each segment's first value is predicted from 0: escaped

    const uint64_t seg_values = g.per_segment * g.layer_values, tiles_per_seg = seg_values / zb::kTileCodes;
    std::vector<uint8_t> escapes_of_parts;
    for (uint64_t k = 0; k < g.count(); ++k) {
        const uint64_t v0 = k * seg_values, v1 = std::min<uint64_t>(data.size(), v0 + seg_values);
        Dims part = dims;
        part[0] = (size_t)((v1 - v0) / g.layer_values);
        const std::vector<T> alone_data(data.begin() + (long)v0, data.begin() + (long)v1);
        const zbt::Stream alone = zbt::compress(alone_data, part, p);
        ASSERT_EQ(alone.status, ZB_OK);
        ASSERT_EQ(zb::get_u16(alone.bytes.data() + 4), zb::kFormatVersionV1);   // one segment
        const uint64_t tiles = zb::code_tiles(v1 - v0);
        const TileBytes a = tile_bytes(alone.bytes, 0, tiles);
        const TileBytes w = tile_bytes(whole.bytes, k * tiles_per_seg, k * tiles_per_seg + tiles);
        EXPECT_EQ(w.flags, a.flags) << "segment " << k << " of rank " << dims.size();
        EXPECT_EQ(w.blocks, a.blocks) << "segment " << k << " of rank " << dims.size();
        const std::vector<uint8_t> e = escape_bytes(alone.bytes);
        escapes_of_parts.insert(escapes_of_parts.end(), e.begin(), e.end());
    }
    EXPECT_EQ(escape_bytes(whole.bytes), escapes_of_parts);   // in index order: the segments' lists one after another

    // Bound and thread independence of the bytes and of the decoded values (the decoder's segment paths: one
    // thread, segments side by side on 2 and 3 threads, one segment after another on 16).
    for (int t : {1, 3, 16}) {
        const zbt::Stream s = zbt::compress(data, dims, zbt::cpu_params(ZB_MODE_ABS, 1e-3, ZB_PRED_LORENZO, ZB_ENC_FAST, t));
        ASSERT_EQ(s.bytes, whole.bytes) << t << " compression threads";
    }
    std::vector<T> first;
    for (int t : {1, 2, 3, 16}) {
        zbt::ScopedEnv env("ZBOUND_THREADS", std::to_string(t).c_str());
        std::vector<T> out(data.size());
        ASSERT_EQ(zbt::decompress(whole.bytes, out), ZB_OK) << zb_last_error();
        EXPECT_EQ(zbt::count_violations(data, out, 1e-3), 0u) << t << " threads";
        if (first.empty()) first = out;
        else EXPECT_EQ(std::memcmp(first.data(), out.data(), out.size() * sizeof(T)), 0) << t << " threads";
    }
}

TEST(LorenzoSegments, Rank3SegmentsAreArraysOfTheirOwn) { check_segments<float>({300, 64, 128}); }
TEST(LorenzoSegments, Rank2SegmentsAreArraysOfTheirOwn) { check_segments<double>({2500, 1024}); }
TEST(LorenzoSegments, Rank1SegmentsAreArraysOfTheirOwn) { check_segments<float>({(size_t(1) << 21) + 4096 * 3}); }

// Layers that do not fill the last segment, and a segment size that is not whole tiles (rows of 2160): bound and
// thread independence only.
TEST(LorenzoSegments, RaggedSegmentsRoundTrip) {
    const Dims dims = {1300, 2160};
    const std::vector<float> data = zbt::smooth_field<float>(dims, 0.5, 3, 20.0);
    std::vector<uint8_t> first;
    for (int t : {1, 2, 16}) {
        const zbt::Stream s = zbt::compress(data, dims, zbt::cpu_params(ZB_MODE_REL, 1e-4, ZB_PRED_LORENZO, ZB_ENC_FAST, t));
        ASSERT_EQ(s.status, ZB_OK);
        if (first.empty()) first = s.bytes;
        ASSERT_EQ(s.bytes, first);
    }
    ASSERT_EQ(zb::get_u16(first.data() + 4), zb::kFormatVersionV6);
    for (int t : {1, 2, 3, 16}) {
        zbt::ScopedEnv env("ZBOUND_THREADS", std::to_string(t).c_str());
        std::vector<float> out(data.size());
        ASSERT_EQ(zbt::decompress(first, out), ZB_OK) << zb_last_error();
        EXPECT_EQ(zbt::count_violations(data, out, zbt::abs_bound_of(first)), 0u) << t << " threads";
    }
}

}  // namespace
