// zbound bench: compress and decompress a raw file repeatedly, verify the bound on every value, and report ratio,
// quality and throughput (median of the timed runs) as a table or as one JSON object per bound.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>
#include "bench_device.h"
#include "cli_args.h"
#include "codec_opts.h"
#include "commands.h"
#include "json_line.h"
#include "metrics.h"
#include "raw_io.h"

namespace zbtool {

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

double gbps(size_t bytes, double seconds) { return seconds > 0 ? (double)bytes / seconds / 1e9 : 0.0; }

std::vector<OptionSpec> bench_specs() {
    std::vector<OptionSpec> s = {
        {nullptr, "--repeat", "N", "timed runs of each of compress and decompress (default 5; median reported)"},
        {nullptr, "--warmup", "N", "untimed runs before them (default 1)"},
        {nullptr, "--size-mb", "N", "tile the input along its slowest dim until it holds at least N MB (1e6 B)"},
        {nullptr, "--sizes", "MB[,MB..]",
         "sweep array sizes (the input cropped or tiled along its slowest dim to each size in MB): host-resident "
         "runs through zb_compress/zb_decompress and, where there is a GPU and the backend is not cpu, "
         "device-resident runs through zb_compress_device/zb_decompress_device with buffers allocated before the "
         "timed loop (wall time of calls without statistics; kernel time from a second, untimed call with them), "
         "and batched ones (residency batchN: N device copies of the array per "
         "zb_compress_device_batch call, about 1 GB in all; GB/s of all N)"},
        {nullptr, "--thread-sweep", "T[,T..]",
         "compress and decompress with each CPU thread count in turn, call by call (a round is one call of each), "
         "so that a machine whose speed drifts weighs on every count alike; reports each count's median and its "
         "gain over the first count (the median of the rounds' ratios, with their quartiles); every count must "
         "write the first count's bytes"},
        {nullptr, "--json", nullptr, "one JSON object per bound (per size and residency with --sizes, per thread count with --thread-sweep) on stdout instead of the table"},
        {nullptr, "--label", "NAME", "name of the field in the output (default: the file name)"}};
    for (auto v : {raw_input_specs(), bound_option_specs(true), pipeline_option_specs(), run_option_specs()})
        s.insert(s.end(), v.begin(), v.end());
    return s;
}

// Repeats the array k times along its slowest dim.
void tile_to(RawArray &a, double size_mb) {
    const double want = size_mb * 1e6;
    const size_t k = (size_t)std::ceil(want / (double)a.bytes.size());
    if (k <= 1) return;
    std::vector<uint8_t> big(a.bytes.size() * k);
    for (size_t i = 0; i < k; ++i) std::memcpy(big.data() + i * a.bytes.size(), a.bytes.data(), a.bytes.size());
    a.bytes.swap(big);
    a.dims[0] *= k;
}

// The array cropped or tiled along its slowest dim to k slabs, k the fewest that hold `size_mb` MB (at least 1).
RawArray resized(const RawArray &a, double size_mb) {
    const size_t slab = a.bytes.size() / a.dims[0];
    const size_t k = std::max<size_t>(1, (size_t)std::ceil(size_mb * 1e6 / (double)slab));
    RawArray r = a;
    r.bytes.resize(k * slab);
    for (size_t i = a.dims[0]; i < k; i += a.dims[0])   // tiles: copies of the whole array, the last one cut
        std::memcpy(r.bytes.data() + i * slab, a.bytes.data(), std::min(a.dims[0], k - i) * slab);
    r.dims[0] = k;
    return r;
}

struct Timings {
    std::vector<double> wall, kernel;
    zb_backend backend = ZB_BACKEND_CPU;
};

struct BenchResult {
    zb_params params;
    zb_stream_info info{};
    size_t bytes_out = 0;
    std::vector<uint8_t> stream;   // the first compression's stream
    Timings comp, decomp;
    ErrorStats err;
    bool deterministic = true;
};

// Runs call(stats) once and, when `record`, keeps its wall time, kernel time and backend.
template <typename Call>
void timed(Timings &t, bool record, Call &&call) {
    zb_run_stats st{};
    const auto t0 = Clock::now();
    call(st);
    const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!record) return;
    t.wall.push_back(wall);
    t.kernel.push_back(st.kernel_seconds);
    t.backend = st.backend_used;
}

