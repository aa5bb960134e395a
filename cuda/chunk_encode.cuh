// The fast encoder's chunk path: a device call on an array of HDF5-chunk size in five graph nodes, where the general
// path (encode.cuh's encode_impl) queues about fifteen one after another. A 4 MB call was about 60 us, mostly the
// serial latency of small kernels (bench/NOTES.md 76, 110, 116). Part of encode.cuh, which includes it after the
// kernels it uses (k_range, k_quantize, the tile helpers).
//
// Flow (device memory throughout; one wait, at the end):
//   memset: the call's words and the tiles' look-back states to 0xFF (tickets count from ~0, states start "none")
//   REL only: k_range; its last block derives the quantizer's constants
//   k_quantize: q and the exception mask words
//   k_chunk_encode: one block per tile, tiles handed out in order by a ticket: the codes, their bitshuffle and
//       zero-block flags (segment 0, in place), the tile's counts; a decoupled look-back over the tiles' counts
//       (lookback.cuh) gives the tile's offsets, so that its non-zero blocks go straight to their place in segment 1,
//       its escapes and exceptions (value and index) to lists in index order. The last block to finish lays the
//       stream out from the totals (fast_segment_lengths), builds the exception segments from the lists
//       (chunk_tail), writes segments 2-7 and the header without its checksums
//   k_piece_crc_seal: the piece CRCs; its last block seals the header (payload checksum, header CRC)
//   the layout result to the host.
// Exactly the general path's bytes (docs/FORMAT.md sections 3-6). Where the exceptions outnumber the lists
// (kChunkExceptionCap: a NaN land mask, a fill region) the result says so and the caller runs the general path, whose
// exception stage is made for that; a context that saw such a chunk sends the next ones there directly.
#pragma once
#include <cub/block/block_scan.cuh>
#include "block_sum.cuh"
#include "lookback.cuh"

