#include <omp.h>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include "zb_cpu.h"
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace zb {

int resolve_threads(int requested, uint64_t n) {
    if (requested > 0) return requested;
    if (const char *e = std::getenv("ZBOUND_THREADS")) {
        const int v = std::atoi(e);
        if (v > 0) return v;
    }
    const int cores = omp_get_max_threads() > 0 ? omp_get_max_threads() : 1;
    const uint64_t useful = n / kValuesPerThread;
    return useful < 1 ? 1 : (useful < (uint64_t)cores ? (int)useful : cores);
}

void parallel_copy(void *dst, const void *src, size_t bytes, int nt, bool streaming) {
    // One part per thread (whole 4 KiB pages, so no two threads write one line), each at least kMinPart: a
    // parallel region costs a few microseconds, a 256 KiB memcpy about 25. The whole team takes part
    // (team_threads), the threads past `parts` without a part.
    constexpr size_t kMinPart = size_t(256) << 10, kPage = 4096;
    const int parts = (int)std::max<size_t>(1, std::min<size_t>((size_t)std::max(nt, 1), bytes / kMinPart));
    const size_t part = (bytes / (size_t)parts + kPage - 1) / kPage * kPage;
#pragma omp parallel for num_threads(team_threads(nt, (uint64_t)parts)) schedule(static, 1) if (parts > 1)
    for (int k = 0; k < parts; ++k) {
        const size_t off = std::min(bytes, (size_t)k * part);
        uint8_t *d = static_cast<uint8_t *>(dst) + off;
        const uint8_t *s = static_cast<const uint8_t *>(src) + off;
        if (streaming) {
            copy_streaming(d, s, std::min(part, bytes - off));
            stream_fence();  // this thread's stores are visible before the region ends
        } else {
            std::memcpy(d, s, std::min(part, bytes - off));
        }
    }
}

int staging_team() {
    static const int nt = std::min(8, resolve_threads(0, ~uint64_t(0)));
    return nt;
}

void copy_streaming(void *dst, const void *src, size_t bytes) {
#if defined(__SSE2__)
    uint8_t *d = static_cast<uint8_t *>(dst);
    const uint8_t *s = static_cast<const uint8_t *>(src);
    const size_t head = std::min(bytes, (size_t)(-(uintptr_t)d & 15));   // _mm_stream_si128 needs 16-byte alignment
    std::memcpy(d, s, head);
    d += head, s += head, bytes -= head;
    for (; bytes >= 64; bytes -= 64, d += 64, s += 64)
        for (int k = 0; k < 4; ++k)
            _mm_stream_si128(reinterpret_cast<__m128i *>(d) + k,
                             _mm_loadu_si128(reinterpret_cast<const __m128i *>(s) + k));
    for (; bytes >= 16; bytes -= 16, d += 16, s += 16)
        _mm_stream_si128(reinterpret_cast<__m128i *>(d), _mm_loadu_si128(reinterpret_cast<const __m128i *>(s)));
    std::memcpy(d, s, bytes);
#else
    std::memcpy(dst, src, bytes);
#endif
}

void stream_fence() {
#if defined(__SSE2__)
    _mm_sfence();
#endif
}

}  // namespace zb
