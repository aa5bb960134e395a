// CPU backend of the codec (core/src/fast_cpu.cpp, sparse_cpu.cpp) and the helpers it shares with the API layer.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>
#include "zb_format.h"
#include "zb_scratch.h"
#include "zbound.h"

namespace zb {

// Number of OpenMP threads for work on n values: `requested` if > 0, else ZBOUND_THREADS, else one thread per
// kValuesPerThread values up to all cores. Small HDF5 chunks thus stay on one thread: measured, OpenMP's
// spin-waiting made a 2.3M-value field 20-60x slower on a machine whose cores were busy. Output bytes never depend
// on the thread count.
constexpr uint64_t kValuesPerThread = 65536;
int resolve_threads(int requested, uint64_t n);

// Parallel stages whose parts may take unequal times are cut into this many parts per thread, taken in turn (OpenMP
// dynamic schedules, the Lorenzo grid's slabs): with all 16 cores of the device machine busy, vector-bound loops run
// 1.3x slower per thread on average and up to 1.7x on some, and a split of one part per thread waits for the slowest
// (bench/NOTES.md, session 9). Output bytes never depend on it.
constexpr uint64_t kPartsPerThread = 4;

// Splits [0, count) into `parts` contiguous ranges; range r is [begin(r), begin(r+1)).
struct Partition {
    uint64_t count;
    int parts;
    uint64_t begin(int r) const { return count * (uint64_t)r / (uint64_t)parts; }
};

// The team of a parallel region whose work could use `useful` threads: all nt, or one. Never a team in between:
// libgomp ends the threads a smaller team leaves out and starts them again for the next full one (device, 16
// cores: a 16-thread region took 4.4 us after a 16-thread one, 231 us after an 8-thread one, 425 us after a 4-thread
// one; after a one-thread region or none, 4.4 us). Threads without work in a region just wait at its end.
inline int team_threads(int nt, uint64_t useful) { return nt > 1 && useful > 1 ? nt : 1; }

// memcpy on a team of nt threads (one thread below 512 KiB), one part each of at least 256 KiB (the threads past
// the parts wait); with `streaming`, each part by copy_streaming, fenced before the return.
void parallel_copy(void *dst, const void *src, size_t bytes, int nt, bool streaming = false);

// The team of the host copies that stage a GPU call's transfers (cuda/gpu_context.cu) and of the payload checksum
// before a GPU decode: 8 threads (fewer with fewer cores or ZBOUND_THREADS), the same for every transfer. More
// compete with the DMAs for host memory (16 MB calls on the 16-core device machine: 1.29-1.30 ms per compression
// with 4 or 8 copying threads, 1.90 with 16; a team of 16 with 8 parts: the filter's compression callbacks 7-12
// GB/s against 19-22, NOTES 104). One count for all: libgomp ends the threads that a smaller team leaves out and
// starts them again for the next larger one (team_threads), 0.1-0.2 ms each time.
int staging_team();

// Outputs at least this large are written with non-temporal stores (copy_streaming): they cannot stay in the cache,
// and a normal store first reads the line it writes (measured on the device machine's 16 cores: 54 GB/s of normal
// stores, 99-119 GB/s of streaming ones). Smaller outputs keep normal stores: the caller (HDF5 copying a chunk into
// the user's array) often reads them right away, from the cache.
constexpr uint64_t kStreamingBytes = uint64_t(64) << 20;
// memcpy with non-temporal stores where the CPU has them (x86-64), memcpy elsewhere. The stores are weakly ordered:
// the writing thread calls stream_fence() (sfence) before other threads may read what it wrote.
void copy_streaming(void *dst, const void *src, size_t bytes);
void stream_fence();

struct QuantParams;

// Dual-quantization of n values (docs/FORMAT.md section 3): q[i] (0 for an exception) and exc[i] = 1 for the values
// that are exceptions. OpenMP over nt threads; vectorized.
template <typename T>
void quantize_values(const T *x, uint64_t n, const QuantParams &qp, uint32_t *q, uint8_t *exc, int nt);

// Min and max over finite values that are not the fill value; returns false if there is none.
bool value_range(zb_dtype dtype, const void *src, uint64_t n, int has_fill, uint64_t fill_bits, int threads,
                 double &vmin, double &vmax);
// value_range's result for one array, handed from the pipeline choice to the compressor so that the array is read
// for it once (a full pass: 4 % of a 16-thread ratio-pipeline call).
struct ValueRange {
    bool computed = false;   // the fields below hold value_range's result
    bool has = false;        // its return value
    double vmin = 0, vmax = 0;
};
// value_range, or `known` where it was computed already.
bool value_range_once(const ValueRange *known, zb_dtype dtype, const void *src, uint64_t n, int has_fill,
                      uint64_t fill_bits, int threads, double &vmin, double &vmax);

// Encodes with the fast pipeline (or raw passthrough when that is not smaller) into dst.
zb_status cpu_compress(const zb_params &p, zb_dtype dtype, const void *src, const Shape &shape, uint8_t *dst,
                       size_t dst_capacity, size_t *dst_len, int threads, std::string &msg,
                       const ValueRange *range = nullptr);

// Decodes a v1 stream (or a raw-passthrough stream) whose header was validated by read_header into dst.
zb_status cpu_decompress(const Header &h, const uint8_t *stream, void *dst, int threads, std::string &msg);

// The stored predictor and encoder for the parameters (AUTO resolved). Lorenzo + fast is format v1, anything
// else format v2.
void resolve_pipeline(const zb_params &p, uint8_t &predictor, uint8_t &encoder);
inline bool is_v1_pipeline(uint8_t predictor, uint8_t encoder) {
    return predictor == kPredLorenzo && encoder == kEncFast;
}

// resolve_pipeline, but AUTO choices are made by compressing a sample (about 1/32 of the array, 8Ki..1Mi values, a
// centred sub-box) with each candidate on one thread and keeping the smallest stream; ties keep the faster
// candidate. v1_only restricts the candidates to format-v1 pipelines. The API never sets it: the choice must not
// depend on the backend, so that the CPU and the GPU write the same bytes. Where it computes the array's value range
// (REL bounds) it stores it in *range when range is given.
void choose_pipeline(const zb_params &p, zb_dtype dtype, const void *src, const Shape &s, bool v1_only, int threads,
                     uint8_t &predictor, uint8_t &encoder, ValueRange *range = nullptr);
// The linear indices of every value choose_pipeline reads for a mode-ABS call (its sample box), appended to idx: the
// GPU path copies only these to the host when the array lives on the device (core_interp_test checks the list).
void choose_pipeline_points(const Shape &s, std::vector<uint64_t> &idx);

// Format-v2 pipelines (core/src/pipeline_v2.cpp). tune_alpha false keeps the interp predictor's default alpha (the
// auto chooser's samples: tuning them would cost more than the compression they choose for).
zb_status cpu_compress_v2(const zb_params &p, uint8_t predictor, uint8_t encoder, zb_dtype dtype, const void *src,
                          const Shape &shape, uint8_t *dst, size_t cap, size_t *len, int threads, std::string &msg,
                          bool tune_alpha = true, const ValueRange *range = nullptr);
zb_status cpu_decompress_v2(const Header &h, const uint8_t *stream, void *dst, int threads, std::string &msg);

// The number of set bits in n bytes (the popcnt instruction where the CPU has it; the baseline build has none).
uint64_t count_ones(const uint8_t *bytes, uint64_t n);

// Zero-block sparse pass over a byte string (docs/FORMAT.md section 5). `flags` gets sparse_flag_bytes(bytes)
// bytes; non-zero blocks are appended to `blocks`. Returns the number of non-zero blocks.
uint64_t sparse_encode(const uint8_t *data, uint64_t bytes, uint8_t *flags, std::string &blocks);
// sparse_encode on nt threads, in slices of whole flag bytes: the same flags and blocks.
uint64_t sparse_encode_parallel(const uint8_t *data, uint64_t bytes, uint8_t *flags, std::string &blocks, int nt);
// The same with the blocks at the start of `blocks` (reused memory: no zero fill and no page faults of a fresh
// string, which are serial).
uint64_t sparse_encode_parallel(const uint8_t *data, uint64_t bytes, uint8_t *flags, ScratchArray<uint8_t> &blocks,
                                int nt);
// Whether flags and nblocks_stored stored blocks describe a string of `bytes` bytes: one stored block per flag bit,
// no flag bits past the last block, zero padding in a stored last block.
bool sparse_valid(const uint8_t *flags, const uint8_t *blocks, uint64_t nblocks_stored, uint64_t bytes);
// Inverse: expands into `out` (bytes long). False if flags and blocks disagree (corrupt stream).
bool sparse_decode(const uint8_t *flags, const uint8_t *blocks, uint64_t nblocks, uint64_t bytes, uint8_t *out);

// The fast encoder's code stream (docs/FORMAT.md section 5) over any array of 16-bit codes: the tile flags
// (code_tiles(n) * kTileFlagBytes bytes, from tile_flags()) and the non-zero blocks, in the calling thread's reused
// memory: valid until its next call of fast_encode_codes.
struct FastCodeSegments {
    ByteSpan flags, blocks;
    uint64_t nonzero_blocks;
};
FastCodeSegments fast_encode_codes(const uint16_t *codes, uint64_t n, int nt);
// Gives that memory back where it grew past kScratchKeepBytes (once the caller is done with the segments).
void fast_encode_codes_release();
// Inverse into codes, which must hold code_tiles(n) * kTileCodes entries (the zero padding of the last tile is
// checked). False when flags, block count or padding are inconsistent.
bool fast_decode_codes(const uint8_t *flags, const uint8_t *blocks, uint64_t nblocks, uint64_t n, uint16_t *codes,
                       int nt);
// Where each of ntiles tiles' stored blocks start (start: ntiles + 1 entries, an exclusive prefix sum of the flag
// bits); returns the total, start[ntiles].
uint64_t tile_block_starts(const uint8_t *flags, uint64_t ntiles, int nt, uint64_t *start);
// One shuffled tile (kTileBytes) from its kTileFlagBytes flag bytes and its stored blocks (src: the first of them).
void expand_tile(const uint8_t *flags, const uint8_t *src, uint8_t *tile);
// The 16 bit planes (kTileBytes / 16 bytes each) of one stored tile without expanding it: planes[p] is null for a
// zero plane (none of its blocks stored), points into the stream for a plane stored whole, or into buf (kTileBytes)
// where the plane is copied with its zero blocks. For bitunshuffle_planes.
void stored_tile_planes(const uint8_t *flags, const uint8_t *src, uint8_t *buf, const uint8_t *planes[16]);
// The number of escape codes (kEscapeCode) among the codes of a shuffled tile, read from its bit planes.
uint64_t tile_escape_count(const uint8_t *tile);
// Flags of the 256 16-byte blocks of one shuffled tile (kTileFlagBytes bytes); returns the non-zero block count.
uint64_t tile_flags(const uint8_t *tile, uint8_t *flags);
// Copies the non-zero blocks of one shuffled tile (those set in its flags, in order) to out; returns the end.
uint8_t *copy_nonzero_blocks(const uint8_t *tile, const uint8_t *flags, uint8_t *out);

// The inverse of the Lorenzo deltas q: the N-D inclusive prefix sum (mod 2^32) along x, then y, then z, and
// out[i] = dequantize<T>(sum, twoeb). q may be left partly summed.
template <typename T> void lorenzo_inverse_dequantize(uint32_t *q, const Shape &s, int threads, double twoeb, T *out);

// Bitshuffle of one 2048-code tile into 4096 bytes and back.
void bitshuffle_tile(const uint16_t *codes, uint8_t *tile);
// The plain 64-bit versions of bitshuffle_tile / bitunshuffle_tile (every CPU; the others use SSE2 where the
// compiler targets it); the same bytes. Exposed for the test that compares them.
void bitshuffle_tile_portable(const uint16_t *codes, uint8_t *tile);
void bitunshuffle_tile_portable(const uint8_t *tile, uint16_t *codes);
void bitunshuffle_tile(const uint8_t *tile, uint16_t *codes);
// Codes from a tile's 16 bit planes given one by one (a null plane is all zero: it costs nothing with AVX2).
void bitunshuffle_planes(const uint8_t *const planes[16], uint16_t *codes);
void bitunshuffle_planes_portable(const uint8_t *const planes[16], uint16_t *codes);

}  // namespace zb
