// Helpers shared by the C++ tests: data generators, codec wrappers, and the per-value bound check.
#pragma once
#include <gtest/gtest.h>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>
#include "zbound.h"

namespace zbt {

template <typename T> constexpr zb_dtype dtype_of() { return sizeof(T) == 8 ? ZB_F64 : ZB_F32; }

template <typename T> uint64_t bits(T v) {
    uint64_t u = 0;
    std::memcpy(&u, &v, sizeof(T));
    return u;
}

// A smooth field (sum of waves over the flattened index and coordinates) plus noise of relative size `noise`.
template <typename T>
std::vector<T> smooth_field(const std::vector<size_t> &dims, double noise, uint32_t seed, double offset = 0) {
    size_t n = 1;
    for (size_t d : dims) n *= d;
    std::vector<T> v(n);
    std::mt19937 rng(seed);
    std::normal_distribution<double> g(0.0, 1.0);
    const size_t nx = dims.empty() ? 1 : dims.back();
    for (size_t i = 0; i < n; ++i) {
        const double x = (double)(i % nx), y = (double)(i / nx);
        v[i] = (T)(offset + 10.0 * std::sin(0.05 * x) * std::cos(0.013 * y) + 3.0 * std::sin(0.002 * (double)i) +
                   noise * g(rng));
    }
    return v;
}

struct Stream {
    std::vector<uint8_t> bytes;
    zb_status status = ZB_OK;
};

template <typename T>
Stream compress(const std::vector<T> &data, const std::vector<size_t> &dims, const zb_params &p) {
    Stream s;
    s.bytes.resize(zb_compress_bound(dtype_of<T>(), data.size()));
    size_t len = 0;
    s.status = zb_compress(&p, dtype_of<T>(), data.data(), (int)dims.size(), dims.data(), s.bytes.data(),
                           s.bytes.size(), &len, nullptr);
    s.bytes.resize(s.status == ZB_OK ? len : 0);
    return s;
}

template <typename T> zb_status decompress(const std::vector<uint8_t> &stream, std::vector<T> &out,
                                           zb_backend backend = ZB_BACKEND_CPU) {
    return zb_decompress(stream.data(), stream.size(), out.data(), out.size() * sizeof(T), backend, nullptr);
}

inline double abs_bound_of(const std::vector<uint8_t> &stream) {
    zb_stream_info info;
    EXPECT_EQ(zb_stream_info_get(stream.data(), stream.size(), &info), ZB_OK);
    return info.abs_bound;
}

// Every finite non-fill value within eb; every other value (NaN, Inf, fill, -0.0) bit-exact. Returns the number
// of violations (0 expected) and reports the first few.
template <typename T>
size_t count_violations(const std::vector<T> &orig, const std::vector<T> &dec, double eb, bool has_fill = false,
                        T fill = T(0)) {
    size_t bad = 0;
    for (size_t i = 0; i < orig.size(); ++i) {
        const T a = orig[i], b = dec[i];
        const bool exact = !std::isfinite(a) || (has_fill && bits(a) == bits(fill)) ||
                           (a == 0 && std::signbit(a));
        const bool ok = exact ? bits(a) == bits(b) : std::fabs((double)a - (double)b) <= eb;
        if (!ok && ++bad <= 5)
            ADD_FAILURE() << "value " << i << ": original " << a << " decoded " << b << " bound " << eb;
    }
    return bad;
}

}  // namespace zbt
