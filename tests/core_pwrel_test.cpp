// The point-wise relative bound (format v5): the deterministic log2/exp2 against libm, |x - x'| <= pw * |x| on every
// value for every pipeline, f32 and f64, special values, edge sizes, real fields, corrupted streams.
#include <gtest/gtest.h>
#include <cmath>
#include <limits>
#include <random>
#include "test_util.h"
#include "zb_bytes.h"
#include "zb_crc32c.h"
#include "zb_format.h"
#include "zb_log2.h"
#include "zb_pwrel.h"

namespace {

TEST(PwRelLog2, AgreesWithLibmAndIsExactOnPowersOfTwo) {
    std::mt19937_64 rng(7);
    double worst_log = 0, worst_exp = 0;
    for (int i = 0; i < 200000; ++i) {
        uint64_t u = rng() & 0x7FEFFFFFFFFFFFFFull;  // positive finite doubles, subnormals included
        if (!u) continue;
        double x;
        std::memcpy(&x, &u, 8);
        const double ref = std::log2(x);
        worst_log = std::max(worst_log, std::fabs(zb::det_log2(x) - ref) / std::max(1.0, std::fabs(ref)));
        const double y = std::ldexp((double)(rng() >> 11), -53) * 2150.0 - 1100.0;  // [-1100, 1050)
        const double e = std::exp2(y);
        if (e > 0 && std::isfinite(e) && e >= std::numeric_limits<double>::min())
            worst_exp = std::max(worst_exp, std::fabs(zb::det_exp2(y) - e) / e);
    }
    EXPECT_LT(worst_log, 4e-16);
    EXPECT_LT(worst_exp, 1e-15);
    for (int k = -1074; k <= 1023; ++k) {
        EXPECT_EQ(zb::det_log2(std::ldexp(1.0, k)), (double)k) << k;
        EXPECT_EQ(zb::det_exp2((double)k), std::ldexp(1.0, k)) << k;
    }
    EXPECT_EQ(zb::det_exp2(1024.5), std::numeric_limits<double>::infinity());
    EXPECT_EQ(zb::det_exp2(-1101.0), 0.0);
}

TEST(PwRelLog2, LogBoundLeavesRoomForRounding) {
    for (double pw : {1e-1, 1e-2, 1e-3, 1e-5})
        for (bool f64 : {false, true}) {
            const double eb = zb::pwrel_log_bound(pw, 100.0, f64);
            EXPECT_GT(eb, 0.99 * std::log2(1 + pw) - (f64 ? 1e-13 : 2e-5));
            EXPECT_LT(eb, std::log2(1 + pw));
        }
    EXPECT_EQ(zb::pwrel_log_bound(0.0, 1.0, false), 0.0);
    EXPECT_EQ(zb::pwrel_log_bound(1e-9, 100.0, false), 0.0);  // below the rounding of a float log: stored raw
}

zb_params pw_params(double pw, zb_predictor pred = ZB_PRED_AUTO, zb_encoder enc = ZB_ENC_AUTO) {
    return zbt::cpu_params(ZB_MODE_PW_REL, pw, pred, enc);
}

// A smooth field of both signs over many decades, with zeros of both signs, NaN, Inf, subnormals and a fill value.
template <typename T> std::vector<T> hard_field(const std::vector<size_t> &dims, T fill) {
    auto v = zbt::smooth_field<T>(dims, 0.01, 5);
    for (size_t i = 0; i < v.size(); ++i) v[i] = (T)(v[i] * std::pow(10.0, 6.0 * std::sin(0.001 * (double)i)));
    for (size_t i = 0; i < v.size(); i += 97) v[i] = 0;
    for (size_t i = 13; i < v.size(); i += 389) v[i] = -T(0);
    for (size_t i = 500; i < v.size() && i < 900; ++i) v[i] = 0;  // a dry region
    v[7] = std::numeric_limits<T>::quiet_NaN();
    v[8] = std::numeric_limits<T>::infinity();
    v[9] = -std::numeric_limits<T>::infinity();
    v[10] = std::numeric_limits<T>::denorm_min();
    v[11] = -std::numeric_limits<T>::denorm_min() * 3;
    v[12] = std::numeric_limits<T>::max();
    v[14] = std::numeric_limits<T>::min();
    for (size_t i = 2000; i < v.size() && i < 2100; ++i) v[i] = fill;
    return v;
}

template <typename T> void every_pipeline_keeps_the_bound() {
    const std::vector<size_t> dims{24, 40, 36};
    const T fill = (T)-9999.5;
    const auto v = hard_field<T>(dims, fill);
    for (double pw : {0.5, 1e-1, 1e-2, 1e-3, 1e-4})
        for (zb_predictor pred : {ZB_PRED_AUTO, ZB_PRED_LORENZO, ZB_PRED_INTERP})
            for (zb_encoder enc : {ZB_ENC_AUTO, ZB_ENC_FAST, ZB_ENC_RATIO}) {
                zb_params p = pw_params(pw, pred, enc);
                p.has_fill = 1;
                p.fill_bits = zbt::bits(fill);
                const auto s = zbt::compress(v, dims, p);
                ASSERT_EQ(s.status, ZB_OK) << zb_last_error();
                zb_stream_info info;
                ASSERT_EQ(zb_stream_info_get(s.bytes.data(), s.bytes.size(), &info), ZB_OK);
                EXPECT_EQ(info.mode, ZB_MODE_PW_REL);
                EXPECT_EQ(info.bound, pw);
                if (!info.raw) {
                    EXPECT_EQ(info.format_version, 5);
                    EXPECT_GT(info.abs_bound, 0.0);
                    if (pred != ZB_PRED_AUTO) {
                        EXPECT_EQ(info.predictor, pred);
                    }
                    if (enc != ZB_ENC_AUTO) {
                        EXPECT_EQ(info.encoder, enc);
                    }
                }
                if (pw >= 1e-3) {
                    EXPECT_EQ(info.raw, 0) << "pw " << pw;
                }
                std::vector<T> out(v.size());
                ASSERT_EQ(zbt::decompress(s.bytes, out), ZB_OK) << zb_last_error();
                EXPECT_EQ(zbt::count_pw_violations(v, out, pw, true, fill), 0u)
                    << "pw " << pw << " predictor " << pred << " encoder " << enc;
            }
}
TEST(PwRel, EveryPipelineKeepsTheBoundF32) { every_pipeline_keeps_the_bound<float>(); }
TEST(PwRel, EveryPipelineKeepsTheBoundF64) { every_pipeline_keeps_the_bound<double>(); }

TEST(PwRel, CompressesWellAndBeatsTheAbsoluteBoundOnWideRanges) {
    // Positive values over 12 decades: at rel 1e-3 of the range the small values would all be lost; pw_rel keeps
    // three digits everywhere and still compresses.
    const std::vector<size_t> dims{64, 64, 64};
    auto v = zbt::smooth_field<float>(dims, 0.0, 3);
    for (size_t i = 0; i < v.size(); ++i) v[i] = (float)std::pow(10.0, 0.6 * v[i]);
    const auto s = zbt::compress(v, dims, pw_params(1e-3));
    ASSERT_EQ(s.status, ZB_OK);
    EXPECT_LT(s.bytes.size() * 4, v.size() * 4) << "CR below 4 on a smooth field";
    std::vector<float> out(v.size());
    ASSERT_EQ(zbt::decompress(s.bytes, out), ZB_OK);
    EXPECT_EQ(zbt::count_pw_violations(v, out, 1e-3), 0u);
}

TEST(PwRel, EdgeSizesAndDegenerateFields) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const std::vector<std::vector<float>> cases = {
        {1.5f}, {-0.0f}, {0, 0, 0, 0, 0, 0, 0}, {nan, nan, 1, -1, 0, -0.0f, 3},
        std::vector<float>(1000, 0.0f), std::vector<float>(1000, -2.5f), std::vector<float>(5000, nan)};
    for (double pw : {0.0, 1e-12, 1e-3, 2.0, 1e300})
        for (const auto &v : cases) {
            const std::vector<size_t> dims{v.size()};
            const auto s = zbt::compress(v, dims, pw_params(pw));
            ASSERT_EQ(s.status, ZB_OK) << zb_last_error();
            std::vector<float> out(v.size());
            ASSERT_EQ(zbt::decompress(s.bytes, out), ZB_OK) << zb_last_error();
            EXPECT_EQ(zbt::count_pw_violations(v, out, pw), 0u) << "pw " << pw << " n " << v.size();
            if (pw == 0) {  // lossless
                for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(zbt::bits(v[i]), zbt::bits(out[i]));
            }
        }
}

