// Archived streams of format v1 (tests/golden/v1), v5 (tests/golden/v5, the point-wise relative mode) and v6
// (tests/golden/v6, the fast pipeline in Lorenzo segments), made
// from real fields in ../shared/data by this test with ZBOUND_WRITE_GOLDEN=<version>. Every later version must
//   - decode them to the identical array (CRC-32C of the decoded bytes is in the manifest), within the bound of
//     the original field, and
//   - still write exactly these bytes for the same input while it writes that version: a change of the writer
//     that alters the bytes needs a format version bump (and new golden files beside these).
#include <gtest/gtest.h>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include "test_util.h"
#include "zb_bytes.h"
#include "zb_crc32c.h"

namespace {

std::string golden_dir(int version) {
    return std::string(ZBOUND_SOURCE_DIR) + "/tests/golden/v" + std::to_string(version);
}

// One variable of a PLOT3D q file, dims {nk, nj, ni}; var -1: all five variables stacked along k, twice (dims
// {10 nk, nj, ni}: an array of more than one Lorenzo segment, for version 6).
bool read_plot3d_var(const std::string &path, int var, std::vector<float> &out, std::vector<size_t> &dims) {
    std::vector<float> all;
    if (!zbt::read_plot3d(path, all, dims)) return false;
    if (var < 0) {
        out = all;
        out.insert(out.end(), all.begin(), all.end());
        dims = {10 * dims[1], dims[2], dims[3]};
        return true;
    }
    const size_t per = all.size() / 5;
    out.assign(all.begin() + (long)(var * per), all.begin() + (long)((var + 1) * per));
    dims.erase(dims.begin());
    return true;
}

struct Case {
    const char *name;
    const char *file;
    int var;
    bool f64;
    zb_mode mode;
    double bound;
    bool specials;  // overwrite a deterministic set of values with NaN, Inf, -0.0 and the fill value
    zb_predictor predictor;
    zb_encoder encoder;
};

// Version 1: the v1 pipeline (Lorenzo + fast). Version 5: pw_rel around an inner stream of either pipeline; the
// momentum variables (1..3) have both signs.
const Case kV1Cases[] = {
    {"combq_v0_f32_rel1e-3", "nasa_cfd_combq.bin", 0, false, ZB_MODE_REL, 1e-3, false, ZB_PRED_LORENZO, ZB_ENC_FAST},
    {"postq_v4_f32_abs1e-4_specials", "nasa_cfd_postq.bin", 4, false, ZB_MODE_ABS, 1e-4, true, ZB_PRED_LORENZO,
     ZB_ENC_FAST},
    {"combq_v3_f64_rel1e-2_specials", "nasa_cfd_combq.bin", 3, true, ZB_MODE_REL, 1e-2, true, ZB_PRED_LORENZO,
     ZB_ENC_FAST},
};
// Version 6: the v1 pipeline on an array of several Lorenzo segments (docs/FORMAT.md section 13).
const Case kV6Cases[] = {
    {"postq_all2_f32_rel1e-2", "nasa_cfd_postq.bin", -1, false, ZB_MODE_REL, 1e-2, false, ZB_PRED_LORENZO,
     ZB_ENC_FAST},
};
const Case kV5Cases[] = {
    {"combq_v1_f32_pwrel1e-3_specials", "nasa_cfd_combq.bin", 1, false, ZB_MODE_PW_REL, 1e-3, true, ZB_PRED_INTERP,
     ZB_ENC_RATIO},
    {"postq_v2_f64_pwrel1e-2", "nasa_cfd_postq.bin", 2, true, ZB_MODE_PW_REL, 1e-2, false, ZB_PRED_LORENZO,
     ZB_ENC_FAST},
};

constexpr float kFill = -9999.9f;

template <typename T> void add_specials(std::vector<T> &v) {
    for (size_t i = 0; i < v.size(); i += 37) v[i] = std::numeric_limits<T>::quiet_NaN();
    for (size_t i = 5; i < v.size(); i += 101) v[i] = (T)kFill;
    for (size_t i = 0; i < 500 && i < v.size(); ++i) v[v.size() / 2 + i - 250] = -std::numeric_limits<T>::infinity();
    v[1] = (T)-0.0;
}

std::vector<uint8_t> read_file(const std::string &p) {
    std::ifstream f(p, std::ios::binary);
    return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

std::map<std::string, uint32_t> read_manifest(int version) {
    std::map<std::string, uint32_t> m;
    std::ifstream f(golden_dir(version) + "/MANIFEST");
    std::string name, hex;
    while (f >> name >> hex) m[name] = (uint32_t)std::stoul(hex, nullptr, 16);
    return m;
}

template <typename T>
void run_case(const Case &c, int version, std::map<std::string, uint32_t> &manifest, bool write) {
    std::vector<float> v32;
    std::vector<size_t> dims;
    ASSERT_TRUE(read_plot3d_var(std::string(ZBOUND_SHARED_DATA) + "/" + c.file, c.var, v32, dims));
    std::vector<T> data(v32.begin(), v32.end());
    if (c.specials) add_specials(data);
    zb_params p = zb_params_default();
    p.mode = c.mode;
    p.bound = c.bound;
    p.predictor = c.predictor;
    p.encoder = c.encoder;
    p.backend = ZB_BACKEND_CPU;
    if (c.specials) {
        p.has_fill = 1;
        p.fill_bits = zbt::bits((T)kFill);
    }
    const auto s = zbt::compress(data, dims, p);
    ASSERT_EQ(s.status, ZB_OK);
    EXPECT_EQ(zb::get_u16(s.bytes.data() + 4), version) << c.name;
    const std::string path = golden_dir(version) + "/" + c.name + ".zbs";
    if (write) {
        std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char *>(s.bytes.data()), s.bytes.size());
        std::vector<T> out(data.size());
        ASSERT_EQ(zbt::decompress(s.bytes, out), ZB_OK);
        manifest[c.name] = zb::crc32c(out.data(), out.size() * sizeof(T));
        return;
    }
    const auto golden = read_file(path);
    ASSERT_FALSE(golden.empty()) << "missing " << path;
    std::vector<T> out(data.size());
    ASSERT_EQ(zbt::decompress(golden, out), ZB_OK) << zb_last_error();
    ASSERT_TRUE(manifest.count(c.name));
    EXPECT_EQ(zb::crc32c(out.data(), out.size() * sizeof(T)), manifest[c.name]) << c.name << " decodes differently";
    if (c.mode == ZB_MODE_PW_REL) {
        EXPECT_EQ(zbt::count_pw_violations(data, out, c.bound, c.specials, (T)kFill), 0u);
    } else {
        EXPECT_EQ(zbt::count_violations(data, out, zbt::abs_bound_of(golden), c.specials, (T)kFill), 0u);
    }
    EXPECT_EQ(s.bytes, golden) << c.name << ": the writer's bytes changed; bump the format version";
}

template <size_t N> void check_archive(int version, const Case (&cases)[N]) {
    const char *w = std::getenv("ZBOUND_WRITE_GOLDEN");
    const bool write = w && std::atoi(w) == version;
    auto manifest = write ? std::map<std::string, uint32_t>() : read_manifest(version);
    for (const Case &c : cases) {
        if (c.f64) run_case<double>(c, version, manifest, write);
        else run_case<float>(c, version, manifest, write);
    }
    if (write) {
        std::ofstream f(golden_dir(version) + "/MANIFEST");
        for (auto &kv : manifest) {
            char hex[16];
            std::snprintf(hex, sizeof hex, "%08x", kv.second);
            f << kv.first << " " << hex << "\n";
        }
    }
}

TEST(Golden, V1StreamsDecodeAndWriterIsStable) { check_archive(1, kV1Cases); }
TEST(Golden, V5StreamsDecodeAndWriterIsStable) { check_archive(5, kV5Cases); }
TEST(Golden, V6StreamsDecodeAndWriterIsStable) { check_archive(6, kV6Cases); }

}  // namespace
