// GPU resource faults. Each group runs as its own ctest entry with its knob in the environment (the CUDA backend
// reads the knobs once per process; see cuda/gpu_internal.h):
//   GpuMemLimit.*      ZBOUND_GPU_MEM_LIMIT=8 MiB: a chunk that needs more device memory is done on the CPU (AUTO)
//                      with the CPU's bytes; backend GPU fails with ZB_ERR_GPU naming the limit; small chunks still
//                      run on the GPU afterwards.
//   GpuFault.*         ZBOUND_GPU_FAULT_AFTER=N: a device error after the N+1-th kernel launch, in the middle of a
//                      chunk: AUTO redoes the chunk on the CPU with identical bytes / values.
//   GpuLargerThanFree  device memory taken by the test until less is free than the chunk needs: CPU fallback,
//                      identical bytes; once freed, the GPU again.
//   NoGpu.*            CUDA_VISIBLE_DEVICES= (no device) or ZBOUND_DEVICE=99: AUTO works on the CPU, GPU requests
//                      fail with ZB_ERR_GPU, nothing crashes. These run everywhere (CI included).
// Without a GPU the first three skip with a visible "no GPU" message.
#include <gtest/gtest.h>
#include <cstdlib>
#include <string>
#include <vector>
#include "rel_util.h"
#ifdef ZBOUND_TEST_CUDA
#include <cuda_runtime.h>
#endif

