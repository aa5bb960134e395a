// The zbound HDF5 filter through the HDF5 C API (the system's libhdf5, 1.10 here).
//
// Built twice from this file:
//   filter_plugin_tests  the plugin is loaded by HDF5 from HDF5_PLUGIN_PATH (set by ctest to build/plugin);
//   filter_static_tests  (ZB_TEST_STATIC_REGISTER) plugin loading is switched off and the filter is registered with
//                        zbound_register_h5filter() from the static library zbound_h5filter.
// Both link core (zbound_static) only to look inside stored chunks (zb_stream_info_get / zb_compress).
#include <gtest/gtest.h>
#include <hdf5.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "h5_test_util.h"
#include "zbound.h"
#include "zbound_filter.h"

namespace {

// ---------------------------------------------------------------- HDF5 helpers

using h5t::error_stack;
using h5t::Id;
using h5t::TempFile;

std::vector<unsigned> cd_for(zb_mode mode, double bound, unsigned pred = 0, unsigned enc = 0) {
    uint64_t b;
    std::memcpy(&b, &bound, 8);
    return {1u, (unsigned)mode, (unsigned)(b >> 32), (unsigned)(b & 0xffffffffu), pred, enc};
}

template <typename T> hid_t native_type() { return sizeof(T) == 8 ? H5T_NATIVE_DOUBLE : H5T_NATIVE_FLOAT; }

struct Spec {
    std::vector<hsize_t> dims, chunk;
    hid_t file_type = -1;            // default: the native type of T
    std::vector<unsigned> cd;        // user cd_values
    bool pass_cd = true;             // false: H5Pset_filter with 0 values
    unsigned flags = H5Z_FLAG_MANDATORY;
    bool has_fill = false;
    double fill = 0;
    std::vector<hsize_t> maxdims;    // empty: fixed size
};

// The error stack of the last create_dataset() that failed.
std::string g_create_error;

template <typename T> Id create_dataset(hid_t file, const char *name, const Spec &s) {
    std::vector<hsize_t> maxd = s.maxdims.empty() ? s.dims : s.maxdims;
    Id space(H5Screate_simple((int)s.dims.size(), s.dims.data(), maxd.data()));
    Id dcpl(H5Pcreate(H5P_DATASET_CREATE));
    if (!space.ok() || !dcpl.ok()) return Id();
    if (H5Pset_chunk(dcpl, (int)s.chunk.size(), s.chunk.data()) < 0) return Id();
    if (H5Pset_filter(dcpl, ZBOUND_H5Z_FILTER, s.flags, s.pass_cd ? s.cd.size() : 0,
                      s.pass_cd && !s.cd.empty() ? s.cd.data() : nullptr) < 0)
        return Id();
    if (s.has_fill) {
        const T f = (T)s.fill;
        if (H5Pset_fill_value(dcpl, native_type<T>(), &f) < 0) return Id();
    }
    const hid_t ft = s.file_type >= 0 ? s.file_type : native_type<T>();
    Id d(H5Dcreate2(file, name, ft, space, H5P_DEFAULT, dcpl, H5P_DEFAULT));
    // Closing space and dcpl below are API calls, which clear the error stack: keep its text now.
    g_create_error = d.ok() ? "" : error_stack();
    return d;
}

template <typename T> bool write_all(hid_t dset, const std::vector<T> &v) {
    return H5Dwrite(dset, native_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) >= 0;
}

template <typename T> bool read_all(hid_t dset, std::vector<T> &v, size_t n) {
    v.assign(n, T(0));
    return H5Dread(dset, native_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) >= 0;
}

// The cd_values stored with a dataset (after set_local).
std::vector<unsigned> stored_cd(hid_t dset) {
    Id dcpl(H5Dget_create_plist(dset));
    unsigned flags = 0, cd[64];
    size_t n = 64;
    if (H5Pget_filter_by_id2(dcpl, ZBOUND_H5Z_FILTER, &flags, &n, cd, 0, nullptr, nullptr) < 0) return {};
    return std::vector<unsigned>(cd, cd + (n < 64 ? n : 64));
}

size_t product(const std::vector<hsize_t> &d) {
    size_t n = 1;
    for (hsize_t x : d) n *= (size_t)x;
    return n;
}

// ---------------------------------------------------------------- data and checks

template <typename T> uint64_t bits_of(T v) {
    uint64_t u = 0;
    std::memcpy(&u, &v, sizeof(T));
    return u;
}

template <typename T> std::vector<T> field(size_t n, uint32_t seed, double scale = 10.0, double offset = 0) {
    std::vector<T> v(n);
    std::mt19937 rng(seed);
    std::normal_distribution<double> g(0.0, 1.0);
    for (size_t i = 0; i < n; ++i)
        v[i] = (T)(offset + scale * std::sin(0.013 * (double)i) + 0.3 * scale * std::cos(0.0007 * (double)i) +
                   0.01 * scale * g(rng));
    return v;
}

// Sprinkles specials: NaNs with payloads, +-Inf, -0.0.
template <typename T> void add_specials(std::vector<T> &v) {
    using U = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;
    const U qnan = sizeof(T) == 8 ? (U)0x7ff8000000000000ull : (U)0x7fc00000u;
    for (size_t i = 3; i < v.size(); i += 97) {
        U b = qnan | (U)(i & 0xff);
        if (i % 2) b |= (U)1 << (sizeof(T) * 8 - 1);   // negative NaN
        std::memcpy(&v[i], &b, sizeof(T));
    }
    if (v.size() > 10) {
        v[1] = std::numeric_limits<T>::infinity();
        v[5] = -std::numeric_limits<T>::infinity();
        v[7] = (T)-0.0;
    }
}

// Every value within eb of the original; NaN, +-Inf, -0.0 and (with has_fill) the fill value bit-exact.
template <typename T>
::testing::AssertionResult within(const std::vector<T> &orig, const std::vector<T> &back, double eb,
                                  bool has_fill = false, T fill = 0) {
    if (orig.size() != back.size()) return ::testing::AssertionFailure() << "size mismatch";
    for (size_t i = 0; i < orig.size(); ++i) {
        const T a = orig[i], b = back[i];
        const bool exact = !std::isfinite(a) || (a == 0 && std::signbit(a)) || (has_fill && bits_of(a) == bits_of(fill));
        if (exact) {
            if (bits_of(a) != bits_of(b))
                return ::testing::AssertionFailure() << "value " << i << " (" << a << ", bits " << std::hex
                                                     << bits_of(a) << ") came back as bits " << bits_of(b);
        } else if (!(std::fabs((double)a - (double)b) <= eb)) {
            return ::testing::AssertionFailure() << "value " << i << ": " << a << " came back as " << b
                                                 << ", error " << std::fabs((double)a - (double)b) << " > " << eb;
        }
    }
    return ::testing::AssertionSuccess();
}

// Writes `data` into a new dataset of spec `s`, reads it back, checks it against eb. Returns the storage size.
template <typename T>
hsize_t round_trip(hid_t file, const char *name, const Spec &s, const std::vector<T> &data, double eb,
                   std::vector<T> *out = nullptr) {
    Id d = create_dataset<T>(file, name, s);
    EXPECT_TRUE(d.ok()) << g_create_error;
    if (!d.ok()) return 0;
    EXPECT_TRUE(write_all(d, data)) << error_stack();
    std::vector<T> back;
    EXPECT_TRUE(read_all(d, back, data.size())) << error_stack();
    EXPECT_TRUE(within(data, back, eb, s.has_fill, (T)s.fill));
    if (out) *out = back;
    return H5Dget_storage_size(d);
}

// Reads the raw (still compressed) bytes of the chunk at `offset`.
std::vector<uint8_t> raw_chunk(hid_t dset, const std::vector<hsize_t> &offset, uint32_t *mask = nullptr) {
    hsize_t size = 0;
    if (H5Dget_chunk_storage_size(dset, offset.data(), &size) < 0) return {};
    std::vector<uint8_t> buf(size);
    uint32_t m = 0;
    if (H5Dread_chunk(dset, H5P_DEFAULT, offset.data(), &m, buf.data()) < 0) return {};
    if (mask) *mask = m;
    return buf;
}

// Visits every chunk of a dataset: origin (in elements) of each.
void for_each_chunk(const std::vector<hsize_t> &dims, const std::vector<hsize_t> &chunk,
                    const std::function<void(const std::vector<hsize_t> &)> &fn) {
    const size_t r = dims.size();
    std::vector<hsize_t> idx(r, 0);
    while (true) {
        std::vector<hsize_t> origin(r);
        for (size_t i = 0; i < r; ++i) origin[i] = idx[i] * chunk[i];
        fn(origin);
        size_t k = r;
        while (k > 0) {
            --k;
            if (++idx[k] * chunk[k] < dims[k]) break;
            idx[k] = 0;
            if (k == 0) return;
        }
        if (r == 0) return;
    }
}

// Linear indices (in the dataset) of the elements of the chunk at `origin`, and whether it is partial.
std::vector<size_t> chunk_elements(const std::vector<hsize_t> &dims, const std::vector<hsize_t> &chunk,
                                   const std::vector<hsize_t> &origin, bool &partial) {
    const size_t r = dims.size();
    std::vector<hsize_t> ext(r);
    partial = false;
    for (size_t i = 0; i < r; ++i) {
        ext[i] = std::min<hsize_t>(chunk[i], dims[i] - origin[i]);
        if (ext[i] < chunk[i]) partial = true;
    }
    std::vector<size_t> out;
    std::vector<hsize_t> p(r, 0);
    const size_t count = product(ext);
    out.reserve(count);
    for (size_t c = 0; c < count; ++c) {
        size_t lin = 0;
        for (size_t i = 0; i < r; ++i) lin = lin * dims[i] + (origin[i] + p[i]);
        out.push_back(lin);
        for (size_t k = r; k-- > 0;) {
            if (++p[k] < ext[k]) break;
            p[k] = 0;
        }
    }
    return out;
}

bool codec_accepts(const zb_params &p) {
    float one = 1.0f;
    size_t dim = 1, len = 0;
    std::vector<uint8_t> buf(zb_compress_bound(ZB_F32, 1));
    zb_params q = p;
    q.backend = ZB_BACKEND_CPU;
    return zb_compress(&q, ZB_F32, &one, 1, &dim, buf.data(), buf.size(), &len, nullptr) == ZB_OK;
}

// ---------------------------------------------------------------- setup

class FilterEnv : public ::testing::Environment {
  public:
    void SetUp() override {
        H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);   // errors are read from the stack by the tests
#ifdef ZB_TEST_STATIC_REGISTER
        H5PLset_loading_state(0);   // prove that the registration, not a plugin, provides the filter
        ASSERT_GE(zbound_register_h5filter(), 0) << error_stack();
#endif
    }
};
const auto *g_env = ::testing::AddGlobalTestEnvironment(new FilterEnv);

