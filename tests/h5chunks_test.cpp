// Device chunk I/O (h5chunks/, zbound_h5chunks.h).
//   Everywhere: the chunk grid and its copy boxes move every value of every chunk exactly as a plain gather does
//   (ranks 1-5, edge chunks); datasets the calls cannot take are refused with ZB_ERR_INVALID_ARG before anything
//   else; without a GPU a good dataset is refused with a clear status.
//   On a GPU: zbound_h5_write_chunks_device stores exactly the filter's chunk bytes for the same values (edge
//   chunks, chunks along several dims, rank 1 and 4, fill values, f32 and f64, in place and gathered, several
//   windows), and zbound_h5_read_chunks_device gives H5Dread's values, unwritten and unfiltered chunks included.
#include <gtest/gtest.h>
#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <vector>
#include "chunk_layout.h"
#include "chunk_reader.h"
#include "h5_test_util.h"
#include "zbound_filter.h"
#include "zbound_h5chunks.h"
#if ZBOUND_TEST_CUDA
#include <cuda_runtime.h>
#endif

namespace {

using h5t::error_stack;
using h5t::Id;
using h5t::TempFile;

class H5Env : public ::testing::Environment {
  public:
    void SetUp() override {
        H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
        H5PLset_loading_state(0);   // the statically registered filter, not a plugin
        ASSERT_GE(zbound_register_h5filter(), 0) << error_stack();
    }
};
const auto *g_env = ::testing::AddGlobalTestEnvironment(new H5Env);

// ---------------------------------------------------------------- the chunk grid (no HDF5, no GPU)

// Gathers chunk `off` of array `a` (shape dims) into a chunk buffer by the layout's boxes, as the device copies do.
std::vector<int> gather_by_boxes(const zbh5::ChunkLayout &lay, const std::vector<int> &a, const uint64_t *off) {
    std::vector<int> c((size_t)lay.chunk_values(), -1);
    for (const zbh5::Box &b : lay.boxes(off))
        for (uint64_t z = 0; z < b.extent[2]; ++z)
            for (uint64_t y = 0; y < b.extent[1]; ++y)
                for (uint64_t x = 0; x < b.extent[0]; ++x)
                    c[(size_t)(b.chunk_start + z * b.chunk_plane + y * b.chunk_row + x)] =
                        a[(size_t)(b.array_start + z * b.array_plane + y * b.array_row + x)];
    return c;
}

// The same by coordinates: chunk element (i0..ir) is array element (off + i) where inside the dataset.
std::vector<int> gather_plain(const zbh5::ChunkLayout &lay, const std::vector<int> &a, const uint64_t *off) {
    std::vector<int> c((size_t)lay.chunk_values(), -1);
    const size_t r = lay.dims.size();
    std::vector<uint64_t> i(r, 0);
    for (uint64_t k = 0; k < lay.chunk_values(); ++k) {
        uint64_t ck = 0, ak = 0;
        bool inside = true;
        for (size_t d = 0; d < r; ++d) {
            ck = ck * lay.chunk[d] + i[d];
            ak = ak * lay.dims[d] + off[d] + i[d];
            inside = inside && off[d] + i[d] < lay.dims[d];
        }
        if (inside) c[(size_t)ck] = a[(size_t)ak];
        for (size_t d = r; d-- > 0;) {
            if (++i[d] < lay.chunk[d]) break;
            i[d] = 0;
        }
    }
    return c;
}

TEST(ChunkGrid, BoxesMoveEveryValueOfEveryChunkOnce) {
    std::mt19937 rng(7);
    for (int trial = 0; trial < 60; ++trial) {
        zbh5::ChunkLayout lay;
        const int rank = 1 + trial % 5;
        for (int d = 0; d < rank; ++d) {
            lay.dims.push_back(1 + rng() % (rank > 3 ? 7 : 23));
            lay.chunk.push_back(1 + rng() % (lay.dims.back() + 2));   // sometimes larger than the dim
        }
        uint64_t n = 1;
        for (uint64_t v : lay.dims) n *= v;
        std::vector<int> a((size_t)n);
        for (size_t i = 0; i < a.size(); ++i) a[i] = (int)i;
        std::vector<int> seen((size_t)n, 0);
        for (uint64_t g = 0; g < lay.grid_count(); ++g) {
            const std::vector<uint64_t> off = lay.grid_offset(g);
            ASSERT_EQ(lay.grid_index(off.data()), g);
            const std::vector<int> want = gather_plain(lay, a, off.data());
            ASSERT_EQ(gather_by_boxes(lay, a, off.data()), want) << "trial " << trial << " chunk " << g;
            for (int v : want)
                if (v >= 0) ++seen[(size_t)v];
            if (lay.is_slab(off.data())) {   // in place: the chunk is the array's values from array_index on
                for (uint64_t k = 0; k < lay.chunk_values(); ++k)
                    ASSERT_EQ(want[(size_t)k], a[(size_t)(lay.array_index(off.data()) + k)]);
            }
        }
        for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << "trial " << trial << " value " << i;
    }
}

// ---------------------------------------------------------------- datasets

std::vector<unsigned> cd_words(zb_mode mode, double bound, unsigned pred, unsigned enc) {
    zb_params p = zb_params_default();
    p.mode = mode;
    p.bound = bound;
    p.predictor = (zb_predictor)pred;
    p.encoder = (zb_encoder)enc;
    std::vector<unsigned> cd(ZBOUND_CD_USER_WORDS);
    EXPECT_EQ(zbound_cd_values_encode(&p, cd.data()), cd.size());
    return cd;
}

// A chunked dataset with the zbound filter (and optionally a fill value and a second filter).
Id make_dataset(hid_t file, const char *name, hid_t type, const std::vector<hsize_t> &dims,
                const std::vector<hsize_t> &chunk, const std::vector<unsigned> &cd, const double *fill = nullptr,
                bool add_shuffle = false) {
    Id space(H5Screate_simple((int)dims.size(), dims.data(), nullptr));
    Id dcpl(H5Pcreate(H5P_DATASET_CREATE));
    H5Pset_chunk(dcpl, (int)chunk.size(), chunk.data());
    if (add_shuffle) H5Pset_shuffle(dcpl);
    H5Pset_filter(dcpl, ZBOUND_H5Z_FILTER, H5Z_FLAG_MANDATORY, cd.size(), cd.data());
    if (fill) H5Pset_fill_value(dcpl, H5T_NATIVE_DOUBLE, fill);
    return Id(H5Dcreate2(file, name, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT));
}

// ---------------------------------------------------------------- stored chunk bytes (HDF5, no GPU)

// Every stored chunk of dset read by H5Dread_chunk, in list_chunks' order.
std::vector<std::vector<uint8_t>> chunks_by_hdf5(hid_t dset, const std::vector<zbh5::StoredChunk> &stored) {
    std::vector<std::vector<uint8_t>> out;
    for (const zbh5::StoredChunk &c : stored) {
        std::vector<hsize_t> off(c.offset.begin(), c.offset.end());
        std::vector<uint8_t> bytes((size_t)c.size);
        uint32_t filters = 0;
        EXPECT_GE(H5Dread_chunk(dset, H5P_DEFAULT, off.data(), &filters, bytes.data()), 0) << error_stack();
        out.push_back(std::move(bytes));
    }
    return out;
}

// A file of one zbound dataset "x" (100 x 64 x 50 float, 10 x 64 x 50 chunks, 9 of 10 written), with a user block of
// `userblock` bytes.
void write_chunked_file(const std::string &path, hsize_t userblock) {
    Id fcpl(H5Pcreate(H5P_FILE_CREATE));
    if (userblock) H5Pset_userblock(fcpl, userblock);
    Id file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl, H5P_DEFAULT));
    ASSERT_TRUE(file.ok()) << error_stack();
    const std::vector<hsize_t> dims{100, 64, 50}, chunk{10, 64, 50};
    Id d = make_dataset(file, "x", H5T_NATIVE_FLOAT, dims, chunk, cd_words(ZB_MODE_ABS, 1e-3, 0, 0));
    ASSERT_TRUE(d.ok()) << error_stack();
    std::vector<float> v(90 * 64 * 50);
    std::mt19937 rng(7);
    std::normal_distribution<float> noise(0.f, 1.f);
    for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.001f * (float)i) + 0.01f * noise(rng);
    const hsize_t start[3] = {0, 0, 0}, count[3] = {90, 64, 50};
    Id mem(H5Screate_simple(3, count, nullptr)), space(H5Dget_space(d));
    H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr);
    ASSERT_GE(H5Dwrite(d, H5T_NATIVE_FLOAT, mem, space, H5P_DEFAULT, v.data()), 0) << error_stack();
}

