// Host allocation failure: every allocation of the C++ runtime in this program goes through the replaced global
// operator new below, which a test can make fail (one chosen allocation, or every allocation from a size up).
// zb_compress / zb_decompress must then return ZB_ERR_NOMEM with a message (never crash, abort or leak; the
// ASan build checks the leaks), and through HDF5 (the statically registered filter) the write or read must fail
// with the zbound reason on the HDF5 error stack.
#include <gtest/gtest.h>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <thread>
#include <vector>
#include "rel_util.h"

#ifdef ZBOUND_REL_HDF5
#include <hdf5.h>
#include <unistd.h>
#include "zbound_filter.h"
#endif

namespace {
std::atomic<bool> g_armed{false};
std::atomic<long> g_fail_at{-1};        // fail the allocation with this index (counted from arming), once
std::atomic<long> g_count{0};
std::atomic<size_t> g_fail_from{0};     // when non-zero: fail every allocation of at least this many bytes
std::atomic<long> g_failed{0};          // allocations refused since arming

bool should_fail(size_t n) {
    if (!g_armed.load(std::memory_order_relaxed)) return false;
    const size_t from = g_fail_from.load(std::memory_order_relaxed);
    if (from && n >= from) return true;
    return g_count.fetch_add(1, std::memory_order_relaxed) == g_fail_at.load(std::memory_order_relaxed);
}

void *alloc(size_t n) {
    if (should_fail(n)) {
        g_failed.fetch_add(1);
        throw std::bad_alloc();
    }
    if (void *p = std::malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}

// Arms the hook for the lifetime of the object.
struct Armed {
    explicit Armed(long fail_at, size_t fail_from = 0) {
        g_count = 0;
        g_failed = 0;
        g_fail_at = fail_at;
        g_fail_from = fail_from;
        g_armed = true;
    }
    ~Armed() { g_armed = false; }
};
}  // namespace

void *operator new(size_t n) { return alloc(n); }
void *operator new[](size_t n) { return alloc(n); }
void *operator new(size_t n, const std::nothrow_t &) noexcept {
    try {
        return alloc(n);
    } catch (...) {
        return nullptr;
    }
}
void *operator new[](size_t n, const std::nothrow_t &t) noexcept { return operator new(n, t); }
void operator delete(void *p) noexcept { std::free(p); }
void operator delete[](void *p) noexcept { std::free(p); }
void operator delete(void *p, size_t) noexcept { std::free(p); }
void operator delete[](void *p, size_t) noexcept { std::free(p); }

namespace {

// Fails the 0th, 1st, 2nd, ... allocation of a call in turn until the call needs no more than that: every call
// must return ZB_ERR_NOMEM with a message, or recover and return exactly the reference result.
// `call` writes into buffers the caller allocated beforehand (nothing but the library allocates while armed) and
// returns the status and the number of result bytes.
constexpr long kMaxSweep = 5000;

template <typename Call>
void sweep(const char *what, Call call, const std::vector<uint8_t> &expected, std::vector<uint8_t> &buf) {
    long k = 0, recovered = 0;
    for (; k < kMaxSweep; ++k) {
        zb_status s = ZB_OK;
        long failed = 0;
        size_t len = 0;
        std::string msg;
        // On a fresh thread each time: core keeps grow-only scratch per thread, which a warm thread would not
        // allocate again.
        std::thread([&] {
            {
                Armed a(k);
                s = call(len);
                failed = g_failed.load();
            }
            msg = zb_last_error();   // per thread
        }).join();
        if (failed == 0) {   // the call made fewer than k+1 allocations: it ran to the end
            ASSERT_EQ(s, ZB_OK) << what << ": " << msg;
            EXPECT_EQ(std::vector<uint8_t>(buf.begin(), buf.begin() + (long)len), expected) << what;
            break;
        }
        if (s == ZB_OK) {
            // Recovered: std::stable_sort falls back to an in-place sort when its nothrow buffer is refused. The
            // result must be the reference's: the bytes never depend on the memory state (predictor/encoder auto
            // fails the call rather than skip a candidate whose sample ran out of memory).
            EXPECT_EQ(std::vector<uint8_t>(buf.begin(), buf.begin() + (long)len), expected)
                << what << ": allocation " << k << " failed, the call succeeded with other bytes";
            ++recovered;
            continue;
        }
        ASSERT_EQ(s, ZB_ERR_NOMEM) << what << ": allocation " << k << " failed but the call returned " << s << " ("
                                   << msg << ")";
        EXPECT_NE(msg.find("memory"), std::string::npos) << msg;
    }
    EXPECT_GT(k, 0) << what << ": the call allocated nothing (the hook does not see core's allocations?)";
    EXPECT_LT(k, kMaxSweep) << what << ": the sweep did not finish";
    std::printf("%s: %ld allocation points; each failure returned ZB_ERR_NOMEM, except %ld recovered with the same "
                "result\n", what, k, recovered);
}

void sweep_case(const relt::Case &c, int threads) {
    const relt::Result ref = relt::run(c, ZB_BACKEND_CPU, threads, ZB_BACKEND_CPU);
    ASSERT_EQ(ref.status, ZB_OK);
    ASSERT_EQ(ref.dstatus, ZB_OK);
    zb_params p = c.params;
    p.backend = ZB_BACKEND_CPU;
    p.threads = threads;
    std::vector<uint8_t> sbuf(zb_compress_bound(c.dtype, c.n()));
    sweep("zb_compress", [&](size_t &len) {
        return zb_compress(&p, c.dtype, c.data.data(), (int)c.dims.size(), c.dims.data(), sbuf.data(), sbuf.size(),
                           &len, nullptr);
    }, ref.stream, sbuf);
    std::vector<uint8_t> dbuf(ref.decoded.size());
    sweep("zb_decompress", [&](size_t &len) {
        len = dbuf.size();
        return zb_decompress(ref.stream.data(), ref.stream.size(), dbuf.data(), dbuf.size(), ZB_BACKEND_CPU, nullptr);
    }, ref.decoded, dbuf);
}

TEST(HostAllocFailure, EveryAllocationOfCompressAndDecompress) {
    setenv("ZBOUND_THREADS", "1", 1);
    // Each pipeline pinned (v1 Lorenzo + fast; v2 interp + fast; v2 Lorenzo + ratio), then predictor and encoder
    // auto (which compresses samples with every candidate). Escape codes have their own test below.
    auto pinned = [](relt::Case c, zb_predictor p, zb_encoder e) {
        c.params.predictor = p;
        c.params.encoder = e;
        return c;
    };
    sweep_case(pinned(relt::make_case<float>({40, 50}, ZB_MODE_REL, 1e-3, 1, true), ZB_PRED_LORENZO, ZB_ENC_FAST), 1);
    sweep_case(pinned(relt::make_case<double>({6, 7, 80}, ZB_MODE_REL, 1e-3, 2, false), ZB_PRED_LORENZO, ZB_ENC_FAST), 1);
    sweep_case(pinned(relt::make_case<float>({30, 70}, ZB_MODE_REL, 1e-3, 3, true), ZB_PRED_INTERP, ZB_ENC_FAST), 1);
    sweep_case(pinned(relt::make_case<double>({40, 60}, ZB_MODE_ABS, 1e-4, 4, true, true), ZB_PRED_LORENZO,
                      ZB_ENC_RATIO), 1);
    sweep_case(relt::make_case<float>({30, 50}, ZB_MODE_REL, 1e-3, 5, false), 1);   // auto
}

// Regression: escape codes (Lorenzo deltas beyond 16 bits) are collected per thread inside an OpenMP parallel
// region, and an exception cannot leave one (std::terminate). An allocation failure there aborted the process
// until core/src/fast_cpu.cpp shuffle_tiles_rank caught it in the thread and rethrew after the region.
TEST(HostAllocFailure, EscapesCollectedInsideParallelRegion) {
    setenv("ZBOUND_THREADS", "1", 1);
    sweep_case(relt::make_case<double>({20011}, ZB_MODE_ABS, 1e-9, 7, false), 1);
}

// Large requests fail, small ones succeed (how an exhausted host usually behaves): the call fails cleanly.
TEST(HostAllocFailure, LargeAllocationsRefused) {
    const relt::Case c = relt::make_case<float>({256, 1024}, ZB_MODE_REL, 1e-3, 3, true);
    std::vector<uint8_t> out(zb_compress_bound(c.dtype, c.n()));
    size_t len = 0;
    zb_params p = c.params;
    p.backend = ZB_BACKEND_CPU;
    zb_status s;
    {
        Armed a(-1, 64 << 10);
        s = zb_compress(&p, c.dtype, c.data.data(), (int)c.dims.size(), c.dims.data(), out.data(), out.size(), &len,
                        nullptr);
    }
    EXPECT_EQ(s, ZB_ERR_NOMEM) << zb_last_error();
    EXPECT_STREQ(zb_status_string(s), "out of memory");
}

// Regression: after a refused growth of core's per-thread scratch, the next call on the same thread must work.
// ScratchArray::get (core/internal/zb_scratch.h) used to free the old block, then throw from `new` with its
// capacity still set, so the next call that needed no more wrote through a null pointer (SIGSEGV). Reached with
// predictor auto: its sample compression grows the scratch first.
TEST(HostAllocFailure, WorksAgainAfterARefusedScratchGrowth) {
    const relt::Case c = relt::make_case<float>({256, 1024}, ZB_MODE_REL, 1e-3, 3, true);
    std::vector<uint8_t> out(zb_compress_bound(c.dtype, c.n()));
    size_t len = 0;
    zb_params p = c.params;   // predictor auto
    p.backend = ZB_BACKEND_CPU;
    zb_status s;
    {
        Armed a(-1, 64 << 10);
        s = zb_compress(&p, c.dtype, c.data.data(), (int)c.dims.size(), c.dims.data(), out.data(), out.size(), &len,
                        nullptr);
    }
    ASSERT_EQ(s, ZB_ERR_NOMEM) << zb_last_error();
    // Memory is back: the same call on the same thread.
    s = zb_compress(&p, c.dtype, c.data.data(), (int)c.dims.size(), c.dims.data(), out.data(), out.size(), &len,
                    nullptr);
    EXPECT_EQ(s, ZB_OK) << zb_last_error();
}

#ifdef ZBOUND_REL_HDF5

herr_t collect(unsigned, const H5E_error2_t *e, void *data) {
    auto *s = static_cast<std::string *>(data);
    if (e->desc) *s += std::string(e->desc) + "\n";
    return 0;
}

std::string error_stack() {
    std::string s;
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect, &s);
    H5Eclear2(H5E_DEFAULT);   // HDF5 1.10 does not free the messages of a stack left behind (LeakSanitizer)
    return s;
}

// Through HDF5: a chunk whose compression or decompression runs out of host memory fails the write or the read,
// and the error stack carries zbound's reason.
TEST(HostAllocFailure, ThroughHdf5WriteAndRead) {
    ASSERT_GE(zbound_register_h5filter(), 0);
    char path[] = "/tmp/zbound_rel_alloc_XXXXXX";
    const int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    close(fd);
    const relt::Case c = relt::make_case<float>({128, 512}, ZB_MODE_ABS, 1e-3, 4, false);
    const hsize_t dims[2] = {128, 512}, chunk[2] = {64, 512};
    unsigned cd[ZBOUND_CD_MAX_WORDS];
    zb_params p = zb_params_default();
    p.mode = ZB_MODE_ABS;
    p.bound = 1e-3;
    const size_t ncd = zbound_cd_values_encode(&p, cd);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hid_t sp = H5Screate_simple(2, dims, nullptr);
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 2, chunk);
    H5Pset_filter(dcpl, ZBOUND_H5Z_FILTER, H5Z_FLAG_MANDATORY, ncd, cd);
    hid_t d = H5Dcreate2(f, "x", H5T_IEEE_F32LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    ASSERT_GE(d, 0);
    herr_t w;
    std::string error_stack_of_last_thread;
    // On fresh threads: core's grow-only per-thread scratch must not be warm from earlier calls.
    std::thread([&] {
        Armed a(-1, 16 << 10);   // the codec's scratch for a 128 KiB chunk cannot be had
        w = H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, c.data.data());
        if (w >= 0) w = H5Fflush(f, H5F_SCOPE_LOCAL);   // chunks may stay cached until the flush
        error_stack_of_last_thread = error_stack();
    }).join();
    EXPECT_LT(w, 0) << "a write whose compression ran out of memory succeeded";
    const std::string es = error_stack_of_last_thread;
    EXPECT_NE(es.find("zbound: compression failed"), std::string::npos) << es;
    EXPECT_NE(es.find("out of memory"), std::string::npos) << es;
    H5Dclose(d);
    H5Fclose(f);   // may fail to flush the failed chunks again: that is fine
    H5Eclear2(H5E_DEFAULT);

    // Write it properly, then fail the read.
    f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    d = H5Dcreate2(f, "x", H5T_IEEE_F32LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    ASSERT_GE(H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, c.data.data()), 0);
    H5Dclose(d);
    H5Fclose(f);
    f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    d = H5Dopen2(f, "x", H5P_DEFAULT);
    std::vector<float> back(c.n());
    herr_t r;
    std::thread([&] {
        Armed a(-1, 16 << 10);
        r = H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, back.data());
        error_stack_of_last_thread = error_stack();
    }).join();
    EXPECT_LT(r, 0) << "a read whose decompression ran out of memory succeeded";
    const std::string rs = error_stack_of_last_thread;
    EXPECT_NE(rs.find("zbound: cannot decompress"), std::string::npos) << rs;
    EXPECT_NE(rs.find("out of memory"), std::string::npos) << rs;
    // Memory back: the same read succeeds and is within the bound.
    ASSERT_GE(H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, back.data()), 0);
    EXPECT_EQ(relt::violations(c, relt::as_bytes(back), 1e-3), 0u);
    H5Dclose(d);
    H5Fclose(f);
    H5Pclose(dcpl);
    H5Sclose(sp);
    std::remove(path);
}

#endif  // ZBOUND_REL_HDF5

}  // namespace
