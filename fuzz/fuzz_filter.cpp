// libFuzzer target: the HDF5 filter's parameter handling and its filter function, without libhdf5.
//
// The filter class comes from filter/ (zbound_h5z.cpp) with a stand-in H5Api table: H5allocate_memory/
// H5resize_memory/H5free_memory are malloc/realloc/free and H5Epush2 records the message, so the very code HDF5
// runs is fuzzed: zbound_cd_values_decode, the user-word and dataset-word parsers, the forward path (compress a
// chunk) and the reverse path (decompress a chunk, with the dataset checks and the big-endian swap).
//
// Input: byte 0 control, byte 1 word count, byte 2 shape selector, then 32-bit little-endian cd_values words,
// then the payload.
//   control bit 0 = 0: forward round trip. The first (byte1 % 7) words are user cd_values; the target completes
//     them into the 13 words set_local would write (dtype f32/f64 from bit 1, big-endian from bit 2, a fill value
//     equal to the first value from bit 3, chunk shape from byte 2 and the payload size), compresses the payload
//     as one chunk through the filter function, decompresses it through the filter function again and checks every
//     value: finite non-fill values within the stream's bound, NaN/Inf/-0.0/fill bit for bit, and the bound equal
//     to the one the mode defines (ABS: the user's; REL: user's * finite non-fill range).
//   control bit 0 = 1: reverse on arbitrary bytes. byte1 % 16 words of arbitrary cd_values, the payload is a
//     stream (its checksums recomputed when bit 1 is set). The filter must fail cleanly or return exactly the
//     stream's decoded size.
// On every failure the filter must push a "zbound: ..." message and return 0 with the caller's buffer untouched.
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include "fuzz_common.h"
#include "zbound.h"
#include "zbound_filter.h"
#include "zbound_h5z.h"

