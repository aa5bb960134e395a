// Thread safety: the C API and the HDF5 filter function are reentrant. 8 threads compress and decompress different
// arrays at the same time and every result is byte-identical to a serial run of the same call; error messages stay
// per thread. Run in the normal build and under ThreadSanitizer (ZBOUND_TSAN, scripts/test.sh).
//
// The filter test takes the H5Z class from the plugin's own H5PLget_plugin_info (as HDF5 does), gets valid
// cd_values from a dataset created through HDF5 (so set_local wrote them), and calls the class's filter callback
// directly on 8 threads: this is what an HDF5 that runs filters on several threads does (HDF5 2.3).
#include <gtest/gtest.h>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>
#include "rel_util.h"

#ifdef ZBOUND_REL_HDF5
#include <dlfcn.h>
#include <hdf5.h>
#include <unistd.h>
#include "zbound_filter.h"
#endif

namespace {

constexpr int kThreads = 8;

// Eight different arrays: both dtypes, ranks 1-4, abs and rel, lossless, specials and fill values; five pinned to the
// v1 pipeline (Lorenzo + fast), one to Lorenzo + ratio (format v2/v4), two on the interp predictor (both backends
// run every pipeline).
std::vector<relt::Case> eight_cases() {
    std::vector<relt::Case> cs;
    cs.push_back(relt::make_case<float>({97, 211}, ZB_MODE_REL, 1e-3, 1, true));
    cs.push_back(relt::make_case<double>({13, 40, 33}, ZB_MODE_ABS, 1e-4, 2, true, true));
    cs.push_back(relt::make_case<float>({50001}, ZB_MODE_ABS, 1e-2, 3, false));
    cs.back().params.predictor = ZB_PRED_LORENZO;
    cs.back().params.encoder = ZB_ENC_RATIO;
    cs.push_back(relt::make_case<double>({3, 5, 17, 64}, ZB_MODE_REL, 1e-2, 4, true));
    cs.back().params.predictor = ZB_PRED_INTERP;   // format v2
    cs.push_back(relt::make_case<float>({1, 300, 1, 77}, ZB_MODE_ABS, 0.0, 5, true));   // lossless
    cs.push_back(relt::make_case<float>({64, 64, 16}, ZB_MODE_REL, 1e-5, 6, true, true));
    cs.push_back(relt::make_case<double>({20011}, ZB_MODE_ABS, 1e-9, 7, false));        // escapes
    cs.push_back(relt::make_case<float>({70, 11, 13}, ZB_MODE_REL, 1e-2, 8, false));
    cs.back().params.predictor = ZB_PRED_INTERP;
    for (auto &c : cs)
        if (c.params.predictor == ZB_PRED_AUTO) {
            c.params.predictor = ZB_PRED_LORENZO;
            c.params.encoder = ZB_ENC_FAST;
        }
    return cs;
}

// Runs every case on `threads` OS threads at once, each thread `rounds` times over its case (thread i starts with
// case i and moves on to the next), and compares with the serial references.
void concurrent_matches_serial(zb_backend backend, zb_backend dbackend, int cpu_threads_per_call, int rounds) {
    const std::vector<relt::Case> cs = eight_cases();
    std::vector<relt::Result> ref;
    for (const auto &c : cs) {
        ref.push_back(relt::run(c, ZB_BACKEND_CPU, 1, ZB_BACKEND_CPU));
        ASSERT_EQ(ref.back().status, ZB_OK) << zb_last_error();
        ASSERT_EQ(ref.back().dstatus, ZB_OK) << zb_last_error();
        ASSERT_EQ(relt::violations(c, ref.back().decoded, relt::stream_eb(ref.back().stream)), 0u);
    }
    std::atomic<int> mismatches{0}, failures{0}, ready{0};
    std::vector<std::string> notes(kThreads);
    std::vector<std::thread> pool;
    for (int t = 0; t < kThreads; ++t) {
        pool.emplace_back([&, t] {
            ready.fetch_add(1);
            while (ready.load() < kThreads) std::this_thread::yield();   // start together
            for (int r = 0; r < rounds; ++r) {
                const size_t k = (size_t)(t + r) % cs.size();
                const relt::Result got = relt::run(cs[k], backend, cpu_threads_per_call, dbackend);
                if (got.status != ZB_OK || got.dstatus != ZB_OK) {
                    failures.fetch_add(1);
                    notes[t] = "case " + std::to_string(k) + ": " + zb_last_error();
                    continue;
                }
                if (got.stream != ref[k].stream || got.decoded != ref[k].decoded) {
                    mismatches.fetch_add(1);
                    notes[t] = "case " + std::to_string(k) + " differs from the serial run";
                }
                // Cross-decoding: this thread decodes the reference stream of another thread's case.
                const size_t o = (k + 3) % cs.size();
                std::vector<uint8_t> out(ref[o].decoded.size());
                if (zb_decompress(ref[o].stream.data(), ref[o].stream.size(), out.data(), out.size(), dbackend,
                                  nullptr) != ZB_OK ||
                    out != ref[o].decoded) {
                    mismatches.fetch_add(1);
                    notes[t] = "cross decode of case " + std::to_string(o) + " differs";
                }
            }
        });
    }
    for (auto &th : pool) th.join();
    for (int t = 0; t < kThreads; ++t)
        if (!notes[t].empty()) ADD_FAILURE() << "thread " << t << ": " << notes[t];
    EXPECT_EQ(failures.load(), 0);
    EXPECT_EQ(mismatches.load(), 0);
}

TEST(ThreadSafety, CpuEightThreadsSingleThreadedCalls) {
    concurrent_matches_serial(ZB_BACKEND_CPU, ZB_BACKEND_CPU, 1, 6);
}

// Each call also uses OpenMP inside (nested in the 8 OS threads): same bytes.
TEST(ThreadSafety, CpuEightThreadsWithOpenMPInside) {
    concurrent_matches_serial(ZB_BACKEND_CPU, ZB_BACKEND_CPU, 3, 3);
}

// AUTO (what the filter uses): on a machine without a GPU this is the CPU; with a GPU, arrays above
// ZBOUND_GPU_MIN_BYTES go to the GPU. Either way: identical to the serial CPU run.
TEST(ThreadSafety, AutoBackendEightThreads) { concurrent_matches_serial(ZB_BACKEND_AUTO, ZB_BACKEND_AUTO, 0, 3); }

TEST(ThreadSafety, GpuEightThreads) {
    REL_REQUIRE_GPU();
    concurrent_matches_serial(ZB_BACKEND_GPU, ZB_BACKEND_GPU, 0, 6);
}

// zb_last_error() is per thread: each thread's failure message survives the other threads' failures and successes.
TEST(ThreadSafety, LastErrorIsPerThread) {
    std::atomic<int> phase{0}, bad{0};
    std::vector<std::thread> pool;
    const relt::Case ok = relt::make_case<float>({1000}, ZB_MODE_ABS, 1e-3, 9, false);
    for (int t = 0; t < kThreads; ++t) {
        pool.emplace_back([&, t] {
            zb_params p = zb_params_default();
            p.bound = -(double)(t + 1);   // refused; the message quotes the bound, which names the thread
            float x = 1.0f, out[64];
            size_t len = 0, dim = 1;
            if (zb_compress(&p, ZB_F32, &x, 1, &dim, out, sizeof out, &len, nullptr) != ZB_ERR_INVALID_ARG) bad++;
            const std::string mine = zb_last_error();
            if (mine.find(std::to_string(-(t + 1))) == std::string::npos) bad++;
            phase.fetch_add(1);
            while (phase.load() < kThreads) std::this_thread::yield();
            // Other threads fail and succeed meanwhile; a success does not clear or change this thread's message.
            for (int i = 0; i < 3; ++i) relt::run(ok, ZB_BACKEND_CPU, 1, ZB_BACKEND_CPU);
            if (mine != zb_last_error()) bad++;
        });
    }
    for (auto &th : pool) th.join();
    EXPECT_EQ(bad.load(), 0);
}

#ifdef ZBOUND_REL_HDF5

// The filter class as HDF5 gets it: dlopen the plugin, call H5PLget_plugin_info.
// The plugin file: HDF5_PLUGIN_PATH/libh5z_zbound.so when set (ctest sets it), else the one this build made.
std::string plugin_file() {
    const char *dir = std::getenv("HDF5_PLUGIN_PATH");
    if (dir && *dir && !std::strchr(dir, ':')) return std::string(dir) + "/libh5z_zbound.so";
    return ZBOUND_PLUGIN_FILE;
}

const H5Z_class2_t *plugin_class() {
    void *h = dlopen(plugin_file().c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) return nullptr;
    using Info = const void *(*)();
    auto info = reinterpret_cast<Info>(dlsym(h, "H5PLget_plugin_info"));
    return info ? static_cast<const H5Z_class2_t *>(info()) : nullptr;
}

// The 13 cd_values that set_local writes for a dataset of `type` with this chunk shape and these user words.
std::vector<unsigned> dataset_cd_values(hid_t type, const std::vector<hsize_t> &chunk, const std::vector<unsigned> &user,
                                        const float *fill) {
    std::vector<unsigned> cd;
    char path[] = "/tmp/zbound_rel_threads_XXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0) return cd;
    close(fd);
    const hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    std::vector<hsize_t> dims(chunk);
    for (auto &d : dims) d *= 2;
    const hid_t sp = H5Screate_simple((int)dims.size(), dims.data(), nullptr);
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, (int)chunk.size(), chunk.data());
    if (fill) H5Pset_fill_value(dcpl, H5T_NATIVE_FLOAT, fill);
    H5Pset_filter(dcpl, ZBOUND_H5Z_FILTER, H5Z_FLAG_MANDATORY, user.size(), user.data());
    const hid_t d = H5Dcreate2(f, "x", type, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (d >= 0) {
        const hid_t plist = H5Dget_create_plist(d);
        unsigned flags = 0, buf[32];
        size_t n = 32;
        if (H5Pget_filter_by_id2(plist, ZBOUND_H5Z_FILTER, &flags, &n, buf, 0, nullptr, nullptr) >= 0)
            cd.assign(buf, buf + n);
        H5Pclose(plist);
        H5Dclose(d);
    }
    H5Pclose(dcpl);
    H5Sclose(sp);
    H5Fclose(f);
    std::remove(path);
    return cd;
}

struct FilterJob {
    std::vector<unsigned> cd;
    std::vector<uint8_t> chunk;      // raw chunk bytes as HDF5 hands them to the filter
    std::vector<uint8_t> stream;     // serial forward result
    std::vector<uint8_t> decoded;    // serial reverse result
};

// Calls the filter callback on a copy of `in` in HDF5-allocated memory, as HDF5 does. Returns the output bytes
// (empty on failure).
std::vector<uint8_t> call_filter(H5Z_func_t fn, unsigned flags, const std::vector<unsigned> &cd,
                                 const std::vector<uint8_t> &in) {
    void *buf = H5allocate_memory(in.size(), false);
    std::memcpy(buf, in.data(), in.size());
    size_t buf_size = in.size();
    const size_t r = fn(flags, cd.size(), cd.data(), in.size(), &buf_size, &buf);
    std::vector<uint8_t> out;
    if (r) out.assign(static_cast<uint8_t *>(buf), static_cast<uint8_t *>(buf) + r);
    H5free_memory(buf);
    return out;
}

TEST(ThreadSafety, FilterFunctionEightThreads) {
    const H5Z_class2_t *cls = plugin_class();
    ASSERT_NE(cls, nullptr) << "cannot load " << plugin_file() << ": " << dlerror();
    ASSERT_EQ(cls->id, ZBOUND_H5Z_FILTER);
    ASSERT_NE(cls->filter, nullptr);
    const float fill = -9999.9f;
    // Eight datasets: f32/f64, little/big endian, abs/rel, with and without a fill value.
    struct Spec {
        hid_t type;
        std::vector<hsize_t> chunk;
        std::vector<unsigned> user;
        bool with_fill;
    };
    const std::vector<Spec> specs = {
        {H5T_IEEE_F32LE, {40, 64}, {1, 0, 0x3F50624D, 0xD2F1A9FC, 0, 0}, false},   // abs 1e-3
        {H5T_IEEE_F64LE, {8, 20, 30}, {1, 1, 0x3F1A36E2, 0xEB1C432D}, false},        // rel 1e-4
        {H5T_IEEE_F32BE, {5000}, {1, 1}, false},                                     // rel default
        {H5T_IEEE_F32LE, {16, 16, 16}, {1, 0, 0x3F847AE1, 0x47AE147B, 1, 1}, true},  // abs 1e-2, fill
        {H5T_IEEE_F64BE, {70, 70}, {1, 0, 0x3EE4F8B5, 0x88E368F1}, false},           // abs 1e-5
        {H5T_IEEE_F32LE, {3, 4, 5, 60}, {}, false},                                  // all defaults
        {H5T_IEEE_F64LE, {999}, {1, 0, 0, 0}, false},                                // lossless
        {H5T_IEEE_F32LE, {100, 33}, {1, 1, 0x3F50624D, 0xD2F1A9FC, 1, 0}, true},     // rel 1e-3, fill
    };
    std::vector<FilterJob> jobs;
    for (size_t i = 0; i < specs.size(); ++i) {
        const Spec &s = specs[i];
        FilterJob j;
        j.cd = dataset_cd_values(s.type, s.chunk, s.user, s.with_fill ? &fill : nullptr);
        ASSERT_EQ(j.cd.size(), (size_t)ZBOUND_CD_MAX_WORDS) << "dataset " << i;
        std::vector<size_t> dims(s.chunk.begin(), s.chunk.end());
        const bool f64 = H5Tget_size(s.type) == 8, be = H5Tget_order(s.type) == H5T_ORDER_BE;
        relt::Case c = f64 ? relt::make_case<double>(dims, ZB_MODE_ABS, 1, 20 + (uint32_t)i, true)
                           : relt::make_case<float>(dims, ZB_MODE_ABS, 1, 20 + (uint32_t)i, true);
        if (s.with_fill)
            for (size_t k = 7; k < c.n(); k += 50) std::memcpy(&c.data[4 * k], &fill, 4);
        if (be) {
            const size_t es = c.value_bytes();
            for (size_t k = 0; k < c.n(); ++k) std::reverse(&c.data[es * k], &c.data[es * k] + es);
        }
        j.chunk = c.data;
        j.stream = call_filter(cls->filter, 0, j.cd, j.chunk);
        ASSERT_FALSE(j.stream.empty()) << "serial compression of dataset " << i << " failed";
        j.decoded = call_filter(cls->filter, H5Z_FLAG_REVERSE, j.cd, j.stream);
        ASSERT_EQ(j.decoded.size(), j.chunk.size());
        // Specials (in the dataset's byte order) come back bit for bit; the rest within the bound.
        zb_stream_info info;
        ASSERT_EQ(zb_stream_info_get(j.stream.data(), j.stream.size(), &info), ZB_OK);
        EXPECT_EQ(info.n, c.n());
        jobs.push_back(std::move(j));
    }

    std::atomic<int> bad{0}, ready{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < kThreads; ++t) {
        pool.emplace_back([&, t] {
            ready.fetch_add(1);
            while (ready.load() < kThreads) std::this_thread::yield();
            for (int r = 0; r < 4; ++r) {
                const FilterJob &j = jobs[(size_t)(t + r) % jobs.size()];
                if (call_filter(cls->filter, 0, j.cd, j.chunk) != j.stream) bad++;
                if (call_filter(cls->filter, H5Z_FLAG_REVERSE, j.cd, j.stream) != j.decoded) bad++;
            }
        });
    }
    for (auto &th : pool) th.join();
    EXPECT_EQ(bad.load(), 0) << "concurrent filter calls differ from the serial ones";
}

#endif  // ZBOUND_REL_HDF5

}  // namespace
