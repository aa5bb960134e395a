// The interp predictor's alpha (the level-wise bound reduction e_l = eb / alpha^l), chosen by compression: Eq. 2 of
// cusz-i.txt gives a default from the relative bound alone, but the best alpha depends on the field (measured at rel
// 1e-2, ratio encoder: gmt_geoid_1m best at 1.25, CR 280 against 204 at Eq. 2's 1.75; ncep Z3 best at 2.0; CESM
// TREFHT at 1.0). The decoder reads the level bounds from the stream, so any choice decodes; this one is made on the
// host from the data alone (both backends call it), so the CPU and the GPU write the same bytes.
#include <algorithm>
#include <string>
#include <vector>
#include "zb_codes16.h"
#include "zb_cpu.h"
#include "zb_interp_cpu.h"
#include "zb_parallel_tasks.h"
#include "zb_ratio.h"
#include "zb_sample.h"
#include "zb_scratch.h"
#include "zb_stage_clock.h"

namespace zb {
namespace {

// Candidates after the default (which wins ties, so the choice only moves for a real gain).
constexpr double kAlphaCandidates[] = {1.0, 1.25, 1.5, 1.75, 2.0};
constexpr uint64_t kMinValuesToTune = 16384;
constexpr size_t kAlphaFinalists = 3;   // smaller arrays keep the default: the sample would be the array

// Bytes of the sample compressed with the predictor parameters ip and the stream's encoder (exceptions and escapes
// counted at their stored size; headers, equal for every candidate, left out).
// The buffers of sample_cost, kept between the candidates' calls (zb_scratch.h): zeroed vectors of a fresh
// allocation each time were a tenth of the tuning of a small array (page faults and memset). One set per thread
// that runs the tasks, kept between calls too (a set per call: page faults on every thread of every call).
struct SampleScratch {
    ScratchArray<uint8_t> exc;
    ScratchArray<uint8_t> recon;   // T values
    ScratchArray<uint16_t> c16;
};
thread_local SampleScratch t_sample;

template <typename T>
uint64_t sample_cost(const std::vector<T> &x, const Shape &b, const InterpParams &ip, double eb, uint8_t encoder,
                     int has_fill, uint64_t fill_bits, SampleScratch &scratch) {
    const uint64_t n = b.n;
    const int32_t radius = encoder_radius(encoder);
    uint8_t *exc = scratch.exc.get((size_t)n);
    T *recon = reinterpret_cast<T *>(scratch.recon.get((size_t)n * sizeof(T)));
    const uint64_t padded = code_tiles(n) * kTileCodes;
    uint16_t *c16 = scratch.c16.get((size_t)padded);
    std::fill(c16 + n, c16 + padded, (uint16_t)0);   // the fast encoder reads whole tiles
    std::vector<int32_t> escapes;
    interp_encode_cpu(x.data(), b, ip, InterpCodeOrder::kPass, eb, encoder, has_fill, fill_bits, c16, exc, recon,
                      escapes, 1);
    uint64_t exceptions = 0;
    for (uint64_t i = 0; i < n; ++i) exceptions += exc[i];
    uint64_t bytes = exceptions * sizeof(T) + escapes.size() * 4;
    if (encoder == kEncRatio) {
        std::vector<std::string> segs;
        std::string msg;
        if (ratio_encode_cpu(c16, n, 2 * (uint32_t)radius, 1, segs, nullptr, msg) != ZB_OK) return UINT64_MAX;
        for (const std::string &s : segs) bytes += s.size();
    } else {
        const FastCodeSegments fc = fast_encode_codes(c16, n, 1);
        bytes += fc.flags.size + fc.blocks.size;
    }
    return bytes;
}

}  // namespace

void interp_set_alpha(InterpParams &ip, double eb, double alpha) {
    ip.alpha = alpha;
    double e = eb;
    for (int l = 0; l <= kInterpLevels; ++l) {
        ip.level_eb[l] = e;
        e /= alpha;
    }
}

// Values per tuning sample (all boxes together).
static uint64_t alpha_sample_target(const Shape &s) {
    return std::min<uint64_t>(std::max<uint64_t>(s.n / 64, 32768), 1u << 16);
}

void interp_tune_alpha_points(const Shape &s, std::vector<uint64_t> &idx) {
    if (s.n < kMinValuesToTune) return;
    Shape b;
    for (const auto &start : quarter_boxes(s, alpha_sample_target(s), b)) box_points(s, b, start.data(), idx);
}

template <typename T>
void interp_tune_alpha(const T *x, const Shape &s, double eb, uint8_t encoder, int has_fill, uint64_t fill_bits,
                       InterpParams &ip, int nt) {
    if (s.n < kMinValuesToTune || !(eb > 0)) return;
    // Boxes around the quarter points (zb_sample.h): one central box misjudged the NASA CFD fields.
    Shape b;
    std::vector<std::vector<T>> samples;
    for (const auto &start : quarter_boxes(s, alpha_sample_target(s), b))
        samples.push_back(gather(x, s, b, start.data()));
    std::vector<double> alphas{ip.alpha};  // the default first: it wins ties
    for (double a : kAlphaCandidates)
        if (a != ip.alpha) alphas.push_back(a);
    // The cost of each (candidate, box) is a task of its own, on the caller's threads: one thread, they were the
    // only serial stage of an interp compression (9-12 ms of 150-190 on two threads, 2-core VM). Costs are summed
    // in a fixed order afterwards, so the choice does not depend on the thread count.
    const StageMute mute;   // the samples' stages are the tuning's
    struct Task {
        size_t alpha, box;
    };
    auto costs = [&](const std::vector<Task> &tasks) {
        std::vector<uint64_t> cost(tasks.size());
        parallel_tasks((int64_t)tasks.size(), nt, [&](int64_t k, int) {
            InterpParams cand = ip;
            interp_set_alpha(cand, eb, alphas[tasks[(size_t)k].alpha]);
            cost[(size_t)k] = sample_cost(samples[tasks[(size_t)k].box], b, cand, eb, encoder, has_fill, fill_bits,
                                          t_sample);
        });
        return cost;
    };
    auto sum = [](uint64_t a, uint64_t c) { return a == UINT64_MAX || c == UINT64_MAX ? UINT64_MAX : a + c; };
    // Successive halving: every candidate on the first box, then the best kAlphaFinalists on the other boxes too
    // (measured on the fields of ../shared/data: the same choices as all candidates on all boxes for a third of the
    // work).
    std::vector<Task> first_tasks;
    for (size_t i = 0; i < alphas.size(); ++i) first_tasks.push_back({i, 0});
    const std::vector<uint64_t> first_box = costs(first_tasks);
    std::vector<size_t> rank(alphas.size());
    for (size_t i = 0; i < alphas.size(); ++i) rank[i] = i;
    std::stable_sort(rank.begin(), rank.end(), [&](size_t a, size_t c) { return first_box[a] < first_box[c]; });
    rank.resize(std::min<size_t>(kAlphaFinalists, rank.size()));
    std::vector<Task> final_tasks;
    for (size_t i : rank)
        for (size_t k = 1; k < samples.size(); ++k) final_tasks.push_back({i, k});
    const std::vector<uint64_t> final_cost = costs(final_tasks);
    uint64_t best = UINT64_MAX;
    double best_alpha = ip.alpha;
    size_t best_index = alphas.size();
    for (size_t r = 0; r < rank.size(); ++r) {
        const size_t i = rank[r];
        uint64_t cost = first_box[i];
        for (size_t k = 1; k < samples.size(); ++k) cost = sum(cost, final_cost[r * (samples.size() - 1) + k - 1]);
        if (cost < best || (cost == best && i < best_index)) {  // ties: the earlier candidate
            best = cost;
            best_alpha = alphas[i];
            best_index = i;
        }
    }
    interp_set_alpha(ip, eb, best_alpha);
}

template void interp_tune_alpha<float>(const float *, const Shape &, double, uint8_t, int, uint64_t, InterpParams &,
                                       int);
template void interp_tune_alpha<double>(const double *, const Shape &, double, uint8_t, int, uint64_t,
                                        InterpParams &, int);

}  // namespace zb