namespace {

bool env_set(const char *name) { return std::getenv(name) && *std::getenv(name); }

#define REL_REQUIRE_ENV(name)                                                                               \
    do {                                                                                                    \
        if (!env_set(name)) GTEST_SKIP() << "run through its ctest entry, which sets " name;                \
    } while (0)

// Pinned to Lorenzo + fast (format v1), so that the pipeline, and with it the sequence of GPU calls that the fault
// injection counts, does not depend on auto's choice (the GPU runs every pipeline).
relt::Case gpu_case(relt::Case c) {
    c.params.predictor = ZB_PRED_LORENZO;
    c.params.encoder = ZB_ENC_FAST;
    return c;
}

std::vector<relt::Case> fault_cases() {
    return {gpu_case(relt::make_case<float>({300, 400}, ZB_MODE_REL, 1e-3, 31, true)),
            gpu_case(relt::make_case<double>({16, 64, 64}, ZB_MODE_ABS, 1e-6, 32, true, true)),
            gpu_case(relt::make_case<float>({200001}, ZB_MODE_ABS, 1e-9, 33, false)),   // escapes and exceptions
            gpu_case(relt::make_case<double>({70000}, ZB_MODE_ABS, 0.0, 34, true))};     // lossless
}

TEST(GpuMemLimit, LargeChunkFallsBackSmallChunkStaysOnGpu) {
    REL_REQUIRE_ENV("ZBOUND_GPU_MEM_LIMIT");
    REL_REQUIRE_GPU();
    const size_t limit = std::strtoull(std::getenv("ZBOUND_GPU_MEM_LIMIT"), nullptr, 10);
    const relt::Case small = gpu_case(relt::make_case<float>({64, 1024}, ZB_MODE_REL, 1e-3, 41, true));     // 256 KiB
    const relt::Case large = gpu_case(relt::make_case<float>({1024, 4096}, ZB_MODE_REL, 1e-3, 42, true));   // 16 MiB
    ASSERT_GT(large.data.size(), limit);
    const relt::Result ref_small = relt::run(small, ZB_BACKEND_CPU, 0, ZB_BACKEND_CPU);
    const relt::Result ref_large = relt::run(large, ZB_BACKEND_CPU, 0, ZB_BACKEND_CPU);

    const relt::Result a = relt::run(small, ZB_BACKEND_AUTO, 0, ZB_BACKEND_AUTO);
    EXPECT_EQ(a.used, ZB_BACKEND_GPU) << "a 256 KiB chunk should fit an 8 MiB pool";
    EXPECT_EQ(a.stream, ref_small.stream);
    EXPECT_EQ(a.decoded, ref_small.decoded);

    const relt::Result b = relt::run(large, ZB_BACKEND_AUTO, 0, ZB_BACKEND_AUTO);
    ASSERT_EQ(b.status, ZB_OK) << zb_last_error();
    ASSERT_EQ(b.dstatus, ZB_OK) << zb_last_error();
    EXPECT_EQ(b.used, ZB_BACKEND_CPU) << "the chunk needs more than ZBOUND_GPU_MEM_LIMIT: it must fall back";
    EXPECT_EQ(b.stream, ref_large.stream);
    EXPECT_EQ(b.decoded, ref_large.decoded);

    const relt::Result c = relt::run(large, ZB_BACKEND_GPU, 0, ZB_BACKEND_GPU);
    EXPECT_EQ(c.status, ZB_ERR_GPU);
    EXPECT_NE(std::string(zb_last_error()).find("ZBOUND_GPU_MEM_LIMIT"), std::string::npos) << zb_last_error();

    const relt::Result d = relt::run(small, ZB_BACKEND_GPU, 0, ZB_BACKEND_GPU);   // the context still works
    ASSERT_EQ(d.status, ZB_OK) << zb_last_error();
    EXPECT_EQ(d.stream, ref_small.stream);
    EXPECT_EQ(d.decoded, ref_small.decoded);
}

TEST(GpuFault, MidChunkDeviceErrorsFallBackToCpu) {
    REL_REQUIRE_ENV("ZBOUND_GPU_FAULT_AFTER");
    REL_REQUIRE_GPU();
    const auto cs = fault_cases();
    int cpu_fallbacks = 0, gpu_runs = 0, gpu_required_failures = 0;
    for (int round = 0; round < 4; ++round) {
        for (size_t i = 0; i < cs.size(); ++i) {
            const relt::Result ref = relt::run(cs[i], ZB_BACKEND_CPU, 0, ZB_BACKEND_CPU);
            const relt::Result r = relt::run(cs[i], ZB_BACKEND_AUTO, 0, ZB_BACKEND_AUTO);
            ASSERT_EQ(r.status, ZB_OK) << zb_last_error();
            ASSERT_EQ(r.dstatus, ZB_OK) << zb_last_error();
            EXPECT_EQ(r.stream, ref.stream) << "case " << i;
            EXPECT_EQ(r.decoded, ref.decoded) << "case " << i;
            (r.used == ZB_BACKEND_CPU ? cpu_fallbacks : gpu_runs)++;
            // Required GPU: either the GPU's (identical) result or ZB_ERR_GPU naming the injected fault.
            const relt::Result g = relt::run(cs[i], ZB_BACKEND_GPU, 0, ZB_BACKEND_GPU);
            if (g.status != ZB_OK || g.dstatus != ZB_OK) {
                ++gpu_required_failures;
                EXPECT_TRUE(g.status == ZB_ERR_GPU || g.dstatus == ZB_ERR_GPU);
                EXPECT_NE(std::string(zb_last_error()).find("injected GPU fault"), std::string::npos)
                    << zb_last_error();
            } else {
                EXPECT_EQ(g.stream, ref.stream);
                EXPECT_EQ(g.decoded, ref.decoded);
            }
        }
    }
    std::printf("GpuFault (ZBOUND_GPU_FAULT_AFTER=%s): AUTO compressions on the CPU after a fault %d, on the GPU %d; "
                "GPU-required calls that failed %d\n",
                std::getenv("ZBOUND_GPU_FAULT_AFTER"), cpu_fallbacks, gpu_runs, gpu_required_failures);
    EXPECT_GT(cpu_fallbacks + gpu_required_failures, 0) << "no fault was injected";
}

TEST(GpuLargerThanFree, ChunkLargerThanFreeDeviceMemoryFallsBack) {
    REL_REQUIRE_GPU();
#ifndef ZBOUND_TEST_CUDA
    GTEST_SKIP() << "needs the CUDA runtime in the test (CUDA build)";
#else
    const relt::Case c = gpu_case(relt::make_case<float>({128, 1024, 1024}, ZB_MODE_REL, 1e-3, 51, false));   // 512 MiB
    const relt::Result ref = relt::run(c, ZB_BACKEND_CPU, 0, ZB_BACKEND_CPU);
    ASSERT_EQ(ref.status, ZB_OK);
    size_t free_b = 0, total_b = 0;
    ASSERT_EQ(cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
    // Take device memory until less than half the chunk is free.
    std::vector<void *> hog;
    const size_t piece = (size_t)1 << 30;
    while (free_b > c.data.size() / 2) {
        void *p = nullptr;
        const size_t want = std::min(piece, free_b - c.data.size() / 4);
        if (cudaMalloc(&p, want) != cudaSuccess) {
            (void)cudaGetLastError();
            break;
        }
        hog.push_back(p);
        ASSERT_EQ(cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
    }
    std::printf("GpuLargerThanFree: %zu MiB free of %zu MiB for a %zu MiB chunk\n", free_b >> 20, total_b >> 20,
                c.data.size() >> 20);
    const relt::Result r = relt::run(c, ZB_BACKEND_AUTO, 0, ZB_BACKEND_CPU);
    EXPECT_EQ(r.status, ZB_OK) << zb_last_error();
    EXPECT_EQ(r.used, ZB_BACKEND_CPU);
    EXPECT_EQ(r.stream, ref.stream);
    const relt::Result g = relt::run(c, ZB_BACKEND_GPU, 0, ZB_BACKEND_CPU);
    EXPECT_EQ(g.status, ZB_ERR_GPU) << "the GPU cannot hold this chunk now";
    for (void *p : hog) cudaFree(p);
    const relt::Result back = relt::run(c, ZB_BACKEND_AUTO, 0, ZB_BACKEND_AUTO);
    EXPECT_EQ(back.status, ZB_OK) << zb_last_error();
    EXPECT_EQ(back.used, ZB_BACKEND_GPU) << "with the memory back the GPU is used again";
    EXPECT_EQ(back.stream, ref.stream);
    EXPECT_EQ(back.decoded, ref.decoded);
#endif
}

// No device (CUDA_VISIBLE_DEVICES empty) or a device index that does not exist: everything still works on the CPU.
TEST(NoGpu, AutoWorksGpuRequestsFailCleanly) {
    if (!env_set("ZBOUND_REL_NO_GPU")) GTEST_SKIP() << "run through its ctest entries (rel_no_gpu_*)";
    EXPECT_EQ(zb_gpu_available(), 0);
    for (const relt::Case &c : fault_cases()) {
        const relt::Result ref = relt::run(c, ZB_BACKEND_CPU, 0, ZB_BACKEND_CPU);
        const relt::Result r = relt::run(c, ZB_BACKEND_AUTO, 0, ZB_BACKEND_AUTO);
        ASSERT_EQ(r.status, ZB_OK) << zb_last_error();
        EXPECT_EQ(r.used, ZB_BACKEND_CPU);
        EXPECT_EQ(r.stream, ref.stream);
        EXPECT_EQ(r.decoded, ref.decoded);
        const relt::Result g = relt::run(c, ZB_BACKEND_GPU, 0, ZB_BACKEND_GPU);
        EXPECT_EQ(g.status, ZB_ERR_GPU);
        EXPECT_NE(std::string(zb_last_error()).find("no usable GPU"), std::string::npos) << zb_last_error();
        std::vector<uint8_t> out(ref.decoded.size());
        EXPECT_EQ(zb_decompress(ref.stream.data(), ref.stream.size(), out.data(), out.size(), ZB_BACKEND_GPU, nullptr),
                  ZB_ERR_GPU);
    }
    // The device-pointer API refuses (no CUDA backend: unsupported; no device: GPU error).
    size_t len = 0, dim = 4;
    float x[4] = {1, 2, 3, 4};
    uint8_t out[256];
    const zb_params p = zb_params_default();
    const zb_status s = zb_compress_device(&p, ZB_F32, x, 1, &dim, out, sizeof out, &len, nullptr, nullptr);
    EXPECT_TRUE(s == ZB_ERR_GPU || s == ZB_ERR_UNSUPPORTED) << s;
}

}  // namespace
