// Run tokens of the ratio encoder (format v4, docs/FORMAT.md section 9) on the CPU: the token arithmetic, round
// trips through the library and the reference decoder of ratio_test_util.h (written from the format text) for runs
// of every length at sub-block borders, the all-run stream with no plain symbol, the choice between plain and
// tokens, thread independence (parts of the bitstream written by any thread), the version gate and corrupted streams.
#include <gtest/gtest.h>
#include <random>
#include "ratio_test_util.h"
#include "zb_ratio.h"

namespace {

using ratiot::spans;
constexpr uint32_t kA = 1024, kZ = 512;

using ratiot::decode;
using ratiot::encode;
using Enc = ratiot::Encoded;

// Library and reference decoder give the input back.
void check_round_trip(const Enc &e, const std::vector<uint16_t> &sym, int threads = 1) {
    std::vector<uint16_t> out;
    std::string why;
    ASSERT_EQ(decode(e.seg, sym.size(), kA, out, threads, &why), ZB_OK) << why;
    EXPECT_TRUE(out == sym) << "library decoder differs";
    const ratiot::RefResult ref = ratiot::reference_decode(e.seg, sym.size(), kA);
    EXPECT_TRUE(ref.ok) << "reference decoder: " << ref.why;
    EXPECT_TRUE(ref.symbols == sym) << "reference decoder differs";
}

// Runs of z with lengths drawn from `lengths`, separated by one or two other symbols near the centre.
std::vector<uint16_t> runs_of(const std::vector<uint32_t> &lengths, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint16_t> v;
    for (uint32_t L : lengths) {
        v.insert(v.end(), L, (uint16_t)kZ);
        const int others = 1 + (int)(rng() % 2);
        for (int k = 0; k < others; ++k) {
            const uint16_t s = (uint16_t)(kZ - 3 + rng() % 7);
            v.push_back(s == kZ ? (uint16_t)(kZ + 1) : s);
        }
    }
    for (uint16_t &s : v)
        if (s == kZ && rng() % 2000 == 0) s = kZ + 2;  // keep some noise
    return v;
}

}  // namespace

TEST(RatioRuns, TokenArithmeticCoversEveryLength) {
    EXPECT_EQ(zb::kRatioRunTokens, 23u);
    std::vector<int> seen(zb::kRatioRunTokens, 0);
    for (uint32_t L = 2; L <= 4096; ++L) {
        const zb::RatioRunToken t = zb::ratio_run_token(L);
        ASSERT_LT(t.offset, zb::kRatioRunTokens) << L;
        ASSERT_EQ(t.extra_bits, zb::ratio_run_extra_bits(t.offset)) << L;
        ASSERT_LT(t.extra, 1u << t.extra_bits | (t.extra_bits == 0)) << L;
        ASSERT_EQ(zb::ratio_run_length(t.offset, t.extra), L) << L;
        ++seen[t.offset];
    }
    for (uint32_t k = 0; k < zb::kRatioRunTokens; ++k) EXPECT_GT(seen[k], 0) << "token " << k << " never used";
    EXPECT_EQ(zb::ratio_run_token(15).extra_bits, 0);
    EXPECT_EQ(zb::ratio_run_token(16).extra_bits, 4);
    EXPECT_EQ(zb::ratio_run_token(4096).extra_bits, 12);
}

TEST(RatioRuns, RunsOfEveryLengthAcrossSubBlocks) {
    std::vector<uint32_t> lengths;
    for (uint32_t L = 1; L <= 300; ++L) lengths.push_back(L);
    for (uint32_t L : {511u, 512u, 513u, 1023u, 1024u, 2047u, 2048u, 4095u, 4096u, 4097u, 9000u, 20000u})
        lengths.push_back(L);
    std::mt19937 rng(3);
    for (int k = 0; k < 400; ++k) lengths.push_back(1 + rng() % 64);
    const std::vector<uint16_t> sym = runs_of(lengths, 5);
    for (int lg = zb::kRatioMinSubBlockLog2; lg <= zb::kRatioMaxSubBlockLog2; ++lg) {
        SCOPED_TRACE("lg " + std::to_string(lg));
        const Enc e = encode(sym, kA, 1, lg, kZ);
        EXPECT_TRUE(e.st.run_tokens);
        EXPECT_EQ((uint8_t)e.seg[0][0], (uint8_t)(lg | zb::kRatioRunFlag));
        check_round_trip(e, sym);
        for (int t : {2, 3, 8}) {
            const Enc et = encode(sym, kA, t, lg, kZ);
            EXPECT_TRUE(et.seg == e.seg) << t << " threads write other bytes";
            check_round_trip(e, sym, t);
        }
    }
    // Every prefix length around sub-block borders (a run cut by the border, a last sub-block of 1 symbol).
    for (uint64_t n : {1ull, 2ull, 3ull, 4095ull, 4096ull, 4097ull, 8191ull, 8192ull, 8193ull}) {
        std::vector<uint16_t> cut(sym.begin(), sym.begin() + (long)std::min<uint64_t>(n, sym.size()));
        const Enc e = encode(cut, kA, 1, zb::kRatioSubBlockLog2, kZ);
        check_round_trip(e, cut);
    }
}

