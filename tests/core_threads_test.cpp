// Output independent of the thread count (DESIGN invariant; issue 7 criterion 4): for every v2 pipeline and the fast
// one, f32 and f64, ranks 1-3, the stream is byte-identical for 1, 2, 3 and 16 compression threads and the decoded
// array bit-identical for 1, 2, 3 and 16 decompression threads (zb_decompress_threads, and ZBOUND_THREADS for
// zb_decompress). The arrays are large enough (several 64K-value chunks, a 1D row longer than two chunks) that the
// parallel paths run, and contain escapes and exceptions (NaN, a fill value), whose positions and values are found
// chunk by chunk.
#include <gtest/gtest.h>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>
#include "test_util.h"

namespace {

using Dims = std::vector<size_t>;

constexpr int kThreadCounts[] = {1, 2, 3, 16};

// ZBOUND_THREADS for the lifetime of the object (what zb_decompress uses, and zb_decompress_threads with 0).
struct ThreadsEnv : zbt::ScopedEnv {
    explicit ThreadsEnv(int t) : zbt::ScopedEnv("ZBOUND_THREADS", std::to_string(t).c_str()) {}
};

// A smooth field with jumps (escapes: deltas beyond the code radius), NaN and a fill value (exceptions).
template <typename T> std::vector<T> field(const Dims &dims, uint32_t seed) {
    std::vector<T> v = zbt::smooth_field<T>(dims, 0.05, seed, 300.0);
    for (size_t i = 0; i < v.size(); i += 7919) v[i] += (T)(2000.0 + (double)(i % 5000));
    for (size_t i = 3; i < v.size(); i += 4093) v[i] = NAN;
    for (size_t i = 11; i < v.size(); i += 10007) v[i] = (T)-9999.0;
    for (size_t i = 20000; i < 20100 && i < v.size(); ++i) v[i] = NAN;   // a run of exceptions
    return v;
}

// Bound 1e-3 in `mode`, the field's fill value, the CPU on `threads` threads.
template <typename T> zb_params cpu_params(zb_mode mode, zb_predictor pred, zb_encoder enc, int threads) {
    zb_params p = zbt::cpu_params(mode, 1e-3, pred, enc, threads);
    p.has_fill = 1;
    p.fill_bits = zbt::bits((T)-9999.0);
    return p;
}

template <typename T> void check_pipeline(zb_predictor pred, zb_encoder enc, const Dims &dims, uint32_t seed) {
    const std::vector<T> data = field<T>(dims, seed);
    const std::string what = std::string(sizeof(T) == 8 ? "f64" : "f32") + " predictor " + std::to_string(pred) +
                             " encoder " + std::to_string(enc) + " rank " + std::to_string(dims.size());
    std::vector<uint8_t> first;
    for (int t : kThreadCounts) {
        const zbt::Stream s = zbt::compress(data, dims, cpu_params<T>(ZB_MODE_ABS, pred, enc, t));
        ASSERT_EQ(s.status, ZB_OK) << what;
        if (first.empty()) first = s.bytes;
        else ASSERT_EQ(s.bytes, first) << what << ", " << t << " compression threads";
    }
    zb_stream_info info;
    ASSERT_EQ(zb_stream_info_get(first.data(), first.size(), &info), ZB_OK);
    EXPECT_GT(info.escapes, 0u) << what;   // the cases cover the parallel escape passes
    EXPECT_GT(info.exceptions, 100u) << what;

    std::vector<T> ref(data.size());
    ASSERT_EQ(zbt::decompress(first, ref, ZB_BACKEND_CPU, 1), ZB_OK) << what;
    EXPECT_EQ(zbt::count_violations(data, ref, 1e-3, true, (T)-9999.0), 0u) << what;
    auto expect_same = [&](const std::vector<T> &out, const std::string &how) {
        size_t differ = 0;
        for (size_t i = 0; i < out.size(); ++i) differ += zbt::bits(out[i]) != zbt::bits(ref[i]);
        EXPECT_EQ(differ, 0u) << what << ", " << how;
    };
    for (int t : kThreadCounts) {   // the call's parameter, and ZBOUND_THREADS for zb_decompress
        std::vector<T> out(data.size());
        ASSERT_EQ(zbt::decompress(first, out, ZB_BACKEND_CPU, t), ZB_OK) << what;
        expect_same(out, std::to_string(t) + " decompression threads");
        ThreadsEnv env(t);
        std::vector<T> by_env(data.size());
        ASSERT_EQ(zbt::decompress(first, by_env), ZB_OK) << what;
        expect_same(by_env, "ZBOUND_THREADS=" + std::to_string(t));
    }
}

// 3D and 2D shapes with several chunks of 64K values; a 1D array whose single row takes the parallel prefix sum.
// The fast decoder's grid (zb_lorenzo_grid.h) decodes k3d and k2d in slabs of layers taken in turn (k3d's planes
// hold too few code tiles for a band per thread), k2d_wide's rows in bands.
const Dims k3d{23, 90, 131}, k2d{500, 777}, k2d_wide{41, 9001}, k1d{400003};

template <typename T> void check_all(uint32_t seed) {
    for (const Dims &d : {k3d, k2d, k2d_wide, k1d}) {
        check_pipeline<T>(ZB_PRED_LORENZO, ZB_ENC_RATIO, d, seed);
        check_pipeline<T>(ZB_PRED_INTERP, ZB_ENC_RATIO, d, seed);
        check_pipeline<T>(ZB_PRED_LORENZO, ZB_ENC_FAST, d, seed);
        check_pipeline<T>(ZB_PRED_INTERP, ZB_ENC_FAST, d, seed);
    }
}

TEST(Threads, SameBytesAndValuesForAnyThreadCountF32) { check_all<float>(31); }
TEST(Threads, SameBytesAndValuesForAnyThreadCountF64) { check_all<double>(32); }

// An 84 MB array: the pipeline choice's sample (n / 32 values) is compressed on 9 threads when 16 are asked for
// (pipeline_choice.cpp), and the decoded values are written with streaming stores (kStreamingBytes). Same bytes and
// values for any thread count.
TEST(Threads, LargeArrayAutoChoiceAndStreamedOutput) {
    const Dims dims{320, 256, 256};
    const std::vector<float> data = field<float>(dims, 33);
    for (zb_predictor pred : {ZB_PRED_AUTO, ZB_PRED_LORENZO}) {
        const zb_encoder enc = pred == ZB_PRED_AUTO ? ZB_ENC_AUTO : ZB_ENC_FAST;
        std::vector<uint8_t> first;
        for (int t : {1, 3, 16}) {
            const zbt::Stream s = zbt::compress(data, dims, cpu_params<float>(ZB_MODE_REL, pred, enc, t));
            ASSERT_EQ(s.status, ZB_OK);
            if (first.empty()) first = s.bytes;
            else ASSERT_EQ(s.bytes, first) << "predictor " << pred << ", " << t << " threads";
        }
        zb_stream_info info;
        ASSERT_EQ(zb_stream_info_get(first.data(), first.size(), &info), ZB_OK);
        std::vector<float> ref(data.size());
        for (int t : {1, 16}) {
            std::vector<float> out(data.size());
            ASSERT_EQ(zbt::decompress(first, out, ZB_BACKEND_CPU, t), ZB_OK);
            if (t == 1) {
                ref = out;
                EXPECT_EQ(zbt::count_violations(data, out, info.abs_bound, true, -9999.0f), 0u) << "predictor " << pred;
                continue;
            }
            size_t differ = 0;
            for (size_t i = 0; i < out.size(); ++i) differ += zbt::bits(out[i]) != zbt::bits(ref[i]);
            EXPECT_EQ(differ, 0u) << "predictor " << pred << ", 16 decompression threads";
        }
    }
}

// zb_decompress_threads refuses a negative count, naming it, and writes nothing.
TEST(Threads, DecompressRefusesNegativeThreads) {
    const Dims dims{64, 64};
    const std::vector<float> data = field<float>(dims, 34);
    const zbt::Stream s = zbt::compress(data, dims, cpu_params<float>(ZB_MODE_ABS, ZB_PRED_AUTO, ZB_ENC_AUTO, 1));
    ASSERT_EQ(s.status, ZB_OK);
    std::vector<float> out(data.size(), 7.0f);
    EXPECT_EQ(zb_decompress_threads(s.bytes.data(), s.bytes.size(), out.data(), out.size() * 4, ZB_BACKEND_CPU, -1,
                                    nullptr),
              ZB_ERR_INVALID_ARG);
    EXPECT_NE(std::string(zb_last_error()).find("threads"), std::string::npos) << zb_last_error();
    for (float v : out) ASSERT_EQ(v, 7.0f);
}

}  // namespace
