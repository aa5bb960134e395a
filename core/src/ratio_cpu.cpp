// The ratio encoder stage on the CPU (docs/FORMAT.md, "Ratio encoder (format v2)"), and the host-side codebook
// functions the CUDA backend shares: package-merge code lengths, canonical codes, codebook serialization, decode
// tables.
//
// Encode: per-thread histograms over contiguous ranges of sub-blocks (their code-length sums give each range's
// starting bit, so the bitstream is written in one pass), canonical Huffman codes written MSB-first in 32-bit
// big-endian words, the two words a range shares with its neighbours merged afterwards, then the zero-block sparse
// pass (sparse_encode_parallel) in slices of 64 KiB. Decode: sparse_decode per slice, metadata -> start bit of every
// sub-block (validated), then OpenMP over sub-blocks with an 11-bit lookup table (three symbols per 64-bit load).
#include <omp.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <new>
#include "zb_bytes.h"
#include "zb_cpu.h"
#include "zb_lorenzo_ratio.h"
#include "zb_parallel_tasks.h"
#include "zb_ratio.h"
#include "zb_scratch.h"
#include "zb_simd.h"
#include "zb_stage_clock.h"

namespace zb {
namespace {

zb_status fail(std::string &msg, zb_status s, const std::string &what) {
    msg = what;
    return s;
}

inline uint64_t load_be64(const uint8_t *p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return __builtin_bswap64(v);
}
inline void store_be32(uint8_t *p, uint32_t v) {
    v = __builtin_bswap32(v);
    std::memcpy(p, &v, 4);
}

struct RatioScratch {
    ScratchArray<uint8_t> bits;  // the Huffman bitstream (encode: words; decode: expanded bytes + padding)
    // The encoder's segments behind RatioSegmentViews: codebook, metadata, sparse flags and non-zero blocks.
    std::string codebook;
    ScratchArray<uint8_t> meta, flags, blocks;
    void trim() { bits.trim(kScratchKeepBytes); }
    void trim_segments() {
        meta.trim(kScratchKeepBytes);
        flags.trim(kScratchKeepBytes);
        blocks.trim(kScratchKeepBytes);
    }
};
thread_local RatioScratch t_ratio;

// Parts of the symbols per encoder thread, taken in turn by its threads: more parts balance slow threads and costly
// parts more finely (each part has a histogram of A + 23 counters).
constexpr uint64_t kRatioPartsPerThread = 8;

// Bytes a decoder may read past the start of the last sub-block's bits: S symbols of at most 16 bits plus one
// 8-byte load. The expanded bitstream is followed by this many zero bytes.
inline uint64_t decode_padding(int sub_block_log2) { return (2ull << sub_block_log2) + 16; }

}  // namespace

// ---- code lengths (package-merge) --------------------------------------------------------------------------------

int ratio_code_lengths(const uint64_t *hist, uint32_t alphabet, int max_len, uint8_t *len) {
    std::memset(len, 0, alphabet);
    std::vector<uint32_t> leaf;  // used symbols
    for (uint32_t s = 0; s < alphabet; ++s)
        if (hist[s]) leaf.push_back(s);
    const size_t m = leaf.size();
    if (m == 0) return -1;
    // (frequency ascending, symbol descending): the last leaf is the most frequent symbol, the smallest among equals.
    std::sort(leaf.begin(), leaf.end(), [&](uint32_t a, uint32_t b) {
        return hist[a] != hist[b] ? hist[a] < hist[b] : a > b;
    });
    const int s0 = (int)leaf.back();
    if (m == 1) {
        len[s0] = 1;
        return s0;
    }
    std::vector<uint64_t> w(m);
    for (size_t i = 0; i < m; ++i) w[i] = hist[leaf[i]];
    // List j (1..max_len) = merge of the leaves with the packages (adjacent pairs) of list j+1; list max_len holds
    // the leaves alone. is_leaf[j - 1] records the merged order of list j.
    std::vector<std::vector<uint8_t>> is_leaf((size_t)max_len);
    is_leaf[(size_t)max_len - 1].assign(m, 1);
    std::vector<uint64_t> prev = w, cur, pk;
    for (int j = max_len - 1; j >= 1; --j) {
        pk.resize(prev.size() / 2);
        for (size_t i = 0; i < pk.size(); ++i) pk[i] = prev[2 * i] + prev[2 * i + 1];
        cur.clear();
        std::vector<uint8_t> &fl = is_leaf[(size_t)j - 1];
        fl.clear();
        size_t a = 0, b = 0;
        while (a < m || b < pk.size()) {
            if (b == pk.size() || (a < m && w[a] <= pk[b])) {
                cur.push_back(w[a++]);
                fl.push_back(1);
            } else {
                cur.push_back(pk[b++]);
                fl.push_back(0);
            }
        }
        prev.swap(cur);
    }
    // Select the first 2m - 2 items of list 1; the packages among the first c items of list j select the first
    // 2 * packages items of list j + 1. Every selected leaf adds one bit to its symbol's code length.
    std::vector<uint8_t> depth(m, 0);
    uint64_t c = 2 * (uint64_t)m - 2;
    for (int j = 1; j <= max_len && c; ++j) {
        const std::vector<uint8_t> &fl = is_leaf[(size_t)j - 1];
        if (c > fl.size()) return -2;  // the limit is too small for m symbols (callers ensure it is not)
        uint64_t leaves = 0;
        for (uint64_t i = 0; i < c; ++i) leaves += fl[(size_t)i];
        for (uint64_t i = 0; i < leaves; ++i) ++depth[(size_t)i];
        c = 2 * (c - leaves);
    }
    for (size_t i = 0; i < m; ++i) len[leaf[i]] = depth[i];
    return s0;
}

// ---- canonical codes and the codebook segment ---------------------------------------------------------------------

void ratio_assign_codes(RatioCodebook &cb) {
    const uint32_t A = cb.alphabet;
    cb.code.assign(A, 0);
    std::memset(cb.count, 0, sizeof cb.count);
    cb.used = 0;
    cb.min_len = 0;
    cb.max_len = 0;
    for (uint32_t s = 0; s < A; ++s)
        if (cb.len[s]) {
            ++cb.count[cb.len[s]];
            ++cb.used;
            if (!cb.min_len || cb.len[s] < cb.min_len) cb.min_len = cb.len[s];
            if (cb.len[s] > cb.max_len) cb.max_len = cb.len[s];
        }
    uint32_t code = 0, idx = 0;
    cb.first[0] = 0;
    cb.base[0] = 0;
    for (int l = 1; l <= kRatioMaxCodeLength; ++l) {
        code = (code + cb.count[l - 1]) << 1;
        cb.first[l] = code;
        idx += cb.count[l - 1];
        cb.base[l] = idx;
    }
    cb.perm.assign(cb.used, 0);
    uint32_t next[kRatioMaxCodeLength + 1] = {};
    for (uint32_t k = 0; k < A; ++k) {
        const uint32_t s = (cb.s0 + k) % A;
        const int l = cb.len[s];
        if (!l) continue;
        cb.perm[cb.base[l] + next[l]] = (uint16_t)s;
        cb.code[s] = (uint16_t)(cb.first[l] + next[l]);
        ++next[l];
    }
}

std::string ratio_write_codebook(const RatioCodebook &cb) {
    // Main part: the symbols below A (with runs possibly none: then m = lo = hi = 0).
    const uint32_t A = cb.runs ? cb.symbols : cb.alphabet;
    uint32_t lo = 0, hi = 0, m = 0;
    for (uint32_t s = 0; s < A; ++s)
        if (cb.len[s]) {
            if (!m) lo = s;
            hi = s;
            ++m;
        }
    const uint32_t span = m ? hi - lo + 1 : 0;
    const uint64_t bitmap = m < span ? div_up(span, 8) : 0;
    uint32_t token_mask = 0, tokens = 0;
    if (cb.runs)
        for (uint32_t t = 0; t < kRatioRunTokens; ++t)
            if (cb.len[A + t]) {
                token_mask |= 1u << t;
                ++tokens;
            }
    const uint64_t run_part = cb.runs ? 6 + div_up(tokens, 2) : 0;
    std::string out((size_t)(kRatioCodebookFixedBytes + bitmap + div_up(m, 2) + run_part), '\0');
    uint8_t *p = reinterpret_cast<uint8_t *>(&out[0]);
    put_u8(p, (uint8_t)(cb.sub_block_log2 | (cb.runs ? kRatioRunFlag : 0)));
    put_u64(p + 1, cb.total_bits);
    put_u32(p + 9, m);
    put_u16(p + 13, (uint16_t)lo);
    put_u16(p + 15, (uint16_t)hi);
    put_u16(p + 17, (uint16_t)cb.s0);
    uint8_t *bm = p + kRatioCodebookFixedBytes, *nib = bm + bitmap;
    uint32_t k = 0;
    for (uint32_t i = 0; i < span; ++i) {
        const int l = cb.len[lo + i];
        if (!l) continue;
        if (bitmap) bm[i >> 3] |= (uint8_t)(1u << (i & 7));
        nib[k >> 1] |= (uint8_t)((l - 1) << (4 * (k & 1)));
        ++k;
    }
    if (cb.runs) {  // u16 run symbol, u32 mask of the used tokens, their (length - 1) nibbles
        uint8_t *r = nib + div_up(m, 2);
        put_u16(r, (uint16_t)cb.run_symbol);
        put_u32(r + 2, token_mask);
        k = 0;
        for (uint32_t t = 0; t < kRatioRunTokens; ++t)
            if (cb.len[A + t]) {
                r[6 + (k >> 1)] |= (uint8_t)((cb.len[A + t] - 1) << (4 * (k & 1)));
                ++k;
            }
    }
    return out;
}

zb_status ratio_read_codebook(ByteSpan seg, uint32_t alphabet, RatioCodebook &cb, std::string &msg, bool allow_runs) {
    if (alphabet < 2 || alphabet > kRatioMaxAlphabet) return fail(msg, ZB_ERR_INVALID_ARG, "ratio: bad alphabet size");
    if (!seg.data || seg.size < kRatioCodebookFixedBytes)
        return fail(msg, ZB_ERR_CORRUPT, "ratio codebook: segment too short");
    const uint8_t *p = seg.data;
    cb.runs = (p[0] & kRatioRunFlag) != 0;
    cb.sub_block_log2 = p[0] & (kRatioRunFlag - 1);
    cb.symbols = alphabet;
    cb.alphabet = cb.runs ? alphabet + kRatioRunTokens : alphabet;
    cb.run_symbol = kRatioNoRunSymbol;
    cb.total_bits = get_u64(p + 1);
    const uint32_t m = get_u32(p + 9), lo = get_u16(p + 13), hi = get_u16(p + 15);
    cb.s0 = get_u16(p + 17);
    if (cb.runs && !allow_runs)
        return fail(msg, ZB_ERR_CORRUPT, "ratio codebook: run tokens in a stream of a format version before 4");
    if (cb.runs && alphabet > kRatioRunMaxAlphabet)
        return fail(msg, ZB_ERR_CORRUPT, "ratio codebook: run tokens with an alphabet too large for them");
    if (cb.sub_block_log2 < kRatioMinSubBlockLog2 || cb.sub_block_log2 > kRatioMaxSubBlockLog2)
        return fail(msg, ZB_ERR_CORRUPT, "ratio codebook: bad sub-block size");
    // Main part: with runs it may be empty (m = lo = hi = 0).
    const bool empty = cb.runs && m == 0;
    if (empty ? (lo || hi) : (lo > hi || hi >= alphabet))
        return fail(msg, ZB_ERR_CORRUPT, "ratio codebook: symbol range outside the alphabet");
    const uint32_t span = empty ? 0 : hi - lo + 1;
    if (!empty && (m < 1 || m > span)) return fail(msg, ZB_ERR_CORRUPT, "ratio codebook: bad number of used symbols");
    const uint64_t bitmap = m < span ? div_up(span, 8) : 0;
    const uint64_t main_bytes = kRatioCodebookFixedBytes + bitmap + div_up(m, 2);
    if (cb.runs ? seg.size < main_bytes + 6 : seg.size != main_bytes)
        return fail(msg, ZB_ERR_CORRUPT, "ratio codebook: segment length does not match its fields");
    const uint8_t *bm = p + kRatioCodebookFixedBytes, *nib = bm + bitmap;
    if (bitmap) {
        const uint64_t ones = count_ones(bm, bitmap);
        const bool ends = (bm[0] & 1) && ((bm[(span - 1) >> 3] >> ((span - 1) & 7)) & 1);
        const bool pad = (span & 7) && (bm[bitmap - 1] >> (span & 7));
        if (ones != m || !ends || pad) return fail(msg, ZB_ERR_CORRUPT, "ratio codebook: bad symbol bitmap");
    }
    if ((m & 1) && (nib[m >> 1] >> 4)) return fail(msg, ZB_ERR_CORRUPT, "ratio codebook: non-zero padding nibble");
    cb.len.assign(cb.alphabet, 0);
    uint32_t k = 0;
    for (uint32_t i = 0; i < span; ++i) {
        if (bitmap && !((bm[i >> 3] >> (i & 7)) & 1)) continue;
        cb.len[lo + i] = (uint8_t)(((nib[k >> 1] >> (4 * (k & 1))) & 15) + 1);
        ++k;
    }
    uint32_t used = m;
    if (cb.runs) {
        const uint8_t *r = nib + div_up(m, 2);
        cb.run_symbol = get_u16(r);
        const uint32_t mask = get_u32(r + 2), tokens = (uint32_t)__builtin_popcount(mask);
        if (cb.run_symbol >= alphabet) return fail(msg, ZB_ERR_CORRUPT, "ratio codebook: run symbol outside the alphabet");
        if (mask >> kRatioRunTokens) return fail(msg, ZB_ERR_CORRUPT, "ratio codebook: unknown run tokens");
        if (seg.size != main_bytes + 6 + div_up(tokens, 2))
            return fail(msg, ZB_ERR_CORRUPT, "ratio codebook: segment length does not match its fields");
        if ((tokens & 1) && (r[6 + (tokens >> 1)] >> 4))
            return fail(msg, ZB_ERR_CORRUPT, "ratio codebook: non-zero padding nibble");
        k = 0;
        for (uint32_t t = 0; t < kRatioRunTokens; ++t)
            if ((mask >> t) & 1) {
                cb.len[alphabet + t] = (uint8_t)(((r[6 + (k >> 1)] >> (4 * (k & 1))) & 15) + 1);
                ++k;
            }
        used += tokens;
        if (!used) return fail(msg, ZB_ERR_CORRUPT, "ratio codebook: no used symbols");
    }
    if (cb.s0 >= cb.alphabet || !cb.len[cb.s0])
        return fail(msg, ZB_ERR_CORRUPT, "ratio codebook: the zero-code symbol is not used");
    if (used == 1) {
        if (cb.len[cb.s0] != 1) return fail(msg, ZB_ERR_CORRUPT, "ratio codebook: a single symbol must have length 1");
    } else {
        uint64_t kraft = 0;
        for (uint32_t s = 0; s < cb.alphabet; ++s)
            if (cb.len[s]) kraft += 1ull << (kRatioMaxCodeLength - cb.len[s]);
        if (kraft != 1ull << kRatioMaxCodeLength)
            return fail(msg, ZB_ERR_CORRUPT, "ratio codebook: code lengths do not form a complete prefix code");
    }
    ratio_assign_codes(cb);
    if (cb.len[cb.s0] != cb.min_len)
        return fail(msg, ZB_ERR_CORRUPT, "ratio codebook: the zero-code symbol does not have the shortest code");
    return ZB_OK;
}

zb_status ratio_check_lengths(const ByteSpan *segments, uint64_t n, const RatioCodebook &cb, std::string &msg) {
    // Every sub-block has at least one code (a run token may stand for all of its symbols).
    const uint64_t codes_min = cb.runs ? ratio_sub_blocks(n, cb.sub_block_log2) : n;
    const uint64_t minb = codes_min * (uint64_t)cb.min_len, maxb = n * (uint64_t)cb.max_len;
    if (cb.total_bits < minb || cb.total_bits > maxb)
        return fail(msg, ZB_ERR_CORRUPT, "ratio codebook: bitstream length impossible for the code lengths");
    if (segments[kRatioSegMetadata].size != ratio_metadata_bytes(n, cb.sub_block_log2))
        return fail(msg, ZB_ERR_CORRUPT, "ratio metadata: segment length does not match the symbol count");
    const uint64_t bytes = div_up(cb.total_bits, 8);
    if (segments[kRatioSegFlags].size != sparse_flag_bytes(bytes))
        return fail(msg, ZB_ERR_CORRUPT, "ratio bitstream: flag segment length does not match the bitstream length");
    if (segments[kRatioSegBlocks].size % kBlockBytes ||
        segments[kRatioSegBlocks].size / kBlockBytes > div_up(bytes, kBlockBytes))
        return fail(msg, ZB_ERR_CORRUPT, "ratio bitstream: bad block segment length");
    for (int k = kRatioSegMetadata; k < kRatioSegmentCount; ++k)
        if (segments[k].size && !segments[k].data) return fail(msg, ZB_ERR_INVALID_ARG, "ratio: null segment");
    return ZB_OK;
}

void ratio_build_decode_tables(const RatioCodebook &cb, RatioDecodeTables &t) {
    constexpr int K = kRatioLutBits;
    t.lut.assign(1u << K, 0);
    for (uint32_t s = 0; s < cb.alphabet; ++s) {
        const int l = cb.len[s];
        if (!l || l > K) continue;
        const uint32_t lo = (uint32_t)cb.code[s] << (K - l), hi = ((uint32_t)cb.code[s] + 1) << (K - l);
        for (uint32_t i = lo; i < hi; ++i) t.lut[i] = (s << 16) | (uint32_t)l;
    }
    for (int l = 0; l <= kRatioMaxCodeLength; ++l)
        t.limit[l] = (cb.first[l] + cb.count[l]) << (kRatioMaxCodeLength - l);
}

// ---- run tokens and the encoder's choice --------------------------------------------------------------------------

namespace {

// Bit k set where s[k] differs from z, for 64 symbols (SSE2: eight compares, packed to bytes, four movemasks).
inline uint64_t differ_mask64(const uint16_t *s, uint32_t z) {
    uint64_t m = 0;
#if defined(__SSE2__)
    const __m128i zv = _mm_set1_epi16((short)(uint16_t)z);
    for (int k = 0; k < 4; ++k) {
        const __m128i a = _mm_cmpeq_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(s + 16 * k)), zv);
        const __m128i b = _mm_cmpeq_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(s + 16 * k + 8)), zv);
        m |= (uint64_t)(~(uint32_t)_mm_movemask_epi8(_mm_packs_epi16(a, b)) & 0xFFFFu) << (16 * k);
    }