namespace zb {
namespace gpu {
namespace enc {
namespace {

// Exceptions the chunk path's lists hold (its arrays: up to kChunkMaxValues, where walk_plan chose the two-pass form;
// larger arrays walk their tiles in one pass).
constexpr uint64_t kChunkExceptionCap = 65536;

// Device words of one call, set to 0xFF by its first node.
struct ChunkWords {
    QuantParams qp;                        // k_range's last block (REL)
    uint32_t tile_ticket, done_ticket, crc_ticket, crc_header;  // crc_header: k_piece_crc_last's
    uint64_t payload_len, status;          // k_chunk_encode's last block, for k_piece_crc_seal
    LayoutResult result;                   // k_chunk_encode's last block, for the host
};

template <typename T> struct ChunkArgs {
    using U = typename FloatBits<T>::U;
    const T *x;
    const uint32_t *q, *mwords;  // k_quantize's
    Dims dm;
    uint64_t ntiles;
    Lookback lb;
    int32_t *escd;       // escaped deltas at their value's index (tile_codes' Keep form)
    int32_t *esc_list;   // the escaped deltas in index order (n)
    U *V;                // the exception values in index order (kcap)
    uint32_t *P;         // their indices (kcap)
    uint64_t kcap;
    // chunk_tail's scratch: the edges' positions (2 kcap), the edge mask's non-zero 16-byte blocks (2 kcap), its flag
    // words (one per 32 blocks of the whole mask), the change bits' words (4 per block of kcap bits)
    uint32_t *edges;
    uint4 *edge_blocks;
    uint32_t *edge_flags;
    uint32_t *change_words;
    uint32_t *crcs;      // zeroed here for k_piece_crc_seal (npieces words)
    uint64_t npieces;
    ChunkWords *w;
    uint8_t *hdr, *pay;  // the caller's buffer (with room for a raw stream), the payload after the header
    uint64_t room;       // bytes of the buffer after the header
    uint64_t raw_bytes, capacity;
    int rel;
    FastHeaderBytes tmpl;
};

// The last block of k_chunk_encode (all tiles' writes are visible): the totals, the exception segments from the
// lists, the layout, segments 2-7 and the header. 256 threads.
template <typename T>
__device__ void chunk_tail(const ChunkArgs<T> &a) {
    using U = typename FloatBits<T>::U;
    __shared__ BlockSum<kTileThreads> block_sum;
    __shared__ FastStreamPlan lay;  // the stream's layout, by thread 0 for the block
    const uint32_t tid = threadIdx.x;
    const uint4 tot = __ldcg(a.lb.incl + (a.ntiles - 1));
    const uint64_t n = a.dm.n, nnz = tot.x, esc = tot.y, k = tot.z;
    ChunkWords *w = a.w;
    const double eb = a.rel ? w->qp.eb : 0.0;  // read before thread 0's stores below
    auto finish = [&](uint64_t status, uint64_t payload_len, uint64_t stream_len) {  // thread 0
        w->payload_len = payload_len;
        w->status = status;
        LayoutResult &r = w->result;
        r.totals[0] = nnz;
        r.totals[1] = esc;
        r.totals[2] = k;
        r.eb = eb;
        r.payload_len = payload_len;
        r.stream_len = stream_len;
        r.status = status;
    };
    if (k > a.kcap) {
        if (tid == 0) finish(kLayoutOverCap, 0, 0);
        return;
    }

    // 1. The edges of the exception mask (docs/FORMAT.md section 5), from the sorted indices: exception j opens a run
    //    where j - 1 is not its left neighbour and closes one where j + 1 is not its right one (an edge at n is not
    //    stored). Each thread takes a run of exceptions; the edges come out in order.
    const uint64_t nb_edge = div_up(div_up(n, 8), kBlockBytes);
    for (uint64_t i = tid; i < div_up(nb_edge, 32); i += kTileThreads) a.edge_flags[i] = 0;
    for (uint64_t i = tid; i < 2 * k; i += kTileThreads) a.edge_blocks[i] = make_uint4(0, 0, 0, 0);
    const uint64_t per_thread = div_up(k, (uint64_t)kTileThreads);
    const uint64_t j0 = min(k, tid * per_thread), j1 = min(k, j0 + per_thread);
    auto index_of = [&](uint64_t j) { return (uint64_t)__ldcg(a.P + j); };
    auto opens = [&](uint64_t j) { return j == 0 || index_of(j - 1) + 1 != index_of(j); };
    auto closes = [&](uint64_t j) { return (j + 1 == k || index_of(j + 1) != index_of(j) + 1) && index_of(j) + 1 < n; };
    uint32_t mine = 0;
    for (uint64_t j = j0; j < j1; ++j) mine += (uint32_t)opens(j) + (uint32_t)closes(j);
    uint64_t nedges = 0;
    uint64_t at = block_sum.exclusive(mine, nedges);
    for (uint64_t j = j0; j < j1; ++j) {
        if (opens(j)) a.edges[at++] = (uint32_t)index_of(j);
        if (closes(j)) a.edges[at++] = (uint32_t)(index_of(j) + 1);
    }
    __syncthreads();  // the edges and the zeroed scratch

    // 2. The edge mask's non-zero blocks (128 values each) in order: a block is stored once, from its first edge; its
    //    bits and its flag bit are or-ed in.
    const uint64_t per_edge = div_up(nedges, (uint64_t)kTileThreads);
    const uint64_t i0 = min(nedges, tid * per_edge), i1 = min(nedges, i0 + per_edge);
    auto first_of_block = [&](uint64_t i) { return i == 0 || (a.edges[i] >> 7) != (a.edges[i - 1] >> 7); };
    mine = 0;
    for (uint64_t i = i0; i < i1; ++i) mine += first_of_block(i);
    uint64_t stored_edge_blocks = 0;
    int64_t rank = (int64_t)block_sum.exclusive(mine, stored_edge_blocks) - 1;  // the block of the edge before i0
    for (uint64_t i = i0; i < i1; ++i) {
        const uint32_t pos = a.edges[i];
        if (first_of_block(i)) {
            ++rank;
            atomicOr(a.edge_flags + (pos >> 12), 1u << ((pos >> 7) & 31));
        }
        atomicOr(reinterpret_cast<uint32_t *>(a.edge_blocks + rank) + ((pos >> 5) & 3), 1u << (pos & 31));
    }

    // 3. Change bits C[j] = (j == 0 || V[j] != V[j-1]) in 16-byte blocks (128 bits), each thread a run of blocks: its
    //    words, runs (set bits) and non-zero blocks, with their offsets.
    const uint64_t nb_change = k ? div_up(div_up(k, 8), kBlockBytes) : 0;
    const uint64_t per_block = div_up(nb_change, (uint64_t)kTileThreads);
    const uint64_t c0 = min(nb_change, tid * per_block), c1 = min(nb_change, c0 + per_block);
    auto value_of = [&](uint64_t j) { return __ldcg(a.V + j); };
    uint32_t my_runs = 0, my_blocks = 0;
    for (uint64_t cb = c0; cb < c1; ++cb) {
        uint32_t any = 0;
        for (int wi = 0; wi < 4; ++wi) {
            const uint64_t j0w = 128 * cb + 32 * (uint64_t)wi;
            uint32_t word = 0;
            U prev = j0w > 0 && j0w - 1 < k ? value_of(j0w - 1) : U(0);
            for (int b = 0; b < 32 && j0w + b < k; ++b) {
                const U v = value_of(j0w + b);
                word |= (uint32_t)(j0w + b == 0 || v != prev) << b;
                prev = v;
            }
            a.change_words[4 * cb + wi] = word;
            my_runs += __popc(word);
            any |= word;
        }
        my_blocks += any != 0;
    }
    uint64_t runs = 0, stored_change_blocks = 0;
    uint64_t run_at = block_sum.exclusive(my_runs, runs);
    uint64_t change_at = block_sum.exclusive(my_blocks, stored_change_blocks);

    // 4. The layout, the raw-passthrough and capacity decisions (plan_fast_stream), the header made in shared memory
    //    (as FastLayout: thread 0's byte stores to global memory made its later reads of w wait on them).
    __shared__ uint8_t s_hdr[kFastHeaderBytes];
    for (size_t i = tid; i < kFastHeaderBytes; i += kTileThreads) s_hdr[i] = a.tmpl.b[i];
    __syncthreads();
    if (tid == 0) {
        const FastCounts fc{n, sizeof(T), nnz, esc, k, stored_edge_blocks, stored_change_blocks, runs};
        plan_fast_stream(fc, a.raw_bytes, a.capacity, lay);
        finish(lay.status, lay.payload_len, lay.stream_len);
        if (lay.status == kLayoutOk) put_fast_header_fields(s_hdr, lay.flags, a.rel != 0, eb, fc, lay.off, lay.len);
    }
    __syncthreads();
    if (lay.status != kLayoutOk) return;
    for (size_t i = tid; i < kFastHeaderBytes; i += kTileThreads) a.hdr[i] = s_hdr[i];

    // 5. Segments 2-7 at their offsets. Escapes are 4-byte aligned (the payload is, and segments 0 and 1 are
    //    multiples of 16 bytes); the rest is byte-aligned.
    uint8_t *pay = a.pay;
    int32_t *escapes = reinterpret_cast<int32_t *>(pay + lay.off[kSegEscapes]);
    for (uint64_t i = tid; i < esc; i += kTileThreads) escapes[i] = __ldcg(a.esc_list + i);
    for (uint64_t i = tid; i < lay.len[kSegEdgeFlags]; i += kTileThreads)
        pay[lay.off[kSegEdgeFlags] + i] = (uint8_t)(__ldcg(a.edge_flags + (i >> 2)) >> (8 * (i & 3)));
    for (uint64_t r = tid; r < stored_edge_blocks; r += kTileThreads)
        store16(pay + lay.off[kSegEdgeBlocks] + 16 * r, __ldcg(a.edge_blocks + r));  // or-ed in at the L2
    auto change_block = [&](uint64_t cb) { return *reinterpret_cast<const uint4 *>(a.change_words + 4 * cb); };
    for (uint64_t i = tid; i < lay.len[kSegChangeFlags]; i += kTileThreads) {
        uint32_t byte = 0;
        for (int b = 0; b < 8; ++b)
            if (8 * i + b < nb_change && any_bits(change_block(8 * i + b))) byte |= 1u << b;
        pay[lay.off[kSegChangeFlags] + i] = (uint8_t)byte;
    }
    for (uint64_t cb = c0; cb < c1; ++cb) {
        const uint4 v = change_block(cb);
        if (!any_bits(v)) continue;
        store16(pay + lay.off[kSegChangeBlocks] + 16 * change_at++, v);
        const uint32_t words[4] = {v.x, v.y, v.z, v.w};
        for (int wi = 0; wi < 4; ++wi)
            for (uint32_t bits = words[wi]; bits; bits &= bits - 1) {
                const U val = value_of(128 * cb + 32 * (uint64_t)wi + (uint64_t)(__ffs(bits) - 1));
                uint8_t *o = pay + lay.off[kSegExceptionValues] + sizeof(U) * run_at++;
                for (int b = 0; b < (int)sizeof(U); ++b) o[b] = (uint8_t)(val >> (8 * b));
            }
    }
}

// One block per tile of 2048 codes (k_encode's thread layout), tile = the block's ticket.
template <typename T, int Rank, bool VecRows>
__global__ void __launch_bounds__(kTileThreads) k_chunk_encode(const ChunkArgs<T> a) {
    using Scan = cub::BlockScan<uint32_t, kTileThreads>;
    __shared__ TileCounts wc;
    __shared__ typename Scan::TempStorage scan_tmp;
    __shared__ uint4 tile_before, tile_count;  // {non-zero blocks, escapes, exceptions, 0}: before the tile, in it
    __shared__ uint32_t tile_index, last;
    const int j = threadIdx.x, lane = j & 31, warp = j >> 5;
    if (j == 0) tile_index = atomicAdd(&a.w->tile_ticket, 1u) + 1u;  // from ~0: the first block takes tile 0
    __syncthreads();
    const uint64_t t = tile_index, e = t * kTileCodes + 8 * (uint64_t)j;

    // The tile's codes (k_encode's), their exception bits, the bitshuffle and segment 0's flags (store_tile's, the
    // thread's block kept instead of stored in a dense buffer).
    const GlobalQ src{a.q};
    Rows8 r;
    load_rows8<Rank, VecRows>(src, a.dm, e, r);
    const FirstLeft p = first_left<Rank>(src, a.dm, e, r);
    uint32_t w[4];
    const uint32_t escaped = tile_codes<Rank, true>(r, p, w, a.escd, e);
    const uint32_t m8 = (a.mwords[t * 64 + (uint64_t)(j >> 2)] >> (8 * (j & 3))) & 0xFFu;  // values e .. e+7
    const TileBlock tb = store_tile_parts<false>(w, (uint32_t)__popc(escaped), (uint32_t)__popc(m8), t, nullptr,
                                                 reinterpret_cast<uint32_t *>(a.pay), wc);
    const uint4 block = tb.block;
    const bool nz = any_bits(block);
    const uint32_t fw = tb.flag_word;
    __syncthreads();

    // The tile's offsets.
    if (warp == 0) {
        const bool part = lane < 8;
        const uint4 own = make_uint4(__reduce_add_sync(kFullMask, part ? wc.nnz[lane] : 0u),
                                     __reduce_add_sync(kFullMask, part ? wc.esc[lane] : 0u),
                                     __reduce_add_sync(kFullMask, part ? wc.exc[lane] : 0u), 0u);
        const uint4 before = lookback_exclusive(a.lb, t, own, make_uint4(0, 0, 0, 0), SumOp());
        if (lane == 0) {
            tile_before = before;
            tile_count = own;
        }
    }
    if (j == 0 && t < a.npieces) a.crcs[t] = 0;
    __syncthreads();
    const uint4 before = tile_before, count = tile_count;

    // Non-zero blocks at their place in segment 1 (after segment 0's flags); none past the buffer (such a stream is
    // longer than the raw one, which replaces it).
    if (nz) {
        uint32_t rank = __popc(fw & low_bits(lane));
        for (int v = 0; v < warp; ++v) rank += wc.nnz[v];
        const uint64_t at = a.ntiles * kTileFlagBytes + 16 * ((uint64_t)before.x + rank);
        if (at + 16 <= a.room) store16(a.pay + at, block);
    }
    // Escapes and exceptions in index order (the block scans only in tiles that have some): the index of the thread's
    // first among all, from the tile's offset and a block scan of the threads' bits.
    auto first_index = [&](uint32_t tile_offset, uint32_t bits) {
        uint32_t rank, total;
        Scan(scan_tmp).ExclusiveSum((uint32_t)__popc(bits), rank, total);
        __syncthreads();  // scan_tmp may be used again
        return (uint64_t)tile_offset + rank;
    };
    if (count.y) {
        uint64_t at = first_index(before.y, escaped);
#pragma unroll
        for (int k = 0; k < 8; ++k)
            if ((escaped >> k) & 1) a.esc_list[at++] = a.escd[e + k];
    }
    if (count.z) {
        uint64_t at = first_index(before.z, m8);
#pragma unroll
        for (int k = 0; k < 8; ++k)
            if ((m8 >> k) & 1) {
                if (at < a.kcap) {
                    a.V[at] = bits_of(a.x[e + k]);
                    a.P[at] = (uint32_t)(e + k);
                }
                ++at;
            }
    }

    // The last block to finish (the ticket's last number: the count from ~0 gives ntiles - 2) does the rest.
    __threadfence();
    __syncthreads();
    if (j == 0) last = atomicAdd(&a.w->done_ticket, 1u) == (uint32_t)(a.ntiles - 2);
    __syncthreads();
    if (!last) return;
    __threadfence();
    chunk_tail<T>(a);
}

template <typename T>
inline auto chunk_encode_kernel(int rank, const Dims &dm) {
    const bool vec = dm.nx % 4 == 0;  // as launch_encode
    return rank == 1 ? k_chunk_encode<T, 1, false>
           : rank == 2 ? (vec ? k_chunk_encode<T, 2, true> : k_chunk_encode<T, 2, false>)
                       : (vec ? k_chunk_encode<T, 3, true> : k_chunk_encode<T, 3, false>);
}

// Whether a call takes the chunk path: device input, a device buffer with room for a raw stream where the payload
// starts 4-byte aligned (in_place), the two-pass form, and no recent chunk with more exceptions than the lists hold.
inline bool chunk_path_applies(const Context &c, const WalkPlan &wp, uint64_t n, bool device_input, bool in_place) {
    return chunk_paths_enabled() && device_input && in_place && wp.ring == 0 && n > 0 && n <= kChunkMaxValues &&
           c.exception_fraction * (double)n <= (double)kChunkExceptionCap;
}

// The chunk path (see the top of this file) for n values at x into out (in place: chunk_path_applies). Returns the
// layout result; kLayoutOk: the stream is complete in out; kLayoutRaw: the caller writes the raw stream (crcs: room
// for its piece CRCs); kLayoutOverCap: the caller runs the general path.
template <typename T>
LayoutResult encode_chunk(Context &c, const zb_params &p, const Shape &shape, const T *x, const StreamTarget &out,
                          const FastHeaderBytes &tmpl, cudaStream_t s, KernelTimer &timer, uint32_t *&crcs) {
    using U = typename FloatBits<T>::U;
    const zb_dtype dtype = sizeof(T) == 8 ? ZB_F64 : ZB_F32;
    const uint64_t n = shape.n, ntiles = code_tiles(n);
    const uint64_t raw_bytes = raw_stream_bytes(dtype, n);
    const uint64_t kcap = std::min<uint64_t>(n, kChunkExceptionCap);
    const uint64_t nb_edge = div_up(div_up(n, 8), kBlockBytes), nb_change = div_up(div_up(kcap, 8), kBlockBytes);
    const uint64_t npieces = piece_count(raw_bytes);
    const Dims dm = make_dims(shape);
    const bool rel = p.mode == ZB_MODE_REL;
    const QuantParams qp = make_quant_params(p.bound, p.has_fill, p.fill_bits);  // ABS (REL: k_range)

    ChunkArgs<T> a{};
    struct {
        ChunkWords *w;
        uint32_t *q, *mwords;
    } b{};
    carve_from(c.arena[kArenaMain], [&](Carver &cv) {
        b.w = cv.take<ChunkWords>(1);
        a.lb.state = cv.take<uint32_t>(ntiles);  // right after the words: one memset for both
        a.lb.agg = cv.take<uint4>(ntiles);
        a.lb.incl = cv.take<uint4>(ntiles);
        b.q = cv.take<uint32_t>(n);
        b.mwords = cv.take<uint32_t>(ntiles * 64);
        a.escd = cv.take<int32_t>(n);
        a.esc_list = cv.take<int32_t>(n);
        a.V = cv.take<U>(kcap);
        a.P = cv.take<uint32_t>(kcap);
        a.edges = cv.take<uint32_t>(2 * kcap);
        a.edge_blocks = cv.take<uint4>(2 * kcap);
        a.edge_flags = cv.take<uint32_t>(div_up(nb_edge, 32));
        a.change_words = cv.take<uint32_t>(4 * nb_change);
        a.crcs = cv.take<uint32_t>(npieces);
    });
    crcs = a.crcs;
    a.x = x;
    a.q = b.q;
    a.mwords = b.mwords;
    a.dm = dm;
    a.ntiles = ntiles;
    a.kcap = kcap;
    a.npieces = npieces;
    a.w = b.w;
    a.hdr = out.ptr;
    a.pay = out.ptr + kFastHeaderBytes;
    a.room = out.capacity - kFastHeaderBytes;
    a.raw_bytes = raw_bytes;
    a.capacity = out.capacity;
    a.rel = rel;
    a.tmpl = tmpl;
    ChunkWords *w = b.w;
    const size_t word_bytes = (size_t)(reinterpret_cast<uint8_t *>(a.lb.state + ntiles) - reinterpret_cast<uint8_t *>(w));

    auto queue = [&](cudaStream_t q) {
        ZB_CUDA(cudaMemsetAsync(w, 0xFF, word_bytes, q));
        const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0;
        if (rel) {
            timer.begin("range");
            queue_rel_range(c, x, n, p, &w->qp, q);
            timer.end();
        }
        timer.begin("quantize");
        auto quantize_kernel = rel ? (aligned ? k_quantize<T, true, true> : k_quantize<T, false, true>)
                                   : (aligned ? k_quantize<T, true, false> : k_quantize<T, false, false>);
        quantize_kernel<<<(unsigned)(ntiles * (kTileCodes / 1024)), 256, 0, q>>>(x, n, qp, &w->qp, b.q, b.mwords);
        ZB_LAUNCHED("k_quantize");
        timer.end();
        timer.begin("encode");
        chunk_encode_kernel<T>(shape.rank, dm)<<<(unsigned)ntiles, kTileThreads, 0, q>>>(a);
        ZB_LAUNCHED("k_chunk_encode");
        timer.end();
        timer.begin("crc");
        piece_crcs_seal_at(c, a.pay, raw_bytes, raw_bytes / 8, &w->payload_len, &w->status, a.crcs, &w->crc_ticket,
                           &w->crc_header, a.hdr, kFastHeaderBytes, q);
        timer.end();
        result_to_host(c, &w->result, sizeof(LayoutResult), q);
    };

    // Repeated calls (the same buffers, shape and parameters) as one graph, as the general path's.
    bool graphed = false;
    if (raw_bytes <= kGraphMaxBytes && !timer.records() && graphs_usable(c)) {
        GraphKey key = encode_call_key<T>(0x6663686b, shape, p, x, out);  // "fchk"
        key.add_ptr(w);  // the main arena: every buffer's place follows from it and n
        key.add(c.arena[kArenaMain].allocations());
        graphed = queue_as_graph(c, key, s, queue);
    }
    if (!graphed) queue(s);
    ZB_CUDA(cudaStreamSynchronize(s));
    timer.mark("chunk laid out");
    LayoutResult got;
    std::memcpy(&got, c.host_small, sizeof got);
    return got;
}

}  // namespace
}  // namespace enc
}  // namespace gpu
}  // namespace zb