BenchResult run_one(const RawArray &a, const zb_params &p, zb_backend dbackend, int warmup, int repeat) {
    BenchResult r;
    r.params = p;
    const size_t n = a.count();
    std::vector<uint8_t> stream(zb_compress_bound(a.dtype, n)), first, recon(a.bytes.size());
    for (int i = 0; i < warmup + repeat; ++i) {
        size_t len = 0;
        timed(r.comp, i >= warmup, [&](zb_run_stats &st) {
            check_status(zb_compress(&p, a.dtype, a.bytes.data(), (int)a.dims.size(), a.dims.data(), stream.data(),
                                     stream.size(), &len, &st),
                         "compress");
        });
        if (i == 0) {
            first.assign(stream.begin(), stream.begin() + (ptrdiff_t)len);
        } else if (len != first.size() || std::memcmp(stream.data(), first.data(), len) != 0) {
            r.deterministic = false;
        }
    }
    r.bytes_out = first.size();
    r.stream = first;
    check_status(zb_stream_info_get(first.data(), first.size(), &r.info), "reading the stream header");
    for (int i = 0; i < warmup + repeat; ++i) {
        timed(r.decomp, i >= warmup, [&](zb_run_stats &st) {
            check_status(zb_decompress_threads(first.data(), first.size(), recon.data(), recon.size(), dbackend,
                                               p.threads, &st),
                         "decompress");
        });
    }
    const double pw_rel = p.mode == ZB_MODE_PW_REL ? p.bound : 0.0;  // the stream's abs_bound is then on log2 |x|
    r.err = compare_arrays(a.dtype, a.bytes.data(), recon.data(), n, r.info.abs_bound, p.has_fill != 0, p.fill_bits,
                           pw_rel);
    return r;
}

// --thread-sweep: one thread count's timings (round r of every count at index r) and its decoded values' check.
struct SweepPoint {
    int threads;
    Timings comp, decomp;
    ErrorStats err;
};

// The median and quartiles of num[r] / den[r] over the rounds r.
struct Gain {
    double median, q1, q3;
};
Gain gain_of(const std::vector<double> &num, const std::vector<double> &den) {
    std::vector<double> g;
    for (size_t r = 0; r < num.size() && r < den.size(); ++r) g.push_back(den[r] > 0 ? num[r] / den[r] : 0.0);
    std::sort(g.begin(), g.end());
    if (g.empty()) return {0, 0, 0};
    return {median(g), g[g.size() / 4], g[(3 * g.size()) / 4]};
}