#else
    for (int k = 0; k < 64; ++k) m |= (uint64_t)(s[k] != z) << k;
#endif
    return m;
}

// The symbols s[0..cnt) of one sub-block as the ratio encoder's tokens (z < 65536, the run symbol): for each symbol
// other than z, run_then(L, s) with the number L >= 0 of z's since the one before it (or the sub-block's start);
// at the end run_of(L) for the last z's if there are any. Each maximal run of z is one token of the extended
// alphabet above A (ratio_emit_run), which the callbacks write before the symbol; L = 0 writes nothing, without a
// branch on it. 64 symbols at a time: a mask of the symbols other than z, whose set bits are visited in order, the
// z's between them counted from the gaps; at high ratios most symbols are z, and a loop with a branch per symbol
// was the encoder's largest cost.
template <typename RunThen, typename RunOf>
inline void tokenize(const uint16_t *s, uint64_t cnt, uint32_t z, RunThen &&run_then, RunOf &&run_of) {
    uint64_t run = 0;   // z's since the last other symbol
    for (uint64_t base = 0; base < cnt; base += 64) {
        const uint32_t len = (uint32_t)std::min<uint64_t>(64, cnt - base);
        uint64_t m = 0;
        if (len == 64) {
            m = differ_mask64(s + base, z);
        } else {
            for (uint32_t k = 0; k < len; ++k) m |= (uint64_t)(s[base + k] != z) << k;
        }
        uint32_t next = 0;   // window position after the last symbol handled
        for (; m; m &= m - 1) {
            const uint32_t p = (uint32_t)__builtin_ctzll(m);
            run_then((uint32_t)(run + p - next), s[base + p]);
            run = 0;
            next = p + 1;
        }
        run += len - next;
    }
    if (run) run_of((uint32_t)run);
}