// ---------------------------------------------------------------- tests

TEST(Filter, IsAvailable) {
    ASSERT_GT(H5Zfilter_avail(ZBOUND_H5Z_FILTER), 0)
        << "filter 33000 not found; HDF5_PLUGIN_PATH=" << (std::getenv("HDF5_PLUGIN_PATH") ?: "(unset)");
    unsigned cfg = 0;
    ASSERT_GE(H5Zget_filter_info(ZBOUND_H5Z_FILTER, &cfg), 0);
    EXPECT_TRUE(cfg & H5Z_FILTER_CONFIG_ENCODE_ENABLED);
    EXPECT_TRUE(cfg & H5Z_FILTER_CONFIG_DECODE_ENABLED);
#ifdef ZB_TEST_STATIC_REGISTER
    unsigned state = 1;
    H5PLget_loading_state(&state);
    EXPECT_EQ(state, 0u);
#endif
}

TEST(Filter, NameAndStoredCdValues) {
    TempFile f("name");
    Spec s;
    s.dims = {50, 70};
    s.chunk = {16, 32};
    s.cd = cd_for(ZB_MODE_ABS, 1e-3, 1, 1);
    Id d = create_dataset<float>(f.file, "x", s);
    ASSERT_TRUE(d.ok()) << g_create_error;
    Id dcpl(H5Dget_create_plist(d));
    unsigned flags = 0, cd[32], cfg = 0;
    size_t n = 32;
    char name[64] = {0};
    ASSERT_GE(H5Pget_filter_by_id2(dcpl, ZBOUND_H5Z_FILTER, &flags, &n, cd, sizeof name, name, &cfg), 0);
    EXPECT_STREQ(name, "zbound");
    ASSERT_EQ(n, (size_t)ZBOUND_CD_MAX_WORDS);
    for (size_t i = 0; i < 6; ++i) EXPECT_EQ(cd[i], s.cd[i]) << "user word " << i << " changed";
    EXPECT_EQ(cd[6], (unsigned)ZB_F32);
    EXPECT_EQ(cd[7], 0u);               // no fill value defined
    EXPECT_EQ(cd[10], 1u);              // folded chunk (1, 16, 32)
    EXPECT_EQ(cd[11], 16u);
    EXPECT_EQ(cd[12], 32u);
}

