// Archived HDF5 files per format version (tests/golden/v<N>/h5/), written through the plugin from real fields of
// ../shared/data (subsets with partial edge chunks, f32/f64, NaN, a fill value, a big-endian dataset, a 4D
// dataset): v1 (Lorenzo + fast), v2 (interp + fast, Lorenzo + ratio), v3 (interp + fast, interp + ratio: codes in
// pass order). Every later version must
//   - read every dataset to the identical array (CRC-32C of the values read, in MANIFEST),
//   - within the bound of the original field, chunk by chunk (each chunk's bound read from its own stream, whose
//     format version must be the archived one), NaN and the fill value bit for bit,
//   - and, while the library still writes that format version for those parameters, write the very same chunk
//     bytes for the same data (a writer change that alters them needs a format version bump and new golden files
//     beside these).
// Regenerate one archive (only together with a format version bump): ZBOUND_WRITE_GOLDEN_H5=<tag> (e.g.
// v2_interp_fast) with the test binary rel_golden_h5_tests, HDF5_PLUGIN_PATH set.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>
#include "rel_util.h"
#include "zb_crc32c.h"
#include "zbound_filter.h"

namespace {

// One archive per format version, and the pipeline (predictor, encoder) that writes that version.
struct Archive {
    int version;
    zb_predictor predictor;
    zb_encoder encoder;
    const char *tag;   // names the files: tests/golden/v<version>/h5/zbound_<tag>.h5 and MANIFEST_<tag>
    std::string dir() const { return std::string(ZBOUND_SOURCE_DIR) + "/tests/golden/v" + std::to_string(version) + "/h5"; }
    std::string file() const { return dir() + "/zbound_" + tag + ".h5"; }
    std::string manifest() const { return dir() + "/MANIFEST_" + tag; }
};
const Archive kArchives[] = {{1, ZB_PRED_LORENZO, ZB_ENC_FAST, "v1_lorenzo_fast"},
                             {2, ZB_PRED_INTERP, ZB_ENC_FAST, "v2_interp_fast"},
                             {2, ZB_PRED_LORENZO, ZB_ENC_RATIO, "v2_lorenzo_ratio"},
                             {3, ZB_PRED_INTERP, ZB_ENC_FAST, "v3_interp_fast"},
                             {3, ZB_PRED_INTERP, ZB_ENC_RATIO, "v3_interp_ratio"},
                             {4, ZB_PRED_LORENZO, ZB_ENC_RATIO, "v4_lorenzo_ratio"},
                             {4, ZB_PRED_INTERP, ZB_ENC_RATIO, "v4_interp_ratio"}};

struct GCase {
    const char *name;        // dataset name in the golden file
    const char *source;      // file under ../shared/data
    const char *path;        // dataset in the source
    std::vector<hsize_t> start, count, chunk;
    bool f64;
    bool big_endian;         // stored as big-endian in the golden file
    zb_mode mode;
    double bound;
    bool fill;               // the dataset has the fill value -9999.9 (the source's own fill)
};

const std::vector<GCase> &cases() {
    static const std::vector<GCase> cs = {
        {"geoid_f32_abs1e-3", "gmt_geoid_1m.nc", "z", {100, 100}, {150, 200}, {64, 64}, false, false, ZB_MODE_ABS,
         1e-3, false},
        {"sst_f32_rel1e-3_nan", "gmt_sst.nc", "z", {400, 1000}, {120, 250}, {50, 100}, false, false, ZB_MODE_REL, 1e-3,
         false},
        {"radar_f64_abs1e-2", "radar_rainsum_f64.h5", "data", {0, 0}, {60, 400}, {45, 128}, true, false, ZB_MODE_ABS,
         1e-2, false},
        {"gpm_precip_f32be_abs1e-2_fill", "gpm_2a_ku_volume.h5", "NS/SLV/precipRate", {40, 0, 100}, {20, 49, 60},
         {20, 25, 32}, false, true, ZB_MODE_ABS, 1e-2, true},
        {"gpm_paramDSD_4d_f32_rel1e-4_fill", "gpm_2a_ku_volume.h5", "NS/SLV/paramDSD", {50, 0, 120, 0}, {10, 49, 40, 2},
         {4, 49, 40, 1}, false, false, ZB_MODE_REL, 1e-4, true},
    };
    return cs;
}

constexpr float kFill32 = -9999.9f;

size_t count_of(const std::vector<hsize_t> &c) {
    size_t n = 1;
    for (hsize_t d : c) n *= (size_t)d;
    return n;
}

// The subset of the source field, as doubles or floats in host order.
template <typename T> std::vector<T> read_source(const GCase &c) {
    std::vector<T> v;
    const std::string file = std::string(ZBOUND_SHARED_DATA) + "/" + c.source;
    const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return v;
    const hid_t d = H5Dopen2(f, c.path, H5P_DEFAULT);
    const hid_t fs = H5Dget_space(d);
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, c.start.data(), nullptr, c.count.data(), nullptr);
    const hid_t ms = H5Screate_simple((int)c.count.size(), c.count.data(), nullptr);
    v.resize(count_of(c.count));
    if (H5Dread(d, sizeof(T) == 8 ? H5T_NATIVE_DOUBLE : H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, v.data()) < 0) v.clear();
    H5Sclose(ms);
    H5Sclose(fs);
    H5Dclose(d);
    H5Fclose(f);
    return v;
}

