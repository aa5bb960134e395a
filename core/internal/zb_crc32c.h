// CRC-32C (Castagnoli) and the piecewise payload checksum of docs/FORMAT.md section 6.
#pragma once
#include <cstddef>
#include <cstdint>

namespace zb {

constexpr size_t kChecksumPiece = 65536;  // payload checksum piece size in bytes

// CRC-32C of a byte range (init 0xFFFFFFFF, final xor 0xFFFFFFFF). `crc32c_extend` continues a running value.
uint32_t crc32c(const void *data, size_t len);
uint32_t crc32c_extend(uint32_t crc, const void *data, size_t len);

// The payload checksum: CRC-32C over the little-endian CRC-32C values of consecutive 64 KiB pieces.
uint32_t payload_checksum(const void *payload, size_t len, int threads);

// The 256-entry table of the reflected polynomial 0x82F63B78 (for device code that builds its own copy).
const uint32_t *crc32c_table();

}  // namespace zb
