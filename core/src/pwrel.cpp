// The point-wise relative mode (format v5, docs/FORMAT.md section 12): log transform, inner stream, sign bits and
// the exactly stored values, on the CPU. This is the reference: the CUDA backend (cuda/pwrel_gpu.cu) writes the same
// bytes with the transform and the check on the device; the API uses it when it chooses the GPU.
#include "zb_pwrel.h"
#include <cmath>
#include <cstring>
#include <vector>
#include "zb_bytes.h"
#include "zb_cpu.h"
#include "zb_crc32c.h"
#include "zb_exceptions.h"
#include "zb_log2.h"

namespace zb {
namespace {

// Log magnitudes at values stored exactly are a free choice of the writer: the last regular one before them in a
// block of this many values (the first one of the block before it), so that the inner predictor sees no jump.
constexpr uint64_t kFillForwardBlock = 4096;

constexpr size_t kInnerOffset = kPwRelInnerOffset;

zb_status corrupt(std::string &msg, const std::string &why) {
    msg = "corrupt stream: " + why;
    return ZB_ERR_CORRUPT;
}

// Zero, non-finite and fill values have no log magnitude: they are stored exactly.
template <typename T> bool is_special(T v, const zb_params &p) {
    return !is_finite_value(v) || v == (T)0 || (p.has_fill && bits_of(v) == (typename FloatBits<T>::U)p.fill_bits);
}

// y[i] = log2 |x[i]| rounded to T, sign bits of the other values (0 for special ones) packed LSB first; returns the
// largest |y|.
template <typename T>
double log_magnitudes(const T *x, uint64_t n, const zb_params &p, T *y, uint8_t *signs, int nt) {
    const int64_t nblocks = (int64_t)div_up(n, kFillForwardBlock);
    double max_abs = 0;
#pragma omp parallel for num_threads(nt) schedule(static) reduction(max : max_abs)
    for (int64_t b = 0; b < nblocks; ++b) {
        const uint64_t lo = (uint64_t)b * kFillForwardBlock, hi = std::min(n, lo + kFillForwardBlock);
        T last = 0;
        for (uint64_t i = lo; i < hi; ++i)
            if (!is_special(x[i], p)) {
                last = (T)det_log2(std::fabs((double)x[i]));
                break;
            }
        for (uint64_t i = lo; i < hi; ++i) {
            if (!is_special(x[i], p)) last = (T)det_log2(std::fabs((double)x[i]));
            y[i] = last;
            max_abs = std::max(max_abs, std::fabs((double)last));
        }
    }
    const int64_t nbytes = (int64_t)div_up(n, 8);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t k = 0; k < nbytes; ++k) {
        uint8_t byte = 0;
        for (int j = 0; j < 8; ++j) {
            const uint64_t i = (uint64_t)k * 8 + j;
            if (i < n && !is_special(x[i], p) && sign_bit(x[i])) byte |= (uint8_t)(1u << j);
        }
        signs[k] = byte;
    }
    return max_abs;
}

bool sign_of(const uint8_t *signs, uint64_t i) { return (signs[i >> 3] >> (i & 7)) & 1; }

// |x - r| <= pw |x| decided exactly, not as rounded double arithmetic would: near the bound (and for subnormal x,
// where pw |x| rounds to the subnormal grid) a rounded product can accept a value that misses the bound. Tiny
// values are scaled by 2^256 (exact) so that nothing below underflows; the difference must be exact (checked with
// TwoSum; when it is not, the value is stored exactly); the sign of fma(pw, |x|, -|x - r|), one rounding of the
// exact value, is the sign of the exact value.
bool within_pw(double x, double r, double pw) {
    if (!std::isfinite(r)) return false;
    if (std::fabs(x) < 0x1p-800) {
        x *= 0x1p256;
        r *= 0x1p256;
    }
    const double d = x - r, xb = d + r;  // TwoSum of x and -r: d + e == x - r exactly
    const double e = (x - xb) + (-r - (d - xb));
    if (e != 0) return false;
    return std::fma(pw, std::fabs(x), -std::fabs(d)) >= 0;
}

template <typename T>
zb_status compress_t(const zb_params &p, const T *x, const Shape &shape, uint8_t *dst, size_t cap, size_t *len,
                     int nt, const PwRelInnerCodec &inner, std::string &msg) {
    const uint64_t n = shape.n;
    Header h;
    h.version = kFormatVersionV5;
    h.dtype = sizeof(T) == 8 ? ZB_F64 : ZB_F32;
    h.shape = shape;
    h.mode = ZB_MODE_PW_REL;
    h.bound = p.bound;
    auto store_raw = [&]() -> zb_status {
        const size_t need = raw_stream_bytes(h.dtype, n);
        if (cap < need) {
            msg = "output buffer too small: " + std::to_string(need) + " bytes needed";
            return ZB_ERR_BUFFER_TOO_SMALL;
        }
        *len = write_raw_stream(h, x, dst, nt);
        return ZB_OK;
    };

    std::vector<T> y((size_t)n);
    std::vector<uint8_t> signs((size_t)div_up(n, 8));
    const double max_abs_log = log_magnitudes(x, n, p, y.data(), signs.data(), nt);
    h.eb = pwrel_log_bound(p.bound, max_abs_log, sizeof(T) == 8);
    if (!(h.eb > 0) || cap <= kInnerOffset) return store_raw();

    // The inner stream goes straight to its place in dst.
    zb_params ip = p;
    ip.mode = ZB_MODE_ABS;
    ip.bound = h.eb;
    ip.has_fill = 0;
    ip.fill_bits = 0;
    size_t inner_len = 0;
    uint8_t *inner_at = dst + kInnerOffset;
    zb_status st = inner.compress(ip, y.data(), inner_at, cap - kInnerOffset, &inner_len);
    if (st == ZB_ERR_BUFFER_TOO_SMALL) return store_raw();  // the whole stream would not fit either
    if (st) {
        msg = zb_last_error();
        return st;
    }
    Header ih;
    std::string why;
    if (read_header(inner_at, inner_len, ih, why, false) != ZB_OK) {
        msg = "internal error: the inner stream does not parse: " + why;
        return ZB_ERR_INTERNAL;
    }
    h.predictor = ih.predictor;
    h.encoder = ih.encoder;

    // What a decoder will reconstruct, checked value by value; misses are stored exactly.
    if ((st = inner.decompress(inner_at, inner_len, y.data()))) {
        msg = zb_last_error();
        return st;
    }
    std::vector<uint8_t> exc((size_t)n);
    const double pw = p.bound;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t i = 0; i < (int64_t)n; ++i) {
        const double r = (double)pwrel_value<T>(y[(size_t)i], sign_of(signs.data(), (uint64_t)i));
        exc[(size_t)i] = is_special(x[i], p) || !within_pw((double)x[i], r, pw);
    }
    ExceptionStreams<T> ex;
    encode_exceptions(x, exc.data(), n, ex, nt);
    std::vector<uint8_t> sign_flags((size_t)sparse_flag_bytes(signs.size()));
    std::string sign_blocks;
    sparse_encode(signs.data(), signs.size(), sign_flags.data(), sign_blocks);