// Found by fuzz/fuzz_filter.cpp: for a subnormal x, pw * |x| rounded to the subnormal grid accepted a reconstruction
// one grid step away (1.6 % off at pw 1 %). The writer's check is exact now.
template <typename T> void subnormals_keep_the_bound() {
    std::mt19937 rng(11);
    std::vector<T> v(3000);
    for (size_t i = 0; i < v.size(); ++i)
        v[i] = std::numeric_limits<T>::denorm_min() * (T)(1 + rng() % 4000) * (i % 3 ? 1 : -1);
    for (size_t i = 1000; i < 2000; ++i) v[i] = (T)(1e-30 * std::sin(0.01 * (double)i));  // normal and tiny
    const std::vector<size_t> dims{v.size()};
    for (double pw : {1e-2, 0.3, 1e-4})
        for (zb_predictor pred : {ZB_PRED_LORENZO, ZB_PRED_INTERP}) {
            const auto s = zbt::compress(v, dims, pw_params(pw, pred, ZB_ENC_RATIO));
            ASSERT_EQ(s.status, ZB_OK);
            std::vector<T> out(v.size());
            ASSERT_EQ(zbt::decompress(s.bytes, out), ZB_OK);
            EXPECT_EQ(zbt::count_pw_violations(v, out, pw), 0u) << "pw " << pw << " predictor " << pred;
        }
}
TEST(PwRel, SubnormalsKeepTheBoundF32) { subnormals_keep_the_bound<float>(); }
TEST(PwRel, SubnormalsKeepTheBoundF64) { subnormals_keep_the_bound<double>(); }