// Counts of the plain symbols from token counts over `count` symbols: z's count is what the others leave.
void plain_counts(const uint64_t *ht, uint64_t count, uint32_t A, uint32_t z, uint64_t *hp) {
    uint64_t others = 0;
    for (uint32_t s = 0; s < A; ++s) {
        hp[s] = ht[s];
        if (s != z) others += ht[s];
    }
    if (z < A) hp[z] = count - others;
}

// Bit k set where s[k] == z, for k < cnt <= 64.
inline uint64_t equal_mask(const uint16_t *s, uint64_t cnt, uint32_t z) {
#if defined(__SSE2__)
    if (cnt == 64) {
        const __m128i zv = _mm_set1_epi16((short)(uint16_t)z);
        uint64_t m = 0;
        for (int k = 0; k < 4; ++k) {
            const __m128i a = _mm_cmpeq_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(s + 16 * k)), zv);
            const __m128i b = _mm_cmpeq_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(s + 16 * k + 8)), zv);
            m |= (uint64_t)(uint32_t)_mm_movemask_epi8(_mm_packs_epi16(a, b)) << (16 * k);
        }
        return m;
    }
#endif
    uint64_t m = 0;
    for (uint64_t k = 0; k < cnt; ++k) m |= (uint64_t)(s[k] == z) << k;
    return m;
}

}  // namespace

