// CPU/GPU parity on synthetic data: identical streams, identical decoded arrays in both directions, bound on every
// value. Shapes of rank 1..4 including primes, unit dims and a single value; ABS and REL bounds; special values,
// fill values, outliers, escapes, lossless and raw-passthrough streams. Every case runs with the Lorenzo predictor
// and the fast encoder (format v1), and again (the LorenzoRatio* tests) with the ratio encoder (format v2, or v4
// with run tokens).
#include <cmath>
#include <limits>
#include <random>
#include <thread>
#include "gpu_test_util.h"
#include "zb_bytes.h"
#include "zb_crc32c.h"

namespace {

using Dims = std::vector<size_t>;

size_t count_of(const Dims &d) {
    size_t n = 1;
    for (size_t v : d) n *= v;
    return n;
}

std::string name_of(const char *kind, const Dims &d, const zb_params &p) {
    std::string s = std::string(kind) + " dims";
    for (size_t v : d) s += " " + std::to_string(v);
    s += p.mode == ZB_MODE_ABS ? " abs " : p.mode == ZB_MODE_REL ? " rel " : " pw_rel ";
    s += std::to_string(p.bound);
    return s;
}

// The encoder of the Lorenzo pipeline that params() asks for: fast (format v1) unless a LorenzoRatio* test holds
// a RatioScope.
zb_encoder g_encoder = ZB_ENC_FAST;
struct RatioScope {
    RatioScope() { g_encoder = ZB_ENC_RATIO; }
    ~RatioScope() { g_encoder = ZB_ENC_FAST; }
};

zb_params params(zb_mode mode, double bound) {
    return gput::pipeline_params(ZB_PRED_LORENZO, g_encoder, mode, bound);
}

const std::vector<Dims> kShapes = {{1},         {7},         {2048},        {2049},     {100003},  {1, 1},
                                   {17, 31},    {1, 4099},   {4099, 1},     {256, 512}, {3, 5, 7}, {13, 1, 17},
                                   {31, 37, 41}, {64, 64, 64}, {2, 3, 5, 7}, {5, 1, 11, 13}, {3, 2048, 3}};

template <typename T> void smooth_and_noisy() {
    ZB_REQUIRE_GPU();
    uint32_t seed = 1;
    for (const Dims &d : kShapes)
        for (double noise : {0.0, 0.05})
            for (zb_mode mode : {ZB_MODE_ABS, ZB_MODE_REL})
                for (double b : {1e-2, 1e-3, 1e-4}) {
                    const auto data = zbt::smooth_field<T>(d, noise, seed++, 100.0);
                    const zb_params p = params(mode, b);
                    gput::expect_parity(data, d, p, name_of(noise ? "noisy" : "smooth", d, p));
                    if (::testing::Test::HasFatalFailure()) return;
                }
}
TEST(GpuParity, SmoothAndNoisyF32) { smooth_and_noisy<float>(); }
TEST(GpuParity, SmoothAndNoisyF64) { smooth_and_noisy<double>(); }
TEST(GpuParity, LorenzoRatioSmoothAndNoisyF32) { RatioScope r; smooth_and_noisy<float>(); }
TEST(GpuParity, LorenzoRatioSmoothAndNoisyF64) { RatioScope r; smooth_and_noisy<double>(); }

// NaN (several payloads, both signs), +-Inf, -0.0, the fill value, in runs and isolated, at tile borders.
template <typename T> std::vector<T> with_specials(const Dims &d, uint32_t seed, T fill) {
    auto v = zbt::smooth_field<T>(d, 0.01, seed, -3.0);
    using U = typename std::conditional<sizeof(T) == 8, uint64_t, uint32_t>::type;
    std::mt19937 rng(seed);
    const size_t n = v.size();
    auto nan_with = [](U payload) {
        U u = sizeof(T) == 8 ? (U)0x7FF0000000000000ull : (U)0x7F800000u;
        u |= payload ? payload : 1;
        T t;
        std::memcpy(&t, &u, sizeof(T));
        return t;
    };
    const T specials[] = {std::numeric_limits<T>::quiet_NaN(), -std::numeric_limits<T>::quiet_NaN(), nan_with(5),
                          nan_with(12345), std::numeric_limits<T>::infinity(), -std::numeric_limits<T>::infinity(),
                          (T)-0.0, fill};
    for (size_t i = 0; i < n; ++i) {
        const uint32_t r = rng() % 1000;
        if (r < 20) v[i] = specials[rng() % 8];
        else if (r < 25) v[i] = (T)0.0;
    }
    // A run of fill values and a run of one NaN across the first tile border.
    for (size_t i = 1000; i < std::min(n, (size_t)1500); ++i) v[i] = fill;
    for (size_t i = 2040; i < std::min(n, (size_t)2060); ++i) v[i] = specials[3];
    if (n > 3) v[n - 1] = specials[0];
    return v;
}

template <typename T> void specials() {
    ZB_REQUIRE_GPU();
    const T fill = (T)-9999.9;
    uint32_t seed = 100;
    for (const Dims &d : std::vector<Dims>{{1}, {5}, {3000}, {70001}, {123, 457}, {17, 19, 23}, {2, 3, 4, 1000}})
        for (zb_mode mode : {ZB_MODE_ABS, ZB_MODE_REL})
            for (double b : {1e-2, 1e-4})
                for (int use_fill : {0, 1}) {
                    const auto data = with_specials<T>(d, seed++, fill);
                    zb_params p = params(mode, b);
                    if (use_fill) {
                        p.has_fill = 1;
                        p.fill_bits = zbt::bits(fill);
                    }
                    gput::expect_parity(data, d, p, name_of(use_fill ? "specials+fill" : "specials", d, p));
                    if (::testing::Test::HasFatalFailure()) return;
                }
}
TEST(GpuParity, SpecialValuesF32) { specials<float>(); }
TEST(GpuParity, SpecialValuesF64) { specials<double>(); }
TEST(GpuParity, LorenzoRatioSpecialValuesF32) { RatioScope r; specials<float>(); }
TEST(GpuParity, LorenzoRatioSpecialValuesF64) { RatioScope r; specials<double>(); }

// The point-wise relative mode (format v5): on the GPU the log transform, the inner stream of log magnitudes, its
// decoding, the per-value check and the exceptions all run on the device; the bytes and the decoded values must be
// the CPU's.
template <typename T> void point_wise_relative() {
    ZB_REQUIRE_GPU();
    const T fill = (T)-9999.9;
    uint32_t seed = 300;
    const std::pair<zb_predictor, zb_encoder> pipelines[] = {
        {ZB_PRED_INTERP, ZB_ENC_RATIO}, {ZB_PRED_INTERP, ZB_ENC_FAST}, {ZB_PRED_LORENZO, ZB_ENC_FAST}};
    for (const Dims &d : std::vector<Dims>{{5}, {70001}, {123, 457}, {17, 19, 23}, {64, 64, 64}})
        for (double b : {1e-2, 1e-4})
            for (const auto &pipe : pipelines) {
                auto data = with_specials<T>(d, seed++, fill);
                for (size_t i = 0; i < data.size(); i += 53) data[i] = 0;  // zeros are stored exactly
                for (size_t i = 1; i < data.size(); i += 7) data[i] = -data[i];
                zb_params p = params(ZB_MODE_PW_REL, b);
                p.predictor = pipe.first;
                p.encoder = pipe.second;
                p.has_fill = 1;
                p.fill_bits = zbt::bits(fill);
                gput::expect_parity(data, d, p, name_of("pw_rel", d, p));
                if (::testing::Test::HasFatalFailure()) return;
            }
}
TEST(GpuParity, PointWiseRelativeF32) { point_wise_relative<float>(); }
TEST(GpuParity, PointWiseRelativeF64) { point_wise_relative<double>(); }

// A field of both signs over many decades with zeros of both signs, NaN, +-Inf, subnormals, the largest and the
// smallest normal value and a run of fill values (core_pwrel_test's hard field).
template <typename T> std::vector<T> pw_hard_field(const Dims &dims, T fill, uint32_t seed) {
    auto v = zbt::smooth_field<T>(dims, 0.01, seed);
    for (size_t i = 0; i < v.size(); ++i) v[i] = (T)(v[i] * std::pow(10.0, 6.0 * std::sin(0.001 * (double)i)));
    for (size_t i = 0; i < v.size(); i += 97) v[i] = 0;
    for (size_t i = 13; i < v.size(); i += 389) v[i] = -T(0);
    for (size_t i = 500; i < v.size() && i < 900; ++i) v[i] = 0;
    const T sp[] = {std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity(),
                    -std::numeric_limits<T>::infinity(), std::numeric_limits<T>::denorm_min(),
                    -std::numeric_limits<T>::denorm_min() * 3, std::numeric_limits<T>::max(),
                    -std::numeric_limits<T>::max(), std::numeric_limits<T>::min()};
    for (size_t k = 0; k < 8 && 7 + k < v.size(); ++k) v[7 + k] = sp[k];
    for (size_t i = 2000; i < v.size() && i < 2100; ++i) v[i] = fill;
    return v;
}

// Subnormals and tiny normal values: the exact check stores some of them (the bound misses).
template <typename T> std::vector<T> pw_subnormals(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<T> v(n);
    for (size_t i = 0; i < n; ++i)
        v[i] = std::numeric_limits<T>::denorm_min() * (T)(1 + rng() % 4000) * (i % 3 ? 1 : -1);
    for (size_t i = n / 3; i < 2 * n / 3; ++i) v[i] = (T)(1e-30 * std::sin(0.01 * (double)i));
    return v;
}

size_t pw_specials(const std::vector<float> &v, bool has_fill, float fill) {
    size_t k = 0;
    for (float x : v) k += !std::isfinite(x) || x == 0 || (has_fill && zbt::bits(x) == zbt::bits(fill));
    return k;
}
size_t pw_specials(const std::vector<double> &v, bool has_fill, double fill) {
    size_t k = 0;
    for (double x : v) k += !std::isfinite(x) || x == 0 || (has_fill && zbt::bits(x) == zbt::bits(fill));
    return k;
}

// Edge cases of the point-wise mode: single values, all-special arrays, blocks of 4096 without a regular value
// (the fill-forward's empty blocks), subnormals, +-max, ranks 1 to 3, bounds 1e-12 .. 2, every pipeline (AUTO
// included: the GPU path chooses the inner pipeline from the log magnitudes like the CPU). Some cases must store
// values that miss the bound (more exceptions than special values).
template <typename T> void point_wise_edges() {
    ZB_REQUIRE_GPU();
    const T nan = std::numeric_limits<T>::quiet_NaN(), fill = (T)-9999.9;
    struct Case {
        std::string name;
        Dims dims;
        std::vector<T> v;
        bool fill;
    };
    std::vector<Case> cases;
    cases.push_back({"one value", {1}, {(T)1.5}, false});
    cases.push_back({"one negative zero", {1}, {(T)-0.0}, false});
    cases.push_back({"one max", {1}, {-std::numeric_limits<T>::max()}, false});
    cases.push_back({"zeros", {7}, std::vector<T>(7, (T)0), false});
    cases.push_back({"mixed", {7}, {nan, nan, 1, -1, 0, (T)-0.0, 3}, false});
    cases.push_back({"constant", {1000}, std::vector<T>(1000, (T)-2.5), false});
    cases.push_back({"all nan", {5000}, std::vector<T>(5000, nan), false});
    {
        // Block 0 all NaN, block 1 regular from its middle on, block 2 all zeros, block 3 the fill value, then a
        // partial block with one regular value at its end.
        std::vector<T> v(4 * 4096 + 77, nan);
        for (size_t i = 4096 + 2000; i < 2 * 4096; ++i) v[i] = (T)(1.0 + 1e-3 * (double)i) * (i % 5 ? 1 : -1);
        for (size_t i = 2 * 4096; i < 3 * 4096; ++i) v[i] = (T)((i % 2) ? 0.0 : -0.0);
        for (size_t i = 3 * 4096; i < 4 * 4096; ++i) v[i] = fill;
        v.back() = (T)1e-20;
        cases.push_back({"empty blocks", {v.size()}, v, true});
    }
    cases.push_back({"subnormals", {3000}, pw_subnormals<T>(3000, 11), false});
    cases.push_back({"hard 1D", {20011}, pw_hard_field<T>({20011}, fill, 3), true});
    cases.push_back({"hard 2D", {123, 457}, pw_hard_field<T>({123, 457}, fill, 4), true});
    cases.push_back({"hard 3D", {17, 19, 231}, pw_hard_field<T>({17, 19, 231}, fill, 5), true});
    const std::pair<zb_predictor, zb_encoder> pipelines[] = {{ZB_PRED_AUTO, ZB_ENC_AUTO},
                                                             {ZB_PRED_INTERP, ZB_ENC_RATIO},
                                                             {ZB_PRED_LORENZO, ZB_ENC_FAST},
                                                             {ZB_PRED_LORENZO, ZB_ENC_RATIO}};
    size_t with_misses = 0, item = 0;
    for (const Case &c : cases)
        for (double b : {1e-12, 1e-6, 1e-3, 0.3, 2.0})
            for (const auto &pipe : pipelines) {
                if (!gput::sampled(item++)) continue;
                zb_params p = zb_params_default();
                p.mode = ZB_MODE_PW_REL;
                p.bound = b;
                p.predictor = pipe.first;
                p.encoder = pipe.second;
                p.has_fill = c.fill ? 1 : 0;
                p.fill_bits = c.fill ? zbt::bits(fill) : 0;
                gput::expect_parity(c.v, c.dims, p,
                                    name_of(("pw_rel " + c.name).c_str(), c.dims, p) + " pipeline " +
                                        std::to_string(pipe.first) + "/" + std::to_string(pipe.second));
                if (::testing::Test::HasFatalFailure()) return;
                const zbt::Stream s = gput::compress_on(ZB_BACKEND_GPU, c.v, c.dims, p);
                zb_stream_info info{};
                ASSERT_EQ(zb_stream_info_get(s.bytes.data(), s.bytes.size(), &info), ZB_OK);
                if (info.format_version == 5 && info.exceptions > pw_specials(c.v, c.fill, fill)) ++with_misses;
            }
    std::printf("point-wise edge cases with values that miss the bound: %zu\n", with_misses);
    if (gput::sample_stride() == 1) {
        EXPECT_GT(with_misses, 0u) << "no case stored a value that misses the bound";
    }
}
TEST(GpuParity, PointWiseRelativeEdgesF32) { point_wise_edges<float>(); }
TEST(GpuParity, PointWiseRelativeEdgesF64) { point_wise_edges<double>(); }

// Corrupted v5 streams: the GPU decoder answers like the CPU's (ZB_ERR_CORRUPT for what the structure checks
// catch), never crashes, and where both decode, both give the same values.
template <typename T> void point_wise_corrupt() {
    ZB_REQUIRE_GPU();
    const Dims dims{29, 701};  // n % 8 == 1: the last sign byte has bits past the end
    const T fill = (T)-9999.9;
    const auto v = pw_hard_field<T>(dims, fill, 7);
    zb_params p = zb_params_default();
    p.mode = ZB_MODE_PW_REL;
    p.bound = 1e-2;
    p.predictor = ZB_PRED_INTERP;
    p.encoder = ZB_ENC_RATIO;
    p.has_fill = 1;
    p.fill_bits = zbt::bits(fill);
    const zbt::Stream s = gput::compress_on(ZB_BACKEND_CPU, v, dims, p);
    ASSERT_EQ(s.status, ZB_OK);
    ASSERT_EQ(zb::get_u16(s.bytes.data() + 4), 5);
    zb::Header h;
    std::string why;
    ASSERT_EQ(zb::read_header(s.bytes.data(), s.bytes.size(), h, why), ZB_OK);
    ASSERT_GT(h.exceptions, 0u);
    ASSERT_GT(h.seg[zb::kPwSegSignBlocks].length, 0u);
    std::vector<T> a(v.size()), b(v.size());
    size_t mismatched = 0, cases = 0;
    auto both = [&](const std::vector<uint8_t> &t, const std::string &what, bool must_be_corrupt) {
        ++cases;
        const zb_status sc = zb_decompress(t.data(), t.size(), a.data(), a.size() * sizeof(T), ZB_BACKEND_CPU, nullptr);
        const zb_status sg = zb_decompress(t.data(), t.size(), b.data(), b.size() * sizeof(T), ZB_BACKEND_GPU, nullptr);
        if (must_be_corrupt) {
            EXPECT_EQ(sc, ZB_ERR_CORRUPT) << what;
            EXPECT_EQ(sg, ZB_ERR_CORRUPT) << what << ": " << zb_last_error();
        }
        EXPECT_TRUE(sg != ZB_ERR_GPU && sg != ZB_ERR_INTERNAL && sg != ZB_ERR_UNSUPPORTED) << what << ": " << sg;
        if (sc != sg) ++mismatched;
        if (sc == ZB_OK && sg == ZB_OK) {
            EXPECT_EQ(gput::first_value_difference(a, b), a.size()) << what;
        }
    };
    const size_t hb = h.header_bytes();
    for (size_t bit = 0; bit < s.bytes.size() * 8; bit += 61 * gput::sample_stride()) {
        auto t = s.bytes;
        t[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        both(t, "bit " + std::to_string(bit), bit / 8 >= hb);  // the payload checksum (header bits: other errors)
    }
    for (size_t len : {(size_t)10, (size_t)200, s.bytes.size() / 2, s.bytes.size() - 1}) {
        auto t = s.bytes;
        t.resize(len);
        const zb_status sc = zb_decompress(t.data(), t.size(), a.data(), a.size() * sizeof(T), ZB_BACKEND_CPU, nullptr);
        const zb_status sg = zb_decompress(t.data(), t.size(), b.data(), b.size() * sizeof(T), ZB_BACKEND_GPU, nullptr);
        EXPECT_NE(sg, ZB_OK) << "length " << len;
        EXPECT_EQ(sc, sg) << "length " << len;
    }
    for (size_t off = hb; off < hb + 8; ++off) {  // the parameters, checksums fixed up
        auto t = s.bytes;
        t[off] ^= 0x40;
        zbt::reseal(t);
        both(t, "parameter byte " + std::to_string(off), true);
    }
    for (size_t off : {(size_t)4, (size_t)8, (size_t)9, (size_t)10, (size_t)11, (size_t)12, (size_t)32}) {
        auto t = s.bytes;  // the inner header (its own checksums fixed too): it no longer matches the container
        zbt::flip_inner_header_byte(t, hb, off);
        both(t, "inner header byte " + std::to_string(off), true);
    }
    {
        // Sign flags: a set flag for a block that is not stored, and a cleared one.
        const size_t f = hb + (size_t)h.seg[zb::kPwSegSignFlags].offset;
        for (size_t k = 0; k < (size_t)h.seg[zb::kPwSegSignFlags].length; ++k)
            for (int bit = 0; bit < 8; bit += 3) {
                auto t = s.bytes;
                t[f + k] ^= (uint8_t)(1u << bit);
                zbt::reseal(t);
                both(t, "sign flag byte " + std::to_string(k) + " bit " + std::to_string(bit), false);
            }
        // The last stored sign block: a bit past the last value (byte 13 of block 158 holds value 20328 in bit 0),
        // and its padding bytes.
        const size_t last_block = hb + (size_t)h.seg[zb::kPwSegSignBlocks].offset +
                                  (size_t)h.seg[zb::kPwSegSignBlocks].length - 16;
        for (size_t k : {(size_t)13, (size_t)14, (size_t)15}) {
            auto t = s.bytes;
            t[last_block + k] |= 0x80;
            zbt::reseal(t);
            both(t, "last sign block byte " + std::to_string(k), false);
        }
    }
    std::mt19937 rng(5);
    for (int k = 0; k < gput::sampled_trials(300); ++k) {
        auto t = s.bytes;
        t[hb + rng() % (t.size() - hb)] ^= (uint8_t)(1u << (rng() % 8));
        zbt::reseal(t);
        both(t, "random flip " + std::to_string(k), false);
    }
    std::printf("corrupted v5 streams: %zu cases, CPU and GPU status differ in %zu\n", cases, mismatched);
    EXPECT_EQ(mismatched, 0u);
}
TEST(GpuParity, PointWiseRelativeCorruptF32) { point_wise_corrupt<float>(); }
TEST(GpuParity, PointWiseRelativeCorruptF64) { point_wise_corrupt<double>(); }

// Values the quantizer cannot hold: |x| / (2 eb) beyond 2^30, and values just around that limit.
template <typename T> void outliers() {
    ZB_REQUIRE_GPU();
    uint32_t seed = 200;
    for (const Dims &d : std::vector<Dims>{{4097}, {61, 67}, {9, 10, 11}}) {
        auto data = zbt::smooth_field<T>(d, 0.1, seed++, 0.0);
        std::mt19937 rng(seed);
        for (size_t i = 0; i < data.size(); i += 1 + rng() % 50) {
            const double mag = std::ldexp(1.0, 20 + (int)(rng() % 40));
            data[i] = (T)((rng() & 1) ? mag : -mag) * (T)(1.0 + (rng() % 1000) * 1e-3);
        }
        for (double b : {1e-2, 1e-3, 1e-4}) {
            gput::expect_parity(data, d, params(ZB_MODE_ABS, b), name_of("outliers", d, params(ZB_MODE_ABS, b)));
            gput::expect_parity(data, d, params(ZB_MODE_REL, b), name_of("outliers", d, params(ZB_MODE_REL, b)));
            if (::testing::Test::HasFatalFailure()) return;
        }
        // Right at the 2^30 limit of |x| / (2 eb).
        const double eb = 1e-3;
        for (size_t i = 0; i < data.size(); ++i) {
            const double t = std::ldexp(1.0, 30) + (double)((int)(rng() % 2001) - 1000);
            data[i] = (T)(t * 2.0 * eb * ((rng() & 1) ? 1 : -1));
        }
        gput::expect_parity(data, d, params(ZB_MODE_ABS, eb), name_of("limit", d, params(ZB_MODE_ABS, eb)));
        if (::testing::Test::HasFatalFailure()) return;
    }
}
TEST(GpuParity, OutliersF32) { outliers<float>(); }
TEST(GpuParity, OutliersF64) { outliers<double>(); }
TEST(GpuParity, LorenzoRatioOutliersF32) { RatioScope r; outliers<float>(); }
TEST(GpuParity, LorenzoRatioOutliersF64) { RatioScope r; outliers<double>(); }

// Lorenzo deltas beyond the code range (escapes: +-32767 for the fast encoder, +-511 for the ratio encoder): a smooth
// field with steps and spikes, and a steep ramp; and pure noise (raw passthrough).
template <typename T> void escapes() {
    ZB_REQUIRE_GPU();
    uint32_t seed = 300;
    for (const Dims &d : std::vector<Dims>{{50000}, {300, 301}, {20, 30, 40}, {7, 2049}}) {
        auto data = zbt::smooth_field<T>(d, 0.001, seed++, 0.0);
        std::mt19937 rng(seed);
        for (size_t i = 0; i < data.size(); i += 1 + rng() % 300) data[i] += (T)(((rng() & 1) ? 1 : -1) * 80.0);
        for (size_t i = data.size() / 2; i < data.size(); ++i) data[i] += (T)50.0;  // a step
        for (double b : {1e-3, 1e-4}) {
            gput::expect_parity(data, d, params(ZB_MODE_ABS, b), name_of("escapes", d, params(ZB_MODE_ABS, b)));
            if (::testing::Test::HasFatalFailure()) return;
        }
        std::vector<T> ramp(data.size());   // deltas of about 2 / (2 eb) = 1000 everywhere along x at eb 1e-3
        for (size_t i = 0; i < ramp.size(); ++i) ramp[i] = (T)(2.0 * (double)(i % d.back()) + 1e-3 * (double)(i % 7));
        const zb_params rp = params(ZB_MODE_ABS, 1e-3);
        gput::expect_parity(ramp, d, rp, name_of("ramp", d, rp));
        if (::testing::Test::HasFatalFailure()) return;
        std::uniform_real_distribution<double> u(-1e3, 1e3);
        for (auto &v : data) v = (T)u(rng);
        gput::expect_parity(data, d, params(ZB_MODE_ABS, 1e-4), name_of("noise(raw)", d, params(ZB_MODE_ABS, 1e-4)));
        if (::testing::Test::HasFatalFailure()) return;
    }
}
TEST(GpuParity, EscapesF32) { escapes<float>(); }
TEST(GpuParity, EscapesF64) { escapes<double>(); }
TEST(GpuParity, LorenzoRatioEscapesF32) { RatioScope r; escapes<float>(); }
TEST(GpuParity, LorenzoRatioEscapesF64) { RatioScope r; escapes<double>(); }

// eb = 0: bound 0, a constant field under REL, all non-finite values under REL, a single value.
template <typename T> void lossless() {
    ZB_REQUIRE_GPU();
    const Dims d{33, 65};
    auto smooth = zbt::smooth_field<T>(d, 0.0, 7, 1.0);
    gput::expect_parity(smooth, d, params(ZB_MODE_ABS, 0.0), "bound 0");
    std::vector<T> constant(count_of(d), (T)42.5);
    gput::expect_parity(constant, d, params(ZB_MODE_REL, 1e-3), "constant field, rel");
    std::vector<T> nan(count_of(d), std::numeric_limits<T>::quiet_NaN());
    gput::expect_parity(nan, d, params(ZB_MODE_REL, 1e-3), "all NaN, rel");
    std::vector<T> zeros(count_of(d), (T)0.0);
    for (size_t i = 0; i < zeros.size(); i += 3) zeros[i] = (T)-0.0;
    gput::expect_parity(zeros, d, params(ZB_MODE_REL, 1e-3), "signed zeros, rel");
    for (T v : {(T)3.25, std::numeric_limits<T>::quiet_NaN(), (T)-0.0, (T)1e30}) {
        gput::expect_parity(std::vector<T>{v}, Dims{1}, params(ZB_MODE_REL, 1e-3), "one value, rel");
        gput::expect_parity(std::vector<T>{v}, Dims{}, params(ZB_MODE_ABS, 1e-3), "scalar, abs");
    }
    // A zero-size dim is refused by both backends alike.
    const Dims empty{3, 0};
    const std::vector<T> none;
    const zbt::Stream c0 = gput::compress_on(ZB_BACKEND_CPU, none, empty, params(ZB_MODE_ABS, 1e-3));
    const zbt::Stream g0 = gput::compress_on(ZB_BACKEND_GPU, none, empty, params(ZB_MODE_ABS, 1e-3));
    EXPECT_EQ(c0.status, ZB_ERR_INVALID_ARG);
    EXPECT_EQ(g0.status, c0.status);
}
TEST(GpuParity, LosslessAndTinyF32) { lossless<float>(); }
TEST(GpuParity, LosslessAndTinyF64) { lossless<double>(); }
TEST(GpuParity, LorenzoRatioLosslessAndTinyF32) { RatioScope r; lossless<float>(); }
TEST(GpuParity, LorenzoRatioLosslessAndTinyF64) { RatioScope r; lossless<double>(); }

// Larger arrays: several thousand tiles, multi-segment scans along x (rank 1), y and z. With the fast encoder most
// are cut into Lorenzo segments (format v6, docs/FORMAT.md section 13): 3000000 values in 1D (3 segments), 1500 rows
// of 2001 (525 rows each), 150 planes of 15000 (70 planes each, the last 10), 600000 rows of 3 (several layers per
// warp round), 2^20 + 1 values (a last segment of one value); 120 x 130 x 140 has planes too large to be cut.
void larger_arrays() {
    ZB_REQUIRE_GPU();
    int v6 = 0;
    for (const Dims &d : std::vector<Dims>{{3000000}, {1500, 2001}, {120, 130, 140}, {2, 700, 3}, {150, 100, 150},
                                           {600000, 3}, {1048577}}) {
        const auto f = zbt::smooth_field<float>(d, 0.02, 11, 20.0);
        gput::expect_parity(f, d, params(ZB_MODE_REL, 1e-3), name_of("large f32", d, params(ZB_MODE_REL, 1e-3)));
        const auto g = zbt::smooth_field<double>(d, 0.02, 12, 20.0);
        gput::expect_parity(g, d, params(ZB_MODE_REL, 1e-4), name_of("large f64", d, params(ZB_MODE_REL, 1e-4)));
        if (::testing::Test::HasFatalFailure()) return;
        const zbt::Stream s = gput::compress_on(ZB_BACKEND_GPU, f, d, params(ZB_MODE_REL, 1e-3));
        zb_stream_info info;
        ASSERT_EQ(zb_stream_info_get(s.bytes.data(), s.bytes.size(), &info), ZB_OK);
        v6 += info.format_version == 6;
    }
    if (g_encoder == ZB_ENC_FAST) {
        EXPECT_EQ(v6, 5);
    }
}
TEST(GpuParity, LargerArrays) { larger_arrays(); }

// The walk's ring of q (k_quantize_encode) with rows of 4 mod 8 values: a row above starts 4 entries before a
// thread's group of 8, so at the ring's start its 8 q straddle the ring's end (read through RingQ's mirror of entries
// 0..3). 100000 rows of 12 walk by default; 40 x 36 x 44 walks where ZBOUND_GPU_WALK asks for it (the device check's
// walks of 1 and 3 tiles).
TEST(GpuParity, WalkRowsAcrossTheRingEnd) {
    ZB_REQUIRE_GPU();
    for (const Dims &d : std::vector<Dims>{{100000, 12}, {40, 36, 44}}) {
        const auto f = zbt::smooth_field<float>(d, 0.02, 21, 20.0);
        gput::expect_parity(f, d, params(ZB_MODE_REL, 1e-3), name_of("ring f32", d, params(ZB_MODE_REL, 1e-3)));
        const auto g = zbt::smooth_field<double>(d, 0.02, 22, 20.0);
        gput::expect_parity(g, d, params(ZB_MODE_ABS, 1e-4), name_of("ring f64", d, params(ZB_MODE_ABS, 1e-4)));
        if (::testing::Test::HasFatalFailure()) return;
    }
}
TEST(GpuParity, LorenzoRatioLargerArrays) { RatioScope r; larger_arrays(); }

// Two-pass arrays of one to two waves of tiles (586 to 830; ranks 1-3, rows of a multiple of 4 values and not: no
// walk) with with_specials' NaN, infinities and fill values, which the REL range must skip (the fill value lies far
// outside the field: a range that took it would loosen the bound), and ABS in f64. Written for a cooperative grid
// that took the range, the quantization and the codes in one kernel, its blocks several tiles each at these sizes
// (NOTES 139: not kept).
TEST(GpuParity, MidSizeTwoPassWithSpecials) {
    ZB_REQUIRE_GPU();
    const float fill = -9999.9f;
    for (const Dims &d : std::vector<Dims>{{1700000}, {1200, 1000}, {100, 100, 150}, {128, 64, 200}}) {
        const auto f = with_specials<float>(d, 31, fill);
        zb_params p = params(ZB_MODE_REL, 1e-3);
        p.has_fill = 1;
        p.fill_bits = zbt::bits(fill);
        gput::expect_parity(f, d, p, name_of("mid-size f32 fill", d, p));
        const auto g = zbt::smooth_field<double>(d, 0.02, 32, 20.0);
        gput::expect_parity(g, d, params(ZB_MODE_ABS, 1e-5), name_of("mid-size f64", d, params(ZB_MODE_ABS, 1e-5)));
        if (::testing::Test::HasFatalFailure()) return;
    }
}

// The REL range of an f32 array of 32 MiB or more, where k_range's threads issue 8 loads each in one wave of blocks
// (cuda/encode.cuh, kRangeWaveBytes): 36 MiB and one value, its largest value in the last, partial group of four and
// its smallest in the middle, with with_specials' NaN, infinities and fill values, which the range must skip. A range
// that missed or took one value would change the bound, and the bytes. (The host API's device copy is 16-byte
// aligned; GpuDeviceApi.LargeUnalignedRelF32 takes the unaligned loads.)
TEST(GpuParity, LargeArrayRelRange) {
    ZB_REQUIRE_GPU();
    const float fill = -9999.9f;
    const Dims d{(size_t(36) << 20) / 4 + 1};
    auto f = with_specials<float>(d, 41, fill);
    f[d[0] - 2] = 1000.0f;
    f[d[0] / 2 + 3] = -1000.0f;
    zb_params p = params(ZB_MODE_REL, 1e-3);
    p.has_fill = 1;
    p.fill_bits = zbt::bits(fill);
    gput::expect_parity(f, d, p, name_of("36 MiB f32 fill", d, p));
}

// Rank 3 with up to 128 rows: the decoder takes y and z in one walk over the layers (k_yz_prefix), each Lorenzo
// segment cut into parts where the segments alone give too few blocks (sums per part, their scan, then the walk
// from the carries). 160 x 64 x 1024: 4 rows per thread, nx divides the tile; 200 x 40 x 1000: x carries, a last
// column group of 8, segments of 27 layers (steps of 4 end early); 100 x 100 x 600: 8 rows per thread, a last warp
// of 4 rows; 300 x 64 x 64: two segments, the second of 44 layers (parts past its end are empty). Each with the plan's
// parts, whole segments (ZBOUND_GPU_YZ_PARTS=1) and 3 parts. The line passes decode the same streams on shapes with
// more rows (LargerArrays), so parity here is the walk's. Under ZBOUND_TEST_SAMPLE each shape takes one of the
// three part settings, in turn.
TEST(GpuParity, Rank3OnePassPrefix) {
    ZB_REQUIRE_GPU();
    const std::vector<const char *> part_settings{"", "1", "3"};
    const std::vector<Dims> shapes{{160, 64, 1024}, {200, 40, 1000}, {100, 100, 600}, {300, 64, 64}};
    for (size_t ps = 0; ps < part_settings.size(); ++ps) {
        const char *parts = part_settings[ps];
        const zbt::ScopedEnv scoped("ZBOUND_GPU_YZ_PARTS", *parts ? parts : nullptr);
        const std::string how = std::string("yz parts ") + (*parts ? parts : "planned") + ", ";
        for (size_t shape = 0; shape < shapes.size(); ++shape) {
            if (!gput::sampled_variant(shape, ps, part_settings.size())) continue;
            const Dims &d = shapes[shape];
            const auto f = zbt::smooth_field<float>(d, 0.02, 21, 20.0);
            gput::expect_parity(f, d, params(ZB_MODE_REL, 1e-3), how + name_of("f32", d, params(ZB_MODE_REL, 1e-3)));
            const auto g = zbt::smooth_field<double>(d, 0.02, 22, 20.0);
            gput::expect_parity(g, d, params(ZB_MODE_ABS, 1e-6), how + name_of("f64", d, params(ZB_MODE_ABS, 1e-6)));
            if (::testing::Test::HasFatalFailure()) return;
        }
    }
}

// Lorenzo + ratio writes format v2, or v4 when run tokens make the bitstream shorter: both layouts occur here (a
// smooth field at coarse bounds has long runs of code 0; a noisy one at fine bounds has none), and each has parity.
template <typename T> void lorenzo_ratio_layouts() {
    ZB_REQUIRE_GPU();
    RatioScope r;
    int v2 = 0, v4 = 0;
    uint32_t seed = 500;
    for (const Dims &d : std::vector<Dims>{{100003}, {300, 301}, {40, 50, 60}})
        for (double noise : {0.0, 0.5})
            for (double b : {1e-2, 1e-3, 1e-5}) {
                const auto data = zbt::smooth_field<T>(d, noise, seed++, 10.0);
                const zb_params p = params(ZB_MODE_REL, b);
                gput::expect_parity(data, d, p, name_of(noise ? "noisy" : "smooth", d, p));
                const zbt::Stream s = gput::compress_on(ZB_BACKEND_GPU, data, d, p);
                zb_stream_info info;
                ASSERT_EQ(zb_stream_info_get(s.bytes.data(), s.bytes.size(), &info), ZB_OK);
                if (info.raw) continue;
                EXPECT_EQ(info.predictor, ZB_PRED_LORENZO);
                EXPECT_EQ(info.encoder, ZB_ENC_RATIO);
                v2 += info.format_version == 2;
                v4 += info.format_version == 4;
                if (::testing::Test::HasFatalFailure()) return;
            }
    std::printf("Lorenzo + ratio streams: %d of format v2, %d of format v4\n", v2, v4);
    EXPECT_GT(v2, 0);
    EXPECT_GT(v4, 0);
}
TEST(GpuParity, LorenzoRatioLayoutsF32) { lorenzo_ratio_layouts<float>(); }
TEST(GpuParity, LorenzoRatioLayoutsF64) { lorenzo_ratio_layouts<double>(); }

// Small output buffers: the GPU reports the same error as the CPU.
void buffer_too_small() {
    ZB_REQUIRE_GPU();
    const Dims d{100, 100};
    const auto data = zbt::smooth_field<float>(d, 0.01, 5, 0.0);
    zb_params p = params(ZB_MODE_REL, 1e-3);
    const auto ref = gput::compress_on(ZB_BACKEND_CPU, data, d, p);
    ASSERT_EQ(ref.status, ZB_OK);
    std::vector<uint8_t> buf(ref.bytes.size() - 1);
    size_t len = 0;
    p.backend = ZB_BACKEND_GPU;
    EXPECT_EQ(zb_compress(&p, ZB_F32, data.data(), 2, d.data(), buf.data(), buf.size(), &len, nullptr),
              ZB_ERR_BUFFER_TOO_SMALL);
    buf.resize(ref.bytes.size());
    ASSERT_EQ(zb_compress(&p, ZB_F32, data.data(), 2, d.data(), buf.data(), buf.size(), &len, nullptr), ZB_OK)
        << zb_last_error();
    EXPECT_TRUE(buf == ref.bytes);
}
TEST(GpuParity, BufferTooSmall) { buffer_too_small(); }
TEST(GpuParity, LorenzoRatioBufferTooSmall) { RatioScope r; buffer_too_small(); }

// Many threads compressing at once through the GPU get the CPU's bytes.
TEST(GpuParity, ConcurrentCalls) {
    ZB_REQUIRE_GPU();
    const Dims d{257, 129};
    std::vector<std::vector<float>> inputs;
    std::vector<std::vector<uint8_t>> refs;
    for (int t = 0; t < 8; ++t) {
        inputs.push_back(zbt::smooth_field<float>(d, 0.01 * t, 40 + t, (double)t));
        refs.push_back(gput::compress_on(ZB_BACKEND_CPU, inputs.back(), d, params(ZB_MODE_REL, 1e-3)).bytes);
    }
    std::vector<int> ok(8, 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t)
        threads.emplace_back([&, t] {
            bool good = true;
            for (int r = 0; r < 5; ++r)
                good = good && gput::compress_on(ZB_BACKEND_GPU, inputs[t], d, params(ZB_MODE_REL, 1e-3)).bytes == refs[t];
            ok[t] = good;
        });
    for (auto &th : threads) th.join();
    for (int t = 0; t < 8; ++t) EXPECT_TRUE(ok[t]) << "thread " << t;
}

}  // namespace
