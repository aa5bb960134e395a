// Soak: a seeded, time-bounded run over thousands of random chunks (shapes of rank 0-5 with unit and prime dims,
// f32/f64, abs/rel/lossless, bounds over 14 decades, smooth/noisy/constant/jumpy/random-bit data with NaN payloads,
// +-Inf, -0.0, subnormals and fill values). Each chunk is checked against
//   - the guarantee (finite non-fill values within the stream's bound, everything else bit for bit),
//   - the bound the mode defines (abs: the user's; rel: the user's times the finite non-fill range),
//   - an independent run: the stream written with 1 thread and with N threads is byte-identical, and so is the
//     array decoded with 1 and with N threads (and, with a GPU, the GPU's stream and decode),
//   - corruption: a copy with one byte changed or cut short never decodes (CRC-32C catches every burst <= 32 bits).
// ZBOUND_SOAK_SECONDS (default 10; CI 120) bounds the time, ZBOUND_SOAK_SEED (default: random) fixes the seed; both
// and the counts are printed, so that a failure can be replayed.
#include <gtest/gtest.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include "rel_util.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Counts {
    uint64_t chunks = 0, values = 0, bytes_in = 0, bytes_out = 0, f64 = 0, rel = 0, lossless = 0, raw = 0,
             with_escapes = 0, with_exceptions = 0, with_fill = 0, corrupt_checked = 0, gpu_checked = 0, v2 = 0,
             ratio = 0, gpu_unsupported = 0;
};

template <typename T> T from_bits(uint64_t u) {
    T v;
    if (sizeof(T) == 4) {
        const uint32_t w = (uint32_t)u;
        std::memcpy(&v, &w, 4);
    } else {
        std::memcpy(&v, &u, 8);
    }
    return v;
}

template <typename T> relt::Case random_case(std::mt19937_64 &rng) {
    auto uni = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
    auto pick = [&](uint64_t k) { return (uint64_t)(rng() % k); };
    relt::Case c;
    c.dtype = zbt::dtype_of<T>();
    // Shape: rank 0..5, dims from unit, small, prime and larger values; total capped at a random size class.
    static const size_t caps[] = {64, 2000, 20000, 150000};
    const size_t cap = caps[pick(4)];
    const int rank = (int)pick(6);
    size_t n = 1;
    static const size_t primes[] = {2, 3, 5, 7, 13, 31, 61, 127, 251, 509, 1021, 2039, 4093};
    for (int i = 0; i < rank; ++i) {
        size_t d;
        switch (pick(4)) {
            case 0: d = 1; break;
            case 1: d = 1 + pick(8); break;
            case 2: d = primes[pick(13)]; break;
            default: d = 1 + pick(600); break;
        }
        while (d > 1 && n * d > cap) d = d / 2;
        d = d ? d : 1;
        c.dims.push_back(d);
        n *= d;
    }
    std::vector<T> v(n);
    const double scale = std::pow(10.0, uni(-8, sizeof(T) == 8 ? 40 : 20));
    const int kind = (int)pick(11) / 2;   // 0-5; wide magnitudes (5) half as often
    std::normal_distribution<double> g(0, 1);
    double acc = 0;
    for (size_t i = 0; i < n; ++i) {
        double x;
        switch (kind) {
            case 0: x = scale * (std::sin(0.01 * (double)i) + 0.001 * g(rng)); break;       // smooth
            case 1: x = scale * g(rng); break;                                              // noise
            case 2: x = scale; break;                                                       // constant
            case 3: acc += (pick(50) == 0 ? 1e6 : 1.0) * g(rng); x = scale * acc; break;    // jumps: escapes
            case 4: v[i] = from_bits<T>(rng()); continue;                                   // any bit pattern
            default: x = scale * std::ldexp(g(rng), (int)pick(120) - 60); break;           // wide magnitudes
        }
        v[i] = (T)x;
    }
    // Specials at random places.
    if (n > 0 && pick(2)) {
        const size_t k = 1 + pick(1 + n / 20);
        for (size_t j = 0; j < k; ++j) {
            const size_t i = pick(n);
            switch (pick(6)) {
                case 0: v[i] = std::numeric_limits<T>::quiet_NaN(); break;
                case 1: v[i] = from_bits<T>((sizeof(T) == 8 ? 0x7ff0000000000000ull : 0x7f800000ull) | (1 + pick(1000))); break;
                case 2: v[i] = pick(2) ? std::numeric_limits<T>::infinity() : -std::numeric_limits<T>::infinity(); break;
                case 3: v[i] = (T)-0.0; break;
                case 4: v[i] = std::numeric_limits<T>::denorm_min() * (T)(1 + pick(100)); break;
                default: v[i] = std::numeric_limits<T>::max() * (pick(2) ? (T)1 : (T)-1); break;
            }
        }
    }
    c.data = relt::as_bytes(v);
    c.params.mode = pick(2) ? ZB_MODE_ABS : ZB_MODE_REL;
    static const zb_predictor preds[] = {ZB_PRED_AUTO, ZB_PRED_LORENZO, ZB_PRED_INTERP};
    static const zb_encoder encs[] = {ZB_ENC_AUTO, ZB_ENC_FAST, ZB_ENC_RATIO};
    c.params.predictor = preds[pick(3)];
    c.params.encoder = encs[pick(3)];
    if (pick(12) == 0) {
        c.params.bound = 0;
    } else if (c.params.mode == ZB_MODE_ABS) {
        c.params.bound = scale * std::pow(10.0, pick(8) ? uni(-6, 0.5) : uni(-12, -6));
    } else {
        c.params.bound = std::pow(10.0, uni(-7, -0.3));
    }
    if (n > 0 && pick(4) == 0) {
        c.params.has_fill = 1;
        c.params.fill_bits = zbt::bits(pick(2) ? v[pick(n)] : (T)-9999.9);
    }
    return c;
}