bool ratio_token_counts(const uint16_t *symbols, uint64_t i0, uint64_t i1, int sub_block_log2, uint32_t A,
                        uint32_t z, uint32_t *scratch, uint64_t *ht, uint32_t &bad_symbol) {
    const bool runs = z < A;
    const uint64_t z_before = runs ? ht[z] : 0;
    // Plain counts in four interleaved u32 tables (consecutive symbols often repeat: one table would wait on its own
    // increments), added to ht before 2^30 symbols could overflow them.
    uint32_t *h0 = scratch, *h1 = h0 + A, *h2 = h1 + A, *h3 = h2 + A;
    std::fill(scratch, scratch + 4 * (size_t)A, 0u);
    auto flush = [&] {
        for (uint32_t v = 0; v < A; ++v) ht[v] += (uint64_t)h0[v] + h1[v] + h2[v] + h3[v];
        std::fill(scratch, scratch + 4 * (size_t)A, 0u);
    };
    // z's plain count is replaced by the runs: runs of up to 64 counted by length in four interleaved tables
    // (consecutive runs often have the same length) and turned into tokens at the end, longer ones as tokens.
    uint64_t by_length[4][65] = {};
    unsigned k = 0;
    auto emit_run = [&](uint64_t run) {
        if (run <= 64) ++by_length[k++ & 3][run];
        else ++ht[A + ratio_run_token((uint32_t)run).offset];
    };
    const uint64_t S = 1ull << sub_block_log2;
    uint64_t since_flush = 0;
    for (uint64_t b0 = i0; b0 < i1; b0 += S) {   // runs end at sub-block borders
        const uint64_t b1 = std::min(i1, b0 + S);
        if (since_flush + S > (1ull << 30)) {
            flush();
            since_flush = 0;
        }
        since_flush += S;
        uint64_t run = 0;   // z's so far in the open run
        for (uint64_t w0 = b0; w0 < b1; w0 += 64) {
            // One 64-symbol word, read from memory once: checked against the alphabet (before any count indexes a
            // table with it), counted, and its runs of z found.
            const uint16_t *w = symbols + w0;
            const uint64_t cnt = std::min<uint64_t>(64, b1 - w0);
            uint32_t over = 0;
            for (uint64_t j = 0; j < cnt; ++j) over |= w[j] >= A ? 1u : 0u;
            if (over) {
                for (uint64_t j = 0; j < cnt; ++j)
                    if (w[j] >= A) bad_symbol = w[j];
                return false;
            }
            uint64_t j = 0;
            for (; j + 4 <= cnt; j += 4) {
                ++h0[w[j]];
                ++h1[w[j + 1]];
                ++h2[w[j + 2]];
                ++h3[w[j + 3]];
            }
            for (; j < cnt; ++j) ++h0[w[j]];
            if (!runs) continue;
            const uint64_t m = equal_mask(w, cnt, z);
            if (m == 0) {
                if (run) emit_run(run);
                run = 0;
                continue;
            }
            // Alternately: the ones at `pos` extend the open run; a zero ends it; skip to the next one.
            uint64_t x = m;
            int pos = 0;
            for (;;) {
                const int ones = ~x == 0 ? 64 - pos : __builtin_ctzll(~x);
                run += (uint64_t)ones;
                pos += ones;
                if (pos >= 64) break;   // the run goes on into the next word
                if (run) emit_run(run);
                run = 0;
                x = m >> pos;
                if (x == 0) break;
                const int zeros = __builtin_ctzll(x);
                pos += zeros;
                x >>= zeros;
            }
        }
        if (run) emit_run(run);
    }
    flush();
    if (runs) {
        ht[z] = z_before;
        for (uint32_t L = 1; L <= 64; ++L)
            ht[L == 1 ? z : A + ratio_run_token(L).offset] +=
                by_length[0][L] + by_length[1][L] + by_length[2][L] + by_length[3][L];
    }
    return true;
}

void ratio_choose_codebook(const uint64_t *ht, uint64_t n, uint32_t A, uint32_t z, int sub_block_log2,
                           RatioCodebook &cb) {
    auto lengths = [&](const uint64_t *h, uint32_t alphabet, RatioCodebook &c) {
        c.alphabet = alphabet;
        c.symbols = A;
        c.sub_block_log2 = sub_block_log2;
        c.len.assign(alphabet, 0);
        c.s0 = (uint32_t)ratio_code_lengths(h, alphabet, kRatioMaxCodeLength, c.len.data());  // n >= 1: a symbol
        c.total_bits = 0;
        for (uint32_t s = 0; s < alphabet; ++s) c.total_bits += h[s] * c.len[s];
    };
    std::vector<uint64_t> hp(A);
    plain_counts(ht, n, A, z, hp.data());
    RatioCodebook plain;
    lengths(hp.data(), A, plain);
    if (z < A) {
        RatioCodebook run;
        lengths(ht, A + kRatioRunTokens, run);
        for (uint32_t t = 0; t < kRatioRunTokens; ++t) run.total_bits += ht[A + t] * (uint64_t)ratio_run_extra_bits(t);
        if (run.total_bits < plain.total_bits) {
            run.runs = true;
            run.run_symbol = z;
            ratio_assign_codes(run);
            cb = std::move(run);
            return;
        }
    }
    ratio_assign_codes(plain);
    cb = std::move(plain);
}

// ---- encoder -----------------------------------------------------------------------------------------------------

void ratio_encode_release() { t_ratio.trim_segments(); }

zb_status ratio_encode_cpu(const uint16_t *symbols, uint64_t n, uint32_t alphabet, int threads,
                           std::vector<std::string> &segments, RatioStats *stats, std::string &msg,
                           const RatioOptions &opt) {
    RatioSegmentViews v;
    const zb_status st = ratio_encode_cpu_views(symbols, n, alphabet, threads, v, stats, msg, opt);
    if (st == ZB_OK) {
        try {
            std::vector<std::string> out;
            for (const ByteSpan &s : v.seg) out.emplace_back(reinterpret_cast<const char *>(s.data), (size_t)s.size);
            for (std::string &o : out) segments.emplace_back(std::move(o));
        } catch (const std::bad_alloc &) {
            ratio_encode_release();
            return fail(msg, ZB_ERR_NOMEM, "ratio: out of memory");
        }
    }
    ratio_encode_release();
    return st;
}

