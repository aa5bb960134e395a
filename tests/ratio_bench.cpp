// Throughput of the ratio encoder stage (bench/NOTES.md, "Ratio encoder"): CPU (given thread count) and GPU (CUDA
// events, median of repeats), on symbol streams of n symbols: Lorenzo codes of a real field tiled to n, and two
// synthetic two-sided geometric distributions. Throughput is also given as f32-equivalent GB/s (4 bytes of input per
// symbol). Checks CPU/GPU byte parity and the decoded symbols on every stream.
//
//   ratio_bench [--n SYMBOLS] [--repeat R] [--cpu-threads T] [--cpu-n SYMBOLS] [--no-gpu] [--no-cpu] [--data DIR]
//               [--sweep-sub-block]   (GPU: the first stream also with S = 1024 and 2048)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>
#include "ratio_test_util.h"
#include "zb_ratio.h"
#ifdef ZBOUND_TEST_CUDA
#include <cuda_runtime.h>
#include "ratio_gpu.cuh"
#endif

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

// Two-sided geometric symbols around 512 from a quantile table (fast for hundreds of millions of symbols).
std::vector<uint16_t> synthetic(uint64_t n, double scale, uint64_t seed) {
    std::vector<uint16_t> q(4096);
    for (int i = 0; i < 4096; ++i) {
        const double u = (i + 0.5) / 4096.0;
        const double d = std::floor(-scale * std::log(1 - u));
        q[(size_t)i] = (uint16_t)std::min(d, 500.0);
    }
    std::vector<uint16_t> v(n);
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (uint64_t i = 0; i < n; ++i) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        const uint16_t d = q[(size_t)(x & 4095)];
        v[i] = (uint16_t)((x >> 12) & 1 ? 512 + d : 512 - d);
    }
    return v;
}

std::vector<uint16_t> tiled(const std::vector<uint16_t> &src, uint64_t n) {
    std::vector<uint16_t> v(n);
    for (uint64_t i = 0; i < n; i += src.size())
        std::memcpy(&v[i], src.data(), 2 * (size_t)std::min<uint64_t>(src.size(), n - i));
    return v;
}

struct Stream {
    std::string name;
    std::vector<uint16_t> sym;
};

void print_sizes(const char *who, const Stream &s, const zb::RatioStats &st) {
    const double total = (double)(st.codebook_bytes + st.metadata_bytes + st.payload_bytes);
    std::printf("  %-4s %-28s bits/symbol %.3f (Huffman %.3f), f32 CR %.1f, f = %.5f (metadata %llu B, payload %llu "
                "B, codebook %llu B), max code %d bits, %u symbols used\n",
                who, s.name.c_str(), 8 * total / (double)s.sym.size(), 8.0 * (double)st.huffman_bytes / (double)s.sym.size(),
                4.0 * (double)s.sym.size() / total, st.overhead_f, (unsigned long long)st.metadata_bytes,
                (unsigned long long)st.payload_bytes, (unsigned long long)st.codebook_bytes, st.max_code_length,
                st.used_symbols);
}

void bench_cpu(const Stream &s, int threads, int repeat) {
    std::vector<double> te, td;
    std::vector<std::string> seg;
    zb::RatioStats st;
    std::vector<uint16_t> out(s.sym.size());
    for (int r = 0; r < repeat; ++r) {
        seg.clear();
        std::string msg;
        double t0 = now();
        if (zb::ratio_encode_cpu(s.sym.data(), s.sym.size(), 1024, threads, seg, &st, msg) != ZB_OK) {
            std::printf("CPU encode failed: %s\n", msg.c_str());
            return;
        }
        te.push_back(now() - t0);
        const auto sp = ratiot::spans(seg);
        t0 = now();
        if (zb::ratio_decode_cpu(sp.data(), s.sym.size(), 1024, threads, out.data(), msg) != ZB_OK) {
            std::printf("CPU decode failed: %s\n", msg.c_str());
            return;
        }
        td.push_back(now() - t0);
    }
    const bool ok = out == s.sym;
    const double n = (double)s.sym.size();
    std::printf("  CPU  %-28s %d thread(s): encode %.0f Msym/s (%.2f GB/s f32), decode %.0f Msym/s (%.2f GB/s f32)%s\n",
                s.name.c_str(), threads, n / median(te) / 1e6, 4 * n / median(te) / 1e9, n / median(td) / 1e6,
                4 * n / median(td) / 1e9, ok ? "" : "  DECODE MISMATCH");
    print_sizes("CPU", s, st);
}

