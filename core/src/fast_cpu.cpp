// The fast pipeline on the CPU: dual-quant Lorenzo -> 16-bit codes -> bitshuffle tiles -> zero-block sparse pass,
// with escapes and exceptions kept losslessly (docs/FORMAT.md). This is the reference the CUDA backend must match
// byte for byte; loops are simple, row-wise and OpenMP-parallel, and the output never depends on the thread count.
#include <algorithm>
#include <cstring>
#include <vector>
#include "zb_cpu.h"
#include "zb_crc32c.h"
#include "zb_lorenzo.h"
#include "zb_quant.h"

namespace zb {
namespace {

// Splits [0, count) into `parts` contiguous ranges; range r is [begin(r), begin(r+1)).
struct Partition {
    uint64_t count;
    int parts;
    uint64_t begin(int r) const { return count * (uint64_t)r / (uint64_t)parts; }
};

// ---------------------------------------------------------------------------------------------------------------
// Encoding
// ---------------------------------------------------------------------------------------------------------------

// Quantizes every value: q (0 for exceptions) and the exception mask M.
template <typename T>
void quantize_all(const T *x, uint64_t n, const QuantParams &qp, uint32_t *q, uint8_t *exc, int nt) {
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t i = 0; i < (int64_t)n; ++i) {
        int32_t qi;
        exc[i] = quantize<T>(x[i], qp, qi) ? 0 : 1;
        q[i] = (uint32_t)qi;
    }
}

// Lorenzo deltas of one row (fixed z, y) as codes; escaped deltas are appended to `escapes` in order.
// `up`, `back`, `backup` are the rows at (z, y-1), (z-1, y), (z-1, y-1), or a zero row where outside; rows that
// the rank does not have are never read.
template <int Rank>
void row_codes(const uint32_t *cur, const uint32_t *up, const uint32_t *back, const uint32_t *backup, uint64_t nx,
               uint16_t *codes, std::vector<int32_t> &escapes) {
    auto emit = [&](uint64_t x, uint32_t pred) {
        const int32_t d = (int32_t)(cur[x] - pred);
        const uint16_t c = delta_to_code(d);
        if (c == kEscapeCode) escapes.push_back(d);
        codes[x] = c;
    };
    // x = 0 has no left neighbours.
    uint32_t pred0 = 0;
    if constexpr (Rank >= 2) pred0 += up[0];
    if constexpr (Rank == 3) pred0 += back[0] - backup[0];
    emit(0, pred0);
    for (uint64_t x = 1; x < nx; ++x) {
        uint32_t pred = cur[x - 1];
        if constexpr (Rank >= 2) pred += up[x] - up[x - 1];
        if constexpr (Rank == 3) pred += back[x] - back[x - 1] - backup[x] + backup[x - 1];
        emit(x, pred);
    }
}

// Codes for the whole array, rows in parallel; escapes in index order.
template <int Rank>
void lorenzo_codes_rank(const uint32_t *q, const Shape &s, uint16_t *codes, std::vector<int32_t> &escapes, int nt) {
    const uint64_t nx = s.nx(), ny = s.ny(), nz = s.nz(), rows = ny * nz;
    const std::vector<uint32_t> zero(Rank >= 2 ? nx : 0, 0);
    const Partition part{rows, nt};
    std::vector<std::vector<int32_t>> esc_per_part(nt);
#pragma omp parallel for num_threads(nt) schedule(static, 1)
    for (int r = 0; r < nt; ++r) {
        for (uint64_t row = part.begin(r); row < part.begin(r + 1); ++row) {
            const uint64_t z = row / ny, y = row % ny;
            const uint32_t *cur = q + row * nx;
            const uint32_t *up = y ? cur - nx : zero.data();
            const uint32_t *back = z ? cur - nx * ny : zero.data();
            const uint32_t *backup = (z && y) ? back - nx : zero.data();
            row_codes<Rank>(cur, up, back, backup, nx, codes + row * nx, esc_per_part[r]);
        }
    }
    for (auto &e : esc_per_part) escapes.insert(escapes.end(), e.begin(), e.end());
}

void lorenzo_codes(const uint32_t *q, const Shape &s, uint16_t *codes, std::vector<int32_t> &escapes, int nt) {
    if (s.rank == 1) lorenzo_codes_rank<1>(q, s, codes, escapes, nt);
    else if (s.rank == 2) lorenzo_codes_rank<2>(q, s, codes, escapes, nt);
    else lorenzo_codes_rank<3>(q, s, codes, escapes, nt);
}

// Packs bits into bytes, LSB first.
struct BitWriter {
    std::vector<uint8_t> bytes;
    uint64_t nbits = 0;
    explicit BitWriter(uint64_t reserve_bits) { bytes.reserve((size_t)div_up(reserve_bits, 8)); }
    void push(bool b) {
        if ((nbits & 7) == 0) bytes.push_back(0);
        if (b) bytes.back() |= (uint8_t)(1u << (nbits & 7));
        ++nbits;
    }
};

template <typename T> struct ExceptionStreams {
    std::vector<uint8_t> edge_flags, change_flags;
    std::string edge_blocks, change_blocks;
    std::vector<T> run_values;
    uint64_t count = 0;
};

// Edge mask, change bits and run values of the exceptions (docs/FORMAT.md section 5).
template <typename T>
void encode_exceptions(const T *x, const uint8_t *exc, uint64_t n, ExceptionStreams<T> &out, int nt) {
    using U = typename FloatBits<T>::U;
    const uint64_t mask_bytes = div_up(n, 8);
    std::vector<uint8_t> edge(mask_bytes, 0);
    uint64_t count = 0;
#pragma omp parallel for num_threads(nt) schedule(static) reduction(+ : count)
    for (int64_t b = 0; b < (int64_t)mask_bytes; ++b) {
        uint8_t byte = 0;
        for (int k = 0; k < 8; ++k) {
            const uint64_t i = (uint64_t)b * 8 + k;
            if (i >= n) break;
            const uint8_t prev = i ? exc[i - 1] : 0;
            byte |= (uint8_t)((exc[i] ^ prev) << k);
            count += exc[i];
        }
        edge[b] = byte;
    }
    out.count = count;
    out.edge_flags.resize((size_t)sparse_flag_bytes(mask_bytes));
    sparse_encode(edge.data(), mask_bytes, out.edge_flags.data(), out.edge_blocks);
    if (!count) return;
    BitWriter change(count);
    U prev = 0;
    for (uint64_t i = 0; i < n; ++i) {
        if (!exc[i]) continue;
        const U v = bits_of(x[i]);
        const bool differs = change.nbits == 0 || v != prev;
        change.push(differs);
        if (differs) out.run_values.push_back(x[i]);
        prev = v;
    }
    out.change_flags.resize((size_t)sparse_flag_bytes(change.bytes.size()));
    sparse_encode(change.bytes.data(), change.bytes.size(), out.change_flags.data(), out.change_blocks);
}

template <typename T>
zb_status compress_t(const zb_params &p, const T *x, const Shape &s, uint8_t *dst, size_t cap, size_t *out_len,
                     int nt, std::string &msg) {
    const uint64_t n = s.n;
    Header h;
    h.dtype = sizeof(T) == 8 ? ZB_F64 : ZB_F32;
    h.shape = s;
    h.mode = p.mode;
    h.bound = p.bound;
    double vmin = 0, vmax = 0;
    const bool has_range = p.mode == ZB_MODE_REL &&
                           value_range(h.dtype, x, n, p.has_fill, p.fill_bits, nt, vmin, vmax);
    h.eb = derive_abs_bound(p.mode, p.bound, has_range, vmin, vmax);
    const QuantParams qp = make_quant_params(h.eb, p.has_fill, p.fill_bits);

    std::vector<uint32_t> q((size_t)n);
    std::vector<uint8_t> exc((size_t)n);
    quantize_all(x, n, qp, q.data(), exc.data(), nt);

    const uint64_t ntiles = code_tiles(n);
    std::vector<uint16_t> codes((size_t)(ntiles * kTileCodes), 0);  // zero padding in the last tile
    std::vector<int32_t> escapes;
    lorenzo_codes(q.data(), s, codes.data(), escapes, nt);
    std::vector<uint32_t>().swap(q);

    // Bitshuffle each tile, flag its non-zero blocks, count them.
    std::vector<uint8_t> shuffled((size_t)(ntiles * kTileBytes));
    std::vector<uint8_t> code_flags((size_t)(ntiles * kTileFlagBytes));
    std::vector<uint64_t> tile_offset((size_t)ntiles + 1, 0);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t t = 0; t < (int64_t)ntiles; ++t) {
        uint8_t *tile = &shuffled[(size_t)t * kTileBytes];
        bitshuffle_tile(&codes[(size_t)t * kTileCodes], tile);
        uint8_t *flags = &code_flags[(size_t)t * kTileFlagBytes];
        std::memset(flags, 0, kTileFlagBytes);
        uint64_t nnz = 0;
        for (uint64_t b = 0; b < kTileBytes / kBlockBytes; ++b) {
            uint64_t w0, w1;
            std::memcpy(&w0, tile + b * kBlockBytes, 8);
            std::memcpy(&w1, tile + b * kBlockBytes + 8, 8);
            if (w0 | w1) {
                flags[b >> 3] |= (uint8_t)(1u << (b & 7));
                ++nnz;
            }
        }
        tile_offset[(size_t)t + 1] = nnz;
    }
    std::vector<uint16_t>().swap(codes);
    for (uint64_t t = 0; t < ntiles; ++t) tile_offset[t + 1] += tile_offset[t];

