// Archived format-v1 streams (tests/golden/v1, made from real fields in ../shared/data by this test with
// ZBOUND_WRITE_GOLDEN=1). Every later version must
//   - decode them to the identical array (CRC-32C of the decoded bytes is in the manifest), within the bound of
//     the original field, and
//   - still write exactly these bytes for the same input while the format version is 1: a change of the writer
//     that alters the bytes needs a format version bump (and new golden files beside these).
#include <gtest/gtest.h>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include "test_util.h"
#include "zb_crc32c.h"

namespace {

const std::string kGoldenDir = std::string(ZBOUND_SOURCE_DIR) + "/tests/golden/v1";

bool read_plot3d_var(const std::string &path, int var, std::vector<float> &out, std::vector<size_t> &dims) {
    std::ifstream f(path, std::ios::binary);
    std::vector<uint8_t> raw((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (raw.size() < 28) return false;
    auto be32 = [&](size_t o) {
        return (uint32_t)raw[o] << 24 | (uint32_t)raw[o + 1] << 16 | (uint32_t)raw[o + 2] << 8 | raw[o + 3];
    };
    const size_t ni = be32(0), nj = be32(4), nk = be32(8), per = ni * nj * nk;
    if (raw.size() < 28 + 4 * 5 * per) return false;
    out.resize(per);
    for (size_t i = 0; i < per; ++i) {
        const uint32_t u = be32(28 + 4 * (var * per + i));
        std::memcpy(&out[i], &u, 4);
    }
    dims = {nk, nj, ni};
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
};

const Case kCases[] = {
    {"combq_v0_f32_rel1e-3", "nasa_cfd_combq.bin", 0, false, ZB_MODE_REL, 1e-3, false},
    {"postq_v4_f32_abs1e-4_specials", "nasa_cfd_postq.bin", 4, false, ZB_MODE_ABS, 1e-4, true},
    {"combq_v3_f64_rel1e-2_specials", "nasa_cfd_combq.bin", 3, true, ZB_MODE_REL, 1e-2, true},
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

std::map<std::string, uint32_t> read_manifest() {
    std::map<std::string, uint32_t> m;
    std::ifstream f(kGoldenDir + "/MANIFEST");
    std::string name, hex;
    while (f >> name >> hex) m[name] = (uint32_t)std::stoul(hex, nullptr, 16);
    return m;
}

template <typename T> void run_case(const Case &c, std::map<std::string, uint32_t> &manifest, bool write) {
    std::vector<float> v32;
    std::vector<size_t> dims;
    ASSERT_TRUE(read_plot3d_var(std::string(ZBOUND_SHARED_DATA) + "/" + c.file, c.var, v32, dims));
    std::vector<T> data(v32.begin(), v32.end());
    if (c.specials) add_specials(data);
    zb_params p = zb_params_default();
    p.mode = c.mode;
    p.bound = c.bound;
    p.predictor = ZB_PRED_LORENZO;  // the v1 pipeline: these files archive format v1
    p.encoder = ZB_ENC_FAST;
    p.backend = ZB_BACKEND_CPU;
    if (c.specials) {
        p.has_fill = 1;
        p.fill_bits = zbt::bits((T)kFill);
    }
    const auto s = zbt::compress(data, dims, p);
    ASSERT_EQ(s.status, ZB_OK);
    const std::string path = kGoldenDir + "/" + c.name + ".zbs";
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
    EXPECT_EQ(zbt::count_violations(data, out, zbt::abs_bound_of(golden), c.specials, (T)kFill), 0u);
    EXPECT_EQ(s.bytes, golden) << c.name << ": the writer's bytes changed; bump the format version";
}

TEST(Golden, V1StreamsDecodeAndWriterIsStable) {
    const bool write = std::getenv("ZBOUND_WRITE_GOLDEN") != nullptr;
    auto manifest = write ? std::map<std::string, uint32_t>() : read_manifest();
    for (const Case &c : kCases) {
        if (c.f64) run_case<double>(c, manifest, write);
        else run_case<float>(c, manifest, write);
    }
    if (write) {
        std::ofstream f(kGoldenDir + "/MANIFEST");
        for (auto &kv : manifest) {
            char hex[16];
            std::snprintf(hex, sizeof hex, "%08x", kv.second);
            f << kv.first << " " << hex << "\n";
        }
    }
}

}  // namespace
