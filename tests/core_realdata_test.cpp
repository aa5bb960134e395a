// Real fields (NASA CFD PLOT3D q files from ../shared/data): every variable at rel 1e-2, 1e-3, 1e-4, f32 and as
// f64, bound checked on every value. The HDF5/netCDF fields are covered through the plugin in python_tests/.
#include <gtest/gtest.h>
#include "test_util.h"

namespace {

class RealData : public ::testing::TestWithParam<const char *> {};

TEST_P(RealData, BoundHoldsOnEveryValue) {
    std::vector<float> all;
    std::vector<size_t> dims;
    const std::string path = std::string(ZBOUND_SHARED_DATA) + "/" + GetParam();
    ASSERT_TRUE(zbt::read_plot3d(path, all, dims)) << "cannot read " << path;
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