// ChunkReader gives H5Dread_chunk's bytes for every chunk: by pread (three threads, pieces of 4 KiB) for a file
// open read-only through the default driver, with and without a user block (addresses after it), and through
// HDF5 for a file open for writing, for the in-memory driver and when ZBOUND_CHUNK_PREAD=0. Windows of chunks are
// read in parts, as read_chunks does, into places that are not the chunks' order.
TEST(ChunkReader, GivesHdf5sBytesEveryWay) {
    const std::string path = h5t::temp_path("h5chunks_reader");
    for (hsize_t userblock : {hsize_t(0), hsize_t(512), hsize_t(4096)}) {
        write_chunked_file(path, userblock);
        struct Way {
            const char *name;
            unsigned intent;
            bool core, env_off, direct;
        };
        for (const Way &w : {Way{"read-only", H5F_ACC_RDONLY, false, false, true},
                             Way{"read-write", H5F_ACC_RDWR, false, false, false},
                             Way{"core driver", H5F_ACC_RDONLY, true, false, false},
                             Way{"ZBOUND_CHUNK_PREAD=0", H5F_ACC_RDONLY, false, true, false}}) {
            SCOPED_TRACE(std::string(w.name) + ", user block " + std::to_string(userblock));
            Id fapl(H5Pcreate(H5P_FILE_ACCESS));
            if (w.core) H5Pset_fapl_core(fapl, 1 << 20, 0);
            Id file(H5Fopen(path.c_str(), w.intent, fapl));
            ASSERT_TRUE(file.ok()) << error_stack();
            Id d(H5Dopen2(file, "x", H5P_DEFAULT));
            zbh5::ChunkLayout lay;
            std::string msg;
            ASSERT_TRUE(zbh5::read_layout(d, lay, msg)) << msg;
            if (w.env_off) setenv("ZBOUND_CHUNK_PREAD", "0", 1);
            zbh5::ChunkReader reader(d, 3, 4096);
            unsetenv("ZBOUND_CHUNK_PREAD");
            EXPECT_EQ(reader.direct(), w.direct);
            std::vector<zbh5::StoredChunk> stored;
            std::vector<uint64_t> missing;
            ASSERT_TRUE(zbh5::list_chunks(d, lay, stored, missing, msg)) << msg;
            ASSERT_EQ(stored.size(), 9u);
            const auto expect = chunks_by_hdf5(d, stored);
            // Chunks in reverse order in the buffer, 7 bytes apart; windows of 4, 4 and 1 chunks.
            uint64_t pos = 0;
            for (size_t i = stored.size(); i-- > 0;) {
                stored[i].start = pos;
                pos += stored[i].size + 7;
            }
            std::vector<uint8_t> buf((size_t)pos, 0xEE);
            for (size_t b = 0; b < stored.size(); b += 4)
                ASSERT_TRUE(reader.read(stored, b, std::min(stored.size(), b + 4), buf.data(), msg)) << msg;
            EXPECT_EQ(reader.direct(), w.direct);   // the first chunk agreed both ways
            for (size_t i = 0; i < stored.size(); ++i)
                EXPECT_TRUE(std::equal(expect[i].begin(), expect[i].end(), buf.begin() + (long)stored[i].start))
                    << "chunk " << zbh5::offset_text(stored[i].offset);
        }
    }
    std::remove(path.c_str());
}