    h.exceptions = ex.count;
    h.runs = ex.run_values.size();
    uint64_t lengths[kPwRelSegmentCount] = {kPwRelParamBytes, inner_len, sign_flags.size(), sign_blocks.size()};
    for (int i = 0; i < kExceptionSegmentCount; ++i) lengths[kPwSegExceptions + i] = ex.segment_length(i);
    v2_layout(h, lengths, kPwRelSegmentCount);
    bool raw_written = false;
    if ((st = raw_or_fits(h, x, dst, cap, len, raw_written, nt, msg))) return st;
    if (raw_written) return ZB_OK;
    uint8_t *payload = dst + h.header_bytes();
    put_u32(payload, kPwRelTransformLog2);
    put_u32(payload + 4, 0);
    auto place = [&](int seg, const void *data) {
        if (h.seg[seg].length) std::memcpy(payload + h.seg[seg].offset, data, (size_t)h.seg[seg].length);
    };
    place(kPwSegSignFlags, sign_flags.data());
    place(kPwSegSignBlocks, sign_blocks.data());
    for (int i = 0; i < kExceptionSegmentCount; ++i) place(kPwSegExceptions + i, ex.segment_data(i));
    h.payload_crc = payload_checksum(payload, (size_t)h.payload_bytes(), nt);
    write_header(h, dst);
    *len = h.header_bytes() + (size_t)h.payload_bytes();
    return ZB_OK;
}