template <typename T> double expected_eb(const relt::Case &c) {
    if (c.params.mode == ZB_MODE_ABS) return c.params.bound;
    const size_t n = c.n();
    bool any = false;
    double lo = 0, hi = 0;
    for (size_t i = 0; i < n; ++i) {
        T x;
        std::memcpy(&x, &c.data[sizeof(T) * i], sizeof(T));
        if (!std::isfinite(x) || (c.params.has_fill && zbt::bits(x) == c.params.fill_bits)) continue;
        const double d = (double)x;
        if (!any) lo = hi = d, any = true;
        lo = d < lo ? d : lo;
        hi = d > hi ? d : hi;
    }
    const double eb = any ? c.params.bound * (hi - lo) : 0.0;
    return (eb > 0 && std::isfinite(eb)) ? eb : 0.0;
}

std::string describe(const relt::Case &c) {
    std::string s = c.dtype == ZB_F64 ? "f64 " : "f32 ";
    s += "dims [";
    for (size_t i = 0; i < c.dims.size(); ++i) s += (i ? "," : "") + std::to_string(c.dims[i]);
    char buf[200];
    std::snprintf(buf, sizeof buf, "] %s %.17g fill %d predictor %d", c.params.mode == ZB_MODE_ABS ? "abs" : "rel",
                  c.params.bound, c.params.has_fill, (int)c.params.predictor);
    return s + buf;
}

void set_threads_env(int t) { setenv("ZBOUND_THREADS", std::to_string(t).c_str(), 1); }

// One chunk through every check. Returns false (after reporting) on the first failed check.
bool check_chunk(const relt::Case &c, std::mt19937_64 &rng, Counts &k, bool gpu) {
    const std::string what = describe(c);
    set_threads_env(1);
    const relt::Result one = relt::run(c, ZB_BACKEND_CPU, 1, ZB_BACKEND_CPU);
    if (one.status != ZB_OK || one.dstatus != ZB_OK) {
        ADD_FAILURE() << what << ": " << zb_last_error();
        return false;
    }
    const int nt = 2 + (int)(rng() % 3);
    set_threads_env(nt);
    const relt::Result many = relt::run(c, ZB_BACKEND_CPU, nt, ZB_BACKEND_CPU);
    set_threads_env(1);
    if (many.stream != one.stream) {
        ADD_FAILURE() << what << ": the stream written with " << nt << " threads differs from the 1-thread one";
        return false;
    }
    if (many.decoded != one.decoded) {
        ADD_FAILURE() << what << ": decoding with " << nt << " threads differs from 1 thread";
        return false;
    }
    zb_stream_info info;
    if (zb_stream_info_get(one.stream.data(), one.stream.size(), &info) != ZB_OK) {
        ADD_FAILURE() << what << ": " << zb_last_error();
        return false;
    }
    const double want = c.dtype == ZB_F64 ? expected_eb<double>(c) : expected_eb<float>(c);
    if (!(info.abs_bound == want)) {
        ADD_FAILURE() << what << ": stream bound " << info.abs_bound << ", the mode defines " << want;
        return false;
    }
    if (const size_t bad = relt::violations(c, one.decoded, info.abs_bound)) {
        ADD_FAILURE() << what << ": " << bad << " values break the guarantee (eb " << info.abs_bound << ")";
        return false;
    }
    // GPU parity (every pipeline the GPU runs must give the CPU's bytes). A pipeline the GPU does not run (yet) is
    // refused with ZB_ERR_UNSUPPORTED when the GPU is required: then there is nothing to compare.
    if (gpu) {
        const relt::Result g = relt::run(c, ZB_BACKEND_GPU, 0, ZB_BACKEND_GPU);
        if (g.status == ZB_ERR_UNSUPPORTED) {
            ++k.gpu_unsupported;
        } else if (g.status != ZB_OK || g.stream != one.stream || g.dstatus != ZB_OK || g.decoded != one.decoded) {
            ADD_FAILURE() << what << ": the GPU's stream or decode differs from the CPU's (GPU status " << g.status
                          << ", decode status " << g.dstatus << ", stream " << g.stream.size() << " vs "
                          << one.stream.size() << " bytes): " << zb_last_error();
            return false;
        } else {
            ++k.gpu_checked;
        }
    }
    // A buffer one value too small is refused.
    if (c.n() > 0) {
        std::vector<uint8_t> small(one.decoded.size() - c.value_bytes() + 1);
        if (zb_decompress(one.stream.data(), one.stream.size(), small.data(), small.size() - 1, ZB_BACKEND_CPU,
                          nullptr) != ZB_ERR_BUFFER_TOO_SMALL) {
            ADD_FAILURE() << what << ": a too-small output buffer was not refused";
            return false;
        }
    }
    // Corruption: one changed byte, or a cut, never decodes.
    if (k.chunks % 4 == 0) {
        std::vector<uint8_t> bad = one.stream;
        const size_t at = (size_t)(rng() % bad.size());
        bad[at] ^= (uint8_t)(1 + rng() % 255);
        std::vector<uint8_t> out(one.decoded.size());
        const zb_status s = zb_decompress(bad.data(), bad.size(), out.data(), out.size(), ZB_BACKEND_CPU, nullptr);
        if (s == ZB_OK) {
            ADD_FAILURE() << what << ": a stream with byte " << at << " changed decoded without an error";
            return false;
        }
        const size_t cut = (size_t)(rng() % one.stream.size());
        if (zb_decompress(one.stream.data(), cut, out.data(), out.size(), ZB_BACKEND_CPU, nullptr) == ZB_OK) {
            ADD_FAILURE() << what << ": a stream cut to " << cut << " bytes decoded without an error";
            return false;
        }
        ++k.corrupt_checked;
    }
    ++k.chunks;
    k.values += c.n();
    k.bytes_in += c.data.size();
    k.bytes_out += one.stream.size();
    k.f64 += c.dtype == ZB_F64;
    k.rel += c.params.mode == ZB_MODE_REL;
    k.lossless += info.abs_bound == 0;
    k.raw += info.raw;
    // the v2 layout (version 3: interp codes in pass order, 4: run tokens); 6 is the fast layout of version 1
    k.v2 += info.format_version >= 2 && info.format_version <= 4;
    k.ratio += info.encoder == ZB_ENC_RATIO;
    k.with_escapes += info.escapes > 0;
    k.with_exceptions += info.exceptions > 0;
    k.with_fill += c.params.has_fill != 0;
    return true;
}

