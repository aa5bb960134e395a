// Shared helpers of the zbound fuzz targets (libFuzzer). Not part of the library.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include "zb_crc32c.h"

namespace zbfuzz {

// Aborts with a message: libFuzzer reports an abort as a crash and keeps the input.
[[noreturn]] inline void fail(const char *what) {
    std::fprintf(stderr, "zbound fuzz invariant violated: %s\n", what);
    std::abort();
}
#define ZBF_CHECK(cond) \
    do { if (!(cond)) ::zbfuzz::fail(#cond); } while (0)

inline uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
inline uint64_t rd64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = v << 8 | p[i];
    return v;
}
inline void wr16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
inline void wr32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = (uint8_t)(v >> (8 * i));
}

// Makes a mutated stream pass the checks a mutation would almost never pass by chance, so that the fuzzer reaches
// the payload decoders: the header-size field, the payload checksum and the header checksum (docs/FORMAT.md
// sections 2 and 6) are recomputed from the bytes as they are. Everything else stays as the fuzzer made it.
inline void fix_checksums(uint8_t *p, size_t len) {
    constexpr size_t kFixed = 96;
    if (len < kFixed + 8) return;
    const unsigned nseg = rd16(p + 14);
    if (nseg < 1 || nseg > 8) return;
    const size_t hbytes = kFixed + 16 * (size_t)nseg + 8;
    if (len < hbytes) return;
    wr16(p + 6, (uint16_t)hbytes);
    uint64_t payload = 0;
    for (unsigned i = 0; i < nseg; ++i) {
        const uint64_t l = rd64(p + kFixed + 16 * i + 8);
        payload = l > UINT64_MAX - payload ? UINT64_MAX : payload + l;
    }
    const size_t avail = len - hbytes;
    const size_t plen = payload < avail ? (size_t)payload : avail;
    wr32(p + hbytes - 8, zb::payload_checksum(p + hbytes, plen, 1));
    wr32(p + hbytes - 4, zb::crc32c(p, hbytes - 4));
}

}  // namespace zbfuzz
