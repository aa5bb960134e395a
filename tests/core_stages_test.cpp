// Each CPU stage against a plain, obviously-correct reference.
#include <gtest/gtest.h>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>
#include "test_util.h"
#include "zb_cpu.h"
#include "zb_crc32c.h"
#include "zb_div32.h"
#include "zb_exceptions.h"
#include "zb_quant.h"
#include "zb_shape.h"
#include "zb_transpose8.h"
#include "zb_simd.h"

namespace {

// The GPU kernels' index division (zb::Div32 behind FastDiv) against the / operator: every small divisor with the
// dividends around its multiples and the ends of the range, and random divisors of every magnitude up to 2^32 - 1.
TEST(Div32, MatchesIntegerDivision) {
    std::mt19937_64 rng(7);
    uint64_t wrong = 0;
    auto check = [&](uint64_t d, uint32_t a) {
        if (zb::Div32::make(d).div(a) != a / d) ++wrong;
    };
    for (uint64_t d = 1; d <= 4096; ++d) {
        for (uint32_t a : {0u, 1u, (uint32_t)d - 1, (uint32_t)d, (uint32_t)d + 1, 0x7FFFFFFFu, 0x80000000u,
                           0xFFFFFFFEu, 0xFFFFFFFFu})
            check(d, a);
        for (int i = 0; i < 64; ++i) {
            const uint32_t a = (uint32_t)rng();
            check(d, a);
            check(d, a - a % (uint32_t)d);  // a multiple of d
            if (a >= d) check(d, a - a % (uint32_t)d - 1);
        }
    }
    for (int i = 0; i < 200000; ++i) {
        const uint64_t d = ((rng() >> (rng() % 64)) % 0xFFFFFFFFull) + 1;  // every magnitude, 1 .. 2^32 - 1
        const uint32_t a = (uint32_t)rng();
        check(d, a);
        const uint64_t m = a - a % d;  // the multiple of d at or below a, and the value just below it
        check(d, (uint32_t)m);
        if (m) check(d, (uint32_t)(m - 1));
    }
    for (uint64_t d : {0xFFFFFFFFull, 0xFFFFFFFEull, 0x80000001ull, 0x80000000ull, 0x7FFFFFFFull, 3ull, 7ull})
        for (int i = 0; i < 20000; ++i) check(d, (uint32_t)rng());
    EXPECT_EQ(wrong, 0u);
}

// The GPU's two-half form of the bitshuffle transpose against the 64-bit one, on random and single-bit matrices.
TEST(Transpose8x8, HalvesMatchTheWholeWord) {
    std::mt19937_64 rng(3);
    std::vector<uint64_t> xs;
    for (int b = 0; b < 64; ++b) xs.push_back(uint64_t(1) << b);
    for (int i = 0; i < 100000; ++i) xs.push_back(rng());
    uint64_t wrong = 0;
    for (uint64_t x : xs) {
        uint32_t lo = (uint32_t)x, hi = (uint32_t)(x >> 32);
        zb::transpose8x8_halves(lo, hi);
        if ((((uint64_t)hi << 32) | lo) != zb::transpose8x8(x)) ++wrong;
    }
    EXPECT_EQ(wrong, 0u);
    // And the definition itself: bit c of byte r becomes bit r of byte c.
    for (int r = 0; r < 8; ++r)
        for (int c = 0; c < 8; ++c) EXPECT_EQ(zb::transpose8x8(uint64_t(1) << (8 * r + c)), uint64_t(1) << (8 * c + r));
}

TEST(Crc32c, StandardCheckValue) {
    // The published CRC-32C check value of the ASCII string "123456789".
    EXPECT_EQ(zb::crc32c("123456789", 9), 0xE3069283u);
    EXPECT_EQ(zb::crc32c("", 0), 0u);
}

TEST(Crc32c, ExtendEqualsWhole) {
    std::vector<uint8_t> d(100003);
    std::mt19937 rng(1);
    for (auto &b : d) b = (uint8_t)rng();
    const uint32_t whole = zb::crc32c(d.data(), d.size());
    uint32_t part = zb::crc32c(d.data(), 777);
    part = zb::crc32c_extend(part, d.data() + 777, d.size() - 777);
    EXPECT_EQ(whole, part);
    // Bitwise reference (one bit at a time, reflected polynomial).
    uint32_t c = 0xFFFFFFFFu;
    for (uint8_t b : d) {
        c ^= b;
        for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    }
    EXPECT_EQ(whole, c ^ 0xFFFFFFFFu);
}

TEST(Crc32c, PayloadChecksumIndependentOfThreads) {
    // Lengths around the groups of three pieces that the crc32 instruction takes at once, below and above the
    // 16 pieces where the checksum goes parallel.
    const size_t P = zb::kChecksumPiece;
    std::vector<uint8_t> d(21 * P + 7);
    std::mt19937 rng(2);
    for (auto &b : d) b = (uint8_t)rng();
    for (size_t len : {size_t(0), size_t(1), P - 1, P, 2 * P + 9, 3 * P, 3 * P + 1, 5 * P + 123, 18 * P, 21 * P + 7}) {
        // Reference: CRC over the little-endian piece CRCs.
        std::vector<uint8_t> crcs;
        for (size_t off = 0; off < len; off += P) {
            const uint32_t c = zb::crc32c(d.data() + off, std::min(P, len - off));
            for (int i = 0; i < 4; ++i) crcs.push_back((uint8_t)(c >> (8 * i)));
        }
        const uint32_t ref = zb::crc32c(crcs.data(), crcs.size());
        for (int threads : {1, 2, 3})
            EXPECT_EQ(zb::payload_checksum(d.data(), len, threads), ref) << len << " " << threads;
    }
}

TEST(Bitshuffle, MatchesBitByBitDefinition) {
    std::mt19937 rng(3);
    std::vector<uint16_t> codes(zb::kTileCodes);
    for (int trial = 0; trial < 4; ++trial) {
        for (auto &c : codes) c = (uint16_t)(trial == 0 ? (rng() & 0x3) : rng());
        std::vector<uint8_t> tile(zb::kTileBytes), ref(zb::kTileBytes, 0);
        zb::bitshuffle_tile(codes.data(), tile.data());
        for (int p = 0; p < 16; ++p)
            for (size_t j = 0; j < zb::kTileCodes; ++j)
                if ((codes[j] >> p) & 1) ref[p * 256 + j / 8] |= (uint8_t)(1u << (j % 8));
        ASSERT_EQ(tile, ref);
        std::vector<uint8_t> portable(zb::kTileBytes);   // the fallback of CPUs without SSE2: the same bytes
        zb::bitshuffle_tile_portable(codes.data(), portable.data());
        ASSERT_EQ(portable, ref);
        std::vector<uint16_t> back(zb::kTileCodes), back_portable(zb::kTileCodes);
        zb::bitunshuffle_tile(tile.data(), back.data());
        ASSERT_EQ(back, codes);
        zb::bitunshuffle_tile_portable(tile.data(), back_portable.data());
        ASSERT_EQ(back_portable, codes);
    }
}

TEST(Sparse, RoundTripAndReferenceLayout) {
    std::mt19937 rng(4);
    for (uint64_t bytes : {1ull, 15ull, 16ull, 17ull, 255ull, 4096ull, 10001ull}) {
        std::vector<uint8_t> d(bytes, 0);
        for (auto &b : d) b = (rng() % 7 == 0) ? (uint8_t)rng() : 0;
        std::vector<uint8_t> flags(zb::sparse_flag_bytes(bytes));
        std::string blocks;
        const uint64_t nnz = zb::sparse_encode(d.data(), bytes, flags.data(), blocks);
        // Reference: count blocks with a non-zero byte.
        uint64_t ref = 0;
        for (uint64_t b = 0; b * 16 < bytes; ++b) {
            bool any = false;
            for (uint64_t i = b * 16; i < std::min(bytes, b * 16 + 16); ++i) any |= d[i] != 0;
            ref += any;
            EXPECT_EQ(((flags[b / 8] >> (b % 8)) & 1) != 0, any);
        }
        EXPECT_EQ(nnz, ref);
        EXPECT_EQ(blocks.size(), nnz * 16);
        std::vector<uint8_t> back(bytes, 0xAA);
        ASSERT_TRUE(zb::sparse_decode(flags.data(), reinterpret_cast<const uint8_t *>(blocks.data()), nnz, bytes,
                                      back.data()));
        EXPECT_EQ(back, d);
        if (nnz) {
            EXPECT_FALSE(zb::sparse_decode(flags.data(), reinterpret_cast<const uint8_t *>(blocks.data()), nnz - 1,
                                           bytes, back.data()));
        }
        // Corruptions sparse_valid must catch: a stored block too many, a flag bit past the last block, non-zero
        // padding in a stored last block.
        std::string more = blocks + std::string(16, '\0');
        EXPECT_FALSE(zb::sparse_valid(flags.data(), reinterpret_cast<const uint8_t *>(more.data()), nnz + 1, bytes));
        const uint64_t nblocks = (bytes + 15) / 16;
        if (nblocks % 8) {
            auto f = flags;
            f.back() |= (uint8_t)(1u << 7);
            EXPECT_FALSE(zb::sparse_valid(f.data(), reinterpret_cast<const uint8_t *>(more.data()), nnz + 1, bytes));
        }
        const uint64_t last = nblocks - 1;
        if (bytes % 16 && ((flags[last / 8] >> (last % 8)) & 1)) {
            std::string padded = blocks;
            padded.back() = 1;
            EXPECT_FALSE(zb::sparse_valid(flags.data(), reinterpret_cast<const uint8_t *>(padded.data()), nnz, bytes));
        }
        EXPECT_TRUE(zb::sparse_valid(flags.data(), reinterpret_cast<const uint8_t *>(blocks.data()), nnz, bytes));
    }
}

// sparse_encode_parallel writes exactly sparse_encode's flags and blocks, whatever the thread count, appending to
// what the string holds.
TEST(Sparse, ParallelEncodeMatchesSerial) {
    std::mt19937 rng(5);
    for (uint64_t bytes : {1ull, 65536ull, 65537ull, 300000ull, 1000003ull}) {
        std::vector<uint8_t> d(bytes, 0);
        for (uint64_t i = 0; i < bytes; ++i) d[i] = (i / 4096) % 3 == 0 || rng() % 50 == 0 ? (uint8_t)rng() : 0;
        std::vector<uint8_t> want_flags(zb::sparse_flag_bytes(bytes));
        std::string want("head");
        const uint64_t want_nnz = zb::sparse_encode(d.data(), bytes, want_flags.data(), want);
        for (int nt : {1, 2, 3, 16}) {
            std::vector<uint8_t> flags(zb::sparse_flag_bytes(bytes), 0xEE);
            std::string blocks("head");
            EXPECT_EQ(zb::sparse_encode_parallel(d.data(), bytes, flags.data(), blocks, nt), want_nnz);
            EXPECT_EQ(flags, want_flags) << bytes << " bytes, " << nt << " threads";
            EXPECT_TRUE(blocks == want) << bytes << " bytes, " << nt << " threads";
        }
    }
}

TEST(Quantize, StrictBoundAndExceptions) {
    const zb::QuantParams qp = zb::make_quant_params(0.01, 1, zbt::bits(-9999.9f));
    int32_t q;
    EXPECT_TRUE(zb::quantize<float>(1.234f, qp, q));
    EXPECT_LE(std::fabs(1.234 - (double)zb::dequantize<float>(q, qp.twoeb)), 0.01);
    EXPECT_FALSE(zb::quantize<float>(NAN, qp, q));
    EXPECT_FALSE(zb::quantize<float>(INFINITY, qp, q));
    EXPECT_FALSE(zb::quantize<float>(-9999.9f, qp, q));   // the fill value
    EXPECT_FALSE(zb::quantize<float>(-0.0f, qp, q));      // -0.0 must come back exactly
    EXPECT_TRUE(zb::quantize<float>(0.0f, qp, q));
    EXPECT_FALSE(zb::quantize<float>(3e38f, qp, q));      // |x|/(2 eb) beyond 2^30
    EXPECT_FALSE(zb::quantize<double>(1.0, zb::make_quant_params(0.0, 0, 0), q));  // lossless
    // Where f32 rounding of the reconstruction breaks the bound, the value must be an exception: with eb tiny
    // relative to |x| the cast to float alone moves the value by more than eb.
    const zb::QuantParams tiny = zb::make_quant_params(1e-6, 0, 0);
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> u(100.f, 1000.f);
    for (int i = 0; i < 100000; ++i) {
        const float x = u(rng);
        if (zb::quantize<float>(x, tiny, q)) {
            ASSERT_LE(std::fabs((double)x - (double)zb::dequantize<float>(q, tiny.twoeb)), 1e-6);
        }
    }
}

TEST(Codes, SignMagnitude) {
    for (int32_t d : {0, 1, -1, 100, -100, 32767, -32767}) {
        const uint16_t c = zb::delta_to_code(d);
        EXPECT_NE(c, zb::kEscapeCode);
        EXPECT_EQ(zb::code_to_delta(c), d);
    }
    EXPECT_EQ(zb::delta_to_code(32768), zb::kEscapeCode);
    EXPECT_EQ(zb::delta_to_code(-32768), zb::kEscapeCode);
    EXPECT_EQ(zb::delta_to_code(INT32_MIN), zb::kEscapeCode);
    EXPECT_EQ(zb::delta_to_code(-5), 0x8005);
}

TEST(Shape, DropsUnitDimsAndFolds) {
    zb::Shape s;
    const size_t a[] = {1, 5, 1, 7};
    ASSERT_TRUE(zb::fold_shape(4, a, s));
    EXPECT_EQ(s.rank, 2);
    EXPECT_EQ(s.dims[0], 5u);
    EXPECT_EQ(s.dims[1], 7u);
    const size_t b[] = {2, 3, 4, 5, 6};
    ASSERT_TRUE(zb::fold_shape(5, b, s));
    EXPECT_EQ(s.rank, 3);
    EXPECT_EQ(s.dims[0], 24u);
    EXPECT_EQ(s.n, 720u);
    const size_t c[] = {1, 1};
    ASSERT_TRUE(zb::fold_shape(2, c, s));
    EXPECT_EQ(s.rank, 1);
    EXPECT_EQ(s.n, 1u);
    ASSERT_TRUE(zb::fold_shape(0, nullptr, s));
    EXPECT_EQ(s.n, 1u);
    const size_t z[] = {3, 0};
    EXPECT_FALSE(zb::fold_shape(2, z, s));
    const size_t big[] = {1ull << 40, 1ull << 40};
    EXPECT_FALSE(zb::fold_shape(2, big, s));
}

// value_range: min and max over the finite non-fill values, against a plain loop, for every length up to 70 and a
// few large ones (the vectorized main loop and its tail), f32 and f64, with and without a fill value, 1 and 2
// threads, arrays full of NaN, Inf, -0.0, +0.0, the fill value and ordinary numbers.
template <typename T> void check_value_range() {
    using U = typename zb::FloatBits<T>::U;
    const zb_dtype dtype = sizeof(T) == 8 ? ZB_F64 : ZB_F32;
    std::mt19937 rng(7);
    const T fill = (T)-999.25;
    U fill_bits;
    std::memcpy(&fill_bits, &fill, sizeof fill);
    const T pool[] = {std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity(),
                      -std::numeric_limits<T>::infinity(), (T)-0.0, (T)0.0, fill, std::numeric_limits<T>::max(),
                      std::numeric_limits<T>::lowest(), std::numeric_limits<T>::denorm_min()};
    std::vector<uint64_t> lengths;
    for (uint64_t n = 0; n <= 70; ++n) lengths.push_back(n);
    for (uint64_t n : {65535u, 65536u, 65537u, 200003u}) lengths.push_back(n);
    for (uint64_t n : lengths)
        for (int trial = 0; trial < 3; ++trial) {
            std::vector<T> x(n);
            for (auto &v : x)
                v = rng() % 3 == 0 ? pool[rng() % (sizeof pool / sizeof pool[0])] : (T)((double)(int32_t)rng() * 1e-3);
            for (int has_fill = 0; has_fill < 2; ++has_fill) {
                bool any = false;
                T lo = 0, hi = 0;
                for (T v : x) {
                    U b;
                    std::memcpy(&b, &v, sizeof v);
                    if (!std::isfinite(v) || (has_fill && b == fill_bits)) continue;
                    if (!any || v < lo) lo = v;
                    if (!any || v > hi) hi = v;
                    any = true;
                }
                for (int threads : {1, 2}) {
                    double vmin = 1, vmax = -1;
                    const bool got = zb::value_range(dtype, x.data(), n, has_fill, fill_bits, threads, vmin, vmax);
                    ASSERT_EQ(got, any) << "n " << n;
                    if (!any) continue;
                    // Compared by value: with both zeros present either zero is a correct minimum.
                    EXPECT_EQ(vmin, (double)lo) << "n " << n << " fill " << has_fill << " threads " << threads;
                    EXPECT_EQ(vmax, (double)hi) << "n " << n << " fill " << has_fill << " threads " << threads;
                }
            }
        }
}
TEST(ValueRange, MatchesPlainLoopF32) { check_value_range<float>(); }
TEST(ValueRange, MatchesPlainLoopF64) { check_value_range<double>(); }

// Exceptions: the edge mask (bit i = exc[i] != exc[i-1]) against its definition, and the round trip of mask and
// values, for lengths around multiples of 8 and masks from empty to full (runs, isolated points, the last value).
// One exception mask of density % and values with short runs (drawn from five) or long ones (a value held for tens
// to hundreds of values, as in a NaN or fill region, changing anywhere inside a group of eight): the edge mask and the
// run count against their definitions, and the round trip.
void check_exception_streams(uint64_t n, int density, bool long_runs, std::mt19937 &rng) {
    SCOPED_TRACE("n " + std::to_string(n) + " density " + std::to_string(density) + (long_runs ? " long runs" : ""));
    std::vector<uint8_t> exc(n);
    std::vector<float> x(n);
    float held = 0;
    for (uint64_t i = 0; i < n; ++i) {
        exc[i] = (uint8_t)((int)(rng() % 100) < density);
        if (long_runs && rng() % 97 == 0) held = (float)(rng() % 5);
        x[i] = long_runs ? held : (float)(rng() % 5);   // repeated values: runs of equal exceptions
    }
    if (n > 2 && density == 1) exc[n - 1] = 1;   // an exception in the last (possibly partial) byte
    zb::ExceptionStreams<float> ex;
    zb::encode_exceptions(x.data(), exc.data(), n, ex, 2);
    uint64_t count = 0, runs = 0;
    int64_t last = -1;
    for (uint64_t i = 0; i < n; ++i) {
        if (!exc[i]) continue;
        ++count;
        runs += last < 0 || zbt::bits(x[i]) != zbt::bits(x[(size_t)last]);
        last = (int64_t)i;
    }
    ASSERT_EQ(ex.count, count);
    ASSERT_EQ(ex.run_values.size(), runs);
    const uint64_t mask_bytes = (n + 7) / 8;
    std::vector<uint8_t> edge(mask_bytes);
    ASSERT_TRUE(zb::sparse_decode(ex.edge_flags.data(), reinterpret_cast<const uint8_t *>(ex.edge_blocks.data()),
                                  ex.edge_nonzero_blocks(), mask_bytes, edge.data()));
    for (uint64_t i = 0; i < n; ++i) {
        const bool expected = exc[i] != (i ? exc[i - 1] : 0);
        ASSERT_EQ(((edge[i / 8] >> (i % 8)) & 1) != 0, expected) << "i " << i;
    }
    for (uint64_t i = n; i < mask_bytes * 8; ++i) ASSERT_EQ((edge[i / 8] >> (i % 8)) & 1, 0) << "padding";
    zb::ByteSpan seg[zb::kExceptionSegmentCount];
    for (int i = 0; i < zb::kExceptionSegmentCount; ++i)
        seg[i] = {static_cast<const uint8_t *>(ex.segment_data(i)), ex.segment_length(i)};
    for (int nt : {1, 3}) {   // the decoder's parts (kExceptionPartBlocks) serially and taken in turn
        SCOPED_TRACE("decoder threads " + std::to_string(nt));
        std::vector<float> out(n, -1.0f);
        std::vector<uint8_t> mask(n, 0);
        std::string msg;
        ASSERT_TRUE(zb::decode_exceptions(seg, n, ex.count, ex.run_values.size(), out.data(), mask.data(), msg, nt))
            << msg;
        for (uint64_t i = 0; i < n; ++i) {
            ASSERT_EQ(mask[i], exc[i]) << "i " << i;
            if (exc[i]) {
                ASSERT_EQ(zbt::bits(out[i]), zbt::bits(x[i])) << "i " << i;
            } else {
                ASSERT_EQ(out[i], -1.0f) << "i " << i << " is no exception";
            }
        }
    }
}

// Sizes across bytes, blocks and the 64K-value chunks of the encoder's parallel passes.
TEST(Exceptions, EdgeMaskAndRoundTrip) {
    std::mt19937 rng(11);
    // 600001: three parts of the decoder (kExceptionPartBlocks mask blocks each), runs across their borders.
    static_assert(2 * zb::kExceptionPartBlocks * zb::kBlockBytes * 8 < 600001, "600001 values span three parts");
    for (uint64_t n : {1u, 7u, 8u, 9u, 15u, 16u, 17u, 63u, 64u, 65u, 1000u, 4099u, 140001u, 600001u})
        for (int density : {0, 1, 10, 50, 90, 100})
            for (bool long_runs : {false, true}) check_exception_streams(n, density, long_runs, rng);
}

// The Lorenzo inverse with dequantization against the N-D prefix sum by its definition (plain loops, mod 2^32), bit
// for bit, for every SIMD level and thread counts that divide the slowest dim or not: shapes of ranks 1-3 whose
// layers hold a band per thread and ones that take slabs (zb_lorenzo_grid.h: from one slab to four per thread, of one
// layer and of several; odd sizes), and rank 1 (its own slabs).
TEST(LorenzoInverse, MatchesPrefixSumDefinition) {
    const std::vector<std::vector<uint64_t>> shapes{{1},     {7},           {100003},     {1, 9},      {5, 1},
                                                    {3, 5},  {67, 131},     {4, 300000},  {1, 1, 1},   {3, 5, 7},
                                                    {67, 9, 13}, {200, 3, 1}, {2, 600, 500}, {70, 1, 33},
                                                    // layers too small for a band per thread at 16 threads
                                                    {40, 8, 300}, {9, 3000},
                                                    // few rows of huge rows: slabs at 5 threads, 4 bands at 16
                                                    {3, 4, 300000}};
    const zb::SimdLevel saved = zb::simd_level();
    std::mt19937 rng(7);
    for (const auto &dims : shapes) {
        zb::Shape s;
        s.rank = (int)dims.size();
        s.n = 1;
        for (int i = 0; i < s.rank; ++i) s.n *= s.dims[i] = dims[(size_t)i];
        const uint64_t nx = s.nx(), ny = s.ny(), nz = s.nz();
        std::vector<uint32_t> d(s.n);
        for (auto &v : d) v = (uint32_t)rng();   // any bits: the sums wrap around
        std::vector<uint32_t> ref = d;
        for (uint64_t z = 0; z < nz; ++z)
            for (uint64_t y = 0; y < ny; ++y)
                for (uint64_t x = 0; x < nx; ++x) {
                    const uint64_t i = (z * ny + y) * nx + x;
                    if (x > 0) ref[i] += ref[i - 1];
                }
        for (uint64_t i = nx; i < s.n; ++i)
            if (i / nx % ny != 0) ref[i] += ref[i - nx];
        for (uint64_t i = nx * ny; i < s.n; ++i) ref[i] += ref[i - nx * ny];
        for (int l = zb::kSimdBase; l <= zb::simd_level_supported(); ++l) {
            zb::set_simd_level((zb::SimdLevel)l);
            for (int nt : {1, 2, 3, 5, 16}) {
                std::vector<uint32_t> q = d;
                std::vector<float> out(s.n);
                zb::lorenzo_inverse_dequantize(q.data(), s, nt, 0.5, out.data());
                uint64_t differ = 0;
                for (uint64_t i = 0; i < s.n; ++i) differ += out[i] != (float)((double)(int32_t)ref[i] * 0.5);
                EXPECT_EQ(differ, 0u) << "rank " << s.rank << " n " << s.n << " threads " << nt << " level "
                                      << zb::simd_level_name((zb::SimdLevel)l);
            }
        }
    }
    zb::set_simd_level(saved);
}

// Outputs of kStreamingBytes or more are written through a buffer with non-temporal stores: the same values, on the
// band path (1, 3 threads) and the slab path (16 threads: a layer of 16 rows has too few bands), float and double,
// and in rank 1.
// Values of lorenzo_inverse_dequantize(d) on nt threads that differ from dequantize(ref) (eb 0.25).
template <typename T>
uint64_t inverse_differences(const std::vector<uint32_t> &d, const zb::Shape &s, int nt,
                             const std::vector<uint32_t> &ref) {
    std::vector<uint32_t> q = d;
    std::vector<T> out(s.n);
    zb::lorenzo_inverse_dequantize(q.data(), s, nt, 0.5, out.data());
    uint64_t differ = 0;
    for (uint64_t i = 0; i < s.n; ++i) differ += out[i] != (T)((double)(int32_t)ref[i] * 0.5);
    return differ;
}

TEST(LorenzoInverse, StreamedLargeOutputMatchesDefinition) {
    zb::Shape s;
    s.rank = 3;
    s.dims[0] = 1100, s.dims[1] = 16, s.dims[2] = 1000;
    s.n = s.dims[0] * s.dims[1] * s.dims[2];
    ASSERT_GE(s.n * sizeof(float), zb::kStreamingBytes);
    const uint64_t nx = s.nx(), layer = s.nx() * s.ny();
    std::mt19937 rng(8);
    std::vector<uint32_t> d(s.n);
    for (auto &v : d) v = (uint32_t)(rng() % 7) - 3u;
    std::vector<uint32_t> ref = d;
    for (uint64_t i = 1; i < s.n; ++i)
        if (i % nx) ref[i] += ref[i - 1];
    for (uint64_t i = nx; i < s.n; ++i)
        if (i / nx % s.ny()) ref[i] += ref[i - nx];
    for (uint64_t i = layer; i < s.n; ++i) ref[i] += ref[i - layer];
    for (int nt : {1, 3, 16}) EXPECT_EQ(inverse_differences<float>(d, s, nt, ref), 0u) << "float, threads " << nt;
    EXPECT_EQ(inverse_differences<double>(d, s, 16, ref), 0u) << "double";
    // Rank 1: one row, in slabs of the row.
    zb::Shape row;
    row.rank = 1;
    row.n = row.dims[0] = s.n;
    std::vector<uint32_t> ref1 = d;
    for (uint64_t i = 1; i < s.n; ++i) ref1[i] += ref1[i - 1];
    for (int nt : {1, 3}) EXPECT_EQ(inverse_differences<float>(d, row, nt, ref1), 0u) << "rank 1, threads " << nt;
}

// The staging copies (parallel_copy): every byte lands where it belongs, and the bytes around the destination stay
// untouched, for lengths that are and are not whole pages or parts, destinations off any alignment (the streaming
// form's unaligned head and short tail), teams larger than the parts (short copies), normal and non-temporal stores.
TEST(ParallelCopy, EveryByteForAnyLengthTeamAndStoreKind) {
    const size_t lengths[] = {0, 1, 15, 17, 4095, (size_t(256) << 10) + 3, (size_t(1) << 20) + 77, (size_t(3) << 20) - 5};
    std::vector<uint8_t> src((size_t(3) << 20) + 64);
    for (size_t i = 0; i < src.size(); ++i) src[i] = (uint8_t)(i * 2654435761u >> 13);
    for (size_t len : lengths)
        for (size_t shift : {0, 1, 7})   // source and destination `shift` bytes off 16-byte alignment
            for (int team : {1, 3, 8})
                for (bool streaming : {false, true}) {
                    std::vector<uint8_t> dst(len + 64, 0xA5);
                    const size_t at = 16 + shift;
                    zb::parallel_copy(dst.data() + at, src.data() + shift, len, team, streaming);
                    size_t bad = 0;
                    for (size_t i = 0; i < dst.size(); ++i) {
                        const bool inside = i >= at && i < at + len;
                        bad += dst[i] != (inside ? src[shift + i - at] : (uint8_t)0xA5);
                    }
                    EXPECT_EQ(bad, 0u) << "length " << len << ", shift " << shift << ", team " << team
                                       << ", streaming " << streaming;
                }
}

}  // namespace
