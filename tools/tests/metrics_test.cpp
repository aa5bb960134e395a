// The bound checker behind `zbound bench` must catch what it exists to catch: a value one step past the bound,
// a NaN reconstruction, a changed NaN payload, +0.0 for -0.0, a changed fill value, and a violation that plain
// double arithmetic would round away.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>
#include "metrics.h"

using zbtool::compare_arrays;

namespace {

template <typename T, typename U> T from_bits(U u) { T v; std::memcpy(&v, &u, sizeof v); return v; }

TEST(ToolMetrics, IdenticalArraysHaveNoError) {
    std::vector<float> a = {1.f, -2.5f, 3.25f, NAN, INFINITY, -0.0f};
    auto s = compare_arrays(ZB_F32, a.data(), a.data(), a.size(), 0.0, false, 0);
    EXPECT_TRUE(s.ok());
    EXPECT_EQ(s.checked, 4u);  // -0.0 is checked against the bound and compared bit for bit
    EXPECT_EQ(s.specials, 3u);
    EXPECT_EQ(s.max_abs_error, 0.0);
    EXPECT_TRUE(std::isinf(s.psnr()));
}

TEST(ToolMetrics, OneUlpPastTheBoundIsAViolation) {
    const double eb = 0.5;
    std::vector<float> a = {10.f, 20.f, 30.f}, b = a;
    b[1] = 20.5f;  // exactly eb: allowed
    auto ok = compare_arrays(ZB_F32, a.data(), b.data(), a.size(), eb, false, 0);
    EXPECT_TRUE(ok.ok());
    EXPECT_EQ(ok.max_abs_error, eb);
    b[1] = std::nextafter(20.5f, 100.f);
    auto bad = compare_arrays(ZB_F32, a.data(), b.data(), a.size(), eb, false, 0);
    EXPECT_EQ(bad.violations, 1u);
    EXPECT_EQ(bad.max_error_index, 1u);
    EXPECT_FALSE(bad.ok());
}

TEST(ToolMetrics, ViolationHiddenByDoubleRoundingIsCaught) {
    // 1 - (-2^-60) rounds to 1.0 in double, which would pass eb = 1; the true error is larger.
    std::vector<double> a = {1.0}, b = {-std::ldexp(1.0, -60)};
    ASSERT_EQ(a[0] - b[0], 1.0);
    auto s = compare_arrays(ZB_F64, a.data(), b.data(), 1, 1.0, false, 0);
    EXPECT_EQ(s.violations, 1u);
}

TEST(ToolMetrics, NaNReconstructionOfAFiniteValueIsAViolation) {
    std::vector<float> a = {1.f, 2.f}, b = {1.f, NAN};
    auto s = compare_arrays(ZB_F32, a.data(), b.data(), 2, 1e30, false, 0);
    EXPECT_EQ(s.violations, 1u);
}

TEST(ToolMetrics, SpecialValuesMustMatchBitForBit) {
    const float nan_a = from_bits<float>(0x7FC00001u), nan_b = from_bits<float>(0x7FC00002u);
    struct Case { float orig, recon; };
    for (Case c : {Case{nan_a, nan_b}, Case{INFINITY, -INFINITY}, Case{-0.0f, 0.0f}, Case{NAN, 0.f}}) {
        auto s = compare_arrays(ZB_F32, &c.orig, &c.recon, 1, 1.0, false, 0);
        EXPECT_EQ(s.special_mismatches, 1u) << c.orig << " -> " << c.recon;
        EXPECT_FALSE(s.ok());
    }
    double nan64 = from_bits<double>(0x7FF8000000000123ull), nan64b = from_bits<double>(0x7FF8000000000124ull);
    EXPECT_EQ(compare_arrays(ZB_F64, &nan64, &nan64b, 1, 1.0, false, 0).special_mismatches, 1u);
}

TEST(ToolMetrics, FillValueIsExactAndOutsideTheRange) {
    const float fill = -9999.9f;
    uint32_t fbits;
    std::memcpy(&fbits, &fill, 4);
    std::vector<float> a = {1.f, fill, 3.f}, b = {1.f, -9999.8f, 3.f};
    auto s = compare_arrays(ZB_F32, a.data(), b.data(), 3, 1.0, true, fbits);
    EXPECT_EQ(s.special_mismatches, 1u);  // within 1.0, but the fill value must be exact
    EXPECT_EQ(s.vmin, 1.0);
    EXPECT_EQ(s.vmax, 3.0);
    auto same = compare_arrays(ZB_F32, a.data(), a.data(), 3, 0.0, true, fbits);
    EXPECT_TRUE(same.ok());
}

TEST(ToolMetrics, PsnrAndNrmseFollowTheirDefinitions) {
    std::vector<double> a = {0.0, 1.0, 2.0, 4.0}, b = {0.1, 1.0, 2.0, 3.9};
    auto s = compare_arrays(ZB_F64, a.data(), b.data(), 4, 0.1, false, 0);
    const double mse = (0.01 + 0.01) / 4.0;
    EXPECT_NEAR(s.mse, mse, 1e-15);
    EXPECT_NEAR(s.psnr(), 20 * std::log10(4.0) - 10 * std::log10(mse), 1e-9);
    EXPECT_NEAR(s.nrmse(), std::sqrt(mse) / 4.0, 1e-12);
}

TEST(ToolMetrics, PointWiseBoundIsPerValue) {
    // pw_rel 0.01: 100 -> 101 is exactly at the bound, 1 -> 1.02 breaks it although its absolute error is small,
    // and a zero must stay a zero.
    std::vector<double> a = {100.0, -1.0, 0.0, 5.0}, b = {101.0, -1.005, 0.0, 5.0};
    auto ok = compare_arrays(ZB_F64, a.data(), b.data(), 4, 0.0, false, 0, 0.01);
    EXPECT_EQ(ok.violations, 0u);
    EXPECT_NEAR(ok.max_err_over_bound, 1.0, 1e-12);
    b[1] = -1.02;
    EXPECT_EQ(compare_arrays(ZB_F64, a.data(), b.data(), 4, 0.0, false, 0, 0.01).violations, 1u);
    b[1] = -1.0;
    b[2] = 1e-300;
    auto zero = compare_arrays(ZB_F64, a.data(), b.data(), 4, 0.0, false, 0, 0.01);
    EXPECT_EQ(zero.violations, 1u);
    EXPECT_EQ(zero.max_err_over_bound, INFINITY);
}

}  // namespace