template <typename T>
zb_status decompress_t(const Header &h, const uint8_t *stream, T *out, int nt, const PwRelInnerCodec &inner,
                       std::string &msg) {
    const uint64_t n = h.shape.n;
    const uint8_t *payload = stream + h.header_bytes();
    auto span = [&](int i) { return ByteSpan{payload + h.seg[i].offset, h.seg[i].length}; };
    const ByteSpan params = span(kPwSegParams), in = span(kPwSegInner);
    if (get_u32(params.data) != kPwRelTransformLog2 || get_u32(params.data + 4) != 0)
        return corrupt(msg, "unknown point-wise transform");
    Header ih;
    std::string why;
    if (read_header(in.data, (size_t)in.size, ih, why, false) != ZB_OK) return corrupt(msg, "inner stream: " + why);
    bool same_shape = ih.shape.rank == h.shape.rank && ih.shape.n == n;
    for (int i = 0; i < 3; ++i) same_shape = same_shape && ih.shape.dims[i] == h.shape.dims[i];
    if (ih.version == kFormatVersionV5 || ih.mode != ZB_MODE_ABS || ih.dtype != h.dtype || !same_shape ||
        ih.predictor != h.predictor || ih.encoder != h.encoder ||
        ih.header_bytes() + ih.payload_bytes() != in.size)
        return corrupt(msg, "the inner stream does not match its container");

    std::vector<uint8_t> signs((size_t)div_up(n, 8));
    const ByteSpan sf = span(kPwSegSignFlags), sb = span(kPwSegSignBlocks);
    if (!sparse_decode(sf.data, sb.data, sb.size / kBlockBytes, signs.size(), signs.data()))
        return corrupt(msg, "sign bits do not match their flags");
    if (n % 8 && (signs.back() >> (n % 8))) return corrupt(msg, "sign bits past the end");

    if (zb_status st = inner.decompress(in.data, (size_t)in.size, out)) {
        msg = zb_last_error();
        return st;
    }
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t i = 0; i < (int64_t)n; ++i) out[i] = pwrel_value<T>(out[i], sign_of(signs.data(), (uint64_t)i));
    if (h.exceptions) {
        ByteSpan ex[kExceptionSegmentCount];
        for (int i = 0; i < kExceptionSegmentCount; ++i) ex[i] = span(kPwSegExceptions + i);
        if (!decode_exceptions(ex, n, h.exceptions, h.runs, out, nullptr, msg, nt)) return ZB_ERR_CORRUPT;
    }
    return ZB_OK;
}

}  // namespace

double pwrel_log_bound(double pw_rel, double max_abs_log, bool f64) {
    if (!(pw_rel > 0)) return 0.0;
    // log2(1 + pw) bounds the error on both sides: 2^-e >= 1 - pw whenever 2^e <= 1 + pw. A small relative margin
    // covers the roundings of 1 + pw and of the log itself; then the rounding of a log magnitude to the data type
    // (half an ulp at the largest one) and the rounding of the reconstructed value (2^-24 or 2^-53 relative, under
    // 2^-23 or 2^-52 in log2 units) are taken off.
    const int mantissa = f64 ? 52 : 23;
    int e = 0;
    std::frexp(max_abs_log, &e);  // max_abs_log < 2^e
    const double half_ulp = std::ldexp(1.0, e - mantissa - 2);
    const double eb = det_log2(1.0 + pw_rel) * (1.0 - 1.0 / 4096) - half_ulp - std::ldexp(1.0, -mantissa);
    return eb > 0 && std::isfinite(eb) ? eb : 0.0;
}

zb_status pwrel_compress(const zb_params &p, zb_dtype dtype, const void *src, const Shape &shape, uint8_t *dst,
                         size_t cap, size_t *len, int nt, const PwRelInnerCodec &inner, std::string &msg) {
    if (dtype == ZB_F64)
        return compress_t(p, static_cast<const double *>(src), shape, dst, cap, len, nt, inner, msg);
    return compress_t(p, static_cast<const float *>(src), shape, dst, cap, len, nt, inner, msg);
}

zb_status pwrel_decompress(const Header &h, const uint8_t *stream, void *dst, int nt, const PwRelInnerCodec &inner,
                           std::string &msg) {
    if (h.dtype == ZB_F64) return decompress_t(h, stream, static_cast<double *>(dst), nt, inner, msg);
    return decompress_t(h, stream, static_cast<float *>(dst), nt, inner, msg);
}

}  // namespace zb
