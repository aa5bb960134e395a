// The stored chunk bytes of a dataset, through HDF5 or by pread at the chunks' addresses (chunk_reader.h).
#include "chunk_reader.h"
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace zbh5 {
namespace {

// The descriptor of dset's file when pread may read its chunks, else -1; base: what to add to H5Dget_chunk_info's
// addresses for file offsets.
// Only files open read-only: a file open for writing may hold chunks in the chunk cache that are not in the file
// yet (H5Dflush would write them, but also fsync the file).
int direct_descriptor(hid_t dset, uint64_t &base) {
    const char *env = std::getenv("ZBOUND_CHUNK_PREAD");
    if (env && std::strcmp(env, "0") == 0) return -1;
    Id file{H5Iget_file_id(dset), H5Fclose};
    if (file.id < 0) return -1;
    unsigned intent = 0;
    if (H5Fget_intent(file.id, &intent) < 0 || (intent & H5F_ACC_RDWR)) return -1;
    Id fapl{H5Fget_access_plist(file.id), H5Pclose}, fcpl{H5Fget_create_plist(file.id), H5Pclose};
    if (fapl.id < 0 || fcpl.id < 0 || H5Pget_driver(fapl.id) != H5FD_SEC2) return -1;
    hsize_t userblock = 0;
    unsigned major = 0, minor = 0, release = 0;
    if (H5Pget_userblock(fcpl.id, &userblock) < 0 || H5get_libversion(&major, &minor, &release) < 0) return -1;
    void *handle = nullptr;
    if (H5Fget_vfd_handle(file.id, fapl.id, &handle) < 0 || !handle) return -1;
    // H5Dget_chunk_info's addresses are relative to the end of the user block before HDF5 1.14.4, absolute from it
    // on (HDFGroup/hdf5 pull request 4236). The library running decides, not the headers built against.
    const bool absolute = major > 1 || (major == 1 && (minor > 14 || (minor == 14 && release >= 4)));
    base = absolute ? 0 : userblock;
    return *static_cast<int *>(handle);
}

// Reads len bytes at offset `at` of fd into dst, through short reads and interruptions.
bool pread_all(int fd, uint8_t *dst, uint64_t len, uint64_t at) {
    while (len) {
        const ssize_t got = ::pread(fd, dst, (size_t)len, (off_t)at);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return false;
        dst += got;
        at += (uint64_t)got;
        len -= (uint64_t)got;
    }
    return true;
}

}  // namespace

ChunkReader::ChunkReader(hid_t dset, int threads, uint64_t piece_bytes)
    : dset_(dset), threads_(std::max(1, threads)), piece_bytes_(std::max<uint64_t>(1, piece_bytes)) {
    H5E_BEGIN_TRY { fd_ = direct_descriptor(dset, base_); }
    H5E_END_TRY;
}

bool ChunkReader::read_hdf5(const StoredChunk &c, uint8_t *dst, std::string &msg) const {
    const std::vector<hsize_t> off(c.offset.begin(), c.offset.end());
    uint32_t filters = 0;
#if H5_VERSION_GE(2, 0, 0)
    size_t room = (size_t)c.size;
    const herr_t st = H5Dread_chunk2(dset_, H5P_DEFAULT, off.data(), &filters, dst, &room);
#else
    const herr_t st = H5Dread_chunk(dset_, H5P_DEFAULT, off.data(), &filters, dst);
#endif
    if (st < 0) {
        msg = "H5Dread_chunk failed for the chunk at " + offset_text(c.offset);
        return false;
    }
    return true;
}

bool ChunkReader::read_direct(const std::vector<StoredChunk> &chunks, size_t begin, size_t end, uint8_t *dst,
                              std::string &msg) const {
    struct Piece {
        uint64_t at, len, to;
    };
    std::vector<Piece> pieces;
    for (size_t i = begin; i < end; ++i)
        for (uint64_t p = 0; p < chunks[i].size; p += piece_bytes_)
            pieces.push_back({base_ + chunks[i].address + p, std::min(piece_bytes_, chunks[i].size - p),
                              chunks[i].start + p});
    std::atomic<size_t> next{0};
    std::atomic<bool> ok{true};
    auto work = [&] {
        for (size_t k; ok && (k = next.fetch_add(1)) < pieces.size();)
            if (!pread_all(fd_, dst + pieces[k].to, pieces[k].len, pieces[k].at)) ok = false;
    };
    const int n = (int)std::min<size_t>((size_t)threads_, pieces.size());
    std::vector<std::thread> team;
    for (int t = 1; t < n; ++t) team.emplace_back(work);
    work();
    for (std::thread &t : team) t.join();
    if (!ok) msg = "reading the stored chunks from the file failed (short read or I/O error)";
    return ok;
}

bool ChunkReader::read(const std::vector<StoredChunk> &chunks, size_t begin, size_t end, uint8_t *dst,
                       std::string &msg) {
    if (begin >= end) return true;
    if (fd_ >= 0 && !checked_) {
        // The first chunk both ways: where pread does not give HDF5's bytes (an address convention this code does
        // not know, a driver that is not what it says), every chunk goes through HDF5.
        const StoredChunk &c = chunks[begin];
        std::vector<uint8_t> direct((size_t)c.size);
        if (!read_hdf5(c, dst + c.start, msg)) return false;
        if (!pread_all(fd_, direct.data(), c.size, base_ + c.address) ||
            std::memcmp(direct.data(), dst + c.start, (size_t)c.size) != 0)
            fd_ = -1;
        checked_ = true;
        ++begin;
    }
    if (fd_ >= 0) return read_direct(chunks, begin, end, dst, msg);
    for (size_t i = begin; i < end; ++i)
        if (!read_hdf5(chunks[i], dst + chunks[i].start, msg)) return false;
    return true;
}

}  // namespace zbh5
