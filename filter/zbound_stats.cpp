// ZBOUND_STATS: counters of the filter function and their summary at exit (zbound_stats.h).
#include "zbound_stats.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace zbound_h5 {
namespace {

// One row of the summary. Seconds are kept in nanoseconds so that every counter is an integer atomic.
struct Row {
    std::atomic<unsigned long long> chunks{0}, raw{0}, stored{0}, nanos{0};
    // The first chunk's share, reported apart: it carries one-time costs (the GPU's start-up: 0.2-0.4 s on the H200
    // machine, OpenMP's team) that would hide the steady rate of a short run.
    std::atomic<unsigned long long> first_raw{0}, first_nanos{0};
};

struct Totals {
    Row rows[2][2];   // [direction][0 = CPU, 1 = GPU]
    std::atomic<unsigned long long> failures[2] = {{0}, {0}};
    std::atomic<bool> printed{false};

    // Printed once, when the process exits or the plugin is unloaded (whichever destroys this object first).
    ~Totals() {
        if (!stats_enabled() || printed.exchange(true)) return;
        const std::string s = stats_summary();
        if (!s.empty()) std::fputs(s.c_str(), stderr);
    }
};

Totals &totals() {
    static Totals t;
    return t;
}

}  // namespace

bool stats_enabled() {
    static const bool on = [] {
        const char *e = std::getenv("ZBOUND_STATS");
        return e && *e && std::strcmp(e, "0") != 0;
    }();
    return on;
}

void stats_record(Direction dir, zb_backend backend, size_t raw, size_t stored, double seconds) {
    Row &r = totals().rows[(int)dir][backend == ZB_BACKEND_GPU ? 1 : 0];
    const unsigned long long nanos = (unsigned long long)(seconds * 1e9 + 0.5);
    if (r.chunks.fetch_add(1, std::memory_order_relaxed) == 0) {
        r.first_raw.store(raw, std::memory_order_relaxed);
        r.first_nanos.store(nanos, std::memory_order_relaxed);
    }
    r.raw.fetch_add(raw, std::memory_order_relaxed);
    r.stored.fetch_add(stored, std::memory_order_relaxed);
    r.nanos.fetch_add(nanos, std::memory_order_relaxed);
}

void stats_record_failure(Direction dir) { totals().failures[(int)dir].fetch_add(1, std::memory_order_relaxed); }

std::string stats_summary() {
    Totals &t = totals();
    std::string out;
    char line[256];
    const char *dir_name[2] = {"compress", "decompress"}, *backend_name[2] = {"cpu", "gpu"};
    for (int d = 0; d < 2; ++d) {
        for (int b = 0; b < 2; ++b) {
            const Row &r = t.rows[d][b];
            const unsigned long long chunks = r.chunks.load();
            if (!chunks) continue;
            const double raw = (double)r.raw.load(), stored = (double)r.stored.load(), sec = r.nanos.load() * 1e-9;
            std::snprintf(line, sizeof line,
                          "zbound stats: %-10s %s  %llu chunks  %.1f MB raw  %.1f MB stored  ratio %.2f  "
                          "%.3f s in the filter  %.2f GB/s",
                          dir_name[d], backend_name[b], chunks, raw / 1e6, stored / 1e6, stored > 0 ? raw / stored : 0.0,
                          sec, sec > 0 ? raw / sec / 1e9 : 0.0);
            out += line;
            if (chunks > 1) {   // the rate without the first chunk
                const double first_sec = r.first_nanos.load() * 1e-9, later_sec = sec - first_sec;
                const double later_raw = raw - (double)r.first_raw.load();
                std::snprintf(line, sizeof line, "  (first chunk %.3f ms; %.2f GB/s after it)", first_sec * 1e3,
                              later_sec > 0 ? later_raw / later_sec / 1e9 : 0.0);
                out += line;
            }
            out += '\n';
        }
        if (const unsigned long long f = t.failures[d].load()) {
            std::snprintf(line, sizeof line, "zbound stats: %-10s %llu chunks failed\n", dir_name[d], f);
            out += line;
        }
    }
    return out;
}

}  // namespace zbound_h5
