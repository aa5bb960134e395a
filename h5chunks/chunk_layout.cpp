// The dataset side of the device chunk I/O: HDF5's description of a zbound dataset, and the chunk grid arithmetic.
#include "chunk_layout.h"
#include <algorithm>
#include "zbound_cd_internal.h"
#include "zbound_filter.h"

namespace zbh5 {

std::string offset_text(const std::vector<uint64_t> &offset) {
    std::string t = "(";
    for (size_t i = 0; i < offset.size(); ++i) t += (i ? "," : "") + std::to_string(offset[i]);
    return t + ")";
}

uint64_t ChunkLayout::chunk_values() const {
    uint64_t n = 1;
    for (uint64_t c : chunk) n *= c;
    return n;
}

uint64_t ChunkLayout::grid_count() const {
    uint64_t n = 1;
    for (size_t d = 0; d < dims.size(); ++d) n *= (dims[d] + chunk[d] - 1) / chunk[d];
    return n;
}

std::vector<uint64_t> ChunkLayout::grid_offset(uint64_t index) const {
    std::vector<uint64_t> off(dims.size());
    for (size_t d = dims.size(); d-- > 0;) {
        const uint64_t per = (dims[d] + chunk[d] - 1) / chunk[d];
        off[d] = (index % per) * chunk[d];
        index /= per;
    }
    return off;
}

uint64_t ChunkLayout::grid_index(const uint64_t *offset) const {
    uint64_t index = 0;
    for (size_t d = 0; d < dims.size(); ++d) index = index * ((dims[d] + chunk[d] - 1) / chunk[d]) + offset[d] / chunk[d];
    return index;
}

bool ChunkLayout::is_full(const uint64_t *offset) const {
    for (size_t d = 0; d < dims.size(); ++d)
        if (offset[d] + chunk[d] > dims[d]) return false;
    return true;
}

bool ChunkLayout::is_slab(const uint64_t *offset) const {
    if (!is_full(offset)) return false;
    for (size_t d = 1; d < dims.size(); ++d)
        if (chunk[d] != dims[d]) return false;
    return true;
}

uint64_t ChunkLayout::array_index(const uint64_t *offset) const {
    uint64_t index = 0;
    for (size_t d = 0; d < dims.size(); ++d) index = index * dims[d] + offset[d];
    return index;
}

std::vector<Box> ChunkLayout::boxes(const uint64_t *offset) const {
    // Pad to at least three dims with leading unit dims; the dims before the last three are walked one index at a
    // time, each giving one 3-D box.
    const size_t r = std::max<size_t>(3, dims.size()), lead = r - 3, pad = r - dims.size();
    std::vector<uint64_t> D(r, 1), C(r, 1), O(r, 0), E(r, 1);
    for (size_t d = 0; d < dims.size(); ++d) {
        D[pad + d] = dims[d];
        C[pad + d] = chunk[d];
        O[pad + d] = offset[d];
        E[pad + d] = std::min(chunk[d], dims[d] - offset[d]);
    }
    uint64_t nlead = 1;
    for (size_t d = 0; d < lead; ++d) nlead *= E[d];
    std::vector<Box> out;
    out.reserve((size_t)nlead);
    std::vector<uint64_t> idx(lead, 0);   // position inside the chunk along the leading dims
    for (uint64_t k = 0; k < nlead; ++k) {
        Box b;
        uint64_t a = 0, c = 0;
        for (size_t d = 0; d < r; ++d) {
            const uint64_t at = d < lead ? idx[d] : 0;
            a = a * D[d] + O[d] + at;
            c = c * C[d] + at;
        }
        b.array_start = a;
        b.chunk_start = c;
        b.array_row = D[r - 1];
        b.array_plane = D[r - 1] * D[r - 2];
        b.chunk_row = C[r - 1];
        b.chunk_plane = C[r - 1] * C[r - 2];
        b.extent[0] = E[r - 1];
        b.extent[1] = E[r - 2];
        b.extent[2] = E[r - 3];
        out.push_back(b);
        for (size_t d = lead; d-- > 0;) {   // next index of the leading dims (odometer)
            if (++idx[d] < E[d]) break;
            idx[d] = 0;
        }
    }
    return out;
}

bool list_chunks(hid_t dset, const ChunkLayout &lay, std::vector<StoredChunk> &stored, std::vector<uint64_t> &missing,
                 std::string &msg) {
    Id space{H5Dget_space(dset), H5Sclose};   // HDF5 1.10 takes the dataset's dataspace here, not H5S_ALL
    hsize_t n = 0;
    if (space.id < 0 || H5Dget_num_chunks(dset, space.id, &n) < 0) {
        msg = "H5Dget_num_chunks failed";
        return false;
    }
    std::vector<char> written((size_t)lay.grid_count(), 0);
    std::vector<hsize_t> off((size_t)lay.rank());
    for (hsize_t i = 0; i < n; ++i) {
        StoredChunk c;
        haddr_t addr = 0;
        hsize_t size = 0;
        if (H5Dget_chunk_info(dset, space.id, i, off.data(), &c.mask, &addr, &size) < 0) {
            msg = "H5Dget_chunk_info failed for chunk " + std::to_string(i);
            return false;
        }
        c.offset.assign(off.begin(), off.end());
        c.size = size;
        c.address = addr;
        written[(size_t)lay.grid_index(c.offset.data())] = 1;
        stored.push_back(std::move(c));
    }
    for (uint64_t g = 0; g < lay.grid_count(); ++g)
        if (!written[(size_t)g]) missing.push_back(g);
    return true;
}

bool read_layout(hid_t dset, ChunkLayout &out, std::string &msg) {
    Id space{H5Dget_space(dset), H5Sclose}, dcpl{H5Dget_create_plist(dset), H5Pclose},
        type{H5Dget_type(dset), H5Tclose};
    if (space.id < 0 || dcpl.id < 0 || type.id < 0) {
        msg = "not a dataset (cannot read its dataspace, creation properties or type)";
        return false;
    }
    const int rank = H5Sget_simple_extent_ndims(space.id);
    if (rank <= 0) {
        msg = "the dataset has no dimensions (scalar or null dataspace)";
        return false;
    }
    if (H5Pget_layout(dcpl.id) != H5D_CHUNKED) {
        msg = "the dataset is not chunked";
        return false;
    }
    std::vector<hsize_t> dims((size_t)rank), chunk((size_t)rank);
    if (H5Sget_simple_extent_dims(space.id, dims.data(), nullptr) != rank ||
        H5Pget_chunk(dcpl.id, rank, chunk.data()) != rank) {
        msg = "cannot read the dataset's shape or chunk shape";
        return false;
    }
    if (H5Pget_nfilters(dcpl.id) != 1) {
        msg = "the dataset must have the zbound filter as its only filter (it has " +
              std::to_string(H5Pget_nfilters(dcpl.id)) + ")";
        return false;
    }
    unsigned flags = 0, cd[ZBOUND_CD_MAX_WORDS + 1] = {};
    size_t ncd = ZBOUND_CD_MAX_WORDS + 1;
    char name[64];
    unsigned config = 0;
    if (H5Pget_filter2(dcpl.id, 0, &flags, &ncd, cd, sizeof name, name, &config) != ZBOUND_H5Z_FILTER) {
        msg = "the dataset's filter is not zbound (id " + std::to_string(ZBOUND_H5Z_FILTER) + ")";
        return false;
    }
    zbound_cd::DatasetWords words;
    if (!zbound_cd::decode_user(cd, ncd, out.params, msg) || !zbound_cd::decode_dataset(cd, ncd, words, msg))
        return false;
    if (!words.applicable) {
        msg = "the dataset does not hold float values (the filter stores its chunks unfiltered)";
        return false;
    }
    if (words.big_endian) {
        msg = "the dataset stores big-endian values; device chunk I/O takes native (little-endian) order";
        return false;
    }
    out.dtype = words.dtype;
    out.params.has_fill = words.has_fill ? 1 : 0;
    out.params.fill_bits = words.fill_bits;
    out.pad_bits = words.has_fill ? words.fill_bits : 0;
    for (int i = 0; i < 3; ++i) out.folded[i] = (size_t)words.dims[i];
    out.dims.assign(dims.begin(), dims.end());
    out.chunk.assign(chunk.begin(), chunk.end());
    if (out.chunk_values() != words.values()) {
        msg = "the chunk shape and the filter's recorded chunk shape disagree";
        return false;
    }
    return true;
}

}  // namespace zbh5