// Compression and decompression with each of `threads` in turn, call by call; the gains are over threads[0]. Every
// count's stream must equal the first call's (nondeterministic otherwise) and decode within the bound (each count's
// values are checked once, after its first call).
void run_thread_sweep(const std::string &label, const RawArray &a, zb_params p, zb_backend dbackend,
                      const std::vector<int> &threads, int warmup, int repeat, bool json, uint64_t &bad,
                      bool &nondeterministic) {
    const size_t n = a.count(), in = a.bytes.size();
    std::vector<uint8_t> stream(zb_compress_bound(a.dtype, n)), first, recon(in);
    std::vector<SweepPoint> points;
    for (int t : threads) points.push_back(SweepPoint{t, {}, {}, {}});
    zb_stream_info info{};
    const double pw_rel = p.mode == ZB_MODE_PW_REL ? p.bound : 0.0;
    for (int i = 0; i < warmup + repeat; ++i) {
        for (SweepPoint &pt : points) {
            p.threads = pt.threads;
            size_t len = 0;
            timed(pt.comp, i >= warmup, [&](zb_run_stats &st) {
                check_status(zb_compress(&p, a.dtype, a.bytes.data(), (int)a.dims.size(), a.dims.data(),
                                         stream.data(), stream.size(), &len, &st),
                             "compress");
            });
            if (first.empty()) {
                first.assign(stream.begin(), stream.begin() + (ptrdiff_t)len);
                check_status(zb_stream_info_get(first.data(), first.size(), &info), "reading the stream header");
            } else if (len != first.size() || std::memcmp(stream.data(), first.data(), len) != 0) {
                nondeterministic = true;
            }
            timed(pt.decomp, i >= warmup, [&](zb_run_stats &st) {
                check_status(zb_decompress_threads(stream.data(), len, recon.data(), recon.size(), dbackend,
                                                   pt.threads, &st),
                             "decompress");
            });
            if (i == 0)
                pt.err = compare_arrays(a.dtype, a.bytes.data(), recon.data(), n, info.abs_bound, p.has_fill != 0,
                                        p.fill_bits, pw_rel);
        }
    }
    const std::string pipe =
        info.raw ? "raw" : std::string(predictor_name(info.predictor)) + "/" + encoder_name(info.encoder);
    if (!json) {
        std::printf("%s: %s %s (%zu bytes), %s %g, %s, CR %.3f; thread counts in turn, call by call: %d rounds "
                    "after %d warm-up\n",
                    label.c_str(), dtype_name(a.dtype), dims_to_string(a.dims).c_str(), in, mode_name(p.mode), p.bound,
                    pipe.c_str(), (double)in / (double)first.size(), repeat, warmup);
        std::printf("%8s %10s %10s %22s %22s %10s %10s\n", "threads", "comp MB/s", "dec MB/s", "comp gain (q1-q3)",
                    "dec gain (q1-q3)", "maxerr/eb", "violations");
    }
    for (const SweepPoint &pt : points) {
        const Gain gc = gain_of(points[0].comp.wall, pt.comp.wall), gd = gain_of(points[0].decomp.wall, pt.decomp.wall);
        const double cw = median(pt.comp.wall), dw = median(pt.decomp.wall);
        const uint64_t wrong = pt.err.violations + pt.err.special_mismatches;
        bad += wrong;
        if (json) {
            JsonLine j;
            j.add("field", label).add("dtype", dtype_name(a.dtype)).add("dims", dims_to_string(a.dims))
                .add("mode", mode_name(p.mode)).add("bound", p.bound).add("abs_bound", info.abs_bound)
                .add("pipeline", pipe).add("threads", pt.threads).add("warmup", warmup).add("repeat", repeat)
                .add("ratio", (double)in / (double)first.size()).add("compress_gbps", gbps(in, cw))
                .add("decompress_gbps", gbps(in, dw)).add("compress_gain", gc.median).add("compress_gain_q1", gc.q1)
                .add("compress_gain_q3", gc.q3).add("decompress_gain", gd.median).add("decompress_gain_q1", gd.q1)
                .add("decompress_gain_q3", gd.q3).add("max_err_over_eb", pt.err.max_err_over_bound)
                .add("violations", wrong).add("bound_ok", pt.err.ok()).add("deterministic", !nondeterministic);
            std::printf("%s\n", j.str().c_str());
        } else {
            char cg[48], dg[48];
            std::snprintf(cg, sizeof cg, "%.2f (%.2f-%.2f)", gc.median, gc.q1, gc.q3);
            std::snprintf(dg, sizeof dg, "%.2f (%.2f-%.2f)", gd.median, gd.q1, gd.q3);
            std::printf("%8d %10.1f %10.1f %22s %22s %10.4f %10llu\n", pt.threads, gbps(in, cw) * 1e3,
                        gbps(in, dw) * 1e3, cg, dg, pt.err.max_err_over_bound, (unsigned long long)wrong);
        }
    }
    std::fflush(stdout);
}

// The ratio encoder's decode-metadata overhead f = metadata bytes / payload bytes (0 for other encoders).
double overhead_f(const zb_stream_info &i) {
    return i.ratio_payload_bytes ? (double)i.ratio_metadata_bytes / (double)i.ratio_payload_bytes : 0.0;
}

// The largest error as a fraction of its value's bound (abs_bound, or pw_rel * |x|).
double err_over_eb(const BenchResult &r) { return r.err.max_err_over_bound; }

