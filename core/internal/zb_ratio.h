// The ratio encoder stage (docs/FORMAT.md, "Ratio encoder (format v2)"): n uint16 symbols of an alphabet of A
// symbols -> canonical Huffman codes (length-limited, built on the host) in independent sub-blocks of S symbols,
// hybrid decode metadata (per partition of 32 sub-blocks one absolute bit offset + 31 lengths), and the zero-block
// sparse pass over the Huffman bitstream. CPU implementation in core/src/ratio_cpu.cpp; the CUDA implementation
// (cuda/ratio_gpu.cu) writes the same bytes and uses the host-side codebook functions declared here.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>
#include "zb_format.h"  // ByteSpan, div_up, kBlockBytes, sparse_flag_bytes
#include "zb_hd.h"
#include "zbound.h"

namespace zb {

// ---- format constants --------------------------------------------------------------------------------------------

constexpr int kRatioSegmentCount = 4;
enum RatioSegment { kRatioSegCodebook = 0, kRatioSegMetadata = 1, kRatioSegFlags = 2, kRatioSegBlocks = 3 };

constexpr int kRatioMaxCodeLength = 16;      // L: every code is 1..16 bits
constexpr int kRatioSubBlockLog2 = 12;       // S = 4096 symbols per sub-block (what the encoder writes)
constexpr int kRatioMinSubBlockLog2 = 10;    // decoders accept S = 1024, 2048, 4096
constexpr int kRatioMaxSubBlockLog2 = 12;    // S * (L - 1) must fit the u16 length field
constexpr uint64_t kRatioPartition = 32;     // sub-blocks per metadata partition
constexpr uint32_t kRatioMaxAlphabet = 65536;
constexpr uint64_t kRatioCodebookFixedBytes = 19;

// Run tokens (format v4, docs/FORMAT.md section 9): inside a sub-block, a maximal run of L >= 2 copies of the run
// symbol z is one token of the extended alphabet [A, A + kRatioRunTokens):
//   L = 2 .. 15        token A + (L - 2), no extra bits
//   L = 16 .. 4096     token A + 14 + (k - 4) with k = floor(log2 L), followed by the k low bits of L (MSB first)
// Huffman codes the zero-heavy codes of a tight predictor at well under one bit per symbol this way.
constexpr uint32_t kRatioRunExactMax = 15;
constexpr int kRatioRunMinClass = 4, kRatioRunMaxClass = kRatioMaxSubBlockLog2;
constexpr uint32_t kRatioRunTokens = (kRatioRunExactMax - 1) + (kRatioRunMaxClass - kRatioRunMinClass + 1);  // 23
constexpr uint32_t kRatioRunMaxAlphabet = kRatioMaxAlphabet - kRatioRunTokens;  // runs need A + 23 <= 65536
constexpr uint8_t kRatioRunFlag = 0x80;      // codebook byte 0: g | this flag when the stream has run tokens
constexpr uint32_t kRatioNoRunSymbol = 0x10000;  // a "run symbol" no u16 symbol equals: tokenizing is the identity

// The token of a run of L (2 <= L <= 4096) copies: its offset above A and its extra bits.
struct RatioRunToken {
    uint32_t offset;
    int extra_bits;
    uint32_t extra;
};
ZB_HD RatioRunToken ratio_run_token(uint32_t L) {
    if (L <= kRatioRunExactMax) return {L - 2, 0, 0};
#if defined(__CUDA_ARCH__)
    const int k = 31 - __clz(L);
#else
    const int k = 31 - __builtin_clz(L);
#endif
    return {(kRatioRunExactMax - 1) + (uint32_t)(k - kRatioRunMinClass), k, L - (1u << k)};
}
// Extra bits after token A + offset (0 for the exact tokens).
ZB_HD int ratio_run_extra_bits(uint32_t offset) {
    return offset < kRatioRunExactMax - 1 ? 0 : (int)(offset - (kRatioRunExactMax - 1)) + kRatioRunMinClass;
}
// The run length of token A + offset with its extra bits.
ZB_HD uint32_t ratio_run_length(uint32_t offset, uint32_t extra) {
    return offset < kRatioRunExactMax - 1 ? offset + 2 : (1u << ratio_run_extra_bits(offset)) + extra;
}

// Emits a run of `run` >= 1 copies of the run symbol z as the encoders tokenize it: z itself for one copy, else
// the run token A + offset with its extra bits, as emit(item, extra bits, extra).
template <typename F> ZB_HD void ratio_emit_run(uint32_t run, uint32_t A, uint32_t z, F &&emit) {
    if (run == 1) {
        emit(z, 0, 0u);
    } else {
        const RatioRunToken t = ratio_run_token(run);
        emit(A + t.offset, t.extra_bits, t.extra);
    }
}

// ---- the stage ---------------------------------------------------------------------------------------------------

struct RatioStats {
    uint64_t payload_bytes = 0;   // segments 2 + 3: the Huffman bitstream after the sparse pass
    uint64_t metadata_bytes = 0;  // segment 1
    uint64_t codebook_bytes = 0;  // segment 0
    double overhead_f = 0;        // metadata_bytes / payload_bytes (0 when the payload is empty)
    uint64_t huffman_bytes = 0;   // the Huffman bitstream before the sparse pass, ceil(total_bits / 8)
    uint32_t used_symbols = 0;    // symbols with a code (run tokens included)
    int max_code_length = 0;      // longest code in use
    bool run_tokens = false;      // the stream codes runs of the run symbol as tokens (needs format v4)
};

// Test and benchmark knobs of the encoder. Streams of the format are written with the defaults; the sub-block size
// is a stream field (decoders accept 2^10 .. 2^12), so other values give valid streams too.
struct RatioOptions {
    int sub_block_log2 = kRatioSubBlockLog2;
    // The symbol whose runs may become run tokens (< alphabet <= kRatioRunMaxAlphabet), or kRatioNoRunSymbol. The
    // encoder uses the tokens when they make the Huffman bitstream shorter (computed exactly from the histograms,
    // the plain stream on ties); RatioStats::run_tokens says which it wrote.
    uint32_t run_symbol = kRatioNoRunSymbol;
};

// Encodes symbols[0..n) (each < alphabet, 2 <= alphabet <= 65536, n >= 1) into kRatioSegmentCount byte strings,
// appended in order to `segments`. Output bytes do not depend on `threads` (<= 0: resolve_threads()). stats may be
// null. Errors: ZB_ERR_INVALID_ARG (a symbol >= alphabet, bad n / alphabet), ZB_ERR_NOMEM.
zb_status ratio_encode_cpu(const uint16_t *symbols, uint64_t n, uint32_t alphabet, int threads,
                           std::vector<std::string> &segments, RatioStats *stats, std::string &msg,
                           const RatioOptions &opt = RatioOptions());

// The same four segments as views into the calling thread's encoder memory, which is reused from call to call (a
// fresh string of the non-zero blocks was filled with zeros and faulted in page by page, serially: 3-8 ms of a
// 16-thread call on 256 MB). The views stay valid until the thread's next ratio_encode_cpu* call or
// ratio_encode_release(), which gives back memory above the scratch limit after an unusually large call.
struct RatioSegmentViews {
    ByteSpan seg[kRatioSegmentCount];
};
zb_status ratio_encode_cpu_views(const uint16_t *symbols, uint64_t n, uint32_t alphabet, int threads,
                                 RatioSegmentViews &views, RatioStats *stats, std::string &msg,
                                 const RatioOptions &opt = RatioOptions());
void ratio_encode_release();

// Decodes kRatioSegmentCount segments into symbols[0..n). Validates everything: inconsistent input gives
// ZB_ERR_CORRUPT with a message and never reads outside the segments. `symbols` may be partly written on error.
// allow_runs: the enclosing stream's version has run tokens (v4); a codebook with the run flag is refused otherwise.
// zeros (optional, div_up(n, kRatioZeroUnit) entries): zeros[u] = how many of symbols [u * kRatioZeroUnit, (u + 1) *
// kRatioZeroUnit) are 0, counted while a group of sub-blocks is still in the cache (a caller that needs them, as the
// Lorenzo decoder does for its escaped codes, is spared a pass over the symbols).
constexpr uint64_t kRatioZeroUnit = uint64_t(1) << kRatioMinSubBlockLog2;   // divides every sub-block size
zb_status ratio_decode_cpu(const ByteSpan *segments, uint64_t n, uint32_t alphabet, int threads, uint16_t *symbols,
                           std::string &msg, bool allow_runs = true, uint32_t *zeros = nullptr);

// A ratio stream prepared for decoding sub-blocks in any order on any thread (what ratio_decode_cpu does before its
// parallel loop: the sparse pass into the opening thread's scratch, the sub-blocks' start bits, the code tables).
// Lets a consumer decode a range of sub-blocks and use the symbols while they are in its cache (the Lorenzo + ratio
// decoder's slabs). The bitstream lives in the opening thread's scratch: no other ratio call on that thread while
// the decoder is in use.
class RatioBlockDecoder {
public:
    RatioBlockDecoder();
    ~RatioBlockDecoder();
    RatioBlockDecoder(const RatioBlockDecoder &) = delete;
    RatioBlockDecoder &operator=(const RatioBlockDecoder &) = delete;
    // Validates and prepares everything ratio_decode_cpu validates before decoding (same errors and messages).
    zb_status open(const ByteSpan *segments, uint64_t n, uint32_t alphabet, int threads, std::string &msg,
                   bool allow_runs);
    int sub_block_log2() const;
    uint64_t sub_blocks() const;
    // Decodes sub-blocks [j0, j1) into out (symbol j0 * S + i at out[i]); thread-safe. False when one of them does
    // not decode to its length (the lowest such sub-block is kept for first_bad()); out is then partly garbage.
    bool decode(uint64_t j0, uint64_t j1, uint16_t *out);
    uint64_t first_bad() const;   // ~0 while every decoded sub-block was sound

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// ---- host-side pieces shared with the CUDA backend ---------------------------------------------------------------

// Sub-block and partition counts of n symbols.
inline uint64_t ratio_sub_blocks(uint64_t n, int sub_block_log2) { return div_up(n, 1ull << sub_block_log2); }
inline uint64_t ratio_partitions(uint64_t n, int sub_block_log2) {
    return div_up(ratio_sub_blocks(n, sub_block_log2), kRatioPartition);
}
// Size of segment 1: one u64 offset per partition, one u16 length per sub-block except the last of each partition.
inline uint64_t ratio_metadata_bytes(uint64_t n, int sub_block_log2) {
    const uint64_t b = ratio_sub_blocks(n, sub_block_log2), p = div_up(b, kRatioPartition);
    return 8 * p + 2 * (b - p);
}

// Length-limited code lengths by package-merge (optimal for the limit `max_len`), deterministic: leaves ordered by
// (frequency ascending, symbol descending), a leaf before a package of equal weight. len[s] = 0 for unused symbols.
// One used symbol gets length 1. Returns the symbol s0 that gets the all-zero code (the last leaf: the most frequent
// symbol, the smallest one among equals), or -1 when no symbol is used. Needs 2^max_len >= used symbols.
int ratio_code_lengths(const uint64_t *hist, uint32_t alphabet, int max_len, uint8_t *len);

// The codebook of one stream: what segment 0 holds, and the canonical codes derived from it.
// With run tokens, `alphabet` is the extended alphabet A + kRatioRunTokens (symbols = A): tokens have codes like
// symbols.
struct RatioCodebook {
    uint32_t alphabet = 0;             // code table size: symbols, plus kRatioRunTokens with runs
    uint32_t symbols = 0;              // A, the alphabet of the symbols themselves
    bool runs = false;
    uint32_t run_symbol = kRatioNoRunSymbol;  // z (with runs)
    int sub_block_log2 = kRatioSubBlockLog2;
    uint64_t total_bits = 0;           // length of the Huffman bitstream
    uint32_t s0 = 0;                   // the symbol with the all-zero code
    uint32_t used = 0;                 // symbols with a code
    int min_len = 0, max_len = 0;
    std::vector<uint8_t> len;          // [alphabet], 0 = unused
    std::vector<uint16_t> code;        // [alphabet], canonical code (len bits, first bit = most significant)
    std::vector<uint16_t> perm;        // used symbols in canonical order (length, then (s - s0) mod alphabet)
    uint32_t count[kRatioMaxCodeLength + 1] = {};  // symbols per length
    uint32_t first[kRatioMaxCodeLength + 1] = {};  // first canonical code of each length
    uint32_t base[kRatioMaxCodeLength + 1] = {};   // index in perm of the first symbol of each length
};

// Fills code, perm, count, first, base, used, min_len and max_len from alphabet, s0 and len.
void ratio_assign_codes(RatioCodebook &cb);
// Serializes segment 0.
std::string ratio_write_codebook(const RatioCodebook &cb);
// Parses and validates segment 0 (field ranges, bitmap, Kraft equality, s0) and assigns the codes. alphabet is A;
// allow_runs as for ratio_decode_cpu.
zb_status ratio_read_codebook(ByteSpan seg, uint32_t alphabet, RatioCodebook &cb, std::string &msg,
                              bool allow_runs = true);
// Segment 1 stores a sub-block's bit length len minus this floor (c symbols): c without run tokens (every code has
// at least one bit), 1 with them (a run token stands for up to 4096 symbols).
inline uint64_t ratio_length_floor(bool runs, uint64_t c) { return runs ? 1 : c; }

// Adds to ht the tokens of symbols [i0, i1) (i0 on a sub-block border, sub-blocks of 2^sub_block_log2 symbols):
// with a run symbol z < A (ht: A + kRatioRunTokens counts) what tokenizing every sub-block would count, else (z >= A,
// ht: A counts) the plain histogram. One pass over 64-symbol words without a branch per symbol (counts in four
// tables, the runs of z from bit masks, one step per run). `scratch` holds 4 * A entries. Returns false, with
// bad_symbol set and ht partly counted, when a symbol is not below A (no table is indexed with it).
bool ratio_token_counts(const uint16_t *symbols, uint64_t i0, uint64_t i1, int sub_block_log2, uint32_t A,
                        uint32_t z, uint32_t *scratch, uint64_t *ht, uint32_t &bad_symbol);
// The encoder's choice from the token histogram `ht` (A + kRatioRunTokens counts over all sub-blocks; n symbols;
// run symbol z < A): fills cb (lengths, codes, s0, runs, alphabet, total_bits) for whichever stream is shorter.
// With runs off the counts of the plain symbols are recovered from ht (z's count is n minus the others).
void ratio_choose_codebook(const uint64_t *ht, uint64_t n, uint32_t A, uint32_t z, int sub_block_log2,
                           RatioCodebook &cb);
// Checks the segment lengths of a stream of n symbols against its codebook (segment 0 already read).
zb_status ratio_check_lengths(const ByteSpan *segments, uint64_t n, const RatioCodebook &cb, std::string &msg);

// Table-driven decoding (both backends): lut[i] for the first kRatioLutBits bits i of the remaining bitstream is
// (symbol << 16) | length when a code of at most kRatioLutBits bits starts there, else 0 (longer code or invalid:
// resolved with limit/first/base/perm). limit[l] = (first[l] + count[l]) << (16 - l), the first 16-bit window that
// does not start a code of length <= l.
constexpr int kRatioLutBits = 11;
struct RatioDecodeTables {
    std::vector<uint32_t> lut;                       // [1 << kRatioLutBits]
    uint32_t limit[kRatioMaxCodeLength + 1] = {};
};
void ratio_build_decode_tables(const RatioCodebook &cb, RatioDecodeTables &t);

}  // namespace zb