TEST(Soak, RandomChunks) {
    const char *se = std::getenv("ZBOUND_SOAK_SECONDS");
    const double seconds = se ? std::atof(se) : 10.0;
    const char *sd = std::getenv("ZBOUND_SOAK_SEED");
    const uint64_t seed = sd ? std::strtoull(sd, nullptr, 10) : std::random_device()();
    std::printf("soak: seed %llu, %.0f s (replay: ZBOUND_SOAK_SEED=%llu ZBOUND_SOAK_SECONDS=%.0f)\n",
                (unsigned long long)seed, seconds, (unsigned long long)seed, seconds);
    std::fflush(stdout);
    const char *old_threads = std::getenv("ZBOUND_THREADS");
    const std::string saved = old_threads ? old_threads : "";
    std::mt19937_64 rng(seed);
    const bool gpu = zb_gpu_available() != 0;
    Counts k;
    const auto end = Clock::now() + std::chrono::duration<double>(seconds);
    bool ok = true;
    while (ok && Clock::now() < end) {
        const relt::Case c = (rng() & 1) ? random_case<double>(rng) : random_case<float>(rng);
        ok = check_chunk(c, rng, k, gpu);
        if (!ok) std::printf("soak: failed at chunk %llu of seed %llu\n", (unsigned long long)k.chunks,
                             (unsigned long long)seed);
    }
    if (old_threads) setenv("ZBOUND_THREADS", saved.c_str(), 1);
    else unsetenv("ZBOUND_THREADS");
    std::printf("soak: seed %llu: %llu chunks, %llu values, %.1f MB in, %.1f MB out; f64 %llu, rel %llu, lossless "
                "%llu, raw %llu, with escapes %llu, with exceptions %llu, with fill %llu, corruption checks %llu, "
                "GPU parity %llu (GPU refused %llu)%s; format v2 %llu (ratio encoder %llu)\n",
                (unsigned long long)seed, (unsigned long long)k.chunks, (unsigned long long)k.values,
                k.bytes_in / 1e6, k.bytes_out / 1e6, (unsigned long long)k.f64, (unsigned long long)k.rel,
                (unsigned long long)k.lossless, (unsigned long long)k.raw, (unsigned long long)k.with_escapes,
                (unsigned long long)k.with_exceptions, (unsigned long long)k.with_fill,
                (unsigned long long)k.corrupt_checked, (unsigned long long)k.gpu_checked,
                (unsigned long long)k.gpu_unsupported,
                gpu ? "" : " (no GPU: GPU parity not checked)", (unsigned long long)k.v2,
                (unsigned long long)k.ratio);
    EXPECT_TRUE(ok);
    EXPECT_GE(k.chunks, seconds >= 5 ? 50u : 1u) << "the soak ran too few chunks to mean anything";
}

}  // namespace