namespace {

thread_local std::string t_pushed;   // messages pushed since the last reset

herr_t fake_epush2(hid_t, const char *, const char *, unsigned, hid_t, hid_t, hid_t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char buf[2048];
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    t_pushed += buf;
    t_pushed += '\n';
    return 0;
}
void *fake_alloc(size_t n, hbool_t) { return std::malloc(n ? n : 1); }
void *fake_resize(void *p, size_t n) { return std::realloc(p, n ? n : 1); }
herr_t fake_free(void *p) {
    std::free(p);
    return 0;
}

const hid_t kIds[4] = {1, 2, 3, 4};

const zbound_h5::H5Api *lookup(const void *) {
    static const zbound_h5::H5Api api = [] {
        zbound_h5::H5Api a;
        a.Epush2 = fake_epush2;
        a.allocate_memory = fake_alloc;
        a.resize_memory = fake_resize;
        a.free_memory = fake_free;
        a.ERR_CLS = &kIds[0];
        a.PLINE = &kIds[1];
        a.CANTFILTER = &kIds[2];
        a.version[0] = 1;   // 1.x: messages stay on the (recorded) error stack, nothing printed
        a.version[1] = 14;
        a.origin = "fuzz";
        return a;
    }();
    return &api;
}

H5Z_func_t filter_fn() {
    static const H5Z_func_t f = zbound_h5::filter_class(lookup)->filter;
    return f;
}

uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

template <typename T> struct Bits;
template <> struct Bits<float> { using U = uint32_t; };
template <> struct Bits<double> { using U = uint64_t; };

template <typename T> typename Bits<T>::U bits_of(T v) {
    typename Bits<T>::U u;
    std::memcpy(&u, &v, sizeof u);
    return u;
}

template <typename U> U bswap(U v) {
    if constexpr (sizeof(U) == 4) return __builtin_bswap32(v);
    else return __builtin_bswap64(v);
}

// Values of a chunk buffer in host order (the buffer holds them in the dataset's order).
template <typename T> std::vector<T> host_values(const uint8_t *p, size_t n, bool big_endian) {
    using U = typename Bits<T>::U;
    std::vector<T> v(n);
    for (size_t i = 0; i < n; ++i) {
        U u;
        std::memcpy(&u, p + i * sizeof(T), sizeof(T));
        if (big_endian) u = bswap(u);
        std::memcpy(&v[i], &u, sizeof(T));
    }
    return v;
}

template <typename T>
void check_round_trip(const zb_params &p, const uint8_t *orig_bytes, const uint8_t *dec_bytes, size_t n,
                      bool big_endian, bool has_fill, uint64_t fill_bits, double eb) {
    const std::vector<T> a = host_values<T>(orig_bytes, n, big_endian), b = host_values<T>(dec_bytes, n, big_endian);
    using U = typename Bits<T>::U;
    const U fill = (U)fill_bits;
    bool any = false;
    double lo = 0, hi = 0;
    for (size_t i = 0; i < n; ++i) {
        const bool is_fill = has_fill && bits_of(a[i]) == fill;
        const bool pw = p.mode == ZB_MODE_PW_REL;  // |x - x'| <= bound * |x|: every zero exact
        const bool exact = !std::isfinite(a[i]) || is_fill || (a[i] == 0 && (pw || std::signbit(a[i])));
        if (exact) {
            ZBF_CHECK(bits_of(a[i]) == bits_of(b[i]));
        } else if (pw) {
            const long double x = a[i];
            ZBF_CHECK(std::fabs(x - (long double)b[i]) <= (long double)p.bound * std::fabs(x));
        } else {
            ZBF_CHECK(std::fabs((double)a[i] - (double)b[i]) <= eb);
        }
        if (std::isfinite(a[i]) && !is_fill) {
            const double d = (double)a[i];
            if (!any) lo = hi = d, any = true;
            lo = d < lo ? d : lo;
            hi = d > hi ? d : hi;
        }
    }
    if (p.mode == ZB_MODE_ABS) {
        ZBF_CHECK(eb == p.bound);
    } else if (p.mode == ZB_MODE_PW_REL) {
        ZBF_CHECK(eb >= 0 && std::isfinite(eb));  // the bound on the log magnitudes (or what a raw chunk records)
    } else {
        double expect = any ? p.bound * (hi - lo) : 0.0;
        if (!(expect > 0 && std::isfinite(expect))) expect = 0.0;
        ZBF_CHECK(eb == expect);
    }
}

// Calls the filter function on a malloc'd copy of `bytes`. Returns its result; `out` gets the buffer contents
// after a success. Checks the H5Z contract: on failure 0, a "zbound: " message, the buffer unchanged.
size_t call_filter(unsigned flags, const unsigned *cd, size_t ncd, const uint8_t *bytes, size_t nbytes,
                   std::vector<uint8_t> &out) {
    void *buf = std::malloc(nbytes ? nbytes : 1);
    if (nbytes) std::memcpy(buf, bytes, nbytes);
    void *const before = buf;
    size_t buf_size = nbytes ? nbytes : 1;
    t_pushed.clear();
    const size_t r = filter_fn()(flags, ncd, cd, nbytes, &buf_size, &buf);
    if (r == 0) {
        ZBF_CHECK(t_pushed.rfind("zbound: ", 0) == 0);
        ZBF_CHECK(buf == before && buf_size == (nbytes ? nbytes : 1));
        ZBF_CHECK(nbytes == 0 || std::memcmp(buf, bytes, nbytes) == 0);
    } else {
        ZBF_CHECK(r == buf_size);
        out.assign(static_cast<uint8_t *>(buf), static_cast<uint8_t *>(buf) + r);
    }
    std::free(buf);
    return r;
}

void forward(uint8_t ctl, uint8_t nword_sel, uint8_t shape_sel, const uint8_t *rest, size_t len) {
    const size_t n_user = nword_sel % 7;
    if (len < 4 * n_user) return;
    unsigned words[ZBOUND_CD_USER_WORDS] = {0};
    for (size_t i = 0; i < n_user; ++i) words[i] = rd32(rest + 4 * i);
    const uint8_t *payload = rest + 4 * n_user;
    size_t plen = len - 4 * n_user;

    // The public parser, and its inverse.
    zb_params p;
    const zb_status st = zbound_cd_values_decode(n_user ? words : nullptr, n_user, &p);
    if (st == ZB_OK) {
        ZBF_CHECK(std::isfinite(p.bound) && p.bound >= 0);
        unsigned re[ZBOUND_CD_USER_WORDS];
        ZBF_CHECK(zbound_cd_values_encode(&p, re) == ZBOUND_CD_USER_WORDS);
        for (size_t i = 0; i < n_user; ++i) ZBF_CHECK(re[i] == words[i]);
    } else {
        ZBF_CHECK(st == ZB_ERR_INVALID_ARG && zb_last_error()[0] != '\0');
        ZBF_CHECK(n_user >= 1);
    }

    // The 13 words set_local would write: the user's words, defaults for the rest, the dataset words.
    const bool f64 = ctl & 2, be = ctl & 4, has_fill = ctl & 8;
    const size_t es = f64 ? 8 : 4;
    size_t count = plen / es;
    if (count > (1u << 16)) count = 1u << 16;
    uint64_t nz = 1, ny = 1, nx = count ? count : 1;
    if (count > 0) {
        if (shape_sel & 0x80) {
            const uint64_t x = 1 + (shape_sel & 7), y = 1 + ((shape_sel >> 3) & 7);
            if (count >= x * y) nx = x, ny = y, nz = count / (x * y);
        } else {
            const uint64_t x = 1 + shape_sel % (count < 97 ? count : 97);
            nx = x, ny = count / x;
        }
        count = nz * ny * nx;
    }
    plen = count * es;
    unsigned cd[ZBOUND_CD_MAX_WORDS];
    const zb_params defaults = zb_params_default();
    ZBF_CHECK(zbound_cd_values_encode(&defaults, cd) == ZBOUND_CD_USER_WORDS);
    for (size_t i = 0; i < n_user; ++i) cd[i] = words[i];
    uint64_t fill_bits = 0;
    if (has_fill && count > 0) {
        if (f64) {
            fill_bits = bits_of(host_values<double>(payload, 1, be)[0]);
        } else {
            fill_bits = bits_of(host_values<float>(payload, 1, be)[0]);
        }
    }
    cd[6] = (f64 ? 2u : 1u) | (be ? 0x100u : 0u);
    cd[7] = has_fill ? 1 : 0;
    cd[8] = (unsigned)(fill_bits >> 32);
    cd[9] = (unsigned)fill_bits;
    cd[10] = (unsigned)nz;
    cd[11] = (unsigned)ny;
    cd[12] = (unsigned)nx;
    zb_params p13;
    const zb_status st13 = zbound_cd_values_decode(cd, ZBOUND_CD_MAX_WORDS, &p13);
    if (n_user != 3) ZBF_CHECK((st13 == ZB_OK) == (st == ZB_OK));
    if (st13 == ZB_OK) {
        ZBF_CHECK(p13.has_fill == (has_fill ? 1 : 0) && p13.fill_bits == (has_fill ? fill_bits : 0));
        if (st == ZB_OK) {
            ZBF_CHECK(p13.mode == p.mode && p13.predictor == p.predictor && p13.encoder == p.encoder);
            ZBF_CHECK(std::memcmp(&p13.bound, &p.bound, sizeof p.bound) == 0);
        }
    }

    std::vector<uint8_t> stream;
    const size_t r = call_filter(0, cd, ZBOUND_CD_MAX_WORDS, payload, plen, stream);
    // The filter compresses exactly when the codec accepts the parameters (whatever this build can write: abs/rel,
    // every mode, predictor and encoder now) and the chunk is not empty.
    bool writable = st13 == ZB_OK && count > 0;
    if (writable) {
        zb_params q = p13;
        q.backend = ZB_BACKEND_CPU;
        q.threads = 1;
        const double one = 1.0;
        const float onef = 1.0f;
        uint8_t tmp[512];
        size_t tl = 0, dim = 1;
        writable = zb_compress(&q, f64 ? ZB_F64 : ZB_F32, f64 ? (const void *)&one : (const void *)&onef, 1, &dim, tmp,
                               sizeof tmp, &tl, nullptr) == ZB_OK;
    }
    ZBF_CHECK((r != 0) == writable);
    if (!r) return;
    zb_stream_info info;
    ZBF_CHECK(zb_stream_info_get(stream.data(), stream.size(), &info) == ZB_OK);
    ZBF_CHECK(info.stream_bytes == stream.size());
    ZBF_CHECK(info.n == count && info.dtype == (f64 ? ZB_F64 : ZB_F32));
    std::vector<uint8_t> back;
    ZBF_CHECK(call_filter(H5Z_FLAG_REVERSE, cd, ZBOUND_CD_MAX_WORDS, stream.data(), stream.size(), back) == plen);
    if (f64)
        check_round_trip<double>(p13, payload, back.data(), count, be, has_fill, fill_bits, info.abs_bound);
    else
        check_round_trip<float>(p13, payload, back.data(), count, be, has_fill, fill_bits, info.abs_bound);
}

void reverse(uint8_t ctl, uint8_t nword_sel, const uint8_t *rest, size_t len) {
    const size_t ncd = nword_sel % 16;
    if (len < 4 * ncd) return;
    unsigned cd[16] = {0};
    for (size_t i = 0; i < ncd; ++i) cd[i] = rd32(rest + 4 * i);
    std::vector<uint8_t> s(rest + 4 * ncd, rest + len);
    if (ctl & 2) zbfuzz::fix_checksums(s.data(), s.size());

    zb_params p;   // the parser must cope with whatever words a file holds
    const zb_status st = zbound_cd_values_decode(ncd ? cd : nullptr, ncd, &p);
    ZBF_CHECK(st == ZB_OK || st == ZB_ERR_INVALID_ARG);
    if (ncd > ZBOUND_CD_MAX_WORDS) ZBF_CHECK(st == ZB_ERR_INVALID_ARG);

    zb_stream_info info;
    const zb_status hs = zb_stream_info_get(s.data(), s.size(), &info);
    if (hs == ZB_OK && info.decompressed_bytes > (64u << 20)) return;   // within the RSS limit
    std::vector<uint8_t> out;
    const size_t r = call_filter(H5Z_FLAG_REVERSE, cd, ncd, s.data(), s.size(), out);
    if (hs != ZB_OK) {
        ZBF_CHECK(r == 0);
        return;
    }
    if (r) ZBF_CHECK(r == info.decompressed_bytes);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    setenv("ZBOUND_THREADS", "1", 1);
    setenv("ZBOUND_BACKEND", "cpu", 1);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3) return 0;
    if (data[0] & 1)
        reverse(data[0], data[1], data + 3, size - 3);
    else
        forward(data[0], data[1], data[2], data + 3, size - 3);
    return 0;
}