void print_json(const std::string &label, const RawArray &a, const BenchResult &r, int warmup, int repeat) {
    const size_t in = a.bytes.size();
    const double cw = median(r.comp.wall), dw = median(r.decomp.wall);
    const double ck = median(r.comp.kernel), dk = median(r.decomp.kernel);
    JsonLine j;
    j.add("field", label).add("dtype", dtype_name(a.dtype)).add("dims", dims_to_string(a.dims)).add("n", (uint64_t)a.count())
        .add("mode", mode_name(r.params.mode)).add("bound", r.params.bound).add("abs_bound", r.info.abs_bound)
        .add("predictor", r.info.raw ? "none" : predictor_name(r.info.predictor))
        .add("encoder", r.info.raw ? "none" : encoder_name(r.info.encoder)).add("raw", r.info.raw != 0)
        .add("backend", backend_name(r.comp.backend)).add("decompress_backend", backend_name(r.decomp.backend))
        .add("threads", effective_threads(r.params.threads)).add("warmup", warmup).add("repeat", repeat)
        .add("bytes_in", (uint64_t)in).add("bytes_out", (uint64_t)r.bytes_out)
        .add("ratio", (double)in / (double)r.bytes_out).add("bitrate", 8.0 * (double)r.bytes_out / (double)a.count())
        .add("psnr", r.err.psnr()).add("nrmse", r.err.nrmse()).add("max_abs_error", r.err.max_abs_error)
        .add("max_err_over_eb", err_over_eb(r)).add("checked_values", (uint64_t)r.err.checked)
        .add("special_values", (uint64_t)r.err.specials).add("violations", (uint64_t)r.err.violations)
        .add("special_mismatches", (uint64_t)r.err.special_mismatches).add("bound_ok", r.err.ok())
        .add("deterministic", r.deterministic).add("escapes", (uint64_t)r.info.escapes)
        .add("exceptions", (uint64_t)r.info.exceptions)
        .add("ratio_metadata_bytes", (uint64_t)r.info.ratio_metadata_bytes)
        .add("ratio_payload_bytes", (uint64_t)r.info.ratio_payload_bytes).add("overhead_f", overhead_f(r.info))
        .add("compress_seconds", cw).add("decompress_seconds", dw)
        .add("compress_gbps", gbps(in, cw)).add("decompress_gbps", gbps(in, dw))
        .add("compress_kernel_gbps", gbps(in, ck)).add("decompress_kernel_gbps", gbps(in, dk));
    std::printf("%s\n", j.str().c_str());
    std::fflush(stdout);
}

void print_table_header(const std::string &label, const RawArray &a, const zb_params &p, int warmup, int repeat) {
    std::printf("%s: %s %s (%zu bytes), threads %d, median of %d runs after %d warm-up\n", label.c_str(),
                dtype_name(a.dtype), dims_to_string(a.dims).c_str(), a.bytes.size(), effective_threads(p.threads),
                repeat, warmup);
    std::printf("%-10s %-12s %-14s %-8s %8s %8s %8s %10s %9s %10s %8s %9s %9s %9s %9s %7s\n", "bound", "abs_eb",
                "pipeline", "backend", "CR", "bits/val", "PSNR", "NRMSE", "maxerr/eb", "violations", "specials",
                "comp MB/s", "dec MB/s", "kcomp MB/s", "kdec MB/s", "f %");
}

void print_table_row(const RawArray &a, const BenchResult &r) {
    const size_t in = a.bytes.size();
    std::string bound = std::string(mode_name(r.params.mode)) + " ";
    char b[64];
    std::snprintf(b, sizeof b, "%g", r.params.bound);
    bound += b;
    std::string pipe = r.info.raw ? "raw" : std::string(predictor_name(r.info.predictor)) + "/" + encoder_name(r.info.encoder);
    char f[16] = "-";   // the ratio encoder's metadata overhead, in percent of its payload
    if (r.info.ratio_payload_bytes) std::snprintf(f, sizeof f, "%.3f", 100.0 * overhead_f(r.info));
    std::printf("%-10s %-12.6g %-14s %-8s %8.3f %8.3f %8.2f %10.3e %9.4f %10llu %8llu %9.1f %9.1f %9.1f %9.1f %7s\n",
                bound.c_str(), r.info.abs_bound, pipe.c_str(), backend_name(r.comp.backend),
                (double)in / (double)r.bytes_out, 8.0 * (double)r.bytes_out / (double)a.count(), r.err.psnr(),
                r.err.nrmse(), err_over_eb(r), (unsigned long long)(r.err.violations + r.err.special_mismatches),
                (unsigned long long)r.err.specials, gbps(in, median(r.comp.wall)) * 1e3,
                gbps(in, median(r.decomp.wall)) * 1e3, gbps(in, median(r.comp.kernel)) * 1e3,
                gbps(in, median(r.decomp.kernel)) * 1e3, f);
    std::fflush(stdout);
}

