// Helpers of the reliability tests (tests/rel_*.cpp): varied arrays, CPU reference runs, byte comparisons.
#pragma once
#include <gtest/gtest.h>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>
#include "test_util.h"
#include "zbound.h"

namespace relt {

// One array and its parameters, in bytes so that f32 and f64 cases share one container.
struct Case {
    zb_dtype dtype = ZB_F32;
    std::vector<size_t> dims;
    std::vector<uint8_t> data;   // n values of dtype
    zb_params params = zb_params_default();

    size_t n() const {
        size_t k = 1;
        for (size_t d : dims) k *= d;
        return k;
    }
    size_t value_bytes() const { return dtype == ZB_F64 ? 8 : 4; }
};

template <typename T> std::vector<uint8_t> as_bytes(const std::vector<T> &v) {
    std::vector<uint8_t> b(v.size() * sizeof(T));
    if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
    return b;
}

// A smooth field plus noise, with NaN, +-Inf, -0.0 and (when has_fill) the fill value sprinkled in.
template <typename T>
Case make_case(const std::vector<size_t> &dims, zb_mode mode, double bound, uint32_t seed, bool specials,
               bool has_fill = false) {
    Case c;
    c.dtype = zbt::dtype_of<T>();
    c.dims = dims;
    std::vector<T> v = zbt::smooth_field<T>(dims, 0.05, seed, 100.0 * (seed % 7));
    const T fill = (T)-9999.9;
    if (specials && v.size() > 64) {
        for (size_t i = seed % 13; i < v.size(); i += 61) v[i] = std::numeric_limits<T>::quiet_NaN();
        for (size_t i = seed % 17; i < v.size(); i += 173) v[i] = -std::numeric_limits<T>::infinity();
        v[3] = std::numeric_limits<T>::infinity();
        v[4] = (T)-0.0;
        if (has_fill)
            for (size_t i = 5; i < v.size(); i += 89) v[i] = fill;
    }
    c.data = as_bytes(v);
    c.params.mode = mode;
    c.params.bound = bound;
    if (has_fill) {
        c.params.has_fill = 1;
        c.params.fill_bits = zbt::bits(fill);
    }
    return c;
}

struct Result {
    zb_status status = ZB_OK;
    std::vector<uint8_t> stream;
    zb_status dstatus = ZB_OK;
    std::vector<uint8_t> decoded;
    zb_backend used = ZB_BACKEND_CPU;
};

// Compresses and decompresses a case with the given backend and thread count.
inline Result run(const Case &c, zb_backend backend, int threads, zb_backend dbackend) {
    Result r;
    zb_params p = c.params;
    p.backend = backend;
    p.threads = threads;
    r.stream.resize(zb_compress_bound(c.dtype, c.n()));
    size_t len = 0;
    zb_run_stats st;
    std::memset(&st, 0, sizeof st);
    r.status = zb_compress(&p, c.dtype, c.data.data(), (int)c.dims.size(), c.dims.data(), r.stream.data(),
                           r.stream.size(), &len, &st);
    r.used = st.backend_used;
    if (r.status != ZB_OK) {
        r.stream.clear();
        return r;
    }
    r.stream.resize(len);
    r.decoded.assign(c.n() * c.value_bytes(), 0xEE);
    r.dstatus = zb_decompress(r.stream.data(), r.stream.size(), r.decoded.data(), r.decoded.size(), dbackend, nullptr);
    return r;
}

// Number of values that break the guarantee (finite non-fill values within eb, the rest bit-exact).
inline size_t violations(const Case &c, const std::vector<uint8_t> &decoded, double eb) {
    size_t bad = 0;
    const size_t n = c.n();
    for (size_t i = 0; i < n; ++i) {
        if (c.dtype == ZB_F64) {
            double a, b;
            std::memcpy(&a, &c.data[8 * i], 8);
            std::memcpy(&b, &decoded[8 * i], 8);
            const bool exact = !std::isfinite(a) || (c.params.has_fill && zbt::bits(a) == c.params.fill_bits) ||
                               (a == 0 && std::signbit(a));
            bad += exact ? zbt::bits(a) != zbt::bits(b) : !(std::fabs(a - b) <= eb);
        } else {
            float a, b;
            std::memcpy(&a, &c.data[4 * i], 4);
            std::memcpy(&b, &decoded[4 * i], 4);
            const bool exact = !std::isfinite(a) ||
                               (c.params.has_fill && zbt::bits(a) == (c.params.fill_bits & 0xffffffffu)) ||
                               (a == 0 && std::signbit(a));
            bad += exact ? zbt::bits(a) != zbt::bits(b) : !(std::fabs((double)a - (double)b) <= eb);
        }
    }
    return bad;
}

inline double stream_eb(const std::vector<uint8_t> &s) {
    zb_stream_info info;
    if (zb_stream_info_get(s.data(), s.size(), &info) != ZB_OK) return -1;
    return info.abs_bound;
}

// Skips the current test, visibly, when no GPU can be used.
#define REL_REQUIRE_GPU()                                                                                       \
    do {                                                                                                        \
        if (!zb_gpu_available())                                                                                \
            GTEST_SKIP() << "no GPU: zb_gpu_available() is 0 (no CUDA device or driver, or a CPU-only build)"; \
    } while (0)

}  // namespace relt
