// The interp pipeline (predictor=interp, encoder fast and ratio, format v3) on the GPU: CPU/GPU byte parity and
// cross decoding for f32 and f64, ranks 1-4, odd shapes (dims below 8 and not multiples of 8), special values, fill
// values, huge values, escaped anchors, ABS and REL at 1e-2 / 1e-3 / 1e-4, every real field of ../shared/data; the
// device-pointer API; corrupted streams answered with the same status by both decoders. Without a GPU every test
// skips visibly.
#include <cfloat>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <sstream>
#include <type_traits>
#include "gpu_test_util.h"
#include "zb_bytes.h"
#include "zb_crc32c.h"
#include "zb_ratio.h"
#if ZBOUND_TEST_CUDA
#include <cuda_runtime.h>
#endif

namespace {

// Every test runs once per encoder (the suite is parameterized on it): interp_params() and the checks read it.
zb_encoder g_encoder = ZB_ENC_FAST;

class GpuInterp : public ::testing::TestWithParam<zb_encoder> {
  protected:
    void SetUp() override { g_encoder = GetParam(); }
};

zb_params interp_params(zb_mode mode, double bound) {
    return gput::pipeline_params(ZB_PRED_INTERP, g_encoder, mode, bound);
}

std::string dims_text(const std::vector<size_t> &dims) {
    std::string s;
    for (size_t d : dims) s += (s.empty() ? "" : "x") + std::to_string(d);
    return s;
}

// Every finite non-fill value within eb, every other value (NaN, Inf, -0.0, fill) bit for bit.
template <typename T>
void expect_bound(const std::vector<T> &orig, const std::vector<T> &dec, double eb, const zb_params &p) {
    T fill{};
    if (p.has_fill) {
        const uint64_t fb = p.fill_bits;
        std::memcpy(&fill, &fb, sizeof(T));  // little-endian: the low bytes hold an f32 fill
    }
    size_t bad = 0;
    for (size_t i = 0; i < orig.size(); ++i) {
        const T a = orig[i], b = dec[i];
        const bool negz = a == 0 && std::signbit(a);
        const bool exact = !std::isfinite(a) || (p.has_fill && zbt::bits(a) == zbt::bits(fill)) || negz;
        const bool ok = exact ? zbt::bits(a) == zbt::bits(b) : std::fabs((double)a - (double)b) <= eb;
        if (ok) continue;
        if (++bad <= 5) ADD_FAILURE() << "value " << i << ": original " << a << " decoded " << b << " bound " << eb;
    }
    EXPECT_EQ(bad, 0u);
}

// CPU and GPU write the same bytes; each decoder reads the other's stream into the same values; every value is
// within the bound; and (when `expect_interp`) the stream really is an interp stream, not raw passthrough.
template <typename T>
void parity(const std::vector<T> &data, const std::vector<size_t> &dims, const zb_params &p, const std::string &what,
            bool expect_interp = true) {
    SCOPED_TRACE(what);
    zb_run_stats st{};
    const zbt::Stream cpu = gput::compress_on(ZB_BACKEND_CPU, data, dims, p);
    ASSERT_EQ(cpu.status, ZB_OK) << "CPU compress: " << zb_last_error();
    const zbt::Stream gpu = gput::compress_on(ZB_BACKEND_GPU, data, dims, p, &st);
    ASSERT_EQ(gpu.status, ZB_OK) << "GPU compress: " << zb_last_error();
    EXPECT_EQ(st.backend_used, ZB_BACKEND_GPU);
    EXPECT_TRUE(cpu.bytes == gpu.bytes) << "CPU and GPU streams differ: "
                                        << gput::first_difference(cpu.bytes, gpu.bytes);
    std::vector<T> from_cpu_stream(data.size()), from_gpu_stream(data.size());
    st = zb_run_stats{};
    ASSERT_EQ(zb_decompress(cpu.bytes.data(), cpu.bytes.size(), from_cpu_stream.data(), data.size() * sizeof(T),
                            ZB_BACKEND_GPU, &st),
              ZB_OK)
        << "GPU decompress: " << zb_last_error();
    EXPECT_EQ(st.backend_used, ZB_BACKEND_GPU);
    ASSERT_EQ(zb_decompress(gpu.bytes.data(), gpu.bytes.size(), from_gpu_stream.data(), data.size() * sizeof(T),
                            ZB_BACKEND_CPU, nullptr),
              ZB_OK)
        << "CPU decompress: " << zb_last_error();
    const size_t d = gput::first_value_difference(from_cpu_stream, from_gpu_stream);
    EXPECT_EQ(d, data.size()) << "GPU and CPU decoders differ at value " << d << ": " << from_cpu_stream[d] << " vs "
                              << from_gpu_stream[d];
    expect_bound(data, from_cpu_stream, zbt::abs_bound_of(cpu.bytes), p);
    zb_stream_info info;
    ASSERT_EQ(zb_stream_info_get(cpu.bytes.data(), cpu.bytes.size(), &info), ZB_OK);
    if (!expect_interp) return;
    EXPECT_EQ(info.raw, 0) << "stored raw, the interp path was not exercised";
    if (!info.raw) {
        // v4 only for ratio streams with run tokens
        EXPECT_EQ(info.format_version, info.encoder == ZB_ENC_RATIO && info.format_version == 4 ? 4 : 3);
        EXPECT_EQ(info.predictor, ZB_PRED_INTERP);
        EXPECT_EQ(info.encoder, p.encoder == ZB_ENC_AUTO ? info.encoder : p.encoder);
    }
}

const std::vector<std::vector<size_t>> kShapes = {
    {1},          {5},          {8},         {9},          {1000},       {100003},     {3, 5},     {7, 7},
    {8, 8},       {9, 17},      {33, 1},     {1, 257},     {63, 65},     {250, 301},   {2, 3, 4},  {7, 6, 5},
    {8, 8, 8},    {9, 9, 9},    {17, 1, 33}, {31, 40, 57}, {64, 33, 70}, {2, 3, 5, 7}, {3, 9, 10, 11},
};

template <typename T> void shapes_and_bounds() {
    int i = 0;
    for (const auto &dims : kShapes) {
        const auto data = zbt::smooth_field<T>(dims, 0.001, 7 + i++, 100.0);
        for (zb_mode mode : {ZB_MODE_ABS, ZB_MODE_REL})
            for (double b : {1e-2, 1e-3, 1e-4}) {
                const zb_params p = interp_params(mode, mode == ZB_MODE_ABS ? b * 20.0 : b);
                size_t n = 1;
                for (size_t d : dims) n *= d;
                parity(data, dims, p,
                       dims_text(dims) + (mode == ZB_MODE_ABS ? " abs " : " rel ") + std::to_string(b),
                       n >= 4096);  // tiny arrays may be stored raw
                if (::testing::Test::HasFatalFailure()) return;
            }
    }
}

TEST_P(GpuInterp, ShapesAndBoundsF32) {
    ZB_REQUIRE_GPU();
    shapes_and_bounds<float>();
}

TEST_P(GpuInterp, ShapesAndBoundsF64) {
    ZB_REQUIRE_GPU();
    shapes_and_bounds<double>();
}

// Large enough for many tiles and for segmented lattice scans in the decoder (1D: 8-point lattice lines).
template <typename T> void large() {
    for (const auto &dims : std::vector<std::vector<size_t>>{{6000001}, {1531, 1777}, {203, 190, 171}}) {
        const auto data = zbt::smooth_field<T>(dims, 0.01, 3, -50.0);
        parity(data, dims, interp_params(ZB_MODE_REL, 1e-3), dims_text(dims) + " rel 1e-3");
        if (::testing::Test::HasFatalFailure()) return;
    }
}

TEST_P(GpuInterp, LargeF32) {
    ZB_REQUIRE_GPU();
    large<float>();
}

TEST_P(GpuInterp, LargeF64) {
    ZB_REQUIRE_GPU();
    large<double>();
}

// NaN with payloads, +-Inf, -0.0, huge values, values beyond the quantizer's range, isolated spikes (escaped anchor
// deltas), runs of a fill value; with and without the fill value declared.
template <typename T> std::vector<T> special_field(const std::vector<size_t> &dims, uint32_t seed) {
    using U = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;
    auto v = zbt::smooth_field<T>(dims, 0.01, seed, 3.0);
    std::mt19937 rng(seed);
    const size_t n = v.size();
    auto nan_payload = [&](uint32_t pl) {
        U u = sizeof(T) == 8 ? (U)0x7FF8000000000000ull : (U)0x7FC00000u;
        u |= (U)(pl & 0xFFFF);
        T t;
        std::memcpy(&t, &u, sizeof t);
        return t;
    };
    for (size_t i = 0; i < n; i += 1 + rng() % 97) {
        switch (rng() % 9) {
            case 0: v[i] = nan_payload(rng()); break;
            case 1: v[i] = std::numeric_limits<T>::infinity(); break;
            case 2: v[i] = -std::numeric_limits<T>::infinity(); break;
            case 3: v[i] = (T)-0.0; break;
            case 4: v[i] = (T)0.0; break;
            case 5: v[i] = std::numeric_limits<T>::max(); break;
            case 6: v[i] = (T)((rng() & 1) ? 3e7 : -3e7); break;  // spike: escapes at anchors, exceptions elsewhere
            case 7: v[i] = (T)1e30; break;
            default: v[i] = std::numeric_limits<T>::denorm_min(); break;
        }
    }
    for (size_t i = 0; i < n; i += 1 + rng() % 700) {  // fill runs
        const size_t len = 1 + rng() % 60;
        for (size_t j = i; j < std::min(n, i + len); ++j) v[j] = (T)-9999.9;
    }
    return v;
}

template <typename T> void specials() {
    int seed = 11;
    for (const auto &dims : std::vector<std::vector<size_t>>{{20011}, {97, 131}, {19, 23, 41}, {4, 5, 6, 7}}) {
        const auto data = special_field<T>(dims, seed++);
        for (int fill = 0; fill < 2; ++fill)
            for (zb_mode mode : {ZB_MODE_ABS, ZB_MODE_REL}) {
                zb_params p = interp_params(mode, mode == ZB_MODE_ABS ? 1e-3 : 1e-4);
                p.has_fill = fill;
                const T fv = (T)-9999.9;
                p.fill_bits = zbt::bits(fv);
                parity(data, dims, p,
                       dims_text(dims) + (fill ? " fill" : " no fill") + (mode == ZB_MODE_ABS ? " abs" : " rel"),
                       false);
                if (::testing::Test::HasFatalFailure()) return;
            }
    }
}

TEST_P(GpuInterp, SpecialValuesF32) {
    ZB_REQUIRE_GPU();
    specials<float>();
}

TEST_P(GpuInterp, SpecialValuesF64) {
    ZB_REQUIRE_GPU();
    specials<double>();
}

// Anchors whose Lorenzo deltas exceed the radius: a steep ramp at a fine bound.
TEST_P(GpuInterp, EscapedAnchors) {
    ZB_REQUIRE_GPU();
    for (const auto &dims : std::vector<std::vector<size_t>>{{50000}, {130, 170}, {33, 41, 29}}) {
        size_t n = 1;
        for (size_t d : dims) n *= d;
        std::vector<double> v(n);
        std::mt19937 rng(5);
        // Spikes of 100..10^4 at a bound of 1e-4: quantizable (< 2^30 bins) but far beyond the radius.
        for (size_t i = 0; i < n; ++i)
            v[i] = (i % 8 == 0 && rng() % 4 == 0) ? 100.0 * (double)(1 + rng() % 100) : 0.001 * (double)i;
        const zb_params p = interp_params(ZB_MODE_ABS, 1e-4);
        const zbt::Stream s = gput::compress_on(ZB_BACKEND_CPU, v, dims, p);
        ASSERT_EQ(s.status, ZB_OK);
        zb_stream_info info;
        ASSERT_EQ(zb_stream_info_get(s.bytes.data(), s.bytes.size(), &info), ZB_OK);
        EXPECT_GT(info.escapes, 0u) << dims_text(dims) << ": the case must have escaped anchors";
        parity(v, dims, p, "escapes " + dims_text(dims), false);
        std::vector<float> f(v.begin(), v.end());
        parity(f, dims, p, "escapes f32 " + dims_text(dims), false);
    }
}

// Lossless (bound 0), constant arrays, a single value: every path through raw passthrough and all-exception streams.
TEST_P(GpuInterp, EdgeCases) {
    ZB_REQUIRE_GPU();
    const std::vector<size_t> dims = {37, 61};
    const auto data = zbt::smooth_field<float>(dims, 0.01, 1);
    parity(data, dims, interp_params(ZB_MODE_ABS, 0.0), "lossless", false);
    parity(std::vector<float>(5000, 2.5f), {5000}, interp_params(ZB_MODE_REL, 1e-3), "constant", false);
    parity(std::vector<double>(1, -0.0), {1}, interp_params(ZB_MODE_ABS, 1e-3), "one value", false);
    std::vector<float> all_nan(9000, std::numeric_limits<float>::quiet_NaN());
    parity(all_nan, {30, 300}, interp_params(ZB_MODE_REL, 1e-3), "all NaN", false);
}

// predictor=auto: the choice is made on the host from the data, so both backends write the same pipeline, and the GPU
// runs whichever it is (interp, or Lorenzo with this encoder): parity either way. The cases cover both outcomes with
// the ratio encoder (the noisier field at the finest bound gets Lorenzo + ratio).
TEST_P(GpuInterp, AutoPredictor) {
    ZB_REQUIRE_GPU();
    int interp_chosen = 0, lorenzo_chosen = 0;
    const std::pair<double, double> cases[] = {{0.0001, 1e-2}, {0.0001, 1e-3}, {0.01, 1e-4}};   // noise, bound
    for (const auto &nr : cases) {
        const double rel = nr.second;
        const std::vector<size_t> dims = {96, 128, 80};
        const auto data = zbt::smooth_field<float>(dims, nr.first, 9);
        zb_params p = zb_params_default();
        p.encoder = g_encoder;
        p.mode = ZB_MODE_REL;
        p.bound = rel;
        const std::string what = "predictor auto rel " + std::to_string(rel);
        const zbt::Stream cpu = gput::compress_on(ZB_BACKEND_CPU, data, dims, p);
        ASSERT_EQ(cpu.status, ZB_OK) << zb_last_error();
        zb_stream_info info;
        ASSERT_EQ(zb_stream_info_get(cpu.bytes.data(), cpu.bytes.size(), &info), ZB_OK);
        interp_chosen += info.predictor == ZB_PRED_INTERP;
        lorenzo_chosen += info.predictor == ZB_PRED_LORENZO;
        parity(data, dims, p, what + (info.predictor == ZB_PRED_INTERP ? ": interp" : ": Lorenzo"), false);
        // backend AUTO (large enough for the GPU) writes the same bytes
        const zbt::Stream any = gput::compress_on(ZB_BACKEND_AUTO, data, dims, p);
        ASSERT_EQ(any.status, ZB_OK) << zb_last_error();
        EXPECT_TRUE(any.bytes == cpu.bytes);
        if (::testing::Test::HasFatalFailure()) return;
    }
    std::printf("predictor auto chose interp %d times, Lorenzo %d times\n", interp_chosen, lorenzo_chosen);
    EXPECT_GT(interp_chosen, 0) << "auto never chose interp: the test no longer covers the GPU interp path";
    if (g_encoder == ZB_ENC_RATIO) {
        EXPECT_GT(lorenzo_chosen, 0) << "auto never chose Lorenzo + ratio: the test no longer covers it on the GPU";
    }
}

// ---- real data ---------------------------------------------------------------------------------------------------

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

// `field` numbers the field within the test: under ZBOUND_TEST_SAMPLE (the sanitizers) each field is checked at one
// of the three bounds, in turn (gput::sampled_variant).
template <typename T> void check_field(const std::string &dir, const Field &fd, size_t field) {
    size_t n = 1;
    for (size_t d : fd.dims) n *= d;
    std::vector<T> v(n);
    std::ifstream f(dir + "/" + fd.file, std::ios::binary);
    ASSERT_TRUE((bool)f.read(reinterpret_cast<char *>(v.data()), (std::streamsize)(n * sizeof(T))))
        << "cannot read " << fd.file;
    const double bounds[] = {1e-2, 1e-3, 1e-4};
    for (size_t b = 0; b < std::size(bounds); ++b) {
        if (!gput::sampled_variant(field, b, std::size(bounds))) continue;
        const double rel = bounds[b];
        zb_params p = interp_params(ZB_MODE_REL, rel);
        p.has_fill = fd.has_fill;
        p.fill_bits = fd.fill_bits;
        parity(v, fd.dims, p, fd.name + " rel " + std::to_string(rel), false);
        if (::testing::Test::HasFatalFailure()) return;
    }
}

TEST_P(GpuInterp, RealDataEveryFieldEveryBound) {
    ZB_REQUIRE_GPU();
    const std::string dir = fields_dir();
    const auto fields = read_manifest(dir);
    if (fields.empty())
        GTEST_SKIP() << "no extracted fields in " << dir
                     << ": build the gpu_fields target or run tests/gpu_make_fields.py DATA_DIR OUT_DIR and set "
                        "ZBOUND_GPU_FIELDS=OUT_DIR";
    size_t field = 0;
    for (const Field &fd : fields) {
        if (fd.dtype == "f64") check_field<double>(dir, fd, field++);
        else check_field<float>(dir, fd, field++);
    }
    std::printf("checked %zu fields x 3 bounds with the interp pipeline\n", fields.size());
}

// ---- device-pointer API ------------------------------------------------------------------------------------------

#if ZBOUND_TEST_CUDA
#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

struct DevBuf {
    uint8_t *p = nullptr;
    explicit DevBuf(size_t bytes) { (void)cudaMalloc(reinterpret_cast<void **>(&p), bytes ? bytes : 1); }
    ~DevBuf() { (void)cudaFree(p); }
};

template <typename T>
void device_round_trip(const std::vector<T> &data, const std::vector<size_t> &dims, const zb_params &p,
                       cudaStream_t stream, size_t misalign, const std::string &what) {
    SCOPED_TRACE(what);
    const zbt::Stream ref = gput::compress_on(ZB_BACKEND_CPU, data, dims, p);
    ASSERT_EQ(ref.status, ZB_OK);
    std::vector<T> ref_out(data.size());
    ASSERT_EQ(zb_decompress(ref.bytes.data(), ref.bytes.size(), ref_out.data(), ref_out.size() * sizeof(T),
                            ZB_BACKEND_CPU, nullptr),
              ZB_OK);
    const size_t vbytes = data.size() * sizeof(T);
    const size_t cap = zb_compress_bound(zbt::dtype_of<T>(), data.size());
    DevBuf src(vbytes), sbuf(cap + misalign), out(vbytes + misalign);
    CUDA_OK(cudaMemcpy(src.p, data.data(), vbytes, cudaMemcpyHostToDevice));
    size_t len = 0;
    zb_run_stats st{};
    ASSERT_EQ(zb_compress_device(&p, zbt::dtype_of<T>(), src.p, (int)dims.size(), dims.data(), sbuf.p + misalign, cap,
                                 &len, stream, &st),
              ZB_OK)
        << zb_last_error();
    EXPECT_EQ(st.backend_used, ZB_BACKEND_GPU);
    std::vector<uint8_t> got(len);
    CUDA_OK(cudaMemcpy(got.data(), sbuf.p + misalign, len, cudaMemcpyDeviceToHost));
    EXPECT_TRUE(got == ref.bytes) << "device stream differs from the CPU's: " << gput::first_difference(ref.bytes, got);
    // The CPU's stream, decoded from device memory into device memory.
    CUDA_OK(cudaMemcpy(sbuf.p + misalign, ref.bytes.data(), ref.bytes.size(), cudaMemcpyHostToDevice));
    ASSERT_EQ(zb_decompress_device(sbuf.p + misalign, ref.bytes.size(), out.p + misalign, vbytes, stream, &st), ZB_OK)
        << zb_last_error();
    std::vector<T> dec(data.size());
    CUDA_OK(cudaMemcpy(dec.data(), out.p + misalign, vbytes, cudaMemcpyDeviceToHost));
    const size_t d = gput::first_value_difference(ref_out, dec);
    EXPECT_EQ(d, data.size()) << "device decode differs from the CPU's at value " << d;
    // Capacity one byte short, and a flipped payload byte (the device path checks the payload checksum).
    EXPECT_EQ(zb_compress_device(&p, zbt::dtype_of<T>(), src.p, (int)dims.size(), dims.data(), sbuf.p,
                                 ref.bytes.size() - 1, &len, stream, nullptr),
              ZB_ERR_BUFFER_TOO_SMALL);
    std::vector<uint8_t> bad = ref.bytes;
    bad[bad.size() - 1] ^= 0x10;
    CUDA_OK(cudaMemcpy(sbuf.p, bad.data(), bad.size(), cudaMemcpyHostToDevice));
    EXPECT_EQ(zb_decompress_device(sbuf.p, bad.size(), out.p, vbytes, stream, nullptr), ZB_ERR_CORRUPT);
}

TEST_P(GpuInterp, DeviceApi) {
    ZB_REQUIRE_GPU();
    cudaStream_t stream = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    device_round_trip(zbt::smooth_field<float>({61, 77, 45}, 0.01, 2), {61, 77, 45},
                      interp_params(ZB_MODE_REL, 1e-3), nullptr, 0, "f32 3D default stream");
    device_round_trip(zbt::smooth_field<double>({300, 411}, 0.01, 3), {300, 411}, interp_params(ZB_MODE_ABS, 1e-3),
                      stream, 3, "f64 2D own stream misaligned");
    device_round_trip(special_field<float>({41, 53, 12}, 4), {41, 53, 12}, interp_params(ZB_MODE_REL, 1e-4), stream,
                      1, "f32 specials");
    device_round_trip(zbt::smooth_field<float>({100000}, 0.01, 5), {100000}, interp_params(ZB_MODE_REL, 1e-2), stream,
                      0, "f32 1D");
    (void)cudaStreamDestroy(stream);
}
#endif

// ---- corrupted streams -------------------------------------------------------------------------------------------

// Both decoders give the same status, and the same values when both succeed.
template <typename T>
void same_answer(const std::vector<uint8_t> &s, size_t n, const std::string &where, int *errors = nullptr) {
    std::vector<T> a(n), b(n);
    const zb_status sc = zb_decompress(s.data(), s.size(), a.data(), n * sizeof(T), ZB_BACKEND_CPU, nullptr);
    const std::string cpu_msg = zb_last_error();
    const zb_status sg = zb_decompress(s.data(), s.size(), b.data(), n * sizeof(T), ZB_BACKEND_GPU, nullptr);
    EXPECT_EQ(sc, sg) << where << "; CPU says: " << cpu_msg << "; GPU says: " << zb_last_error();
    if (sc == ZB_OK && sg == ZB_OK) {
        const size_t d = gput::first_value_difference(a, b);
        EXPECT_EQ(d, n) << where << ": decoders differ at value " << d;
    } else if (errors) {
        ++*errors;
    }
}

// A field with every segment in use: smooth values, NaN runs and outliers (exceptions), spikes (escaped anchors).
template <typename T> std::vector<T> busy_field(const std::vector<size_t> &dims, uint32_t seed) {
    auto v = zbt::smooth_field<T>(dims, 0.01, seed, 5.0);
    std::mt19937 rng(seed);
    for (size_t i = 0; i < v.size(); i += 8 * (1 + rng() % 30)) v[i] += (T)(((rng() & 1) ? 1 : -1) * 9e4);
    for (size_t i = 0; i < v.size(); i += 1 + rng() % 500) {
        const size_t len = 1 + rng() % 40;
        const T val = (rng() & 1) ? std::numeric_limits<T>::quiet_NaN() : (T)1e30;
        for (size_t j = i; j < std::min(v.size(), i + len); ++j) v[j] = val;
    }
    return v;
}

template <typename T> void corrupt(const std::vector<size_t> &dims, uint32_t seed, int trials) {
    const auto data = busy_field<T>(dims, seed);
    const zb_params p = interp_params(ZB_MODE_ABS, 1e-4);
    const zbt::Stream good = gput::compress_on(ZB_BACKEND_CPU, data, dims, p);
    ASSERT_EQ(good.status, ZB_OK);
    zb::Header h;
    std::string msg;
    ASSERT_EQ(zb::read_header(good.bytes.data(), good.bytes.size(), h, msg, false), ZB_OK);
    ASSERT_FALSE(h.flags & zb::kFlagRaw) << "the test field must not be stored raw";
    ASSERT_EQ(h.version, h.encoder == zb::kEncRatio && h.version == 4 ? 4 : 3);  // v4: ratio with run tokens
    ASSERT_GT(h.escapes, 0u);
    ASSERT_GT(h.exceptions, 0u);
    const size_t hb = h.header_bytes(), n = data.size();

    // Random flips in random segments, resealed so that the decoders' own checks answer.
    std::mt19937 rng(seed);
    int errors = 0;
    trials = gput::sampled_trials(trials);
    for (int t = 0; t < trials; ++t) {
        std::vector<uint8_t> s = good.bytes;
        int sg;
        do sg = (int)(rng() % h.nsegments); while (h.seg[sg].length == 0);
        const int flips = 1 + (int)(rng() % 3);
        std::string where = "segment " + std::to_string(sg) + " bytes";
        for (int f = 0; f < flips; ++f) {
            const size_t off = hb + h.seg[sg].offset + rng() % h.seg[sg].length;
            s[off] ^= (uint8_t)(1 + rng() % 255);
            where += " " + std::to_string(off - hb - h.seg[sg].offset);
        }
        std::vector<T> out(n);
        EXPECT_EQ(zb_decompress(s.data(), s.size(), out.data(), n * sizeof(T), ZB_BACKEND_GPU, nullptr),
                  ZB_ERR_CORRUPT)
            << "unsealed " << where;
        ASSERT_TRUE(gput::reseal_parsed(s));
        same_answer<T>(s, n, where, &errors);
    }
    std::printf("%d of %d resealed corruptions were errors on both decoders\n", errors, trials);
    EXPECT_GT(errors, 0);

    // Targeted: the parameters (segment 0).
    auto with_param = [&](size_t off, uint8_t v) {
        std::vector<uint8_t> s = good.bytes;
        s[hb + off] = v;
        EXPECT_TRUE(gput::reseal_parsed(s));
        return s;
    };
    same_answer<T>(with_param(0, 1), n, "radius changed");
    same_answer<T>(with_param(4, 1), n, "reserved byte set");
    same_answer<T>(with_param(8 + 2, 7), n, "bad dim order");
    same_answer<T>(with_param(8 + 5, 2), n, "bad spline choice");
    same_answer<T>(with_param(8 + 16 + 7, 0x40), n, "level bound changed (valid)");
    same_answer<T>(with_param(8 + 40 + 7, 0xFF), n, "anchor bound NaN");

    // Targeted: one escape fewer / more than the anchors use (header count, flag and segment length kept consistent).
    // The escape segment follows the parameters and the encoder's segments (it was fixed at 3, the fast encoder's,
    // which with the ratio encoder changed a ratio segment instead, caught by the header check alone).
    const int esc_seg = 1 + (h.encoder == zb::kEncRatio ? zb::kRatioSegmentCount : zb::kFastCodeSegmentCount);
    for (int delta : {-1, 1}) {
        const std::vector<uint8_t> s = zbt::with_escape_count(good.bytes, esc_seg, delta);
        std::vector<T> out(n);
        EXPECT_EQ(zb_decompress(s.data(), s.size(), out.data(), n * sizeof(T), ZB_BACKEND_CPU, nullptr), ZB_ERR_CORRUPT)
            << "escapes " << delta << ": " << zb_last_error();
        same_answer<T>(s, n, "escapes " + std::to_string(delta));
    }
}

TEST_P(GpuInterp, CorruptStreamsF32) {
    ZB_REQUIRE_GPU();
    corrupt<float>({4000, 13}, 1, 300);
    corrupt<float>({45, 37, 29}, 2, 150);
}

TEST_P(GpuInterp, CorruptStreamsF64) {
    ZB_REQUIRE_GPU();
    corrupt<double>({70001}, 3, 150);
    corrupt<double>({23, 19, 70}, 4, 150);
}

INSTANTIATE_TEST_SUITE_P(Encoders, GpuInterp, ::testing::Values(ZB_ENC_FAST, ZB_ENC_RATIO),
                         [](const ::testing::TestParamInfo<zb_encoder> &i) {
                             return std::string(i.param == ZB_ENC_RATIO ? "ratio" : "fast");
                         });

}  // namespace
