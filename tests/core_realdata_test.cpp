// Real fields (NASA CFD PLOT3D q files from ../shared/data): every variable at rel 1e-2, 1e-3, 1e-4, f32 and as
// f64, bound checked on every value. The HDF5/netCDF fields are covered through the plugin in python_tests/.
#include <gtest/gtest.h>
#include <fstream>
#include "test_util.h"

namespace {

// Reads a PLOT3D q file: 3 big-endian int32 dims, 4 big-endian float32, then 5 x nk x nj x ni big-endian floats.
bool read_plot3d(const std::string &path, std::vector<float> &out, std::vector<size_t> &dims) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return false;
    std::vector<uint8_t> raw((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (raw.size() < 28) return false;
    auto be32 = [&](size_t off) {
        return (uint32_t)raw[off] << 24 | (uint32_t)raw[off + 1] << 16 | (uint32_t)raw[off + 2] << 8 | raw[off + 3];
    };
    const size_t ni = be32(0), nj = be32(4), nk = be32(8);
    const size_t n = 5 * nk * nj * ni;
    if (raw.size() < 28 + 4 * n) return false;
    out.resize(n);
    for (size_t i = 0; i < n; ++i) {
        const uint32_t u = be32(28 + 4 * i);
        std::memcpy(&out[i], &u, 4);
    }
    dims = {5, nk, nj, ni};
    return true;
}

class RealData : public ::testing::TestWithParam<const char *> {};

TEST_P(RealData, BoundHoldsOnEveryValue) {
    std::vector<float> all;
    std::vector<size_t> dims;
    const std::string path = std::string(ZBOUND_SHARED_DATA) + "/" + GetParam();
    ASSERT_TRUE(read_plot3d(path, all, dims)) << "cannot read " << path;
    const size_t per_var = all.size() / 5;
    const std::vector<size_t> vdims{dims[1], dims[2], dims[3]};
    for (int var = 0; var < 5; ++var) {
        std::vector<float> v(all.begin() + (long)(var * per_var), all.begin() + (long)((var + 1) * per_var));
        std::vector<double> vd(v.begin(), v.end());
        for (double rel : {1e-2, 1e-3, 1e-4}) {
            zb_params p = zb_params_default();
            p.mode = ZB_MODE_REL;
            p.bound = rel;
            const auto s = zbt::compress(v, vdims, p);
            ASSERT_EQ(s.status, ZB_OK);
            std::vector<float> out(v.size());
            ASSERT_EQ(zbt::decompress(s.bytes, out), ZB_OK);
            EXPECT_EQ(zbt::count_violations(v, out, zbt::abs_bound_of(s.bytes)), 0u) << "var " << var;
            EXPECT_LT(s.bytes.size(), v.size() * 4) << "var " << var << " rel " << rel;
            const auto sd = zbt::compress(vd, vdims, p);
            ASSERT_EQ(sd.status, ZB_OK);
            std::vector<double> outd(vd.size());
            ASSERT_EQ(zbt::decompress(sd.bytes, outd), ZB_OK);
            EXPECT_EQ(zbt::count_violations(vd, outd, zbt::abs_bound_of(sd.bytes)), 0u) << "f64 var " << var;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Plot3D, RealData, ::testing::Values("nasa_cfd_combq.bin", "nasa_cfd_postq.bin"));

}  // namespace
