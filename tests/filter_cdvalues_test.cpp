// cd_values encode/decode of the filter (HDF5-free, filter/zbound_cd_values.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "zbound_cd_internal.h"
#include "zbound_filter.h"

namespace {

uint64_t bits(double v) {
    uint64_t u;
    std::memcpy(&u, &v, 8);
    return u;
}

std::string last_error() { return zb_last_error() ? zb_last_error() : ""; }

// zb_last_error() carries the filter's messages only when core exports zb_set_last_error; otherwise the status
// is still right and the message check is skipped (reported in the test output).
void expect_message(const char *needle) {
    const std::string e = last_error();
    if (e.empty()) {
        std::printf("note: zb_last_error() is empty (core does not export zb_set_last_error yet)\n");
        return;
    }
    EXPECT_NE(e.find(needle), std::string::npos) << e;
}

TEST(CdValues, EncodeWritesTheDocumentedLayout) {
    zb_params p = zb_params_default();
    p.mode = ZB_MODE_ABS;
    p.bound = 1e-3;
    p.predictor = ZB_PRED_LORENZO;
    p.encoder = ZB_ENC_FAST;
    unsigned cd[ZBOUND_CD_MAX_WORDS] = {0};
    ASSERT_EQ(zbound_cd_values_encode(&p, cd), (size_t)ZBOUND_CD_USER_WORDS);
    // The example in zbound_filter.h.
    const unsigned expect[6] = {1, 0, 0x3F50624Du, 0xD2F1A9FCu, 1, 1};
    for (int i = 0; i < 6; ++i) EXPECT_EQ(cd[i], expect[i]) << i;
}

TEST(CdValues, RoundTripsEveryField) {
    for (int mode = 0; mode <= 2; ++mode)
        for (int pred = 0; pred <= 2; ++pred)
            for (int enc = 0; enc <= 2; ++enc)
                for (double b : {0.0, 1e-7, 0.25, 3.0, 1e30, std::numeric_limits<double>::denorm_min()}) {
                    zb_params p = zb_params_default();
                    p.mode = (zb_mode)mode;
                    p.bound = b;
                    p.predictor = (zb_predictor)pred;
                    p.encoder = (zb_encoder)enc;
                    unsigned cd[ZBOUND_CD_MAX_WORDS];
                    ASSERT_EQ(zbound_cd_values_encode(&p, cd), 6u);
                    zb_params q;
                    ASSERT_EQ(zbound_cd_values_decode(cd, 6, &q), ZB_OK) << last_error();
                    EXPECT_EQ(q.mode, p.mode);
                    EXPECT_EQ(bits(q.bound), bits(p.bound));
                    EXPECT_EQ(q.predictor, p.predictor);
                    EXPECT_EQ(q.encoder, p.encoder);
                    EXPECT_EQ(q.has_fill, 0);
                }
}

TEST(CdValues, ShortFormsTakeDefaults) {
    const zb_params def = zb_params_default();
    const unsigned full[6] = {1, 0, 0x3F847AE1u, 0x47AE147Bu, 1, 1};   // abs 0.01
    for (size_t n : {0u, 1u, 2u, 4u, 5u, 6u}) {
        zb_params p;
        ASSERT_EQ(zbound_cd_values_decode(n ? full : nullptr, n, &p), ZB_OK) << n << ": " << last_error();
        EXPECT_EQ(p.mode, n >= 2 ? ZB_MODE_ABS : def.mode) << n;
        EXPECT_EQ(p.bound, n >= 4 ? 0.01 : def.bound) << n;
        EXPECT_EQ(p.predictor, n >= 5 ? ZB_PRED_LORENZO : def.predictor) << n;
        EXPECT_EQ(p.encoder, n >= 6 ? ZB_ENC_FAST : def.encoder) << n;
        EXPECT_EQ(p.backend, def.backend);
        EXPECT_EQ(p.threads, def.threads);
    }
}

TEST(CdValues, BadWordsAreNamed) {
    struct Case {
        std::vector<unsigned> cd;
        const char *needle;
    };
    const uint64_t neg = bits(-1.0), nan = bits(std::numeric_limits<double>::quiet_NaN()),
                   inf = bits(std::numeric_limits<double>::infinity());
    const std::vector<Case> cases = {
        {{0}, "cd_values[0] = 0"},
        {{2, 0}, "cd_values[0] = 2"},
        {{1, 3}, "cd_values[1] = 3"},
        {{1, 0, 5}, "3 words"},
        {{1, 0, (unsigned)(neg >> 32), (unsigned)neg}, "not finite"},
        {{1, 0, (unsigned)(nan >> 32), (unsigned)nan}, "not finite"},
        {{1, 1, (unsigned)(inf >> 32), (unsigned)inf}, "not finite"},
        {{1, 0, 0, 0, 3}, "cd_values[4] = 3"},
        {{1, 0, 0, 0, 0, 7}, "cd_values[5] = 7"},
        {std::vector<unsigned>(ZBOUND_CD_MAX_WORDS + 1, 1u), "at most"},
    };
    for (const Case &c : cases) {
        zb_params p;
        EXPECT_EQ(zbound_cd_values_decode(c.cd.data(), c.cd.size(), &p), ZB_ERR_INVALID_ARG) << c.needle;
        expect_message(c.needle);
    }
    EXPECT_EQ(zbound_cd_values_decode(nullptr, 0, nullptr), ZB_ERR_INVALID_ARG);
}

TEST(CdValues, EncodeRefusesBadParams) {
    unsigned cd[ZBOUND_CD_MAX_WORDS];
    zb_params p = zb_params_default();
    EXPECT_EQ(zbound_cd_values_encode(nullptr, cd), 0u);
    EXPECT_EQ(zbound_cd_values_encode(&p, nullptr), 0u);
    p.bound = -2;
    EXPECT_EQ(zbound_cd_values_encode(&p, cd), 0u);
    expect_message("not finite");
    p = zb_params_default();
    p.mode = (zb_mode)9;
    EXPECT_EQ(zbound_cd_values_encode(&p, cd), 0u);
    p = zb_params_default();
    p.encoder = (zb_encoder)5;
    EXPECT_EQ(zbound_cd_values_encode(&p, cd), 0u);
}

TEST(CdValues, FullFormCarriesTheFillValue) {
    zb_params p = zb_params_default();
    unsigned cd[ZBOUND_CD_MAX_WORDS] = {0};
    ASSERT_EQ(zbound_cd_values_encode(&p, cd), 6u);
    zbound_cd::DatasetWords d;
    d.applicable = true;
    d.dtype = ZB_F64;
    d.big_endian = true;
    d.has_fill = true;
    d.fill_bits = bits(-9999.9);
    d.dims[0] = 3;
    d.dims[1] = 4;
    d.dims[2] = 5;
    zbound_cd::encode_dataset(d, cd);
    EXPECT_EQ(cd[6], 2u | 0x100u);
    zb_params q;
    ASSERT_EQ(zbound_cd_values_decode(cd, ZBOUND_CD_MAX_WORDS, &q), ZB_OK) << last_error();
    EXPECT_EQ(q.has_fill, 1);
    EXPECT_EQ(q.fill_bits, bits(-9999.9));
    zbound_cd::DatasetWords e;
    std::string why;
    ASSERT_TRUE(zbound_cd::decode_dataset(cd, ZBOUND_CD_MAX_WORDS, e, why)) << why;
    EXPECT_TRUE(e.applicable);
    EXPECT_EQ(e.dtype, ZB_F64);
    EXPECT_TRUE(e.big_endian);
    EXPECT_EQ(e.values(), 60u);
    // Partial dataset words (7..12 words) are not a full form: only the user part is read.
    ASSERT_EQ(zbound_cd_values_decode(cd, 9, &q), ZB_OK);
    EXPECT_EQ(q.has_fill, 0);
    EXPECT_FALSE(zbound_cd::decode_dataset(cd, 9, e, why));
    // Corrupt dataset words.
    unsigned bad[ZBOUND_CD_MAX_WORDS];
    std::memcpy(bad, cd, sizeof bad);
    bad[6] = 7;
    EXPECT_EQ(zbound_cd_values_decode(bad, ZBOUND_CD_MAX_WORDS, &q), ZB_ERR_INVALID_ARG);
    std::memcpy(bad, cd, sizeof bad);
    bad[11] = 0;
    EXPECT_EQ(zbound_cd_values_decode(bad, ZBOUND_CD_MAX_WORDS, &q), ZB_ERR_INVALID_ARG);
}

TEST(CdValues, FoldChunkMatchesTheCodec) {
    struct Case {
        std::vector<uint64_t> in;
        uint64_t out[3];
    };
    const std::vector<Case> cases = {
        {{}, {1, 1, 1}},
        {{1}, {1, 1, 1}},
        {{7}, {1, 1, 7}},
        {{1, 7, 1}, {1, 1, 7}},
        {{4, 5}, {1, 4, 5}},
        {{2, 3, 4}, {2, 3, 4}},
        {{2, 3, 4, 5}, {6, 4, 5}},
        {{2, 1, 3, 1, 4, 5, 1}, {6, 4, 5}},
        {{2, 2, 2, 2, 2}, {8, 2, 2}},
    };
    for (const Case &c : cases) {
        uint64_t out[3];
        std::string why;
        ASSERT_TRUE(zbound_cd::fold_chunk((int)c.in.size(), c.in.data(), out, why)) << why;
        for (int i = 0; i < 3; ++i) EXPECT_EQ(out[i], c.out[i]) << "case of rank " << c.in.size();
    }
    uint64_t out[3];
    std::string why;
    const uint64_t zero[2] = {3, 0};
    EXPECT_FALSE(zbound_cd::fold_chunk(2, zero, out, why));
    const uint64_t huge[4] = {1u << 20, 1u << 20, 2, 2};
    EXPECT_FALSE(zbound_cd::fold_chunk(4, huge, out, why));
}

}  // namespace