    ExceptionStreams<T> ex;
    encode_exceptions(x, exc.data(), n, ex, nt);

    h.predictor = 1;
    h.encoder = 1;
    h.escapes = escapes.size();
    h.exceptions = ex.count;
    h.runs = ex.run_values.size();
    h.nonzero_code_blocks = tile_offset[ntiles];
    fast_layout(h, ex.edge_blocks.size() / kBlockBytes, ex.change_blocks.size() / kBlockBytes);

    const size_t total = h.header_bytes() + (size_t)h.payload_bytes();
    const size_t raw_total = raw_stream_bytes(h.dtype, n);
    if (total >= raw_total) {
        if (cap < raw_total) {
            msg = "output buffer too small: " + std::to_string(raw_total) + " bytes needed";
            return ZB_ERR_BUFFER_TOO_SMALL;
        }
        *out_len = write_raw_stream(h, x, dst, nt);
        return ZB_OK;
    }
    if (cap < total) {
        msg = "output buffer too small: " + std::to_string(total) + " bytes needed";
        return ZB_ERR_BUFFER_TOO_SMALL;
    }

    uint8_t *payload = dst + h.header_bytes();
    auto seg = [&](int i) { return payload + h.seg[i].offset; };
    std::memcpy(seg(kSegCodeFlags), code_flags.data(), code_flags.size());
    uint8_t *blocks = seg(kSegCodeBlocks);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t t = 0; t < (int64_t)ntiles; ++t) {
        const uint8_t *tile = &shuffled[(size_t)t * kTileBytes];
        const uint8_t *flags = &code_flags[(size_t)t * kTileFlagBytes];
        uint8_t *out = blocks + tile_offset[(size_t)t] * kBlockBytes;
        for (uint64_t b = 0; b < kTileBytes / kBlockBytes; ++b)
            if (flags[b >> 3] & (1u << (b & 7))) {
                std::memcpy(out, tile + b * kBlockBytes, kBlockBytes);
                out += kBlockBytes;
            }
    }
    if (!escapes.empty()) std::memcpy(seg(kSegEscapes), escapes.data(), escapes.size() * 4);
    std::memcpy(seg(kSegEdgeFlags), ex.edge_flags.data(), ex.edge_flags.size());
    std::memcpy(seg(kSegEdgeBlocks), ex.edge_blocks.data(), ex.edge_blocks.size());
    if (!ex.change_flags.empty()) std::memcpy(seg(kSegChangeFlags), ex.change_flags.data(), ex.change_flags.size());
    std::memcpy(seg(kSegChangeBlocks), ex.change_blocks.data(), ex.change_blocks.size());
    if (!ex.run_values.empty())
        std::memcpy(seg(kSegExceptionValues), ex.run_values.data(), ex.run_values.size() * sizeof(T));
    h.payload_crc = payload_checksum(payload, (size_t)h.payload_bytes(), nt);
    write_header(h, dst);
    *out_len = total;
    return ZB_OK;
}

