// A chunked zbound dataset as the device chunk I/O sees it: shapes, the filter's parameters, the chunk grid and the
// strided boxes that move one chunk between the whole array and a chunk-shaped buffer.
#pragma once
#include <hdf5.h>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>
#include "zbound.h"

namespace zbh5 {

// One 3-D strided copy between the array and a chunk buffer, in elements: `extent` (x fastest) values starting at
// element array_start of the array (rows of array_row values, array_plane values per plane) and at element
// chunk_start of the chunk buffer (rows of chunk_row values, chunk_plane per plane).
struct Box {
    uint64_t array_start = 0, chunk_start = 0;
    uint64_t array_row = 1, array_plane = 1, chunk_row = 1, chunk_plane = 1;
    uint64_t extent[3] = {1, 1, 1};   // x (fastest), y, z
};

struct ChunkLayout {
    std::vector<uint64_t> dims;    // the dataset's shape
    std::vector<uint64_t> chunk;   // its chunk shape (same rank)
    zb_dtype dtype = ZB_F32;
    zb_params params{};            // the filter's parameters, the fill value included
    uint64_t pad_bits = 0;         // what HDF5 pads edge chunks and unwritten chunks with: the fill value, else 0
    size_t folded[3] = {1, 1, 1};  // the chunk shape the filter hands the codec (set_local's words 10..12)

    int rank() const { return (int)dims.size(); }
    size_t value_bytes() const { return dtype == ZB_F64 ? 8 : 4; }
    uint64_t chunk_values() const;
    uint64_t chunk_bytes() const { return chunk_values() * value_bytes(); }
    // Chunks in the grid, and the element offset of chunk `index` (C order over the grid).
    uint64_t grid_count() const;
    std::vector<uint64_t> grid_offset(uint64_t index) const;
    // The grid index of the chunk at element offset `offset` (each entry a multiple of the chunk dim).
    uint64_t grid_index(const uint64_t *offset) const;
    // The chunk at `offset` lies inside the dataset.
    bool is_full(const uint64_t *offset) const;
    // Full, and stored in the array exactly as a chunk buffer (all dims but the slowest span the dataset), so it
    // can be read and written in place at element array_index(offset).
    bool is_slab(const uint64_t *offset) const;
    uint64_t array_index(const uint64_t *offset) const;
    // The copies that move the part of chunk `offset` inside the dataset (one box per index of the dims before the
    // last three).
    std::vector<Box> boxes(const uint64_t *offset) const;
};

// A chunk stored in the file, as H5Dget_chunk_info describes it.
struct StoredChunk {
    std::vector<uint64_t> offset;   // element offset of the chunk
    uint64_t size = 0;              // stored bytes
    unsigned mask = 0;              // HDF5's filter mask: bit 0 set when the chunk was stored unfiltered
    uint64_t start = 0;             // its place in a staging buffer (set by the reader)
    uint64_t address = 0;           // its file address as H5Dget_chunk_info gives it (chunk_reader.cpp: the base)
};

// Closes an HDF5 identifier at scope exit.
struct Id {
    hid_t id;
    herr_t (*close)(hid_t);
    ~Id() {
        if (id >= 0) close(id);
    }
};

// "(z,y,x)": a chunk's element offset, for messages.
std::string offset_text(const std::vector<uint64_t> &offset);

// The chunks `dset` has stored (in HDF5's index order), and the grid indices of the chunks never written. False,
// with `msg`, when HDF5 cannot list them.
bool list_chunks(hid_t dset, const ChunkLayout &lay, std::vector<StoredChunk> &stored, std::vector<uint64_t> &missing,
                 std::string &msg);

// Fills `out` from HDF5's description of `dset`. False, with the reason in `msg`, when it is not chunked, has not
// exactly the zbound filter, was not created through set_local, or does not hold native-order float32/float64.
bool read_layout(hid_t dset, ChunkLayout &out, std::string &msg);

}  // namespace zbh5
