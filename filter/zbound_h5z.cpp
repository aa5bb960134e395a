// The H5Z callbacks of zbound: can_apply, set_local and the filter function. Every HDF5 call goes through the
// H5Api table of the library that called us (zbound_h5z.h); every failure returns the HDF5 failure value and
// pushes a message on that library's error stack. No exception leaves a callback.
#include "zbound_h5z.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>
#include "zbound_cd_internal.h"
#include "zbound_filter.h"
#include "zbound_stats.h"
#include "zb_cpu.h"

namespace zbound_h5 {

namespace {

std::atomic<ApiLookup> g_lookup{nullptr};

// Reports why nothing can be pushed: the HDF5 library could not be found. Once per process, on stderr, because
// there is no other channel left.
void report_no_api() {
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
        std::fprintf(stderr,
                     "zbound HDF5 filter: cannot find the HDF5 library (1.10 or newer) that called the filter in "
                     "this process; set ZBOUND_HDF5_LIBRARY to its path (for h5py: the libhdf5 under h5py.libs)\n");
}

const H5Api *api_for(const void *caller) {
    const ApiLookup lookup = g_lookup.load(std::memory_order_acquire);
    const H5Api *api = lookup ? lookup(caller) : nullptr;
    if (!api) report_no_api();
    return api;
}

enum class Minor { Filter, BadType, BadValue, NoSpace, CantInit };

// Set while the filter function (not can_apply/set_local) runs on this thread.
thread_local bool t_in_filter_function = false;

// HDF5 2.x saves the error stack before it calls a filter function and restores it afterwards, so what the filter
// pushes there never reaches the application (HDFGroup/hdf5 issue #6194). For those versions the message is also
// written to stderr, at most kMaxPrinted times per process, so that a failed read still says why.
void print_lost_message(const H5Api &api, const std::string &msg) {
    constexpr int kMaxPrinted = 20;
    static std::atomic<int> printed{0};
    const int k = printed.fetch_add(1);
    if (k < kMaxPrinted)
        std::fprintf(stderr, "zbound: %s\n", msg.c_str());
    else if (k == kMaxPrinted)
        std::fprintf(stderr, "zbound: further filter errors are not printed (HDF5 %u.%u.%u drops filter messages "
                             "from its error stack)\n", api.version[0], api.version[1], api.version[2]);
}

void push(const H5Api &api, const char *func, unsigned line, Minor m, const std::string &msg,
          bool expected = false) {
    const hid_t *minor = api.CANTFILTER;
    switch (m) {
        case Minor::BadType: if (api.BADTYPE) minor = api.BADTYPE; break;
        case Minor::BadValue: if (api.BADVALUE) minor = api.BADVALUE; break;
        case Minor::NoSpace: if (api.NOSPACE) minor = api.NOSPACE; break;
        case Minor::CantInit: if (api.CANTINIT) minor = api.CANTINIT; break;
        case Minor::Filter: break;
    }
    // The message goes through "%s": it may hold '%' (it quotes user values).
    api.Epush2(H5E_DEFAULT, __FILE__, func, line, *api.ERR_CLS, *api.PLINE, *minor, "%s", ("zbound: " + msg).c_str());
    if (t_in_filter_function && api.version[0] >= 2 && !expected) print_lost_message(api, msg);
}

#define ZB_PUSH(api, minor, msg) push((api), __func__, __LINE__, (minor), (msg))
// A failure HDF5 expects and handles (an optional filter declining a chunk): never printed.
#define ZB_PUSH_EXPECTED(api, minor, msg) push((api), __func__, __LINE__, (minor), (msg), true)

std::string status_text(zb_status s) {
    const char *detail = zb_last_error();
    std::string t = zb_status_string(s);
    if (detail && *detail) t += std::string(": ") + detail;
    return t;
}

// ---- datatype checks ----

struct TypeInfo {
    bool ok = false;       // IEEE-754 binary32/binary64 in LE or BE order
    zb_dtype dtype = ZB_F32;
    bool big_endian = false;
    std::string why;       // when !ok
};

TypeInfo inspect_type(const H5Api &api, hid_t type_id) {
    TypeInfo t;
    const H5T_class_t cls = api.Tget_class(type_id);
    if (cls == H5T_NO_CLASS) {
        t.why = "cannot read the dataset's datatype";
        return t;
    }
    const size_t size = api.Tget_size(type_id);
    if (cls != H5T_FLOAT) {
        static const char *names[] = {"integer", "float", "time", "string", "bitfield", "opaque",
                                      "compound", "reference", "enum", "variable-length", "array"};
        const char *name = (cls >= 0 && cls < (int)(sizeof names / sizeof names[0])) ? names[cls] : "non-float";
        t.why = std::string("the dataset's datatype is ") + name + " (" + std::to_string(size) +
                " bytes); zbound compresses only 32- and 64-bit IEEE-754 floats";
        return t;
    }
    if (size != 4 && size != 8) {
        t.why = "the dataset's datatype is a " + std::to_string(size * 8) +
                "-bit float; zbound compresses only 32- and 64-bit IEEE-754 floats";
        return t;
    }
    // A float class of the right size can still be a custom layout (H5Tset_fields / precision / ebias).
    size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
    const bool f64 = size == 8;
    const bool layout_ok = api.Tget_fields(type_id, &spos, &epos, &esize, &mpos, &msize) >= 0 &&
                           api.Tget_precision(type_id) == size * 8 && api.Tget_offset(type_id) == 0 &&
                           spos == size * 8 - 1 && epos == (f64 ? 52u : 23u) && esize == (f64 ? 11u : 8u) &&
                           mpos == 0 && msize == (f64 ? 52u : 23u) &&
                           api.Tget_ebias(type_id) == (f64 ? 1023u : 127u) && api.Tget_norm(type_id) == H5T_NORM_IMPLIED;
    if (!layout_ok) {
        t.why = "the dataset's " + std::to_string(size * 8) +
                "-bit float type does not have the IEEE-754 layout (custom precision, offset, fields, bias or "
                "normalization); zbound compresses only standard IEEE-754 floats";
        return t;
    }
    const H5T_order_t order = api.Tget_order(type_id);
    if (order != H5T_ORDER_LE && order != H5T_ORDER_BE) {
        t.why = "the dataset's float type has byte order " + std::to_string((int)order) +
                "; zbound takes little- or big-endian floats";
        return t;
    }
    t.ok = true;
    t.dtype = f64 ? ZB_F64 : ZB_F32;
    t.big_endian = order == H5T_ORDER_BE;
    return t;
}

constexpr bool kHostBigEndian = __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__;

void swap_values(void *data, size_t n, size_t esize) {
    uint8_t *p = static_cast<uint8_t *>(data);
    if (esize == 4) {
        for (size_t i = 0; i < n; ++i, p += 4) {
            uint32_t v;
            std::memcpy(&v, p, 4);
            v = __builtin_bswap32(v);
            std::memcpy(p, &v, 4);
        }
    } else {
        for (size_t i = 0; i < n; ++i, p += 8) {
            uint64_t v;
            std::memcpy(&v, p, 8);
            v = __builtin_bswap64(v);
            std::memcpy(p, &v, 8);
        }
    }
}

// ---- cd_values of a dcpl ----

constexpr size_t kCdBuffer = 64;   // more than any valid zbound cd_values

// Reads the filter's flags and cd_values from a dcpl. False (with a message pushed) on failure.
bool get_cd_values(const H5Api &api, hid_t dcpl_id, unsigned &flags, unsigned *cd, size_t &n) {
    n = kCdBuffer;
    flags = 0;
    if (api.Pget_filter_by_id2(dcpl_id, ZBOUND_H5Z_FILTER, &flags, &n, cd, 0, nullptr, nullptr) < 0) {
        ZB_PUSH(api, Minor::CantInit, "cannot read the filter's cd_values from the dataset creation property list");
        return false;
    }
    return true;
}

// Validates the user words; pushes a message and returns false when they are bad.
bool check_user_words(const H5Api &api, const unsigned *cd, size_t n, zb_params &p) {
    std::string why;
    if (n > ZBOUND_CD_MAX_WORDS) {
        ZB_PUSH(api, Minor::BadValue,
                "invalid cd_values: " + std::to_string(n) + " words; zbound takes at most " +
                    std::to_string(ZBOUND_CD_MAX_WORDS) + " (see zbound_filter.h or `zbound cdvalues`)");
        return false;
    }
    const size_t user = n < ZBOUND_CD_USER_WORDS ? n : ZBOUND_CD_USER_WORDS;
    if (!zbound_cd::decode_user(cd, user, p, why)) {
        ZB_PUSH(api, Minor::BadValue, "invalid cd_values: " + why + " (see zbound_filter.h or `zbound cdvalues`)");
        return false;
    }
    return true;
}

// ---- callbacks ----

htri_t can_apply(hid_t dcpl_id, hid_t type_id, hid_t space_id) {
    const H5Api *api = api_for(__builtin_return_address(0));
    if (!api) return -1;
    (void)space_id;
    try {
        unsigned flags = 0, cd[kCdBuffer];
        size_t n = 0;
        if (!get_cd_values(*api, dcpl_id, flags, cd, n)) return -1;
        zb_params p;
        if (!check_user_words(*api, cd, n, p)) return -1;   // bad parameters fail even an optional filter
        const TypeInfo t = inspect_type(*api, type_id);
        if (!t.ok) {
            ZB_PUSH(*api, Minor::BadType, "cannot apply the filter: " + t.why);
            return 0;
        }
        return 1;
    } catch (...) {
        ZB_PUSH(*api, Minor::NoSpace, "can_apply: out of memory");
        return -1;
    }
}

herr_t set_local(hid_t dcpl_id, hid_t type_id, hid_t space_id) {
    const H5Api *api = api_for(__builtin_return_address(0));
    if (!api) return -1;
    try {
        unsigned flags = 0, cd[kCdBuffer];
        size_t n = 0;
        if (!get_cd_values(*api, dcpl_id, flags, cd, n)) return -1;
        zb_params p;
        if (!check_user_words(*api, cd, n, p)) return -1;

        unsigned out[ZBOUND_CD_MAX_WORDS] = {0};
        std::string why;
        if (!zbound_cd::encode_user(p, out, why)) {   // keeps the user's words, writes defaults for the rest
            ZB_PUSH(*api, Minor::BadValue, "invalid cd_values: " + why);
            return -1;
        }
        for (size_t i = 0; i < n && i < ZBOUND_CD_USER_WORDS; ++i) out[i] = cd[i];

        zbound_cd::DatasetWords d;
        const TypeInfo t = inspect_type(*api, type_id);
        if (!t.ok) {
            if (!(flags & H5Z_FLAG_OPTIONAL)) {
                ZB_PUSH(*api, Minor::BadType, "cannot apply the filter: " + t.why);
                return -1;
            }
            d.applicable = false;   // optional: decline every chunk, HDF5 stores them unfiltered
        } else {
            d.applicable = true;
            d.dtype = t.dtype;
            d.big_endian = t.big_endian;
        }

        // Chunk shape: from the dcpl (what the filter will see), else from the chunk dataspace HDF5 passes.
        hsize_t dims[H5S_MAX_RANK];
        int rank = api->Pget_chunk(dcpl_id, H5S_MAX_RANK, dims);
        if (rank <= 0) rank = api->Sget_simple_extent_dims(space_id, dims, nullptr);
        if (rank < 0) {
            ZB_PUSH(*api, Minor::CantInit, "cannot read the chunk shape");
            return -1;
        }
        uint64_t dims64[H5S_MAX_RANK];
        for (int i = 0; i < rank; ++i) dims64[i] = dims[i];
        if (!zbound_cd::fold_chunk(rank, dims64, d.dims, why)) {
            ZB_PUSH(*api, Minor::BadValue, "unsupported chunk shape: " + why);
            return -1;
        }

        // The fill value, only when the user defined one (netCDF-4 always does). Read in the dataset's type,
        // then brought to host order.
        if (d.applicable) {
            H5D_fill_value_t st = H5D_FILL_VALUE_UNDEFINED;
            if (api->Pfill_value_defined(dcpl_id, &st) < 0) {
                ZB_PUSH(*api, Minor::CantInit, "cannot tell whether the dataset has a fill value");
                return -1;
            }
            if (st == H5D_FILL_VALUE_USER_DEFINED) {
                unsigned char buf[8] = {0};
                if (api->Pget_fill_value(dcpl_id, type_id, buf) < 0) {
                    ZB_PUSH(*api, Minor::CantInit, "cannot read the dataset's fill value");
                    return -1;
                }
                const size_t es = d.value_bytes();
                if (d.big_endian != kHostBigEndian) swap_values(buf, 1, es);
                uint64_t bits = 0;
                if (es == 4) {
                    uint32_t b32;
                    std::memcpy(&b32, buf, 4);
                    bits = b32;
                } else {
                    std::memcpy(&bits, buf, 8);
                }
                d.has_fill = true;
                d.fill_bits = bits;
            }

            // Let the codec judge the parameters now (one value on the CPU): a mode or stage this build cannot
            // write must fail dataset creation, not every later chunk write (which HDF5 would hide for an
            // optional filter by storing the chunk unfiltered).
            zb_params trial = p;
            trial.backend = ZB_BACKEND_CPU;
            trial.threads = 1;
            trial.has_fill = d.has_fill ? 1 : 0;
            trial.fill_bits = d.fill_bits;
            const double one = 1.0;
            const float onef = 1.0f;
            const void *src = d.dtype == ZB_F64 ? (const void *)&one : (const void *)&onef;
            const size_t cap = zb_compress_bound(d.dtype, 1);
            std::vector<unsigned char> scratch(cap ? cap : 1);
            size_t len = 0;
            const size_t one_dim = 1;
            const zb_status s = zb_compress(&trial, d.dtype, src, 1, &one_dim, scratch.data(), scratch.size(), &len,
                                            nullptr);
            if (s != ZB_OK) {
                ZB_PUSH(*api, Minor::BadValue,
                        "the parameters (" + zbound_cd::describe(p) + ") are refused: " + status_text(s));
                return -1;
            }
        }

        zbound_cd::encode_dataset(d, out);
        if (api->Pmodify_filter(dcpl_id, ZBOUND_H5Z_FILTER, flags, ZBOUND_CD_MAX_WORDS, out) < 0) {
            ZB_PUSH(*api, Minor::CantInit, "cannot store the filter's cd_values in the dataset creation property list");
            return -1;
        }
        return 0;
    } catch (...) {
        ZB_PUSH(*api, Minor::NoSpace, "set_local: out of memory");
        return -1;
    }
}

// What a chunk's callback did, for ZBOUND_STATS.
struct ChunkOutcome {
    zb_run_stats run{};      // the codec's report (backend_used)
    bool declined = false;   // an optional filter declined the chunk: not a failure
};

// Chunks whose compression bound is at most this compress into a buffer that the calling thread keeps (64 MiB at
// most per thread that writes through the filter); larger ones into one of the bound's size.
constexpr size_t kScratchMaxBytes = size_t(64) << 20;

// The calling thread's compression scratch, grown to `bytes`, or nullptr above kScratchMaxBytes (or where it cannot
// be had). Why: the stream's length is known only once it is written, and a buffer of the bound's size (a little
// over the chunk) is, from 128 KiB on, a fresh mapping from glibc for each chunk (its mmap threshold follows the
// largest block freed, the chunk itself, which the bound exceeds), every 4 KiB page of it faulted in as the stream
// is written. In the scratch the pages stay; the stream is then copied into a buffer of exactly its length, which
// glibc serves from its heap (NOTES 105).
uint8_t *compress_scratch(size_t bytes) {
    if (bytes > kScratchMaxBytes) return nullptr;
    thread_local std::unique_ptr<uint8_t[]> buf;
    thread_local size_t have = 0;
    if (bytes > have) {
        buf.reset(new (std::nothrow) uint8_t[bytes]);
        have = buf ? bytes : 0;
    }
    return buf.get();
}

// Compression: returns the stream length, or 0 with a message pushed.
size_t encode_chunk(const H5Api &api, size_t cd_n, const unsigned *cd, size_t nbytes, size_t *buf_size, void **buf,
                    ChunkOutcome &outcome) {
    zb_params p;
    std::string why;
    if (!check_user_words(api, cd, cd_n, p)) return 0;
    zbound_cd::DatasetWords d;
    if (!zbound_cd::decode_dataset(cd, cd_n, d, why)) {
        ZB_PUSH(api, Minor::BadValue, "cannot compress: " + why);
        return 0;
    }
    if (!d.applicable) {
        outcome.declined = true;
        ZB_PUSH_EXPECTED(api, Minor::BadType, "declining a chunk of a dataset that is not float (optional filter)");
        return 0;
    }
    p.has_fill = d.has_fill ? 1 : 0;
    p.fill_bits = d.fill_bits;
    const size_t es = d.value_bytes();
    const uint64_t n = d.values();
    if (nbytes == 0 || nbytes != n * es) {
        ZB_PUSH(api, Minor::BadValue,
                "cannot compress: the chunk holds " + std::to_string(nbytes) + " bytes but the chunk shape " +
                    std::to_string(d.dims[0]) + "x" + std::to_string(d.dims[1]) + "x" + std::to_string(d.dims[2]) +
                    " recorded at dataset creation needs " + std::to_string(n * es));
        return 0;
    }

    const void *src = *buf;
    std::vector<unsigned char> swapped;
    if (d.big_endian != kHostBigEndian) {
        swapped.assign(static_cast<const unsigned char *>(*buf), static_cast<const unsigned char *>(*buf) + nbytes);
        swap_values(swapped.data(), (size_t)n, es);
        src = swapped.data();
    }

    const size_t cap = zb_compress_bound(d.dtype, (size_t)n);
    const size_t shape[3] = {(size_t)d.dims[0], (size_t)d.dims[1], (size_t)d.dims[2]};
    size_t len = 0;
    // Into this thread's scratch, then a buffer of exactly the stream's length; else into one of the bound's size.
    uint8_t *scratch = compress_scratch(cap);
    void *out = scratch ? nullptr : api.allocate_memory(cap, false);
    auto no_space = [&](size_t bytes) {
        ZB_PUSH(api, Minor::NoSpace, "cannot allocate " + std::to_string(bytes) + " bytes for the compressed chunk");
        return (size_t)0;
    };
    if (!scratch && !out) return no_space(cap);
    const zb_status s = zb_compress(&p, d.dtype, src, 3, shape, scratch ? scratch : out, cap, &len, &outcome.run);
    if (s != ZB_OK) {
        if (out) api.free_memory(out);
        ZB_PUSH(api, Minor::Filter, "compression failed (" + zbound_cd::describe(p) + "): " + status_text(s));
        return 0;
    }
    if (scratch) {
        out = api.allocate_memory(len, false);
        if (!out) return no_space(len);
        // On the team of the call's own regions (zb_cpu.h, team_threads: a different count restarts threads).
        const int team = outcome.run.backend_used == ZB_BACKEND_GPU ? zb::staging_team()
                                                                     : zb::resolve_threads(p.threads, n);
        zb::parallel_copy(out, scratch, len, team);
    } else if (len < cap) {   // give back what the stream does not use
        if (void *shrunk = api.resize_memory(out, len)) out = shrunk;
    }
    api.free_memory(*buf);
    *buf = out;
    *buf_size = len;
    return len;
}

// Decompression: returns the decoded size, or 0 with a message pushed.
size_t decode_chunk(const H5Api &api, size_t cd_n, const unsigned *cd, size_t nbytes, size_t *buf_size, void **buf,
                    ChunkOutcome &outcome) {
    zb_stream_info info;
    zb_status s = zb_stream_info_get(*buf, nbytes, &info);
    if (s != ZB_OK) {
        ZB_PUSH(api, Minor::Filter, "cannot decompress a chunk of " + std::to_string(nbytes) + " bytes: " +
                                         status_text(s));
        return 0;
    }
    // With the dataset words (every dataset created through set_local), the stream must match the dataset.
    zbound_cd::DatasetWords d;
    std::string why;
    const bool have_dataset = zbound_cd::decode_dataset(cd, cd_n, d, why) && d.applicable;
    if (have_dataset) {
        const uint64_t expected = d.values() * d.value_bytes();
        if (info.dtype != d.dtype || info.decompressed_bytes != expected) {
            ZB_PUSH(api, Minor::Filter,
                    "cannot decompress: the chunk's stream holds " + std::to_string(info.n) + " " +
                        (info.dtype == ZB_F64 ? "f64" : "f32") + " values (" +
                        std::to_string(info.decompressed_bytes) + " bytes) but the dataset's chunk is " +
                        std::to_string(expected) + " bytes of " + (d.dtype == ZB_F64 ? "f64" : "f32"));
            return 0;
        }
    }
    const size_t out_bytes = info.decompressed_bytes;
    void *out = api.allocate_memory(out_bytes ? out_bytes : 1, false);
    if (!out) {
        ZB_PUSH(api, Minor::NoSpace, "cannot allocate " + std::to_string(out_bytes) + " bytes for a decompressed chunk");
        return 0;
    }
    s = zb_decompress(*buf, nbytes, out, out_bytes, ZB_BACKEND_AUTO, &outcome.run);
    if (s != ZB_OK) {
        api.free_memory(out);
        ZB_PUSH(api, Minor::Filter, "cannot decompress a chunk of " + std::to_string(nbytes) + " bytes: " +
                                         status_text(s));
        return 0;
    }
    if (have_dataset && d.big_endian != kHostBigEndian)
        swap_values(out, out_bytes / d.value_bytes(), d.value_bytes());
    api.free_memory(*buf);
    *buf = out;
    *buf_size = out_bytes;
    return out_bytes;
}

size_t filter(unsigned int flags, size_t cd_nelmts, const unsigned int cd_values[], size_t nbytes, size_t *buf_size,
              void **buf) {
    const H5Api *api = api_for(__builtin_return_address(0));
    if (!api) return 0;
    struct InFilter {
        InFilter() { t_in_filter_function = true; }
        ~InFilter() { t_in_filter_function = false; }
    } in_filter;
    ChunkOutcome outcome;
    try {
        if (!buf || !*buf || !buf_size) {
            ZB_PUSH(*api, Minor::BadValue, "the filter was called without a buffer");
            return 0;
        }
        const bool reverse = (flags & H5Z_FLAG_REVERSE) != 0;
        if (!stats_enabled())
            return reverse ? decode_chunk(*api, cd_nelmts, cd_values, nbytes, buf_size, buf, outcome)
                           : encode_chunk(*api, cd_nelmts, cd_values, nbytes, buf_size, buf, outcome);
        const auto t0 = std::chrono::steady_clock::now();
        const size_t result = reverse ? decode_chunk(*api, cd_nelmts, cd_values, nbytes, buf_size, buf, outcome)
                                      : encode_chunk(*api, cd_nelmts, cd_values, nbytes, buf_size, buf, outcome);
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const Direction dir = reverse ? Direction::Decompress : Direction::Compress;
        if (result) stats_record(dir, outcome.run.backend_used, reverse ? result : nbytes, reverse ? nbytes : result,
                                 seconds);
        else if (!outcome.declined) stats_record_failure(dir);
        return result;
    } catch (const std::bad_alloc &) {
        ZB_PUSH(*api, Minor::NoSpace, "out of host memory");
        return 0;
    } catch (...) {
        ZB_PUSH(*api, Minor::Filter, "internal error in the filter function");
        return 0;
    }
}

H5Z_class2_t g_class = {
    H5Z_CLASS_T_VERS,            // version of this struct layout (1)
    (H5Z_filter_t)ZBOUND_H5Z_FILTER,
    1,                           // encoder present
    1,                           // decoder present
    "zbound",
    can_apply,
    set_local,
    filter,
};

}  // namespace

bool api_complete(const H5Api &a) {
    return a.Epush2 && a.allocate_memory && a.resize_memory && a.free_memory && a.Pget_filter_by_id2 &&
           a.Pmodify_filter && a.Pget_chunk && a.Pfill_value_defined && a.Pget_fill_value && a.Tget_class &&
           a.Tget_size && a.Tget_order && a.Tget_precision && a.Tget_offset && a.Tget_fields && a.Tget_ebias &&
           a.Tget_norm && a.Sget_simple_extent_dims && a.get_libversion && a.ERR_CLS && a.PLINE && a.CANTFILTER;
}

const H5Z_class2_t *filter_class(ApiLookup lookup) {
    ApiLookup expected = nullptr;
    g_lookup.compare_exchange_strong(expected, lookup, std::memory_order_acq_rel);
    return &g_class;
}

}  // namespace zbound_h5