zb_status ratio_encode_cpu_views(const uint16_t *symbols, uint64_t n, uint32_t alphabet, int threads,
                                 RatioSegmentViews &views, RatioStats *stats, std::string &msg,
                                 const RatioOptions &opt) {
    if (alphabet < 2 || alphabet > kRatioMaxAlphabet)
        return fail(msg, ZB_ERR_INVALID_ARG, "ratio: alphabet size must be 2..65536");
    if (n == 0 || !symbols) return fail(msg, ZB_ERR_INVALID_ARG, "ratio: no symbols");
    if (opt.sub_block_log2 < kRatioMinSubBlockLog2 || opt.sub_block_log2 > kRatioMaxSubBlockLog2)
        return fail(msg, ZB_ERR_INVALID_ARG, "ratio: bad sub-block size");
    try {
        const int lg = opt.sub_block_log2;
        const uint64_t S = 1ull << lg, B = ratio_sub_blocks(n, lg), P = div_up(B, kRatioPartition);
        int T = resolve_threads(threads, n);
        if ((uint64_t)T > B) T = (int)B;
        // The symbols are split into M parts of about equal sub-block counts (contiguous), kRatioPartsPerThread per
        // thread, part p holding sub-blocks [pb[p], pb[p+1]). Both passes over the symbols take the parts in turn
        // (parallel_tasks), a thread the next part when it is done with one: each part has its own histogram, from
        // which its first bit in the bitstream follows, so any thread can write any part. Fixed ranges per thread
        // scaled 7.2x on 16 cores (device, TREFHT interp/ratio 256 MB): at the same bits, threads took 7 to 21 ms
        // for their range, a different thread slow in each call (the machine's cores are virtual), and interp codes
        // put the coarse levels, 2-3x the bits per symbol, first.
        const uint64_t M = T == 1 ? 1 : std::min<uint64_t>(B, (uint64_t)T * kRatioPartsPerThread);
        std::vector<uint64_t> pb((size_t)M + 1), part_symbols((size_t)M);
        for (uint64_t p = 0; p <= M; ++p) pb[(size_t)p] = B * p / M;
        for (uint64_t p = 0; p < M; ++p)
            part_symbols[(size_t)p] = std::min(n, pb[(size_t)p + 1] * S) - pb[(size_t)p] * S;
        const size_t A = alphabet;
        // Run tokens are an option when the caller names a run symbol; the histograms then count tokens.
        const uint32_t z = opt.run_symbol < alphabet && alphabet <= kRatioRunMaxAlphabet ? opt.run_symbol
                                                                                         : kRatioNoRunSymbol;
        const size_t AT = z < alphabet ? A + kRatioRunTokens : A;

        // 1. per-part histograms (of tokens when runs are possible, else of symbols: ratio_token_counts)
        std::vector<uint64_t> hist_p((size_t)M * AT, 0);
        std::vector<uint32_t> bad_symbol((size_t)M, 0);   // an out-of-alphabet symbol of each part, if any
        std::vector<uint8_t> counted((size_t)M, 0);
        std::vector<uint32_t> hist_scratch((size_t)T * 4 * A);  // per thread; none inside parallel regions
        parallel_tasks((int64_t)M, T, [&](int64_t p, int thread) {
            const uint64_t i0 = pb[(size_t)p] * S;
            counted[(size_t)p] = ratio_token_counts(symbols, i0, i0 + part_symbols[(size_t)p], lg, alphabet, z,
                                                    &hist_scratch[(size_t)thread * 4 * A], &hist_p[(size_t)p * AT],
                                                    bad_symbol[(size_t)p]);
        });
        for (uint64_t p = 0; p < M; ++p)
            if (!counted[(size_t)p])
                return fail(msg, ZB_ERR_INVALID_ARG,
                            "ratio: symbol " + std::to_string(bad_symbol[(size_t)p]) + " outside the alphabet of " +
                                std::to_string(alphabet));
        std::vector<uint64_t> hist(AT, 0);
        for (uint64_t p = 0; p < M; ++p)
            for (size_t s = 0; s < AT; ++s) hist[s] += hist_p[(size_t)p * AT + s];
        stage_mark("histogram");

        // 2. codebook
        RatioCodebook cb;
        ratio_choose_codebook(hist.data(), n, alphabet, z, lg, cb);
        const bool runs = cb.runs;
        std::vector<uint32_t> enc(cb.alphabet);
        for (size_t s = 0; s < cb.alphabet; ++s) enc[s] = ((uint32_t)cb.code[s] << 16) | cb.len[s];
        // Each part's bit count from its histogram, over the entries that occur (a few hundred of A + 23; all of
        // them for each of 16 x 8 parts were a serial 0.2 ms of a 5 ms 4 MB call). A plain stream codes z as a
        // symbol: its count in a part is the part's symbols less the others (as plain_counts).
        const bool z_from_others = !runs && z < alphabet;
        std::vector<uint32_t> used, used_bits;
        for (size_t s = 0; s < (runs ? AT : A); ++s)
            if (hist[s] && !(z_from_others && s == z)) {
                used.push_back((uint32_t)s);
                used_bits.push_back(cb.len[s] + (s < A ? 0u : (uint32_t)ratio_run_extra_bits((uint32_t)(s - A))));
            }
        std::vector<uint64_t> part_bits((size_t)M);
        for (uint64_t p = 0; p < M; ++p) {
            const uint64_t *ht = &hist_p[(size_t)p * AT];
            uint64_t b = 0, others = 0;
            for (size_t k = 0; k < used.size(); ++k) {
                b += ht[used[k]] * used_bits[k];
                others += ht[used[k]];
            }
            if (z_from_others) b += (part_symbols[(size_t)p] - others) * cb.len[z];
            part_bits[(size_t)p] = b;
        }
        std::vector<uint64_t> pstart((size_t)M + 1, 0);   // part p's bits start at pstart[p]
        for (uint64_t p = 0; p < M; ++p) pstart[(size_t)p + 1] = pstart[(size_t)p] + part_bits[(size_t)p];
        const uint64_t total = pstart[(size_t)M];
        if (total != cb.total_bits) return fail(msg, ZB_ERR_INTERNAL, "ratio: bit counts disagree");
        const uint64_t bytes = div_up(total, 8), nwords = div_up(total, 32);
        // The bits of a run of L < kShortRuns copies of z, as ratio_emit_run codes it (L = 0: no bits).
        struct Piece {
            uint32_t bits, len;
        };
        constexpr uint32_t kShortRuns = kRatioRunExactMax + 1;
        Piece short_runs[kShortRuns] = {};
        if (runs)
            for (uint32_t L = 1; L < kShortRuns; ++L)   // one item, no extra bits
                ratio_emit_run(L, alphabet, z, [&](uint32_t v, int, uint32_t) {
                    short_runs[L] = {enc[v] >> 16, enc[v] & 31};
                });
        stage_mark("codebook");

        // 3. the bitstream: complete words are stored by their part; a part's last partial word goes to a slot and
        // is OR-ed in afterwards, into words zeroed beforehand (the shared boundary words).
        uint8_t *bits = t_ratio.bits.get((size_t)(4 * nwords + 16));
        for (uint64_t p = 1; p <= M; ++p)
            if (pstart[(size_t)p] & 31) std::memset(bits + 4 * (pstart[(size_t)p] >> 5), 0, 4);
        std::vector<uint32_t> sub_bits((size_t)B);
        std::vector<uint64_t> slot_idx((size_t)M, ~0ull);
        std::vector<uint32_t> slot_val((size_t)M, 0);
        parallel_tasks((int64_t)M, T, [&](int64_t part, int) {
            const size_t pi = (size_t)part;
            const uint64_t pos0 = pstart[pi];
            uint8_t *wp = bits + 4 * (pos0 >> 5);
            int nacc = (int)(pos0 & 31);
            uint64_t acc = 0, prev = pos0;
            const uint32_t *e = enc.data();
            // l <= 32 bits (two codes of <= 16, or a run token's code and its <= 12 extra bits): nacc < 32 before,
            // < 64 after, so at most one full word, which is stored whether or not it is full: to `spill` when it
            // is not (a select instead of a branch that went one way or the other every few codes, unpredictably).
            uint8_t spill[4];
            auto put_bits = [&](uint64_t b, int l) {
                acc = (acc << l) | b;
                nacc += l;
                const int full = nacc >= 32;
                nacc -= 32 * full;
                store_be32(full ? wp : spill, (uint32_t)(acc >> nacc));
                wp += 4 * full;
            };
            auto put_symbol = [&](uint32_t v) { put_bits(e[v] >> 16, (int)(e[v] & 31)); };
            auto put_long_run = [&](uint32_t L) {   // L >= kShortRuns: a class token and its extra bits
                ratio_emit_run(L, alphabet, z, [&](uint32_t v, int xb, uint32_t extra) {
                    put_bits(((uint64_t)(e[v] >> 16) << xb) | extra, (int)(e[v] & 31) + xb);
                });
            };
            // A short run's code and the symbol's (<= 16 bits each) in one put_bits.
            auto put_run_then = [&](uint32_t L, uint32_t v) {
                if (L < kShortRuns) {
                    const uint32_t c = e[v], l = c & 31;
                    put_bits(((uint64_t)short_runs[L].bits << l) | (c >> 16), (int)(short_runs[L].len + l));
                } else {
                    put_long_run(L);
                    put_symbol(v);
                }
            };
            auto put_run = [&](uint32_t L) {
                if (L < kShortRuns) put_bits(short_runs[L].bits, (int)short_runs[L].len);
                else put_long_run(L);
            };
            for (uint64_t j = pb[pi]; j < pb[pi + 1]; ++j) {
                const uint16_t *s = symbols + j * S;
                const uint64_t cnt = std::min(S, n - j * S);
                if (runs) {
                    // One thread, 64 MB TREFHT, in-process A/Bs: against a branch on each run and after each
                    // token, the bitstream stage 1.24x (interp/ratio) and 1.37x (lorenzo/ratio) faster at rel
                    // 1e-2; a short run and its symbol in one put_bits instead of two, a further 1.24x and 1.32x
                    // there and 1.43x for interp/ratio at rel 1e-3.
                    tokenize(s, cnt, z, put_run_then, put_run);
                } else {
                    // Two codes per put_bits (one thread, 64 MB TREFHT lorenzo/ratio rel 1e-3: the stage's median
                    // 1.10x and 1.50x faster than a branch after each code, in two in-process A/B runs).
                    uint64_t i = 0;
                    for (; i + 2 <= cnt; i += 2) {
                        const uint32_t c0 = e[s[i]], c1 = e[s[i + 1]], l1 = c1 & 31;
                        put_bits(((uint64_t)(c0 >> 16) << l1) | (c1 >> 16), (int)((c0 & 31) + l1));
                    }
                    if (i < cnt) put_symbol(s[i]);
                }
                const uint64_t pos = (uint64_t)(wp - bits) * 8 + (uint64_t)nacc;
                sub_bits[(size_t)j] = (uint32_t)(pos - prev);
                prev = pos;
            }
            if (nacc) {
                slot_idx[pi] = (uint64_t)(wp - bits) / 4;
                slot_val[pi] = (uint32_t)(acc << (32 - nacc));
            }
        });
        for (uint64_t p = 0; p < M; ++p)
            if (slot_idx[(size_t)p] != ~0ull) {
                uint8_t *w = bits + 4 * slot_idx[(size_t)p];
                uint32_t v;
                std::memcpy(&v, w, 4);
                store_be32(w, __builtin_bswap32(v) | slot_val[(size_t)p]);
            }
        stage_mark("bitstream");

        // 4. segments, in this thread's reused memory
        t_ratio.codebook = ratio_write_codebook(cb);
        const uint64_t meta_bytes = ratio_metadata_bytes(n, lg);
        {
            uint8_t *m = t_ratio.meta.get((size_t)meta_bytes + 1);
            std::memset(m, 0, (size_t)meta_bytes);
            uint64_t pos = 0;
            for (uint64_t p = 0; p < P; ++p) {
                put_u64(m + 8 * p, pos);
                const uint64_t bp = std::min<uint64_t>(kRatioPartition, B - kRatioPartition * p);
                for (uint64_t r = 0; r < bp; ++r) {
                    const uint64_t j = kRatioPartition * p + r, cnt = std::min(S, n - j * S);
                    if (r + 1 < bp)
                        put_u16(m + 8 * P + 2 * ((kRatioPartition - 1) * p + r),
                                (uint16_t)(sub_bits[(size_t)j] - ratio_length_floor(runs, cnt)));
                    pos += sub_bits[(size_t)j];
                }
            }
        }
        // Sparse pass (once per-thread strings joined afterwards: a serial copy of the whole output, 7 ms of a
        // 100 ms 16-thread compression of 64M values).
        const uint64_t flag_bytes = sparse_flag_bytes(bytes);
        uint8_t *flags = t_ratio.flags.get((size_t)flag_bytes + 1);
        const uint64_t nnz = sparse_encode_parallel(bits, bytes, flags, t_ratio.blocks, T);
        views.seg[0] = {reinterpret_cast<const uint8_t *>(t_ratio.codebook.data()), t_ratio.codebook.size()};
        views.seg[1] = {t_ratio.meta.get(0), meta_bytes};
        views.seg[2] = {flags, flag_bytes};
        views.seg[3] = {t_ratio.blocks.get(0), nnz * kBlockBytes};
        t_ratio.trim();
        stage_mark("segments");

        if (stats) {
            stats->codebook_bytes = views.seg[0].size;
            stats->metadata_bytes = views.seg[1].size;
            stats->payload_bytes = views.seg[2].size + views.seg[3].size;
            stats->overhead_f = stats->payload_bytes ? (double)stats->metadata_bytes / (double)stats->payload_bytes : 0;
            stats->huffman_bytes = bytes;
            stats->used_symbols = cb.used;
            stats->max_code_length = cb.max_len;
            stats->run_tokens = runs;
        }
        return ZB_OK;
    } catch (const std::bad_alloc &) {
        return fail(msg, ZB_ERR_NOMEM, "ratio: out of memory");
    }
}