template <typename T> void abs_2d_specials(const char *tag) {
    TempFile f(tag);
    Spec s;
    s.dims = {101, 203};   // 16x32 chunks leave partial chunks along both axes
    s.chunk = {16, 32};
    const double eb = 1e-3;
    s.cd = cd_for(ZB_MODE_ABS, eb);
    auto data = field<T>(product(s.dims), 7);
    add_specials(data);
    const hsize_t stored = round_trip<T>(f.file, "x", s, data, eb);
    EXPECT_GT(stored, 0u);
    EXPECT_LT(stored, data.size() * sizeof(T)) << "nothing was compressed";
    // After closing and reopening (chunks now come from the file, not the cache).
    f.reopen();
    Id d(H5Dopen2(f.file, "x", H5P_DEFAULT));
    std::vector<T> back;
    ASSERT_TRUE(read_all(d, back, data.size())) << error_stack();
    EXPECT_TRUE(within(data, back, eb));
}

TEST(Filter, AbsF32PartialChunksAndSpecials) { abs_2d_specials<float>("abs32"); }
TEST(Filter, AbsF64PartialChunksAndSpecials) { abs_2d_specials<double>("abs64"); }

template <typename T> void ranks_1_to_4(const char *tag) {
    TempFile f(tag);
    const std::vector<std::vector<hsize_t>> dims = {{1001}, {37, 53}, {9, 21, 33}, {3, 5, 7, 11}};
    const std::vector<std::vector<hsize_t>> chunks = {{128}, {8, 16}, {4, 8, 16}, {2, 3, 4, 5}};
    for (size_t r = 0; r < dims.size(); ++r) {
        Spec s;
        s.dims = dims[r];
        s.chunk = chunks[r];
        const double eb = 1e-2;
        s.cd = cd_for(ZB_MODE_ABS, eb);
        auto data = field<T>(product(s.dims), 11 + (uint32_t)r, 100.0);
        const std::string name = "rank" + std::to_string(r + 1);
        SCOPED_TRACE(name);
        round_trip<T>(f.file, name.c_str(), s, data, eb);
        // Unit dims in the chunk (folded away by the filter).
        Spec u = s;
        u.chunk.assign(s.chunk.size(), 1);
        u.chunk.back() = s.chunk.back();
        round_trip<T>(f.file, (name + "_unit").c_str(), u, data, eb);
    }
}

TEST(Filter, RanksOneToFourF32) { ranks_1_to_4<float>("ranks32"); }
TEST(Filter, RanksOneToFourF64) { ranks_1_to_4<double>("ranks64"); }

