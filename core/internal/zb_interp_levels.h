// The order in which the CPU runs the rows of the interp predictor's passes (core/src/interp_cpu.cpp): the passes
// of a level, the threads for them, and the rows of a level either pass after pass or plane by plane.
//
// Plane by plane: a level's passes touch only the planes (of z, or of y when the array has one z plane) at multiples
// of the stride s, and every pass but the one along the plane dim B predicts a point from points of its own plane.
// The pass along B predicts a point of plane c (an odd multiple of s) from planes c -+ s and c -+ 3s, at points that
// only the passes before it in the level (and earlier levels) write. So once those earlier passes are done (they
// touch only planes at multiples of 2s), each plane can run the pass along B and the passes after it on its own:
// every point then reads the same values as pass after pass, and its code lands at the same place (the code of row r
// of pass i is at the pass's base + r * row length). The bytes do not change; the memory traffic does: pass after
// pass, each pass streams the whole array (on 16 threads the last level moved about 1.3 GB for 256 MB of f32, bound
// by memory bandwidth), while a plane's passes find its data in the thread's cache.
//
// Reads across threads: the vector rows may load a whole vector where only every other lane is a point they use
// (zb_interp_rows.h), and a neighbour plane's other lanes may be written at that moment by the thread that owns it.
// Those lanes are discarded (the stores are masked to the points), so the values computed never depend on it.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>
#include <omp.h>
#include "zb_cpu.h"
#include "zb_interp.h"
#include "zb_interp_rows.h"

namespace zb {

// Pass i of the level with stride s (docs/FORMAT.md section 8): along ip.order[i].
inline Pass make_pass(const InterpParams &ip, const int64_t d[3], int64_t s, int i) {
    Pass p;
    p.dim = ip.order[i];
    for (int j = 0; j < 3; ++j) {
        const int dj = ip.order[j];
        p.start[dj] = j == i ? s : 0;
        p.step[dj] = j < i ? s : 2 * s;
    }
    for (int k = 0; k < 3; ++k)
        p.count[k] = d[k] > p.start[k] ? (d[k] - 1 - p.start[k]) / p.step[k] + 1 : 0;
    return p;
}

inline int64_t pass_points(const Pass &p) { return p.count[0] * p.count[1] * p.count[2]; }

// What one thread has for its rows: buffers for a row's predictions (doubles) and its int32 codes, and a count the
// rows may add to (the decoder's escaped codes), private to the thread: a shared array of counters, one per thread,
// written row after row, made the 16-thread decoder's last level 2.4x slower (false sharing).
struct RowScratch {
    double *pred;
    int32_t *codes;
    uint64_t count;
};

// The threads' row buffers for rows of up to `row_points` points. Each thread's predictions and codes lie in 4 KiB
// pages of their own. With the parts only cache lines apart (in whole lines each, so no line was shared), the
// interp decoder's last level took about as long on two threads as on one on the 2-core VM (TREFHT 64 MB, stride 1:
// 25 ms on one thread, 21-23 on two; in pages of their own 12.8-12.9; bench/NOTES.md 119). Most likely a core's
// prefetchers, which run ahead within a page, kept pulling in lines that the other thread was writing row after row.
class RowBuffers {
public:
    RowBuffers(int threads, int64_t row_points)
        : pred_bytes_(round_up(row_points * (int64_t)sizeof(double) + kSpare)),
          part_(page_up(pred_bytes_ + round_up(row_points * (int64_t)sizeof(int32_t) + kSpare))),
          bytes_((size_t)(threads * part_ + kPage)) {}
    RowScratch scratch(int t) {
        uint8_t *part = page_aligned(bytes_.data()) + t * part_;
        return {reinterpret_cast<double *>(part), reinterpret_cast<int32_t *>(part + pred_bytes_), 0};
    }

private:
    static constexpr int64_t kLine = 64, kPage = 4096;
    static constexpr int64_t kSpare = 64;   // a vector's width past a row's last point (masked loads stay inside)
    static int64_t round_up(int64_t bytes) { return (bytes + kLine - 1) / kLine * kLine; }
    static int64_t page_up(int64_t bytes) { return (bytes + kPage - 1) / kPage * kPage; }
    static uint8_t *page_aligned(uint8_t *p) {
        return reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(p) + kPage - 1) & ~uintptr_t(kPage - 1));
    }
    int64_t pred_bytes_, part_;
    std::vector<uint8_t> bytes_;
};

// The threads for `points` points in `units` independent units (rows or planes): the whole team (team_threads) where
// more than one could work, at one per kRowPointsPerThread points and unit, once there are more than min_points
// points; else one. The encoder's work per point is worth threads from 8192 points on: passes of up to 65536 points
// ran on one thread, which in an array of 2^20 values (a 4 MiB chunk, the pipeline choice's sample) left six of its
// nine passes serial (device, 16 threads, interp/ratio compression of 4 MB: 617-889 -> 1279-1548 MB/s). The
// decoder's, about 5x lighter, is not (the same with its small passes on threads: decompression 3520-4282 ->
// 2762-3357 MB/s; measured before team_threads, perhaps the team changes of NOTES 82): it keeps min_points 65536.
constexpr int64_t kRowPointsPerThread = 4096;
constexpr int64_t kEncodeMinPoints = 8192, kDecodeMinPoints = 65536;
inline int work_threads(int64_t units, int64_t points, int nt, int64_t min_points) {
    if (points <= min_points) return 1;
    return team_threads(nt, (uint64_t)std::max<int64_t>(1, std::min(units, points / kRowPointsPerThread)));
}