TEST(PwRel, BytesDoNotDependOnTheThreadCount) {
    const std::vector<size_t> dims{40, 50, 60};
    const auto v = hard_field<float>(dims, -1.f);
    zb_params p = pw_params(1e-2);
    p.threads = 1;
    const auto a = zbt::compress(v, dims, p);
    p.threads = 2;
    const auto b = zbt::compress(v, dims, p);
    p.threads = 5;
    const auto c = zbt::compress(v, dims, p);
    ASSERT_EQ(a.status, ZB_OK);
    EXPECT_EQ(a.bytes, b.bytes);
    EXPECT_EQ(a.bytes, c.bytes);
}

TEST(PwRel, BufferTooSmallAndDeviceBuffersAreClearErrors) {
    const std::vector<size_t> dims{4096};
    const auto v = zbt::smooth_field<float>(dims, 0.0, 1, 100.0);
    const zb_params p = pw_params(1e-3);
    const auto s = zbt::compress(v, dims, p);
    ASSERT_EQ(s.status, ZB_OK);
    std::vector<uint8_t> small(s.bytes.size() - 1);
    size_t len = 0;
    EXPECT_EQ(zb_compress(&p, ZB_F32, v.data(), 1, dims.data(), small.data(), small.size(), &len, nullptr),
              ZB_ERR_BUFFER_TOO_SMALL);
    for (size_t cap : {(size_t)0, (size_t)100, (size_t)300}) {
        std::vector<uint8_t> tiny(cap + 1);
        EXPECT_EQ(zb_compress(&p, ZB_F32, v.data(), 1, dims.data(), tiny.data(), cap, &len, nullptr),
                  ZB_ERR_BUFFER_TOO_SMALL) << cap;
    }
    // The device API takes pw_rel too (gpu_device_api_test.cpp); without a usable GPU it is a clean error.
    if (!zb_gpu_available()) {
        EXPECT_NE(zb_compress_device(&p, ZB_F32, v.data(), 1, dims.data(), small.data(), small.size(), &len, nullptr,
                                     nullptr), ZB_OK);
    }
}

