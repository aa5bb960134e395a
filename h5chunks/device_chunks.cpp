// zbound_h5chunks.h with the CUDA runtime: windows of chunks through the batched device calls, HDF5 direct chunk
// I/O in the calling thread, the GPU work of the next window in a helper thread.
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <stdexcept>
#include "chunk_layout.h"
#include "chunk_reader.h"
#include "zbound_cd_internal.h"
#include "zbound_h5chunks.h"

namespace zbh5 {
namespace {

// Raw bytes of the chunks of one batched call: ZBOUND_CHUNK_WINDOW_MB (default 256).
uint64_t window_bytes() {
    static const uint64_t v = [] {
        const char *e = std::getenv("ZBOUND_CHUNK_WINDOW_MB");
        char *end = nullptr;
        const long long mb = e && *e ? std::strtoll(e, &end, 10) : 0;
        return (uint64_t)(mb > 0 && end && !*end ? mb : 256) << 20;
    }();
    return v;
}
constexpr uint64_t kAlign = 256;                         // stream offsets in the staging buffers
constexpr int kReadThreads = 8;   // pread threads for the stored chunks (16 cores: 8 read while the GPU works)

// A failure with its status; caught at the entry points.
struct Error {
    zb_status status;
    std::string msg;
};

void cuda_ok(cudaError_t e, const char *what) {
    if (e == cudaSuccess) return;
    (void)cudaGetLastError();
    throw Error{ZB_ERR_GPU, std::string(what) + ": " + cudaGetErrorString(e)};
}

void zb_ok(zb_status s, const char *what) {
    if (s != ZB_OK) throw Error{s, std::string(what) + ": " + zb_last_error()};
}

uint64_t aligned(uint64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// A grow-only buffer of device memory (cudaMalloc / cudaFree) or pinned host memory (cudaHostAlloc /
// cudaFreeHost), freed at scope exit.
template <cudaError_t (*Alloc)(void **, size_t), cudaError_t (*Free)(void *)> struct GrowBuffer {
    uint8_t *p = nullptr;
    size_t size = 0;
    GrowBuffer() = default;
    GrowBuffer(const GrowBuffer &) = delete;
    GrowBuffer &operator=(const GrowBuffer &) = delete;
    ~GrowBuffer() {
        if (p) (void)Free(p);
    }
    uint8_t *get(size_t bytes) {   // at least `bytes` (contents not kept when it grows)
        if (bytes <= size && p) return p;
        if (p) (void)Free(p);
        p = nullptr;
        size = 0;
        cuda_ok(Alloc(reinterpret_cast<void **>(&p), std::max<size_t>(bytes, 1)), "allocating a staging buffer");
        size = bytes;
        return p;
    }
};
cudaError_t device_alloc(void **p, size_t bytes) { return cudaMalloc(p, bytes); }
cudaError_t pinned_alloc(void **p, size_t bytes) { return cudaHostAlloc(p, bytes, cudaHostAllocDefault); }
cudaError_t device_free(void *p) { return cudaFree(p); }
cudaError_t pinned_free(void *p) { return cudaFreeHost(p); }
using DeviceBuffer = GrowBuffer<device_alloc, device_free>;
using PinnedBuffer = GrowBuffer<pinned_alloc, pinned_free>;

// A CUDA stream of this call.
struct Stream {
    cudaStream_t s = nullptr;
    Stream() { cuda_ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"); }
    ~Stream() {
        (void)cudaStreamSynchronize(s);
        (void)cudaStreamDestroy(s);
    }
};

enum class Direction { ToChunk, ToArray };

// Queues the copies of the part of chunk `offset` inside the dataset between the array and a chunk buffer.
void copy_region(const ChunkLayout &lay, const uint64_t *offset, uint8_t *array, uint8_t *chunk, Direction dir,
                 cudaStream_t s) {
    const size_t vb = lay.value_bytes();
    for (const Box &b : lay.boxes(offset)) {
        cudaMemcpy3DParms p = {};
        const cudaPitchedPtr a = make_cudaPitchedPtr(array + b.array_start * vb, b.array_row * vb, b.array_row,
                                                     b.array_plane / b.array_row);
        const cudaPitchedPtr c = make_cudaPitchedPtr(chunk + b.chunk_start * vb, b.chunk_row * vb, b.chunk_row,
                                                     b.chunk_plane / b.chunk_row);
        p.srcPtr = dir == Direction::ToChunk ? a : c;
        p.dstPtr = dir == Direction::ToChunk ? c : a;
        p.extent = make_cudaExtent(b.extent[0] * vb, b.extent[1], b.extent[2]);
        p.kind = cudaMemcpyDeviceToDevice;
        cuda_ok(cudaMemcpy3DAsync(&p, s), "cudaMemcpy3DAsync (chunk region)");
    }
}

// One chunk-sized device buffer of the pad value (HDF5's padding of edge chunks and its value of unwritten ones).
void fill_pad(const ChunkLayout &lay, DeviceBuffer &pad, cudaStream_t s) {
    std::vector<uint8_t> host((size_t)lay.chunk_bytes());
    const size_t vb = lay.value_bytes();
    for (size_t i = 0; i < host.size(); i += vb) std::memcpy(&host[i], &lay.pad_bits, vb);   // little-endian host
    cuda_ok(cudaMemcpyAsync(pad.get(host.size()), host.data(), host.size(), cudaMemcpyHostToDevice, s), "pad upload");
    cuda_ok(cudaStreamSynchronize(s), "pad upload");
}

uint64_t window_chunks(const ChunkLayout &lay, uint64_t count) {
    return std::max<uint64_t>(1, std::min<uint64_t>(count, window_bytes() / std::max<uint64_t>(1, lay.chunk_bytes())));
}

// Runs f(), turning failures into a status and zb_last_error().
template <typename F> zb_status guarded(F &&f) {
    try {
        return f();
    } catch (const Error &e) {
        zbound_cd::set_last_error(e.msg);
        return e.status;
    } catch (const std::bad_alloc &) {
        zbound_cd::set_last_error("out of host memory");
        return ZB_ERR_NOMEM;
    } catch (const std::exception &e) {
        zbound_cd::set_last_error(std::string("internal error: ") + e.what());
        return ZB_ERR_INTERNAL;
    }
}

void prepare(hid_t dset, ChunkLayout &lay, void *cuda_stream) {
    std::string msg;
    if (!read_layout(dset, lay, msg)) throw Error{ZB_ERR_INVALID_ARG, "zbound device chunk I/O: " + msg};
    if (!zb_gpu_available()) {
        // The batched call says why (no CUDA backend in this build, or no usable GPU).
        const zb_status s = zb_compress_device_batch(&lay.params, lay.dtype, 3, lay.folded, 0, nullptr, nullptr, 0,
                                                     nullptr, nullptr, nullptr, nullptr);
        throw Error{s == ZB_OK ? ZB_ERR_GPU : s, std::string("zbound device chunk I/O: ") + zb_last_error()};
    }
    cuda_ok(cudaStreamSynchronize(static_cast<cudaStream_t>(cuda_stream)), "the caller's stream");
}

// ---- write -----------------------------------------------------------------------------------------------------

struct WriteWindow {
    std::vector<std::vector<uint64_t>> offsets;
    std::vector<size_t> lens, starts;   // stream lengths and their places in the window's pinned buffer
};

zb_status write_chunks(hid_t dset, const void *d_data, void *cuda_stream) {
    ChunkLayout lay;
    prepare(dset, lay, cuda_stream);
    const uint64_t count = lay.grid_count();
    if (!count) return ZB_OK;
    const uint64_t per = window_chunks(lay, count), chunk_bytes = lay.chunk_bytes();
    const size_t cap = zb_compress_bound(lay.dtype, (size_t)lay.chunk_values());
    Stream stream;
    const cudaStream_t s = stream.s;
    DeviceBuffer pad, staging[2], streams[2];
    PinnedBuffer host[2];
    uint8_t *array = static_cast<uint8_t *>(const_cast<void *>(d_data));

    // GPU side of window k into buffer set b (helper thread): gather, compress, copy the streams to pinned memory.
    auto compress_window = [&](uint64_t k, int b) {
        WriteWindow w;
        std::vector<const void *> srcs;
        std::vector<void *> dsts;
        uint8_t *out = streams[b].get((size_t)(per * cap));
        for (uint64_t i = k * per; i < std::min(count, (k + 1) * per); ++i) {
            w.offsets.push_back(lay.grid_offset(i));
            const uint64_t *off = w.offsets.back().data();
            const size_t j = srcs.size();
            if (lay.is_slab(off)) {
                srcs.push_back(array + lay.array_index(off) * lay.value_bytes());
            } else {
                uint8_t *slot = staging[b].get((size_t)(per * chunk_bytes)) + j * chunk_bytes;
                if (!lay.is_full(off)) {
                    if (!pad.p) fill_pad(lay, pad, s);
                    cuda_ok(cudaMemcpyAsync(slot, pad.p, chunk_bytes, cudaMemcpyDeviceToDevice, s), "pad copy");
                }
                copy_region(lay, off, array, slot, Direction::ToChunk, s);
                srcs.push_back(slot);
            }
            dsts.push_back(out + j * cap);
        }
        w.lens.assign(srcs.size(), 0);
        zb_ok(zb_compress_device_batch(&lay.params, lay.dtype, 3, lay.folded, srcs.size(), srcs.data(), dsts.data(),
                                       cap, w.lens.data(), nullptr, s, nullptr),
              "compressing a window of chunks");
        size_t total = 0;
        for (size_t len : w.lens) {
            w.starts.push_back(total);
            total += len;
        }
        uint8_t *h = host[b].get(std::max<size_t>(total, (size_t)1 << 20));
        for (size_t j = 0; j < srcs.size(); ++j)
            cuda_ok(cudaMemcpyAsync(h + w.starts[j], dsts[j], w.lens[j], cudaMemcpyDeviceToHost, s), "stream download");
        cuda_ok(cudaStreamSynchronize(s), "stream download");
        return w;
    };

    const uint64_t nwin = (count + per - 1) / per;
    std::future<WriteWindow> pending = std::async(std::launch::async, compress_window, 0, 0);
    for (uint64_t k = 0; k < nwin; ++k) {
        WriteWindow w = pending.get();   // rethrows the helper's failure
        if (k + 1 < nwin) pending = std::async(std::launch::async, compress_window, k + 1, (int)((k + 1) % 2));
        const uint8_t *h = host[k % 2].p;
        for (size_t j = 0; j < w.lens.size(); ++j) {
            const std::vector<hsize_t> off(w.offsets[j].begin(), w.offsets[j].end());
            if (H5Dwrite_chunk(dset, H5P_DEFAULT, 0, off.data(), w.lens[j], h + w.starts[j]) < 0) {
                if (pending.valid()) pending.wait();   // the helper uses buffers that die with this frame
                throw Error{ZB_ERR_INTERNAL, "H5Dwrite_chunk failed for the chunk at " + offset_text(w.offsets[j])};
            }
        }
    }
    return ZB_OK;
}

// ---- read ------------------------------------------------------------------------------------------------------

zb_status read_chunks(hid_t dset, void *d_data, void *cuda_stream) {
    ChunkLayout lay;
    prepare(dset, lay, cuda_stream);
    ChunkReader reader(dset, kReadThreads);
    std::vector<StoredChunk> stored;
    std::vector<uint64_t> missing;
    std::string msg;
    if (!list_chunks(dset, lay, stored, missing, msg)) throw Error{ZB_ERR_INTERNAL, msg};
    Stream stream;
    const cudaStream_t s = stream.s;
    uint8_t *array = static_cast<uint8_t *>(d_data);
    const uint64_t chunk_bytes = lay.chunk_bytes();
    DeviceBuffer pad, staging[2], device_in[2];
    PinnedBuffer host[2];
    if (!missing.empty()) {   // unwritten chunks read as the pad value
        fill_pad(lay, pad, s);
        for (uint64_t g : missing) {
            const std::vector<uint64_t> off = lay.grid_offset(g);
            copy_region(lay, off.data(), array, pad.p, Direction::ToArray, s);
        }
    }
    const uint64_t count = stored.size();
    const uint64_t per = window_chunks(lay, std::max<uint64_t>(1, count));
    uint64_t room = 0;
    for (uint64_t k = 0; k < count; k += per) {
        uint64_t used = 0;
        for (uint64_t i = k; i < std::min(count, k + per); ++i) used += aligned(stored[i].size);
        room = std::max(room, used);
    }

    // HDF5 side of window k into buffer set b (calling thread): the stored bytes into pinned memory.
    auto read_window = [&](uint64_t k, int b) {
        uint8_t *h = host[b].get((size_t)room);
        uint64_t pos = 0;
        const uint64_t first = k * per, last = std::min(count, (k + 1) * per);
        for (uint64_t i = first; i < last; ++i) {
            stored[i].start = pos;
            pos += aligned(stored[i].size);
        }
        std::string why;
        if (!reader.read(stored, (size_t)first, (size_t)last, h, why)) throw Error{ZB_ERR_INTERNAL, why};
        return pos;
    };

    // GPU side (helper thread): upload, decompress into place or into staging, scatter the staged chunks.
    auto decode_window = [&](uint64_t k, int b, uint64_t used) {
        uint8_t *in = device_in[b].get((size_t)room);
        cuda_ok(cudaMemcpyAsync(in, host[b].p, used, cudaMemcpyHostToDevice, s), "stream upload");
        std::vector<const void *> srcs;
        std::vector<size_t> lens;
        std::vector<void *> dsts;
        std::vector<const StoredChunk *> staged;
        for (uint64_t i = k * per; i < std::min(count, (k + 1) * per); ++i) {
            const StoredChunk &c = stored[i];
            const uint64_t *off = c.offset.data();
            uint8_t *target = nullptr;
            if (lay.is_slab(off)) {
                target = array + lay.array_index(off) * lay.value_bytes();
            } else {
                target = staging[b].get((size_t)(per * chunk_bytes)) + (i - k * per) * chunk_bytes;
                staged.push_back(&c);
            }
            if (c.mask & 1) {   // stored unfiltered: the raw values
                if (c.size != chunk_bytes)
                    throw Error{ZB_ERR_CORRUPT, "the unfiltered chunk at " + offset_text(c.offset) + " holds " +
                                                    std::to_string(c.size) + " bytes, not " +
                                                    std::to_string(chunk_bytes)};
                cuda_ok(cudaMemcpyAsync(target, in + c.start, chunk_bytes, cudaMemcpyDeviceToDevice, s), "raw chunk");
                continue;
            }
            srcs.push_back(in + c.start);
            lens.push_back((size_t)c.size);
            dsts.push_back(target);
        }
        if (!srcs.empty())
            zb_ok(zb_decompress_device_batch(srcs.size(), srcs.data(), lens.data(), dsts.data(), (size_t)chunk_bytes,
                                             nullptr, s, nullptr),
                  "decompressing a window of chunks");
        for (const StoredChunk *c : staged) {
            const uint64_t j = (uint64_t)(c - stored.data()) - k * per;
            copy_region(lay, c->offset.data(), array, staging[b].p + j * chunk_bytes, Direction::ToArray, s);
        }
        cuda_ok(cudaStreamSynchronize(s), "scatter");
    };

    const uint64_t nwin = (count + per - 1) / per;
    std::future<void> pending;
    for (uint64_t k = 0; k < nwin; ++k) {
        uint64_t used = 0;
        try {
            used = read_window(k, (int)(k % 2));
        } catch (...) {
            if (pending.valid()) pending.wait();
            throw;
        }
        if (pending.valid()) pending.get();
        pending = std::async(std::launch::async, decode_window, k, (int)(k % 2), used);
    }
    if (pending.valid()) pending.get();
    cuda_ok(cudaStreamSynchronize(s), "read");
    return ZB_OK;
}

}  // namespace
}  // namespace zbh5

zb_status zbound_h5_write_chunks_device(hid_t dset, const void *d_data, void *cuda_stream) {
    return zbh5::guarded([&] {
        if (!d_data) throw zbh5::Error{ZB_ERR_INVALID_ARG, "zbound device chunk I/O: null device array"};
        return zbh5::write_chunks(dset, d_data, cuda_stream);
    });
}

zb_status zbound_h5_read_chunks_device(hid_t dset, void *d_data, void *cuda_stream) {
    return zbh5::guarded([&] {
        if (!d_data) throw zbh5::Error{ZB_ERR_INVALID_ARG, "zbound device chunk I/O: null device array"};
        return zbh5::read_chunks(dset, d_data, cuda_stream);
    });
}
