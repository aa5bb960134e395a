// The order of the interp predictor's rows on the CPU (core/internal/zb_interp_levels.h): every point of every pass
// is visited exactly once, as row r of its pass, and only after every point it is predicted from, for every dim order,
// thread count and kind of shape (plane by plane along z or y, with or without passes before the one along the plane
// dim, and pass after pass).
#include <gtest/gtest.h>
#include <atomic>
#include <set>
#include <vector>
#include "zb_interp_levels.h"

namespace {

struct Visits {
    std::vector<std::atomic<uint8_t>> done;   // 1 once the point's value exists (anchors, then each pass's points)
    std::atomic<uint64_t> twice{0}, early{0}, misplaced{0};
    explicit Visits(size_t n) : done(n) {}
};

// Runs every level of shape d in dim order `order` on nt threads through for_each_level_row and checks each row.
void check_levels(const int64_t d[3], const uint8_t order[3], int nt, std::set<int> &plane_dims_seen) {
    zb::InterpParams ip;
    for (int k = 0; k < 3; ++k) ip.order[k] = order[k];
    const size_t n = (size_t)(d[0] * d[1] * d[2]);
    Visits v(n);
    for (int64_t z = 0; z < d[0]; ++z)
        for (int64_t y = 0; y < d[1]; ++y)
            for (int64_t x = 0; x < d[2]; ++x)
                if (z % 8 == 0 && y % 8 == 0 && x % 8 == 0) v.done[(size_t)zb::lin(d, z, y, x)] = 1;
    for (int64_t s = 4; s >= 1; s /= 2) {
        zb::Pass p[3];
        int64_t points = 0;
        for (int i = 0; i < 3; ++i) {
            p[i] = zb::make_pass(ip, d, s, i);
            points += zb::pass_points(p[i]);
        }
        const int threads = zb::work_threads(points, points, nt, 0);
        const int B = zb::level_plane_dim(d, s, threads);
        int iB = 0;
        while (B >= 0 && p[iB].dim != B) ++iB;
        plane_dims_seen.insert(B < 0 ? -1 : 10 * B + (iB > 0 ? 1 : 0));
        zb::for_each_level_row(p, d, s, nt, 0, [&](int i, int64_t z, int64_t y, const zb::Row &row,
                                                     zb::RowScratch &scratch) {
            const zb::Pass &pi = p[i];
            // Row r of the pass: (z, y) and the first point as the pass numbers its rows.
            const int64_t r = row.k0 / pi.count[2];
            if (row.k0 % pi.count[2] != 0 || row.count != pi.count[2] || row.dx != pi.step[2] ||
                z != pi.start[0] + (r / pi.count[1]) * pi.step[0] ||
                y != pi.start[1] + (r % pi.count[1]) * pi.step[1] || row.first != zb::lin(d, z, y, pi.start[2]))
                ++v.misplaced;
            const int64_t stride = pi.dim == 0 ? d[1] * d[2] : (pi.dim == 1 ? d[2] : 1);
            for (int64_t ix = 0; ix < row.count; ++ix) {
                scratch.pred[ix] = 0;   // the buffers hold a whole row (ASan would see more)
                scratch.codes[ix] = 0;
                const int64_t idx = row.first + ix * row.dx;
                const int64_t c[3] = {z, y, pi.start[2] + ix * pi.step[2]};
                if (v.done[(size_t)idx].load(std::memory_order_acquire)) ++v.twice;
                for (int64_t o : {-3, -1, 1, 3}) {   // the neighbours interp_predict may read
                    const int64_t cn = c[pi.dim] + o * s;
                    if (cn < 0 || cn >= d[pi.dim]) continue;
                    if (!v.done[(size_t)(idx + o * s * stride)].load(std::memory_order_acquire)) ++v.early;
                }
            }
            for (int64_t ix = 0; ix < row.count; ++ix)
                v.done[(size_t)(row.first + ix * row.dx)].store(1, std::memory_order_release);
        });
    }
    size_t missing = 0;
    for (size_t i = 0; i < n; ++i) missing += v.done[i] ? 0 : 1;
    const std::string what = std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x" + std::to_string(d[2]) +
                             " order " + std::to_string(order[0]) + std::to_string(order[1]) +
                             std::to_string(order[2]) + ", " + std::to_string(nt) + " threads";
    EXPECT_EQ(missing, 0u) << what;
    EXPECT_EQ(v.twice.load(), 0u) << what;
    EXPECT_EQ(v.early.load(), 0u) << what;
    EXPECT_EQ(v.misplaced.load(), 0u) << what;
}

TEST(InterpLevels, EveryRowOnceAfterWhatItReads) {
    const int64_t shapes[][3] = {
        {96, 33, 130},    // planes along z
        {3, 300, 257},    // few z planes: along y
        {12, 50, 700},    // along z on few threads, along y on more
        {1, 700, 333},    // 2D: rows as planes
        {1, 1, 100001},   // 1D: pass after pass
        {2, 5, 20000},    // too few planes either way
    };
    const uint8_t orders[][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    std::set<int> seen;
    for (const auto &d : shapes)
        for (const auto &o : orders)
            for (int nt : {1, 2, 5}) check_levels(d, o, nt, seen);
    // Each way of running a level was taken: pass after pass (-1), planes along z (0) and y (10), each with (+1) and
    // without passes before the one along the plane dim.
    EXPECT_EQ(seen, (std::set<int>{-1, 0, 1, 10, 11}));
}

}  // namespace