TEST(Filter, OneElementChunks) {
    TempFile f("one");
    for (int rank = 1; rank <= 3; ++rank) {
        Spec s;
        s.dims.assign(rank, 3);
        s.dims.back() = 5;
        s.chunk.assign(rank, 1);
        s.cd = cd_for(ZB_MODE_REL, 1e-3);
        auto data = field<double>(product(s.dims), 3);
        data[2] = std::numeric_limits<double>::quiet_NaN();
        const std::string name = "r" + std::to_string(rank);
        SCOPED_TRACE(name);
        // REL over one value: a single finite value has an empty range, so it comes back exactly.
        std::vector<double> back;
        round_trip<double>(f.file, name.c_str(), s, data, 0.0, &back);
    }
}

TEST(Filter, FillValueExactAndOutsideRelRange) {
    TempFile f("fill");
    Spec s;
    s.dims = {40, 45};
    s.chunk = {16, 16};
    s.has_fill = true;
    s.fill = -9999.9;
    const double rel = 1e-3;
    s.cd = cd_for(ZB_MODE_REL, rel);
    std::vector<float> data = field<float>(product(s.dims), 5, 1.0, 2.0);   // values in about [0.6, 3.4]
    const float fill = (float)s.fill;
    for (size_t i = 0; i < data.size(); ++i)
        if ((i / 45) % 7 < 3) data[i] = fill;   // bands of fill values
    Id d = create_dataset<float>(f.file, "x", s);
    ASSERT_TRUE(d.ok()) << g_create_error;
    const auto cd = stored_cd(d);
    ASSERT_EQ(cd.size(), (size_t)ZBOUND_CD_MAX_WORDS);
    EXPECT_EQ(cd[7], 1u);
    EXPECT_EQ(cd[8], 0u);
    EXPECT_EQ(cd[9], (unsigned)bits_of(fill));
    ASSERT_TRUE(write_all(d, data)) << error_stack();
    std::vector<float> back;
    ASSERT_TRUE(read_all(d, back, data.size())) << error_stack();
    // Per chunk: the fill value is not part of the range, so the bound stays rel * (range of the real values).
    for_each_chunk(s.dims, s.chunk, [&](const std::vector<hsize_t> &origin) {
        bool partial = false;
        const auto idx = chunk_elements(s.dims, s.chunk, origin, partial);
        double lo = INFINITY, hi = -INFINITY;
        for (size_t i : idx)
            if (bits_of(data[i]) != bits_of(fill)) lo = std::min(lo, (double)data[i]), hi = std::max(hi, (double)data[i]);
        const auto raw = raw_chunk(d, origin);
        ASSERT_FALSE(raw.empty());
        zb_stream_info info;
        ASSERT_EQ(zb_stream_info_get(raw.data(), raw.size(), &info), ZB_OK) << zb_last_error();
        const double expect = lo <= hi ? rel * (hi - lo) : 0.0;
        EXPECT_NEAR(info.abs_bound, expect, 1e-12 * (1 + expect)) << "chunk at " << origin[0] << "," << origin[1];
        for (size_t i : idx) {
            if (bits_of(data[i]) == bits_of(fill)) {
                ASSERT_EQ(bits_of(back[i]), bits_of(fill)) << i;
            } else {
                ASSERT_LE(std::fabs((double)data[i] - (double)back[i]), info.abs_bound) << i;
            }
        }
    });
}

TEST(Filter, FillValueReadsBackForUnwrittenChunksF64) {
    TempFile f("fill64");
    Spec s;
    s.dims = {30, 30};
    s.chunk = {8, 8};
    s.has_fill = true;
    s.fill = 1e36;
    s.cd = cd_for(ZB_MODE_ABS, 1e-4);
    Id d = create_dataset<double>(f.file, "x", s);
    ASSERT_TRUE(d.ok()) << g_create_error;
    const auto cd = stored_cd(d);
    ASSERT_EQ(cd.size(), (size_t)ZBOUND_CD_MAX_WORDS);
    const uint64_t fb = bits_of(1e36);
    EXPECT_EQ(cd[6], (unsigned)ZB_F64);
    EXPECT_EQ(cd[8], (unsigned)(fb >> 32));
    EXPECT_EQ(cd[9], (unsigned)(fb & 0xffffffffu));
    // Write only a 10x10 block: the rest reads as the fill value.
    std::vector<double> block = field<double>(100, 9);
    block[0] = 1e36;
    hsize_t start[2] = {5, 5}, count[2] = {10, 10};
    Id fs(H5Dget_space(d)), ms(H5Screate_simple(2, count, nullptr));
    ASSERT_GE(H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, nullptr, count, nullptr), 0);
    ASSERT_GE(H5Dwrite(d, H5T_NATIVE_DOUBLE, ms, fs, H5P_DEFAULT, block.data()), 0) << error_stack();
    f.reopen();
    Id d2(H5Dopen2(f.file, "x", H5P_DEFAULT));
    std::vector<double> back;
    ASSERT_TRUE(read_all(d2, back, 900)) << error_stack();
    for (size_t y = 0; y < 30; ++y)
        for (size_t x = 0; x < 30; ++x) {
            const double v = back[y * 30 + x];
            if (y >= 5 && y < 15 && x >= 5 && x < 15) {
                const double o = block[(y - 5) * 10 + (x - 5)];
                if (o == 1e36) ASSERT_EQ(bits_of(v), fb);
                else ASSERT_LE(std::fabs(v - o), 1e-4);
            } else {
                ASSERT_EQ(bits_of(v), fb) << y << "," << x;
            }
        }
}