// --sizes: per size, the host-resident run (run_one) and the device-resident one, with the device's stream
// compared byte for byte with the host run's and its decoded array checked value by value like the host's.
void run_sizes(const std::string &label, const RawArray &raw, const zb_params &p, zb_backend dbackend,
               const std::vector<double> &sizes, int warmup, int repeat, bool json, uint64_t &bad, bool &failed) {
    if (!json)
        std::printf("%s: %s, %s %g, threads %d, median of %d runs after %d warm-up\n%9s %-8s %-8s %8s %10s %10s "
                    "%10s %10s  %s\n",
                    label.c_str(), dtype_name(raw.dtype), mode_name(p.mode), p.bound, effective_threads(p.threads),
                    repeat, warmup, "size MB", "resident", "backend", "CR", "comp GB/s", "dec GB/s", "kcomp GB/s",
                    "kdec GB/s", "check");
    bool said_why = false;
    for (double mb : sizes) {
        const RawArray a = resized(raw, mb);
        const size_t in = a.bytes.size();
        const BenchResult h = run_one(a, p, dbackend, warmup, repeat);
        bad += h.err.violations + h.err.special_mismatches;
        failed |= !h.deterministic;
        DeviceRun d;
        if (p.backend == ZB_BACKEND_CPU) d.why_not = "--backend cpu";
        else d = run_device_resident(p, a.dtype, a.bytes, a.dims, warmup, repeat);
        ErrorStats derr;
        bool same_bytes = false;
        if (d.ran) {
            derr = compare_arrays(a.dtype, a.bytes.data(), d.decoded.data(), a.count(), h.info.abs_bound,
                                  p.has_fill != 0, p.fill_bits, p.mode == ZB_MODE_PW_REL ? p.bound : 0.0);
            same_bytes = d.stream == h.stream;
            bad += derr.violations + derr.special_mismatches;
            failed |= !same_bytes;
        }
        auto row = [&](const char *where, zb_backend backend, size_t out, double cw, double dw, double ck, double dk,
                       bool ok, const char *check) {
            if (json) {
                JsonLine j;
                j.add("field", label).add("dtype", dtype_name(a.dtype)).add("dims", dims_to_string(a.dims))
                    .add("size_mb", (double)in / 1e6).add("residency", where).add("backend", backend_name(backend))
                    .add("mode", mode_name(p.mode)).add("bound", p.bound).add("bytes_in", (uint64_t)in)
                    .add("bytes_out", (uint64_t)out).add("ratio", (double)in / (double)out).add("bound_ok", ok)
                    .add("check", check).add("warmup", warmup).add("repeat", repeat)
                    .add("compress_gbps", gbps(in, cw)).add("decompress_gbps", gbps(in, dw))
                    .add("compress_kernel_gbps", gbps(in, ck)).add("decompress_kernel_gbps", gbps(in, dk));
                std::printf("%s\n", j.str().c_str());
            } else {
                std::printf("%9.1f %-8s %-8s %8.3f %10.2f %10.2f %10.2f %10.2f  %s\n", (double)in / 1e6, where,
                            backend_name(backend), (double)in / (double)out, gbps(in, cw), gbps(in, dw), gbps(in, ck),
                            gbps(in, dk), check);
            }
        };
        row("host", h.comp.backend, h.bytes_out, median(h.comp.wall), median(h.decomp.wall), median(h.comp.kernel),
            median(h.decomp.kernel), h.err.ok(), h.err.ok() ? "bound held" : "BOUND VIOLATED");
        if (d.ran) {
            const char *check = !derr.ok() ? "BOUND VIOLATED" : same_bytes ? "bound held, same bytes as host"
                                                                          : "STREAM DIFFERS FROM THE HOST RUN";
            row("device", ZB_BACKEND_GPU, d.stream.size(), median(d.comp_wall), median(d.decomp_wall),
                median(d.comp_kernel), median(d.decomp_kernel), derr.ok() && same_bytes, check);
            // The same size as the chunks of one batched call (many chunks per call, several on the GPU at once).
            const DeviceRun bd = run_device_batch(p, a.dtype, a.bytes, a.dims, warmup, repeat, 0);
            if (bd.ran) {
                const ErrorStats berr = compare_arrays(a.dtype, a.bytes.data(), bd.decoded.data(), a.count(),
                                                       h.info.abs_bound, p.has_fill != 0, p.fill_bits,
                                                       p.mode == ZB_MODE_PW_REL ? p.bound : 0.0);
                const bool same = bd.stream == h.stream && bd.batch_same_bytes;
                bad += berr.violations + berr.special_mismatches;
                failed |= !same;
                const std::string where = "batch" + std::to_string(bd.batch);
                const char *check = !berr.ok() ? "BOUND VIOLATED" : same ? "bound held, same bytes as host"
                                                                          : "STREAM DIFFERS FROM THE HOST RUN";
                row(where.c_str(), ZB_BACKEND_GPU, bd.stream.size(), median(bd.comp_wall) / (double)bd.batch,
                    median(bd.decomp_wall) / (double)bd.batch, median(bd.comp_kernel) / (double)bd.batch,
                    median(bd.decomp_kernel) / (double)bd.batch, berr.ok() && same, check);
            } else {
                std::fprintf(stderr, "zbound bench: no batched device runs at %.1f MB: %s\n", (double)in / 1e6,
                             bd.why_not.c_str());
            }
        } else if (!said_why) {
            std::fprintf(stderr, "zbound bench: no device-resident runs: %s\n", d.why_not.c_str());
            said_why = true;
        }
        std::fflush(stdout);
    }
}