// A file cut short after HDF5 opened it: the chunks past its end are an error with a message, not zeros.
TEST(ChunkReader, TruncatedFileIsAnError) {
    const std::string path = h5t::temp_path("h5chunks_reader_cut");
    write_chunked_file(path, 0);
    Id file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    Id d(H5Dopen2(file, "x", H5P_DEFAULT));
    zbh5::ChunkLayout lay;
    std::string msg;
    ASSERT_TRUE(zbh5::read_layout(d, lay, msg)) << msg;
    zbh5::ChunkReader reader(d, 2, 4096);
    ASSERT_TRUE(reader.direct());
    std::vector<zbh5::StoredChunk> stored;
    std::vector<uint64_t> missing;
    ASSERT_TRUE(zbh5::list_chunks(d, lay, stored, missing, msg)) << msg;
    uint64_t pos = 0, last_end = 0;
    for (zbh5::StoredChunk &c : stored) {
        c.start = pos;
        pos += c.size;
        last_end = std::max(last_end, c.address + c.size);
    }
    std::vector<uint8_t> buf((size_t)pos);
    ASSERT_TRUE(reader.read(stored, 0, 1, buf.data(), msg)) << msg;   // the first chunk, checked both ways
    ASSERT_EQ(truncate(path.c_str(), (off_t)(last_end - 100)), 0);
    msg.clear();
    EXPECT_FALSE(reader.read(stored, 1, stored.size(), buf.data(), msg));
    EXPECT_NE(msg.find("short read"), std::string::npos) << msg;
    d.reset();
    file.reset();
    std::remove(path.c_str());
}

