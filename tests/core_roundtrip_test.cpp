// Round trips through the public API on the CPU: every shape class, both dtypes, both modes; the bound is checked
// on every value and special values bit for bit; bytes do not depend on the thread count.
#include <gtest/gtest.h>
#include <limits>
#include "test_util.h"
#include "zb_ratio.h"

namespace {

using Dims = std::vector<size_t>;

const std::vector<Dims> kShapes = {
    {1}, {2}, {7}, {2047}, {2048}, {2049}, {65537}, {1, 1000}, {1000, 1}, {999, 1, 1}, {31, 37},
    {127, 129}, {257, 255}, {1, 13, 1, 17}, {5, 7, 11}, {33, 31, 65}, {2, 3, 5, 7}, {4, 3, 17, 19}, {2, 2, 2, 2, 9},
};

template <typename T> void roundtrip_all_shapes(zb_mode mode, double bound, double noise) {
    for (zb_predictor pred : {ZB_PRED_LORENZO, ZB_PRED_INTERP, ZB_PRED_AUTO})
    for (const Dims &dims : kShapes) {
        const auto data = zbt::smooth_field<T>(dims, noise, 17 + (uint32_t)dims.size());
        zb_params p = zb_params_default();
        p.mode = mode;
        p.bound = bound;
        p.predictor = pred;
        p.backend = ZB_BACKEND_CPU;
        const auto s = zbt::compress(data, dims, p);
        ASSERT_EQ(s.status, ZB_OK) << zb_last_error();
        std::vector<T> out(data.size());
        ASSERT_EQ(zbt::decompress(s.bytes, out), ZB_OK) << zb_last_error();
        const double eb = zbt::abs_bound_of(s.bytes);
        if (mode == ZB_MODE_ABS) {
            EXPECT_EQ(eb, bound);
        }
        EXPECT_EQ(zbt::count_violations(data, out, eb), 0u)
            << "shape of " << data.size() << " values, predictor " << (int)pred;
    }
}

TEST(RoundTrip, F32AbsAllShapes) { roundtrip_all_shapes<float>(ZB_MODE_ABS, 1e-3, 0.01); }
TEST(RoundTrip, F64AbsAllShapes) { roundtrip_all_shapes<double>(ZB_MODE_ABS, 1e-6, 1e-4); }
TEST(RoundTrip, F32RelAllBounds) {
    for (double b : {1e-2, 1e-3, 1e-4}) roundtrip_all_shapes<float>(ZB_MODE_REL, b, 0.05);
}
TEST(RoundTrip, F64RelAllBounds) {
    for (double b : {1e-2, 1e-3, 1e-4}) roundtrip_all_shapes<double>(ZB_MODE_REL, b, 0.05);
}

TEST(RoundTrip, RelBoundIsOverFiniteRange) {
    Dims dims{100, 100};
    auto data = zbt::smooth_field<float>(dims, 0.0, 3);
    float lo = data[0], hi = data[0];
    for (float v : data) lo = std::min(lo, v), hi = std::max(hi, v);
    data[10] = NAN;
    data[20] = INFINITY;
    data[30] = -INFINITY;
    zb_params p = zb_params_default();
    p.mode = ZB_MODE_REL;
    p.bound = 1e-3;
    const auto s = zbt::compress(data, dims, p);
    ASSERT_EQ(s.status, ZB_OK);
    EXPECT_DOUBLE_EQ(zbt::abs_bound_of(s.bytes), 1e-3 * ((double)hi - (double)lo));
}

TEST(RoundTrip, SpecialValuesAreBitExact) {
    for (int dt = 0; dt < 2; ++dt) {
        Dims dims{64, 70};
        auto run = [&](auto zero) {
            using T = decltype(zero);
            auto data = zbt::smooth_field<T>(dims, 0.01, 5);
            const T qnan_payload = zbt::smooth_field<T>({1}, 0, 1)[0] * 0 + std::numeric_limits<T>::quiet_NaN();
            data[0] = -std::numeric_limits<T>::quiet_NaN();  // negative NaN (x86's default NaN)
            data[1] = std::numeric_limits<T>::infinity();
            data[2] = -std::numeric_limits<T>::infinity();
            data[3] = (T)-0.0;
            data[4] = (T)0.0;
            data[5] = std::numeric_limits<T>::denorm_min();
            data[6] = std::numeric_limits<T>::max();
            data[7] = std::numeric_limits<T>::lowest();
            data[8] = qnan_payload;
            // A NaN with a payload set through its bits.
            uint64_t u = zbt::bits(std::numeric_limits<T>::quiet_NaN()) | 0x5;
            std::memcpy(&data[9], &u, sizeof(T));
            for (size_t i = 1000; i < 1500; ++i) data[i] = std::numeric_limits<T>::quiet_NaN();  // a NaN region
            zb_params p = zb_params_default();
            p.mode = ZB_MODE_ABS;
            p.bound = 1e-2;
            const auto s = zbt::compress(data, dims, p);
            ASSERT_EQ(s.status, ZB_OK);
            std::vector<T> out(data.size());
            ASSERT_EQ(zbt::decompress(s.bytes, out), ZB_OK) << zb_last_error();
            EXPECT_EQ(zbt::count_violations(data, out, 1e-2), 0u);
            for (int i = 0; i < 10; ++i)  // index 5 (a denormal) is an ordinary value, within the bound above
                if (i != 5) {
                    EXPECT_EQ(zbt::bits(data[i]), zbt::bits(out[i])) << i;
                }
        };
        if (dt == 0) run(0.0f); else run(0.0);
    }
}

TEST(RoundTrip, FillValueIsExactAndDoesNotWidenRel) {
    Dims dims{50, 80};
    auto data = zbt::smooth_field<float>(dims, 0.01, 9);
    const float fill = -9999.9f;
    for (size_t i = 0; i < data.size(); i += 3) data[i] = fill;
    float lo = 1e30f, hi = -1e30f;
    for (float v : data)
        if (v != fill) lo = std::min(lo, v), hi = std::max(hi, v);
    zb_params p = zb_params_default();
    p.mode = ZB_MODE_REL;
    p.bound = 1e-3;
    p.has_fill = 1;
    p.fill_bits = zbt::bits(fill);
    const auto s = zbt::compress(data, dims, p);
    ASSERT_EQ(s.status, ZB_OK);
    const double eb = zbt::abs_bound_of(s.bytes);
    EXPECT_DOUBLE_EQ(eb, 1e-3 * ((double)hi - (double)lo));
    std::vector<float> out(data.size());
    ASSERT_EQ(zbt::decompress(s.bytes, out), ZB_OK);
    EXPECT_EQ(zbt::count_violations(data, out, eb, true, fill), 0u);
}

TEST(RoundTrip, EscapesAndOutliers) {
    // Jumps far beyond the code range force escapes; huge values force lossless outliers.
    Dims dims{3000};
    std::vector<double> data(3000);
    for (size_t i = 0; i < data.size(); ++i) data[i] = (i % 2 ? 1.0 : -1.0) * (double)(i % 97) * 1000.0;
    data[50] = 1e300;
    data[51] = -1e300;
    zb_params p = zb_params_default();
    p.mode = ZB_MODE_ABS;
    p.bound = 1e-3;
    const auto s = zbt::compress(data, dims, p);
    ASSERT_EQ(s.status, ZB_OK);
    zb_stream_info info;
    ASSERT_EQ(zb_stream_info_get(s.bytes.data(), s.bytes.size(), &info), ZB_OK);
    std::vector<double> out(data.size());
    ASSERT_EQ(zbt::decompress(s.bytes, out), ZB_OK);
    EXPECT_EQ(zbt::count_violations(data, out, 1e-3), 0u);
    EXPECT_EQ(out[50], 1e300);
    EXPECT_EQ(out[51], -1e300);
    if (!info.raw) {
        EXPECT_GT(info.escapes, 0u);
        EXPECT_GE(info.exceptions, 2u);
    }
}

// Lorenzo + ratio decodes straight from its 16-bit codes, the escapes ranked by the decoder's count per 1024 codes:
// one stored escape fewer or more than the codes use is a corrupt stream, on one thread and on sixteen, in rank 1
// and rank 3 (a step of 50 at bound 1e-3 is 25000 quantization steps, far past the ratio encoder's radius: a whole
// layer of escapes). Layers of 12000 values decode as bands on two and three threads, so that a band starts inside
// a unit of 1024 codes with escapes before it in that unit.
TEST(RoundTrip, LorenzoRatioEscapeCountMismatchIsCorrupt) {
    for (const Dims &dims : {Dims{30000}, Dims{9, 10, 300}, Dims{6, 40, 300}}) {
        std::vector<float> data = zbt::smooth_field<float>(dims, 0.0, 9, 0.0);
        for (size_t i = data.size() / 2; i < data.size(); ++i) data[i] += 50.0f;
        const auto s = zbt::compress(data, dims, zbt::cpu_params(ZB_MODE_ABS, 1e-3, ZB_PRED_LORENZO, ZB_ENC_RATIO));
        ASSERT_EQ(s.status, ZB_OK);
        zb_stream_info info;
        ASSERT_EQ(zb_stream_info_get(s.bytes.data(), s.bytes.size(), &info), ZB_OK);
        ASSERT_FALSE(info.raw);
        ASSERT_GT(info.escapes, 0u);
        std::vector<float> out(data.size());
        for (int threads : {1, 2, 3, 16}) {
            const zbt::ScopedEnv env("ZBOUND_THREADS", std::to_string(threads).c_str());
            ASSERT_EQ(zbt::decompress(s.bytes, out), ZB_OK);
            EXPECT_EQ(zbt::count_violations(data, out, 1e-3), 0u) << threads << " threads";
        }
        for (int delta : {-1, 1})
            for (int threads : {1, 16}) {
                const zbt::ScopedEnv env("ZBOUND_THREADS", std::to_string(threads).c_str());
                const std::vector<uint8_t> bad = zbt::with_escape_count(s.bytes, 1 + zb::kRatioSegmentCount, delta);
                EXPECT_EQ(zb_decompress(bad.data(), bad.size(), out.data(), out.size() * 4, ZB_BACKEND_CPU, nullptr),
                          ZB_ERR_CORRUPT)
                    << "rank " << dims.size() << ", escapes " << delta << ", " << threads << " threads";
            }
    }
}

TEST(RoundTrip, LosslessAndConstantFields) {
    Dims dims{40, 40};
    auto data = zbt::smooth_field<float>(dims, 0.3, 2);
    zb_params p = zb_params_default();
    p.mode = ZB_MODE_ABS;
    p.bound = 0.0;  // lossless
    auto s = zbt::compress(data, dims, p);
    ASSERT_EQ(s.status, ZB_OK);
    std::vector<float> out(data.size());
    ASSERT_EQ(zbt::decompress(s.bytes, out), ZB_OK);
    for (size_t i = 0; i < data.size(); ++i) ASSERT_EQ(zbt::bits(data[i]), zbt::bits(out[i]));
    // A constant field under REL has range 0: lossless, and tiny.
    std::vector<float> c(100000, 273.15f);
    p.mode = ZB_MODE_REL;
    p.bound = 1e-3;
    s = zbt::compress(c, {100000}, p);
    ASSERT_EQ(s.status, ZB_OK);
    // Codes are all zero: what remains is the block flags, 1 bit per 8 values (docs/FORMAT.md), plus the header.
    EXPECT_LT(s.bytes.size(), c.size() * 4 / 150);
    std::vector<float> cout(c.size());
    ASSERT_EQ(zbt::decompress(s.bytes, cout), ZB_OK);
    EXPECT_EQ(cout, c);
}

TEST(RoundTrip, IncompressibleDataIsStoredRaw) {
    std::mt19937 rng(1);
    std::vector<float> data(10000);
    for (auto &v : data) { uint32_t u = rng(); std::memcpy(&v, &u, 4); }  // random bits, many NaN/Inf
    zb_params p = zb_params_default();
    p.mode = ZB_MODE_ABS;
    p.bound = 1e-30;
    const auto s = zbt::compress(data, {10000}, p);
    ASSERT_EQ(s.status, ZB_OK);
    EXPECT_LE(s.bytes.size(), zb_compress_bound(ZB_F32, data.size()));
    std::vector<float> out(data.size());
    ASSERT_EQ(zbt::decompress(s.bytes, out), ZB_OK);
    for (size_t i = 0; i < data.size(); ++i) ASSERT_EQ(zbt::bits(data[i]), zbt::bits(out[i]));
}

TEST(RoundTrip, BytesIndependentOfThreadCount) {
    Dims dims{77, 45, 31};
    auto data = zbt::smooth_field<float>(dims, 0.2, 21);
    for (size_t i = 0; i < data.size(); i += 101) data[i] = NAN;
    std::vector<uint8_t> first;
    for (int t : {1, 2, 3, 8}) {
        zb_params p = zb_params_default();
        p.threads = t;
        const auto s = zbt::compress(data, dims, p);
        ASSERT_EQ(s.status, ZB_OK);
        if (first.empty()) first = s.bytes;
        else EXPECT_EQ(s.bytes, first) << t << " threads";
    }
}

TEST(Api, RejectsBadArguments) {
    std::vector<float> d(10, 1.f);
    std::vector<uint8_t> buf(1000);
    size_t len;
    const size_t dims[] = {10};
    zb_params p = zb_params_default();
    p.bound = -1;
    EXPECT_EQ(zb_compress(&p, ZB_F32, d.data(), 1, dims, buf.data(), buf.size(), &len, nullptr), ZB_ERR_INVALID_ARG);
    EXPECT_NE(std::string(zb_last_error()).find("bound"), std::string::npos);
    p.bound = NAN;
    EXPECT_EQ(zb_compress(&p, ZB_F32, d.data(), 1, dims, buf.data(), buf.size(), &len, nullptr), ZB_ERR_INVALID_ARG);
    p = zb_params_default();
    EXPECT_EQ(zb_compress(&p, (zb_dtype)7, d.data(), 1, dims, buf.data(), buf.size(), &len, nullptr), ZB_ERR_DTYPE);
    const size_t zero[] = {0};
    EXPECT_EQ(zb_compress(&p, ZB_F32, d.data(), 1, zero, buf.data(), buf.size(), &len, nullptr), ZB_ERR_INVALID_ARG);
    EXPECT_EQ(zb_compress(nullptr, ZB_F32, d.data(), 1, dims, buf.data(), buf.size(), &len, nullptr),
              ZB_ERR_INVALID_ARG);
    p.mode = (zb_mode)3;
    EXPECT_EQ(zb_compress(&p, ZB_F32, d.data(), 1, dims, buf.data(), buf.size(), &len, nullptr), ZB_ERR_INVALID_ARG);
    EXPECT_NE(std::string(zb_last_error()).find("mode"), std::string::npos);
    p = zb_params_default();
    p.encoder = (zb_encoder)7;
    EXPECT_EQ(zb_compress(&p, ZB_F32, d.data(), 1, dims, buf.data(), buf.size(), &len, nullptr), ZB_ERR_INVALID_ARG);
    p = zb_params_default();
    p.predictor = (zb_predictor)-1;
    EXPECT_EQ(zb_compress(&p, ZB_F32, d.data(), 1, dims, buf.data(), buf.size(), &len, nullptr), ZB_ERR_INVALID_ARG);
    EXPECT_STREQ(zb_status_string(ZB_ERR_CORRUPT), "corrupt stream");
}

TEST(Api, GpuBackendWithoutGpuIsAClearError) {
    if (zb_gpu_available()) GTEST_SKIP() << "a GPU is available here; the GPU tests cover this path";
    std::vector<float> d(10, 1.f);
    std::vector<uint8_t> buf(1000);
    size_t len;
    const size_t dims[] = {10};
    zb_params p = zb_params_default();
    p.backend = ZB_BACKEND_GPU;
    EXPECT_EQ(zb_compress(&p, ZB_F32, d.data(), 1, dims, buf.data(), buf.size(), &len, nullptr), ZB_ERR_GPU);
    p.backend = ZB_BACKEND_AUTO;  // AUTO falls back to the CPU
    EXPECT_EQ(zb_compress(&p, ZB_F32, d.data(), 1, dims, buf.data(), buf.size(), &len, nullptr), ZB_OK);
}

}  // namespace
