// predictor=auto / encoder=auto: compress a sample of the array with each candidate and keep the smallest.
#include <algorithm>
#include <cmath>
#include <exception>
#include <functional>
#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <vector>
#include "zb_cpu.h"
#include "zb_sample.h"

namespace zb {
namespace {

uint64_t sample_target(const Shape &s) {
    return std::min<uint64_t>(s.n, std::max<uint64_t>(8192, std::min<uint64_t>(s.n / 32, 1u << 20)));
}

// The relative cost of compressing with a pipeline, for sharing threads among the candidates (it changes no byte).
// One-thread times on three fields (TREFHT, geoid, postq) relative to lorenzo/fast: lorenzo/ratio 1.4-3.5,
// interp/fast 1.8-3.3, interp/ratio 2.9-5.5.
double pipeline_cost(uint8_t pred, uint8_t enc) {
    return (pred == kPredInterp ? 2.5 : 1.0) * (enc == kEncRatio ? 2.0 : 1.0);
}

// nt >= count threads shared among the candidates: one each, then one at a time to the candidate that would take
// longest (cost / threads), which keeps the slowest as fast as whole threads allow.
template <class Candidates> std::vector<int> apportion_threads(const Candidates &cands, int nt) {
    std::vector<int> t(cands.size(), 1);
    for (int given = (int)cands.size(); given < nt; ++given) {
        size_t worst = 0;
        double worst_time = 0;
        for (size_t i = 0; i < cands.size(); ++i) {
            const double time = pipeline_cost(cands[i].pred, cands[i].enc) / t[i];
            if (time > worst_time) worst = i, worst_time = time;
        }
        ++t[worst];
    }
    return t;
}

template <typename T>
void choose(const zb_params &p, const T *x, const Shape &s, bool v1_only, int nt, uint8_t &pred, uint8_t &enc,
            ValueRange *range) {
    resolve_pipeline(p, pred, enc);  // explicit choices and the defaults
    std::vector<uint8_t> preds, encs;
    if (p.predictor == ZB_PRED_AUTO && !v1_only) preds = {kPredLorenzo, kPredInterp};
    else preds = {pred};
    if (p.encoder == ZB_ENC_AUTO && !v1_only) encs = {kEncFast, kEncRatio};
    else encs = {enc};
    if (preds.size() * encs.size() == 1) return;

    // The sample is compressed at the whole array's absolute bound on the caller's threads (at most one per
    // kValuesPerThread sample values): a stream's length does not depend on the thread count, so neither does the
    // choice. (On one thread it was a serial stage of every call.)
    const zb_dtype dtype = sizeof(T) == 8 ? ZB_F64 : ZB_F32;
    double vmin = 0, vmax = 0;   // the whole array's range, needed only to derive a REL bound
    const bool has_range = p.mode != ZB_MODE_ABS && value_range(dtype, x, s.n, p.has_fill, p.fill_bits, nt, vmin, vmax);
    if (range && p.mode != ZB_MODE_ABS) *range = ValueRange{true, has_range, vmin, vmax};
    zb_params sp = p;
    sp.mode = ZB_MODE_ABS;
    sp.bound = derive_abs_bound(p.mode, p.bound, has_range, vmin, vmax);
    const uint64_t target = sample_target(s);
    uint64_t start[3];
    const Shape b = sample_box(s, target, start);
    const std::vector<T> sample = gather(x, s, b, start);
    const int snt = (int)std::max<uint64_t>(1, std::min<uint64_t>((uint64_t)nt, b.n / kValuesPerThread));

    struct Candidate {
        uint8_t pred, enc;
        zb_status st = ZB_ERR_INTERNAL;
        size_t len = 0;
        std::exception_ptr error;   // thrown on a helper thread, rethrown here
    };
    std::vector<Candidate> cands;
    for (uint8_t pc : preds)
        for (uint8_t ec : encs) {
            Candidate c;
            c.pred = pc, c.enc = ec;
            cands.push_back(c);
        }
    auto compress_sample = [&](Candidate &c, int threads) {
        try {
            std::vector<uint8_t> buf(raw_stream_bytes(dtype, b.n));
            std::string msg;
            c.st = is_v1_pipeline(c.pred, c.enc)
                       ? cpu_compress(sp, dtype, sample.data(), b, buf.data(), buf.size(), &c.len, threads, msg)
                       : cpu_compress_v2(sp, c.pred, c.enc, dtype, sample.data(), b, buf.data(), buf.size(), &c.len,
                                         threads, msg, false);
        } catch (...) {
            c.error = std::current_exception();
        }
    };
    // With threads for it (two per candidate or more), the candidates run side by side, each on a share of the
    // threads in proportion to its cost: a 1M-value sample on 16 threads scaled 3-5x, alone on a few threads nearly
    // linearly (bench/NOTES.md, session 10). Threads that cannot be started leave their candidates to this thread.
    std::vector<std::thread> helpers;
    std::vector<bool> on_helper(cands.size(), false);
    int helper_threads = 0;
    if (snt >= 2 * (int)cands.size()) {
        const std::vector<int> share = apportion_threads(cands, snt);
        for (size_t i = 1; i < cands.size(); ++i) {
            try {
                helpers.emplace_back(compress_sample, std::ref(cands[i]), share[i]);
                on_helper[i] = true;
                helper_threads += share[i];
            } catch (const std::system_error &) {
                break;
            }
        }
    }
    for (size_t i = 0; i < cands.size(); ++i)
        if (!on_helper[i]) compress_sample(cands[i], snt - helper_threads);
    for (std::thread &h : helpers) h.join();

    size_t best = SIZE_MAX;
    for (const Candidate &c : cands) {
        if (c.error) std::rethrow_exception(c.error);
        // Out of memory must fail the call: skipping the candidate would make the bytes depend on the memory state
        // (invariant 4). Other failures of a sample only rule the candidate out.
        if (c.st == ZB_ERR_NOMEM) throw std::bad_alloc();
        if (c.st == ZB_OK && c.len < best) {   // strictly smaller: ties keep the earlier, faster candidate
            best = c.len;
            pred = c.pred;
            enc = c.enc;
        }
    }
}

}  // namespace

void choose_pipeline_points(const Shape &s, std::vector<uint64_t> &idx) {
    uint64_t start[3];
    const Shape b = sample_box(s, sample_target(s), start);
    box_points(s, b, start, idx);
}

void choose_pipeline(const zb_params &p, zb_dtype dtype, const void *src, const Shape &s, bool v1_only, int nt,
                     uint8_t &pred, uint8_t &enc, ValueRange *range) {
    if (dtype == ZB_F64) choose(p, static_cast<const double *>(src), s, v1_only, nt, pred, enc, range);
    else choose(p, static_cast<const float *>(src), s, v1_only, nt, pred, enc, range);
}

}  // namespace zb