TEST(RatioRuns, OnlyTheRunSymbol) {
    // Whole sub-blocks of z: only tokens are used, the main part of the codebook is empty (m = 0).
    for (uint64_t n : {4096ull * 5, 4096ull * 5 + 1, 4096ull * 5 + 2, 1ull, 2ull, 17ull}) {
        SCOPED_TRACE("n " + std::to_string(n));
        const std::vector<uint16_t> sym(n, (uint16_t)kZ);
        const Enc e = encode(sym, kA, 1, zb::kRatioSubBlockLog2, kZ);
        check_round_trip(e, sym);
        if (n >= 2) {
            EXPECT_TRUE(e.st.run_tokens);
        }
        if (n % 4096 == 0) {
            EXPECT_EQ(ratiot::le(reinterpret_cast<const uint8_t *>(e.seg[0].data()) + 9, 4), 0u);  // m
        }
        const uint64_t all = e.seg[0].size() + e.seg[1].size() + e.seg[2].size() + e.seg[3].size();
        EXPECT_LT(all, 64u + n / 1000);
    }
}

TEST(RatioRuns, PlainStreamWhenTokensDoNotPay) {
    // Few repeats: the plain stream is shorter; it is then byte-identical to an encoder without a run symbol.
    const auto wide = ratiot::laplace_symbols(50000, kA, 40.0, 9);
    const Enc with = encode(wide, kA, 1, zb::kRatioSubBlockLog2, kZ), without = encode(wide, kA);
    EXPECT_FALSE(with.st.run_tokens);
    EXPECT_FALSE(without.st.run_tokens);
    EXPECT_TRUE(with.seg == without.seg);
    check_round_trip(with, wide);
    // Many repeats: tokens, and a shorter Huffman bitstream than the plain one.
    const auto narrow = ratiot::laplace_symbols(200000, kA, 0.05, 10);
    const Enc t = encode(narrow, kA, 1, zb::kRatioSubBlockLog2, kZ), p = encode(narrow, kA);
    EXPECT_TRUE(t.st.run_tokens);
    EXPECT_LT(t.st.huffman_bytes, p.st.huffman_bytes / 4);
    check_round_trip(t, narrow);
    // An alphabet too large for the tokens: the run symbol is ignored.
    std::vector<uint16_t> big(10000, 7);
    big[5] = 65530;
    std::vector<std::string> seg;
    std::string msg;
    zb::RatioStats st;
    zb::RatioOptions opt;
    opt.run_symbol = 7;
    ASSERT_EQ(zb::ratio_encode_cpu(big.data(), big.size(), 65536, 1, seg, &st, msg, opt), ZB_OK) << msg;
    EXPECT_FALSE(st.run_tokens);
}

TEST(RatioRuns, VersionGateAndCorruption) {
    std::vector<uint32_t> lengths;
    std::mt19937 rng(17);
    for (int k = 0; k < 3000; ++k) lengths.push_back(1 + rng() % 200);
    const std::vector<uint16_t> sym = runs_of(lengths, 19);
    const Enc e = encode(sym, kA, 1, 10, kZ);
    ASSERT_TRUE(e.st.run_tokens);
    std::vector<uint16_t> out;
    std::string why;
    EXPECT_EQ(decode(e.seg, sym.size(), kA, out, 1, &why, false), ZB_ERR_CORRUPT);
    EXPECT_NE(why.find("version"), std::string::npos) << why;
    // Every single-bit flip of the codebook and metadata, random flips of the payload: an error or symbols of the
    // alphabet, never a crash (ASan/UBSan run this too).
    int detected = 0, total = 0;
    for (int k = 0; k < 4; ++k) {
        const size_t len = e.seg[(size_t)k].size();
        const int trials = k < 2 ? (int)len * 8 : 2000;
        for (int t = 0; t < trials; ++t) {
            std::vector<std::string> seg = e.seg;
            if (seg[(size_t)k].empty()) break;
            const size_t i = k < 2 ? (size_t)t / 8 : rng() % len;
            seg[(size_t)k][i] = (char)(seg[(size_t)k][i] ^ (1 << (k < 2 ? t % 8 : (int)(rng() % 8))));
            const zb_status s = decode(seg, sym.size(), kA, out, 1 + t % 2);
            ++total;
            ASSERT_TRUE(s == ZB_OK || s == ZB_ERR_CORRUPT) << s;
            if (s == ZB_ERR_CORRUPT) {
                ++detected;
            } else {
                for (uint16_t v : out) ASSERT_LT(v, kA);
            }
        }
    }
    EXPECT_GT(detected, total / 2);
    std::printf("[ ratio ] run-token stream: %d of %d corruptions detected by the stage's checks\n", detected, total);
    // A run token that overruns its sub-block: a stream of whole sub-blocks of z decoded as one symbol fewer.
    const std::vector<uint16_t> zs(4096 * 2, (uint16_t)kZ);
    const Enc ez = encode(zs, kA, 1, zb::kRatioSubBlockLog2, kZ);
    EXPECT_NE(decode(ez.seg, zs.size() - 1, kA, out), ZB_OK);
}

