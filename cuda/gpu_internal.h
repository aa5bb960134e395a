// Host-side plumbing of the CUDA backend: errors, the per-process context (device, stream, grow-only device
// arenas, pinned staging buffers, timing events), and the entry points that the .cu files share.
// Only .cu files include this (it needs the CUDA runtime headers).
#pragma once
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>
#include "zb_format.h"
#include "zb_quant.h"
#include "zbound.h"

namespace zb {
namespace gpu {

// ---- errors ------------------------------------------------------------------------------------------------------

// Thrown inside the backend; the entry points in gpu_ops.cu catch it and return `status` with `msg`.
struct Failure {
    zb_status status;
    std::string msg;
};

[[noreturn]] void fail(zb_status status, const std::string &msg);

// Throws Failure(ZB_ERR_GPU, "<what>: <CUDA error text>") when `e` is not cudaSuccess.
void check(cudaError_t e, const char *what);

#define ZB_CUDA(call) ::zb::gpu::check((call), #call)
// After a kernel launch: catches bad launch configurations (and earlier asynchronous errors).
#define ZB_LAUNCHED(name) ::zb::gpu::launched(cudaGetLastError(), "launch of " name)

// check(e, what), plus the fault-injection knob for tests: with ZBOUND_GPU_FAULT_AFTER=N in the environment (read
// once per process), every (N+1)-th kernel launch of the process (counted over all calls and threads) is reported
// as a device failure (ZB_ERR_GPU, "injected GPU fault ...") after the kernel was queued, i.e. in the middle of a
// chunk. The failing call then behaves as after a real device error: AUTO falls back to the CPU. Unset or
// negative: off (the default; costs one branch per launch).
void launched(cudaError_t e, const char *what);

// A non-negative integer from the environment variable `name`, or `fallback` where it is unset, empty, negative or
// not a number: how every ZBOUND_GPU_* knob that takes a number is read.
long long env_integer(const char *name, long long fallback);

// Resource-fault knob for tests: ZBOUND_GPU_MEM_LIMIT=BYTES (read once per process; unset or 0: no limit) caps the
// total size of the grow-only device arenas (the buffer pool of the context). A call that needs more fails with
// ZB_ERR_GPU ("... exceeds ZBOUND_GPU_MEM_LIMIT ..."), as when cudaMalloc runs out of device memory, and AUTO falls
// back to the CPU. The pinned host staging buffers and the CRC tables (a few KiB) are not counted.
size_t gpu_mem_limit();

// ---- device memory -----------------------------------------------------------------------------------------------

// One grow-only device allocation. reserve() only ever grows it (freeing the old block, whose contents are lost),
// so steady-state calls do no cudaMalloc at all.
class Arena {
public:
    Arena() = default;
    Arena(const Arena &) = delete;
    Arena &operator=(const Arena &) = delete;
    ~Arena();
    uint8_t *reserve(size_t bytes);
    size_t capacity() const { return cap_; }
    // How many allocations the arena has had: a graph that refers to it (queue_as_graph) is valid only for the
    // same one (memset and copy nodes keep the allocation they were captured with, even where a new one gets the
    // same address).
    uint64_t allocations() const { return allocations_; }

private:
    uint8_t *ptr_ = nullptr;
    size_t cap_ = 0;
    uint64_t allocations_ = 0;
};

// Hands out 256-byte aligned pieces of one arena. With base == nullptr it only measures, so a caller runs its
// carving code twice: once to learn the size, once (after Arena::reserve) to get the pointers (carve_from below).
struct Carver {
    uint8_t *base = nullptr;
    size_t used = 0;
    template <typename U> U *take(uint64_t count) {
        used = (used + 255) & ~(size_t)255;
        U *p = base ? reinterpret_cast<U *>(base + used) : nullptr;
        used += (size_t)count * sizeof(U);
        return p;
    }
};

// Runs carve(Carver &) twice: once to measure, then, after reserving that much of `arena`, to hand out the pointers.
template <typename F> void carve_from(Arena &arena, F &&carve) {
    Carver measure;
    carve(measure);
    Carver cut{arena.reserve(measure.used)};
    carve(cut);
}

// ---- context -----------------------------------------------------------------------------------------------------

constexpr int kArenaMain = 0;        // inputs, codes, counts, stream / payload, scan temporaries
constexpr int kArenaExceptions = 1;  // compress: buffers sized by the exception count, known only mid-call
constexpr int kArenaRatio = 2;       // the ratio encoder's and decoder's work buffers (ratio_gpu.cuh)
constexpr int kArenaPwRel = 3;       // the point-wise relative mode's buffers, alive around the inner codec's calls
constexpr int kArenaPoints = 4;      // sample points gathered for the host-side tuning (host_points.cuh)
constexpr int kArenaCount = 5;
constexpr int kTimerEvents = 16;     // event pairs per call for kernel timing
constexpr int kStagingSlots = 4;     // pinned staging slots per context (4 MiB each)
constexpr size_t kHostSmallBytes = 64 << 10, kHostCrcOffset = 4096;
constexpr size_t kHostReplayHeaderOffset = 2048;  // a replayed decompression's header copy (gpu_ops.cu)
constexpr size_t kMaxHeaderBytes = kHeaderFixedBytes + 16 * kMaxSegments + 8;

// ---- CUDA graphs of repeated calls ---------------------------------------------------------------------------------

// What a call's queued work depends on (pointers, sizes, parameters), as words: equal keys queue the same work.
struct GraphKey {
    static constexpr int kWords = 48;
    uint64_t w[kWords] = {};
    int used = 0;
    void add(uint64_t v);  // throws std::logic_error past kWords
    template <typename P> void add_ptr(const P *p) { add(reinterpret_cast<uintptr_t>(p)); }
    bool operator==(const GraphKey &o) const;
};

// A context's instantiated graphs, by key, the least recently used one replaced. A chunk-sized call is a few dozen
// launches of about 3 us of host time each (H200, RESULTS session 16), while its kernels take a few us: replayed as
// one graph, a 4 MB compression takes half the time (RESULTS session 21). A key is captured the second time it is
// seen, so that calls whose pointers never repeat pay no instantiation.
class GraphCache {
public:
    GraphCache() = default;
    GraphCache(const GraphCache &) = delete;
    GraphCache &operator=(const GraphCache &) = delete;
    cudaGraphExec_t find(const GraphKey &key);
    bool seen_before(const GraphKey &key);  // records key as seen
    void put(const GraphKey &key, cudaGraphExec_t exec);
    bool off = false;  // capture or instantiation failed once in this context: no more graphs

private:
    static constexpr int kSlots = 8, kSeen = 8;
    GraphKey keys_[kSlots];
    cudaGraphExec_t execs_[kSlots] = {};
    uint64_t last_use_[kSlots] = {};
    uint64_t clock_ = 0;
    GraphKey seen_[kSeen];
    int seen_next_ = 0;
};

// ZBOUND_GPU_GRAPHS=0 turns the graphs off (for comparisons); on by default.
bool graphs_enabled();

// The chunk paths of device calls (chunk_encode.cuh, chunk_decode.cuh): ZBOUND_GPU_CHUNK=1 turns them on, 0 off;
// unset, kChunkPathsByDefault. Off: on an H100 they give the general paths' bytes and values (GpuDeviceApi.Chunk*,
// memcheck clean) but are no faster at 4 MB and slower at 16 and 64 MB (bench/NOTES.md 120). Read on every call, so
// that a test can switch it.
constexpr bool kChunkPathsByDefault = false;
// The arrays they take: up to 2^26 values (256 MB of f32, as kGraphMaxBytes).
constexpr uint64_t kChunkMaxValues = uint64_t(1) << 26;
inline bool chunk_paths_enabled() {
    const char *e = std::getenv("ZBOUND_GPU_CHUNK");
    if (!e || !*e) return kChunkPathsByDefault;
    return std::strcmp(e, "0") != 0;
}

struct Context {
    int device = -1;
    int sm_count = 0;
    int smem_per_sm = 0;  // shared memory per SM, bytes (cudaDevAttrMaxSharedMemoryPerMultiprocessor)
    cudaStream_t stream = nullptr;   // the context's own stream (host API, batches)
    Arena arena[kArenaCount];
    // A ring of pinned staging slots (upload / download in gpu_context.cu): host threads copy a piece into one slot
    // while the DMA engine drains the others. pinned_done[i] marks the end of the last DMA from or into slot i.
    uint8_t *pinned[kStagingSlots] = {};
    cudaEvent_t pinned_done[kStagingSlots] = {};
    size_t pinned_bytes = 0;  // per slot
    cudaEvent_t timer[2 * kTimerEvents] = {};
    // CRC-32C tables on the device: 4 slicing tables (4 x 256) then 17 shift matrices (17 x 128), see crc_gpu.cu.
    uint32_t *d_crc = nullptr;
    // k_range's words where it derives a REL bound's quantizer constants (encode.cuh, queue_rel_range): the min key,
    // the complemented max key and the blocks' ticket, set once here and left so by every launch, whose last block
    // reads and resets the keys and whose ticket wraps: no memset node before the range in a compression's graph.
    // (Calls on one context run one at a time, each to its end.)
    unsigned long long *d_range = nullptr;
    GraphCache graphs;
    // Streams and events for the parallel branches of a graph being captured (GraphBranches).
    static constexpr int kBranches = 4;
    cudaStream_t branch_stream[kBranches] = {};
    cudaEvent_t branch_event[kBranches + 1] = {};
    // Set while the context serves one chunk of a batch: its calls are not graphed (a batch's chunks have pointers of
    // their own, so a key rarely repeats, and a repeated batch would fill the cache with graphs that evict each other),
    // and its fast encoder walks from smaller arrays (encode.cuh, walk_plan).
    bool batch_item = false;
    // The fraction of exceptions among the values of this context's last device-side fast encode: the next one
    // sizes its exception stage for that many (encode.cuh, exception_cap).
    double exception_fraction = 0;
    // Small pinned scratch (kHostSmallBytes, mapped) for device-to-host results: error word, totals or a header in the
    // first kHostCrcOffset bytes, piece CRCs (HostCrcs) after them.
    uint8_t *host_small = nullptr;
    uint8_t *host_small_mapped = nullptr;  // host_small as kernels address it (result_to_host); null: not mapped
    // The last fast-layout device-to-device decompression on this context: a call on the same buffers decodes with
    // its header before its own has reached the host, and keeps the result where the header is the same (gpu_ops.cu,
    // decompress_on_device).
    struct LastDecode {
        bool valid = false;
        const uint8_t *src = nullptr;
        void *dst = nullptr;
        size_t src_len = 0, dst_capacity = 0;
        Header h;
        uint8_t header[kMaxHeaderBytes];
    } last_decode;
};

// The contexts form a pool of up to pool_size() (ZBOUND_GPU_STREAMS, 1..16, default 8), created on demand: each
// call leases one for its whole duration (its arenas, staging buffers, events and stream are the call's alone), so
// calls from several host threads run concurrently on the GPU. A caller that makes one call at a time always gets
// the first context. The first context is created on first use (thread-safe).
int pool_size();

// Blocks of `kernel` (threads per block, smem bytes of dynamic shared memory) that one SM of the current device holds
// at once, at least 1; asked of the runtime once per kernel, device and block shape. A grid sized by a guess of this
// number can leave a last wave almost empty (NOTES 130).
int resident_blocks(const void *kernel, int threads, size_t smem = 0);

// Leases a free context, creating one while fewer than pool_size() exist, else waiting for one to be released.
// Throws Failure when no GPU can be used. Makes the context's device current on the calling thread.
class ContextLease {
public:
    ContextLease();
    ~ContextLease() { release(); }
    ContextLease(const ContextLease &) = delete;
    ContextLease &operator=(const ContextLease &) = delete;
    Context &get() const { return *c_; }

private:
    void release();
    Context *c_ = nullptr;
    size_t index_ = 0;
};

// True when a context can be leased (the first one was created). Never throws; `why` gets the reason when false.
bool try_context(std::string *why);

// Staged copies between pageable host memory and the device on `s`, through the context's pinned slots with several
// host threads. upload returns once the source has been read (the DMAs stay queued on `s`, before any later work);
// download returns when the destination is complete.
void upload(Context &c, void *d_dst, const void *h_src, size_t bytes, cudaStream_t s);
void download(Context &c, void *h_dst, const void *d_src, size_t bytes, cudaStream_t s);

// Queues on q a copy of a small device result (`bytes`: a multiple of 4, at most kHostCrcOffset) to the start of the
// context's host_small; the host reads it after synchronizing with q. Into a graph being captured on q: a one-warp
// kernel that writes through the pinned buffer's mapping. A device-to-host copy node after kernels let the host's
// wait end only at steps of about 8.2 us (H100), whatever the kernels took; a kernel's stores are there when it ends
// (NOTES 122). Outside a capture a copy, as there the extra launch's host time (about 3 us) cost more than the step.
void result_to_host(const Context &c, const void *d_src, size_t bytes, cudaStream_t q);
// Where a kernel being captured on q can write its result for the host itself (the start of host_small through its
// mapping: no result_to_host node after it), or nullptr outside a capture or where host_small is not mapped.
void *result_mapping(const Context &c, cudaStream_t q);

// Queues queue(stream) for stream s as a graph from the context's cache: replayed when the key is cached, captured
// (and cached) when the key was seen once before. Returns false, having queued nothing, for a key seen the first time
// (the caller then queues its work its own way) or where graphs cannot be used. The capture runs on the context's
// own stream (s may be the legacy default stream, which cannot be captured); the graph is then launched on s. The
// key must hold everything the queued work depends on, the allocations() of the arenas it uses included; the work
// must record no timing events (GraphBranches' fork and join are fine) and reach the caller's memory only through
// kernels: a memset or copy node keeps the allocation it was captured with, so its replay faults once the caller
// has freed that buffer, even where a new one has the same address.
inline bool graphs_usable(const Context &c) { return graphs_enabled() && !c.graphs.off && !c.batch_item; }
// Device calls of up to this many raw bytes may run as a graph (compression and decompression): larger ones gain
// little from it (a wait for the encoder's totals costs under 1 % there).
constexpr size_t kGraphMaxBytes = size_t(256) << 20;
template <typename F> bool queue_as_graph(Context &c, const GraphKey &key, cudaStream_t s, F &&queue) {
    if (!graphs_usable(c)) return false;
    if (cudaGraphExec_t g = c.graphs.find(key)) {
        ZB_CUDA(cudaGraphLaunch(g, s));
        return true;
    }
    if (!c.graphs.seen_before(key)) return false;
    cudaStream_t cs = c.stream;
    if (cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
        cudaGraph_t graph = nullptr;
        try {
            queue(cs);
        } catch (...) {
            (void)cudaStreamEndCapture(cs, &graph);
            if (graph) (void)cudaGraphDestroy(graph);
            (void)cudaGetLastError();
            throw;
        }
        cudaGraphExec_t exec = nullptr;
        const bool ok = cudaStreamEndCapture(cs, &graph) == cudaSuccess && graph &&
                        cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
        if (graph) (void)cudaGraphDestroy(graph);
        if (ok) {
            c.graphs.put(key, exec);
            ZB_CUDA(cudaGraphLaunch(exec, s));
            return true;
        }
    }
    (void)cudaGetLastError();
    c.graphs.off = true;  // nothing was queued
    return false;
}

// Parallel branches of a graph under capture: fork(count) lets branch streams 0..count-1 start after what is queued on
// the main stream, join(count) makes the main stream wait for them. Captured, independent kernels become parallel
// graph nodes (a chunk-sized graph is bound by its nodes' serial latency, a few us each). Not capturing, every
// branch is the main stream itself (no events: they would cost host time for nothing).
class GraphBranches {
public:
    GraphBranches(Context &c, cudaStream_t main, bool capturing) : c_(c), main_(main), on_(capturing) {}
    cudaStream_t main() const { return main_; }
    cudaStream_t stream(int i) const { return on_ ? c_.branch_stream[i] : main_; }
    void fork(int count) {
        if (!on_) return;
        ZB_CUDA(cudaEventRecord(c_.branch_event[Context::kBranches], main_));
        const cudaEvent_t start = c_.branch_event[Context::kBranches];
        for (int i = 0; i < count; ++i) ZB_CUDA(cudaStreamWaitEvent(c_.branch_stream[i], start, 0));
    }
    void join(int count) {
        for (int i = 0; i < count; ++i) join_branch(i);
    }
    // The main stream waits for branch i alone (a branch whose result is needed before the others').
    void join_branch(int i) {
        if (!on_) return;
        ZB_CUDA(cudaEventRecord(c_.branch_event[i], c_.branch_stream[i]));
        ZB_CUDA(cudaStreamWaitEvent(main_, c_.branch_event[i], 0));
    }

private:
    Context &c_;
    cudaStream_t main_;
    bool on_;
};

// Accumulates the time of bracketed kernel regions with CUDA events; seconds() synchronizes on the events. With
// ZBOUND_GPU_TIMING set in the environment, seconds() also prints each named region's time to stderr; with
// ZBOUND_GPU_TIMING=host it prints as well the host clock at each mark() since the timer was made (where a
// chunk-sized call spends its time between launches and synchronizations).
// events = false (a caller that asked for no statistics): no events are recorded and seconds() is 0, unless
// ZBOUND_GPU_TIMING is set. An event record costs about 0.8 us of host time and reading a pair back about as much;
// a 4 MB call records a dozen.
class KernelTimer {
public:
    KernelTimer(Context &c, cudaStream_t s, bool events = true);
    void begin(const char *name);
    void end();
    void mark(const char *name);
    double seconds();
    bool records() const { return events_; }  // CUDA events are recorded (so the work cannot be a graph)

private:
    static constexpr int kMarks = 24;
    Context &c_;
    cudaStream_t s_;
    bool events_ = true;
    int used_ = 0;
    bool open_ = false;
    const char *names_[kTimerEvents] = {};
    double t0_ = 0;  // host seconds at construction, when marks are kept
    int marks_ = 0;
    const char *mark_names_[kMarks] = {};
    double mark_at_[kMarks] = {};
};

// ---- shared pieces implemented in separate .cu files ---------------------------------------------------------------

// CRC-32C of every 64 KiB piece of `payload` (device memory) into d_out[ceil(len / 64 KiB)].
void piece_crcs(const Context &c, const uint8_t *payload, uint64_t len, uint32_t *d_out, cudaStream_t s);
inline uint64_t piece_count(uint64_t len) { return (len + 65535) / 65536; }

// The piece CRCs of a payload laid out on the device, whose length is read there (*d_len <= max_len; likely_len
// sizes the grid and picks the slice size, which does not change the result), in one launch whose last block to
// finish completes the header in device memory (header_bytes at d_header, any alignment, written with zeros in its
// payload checksum and header CRC, its last 8 bytes): the payload checksum from the piece CRCs, then the header CRC.
// Nothing is done unless *d_status is 0. d_crcs (piece_count(*d_len) words) must be zero and *ticket ~0u when the
// launch starts (the caller's own kernels and memsets prepare them: no memset node of its own). d_header_raw: a device
// word the launch uses for the header's part of its CRC.
void piece_crcs_seal_at(const Context &c, const uint8_t *payload, uint64_t max_len, uint64_t likely_len,
                        const uint64_t *d_len, const uint64_t *d_status, uint32_t *d_crcs, uint32_t *ticket,
                        uint32_t *d_header_raw, uint8_t *d_header, size_t header_bytes, cudaStream_t s);
// piece_crcs and check_payload_crc in one launch, whose last block to finish compares the payload checksum with
// `expected` (errbit in *d_err where they differ). d_crcs (piece_count(len) words) must be zero and *ticket 0 when the
// launch starts.
void piece_crcs_check(const Context &c, const uint8_t *payload, uint64_t len, uint32_t *d_crcs, uint32_t *ticket,
                      uint32_t expected, uint32_t *d_err, uint32_t errbit, cudaStream_t s);

// The payload checksum of a len-byte payload from its piece CRCs (d_crcs), on the device, in one launch and without
// a round trip to the host.
// seal_payload_crc: d_field is the header's payload-checksum field in device memory (the header ends 8 bytes
// later), written by write_header with a zero checksum; the kernel stores the checksum there and corrects the
// header's own CRC that follows it.
void seal_payload_crc(const Context &c, const uint32_t *d_crcs, uint64_t len, uint8_t *d_field, cudaStream_t s);
// check_payload_crc: sets errbit in *d_err when the checksum differs from `expected` (the header's).
void check_payload_crc(const Context &c, const uint32_t *d_crcs, uint64_t len, uint32_t expected, uint32_t *d_err,
                       uint32_t errbit, cudaStream_t s);

// The piece CRCs of a len-byte payload (d_crcs, device) on their way to the host: queued on `s` by the constructor,
// readable after the next synchronization of `s`. They land in the context's pinned scratch when they fit (payloads
// up to about 1 GiB; the driver stages a copy into pageable memory and blocks the host until it is done).
class HostCrcs {
public:
    HostCrcs(Context &c, const uint32_t *d_crcs, uint64_t len, cudaStream_t s);
    // CRC-32C over the little-endian piece CRCs: the stream's payload checksum (0 for an empty payload).
    uint32_t combined() const;

private:
    const uint32_t *words_ = nullptr;
    size_t count_ = 0;
    std::vector<uint32_t> spill_;  // where they land when the scratch is too small
};

// Builds the device CRC tables (called once by the context).
void init_crc_tables(Context &c);

// CUB scans over 32-bit unsigned values (sums wrap mod 2^32). Same two-phase protocol as CUB: with temp ==
// nullptr they only set temp_bytes.
void exclusive_sum(void *temp, size_t &temp_bytes, const uint32_t *in, uint32_t *out, uint64_t n, cudaStream_t s);
// Element-wise exclusive sum of uint4 counters (x, y, z, w summed separately).
void exclusive_sum4(void *temp, size_t &temp_bytes, const uint4 *in, uint4 *out, uint64_t n, cudaStream_t s);
// exclusive_sum4, and totals[0..2] = the sums of x, y and z over all n (scan_totals' three lanes), in the scan's own
// launch where it runs in one block (one graph node less in a chunk-sized call).
void exclusive_sum4_totals(void *temp, size_t &temp_bytes, const uint4 *in, uint4 *out, uint64_t n,
                           unsigned long long *totals, cudaStream_t s);
// Exclusive scan of (head, value) pairs where a head restarts the running sum: out[i].y is the sum of the values
// since the last head before i (the carries of the x prefix sum between tiles).
void exclusive_segmented_sum(void *temp, size_t &temp_bytes, const uint2 *in, uint2 *out, uint64_t n,
                             cudaStream_t s);
// The largest temp_bytes exclusive_sum needs for any of `lengths`: one temporary buffer then serves every scan.
size_t exclusive_sum_temp_bytes(std::initializer_list<uint64_t> lengths, cudaStream_t s);
// The same for exclusive_sum4 over n elements.
size_t exclusive_sum4_temp_bytes(uint64_t n, cudaStream_t s);

// ---- bit strings and the zero-block sparse pass (sparse_gpu.cu) ----------------------------------------------------
// A "block" is 16 bytes = 4 words; flags are 1 bit per block, 32 blocks per flag word, LSB first.

// Encoder: flag word and popcount for every group of 32 blocks of `words` (nblocks blocks, zero padded).
void sparse_flags(const uint32_t *words, uint64_t nblocks, uint32_t *flagwords, uint32_t *counts, cudaStream_t s);
// Encoder: copies every flagged block to dst + 16 * (its rank among flagged blocks). The rank of the first block of
// each "unit" of `groups_per_unit` (a power of 2) flag words is unit_off[unit * unit_stride]. nstored: the number of
// flagged blocks (it chooses the kernel's form).
void sparse_copy(const uint32_t *words, uint64_t nblocks, uint64_t nstored, const uint32_t *flagwords,
                 const uint32_t *unit_off, int unit_stride, int groups_per_unit, uint8_t *dst, cudaStream_t s);
// sparse_copy into a stream laid out on the device: dst = base + *d_off and the segment's length *d_len (16 bytes
// per stored block) are read there, and nothing is copied unless *d_status is 0. k_hint: 0 when the host does not
// know the stored count or the destination, else the form (1 or 4) that sparse_copy would choose.
void sparse_copy_at(const uint32_t *words, uint64_t nblocks, const uint32_t *flagwords, const uint32_t *unit_off,
                    int unit_stride, int groups_per_unit, uint8_t *base, const uint64_t *d_off, const uint64_t *d_len,
                    const uint64_t *d_status, int k_hint, cudaStream_t s);
// The form sparse_copy takes: 4 blocks per thread where at most half are stored and dst is 4-byte aligned, else 1.
inline int sparse_copy_form(uint64_t nblocks, uint64_t nstored, const uint8_t *dst) {
    return 2 * nstored <= nblocks && reinterpret_cast<uintptr_t>(dst) % 4 == 0 ? 4 : 1;
}
// Decoder: reads flag bytes (any alignment) into flag words with their popcounts; flag bits at or past `nblocks`
// set `errbit` in *err.
void sparse_read_flags(const uint8_t *flag_bytes, uint64_t nblocks, uint32_t *flagwords, uint32_t *counts,
                       uint32_t *err, uint32_t errbit, cudaStream_t s);
// Decoder: expands `nstored` stored blocks into words[4 * nblocks] (zeros where the flag is 0). `off` is the
// exclusive scan of `counts`. Checks that exactly nstored blocks are flagged and that the bytes of the last block
// past `string_bytes` are zero.
void sparse_expand(const uint32_t *flagwords, const uint32_t *counts, const uint32_t *off, uint64_t nblocks,
                   const uint8_t *blocks, uint64_t nstored, uint64_t string_bytes, uint32_t *words, uint32_t *err,
                   uint32_t errbit, cudaStream_t s);
// out[i] = popcount(words[i]).
void popcount_words(const uint32_t *words, uint64_t nwords, uint32_t *out, cudaStream_t s);
// totals[j] = off[j][n[j] - 1] + cnt[j][n[j] - 1] (0 when n[j] == 0), for j < count (count <= 4). `stride` is the
// distance in words between consecutive entries (4 to read one lane of a uint4 array).
struct ScanTotal {
    const uint32_t *off = nullptr, *cnt = nullptr;
    uint64_t n = 0;
    int stride = 1;
};
void scan_totals(const ScanTotal *t, int count, unsigned long long *totals, cudaStream_t s);

// ---- the codec, per value type (encode.cuh / decode.cuh, instantiated in encode_*.cu / decode_*.cu) ---------------

// Where a compressed stream goes: a host buffer (host API) or a device buffer (device API).
struct StreamTarget {
    bool on_device = false;
    uint8_t *ptr = nullptr;
    size_t capacity = 0;
};

// Compresses n values at d_x (device memory; the host API uploads first, h_x is then the original host copy used
// for a raw-passthrough stream, else nullptr). Writes the complete stream to `out` and returns its length.
template <typename T>
size_t encode(Context &c, const zb_params &p, const Shape &shape, const T *d_x, const T *h_x,
              const StreamTarget &out, cudaStream_t s, KernelTimer &timer);

// Decodes a stream whose header h was validated by read_header. The payload (h.payload_bytes() bytes) is in host
// or device memory, and so is dst (n values). Raw-passthrough streams are copied. verify_crc: check the payload
// checksum on the GPU (the host API's read_header has already checked it on the CPU). Throws
// Failure(ZB_ERR_CORRUPT) on inconsistent data; dst is only written when the data are consistent, except on the
// device path where dst may be partly written. d_header (device, or nullptr): h.header_bytes() bytes that the call
// also copies to c.host_small + kHostReplayHeaderOffset (a replayed decompression's check of its header: gpu_ops.cu),
// inside the call's graph where it runs as one, so that no copy of its own precedes the work.
template <typename T>
void decode(Context &c, const Header &h, const uint8_t *src_payload, bool src_on_device, void *dst,
            bool dst_on_device, bool verify_crc, cudaStream_t s, KernelTimer &timer,
            const uint8_t *d_header = nullptr);

// Largest n the GPU path takes: per-tile offsets and counts are 32-bit.
constexpr uint64_t kMaxValues = (1ull << 32) - 4096;

}  // namespace gpu
}  // namespace zb
