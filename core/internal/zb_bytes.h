// Little-endian field writers and readers: the format is written field by field, never as a struct dump.
#pragma once
#include <cstdint>
#include <cstring>

namespace zb {

inline void put_u8(uint8_t *p, uint8_t v) { p[0] = v; }
inline void put_u16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
inline void put_u32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; ++i) p[i] = (uint8_t)(v >> (8 * i)); }
inline void put_u64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; ++i) p[i] = (uint8_t)(v >> (8 * i)); }
inline void put_f64(uint8_t *p, double v) { uint64_t u; std::memcpy(&u, &v, 8); put_u64(p, u); }

inline uint16_t get_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
inline uint32_t get_u32(const uint8_t *p) { uint32_t v = 0; for (int i = 3; i >= 0; --i) v = (v << 8) | p[i]; return v; }
inline uint64_t get_u64(const uint8_t *p) { uint64_t v = 0; for (int i = 7; i >= 0; --i) v = (v << 8) | p[i]; return v; }
inline double get_f64(const uint8_t *p) { uint64_t u = get_u64(p); double v; std::memcpy(&v, &u, 8); return v; }

// Bit k of the low four bits of b into bit 0 of byte k (the copies b << 7k do not overlap, so nothing carries). The
// vector loops use it for their exception bytes instead of pdep, which AMD cores before Zen 3 run in microcode.
inline uint32_t bits_to_bytes4(uint32_t b) { return ((b & 0xfu) * 0x00204081u) & 0x01010101u; }

// The number of set bits of m without the popcnt instruction (the baseline build targets CPUs that lack it, and
// __builtin_popcountll there is a call into libgcc).
inline uint32_t popcount_swar(uint64_t m) {
    m -= (m >> 1) & 0x5555555555555555ull;
    m = (m & 0x3333333333333333ull) + ((m >> 2) & 0x3333333333333333ull);
    return (uint32_t)((((m + (m >> 4)) & 0x0F0F0F0F0F0F0F0Full) * 0x0101010101010101ull) >> 56);
}

// The host is little-endian (x86-64 / aarch64); value arrays are copied as they are. Checked at compile time.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "zbound assumes a little-endian host");

}  // namespace zb
