// predictor=auto / encoder=auto: the choice is made by sampling, recorded in the stream, and explicit choices are
// kept. The fields below differ in which predictor suits them by a factor of 2 or more (measured with explicit
// choices in the test itself), so a sample-based choice must find the better one.
#include <gtest/gtest.h>
#include <algorithm>
#include <cmath>
#include "test_util.h"

namespace {

zb_stream_info info_of(const std::vector<uint8_t> &s) {
    zb_stream_info info;
    EXPECT_EQ(zb_stream_info_get(s.data(), s.size(), &info), ZB_OK);
    return info;
}

template <typename T>
size_t size_with(const std::vector<T> &data, const std::vector<size_t> &dims, zb_predictor pred, double rel) {
    zb_params p = zb_params_default();
    p.mode = ZB_MODE_REL;
    p.bound = rel;
    p.predictor = pred;
    p.encoder = ZB_ENC_FAST;  // the predictor choice is tested with one encoder
    p.backend = ZB_BACKEND_CPU;
    const auto s = zbt::compress(data, dims, p);
    EXPECT_EQ(s.status, ZB_OK);
    return s.bytes.size();
}

TEST(Auto, PicksTheClearlyBetterPredictor) {
    // A smooth 2D field at a loose bound: interpolation wins. A 3D sum of one random walk per axis at a tight bound:
    // Lorenzo wins (its mixed differences cancel such a field exactly; interpolation along one axis sees the walk).
    std::vector<size_t> d2{512, 512};
    std::vector<float> smooth(512 * 512);
    for (size_t i = 0; i < smooth.size(); ++i)
        smooth[i] = (float)(100 * std::sin((double)(i % 512) / 50) * std::cos((double)(i / 512) / 37));
    const size_t m = 48;
    std::vector<size_t> d3{m, m, m};
    std::vector<double> walk(3 * m);
    uint32_t state = 12345;
    for (size_t i = 0; i < walk.size(); ++i) {
        state = state * 1664525u + 1013904223u;
        walk[i] = (i % m ? walk[i - 1] : 0.0) + (double)(state >> 8) / (1 << 24) - 0.5;
    }
    std::vector<float> separable(m * m * m);
    for (size_t i = 0; i < separable.size(); ++i)
        separable[i] = (float)(walk[i / (m * m)] + walk[m + (i / m) % m] + walk[2 * m + i % m]);
    struct Case {
        const std::vector<float> &data;
        const std::vector<size_t> &dims;
        double rel;
    } cases[] = {{smooth, d2, 1e-2}, {separable, d3, 1e-4}};
    for (const Case &c : cases) {
        const size_t lor = size_with(c.data, c.dims, ZB_PRED_LORENZO, c.rel);
        const size_t itp = size_with(c.data, c.dims, ZB_PRED_INTERP, c.rel);
        ASSERT_TRUE(lor > 2 * itp || itp > 2 * lor) << "test field no longer separates the predictors: lorenzo " << lor << " interp " << itp;
        const auto s = zbt::compress(c.data, c.dims, [&] {
            zb_params p = zb_params_default();
            p.mode = ZB_MODE_REL;
            p.bound = c.rel;
            p.encoder = ZB_ENC_FAST;
            p.backend = ZB_BACKEND_CPU;
            return p;
        }());
        ASSERT_EQ(s.status, ZB_OK);
        EXPECT_EQ(info_of(s.bytes).predictor, lor < itp ? ZB_PRED_LORENZO : ZB_PRED_INTERP);
        std::vector<float> out(c.data.size());
        ASSERT_EQ(zbt::decompress(s.bytes, out), ZB_OK);
        EXPECT_EQ(zbt::count_violations(c.data, out, zbt::abs_bound_of(s.bytes)), 0u);
    }
}

TEST(Auto, EncoderChoiceIsNeverWorseThanBothByMuch) {
    // With both choices on auto, the stream is within 10% of the best explicit pipeline (the choice is made on a
    // sample, so it may miss by a little) and holds the bound.
    std::vector<size_t> dims{256, 300};
    const auto data = zbt::smooth_field<float>(dims, 0.02, 21);
    size_t best = SIZE_MAX;
    for (zb_predictor pred : {ZB_PRED_LORENZO, ZB_PRED_INTERP})
        for (zb_encoder enc : {ZB_ENC_FAST, ZB_ENC_RATIO}) {
            zb_params p = zb_params_default();
            p.predictor = pred;
            p.encoder = enc;
            const auto s = zbt::compress(data, dims, p);
            ASSERT_EQ(s.status, ZB_OK);
            best = std::min(best, s.bytes.size());
        }
    const auto s = zbt::compress(data, dims, zb_params_default());
    ASSERT_EQ(s.status, ZB_OK);
    EXPECT_LE(s.bytes.size(), best + best / 10);
    std::vector<float> out(data.size());
    ASSERT_EQ(zbt::decompress(s.bytes, out), ZB_OK);
    EXPECT_EQ(zbt::count_violations(data, out, zbt::abs_bound_of(s.bytes)), 0u);
}

TEST(Auto, ExplicitChoicesAreKept) {
    std::vector<size_t> dims{300, 200};
    const auto data = zbt::smooth_field<double>(dims, 0.01, 3);
    for (zb_predictor pred : {ZB_PRED_LORENZO, ZB_PRED_INTERP}) {
        zb_params p = zb_params_default();
        p.predictor = pred;
        p.encoder = ZB_ENC_FAST;
        const auto s = zbt::compress(data, dims, p);
        ASSERT_EQ(s.status, ZB_OK);
        EXPECT_EQ(info_of(s.bytes).predictor, pred);
        EXPECT_EQ(info_of(s.bytes).encoder, ZB_ENC_FAST);
    }
}

// With a REL bound the choice computes the array's value range and hands it to the compressor (which then does not
// read the array for it again): the stream of an auto call equals that of the same pipeline named explicitly (which
// computes the range itself), and its absolute bound is rel x (max - min) over the finite non-fill values.
TEST(Auto, RelRangeFromTheChoiceGivesTheSameStream) {
    const std::vector<size_t> dims{120, 90, 40};
    std::vector<float> data = zbt::smooth_field<float>(dims, 0.02, 9, 50.0);
    data[7] = NAN;
    data[11] = -9999.0f;   // the fill value: outside the range
    data[100] = 1e30f;     // an extreme but finite value: inside it
    double lo = INFINITY, hi = -INFINITY;
    for (float v : data)
        if (std::isfinite(v) && v != -9999.0f) lo = std::min(lo, (double)v), hi = std::max(hi, (double)v);
    for (zb_encoder enc : {ZB_ENC_AUTO, ZB_ENC_FAST, ZB_ENC_RATIO}) {
        zb_params p = zb_params_default();
        p.mode = ZB_MODE_REL;
        p.bound = 1e-3;
        p.encoder = enc;
        p.backend = ZB_BACKEND_CPU;
        p.has_fill = 1;
        p.fill_bits = zbt::bits(-9999.0f);
        const auto chosen = zbt::compress(data, dims, p);
        ASSERT_EQ(chosen.status, ZB_OK);
        const zb_stream_info info = info_of(chosen.bytes);
        EXPECT_EQ(info.abs_bound, 1e-3 * (hi - lo)) << "encoder " << enc;
        p.predictor = info.predictor;
        p.encoder = info.encoder;
        const auto named = zbt::compress(data, dims, p);
        ASSERT_EQ(named.status, ZB_OK);
        EXPECT_TRUE(named.bytes == chosen.bytes) << "encoder " << enc;
    }
}

TEST(Auto, TinyArraysAndSpecials) {
    for (size_t n : {1, 2, 9, 100}) {
        std::vector<float> data(n, 1.5f);
        data[0] = NAN;
        const auto s = zbt::compress(data, {n}, zb_params_default());
        ASSERT_EQ(s.status, ZB_OK);
        std::vector<float> out(n);
        ASSERT_EQ(zbt::decompress(s.bytes, out), ZB_OK);
        EXPECT_EQ(zbt::count_violations(data, out, zbt::abs_bound_of(s.bytes)), 0u);
    }
}

}  // namespace