TEST(DeviceChunks, RefusesDatasetsItCannotTake) {
    TempFile f("h5chunks_refusals");
    ASSERT_TRUE(f.file.ok());
    const float host[4] = {1, 2, 3, 4};
    const void *not_device = host;   // never read: every dataset here is refused first
    const std::vector<hsize_t> dims{40, 30};
    {   // contiguous
        Id space(H5Screate_simple(2, dims.data(), nullptr));
        Id d(H5Dcreate2(f.file, "contiguous", H5T_NATIVE_FLOAT, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
        EXPECT_EQ(zbound_h5_write_chunks_device(d, not_device, nullptr), ZB_ERR_INVALID_ARG);
        EXPECT_NE(std::string(zb_last_error()).find("not chunked"), std::string::npos) << zb_last_error();
    }
    {   // another filter before zbound
        Id d = make_dataset(f.file, "shuffled", H5T_NATIVE_FLOAT, dims, {10, 30}, cd_words(ZB_MODE_ABS, 1e-3, 0, 0),
                            nullptr, true);
        ASSERT_TRUE(d.ok()) << error_stack();
        EXPECT_EQ(zbound_h5_read_chunks_device(d, const_cast<void *>(not_device), nullptr), ZB_ERR_INVALID_ARG);
        EXPECT_NE(std::string(zb_last_error()).find("only filter"), std::string::npos) << zb_last_error();
    }
    {   // big-endian values
        Id d = make_dataset(f.file, "big_endian", H5T_IEEE_F32BE, dims, {10, 30}, cd_words(ZB_MODE_ABS, 1e-3, 0, 0));
        ASSERT_TRUE(d.ok()) << error_stack();
        EXPECT_EQ(zbound_h5_write_chunks_device(d, not_device, nullptr), ZB_ERR_INVALID_ARG);
        EXPECT_NE(std::string(zb_last_error()).find("big-endian"), std::string::npos) << zb_last_error();
    }
    Id good = make_dataset(f.file, "good", H5T_NATIVE_FLOAT, dims, {10, 30}, cd_words(ZB_MODE_ABS, 1e-3, 0, 0));
    ASSERT_TRUE(good.ok()) << error_stack();
    EXPECT_EQ(zbound_h5_write_chunks_device(good, nullptr, nullptr), ZB_ERR_INVALID_ARG);
    EXPECT_EQ(zbound_h5_write_chunks_device(-1, not_device, nullptr), ZB_ERR_INVALID_ARG);
    if (!zb_gpu_available()) {
        const zb_status s = zbound_h5_write_chunks_device(good, not_device, nullptr);
        EXPECT_TRUE(s == ZB_ERR_UNSUPPORTED || s == ZB_ERR_GPU) << s;
        EXPECT_NE(std::string(zb_last_error()), "");
    }
}

// The dataset side without a GPU: read_layout gives the filter's parameters and shapes, list_chunks the stored
// chunks (offsets, sizes, filter masks) and the ones never written.
TEST(DeviceChunks, LayoutAndChunkListFromHdf5) {
    TempFile f("h5chunks_layout");
    const double fill = -5.0;
    const std::vector<hsize_t> dims{40, 50}, chunk{20, 25};
    Id d = make_dataset(f.file, "x", H5T_NATIVE_DOUBLE, dims, chunk, cd_words(ZB_MODE_REL, 1e-4, 1, 2), &fill);
    ASSERT_TRUE(d.ok()) << error_stack();
    zbh5::ChunkLayout lay;
    std::string msg;
    ASSERT_TRUE(zbh5::read_layout(d, lay, msg)) << msg;
    EXPECT_EQ(lay.dims, (std::vector<uint64_t>{40, 50}));
    EXPECT_EQ(lay.chunk, (std::vector<uint64_t>{20, 25}));
    EXPECT_EQ(lay.dtype, ZB_F64);
    EXPECT_EQ(lay.params.mode, ZB_MODE_REL);
    EXPECT_EQ(lay.params.bound, 1e-4);
    EXPECT_EQ(lay.params.predictor, ZB_PRED_LORENZO);
    EXPECT_EQ(lay.params.encoder, ZB_ENC_RATIO);
    EXPECT_EQ(lay.params.has_fill, 1);
    uint64_t fill_bits;
    std::memcpy(&fill_bits, &fill, 8);
    EXPECT_EQ(lay.params.fill_bits, fill_bits);
    EXPECT_EQ(lay.pad_bits, fill_bits);
    EXPECT_EQ(lay.folded[0] * lay.folded[1] * lay.folded[2], 500u);
    EXPECT_EQ(lay.grid_count(), 4u);

    std::vector<double> part(500, 1.5);
    const hsize_t start[2] = {0, 0}, count[2] = {20, 25};
    Id mem(H5Screate_simple(2, count, nullptr)), file_space(H5Dget_space(d));
    H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start, nullptr, count, nullptr);
    ASSERT_GE(H5Dwrite(d, H5T_NATIVE_DOUBLE, mem, file_space, H5P_DEFAULT, part.data()), 0) << error_stack();
    const hsize_t raw_at[2] = {20, 25};
    ASSERT_GE(H5Dwrite_chunk(d, H5P_DEFAULT, 1, raw_at, part.size() * 8, part.data()), 0) << error_stack();
    std::vector<zbh5::StoredChunk> stored;
    std::vector<uint64_t> missing;
    ASSERT_TRUE(zbh5::list_chunks(d, lay, stored, missing, msg)) << msg;
    ASSERT_EQ(stored.size(), 2u);
    std::map<std::vector<uint64_t>, zbh5::StoredChunk> by_offset;
    for (const auto &c : stored) by_offset[c.offset] = c;
    ASSERT_EQ(by_offset.count({0, 0}), 1u);
    ASSERT_EQ(by_offset.count({20, 25}), 1u);
    const zbh5::StoredChunk &filtered = by_offset[std::vector<uint64_t>{0, 0}];
    const zbh5::StoredChunk &raw = by_offset[std::vector<uint64_t>{20, 25}];
    EXPECT_EQ(filtered.mask & 1, 0u);
    EXPECT_LT(filtered.size, 4000u);   // compressed (a constant chunk)
    EXPECT_EQ(raw.mask & 1, 1u);
    EXPECT_EQ(raw.size, 4000u);
    EXPECT_EQ(missing, (std::vector<uint64_t>{1, 2}));   // grid (0, 1) and (1, 0)
}

#if ZBOUND_TEST_CUDA

// The stored chunks of a dataset: offset -> (filter mask, bytes).
std::map<std::vector<hsize_t>, std::pair<uint32_t, std::vector<uint8_t>>> stored_chunks(hid_t d, int rank) {
    std::map<std::vector<hsize_t>, std::pair<uint32_t, std::vector<uint8_t>>> out;
    hsize_t n = 0;
    Id space(H5Dget_space(d));   // HDF5 1.10 takes the dataspace, not H5S_ALL
    EXPECT_GE(H5Dget_num_chunks(d, space, &n), 0);
    for (hsize_t i = 0; i < n; ++i) {
        std::vector<hsize_t> off((size_t)rank);
        unsigned mask = 0;
        haddr_t addr = 0;
        hsize_t size = 0;
        EXPECT_GE(H5Dget_chunk_info(d, space, i, off.data(), &mask, &addr, &size), 0);
        std::vector<uint8_t> bytes((size_t)size);
        uint32_t filters = 0;
#if H5_VERSION_GE(2, 0, 0)
        size_t nalloc = bytes.size();
        EXPECT_GE(H5Dread_chunk2(d, H5P_DEFAULT, off.data(), &filters, bytes.data(), &nalloc), 0);
#else
        EXPECT_GE(H5Dread_chunk(d, H5P_DEFAULT, off.data(), &filters, bytes.data()), 0);
#endif
        out[off] = {filters, bytes};
    }
    return out;
}

template <typename T> std::vector<T> field(const std::vector<hsize_t> &dims, uint32_t seed) {
    size_t n = 1;
    for (hsize_t v : dims) n *= (size_t)v;
    std::vector<T> v(n);
    std::mt19937 rng(seed);
    std::normal_distribution<double> noise(0.0, 0.01);
    for (size_t i = 0; i < n; ++i) v[i] = (T)(std::sin(0.01 * (double)i) + 0.3 * std::cos(0.003 * (double)i) + noise(rng));
    for (size_t i = 5; i < n; i += 997) v[i] = std::numeric_limits<T>::quiet_NaN();
    return v;
}

struct DeviceArray {
    void *p = nullptr;
    explicit DeviceArray(size_t bytes) { (void)cudaMalloc(&p, bytes ? bytes : 1); }
    ~DeviceArray() { (void)cudaFree(p); }
};

// Writes `values` through the filter (H5Dwrite) and from device memory (zbound_h5_write_chunks_device) into two
// datasets of the same creation properties; the stored chunks must be identical. Then reads the device-written
// dataset back on the device and compares with H5Dread of it.
template <typename T>
void same_as_filter(const std::string &what, const std::vector<hsize_t> &dims, const std::vector<hsize_t> &chunk,
                    const std::vector<unsigned> &cd, const double *fill = nullptr) {
    SCOPED_TRACE(what);
    TempFile f("h5chunks_" + what);
    ASSERT_TRUE(f.file.ok());
    const hid_t type = sizeof(T) == 8 ? H5T_NATIVE_DOUBLE : H5T_NATIVE_FLOAT;
    std::vector<T> v = field<T>(dims, (uint32_t)what.size());
    if (fill)
        for (size_t i = 100; i < v.size() && i < 400; ++i) v[i] = (T)*fill;
    Id via_filter = make_dataset(f.file, "filter", type, dims, chunk, cd, fill);
    Id direct = make_dataset(f.file, "direct", type, dims, chunk, cd, fill);
    ASSERT_TRUE(via_filter.ok() && direct.ok()) << error_stack();
    ASSERT_GE(H5Dwrite(via_filter, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), 0) << error_stack();
    const size_t bytes = v.size() * sizeof(T);
    DeviceArray d(bytes), back(bytes);
    ASSERT_EQ(cudaMemcpy(d.p, v.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(zbound_h5_write_chunks_device(direct, d.p, nullptr), ZB_OK) << zb_last_error();
    const auto a = stored_chunks(via_filter, (int)dims.size()), b = stored_chunks(direct, (int)dims.size());
    ASSERT_EQ(a.size(), b.size());
    for (const auto &kv : a) {
        const auto it = b.find(kv.first);
        ASSERT_NE(it, b.end());
        EXPECT_EQ(it->second.first, kv.second.first);
        EXPECT_TRUE(it->second.second == kv.second.second) << "chunk bytes differ from the filter's";
    }
    std::vector<T> expect(v.size()), got(v.size());
    ASSERT_GE(H5Dread(direct, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, expect.data()), 0) << error_stack();
    ASSERT_EQ(cudaMemset(back.p, 0x7f, bytes), cudaSuccess);
    ASSERT_EQ(zbound_h5_read_chunks_device(direct, back.p, nullptr), ZB_OK) << zb_last_error();
    ASSERT_EQ(cudaMemcpy(got.data(), back.p, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(std::memcmp(got.data(), expect.data(), bytes), 0) << "device read differs from H5Dread";
}

#define ZB_REQUIRE_GPU()                                                     \
    do {                                                                     \
        if (!zb_gpu_available()) GTEST_SKIP() << "no GPU: zb_gpu_available() is 0"; \
    } while (0)

TEST(DeviceChunks, StoresTheFiltersBytes) {
    ZB_REQUIRE_GPU();
    const double fill = -999.0;
    same_as_filter<float>("3d_edges", {45, 61, 70}, {16, 20, 32}, cd_words(ZB_MODE_REL, 1e-3, 0, 0));
    same_as_filter<float>("3d_slabs", {64, 48, 40}, {16, 48, 40}, cd_words(ZB_MODE_ABS, 1e-3, 1, 1));
    same_as_filter<float>("3d_slabs_edge", {70, 48, 40}, {16, 48, 40}, cd_words(ZB_MODE_REL, 1e-4, 2, 2), &fill);
    same_as_filter<double>("2d_fill_f64", {300, 257}, {64, 100}, cd_words(ZB_MODE_REL, 1e-4, 1, 2), &fill);
    same_as_filter<float>("1d", {100003}, {16384}, cd_words(ZB_MODE_PW_REL, 1e-3, 0, 0));
    same_as_filter<float>("4d", {5, 13, 17, 19}, {2, 8, 17, 7}, cd_words(ZB_MODE_ABS, 1e-2, 0, 0));
}

// With a 1 MB window the chunks go through many batched calls (the double buffering of both directions).
TEST(DeviceChunks, ManyWindows) {
    ZB_REQUIRE_GPU();
    if (!std::getenv("ZBOUND_CHUNK_WINDOW_MB"))
        GTEST_SKIP() << "run with ZBOUND_CHUNK_WINDOW_MB=1 (ctest does: h5chunks_small_window)";
    same_as_filter<float>("windows", {96, 128, 130}, {8, 64, 64}, cd_words(ZB_MODE_REL, 1e-3, 0, 0));
}

// Unwritten chunks read as the fill value and an unfiltered chunk as its raw values, as H5Dread gives them.
TEST(DeviceChunks, ReadsUnwrittenAndUnfilteredChunks) {
    ZB_REQUIRE_GPU();
    TempFile f("h5chunks_sparse");
    const double fill = -5.0;
    const std::vector<hsize_t> dims{40, 50}, chunk{20, 25};
    Id d = make_dataset(f.file, "x", H5T_NATIVE_FLOAT, dims, chunk, cd_words(ZB_MODE_ABS, 1e-3, 0, 0), &fill);
    ASSERT_TRUE(d.ok()) << error_stack();
    std::vector<float> v = field<float>(dims, 3);
    {   // chunk (0, 0) through the filter
        const hsize_t start[2] = {0, 0}, count[2] = {20, 25};
        Id mem(H5Screate_simple(2, count, nullptr)), file_space(H5Dget_space(d));
        H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start, nullptr, count, nullptr);
        std::vector<float> part(500);
        for (size_t i = 0; i < 20; ++i)
            for (size_t j = 0; j < 25; ++j) part[i * 25 + j] = v[i * 50 + j];
        ASSERT_GE(H5Dwrite(d, H5T_NATIVE_FLOAT, mem, file_space, H5P_DEFAULT, part.data()), 0) << error_stack();
        // chunk (20, 0) stored unfiltered (filter mask 1)
        std::vector<float> raw(500);
        for (size_t i = 0; i < 20; ++i)
            for (size_t j = 0; j < 25; ++j) raw[i * 25 + j] = v[(20 + i) * 50 + j];
        const hsize_t off[2] = {20, 0};
        ASSERT_GE(H5Dwrite_chunk(d, H5P_DEFAULT, 1, off, raw.size() * 4, raw.data()), 0) << error_stack();
    }
    // Reopened, so that H5Dread decodes chunk (0, 0) from the file instead of serving HDF5's cached raw copy.
    d.reset();
    f.reopen();
    d = Id(H5Dopen2(f.file, "x", H5P_DEFAULT));
    std::vector<float> expect(v.size()), got(v.size());
    ASSERT_GE(H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, expect.data()), 0) << error_stack();
    DeviceArray back(v.size() * 4);
    ASSERT_EQ(zbound_h5_read_chunks_device(d, back.p, nullptr), ZB_OK) << zb_last_error();
    ASSERT_EQ(cudaMemcpy(got.data(), back.p, v.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(std::memcmp(got.data(), expect.data(), v.size() * 4), 0);
    EXPECT_EQ(got[30 * 50 + 3], v[30 * 50 + 3]);   // the unfiltered chunk, exact
    EXPECT_EQ(got[0 * 50 + 30], -5.0f);            // an unwritten chunk
}

// A stored chunk that is not a zbound stream: the read fails with a corrupt-stream status.
TEST(DeviceChunks, CorruptChunkIsAnError) {
    ZB_REQUIRE_GPU();
    TempFile f("h5chunks_corrupt");
    const std::vector<hsize_t> dims{40, 50}, chunk{20, 50};
    Id d = make_dataset(f.file, "x", H5T_NATIVE_FLOAT, dims, chunk, cd_words(ZB_MODE_ABS, 1e-3, 0, 0));
    const std::vector<float> v = field<float>(dims, 4);
    ASSERT_GE(H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), 0) << error_stack();
    auto chunks = stored_chunks(d, 2);
    std::vector<uint8_t> bad = chunks.begin()->second.second;
    bad[bad.size() / 2] ^= 0x20;
    ASSERT_GE(H5Dwrite_chunk(d, H5P_DEFAULT, 0, chunks.begin()->first.data(), bad.size(), bad.data()), 0);
    DeviceArray back(v.size() * 4);
    const zb_status s = zbound_h5_read_chunks_device(d, back.p, nullptr);
    EXPECT_TRUE(s == ZB_ERR_CORRUPT || s == ZB_ERR_TRUNCATED) << s << " " << zb_last_error();
}

#endif

}  // namespace