// ---- decoder -----------------------------------------------------------------------------------------------------

namespace {

// One sub-block being decoded: cnt symbols from bit `pos` of the bitstream into out.
struct SubBlockCursor {
    uint64_t pos, cnt, i = 0;
    uint16_t *out;
    bool bad = false;   // a bit pattern that is no code (a single-symbol codebook or corrupt data), or a run token
                        // that overruns the sub-block
    bool active() const { return i < cnt && !bad; }
};

// The code tables of one codebook, for decode_step.
struct CodeTables {
    const RatioCodebook &cb;
    const uint32_t *lut, *limit;
    const uint64_t *multi;   // build_multi_table
    const uint16_t *run32;   // 32 copies of the run symbol
};

// Several symbols per lookup: multi[i] for the first kRatioLutBits bits i of the remaining bitstream holds the
// literal symbols (below cb.symbols) whose codes lie whole in those bits, at most three, in order, then the run of a
// run token that follows them when its code and extra bits lie in those bits too: bits 0-1 the literals' count,
// bits 2-5 the total length, bits 6-15 the run's length (0: none), the literals at bits 16, 32 and 48. An entry of
// neither (0) means a longer code, a longer run or no code. At high ratios most codes are one to three bits long and
// runs of the zero symbol take the rest: one lookup in place of one per code, and fewer unpredictable branches
// between literals and runs.
constexpr uint32_t kMultiRunMax = 1023;
void build_multi_table(const RatioCodebook &cb, const uint32_t *lut, std::vector<uint64_t> &multi) {
    constexpr uint32_t K = kRatioLutBits, mask = (1u << K) - 1;
    multi.assign((size_t)1 << K, 0);
    for (uint32_t v = 0; v <= mask; ++v) {
        uint64_t e = 0;
        uint32_t used = 0, count = 0, run = 0;
        // A code of length l <= K - used is read from real bits only (those shifted in below are zeros).
        auto next = [&](uint32_t &l) {
            const uint32_t entry = lut[(v << used) & mask];
            l = entry & 31;
            return l && used + l <= K ? entry >> 16 : ~0u;
        };
        uint32_t l, sym;
        while (count < 3 && (sym = next(l)) < cb.symbols) {
            e |= (uint64_t)sym << (16 + 16 * count);
            used += l;
            ++count;
        }
        if (cb.runs && (sym = next(l)) != ~0u && sym >= cb.symbols) {
            const uint32_t offset = sym - cb.symbols;
            const uint32_t xb = (uint32_t)ratio_run_extra_bits(offset);
            if (used + l + xb <= K) {
                const uint32_t extra = xb ? ((v << (used + l)) & mask) >> (K - xb) : 0u;
                const uint32_t L = ratio_run_length(offset, extra);
                if (L <= kMultiRunMax) {
                    run = L;
                    used += l + xb;
                }
            }
        }
        multi[v] = count || run ? e | count | (uint64_t)used << 2 | (uint64_t)run << 6 : 0;
    }
}

// Decodes what one 64-bit load of c's bitstream holds (at least 57 bits): literals and runs from the multi table
// where it has them, else three codes of at most 16 bits, or items of a code and at most 12 extra bits while
// 28 bits remain. Cursors stepped in turn decode their sub-blocks as
// independent chains of table lookups, which a core overlaps (one chain is latency-bound).
template <bool kRuns>
ZB_ALWAYS_INLINE void decode_step(const uint8_t *bits, SubBlockCursor &c, const CodeTables &t) {
    constexpr int K = kRatioLutBits;
    const RatioCodebook &cb = t.cb;
    auto code = [&](uint64_t w, uint32_t &len) -> uint32_t {
        const uint32_t e = t.lut[w >> (64 - K)];
        len = e & 31;
        if (len) return e >> 16;
        const uint32_t w16 = (uint32_t)(w >> 48);   // a code longer than K bits
        for (int l = K + 1; l <= cb.max_len; ++l)
            if (w16 < t.limit[l]) {
                len = (uint32_t)l;
                return cb.perm[cb.base[l] + (w16 >> (kRatioMaxCodeLength - l)) - cb.first[l]];
            }
        return 0;   // len 0: no code
    };
    uint64_t w = load_be64(bits + (c.pos >> 3)) << (c.pos & 7);
    // Up to three literals and a run from one lookup of the multi table, while the sub-block has room for what the
    // stores write: four symbols for the literals, whole 32-symbol stores for the run (what lies past them is
    // written again by the next steps).
    auto multi = [&](int &avail) {
        if (avail < K) return false;
        const uint64_t e = t.multi[w >> (64 - K)];
        const uint32_t count = (uint32_t)e & 3, run = (uint32_t)(e >> 6) & kMultiRunMax;
        if (!(count | run) || c.cnt - c.i < 4 + ((run + 31) & ~31u)) return false;
        const uint64_t syms = e >> 16;
        std::memcpy(c.out + c.i, &syms, 8);
        c.i += count;
        for (uint32_t k = 0; k < run; k += 32) std::memcpy(c.out + c.i + k, t.run32, 64);
        c.i += run;
        const uint32_t l = (uint32_t)(e >> 2) & 15;
        w <<= l;
        c.pos += l;
        avail -= (int)l;
        return true;
    };
    if (!kRuns) {
        int avail = 57;
        while (multi(avail) && c.i < c.cnt) {
        }
        if (avail < 48 || c.i >= c.cnt) return;
        const int codes = c.cnt - c.i >= 3 ? 3 : 1;
        for (int k = 0; k < codes; ++k) {
            uint32_t l;
            const uint32_t s = code(w, l);
            if (!l) {
                c.bad = true;
                return;
            }
            c.out[c.i++] = (uint16_t)s;
            w <<= l;
            c.pos += l;
        }
        return;
    }
    const uint32_t A = cb.symbols;
    int avail = 57;
    while (c.i < c.cnt) {
        if (multi(avail)) continue;
        if (avail < 28) return;
        uint32_t l;
        const uint32_t s = code(w, l);
        if (!l) {
            c.bad = true;
            return;
        }
        w <<= l;
        c.pos += l;
        avail -= (int)l;
        if (s < A) {
            c.out[c.i++] = (uint16_t)s;
            continue;
        }
        const int xb = ratio_run_extra_bits(s - A);
        const uint32_t extra = xb ? (uint32_t)(w >> (64 - xb)) : 0u;
        w <<= xb;
        c.pos += (uint64_t)xb;
        avail -= xb;
        const uint32_t L = ratio_run_length(s - A, extra);
        if (L > c.cnt - c.i) {
            c.bad = true;
            return;
        }
        std::fill(c.out + c.i, c.out + c.i + L, (uint16_t)cb.run_symbol);
        c.i += L;
    }
}

// Decodes the sub-blocks of kWays cursors (some may be empty: cnt 0), interleaved while all have symbols left. Four
// chains ran 1.07x faster than two on the VM (TREFHT lorenzo/ratio, four rounds), two 1.6x faster than one.
constexpr int kWays = 4;

template <bool kRuns>
void decode_sub_blocks(const uint8_t *bits, SubBlockCursor *c, const CodeTables &t) {
    auto all_active = [&] {
        bool a = true;
        for (int k = 0; k < kWays; ++k) a &= c[k].active();
        return a;
    };
    while (all_active())
        for (int k = 0; k < kWays; ++k) decode_step<kRuns>(bits, c[k], t);
    for (int k = 0; k < kWays; ++k)
        while (c[k].active()) decode_step<kRuns>(bits, c[k], t);
}

}  // namespace

