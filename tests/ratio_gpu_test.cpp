// Ratio encoder stage on the GPU: byte parity with the CPU encoder and identical decoding, on synthetic streams,
// Huffman edge cases and Lorenzo codes of real fields; corrupted segments give the same verdict as on the CPU.
// Without a usable GPU (CI, CPU-only builds) every test skips with a visible "no GPU: ..." message.
#include <gtest/gtest.h>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include "ratio_test_util.h"
#include "zb_ratio.h"
#include "zbound.h"
#ifdef ZBOUND_TEST_CUDA
#include <cuda_runtime.h>
#include "ratio_gpu.cuh"
#endif

#ifdef ZBOUND_TEST_CUDA
#define ZB_RATIO_REQUIRE_GPU()                                                                                  \
    do {                                                                                                        \
        if (!zb_gpu_available())                                                                                \
            GTEST_SKIP() << "no GPU: zb_gpu_available() is 0 (no CUDA device or driver)";                       \
    } while (0)
#else
#define ZB_RATIO_REQUIRE_GPU() GTEST_SKIP() << "no GPU: this is a CPU-only build (ZBOUND_CUDA=OFF)"
#endif

#ifdef ZBOUND_TEST_CUDA
namespace {

template <typename T> struct DeviceArray {
    T *p = nullptr;
    size_t n = 0;
    explicit DeviceArray(size_t count) : n(count) {
        EXPECT_EQ(cudaMalloc(&p, count * sizeof(T) + 16), cudaSuccess);
    }
    DeviceArray(const T *host, size_t count) : DeviceArray(count) {
        if (count) {
            EXPECT_EQ(cudaMemcpy(p, host, count * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
        }
    }
    ~DeviceArray() { cudaFree(p); }
    std::vector<T> host() const {
        std::vector<T> v(n);
        if (n) {
            EXPECT_EQ(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
        }
        return v;
    }
};

// Segments copied to device memory, each at an odd offset (as inside a payload), and their spans.
struct DeviceSegments {
    std::unique_ptr<DeviceArray<uint8_t>> buf;
    std::vector<zb::ByteSpan> spans;
    explicit DeviceSegments(const std::vector<std::string> &seg) {
        size_t total = 1;
        for (const std::string &s : seg) total += s.size();
        std::string all(1, '\x55');
        for (const std::string &s : seg) all += s;
        buf.reset(new DeviceArray<uint8_t>(reinterpret_cast<const uint8_t *>(all.data()), total));
        size_t off = 1;
        for (const std::string &s : seg) {
            spans.push_back({buf->p + off, (uint64_t)s.size()});
            off += s.size();
        }
    }
};

zb::gpu::Arena &arena() {
    static zb::gpu::Arena a;
    return a;
}

// GPU encode == CPU encode, GPU decode of those bytes == input. Returns the CPU stats.
void expect_parity(const std::vector<uint16_t> &sym, uint32_t A, const std::string &what,
                   int lg = zb::kRatioSubBlockLog2, uint32_t run_symbol = zb::kRatioNoRunSymbol) {
    SCOPED_TRACE(what);
    zb::RatioOptions opt;
    opt.sub_block_log2 = lg;
    opt.run_symbol = run_symbol;
    std::vector<std::string> cpu, gpu;
    std::string msg;
    zb::RatioStats cs, gs;
    ASSERT_EQ(zb::ratio_encode_cpu(sym.data(), sym.size(), A, 4, cpu, &cs, msg, opt), ZB_OK) << msg;
    DeviceArray<uint16_t> d_sym(sym.data(), sym.size());
    ASSERT_EQ(zb::gpu::ratio_encode_gpu(d_sym.p, sym.size(), A, nullptr, gpu, &gs, msg, &arena(), opt), ZB_OK) << msg;
    ASSERT_EQ(gpu.size(), cpu.size());
    for (size_t k = 0; k < cpu.size(); ++k) {
        if (gpu[k] == cpu[k]) continue;
        size_t i = 0;
        while (i < std::min(gpu[k].size(), cpu[k].size()) && gpu[k][i] == cpu[k][i]) ++i;
        ADD_FAILURE() << "segment " << k << " differs: sizes " << cpu[k].size() << " (CPU) vs " << gpu[k].size()
                      << " (GPU), first difference at byte " << i;
    }
    EXPECT_EQ(gs.payload_bytes, cs.payload_bytes);
    EXPECT_EQ(gs.metadata_bytes, cs.metadata_bytes);
    EXPECT_EQ(gs.max_code_length, cs.max_code_length);
    EXPECT_EQ(gs.run_tokens, cs.run_tokens);
    DeviceSegments ds(cpu);
    DeviceArray<uint16_t> d_out(sym.size());
    ASSERT_EQ(zb::gpu::ratio_decode_gpu(ds.spans.data(), sym.size(), A, nullptr, d_out.p, msg, &arena()), ZB_OK) << msg;
    const std::vector<uint16_t> out = d_out.host();
    size_t d = 0;
    while (d < sym.size() && out[d] == sym[d]) ++d;
    EXPECT_EQ(d, sym.size()) << "GPU decode differs at symbol " << d;
}

}  // namespace
#endif

TEST(RatioGpu, ParitySyntheticAndEdgeCases) {
    ZB_RATIO_REQUIRE_GPU();
#ifdef ZBOUND_TEST_CUDA
    const uint64_t S = 4096;
    for (uint64_t n : std::vector<uint64_t>{1, 2, 9, S - 1, S, S + 1, 32 * S + 1, 100 * S + 333})
        for (double scale : {0.0, 0.4, 4.0, 300.0})
            expect_parity(ratiot::laplace_symbols(n, 1024, scale, (uint32_t)n + 3, 0.001), 1024,
                          "n=" + std::to_string(n) + " scale=" + std::to_string(scale));
    // Sub-block sizes of the format.
    for (int lg = zb::kRatioMinSubBlockLog2; lg <= zb::kRatioMaxSubBlockLog2; ++lg)
        expect_parity(ratiot::laplace_symbols(77 * 1024 + 5, 1024, 2.5, 17), 1024, "lg=" + std::to_string(lg), lg);
    // Every symbol of the largest alphabet (codes of 16 bits, global-memory tables).
    std::vector<uint16_t> all(65536 * 2 + 1);
    for (size_t i = 0; i < all.size(); ++i) all[i] = (uint16_t)(i * 40503u);
    expect_parity(all, 65536, "A=65536");
    // A = 2; one symbol; mostly one symbol with zero sub-blocks.
    std::vector<uint16_t> two(50000);
    for (size_t i = 0; i < two.size(); ++i) two[i] = (uint16_t)((i * 2654435761u >> 9) & 1);
    expect_parity(two, 2, "A=2");
    expect_parity(std::vector<uint16_t>(1 << 20, 7), 1024, "constant");
    std::vector<uint16_t> sparse(3 << 20, 512);
    for (size_t i = 0; i < sparse.size(); i += 7919) sparse[i] = 300;
    expect_parity(sparse, 1024, "mostly one symbol");
    // Fibonacci frequencies: lengths at the 16-bit limit.
    std::vector<uint16_t> fib;
    uint64_t a = 1, b = 1;
    for (int i = 0; i < 26; ++i) {
        fib.insert(fib.end(), (size_t)a, (uint16_t)(100 + 13 * i));
        const uint64_t c = a + b;
        a = b;
        b = c;
    }
    std::shuffle(fib.begin(), fib.end(), std::mt19937(1));
    expect_parity(fib, 1024, "fibonacci");
#endif
}

TEST(RatioGpu, ParityRunTokens) {
    ZB_RATIO_REQUIRE_GPU();
#ifdef ZBOUND_TEST_CUDA
    // The run symbol 512: tokens wherever they pay (runs crossing the 32-symbol pieces of the GPU threads and the
    // sub-block borders), plain streams elsewhere; the same choice and bytes as the CPU.
    const uint64_t S = 4096;
    for (uint64_t n : std::vector<uint64_t>{1, 2, 9, 31, 32, 33, S - 1, S, S + 1, 32 * S + 1, 100 * S + 333})
        for (double scale : {0.0, 0.05, 0.4, 4.0})
            expect_parity(ratiot::laplace_symbols(n, 1024, scale, (uint32_t)n + 5, 0.001), 1024,
                          "runs n=" + std::to_string(n) + " scale=" + std::to_string(scale), zb::kRatioSubBlockLog2,
                          512);
    std::mt19937 rng(7);
    std::vector<uint16_t> runs;
    for (uint32_t L = 1; L <= 5000; L += 1 + L / 8) {
        runs.insert(runs.end(), L, (uint16_t)512);
        runs.push_back((uint16_t)(505 + rng() % 6));
    }
    for (int k = 0; k < 20000; ++k) {
        runs.insert(runs.end(), rng() % 70, (uint16_t)512);
        runs.push_back((uint16_t)(500 + rng() % 11 == 512 ? 511 : 500 + rng() % 11));
    }
    for (int lg = zb::kRatioMinSubBlockLog2; lg <= zb::kRatioMaxSubBlockLog2; ++lg)
        expect_parity(runs, 1024, "runs of every length, lg=" + std::to_string(lg), lg, 512);
    for (uint64_t n : {S * 3, S * 3 + 1, S * 3 + 31, S * 3 + 32})
        expect_parity(std::vector<uint16_t>(n, 512), 1024, "only z, n=" + std::to_string(n), zb::kRatioSubBlockLog2,
                      512);
#endif
}

TEST(RatioGpu, ParityRealDataLorenzoCodes) {
    ZB_RATIO_REQUIRE_GPU();
#ifdef ZBOUND_TEST_CUDA
    const char *env = std::getenv("ZBOUND_RATIO_DATA");
    const std::string dir = env ? env : ZBOUND_SHARED_DATA;
    int fields = 0;
    for (const char *name : {"nasa_cfd_combq.bin", "nasa_cfd_postq.bin"}) {
        std::vector<float> x;
        size_t dims[3];
        if (!ratiot::read_plot3d(dir + "/" + name, x, dims)) continue;
        ++fields;
        for (double rel : {1e-2, 1e-3, 1e-4}) {
            const auto sym = ratiot::lorenzo_symbols(x, dims, rel);
            expect_parity(sym, 1024, std::string(name) + " rel " + std::to_string(rel));
            expect_parity(sym, 1024, std::string(name) + " rel " + std::to_string(rel) + " runs",
                          zb::kRatioSubBlockLog2, 512);
        }
    }
    if (!fields) GTEST_SKIP() << "no PLOT3D fields in " << dir << " (set ZBOUND_RATIO_DATA)";
#endif
}

TEST(RatioGpu, CorruptSegmentsSameVerdictAsCpu) {
    ZB_RATIO_REQUIRE_GPU();
#ifdef ZBOUND_TEST_CUDA
    for (const bool runs : {false, true}) {
    SCOPED_TRACE(runs ? "run tokens" : "plain");
    std::vector<uint16_t> sym = ratiot::laplace_symbols(33 * 1024 + 100, 1024, runs ? 0.2 : 3.0, 77, 0.002);
    std::fill(sym.begin() + 2048, sym.begin() + 4096, (uint16_t)512);
    zb::RatioOptions opt;
    opt.sub_block_log2 = 10;
    opt.run_symbol = runs ? 512 : zb::kRatioNoRunSymbol;
    std::vector<std::string> seg;
    std::string msg;
    zb::RatioStats st;
    ASSERT_EQ(zb::ratio_encode_cpu(sym.data(), sym.size(), 1024, 1, seg, &st, msg, opt), ZB_OK);
    ASSERT_EQ(st.run_tokens, runs);
    std::mt19937 rng(3);
    int corrupt = 0, cases = 0;
    // ZBOUND_RATIO_TRIALS: fewer flips per segment (for runs under compute-sanitizer).
    const int trials = std::getenv("ZBOUND_RATIO_TRIALS") ? std::atoi(std::getenv("ZBOUND_RATIO_TRIALS")) : 150;
    auto check = [&](const std::vector<std::string> &s, const std::string &what) {
        std::vector<uint16_t> cpu_out(sym.size());
        const auto sp = ratiot::spans(s);
        std::string m1, m2;
        const zb_status c = zb::ratio_decode_cpu(sp.data(), sym.size(), 1024, 1, cpu_out.data(), m1);
        DeviceSegments ds(s);
        DeviceArray<uint16_t> d_out(sym.size());
        const zb_status g = zb::gpu::ratio_decode_gpu(ds.spans.data(), sym.size(), 1024, nullptr, d_out.p, m2, &arena());
        ++cases;
        EXPECT_EQ(g, c) << what << ": CPU '" << m1 << "' GPU '" << m2 << "'";
        if (g == ZB_OK && c == ZB_OK) {
            EXPECT_TRUE(d_out.host() == cpu_out) << what;
        }
        if (g == ZB_ERR_CORRUPT) ++corrupt;
    };
    for (int k = 0; k < 4; ++k) {
        std::vector<std::string> s = seg;
        if (!s[(size_t)k].empty()) {
            s[(size_t)k].pop_back();
            check(s, "truncated segment " + std::to_string(k));
        }
        for (int t = 0; t < trials; ++t) {
            s = seg;
            if (s[(size_t)k].empty()) break;
            s[(size_t)k][rng() % s[(size_t)k].size()] ^= (char)(1 << (rng() % 8));
            check(s, "flip in segment " + std::to_string(k) + " trial " + std::to_string(t));
        }
    }
    std::printf("[ ratio ] GPU decoder: %d of %d corrupted inputs rejected, same verdicts as the CPU\n", corrupt, cases);
    // A symbol outside the alphabet.
    sym[1000] = 1024;
    DeviceArray<uint16_t> d_sym(sym.data(), sym.size());
    std::vector<std::string> out;
    EXPECT_EQ(zb::gpu::ratio_encode_gpu(d_sym.p, sym.size(), 1024, nullptr, out, nullptr, msg, &arena(), opt),
              ZB_ERR_INVALID_ARG);
    EXPECT_TRUE(out.empty());
    }
#endif
}
