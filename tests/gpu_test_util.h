// Helpers of the GPU tests: the skip when there is no GPU, and the parity check (CPU and GPU give the same bytes,
// each decoder reads the other's stream into the same values, every value within the bound).
#pragma once
#include <gtest/gtest.h>
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include "test_util.h"
#include "zb_format.h"
#include "zbound.h"

// Skips the current test, visibly, when no GPU can be used (CI machines, CPU-only builds).
#define ZB_REQUIRE_GPU()                                                                                        \
    do {                                                                                                        \
        if (!zb_gpu_available())                                                                                \
            GTEST_SKIP() << "no GPU: zb_gpu_available() is 0 (no CUDA device or driver, or a CPU-only build)"; \
    } while (0)

namespace gput {

// Parameters for one pipeline: `predictor` with `encoder`, `bound` in `mode` (backend and threads at their defaults).
inline zb_params pipeline_params(zb_predictor predictor, zb_encoder encoder, zb_mode mode, double bound) {
    zb_params p = zb_params_default();
    p.predictor = predictor;
    p.encoder = encoder;
    p.mode = mode;
    p.bound = bound;
    return p;
}

// Under compute-sanitizer each GPU call runs 10-1000x slower, and the tests with hundreds of corrupted streams or
// parameter sets do not finish in a device session (bench/NOTES.md 136). ZBOUND_TEST_SAMPLE=K makes those loops
// run about one item in K (or trials / K trials): the same kernels and paths, fewer repetitions
// (tests/gpu_sanitize.sh sets 8). Without it, or with K <= 1, every item runs.
inline size_t sample_stride() {
    static const size_t stride = [] {
        const char *e = std::getenv("ZBOUND_TEST_SAMPLE");
        const long k = e ? std::atol(e) : 1;
        return k > 1 ? (size_t)k : (size_t)1;
    }();
    return stride;
}
// Whether loop item `item` runs. The items are picked by a hash of the index, not as every K-th, which would line up
// with the loops' nesting (every 8th item of a loop over 4 pipelines is always the same pipeline).
inline bool sampled(size_t item) {
    if (sample_stride() == 1) return true;
    const uint64_t h = ((uint64_t)item + 1) * 0x9E3779B97F4A7C15ull;
    return (h >> 40) % sample_stride() == 0;
}
inline int sampled_trials(int trials) { return std::max(1, trials / (int)sample_stride()); }
// For a loop over `count` variants (bounds, say) of item `item` (a field): all of them without sampling, else
// variant item % count only, so that the items take the variants in turn and every item is still checked.
inline bool sampled_variant(size_t item, size_t variant, size_t count) {
    return sample_stride() == 1 || variant == item % count;
}

// A field with every segment in use: smooth values, NaN runs and isolated outliers (exceptions), spikes (escapes).
template <typename T> std::vector<T> busy_field(const std::vector<size_t> &dims, uint32_t seed) {
    auto v = zbt::smooth_field<T>(dims, 0.01, seed, 5.0);
    std::mt19937 rng(seed);
    for (size_t i = 0; i < v.size(); i += 1 + rng() % 200) v[i] += (T)(((rng() & 1) ? 1 : -1) * 90.0);
    for (size_t i = 0; i < v.size(); i += 1 + rng() % 500) {
        const size_t len = 1 + rng() % 40;
        const T val = (rng() & 1) ? std::numeric_limits<T>::quiet_NaN() : (T)1e30;
        for (size_t j = i; j < std::min(v.size(), i + len); ++j) v[j] = val;
    }
    return v;
}

// Recomputes the payload checksum and the header CRC of a stream whose header still parses (structure intact),
// so that a modification reaches the decoders' own consistency checks; false when the header does not parse.
inline bool reseal_parsed(std::vector<uint8_t> &s) {
    zb::Header h;
    std::string msg;
    if (zb::read_header(s.data(), s.size(), h, msg, false) != ZB_OK) return false;
    const size_t hb = h.header_bytes();
    zb::put_u32(&s[hb - 8], zb::payload_checksum(s.data() + hb, (size_t)h.payload_bytes(), 1));
    zb::put_u32(&s[hb - 4], zb::crc32c(s.data(), hb - 4));
    return true;
}


template <typename T>
zbt::Stream compress_on(zb_backend backend, const std::vector<T> &data, const std::vector<size_t> &dims, zb_params p,
                        zb_run_stats *stats = nullptr) {
    p.backend = backend;
    zbt::Stream s;
    s.bytes.resize(zb_compress_bound(zbt::dtype_of<T>(), data.size()));
    size_t len = 0;
    s.status = zb_compress(&p, zbt::dtype_of<T>(), data.data(), (int)dims.size(), dims.data(), s.bytes.data(),
                           s.bytes.size(), &len, stats);
    s.bytes.resize(s.status == ZB_OK ? len : 0);
    return s;
}

// Where two streams first differ, named by header field region or payload segment.
inline std::string first_difference(const std::vector<uint8_t> &a, const std::vector<uint8_t> &b) {
    const size_t m = std::min(a.size(), b.size());
    size_t i = 0;
    while (i < m && a[i] == b[i]) ++i;
    std::string where = "sizes " + std::to_string(a.size()) + " vs " + std::to_string(b.size()) + ", first difference at " +
                        std::to_string(i);
    zb::Header h;
    std::string msg;
    if (zb::read_header(a.data(), a.size(), h, msg, false) != ZB_OK) return where + " (first stream unreadable: " + msg + ")";
    const size_t hb = h.header_bytes();
    if (i < hb) return where + " (header)";
    for (int s = 0; s < h.nsegments; ++s)
        if (i - hb >= h.seg[s].offset && i - hb < h.seg[s].offset + h.seg[s].length)
            return where + " (segment " + std::to_string(s) + ", byte " + std::to_string(i - hb - h.seg[s].offset) + ")";
    return where;
}

template <typename T>
size_t first_value_difference(const std::vector<T> &a, const std::vector<T> &b) {
    for (size_t i = 0; i < a.size(); ++i)
        if (zbt::bits(a[i]) != zbt::bits(b[i])) return i;
    return a.size();
}

// The parity check of one array and parameter set. `what` names the case in failure messages.
template <typename T>
void expect_parity(const std::vector<T> &data, const std::vector<size_t> &dims, const zb_params &p,
                   const std::string &what) {
    SCOPED_TRACE(what);
    zb_run_stats st{};
    const zbt::Stream cpu = compress_on(ZB_BACKEND_CPU, data, dims, p);
    ASSERT_EQ(cpu.status, ZB_OK) << "CPU compress: " << zb_last_error();
    const zbt::Stream gpu = compress_on(ZB_BACKEND_GPU, data, dims, p, &st);
    ASSERT_EQ(gpu.status, ZB_OK) << "GPU compress: " << zb_last_error();
    EXPECT_EQ(st.backend_used, ZB_BACKEND_GPU);  // pw_rel too: transform, inner stream and check on the device
    EXPECT_TRUE(cpu.bytes == gpu.bytes) << "CPU and GPU streams differ: " << first_difference(cpu.bytes, gpu.bytes);

    // Cross decoding: the GPU reads the CPU's stream, the CPU reads the GPU's.
    std::vector<T> from_cpu_stream(data.size()), from_gpu_stream(data.size());
    st = zb_run_stats{};
    ASSERT_EQ(zb_decompress(cpu.bytes.data(), cpu.bytes.size(), from_cpu_stream.data(), data.size() * sizeof(T),
                            ZB_BACKEND_GPU, &st),
              ZB_OK)
        << "GPU decompress: " << zb_last_error();
    EXPECT_EQ(st.backend_used, ZB_BACKEND_GPU);
    ASSERT_EQ(zb_decompress(gpu.bytes.data(), gpu.bytes.size(), from_gpu_stream.data(), data.size() * sizeof(T),
                            ZB_BACKEND_CPU, nullptr),
              ZB_OK)
        << "CPU decompress: " << zb_last_error();
    const size_t d = first_value_difference(from_cpu_stream, from_gpu_stream);
    EXPECT_EQ(d, data.size()) << "GPU and CPU decoders differ at value " << d << ": " << from_cpu_stream[d] << " vs "
                              << from_gpu_stream[d];
    const bool has_fill = p.has_fill != 0;
    T fill{};
    if (has_fill) {
        const uint64_t fb = p.fill_bits;
        std::memcpy(&fill, &fb, sizeof(T));  // little-endian: the low bytes hold an f32 fill
    }
    if (p.mode == ZB_MODE_PW_REL) {
        EXPECT_EQ(zbt::count_pw_violations(data, from_cpu_stream, p.bound, has_fill, fill), 0u);
    } else {
        EXPECT_EQ(zbt::count_violations(data, from_cpu_stream, zbt::abs_bound_of(cpu.bytes), has_fill, fill), 0u);
    }
}

}  // namespace gput
