// The CUDA backend's per-process context: device choice (ZBOUND_DEVICE), stream, arenas, pinned staging, events.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <tuple>
#include <vector>
#include "dependent_launch.cuh"
#include "gpu_internal.h"
#include "zb_cpu.h"

namespace zb {
namespace gpu {

void fail(zb_status status, const std::string &msg) { throw Failure{status, msg}; }

void check(cudaError_t e, const char *what) {
    if (e == cudaSuccess) return;
    fail(ZB_ERR_GPU, std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

// ---- test knobs (gpu_internal.h) -----------------------------------------------------------------------------------

long long env_integer(const char *name, long long fallback) {
    const char *e = std::getenv(name);
    if (!e || !*e) return fallback;
    char *end = nullptr;
    const long long v = std::strtoll(e, &end, 10);
    return (*end || v < 0) ? fallback : v;
}

namespace {

std::atomic<size_t> g_arena_bytes{0};   // device bytes held by all arenas (for ZBOUND_GPU_MEM_LIMIT)

}  // namespace

size_t gpu_mem_limit() {
    static const size_t v = (size_t)env_integer("ZBOUND_GPU_MEM_LIMIT", 0);
    return v;
}

void launched(cudaError_t e, const char *what) {
    check(e, what);
    static const long long after = env_integer("ZBOUND_GPU_FAULT_AFTER", -1);
    if (after < 0) return;
    static std::atomic<long long> launches{0};
    const long long k = launches.fetch_add(1, std::memory_order_relaxed);
    if (k % (after + 1) == after)
        fail(ZB_ERR_GPU, std::string("injected GPU fault (ZBOUND_GPU_FAULT_AFTER=") + std::to_string(after) +
                             ") after the " + what + " (launch " + std::to_string(k + 1) + " of the process)");
}

// ---- arena -------------------------------------------------------------------------------------------------------

Arena::~Arena() {
    // The context lives until process exit, when the driver may already be gone: ignore errors here.
    if (ptr_) (void)cudaFree(ptr_);
}

uint8_t *Arena::reserve(size_t bytes) {
    if (bytes <= cap_ && ptr_) return ptr_;
    // Grow with some headroom so that a sequence of slightly larger chunks does not reallocate every time.
    size_t want = std::max(bytes + bytes / 8, (size_t)1 << 20);
    if (const size_t limit = gpu_mem_limit()) {
        // The other arenas keep what they hold; this one may grow to what is left under the limit.
        const size_t others = g_arena_bytes.load() - cap_;
        if (others > limit || bytes > limit - others)
            fail(ZB_ERR_GPU, "cannot allocate " + std::to_string(bytes) + " bytes of device memory: the pool would "
                             "exceed ZBOUND_GPU_MEM_LIMIT=" + std::to_string(limit) + " (" + std::to_string(others) +
                             " bytes held by other buffers)");
        want = std::min(want, limit - others);
    }
    if (ptr_) {
        // The old contents are not needed, but work queued on the stream may still use them.
        ZB_CUDA(cudaDeviceSynchronize());
        ZB_CUDA(cudaFree(ptr_));
        g_arena_bytes -= cap_;
        ptr_ = nullptr;
        cap_ = 0;
    }
    void *p = nullptr;
    const cudaError_t e = cudaMalloc(&p, want);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();  // an allocation failure is not sticky: clear it
        fail(ZB_ERR_GPU, "cannot allocate " + std::to_string(want) + " bytes of device memory: " +
                             cudaGetErrorString(e));
    }
    ptr_ = static_cast<uint8_t *>(p);
    cap_ = want;
    ++allocations_;
    g_arena_bytes += cap_;
    return ptr_;
}

// ---- context -----------------------------------------------------------------------------------------------------

namespace {

constexpr size_t kPinnedBytes = (size_t)4 << 20;  // per staging slot

struct InitResult {
    Context *ctx = nullptr;  // the pool's first context
    std::string why;
};

// One more context on device `dev`: stream, pinned staging, timing events, CRC tables. Throws Failure.
std::unique_ptr<Context> make_context(int dev) {
    std::unique_ptr<Context> c(new Context);
    c->device = dev;
    ZB_CUDA(cudaSetDevice(dev));
    ZB_CUDA(cudaDeviceGetAttribute(&c->sm_count, cudaDevAttrMultiProcessorCount, dev));
    ZB_CUDA(cudaDeviceGetAttribute(&c->smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev));
    ZB_CUDA(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    for (int i = 0; i < kStagingSlots; ++i) {
        ZB_CUDA(cudaHostAlloc(reinterpret_cast<void **>(&c->pinned[i]), kPinnedBytes, cudaHostAllocDefault));
        ZB_CUDA(cudaEventCreateWithFlags(&c->pinned_done[i], cudaEventDisableTiming));
    }
    c->pinned_bytes = kPinnedBytes;
    // Mapped where the device can (result_to_host); else plain pinned memory, and results come back by copies.
    if (cudaHostAlloc(reinterpret_cast<void **>(&c->host_small), kHostSmallBytes, cudaHostAllocMapped) != cudaSuccess ||
        cudaHostGetDevicePointer(reinterpret_cast<void **>(&c->host_small_mapped), c->host_small, 0) != cudaSuccess) {
        (void)cudaGetLastError();
        if (c->host_small) (void)cudaFreeHost(c->host_small);
        c->host_small = nullptr;
        c->host_small_mapped = nullptr;
        ZB_CUDA(cudaHostAlloc(reinterpret_cast<void **>(&c->host_small), kHostSmallBytes, cudaHostAllocDefault));
    }
    for (auto &ev : c->timer) ZB_CUDA(cudaEventCreate(&ev));
    for (auto &bs : c->branch_stream) ZB_CUDA(cudaStreamCreateWithFlags(&bs, cudaStreamNonBlocking));
    for (auto &ev : c->branch_event) ZB_CUDA(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    init_crc_tables(*c);
    const unsigned long long range_words[3] = {~0ull, ~0ull, 0ull};
    ZB_CUDA(cudaMalloc(reinterpret_cast<void **>(&c->d_range), sizeof range_words));
    ZB_CUDA(cudaMemcpy(c->d_range, range_words, sizeof range_words, cudaMemcpyHostToDevice));
    ZB_CUDA(cudaStreamSynchronize(c->stream));
    return c;
}

// Chooses the device and creates the pool's first context; on failure returns the reason. Runs once per process.
InitResult create_first_context() {
    InitResult r;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        r.why = std::string("no CUDA device: ") + cudaGetErrorString(e);
        return r;
    }
    if (count <= 0) {
        r.why = "no CUDA device";
        return r;
    }
    int dev = 0;
    if (const char *env = std::getenv("ZBOUND_DEVICE")) {
        char *end = nullptr;
        const long v = std::strtol(env, &end, 10);
        if (!*env || *end || v < 0 || v >= count) {
            r.why = std::string("ZBOUND_DEVICE=") + env + " is not a device index in [0, " + std::to_string(count) +
                    ")";
            return r;
        }
        dev = (int)v;
    }
    try {
        r.ctx = make_context(dev).release();  // lives for the whole process
    } catch (const Failure &f) {
        // Half-made CUDA objects of a device that cannot be used are leaked on purpose: tearing them down only
        // risks more errors, and the process will not use this device.
        r.why = f.msg;
        (void)cudaGetLastError();
    }
    return r;
}

const InitResult &init_once() {
    static const InitResult r = create_first_context();  // thread-safe static initialization
    return r;
}

// The contexts of the process and which of them are leased. Contexts are never destroyed (the driver may be gone
// at process exit).
struct Pool {
    std::mutex mu;
    std::condition_variable freed;
    std::vector<Context *> all;
    std::vector<bool> busy;
};

Pool &pool() {
    static Pool *p = new Pool;  // never destroyed: leases may be released during static destruction
    return *p;
}

}  // namespace

int pool_size() {
    static const int v = (int)std::min<long long>(16, std::max<long long>(1, env_integer("ZBOUND_GPU_STREAMS", 8)));
    return v;
}

int resident_blocks(const void *kernel, int threads, size_t smem) {
    static std::mutex m;
    static std::map<std::tuple<const void *, int, int, size_t>, int> known;
    int device = 0;
    ZB_CUDA(cudaGetDevice(&device));
    const auto key = std::make_tuple(kernel, device, threads, smem);
    std::lock_guard<std::mutex> lock(m);
    auto it = known.find(key);
    if (it != known.end()) return it->second;
    int blocks = 0;
    ZB_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, smem));
    return known[key] = std::max(blocks, 1);
}

bool try_context(std::string *why) {
    const InitResult &r = init_once();
    if (!r.ctx && why) *why = r.why;
    return r.ctx != nullptr;
}

ContextLease::ContextLease() {
    const InitResult &r = init_once();
    if (!r.ctx) fail(ZB_ERR_GPU, r.why);
    Pool &p = pool();
    std::unique_lock<std::mutex> lock(p.mu);
    if (p.all.empty()) {
        p.all.push_back(r.ctx);
        p.busy.push_back(false);
    }
    for (;;) {
        // The first free context: a caller that runs one call at a time always gets the same warm context.
        for (size_t i = 0; i < p.all.size(); ++i) {
            if (!p.busy[i]) {
                p.busy[i] = true;
                c_ = p.all[i];
                index_ = i;
                break;
            }
        }
        if (c_) break;
        if ((int)p.all.size() < pool_size()) {
            try {
                std::unique_ptr<Context> fresh = make_context(r.ctx->device);
                p.all.push_back(fresh.release());
                p.busy.push_back(true);
                c_ = p.all.back();
                index_ = p.all.size() - 1;
                break;
            } catch (const Failure &) {
                // Out of pinned or device memory for one more: wait for a context in use instead.
                (void)cudaGetLastError();
            }
        }
        p.freed.wait(lock);
    }
    lock.unlock();
    try {
        ZB_CUDA(cudaSetDevice(c_->device));  // the current device is per host thread
    } catch (...) {
        release();
        throw;
    }
}

void ContextLease::release() {
    if (!c_) return;
    Pool &p = pool();
    {
        std::lock_guard<std::mutex> lock(p.mu);
        p.busy[index_] = false;
    }
    p.freed.notify_one();
    c_ = nullptr;
}

// ---- staging -----------------------------------------------------------------------------------------------------

namespace {

// The piece size of a transfer: a quarter of it (so that the host copies of three pieces overlap DMAs), at least
// 1 MiB, at most one staging slot.
size_t staging_piece(const Context &c, size_t bytes) {
    const size_t quarter = (bytes / 4 + 65535) / 65536 * 65536;
    return std::min(c.pinned_bytes, std::max<size_t>(quarter, (size_t)1 << 20));
}

}  // namespace

// Host memory from HDF5 is pageable, and a pageable cudaMemcpy is slow. Copy piece by piece through the ring of
// pinned slots, each piece by several threads (staging_team, zb_cpu.h), so that the host copy of one piece overlaps
// the DMAs of the earlier ones. The slots are written with non-temporal stores: the DMA reads them from memory
// anyway, and a normal store first reads the line (16 MB compressions 13.5-16.2 -> 17.9-19.6 GB/s, NOTES 104).
// Returns once `h_src` has been read (it may then be freed); the DMAs are queued on `s` before later work.
void upload(Context &c, void *d_dst, const void *h_src, size_t bytes, cudaStream_t s) {
    const uint8_t *src = static_cast<const uint8_t *>(h_src);
    uint8_t *dst = static_cast<uint8_t *>(d_dst);
    const size_t piece = staging_piece(c, bytes);
    size_t i = 0;
    for (size_t off = 0; off < bytes; off += piece, ++i) {
        const int slot = (int)(i % kStagingSlots);
        const size_t len = std::min(piece, bytes - off);
        ZB_CUDA(cudaEventSynchronize(c.pinned_done[slot]));  // the last DMA out of this slot has finished
        parallel_copy(c.pinned[slot], src + off, len, staging_team(), true);
        ZB_CUDA(cudaMemcpyAsync(dst + off, c.pinned[slot], len, cudaMemcpyHostToDevice, s));
        ZB_CUDA(cudaEventRecord(c.pinned_done[slot], s));
    }
}

namespace {
__global__ void k_words_to_host(const uint32_t *src, uint32_t words, uint32_t *dst) {
    wait_for_prior_grids();  // before any memory access (launch_dependent)
    for (uint32_t i = threadIdx.x; i < words; i += blockDim.x) dst[i] = src[i];
}
}  // namespace

void *result_mapping(const Context &c, cudaStream_t q) {
    if (!c.host_small_mapped) return nullptr;
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    ZB_CUDA(cudaStreamIsCapturing(q, &capture));
    return capture == cudaStreamCaptureStatusActive ? c.host_small_mapped : nullptr;
}

void result_to_host(const Context &c, const void *d_src, size_t bytes, cudaStream_t q) {
    if (bytes % 4 || bytes > kHostCrcOffset) fail(ZB_ERR_INTERNAL, "result_to_host: bad size");
    void *mapped = result_mapping(c, q);
    if (!mapped) {
        ZB_CUDA(cudaMemcpyAsync(c.host_small, d_src, bytes, cudaMemcpyDeviceToHost, q));
        return;
    }
    launch_dependent("launch of k_words_to_host", k_words_to_host, 1, 32, 0, q, static_cast<const uint32_t *>(d_src),
                     (uint32_t)(bytes / 4), static_cast<uint32_t *>(mapped));
}

// The reverse: the DMAs of up to kStagingSlots pieces run ahead of the host copies out of the slots (normal stores:
// the caller, HDF5, reads the values right after, and non-temporal ones measured slower). Waits for the work queued
// on `s` before it (the DMAs follow it) and returns when h_dst holds everything.
void download(Context &c, void *h_dst, const void *d_src, size_t bytes, cudaStream_t s) {
    const uint8_t *src = static_cast<const uint8_t *>(d_src);
    uint8_t *dst = static_cast<uint8_t *>(h_dst);
    const size_t piece = staging_piece(c, bytes);
    const size_t pieces = (bytes + piece - 1) / piece;
    auto issue = [&](size_t i) {
        const int slot = (int)(i % kStagingSlots);
        const size_t off = i * piece, len = std::min(piece, bytes - off);
        ZB_CUDA(cudaMemcpyAsync(c.pinned[slot], src + off, len, cudaMemcpyDeviceToHost, s));
        ZB_CUDA(cudaEventRecord(c.pinned_done[slot], s));
    };
    for (size_t i = 0; i < std::min<size_t>(pieces, kStagingSlots); ++i) issue(i);
    for (size_t i = 0; i < pieces; ++i) {
        const int slot = (int)(i % kStagingSlots);
        ZB_CUDA(cudaEventSynchronize(c.pinned_done[slot]));
        const size_t off = i * piece, len = std::min(piece, bytes - off);
        parallel_copy(dst + off, c.pinned[slot], len, staging_team(), false);
        if (i + kStagingSlots < pieces) issue(i + kStagingSlots);
    }
}

// ---- graphs ------------------------------------------------------------------------------------------------------

void GraphKey::add(uint64_t v) {
    if (used >= kWords) throw std::logic_error("GraphKey: more than kWords words");
    w[used++] = v;
}

bool GraphKey::operator==(const GraphKey &o) const {
    return used == o.used && std::memcmp(w, o.w, sizeof(uint64_t) * (size_t)used) == 0;
}

cudaGraphExec_t GraphCache::find(const GraphKey &key) {
    for (int i = 0; i < kSlots; ++i)
        if (execs_[i] && keys_[i] == key) {
            last_use_[i] = ++clock_;
            return execs_[i];
        }
    return nullptr;
}

bool GraphCache::seen_before(const GraphKey &key) {
    for (const GraphKey &k : seen_)
        if (k.used && k == key) return true;
    seen_[seen_next_] = key;
    seen_next_ = (seen_next_ + 1) % kSeen;
    return false;
}

void GraphCache::put(const GraphKey &key, cudaGraphExec_t exec) {
    int slot = 0;
    for (int i = 1; i < kSlots; ++i)
        if (last_use_[i] < last_use_[slot]) slot = i;
    if (execs_[slot]) (void)cudaGraphExecDestroy(execs_[slot]);
    keys_[slot] = key;
    execs_[slot] = exec;
    last_use_[slot] = ++clock_;
}

bool dependent_launches() {
    static const bool allowed = env_integer("ZBOUND_GPU_PDL", 1) != 0;
    if (!allowed) return false;
    // Compute capability 9.0 and up, per device (read once each: the launch paths ask on every kernel).
    constexpr int kDevices = 64;
    static std::atomic<int> capable[kDevices];  // 0 unknown, 1 yes, 2 no
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kDevices) return false;
    int known = capable[dev].load(std::memory_order_relaxed);
    if (known == 0) {
        int major = 0;
        known = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess && major >= 9
                    ? 1 : 2;
        capable[dev].store(known, std::memory_order_relaxed);
    }
    return known == 1;
}

bool graphs_enabled() {
    static const bool on = [] {
        const char *e = std::getenv("ZBOUND_GPU_GRAPHS");
        return !(e && std::strcmp(e, "0") == 0);
    }();
    return on;
}

// ---- timing ------------------------------------------------------------------------------------------------------

namespace {

// ZBOUND_GPU_TIMING: unset (nullptr), any value (region times printed), or "host" (host marks as well).
const char *timing_env() {
    static const char *const e = std::getenv("ZBOUND_GPU_TIMING");
    return e;
}

bool host_marks_wanted() { return timing_env() && std::strcmp(timing_env(), "host") == 0; }

double host_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

KernelTimer::KernelTimer(Context &c, cudaStream_t s, bool events) : c_(c), s_(s) {
    events_ = events || timing_env() != nullptr;
    if (host_marks_wanted()) t0_ = host_seconds();
}

void KernelTimer::mark(const char *name) {
    if (!host_marks_wanted() || marks_ >= kMarks) return;
    mark_names_[marks_] = name;
    mark_at_[marks_++] = host_seconds() - t0_;
}

void KernelTimer::begin(const char *name) {
    mark(name);  // host marks (ZBOUND_GPU_TIMING=host) at each region's start as well
    if (!events_ || open_ || used_ >= kTimerEvents) return;  // past the last pair the remaining work is not timed
    ZB_CUDA(cudaEventRecord(c_.timer[2 * used_], s_));
    names_[used_] = name;
    open_ = true;
}

void KernelTimer::end() {
    if (!open_) return;
    ZB_CUDA(cudaEventRecord(c_.timer[2 * used_ + 1], s_));
    open_ = false;
    ++used_;
}

double KernelTimer::seconds() {
    end();
    const bool print = timing_env() != nullptr;
    double total = 0;
    std::string line;
    for (int i = 0; i < used_; ++i) {
        float ms = 0;
        ZB_CUDA(cudaEventSynchronize(c_.timer[2 * i + 1]));
        ZB_CUDA(cudaEventElapsedTime(&ms, c_.timer[2 * i], c_.timer[2 * i + 1]));
        total += ms * 1e-3;
        if (print) line += std::string(" ") + (names_[i] ? names_[i] : "?") + " " + std::to_string(ms) + " ms;";
    }
    if (print && marks_) {
        line += " host:";
        for (int i = 0; i < marks_; ++i)
            line += std::string(" ") + mark_names_[i] + " " + std::to_string((int)(mark_at_[i] * 1e6)) + " us;";
    }
    if (print) std::fprintf(stderr, "zbound gpu timing:%s total %.3f ms\n", line.c_str(), total * 1e3);
    return total;
}

}  // namespace gpu
}  // namespace zb
