// The ratio encoder stage (docs/FORMAT.md, "Ratio encoder (format v2)"): n uint16 symbols of an alphabet of A
// symbols -> canonical Huffman codes (length-limited, built on the host) in independent sub-blocks of S symbols,
// hybrid decode metadata (per partition of 32 sub-blocks one absolute bit offset + 31 lengths), and the zero-block
// sparse pass over the Huffman bitstream. CPU implementation in core/src/ratio_cpu.cpp; the CUDA implementation
// (cuda/ratio_gpu.cu) writes the same bytes and uses the host-side codebook functions declared here.
#pragma once
#include <cstdint>
#include <string>
#include <vector>
#include "zb_format.h"  // ByteSpan, div_up, kBlockBytes, sparse_flag_bytes
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

// ---- the stage ---------------------------------------------------------------------------------------------------

struct RatioStats {
    uint64_t payload_bytes = 0;   // segments 2 + 3: the Huffman bitstream after the sparse pass
    uint64_t metadata_bytes = 0;  // segment 1
    uint64_t codebook_bytes = 0;  // segment 0
    double overhead_f = 0;        // metadata_bytes / payload_bytes (0 when the payload is empty)
    uint64_t huffman_bytes = 0;   // the Huffman bitstream before the sparse pass, ceil(total_bits / 8)
    uint32_t used_symbols = 0;    // symbols with a code
    int max_code_length = 0;      // longest code in use
};

// Test and benchmark knobs of the encoder. Streams of the format are written with the defaults; the sub-block size
// is a stream field (decoders accept 2^10 .. 2^12), so other values give valid streams too.
struct RatioOptions {
    int sub_block_log2 = kRatioSubBlockLog2;
};

// Encodes symbols[0..n) (each < alphabet, 2 <= alphabet <= 65536, n >= 1) into kRatioSegmentCount byte strings,
// appended in order to `segments`. Output bytes do not depend on `threads` (<= 0: resolve_threads()). stats may be
// null. Errors: ZB_ERR_INVALID_ARG (a symbol >= alphabet, bad n / alphabet), ZB_ERR_NOMEM.
zb_status ratio_encode_cpu(const uint16_t *symbols, uint64_t n, uint32_t alphabet, int threads,
                           std::vector<std::string> &segments, RatioStats *stats, std::string &msg,
                           const RatioOptions &opt = RatioOptions());

// Decodes kRatioSegmentCount segments into symbols[0..n). Validates everything: inconsistent input gives
// ZB_ERR_CORRUPT with a message and never reads outside the segments. `symbols` may be partly written on error.
zb_status ratio_decode_cpu(const ByteSpan *segments, uint64_t n, uint32_t alphabet, int threads, uint16_t *symbols,
                           std::string &msg);

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
struct RatioCodebook {
    uint32_t alphabet = 0;
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
// Parses and validates segment 0 (field ranges, bitmap, Kraft equality, s0) and assigns the codes.
zb_status ratio_read_codebook(ByteSpan seg, uint32_t alphabet, RatioCodebook &cb, std::string &msg);
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