// ---------------------------------------------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------------------------------------------

zb_status corrupt(std::string &msg, const char *why) {
    msg = std::string("corrupt stream: ") + why;
    return ZB_ERR_CORRUPT;
}

// N-D inclusive prefix sum (mod 2^32) along x, then y, then z: the inverse of the Lorenzo deltas.
void lorenzo_inverse(uint32_t *q, const Shape &s, int nt) {
    const uint64_t nx = s.nx(), ny = s.ny(), nz = s.nz();
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t row = 0; row < (int64_t)(ny * nz); ++row) {
        uint32_t *r = q + (uint64_t)row * nx;
        for (uint64_t x = 1; x < nx; ++x) r[x] += r[x - 1];
    }
    if (s.rank >= 2) {
#pragma omp parallel for num_threads(nt) schedule(static)
        for (int64_t z = 0; z < (int64_t)nz; ++z) {
            uint32_t *plane = q + (uint64_t)z * ny * nx;
            for (uint64_t y = 1; y < ny; ++y) {
                uint32_t *r = plane + y * nx;
                const uint32_t *prev = r - nx;
                for (uint64_t x = 0; x < nx; ++x) r[x] += prev[x];
            }
        }
    }
    if (s.rank == 3) {
        const uint64_t plane = nx * ny;
        for (uint64_t z = 1; z < nz; ++z) {
            uint32_t *cur = q + z * plane;
            const uint32_t *prev = cur - plane;
#pragma omp parallel for num_threads(nt) schedule(static)
            for (int64_t i = 0; i < (int64_t)plane; ++i) cur[i] += prev[i];
        }
    }
}