// Calls run(params, bad, nondeterministic) for each bound of the command line and turns what the runs found into the
// exit code (`what_differs`: the calls whose bytes had to agree).
template <typename Run>
int run_per_bound(const BoundChoice &bound, const zb_params &base, const char *what_differs, Run &&run) {
    uint64_t bad = 0;
    bool nondeterministic = false;
    for (double b : bound.bounds) {
        zb_params p = base;
        p.bound = b;
        run(p, bad, nondeterministic);
    }
    if (bad) std::fprintf(stderr, "zbound bench: BOUND VIOLATED: %llu values\n", (unsigned long long)bad);
    if (nondeterministic) std::fprintf(stderr, "zbound bench: error: %s gave different bytes\n", what_differs);
    return bad ? kExitBoundViolation : nondeterministic ? kExitFailure : kExitOk;
}

}  // namespace

int cmd_bench(const Args &argv) {
    const auto specs = bench_specs();
    ParsedArgs a = parse_args(argv, specs);
    if (a.help) {
        std::fputs(format_help("zbound bench FILE -t f32|f64 [-d DIMS] (--abs X[,X..] | --rel X[,X..] | --pw-rel X[,X..]) "
                               "[--repeat N] "
                               "[--warmup N] [--size-mb N | --sizes MB,..] [--json] [options]",
                               "Compresses and decompresses FILE repeatedly and reports the median times, the "
                               "ratio and the error.\nEvery value is checked: finite values against the bound "
                               "(maxerr/eb: the largest error over its bound), NaN/Inf/-0.0/fill bit for bit.\nExits with 3 if any value breaks the bound.\n"
                               "Throughput is uncompressed bytes / seconds (1 GB = 1e9 B); end to end is wall time "
                               "of the API call, kernel is zb_run_stats.kernel_seconds.",
                               specs).c_str(), stdout);
        return kExitOk;
    }
    if (a.positional.size() != 1) throw CliError(a.positional.empty() ? "missing input file" : "expected one input file");
    const std::string path = a.positional[0];
    const RawInput input = raw_input_from_args(a);
    const zb_dtype dtype = input.dtype;
    const BoundChoice bound = bound_from_args(a, true);
    const int repeat = (int)parse_int(a.get("--repeat", "5"), "--repeat", 1, 1000000);
    const int warmup = (int)parse_int(a.get("--warmup", "1"), "--warmup", 0, 1000000);
    zb_params base = zb_params_default();
    base.mode = bound.mode;
    pipeline_from_args(a, base);
    run_from_args(a, dtype, base);
    const zb_backend dbackend = base.backend;
    const bool json = a.has("--json");
    std::string label = a.get("--label", path.substr(path.find_last_of('/') + 1));

    RawArray raw = read_raw(path, dtype, input.dims, input.layout);
    if (a.has("--size-mb") && a.has("--sizes")) throw CliError("--size-mb and --sizes exclude each other");
    if (a.has("--thread-sweep") && a.has("--sizes")) throw CliError("--thread-sweep and --sizes exclude each other");
    if (a.has("--thread-sweep") && a.has("--threads")) throw CliError("--thread-sweep gives the thread counts: drop --threads");
    if (a.has("--size-mb")) {
        const double mb = parse_double(a.get("--size-mb"), "--size-mb");
        if (mb <= 0) throw CliError("--size-mb must be > 0");
        tile_to(raw, mb);
    }

    if (a.has("--thread-sweep")) {
        std::vector<int> threads;
        for (long long t : parse_int_list(a.get("--thread-sweep"), "--thread-sweep", 1, 4096)) threads.push_back((int)t);
        return run_per_bound(bound, base, "thread counts or repeated calls",
                             [&](const zb_params &p, uint64_t &bad, bool &nondeterministic) {
                                 run_thread_sweep(label, raw, p, dbackend, threads, warmup, repeat, json, bad,
                                                  nondeterministic);
                             });
    }
    if (a.has("--sizes")) {
        const std::vector<double> sizes = parse_double_list(a.get("--sizes"), "--sizes");
        for (double mb : sizes)
            if (!(mb > 0)) throw CliError("--sizes: every size must be > 0 MB");
        return run_per_bound(bound, base, "repeated or device-resident compression",
                             [&](const zb_params &p, uint64_t &bad, bool &nondeterministic) {
                                 run_sizes(label, raw, p, dbackend, sizes, warmup, repeat, json, bad,
                                           nondeterministic);
                             });
    }
    uint64_t bad = 0;
    bool nondeterministic = false;
    for (size_t k = 0; k < bound.bounds.size(); ++k) {
        const double b = bound.bounds[k];
        zb_params p = base;
        p.bound = b;
        BenchResult r = run_one(raw, p, dbackend, warmup, repeat);
        if (json) {
            print_json(label, raw, r, warmup, repeat);
        } else {
            if (k == 0) print_table_header(label, raw, base, warmup, repeat);
            print_table_row(raw, r);
        }
        bad += r.err.violations + r.err.special_mismatches;
        if (!r.err.ok()) {
            std::fprintf(stderr,
                         "zbound bench: BOUND VIOLATED at %s %g: %llu values exceed their bound (abs bound %.9g, max "
                         "error %.9g at index %llu), %llu special values changed\n",
                         mode_name(p.mode), b, (unsigned long long)r.err.violations, r.info.abs_bound,
                         r.err.max_abs_error, (unsigned long long)r.err.max_error_index,
                         (unsigned long long)r.err.special_mismatches);
        }
        if (!r.deterministic) {
            nondeterministic = true;
            std::fprintf(stderr, "zbound bench: error: repeated compression of the same input gave different bytes\n");
        }
    }
    if (!json)
        std::printf("violations: %llu (every value checked: finite against the bound, specials bit for bit)\n",
                    (unsigned long long)bad);
    if (bad) return kExitBoundViolation;
    return nondeterministic ? kExitFailure : kExitOk;
}

}  // namespace zbtool