#ifdef ZBOUND_TEST_CUDA
#define CK(call)                                                                                 \
    do {                                                                                         \
        cudaError_t e_ = (call);                                                                 \
        if (e_ != cudaSuccess) {                                                                 \
            std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
            std::exit(1);                                                                        \
        }                                                                                        \
    } while (0)

bool bench_gpu(const Stream &s, int repeat, int lg = zb::kRatioSubBlockLog2) {
    using namespace zb::gpu;
    const uint64_t n = s.sym.size();
    ContextLease lease;
    Context &c = lease.get();
    cudaStream_t st = c.stream;
    uint16_t *d_sym = nullptr, *d_out = nullptr;
    CK(cudaMalloc(&d_sym, 2 * n));
    CK(cudaMalloc(&d_out, 2 * n));
    CK(cudaMemcpy(d_sym, s.sym.data(), 2 * n, cudaMemcpyHostToDevice));
    Arena work, payload, dwork;
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<double> enc_wall, enc_kernel, dec_wall, dec_kernel;
    RatioEncoder enc;
    uint8_t *dst[zb::kRatioSegmentCount] = {};
    bool ok = true;
    try {
        for (int r = 0; r < repeat + 1; ++r) {  // the first round warms up (arena growth, module load)
            KernelTimer kt(c, st);
            CK(cudaEventRecord(e0, st));
            zb::RatioOptions opt;
            opt.sub_block_log2 = lg;
            enc.plan(c, work, d_sym, n, 1024, st, &kt, opt);
            uint8_t *base = payload.reserve(enc.total_length() + 64);
            uint64_t off = 7;  // segments at odd offsets, as inside a stream
            for (int k = 0; k < zb::kRatioSegmentCount; ++k) {
                dst[k] = base + off;
                off += enc.segment_length(k);
            }
            enc.write(dst, st, &kt);
            CK(cudaEventRecord(e1, st));
            CK(cudaEventSynchronize(e1));
            float ms = 0;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            const double ks = kt.seconds();
            if (r) {
                enc_wall.push_back(ms * 1e-3);
                enc_kernel.push_back(ks);
            }
        }
        zb::ByteSpan segs[zb::kRatioSegmentCount];
        for (int k = 0; k < zb::kRatioSegmentCount; ++k) segs[k] = {dst[k], enc.segment_length(k)};
        // Host copy of the codebook, as the pipeline has it (the host API reads the header on the host).
        std::string cbh((size_t)enc.segment_length(0), '\0');
        CK(cudaMemcpy(&cbh[0], dst[0], cbh.size(), cudaMemcpyDeviceToHost));
        const zb::ByteSpan hcb{reinterpret_cast<const uint8_t *>(cbh.data()), cbh.size()};
        for (int r = 0; r < repeat + 1; ++r) {
            KernelTimer kt(c, st);
            CK(cudaEventRecord(e0, st));
            ratio_decode(c, dwork, segs, &hcb, n, 1024, d_out, st, &kt);
            CK(cudaEventRecord(e1, st));
            CK(cudaEventSynchronize(e1));
            float ms = 0;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            const double ks = kt.seconds();
            if (r) {
                dec_wall.push_back(ms * 1e-3);
                dec_kernel.push_back(ks);
            }
        }
        // Parity with the CPU encoder (all threads) and the decoded symbols.
        std::vector<std::string> cpu;
        std::string msg;
        zb::RatioStats cs;
        zb::RatioOptions copt;
        copt.sub_block_log2 = lg;
        if (zb::ratio_encode_cpu(s.sym.data(), n, 1024, 0, cpu, &cs, msg, copt) != ZB_OK) {
            std::printf("CPU encode failed: %s\n", msg.c_str());
            ok = false;
        }
        for (int k = 0; k < zb::kRatioSegmentCount && ok; ++k) {
            std::string g((size_t)enc.segment_length(k), '\0');
            if (!g.empty()) CK(cudaMemcpy(&g[0], dst[k], g.size(), cudaMemcpyDeviceToHost));
            if (g != cpu[(size_t)k]) {
                std::printf("  PARITY FAILURE: segment %d differs (%zu vs %zu bytes)\n", k, g.size(), cpu[(size_t)k].size());
                ok = false;
            }
        }
        std::vector<uint16_t> back(n);
        CK(cudaMemcpy(back.data(), d_out, 2 * n, cudaMemcpyDeviceToHost));
        if (back != s.sym) {
            std::printf("  GPU DECODE MISMATCH\n");
            ok = false;
        }
    } catch (const Failure &f) {
        std::printf("  GPU failure: %s\n", f.msg.c_str());
        ok = false;
    }
    const double nn = (double)n;
    if (!enc_wall.empty() && !dec_wall.empty()) {
        std::printf("  GPU  %-28s S=%-4d encode %.2f ms (kernels %.2f ms): %.0f GB/s f32 (kernels %.0f); decode %.2f ms "
                    "(kernels %.2f ms): %.0f GB/s f32 (kernels %.0f); %.1f / %.1f Gsym/s; parity %s\n",
                    s.name.c_str(), 1 << lg, median(enc_wall) * 1e3, median(enc_kernel) * 1e3, 4 * nn / median(enc_wall) / 1e9,
                    4 * nn / median(enc_kernel) / 1e9, median(dec_wall) * 1e3, median(dec_kernel) * 1e3,
                    4 * nn / median(dec_wall) / 1e9, 4 * nn / median(dec_kernel) / 1e9, nn / median(enc_wall) / 1e9,
                    nn / median(dec_wall) / 1e9, ok ? "ok" : "FAILED");
        print_sizes("GPU", s, enc.stats());
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaFree(d_sym);
    cudaFree(d_out);
    return ok;
}
#endif

}  // namespace

