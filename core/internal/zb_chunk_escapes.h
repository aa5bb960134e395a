// Escaped codes found chunk by chunk on threads (the Lorenzo pipelines' deltas, the interp anchors): work split into
// chunks of a fixed number of values, not one per thread, so that nothing depends on the thread count. Escaped codes
// (their values are stored in index order) are found chunk by chunk: a first parallel pass counts the escapes of each
// chunk (fused with the pass that writes the codes), a prefix sum gives each chunk's first escape, and a second
// parallel pass visits only the chunks that have any.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>
#include "zb_format.h"

namespace zb {

constexpr uint64_t kChunkValues = uint64_t(1) << 16;

// Runs count(i0, i1) on every chunk [i0, i1) of [0, n) (`chunk` values each) in parallel; count returns the escapes
// in its chunk. Returns first, with first[c] the escapes before chunk c and first.back() their total.
template <typename F>
std::vector<uint64_t> count_escapes_by_chunk(uint64_t n, int nt, F count, uint64_t chunk = kChunkValues) {
    const int64_t chunks = (int64_t)div_up(n, chunk);
    std::vector<uint64_t> first((size_t)chunks + 1, 0);
#pragma omp parallel for num_threads(nt) schedule(static) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c)
        first[(size_t)c + 1] = count((uint64_t)c * chunk, std::min(n, (uint64_t)(c + 1) * chunk));
    for (int64_t c = 0; c < chunks; ++c) first[(size_t)c + 1] += first[(size_t)c];
    return first;
}

// Calls f(i, e) for every index i where escaped(i), e its rank among the escapes (`first` from
// count_escapes_by_chunk with the same chunk).
template <typename IsEscaped, typename F>
void for_each_escape(uint64_t n, const std::vector<uint64_t> &first, int nt, IsEscaped escaped, F f,
                     uint64_t chunk = kChunkValues) {
    const int64_t chunks = (int64_t)first.size() - 1;
#pragma omp parallel for num_threads(nt) schedule(dynamic, 16) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) {
        if (first[(size_t)c + 1] == first[(size_t)c]) continue;
        uint64_t e = first[(size_t)c];
        const uint64_t i1 = std::min(n, (uint64_t)(c + 1) * chunk);
        for (uint64_t i = (uint64_t)c * chunk; i < i1; ++i)
            if (escaped(i)) f(i, e++);
    }
}

}  // namespace zb
