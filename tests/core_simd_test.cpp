// The CPU loops compiled for several vector levels (zb_simd.h: baseline, AVX2, AVX-512) give the same results at
// every level this machine has: quantization value by value against the scalar quantize() on every kind of value,
// the bit (un)shuffle against the portable version, the value range against a plain loop, and whole streams (every
// pipeline, f32 and f64, fill values, NaN) byte for byte, decoded value for value.
#include <gtest/gtest.h>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>
#include "test_util.h"
#include "zb_cpu.h"
#include "zb_quant.h"
#include "zb_simd.h"

namespace {

// Every level up to what the CPU has; restores the level in use at scope exit.
struct Levels {
    zb::SimdLevel saved = zb::simd_level();
    std::vector<zb::SimdLevel> all;
    Levels() {
        for (int l = zb::kSimdBase; l <= zb::simd_level_supported(); ++l) all.push_back((zb::SimdLevel)l);
    }
    ~Levels() { zb::set_simd_level(saved); }
};

// Values of every kind quantization must tell apart: NaN, infinities, signed zeros, subnormals, the fill value,
// values beyond the quantization range, values on rounding boundaries, and ordinary ones.
template <typename T> std::vector<T> hard_values(size_t n, double eb, uint32_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<T> v(n);
    const T specials[] = {std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity(),
                          -std::numeric_limits<T>::infinity(), (T)0, -(T)0, std::numeric_limits<T>::denorm_min(),
                          -std::numeric_limits<T>::denorm_min(), std::numeric_limits<T>::max(),
                          std::numeric_limits<T>::lowest(), (T)(eb * 2.0 * 1073741824.0), (T)(eb * 0.5),
                          (T)(-eb * 0.5), (T)(eb * 1.5), (T)-999.0};
    std::normal_distribution<double> g(0.0, 1.0);
    for (size_t i = 0; i < n; ++i) {
        const uint64_t r = rng();
        if (r % 7 == 0) v[i] = specials[(r >> 8) % (sizeof specials / sizeof specials[0])];
        else if (r % 7 == 1) v[i] = (T)(g(rng) * eb * 1e9);   // far beyond the range of 2^30 steps at times
        else if (r % 7 == 2) {   // random bit patterns
            const uint64_t b = rng();
            std::memcpy(&v[i], &b, sizeof(T));
        } else {
            v[i] = (T)(g(rng) * eb * 1000.0);
        }
    }
    return v;
}

template <typename T> void quantize_matches_scalar() {
    Levels levels;
    for (double eb : {1e-3, 0.5, 1e-30, 0.0}) {
        for (int has_fill : {0, 1}) {
            const std::vector<T> x = hard_values<T>(100003, eb > 0 ? eb : 1.0, (uint32_t)(eb * 1e6) + has_fill);
            const zb::QuantParams qp = zb::make_quant_params(eb, has_fill, zbt::bits((T)-999.0));
            std::vector<uint32_t> want_q(x.size());
            std::vector<uint8_t> want_e(x.size());
            for (size_t i = 0; i < x.size(); ++i) {
                int32_t qi;
                want_e[i] = zb::quantize<T>(x[i], qp, qi) ? 0 : 1;
                want_q[i] = (uint32_t)qi;
            }
            for (zb::SimdLevel l : levels.all) {
                SCOPED_TRACE(std::string(zb::simd_level_name(l)) + " eb " + std::to_string(eb) + " fill " +
                             std::to_string(has_fill));
                zb::set_simd_level(l);
                std::vector<uint32_t> q(x.size(), 0xdeadbeef);
                std::vector<uint8_t> e(x.size(), 7);
                zb::quantize_values(x.data(), x.size(), qp, q.data(), e.data(), 2);
                for (size_t i = 0; i < x.size(); ++i) {
                    ASSERT_EQ(e[i], want_e[i]) << "exception flag of value " << i << " (" << x[i] << ")";
                    ASSERT_EQ(q[i], want_q[i]) << "code of value " << i << " (" << x[i] << ")";
                }
            }
        }
    }
}

TEST(Simd, QuantizeMatchesScalarF32) { quantize_matches_scalar<float>(); }
TEST(Simd, QuantizeMatchesScalarF64) { quantize_matches_scalar<double>(); }

TEST(Simd, BitShuffleMatchesPortable) {
    Levels levels;
    std::mt19937 rng(5);
    for (int trial = 0; trial < 20; ++trial) {
        std::vector<uint16_t> codes(zb::kTileCodes);
        for (auto &c : codes) c = (uint16_t)(trial % 2 ? rng() : rng() % 8);
        std::vector<uint8_t> want(2 * zb::kTileCodes);
        zb::bitshuffle_tile_portable(codes.data(), want.data());
        for (zb::SimdLevel l : levels.all) {
            zb::set_simd_level(l);
            std::vector<uint8_t> tile(want.size(), 0x55);
            zb::bitshuffle_tile(codes.data(), tile.data());
            ASSERT_EQ(tile, want) << zb::simd_level_name(l) << " trial " << trial;
            std::vector<uint16_t> back(codes.size(), 0x5555);
            zb::bitunshuffle_tile(tile.data(), back.data());
            ASSERT_EQ(back, codes) << zb::simd_level_name(l) << " trial " << trial;
        }
    }
}

// A stored tile read plane by plane (zero planes skipped, whole planes read in place, partial ones copied) gives the
// codes of the expanded tile, at every vector level and in the portable version.
TEST(Simd, StoredTilePlanesMatchExpandedTile) {
    Levels levels;
    std::mt19937 rng(6);
    for (int trial = 0; trial < 40; ++trial) {
        // Each plane zero, whole or partly stored, chosen per trial; stored blocks random but not all zero.
        uint8_t flags[zb::kTileFlagBytes];
        std::vector<uint8_t> blocks;
        for (int p = 0; p < 16; ++p) {
            const int kind = (int)(rng() % 3);
            const unsigned f = kind == 0 ? 0u : kind == 1 ? 0xFFFFu : (unsigned)(rng() & 0xFFFF);
            flags[2 * p] = (uint8_t)f;
            flags[2 * p + 1] = (uint8_t)(f >> 8);
            for (int b = 0; b < 16; ++b)
                if ((f >> b) & 1)
                    for (uint64_t k = 0; k < zb::kBlockBytes; ++k) blocks.push_back((uint8_t)(rng() | (k == 0)));
        }
        std::vector<uint8_t> tile(zb::kTileBytes);
        zb::expand_tile(flags, blocks.data(), tile.data());
        std::vector<uint16_t> want(zb::kTileCodes);
        zb::bitunshuffle_tile_portable(tile.data(), want.data());
        std::vector<uint8_t> buf(zb::kTileBytes, 0x55);
        const uint8_t *planes[16];
        zb::stored_tile_planes(flags, blocks.data(), buf.data(), planes);
        for (int p = 0; p < 16; ++p) ASSERT_EQ(planes[p] == nullptr, flags[2 * p] == 0 && flags[2 * p + 1] == 0);
        std::vector<uint16_t> got(zb::kTileCodes, 0x5555);
        zb::bitunshuffle_planes_portable(planes, got.data());
        ASSERT_EQ(got, want) << "portable, trial " << trial;
        for (zb::SimdLevel l : levels.all) {
            zb::set_simd_level(l);
            std::fill(got.begin(), got.end(), 0x5555);
            zb::bitunshuffle_planes(planes, got.data());
            ASSERT_EQ(got, want) << zb::simd_level_name(l) << " trial " << trial;
        }
    }
}

TEST(Simd, CountOnesMatchesBitByBit) {
    Levels levels;
    std::mt19937 rng(12);
    std::vector<uint8_t> bytes(300);
    for (auto &b : bytes) b = (uint8_t)rng();
    for (uint64_t off : {0, 3}) {
        for (uint64_t n = 0; n + off <= bytes.size(); n += n < 20 ? 1 : 37) {
            uint64_t want = 0;
            for (uint64_t i = off; i < off + n; ++i)
                for (int k = 0; k < 8; ++k) want += (bytes[i] >> k) & 1;
            for (zb::SimdLevel l : levels.all) {
                zb::set_simd_level(l);
                ASSERT_EQ(zb::count_ones(bytes.data() + off, n), want) << zb::simd_level_name(l) << " n " << n;
            }
        }
    }
}

TEST(Simd, ValueRangeMatchesPlainLoop) {
    Levels levels;
    for (int has_fill : {0, 1}) {
        const std::vector<float> x = hard_values<float>(70001, 1.0, 9 + has_fill);
        const uint64_t fill = zbt::bits(-999.0f);
        float lo = std::numeric_limits<float>::infinity(), hi = -lo;
        for (float v : x)
            if (std::isfinite(v) && !(has_fill && zbt::bits(v) == fill)) {
                lo = std::min(lo, v);
                hi = std::max(hi, v);
            }
        for (zb::SimdLevel l : levels.all) {
            zb::set_simd_level(l);
            double vmin = 0, vmax = 0;
            ASSERT_TRUE(zb::value_range(ZB_F32, x.data(), x.size(), has_fill, fill, 2, vmin, vmax));
            EXPECT_EQ(vmin, (double)lo) << zb::simd_level_name(l);
            EXPECT_EQ(vmax, (double)hi) << zb::simd_level_name(l);
        }
    }
}

// Whole streams: the same bytes and the same decoded values at every level.
template <typename T> void streams_identical() {
    Levels levels;
    const std::vector<size_t> dims{37, 65, 129};
    std::vector<T> x = zbt::smooth_field<T>(dims, 0.05, 21);
    for (size_t i = 3; i < x.size(); i += 1013) x[i] = std::numeric_limits<T>::quiet_NaN();
    for (size_t i = 500; i < 900; ++i) x[i] = (T)-999.0;
    for (size_t i = 7; i < x.size(); i += 4099) x[i] *= (T)1e6;   // escapes
    const std::pair<zb_predictor, zb_encoder> pipelines[] = {{ZB_PRED_LORENZO, ZB_ENC_FAST},
                                                             {ZB_PRED_LORENZO, ZB_ENC_RATIO},
                                                             {ZB_PRED_INTERP, ZB_ENC_RATIO},
                                                             {ZB_PRED_INTERP, ZB_ENC_FAST}};
    for (const auto &pipe : pipelines)
        for (zb_mode mode : {ZB_MODE_REL, ZB_MODE_ABS, ZB_MODE_PW_REL}) {
            zb_params p = zb_params_default();
            p.mode = mode;
            p.bound = mode == ZB_MODE_ABS ? 1e-2 : 1e-3;
            p.predictor = pipe.first;
            p.encoder = pipe.second;
            p.backend = ZB_BACKEND_CPU;
            p.has_fill = 1;
            p.fill_bits = zbt::bits((T)-999.0);
            zb::set_simd_level(zb::kSimdBase);
            const zbt::Stream ref = zbt::compress(x, dims, p);
            ASSERT_EQ(ref.status, ZB_OK);
            std::vector<T> ref_out(x.size());
            ASSERT_EQ(zb_decompress(ref.bytes.data(), ref.bytes.size(), ref_out.data(), ref_out.size() * sizeof(T),
                                    ZB_BACKEND_CPU, nullptr),
                      ZB_OK);
            for (zb::SimdLevel l : levels.all) {
                SCOPED_TRACE(std::string(zb::simd_level_name(l)) + " pipeline " + std::to_string(pipe.first) + "/" +
                             std::to_string(pipe.second) + " mode " + std::to_string(mode));
                zb::set_simd_level(l);
                const zbt::Stream s = zbt::compress(x, dims, p);
                ASSERT_EQ(s.status, ZB_OK);
                EXPECT_TRUE(s.bytes == ref.bytes) << "stream differs from the baseline level's";
                std::vector<T> out(x.size());
                ASSERT_EQ(zb_decompress(ref.bytes.data(), ref.bytes.size(), out.data(), out.size() * sizeof(T),
                                        ZB_BACKEND_CPU, nullptr),
                          ZB_OK);
                EXPECT_EQ(std::memcmp(out.data(), ref_out.data(), out.size() * sizeof(T)), 0)
                    << "decoded values differ from the baseline level's";
            }
        }
}

TEST(Simd, StreamsIdenticalAtEveryLevelF32) { streams_identical<float>(); }
TEST(Simd, StreamsIdenticalAtEveryLevelF64) { streams_identical<double>(); }

// The interp predictor's AVX2 rows (core/src/interp_rows_avx2.cpp) against the baseline's scalar ones: smooth fields
// with every kind of hard value mixed in (NaN and infinities next to points, which make splines non-finite; signed
// zeros; values far beyond the code radius; random bit patterns; the fill value), shapes whose rows are shorter than
// a vector, not a multiple of it, or strided by 1, 2 and 8, every spline case at the borders, both encoders, a
// bound of several sizes. The same bytes at every level, and the same decoded values. Also without the hard values
// and a coarse bound: streams without exceptions, which the decoder's rows read without a mask.
template <typename T> void interp_rows_identical() {
    Levels levels;
    const std::vector<std::vector<size_t>> shapes{{1000}, {3, 5}, {33, 47}, {9, 17, 35}, {5, 6, 7}, {20, 64, 70}};
    for (const auto &dims : shapes)
        for (double eb : {1e-4, 1e-2, 0.5})
            for (zb_encoder enc : {ZB_ENC_RATIO, ZB_ENC_FAST})
                for (int has_fill : {0, 1, 2}) {   // 2: no hard values, no fill
                    const bool hard_mix = has_fill < 2;
                    if (!hard_mix && eb < 0.5) continue;
                    std::vector<T> x = zbt::smooth_field<T>(dims, 0.05, (uint32_t)dims.size() * 7 + has_fill);
                    const std::vector<T> hard = hard_values<T>(x.size(), eb, (uint32_t)(eb * 1e4) + has_fill);
                    if (hard_mix)
                        for (size_t i = 0; i < x.size(); i += 11) x[i] = hard[i];
                    zb_params p = zbt::cpu_params(ZB_MODE_ABS, eb, ZB_PRED_INTERP, enc);
                    p.has_fill = has_fill == 1;
                    p.fill_bits = zbt::bits((T)-999.0);
                    zb::set_simd_level(zb::kSimdBase);
                    const zbt::Stream ref = zbt::compress(x, dims, p);
                    ASSERT_EQ(ref.status, ZB_OK);
                    zb_stream_info info;
                    ASSERT_EQ(zb_stream_info_get(ref.bytes.data(), ref.bytes.size(), &info), ZB_OK);
                    if (!hard_mix) {
                        EXPECT_EQ(info.exceptions, 0u) << "meant to have no exceptions";
                    }
                    std::vector<T> ref_out(x.size());
                    ASSERT_EQ(zb_decompress(ref.bytes.data(), ref.bytes.size(), ref_out.data(),
                                            ref_out.size() * sizeof(T), ZB_BACKEND_CPU, nullptr),
                              ZB_OK);
                    for (zb::SimdLevel l : levels.all) {
                        SCOPED_TRACE(std::string(zb::simd_level_name(l)) + " rank " + std::to_string(dims.size()) +
                                     " eb " + std::to_string(eb) + " encoder " + std::to_string(enc) + " fill " +
                                     std::to_string(has_fill));
                        zb::set_simd_level(l);
                        const zbt::Stream s = zbt::compress(x, dims, p);
                        ASSERT_EQ(s.status, ZB_OK);
                        EXPECT_TRUE(s.bytes == ref.bytes) << "stream differs from the baseline level's";
                        std::vector<T> out(x.size());
                        ASSERT_EQ(zb_decompress(ref.bytes.data(), ref.bytes.size(), out.data(),
                                                out.size() * sizeof(T), ZB_BACKEND_CPU, nullptr),
                                  ZB_OK);
                        EXPECT_EQ(std::memcmp(out.data(), ref_out.data(), out.size() * sizeof(T)), 0)
                            << "decoded values differ from the baseline level's";
                    }
                }
}

TEST(Simd, InterpRowsIdenticalAtEveryLevelF32) { interp_rows_identical<float>(); }
TEST(Simd, InterpRowsIdenticalAtEveryLevelF64) { interp_rows_identical<double>(); }

TEST(Simd, ReportsItsLevel) {
    std::printf("vector level: %s (this CPU supports up to %s)\n", zb::simd_level_name(zb::simd_level()),
                zb::simd_level_name(zb::simd_level_supported()));
    EXPECT_LE(zb::simd_level(), zb::simd_level_supported());
}

}  // namespace
