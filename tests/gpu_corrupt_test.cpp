// Corrupted payloads through the GPU decoder. The payload and header checksums are recomputed after each change
// ("resealed") so that the stream passes read_header and reaches the decoder's own consistency checks. For every
// change the GPU decoder must answer exactly like the CPU decoder: the same error, or (when the change only alters
// values) the same decoded array. Without resealing, the checksum must catch the change. The Lorenzo predictor with
// the fast encoder (format v1) and with the ratio encoder (format v2/v4).
#include <algorithm>
#include <cstdlib>
#include <random>
#include "gpu_test_util.h"
#include "zb_bytes.h"
#include "zb_crc32c.h"
#include "zb_ratio.h"

namespace {

zb_params lorenzo_params(zb_encoder encoder) {
    return gput::pipeline_params(ZB_PRED_LORENZO, encoder, ZB_MODE_ABS, 1e-3);
}

template <typename T>
void corrupt_and_compare(const std::vector<size_t> &dims, uint32_t seed, int trials, zb_encoder encoder = ZB_ENC_FAST) {
    const auto data = gput::busy_field<T>(dims, seed);
    const zb_params p = lorenzo_params(encoder);
    const zbt::Stream good = gput::compress_on(ZB_BACKEND_CPU, data, dims, p);
    ASSERT_EQ(good.status, ZB_OK);
    zb::Header h;
    std::string msg;
    ASSERT_EQ(zb::read_header(good.bytes.data(), good.bytes.size(), h, msg, false), ZB_OK);
    ASSERT_FALSE(h.flags & zb::kFlagRaw) << "the test field must not be stored raw";
    ASSERT_GT(h.escapes, 0u);
    ASSERT_GT(h.exceptions, 0u);
    const size_t hb = h.header_bytes();

    std::mt19937 rng(seed);
    std::vector<T> out_cpu(data.size()), out_gpu(data.size());
    int errors = 0, same_values = 0;
    trials = gput::sampled_trials(trials);
    for (int t = 0; t < trials; ++t) {
        std::vector<uint8_t> s = good.bytes;
        int seg;
        do seg = (int)(rng() % h.nsegments); while (h.seg[seg].length == 0);
        const int flips = 1 + (int)(rng() % 3);
        std::string where = "segment " + std::to_string(seg) + " bytes";
        for (int f = 0; f < flips; ++f) {
            const size_t off = hb + h.seg[seg].offset + rng() % h.seg[seg].length;
            s[off] ^= (uint8_t)(1 + rng() % 255);
            where += " " + std::to_string(off - hb - h.seg[seg].offset);
        }
        // Unsealed, the payload checksum catches it (on the host, before any decoder runs).
        EXPECT_EQ(zb_decompress(s.data(), s.size(), out_gpu.data(), out_gpu.size() * sizeof(T), ZB_BACKEND_GPU, nullptr),
                  ZB_ERR_CORRUPT);
        ASSERT_TRUE(gput::reseal_parsed(s));
        const zb_status sc = zb_decompress(s.data(), s.size(), out_cpu.data(), out_cpu.size() * sizeof(T), ZB_BACKEND_CPU, nullptr);
        const zb_status sg = zb_decompress(s.data(), s.size(), out_gpu.data(), out_gpu.size() * sizeof(T), ZB_BACKEND_GPU, nullptr);
        EXPECT_EQ(sc, sg) << where << "; GPU says: " << zb_last_error();
        if (sc == ZB_OK && sg == ZB_OK) {
            const size_t d = gput::first_value_difference(out_cpu, out_gpu);
            EXPECT_EQ(d, data.size()) << where << ": decoders differ at value " << d;
            ++same_values;
        } else {
            ++errors;
        }
        if (::testing::Test::HasFailure()) return;
    }
    std::printf("%d corruptions: %d rejected by both decoders, %d decoded identically\n", trials, errors, same_values);
    EXPECT_GT(errors, 0);
}

TEST(GpuCorrupt, SameAnswerAsCpuF32) {
    ZB_REQUIRE_GPU();
    corrupt_and_compare<float>({97, 131}, 1, 400);
    corrupt_and_compare<float>({9, 10, 300}, 2, 300);
}

TEST(GpuCorrupt, SameAnswerAsCpuF64) {
    ZB_REQUIRE_GPU();
    corrupt_and_compare<double>({20011}, 3, 400);
}

TEST(GpuCorrupt, LorenzoRatioSameAnswerAsCpuF32) {
    ZB_REQUIRE_GPU();
    corrupt_and_compare<float>({97, 131}, 4, 400, ZB_ENC_RATIO);
    corrupt_and_compare<float>({9, 10, 300}, 5, 300, ZB_ENC_RATIO);
}

TEST(GpuCorrupt, LorenzoRatioSameAnswerAsCpuF64) {
    ZB_REQUIRE_GPU();
    corrupt_and_compare<double>({20011}, 6, 400, ZB_ENC_RATIO);
}

// Both decoders answer a resealed stream alike: ZB_ERR_CORRUPT from each, or the same values from each.
template <typename T> void expect_same_answer(std::vector<uint8_t> s, size_t n, const std::string &what) {
    ASSERT_TRUE(gput::reseal_parsed(s));
    std::vector<T> a(n), b(n);
    const zb_status sc = zb_decompress(s.data(), s.size(), a.data(), n * sizeof(T), ZB_BACKEND_CPU, nullptr);
    const std::string cpu_msg = zb_last_error();
    const zb_status sg = zb_decompress(s.data(), s.size(), b.data(), n * sizeof(T), ZB_BACKEND_GPU, nullptr);
    EXPECT_EQ(sc, sg) << what << "; CPU says: " << cpu_msg << "; GPU says: " << zb_last_error();
    if (sc == ZB_OK && sg == ZB_OK) {
        EXPECT_EQ(gput::first_value_difference(a, b), n) << what;
    }
}

// Targeted, Lorenzo + ratio: the parameters (radius, reserved word), and one escape fewer / more than the codes use
// (header count and segment length kept consistent): ZB_ERR_CORRUPT from both decoders.
template <typename T> void lorenzo_ratio_targeted(const std::vector<T> &data, const std::vector<size_t> &dims) {
    const zbt::Stream good = gput::compress_on(ZB_BACKEND_CPU, data, dims, lorenzo_params(ZB_ENC_RATIO));
    ASSERT_EQ(good.status, ZB_OK);
    zb::Header h;
    std::string msg;
    ASSERT_EQ(zb::read_header(good.bytes.data(), good.bytes.size(), h, msg, false), ZB_OK);
    ASSERT_FALSE(h.flags & zb::kFlagRaw) << "the test field must not be stored raw";
    ASSERT_EQ(h.predictor, zb::kPredLorenzo);
    ASSERT_EQ(h.encoder, zb::kEncRatio);
    ASSERT_GT(h.escapes, 0u);
    const size_t hb = h.header_bytes(), n = data.size();
    for (size_t off : {(size_t)0, (size_t)1, (size_t)4, (size_t)7}) {
        std::vector<uint8_t> s = good.bytes;
        s[hb + off] ^= 0x01;
        expect_same_answer<T>(s, n, "parameter byte " + std::to_string(off));
    }
    const int esc_seg = 1 + zb::kRatioSegmentCount;
    for (int delta : {-1, 1}) {
        const std::vector<uint8_t> s = zbt::with_escape_count(good.bytes, esc_seg, delta);
        std::vector<T> out(n);
        EXPECT_EQ(zb_decompress(s.data(), s.size(), out.data(), n * sizeof(T), ZB_BACKEND_CPU, nullptr), ZB_ERR_CORRUPT)
            << "escapes " << delta << ": " << zb_last_error();
        EXPECT_EQ(zb_decompress(s.data(), s.size(), out.data(), n * sizeof(T), ZB_BACKEND_GPU, nullptr), ZB_ERR_CORRUPT)
            << "escapes " << delta << ": " << zb_last_error();
    }
}

TEST(GpuCorrupt, LorenzoRatioTargetedErrors) {
    ZB_REQUIRE_GPU();
    lorenzo_ratio_targeted(gput::busy_field<float>({97, 131}, 7), {97, 131});
    lorenzo_ratio_targeted(gput::busy_field<double>({9, 10, 300}, 8), {9, 10, 300});
    // One step: exactly one escape, so "one fewer" leaves an escape code in a stream without escapes.
    auto step = zbt::smooth_field<float>({30000}, 0.0, 9, 0.0);
    for (size_t i = 15000; i < step.size(); ++i) step[i] += 50.0f;
    lorenzo_ratio_targeted(step, {30000});
}

// Targeted: a non-zero padding code in the last tile; a code flag set on a zero block; an escape count off by one
// between the tile codes and the list.
TEST(GpuCorrupt, TargetedErrors) {
    ZB_REQUIRE_GPU();
    const std::vector<size_t> dims{1000};  // one tile, codes 1000..2047 are padding
    auto data = gput::busy_field<float>(dims, 9);
    const zb_params p = lorenzo_params(ZB_ENC_FAST);
    const zbt::Stream good = gput::compress_on(ZB_BACKEND_CPU, data, dims, p);
    ASSERT_EQ(good.status, ZB_OK);
    zb::Header h;
    std::string msg;
    ASSERT_EQ(zb::read_header(good.bytes.data(), good.bytes.size(), h, msg, false), ZB_OK);
    const size_t hb = h.header_bytes();
    std::vector<float> out(data.size());

    // Flag of block 255 (plane 15, the codes 1920..2047, all padding) set, and one block stored in place of
    // the first stored block: the block count still matches only if we also drop a flag; instead flip the flag
    // of the last block on and the first set flag off.
    std::vector<uint8_t> s = good.bytes;
    uint8_t *flags = &s[hb + h.seg[zb::kSegCodeFlags].offset];
    int first = -1;
    for (int b = 0; b < 256 && first < 0; ++b)
        if (flags[b / 8] >> (b % 8) & 1) first = b;
    ASSERT_GE(first, 0);
    if (!(flags[31] & 0x80)) {
        flags[first / 8] &= (uint8_t)~(1u << (first % 8));
        flags[31] |= 0x80;
        ASSERT_TRUE(gput::reseal_parsed(s));
        EXPECT_EQ(zb_decompress(s.data(), s.size(), out.data(), out.size() * 4, ZB_BACKEND_CPU, nullptr), ZB_ERR_CORRUPT);
        EXPECT_EQ(zb_decompress(s.data(), s.size(), out.data(), out.size() * 4, ZB_BACKEND_GPU, nullptr), ZB_ERR_CORRUPT)
            << "padding codes";
    }
    // All code flags set: more blocks flagged than stored.
    s = good.bytes;
    for (uint64_t i = 0; i < h.seg[zb::kSegCodeFlags].length; ++i) s[hb + i] = 0xFF;
    ASSERT_TRUE(gput::reseal_parsed(s));
    EXPECT_EQ(zb_decompress(s.data(), s.size(), out.data(), out.size() * 4, ZB_BACKEND_GPU, nullptr), ZB_ERR_CORRUPT)
        << "block count";
    // Exception change bits cleared: fewer runs than the header says.
    s = good.bytes;
    for (uint64_t i = 0; i < h.seg[zb::kSegChangeBlocks].length; ++i) s[hb + h.seg[zb::kSegChangeBlocks].offset + i] = 0;
    ASSERT_TRUE(gput::reseal_parsed(s));
    EXPECT_EQ(zb_decompress(s.data(), s.size(), out.data(), out.size() * 4, ZB_BACKEND_GPU, nullptr), ZB_ERR_CORRUPT)
        << "change bits";
    // Edge mask blocks cleared: fewer exceptions than the header says.
    s = good.bytes;
    for (uint64_t i = 0; i < h.seg[zb::kSegEdgeBlocks].length; ++i) s[hb + h.seg[zb::kSegEdgeBlocks].offset + i] = 0;
    ASSERT_TRUE(gput::reseal_parsed(s));
    EXPECT_EQ(zb_decompress(s.data(), s.size(), out.data(), out.size() * 4, ZB_BACKEND_GPU, nullptr), ZB_ERR_CORRUPT)
        << "edge mask";
}

// Few exceptions (at most 1 in 64 edge blocks stored): the fast decoder takes their positions from the stored edge
// blocks as intervals (decode.cuh, ExceptionDecoder's interval path) instead of a mask of the whole array, in one
// block (exceptions_block.cuh) where the array and the exceptions are few enough, else in separate launches
// (ZBOUND_GPU_EXCEPTION_BLOCK=0 forces those). For each form: parity, then flips in the exception segments answered
// exactly as the CPU decoder answers them, then edge blocks cleared and an edge past the end.
void few_exceptions_same_answer(const std::vector<float> &data, const std::vector<size_t> &dims, uint32_t seed,
                                int trials) {
    trials = gput::sampled_trials(trials);  // fewer under the sanitizers, where each decode is slow
    const zb_params p = lorenzo_params(ZB_ENC_FAST);
    const zbt::Stream good = gput::compress_on(ZB_BACKEND_CPU, data, dims, p);
    ASSERT_EQ(good.status, ZB_OK);
    zb::Header h;
    std::string msg;
    ASSERT_EQ(zb::read_header(good.bytes.data(), good.bytes.size(), h, msg, false), ZB_OK);
    const uint64_t edge_blocks = (data.size() + 127) / 128, stored = h.seg[zb::kSegEdgeBlocks].length / 16;
    ASSERT_GT(stored, 0u);
    ASSERT_LE(stored * 64, edge_blocks) << "the field must take the interval path";

    const size_t hb = h.header_bytes();
    std::vector<float> out(data.size());
    auto cpu_status = [&](std::vector<uint8_t> r) {  // the CPU decoder's answer to the resealed stream
        if (!gput::reseal_parsed(r)) return ZB_ERR_CORRUPT;
        return zb_decompress(r.data(), r.size(), out.data(), out.size() * sizeof(float), ZB_BACKEND_CPU, nullptr);
    };
    const int segs[] = {zb::kSegEdgeFlags, zb::kSegEdgeBlocks, zb::kSegChangeFlags, zb::kSegChangeBlocks,
                        zb::kSegExceptionValues};
    for (const char *form : {"1", "0"}) {
        const zbt::ScopedEnv scoped("ZBOUND_GPU_EXCEPTION_BLOCK", form);
        const std::string what = std::string("ZBOUND_GPU_EXCEPTION_BLOCK=") + form + ": ";
        gput::expect_parity(data, dims, p, what + "few exceptions");
        std::mt19937 rng(seed);
        int rejected = 0;
        for (int t = 0; t < trials; ++t) {
            std::vector<uint8_t> s = good.bytes;
            const int seg = segs[rng() % 5];
            if (h.seg[seg].length == 0) continue;
            std::string where = what + "segment " + std::to_string(seg) + " bytes";
            for (int f = 1 + (int)(rng() % 3); f > 0; --f) {
                const size_t off = rng() % h.seg[seg].length;
                s[hb + h.seg[seg].offset + off] ^= (uint8_t)(1 + rng() % 255);
                where += " " + std::to_string(off);
            }
            expect_same_answer<float>(s, data.size(), where);
            if (::testing::Test::HasFailure()) break;
            rejected += cpu_status(s) != ZB_OK;
        }
        EXPECT_GT(rejected, 0) << what;
        // The edge blocks cleared (no exceptions where the header counts thousands) and the last edge moved past n:
        // errors for both decoders.
        std::vector<uint8_t> s = good.bytes;
        const auto &edge_blocks_seg = h.seg[zb::kSegEdgeBlocks];
        std::fill_n(s.begin() + (std::ptrdiff_t)(hb + edge_blocks_seg.offset), edge_blocks_seg.length, uint8_t{0});
        expect_same_answer<float>(s, data.size(), what + "edge blocks cleared");
        EXPECT_EQ(cpu_status(s), ZB_ERR_CORRUPT);
        s = good.bytes;
        s[hb + edge_blocks_seg.offset + edge_blocks_seg.length - 1] |= 0x80;
        expect_same_answer<float>(s, data.size(), what + "an edge past the end");
        EXPECT_EQ(cpu_status(s), ZB_ERR_CORRUPT);
        if (::testing::Test::HasFailure()) break;
    }
}

// Runs of 1 to 2000 values, isolated outliers and an exception at the last value (an interval open to n).
TEST(GpuCorrupt, FewExceptionsSameAnswerAsCpu) {
    ZB_REQUIRE_GPU();
    const std::vector<size_t> dims{200, 3000};
    auto data = zbt::smooth_field<float>(dims, 0.01, 31, 5.0);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (const auto &run : std::vector<std::pair<size_t, size_t>>{{1000, 1}, {77777, 5}, {300001, 300}, {450000, 2000}})
        for (size_t j = 0; j < run.second; ++j) data[run.first + j] = nan;
    for (size_t i : {5, 123456, 123458, 599000}) data[i] = 1e30f;
    data.back() = nan;
    few_exceptions_same_answer(data, dims, 41, 300);
}

// Exception runs at the edges of the one-block encoder's edge flag groups (a group covers 4096 values, two tiles): a
// run ending at a group's last value (its edge bit is the next group's first, in a group without exceptions), one
// ending at a tile's last value inside a group, one across a group edge, and single outliers on both sides of one.
TEST(GpuCorrupt, ExceptionRunsAtGroupEdgesSameAnswerAsCpu) {
    ZB_REQUIRE_GPU();
    const std::vector<size_t> dims{200, 3000};
    auto data = zbt::smooth_field<float>(dims, 0.01, 33, 5.0);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    constexpr size_t kGroup = 4096;
    for (size_t i = 10 * kGroup - 3; i < 10 * kGroup; ++i) data[i] = nan;
    for (size_t i = 20 * kGroup + 2040; i < 20 * kGroup + 2048; ++i) data[i] = nan;
    for (size_t i = 30 * kGroup - 5; i < 30 * kGroup + 5; ++i) data[i] = nan;
    data[40 * kGroup - 1] = 1e30f;
    data[41 * kGroup] = -1e30f;
    few_exceptions_same_answer(data, dims, 43, 60);
}

// More intervals than the one-block decoder keeps in shared memory (4096): 4200 isolated outliers, every other
// value, so that their edge blocks stay few; the block then searches the intervals in global memory.
TEST(GpuCorrupt, ManyIntervalsSameAnswerAsCpu) {
    ZB_REQUIRE_GPU();
    const std::vector<size_t> dims{400, 3000};
    auto data = zbt::smooth_field<float>(dims, 0.01, 32, 5.0);
    for (size_t j = 0; j < 4200; ++j) data[20000 + 2 * j] = (j % 3) ? 1e30f : -1e30f;
    data[1000] = std::numeric_limits<float>::infinity();
    few_exceptions_same_answer(data, dims, 42, 100);
}

}  // namespace