// The row of pass p through (z, y) that is row r of the pass.
inline Row pass_row(const Pass &p, const int64_t d[3], int64_t z, int64_t y, int64_t r) {
    return Row{lin(d, z, y, p.start[2]), p.step[2], r * p.count[2], p.count[2]};
}

// Rows and planes are taken in chunks of about 1 / kChunksPerThread of a thread's share. (A guided schedule's first
// chunks are 1 / threads of what is left: a slow core holding one made the level's tail. Device, TREFHT 256 MB, 16
// threads: the last level 26.5-28.6 -> 24.3-26.9 ms compressing, 21.5-23.9 -> 20.4-21.7 decompressing.)
constexpr int64_t kChunksPerThread = 16;

// Calls f(z, y, row, scratch) for every row of pass p; rows are independent (OpenMP on work_threads threads), and
// scratch holds the calling thread's buffers of p.count[2] values. Returns the sum of the threads' counts.
template <typename F> uint64_t for_each_row(const Pass &p, const int64_t d[3], int nt, int64_t min_points, F f) {
    const int64_t rows = p.count[0] * p.count[1];
    const int threads = work_threads(rows, pass_points(p), nt, min_points);
    RowBuffers buffers(threads, p.count[2]);   // allocated before the region: no throw inside it
    const int64_t chunk = std::max<int64_t>(1, rows / ((int64_t)threads * kChunksPerThread));
    uint64_t total = 0;
#pragma omp parallel num_threads(threads) if (threads > 1) reduction(+ : total)
    {
        RowScratch scratch = buffers.scratch(omp_get_thread_num());
#pragma omp for schedule(dynamic, chunk)   // taken in turn: with all cores busy some run slower than others
        for (int64_t r = 0; r < rows; ++r) {
            const int64_t z = p.start[0] + (r / p.count[1]) * p.step[0];
            const int64_t y = p.start[1] + (r % p.count[1]) * p.step[1];
            f(z, y, pass_row(p, d, z, y, r), scratch);
        }
        total += scratch.count;
    }
    return total;
}

// Calls g(z, y, r) for the rows r of pass p in plane c of dim B (0: z = c, 1: y = c), if the pass has that plane.
template <typename G> void for_each_row_in_plane(const Pass &p, int B, int64_t c, G g) {
    if (c < p.start[B] || (c - p.start[B]) % p.step[B] != 0) return;
    const int64_t k = (c - p.start[B]) / p.step[B];
    if (k >= p.count[B]) return;
    if (B == 0) {
        for (int64_t j = 0; j < p.count[1]; ++j) g(c, p.start[1] + j * p.step[1], k * p.count[1] + j);
    } else {
        for (int64_t j = 0; j < p.count[0]; ++j) g(p.start[0] + j * p.step[0], c, j * p.count[1] + k);
    }
}

// Levels run plane by plane when each thread gets at least this many planes (fewer: pass after pass, whose rows
// share the threads out more evenly).
constexpr int64_t kPlanesPerThread = 4;

// The plane dim for the level with stride s on `threads` threads: z, else y, whichever first has more than one plane
// and enough planes for the threads; -1 for pass after pass.
inline int level_plane_dim(const int64_t d[3], int64_t s, int threads) {
    for (int B = 0; B < 2; ++B) {
        const int64_t planes = (d[B] - 1) / s + 1;
        if (planes > 1 && planes >= kPlanesPerThread * threads) return B;
    }
    return -1;
}

// Calls f(i, z, y, row, scratch) for every row of the level's three passes p[0..2] (stride s), each row once and
// after every row it depends on (see the top of this file); scratch as for for_each_row. Returns the sum of the
// threads' counts.
template <typename F>
uint64_t for_each_level_row(const Pass p[3], const int64_t d[3], int64_t s, int nt, int64_t min_points, F f) {
    const int64_t points = pass_points(p[0]) + pass_points(p[1]) + pass_points(p[2]);
    int threads = work_threads(points, points, nt, min_points);
    const int B = level_plane_dim(d, s, threads);
    if (B < 0) {
        uint64_t total = 0;
        for (int i = 0; i < 3; ++i)
            total += for_each_row(p[i], d, nt, min_points,
                                  [&](int64_t z, int64_t y, const Row &row, RowScratch &sc) { f(i, z, y, row, sc); });
        return total;
    }
    int iB = 0;   // the pass along the plane dim
    while (p[iB].dim != B) ++iB;
    const int64_t planes = (d[B] - 1) / s + 1;   // plane k at coordinate k * s
    threads = (int)std::min<int64_t>(threads, planes);
    RowBuffers buffers(threads, std::max({p[0].count[2], p[1].count[2], p[2].count[2]}));
    const int64_t chunk = std::max<int64_t>(1, planes / ((int64_t)threads * kChunksPerThread));
    uint64_t total = 0;
#pragma omp parallel num_threads(threads) if (threads > 1) reduction(+ : total)
    {
        RowScratch scratch = buffers.scratch(omp_get_thread_num());
        auto plane_rows = [&](int i, int64_t c) {
            for_each_row_in_plane(p[i], B, c, [&](int64_t z, int64_t y, int64_t r) {
                f(i, z, y, pass_row(p[i], d, z, y, r), scratch);
            });
        };
        if (iB > 0) {   // the passes before the one along B: planes at multiples of 2s, each on its own
#pragma omp for schedule(dynamic, chunk)
            for (int64_t k = 0; k < planes; k += 2)
                for (int i = 0; i < iB; ++i) plane_rows(i, k * s);
        }   // (the loop's barrier: all of them before any pass along B)
#pragma omp for schedule(dynamic, chunk)
        for (int64_t k = 0; k < planes; ++k)
            for (int i = iB; i < 3; ++i) plane_rows(i, k * s);
        total += scratch.count;
    }
    return total;
}

}  // namespace zb
