// The Lorenzo + ratio decoder in slabs (zb_lorenzo_ratio.h) against the two-pass decoder it replaces
// (ZBOUND_CPU_LORENZO_SLABS=0): the same values bit for bit on 1-4 threads, ranks 2 and 3, f32 and f64, with layers
// that do not line up with the Huffman sub-blocks and escaped codes in many slabs; and the same verdict on damaged
// streams (one escape too many or too few, flipped bits in the Huffman blocks).
#include <gtest/gtest.h>
#include <cmath>
#include <string>
#include <vector>
#include "test_util.h"
#include "zb_format.h"
#include "zb_lorenzo_ratio.h"
#include "zb_ratio.h"

namespace {

using Dims = std::vector<size_t>;

// A smooth field with jumps every 7919 values (escaped codes: deltas past the ratio encoder's radius, in most
// slabs), NaN and a run of them (exceptions).
template <typename T> std::vector<T> field(const Dims &dims, uint32_t seed) {
    std::vector<T> v = zbt::smooth_field<T>(dims, 0.05, seed, 300.0);
    for (size_t i = 0; i < v.size(); i += 7919) v[i] += (T)(2000.0 + (double)(i % 5000));
    for (size_t i = 3; i < v.size(); i += 4093) v[i] = NAN;
    for (size_t i = 20000; i < 20100 && i < v.size(); ++i) v[i] = NAN;
    return v;
}

zbt::Stream lorenzo_ratio(const std::vector<float> &data, const Dims &dims) {
    return zbt::compress(data, dims, zbt::cpu_params(ZB_MODE_ABS, 1e-3, ZB_PRED_LORENZO, ZB_ENC_RATIO));
}

// Status and message of a CPU decompression on `threads` threads, in slabs or in two passes.
template <typename T>
std::pair<zb_status, std::string> decode(const std::vector<uint8_t> &stream, std::vector<T> &out, int threads,
                                         bool slabs) {
    const zbt::ScopedEnv env("ZBOUND_CPU_LORENZO_SLABS", slabs ? "1" : "0");
    const zb_status st = zbt::decompress(stream, out, ZB_BACKEND_CPU, threads);
    return {st, st == ZB_OK ? std::string() : std::string(zb_last_error())};
}

// Rank 3 with planes of 7747 values (16 per slab, 8 slabs; slab borders fall inside sub-blocks), rank 2 with rows of
// 250 (524 per slab, 8 slabs).
const Dims k3d{120, 61, 127}, k2d{4000, 250};

template <typename T> void check_same_values(uint32_t seed) {
    for (const Dims &dims : {k3d, k2d}) {
        const std::vector<T> data = field<T>(dims, seed);
        const zbt::Stream s =
            zbt::compress(data, dims, zbt::cpu_params(ZB_MODE_ABS, 1e-3, ZB_PRED_LORENZO, ZB_ENC_RATIO));
        ASSERT_EQ(s.status, ZB_OK);
        zb_stream_info info;
        ASSERT_EQ(zb_stream_info_get(s.bytes.data(), s.bytes.size(), &info), ZB_OK);
        ASSERT_GT(info.escapes, 20u);
        ASSERT_GT(info.exceptions, 100u);
        const std::string what = std::string(sizeof(T) == 8 ? "f64" : "f32") + " rank " + std::to_string(dims.size());
        std::vector<T> ref(data.size()), out(data.size());
        ASSERT_EQ(decode(s.bytes, ref, 1, false).first, ZB_OK) << what;
        EXPECT_EQ(zbt::count_violations(data, ref, 1e-3), 0u) << what;
        for (int threads : {1, 2, 3, 4}) {
            ASSERT_GE(zb::lorenzo_ratio_slabs(zbt::shape_of(dims), threads).count, 8u) << what;   // slabs are taken
            std::fill(out.begin(), out.end(), (T)0);
            ASSERT_EQ(decode(s.bytes, out, threads, true).first, ZB_OK) << what << ", " << threads << " threads";
            size_t differ = 0;
            for (size_t i = 0; i < out.size(); ++i) differ += zbt::bits(out[i]) != zbt::bits(ref[i]);
            EXPECT_EQ(differ, 0u) << what << ", " << threads << " threads";
        }
    }
}

TEST(LorenzoRatioSlabs, SameValuesAsTwoPassesF32) { check_same_values<float>(41); }
TEST(LorenzoRatioSlabs, SameValuesAsTwoPassesF64) { check_same_values<double>(42); }

// The plan: slabs of up to 2^17 codes, at least two per thread, of at least 2^15; else (and for rank 1 and layers
// larger than a slab) two passes.
TEST(LorenzoRatioSlabs, PlanFallsBackToTwoPasses) {
    EXPECT_EQ(zb::lorenzo_ratio_slabs(zbt::shape_of({1u << 22}), 1).count, 0u);
    EXPECT_EQ(zb::lorenzo_ratio_slabs(zbt::shape_of({8, 400, 400}), 1).count, 0u);
    EXPECT_EQ(zb::lorenzo_ratio_slabs(zbt::shape_of(k3d), 1).layers_per_slab, 16u);   // 16 planes of 7747: 2^17 codes
    EXPECT_EQ(zb::lorenzo_ratio_slabs(zbt::shape_of(k3d), 4).count, 8u);
    EXPECT_EQ(zb::lorenzo_ratio_slabs(zbt::shape_of(k3d), 5).layers_per_slab, 12u);   // two slabs per thread
    EXPECT_EQ(zb::lorenzo_ratio_slabs(zbt::shape_of(k3d), 5).count, 10u);
    EXPECT_EQ(zb::lorenzo_ratio_slabs(zbt::shape_of(k3d), 16).count, 0u);   // 3 planes a slab: under 2^15 codes
    EXPECT_EQ(zb::lorenzo_ratio_slabs(zbt::shape_of({5, 7000}), 1).count, 1u);
    const zbt::ScopedEnv off("ZBOUND_CPU_LORENZO_SLABS", "0");
    EXPECT_EQ(zb::lorenzo_ratio_slabs(zbt::shape_of(k3d), 1).count, 0u);
}

// One stored escape too many or too few: corrupt, as in two passes, whichever slab the count runs out in.
TEST(LorenzoRatioSlabs, EscapeCountMismatchIsCorrupt) {
    const std::vector<float> data = field<float>(k3d, 43);
    const zbt::Stream s = lorenzo_ratio(data, k3d);
    ASSERT_EQ(s.status, ZB_OK);
    std::vector<float> out(data.size());
    for (int delta : {-1, 1}) {
        const std::vector<uint8_t> bad = zbt::with_escape_count(s.bytes, 1 + zb::kRatioSegmentCount, delta);
        const auto two_pass = decode(bad, out, 1, false);
        EXPECT_EQ(two_pass.first, ZB_ERR_CORRUPT) << "escapes " << delta;
        for (int threads : {1, 2, 4}) {
            const auto slabs = decode(bad, out, threads, true);
            EXPECT_EQ(slabs.first, ZB_ERR_CORRUPT) << "escapes " << delta << ", " << threads << " threads";
            EXPECT_EQ(slabs.second, two_pass.second) << "escapes " << delta << ", " << threads << " threads";
        }
    }
}

// Single-bit flips spread over the Huffman blocks (checksums resealed, so the decoder's own checks must see them):
// the slabs give the two-pass decoder's status and message for every flip. Some break a sub-block's length, some
// change the escaped codes' count; the rest turn codes into others of the same length and decode to the same other
// values in both (the stream checksum is what catches those).
TEST(LorenzoRatioSlabs, FlippedHuffmanBitsGiveTheTwoPassVerdict) {
    const std::vector<float> data = field<float>(k3d, 44);
    const zbt::Stream s = lorenzo_ratio(data, k3d);
    ASSERT_EQ(s.status, ZB_OK);
    zb::Header h;
    std::string msg;
    ASSERT_EQ(zb::read_header(s.bytes.data(), s.bytes.size(), h, msg, true), ZB_OK) << msg;
    const zb::Segment blocks = h.seg[1 + zb::kRatioSegBlocks];
    ASSERT_GT(blocks.length, 1000u);
    std::vector<float> a(data.size()), b(data.size());
    int sub_block = 0, escapes = 0;
    constexpr int kFlips = 80;
    for (int k = 0; k < kFlips; ++k) {
        std::vector<uint8_t> bad = s.bytes;
        bad[h.header_bytes() + blocks.offset + blocks.length * (uint64_t)k / kFlips] ^= (uint8_t)(1u << (k % 8));
        zbt::reseal(bad);
        const auto two_pass = decode(bad, a, 1, false);
        for (int threads : {1, 3}) {
            const auto slabs = decode(bad, b, threads, true);
            EXPECT_EQ(slabs.first, two_pass.first) << "flip " << k << ", " << threads << " threads";
            EXPECT_EQ(slabs.second, two_pass.second) << "flip " << k << ", " << threads << " threads";
            if (two_pass.first == ZB_OK && slabs.first == ZB_OK) {
                size_t differ = 0;
                for (size_t i = 0; i < a.size(); ++i) differ += zbt::bits(a[i]) != zbt::bits(b[i]);
                EXPECT_EQ(differ, 0u) << "flip " << k << ", " << threads << " threads";
            }
        }
        sub_block += two_pass.second.find("sub-block") != std::string::npos;
        escapes += two_pass.second.find("escape") != std::string::npos;
    }
    EXPECT_GT(sub_block, 0) << "no flip reached the sub-block check";
    EXPECT_GT(escapes, 0) << "no flip reached the escape checks";
}

}  // namespace
