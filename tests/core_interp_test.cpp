// The interp predictor (format v2) on the CPU: round trips over shape classes and dtypes with the bound on every
// value, special values exact, bytes independent of the thread count, v2 header fields, corruption.
#include <gtest/gtest.h>
#include <limits>
#include <random>
#include "test_util.h"
#include "zb_bytes.h"
#include "zb_codes16.h"
#include "zb_cpu.h"
#include "zb_crc32c.h"
#include "zb_format.h"
#include "zb_interp.h"
#include "zb_interp_cpu.h"
#include "zb_quant.h"
#include "zb_ratio.h"

namespace {

using Dims = std::vector<size_t>;

zb_params interp_params(zb_mode mode, double bound, zb_encoder enc = ZB_ENC_FAST) {
    return zbt::cpu_params(mode, bound, ZB_PRED_INTERP, enc);
}

// Every v2 combination: interp with both encoders, Lorenzo with the ratio encoder.
struct Pipeline {
    zb_predictor pred;
    zb_encoder enc;
};
const Pipeline kV2Pipelines[] = {
    {ZB_PRED_INTERP, ZB_ENC_FAST}, {ZB_PRED_INTERP, ZB_ENC_RATIO}, {ZB_PRED_LORENZO, ZB_ENC_RATIO}};

template <typename T> void roundtrip(const Dims &dims, zb_mode mode, double bound, double noise, uint32_t seed) {
    const auto data = zbt::smooth_field<T>(dims, noise, seed);
    for (const Pipeline &pl : kV2Pipelines) {
        zb_params p = interp_params(mode, bound, pl.enc);
        p.predictor = pl.pred;
        const auto s = zbt::compress(data, dims, p);
        ASSERT_EQ(s.status, ZB_OK) << zb_last_error();
        std::vector<T> out(data.size());
        ASSERT_EQ(zbt::decompress(s.bytes, out), ZB_OK) << zb_last_error();
        EXPECT_EQ(zbt::count_violations(data, out, zbt::abs_bound_of(s.bytes)), 0u)
            << data.size() << " values, predictor " << (int)pl.pred << " encoder " << (int)pl.enc;
    }
}

const std::vector<Dims> kShapes = {{1},       {7},          {8},         {9},           {17},      {2049},
                                   {65537},   {1, 1000},    {1000, 1},   {31, 37},      {8, 8},    {9, 9},
                                   {127, 129}, {5, 7, 11},  {9, 9, 9},   {33, 31, 65},  {2, 3, 5, 7}, {4, 3, 17, 19}};

TEST(Interp, F32AbsAndRelAllShapes) {
    for (const Dims &d : kShapes) {
        roundtrip<float>(d, ZB_MODE_ABS, 1e-3, 0.01, 3);
        for (double rel : {1e-2, 1e-3, 1e-4}) roundtrip<float>(d, ZB_MODE_REL, rel, 0.05, 4);
    }
}

TEST(Interp, F64AbsAndRelAllShapes) {
    for (const Dims &d : kShapes) {
        roundtrip<double>(d, ZB_MODE_ABS, 1e-7, 1e-5, 5);
        for (double rel : {1e-2, 1e-4}) roundtrip<double>(d, ZB_MODE_REL, rel, 0.05, 6);
    }
}

TEST(Interp, SpecialValuesAndFillExact) {
    Dims dims{40, 50, 30};
    auto data = zbt::smooth_field<float>(dims, 0.01, 8);
    const float fill = 1e36f;
    for (size_t i = 0; i < data.size(); i += 97) data[i] = NAN;
    for (size_t i = 3; i < data.size(); i += 131) data[i] = fill;
    for (size_t i = 20000; i < 26000; ++i) data[i] = -INFINITY;  // a region (covers anchors and every level)
    data[1] = -0.0f;
    data[5000] = 3e38f;  // beyond any code range
    for (const Pipeline &pl : kV2Pipelines) {
        zb_params p = interp_params(ZB_MODE_REL, 1e-3, pl.enc);
        p.predictor = pl.pred;
        p.has_fill = 1;
        p.fill_bits = zbt::bits(fill);
        const auto s = zbt::compress(data, dims, p);
        ASSERT_EQ(s.status, ZB_OK);
        std::vector<float> out(data.size());
        ASSERT_EQ(zbt::decompress(s.bytes, out), ZB_OK) << zb_last_error();
        EXPECT_EQ(zbt::count_violations(data, out, zbt::abs_bound_of(s.bytes), true, fill), 0u);
        EXPECT_EQ(zbt::bits(out[5000]), zbt::bits(data[5000]));
    }
}

TEST(Interp, NegativeZeroIsBitExactEvenWhenPredictedNegative) {
    // A prediction of -1e-7 for a -0.0: the reconstruction -1e-7 is within the bound but not bit for bit, so the
    // value must be an exception (it used to be accepted).
    const double eb = 1e-3, twoe = 2 * eb;
    int32_t q = 99;
    float r = 1.0f;
    EXPECT_FALSE(zb::quantize_residual<float>(-0.0f, -1e-7, twoe, 1 / twoe, eb, 512, 0, 0, q, r));
    EXPECT_EQ(zbt::bits(r), zbt::bits(-0.0f));
    EXPECT_EQ(q, 0);
    double rd = 1.0;
    EXPECT_FALSE(zb::quantize_residual<double>(-0.0, -1e-9, twoe, 1 / twoe, eb, 512, 0, 0, q, rd));
    EXPECT_EQ(zbt::bits(rd), zbt::bits(-0.0));
    EXPECT_TRUE(zb::quantize_residual<float>(0.0f, 1e-7, twoe, 1 / twoe, eb, 512, 0, 0, q, r));  // +0.0 is fine
    // And through every v2 pipeline: -0.0 among tiny negatives comes back exactly.
    for (const Pipeline &pl : kV2Pipelines) {
        std::vector<float> data(4096, -1e-7f);
        for (size_t i = 1; i < data.size(); i += 2) data[i] = -0.0f;
        zb_params p = interp_params(ZB_MODE_ABS, 1e-3, pl.enc);
        p.predictor = pl.pred;
        const auto s = zbt::compress(data, {data.size()}, p);
        ASSERT_EQ(s.status, ZB_OK);
        std::vector<float> out(data.size());
        ASSERT_EQ(zbt::decompress(s.bytes, out), ZB_OK);
        for (size_t i = 1; i < data.size(); i += 2) ASSERT_EQ(zbt::bits(out[i]), zbt::bits(-0.0f)) << i;
    }
}

TEST(Interp, LosslessAndConstant) {
    Dims dims{30, 40};
    auto data = zbt::smooth_field<double>(dims, 0.5, 9);
    auto s = zbt::compress(data, dims, interp_params(ZB_MODE_ABS, 0.0));
    ASSERT_EQ(s.status, ZB_OK);
    std::vector<double> out(data.size());
    ASSERT_EQ(zbt::decompress(s.bytes, out), ZB_OK);
    for (size_t i = 0; i < data.size(); ++i) ASSERT_EQ(zbt::bits(data[i]), zbt::bits(out[i]));
    std::vector<float> c(50000, -3.5f);
    s = zbt::compress(c, {50000}, interp_params(ZB_MODE_REL, 1e-3));
    ASSERT_EQ(s.status, ZB_OK);
    std::vector<float> cout(c.size());
    ASSERT_EQ(zbt::decompress(s.bytes, cout), ZB_OK);
    EXPECT_EQ(cout, c);
}

TEST(Interp, StreamIsV3WithInterpParameters) {
    Dims dims{64, 64};
    const auto data = zbt::smooth_field<float>(dims, 0.01, 10);
    const auto s = zbt::compress(data, dims, interp_params(ZB_MODE_ABS, 1e-2));
    ASSERT_EQ(s.status, ZB_OK);
    zb_stream_info info;
    ASSERT_EQ(zb_stream_info_get(s.bytes.data(), s.bytes.size(), &info), ZB_OK);
    EXPECT_EQ(info.format_version, 3);   // interp codes in pass order (docs/FORMAT.md section 10)
    EXPECT_EQ(info.predictor, ZB_PRED_INTERP);
    EXPECT_EQ(info.encoder, ZB_ENC_FAST);
    EXPECT_EQ(info.raw, 0);
    // Segment 0: radius, reserved, then the interp parameters: anchor stride 2^3, 3 levels, a permutation of the
    // dims, level bounds eb / alpha^l with level 1 equal to the bound.
    const uint8_t *params = s.bytes.data() + zb::kHeaderFixedBytes + 16 * zb::get_u16(s.bytes.data() + 14) + 8;
    EXPECT_EQ(zb::get_u32(params), 32768u);
    EXPECT_EQ(zb::get_u32(params + 4), 0u);
    EXPECT_EQ(params[8], 3);
    EXPECT_EQ(params[9], 3);
    EXPECT_EQ(params[10] + params[11] + params[12], 3);
    const double alpha = zb::get_f64(params + 16), e1 = zb::get_f64(params + 24), e2 = zb::get_f64(params + 32);
    EXPECT_GE(alpha, 1.0);
    EXPECT_LE(alpha, 2.0);
    EXPECT_EQ(e1, 1e-2);
    EXPECT_DOUBLE_EQ(e2, 1e-2 / alpha);
}

// Coded size of x (ratio encoder, with exceptions and escapes at their stored size) with the predictor parameters ip.
template <typename T>
size_t coded_size(const std::vector<T> &x, const zb::Shape &s, const zb::InterpParams &ip, double eb) {
    std::vector<uint16_t> c16(s.n);
    std::vector<int32_t> escapes;
    std::vector<uint8_t> exc(s.n);
    std::vector<T> rec(s.n);
    zb::interp_encode_cpu(x.data(), s, ip, zb::InterpCodeOrder::kPass, eb, zb::kEncRatio, 0, 0, c16.data(),
                          exc.data(), rec.data(), escapes, 1);
    std::vector<std::string> segs;
    std::string msg;
    EXPECT_EQ(zb::ratio_encode_cpu(c16.data(), s.n, 2 * zb::kRatioRadius, 1, segs, nullptr, msg), ZB_OK) << msg;
    size_t bytes = escapes.size() * 4;
    for (uint8_t e : exc) bytes += e ? sizeof(T) : 0;
    for (const std::string &g : segs) bytes += g.size();
    return bytes;
}

// alpha is chosen by compressing samples (interp_tune_alpha): on whole arrays the tuned parameters must not lose to
// Eq. 2's default by more than the sample's noise, must win clearly somewhere (the reason for tuning), and the
// stream must carry exactly what interp_tune chose.
TEST(Interp, TunedAlphaBeatsTheDefaultOnWholeArrays) {
    size_t cases = 0, clear_wins = 0;
    for (const Dims &dims : std::vector<Dims>{{512, 512}, {64, 96, 80}, {300000}})
        for (double rel : {1e-2, 1e-3}) {
            const auto x = zbt::smooth_field<float>(dims, 0.01, 5);
            zb::Shape s;
            ASSERT_TRUE(zb::fold_shape((int)dims.size(), dims.data(), s));
            float lo = x[0], hi = x[0];
            for (float v : x) lo = std::min(lo, v), hi = std::max(hi, v);
            const double eb = rel * ((double)hi - (double)lo);
            const zb::InterpParams tuned = zb::interp_tune(x.data(), s, eb, (double)hi - lo, 0, 0, zb::kEncRatio);
            zb::InterpParams def = tuned;
            zb::interp_set_alpha(def, eb, zb::interp_alpha(eb / ((double)hi - lo)));
            const size_t t = coded_size(x, s, tuned, eb), d = coded_size(x, s, def, eb);
            EXPECT_LE(t, d + d / 100) << dims.size() << "D rel " << rel << ": tuned alpha " << tuned.alpha
                                      << " loses to the default " << def.alpha;
            ++cases;
            clear_wins += t < d - d / 20;
            // The stream stores the tuned parameters.
            zb_params p = interp_params(ZB_MODE_ABS, eb, ZB_ENC_RATIO);
            const auto st = zbt::compress(x, dims, p);
            ASSERT_EQ(st.status, ZB_OK);
            const uint8_t *params =
                st.bytes.data() + zb::kHeaderFixedBytes + 16 * zb::get_u16(st.bytes.data() + 14) + 8;
            EXPECT_EQ(zb::get_f64(params + 16), tuned.alpha);
            for (int l = 0; l <= zb::kInterpLevels; ++l) EXPECT_EQ(zb::get_f64(params + 24 + 8 * l), tuned.level_eb[l]);
        }
    EXPECT_GT(clear_wins, 0u) << "in " << cases << " cases the tuned alpha never won by 5 %";
}

// A land mask of NaN: a spline that reads a NaN neighbour is not finite, and the prediction falls back to a finite
// neighbour (zb_interp.h finite_prediction), so only the NaN themselves are exceptions, not every value on a coast.
TEST(Interp, NaNNeighboursDoNotMakeExceptions) {
    for (zb_encoder enc : {ZB_ENC_FAST, ZB_ENC_RATIO}) {
        Dims dims{200, 300};
        auto data = zbt::smooth_field<float>(dims, 0.01, 12);
        size_t nans = 0;
        for (size_t i = 0; i < data.size(); ++i) {
            const size_t y = i / 300, x = i % 300;
            const bool land = (x - 150) * (x - 150) + (y - 100) * (y - 100) < 60 * 60 || (x % 97 == 5 && y % 41 < 30);
            if (land) data[i] = std::numeric_limits<float>::quiet_NaN(), ++nans;
        }
        const auto s = zbt::compress(data, dims, interp_params(ZB_MODE_REL, 1e-3, enc));
        ASSERT_EQ(s.status, ZB_OK);
        zb_stream_info info;
        ASSERT_EQ(zb_stream_info_get(s.bytes.data(), s.bytes.size(), &info), ZB_OK);
        EXPECT_EQ(info.predictor, ZB_PRED_INTERP);
        EXPECT_EQ(info.exceptions, nans) << "values next to NaN became exceptions";
        std::vector<float> out(data.size());
        ASSERT_EQ(zbt::decompress(s.bytes, out), ZB_OK);
        EXPECT_EQ(zbt::count_violations(data, out, zbt::abs_bound_of(s.bytes)), 0u);
    }
}

TEST(Interp, RatioEncoderStreamsRecordRadius512) {
    Dims dims{64, 64};
    const auto data = zbt::smooth_field<float>(dims, 0.01, 10);
    for (zb_predictor pred : {ZB_PRED_INTERP, ZB_PRED_LORENZO}) {
        zb_params p = interp_params(ZB_MODE_ABS, 1e-2, ZB_ENC_RATIO);
        p.predictor = pred;
        const auto s = zbt::compress(data, dims, p);
        ASSERT_EQ(s.status, ZB_OK);
        zb_stream_info info;
        ASSERT_EQ(zb_stream_info_get(s.bytes.data(), s.bytes.size(), &info), ZB_OK);
        EXPECT_EQ(info.format_version, pred == ZB_PRED_INTERP ? 3 : 2);
        EXPECT_EQ(info.predictor, pred);
        EXPECT_EQ(info.encoder, ZB_ENC_RATIO);
        const uint8_t *params = s.bytes.data() + zb::kHeaderFixedBytes + 16 * zb::get_u16(s.bytes.data() + 14) + 8;
        EXPECT_EQ(zb::get_u32(params), 512u);
    }
}

TEST(Interp, AlphaFollowsEquation2) {
    EXPECT_EQ(zb::interp_alpha(1e-6), 1.0);
    EXPECT_DOUBLE_EQ(zb::interp_alpha(1e-4), 1.25);
    EXPECT_DOUBLE_EQ(zb::interp_alpha(1e-3), 1.5);
    EXPECT_DOUBLE_EQ(zb::interp_alpha(1e-2), 1.75);
    EXPECT_DOUBLE_EQ(zb::interp_alpha(5.5e-3), 1.5 + 0.25 * (4.5e-3 / 9e-3));
    EXPECT_EQ(zb::interp_alpha(0.5), 2.0);
}

TEST(Interp, BytesIndependentOfThreadCount) {
    Dims dims{70, 90, 40};
    auto data = zbt::smooth_field<float>(dims, 0.2, 11);
    for (size_t i = 0; i < data.size(); i += 101) data[i] = NAN;
    std::vector<uint8_t> first;
    for (int t : {1, 2, 5}) {
        zb_params p = interp_params(ZB_MODE_REL, 1e-3, ZB_ENC_RATIO);
        p.threads = t;
        const auto s = zbt::compress(data, dims, p);
        ASSERT_EQ(s.status, ZB_OK);
        if (first.empty()) first = s.bytes;
        else EXPECT_EQ(s.bytes, first) << t << " threads";
    }
}

TEST(Interp, CorruptionIsAnErrorNeverACrash) {
    Dims dims{37, 41};
    auto data = zbt::smooth_field<float>(dims, 0.3, 12);
    data[100] = NAN;
    data[200] = 1e30f;
    for (zb_encoder enc : {ZB_ENC_FAST, ZB_ENC_RATIO}) {
    const auto s = zbt::compress(data, dims, interp_params(ZB_MODE_ABS, 1e-3, enc));
    ASSERT_EQ(s.status, ZB_OK);
    std::vector<float> out(data.size());
    for (size_t len = 0; len < s.bytes.size(); len += 7) {
        std::vector<uint8_t> t(s.bytes.begin(), s.bytes.begin() + (long)len);
        ASSERT_NE(zb_decompress(t.data(), t.size(), out.data(), out.size() * 4, ZB_BACKEND_CPU, nullptr), ZB_OK);
    }
    // Payload damage with valid checksums: any status, no crash (ASan/UBSan run this too).
    const int nseg = zb::get_u16(s.bytes.data() + 14);
    const size_t hb = zb::kHeaderFixedBytes + 16 * (size_t)nseg + 8;
    std::mt19937 rng(13);
    for (int k = 0; k < 2000; ++k) {
        auto t = s.bytes;
        t[hb + rng() % (t.size() - hb)] ^= (uint8_t)(1u << (rng() % 8));
        zb::put_u32(t.data() + hb - 8, zb::payload_checksum(t.data() + hb, t.size() - hb, 1));
        zb::put_u32(t.data() + hb - 4, zb::crc32c(t.data(), hb - 4));
        (void)zbt::decompress(t, out);
    }
    }
}

// interp_decode_cpu validates the 16-bit codes it is handed: an escaped code (ratio: 0, or a symbol outside the
// alphabet [1, 2R); fast: 0x8000) anywhere but at an anchor is a corrupt stream, even when the escape list has a
// value for it; in both code orders and for both encoders' forms.
TEST(Interp, DecoderRejectsStrayEscapes) {
    const Dims dims{19, 23, 29};
    const auto x = zbt::smooth_field<float>(dims, 0.1, 3);
    zb::Shape s;
    ASSERT_TRUE(zb::fold_shape((int)dims.size(), dims.data(), s));
    const double eb = 1e-4;   // small: some anchor deltas exceed the ratio radius and are escaped
    for (uint8_t encoder : {zb::kEncRatio, zb::kEncFast}) {
        const zb::InterpParams ip = zb::interp_tune(x.data(), s, eb, 2.0, 0, 0, encoder);
        const bool ratio = encoder == zb::kEncRatio;
        for (zb::InterpCodeOrder order : {zb::InterpCodeOrder::kPass, zb::InterpCodeOrder::kIndex}) {
            SCOPED_TRACE(std::string(ratio ? "ratio" : "fast") +
                         (order == zb::InterpCodeOrder::kPass ? " pass order" : " index order"));
            std::vector<uint16_t> codes(s.n);
            std::vector<int32_t> escapes;
            std::vector<uint8_t> exc(s.n);
            std::vector<float> rec(s.n);
            zb::interp_encode_cpu(x.data(), s, ip, order, eb, encoder, 0, 0, codes.data(), exc.data(), rec.data(),
                                  escapes, 1);
            if (ratio) {
                ASSERT_FALSE(escapes.empty());
            }
            auto decode = [&](const std::vector<uint16_t> &c, const std::vector<int32_t> &e) {
                std::vector<float> out(s.n);
                for (size_t i = 0; i < s.n; ++i) out[i] = exc[i] ? x[i] : 0.0f;   // as decode_exceptions leaves it
                std::string msg;
                return zb::interp_decode_cpu(s, ip, order, encoder, c.data(), e.data(), e.size(), exc.data(),
                                             out.data(), 1, msg);
            };
            ASSERT_EQ(decode(codes, escapes), ZB_OK);
            // A point of the last level (not an anchor) in either order: index 1 along x is odd.
            const size_t victim = order == zb::InterpCodeOrder::kIndex ? 1 : s.n - 1;
            const std::vector<uint16_t> bad = ratio ? std::vector<uint16_t>{0, 2 * zb::kRatioRadius, 65535}
                                                    : std::vector<uint16_t>{zb::kEscapeCode};
            for (uint16_t b : bad) {
                auto c = codes;
                c[victim] = b;
                EXPECT_EQ(decode(c, escapes), ZB_ERR_CORRUPT) << "code " << b;
                // With one more escape value the counts agree, yet the escape is not at an anchor.
                auto e = escapes;
                e.push_back(7);
                EXPECT_EQ(decode(c, e), ZB_ERR_CORRUPT) << "code " << b << " with an extra escape";
            }
            auto c = codes;
            c[victim] = ratio ? 2 * zb::kRatioRadius - 1 : 0x7FFF;   // the largest code in range decodes
            EXPECT_EQ(decode(c, escapes), ZB_OK);
        }
    }
}

// The GPU path tunes from a host copy that holds only interp_tune_points / choose_pipeline_points (the rest of the
// array stays on the device): the tuning and the pipeline choice on such a copy must equal those on the whole array,
// whatever the values elsewhere.
template <typename T> void tune_points_cover_every_read() {
    const std::vector<std::vector<size_t>> shapes = {{7},        {5000},      {100003},    {17, 31},   {300, 200},
                                                     {1, 4099},  {4099, 1},   {9, 10, 11}, {64, 64, 64}, {3, 5, 4097},
                                                     {33, 70, 9}, {2, 3, 5, 7}};
    uint32_t seed = 1;
    for (const auto &dims : shapes) {
        auto x = zbt::smooth_field<T>(dims, 0.02, seed++, 1.0);
        for (size_t i = 0; i < x.size(); i += 37) x[i] = std::numeric_limits<T>::quiet_NaN();
        zb::Shape s;
        ASSERT_TRUE(zb::fold_shape((int)dims.size(), dims.data(), s));
        std::vector<uint64_t> idx, cidx;
        zb::interp_tune_points(s, idx);
        zb::choose_pipeline_points(s, cidx);
        for (T sentinel : {(T)1e30, (T)-7.5, std::numeric_limits<T>::infinity()}) {
            std::vector<T> m(x.size(), sentinel), cm(x.size(), sentinel);
            for (uint64_t i : idx) m[(size_t)i] = x[(size_t)i];
            for (uint64_t i : cidx) cm[(size_t)i] = x[(size_t)i];
            for (uint8_t enc : {zb::kEncFast, zb::kEncRatio})
                for (double eb : {1e-2, 1e-4}) {
                    const zb::InterpParams a = zb::interp_tune(x.data(), s, eb, 2.0, 0, 0, enc);
                    const zb::InterpParams b = zb::interp_tune(m.data(), s, eb, 2.0, 0, 0, enc);
                    EXPECT_EQ(std::memcmp(a.order, b.order, 3), 0) << s.n;
                    EXPECT_EQ(std::memcmp(a.natural, b.natural, 3), 0) << s.n;
                    EXPECT_EQ(a.alpha, b.alpha) << s.n;
                }
            zb_params p = zb_params_default();
            p.mode = ZB_MODE_ABS;
            p.bound = 1e-3;
            p.predictor = ZB_PRED_AUTO;
            p.encoder = ZB_ENC_AUTO;
            uint8_t pa, ea, pb, eb2;
            zb::choose_pipeline(p, zbt::dtype_of<T>(), x.data(), s, false, 2, pa, ea);
            zb::choose_pipeline(p, zbt::dtype_of<T>(), cm.data(), s, false, 2, pb, eb2);
            EXPECT_EQ(pa, pb) << s.n;
            EXPECT_EQ(ea, eb2) << s.n;
        }
    }
}
TEST(Interp, TunePointsCoverEveryReadF32) { tune_points_cover_every_read<float>(); }
TEST(Interp, TunePointsCoverEveryReadF64) { tune_points_cover_every_read<double>(); }

}  // namespace

// The interp decoders' reading of a ratio symbol (zb_codes16.h), for every 16-bit value and several radii, against
// the alphabet's definition: symbols 1 .. 2 radius - 1 are the deltas symbol - radius, anything else escaped; and
// the encoder's symbol of each delta reads back as it.
TEST(Codes16, RatioSymbolsReadAsTheAlphabetDefines) {
    for (int32_t radius : {1, 2, 3, 512, zb::kRatioRadius, 32767, 32768}) {
        const zb::RatioCode32 code32{radius};
        for (uint32_t c = 0; c <= 0xFFFFu; ++c) {
            const bool in_alphabet = c >= 1 && (int64_t)c < 2 * (int64_t)radius;
            const int32_t expect = in_alphabet ? (int32_t)c - radius : zb::kEscapedCode;
            ASSERT_EQ(code32((uint16_t)c), expect) << "radius " << radius << ", symbol " << c;
        }
        const zb::Code16<true> code16{radius};
        for (int32_t d = -radius + 1; d < radius; ++d) ASSERT_EQ(code32(code16(d)), d) << "radius " << radius;
    }
}