// The state RatioBlockDecoder::open prepares: the expanded bitstream (in the opening thread's scratch), every
// sub-block's start bit and the code tables.
struct RatioBlockDecoder::Impl {
    RatioCodebook cb;
    RatioDecodeTables tab;
    std::vector<uint64_t> multi;
    std::vector<uint64_t> start;   // start bit of each sub-block, B + 1 entries
    uint16_t run32[32];
    const uint8_t *bits = nullptr;
    uint64_t n = 0, B = 0;
    std::atomic<uint64_t> bad{~0ull};
    CodeTables tables() const { return CodeTables{cb, tab.lut.data(), tab.limit, multi.data(), run32}; }
    void mark_bad(uint64_t j) {   // the lowest bad sub-block is reported
        uint64_t cur = bad.load();
        while (j < cur && !bad.compare_exchange_weak(cur, j)) {
        }
    }
};

RatioBlockDecoder::RatioBlockDecoder() = default;
RatioBlockDecoder::~RatioBlockDecoder() {
    if (impl_) t_ratio.trim();
}

int RatioBlockDecoder::sub_block_log2() const { return impl_->cb.sub_block_log2; }
uint64_t RatioBlockDecoder::sub_blocks() const { return impl_->B; }
uint64_t RatioBlockDecoder::first_bad() const { return impl_->bad.load(); }

