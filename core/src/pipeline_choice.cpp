// predictor=auto / encoder=auto: compress a sample of the array with each candidate and keep the smallest.
#include <algorithm>
#include <cmath>
#include <new>
#include <vector>
#include "zb_cpu.h"
#include "zb_sample.h"
#include "zb_scratch.h"
#include "zb_stage_clock.h"

namespace zb {
namespace {

// The choice's sample (T values, as bytes) and the candidates' output stream, reused by the calls of a thread.
struct ChoiceScratch {
    ScratchArray<uint8_t> sample, out;
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

    // The sample is compressed at the whole array's absolute bound, on the caller's threads (at most one per
    // kValuesPerThread sample values): a stream's length does not depend on the thread count, so neither does the
    // choice. (On one thread it was a serial stage of every call.)
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
    const int snt = (int)std::max<uint64_t>(1, std::min<uint64_t>((uint64_t)nt, b.n / kValuesPerThread));
    // The sample and the candidates' output in this thread's reused memory (zeroed vectors of a fresh allocation
    // were a serial memset and page faults of up to 16 MB per call).
    T *sample = reinterpret_cast<T *>(t_choice.sample.get((size_t)b.n * sizeof(T)));
    gather_into(x, s, b, start, sample, snt);
    const size_t cap = raw_stream_bytes(dtype, b.n);
    uint8_t *buf = t_choice.out.get(cap);
    size_t best = SIZE_MAX;
    std::string msg;
    const StageMute mute;   // the candidates' stages are not the call's
    for (uint8_t pc : preds)
        for (uint8_t ec : encs) {
            size_t len = 0;
            const zb_status st =
                is_v1_pipeline(pc, ec)
                    ? cpu_compress(sp, dtype, sample, b, buf, cap, &len, snt, msg)
                    : cpu_compress_v2(sp, pc, ec, dtype, sample, b, buf, cap, &len, snt, msg, false);
            // Out of memory must fail the call: skipping the candidate would make the bytes depend on the
            // memory state (invariant 4). Other failures of a sample only rule the candidate out.
            if (st == ZB_ERR_NOMEM) throw std::bad_alloc();
            if (st == ZB_OK && len < best) {  // strictly smaller: ties keep the earlier, faster candidate
                best = len;
                pred = pc;
                enc = ec;
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
