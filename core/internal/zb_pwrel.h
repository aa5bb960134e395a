// The point-wise relative bound (format v5, docs/FORMAT.md section 12): |x - x'| <= pw_rel * |x| on every finite
// non-fill value. The values' base-2 log magnitudes are compressed with an absolute bound by any pipeline (the
// inner stream), signs are kept as bits, and every value whose reconstruction misses the bound (or that is zero,
// non-finite or the fill value) is stored exactly.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include "zb_format.h"

namespace zb {

// Header of a v5 stream (nine segments) plus its parameters: where the inner stream starts.
constexpr size_t kPwRelInnerOffset = kHeaderFixedBytes + 16 * kPwRelSegmentCount + 8 + kPwRelParamBytes;

// How the inner stream is made and read: the API's compress and decompress with its backend choice (the GPU when
// it is used). Both return a status and leave the reason in zb_last_error().
struct PwRelInnerCodec {
    // Compresses n log magnitudes (dtype and shape of the outer call) with params (mode ABS) into dst.
    std::function<zb_status(const zb_params &params, const void *values, uint8_t *dst, size_t cap, size_t *len)>
        compress;
    // Decodes a complete inner stream of `len` bytes into values (n of the outer dtype). Its payload checksum is not
    // verified again: the container's covers it (or, compressing, the writer just wrote it).
    std::function<zb_status(const uint8_t *stream, size_t len, void *values)> decompress;
};

// The absolute bound on the log magnitudes for a point-wise bound (0: store the chunk raw). max_abs_log is the
// largest |log2 |x|| of the chunk: the rounding of a log magnitude to the data type is taken off the bound.
double pwrel_log_bound(double pw_rel, double max_abs_log, bool f64);

// Compresses src (p.mode == ZB_MODE_PW_REL) into dst: a version-5 stream, or raw passthrough when that is not
// larger. On error msg says why.
zb_status pwrel_compress(const zb_params &p, zb_dtype dtype, const void *src, const Shape &shape, uint8_t *dst,
                         size_t cap, size_t *len, int nt, const PwRelInnerCodec &inner, std::string &msg);

// Decodes a version-5 stream whose header read_header validated.
zb_status pwrel_decompress(const Header &h, const uint8_t *stream, void *dst, int nt, const PwRelInnerCodec &inner,
                           std::string &msg);

}  // namespace zb