zb_status RatioBlockDecoder::open(const ByteSpan *segments, uint64_t n, uint32_t alphabet, int threads,
                                  std::string &msg, bool allow_runs) {
    if (!segments || n == 0) return fail(msg, ZB_ERR_INVALID_ARG, "ratio: no segments or no symbols");
    try {
        impl_.reset(new Impl);
        Impl &d = *impl_;
        RatioCodebook &cb = d.cb;
        zb_status st = ratio_read_codebook(segments[kRatioSegCodebook], alphabet, cb, msg, allow_runs);
        if (st != ZB_OK) return st;
        st = ratio_check_lengths(segments, n, cb, msg);
        if (st != ZB_OK) return st;
        const int lg = cb.sub_block_log2;
        const uint64_t S = 1ull << lg, B = ratio_sub_blocks(n, lg), P = div_up(B, kRatioPartition);
        const uint64_t total = cb.total_bits, bytes = div_up(total, 8);
        d.n = n;
        d.B = B;
        int T = resolve_threads(threads, n);
        if ((uint64_t)T > B) T = (int)B;

        // 1. sparse pass, in slices of whole flag bytes
        const ByteSpan fl = segments[kRatioSegFlags], bl = segments[kRatioSegBlocks];
        const uint64_t nstored = bl.size / kBlockBytes;
        uint8_t *bits = t_ratio.bits.get((size_t)(bytes + decode_padding(lg)));
        d.bits = bits;
        std::memset(bits + bytes, 0, (size_t)decode_padding(lg));
        const uint64_t slice = div_up(div_up(bytes, (uint64_t)T), 128) * 128;
        const int ns = (int)div_up(bytes, slice);
        std::vector<uint64_t> boff((size_t)ns + 1, 0);
        for (int k = 0; k < ns; ++k) {
            const uint64_t f0 = (uint64_t)k * slice / 128, f1 = std::max(f0, std::min(fl.size, f0 + slice / 128));
            boff[(size_t)k + 1] = boff[(size_t)k] + count_ones(fl.data + f0, f1 - f0);
        }
        if (boff[(size_t)ns] != nstored)
            return fail(msg, ZB_ERR_CORRUPT, "ratio bitstream: block flags disagree with the stored block count");
        std::atomic<bool> sparse_ok{true};
#pragma omp parallel for num_threads(T) schedule(static, 1)
        for (int k = 0; k < ns; ++k) {
            const uint64_t off = (uint64_t)k * slice, len = std::min(slice, bytes - off);
            if (!sparse_decode(fl.data + off / 128, bl.data + boff[(size_t)k] * kBlockBytes,
                               boff[(size_t)k + 1] - boff[(size_t)k], len, bits + off))
                sparse_ok = false;
        }
        if (!sparse_ok) return fail(msg, ZB_ERR_CORRUPT, "ratio bitstream: inconsistent zero-block flags");
        if ((total & 7) && (bits[bytes - 1] & (0xFFu >> (total & 7))))
            return fail(msg, ZB_ERR_CORRUPT, "ratio bitstream: padding bits after the last code are not zero");

        // 2. metadata -> start bit of every sub-block
        std::vector<uint64_t> &start = d.start;
        start.resize((size_t)B + 1);
        const uint8_t *m = segments[kRatioSegMetadata].data;
        for (uint64_t p = 0; p < P; ++p) {
            const uint64_t off = get_u64(m + 8 * p);
            const uint64_t next = p + 1 < P ? get_u64(m + 8 * (p + 1)) : total;
            if ((p == 0 && off != 0) || off > total || next > total)
                return fail(msg, ZB_ERR_CORRUPT, "ratio metadata: partition offset out of range");
            const uint64_t bp = std::min<uint64_t>(kRatioPartition, B - kRatioPartition * p);
            uint64_t pos = off;
            for (uint64_t r = 0; r < bp; ++r) {
                const uint64_t j = kRatioPartition * p + r, cnt = std::min(S, n - j * S);
                start[(size_t)j] = pos;
                uint64_t b;
                if (r + 1 < bp) {
                    b = ratio_length_floor(cb.runs, cnt) + get_u16(m + 8 * P + 2 * ((kRatioPartition - 1) * p + r));
                } else {
                    if (next < pos) return fail(msg, ZB_ERR_CORRUPT, "ratio metadata: sub-block lengths exceed the partition");
                    b = next - pos;
                }
                if (b < ratio_length_floor(cb.runs, cnt) * (uint64_t)cb.min_len || b > cnt * (uint64_t)cb.max_len)
                    return fail(msg, ZB_ERR_CORRUPT,
                                "ratio metadata: impossible length of sub-block " + std::to_string(j));
                pos += b;
            }
        }
        start[(size_t)B] = total;

        // 3. the tables the sub-blocks are decoded with
        ratio_build_decode_tables(cb, d.tab);
        build_multi_table(cb, d.tab.lut.data(), d.multi);
        std::fill(d.run32, d.run32 + 32, (uint16_t)cb.run_symbol);
        return ZB_OK;
    } catch (const std::bad_alloc &) {
        return fail(msg, ZB_ERR_NOMEM, "ratio: out of memory");
    }
}

// Sub-blocks kWays at a time (decode_step: interleaved chains of lookups).
bool RatioBlockDecoder::decode(uint64_t j0, uint64_t j1, uint16_t *out) {
    Impl &d = *impl_;
    const uint64_t S = 1ull << d.cb.sub_block_log2;
    const CodeTables tables = d.tables();
    bool ok = true;
    for (uint64_t g = j0; g < j1; g += kWays) {
        SubBlockCursor c[kWays];
        for (int k = 0; k < kWays; ++k) {
            const uint64_t j = g + (uint64_t)k;
            c[k].pos = j < j1 ? d.start[(size_t)j] : 0;
            c[k].cnt = j < j1 ? std::min(S, d.n - j * S) : 0;
            c[k].out = out + (j - j0) * S;
        }
        if (d.cb.runs) decode_sub_blocks<true>(d.bits, c, tables);
        else decode_sub_blocks<false>(d.bits, c, tables);
        for (int k = 0; k < kWays; ++k) {
            const uint64_t j = g + (uint64_t)k;
            if (j < j1 && (c[k].bad || c[k].pos != d.start[(size_t)j + 1])) {
                d.mark_bad(j);
                ok = false;
            }
        }
    }
    return ok;
}

zb_status ratio_decode_cpu(const ByteSpan *segments, uint64_t n, uint32_t alphabet, int threads, uint16_t *symbols,
                           std::string &msg, bool allow_runs, uint32_t *zeros) {
    if (!symbols) return fail(msg, ZB_ERR_INVALID_ARG, "ratio: no segments or no symbols");
    RatioBlockDecoder dec;
    if (zb_status st = dec.open(segments, n, alphabet, threads, msg, allow_runs)) return st;
    const uint64_t S = 1ull << dec.sub_block_log2(), B = dec.sub_blocks();
    int T = resolve_threads(threads, n);
    if ((uint64_t)T > B) T = (int)B;
    const auto count_zeros = ZB_SIMD_PICK(void (*)(const uint16_t *, uint64_t, uint32_t *), count_zeros_by_unit);
    // Groups of kWays sub-blocks taken in turn.
#pragma omp parallel for num_threads(T) schedule(dynamic, 2)
    for (int64_t jp = 0; jp < (int64_t)div_up(B, kWays); ++jp) {
        const uint64_t j0 = kWays * (uint64_t)jp, j1 = std::min(B, j0 + kWays);
        dec.decode(j0, j1, symbols + j0 * S);
        if (zeros) {   // the group's symbols while in the cache (S is a multiple of the unit)
            const uint64_t i0 = j0 * S, i1 = std::min(n, j1 * S);
            count_zeros(symbols + i0, i1 - i0, zeros + i0 / kRatioZeroUnit);
        }
    }
    if (dec.first_bad() != ~0ull)
        return fail(msg, ZB_ERR_CORRUPT,
                    "ratio bitstream: sub-block " + std::to_string(dec.first_bad()) + " does not decode to its length");
    return ZB_OK;
}

}  // namespace zb