TEST(Filter, RelPerChunkIncludingEdgePadding) {
    TempFile f("rel");
    Spec s;
    s.dims = {70, 90};
    s.chunk = {32, 32};
    const double rel = 1e-3;
    s.cd = cd_for(ZB_MODE_REL, rel);
    std::vector<float> data(product(s.dims));
    for (size_t i = 0; i < data.size(); ++i) {   // chunk-dependent ranges, all values far from 0
        const size_t y = i / 90, x = i % 90;
        data[i] = (float)(1000.0 + 50.0 * (double)(x / 32) + (1.0 + (double)(y / 32)) * std::sin(0.3 * (double)x) *
                                                                 std::cos(0.2 * (double)y));
    }
    Id d = create_dataset<float>(f.file, "x", s);
    ASSERT_TRUE(d.ok()) << g_create_error;
    ASSERT_TRUE(write_all(d, data)) << error_stack();
    std::vector<float> back;
    ASSERT_TRUE(read_all(d, back, data.size())) << error_stack();
    for_each_chunk(s.dims, s.chunk, [&](const std::vector<hsize_t> &origin) {
        bool partial = false;
        const auto idx = chunk_elements(s.dims, s.chunk, origin, partial);
        double lo = INFINITY, hi = -INFINITY;
        for (size_t i : idx) lo = std::min(lo, (double)data[i]), hi = std::max(hi, (double)data[i]);
        // HDF5 pads a partial edge chunk with the fill value, 0 here (none defined): part of the chunk's range.
        if (partial) lo = std::min(lo, 0.0);
        const auto raw = raw_chunk(d, origin);
        ASSERT_FALSE(raw.empty());
        zb_stream_info info;
        ASSERT_EQ(zb_stream_info_get(raw.data(), raw.size(), &info), ZB_OK) << zb_last_error();
        EXPECT_EQ(info.mode, ZB_MODE_REL);
        EXPECT_DOUBLE_EQ(info.bound, rel);
        EXPECT_NEAR(info.abs_bound, rel * (hi - lo), 1e-9 * rel * (hi - lo)) << origin[0] << "," << origin[1];
        for (size_t i : idx) ASSERT_LE(std::fabs((double)data[i] - (double)back[i]), info.abs_bound) << i;
    });
}

TEST(Filter, LosslessAndConstantAndAllNaNChunks) {
    TempFile f("lossless");
    Spec s;
    s.dims = {64, 64};
    s.chunk = {32, 32};
    s.cd = cd_for(ZB_MODE_ABS, 0.0);
    auto data = field<float>(product(s.dims), 4);
    add_specials(data);
    round_trip<float>(f.file, "abs0", s, data, 0.0);
    // REL with a constant chunk, an all-NaN chunk and an ordinary one.
    Spec r = s;
    r.cd = cd_for(ZB_MODE_REL, 1e-2);
    for (size_t i = 0; i < data.size(); ++i) {
        const size_t y = i / 64, x = i % 64;
        if (y < 32 && x < 32) data[i] = 42.5f;
        else if (y < 32) data[i] = std::numeric_limits<float>::quiet_NaN();
    }
    std::vector<float> back;
    round_trip<float>(f.file, "rel", r, data, 1e-2 * 30.0, &back);
    for (size_t i = 0; i < 32 * 64; ++i) ASSERT_EQ(bits_of(back[i]), bits_of(data[i])) << i;
}

TEST(Filter, CdValuesShortForms) {
    TempFile f("short");
    const std::vector<unsigned> full = cd_for(ZB_MODE_ABS, 5e-3, 1, 1);
    for (size_t n : {0u, 1u, 2u, 4u, 5u, 6u}) {
        SCOPED_TRACE("cd_values of length " + std::to_string(n));
        Spec s;
        s.dims = {33, 47};
        s.chunk = {16, 16};
        s.cd.assign(full.begin(), full.begin() + n);
        s.pass_cd = n > 0;
        const std::string name = "n" + std::to_string(n);
        Id d = create_dataset<float>(f.file, name.c_str(), s);
        ASSERT_TRUE(d.ok()) << g_create_error;
        const auto cd = stored_cd(d);
        ASSERT_EQ(cd.size(), (size_t)ZBOUND_CD_MAX_WORDS);
        for (size_t i = 0; i < n; ++i) EXPECT_EQ(cd[i], full[i]) << "user word " << i;
        // The tail takes the defaults: version 1, REL 1e-3, auto, auto.
        zb_params def = zb_params_default();
        unsigned defcd[ZBOUND_CD_USER_WORDS];
        ASSERT_EQ(zbound_cd_values_encode(&def, defcd), (size_t)ZBOUND_CD_USER_WORDS);
        for (size_t i = n; i < ZBOUND_CD_USER_WORDS; ++i) EXPECT_EQ(cd[i], defcd[i]) << "default word " << i;
        auto data = field<float>(product(s.dims), 2);
        const double eb = n >= 2 ? (n >= 4 ? 5e-3 : 1e-3) : 1e-3 * 30.0;   // REL: 1e-3 of a range below 30
        ASSERT_TRUE(write_all(d, data)) << error_stack();
        std::vector<float> back;
        ASSERT_TRUE(read_all(d, back, data.size())) << error_stack();
        EXPECT_TRUE(within(data, back, eb));
    }
}