TEST(PwRel, CorruptAndTruncatedStreamsAreErrors) {
    const std::vector<size_t> dims{30, 70};
    const auto v = hard_field<float>(dims, 7.f);
    zb_params p = pw_params(1e-2, ZB_PRED_INTERP, ZB_ENC_RATIO);
    const auto s = zbt::compress(v, dims, p);
    ASSERT_EQ(s.status, ZB_OK);
    ASSERT_EQ(zb::get_u16(s.bytes.data() + 4), 5);
    std::vector<float> out(v.size());
    // Any flipped bit: the checksums catch it.
    for (size_t bit = 0; bit < s.bytes.size() * 8; bit += 7) {
        auto t = s.bytes;
        t[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        EXPECT_NE(zbt::decompress(t, out), ZB_OK) << "bit " << bit;
    }
    for (size_t len : {(size_t)10, (size_t)200, s.bytes.size() / 2, s.bytes.size() - 1}) {
        auto t = s.bytes;
        t.resize(len);
        EXPECT_NE(zbt::decompress(t, out), ZB_OK) << "length " << len;
    }
    // The container's fields and the inner stream's bytes changed with the checksums fixed up: the structure checks
    // must catch what they can; the rest decodes to some values, never a crash (ASan runs this test too).
    for (size_t off : {(size_t)10, (size_t)11, (size_t)12, (size_t)13, (size_t)72, (size_t)80}) {
        auto t = s.bytes;
        t[off] ^= 0x01;
        zbt::reseal(t);
        EXPECT_NE(zbt::decompress(t, out), ZB_OK) << "header byte " << off;
    }
    const size_t hb = zb::kHeaderFixedBytes + 16 * zb::kPwRelSegmentCount + 8;
    for (size_t off = hb; off < hb + 8; ++off) {  // the parameters
        auto t = s.bytes;
        t[off] ^= 0x40;
        zbt::reseal(t);
        EXPECT_EQ(zbt::decompress(t, out), ZB_ERR_CORRUPT) << "parameter byte " << off;
    }
    for (size_t off : {(size_t)4, (size_t)8, (size_t)9, (size_t)10, (size_t)11, (size_t)12, (size_t)32}) {
        auto t = s.bytes;  // the inner header (its own checksums fixed too): it no longer matches the container
        zbt::flip_inner_header_byte(t, hb, off);
        EXPECT_EQ(zbt::decompress(t, out), ZB_ERR_CORRUPT) << "inner header byte " << off;
    }
    std::mt19937 rng(5);
    for (int k = 0; k < 2000; ++k) {
        auto t = s.bytes;
        t[hb + rng() % (t.size() - hb)] ^= (uint8_t)(1u << (rng() % 8));
        zbt::reseal(t);
        (void)zbt::decompress(t, out);
    }
}

TEST(PwRel, ReadersOfOlderVersionsCannotMistakeTheContainer) {
    // A v5 stream labelled as version 4 (checksums fixed): mode and version disagree.
    const std::vector<size_t> dims{1000};
    const auto v = zbt::smooth_field<float>(dims, 0.0, 2, 50.0);
    auto s = zbt::compress(v, dims, pw_params(1e-2)).bytes;
    ASSERT_EQ(zb::get_u16(s.data() + 4), 5);
    zb::put_u16(s.data() + 4, 4);
    zbt::reseal(s);
    std::vector<float> out(v.size());
    EXPECT_EQ(zbt::decompress(s, out), ZB_ERR_CORRUPT);
}

TEST(PwRel, RealFieldsKeepTheBoundOnEveryValue) {
    std::vector<float> all;
    std::vector<size_t> dims;
    const std::string path = std::string(ZBOUND_SHARED_DATA) + "/nasa_cfd_combq.bin";
    ASSERT_TRUE(zbt::read_plot3d(path, all, dims)) << "cannot read " << path;
    const size_t per_var = all.size() / 5;
    dims.erase(dims.begin());  // one variable at a time
    for (int var = 0; var < 5; ++var) {  // density, three momenta of both signs, energy
        std::vector<float> v(all.begin() + (long)(var * per_var), all.begin() + (long)((var + 1) * per_var));
        std::vector<double> vd(v.begin(), v.end());
        for (double pw : {1e-2, 1e-3, 1e-4}) {
            const auto s = zbt::compress(v, dims, pw_params(pw));
            ASSERT_EQ(s.status, ZB_OK);
            std::vector<float> out(v.size());
            ASSERT_EQ(zbt::decompress(s.bytes, out), ZB_OK);
            EXPECT_EQ(zbt::count_pw_violations(v, out, pw), 0u) << "var " << var << " pw " << pw;
            EXPECT_LT(s.bytes.size(), v.size() * 4) << "var " << var << " pw " << pw;
            const auto sd = zbt::compress(vd, dims, pw_params(pw));
            ASSERT_EQ(sd.status, ZB_OK);
            std::vector<double> outd(vd.size());
            ASSERT_EQ(zbt::decompress(sd.bytes, outd), ZB_OK);
            EXPECT_EQ(zbt::count_pw_violations(vd, outd, pw), 0u) << "f64 var " << var << " pw " << pw;
        }
    }
}

}  // namespace
