// CPU backend of the codec (core/src/fast_cpu.cpp, sparse_cpu.cpp) and the helpers it shares with the API layer.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include "zb_format.h"
#include "zbound.h"

namespace zb {

// Number of OpenMP threads for work on n values: `requested` if > 0, else ZBOUND_THREADS, else one thread per
// kValuesPerThread values up to all cores. Small HDF5 chunks thus stay on one thread: measured, OpenMP's
// spin-waiting made a 2.3M-value field 20-60x slower on a machine whose cores were busy. Output bytes never depend
// on the thread count.
constexpr uint64_t kValuesPerThread = 65536;
int resolve_threads(int requested, uint64_t n);

// Min and max over finite values that are not the fill value; returns false if there is none.
bool value_range(zb_dtype dtype, const void *src, uint64_t n, int has_fill, uint64_t fill_bits, int threads,
                 double &vmin, double &vmax);

// Encodes with the fast pipeline (or raw passthrough when that is not smaller) into dst.
zb_status cpu_compress(const zb_params &p, zb_dtype dtype, const void *src, const Shape &shape, uint8_t *dst,
                       size_t dst_capacity, size_t *dst_len, int threads, std::string &msg);

// Decodes a stream whose header was validated by read_header into dst (n values).
zb_status cpu_decompress(const Header &h, const uint8_t *stream, void *dst, int threads, std::string &msg);

// Zero-block sparse pass over a byte string (docs/FORMAT.md section 5). `flags` gets sparse_flag_bytes(bytes)
// bytes; non-zero blocks are appended to `blocks`. Returns the number of non-zero blocks.
uint64_t sparse_encode(const uint8_t *data, uint64_t bytes, uint8_t *flags, std::string &blocks);
// Inverse: expands into `out` (bytes long). False if flags and blocks disagree (corrupt stream).
bool sparse_decode(const uint8_t *flags, const uint8_t *blocks, uint64_t nblocks, uint64_t bytes, uint8_t *out);

// Bitshuffle of one 2048-code tile into 4096 bytes and back.
void bitshuffle_tile(const uint16_t *codes, uint8_t *tile);
void bitunshuffle_tile(const uint8_t *tile, uint16_t *codes);

}  // namespace zb