struct BadCase {
    std::vector<unsigned> cd;
    const char *expect;   // text the error stack must contain
};

TEST(Filter, BadCdValuesAreRejectedWithAMessage) {
    TempFile f("bad");
    const double nan = std::numeric_limits<double>::quiet_NaN();
    std::vector<BadCase> cases = {
        {{2}, "cd_values[0] = 2"},
        {{1, 7}, "cd_values[1] = 7"},
        {{1, 0, 0x3F50624Du}, "3 words"},
        {cd_for(ZB_MODE_ABS, -1.0), "not finite and >= 0"},
        {cd_for(ZB_MODE_ABS, nan), "not finite and >= 0"},
        {cd_for(ZB_MODE_ABS, INFINITY), "not finite and >= 0"},
        {{1, 0, 0x3F50624Du, 0xD2F1A9FCu, 9}, "cd_values[4] = 9"},
        {{1, 0, 0x3F50624Du, 0xD2F1A9FCu, 0, 5}, "cd_values[5] = 5"},
        {std::vector<unsigned>(ZBOUND_CD_MAX_WORDS + 1, 1u), "at most 13"},
    };
    int k = 0;
    for (unsigned flags : {(unsigned)H5Z_FLAG_MANDATORY, (unsigned)H5Z_FLAG_OPTIONAL}) {
        for (const BadCase &c : cases) {
            SCOPED_TRACE(std::string("expecting '") + c.expect + "' flags " + std::to_string(flags));
            Spec s;
            s.dims = {10, 10};
            s.chunk = {5, 5};
            s.cd = c.cd;
            s.flags = flags;
            const std::string name = "bad" + std::to_string(k++);
            Id d = create_dataset<float>(f.file, name.c_str(), s);
            EXPECT_FALSE(d.ok());
            const std::string stack = g_create_error;
            EXPECT_NE(stack.find("zbound"), std::string::npos) << stack;
            EXPECT_NE(stack.find(c.expect), std::string::npos) << stack;
        }
    }
}

TEST(Filter, ParametersTheCodecRefusesFailAtCreation) {
    // Mode pw_rel, predictor interp and encoder ratio are in the cd_values layout; a core that cannot write them
    // yet must make dataset creation fail with its reason. A core that can must accept them.
    TempFile f("refuse");
    struct Case { std::vector<unsigned> cd; zb_params p; };
    std::vector<Case> cases;
    zb_params p = zb_params_default();
    p.mode = ZB_MODE_PW_REL;
    cases.push_back({cd_for(ZB_MODE_PW_REL, 1e-3), p});
    p = zb_params_default();
    p.mode = ZB_MODE_ABS;
    p.predictor = ZB_PRED_INTERP;
    cases.push_back({cd_for(ZB_MODE_ABS, 1e-3, 2, 0), p});
    p = zb_params_default();
    p.mode = ZB_MODE_ABS;
    p.encoder = ZB_ENC_RATIO;
    cases.push_back({cd_for(ZB_MODE_ABS, 1e-3, 0, 2), p});
    int k = 0;
    for (const Case &c : cases) {
        const bool accepted = codec_accepts(c.p);
        const std::string reason = accepted ? "" : zb_last_error();
        Spec s;
        s.dims = {20, 20};
        s.chunk = {8, 8};
        s.cd = c.cd;
        s.flags = H5Z_FLAG_OPTIONAL;
        const std::string name = "p" + std::to_string(k++);
        Id d = create_dataset<float>(f.file, name.c_str(), s);
        if (accepted) {
            EXPECT_TRUE(d.ok()) << g_create_error;
        } else {
            EXPECT_FALSE(d.ok());
            const std::string stack = g_create_error;
            EXPECT_NE(stack.find("are refused"), std::string::npos) << stack;
            EXPECT_NE(stack.find(reason), std::string::npos) << stack;
        }
    }
}