// Scatters exception values: walks the edge mask, counting exceptions and runs; validates both counts.
template <typename T>
bool decode_exceptions(const Header &h, const uint8_t *payload, T *out, std::string &msg) {
    const uint64_t n = h.shape.n, k = h.exceptions;
    const uint64_t mask_bytes = div_up(n, 8);
    std::vector<uint8_t> edge((size_t)mask_bytes);
    if (!sparse_decode(payload + h.seg[kSegEdgeFlags].offset, payload + h.seg[kSegEdgeBlocks].offset,
                       h.seg[kSegEdgeBlocks].length / kBlockBytes, mask_bytes, edge.data())) {
        corrupt(msg, "exception edge mask");
        return false;
    }
    std::vector<uint8_t> change((size_t)div_up(k, 8));
    if (k && !sparse_decode(payload + h.seg[kSegChangeFlags].offset, payload + h.seg[kSegChangeBlocks].offset,
                            h.seg[kSegChangeBlocks].length / kBlockBytes, change.size(), change.data())) {
        corrupt(msg, "exception change bits");
        return false;
    }
    const uint8_t *values = payload + h.seg[kSegExceptionValues].offset;
    uint64_t j = 0, run = 0;
    T current{};
    bool inside = false;
    for (uint64_t b = 0; b < mask_bytes; ++b) {
        const uint8_t e = edge[b];
        if (!e && !inside) continue;
        for (int bit = 0; bit < 8; ++bit) {
            const uint64_t i = b * 8 + bit;
            if (i >= n) {
                if (e >> bit) { corrupt(msg, "edge mask bits past the end"); return false; }
                break;
            }
            inside ^= (e >> bit) & 1;
            if (!inside) continue;
            if (j >= k) { corrupt(msg, "more exceptions than the header says"); return false; }
            const bool differs = (change[j >> 3] >> (j & 7)) & 1;
            if (j == 0 && !differs) { corrupt(msg, "first exception does not start a run"); return false; }
            if (differs) {
                if (run >= h.runs) { corrupt(msg, "more exception runs than the header says"); return false; }
                std::memcpy(&current, values + run * sizeof(T), sizeof(T));
                ++run;
            }
            out[i] = current;
            ++j;
        }
    }
    if (j != k || run != h.runs) {
        corrupt(msg, "exception counts do not match the header");
        return false;
    }
    for (uint64_t bit = k; bit < change.size() * 8; ++bit)
        if ((change[bit >> 3] >> (bit & 7)) & 1) { corrupt(msg, "change bits past the end"); return false; }
    return true;
}

template <typename T>
zb_status decompress_t(const Header &h, const uint8_t *stream, T *out, int nt, std::string &msg) {
    const uint64_t n = h.shape.n;
    const uint8_t *payload = stream + h.header_bytes();
    if (h.flags & kFlagRaw) {
        std::memcpy(out, payload, (size_t)(n * sizeof(T)));
        return ZB_OK;
    }
    const uint64_t ntiles = code_tiles(n);
    const uint8_t *code_flags = payload + h.seg[kSegCodeFlags].offset;
    const uint8_t *blocks = payload + h.seg[kSegCodeBlocks].offset;

    // Where each tile's blocks start: popcounts of the flags.
    std::vector<uint64_t> block_start((size_t)ntiles + 1, 0);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t t = 0; t < (int64_t)ntiles; ++t) {
        uint64_t c = 0;
        for (uint64_t b = 0; b < kTileFlagBytes; ++b) c += (uint64_t)__builtin_popcount(code_flags[t * kTileFlagBytes + b]);
        block_start[(size_t)t + 1] = c;
    }
    for (uint64_t t = 0; t < ntiles; ++t) block_start[t + 1] += block_start[t];
    if (block_start[ntiles] != h.nonzero_code_blocks) return corrupt(msg, "code block flags do not match the count");

    // Expand and unshuffle every tile into codes; count escapes per tile.
    std::vector<uint16_t> codes((size_t)(ntiles * kTileCodes));
    std::vector<uint64_t> esc_start((size_t)ntiles + 1, 0);
    int bad_padding = 0;
