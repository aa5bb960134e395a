// The batched device API (zb_compress_device_batch / zb_decompress_device_batch) and the context pool behind it:
// every chunk of a batch gets zb_compress's CPU bytes and decodes to the CPU's values, whatever the pipeline,
// with more chunks than streams; a bad chunk fails alone (its status, the others still right); host threads
// calling the single-array API at the same time get the CPU's bytes too. Without a GPU the batch calls refuse
// cleanly.
#include <cmath>
#include <limits>
#include <thread>
#include "gpu_test_util.h"
#if ZBOUND_TEST_CUDA
#include <cuda_runtime.h>
#endif

namespace {

#if ZBOUND_TEST_CUDA

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

// `count` device buffers of `bytes` each, freed at scope exit.
struct DevBufs {
    std::vector<void *> p;
    DevBufs(size_t count, size_t bytes) : p(count, nullptr) {
        for (void *&q : p) (void)cudaMalloc(&q, bytes ? bytes : 1);
    }
    ~DevBufs() {
        for (void *q : p) (void)cudaFree(q);
    }
};

// Chunk i of a batch: a smooth field with its own seed; some with NaN, one pure noise under a tiny bound (a raw
// passthrough stream when the bound is ABS), so that the chunks' streams differ in length and layout.
template <typename T> std::vector<std::vector<T>> batch_chunks(const std::vector<size_t> &dims, size_t count) {
    std::vector<std::vector<T>> chunks;
    for (size_t i = 0; i < count; ++i) {
        auto v = zbt::smooth_field<T>(dims, i == 3 ? 1.0 : 0.01 * (double)(i % 4), (uint32_t)(100 + i), (double)i);
        if (i % 3 == 1)
            for (size_t j = i; j < v.size(); j += 101) v[j] = std::numeric_limits<T>::quiet_NaN();
        chunks.push_back(std::move(v));
    }
    return chunks;
}

// Default: small chunks, more of them than the default eight streams.
template <typename T>
void batch_round_trip(const zb_params &p, const std::string &what, const std::vector<size_t> &dims = {24, 40, 72},
                      size_t count = 11) {
    SCOPED_TRACE(what);
    const auto chunks = batch_chunks<T>(dims, count);
    const size_t n = chunks[0].size(), vbytes = n * sizeof(T);
    const size_t cap = zb_compress_bound(zbt::dtype_of<T>(), n);

    DevBufs src(count, vbytes), streams(count, cap), out(count, vbytes);
    for (size_t i = 0; i < count; ++i)
        CUDA_OK(cudaMemcpy(src.p[i], chunks[i].data(), vbytes, cudaMemcpyHostToDevice));
    std::vector<size_t> lens(count, 0);
    std::vector<zb_status> statuses(count, ZB_ERR_INTERNAL);
    zb_run_stats st{};
    const std::vector<const void *> srcs(src.p.begin(), src.p.end());
    ASSERT_EQ(zb_compress_device_batch(&p, zbt::dtype_of<T>(), (int)dims.size(), dims.data(), count, srcs.data(),
                                       streams.p.data(), cap, lens.data(), statuses.data(), nullptr, &st),
              ZB_OK)
        << zb_last_error();
    EXPECT_EQ(st.backend_used, ZB_BACKEND_GPU);
    EXPECT_EQ(st.bytes_in, count * vbytes);

    size_t stored = 0;
    for (size_t i = 0; i < count; ++i) {
        SCOPED_TRACE("chunk " + std::to_string(i));
        EXPECT_EQ(statuses[i], ZB_OK);
        const zbt::Stream ref = gput::compress_on(ZB_BACKEND_CPU, chunks[i], dims, p);
        ASSERT_EQ(ref.status, ZB_OK);
        std::vector<uint8_t> got(lens[i]);
        CUDA_OK(cudaMemcpy(got.data(), streams.p[i], lens[i], cudaMemcpyDeviceToHost));
        EXPECT_TRUE(got == ref.bytes) << "batch stream differs from the CPU's: "
                                      << gput::first_difference(ref.bytes, got);
        stored += lens[i];
    }
    EXPECT_EQ(st.bytes_out, stored);

    const std::vector<const void *> in(streams.p.begin(), streams.p.end());
    std::fill(statuses.begin(), statuses.end(), ZB_ERR_INTERNAL);
    ASSERT_EQ(zb_decompress_device_batch(count, in.data(), lens.data(), out.p.data(), vbytes, statuses.data(), nullptr,
                                         nullptr),
              ZB_OK)
        << zb_last_error();
    for (size_t i = 0; i < count; ++i) {
        SCOPED_TRACE("chunk " + std::to_string(i));
        EXPECT_EQ(statuses[i], ZB_OK);
        std::vector<uint8_t> ref_stream(lens[i]);
        CUDA_OK(cudaMemcpy(ref_stream.data(), streams.p[i], lens[i], cudaMemcpyDeviceToHost));
        std::vector<T> ref(n), dec(n);
        ASSERT_EQ(zb_decompress(ref_stream.data(), lens[i], ref.data(), vbytes, ZB_BACKEND_CPU, nullptr), ZB_OK);
        CUDA_OK(cudaMemcpy(dec.data(), out.p[i], vbytes, cudaMemcpyDeviceToHost));
        EXPECT_EQ(gput::first_value_difference(ref, dec), n) << "batch decode differs from the CPU's";
        if (p.mode == ZB_MODE_PW_REL) {
            EXPECT_EQ(zbt::count_pw_violations(chunks[i], dec, p.bound), 0u);
        }
    }
}

template <typename T> void batch_pipelines() {
    const std::pair<zb_predictor, zb_encoder> pipelines[] = {{ZB_PRED_LORENZO, ZB_ENC_FAST},
                                                             {ZB_PRED_LORENZO, ZB_ENC_RATIO},
                                                             {ZB_PRED_INTERP, ZB_ENC_RATIO},
                                                             {ZB_PRED_AUTO, ZB_ENC_AUTO}};
    for (const auto &pipe : pipelines) {
        const zb_params p = gput::pipeline_params(pipe.first, pipe.second, ZB_MODE_REL, 1e-3);
        batch_round_trip<T>(p, "rel 1e-3, pipeline " + std::to_string(pipe.first) + "/" + std::to_string(pipe.second));
    }
    zb_params tight = zb_params_default();
    tight.mode = ZB_MODE_ABS;
    tight.bound = 1e-9;  // the noise chunk (and more) are stored raw
    batch_round_trip<T>(tight, "abs 1e-9");
    zb_params pw = zb_params_default();
    pw.mode = ZB_MODE_PW_REL;
    pw.bound = 1e-3;
    batch_round_trip<T>(pw, "pw_rel 1e-3");
}

TEST(GpuBatch, EveryChunkGetsTheCpuBytesF32) {
    ZB_REQUIRE_GPU();
    batch_pipelines<float>();
}

TEST(GpuBatch, EveryChunkGetsTheCpuBytesF64) {
    ZB_REQUIRE_GPU();
    batch_pipelines<double>();
}

// Chunks of 256 x 64 x 128 values, 1024 tiles of 2048 codes: on a GPU of 129 to 256 SMs (an H100 or H200 has 132)
// a lone call codes them in two passes and a chunk of a batch in walks of 4 tiles (walk_plan: from two waves of
// tiles alone, one wave of 4 x SMs in a batch). The batch's streams are the CPU's bytes either way.
TEST(GpuBatch, ChunksThatWalkGetTheCpuBytes) {
    ZB_REQUIRE_GPU();
    const zb_params p = gput::pipeline_params(ZB_PRED_LORENZO, ZB_ENC_FAST, ZB_MODE_REL, 1e-3);
    batch_round_trip<float>(p, "rel 1e-3, 8 MiB chunks", {256, 64, 128}, 4);
}

// One corrupted stream and one null buffer in a batch: those chunks report their errors, the call returns the
// first one and names its chunk, every other chunk is decoded right.
TEST(GpuBatch, BadChunksFailAlone) {
    ZB_REQUIRE_GPU();
    const std::vector<size_t> dims{64, 300};
    const size_t count = 6;
    const auto chunks = batch_chunks<float>(dims, count);
    const size_t n = chunks[0].size(), vbytes = n * 4;
    zb_params p = zb_params_default();
    p.mode = ZB_MODE_REL;
    p.bound = 1e-3;
    std::vector<std::vector<uint8_t>> host_streams;
    for (const auto &c : chunks) host_streams.push_back(gput::compress_on(ZB_BACKEND_CPU, c, dims, p).bytes);
    host_streams[2][host_streams[2].size() - 3] ^= 0x40;  // payload checksum mismatch
    DevBufs streams(count, zb_compress_bound(ZB_F32, n)), out(count, vbytes);
    std::vector<size_t> lens;
    for (size_t i = 0; i < count; ++i) {
        CUDA_OK(cudaMemcpy(streams.p[i], host_streams[i].data(), host_streams[i].size(), cudaMemcpyHostToDevice));
        lens.push_back(host_streams[i].size());
    }
    std::vector<const void *> in(streams.p.begin(), streams.p.end());
    in[4] = nullptr;
    std::vector<zb_status> statuses(count, ZB_OK);
    EXPECT_EQ(zb_decompress_device_batch(count, in.data(), lens.data(), out.p.data(), vbytes, statuses.data(), nullptr,
                                         nullptr),
              ZB_ERR_CORRUPT);
    EXPECT_NE(std::string(zb_last_error()).find("chunk 2 "), std::string::npos) << zb_last_error();
    for (size_t i = 0; i < count; ++i) {
        SCOPED_TRACE("chunk " + std::to_string(i));
        EXPECT_EQ(statuses[i], i == 2 ? ZB_ERR_CORRUPT : i == 4 ? ZB_ERR_INVALID_ARG : ZB_OK);
        if (statuses[i] != ZB_OK) continue;
        std::vector<float> ref(n), dec(n);
        ASSERT_EQ(zb_decompress(host_streams[i].data(), lens[i], ref.data(), vbytes, ZB_BACKEND_CPU, nullptr), ZB_OK);
        CUDA_OK(cudaMemcpy(dec.data(), out.p[i], vbytes, cudaMemcpyDeviceToHost));
        EXPECT_EQ(gput::first_value_difference(ref, dec), n);
    }
    // A destination too small for every chunk: each chunk says so.
    EXPECT_EQ(zb_decompress_device_batch(2, in.data(), lens.data(), out.p.data(), vbytes - 4, statuses.data(), nullptr,
                                         nullptr),
              ZB_ERR_BUFFER_TOO_SMALL);
    EXPECT_EQ(statuses[0], ZB_ERR_BUFFER_TOO_SMALL);
    EXPECT_EQ(statuses[1], ZB_ERR_BUFFER_TOO_SMALL);
    // Compressing with too little room: a capacity one byte short of the longest stream fails for the chunks
    // whose stream is that long (the noise chunk) and for no other.
    DevBufs src(count, vbytes);
    for (size_t i = 0; i < count; ++i) CUDA_OK(cudaMemcpy(src.p[i], chunks[i].data(), vbytes, cudaMemcpyHostToDevice));
    size_t longest = 0;
    for (const auto &hs : host_streams) longest = std::max(longest, hs.size());
    std::vector<size_t> out_lens(count, 1);
    const std::vector<const void *> srcs(src.p.begin(), src.p.end());
    EXPECT_EQ(zb_compress_device_batch(&p, ZB_F32, 2, dims.data(), count, srcs.data(), streams.p.data(), longest - 1,
                                       out_lens.data(), statuses.data(), nullptr, nullptr),
              ZB_ERR_BUFFER_TOO_SMALL);
    size_t too_long = 0;
    for (size_t i = 0; i < count; ++i) {
        SCOPED_TRACE("chunk " + std::to_string(i));
        const size_t want = gput::compress_on(ZB_BACKEND_CPU, chunks[i], dims, p).bytes.size();
        const bool fits = want < longest;
        too_long += !fits;
        EXPECT_EQ(statuses[i], fits ? ZB_OK : ZB_ERR_BUFFER_TOO_SMALL);
        EXPECT_EQ(out_lens[i], fits ? want : 0u);
    }
    EXPECT_GE(too_long, 1u);
    EXPECT_LT(too_long, count);
    // An empty batch does nothing and succeeds.
    EXPECT_EQ(zb_compress_device_batch(&p, ZB_F32, 2, dims.data(), 0, nullptr, nullptr, 0, nullptr, nullptr, nullptr,
                                       nullptr),
              ZB_OK);
    EXPECT_EQ(zb_decompress_device_batch(0, nullptr, nullptr, nullptr, 0, nullptr, nullptr, nullptr), ZB_OK);
}

// Host threads compressing and decompressing at the same time through the host API on the GPU (the filter's path
// when an application calls HDF5 from several threads, or zbound.write_chunks) each get the CPU's bytes: the
// contexts of the pool keep their buffers apart.
TEST(GpuBatch, ConcurrentHostCallsGetTheCpuBytes) {
    ZB_REQUIRE_GPU();
    const std::vector<size_t> dims{96, 128, 40};
    const size_t nthreads = 6;
    const auto chunks = batch_chunks<float>(dims, nthreads);
    zb_params p = zb_params_default();
    p.mode = ZB_MODE_REL;
    p.bound = 1e-4;
    std::vector<std::vector<uint8_t>> ref;
    for (const auto &c : chunks) ref.push_back(gput::compress_on(ZB_BACKEND_CPU, c, dims, p).bytes);
    std::vector<int> bad(nthreads, 0);
    std::vector<std::thread> threads;
    for (size_t t = 0; t < nthreads; ++t)
        threads.emplace_back([&, t] {
            for (int rep = 0; rep < 4; ++rep) {
                const zbt::Stream s = gput::compress_on(ZB_BACKEND_GPU, chunks[t], dims, p);
                if (s.status != ZB_OK || s.bytes != ref[t]) ++bad[t];
                std::vector<float> dec(chunks[t].size()), cpu(chunks[t].size());
                if (zb_decompress(ref[t].data(), ref[t].size(), dec.data(), dec.size() * 4, ZB_BACKEND_GPU, nullptr) ||
                    zb_decompress(ref[t].data(), ref[t].size(), cpu.data(), cpu.size() * 4, ZB_BACKEND_CPU, nullptr) ||
                    std::memcmp(dec.data(), cpu.data(), dec.size() * 4) != 0)
                    ++bad[t];
            }
        });
    for (auto &th : threads) th.join();
    for (size_t t = 0; t < nthreads; ++t) EXPECT_EQ(bad[t], 0) << "thread " << t;
}

#endif

// Without a GPU (CI, CPU-only builds) the batch calls refuse with a clear status, and an argument error is caught
// before anything else.
TEST(GpuBatchAvailability, RefusesCleanlyWithoutAGpu) {
    zb_params p = zb_params_default();
    const size_t dims[1] = {4};
    const void *src[1] = {dims};
    void *dst[1] = {nullptr};
    size_t len[1] = {0};
    EXPECT_EQ(zb_compress_device_batch(&p, ZB_F32, 1, dims, 1, src, dst, 64, nullptr, nullptr, nullptr, nullptr),
              ZB_ERR_INVALID_ARG);
    if (zb_gpu_available()) GTEST_SKIP() << "a GPU is available: GpuBatch.* cover the calls";
    const zb_status s = zb_compress_device_batch(&p, ZB_F32, 1, dims, 1, src, dst, 64, len, nullptr, nullptr, nullptr);
    EXPECT_TRUE(s == ZB_ERR_UNSUPPORTED || s == ZB_ERR_GPU) << s;
    EXPECT_STRNE(zb_last_error(), "");
    const zb_status d = zb_decompress_device_batch(1, src, len, dst, 64, nullptr, nullptr, nullptr);
    EXPECT_TRUE(d == ZB_ERR_UNSUPPORTED || d == ZB_ERR_GPU) << d;
}

}  // namespace