std::vector<uint8_t> source_bytes(const GCase &c) {
    return c.f64 ? relt::as_bytes(read_source<double>(c)) : relt::as_bytes(read_source<float>(c));
}

// Writes every case through the filter into `path` with the archive's predictor.
bool write_file(const std::string &path, const Archive &ar) {
    const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (f < 0) return false;
    bool ok = true;
    for (const GCase &c : cases()) {
        const std::vector<uint8_t> data = source_bytes(c);
        if (data.empty()) return false;
        zb_params p = zb_params_default();
        p.mode = c.mode;
        p.bound = c.bound;
        p.predictor = ar.predictor;
        p.encoder = ar.encoder;
        unsigned cd[ZBOUND_CD_MAX_WORDS];
        const size_t ncd = zbound_cd_values_encode(&p, cd);
        const hid_t sp = H5Screate_simple((int)c.count.size(), c.count.data(), nullptr);
        const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
        H5Pset_chunk(dcpl, (int)c.chunk.size(), c.chunk.data());
        const hid_t ftype = c.f64 ? (c.big_endian ? H5T_IEEE_F64BE : H5T_IEEE_F64LE)
                                  : (c.big_endian ? H5T_IEEE_F32BE : H5T_IEEE_F32LE);
        const hid_t mtype = c.f64 ? H5T_NATIVE_DOUBLE : H5T_NATIVE_FLOAT;
        if (c.fill) H5Pset_fill_value(dcpl, H5T_NATIVE_FLOAT, &kFill32);
        H5Pset_filter(dcpl, ZBOUND_H5Z_FILTER, H5Z_FLAG_MANDATORY, ncd, cd);
        const hid_t d = H5Dcreate2(f, c.name, ftype, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
        ok = ok && d >= 0 && H5Dwrite(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()) >= 0;
        if (d >= 0) H5Dclose(d);
        H5Pclose(dcpl);
        H5Sclose(sp);
    }
    return H5Fclose(f) >= 0 && ok;
}

// Every chunk's stored bytes, in chunk order.
std::vector<std::vector<uint8_t>> raw_chunks(hid_t d) {
    std::vector<std::vector<uint8_t>> out;
    const hid_t sp = H5Dget_space(d);
    const int rank = H5Sget_simple_extent_ndims(sp);
    std::vector<hsize_t> dims(rank);
    H5Sget_simple_extent_dims(sp, dims.data(), nullptr);
    H5Sclose(sp);
    const hid_t dcpl = H5Dget_create_plist(d);
    std::vector<hsize_t> chunk(rank);
    H5Pget_chunk(dcpl, rank, chunk.data());
    H5Pclose(dcpl);
    std::vector<hsize_t> off(rank, 0);
    while (true) {
        hsize_t nbytes = 0;
        uint32_t mask = 0;
        std::vector<uint8_t> b;
        if (H5Dget_chunk_storage_size(d, off.data(), &nbytes) >= 0 && nbytes > 0) {
            b.resize(nbytes);
            if (H5Dread_chunk(d, H5P_DEFAULT, off.data(), &mask, b.data()) < 0 || mask != 0) b.clear();
        }
        out.push_back(std::move(b));
        int i = rank - 1;
        for (; i >= 0; --i) {
            off[i] += chunk[i];
            if (off[i] < dims[i]) break;
            off[i] = 0;
        }
        if (i < 0) break;
    }
    return out;
}

std::map<std::string, uint32_t> read_manifest(const Archive &ar) {
    std::map<std::string, uint32_t> m;
    std::ifstream f(ar.manifest());
    std::string name, hex;
    while (f >> name >> hex) m[name] = (uint32_t)std::stoul(hex, nullptr, 16);
    return m;
}

// Values of dataset `d` read as host-order values of the case's dtype.
std::vector<uint8_t> read_all(hid_t d, const GCase &c) {
    std::vector<uint8_t> b(count_of(c.count) * (c.f64 ? 8 : 4));
    if (H5Dread(d, c.f64 ? H5T_NATIVE_DOUBLE : H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, b.data()) < 0)
        b.clear();
    return b;
}

class GoldenH5 : public ::testing::TestWithParam<Archive> {
  protected:
    void SetUp() override {
        const Archive &ar = GetParam();
        const char *w = std::getenv("ZBOUND_WRITE_GOLDEN_H5");
        if (w && std::string(w) == ar.tag) {
            ASSERT_TRUE(write_file(ar.file(), ar)) << "cannot write " << ar.file();
            std::ofstream m(ar.manifest());
            const hid_t f = H5Fopen(ar.file().c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
            for (const GCase &c : cases()) {
                const hid_t d = H5Dopen2(f, c.name, H5P_DEFAULT);
                const std::vector<uint8_t> v = read_all(d, c);
                char hex[16];
                std::snprintf(hex, sizeof hex, "%08x", zb::crc32c(v.data(), v.size()));
                m << c.name << " " << hex << "\n";
                H5Dclose(d);
            }
            H5Fclose(f);
            std::printf("wrote %s and its MANIFEST\n", ar.file().c_str());
        }
    }
};

TEST_P(GoldenH5, ReadsToTheArchivedArrayWithinTheOriginalBound) {
    const Archive &ar = GetParam();
    ASSERT_TRUE(H5Zfilter_avail(ZBOUND_H5Z_FILTER) > 0) << "the zbound plugin is not on HDF5_PLUGIN_PATH";
    const auto manifest = read_manifest(ar);
    ASSERT_EQ(manifest.size(), cases().size()) << ar.manifest();
    const hid_t f = H5Fopen(ar.file().c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    ASSERT_GE(f, 0) << ar.file();
    int newest = 0;  // the archive has chunks of its own version
    for (const GCase &c : cases()) {
        SCOPED_TRACE(c.name);
        const hid_t d = H5Dopen2(f, c.name, H5P_DEFAULT);
        ASSERT_GE(d, 0);
        const std::vector<uint8_t> got = read_all(d, c);
        ASSERT_FALSE(got.empty());
        EXPECT_EQ(zb::crc32c(got.data(), got.size()), manifest.at(c.name)) << "decoded values changed";

        // Against the original field, chunk by chunk with each chunk's own bound.
        relt::Case orig;
        orig.dtype = c.f64 ? ZB_F64 : ZB_F32;
        orig.dims.assign(c.count.begin(), c.count.end());
        orig.data = source_bytes(c);
        ASSERT_EQ(orig.data.size(), got.size()) << "cannot read the source field " << c.source << " (ZBOUND_SHARED_DATA)";
        if (c.fill) {
            orig.params.has_fill = 1;
            orig.params.fill_bits = zbt::bits(kFill32);
        }
        double max_eb = 0;
        for (const auto &chunk : raw_chunks(d)) {
            ASSERT_FALSE(chunk.empty()) << "a chunk is missing or stored unfiltered";
            zb_stream_info info;
            ASSERT_EQ(zb_stream_info_get(chunk.data(), chunk.size(), &info), ZB_OK) << zb_last_error();
            // A v4 archive holds v2/v3 chunks too: the writer uses v4 only where the ratio stream has run tokens.
            if (ar.version == 4) EXPECT_GE(info.format_version, 2);
            else EXPECT_EQ(info.format_version, ar.version);
            newest = std::max(newest, (int)info.format_version);
            EXPECT_EQ(info.predictor, ar.predictor);
            EXPECT_EQ(info.encoder, ar.encoder);
            EXPECT_EQ(info.mode, c.mode);
            EXPECT_EQ(info.bound, c.bound);
            max_eb = std::max(max_eb, info.abs_bound);
        }
        // ABS: every chunk has the same bound; REL: check each value against the largest chunk bound, and the
        // per-chunk bound is checked by reading each chunk region below.
        EXPECT_EQ(relt::violations(orig, got, max_eb), 0u);
        if (c.mode == ZB_MODE_ABS) {
            EXPECT_EQ(max_eb, c.bound);
        }
        H5Dclose(d);
    }
    EXPECT_EQ(newest, ar.version);
    H5Fclose(f);
}

// REL datasets: each chunk within its own bound (read the chunk's region, compare with the same region).
TEST_P(GoldenH5, RelChunksEachWithinTheirOwnBound) {
    const hid_t f = H5Fopen(GetParam().file().c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    for (const GCase &c : cases()) {
        if (c.mode != ZB_MODE_REL) continue;
        SCOPED_TRACE(c.name);
        const hid_t d = H5Dopen2(f, c.name, H5P_DEFAULT);
        const auto chunks = raw_chunks(d);
        const std::vector<uint8_t> got = read_all(d, c), src = source_bytes(c);
        ASSERT_FALSE(got.empty());
        ASSERT_EQ(src.size(), got.size()) << "cannot read the source field " << c.source << " (ZBOUND_SHARED_DATA)";
        ASSERT_FALSE(chunks.empty());
        const size_t rank = c.count.size(), es = c.f64 ? 8 : 4;
        std::vector<hsize_t> off(rank, 0);
        size_t k = 0, checked = 0;
        while (true) {
            zb_stream_info info;
            ASSERT_EQ(zb_stream_info_get(chunks[k].data(), chunks[k].size(), &info), ZB_OK);
            // Walk the values of this chunk's region.
            std::vector<hsize_t> idx(off);
            while (true) {
                size_t lin = 0;
                for (size_t i = 0; i < rank; ++i) lin = lin * c.count[i] + idx[i];
                float a, b;   // the REL cases are f32
                std::memcpy(&a, &src[lin * es], 4);
                std::memcpy(&b, &got[lin * es], 4);
                const bool exact = !std::isfinite(a) || (c.fill && zbt::bits(a) == zbt::bits(kFill32));
                if (exact) {
                    EXPECT_EQ(zbt::bits(a), zbt::bits(b));
                } else {
                    EXPECT_LE(std::fabs((double)a - (double)b), info.abs_bound);
                }
                ++checked;
                size_t i = rank;
                while (i-- > 0) {
                    if (++idx[i] < std::min(off[i] + c.chunk[i], c.count[i])) break;
                    idx[i] = off[i];
                }
                if (i == (size_t)-1) break;
            }
            ++k;
            size_t i = rank;
            while (i-- > 0) {
                off[i] += c.chunk[i];
                if (off[i] < c.count[i]) break;
                off[i] = 0;
            }
            if (i == (size_t)-1) break;
        }
        EXPECT_EQ(k, chunks.size());
        EXPECT_EQ(checked, count_of(c.count));
        H5Dclose(d);
    }
    H5Fclose(f);
}

// While this library writes the archived version for these parameters, writing the same data gives the same chunk
// bytes. (When a later library writes a newer version for them, only reading is tested.)
TEST_P(GoldenH5, WriterStillWritesTheArchivedBytes) {
    const Archive &ar = GetParam();
    char tmp[] = "/tmp/zbound_golden_h5_XXXXXX";
    const int fd = mkstemp(tmp);
    ASSERT_GE(fd, 0);
    close(fd);
    ASSERT_TRUE(write_file(tmp, ar));
    const hid_t a = H5Fopen(ar.file().c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), b = H5Fopen(tmp, H5F_ACC_RDONLY, H5P_DEFAULT);
    int compared = 0;
    for (const GCase &c : cases()) {
        const hid_t da = H5Dopen2(a, c.name, H5P_DEFAULT), db = H5Dopen2(b, c.name, H5P_DEFAULT);
        const auto old_chunks = raw_chunks(da), new_chunks = raw_chunks(db);
        EXPECT_EQ(old_chunks.size(), new_chunks.size()) << c.name;
        // Per chunk: a writer may pick the version per chunk (v4 only for ratio streams with run tokens).
        for (size_t k = 0; k < old_chunks.size() && k < new_chunks.size(); ++k) {
            zb_stream_info info;
            if (new_chunks[k].empty() ||
                zb_stream_info_get(new_chunks[k].data(), new_chunks[k].size(), &info) != ZB_OK ||
                (int)info.format_version != ar.version)
                continue;
            ++compared;
            EXPECT_TRUE(old_chunks[k] == new_chunks[k])
                << c.name << " chunk " << k << ": the writer's bytes changed while it still writes format version "
                << ar.version << ": bump the format version and archive new golden files";
        }
        H5Dclose(da);
        H5Dclose(db);
    }
    H5Fclose(a);
    H5Fclose(b);
    std::remove(tmp);
    if (compared == 0)
        GTEST_SKIP() << "this library writes a newer format than v" << ar.version << " for these parameters";
}

INSTANTIATE_TEST_SUITE_P(Versions, GoldenH5, ::testing::ValuesIn(kArchives),
                         [](const ::testing::TestParamInfo<Archive> &i) { return std::string(i.param.tag); });

}  // namespace
