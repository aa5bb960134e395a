// Stream format v1: a stream built by hand from docs/FORMAT.md decodes as the spec says; header fields; and every
// truncation, bit flip or crafted inconsistency gives an error code, never a crash (run under ASan+UBSan in CI).
#include <gtest/gtest.h>
#include <random>
#include "test_util.h"
#include "zb_bytes.h"
#include "zb_crc32c.h"
#include "zb_format.h"

namespace {

// Three values [0.0, 0.02, NaN] at abs bound 0.01, encoded by hand following docs/FORMAT.md:
// q = [0, 1, exception -> 0], deltas [0, 1, -1], codes [0x0000, 0x0001, 0x8001].
std::vector<uint8_t> hand_built_stream(uint32_t nan_bits) {
    zb::Header h;
    h.dtype = ZB_F32;
    h.shape.rank = 1;
    h.shape.dims[0] = 3;
    h.shape.n = 3;
    h.mode = ZB_MODE_ABS;
    h.bound = 0.01;
    h.eb = 0.01;
    h.predictor = 1;
    h.encoder = 1;
    h.exceptions = 1;
    h.runs = 1;
    h.nonzero_code_blocks = 2;
    zb::fast_layout(h, 1, 1);
    std::vector<uint8_t> payload;
    // Segment 0: tile flags (32 bytes). Plane 0 byte 0 (block 0) holds bits of codes 1 and 2: 0b110.
    // Plane 15 byte 0 sits at offset 15*256 = 3840, block 240: bit of code 2 (sign): 0b100.
    std::vector<uint8_t> flags(32, 0);
    flags[0] = 1;
    flags[30] = 1;
    payload.insert(payload.end(), flags.begin(), flags.end());
    std::vector<uint8_t> b0(16, 0), b1(16, 0);
    b0[0] = 6;
    b1[0] = 4;
    payload.insert(payload.end(), b0.begin(), b0.end());
    payload.insert(payload.end(), b1.begin(), b1.end());
    // Segments 3, 4: edge mask E = [0, 0, 1] -> byte 0b100, one block.
    payload.push_back(1);
    std::vector<uint8_t> e(16, 0);
    e[0] = 4;
    payload.insert(payload.end(), e.begin(), e.end());
    // Segments 5, 6: change bits C = [1].
    payload.push_back(1);
    std::vector<uint8_t> c(16, 0);
    c[0] = 1;
    payload.insert(payload.end(), c.begin(), c.end());
    // Segment 7: the NaN's bits.
    for (int i = 0; i < 4; ++i) payload.push_back((uint8_t)(nan_bits >> (8 * i)));
    EXPECT_EQ(payload.size(), h.payload_bytes());
    h.payload_crc = zb::payload_checksum(payload.data(), payload.size(), 1);
    std::vector<uint8_t> s(h.header_bytes());
    zb::write_header(h, s.data());
    s.insert(s.end(), payload.begin(), payload.end());
    return s;
}

TEST(Format, HandBuiltStreamDecodesPerSpec) {
    const uint32_t nan_bits = 0x7FC00123u;  // a NaN with a payload
    const auto s = hand_built_stream(nan_bits);
    EXPECT_EQ(std::memcmp(s.data(), "ZBND", 4), 0);
    EXPECT_EQ(zb::get_u16(s.data() + 4), 1);
    std::vector<float> out(3);
    ASSERT_EQ(zbt::decompress(s, out), ZB_OK) << zb_last_error();
    EXPECT_EQ(out[0], 0.0f);
    EXPECT_EQ(out[1], (float)0.02);
    EXPECT_EQ(zbt::bits(out[2]), nan_bits);
}

TEST(Format, InfoReportsHeaderFields) {
    const std::vector<size_t> dims{1, 40, 1, 50};
    const auto data = zbt::smooth_field<double>(dims, 0.01, 7);
    zb_params p = zb_params_default();
    p.mode = ZB_MODE_ABS;
    p.bound = 0.05;
    p.predictor = ZB_PRED_LORENZO;  // a format-v1 stream
    p.encoder = ZB_ENC_FAST;
    const auto s = zbt::compress(data, dims, p);
    ASSERT_EQ(s.status, ZB_OK);
    zb_stream_info info;
    ASSERT_EQ(zb_stream_info_get(s.bytes.data(), s.bytes.size(), &info), ZB_OK);
    EXPECT_EQ(info.format_version, 1);
    EXPECT_EQ(info.dtype, ZB_F64);
    EXPECT_EQ(info.rank, 2);
    EXPECT_EQ(info.dims[0], 40u);
    EXPECT_EQ(info.dims[1], 50u);
    EXPECT_EQ(info.n, 2000u);
    EXPECT_EQ(info.decompressed_bytes, 16000u);
    EXPECT_EQ(info.stream_bytes, s.bytes.size());
    EXPECT_EQ(info.mode, ZB_MODE_ABS);
    EXPECT_EQ(info.bound, 0.05);
    EXPECT_EQ(info.abs_bound, 0.05);
    EXPECT_EQ(info.raw, 0);
}

std::vector<uint8_t> sample_stream() {
    // Includes NaN, escapes and outliers so every segment is non-empty.
    const std::vector<size_t> dims{37, 61};
    auto data = zbt::smooth_field<float>(dims, 0.5, 11);
    data[5] = NAN;
    data[6] = NAN;
    data[100] = 1e30f;
    data[700] = -5000.f;
    zb_params p = zb_params_default();
    p.mode = ZB_MODE_ABS;
    p.bound = 0.01;
    p.predictor = ZB_PRED_LORENZO;  // a format-v1 stream: the tests below rely on its 8-segment layout
    p.encoder = ZB_ENC_FAST;
    auto s = zbt::compress(data, dims, p);
    EXPECT_EQ(s.status, ZB_OK);
    zb_stream_info info;
    EXPECT_EQ(zb_stream_info_get(s.bytes.data(), s.bytes.size(), &info), ZB_OK);
    EXPECT_EQ(info.raw, 0);
    EXPECT_GT(info.escapes, 0u);
    EXPECT_GT(info.exceptions, 0u);
    return s.bytes;
}

TEST(Format, EveryTruncationIsAnError) {
    const auto s = sample_stream();
    std::vector<float> out(37 * 61);
    for (size_t len = 0; len < s.size(); ++len) {
        std::vector<uint8_t> t(s.begin(), s.begin() + (long)len);  // exact-size copy: ASan sees any overread
        const zb_status st = zb_decompress(t.data(), t.size(), out.data(), out.size() * 4, ZB_BACKEND_CPU, nullptr);
        ASSERT_NE(st, ZB_OK) << "truncated to " << len;
    }
}

TEST(Format, EveryBitFlipIsAnError) {
    const auto s = sample_stream();
    std::vector<float> out(37 * 61);
    for (size_t i = 0; i < s.size(); ++i) {
        for (int bit : {0, 3, 7}) {
            auto t = s;
            t[i] ^= (uint8_t)(1u << bit);
            ASSERT_NE(zbt::decompress(t, out), ZB_OK) << "flip at byte " << i << " bit " << bit;
        }
    }
}

using zbt::reseal;

TEST(Format, CraftedInconsistenciesAreErrors) {
    const auto s = sample_stream();
    std::vector<float> out(37 * 61);
    std::mt19937 rng(13);
    // Header fields changed with checksums fixed up. The mode byte and the two bounds (user value, derived eb)
    // legitimately decode to other values; every other field is tied to the segment lengths and must be rejected.
    for (size_t off = 8; off < 96; ++off) {
        if (off == 10 || (off >= 16 && off < 32)) continue;
        for (uint8_t v : {(uint8_t)0x00, (uint8_t)0x01, (uint8_t)0xFF, (uint8_t)0x80}) {
            auto t = s;
            if (t[off] == v) continue;
            t[off] = v;
            reseal(t);
            EXPECT_NE(zbt::decompress(t, out), ZB_OK) << "header byte " << off << " set to " << (int)v;
        }
    }
    // Payload bytes changed with checksums fixed up: any status, but no crash and no out-of-bounds access.
    const size_t hb = zb::kHeaderFixedBytes + 16 * 8 + 8;
    for (int k = 0; k < 3000; ++k) {
        auto t = s;
        t[hb + rng() % (t.size() - hb)] ^= (uint8_t)(1u << (rng() % 8));
        reseal(t);
        (void)zbt::decompress(t, out);
    }
}

// Found by fuzz/fuzz_decode.cpp: a raw-passthrough stream relabelled as version 2 or 3 reached the v2-layout decoder,
// which read its parameters past the end of the one raw segment (heap overflow under ASan). Raw is version 1 only.
TEST(Format, RawPassthroughInAnotherVersionIsRejected) {
    std::mt19937 rng(3);
    std::vector<float> noise(500);
    for (float &v : noise) v = (float)rng();
    zb_params p = zb_params_default();
    p.mode = ZB_MODE_ABS;
    p.bound = 0;   // lossless random bits: stored raw
    const size_t dims[1] = {noise.size()};
    std::vector<uint8_t> raw(zb_compress_bound(ZB_F32, noise.size()));
    size_t len = 0;
    ASSERT_EQ(zb_compress(&p, ZB_F32, noise.data(), 1, dims, raw.data(), raw.size(), &len, nullptr), ZB_OK);
    raw.resize(len);
    zb_stream_info info;
    ASSERT_EQ(zb_stream_info_get(raw.data(), raw.size(), &info), ZB_OK);
    ASSERT_EQ(info.raw, 1);
    ASSERT_EQ(info.format_version, 1);
    std::vector<float> out(noise.size());
    ASSERT_EQ(zbt::decompress(raw, out), ZB_OK);
    for (uint16_t version : {2, 3}) {
        auto t = raw;
        zb::put_u16(t.data() + 4, version);
        reseal(t);
        EXPECT_EQ(zbt::decompress(t, out), ZB_ERR_CORRUPT) << "raw stream as version " << version;
        EXPECT_NE(std::string(zb_last_error()).find("raw passthrough"), std::string::npos) << zb_last_error();
    }
}

TEST(Format, NewerVersionIsReportedAsSuch) {
    auto s = sample_stream();
    zb::put_u16(s.data() + 4, zb::kFormatVersion + 1);
    reseal(s);
    std::vector<float> out(37 * 61);
    EXPECT_EQ(zbt::decompress(s, out), ZB_ERR_VERSION);
    EXPECT_NE(std::string(zb_last_error()).find("newer"), std::string::npos);
}

TEST(Format, NotAStreamAndSmallBuffers) {
    std::vector<float> out(10);
    std::vector<uint8_t> junk{'H', 'D', 'F', '5', 0, 0};
    EXPECT_EQ(zbt::decompress(junk, out), ZB_ERR_CORRUPT);
    const auto s = sample_stream();
    std::vector<float> small(37 * 61 - 1);
    EXPECT_EQ(zbt::decompress(s, small), ZB_ERR_BUFFER_TOO_SMALL);
    // Compressing into a buffer one byte too small.
    const std::vector<size_t> dims{37, 61};
    auto data = zbt::smooth_field<float>(dims, 0.5, 11);
    zb_params p = zb_params_default();
    std::vector<uint8_t> buf(zb_compress_bound(ZB_F32, data.size()));
    size_t len = 0;
    ASSERT_EQ(zb_compress(&p, ZB_F32, data.data(), 2, dims.data(), buf.data(), buf.size(), &len, nullptr), ZB_OK);
    EXPECT_EQ(zb_compress(&p, ZB_F32, data.data(), 2, dims.data(), buf.data(), len - 1, &len, nullptr),
              ZB_ERR_BUFFER_TOO_SMALL);
}

}  // namespace
