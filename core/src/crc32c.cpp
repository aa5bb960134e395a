// CRC-32C: slicing-by-8 tables, or the SSE4.2 crc32 instruction where the CPU has it (same values).
#include "zb_crc32c.h"
#include <algorithm>
#include <cstring>
#include <vector>
#include "zb_bytes.h"

namespace zb {
namespace {

struct Tables {
    uint32_t t[8][256];
    Tables() {
        for (uint32_t i = 0; i < 256; ++i) {
            uint32_t c = i;
            for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
            t[0][i] = c;
        }
        for (uint32_t i = 0; i < 256; ++i)
            for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFF];
    }
};
const Tables &tables() { static const Tables tb; return tb; }

// Raw (no init/final xor) update with tables.
uint32_t update_sw(uint32_t c, const uint8_t *p, size_t len) {
    const Tables &tb = tables();
    while (len >= 8) {
        uint64_t w;
        std::memcpy(&w, p, 8);
        w ^= c;
        c = tb.t[7][w & 0xFF] ^ tb.t[6][(w >> 8) & 0xFF] ^ tb.t[5][(w >> 16) & 0xFF] ^ tb.t[4][(w >> 24) & 0xFF] ^
            tb.t[3][(w >> 32) & 0xFF] ^ tb.t[2][(w >> 40) & 0xFF] ^ tb.t[1][(w >> 48) & 0xFF] ^ tb.t[0][w >> 56];
        p += 8;
        len -= 8;
    }
    while (len--) c = tb.t[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t update_hw(uint32_t c, const uint8_t *p, size_t len) {
    uint64_t c64 = c;
    while (len >= 8) {
        uint64_t w;
        std::memcpy(&w, p, 8);
        c64 = __builtin_ia32_crc32di(c64, w);
        p += 8;
        len -= 8;
    }
    uint32_t c32 = (uint32_t)c64;
    while (len--) c32 = __builtin_ia32_crc32qi(c32, *p++);
    return c32;
}
// Three pieces of the same length at once: the crc32 instruction's latency is three cycles and its throughput one
// per cycle, so three independent chains run at about three times the speed of one.
__attribute__((target("sse4.2"))) void update3_hw(uint32_t c[3], const uint8_t *const p[3], size_t len) {
    uint64_t a = c[0], b = c[1], d = c[2];
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t wa, wb, wd;
        std::memcpy(&wa, p[0] + i, 8);
        std::memcpy(&wb, p[1] + i, 8);
        std::memcpy(&wd, p[2] + i, 8);
        a = __builtin_ia32_crc32di(a, wa);
        b = __builtin_ia32_crc32di(b, wb);
        d = __builtin_ia32_crc32di(d, wd);
    }
    c[0] = (uint32_t)a, c[1] = (uint32_t)b, c[2] = (uint32_t)d;
    for (int k = 0; k < 3; ++k)
        for (size_t j = i; j < len; ++j) c[k] = __builtin_ia32_crc32qi(c[k], p[k][j]);
}
bool have_hw() { static const bool h = __builtin_cpu_supports("sse4.2"); return h; }
#endif

uint32_t update(uint32_t c, const uint8_t *p, size_t len) {
#if defined(__x86_64__)
    if (have_hw()) return update_hw(c, p, len);
#endif
    return update_sw(c, p, len);
}

}  // namespace

uint32_t crc32c_extend(uint32_t crc, const void *data, size_t len) {
    return update(crc ^ 0xFFFFFFFFu, static_cast<const uint8_t *>(data), len) ^ 0xFFFFFFFFu;
}

uint32_t crc32c(const void *data, size_t len) { return crc32c_extend(0, data, len); }

const uint32_t *crc32c_table() { return tables().t[0]; }

uint32_t payload_checksum(const void *payload, size_t len, int threads) {
    const uint8_t *p = static_cast<const uint8_t *>(payload);
    const int64_t pieces = (int64_t)((len + kChecksumPiece - 1) / kChecksumPiece);
    std::vector<uint8_t> piece_crcs((size_t)pieces * 4);
    // Groups of three pieces: with the crc32 instruction, the whole pieces of a group as three chains at once.
    const int64_t groups = (pieces + 2) / 3;
#pragma omp parallel for num_threads(threads) schedule(static) if (pieces > 16)
    for (int64_t g = 0; g < groups; ++g) {
        const int64_t i0 = 3 * g;
#if defined(__x86_64__)
        if (have_hw() && (size_t)(i0 + 3) * kChecksumPiece <= len) {
            const uint8_t *starts[3] = {p + (size_t)i0 * kChecksumPiece, p + (size_t)(i0 + 1) * kChecksumPiece,
                                        p + (size_t)(i0 + 2) * kChecksumPiece};
            uint32_t c[3] = {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu};
            update3_hw(c, starts, kChecksumPiece);
            for (int k = 0; k < 3; ++k) put_u32(&piece_crcs[(size_t)(i0 + k) * 4], c[k] ^ 0xFFFFFFFFu);
            continue;
        }
#endif
        for (int64_t i = i0; i < std::min(i0 + 3, pieces); ++i) {
            const size_t off = (size_t)i * kChecksumPiece;
            const size_t n = len - off < kChecksumPiece ? len - off : kChecksumPiece;
            put_u32(&piece_crcs[(size_t)i * 4], crc32c(p + off, n));
        }
    }
    return crc32c(piece_crcs.data(), piece_crcs.size());
}

}  // namespace zb