int main(int argc, char **argv) {
    uint64_t n = 256ull << 20, cpu_n = 32ull << 20;
    int repeat = 5, cpu_threads = 1;
    bool gpu = true, cpu = true, sweep = false;
    std::string dir = ZBOUND_SHARED_DATA;
    if (const char *e = std::getenv("ZBOUND_RATIO_DATA")) dir = e;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> const char * { return i + 1 < argc ? argv[++i] : ""; };
        if (a == "--n") n = std::strtoull(next(), nullptr, 10);
        else if (a == "--cpu-n") cpu_n = std::strtoull(next(), nullptr, 10);
        else if (a == "--repeat") repeat = std::atoi(next());
        else if (a == "--cpu-threads") cpu_threads = std::atoi(next());
        else if (a == "--no-gpu") gpu = false;
        else if (a == "--no-cpu") cpu = false;
        else if (a == "--sweep-sub-block") sweep = true;
        else if (a == "--data") dir = next();
        else {
            std::printf("unknown argument %s\n", a.c_str());
            return 2;
        }
    }
    std::vector<Stream> streams;
    {
        std::vector<float> x;
        size_t dims[3];
        if (ratiot::read_plot3d(dir + "/nasa_cfd_postq.bin", x, dims)) {
            for (double rel : {1e-3, 1e-4}) {
                char name[64];
                std::snprintf(name, sizeof name, "cfd_postq lorenzo rel %g", rel);
                streams.push_back({name, ratiot::lorenzo_symbols(x, dims, rel)});
            }
        } else {
            std::printf("(no nasa_cfd_postq.bin in %s: synthetic streams only)\n", dir.c_str());
        }
    }
    streams.push_back({"geometric scale 0.3", synthetic(1 << 20, 0.3, 1)});
    streams.push_back({"geometric scale 30", synthetic(1 << 20, 30, 2)});
    int failures = 0;
    for (const Stream &base : streams) {
        if (cpu) {
            Stream s{base.name, tiled(base.sym, cpu_n)};
            if (base.name.rfind("geometric", 0) == 0) s.sym = synthetic(cpu_n, base.name.find("30") != std::string::npos ? 30 : 0.3, 9);
            bench_cpu(s, cpu_threads, repeat);
        }
#ifdef ZBOUND_TEST_CUDA
        if (gpu) {
            if (!zb::gpu::try_context(nullptr)) {
                std::printf("no GPU: skipping the GPU benchmark\n");
                gpu = false;
                continue;
            }
            Stream s{base.name, tiled(base.sym, n)};
            if (base.name.rfind("geometric", 0) == 0) s.sym = synthetic(n, base.name.find("30") != std::string::npos ? 30 : 0.3, 9);
            if (!bench_gpu(s, repeat)) ++failures;
            if (sweep && &base == &streams.front())
                for (int lg = zb::kRatioMinSubBlockLog2; lg < zb::kRatioSubBlockLog2; ++lg)
                    if (!bench_gpu(s, repeat, lg)) ++failures;
        }
#else
        (void)gpu;
        (void)n;
        (void)sweep;
#endif
    }
    return failures ? 1 : 0;
}