namespace {

// The token counts of symbols [i0, i1) by tokenizing each sub-block symbol by symbol (the format's definition).
std::vector<uint64_t> reference_token_counts(const std::vector<uint16_t> &s, uint64_t i0, uint64_t i1, int lg) {
    std::vector<uint64_t> ht(kA + zb::kRatioRunTokens, 0);
    auto emit = [&](uint32_t v, int, uint32_t) { ++ht[v]; };
    for (uint64_t b0 = i0; b0 < i1; b0 += 1ull << lg) {
        uint32_t run = 0;
        for (uint64_t i = b0; i < std::min<uint64_t>(i1, b0 + (1ull << lg)); ++i) {
            if (s[i] == kZ) {
                ++run;
                continue;
            }
            if (run) zb::ratio_emit_run(run, kA, kZ, emit);
            run = 0;
            emit(s[i], 0, 0u);
        }
        if (run) zb::ratio_emit_run(run, kA, kZ, emit);
    }
    return ht;
}

}  // namespace

// ratio_token_counts (bit masks, one step per run) counts what tokenizing does: runs of every length up to a whole
// sub-block, across 64-symbol words and cut at sub-block borders, at run-symbol densities from sparse to nearly all,
// for ranges starting at a later sub-block and ending inside one.
TEST(RatioRuns, TokenCountsMatchTokenizing) {
    std::mt19937 rng(11);
    for (double p : {0.05, 0.5, 0.9, 0.99, 0.9999}) {
        for (int lg : {10, 12}) {
            std::vector<uint16_t> s(3 * (1u << lg) + 777);
            std::bernoulli_distribution is_z(p);
            for (uint16_t &v : s) v = is_z(rng) ? (uint16_t)kZ : (uint16_t)(rng() % kA == kZ ? kZ + 1 : rng() % kA);
            for (size_t i = 100; i < 100 + 300; ++i) s[i] = (uint16_t)kZ;   // a long run over several words
            for (uint64_t i0 : {uint64_t(0), uint64_t(1) << lg}) {
                const uint64_t i1 = s.size();
                std::vector<uint64_t> got(kA + zb::kRatioRunTokens, 5);   // counts are added to what is there
                std::vector<uint32_t> scratch(4 * kA);
                uint32_t bad = 0;
                EXPECT_TRUE(zb::ratio_token_counts(s.data(), i0, i1, lg, kA, kZ, scratch.data(), got.data(), bad));
                std::vector<uint64_t> want = reference_token_counts(s, i0, i1, lg);
                for (uint64_t &w : want) w += 5;
                EXPECT_TRUE(got == want) << "p " << p << " sub-block 2^" << lg << " from " << i0;
                // Without a run symbol: the plain histogram.
                std::vector<uint64_t> plain(kA, 5), plain_want(kA, 5);
                for (uint64_t i = i0; i < i1; ++i) ++plain_want[s[i]];
                EXPECT_TRUE(zb::ratio_token_counts(s.data(), i0, i1, lg, kA, zb::kRatioNoRunSymbol, scratch.data(),
                                                   plain.data(), bad));
                EXPECT_TRUE(plain == plain_want) << "plain, p " << p << " sub-block 2^" << lg << " from " << i0;
            }
        }
    }
}

// The encoder's threads take parts of the symbols in turn, each written from its own first bit: where the first
// sub-blocks cost many times the bits of the rest (interp codes: coarse levels first, then the last level's runs),
// parts differ in bits and end inside words; sub-blocks of z alone (one run token each, under 32 bits) make parts
// that end in the word they start in (16 and 40 threads: one sub-block a part). The bytes stay those of one thread.
TEST(RatioRuns, ThreadsSplitSkewedBitsAlike) {
    const uint64_t S = uint64_t(1) << zb::kRatioSubBlockLog2;
    std::vector<uint16_t> sym = ratiot::laplace_symbols(12 * S + 77, kA, 40.0, 5);   // dense: ~7 bits a symbol
    std::vector<uint32_t> lengths(3000);
    std::mt19937 rng(8);
    for (uint32_t &L : lengths) L = 20 + rng() % 200;
    const std::vector<uint16_t> sparse = runs_of(lengths, 9);   // mostly runs of z: well under a bit a symbol
    sym.insert(sym.end(), sparse.begin(), sparse.end());
    sym.insert(sym.end(), 6 * S, (uint16_t)kZ);
    sym.insert(sym.end(), sparse.begin(), sparse.begin() + (long)(5 * S / 2));
    const Enc one = encode(sym, kA, 1, zb::kRatioSubBlockLog2, kZ);
    ASSERT_TRUE(one.st.run_tokens);
    check_round_trip(one, sym);
    for (int t : {2, 3, 5, 8, 16, 40}) {
        const Enc e = encode(sym, kA, t, zb::kRatioSubBlockLog2, kZ);
        EXPECT_TRUE(e.seg == one.seg) << t << " threads write other bytes";
    }
}
