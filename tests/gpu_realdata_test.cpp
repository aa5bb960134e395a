// CPU/GPU parity on every floating-point field of ../shared/data at REL 1e-2, 1e-3 and 1e-4, with the declared
// fill value where the file has one, for the Lorenzo predictor with the fast encoder (format v1) and with the ratio
// encoder (format v2/v4). The fields are read from raw files that tests/gpu_make_fields.py extracts
// (build target `gpu_fields`, or run it by hand and point ZBOUND_GPU_FIELDS at the output directory).
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include "gpu_test_util.h"

namespace {

struct Field {
    std::string name, dtype, file;
    bool has_fill = false;
    uint64_t fill_bits = 0;
    std::vector<size_t> dims;
};

std::string fields_dir() {
    const char *e = std::getenv("ZBOUND_GPU_FIELDS");
    return e && *e ? e : ZBOUND_GPU_FIELDS_DIR;
}

std::vector<Field> read_manifest(const std::string &dir) {
    std::vector<Field> out;
    std::ifstream f(dir + "/manifest.tsv");
    std::string line;
    while (std::getline(f, line)) {
        std::istringstream ls(line);
        Field fd;
        std::string fill, dims;
        if (!std::getline(ls, fd.name, '\t') || !std::getline(ls, fd.dtype, '\t') || !std::getline(ls, fill, '\t') ||
            !std::getline(ls, dims, '\t') || !std::getline(ls, fd.file, '\t'))
            continue;
        if (fill != "-") {
            fd.has_fill = true;
            fd.fill_bits = std::strtoull(fill.c_str(), nullptr, 16);
        }
        std::istringstream ds(dims);
        std::string d;
        while (std::getline(ds, d, ',')) fd.dims.push_back((size_t)std::strtoull(d.c_str(), nullptr, 10));
        out.push_back(fd);
    }
    return out;
}

template <typename T> bool read_raw(const std::string &path, size_t n, std::vector<T> &v) {
    std::ifstream f(path, std::ios::binary);
    v.resize(n);
    return (bool)f.read(reinterpret_cast<char *>(v.data()), (std::streamsize)(n * sizeof(T)));
}

// `field` numbers the field within the test: under ZBOUND_TEST_SAMPLE (the sanitizers) each field is checked at one
// of the three bounds, in turn (gput::sampled_variant).
template <typename T> void check_field(const std::string &dir, const Field &fd, zb_encoder encoder, size_t field) {
    size_t n = 1;
    for (size_t d : fd.dims) n *= d;
    std::vector<T> v;
    ASSERT_TRUE(read_raw(dir + "/" + fd.file, n, v)) << "cannot read " << fd.file;
    const double bounds[] = {1e-2, 1e-3, 1e-4};
    for (size_t b = 0; b < std::size(bounds); ++b) {
        if (!gput::sampled_variant(field, b, std::size(bounds))) continue;
        const double rel = bounds[b];
        zb_params p = gput::pipeline_params(ZB_PRED_LORENZO, encoder, ZB_MODE_REL, rel);
        p.has_fill = fd.has_fill;
        p.fill_bits = fd.fill_bits;
        gput::expect_parity(v, fd.dims, p, fd.name + " rel " + std::to_string(rel));
        if (::testing::Test::HasFatalFailure()) return;
    }
}

void every_field(zb_encoder encoder) {
    ZB_REQUIRE_GPU();
    const std::string dir = fields_dir();
    const auto fields = read_manifest(dir);
    if (fields.empty())
        GTEST_SKIP() << "no extracted fields in " << dir
                     << ": build the gpu_fields target or run tests/gpu_make_fields.py DATA_DIR OUT_DIR and set "
                        "ZBOUND_GPU_FIELDS=OUT_DIR";
    size_t field = 0;
    for (const Field &fd : fields) {
        if (fd.dtype == "f64") check_field<double>(dir, fd, encoder, field++);
        else check_field<float>(dir, fd, encoder, field++);
    }
    std::printf("checked %zu fields x 3 bounds (Lorenzo + %s)\n", fields.size(),
                encoder == ZB_ENC_RATIO ? "ratio" : "fast");
}

TEST(GpuRealData, EveryFieldEveryBound) { every_field(ZB_ENC_FAST); }
TEST(GpuRealData, LorenzoRatioEveryFieldEveryBound) { every_field(ZB_ENC_RATIO); }

}  // namespace