TEST(Filter, NonFloatTypesAreRefusedByCanApply) {
    TempFile f("int");
    Spec s;
    s.dims = {20, 20};
    s.chunk = {8, 8};
    s.cd = cd_for(ZB_MODE_ABS, 1e-3);
    {   // mandatory: creation fails with the reason on the stack
        Id space(H5Screate_simple(2, s.dims.data(), nullptr));
        Id dcpl(H5Pcreate(H5P_DATASET_CREATE));
        H5Pset_chunk(dcpl, 2, s.chunk.data());
        H5Pset_filter(dcpl, ZBOUND_H5Z_FILTER, H5Z_FLAG_MANDATORY, 6, s.cd.data());
        Id d(H5Dcreate2(f.file, "i32", H5T_NATIVE_INT32, space, H5P_DEFAULT, dcpl, H5P_DEFAULT));
        EXPECT_FALSE(d.ok());
        const std::string stack = error_stack();
        EXPECT_NE(stack.find("zbound: cannot apply the filter"), std::string::npos) << stack;
        EXPECT_NE(stack.find("integer"), std::string::npos) << stack;
    }
    {   // a float of a non-IEEE layout
        Id t(H5Tcopy(H5T_IEEE_F32LE));
        H5Tset_ebias(t, 100);
        Id space(H5Screate_simple(2, s.dims.data(), nullptr));
        Id dcpl(H5Pcreate(H5P_DATASET_CREATE));
        H5Pset_chunk(dcpl, 2, s.chunk.data());
        H5Pset_filter(dcpl, ZBOUND_H5Z_FILTER, H5Z_FLAG_MANDATORY, 6, s.cd.data());
        Id d(H5Dcreate2(f.file, "f32odd", t, space, H5P_DEFAULT, dcpl, H5P_DEFAULT));
        EXPECT_FALSE(d.ok());
        const std::string stack = error_stack();
        EXPECT_NE(stack.find("IEEE-754 layout"), std::string::npos) << stack;
    }
    {   // optional (as h5py adds filters): created, stored unfiltered, read back exactly
        Id space(H5Screate_simple(2, s.dims.data(), nullptr));
        Id dcpl(H5Pcreate(H5P_DATASET_CREATE));
        H5Pset_chunk(dcpl, 2, s.chunk.data());
        H5Pset_filter(dcpl, ZBOUND_H5Z_FILTER, H5Z_FLAG_OPTIONAL, 6, s.cd.data());
        Id d(H5Dcreate2(f.file, "i16", H5T_NATIVE_INT16, space, H5P_DEFAULT, dcpl, H5P_DEFAULT));
        ASSERT_TRUE(d.ok()) << error_stack();
        const auto cd = stored_cd(d);
        ASSERT_EQ(cd.size(), (size_t)ZBOUND_CD_MAX_WORDS);
        EXPECT_EQ(cd[6], 0u);
        std::vector<int16_t> v(400), back(400);
        for (size_t i = 0; i < v.size(); ++i) v[i] = (int16_t)(i * 37 - 5000);
        ASSERT_GE(H5Dwrite(d, H5T_NATIVE_INT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), 0) << error_stack();
        f.reopen();
        Id d2(H5Dopen2(f.file, "i16", H5P_DEFAULT));
        ASSERT_GE(H5Dread(d2, H5T_NATIVE_INT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, back.data()), 0) << error_stack();
        EXPECT_EQ(v, back);
        uint32_t mask = 0;
        raw_chunk(d2, {0, 0}, &mask);
        EXPECT_EQ(mask & 1u, 1u) << "the chunk should be stored with the optional filter skipped";
    }
}

template <typename T> void big_endian(const char *tag) {
    TempFile f(tag);
    Spec s;
    s.dims = {45, 61};
    s.chunk = {16, 16};
    s.file_type = sizeof(T) == 8 ? H5T_IEEE_F64BE : H5T_IEEE_F32BE;
    s.has_fill = true;
    s.fill = -999.0;
    const double eb = 1e-3;
    s.cd = cd_for(ZB_MODE_ABS, eb);
    auto data = field<T>(product(s.dims), 21);
    add_specials(data);
    data[100] = (T)-999.0;
    Id d = create_dataset<T>(f.file, "be", s);
    ASSERT_TRUE(d.ok()) << g_create_error;
    const auto cd = stored_cd(d);
    ASSERT_EQ(cd.size(), (size_t)ZBOUND_CD_MAX_WORDS);
    EXPECT_EQ(cd[6], (unsigned)(sizeof(T) == 8 ? ZB_F64 : ZB_F32) | 0x100u);
    const uint64_t fb = bits_of((T)-999.0);   // stored in host (little-endian) order
    EXPECT_EQ(((uint64_t)cd[8] << 32) | cd[9], fb);
    ASSERT_TRUE(write_all(d, data)) << error_stack();
    EXPECT_LT(H5Dget_storage_size(d), data.size() * sizeof(T));
    f.reopen();
    Id d2(H5Dopen2(f.file, "be", H5P_DEFAULT));
    std::vector<T> back;
    ASSERT_TRUE(read_all(d2, back, data.size())) << error_stack();
    EXPECT_TRUE(within(data, back, eb, true, (T)-999.0));
    // The stream inside is the ordinary little-endian one: it decodes on its own to the first chunk's values.
    const auto raw = raw_chunk(d2, {0, 0});
    ASSERT_FALSE(raw.empty());
    std::vector<T> chunk(16 * 16);
    ASSERT_EQ(zb_decompress(raw.data(), raw.size(), chunk.data(), chunk.size() * sizeof(T), ZB_BACKEND_CPU, nullptr),
              ZB_OK)
        << zb_last_error();
    for (size_t y = 0; y < 16; ++y)
        for (size_t x = 0; x < 16; ++x) {
            const T a = data[y * 61 + x], b = chunk[y * 16 + x];
            if (std::isfinite(a)) ASSERT_LE(std::fabs((double)a - (double)b), eb);
            else ASSERT_EQ(bits_of(a), bits_of(b));
        }
}

TEST(Filter, BigEndianF32) { big_endian<float>("be32"); }
TEST(Filter, BigEndianF64) { big_endian<double>("be64"); }

