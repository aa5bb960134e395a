// Reading a dataset's stored chunk bytes for the device chunk I/O: one H5Dread_chunk per chunk on the calling thread,
// or, where the file is a plain POSIX file, pread at the chunks' file addresses on several threads. HDF5 serializes
// its API calls, and a 4 GB array's 465 MB of stored bytes took about 60 ms through H5Dread_chunk on the device
// machine (one thread copying out of the page cache), most of a read_chunks call whose GPU work is under 20 ms.
#pragma once
#include <hdf5.h>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>
#include "chunk_layout.h"

namespace zbh5 {

// How read_stored_chunks reads a dataset's chunks.
class ChunkReader {
public:
    // Decides the way for `dset`: pread where the file uses HDF5's default POSIX driver (sec2) without a page
    // buffer, after H5Dflush of a file open for writing (the chunk cache's dirty chunks reach the file); else
    // H5Dread_chunk. ZBOUND_CHUNK_PREAD=0 forces H5Dread_chunk. `threads`: pread threads (at least 1), taking
    // pieces of at most piece_bytes in turn (a 64 MB chunk compresses to a few MB, so a window holds few chunks,
    // and whole chunks would leave threads idle).
    ChunkReader(hid_t dset, int threads, uint64_t piece_bytes = uint64_t(1) << 20);
    // Reads chunks [begin, end) of `chunks` (list_chunks' order, each with its HDF5 address and size) into dst +
    // chunk.start. False, with `msg`, when a chunk cannot be read whole.
    bool read(const std::vector<StoredChunk> &chunks, size_t begin, size_t end, uint8_t *dst, std::string &msg);
    // True when read() uses pread (for tests and the bench's notes).
    bool direct() const { return fd_ >= 0; }

private:
    bool read_hdf5(const StoredChunk &c, uint8_t *dst, std::string &msg) const;
    bool read_direct(const std::vector<StoredChunk> &chunks, size_t begin, size_t end, uint8_t *dst,
                     std::string &msg) const;
    hid_t dset_;
    int threads_;
    uint64_t piece_bytes_;
    int fd_ = -1;            // the file's descriptor (owned by HDF5), -1 for H5Dread_chunk
    uint64_t base_ = 0;      // added to H5Dget_chunk_info's addresses: the user block's size, or 0 (HDF5 >= 1.14.4)
    bool checked_ = false;   // the first chunk read both ways agreed
};

}  // namespace zbh5
