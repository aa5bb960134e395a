// predictor=auto / encoder=auto: compress a sample of the array with each candidate and keep the smallest.
#include <algorithm>
#include <cmath>
#include <new>
#include <vector>
#include "zb_cpu.h"
#include "zb_parallel_tasks.h"
#include "zb_sample.h"
#include "zb_scratch.h"
#include "zb_stage_clock.h"

namespace zb {
namespace {

// At most two predictors times two encoders.
constexpr size_t kMaxCandidates = 4;

// The choice's sample (T values, as bytes) and the candidates' output streams, reused by the calls of a thread.
struct ChoiceScratch {
    ScratchArray<uint8_t> sample, out[kMaxCandidates];
};
thread_local ChoiceScratch t_choice;

uint64_t sample_target(const Shape &s) {
    return std::min<uint64_t>(s.n, std::max<uint64_t>(8192, std::min<uint64_t>(s.n / 32, 1u << 20)));
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

    // The sample is compressed at the whole array's absolute bound, on the caller's threads (all of them where it
    // has kValuesPerThread values for two: team_threads): a stream's length does not depend on the thread count, so
    // neither does the choice. (On one thread it was a serial stage of every call.)
    const zb_dtype dtype = sizeof(T) == 8 ? ZB_F64 : ZB_F32;
    double vmin = 0, vmax = 0;   // the whole array's range, needed only to derive a REL bound
    const bool has_range = p.mode != ZB_MODE_ABS && value_range(dtype, x, s.n, p.has_fill, p.fill_bits, nt, vmin, vmax);
    if (range && p.mode != ZB_MODE_ABS) *range = ValueRange{true, has_range, vmin, vmax};
    stage_mark("range");
    zb_params sp = p;
    sp.mode = ZB_MODE_ABS;
    sp.bound = derive_abs_bound(p.mode, p.bound, has_range, vmin, vmax);
    const uint64_t target = sample_target(s);
    uint64_t start[3];
    const Shape b = sample_box(s, target, start);
    const uint64_t useful = b.n / kValuesPerThread;   // threads the sample keeps busy
    const int snt = team_threads(nt, useful);
    // The sample and the candidates' output in this thread's reused memory (zeroed vectors of a fresh allocation
    // were a serial memset and page faults of up to 16 MB per call).
    T *sample = reinterpret_cast<T *>(t_choice.sample.get((size_t)b.n * sizeof(T)));
    gather_into(x, s, b, start, sample, snt);
    const size_t cap = raw_stream_bytes(dtype, b.n);
    struct Candidate {
        uint8_t pred, enc;
        zb_status status = ZB_OK;
        size_t len = 0;
    };
    std::vector<Candidate> cands;
    for (uint8_t pc : preds)
        for (uint8_t ec : encs) cands.push_back({pc, ec});
    const StageMute mute;   // the candidates' stages are not the call's
    auto run = [&](Candidate &c, uint8_t *out, int threads) {
        std::string msg;
        c.status = is_v1_pipeline(c.pred, c.enc)
                       ? cpu_compress(sp, dtype, sample, b, out, cap, &c.len, threads, msg)
                       : cpu_compress_v2(sp, c.pred, c.enc, dtype, sample, b, out, cap, &c.len, threads, msg, false);
    };
    if (useful < cands.size() && nt > 1) {
        // A sample too small for as many threads as there are candidates (under kValuesPerThread values a candidate
        // thread: arrays up to 8M values, a 32 MiB chunk of f32): the candidates side by side, one thread each, on
        // threads of the caller's OpenMP team (warm, unlike threads started for the purpose, which measured no
        // faster in session 10). The slowest candidate's one-thread time beats the sum of their times on a few
        // threads (device, 16 MB TREFHT, 16 threads: 2 threads each one after the other took 6 ms of a 13 ms call).
        uint8_t *outs[kMaxCandidates];
        for (size_t k = 0; k < cands.size(); ++k) outs[k] = t_choice.out[k].get(cap);
        parallel_tasks((int64_t)cands.size(), nt, [&](int64_t k, int) { run(cands[(size_t)k], outs[k], 1); });
    } else {
        uint8_t *out = t_choice.out[0].get(cap);
        for (Candidate &c : cands) run(c, out, snt);
    }
    size_t best = SIZE_MAX;
    for (const Candidate &c : cands) {   // in order, whatever ran first
        // Out of memory must fail the call: skipping the candidate would make the bytes depend on the memory state
        // (invariant 4). Other failures of a sample only rule the candidate out.
        if (c.status == ZB_ERR_NOMEM) throw std::bad_alloc();
        if (c.status == ZB_OK && c.len < best) {   // strictly smaller: ties keep the earlier, faster candidate
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