TEST(Filter, CorruptOrForeignChunksFailWithAMessage) {
    TempFile f("corrupt");
    Spec s;
    s.dims = {32, 32};
    s.chunk = {16, 16};
    s.cd = cd_for(ZB_MODE_ABS, 1e-3);
    auto data = field<float>(product(s.dims), 8);
    Id d = create_dataset<float>(f.file, "x", s);
    ASSERT_TRUE(d.ok());
    ASSERT_TRUE(write_all(d, data));
    d.reset();   // flush the chunk cache before touching chunks directly
    f.reopen();
    d = Id(H5Dopen2(f.file, "x", H5P_DEFAULT));
    std::vector<float> back;

    auto expect_read_error = [&](const char *what) {
        SCOPED_TRACE(what);
        f.reopen();
        Id d2(H5Dopen2(f.file, "x", H5P_DEFAULT));
        back.assign(data.size(), 0);
        EXPECT_LT(H5Dread(d2, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, back.data()), 0);
        const std::string stack = error_stack();
        EXPECT_NE(stack.find("zbound: cannot decompress"), std::string::npos) << stack;
        return stack;
    };

    // 1. A bit flip in the payload of chunk (0, 16).
    std::vector<hsize_t> off = {0, 16};
    auto raw = raw_chunk(d, off);
    ASSERT_GT(raw.size(), 200u);
    raw[raw.size() - 20] ^= 0x10;
    ASSERT_GE(H5Dwrite_chunk(d, H5P_DEFAULT, 0, off.data(), raw.size(), raw.data()), 0);
    d.reset();
    expect_read_error("bit flip");

    // 2. A truncated stream.
    d = Id(H5Dopen2(f.file, "x", H5P_DEFAULT));
    raw[raw.size() - 20] ^= 0x10;
    ASSERT_GE(H5Dwrite_chunk(d, H5P_DEFAULT, 0, off.data(), raw.size() / 2, raw.data()), 0);
    d.reset();
    expect_read_error("truncated");

    // 3. Bytes that are no zbound stream at all.
    d = Id(H5Dopen2(f.file, "x", H5P_DEFAULT));
    std::vector<uint8_t> junk(300, 0xAB);
    ASSERT_GE(H5Dwrite_chunk(d, H5P_DEFAULT, 0, off.data(), junk.size(), junk.data()), 0);
    d.reset();
    expect_read_error("junk");

    // 4. A valid stream of the wrong size for this dataset's chunks.
    d = Id(H5Dopen2(f.file, "x", H5P_DEFAULT));
    std::vector<float> small(10, 1.0f);
    size_t dim = small.size(), len = 0;
    std::vector<uint8_t> stream(zb_compress_bound(ZB_F32, small.size()));
    zb_params p = zb_params_default();
    ASSERT_EQ(zb_compress(&p, ZB_F32, small.data(), 1, &dim, stream.data(), stream.size(), &len, nullptr), ZB_OK);
    ASSERT_GE(H5Dwrite_chunk(d, H5P_DEFAULT, 0, off.data(), len, stream.data()), 0);
    d.reset();
    const std::string stack = expect_read_error("wrong size");
    EXPECT_NE(stack.find("10 f32 values"), std::string::npos) << stack;
}

TEST(Filter, ExtendAfterReopenUsesTheStoredCdValues) {
    TempFile f("extend");
    Spec s;
    s.dims = {10, 50};
    s.maxdims = {H5S_UNLIMITED, 50};
    s.chunk = {8, 20};
    const double eb = 1e-3;
    s.cd = cd_for(ZB_MODE_ABS, eb);
    auto data = field<float>(40 * 50, 31);
    {
        Id d = create_dataset<float>(f.file, "x", s);
        ASSERT_TRUE(d.ok()) << g_create_error;
        std::vector<float> first(data.begin(), data.begin() + 500);
        ASSERT_TRUE(write_all(d, first)) << error_stack();
    }
    f.reopen();   // no set_local from here on: the filter works from the cd_values in the file
    {
        Id d(H5Dopen2(f.file, "x", H5P_DEFAULT));
        hsize_t nd[2] = {40, 50};
        ASSERT_GE(H5Dset_extent(d, nd), 0);
        Id fs(H5Dget_space(d));
        hsize_t start[2] = {10, 0}, count[2] = {30, 50};
        Id ms(H5Screate_simple(2, count, nullptr));
        H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, nullptr, count, nullptr);
        ASSERT_GE(H5Dwrite(d, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, data.data() + 500), 0) << error_stack();
    }
    f.reopen();
    Id d(H5Dopen2(f.file, "x", H5P_DEFAULT));
    std::vector<float> back;
    ASSERT_TRUE(read_all(d, back, data.size())) << error_stack();
    EXPECT_TRUE(within(data, back, eb));
}

TEST(Filter, LargeChunk) {
    TempFile f("large");
    Spec s;
    s.dims = {300, 2000, 5};   // one 3M-value chunk plus partial ones
    s.chunk = {256, 2000, 5};
    const double eb = 1e-2;
    s.cd = cd_for(ZB_MODE_ABS, eb);
    auto data = field<float>(product(s.dims), 99, 50.0);
    const hsize_t stored = round_trip<float>(f.file, "x", s, data, eb);
    EXPECT_LT(stored, data.size() * sizeof(float) / 2);
}

TEST(Filter, ManyDatasetsAndTypesInOneFile) {
    TempFile f("many");
    for (int i = 0; i < 6; ++i) {
        Spec s;
        s.dims = {(hsize_t)(20 + i), (hsize_t)(30 + 3 * i)};
        s.chunk = {(hsize_t)(4 + i), 16};
        const double eb = std::pow(10.0, -1 - i % 3);
        s.cd = cd_for(ZB_MODE_ABS, eb);
        const std::string name = "d" + std::to_string(i);
        if (i % 2) round_trip<double>(f.file, name.c_str(), s, field<double>(product(s.dims), i), eb);
        else round_trip<float>(f.file, name.c_str(), s, field<float>(product(s.dims), i), eb);
    }
}

}  // namespace
