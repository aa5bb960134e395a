// The device-pointer API: zb_compress_device / zb_decompress_device give the CPU's bytes and values, on the default
// stream and on a caller's stream, with unaligned input and stream buffers, raw passthrough, and errors for small buffers,
// truncated and corrupted streams; for the Lorenzo predictor with the fast encoder (v1) and the ratio encoder (v2/v4),
// and for the point-wise relative bound (format v5, every value checked against pw * |x|).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <type_traits>
#include "gpu_test_util.h"
#include "zb_bytes.h"
#if ZBOUND_TEST_CUDA
#include <cuda_runtime.h>
#endif

namespace {

#if ZBOUND_TEST_CUDA

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

// A device buffer freed at scope exit.
struct DevBuf {
    uint8_t *p = nullptr;
    explicit DevBuf(size_t bytes) { (void)cudaMalloc(reinterpret_cast<void **>(&p), bytes ? bytes : 1); }
    ~DevBuf() { (void)cudaFree(p); }
};

// The Lorenzo predictor with `encoder`, `bound` in `mode`.
zb_params lorenzo(zb_mode mode, double bound, zb_encoder encoder = ZB_ENC_FAST) {
    return gput::pipeline_params(ZB_PRED_LORENZO, encoder, mode, bound);
}

template <typename T>
void round_trip(const std::vector<T> &data, const std::vector<size_t> &dims, const zb_params &p, cudaStream_t stream,
                size_t misalign, const std::string &what) {
    SCOPED_TRACE(what);
    const zbt::Stream ref = gput::compress_on(ZB_BACKEND_CPU, data, dims, p);
    ASSERT_EQ(ref.status, ZB_OK);
    std::vector<T> ref_out(data.size());
    ASSERT_EQ(zb_decompress(ref.bytes.data(), ref.bytes.size(), ref_out.data(), ref_out.size() * sizeof(T),
                            ZB_BACKEND_CPU, nullptr),
              ZB_OK);

    const size_t vbytes = data.size() * sizeof(T);
    const size_t cap = zb_compress_bound(zbt::dtype_of<T>(), data.size());
    // With misalign, the input also starts one value into its buffer (not 16-byte aligned: the quantizer's vector
    // loads must not be used there).
    const size_t in_off = misalign ? sizeof(T) : 0;
    DevBuf src_buf(vbytes + in_off), stream_buf(cap + misalign), out(vbytes + misalign);
    const uint8_t *src_p = src_buf.p + in_off;
    CUDA_OK(cudaMemcpy(src_buf.p + in_off, data.data(), vbytes, cudaMemcpyHostToDevice));
    size_t len = 0;
    zb_run_stats st{};
    ASSERT_EQ(zb_compress_device(&p, zbt::dtype_of<T>(), src_p, (int)dims.size(), dims.data(), stream_buf.p + misalign,
                                 cap, &len, stream, &st),
              ZB_OK)
        << zb_last_error();
    EXPECT_EQ(st.backend_used, ZB_BACKEND_GPU);
    std::vector<uint8_t> got(len);
    CUDA_OK(cudaMemcpy(got.data(), stream_buf.p + misalign, len, cudaMemcpyDeviceToHost));
    EXPECT_TRUE(got == ref.bytes) << "device stream differs from the CPU's: " << gput::first_difference(ref.bytes, got);
    {
        // Room for this stream only, not for a raw one: the encoder assembles the payload apart and copies it (with
        // room, and a 4-byte aligned payload start, it writes the segments in place).
        size_t exact = 0;
        ASSERT_EQ(zb_compress_device(&p, zbt::dtype_of<T>(), src_p, (int)dims.size(), dims.data(),
                                     stream_buf.p + misalign, len, &exact, stream, nullptr),
                  ZB_OK)
            << zb_last_error();
        std::vector<uint8_t> again(exact);
        CUDA_OK(cudaMemcpy(again.data(), stream_buf.p + misalign, exact, cudaMemcpyDeviceToHost));
        EXPECT_TRUE(again == ref.bytes) << "exact-capacity stream differs: " << gput::first_difference(ref.bytes, again);
    }

    ASSERT_EQ(zb_decompress_device(stream_buf.p + misalign, len, out.p + misalign, vbytes, stream, &st), ZB_OK)
        << zb_last_error();
    std::vector<T> dec(data.size());
    CUDA_OK(cudaMemcpy(dec.data(), out.p + misalign, vbytes, cudaMemcpyDeviceToHost));
    const size_t d = gput::first_value_difference(ref_out, dec);
    EXPECT_EQ(d, data.size()) << "device decode differs from the CPU's at value " << d;
    if (p.mode == ZB_MODE_PW_REL) {
        T fill{};
        const uint64_t fb = p.fill_bits;
        std::memcpy(&fill, &fb, sizeof(T));
        EXPECT_EQ(zbt::count_pw_violations(data, dec, p.bound, p.has_fill != 0, fill), 0u);
        // The CPU decodes the device's stream (equal to its own) into the same values, the GPU the CPU's.
        std::vector<T> host_dec(data.size());
        ASSERT_EQ(zb_decompress(got.data(), got.size(), host_dec.data(), vbytes, ZB_BACKEND_GPU, nullptr), ZB_OK);
        EXPECT_EQ(gput::first_value_difference(ref_out, host_dec), data.size());
    }

    // Errors: capacity, destination size, truncation, a corrupted payload (the GPU checks the payload checksum).
    EXPECT_EQ(zb_compress_device(&p, zbt::dtype_of<T>(), src_p, (int)dims.size(), dims.data(), stream_buf.p, len - 1,
                                 &len, stream, nullptr),
              ZB_ERR_BUFFER_TOO_SMALL);
    EXPECT_EQ(zb_decompress_device(stream_buf.p + misalign, got.size(), out.p, vbytes - 1, stream, nullptr),
              ZB_ERR_BUFFER_TOO_SMALL);
    EXPECT_EQ(zb_decompress_device(stream_buf.p + misalign, got.size() - 1, out.p, vbytes, stream, nullptr),
              ZB_ERR_TRUNCATED);
    EXPECT_EQ(zb_decompress_device(stream_buf.p + misalign, 50, out.p, vbytes, stream, nullptr), ZB_ERR_TRUNCATED);
    std::vector<uint8_t> bad = got;
    bad.back() ^= 0x10;
    CUDA_OK(cudaMemcpy(stream_buf.p, bad.data(), bad.size(), cudaMemcpyHostToDevice));
    EXPECT_EQ(zb_decompress_device(stream_buf.p, bad.size(), out.p, vbytes, stream, nullptr), ZB_ERR_CORRUPT)
        << zb_last_error();
    EXPECT_NE(std::string(zb_last_error()).find("payload checksum mismatch"), std::string::npos) << zb_last_error();
    bad = got;
    bad[20] ^= 1;  // header field: the header checksum catches it
    CUDA_OK(cudaMemcpy(stream_buf.p, bad.data(), bad.size(), cudaMemcpyHostToDevice));
    EXPECT_EQ(zb_decompress_device(stream_buf.p, bad.size(), out.p, vbytes, stream, nullptr), ZB_ERR_CORRUPT);
}

template <typename T> void device_api(zb_encoder encoder) {
    cudaStream_t user = nullptr;
    ASSERT_EQ(cudaStreamCreate(&user), cudaSuccess);
    zb_params rel = lorenzo(ZB_MODE_REL, 1e-3, encoder);
    const std::vector<size_t> d2{513, 1025}, d3{17, 33, 65}, d1{5};
    auto f2 = zbt::smooth_field<T>(d2, 0.01, 1, 3.0);
    for (size_t i = 0; i < f2.size(); i += 97) f2[i] = std::numeric_limits<T>::quiet_NaN();
    round_trip(f2, d2, rel, nullptr, 0, "2D, default stream");
    round_trip(f2, d2, rel, user, 3, "2D, user stream, unaligned buffers");
    // More exceptions (175 K) than a device call's first round has room for (encode.cuh's exception_cap: 65536 at
    // this size): the stream is laid out again once their count is known.
    auto dense_nan = f2;
    for (size_t i = 0; i < dense_nan.size(); i += 3) dense_nan[i] = std::numeric_limits<T>::quiet_NaN();
    round_trip(dense_nan, d2, rel, user, 0, "2D, a third of the values NaN");
    round_trip(dense_nan, d2, rel, user, 1, "2D, a third of the values NaN, unaligned buffers");
    round_trip(zbt::smooth_field<T>(d3, 0.0, 2, 0.0), d3, rel, user, 0, "3D");
    round_trip(zbt::smooth_field<T>({100003}, 0.01, 6, 0.0), {100003}, rel, user, 2, "1D");
    auto steep = zbt::smooth_field<T>(d3, 0.0, 7, 0.0);   // escapes (steps beyond the ratio encoder's radius)
    for (size_t i = 0; i < steep.size(); i += 13) steep[i] += (T)50.0;
    round_trip(steep, d3, rel, user, 0, "3D with escapes");
    round_trip(zbt::smooth_field<T>(d1, 0.0, 3, 0.0), d1, rel, user, 1, "5 values (raw passthrough)");
    zb_params tight = lorenzo(ZB_MODE_ABS, 1e-9, encoder);
    round_trip(zbt::smooth_field<T>(d2, 1.0, 4, 0.0), d2, tight, user, 0, "noise (raw passthrough)");
    EXPECT_EQ(cudaStreamDestroy(user), cudaSuccess);
}

// The point-wise relative bound through the device API: the CPU's bytes, values within pw * |x|, specials and signs
// exact.
template <typename T> void device_api_pw_rel() {
    cudaStream_t user = nullptr;
    ASSERT_EQ(cudaStreamCreate(&user), cudaSuccess);
    const T fill = (T)-9999.9;
    const std::vector<size_t> d2{513, 1025}, d3{17, 33, 65}, d1{100003};
    auto hard = [&](const std::vector<size_t> &dims, uint32_t seed) {
        auto v = zbt::smooth_field<T>(dims, 0.01, seed);
        for (size_t i = 0; i < v.size(); ++i) v[i] = (T)(v[i] * std::pow(10.0, 6.0 * std::sin(0.001 * (double)i)));
        for (size_t i = 0; i < v.size(); i += 97) v[i] = 0;
        for (size_t i = 13; i < v.size(); i += 389) v[i] = -T(0);
        for (size_t i = 5; i < v.size(); i += 1001) v[i] = std::numeric_limits<T>::quiet_NaN();
        for (size_t i = 6; i < v.size(); i += 2003) v[i] = -std::numeric_limits<T>::infinity();
        for (size_t i = 7; i < v.size(); i += 3001) v[i] = std::numeric_limits<T>::denorm_min() * (T)(i % 100);
        for (size_t i = 2000; i < v.size() && i < 2100; ++i) v[i] = fill;
        v[1] = std::numeric_limits<T>::max();
        return v;
    };
    const std::pair<zb_predictor, zb_encoder> pipelines[] = {
        {ZB_PRED_INTERP, ZB_ENC_RATIO}, {ZB_PRED_LORENZO, ZB_ENC_FAST}, {ZB_PRED_INTERP, ZB_ENC_FAST}};
    uint32_t seed = 40;
    for (const auto &pipe : pipelines)
        for (double pw : {1e-3, 1e-6}) {
            zb_params p = zb_params_default();
            p.mode = ZB_MODE_PW_REL;
            p.bound = pw;
            p.predictor = pipe.first;
            p.encoder = pipe.second;
            p.has_fill = 1;
            p.fill_bits = zbt::bits(fill);
            const std::string what = "pw " + std::to_string(pw) + " pipeline " + std::to_string(pipe.first) + "/" +
                                     std::to_string(pipe.second);
            round_trip(hard(d2, seed++), d2, p, nullptr, 0, what + " 2D, default stream");
            round_trip(hard(d3, seed++), d3, p, user, 3, what + " 3D, user stream, unaligned buffers");
            round_trip(hard(d1, seed++), d1, p, user, 1, what + " 1D");
            if (::testing::Test::HasFatalFailure()) break;
        }
    zb_params p = zb_params_default();
    p.mode = ZB_MODE_PW_REL;
    p.bound = 1e-2;
    p.predictor = ZB_PRED_LORENZO;
    p.encoder = ZB_ENC_RATIO;
    round_trip(zbt::smooth_field<T>({5}, 0.0, 3, 1.0), {5}, p, user, 1, "5 values (raw passthrough)");
    p.bound = 0;
    round_trip(zbt::smooth_field<T>(d3, 0.0, 3, 1.0), d3, p, user, 0, "pw 0 (raw passthrough)");
    EXPECT_EQ(cudaStreamDestroy(user), cudaSuccess);
}

// The GPU's piece CRCs split the payload into slices of 16, 64 or 256 bytes per thread by its size (crc_gpu.cu):
// payloads of 1, 12 and 40 MB (noise: raw passthrough streams, the payload being the values) take each size, on a
// 4-byte aligned and an unaligned (byte by byte) start, and must give the CPU's stream.
TEST(GpuDeviceApi, ChecksumOfEveryPayloadSize) {
    ZB_REQUIRE_GPU();
    zb_params p = lorenzo(ZB_MODE_ABS, 1e-12);
    for (size_t mb : {1, 12, 40}) {
        const std::vector<size_t> dims{mb << 18};
        const auto data = zbt::smooth_field<float>(dims, 1.0, (uint32_t)mb, 0.0);
        const zbt::Stream ref = gput::compress_on(ZB_BACKEND_CPU, data, dims, p);
        ASSERT_EQ(ref.status, ZB_OK);
        const size_t cap = zb_compress_bound(ZB_F32, data.size());
        DevBuf src(data.size() * 4), out(cap + 8), dec(data.size() * 4);
        CUDA_OK(cudaMemcpy(src.p, data.data(), data.size() * 4, cudaMemcpyHostToDevice));
        // The payload starts kFastHeaderBytes (8 mod 16) after the stream: offsets 0, 4 and 8 put it at 8, 12 and
        // 0 mod 16 (the piece CRCs' loads of 4 and 16 bytes), 1 at an odd address (bytes).
        for (size_t misalign : {0, 1, 4, 8}) {
            SCOPED_TRACE(std::to_string(mb) + " MB, output offset " + std::to_string(misalign));
            size_t len = 0;
            ASSERT_EQ(zb_compress_device(&p, ZB_F32, src.p, 1, dims.data(), out.p + misalign, cap, &len, nullptr,
                                         nullptr),
                      ZB_OK)
                << zb_last_error();
            std::vector<uint8_t> got(len);
            CUDA_OK(cudaMemcpy(got.data(), out.p + misalign, len, cudaMemcpyDeviceToHost));
            EXPECT_TRUE(got == ref.bytes) << gput::first_difference(ref.bytes, got);
            EXPECT_EQ(zb_decompress_device(out.p + misalign, len, dec.p, data.size() * 4, nullptr, nullptr), ZB_OK)
                << zb_last_error();  // the decoder checks the payload checksum on the GPU
        }
    }
}

TEST(GpuDeviceApi, PointWiseRelativeF32) {
    ZB_REQUIRE_GPU();
    device_api_pw_rel<float>();
}

TEST(GpuDeviceApi, PointWiseRelativeF64) {
    ZB_REQUIRE_GPU();
    device_api_pw_rel<double>();
}

// predictor / encoder AUTO through the device API: the choice zb_compress makes from a sample of the data (gathered
// from the device), so the host API's bytes, in every mode; fields on which auto picks different pipelines.
TEST(GpuDeviceApi, AutoChoosesLikeTheHostApi) {
    ZB_REQUIRE_GPU();
    const std::vector<size_t> d2{513, 1025}, d3{8, 129, 257}, d1{100003};
    std::set<std::string> pipelines;
    const std::vector<zb_mode> modes{ZB_MODE_ABS, ZB_MODE_REL, ZB_MODE_PW_REL};
    const std::vector<zb_encoder> encoders{ZB_ENC_AUTO, ZB_ENC_RATIO};
    const std::vector<std::vector<size_t>> shapes{d2, d3, d1};
    const std::vector<double> noises{0.0, 0.2};
    uint32_t seed = 70;
    for (size_t m = 0; m < modes.size(); ++m)
        for (size_t e = 0; e < encoders.size(); ++e)
            for (size_t s = 0; s < shapes.size(); ++s)
                for (size_t k = 0; k < noises.size(); ++k, ++seed) {
                    // Under sampling each (mode, shape) takes one of its (encoder, noise) variants, in turn.
                    if (!gput::sampled_variant(m * shapes.size() + s, e * noises.size() + k,
                                               encoders.size() * noises.size()))
                        continue;
                    const auto &dims = shapes[s];
                    zb_params p = zb_params_default();
                    p.mode = modes[m];
                    p.bound = 1e-3;
                    p.predictor = ZB_PRED_AUTO;
                    p.encoder = encoders[e];
                    const auto v = zbt::smooth_field<float>(dims, noises[k], seed);
                    round_trip(v, dims, p, nullptr, 0,
                               "mode " + std::to_string(p.mode) + " encoder " + std::to_string(p.encoder) +
                                   " rank " + std::to_string(dims.size()) + " noise " + std::to_string(noises[k]));
                    if (::testing::Test::HasFatalFailure()) return;
                    const zbt::Stream ref = gput::compress_on(ZB_BACKEND_CPU, v, dims, p);
                    zb_stream_info info;
                    ASSERT_EQ(zb_stream_info_get(ref.bytes.data(), ref.bytes.size(), &info), ZB_OK);
                    pipelines.insert(std::to_string(info.predictor) + "/" + std::to_string(info.encoder));
                }
    std::printf("pipelines auto chose through the device API: %zu distinct\n", pipelines.size());
    if (gput::sample_stride() == 1) {  // a sampled run sees only some of the fields
        EXPECT_GE(pipelines.size(), 2u) << "the fields should make auto choose more than one pipeline";
    }
}

// AUTO pipelines through the device API: a v5 stream any decoder reads within the bound; corrupted payloads are
// ZB_ERR_CORRUPT on the device like on the host.
TEST(GpuDeviceApi, PointWiseRelativeAutoAndCorrupt) {
    ZB_REQUIRE_GPU();
    const std::vector<size_t> dims{300, 200};
    auto v = zbt::smooth_field<float>(dims, 0.01, 9);
    for (size_t i = 0; i < v.size(); i += 7) v[i] = -v[i] * 1e-5f;
    zb_params p = zb_params_default();
    p.mode = ZB_MODE_PW_REL;
    p.bound = 1e-3;
    const size_t vbytes = v.size() * 4, cap = zb_compress_bound(ZB_F32, v.size());
    DevBuf src(vbytes), sbuf(cap), out(vbytes);
    CUDA_OK(cudaMemcpy(src.p, v.data(), vbytes, cudaMemcpyHostToDevice));
    size_t len = 0;
    ASSERT_EQ(zb_compress_device(&p, ZB_F32, src.p, 2, dims.data(), sbuf.p, cap, &len, nullptr, nullptr), ZB_OK)
        << zb_last_error();
    std::vector<uint8_t> got(len);
    CUDA_OK(cudaMemcpy(got.data(), sbuf.p, len, cudaMemcpyDeviceToHost));
    ASSERT_EQ(zb::get_u16(got.data() + 4), 5);
    std::vector<float> host_out(v.size()), dev_out(v.size());
    ASSERT_EQ(zb_decompress(got.data(), got.size(), host_out.data(), vbytes, ZB_BACKEND_CPU, nullptr), ZB_OK);
    EXPECT_EQ(zbt::count_pw_violations(v, host_out, 1e-3), 0u);
    ASSERT_EQ(zb_decompress_device(sbuf.p, len, out.p, vbytes, nullptr, nullptr), ZB_OK) << zb_last_error();
    CUDA_OK(cudaMemcpy(dev_out.data(), out.p, vbytes, cudaMemcpyDeviceToHost));
    EXPECT_EQ(gput::first_value_difference(host_out, dev_out), v.size());
    zb::Header h;
    std::string why;
    ASSERT_EQ(zb::read_header(got.data(), got.size(), h, why), ZB_OK);
    const size_t hb = h.header_bytes();
    // Payload bytes (checksum), the parameters and a sign flag (checksums fixed up): CORRUPT on both sides.
    std::vector<std::vector<uint8_t>> bad;
    for (size_t off : {hb + 1, hb + 300, got.size() / 2, got.size() - 1}) {
        bad.push_back(got);
        bad.back()[off] ^= 0x04;
    }
    for (size_t off : {hb, hb + 4}) {
        bad.push_back(got);
        bad.back()[off] ^= 0x02;
        zbt::reseal(bad.back());
    }
    for (const auto &b : bad) {
        const zb_status sc = zb_decompress(b.data(), b.size(), host_out.data(), vbytes, ZB_BACKEND_CPU, nullptr);
        EXPECT_EQ(sc, ZB_ERR_CORRUPT);
        CUDA_OK(cudaMemcpy(sbuf.p, b.data(), b.size(), cudaMemcpyHostToDevice));
        EXPECT_EQ(zb_decompress_device(sbuf.p, b.size(), out.p, vbytes, nullptr, nullptr), ZB_ERR_CORRUPT)
            << zb_last_error();
    }
}

// Device calls repeated on the same buffers with the same parameters are replayed as a CUDA graph from the second
// or third on (gpu_internal.h, GraphCache): every call must still give the CPU's bytes for what the input holds
// now, including a raw-passthrough stream, more exceptions than the first round has room for, exceptions in a few
// tiles only, and the calls after those. The exception stage in one block and (ZBOUND_GPU_EXCEPTION_BLOCK=0) in
// separate launches.
template <typename T> void repeated_calls(const char *exception_block) {
    const zbt::ScopedEnv form("ZBOUND_GPU_EXCEPTION_BLOCK", exception_block);
    const std::vector<size_t> dims{257, 511};
    const size_t n = dims[0] * dims[1], vbytes = n * sizeof(T);
    zb_params rel = lorenzo(ZB_MODE_REL, 1e-3);
    const auto smooth = zbt::smooth_field<T>(dims, 0.01, 11, 2.0);
    auto some_nan = zbt::smooth_field<T>(dims, 0.02, 12, 0.0);
    for (size_t i = 0; i < n; i += 101) some_nan[i] = std::numeric_limits<T>::quiet_NaN();
    auto dense_nan = some_nan;  // 88 K exceptions: more than exception_cap's 65536 after a call with few
    for (size_t i = 0; i < n; ++i)
        if (i % 3) dense_nan[i] = std::numeric_limits<T>::quiet_NaN();
    std::vector<T> nan_payloads(n);  // no finite value, every value another NaN: the raw stream is shorter
    for (size_t i = 0; i < n; ++i) {
        using U = typename std::conditional<sizeof(T) == 8, uint64_t, uint32_t>::type;
        const U bits = (sizeof(T) == 8 ? (U)0x7FF8000000000000ull : (U)0x7FC00000u) | (U)(i * 2654435761u % 65521 + 1);
        std::memcpy(&nan_payloads[i], &bits, sizeof(T));
    }
    // Exceptions in a few tiles only, at the edges of the one-block stage's edge flag groups (4096 values, two
    // tiles): a run ending at a group's last value (the edge is in the next group, whose tiles have none), one
    // ending at a tile's last value inside a group, one across a group edge, single outliers on both sides of
    // another.
    auto group_edges = smooth;
    constexpr size_t kGroup = 4096;
    for (size_t i = 10 * kGroup - 3; i < 10 * kGroup; ++i) group_edges[i] = std::numeric_limits<T>::quiet_NaN();
    for (size_t i = 20 * kGroup + 2040; i < 20 * kGroup + 2048; ++i)
        group_edges[i] = std::numeric_limits<T>::quiet_NaN();
    for (size_t i = 25 * kGroup - 5; i < 25 * kGroup + 5; ++i) group_edges[i] = std::numeric_limits<T>::infinity();
    group_edges[28 * kGroup - 1] = (T)1e30;
    group_edges[29 * kGroup] = (T)-1e30;
    const std::vector<const std::vector<T> *> order{&smooth,   &some_nan,    &smooth,    &group_edges, &smooth,
                                                    &nan_payloads, &some_nan, &dense_nan, &group_edges, &smooth,
                                                    &dense_nan, &dense_nan,   &some_nan,  &group_edges, &smooth};
    const size_t cap = zb_compress_bound(zbt::dtype_of<T>(), n);
    std::unique_ptr<DevBuf> src_buf(new DevBuf(vbytes)), dst_buf(new DevBuf(cap));
    for (size_t call = 0; call < order.size() + 4; ++call) {
        SCOPED_TRACE(std::string("ZBOUND_GPU_EXCEPTION_BLOCK=") + exception_block + ", call " + std::to_string(call));
        if (call == order.size()) {
            // Buffers freed and allocated again (the allocator tends to give the same addresses back): the graph of
            // the earlier calls must not write into the freed allocation.
            src_buf.reset();
            dst_buf.reset();
            src_buf.reset(new DevBuf(vbytes));
            dst_buf.reset(new DevBuf(cap));
        }
        const DevBuf &src = *src_buf, &dst = *dst_buf;
        const std::vector<T> &data = *order[call < order.size() ? call : call % 2];
        const zbt::Stream ref = gput::compress_on(ZB_BACKEND_CPU, data, dims, rel);
        ASSERT_EQ(ref.status, ZB_OK);
        CUDA_OK(cudaMemcpy(src.p, data.data(), vbytes, cudaMemcpyHostToDevice));
        size_t len = 0;
        ASSERT_EQ(zb_compress_device(&rel, zbt::dtype_of<T>(), src.p, 2, dims.data(), dst.p, cap, &len, nullptr,
                                     nullptr),
                  ZB_OK)
            << zb_last_error();
        std::vector<uint8_t> got(len);
        CUDA_OK(cudaMemcpy(got.data(), dst.p, len, cudaMemcpyDeviceToHost));
        EXPECT_TRUE(got == ref.bytes) << "device stream differs from the CPU's: "
                                      << gput::first_difference(ref.bytes, got);
    }
}

TEST(GpuDeviceApi, RepeatedCallsOnTheSameBuffersF32) {
    ZB_REQUIRE_GPU();
    for (const char *form : {"1", "0"}) repeated_calls<float>(form);
}

TEST(GpuDeviceApi, RepeatedCallsOnTheSameBuffersF64) {
    ZB_REQUIRE_GPU();
    for (const char *form : {"1", "0"}) repeated_calls<double>(form);
}

// The chunk paths of device calls (cuda/chunk_encode.cuh: look-back offsets, the exception segments built by the last
// tile's block, the header sealed by the last CRC block; cuda/chunk_decode.cuh: the tile stage reading the caller's
// stream, escapes and x carries from a look-back) against the CPU's bytes and values, and the general paths
// (ZBOUND_GPU_CHUNK=0) likewise: ranks 1-3 with partial last tiles and rows across tiles, Lorenzo segments (format
// v6), NaN at both ends and in runs across tiles, fill values, -0.0 and infinities, escapes, exceptions up to the
// lists' 65536 and past them (the general path takes over), raw passthrough. Each array three times on the same
// buffers: launched, captured as a graph, replayed.
template <typename T> void chunk_path_cases() {
    using Lim = std::numeric_limits<T>;
    struct Case {
        std::string what;
        std::vector<size_t> dims;
        std::vector<T> v;
        zb_params p;
    };
    zb_params rel = lorenzo(ZB_MODE_REL, 1e-3);
    std::vector<Case> cases;
    const std::vector<std::vector<size_t>> shapes{{1},         {5},          {2047},        {2048},       {2049},
                                                  {100003},    {7, 300},     {513, 1025},   {3, 2049},    {3, 5, 7},
                                                  {17, 33, 65}, {64, 64, 64}, {130, 64, 128}, {2, 700, 900}};
    uint32_t seed = 70;
    for (const auto &dims : shapes) {
        const std::string shape = "dims " + std::to_string(dims.size()) + "-D, n " +
                                  std::to_string(zbt::smooth_field<T>(dims, 0, 1).size());
        auto smooth = zbt::smooth_field<T>(dims, 0.01, seed++, 1.0);
        const size_t n = smooth.size();
        cases.push_back({shape + " smooth", dims, smooth, rel});
        auto specials = smooth;  // isolated NaN, both ends, a run over a tile border, infinities, -0.0
        for (size_t i = 0; i < n; i += 97) specials[i] = Lim::quiet_NaN();
        specials[0] = specials[n - 1] = Lim::quiet_NaN();
        for (size_t i = 2040; i < 2060 && i < n; ++i) specials[i] = Lim::quiet_NaN();
        for (size_t i = 31; i < n; i += 1009) specials[i] = (i / 1009) % 2 ? Lim::infinity() : -Lim::infinity();
        for (size_t i = 47; i < n; i += 773) specials[i] = -T(0);
        cases.push_back({shape + " specials", dims, specials, rel});
        auto filled = smooth;  // a fill value in runs, the last run reaching the end
        const T fill = (T)-9999.5;
        for (size_t i = n / 3; i < n / 3 + 300 && i < n; ++i) filled[i] = fill;
        for (size_t i = n > 40 ? n - 40 : 0; i < n; ++i) filled[i] = fill;
        zb_params with_fill = rel;
        with_fill.has_fill = 1;
        with_fill.fill_bits = zbt::bits(fill);
        cases.push_back({shape + " fill", dims, filled, with_fill});
        auto steep = smooth;  // escapes: steps past the fast codes' radius at a tight bound
        for (size_t i = 5; i < n; i += 13) steep[i] += (T)50.0;
        zb_params tight = rel;
        tight.bound = 1e-7;
        cases.push_back({shape + " escapes", dims, steep, tight});
    }
    // Exceptions up to the lists' size and past it, in a 1024 x 1024 array: every 16th value (65536: all fit, the
    // change bits and runs from many values) and every 15th (69905: the general path).
    for (size_t every : {16, 15}) {
        const std::vector<size_t> dims{1024, 1024};
        auto v = zbt::smooth_field<T>(dims, 0.01, seed++);
        for (size_t i = 0; i < v.size(); i += every) v[i] = (i / every) % 3 ? Lim::quiet_NaN() : Lim::infinity();
        cases.push_back({"every " + std::to_string(every) + "th value an exception", dims, v, rel});
    }
    zb_params lossless_tight = rel;
    lossless_tight.mode = ZB_MODE_ABS;
    lossless_tight.bound = 1e-12;
    cases.push_back({"noise (raw passthrough)", {300, 301}, zbt::smooth_field<T>({300, 301}, 5.0, seed++), lossless_tight});

    const std::vector<const char *> paths{"1", "0"};  // ZBOUND_GPU_CHUNK: the chunk path, the general path
    for (size_t path_index = 0; path_index < paths.size(); ++path_index) {
        const char *chunk = paths[path_index];
        const zbt::ScopedEnv path("ZBOUND_GPU_CHUNK", chunk);
        for (size_t i = 0; i < cases.size(); ++i) {
            // Under sampling each case takes one of the two paths, in turn (5 cases a shape: both paths per kind).
            if (!gput::sampled_variant(i, path_index, paths.size())) continue;
            const Case &c = cases[i];
            SCOPED_TRACE(std::string("ZBOUND_GPU_CHUNK=") + chunk + ", " + c.what);
            const zbt::Stream ref = gput::compress_on(ZB_BACKEND_CPU, c.v, c.dims, c.p);
            ASSERT_EQ(ref.status, ZB_OK);
            const size_t vbytes = c.v.size() * sizeof(T), cap = zb_compress_bound(zbt::dtype_of<T>(), c.v.size());
            std::vector<T> want(c.v.size()), got_values(c.v.size());
            ASSERT_EQ(zb_decompress(ref.bytes.data(), ref.bytes.size(), want.data(), vbytes, ZB_BACKEND_CPU, nullptr),
                      ZB_OK);
            DevBuf src(vbytes), dst(cap), back(vbytes);
            CUDA_OK(cudaMemcpy(src.p, c.v.data(), vbytes, cudaMemcpyHostToDevice));
            for (int call = 0; call < 3; ++call) {
                CUDA_OK(cudaMemset(dst.p, 0xA5, cap));  // nothing of an earlier call's stream may be left to find
                size_t len = 0;
                ASSERT_EQ(zb_compress_device(&c.p, zbt::dtype_of<T>(), src.p, (int)c.dims.size(), c.dims.data(), dst.p,
                                             cap, &len, nullptr, nullptr),
                          ZB_OK)
                    << zb_last_error();
                std::vector<uint8_t> got(len);
                CUDA_OK(cudaMemcpy(got.data(), dst.p, len, cudaMemcpyDeviceToHost));
                ASSERT_TRUE(got == ref.bytes) << "call " << call << ": device stream differs from the CPU's: "
                                              << gput::first_difference(ref.bytes, got);
                CUDA_OK(cudaMemset(back.p, 0xA5, vbytes));
                ASSERT_EQ(zb_decompress_device(dst.p, len, back.p, vbytes, nullptr, nullptr), ZB_OK) << zb_last_error();
                CUDA_OK(cudaMemcpy(got_values.data(), back.p, vbytes, cudaMemcpyDeviceToHost));
                const size_t d = gput::first_value_difference(want, got_values);
                ASSERT_EQ(d, c.v.size()) << "call " << call << ": device decode differs from the CPU's at value " << d;
            }
        }
    }
}

TEST(GpuDeviceApi, ChunkPathGivesTheCpuBytesF32) {
    ZB_REQUIRE_GPU();
    chunk_path_cases<float>();
}

TEST(GpuDeviceApi, ChunkPathGivesTheCpuBytesF64) {
    ZB_REQUIRE_GPU();
    chunk_path_cases<double>();
}

// Corrupted streams (checksums recomputed so that the change reaches the decoders' own checks) through the device
// decoder's chunk path and its general path: the CPU decoder's answer each time, the same error or the same values.
// The flips land in the segments the chunk kernel reads (flags, code blocks, escapes) and in the exception segments
// (gput::busy_field has them all).
template <typename T> void device_corruptions(const std::vector<size_t> &dims, uint32_t seed, int trials) {
    const auto v = gput::busy_field<T>(dims, seed);
    std::mt19937 rng(seed);
    zb_params p = lorenzo(ZB_MODE_ABS, 1e-3);
    const zbt::Stream good = gput::compress_on(ZB_BACKEND_CPU, v, dims, p);
    ASSERT_EQ(good.status, ZB_OK);
    zb::Header h;
    std::string msg;
    ASSERT_EQ(zb::read_header(good.bytes.data(), good.bytes.size(), h, msg, false), ZB_OK);
    ASSERT_GT(h.escapes, 0u);
    ASSERT_GT(h.exceptions, 0u);
    const size_t hb = h.header_bytes(), vbytes = v.size() * sizeof(T);
    DevBuf src(good.bytes.size()), out(vbytes);
    std::vector<T> want(v.size()), got(v.size());
    int rejected = 0;
    trials = gput::sampled_trials(trials);
    for (int t = 0; t < trials; ++t) {
        std::vector<uint8_t> s = good.bytes;
        int seg;
        do seg = (int)(rng() % h.nsegments); while (h.seg[seg].length == 0);
        const size_t off = hb + h.seg[seg].offset + rng() % h.seg[seg].length;
        s[off] ^= (uint8_t)(1 + rng() % 255);
        ASSERT_TRUE(gput::reseal_parsed(s));
        const zb_status sc = zb_decompress(s.data(), s.size(), want.data(), vbytes, ZB_BACKEND_CPU, nullptr);
        CUDA_OK(cudaMemcpy(src.p, s.data(), s.size(), cudaMemcpyHostToDevice));
        for (const char *chunk : {"1", "0"}) {
            const zbt::ScopedEnv path("ZBOUND_GPU_CHUNK", chunk);
            const zb_status sg = zb_decompress_device(src.p, s.size(), out.p, vbytes, nullptr, nullptr);
            ASSERT_EQ(sc, sg) << "ZBOUND_GPU_CHUNK=" << chunk << ", segment " << seg << " byte " << off - hb
                              << "; GPU says: " << zb_last_error();
            if (sc != ZB_OK) continue;
            CUDA_OK(cudaMemcpy(got.data(), out.p, vbytes, cudaMemcpyDeviceToHost));
            ASSERT_EQ(gput::first_value_difference(want, got), v.size()) << "segment " << seg << " byte " << off - hb;
        }
        rejected += sc != ZB_OK;
    }
    EXPECT_GT(rejected, 0);
}

TEST(GpuDeviceApi, ChunkDecodeCorruptionsSameAnswerAsCpu) {
    ZB_REQUIRE_GPU();
    device_corruptions<float>({97, 131}, 5, 300);
    device_corruptions<float>({40, 50, 60}, 6, 300);
    device_corruptions<double>({100003}, 7, 200);
}

// Device decompressions repeated on the same buffers are replayed as a CUDA graph from the third on (decode.cuh,
// decode_impl; the key is the header and the buffers), and with the same lengths they are decoded with the last
// call's header before their own reaches the host (gpu_ops.cu, replayed_decompression). Every call passes the whole
// source buffer (trailing bytes are allowed), so that each change of stream is such a replay with the wrong header:
// each must give the CPU's values for the stream the source holds now, report a corrupted payload under a header
// it has seen (the checksum is computed on the device), and survive the buffers being freed and allocated again.
// Rank 2 (line passes) and rank 3 (the y/z walk in parts).
template <typename T> void repeated_decompressions(const std::vector<size_t> &dims) {
    size_t n = 1;
    for (size_t d : dims) n *= d;
    const size_t vbytes = n * sizeof(T);
    zb_params rel = lorenzo(ZB_MODE_REL, 1e-3);
    auto some_nan = zbt::smooth_field<T>(dims, 0.02, 12, 0.0);
    for (size_t i = 0; i < n; i += 101) some_nan[i] = std::numeric_limits<T>::quiet_NaN();
    const zbt::Stream smooth = gput::compress_on(ZB_BACKEND_CPU, zbt::smooth_field<T>(dims, 0.01, 11, 2.0), dims, rel);
    const zbt::Stream with_nan = gput::compress_on(ZB_BACKEND_CPU, some_nan, dims, rel);
    ASSERT_EQ(smooth.status, ZB_OK);
    ASSERT_EQ(with_nan.status, ZB_OK);
    std::vector<uint8_t> corrupt = smooth.bytes;  // the same header, a payload byte flipped
    corrupt[corrupt.size() - corrupt.size() / 3] ^= 0x10;
    // A few runs of exceptions (their edges in few blocks: the one-block exception stage runs last in the replayed
    // graph, after the checksum branch), and the same stream corrupted the same way.
    auto few_runs = zbt::smooth_field<T>(dims, 0.01, 13, 2.0);
    for (size_t start : {n / 7, n / 2, n - 40})
        for (size_t i = start; i < start + 20; ++i) few_runs[i] = std::numeric_limits<T>::quiet_NaN();
    const zbt::Stream few_nan = gput::compress_on(ZB_BACKEND_CPU, few_runs, dims, rel);
    ASSERT_EQ(few_nan.status, ZB_OK);
    std::vector<uint8_t> corrupt_few = few_nan.bytes;
    corrupt_few[corrupt_few.size() - corrupt_few.size() / 3] ^= 0x10;
    const std::vector<const std::vector<uint8_t> *> order{
        &smooth.bytes,  &smooth.bytes,   &smooth.bytes,   &with_nan.bytes, &smooth.bytes,  &corrupt,
        &smooth.bytes,  &with_nan.bytes, &with_nan.bytes, &with_nan.bytes, &corrupt,       &few_nan.bytes,
        &few_nan.bytes, &few_nan.bytes,  &corrupt_few,    &few_nan.bytes,  &corrupt_few,   &corrupt_few,
        &few_nan.bytes, &smooth.bytes};
    const size_t cap = std::max({smooth.bytes.size(), with_nan.bytes.size(), few_nan.bytes.size()});
    std::unique_ptr<DevBuf> src_buf(new DevBuf(cap)), dst_buf(new DevBuf(vbytes));
    for (size_t call = 0; call < order.size() + 4; ++call) {
        SCOPED_TRACE("rank " + std::to_string(dims.size()) + ", call " + std::to_string(call));
        if (call == order.size()) {  // freed and allocated again (often at the same addresses)
            src_buf.reset();
            dst_buf.reset();
            src_buf.reset(new DevBuf(cap));
            dst_buf.reset(new DevBuf(vbytes));
        }
        const std::vector<uint8_t> &stream = *order[call < order.size() ? call : call % 2 ? 3 : 0];
        CUDA_OK(cudaMemcpy(src_buf->p, stream.data(), stream.size(), cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemset(dst_buf->p, 0xA5, vbytes));
        const zb_status st = zb_decompress_device(src_buf->p, cap, dst_buf->p, vbytes, nullptr, nullptr);
        std::vector<T> want(n), got(n);
        const zb_status want_st = zb_decompress(stream.data(), stream.size(), want.data(), vbytes, ZB_BACKEND_CPU,
                                                nullptr);
        ASSERT_EQ(st, want_st) << zb_last_error();
        if (&stream == &corrupt || &stream == &corrupt_few) {
            EXPECT_EQ(st, ZB_ERR_CORRUPT);
            continue;
        }
        CUDA_OK(cudaMemcpy(got.data(), dst_buf->p, vbytes, cudaMemcpyDeviceToHost));
        EXPECT_EQ(std::memcmp(got.data(), want.data(), vbytes), 0)
            << "first differing value " << gput::first_value_difference(want, got);
    }
}

TEST(GpuDeviceApi, RepeatedDecompressionsOnTheSameBuffers) {
    ZB_REQUIRE_GPU();
    repeated_decompressions<float>({257, 511});
    repeated_decompressions<float>({48, 60, 70});
    repeated_decompressions<double>({33, 40, 200});
}

// The one-block exception decoder with many exceptions (k_exceptions_prepare on a graph branch, k_exceptions_scatter
// after the values): three long runs of NaN (3300 exceptions in three intervals: a scatter of seven blocks), and 70
// stretches of 128 values of which every other one is NaN (4480 intervals, more than the 4096 whose offsets the
// scatter searches in shared memory). The GPU's stream must be the CPU's, and three device decodes of it on the same
// buffers (the first queued directly, the second captured into a graph, the third a replay) the CPU's values.
template <typename T> void sparse_exception_intervals() {
    const std::vector<size_t> d{size_t(1) << 20};
    const size_t n = d[0], vbytes = n * sizeof(T);
    zb_params p = lorenzo(ZB_MODE_REL, 1e-3);
    const T nan = std::numeric_limits<T>::quiet_NaN();
    for (int form = 0; form < 2; ++form) {
        SCOPED_TRACE(form == 0 ? "three runs of NaN" : "4480 intervals");
        auto data = zbt::smooth_field<T>(d, 0.02, 61 + (uint32_t)form, 20.0);
        uint64_t k = 0;
        if (form == 0) {
            for (size_t r = 0; r < 3; ++r)
                for (size_t i = 0; i < 700 + 400 * r; ++i, ++k) data[100000 + 300000 * r + i] = nan;
        } else {
            for (size_t b = 0; b < 70; ++b)
                for (size_t i = 0; i < 128; i += 2, ++k) data[128 * (100 + 97 * b) + i] = nan;
        }
        round_trip(data, d, p, nullptr, 0, "compress, decompress once");
        const zbt::Stream ref = gput::compress_on(ZB_BACKEND_CPU, data, d, p);
        ASSERT_EQ(ref.status, ZB_OK);
        zb_stream_info info;
        ASSERT_EQ(zb_stream_info_get(ref.bytes.data(), ref.bytes.size(), &info), ZB_OK);
        // The NaN and a few of the field's own (f32): the cases above are what they say.
        EXPECT_GE(info.exceptions, k);
        EXPECT_LE(info.exceptions, k + 100);
        std::vector<T> want(n), got(n);
        ASSERT_EQ(zb_decompress(ref.bytes.data(), ref.bytes.size(), want.data(), vbytes, ZB_BACKEND_CPU, nullptr),
                  ZB_OK);
        DevBuf src(ref.bytes.size()), dst(vbytes);
        CUDA_OK(cudaMemcpy(src.p, ref.bytes.data(), ref.bytes.size(), cudaMemcpyHostToDevice));
        for (int call = 0; call < 3; ++call) {
            CUDA_OK(cudaMemset(dst.p, 0xA5, vbytes));
            ASSERT_EQ(zb_decompress_device(src.p, ref.bytes.size(), dst.p, vbytes, nullptr, nullptr), ZB_OK)
                << zb_last_error();
            CUDA_OK(cudaMemcpy(got.data(), dst.p, vbytes, cudaMemcpyDeviceToHost));
            EXPECT_EQ(gput::first_value_difference(want, got), n) << "call " << call;
        }
    }
}

TEST(GpuDeviceApi, SparseExceptionIntervalsF32) {
    ZB_REQUIRE_GPU();
    sparse_exception_intervals<float>();
}

TEST(GpuDeviceApi, SparseExceptionIntervalsF64) {
    ZB_REQUIRE_GPU();
    sparse_exception_intervals<double>();
}

// k_range's 8-load wave (f32 arrays of 32 MiB or more; GpuParity.LargeArrayRelRange) on an input one value past a
// 16-byte boundary (its scalar loads): 33 MiB and three values, the largest value last and the smallest at a third.
TEST(GpuDeviceApi, LargeUnalignedRelF32) {
    ZB_REQUIRE_GPU();
    const std::vector<size_t> d{(size_t(33) << 20) / 4 + 3};
    auto data = zbt::smooth_field<float>(d, 0.02, 51, 20.0);
    data[d[0] - 1] = 500.0f;
    data[d[0] / 3] = -500.0f;
    zb_params p = lorenzo(ZB_MODE_REL, 1e-3);
    round_trip(data, d, p, nullptr, 4, "33 MiB f32, unaligned input");
}

TEST(GpuDeviceApi, RoundTripF32) {
    ZB_REQUIRE_GPU();
    device_api<float>(ZB_ENC_FAST);
}

TEST(GpuDeviceApi, RoundTripF64) {
    ZB_REQUIRE_GPU();
    device_api<double>(ZB_ENC_FAST);
}

TEST(GpuDeviceApi, LorenzoRatioRoundTripF32) {
    ZB_REQUIRE_GPU();
    device_api<float>(ZB_ENC_RATIO);
}

TEST(GpuDeviceApi, LorenzoRatioRoundTripF64) {
    ZB_REQUIRE_GPU();
    device_api<double>(ZB_ENC_RATIO);
}

#else

TEST(GpuDeviceApi, RoundTrip) {
    ZB_REQUIRE_GPU();
    GTEST_SKIP() << "no GPU: the tests were built without CUDA";
}

#endif

// Where no GPU can be used the library still loads and says so cleanly.
// AUTO decodes a Lorenzo + fast stream of 32 MiB or more on the CPU when the call gets 12 threads or more (api.cpp:
// there it is faster than the GPU's host path), on the GPU with fewer or when smaller; a ratio stream on the GPU
// either way. The same values each time.
TEST(GpuBackendChoice, FastStreamsDecodeOnTheCpuWithManyThreads) {
    if (!zb_gpu_available()) GTEST_SKIP() << "no usable GPU";
    const zbt::ScopedEnv no_forced_backend("ZBOUND_BACKEND", nullptr);
    // 42 MB and 8 MB, both above the size where AUTO starts using the GPU.
    const std::vector<std::vector<size_t>> shapes{{80, 128, 1024}, {64, 128, 256}};
    for (const std::vector<size_t> &dims : shapes) {
        const std::vector<float> data = zbt::smooth_field<float>(dims, 0.01, 41, 280.0);
        const bool large = data.size() * 4 >= (size_t(32) << 20);
        for (zb_encoder enc : {ZB_ENC_FAST, ZB_ENC_RATIO}) {
            zb_params p = zb_params_default();
            p.mode = ZB_MODE_REL;
            p.bound = 1e-3;
            p.predictor = ZB_PRED_LORENZO;
            p.encoder = enc;
            const zbt::Stream s = gput::compress_on(ZB_BACKEND_CPU, data, dims, p);
            ASSERT_EQ(s.status, ZB_OK);
            std::vector<float> ref(data.size());
            ASSERT_EQ(zb_decompress(s.bytes.data(), s.bytes.size(), ref.data(), ref.size() * 4, ZB_BACKEND_CPU,
                                    nullptr),
                      ZB_OK);
            for (int threads : {2, 16}) {
                const zbt::ScopedEnv env("ZBOUND_THREADS", std::to_string(threads).c_str());
                std::vector<float> out(data.size());
                zb_run_stats st{};
                ASSERT_EQ(zb_decompress(s.bytes.data(), s.bytes.size(), out.data(), out.size() * 4, ZB_BACKEND_AUTO,
                                        &st),
                          ZB_OK)
                    << zb_last_error();
                const bool cpu = enc == ZB_ENC_FAST && threads >= 12 && large;
                EXPECT_EQ(st.backend_used, cpu ? ZB_BACKEND_CPU : ZB_BACKEND_GPU)
                    << "encoder " << enc << ", " << threads << " threads, " << data.size() << " values";
                EXPECT_TRUE(std::memcmp(out.data(), ref.data(), out.size() * 4) == 0) << "encoder " << enc;
            }
        }
    }
}

TEST(GpuAvailability, ReportsCleanly) {
    const int a = zb_gpu_available();
    EXPECT_TRUE(a == 0 || a == 1);
    std::printf("zb_gpu_available() = %d\n", a);
    if (!a) {
        zb_params p = zb_params_default();
        p.predictor = ZB_PRED_LORENZO;
        p.encoder = ZB_ENC_FAST;
        p.backend = ZB_BACKEND_GPU;
        const float x[4] = {1, 2, 3, 4};
        const size_t dims[1] = {4};
        uint8_t buf[512];
        size_t len = 0;
        EXPECT_EQ(zb_compress(&p, ZB_F32, x, 1, dims, buf, sizeof buf, &len, nullptr), ZB_ERR_GPU);
        p.backend = ZB_BACKEND_AUTO;
        EXPECT_EQ(zb_compress(&p, ZB_F32, x, 1, dims, buf, sizeof buf, &len, nullptr), ZB_OK);
    }
}

}  // namespace
