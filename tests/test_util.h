// Helpers shared by the C++ tests: data generators, codec wrappers, and the per-value bound check.
#pragma once
#include <gtest/gtest.h>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>
#include "zb_bytes.h"
#include "zb_crc32c.h"
#include "zb_format.h"
#include "zb_shape.h"
#include "zbound.h"

namespace zbt {

// Sets (or, with value null, unsets) an environment variable for the lifetime of the object, then restores it.
class ScopedEnv {
public:
    ScopedEnv(const char *name, const char *value) : name_(name) {
        if (const char *e = std::getenv(name)) saved_ = e, had_ = true;
        if (value) setenv(name, value, 1);
        else unsetenv(name);
    }
    ~ScopedEnv() {
        if (had_) setenv(name_.c_str(), saved_.c_str(), 1);
        else unsetenv(name_.c_str());
    }
    ScopedEnv(const ScopedEnv &) = delete;
    ScopedEnv &operator=(const ScopedEnv &) = delete;

private:
    std::string name_, saved_;
    bool had_ = false;
};

template <typename T> constexpr zb_dtype dtype_of() { return sizeof(T) == 8 ? ZB_F64 : ZB_F32; }

// The library's shape of an array of these dims (zb::fold_shape, as the API builds it).
inline zb::Shape shape_of(const std::vector<size_t> &d) {
    zb::Shape s;
    EXPECT_TRUE(zb::fold_shape((int)d.size(), d.data(), s));
    return s;
}

// Parameters for the CPU backend: `bound` in `mode`, the given predictor and encoder, `threads` (0: the default).
inline zb_params cpu_params(zb_mode mode, double bound, zb_predictor pred, zb_encoder enc, int threads = 0) {
    zb_params p = zb_params_default();
    p.mode = mode;
    p.bound = bound;
    p.predictor = pred;
    p.encoder = enc;
    p.backend = ZB_BACKEND_CPU;
    p.threads = threads;
    return p;
}

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

// threads 0: ZBOUND_THREADS or all cores (zb_decompress); else zb_decompress_threads on that many.
template <typename T> zb_status decompress(const std::vector<uint8_t> &stream, std::vector<T> &out,
                                           zb_backend backend = ZB_BACKEND_CPU, int threads = 0) {
    if (threads == 0)
        return zb_decompress(stream.data(), stream.size(), out.data(), out.size() * sizeof(T), backend, nullptr);
    return zb_decompress_threads(stream.data(), stream.size(), out.data(), out.size() * sizeof(T), backend, threads,
                                 nullptr);
}

inline double abs_bound_of(const std::vector<uint8_t> &stream) {
    zb_stream_info info;
    EXPECT_EQ(zb_stream_info_get(stream.data(), stream.size(), &info), ZB_OK);
    return info.abs_bound;
}

// The per-value check behind count_violations and count_pw_violations. Values kept bit for bit: NaN, Inf, the fill
// value and -0.0 (point-wise: every zero). The others: |x - x'| <= bound in double, or point-wise
// |x - x'| <= bound * |x| in long double. Returns the number of violations and reports the first few.
template <typename T>
size_t count_bad_values(const std::vector<T> &orig, const std::vector<T> &dec, double bound, bool point_wise,
                        bool has_fill, T fill) {
    size_t bad = 0;
    for (size_t i = 0; i < orig.size(); ++i) {
        const T a = orig[i], b = dec[i];
        const bool exact = !std::isfinite(a) || (has_fill && bits(a) == bits(fill)) ||
                           (a == 0 && (point_wise || std::signbit(a)));
        bool ok;
        if (exact) {
            ok = bits(a) == bits(b);
        } else if (point_wise) {
            ok = std::fabs((long double)a - (long double)b) <= (long double)bound * std::fabs((long double)a);
        } else {
            ok = std::fabs((double)a - (double)b) <= bound;
        }
        if (!ok && ++bad <= 5)
            ADD_FAILURE() << "value " << i << ": original " << a << " decoded " << b
                          << (point_wise ? " pw_rel " : " bound ") << bound;
    }
    return bad;
}

// Every finite non-fill value within eb; every other value (NaN, Inf, fill, -0.0) bit-exact.
template <typename T>
size_t count_violations(const std::vector<T> &orig, const std::vector<T> &dec, double eb, bool has_fill = false,
                        T fill = T(0)) {
    return count_bad_values(orig, dec, eb, false, has_fill, fill);
}

// Finite non-fill x: |x - x'| <= pw |x| (so zeros exactly); NaN, Inf, fill and every zero bit for bit.
template <typename T>
size_t count_pw_violations(const std::vector<T> &orig, const std::vector<T> &dec, double pw, bool has_fill = false,
                           T fill = T(0)) {
    return count_bad_values(orig, dec, pw, true, has_fill, fill);
}

// Reads a PLOT3D q file (the NASA CFD fields of ../shared/data): 3 big-endian int32 dims (ni, nj, nk), 4 floats,
// then 5 variables of nk x nj x ni big-endian floats; dims = {5, nk, nj, ni}.
inline bool read_plot3d(const std::string &path, std::vector<float> &out, std::vector<size_t> &dims) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return false;
    std::vector<uint8_t> raw((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (raw.size() < 28) return false;
    auto be32 = [&](size_t off) {
        return (uint32_t)raw[off] << 24 | (uint32_t)raw[off + 1] << 16 | (uint32_t)raw[off + 2] << 8 | raw[off + 3];
    };
    const size_t ni = be32(0), nj = be32(4), nk = be32(8), n = 5 * nk * nj * ni;
    if (raw.size() < 28 + 4 * n) return false;
    out.resize(n);
    for (size_t i = 0; i < n; ++i) {
        const uint32_t u = be32(28 + 4 * i);
        std::memcpy(&out[i], &u, 4);
    }
    dims = {5, nk, nj, ni};
    return true;
}

// Re-seals a modified stream with valid checksums, so that the structural checks must catch the damage.
inline void reseal(std::vector<uint8_t> &s) {
    if (s.size() < zb::kHeaderFixedBytes) return;
    const int nseg = zb::get_u16(s.data() + 14);
    const size_t hb = zb::kHeaderFixedBytes + 16 * (size_t)nseg + 8;
    if (s.size() < hb) return;
    zb::put_u32(s.data() + hb - 8, zb::payload_checksum(s.data() + hb, s.size() - hb, 1));
    zb::put_u32(s.data() + hb - 4, zb::crc32c(s.data(), hb - 4));
}

// A v2-layout stream with one stored escape fewer (delta -1: the last one dropped) or more (+1: a 1 appended) in
// segment esc_seg; header count and flag, segment length and the later offsets kept consistent, checksums sealed.
inline std::vector<uint8_t> with_escape_count(const std::vector<uint8_t> &good, int esc_seg, int delta) {
    zb::Header h;
    std::string msg;
    EXPECT_EQ(zb::read_header(good.data(), good.size(), h, msg, false), ZB_OK) << msg;
    const size_t hb = h.header_bytes();
    zb::Header g = h;
    g.escapes = h.escapes + delta;
    if (g.escapes == 0) g.flags &= (uint8_t)~zb::kFlagEscapes;   // the header's flag follows the count
    std::vector<uint8_t> payload(good.begin() + hb, good.end());
    const size_t end = h.seg[esc_seg].offset + h.seg[esc_seg].length;
    if (delta < 0) payload.erase(payload.begin() + end - 4, payload.begin() + end);
    else payload.insert(payload.begin() + end, {1, 0, 0, 0});
    g.seg[esc_seg].length += 4 * delta;
    for (int k = esc_seg + 1; k < g.nsegments; ++k) g.seg[k].offset += 4 * delta;
    std::vector<uint8_t> s(hb + payload.size());
    std::copy(payload.begin(), payload.end(), s.begin() + hb);
    zb::write_header(g, s.data());
    reseal(s);
    EXPECT_EQ(zb::read_header(s.data(), s.size(), g, msg, true), ZB_OK) << "escapes " << delta << ": " << msg;
    return s;
}

// A pw_rel (format v5) stream with byte `off` of its inner stream's header flipped (0x01) and that inner header's
// own CRC fixed, then the container resealed: the inner header parses but no longer matches the container.
// hb: the container's header bytes (the inner stream starts after 8 parameter bytes).
inline void flip_inner_header_byte(std::vector<uint8_t> &t, size_t hb, size_t off) {
    uint8_t *inner = t.data() + hb + 8;
    inner[off] ^= 0x01;
    const int nseg = zb::get_u16(inner + 14);
    const size_t ihb = zb::kHeaderFixedBytes + 16 * (size_t)nseg + 8;
    zb::put_u32(inner + ihb - 4, zb::crc32c(inner, ihb - 4));
    reseal(t);
}

}  // namespace zbt