#pragma omp parallel for num_threads(nt) schedule(static) reduction(| : bad_padding)
    for (int64_t t = 0; t < (int64_t)ntiles; ++t) {
        uint8_t tile[kTileBytes];
        const uint8_t *flags = code_flags + t * kTileFlagBytes;
        const uint8_t *src = blocks + block_start[(size_t)t] * kBlockBytes;
        for (uint64_t b = 0; b < kTileBytes / kBlockBytes; ++b) {
            if (flags[b >> 3] & (1u << (b & 7))) {
                std::memcpy(tile + b * kBlockBytes, src, kBlockBytes);
                src += kBlockBytes;
            } else {
                std::memset(tile + b * kBlockBytes, 0, kBlockBytes);
            }
        }
        uint16_t *c = &codes[(size_t)t * kTileCodes];
        bitunshuffle_tile(tile, c);
        const uint64_t valid = std::min<uint64_t>(kTileCodes, n - (uint64_t)t * kTileCodes);
        uint64_t esc = 0;
        for (uint64_t j = 0; j < valid; ++j) esc += c[j] == kEscapeCode;
        for (uint64_t j = valid; j < kTileCodes; ++j) bad_padding |= c[j] != 0;
        esc_start[(size_t)t + 1] = esc;
    }
    if (bad_padding) return corrupt(msg, "non-zero padding codes");
    for (uint64_t t = 0; t < ntiles; ++t) esc_start[t + 1] += esc_start[t];
    if (esc_start[ntiles] != h.escapes) return corrupt(msg, "escape codes do not match the escape count");

    // Deltas (escapes patched in order), then the prefix sums give q.
    std::vector<uint32_t> q((size_t)n);
    const uint8_t *esc_bytes = payload + h.seg[kSegEscapes].offset;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t t = 0; t < (int64_t)ntiles; ++t) {
        const uint64_t base = (uint64_t)t * kTileCodes;
        const uint64_t valid = std::min<uint64_t>(kTileCodes, n - base);
        uint64_t e = esc_start[(size_t)t];
        for (uint64_t j = 0; j < valid; ++j) {
            const uint16_t c = codes[base + j];
            int32_t d;
            if (c == kEscapeCode) {
                std::memcpy(&d, esc_bytes + 4 * e++, 4);
            } else {
                d = code_to_delta(c);
            }
            q[base + j] = (uint32_t)d;
        }
    }
    std::vector<uint16_t>().swap(codes);
    lorenzo_inverse(q.data(), h.shape, nt);

    const double twoeb = 2.0 * h.eb;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t i = 0; i < (int64_t)n; ++i) out[i] = dequantize<T>((int32_t)q[(size_t)i], twoeb);
    if (h.exceptions && !decode_exceptions(h, payload, out, msg)) return ZB_ERR_CORRUPT;
    return ZB_OK;
}

}  // namespace

zb_status cpu_compress(const zb_params &p, zb_dtype dtype, const void *src, const Shape &shape, uint8_t *dst,
                       size_t dst_capacity, size_t *dst_len, int threads, std::string &msg) {
    if (dtype == ZB_F64)
        return compress_t(p, static_cast<const double *>(src), shape, dst, dst_capacity, dst_len, threads, msg);
    return compress_t(p, static_cast<const float *>(src), shape, dst, dst_capacity, dst_len, threads, msg);
}

zb_status cpu_decompress(const Header &h, const uint8_t *stream, void *dst, int threads, std::string &msg) {
    if (h.dtype == ZB_F64) return decompress_t(h, stream, static_cast<double *>(dst), threads, msg);
    return decompress_t(h, stream, static_cast<float *>(dst), threads, msg);
}

}  // namespace zb
